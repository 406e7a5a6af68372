"""Stateless-ish building blocks: scaling (by a constant, a schedule or the
learning rate), weight decay (L2 and L1), clipping, and momentum (`trace`)."""
from typing import NamedTuple

import fgrad
import fgrad.numpy as fnp
from fgrad_nn._checks import flag

from ._trees import float_dtype, hyper, map_checked, sum_of_squares
from .base import (EmptyState, GradientTransformation, increment, require_params, value_at,
                   zero_count)
from .hyperparams import InjectHyperparamsState, schedulable
from .masking import masked


def _stateless(fn):
    """A transformation from fn(updates, params) -> updates."""
    def init(params):
        del params
        return EmptyState()

    def update(updates, state, params=None):
        return fn(updates, params), state

    return GradientTransformation(init, update)


@schedulable()
def scale(step_size):
    """Multiply updates by `step_size`."""
    return _stateless(lambda u, p: fgrad.tree.map(lambda g: g * hyper(step_size, g), u))


class ScaleByScheduleState(NamedTuple):
    count: object


def scale_by_schedule(step_size_fn):
    """Multiply updates by `step_size_fn(count)`, count being the updates done so far."""
    def init(params):
        del params
        return ScaleByScheduleState(zero_count())

    def update(updates, state, params=None):
        del params
        s = step_size_fn(state.count)
        return (fgrad.tree.map(lambda g: g * hyper(s, g), updates),
                ScaleByScheduleState(increment(state.count)))

    return GradientTransformation(init, update)


class ScaleByLearningRateState(NamedTuple):
    """count: updates done; learning_rate: the value used by the latest update
    (after init: the value the first update will use)."""
    count: object
    learning_rate: object


def scale_by_learning_rate(learning_rate, *, flip_sign=True):
    """Multiply updates by -learning_rate (a number or a schedule of the step count).

    The state records the learning rate in use, so `current_learning_rate(state)`
    works for every optimizer built with it.
    """
    sign = -1 if flag("scale_by_learning_rate", "flip_sign", flip_sign) else 1

    def init(params):
        count = zero_count()
        lr = fnp.astype(fnp.asarray(value_at(learning_rate, count)), float_dtype(params))
        return ScaleByLearningRateState(count, lr)

    def update(updates, state, params=None):
        del params
        lr = value_at(learning_rate, state.count)
        new = fgrad.tree.map(lambda g: g * (sign * hyper(lr, g)), updates)
        stored = fnp.astype(fnp.asarray(lr), fnp.result_type(state.learning_rate))
        return new, ScaleByLearningRateState(increment(state.count), stored)

    return GradientTransformation(init, update)


def current_learning_rate(state):
    """The learning rate an optimizer state records (see ScaleByLearningRateState and
    inject_hyperparams); the outermost record wins. Raises if there is none."""
    found = []

    def visit(node):
        if found:
            return
        if isinstance(node, InjectHyperparamsState) and "learning_rate" in node.hyperparams:
            found.append(node.hyperparams["learning_rate"])
        elif isinstance(node, ScaleByLearningRateState):
            found.append(node.learning_rate)
        elif isinstance(node, tuple):
            for child in node:
                visit(child)
        elif isinstance(node, dict):
            for child in node.values():
                visit(child)

    visit(state)
    if not found:
        raise ValueError("current_learning_rate: this optimizer state records no learning "
                         "rate (no scale_by_learning_rate or inject_hyperparams in it); "
                         "wrap the optimizer with inject_hyperparams to track one")
    return found[0]


@schedulable()
def add_decayed_weights(weight_decay=0.0, mask=None):
    """updates + weight_decay * params (L2 decay); `mask` selects the decayed leaves."""
    def add(updates, params):
        require_params("add_decayed_weights", params)
        return map_checked("add_decayed_weights", lambda g, p: g + hyper(weight_decay, g) * p,
                           updates, params, names=("params",))

    t = _stateless(add)
    return t if mask is None else masked(t, mask)


@schedulable()
def add_l1_decay(weight_decay=0.0, mask=None):
    """updates + weight_decay * sign(params) (L1 decay); `mask` selects the decayed leaves."""
    def add(updates, params):
        require_params("add_l1_decay", params)
        return map_checked("add_l1_decay",
                           lambda g, p: g + hyper(weight_decay, g) * fnp.sign(p).astype(g.dtype),
                           updates, params, names=("params",))

    t = _stateless(add)
    return t if mask is None else masked(t, mask)


@schedulable()
def clip(max_delta):
    """Clip every update element to [-max_delta, max_delta]."""
    def fn(updates, params):
        return fgrad.tree.map(
            lambda g: fnp.clip(g, -hyper(max_delta, g), hyper(max_delta, g)), updates)

    return _stateless(fn)


def global_norm(tree):
    """The 2-norm of all leaves of `tree` taken together."""
    leaves = fgrad.tree.leaves(tree)
    if not leaves:
        return fnp.zeros((), fnp.float32)
    return fnp.sqrt(sum(sum_of_squares(x) for x in leaves))


@schedulable()
def clip_by_global_norm(max_norm):
    """Rescale all updates together so that their global norm is at most max_norm."""
    def fn(updates, params):
        norm = global_norm(updates)
        factor = max_norm / fnp.maximum(norm, max_norm)
        return fgrad.tree.map(lambda g: g * hyper(factor, g), updates)

    return _stateless(fn)


class TraceState(NamedTuple):
    trace: object


class DampenedTraceState(NamedTuple):
    count: object
    trace: object


@schedulable(static_args=("mask", "dampening", "accumulator_dtype"))
def trace(decay, nesterov=False, dampening=0.0, *, accumulator_dtype=None):
    """Momentum, PyTorch's convention: t = g + decay * t; outputs t, or with
    nesterov g + decay * t (the new t). With dampening d (PyTorch's SGD), the
    first step sets t = g and later ones t = decay * t + (1 - d) * g; PyTorch
    refuses nesterov with dampening, and so does this. accumulator_dtype: t's
    storage dtype (computed at the gradients' precision, rounded when stored)."""
    nesterov = flag("trace", "nesterov", nesterov)
    acc_dtype = None if accumulator_dtype is None else fnp.dtype(accumulator_dtype)
    dampened = not (isinstance(dampening, (int, float)) and dampening == 0)
    if nesterov and dampened:
        raise ValueError("trace: nesterov momentum needs dampening=0 (as PyTorch's SGD)")

    def init(params):
        zeros = fgrad.tree.map(
            lambda p: fnp.zeros(fnp.shape(p), acc_dtype or fnp.result_type(p)), params)
        return DampenedTraceState(zero_count(), zeros) if dampened else TraceState(zeros)

    def leaf(g, t, first):
        d = hyper(decay, g)
        if not dampened:
            return g + d * t
        return fnp.where(first, g, d * t + (1 - hyper(dampening, g)) * g)

    def update(updates, state, params=None):
        del params
        first = state.count == 0 if dampened else None
        new_trace = map_checked(
            "trace", lambda g, t: leaf(g, t.astype(fnp.result_type(t, g)), first),
            updates, state.trace, names=("state.trace",))
        if nesterov:
            out = fgrad.tree.map(lambda g, t: g + hyper(decay, g) * t, updates, new_trace)
        else:
            out = new_trace
        if acc_dtype is not None:
            new_trace = fgrad.tree.map(lambda t: t.astype(acc_dtype), new_trace)
        if dampened:
            return out, DampenedTraceState(increment(state.count), new_trace)
        return out, TraceState(new_trace)

    return GradientTransformation(init, update)
