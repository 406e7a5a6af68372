"""The exponential distribution, density exp(-z) / scale for z = (x - loc) / scale >= 0.

At the support's left end x = loc the density is 1/scale and its derivatives are
those from the right (the one-sided formula); below it the log-density is -inf with
zero gradient.
"""
import fgrad.numpy as _fnp

from ._util import guard as _guard
from ._util import log1mexp as _log1mexp
from ._util import nan_unless as _nan_unless
from ._util import promote as _promote
from ._util import standardize as _standardize


def logpdf(x, loc=0, scale=1):
    z, scale = _standardize(x, loc, scale)
    out = _fnp.where(z >= 0, -z - _fnp.log(scale), -_fnp.inf)
    return _nan_unless(scale > 0, out, z)


def pdf(x, loc=0, scale=1):
    return _fnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    z, scale = _standardize(x, loc, scale)
    return _nan_unless(scale > 0, _fnp.where(z >= 0, -_fnp.expm1(-z), 0.0), z)


def logcdf(x, loc=0, scale=1):
    z, scale = _standardize(x, loc, scale)
    inside = z > 0
    out = _fnp.where(inside, _log1mexp(-_guard(inside, z, 1.0)), -_fnp.inf)
    return _nan_unless(scale > 0, out, z)


def sf(x, loc=0, scale=1):
    return _fnp.exp(logsf(x, loc, scale))


def logsf(x, loc=0, scale=1):
    z, scale = _standardize(x, loc, scale)
    return _nan_unless(scale > 0, _fnp.where(z >= 0, -z, 0.0), z)


def ppf(q, loc=0, scale=1):
    q, loc, scale = _promote(q, loc, scale)
    valid = (scale > 0) & (q >= 0) & (q <= 1)
    return _nan_unless(valid, loc - scale * _fnp.log1p(-q))


def isf(q, loc=0, scale=1):
    q, loc, scale = _promote(q, loc, scale)
    valid = (scale > 0) & (q >= 0) & (q <= 1)
    return _nan_unless(valid, loc - scale * _fnp.log(q))
