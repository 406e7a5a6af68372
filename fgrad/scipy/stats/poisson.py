"""The Poisson distribution with mean mu: pmf mu^k e^(-mu) / k! on k - loc = 0, 1, ...

Valid for mu >= 0 (NaN otherwise; mu = 0 puts all mass on 0). The pmf at a
non-integer or negative k is 0. cdf and sf are regularized incomplete gamma
functions of mu at floor(k - loc) + 1, differentiable in mu.
"""
import fgrad.numpy as _fnp
from fgrad import stop_gradient as _stop_gradient
from fgrad.scipy import special as _special

from . import _solve as _solve_
from ._util import guard as _guard
from ._util import is_integral as _is_integral
from ._util import discrete_tail as _discrete_tail
from ._util import nan_unless as _nan_unless
from ._util import promote as _promote


def logpmf(k, mu, loc=0):
    k, mu, loc = _promote(k, mu, loc)
    k = k - loc
    inside = (k >= 0) & _is_integral(k)
    ks = _guard(inside, k, 0.0)
    out = _special.xlogy(ks, mu) - _special.gammaln(ks + 1) - mu
    return _nan_unless(mu >= 0, _fnp.where(inside, out, -_fnp.inf), k)


def pmf(k, mu, loc=0):
    return _fnp.exp(logpmf(k, mu, loc))


def _tails(k, mu, loc):
    """(k - loc, whether 0 <= k - loc < inf, P(K <= k), P(K > k)) with the
    incomplete gamma functions at n = floor(k - loc) + 1 (a stand-in elsewhere)."""
    k, mu, loc = _promote(k, mu, loc)
    k = k - loc
    inside = (k >= 0) & ~_fnp.isinf(k)
    n = _fnp.floor(_guard(inside, k, 0.0)) + 1
    return k, inside, _special.gammaincc(n, mu), _special.gammainc(n, mu)


def cdf(k, mu, loc=0):
    k, inside, lower, upper = _tails(k, mu, loc)
    return _discrete_tail("cdf", lower, upper, inside, k, mu >= 0)


def logcdf(k, mu, loc=0):
    k, inside, lower, upper = _tails(k, mu, loc)
    return _discrete_tail("logcdf", lower, upper, inside, k, mu >= 0)


def sf(k, mu, loc=0):
    k, inside, lower, upper = _tails(k, mu, loc)
    return _discrete_tail("sf", lower, upper, inside, k, mu >= 0)


def logsf(k, mu, loc=0):
    k, inside, lower, upper = _tails(k, mu, loc)
    return _discrete_tail("logsf", lower, upper, inside, k, mu >= 0)


def ppf(q, mu, loc=0):
    """The smallest k with cdf(k) >= q, by search; loc - 1 at q = 0 and inf at
    q = 1 (SciPy's ends of the support)."""
    q, mu, loc = _promote(q, mu, loc)
    valid = (mu >= 0) & (q >= 0) & (q <= 1)
    inner = valid & (q > 0) & (q < 1)
    qs, mus = _guard(inner, q, 0.5), _guard(inner, mu, 1.0)
    # a step function: its derivative is 0 wherever it exists
    qs, mus = (_stop_gradient(qs), _stop_gradient(mus))
    k = _solve_.smallest_count(lambda k: _special.gammaincc(k + 1, mus), qs)
    k = _fnp.where(_fnp.isinf(mu), _fnp.nan, k)  # no finite count for 0 < q < 1
    k = _fnp.where(q == 0, -1.0, _fnp.where(q == 1, _fnp.inf, k))
    return _nan_unless(valid, k + loc)
