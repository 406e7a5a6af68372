"""Per-call overhead of eager (un-jitted) fgrad on a tiny function.

The function is f(x) = sin(x) * x + 1 on a float32 scalar, so the arithmetic
itself costs next to nothing and the time measured is the library's own
bookkeeping per call. The target for fgrad's eager grad is <= 50 us per call.

    python3 bench/eager_overhead.py      # or `make bench` for every benchmark

Optional peers (HIPS autograd, PyTorch, JAX) are timed when importable and
listed as skipped otherwise; this script never installs anything.
"""
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine, main_for, per_call_seconds  # noqa: E402

import fgrad  # noqa: E402
import fgrad.numpy as fnp

NAME = "eager_overhead"
TITLE = "Eager per-call overhead: f(x) = sin(x)*x + 1, float32 scalar"
TARGET_US = 50.0
X = 0.5
BASELINE = "NumPy f, 0-d array"


def _cases():
    """(label, callable or None, note) for every row; None means skipped."""
    x32 = np.float32(X)
    cases = []

    def f(x):
        return fnp.sin(x) * x + 1

    g = fgrad.grad(f)
    expected = np.cos(X) * X + np.sin(X)
    assert abs(float(g(x32)) - expected) < 1e-5, (float(g(x32)), expected)
    xa = fnp.asarray(x32)
    cases.append(("fgrad grad(f), NumPy float32 input", lambda: g(x32), "target: <= 50 µs"))
    cases.append(("fgrad grad(f), fgrad Array input", lambda: g(xa), ""))
    cases.append(("fgrad f (no grad)", lambda: f(x32), "3 primitives, eager"))
    x0d = np.asarray(x32)
    cases.append(("NumPy f, 0-d array", lambda: np.sin(x0d) * x0d + 1,
                  "what fgrad's primitives run"))
    cases.append(("NumPy f, NumPy scalar", lambda: np.sin(x32) * x32 + 1,
                  "NumPy's scalar fast path"))
    cases.append(("NumPy f and f' by hand", lambda: (np.sin(x32) * x32 + 1,
                                                     np.cos(x32) * x32 + np.sin(x32)),
                  "what grad computes, written out"))

    try:
        import autograd
        import autograd.numpy as anp
        ag = autograd.grad(lambda x: anp.sin(x) * x + 1)
        cases.append(("HIPS autograd grad(f)", lambda: ag(x32), f"autograd {_version(autograd)}"))
    except ImportError:
        cases.append(("HIPS autograd grad(f)", None, "skipped: not installed (measured "
                      "earlier on this machine: 120–190 µs)"))

    try:
        import torch
        tx = torch.tensor(X, dtype=torch.float32)

        def torch_grad():
            x = tx.detach().requires_grad_()
            (torch.sin(x) * x + 1).backward()
            return x.grad

        cases.append(("PyTorch backward()", torch_grad, f"torch {torch.__version__}, eager"))
    except ImportError:
        cases.append(("PyTorch backward()", None, "skipped: not installed (measured "
                      "earlier on this machine: 94–145 µs)"))

    try:
        import jax
        import jax.numpy as jnp
        jg = jax.grad(lambda x: jnp.sin(x) * x + 1)
        jx = jnp.float32(X)
        cases.append(("JAX grad(f), no jit", lambda: jg(jx).block_until_ready(),
                      f"jax {jax.__version__}"))
    except ImportError:
        cases.append(("JAX grad(f), no jit", None, "skipped: not installed (measured "
                      "earlier on this machine: 1.7–3 ms)"))
    return cases


def _version(mod):
    return getattr(mod, "__version__", "?")


def _time(fn, repeat, budget_s):
    times, n = per_call_seconds(fn, repeat, budget_s)
    return [t * 1e+06 for t in times], n

def rows(repeat=15, budget_s=0.6):
    """One dict per row: label, min_us, median_us, calls (per repeat), note."""
    out = []
    for label, fn, note in _cases():
        if fn is None:
            out.append(dict(label=label, min_us=None, median_us=None, calls=0, note=note))
            continue
        times, n = _time(fn, repeat, budget_s)
        out.append(dict(label=label, min_us=min(times), median_us=statistics.median(times),
                        calls=n, note=note))
    return out


def to_markdown(table):
    lines = ["| case | min (µs) | median (µs) | × NumPy 0-d (median) | note |",
             "|---|---:|---:|---:|---|"]
    base = next((r["median_us"] for r in table if r["label"] == BASELINE), None)
    for r in table:
        if r["min_us"] is None:
            lines.append(f"| {r['label']} | – | – | – | {r['note']} |")
            continue
        ratio = "–" if not base else _ratio(r["median_us"] / base)
        lines.append(f"| {r['label']} | {r['min_us']:.1f} | {r['median_us']:.1f} | "
                     f"{ratio} | {r['note']} |")
    return "\n".join(lines)


def _ratio(r):
    return f"{r:.1f}×" if r < 10 else f"{r:.0f}×"


def run(repeat=15, budget_s=0.6):
    """The benchmark's report as Markdown (title, machine, table, verdict)."""
    table = rows(repeat, budget_s)
    grad_row = table[0]
    verdict = ("meets" if grad_row["median_us"] <= TARGET_US else "misses")
    return "\n".join([
        f"## {TITLE}", "",
        machine() + f"; {repeat} repeats, per-call times.", "",
        to_markdown(table), "",
        f"fgrad eager grad: median {grad_row['median_us']:.1f} µs, {verdict} the "
        f"{TARGET_US:.0f} µs target.", ""])


def main():
    return main_for(NAME, run)


if __name__ == "__main__":
    main()
