"""Regressions found by the differential sweeps of the transforms (tests/sweep_*.py).

Each test pins one silent wrong answer that a sweep found: the value a public
function gives eagerly, under jit and under vmap, against NumPy/JAX's documented
semantics or a loop over examples.
"""
import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp


def _eager_jit_vmap(f, x, i):
    """f(x, i) eagerly, under jit, and (for the second of two stacked i) under vmap."""
    return [f(x, i), fgrad.jit(f)(x, i),
            fgrad.vmap(f, in_axes=(None, 0))(x, np.stack([i[::-1], i]))[1]]


# ----------------------------------------------------------------------------
# Out-of-bounds modes: `mode`/`fill_value` were accepted and ignored

IDX = np.array([1, 9, -1, -5, -4])
X = np.arange(4.0)


@pytest.mark.parametrize("f, want", [
    (lambda x, i: x.at[i].get(mode="fill", fill_value=-7.0), [1, -7, 3, -7, 0]),
    (lambda x, i: x.at[i].get(mode="fill"), [1, np.nan, 3, np.nan, 0]),
    (lambda x, i: x.at[i].get(mode="clip"), [1, 3, 3, 0, 0]),
    (lambda x, i: x.at[i].set(10.0, mode="clip"), [10, 10, 2, 10]),
    (lambda x, i: x.at[i].add(10.0, mode="drop"), [10, 11, 2, 13]),
    (lambda x, i: x.at[i].power(2.0, mode="clip"), [0, 1, 2, 9]),
    (lambda x, i: fnp.take(x, i, mode="fill"), [1, np.nan, 3, np.nan, 0]),
    (lambda x, i: fnp.take(x, i, mode="fill", fill_value=-1.0), [1, -1, 3, -1, 0]),
    (lambda x, i: fnp.take_along_axis(x, i, axis=0, mode="fill"), [1, np.nan, 3, np.nan, 0]),
])
def test_out_of_bounds_modes(f, want):
    for got in _eager_jit_vmap(f, fnp.asarray(X), IDX):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want, float))


def test_fill_defaults_per_dtype_and_scalar_index():
    x = fnp.arange(4, dtype="int32")
    np.testing.assert_array_equal(x.at[IDX].get(mode="fill"),
                                  [1, -2 ** 31, 3, -2 ** 31, 0])
    np.testing.assert_array_equal(fnp.take(x.astype("uint8"), IDX.astype("uint8"),
                                           mode="fill"), [1, 255, 255, 255, 255])
    assert np.isnan(fnp.asarray(X).at[9].get(mode="fill"))
    np.testing.assert_array_equal(fnp.ones((2, 2)).at[1, 5].set(3.0, mode="clip"),
                                  [[1, 1], [1, 3]])


def test_unknown_update_mode_is_an_error():
    with pytest.raises(ValueError, match="mode"):
        fnp.asarray(X).at[0].set(1.0, mode="wrap")
    with pytest.raises(ValueError, match="mode"):
        fnp.asarray(X).at[0].get(mode="bogus")


# ----------------------------------------------------------------------------
# Derivatives at edge points (tests/sweep_grad.py, against JAX and themselves)

@pytest.mark.parametrize("x, y", [(6.0, 3.0), (-6.0, 3.0), (6.0, -3.0), (0.0, 3.0), (5.0, 3.0)])
def test_mod_derivative_at_exact_multiples(x, y):
    # x mod y = x - floor(x / y) y: d/dx 1, d/dy -floor(x / y), at multiples too
    # (the signed zero NumPy gives there used to be a constant with derivative 0)
    want = (1.0, -np.floor(x / y))
    for g in (fgrad.grad(fnp.mod, (0, 1)), fgrad.jit(fgrad.grad(fnp.mod, (0, 1)))):
        np.testing.assert_array_equal(np.asarray(g(np.float64(x), np.float64(y))), want)
    assert np.signbit(fnp.mod(np.float64(x), np.float64(y))) == np.signbit(np.mod(x, y))
    assert fgrad.grad(lambda t: fnp.mod(t, 2 * np.pi))(0.0) == 1.0


@pytest.mark.parametrize("f", [fnp.logaddexp, fnp.logaddexp2])
@pytest.mark.parametrize("inf", [np.inf, -np.inf])
def test_logaddexp_equal_infinities_split_the_derivative(f, inf):
    # the function grows by t when both operands do: derivatives 1/2 each, as at
    # any finite tie (they were 1 each, twice the directional derivative)
    x = np.float64(inf)
    for g in (fgrad.grad(f, (0, 1)), fgrad.jit(fgrad.grad(f, (0, 1)))):
        np.testing.assert_array_equal(np.asarray(g(x, x)), [0.5, 0.5])
    assert f(x, x) == inf


# ----------------------------------------------------------------------------
# fgrad_nn losses against PyTorch's at masked (-inf) logits

def test_cross_entropy_with_masked_logits_is_finite():
    # PyTorch's F.cross_entropy([[0, -inf, 1], [2, 0.5, -inf]], [0, 1]) = 1.50733748...
    # (mean of log(1 + e) and log(e^2 + e^0.5) - 0.5); the one-hot product gave nan
    from fgrad_nn import losses, training
    logits = np.array([[0.0, -np.inf, 1.0], [2.0, 0.5, -np.inf]])
    labels = np.array([0, 1])
    want = (np.log1p(np.e) + np.log(np.exp(2.0) + np.exp(0.5)) - 0.5) / 2
    for f in (losses.softmax_cross_entropy_with_integer_labels, fgrad.jit(
            losses.softmax_cross_entropy_with_integer_labels)):
        np.testing.assert_allclose(float(f(logits, labels)), want, rtol=1e-12)
    np.testing.assert_allclose(
        float(losses.softmax_cross_entropy(logits, labels, weight=fnp.array([1.0, 2.0, 3.0]))),
        (np.log1p(np.e) + 2 * (np.log(np.exp(2.0) + np.exp(0.5)) - 0.5)) / 3, rtol=1e-12)
    logp = np.asarray(fgrad.nn.log_softmax(logits))
    np.testing.assert_allclose(float(losses.nll_loss(logp, labels)), want, rtol=1e-12)
    g = fgrad.grad(losses.softmax_cross_entropy_with_integer_labels)(logits, labels)
    assert np.isfinite(np.asarray(g)).all() and np.asarray(g)[0, 1] == 0
    loader = [(logits, labels)]
    got = training.evaluate(lambda p, x: x, None, loader)["loss"]
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("f, x, want", [
    (fnp.arcsin, 1.0, np.inf), (fnp.arcsin, -1.0, np.inf),
    (fnp.arccos, 1.0, -np.inf), (fnp.arccos, -1.0, -np.inf),
    (fnp.arccosh, 1.0, np.inf), (fnp.cbrt, 0.0, np.inf), (fnp.cbrt, -0.0, np.inf),
    (lambda p: fgrad.scipy.special.logit(p), 0.0, np.inf),
    (lambda p: fgrad.scipy.special.logit(p), 1.0, np.inf),
])
def test_infinite_derivatives_agree_in_both_modes(f, x, want):
    # reverse mode met 0 * inf inside the composite formula (NaN) where forward
    # mode gave the true infinite derivative
    import fgrad.scipy.special  # noqa: F401
    x = np.float64(x)
    assert fgrad.grad(f)(x) == want
    assert fgrad.jit(fgrad.grad(f))(x) == want
    assert fgrad.jvp(f, (x,), (np.float64(1.0),))[1] == want
    assert fgrad.vjp(f, x)[1](np.float64(1.0))[0] == want
    inner = np.float64(2.0 if f is fnp.arccosh else 0.25)
    np.testing.assert_allclose(float(fgrad.grad(f)(inner)),
                               float(fgrad.jvp(f, (inner,), (np.float64(1.0),))[1]), rtol=1e-15)


# ----------------------------------------------------------------------------
# jit against eager (tests/sweep_jit_bits.py)

@pytest.mark.parametrize("x, bins", [
    (np.array([4, 2, 0], np.uint8), np.array([5, 3, 1], np.uint8)),      # decreasing
    (np.array([0, 50, -120], np.int8), np.array([-100, 100], np.int8)),  # 200 wraps in int8
    (np.array([False, True, True, False]), np.array([True, True, False, False])),
])
def test_digitize_monotonicity_of_integer_and_bool_bins(x, bins):
    # eager digitize judged the bins' direction by np.diff, which wraps
    want = np.digitize(x, bins)
    np.testing.assert_array_equal(fnp.digitize(x, bins), want)
    np.testing.assert_array_equal(fgrad.jit(fnp.digitize)(x, bins), want)


def test_histogram_bins_order_of_narrow_integers():
    edges = np.array([-100, 0, 100], np.int8)
    np.testing.assert_array_equal(fnp.histogram(np.array([1, 2, -3], np.int8), edges)[0], [1, 2])
    with pytest.raises(ValueError, match="monotonically"):
        fnp.histogram(np.array([1, 2], np.uint8), np.array([5, 3], np.uint8))


def test_fmod_of_booleans_under_jit():
    x, y = np.array([False, True, True]), np.array([True, True, True])
    for f in (fnp.fmod, fgrad.jit(fnp.fmod)):
        got = f(x, y)
        assert got.dtype == np.int8
        np.testing.assert_array_equal(got, np.fmod(x, y))


def _cofactors(a):
    n = a.shape[0]
    return np.array([[(-1) ** (i + j) * np.linalg.det(np.delete(np.delete(a, i, 0), j, 1))
                      for j in range(n)] for i in range(n)])


@pytest.mark.parametrize("a", [
    np.array([[1.0, 1.0], [1.0, 1.0]]), np.zeros((2, 2)), np.arange(9.0).reshape(3, 3),
    np.diag([1.0, 0.0, 2.0]), np.outer([1.0, 2, 3], [1.0, 0, 2]) + np.outer([0, 1.0, 0], [1.0, 1, 1]),
    np.array([[2.0, -1.0, 0.5], [0.3, 1.0, 2.0], [1.0, 1.0, -1.0]]),
], ids=["ones", "zeros", "arange", "diag0", "rank2", "regular"])
def test_det_derivative_is_the_cofactor_matrix(a):
    # the chain rule through LU divided by the zero pivot: NaN at every singular a
    want = _cofactors(a)
    g = fgrad.grad(fnp.linalg.det)
    np.testing.assert_allclose(np.asarray(g(a)), want, atol=1e-12)
    np.testing.assert_allclose(np.asarray(fgrad.jit(g)(a)), want, atol=1e-12)
    np.testing.assert_allclose(np.asarray(fgrad.vmap(g)(np.stack([a, 2 * a])))[1],
                               _cofactors(2 * a), atol=1e-12)
    t = np.linspace(-1, 1, a.size).reshape(a.shape)
    np.testing.assert_allclose(float(fgrad.jvp(fnp.linalg.det, (a,), (t,))[1]),
                               np.sum(want * t), atol=1e-12)


def test_det_second_derivative_at_the_identity():
    # d2 det(I)[e_ij, e_kl] = 1 for (i,j,k,l) = (i,i,k,k), -1 for (i,k,k,i), i != k
    h = np.asarray(fgrad.hessian(fnp.linalg.det)(np.eye(3)))
    want = np.zeros((3, 3, 3, 3))
    for i in range(3):
        for k in range(3):
            if i != k:
                want[i, i, k, k], want[i, k, k, i] = 1.0, -1.0
    np.testing.assert_allclose(h, want, atol=1e-12)


def test_dirichlet_float32_point_with_float64_concentrations():
    # float32 x promoted by float64 alpha sums to 1 only within float32's rounding:
    # the float64 tolerance made this point of the simplex -inf
    import fgrad.scipy.stats as fst
    from scipy import stats
    x, alpha = np.array([0.2, 0.3, 0.5], np.float32), np.array([1.0, 2.0, 3.0])
    want = stats.dirichlet.logpdf(x.astype(np.float64) / x.astype(np.float64).sum(), alpha)
    for f in (fst.dirichlet.logpdf, fgrad.jit(fst.dirichlet.logpdf)):
        np.testing.assert_allclose(float(f(x, alpha)), want, rtol=1e-6)
    assert float(fst.dirichlet.logpdf(np.array([0.2, 0.3, 0.5001]), alpha)) == -np.inf
