"""Index helpers: r_, c_, s_, index_exp, mgrid, ogrid, diag_indices_from,
tril_indices_from, triu_indices_from, mask_indices, fill_diagonal.

r_ and c_ concatenate fgrad values (traced or not), so they differentiate,
batch and compile; slices in them are static ranges. s_ and index_exp build
plain Python index tuples (NumPy's own objects). mgrid/ogrid are constants.
"""
import numpy as np

from .. import dtypes
from ..core import Array
from ..errors import FgradTypeError
from . import indexing
from .creation import arange, linspace
from .shape import concatenate, transpose
from .util import asarray, is_py_scalar

s_ = np.s_
index_exp = np.index_exp


def _from_numpy(x):
    """A constant Array from a NumPy result, with fgrad's default dtypes (NumPy's
    int64/float64 defaults become int32 / the default float)."""
    x = np.asarray(x)
    if x.dtype == np.int64:
        x = x.astype(dtypes.default_int)
    elif x.dtype == np.float64:
        x = x.astype(dtypes.default_float)
    return Array(x, False)


class _Concatenator:
    """r_[...] / c_[...]: join slices (ranges), scalars and arrays along `axis`,
    first raising them to `ndmin` dimensions (with a 1-d input's axis placed at
    `trans1d`), as NumPy's AxisConcatenator does. A leading string 'axis',
    'axis,ndmin' or 'axis,ndmin,trans1d' changes those for one call."""

    def __init__(self, axis, ndmin, trans1d):
        self.axis, self.ndmin, self.trans1d = axis, ndmin, trans1d

    def __getitem__(self, key):
        items = key if isinstance(key, tuple) else (key,)
        axis, ndmin, trans1d = self.axis, self.ndmin, self.trans1d
        if items and isinstance(items[0], str):
            axis, ndmin, trans1d = self._directive(items[0], ndmin, trans1d)
            items = items[1:]
        parts = [self._raise_to(self._part(item), ndmin, trans1d) for item in items]
        if not parts:
            return Array(np.zeros(0, dtypes.default_float), False)
        return concatenate(parts, axis=axis)

    @staticmethod
    def _directive(text, ndmin, trans1d):
        if text in ("r", "c"):
            raise FgradTypeError(f"the {text!r} directive makes a numpy.matrix, which fgrad "
                                 f"does not have", hint="use '0,2' or '-1,2,0' for 2-d results")
        try:
            values = [int(v) for v in text.split(",")]
        except ValueError:
            raise FgradTypeError(f"unknown concatenation directive {text!r}",
                                 hint="use 'axis', 'axis,ndmin' or 'axis,ndmin,trans1d'") from None
        if not 1 <= len(values) <= 3:
            raise FgradTypeError(f"unknown concatenation directive {text!r}")
        values += [ndmin, trans1d][len(values) - 1:]
        return values[0], values[1], values[2]

    @staticmethod
    def _part(item):
        if isinstance(item, slice):
            start = 0 if item.start is None else item.start
            step = 1 if item.step is None else item.step
            if isinstance(step, complex):
                return linspace(start, item.stop, int(abs(step)))
            return arange(start, item.stop, step)
        if is_py_scalar(item):
            return asarray(item).reshape(1)
        return asarray(item)

    @staticmethod
    def _raise_to(x, ndmin, trans1d):
        if x.ndim >= ndmin:
            return x
        old = x.ndim
        x = x.reshape((1,) * (ndmin - old) + tuple(x.shape))
        if trans1d != -1:
            k2 = ndmin - old
            k1 = trans1d + k2 + 1 if trans1d < 0 else trans1d
            axes = list(range(ndmin))
            x = transpose(x, axes[:k1] + axes[k2:] + axes[k1:k2])
        return x

    def __len__(self):
        return 0


r_ = _Concatenator(0, 1, -1)
c_ = _Concatenator(-1, 2, 0)


class _Grid:
    """mgrid[...] (dense) / ogrid[...] (open): coordinate arrays of static ranges."""

    def __init__(self, sparse):
        self.sparse = sparse

    def __getitem__(self, key):
        grid = (np.ogrid if self.sparse else np.mgrid)[key]
        if isinstance(grid, (list, tuple)):
            return type(grid)(_from_numpy(g) for g in grid)
        return _from_numpy(grid)


mgrid = _Grid(False)
ogrid = _Grid(True)


def _square(name, arr, ndim_min=2):
    arr = asarray(arr)
    if arr.ndim < ndim_min:
        raise FgradTypeError(f"{name}: input must be at least {ndim_min}-d, got shape "
                             f"{tuple(arr.shape)}")
    return arr


def diag_indices_from(arr):
    """diag_indices for arr's size (all of arr's dimensions must be equal)."""
    arr = _square("diag_indices_from", arr)
    if len(set(arr.shape)) != 1:
        raise ValueError(f"diag_indices_from: all dimensions of input must be of equal "
                         f"length, got shape {tuple(arr.shape)}")
    return indexing.diag_indices(arr.shape[0], arr.ndim)


def tril_indices_from(arr, k=0):
    arr = _square("tril_indices_from", arr)
    return indexing.tril_indices(arr.shape[-2], k, arr.shape[-1])


def triu_indices_from(arr, k=0):
    arr = _square("triu_indices_from", arr)
    return indexing.triu_indices(arr.shape[-2], k, arr.shape[-1])


def fill_diagonal(a, val, wrap=False, *, inplace=True):
    """a with its main diagonal set to val (repeated cyclically, as NumPy). fgrad
    arrays are immutable, so pass inplace=False and use the result (as in JAX)."""
    if inplace:
        raise FgradTypeError("fill_diagonal: fgrad arrays are immutable and cannot be "
                             "changed in place", hint="call fill_diagonal(a, val, "
                                                      "inplace=False) and use its result")
    a = _square("fill_diagonal", a)
    if a.ndim > 2 and len(set(a.shape)) != 1:
        raise ValueError("fill_diagonal: all dimensions of input must be of equal length")
    if a.ndim == 2:
        rows, cols = a.shape
        n = min(rows, cols) if not wrap else len(range(0, rows * cols, cols + 1))
        flat = np.arange(n) * (cols + 1)
        index = (flat // cols, flat % cols)
    else:
        index = tuple(np.arange(a.shape[0]) for _ in range(a.ndim))
        n = a.shape[0]
    val = asarray(val).ravel()
    if val.size == 0:
        return a
    reps = -(-n // val.size)
    val = concatenate([val] * reps)[:n] if reps > 1 or val.size != n else val
    return a.at[tuple(Array(i.astype(np.int32), False) for i in index)].set(val)


def mask_indices(n, mask_func, k=0):
    """The indices where mask_func(ones((n, n)), k) is nonzero (e.g. triu, tril)."""
    from .concrete import concrete_value
    mask = concrete_value(asarray(mask_func(Array(np.ones((int(n), int(n)), np.int32),
                                                  False), k)))
    if mask is None:
        raise FgradTypeError("mask_indices: mask_func must give concrete values")
    return tuple(Array(i.astype(np.int32), False) for i in np.nonzero(mask))
