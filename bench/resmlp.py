"""Workload 7: ResMLP training throughput on scikit-learn's digits (8×8 images).

The model, the same in every library: Linear 64→256, four residual blocks
x + Linear(GELU(Linear(LayerNorm(x)))) (256→256→256, exact GELU), Linear 256→10;
softmax cross-entropy; AdamW (lr 1e-3, weight decay 1e-4 on every parameter);
batch 128. All libraries start from the same initial weights (fgrad_nn's,
copied) and see the same batches in the same order, so their losses must match
step by step up to rounding: the first step's loss is checked; the losses of
steps 21-30 and of the last 10 steps are reported (float32 rounding makes the
trajectories drift apart slowly over hundreds of steps). fgrad uses fgrad_nn's modules and optimizer under fgrad.jit;
PyTorch an nn.Module with torch.optim.AdamW; JAX the same function with Optax.
"""
from common import FGRAD, PEER, Column, Section, Table, Timing, agree, guarded  # first: threads
import peers

import statistics
import time

import numpy as np

import fgrad
import fgrad_nn
from fgrad_nn import losses, optim

NAME = "resmlp"
TITLE = "7. ResMLP training throughput on the digits (samples/s, higher is better)"
WIDTH, BLOCKS, BATCH = 256, 4, 128
LR, WEIGHT_DECAY = 1e-3, 1e-4
STEPS, ROUNDS = 240, 3  # timed steps (after one compiling step), in ROUNDS equal parts
COLUMNS = [Column("fgrad jit", FGRAD), Column("fgrad jit, donated", FGRAD),
           Column("torch eager", PEER), Column("torch.compile", PEER),
           Column("jax.jit + optax", PEER)]


def batches(steps):
    """steps + 1 batches (x float32 (128, 64) in [0, 1], y int64), epochs of the
    shuffled digits, the same for every library."""
    from sklearn.datasets import load_digits
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    rng = np.random.default_rng(0)
    out, order = [], np.empty(0, np.int64)
    while len(out) < steps + 1:
        if len(order) < BATCH:
            order = np.concatenate([order, rng.permutation(len(x))])
        idx, order = order[:BATCH], order[BATCH:]
        out.append((x[idx], y[idx]))
    return out


def fgrad_model():
    keys = fgrad.random.split(fgrad.random.PRNGKey(0), BLOCKS + 2)
    return fgrad_nn.Sequential(
        fgrad_nn.Linear(64, WIDTH, key=keys[0]),
        *[fgrad_nn.ResMLPBlock(WIDTH, WIDTH, activation=fgrad_nn.GELU(), key=k)
          for k in keys[1:-1]],
        fgrad_nn.Linear(WIDTH, 10, key=keys[-1]))


def weights(model):
    """The fgrad_nn model's weights as NumPy: {'inp': (w, b), 'blocks': [(ln_w, ln_b,
    w1, b1, w2, b2)], 'out': (w, b)} with PyTorch's (out, in) weight layout."""
    a = np.array  # writable copies (PyTorch warns about read-only arrays)
    first, *blocks, last = model.layers
    out = {"inp": (a(first.weight), a(first.bias)), "out": (a(last.weight), a(last.bias)),
           "blocks": []}
    for block in blocks:
        ln, fc1, _, fc2, _ = block.fn.layers
        out["blocks"].append(tuple(a(v) for v in (ln.weight, ln.bias, fc1.weight, fc1.bias,
                                                  fc2.weight, fc2.bias)))
    return out


def _train(step, state, data, ready):
    """Run the compiling step on data[0], then the other batches in ROUNDS timed
    parts; returns (Timing per step, [first loss, mean loss of steps 21-30, mean loss
    of the last 10 steps])."""
    state, first = step(state, *data[0])
    first = float(ready(first))
    per_round, times, losses_seen = (len(data) - 1) // ROUNDS, [], []
    for r in range(ROUNDS):
        start = time.perf_counter()
        for x, y in data[1 + r * per_round: 1 + (r + 1) * per_round]:
            state, loss = step(state, x, y)
            losses_seen.append(loss)
        ready(loss)
        times.append((time.perf_counter() - start) / per_round)
    seen = [float(ready(v)) for v in losses_seen]
    return (Timing(statistics.median(times), min(times), ROUNDS, per_round),
            [first, float(np.mean(seen[19:29])), float(np.mean(seen[-10:]))])


# ----------------------------------------------------------------------------
# The three libraries; each returns what _train returns

def fgrad_train_step(donate):
    """fgrad's jitted AdamW training step (model, opt_state, x, y) -> (model,
    opt_state, loss) (donating the model and state with `donate`), with the first
    model and optimizer state."""
    model = fgrad_model()
    opt = optim.adamw(LR, weight_decay=WEIGHT_DECAY)

    def train_step(model, opt_state, x, y):
        def loss_fn(m):
            return losses.softmax_cross_entropy_with_integer_labels(m(x), y)
        loss, g = fgrad.value_and_grad(loss_fn)(model)
        updates, opt_state = opt.update(g, opt_state, model)
        return optim.apply_updates(model, updates), opt_state, loss
    return fgrad.jit(train_step, donate_argnums=(0, 1) if donate else ()), model, opt.init(model)


def run_fgrad(data, donate):
    jitted, model, opt_state = fgrad_train_step(donate)

    def step(state, x, y):
        model, opt_state, loss = jitted(*state, x, y)
        return (model, opt_state), loss
    return _train(step, (model, opt_state), data, np.asarray)


def run_torch(data, w, compiled):
    torch = peers.torch()
    F = torch.nn.functional

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.LayerNorm(WIDTH)
            self.fc1, self.fc2 = torch.nn.Linear(WIDTH, WIDTH), torch.nn.Linear(WIDTH, WIDTH)

        def forward(self, x):
            return x + self.fc2(F.gelu(self.fc1(self.norm(x))))

    model = torch.nn.Sequential(torch.nn.Linear(64, WIDTH), *[Block() for _ in range(BLOCKS)],
                                torch.nn.Linear(WIDTH, 10))
    with torch.no_grad():
        tensors = [*w["inp"], *[v for block in w["blocks"] for v in block], *w["out"]]
        params = list(model.parameters())
        assert len(params) == len(tensors)
        for p, v in zip(params, tensors):
            p.copy_(torch.from_numpy(v))
    forward = torch.compile(model, dynamic=False) if compiled else model
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    tdata = [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in data]

    def step(state, x, y):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(forward(x), y)
        loss.backward()
        opt.step()
        return state, loss.detach()
    return _train(step, None, tdata, lambda v: v.item() if hasattr(v, "item") else v)


def run_jax(data, w):
    jax, optax = peers.jax(), peers.optax()
    jnp = jax.numpy

    def layer_norm(x, g, b):
        mean = jnp.mean(x, -1, keepdims=True)
        var = jnp.mean((x - mean) ** 2, -1, keepdims=True)
        return (x - mean) / jnp.sqrt(var + 1e-5) * g + b

    def forward(p, x):
        w0, b0 = p["inp"]
        h = x @ w0.T + b0
        for g, b, w1, b1, w2, b2 in p["blocks"]:
            h = h + jax.nn.gelu(layer_norm(h, g, b) @ w1.T + b1, approximate=False) @ w2.T + b2
        wl, bl = p["out"]
        return h @ wl.T + bl

    def loss_fn(p, x, y):
        return optax.softmax_cross_entropy_with_integer_labels(forward(p, x), y).mean()

    opt = optax.adamw(LR, weight_decay=WEIGHT_DECAY)

    @jax.jit
    def train_step(p, opt_state, x, y):
        loss, g = jax.value_and_grad(loss_fn)(p, x, y)
        updates, opt_state = opt.update(g, opt_state, p)
        return optax.apply_updates(p, updates), opt_state, loss

    params = jax.device_put(w)
    jdata = [jax.device_put(b) for b in data]

    def step(state, x, y):
        p, opt_state, loss = train_step(*state, x, y)
        return (p, opt_state), loss
    return _train(step, (params, opt.init(params)), jdata, lambda v: v.block_until_ready())


def run(quick=False):
    steps = 30 if quick else STEPS
    data = batches(steps)
    w = weights(fgrad_model())
    results = {"fgrad jit": guarded(lambda: run_fgrad(data, False)),
               "fgrad jit, donated": guarded(lambda: run_fgrad(data, True))}
    results["torch eager"] = (guarded(lambda: run_torch(data, w, False)) if peers.torch()
                              else peers.missing("torch"))
    results["torch.compile"] = (peers.torch_compile_ok() or
                                guarded(lambda: run_torch(data, w, True)))
    results["jax.jit + optax"] = (
        peers.missing("jax") if peers.jax() is None else peers.missing("optax")
        if peers.optax() is None else guarded(lambda: run_jax(data, w)))

    reference = (results["fgrad jit"][1][0] if isinstance(results["fgrad jit"], tuple)
                 else None)
    cells, losses_line = {}, []
    for col, res in results.items():
        if isinstance(res, str):
            cells[col] = res
            continue
        timing, (first, early, final) = res
        cells[col] = guarded(lambda: (agree(f"{col} first loss", first, reference, 1e-4, 1e-5)
                                      if reference is not None else None, timing)[1])
        losses_line.append(f"{col} {first:.4f} / {early:.4f} / {final:.4f}")
    table = Table(TITLE, COLUMNS, unit="samples/s", short="7 ResMLP digits",
                  show=lambda seconds: BATCH / seconds)
    table.add(f"batch {BATCH}, {steps} steps", cells)
    return Section(TITLE, [table], [
        f"Samples/s over {ROUNDS} rounds of {steps // ROUNDS} steps (median and best "
        "round); the first (compiling) step is excluded. "
        "The ratio column is fgrad's time per step / the best peer's (< 1: fgrad is faster).",
        "Training loss, first step / mean of steps 21–30 / mean of the last 10 steps: " +
        "; ".join(losses_line) +
        ". The first-step losses were checked to agree (rtol 1e-4).",
        "torch.compile compiles the model (forward and backward); AdamW's update stays "
        "eager (PyTorch's foreach implementation)."])


if __name__ == "__main__":
    import common
    common.main_for(run, TITLE)
