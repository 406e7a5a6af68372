"""Quantile functions by root finding, for the families whose cdf has no closed
inverse in fgrad.scipy.special (gamma, chi2, beta, t, and the discrete ones).

`increasing_root` solves h(u) = 0 for an increasing h on the whole real line
(the ppf's variable mapped there: u = log x, logit x or asinh x; h from
`log_tail_equation`): it first brackets the root by steps of doubling length
(u0 ± 1, 2, 4, ..., 2^12: |u - u0| up to 8191, beyond float64's range after
exp), then refines with Newton steps that fall back to bisection when a step
leaves the bracket. The iteration counts are fixed, so it
traces, vmaps and jits like any other function. `smallest_count` is the discrete
counterpart: the smallest integer k >= 0 with cdf(k) >= q, by doubling and
integer bisection.

The derivatives of a quantile x(q, theta) come from the implicit function
theorem: dx = (dq - dF/dtheta . dtheta) / f(x) (see `implicit_quantile`).
"""
import numpy as np

import fgrad.numpy as _fnp
from fgrad import custom_jvp, jvp, lax
from fgrad._src.core import Array

_BRACKET_STEPS = 13
_REFINE_STEPS = 64


def increasing_root(h, u0):
    """u with h(u) = 0, where h(u) returns (value, slope) and increases in u;
    -inf / inf where the root lies beyond the bracketing range."""
    u0 = _fnp.asarray(u0)
    inf = _fnp.full_like(u0, _fnp.inf)

    def bracket(i, carry):
        lo, hi, u, step = carry
        below = h(u)[0] < 0
        lo, hi = _fnp.where(below, u, lo), _fnp.where(below, hi, u)
        u = _fnp.where(_fnp.isinf(hi), u + step, _fnp.where(_fnp.isinf(lo), u - step, u))
        return lo, hi, u, 2 * step

    lo, hi, _, _ = lax.fori_loop(0, _BRACKET_STEPS, bracket,
                                 (-inf, inf, u0, _fnp.ones_like(u0)))

    def refine(i, carry):
        lo, hi, u = carry
        value, slope = h(u)
        lo, hi = _fnp.where(value <= 0, u, lo), _fnp.where(value >= 0, u, hi)
        newton = u - value / slope
        inside = (newton >= lo) & (newton <= hi)
        return lo, hi, _fnp.where(inside, newton, 0.5 * (lo + hi))

    bracketed = ~_fnp.isinf(lo) & ~_fnp.isinf(hi)
    start = _fnp.where(bracketed, 0.5 * (lo + hi), 0.0)
    _, _, u = lax.fori_loop(0, _REFINE_STEPS, refine, (_fnp.where(bracketed, lo, 0.0),
                                                       _fnp.where(bracketed, hi, 0.0), start))
    return _fnp.where(bracketed, u, _fnp.where(_fnp.isinf(lo), -_fnp.inf, _fnp.inf))


def log_tail_equation(cdf, sf, density, p_lower, p_upper):
    """(value, slope) of an increasing function of u whose root is the quantile
    with lower tail p_lower and upper tail p_upper (= 1 - p_lower), given cdf, sf
    and density = d cdf / du at the current u: log(cdf / p_lower) where p_lower is
    the smaller tail, log(p_upper / sf) otherwise. Logs make Newton's steps exact
    for power-law and exponential tails (a step on cdf - q itself crawls where
    cdf >> q), and using the smaller tail avoids cancellation."""
    use_lower = p_lower <= p_upper
    value = _fnp.where(use_lower, _fnp.log(cdf) - _fnp.log(p_lower),
                       _fnp.log(p_upper) - _fnp.log(sf))
    return value, density / _fnp.where(use_lower, cdf, sf)


def smallest_count(cdf, q, upper=None):
    """The smallest integer k >= 0 with cdf(k) >= q (as a float), searching
    [0, upper] (an array of counts) or, with upper None, [0, 2^62] after doubling."""
    q = _fnp.asarray(q)
    if upper is None:
        def grow(i, hi):
            return _fnp.where(cdf(hi) >= q, hi, 2 * hi + 1)
        upper = lax.fori_loop(0, 62, grow, _fnp.zeros_like(q))
    lo = _fnp.full_like(q, -1.0)  # invariant: cdf(lo) < q <= cdf(hi)

    def bisect(i, carry):
        lo, hi = carry
        mid = _fnp.floor(0.5 * (lo + hi))
        ok = cdf(mid) >= q
        narrow = hi - lo > 1
        return (_fnp.where(narrow & ~ok, mid, lo), _fnp.where(narrow & ok, mid, hi))

    return lax.fori_loop(0, 64, bisect, (lo, _fnp.asarray(upper) + 0 * q))[1]


def known_zero(t):
    """A tangent known now to be zero (what fgrad passes for an argument that is
    not being differentiated)."""
    return type(t) is Array and not np.any(np.asarray(t))


def implicit_quantile(solve, cdf, pdf):
    """x(p_lower, p_upper, *params) = solve(p_lower, p_upper, *params): the point
    with cdf(x, *params) = p_lower, given also p_upper = 1 - p_lower (the caller
    passes whichever of q, 1 - q is exact, and solve uses the smaller tail).
    Derivatives by the implicit function theorem: dx = (dp - d cdf/d params .
    dparams) / pdf(x), with dp = dp_lower or -dp_upper, whichever tail was used.
    Parameters whose tangent is known to be zero are skipped: their term is
    zero, and computing it would run the incomplete gamma/beta functions' shape
    series (hundreds of steps) for nothing."""
    @custom_jvp
    def quantile(p_lower, p_upper, *params):
        return solve(p_lower, p_upper, *params)

    @quantile.defjvp
    def quantile_jvp(primals, tangents):
        p_lower, p_upper, *params = primals
        dp_lower, dp_upper, *dparams = tangents
        x = quantile(p_lower, p_upper, *params)
        numerator = _fnp.where(p_lower <= p_upper, dp_lower, -dp_upper)
        for i, dp in enumerate(dparams):
            if known_zero(dp):
                continue

            def cdf_in(p, i=i):
                return cdf(x, *params[:i], p, *params[i + 1:])
            numerator = numerator - jvp(cdf_in, (params[i],), (dp,))[1]
        return x, numerator / pdf(x, *params)

    return quantile
