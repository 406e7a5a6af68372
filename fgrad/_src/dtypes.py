"""Dtypes, weak types and type promotion.

fgrad keeps the dtype a user passes (no global x64 switch). Python scalars are
*weakly typed*: they take the dtype of the array they meet (float32 array + 2.0
stays float32). Mixed array dtypes follow a small lattice, as in JAX:
bool < integers < floats < complex, and int32 + float32 -> float32. A complex
dtype is as wide as its widest part: complex64 + float64 -> complex128.
"""
import numpy as np

float16 = np.dtype("float16")
float32 = np.dtype("float32")
float64 = np.dtype("float64")
int8, int16, int32, int64 = (np.dtype(f"int{b}") for b in (8, 16, 32, 64))
uint8, uint16, uint32, uint64 = (np.dtype(f"uint{b}") for b in (8, 16, 32, 64))
bool_ = np.dtype("bool")
complex64 = np.dtype("complex64")
complex128 = np.dtype("complex128")

default_float = float32
default_int = int32

SUPPORTED = {bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
             float16, float32, float64, complex64, complex128}

_SHORT = {bool_: "bool", float16: "f16", float32: "f32", float64: "f64",
          int8: "i8", int16: "i16", int32: "i32", int64: "i64",
          uint8: "u8", uint16: "u16", uint32: "u32", uint64: "u64",
          complex64: "c64", complex128: "c128"}


def short_name(dtype):
    """'f32' for float32, as printed in jaxprs."""
    return _SHORT.get(dtype, str(dtype))


def canonicalize(dtype):
    """A NumPy dtype object for anything NumPy accepts as a dtype; rejects those fgrad
    lacks (strings, objects, complex256, ...)."""
    d = np.dtype(dtype)
    if d not in SUPPORTED:
        raise TypeError(f"fgrad does not support dtype {d}; supported: "
                        + ", ".join(sorted(str(x) for x in SUPPORTED)))
    return d


def is_float(dtype):
    return dtype.kind == "f"


def is_complex(dtype):
    return dtype.kind == "c"


def is_inexact(dtype):
    """Floating-point or complex: the dtypes that carry derivatives."""
    return dtype.kind in "fc"


def complex_dtype(real):
    """The complex dtype whose parts are `real` (float16 parts widen to complex64,
    as NumPy has no complex32)."""
    return complex128 if real == float64 else complex64


def real_dtype(dtype):
    """The dtype of a complex dtype's parts; other dtypes are their own."""
    if dtype.kind != "c":
        return dtype
    return float64 if dtype == complex128 else float32


def default_complex():
    """The complex dtype of Python complex scalars: the default float's complex."""
    return complex_dtype(default_float)


def is_int(dtype):
    return dtype.kind in "iu"


def is_bool(dtype):
    return dtype.kind == "b"


def _category(dtype):
    return {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}[dtype.kind]


def _promote_strong(a, b):
    if a == b:
        return a
    ca, cb = _category(a), _category(b)
    if ca == 3 or cb == 3:
        return _promote_complex(a, b)
    if ca != cb:
        return a if ca > cb else b
    if ca == 2:
        return a if a.itemsize >= b.itemsize else b
    # Two integer types.
    if a.kind == b.kind:
        return a if a.itemsize >= b.itemsize else b
    u, s = (a, b) if a.kind == "u" else (b, a)
    if s.itemsize > u.itemsize:
        return s
    if u.itemsize < 8:
        return np.dtype(f"int{u.itemsize * 16}")
    return float64  # uint64 with a signed type: no integer type holds both.


def _promote_complex(a, b):
    """A complex dtype with a complex, float or integer one: the complex whose parts
    are the wider of their (real) parts; integers leave the complex dtype as it is."""
    parts = [real_dtype(d) for d in (a, b) if d.kind in "fc"]
    return complex_dtype(max(parts, key=lambda d: d.itemsize))


def result_type(*typed):
    """Promote (dtype, weak) pairs; returns (dtype, weak)."""
    strong = [d for d, w in typed if not w]
    weak = [d for d, w in typed if w]
    if strong:
        dtype = strong[0]
        for d in strong[1:]:
            dtype = _promote_strong(dtype, d)
        if weak:
            top_weak = max(weak, key=_category)
            top, have = _category(top_weak), _category(dtype)
            if top > have:
                if top == 3:  # a Python complex: the complex of a float array's width
                    return (complex_dtype(dtype) if have == 2 else default_complex()), False
                # A Python float meeting an integer array: the default float.
                return (default_float if top == 2 else default_int), False
        return dtype, False
    top = max(weak, key=_category)
    return _weak_default(_category(top)), True


def _weak_default(category):
    return {0: bool_, 1: default_int, 2: default_float}.get(category) or default_complex()


def dtype_of_python_scalar(x):
    """Weak dtype of a Python scalar: bool, int32, float32 or complex64."""
    if isinstance(x, bool):
        return bool_
    if isinstance(x, int):
        return default_int
    if isinstance(x, float):
        return default_float
    if isinstance(x, complex):
        return default_complex()
    raise TypeError(f"fgrad does not support Python values of type {type(x).__name__}")
