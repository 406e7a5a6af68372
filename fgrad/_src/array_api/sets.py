"""The standard's set functions: unique_all, unique_counts, unique_inverse,
unique_values. Their output shapes depend on the values, so they run eagerly, on
the host through NumPy, and refuse traced values with a hint. NaNs are distinct
from each other, as the standard asks."""
from typing import NamedTuple

import numpy as np

from ..core import Array, Tracer
from ..errors import ConcretizationError
from ..numpy import util as _util
from ..numpy.indexing import _index_dtype


class UniqueAllResult(NamedTuple):
    values: object
    indices: object
    inverse_indices: object
    counts: object


class UniqueCountsResult(NamedTuple):
    values: object
    counts: object


class UniqueInverseResult(NamedTuple):
    values: object
    inverse_indices: object


def _unique(name, x):
    x = _util.asarray(x)
    if isinstance(x, Tracer):
        raise ConcretizationError(
            f"{name}: the number of unique values depends on the data, so it cannot be "
            f"computed on a traced value ({x.aval.str_short()}).\n  hint: call it outside "
            f"jit/vmap/grad, or sort and compare neighbours for a fixed-size result")
    host = np.asarray(x)
    values, index, inverse, counts = np.unique(
        host.ravel(), return_index=True, return_inverse=True, return_counts=True,
        equal_nan=False)
    itype = _index_dtype(host.size)
    as_index = (lambda a: Array(np.asarray(a, itype)))
    return (Array(values.astype(host.dtype)), as_index(index),
            as_index(inverse.reshape(host.shape)), as_index(counts))


def unique_all(x, /):
    """Unique values, the first index of each, the inverse (x's shape) and counts."""
    return UniqueAllResult(*_unique("unique_all", x))


def unique_counts(x, /):
    values, _, _, counts = _unique("unique_counts", x)
    return UniqueCountsResult(values, counts)


def unique_inverse(x, /):
    values, _, inverse, _ = _unique("unique_inverse", x)
    return UniqueInverseResult(values, inverse)


def unique_values(x, /):
    return _unique("unique_values", x)[0]
