"""Reductions with NumPy's axis/keepdims/dtype/where/initial arguments, and
cumulative sums and products.

Integer sums follow JAX (and fgrad's 32-bit defaults): bool and small integer
types accumulate in int32 (uint32 for small unsigned types); other dtypes keep
their own. Means and variances of integers are float32.
"""
import math

import numpy as np

from .. import dtypes, lax
from ..lax._util import broadcast_shape
from ..core import Array, Tracer
from ..errors import FgradTypeError
from .util import asarray, canonicalize_axes, canonicalize_axis, scalar_like


def _value(x):
    if type(x) is Array or isinstance(x, Tracer):
        return x
    return asarray(x)


def _sum_dtype(dtype):
    k = dtype.kind
    if k == "b":
        return dtypes.default_int
    if k == "i" and dtype.itemsize < 4:
        return dtypes.int32
    if k == "u" and dtype.itemsize < 4:
        return dtypes.uint32
    return dtype


def _cast(x, dtype):
    if dtype is None or x.dtype == dtype:
        return x
    return lax.convert_element_type(x, dtype)


def _keep(out, axes, keepdims):
    if keepdims and axes:
        return lax.expand_dims(out, axes)
    return out


def _reduced_size(x, axes):
    return math.prod(map(int, [x.shape[a] for a in axes]))


def _apply_where(name, x, where, identity):
    """Replace masked-out elements with the reduction's identity."""
    if where is None:
        return x
    w = _value(where)
    if w.dtype.kind != "b":
        w = lax.ne(w, scalar_like(w, 0))
    try:
        shape = broadcast_shape(tuple(w.shape), tuple(x.shape))
    except ValueError:
        shape = None
    if shape != tuple(x.shape):
        raise FgradTypeError(f"{name}: where mask of shape {tuple(w.shape)} does not "
                             f"broadcast to the array's shape {tuple(x.shape)}")
    return lax.select_n(w, Array(np.full(tuple(x.shape), identity, x.dtype), False), x)


def _reduce(name, lax_fn, a, axis, keepdims):
    axes = canonicalize_axes(name, axis, a.ndim, a.shape)
    out = lax_fn(a, axes) if axes else a
    return _keep(out, axes, keepdims)


# ----------------------------------------------------------------------------
# Sums, products, means, variances

def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    a = _value(a)
    dtype = _sum_dtype(a.dtype) if dtype is None else dtypes.canonicalize(dtype)
    a = _cast(a, dtype)
    a = _apply_where("sum", a, where, 0)
    res = _reduce("sum", lax.reduce_sum, a, axis, keepdims)
    if initial is not None:
        res = lax.add(res, scalar_like(res, initial))
    return res


def prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    a = _value(a)
    dtype = _sum_dtype(a.dtype) if dtype is None else dtypes.canonicalize(dtype)
    a = _cast(a, dtype)
    a = _apply_where("prod", a, where, 1)
    res = _reduce("prod", lax.reduce_prod, a, axis, keepdims)
    if initial is not None:
        res = lax.mul(res, scalar_like(res, initial))
    return res


def _inexact_dtype(a, dtype):
    if dtype is not None:
        return dtypes.canonicalize(dtype)
    return a.dtype if a.dtype.kind in "fc" else dtypes.default_float


def _accumulation_dtype(dtype):
    """float16 statistics are computed in float32 and rounded once at the end (as
    NumPy and JAX do): a float16 sum overflows at 65504, and so would the count."""
    return dtypes.float32 if dtype == dtypes.float16 else dtype


def _count(name, a, axes, where, dtype, keepdims):
    if where is None:
        return scalar_like(Array(np.zeros((), dtype)), _reduced_size(a, axes))
    w = _value(where)
    w = lax.broadcast_to(w if w.dtype.kind == "b" else lax.ne(w, scalar_like(w, 0)),
                         tuple(a.shape))
    return _reduce(name, lax.reduce_sum, lax.convert_element_type(w, dtype), axes, keepdims)


def mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    a = _value(a)
    dtype = _inexact_dtype(a, dtype)
    acc = _accumulation_dtype(dtype)
    a = _cast(a, acc)
    axes = canonicalize_axes("mean", axis, a.ndim, a.shape)
    total = sum(a, axes, keepdims=keepdims, where=where)
    return _cast(lax.div(total, _count("mean", a, axes, where, acc, keepdims)), dtype)


def _variance(a, axis, dtype, ddof, keepdims, where, mean, correction):
    """(variance in the accumulation dtype, the result dtype)."""
    if correction is not None:
        ddof = correction
    a = _value(a)
    dtype = _inexact_dtype(a, dtype)
    acc = _accumulation_dtype(dtype)
    a = _cast(a, acc)
    axes = canonicalize_axes("var", axis, a.ndim, a.shape)
    if mean is None:
        mu = globals()["mean"](a, axes, keepdims=True, where=where)
    else:
        mu = _cast(_value(mean), acc)
    centered = lax.sub(a, mu)
    if centered.dtype.kind == "c":  # |x - mean|^2: a real variance, as NumPy's
        sq = lax.real(lax.mul(centered, lax.conj(centered)))
        acc, dtype = dtypes.real_dtype(acc), dtypes.real_dtype(dtype)
    else:
        sq = lax.mul(centered, centered)
    total = sum(sq, axes, keepdims=keepdims, where=where)
    n = _count("var", a, axes, where, acc, keepdims)
    return lax.div(total, lax.sub(n, scalar_like(n, ddof))), dtype


def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
        mean=None, correction=None):
    """Variance: mean of squared deviations, divided by (N - ddof) instead of N."""
    v, dtype = _variance(a, axis, dtype, ddof, keepdims, where, mean, correction)
    return _cast(v, dtype)


def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
        mean=None, correction=None):
    v, dtype = _variance(a, axis, dtype, ddof, keepdims, where, mean, correction)
    return _cast(lax.sqrt(v), dtype)


def average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    """Weighted mean (weights of a's shape, or 1-D along a single axis)."""
    a = _value(a)
    if weights is None:
        avg = mean(a, axis, keepdims=keepdims)
        if returned:
            axes = canonicalize_axes("average", axis, a.ndim, a.shape)
            return avg, lax.broadcast_to(scalar_like(avg, _reduced_size(a, axes)),
                                         tuple(avg.shape))
        return avg
    from .ufuncs import multiply
    from .util import promote_inexact
    a, w = promote_inexact(a, weights)
    dtype = a.dtype
    a, w = _cast(a, _accumulation_dtype(dtype)), _cast(w, _accumulation_dtype(dtype))
    if tuple(w.shape) != tuple(a.shape):
        if axis is None or w.ndim != 1 or isinstance(axis, (tuple, list)):
            raise FgradTypeError(f"average: weights of shape {tuple(w.shape)} differ from "
                                 f"the array's shape {tuple(a.shape)}; 1-D weights need "
                                 f"a single axis")
        ax = canonicalize_axis("average", axis, a.ndim, a.shape)
        if w.shape[0] != a.shape[ax]:
            raise FgradTypeError(f"average: weights of shape {tuple(w.shape)} do not match "
                                 f"axis {ax} of shape {tuple(a.shape)}")
        w = lax.broadcast_in_dim(w, tuple(a.shape), (ax,))
    scl = sum(w, axis, keepdims=keepdims)
    avg = lax.div(sum(multiply(a, w), axis, keepdims=keepdims), scl)
    avg, scl = _cast(avg, dtype), _cast(scl, dtype)
    return (avg, lax.broadcast_to(scl, tuple(avg.shape))) if returned else avg


# ----------------------------------------------------------------------------
# Extrema

def _extremum(name, lax_fn, np_name, a, axis, keepdims, initial, where):
    a = _value(a)
    axes = canonicalize_axes(name, axis, a.ndim, a.shape)
    if where is not None and initial is None:
        raise ValueError(f"{name}: reduction with a where mask needs an initial value")
    if initial is not None:
        init = scalar_like(a, initial)
        a = _apply_where(name, a, where, initial)
    if axes and _reduced_size(a, axes) == 0:
        if initial is None:
            raise ValueError(f"zero-size array to reduction operation {np_name} which has "
                             f"no identity")
        shape = tuple(1 if i in axes else s for i, s in enumerate(a.shape)) if keepdims \
            else tuple(s for i, s in enumerate(a.shape) if i not in axes)
        return Array(np.full(shape, initial, a.dtype), False)
    res = _reduce(name, lax_fn, a, axes, keepdims)
    if initial is not None:
        res = (lax.max if lax_fn is lax.reduce_max else lax.min)(res, init) \
            if a.dtype.kind != "b" else (lax.bitwise_or if lax_fn is lax.reduce_max
                                        else lax.bitwise_and)(res, init)
    return res


def max(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    return _extremum("max", lax.reduce_max, "maximum", a, axis, keepdims, initial, where)


def min(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    return _extremum("min", lax.reduce_min, "minimum", a, axis, keepdims, initial, where)


amax, amin = max, min


def ptp(a, axis=None, out=None, keepdims=False):
    return lax.sub(max(a, axis, keepdims=keepdims), min(a, axis, keepdims=keepdims))


def _arg_extremum(name, lax_fn, a, axis, keepdims):
    a = _value(a)
    if axis is None:
        flat = lax.reshape(a, (a.size,))
        if a.size == 0:
            raise ValueError(f"attempt to get {name} of an empty sequence")
        out = lax_fn(flat, 0, dtypes.default_int)
        if keepdims:
            out = lax.reshape(out, (1,) * a.ndim)
        return out
    ax = canonicalize_axis(name, axis, a.ndim, a.shape)
    if a.shape[ax] == 0:
        raise ValueError(f"attempt to get {name} of an empty sequence")
    out = lax_fn(a, ax, dtypes.default_int)
    return lax.expand_dims(out, (ax,)) if keepdims else out


def argmax(a, axis=None, out=None, *, keepdims=False):
    """Index of the (first) maximum; int32; axis None means the flattened array."""
    return _arg_extremum("argmax", lax.argmax, a, axis, keepdims)


def argmin(a, axis=None, out=None, *, keepdims=False):
    return _arg_extremum("argmin", lax.argmin, a, axis, keepdims)


# ----------------------------------------------------------------------------
# Boolean reductions

def _bool(a):
    a = _value(a)
    if a.dtype.kind == "b":
        return a
    return lax.ne(a, scalar_like(a, 0))


def _logical(name, lax_fn, identity, a, axis, keepdims, where):
    a = _bool(a)
    a = _apply_where(name, a, where, identity)
    axes = canonicalize_axes(name, axis, a.ndim, a.shape)
    if axes and _reduced_size(a, axes) == 0:
        shape = tuple(1 if i in axes else s for i, s in enumerate(a.shape)) if keepdims \
            else tuple(s for i, s in enumerate(a.shape) if i not in axes)
        return Array(np.full(shape, identity, np.bool_), False)
    return _reduce(name, lax_fn, a, axes, keepdims)


def all(a, axis=None, out=None, keepdims=False, *, where=None):
    return _logical("all", lax.reduce_and, True, a, axis, keepdims, where)


def any(a, axis=None, out=None, keepdims=False, *, where=None):
    return _logical("any", lax.reduce_or, False, a, axis, keepdims, where)


def count_nonzero(a, axis=None, *, keepdims=False):
    return sum(_bool(a), axis, dtype=dtypes.default_int, keepdims=keepdims)


# ----------------------------------------------------------------------------
# NaN-ignoring reductions

def _nan_to(a, value):
    a = _value(a)
    if a.dtype.kind not in "fc":
        return a
    return lax.select_n(lax.ne(a, a), a, scalar_like(a, value))


def nansum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    return sum(_nan_to(a, 0), axis, dtype, keepdims=keepdims, initial=initial, where=where)


def nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    return prod(_nan_to(a, 1), axis, dtype, keepdims=keepdims, initial=initial, where=where)


def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    a = _value(a)
    if a.dtype.kind not in "fc":
        return mean(a, axis, dtype, keepdims=keepdims, where=where)
    keep = lax.eq(a, a)
    if where is not None:
        keep = lax.bitwise_and(keep, _bool(where))
    return mean(a, axis, dtype, keepdims=keepdims, where=keep)


def nanmax(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    a = _value(a)
    if a.dtype.kind != "f":
        return max(a, axis, keepdims=keepdims, initial=initial, where=where)
    res = max(_nan_to(a, -np.inf), axis, keepdims=keepdims, initial=initial, where=where)
    all_nan = all(lax.ne(a, a), axis, keepdims=keepdims)
    return lax.select_n(all_nan, res, np.nan)


def nanmin(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    a = _value(a)
    if a.dtype.kind != "f":
        return min(a, axis, keepdims=keepdims, initial=initial, where=where)
    res = min(_nan_to(a, np.inf), axis, keepdims=keepdims, initial=initial, where=where)
    all_nan = all(lax.ne(a, a), axis, keepdims=keepdims)
    return lax.select_n(all_nan, res, np.nan)


# ----------------------------------------------------------------------------
# Cumulative reductions

def _cumulative(name, lax_fn, a, axis, dtype):
    a = _value(a)
    dtype = _sum_dtype(a.dtype) if dtype is None else dtypes.canonicalize(dtype)
    a = _cast(a, dtype)
    if axis is None:
        a = lax.reshape(a, (a.size,))
        axis = 0
    ax = canonicalize_axis(name, axis, a.ndim, a.shape)
    if a.shape[ax] == 0:
        return a
    return lax_fn(a, ax)


def cumsum(a, axis=None, dtype=None, out=None):
    """Running sums along `axis` (the flattened array for axis None)."""
    return _cumulative("cumsum", lax.cumsum, a, axis, dtype)


def cumprod(a, axis=None, dtype=None, out=None):
    return _cumulative("cumprod", lax.cumprod, a, axis, dtype)


def _with_initial(name, fn, x, axis, dtype, include_initial, identity):
    x = _value(x)
    if axis is None:
        if x.ndim > 1:
            raise FgradTypeError(f"{name}: axis must be given for arrays of more than one "
                                 f"dimension (got shape {tuple(x.shape)})")
        axis = 0
    out = fn(x, axis, dtype)
    if include_initial:
        from .shape import concatenate
        ax = canonicalize_axis(name, axis, out.ndim, out.shape)
        shape = tuple(1 if i == ax else s for i, s in enumerate(out.shape))
        out = concatenate([Array(np.full(shape, identity, out.dtype), False), out], axis=ax)
    return out


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
    return _with_initial("cumulative_sum", cumsum, x, axis, dtype, include_initial, 0)


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False):
    return _with_initial("cumulative_prod", cumprod, x, axis, dtype, include_initial, 1)

