"""The gamma distribution with shape a: density z^(a-1) e^(-z) / Gamma(a) / scale
for z = (x - loc) / scale >= 0.

Valid for a > 0 and scale > 0 (NaN otherwise). At z = 0 the density is inf for
a < 1, 1/scale for a = 1 and 0 for a > 1, as in SciPy. The cdf and sf are the
regularized incomplete gamma functions, and ppf/isf invert them by root finding.
Derivatives in a of these come from fgrad.scipy.special.gammainc's shape
derivative (a fixed-length series: NaN where it does not converge, for a beyond
about 5000 near x ~ a).
"""
import fgrad.numpy as _fnp
from fgrad.scipy import special as _special

from . import _solve as _solve_
from ._util import guard as _guard
from ._util import log_cdf_from_tails as _log_cdf_from_tails
from ._util import nan_unless as _nan_unless
from ._util import promote as _promote


def _standardize(x, a, loc, scale):
    x, a, loc, scale = _promote(x, a, loc, scale)
    return (x - loc) / scale, a, scale, (a > 0) & (scale > 0)


def logpdf(x, a, loc=0, scale=1):
    z, a, scale, valid = _standardize(x, a, loc, scale)
    inside = z >= 0
    zs = _guard(inside, z, 1.0)
    out = _special.xlogy(a - 1, zs) - zs - _special.gammaln(a) - _fnp.log(scale)
    return _nan_unless(valid, _fnp.where(inside, out, -_fnp.inf), z)


def pdf(x, a, loc=0, scale=1):
    return _fnp.exp(logpdf(x, a, loc, scale))


def cdf(x, a, loc=0, scale=1):
    z, a, scale, valid = _standardize(x, a, loc, scale)
    inside = z > 0
    out = _fnp.where(inside, _special.gammainc(a, _guard(inside, z, 1.0)), 0.0)
    return _nan_unless(valid, out, z)


def _log_tails(z, a):
    zs = _guard(z > 0, z, 1.0)
    lower, upper = _special.gammainc(a, zs), _special.gammaincc(a, zs)
    return _log_cdf_from_tails(lower, upper), _log_cdf_from_tails(upper, lower)


def logcdf(x, a, loc=0, scale=1):
    z, a, scale, valid = _standardize(x, a, loc, scale)
    out = _log_tails(z, a)[0]
    return _nan_unless(valid, _fnp.where(z > 0, out, -_fnp.inf), z)


def sf(x, a, loc=0, scale=1):
    z, a, scale, valid = _standardize(x, a, loc, scale)
    inside = z > 0
    out = _fnp.where(inside, _special.gammaincc(a, _guard(inside, z, 1.0)), 1.0)
    return _nan_unless(valid, out, z)


def logsf(x, a, loc=0, scale=1):
    z, a, scale, valid = _standardize(x, a, loc, scale)
    out = _log_tails(z, a)[1]
    return _nan_unless(valid, _fnp.where(z > 0, out, 0.0), z)


def _standard_pdf(x, a):
    return _fnp.exp(_special.xlogy(a - 1, x) - x - _special.gammaln(a))


def _solve(p_lower, p_upper, a):
    """The standard quantile, found in u = log x (the gamma's tails are power laws
    at 0 and exponential at inf, both tame for Newton in log x)."""
    def h(u):
        x = _fnp.exp(u)
        return _solve_.log_tail_equation(_special.gammainc(a, x), _special.gammaincc(a, x),
                                         _standard_pdf(x, a) * x, p_lower, p_upper)
    return _fnp.exp(_solve_.increasing_root(h, _fnp.log(a)))


_quantile = _solve_.implicit_quantile(_solve, lambda x, a: _special.gammainc(a, x),
                                      _standard_pdf)


def _quantile_of(q, a, loc, scale, upper):
    """ppf (upper False) or isf (upper True): solved for 0 < q < 1, the support's
    ends at q = 0 and 1."""
    q, a, loc, scale = _promote(q, a, loc, scale)
    valid = (a > 0) & (scale > 0) & (q >= 0) & (q <= 1)
    inner = valid & (q > 0) & (q < 1)
    qs, a_s = _guard(inner, q, 0.5), _guard(inner, a, 1.0)
    z = _quantile(1 - qs, qs, a_s) if upper else _quantile(qs, 1 - qs, a_s)
    lowest, highest = (q == 1, q == 0) if upper else (q == 0, q == 1)
    z = _fnp.where(lowest, 0.0, _fnp.where(highest, _fnp.inf, z))
    return _nan_unless(valid, loc + scale * z)


def ppf(q, a, loc=0, scale=1):
    """The quantile: x with cdf(x) = q, by root finding (see _solve)."""
    return _quantile_of(q, a, loc, scale, upper=False)


def isf(q, a, loc=0, scale=1):
    """x with sf(x) = q, as accurate for tiny q as ppf is for tiny 1 - q."""
    return _quantile_of(q, a, loc, scale, upper=True)
