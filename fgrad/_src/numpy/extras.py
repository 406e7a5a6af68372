"""Smaller NumPy functions: floating-point decomposition (frexp, ldexp, modf,
nextafter, spacing), gcd and lcm, geomspace, window functions (bartlett,
blackman, hamming, hanning), predicates and conversions (isscalar, iterable,
isdtype, can_cast, array_equiv, asanyarray, ascontiguousarray, asfortranarray,
asarray_chkfinite), printing (array2string, array_repr, array_str) and bit packing
(packbits, unpackbits).
"""
import numpy as np

from .. import dtypes, lax
from ..core import Array, Tracer
from ..errors import ConcretizationError, FgradTypeError
from . import reductions, ufuncs
from .concrete import concrete_value
from .creation import linspace
from .shape import broadcast_shapes
from .util import asarray, canonicalize_axis, promote, promote_inexact, to_inexact

_UINTS = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def _const(value, dtype):
    return Array(np.asarray(value, dtype), False)


def nextafter(x1, x2, /):
    """The next representable float after x1 towards x2 (x1 itself where equal;
    NaN where either is NaN). Steps through the bit patterns, so it has no
    derivative (zero)."""
    x1, x2 = promote_inexact(x1, x2)
    x1, x2 = lax.stop_gradient(x1), lax.stop_gradient(x2)
    dtype = x1.dtype
    uint = np.dtype(_UINTS[dtype.itemsize])
    bits = lax.bitcast_convert_type(x1, uint)
    away_from_zero = ufuncs.logical_xor(x2 > x1, x1 < 0)
    one = _const(1, uint)
    stepped = lax.bitcast_convert_type(
        ufuncs.where(away_from_zero, bits + one, bits - one), dtype)
    tiny = np.finfo(dtype).smallest_subnormal
    from_zero = ufuncs.where(x2 > x1, _const(tiny, dtype), _const(-tiny, dtype))
    out = ufuncs.where(x1 == 0, from_zero, stepped)
    out = ufuncs.where(x1 == x2, x2, out)
    return ufuncs.where(ufuncs.logical_or(ufuncs.isnan(x1), ufuncs.isnan(x2)),
                        _const(np.nan, dtype), out)


def spacing(x, /):
    """The distance from x to the next float away from zero (negative for negative
    x), as numpy.spacing; NaN for inf and NaN."""
    x = to_inexact(asarray(x))
    finite = ufuncs.isfinite(x)
    x = lax.stop_gradient(ufuncs.where(finite, x, _const(0.0, x.dtype)))
    toward = ufuncs.where(x < 0, _const(-np.inf, x.dtype), _const(np.inf, x.dtype))
    return ufuncs.where(finite, nextafter(x, toward) - x, _const(np.nan, x.dtype))


def ldexp(x1, x2, /):
    """x1 · 2**x2 for integer x2 (in two steps, so large exponents applied to small
    values do not overflow on the way)."""
    x2 = asarray(x2)
    if x2.dtype.kind not in "iub":
        raise FgradTypeError(f"ldexp: the exponent must be an integer, got {x2.dtype}")
    x1 = to_inexact(asarray(x1))
    half = ufuncs.floor_divide(x2, 2)
    two = _const(2.0, x1.dtype)
    return x1 * ufuncs.power(two, half.astype(x1.dtype)) * ufuncs.power(
        two, (x2 - half).astype(x1.dtype))


def frexp(x, /):
    """(mantissa, exponent) with x = mantissa · 2**exponent and 0.5 <= |mantissa| < 1
    (0, inf and NaN: mantissa x, exponent 0). The mantissa's derivative is
    2**-exponent."""
    x = to_inexact(asarray(x))
    finite = ufuncs.logical_and(ufuncs.isfinite(x), x != 0)
    safe = lax.stop_gradient(ufuncs.where(finite, ufuncs.abs(x), _const(1.0, x.dtype)))
    e = ufuncs.floor(ufuncs.log2(safe)) + 1
    m = ldexp(safe, (-e).astype(dtypes.int32))   # may be off by one binade
    e = ufuncs.where(m >= 1, e + 1, ufuncs.where(m < 0.5, e - 1, e))
    e = ufuncs.where(finite, e, _const(0, x.dtype)).astype(dtypes.int32)
    mantissa = ldexp(x, -e)
    return ufuncs.where(finite, mantissa, x), e


def modf(x, /):
    """(fractional part, integral part), both with x's sign (inf: (±0, inf))."""
    x = to_inexact(asarray(x))
    whole = ufuncs.trunc(x)
    inf = ufuncs.isinf(x)
    finite_x = ufuncs.where(inf, _const(0.0, x.dtype), x)
    frac = ufuncs.where(inf, _const(0.0, x.dtype), finite_x - ufuncs.trunc(finite_x))
    return ufuncs.copysign(frac, x), whole


def _int_pair(name, x1, x2):
    x1, x2 = promote(x1, x2)
    if x1.dtype.kind not in "iu":
        raise FgradTypeError(f"{name}: arguments must be integers, got {x1.dtype}")
    return ufuncs.abs(x1), ufuncs.abs(x2)


def gcd(x1, x2, /):
    """The greatest common divisor of |x1| and |x2| (elementwise, Euclid's steps in a
    while_loop). |min| of a signed type wraps to min itself, so the steps may
    meet negative values: the last one's abs is the answer (as NumPy's)."""
    a, b = _int_pair("gcd", x1, x2)
    a, b = lax.broadcast_to(a, broadcast_shapes(a.shape, b.shape)), lax.broadcast_to(
        b, broadcast_shapes(a.shape, b.shape))

    def step(ab):
        a, b = ab
        nonzero = b != 0
        safe = ufuncs.where(nonzero, b, 1)
        return ufuncs.where(nonzero, b, a), ufuncs.where(nonzero, ufuncs.remainder(a, safe), 0)

    return ufuncs.abs(lax.while_loop(lambda ab: reductions.any(ab[1] != 0), step, (a, b))[0])


def lcm(x1, x2, /):
    """The least common multiple of |x1| and |x2| (0 when either is 0)."""
    a, b = _int_pair("lcm", x1, x2)
    g = gcd(a, b)
    return ufuncs.where(g == 0, 0, a * ufuncs.floor_divide(b, ufuncs.where(g == 0, 1, g)))


def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    """num numbers from start to stop spaced evenly on a log scale (start and stop
    of one sign, non-zero); the end points are exact."""
    start, stop = promote_inexact(start, stop)
    lo, hi = concrete_value(start), concrete_value(stop)
    if lo is not None and hi is not None:
        if np.any(lo == 0) or np.any(hi == 0):
            raise ValueError("geomspace: geometric sequence cannot include zero")
        if np.any(np.sign(lo) != np.sign(hi)):
            raise FgradTypeError("geomspace: start and stop of opposite signs need complex "
                                 "numbers, which fgrad does not have")
    sign = ufuncs.sign(start)
    logs = linspace(ufuncs.log10(start * sign), ufuncs.log10(stop * sign), num,
                    endpoint=endpoint, dtype=start.dtype, axis=0)
    out = ufuncs.power(_const(10.0, start.dtype), logs) * sign
    if num > 0:
        out = out.at[0].set(start)
        if endpoint and num > 1:
            out = out.at[-1].set(stop)
    out = out if dtype is None else out.astype(dtype)
    from .shape import moveaxis
    return moveaxis(out, 0, axis) if axis else out


def _window(fn, M):
    return Array(np.asarray(fn(int(M))).astype(dtypes.default_float), False)


def bartlett(M):
    """The triangular (Bartlett) window of M points (constants)."""
    return _window(np.bartlett, M)


def blackman(M):
    """The Blackman window of M points (constants)."""
    return _window(np.blackman, M)


def hamming(M):
    """The Hamming window of M points (constants)."""
    return _window(np.hamming, M)


def hanning(M):
    """The Hann window of M points (constants)."""
    return _window(np.hanning, M)


def isscalar(element):
    """True for Python and NumPy scalars and 0-d arrays (fgrad's too, as in JAX)."""
    if isinstance(element, (Array, Tracer)):
        return element.ndim == 0
    return np.isscalar(element) or (isinstance(element, np.ndarray) and element.ndim == 0)


def iterable(y):
    """Whether iter(y) works."""
    try:
        iter(y)
    except TypeError:
        return False
    return True


def isdtype(dtype, kind):
    """The Array API's dtype test ('bool', 'signed integer', 'real floating', ...)."""
    return np.isdtype(np.dtype(dtype), kind)


def can_cast(from_, to, casting="safe"):
    """NumPy's casting rule for from_ (a dtype or an array's dtype) to `to`."""
    if isinstance(from_, (Array, Tracer)):
        from_ = from_.dtype
    return np.can_cast(from_, to, casting)


def array_equiv(a1, a2):
    """Shapes broadcast together and all elements equal."""
    a1, a2 = asarray(a1), asarray(a2)
    try:
        broadcast_shapes(a1.shape, a2.shape)
    except (ValueError, TypeError, FgradTypeError):
        return Array(np.asarray(False), False)
    return reductions.all(a1 == a2)


def asanyarray(a, dtype=None, order=None):
    return asarray(a, dtype)


def ascontiguousarray(a, dtype=None):
    return asarray(a, dtype)


def asfortranarray(a, dtype=None):
    """asarray: fgrad chooses memory layouts itself."""
    return asarray(a, dtype)


def asarray_chkfinite(a, dtype=None, order=None):
    """asarray, checking that every value is finite (needs values known now)."""
    a = asarray(a, dtype)
    known = concrete_value(a)
    if known is None:
        raise ConcretizationError(f"asarray_chkfinite of a traced value ({a.aval.str_short()}"
                                  f"): the check needs the values.\n  hint: check outside "
                                  f"jit/vmap, or use fgrad.numpy.isfinite")
    if known.dtype.kind == "f" and not np.all(np.isfinite(known)):
        raise ValueError("array must not contain infs or NaNs")
    return a


def _host(a):
    known = concrete_value(asarray(a))
    if known is None:
        raise ConcretizationError("printing a traced value: its elements are not known "
                                  "while tracing.\n  hint: use fgrad.debug.print")
    return np.asarray(known)


def array2string(a, *args, **kwargs):
    """numpy.array2string of a's values."""
    return np.array2string(_host(a), *args, **kwargs)


def array_repr(arr, max_line_width=None, precision=None, suppress_small=None):
    return np.array_repr(_host(arr), max_line_width, precision, suppress_small)


def array_str(a, max_line_width=None, precision=None, suppress_small=None):
    return np.array_str(_host(a), max_line_width, precision, suppress_small)


def _bit_weights(bitorder, dtype):
    if bitorder not in ("big", "little"):
        raise ValueError(f"bitorder must be 'big' or 'little', got {bitorder!r}")
    weights = 1 << np.arange(8)
    return Array((weights[::-1] if bitorder == "big" else weights).astype(dtype), False)


def packbits(a, axis=None, bitorder="big"):
    """The truth values of a (nonzero elements) packed 8 to a uint8 along axis
    (flattened when None), zero-padded to a multiple of 8."""
    from .shape import moveaxis, pad
    a = asarray(a)
    if a.dtype.kind not in "iub":
        raise FgradTypeError(f"packbits: a must hold integers or booleans, got {a.dtype}")
    if axis is None:
        a, axis = a.ravel(), 0
    axis = canonicalize_axis("packbits", axis, a.ndim, a.shape)
    bits = moveaxis((a != 0).astype(np.uint8), axis, -1)
    n = bits.shape[-1]
    bits = pad(bits, [(0, 0)] * (bits.ndim - 1) + [(0, -n % 8)])
    groups = bits.reshape(tuple(bits.shape[:-1]) + (-(-n // 8), 8))
    packed = reductions.sum(groups * _bit_weights(bitorder, np.uint8), axis=-1,
                            dtype=np.uint8)
    return moveaxis(packed, -1, axis)


def unpackbits(a, axis=None, count=None, bitorder="big"):
    """The bits of the uint8 array a as uint8 0/1 values, 8 per element along axis
    (flattened when None); count keeps that many (negative: drops that many)."""
    from .shape import moveaxis, pad
    a = asarray(a)
    if a.dtype != np.uint8:
        raise FgradTypeError(f"unpackbits: a must be uint8, got {a.dtype}")
    if axis is None:
        a, axis = a.ravel(), 0
    axis = canonicalize_axis("unpackbits", axis, a.ndim, a.shape)
    moved = moveaxis(a, axis, -1)
    weights = _bit_weights(bitorder, np.uint8)
    bits = ((moved[..., None] & weights) != 0).astype(np.uint8)
    bits = bits.reshape(tuple(moved.shape[:-1]) + (moved.shape[-1] * 8,))
    if count is not None:
        total = bits.shape[-1]
        keep = count if count >= 0 else max(total + count, 0)
        bits = bits[..., :keep] if keep <= total else pad(
            bits, [(0, 0)] * (bits.ndim - 1) + [(0, keep - total)])
    return moveaxis(bits, -1, axis)
