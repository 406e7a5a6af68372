"""Array creation: array, zeros, ones, full, arange, linspace, eye, ... .

Constant arrays (zeros, arange, eye, ...) are computed with NumPy right away:
their values depend only on static shapes, so they are constants under every
transform. Functions that take array values (full with a traced fill value,
linspace with traced end points, *_like) are built from lax operations.
Floating-point results default to the default float (float32 unless changed by
fgrad.default_float / config.default_float) and integer results to int32; a
dtype the user passes is kept.
"""
import numpy as np

from .. import dtypes, lax
from ..core import Array, Tracer, check_size
from .util import asarray as _asarray, is_py_scalar, result_dtype, static_int, static_shape


def asarray(a, dtype=None, order=None, copy=None):
    """Convert `a` to an fgrad array. fgrad Arrays are returned as they are
    (they are immutable); a NumPy array is copied, so the result does not change
    when the NumPy array is written to later."""
    return _asarray(a, dtype)


def array(object, dtype=None, copy=True, order=None, ndmin=0):
    """Like numpy.array: convert (a new buffer unless copy=False and `object` is
    an fgrad Array already), then prepend axes of size 1 up to `ndmin`."""
    out = _asarray(object, dtype)
    if copy and out is object:
        out = _copy_array(out)
    if ndmin > out.ndim:
        out = lax.reshape(out, (1,) * (ndmin - out.ndim) + tuple(out.shape))
    return out


def copy(a, order=None):
    """A new array with a's values, in memory of its own: donating it to a jitted
    function (donate_argnums) leaves `a` intact."""
    out = _asarray(a)
    return _copy_array(out) if out is a else out


def _copy_array(x):
    """An Array: a new one with its own buffer; a traced value as it is (nothing can
    write into it)."""
    if type(x) is Array:
        return Array(x._value.copy(), x.weak_type)
    return x


def _dtype(dtype):
    return dtypes.default_float if dtype is None else dtypes.canonicalize(dtype)


def zeros(shape, dtype=None, order="C"):
    dtype = _dtype(dtype)
    return Array(np.zeros(static_shape("zeros", shape, dtype), dtype), False)


def ones(shape, dtype=None, order="C"):
    dtype = _dtype(dtype)
    return Array(np.ones(static_shape("ones", shape, dtype), dtype), False)


def empty(shape, dtype=None, order="C"):
    """Zeros: fgrad has no uninitialised memory."""
    return zeros(shape, dtype)


def full(shape, fill_value, dtype=None, order="C"):
    """An array of `shape` filled with `fill_value` (which may be an array that
    broadcasts to `shape`, traced or not). A Python scalar fill value with no
    dtype gives a weakly typed result, as in JAX."""
    shape = static_shape("full", shape)
    if is_py_scalar(fill_value):
        if dtype is None:
            d = dtypes.dtype_of_python_scalar(fill_value)
            return Array(np.full(shape, fill_value, d), True)
        return Array(np.full(shape, fill_value, dtypes.canonicalize(dtype)), False)
    fill = _asarray(fill_value, dtype)
    from .shape import broadcast_to
    return broadcast_to(fill, shape)


def _like(name, a, dtype, shape):
    a_shape = tuple(np.shape(a)) if not hasattr(a, "shape") else tuple(a.shape)
    if shape is not None:
        a_shape = static_shape(name, shape)
    if dtype is not None:
        return a_shape, dtypes.canonicalize(dtype), False
    if is_py_scalar(a):
        return a_shape, dtypes.dtype_of_python_scalar(a), True
    if isinstance(a, (Array, Tracer)):
        from .util import is_weak
        return a_shape, a.dtype, is_weak(a)
    a = _asarray(a)
    return a_shape, a.dtype, False


def zeros_like(a, dtype=None, shape=None):
    shape, d, weak = _like("zeros_like", a, dtype, shape)
    return Array(np.zeros(shape, d), weak)


def ones_like(a, dtype=None, shape=None):
    shape, d, weak = _like("ones_like", a, dtype, shape)
    return Array(np.ones(shape, d), weak)


def empty_like(a, dtype=None, shape=None):
    return zeros_like(a, dtype, shape)


def full_like(a, fill_value, dtype=None, shape=None):
    shape, d, weak = _like("full_like", a, dtype, shape)
    if is_py_scalar(fill_value):
        return Array(np.full(shape, fill_value, d), weak)
    from .shape import broadcast_to
    return broadcast_to(_asarray(fill_value, d), shape)


def _static_scalar(name, what, v):
    if isinstance(v, Tracer):
        from ..errors import FgradTypeError
        raise FgradTypeError(f"{name}: {what} must be a static number, got a traced value "
                             f"({v.aval.str_short()})",
                             hint="the length of the result must be known while tracing")
    return np.asarray(v).item() if isinstance(v, Array) else v


def arange(start, stop=None, step=None, dtype=None):
    """Evenly spaced values in [start, stop) (static arguments): int32 for integer
    arguments, the default float when any is a float, unless `dtype` says otherwise."""
    start, stop, step = (None if a is None else _static_scalar("arange", "start/stop/step", a)
                         for a in (start, stop, step))
    if stop is None:
        start, stop = 0, start
    if step is None:
        step = 1
    if dtype is None:
        dtype = result_dtype(*[v if is_py_scalar(v) else _asarray(v)
                               for v in (start, stop, step)])
    dtype = dtypes.canonicalize(dtype)
    if dtype.kind in "iu":       # NumPy wraps bounds that do not fit (arange(2**63) is empty)
        info = np.iinfo(dtype)
        for v in (start, stop):
            if not info.min <= v <= info.max:
                raise OverflowError(
                    f"arange: {v!r} does not fit in {dtype} ({info.min} to {info.max})\n"
                    f"  hint: pass dtype=" + ("fgrad.numpy.int64" if info.bits < 64
                                              else "fgrad.numpy.float64"))
    if step and isinstance(start, int) and isinstance(stop, int) and isinstance(step, int):
        check_size("arange", (max(0, -((start - stop) // step)),), dtype)
    return Array(np.arange(start, stop, step, dtype=dtype), False)


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    """`num` evenly spaced values from start to stop (which may be arrays, traced
    or not); the default float unless the inputs or `dtype` say otherwise."""
    num = static_int("linspace", "num", num)
    if num < 0:
        raise ValueError(f"linspace: number of samples, {num}, must be non-negative")
    if dtype is None:
        dtype = result_dtype(start, stop)
        if dtype.kind not in "fc":
            dtype = dtypes.default_float
    dtype = dtypes.canonicalize(dtype)
    check_size("linspace", (num,), dtype)
    wide = np.complex128 if dtype.kind == "c" else np.float64
    step_dtype = dtype if dtype.kind in "fc" else dtypes.default_float
    if not isinstance(start, Tracer) and not isinstance(stop, Tracer):
        out, step = np.linspace(np.asarray(start, wide), np.asarray(stop, wide),
                                num, endpoint=endpoint, retstep=True, axis=axis)
        out = np.asarray(out)
        if dtype.kind in "iu":
            out = np.floor(out)            # as NumPy's dtype=int (not truncation)
        out = Array(out.astype(dtype), False)
        return (out, Array(np.asarray(step, step_dtype), False)) if retstep else out
    from .shape import moveaxis
    out, step = _traced_linspace(_asarray(start, wide), _asarray(stop, wide), num, endpoint)
    out = moveaxis(out, 0, axis)
    if dtype.kind in "iu":
        out = lax.floor(out)
    out = lax.convert_element_type(out, dtype)
    return (out, lax.convert_element_type(step, step_dtype)) if retstep else out


def _traced_linspace(start, stop, num, endpoint):
    """(values along a new axis 0, step), by NumPy's float64 formula, so jit and
    eager (which calls NumPy) give the same bits."""
    from . import ufuncs
    from .reductions import any as any_
    from .shape import broadcast_arrays, expand_dims
    start, stop = broadcast_arrays(start, stop)
    div = (num - 1) if endpoint else num
    delta = ufuncs.subtract(stop, start)
    i = Array(np.arange(num, dtype=start.dtype).reshape((num,) + (1,) * start.ndim), False)
    if div > 0:
        step = ufuncs.true_divide(delta, div)
        # where a step underflows to 0, NumPy scales i/div by delta instead
        out = ufuncs.where(any_(ufuncs.equal(step, 0)),
                           ufuncs.multiply(ufuncs.true_divide(i, div), expand_dims(delta, 0)),
                           ufuncs.multiply(i, expand_dims(step, 0)))
    else:
        step = Array(np.asarray(np.nan, start.dtype), False)    # undefined, as NumPy's
        out = ufuncs.multiply(i, expand_dims(delta, 0))
    out = ufuncs.add(out, expand_dims(start, 0))
    if endpoint and num > 1:
        last = Array((np.arange(num) == num - 1).reshape((num,) + (1,) * start.ndim), False)
        out = ufuncs.where(last, expand_dims(stop, 0), out)
    return out, step


def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    from . import ufuncs
    y = linspace(start, stop, num, endpoint=endpoint, dtype=dtype, axis=axis)
    return ufuncs.power(base, y)


def eye(N, M=None, k=0, dtype=None, order="C"):
    N = static_int("eye", "N", N)
    M = N if M is None else static_int("eye", "M", M)
    check_size("eye", (N, M), _dtype(dtype))
    return Array(np.eye(N, M, static_int("eye", "k", k), dtype=_dtype(dtype)), False)


def identity(n, dtype=None):
    return eye(n, dtype=dtype)


def tri(N, M=None, k=0, dtype=None):
    """Ones at and below the k-th diagonal."""
    N = static_int("tri", "N", N)
    M = N if M is None else static_int("tri", "M", M)
    check_size("tri", (N, M), _dtype(dtype))
    return Array(np.tri(N, M, static_int("tri", "k", k), dtype=_dtype(dtype)), False)


def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    """Coordinate matrices from 1-D coordinate vectors (as numpy.meshgrid)."""
    from .shape import broadcast_to
    if indexing not in ("xy", "ij"):
        raise ValueError("meshgrid: indexing must be 'xy' or 'ij'")
    xs = [_asarray(x) for x in xi]
    for x in xs:
        if x.ndim != 1:
            from ..errors import FgradTypeError
            raise FgradTypeError(f"meshgrid: inputs must be 1-D, got shape {tuple(x.shape)}")
    n = len(xs)
    shape = [x.shape[0] for x in xs]
    if indexing == "xy" and n > 1:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, x in enumerate(xs):
        ax = i
        if indexing == "xy" and n > 1 and i < 2:
            ax = 1 - i
        s = [1] * n
        s[ax] = x.shape[0]
        r = lax.reshape(x, s)
        out.append(r if sparse else broadcast_to(r, shape))
    return out
