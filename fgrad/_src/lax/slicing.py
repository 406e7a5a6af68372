"""Slicing primitives: slice, pad, concatenate, rev, dynamic_slice,
dynamic_update_slice and iota.

All but iota are linear in their array operands, and their transposes are one
another: slice <-> pad, concatenate -> slices, dynamic_slice <->
dynamic_update_slice. Dynamic start indices are scalar integer operands,
clamped so that the window stays inside the operand (as in JAX).
"""
import builtins

import numpy as np

from .. import dtypes
from ..ad import TAPE_JOINT, deflinear, defjvp_zero, instantiate_zeros, is_undefined
from ..batching import axis_size_of, batched_axes, moveaxis, unbatched_axis
from ..core import Array, Primitive, ShapedArray, full_lower, is_weak
from ..errors import FgradTypeError
from ._util import check_kinds, lift_scalars, same_dtypes, shapes_str


def _shape(x):
    """Shape of a transpose-rule argument, linear (UndefinedPrimal) or not."""
    return x.aval.shape if is_undefined(x) else tuple(x.shape)


def _scalar(value, dtype):
    return Array(np.asarray(value, dtype), False)


class _BadOperands(ValueError):
    """Raised by an impl on input NumPy would silently accept; eager evaluation
    then re-runs the primitive's shape rule, which raises the real error."""


# Batching helpers shared with gather_scatter.py (rules run at the parent level).

def batch_at(x, bdim, target, size):
    """x with its batch dim at `target`: moved there, or broadcast in if unbatched."""
    if bdim is None:
        shape = tuple(x.shape)
        from .shape_ops import broadcast_in_dim
        return broadcast_in_dim(x, shape[:target] + (size,) + shape[target:],
                                tuple(d for d in range(len(shape) + 1) if d != target))
    return moveaxis(x, bdim, target)


def index_dtype(*extents):
    """An integer dtype for index arrays reaching up to the given extents."""
    return dtypes.int32 if builtins.max(extents, default=0) < 2 ** 31 else dtypes.int64


def narrow_index(x, dtype, lo, hi):
    """Integer array x converted to the integer `dtype`, saturated into [lo, hi]
    (both representable in `dtype`) where the conversion could wrap: values the
    conversion keeps exactly are left alone, so callers treat anything below lo
    as lo and above hi as hi. Clamping happens before narrowing, so an int64
    index of 2**32 + 3 stays out of bounds instead of becoming 3."""
    from .elementwise import convert_element_type, max, min
    src = np.dtype(x.dtype)
    dtype = np.dtype(dtype)
    if src == dtype:
        return x
    if not np.can_cast(src, dtype, "safe"):
        info = np.iinfo(src)
        if lo > info.min:
            x = max(x, _scalar(lo, src))
        if hi < info.max:
            x = min(x, _scalar(hi, src))
    return convert_element_type(x, dtype)


def _insert(t, at, value):
    return tuple(t[:at]) + (value,) + tuple(t[at:])


# ----------------------------------------------------------------------------
# slice: a static strided window

def _slice_shape(start_indices, limit_indices, strides):
    return tuple(-(-(lim - s) // st) for s, lim, st in zip(start_indices, limit_indices, strides))


def _slice_abstract_eval(x, *, start_indices, limit_indices, strides):
    if not len(start_indices) == len(limit_indices) == len(strides) == x.ndim:
        raise FgradTypeError(
            f"slice: {x.str_short()} needs {x.ndim} start indices, limit indices and strides, "
            f"got start_indices={start_indices}, limit_indices={limit_indices}, "
            f"strides={strides}", hint="give one entry per dimension of the operand")
    for d, (s, lim, st, n) in enumerate(zip(start_indices, limit_indices, strides, x.shape)):
        if not 0 <= s <= lim <= n or st < 1:
            raise FgradTypeError(
                f"slice: cannot take [{s}:{lim}:{st}] from dimension {d} of {x.str_short()}",
                hint="each dimension needs 0 <= start <= limit <= size and stride >= 1")
    return ShapedArray(_slice_shape(start_indices, limit_indices, strides), x.dtype, x.weak_type)


def _slice_impl(x, *, start_indices, limit_indices, strides):
    if not len(start_indices) == len(limit_indices) == len(strides) == x.ndim or not all(
            0 <= s <= lim <= n and st >= 1
            for s, lim, st, n in zip(start_indices, limit_indices, strides, x.shape)):
        raise _BadOperands
    return x[tuple(builtins.slice(s, lim, st)
                   for s, lim, st in zip(start_indices, limit_indices, strides))]


def _slice_transpose(ct, x, *, start_indices, limit_indices, strides):
    # Put each kept element back where it came from; zeros elsewhere.
    config = []
    for s, st, size, n in zip(start_indices, strides, x.aval.shape, ct.shape):
        covered = (n - 1) * st + 1 if n else 0
        config.append((s, size - s - covered, st - 1))
    return [pad(ct, _scalar(0, ct.dtype), config)]


slice_p = Primitive("slice")
slice_p.impl = _slice_impl
slice_p.abstract_eval = _slice_abstract_eval
deflinear(slice_p, _slice_transpose)


def _slice_batch(vals, dims, *, start_indices, limit_indices, strides):
    # The whole batch dim is kept, in place.
    (x,), (d,) = vals, dims
    return slice_p.bind(x, start_indices=_insert(start_indices, d, 0),
                        limit_indices=_insert(limit_indices, d, x.shape[d]),
                        strides=_insert(strides, d, 1)), d


slice_p.batch = _slice_batch


def slice(operand, start_indices, limit_indices, strides=None):
    """operand[start:limit:stride] in every dimension (static bounds)."""
    start = tuple(int(i) for i in start_indices)
    limit = tuple(int(i) for i in limit_indices)
    strides = (1,) * len(start) if strides is None else tuple(int(s) for s in strides)
    return slice_p.bind(operand, start_indices=start, limit_indices=limit, strides=strides)


def slice_in_dim(operand, start, limit, stride=1, axis=0):
    """`slice` along one axis, keeping the others whole."""
    shape = tuple(operand.shape)
    starts, limits, strides = [0] * len(shape), list(shape), [1] * len(shape)
    starts[axis], limits[axis], strides[axis] = start, limit, stride
    return slice(operand, starts, limits, strides)


# ----------------------------------------------------------------------------
# pad: (low, high, interior) padding with a scalar value

def _padded_span(n, interior):
    """Length taken by n elements with `interior` padding between neighbours."""
    return n + builtins.max(n - 1, 0) * interior


def _pad_abstract_eval(x, padding_value, *, padding_config):
    if padding_value.shape != () or padding_value.dtype != x.dtype:
        raise FgradTypeError(
            f"pad: the padding value must be a scalar of the operand's dtype, got "
            f"{shapes_str([x, padding_value])}",
            hint="pass a Python scalar or a 0-d array of the operand's dtype")
    if len(padding_config) != x.ndim or any(
            len(c) != 3 or builtins.min(c) < 0 for c in padding_config):
        raise FgradTypeError(
            f"pad: padding_config={padding_config} does not fit {x.str_short()}",
            hint=f"give {x.ndim} triples (low, high, interior) of non-negative ints")
    shape = tuple(lo + hi + _padded_span(n, i) for (lo, hi, i), n in zip(padding_config, x.shape))
    return ShapedArray(shape, x.dtype, x.weak_type)


def _pad_interior_slices(shape, padding_config):
    """Where the operand's elements sit inside the padded array."""
    return tuple(builtins.slice(lo, lo + _padded_span(n, i), i + 1)
                 for (lo, _, i), n in zip(padding_config, shape))


def _pad_impl(x, padding_value, *, padding_config):
    if (padding_value.shape or padding_value.dtype != x.dtype or len(padding_config) != x.ndim
            or builtins.min((v for c in padding_config for v in c), default=0) < 0):
        raise _BadOperands
    shape = tuple(lo + hi + _padded_span(n, i) for (lo, hi, i), n in zip(padding_config, x.shape))
    out = np.full(shape, padding_value, dtype=x.dtype)
    out[_pad_interior_slices(x.shape, padding_config)] = x
    return out


def _pad_jvp(primals, tangents, *, padding_config):
    # Linear in (operand, padding_value) jointly.
    (x, value), (tx, tvalue) = primals, tangents
    out = pad_p.bind(x, value, padding_config=padding_config)
    if tx is None and tvalue is None:
        return out, None
    return out, pad_p.bind(instantiate_zeros(tx, x), instantiate_zeros(tvalue, value),
                           padding_config=padding_config)


def _pad_transpose(ct, x, padding_value, *, padding_config):
    from .reductions import reduce_sum
    from .elementwise import sub
    shape = _shape(x)
    starts = [lo for lo, _, _ in padding_config]
    limits = [lo + _padded_span(n, i) for (lo, _, i), n in zip(padding_config, shape)]
    ct_x = slice(ct, starts, limits, [i + 1 for _, _, i in padding_config])
    ct_value = None
    if is_undefined(padding_value):  # every position the operand did not fill
        ct_value = sub(reduce_sum(ct, None), reduce_sum(ct_x, None))
    return [ct_x if is_undefined(x) else None, ct_value]


pad_p = Primitive("pad", weak_args=(0,))
pad_p.impl = _pad_impl
pad_p.abstract_eval = _pad_abstract_eval
pad_p.jvp = _pad_jvp
pad_p.transpose = _pad_transpose
pad_p.tape = TAPE_JOINT


def _pad_batch(vals, dims, *, padding_config):
    # The batch dim stays in place, unpadded. A batched padding value (one scalar per
    # example) cannot be pad's operand: pad with zeros and select the padded positions.
    (x, value), (xd, vd) = vals, dims
    if vd is None:
        config = _insert(padding_config, xd, (0, 0, 0))
        return pad_p.bind(x, value, padding_config=config), xd
    from .elementwise import convert_element_type, select_n
    from .shape_ops import broadcast_in_dim
    size = axis_size_of(vals, dims)
    if xd is None:
        x, xd = batch_at(x, None, 0, size), 0
    config = _insert(padding_config, xd, (0, 0, 0))
    padded = pad_p.bind(x, _scalar(0, x.dtype), padding_config=config)
    shape = tuple(padded.shape)
    example_shape = shape[:xd] + shape[xd + 1:]
    filled = np.zeros(example_shape, bool)  # where the operand's elements land
    x_shape = tuple(x.shape)
    filled[_pad_interior_slices(x_shape[:xd] + x_shape[xd + 1:], padding_config)] = True
    mask = broadcast_in_dim(Array(filled, False), shape,
                            tuple(d for d in range(len(shape)) if d != xd))
    value = broadcast_in_dim(moveaxis(value, vd, 0), shape, (xd,))
    if is_weak(x) and not is_weak(value):  # pad's result is weak when its operand is
        value = convert_element_type(value, value.dtype, weak_type=True)
    return select_n(mask, value, padded), xd


pad_p.batch = _pad_batch


def pad(operand, padding_value, padding_config):
    """Pad with `padding_value`: (low, high, interior) per dimension, all >= 0."""
    operand, padding_value = lift_scalars((operand, padding_value))
    config = tuple(tuple(int(v) for v in c) for c in padding_config)
    return pad_p.bind(operand, padding_value, padding_config=config)


# ----------------------------------------------------------------------------
# concatenate

def _concatenate_abstract_eval(*xs, dimension):
    if not xs:
        raise FgradTypeError("concatenate: needs at least one operand",
                             hint="pass a non-empty sequence of arrays")
    same_dtypes("concatenate", xs)
    first = xs[0]
    if not 0 <= dimension < first.ndim:
        raise FgradTypeError(
            f"concatenate: dimension {dimension} is out of range for {shapes_str(xs)}",
            hint=f"dimension must lie in [0, {first.ndim})")
    for x in xs:
        if x.ndim != first.ndim or any(a != b for d, (a, b) in enumerate(zip(x.shape, first.shape))
                                       if d != dimension):
            raise FgradTypeError(
                f"concatenate: operands {shapes_str(xs)} differ outside dimension {dimension}",
                hint="all operands need the same rank and the same sizes in every other "
                     "dimension")
    shape = list(first.shape)
    shape[dimension] = sum(x.shape[dimension] for x in xs)
    return ShapedArray(shape, first.dtype, all(x.weak_type for x in xs))


def _concatenate_jvp(primals, tangents, *, dimension):
    out = concatenate_p.bind(*primals, dimension=dimension)
    if all(t is None for t in tangents):
        return out, None
    ts = [instantiate_zeros(t, x) for t, x in zip(tangents, primals)]
    return out, concatenate_p.bind(*ts, dimension=dimension)


def _concatenate_transpose(ct, *xs, dimension):
    out, offset = [], 0
    for x in xs:
        n = _shape(x)[dimension]
        out.append(slice_in_dim(ct, offset, offset + n, axis=dimension)
                   if is_undefined(x) else None)
        offset += n
    return out


def _concatenate_impl(*xs, dimension):
    if any(x.dtype != xs[0].dtype for x in xs):
        raise _BadOperands
    return np.concatenate(xs, axis=dimension)


concatenate_p = Primitive("concatenate")
concatenate_p.impl = _concatenate_impl
concatenate_p.abstract_eval = _concatenate_abstract_eval
concatenate_p.jvp = _concatenate_jvp
concatenate_p.transpose = _concatenate_transpose
concatenate_p.tape = TAPE_JOINT


def _concatenate_batch(vals, dims, *, dimension):
    # Every operand takes the first batched operand's batch dim (unbatched ones are
    # broadcast); operands already batched there do not move.
    size = axis_size_of(vals, dims)
    at = next(d for d in dims if d is not None)
    xs = [batch_at(x, d, at, size) for x, d in zip(vals, dims)]
    return concatenate_p.bind(*xs, dimension=unbatched_axis(dimension, at)), at


concatenate_p.batch = _concatenate_batch


def concatenate(operands, dimension):
    """Join arrays along an existing dimension."""
    return concatenate_p.bind(*operands, dimension=int(dimension))


# ----------------------------------------------------------------------------
# rev: reverse the order of elements along some dimensions

def _rev_abstract_eval(x, *, dimensions):
    if any(not 0 <= d < x.ndim for d in dimensions) or len(set(dimensions)) != len(dimensions):
        raise FgradTypeError(f"rev: dimensions {dimensions} are invalid for {x.str_short()}",
                             hint=f"give distinct dimensions in [0, {x.ndim})")
    return ShapedArray(x.shape, x.dtype, x.weak_type)


rev_p = Primitive("rev")
def _rev_impl(x, *, dimensions):
    """np.flip's view; for complex arrays a forward copy, as eager complex arrays are
    never reversed views: NumPy's scalar loop for negative strides multiplies
    complex numbers (and takes abs) without the fused multiply-adds of its
    vectorised loops, which compiled code follows."""
    out = np.flip(x, dimensions)
    return out.copy() if x.dtype.kind == "c" else out


rev_p.impl = _rev_impl
rev_p.abstract_eval = _rev_abstract_eval
deflinear(rev_p, lambda ct, x, *, dimensions: [rev(ct, dimensions)])


def _rev_batch(vals, dims, *, dimensions):
    (x,), (d,) = vals, dims
    return rev_p.bind(x, dimensions=batched_axes(dimensions, d)), d


rev_p.batch = _rev_batch


def rev(operand, dimensions):
    return rev_p.bind(operand, dimensions=tuple(int(d) for d in dimensions))


# ----------------------------------------------------------------------------
# dynamic_slice and dynamic_update_slice: windows at run-time positions

def _check_start_indices(name, x, starts):
    if len(starts) != x.ndim or any(s.shape != () or s.dtype.kind not in "iu" for s in starts):
        raise FgradTypeError(
            f"{name}: {x.str_short()} needs {x.ndim} scalar integer start indices, got "
            f"({shapes_str(starts)})", hint="pass one scalar integer per dimension")


def _clamped(starts, shape, sizes):
    """The window at `starts`, moved so that it fits (JAX's clamping)."""
    if not len(starts) == len(shape) == len(sizes) or not all(
            s.shape == () and s.dtype.kind in "iu" and 0 <= n <= d
            for s, d, n in zip(starts, shape, sizes)):
        raise _BadOperands
    return tuple(builtins.slice(s, s + n) for s, n in
                 ((int(np.clip(s, 0, d - n)), n) for s, d, n in zip(starts, shape, sizes)))


def _dynamic_slice_abstract_eval(x, *starts, slice_sizes):
    _check_start_indices("dynamic_slice", x, starts)
    if len(slice_sizes) != x.ndim or any(not 0 <= n <= d for n, d in zip(slice_sizes, x.shape)):
        raise FgradTypeError(
            f"dynamic_slice: slice_sizes={slice_sizes} do not fit {x.str_short()}",
            hint="give one size per dimension, each between 0 and that dimension's size")
    return ShapedArray(slice_sizes, x.dtype, x.weak_type)


def _dynamic_slice_transpose(ct, x, *starts, slice_sizes):
    zeros = Array(np.zeros(x.aval.shape, ct.dtype), False)
    return [dynamic_update_slice(zeros, ct, starts)] + [None] * len(starts)


dynamic_slice_p = Primitive("dynamic_slice", weak_args=(0,))
dynamic_slice_p.impl = lambda x, *starts, slice_sizes: x[_clamped(starts, x.shape, slice_sizes)]
dynamic_slice_p.abstract_eval = _dynamic_slice_abstract_eval
deflinear(dynamic_slice_p, _dynamic_slice_transpose)


def _window_indices(starts, start_dims, shape, window, size, at, batched_operand):
    """Index arrays reading/writing, for every example, the window of sizes `window`
    at its (clamped) starts in an operand of per-example `shape`.

    The arrays have the window's shape with the batch dim inserted at `at`; there is
    one per operand axis, plus (first in order, for axis `at`) the example number when
    the operand is batched. Clamping the starts keeps every index in bounds, so gather
    reads exactly the window and a scatter writes each position once.
    """
    from .elementwise import add, max, min
    from .shape_ops import broadcast_in_dim
    dtype = index_dtype(size, *shape)
    idx_shape = _insert(window, at, size)
    out = [iota(dtype, idx_shape, at)] if batched_operand else []
    for i, (s, sd) in enumerate(zip(starts, start_dims)):
        s = narrow_index(s, dtype, 0, shape[i] - window[i])
        s = min(max(s, 0), shape[i] - window[i])
        s = broadcast_in_dim(s, idx_shape, () if sd is None else (at,))
        out.append(add(s, iota(dtype, idx_shape, unbatched_axis(i, at))))
    if batched_operand:  # the example-number array indexes axis `at`
        out.insert(at, out.pop(0))
    return out


def _dynamic_slice_batch(vals, dims, *, slice_sizes):
    x, *starts = vals
    xd, *start_dims = dims
    if all(d is None for d in start_dims):
        # One window position for all examples: take the whole batch dim, in place.
        zero = _scalar(0, starts[0].dtype if starts else dtypes.int32)
        return dynamic_slice_p.bind(x, *_insert(starts, xd, zero),
                                    slice_sizes=_insert(slice_sizes, xd, x.shape[xd])), xd
    # Per-example positions: a gather of each example's clamped window.
    from .gather_scatter import gather_p
    size = axis_size_of(vals, dims)
    at = 0 if xd is None else xd
    shape = tuple(x.shape) if xd is None else tuple(x.shape[:xd] + x.shape[xd + 1:])
    indices = _window_indices(starts, start_dims, shape, slice_sizes, size, at, xd is not None)
    return gather_p.bind(x, *indices, axes=tuple(range(len(indices)))), at


dynamic_slice_p.batch = _dynamic_slice_batch


def dynamic_slice(operand, start_indices, slice_sizes):
    """operand[s0:s0+n0, ...] with start positions that may be traced values."""
    starts = [full_lower(s) for s in start_indices]
    return dynamic_slice_p.bind(operand, *starts,
                                slice_sizes=tuple(int(n) for n in slice_sizes))


def _dynamic_update_slice_abstract_eval(x, update, *starts):
    _check_start_indices("dynamic_update_slice", x, starts)
    same_dtypes("dynamic_update_slice", [x, update])
    if update.ndim != x.ndim or any(u > d for u, d in zip(update.shape, x.shape)):
        raise FgradTypeError(
            f"dynamic_update_slice: update {update.str_short()} does not fit in operand "
            f"{x.str_short()}", hint="the update needs the operand's rank and sizes no larger")
    return ShapedArray(x.shape, x.dtype, x.weak_type and update.weak_type)


def _dynamic_update_slice_impl(x, update, *starts):
    if update.dtype != x.dtype:
        raise _BadOperands
    out = np.array(x, copy=True)
    out[_clamped(starts, x.shape, update.shape)] = update
    return out


def _dynamic_update_slice_jvp(primals, tangents):
    # Linear in (operand, update) jointly.
    x, update, *starts = primals
    tx, tu = tangents[:2]
    out = dynamic_update_slice_p.bind(x, update, *starts)
    if tx is None and tu is None:
        return out, None
    return out, dynamic_update_slice_p.bind(instantiate_zeros(tx, x),
                                            instantiate_zeros(tu, update), *starts)


def _dynamic_update_slice_transpose(ct, x, update, *starts):
    size = _shape(update)
    ct_x = ct_update = None
    if is_undefined(x):
        ct_x = dynamic_update_slice(ct, Array(np.zeros(size, ct.dtype), False), starts)
    if is_undefined(update):
        ct_update = dynamic_slice(ct, starts, size)
    return [ct_x, ct_update] + [None] * len(starts)


dynamic_update_slice_p = Primitive("dynamic_update_slice", weak_args=(0, 1))
dynamic_update_slice_p.impl = _dynamic_update_slice_impl
dynamic_update_slice_p.abstract_eval = _dynamic_update_slice_abstract_eval
dynamic_update_slice_p.jvp = _dynamic_update_slice_jvp
dynamic_update_slice_p.transpose = _dynamic_update_slice_transpose


def _dynamic_update_slice_batch(vals, dims):
    x, update, *starts = vals
    xd, ud, *start_dims = dims
    size = axis_size_of(vals, dims)
    at = xd if xd is not None else ud if ud is not None else 0
    x, update = batch_at(x, xd, at, size), batch_at(update, ud, at, size)
    if all(d is None for d in start_dims):
        # One window position for all examples: update the whole batch dim, in place.
        zero = _scalar(0, starts[0].dtype if starts else dtypes.int32)
        return dynamic_update_slice_p.bind(x, update, *_insert(starts, at, zero)), at
    # Per-example positions: a scatter of each example's update to its clamped window.
    from .gather_scatter import scatter_p
    shape = tuple(x.shape[:at] + x.shape[at + 1:])
    window = tuple(update.shape[:at] + update.shape[at + 1:])
    indices = _window_indices(starts, start_dims, shape, window, size, at, True)
    return scatter_p.bind(x, update, *indices, axes=tuple(range(len(indices)))), at


dynamic_update_slice_p.batch = _dynamic_update_slice_batch


def dynamic_update_slice(operand, update, start_indices):
    """operand with the window at start_indices (clamped) replaced by update."""
    starts = [full_lower(s) for s in start_indices]
    return dynamic_update_slice_p.bind(operand, update, *starts)


# ----------------------------------------------------------------------------
# iota: 0, 1, 2, ... along one dimension of a new array

def _iota_abstract_eval(*, dtype, shape, dimension):
    aval = ShapedArray(shape, dtype)
    if not 0 <= dimension < len(shape):
        raise FgradTypeError(f"iota: dimension {dimension} is out of range for {aval.str_short()}",
                             hint=f"dimension must lie in [0, {len(shape)})")
    check_kinds("iota", [aval], "fiu")
    return aval


def _iota_impl(*, dtype, shape, dimension):
    if dtype.kind not in "fiu":
        raise _BadOperands
    expanded = [1] * len(shape)
    expanded[dimension] = shape[dimension]
    return np.broadcast_to(np.arange(shape[dimension], dtype=dtype).reshape(expanded), shape)


iota_p = Primitive("iota")
iota_p.impl = _iota_impl
iota_p.abstract_eval = _iota_abstract_eval
defjvp_zero(iota_p)


def _iota_batch(vals, dims, **params):
    # iota has no operands, so vmap never calls this (an unbatched bind goes straight
    # to the parent trace); it is here so every primitive has a rule. Never batched.
    return iota_p.bind(**params), None


iota_p.batch = _iota_batch


def iota(dtype, shape, dimension=0):
    """An array of `shape` counting 0, 1, ... along `dimension`."""
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    return iota_p.bind(dtype=dtypes.canonicalize(dtype), shape=tuple(int(s) for s in shape),
                       dimension=int(dimension))
