"""The Cauchy distribution, density 1 / (pi scale (1 + z^2)) for z = (x - loc) / scale.

The cdf is arctan2(1, -z) / pi, which keeps full relative accuracy in the far left
tail (0.5 + arctan(z) / pi cancels there); the sf mirrors it, and the logs and
the quantiles take the same care in both tails.
"""
import math as _math

import fgrad.numpy as _fnp

from ._util import guard as _guard
from ._util import log1p_square as _log1p_square
from ._util import nan_unless as _nan_unless
from ._util import promote as _promote
from ._util import standardize as _standardize


def logpdf(x, loc=0, scale=1):
    z, scale = _standardize(x, loc, scale)
    out = -_math.log(_math.pi) - _fnp.log(scale) - _log1p_square(z)
    return _nan_unless(scale > 0, out, z)


def pdf(x, loc=0, scale=1):
    return _fnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    z, scale = _standardize(x, loc, scale)
    return _nan_unless(scale > 0, _fnp.arctan2(1.0, -z) / _math.pi, z)


def _log_tail(z):
    """log P(Z <= z): log of the cdf left of 0, log1p(-sf) right of it (where
    the cdf is close to 1 and its log is about -1/(pi z))."""
    right = z > 0
    return _fnp.where(right, _fnp.log1p(-_fnp.arctan2(1.0, _guard(right, z, 1.0)) / _math.pi),
                      _fnp.log(_fnp.arctan2(1.0, -_guard(right, -1.0, z)) / _math.pi))


def logcdf(x, loc=0, scale=1):
    z, scale = _standardize(x, loc, scale)
    return _nan_unless(scale > 0, _log_tail(z), z)


def sf(x, loc=0, scale=1):
    z, scale = _standardize(x, loc, scale)
    return _nan_unless(scale > 0, _fnp.arctan2(1.0, z) / _math.pi, z)


def logsf(x, loc=0, scale=1):
    z, scale = _standardize(x, loc, scale)
    return _nan_unless(scale > 0, _log_tail(-z), z)


def _ppf(q):
    """tan(pi (q - 1/2)) in the middle; in the tails -1/tan(pi q) and
    1/tan(pi (1 - q)), which keep relative accuracy for tiny q and 1 - q and
    give -inf at q = 0 and +inf at q = 1."""
    left, right = q < 0.25, q > 0.75
    middle = _fnp.tan(_math.pi * (_guard(left | right, 0.5, q) - 0.5))
    lower = -1 / _fnp.tan(_math.pi * _guard(left, q, 0.125))
    upper = 1 / _fnp.tan(_math.pi * (1 - _guard(right, q, 0.875)))
    return _fnp.where(left, lower, _fnp.where(right, upper, middle))


def ppf(q, loc=0, scale=1):
    q, loc, scale = _promote(q, loc, scale)
    valid = (scale > 0) & (q >= 0) & (q <= 1)
    return _nan_unless(valid, loc + scale * _ppf(q))


def isf(q, loc=0, scale=1):
    q, loc, scale = _promote(q, loc, scale)
    valid = (scale > 0) & (q >= 0) & (q <= 1)
    return _nan_unless(valid, loc - scale * _ppf(q))
