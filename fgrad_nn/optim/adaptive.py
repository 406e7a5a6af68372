"""Adaptive per-element scalings: Adam (and its Nesterov form for NAdam), AdaMax,
RMSprop, Rprop, AdaGrad (root of the sum of squares), AdaDelta, Lion, and the
layer-wise trust ratio of LAMB. Each returns a direction; the aliases multiply
it by -learning_rate."""
from typing import NamedTuple

import fgrad
import fgrad.numpy as fnp
from fgrad_nn._checks import flag

from ._trees import hyper, map_checked, sum_of_squares
from .base import EmptyState, GradientTransformation, increment, require_params, zero_count
from .hyperparams import schedulable


def _zeros(params):
    return fgrad.tree.map(fnp.zeros_like, params)


def _filled(params, value):
    """Arrays like params filled with `value` (a number, or a scalar array when injected)."""
    return fgrad.tree.map(lambda p: fnp.zeros_like(p) + hyper(value, p), params)


def _ema(where, decay, new, old, name, power=1):
    """decay * old + (1 - decay) * new**power, leaf by leaf."""
    def leaf(g, m):
        d = hyper(decay, g)
        return d * m + (1 - d) * (g if power == 1 else g ** power)
    return map_checked(where, leaf, new, old, names=(name,))


class _BiasCorrection:
    """1 - rate**count in a given leaf's dtype (the bias correction of an EMA that
    started at zero), computed once per dtype rather than once per leaf."""

    def __init__(self, rate, count):
        self.rate, self.count, self.cache = rate, count, {}

    def __call__(self, like):
        dtype = fnp.result_type(like)
        if dtype not in self.cache:
            self.cache[dtype] = 1 - hyper(self.rate, like) ** fnp.astype(self.count, dtype)
        return self.cache[dtype]


def _norm(x):
    return fnp.sqrt(sum_of_squares(x))


def zeros_of(params, dtype=None):
    """Zeros like params, in `dtype` when given (e.g. a low-precision first moment)."""
    if dtype is None:
        return _zeros(params)
    return fgrad.tree.map(lambda p: fnp.zeros(fnp.shape(p), dtype), params)


def as_dtype(tree, dtype):
    """`tree`'s leaves cast to `dtype`, or `tree` itself when dtype is None."""
    return tree if dtype is None else fgrad.tree.map(lambda x: fnp.astype(x, dtype), tree)


def widened(stored, like):
    """`stored` (e.g. a low-precision first moment) cast up to the dtype it shares
    with `like`, so that its update is computed at the gradients' precision."""
    return fgrad.tree.map(lambda s, g: fnp.astype(s, fnp.result_type(s, g)), stored, like)


def canonical_dtype(where, dtype):
    """None, or `dtype` as a NumPy floating dtype (refusing anything else)."""
    if dtype is None:
        return None
    d = fnp.dtype(dtype)
    if not fnp.issubdtype(d, fnp.floating):
        raise ValueError(f"{where}: mu_dtype must be a floating dtype, got {d}")
    return d


class ScaleByAdamState(NamedTuple):
    count: object
    mu: object
    nu: object


@schedulable(static_args=("mask", "mu_dtype"))
def scale_by_adam(b1=0.9, b2=0.999, eps=1e-8, eps_root=0.0, mu_dtype=None, *,
                  nesterov=False):
    """Adam's direction m̂ / (sqrt(v̂ + eps_root) + eps), with bias-corrected moments
    m̂ = m / (1 - b1^t), v̂ = v / (1 - b2^t). With nesterov=True (NAdam, Dozat 2016)
    m̂ = b1 m / (1 - b1^(t+1)) + (1 - b1) g / (1 - b1^t). mu_dtype (Optax's): the
    dtype the first moment is stored in (e.g. bfloat16 to save memory); it is
    computed in the gradients' precision and rounded when stored."""
    nesterov = flag("scale_by_adam", "nesterov", nesterov)
    mu_dtype = canonical_dtype("scale_by_adam", mu_dtype)

    def init(params):
        return ScaleByAdamState(zero_count(), zeros_of(params, mu_dtype), _zeros(params))

    def update(updates, state, params=None):
        del params
        mu = _ema("scale_by_adam", b1, updates, widened(state.mu, updates), "state.mu")
        nu = _ema("scale_by_adam", b2, updates, state.nu, "state.nu", power=2)
        count = increment(state.count)
        bc1, bc2 = _BiasCorrection(b1, count), _BiasCorrection(b2, count)
        bc1_next = _BiasCorrection(b1, count + 1)

        def direction(g, m, v):
            if nesterov:
                m_hat = (hyper(b1, g) * m / bc1_next(g) + (1 - hyper(b1, g)) * g / bc1(g))
            else:
                m_hat = m / bc1(g)
            v_hat = v / bc2(g)
            return m_hat / (fnp.sqrt(v_hat + hyper(eps_root, g)) + hyper(eps, g))

        out = fgrad.tree.map(direction, updates, mu, nu)
        return out, ScaleByAdamState(count, as_dtype(mu, mu_dtype), nu)

    return GradientTransformation(init, update)


class ScaleByAdamaxState(NamedTuple):
    count: object
    mu: object
    nu: object


@schedulable()
def scale_by_adamax(b1=0.9, b2=0.999, eps=1e-8):
    """AdaMax (Kingma & Ba) as Optax and PyTorch run it: u = max(b2 u, |g| + eps),
    direction m / (1 - b1^t) / u."""
    def init(params):
        return ScaleByAdamaxState(zero_count(), _zeros(params), _zeros(params))

    def update(updates, state, params=None):
        del params
        mu = _ema("scale_by_adamax", b1, updates, state.mu, "state.mu")
        nu = fgrad.tree.map(
            lambda g, v: fnp.maximum(hyper(b2, g) * v, fnp.abs(g) + hyper(eps, g)),
            updates, state.nu)
        count = increment(state.count)
        bc1 = _BiasCorrection(b1, count)
        out = fgrad.tree.map(lambda g, m, v: m / bc1(g) / v, updates, mu, nu)
        return out, ScaleByAdamaxState(count, mu, nu)

    return GradientTransformation(init, update)


class ScaleByRmsState(NamedTuple):
    nu: object


class ScaleByRmsWithCountState(NamedTuple):
    count: object
    nu: object


class ScaleByCenteredRmsState(NamedTuple):
    mu: object
    nu: object


class ScaleByCenteredRmsWithCountState(NamedTuple):
    count: object
    mu: object
    nu: object


@schedulable()
def scale_by_rms(decay=0.9, eps=1e-8, initial_scale=0.0, centered=False, *,
                 eps_in_sqrt=True, bias_correction=False):
    """RMSprop's direction g / sqrt(v + eps), v = decay v + (1 - decay) g².

    eps sits inside the square root by default, as in Optax's scale_by_rms;
    eps_in_sqrt=False gives PyTorch's g / (sqrt(v) + eps) (the rmsprop alias's
    default). bias_correction=True
    divides v (and m) by 1 - decay^t, as Adam does (the state then counts steps).
    centered=True subtracts the squared mean gradient m² from v, with
    m = decay m + (1 - decay) g. v starts at initial_scale (PyTorch: 0).
    """
    centered = flag("scale_by_rms", "centered", centered)
    eps_in_sqrt = flag("scale_by_rms", "eps_in_sqrt", eps_in_sqrt)
    bias_correction = flag("scale_by_rms", "bias_correction", bias_correction)

    def init(params):
        nu = _filled(params, initial_scale)
        if centered:
            if bias_correction:
                return ScaleByCenteredRmsWithCountState(zero_count(), _zeros(params), nu)
            return ScaleByCenteredRmsState(_zeros(params), nu)
        return ScaleByRmsWithCountState(zero_count(), nu) if bias_correction else \
            ScaleByRmsState(nu)

    def update(updates, state, params=None):
        del params
        nu = _ema("scale_by_rms", decay, updates, state.nu, "state.nu", power=2)
        mu = _ema("scale_by_rms", decay, updates, state.mu, "state.mu") if centered else None
        if bias_correction:
            count = increment(state.count)
            bc = _BiasCorrection(decay, count)
            nu_hat = fgrad.tree.map(lambda v: v / bc(v), nu)
            mu_hat = fgrad.tree.map(lambda m: m / bc(m), mu) if centered else None
        else:
            nu_hat, mu_hat = nu, mu
        if centered:
            var = fgrad.tree.map(lambda v, m: fnp.maximum(v - fnp.square(m), 0), nu_hat, mu_hat)
        else:
            var = nu_hat

        def direction(g, v):
            if eps_in_sqrt:
                return g / fnp.sqrt(v + hyper(eps, g))
            return g / (fnp.sqrt(v) + hyper(eps, g))

        out = fgrad.tree.map(direction, updates, var)
        if bias_correction:
            new_state = (ScaleByCenteredRmsWithCountState(count, mu, nu) if centered
                         else ScaleByRmsWithCountState(count, nu))
        else:
            new_state = ScaleByCenteredRmsState(mu, nu) if centered else ScaleByRmsState(nu)
        return out, new_state

    return GradientTransformation(init, update)


class ScaleByRpropState(NamedTuple):
    step_sizes: object
    previous: object


@schedulable()
def scale_by_rprop(learning_rate, eta_minus=0.5, eta_plus=1.2, min_step_size=1e-6,
                   max_step_size=50.0):
    """Rprop (PyTorch's variant): each element's step size starts at learning_rate,
    grows by eta_plus while its gradient keeps its sign and shrinks by eta_minus
    when it flips, within [min_step_size, max_step_size]; after a flip that
    element does not move and its gradient is forgotten. Direction: sign(g) * step
    (the rprop alias negates it)."""
    def init(params):
        steps = _filled(params, learning_rate)
        return ScaleByRpropState(steps, _zeros(params))

    def update(updates, state, params=None):
        del params
        product = map_checked("scale_by_rprop", lambda g, q: g * q, updates, state.previous,
                              names=("state.previous",))

        def new_step(s, pr):
            one = fnp.ones_like(s)  # factors in s's dtype: where() of two Python floats is float32
            factor = fnp.where(pr > 0, one * hyper(eta_plus, s),
                               fnp.where(pr < 0, one * hyper(eta_minus, s), one))
            return fnp.clip(s * factor, hyper(min_step_size, s), hyper(max_step_size, s))

        steps = fgrad.tree.map(new_step, state.step_sizes, product)
        kept = fgrad.tree.map(lambda g, pr: fnp.where(pr < 0, fnp.zeros_like(g), g),
                              updates, product)
        out = fgrad.tree.map(lambda g, s: fnp.sign(g) * s, kept, steps)
        return out, ScaleByRpropState(steps, kept)

    return GradientTransformation(init, update)


class ScaleByRssState(NamedTuple):
    sum_of_squares: object


def _over_root(g, s, eps):
    """g / sqrt(s + eps) where s > 0, else 0 (its gradient too: the root never sees 0)."""
    positive = s > 0
    return fnp.where(positive, g / fnp.sqrt(fnp.where(positive, s, 1) + hyper(eps, g)), 0)


@schedulable()
def scale_by_rss(initial_accumulator_value=0.1, eps=1e-7):
    """AdaGrad's direction g / sqrt(s + eps), s = s + g² the running sum of squares
    (starting at initial_accumulator_value), and 0 where s is 0: Optax's rule
    (PyTorch's Adagrad adds eps outside the root)."""
    def init(params):
        return ScaleByRssState(_filled(params, initial_accumulator_value))

    def update(updates, state, params=None):
        del params
        sos = map_checked("scale_by_rss", lambda g, s: s + fnp.square(g), updates,
                          state.sum_of_squares, names=("state.sum_of_squares",))
        out = fgrad.tree.map(lambda g, s: _over_root(g, s, eps), updates, sos)
        return out, ScaleByRssState(sos)

    return GradientTransformation(init, update)


class ScaleByAdadeltaState(NamedTuple):
    e_g2: object
    e_dx2: object


@schedulable()
def scale_by_adadelta(rho=0.9, eps=1e-6):
    """AdaDelta (Zeiler 2012): E[g²] ← ρE[g²] + (1-ρ)g²; Δ = sqrt(E[Δ²] + eps) /
    sqrt(E[g²] + eps) · g; E[Δ²] ← ρE[Δ²] + (1-ρ)Δ². Direction: Δ."""
    def init(params):
        return ScaleByAdadeltaState(_zeros(params), _zeros(params))

    def update(updates, state, params=None):
        del params
        e_g2 = _ema("scale_by_adadelta", rho, updates, state.e_g2, "state.e_g2", power=2)
        delta = fgrad.tree.map(
            lambda g, eg, ed: fnp.sqrt(ed + hyper(eps, g)) / fnp.sqrt(eg + hyper(eps, g)) * g,
            updates, e_g2, state.e_dx2)
        e_dx2 = _ema("scale_by_adadelta", rho, delta, state.e_dx2, "state.e_dx2", power=2)
        return delta, ScaleByAdadeltaState(e_g2, e_dx2)

    return GradientTransformation(init, update)


class ScaleByLionState(NamedTuple):
    mu: object


@schedulable(static_args=("mask", "mu_dtype"))
def scale_by_lion(b1=0.9, b2=0.99, mu_dtype=None):
    """Lion (Chen et al. 2023): direction sign(b1 m + (1 - b1) g), then
    m ← b2 m + (1 - b2) g; mu_dtype: m's storage dtype (as scale_by_adam's)."""
    mu_dtype = canonical_dtype("scale_by_lion", mu_dtype)

    def init(params):
        return ScaleByLionState(zeros_of(params, mu_dtype))

    def update(updates, state, params=None):
        del params
        old = widened(state.mu, updates)
        out = map_checked(
            "scale_by_lion",
            lambda g, m: fnp.sign(hyper(b1, g) * m + (1 - hyper(b1, g)) * g),
            updates, old, names=("state.mu",))
        mu = _ema("scale_by_lion", b2, updates, old, "state.mu")
        return out, ScaleByLionState(as_dtype(mu, mu_dtype))

    return GradientTransformation(init, update)


@schedulable()
def scale_by_trust_ratio(min_norm=0.0, trust_coefficient=1.0, eps=0.0):
    """LAMB's layer-wise scaling: each leaf's update times
    trust_coefficient * ||p|| / (||u|| + eps), norms floored at min_norm; the ratio
    is 1 where either norm is zero."""
    def init(params):
        del params
        return EmptyState()

    def update(updates, state, params=None):
        require_params("scale_by_trust_ratio", params)

        def leaf(u, p):
            u_norm = _norm(u)           # float32 for float16 updates: the ratio too
            p_norm = fnp.maximum(_norm(p).astype(u_norm.dtype), hyper(min_norm, u_norm))
            u_norm = fnp.maximum(u_norm, hyper(min_norm, u_norm))
            zero = (p_norm == 0) | (u_norm == 0)
            ratio = hyper(trust_coefficient, u_norm) * p_norm / (
                fnp.where(zero, 1, u_norm) + hyper(eps, u_norm))
            return u * fnp.where(zero, 1, ratio).astype(u.dtype)

        out = map_checked("scale_by_trust_ratio", leaf, updates, params, names=("params",))
        return out, state

    return GradientTransformation(init, update)


@schedulable()
def scale_by_param_block_norm(min_scale=1e-3):
    """Scale each leaf's update by max(||p||, min_scale)."""
    def init(params):
        del params
        return EmptyState()

    def update(updates, state, params=None):
        require_params("scale_by_param_block_norm", params)
        out = map_checked(
            "scale_by_param_block_norm",
            lambda u, p: u * fnp.maximum(_norm(p).astype(u.dtype), hyper(min_scale, u)),
            updates, params, names=("params",))
        return out, state

    return GradientTransformation(init, update)
