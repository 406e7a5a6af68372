"""Running averages: `ema` of the updates (a transformation, Optax's), and
`params_ema`, an average of the parameters kept next to them for evaluation."""
from typing import NamedTuple

import fgrad
import fgrad.numpy as fnp
from fgrad_nn._checks import flag

from ._trees import check_same_tree, hyper, map_checked
from .adaptive import _BiasCorrection, as_dtype
from .base import GradientTransformation, increment, zero_count
from .hyperparams import schedulable


class EmaState(NamedTuple):
    count: object
    ema: object


@schedulable(static_args=("mask", "accumulator_dtype"))
def ema(decay, debias=True, accumulator_dtype=None):
    """Replace the updates by their exponential moving average
    e = decay e + (1 - decay) u (e starts at zero); with debias, the output is
    e / (1 - decay^t), as Adam's first moment. accumulator_dtype: e's storage dtype."""
    debias = flag("ema", "debias", debias)
    dtype = None if accumulator_dtype is None else fnp.dtype(accumulator_dtype)

    def init(params):
        zeros = fgrad.tree.map(
            lambda p: fnp.zeros(fnp.shape(p), dtype or fnp.result_type(p)), params)
        return EmaState(zero_count(), zeros)

    def update(updates, state, params=None):
        del params
        new = map_checked("ema", lambda u, e: hyper(decay, u) * e + (1 - hyper(decay, u)) * u,
                          updates, state.ema, names=("state.ema",))
        count = increment(state.count)
        out = new
        if debias:
            bc = _BiasCorrection(decay, count)
            out = fgrad.tree.map(lambda e: e / bc(e), new)
        return out, EmaState(count, as_dtype(new, dtype))

    return GradientTransformation(init, update)


class ParamsEmaState(NamedTuple):
    """count: averages taken; average: the running average of the parameters."""
    count: object
    average: object


class ParamsEma(NamedTuple):
    """init(params) -> state; update(params, state) -> state (call after each
    optimizer step); value(state) -> the parameters to evaluate with."""
    init: object
    update: object
    value: object


def params_ema(decay=0.999, debias=False):
    """An exponential moving average of the parameters, for evaluation (Polyak
    averaging as in Keras' use_ema or timm's ModelEmaV2):

        tracker = optim.params_ema(0.999)
        ema_state = tracker.init(params)
        ...after each step:  ema_state = tracker.update(params, ema_state)
        eval_params = tracker.value(ema_state)

    The average starts at the initial parameters (debias=False, the usual choice)
    or at zero with Adam's bias correction (debias=True). The state is a pytree, so
    update jits; `value` keeps each leaf's dtype.
    """
    debias = flag("params_ema", "debias", debias)

    def init(params):
        # a copy, not the params' own buffers: a jitted step may donate those
        start = fgrad.tree.map(fnp.zeros_like if debias else fnp.array, params)
        return ParamsEmaState(zero_count(), start)

    def update(params, state):
        check_same_tree("params_ema.update", [("params", params),
                                              ("state.average", state.average)],
                        "Hint: pass the parameters this tracker was initialised with.")
        average = fgrad.tree.map(
            lambda p, a: fnp.astype(hyper(decay, a) * a + (1 - hyper(decay, a)) * p,
                                    fnp.result_type(a)),
            params, state.average)
        return ParamsEmaState(increment(state.count), average)

    def value(state):
        if not debias:
            return state.average
        bc = _BiasCorrection(decay, state.count)
        return fgrad.tree.map(
            lambda a: fnp.astype(a / fnp.where(state.count == 0, 1, bc(a)), fnp.result_type(a)),
            state.average)

    return ParamsEma(init, update, value)
