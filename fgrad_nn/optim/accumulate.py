"""Gradient accumulation (Optax's MultiSteps): average the gradients of k calls,
then take one step of the inner optimizer; k may follow a schedule."""
import operator
from typing import NamedTuple

import fgrad
import fgrad.numpy as fnp

from fgrad_nn._checks import flag

from ._trees import map_checked
from .base import GradientTransformation, increment, value_at, zero_count


class AccumulateGradientsState(NamedTuple):
    """mini_step: calls since the last real step; gradient_step: real steps taken
    (what an every_k schedule reads); grad_sum: the gradients summed over the
    current window; inner_state: the inner optimizer's state."""
    mini_step: object
    gradient_step: object
    grad_sum: object
    inner_state: object


def _check_every_k(every_k):
    if callable(every_k):
        return every_k
    try:
        every_k = operator.index(every_k)
    except TypeError:
        raise TypeError(f"accumulate_gradients: every_k must be a Python int or a schedule "
                        f"(a function of the step count), got {type(every_k).__name__}") from None
    if every_k < 1:
        raise ValueError(f"accumulate_gradients: every_k must be >= 1, got {every_k}")
    return every_k


def accumulate_gradients(inner, every_k, *, use_grad_mean=True):
    """Wrap `inner` so that it steps once every `every_k` calls, on the mean of the
    gradients of those calls (their sum with use_grad_mean=False); the other calls
    return zero updates (Optax's MultiSteps).

    every_k may be a schedule of the number of real steps taken so far (e.g. grow
    the effective batch during training); it is read at the start of each window
    (and again on each call, so it should stay constant within one).
    Runs without Python control flow on the step (so it jits): the inner update is
    evaluated on every call and its result selected with `where`.
    """
    every_k = _check_every_k(every_k)
    mean = flag("accumulate_gradients", "use_grad_mean", use_grad_mean)

    def init(params):
        return AccumulateGradientsState(zero_count(), zero_count(),
                                        fgrad.tree.map(fnp.zeros_like, params),
                                        inner.init(params))

    def update(updates, state, params=None):
        grad_sum = map_checked("accumulate_gradients", lambda g, s: s + g.astype(s.dtype),
                               updates, state.grad_sum, names=("state.grad_sum",))
        mini_step = state.mini_step + 1
        k = value_at(every_k, state.gradient_step)
        ready = mini_step >= k
        if mean:
            window = fgrad.tree.map(lambda s: s / fnp.astype(mini_step, fnp.result_type(s)),
                                    grad_sum)
        else:
            window = grad_sum
        stepped, inner_state = inner.update(window, state.inner_state, params)
        out = fgrad.tree.map(lambda u: fnp.where(ready, u, fnp.zeros_like(u)), stepped)
        inner_state = fgrad.tree.map(lambda new, old: fnp.where(ready, new, old),
                                     inner_state, state.inner_state)
        grad_sum = fgrad.tree.map(lambda s: fnp.where(ready, fnp.zeros_like(s), s), grad_sum)
        gradient_step = fnp.where(ready, increment(state.gradient_step), state.gradient_step)
        mini_step = fnp.where(ready, 0, mini_step)
        return out, AccumulateGradientsState(mini_step, gradient_step, grad_sum, inner_state)

    return GradientTransformation(init, update)
