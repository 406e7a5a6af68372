"""The chi-squared distribution with df degrees of freedom: a gamma distribution
with shape df / 2 and scale 2 (see fgrad.scipy.stats.gamma for its edge values and
derivatives)."""
from . import gamma as _gamma
from ._util import promote as _promote


def logpdf(x, df, loc=0, scale=1):
    x, df, loc, scale = _promote(x, df, loc, scale)
    return _gamma.logpdf(x, df / 2, loc, 2 * scale)


def pdf(x, df, loc=0, scale=1):
    x, df, loc, scale = _promote(x, df, loc, scale)
    return _gamma.pdf(x, df / 2, loc, 2 * scale)


def cdf(x, df, loc=0, scale=1):
    x, df, loc, scale = _promote(x, df, loc, scale)
    return _gamma.cdf(x, df / 2, loc, 2 * scale)


def logcdf(x, df, loc=0, scale=1):
    x, df, loc, scale = _promote(x, df, loc, scale)
    return _gamma.logcdf(x, df / 2, loc, 2 * scale)


def sf(x, df, loc=0, scale=1):
    x, df, loc, scale = _promote(x, df, loc, scale)
    return _gamma.sf(x, df / 2, loc, 2 * scale)


def logsf(x, df, loc=0, scale=1):
    x, df, loc, scale = _promote(x, df, loc, scale)
    return _gamma.logsf(x, df / 2, loc, 2 * scale)


def ppf(q, df, loc=0, scale=1):
    q, df, loc, scale = _promote(q, df, loc, scale)
    return _gamma.ppf(q, df / 2, loc, 2 * scale)


def isf(q, df, loc=0, scale=1):
    q, df, loc, scale = _promote(q, df, loc, scale)
    return _gamma.isf(q, df / 2, loc, 2 * scale)
