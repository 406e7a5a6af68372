"""The Laplace distribution, density exp(-|z|) / (2 scale) for z = (x - loc) / scale.

At the kink x = loc the derivative of |z| is taken as 0 (the mean of the one-sided
derivatives), as fgrad.numpy.abs does.
"""
import math as _math

import fgrad.numpy as _fnp

from ._util import guard as _guard
from ._util import nan_unless as _nan_unless
from ._util import promote as _promote
from ._util import standardize as _standardize


def logpdf(x, loc=0, scale=1):
    z, scale = _standardize(x, loc, scale)
    return _nan_unless(scale > 0, -_fnp.abs(z) - _fnp.log(2 * scale), z)


def pdf(x, loc=0, scale=1):
    return _fnp.exp(logpdf(x, loc, scale))


def _cdf(z):
    lower = z < 0
    return _fnp.where(lower, 0.5 * _fnp.exp(_guard(lower, z, 0.0)),
                      1 - 0.5 * _fnp.exp(-_guard(lower, 0.0, z)))


def _logcdf(z):
    lower = z < 0
    return _fnp.where(lower, _guard(lower, z, 0.0) - _math.log(2),
                      _fnp.log1p(-0.5 * _fnp.exp(-_guard(lower, 0.0, z))))


def cdf(x, loc=0, scale=1):
    z, scale = _standardize(x, loc, scale)
    return _nan_unless(scale > 0, _cdf(z), z)


def logcdf(x, loc=0, scale=1):
    z, scale = _standardize(x, loc, scale)
    return _nan_unless(scale > 0, _logcdf(z), z)


def sf(x, loc=0, scale=1):
    z, scale = _standardize(x, loc, scale)
    return _nan_unless(scale > 0, _cdf(-z), z)


def logsf(x, loc=0, scale=1):
    z, scale = _standardize(x, loc, scale)
    return _nan_unless(scale > 0, _logcdf(-z), z)


def _ppf(q):
    lower = q <= 0.5
    return _fnp.where(lower, _fnp.log(2 * _guard(lower, q, 0.25)),
                      -_fnp.log(2 - 2 * _guard(lower, 0.75, q)))


def ppf(q, loc=0, scale=1):
    q, loc, scale = _promote(q, loc, scale)
    valid = (scale > 0) & (q >= 0) & (q <= 1)
    return _nan_unless(valid, loc + scale * _ppf(q))


def isf(q, loc=0, scale=1):
    q, loc, scale = _promote(q, loc, scale)
    valid = (scale > 0) & (q >= 0) & (q <= 1)
    return _nan_unless(valid, loc - scale * _ppf(q))
