"""Derivatives of order 2 and 3 at the special points of fgrad.numpy, fgrad.nn and
fgrad_nn functions: 0, ties (x1 == x2) and the points where an implementation
switches formula. A function written with abs, max or a constant substitution
there loses its higher derivatives (sign(0) = 0, a tie splits in halves); the
references are mpmath's high-precision numerical derivatives of the analytic
function, so every value below is checked against the true one."""
import mpmath
import numpy as np
import pytest

import fgrad
import fgrad.nn as nn
import fgrad.numpy as fnp
from fgrad.test_util import check_grads
from fgrad_nn import losses

mp = mpmath.mp


def _nth(f, n):
    for _ in range(n):
        f = fgrad.grad(f)
    return f


def _true_derivative(g, x, n):
    with mp.workdps(50):
        return float(mp.diff(g, mp.mpf(x), n))


def _softplus(x):
    return mp.log1p(mp.exp(x))


def _sinc(x):
    return mp.sin(mp.pi * x) / (mp.pi * x) if x != 0 else mp.mpf(1)


# (fgrad function of one float64 scalar, the analytic function for mpmath, special points)
SMOOTH = {
    "softplus": (nn.softplus, _softplus, [0.0, -2.0, 3.0, 40.0]),
    "log_sigmoid": (nn.log_sigmoid, lambda x: -_softplus(-x), [0.0, -2.0, 3.0]),
    "sigmoid": (nn.sigmoid, lambda x: 1 / (1 + mp.exp(-x)), [0.0, -2.0]),
    "silu": (nn.silu, lambda x: x / (1 + mp.exp(-x)), [0.0, -2.0]),
    "mish": (nn.mish, lambda x: x * mp.tanh(_softplus(x)), [0.0, -2.0, 3.0]),
    "gelu_tanh": (nn.gelu, lambda x: x / 2 * (1 + mp.tanh(mp.sqrt(2 / mp.pi)
                                                          * (x + 0.044715 * x ** 3))),
                  [0.0, -2.0]),
    "gelu_erf": (lambda x: nn.gelu(x, approximate=False),
                 lambda x: x / 2 * (1 + mp.erf(x / mp.sqrt(2))), [0.0, -2.0]),
    "logaddexp_x1": (lambda x: fnp.logaddexp(x, 0.7),
                     lambda x: mp.log(mp.exp(x) + mp.exp(mp.mpf(0.7))), [0.7, 0.0, 3.0]),
    "logaddexp_x2": (lambda x: fnp.logaddexp(0.7, x),
                     lambda x: mp.log(mp.exp(x) + mp.exp(mp.mpf(0.7))), [0.7, -3.0]),
    "logaddexp2": (lambda x: fnp.logaddexp2(x, 0.5),
                   lambda x: mp.log(2 ** x + 2 ** mp.mpf(0.5), 2), [0.5, -1.0]),
    "hypot_x1": (lambda x: fnp.hypot(x, 1.0), lambda x: mp.sqrt(x * x + 1), [0.0, 1.0, -1.0, 2.0]),
    "hypot_x2": (lambda x: fnp.hypot(-1.0, x), lambda x: mp.sqrt(x * x + 1), [0.0, 1.0, -1.0]),
    # sinc: 0, inside the series, both sides of its switch at |pi x| = 1, the quotient
    "sinc": (fnp.sinc, _sinc, [0.0, 1e-3, 0.3, 1 / np.pi, 0.33, -2.5]),
    "sinh": (fnp.sinh, mp.sinh, [0.0, 1.0, -1.0, 0.999, 3.0]),
    "cosh": (fnp.cosh, mp.cosh, [0.0, -2.0]),
    "arcsinh": (fnp.arcsinh, mp.asinh, [0.0, -1.0, 2e8]),
    "arctanh": (fnp.arctanh, mp.atanh, [0.0, 0.5]),
    "arcsin": (fnp.arcsin, mp.asin, [0.0, -0.5]),
    "arccos": (fnp.arccos, mp.acos, [0.0, 0.5]),
    "arctan": (fnp.arctan, mp.atan, [0.0, 2.0]),
    "arctan2_y": (lambda y: fnp.arctan2(y, 1.0), lambda y: mp.atan2(y, 1), [0.0, 1.0]),
    "arctan2_x": (lambda x: fnp.arctan2(1.0, x), lambda x: mp.atan2(1, x), [0.0, -1.0]),
    "expm1": (fnp.expm1, mp.expm1, [0.0]),
    "log1p": (fnp.log1p, mp.log1p, [0.0]),
    "power_exponent": (lambda y: fnp.power(2.0, y), lambda y: 2 ** y, [0.0]),
    "cbrt": (fnp.cbrt, lambda x: mp.sign(x) * abs(x) ** (mp.mpf(1) / 3), [1.0, -8.0]),
}


@pytest.mark.parametrize("name", sorted(SMOOTH))
def test_derivatives_of_order_1_to_3_at_special_points(name):
    f, g, points = SMOOTH[name]
    for x in points:
        for n in (1, 2, 3):
            got = float(_nth(f, n)(np.float64(x)))
            want = _true_derivative(g, x, n)
            assert np.isclose(got, want, rtol=1e-9, atol=1e-12), (name, x, n, got, want)


def test_issue_values():
    assert float(fgrad.grad(fgrad.grad(nn.softplus))(0.0)) == 0.25
    _close(_nth(nn.mish, 3)(np.float64(0)), -0.096)
    _close(_nth(lambda x: fnp.hypot(x, 1.0), 2)(np.float64(0)), 1.0)
    _close(_nth(fnp.sinc, 2)(np.float64(0)), -np.pi ** 2 / 3)
    _close(_nth(fnp.sinc, 4)(np.float64(0)), np.pi ** 4 / 5)


def _close(a, b, rtol=1e-9, atol=1e-12):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


def test_hessians_at_ties_under_jit_and_vmap():
    def lae(v):
        return fnp.logaddexp(v[0], v[1])

    tie = np.array([0.3, 0.3])
    want = np.array([[0.25, -0.25], [-0.25, 0.25]])
    _close(fgrad.hessian(lae)(tie), want)
    _close(fgrad.jit(fgrad.hessian(lae))(tie), want)
    _close(fgrad.hessian(lambda v: fnp.logaddexp2(v[0], v[1]))(tie), want * np.log(2))
    # hypot at a tie |x1| == |x2| and on an axis: (I - u u^T) / r with u = x / r
    for x in (np.array([1.0, -1.0]), np.array([0.0, 2.0]), np.array([-3.0, 0.0])):
        r = np.hypot(*x)
        u = x / r
        h = (np.eye(2) - np.outer(u, u)) / r
        _close(fgrad.hessian(lambda v: fnp.hypot(v[0], v[1]))(x), h)
        _close(fgrad.jit(fgrad.hessian(lambda v: fnp.hypot(v[0], v[1])))(x), h)
    # logsumexp with tied maxima: the Hessian is diag(p) - p p^T
    z = np.array([1.0, 1.0, -0.5, 1.0])
    p = np.exp(z - np.log(np.exp(z).sum()))
    _close(fgrad.hessian(nn.logsumexp)(z), np.diag(p) - np.outer(p, p))
    _close(fgrad.jit(fgrad.hessian(nn.logsumexp))(z), np.diag(p) - np.outer(p, p))
    _close(fgrad.jacrev(nn.softmax)(z), np.diag(p) - np.outer(p, p))
    _close(fgrad.jacrev(nn.log_softmax)(z), np.eye(4) - p)
    # per element: vmap of grad of grad, eager and jitted
    xs = np.array([0.0, 0.0, 1.5])
    d2 = fgrad.vmap(fgrad.grad(fgrad.grad(nn.softplus)))
    want = np.exp(-xs) / (1 + np.exp(-xs)) ** 2
    _close(d2(xs), want)
    _close(fgrad.jit(d2)(xs), want)
    sinc4 = fgrad.vmap(_nth(fnp.sinc, 4))
    _close(fgrad.jit(sinc4)(np.array([0.0, -0.0])), np.full(2, np.pi ** 4 / 5))
    _close(sinc4(np.array([0.0])), [np.pi ** 4 / 5])


def test_logistic_regression_hessian_at_zero_weights():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((20, 3))
    y = (rng.random(20) > 0.5).astype(np.float64)

    def loss(w):
        return losses.binary_cross_entropy_with_logits(X @ w, y)

    def loss_log_sigmoid(w):
        z = X @ w
        return -fnp.mean(y * nn.log_sigmoid(z) + (1 - y) * nn.log_sigmoid(-z))

    want = X.T @ X / (4 * len(X))    # sigmoid'(0) = 1/4 for every sample
    w0 = np.zeros(3)
    for f in (loss, loss_log_sigmoid):
        _close(fgrad.hessian(f)(w0), want)
        _close(fgrad.jit(fgrad.hessian(f))(w0), want)
    # the multinomial version at W = 0: kron(X^T X / n, diag(p) - p p^T), p uniform
    labels = rng.integers(0, 4, 20)

    def multinomial(w):
        return losses.softmax_cross_entropy_with_integer_labels(X @ w.reshape(3, 4), labels)

    block = np.eye(4) / 4 - np.full((4, 4), 1 / 16)
    _close(fgrad.hessian(multinomial)(np.zeros(12)), np.kron(X.T @ X / len(X), block))
    # one Newton step from zero moves the weights (it used to divide by a zero Hessian)
    step = np.linalg.solve(np.asarray(fgrad.hessian(loss)(w0)), np.asarray(fgrad.grad(loss)(w0)))
    assert np.all(np.isfinite(step)) and np.any(step != 0)


def test_huber_is_quadratic_at_zero_and_takes_the_linear_side_at_delta():
    def huber(x, delta=1.0):
        return losses.huber_loss(x, fnp.zeros_like(x), delta=delta, reduction="sum")

    d1, d2 = fgrad.grad(huber), fgrad.grad(fgrad.grad(huber))
    _close(d2(np.float64(0)), 1.0)          # smooth at 0: 0.5 d²
    _close(d2(np.float64(0.5)), 1.0)
    _close(d2(np.float64(2)), 0.0)
    # |d| == delta: the first derivative is continuous; the second is the linear side's
    for x in (1.0, -1.0):
        _close(d1(np.float64(x)), x)
        _close(d2(np.float64(x)), 0.0)
    _close(fgrad.grad(fgrad.grad(lambda x: huber(x, 2.0)))(np.float64(1.9)), 1.0)


@pytest.mark.parametrize("f", [nn.softplus, nn.log_sigmoid, nn.mish, fnp.sinc,
                               lambda x: fnp.logaddexp(x, 0.25 - x),
                               lambda x: fnp.hypot(x, 0.5 - x)],
                         ids=["softplus", "log_sigmoid", "mish", "sinc", "logaddexp", "hypot"])
def test_check_grads_order_2_away_from_special_points(f):
    for x in (-3.7, -0.9, 0.21, 0.4, 2.6):
        check_grads(f, (np.float64(x),), order=2)


def test_values_keep_numpy_semantics():
    a = np.array([0.0, 1.0, -np.inf, np.inf, -np.inf, np.inf, np.nan, 1e308, 3.0, 700.0])
    b = np.array([0.0, 1.0, -np.inf, np.inf, 1.0, -np.inf, 1.0, 1e308, -700.0, -3.0])
    with np.errstate(invalid="ignore"):
        want = np.logaddexp(a, b)
    np.testing.assert_array_equal(np.asarray(fnp.logaddexp(a, b)), want)
    np.testing.assert_array_equal(np.asarray(fgrad.jit(fnp.logaddexp)(a, b)), want)
    h1 = np.array([0.0, 3.0, -3.0, np.inf, np.nan, 1e308, 1e-320, -0.0, 5.0])
    h2 = np.array([0.0, 4.0, 4.0, np.nan, -np.inf, 1e308, 1e-320, -0.0, -5.0])
    np.testing.assert_array_equal(np.asarray(fnp.hypot(h1, h2)), np.hypot(h1, h2))
    np.testing.assert_array_equal(np.asarray(fgrad.jit(fnp.hypot)(h1, h2)), np.hypot(h1, h2))
    x = np.concatenate([np.linspace(-3, 3, 601), [0.0, -0.0, 1 / np.pi, 1e-300]])
    for dt, ulps in ((np.float64, 1), (np.float32, 1)):
        xx = x.astype(dt)
        err = np.abs(np.asarray(fnp.sinc(xx)) - np.sinc(xx.astype(np.float64)))
        assert err.max() <= ulps * np.finfo(dt).eps, (dt, err.max())
    # the derivatives stay free of NaN at the edges (the series and quotient guard
    # each other's inputs)
    for x in (0.0, 1 / np.pi, 1e-300):
        assert np.isfinite(float(_nth(fnp.sinc, 3)(np.float64(x))))
    g = fgrad.grad(lambda v: fnp.logaddexp(v[0], v[1]))
    # equal infinities: the result is their mean, derivatives 1/2 as at any tie
    # (reverse mode used to give nan)
    _close(g(np.array([-np.inf, -np.inf])), [0.5, 0.5])
    _close(g(np.array([np.inf, np.inf])), [0.5, 0.5])
    _close(fgrad.jit(g)(np.array([-np.inf, -np.inf])), [0.5, 0.5])
    _close(g(np.array([-np.inf, 2.0])), [0.0, 1.0])
    _close(fgrad.grad(lambda v: fnp.hypot(v[0], v[1]))(np.array([np.inf, 1.0])), [1.0, 0.0])


def test_library_gradients_stay_free_of_nan_where_the_derivative_exists():
    """Selects whose other side is nan or inf must select inputs, not only results
    (0 · nan in reverse mode); each case gave nan before."""
    # power with an array exponent: d/dx x^0 = 0 at x = 0 too (polynomial features)
    x, k = np.array([0.0, 0.0, 2.0, 0.0]), np.array([0.0, 1.0, 0.0, 2.0])
    want = np.array([0.0, 1.0, 0.0, 0.0])
    poly = lambda x: fnp.sum(fnp.power(x, k))
    _close(fgrad.grad(poly)(x), want)
    _close(fgrad.jit(fgrad.grad(poly))(x), want)
    _close(fgrad.vmap(fgrad.grad(fgrad.grad(fnp.power)))(x, k), [0.0, 0.0, 0.0, 2.0])
    # gelu's tanh form for huge |x| (x³ overflowed inside the saturated tanh)
    _close(fgrad.vmap(fgrad.grad(nn.gelu))(np.array([1e300, -1e300, 1e10])), [1.0, 0.0, 1.0])
    _close(nn.gelu(np.array([30.0, -30.0, 1e300])), [30.0, 0.0, 1e300])


def _one_sided(f, x, n, side, h=1e-6):
    """The n-th derivative of f at x from one side (side = -1 or +1): a difference of
    fgrad's derivative of order n - 1 at two points strictly on that side."""
    g = _nth(f, n - 1)
    a, b = x + side * h, x + side * 2 * h
    return (float(g(np.float64(b))) - float(g(np.float64(a)))) / (b - a)


KINKS = [  # (name, f, kink, order of the first derivative that jumps)
    ("relu", nn.relu, 0.0, 1), ("relu6", nn.relu6, 6.0, 1), ("leaky_relu", nn.leaky_relu, 0.0, 1),
    ("elu", lambda x: nn.elu(x, 2.0), 0.0, 1), ("celu", lambda x: nn.celu(x, 2.0), 0.0, 2),
    ("selu", nn.selu, 0.0, 1), ("hard_tanh", nn.hard_tanh, 1.0, 1),
    ("hard_tanh_low", nn.hard_tanh, -1.0, 1), ("hard_sigmoid", nn.hard_sigmoid, 3.0, 1),
    ("huber", lambda x: losses.huber_loss(x, 0.0 * x, delta=1.5, reduction="sum"), 1.5, 2),
    ("huber_low", lambda x: losses.huber_loss(x, 0.0 * x, delta=1.5, reduction="sum"), -1.5, 2),
]


@pytest.mark.parametrize("name, f, x, n", KINKS, ids=[k[0] for k in KINKS])
def test_kinks_take_one_sides_derivative(name, f, x, n):
    """Genuinely non-smooth functions: the derivatives below the jump are continuous,
    and the one that jumps is one side's (JAX's conventions), never a blend or a 0
    from sign(0)."""
    for k in range(1, n):
        got = float(_nth(f, k)(np.float64(x)))
        assert np.isclose(got, _one_sided(f, x, k, -1), atol=1e-4), (name, k)
        assert np.isclose(got, _one_sided(f, x, k, +1), atol=1e-4), (name, k)
    got = float(_nth(f, n)(np.float64(x)))
    left, right = _one_sided(f, x, n, -1), _one_sided(f, x, n, +1)
    assert not np.isclose(left, right, atol=1e-3), (name, left, right)
    assert np.isclose(got, left, atol=1e-4) or np.isclose(got, right, atol=1e-4), \
        (name, got, left, right)


def test_domain_endpoints_give_the_infinite_derivative():
    """No constant substituted at an endpoint (arccos(-1) = pi had derivative 0)."""
    def d(f, x):
        return float(fgrad.jvp(f, (np.float64(x),), (np.float64(1),))[1])

    assert d(fnp.arccos, -1.0) == d(fnp.arccos, 1.0) == -np.inf
    assert d(fnp.arcsin, -1.0) == d(fnp.arcsin, 1.0) == np.inf
    assert d(fnp.arccosh, 1.0) == np.inf
    _close(fnp.arccos(np.array([-1.0, 1.0, -0.0])), [np.pi, 0.0, np.pi / 2], rtol=0, atol=0)
