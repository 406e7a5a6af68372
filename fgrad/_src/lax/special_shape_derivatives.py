"""Derivatives of the regularized incomplete gamma and beta functions with
respect to their shape parameters (the JVP rules of `special.gammainc`,
`gammaincc` and `betainc` for `a` and `b`).

No closed form exists, so the functions are computed once more here by their
classic expansions, in fgrad's element-wise ops and loops of a fixed number of
terms (`fori_loop`, so reverse mode works too), and differentiated in forward
mode:

* P(a, x) = x^a e^-x / Gamma(a + 1) * sum_n x^n / ((a+1)...(a+n)) for x < a + 1,
  Q(a, x) = x^a e^-x / Gamma(a) * (Legendre's continued fraction) beyond;
* I_x(a, b) = x^a (1-x)^b / (a B(a, b)) * (the even/odd continued fraction
  for the incomplete beta function, evaluated by the modified Lentz method)
  for x < (a + 1) / (a + b + 2), 1 - I_(1-x)(b, a) beyond.

Both pieces are differentiable compositions, so these derivatives have
derivatives of their own (second order and beyond come the same way). An
element whose expansion has not converged after `TERMS` terms (for the
incomplete gamma function: a beyond about 5000 with x just below a) gets NaN,
never a silently truncated value; so do operands outside the functions'
domains. Accuracy against mpmath: about 1e-13 relative for moderate
parameters, 1e-11 at a ~ 1e4 (where log x - digamma(a) cancels). All terms
always run (a few hundred loop steps per derivative, whatever the operands).
"""
import numpy as np

from . import elementwise as ew

__all__ = ["TERMS", "gammainc_da", "betainc_da", "betainc_db"]

TERMS = 600
_TINY = 1e-30      # the modified Lentz method's stand-in for a zero denominator


def _c(x, value):
    from ..core import Array
    return Array(np.asarray(value, x.dtype), True)


def _eps(x):
    return float(np.finfo(x.dtype).eps)


def _where(cond, yes, no):
    return ew.select_n(cond, no, yes)


def _index(i, like):
    return ew.convert_element_type(i, like.dtype)


def _lentz_step(an, bn, c, d, like):
    """One step of the modified Lentz method: (c, d, factor for the product)."""
    tiny = _c(like, _TINY)
    d = ew.add(ew.mul(an, d), bn)
    d = _where(ew.lt(ew.abs(d), tiny), tiny, d)
    c = ew.add(bn, ew.div(an, c))
    c = _where(ew.lt(ew.abs(c), tiny), tiny, c)
    d = ew.div(_c(like, 1.0), d)
    return c, d, ew.mul(c, d)


def _near_one(delta, like):
    return ew.le(ew.abs(ew.sub(delta, _c(like, 1.0))), _c(like, 4 * _eps(like)))


def _iterate(step, state, like):
    """Runs step(k, state) -> (state, converged at k) for k = 1 .. TERMS - 1; returns
    (state, converged at the last k). Every term runs, also after the value has
    converged: a derivative's terms may still be changing then (the fraction for Q
    ends at k = a for an integer a, yet its derivative in a goes on)."""
    from .control_flow import fori_loop
    from ..core import Array

    def body(i, carry):
        state, _ = carry
        return step(i, state)
    return fori_loop(1, TERMS, body, (state, Array(np.zeros(like.shape, np.bool_), False)))


# ----------------------------------------------------------------------------
# Incomplete gamma

def _lower_series(a, x):
    """(P(a, x), converged) by the power series (for x < a + 1)."""
    from .special import gammaln
    one = _c(x, 1.0)

    def step(i, state):
        term, total = state
        term = ew.mul(term, ew.div(x, ew.add(a, _index(i, x))))
        total = ew.add(total, term)
        return (term, total), ew.le(term, ew.mul(total, _c(x, _eps(x) / 4)))
    ones = _full(x, 1.0)
    (_, total), converged = _iterate(step, (ones, ones), x)
    log_prefactor = ew.sub(ew.sub(ew.mul(a, ew.log(x)), x), gammaln(ew.add(a, one)))
    return ew.mul(ew.exp(log_prefactor), total), converged


def _upper_fraction(a, x):
    """(Q(a, x), converged) by Legendre's continued fraction (for x >= a + 1)."""
    from .special import gammaln
    one = _c(x, 1.0)
    b0 = ew.sub(ew.add(x, one), a)
    d0 = ew.div(one, b0)

    def step(i, state):
        b, c, d, h = state
        k = _index(i, x)
        an = ew.neg(ew.mul(k, ew.sub(k, a)))
        b = ew.add(b, _c(x, 2.0))
        c, d, delta = _lentz_step(an, b, c, d, x)
        return (b, c, d, ew.mul(h, delta)), _near_one(delta, x)
    (*_, h), converged = _iterate(step, (b0, _full(x, 1 / _TINY), d0, d0), x)
    log_prefactor = ew.sub(ew.sub(ew.mul(a, ew.log(x)), x), gammaln(a))
    return ew.mul(ew.exp(log_prefactor), h), converged


def _d_da(fun, a, *rest):
    """(d/da fun(a, *rest), converged) in forward mode (fun gives (value, converged))."""
    from ..api import jvp
    _, da, converged = jvp(lambda a: fun(a, *rest), (a,), (_full(a, 1.0),), has_aux=True)
    return da, converged


def _full(x, value):
    from ..core import Array
    return Array(np.full(x.shape, value, x.dtype), False)


def _broadcast(*xs):
    from .shape_ops import broadcast_to
    shape = np.broadcast_shapes(*(tuple(x.shape) for x in xs))
    return [x if tuple(x.shape) == shape else broadcast_to(x, shape) for x in xs]


def gammainc_da(a, x):
    """d/da P(a, x) (and -d/da Q(a, x)); 0 at x = 0 and x = inf, NaN where a <= 0,
    x < 0 or the expansion has not converged."""
    a, x = _broadcast(a, x)
    zero, one = _c(x, 0.0), _c(x, 1.0)
    valid = ew.bitwise_and(ew.gt(a, zero), ew.bitwise_and(ew.gt(x, zero),
                                                          ew.lt(x, _c(x, np.inf))))
    a_ok = _where(valid, a, one)
    x_ok = _where(valid, x, one)
    series = ew.lt(x_ok, ew.add(a_ok, one))
    # each expansion sees an argument inside its own region where it is not used
    x_series = _where(series, x_ok, a_ok)
    x_fraction = _where(series, ew.add(a_ok, _c(x, 2.0)), x_ok)
    d_lower, ok_lower = _d_da(_lower_series, a_ok, x_series)
    d_upper, ok_upper = _d_da(_upper_fraction, a_ok, x_fraction)
    d = _where(series, d_lower, ew.neg(d_upper))
    ok = _where(series, ok_lower, ok_upper)
    nan = _c(x, np.nan)
    boundary = ew.bitwise_and(ew.gt(a, zero), ew.bitwise_or(ew.eq(x, zero),
                                                            ew.eq(x, _c(x, np.inf))))
    return _where(valid, _where(ok, d, nan), _where(boundary, zero, nan))


# ----------------------------------------------------------------------------
# Incomplete beta

def _beta_fraction(a, b, x):
    """(I_x(a, b), converged) by the continued fraction (for x < (a+1)/(a+b+2))."""
    from .special import betaln
    one = _c(x, 1.0)
    qab, qap, qam = ew.add(a, b), ew.add(a, one), ew.sub(a, one)
    # the first step: c = 1, d = 1 / (1 - (a+b) x / (a+1))
    c0 = _full(x, 1.0)
    _, d0, _ = _lentz_step(ew.neg(ew.div(ew.mul(qab, x), qap)), one, c0, c0, x)

    def step(i, state):
        c, d, h = state
        m = _index(i, x)
        m2 = ew.mul(_c(x, 2.0), m)
        even = ew.div(ew.mul(ew.mul(m, ew.sub(b, m)), x),
                      ew.mul(ew.add(qam, m2), ew.add(a, m2)))
        c, d, delta = _lentz_step(even, one, c, d, x)
        h = ew.mul(h, delta)
        odd = ew.neg(ew.div(ew.mul(ew.mul(ew.add(a, m), ew.add(qab, m)), x),
                            ew.mul(ew.add(a, m2), ew.add(qap, m2))))
        c, d, delta = _lentz_step(odd, one, c, d, x)
        return (c, d, ew.mul(h, delta)), _near_one(delta, x)
    (_, _, h), converged = _iterate(step, (c0, d0, d0), x)
    log_prefactor = ew.sub(ew.add(ew.mul(a, ew.log(x)), ew.mul(b, ew.log1p(ew.neg(x)))),
                           ew.add(betaln(a, b), ew.log(a)))
    return ew.mul(ew.exp(log_prefactor), h), converged


def _betainc_d(a, b, x, wrt):
    """d/da (wrt=0) or d/db (wrt=1) of I_x(a, b); 0 at x = 0 and 1, NaN where
    a <= 0, b <= 0, x outside [0, 1] or the fraction has not converged."""
    a, b, x = _broadcast(a, b, x)
    zero, one = _c(x, 0.0), _c(x, 1.0)
    shapes_ok = ew.bitwise_and(ew.gt(a, zero), ew.gt(b, zero))
    valid = ew.bitwise_and(shapes_ok, ew.bitwise_and(ew.gt(x, zero), ew.lt(x, one)))
    a_ok, b_ok = _where(valid, a, one), _where(valid, b, one)
    x_ok = _where(valid, x, _c(x, 0.25))
    direct = ew.lt(x_ok, ew.div(ew.add(a_ok, one), ew.add(ew.add(a_ok, b_ok), _c(x, 2.0))))
    # one fraction: I_x(a, b) directly, or I_(1-x)(b, a) (then I = 1 - that)
    x_f = _where(direct, x_ok, ew.sub(one, x_ok))
    if wrt == 0:
        d, ok = _d_da(lambda a, b, x: _beta_fraction(_where(direct, a, b), _where(direct, b, a),
                                                     x), a_ok, b_ok, x_f)
    else:
        d, ok = _d_da(lambda b, a, x: _beta_fraction(_where(direct, a, b), _where(direct, b, a),
                                                     x), b_ok, a_ok, x_f)
    d = _where(direct, d, ew.neg(d))
    nan = _c(x, np.nan)
    boundary = ew.bitwise_and(shapes_ok, ew.bitwise_or(ew.eq(x, zero), ew.eq(x, one)))
    return _where(valid, _where(ok, d, nan), _where(boundary, zero, nan))


def betainc_da(a, b, x):
    return _betainc_d(a, b, x, 0)


def betainc_db(a, b, x):
    return _betainc_d(a, b, x, 1)
