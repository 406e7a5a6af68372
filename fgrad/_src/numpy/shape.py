"""Shape manipulation: reshape, transpose, concatenate, stack, split, tile,
repeat, pad, flip, roll, take, ... .

Everything is built from the shape primitives (reshape, transpose,
broadcast_in_dim, squeeze, expand_dims), the slicing primitives (slice, pad,
concatenate, rev) and gather. Shapes, axes and split points are static; index
arrays computed from them are NumPy constants.
"""
import math

import numpy as np

from .. import dtypes, lax
from ..lax._util import broadcast_shape
from ..core import Array, Tracer
from ..errors import FgradTypeError
from ..lax.slicing import index_dtype, narrow_index
from .util import (asarray, canonicalize_axes, canonicalize_axis, is_weak, promote,
                   static_int, static_shape)

_ARRAYS = (Array, Tracer)


def _value(x):
    if type(x) is Array or isinstance(x, Tracer):
        return x
    return asarray(x)


# ----------------------------------------------------------------------------
# Shape queries

def shape(a):
    return tuple(np.shape(a)) if not isinstance(a, _ARRAYS) else tuple(a.shape)


def ndim(a):
    return len(shape(a))


def size(a, axis=None):
    s = shape(a)
    if axis is None:
        return math.prod(map(int, s))
    return s[canonicalize_axis("size", axis, len(s), s)]


# ----------------------------------------------------------------------------
# Reshaping and transposing

def _resolve_shape(name, a, newshape):
    newshape = static_shape(name, newshape)
    unknown = [i for i, s in enumerate(newshape) if s == -1]
    if len(unknown) > 1:
        raise FgradTypeError(f"{name}: can only specify one unknown dimension (-1), "
                             f"got {newshape}")
    if any(s < -1 for s in newshape):
        raise FgradTypeError(f"{name}: negative dimension in {newshape}")
    if unknown:
        known = math.prod(map(int, [s for s in newshape if s != -1]))
        if known == 0 or a.size % known:
            raise FgradTypeError(f"{name}: cannot reshape array of shape {tuple(a.shape)} "
                                 f"({a.size} elements) into shape {newshape}")
        newshape = tuple(a.size // known if s == -1 else s for s in newshape)
    if math.prod(map(int, newshape)) != a.size:
        raise FgradTypeError(f"{name}: cannot reshape array of shape {tuple(a.shape)} "
                             f"({a.size} elements) into shape {newshape}")
    return newshape


def reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    """a with a new shape of the same size (one dimension may be -1)."""
    if shape is None:
        shape = newshape
    if shape is None:
        raise TypeError("reshape: missing the new shape")
    a = _value(a)
    shape = _resolve_shape("reshape", a, shape)
    if order == "C":
        return lax.reshape(a, shape)
    if order == "F":
        rev_in = tuple(range(a.ndim))[::-1]
        t = lax.transpose(a, rev_in) if a.ndim > 1 else a
        r = lax.reshape(t, shape[::-1])
        return lax.transpose(r, tuple(range(len(shape)))[::-1]) if len(shape) > 1 else r
    raise ValueError(f"reshape: order must be 'C' or 'F', got {order!r}")


def ravel(a, order="C"):
    a = _value(a)
    return reshape(a, (a.size,), order=order)


def transpose(a, axes=None):
    a = _value(a)
    if axes is None:
        perm = tuple(range(a.ndim))[::-1]
    else:
        if len(axes) != a.ndim:
            raise FgradTypeError(f"transpose: axes {tuple(axes)} do not match an array of "
                                 f"shape {tuple(a.shape)}")
        perm = tuple(canonicalize_axis("transpose", ax, a.ndim, a.shape) for ax in axes)
        if len(set(perm)) != len(perm):
            raise FgradTypeError(f"transpose: repeated axis in {tuple(axes)}")
    return lax.transpose(a, perm)


permute_dims = transpose


def matrix_transpose(x, /):
    x = _value(x)
    if x.ndim < 2:
        raise FgradTypeError(f"matrix_transpose: needs at least 2 dimensions, got shape "
                             f"{tuple(x.shape)}")
    perm = tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2)
    return lax.transpose(x, perm)


def swapaxes(a, axis1, axis2):
    a = _value(a)
    i = canonicalize_axis("swapaxes", axis1, a.ndim, a.shape)
    j = canonicalize_axis("swapaxes", axis2, a.ndim, a.shape)
    perm = list(range(a.ndim))
    perm[i], perm[j] = perm[j], perm[i]
    return lax.transpose(a, perm)


def moveaxis(a, source, destination):
    a = _value(a)
    src = source if isinstance(source, (tuple, list)) else (source,)
    dst = destination if isinstance(destination, (tuple, list)) else (destination,)
    if len(src) != len(dst):
        raise ValueError("moveaxis: source and destination must have the same number of "
                         "elements")
    src = [canonicalize_axis("moveaxis", s, a.ndim, a.shape) for s in src]
    dst = [canonicalize_axis("moveaxis", d, a.ndim, a.shape) for d in dst]
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise FgradTypeError("moveaxis: repeated axis")
    order = [n for n in range(a.ndim) if n not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return lax.transpose(a, order)


def rollaxis(a, axis, start=0):
    a = _value(a)
    axis = canonicalize_axis("rollaxis", axis, a.ndim, a.shape)
    start = start + a.ndim if start < 0 else start
    if start > axis:
        start -= 1
    return moveaxis(a, axis, start)


def squeeze(a, axis=None):
    a = _value(a)
    if axis is None:
        axes = tuple(i for i, s in enumerate(a.shape) if s == 1)
    else:
        axes = canonicalize_axes("squeeze", axis, a.ndim, a.shape)
        for ax in axes:
            if a.shape[ax] != 1:
                raise FgradTypeError(f"squeeze: cannot select an axis to squeeze out which "
                                     f"has size not equal to one (axis {ax} of shape "
                                     f"{tuple(a.shape)})")
    return lax.squeeze(a, axes) if axes else a


def expand_dims(a, axis):
    a = _value(a)
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    nd = a.ndim + len(axes)
    axes = canonicalize_axes("expand_dims", axes, nd)
    return lax.expand_dims(a, axes)


def broadcast_shapes(*shapes):
    shapes = [static_shape("broadcast_shapes", s) for s in shapes]
    try:
        return tuple(broadcast_shape(*shapes))
    except ValueError:
        raise FgradTypeError("broadcast_shapes: shapes " + ", ".join(map(str, shapes)) +
                             " cannot be broadcast together") from None


def broadcast_to(array, shape):
    """array broadcast to `shape` (NumPy rules, trailing dimensions aligned)."""
    a = _value(array)
    shape = static_shape("broadcast_to", shape, a.dtype)
    src = tuple(a.shape)
    if src == shape:
        return a
    nd = len(src)
    if nd > len(shape) or any(s not in (1, t) for s, t in zip(src, shape[len(shape) - nd:])):
        raise FgradTypeError(f"broadcast_to: cannot broadcast an array of shape {src} to "
                             f"shape {shape}",
                             hint="aligned from the right, each size must be 1 or equal the "
                                  "target size")
    return lax.broadcast_in_dim(a, shape, tuple(range(len(shape) - nd, len(shape))))


def broadcast_arrays(*args):
    arrays = [_value(a) for a in args]
    try:
        shape = tuple(broadcast_shape(*[tuple(a.shape) for a in arrays]))
    except ValueError:
        raise FgradTypeError("broadcast_arrays: shapes " + ", ".join(
            str(tuple(a.shape)) for a in arrays) + " cannot be broadcast together") from None
    return [broadcast_to(a, shape) for a in arrays]


def atleast_1d(*arys):
    out = [_value(a) for a in arys]
    out = [lax.reshape(a, (1,)) if a.ndim == 0 else a for a in out]
    return out[0] if len(out) == 1 else out


def atleast_2d(*arys):
    out = []
    for a in arys:
        a = _value(a)
        if a.ndim == 0:
            a = lax.reshape(a, (1, 1))
        elif a.ndim == 1:
            a = lax.reshape(a, (1,) + tuple(a.shape))
        out.append(a)
    return out[0] if len(out) == 1 else out


def atleast_3d(*arys):
    out = []
    for a in arys:
        a = _value(a)
        if a.ndim == 0:
            a = lax.reshape(a, (1, 1, 1))
        elif a.ndim == 1:
            a = lax.reshape(a, (1,) + tuple(a.shape) + (1,))
        elif a.ndim == 2:
            a = lax.reshape(a, tuple(a.shape) + (1,))
        out.append(a)
    return out[0] if len(out) == 1 else out


# ----------------------------------------------------------------------------
# Joining and splitting

def _promote_all(arrays, dtype=None):
    arrays = [_value(a) for a in arrays]
    if dtype is not None:
        d = dtypes.canonicalize(dtype)
        return [a if a.dtype == d else lax.convert_element_type(a, d) for a in arrays]
    if len({a.dtype for a in arrays}) <= 1 and len({is_weak(a) for a in arrays}) <= 1:
        return arrays
    return promote(*arrays)


def _shapes(arrays):
    return ", ".join(str(tuple(a.shape)) for a in arrays)


def concatenate(arrays, axis=0, out=None, *, dtype=None):
    """Join arrays along an existing axis (axis None: flatten them first)."""
    if isinstance(arrays, _ARRAYS):
        arrays = list(arrays)
    arrays = _promote_all(arrays, dtype)
    if not arrays:
        raise ValueError("need at least one array to concatenate")
    if axis is None:
        arrays = [lax.reshape(a, (a.size,)) for a in arrays]
        axis = 0
    first = arrays[0]
    if first.ndim == 0:
        raise FgradTypeError("concatenate: zero-dimensional arrays cannot be concatenated")
    ax = canonicalize_axis("concatenate", axis, first.ndim, first.shape)
    for a in arrays[1:]:
        if a.ndim != first.ndim or any(s != t for i, (s, t) in enumerate(zip(a.shape, first.shape))
                                       if i != ax):
            raise FgradTypeError(
                f"concatenate: all input array dimensions except for the concatenation "
                f"axis {ax} must match exactly, got shapes {_shapes(arrays)}")
    if len(arrays) == 1:
        return first
    return lax.concatenate(arrays, ax)


concat = concatenate


def stack(arrays, axis=0, out=None, *, dtype=None):
    """Join arrays of one shape along a new axis."""
    if isinstance(arrays, _ARRAYS):
        arrays = list(arrays)
    arrays = _promote_all(arrays, dtype)
    if not arrays:
        raise ValueError("need at least one array to stack")
    first = arrays[0]
    for a in arrays[1:]:
        if tuple(a.shape) != tuple(first.shape):
            raise FgradTypeError(f"stack: all input arrays must have the same shape, got "
                                 f"shapes {_shapes(arrays)}")
    ax = canonicalize_axis("stack", axis, first.ndim + 1)
    expanded = [lax.expand_dims(a, (ax,)) for a in arrays]
    return expanded[0] if len(expanded) == 1 else lax.concatenate(expanded, ax)


def hstack(tup, *, dtype=None):
    arrs = [atleast_1d(a) for a in tup]
    if arrs and arrs[0].ndim == 1:
        return concatenate(arrs, 0, dtype=dtype)
    return concatenate(arrs, 1, dtype=dtype)


def vstack(tup, *, dtype=None):
    return concatenate([atleast_2d(a) for a in tup], 0, dtype=dtype)


row_stack = vstack


def dstack(tup, *, dtype=None):
    return concatenate([atleast_3d(a) for a in tup], 2, dtype=dtype)


def column_stack(tup):
    arrs = []
    for a in tup:
        a = _value(a)
        arrs.append(lax.reshape(a, (a.shape[0], 1)) if a.ndim == 1 else
                    (lax.reshape(a, (1, 1)) if a.ndim == 0 else a))
    return concatenate(arrs, 1)


def _split(name, ary, indices_or_sections, axis, equal):
    a = _value(ary)
    ax = canonicalize_axis(name, axis, a.ndim, a.shape)
    n = a.shape[ax]
    if isinstance(indices_or_sections, (int, np.integer)) or (
            isinstance(indices_or_sections, Array) and indices_or_sections.ndim == 0):
        sections = static_int(name, "sections", indices_or_sections)
        if sections <= 0:
            raise ValueError(f"{name}: number of sections must be larger than 0")
        if equal and n % sections:
            raise ValueError(f"array split does not result in an equal division: "
                             f"axis {ax} of size {n} into {sections} sections")
        q, r = divmod(n, sections)
        sizes = [q + 1] * r + [q] * (sections - r)
        points = np.cumsum([0] + sizes).tolist()
    else:
        idx = [static_int(name, "split index", i) for i in indices_or_sections]
        points = [0] + idx + [n]
    out = []
    for lo, hi in zip(points[:-1], points[1:]):
        lo = min(max(lo + n if lo < 0 else lo, 0), n)
        hi = min(max(hi + n if hi < 0 else hi, 0), n)
        hi = max(hi, lo)
        out.append(lax.slice_in_dim(a, lo, hi, 1, ax) if (lo, hi) != (0, n) else a)
    return out


def split(ary, indices_or_sections, axis=0):
    """Split into equal sections (an int) or at the given indices."""
    return _split("split", ary, indices_or_sections, axis, True)


def array_split(ary, indices_or_sections, axis=0):
    return _split("array_split", ary, indices_or_sections, axis, False)


def _split_min_ndim(name, ary, ndim):
    a = _value(ary)
    if a.ndim < ndim:
        raise ValueError(f"{name} only works on arrays of {ndim} or more dimensions "
                         f"(got shape {tuple(a.shape)})")
    return a


def hsplit(ary, indices_or_sections):
    a = _split_min_ndim("hsplit", ary, 1)
    return split(a, indices_or_sections, 1 if a.ndim > 1 else 0)


def vsplit(ary, indices_or_sections):
    return split(_split_min_ndim("vsplit", ary, 2), indices_or_sections, 0)


def dsplit(ary, indices_or_sections):
    return split(_split_min_ndim("dsplit", ary, 3), indices_or_sections, 2)


def unstack(x, /, *, axis=0):
    x = _value(x)
    ax = canonicalize_axis("unstack", axis, x.ndim, x.shape)
    return tuple(lax.squeeze(p, (ax,)) for p in split(x, x.shape[ax], ax)) if x.shape[ax] \
        else ()


# ----------------------------------------------------------------------------
# Tiling, repeating, padding

def tile(A, reps):
    """A repeated reps[i] times along each axis."""
    a = _value(A)
    reps = static_shape("tile", reps)
    nd = max(a.ndim, len(reps))
    reps = (1,) * (nd - len(reps)) + tuple(reps)
    shp = (1,) * (nd - a.ndim) + tuple(a.shape)
    a = lax.reshape(a, shp)
    inter = []
    for r, s in zip(reps, shp):
        inter += [r, s]
    b = lax.broadcast_in_dim(a, inter, tuple(range(1, 2 * nd, 2)))
    return lax.reshape(b, tuple(r * s for r, s in zip(reps, shp)))


def repeat(a, repeats, axis=None, *, total_repeat_length=None):
    """Repeat each element `repeats` times (an int, or one count per element)."""
    a = _value(a)
    if axis is None:
        a = lax.reshape(a, (a.size,))
        axis = 0
    ax = canonicalize_axis("repeat", axis, a.ndim, a.shape)
    if isinstance(repeats, Tracer):
        raise FgradTypeError("repeat: repeats must be static (a Python int or a concrete "
                             "array); the result's shape depends on it",
                             hint="pass total_repeat_length is not enough here: fgrad needs "
                                  "the counts themselves")
    reps = np.asarray(repeats)
    if reps.ndim == 0 or reps.size == 1:
        r = int(reps.reshape(()))
        if r < 0:
            raise ValueError("repeat: negative dimensions are not allowed")
        shp = tuple(a.shape)
        inter = shp[:ax + 1] + (r,) + shp[ax + 1:]
        dims = tuple(range(ax + 1)) + tuple(range(ax + 2, a.ndim + 1))
        b = lax.broadcast_in_dim(a, inter, dims)
        return lax.reshape(b, shp[:ax] + (shp[ax] * r,) + shp[ax + 1:])
    if reps.shape != (a.shape[ax],):
        raise FgradTypeError(f"repeat: {reps.size} repeat counts do not match axis {ax} of "
                             f"shape {tuple(a.shape)}")
    idx = np.repeat(np.arange(a.shape[ax]), reps)
    return take(a, Array(idx.astype(np.int32), False), axis=ax)


def _pad_width(name, pad_width, ndim):
    pw = np.asarray(pad_width)
    if pw.dtype.kind not in "iu":
        raise TypeError(f"{name}: pad_width must be integers, got {pad_width!r}")
    try:
        pw = np.broadcast_to(pw, (ndim, 2))
    except ValueError:
        raise FgradTypeError(f"{name}: pad_width {pad_width!r} does not fit an array of "
                             f"{ndim} dimensions") from None
    if (pw < 0).any():
        raise ValueError(f"{name}: index can't contain negative values")
    return [(int(lo), int(hi)) for lo, hi in pw]


def pad(array, pad_width, mode="constant", **kwargs):
    """Pad an array. Modes: 'constant' (constant_values), 'empty', 'edge', 'reflect',
    'symmetric' and 'wrap' (reflect_type 'even' only)."""
    a = _value(array)
    widths = _pad_width("pad", pad_width, a.ndim)
    if callable(mode):
        raise NotImplementedError("pad: a callable mode is not supported")
    if mode in ("constant", "empty"):
        values = kwargs.pop("constant_values", 0) if mode == "constant" else 0
        if kwargs:
            raise TypeError(f"pad: unexpected arguments {sorted(kwargs)} for mode {mode!r}")
        if isinstance(values, _ARRAYS) and values.ndim == 0:
            vals = [(values, values)] * a.ndim
        else:
            if isinstance(values, Tracer):
                raise FgradTypeError("pad: per-axis constant_values must be concrete")
            v = np.asarray(values)
            try:
                v = np.broadcast_to(v, (a.ndim, 2))
            except ValueError:
                raise FgradTypeError(f"pad: constant_values {values!r} do not fit an array "
                                     f"of {a.ndim} dimensions") from None
            vals = [(v[i, 0].item(), v[i, 1].item()) for i in range(a.ndim)]
        if not a.ndim:
            return a
        uniform = all(_same_value(x, vals[0][0]) for pair in vals for x in pair)
        if uniform:
            return lax.pad(a, _pad_value(a, vals[0][0]),
                           [(lo, hi, 0) for lo, hi in widths])
        for ax, ((lo, hi), (vlo, vhi)) in enumerate(zip(widths, vals)):
            for width, value, before in ((lo, vlo, True), (hi, vhi, False)):
                if width:
                    cfg = [(0, 0, 0)] * a.ndim
                    cfg[ax] = (width, 0, 0) if before else (0, width, 0)
                    a = lax.pad(a, _pad_value(a, value), cfg)
        return a
    if mode not in ("edge", "reflect", "symmetric", "wrap"):
        raise NotImplementedError(f"pad: mode {mode!r} is not supported; use 'constant', "
                                  f"'edge', 'reflect', 'symmetric' or 'wrap'")
    if kwargs.get("reflect_type", "even") != "even":
        raise NotImplementedError("pad: only reflect_type='even' is supported")
    for ax, (lo, hi) in enumerate(widths):
        if lo == hi == 0:
            continue
        n = a.shape[ax]
        if n == 0:
            raise ValueError(f"pad: can't extend empty axis {ax} using modes other than "
                             f"'constant' or 'empty'")
        idx = np.pad(np.arange(n), (lo, hi), mode=mode)
        a = take(a, Array(idx.astype(np.int32), False), axis=ax)
    return a


def _same_value(x, y):
    if isinstance(x, _ARRAYS) or isinstance(y, _ARRAYS):
        return x is y
    return x == y


def _pad_value(a, value):
    if isinstance(value, _ARRAYS):
        v = value if value.dtype == a.dtype else lax.convert_element_type(value, a.dtype)
        return lax.reshape(v, ())
    return Array(np.asarray(value).astype(a.dtype), False)


# ----------------------------------------------------------------------------
# Reversing and rolling

def flip(m, axis=None):
    m = _value(m)
    axes = canonicalize_axes("flip", axis, m.ndim, m.shape)
    return lax.rev(m, axes) if axes else m


def fliplr(m):
    m = _value(m)
    if m.ndim < 2:
        raise FgradTypeError(f"fliplr: needs at least 2 dimensions, got shape {tuple(m.shape)}")
    return flip(m, 1)


def flipud(m):
    m = _value(m)
    if m.ndim < 1:
        raise FgradTypeError("flipud: needs at least 1 dimension, got a 0-d array")
    return flip(m, 0)


def rot90(m, k=1, axes=(0, 1)):
    m = _value(m)
    k = static_int("rot90", "k", k) % 4
    a0, a1 = (canonicalize_axis("rot90", ax, m.ndim, m.shape) for ax in axes)
    if a0 == a1:
        raise ValueError("rot90: axes must be different")
    if k == 0:
        return m
    if k == 2:
        return flip(flip(m, a0), a1)
    if k == 1:
        return swapaxes(flip(m, a1), a0, a1)
    return flip(swapaxes(m, a0, a1), a1)


def roll(a, shift, axis=None):
    """Elements shifted along axes (wrapping around); a traced shift uses gather."""
    a = _value(a)
    if axis is None:
        return reshape(roll(ravel(a), shift, 0), tuple(a.shape))
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    shifts = shift if isinstance(shift, (tuple, list)) else (shift,)
    if len(shifts) == 1 and len(axes) > 1:
        shifts = shifts * len(axes)
    if len(axes) == 1 and len(shifts) > 1:
        axes = axes * len(shifts)
    if len(shifts) != len(axes):
        raise ValueError("roll: shift and axis must have the same length")
    for s, ax in zip(shifts, axes):
        ax = canonicalize_axis("roll", ax, a.ndim, a.shape)
        n = a.shape[ax]
        if n == 0:
            continue
        if isinstance(s, Tracer):
            s = _value(s)
            if s.dtype.kind not in "iu":
                s = lax.convert_element_type(s, dtypes.int32)
            itype = index_dtype(2 * n)
            base = lax.iota(itype, (n,), 0)
            sh = _mod_index(s, n, itype)
            idx = lax.rem(lax.add(lax.sub(base, sh), n), n)      # (i - shift) mod n
            a = moveaxis(lax.gather(a, (idx,), (ax,)), 0, ax)
            continue
        k = static_int("roll", "shift", s) % n
        if k:
            a = lax.concatenate([lax.slice_in_dim(a, n - k, n, 1, ax),
                                 lax.slice_in_dim(a, 0, n - k, 1, ax)], ax)
    return a


# ----------------------------------------------------------------------------
# take and take_along_axis

def _mod_index(idx, n, itype):
    """idx mod n, in [0, n), as the integer dtype itype (which holds n); an index
    too wide for itype is reduced before it is narrowed, never wrapped."""
    if not np.can_cast(idx.dtype, itype, "safe"):
        idx = lax.rem(idx, Array(np.asarray(n, idx.dtype), False))    # |r| < n
    idx = lax.convert_element_type(idx, itype) if idx.dtype != itype else idx
    r = lax.rem(idx, Array(np.asarray(n, itype), False))
    return lax.select_n(lax.lt(r, 0), r, lax.add(r, Array(np.asarray(n, itype), False)))


def _normalize_index(name, idx, n, mode):
    """Index array wrapped (negatives), checked (concrete) or clipped/wrapped by mode,
    as int32 (int64 for axes of 2**31 or more)."""
    idx = _value(idx)
    if idx.dtype.kind not in "iu":
        if idx.dtype.kind == "b":
            raise FgradTypeError(f"{name}: indices must be integers, got booleans")
        raise FgradTypeError(f"{name}: indices must be integers, got {idx.dtype}")
    itype = index_dtype(n)
    if mode == "clip":
        return lax.min(lax.max(narrow_index(idx, itype, 0, max(n - 1, 0)), 0),
                       max(n - 1, 0))
    if mode == "wrap":
        if n == 0:
            raise IndexError(f"{name}: cannot wrap indices into an empty axis")
        return _mod_index(idx, n, itype)
    if not isinstance(idx, Tracer):
        v = np.asarray(idx._value)
        if v.size and (v.min() < -n or v.max() >= n):
            bad = v[(v < -n) | (v >= n)].ravel()[0]
            raise IndexError(f"{name}: index {bad} is out of bounds for axis with size {n}")
        v = v.astype(itype)                        # in bounds: exact
        return Array(np.where(v < 0, v + itype.type(n), v), False)
    idx = narrow_index(idx, itype, -n - 1, n)   # out of bounds stays out of bounds
    return lax.select_n(lax.lt(idx, 0), idx, lax.add(idx, n))


def take(a, indices, axis=None, out=None, mode=None, unique_indices=False,
         indices_are_sorted=False, fill_value=None):
    """Elements of `a` at `indices` along `axis` (the flattened array for None).
    Concrete out-of-range indices raise IndexError (mode None/'raise'); traced ones
    are clamped. mode 'clip' and 'wrap' work as in NumPy; 'fill' reads fill_value
    there (as `x.at[i].get(mode='fill')`)."""
    a = _value(a)
    if axis is None:
        a = lax.reshape(a, (a.size,))
        axis = 0
    ax = canonicalize_axis("take", axis, a.ndim, a.shape)
    if mode not in (None, "raise", "clip", "wrap", "fill"):
        raise ValueError(f"take: unknown mode {mode!r}")
    n = a.shape[ax]
    inside, indices = _fill_inside(indices, n, mode)
    idx = _normalize_index("take", indices, n, mode)
    if n == 0 and idx.size:
        raise IndexError("take: cannot take from an empty axis")
    out = lax.gather(a, (idx,), (ax,))
    k = idx.ndim
    if inside is not None:
        out = _fill_outside(a, out, lax.reshape(inside, tuple(inside.shape) + (1,) * (out.ndim - k)),
                            fill_value)
    if ax:
        perm = list(range(k, k + ax)) + list(range(k)) + list(range(k + ax, out.ndim))
        out = lax.transpose(out, perm)
    return out


def take_along_axis(arr, indices, axis, mode=None, fill_value=None):
    """arr[..., indices, ...] along `axis`, with `indices` of arr's rank (broadcast
    over the other axes), as numpy.take_along_axis."""
    a = _value(arr)
    idx = _value(indices)
    if axis is None:
        a = lax.reshape(a, (a.size,))
        idx = lax.reshape(idx, (idx.size,))
        axis = 0
    if idx.ndim != a.ndim:
        raise FgradTypeError(f"take_along_axis: indices of shape {tuple(idx.shape)} and "
                             f"array of shape {tuple(a.shape)} must have the same number "
                             f"of dimensions")
    ax = canonicalize_axis("take_along_axis", axis, a.ndim, a.shape)
    try:
        bshape = list(broadcast_shape(
            tuple(s for i, s in enumerate(a.shape) if i != ax),
            tuple(s for i, s in enumerate(idx.shape) if i != ax)))
    except ValueError:
        raise FgradTypeError(f"take_along_axis: indices of shape {tuple(idx.shape)} do not "
                             f"broadcast against the array's shape {tuple(a.shape)} "
                             f"outside axis {ax}") from None
    bshape.insert(ax, idx.shape[ax])
    bshape = tuple(bshape)
    inside, idx = _fill_inside(idx, a.shape[ax], mode)
    idx = _normalize_index("take_along_axis", idx, a.shape[ax], mode)
    idx = broadcast_to(idx, bshape)
    itype = idx.dtype
    index_arrays = []
    for d in range(a.ndim):
        if d == ax:
            index_arrays.append(idx)
        elif a.shape[d] == 1:
            index_arrays.append(Array(np.zeros(bshape, itype), False))
        else:
            index_arrays.append(lax.iota(itype, bshape, d))
    out = lax.gather(a, tuple(index_arrays), tuple(range(a.ndim)))
    return out if inside is None else _fill_outside(a, out, inside, fill_value)


def _fill_inside(indices, n, mode):
    """For mode 'fill': (which indices lie in [-n, n), the indices with the others
    replaced by 0); else (None, indices)."""
    if mode != "fill":
        return None, indices
    idx = _value(indices)
    if idx.dtype.kind not in "iu":
        return None, idx        # _normalize_index names the error
    info, dt = np.iinfo(idx.dtype), idx.dtype
    inside = Array(np.ones(tuple(idx.shape), bool), False)
    if info.min < -n:
        inside = lax.ge(idx, Array(np.asarray(-n, dt), False))
    if n <= info.max:
        inside = lax.bitwise_and(inside, lax.lt(idx, Array(np.asarray(n, dt), False)))
    return inside, lax.select_n(inside, Array(np.zeros(tuple(idx.shape), dt), False), idx)


def _fill_outside(a, out, inside, fill_value):
    """out where inside (broadcast), fill_value (default as `at[].get`'s) elsewhere."""
    from .indexing import default_fill
    fill = default_fill(a.dtype) if fill_value is None else fill_value
    fill = lax.convert_element_type(_value(fill), a.dtype)
    return lax.select_n(lax.broadcast_to(inside, tuple(out.shape)),
                        lax.broadcast_to(fill, tuple(out.shape)), out)


# ----------------------------------------------------------------------------
# Differences and selection helpers

def diff(a, n=1, axis=-1, prepend=None, append=None):
    a = _value(a)
    ax = canonicalize_axis("diff", axis, a.ndim, a.shape)
    parts = []
    for extra in (prepend, append):
        if extra is None:
            parts.append(None)
            continue
        e = _value(extra)
        if e.ndim == 0:
            shp = list(a.shape)
            shp[ax] = 1
            e = broadcast_to(e, shp)
        parts.append(e)
    if parts[0] is not None or parts[1] is not None:
        a = concatenate([p for p in (parts[0], a, parts[1]) if p is not None], ax)
    from .ufuncs import not_equal, subtract
    for _ in range(static_int("diff", "n", n)):
        m = a.shape[ax]
        if m == 0:
            break
        hi = lax.slice_in_dim(a, 1, m, 1, ax)
        lo = lax.slice_in_dim(a, 0, m - 1, 1, ax)
        a = not_equal(hi, lo) if a.dtype.kind == "b" else subtract(hi, lo)
    return a


def select(condlist, choicelist, default=0):
    """choicelist[i] where condlist[i] holds first, else default."""
    from .ufuncs import where
    if len(condlist) != len(choicelist):
        raise ValueError("select: list of cases must be same length as list of conditions")
    out = default
    for c, v in zip(condlist[::-1], choicelist[::-1]):
        out = where(c, v, out)
    return _value(out)
