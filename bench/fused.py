"""Workload 1: a fused element-wise expression, out = sin(x)*y + exp(-x*x), float32.

NumPy makes five passes over memory with temporaries; a fusing compiler makes
one pass that reads x and y and writes out, so the limit is memory bandwidth:
the copy and triad rows (NumPy) show what moving the bytes alone costs.
"""
from common import FGRAD, LIMIT, PEER, Column, Section, Table, budget, measure  # first: threads
import peers

import numpy as np

import fgrad
import fgrad.numpy as fnp

NAME = "fused"
TITLE = "1. Fused element-wise: sin(x)*y + exp(-x*x), float32"
SIZES = (1_000_000, 10_000_000)
COLUMNS = [Column("NumPy", PEER), Column("fgrad jit", FGRAD), Column("jax.jit", PEER),
           Column("torch eager", PEER), Column("torch.compile", PEER),
           Column("copy", LIMIT), Column("triad", LIMIT)]


def expression(np_like, x, y):
    return np_like.sin(x) * y + np_like.exp(-x * x)


def _row(n, quick):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    expected = expression(np, x, y)
    repeat, budget_s = budget(quick, 1.0)
    check = dict(expected=expected, rtol=1e-5, atol=1e-5, repeat=repeat, budget_s=budget_s)
    cells = {"NumPy": measure("NumPy", lambda: expression(np, x, y), **check)}

    f = fgrad.jit(lambda x, y: expression(fnp, x, y))
    cells["fgrad jit"] = measure("fgrad jit", lambda: f(x, y), **check)

    jax = peers.jax()
    if jax is None:
        cells["jax.jit"] = peers.missing("jax")
    else:
        jf = jax.jit(lambda x, y: expression(jax.numpy, x, y))
        jx, jy = jax.device_put(x), jax.device_put(y)
        cells["jax.jit"] = measure("jax.jit", lambda: jf(jx, jy).block_until_ready(), **check)

    torch = peers.torch()
    if torch is None:
        cells["torch eager"] = cells["torch.compile"] = peers.missing("torch")
    else:
        tx, ty = torch.from_numpy(x), torch.from_numpy(y)
        cells["torch eager"] = measure("torch eager", lambda: expression(torch, tx, ty), **check)
        reason = peers.torch_compile_ok()
        if reason:
            cells["torch.compile"] = reason
        else:
            tf = torch.compile(lambda x, y: expression(torch, x, y), dynamic=False)
            cells["torch.compile"] = measure("torch.compile", lambda: tf(tx, ty), **check)

    out = np.empty_like(x)
    cells["copy"] = measure("copy", lambda: np.copyto(out, x), repeat=repeat, budget_s=budget_s)

    def triad():  # out = y + 1.5 * x with out= buffers (two passes in NumPy)
        np.multiply(x, np.float32(1.5), out=out)
        np.add(out, y, out=out)
    cells["triad"] = measure("triad", triad, repeat=repeat, budget_s=budget_s)
    return cells


def _bandwidth_note(n, cells):
    copy = cells.get("copy")
    if not hasattr(copy, "min"):
        return ""
    return f"copy: {2 * 4 * n / copy.min / 1e9:.0f} GB/s at best"


def run(quick=False):
    table = Table(TITLE, COLUMNS, short="1 fused sin·y+exp", note=(
        "One call on fresh inputs; compile time excluded (warm-up call first). The triad is "
        "out = y + 1.5·x in NumPy with out= buffers (two passes)."))
    for n in SIZES:
        cells = _row(n, quick)
        table.add(f"N = {n:,}", cells, _bandwidth_note(n, cells))
    return Section(TITLE, [table], [
        "The copy moves 8 bytes per element (read x, write out); the fused kernel moves 12 "
        "(read x and y, write out), so about 1.5× the copy time is its floor."])


if __name__ == "__main__":
    import common
    common.main_for(run, TITLE)
