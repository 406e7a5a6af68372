"""Buffer donation (`jit(..., donate_argnums=...)`).

A donated argument's memory may be reused for an output of the same shape and
dtype, so a training step can update its parameters in place instead of
allocating new ones. The executable decides which outputs may be written into
which donated inputs (see `Executable`); this module holds what happens to the
caller's side: a donated fgrad Array is invalidated after the call (reading it
raises an error that says why), and a donated buffer that is also passed as
another argument is copied first, so nothing the program still reads is
overwritten.
"""
import numpy as np

from ..core import Array


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


def invalidate(leaves, donated, marker):
    """Mark the donated fgrad Arrays among `leaves` as used up (their value becomes
    `marker`, a DonatedBuffer)."""
    for i in donated:
        x = leaves[i]
        if type(x) is Array:
            x._value = marker
