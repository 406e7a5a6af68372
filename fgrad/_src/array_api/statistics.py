"""The standard's statistical and utility reductions (axis, dtype, keepdims and
correction keyword-only). Their dtypes follow the standard: sum, prod and
cumulative_sum keep a float's dtype and widen a small integer to the default
integer (int32 here; uint32 for unsigned), as fgrad.numpy already does."""
from ..numpy import reductions as _r


def max(x, /, *, axis=None, keepdims=False):
    return _r.max(x, axis, keepdims=keepdims)


def min(x, /, *, axis=None, keepdims=False):
    return _r.min(x, axis, keepdims=keepdims)


def mean(x, /, *, axis=None, keepdims=False):
    return _r.mean(x, axis, keepdims=keepdims)


def sum(x, /, *, axis=None, dtype=None, keepdims=False):
    return _r.sum(x, axis, dtype, keepdims=keepdims)


def prod(x, /, *, axis=None, dtype=None, keepdims=False):
    return _r.prod(x, axis, dtype, keepdims=keepdims)


def std(x, /, *, axis=None, correction=0.0, keepdims=False):
    """Standard deviation, dividing by N - correction (0: population, 1: sample)."""
    return _r.std(x, axis, keepdims=keepdims, correction=correction)


def var(x, /, *, axis=None, correction=0.0, keepdims=False):
    """Variance, dividing by N - correction (0: population, 1: sample)."""
    return _r.var(x, axis, keepdims=keepdims, correction=correction)


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
    return _r.cumulative_sum(x, axis=axis, dtype=dtype, include_initial=include_initial)


def all(x, /, *, axis=None, keepdims=False):
    return _r.all(x, axis, keepdims=keepdims)


def any(x, /, *, axis=None, keepdims=False):
    return _r.any(x, axis, keepdims=keepdims)
