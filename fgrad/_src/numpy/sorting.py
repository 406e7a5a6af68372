"""Sorting and searching: sort, argsort, searchsorted.

Built on `lax.sort`, so they work under grad (sort's derivative permutes the
tangent), vmap and jit. Sorting is always stable and puts NaNs last, as NumPy
does; `descending=True` (JAX's extension) reverses the order, keeping equal
elements in their original order and putting NaNs first.
"""
from .. import dtypes, lax
from ..errors import FgradTypeError
from .util import asarray, canonicalize_axis, promote, static_int


def _prepare(name, a, axis, order):
    """(array, axis) with axis=None meaning the flattened array."""
    if order is not None:
        raise FgradTypeError(f"{name}: order= (sorting structured arrays by field) is not "
                             f"supported",
                             hint="fgrad has no structured dtypes; sort a plain array")
    a = asarray(a)
    if axis is None:
        return lax.reshape(a, (a.size,)), 0
    if not a.shape:
        raise FgradTypeError(f"{name}: cannot sort a 0-d array along axis {axis}",
                             hint="pass axis=None, or reshape the array to 1-d first")
    return a, canonicalize_axis(name, axis, a.ndim, a.shape)


def sort(a, axis=-1, kind=None, order=None, *, stable=True, descending=False):
    """A sorted copy of `a` along `axis` (None: the flattened array). Always stable;
    `kind` is accepted for NumPy compatibility and ignored."""
    a, axis = _prepare("sort", a, axis, order)
    out = lax.sort(a, axis)
    return lax.rev(out, (axis,)) if descending else out


def argsort(a, axis=-1, kind=None, order=None, *, stable=True, descending=False):
    """The indices (int32) that sort `a` along `axis`, with ties in their original
    order (also when `descending`)."""
    a, axis = _prepare("argsort", a, axis, order)
    shape = tuple(a.shape)
    index = lax.iota(dtypes.int32 if shape[axis] < 2 ** 31 else dtypes.int64, shape, axis)
    if descending:
        # reversed input: equal elements keep their original order once reversed back
        a, index = lax.rev(a, (axis,)), lax.rev(index, (axis,))
    _, perm = lax.sort_key_val(a, index, axis)
    return lax.rev(perm, (axis,)) if descending else perm


def _before(x, y):
    """x sorts strictly before y in NumPy's order (NaNs last)."""
    if x.dtype.kind != "f":
        return lax.lt(x, y)
    x_nan, y_nan = lax.ne(x, x), lax.ne(y, y)
    return lax.bitwise_or(lax.lt(x, y), lax.bitwise_and(y_nan, lax.bitwise_not(x_nan)))


def searchsorted(a, v, side="left", sorter=None):
    """Indices (int32) where the elements of `v` would be inserted into the sorted
    1-d array `a` to keep it sorted: the first such place for side='left', the last
    for side='right'. NaNs count as larger than every number, as in NumPy."""
    if side not in ("left", "right"):
        raise FgradTypeError(f"searchsorted: side must be 'left' or 'right', got {side!r}",
                             hint="'left' gives the first insertion point, 'right' the last")
    a = asarray(a)
    if a.ndim != 1:
        raise FgradTypeError(f"searchsorted: a must be 1-d, got shape {tuple(a.shape)}",
                             hint="pass a 1-d sorted array (ravel it first)")
    if sorter is not None:
        a = a[asarray(sorter)]
    a, v = promote(a, v)
    n = static_int("searchsorted", "len(a)", a.shape[0])
    vs = lax.broadcast_in_dim(v, tuple(v.shape) + (n,), tuple(range(v.ndim)))
    av = lax.broadcast_to(a, tuple(v.shape) + (n,))
    # left: how many of a sort before v; right: how many v does not sort before
    hits = _before(av, vs) if side == "left" else lax.bitwise_not(_before(vs, av))
    return lax.reduce_sum(lax.convert_element_type(hits, dtypes.int32), (v.ndim,))
