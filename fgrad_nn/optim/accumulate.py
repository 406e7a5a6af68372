"""Gradient accumulation (Optax's MultiSteps): average the gradients of k calls,
then take one step of the inner optimizer."""
import operator
from typing import NamedTuple

import fgrad
import fgrad.numpy as fnp

from ._trees import map_checked
from .base import GradientTransformation, zero_count


class AccumulateGradientsState(NamedTuple):
    """mini_step: calls since the last real step (0 … every_k - 1); grad_sum: the
    gradients summed over them; inner_state: the inner optimizer's state."""
    mini_step: object
    grad_sum: object
    inner_state: object


def accumulate_gradients(inner, every_k):
    """Wrap `inner` so that it steps once every `every_k` calls, on the mean of the
    gradients of those calls; the other calls return zero updates.

    Runs without Python control flow on the step (so it jits): the inner update is
    evaluated on every call and its result selected with `where`.
    """
    try:
        every_k = operator.index(every_k)
    except TypeError:
        raise TypeError(f"accumulate_gradients: every_k must be a Python int, "
                        f"got {type(every_k).__name__}") from None
    if every_k < 1:
        raise ValueError(f"accumulate_gradients: every_k must be >= 1, got {every_k}")

    def init(params):
        return AccumulateGradientsState(zero_count(), fgrad.tree.map(fnp.zeros_like, params),
                                        inner.init(params))

    def update(updates, state, params=None):
        grad_sum = map_checked("accumulate_gradients", lambda g, s: s + g.astype(s.dtype),
                               updates, state.grad_sum, names=("state.grad_sum",))
        mini_step = state.mini_step + 1
        ready = mini_step == every_k
        mean = fgrad.tree.map(lambda s: s / every_k, grad_sum)
        stepped, inner_state = inner.update(mean, state.inner_state, params)
        out = fgrad.tree.map(lambda u: fnp.where(ready, u, fnp.zeros_like(u)), stepped)
        inner_state = fgrad.tree.map(lambda new, old: fnp.where(ready, new, old),
                                     inner_state, state.inner_state)
        grad_sum = fgrad.tree.map(lambda s: fnp.where(ready, fnp.zeros_like(s), s), grad_sum)
        mini_step = fnp.where(ready, 0, mini_step)
        return out, AccumulateGradientsState(mini_step, grad_sum, inner_state)

    return GradientTransformation(init, update)
