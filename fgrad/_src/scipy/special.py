"""fgrad.scipy.special: SciPy's special functions over fgrad's primitives.

Names, signatures and values follow scipy.special; dtypes follow JAX (float32
stays float32, integers and bools become the default float, Python scalars are
weak). The functions SciPy computes with a kernel of its own are primitives
(`lax/special.py`: SciPy's kernels, the same bits eagerly and under jit); the
rest are compositions written here. At the edges:

* xlogy(0, y) = 0 for any y but NaN, with d/dx = log(y) and d/dy = 0 there;
  likewise entr, rel_entr and kl_div are 0 (kl_div: y) at x = 0 with the
  one-sided derivative there (d entr/dx = +inf, d rel_entr/dx = -inf).
* logsumexp and softmax ignore -inf entries (a row of -inf gives -inf / NaN as
  SciPy does) and subtract the maximum first.
* log_ndtr is SciPy's kernel (accurate far into both tails); its derivative is
  exp(-x^2/2 - log_ndtr(x)) / sqrt(2 pi), which neither underflows nor divides
  by an underflowed ndtr.

Derivatives with respect to the shape parameters `a` (gammainc, gammaincc,
betainc) and `b` (betainc) and to the exponent of zeta come from series,
continued fractions and the Euler-Maclaurin formula in
`lax/special_expansions.py` (about 1e-13 relative error for moderate
parameters; NaN where the fixed number of terms does not converge, for shape
parameters beyond about 5000 near x ~ a, and for zeta's exponent below 1); a
derivative in the integer order n of polygamma raises NotImplementedError.
"""
import math

import numpy as np

from .. import lax
from ..core import Array
from ..custom_derivatives import custom_jvp
from ..lax import special as sp
from ..numpy import util
from ..numpy.ufuncs import sinc  # noqa: F401  (scipy.special.sinc is NumPy's)

__all__ = [
    "gammaln", "digamma", "psi", "polygamma", "gamma", "beta", "betaln", "erf", "erfc",
    "erfinv", "erfcx", "ndtr", "ndtri", "log_ndtr", "expit", "logit", "log_expit",
    "logsumexp", "softmax", "log_softmax", "xlogy", "xlog1py", "entr", "rel_entr", "kl_div",
    "gammainc", "gammaincc", "betainc", "gammaincinv", "gammainccinv", "betaincinv",
    "i0", "i0e", "i1", "i1e", "zeta", "multigammaln", "sinc",
]


def _floats(*args):
    return util.promote_inexact(*args)


def _c(x, value):
    return Array(np.asarray(value, x.dtype), True)


def _unary(prim_fn, doc):
    def fn(x):
        (x,) = _floats(x)
        return prim_fn(x)
    fn.__name__ = prim_fn.__name__
    fn.__doc__ = doc
    return fn


def _nary(prim_fn, doc):
    def fn(*args):
        return prim_fn(*_floats(*args))
    fn.__name__ = prim_fn.__name__
    fn.__doc__ = doc
    return fn


# ----------------------------------------------------------------------------
# Kernels (primitives)

gammaln = _unary(sp.gammaln, "log|Gamma(x)|.")
digamma = _unary(sp.digamma, "psi(x) = d/dx log Gamma(x).")
psi = digamma
gamma = _unary(sp.gamma, "Gamma(x).")
erfc = _unary(sp.erfc, "1 - erf(x), accurate where erf(x) is near 1.")
erfcx = _unary(sp.erfcx, "exp(x^2) erfc(x), the scaled complementary error function.")
ndtr = _unary(sp.ndtr, "The standard normal CDF.")
ndtri = _unary(sp.ndtri, "The inverse of ndtr (the standard normal quantile function).")
log_ndtr = _unary(sp.log_ndtr, "log(ndtr(x)), accurate in both tails.")
i0 = _unary(sp.i0, "Modified Bessel function of the first kind, order 0.")
i0e = _unary(sp.i0e, "i0(x) exp(-|x|).")
i1 = _unary(sp.i1, "Modified Bessel function of the first kind, order 1.")
i1e = _unary(sp.i1e, "i1(x) exp(-|x|).")
beta = _nary(sp.beta, "Gamma(a) Gamma(b) / Gamma(a + b).")
betaln = _nary(sp.betaln, "log|beta(a, b)|.")
gammainc = _nary(sp.gammainc, "The regularized lower incomplete gamma function P(a, x).")
gammaincc = _nary(sp.gammaincc, "The regularized upper incomplete gamma function Q(a, x) "
                                "= 1 - P(a, x).")
betainc = _nary(sp.betainc, "The regularized incomplete beta function I_x(a, b).")
gammaincinv = _nary(sp.gammaincinv, "The x with gammainc(a, x) = y.")
gammainccinv = _nary(sp.gammainccinv, "The x with gammaincc(a, x) = y.")
betaincinv = _nary(sp.betaincinv, "The x with betainc(a, b, x) = y.")
xlogy = _nary(sp.xlogy, "x log(y), and 0 where x == 0 (unless y is NaN).")
xlog1py = _nary(sp.xlog1py, "x log1p(y), and 0 where x == 0 (unless y is NaN).")
entr = _unary(sp.entr, "-x log(x) for x >= 0 (0 at 0), -inf for x < 0.")
rel_entr = _nary(sp.rel_entr, "x log(x / y) for x >= 0, y > 0 (0 at x = 0); +inf elsewhere.")
kl_div = _nary(sp.kl_div, "x log(x / y) - x + y for x >= 0, y > 0 (y at x = 0); +inf "
                          "elsewhere.")


def erf(z):
    """The error function (fgrad's own native kernel under jit)."""
    (z,) = _floats(z)
    return lax.erf(z)


def erfinv(y):
    """The inverse of erf on (-1, 1); +-inf at +-1, NaN outside."""
    (y,) = _floats(y)
    return lax.erf_inv(y)


def zeta(x, q=None):
    """The Hurwitz zeta function sum_k (k + q)^-x, or Riemann's (q=None), which is
    1 + zetac(x): next to its zeros at negative even x its error is ~1e-16 absolute,
    not relative. The derivative in x is NaN for x <= 1 (and q <= 0)."""
    if q is None:
        (x,) = _floats(x)
        return lax.add(sp.zetac(x), _c(x, 1.0))
    x, q = _floats(x, q)
    return sp.zeta(x, q)


@custom_jvp
def _integer_order(n):
    return n


@_integer_order.defjvp
def _integer_order_jvp(primals, tangents):
    raise NotImplementedError(
        "polygamma: the order n takes integer values only, so there is no derivative "
        "with respect to it; wrap n in fgrad.lax.stop_gradient")


def polygamma(n, x):
    """The n-th derivative of digamma: (-1)^(n+1) n! zeta(n + 1, x), digamma for
    n = 0, NaN where n is not a non-negative integer. Differentiable in x (asking
    for a derivative in n raises NotImplementedError)."""
    n, x = _floats(n, x)
    n = _integer_order(n)
    np1 = lax.add(n, _c(n, 1.0))
    even = lax.eq(lax.rem(n, _c(n, 2.0)), _c(n, 0.0))
    sign = lax.select_n(even, _c(n, 1.0), _c(n, -1.0))
    higher = lax.mul(lax.mul(sign, sp.gamma(np1)), sp.zeta(np1, x))
    out = lax.select_n(lax.eq(n, _c(n, 0.0)), higher, sp.digamma(x))
    order = lax.bitwise_and(lax.eq(lax.floor(n), n), lax.ge(n, _c(n, 0.0)))
    return lax.select_n(order, _c(out, np.nan), out)


def multigammaln(a, d):
    """log of the multivariate gamma function of dimension d (a static int):
    d(d-1)/4 log(pi) + sum_{j<d} gammaln(a - j/2); NaN where a <= (d-1)/2 (SciPy
    raises there, which traced values cannot)."""
    d = util.static_int("multigammaln", "d", d)
    if d < 1:
        raise ValueError(f"multigammaln: the dimension d must be a positive integer, got {d}")
    (a,) = _floats(a)
    out = _c(a, d * (d - 1) / 4 * math.log(math.pi))
    for j in range(d):
        out = lax.add(out, sp.gammaln(lax.sub(a, _c(a, j / 2))))
    return lax.select_n(lax.gt(a, _c(a, (d - 1) / 2)), _c(out, np.nan), out)


# ----------------------------------------------------------------------------
# Logistic function family

def expit(x):
    """1 / (1 + exp(-x)), the logistic sigmoid."""
    (x,) = _floats(x)
    return lax.logistic(x)


def logit(p):
    """log(p / (1 - p)), the inverse of expit; derivative 1 / (p (1 - p)), inf at
    0 and 1 (the quotient's chain rule gave NaN there: 0 * inf, inf / inf)."""
    (p,) = _floats(p)
    return _logit(p)


@custom_jvp
def _logit(p):
    return lax.log(lax.div(p, lax.sub(_c(p, 1.0), p)))


@_logit.defjvp
def _logit_jvp(primals, tangents):
    (p,), (t,) = primals, tangents
    return _logit(p), lax.div(t, lax.mul(p, lax.sub(_c(p, 1.0), p)))


def log_expit(x):
    """log(expit(x)) without overflow: -log1p(exp(-x)) for x >= 0, x - log1p(exp(x))
    below. Each branch sees a harmless input where it is not picked, so neither
    leaks NaN into derivatives."""
    (x,) = _floats(x)
    zero = _c(x, 0.0)
    pos = lax.ge(x, zero)
    a = lax.select_n(pos, zero, x)
    b = lax.select_n(pos, x, zero)
    upper = lax.neg(lax.log1p(lax.exp(lax.neg(a))))
    lower = lax.sub(b, lax.log1p(lax.exp(b)))
    return lax.select_n(pos, lower, upper)


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
    """log(sum(b * exp(a))) over axis, stable; with return_sign=True returns
    (log|sum|, sign(sum))."""
    from ... import nn
    return nn.logsumexp(a, axis=axis, b=b, keepdims=keepdims, return_sign=return_sign)


def softmax(x, axis=None):
    """exp(x) / sum(exp(x)) over axis (all axes by default, as SciPy)."""
    from ... import nn
    return nn.softmax(x, axis=axis)


def log_softmax(x, axis=None):
    """x - logsumexp(x) over axis (all axes by default, as SciPy)."""
    from ... import nn
    return nn.log_softmax(x, axis=axis)
