"""NumPy indexing (`x[idx]`) and functional updates (`x.at[idx].set(v)`).

`getitem` turns an index into at most: one expand_dims (None), one rev and one
slice (slices and integers), then, for advanced indices (integer arrays, lists,
booleans, and integers mixed with them), one gather whose index arrays are
broadcast together; the gathered dimensions go where NumPy puts them (at the
first advanced index when those are adjacent, else in front).

`x.at[idx].op(v)` indexes a constant array of flat positions with the same
code, then scatters the updates into the flattened x at those positions, so
updates follow getitem's semantics, and a traced index works too; except that a
traced out-of-bounds index drops its updates (as the scatters do) where getitem
clamps it. Traced indices of any integer dtype are saturated before they are
narrowed to the index dtype, so 2**32 + 3 stays out of bounds.
"""
import math

import numpy as np

from .. import dtypes, lax
from ..lax._util import broadcast_shape
from ..core import Array, ConcretizationError, Tracer, check_size
from ..errors import FgradTypeError
from ..lax.slicing import narrow_index
from .util import asarray, is_weak

_ARRAYS = (Array, Tracer)
_INDEX_HELP = ("only integers, slices (`:`), ellipsis (`...`), None (newaxis) and integer "
               "or boolean arrays are valid indices")


def _value(x):
    if type(x) is Array or isinstance(x, Tracer):
        return x
    return asarray(x)


def _index_dtype(n):
    return dtypes.int32 if n < 2 ** 31 - 1 else dtypes.int64


# ----------------------------------------------------------------------------
# Classifying the index

def _static_slice_part(v, what):
    if v is None or isinstance(v, (int, np.integer)):
        return None if v is None else int(v)
    if isinstance(v, Tracer):
        raise FgradTypeError(
            f"slice {what} must be static, got a traced value ({v.aval.str_short()})",
            hint="slice bounds fix the result's shape, so they must be Python ints; for a "
                 "window at a traced position use fgrad.lax.dynamic_slice")
    if isinstance(v, (Array, np.ndarray)) and np.ndim(v) == 0 and np.asarray(v).dtype.kind in "iu":
        return int(np.asarray(v))
    if hasattr(v, "__index__"):
        return v.__index__()
    raise IndexError(f"slice indices must be integers or None, got {v!r}")


def _classify(item):
    """('newaxis'|'ellipsis'|'slice'|'int'|'bool'|'mask'|'array', payload)."""
    if item is None:
        return ("newaxis", None)
    if item is Ellipsis:
        return ("ellipsis", None)
    if isinstance(item, slice):
        return ("slice", slice(_static_slice_part(item.start, "start"),
                               _static_slice_part(item.stop, "stop"),
                               _static_slice_part(item.step, "step")))
    if isinstance(item, (bool, np.bool_)):
        return ("bool", bool(item))
    if isinstance(item, (int, np.integer)):
        return ("int", int(item))
    if isinstance(item, (list, tuple)):
        if any(isinstance(e, _ARRAYS) or isinstance(e, (list, tuple)) for e in item) and \
                _contains_tracer(item):
            item = asarray(item)
        else:
            arr = np.asarray(item)
            if arr.size == 0:
                arr = arr.astype(np.int32)
            item = arr
    if isinstance(item, np.ndarray):
        if item.dtype == np.bool_:
            return ("bool", bool(item)) if item.ndim == 0 else ("mask", item)
        if item.dtype.kind in "iu":
            return ("int", int(item)) if item.ndim == 0 else ("array", item)
        raise IndexError(f"{_INDEX_HELP}; got an array of dtype {item.dtype}")
    if isinstance(item, Tracer):
        kind = item.dtype.kind
        if kind == "b":
            raise ConcretizationError(
                f"a boolean mask index must be concrete, but this one is a traced value "
                f"({item.aval.str_short()}): the result's shape would depend on its values."
                f"\n  hint: use fgrad.numpy.where(mask, x, other) to select element-wise, or "
                f"fgrad.numpy.nonzero(mask, size=N) for a fixed number of indices.")
        if kind in "iu":
            return ("array", item)
        raise IndexError(f"{_INDEX_HELP}; got a traced value of dtype {item.dtype}")
    if isinstance(item, Array):
        return _classify(np.asarray(item._value))
    if isinstance(item, float):
        raise IndexError(f"{_INDEX_HELP}; got the float {item!r}")
    if hasattr(item, "__index__"):
        return ("int", item.__index__())
    raise IndexError(f"{_INDEX_HELP}; got {type(item).__name__} {item!r}")


def _contains_tracer(item):
    if isinstance(item, Tracer):
        return True
    if isinstance(item, (list, tuple)):
        return any(_contains_tracer(e) for e in item)
    return False


def _out_of_bounds(i, axis, n):
    return IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")


def _expand(x, idx):
    """Expand Ellipsis/None/booleans: returns (x with new axes, one entry per dim)."""
    items = list(idx) if isinstance(idx, tuple) else [idx]
    entries = [_classify(it) for it in items]
    nd = x.ndim
    consumed = sum(1 if k in ("int", "slice", "array") else
                   (p.ndim if k == "mask" else 0) for k, p in entries)
    n_ell = sum(1 for k, _ in entries if k == "ellipsis")
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if consumed > nd:
        raise IndexError(f"too many indices for array: array is {nd}-dimensional, but "
                         f"{consumed} were indexed")
    full = ("slice", slice(None))
    if n_ell:
        i = next(i for i, (k, _) in enumerate(entries) if k == "ellipsis")
        entries[i:i + 1] = [full] * (nd - consumed)
    else:
        entries += [full] * (nd - consumed)
    # New axes (None and scalar booleans) and boolean masks.
    out, new_axes, d = [], [], 0
    for k, p in entries:
        if k == "newaxis":
            new_axes.append(d)
            out.append(full)
            d += 1
        elif k == "bool":
            new_axes.append(d)
            out.append(("array", np.zeros(1 if p else 0, np.int32)))
            d += 1
        elif k == "mask":
            out.append(("mask", p))
            d += p.ndim
        else:
            out.append((k, p))
            d += 1
    if new_axes:
        x = lax.expand_dims(x, tuple(new_axes))
    final, d = [], 0
    for k, p in out:
        if k == "mask":
            shape = tuple(x.shape[d:d + p.ndim])
            if shape != p.shape:
                for j, (n, m) in enumerate(zip(shape, p.shape)):
                    if n != m:
                        break
                raise IndexError(f"boolean index did not match indexed array along axis "
                                 f"{d + j}; size of axis is {shape[j]} but size of "
                                 f"corresponding boolean axis is {p.shape[j]}")
            final += [("array", nz.astype(np.int32)) for nz in np.nonzero(p)]
            d += p.ndim
        else:
            final.append((k, p))
            d += 1
    return x, final


# ----------------------------------------------------------------------------
# Basic indexing: rev + slice (+ reshape for integers)

def _slice_params(s, n):
    """(start, limit, stride, reversed) of a Python slice on a dimension of size n."""
    start, stop, step = s.indices(n)
    m = len(range(start, stop, step))
    if m == 0:
        return 0, 0, 1, False
    if step > 0:
        return start, start + (m - 1) * step + 1, step, False
    start = n - 1 - start
    return start, start + (m - 1) * (-step) + 1, -step, True


def _apply_basic(x, entries):
    """Apply slices and static ints; returns (x, kept entries for advanced dims)."""
    starts, limits, strides, revs, squeeze = [], [], [], [], []
    for d, (k, p) in enumerate(entries):
        n = x.shape[d]
        if k == "slice":
            a, b, st, r = _slice_params(p, n)
        elif k == "int":
            if not -n <= p < n:
                raise _out_of_bounds(p, d, n)
            a, b, st, r = p % n, p % n + 1, 1, False
            squeeze.append(d)
        else:
            a, b, st, r = 0, n, 1, False
        starts.append(a)
        limits.append(b)
        strides.append(st)
        if r:
            revs.append(d)
    if revs:
        x = lax.rev(x, tuple(revs))
    if any(a != 0 or b != n or st != 1 for a, b, st, n in zip(starts, limits, strides, x.shape)):
        x = lax.slice(x, starts, limits, strides)
    if squeeze:
        x = lax.reshape(x, tuple(s for d, s in enumerate(x.shape) if d not in squeeze))
    return x


def _normalize_array_index(idx, axis, n):
    """An integer index array with negatives wrapped; concrete ones bounds-checked."""
    itype = _index_dtype(n)
    if isinstance(idx, np.ndarray):
        if idx.size and (idx.min() < -n or idx.max() >= n):
            bad = idx[(idx < -n) | (idx >= n)].ravel()[0]
            raise _out_of_bounds(int(bad), axis, n)
        idx = idx.astype(itype)                   # in bounds: exact
        return Array(np.where(idx < 0, idx + itype.type(n), idx), False)
    idx = narrow_index(idx, itype, -n - 1, n)     # out of bounds stays out of bounds
    return lax.select_n(lax.lt(idx, Array(np.asarray(0, itype), True)), idx,
                        lax.add(idx, Array(np.asarray(n, itype), True)))


def _is_basic(idx):
    """Whether idx holds only ints, slices and Ellipsis (no new axes, no arrays)."""
    items = idx if isinstance(idx, tuple) else (idx,)
    for it in items:
        t = type(it)
        if t is slice or it is Ellipsis:
            continue
        if t is bool or not isinstance(it, (int, np.integer)) or isinstance(it, np.bool_):
            return False
    return True


def getitem(x, idx):
    """x[idx] with NumPy's semantics (see the module docstring)."""
    x = _value(x)
    if type(idx) is int and x.ndim:   # fast path: x[i]
        n = x.shape[0]
        if not -n <= idx < n:
            raise _out_of_bounds(idx, 0, n)
        i = idx % n
        shape = tuple(x.shape)
        out = lax.slice(x, (i,) + (0,) * (len(shape) - 1), (i + 1,) + shape[1:])
        return lax.reshape(out, shape[1:])
    x, entries = _expand(x, idx)
    if not any(k == "array" for k, _ in entries):
        return _apply_basic(x, entries)
    basic, arrays, adv, perm = _advanced(x, entries)
    x = _apply_basic(x, basic)
    out = lax.gather(x, arrays, adv)       # index shape + remaining dims
    return lax.transpose(out, perm) if perm else out


def _advanced(x, entries):
    """For an index with arrays: (the basic part, with full slices at the advanced
    axes; the index arrays, normalized and broadcast together; their axes; the
    permutation that takes gather's layout, index dims first, to NumPy's, or None)."""
    # Integers mixed with arrays are advanced indices too.
    entries = [("array", np.asarray(p)) if k == "int" else (k, p) for k, p in entries]
    adv = tuple(d for d, (k, _) in enumerate(entries) if k == "array")
    shapes = [tuple(np.shape(p)) if isinstance(p, np.ndarray) else tuple(p.shape)
              for k, p in entries if k == "array"]
    try:
        bshape = tuple(broadcast_shape(*shapes))
    except ValueError:
        raise IndexError(f"shape mismatch: indexing arrays could not be broadcast together "
                         f"with shapes {' '.join(map(str, shapes))}") from None
    basic = [(k, p) if k != "array" else ("slice", slice(None)) for k, p in entries]
    arrays = []
    for d in adv:
        i = _normalize_array_index(entries[d][1], d, x.shape[d])
        if tuple(i.shape) != bshape:
            i = lax.broadcast_to(i, bshape)
        arrays.append(i)
    itype = np.result_type(*[a.dtype for a in arrays])
    arrays = tuple(a if a.dtype == itype else lax.convert_element_type(a, itype)
                   for a in arrays)
    perm = None
    if adv == tuple(range(adv[0], adv[0] + len(adv))) and adv[0] > 0:
        # Adjacent advanced indices: their dims go where the first one was.
        k, p = len(bshape), adv[0]
        nd = k + x.ndim - len(adv)
        perm = tuple(range(k, k + p)) + tuple(range(k)) + tuple(range(k + p, nd))
    return basic, arrays, adv, perm


# ----------------------------------------------------------------------------
# Functional updates: x.at[idx].set(v) and friends

class IndexUpdateHelper:
    """`x.at`: index it to get an updater, e.g. `x.at[0, 1:].add(1.0)`."""
    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __getitem__(self, index):
        return IndexUpdateRef(self.array, index)

    def __repr__(self):
        return f"IndexUpdateHelper({self.array!r})"


class IndexUpdateRef:
    """What `x.at[idx]` returns: each method gives an updated copy of x."""
    __slots__ = ("array", "index")

    def __init__(self, array, index):
        self.array = array
        self.index = index

    def __repr__(self):
        return f"IndexUpdateRef({self.array!r}, {self.index!r})"

    def get(self, *, indices_are_sorted=False, unique_indices=False, mode=None,
            fill_value=None):
        """x[idx]. mode 'fill' reads fill_value at out-of-bounds indices (default NaN,
        the integer minimum, the unsigned maximum, True), 'clip' clamps them."""
        _check_mode("get", mode, ("clip", "fill"))
        if mode in (None, "promise_in_bounds"):
            return getitem(self.array, self.index)
        x = _value(self.array)
        flat = lax.reshape(x, (x.size,))
        if mode == "fill":
            fill = _cast_updates(x, default_fill(x.dtype) if fill_value is None else fill_value)
            if fill.ndim:
                raise FgradTypeError(f"at[...].get: fill_value must be a scalar, got shape "
                                     f"{tuple(fill.shape)}")
            flat = lax.concatenate([flat, lax.reshape(fill, (1,))], 0)
        return getitem(flat, _flat_targets(x, self.index, mode))

    def set(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        """x with x[idx] = values (for duplicate indices, the last value wins)."""
        return _update("set", lax.scatter, self.array, self.index, values, mode)

    def add(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        """x with values added at idx (duplicate indices accumulate)."""
        return _update("add", lax.scatter_add, self.array, self.index, values, mode)

    def subtract(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        from .ufuncs import negative
        return _update("subtract", lax.scatter_add, self.array, self.index,
                       negative(_value(values)), mode)

    def multiply(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        """x with x[idx] multiplied by values (duplicates multiply repeatedly)."""
        return _update("multiply", lax.scatter_mul, self.array, self.index, values, mode)

    mul = multiply

    def divide(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        from .ufuncs import reciprocal
        x = _value(self.array)
        if x.dtype.kind != "f":
            raise FgradTypeError(f"at[...].divide needs a floating-point array, got "
                                 f"{x.dtype}")
        return _update("divide", lax.scatter_mul, x, self.index, reciprocal(_value(values)),
                       mode)

    def power(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        """x with x[idx] raised to values (duplicate indices: the last one wins)."""
        from .ufuncs import power
        return self.set(power(self.get(mode=mode), values), mode=mode)

    def min(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        """x with x[idx] = minimum(x[idx], values)."""
        return _update("min", lax.scatter_min, self.array, self.index, values, mode)

    def max(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        """x with x[idx] = maximum(x[idx], values)."""
        return _update("max", lax.scatter_max, self.array, self.index, values, mode)


def _check_mode(op, mode, modes):
    if mode not in (None, "promise_in_bounds") + modes:
        raise ValueError(f"at[...].{op}: mode must be None, 'promise_in_bounds' or one of "
                         f"{modes}, got {mode!r}")


def default_fill(dtype):
    """What an out-of-bounds read gives in mode 'fill' by default (as JAX's)."""
    dtype = np.dtype(dtype)
    if dtype.kind in "fc":
        return np.asarray(np.nan, dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return np.asarray(info.min if dtype.kind == "i" else info.max, dtype)
    return np.asarray(True)


def _update(op, scatter_fn, x, index, values, mode=None):
    """x with values combined in at index. Out-of-bounds indices: mode None drops
    traced ones and rejects concrete ones; 'drop'/'fill' drop both; 'clip' clamps."""
    _check_mode(op, mode, ("drop", "fill", "clip"))
    x = _value(x)
    bool_op = x.dtype.kind == "b" and op != "set"
    oob = {"clip": "clip", "drop": "fill", "fill": "fill"}.get(mode, "drop")
    if oob == "drop" and _is_basic(index) and not bool_op:
        return _update_window(op, x, index, values)
    x2, entries = _expand(x, index)
    if oob == "drop" and x2.ndim == x.ndim and all(k == "array" or (k == "int") or _is_full(p, n) for (k, p), n
                                 in zip(entries, x.shape)):
        # Arrays (and ints) with whole axes elsewhere: scatter at the index arrays.
        _, arrays, adv, perm = _advanced(x, entries)
        bshape = tuple(arrays[0].shape)
        rest = tuple(n for d, n in enumerate(x.shape) if d not in adv)
        natural = bshape + rest
        tshape = natural if perm is None else tuple(natural[i] for i in perm)
        v = _broadcast_updates(op, x, values, tshape)
        if perm is not None:
            v = lax.transpose(v, tuple(np.argsort(perm)))
        if bool_op:
            i32 = dtypes.int32
            out = scatter_fn(lax.convert_element_type(x, i32), arrays,
                             lax.convert_element_type(v, i32), adv)
            return lax.ne(out, Array(np.asarray(0, i32), True))
        return scatter_fn(x, arrays, v, adv)
    n = x.size
    target = _flat_targets(x, index, oob)
    tshape = tuple(target.shape)
    v = _broadcast_updates(op, x, values, tshape)
    m = math.prod(map(int, tshape))
    flat_x = lax.reshape(x, (n,))
    flat_t = lax.reshape(target, (m,))
    flat_v = lax.reshape(v, (m,))
    if x.dtype.kind == "b" and op != "set":
        i32 = dtypes.int32
        out = scatter_fn(lax.convert_element_type(flat_x, i32), (flat_t,),
                         lax.convert_element_type(flat_v, i32), (0,))
        out = lax.ne(out, Array(np.asarray(0, i32), True))
    else:
        out = scatter_fn(flat_x, (flat_t,), flat_v, (0,))
    return lax.reshape(out, tuple(x.shape))


def _flat_targets(x, index, oob="drop"):
    """The flat positions x[index] reads, for a scatter into the flattened x. An
    index out of bounds gives x.size, which the scatter drops (getitem would clamp
    it): with oob 'drop' a traced one (a concrete one raises), with 'fill' any;
    with 'clip' it is clamped into the axis instead. The positions are padded by
    one entry of x.size at the end of every axis, and the index is rewritten to
    in-range slices and ints and to arrays whose out-of-bounds entries point at
    the padding."""
    n = x.size
    positions = Array(np.arange(n, dtype=_index_dtype(n + 1)).reshape(x.shape), False)
    expanded, entries = _expand(positions, index)
    if oob == "drop" and not any(k == "array" and isinstance(p, Tracer) for k, p in entries):
        return getitem(positions, index)
    grid = np.asarray(expanded._value)
    padded = Array(np.pad(grid, [(0, 1)] * grid.ndim, constant_values=n), False)
    fixed = []
    for d, (k, p) in enumerate(entries):
        size = grid.shape[d]
        if k == "slice":
            start, stop, step = p.indices(size)
            fixed.append(slice(start, None if stop < 0 else stop, step))
        elif k == "int":
            if -size <= p < size:
                fixed.append(p % size)
            elif oob == "drop":
                raise _out_of_bounds(p, d, size)
            else:
                fixed.append(size if oob == "fill" else min(max(p + size * (p < 0), 0), size - 1))
        else:
            if oob != "drop" and not isinstance(p, Tracer):
                p = Array(p, False)      # checked below, not rejected
            i = _normalize_array_index(p, d, size)
            if oob == "clip":
                i = lax.min(lax.max(i, _scalar(0, i.dtype)), _scalar(max(size - 1, 0), i.dtype))
            elif isinstance(p, Tracer) or oob == "fill":
                inside = lax.bitwise_and(lax.ge(i, _scalar(0, i.dtype)),
                                         lax.lt(i, _scalar(size, i.dtype)))
                i = lax.select_n(inside, _scalar(size, i.dtype), i)
            fixed.append(i)
    return getitem(padded, tuple(fixed))


def _scalar(value, dtype):
    return Array(np.asarray(value, dtype), False)


_COMBINE = {"add": lax.add, "subtract": lax.add, "multiply": lax.mul, "divide": lax.mul,
            "min": lax.min, "max": lax.max}


def _is_full(p, n):
    return isinstance(p, slice) and p.indices(n) == (0, n, 1)


def _cast_updates(x, values):
    v = _value(values)
    if v.dtype != x.dtype:
        if x.dtype.kind == "b" and v.dtype.kind != "b":
            v = lax.ne(v, Array(np.asarray(0, v.dtype), True))
        else:
            v = lax.convert_element_type(v, x.dtype, is_weak(x))
    return v


def _fit_updates(op, x, v, tshape):
    """v without extra leading 1s, checked to broadcast to tshape (not broadcast)."""
    while v.ndim > len(tshape) and v.shape[0] == 1:   # NumPy drops leading 1s
        v = lax.reshape(v, tuple(v.shape[1:]))
    if tuple(v.shape) != tshape:
        ok = v.ndim <= len(tshape) and all(
            s in (1, t) for s, t in zip(v.shape, tshape[len(tshape) - v.ndim:]))
        if not ok:
            raise FgradTypeError(
                f"at[...].{op}: updates of shape {tuple(v.shape)} do not broadcast to the "
                f"indexed shape {tshape} of an array of shape {tuple(x.shape)}")
    return v


def _broadcast_updates(op, x, values, tshape):
    v = _fit_updates(op, x, _cast_updates(x, values), tshape)
    return lax.broadcast_to(v, tshape) if tuple(v.shape) != tshape else v


def _update_window(op, x, index, values):
    """Updates at ints and slices: a strided window of x (no duplicates possible)."""
    _, entries = _expand(x, index)
    starts, limits, strides, revs, window = [], [], [], [], []
    for d, (k, p) in enumerate(entries):
        n = x.shape[d]
        if k == "int":
            if not -n <= p < n:
                raise _out_of_bounds(p, d, n)
            a, b, st, r = p % n, p % n + 1, 1, False
        else:
            a, b, st, r = _slice_params(p, n)
            window.append(d)
        starts.append(a)
        limits.append(b)
        strides.append(st)
        if r:
            revs.append(d)
    full_shape = tuple(-(-(b - a) // st) for a, b, st in zip(starts, limits, strides))
    tshape = tuple(full_shape[d] for d in window)
    v = _fit_updates(op, x, _cast_updates(x, values), tshape)
    if 0 in full_shape:
        return x
    y = lax.rev(x, tuple(revs)) if revs else x
    if op == "set":
        v = lax.reshape(lax.broadcast_to(v, tshape), full_shape)
    else:
        # v aligned with the window's rank; the combine op broadcasts it.
        if v.ndim:
            vshape = (1,) * (len(tshape) - v.ndim) + tuple(v.shape)
            it = iter(vshape)
            v = lax.reshape(v, tuple(next(it) if d in window else 1 for d in range(x.ndim)))
        region = lax.slice(y, starts, limits, strides)
        v = _COMBINE[op](region, v)
    if all(st == 1 for st in strides):
        itype = dtypes.int32
        out = lax.dynamic_update_slice(y, v, [Array(np.asarray(a, itype), False)
                                              for a in starts])
    else:
        # Strided windows: scatter at the window's (static) flat positions.
        positions = np.arange(x.size).reshape(x.shape)
        if revs:
            positions = np.flip(positions, revs)
        positions = positions[tuple(slice(a, b, st) for a, b, st in
                                    zip(starts, limits, strides))]
        flat = lax.reshape(x, (x.size,))   # positions index the unreversed array
        pos = Array(positions.reshape(-1).astype(_index_dtype(x.size)), False)
        out = lax.scatter(flat, (pos,), lax.reshape(v, (positions.size,)), (0,))
        return lax.reshape(out, tuple(x.shape))
    return lax.rev(out, tuple(revs)) if revs else out


# ----------------------------------------------------------------------------
# Index-producing functions

def nonzero(a, *, size=None, fill_value=None):
    """Indices of the nonzero elements, one int32 array per dimension. A traced
    input needs `size` (the number of indices to return; extra slots hold
    `fill_value`, default 0)."""
    a = _value(a)
    if a.ndim == 0:
        raise ValueError("nonzero: calling nonzero on 0d arrays is not allowed; use "
                         "atleast_1d(a).nonzero() instead")
    if not isinstance(a, Tracer) and size is None:
        return tuple(Array(i.astype(np.int32), False) for i in np.nonzero(np.asarray(a._value)))
    if size is None:
        raise ConcretizationError(
            f"nonzero of a traced value ({a.aval.str_short()}) needs a static `size`: the "
            f"number of nonzero elements is not known while tracing.\n  hint: pass size=N "
            f"(and optionally fill_value), or use fgrad.numpy.where(cond, x, y).")
    return _nonzero_sized(a, int(size), fill_value)


def _nonzero_sized(a, size, fill_value):
    n = a.size
    itype = _index_dtype(max(n, size) + 1)
    flat = lax.reshape(a, (n,))
    mask = flat if flat.dtype.kind == "b" else lax.ne(flat, Array(np.asarray(0, flat.dtype), True))
    m = lax.convert_element_type(mask, itype)
    pos = lax.sub(lax.cumsum(m, 0), Array(np.asarray(1, itype), True))
    target = lax.select_n(mask, Array(np.full((n,), size, itype), False), pos)
    flat_idx = Array(np.arange(n, dtype=itype), False)
    found = lax.scatter(Array(np.zeros((size,), itype), False), (target,), flat_idx, (0,))
    count = lax.reduce_sum(m, (0,))
    valid = lax.lt(Array(np.arange(size, dtype=itype), False), count)
    out = []
    strides = np.cumprod((1,) + tuple(a.shape[::-1]))[:-1][::-1]
    for stride, dim in zip(strides, a.shape):
        c = lax.rem(lax.div(found, Array(np.asarray(stride, itype), True)),
                    Array(np.asarray(dim, itype), True))
        if fill_value is not None:
            c = lax.select_n(valid, Array(np.asarray(fill_value, itype), True), c)
        out.append(c)
    return tuple(out)


def flatnonzero(a, *, size=None, fill_value=None):
    a = _value(a)
    return nonzero(lax.reshape(a, (a.size,)), size=size, fill_value=fill_value)[0]


def argwhere(a, *, size=None, fill_value=None):
    from .shape import stack
    a = _value(a)
    if a.ndim == 0:
        idx = nonzero(lax.reshape(a, (1,)), size=size, fill_value=fill_value)[0]
        return Array(np.zeros((idx.shape[0], 0), np.int32), False)
    return stack(nonzero(a, size=size, fill_value=fill_value), axis=1)


def extract(condition, arr):
    """arr.ravel()[condition.ravel() != 0] (concrete condition)."""
    arr = _value(arr)
    cond = _value(condition)
    return getitem(lax.reshape(arr, (arr.size,)), flatnonzero(cond))


def compress(condition, a, axis=None):
    from .shape import take
    cond = np.asarray(condition)
    if isinstance(condition, Tracer):
        nonzero(condition)  # raises the concretization error
    return take(a, Array(np.nonzero(cond.ravel())[0].astype(np.int32), False), axis=axis)


def ix_(*args):
    """Open meshes of index arrays (as numpy.ix_)."""
    out = []
    nd = len(args)
    for k, a in enumerate(args):
        a = _value(a)
        if a.ndim != 1:
            raise ValueError("ix_: cross index must be 1 dimensional")
        if a.dtype.kind == "b" and not isinstance(a, Tracer):
            a = Array(np.nonzero(np.asarray(a._value))[0].astype(np.int32), False)
        shape = [1] * nd
        shape[k] = a.shape[0]
        out.append(lax.reshape(a, tuple(shape)))
    return tuple(out)


def unravel_index(indices, shape):
    """Coordinate arrays for flat indices into an array of `shape`."""
    idx = _value(indices)
    shape = tuple(int(s) for s in shape)
    total = math.prod(map(int, shape))
    if not isinstance(idx, Tracer):
        v = np.asarray(idx._value)
        if v.size and (v.min() < -total or v.max() >= total):
            bad = int(v[(v < -total) | (v >= total)].ravel()[0])
            raise ValueError(f"unravel_index: index {bad} is out of bounds for array with "
                             f"size {total}")
    itype = idx.dtype
    idx = lax.select_n(lax.lt(idx, Array(np.asarray(0, itype), True)), idx,
                       lax.add(idx, Array(np.asarray(total, itype), True)))
    strides = np.cumprod((1,) + shape[::-1])[:-1][::-1]
    return tuple(lax.rem(lax.div(idx, Array(np.asarray(s, itype), True)),
                         Array(np.asarray(d, itype), True)) for s, d in zip(strides, shape))


def ravel_multi_index(multi_index, dims, mode="raise", order="C"):
    dims = tuple(int(d) for d in dims)
    if order != "C":
        raise NotImplementedError("ravel_multi_index: only order='C' is supported")
    strides = np.cumprod((1,) + dims[::-1])[:-1][::-1]
    out = None
    for i, s, d in zip(multi_index, strides, dims):
        i = _value(i)
        if mode == "raise" and not isinstance(i, Tracer):
            v = np.asarray(i._value)
            if v.size and (v.min() < 0 or v.max() >= d):
                raise ValueError("ravel_multi_index: invalid entry in coordinates array")
        elif mode == "clip":
            i = lax.min(lax.max(i, Array(np.asarray(0, i.dtype), True)),
                        Array(np.asarray(d - 1, i.dtype), True))
        elif mode == "wrap":
            r = lax.rem(i, Array(np.asarray(d, i.dtype), True))
            i = lax.select_n(lax.lt(r, Array(np.asarray(0, i.dtype), True)), r,
                             lax.add(r, Array(np.asarray(d, i.dtype), True)))
        term = lax.mul(i, Array(np.asarray(s, i.dtype), True))
        out = term if out is None else lax.add(out, term)
    return out


def _static_indices(fn, *args, **kwargs):
    return tuple(Array(np.asarray(i).astype(np.int32), False) for i in fn(*args, **kwargs))


def diag_indices(n, ndim=2):
    return _static_indices(np.diag_indices, int(n), int(ndim))


def tril_indices(n, k=0, m=None):
    return _static_indices(np.tril_indices, int(n), int(k), m)


def triu_indices(n, k=0, m=None):
    return _static_indices(np.triu_indices, int(n), int(k), m)


def indices(dimensions, dtype=None, sparse=False):
    d = dtypes.canonicalize(dtype) if dtype is not None else dtypes.int32
    dimensions = tuple(int(s) for s in dimensions)
    if not sparse:
        check_size("indices", (len(dimensions),) + dimensions, d)
    out = np.indices(dimensions, dtype=d, sparse=sparse)
    if sparse:
        return tuple(Array(o, False) for o in out)
    return Array(out, False)
