"""Student's t distribution with df degrees of freedom, location loc and scale.

Valid for df > 0 and scale > 0 (NaN otherwise); df = inf is the normal
distribution. The cdf uses the regularized incomplete beta function in whichever
of its two symmetric forms is accurate at z; its derivative with respect to df is
not available (fgrad.scipy.special.betainc raises NotImplementedError), those
with respect to x, loc and scale are, except exactly at x = loc, where the
incomplete beta function's infinite slope at 0 meets a zero and gives NaN.
"""
import math as _math

import fgrad.numpy as _fnp
from fgrad.scipy import special as _special

from . import norm as _norm
from ._util import guard as _guard
from ._util import nan_unless as _nan_unless
from ._util import promote as _promote


def _standardize(x, df, loc, scale):
    x, df, loc, scale = _promote(x, df, loc, scale)
    return (x - loc) / scale, df, scale, (df > 0) & (scale > 0)


def _log_gamma_ratio(h):
    """log Gamma(h + 1/2) - log Gamma(h) - log(h) / 2: by gammaln for h <= 50, by
    its asymptotic series beyond (the gammaln difference cancels there; at h = 50
    the series' first omitted term is below 1e-17)."""
    small = h <= 50
    hs = _guard(small, h, 1.0)
    direct = _special.gammaln(hs + 0.5) - _special.gammaln(hs) - 0.5 * _fnp.log(hs)
    r = 1 / _guard(small, 100.0, h)
    r2 = r * r
    series = r * (-1 / 8 + r2 * (1 / 192 + r2 * (-1 / 640 + r2 * 17 / 14336)))
    return _fnp.where(small, direct, series)


def logpdf(x, df, loc=0, scale=1):
    z, df, scale, valid = _standardize(x, df, loc, scale)
    finite = ~_fnp.isinf(df)
    nu = _guard(finite, df, 1.0)
    half = (nu + 1) / 2
    out = (_log_gamma_ratio(nu / 2) - 0.5 * _math.log(2 * _math.pi)
           - half * _fnp.log1p(z * z / nu) - _fnp.log(scale))
    out = _fnp.where(finite, out, _norm.logpdf(z) - _fnp.log(scale))
    return _nan_unless(valid, out, z)


def pdf(x, df, loc=0, scale=1):
    return _fnp.exp(logpdf(x, df, loc, scale))


def _lower_tail(z, df):
    """P(T <= -|z|) = I_{df/(df+z^2)}(df/2, 1/2) / 2, computed as
    (1 - I_{z^2/(df+z^2)}(1/2, df/2)) / 2 where that argument is the smaller one;
    the normal tail for df = inf."""
    finite = ~_fnp.isinf(df)
    nu = _guard(finite, df, 1.0)
    t2 = z * z
    near = t2 < nu  # then z^2 / (df + z^2) < 1/2
    w_far = nu / (nu + _guard(near, 2 * nu, t2))
    w_near = _guard(near, t2, nu) / (nu + _guard(near, t2, nu))
    far_tail = 0.5 * _special.betainc(nu / 2, 0.5, w_far)
    near_tail = 0.5 - 0.5 * _special.betainc(0.5, nu / 2, w_near)
    tail = _fnp.where(near, near_tail, far_tail)
    return _fnp.where(finite, tail, _special.ndtr(_fnp.where(z < 0, z, -z)))


def cdf(x, df, loc=0, scale=1):
    z, df, scale, valid = _standardize(x, df, loc, scale)
    tail = _lower_tail(z, df)
    return _nan_unless(valid, _fnp.where(z < 0, tail, 1 - tail), z)


def logcdf(x, df, loc=0, scale=1):
    z, df, scale, valid = _standardize(x, df, loc, scale)
    tail = _lower_tail(z, df)
    return _nan_unless(valid, _fnp.where(z < 0, _fnp.log(tail), _fnp.log1p(-tail)), z)


def sf(x, df, loc=0, scale=1):
    z, df, scale, valid = _standardize(x, df, loc, scale)
    tail = _lower_tail(z, df)
    return _nan_unless(valid, _fnp.where(z < 0, 1 - tail, tail), z)


def logsf(x, df, loc=0, scale=1):
    z, df, scale, valid = _standardize(x, df, loc, scale)
    tail = _lower_tail(z, df)
    return _nan_unless(valid, _fnp.where(z < 0, _fnp.log1p(-tail), _fnp.log(tail)), z)
