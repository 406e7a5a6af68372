"""fgrad.numpy: NumPy's API over fgrad's primitives (import fgrad.numpy as fnp).

Functions keep NumPy's names, signatures and semantics (broadcasting,
axis/keepdims, indexing), with JAX's dtype rules: Python scalars are weakly
typed, float32 stays float32, and creation functions default to float32/int32.
Arrays are immutable: use `x.at[idx].set(v)` instead of `x[idx] = v`.
"""
import numpy as _np

from fgrad._src.numpy import (creation as _creation, indexing as _indexing,  # noqa: F401
                              linalg as _linalg, reductions as _reductions, shape as _shape,
                              ufuncs as _ufuncs, util as _util)
from fgrad._src.numpy import sorting as _sorting  # noqa: E402
from fgrad._src.numpy import complex_math as _complex_math  # noqa: E402


def _export(module):
    out = {}
    for name, value in vars(module).items():
        if name.startswith("_") or isinstance(value, type):
            continue
        if callable(value) and getattr(value, "__module__", None) == module.__name__:
            out[name] = value
    return out


for _m in (_ufuncs, _reductions, _shape, _linalg, _indexing, _creation, _sorting,
           _complex_math):
    globals().update(_export(_m))
del _m
globals().pop("getitem")  # x[idx], not a NumPy function

ndarray = _util.ndarray
result_type = _util.result_type
promote_types = _util.promote_types

# dtypes and their classes (NumPy's objects: usable wherever a dtype is expected)
bool_ = _np.bool_
bool = _np.bool_  # noqa: A001
int8, int16, int32, int64 = _np.int8, _np.int16, _np.int32, _np.int64
uint8, uint16, uint32, uint64 = _np.uint8, _np.uint16, _np.uint32, _np.uint64
float16, float32, float64 = _np.float16, _np.float32, _np.float64
complex64, complex128 = _np.complex64, _np.complex128
dtype = _np.dtype
finfo, iinfo = _np.finfo, _np.iinfo
issubdtype = _np.issubdtype
generic, number, integer, signedinteger, unsignedinteger = (
    _np.generic, _np.number, _np.integer, _np.signedinteger, _np.unsignedinteger)
inexact, floating = _np.inexact, _np.floating
complexfloating = _np.complexfloating

# constants
pi, e, inf, nan, euler_gamma = _np.pi, _np.e, _np.inf, _np.nan, _np.euler_gamma
newaxis = None

__all__ = sorted(n for n in globals() if not n.startswith("_"))

from fgrad.numpy import linalg  # noqa: E402,F401  (fgrad.numpy.linalg, as numpy.linalg)
