"""Workload 6: per-example gradients by vmap, and a dense Hessian.

(a) a linear model 784→10 and (b) an MLP 784-512-512-10 (relu), both softmax
cross-entropy, float32, batch 256: vmap(grad(loss), in_axes=(None, 0, 0)) gives
one gradient per example; (c) the 100×100 Hessian of the Rosenbrock function.
Every result is checked against NumPy written by hand (the limit column: the
arithmetic alone). The MLP's per-example gradients are 669k parameters × 256
examples (≈690 MB of float32), so that problem is memory-bound.
"""
from common import (FGRAD, LIMIT, PEER, Column, Section, Table, budget,  # first: threads
                    measure)
import peers

import numpy as np

import fgrad
import fgrad.nn as nn
import fgrad.numpy as fnp

NAME = "per_example"
TITLE = "6. Per-example gradients (vmap of grad, batch 256) and a 100×100 Hessian, float32"
BATCH = 256
HESS_N = 100
COLUMNS = [Column("fgrad jit", FGRAD), Column("fgrad eager", FGRAD), Column("jax.jit", PEER),
           Column("torch.func", PEER), Column("autograd", PEER), Column("NumPy by hand", LIMIT)]


# ----------------------------------------------------------------------------
# The problems, written once for any array module m and its log_softmax

def linear_loss(m, log_softmax):
    def loss(params, x, y):
        return -m.sum(y * log_softmax(x @ params["w"] + params["b"]))
    return loss


def mlp_loss(m, log_softmax, relu):
    def loss(params, x, y):
        h = relu(x @ params["w1"] + params["b1"])
        h = relu(h @ params["w2"] + params["b2"])
        return -m.sum(y * log_softmax(h @ params["w3"] + params["b3"]))
    return loss


def rosenbrock(m):
    def f(x):
        return m.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)
    return f


def _softmax_np(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def linear_by_hand(params, x, y):
    """dL/dlogits = softmax − y, then outer products per example."""
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


def rosenbrock_hessian_by_hand(x):
    n = x.size
    h = np.zeros((n, n), x.dtype)
    d = np.zeros(n, x.dtype)
    d[:-1] += 1200 * x[:-1] ** 2 - 400 * x[1:] + 2
    d[1:] += 200
    idx = np.arange(n - 1)
    h[idx, idx + 1] = h[idx + 1, idx] = -400 * x[:-1]
    h[np.arange(n), np.arange(n)] = d
    return h


def _dense(rng, n_in, n_out):
    return (rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)).astype(np.float32)


# ----------------------------------------------------------------------------
# Per-library implementations: {column: callable, or the reason there is none}

def _per_example_impls(fgrad_loss, jax_loss, torch_loss, params, x, y):
    impls = {}
    vg = fgrad.vmap(fgrad.grad(fgrad_loss), in_axes=(None, 0, 0))
    jvg = fgrad.jit(vg)
    impls["fgrad jit"] = lambda: jvg(params, x, y)
    impls["fgrad eager"] = lambda: vg(params, x, y)
    jax = peers.jax()
    if jax is None:
        impls["jax.jit"] = peers.missing("jax")
    else:
        jf = jax.jit(jax.vmap(jax.grad(jax_loss(jax)), in_axes=(None, 0, 0)))
        jp, jx, jy = jax.device_put((params, x, y))
        impls["jax.jit"] = lambda: jax.block_until_ready(jf(jp, jx, jy))
    torch = peers.torch()
    if torch is None:
        impls["torch.func"] = peers.missing("torch")
    else:
        from torch import func
        tf = func.vmap(func.grad(torch_loss(torch)), in_dims=(None, 0, 0))
        tp = {k: torch.from_numpy(v) for k, v in params.items()}
        tx, ty = torch.from_numpy(x), torch.from_numpy(y)
        impls["torch.func"] = lambda: tf(tp, tx, ty)
    impls["autograd"] = "– (no vmap)"
    return impls


def _hessian_impls(x):
    h = fgrad.hessian(rosenbrock(fnp))
    jh = fgrad.jit(h)
    impls = {"fgrad jit": lambda: jh(x), "fgrad eager": lambda: h(x)}
    jax = peers.jax()
    if jax is None:
        impls["jax.jit"] = peers.missing("jax")
    else:
        jf = jax.jit(jax.hessian(rosenbrock(jax.numpy)))
        jx = jax.device_put(x)
        impls["jax.jit"] = lambda: jf(jx).block_until_ready()
    torch = peers.torch()
    if torch is None:
        impls["torch.func"] = peers.missing("torch")
    else:
        tf = torch.func.hessian(rosenbrock(torch))
        tx = torch.from_numpy(x)
        impls["torch.func"] = lambda: tf(tx)
    autograd = peers.autograd()
    if autograd is None:
        impls["autograd"] = peers.missing("autograd")
    else:
        ah = autograd.hessian(rosenbrock(autograd.numpy))
        impls["autograd"] = lambda: ah(x)
    return impls


def _row(impls, by_hand, expected, tol, repeat, budget_s):
    cells = {}
    for col, fn in impls.items():
        cells[col] = fn if isinstance(fn, str) else measure(
            col, fn, expected, *tol, repeat=repeat, budget_s=budget_s)
    cells["NumPy by hand"] = measure("by hand", by_hand, repeat=repeat, budget_s=budget_s)
    return cells


def run(quick=False):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, 784)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, BATCH)]
    table = Table(TITLE, COLUMNS, short="6 per-example/Hessian", note=(
        "vmap(grad(loss), in_axes=(None, 0, 0)) in each library (torch.func.vmap of "
        "torch.func.grad, eager; HIPS autograd has no vmap). Hessian: each library's "
        "`hessian` (forward over reverse)."))

    lin = dict(w=_dense(rng, 784, 10), b=np.zeros(10, np.float32))
    repeat, budget_s = budget(quick, 0.6)
    impls = _per_example_impls(
        linear_loss(fnp, nn.log_softmax),
        lambda jax: linear_loss(jax.numpy, jax.nn.log_softmax),
        lambda torch: linear_loss(torch, lambda z: torch.log_softmax(z, -1)), lin, x, y)
    table.add("linear 784→10", _row(impls, lambda: linear_by_hand(lin, x, y),
                                    linear_by_hand(lin, x, y), (1e-4, 1e-5), repeat, budget_s))

    mlp = dict(w1=_dense(rng, 784, 512), b1=np.zeros(512, np.float32),
               w2=_dense(rng, 512, 512), b2=np.zeros(512, np.float32),
               w3=_dense(rng, 512, 10), b3=np.zeros(10, np.float32))
    impls = _per_example_impls(
        mlp_loss(fnp, nn.log_softmax, nn.relu),
        lambda jax: mlp_loss(jax.numpy, jax.nn.log_softmax, jax.nn.relu),
        lambda torch: mlp_loss(torch, lambda z: torch.log_softmax(z, -1), torch.relu),
        mlp, x, y)
    repeat_mlp, budget_mlp = budget(quick, 1.0, repeat=3)
    table.add("MLP 784-512-512-10", _row(impls, lambda: mlp_by_hand(mlp, x, y),
                                         mlp_by_hand(mlp, x, y), (1e-3, 1e-4), repeat_mlp,
                                         budget_mlp))

    xh = np.random.default_rng(1).uniform(-1.5, 1.5, HESS_N).astype(np.float32)
    table.add(f"Hessian {HESS_N}×{HESS_N}, Rosenbrock",
              _row(_hessian_impls(xh), lambda: rosenbrock_hessian_by_hand(xh),
                   rosenbrock_hessian_by_hand(xh), (1e-5, 1e-3), repeat, budget_s))
    return Section(TITLE, [table], [
        "Every result was checked against the NumPy version written by hand before timing "
        "(rtol 1e-4; MLP 1e-3; Hessian 1e-5 with atol 1e-3)."])


if __name__ == "__main__":
    import common
    common.main_for(run, TITLE)
