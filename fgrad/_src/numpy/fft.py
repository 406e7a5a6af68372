"""fgrad.numpy.fft: NumPy's discrete Fourier transforms over one `fft` primitive.

Each transform resizes its input along the transformed axes (zero-padding or
truncating to `n` / `s`, at the end, as NumPy does), moves those axes last,
binds `lax.fft` and moves them back, then scales for `norm`:

    "backward" (None)  forward transforms unscaled, inverse ones by 1/N
    "ortho"            both by 1/sqrt(N)
    "forward"          forward transforms by 1/N, inverse ones unscaled

where N is the product of the transform lengths. Dtypes follow JAX: float32
gives complex64 and float64 complex128 (NumPy computes in float64 whatever it
is given); integers and bools count as the default float, float16 as float32.
Real-input transforms (rfft, rfftn, ihfft) reject complex input with an error
rather than dropping the imaginary part. Axes must be distinct, and at least one.

Degenerate cases: a transform of length < 1 raises ValueError (as NumPy's does);
an empty batch gives an empty result; a NaN or Inf spreads over the whole
transform (and its gradient), as in NumPy.
"""
import math

import numpy as np

from .. import dtypes, lax
from ..core import Array
from ..errors import FgradTypeError
from .util import asarray, canonicalize_axis, shape_str, static_int

_NORMS = ("backward", "ortho", "forward")


# ----------------------------------------------------------------------------
# Input dtypes, sizes and axes

def _real_float(x):
    """x's dtype as a float32/float64 (the default float for ints and bools)."""
    if x.dtype.kind == "f":
        return dtypes.float32 if x.dtype == dtypes.float16 else x.dtype
    return dtypes.default_float


def _as_complex(x):
    x = asarray(x)
    if x.dtype.kind == "c":
        return x
    return lax.convert_element_type(x, dtypes.complex_dtype(_real_float(x)))


def _as_real(name, x):
    x = asarray(x)
    if x.dtype.kind == "c":
        raise FgradTypeError(f"{name}: the input must be real, got {shape_str(x)}",
                             hint="use fft/fftn for complex input (or pass the real part "
                                  "explicitly: fgrad.numpy.real(x))")
    target = _real_float(x)
    return x if x.dtype == target else lax.convert_element_type(x, target)


def _resize(x, axis, n):
    """x zero-padded or truncated at the end of `axis` to length n."""
    size = x.shape[axis]
    if n < size:
        return lax.slice_in_dim(x, 0, n, axis=axis)
    if n > size:
        config = [(0, 0, 0)] * x.ndim
        config[axis] = (0, n - size, 0)
        return lax.pad(x, 0, config)
    return x


def _length(name, what, n, allow_default=False):
    """A transform length: a static int >= 1 (or -1, NumPy's "the default", if allowed)."""
    n = static_int(name, what, n)
    if n < 1 and not (allow_default and n == -1):
        raise ValueError(f"{name}: invalid number of data points {what}={n}; a transform "
                         f"needs at least 1")
    return n


def _axes_and_lengths(name, x, s, axes, half_last, what="s"):
    """(axes as non-negative ints, transform lengths) from NumPy's `s` and `axes`.
    axes=None means the last len(s) axes, or every axis without s; a missing or -1
    length is the input's size, or 2*(size - 1) on the last axis of an inverse real
    transform (`half_last`)."""
    if s is not None:
        s = (s,) if isinstance(s, (int, np.integer)) else tuple(s)
    if axes is None:
        axes = tuple(range(-len(s), 0)) if s is not None else tuple(range(x.ndim))
    else:
        axes = (axes,) if isinstance(axes, (int, np.integer)) else tuple(axes)
    axes = tuple(canonicalize_axis(name, a, x.ndim, x.shape) for a in axes)
    if len(set(axes)) != len(axes):
        raise FgradTypeError(f"{name}: repeated axes {axes} (a transform applies once per "
                             f"axis here)", hint="pass each axis once")
    if s is not None and len(s) != len(axes):
        raise ValueError(f"{name}: s={s} and axes={axes} have different lengths")
    lengths = []
    for i, a in enumerate(axes):
        n = -1 if s is None or s[i] is None else _length(name, what, s[i], what == "s")
        if n == -1:
            half = half_last and i == len(axes) - 1
            n = 2 * (x.shape[a] - 1) if half else x.shape[a]
            if n < 1:
                raise ValueError(
                    f"{name}: axis {a} of the input {shape_str(x)} gives "
                    + (f"2*({x.shape[a]} - 1) = {n} output samples" if half else
                       "no data points") + f"; pass {what} >= 1 (the input is zero-padded)")
        lengths.append(n)
    return axes, tuple(lengths)


# ----------------------------------------------------------------------------
# The transforms

def _check_norm(name, norm):
    if norm is not None and norm not in _NORMS:
        raise ValueError(f"{name}: invalid norm {norm!r}; use one of {', '.join(_NORMS)} "
                         f"or None")


def _scale(x, norm, size, inverse):
    """x scaled for `norm` (the primitive's inverse transforms already divide by N)."""
    if norm is None or norm == "backward":
        return x
    if norm == "ortho":
        factor = math.sqrt(size) if inverse else 1 / math.sqrt(size)
    else:
        factor = size if inverse else 1 / size
    return lax.mul(x, Array(np.asarray(factor, x.dtype), False))


def _transform(name, fft_type, x, axes, lengths, norm):
    """`fft_type` of x over `axes` (distinct, in order; the real axis of rfft/irfft
    last) with the given transform lengths, scaled for `norm`."""
    _check_norm(name, norm)
    if not axes:
        raise FgradTypeError(f"{name}: no axes to transform",
                             hint="pass at least one axis (or s of at least one length)")
    for i, (a, n) in enumerate(zip(axes, lengths)):
        size = n // 2 + 1 if fft_type == "irfft" and i == len(axes) - 1 else n
        x = _resize(x, a, size)
    nd = x.ndim
    rest = [d for d in range(nd) if d not in axes]
    perm = tuple(rest) + tuple(axes)
    moved = perm != tuple(range(nd))
    if moved:
        x = lax.transpose(x, perm)
    out = lax.fft(x, fft_type, lengths)
    if moved:
        out = lax.transpose(out, tuple(np.argsort(perm)))
    return _scale(out, norm, math.prod(lengths), fft_type in ("ifft", "irfft"))


def _one_axis(name, a, n, axis, half_last):
    """(axes, lengths) of a 1-d transform along `axis` with length n."""
    return _axes_and_lengths(name, a, None if n is None else (n,), (axis,), half_last, "n")


def fft(a, n=None, axis=-1, norm=None):
    """The discrete Fourier transform along `axis`, of length n (zero-padded or
    truncated input; default its size along axis)."""
    a = _as_complex(a)
    return _transform("fft", "fft", a, *_one_axis("fft", a, n, axis, False), norm)


def ifft(a, n=None, axis=-1, norm=None):
    """The inverse of `fft` along `axis`."""
    a = _as_complex(a)
    return _transform("ifft", "ifft", a, *_one_axis("ifft", a, n, axis, False), norm)


def rfft(a, n=None, axis=-1, norm=None):
    """The transform of a real array along `axis`: its n//2 + 1 non-negative frequencies."""
    a = _as_real("rfft", a)
    return _transform("rfft", "rfft", a, *_one_axis("rfft", a, n, axis, False), norm)


def irfft(a, n=None, axis=-1, norm=None):
    """The inverse of `rfft`: n real samples (default 2*(m - 1) for m frequencies)
    from the non-negative frequencies along `axis` (padded or truncated to n//2 + 1)."""
    a = _as_complex(a)
    return _transform("irfft", "irfft", a, *_one_axis("irfft", a, n, axis, True), norm)


def _swap(norm):
    """The norm of the transform in the other direction (hfft is an inverse rfft)."""
    return {None: "forward", "backward": "forward", "forward": "backward"}.get(norm, norm)


def hfft(a, n=None, axis=-1, norm=None):
    """The transform of a Hermitian-symmetric signal given by its first half: n real
    values (default 2*(m - 1))."""
    a = _as_complex(a)
    axes, lengths = _one_axis("hfft", a, n, axis, True)
    return _transform("hfft", "irfft", lax.conj(a), axes, lengths, _swap(norm))


def ihfft(a, n=None, axis=-1, norm=None):
    """The inverse of `hfft`: the n//2 + 1 frequencies of a real signal, conjugated."""
    a = _as_real("ihfft", a)
    axes, lengths = _one_axis("ihfft", a, n, axis, False)
    return lax.conj(_transform("ihfft", "rfft", a, axes, lengths, _swap(norm)))


def fftn(a, s=None, axes=None, norm=None):
    """The n-dimensional transform over `axes` (default: all, or the last len(s))."""
    a = _as_complex(a)
    return _transform("fftn", "fft", a, *_axes_and_lengths("fftn", a, s, axes, False), norm)


def ifftn(a, s=None, axes=None, norm=None):
    """The inverse of `fftn`."""
    a = _as_complex(a)
    return _transform("ifftn", "ifft", a, *_axes_and_lengths("ifftn", a, s, axes, False),
                      norm)


def rfftn(a, s=None, axes=None, norm=None):
    """The n-dimensional transform of a real array; the last of `axes` keeps its
    non-negative frequencies."""
    a = _as_real("rfftn", a)
    return _transform("rfftn", "rfft", a, *_axes_and_lengths("rfftn", a, s, axes, False),
                      norm)


def irfftn(a, s=None, axes=None, norm=None):
    """The inverse of `rfftn`: real output with lengths s (the last default 2*(m - 1))."""
    a = _as_complex(a)
    return _transform("irfftn", "irfft", a, *_axes_and_lengths("irfftn", a, s, axes, True),
                      norm)


def fft2(a, s=None, axes=(-2, -1), norm=None):
    """`fftn` over two axes (default the last two)."""
    return fftn(a, s, axes, norm)


def ifft2(a, s=None, axes=(-2, -1), norm=None):
    """`ifftn` over two axes (default the last two)."""
    return ifftn(a, s, axes, norm)


def rfft2(a, s=None, axes=(-2, -1), norm=None):
    """`rfftn` over two axes (default the last two)."""
    return rfftn(a, s, axes, norm)


def irfft2(a, s=None, axes=(-2, -1), norm=None):
    """`irfftn` over two axes (default the last two)."""
    return irfftn(a, s, axes, norm)


# ----------------------------------------------------------------------------
# Frequencies and shifts

def _spacing(name, n, d, dtype):
    n = _length(name, "n", n)
    dtype = dtypes.canonicalize(dtype) if dtype is not None else dtypes.default_float
    if dtype.kind != "f":
        raise FgradTypeError(f"{name}: dtype must be a float type, got {dtype}",
                             hint="frequencies are fractions; pass float32 or float64")
    scale = lax.div(Array(np.asarray(1, dtype), False),
                    lax.mul(asarray(d, dtype), Array(np.asarray(n, dtype), False)))
    return n, dtype, scale


def fftfreq(n, d=1.0, *, dtype=None):
    """The sample frequencies of an n-point `fft` with sample spacing d:
    [0, 1, ..., (n-1)//2, -(n//2), ..., -1] / (n*d). `dtype` defaults to the
    default float (JAX's choice; NumPy gives float64); d may be traced."""
    n, dtype, scale = _spacing("fftfreq", n, d, dtype)
    k = np.concatenate([np.arange((n - 1) // 2 + 1), np.arange(-(n // 2), 0)])
    return lax.mul(Array(k.astype(dtype), False), scale)


def rfftfreq(n, d=1.0, *, dtype=None):
    """The sample frequencies of an n-point `rfft`: [0, 1, ..., n//2] / (n*d)."""
    n, dtype, scale = _spacing("rfftfreq", n, d, dtype)
    return lax.mul(Array(np.arange(n // 2 + 1).astype(dtype), False), scale)


def _shift(name, x, axes, inverse):
    from .shape import roll
    x = asarray(x)
    if axes is None:
        axes = tuple(range(x.ndim))
    elif isinstance(axes, (int, np.integer)):
        axes = (axes,)
    axes = tuple(canonicalize_axis(name, a, x.ndim, x.shape) for a in axes)
    if not axes:
        return x
    shifts = tuple(-(x.shape[a] // 2) if inverse else x.shape[a] // 2 for a in axes)
    return roll(x, shifts, axes)


def fftshift(x, axes=None):
    """x rolled so the zero frequency is in the middle of each of `axes` (default all)."""
    return _shift("fftshift", x, axes, False)


def ifftshift(x, axes=None):
    """The inverse of `fftshift`."""
    return _shift("ifftshift", x, axes, True)
