"""bench/gpu.py's MLP SGD step in JAX or PyTorch on the GPU, in a process of its own.

The other benchmarks pin JAX to the CPU for the whole run (`threads`,
`peers.jax`), so gpu.py times the GPU peers here:
`python gpu_peer.py {jax.jit,torch eager,torch.compile} [--quick] [--device cpu]`
prints one JSON line: the median and min seconds per synchronised step and the
first step's loss (gpu.py checks it against its CuPy reference). `--device cpu`
runs the same code on the host, to check this script without a GPU.
"""
import argparse
import json
import os
import sys

LIBS = ("jax.jit", "torch eager", "torch.compile")


def _args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lib", choices=LIBS)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--device", choices=("gpu", "cpu"), default="gpu")
    return parser.parse_args()


def _jax_runner(params, x, onehot):
    import jax
    from gpu import LR, _loss

    def step(params, x, onehot):
        loss, g = jax.value_and_grad(lambda p: _loss(jax.numpy, jax.nn.log_softmax, p, x,
                                                     onehot))(params)
        return jax.tree_util.tree_map(lambda p, d: p - LR * d, params, g), loss

    step = jax.jit(step)
    state = list(jax.device_put((params, x, onehot)))
    first = step(*state)[1]

    def call():
        state[0], loss = step(*state)
        return loss.block_until_ready()
    return float(first), call


def _torch_runner(device, params, x, onehot, compiled):
    import torch
    from gpu import LR
    dev = "cuda" if device == "gpu" else "cpu"
    ps = [torch.tensor(a, device=dev, requires_grad=True) for layer in params for a in layer]
    tx, tonehot = torch.tensor(x, device=dev), torch.tensor(onehot, device=dev)

    def loss_fn(ps, x, onehot):
        h = x
        for w, b in zip(ps[0:-2:2], ps[1:-2:2]):
            h = torch.relu(h @ w + b)
        return -(torch.log_softmax(h @ ps[-2] + ps[-1], 1) * onehot).sum(1).mean()

    forward = torch.compile(loss_fn) if compiled else loss_fn

    def call():
        loss = forward(ps, tx, tonehot)
        grads = torch.autograd.grad(loss, ps)
        with torch.no_grad():
            for p, g in zip(ps, grads):
                p.sub_(LR * g)
        if dev == "cuda":
            torch.cuda.synchronize()
        return loss.detach()

    first = float(call())
    return first, call


def main():
    args = _args()
    if args.device == "gpu":
        os.environ["JAX_PLATFORMS"] = "cuda"       # before `gpu` imports `threads`
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import numpy as np
    from common import budget, time_call
    from gpu import BATCH, SIZES, _init
    rng = np.random.default_rng(0)                 # gpu.py's parameters and batch
    params = _init(rng)
    x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    onehot = np.eye(SIZES[-1], dtype=np.float32)[rng.integers(0, SIZES[-1], BATCH)]
    if args.lib == "jax.jit":
        first, call = _jax_runner(params, x, onehot)
    else:
        first, call = _torch_runner(args.device, params, x, onehot,
                                    args.lib == "torch.compile")
    repeat, budget_s = budget(args.quick, 2.0)
    timing = time_call(call, repeat, budget_s)
    print(json.dumps({"median": timing.median, "min": timing.min, "loss": first}))


if __name__ == "__main__":
    main()
