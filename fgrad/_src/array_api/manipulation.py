"""The standard's manipulation, indexing, searching, sorting and linear-algebra
functions: fgrad.numpy's with the standard's signatures (axis keyword-only,
tuples where the standard returns several arrays)."""
from ..numpy import indexing as _ix
from ..numpy import linalg as _linalg
from ..numpy import shape as _s
from ..numpy import sorting as _sort
from ..numpy import util as _util


def broadcast_arrays(*arrays):
    return tuple(_s.broadcast_arrays(*arrays))


def broadcast_to(x, /, shape):
    return _s.broadcast_to(x, shape)


def concat(arrays, /, *, axis=0):
    """Join arrays along an existing axis (axis=None: flattened first)."""
    return _s.concatenate(tuple(arrays), axis=axis)


def expand_dims(x, /, *, axis=0):
    return _s.expand_dims(x, axis)


def flip(x, /, *, axis=None):
    return _s.flip(x, axis)


def moveaxis(x, source, destination, /):
    return _s.moveaxis(x, source, destination)


def permute_dims(x, /, axes):
    return _s.transpose(x, tuple(axes))


def repeat(x, repeats, /, *, axis=None):
    """Repeat elements: `repeats` an int, or an array of counts (eager only, since the
    output's length then depends on the values)."""
    return _s.repeat(x, repeats, axis)


def reshape(x, /, shape, *, copy=None):
    """x with a new shape. fgrad arrays are immutable, so whether the result shares
    memory is not observable: every `copy` is honoured."""
    return _s.reshape(x, tuple(shape))


def roll(x, /, shift, *, axis=None):
    return _s.roll(x, shift, axis)


def squeeze(x, /, axis):
    return _s.squeeze(x, axis)


def stack(arrays, /, *, axis=0):
    return _s.stack(tuple(arrays), axis=axis)


def tile(x, repetitions, /):
    return _s.tile(x, tuple(repetitions))


def unstack(x, /, *, axis=0):
    return tuple(_s.unstack(x, axis=axis))


def take(x, indices, /, *, axis=None):
    """Elements of x at integer `indices` along `axis` (may be None only for 1-D x)."""
    x = _util.asarray(x)
    if axis is None and x.ndim != 1:
        raise ValueError(f"take: axis is required for a {x.ndim}-d array "
                         f"(the standard flattens nothing); pass axis=...")
    return _s.take(x, indices, axis=0 if axis is None else axis)


def argmax(x, /, *, axis=None, keepdims=False):
    from ..numpy.reductions import argmax as _argmax
    return _argmax(x, axis, keepdims=keepdims)


def argmin(x, /, *, axis=None, keepdims=False):
    from ..numpy.reductions import argmin as _argmin
    return _argmin(x, axis, keepdims=keepdims)


def nonzero(x, /):
    """Indices of the nonzero elements, one array per axis (eager only: the count
    depends on the values; traced code uses fgrad.numpy.nonzero(x, size=...))."""
    x = _util.asarray(x)
    if x.ndim == 0:
        raise ValueError("nonzero: the standard does not define it for 0-d arrays; "
                         "use x[None] or a comparison")
    return tuple(_ix.nonzero(x))


def searchsorted(x1, x2, /, *, side="left", sorter=None):
    return _sort.searchsorted(x1, x2, side=side, sorter=sorter)


def argsort(x, /, *, axis=-1, descending=False, stable=True):
    return _sort.argsort(x, axis, stable=stable, descending=descending)


def sort(x, /, *, axis=-1, descending=False, stable=True):
    return _sort.sort(x, axis, stable=stable, descending=descending)


def tensordot(x1, x2, /, *, axes=2):
    return _linalg.tensordot(x1, x2, axes)
