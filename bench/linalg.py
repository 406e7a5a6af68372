"""Workload 10: linear algebra (issue 17's rows), float64.

- a Cholesky factorisation and two triangular solves (L y = B, Lᵀ x = y) at
  n = 256, B 256×256;
- 64 inverses of 32×32 matrices in one batched call;
- the reduced SVD of a 256×128 matrix;
- the gradient of a Gaussian process's negative log marginal likelihood with
  respect to its three kernel hyper-parameters (log length scale, log signal
  and noise scales; squared-exponential kernel) at n = 500 points in 2-d.

fgrad's jitted programs call LAPACK from native code (SciPy's routines: see
fgrad/_src/cpu/lapack.py). The peers: NumPy/SciPy as a user writes it (the GP
gradient by its closed form, 0.5·tr((K⁻¹ − ααᵀ) ∂K/∂θ), with K⁻¹ from the
Cholesky factor) and jax.jit of the same programs.
"""
from common import (FGRAD, PEER, Column, Section, Table, agree, budget,  # first: threads
                    guarded, measure, time_call)
import peers

import math

import numpy as np
import scipy.linalg as sl

import fgrad
import fgrad.numpy as fnp
from fgrad import lax

NAME = "linalg"
TITLE = "10. Linear algebra: Cholesky and solves, batched inverses, SVD, a GP's gradient, float64"
COLUMNS = [Column("fgrad jit", FGRAD), Column("NumPy/SciPy", PEER), Column("jax.jit", PEER)]
N_CHOL, N_BATCH, N_SMALL, SVD_SHAPE, N_GP = 256, 64, 32, (256, 128), 500


def _spd(rng, *shape):
    """Well-conditioned symmetric positive definite matrices."""
    a = rng.standard_normal(shape)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


# ----------------------------------------------------------------------------
# The programs

def _fgrad_cholesky_solves(a, b):
    l = fnp.linalg.cholesky(a)
    y = lax.linalg.triangular_solve(l, b, left_side=True, lower=True)
    return lax.linalg.triangular_solve(l, y, left_side=True, lower=True, transpose_a=True)


def _scipy_cholesky_solves(a, b):
    l = sl.cholesky(a, lower=True)
    return sl.solve_triangular(l, sl.solve_triangular(l, b, lower=True), lower=True, trans=1)


def _jax_cholesky_solves(jax):
    def f(a, b):
        l = jax.numpy.linalg.cholesky(a)
        y = jax.scipy.linalg.solve_triangular(l, b, lower=True)
        return jax.scipy.linalg.solve_triangular(l, y, lower=True, trans=1)
    return f


def gp_nll(m, cholesky, solve_lower):
    """The GP's negative log marginal likelihood as a function of theta = (log
    length scale, log signal scale, log noise scale), for array module m."""
    def nll(theta, x, y):
        ell, sf, sn = m.exp(theta[0]), m.exp(theta[1]), m.exp(theta[2])
        d2 = m.sum((x[:, None, :] - x[None, :, :]) ** 2, axis=-1)
        k = sf ** 2 * m.exp(-0.5 * d2 / ell ** 2) + sn ** 2 * m.eye(x.shape[0])
        l = cholesky(k)
        z = solve_lower(l, y)
        return (0.5 * m.sum(z ** 2) + m.sum(m.log(m.diagonal(l)))
                + 0.5 * x.shape[0] * math.log(2 * math.pi))
    return nll


def gp_gradient_by_hand(theta, x, y):
    """d nll / d theta = 0.5 tr((K⁻¹ − α αᵀ) dK/dθ), α = K⁻¹ y."""
    ell, sf, sn = np.exp(theta)
    d2 = ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    rbf = sf ** 2 * np.exp(-0.5 * d2 / ell ** 2)
    k = rbf + sn ** 2 * np.eye(len(x))
    factor = sl.cho_factor(k, lower=True)
    alpha = sl.cho_solve(factor, y)
    w = sl.cho_solve(factor, np.eye(len(x))) - np.outer(alpha, alpha)
    return 0.5 * np.array([np.sum(w * rbf * d2 / ell ** 2), np.sum(w * 2 * rbf),
                           2 * sn ** 2 * np.trace(w)])


def _fgrad_solve_lower(l, y):
    return lax.linalg.triangular_solve(l, y[:, None], left_side=True, lower=True)[:, 0]


# ----------------------------------------------------------------------------
# Rows

def _jax_cell(make, args, expected, tol, repeat, budget_s, check=None):
    jax = peers.jax()
    if jax is None:
        return peers.missing("jax")
    fn = jax.jit(make(jax))
    jargs = jax.device_put(args)
    return _timed("jax.jit", lambda: jax.block_until_ready(fn(*jargs)), expected, tol, repeat,
                  budget_s, check)


def _timed(what, fn, expected, tol, repeat, budget_s, check=None):
    """measure(), or with `check` (got -> comparable pytree) the agreement of
    check(fn()) with `expected` first (for results unique only up to signs)."""
    if check is None:
        return measure(what, fn, expected, *tol, repeat=repeat, budget_s=budget_s)

    def go():
        agree(what, check(fn()), expected, *tol)
        return time_call(fn, repeat, budget_s)
    return guarded(go)


def _cells(impls, expected, tol, repeat, budget_s, check=None):
    cells = {}
    for column, fn in impls.items():
        if column == "jax.jit":
            cells[column] = _jax_cell(*fn, expected, tol, repeat, budget_s, check)
        else:
            cells[column] = _timed(column, fn, expected, tol, repeat, budget_s, check)
    return cells


def _svd_check(outs):
    """(singular values, u·diag(s)·vt): what every library's SVD agrees on."""
    u, s, vt = (np.asarray(o) for o in outs)
    return s, (u * s) @ vt


def run(quick=False):
    rng = np.random.default_rng(0)
    repeat, budget_s = budget(quick, 0.6)
    table = Table("Linear algebra", COLUMNS, short="10 linalg", note=(
        "float64. fgrad: jit of fgrad.numpy.linalg / fgrad.lax.linalg (LAPACK called from "
        "native code, SciPy's routines); NumPy/SciPy: scipy.linalg (Cholesky, "
        "solve_triangular, svd with lapack_driver='gesdd'), numpy.linalg.inv (batched); "
        "jax.jit: jax.numpy.linalg and jax.scipy.linalg. Each result was checked against "
        "NumPy/SciPy's before timing (rtol 1e-8; SVD: singular values and u·s·vt)."))
    tol = (1e-8, 1e-10)

    a, b = _spd(rng, N_CHOL, N_CHOL), rng.standard_normal((N_CHOL, N_CHOL))
    jf = fgrad.jit(_fgrad_cholesky_solves)
    table.add(f"Cholesky + 2 triangular solves, n = {N_CHOL}", _cells({
        "fgrad jit": lambda: jf(a, b),
        "NumPy/SciPy": lambda: _scipy_cholesky_solves(a, b),
        "jax.jit": (_jax_cholesky_solves, (a, b))}, _scipy_cholesky_solves(a, b), tol,
        repeat, budget_s))

    small = rng.standard_normal((N_BATCH, N_SMALL, N_SMALL)) + 4 * np.eye(N_SMALL)
    jinv = fgrad.jit(fnp.linalg.inv)
    table.add(f"{N_BATCH} inverses of {N_SMALL}×{N_SMALL} (batched)", _cells({
        "fgrad jit": lambda: jinv(small),
        "NumPy/SciPy": lambda: np.linalg.inv(small),
        "jax.jit": (lambda jax: jax.numpy.linalg.inv, (small,))}, np.linalg.inv(small), tol,
        repeat, budget_s))

    m = rng.standard_normal(SVD_SHAPE)
    jsvd = fgrad.jit(lambda m: fnp.linalg.svd(m, full_matrices=False))
    reference = _svd_check(sl.svd(m, full_matrices=False))
    table.add(f"SVD of {SVD_SHAPE[0]}×{SVD_SHAPE[1]} (reduced)", _cells({
        "fgrad jit": lambda: jsvd(m),
        "NumPy/SciPy": lambda: sl.svd(m, full_matrices=False, lapack_driver="gesdd"),
        "jax.jit": (lambda jax: lambda m: jax.numpy.linalg.svd(m, full_matrices=False), (m,))},
        reference, (1e-8, 1e-8), repeat, budget_s, check=_svd_check))

    x = rng.uniform(-3, 3, (N_GP, 2))
    y = np.sin(x[:, 0]) * np.cos(x[:, 1]) + 0.1 * rng.standard_normal(N_GP)
    theta = np.log(np.array([0.8, 1.2, 0.3]))
    grad_gp = fgrad.jit(fgrad.grad(gp_nll(fnp, fnp.linalg.cholesky, _fgrad_solve_lower)))

    def jax_gp(jax):
        nll = gp_nll(jax.numpy, jax.numpy.linalg.cholesky,
                     lambda l, y: jax.scipy.linalg.solve_triangular(l, y, lower=True))
        return jax.grad(nll)
    gp_repeat, gp_budget = budget(quick, 1.0, repeat=5)
    table.add(f"GP marginal likelihood gradient, n = {N_GP}", _cells({
        "fgrad jit": lambda: grad_gp(theta, x, y),
        "NumPy/SciPy": lambda: gp_gradient_by_hand(theta, x, y),
        "jax.jit": (jax_gp, (theta, x, y))}, gp_gradient_by_hand(theta, x, y), (1e-7, 1e-9),
        gp_repeat, gp_budget))
    return Section(TITLE, [table], [
        "fgrad's decompositions run SciPy's LAPACK (its own OpenBLAS copy) from compiled "
        "code, so the single large cases measure the same routines plus copies into "
        "column-major order (none for the triangular solves and the inverse, which hand "
        "LAPACK the row-major matrix as its transpose); the batched and GP rows measure "
        "per-call overhead and the derivative programs."])


if __name__ == "__main__":
    import common
    common.main_for(run, TITLE)
