"""Unique values and set operations: unique (and the Array API's unique_all,
unique_counts, unique_inverse, unique_values), union1d, intersect1d,
setdiff1d, setxor1d, isin.

How many distinct values there are depends on the data, so under jit (or vmap)
these functions need `size=`: the result then has exactly `size` entries, the
missing ones filled with `fill_value` (default: the smallest value found), as in
JAX. Eagerly, without size=, the size is read from the values. Results are
gathers of the input, so they differentiate with respect to it. unique also
takes axis= (distinct slices); the set operations work on flattened arrays.
"""
from typing import NamedTuple

import numpy as np

from .. import dtypes
from ..core import Array, Tracer
from ..errors import ConcretizationError, FgradTypeError
from . import reductions, ufuncs
from .concrete import concrete_value
from .creation import zeros
from .editing import lexsort
from .shape import concatenate, moveaxis
from .sorting import argsort
from .util import asarray, canonicalize_axis


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


def _iota(n):
    return Array(np.arange(n, dtype=np.int32), False)


def _size(name, count, size, traced_what):
    """The static result length: `size`, or the concrete number of distinct values."""
    if size is not None:
        size = int(size)
        if size < 0:
            raise ValueError(f"{name}: size must be non-negative, got {size}")
        return size
    value = concrete_value(count)
    if value is None:
        raise ConcretizationError(
            f"{name} of a traced value ({traced_what}) needs `size=`: the number of "
            f"distinct values is not known while tracing.\n  hint: pass size=N (and "
            f"optionally fill_value=) to get exactly N entries")
    return int(value)


def _unique_sorted(name, flat, size, fill_value, equal_nan=True, valid=None):
    """The distinct values of the 1-d `flat` (those where `valid`), or the distinct
    rows of the 2-d `flat` (in lexicographic order), sorted, padded to `size`; also the
    permutation, group of each sorted element, first positions and validity masks
    that the other results are read from."""
    n = flat.shape[0]
    if flat.ndim == 1:
        perm = argsort(flat)
    else:   # rows: the first column is the primary key
        perm = lexsort([flat[:, j] for j in reversed(range(flat.shape[1]))]) \
            if flat.shape[1] else _iota(n)
    if valid is not None:          # chosen elements first, each part still sorted
        perm = perm[argsort(ufuncs.logical_not(valid)[perm].astype(dtypes.int32))]
    s = flat[perm]
    chosen = None if valid is None else valid[perm]
    if n:
        differs = s[1:] != s[:-1]
        if equal_nan and s.dtype.kind == "f":
            both_nan = ufuncs.logical_and(ufuncs.isnan(s[1:]), ufuncs.isnan(s[:-1]))
            differs = ufuncs.logical_and(differs, ufuncs.logical_not(both_nan))
        if flat.ndim == 2:
            differs = reductions.any(differs, axis=1)
        is_new = concatenate([Array(np.ones(1, bool), False), differs])
    else:
        is_new = Array(np.zeros(0, bool), False)
    if chosen is not None:
        is_new = ufuncs.logical_and(is_new, chosen)
    group = reductions.cumsum(is_new.astype(dtypes.int32)) - 1
    count = reductions.sum(is_new.astype(dtypes.int32))
    traced = flat.aval.str_short() if isinstance(flat, Tracer) else ""
    size = _size(name, count, size, traced)
    first = zeros(size + 1, dtypes.int32).at[ufuncs.where(is_new, group, size)].set(_iota(n))
    first = first[:size]
    present = _iota(size) < count
    values = s[first] if n else zeros((size,) + tuple(flat.shape[1:]), flat.dtype)
    fill = values[0] if fill_value is None and n else (0 if fill_value is None else fill_value)
    mask = present if flat.ndim == 1 else present[:, None]
    values = ufuncs.where(mask, values, asarray(fill).astype(flat.dtype))
    return values, dict(perm=perm, group=group, first=first, present=present, n=n,
                        size=size, chosen=chosen)


def _keys(ar, axis):
    """ar flattened (axis None), or its slices along axis as the rows of a 2-d array."""
    ar = asarray(ar)
    if axis is None:
        return ar, ar.ravel()
    if ar.ndim == 0:
        raise FgradTypeError(f"unique: axis {axis} is out of bounds for a 0-d array")
    axis = canonicalize_axis("unique", axis, ar.ndim, ar.shape)
    moved = moveaxis(ar, axis, 0)
    return moved, moved.reshape((moved.shape[0], -1)) if ar.ndim > 1 else moved


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None,
           *, equal_nan=True, sorted=True, size=None, fill_value=None):
    """The sorted distinct values of `ar` (flattened; with axis, the distinct slices
    along that axis, in lexicographic order); with return_index / return_inverse /
    return_counts also the first positions, the positions of each element among the
    distinct values (shaped like `ar` for axis=None) and the counts. size= (needed
    under jit) pads with fill_value; padded counts are 0 and padded indices 0."""
    moved, flat = _keys(ar, axis)
    values, info = _unique_sorted("unique", flat, size, fill_value, equal_nan)
    if axis is not None:
        values = moveaxis(values.reshape((info["size"],) + tuple(moved.shape[1:])), 0,
                          canonicalize_axis("unique", axis, asarray(ar).ndim))
    out = [values]
    if return_index:
        out.append(ufuncs.where(info["present"], info["perm"][info["first"]], 0)
                   if info["n"] else zeros(info["size"], dtypes.int32))
    if return_inverse:
        inverse = zeros(info["n"], dtypes.int32).at[info["perm"]].set(info["group"])
        out.append(inverse.reshape(moved.shape) if axis is None else inverse)
    if return_counts:
        counts = zeros(info["size"] + 1, dtypes.int32).at[info["group"]].add(1)
        out.append(counts[:info["size"]])
    return out[0] if len(out) == 1 else tuple(out)


def unique_values(x, *, size=None, fill_value=None):
    return unique(x, size=size, fill_value=fill_value)


def unique_counts(x, *, size=None, fill_value=None):
    return UniqueCountsResult(*unique(x, return_counts=True, size=size,
                                      fill_value=fill_value))


def unique_inverse(x, *, size=None, fill_value=None):
    return UniqueInverseResult(*unique(x, return_inverse=True, size=size,
                                       fill_value=fill_value))


def unique_all(x, *, size=None, fill_value=None):
    return UniqueAllResult(*unique(x, return_index=True, return_inverse=True,
                                   return_counts=True, size=size, fill_value=fill_value))


def isin(element, test_elements, assume_unique=False, invert=False, *, kind=None):
    """element (any shape) is equal to some value of test_elements (NaN never is)."""
    element, tests = asarray(element), asarray(test_elements).ravel()
    found = reductions.any(element[..., None] == tests, axis=-1)
    return ufuncs.logical_not(found) if invert else found


def union1d(ar1, ar2, *, size=None, fill_value=None):
    """The sorted distinct values found in either array."""
    joined = concatenate([asarray(ar1).ravel(), asarray(ar2).ravel()])
    return _unique_sorted("union1d", joined, size, fill_value)[0]


def intersect1d(ar1, ar2, assume_unique=False, return_indices=False, *, size=None,
                fill_value=None):
    """The sorted distinct values found in both arrays; return_indices also gives
    each value's first position in ar1 and in ar2 (padded entries: 0)."""
    a1, a2 = asarray(ar1).ravel(), asarray(ar2).ravel()
    values, info = _unique_sorted("intersect1d", a1, size, fill_value, valid=isin(a1, a2))
    if not return_indices:
        return values
    present = info["present"]

    def first_position(a):
        at = reductions.argmax(a[None, :] == values[:, None], axis=1).astype(dtypes.int32)
        return ufuncs.where(present, at, 0)
    return values, first_position(a1), first_position(a2)


def setdiff1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """The sorted distinct values of ar1 that are not in ar2."""
    a1 = asarray(ar1).ravel()
    return _unique_sorted("setdiff1d", a1, size, fill_value,
                          valid=isin(a1, ar2, invert=True))[0]


def setxor1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """The sorted distinct values found in exactly one of the arrays."""
    a1, a2 = asarray(ar1).ravel(), asarray(ar2).ravel()
    joined = concatenate([a1, a2])
    once = ufuncs.logical_xor(isin(joined, a1), isin(joined, a2))
    return _unique_sorted("setxor1d", joined, size, fill_value, valid=once)[0]
