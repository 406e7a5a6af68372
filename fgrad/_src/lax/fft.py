"""Fast Fourier transforms: the `fft` primitive over the trailing axes.

`fft_p` transforms the last `len(fft_lengths)` axes of its operand; `fft_type`
says which transform (plain strings, so jaxprs print them):

    "fft"    complex -> complex, unnormalised: X[k] = sum_j x[j] exp(-2 pi i jk/n)
    "ifft"   complex -> complex, its inverse (scaled by 1/N, N = prod(fft_lengths))
    "rfft"   real -> complex; the last axis keeps its n//2 + 1 non-negative frequencies
    "irfft"  complex -> real, the inverse of rfft: the last axis holds n//2 + 1
             frequencies in, fft_lengths[-1] samples out (the imaginary parts of the
             zero and, for even n, the Nyquist frequency are ignored)

float32 goes with complex64 and float64 with complex128. Normalisation modes,
zero-padding, truncation and axes other than the trailing ones belong to the
public layer (`fgrad.numpy.fft`), which scales, pads, slices and transposes
around this one primitive. The eager impl, and the step a jitted program runs,
is SciPy's pocketfft (`scipy.fft`), which computes float32 in float32.

No native kernel: SciPy's pocketfft is C++ templates behind pybind11, with no C
entry point for generated code to call; NumPy's copy (reachable through its
gufunc loops) took 2.7x as long for float32 (21 vs 7.7 ms at 2^20 points), and
an FFT of our own would not come near pocketfft's speed. So a jitted program
runs the impl as one step, which as_text() labels 'numpy:fft (calls scipy.fft
(pocketfft))'; at 2^20 points that costs within a few percent of calling
scipy.fft directly (bench/fft.py).

Every transform is linear, so its JVP applies it to the tangent. Transposes
follow fgrad's convention for complex values (the plain, unconjugated transpose
of a C-linear map; see `fgrad.grad`), with N = prod(fft_lengths):

- fft and ifft: the DFT matrix is symmetric, so each is its own transpose.
- rfft = (keep the first n//2 + 1 frequencies) . fft . (real -> complex). Its
  transpose is Re(fft(zero-padded ct)), which a half-length real transform gives:
  Re(fft(pad(z))) = N * irfft(conj(z) * w), w = 1 at the zero (and even-n Nyquist)
  frequency and 1/2 elsewhere (irfft counts those interior frequencies twice, once
  for each of a conjugate pair).
- irfft(z) = Re(ifft(pad(v * z))) with v = 1 at the zero (and even-n Nyquist)
  frequency and 2 elsewhere. Its transpose is v * conj(rfft(ct)) / N.
"""
import enum
import math

import numpy as np

from .. import dtypes
from ..ad import deflinear
from ..batching import moveaxis
from ..core import Array, Primitive, ShapedArray, get_aval
from ..errors import FgradTypeError

FFT_TYPES = ("fft", "ifft", "rfft", "irfft")


class FftType(str, enum.Enum):
    """Which transform `fft` computes (plain strings are accepted too)."""
    FFT = "fft"
    IFFT = "ifft"
    RFFT = "rfft"
    IRFFT = "irfft"


def _fft_abstract_eval(x, *, fft_type, fft_lengths):
    k = len(fft_lengths)

    def fail(problem, hint):
        raise FgradTypeError(f"fft: {problem} for {fft_type} of {x.str_short()} with "
                             f"fft_lengths={fft_lengths}", hint=hint)

    if fft_type not in FFT_TYPES:
        fail(f"unknown fft_type {fft_type!r}", f"use one of {', '.join(FFT_TYPES)}")
    if not k or any(n < 1 for n in fft_lengths):
        fail("fft_lengths must name one or more lengths, each at least 1",
             "pass the lengths of the trailing axes to transform")
    if len(x.shape) < k:
        fail(f"the operand has fewer than {k} axes", "transform at most x.ndim axes")
    real_in = fft_type == "rfft"
    if real_in and x.dtype not in (dtypes.float32, dtypes.float64):
        fail("the operand must be float32 or float64",
             "rfft transforms real arrays; use fft_type 'fft' for complex ones")
    if not real_in and x.dtype.kind != "c":
        fail("the operand must be complex64 or complex128",
             "convert a real operand to complex first, or use fft_type 'rfft'")
    batch, trailing = tuple(x.shape[:-k]), tuple(x.shape[-k:])
    expected = fft_lengths
    if fft_type == "irfft":
        expected = fft_lengths[:-1] + (fft_lengths[-1] // 2 + 1,)
    if trailing != expected:
        fail(f"the trailing axes have sizes {trailing}, expected {expected}",
             "irfft takes n//2 + 1 frequencies on its last axis; fft, ifft and rfft "
             "take fft_lengths as they are (pad or slice the operand to fit)")
    if fft_type == "rfft":
        return ShapedArray(batch + fft_lengths[:-1] + (fft_lengths[-1] // 2 + 1,),
                           dtypes.complex_dtype(x.dtype), x.weak_type)
    if fft_type == "irfft":
        return ShapedArray(batch + fft_lengths, dtypes.real_dtype(x.dtype), x.weak_type)
    return ShapedArray(tuple(x.shape), x.dtype, x.weak_type)


_scipy_fft = None


def _fft_impl(x, *, fft_type, fft_lengths):
    global _scipy_fft
    if _scipy_fft is None:   # imported on first use (scipy.fft is slow to import)
        import scipy.fft as _scipy_fft
    sf = _scipy_fft
    if len(fft_lengths) == 1:   # the 1-d entry points cost half as much per call
        if fft_type == "irfft":
            return sf.irfft(x, fft_lengths[0])
        return getattr(sf, fft_type)(x)
    axes = tuple(range(x.ndim - len(fft_lengths), x.ndim))
    if fft_type == "irfft":
        return sf.irfftn(x, s=fft_lengths, axes=axes)
    return getattr(sf, fft_type + "n")(x, axes=axes)


fft_p = Primitive("fft")
fft_p.impl = _fft_impl
fft_p.abstract_eval = _fft_abstract_eval
# what a jitted program runs for this primitive (shown by as_text())
fft_p.impl_library = "scipy.fft (pocketfft)"


def _edge_weights(fft_lengths, dtype, interior, scale):
    """`scale` times weights over the last axis of a half spectrum (the n//2 + 1
    frequencies of an n-point transform): 1 at the zero frequency and, for even n,
    at the Nyquist frequency, `interior` at the others."""
    n = fft_lengths[-1]
    w = np.full(n // 2 + 1, interior, np.float64)
    w[0] = 1
    if n % 2 == 0:
        w[-1] = 1
    return Array((w * scale).astype(dtype), False)


def _fft_transpose(ct, x, *, fft_type, fft_lengths):
    from .elementwise import conj, mul
    size = math.prod(fft_lengths)
    if fft_type in ("fft", "ifft"):
        return [fft_p.bind(ct, fft_type=fft_type, fft_lengths=fft_lengths)]
    if fft_type == "rfft":
        w = _edge_weights(fft_lengths, ct.dtype, 0.5, size)
        return [fft_p.bind(mul(conj(ct), w), fft_type="irfft", fft_lengths=fft_lengths)]
    spectrum = fft_p.bind(ct, fft_type="rfft", fft_lengths=fft_lengths)
    v = _edge_weights(fft_lengths, spectrum.dtype, 2.0, 1 / size)
    return [mul(conj(spectrum), v)]


def _fft_batch(vals, dims, *, fft_type, fft_lengths):
    """The batch dim stays where it is unless it is among the transformed trailing
    axes; then it moves to the front."""
    (x,), (d,) = vals, dims
    if d >= len(x.shape) - len(fft_lengths):
        x, d = moveaxis(x, d, 0), 0
    return fft_p.bind(x, fft_type=fft_type, fft_lengths=fft_lengths), d


deflinear(fft_p, _fft_transpose)
fft_p.batch = _fft_batch


def fft(x, fft_type, fft_lengths):
    """The `fft_type` transform ('fft', 'ifft', 'rfft', 'irfft' or an FftType) of
    the last len(fft_lengths) axes of x; see this module's docstring."""
    try:
        fft_type = FftType(fft_type).value
    except ValueError:
        raise FgradTypeError(f"fft: unknown fft_type {fft_type!r}",
                             hint=f"use one of {', '.join(FFT_TYPES)} or an FftType") from None
    if isinstance(fft_lengths, (int, np.integer)):
        fft_lengths = (fft_lengths,)
    params = dict(fft_type=fft_type, fft_lengths=tuple(int(n) for n in fft_lengths))
    _fft_abstract_eval(get_aval(x), **params)  # errors at the user's line, before any rule
    return fft_p.bind(x, **params)
