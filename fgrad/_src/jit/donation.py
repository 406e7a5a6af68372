"""Buffer donation (`jit(..., donate_argnums=...)`).

A donated argument's memory may be reused for an output of the same shape and
dtype, so a training step can update its parameters in place instead of
allocating new ones. The executable decides which outputs may be written into
which donated inputs (see `Executable`); this module holds what happens to the
caller's side: a donated fgrad Array is invalidated after the call (reading it
raises an error that says why), and a donated buffer that is also passed as
another argument is copied first, so nothing the program still reads is
overwritten.

A donated Array's memory is reused only if nothing else alive can observe it
(`private_donated`): its NumPy value must be referenced by that Array alone (no
other Array, no view: a NumPy view holds a reference to the array owning its
memory, and no NumPy array of the user's), and own its memory or view memory
that only it refers to (a temporary's, or a buffer of cpu.outputs' pool). Any
other donated Array (a reshape, slice or expand_dims of a live array, the same
buffer under stop_gradient, a view of a jitted call's output) is copied first,
so donation never changes another array. Reference counts make this exact and
cheap; the counts of a sole owner are measured once, on this interpreter. A
donated NumPy array is the caller's own: it is used as it is (its contents are
unspecified afterwards, as `jit` documents).
"""
import sys

import numpy as np

from ..core import Array
from ..cpu import outputs


class DonatedBuffer:
    """Stands in for the value of an Array whose buffer was donated to a call."""
    __slots__ = ("fun_name",)

    def __init__(self, fun_name):
        self.fun_name = fun_name

    def _error(self):
        return RuntimeError(
            f"this Array was donated to the jitted function {self.fun_name!r} "
            f"(donate_argnums) and its memory may hold that call's outputs now; use the "
            f"function's outputs instead, or stop donating this argument")

    def __getattr__(self, name):
        raise self._error()

    def __array__(self, dtype=None, copy=None):
        raise self._error()

    def __repr__(self):
        return f"<donated to {self.fun_name!r}>"


def _root(a):
    """Identity of the buffer that owns `a`'s memory."""
    while isinstance(a, np.ndarray) and a.base is not None:
        a = a.base
    return id(a)


def unshare_donated(raw, donated, const_roots=frozenset()):
    """`raw` with each donated array that shares its root buffer with another
    argument or with a constant of the program (`const_roots`) replaced by a
    private copy (the program may write into it)."""
    if all(type(a) is np.ndarray and a.base is None for a in raw):   # owners only
        ids = [id(a) for a in raw]
        if len(set(ids)) == len(ids) and not const_roots.intersection(ids):
            return raw
    roots = [_root(a) for a in raw]
    out = None
    for i in donated:
        if roots.count(roots[i]) > 1 or roots[i] in const_roots:
            if out is None:
                out = list(raw)
            out[i] = np.array(raw[i])
    return raw if out is None else out


def _base_refs(value):
    return sys.getrefcount(value.base)


def _sole_owner_counts():
    """(references to a donated value, to its base) when one Array and the argument
    list hold the value, and the value's base is referred to by nothing else:
    measured the way private_donated counts, not assumed (they differ between
    Python versions)."""
    value = np.empty(2)[:1]
    x = Array(value)
    del value
    raw = [x._value]
    return sys.getrefcount(raw[0]), _base_refs(raw[0])


_SOLE_VALUE, _SOLE_BASE = _sole_owner_counts()


def _private_view(raw, i):
    """Whether raw[i], held by its Array alone, views memory nothing else refers to
    (a temporary's, or a buffer of cpu.outputs' pool)."""
    refs = _base_refs(raw[i])       # counted before any local name refers to the base
    base = raw[i].base
    return (type(base) is np.ndarray and base.base is None
            and refs == _SOLE_BASE + outputs.kept(base))


def private_donated(raw, leaves, donated):
    """`raw` (the NumPy values of `leaves`) with the value of each donated fgrad
    Array that something else alive may observe replaced by a private copy."""
    getrefcount = sys.getrefcount
    shared = None
    for i in donated:
        held_once = getrefcount(raw[i]) == _SOLE_VALUE
        if held_once and raw[i].base is None:
            continue                 # the common case: a sole owner
        if type(leaves[i]) is Array and type(raw[i]) is np.ndarray \
                and not (held_once and _private_view(raw, i)):
            shared = [i] if shared is None else shared + [i]
    if shared is None:
        return raw
    out = list(raw)          # made after the counts: it refers to every value too
    for i in shared:
        out[i] = np.array(raw[i])
    return out


def invalidate(leaves, donated, marker):
    """Mark the donated fgrad Arrays among `leaves` as used up (their value becomes
    `marker`, a DonatedBuffer)."""
    for i in donated:
        x = leaves[i]
        if type(x) is Array:
            x._value = marker
