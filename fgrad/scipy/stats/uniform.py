"""The uniform distribution on [loc, loc + scale] (both ends included, as in SciPy).

Derivatives are those of the formula inside the support (log-density -log(scale),
cdf z); outside it the values are constants with zero gradient.
"""
import fgrad.numpy as _fnp

from ._util import guard as _guard
from ._util import nan_unless as _nan_unless
from ._util import promote as _promote
from ._util import standardize as _standardize


def logpdf(x, loc=0, scale=1):
    z, scale = _standardize(x, loc, scale)
    inside = (z >= 0) & (z <= 1)
    return _nan_unless(scale > 0, _fnp.where(inside, -_fnp.log(scale), -_fnp.inf), z)


def pdf(x, loc=0, scale=1):
    return _fnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    z, scale = _standardize(x, loc, scale)
    out = _fnp.where(z < 0, 0.0, _fnp.where(z > 1, 1.0, z))
    return _nan_unless(scale > 0, out, z)


def logcdf(x, loc=0, scale=1):
    z, scale = _standardize(x, loc, scale)
    inside = (z > 0) & (z <= 1)
    out = _fnp.where(inside, _fnp.log(_guard(inside, z, 0.5)), _fnp.where(z > 1, 0.0, -_fnp.inf))
    return _nan_unless(scale > 0, out, z)


def sf(x, loc=0, scale=1):
    z, scale = _standardize(x, loc, scale)
    out = _fnp.where(z < 0, 1.0, _fnp.where(z > 1, 0.0, 1 - z))
    return _nan_unless(scale > 0, out, z)


def logsf(x, loc=0, scale=1):
    z, scale = _standardize(x, loc, scale)
    inside = (z >= 0) & (z < 1)
    out = _fnp.where(inside, _fnp.log1p(-_guard(inside, z, 0.5)),
                     _fnp.where(z < 0, 0.0, -_fnp.inf))
    return _nan_unless(scale > 0, out, z)


def ppf(q, loc=0, scale=1):
    q, loc, scale = _promote(q, loc, scale)
    valid = (scale > 0) & (q >= 0) & (q <= 1)
    return _nan_unless(valid, loc + scale * q)


def isf(q, loc=0, scale=1):
    q, loc, scale = _promote(q, loc, scale)
    valid = (scale > 0) & (q >= 0) & (q <= 1)
    return _nan_unless(valid, loc + scale * (1 - q))
