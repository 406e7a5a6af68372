"""Building new arrays from old ones: append, insert, delete, resize, block, and
functions applied along axes (apply_along_axis, apply_over_axes, vectorize,
fromfunction), lexsort.

Positions (insert's and delete's `obj`) are static: they fix the result's
shape. Values may be traced: everything differentiates, batches and compiles.
apply_along_axis and vectorize are vmap over the user's function, so that
function sees traced values (no Python control flow on them).
"""
import numpy as np

from .. import dtypes
from ..core import Array
from ..errors import ConcretizationError, FgradTypeError
from .concrete import concrete_value
from .shape import broadcast_to, concatenate, moveaxis
from .sorting import argsort
from .util import asarray, canonicalize_axis


def append(arr, values, axis=None):
    """arr with values joined at the end (both flattened when axis is None)."""
    arr, values = asarray(arr), asarray(values)
    if axis is None:
        return concatenate([arr.ravel(), values.ravel()])
    return concatenate([arr, values], axis=axis)


def _static_positions(name, obj, n):
    """obj (an int, slice or integer sequence, concrete) as sorted-by-input NumPy ints."""
    if isinstance(obj, slice):
        return np.arange(n)[obj], True
    known = concrete_value(asarray(obj)) if not isinstance(obj, (int, np.integer)) else obj
    if known is None:
        raise ConcretizationError(f"{name}: the positions (obj) must be concrete: they fix "
                                  f"the result's shape.\n  hint: pass Python ints, a slice "
                                  f"or a NumPy array")
    known = np.asarray(known)
    if known.dtype.kind == "b":
        if known.shape != (n,):
            raise ValueError(f"{name}: a boolean obj must have the axis' length {n}")
        return np.flatnonzero(known), False
    if known.dtype.kind not in "iu":
        raise FgradTypeError(f"{name}: obj must hold integers, got {known.dtype}")
    return known, known.ndim == 0


def delete(arr, obj, axis=None, *, assume_unique_indices=False):
    """arr without the entries at positions obj along axis (flattened when None)."""
    arr = asarray(arr)
    if axis is None:
        arr, axis = arr.ravel(), 0
    axis = canonicalize_axis("delete", axis, arr.ndim, arr.shape)
    n = arr.shape[axis]
    positions, _ = _static_positions("delete", obj, n)
    positions = np.atleast_1d(positions)
    if np.any((positions < -n) | (positions >= n)):
        raise IndexError(f"delete: index out of bounds for axis {axis} with size {n}")
    keep = np.ones(n, bool)
    keep[positions % n if n else positions] = False
    index = [slice(None)] * arr.ndim
    index[axis] = Array(np.flatnonzero(keep).astype(np.int32), False)
    return arr[tuple(index)]


def insert(arr, obj, values, axis=None):
    """arr with `values` inserted before the positions obj along axis (flattened when
    None), as numpy.insert: one position inserts values as a block (broadcast), a
    sequence inserts one slice of values before each position."""
    arr = asarray(arr)
    if axis is None:
        arr, axis = arr.ravel(), 0
    axis = canonicalize_axis("insert", axis, arr.ndim, arr.shape)
    n = arr.shape[axis]
    positions, scalar = _static_positions("insert", obj, n + 1)
    positions = np.asarray(positions)
    if np.any((positions < -n) | (positions > n)):
        raise IndexError(f"insert: index out of bounds for axis {axis} with size {n}")
    positions = np.where(positions < 0, positions + n, positions)
    values = asarray(values).astype(arr.dtype)
    if positions.size == 1:
        at = int(positions.reshape(()))
        block = values.reshape((1,) * (arr.ndim - values.ndim) + tuple(values.shape))
        if scalar:
            block = moveaxis(block, 0, axis)
        want = list(arr.shape)
        want[axis] = block.shape[axis]
        block = broadcast_to(block, want)
        return concatenate([_take(arr, axis, 0, at), block, _take(arr, axis, at, n)],
                           axis=axis)
    count = positions.size
    want = list(arr.shape)
    want[axis] = count
    joined = concatenate([arr, broadcast_to(values, want)], axis=axis)
    # new slice j lands before old position positions[j] (ties in obj order)
    landing = positions.copy()
    landing[np.argsort(positions, kind="stable")] += np.arange(count)
    source = np.empty(n + count, np.int64)
    source[landing] = n + np.arange(count)
    old = np.ones(n + count, bool)
    old[landing] = False
    source[old] = np.arange(n)
    index = [slice(None)] * arr.ndim
    index[axis] = Array(source.astype(np.int32), False)
    return joined[tuple(index)]


def _take(arr, axis, start, stop):
    index = [slice(None)] * arr.ndim
    index[axis] = slice(start, stop)
    return arr[tuple(index)]


def resize(a, new_shape):
    """a's elements (flattened, repeated cyclically) in new_shape."""
    a = asarray(a).ravel()
    new_shape = (new_shape,) if isinstance(new_shape, (int, np.integer)) else tuple(new_shape)
    size = int(np.prod(new_shape, dtype=np.int64))
    if any(s < 0 for s in new_shape):
        raise ValueError("resize: all elements of `new_shape` must be non-negative")
    if a.size == 0 or size == 0:
        return Array(np.zeros(new_shape, a.dtype), False)
    reps = -(-size // a.size)
    return concatenate([a] * reps)[:size].reshape(new_shape)


def block(arrays):
    """Assemble an array from nested lists of blocks (the innermost lists join along
    the last axis, the next along the second last, ...), as numpy.block."""
    def depth(x):
        if isinstance(x, list):
            if not x:
                raise ValueError("block: lists cannot be empty")
            depths = {depth(e) for e in x}
            if len(depths) != 1:
                raise ValueError("block: list depths are mismatched")
            return depths.pop() + 1
        if isinstance(x, tuple):
            raise TypeError("block: arrays is a tuple; only lists can be used to arrange "
                            "blocks")
        return 0
    d = depth(arrays)

    ndim = max(d, _max_ndim(arrays))

    def build(x, level):
        if not isinstance(x, list):
            x = asarray(x)
            return x.reshape((1,) * (ndim - x.ndim) + tuple(x.shape))
        return concatenate([build(e, level + 1) for e in x], axis=-(d - level))
    return build(arrays, 0)


def _max_ndim(x):
    if isinstance(x, list):
        return max(_max_ndim(e) for e in x)
    return asarray(x).ndim


def apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """func1d applied to each 1-d slice of arr along axis (by vmap); the slices'
    results take the place of that axis."""
    from ..vmap_api import vmap
    arr = asarray(arr)
    axis = canonicalize_axis("apply_along_axis", axis, arr.ndim, arr.shape)
    moved = moveaxis(arr, axis, -1)
    fn = lambda v: asarray(func1d(v, *args, **kwargs))  # noqa: E731
    for _ in range(arr.ndim - 1):
        fn = vmap(fn)
    out = fn(moved)
    extra = out.ndim - (arr.ndim - 1)
    return moveaxis(out, list(range(arr.ndim - 1, out.ndim)),
                    list(range(axis, axis + extra))) if extra else out


def apply_over_axes(func, a, axes):
    """func(a, axis) applied for each axis in turn, keeping a's number of dimensions
    (a reduced axis stays with length 1)."""
    a = asarray(a)
    for axis in ((axes,) if np.ndim(axes) == 0 else axes):
        axis = canonicalize_axis("apply_over_axes", axis, a.ndim, a.shape)
        out = asarray(func(a, axis))
        if out.ndim == a.ndim - 1:
            out = out.reshape(out.shape[:axis] + (1,) + out.shape[axis:])
        elif out.ndim != a.ndim:
            raise ValueError("apply_over_axes: function is not returning an array of the "
                             "correct shape")
        a = out
    return a


class vectorize:
    """pyfunc applied elementwise over broadcast arguments (by vmap over every
    element, so pyfunc sees traced scalars: no Python control flow on them).
    Positional arguments broadcast against each other, except the indices in
    `excluded`; keyword arguments are passed through unchanged. `signature`
    (generalised ufunc core dimensions) is not supported."""

    def __init__(self, pyfunc, otypes=None, doc=None, excluded=None, cache=False,
                 signature=None):
        if signature is not None:
            raise FgradTypeError("vectorize: signature= is not supported",
                                 hint="use fgrad.vmap over the axes you need")
        self.pyfunc, self.excluded = pyfunc, set(excluded or ())
        self.otypes = otypes
        self.__doc__ = doc if doc is not None else getattr(pyfunc, "__doc__", None)

    def __call__(self, *args, **kwargs):
        from ..vmap_api import vmap
        from .shape import broadcast_arrays
        varying = [i for i in range(len(args)) if i not in self.excluded]
        arrays = broadcast_arrays(*[asarray(args[i]) for i in varying]) if varying else []
        shape = tuple(arrays[0].shape) if arrays else ()

        def call(*values):
            full = list(args)
            for i, v in zip(varying, values):
                full[i] = v
            return self.pyfunc(*full, **kwargs)
        fn = call
        for _ in shape:
            fn = vmap(fn)
        out = fn(*arrays)
        if self.otypes:
            dtype = np.dtype(self.otypes[0])
            out = asarray(out).astype(dtype)
        return out


def fromfunction(function, shape, *, dtype=float, **kwargs):
    """function(*index_arrays) for an array of `shape` (each index array gives one
    coordinate; dtype as numpy.fromfunction: float, i.e. the default float)."""
    from .indexing import indices
    d = dtypes.default_float if dtype is float else dtypes.canonicalize(dtype)
    coords = indices(tuple(shape), dtype=d)
    return function(*[coords[i] for i in range(len(shape))], **kwargs)


def lexsort(keys, axis=-1):
    """Indices that sort by the last key, ties broken by the one before, and so on
    (a chain of stable argsorts)."""
    keys = [asarray(k) for k in (keys if isinstance(keys, (list, tuple)) else
                                 [keys[i] for i in range(asarray(keys).shape[0])])]
    if not keys:
        raise TypeError("lexsort: need sequence of keys with len > 0")
    from .shape import take_along_axis
    order = argsort(keys[0], axis=axis)
    for key in keys[1:]:
        step = argsort(take_along_axis(key, order, axis=axis), axis=axis)
        order = take_along_axis(order, step, axis=axis)
    return order
