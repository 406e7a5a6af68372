"""Workload 10: an LSTM's forward and backward pass (issue 18's recurrent row).

One layer, input and hidden size 256, sequence 100, batch 64, float32: the
gradient of sum(output²) with respect to the four parameter arrays.
fgrad_nn.LSTM under fgrad.jit against torch.nn.LSTM (eager, its fused CPU kernel,
and torch.compile) and the same gate equations on jax.lax.scan under jax.jit, all
from the same weights and input; every result is checked against fgrad's float64
gradients (fgrad_nn.LSTM is itself tested against explicit NumPy gate equations
and against torch).
"""
from common import (FGRAD, PEER, Column, Section, Table, agree, budget,  # first: threads
                    guarded, measure, time_call)
import peers

import numpy as np

import fgrad
import fgrad_nn

NAME = "lstm"
TITLE = "10. LSTM forward + backward (input 256, hidden 256, sequence 100, batch 64), float32"
I, H, T, B = 256, 256, 100, 64
NAMES = ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0")
CHECK = dict(rtol=2e-3, atol=2e-3)


def _setup():
    rng = np.random.default_rng(0)
    bound = 1 / np.sqrt(H)
    params = {"weight_ih_l0": rng.uniform(-bound, bound, (4 * H, I)),
              "weight_hh_l0": rng.uniform(-bound, bound, (4 * H, H)),
              "bias_ih_l0": rng.uniform(-bound, bound, 4 * H),
              "bias_hh_l0": rng.uniform(-bound, bound, 4 * H)}
    params = {k: v.astype(np.float32) for k, v in params.items()}
    x = rng.standard_normal((T, B, I)).astype(np.float32)
    return params, x


def _fgrad_grad(dtype):
    model = fgrad_nn.LSTM(I, H, key=fgrad.random.key(0), dtype=dtype)

    def loss(m, x):
        return (m(x)[0] ** 2).sum()
    g = fgrad.jit(fgrad.grad(loss))

    def call(params, x):
        m = fgrad_nn.load_torch_state_dict(model, params)
        return lambda: [np.asarray(v) for v in fgrad_nn.torch_state_dict(g(m, x)).values()]
    return call


def _fgrad_cells(params, x, expected, repeat, seconds):
    call = _fgrad_grad(np.float32)(params, x)
    return {"fgrad jit": measure("fgrad jit", call, expected, **CHECK, repeat=repeat,
                                 budget_s=seconds)}


def _jax_cell(params, x, expected, repeat, seconds):
    jax = peers.jax()
    if jax is None:
        return peers.missing("jax")
    jnp = jax.numpy

    def loss(p, xs):
        def step(carry, g_in):
            h, c = carry
            i, f, g, o = jnp.split(g_in + h @ p["weight_hh_l0"].T + p["bias_hh_l0"], 4, axis=-1)
            c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (h, c), h
        gi = xs @ p["weight_ih_l0"].T + p["bias_ih_l0"]
        zeros = jnp.zeros((B, H), xs.dtype)
        _, ys = jax.lax.scan(step, (zeros, zeros), gi)
        return jnp.sum(ys ** 2)
    g = jax.jit(jax.grad(loss))
    jp, jx = {k: jnp.asarray(v) for k, v in params.items()}, jnp.asarray(x)
    return measure("jax.jit", lambda: [np.asarray(g(jp, jx)[k]) for k in NAMES], expected,
                   **CHECK, repeat=repeat, budget_s=seconds)


def _torch_cells(params, x, expected, repeat, seconds):
    torch = peers.torch()
    if torch is None:
        return {"torch eager": peers.missing("torch"), "torch.compile": peers.missing("torch")}
    lstm = torch.nn.LSTM(I, H)
    lstm.load_state_dict({k: torch.from_numpy(v) for k, v in params.items()})
    tx = torch.from_numpy(x)

    def make(fn):
        def step():
            lstm.zero_grad(set_to_none=True)
            (fn(tx)[0] ** 2).sum().backward()
            return [getattr(lstm, k).grad for k in NAMES]
        return step

    def checked(fn, what):
        step = make(fn)
        agree(what, step(), expected, **CHECK)
        return time_call(step, repeat, seconds)

    cells = {"torch eager": guarded(lambda: checked(lstm, "torch eager"))}
    reason = peers.torch_compile_ok()
    cells["torch.compile"] = reason or guarded(
        lambda: checked(torch.compile(lstm, dynamic=False), "torch.compile"))
    return cells


def run(quick=False):
    params, x = _setup()
    expected = _fgrad_grad(np.float64)(params, x.astype(np.float64))()
    repeat, seconds = budget(quick, 3.0, repeat=5)
    cells = _fgrad_cells(params, x, expected, repeat, seconds)
    cells["jax.jit"] = _jax_cell(params, x, expected, repeat, seconds)
    cells.update(_torch_cells(params, x, expected, repeat, seconds))
    table = Table("LSTM forward + backward", [Column("fgrad jit", FGRAD),
                                              Column("torch eager", PEER),
                                              Column("torch.compile", PEER),
                                              Column("jax.jit", PEER)], short="10 LSTM", note=(
        "Gradient of sum(output²) w.r.t. weight_ih, weight_hh and both biases, checked "
        "against fgrad's float64 gradients (rtol 2e-3, atol 2e-3). fgrad and JAX compute "
        "the input projection of all steps in one matrix product before the scan."))
    table.add(f"LSTM {I}→{H}, sequence {T}, batch {B}", cells)
    return Section(TITLE, [table], [])


if __name__ == "__main__":
    import common
    common.main_for(run, TITLE)
