"""fgrad.numpy: NumPy's API over fgrad's primitives (import fgrad.numpy as fnp).

Functions keep NumPy's names, signatures and semantics (broadcasting,
axis/keepdims, indexing), with JAX's dtype rules: Python scalars are weakly
typed, float32 stays float32, and creation functions default to float32/int32
(the float default can be float64: fgrad.default_float, config.default_float).
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
csingle, cdouble = _np.csingle, _np.cdouble
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

# issue 17: more of NumPy's namespace, each module exporting its public functions
from fgrad._src.numpy import (calculus as _calculus, editing as _editing,  # noqa: E402
                              errstate as _errstate, extras as _extras,
                              histograms as _histograms, index_tricks as _index_tricks,
                              polynomial as _polynomial, selection as _selection,
                              setops as _setops, statistics as _statistics)

for _module in (_statistics, _polynomial, _index_tricks, _histograms, _setops, _calculus,
                _selection, _errstate, _editing, _extras):
    globals().update(_export(_module))
del _module
r_, c_, mgrid, ogrid = _index_tricks.r_, _index_tricks.c_, _index_tricks.mgrid, _index_tricks.ogrid
s_, index_exp = _index_tricks.s_, _index_tricks.index_exp
errstate = _errstate.errstate
vectorize = _editing.vectorize
# NumPy 2's Array API spellings of existing functions
acos, acosh, asin, asinh = _ufuncs.arccos, _ufuncs.arccosh, _ufuncs.arcsin, _ufuncs.arcsinh
atan, atan2, atanh = _ufuncs.arctan, _ufuncs.arctan2, _ufuncs.arctanh
pow = _ufuncs.power  # noqa: A001
# printing goes through NumPy, so NumPy's print options apply to fgrad arrays
printoptions, set_printoptions = _np.printoptions, _np.set_printoptions
get_printoptions = _np.get_printoptions
# NumPy's C-style names for the same types (a dtype the user passes is kept)
half, single, double = _np.half, _np.single, _np.double
byte, short, intc, longlong, long = _np.byte, _np.short, _np.intc, _np.longlong, _np.long
ubyte, ushort, uintc, ulonglong, ulong = (_np.ubyte, _np.ushort, _np.uintc, _np.ulonglong,
                                          _np.ulong)
int_, uint, intp, uintp = _np.int_, _np.uint, _np.intp, _np.uintp
True_, False_ = _np.True_, _np.False_
from fgrad._src.dlpack import from_dlpack  # noqa: E402,F401  (numpy.from_dlpack's counterpart)
from fgrad.numpy import fft  # noqa: E402  (the submodule fgrad.numpy.fft)

__all__ = sorted(n for n in globals() if not n.startswith("_"))

from fgrad.numpy import linalg  # noqa: E402,F401  (fgrad.numpy.linalg, as numpy.linalg)
