"""Workload 9: control flow (the control-flow issue's rows).

- Trace + compile time of a jitted `lax.scan` over 10 and over 10,000 steps:
  loops are not unrolled, so the two should cost the same.
- jit(grad) of a 1000-step tanh RNN (hidden 128, batch 32, float32) written with
  scan, against jax.jit of the same program (also with subnormals flushed, as
  XLA does: `fgrad.config.update("flush_denormals", True)`). The loss is the sum
  of squares of the last state; gradients w.r.t. both weight matrices.
"""
from common import (FGRAD, PEER, Column, Section, Table, Timing, budget,  # first: threads
                    guarded, measure)
import peers

import statistics
import time

import numpy as np

import fgrad
import fgrad.numpy as fnp
from fgrad import lax

NAME = "control_flow"
TITLE = "9. Control flow: scan compile time and a 1000-step RNN's jit(grad), float32"
H, B, T = 128, 32, 1000


def _scan_program(m, scan, steps, shift):
    def f(x):
        def body(c, _):
            return m.sin(c) * 0.5 + shift, None
        c, _ = scan(body, x, None, length=steps)
        return c
    return f


def _first_call_times(make, x, repeat):
    times = []
    for k in range(repeat):
        fn = make(k)
        start = time.perf_counter()
        np.asarray(fn(x))
        times.append(time.perf_counter() - start)
    return Timing(statistics.median(times), min(times), repeat, 1)


def _compile_rows(quick):
    jax = peers.jax()
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    repeat = 2 if quick else 3
    # one-time costs (LLVM and the math library set-up, JAX's first dispatch) first
    fgrad.jit(_scan_program(fnp, lax.scan, 3, 0.1))(x)
    if jax is not None:
        jax.jit(_scan_program(jax.numpy, jax.lax.scan, 3, 0.1))(x).block_until_ready()
    rows = {}
    for steps in (10, 10_000):
        # a new function and constant per repeat: every first call traces and compiles
        # (the constant keeps fgrad's disk cache and JAX's caches from answering)
        cells = {"fgrad jit": guarded(lambda: _first_call_times(
            lambda k: fgrad.jit(_scan_program(fnp, lax.scan, steps, 0.25 + 1e-4 * k)), x,
            repeat))}
        if jax is None:
            cells["jax.jit"] = peers.missing("jax")
        else:
            cells["jax.jit"] = guarded(lambda: _first_call_times(
                lambda k: jax.jit(_scan_program(jax.numpy, jax.lax.scan, steps,
                                                0.25 + 1e-4 * k)), x, repeat))
        rows[f"scan over {steps} steps: first call"] = cells
    return rows


def _rnn_data():
    rng = np.random.default_rng(0)
    wx = (rng.standard_normal((H, H)) / np.sqrt(H)).astype(np.float32)
    wh = (rng.standard_normal((H, H)) / np.sqrt(H)).astype(np.float32)
    xs = rng.standard_normal((T, B, H)).astype(np.float32)
    h0 = np.zeros((B, H), np.float32)
    return (wx, wh), h0, xs


def _rnn_loss(m, scan):
    def loss(params, h0, xs):
        wx, wh = params

        def cell(h, x):
            return m.tanh(x @ wx + h @ wh), None
        h, _ = scan(cell, h0, xs)
        return m.sum(h * h)
    return loss


def _reference_grads(params, h0, xs):
    """The gradients by a float64 NumPy backward pass through the unrolled loop."""
    wx, wh = (p.astype(np.float64) for p in params)
    hs = [h0.astype(np.float64)]
    for x in xs.astype(np.float64):
        hs.append(np.tanh(x @ wx + hs[-1] @ wh))
    g_wx, g_wh = np.zeros_like(wx), np.zeros_like(wh)
    ct = 2 * hs[-1]
    for t in range(len(xs) - 1, -1, -1):
        pre = ct * (1 - hs[t + 1] ** 2)
        g_wx += xs[t].astype(np.float64).T @ pre
        g_wh += hs[t].T @ pre
        ct = pre @ wh.T
    return g_wx, g_wh


def _rnn_rows(quick):
    params, h0, xs = _rnn_data()
    expected = _reference_grads(params, h0, xs)
    repeat, seconds = budget(quick, 3.0, repeat=5)
    cells = {}
    for label, flush in (("fgrad jit", False), ("fgrad jit, flush denormals", True)):
        saved = fgrad.config.flush_denormals
        fgrad.config.update("flush_denormals", flush)
        try:
            g = fgrad.jit(fgrad.grad(_rnn_loss(fnp, lax.scan)))
            cells[label] = measure(label, lambda: g(params, h0, xs), expected, rtol=2e-3,
                                   atol=1e-4, repeat=repeat, budget_s=seconds)
        finally:
            fgrad.config.update("flush_denormals", saved)
    jax = peers.jax()
    if jax is None:
        cells["jax.jit"] = peers.missing("jax")
    else:
        jg = jax.jit(jax.grad(_rnn_loss(jax.numpy, jax.lax.scan)))
        cells["jax.jit"] = measure(
            "jax.jit", lambda: [np.asarray(v) for v in jg(params, h0, xs)], expected,
            rtol=2e-3, atol=1e-4, repeat=repeat, budget_s=seconds)
    return {f"jit(grad), {T}-step RNN, hidden {H}, batch {B}": cells}


def run(quick=False):
    compile_table = Table("scan compile time", [Column("fgrad jit", FGRAD),
                                                Column("jax.jit", PEER)],
                          short="9 scan compile", note=(
        "First call (trace + compile + a run on 8 elements) of a new jitted function "
        "scanning sin(c)/2 + 1/4 over 10 or 10,000 steps. No unrolling: the two rows "
        "should match."))
    for case, cells in _compile_rows(quick).items():
        compile_table.add(case, cells)
    rnn_table = Table("RNN jit(grad)", [Column("fgrad jit", FGRAD),
                                        Column("fgrad jit, flush denormals", FGRAD),
                                        Column("jax.jit", PEER)], short="9 RNN grad", note=(
        "Gradients w.r.t. both weight matrices, checked against a float64 NumPy backward "
        "pass. The gradient vanishes over 1000 steps, so without flushing, later steps "
        "of the backward pass compute with subnormal floats (slow on x86); XLA flushes "
        "them. fgrad's flush applies to its own kernels, not to OpenBLAS's worker "
        "threads."))
    for case, cells in _rnn_rows(quick).items():
        rnn_table.add(case, cells)
    return Section(TITLE, [compile_table, rnn_table], [
        "A scan whose body compiles to native kernels runs as a native loop inside the "
        "compiled program (the RNN's forward and backward scans included)."])


if __name__ == "__main__":
    import common
    common.main_for(run, TITLE)
