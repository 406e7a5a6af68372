"""Adam's relatives, each a direction from running moments of the gradient:
AdaBelief, RAdam, AMSGrad, Yogi, and Adafactor's factored second moment (with
its block-RMS clipping and parameter scaling). Optax's formulas and defaults."""
from typing import NamedTuple

import numpy as np

import fgrad
import fgrad.numpy as fnp
from fgrad_nn._checks import flag

from ._trees import hyper, map_checked
from .adaptive import (_BiasCorrection, _ema, _filled, _zeros, as_dtype, canonical_dtype,
                       widened, zeros_of)
from .base import EmptyState, GradientTransformation, increment, require_params, zero_count
from .hyperparams import schedulable


def _mu_hat(b1, mu, grads, count, nesterov):
    """The bias-corrected first moment, or its Nesterov form (as scale_by_adam)."""
    bc1, bc1_next = _BiasCorrection(b1, count), _BiasCorrection(b1, count + 1)
    if nesterov:
        return fgrad.tree.map(
            lambda m, g: hyper(b1, g) * m / bc1_next(g) + (1 - hyper(b1, g)) * g / bc1(g),
            mu, grads)
    return fgrad.tree.map(lambda m: m / bc1(m), mu)


class ScaleByBeliefState(NamedTuple):
    count: object
    mu: object
    nu: object


@schedulable()
def scale_by_belief(b1=0.9, b2=0.999, eps=1e-16, eps_root=1e-16, *, nesterov=False):
    """AdaBelief (Zhuang et al. 2020): m = b1 m + (1-b1) g; s = b2 s + (1-b2)(g - m)² +
    eps_root (the "belief" in the gradient: its deviation from the new m); direction
    m̂ / (sqrt(ŝ) + eps) with Adam's bias corrections."""
    nesterov = flag("scale_by_belief", "nesterov", nesterov)

    def init(params):
        return ScaleByBeliefState(zero_count(), _zeros(params), _zeros(params))

    def update(updates, state, params=None):
        del params
        mu = _ema("scale_by_belief", b1, updates, state.mu, "state.mu")
        surprise = fgrad.tree.map(lambda g, m: g - m, updates, mu)
        nu = _ema("scale_by_belief", b2, surprise, state.nu, "state.nu", power=2)
        nu = fgrad.tree.map(lambda v: v + hyper(eps_root, v), nu)
        count = increment(state.count)
        bc2 = _BiasCorrection(b2, count)
        m_hat = _mu_hat(b1, mu, updates, count, nesterov)
        out = fgrad.tree.map(lambda m, v: m / (fnp.sqrt(v / bc2(v)) + hyper(eps, m)), m_hat, nu)
        return out, ScaleByBeliefState(count, mu, nu)

    return GradientTransformation(init, update)


class ScaleByRadamState(NamedTuple):
    count: object
    mu: object
    nu: object


@schedulable()
def scale_by_radam(b1=0.9, b2=0.999, eps=1e-8, eps_root=0.0, threshold=5.0, *,
                   nesterov=False):
    """Rectified Adam (Liu et al. 2020): while the length of the approximated SMA
    ρ_t = ρ_∞ - 2 t b2^t / (1 - b2^t) (ρ_∞ = 2 / (1 - b2) - 1) is below `threshold`
    the direction is the bias-corrected momentum m̂ alone; from then on it is
    r_t m̂ / (sqrt(v̂ + eps_root) + eps), r_t = sqrt((ρ_t-4)(ρ_t-2)ρ_∞ /
    ((ρ_∞-4)(ρ_∞-2)ρ_t))."""
    nesterov = flag("scale_by_radam", "nesterov", nesterov)

    def init(params):
        return ScaleByRadamState(zero_count(), _zeros(params), _zeros(params))

    def update(updates, state, params=None):
        del params
        mu = _ema("scale_by_radam", b1, updates, state.mu, "state.mu")
        nu = _ema("scale_by_radam", b2, updates, state.nu, "state.nu", power=2)
        count = increment(state.count)
        bc2 = _BiasCorrection(b2, count)
        m_hat = _mu_hat(b1, mu, updates, count, nesterov)

        def direction(m, v):
            beta2 = hyper(b2, m)
            t = fnp.astype(count, fnp.result_type(m))
            rho_inf = 2 / (1 - beta2) - 1
            b2t = beta2 ** t
            rho = rho_inf - 2 * t * b2t / (1 - b2t)
            rectified = rho >= hyper(threshold, m)
            safe_rho = fnp.where(rectified, rho, rho_inf)   # r's root is NaN below 4
            r = fnp.sqrt((safe_rho - 4) * (safe_rho - 2) * rho_inf
                         / ((rho_inf - 4) * (rho_inf - 2) * safe_rho))
            adapted = r * m / (fnp.sqrt(v / bc2(v) + hyper(eps_root, v)) + hyper(eps, m))
            return fnp.where(rectified, adapted, m)

        out = fgrad.tree.map(direction, m_hat, nu)
        return out, ScaleByRadamState(count, mu, nu)

    return GradientTransformation(init, update)


class ScaleByAmsgradState(NamedTuple):
    count: object
    mu: object
    nu: object
    nu_max: object


@schedulable(static_args=("mask", "mu_dtype"))
def scale_by_amsgrad(b1=0.9, b2=0.999, eps=1e-8, eps_root=0.0, mu_dtype=None, *,
                     bias_correction_mu=True, bias_correction_nu=True):
    """AMSGrad (Reddi et al. 2018) in Optax's form: Adam's moments, with the running
    maximum of the (bias-corrected, by default) second moment in the denominator:
    m̂ / (sqrt(max_t v̂ + eps_root) + eps). PyTorch's Adam(amsgrad=True) takes the
    maximum of the raw v and corrects it afterwards; the two agree when b2's
    correction does not change which v is largest."""
    mu_dtype = canonical_dtype("scale_by_amsgrad", mu_dtype)
    correct_mu = flag("scale_by_amsgrad", "bias_correction_mu", bias_correction_mu)
    correct_nu = flag("scale_by_amsgrad", "bias_correction_nu", bias_correction_nu)

    def init(params):
        return ScaleByAmsgradState(zero_count(), zeros_of(params, mu_dtype), _zeros(params),
                                   _zeros(params))

    def update(updates, state, params=None):
        del params
        mu = _ema("scale_by_amsgrad", b1, updates, widened(state.mu, updates), "state.mu")
        nu = _ema("scale_by_amsgrad", b2, updates, state.nu, "state.nu", power=2)
        count = increment(state.count)
        bc1, bc2 = _BiasCorrection(b1, count), _BiasCorrection(b2, count)
        m_hat = fgrad.tree.map(lambda m: m / bc1(m), mu) if correct_mu else mu
        v_eff = fgrad.tree.map(lambda v: v / bc2(v), nu) if correct_nu else nu
        nu_max = fgrad.tree.map(fnp.maximum, state.nu_max, v_eff)
        out = fgrad.tree.map(
            lambda m, v: m / (fnp.sqrt(v + hyper(eps_root, v)) + hyper(eps, m)), m_hat, nu_max)
        return out, ScaleByAmsgradState(count, as_dtype(mu, mu_dtype), nu, nu_max)

    return GradientTransformation(init, update)


class ScaleByYogiState(NamedTuple):
    count: object
    mu: object
    nu: object


@schedulable()
def scale_by_yogi(b1=0.9, b2=0.999, eps=1e-3, eps_root=0.0, initial_accumulator_value=1e-6):
    """Yogi (Zaheer et al. 2018): Adam with an additive second moment
    v = v - (1 - b2) sign(v - g²) g²; both moments start at
    initial_accumulator_value; direction m̂ / (sqrt(v̂ + eps_root) + eps)."""
    def init(params):
        return ScaleByYogiState(zero_count(), _filled(params, initial_accumulator_value),
                                _filled(params, initial_accumulator_value))

    def update(updates, state, params=None):
        del params
        mu = _ema("scale_by_yogi", b1, updates, state.mu, "state.mu")
        nu = fgrad.tree.map(
            lambda g, v: v - (1 - hyper(b2, g)) * fnp.sign(v - fnp.square(g)) * fnp.square(g),
            updates, state.nu)
        count = increment(state.count)
        bc1, bc2 = _BiasCorrection(b1, count), _BiasCorrection(b2, count)
        out = fgrad.tree.map(
            lambda m, v: m / bc1(m) / (fnp.sqrt(v / bc2(v) + hyper(eps_root, v))
                                       + hyper(eps, m)), mu, nu)
        return out, ScaleByYogiState(count, mu, nu)

    return GradientTransformation(init, update)


# ----------------------------------------------------------------------------
# Adafactor

def factored_dims(shape, factored, min_dim_size_to_factor):
    """(row axis, column axis) of the two largest axes when both are at least
    min_dim_size_to_factor (the second moment is then kept as a row and a column
    vector); None when it is kept whole."""
    if not factored or len(shape) < 2:
        return None
    order = np.argsort(shape, kind="stable")
    if shape[order[-2]] < min_dim_size_to_factor:
        return None
    return int(order[-2]), int(order[-1])


class FactoredState(NamedTuple):
    """count; per leaf v_row and v_col (factored leaves) or v (the others), with
    shape-(1,) placeholders where a leaf does not use them."""
    count: object
    v_row: object
    v_col: object
    v: object


@schedulable(static_args=("mask", "factored", "min_dim_size_to_factor"))
def scale_by_factored_rms(factored=True, decay_rate=0.8, step_offset=0,
                          min_dim_size_to_factor=128, epsilon=1e-30):
    """Adafactor's direction (Shazeer & Stern 2018): g / sqrt(v̂), v̂ the running
    mean of g² + epsilon with decay 1 - (t - step_offset)^(-decay_rate) at step t
    (1-based: the first step keeps nothing of the zero start). For leaves with two
    axes of at least min_dim_size_to_factor, v̂ is the outer product of a row and a
    column mean divided by their overall mean, stored in O(rows + columns)."""
    factored = flag("scale_by_factored_rms", "factored", factored)

    def dims(x):
        return factored_dims(tuple(fnp.shape(x)), factored, min_dim_size_to_factor)

    def init(params):
        def pieces(p):
            d = dims(p)
            one = fnp.zeros((1,), fnp.result_type(p))
            if d is None:
                return one, one, fnp.zeros_like(p)
            row_axis, col_axis = d
            shape = tuple(fnp.shape(p))
            v_row = fnp.zeros(shape[:col_axis] + shape[col_axis + 1:], fnp.result_type(p))
            v_col = fnp.zeros(shape[:row_axis] + shape[row_axis + 1:], fnp.result_type(p))
            return v_row, v_col, one

        leaves, treedef = fgrad.tree.flatten(params)
        parts = [pieces(p) for p in leaves]
        rows, cols, whole = ([fgrad.tree.unflatten(treedef, [q[i] for q in parts])
                              for i in range(3)])
        return FactoredState(zero_count(), rows, cols, whole)

    def update(updates, state, params=None):
        del params
        leaves, treedef = fgrad.tree.flatten(updates)
        rows, cols, whole = (fgrad.tree.leaves(t) for t in (state.v_row, state.v_col, state.v))
        out, new_rows, new_cols, new_whole = [], [], [], []
        for g, v_row, v_col, v in zip(leaves, rows, cols, whole):
            t = fnp.astype(state.count - step_offset + 1, fnp.result_type(g))
            beta = 1 - t ** (-hyper(decay_rate, g))
            sq = fnp.square(g) + hyper(epsilon, g)
            d = dims(g)
            if d is None:
                v = beta * v + (1 - beta) * sq
                out.append(g / fnp.sqrt(v))
                new_rows.append(v_row), new_cols.append(v_col), new_whole.append(v)
                continue
            row_axis, col_axis = d
            v_row = beta * v_row + (1 - beta) * fnp.mean(sq, axis=col_axis)
            v_col = beta * v_col + (1 - beta) * fnp.mean(sq, axis=row_axis)
            kept_row_axis = row_axis - 1 if row_axis > col_axis else row_axis
            row_scale = v_row / fnp.mean(v_row, axis=kept_row_axis, keepdims=True)
            out.append(g / fnp.sqrt(fnp.expand_dims(row_scale, col_axis))
                       / fnp.sqrt(fnp.expand_dims(v_col, row_axis)))
            new_rows.append(v_row), new_cols.append(v_col), new_whole.append(v)
        new_state = FactoredState(increment(state.count),
                                  *(fgrad.tree.unflatten(treedef, x)
                                    for x in (new_rows, new_cols, new_whole)))
        return fgrad.tree.unflatten(treedef, out), new_state

    return GradientTransformation(init, update)


def _rms(x):
    return fnp.sqrt(fnp.mean(fnp.square(x)))


@schedulable()
def clip_by_block_rms(threshold):
    """Scale each leaf's update down so that its root mean square is at most threshold."""
    def init(params):
        del params
        return EmptyState()

    def update(updates, state, params=None):
        del params
        return fgrad.tree.map(
            lambda u: u / fnp.maximum(1, _rms(u) / hyper(threshold, u)), updates), state

    return GradientTransformation(init, update)


@schedulable()
def scale_by_param_block_rms(min_scale=1e-3):
    """Scale each leaf's update by max(rms(p), min_scale) (Adafactor's relative step)."""
    def init(params):
        del params
        return EmptyState()

    def update(updates, state, params=None):
        require_params("scale_by_param_block_rms", params)
        out = map_checked("scale_by_param_block_rms",
                          lambda u, p: u * fnp.maximum(_rms(p).astype(u.dtype),
                                                       hyper(min_scale, u)),
                          updates, params, names=("params",))
        return out, state

    return GradientTransformation(init, update)
