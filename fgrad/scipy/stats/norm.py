"""The normal distribution with mean loc and standard deviation scale."""
import fgrad.numpy as _fnp

from ._util import LOG_2PI as _LOG_2PI
from ._util import nan_unless as _nan_unless
from ._util import standardize as _standardize


def logpdf(x, loc=0, scale=1):
    z, scale = _standardize(x, loc, scale)
    out = -0.5 * z * z - _fnp.log(scale) - 0.5 * _LOG_2PI
    return _nan_unless(scale > 0, out, z)


def pdf(x, loc=0, scale=1):
    return _fnp.exp(logpdf(x, loc, scale))
