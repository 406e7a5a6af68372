"""A line search for the strong Wolfe conditions (Nocedal & Wright, Algorithms 3.5
and 3.6), written as one `lax.while_loop` so that it jits and vmaps.

Along a path x(α) with φ(α) = f(x(α)) it looks for a step α > 0 with
    φ(α) ≤ φ(0) + c1·α·φ'(0)          (sufficient decrease) and
    |φ'(α)| ≤ c2·|φ'(0)|               (curvature).
Phase one tries α0, 2α0, 4α0, … until a trial satisfies both conditions or
brackets such a step (a trial fails the decrease or no longer descends); phase
two ("zoom") shrinks the bracket [lo, hi], trying the minimiser of the cubic
through both ends' values and slopes, or the midpoint when that cubic's
minimiser lies outside the middle 80% of the bracket. One function and gradient
evaluation per iteration. A trial at `alpha_max` that decreases enough ends the
search (a projected path can go no further); after `maxiter` evaluations it
reports failure.
"""
from typing import Any, NamedTuple

import fgrad.numpy as fnp
from .. import lax


class LineSearchResult(NamedTuple):
    alpha: Any     # the step found
    fun: Any       # φ(α)
    grad: Any      # ∇f at x(α)
    x: Any         # x(α)
    nfev: Any      # evaluations made
    failed: Any    # True when no step met the conditions


class _State(NamedTuple):
    i: Any
    done: Any
    failed: Any
    zooming: Any
    trial: Any                 # the next bracketing trial
    prev: Any                  # (α, φ, φ') of the last bracketing trial
    lo: Any                    # bracket ends as (α, φ, φ'); lo has the lower φ
    hi: Any
    best: LineSearchResult     # the accepted point, once done


def _cubic_step(lo, hi):
    """The minimiser of the cubic through lo and hi, or the midpoint where it is
    not defined or falls outside the middle 80% of the bracket."""
    (a, fa, da), (b, fb, db) = lo, hi
    width = b - a
    mid = a + 0.5 * width
    safe_width = fnp.where(width == 0, 1.0, width)
    d1 = da + db - 3 * (fa - fb) / (-safe_width)
    disc = d1 * d1 - da * db
    d2 = fnp.sign(width) * fnp.sqrt(fnp.maximum(disc, 0.0))
    denom = db - da + 2 * d2
    safe_denom = fnp.where(denom == 0, 1.0, denom)
    step = b - width * (db + d2 - d1) / safe_denom
    inside = fnp.abs(step - mid) <= 0.4 * fnp.abs(width)
    ok = (disc >= 0) & (denom != 0) & fnp.isfinite(step) & inside
    return fnp.where(ok, step, mid)


def _pick(c, a, b):
    return tuple(fnp.where(c, p, q) for p, q in zip(a, b))


def strong_wolfe(evaluate, f0, g0, x0, dphi0, alpha0, alpha_max=fnp.inf, c1=1e-4, c2=0.9,
                 maxiter=20):
    """Search along a path: evaluate(α) gives (φ(α), ∇f at x(α), φ'(α), x(α)).
    f0, g0, x0, dphi0 describe α = 0 (dphi0 < 0). Returns a LineSearchResult."""
    dtype = x0.dtype
    eps = float(fnp.finfo(dtype).eps)
    zero = fnp.zeros((), dtype)
    start = (zero, f0, dphi0)
    init = _State(fnp.int32(0), fnp.bool_(False), fnp.bool_(False), fnp.bool_(False),
                  fnp.minimum(alpha0, alpha_max).astype(dtype), start, start, start,
                  LineSearchResult(zero, f0, g0, x0, fnp.int32(0), fnp.bool_(False)))

    def running(s):
        return ~s.done

    def body(s):
        alpha = fnp.where(s.zooming, _cubic_step(s.lo, s.hi), s.trial)
        f, g, d, x = evaluate(alpha)
        point = (alpha, f, d)
        too_high = (f > f0 + c1 * alpha * dphi0) | ~fnp.isfinite(f)
        flat_enough = fnp.abs(d) <= -c2 * dphi0
        # Phase one: bracketing.
        b_hi = too_high | ((s.i > 0) & (f >= s.prev[1]))
        b_done = ~b_hi & (flat_enough | (alpha >= alpha_max))
        b_lo = ~b_hi & ~b_done & (d >= 0)
        b_zoom = b_hi | b_lo
        b_lo_end = _pick(b_hi, s.prev, point)
        b_hi_end = _pick(b_hi, point, s.prev)
        # Phase two: zoom.
        z_hi = too_high | (f >= s.lo[1])
        z_done = ~z_hi & flat_enough
        z_flip = ~z_hi & (d * (s.hi[0] - s.lo[0]) >= 0)
        z_lo_end = _pick(z_hi, s.lo, point)
        z_hi_end = _pick(z_hi, point, _pick(z_flip, s.lo, s.hi))

        zooming = s.zooming
        done = fnp.where(zooming, z_done, b_done)
        lo = _pick(zooming, z_lo_end, _pick(b_zoom, b_lo_end, s.lo))
        hi = _pick(zooming, z_hi_end, _pick(b_zoom, b_hi_end, s.hi))
        # A bracket that shrank to nothing (in floating point) holds no better step.
        collapsed = (zooming | b_zoom) & (fnp.abs(hi[0] - lo[0]) <= eps * fnp.abs(hi[0]))
        i = s.i + 1
        failed = ~done & (collapsed | (i >= maxiter))
        best = LineSearchResult(alpha, f, g, x, i, fnp.bool_(False))
        best = LineSearchResult(*_pick_tree(done, best, s.best._replace(nfev=i,
                                                                         failed=failed)))
        return _State(i, done | failed, failed, zooming | b_zoom,
                      fnp.minimum(2 * alpha, alpha_max), point, lo, hi, best)

    return lax.while_loop(running, body, init).best


def _pick_tree(c, a, b):
    return [fnp.where(c, p, q) for p, q in zip(a, b)]
