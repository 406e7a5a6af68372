"""Helpers shared by the distributions of fgrad.scipy.stats.

SciPy's conventions: a continuous density is evaluated at z = (x - loc) / scale
and divided by scale; a discrete one at k - loc. Outside the support a log-density
is -inf and a density 0; a parameter outside its domain (scale <= 0, p > 1, ...)
gives NaN. Formulas are evaluated only where they are valid (invalid entries get a
harmless stand-in first, then the result is masked), so that neither a value nor a
gradient elsewhere turns into NaN through 0 * inf.
"""
import math

import fgrad.numpy as fnp
from fgrad._src.numpy.util import promote_inexact

LOG_2PI = math.log(2 * math.pi)


def promote(*args):
    """The arguments as arrays of one floating dtype (integers become the default
    float; Python scalars take the dtype of the arrays, as in fgrad.numpy)."""
    return promote_inexact(*args)


def standardize(x, loc, scale):
    """(x, loc, scale) promoted, and z = (x - loc) / scale."""
    x, loc, scale = promote(x, loc, scale)
    return (x - loc) / scale, scale


def nan_unless(valid, value, x=None):
    """value where `valid` holds and x (the point, standardized) is not NaN; NaN
    elsewhere (a NaN point gives NaN even where the support test alone would
    return a constant)."""
    if x is not None:
        valid = valid & ~fnp.isnan(x)
    return fnp.where(valid, value, fnp.nan)


def guard(valid, x, stand_in):
    """x where `valid` holds, else a stand-in at which the formula is finite."""
    return fnp.where(valid, x, stand_in)


def is_integral(k):
    return fnp.floor(k) == k


def log1mexp(a):
    """log(1 - exp(a)) for a <= 0, accurate for all a (Mächler 2012)."""
    near_zero = a > -math.log(2)
    hi = fnp.log(-fnp.expm1(guard(near_zero, a, -1.0)))
    lo = fnp.log1p(-fnp.exp(guard(near_zero, -1.0, a)))
    return fnp.where(near_zero, hi, lo)


def log1p_square(a):
    """log(1 + a^2) without overflowing a^2: 2 log|a| + log1p(a^-2) for |a| > 1."""
    big = fnp.abs(a) > 1
    b = guard(big, fnp.abs(a), 2.0)
    small = guard(big, 0.0, a)
    return fnp.where(big, 2 * fnp.log(b) + fnp.log1p(1 / (b * b)), fnp.log1p(small * small))


def log_cdf_from_tails(lower, upper):
    """log(lower) for a cdf `lower` with complement `upper` (both accurate): where
    lower > 1/2, log1p(-upper) keeps the accuracy that log(1 - tiny) loses."""
    high = lower > 0.5
    return fnp.where(high, fnp.log1p(-guard(high, upper, 0.5)), fnp.log(guard(high, 0.5, lower)))


_BELOW_SUPPORT = {"cdf": 0.0, "logcdf": -fnp.inf, "sf": 1.0, "logsf": 0.0}
_ABOVE_SUPPORT = {"cdf": 1.0, "logcdf": 0.0, "sf": 0.0, "logsf": -fnp.inf}


def discrete_tail(kind, lower, upper, inside, k, valid):
    """cdf, logcdf, sf or logsf (`kind`) of a discrete law from its two tails inside
    the support (lower = P(X <= k), upper = P(X > k)) and its limits outside it
    (below 0 or past the top); NaN for invalid parameters or a NaN point."""
    if kind == "cdf":
        value = lower
    elif kind == "sf":
        value = upper
    elif kind == "logcdf":
        value = log_cdf_from_tails(lower, upper)
    else:
        value = log_cdf_from_tails(upper, lower)
    outside = fnp.where(k < 0, _BELOW_SUPPORT[kind], _ABOVE_SUPPORT[kind])
    return nan_unless(valid, fnp.where(inside, value, outside), k)
