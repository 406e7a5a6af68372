"""Per-example gradients with vmap, and a dense Hessian, eagerly (no jit yet).

(a) a linear model 784→10 with softmax cross-entropy and (b) an MLP
784-512-512-10 (relu), both float32 at batch 256: `vmap(grad(loss))` against a
Python loop of `grad` over the examples; (c) the 100×100 Hessian of the
Rosenbrock function via `fgrad.hessian` and `jacfwd(jacrev)`. Every row is
checked once for correctness before it is timed. NumPy rows written by hand
show what the arithmetic alone costs.

    python3 bench/per_example.py         # or `make bench` for every benchmark

Peer numbers (JAX, torch.func, PyTorch, HIPS autograd) are quoted from the
issue in the notes column; nothing is installed or run for them here.
"""
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine, main_for, per_call_seconds  # noqa: E402

import fgrad  # noqa: E402
import fgrad.nn as nn
import fgrad.numpy as fnp


NAME = "per_example"
TITLE = "Per-example gradients (vmap of grad) and a dense Hessian, eager"
BATCH = 256
HESS_N = 100


# ----------------------------------------------------------------------------
# Models

def linear_loss(params, x, y):
    """Softmax cross-entropy of one example; y is one-hot."""
    logits = x @ params["w"] + params["b"]
    return -fnp.sum(y * nn.log_softmax(logits))


def mlp_loss(params, x, y):
    h = nn.relu(x @ params["w1"] + params["b1"])
    h = nn.relu(h @ params["w2"] + params["b2"])
    logits = h @ params["w3"] + params["b3"]
    return -fnp.sum(y * nn.log_softmax(logits))


def _dense(rng, n_in, n_out):
    return (rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)).astype(np.float32)


def _data(rng):
    x = rng.standard_normal((BATCH, 784)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, BATCH)]
    return x, y


def _softmax_np(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def linear_by_hand(params, x, y):
    """Per-example gradients in NumPy: dL/dlogits = softmax − y, then outer products."""
    d = _softmax_np(x @ params["w"] + params["b"]) - y
    return dict(w=x[:, :, None] * d[:, None, :], b=d)


def mlp_by_hand(params, x, y):
    z1 = x @ params["w1"] + params["b1"]
    h1 = np.maximum(z1, 0)
    z2 = h1 @ params["w2"] + params["b2"]
    h2 = np.maximum(z2, 0)
    d3 = _softmax_np(h2 @ params["w3"] + params["b3"]) - y
    d2 = (d3 @ params["w3"].T) * (z2 > 0)
    d1 = (d2 @ params["w2"].T) * (z1 > 0)
    return dict(w1=np.einsum("bi,bj->bij", x, d1), b1=d1,
                w2=np.einsum("bi,bj->bij", h1, d2), b2=d2,
                w3=np.einsum("bi,bj->bij", h2, d3), b3=d3)


def rosenbrock(x):
    return fnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def rosenbrock_hessian_by_hand(x):
    n = x.size
    h = np.zeros((n, n), x.dtype)
    d = np.zeros(n, x.dtype)
    d[:-1] += 1200 * x[:-1] ** 2 - 400 * x[1:] + 2
    d[1:] += 200
    off = -400 * x[:-1]
    idx = np.arange(n - 1)
    h[idx, idx + 1] = off
    h[idx + 1, idx] = off
    h[np.arange(n), np.arange(n)] = d
    return h


# ----------------------------------------------------------------------------
# Correctness, once, before timing

def _check_tree(what, got, expected, rtol, atol):
    got = {k: np.asarray(v) for k, v in got.items()}
    for k in expected:
        e = np.asarray(expected[k])
        if got[k].shape != e.shape or not np.allclose(got[k], e, rtol=rtol, atol=atol):
            err = np.max(np.abs(got[k] - e)) if got[k].shape == e.shape else "shape"
            raise AssertionError(f"{what}: {k} differs from the reference (max error {err})")


def _check_per_example(name, loss, params, x, y, by_hand):
    vg = fgrad.vmap(fgrad.grad(loss), in_axes=(None, 0, 0))(params, x, y)
    for k in params:
        assert vg[k].shape == (BATCH,) + params[k].shape and vg[k].dtype == np.float32, k
    _check_tree(f"{name}: vmap vs by hand", vg, by_hand(params, x, y), 1e-4, 1e-5)
    for i in (0, 1, BATCH - 1):
        gi = fgrad.grad(loss)(params, x[i], y[i])
        _check_tree(f"{name}: vmap vs grad of example {i}", {k: vg[k][i] for k in vg}, gi,
                    1e-4, 1e-6)


# ----------------------------------------------------------------------------
# Cases

def _cases():
    """(section, label, fn, repeats, note); fn None means a quoted-only row."""
    rng = np.random.default_rng(0)
    x, y = _data(rng)
    cases = []

    lin = dict(w=_dense(rng, 784, 10), b=np.zeros(10, np.float32))
    _check_per_example("linear", linear_loss, lin, x, y, linear_by_hand)
    lin_vg = fgrad.vmap(fgrad.grad(linear_loss), in_axes=(None, 0, 0))
    lin_g = fgrad.grad(linear_loss)
    lin_jit = fgrad.jit(lin_vg)
    _check_tree("linear jit", lin_jit(lin, x, y), lin_vg(lin, x, y), 1e-4, 1e-5)
    cases += [
        ("linear", "fgrad jit(vmap(grad(loss)))", lambda: lin_jit(lin, x, y), 15,
         "target <= 1.5 ms. Peers: jax.jit(vmap(grad)) 1.7–1.9 ms, torch.func 3.8–4.5 ms"),
        ("linear", "fgrad vmap(grad(loss))", lambda: lin_vg(lin, x, y), 15,
         "eager; target <= 1.5 ms with jit. Peers: jax.jit(vmap(grad)) 1.7–1.9 ms, "
         "torch.func 3.8–4.5 ms"),
        ("linear", "fgrad loop of grad(loss)",
         lambda: [lin_g(lin, x[i], y[i]) for i in range(BATCH)], 3, "256 eager grad calls"),
        ("linear", "NumPy by hand", lambda: linear_by_hand(lin, x, y), 15,
         "softmax − y, outer products: the arithmetic alone"),
    ]

    mlp = dict(w1=_dense(rng, 784, 512), b1=np.zeros(512, np.float32),
               w2=_dense(rng, 512, 512), b2=np.zeros(512, np.float32),
               w3=_dense(rng, 512, 10), b3=np.zeros(10, np.float32))
    _check_per_example("MLP", mlp_loss, mlp, x, y, mlp_by_hand)
    mlp_vg = fgrad.vmap(fgrad.grad(mlp_loss), in_axes=(None, 0, 0))
    mlp_g = fgrad.grad(mlp_loss)
    mlp_jit = fgrad.jit(mlp_vg)
    _check_tree("MLP jit", mlp_jit(mlp, x, y), mlp_vg(mlp, x, y), 1e-3, 1e-4)
    cases += [
        ("MLP", "fgrad jit(vmap(grad(loss)))", lambda: mlp_jit(mlp, x, y), 5,
         "target <= 150 ms. Peers: torch.func 243–338 ms, JAX 684 ms, PyTorch loop 202–236 ms"),
        ("MLP", "fgrad vmap(grad(loss))", lambda: mlp_vg(mlp, x, y), 5,
         "eager; target <= 150 ms with jit. Peers: torch.func 243–338 ms, JAX 684 ms, "
         "PyTorch loop 202–236 ms"),
        ("MLP", "fgrad loop of grad(loss)",
         lambda: [mlp_g(mlp, x[i], y[i]) for i in range(BATCH)], 2, "256 eager grad calls"),
        ("MLP", "NumPy by hand", lambda: mlp_by_hand(mlp, x, y), 5,
         "backprop with einsum outer products (669k params × 256 examples of output)"),
    ]

    xh = np.random.default_rng(1).uniform(-1.5, 1.5, HESS_N).astype(np.float32)
    hess = fgrad.hessian(rosenbrock)
    fr = fgrad.jacfwd(fgrad.jacrev(rosenbrock))
    expected = rosenbrock_hessian_by_hand(xh)
    for label, fn in (("hessian", hess), ("jacfwd(jacrev)", fr)):
        got = np.asarray(fn(xh))
        assert got.shape == (HESS_N, HESS_N) and got.dtype == np.float32, label
        assert np.allclose(got, expected, rtol=1e-5, atol=1e-3), label
    hess_jit = fgrad.jit(hess)
    assert np.allclose(np.asarray(hess_jit(xh)), expected, rtol=1e-5, atol=1e-3)
    cases += [
        ("Hessian", "fgrad jit(hessian(f))", lambda: hess_jit(xh), 15,
         "target <= 100 µs. Peers: jax.jit(hessian) 122–155 µs, torch.func 3.3–5.3 ms, "
         "autograd 21–28 ms"),
        ("Hessian", "fgrad hessian(f)", lambda: hess(xh), 15,
         "eager; target <= 100 µs with jit. Peers: jax.jit(hessian) 122–155 µs, "
         "torch.func 3.3–5.3 ms, autograd 21–28 ms"),
        ("Hessian", "fgrad jacfwd(jacrev(f))", lambda: fr(xh), 15, "what hessian is"),
        ("Hessian", "fgrad jacrev(jacrev(f))",
         (lambda j: lambda: j(xh))(fgrad.jacrev(fgrad.jacrev(rosenbrock))), 15,
         "reverse-over-reverse, for comparison"),
        ("Hessian", "NumPy by hand", lambda: rosenbrock_hessian_by_hand(xh), 15,
         "the tridiagonal Hessian written out"),
    ]
    return cases


def _time(fn, repeat, budget_s):
    times, n = per_call_seconds(fn, repeat, budget_s)
    return [t * 1000 for t in times], n

def rows(budget_s=1.0):
    out = []
    for section, label, fn, repeat, note in _cases():
        times, n = _time(fn, repeat, budget_s)
        out.append(dict(section=section, label=label, min_ms=min(times),
                        median_ms=statistics.median(times), repeats=repeat, calls=n,
                        note=note))
    return out


def _ms(t):
    return f"{t:.3f}" if t < 1 else f"{t:.2f}" if t < 10 else f"{t:.1f}" if t < 100 else \
        f"{t:.0f}"


def to_markdown(table):
    lines = ["| problem | case | min (ms) | median (ms) | × by hand (median) | repeats × calls "
             "| note |", "|---|---|---:|---:|---:|---:|---|"]
    base = {r["section"]: r["median_ms"] for r in table if r["label"] == "NumPy by hand"}
    for r in table:
        ratio = r["median_ms"] / base[r["section"]] if r["section"] in base else None
        ratio = "–" if ratio is None else f"{ratio:.1f}×" if ratio < 10 else f"{ratio:.0f}×"
        lines.append(f"| {r['section']} | {r['label']} | {_ms(r['min_ms'])} | "
                     f"{_ms(r['median_ms'])} | {ratio} | {r['repeats']} × {r['calls']} | "
                     f"{r['note']} |")
    return "\n".join(lines)


def run(budget_s=1.0):
    """The benchmark's report as Markdown (title, machine, table, summary)."""
    table = rows(budget_s)
    by = {(r["section"], r["label"]): r for r in table}
    lin = by[("linear", "fgrad vmap(grad(loss))")]
    lin_loop = by[("linear", "fgrad loop of grad(loss)")]
    mlp = by[("MLP", "fgrad vmap(grad(loss))")]
    mlp_loop = by[("MLP", "fgrad loop of grad(loss)")]
    hess = by[("Hessian", "fgrad hessian(f)")]
    return "\n".join([
        f"## {TITLE}", "",
        machine() + f"; batch {BATCH}, float32; Hessian {HESS_N}×{HESS_N} float32. "
        "Per-call times; every row was checked against a reference before timing.", "",
        to_markdown(table), "",
        f"vmap(grad) vs a loop of grad: linear {lin_loop['median_ms'] / lin['median_ms']:.0f}× "
        f"faster, MLP {mlp_loop['median_ms'] / mlp['median_ms']:.1f}× faster. Eager figures: "
        f"the targets (linear {lin['median_ms']:.2f} ms vs <= 1.5 ms, MLP "
        f"{mlp['median_ms']:.0f} ms vs <= 150 ms, Hessian {hess['median_ms'] * 1e3:.0f} µs vs "
        f"<= 100 µs) are for jit, which is not there yet.", ""])


def main():
    return main_for(NAME, run)


if __name__ == "__main__":
    main()
