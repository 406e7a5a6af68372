"""Conversion, dtype promotion and axis helpers for fgrad.numpy's functions."""
import numpy as np

from .. import dtypes, lax
from ..core import Array, Tracer, check_size, full_lower
from ..errors import FgradTypeError

_PY_SCALARS = (bool, int, float, complex)
_ARRAYS = (Array, Tracer)


def is_py_scalar(x):
    """A Python bool/int/float (weakly typed); NumPy scalars such as np.float64,
    though subclasses of float, are strongly typed arrays."""
    return type(x) in _PY_SCALARS


def asarray(x, dtype=None):
    """An fgrad value for x: tracers and Arrays as they are, Python scalars weakly
    typed, lists/NumPy arrays converted (Python lists default to float32/int32).
    A NumPy array is copied: the Array must not change when its owner writes
    into it later (and a view or a traced constant of it would)."""
    if dtype is not None:
        dtype = dtypes.canonicalize(dtype)
    if isinstance(x, _ARRAYS):
        if dtype is not None and x.dtype != dtype:
            return lax.convert_element_type(x, dtype)
        return x
    if type(x) in _PY_SCALARS:
        d = dtype or dtypes.dtype_of_python_scalar(x)
        return Array(np.asarray(x, d), dtype is None)
    if isinstance(x, (np.ndarray, np.generic)):
        return Array(np.array(x, dtype or dtypes.canonicalize(x.dtype)), False)
    if isinstance(x, (list, tuple)):
        if any(isinstance(e, _ARRAYS) or _has_traced(e) for e in x):
            from .shape import stack
            return stack([asarray(e, dtype) for e in x])
        arr = np.asarray(x)
        if dtype is None:
            dtype = _default_for(arr.dtype)
        return Array(np.asarray(arr, dtype), False)
    if isinstance(x, (str, bytes)) or x is None:
        raise TypeError(f"fgrad.numpy cannot make an array from {type(x).__name__} "
                        f"value {x!r}; pass a number, a list of numbers or an array")
    if hasattr(x, "__array__"):
        return asarray(np.asarray(x), dtype)
    return full_lower(x)


def _has_traced(e):
    return isinstance(e, (list, tuple)) and any(
        isinstance(v, _ARRAYS) or _has_traced(v) for v in e)


def _default_for(np_dtype):
    """NumPy's 64-bit defaults for Python lists become fgrad's 32-bit defaults
    (complex128 becomes complex64)."""
    if np_dtype == np.float64:
        return dtypes.default_float
    if np_dtype == np.int64:
        return dtypes.default_int
    if np_dtype == np.complex128:
        return dtypes.default_complex()
    return dtypes.canonicalize(np_dtype)


def _typed(x):
    if type(x) in _PY_SCALARS:
        return dtypes.dtype_of_python_scalar(x), True
    if type(x) is Array:
        return x._value.dtype, x.weak_type
    aval = x.aval
    return aval.dtype, aval.weak_type


_SCALAR_KIND = {bool: "b", int: "i", float: "f", complex: "c"}
_KIND_RANK = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}


# NumPy arrays and the NumPy scalar types of fgrad's dtypes (exact types: subclasses
# of ndarray take asarray's general path)
NUMPY_TYPES = frozenset([np.ndarray] + [d.type for d in dtypes.SUPPORTED])


def from_numpy(x):
    """x as asarray would make it when x is a NumPy array or scalar of a supported
    dtype (a strongly typed copy); x unchanged otherwise."""
    if type(x) in NUMPY_TYPES and x.dtype in dtypes.SUPPORTED:
        return Array(np.array(x), False)
    return x


def promote(*args):
    """Convert args to fgrad values of one dtype, following the promotion lattice."""
    if len(args) == 2:
        # Fast paths for the common binary cases (the eager path must stay cheap).
        a, b = args
        ta, tb = type(a), type(b)
        if ta in NUMPY_TYPES:
            a = from_numpy(a)
            ta = type(a)
        if tb in NUMPY_TYPES:
            b = from_numpy(b)
            tb = type(b)
        args = (a, b)
        if ta is Array or isinstance(a, Tracer):
            if (tb is Array or isinstance(b, Tracer)) and a.dtype == b.dtype:
                return [a, b]
            if tb in _SCALAR_KIND and _KIND_RANK[_SCALAR_KIND[tb]] <= _KIND_RANK[a.dtype.kind]:
                return [a, Array(np.asarray(b, a.dtype), True)]
        elif tb is Array or isinstance(b, Tracer):
            if ta in _SCALAR_KIND and _KIND_RANK[_SCALAR_KIND[ta]] <= _KIND_RANK[b.dtype.kind]:
                return [Array(np.asarray(a, b.dtype), True), b]
    elif len(args) == 1:
        a = args[0]
        if type(a) is Array or isinstance(a, Tracer):
            return [a]
        a = from_numpy(a)
        if type(a) is Array:
            return [a]
    args = [a if type(a) in _PY_SCALARS or isinstance(a, _ARRAYS) else asarray(a) for a in args]
    typed = [_typed(a) for a in args]
    dtype, weak = dtypes.result_type(*typed)
    out = []
    for a, (d, w) in zip(args, typed):
        if type(a) in _PY_SCALARS:
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
    if dtype.kind not in "fc":
        weak = all(_typed(a)[1] for a in args)
        args = [lax.convert_element_type(a, dtypes.default_float, weak) for a in args]
    return args


def result_dtype(*args):
    """The dtype `promote` would give `args` (values or dtypes)."""
    typed = []
    for a in args:
        if isinstance(a, (np.dtype, type, str)):
            typed.append((dtypes.canonicalize(a), False))
        elif type(a) in _PY_SCALARS or isinstance(a, _ARRAYS):
            typed.append(_typed(a))
        else:
            typed.append(_typed(asarray(a)))
    return dtypes.result_type(*typed)[0]


def to_inexact(x):
    """x as an fgrad value of an inexact dtype (ints and bools become float32)."""
    x = asarray(x)
    if x.dtype.kind not in "fc":
        return lax.convert_element_type(x, dtypes.default_float, is_weak(x))
    return x


def is_weak(x):
    return True if type(x) in _PY_SCALARS else _typed(x)[1]


def is_concrete(x):
    """True for values known now (not tracers)."""
    return not isinstance(x, Tracer)


def shape_str(x):
    """'f32[2,3]' for an fgrad value or NumPy array, for error messages."""
    if type(x) in _PY_SCALARS:
        x = asarray(x)
    d = dtypes.short_name(np.dtype(x.dtype)) if x.dtype in dtypes.SUPPORTED else str(x.dtype)
    return f"{d}[{','.join(map(str, x.shape))}]"


def canonicalize_axis(name, axis, ndim, shape=None):
    """An axis as a non-negative int, or an FgradTypeError naming the operation."""
    try:
        a = int(axis)
    except TypeError:
        raise FgradTypeError(f"{name}: axis must be an integer, got {axis!r}") from None
    if not -ndim <= a < ndim:
        what = f"shape {tuple(shape)}" if shape is not None else f"{ndim} dimensions"
        raise FgradTypeError(f"{name}: axis {a} is out of bounds for an array of {what}",
                             hint=f"axes must lie in [-{ndim}, {ndim})")
    return a % ndim if ndim else 0


def canonicalize_axes(name, axis, ndim, shape=None):
    """axis (None, int or sequence) as a sorted tuple of distinct non-negative ints."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (tuple, list)):
        axes = tuple(canonicalize_axis(name, a, ndim, shape) for a in axis)
    else:
        axes = (canonicalize_axis(name, axis, ndim, shape),)
    if len(set(axes)) != len(axes):
        raise FgradTypeError(f"{name}: repeated axis in {axis!r}")
    return tuple(sorted(axes))


def full_like_value(x, value, dtype=None):
    """A constant of x's shape holding `value` (a NumPy constant, never traced)."""
    return Array(np.full(tuple(x.shape), value, dtype=dtype or x.dtype), False)


def scalar_like(x, value):
    """A weak 0-d constant of x's dtype."""
    return Array(np.asarray(value, x.dtype), True)


def static_int(name, what, value):
    """A Python int from a static argument, or a clear error for a traced one."""
    if isinstance(value, Tracer):
        raise FgradTypeError(
            f"{name}: {what} must be a static Python integer, got a traced value "
            f"({value.aval.str_short()})",
            hint="shapes and sizes must be known while tracing; pass a Python int")
    try:
        return int(np.asarray(value).item() if not isinstance(value, int) else value)
    except (TypeError, ValueError):
        raise FgradTypeError(f"{name}: {what} must be an integer, got {value!r}") from None


def static_shape(name, shape, dtype=None):
    """A tuple of Python ints from an int or sequence of ints; ArrayTooLargeError
    when an array of that shape (and dtype, when given) could not be indexed."""
    if isinstance(shape, (int, np.integer)) or (isinstance(shape, Array) and not shape.shape):
        shape = (static_int(name, "shape", shape),)
    else:
        try:
            shape = tuple(static_int(name, "shape", s) for s in shape)
        except TypeError:
            raise FgradTypeError(f"{name}: shape must be an int or a sequence of ints, "
                                 f"got {shape!r}") from None
    check_size(name, shape, dtype)
    return shape


class _ArrayMeta(type):
    def __instancecheck__(cls, x):
        return isinstance(x, _ARRAYS)


class ndarray(metaclass=_ArrayMeta):
    """For isinstance checks: fgrad Arrays and tracers are `fgrad.numpy.ndarray`s."""

    def __init__(self, *args, **kwargs):
        raise TypeError("fgrad.numpy.ndarray cannot be instantiated; use fgrad.numpy.array")


def result_type(*arrays_and_dtypes):
    """The dtype NumPy-style promotion (fgrad's lattice) gives the arguments."""
    return result_dtype(*arrays_and_dtypes)


def promote_types(type1, type2):
    return dtypes.result_type((dtypes.canonicalize(type1), False),
                              (dtypes.canonicalize(type2), False))[0]
