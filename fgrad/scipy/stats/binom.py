"""The binomial distribution: successes in n Bernoulli(p) trials, pmf
C(n, k) p^k (1-p)^(n-k) on k - loc = 0, ..., n.

Valid for an integer n >= 0 and 0 <= p <= 1 (NaN otherwise). The pmf at a
non-integer k or outside 0..n is 0. cdf and sf are regularized incomplete beta
functions of p, differentiable in p (n is a count, not differentiated).
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


def _valid(n, p):
    return (n >= 0) & _is_integral(n) & (p >= 0) & (p <= 1)


def logpmf(k, n, p, loc=0):
    k, n, p, loc = _promote(k, n, p, loc)
    k = k - loc
    inside = (k >= 0) & (k <= n) & _is_integral(k)
    ks = _guard(inside, k, 0.0)
    ns = _guard(_valid(n, p), n, 0.0)
    log_choose = (_special.gammaln(ns + 1) - _special.gammaln(ks + 1)
                  - _special.gammaln(ns - ks + 1))
    out = log_choose + _special.xlogy(ks, p) + _special.xlog1py(ns - ks, -p)
    return _nan_unless(_valid(n, p), _fnp.where(inside, out, -_fnp.inf), k)


def pmf(k, n, p, loc=0):
    return _fnp.exp(logpmf(k, n, p, loc))


def _tails(k, n, p, loc):
    """(P(K <= k), P(K > k)) from one incomplete beta each: I_{1-p}(n-j, j+1) and
    I_p(j+1, n-j) for j = floor(k - loc) in 0..n-1 (`inside`; a stand-in elsewhere)."""
    k, n, p, loc = _promote(k, n, p, loc)
    k = k - loc
    inside = (k >= 0) & (k < n)
    j = _fnp.floor(_guard(inside, k, 0.0))
    ns = _guard(inside, n, 1.0)
    lower = _special.betainc(ns - j, j + 1, 1 - p)
    upper = _special.betainc(j + 1, ns - j, p)
    return lower, upper, inside, k, _valid(n, p)


def cdf(k, n, p, loc=0):
    return _discrete_tail("cdf", *_tails(k, n, p, loc))


def logcdf(k, n, p, loc=0):
    return _discrete_tail("logcdf", *_tails(k, n, p, loc))


def sf(k, n, p, loc=0):
    return _discrete_tail("sf", *_tails(k, n, p, loc))


def logsf(k, n, p, loc=0):
    return _discrete_tail("logsf", *_tails(k, n, p, loc))


def ppf(q, n, p, loc=0):
    """The smallest k with cdf(k) >= q, by bisection over 0..n; loc - 1 at q = 0
    and n + loc at q = 1 (SciPy's ends of the support)."""
    q, n, p, loc = _promote(q, n, p, loc)
    valid = _valid(n, p) & (q >= 0) & (q <= 1)
    inner = valid & (q > 0) & (q < 1)
    qs, ns, ps = _guard(inner, q, 0.5), _guard(inner, n, 1.0), _guard(inner, p, 0.5)
    # a step function: its derivative is 0 wherever it exists
    qs, ns, ps = (_stop_gradient(qs), _stop_gradient(ns), _stop_gradient(ps))

    def count_cdf(j):
        below_n = j < ns
        js = _guard(below_n, j, 0.0)
        return _fnp.where(below_n, _special.betainc(ns - js, js + 1, 1 - ps), 1.0)
    k = _solve_.smallest_count(count_cdf, qs, upper=ns)
    k = _fnp.where(q == 0, -1.0, _fnp.where(q == 1, n, k))
    return _nan_unless(valid, k + loc)
