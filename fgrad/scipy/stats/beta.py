"""The beta distribution with shapes a, b: density z^(a-1) (1-z)^(b-1) / B(a, b) /
scale on 0 <= z = (x - loc) / scale <= 1.

Valid for a > 0, b > 0 and scale > 0 (NaN otherwise). At the ends of the support
the density is inf, finite or 0 as a (at z = 0) or b (at z = 1) is below, at or
above 1, as in SciPy. The cdf and sf are regularized incomplete beta functions,
and ppf/isf invert them by root finding. Derivatives in a and b of these come
from fgrad.scipy.special.betainc's shape derivatives (fixed-length series: NaN
where they do not converge, slow-ish eagerly).
"""
import fgrad.nn as _nn
import fgrad.numpy as _fnp
from fgrad.scipy import special as _special

from . import _solve as _solve_
from ._util import guard as _guard
from ._util import log_cdf_from_tails as _log_cdf_from_tails
from ._util import nan_unless as _nan_unless
from ._util import promote as _promote


def _standardize(x, a, b, loc, scale):
    x, a, b, loc, scale = _promote(x, a, b, loc, scale)
    return (x - loc) / scale, a, b, scale, (a > 0) & (b > 0) & (scale > 0)


def logpdf(x, a, b, loc=0, scale=1):
    z, a, b, scale, valid = _standardize(x, a, b, loc, scale)
    inside = (z >= 0) & (z <= 1)
    zs = _guard(inside, z, 0.5)
    out = (_special.xlogy(a - 1, zs) + _special.xlog1py(b - 1, -zs) - _special.betaln(a, b)
           - _fnp.log(scale))
    return _nan_unless(valid, _fnp.where(inside, out, -_fnp.inf), z)


def pdf(x, a, b, loc=0, scale=1):
    return _fnp.exp(logpdf(x, a, b, loc, scale))


def _tails(z, a, b):
    """(inside, I_z(a, b), I_{1-z}(b, a)) for 0 < z < 1 (a stand-in elsewhere): the
    cdf and the sf, each computed directly so neither cancels where the other is
    near 1."""
    inside = (z > 0) & (z < 1)
    zs = _guard(inside, z, 0.5)
    return inside, _special.betainc(a, b, zs), _special.betainc(b, a, 1 - zs)


def _ends(z, below, above):
    return _fnp.where(z <= 0, below, above)


def cdf(x, a, b, loc=0, scale=1):
    z, a, b, scale, valid = _standardize(x, a, b, loc, scale)
    inside, lower, _ = _tails(z, a, b)
    return _nan_unless(valid, _fnp.where(inside, lower, _ends(z, 0.0, 1.0)), z)


def logcdf(x, a, b, loc=0, scale=1):
    z, a, b, scale, valid = _standardize(x, a, b, loc, scale)
    inside, lower, upper = _tails(z, a, b)
    out = _log_cdf_from_tails(lower, upper)
    return _nan_unless(valid, _fnp.where(inside, out, _ends(z, -_fnp.inf, 0.0)), z)


def sf(x, a, b, loc=0, scale=1):
    z, a, b, scale, valid = _standardize(x, a, b, loc, scale)
    inside, _, upper = _tails(z, a, b)
    return _nan_unless(valid, _fnp.where(inside, upper, _ends(z, 1.0, 0.0)), z)


def logsf(x, a, b, loc=0, scale=1):
    z, a, b, scale, valid = _standardize(x, a, b, loc, scale)
    inside, lower, upper = _tails(z, a, b)
    out = _log_cdf_from_tails(upper, lower)
    return _nan_unless(valid, _fnp.where(inside, out, _ends(z, 0.0, -_fnp.inf)), z)


def _standard_pdf(x, a, b):
    return _fnp.exp(_special.xlogy(a - 1, x) + _special.xlog1py(b - 1, -x)
                    - _special.betaln(a, b))


def _solve(p_lower, p_upper, a, b):
    """The standard quantile, found in u = logit x: x = expit(u) and 1 - x =
    expit(-u) are both exact, so either end of (0, 1) is reached accurately."""
    def h(u):
        x, y = _nn.sigmoid(u), _nn.sigmoid(-u)
        log_density = (a * _nn.log_sigmoid(u) + b * _nn.log_sigmoid(-u)
                       - _special.betaln(a, b))
        return _solve_.log_tail_equation(_special.betainc(a, b, x), _special.betainc(b, a, y),
                                         _fnp.exp(log_density), p_lower, p_upper)
    return _nn.sigmoid(_solve_.increasing_root(h, _fnp.log(a) - _fnp.log(b)))


_quantile = _solve_.implicit_quantile(_solve, lambda x, a, b: _special.betainc(a, b, x),
                                      _standard_pdf)


def _quantile_of(q, a, b, loc, scale, upper):
    q, a, b, loc, scale = _promote(q, a, b, loc, scale)
    valid = (a > 0) & (b > 0) & (scale > 0) & (q >= 0) & (q <= 1)
    inner = valid & (q > 0) & (q < 1)
    qs, a_s, b_s = _guard(inner, q, 0.5), _guard(inner, a, 1.0), _guard(inner, b, 1.0)
    z = _quantile(1 - qs, qs, a_s, b_s) if upper else _quantile(qs, 1 - qs, a_s, b_s)
    lowest, highest = (q == 1, q == 0) if upper else (q == 0, q == 1)
    z = _fnp.where(lowest, 0.0, _fnp.where(highest, 1.0, z))
    return _nan_unless(valid, loc + scale * z)


def ppf(q, a, b, loc=0, scale=1):
    """The quantile: x with cdf(x) = q, by root finding (see _solve)."""
    return _quantile_of(q, a, b, loc, scale, upper=False)


def isf(q, a, b, loc=0, scale=1):
    """x with sf(x) = q, as accurate for tiny q as ppf is for tiny 1 - q."""
    return _quantile_of(q, a, b, loc, scale, upper=True)
