"""Order statistics and moments: quantile, percentile, median and their
nan-variants, nanvar/nanstd, nanargmax/nanargmin, nancumsum/nancumprod, cov and
corrcoef.

Quantiles sort along the reduced axes and read the sorted values at positions
computed from q, so they differentiate with respect to `a` (sort permutes the
tangents) and to `q` (through the interpolation weight), batch and compile;
q may be traced. NaN handling: the plain functions give NaN for a slice with a
NaN, as NumPy does; the nan-variants skip NaNs and give NaN for an all-NaN
slice (NumPy also warns; nanargmax/nanargmin give -1 there, as JAX's do, since a
compiled program cannot raise).
"""
import numpy as np

from .. import dtypes, lax
from ..core import Array, Tracer
from ..errors import FgradTypeError
from . import reductions, ufuncs
from .linalg import diagonal
from .shape import concatenate, moveaxis, reshape, take_along_axis
from .sorting import sort
from .util import asarray, canonicalize_axis, is_py_scalar, promote_inexact, to_inexact

# Continuous methods: the sorted sample k (0-based) sits at probability
# (k + 1 - alpha) / (n + 1 - alpha - beta) (Hyndman & Fan's family).
_ALPHA_BETA = {"linear": (1.0, 1.0), "hazen": (0.5, 0.5), "weibull": (0.0, 0.0),
               "median_unbiased": (1 / 3, 1 / 3), "normal_unbiased": (3 / 8, 3 / 8),
               "interpolated_inverted_cdf": (0.0, 1.0)}
_DISCRETE = ("lower", "higher", "nearest", "midpoint")
_METHODS = tuple(_ALPHA_BETA) + _DISCRETE


def _reduced_last(name, a, axis):
    """(array with the reduced axes merged into one last axis, kept shape for
    keepdims, number of reduced elements)."""
    if axis is None:
        axes = tuple(range(a.ndim))
    else:
        axes = tuple(sorted({canonicalize_axis(name, ax, a.ndim, a.shape)
                             for ax in ((axis,) if np.ndim(axis) == 0 else axis)}))
    rest = [d for d in range(a.ndim) if d not in axes]
    moved = lax.transpose(a, rest + list(axes)) if a.ndim else a
    n = int(np.prod([a.shape[d] for d in axes], dtype=np.int64))
    batch = [a.shape[d] for d in rest]
    kept = [1 if d in axes else a.shape[d] for d in range(a.ndim)]
    return reshape(moved, batch + [n]), kept, n


def _check_q(name, q, percent):
    """A concrete q out of range is an error, as in NumPy (a traced one gives a
    clipped position). Python floats stay Python floats until promotion, so they
    keep their precision in float64 computations."""
    if isinstance(q, Tracer):
        return q
    values = np.asarray(q._value if type(q) is Array else q, np.float64)
    top = 100 if percent else 1
    if np.any((values < 0) | (values > top)):
        raise ValueError(f"{name}: q must lie in [0, {top}], got {values.tolist()}")
    return q


def _quantile(name, a, q, axis, method, keepdims, skip_nans, percent=False):
    if method not in _METHODS:
        raise FgradTypeError(f"{name}: method {method!r} is not supported",
                             hint=f"use one of {', '.join(_METHODS)} (the discontinuous "
                                  f"inverted_cdf, averaged_inverted_cdf and "
                                  f"closest_observation methods are not implemented)")
    q = _check_q(name, q, percent)
    a = to_inexact(asarray(a))
    if isinstance(q, (list, tuple)):    # a list of Python floats: in a's precision
        q = asarray(q, a.dtype)
    a, q = promote_inexact(a, q if is_py_scalar(q) else asarray(q))
    if percent:
        q = ufuncs.true_divide(q, 100.0)
    flat, kept, n = _reduced_last(name, a, axis)
    if n == 0:
        raise ValueError(f"{name}: cannot take a quantile over an empty axis "
                         f"(shape {tuple(a.shape)})")
    s = sort(flat, axis=-1)                         # NaNs sort last
    batch = tuple(flat.shape[:-1])
    qs = reshape(q, (1,) * len(batch) + (q.size,))  # (1.., Q)
    if skip_nans:
        count = reductions.sum(ufuncs.logical_not(ufuncs.isnan(flat)), axis=-1,
                               keepdims=True, dtype=a.dtype)  # (B.., 1)
    else:
        count = asarray(np.asarray(n, a.dtype))
    out = _at_positions(s, qs, count, method)       # (B.., Q)
    if skip_nans:
        out = ufuncs.where(count == 0, np.nan, out)
    else:
        out = ufuncs.where(ufuncs.isnan(s[..., -1:]), np.nan, out)
    out = moveaxis(out, -1, 0)                      # (Q, B..)
    shape = tuple(q.shape) + (tuple(kept) if keepdims else batch)
    return reshape(out, shape)


def _at_positions(s, q, count, method):
    """Values of the sorted rows s (B.., n) at probabilities q (1.., Q), for rows with
    `count` leading non-NaN values (broadcastable to (B.., 1))."""
    last = count - 1
    if method in _ALPHA_BETA and method != "linear":   # linear: q·(n-1), as NumPy
        alpha, beta = _ALPHA_BETA[method]
        pos = count * q + alpha + q * (1 - alpha - beta) - 1
    else:
        pos = q * last
    pos = ufuncs.clip(pos, 0, ufuncs.maximum(last, 0))
    below = lax.stop_gradient(ufuncs.floor(pos))
    above = lax.stop_gradient(ufuncs.ceil(pos))
    if method == "nearest":
        below = above = lax.stop_gradient(ufuncs.rint(pos))   # halves to even, as NumPy

    def take(index):
        index = ufuncs.minimum(index, ufuncs.maximum(last, 0)).astype(dtypes.int32)
        index = index + np.zeros(tuple(s.shape[:-1]) + (1,), np.int32)
        return take_along_axis(s, index, axis=-1)

    lo, hi = take(below), take(above)
    if method in ("lower", "nearest"):
        return lo
    if method == "higher":
        return hi
    if method == "midpoint":
        t = ufuncs.where(above == below, 0.0, 0.5)
    else:
        t = pos - below
    # NumPy's lerp: from the nearer end, so t = 0 and t = 1 give lo and hi exactly.
    # Between two values an infinite one wins (lo + hi: NaN for -inf and inf): the
    # lerp alone gives NaN (inf - inf, inf·0), as NumPy's quantile does, though not
    # its median, for [-inf, -inf, 1] or [3, inf]
    diff = hi - lo
    mixed = ufuncs.where(t >= 0.5, hi - diff * (1 - t), lo + diff * t)
    mixed = ufuncs.where(ufuncs.isinf(lo) | ufuncs.isinf(hi), lo + hi, mixed)
    return ufuncs.where(t == 0, lo, ufuncs.where(t == 1, hi, mixed))


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False, *, weights=None, interpolation=None):
    """The q-th quantiles (q in [0, 1], scalar or array: its shape leads the result's)
    of `a` along `axis`, by NumPy's `method`s."""
    _unsupported("quantile", out, weights)
    return _quantile("quantile", a, q, axis, interpolation or method, keepdims, False)


def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False, *, weights=None, interpolation=None):
    """quantile with q in percent."""
    _unsupported("percentile", out, weights)
    return _quantile("percentile", a, q, axis, interpolation or method, keepdims, False,
                     percent=True)


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """The middle value (mean of the two middle ones for an even count)."""
    _unsupported("median", out, None)
    return _quantile("median", a, 0.5, axis, "midpoint", keepdims, False)


def nanquantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                keepdims=False, *, weights=None, interpolation=None):
    """quantile ignoring NaNs (NaN for an all-NaN slice)."""
    _unsupported("nanquantile", out, weights)
    return _quantile("nanquantile", a, q, axis, interpolation or method, keepdims, True)


def nanpercentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                  keepdims=False, *, weights=None, interpolation=None):
    """percentile ignoring NaNs."""
    _unsupported("nanpercentile", out, weights)
    return _quantile("nanpercentile", a, q, axis, interpolation or method, keepdims, True,
                     percent=True)


def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """median ignoring NaNs."""
    _unsupported("nanmedian", out, None)
    return _quantile("nanmedian", a, 0.5, axis, "midpoint", keepdims, True)


def _unsupported(name, out, weights):
    if out is not None:
        raise FgradTypeError(f"{name}: out= is not supported (fgrad arrays are immutable)",
                             hint="use the returned array")
    if weights is not None:
        raise FgradTypeError(f"{name}: weights= is not supported",
                             hint="NumPy allows it only for method='inverted_cdf', which "
                                  "fgrad does not implement")


# ----------------------------------------------------------------------------
# nan-variants of moments, arg-reductions and cumulative reductions

def _not_nan(a):
    return ufuncs.logical_not(ufuncs.isnan(a))


def _nan_free(a):
    """a with NaNs replaced by 0 through a select, so they get zero derivatives."""
    return ufuncs.where(ufuncs.isnan(a), 0, a) if a.dtype.kind == "f" else a


def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
           mean=None, correction=None):
    """var over the non-NaN values."""
    a = asarray(a)
    keep = _not_nan(a) if where is None else ufuncs.logical_and(_not_nan(a), where)
    _unsupported("nanvar", out, None)
    result = reductions.var(_nan_free(a), axis, dtype, ddof=ddof, keepdims=keepdims,
                            where=keep, mean=mean, correction=correction)
    dof = reductions.sum(keep, axis, keepdims=keepdims) - (ddof if correction is None
                                                           else correction)
    return ufuncs.where(dof <= 0, np.nan, result)   # too few values: NaN, as NumPy


def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
           mean=None, correction=None):
    """std over the non-NaN values."""
    return ufuncs.sqrt(nanvar(a, axis, dtype, out, ddof, keepdims, where=where, mean=mean,
                              correction=correction))


def _nan_arg(fn, fill, a, axis, keepdims):
    a = asarray(a)
    if a.dtype.kind != "f":
        return fn(a, axis, keepdims=keepdims)
    index = fn(ufuncs.where(ufuncs.isnan(a), fill, a), axis, keepdims=keepdims)
    all_nan = reductions.all(ufuncs.isnan(a), axis, keepdims=keepdims)
    return ufuncs.where(all_nan, -1, index)


def nanargmax(a, axis=None, out=None, *, keepdims=False):
    """argmax ignoring NaNs; -1 for an all-NaN slice (NumPy raises there)."""
    return _nan_arg(reductions.argmax, -np.inf, a, axis, keepdims)


def nanargmin(a, axis=None, out=None, *, keepdims=False):
    """argmin ignoring NaNs; -1 for an all-NaN slice (NumPy raises there)."""
    return _nan_arg(reductions.argmin, np.inf, a, axis, keepdims)


def nancumsum(a, axis=None, dtype=None, out=None):
    """cumsum with NaNs counted as 0."""
    a = asarray(a)
    return reductions.cumsum(_nan_free(a), axis, dtype)


def nancumprod(a, axis=None, dtype=None, out=None):
    """cumprod with NaNs counted as 1."""
    a = asarray(a)
    if a.dtype.kind == "f":
        a = ufuncs.where(ufuncs.isnan(a), 1, a)
    return reductions.cumprod(a, axis, dtype)


# ----------------------------------------------------------------------------
# Covariance and correlation

def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *,
        dtype=None):
    """The covariance matrix of the variables in the rows of m (columns when
    rowvar=False), with NumPy's frequency and analytic weights."""
    m = to_inexact(asarray(m))
    if m.ndim > 2:
        raise FgradTypeError(f"cov: m must have at most 2 dimensions, got shape "
                             f"{tuple(m.shape)}")
    x = m.reshape(1, -1) if m.ndim < 2 else m
    if not rowvar and x.shape[0] != 1:
        x = x.T
    if y is not None:
        y = to_inexact(asarray(y))
        y = y.reshape(1, -1) if y.ndim < 2 else y
        if not rowvar and y.shape[0] != 1:
            y = y.T
        x = concatenate([x, y], axis=0)
    if dtype is not None:
        x = x.astype(dtype)
    if ddof is None:
        ddof = 0 if bias else 1
    w = None
    if fweights is not None:
        w = asarray(fweights).astype(x.dtype)
    if aweights is not None:
        aw = asarray(aweights).astype(x.dtype)
        w = aw if w is None else w * aw
    if w is None:
        avg = reductions.mean(x, axis=1)
        norm = x.shape[1] - ddof
        xc = x - avg[:, None]
        c = xc @ xc.T / norm
    else:
        w_sum = reductions.sum(w)
        avg = reductions.sum(x * w, axis=1) / w_sum
        if ddof == 0:
            norm = w_sum
        elif aweights is None:
            norm = w_sum - ddof
        else:
            norm = w_sum - ddof * reductions.sum(w * aw) / w_sum
        xc = x - avg[:, None]
        c = (xc * w) @ xc.T / norm
    return c.reshape(()) if c.shape == (1, 1) else c     # NumPy squeezes one variable


def corrcoef(x, y=None, rowvar=True, *, dtype=None):
    """Pearson correlation coefficients: cov normalised by the standard deviations,
    clipped to [-1, 1]."""
    c = cov(x, y, rowvar, dtype=dtype)
    if c.ndim == 0:
        return c / c
    d = ufuncs.sqrt(diagonal(c))
    c = c / d[:, None] / d[None, :]
    return ufuncs.clip(c, -1, 1)
