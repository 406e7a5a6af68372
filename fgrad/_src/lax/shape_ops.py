"""Shape primitives: broadcast_in_dim, reshape, transpose, squeeze, expand_dims.

All are linear, so each has a transpose rule (the inverse reshaping, or a sum
for broadcasting) and the forward-mode rule applies the op to the tangent.
"""
import math

import numpy as np

from ..ad import deflinear
from ..batching import batched_axes, moveaxis, unbatched_axis
from ..core import Primitive, ShapedArray
from ..errors import FgradTypeError


def _normalize_axes(name, axes, ndim, aval):
    out = []
    for a in axes:
        a = int(a)
        if not -ndim <= a < ndim:
            raise FgradTypeError(f"{name}: axis {a} is out of range for {aval.str_short()}",
                                 hint=f"axes must lie in [-{ndim}, {ndim})")
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise FgradTypeError(f"{name}: repeated axis in {tuple(axes)} for {aval.str_short()}")
    return tuple(out)


# ----------------------------------------------------------------------------
# broadcast_in_dim: operand dim i becomes output dim broadcast_dimensions[i]

def _broadcast_in_dim_abstract_eval(x, *, shape, broadcast_dimensions):
    if len(broadcast_dimensions) != x.ndim:
        raise FgradTypeError(f"broadcast_in_dim: {x.str_short()} needs {x.ndim} broadcast "
                             f"dimensions, got {broadcast_dimensions}")
    for i, d in enumerate(broadcast_dimensions):
        if not 0 <= d < len(shape) or x.shape[i] not in (1, shape[d]):
            raise FgradTypeError(
                f"broadcast_in_dim: cannot broadcast {x.str_short()} to shape {shape} "
                f"with broadcast_dimensions={broadcast_dimensions}",
                hint="each operand dimension must be 1 or equal the output dimension it maps to")
    if list(broadcast_dimensions) != sorted(broadcast_dimensions):
        raise FgradTypeError("broadcast_in_dim: broadcast_dimensions must be increasing, got "
                             f"{broadcast_dimensions}")
    return ShapedArray(shape, x.dtype, x.weak_type)


def _broadcast_in_dim_impl(x, *, shape, broadcast_dimensions):
    expanded = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        expanded[d] = x.shape[i]
    return np.broadcast_to(np.reshape(x, expanded), shape)


def _broadcast_in_dim_transpose(ct, x, *, shape, broadcast_dimensions):
    kept = set(broadcast_dimensions)
    summed = tuple(d for d in range(len(shape)) if d not in kept) + tuple(
        d for i, d in enumerate(broadcast_dimensions) if x.aval.shape[i] == 1 and shape[d] != 1)
    out = reduce_sum(ct, tuple(sorted(summed))) if summed else ct
    if tuple(out.shape) != x.aval.shape:
        out = reshape(out, x.aval.shape)
    return [out]


broadcast_in_dim_p = Primitive("broadcast_in_dim")
broadcast_in_dim_p.impl = _broadcast_in_dim_impl
broadcast_in_dim_p.abstract_eval = _broadcast_in_dim_abstract_eval
deflinear(broadcast_in_dim_p, _broadcast_in_dim_transpose)


def _broadcast_in_dim_batch(vals, dims, *, shape, broadcast_dimensions):
    # The batch dim goes right after where the operand's preceding dim lands: no move.
    (x,), (d,) = vals, dims
    at = broadcast_dimensions[d - 1] + 1 if d > 0 else 0
    bdims = (tuple(broadcast_dimensions[:d]) + (at,)
             + tuple(b + 1 for b in broadcast_dimensions[d:]))
    out_shape = shape[:at] + (x.shape[d],) + shape[at:]
    return broadcast_in_dim(x, out_shape, bdims), at


broadcast_in_dim_p.batch = _broadcast_in_dim_batch


def broadcast_in_dim(x, shape, broadcast_dimensions):
    return broadcast_in_dim_p.bind(x, shape=tuple(int(s) for s in shape),
                                   broadcast_dimensions=tuple(int(d) for d in broadcast_dimensions))


def broadcast_to(x, shape):
    """NumPy-style broadcast of x to `shape` (trailing dimensions aligned)."""
    shape = tuple(int(s) for s in shape)
    if tuple(x.shape) == shape:
        return x
    nd = len(x.shape)
    if nd > len(shape):
        raise FgradTypeError(f"broadcast_to: cannot broadcast shape {tuple(x.shape)} to {shape}")
    return broadcast_in_dim(x, shape, tuple(range(len(shape) - nd, len(shape))))


# ----------------------------------------------------------------------------
# reshape

def _reshape_abstract_eval(x, *, new_sizes):
    if math.prod(map(int, new_sizes)) != x.size:
        raise FgradTypeError(f"reshape: cannot reshape {x.str_short()} ({x.size} elements) "
                             f"to shape {new_sizes}")
    return ShapedArray(new_sizes, x.dtype, x.weak_type)


reshape_p = Primitive("reshape")
reshape_p.impl = lambda x, *, new_sizes: np.reshape(x, new_sizes)
reshape_p.abstract_eval = _reshape_abstract_eval
deflinear(reshape_p, lambda ct, x, *, new_sizes: [reshape(ct, x.aval.shape)])


def _reshape_batch(vals, dims, *, new_sizes):
    (x,), (d,) = vals, dims
    x = moveaxis(x, d, 0)  # row-major reshapes keep a leading dim intact
    return reshape(x, (x.shape[0],) + tuple(new_sizes)), 0


reshape_p.batch = _reshape_batch


def reshape(x, new_sizes):
    new_sizes = tuple(int(s) for s in new_sizes)
    if tuple(x.shape) == new_sizes:
        return x
    return reshape_p.bind(x, new_sizes=new_sizes)


# ----------------------------------------------------------------------------
# transpose

def _transpose_abstract_eval(x, *, permutation):
    if sorted(permutation) != list(range(x.ndim)):
        raise FgradTypeError(f"transpose: {permutation} is not a permutation of the axes "
                             f"of {x.str_short()}")
    return ShapedArray(tuple(x.shape[p] for p in permutation), x.dtype, x.weak_type)


def _transpose_transpose(ct, x, *, permutation):
    return [transpose(ct, tuple(np.argsort(permutation)))]


transpose_p = Primitive("transpose")
transpose_p.impl = lambda x, *, permutation: np.transpose(x, permutation)
transpose_p.abstract_eval = _transpose_abstract_eval
deflinear(transpose_p, _transpose_transpose)


def _transpose_batch(vals, dims, *, permutation):
    (x,), (d,) = vals, dims
    perm = (d,) + tuple(unbatched_axis(p, d) for p in permutation)
    return transpose(x, perm), 0


transpose_p.batch = _transpose_batch


def transpose(x, permutation):
    permutation = tuple(int(p) for p in permutation)
    if permutation == tuple(range(len(permutation))) and len(permutation) == len(x.shape):
        return x
    return transpose_p.bind(x, permutation=permutation)


# ----------------------------------------------------------------------------
# squeeze and expand_dims

def _squeeze_abstract_eval(x, *, dimensions):
    dims = _normalize_axes("squeeze", dimensions, x.ndim, x)
    for d in dims:
        if x.shape[d] != 1:
            raise FgradTypeError(f"squeeze: dimension {d} of {x.str_short()} has size "
                                 f"{x.shape[d]}, not 1")
    return ShapedArray(tuple(s for i, s in enumerate(x.shape) if i not in dims),
                       x.dtype, x.weak_type)


squeeze_p = Primitive("squeeze")
squeeze_p.impl = lambda x, *, dimensions: np.reshape(
    x, tuple(s for i, s in enumerate(np.shape(x)) if i not in dimensions))
squeeze_p.abstract_eval = _squeeze_abstract_eval
deflinear(squeeze_p, lambda ct, x, *, dimensions: [reshape(ct, x.aval.shape)])


def _squeeze_batch(vals, dims, *, dimensions):
    (x,), (d,) = vals, dims
    removed = batched_axes(dimensions, d)
    return squeeze(x, removed), d - sum(1 for a in removed if a < d)


squeeze_p.batch = _squeeze_batch


def squeeze(x, dimensions):
    dims = tuple(sorted(d % len(x.shape) if -len(x.shape) <= d < len(x.shape) else d
                        for d in dimensions))
    if not dims:
        return x
    return squeeze_p.bind(x, dimensions=dims)


def _expand_dims_shape(shape, dimensions):
    out = list(shape)
    for d in sorted(dimensions):
        out.insert(d, 1)
    return tuple(out)


def _expand_dims_abstract_eval(x, *, dimensions):
    nd = x.ndim + len(dimensions)
    _normalize_axes("expand_dims", dimensions, nd, x)
    return ShapedArray(_expand_dims_shape(x.shape, dimensions), x.dtype, x.weak_type)


expand_dims_p = Primitive("expand_dims")
expand_dims_p.impl = lambda x, *, dimensions: np.reshape(
    x, _expand_dims_shape(np.shape(x), dimensions))
expand_dims_p.abstract_eval = _expand_dims_abstract_eval
deflinear(expand_dims_p, lambda ct, x, *, dimensions: [reshape(ct, x.aval.shape)])


def _expand_dims_batch(vals, dims, *, dimensions):
    (x,), (d,) = vals, dims
    x = moveaxis(x, d, 0)
    return expand_dims(x, tuple(a + 1 for a in dimensions)), 0


expand_dims_p.batch = _expand_dims_batch


def expand_dims(x, dimensions):
    nd = len(x.shape) + len(dimensions)
    dims = tuple(sorted(d % nd if -nd <= d < nd else d for d in dimensions))
    return expand_dims_p.bind(x, dimensions=dims)


# Late import: reductions use reshape/broadcast from here.
from .reductions import reduce_sum  # noqa: E402
