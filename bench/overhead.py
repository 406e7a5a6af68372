"""Workload 4: per-call overhead, where the arithmetic is free and what is left is
each library's own work per call (argument handling, dispatch, tracing, tape).

Cases: a jitted call on 16-element arrays; one eager op; an eager 3-op function
f(x) = sin(x)·x + 1; eager grad of that f on a float32 scalar; eager grad of a
1000-op chain on a 16-element vector. NumPy is the floor where it can do the same.
"""
from common import FGRAD, LIMIT, PEER, Column, Section, Table, budget, measure  # first: threads
import peers

import numpy as np

import fgrad
import fgrad.numpy as fnp

NAME = "overhead"
TITLE = "4. Per-call overhead"
CHAIN_OPS = 1000
COLUMNS = [Column("fgrad", FGRAD), Column("jax", PEER), Column("torch", PEER),
           Column("autograd", PEER), Column("NumPy", LIMIT)]


def tiny(m, x):
    return m.sin(x) * x + 1


def chain(m, x):
    """CHAIN_OPS element-wise ops (sin, then times a constant, alternating), summed."""
    for _ in range(CHAIN_OPS // 2):
        x = m.sin(x) * 1.0001
    return m.sum(x)


def chain_grad_by_hand(x):
    g = np.ones_like(x)
    xs = []
    for _ in range(CHAIN_OPS // 2):
        xs.append(x)
        x = np.sin(x) * np.float32(1.0001)
    for x in reversed(xs):
        g = g * np.cos(x) * np.float32(1.0001)
    return g


def _cases(jax, torch, autograd):
    """{case: {column: (callable, expected) or reason}}, plus notes per case."""
    x16 = np.linspace(-1, 1, 16, dtype=np.float32)
    y16 = np.linspace(1, 2, 16, dtype=np.float32)
    s = np.float32(0.5)
    cases = {}

    def per_lib(fgrad_fn, jax_fn, torch_fn, autograd_fn, numpy_fn, expected):
        row = {"fgrad": fgrad_fn, "jax": jax_fn if jax else peers.missing("jax"),
               "torch": torch_fn if torch else peers.missing("torch"),
               "autograd": autograd_fn if autograd else peers.missing("autograd"),
               "NumPy": numpy_fn}
        return {k: (v, expected) if callable(v) else v for k, v in row.items()}

    jit_f = fgrad.jit(lambda x, y: x * y + 1.0)
    if jax:
        jnp = jax.numpy
        jjit = jax.jit(lambda x, y: x * y + 1.0)
        jx16, jy16, js = jnp.asarray(x16), jnp.asarray(y16), jnp.float32(s)
        jgrad = jax.grad(lambda x: tiny(jnp, x))
        jchain = jax.grad(lambda x: chain(jnp, x))
    if torch:
        tx16, ty16, ts = torch.from_numpy(x16), torch.from_numpy(y16), torch.tensor(s)
        tjit = (torch.compile(lambda x, y: x * y + 1.0, dynamic=False)
                if not peers.torch_compile_ok() else None)

        def tgrad(fn, x):
            x = x.detach().requires_grad_()
            fn(torch, x).backward()
            return x.grad
    if autograd:
        anp = autograd.numpy
        agrad = autograd.grad(lambda x: tiny(anp, x))
        achain = autograd.grad(lambda x: chain(anp, x))

    cases["jitted call x·y + 1, 16 elements"] = per_lib(
        lambda: jit_f(x16, y16),
        jax and (lambda: jjit(jx16, jy16).block_until_ready()),
        torch and (tjit and (lambda: tjit(tx16, ty16)) or peers.torch_compile_ok()),
        "– (no jit)", lambda: x16 * y16 + 1, x16 * y16 + 1)
    cases["eager op: sin, 16 elements"] = per_lib(
        lambda: fnp.sin(x16), jax and (lambda: jnp.sin(jx16).block_until_ready()),
        torch and (lambda: torch.sin(tx16)), autograd and (lambda: anp.sin(x16)),
        lambda: np.sin(x16), np.sin(x16))
    cases["eager f(x) = sin(x)·x + 1, scalar"] = per_lib(
        lambda: tiny(fnp, s), jax and (lambda: tiny(jnp, js).block_until_ready()),
        torch and (lambda: tiny(torch, ts)), autograd and (lambda: tiny(anp, s)),
        lambda: tiny(np, s), tiny(np, s))
    g = fgrad.grad(lambda x: tiny(fnp, x))
    cases["eager grad of f, scalar"] = per_lib(
        lambda: g(s), jax and (lambda: jgrad(js).block_until_ready()),
        torch and (lambda: tgrad(tiny, ts)), autograd and (lambda: agrad(s)),
        lambda: np.cos(s) * s + np.sin(s), np.cos(s) * s + np.sin(s))
    gc = fgrad.grad(lambda x: chain(fnp, x))
    cases[f"eager grad of a {CHAIN_OPS}-op chain, 16 elements"] = per_lib(
        lambda: gc(x16), jax and (lambda: jchain(jx16).block_until_ready()),
        torch and (lambda: tgrad(chain, tx16)), autograd and (lambda: achain(x16)),
        lambda: chain_grad_by_hand(x16), chain_grad_by_hand(x16))
    return cases


def run(quick=False):
    jax, torch, autograd = peers.jax(), peers.torch(), peers.autograd()
    table = Table(TITLE, COLUMNS, unit="µs", scale=1e6, short="4 overhead", note=(
        "jax: un-jitted calls (each op dispatched on its own) except the jitted row, which is "
        "jax.jit; torch: eager except the jitted row, which is torch.compile; autograd wraps "
        "NumPy. NumPy: the same arithmetic with no autodiff (the grad rows: the derivative "
        "written by hand)."))
    repeat, budget_s = budget(quick, 0.5, repeat=9)
    for case, row in _cases(jax, torch, autograd).items():
        cells = {}
        for col, item in row.items():
            if isinstance(item, str) or item is None:
                cells[col] = item or "–"
                continue
            fn, expected = item
            cells[col] = measure(f"{col}: {case}", fn, expected, rtol=1e-5, atol=1e-6,
                                 repeat=repeat, budget_s=budget_s)
        table.add(case, cells)
    return Section(TITLE, [table], [
        "Every result was checked against NumPy before timing; first calls (compilation) "
        "excluded."])


if __name__ == "__main__":
    import common
    common.main_for(run, TITLE)
