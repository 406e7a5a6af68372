"""NumPy names added for issue 17 (statistics, polynomials, index tricks, histograms,
set operations, errstate, lax's *_in_dim helpers, device counts): values against
NumPy, check_grads (order 2, forward and reverse, float64), jit equals eager, vmap
equals a Python loop, and clear errors where shapes would depend on values."""
import warnings

import numpy as np
import pytest

import fgrad
import fgrad.lax as lax
import fgrad.numpy as fnp
from fgrad.test_util import check_grads


def grads(f, *args):
    check_grads(f, args, order=2, modes=("fwd", "rev"))


def close(got, want, rtol=1e-12, atol=1e-13):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)


def jit_and_vmap(f, *args, rtol=1e-12):
    """jit(f) equals f; vmap(f) over a stack of the arguments equals a loop."""
    eager = f(*args)
    close(fgrad.jit(f)(*args), eager, rtol=rtol)
    stacked = [np.stack([a, a * 0.5 + 0.25]) for a in args]
    batched = fgrad.vmap(f)(*stacked)
    for i in range(2):
        close(fgrad.tree.leaves(batched)[0][i],
              fgrad.tree.leaves(f(*[s[i] for s in stacked]))[0], rtol=rtol)


@pytest.fixture
def rng():
    return np.random.default_rng(1)


# ----------------------------------------------------------------------------
# statistics

QUANTILE_METHODS = ["linear", "lower", "higher", "nearest", "midpoint", "hazen", "weibull",
                    "median_unbiased", "normal_unbiased", "interpolated_inverted_cdf"]


@pytest.mark.parametrize("method", QUANTILE_METHODS)
def test_quantile_methods_match_numpy(rng, method):
    a = rng.normal(size=(4, 5, 6))
    for axis in (None, 1, (0, 2)):
        for q in (0.3, [0.0, 0.25, 0.5, 1.0]):
            for keepdims in (False, True):
                close(fnp.quantile(a, q, axis=axis, method=method, keepdims=keepdims),
                      np.quantile(a, q, axis=axis, method=method, keepdims=keepdims))


def test_percentile_median_and_nan_variants_match_numpy(rng):
    a = rng.normal(size=(4, 5, 6))
    b = a.copy()
    b[0, 0, :3] = np.nan
    b[1, 1, :] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for axis in (None, 2, (1, 2)):
            close(fnp.percentile(a, [10, 90], axis=axis), np.percentile(a, [10, 90], axis=axis))
            close(fnp.median(a, axis=axis), np.median(a, axis=axis))
            close(fnp.median(b, axis=axis), np.median(b, axis=axis))
            close(fnp.nanquantile(b, [0.1, 0.7], axis=axis),
                  np.nanquantile(b, [0.1, 0.7], axis=axis))
            close(fnp.nanpercentile(b, 35, axis=axis), np.nanpercentile(b, 35, axis=axis))
            close(fnp.nanmedian(b, axis=axis, keepdims=True),
                  np.nanmedian(b, axis=axis, keepdims=True))
            close(fnp.nanvar(b, axis=axis), np.nanvar(b, axis=axis))
            close(fnp.nanstd(b, axis=axis, ddof=1), np.nanstd(b, axis=axis, ddof=1))
        close(fnp.nancumsum(b, axis=1), np.nancumsum(b, axis=1))
        close(fnp.nancumprod(b), np.nancumprod(b))
    c = b[[0, 2, 3]]          # nanargmax raises on all-NaN slices in NumPy
    np.testing.assert_array_equal(fnp.nanargmax(c, axis=2), np.nanargmax(c, axis=2))
    np.testing.assert_array_equal(fnp.nanargmin(c, axis=1), np.nanargmin(c, axis=1))
    assert int(fnp.nanargmax(b, axis=2)[1, 1]) == -1   # all NaN: -1, as JAX
    assert float(fnp.median(np.arange(5))) == 2.0


def test_quantile_errors():
    with pytest.raises(ValueError, match=r"q must lie in \[0, 1\]"):
        fnp.quantile(np.ones(3), 1.5)
    with pytest.raises(ValueError, match=r"q must lie in \[0, 100\]"):
        fnp.percentile(np.ones(3), -1)
    with pytest.raises(fgrad.FgradTypeError, match="method 'inverted_cdf' is not supported"):
        fnp.quantile(np.ones(3), 0.5, method="inverted_cdf")


def test_quantile_grads_jit_vmap(rng):
    a = rng.normal(size=(3, 5))
    grads(lambda a, q: fnp.quantile(a, q, axis=1), a, np.array([0.2, 0.7]))
    grads(lambda a: fnp.median(a, axis=0), a)
    b = a.copy()
    b[0, :2] = np.nan
    grads(lambda a: fnp.nanmedian(a, axis=1), b)
    grads(lambda a: fnp.nanpercentile(a, 30.0, axis=1), b)
    grads(lambda a: fnp.nanvar(a, axis=1) + fnp.nanstd(a, axis=1, ddof=1), b)
    jit_and_vmap(lambda a, q: fnp.quantile(a, q, axis=0), a, np.array(0.3))
    jit_and_vmap(lambda b: fnp.nanmedian(b), b)


def test_cov_corrcoef(rng):
    x, y = rng.normal(size=(3, 7)), rng.normal(size=(7,))
    fw, aw = rng.integers(1, 4, size=7), rng.uniform(0.5, 1.0, size=7)
    for kw in ({}, dict(bias=True), dict(ddof=2), dict(fweights=fw), dict(aweights=aw),
               dict(fweights=fw, aweights=aw), dict(rowvar=False)):
        close(fnp.cov(x, **kw), np.cov(x, **kw))
    close(fnp.cov(x, y), np.cov(x, y))
    close(fnp.cov(y), np.cov(y))
    close(fnp.corrcoef(x), np.corrcoef(x))
    close(fnp.corrcoef(x, y, rowvar=True), np.corrcoef(x, y))
    grads(lambda x: fnp.cov(x, aweights=aw), x)
    grads(fnp.corrcoef, x)
    jit_and_vmap(fnp.corrcoef, x)


# ----------------------------------------------------------------------------
# lax helpers and device counts

def test_lax_in_dim_helpers(rng):
    x = rng.normal(size=(3, 4))
    close(lax.dynamic_slice_in_dim(x, 1, 2, axis=1), x[:, 1:3])
    close(lax.dynamic_slice_in_dim(x, 5, 2, axis=0), x[1:3])        # clamped
    close(lax.dynamic_update_slice_in_dim(x, np.zeros((3, 1)), 2, 1),
          np.concatenate([x[:, :2], np.zeros((3, 1)), x[:, 3:]], 1))
    close(lax.index_in_dim(x, -1, 1, keepdims=False), x[:, -1])
    close(lax.index_in_dim(x, 0, 0), x[:1])
    close(lax.dynamic_index_in_dim(x, 2, 0, keepdims=False), x[2])
    close(lax.dynamic_update_index_in_dim(x, np.zeros(4), 1, 0), np.where(
        np.arange(3)[:, None] == 1, 0.0, x))
    f = fgrad.jit(lambda x, i: lax.dynamic_slice_in_dim(x, i, 2, 1))
    close(f(x, 2), x[:, 2:4])
    close(fgrad.vmap(lambda i: lax.dynamic_index_in_dim(x, i, 0, False))(np.array([2, 0])),
          x[[2, 0]])
    grads(lambda x, u: lax.dynamic_update_slice_in_dim(x, u, 1, 0) * 2.0,
          x, np.ones((2, 4)))
    with pytest.raises(fgrad.FgradTypeError, match="index 4 is out of range"):
        lax.index_in_dim(x, 4, 1)


def test_device_count():
    assert fgrad.device_count() == fgrad.local_device_count() == len(
        fgrad.devices(fgrad.default_backend()))
    assert fgrad.device_count("cpu") == 1


# ----------------------------------------------------------------------------
# polynomials and convolution

@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_convolve_correlate_match_numpy(rng, mode):
    for n in range(1, 6):
        for m in range(1, 6):
            a, v = rng.normal(size=n), rng.normal(size=m)
            close(fnp.convolve(a, v, mode), np.convolve(a, v, mode))
            close(fnp.correlate(a, v, mode), np.correlate(a, v, mode))
    with pytest.raises(ValueError, match="mode must be one of"):
        fnp.convolve(a, v, "circular")
    with pytest.raises(ValueError, match="cannot be empty"):
        fnp.correlate(a, np.ones(0))


def test_convolve_correlate_grads_jit_vmap(rng):
    a, v = rng.normal(size=5), rng.normal(size=3)
    grads(lambda a, v: fnp.convolve(a, v, "same"), a, v)
    grads(lambda a, v: fnp.correlate(a, v, "full"), v, a)
    jit_and_vmap(lambda a, v: fnp.convolve(a, v, "valid"), a, v)
    jit_and_vmap(lambda a, v: fnp.correlate(a, v, "same"), v, a)


def test_polynomial_arithmetic_matches_numpy(rng):
    p, x = rng.normal(size=4), rng.normal(size=(2, 3))
    close(fnp.polyval(p, x), np.polyval(p, x))
    close(fnp.polyval(p, 2.5), np.polyval(p, 2.5))
    close(fnp.vander(x[0]), np.vander(x[0]))
    close(fnp.vander(x[0], 5, increasing=True), np.vander(x[0], 5, increasing=True))
    close(fnp.poly([1.0, 2.0, -3.0]), np.poly([1.0, 2.0, -3.0]))
    for f in ("polyadd", "polysub", "polymul"):
        close(getattr(fnp, f)([1.0, 2.0], [3.0, 4.0, 5.0]),
              getattr(np, f)([1.0, 2.0], [3.0, 4.0, 5.0]))
    for m in (1, 2, 4):
        close(fnp.polyder(p, m), np.polyder(p, m))
        close(fnp.polyint(p, m), np.polyint(p, m))
        close(fnp.polyint(p, m, k=[1.0, 2.0, 3.0, 4.0][:m]),
              np.polyint(p, m, k=[1.0, 2.0, 3.0, 4.0][:m]))
    q, r = fnp.polydiv([1.0, 2.0, 3.0, 4.0], [2.0, 1.0], trim_leading_zeros=True)
    eq, er = np.polydiv([1.0, 2.0, 3.0, 4.0], [2.0, 1.0])
    close(q, eq)
    close(r, er)
    close(fnp.trim_zeros(np.array([0, 0, 1.0, 2.0, 0])), [1.0, 2.0])


def test_polynomial_grads_jit_vmap(rng):
    p, x = rng.normal(size=4), rng.normal(size=(2, 3))
    grads(fnp.polyval, p, x)
    grads(lambda x: fnp.vander(x, 4), np.array([0.0, 1.5, -2.0]))   # powers at 0 too
    grads(lambda u, v: fnp.polydiv(u, v), p, np.array([2.0, 1.0]))
    grads(lambda p: fnp.polyint(fnp.polyder(p), k=1.5), p)
    jit_and_vmap(fnp.polyval, p, x)


def test_polyfit_matches_numpy(rng):
    xs = np.linspace(-1, 2, 20)
    ys = np.sin(xs) + 0.1 * rng.normal(size=20)
    ys2 = np.stack([ys, ys ** 2], 1)
    w = rng.uniform(0.5, 1, 20)
    for deg in (0, 1, 3, 5):
        close(fnp.polyfit(xs, ys, deg), np.polyfit(xs, ys, deg), rtol=1e-9, atol=1e-11)
        close(fnp.polyfit(xs, ys2, deg, w=w), np.polyfit(xs, ys2, deg, w=w), rtol=1e-9,
              atol=1e-11)
        for cov in (True, "unscaled"):
            close(fnp.polyfit(xs, ys, deg, cov=cov)[1], np.polyfit(xs, ys, deg, cov=cov)[1],
                  rtol=1e-8)
        close(fnp.polyfit(xs, ys2, deg, cov=True)[1], np.polyfit(xs, ys2, deg, cov=True)[1],
              rtol=1e-8)
    with pytest.raises(fgrad.FgradTypeError, match="full=True is not supported"):
        fnp.polyfit(xs, ys, 2, full=True)


def test_polyfit_grads_jit_vmap(rng):
    xs = np.linspace(-1, 2, 12)
    ys = np.cos(xs) + 0.1 * rng.normal(size=12)
    grads(lambda x, y: fnp.polyfit(x, y, 3), xs, ys)
    check_grads(lambda y: fnp.polyfit(xs, y, 2, cov=True)[1], (ys,), order=1)
    close(fgrad.jit(lambda x, y: fnp.polyfit(x, y, 3))(xs, ys), fnp.polyfit(xs, ys, 3))
    batched = fgrad.vmap(lambda y: fnp.polyfit(xs, y, 1))(np.stack([ys, 2 * ys]))
    close(batched, np.stack([np.polyfit(xs, ys, 1), np.polyfit(xs, 2 * ys, 1)]), rtol=1e-9)


def test_roots_concrete_real_only():
    close(np.sort(np.asarray(fnp.roots([1.0, -3.0, 2.0]))), [1.0, 2.0])
    close(fnp.roots([0.0, 1.0, -4.0]), [4.0])         # leading zeros stripped
    with pytest.raises(fgrad.FgradTypeError, match="complex roots"):
        fnp.roots([1.0, 0.0, 1.0])
    with pytest.raises(fgrad.ConcretizationError, match="roots of a traced polynomial"):
        fgrad.jit(fnp.roots)(np.array([1.0, -3.0, 2.0]))


# ----------------------------------------------------------------------------
# index tricks

V = np.array([5.0, 6.0, 7.0])
M = np.array([[1.0, 2.0], [3.0, 4.0]])
CONCATENATIONS = {
    "range": lambda m: m.r_[1:4], "linspace": lambda m: m.r_[0:1:5j],
    "mixed": lambda m: m.r_[V, 0, 2.5, V], "rows": lambda m: m.r_[M, M],
    "axis1": lambda m: m.r_["1", M, M], "ndmin": lambda m: m.r_["0,2", V, V],
    "trans1d": lambda m: m.r_["1,2,0", V, V], "c_vectors": lambda m: m.c_[V, V],
    "c_matrices": lambda m: m.c_[M, M], "c_mixed": lambda m: m.c_[V[:2], M],
    "3d": lambda m: m.r_["-1,3,1", M, M],
}


@pytest.mark.parametrize("name", sorted(CONCATENATIONS))
def test_r_c_match_numpy(name):
    build = CONCATENATIONS[name]
    close(build(fnp), build(np))


def test_index_tricks():
    assert fnp.s_[1:2, ::2] == np.s_[1:2, ::2] and fnp.index_exp[1:2] == (slice(1, 2),)
    close(fnp.mgrid[0:3, 0:2], np.mgrid[0:3, 0:2])
    close(fnp.mgrid[0:1:3j], np.mgrid[0:1:3j])
    for got, want in zip(fnp.ogrid[0:3, 0:2], np.ogrid[0:3, 0:2]):
        close(got, want)
    assert fnp.mgrid[0:3].dtype == np.int32
    b = np.zeros((3, 4))
    for got, want in zip(fnp.tril_indices_from(b, 1), np.tril_indices_from(b, 1)):
        np.testing.assert_array_equal(got, want)
    for got, want in zip(fnp.triu_indices_from(b), np.triu_indices_from(b)):
        np.testing.assert_array_equal(got, want)
    for got, want in zip(fnp.diag_indices_from(np.zeros((3, 3))),
                         np.diag_indices_from(np.zeros((3, 3)))):
        np.testing.assert_array_equal(got, want)
    for wrap in (False, True):
        want = np.zeros((7, 3))
        np.fill_diagonal(want, [1.0, 2.0], wrap=wrap)
        close(fnp.fill_diagonal(np.zeros((7, 3)), np.array([1.0, 2.0]), wrap, inplace=False),
              want)
    with pytest.raises(fgrad.FgradTypeError, match="inplace=False"):
        fnp.fill_diagonal(np.zeros((2, 2)), 1.0)
    with pytest.raises(fgrad.FgradTypeError, match="numpy.matrix"):
        fnp.r_["r", V]


def test_r_c_differentiate_and_compile():
    grads(lambda x: fnp.r_[x, 2 * x, 1.0] ** 2, np.array([1.0, 2.0]))
    grads(lambda x: fnp.c_[x, fnp.sin(x)], np.array([1.0, 2.0]))
    grads(lambda a, v: fnp.fill_diagonal(a, v, inplace=False), M, np.array([3.0, 4.0]))
    jit_and_vmap(lambda x: fnp.c_[x, x * x], V)


# ----------------------------------------------------------------------------
# counting: bincount, digitize, histograms

def test_bincount(rng):
    x = rng.integers(0, 7, size=20)
    w = rng.normal(size=20)
    np.testing.assert_array_equal(fnp.bincount(x), np.bincount(x))
    np.testing.assert_array_equal(fnp.bincount(x, minlength=10), np.bincount(x, minlength=10))
    close(fnp.bincount(x, w), np.bincount(x, w))
    np.testing.assert_array_equal(fgrad.jit(lambda x: fnp.bincount(x, length=5))(x),
                                  np.bincount(x)[:5])      # values >= length dropped
    with pytest.raises(fgrad.ConcretizationError, match="needs `length=`"):
        fgrad.jit(fnp.bincount)(x)
    with pytest.raises(ValueError, match="no negative elements"):
        fnp.bincount(np.array([1, -1]))
    grads(lambda w: fnp.bincount(x, w), w)
    close(fgrad.vmap(lambda w: fnp.bincount(x, w, length=7))(np.stack([w, 2 * w])),
          np.stack([np.bincount(x, w), np.bincount(x, 2 * w)]))


def test_digitize(rng):
    bins = np.array([0.0, 1.0, 2.5, 4.0])
    v = rng.uniform(-1, 5, size=30)
    v[:4] = bins
    for right in (False, True):
        for b in (bins, bins[::-1]):
            np.testing.assert_array_equal(fnp.digitize(v, b, right), np.digitize(v, b, right))
            np.testing.assert_array_equal(
                fgrad.jit(fnp.digitize, static_argnums=2)(v, b, right),
                np.digitize(v, b, right))
    with pytest.raises(ValueError, match="monotonically"):
        fnp.digitize(v, np.array([0.0, 2.0, 1.0]))


def test_histograms_match_numpy(rng):
    a = rng.normal(size=100)
    w = rng.uniform(size=100)
    for kw in ({}, dict(bins=7), dict(bins=5, range=(-1, 1)),
               dict(bins=np.array([-1.0, 0.0, 0.5, 2.0])), dict(density=True),
               dict(weights=w), dict(weights=w, density=True, bins=4), dict(bins="auto")):
        h, e = fnp.histogram(a, **kw)
        want_h, want_e = np.histogram(a, **kw)
        close(e, want_e)
        close(h, want_h)
    h, e = fnp.histogram(np.ones(5))         # equal values: range widened by 0.5
    close(e, np.histogram(np.ones(5))[1])
    xy = rng.normal(size=(50, 2))
    for kw in ({}, dict(bins=3), dict(bins=[3, 4], density=True), dict(weights=w[:50])):
        got = fnp.histogram2d(xy[:, 0], xy[:, 1], **kw)
        want = np.histogram2d(xy[:, 0], xy[:, 1], **kw)
        for g, e in zip(got, want):
            close(g, e)
    s3 = rng.normal(size=(40, 3))
    close(fnp.histogramdd(s3, bins=(2, 3, 4), density=True)[0],
          np.histogramdd(s3, bins=(2, 3, 4), density=True)[0])


def test_histogram_grads_jit_vmap(rng):
    a, w = rng.normal(size=60), rng.uniform(size=60)
    grads(lambda w: fnp.histogram(a, bins=5, weights=w, density=True)[0], w)
    np.testing.assert_array_equal(fgrad.jit(lambda a: fnp.histogram(a, 5)[0])(a),
                                  np.histogram(a, 5)[0])
    out = fgrad.vmap(lambda a: fnp.histogram(a, 5)[0])(np.stack([a, 2 * a]))
    np.testing.assert_array_equal(out, [np.histogram(a, 5)[0], np.histogram(2 * a, 5)[0]])
    with pytest.raises(fgrad.ConcretizationError, match="bins='auto'"):
        fgrad.jit(lambda a: fnp.histogram(a, "auto")[0])(a)


# ----------------------------------------------------------------------------
# unique and set operations

def test_unique_matches_numpy(rng):
    a = np.array([[3, 1], [1, 2.0]])
    got = fnp.unique(a, return_index=True, return_inverse=True, return_counts=True)
    want = np.unique(a, return_index=True, return_inverse=True, return_counts=True)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    b = np.array([np.nan, 1, np.nan, 0.5, 1])
    close(fnp.unique(b), np.unique(b))
    close(fnp.unique(b, equal_nan=False), np.unique(b, equal_nan=False))
    x = rng.integers(0, 5, size=12)
    for g, w in zip(fnp.unique_all(x), np.unique_all(x)):
        np.testing.assert_array_equal(g, w)
    for g, w in zip(fnp.unique_counts(x), np.unique_counts(x)):
        np.testing.assert_array_equal(g, w)
    for g, w in zip(fnp.unique_inverse(x), np.unique_inverse(x)):
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(fnp.unique_values(x), np.sort(np.unique_values(x)))


def test_unique_size_fill_and_jit():
    b = np.array([np.nan, 1, np.nan, 0.5, 1])
    close(fnp.unique(b, size=6, fill_value=-1.0), [0.5, 1, np.nan, -1, -1, -1])
    close(fnp.unique(b, size=2), [0.5, 1.0])           # truncated
    a = np.array([[3, 1], [1, 2.0]])
    values, counts = fgrad.jit(lambda x: fnp.unique(x, size=4, return_counts=True))(a)
    close(values, [1.0, 2.0, 3.0, 1.0])                 # padded with the smallest value
    np.testing.assert_array_equal(counts, [2, 1, 1, 0])
    with pytest.raises(fgrad.ConcretizationError, match="needs `size=`"):
        fgrad.jit(fnp.unique)(a)


def test_unique_along_an_axis(rng):
    a = rng.integers(0, 2, size=(7, 3)).astype(float)
    for axis in (0, 1, -1):
        got = fnp.unique(a, axis=axis, return_index=True, return_inverse=True,
                         return_counts=True)
        want = np.unique(a, axis=axis, return_index=True, return_inverse=True,
                         return_counts=True)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
    b = rng.integers(0, 2, size=(2, 5, 2))
    for axis in (0, 1, 2):
        for g, w in zip(fnp.unique(b, axis=axis, return_inverse=True),
                        np.unique(b, axis=axis, return_inverse=True)):
            np.testing.assert_array_equal(g, w)
    rows = fgrad.jit(lambda a: fnp.unique(a, axis=0, size=6, fill_value=-1.0))(a)
    close(rows, np.concatenate([np.unique(a, axis=0),
                                -np.ones((6 - len(np.unique(a, axis=0)), 3))]))
    x = rng.normal(size=(4, 2))
    grads(lambda x: fnp.unique(x, axis=0, size=4), x)


def test_set_operations_match_numpy(rng):
    pairs = [([1, 3, 4, 3], [3, 1, 2, 1]), ([1, 2, 3, 2, 4], [2, 3, 5, 7, 5]),
             ([-1, 0, 1], [-2, 0, 2]), (rng.integers(0, 9, 10), rng.integers(0, 9, 7))]
    for name in ("union1d", "setdiff1d", "setxor1d", "intersect1d"):
        for p, q in pairs:
            np.testing.assert_array_equal(getattr(fnp, name)(np.array(p), np.array(q)),
                                          getattr(np, name)(p, q))
    got = fnp.intersect1d(np.array([1, 3, 4, 3]), np.array([3, 1, 2, 1]), return_indices=True)
    for g, w in zip(got, np.intersect1d([1, 3, 4, 3], [3, 1, 2, 1], return_indices=True)):
        np.testing.assert_array_equal(g, w)
    a = np.array([[3, 1], [1, 2.0]])
    np.testing.assert_array_equal(fnp.isin(a, [1, 7]), np.isin(a, [1, 7]))
    np.testing.assert_array_equal(fnp.isin(a, [1, 7], invert=True), np.isin(a, [1, 7], invert=True))
    f = fgrad.jit(lambda p, q: fnp.setdiff1d(p, q, size=5, fill_value=-1))
    np.testing.assert_array_equal(f(np.array([1, 2, 3, 2, 4]), np.array([2, 3])), [1, 4, -1, -1, -1])


def test_unique_grads_and_vmap(rng):
    v = rng.normal(size=6)      # distinct values: unique is a permutation there
    grads(lambda v: fnp.unique(v, size=6), v)
    grads(lambda v: fnp.unique(v, size=8, fill_value=0.0), v)
    # without size=, grad (concrete values inside) works too and agrees
    weights = np.arange(1.0, 7.0)
    g = fgrad.grad(lambda v: fnp.sum(fnp.unique(v) ** 2 * weights))(v)
    close(g, fgrad.grad(lambda v: fnp.sum(fnp.unique(v, size=6) ** 2 * weights))(v))
    close(g, 2 * v * weights[np.argsort(np.argsort(v))])
    grads(lambda v: fnp.union1d(v, v[:3] * 2, size=9), v)
    out = fgrad.vmap(lambda v: fnp.unique(v, size=6))(np.stack([v, v[::-1] * 2]))
    close(out, np.stack([np.unique(v), np.unique(2 * v)]))


def test_value_dependent_lengths_work_under_grad(rng):
    x = rng.integers(0, 4, size=10)
    w = rng.normal(size=10)
    g = fgrad.grad(lambda w: fnp.sum(fnp.bincount(x, w) ** 2))(w)
    close(g, 2 * np.bincount(x, w)[x])
    f = np.array([0.0, 0.0, 1.5, 2.0, 0.0])
    close(fgrad.grad(lambda f: fnp.sum(fnp.trim_zeros(f) ** 2))(f), 2 * f)
    with pytest.raises(fgrad.ConcretizationError, match="trim_zeros of a traced value"):
        fgrad.jit(fnp.trim_zeros)(f)


# ----------------------------------------------------------------------------
# gradient, interp, unwrap, trapezoid, ediff1d

@pytest.mark.parametrize("edge_order", [1, 2])
def test_gradient_matches_numpy(rng, edge_order):
    f = rng.normal(size=(5, 6))
    x0 = np.cumsum(rng.uniform(0.5, 1.5, 5))
    x1 = np.cumsum(rng.uniform(0.5, 1.5, 6))
    for spacing in ((), (0.5,), (0.5, 2.0), (x0, x1), (x0, 3.0)):
        for got, want in zip(fnp.gradient(f, *spacing, edge_order=edge_order),
                             np.gradient(f, *spacing, edge_order=edge_order)):
            close(got, want)
    close(fnp.gradient(f, x1, axis=1, edge_order=edge_order),
          np.gradient(f, x1, axis=1, edge_order=edge_order))
    close(fnp.gradient(np.arange(5) ** 2), np.gradient(np.arange(5) ** 2))
    with pytest.raises(ValueError, match="at least"):
        fnp.gradient(np.ones(2), edge_order=2)
    grads(lambda f, x: fnp.gradient(f, x, 2.0, edge_order=edge_order), f, x0)
    jit_and_vmap(lambda f: fnp.gradient(f, edge_order=edge_order), f[0])


def test_interp(rng):
    xp = np.cumsum(rng.uniform(0.1, 1, 8))
    fp = rng.normal(size=8)
    x = rng.uniform(-1, 8, size=(3, 4))
    x[0, :3] = xp[[0, 4, 7]]         # exactly on sample points
    close(fnp.interp(x, xp, fp), np.interp(x, xp, fp), rtol=1e-14)
    close(fnp.interp(x, xp, fp, left=-5, right=9), np.interp(x, xp, fp, left=-5, right=9))
    close(fnp.interp(x, xp, fp, period=3), np.interp(x, xp, fp, period=3))
    close(fnp.interp(x, xp[:1], fp[:1]), np.interp(x, xp[:1], fp[:1]))
    inside = np.array([0.3, 2.2, 4.1])
    grads(lambda x, fp: fnp.interp(x, xp, fp), inside, fp)
    grads(lambda xp: fnp.interp(inside, xp, fp), xp)
    jit_and_vmap(lambda x, fp: fnp.interp(x, xp, fp), inside, fp)


def test_unwrap_trapezoid_ediff1d(rng):
    phase = np.cumsum(rng.uniform(-2, 2, size=(3, 20)), axis=1)
    w = np.angle(np.exp(1j * phase))
    close(fnp.unwrap(w), np.unwrap(w))
    close(fnp.unwrap(w.T, axis=0), np.unwrap(w.T, axis=0))
    close(fnp.unwrap(w, discont=4.0), np.unwrap(w, discont=4.0))
    close(fnp.unwrap(np.array([0.0, 5, 10, 1]), period=6),
          np.unwrap(np.array([0.0, 5, 10, 1]), period=6))
    f = rng.normal(size=(5, 6))
    x1 = np.cumsum(rng.uniform(0.5, 1.5, 6))
    close(fnp.trapezoid(f), np.trapezoid(f))
    close(fnp.trapezoid(f, x1), np.trapezoid(f, x1))
    close(fnp.trapezoid(f, dx=0.3, axis=0), np.trapezoid(f, dx=0.3, axis=0))
    close(fnp.trapezoid(f, f * 2 + 1, axis=0), np.trapezoid(f, f * 2 + 1, axis=0))
    close(fnp.ediff1d(f, to_end=[1.0, 2], to_begin=3.0),
          np.ediff1d(f, to_end=[1.0, 2], to_begin=3.0))
    grads(fnp.unwrap, w)
    grads(fnp.trapezoid, f, x1)
    jit_and_vmap(fnp.unwrap, w[0])


# ----------------------------------------------------------------------------
# piecewise, choose, partition

def test_piecewise(rng):
    x = np.linspace(-2.5, 2.5, 11)
    close(fnp.piecewise(x, [x < 0, x >= 0], [lambda x: -x, lambda x: x ** 2]),
          np.piecewise(x, [x < 0, x >= 0], [lambda x: -x, lambda x: x ** 2]))
    close(fnp.piecewise(x, [x < -1, x > 1], [fnp.sin, 7.0, lambda x: x * 3]),
          np.piecewise(x, [x < -1, x > 1], [np.sin, 7.0, lambda x: x * 3]))
    close(fnp.piecewise(x, x > 0, [lambda x: x + 1]), np.piecewise(x, x > 0, [lambda x: x + 1]))
    close(fnp.piecewise(2.0, [True], [lambda x: x * 3]), 6.0)
    with pytest.raises(ValueError, match="funclist must have"):
        fnp.piecewise(x, [x < 0], [1.0, 2.0, 3.0])

    def f(x):
        return fnp.piecewise(x, [x < 0, x > 1], [lambda x: -x ** 3, fnp.sin, lambda x: x])
    grads(f, np.array([-1.3, 0.4, 2.2]))
    jit_and_vmap(f, np.array([-1.3, 0.4, 2.2]))


def test_choose_partition(rng):
    c = [rng.normal(size=(3, 4)) for _ in range(3)]
    a = rng.integers(0, 3, size=(3, 4))
    close(fnp.choose(a, c), np.choose(a, c))
    for mode in ("wrap", "clip"):
        close(fnp.choose(a + 2, c, mode=mode), np.choose(a + 2, c, mode=mode))
    mixed = [np.arange(4.0), 5.0, np.ones((3, 4))]
    close(fnp.choose(np.array([0, 1, 2, 1]), mixed), np.choose(np.array([0, 1, 2, 1]), mixed))
    with pytest.raises(ValueError, match="invalid entry"):
        fnp.choose(a + 2, c)
    grads(lambda c0, c1: fnp.choose(a[0], [c0, c1, c0 * 2]), c[0][0], c[1][0])
    v = rng.normal(size=(4, 7))
    for k in (0, 3, -1, [1, 4]):
        want = np.partition(v, k)
        kk = np.atleast_1d(k)
        close(np.asarray(fnp.partition(v, k))[:, kk], want[:, kk])
        order = np.asarray(fnp.argpartition(v, k, axis=1))
        close(np.take_along_axis(v, order, 1)[:, kk], want[:, kk])
    with pytest.raises(ValueError, match="out of bounds"):
        fnp.partition(v, 7)
    grads(lambda v: fnp.partition(v, 2), v)
    jit_and_vmap(lambda v: fnp.partition(v, 2), v[0])


# ----------------------------------------------------------------------------
# floating-point error settings: recorded, never acted on

def test_seterr_geterr_errstate(monkeypatch):
    from fgrad._src.numpy import errstate as errstate_module
    monkeypatch.setattr(errstate_module, "_warned", [])    # as in a fresh process
    assert fnp.geterr() == dict.fromkeys(["divide", "over", "under", "invalid"], "ignore")
    numpy_before = np.geterr()
    with pytest.warns(RuntimeWarning, match="does not trap floating-point errors"):
        old = fnp.seterr(all="ignore", divide="raise")
    try:
        assert old["divide"] == "ignore" and fnp.geterr()["divide"] == "raise"
        with fnp.errstate(over="warn", call=print):
            assert fnp.geterr()["over"] == "warn" and fnp.geterrcall() is print
            assert np.isinf(float(fnp.divide(1.0, 0.0)))     # nothing trapped
        assert fnp.geterr()["over"] == "ignore" and fnp.geterrcall() is None
    finally:
        fnp.seterr(**old)
    assert fnp.geterr()["divide"] == "ignore"
    assert np.geterr() == numpy_before                       # NumPy's own untouched

    @fnp.errstate(divide="warn")
    def inside():
        return fnp.geterr()["divide"]
    assert inside() == "warn" and fnp.geterr()["divide"] == "ignore"
    with pytest.raises(ValueError, match="is not one of"):
        fnp.seterr(divide="loud")


# ----------------------------------------------------------------------------
# append, insert, delete, resize, block, apply_along_axis & co, lexsort

A34 = np.arange(12.0).reshape(3, 4) / 7.0
EDITS = {
    "append": lambda m: m.append(A34, [1.0, 2.0]),
    "append_axis": lambda m: m.append(A34, A34[:1], axis=0),
    "delete_int": lambda m: m.delete(A34, -1, axis=1),
    "delete_list": lambda m: m.delete(A34, [0, 2], axis=1),
    "delete_slice": lambda m: m.delete(A34, slice(1, 3)),
    "delete_mask": lambda m: m.delete(A34, np.array([True, False, True]), axis=0),
    "insert_scalar": lambda m: m.insert(A34, 1, 9.0, axis=1),
    "insert_column": lambda m: m.insert(A34, 4, [7.0, 8.0, 9.0], axis=1),
    "insert_one_list": lambda m: m.insert(A34, [1], [7.0, 8.0, 9.0], axis=1),
    "insert_many": lambda m: m.insert(A34, [0, 2], [7.0, 8.0], axis=1),
    "insert_repeated": lambda m: m.insert(A34, [2, 0, 2], 5.0, axis=0),
    "insert_negative": lambda m: m.insert(A34, -1, [1.0, 2.0, 3.0, 4.0], axis=0),
    "insert_2d_values": lambda m: m.insert(A34, 1, [[1.0], [2.0], [3.0]], axis=1),
    "insert_flat": lambda m: m.insert(A34, [3, 1], [1.0, 2.0]),
    "resize": lambda m: m.resize(A34, (5, 3)),
    "resize_grow": lambda m: m.resize(np.arange(3.0), 7),
    "block": lambda m: m.block([[np.ones((2, 2)), np.zeros((2, 3))], [np.full((1, 5), 2.0)]]),
    "block_1d": lambda m: m.block([np.arange(2.0), 5.0, np.arange(3.0)]),
    "along_axis": lambda m: m.apply_along_axis(lambda v: v * v.sum(), 1, A34),
    "along_axis_scalar": lambda m: m.apply_along_axis(lambda v: v.sum(), 0, A34),
    "along_axis_matrix": lambda m: m.apply_along_axis(lambda v: m.outer(v, v), 1,
                                                      A34.reshape(2, 3, 2)),
    "over_axes": lambda m: m.apply_over_axes(m.sum, A34.reshape(2, 3, 2), [0, 2]),
    "vectorize": lambda m: m.vectorize(lambda x, y: x * 2 + y)(A34, np.arange(4.0)),
    "fromfunction": lambda m: m.fromfunction(lambda i, j: i * 10 + j, (3, 4)),
}


@pytest.mark.parametrize("name", sorted(EDITS))
def test_editing_matches_numpy(name):
    close(EDITS[name](fnp), EDITS[name](np))


def test_editing_grads_and_lexsort(rng):
    grads(lambda a, v: fnp.insert(a, [0, 2], v, axis=1), A34, np.array([1.0, 2.0]))
    grads(lambda a: fnp.delete(a, 1, axis=0), A34)
    grads(lambda a: fnp.apply_along_axis(lambda v: v * fnp.sum(v ** 2), 1, a), A34)
    grads(lambda a: fnp.block([[a, a], [a * 2, a]]), A34)
    grads(lambda a: fnp.vectorize(lambda x: fnp.sin(x) * x)(a), A34)
    jit_and_vmap(lambda a: fnp.insert(a, 1, 0.5, axis=0), A34)
    k1, k2, k3 = rng.integers(0, 3, 10), rng.integers(0, 3, 10), rng.normal(size=10)
    np.testing.assert_array_equal(fnp.lexsort((k3, k1, k2)), np.lexsort((k3, k1, k2)))
    np.testing.assert_array_equal(fnp.lexsort(np.stack([k1, k2])), np.lexsort(np.stack([k1, k2])))
    with pytest.raises(fgrad.FgradTypeError, match="signature= is not supported"):
        fnp.vectorize(np.sum, signature="(n)->()")


# ----------------------------------------------------------------------------
# float decomposition, gcd/lcm, geomspace, windows, predicates, printing

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_decomposition_bit_exact(dtype):
    tiny = np.finfo(dtype).smallest_subnormal * 3
    x = np.array([0.0, -0.0, 1.0, -1.5, tiny, np.inf, -np.inf, np.nan, 1e30, 7.25], dtype)
    y = np.array([1.0, -1.0, 0.0, -2.0, 0.0, 0.0, 5.0, 1.0, np.inf, 7.25], dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)    # fgrad warns about nothing
        np.testing.assert_array_equal(fnp.nextafter(x, y), np.nextafter(x, y))
        np.testing.assert_array_equal(fnp.spacing(x), np.spacing(x))
        for got, want in zip(fnp.frexp(x), np.frexp(x)):
            np.testing.assert_array_equal(got, want)
        m, e = np.frexp(x)
        np.testing.assert_array_equal(fnp.ldexp(m, e), np.ldexp(m, e))
        for got, want in zip(fnp.modf(x), np.modf(x)):
            np.testing.assert_array_equal(got, want)
            np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    close(fnp.ldexp(np.float32(1e-30), np.int32(200)), np.ldexp(np.float32(1e-30), 200),
          rtol=1e-7)
    x = np.array([0.3, -5.5, 1e3 + 0.25])
    grads(lambda x: fnp.frexp(x)[0] + fnp.modf(x)[0], x)
    grads(lambda x: fnp.ldexp(x, np.array([1, -2, 3])), x)


def test_gcd_lcm_geomspace_windows(rng):
    a, b = rng.integers(-50, 50, 20), rng.integers(-50, 50, 20)
    np.testing.assert_array_equal(fnp.gcd(a, b), np.gcd(a, b))
    np.testing.assert_array_equal(fnp.lcm(a, b), np.lcm(a, b))
    np.testing.assert_array_equal(fnp.gcd(np.array([12, 0]), 18), np.gcd([12, 0], 18))
    np.testing.assert_array_equal(fgrad.jit(fnp.gcd)(a, b), np.gcd(a, b))
    np.testing.assert_array_equal(fgrad.vmap(fnp.lcm)(a, b), np.lcm(a, b))
    f64 = np.float64
    for args in ((f64(1), f64(1000), 4), (f64(-1), f64(-1000), 4, False), (f64(2), f64(3), 1),
                 (f64(1), f64(256), 9)):
        close(fnp.geomspace(*args), np.geomspace(*args), rtol=1e-14)
    with pytest.raises(ValueError, match="cannot include zero"):
        fnp.geomspace(0.0, 1.0)
    grads(lambda a, b: fnp.geomspace(a, b, 5), np.array(2.0), np.array(50.0))
    for name in ("bartlett", "blackman", "hamming", "hanning"):
        for m in (0, 1, 5):
            close(getattr(fnp, name)(m), getattr(np, name)(m), atol=1e-7, rtol=1e-6)


def test_predicates_conversions_printing():
    assert fnp.isscalar(3.0) and fnp.isscalar(fnp.ones(())) and not fnp.isscalar([1])
    assert fnp.iterable([1]) and not fnp.iterable(3)
    assert fnp.isdtype(fnp.float32, "real floating") and not fnp.isdtype(fnp.int32, "bool")
    assert fnp.can_cast(fnp.ones(2, fnp.float32), fnp.float64)
    assert not fnp.can_cast(fnp.ones(2, fnp.float64), fnp.float32)
    assert bool(fnp.array_equiv([1, 2], [[1, 2], [1, 2]]))
    assert not bool(fnp.array_equiv([1, 2], [1, 2, 3]))
    for convert in (fnp.asanyarray, fnp.ascontiguousarray, fnp.asfortranarray,
                    fnp.asarray_chkfinite):
        close(convert([1.0, 2.0]), [1.0, 2.0])
    with pytest.raises(ValueError, match="must not contain infs or NaNs"):
        fnp.asarray_chkfinite([1.0, np.nan])
    assert fnp.array2string(fnp.arange(3.0)) == np.array2string(np.arange(3.0))
    assert fnp.array_str(fnp.arange(3)) == np.array_str(np.arange(3))
    close(fnp.acos(0.5), np.arccos(np.float32(0.5)), rtol=1e-6)
    assert fnp.pow is fnp.power and fnp.atan2 is fnp.arctan2
    assert fnp.double is np.float64 and fnp.int_ is np.int_


def test_put_and_put_along_axis():
    a = np.arange(12.0).reshape(3, 4)
    want = a.copy()
    np.put(want, [1, 5, -1], [10.0, 20.0])
    close(fnp.put(a, [1, 5, -1], np.array([10.0, 20.0]), inplace=False), want)
    want = a.copy()
    np.put(want, [13, -14], [7.0], mode="wrap")
    close(fnp.put(a, [13, -14], [7.0], mode="wrap", inplace=False), want)
    for idx, values, axis in ((np.argmax(a, axis=1)[:, None], 99.0, 1),
                              (np.array([[0, 2], [1, 1], [2, 0]]),
                               np.array([[1.0, 2], [3, 4], [5, 6]]), 1),
                              (np.array([[0, 2, 1, 0]]), -1.0, 0)):
        want = a.copy()
        np.put_along_axis(want, idx, values, axis=axis)
        close(fnp.put_along_axis(a, idx, values, axis, inplace=False), want)
    with pytest.raises(fgrad.FgradTypeError, match="inplace=False"):
        fnp.put(a, [0], 1.0)
    with pytest.raises(IndexError, match="out of range"):
        fnp.put(a, [12], 1.0, inplace=False)
    grads(lambda a, v: fnp.put_along_axis(a, np.array([[1], [0], [3]]), v, 1, inplace=False),
          a, np.array([[1.0], [2.0], [3.0]]))


# ----------------------------------------------------------------------------
# the namespace: everything of NumPy's is present or listed as left out

def test_numpy_namespace_coverage():
    import pathlib
    import numpy_names
    gone = numpy_names.missing(np, fnp)
    assert not gone, (f"NumPy names neither in fgrad.numpy nor listed as left out in "
                      f"tests/numpy_names.py: {gone}")
    now_present = sorted(n for n in numpy_names.left_out_names() if hasattr(fnp, n))
    assert not now_present, (f"fgrad.numpy now has {now_present}: remove them from "
                             f"tests/numpy_names.py and run `python tests/numpy_names.py` "
                             f"to update README.md")
    readme = (pathlib.Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert numpy_names.readme_block() in readme, (
        "README.md's list of NumPy names left out is stale: run "
        "`python tests/numpy_names.py`")


def test_convolve_long_kernels_loop(rng):
    """Kernels longer than 128 taps run as a fori_loop over the taps."""
    a, v = rng.normal(size=140), rng.normal(size=130)
    for mode in ("full", "same", "valid"):
        close(fnp.convolve(a, v, mode), np.convolve(a, v, mode))
        close(fnp.correlate(v, a, mode), np.correlate(v, a, mode))
    grads(lambda a, v: fnp.convolve(a, v, "valid"), a, v)
    jit_and_vmap(lambda a, v: fnp.correlate(a, v, "same"), a, v)


@pytest.mark.parametrize("bitorder", ["big", "little"])
def test_packbits_unpackbits_mask_indices(rng, bitorder):
    a = rng.integers(0, 2, size=(3, 11)).astype(bool)
    for axis in (None, 0, 1):
        packed = np.packbits(a, axis, bitorder)
        np.testing.assert_array_equal(fnp.packbits(a, axis, bitorder), packed)
        for count in (None, 5, -3):
            np.testing.assert_array_equal(fnp.unpackbits(packed, axis, count, bitorder),
                                          np.unpackbits(packed, axis, count, bitorder))
    np.testing.assert_array_equal(fnp.unpackbits(np.packbits(a, 1), 1, 30),
                                  np.unpackbits(np.packbits(a, 1), 1, 30))
    np.testing.assert_array_equal(fgrad.jit(fnp.packbits)(a), np.packbits(a))
    for got, want in zip(fnp.mask_indices(3, fnp.triu, 1), np.mask_indices(3, np.triu, 1)):
        np.testing.assert_array_equal(got, want)


# ----------------------------------------------------------------------------
# derivatives, jit and vmap of the remaining differentiable functions

X6 = np.array([0.3, -1.2, 2.5, 0.7, -0.4, 1.9])
SWEEP = {
    "nancumsum": lambda x: fnp.nancumsum(fnp.where(x > 2, np.nan, x)),
    "nancumprod": lambda x: fnp.nancumprod(fnp.where(x > 2, np.nan, x)),
    "histogram2d_weights": lambda w: fnp.histogram2d(X6, X6[::-1], bins=3, weights=w,
                                                     density=True)[0],
    "histogramdd_weights": lambda w: fnp.histogramdd(np.stack([X6, X6 ** 2], 1), bins=2,
                                                     weights=w)[0],
    "intersect1d": lambda x: fnp.intersect1d(x, x[:3], size=3),
    "setdiff1d": lambda x: fnp.setdiff1d(x, x[:2], size=4),
    "setxor1d": lambda x: fnp.setxor1d(x[:4], x[2:], size=4),
    "ediff1d": lambda x: fnp.ediff1d(x, to_begin=x[:1]),
    "append": lambda x: fnp.append(x, x[:2] * 3),
    "resize": lambda x: fnp.resize(x, (4, 4)),
    "r_": lambda x: fnp.r_[x[:2], 0.5, x],
    "polyint": lambda x: fnp.polyint(x, 2, k=[1.0, 2.0]),
    "polymul": lambda x: fnp.polymul(x[:3], x[3:]),
    "poly": lambda x: fnp.poly(x[:4]),
    "percentile": lambda x: fnp.percentile(x, 37.0, method="hazen"),
    "quantile_weibull": lambda x: fnp.quantile(x, np.array([0.15, 0.6]), method="weibull"),
    "nanmedian": lambda x: fnp.nanmedian(fnp.where(x > 2, np.nan, x)),
    "cov_fweights": lambda x: fnp.cov(x.reshape(2, 3), fweights=np.array([1, 2, 1])),
    "interp_period": lambda x: fnp.interp(x, np.array([0.0, 1.0, 2.0]),
                                          np.array([1.0, -1.0, 2.0]), period=3.0),
    "gradient": lambda x: fnp.gradient(x, 0.5, edge_order=2),
    "unique_counts": lambda x: fnp.unique_counts(x, size=6).values,
}


@pytest.mark.parametrize("name", sorted(SWEEP))
def test_grads_jit_vmap_sweep(name):
    f = SWEEP[name]
    grads(f, X6)
    close(fgrad.jit(f)(X6), f(X6))
    batch = np.stack([X6, X6 * 0.75 - 0.1])
    for got, x in zip(fgrad.vmap(f)(batch), batch):
        close(got, f(x))
