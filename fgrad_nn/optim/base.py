"""The optimizer contract (Optax's): a GradientTransformation is a pair of pure
functions, `init(params) -> state` and `update(updates, state, params=None) ->
(updates, state)`. States are NamedTuples of arrays, so updates jit; `chain`
composes transformations; `apply_updates` adds the (already negated) updates."""
from typing import Callable, NamedTuple

import fgrad
import fgrad.numpy as fnp

from ._trees import check_same_tree

_INT32_MAX = 2**31 - 1


class GradientTransformation(NamedTuple):
    """init(params) -> state; update(updates, state, params=None) -> (updates, state)."""
    init: Callable
    update: Callable


class EmptyState(NamedTuple):
    """The state of a transformation that keeps none."""


def zero_count():
    """A fresh int32 step counter."""
    return fnp.zeros((), fnp.int32)


def increment(count):
    """count + 1, saturating at the int32 maximum instead of wrapping around."""
    return fnp.where(count < _INT32_MAX, count + 1, count)


def value_at(hyperparameter, count):
    """A hyper-parameter's value at step `count`: a schedule is called, a number kept."""
    return hyperparameter(count) if callable(hyperparameter) else hyperparameter


def require_params(where, params):
    """Raise a clear error when a transformation that reads params got none."""
    if params is None:
        raise ValueError(f"{where} needs the parameters: call "
                         f"update(grads, state, params) instead of update(grads, state)")


def identity():
    """Pass updates through unchanged."""
    def init(params):
        del params
        return EmptyState()

    def update(updates, state, params=None):
        del params
        return updates, state

    return GradientTransformation(init, update)


def chain(*transforms):
    """Apply `transforms` one after the other; the state is the tuple of their states."""
    for i, t in enumerate(transforms):
        if not (isinstance(t, tuple) and len(t) == 2 and all(callable(f) for f in t)):
            raise TypeError(f"chain: argument {i} is {type(t).__name__}, not a "
                            f"GradientTransformation (an (init, update) pair); "
                            f"did you pass an alias without calling it, e.g. adam "
                            f"instead of adam(1e-3)?")

    def init(params):
        return tuple(t.init(params) for t in transforms)

    def update(updates, state, params=None):
        if not isinstance(state, tuple) or len(state) != len(transforms):
            raise ValueError(f"chain.update: expected the state returned by this chain's init "
                             f"(a tuple of {len(transforms)} states), got "
                             f"{type(state).__name__}"
                             f"{f' of length {len(state)}' if isinstance(state, tuple) else ''}; "
                             f"was the state made by another optimizer's init?")
        new_states = []
        for t, s in zip(transforms, state):
            updates, s = t.update(updates, s, params)
            new_states.append(s)
        return updates, tuple(new_states)

    return GradientTransformation(init, update)


def apply_updates(params, updates):
    """params + updates, leaf by leaf, each result cast back to its parameter's dtype."""
    check_same_tree("apply_updates", [("params", params), ("updates", updates)],
                    "Hint: pass the updates returned by the optimizer's update for these params.")
    return fgrad.tree.map(lambda p, u: fnp.astype(p + u, fnp.result_type(p)), params, updates)
