"""Workload 7: the GPU backend (CUDA C kernels through NVRTC, launched with CuPy).

Two rows, each on the first GPU CuPy sees (skipped cleanly without one):
- the fused element-wise expression sin(x)*y + exp(-x*x) at N = 1e8 float32,
  against CuPy eager (five kernels with temporaries) and the device's measured
  copy bandwidth (a CuPy device-to-device copy): the fused kernel reads x and y
  and writes out (12 bytes per element) and the copy moves 8, so the table
  reports the kernel's achieved bandwidth as a share of the copy's;
- one SGD step of an MLP 784-512-512-10 (relu, softmax cross-entropy with a
  one-hot target) at batch 1024, fgrad jit against the same step written by
  hand in CuPy eager, and in PyTorch (eager, torch.compile) and jax.jit on the
  GPU, each of those in a process of its own (gpu_peer.py).
Every timed call ends with a device synchronisation.
"""
from common import FGRAD, INFO, LIMIT, PEER, Column, Section, Table, Timing, agree, budget, \
    guarded, time_call  # first: threads

import numpy as np

import fgrad
import fgrad.numpy as fnp
from fgrad import nn

NAME = "gpu"
TITLE = "8. GPU: fused element-wise (N = 1e8) and an MLP SGD step (batch 1024), float32"
N = 100_000_000
SIZES = (784, 512, 512, 10)
BATCH = 1024
LR = 0.01
PEER_LIBS = ("torch eager", "torch.compile", "jax.jit")    # timed by gpu_peer.py


def _gpu():
    """(cupy, the fgrad GPU device) or (None, why not)."""
    try:
        gpus = fgrad.devices("gpu")
    except RuntimeError as e:
        return None, str(e).splitlines()[0]
    import cupy
    return cupy, gpus[0]


def _synced(cp, fn):
    def call():
        out = fn()
        cp.cuda.Device().synchronize()
        return out
    return call


def expression(np_like, x, y):
    return np_like.sin(x) * y + np_like.exp(-x * x)


def _fused_table(cp, dev, quick):
    n = N // 20 if quick else N
    table = Table(f"Fused element-wise, N = {n:,}", [
        Column("fgrad jit", FGRAD), Column("CuPy eager", PEER), Column("copy", LIMIT),
        Column("% of copy bandwidth", INFO)], note="Median (min) ms per call, synchronised.")
    repeat, budget_s = budget(quick, 2.0)
    rng = cp.random.default_rng(0)
    x = rng.standard_normal(n, dtype=cp.float32)
    y = rng.standard_normal(n, dtype=cp.float32)
    expected = cp.asnumpy(expression(cp, x[:1_000_000], y[:1_000_000]))
    fx, fy = fgrad.device_put((x, y), dev)
    f = fgrad.jit(lambda x, y: expression(fnp, x, y))

    def check():
        out = fgrad.device_put(f(fx, fy), fgrad.devices("cpu")[0])
        agree("fgrad jit", np.asarray(out)[:1_000_000], expected, 1e-5, 1e-5)
        return time_call(_synced(cp, lambda: f(fx, fy)), repeat, budget_s)

    cells = {"fgrad jit": guarded(check),
             "CuPy eager": guarded(lambda: time_call(_synced(cp, lambda: expression(cp, x, y)),
                                                     repeat, budget_s))}
    out = cp.empty_like(x)
    copy = guarded(lambda: time_call(_synced(cp, lambda: cp.copyto(out, x)), repeat, budget_s))
    cells["copy"] = copy
    fused = cells["fgrad jit"]
    note = ""
    if hasattr(copy, "min") and hasattr(fused, "min"):
        copy_bw = 8 * n / copy.min
        fused_bw = 12 * n / fused.min
        cells["% of copy bandwidth"] = 100 * fused_bw / copy_bw
        note = f"copy {copy_bw / 1e9:.0f} GB/s, fused kernel {fused_bw / 1e9:.0f} GB/s"
    table.add(f"N = {n:,}", cells, note)
    return table


def _init(rng):
    return [((rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32),
             np.zeros(b, np.float32)) for a, b in zip(SIZES[:-1], SIZES[1:])]


def _loss(np_like, log_softmax, params, x, onehot):
    h = x
    for w, b in params[:-1]:
        h = np_like.maximum(h @ w + b, 0.0)
    logits = h @ params[-1][0] + params[-1][1]
    return -np_like.mean(np_like.sum(log_softmax(logits) * onehot, axis=1))


def fgrad_step(params, x, onehot):
    loss, g = fgrad.value_and_grad(lambda p: _loss(fnp, nn.log_softmax, p, x, onehot))(params)
    return fgrad.tree.map(lambda p, d: p - LR * d, params, g), loss


def cupy_step(cp, params, x, onehot):
    """The same step by hand in CuPy: forward, softmax − one-hot, backprop, update."""
    hs, h = [x], x
    for w, b in params[:-1]:
        h = cp.maximum(h @ w + b, 0)
        hs.append(h)
    z = h @ params[-1][0] + params[-1][1]
    z = z - z.max(axis=1, keepdims=True)
    logp = z - cp.log(cp.exp(z).sum(axis=1, keepdims=True))
    loss = -(logp * onehot).sum(axis=1).mean()
    d = (cp.exp(logp) - onehot) / x.shape[0]
    new = []
    for i in reversed(range(len(params))):
        w, b = params[i]
        new.append((w - LR * hs[i].T @ d, b - LR * d.sum(axis=0)))
        if i:
            d = (d @ w.T) * (hs[i] > 0)
    return new[::-1], loss


def _peer_in_own_process(lib, quick, want_loss):
    """A Timing of gpu_peer.py's step in `lib` (a process of its own: the rest of the
    run pins JAX to the CPU), after checking its first loss."""
    import json
    import subprocess
    import sys
    from pathlib import Path
    script = Path(__file__).with_name("gpu_peer.py")
    done = subprocess.run([sys.executable, str(script), lib] + (["--quick"] if quick else []),
                          capture_output=True, text=True, timeout=600)
    if done.returncode:
        raise RuntimeError((done.stderr.strip().splitlines() or ["exit status"])[-1])
    result = json.loads(done.stdout.strip().splitlines()[-1])
    agree(lib, result["loss"], want_loss, 1e-4, 1e-5)
    return Timing(result["median"], result["min"])


def _mlp_table(cp, dev, quick):
    table = Table(f"MLP {'-'.join(map(str, SIZES))} SGD step, batch {BATCH}", [
        Column("fgrad jit", FGRAD), Column("CuPy eager", PEER)] +
        [Column(lib, PEER) for lib in PEER_LIBS],
        note="Median (min) ms per step, synchronised; parameters carried between steps.")
    repeat, budget_s = budget(quick, 2.0)
    rng = np.random.default_rng(0)
    params = _init(rng)
    x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    onehot = np.eye(SIZES[-1], dtype=np.float32)[rng.integers(0, SIZES[-1], BATCH)]
    cparams = [(cp.asarray(w), cp.asarray(b)) for w, b in params]
    cx, conehot = cp.asarray(x), cp.asarray(onehot)
    want_params, want_loss = cupy_step(cp, cparams, cx, conehot)

    step = fgrad.jit(fgrad_step)
    fparams, fx, fonehot = fgrad.device_put((params, x, onehot), dev)

    def run_fgrad():
        new, loss = step(fparams, fx, fonehot)
        agree("fgrad jit", float(loss), float(want_loss), 1e-4, 1e-5)
        state = [fparams]

        def call():
            state[0], loss = step(state[0], fx, fonehot)
            return loss
        return time_call(_synced(cp, call), repeat, budget_s)

    def run_cupy():
        state = [cparams]

        def call():
            state[0], loss = cupy_step(cp, state[0], cx, conehot)
            return loss
        return time_call(_synced(cp, call), repeat, budget_s)

    cells = {"fgrad jit": guarded(run_fgrad), "CuPy eager": guarded(run_cupy)}
    for lib in PEER_LIBS:
        cells[lib] = guarded(lambda: _peer_in_own_process(lib, quick, float(want_loss)))
    table.add(f"batch {BATCH}", cells)
    return table


def run(quick=False):
    cp, dev = _gpu()
    if cp is None:
        return Section(TITLE, [], [f"skipped: {dev}"])
    name = dev.device_kind
    return Section(TITLE, [_fused_table(cp, dev, quick), _mlp_table(cp, dev, quick)], [
        f"Device: {name} ({dev!r}).",
        "The fused kernel moves 12 bytes per element and the copy 8; '% of copy bandwidth' "
        "compares the bytes per second each achieves (the target is >= 80%).",
        "The MLP loss uses a one-hot target (a product and a sum), so both sides run "
        "without gathers."])


if __name__ == "__main__":
    import common
    common.main_for(run, TITLE)
