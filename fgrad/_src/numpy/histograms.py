"""Counting into bins: bincount, digitize, histogram, histogram_bin_edges,
histogram2d, histogramdd.

Counts are scatter-adds into an array of static length, so they compile and
batch, and weighted counts differentiate with respect to the weights. A count's
length must be known while tracing: bincount needs `length=` for traced input
(eagerly it is read from the values), and histograms need an integer number of
bins or explicit edges (string rules such as bins='auto' run on concrete data
only).
"""
import numpy as np

from .. import dtypes
from ..core import Array, Tracer
from ..errors import ConcretizationError, FgradTypeError
from . import reductions, ufuncs
from .concrete import concrete_value
from .creation import linspace, zeros
from .shape import diff, flip, stack
from .sorting import searchsorted
from .util import asarray, static_int, to_inexact


def _weights_dtype(weights):
    return weights.dtype if weights.dtype.kind == "f" else dtypes.default_float


def bincount(x, weights=None, minlength=0, *, length=None):
    """How often each value 0, 1, ..., length-1 occurs in the non-negative ints x
    (or the sum of their weights). `length` (JAX's argument) fixes the result's
    length: values at or past it are dropped; without it the length is
    max(x) + 1 (at least minlength), which needs concrete x."""
    x = asarray(x)
    if x.dtype.kind not in "iub":
        raise FgradTypeError(f"bincount: x must hold integers, got {x.dtype}",
                             hint="convert with x.astype(int)")
    if x.ndim != 1:
        raise ValueError(f"bincount: x must be 1-d, got shape {tuple(x.shape)}")
    minlength = static_int("bincount", "minlength", minlength)
    known = concrete_value(x)
    if known is not None and x.size and int(np.min(known)) < 0:
        raise ValueError("bincount: x must have no negative elements")
    if length is None:
        if known is None:
            raise ConcretizationError(
                f"bincount of a traced value ({x.aval.str_short()}) needs `length=`: the "
                f"result's length (max(x) + 1) is not known while tracing.\n  hint: pass "
                f"length=N (values >= N are dropped)")
        length = max(minlength, int(np.max(known)) + 1 if x.size else 0)
    length = static_int("bincount", "length", length)
    return _scatter_counts(x, weights, length)


def _scatter_counts(index, weights, length):
    """Sums of weights (or counts) per index in [0, length); other indices dropped."""
    index = index.astype(dtypes.int32) if index.dtype != dtypes.int32 else index
    valid = ufuncs.logical_and(index >= 0, index < length)
    target = ufuncs.where(valid, index, length)       # one spare slot for the dropped
    if weights is None:
        values, dtype = Array(np.ones((), dtypes.default_int), False), dtypes.default_int
    else:
        values = asarray(weights)
        if tuple(values.shape) != tuple(index.shape):
            raise ValueError(f"weights should have the same shape as x, got "
                             f"{tuple(values.shape)} and {tuple(index.shape)}")
        dtype = _weights_dtype(values)
        values = values.astype(dtype)
    return zeros(length + 1, dtype).at[target].add(values)[:length]


def digitize(x, bins, right=False):
    """The index of the bin each x falls in, for monotonic `bins` (increasing or
    decreasing), as numpy.digitize: i with bins[i-1] <= x < bins[i] (right=True:
    bins[i-1] < x <= bins[i]) for increasing bins."""
    bins = asarray(bins)
    if bins.ndim != 1:
        raise ValueError(f"digitize: bins must be 1-d, got shape {tuple(bins.shape)}")
    side = "left" if right else "right"
    up = searchsorted(bins, x, side=side)
    if bins.shape[0] < 2:
        return up
    down = bins.shape[0] - searchsorted(flip(bins, 0), x, side=side)
    known = concrete_value(bins)
    if known is not None:
        # neighbours compared, not np.diff: that wraps for unsigned and narrow
        # integers (uint8 [5, 3] looked increasing) and is xor for booleans
        if np.all(known[1:] >= known[:-1]):
            return up
        if np.all(known[1:] <= known[:-1]):
            return down
        raise ValueError("digitize: bins must be monotonically increasing or decreasing")
    return ufuncs.where(bins[-1] >= bins[0], up, down)


def _range_of(name, a, value_range):
    """(first, last) edges: value_range, else a's min and max (widened by 0.5 each
    side when equal, as NumPy)."""
    if value_range is not None:
        first, last = value_range
        lo, hi = concrete_value(asarray(first)), concrete_value(asarray(last))
        if lo is not None and hi is not None and lo > hi:
            raise ValueError(f"{name}: max must be larger than min in range parameter")
        return asarray(first).astype(a.dtype), asarray(last).astype(a.dtype)
    if a.size == 0:
        return asarray(0.0).astype(a.dtype), asarray(1.0).astype(a.dtype)
    first, last = reductions.min(a), reductions.max(a)
    lo, hi = concrete_value(first), concrete_value(last)
    if lo is not None and not np.isfinite(lo + hi):
        raise ValueError(f"{name}: autodetected range of [{lo}, {hi}] is not finite")
    same = first == last
    return ufuncs.where(same, first - 0.5, first), ufuncs.where(same, last + 0.5, last)


def histogram_bin_edges(a, bins=10, range=None, weights=None):
    """The bin edges numpy.histogram would use: bins+1 evenly spaced edges over
    `range` (default: a's min to max), or `bins` itself when it is an array."""
    a = to_inexact(asarray(a)).ravel()
    if isinstance(bins, str):
        known = concrete_value(a)
        if known is None:
            raise ConcretizationError(
                f"histogram bins={bins!r} chooses the number of bins from the values of a "
                f"traced array ({a.aval.str_short()}).\n  hint: pass an integer number "
                f"of bins (and range=) under jit/vmap")
        edges = np.histogram_bin_edges(known, bins, range)  # constants (no derivative)
        return Array(edges.astype(a.dtype), False)
    if np.ndim(bins) == 0 and not isinstance(bins, (Array, Tracer)):
        n = static_int("histogram", "bins", bins)
        if n < 1:
            raise ValueError("histogram: `bins` must be positive, when an integer")
        first, last = _range_of("histogram", a, range)
        return linspace(first, last, n + 1, dtype=a.dtype)
    edges = asarray(bins)
    if edges.ndim != 1:
        raise ValueError("histogram: `bins` must be 1d, when an array")
    known = concrete_value(edges)
    if known is not None and np.any(known[1:] < known[:-1]):     # (not np.diff: it wraps)
        raise ValueError("histogram: `bins` must increase monotonically, when an array")
    return edges


def _bin_index(a, edges):
    """The bin of each value (last bin closed on the right); -1 outside the edges."""
    nbins = edges.shape[0] - 1
    index = searchsorted(edges, a, side="right") - 1
    index = ufuncs.where(a == edges[-1], nbins - 1, index)
    inside = ufuncs.logical_and(a >= edges[0], a <= edges[-1])
    return ufuncs.where(inside, index, -1)


def histogram(a, bins=10, range=None, density=None, weights=None):
    """(counts per bin, bin edges), as numpy.histogram. Weighted counts and
    density=True differentiate with respect to the weights and to a's range."""
    a = to_inexact(asarray(a))
    edges = histogram_bin_edges(a, bins, range)
    flat = a.ravel()
    w = None if weights is None else asarray(weights).ravel()
    hist = _scatter_counts(_bin_index(flat, edges), w, edges.shape[0] - 1)
    if density:
        hist = hist.astype(hist.dtype if hist.dtype.kind == "f" else a.dtype)
        hist = hist / diff(edges).astype(hist.dtype) / reductions.sum(hist)
    return hist, edges


def histogramdd(sample, bins=10, range=None, density=None, weights=None):
    """(counts, list of edges per dimension) for N points in D dimensions
    (sample shape (N, D)); bins and range may be given per dimension."""
    sample = to_inexact(asarray(sample))
    if sample.ndim == 1:
        sample = sample[:, None]
    if sample.ndim != 2:
        raise ValueError(f"histogramdd: sample must be (N, D), got shape "
                         f"{tuple(sample.shape)}")
    n_dims = sample.shape[1]
    per_dim_bins = bins if isinstance(bins, (list, tuple)) else [bins] * n_dims
    ranges = range if range is not None else [None] * n_dims
    if len(per_dim_bins) != n_dims or len(ranges) != n_dims:
        raise ValueError("histogramdd: the dimension of bins/range must equal the dimension "
                         "of the sample x")
    edges = [histogram_bin_edges(sample[:, d], b, r)
             for d, (b, r) in enumerate(zip(per_dim_bins, ranges))]
    sizes = [e.shape[0] - 1 for e in edges]
    flat = None
    outside = None
    for d, e in enumerate(edges):
        i = _bin_index(sample[:, d], e)
        outside = i < 0 if outside is None else ufuncs.logical_or(outside, i < 0)
        flat = i if flat is None else flat * sizes[d] + i
    flat = ufuncs.where(outside, -1, flat)
    w = None if weights is None else asarray(weights)
    total = int(np.prod(sizes))
    hist = _scatter_counts(flat, w, total).reshape(sizes)
    if density:
        hist = hist.astype(hist.dtype if hist.dtype.kind == "f" else sample.dtype)
        hist = hist / reductions.sum(hist)
        for d, e in enumerate(edges):
            shape = [1] * n_dims
            shape[d] = sizes[d]
            hist = hist / diff(e).astype(hist.dtype).reshape(shape)
    return hist, edges


def histogram2d(x, y, bins=10, range=None, density=None, weights=None):
    """(counts, x edges, y edges) for points (x[i], y[i])."""
    if not (isinstance(bins, (list, tuple, np.ndarray)) and len(bins) == 2):
        bins = [bins, bins]     # one spec for both axes (NumPy's rule)
    hist, edges = histogramdd(stack([asarray(x), asarray(y)], axis=1), bins, range,
                              density, weights)
    return hist, edges[0], edges[1]
