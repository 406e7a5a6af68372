"""Gather and scatter with NumPy-style integer-array indexing.

A deliberately simple design rather than XLA's general dimension numbers:
`indices` is a tuple of k integer arrays of one shape B that index the operand
axes `axes`, so `gather(x, indices, axes)` is
`np.moveaxis(x, axes, range(k))[tuple(indices)]`, of shape B + the remaining
dims. Scatters take updates of that same shape and combine them into a copy
of the operand. Out-of-bounds indices are clamped by gather and dropped by
the scatters (JAX's defaults); negative indices count as out of bounds here
(fgrad.numpy normalizes them first).
"""
import math

import numpy as np

from ..ad import deflinear, instantiate_zeros, is_undefined
from ..batching import axis_size_of, batched_axes
from ..core import Array, Primitive, ShapedArray
from ..errors import FgradTypeError
from ._util import check_kinds, shapes_str
from .elementwise import (add, bitwise_and, convert_element_type, div, eq, ge, lt, max, min,
                          mul, select_n, signed_zero, zeros_with_sign)
from .shape_ops import broadcast_in_dim
from .slicing import batch_at, index_dtype, iota


def _index_shape(name, operand, indices, axes):
    """Check the index arrays against the operand; returns their common shape B."""
    if not indices or len(indices) != len(axes):
        raise FgradTypeError(
            f"{name}: got {len(indices)} index arrays for axes {axes} of {operand.str_short()}",
            hint="give one index array per indexed axis, and at least one")
    if len(set(axes)) != len(axes) or any(not 0 <= a < operand.ndim for a in axes):
        raise FgradTypeError(f"{name}: axes {axes} are invalid for {operand.str_short()}",
                             hint=f"give distinct axes in [0, {operand.ndim})")
    shape = indices[0].shape
    if any(i.dtype.kind not in "iu" or i.shape != shape for i in indices):
        raise FgradTypeError(
            f"{name}: index arrays must be integers of one shape, got ({shapes_str(indices)}) "
            f"for {operand.str_short()}", hint="broadcast the index arrays to one shape first")
    return shape


def _check_impl_operands(operand, indices, axes, updates=None):
    """What NumPy would not reject itself; a failure makes eager evaluation re-run
    the shape rule, which raises the real error."""
    if not 0 < len(indices) == len(axes) or any(
            i.dtype.kind not in "iu" or i.shape != indices[0].shape for i in indices):
        raise ValueError("bad index arrays")
    if updates is not None and (
            updates.dtype != operand.dtype
            or updates.shape != indices[0].shape + _rest_shape(operand.shape, axes)):
        raise ValueError("bad updates")


def _rest_shape(shape, axes):
    return tuple(n for d, n in enumerate(shape) if d not in axes)


def _moved_front(x, axes):
    """A view of x with the indexed axes first, in the order of `axes`."""
    return np.moveaxis(x, axes, range(len(axes)))


# ----------------------------------------------------------------------------
# Index helpers used by the rules (fgrad ops, so the rules stay traceable)

def _clamp(indices, shape, axes):
    """The indices as gather reads them: clamped into range."""
    return tuple(min(max(i, 0), shape[a] - 1) for i, a in zip(indices, axes))


def _in_bounds(indices, shape, axes):
    """Which updates (of index shape B) a scatter into `shape` applies."""
    mask = None
    for i, a in zip(indices, axes):
        ok = bitwise_and(ge(i, 0), lt(i, shape[a]))
        mask = ok if mask is None else bitwise_and(mask, ok)
    return mask


def _winners(indices, shape, axes):
    """Which updates survive a `scatter` (in bounds, and last among duplicates)."""
    batch = tuple(indices[0].shape)
    count = math.prod(map(int, batch))
    ids = np.arange(1, count + 1, dtype=np.int32 if count < 2 ** 31 - 1 else np.int64)
    ids = Array(ids.reshape(batch), False)
    front = tuple(range(len(axes)))
    written = scatter(_zeros(tuple(shape[a] for a in axes), ids.dtype), indices, ids, front)
    return eq(gather(written, indices, front), ids)


def _zeros(shape, dtype):
    return Array(np.zeros(shape, dtype), False)


def _keep(mask, x):
    """x where mask holds, zero elsewhere; the mask is broadcast over x's trailing dims."""
    mask = broadcast_in_dim(mask, tuple(x.shape), range(len(mask.shape)))
    return select_n(mask, _zeros((), x.dtype), x)


# ----------------------------------------------------------------------------
# gather

def _gather_abstract_eval(operand, *indices, axes):
    batch = _index_shape("gather", operand, indices, axes)
    return ShapedArray(batch + _rest_shape(operand.shape, axes), operand.dtype, operand.weak_type)


def _gather_impl(operand, *indices, axes):
    _check_impl_operands(operand, indices, axes)
    moved = _moved_front(operand, axes)
    return moved[tuple(np.clip(i, 0, n - 1) for i, n in zip(indices, moved.shape))]


def _gather_transpose(ct, operand, *indices, axes):
    shape = operand.aval.shape
    ct_operand = scatter_add(_zeros(shape, ct.dtype), _clamp(indices, shape, axes), ct, axes)
    return [ct_operand] + [None] * len(indices)


gather_p = Primitive("gather", weak_args=(0,))
gather_p.impl = _gather_impl
gather_p.abstract_eval = _gather_abstract_eval
deflinear(gather_p, _gather_transpose)


def _rest_position(bdim, batched_index_axes, index_rank):
    """Where an operand's batch dim `bdim` (not an indexed axis) lands in the output
    of a gather (or in a scatter's updates): after the index dims, among the rest."""
    return index_rank + bdim - sum(1 for a in batched_index_axes if a < bdim)


def _batched_indices(indices, index_dims, size):
    """The index arrays, all batched at the first batched one's batch dim (unbatched
    ones are broadcast); returns (indices, that dim)."""
    at = next(d for d in index_dims if d is not None)
    return [batch_at(i, d, at, size) for i, d in zip(indices, index_dims)], at


def _gather_batch(vals, dims, *, axes):
    operand, *indices = vals
    od, *index_dims = dims
    if all(d is None for d in index_dims):
        # The batch dim is one of the operand's non-indexed dims: it stays there.
        new_axes = batched_axes(axes, od)
        out_dim = _rest_position(od, new_axes, len(indices[0].shape))
        return gather_p.bind(operand, *indices, axes=new_axes), out_dim
    size = axis_size_of(vals, dims)
    indices, at = _batched_indices(indices, index_dims, size)
    if od is None:  # the batch dim is an index dim
        return gather_p.bind(operand, *indices, axes=axes), at
    # Both batched: example b reads operand[b] through its own indices, so the
    # operand's batch dim is indexed too, by the example number.
    shape = tuple(indices[0].shape)
    example = iota(index_dtype(size), shape, at)
    return gather_p.bind(operand, example, *indices, axes=(od,) + batched_axes(axes, od)), at


gather_p.batch = _gather_batch


def _normalize_axes(axes, ndim):
    return tuple(int(a) % ndim if -ndim <= int(a) < ndim else int(a) for a in axes)


def gather(operand, indices, axes):
    """np.moveaxis(operand, axes, range(k))[indices], indices clamped into range."""
    indices = tuple(indices)
    return gather_p.bind(operand, *indices, axes=_normalize_axes(axes, len(operand.shape)))


# ----------------------------------------------------------------------------
# The scatter family: bound as (operand, updates, *indices)

def _scatter_rule(name, kinds):
    def rule(operand, updates, *indices, axes):
        batch = _index_shape(name, operand, indices, axes)
        expected = batch + _rest_shape(operand.shape, axes)
        if updates.shape != expected or updates.dtype != operand.dtype:
            want = ShapedArray(expected, operand.dtype).str_short()
            raise FgradTypeError(
                f"{name}: updates {updates.str_short()} do not fit operand "
                f"{operand.str_short()} indexed by ({shapes_str(indices)}) on axes {axes}",
                hint=f"updates must be {want}: the index shape, then the operand's "
                     f"non-indexed dims")
        check_kinds(name, [operand], kinds)
        return ShapedArray(operand.shape, operand.dtype, operand.weak_type and updates.weak_type)
    return rule


def _set_last_wins(target, idx, updates):
    """target[idx] = updates (1-d idx) where, among duplicate indices, the last one wins."""
    flat = np.ravel_multi_index(idx, target.shape[:len(idx)])
    _, last_from_end = np.unique(flat[::-1], return_index=True)
    keep = flat.size - 1 - last_from_end
    target[tuple(i[keep] for i in idx)] = updates[keep]


def _scatter_impl(combine):
    def impl(operand, updates, *indices, axes):
        _check_impl_operands(operand, indices, axes, updates)
        out = np.array(operand, copy=True)
        moved = _moved_front(out, axes)  # a view: writes land in `out`
        valid = np.ones(indices[0].shape, bool)
        for i, n in zip(indices, moved.shape):
            valid &= (i >= 0) & (i < n)
        combine(moved, tuple(np.asarray(i)[valid] for i in indices), np.asarray(updates)[valid])
        return out
    return impl


def _scatter_batch(p):
    """Batching rule of a scatter. The output is batched where the operand is (the
    operand is broadcast at dim 0 if it is not batched).

    Unbatched indices: every example writes the same positions, so the operand's batch
    dim is just one of its non-indexed dims and the updates gain it where it lands.
    Batched indices: the operand's batch dim is indexed by the example number, so the
    examples write disjoint positions; within one example the updates keep their order
    (what matters for `scatter` on duplicate indices) and out-of-bounds ones still drop.
    """
    def rule(vals, dims, *, axes):
        operand, updates, *indices = vals
        od, ud, *index_dims = dims
        size = axis_size_of(vals, dims)
        if od is None:
            operand, od = batch_at(operand, None, 0, size), 0
        if all(d is None for d in index_dims):
            new_axes = batched_axes(axes, od)
            updates = batch_at(updates, ud, _rest_position(od, new_axes, len(indices[0].shape)),
                               size)
            return p.bind(operand, updates, *indices, axes=new_axes), od
        indices, at = _batched_indices(indices, index_dims, size)
        example = iota(index_dtype(size), tuple(indices[0].shape), at)
        updates = batch_at(updates, ud, at, size)
        return p.bind(operand, updates, example, *indices,
                      axes=(od,) + batched_axes(axes, od)), od
    return rule


def _scatter_primitive(name, combine, kinds):
    p = Primitive(name, weak_args=(0, 1))
    p.impl = _scatter_impl(combine)
    p.abstract_eval = _scatter_rule(name, kinds)
    p.batch = _scatter_batch(p)
    return p


def _public(p):
    def op(operand, indices, updates, axes):
        indices = tuple(indices)
        return p.bind(operand, updates, *indices, axes=_normalize_axes(axes, len(operand.shape)))
    op.__name__ = p.name
    op.__doc__ = f"{p.name}: combine updates into a copy of operand at the indexed positions."
    return op


# scatter_add: linear in (operand, updates) jointly

scatter_add_p = _scatter_primitive("scatter_add", np.add.at, "fiu")
scatter_add = _public(scatter_add_p)


def _scatter_add_jvp(primals, tangents, *, axes):
    operand, updates, *indices = primals
    t_operand, t_updates = tangents[:2]
    out = scatter_add_p.bind(operand, updates, *indices, axes=axes)
    if t_updates is None:
        return out, t_operand
    return out, scatter_add_p.bind(instantiate_zeros(t_operand, operand), t_updates, *indices,
                                   axes=axes)


def _scatter_add_transpose(ct, operand, updates, *indices, axes):
    ct_updates = None
    if is_undefined(updates):
        got = gather(ct, indices, axes)
        ct_updates = _keep(_in_bounds(indices, ct.shape, axes), got)
    return [ct if is_undefined(operand) else None, ct_updates] + [None] * len(indices)


scatter_add_p.jvp = _scatter_add_jvp
scatter_add_p.transpose = _scatter_add_transpose


# scatter (set): linear in (operand, updates) jointly. Duplicate indices: the
# last update wins, in the value and in the derivatives alike.

scatter_p = _scatter_primitive("scatter", _set_last_wins, "fiub")
scatter = _public(scatter_p)


def _scatter_jvp(primals, tangents, *, axes):
    operand, updates, *indices = primals
    t_operand, t_updates = tangents[:2]
    out = scatter_p.bind(operand, updates, *indices, axes=axes)
    if t_operand is None and t_updates is None:
        return out, None
    return out, scatter_p.bind(instantiate_zeros(t_operand, operand),
                               instantiate_zeros(t_updates, updates), *indices, axes=axes)


def _scatter_transpose(ct, operand, updates, *indices, axes):
    shape = tuple(ct.shape)
    ct_operand = ct_updates = None
    if is_undefined(operand):  # overwritten positions got nothing from the operand
        update_shape = updates.aval.shape if is_undefined(updates) else tuple(updates.shape)
        ct_operand = scatter(ct, indices, _zeros(update_shape, ct.dtype), axes)
    if is_undefined(updates):
        ct_updates = _keep(_winners(indices, shape, axes), gather(ct, indices, axes))
    return [ct_operand, ct_updates] + [None] * len(indices)


scatter_p.jvp = _scatter_jvp
scatter_p.transpose = _scatter_transpose


# scatter_mul: linear in the operand for fixed updates

scatter_mul_p = _scatter_primitive("scatter_mul", np.multiply.at, "fiu")
scatter_mul = _public(scatter_mul_p)


def _scatter_mul_jvp(primals, tangents, *, axes):
    """d(op * prod u) = (d op) * prod u + out * sum(du / u); assumes nonzero updates."""
    operand, updates, *indices = primals
    t_operand, t_updates = tangents[:2]
    out = scatter_mul_p.bind(operand, updates, *indices, axes=axes)
    tangent = None
    if t_operand is not None:
        tangent = scatter_mul_p.bind(t_operand, updates, *indices, axes=axes)
    if t_updates is not None:
        rel = scatter_add(_zeros(tuple(operand.shape), operand.dtype), indices,
                          div(t_updates, updates), axes)
        term = mul(out, rel)
        tangent = term if tangent is None else add(tangent, term)
    return out, tangent


def _scatter_mul_transpose(ct, operand, updates, *indices, axes):
    if is_undefined(updates):
        raise TypeError("scatter_mul is not linear in its updates and cannot be transposed")
    return [scatter_mul(ct, indices, updates, axes), None] + [None] * len(indices)


scatter_mul_p.jvp = _scatter_mul_jvp
scatter_mul_p.transpose = _scatter_mul_transpose


# scatter_min / scatter_max: the tangent comes from whichever of the operand
# and the updates attain the result, averaged over ties.

def _scatter_extremum_jvp(p):
    def jvp(primals, tangents, *, axes):
        operand, updates, *indices = primals
        t_operand, t_updates = tangents[:2]
        out = p.bind(operand, updates, *indices, axes=axes)
        if t_operand is None and t_updates is None:
            return out, None
        dtype = out.dtype
        zeros = _zeros(tuple(out.shape), dtype)
        from_operand = convert_element_type(eq(operand, out), dtype)
        from_updates = convert_element_type(eq(updates, gather(out, indices, axes)), dtype)
        count = add(from_operand, scatter_add(zeros, indices, from_updates, axes))
        total = None
        if t_operand is not None:
            total = mul(from_operand, t_operand)
        if t_updates is not None:
            term = scatter_add(zeros, indices, mul(from_updates, t_updates), axes)
            total = term if total is None else add(total, term)
        return out, div(total, count)
    return jvp


def _extremum_at(pick_max):
    """np.maximum.at / np.minimum.at with IEEE 754-2019's -0 < +0, as compiled code
    computes them (NumPy keeps whichever zero its loop prefers)."""
    ufunc = np.maximum if pick_max else np.minimum

    def combine(target, indices, updates):
        if target.dtype.kind != "f":
            ufunc.at(target, indices, updates)
            return
        seen = zeros_with_sign(target, pick_max)
        np.logical_or.at(seen, indices, zeros_with_sign(updates, pick_max))
        ufunc.at(target, indices, updates)
        zeros = target == 0
        target[zeros] = signed_zero(target.dtype, pick_max, seen[zeros])
    return combine


scatter_min_p = _scatter_primitive("scatter_min", _extremum_at(False), "fiu")
scatter_min_p.jvp = _scatter_extremum_jvp(scatter_min_p)
scatter_min = _public(scatter_min_p)

scatter_max_p = _scatter_primitive("scatter_max", _extremum_at(True), "fiu")
scatter_max_p.jvp = _scatter_extremum_jvp(scatter_max_p)
scatter_max = _public(scatter_max_p)
