"""Choosing elements: piecewise, choose, partition, argpartition, and writing
them: put, put_along_axis (with inplace=False, as in JAX).

piecewise evaluates every function on the whole input and selects, so it
compiles and batches (NumPy evaluates each function only where its condition
holds). As with `where`, a branch that is not selected but is NaN or infinite
in value or derivative (sqrt of negative numbers, say) can make reverse-mode
gradients NaN: guard such branches' inputs (e.g. sqrt(where(x > 0, x, 1))).
partition and argpartition sort fully: a sorted array is one of the answers
NumPy's contract allows (the k-th element in place, no larger one before it,
no smaller one after), so derivatives permute the tangents as sort's do.
"""
import numpy as np

from ..errors import FgradTypeError
from . import ufuncs
from .concrete import concrete_value
from .creation import zeros_like
from .shape import broadcast_arrays, broadcast_to, stack, take_along_axis
from .sorting import argsort, sort
from .util import asarray, canonicalize_axis


def piecewise(x, condlist, funclist, *args, **kw):
    """funclist[i](x, *args, **kw) where condlist[i] holds (a later condition wins
    where several hold, as in NumPy); an extra last function or value applies where
    none holds (default 0). Entries of funclist may be constants."""
    x = asarray(x)
    if isinstance(condlist, (list, tuple)) and not (
            len(condlist) and np.ndim(condlist[0]) == 0 and x.ndim > 0):
        conds = [asarray(c) for c in condlist]
    else:
        conds = [asarray(condlist)]
    n = len(conds)
    if len(funclist) not in (n, n + 1):
        raise ValueError(f"piecewise: with {n} condition(s), funclist must have {n} or "
                         f"{n + 1} entries, got {len(funclist)}")
    if len(funclist) == n + 1:
        none = ufuncs.logical_not(_any_of(conds))
        conds, funcs = conds + [none], list(funclist)
    else:
        funcs = list(funclist)
    out = zeros_like(x)
    for cond, fn in zip(conds, funcs):
        value = fn(x, *args, **kw) if callable(fn) else fn
        out = ufuncs.where(cond, asarray(value).astype(x.dtype), out)
    return out


def _any_of(conds):
    out = conds[0].astype(bool)
    for c in conds[1:]:
        out = ufuncs.logical_or(out, c)
    return out


def choose(a, choices, out=None, mode="raise"):
    """choices[a[i]][i] for each position i (a and the choices broadcast together).
    mode 'raise' checks the indices when they are concrete (traced indices are
    clipped); 'wrap' takes them modulo len(choices); 'clip' clips them."""
    if out is not None:
        raise FgradTypeError("choose: out= is not supported (fgrad arrays are immutable)")
    if mode not in ("raise", "wrap", "clip"):
        raise ValueError(f"choose: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    a = asarray(a)
    if a.dtype.kind not in "iub":
        raise FgradTypeError(f"choose: a must hold integers, got {a.dtype}")
    n = len(choices)
    known = concrete_value(a)
    if mode == "raise" and known is not None and np.any((known < 0) | (known >= n)):
        raise ValueError("choose: invalid entry in choice array")
    index = ufuncs.mod(a, n) if mode == "wrap" else ufuncs.clip(a, 0, n - 1)
    parts = broadcast_arrays(index, *[asarray(c) for c in choices])
    stacked = stack(parts[1:], axis=0)
    return take_along_axis(stacked, parts[0][None].astype(np.int32), axis=0)[0]


def _check_kth(name, kth, n):
    for k in np.atleast_1d(np.asarray(kth)).tolist():
        if not isinstance(k, int) or not -n <= k < n:
            raise ValueError(f"{name}: kth(={k}) out of bounds ({n})")


def partition(a, kth, axis=-1, kind="introselect", order=None):
    """a rearranged along `axis` so that the kth element is where sorting puts it
    (fgrad sorts fully, which satisfies that)."""
    a = asarray(a)
    if axis is None:
        a, axis = a.ravel(), 0
    axis = canonicalize_axis("partition", axis, a.ndim, a.shape)
    _check_kth("partition", kth, a.shape[axis])
    return sort(a, axis=axis, order=order)


def argpartition(a, kth, axis=-1, kind="introselect", order=None):
    """The indices that partition a (a stable argsort)."""
    a = asarray(a)
    if axis is None:
        a, axis = a.ravel(), 0
    axis = canonicalize_axis("argpartition", axis, a.ndim, a.shape)
    _check_kth("argpartition", kth, a.shape[axis])
    return argsort(a, axis=axis, order=order)


def _not_in_place(name, inplace):
    if inplace:
        raise FgradTypeError(f"{name}: fgrad arrays are immutable and cannot be changed in "
                             f"place", hint=f"call {name}(..., inplace=False) and use its "
                                            f"result")


def put(a, ind, v, mode=None, *, inplace=True):
    """a with the flat positions `ind` set to v (repeated cyclically as NumPy does);
    pass inplace=False and use the result, as in JAX. mode: 'raise' or None (the
    positions must be in range; checked when concrete), 'wrap' or 'clip'."""
    _not_in_place("put", inplace)
    a = asarray(a)
    ind = asarray(ind).ravel()
    n = a.size
    if mode == "wrap":
        ind = ufuncs.mod(ind, n)
    elif mode == "clip":
        ind = ufuncs.clip(ind, 0, n - 1)
    elif mode in (None, "raise"):
        known = concrete_value(ind)
        if known is not None and np.any((known < -n) | (known >= n)):
            raise IndexError(f"put: index out of range for an array of size {n}")
    else:
        raise ValueError(f"put: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    v = asarray(v).ravel().astype(a.dtype)
    if v.size == 0 or ind.size == 0:
        return a
    if v.size != ind.size:
        from .editing import resize
        v = resize(v, ind.size)
    return a.ravel().at[ind].set(v).reshape(a.shape)


def put_along_axis(arr, indices, values, axis, inplace=True, *, mode=None):
    """arr with values written at `indices` along axis (take_along_axis's inverse);
    pass inplace=False and use the result, as in JAX."""
    _not_in_place("put_along_axis", inplace)
    arr, indices = asarray(arr), asarray(indices)
    if axis is None:
        arr, axis = arr.ravel(), 0
    axis = canonicalize_axis("put_along_axis", axis, arr.ndim, arr.shape)
    if indices.ndim != arr.ndim:
        raise ValueError("put_along_axis: indices and arr must have the same number of "
                         "dimensions")
    shape = broadcast_arrays(indices, asarray(values))[0].shape
    index = []
    for d in range(arr.ndim):
        if d == axis:
            index.append(broadcast_to(indices, shape))
        else:
            iota = np.arange(arr.shape[d] if shape[d] != 1 or arr.shape[d] == 1 else 1)
            iota = iota.reshape([-1 if k == d else 1 for k in range(arr.ndim)])
            index.append(broadcast_to(asarray(iota.astype(np.int32)), shape))
    values = broadcast_to(asarray(values).astype(arr.dtype), shape)
    return arr.at[tuple(index)].set(values)
