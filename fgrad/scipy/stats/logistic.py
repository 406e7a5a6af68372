"""The logistic distribution, density e^-z / (1 + e^-z)^2 / scale for
z = (x - loc) / scale; its cdf is the sigmoid and its ppf the logit."""
import fgrad.nn as _nn
import fgrad.numpy as _fnp

from ._util import nan_unless as _nan_unless
from ._util import promote as _promote
from ._util import standardize as _standardize


def logpdf(x, loc=0, scale=1):
    z, scale = _standardize(x, loc, scale)
    u = _fnp.where(z < 0, -z, z)  # the density is even; a select keeps all derivatives at 0
    out = -u - 2 * _nn.softplus(-u) - _fnp.log(scale)
    return _nan_unless(scale > 0, out, z)


def pdf(x, loc=0, scale=1):
    return _fnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    z, scale = _standardize(x, loc, scale)
    return _nan_unless(scale > 0, _nn.sigmoid(z), z)


def logcdf(x, loc=0, scale=1):
    z, scale = _standardize(x, loc, scale)
    return _nan_unless(scale > 0, _nn.log_sigmoid(z), z)


def sf(x, loc=0, scale=1):
    z, scale = _standardize(x, loc, scale)
    return _nan_unless(scale > 0, _nn.sigmoid(-z), z)


def logsf(x, loc=0, scale=1):
    z, scale = _standardize(x, loc, scale)
    return _nan_unless(scale > 0, _nn.log_sigmoid(-z), z)


def _logit(q):
    return _fnp.log(q) - _fnp.log1p(-q)


def ppf(q, loc=0, scale=1):
    q, loc, scale = _promote(q, loc, scale)
    valid = (scale > 0) & (q >= 0) & (q <= 1)
    return _nan_unless(valid, loc + scale * _logit(q))


def isf(q, loc=0, scale=1):
    q, loc, scale = _promote(q, loc, scale)
    valid = (scale > 0) & (q >= 0) & (q <= 1)
    return _nan_unless(valid, loc - scale * _logit(q))
