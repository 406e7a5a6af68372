"""The normal distribution with mean loc and standard deviation scale; the cdf
family and the quantiles come from fgrad.scipy.special's ndtr, log_ndtr and ndtri
(accurate in both tails)."""
import fgrad.numpy as _fnp
from fgrad.scipy import special as _special

from ._util import LOG_2PI as _LOG_2PI
from ._util import nan_unless as _nan_unless
from ._util import promote as _promote
from ._util import standardize as _standardize


def logpdf(x, loc=0, scale=1):
    z, scale = _standardize(x, loc, scale)
    out = -0.5 * z * z - _fnp.log(scale) - 0.5 * _LOG_2PI
    return _nan_unless(scale > 0, out, z)


def pdf(x, loc=0, scale=1):
    return _fnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    z, scale = _standardize(x, loc, scale)
    return _nan_unless(scale > 0, _special.ndtr(z), z)


def logcdf(x, loc=0, scale=1):
    z, scale = _standardize(x, loc, scale)
    return _nan_unless(scale > 0, _special.log_ndtr(z), z)


def sf(x, loc=0, scale=1):
    z, scale = _standardize(x, loc, scale)
    return _nan_unless(scale > 0, _special.ndtr(-z), z)


def logsf(x, loc=0, scale=1):
    z, scale = _standardize(x, loc, scale)
    return _nan_unless(scale > 0, _special.log_ndtr(-z), z)


def ppf(q, loc=0, scale=1):
    q, loc, scale = _promote(q, loc, scale)
    valid = (scale > 0) & (q >= 0) & (q <= 1)
    return _nan_unless(valid, loc + scale * _special.ndtri(q))


def isf(q, loc=0, scale=1):
    q, loc, scale = _promote(q, loc, scale)
    valid = (scale > 0) & (q >= 0) & (q <= 1)
    return _nan_unless(valid, loc - scale * _special.ndtri(q))
