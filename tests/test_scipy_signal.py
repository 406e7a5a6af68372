"""fgrad.scipy.signal against scipy.signal: convolve/correlate (N-d) and
convolve2d/correlate2d (boundaries fill, wrap, symm) in modes full/same/valid;
derivatives in both inputs (check_grads order 2, forward and reverse, float64);
vmap against a Python loop; jit against eager; errors."""
import numpy as np
import pytest
import scipy.signal

import fgrad
import fgrad.scipy.signal as fsignal
from fgrad._src.scipy import signal as signal_impl
from fgrad.test_util import check_grads

MODES = ("full", "same", "valid")
ND_SHAPES = [((7,), (3,)), ((3,), (8,)), ((5,), (5,)), ((4, 6), (2, 3)), ((2, 3), (4, 6)),
             ((4, 3), (2, 5)), ((3, 4, 5), (2, 2, 3))]
SHAPES_2D = [((5, 6), (2, 3)), ((2, 3), (5, 6)), ((6, 5), (6, 5)), ((3, 4), (2, 6))]


def _pair(shapes, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shapes[0]), rng.standard_normal(shapes[1])


def _same_or_both_raise(ours, theirs):
    try:
        want = theirs()
    except ValueError:
        with pytest.raises(ValueError):
            ours()
        return
    got = np.asarray(ours())
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["convolve", "correlate"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shapes", ND_SHAPES, ids=str)
def test_nd_values_match_scipy(name, mode, shapes):
    a, b = _pair(shapes)
    _same_or_both_raise(lambda: getattr(fsignal, name)(a, b, mode=mode),
                        lambda: getattr(scipy.signal, name)(a, b, mode=mode, method="direct"))


@pytest.mark.parametrize("name", ["convolve2d", "correlate2d"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("boundary", ["fill", "wrap", "symm"])
@pytest.mark.parametrize("shapes", SHAPES_2D, ids=str)
def test_2d_values_match_scipy(name, mode, boundary, shapes):
    a, b = _pair(shapes)
    kw = dict(mode=mode, boundary=boundary, fillvalue=1.5 if boundary == "fill" else 0)
    _same_or_both_raise(lambda: getattr(fsignal, name)(a, b, **kw),
                        lambda: getattr(scipy.signal, name)(a, b, **kw))


@pytest.fixture
def tap_loop(monkeypatch):
    """Every kernel takes the fori_loop-over-taps path (large kernels take it)."""
    monkeypatch.setattr(signal_impl, "_UNROLL_TAPS", 0)


@pytest.mark.parametrize("name,shapes,mode", [("convolve", ((9,), (4,)), "full"),
                                              ("correlate", ((3, 4, 5), (2, 2, 3)), "same"),
                                              ("convolve2d", ((2, 3), (5, 6)), "valid"),
                                              ("correlate2d", ((5, 6), (2, 3)), "same")])
def test_tap_loop_path_values_gradients_vmap_jit(tap_loop, name, shapes, mode):
    a, b = _pair(shapes, seed=5)
    f = lambda x, y: getattr(fsignal, name)(x, y, mode=mode)  # noqa: E731
    want = getattr(scipy.signal, name)(a, b, mode=mode)
    np.testing.assert_allclose(np.asarray(f(a, b)), want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.asarray(fgrad.jit(f)(a, b)), want, rtol=1e-12, atol=1e-12)
    check_grads(f, (a, b), order=2, modes=("fwd", "rev"))
    bs = np.stack([b, 2 * b])
    got = fgrad.vmap(f, in_axes=(None, 0))(a, bs)
    np.testing.assert_allclose(np.asarray(got), np.stack([want, 2 * want]), rtol=1e-12,
                               atol=1e-12)


def test_a_kernel_longer_than_the_unrolled_limit():
    a, b = _pair(((300,), (150,)), seed=6)
    for mode in MODES:
        np.testing.assert_allclose(np.asarray(fsignal.convolve(a, b, mode)),
                                   scipy.signal.convolve(a, b, mode, method="direct"),
                                   rtol=1e-11, atol=1e-11)


def test_fft_method_gives_the_direct_values():
    a, b = _pair(((9,), (4,)))
    for method in ("auto", "fft"):
        np.testing.assert_allclose(np.asarray(fsignal.convolve(a, b, method=method)),
                                   scipy.signal.convolve(a, b), rtol=1e-12, atol=1e-12)


def test_integer_and_float32_inputs_keep_their_dtype():
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    b = np.array([[1, -2], [3, 0]], np.int32)
    got = fsignal.convolve2d(a, b)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(got), scipy.signal.convolve2d(a, b))
    assert fsignal.correlate(np.ones(5, np.float32), np.ones(2, np.float32)).dtype == np.float32


def test_scalars_and_empty_inputs_follow_scipy():
    assert float(fsignal.convolve(np.float64(2.0), np.float64(3.0))) == 6.0
    assert np.asarray(fsignal.convolve(np.zeros(0), np.ones(3))).shape == (0,)


@pytest.mark.parametrize("name,shapes", [("convolve", ((6,), (3,))),
                                         ("correlate", ((3, 4), (2, 2))),
                                         ("convolve2d", ((4, 3), (2, 2))),
                                         ("correlate2d", ((3, 4), (3, 2)))])
@pytest.mark.parametrize("mode", MODES)
def test_gradients_in_both_inputs(name, shapes, mode):
    a, b = _pair(shapes, seed=1)
    check_grads(lambda x, y: getattr(fsignal, name)(x, y, mode=mode), (a, b), order=2,
                modes=("fwd", "rev"))


def test_gradients_through_wrap_and_symm_boundaries():
    a, b = _pair(((4, 3), (3, 2)), seed=2)
    for boundary in ("wrap", "symm"):
        check_grads(lambda x, y: fsignal.correlate2d(x, y, "same", boundary), (a, b),
                    order=2, modes=("fwd", "rev"))


def test_vmap_matches_a_python_loop():
    rng = np.random.default_rng(3)
    xs, k = rng.standard_normal((4, 5, 6)), rng.standard_normal((2, 3))
    got = fgrad.vmap(lambda x: fsignal.convolve2d(x, k, "same", "symm"))(xs)
    want = np.stack([np.asarray(fsignal.convolve2d(x, k, "same", "symm")) for x in xs])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-14, atol=1e-14)
    ks = rng.standard_normal((4, 3))
    got = fgrad.vmap(fsignal.correlate, in_axes=(None, 0))(xs[0, 0], ks)
    want = np.stack([np.asarray(fsignal.correlate(xs[0, 0], kk)) for kk in ks])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-14, atol=1e-14)


def test_jit_matches_eager():
    a, b = _pair(((6, 5), (3, 2)), seed=4)
    for f in (lambda x, y: fsignal.convolve(x, y, "valid"),
              lambda x, y: fsignal.correlate2d(x, y, "same", "wrap")):
        np.testing.assert_allclose(np.asarray(fgrad.jit(f)(a, b)), np.asarray(f(a, b)),
                                   rtol=1e-13, atol=1e-13)


def test_errors_name_the_problem():
    with pytest.raises(TypeError, match="same number of dimensions"):
        fsignal.convolve(np.ones(3), np.ones((2, 2)))
    with pytest.raises(ValueError, match="correlate: mode must be one of"):
        fsignal.correlate(np.ones(3), np.ones(2), mode="middle")
    with pytest.raises(TypeError, match="correlate: in1 and in2"):
        fsignal.correlate(np.ones(3), np.ones((2, 2)))
    with pytest.raises(ValueError, match="at least as large"):
        fsignal.convolve(np.ones((3, 2)), np.ones((2, 3)), mode="valid")
    with pytest.raises(TypeError, match="must be 2-D"):
        fsignal.convolve2d(np.ones(3), np.ones(2))
    with pytest.raises(ValueError, match="boundary must be"):
        fsignal.convolve2d(np.ones((3, 3)), np.ones((2, 2)), boundary="reflect")
    with pytest.raises(ValueError, match="method must be"):
        fsignal.convolve(np.ones(3), np.ones(2), method="fast")


@pytest.mark.parametrize("name", ["convolve", "correlate", "convolve2d", "correlate2d"])
def test_complex_inputs_match_scipy(name):
    """The correlations conjugate in2, as SciPy's do."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal((5, 6)) + 1j * rng.standard_normal((5, 6))
    b = rng.standard_normal((3, 2)) + 1j * rng.standard_normal((3, 2))
    got = getattr(fsignal, name)(a, b)
    assert got.dtype == np.complex128
    np.testing.assert_allclose(np.asarray(got), getattr(scipy.signal, name)(a, b), atol=1e-13)
