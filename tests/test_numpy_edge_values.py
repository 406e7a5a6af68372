"""fgrad.numpy against NumPy where a composite function used to answer wrongly
without a word: on edge values (powers of two and ten, infinities and NaNs,
empty and one-element inputs), eagerly and under jit (which must give the
same bits as eager). Each test names the defect class it guards."""
import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad.test_util import check_grads
from test_differential_fuzz import assert_same, run_both

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

REAL = [np.float16, np.float32, np.float64]


def _exponents(dt):
    """Every integer power of two that is a finite non-zero `dt` (subnormals too)."""
    info = np.finfo(dt)
    return np.arange(info.minexp - info.nmant, info.maxexp).astype(dt)


def _ulps(got, want):
    """Distance in units in the last place of `want` (finite values)."""
    got, want = np.asarray(got, np.float64), np.asarray(want)
    return np.abs(got - want.astype(np.float64)) / np.spacing(np.abs(want)).astype(np.float64)


# ----------------------------------------------------------------------------
# exp2, log2, log10: exact where NumPy is exact (they were exp(x ln 2) and
# log(x) / ln b, with tens to hundreds of ulps at large |x| and int(log2(2**29))
# giving 28)

@pytest.mark.parametrize("dt", REAL, ids=lambda d: np.dtype(d).name)
def test_exp2_and_log2_are_exact_at_integers_and_powers_of_two(dt):
    k = _exponents(dt)
    p = (2.0 ** k.astype(np.float64)).astype(dt)   # exact (NumPy's float32 exp2(127) is not)
    for f, x, want in [(fnp.exp2, k, p), (fnp.log2, p, k)]:
        eager, jitted = run_both(f, x)
        assert_same(eager, want, what=f"{f.__name__}[{np.dtype(dt)}] eager")
        assert_same(jitted, want, what=f"{f.__name__}[{np.dtype(dt)}] jit")


@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_exp2_log2_log10_within_an_ulp(dt):
    rng = np.random.default_rng(0)
    info = np.finfo(dt)
    x = rng.uniform(info.minexp - info.nmant, info.maxexp - 1, 4000).astype(dt)
    pos = np.exp2(rng.uniform(info.minexp - info.nmant, info.maxexp - 1, 4000)).astype(dt)
    for f, arg in [(fnp.exp2, x), (fnp.log2, pos), (fnp.log10, pos)]:
        want = getattr(np, f.__name__)(arg.astype(np.longdouble)).astype(dt)
        for who, got in zip(("eager", "jit"), run_both(f, arg)):
            assert _ulps(got, want).max() <= 1, f"{f.__name__}[{np.dtype(dt)}] {who}"


def test_log10_of_exact_powers_of_ten():
    for dt, top in [(np.float32, 10), (np.float64, 22)]:     # 10**k exact in dt
        k = np.arange(0, top + 1)
        x = (10.0 ** k).astype(dt)
        for who, got in zip(("eager", "jit"), run_both(fnp.log10, x)):
            assert_same(got, k.astype(dt), what=f"log10[{np.dtype(dt)}] {who}")


@pytest.mark.parametrize("dt", REAL, ids=lambda d: np.dtype(d).name)
def test_exp2_log2_log10_special_values(dt):
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, 1.0, 2.0], dt)
    for name in ("exp2", "log2", "log10"):
        eager, jitted = run_both(getattr(fnp, name), x)
        want = getattr(np, name)(x)
        assert_same(eager, want, what=f"{name}[{np.dtype(dt)}] eager")
        assert_same(jitted, want, what=f"{name}[{np.dtype(dt)}] jit")


def test_exp2_log2_log10_derivatives_and_complex():
    x = np.array([0.3, 1.0, 2.0, 1024.0, 3.7])
    check_grads(fnp.exp2, (x / 100,), order=2)
    check_grads(fnp.log2, (x,), order=2)
    check_grads(fnp.log10, (x,), order=2)


@pytest.mark.parametrize("dt", [np.complex64, np.complex128], ids=lambda d: np.dtype(d).name)
def test_complex_exp2_log2_log10_keep_zero_parts(dt):
    """A complex product or quotient by ln 2 made NaN of inf·0: log2(0j) was
    -inf+nanj (NumPy: -inf+0j), exp2(inf+0j) inf+nanj."""
    re = np.array([-2.0, -0.0, 0.0, 0.5, 1.0, np.inf, -np.inf, np.nan])
    im = np.array([0.0, -0.0, 1.0, -1.0, np.inf])
    z = (re[:, None] + 0j * im[None, :]).astype(dt)
    z.imag = np.broadcast_to(im, z.shape)
    z = z.ravel()
    for name in ("exp2", "log2", "log10"):
        want = getattr(np, name)(z)
        for who, got in zip(("eager", "jit"), run_both(getattr(fnp, name), z)):
            for part in ("real", "imag"):
                g, w = getattr(got, part), getattr(want, part)
                assert np.array_equal(np.isnan(g), np.isnan(w)), f"{name} {who} {part}"
                assert np.allclose(g, w, rtol=4 * np.finfo(g.dtype).eps, atol=0,
                                   equal_nan=True), f"{name} {who} {part}"
                zero = (w == 0)
                assert np.array_equal(np.signbit(g[zero]), np.signbit(w[zero])), \
                    f"{name} {who} {part}: signs of zeros"


# ----------------------------------------------------------------------------
# convolve / correlate: a tap used to multiply the zero padding too, so an inf
# or NaN in the kernel made NaN of outputs it does not touch

NONFINITE = np.array([-0.0, 0.0, np.nan, np.inf, -np.inf, 1.5, -2.5, 0.5, -0.5, 2.5])


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("name", ["convolve", "correlate"])
@pytest.mark.parametrize("sizes", [(10, 10), (10, 3), (3, 10), (2, 1)])
def test_convolve_keeps_nonfinite_values_local(name, mode, sizes):
    a = NONFINITE[:sizes[0]].astype(np.float32)
    v = NONFINITE[::-1][:sizes[1]].astype(np.float32)
    want = getattr(np, name)(a, v, mode)
    f = lambda a, v: getattr(fnp, name)(a, v, mode)          # noqa: E731
    eager, jitted = run_both(f, a, v)
    assert_same(eager, want, what=f"{name} {mode} eager")
    assert_same(jitted, eager, what=f"{name} {mode} jit")


@pytest.mark.slow
def test_convolve_long_kernel_keeps_nan_local():
    """Kernels longer than polynomial._UNROLL take a fori_loop."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal(300)
    v = rng.standard_normal(200)
    v[0] = np.nan
    got, want = np.asarray(fnp.convolve(a, v)), np.convolve(a, v)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.allclose(got, want, equal_nan=True, rtol=1e-12, atol=1e-12)


# ----------------------------------------------------------------------------
# linspace: a traced start or stop took a float32 formula while eager calls
# NumPy in float64 (jit and eager differed; histogram's edges with them), and
# dtype=int truncated where NumPy floors

def _linspace_reference(start, stop, num, endpoint, dtype):
    """NumPy's linspace in float64, rounded once to the result dtype (fgrad's
    documented float64 computation), floored for integer dtypes as NumPy does."""
    out, step = np.linspace(np.float64(start), np.float64(stop), num, endpoint=endpoint,
                            retstep=True)
    if np.dtype(dtype).kind in "iu":
        out = np.floor(out)
        return out.astype(dtype), np.asarray(step, np.float32)
    return out.astype(dtype), np.asarray(step, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("endpoint", [True, False])
def test_linspace_jit_equals_eager_and_numpy(dtype, endpoint):
    rng = np.random.default_rng(2)
    pairs = [(0.1, 0.7), (-5.0, 0.0), (1.0, 1.0), (0.0, 1e-310)] + \
        [tuple(p) for p in rng.standard_normal((2, 2)) * 100]
    for start, stop in pairs:
        for num in (0, 1, 2, 7):
            f = lambda a, b: fnp.linspace(a, b, num, endpoint=endpoint,   # noqa: E731
                                          retstep=True, dtype=dtype)
            a, b = np.float64(start), np.float64(stop)
            eager = [np.asarray(r) for r in f(a, b)]
            jitted = [np.asarray(r) for r in fgrad.jit(f)(a, b)]
            want = _linspace_reference(a, b, num, endpoint, dtype)
            what = f"linspace({start}, {stop}, {num}, endpoint={endpoint})"
            for e, j, w in zip(eager, jitted, want):
                assert_same(e, w, what=what + " eager")
                assert_same(j, e, what=what + " jit")


def test_linspace_integer_dtype_floors():
    assert np.array_equal(fnp.linspace(-5, 0, 4, dtype=int), [-5, -4, -2, 0])
    jitted = fgrad.jit(lambda a: fnp.linspace(a, 0.0, 4, dtype=np.int32))(-5.0)
    assert np.array_equal(jitted, [-5, -4, -2, 0])


def test_histogram_edges_jit_equals_eager():
    x = np.array([-0.3, 0.2, 0.1, -0.2, 0.05], np.float32)
    eager, jitted = run_both(lambda x: fnp.histogram(x, bins=7)[1], x)
    assert_same(jitted, eager, what="histogram edges")
    assert_same(eager, np.histogram(x.astype(np.float64), bins=7)[1].astype(np.float32),
                what="histogram edges vs NumPy")


# ----------------------------------------------------------------------------
# median / quantile with infinities: NumPy's lerp (inf - inf, inf·0) made NaN
# of the median of [-inf, -inf, 1] (an odd count: no interpolation at all) and
# of [3, inf]; NumPy's median (a mean of the middle values) gives -inf and inf

INFINITE_ROWS = [[-np.inf, -np.inf, 1.0], [3.0, np.inf], [np.inf, np.inf], [1.0, -np.inf],
                 [-np.inf, np.inf], [3.0, np.nan, np.inf], [1.0, 2.0, np.nan]]


@pytest.mark.parametrize("row", INFINITE_ROWS, ids=str)
def test_median_with_infinities_is_numpys(row):
    x = np.array(row, np.float32)
    for name in ("median", "nanmedian"):
        want = getattr(np, name)(x)
        eager, jitted = run_both(getattr(fnp, name), x)
        assert_same(eager, want, what=f"{name}({row}) eager")
        assert_same(jitted, eager, what=f"{name}({row}) jit")


def test_quantile_next_to_an_infinity_is_that_infinity():
    x = np.array([-np.inf, -np.inf, 1.0, 2.0, np.inf], np.float32)
    q = np.array([0.0, 0.125, 0.25, 0.5, 0.625, 0.75, 0.875, 1.0], np.float32)
    # positions q·4: 0, .5, 1, 2, 2.5, 3, 3.5, 4
    want = np.array([-np.inf, -np.inf, -np.inf, 1.0, 1.5, 2.0, np.inf, np.inf], np.float32)
    eager, jitted = run_both(lambda x: fnp.quantile(x, q), x)
    assert_same(eager, want, what="quantile eager")
    assert_same(jitted, eager, what="quantile jit")


# ----------------------------------------------------------------------------
# eigh reads one triangle (as NumPy and LAPACK): an inf or NaN in the other
# one made every eigenvalue NaN, eagerly and in the native LAPACK kernel

@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_ignores_the_triangle_it_does_not_read(uplo):
    lower = np.array([[2.0, 0.0, 0.0], [0.5, 1.0, 0.0], [0.25, -1.0, 3.0]])
    junk = np.triu(np.full((3, 3), np.nan), 1)
    a = lower + junk if uplo == "L" else lower.T + junk.T
    a = np.stack([a, np.where(np.isnan(a), np.inf, a)])
    want = np.linalg.eigvalsh(a, uplo)
    for who, got in zip(("eager", "jit"), run_both(lambda a: fnp.linalg.eigvalsh(a, uplo), a)):
        assert np.allclose(got, want, rtol=1e-12), who
    bad = a.copy()
    bad[:, 0, 2] = bad[:, 2, 0] = np.nan            # in both triangles: NaN out
    for who, got in zip(("eager", "jit"), run_both(lambda a: fnp.linalg.eigvalsh(a, uplo), bad)):
        assert np.isnan(got).all(), who


@pytest.mark.parametrize("p", [None, 2, -2, 1, np.inf, "fro"], ids=str)
def test_cond_of_a_singular_matrix_is_inf(p):
    """NumPy turns a singular matrix's 0/0 into inf (a NaN entry stays NaN);
    fgrad's cond of the zero matrix was NaN. Empty matrices raise, as NumPy."""
    a = np.stack([np.zeros((2, 2)), np.eye(2), [[1.0, np.nan], [0.0, 1.0]]])
    want = np.array([np.linalg.cond(m, p) if not np.isnan(m).any() else np.nan for m in a])
    for who, got in zip(("eager", "jit"), run_both(lambda a: fnp.linalg.cond(a, p), a)):
        assert np.array_equal(got, want, equal_nan=True), who
    with pytest.raises(np.linalg.LinAlgError, match="empty"):
        fnp.linalg.cond(np.zeros((0, 0)), p)


# ----------------------------------------------------------------------------
# Student's t and Cauchy far tails: z^2 overflowed (|z| > 1e154, 1.8e19 in
# float32), so the log density was -inf and the quantiles stopped at ±1.3e154
# (±1.8e19); the closed forms for df = 1 (Cauchy) and df = 2 are the references

def test_t_quantiles_far_in_the_tails():
    import fgrad.scipy.stats as fst
    q = np.array([1e-10, 1e-50, 1e-100, 1e-150])
    cauchy = -1 / np.tan(np.pi * q)
    two = (2 * q - 1) / np.sqrt(2 * q * (1 - q))
    assert np.allclose(fst.t.ppf(q, 1.0), cauchy, rtol=1e-12)
    assert np.allclose(fst.t.isf(q, 1.0), -cauchy, rtol=1e-12)
    assert np.allclose(fst.t.ppf(np.r_[q, 1e-300], 2.0), np.r_[two, -np.sqrt(0.5e300)],
                       rtol=1e-12)
    q32 = np.array([1e-10, 1e-20], np.float32)
    want = (-1 / np.tan(np.pi * q32.astype(np.float64))).astype(np.float32)
    assert np.allclose(fst.t.ppf(q32, np.float32(1)), want, rtol=1e-5)


def test_t_and_cauchy_log_density_of_huge_points():
    import fgrad.scipy.stats as fst
    x = np.array([-1e300, -1e200, 1e160, 1e300])
    want = -np.log(np.pi) - 2 * np.log(np.abs(x))        # 1 + x^2 is x^2 here
    assert np.allclose(fst.cauchy.logpdf(x), want, rtol=1e-15)
    assert np.allclose(fst.t.logpdf(x, 1.0), want, rtol=1e-14)
    x32 = np.array([-1e30, 3e38], np.float32)
    want32 = -np.log(np.pi) - 2 * np.log(np.abs(x32.astype(np.float64)))
    assert np.allclose(fst.cauchy.logpdf(x32), want32, rtol=1e-6)
    assert np.allclose(fst.t.logpdf(x32, np.float32(1)), want32, rtol=1e-6)


# ----------------------------------------------------------------------------
# gcd: |min| of a signed type wraps to min, Euclid's steps then met negative
# values and gcd(-7, -128) in int8 was -1 (NumPy: 1)

@pytest.mark.parametrize("dt", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint64],
                         ids=lambda d: np.dtype(d).name)
def test_gcd_lcm_at_the_integer_extremes(dt):
    info = np.iinfo(dt)
    v = np.array(sorted({info.min, info.min + 1, 0, 1, 7, 12, info.max - 1, info.max}
                        | ({-1, -7, -18} if info.min < 0 else set())), dt)
    a, b = (x.ravel() for x in np.meshgrid(v, v))
    for name in ("gcd", "lcm"):
        want = getattr(np, name)(a, b)
        eager, jitted = run_both(getattr(fnp, name), a, b)
        assert_same(eager, want, what=f"{name}[{np.dtype(dt)}] eager")
        assert_same(jitted, eager, what=f"{name}[{np.dtype(dt)}] jit")


# ----------------------------------------------------------------------------
# logaddexp2 scaled its operands by ln 2 and back (a few ulps: logaddexp2(120, 120)
# was 120.99999); now hi + log1p(2**(lo - hi)) / ln 2 keeps hi exact

@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_logaddexp2_within_two_ulps_of_its_scale_and_exact_at_ties(dt):
    rng = np.random.default_rng(1)
    a = (rng.standard_normal(4000) * 60).astype(dt)
    b = (a + rng.standard_normal(4000) * 4).astype(dt)
    want = np.logaddexp2(a.astype(np.longdouble), b.astype(np.longdouble)).astype(dt)
    # ulps at the larger operand's scale: near 0 the sum cancels, for NumPy too
    scale = np.spacing(np.maximum(np.abs(want), np.abs(np.maximum(a, b)))).astype(np.float64)
    for who, got in zip(("eager", "jit"), run_both(fnp.logaddexp2, a, b)):
        err = np.abs(np.asarray(got, np.float64) - want.astype(np.float64)) / scale
        assert err.max() <= 2, f"logaddexp2[{np.dtype(dt)}] {who}: {err.max()} ulps"
    ties = np.array([-1000.0, -3.0, 0.0, 1.0, 120.0, 1000.0], dt)
    for who, got in zip(("eager", "jit"), run_both(fnp.logaddexp2, ties, ties)):
        assert_same(got, ties + dt(1), what=f"logaddexp2 ties[{np.dtype(dt)}] {who}")
    special = np.array([np.inf, -np.inf, np.inf, np.nan, 0.0, -np.inf], dt)
    other = np.array([np.inf, -np.inf, -np.inf, 1.0, -0.0, 3.0], dt)
    for who, got in zip(("eager", "jit"), run_both(fnp.logaddexp2, special, other)):
        assert_same(got, np.logaddexp2(special, other), what=f"logaddexp2 special {who}")


# ----------------------------------------------------------------------------
# logsumexp over an empty axis raised NumPy's "zero-size array to reduction
# operation maximum" (its shift); the sum of no terms is 0, so the answer is -inf

def test_logsumexp_and_softmax_of_empty_axes():
    import fgrad.scipy.special as fss
    for shape, axis, want_shape in [((0,), None, ()), ((0, 3), 0, (3,)), ((3, 0), 0, (0,))]:
        x = np.zeros(shape, np.float32)
        for who, got in zip(("eager", "jit"),
                            run_both(lambda v: fss.logsumexp(v, axis=axis), x)):
            assert_same(got, np.full(want_shape, -np.inf, np.float32), what=f"{shape} {who}")
    g = fgrad.grad(lambda v: fss.logsumexp(v, axis=0).sum())(np.zeros((0, 3)))
    assert g.shape == (0, 3)
    assert fgrad.nn.softmax(np.zeros((2, 0), np.float32), axis=-1).shape == (2, 0)


# ----------------------------------------------------------------------------
# sinh and cosh beyond |x| = 1 were exp(|x| - ln 2) ± ...: rounding |x| - ln 2
# first cost up to 25 ulps in float32 and 495 in float64 at large |x|

@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_sinh_cosh_within_two_ulps_up_to_overflow(dt):
    top = np.log(np.finfo(dt).max) + np.log(2)          # where cosh overflows
    rng = np.random.default_rng(2)
    x = np.concatenate([rng.uniform(-top, top, 4000),
                        rng.uniform(top - 2, top, 500) * rng.choice([-1, 1], 500)]).astype(dt)
    for name in ("sinh", "cosh"):
        want = getattr(np, name)(x.astype(np.longdouble)).astype(dt)
        finite = np.isfinite(want)
        for who, got in zip(("eager", "jit"), run_both(getattr(fnp, name), x)):
            assert_same(np.isfinite(got), finite, what=f"{name} finite {who}")
            assert _ulps(got[finite], want[finite]).max() <= 2, f"{name}[{np.dtype(dt)}] {who}"


def test_sinh_cosh_derivatives_up_to_overflow():
    x = np.array([0.3, -1.5, 2.0, -7.0, 30.0])
    check_grads(fnp.sinh, (x,), order=2)
    check_grads(fnp.cosh, (x,), order=2)
    big = np.array([709.9, -710.2])        # exp(|x|) overflows, cosh(x) does not
    np.testing.assert_allclose(fgrad.vmap(fgrad.grad(fnp.sinh))(big), np.cosh(big), rtol=1e-15)
    np.testing.assert_allclose(fgrad.vmap(fgrad.grad(fnp.cosh))(big), np.sinh(big), rtol=1e-15)


# ----------------------------------------------------------------------------
# det and slogdet of a singular matrix gave -0.0 where NumPy gives +0.0 (the LU
# product's sign of zero)

@pytest.mark.parametrize("dt", [np.float32, np.float64, np.complex128],
                         ids=lambda d: np.dtype(d).name)
def test_det_and_slogdet_sign_of_a_singular_matrix_are_plus_zero(dt):
    a = np.array([[[1, 2], [2, 4]], [[0, 1], [0, 0]], [[2, 0], [0, 3]]], dt)
    for who, got in zip(("eager", "jit"), run_both(fnp.linalg.det, a)):
        assert_same(got, np.linalg.det(a).astype(dt), ulps=2, what=f"det {who}")
    want_sign, want_log = np.linalg.slogdet(a)
    signs = run_both(lambda m: fnp.linalg.slogdet(m).sign, a)
    logs = run_both(lambda m: fnp.linalg.slogdet(m).logabsdet, a)
    for who, sign, logabs in zip(("eager", "jit"), signs, logs):
        assert_same(sign, want_sign.astype(dt), ulps=2, what=f"slogdet sign {who}")
        assert_same(logabs, want_log.astype(np.finfo(dt).dtype), ulps=2, what=f"logabsdet {who}")
    check_grads(fnp.linalg.det, (np.array([[2.0, 0.5], [0.3, 1.5]]),), order=2)


def test_sinh_cosh_overflow_quietly_with_infinite_derivatives():
    import warnings
    x = np.array([89.5, 100.0, np.inf, -np.inf], np.float32)      # past float32 cosh's range
    for name in ("sinh", "cosh"):
        with np.errstate(over="ignore"):
            want = getattr(np, name)(x.astype(np.float64)).astype(np.float32)
        with warnings.catch_warnings():
            warnings.simplefilter("error")       # as exp's overflow: inf without a warning
            got = np.asarray(getattr(fnp, name)(x))
            assert_same(got, want, what=name)
            slope = np.asarray(fgrad.vmap(fgrad.grad(getattr(fnp, name)))(x))
            assert np.all(np.isinf(slope)), (name, slope)
