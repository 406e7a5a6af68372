"""The standard's data type functions: isdtype, finfo, iinfo, can_cast, result_type.

Promotion is fgrad's lattice applied to dtypes alone (no value-based casting and
no weak types): it agrees with the standard's table wherever the standard
defines one (within bool, within integers, within floats). Across kinds, which
the standard leaves to the library, fgrad's choice stands: bool < integer <
float, an integer meeting a float gives that float, and uint64 with a signed
integer gives float64.
"""
from dataclasses import dataclass

import numpy as np

from .. import dtypes
from ..core import ArrayMethods
from ..numpy.util import is_py_scalar

bool = dtypes.bool_  # noqa: A001
int8, int16, int32, int64 = dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64
uint8, uint16, uint32, uint64 = dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64
float32, float64 = dtypes.float32, dtypes.float64

SIGNED = (int8, int16, int32, int64)
UNSIGNED = (uint8, uint16, uint32, uint64)
REAL_FLOATING = (float32, float64)
ALL = (bool,) + SIGNED + UNSIGNED + REAL_FLOATING

_KINDS = {
    "bool": lambda d: d.kind == "b",
    "signed integer": lambda d: d.kind == "i",
    "unsigned integer": lambda d: d.kind == "u",
    "integral": lambda d: d.kind in "iu",
    "real floating": lambda d: d.kind == "f",
    "complex floating": lambda d: d.kind == "c",
    "numeric": lambda d: d.kind in "iufc",
}


def _dtype_arg(name, value):
    """A supported dtype from a dtype object, or a clear TypeError."""
    try:
        return dtypes.canonicalize(value)
    except TypeError as err:
        raise TypeError(f"{name}: {value!r} is not a dtype of this namespace ({err})") from None


def isdtype(dtype, kind):
    """Whether `dtype` is of `kind`: a dtype, a kind name ('bool', 'signed integer',
    'unsigned integer', 'integral', 'real floating', 'complex floating', 'numeric'),
    or a tuple of those (any match)."""
    if isinstance(kind, tuple):
        return any(isdtype(dtype, k) for k in kind)
    dtype = np.dtype(dtype)
    if isinstance(kind, str):
        if kind not in _KINDS:
            raise ValueError(f"isdtype: unknown kind {kind!r}; use one of {sorted(_KINDS)}")
        return _KINDS[kind](dtype)
    return dtype == np.dtype(kind)


@dataclass(frozen=True)
class finfo_object:
    """Machine limits of a floating-point dtype, as Python floats."""
    bits: int
    eps: float
    max: float
    min: float
    smallest_normal: float
    dtype: np.dtype


@dataclass(frozen=True)
class iinfo_object:
    """Machine limits of an integer dtype, as Python ints."""
    bits: int
    max: int
    min: int
    dtype: np.dtype


def _dtype_of(type):
    return type.dtype if isinstance(type, ArrayMethods) else _dtype_arg("finfo/iinfo", type)


def finfo(type, /):
    """Limits of a floating-point dtype (or of an array's dtype)."""
    d = _dtype_of(type)
    if d.kind != "f":
        raise TypeError(f"finfo: {d} is not a floating-point dtype; use iinfo for integers")
    f = np.finfo(d)
    return finfo_object(f.bits, float(f.eps), float(f.max), float(f.min),
                        float(f.smallest_normal), d)


def iinfo(type, /):
    """Limits of an integer dtype (or of an array's dtype)."""
    d = _dtype_of(type)
    if d.kind not in "iu":
        raise TypeError(f"iinfo: {d} is not an integer dtype; use finfo for floats")
    i = np.iinfo(d)
    return iinfo_object(i.bits, int(i.max), int(i.min), d)


def result_type(*arrays_and_dtypes):
    """The dtype the standard's promotion gives arrays and dtypes, by their dtypes
    only (an array's values never matter). Python scalars, which the 2024.12
    standard also accepts, take the dtype of the others."""
    typed = []
    for a in arrays_and_dtypes:
        if isinstance(a, ArrayMethods):
            typed.append((a.dtype, False))
        elif is_py_scalar(a):
            typed.append((dtypes.dtype_of_python_scalar(a), True))
        else:
            typed.append((_dtype_arg("result_type", a), False))
    if not typed:
        raise ValueError("result_type: needs at least one array or dtype")
    if all(w for _, w in typed):
        raise ValueError("result_type: needs at least one array or dtype besides scalars")
    return dtypes.result_type(*typed)[0]


def can_cast(from_, to, /):
    """Whether promotion of `from_` (a dtype or an array) with `to` gives `to`
    without leaving its kind (bool, integer, float): the standard's casting rule."""
    d = from_.dtype if isinstance(from_, ArrayMethods) else _dtype_arg("can_cast", from_)
    to = _dtype_arg("can_cast", to)
    kind = {"b": 0, "i": 1, "u": 1, "f": 2}
    if kind[d.kind] != kind[to.kind]:
        return False
    return dtypes.result_type((d, False), (to, False))[0] == to
