"""Workload 2: one SGD step of an MLP 784-512-512-10 (relu, softmax cross-entropy).

A step is value_and_grad of the mean loss plus the update p - 0.01·g; each timed
call feeds the previous call's parameters back in, as a training loop does. The
limit column is the step's eight matrix products alone (three forward, five
backward) in NumPy, i.e. what sgemm at these sizes costs.
"""
from common import (FGRAD, LIMIT, PEER, Column, Section, Table, agree, budget,  # first: threads
                    guarded, measure, time_call)
import peers

import numpy as np

import fgrad
import fgrad.numpy as fnp
from fgrad import nn

NAME = "mlp_sgd"
TITLE = "2. MLP 784-512-512-10 SGD step (value_and_grad + update), float32"
SIZES = (784, 512, 512, 10)
BATCHES = (1, 128, 1024)
LR = 0.01
COLUMNS = [Column("fgrad jit", FGRAD), Column("fgrad jit, donated", FGRAD),
           Column("jax.jit", PEER), Column("jax.jit, donated", PEER),
           Column("torch eager", PEER), Column("torch.compile", PEER), Column("sgemm", LIMIT)]


def init_params(rng):
    """[(w (in, out), b (out,)), ...] float32."""
    return [((rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32),
             np.zeros(b, np.float32)) for a, b in zip(SIZES[:-1], SIZES[1:])]


def numpy_step(params, x, y):
    """The reference: forward, softmax − one-hot, backprop, update, by hand."""
    hs, h = [x], x
    for w, b in params[:-1]:
        h = np.maximum(h @ w + b, 0)
        hs.append(h)
    z = h @ params[-1][0] + params[-1][1]
    z = z - z.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    loss = -logp[np.arange(len(y)), y].mean()
    d = np.exp(logp)
    d[np.arange(len(y)), y] -= 1
    d /= len(y)
    new = []
    for i in reversed(range(len(params))):
        w, b = params[i]
        new.append((w - LR * hs[i].T @ d, b - LR * d.sum(axis=0)))
        if i:
            d = (d @ w.T) * (hs[i] > 0)
    return new[::-1], loss


# ----------------------------------------------------------------------------
# fgrad and JAX: the same functional step

def _loss(np_like, log_softmax, params, x, y):
    h = x
    for w, b in params[:-1]:
        h = np_like.maximum(h @ w + b, 0.0)
    logits = h @ params[-1][0] + params[-1][1]
    return -np_like.mean(log_softmax(logits)[np_like.arange(x.shape[0]), y])


def fgrad_step(params, x, y):
    loss, g = fgrad.value_and_grad(lambda p: _loss(fnp, nn.log_softmax, p, x, y))(params)
    return fgrad.tree.map(lambda p, d: p - LR * d, params, g), loss


def jax_step_fn(jax):
    def step(params, x, y):
        loss, g = jax.value_and_grad(
            lambda p: _loss(jax.numpy, jax.nn.log_softmax, p, x, y))(params)
        return jax.tree_util.tree_map(lambda p, d: p - LR * d, params, g), loss
    return step


def _copy(params):
    return [(w.copy(), b.copy()) for w, b in params]


def _loop(step, params, x, y, ready=lambda out: out):
    """A callable running one training step on carried state."""
    state = [params]

    def call():
        state[0], loss = step(state[0], x, y)
        return ready(loss)
    return call


# ----------------------------------------------------------------------------
# PyTorch: the idiomatic loop (leaf parameters, backward, optimizer step)

def _torch_cells(params, x, y, expected, check, repeat, budget_s):
    torch = peers.torch()
    if torch is None:
        return {"torch eager": peers.missing("torch"), "torch.compile": peers.missing("torch")}
    F = torch.nn.functional
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)

    def loss_fn(ps, x, y):
        h = x
        for w, b in ps[:-1]:
            h = torch.relu(h @ w + b)
        return F.cross_entropy(h @ ps[-1][0] + ps[-1][1], y)

    def make(loss_fn):
        ps = [tuple(torch.tensor(a, requires_grad=True) for a in layer) for layer in params]
        opt = torch.optim.SGD([a for layer in ps for a in layer], lr=LR)

        def step():
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(ps, tx, ty)
            loss.backward()
            opt.step()
            return loss
        return step, ps

    def checked(loss_fn, what):
        step, ps = make(loss_fn)
        loss = step()
        agree(what, ([(w.detach(), b.detach()) for w, b in ps], loss.detach()), expected, **check)
        step, _ = make(loss_fn)
        return time_call(step, repeat, budget_s)

    cells = {"torch eager": guarded(lambda: checked(loss_fn, "torch eager"))}
    reason = peers.torch_compile_ok()
    cells["torch.compile"] = reason or guarded(
        lambda: checked(torch.compile(loss_fn, dynamic=False), "torch.compile"))
    return cells


def _gemm_limit(params, x, repeat, budget_s):
    """The step's eight matrix products in NumPy; (Timing, flops)."""
    (w1, _), (w2, _), (w3, _) = params
    b = x.shape[0]
    h1 = np.ones((b, 512), np.float32)
    h2 = np.ones((b, 512), np.float32)
    d3 = np.ones((b, 10), np.float32)

    def products():
        x @ w1, h1 @ w2, h2 @ w3                      # forward
        h2.T @ d3, d3 @ w3.T, h1.T @ h2, h2 @ w2.T, x.T @ h1   # backward
    flops = 2 * b * (2 * 784 * 512 + 3 * 512 * 512 + 3 * 512 * 10)
    return measure("sgemm", products, repeat=repeat, budget_s=budget_s), flops


def _row(batch, quick):
    rng = np.random.default_rng(batch)
    params = init_params(rng)
    x = rng.standard_normal((batch, 784)).astype(np.float32)
    y = rng.integers(0, 10, batch)
    expected = numpy_step(params, x, y)
    repeat, budget_s = budget(quick, 1.0)
    check = dict(rtol=2e-4, atol=2e-5)
    cells = {}

    for col, donate in (("fgrad jit", ()), ("fgrad jit, donated", (0,))):
        step = fgrad.jit(fgrad_step, donate_argnums=donate)
        cells[col] = guarded(lambda: (agree(col, step(_copy(params), x, y), expected, **check),
                                      time_call(_loop(step, _copy(params), x, y), repeat,
                                                budget_s))[1])

    jax = peers.jax()
    for col, donate in (("jax.jit", ()), ("jax.jit, donated", (0,))):
        if jax is None:
            cells[col] = peers.missing("jax")
            continue
        step = jax.jit(jax_step_fn(jax), donate_argnums=donate)
        jparams = lambda: jax.device_put(_copy(params))  # noqa: E731
        jx, jy = jax.device_put(x), jax.device_put(y)
        cells[col] = guarded(lambda: (
            agree(col, step(jparams(), jx, jy), expected, **check),
            time_call(_loop(step, jparams(), jx, jy, lambda v: v.block_until_ready()), repeat,
                      budget_s))[1])

    cells.update(_torch_cells(params, x, y.astype(np.int64), expected, check, repeat, budget_s))
    cells["sgemm"], flops = _gemm_limit(params, x, repeat, budget_s)
    note = (f"sgemm {flops / cells['sgemm'].min / 1e9:.0f} GFLOP/s at best"
            if hasattr(cells["sgemm"], "min") else "")
    return cells, note


def run(quick=False):
    table = Table(TITLE, COLUMNS, short="2 MLP SGD step", note=(
        "Each call is one training step on the previous step's parameters; compile time "
        "excluded. Donated: `donate_argnums=(0,)`, the parameters are updated in place. "
        "PyTorch: leaf tensors, `loss.backward()`, `torch.optim.SGD.step()` (in place); "
        "torch.compile compiles the loss (forward and backward), the update stays eager. "
        "At batch 1 NumPy's matmul is slow on the rank-1 weight gradients (k = 1), so the "
        "sgemm column is no floor there."))
    for batch in BATCHES:
        cells, note = _row(batch, quick)
        table.add(f"batch {batch}", cells, note)
    return Section(TITLE, [table], [
        "Every implementation's first step was checked against a NumPy step written by hand "
        "(new parameters and loss, rtol 2e-4)."])


if __name__ == "__main__":
    import common
    common.main_for(run, TITLE)
