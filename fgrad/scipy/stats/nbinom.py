"""The negative binomial distribution: failures before the n-th success of
Bernoulli(p) trials, pmf C(k+n-1, n-1) p^n (1-p)^k on k - loc = 0, 1, ...

Valid for real n > 0 and 0 < p <= 1 (NaN otherwise). The pmf at a non-integer or
negative k is 0; it is differentiable in n and p. cdf and sf are regularized
incomplete beta functions (their derivative in n from betainc's shape
derivative); ppf is a step function (derivative 0 in q, n and p).
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
    return (n > 0) & (p > 0) & (p <= 1)


def logpmf(k, n, p, loc=0):
    k, n, p, loc = _promote(k, n, p, loc)
    k = k - loc
    inside = (k >= 0) & _is_integral(k)
    ks = _guard(inside, k, 0.0)
    ns = _guard(_valid(n, p), n, 1.0)
    log_choose = _special.gammaln(ks + ns) - _special.gammaln(ks + 1) - _special.gammaln(ns)
    out = log_choose + ns * _fnp.log(p) + _special.xlog1py(ks, -p)
    return _nan_unless(_valid(n, p), _fnp.where(inside, out, -_fnp.inf), k)


def pmf(k, n, p, loc=0):
    return _fnp.exp(logpmf(k, n, p, loc))


def _tails(k, n, p, loc):
    """(P(K <= k), P(K > k)) = (I_p(n, j+1), I_{1-p}(j+1, n)) for j = floor(k - loc)
    with 0 <= k - loc < inf (`inside`; a stand-in elsewhere)."""
    k, n, p, loc = _promote(k, n, p, loc)
    k = k - loc
    inside = (k >= 0) & ~_fnp.isinf(k)
    j = _fnp.floor(_guard(inside, k, 0.0))
    lower, upper = _special.betainc(n, j + 1, p), _special.betainc(j + 1, n, 1 - p)
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
    """The smallest k with cdf(k) >= q, by search; loc - 1 at q = 0 and inf at
    q = 1 (SciPy's ends of the support)."""
    q, n, p, loc = _promote(q, n, p, loc)
    valid = _valid(n, p) & (q >= 0) & (q <= 1)
    inner = valid & (q > 0) & (q < 1)
    qs, ns, ps = _guard(inner, q, 0.5), _guard(inner, n, 1.0), _guard(inner, p, 0.5)
    # a step function: its derivative is 0 wherever it exists
    qs, ns, ps = (_stop_gradient(qs), _stop_gradient(ns), _stop_gradient(ps))
    k = _solve_.smallest_count(lambda j: _special.betainc(ns, j + 1, ps), qs)
    k = _fnp.where(q == 0, -1.0, _fnp.where(q == 1, _fnp.inf, k))
    return _nan_unless(valid, k + loc)
