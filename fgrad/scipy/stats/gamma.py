"""The gamma distribution with shape a: density z^(a-1) e^(-z) / Gamma(a) / scale
for z = (x - loc) / scale >= 0.

Valid for a > 0 and scale > 0 (NaN otherwise). At z = 0 the density is inf for
a < 1, 1/scale for a = 1 and 0 for a > 1, as in SciPy. The cdf and sf are the
regularized incomplete gamma functions; their derivatives with respect to a are
not available (fgrad.scipy.special.gammainc raises NotImplementedError for them),
those with respect to x, loc and scale are.
"""
import fgrad.numpy as _fnp
from fgrad.scipy import special as _special

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
