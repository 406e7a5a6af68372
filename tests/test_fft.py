"""fgrad.numpy.fft and the fft primitive: values against numpy.fft (every function,
norms, n/s smaller and larger than the axis, axis orders, float32 and float64),
derivatives by finite differences (order 2, forward and reverse), the adjoint
identity <F x, y> = <x, F^H y>, vmap against a loop, and jit against eager."""
import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad import lax
from fgrad.test_util import check_grads

NORMS = [None, "backward", "ortho", "forward"]
COMPLEX_OF = {np.float32: np.complex64, np.float64: np.complex128}
# complex -> complex: (fgrad, numpy); real input: rfft, ihfft; Hermitian input: irfft, hfft
C2C = ["fft", "ifft"]
R2C = ["rfft", "ihfft"]
C2R = ["irfft", "hfft"]


def real_sample(rng, shape, dtype=np.float64):
    return rng.standard_normal(shape).astype(dtype)


def complex_sample(rng, shape, dtype=np.float64):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(
        COMPLEX_OF[dtype])


def assert_close(got, want, dtype):
    """Agreement to a few float32 or float64 roundings of the largest magnitude."""
    want = np.asarray(want)
    scale = max(1.0, float(np.max(np.abs(want)))) if want.size else 1.0
    tol = 2e-6 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(np.asarray(got), want, rtol=0, atol=tol * scale)


def input_for(name, rng, shape, dtype):
    return real_sample(rng, shape, dtype) if name in R2C else complex_sample(rng, shape, dtype)


def expected_dtype(name, dtype):
    return np.dtype(dtype) if name in C2R else np.dtype(COMPLEX_OF[dtype])


# ----------------------------------------------------------------------------
# Values

@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", C2C + R2C + C2R)
def test_one_axis_transforms_match_numpy(name, dtype, norm, rng):
    x = input_for(name, rng, (6, 5), dtype)
    ours, theirs = getattr(fnp.fft, name), getattr(np.fft, name)
    for axis in (-1, 0, 1):
        size = x.shape[axis]
        for n in (None, size - 2, size + 3, 1):
            got = ours(x, n=n, axis=axis, norm=norm)
            want = theirs(x.astype(np.complex128 if x.dtype.kind == "c" else np.float64),
                          n=n, axis=axis, norm=norm)
            assert got.dtype == expected_dtype(name, dtype), (n, axis, got.dtype)
            assert got.shape == want.shape, (n, axis)
            assert_close(got, want, dtype)


ND = ["fftn", "ifftn", "rfftn", "irfftn"]


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ND)
def test_n_dimensional_transforms_match_numpy(name, dtype, norm, rng):
    real_in = name == "rfftn"
    x = real_sample(rng, (4, 5, 6), dtype) if real_in else complex_sample(rng, (4, 5, 6), dtype)
    x64 = x.astype(np.float64 if real_in else np.complex128)
    ours, theirs = getattr(fnp.fft, name), getattr(np.fft, name)
    for s, axes in [(None, None), (None, (0, 2)), (None, (2, 0)), (None, (-1, 0, 1)),
                    ((3, 8), None), ((7, 2), (1, 0)), ((4, 5, 9), None), (None, (1,)),
                    ((3,), (0,))]:
        got = ours(x, s=s, axes=axes, norm=norm)
        # NumPy 2 deprecates s without axes; they mean the last len(s) axes
        want = theirs(x64, s=s, axes=axes if s is None or axes else range(-len(s), 0),
                      norm=norm)
        assert got.dtype == expected_dtype("irfft" if name == "irfftn" else "fft", dtype)
        assert got.shape == want.shape, (s, axes)
        assert_close(got, want, dtype)


@pytest.mark.parametrize("name", ND)
def test_random_axes_and_lengths_match_numpy(name):
    """Random ranks, axis subsets in random orders (negative ones too) and lengths
    above and below the input's sizes."""
    rng = np.random.default_rng(7)
    for _ in range(25):
        shape = tuple(rng.integers(1, 6, rng.integers(1, 4)))
        k = int(rng.integers(1, len(shape) + 1))
        axes = [int(a) - (len(shape) if rng.random() < 0.5 else 0)
                for a in rng.permutation(len(shape))[:k]]
        s = None if rng.random() < 0.3 else [int(v) for v in rng.integers(1, 8, k)]
        x = real_sample(rng, shape) if name == "rfftn" else complex_sample(rng, shape)
        got = getattr(fnp.fft, name)(x, s=s, axes=axes)
        want = getattr(np.fft, name)(x, s=s, axes=axes)
        assert got.shape == want.shape, (shape, s, axes)
        assert_close(got, want, np.float64)


@pytest.mark.parametrize("name", ["fft2", "ifft2", "rfft2", "irfft2"])
def test_two_dimensional_transforms_match_numpy(name, rng):
    x = real_sample(rng, (3, 4, 6)) if name == "rfft2" else complex_sample(rng, (3, 4, 6))
    ours, theirs = getattr(fnp.fft, name), getattr(np.fft, name)
    for s, axes, norm in [(None, (-2, -1), None), ((5, 3), (-2, -1), "ortho"),
                          (None, (0, 2), "forward"), ((2, 7), (2, 1), None)]:
        assert_close(ours(x, s=s, axes=axes, norm=norm), theirs(x, s=s, axes=axes, norm=norm),
                     np.float64)


def test_integer_and_float16_inputs_take_the_default_and_float32_types():
    x = np.arange(8)
    assert fnp.fft.fft(x).dtype == np.complex64
    assert fnp.fft.rfft(x).dtype == np.complex64
    assert fnp.fft.rfft(x.astype(np.float16)).dtype == np.complex64
    assert_close(fnp.fft.rfft(x), np.fft.rfft(x), np.float32)
    assert fnp.fft.irfft(np.ones(5, np.complex128)).dtype == np.float64


def test_degenerate_shapes_and_values(rng):
    """Empty batches transform to empty results; s=-1 keeps an axis's size (NumPy 2);
    a NaN spreads over the whole transform, as in NumPy."""
    for name in ("fft", "rfft", "irfft"):
        x = np.zeros((0, 4), np.float64 if name == "rfft" else np.complex128)
        got, want = getattr(fnp.fft, name)(x), getattr(np.fft, name)(x)
        assert got.shape == want.shape and got.dtype == want.dtype
    x = complex_sample(rng, (2, 3))
    assert_close(fnp.fft.fftn(x, s=(-1, 5), axes=(0, 1)), np.fft.fftn(x, s=(-1, 5), axes=(0, 1)),
                 np.float64)
    x = np.array([1.0, np.nan, 2.0, 0.5])
    np.testing.assert_array_equal(np.isnan(fnp.fft.rfft(x)), np.isnan(np.fft.rfft(x)))
    assert np.all(np.isnan(np.asarray(fnp.fft.irfft(fnp.fft.rfft(x)))))


def test_round_trips_recover_the_input(rng):
    x = real_sample(rng, (3, 7))
    assert_close(fnp.fft.irfft(fnp.fft.rfft(x), n=7), x, np.float64)
    assert_close(fnp.fft.ihfft(fnp.fft.hfft(fnp.fft.ihfft(x), n=7)), np.fft.ihfft(x),
                 np.float64)
    z = complex_sample(rng, (4, 6))
    assert_close(fnp.fft.ifftn(fnp.fft.fftn(z)), z, np.float64)


@pytest.mark.parametrize("n", [1, 2, 7, 8])
@pytest.mark.parametrize("dtype", [None, np.float64])
def test_frequencies_match_numpy(n, dtype):
    for d in (1.0, 0.25, 3):
        got = fnp.fft.fftfreq(n, d, dtype=dtype)
        assert got.dtype == (dtype or np.float32)
        assert_close(got, np.fft.fftfreq(n, d), dtype or np.float32)
        got = fnp.fft.rfftfreq(n, d, dtype=dtype)
        assert got.dtype == (dtype or np.float32)
        assert_close(got, np.fft.rfftfreq(n, d), dtype or np.float32)


def test_frequencies_differentiate_in_the_spacing():
    d = np.float64(0.5)
    g = fgrad.grad(lambda d: fnp.sum(fnp.fft.fftfreq(6, d, dtype=np.float64) ** 2))(d)
    k = np.fft.fftfreq(6, 1.0)
    np.testing.assert_allclose(g, np.sum(k ** 2) * -2 / d ** 3, rtol=1e-14)
    check_grads(lambda d: fnp.fft.rfftfreq(5, d, dtype=np.float64), (d,), order=2)


@pytest.mark.parametrize("axes", [None, 0, 1, (0,), (1, 0), (-1,), ()])
def test_shifts_match_numpy(axes):
    x = np.arange(35.0).reshape(5, 7)
    np.testing.assert_array_equal(fnp.fft.fftshift(x, axes), np.fft.fftshift(x, axes))
    np.testing.assert_array_equal(fnp.fft.ifftshift(x, axes), np.fft.ifftshift(x, axes))
    np.testing.assert_array_equal(fnp.fft.ifftshift(fnp.fft.fftshift(x, axes), axes), x)


# ----------------------------------------------------------------------------
# Errors

def test_errors_name_the_problem(rng):
    z = complex_sample(rng, (4,))
    with pytest.raises(TypeError, match="rfft: the input must be real"):
        fnp.fft.rfft(z)
    with pytest.raises(TypeError, match="ihfft: the input must be real"):
        fnp.fft.ihfft(z)
    with pytest.raises(ValueError, match="invalid number of data points n=0"):
        fnp.fft.fft(z, n=0)
    with pytest.raises(ValueError, match="invalid number of data points n=-1"):
        fnp.fft.fft(z, n=-1)
    with pytest.raises(ValueError, match=r"axis 1 of the input c128\[4,0\] gives no data"):
        fnp.fft.fft(np.zeros((4, 0), np.complex128))
    with pytest.raises(ValueError, match=r"gives 2\*\(1 - 1\) = 0 output samples; pass n"):
        fnp.fft.irfft(z[:1])
    with pytest.raises(ValueError, match="invalid number of data points s=0"):
        fnp.fft.fftn(np.ones((3, 3)), s=(2, 0))
    with pytest.raises(ValueError, match="invalid norm 'unitary'"):
        fnp.fft.fft(z, norm="unitary")
    with pytest.raises(TypeError, match="repeated axes"):
        fnp.fft.fftn(np.ones((3, 3)), axes=(0, 0))
    with pytest.raises(TypeError, match="axis 2 is out of bounds"):
        fnp.fft.fft(z.reshape(2, 2), axis=2)
    with pytest.raises(ValueError, match="different lengths"):
        fnp.fft.fftn(np.ones((3, 3)), s=(3,), axes=(0, 1))
    with pytest.raises(TypeError, match=r"trailing axes have sizes \(4,\), expected \(3,\)"):
        lax.fft(z, "irfft", (4,))
    with pytest.raises(TypeError, match="must be complex64 or complex128"):
        lax.fft(np.ones(4), "fft", (4,))
    with pytest.raises(TypeError, match="unknown fft_type 'dct'"):
        lax.fft(z, "dct", (4,))


# ----------------------------------------------------------------------------
# Derivatives

def _grad_cases():
    """(name, function, input kind, shape) over lengths odd and even, padding and
    truncation, norms and several axes."""
    f = fnp.fft
    return [
        ("fft", lambda x: f.fft(x), "c", (6,)),
        ("fft_n_ortho", lambda x: f.fft(x, n=4, axis=0, norm="ortho"), "c", (5, 2)),
        ("ifft_pad", lambda x: f.ifft(x, n=8, norm="forward"), "c", (2, 5)),
        ("rfft_even", lambda x: f.rfft(x), "r", (8,)),
        ("rfft_odd", lambda x: f.rfft(x, axis=0), "r", (7, 2)),
        ("rfft_pad_ortho", lambda x: f.rfft(x, n=9, norm="ortho"), "r", (6,)),
        ("irfft_even", lambda x: f.irfft(x), "c", (5,)),
        ("irfft_odd", lambda x: f.irfft(x, n=7), "c", (4,)),
        ("irfft_trunc", lambda x: f.irfft(x, n=4, axis=0, norm="forward"), "c", (5, 2)),
        ("hfft", lambda x: f.hfft(x, n=6), "c", (4,)),
        ("ihfft", lambda x: f.ihfft(x, norm="ortho"), "r", (7,)),
        ("fftn", lambda x: f.fftn(x, s=(3, 4)), "c", (2, 5)),
        ("ifft2", lambda x: f.ifft2(x, axes=(0, 1)), "c", (3, 4, 2)),
        ("rfftn_even", lambda x: f.rfftn(x), "r", (3, 4)),
        ("rfftn_axes", lambda x: f.rfftn(x, axes=(2, 0), norm="ortho"), "r", (3, 2, 5)),
        ("irfftn_even", lambda x: f.irfftn(x, s=(3, 6)), "c", (3, 4)),
        ("irfftn_odd", lambda x: f.irfftn(x, s=(2, 5), axes=(1, 0)), "c", (3, 2)),
        ("irfft2_forward", lambda x: f.irfft2(x, norm="forward"), "c", (2, 4, 3)),
    ]


@pytest.mark.parametrize("name,fun,kind,shape", _grad_cases(), ids=[c[0] for c in _grad_cases()])
def test_derivatives_match_finite_differences(name, fun, kind, shape, rng):
    x = real_sample(rng, shape) if kind == "r" else complex_sample(rng, shape)
    check_grads(fun, (x,), order=2, modes=("fwd", "rev"))


def _vdot(u, v):
    """<u, v> = sum(conj(u) v), the inner product the adjoint is taken in."""
    return np.vdot(np.asarray(u).ravel(), np.asarray(v).ravel())


@pytest.mark.parametrize("shape,axes", [((8,), None), ((5, 3), None), ((4, 6, 3), (2, 0))])
def test_adjoint_of_the_fft_is_the_inverse_fft_scaled(shape, axes, rng):
    x, y = complex_sample(rng, shape), complex_sample(rng, shape)
    size = np.prod([shape[a] for a in (axes or range(len(shape)))])
    fx = fnp.fft.fftn(x, axes=axes)
    adjoint_y = size * np.asarray(fnp.fft.ifftn(y, axes=axes))
    np.testing.assert_allclose(_vdot(fx, y), _vdot(x, adjoint_y), rtol=1e-13)
    # reverse mode: the transpose taken by vjp is conj(F^H conj(.)) under fgrad's convention
    _, pullback = fgrad.vjp(lambda x: fnp.fft.fftn(x, axes=axes), x)
    (ct,) = pullback(np.conj(y))
    np.testing.assert_allclose(np.conj(np.asarray(ct)), adjoint_y, rtol=1e-13, atol=1e-12)
    # ortho: unitary, its adjoint is its inverse
    ux = fnp.fft.fftn(x, axes=axes, norm="ortho")
    np.testing.assert_allclose(_vdot(ux, y), _vdot(x, fnp.fft.ifftn(y, axes=axes, norm="ortho")),
                               rtol=1e-13)


@pytest.mark.parametrize("name", ["fft", "ifft"])
def test_holomorphic_jacobians_are_the_dft_matrices(name, rng):
    z = complex_sample(rng, (6,))
    matrix = getattr(np.fft, name)(np.eye(6), axis=0)   # column j: the transform of e_j
    for jac in (fgrad.jacfwd, fgrad.jacrev):
        got = jac(getattr(fnp.fft, name), holomorphic=True)(z)
        np.testing.assert_allclose(got, matrix, atol=1e-15)


@pytest.mark.parametrize("shape", [(8,), (7,), (3, 6), (4, 5)])
def test_real_transforms_pull_back_by_their_adjoints(shape, rng):
    """The real-to-complex and complex-to-real transposes, with their edge weights:
    <rfft(x), c>_R = <x, vjp(c)> and <irfft(z), r> = <z, vjp(r)>_R, where
    <u, v>_R = Re sum(conj(u) v)."""
    x, r = real_sample(rng, shape), real_sample(rng, shape)
    half = shape[:-1] + (shape[-1] // 2 + 1,)
    c = complex_sample(rng, half)
    rfftn = lambda x: fnp.fft.rfftn(x)  # noqa: E731
    _, pullback = fgrad.vjp(rfftn, x)
    (ct_x,) = pullback(np.conj(c))
    np.testing.assert_allclose(np.real(_vdot(rfftn(x), c)), np.sum(x * np.asarray(ct_x)),
                               rtol=1e-12)
    irfftn = lambda z: fnp.fft.irfftn(z, s=shape)  # noqa: E731
    _, pullback = fgrad.vjp(irfftn, c)
    (ct_z,) = pullback(r)
    np.testing.assert_allclose(np.sum(np.asarray(irfftn(c)) * r),
                               np.real(_vdot(c, np.conj(np.asarray(ct_z)))), rtol=1e-12)


# ----------------------------------------------------------------------------
# vmap and jit

def _batched_cases():
    f = fnp.fft
    return [
        ("fft", lambda x: f.fft(x, n=5), "c", (4, 6)),
        ("rfft_axis0", lambda x: f.rfft(x, axis=0, norm="ortho"), "r", (6, 3)),
        ("irfft", lambda x: f.irfft(x, n=6), "c", (2, 4)),
        ("fftn", lambda x: f.fftn(x), "c", (3, 4)),
        ("rfft2", lambda x: f.rfft2(x, s=(3, 4)), "r", (2, 5, 3)),
        ("irfftn", lambda x: f.irfftn(x, axes=(1, 0)), "c", (4, 3)),
        ("hfft", lambda x: f.hfft(x), "c", (3, 4)),
        ("ihfft", lambda x: f.ihfft(x, axis=0), "r", (5, 2)),
        ("fftshift", lambda x: f.fftshift(x), "r", (3, 4)),
    ]


@pytest.mark.parametrize("name,fun,kind,shape", _batched_cases(),
                         ids=[c[0] for c in _batched_cases()])
def test_vmap_equals_a_loop_and_jit_equals_eager(name, fun, kind, shape, rng):
    for in_axis in (0, 1, -1):
        bshape = list(shape)
        bshape.insert(in_axis % (len(shape) + 1), 3)
        x = real_sample(rng, bshape) if kind == "r" else complex_sample(rng, bshape)
        got = fgrad.vmap(fun, in_axes=in_axis)(x)
        want = np.stack([np.asarray(fun(s)) for s in np.moveaxis(x, in_axis, 0)])
        np.testing.assert_array_equal(got, want)
    x = real_sample(rng, shape) if kind == "r" else complex_sample(rng, shape)
    np.testing.assert_array_equal(fgrad.jit(fun)(x), fun(x))


ALL = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2",
       "fftn", "ifftn", "rfftn", "irfftn", "fftshift", "ifftshift"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ALL)
def test_jit_gives_the_same_bits_as_eager(name, dtype, rng):
    real_in = name in ("rfft", "ihfft", "rfft2", "rfftn", "fftshift", "ifftshift")
    x = real_sample(rng, (3, 4, 5), dtype) if real_in else complex_sample(rng, (3, 4, 5), dtype)
    fun = getattr(fnp.fft, name)
    np.testing.assert_array_equal(fgrad.jit(fun)(x), fun(x))
    if name not in ("fftshift", "ifftshift"):
        f = lambda x: fun(x, norm="ortho")  # noqa: E731
        np.testing.assert_array_equal(fgrad.jit(f)(x), f(x))


def test_frequencies_under_jit():
    f = fgrad.jit(lambda d: (fnp.fft.fftfreq(7, d), fnp.fft.rfftfreq(8, d)))
    for got, want in zip(f(np.float32(0.1)), (np.fft.fftfreq(7, 0.1), np.fft.rfftfreq(8, 0.1))):
        assert_close(got, want, np.float32)


def test_gradient_of_the_spectral_energy_is_parsevals(rng):
    """sum |fft(z)|^2 = N sum |z|^2, so its gradient under fgrad's convention
    (df/dx - i df/dy) is 2N conj(z); for real x and rfft's half spectrum, the
    energy counts the interior frequencies once, and its gradient follows."""
    z = complex_sample(rng, (3, 8))
    g = fgrad.grad(lambda z: fnp.sum(fnp.abs(fnp.fft.fft2(z)) ** 2))(z)
    np.testing.assert_allclose(g, 2 * z.size * np.conj(z), rtol=1e-12)
    x = real_sample(rng, (8,))
    energy = lambda x: fnp.sum(fnp.abs(fnp.fft.rfft(x)) ** 2)  # noqa: E731
    # |X_0|^2 + |X_4|^2 + sum_{k=1..3} |X_k|^2 = (N sum x^2 + |X_0|^2 + |X_4|^2) / 2
    dc, nyquist = np.sum(x), np.sum(x * (-1.0) ** np.arange(8))
    want = 8 * x + dc + nyquist * (-1.0) ** np.arange(8)
    np.testing.assert_allclose(fgrad.grad(energy)(x), want, rtol=1e-12)


def test_jit_of_grad_equals_eager(rng):
    x = real_sample(rng, (4, 6), np.float32)

    def loss(x):
        spectrum = fnp.fft.rfft2(x, norm="ortho")
        return fnp.sum(fnp.abs(spectrum) ** 2 * fnp.fft.rfftfreq(6)) + fnp.sum(
            fnp.fft.irfft(spectrum, n=6, axis=-1))

    # the jitted program fuses the element-wise parts (not bit-equal to NumPy's loops)
    np.testing.assert_allclose(fgrad.jit(fgrad.grad(loss))(x), fgrad.grad(loss)(x), rtol=1e-5)


def test_as_text_says_the_fft_calls_scipy(rng):
    x = real_sample(rng, (16,), np.float32)
    text = fgrad.jit(fnp.fft.rfft).lower(x).as_text()
    assert "numpy:fft (calls scipy.fft (pocketfft))" in text, text
    assert "fft[fft_lengths=(16,) fft_type='rfft']" in text, text
