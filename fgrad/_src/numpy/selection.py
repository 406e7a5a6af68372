"""Choosing elements: piecewise, choose, partition, argpartition.

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
from .shape import broadcast_arrays, stack, take_along_axis
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
