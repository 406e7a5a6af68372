"""Student's t distribution with df degrees of freedom, location loc and scale.

Valid for df > 0 and scale > 0 (NaN otherwise); df = inf is the normal
distribution. The cdf uses the regularized incomplete beta function in whichever
of its two symmetric forms is accurate at z; its derivative with respect to df
comes from fgrad.scipy.special.betainc's shape derivatives, that with respect to
x is the density (a custom JVP rule).
The tails lose accuracy for very large df, to about df * 1e-16 relative (the
incomplete beta's argument df / (df + z^2) rounds near 1; SciPy's kernel uses
the complementary function, which fgrad.scipy.special lacks). ppf and isf invert
the cdf by root finding. The far tail takes df / z^2 as (df / z) / z, not z^2
(which overflowed beyond |z| ~ 1e154, 1.8e19 in float32, where the quantiles
stopped); that ratio loses digits as it goes subnormal (|z| beyond ~1e154,
1e19 in float32) and is 0 beyond ~1e161 (4e22), where the quantiles stop.
"""
import math as _math

import fgrad.numpy as _fnp
from fgrad import custom_jvp as _custom_jvp
from fgrad import jvp as _jvp
from fgrad.scipy import special as _special

from . import norm as _norm
from . import _solve as _solve_
from ._util import guard as _guard
from ._util import log1p_square as _log1p_square
from ._util import log_cdf_from_tails as _log_cdf_from_tails
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
           - half * _log1p_square(z / _fnp.sqrt(nu)) - _fnp.log(scale))
    out = _fnp.where(finite, out, _norm.logpdf(z) - _fnp.log(scale))
    return _nan_unless(valid, out, z)


def pdf(x, df, loc=0, scale=1):
    return _fnp.exp(logpdf(x, df, loc, scale))


def _lower_tail(z, df):
    """P(T <= -|z|): I_{df/(df+z^2)}(df/2, 1/2) / 2 for |z| > 2, which gives a small
    tail directly; (1 - I_{z^2/(df+z^2)}(1/2, df/2)) / 2 for |z| <= 2, where the tail
    is at least P(T <= -2) > 0.02 and that difference cannot cancel badly (the
    split of Cephes' stdtr). The normal tail for df = inf."""
    finite = ~_fnp.isinf(df)
    nu = _guard(finite, df, 1.0)
    near = _fnp.abs(z) <= 2
    t2 = _guard(near, z, 1.0) ** 2
    r = nu / _guard(near, 1.0, z) / _guard(near, 1.0, z)   # nu / z^2, z^2 may overflow
    w_far = r / (1 + r)
    w_near = t2 / (nu + t2)
    far_tail = 0.5 * _special.betainc(nu / 2, 0.5, w_far)
    near_tail = 0.5 - 0.5 * _special.betainc(0.5, nu / 2, w_near)
    tail = _fnp.where(near, near_tail, far_tail)
    return _fnp.where(finite, tail, _special.ndtr(_fnp.where(z < 0, z, -z)))


def _tails_formula(z, df):
    tail = _lower_tail(z, df)
    return _fnp.where(z < 0, tail, 1 - tail), _fnp.where(z < 0, 1 - tail, tail)


@_custom_jvp
def _tails(z, df):
    """(cdf, sf) of the standard t at z. Their derivative in z is the density
    (the formula's own derivative is NaN at z = 0, where the incomplete beta's
    infinite slope at 0 meets a zero); in df, the formula's."""
    return _tails_formula(z, df)


@_tails.defjvp
def _tails_jvp(primals, tangents):
    z, df = primals
    dz, ddf = tangents
    lower, upper = _tails(z, df)
    dlower = _standard_pdf(z, df) * dz
    if not _solve_.known_zero(ddf):
        dlower = dlower + _jvp(lambda d: _tails_formula(z, d)[0], (df,), (ddf,))[1]
    return (lower, upper), (dlower, -dlower)


def cdf(x, df, loc=0, scale=1):
    z, df, scale, valid = _standardize(x, df, loc, scale)
    return _nan_unless(valid, _tails(z, df)[0], z)


def logcdf(x, df, loc=0, scale=1):
    z, df, scale, valid = _standardize(x, df, loc, scale)
    lower, upper = _tails(z, df)
    return _nan_unless(valid, _log_cdf_from_tails(lower, upper), z)


def sf(x, df, loc=0, scale=1):
    z, df, scale, valid = _standardize(x, df, loc, scale)
    return _nan_unless(valid, _tails(z, df)[1], z)


def logsf(x, df, loc=0, scale=1):
    z, df, scale, valid = _standardize(x, df, loc, scale)
    lower, upper = _tails(z, df)
    return _nan_unless(valid, _log_cdf_from_tails(upper, lower), z)


def _standard_pdf(z, df):
    return _fnp.exp(logpdf(z, df))


def _solve(p_lower, p_upper, df):
    """The standard quantile, found in u = asinh z (linear near 0, logarithmic in
    the power-law tails)."""
    def h(u):
        z = _fnp.sinh(u)
        lower, upper = _tails_formula(z, df)
        return _solve_.log_tail_equation(lower, upper, _standard_pdf(z, df) * _fnp.cosh(u),
                                         p_lower, p_upper)
    z = _fnp.sinh(_solve_.increasing_root(h, _fnp.zeros_like(df)))
    return _fnp.where(p_lower == p_upper, 0.0, z)  # the median, exactly


_quantile = _solve_.implicit_quantile(_solve, lambda z, df: _tails(z, df)[0], _standard_pdf)


def _quantile_of(q, df, loc, scale, upper):
    q, df, loc, scale = _promote(q, df, loc, scale)
    valid = (df > 0) & (scale > 0) & (q >= 0) & (q <= 1)
    inner = valid & (q > 0) & (q < 1)
    qs, dfs = _guard(inner, q, 0.5), _guard(inner, df, 1.0)
    z = _quantile(1 - qs, qs, dfs) if upper else _quantile(qs, 1 - qs, dfs)
    lowest, highest = (q == 1, q == 0) if upper else (q == 0, q == 1)
    z = _fnp.where(lowest, -_fnp.inf, _fnp.where(highest, _fnp.inf, z))
    return _nan_unless(valid, loc + scale * z)


def ppf(q, df, loc=0, scale=1):
    """The quantile: x with cdf(x) = q, by root finding (see _solve)."""
    return _quantile_of(q, df, loc, scale, upper=False)


def isf(q, df, loc=0, scale=1):
    """x with sf(x) = q, as accurate for tiny q as ppf is for tiny 1 - q."""
    return _quantile_of(q, df, loc, scale, upper=True)
