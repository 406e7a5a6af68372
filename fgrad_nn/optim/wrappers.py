"""Transformations that wrap or steer others: per-group optimizers
(`multi_transform`), skipping non-finite steps (`apply_if_finite`, `zero_nans`),
`lookahead`'s slow and fast weights, `adaptive_grad_clip`, and schedule-free
optimization (`schedule_free`, `schedule_free_adamw`, `schedule_free_eval_params`)."""
import functools
import operator
from typing import NamedTuple

import fgrad
import fgrad.numpy as fnp
from fgrad_nn import schedules
from fgrad_nn.module import is_function

from ._trees import check_same_tree, float_dtype, hyper, map_checked
from .adaptive import scale_by_rms
from .base import (EmptyState, GradientTransformation, chain, increment, require_params,
                   zero_count)
from .transforms import add_decayed_weights, scale_by_learning_rate
from .hyperparams import schedulable
from .masking import masked


def _where_tree(pred, new, old):
    """Leaf by leaf: `new` where the scalar `pred` holds, else `old`."""
    return fgrad.tree.map(lambda n, o: fnp.where(pred, n, o), new, old)


def _all_finite(tree):
    leaves = fgrad.tree.leaves(tree)
    if not leaves:
        return fnp.asarray(True)
    return functools.reduce(operator.and_, [fnp.all(fnp.isfinite(x)) for x in leaves])


# ----------------------------------------------------------------------------
# Per-group optimizers

class MultiTransformState(NamedTuple):
    """inner_states: label -> that group's (masked) state."""
    inner_states: dict


def multi_transform(transforms, param_labels):
    """A different transformation for each group of parameters.

    `transforms` maps a label to a GradientTransformation; `param_labels` is a tree
    of labels with the params' structure (or a prefix of it), or a function of the
    params returning one. Each transformation sees only its group's leaves, e.g.

        multi_transform({'decay': adamw(1e-3), 'no_decay': adam(1e-3)},
                        lambda p: fgrad.tree.map(lambda x: 'decay' if x.ndim > 1
                                                 else 'no_decay', p))
    """
    if not isinstance(transforms, dict) or not transforms:
        raise TypeError("multi_transform: transforms must be a non-empty dict "
                        "{label: GradientTransformation}")

    def labels_of(tree):
        labels = param_labels(tree) if is_function(param_labels) else param_labels
        try:
            spread = fgrad.tree.map(lambda m, sub: fgrad.tree.map(lambda _: m, sub),
                                    labels, tree)
        except (ValueError, TypeError):
            raise ValueError(
                f"multi_transform: param_labels must be a tree of labels with the structure "
                f"of the params (or a prefix of it); labels are "
                f"{fgrad.tree.structure(labels)}, params are {fgrad.tree.structure(tree)}"
            ) from None
        flat = fgrad.tree.leaves(spread)
        unknown = sorted({repr(label) for label in flat if label not in transforms})
        if unknown:
            raise ValueError(f"multi_transform: labels {', '.join(unknown)} have no "
                             f"transformation; transforms has {sorted(map(repr, transforms))}")
        return flat

    def mask_for(label):
        def mask(tree):
            leaves, treedef = fgrad.tree.flatten(tree)
            return fgrad.tree.unflatten(treedef, [lab == label for lab in labels_of(tree)])
        return mask

    groups = {label: masked(t, mask_for(label)) for label, t in transforms.items()}

    def init(params):
        return MultiTransformState({label: g.init(params) for label, g in groups.items()})

    def update(updates, state, params=None):
        new_states = {}
        for label, group in groups.items():
            updates, new_states[label] = group.update(updates, state.inner_states[label],
                                                      params)
        return updates, MultiTransformState(new_states)

    return GradientTransformation(init, update)


# ----------------------------------------------------------------------------
# Non-finite gradients

class ApplyIfFiniteState(NamedTuple):
    """notfinite_count: consecutive non-finite steps so far; last_finite: whether
    the latest updates were finite; total_notfinite: all non-finite steps."""
    notfinite_count: object
    last_finite: object
    total_notfinite: object
    inner_state: object


def apply_if_finite(inner, max_consecutive_errors):
    """Run `inner` only on finite updates: a step whose updates hold a NaN or an
    infinity returns zero updates and leaves inner's state as it was, unless it is
    the (max_consecutive_errors + 1)-th such step in a row, which goes through (as
    Optax: a run that stays non-finite is not hidden forever)."""
    try:
        max_consecutive_errors = operator.index(max_consecutive_errors)
    except TypeError:
        raise TypeError("apply_if_finite: max_consecutive_errors must be an int") from None

    def init(params):
        return ApplyIfFiniteState(zero_count(), fnp.asarray(True), zero_count(),
                                  inner.init(params))

    def update(updates, state, params=None):
        finite = _all_finite(updates)
        notfinite = fnp.where(finite, 0, increment(state.notfinite_count))
        total = fnp.where(finite, state.total_notfinite, increment(state.total_notfinite))
        apply = finite | (notfinite > max_consecutive_errors)
        new, inner_state = inner.update(updates, state.inner_state, params)
        out = fgrad.tree.map(lambda u: fnp.where(apply, u, fnp.zeros_like(u)), new)
        inner_state = _where_tree(apply, inner_state, state.inner_state)
        return out, ApplyIfFiniteState(notfinite, finite, total, inner_state)

    return GradientTransformation(init, update)


class ZeroNansState(NamedTuple):
    """found_nan: per leaf, whether the latest updates had a NaN there."""
    found_nan: object


def zero_nans():
    """Replace NaNs in the updates by zeros, recording per leaf whether there were any."""
    def init(params):
        return ZeroNansState(fgrad.tree.map(lambda _: fnp.asarray(False), params))

    def update(updates, state, params=None):
        del params
        found = fgrad.tree.map(lambda u: fnp.any(fnp.isnan(u)), updates)
        out = fgrad.tree.map(lambda u: fnp.where(fnp.isnan(u), fnp.zeros_like(u), u), updates)
        return out, ZeroNansState(found)

    return GradientTransformation(init, update)


# ----------------------------------------------------------------------------
# Lookahead

class LookaheadParams(NamedTuple):
    """The fast weights (stepped by the inner optimizer, where gradients are taken)
    and the slow weights (the ones to evaluate)."""
    fast: object
    slow: object

    @classmethod
    def init_synced(cls, params):
        """Fast and slow weights both equal to `params` (the slow ones a copy, so a
        jitted step may donate both)."""
        return cls(params, fgrad.tree.map(fnp.array, params))


class LookaheadState(NamedTuple):
    fast_state: object
    steps_since_sync: object


def lookahead(fast_optimizer, sync_period, slow_step_size, reset_state=False):
    """Lookahead (Zhang et al. 2019), Optax's form: the params are LookaheadParams;
    update takes the gradients at the fast weights and returns LookaheadParams
    updates. Each step moves the fast weights by fast_optimizer; every
    `sync_period`-th step then sets slow ← slow + slow_step_size (fast - slow) and
    fast ← slow. reset_state re-initialises fast_optimizer's state at each sync."""
    try:
        sync_period = operator.index(sync_period)
    except TypeError:
        raise TypeError("lookahead: sync_period must be an int") from None
    if sync_period < 1:
        raise ValueError(f"lookahead: sync_period must be >= 1, got {sync_period}")

    def fast_of(params, where):
        if not isinstance(params, LookaheadParams):
            raise TypeError(f"lookahead.{where}: params must be LookaheadParams(fast, slow); "
                            f"make them with LookaheadParams.init_synced(params)")
        return params.fast

    def init(params):
        return LookaheadState(fast_optimizer.init(fast_of(params, "init")), zero_count())

    def update(updates, state, params=None):
        require_params("lookahead", params)
        fast = fast_of(params, "update")
        step, fast_state = fast_optimizer.update(updates, state.fast_state, fast)
        sync = state.steps_since_sync == sync_period - 1
        check_same_tree("lookahead", [("params.fast", fast), ("params.slow", params.slow)],
                        "Hint: fast and slow weights must share one structure.")
        moved = fgrad.tree.map(lambda f, u, s: f + u - s, fast, step, params.slow)
        slow_updates = fgrad.tree.map(
            lambda d: fnp.where(sync, hyper(slow_step_size, d) * d, fnp.zeros_like(d)), moved)
        fast_updates = fgrad.tree.map(
            lambda u, su, s, f: fnp.where(sync, s + su - f, u),
            step, slow_updates, params.slow, fast)
        if reset_state:
            fast_state = _where_tree(sync, fast_optimizer.init(fast), fast_state)
        steps = (state.steps_since_sync + 1) % sync_period
        return LookaheadParams(fast_updates, slow_updates), LookaheadState(fast_state, steps)

    return GradientTransformation(init, update)


# ----------------------------------------------------------------------------
# Adaptive gradient clipping

def _unit_norms(x, axis, layout):
    """||x|| per unit, broadcast to x's shape: over `axis` when given, else by
    the leaf's rank under `layout`."""
    sq = fnp.square(x)
    if axis is not None:
        total = fnp.sum(sq, axis=axis, keepdims=True)
    elif sum(d != 1 for d in x.shape) <= 1:  # scalars and vectors (size-1 axes aside)
        total = fnp.sum(sq, keepdims=True)
    elif layout == "torch":                 # (out, in, ...): a unit is a slice along axis 0
        total = fnp.sum(sq, axis=tuple(range(1, x.ndim)), keepdims=True)
    elif x.ndim in (2, 3):                  # Optax: (in, out) dense, (in, heads, out)
        total = fnp.sum(sq, axis=0, keepdims=True)
    elif x.ndim in (4, 5):                  # Optax: (h, w, in, out), (d, h, w, in, out) conv
        total = fnp.sum(sq, axis=tuple(range(x.ndim - 1)), keepdims=True)
    else:
        raise ValueError(f"adaptive_grad_clip: no unit-wise norm for a leaf of shape "
                         f"{tuple(x.shape)} ({x.ndim}-d) with layout='optax'; pass axis= "
                         f"(the axes to reduce) or layout='torch' (units along axis 0)")
    return fnp.broadcast_to(fnp.sqrt(total), x.shape)


@schedulable(static_args=("mask", "axis", "layout"))
def adaptive_grad_clip(clipping, eps=1e-3, axis=None, *, layout="optax"):
    """Unit-wise adaptive gradient clipping (Brock et al. 2021, NFNets): each unit's
    gradient g is scaled to at most clipping · max(||w||, eps), norms taken per
    output unit. `axis` (Optax's): the axes a norm reduces, for every leaf. Without
    it, vectors are one unit and matrices and kernels are read by `layout`:
    'optax' as Optax/Flax store them (dense (in, out), conv (h, w, in, out): a
    unit is a slice along the last axis); 'torch' as fgrad_nn and PyTorch store
    them ((out, in, ...)): use it for fgrad_nn models."""
    if layout not in ("optax", "torch"):
        raise ValueError(f"adaptive_grad_clip: layout must be 'optax' or 'torch', got {layout!r}")

    def init(params):
        del params
        return EmptyState()

    def update(updates, state, params=None):
        require_params("adaptive_grad_clip", params)

        def leaf(g, p):
            g_norm = _unit_norms(g, axis, layout)
            max_norm = hyper(clipping, g) * fnp.maximum(
                _unit_norms(p, axis, layout).astype(g.dtype), hyper(eps, g))
            clipped = g * (max_norm / fnp.maximum(g_norm, 1e-6))
            return fnp.where(g_norm < max_norm, g, clipped)

        return map_checked("adaptive_grad_clip", leaf, updates, params,
                           names=("params",)), state

    return GradientTransformation(init, update)


# ----------------------------------------------------------------------------
# Schedule-free

class ScheduleFreeState(NamedTuple):
    """b1: the interpolation weight; weight_sum: the sum of the step weights so far;
    step_count: starts at 1; max_lr: the largest learning rate seen; z: the base
    optimizer's iterate."""
    b1: object
    weight_sum: object
    step_count: object
    max_lr: object
    base_optimizer_state: object
    z: object


def schedule_free(base_optimizer, learning_rate, b1=0.9, weight_lr_power=2.0,
                  state_dtype=None):
    """Schedule-free optimization (Defazio et al. 2024), Optax's semantics.

    The params are y = b1 x + (1 - b1) z, where the gradient is taken; z moves by
    base_optimizer's updates; x, the sequence to evaluate, is a running average of
    z weighted by max_lr^weight_lr_power: x ← (1 - c) x + c z, c = w_t / Σ w.
    Read x with `schedule_free_eval_params(state, params)`. learning_rate must be
    the one base_optimizer uses (a number or a schedule, read at step_count).
    """
    z_dtype = None if state_dtype is None else fnp.dtype(state_dtype)

    def init(params):
        dtype = float_dtype(params)
        z = fgrad.tree.map(lambda p: fnp.array(p, dtype=z_dtype or fnp.result_type(p)), params)
        return ScheduleFreeState(fnp.asarray(b1, dtype), fnp.zeros((), dtype),
                                 fnp.ones((), fnp.int32), fnp.zeros((), dtype),
                                 base_optimizer.init(params), z)

    def update(updates, state, params=None):
        require_params("schedule_free", params)
        dtype = fnp.result_type(state.max_lr)
        lr = learning_rate(state.step_count) if callable(learning_rate) else learning_rate
        max_lr = fnp.maximum(state.max_lr, fnp.astype(fnp.asarray(lr), dtype))
        weight = max_lr ** weight_lr_power
        total = state.weight_sum + weight
        c = fnp.where(total > 0, weight / fnp.where(total > 0, total, 1), 0)
        base, base_state = base_optimizer.update(updates, state.base_optimizer_state, params)
        z = map_checked("schedule_free", lambda zi, u: fnp.astype(zi + u, fnp.result_type(zi)),
                        state.z, base, names=("base updates",))
        beta = state.b1

        def step(y, z_old, z_new):
            bt = beta.astype(fnp.result_type(y))
            ct = c.astype(fnp.result_type(y))
            x = (y - (1 - bt) * z_old) / bt
            x = (1 - ct) * x + ct * z_new
            return bt * x + (1 - bt) * z_new - y

        out = fgrad.tree.map(step, params, state.z, z)
        return out, ScheduleFreeState(beta, total, increment(state.step_count), max_lr,
                                      base_state, z)

    return GradientTransformation(init, update)


def _find_schedule_free(state):
    if isinstance(state, ScheduleFreeState):
        return state
    if isinstance(state, (tuple, list)):
        for child in state:
            found = _find_schedule_free(child)
            if found is not None:
                return found
    if isinstance(state, dict):
        for child in state.values():
            found = _find_schedule_free(child)
            if found is not None:
                return found
    return None


def schedule_free_eval_params(state, params):
    """The parameters to evaluate a schedule-free model at: x = (y - (1 - b1) z) / b1,
    from the params y and the ScheduleFreeState found in `state`."""
    sf = _find_schedule_free(state)
    if sf is None:
        raise ValueError("schedule_free_eval_params: no ScheduleFreeState in this optimizer "
                         "state; pass the state of an optimizer built with schedule_free")
    return fgrad.tree.map(
        lambda y, z: fnp.astype((y - (1 - sf.b1.astype(fnp.result_type(y))) * z)
                                / sf.b1.astype(fnp.result_type(y)), fnp.result_type(y)),
        params, sf.z)


def schedule_free_adamw(learning_rate=0.0025, warmup_steps=None, b1=0.9, b2=0.999, eps=1e-8,
                        weight_decay=0.0, weight_lr_power=2.0, state_dtype=None):
    """Schedule-free AdamW (Optax's): the base step is RMSprop with Adam's bias
    correction and eps outside the root, plus decoupled weight decay, times -lr; a
    linear warmup from 0 over warmup_steps when given."""
    if warmup_steps is not None:
        learning_rate = schedules.linear_schedule(0.0, learning_rate, warmup_steps)
    base = chain(scale_by_rms(b2, eps, eps_in_sqrt=False, bias_correction=True),
                 add_decayed_weights(weight_decay),
                 scale_by_learning_rate(learning_rate))
    return schedule_free(base, learning_rate, b1, weight_lr_power, state_dtype)
