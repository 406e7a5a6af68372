"""Per-example gradients with fgrad.vmap(fgrad.grad(...)), and DP-SGD-style clipping.

    python examples/per_example_grads.py

A batch gradient averages away which example pulled which way. Writing the loss
for ONE example and mapping its gradient over the batch,

    per_example = fgrad.vmap(fgrad.grad(loss), in_axes=(None, 0, 0))

gives one gradient per example in a single vectorised pass (the parameters are
shared: in_axes None). This script checks the result against a Python loop
over the examples, prints the per-example gradient norms, and uses them for
the clipping step of differentially private SGD (clip each example's gradient
to norm C, average, add Gaussian noise), training a small MLP on the digits.
"""
import argparse
import sys
import time
from pathlib import Path

import numpy as np

try:
    import fgrad
except ImportError:  # a source checkout run without `make install`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import fgrad
import fgrad.numpy as fnp
from fgrad import nn


def init_params(sizes, seed):
    rng = np.random.default_rng(seed)
    return [{"w": (rng.standard_normal((m, n)) * np.sqrt(2.0 / m)).astype(np.float32),
             "b": np.zeros(n, np.float32)} for m, n in zip(sizes[:-1], sizes[1:])]


def logits(params, x):
    """An MLP on ONE example x (features,) -> (classes,)."""
    for layer in params[:-1]:
        x = nn.relu(x @ layer["w"] + layer["b"])
    return x @ params[-1]["w"] + params[-1]["b"]


def example_loss(params, x, y):
    """Softmax cross-entropy of one example with integer label y."""
    return -nn.log_softmax(logits(params, x))[y]


per_example_grads = fgrad.vmap(fgrad.grad(example_loss), in_axes=(None, 0, 0))


def loop_grads(params, xs, ys):
    """The same per-example gradients, one fgrad.grad call per example, stacked."""
    grads = [fgrad.grad(example_loss)(params, x, y) for x, y in zip(xs, ys)]
    return fgrad.tree.map(lambda *g: np.stack([np.asarray(a) for a in g]), *grads)


def tree_norms(grads):
    """The global 2-norm of each example's gradient: leaves (N, ...) -> (N,)."""
    squares = [fnp.sum(fnp.reshape(g, (g.shape[0], -1)) ** 2, axis=1)
               for g in fgrad.tree.leaves(grads)]
    return fnp.sqrt(sum(squares))


def dp_sgd_step(params, xs, ys, key, lr, clip_norm, noise_multiplier):
    """One DP-SGD step: per-example gradients, each clipped to norm <= clip_norm,
    summed, plus N(0, (noise_multiplier * clip_norm)^2) noise, divided by the batch size."""
    grads = per_example_grads(params, xs, ys)
    norms = tree_norms(grads)
    scale = fnp.minimum(1.0, clip_norm / (norms + 1e-12))
    leaves, treedef = fgrad.tree.flatten(grads)
    keys = fgrad.random.split(key, len(leaves))
    noisy_means = []
    for g, k in zip(leaves, keys):
        clipped_sum = fnp.sum(g * fnp.reshape(scale, (-1,) + (1,) * (g.ndim - 1)), axis=0)
        noise = noise_multiplier * clip_norm * fgrad.random.normal(k, clipped_sum.shape,
                                                                   clipped_sum.dtype)
        noisy_means.append((clipped_sum + noise) / xs.shape[0])
    update = fgrad.tree.unflatten(treedef, noisy_means)
    return fgrad.tree.map(lambda p, u: p - lr * u, params, update), norms


def accuracy(params, xs, ys):
    predictions = np.argmax(np.asarray(fgrad.vmap(logits, in_axes=(None, 0))(params, xs)), axis=1)
    return float(np.mean(predictions == ys))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--lr", type=float, default=0.5)
    p.add_argument("--clip-norm", type=float, default=1.0)
    p.add_argument("--noise-multiplier", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="2 epochs (a smoke test)")
    args = p.parse_args(argv)
    if args.quick:
        args.epochs = 2

    from sklearn.datasets import load_digits
    digits = load_digits()
    x = digits.data.astype(np.float32) / 16.0
    y = digits.target.astype(np.int32)
    order = np.random.default_rng(args.seed).permutation(len(x))
    train, test = order[360:], order[:360]
    params = init_params([64, 64, 10], args.seed)

    xs, ys = x[train[:args.batch_size]], y[train[:args.batch_size]]
    start = time.perf_counter()
    mapped = per_example_grads(params, xs, ys)
    mapped_s = time.perf_counter() - start
    start = time.perf_counter()
    looped = loop_grads(params, xs, ys)
    loop_s = time.perf_counter() - start
    worst = max(float(np.max(np.abs(np.asarray(a) - b)))
                for a, b in zip(fgrad.tree.leaves(mapped), fgrad.tree.leaves(looped)))
    print(f"per-example gradients of {len(xs)} examples: vmap(grad) {mapped_s * 1e3:.1f} ms, "
          f"a Python loop of grad {loop_s * 1e3:.1f} ms; largest difference {worst:.1e}")
    print("shapes:", [tuple(g.shape) for g in fgrad.tree.leaves(mapped)])
    if worst > 1e-5:
        raise SystemExit("vmap(grad) and the loop disagree")
    mean_grad = fgrad.grad(lambda p: fnp.mean(fgrad.vmap(example_loss, in_axes=(None, 0, 0))(
        p, xs, ys)))(params)
    agree = max(float(np.max(np.abs(np.mean(np.asarray(a), axis=0) - np.asarray(b))))
                for a, b in zip(fgrad.tree.leaves(mapped), fgrad.tree.leaves(mean_grad)))
    print(f"their mean equals the batch gradient (largest difference {agree:.1e})")
    norms = np.asarray(tree_norms(mapped))
    print(f"per-example gradient norms: min {norms.min():.3f}, median {np.median(norms):.3f}, "
          f"max {norms.max():.3f}; {np.mean(norms > args.clip_norm):.0%} exceed the clip "
          f"norm {args.clip_norm}")

    print(f"\nDP-SGD (clip {args.clip_norm}, noise multiplier {args.noise_multiplier}), "
          f"batch {args.batch_size}:")
    step = fgrad.jit(dp_sgd_step, static_argnums=(4, 5, 6))
    key = fgrad.random.key(args.seed)
    rng = np.random.default_rng(args.seed + 1)
    for epoch in range(1, args.epochs + 1):
        shuffled = rng.permutation(train)
        clipped = []
        for start in range(0, len(shuffled) - args.batch_size + 1, args.batch_size):
            batch = shuffled[start:start + args.batch_size]
            key, step_key = fgrad.random.split(key)
            params, norms = step(params, x[batch], y[batch], step_key, args.lr,
                                 args.clip_norm, args.noise_multiplier)
            clipped.append(np.mean(np.asarray(norms) > args.clip_norm))
        print(f"epoch {epoch:2d}: test accuracy {accuracy(params, x[test], y[test]):.2%}, "
              f"{np.mean(clipped):.0%} of the per-example gradients clipped")
    return params


if __name__ == "__main__":
    main()
