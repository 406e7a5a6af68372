"""Complex numbers in fgrad.numpy: parts, conjugate, angle, predicates, and the
functions whose complex form is not one primitive (sinh, cosh, ...).

Real arrays pass through the part functions as NumPy's do (real(x) is x,
imag(x) is zeros, conj(x) is x); complex ones bind the lax primitives real,
imag, conj and complex, so everything here differentiates and batches.
"""
import numpy as np

from .. import dtypes, lax
from ..core import Array, Tracer
from .util import asarray

_ARRAYS = (Array, Tracer)


def _value(x):
    return x if isinstance(x, _ARRAYS) else asarray(x)


def _is_complex(x):
    return x.dtype.kind == "c"


def real(val, /):
    """The real part (a real array as it is)."""
    val = _value(val)
    return lax.real(val) if _is_complex(val) else val


def imag(val, /):
    """The imaginary part (zeros for a real array)."""
    val = _value(val)
    if _is_complex(val):
        return lax.imag(val)
    return Array(np.zeros(tuple(val.shape), val.dtype), False)


def conjugate(x, /):
    """The complex conjugate (a real array as it is)."""
    x = _value(x)
    return lax.conj(x) if _is_complex(x) else x


conj = conjugate


def angle(z, deg=False):
    """The argument of z in (-pi, pi] (degrees with deg=True); real inputs give 0 or pi."""
    z = _value(z)
    if not _is_complex(z):
        if z.dtype.kind != "f":
            z = lax.convert_element_type(z, dtypes.default_float)
        re, im = z, Array(np.zeros((), z.dtype), True)
    else:
        re, im = lax.real(z), lax.imag(z)
    out = lax.atan2(im, re)
    if deg:
        out = lax.mul(out, Array(np.asarray(180 / np.pi, out.dtype), True))
    return out


def iscomplexobj(x):
    """Whether x has a complex dtype (whatever its values)."""
    return np.dtype(_dtype_of(x)).kind == "c"


def isrealobj(x):
    """Whether x does not have a complex dtype."""
    return not iscomplexobj(x)


def _dtype_of(x):
    if isinstance(x, _ARRAYS) or isinstance(x, (np.ndarray, np.generic)):
        return x.dtype
    return asarray(x).dtype


def iscomplex(x):
    """Element-wise: a nonzero imaginary part (False throughout for real arrays)."""
    x = _value(x)
    if not _is_complex(x):
        return Array(np.zeros(tuple(x.shape), np.bool_), False)
    im = lax.imag(x)
    return lax.ne(im, Array(np.zeros((), im.dtype), True))


def isreal(x):
    """Element-wise: a zero imaginary part (True throughout for real arrays)."""
    x = _value(x)
    if not _is_complex(x):
        return Array(np.ones(tuple(x.shape), np.bool_), False)
    im = lax.imag(x)
    return lax.eq(im, Array(np.zeros((), im.dtype), True))
