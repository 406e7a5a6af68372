"""Hyper-parameters in the state: `inject_hyperparams` turns a transformation's
numeric hyper-parameters into state arrays (readable, changeable, schedulable),
and `schedulable` lets any factory take a schedule for any hyper-parameter."""
import functools
import inspect
from typing import NamedTuple

import fgrad.numpy as fnp
from fgrad_nn.module import is_function

from ._trees import float_dtype
from .base import GradientTransformation, increment, zero_count


class InjectHyperparamsState(NamedTuple):
    """count: updates done; hyperparams: name -> value used by the latest update
    (after init: the value the first update will use); inner_state."""
    count: object
    hyperparams: dict
    inner_state: object


def _is_numeric(value):
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, (int, float)):
        return True
    return hasattr(value, "dtype") and fnp.ndim(value) == 0


def inject_hyperparams(factory, static_args=("mask",)):
    """Wrap `factory` (an alias or a transform constructor) so that its numeric
    hyper-parameters live in the state as arrays.

    `inject_hyperparams(adam)(learning_rate=sched, b1=0.9)` returns a
    GradientTransformation whose state is an InjectHyperparamsState: read the
    current learning rate as `state.hyperparams['learning_rate']`, or replace a
    value in the state to change it between steps. Functions are schedules (of
    the int32 step count) unless named in `static_args` or in the factory's own
    `static_hyperparams` (set by `schedulable`: e.g. sizes and dtypes); callable
    pytrees such as models are values, not schedules; values
    are stored in the widest floating dtype of the params given to init.
    """
    signature = inspect.signature(factory)
    name = getattr(factory, "__name__", "factory")
    static_args = tuple(static_args) + tuple(getattr(factory, "static_hyperparams", ()))

    def make(*args, **kwargs):
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"inject_hyperparams({name}): {e}") from None
        bound.apply_defaults()
        static, numeric, schedules = {}, {}, {}
        for key, value in bound.arguments.items():
            if key in static_args:
                static[key] = value
            elif is_function(value):
                schedules[key] = value
            elif _is_numeric(value):
                numeric[key] = value
            else:
                static[key] = value

        def values_at(count, dtype, stored):
            out = {k: fnp.asarray(fn(count), dtype=dtype) for k, fn in schedules.items()}
            return {**stored, **out}

        def init(params):
            dtype = float_dtype(params)
            count = zero_count()
            stored = {k: fnp.asarray(v, dtype=dtype) for k, v in numeric.items()}
            hp = values_at(count, dtype, stored)
            inner = factory(**static, **hp)
            return InjectHyperparamsState(count, hp, inner.init(params))

        def update(updates, state, params=None):
            if not isinstance(state, InjectHyperparamsState):
                raise TypeError(f"inject_hyperparams({name}).update: expected an "
                                f"InjectHyperparamsState from this transform's init, "
                                f"got {type(state).__name__}")
            values = list(state.hyperparams.values())
            dtype = fnp.result_type(*values) if values else fnp.dtype(fnp.float32)
            stored = {k: fnp.astype(fnp.asarray(state.hyperparams[k]), dtype) for k in numeric}
            hp = values_at(state.count, dtype, stored)
            inner = factory(**static, **hp)
            updates, inner_state = inner.update(updates, state.inner_state, params)
            return updates, InjectHyperparamsState(increment(state.count), hp, inner_state)

        return GradientTransformation(init, update)

    return functools.wraps(factory)(make)


def schedulable(static_args=("mask",), native=("learning_rate",)):
    """Decorator: when a call passes a schedule for a hyper-parameter the factory
    does not schedule itself (not in `native`), build it through
    inject_hyperparams, so any hyper-parameter may be a schedule."""
    def decorate(factory):
        signature = inspect.signature(factory)

        @functools.wraps(factory)
        def wrapper(*args, **kwargs):
            arguments = signature.bind(*args, **kwargs).arguments
            if any(is_function(v) for k, v in arguments.items()
                   if k not in static_args and k not in native):
                return inject_hyperparams(factory, static_args)(*args, **kwargs)
            return factory(*args, **kwargs)

        wrapper.static_hyperparams = tuple(static_args)
        return wrapper

    return decorate
