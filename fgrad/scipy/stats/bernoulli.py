"""The Bernoulli distribution: k - loc is 1 with probability p and 0 otherwise.

A pmf at any other k (non-integers included) is 0 and its log -inf; p outside
[0, 1] gives NaN. Derivatives are with respect to p (k is a count); at p = 0 or 1
the log-probability of the impossible outcome is -inf, with an infinite slope.
"""
import fgrad.numpy as _fnp

from ._util import guard as _guard
from ._util import nan_unless as _nan_unless
from ._util import promote as _promote


def logpmf(k, p, loc=0):
    k, p, loc = _promote(k, p, loc)
    k = k - loc
    one, zero = k == 1, k == 0
    out = _fnp.where(one, _fnp.log(_guard(one, p, 0.5)),
                     _fnp.where(zero, _fnp.log1p(-_guard(zero, p, 0.5)), -_fnp.inf))
    return _nan_unless((p >= 0) & (p <= 1), out, k)


def pmf(k, p, loc=0):
    return _fnp.exp(logpmf(k, p, loc))


def cdf(k, p, loc=0):
    k, p, loc = _promote(k, p, loc)
    k = k - loc
    out = _fnp.where(k < 0, 0.0, _fnp.where(k < 1, 1 - p, 1.0))
    return _nan_unless((p >= 0) & (p <= 1), out, k)


def logcdf(k, p, loc=0):
    k, p, loc = _promote(k, p, loc)
    k = k - loc
    at_zero = (k >= 0) & (k < 1)
    out = _fnp.where(at_zero, _fnp.log1p(-_guard(at_zero, p, 0.5)),
                     _fnp.where(k < 0, -_fnp.inf, 0.0))
    return _nan_unless((p >= 0) & (p <= 1), out, k)


def sf(k, p, loc=0):
    k, p, loc = _promote(k, p, loc)
    k = k - loc
    out = _fnp.where(k < 0, 1.0, _fnp.where(k < 1, p, 0.0))
    return _nan_unless((p >= 0) & (p <= 1), out, k)


def logsf(k, p, loc=0):
    k, p, loc = _promote(k, p, loc)
    k = k - loc
    at_zero = (k >= 0) & (k < 1)
    out = _fnp.where(at_zero, _fnp.log(_guard(at_zero, p, 0.5)),
                     _fnp.where(k < 0, 0.0, -_fnp.inf))
    return _nan_unless((p >= 0) & (p <= 1), out, k)


def ppf(q, p, loc=0):
    """The smallest k with cdf(k) >= q; at q = 0 loc - 1 and at q = 1 loc + 1
    (SciPy's conventions for the ends of a discrete support)."""
    q, p, loc = _promote(q, p, loc)
    out = _fnp.where(q == 0, -1.0, _fnp.where((q <= 1 - p) & (q < 1), 0.0, 1.0))
    valid = (p >= 0) & (p <= 1) & (q >= 0) & (q <= 1)
    return _nan_unless(valid, out + loc)
