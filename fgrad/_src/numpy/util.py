"""Conversion and dtype promotion for fgrad.numpy's functions."""
import numpy as np

from .. import dtypes, lax
from ..core import Array, Tracer, full_lower

_PY_SCALARS = (bool, int, float)


def asarray(x, dtype=None):
    """An fgrad value for x: tracers and Arrays as they are, Python scalars weakly
    typed, lists/NumPy arrays converted (Python lists default to float32/int32)."""
    if dtype is not None:
        dtype = dtypes.canonicalize(dtype)
    if isinstance(x, (Array, Tracer)):
        if dtype is not None and x.dtype != dtype:
            return lax.convert_element_type(x, dtype)
        return x
    if isinstance(x, _PY_SCALARS):
        d = dtype or dtypes.dtype_of_python_scalar(x)
        return Array(np.asarray(x, d), dtype is None)
    if isinstance(x, (np.ndarray, np.generic)):
        return Array(np.asarray(x, dtype or dtypes.canonicalize(x.dtype)), False)
    if isinstance(x, (list, tuple)):
        if any(isinstance(e, (Array, Tracer)) or _has_traced(e) for e in x):
            from .shape import stack
            return stack([asarray(e, dtype) for e in x])
        arr = np.asarray(x)
        if dtype is None:
            dtype = _default_for(arr.dtype)
        return Array(np.asarray(arr, dtype), False)
    if hasattr(x, "__array__"):
        return asarray(np.asarray(x), dtype)
    return full_lower(x)


def _has_traced(e):
    return isinstance(e, (list, tuple)) and any(
        isinstance(v, (Array, Tracer)) or _has_traced(v) for v in e)


def _default_for(np_dtype):
    """NumPy's 64-bit defaults for Python lists become fgrad's 32-bit defaults."""
    if np_dtype == np.float64:
        return dtypes.default_float
    if np_dtype == np.int64:
        return dtypes.default_int
    return dtypes.canonicalize(np_dtype)


def _typed(x):
    if isinstance(x, _PY_SCALARS):
        return dtypes.dtype_of_python_scalar(x), True
    if type(x) is Array:
        return x._value.dtype, x.weak_type
    aval = x.aval
    return aval.dtype, aval.weak_type


def promote(*args):
    """Convert args to fgrad values of one dtype, following the promotion lattice."""
    args = [a if isinstance(a, (Array, Tracer, bool, int, float)) else asarray(a) for a in args]
    typed = [_typed(a) for a in args]
    dtype, weak = dtypes.result_type(*typed)
    out = []
    for a, (d, w) in zip(args, typed):
        if isinstance(a, _PY_SCALARS):
            out.append(Array(np.asarray(a, dtype), weak))
        elif d != dtype or w != weak:
            out.append(a if d == dtype else lax.convert_element_type(a, dtype, weak))
        else:
            out.append(a)
    return out


def promote_inexact(*args):
    """Promote, then turn integer/bool results into the default float type."""
    args = promote(*args)
    dtype = args[0].dtype
    if dtype.kind != "f":
        weak = all(_typed(a)[1] for a in args)
        args = [lax.convert_element_type(a, dtypes.default_float, weak) for a in args]
    return args
