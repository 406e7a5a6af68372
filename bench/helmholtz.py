"""Workload 3: the AD survey's table (Baydin et al., JMLR 2018) on the Helmholtz free energy

    f(x) = R·T·Σ xᵢ·log(xᵢ / (1 − bᵀx))
           − xᵀAx / (√8·bᵀx) · log((1 + (1+√2)·bᵀx) / (1 + (1−√2)·bᵀx))

with positive b, symmetric A and x scaled so that bᵀx = 0.5, float64. For each
n the survey reports time(gradient) / time(f) for numerical (central)
differences, forward mode and reverse mode; reverse mode should stay a small
constant while the other two grow with n.

Numerical differences evaluate f at the 2n points x ± h·eᵢ in one batched call
(vmap); forward mode is jacfwd (n tangents at once); reverse mode is grad.
"""
from common import (FGRAD, INFO, PEER, Column, Section, Table, agree, budget,  # first: threads
                    guarded, time_call)
import peers

import numpy as np

import fgrad
import fgrad.numpy as fnp

NAME = "helmholtz"
TITLE = "3. The AD survey's table: Helmholtz free energy, gradient cost / f cost, float64"
SIZES = (1, 8, 15, 22, 29, 36, 43, 50, 500, 5000)
ONLY_REVERSE_FROM = 5000  # forward and numerical cost n passes: skipped from here on
R, T = 8.314, 300.0
H = 1e-5  # central-difference step, relative to x (float64: ≈ eps^(1/3))


def problem(n):
    rng = np.random.default_rng(n)
    b = rng.uniform(0.1, 1.0, n)
    a = rng.uniform(0.0, 1.0, (n, n))
    a = (a + a.T) / 2
    x = rng.uniform(0.1, 1.0, n)
    return a, b, x * (0.5 / (b @ x))


def helmholtz(m, a, b):
    """f for the array module m (fgrad.numpy, jax.numpy, torch, autograd.numpy)."""
    s2 = np.sqrt(2.0)

    def f(x):
        bx = b @ x
        return (R * T * m.sum(x * m.log(x / (1 - bx)))
                - (x @ (a @ x)) / (np.sqrt(8.0) * bx)
                * m.log((1 + (1 + s2) * bx) / (1 + (1 - s2) * bx)))
    return f


def central_differences(m, vmap, f, n):
    """The gradient from f at x ± h·eᵢ, all 2n points in one batched call."""
    def g(x):
        steps = H * m.concatenate([m.diag(x), -m.diag(x)])
        fx = vmap(f)(x + steps)
        return (fx[:n] - fx[n:]) / (2 * H * x)
    return g


def exact_gradient(a, b, x):
    """∂f/∂x by hand, the reference every gradient is checked against."""
    s2 = np.sqrt(2.0)
    bx, q = b @ x, x @ a @ x
    u, v = 1 + (1 + s2) * bx, 1 + (1 - s2) * bx
    log_ratio = np.log(u / v)
    d_bx = R * T * np.sum(x) / (1 - bx)
    d_entropy = R * T * (np.log(x / (1 - bx)) + 1) + d_bx * b
    d_q = 2 * (a @ x) * log_ratio / (np.sqrt(8.0) * bx)
    d_by_bx = q / np.sqrt(8.0) * (-log_ratio / bx ** 2 + ((1 + s2) / u - (1 - s2) / v) / bx)
    return d_entropy - d_q - d_by_bx * b


# ----------------------------------------------------------------------------
# One library's f, gradient by each mode; each returns {mode: callable or reason}

def _fgrad(a, b, n, jit):
    f = helmholtz(fnp, a, b)
    wrap = fgrad.jit if jit else (lambda g: g)
    modes = {"f": wrap(f), "reverse": wrap(fgrad.grad(f))}
    if jit and n < ONLY_REVERSE_FROM:
        modes["forward"] = wrap(fgrad.jacfwd(f))
        modes["numerical"] = wrap(central_differences(fnp, fgrad.vmap, f, n))
    return modes


def _jax(a, b, n):
    jax = peers.jax()
    jnp = jax.numpy
    f = helmholtz(jnp, jnp.asarray(a), jnp.asarray(b))
    ready = lambda g: lambda x: g(x).block_until_ready()  # noqa: E731
    modes = {"f": ready(jax.jit(f)), "reverse": ready(jax.jit(jax.grad(f)))}
    if n < ONLY_REVERSE_FROM:
        modes["forward"] = ready(jax.jit(jax.jacfwd(f)))
        modes["numerical"] = ready(jax.jit(central_differences(jnp, jax.vmap, f, n)))
    return modes, jnp.asarray


def _torch(a, b):
    torch = peers.torch()
    f = helmholtz(torch, torch.from_numpy(a), torch.from_numpy(b))

    def grad(x):
        x = x.detach().requires_grad_()
        f(x).backward()
        return x.grad
    return {"f": f, "reverse": grad}, torch.from_numpy


def _autograd(a, b):
    autograd = peers.autograd()
    f = helmholtz(autograd.numpy, a, b)
    return {"f": f, "reverse": autograd.grad(f)}


LIBS = ("fgrad jit", "fgrad eager", "jax.jit", "torch eager", "autograd")
MODES = ("numerical", "forward", "reverse")


def _implementations(a, b, x, n):
    """{library: ({mode: callable}, its input x) or the reason it is missing}."""
    out = {"fgrad jit": (_fgrad(a, b, n, True), x), "fgrad eager": (_fgrad(a, b, n, False), x)}
    if peers.jax() is None:
        out["jax.jit"] = peers.missing("jax")
    else:
        modes, convert = _jax(a, b, n)
        out["jax.jit"] = (modes, convert(x))
    if peers.torch() is None:
        out["torch eager"] = peers.missing("torch")
    else:
        modes, convert = _torch(a, b)
        out["torch eager"] = (modes, convert(x))
    out["autograd"] = ((_autograd(a, b), x) if peers.autograd() is not None
                       else peers.missing("autograd"))
    return out


def _measure_n(n, quick):
    """{(library, mode): Timing or reason} for one n, every gradient checked first."""
    a, b, x = problem(n)
    g_exact = exact_gradient(a, b, x)
    f_exact = float(helmholtz(np, a, b)(x))
    repeat, budget_s = budget(quick, 0.25, repeat=5)
    out = {}
    for lib, impl in _implementations(a, b, x, n).items():
        if isinstance(impl, str):
            out.update({(lib, m): impl for m in ("f",) + MODES})
            continue
        modes, xin = impl
        for mode in ("f",) + MODES:
            if mode not in modes:
                out[(lib, mode)] = ("skipped: n passes" if n >= ONLY_REVERSE_FROM and
                                    lib in ("fgrad jit", "jax.jit") else "–")
                continue
            fn = modes[mode]
            expected, rtol = ((f_exact, 1e-9) if mode == "f" else
                              (g_exact, 1e-4 if mode == "numerical" else 1e-8))
            atol = rtol * float(np.max(np.abs(expected)))

            def go(fn=fn, mode=mode, expected=expected, rtol=rtol, atol=atol):
                agree(f"{lib} {mode}", fn(xin), expected, rtol, atol)
                return time_call(lambda: fn(xin), repeat, budget_s)
            out[(lib, mode)] = guarded(go)
    return out


def _ratio(cells, lib, mode):
    f, g = cells.get((lib, "f")), cells.get((lib, mode))
    if hasattr(f, "median") and hasattr(g, "median"):
        return g.median / f.median
    return g if isinstance(g, str) else None


def _library_table(title, short):
    columns = [Column(lib, FGRAD if lib.startswith("fgrad") else PEER) for lib in LIBS]
    return Table(title, columns, unit="µs", scale=1e6, short=short)


def run(quick=False):
    survey_cols = ([Column(f"fgrad jit: {mode}", FGRAD if mode == "reverse" else INFO)
                    for mode in MODES] + [Column("fgrad eager: reverse", INFO)]
                   + [Column(f"jax.jit: {mode}", PEER if mode == "reverse" else INFO)
                      for mode in MODES]
                   + [Column("torch eager: reverse", PEER), Column("autograd: reverse", PEER)])
    survey = Table("3a. time(gradient) / time(f), the survey's table", survey_cols, unit="×",
                   short="3a Helmholtz grad/f",
                   note="Each library's gradient time divided by its own f time. The ratio "
                        "column compares fgrad jit's reverse-mode ratio with the best peer's.")
    absolute = _library_table("3b. Reverse-mode gradient, absolute time", "3b Helmholtz grad")
    f_table = _library_table("3c. f alone, absolute time", "3c Helmholtz f")
    for n in SIZES:
        cells = _measure_n(n, quick)
        survey.add(f"n = {n}", {f"{lib}: {mode}": _ratio(cells, lib, mode)
                                for lib in LIBS for mode in MODES
                                if f"{lib}: {mode}" in {c.name for c in survey_cols}})
        absolute.add(f"n = {n}", {lib: cells[(lib, "reverse")] for lib in LIBS})
        f_table.add(f"n = {n}", {lib: cells[(lib, "f")] for lib in LIBS})
    return Section(TITLE, [survey, absolute, f_table], [
        "Every gradient was checked against the gradient written by hand before timing "
        "(rtol 1e-8; central differences 1e-4).",
        f"At n = {ONLY_REVERSE_FROM} forward mode and numerical differences (n passes of an "
        "O(n²) function) are skipped.",
        "The survey (Baydin et al., Table 4) measured reverse mode at roughly 2–5× f; forward "
        "mode and numerical differences grow linearly with n."])


if __name__ == "__main__":
    import common
    common.main_for(run, TITLE)
