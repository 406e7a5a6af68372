"""BFGS and L-BFGS-B as `lax.while_loop`s over fgrad's value_and_grad.

BFGS keeps a dense inverse-Hessian estimate H (starting from the identity),
steps along -H·g with the strong Wolfe line search (c1 = 1e-4, c2 = 0.9) and
updates H with the BFGS formula. It stops when the gradient's norm (`norm`,
∞ by default) is at most `gtol`.

L-BFGS-B here is a projected limited-memory BFGS method for box bounds
l ≤ x ≤ u: the start is clipped into the box; at each iteration a variable is
held fixed when it sits on a bound and its gradient pushes it outwards; the
limited-memory matrix B of the last `maxcor` pairs (s, y), in its compact form,
restricted to the free variables gives the step -B_FF⁻¹·g_F, with components
that would leave the box at once removed (steepest descent on the free
variables if that is no descent direction). The same strong Wolfe search then
runs along the projected path x(α) = clip(x + α·d, l, u), whose slope counts
only components not clipped. A pair (s, y) with too little curvature
(sᵀy ≤ ε·yᵀy) is not stored. It stops when the projected gradient
clip(x - g, l, u) - x has ∞-norm at most `gtol`, or f decreased by at most
ftol·max(|f|, |f_new|, 1) in one iteration, as SciPy's L-BFGS-B does; like it,
a failed line search first drops the stored pairs and tries again, and ends
the run only when no pairs were stored. It is not the Byrd–Lu–Nocedal–Zhu
method SciPy wraps (no generalized Cauchy point: the active set comes from the
gradient's signs at the bounds): both find the same constrained minimisers
(KKT points), along other iterate paths and with other counts.

Status codes: 0 converged, 1 iteration (or evaluation) limit reached, 2 the line
search found no acceptable step, 3 a NaN or infinite value was met.
"""
from typing import Any, NamedTuple

import numpy as np

import fgrad.numpy as fnp
from .. import lax
from ..api import value_and_grad
from .line_search import strong_wolfe

CONVERGED, MAXITER, LINE_SEARCH_FAILED, NOT_FINITE = 0, 1, 2, 3


class _BFGSState(NamedTuple):
    x: Any
    f: Any
    g: Any
    H: Any
    old_f: Any
    k: Any
    nfev: Any
    status: Any
    done: Any


def _norm(g, ord):
    if ord == np.inf:
        return fnp.max(fnp.abs(g))
    if ord == -np.inf:
        return fnp.min(fnp.abs(g))
    return fnp.sum(fnp.abs(g) ** ord) ** (1.0 / ord)


def _finish(failed, converged, limit, finite):
    """(status, done) after an iteration; status -1 means 'go on'."""
    status = fnp.where(~finite, NOT_FINITE, fnp.where(
        failed, LINE_SEARCH_FAILED, fnp.where(converged, CONVERGED,
                                              fnp.where(limit, MAXITER, -1))))
    return status.astype(np.int32), status != -1


def bfgs(fun, x0, args, *, gtol, norm, maxiter, c1, c2, hess_inv0, maxls):
    """Minimise fun(x, *args) from x0 by BFGS; returns the final state."""
    vg = value_and_grad(fun)
    f0, g0 = vg(x0, *args)
    n = x0.shape[0]
    H0 = fnp.eye(n, dtype=x0.dtype) if hess_inv0 is None else fnp.asarray(hess_inv0, x0.dtype)
    small = _norm(g0, norm) <= gtol
    status0 = fnp.where(small, CONVERGED, fnp.where(fnp.isfinite(f0), -1, NOT_FINITE))
    # SciPy's guess of a previous value: the first trial step is α ≈ 1/‖g‖ (length ≈ 1).
    init = _BFGSState(x0, f0, g0, H0, f0 + fnp.sqrt(fnp.sum(g0 * g0)) / 2, fnp.int32(0),
                      fnp.int32(1), status0.astype(np.int32), status0 != -1)
    if maxiter <= 0:
        init = init._replace(status=fnp.where(init.done, init.status, MAXITER).astype(np.int32),
                             done=fnp.bool_(True))

    def body(s):
        p = -(s.H @ s.g)
        dphi0 = fnp.vdot(s.g, p)
        descent = dphi0 < 0
        p = fnp.where(descent, p, -s.g)  # H lost positive definiteness: restart from -g
        dphi0 = fnp.where(descent, dphi0, -fnp.vdot(s.g, s.g))
        guess = 1.01 * 2 * (s.f - s.old_f) / dphi0
        alpha0 = fnp.where((guess > 0) & fnp.isfinite(guess), fnp.minimum(1.0, guess), 1.0)

        def evaluate(alpha):
            x = s.x + alpha * p
            f, g = vg(x, *args)
            return f, g, fnp.vdot(g, p), x

        ls = strong_wolfe(evaluate, s.f, s.g, s.x, dphi0, alpha0, c1=c1, c2=c2, maxiter=maxls)
        step = ls.x - s.x
        y = ls.grad - s.g
        ys = fnp.vdot(y, step)
        rho = fnp.where(ys == 0, 1000.0, 1.0 / fnp.where(ys == 0, 1.0, ys))
        Hy = s.H @ y
        H = (s.H - rho * (fnp.outer(step, Hy) + fnp.outer(Hy, step))
             + (rho * rho * fnp.vdot(y, Hy) + rho) * fnp.outer(step, step))
        k = s.k + 1
        status, done = _finish(ls.failed, _norm(ls.grad, norm) <= gtol, k >= maxiter,
                               fnp.isfinite(ls.fun))
        new = _BFGSState(ls.x, ls.fun, ls.grad, H, s.f, k, s.nfev + ls.nfev, status, done)
        # A failed search keeps the last iterate and estimate.
        return _BFGSState(*[fnp.where(ls.failed, a, b) if i < 4 else b
                            for i, (a, b) in enumerate(zip(s, new))])

    return lax.while_loop(lambda s: ~s.done, body, init)


class _LBFGSBState(NamedTuple):
    x: Any
    f: Any
    g: Any
    S: Any          # (maxcor, n): the stored steps, newest last
    Y: Any          # (maxcor, n): the stored gradient changes
    stored: Any     # how many pairs are stored
    k: Any
    nfev: Any
    status: Any
    done: Any


def _solve_small(K, rhs):
    """K⁻¹·rhs by Gauss–Jordan elimination with partial pivoting (one fori_loop
    over the columns): K is the small 2m×2m middle matrix of the compact form."""
    n = K.shape[0]
    rows = fnp.arange(n)

    def eliminate(k, A):
        column = fnp.take(A, k, axis=1)
        p = fnp.argmax(fnp.where(rows >= k, fnp.abs(column), -1.0))
        row_k, row_p = fnp.take(A, k, axis=0), fnp.take(A, p, axis=0)
        A = fnp.where((rows == k)[:, None], row_p, fnp.where((rows == p)[:, None], row_k, A))
        column = fnp.take(A, k, axis=1)
        factors = fnp.where(rows == k, 0.0, column / fnp.take(column, k))
        return A - fnp.outer(factors, row_p)

    A = lax.fori_loop(0, n, eliminate, fnp.concatenate([K, rhs[:, None]], axis=1))
    return A[:, n] / fnp.diagonal(A[:, :n])


def _subspace_direction(S, Y, stored, g, free):
    """-B_FF⁻¹·g_F: the quasi-Newton step on the free variables, for the L-BFGS
    matrix B = θI - W·M·Wᵀ of the stored pairs (Byrd, Nocedal & Schnabel's
    compact form, W = [Y θS]) restricted to them, inverted by the
    Sherman–Morrison–Woodbury formula (one 2m×2m solve); zero elsewhere."""
    m = S.shape[0]
    valid = fnp.arange(m) >= m - stored
    s_new, y_new = S[m - 1], Y[m - 1]
    sy_new = fnp.vdot(s_new, y_new)
    theta = fnp.where(stored > 0, fnp.vdot(y_new, y_new) / fnp.where(stored > 0, sy_new, 1.0),
                      1.0)
    SY = S @ Y.T                                  # SY[i, j] = s_i·y_j, oldest first
    D = fnp.diag(fnp.diagonal(SY))
    L = fnp.tril(SY, -1)
    middle_inv = fnp.concatenate([fnp.concatenate([-D, L.T], axis=1),
                                  fnp.concatenate([L, theta * (S @ S.T)], axis=1)], axis=0)
    W = fnp.concatenate([Y, theta * S], axis=0) * free  # rows are Wᵀ's, free variables only
    K = middle_inv - (W @ W.T) / theta
    unused = ~fnp.concatenate([valid, valid])
    K = K + fnp.diag(fnp.where(unused, 1.0, 0.0))  # empty slots solve to 0
    g_free = fnp.where(free, g, 0.0)
    z = _solve_small(K, W @ g_free)
    return -fnp.where(free, g_free / theta + (z @ W) / (theta * theta), 0.0)


def projected_gradient(x, g, lower, upper):
    return fnp.clip(x - g, lower, upper) - x


def lbfgsb(fun, x0, args, lower, upper, *, maxcor, ftol, gtol, maxiter, maxfun, maxls):
    """Minimise fun(x, *args) over lower ≤ x ≤ upper from x0; returns the final state."""
    vg = value_and_grad(fun)
    dtype = x0.dtype
    eps = float(np.finfo(dtype).eps)
    x0 = fnp.clip(x0, lower, upper)
    f0, g0 = vg(x0, *args)
    n = x0.shape[0]
    pg_small = fnp.max(fnp.abs(projected_gradient(x0, g0, lower, upper))) <= gtol
    status0 = fnp.where(~fnp.isfinite(f0), NOT_FINITE, fnp.where(pg_small, CONVERGED, -1))
    empty = fnp.zeros((maxcor, n), dtype)
    init = _LBFGSBState(x0, f0, g0, empty, empty, fnp.int32(0), fnp.int32(1),
                        fnp.int32(0), status0.astype(np.int32), status0 != -1)
    if maxiter <= 0:
        init = init._replace(status=fnp.where(init.done, init.status, MAXITER).astype(np.int32),
                             done=fnp.bool_(True))

    def body(s):
        at_lower, at_upper = s.x <= lower, s.x >= upper
        free = ~((at_lower & (s.g > 0)) | (at_upper & (s.g < 0)))
        d = _subspace_direction(s.S, s.Y, s.stored, s.g, free)
        leaving = (at_lower & (d < 0)) | (at_upper & (d > 0))
        d = fnp.where(free & ~leaving, d, 0.0)
        dphi0 = fnp.vdot(s.g, d)
        descent = dphi0 < 0
        d = fnp.where(descent, d, fnp.where(free, -s.g, 0.0))
        dphi0 = fnp.where(descent, dphi0, fnp.vdot(s.g, d))
        # The first step is scaled to unit length, as L-BFGS-B's is.
        dnorm = fnp.sqrt(fnp.vdot(d, d))
        alpha0 = fnp.where(s.stored == 0, fnp.minimum(1.0, 1.0 / fnp.where(dnorm > 0, dnorm, 1.0)),
                           1.0)

        def evaluate(alpha):
            target = s.x + alpha * d
            x = fnp.clip(target, lower, upper)
            f, g = vg(x, *args)
            moving = (target > lower) & (target < upper)
            return f, g, fnp.vdot(g, fnp.where(moving, d, 0.0)), x

        ls = strong_wolfe(evaluate, s.f, s.g, s.x, dphi0, alpha0, maxiter=maxls)
        # A failed search with pairs stored drops them and tries again from steepest
        # descent (as L-BFGS-B does); only a failure without pairs ends the run.
        restart = ls.failed & (s.stored > 0)
        step = ls.x - s.x
        y = ls.grad - s.g
        keep = fnp.vdot(step, y) > eps * fnp.vdot(y, y)
        S = fnp.where(keep, fnp.concatenate([s.S[1:], step[None]]), s.S)
        Y = fnp.where(keep, fnp.concatenate([s.Y[1:], y[None]]), s.Y)
        stored = fnp.where(keep, fnp.minimum(s.stored + 1, maxcor), s.stored)
        S, Y = fnp.where(restart, 0.0, S), fnp.where(restart, 0.0, Y)
        stored = fnp.where(restart, 0, stored)
        k = s.k + 1
        nfev = s.nfev + ls.nfev
        small_pg = fnp.max(fnp.abs(projected_gradient(ls.x, ls.grad, lower, upper))) <= gtol
        small_df = (s.f - ls.fun) <= ftol * fnp.maximum(fnp.maximum(fnp.abs(s.f),
                                                                      fnp.abs(ls.fun)), 1.0)
        status, done = _finish(ls.failed & ~restart, (small_pg | small_df) & ~ls.failed,
                               (k >= maxiter) | (nfev >= maxfun), fnp.isfinite(ls.fun))
        return _LBFGSBState(ls.x, ls.fun, ls.grad, S, Y, stored.astype(np.int32), k, nfev,
                            status, done)

    return lax.while_loop(lambda s: ~s.done, body, init)
