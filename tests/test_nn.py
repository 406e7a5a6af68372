"""fgrad.nn: activations against reference formulas (SciPy where it has them),
derivatives by check_grads, stability at extreme inputs, dtypes and tracing."""
import numpy as np
import pytest
import scipy.special as sp

import fgrad
import fgrad.numpy as fnp
from fgrad import nn
from fgrad._src.jaxpr import eval_closed
from fgrad.test_util import check_grads


def _close(got, want, rtol=1e-7, atol=1e-12):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


SELU_A, SELU_S = 1.6732632423543772, 1.0507009873554805
# name -> (fgrad function, reference); inputs avoid the kinks at 0 (and 6, +-1, -3, 3)
ACTIVATIONS = {
    "relu": (nn.relu, lambda x: np.maximum(x, 0)),
    "relu6": (nn.relu6, lambda x: np.clip(x, 0, 6)),
    "leaky_relu": (nn.leaky_relu, lambda x: np.where(x >= 0, x, 0.01 * x)),
    "leaky_relu_0.2": (lambda x: nn.leaky_relu(x, 0.2), lambda x: np.where(x >= 0, x, 0.2 * x)),
    "elu": (nn.elu, lambda x: np.where(x > 0, x, np.expm1(x))),
    "elu_2": (lambda x: nn.elu(x, 2.0), lambda x: np.where(x > 0, x, 2 * np.expm1(x))),
    "celu": (lambda x: nn.celu(x, 0.5), lambda x: np.where(x > 0, x, 0.5 * np.expm1(x / 0.5))),
    "selu": (nn.selu, lambda x: SELU_S * np.where(x > 0, x, SELU_A * np.expm1(x))),
    "sigmoid": (nn.sigmoid, sp.expit),
    "log_sigmoid": (nn.log_sigmoid, sp.log_expit),
    "softplus": (nn.softplus, lambda x: np.logaddexp(x, 0)),
    "soft_sign": (nn.soft_sign, lambda x: x / (1 + np.abs(x))),
    "silu": (nn.silu, lambda x: x * sp.expit(x)),
    "swish": (nn.swish, lambda x: x * sp.expit(x)),
    "mish": (nn.mish, lambda x: x * np.tanh(np.logaddexp(x, 0))),
    "gelu_tanh": (nn.gelu, _gelu_tanh),
    "gelu_exact": (lambda x: nn.gelu(x, approximate=False),
                   lambda x: 0.5 * x * (1 + sp.erf(x / np.sqrt(2)))),
    "tanh": (nn.tanh, np.tanh),
    "hard_tanh": (nn.hard_tanh, lambda x: np.clip(x, -1, 1)),
    "hard_sigmoid": (nn.hard_sigmoid, lambda x: np.clip(x + 3, 0, 6) / 6),
    "hard_silu": (nn.hard_silu, lambda x: x * np.clip(x + 3, 0, 6) / 6),
    "hard_swish": (nn.hard_swish, lambda x: x * np.clip(x + 3, 0, 6) / 6),
}


def _inputs(rng, shape):
    """Values in (-8, 8), at least 0.1 away from every kink."""
    x = rng.uniform(-8, 8, shape)
    kinks = np.array([-3.0, -1.0, 0.0, 1.0, 3.0, 6.0])
    near = np.abs(x[..., None] - kinks).min(-1) < 0.1
    return np.asarray(np.where(near, x + 0.25, x))


@pytest.mark.parametrize("shape", [(), (3,), (2, 3)])
@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activation_values_and_grads(name, shape, rng):
    f, ref = ACTIVATIONS[name]
    x = _inputs(rng, shape)
    _close(f(x), ref(x), rtol=1e-6, atol=1e-12)
    check_grads(f, (x,), order=2, modes=("fwd", "rev"))


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activation_dtypes(name):
    f = ACTIVATIONS[name][0]
    assert f(np.ones(3, np.float32)).dtype == np.float32
    assert f(np.ones(3)).dtype == np.float64
    (aval,) = fgrad.make_jaxpr(f)(np.ones((2, 2), np.float32)).jaxpr.out_avals
    assert aval.shape == (2, 2) and aval.dtype == np.float32


def test_kinks_have_zero_or_chosen_derivative():
    g = fgrad.grad(lambda x: fnp.sum(nn.relu(x)))
    _close(g(np.array([-1.0, 0.0, 2.0])), [0.0, 0.0, 1.0])
    _close(fgrad.grad(lambda x: fnp.sum(nn.relu6(x)))(np.array([0.0, 6.0, 3.0])), [0, 0, 1.0])
    _close(fgrad.grad(nn.softplus)(0.0), 0.5)
    assert np.isnan(float(nn.relu(np.float64(np.nan))))


def test_extreme_inputs_are_stable():
    big = np.array([-1000.0, -50.0, 0.0, 50.0, 1000.0])
    for dtype in (np.float32, np.float64):
        x = big.astype(dtype)
        for f, ref in ((nn.sigmoid, sp.expit), (nn.softplus, lambda v: np.logaddexp(v, 0)),
                       (nn.log_sigmoid, sp.log_expit), (nn.silu, lambda v: v * sp.expit(v)),
                       (nn.elu, lambda v: np.where(v > 0, v, np.expm1(np.minimum(v, 0))))):
            out = np.asarray(f(x))
            assert np.all(np.isfinite(out)), (f, out)
            _close(out, ref(big).astype(dtype), rtol=1e-6)
        for f in (nn.sigmoid, nn.softplus, nn.log_sigmoid, nn.elu, nn.silu):
            g = fgrad.grad(lambda v: fnp.sum(f(v)))(x)
            assert np.all(np.isfinite(np.asarray(g))), (f, g)


AXES = [-1, 0, (0, 2), None]


@pytest.mark.parametrize("axis", AXES, ids=str)
def test_softmax_family(axis, rng):
    x = rng.standard_normal((2, 3, 4))
    _close(nn.softmax(x, axis=axis), sp.softmax(x, axis=axis), rtol=1e-12)
    _close(nn.log_softmax(x, axis=axis), sp.log_softmax(x, axis=axis), rtol=1e-12)
    _close(nn.logsumexp(x, axis=axis), sp.logsumexp(x, axis=axis), rtol=1e-12)
    _close(nn.logsumexp(x, axis=axis, keepdims=True),
           sp.logsumexp(x, axis=axis, keepdims=True), rtol=1e-12)
    for f in (nn.softmax, nn.log_softmax, nn.logsumexp):
        check_grads(lambda v: f(v, axis=axis), (x,), order=2, modes=("fwd", "rev"))


def test_softmax_family_extremes_and_options(rng):
    x = np.array([[1000.0, 0.0, -1000.0], [-np.inf, 0.0, 1.0], [-np.inf] * 3])
    _close(nn.logsumexp(x, axis=1), [1000.0, np.log1p(np.e), -np.inf])
    _close(nn.softmax(x[:2]), sp.softmax(x[:2], axis=-1))
    _close(nn.log_softmax(x[:2]), sp.log_softmax(x[:2], axis=-1))
    assert nn.softmax(x.astype(np.float32)).dtype == np.float32
    assert np.isfinite(float(nn.logsumexp(np.float32([100.0, 100.0]))))
    g = fgrad.grad(lambda v: nn.logsumexp(v))(np.array([1000.0, 1000.0]))
    _close(g, [0.5, 0.5])
    # the stop_gradient on the max does not change the gradient
    v = rng.standard_normal(4)
    s = sp.softmax(v)
    jac = fgrad.jvp(nn.softmax, (v,), (np.eye(4)[0],))[1]
    _close(jac, s * (np.eye(4)[0] - s[0]), rtol=1e-12)
    # weights b and signs, as scipy.special.logsumexp
    b = np.array([1.0, -2.0, 0.5])
    y = np.array([0.5, 0.1, 2.0])
    lse, sign = nn.logsumexp(y, b=b, return_sign=True)
    want = sp.logsumexp(y, b=b, return_sign=True)
    _close(lse, want[0])
    _close(sign, want[1])
    mask = np.array([True, False, True])
    _close(nn.softmax(y, where=mask), np.where(mask, sp.softmax(np.where(mask, y, -np.inf)), 0))
    _close(nn.logsumexp(y, where=mask), sp.logsumexp(y[mask]))


def test_softmax_reverse_mode_reads_the_weights(rng):
    """softmax's rule: dx = y*g - y*sum(y*g) from y alone (attention's weights);
    masked (-inf) scores get 0, under jit too (exp there is mathlib's, not NumPy's)."""
    x = rng.standard_normal((3, 6)).astype(np.float32)
    x[0, 4:] = x[2, 1:] = -np.inf
    g = rng.standard_normal((3, 6)).astype(np.float32)

    def grad_of(v, c):
        return fgrad.vjp(lambda u: nn.softmax(u, axis=-1), v)[1](c)[0]
    dx = np.asarray(grad_of(x, g))
    y = sp.softmax(x.astype(np.float64), axis=-1)
    _close(dx, y * g - y * (y * g).sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)
    assert not dx[0, 4:].any() and not dx[2].any()
    jitted = np.asarray(fgrad.jit(grad_of)(x, g))
    _close(jitted, dx, rtol=1e-6, atol=1e-7)
    assert not jitted[0, 4:].any() and not jitted[2].any()


def test_one_hot():
    labels = np.array([[0, 2], [1, 5]])
    out = nn.one_hot(labels, 3)
    assert out.dtype == np.float32 and out.shape == (2, 2, 3)
    _close(out, np.eye(3)[np.clip(labels, 0, 2)] * (labels < 3)[..., None])
    _close(nn.one_hot(np.array([1, -1]), 3, axis=0), [[0, 0], [1, 0], [0, 0]])
    assert nn.one_hot(np.array([1]), 2, dtype=np.int32).dtype == np.int32
    closed = fgrad.make_jaxpr(lambda v: nn.one_hot(v, 4))(np.array([0, 3], np.int32))
    _close(eval_closed(closed, np.array([2, 1], np.int32))[0], np.eye(4)[[2, 1]])


def test_standardize_and_glu(rng):
    x = rng.standard_normal((3, 5))
    want = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    _close(nn.standardize(x), want, rtol=1e-10)
    check_grads(nn.standardize, (x,), order=2, modes=("fwd", "rev"))
    y = rng.standard_normal((2, 6))
    _close(nn.glu(y), y[:, :3] * sp.expit(y[:, 3:]))
    with pytest.raises(fgrad.FgradTypeError, match="glu"):
        nn.glu(np.ones((2, 5)))


def _standardize_ref(x, axis=-1, mean=None, variance=None, epsilon=1e-5, where=True):
    """jax.nn.standardize: (x - mean) / sqrt(variance + epsilon), statistics over axis."""
    if mean is None:
        mean = np.mean(x, axis, keepdims=True, where=where)
    if variance is None:
        variance = np.mean((x - mean) ** 2, axis, keepdims=True, where=where)
    return (x - mean) / np.sqrt(variance + epsilon)


NORMALIZE_CASES = {
    "default": {},
    "axis0": {"axis": 0},
    "axes": {"axis": (0, 2)},
    "all": {"axis": None},
    "epsilon": {"axis": 1, "epsilon": 0.5},
}


@pytest.mark.parametrize("name", list(NORMALIZE_CASES))
def test_normalize(name, rng):
    kw = NORMALIZE_CASES[name]
    x = rng.standard_normal((4, 3, 5))   # >= 4 values per statistic: variance not tiny
    want = _standardize_ref(x, **kw)
    _close(nn.normalize(x, **kw), want, rtol=1e-10)
    _close(nn.standardize(x, **kw), want, rtol=1e-10)
    check_grads(lambda v: nn.normalize(v, **kw), (x,), order=2, modes=("fwd", "rev"))
    closed = fgrad.make_jaxpr(lambda v: nn.normalize(v, **kw))(x.astype(np.float32))
    (aval,) = closed.jaxpr.out_avals
    assert aval.shape == x.shape and aval.dtype == np.float32
    _close(eval_closed(closed, x.astype(np.float32))[0], want.astype(np.float32), rtol=1e-4,
           atol=1e-5)


def test_normalize_given_statistics_and_where(rng):
    x = rng.standard_normal((3, 5))
    mean, var = rng.standard_normal((3, 1)), rng.uniform(0.5, 2.0, (3, 1))
    _close(nn.normalize(x, mean=mean, variance=var),
           _standardize_ref(x, mean=mean, variance=var), rtol=1e-12)
    check_grads(lambda v, m, s: nn.normalize(v, mean=m, variance=s), (x, mean, var),
                order=2, modes=("fwd", "rev"))
    w = rng.standard_normal((3, 5)) > -0.5
    w[:, 0] = True
    _close(nn.normalize(x, where=w), _standardize_ref(x, where=w), rtol=1e-10)
    check_grads(lambda v: nn.normalize(v, axis=0, where=w), (x,), order=2,
                modes=("fwd", "rev"))
    assert nn.normalize(np.arange(6, dtype=np.int32).reshape(2, 3)).dtype == np.float32
    assert nn.normalize(x.astype(np.float32)).dtype == np.float32
    # rows of equal values: 0 / sqrt(epsilon), finite
    _close(nn.normalize(np.ones((2, 3))), np.zeros((2, 3)))


def test_namespace_is_public_api_only():
    for name in ("asarray", "canonicalize_axes", "promote_inexact"):
        assert not hasattr(nn, name), name
    for name in nn.__all__:
        assert callable(getattr(nn, name)), name
    assert nn.hard_swish is nn.hard_silu and nn.normalize is nn.standardize


@pytest.mark.parametrize("spelling, exact", [(False, True), ("none", True), (np.bool_(False), True),
                                             (True, False), ("tanh", False)])
def test_gelu_takes_pytorchs_spellings(spelling, exact):
    x = np.linspace(-4, 4, 9)
    want = (0.5 * x * (1 + sp.erf(x / np.sqrt(2)))) if exact else _gelu_tanh(x)
    _close(nn.gelu(x, approximate=spelling), want)


@pytest.mark.parametrize("bad", ["exact", "None", "", 1, None])
def test_gelu_refuses_other_spellings(bad):
    """'none' is truthy: a string taken as a bool gave the tanh form silently."""
    with pytest.raises(ValueError, match="approximate must be False or 'none'"):
        nn.gelu(np.ones(3), approximate=bad)
