"""The geometric distribution: the number of Bernoulli(p) trials up to and including
the first success, pmf (1 - p)^(k-1) p on k - loc = 1, 2, ...

Valid for 0 < p <= 1 (NaN otherwise); the pmf at a non-integer or below 1 is 0.
cdf and sf step at the integers (they use floor(k - loc)).
"""
import fgrad.numpy as _fnp

from ._util import guard as _guard
from ._util import is_integral as _is_integral
from ._util import log1mexp as _log1mexp
from ._util import nan_unless as _nan_unless
from ._util import promote as _promote


def _valid(p):
    return (p > 0) & (p <= 1)


def logpmf(k, p, loc=0):
    k, p, loc = _promote(k, p, loc)
    k = k - loc
    first = k == 1
    failures = _fnp.where(first, 0.0, (k - 1) * _fnp.log1p(-_guard(first, 0.5, p)))
    out = _fnp.where((k >= 1) & _is_integral(k), failures + _fnp.log(p), -_fnp.inf)
    return _nan_unless(_valid(p), out, k)


def pmf(k, p, loc=0):
    return _fnp.exp(logpmf(k, p, loc))


def _log_sf(k, p):
    """log P(K > k) for k >= 1: floor(k) failures in a row."""
    return _fnp.floor(k) * _fnp.log1p(-p)


def cdf(k, p, loc=0):
    k, p, loc = _promote(k, p, loc)
    k = k - loc
    out = _fnp.where(k >= 1, -_fnp.expm1(_log_sf(k, p)), 0.0)
    return _nan_unless(_valid(p), out, k)


def logcdf(k, p, loc=0):
    k, p, loc = _promote(k, p, loc)
    k = k - loc
    inside = k >= 1
    out = _fnp.where(inside, _log1mexp(_log_sf(_guard(inside, k, 1.0), p)), -_fnp.inf)
    return _nan_unless(_valid(p), out, k)


def sf(k, p, loc=0):
    return _fnp.exp(logsf(k, p, loc))


def logsf(k, p, loc=0):
    k, p, loc = _promote(k, p, loc)
    k = k - loc
    return _nan_unless(_valid(p), _fnp.where(k >= 1, _log_sf(k, p), 0.0), k)


def ppf(q, p, loc=0):
    """The smallest k with cdf(k) >= q; at q = 0 loc and at q = 1 inf (SciPy's
    ends of the support). For p = 1 and 0 < q < 1 this is 1 (SciPy returns 0,
    which lies outside the support)."""
    q, p, loc = _promote(q, p, loc)
    k = _fnp.ceil(_fnp.log1p(-q) / _fnp.log1p(-p))
    k_before = _fnp.maximum(k - 1, 1.0)
    k = _fnp.where(-_fnp.expm1(_log_sf(k_before, p)) >= q, k_before, _fnp.maximum(k, 1.0))
    out = _fnp.where(q == 0, 0.0, _fnp.where(q == 1, _fnp.inf, k))
    valid = _valid(p) & (q >= 0) & (q <= 1)
    return _nan_unless(valid, out + loc)
