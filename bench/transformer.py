"""Transformer training step: a character-level decoder-only transformer, the same
in every library.

Model: token embedding (vocabulary 96) plus learned positions, 4 pre-norm encoder
layers with a causal mask (d_model 128, 4 heads, feed-forward 512, ReLU, no
dropout), a final LayerNorm and a linear head; softmax cross-entropy on the next
character; Adam (lr 1e-3). Batch 32 sequences of 128 characters (random text, as
the timing does not depend on it). All libraries start from the same weights
(fgrad_nn's, copied by PyTorch's parameter names) and see the same batches, so
their first losses are checked to agree. fgrad uses fgrad_nn's
TransformerEncoderLayer and adam under fgrad.jit; PyTorch nn.TransformerEncoder
with torch.optim.Adam; JAX the same forward written by hand with Optax.
"""
from common import FGRAD, PEER, Column, Section, Table, Timing, agree, guarded  # first: threads
import peers

import statistics
import time

import numpy as np

import fgrad
import fgrad.numpy as fnp
import fgrad_nn
from fgrad_nn import losses, optim

NAME = "transformer"
TITLE = "8. Transformer training step (d_model 128, 4 heads, 4 layers, seq 128, batch 32; ms)"
VOCAB, D, HEADS, LAYERS, FF, SEQ, BATCH, LR = 96, 128, 4, 4, 512, 128, 32, 1e-3
STEPS, ROUNDS = 12, 3       # timed steps (after one compiling step), in ROUNDS parts
COLUMNS = [Column("fgrad jit", FGRAD), Column("torch eager", PEER),
           Column("torch.compile", PEER), Column("jax.jit + optax", PEER)]


class CharTransformer(fgrad_nn.Module):
    """Embedding + learned positions, a causal pre-norm encoder stack, a linear head;
    (N, L) character ids -> (N, L, VOCAB) logits."""
    tok: fgrad_nn.Embedding
    pos: fgrad_nn.Embedding
    encoder: fgrad_nn.TransformerEncoder
    head: fgrad_nn.Linear

    def __init__(self, *, key):
        k = fgrad.random.split(key, 4)
        self.tok = fgrad_nn.Embedding(VOCAB, D, key=k[0])
        self.pos = fgrad_nn.Embedding(SEQ, D, key=k[1])
        layer = fgrad_nn.TransformerEncoderLayer(D, HEADS, FF, dropout=0.0, batch_first=True,
                                                 norm_first=True, key=k[2])
        self.encoder = fgrad_nn.TransformerEncoder(layer, LAYERS, fgrad_nn.LayerNorm(D))
        self.head = fgrad_nn.Linear(D, VOCAB, key=k[3])

    def __call__(self, ids, *, key=None):
        x = self.tok(ids) + self.pos(fnp.arange(ids.shape[-1]))
        return self.head(self.encoder(x, is_causal=True))


def batches(steps):
    rng = np.random.default_rng(0)
    return [(rng.integers(0, VOCAB, (BATCH, SEQ)), rng.integers(0, VOCAB, (BATCH, SEQ)))
            for _ in range(steps + 1)]


def named_weights(model):
    """{PyTorch parameter name: float32 NumPy array} of the fgrad_nn model."""
    out = {"tok.weight": model.tok.weight, "pos.weight": model.pos.weight,
           "head.weight": model.head.weight, "head.bias": model.head.bias,
           "encoder.norm.weight": model.encoder.norm.weight,
           "encoder.norm.bias": model.encoder.norm.bias}
    for i, layer in enumerate(model.encoder.layers):
        p = f"encoder.layers.{i}."
        for name, value in [("self_attn.in_proj_weight", layer.self_attn.in_proj_weight),
                            ("self_attn.in_proj_bias", layer.self_attn.in_proj_bias),
                            ("self_attn.out_proj.weight", layer.self_attn.out_proj.weight),
                            ("self_attn.out_proj.bias", layer.self_attn.out_proj.bias),
                            ("linear1.weight", layer.linear1.weight),
                            ("linear1.bias", layer.linear1.bias),
                            ("linear2.weight", layer.linear2.weight),
                            ("linear2.bias", layer.linear2.bias),
                            ("norm1.weight", layer.norm1.weight), ("norm1.bias", layer.norm1.bias),
                            ("norm2.weight", layer.norm2.weight), ("norm2.bias", layer.norm2.bias)]:
            out[p + name] = value
    return {k: np.array(v, np.float32) for k, v in out.items()}


def _train(step, state, data, ready):
    """The compiling step on data[0], then the rest in ROUNDS timed parts: (Timing
    per step, first loss)."""
    state, first = step(state, *data[0])
    first = float(ready(first))
    per_round, times = (len(data) - 1) // ROUNDS, []
    for r in range(ROUNDS):
        start = time.perf_counter()
        for x, y in data[1 + r * per_round: 1 + (r + 1) * per_round]:
            state, loss = step(state, x, y)
        ready(loss)
        times.append((time.perf_counter() - start) / per_round)
    return Timing(statistics.median(times), min(times), ROUNDS, per_round), first


def fgrad_train_step():
    """fgrad's jitted training step (model, opt_state, x, y) -> (model, opt_state,
    loss), with the first model and optimizer state."""
    model = CharTransformer(key=fgrad.random.key(0))
    opt = optim.adam(LR)

    @fgrad.jit
    def train_step(model, opt_state, x, y):
        def loss_fn(m):
            return losses.softmax_cross_entropy_with_integer_labels(m(x), y)
        loss, g = fgrad.value_and_grad(loss_fn)(model)
        updates, opt_state = opt.update(g, opt_state, model)
        return optim.apply_updates(model, updates), opt_state, loss
    return train_step, model, opt.init(model)


def run_fgrad(data):
    train_step, model, opt_state = fgrad_train_step()

    def step(state, x, y):
        model, opt_state, loss = train_step(*state, x, y)
        return (model, opt_state), loss
    return _train(step, (model, opt_state), data, np.asarray)


def run_torch(data, w, compiled):
    torch = peers.torch()
    nn, F = torch.nn, torch.nn.functional

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(VOCAB, D), nn.Embedding(SEQ, D)
            layer = nn.TransformerEncoderLayer(D, HEADS, FF, dropout=0.0, batch_first=True,
                                               norm_first=True)
            self.encoder = nn.TransformerEncoder(layer, LAYERS, nn.LayerNorm(D),
                                                 enable_nested_tensor=False)
            self.head = nn.Linear(D, VOCAB)
            self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(SEQ))

        def forward(self, ids):
            x = self.tok(ids) + self.pos.weight[:ids.shape[1]]
            return self.head(self.encoder(x, mask=self.mask, is_causal=True))

    model = Model()
    with torch.no_grad():
        params = dict(model.named_parameters())
        assert set(params) == set(w), set(params) ^ set(w)
        for name, p in params.items():
            p.copy_(torch.from_numpy(w[name]))
    forward = torch.compile(model, dynamic=False) if compiled else model
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    tdata = [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in data]

    def step(state, x, y):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(forward(x).reshape(-1, VOCAB), y.reshape(-1))
        loss.backward()
        opt.step()
        return state, loss.detach()
    return _train(step, None, tdata, lambda v: v.item() if hasattr(v, "item") else v)


def run_jax(data, w):
    jax, optax = peers.jax(), peers.optax()
    jnp = jax.numpy

    def layer_norm(x, p, name):
        mean = jnp.mean(x, -1, keepdims=True)
        var = jnp.mean((x - mean) ** 2, -1, keepdims=True)
        return (x - mean) / jnp.sqrt(var + 1e-5) * p[name + ".weight"] + p[name + ".bias"]

    def linear(x, p, name):
        return x @ p[name + ".weight"].T + p[name + ".bias"]

    causal = jnp.tril(jnp.ones((SEQ, SEQ), bool))

    def attention(x, p, name):
        n, length, _ = x.shape
        qkv = x @ p[name + ".in_proj_weight"].T + p[name + ".in_proj_bias"]
        q, k, v = (t.reshape(n, length, HEADS, D // HEADS).transpose(0, 2, 1, 3)
                   for t in jnp.split(qkv, 3, axis=-1))
        s = jnp.where(causal, q @ k.transpose(0, 1, 3, 2) / np.sqrt(D // HEADS), -jnp.inf)
        out = (jax.nn.softmax(s, axis=-1) @ v).transpose(0, 2, 1, 3).reshape(n, length, D)
        return linear(out, p, name + ".out_proj")

    def forward(p, ids):
        x = p["tok.weight"][ids] + p["pos.weight"][:ids.shape[1]]
        for i in range(LAYERS):
            pre = f"encoder.layers.{i}."
            x = x + attention(layer_norm(x, p, pre + "norm1"), p, pre + "self_attn")
            h = jax.nn.relu(linear(layer_norm(x, p, pre + "norm2"), p, pre + "linear1"))
            x = x + linear(h, p, pre + "linear2")
        return linear(layer_norm(x, p, "encoder.norm"), p, "head")

    def loss_fn(p, x, y):
        return optax.softmax_cross_entropy_with_integer_labels(forward(p, x), y).mean()

    opt = optax.adam(LR)

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
    steps = 3 if quick else STEPS
    data = batches(steps)
    w = named_weights(CharTransformer(key=fgrad.random.key(0)))
    results = {"fgrad jit": guarded(lambda: run_fgrad(data))}
    results["torch eager"] = (guarded(lambda: run_torch(data, w, False)) if peers.torch()
                              else peers.missing("torch"))
    results["torch.compile"] = (peers.torch_compile_ok() or
                                guarded(lambda: run_torch(data, w, True)))
    results["jax.jit + optax"] = (
        peers.missing("jax") if peers.jax() is None else peers.missing("optax")
        if peers.optax() is None else guarded(lambda: run_jax(data, w)))
    reference = (results["fgrad jit"][1] if isinstance(results["fgrad jit"], tuple) else None)
    cells, firsts = {}, []
    for col, res in results.items():
        if isinstance(res, str):
            cells[col] = res
            continue
        timing, first = res
        cells[col] = guarded(lambda: (agree(f"{col} first loss", first, reference, 1e-4, 1e-5)
                                      if reference is not None else None, timing)[1])
        firsts.append(f"{col} {first:.5f}")
    table = Table(TITLE, COLUMNS, short="8 transformer step")
    table.add(f"batch {BATCH}, {steps} steps", cells)
    return Section(TITLE, [table], [
        f"Time per training step over {ROUNDS} rounds of {steps // ROUNDS} steps (median "
        "(best round)); the first (compiling) step is excluded.",
        "First-step losses (checked to agree, rtol 1e-4): " + "; ".join(firsts) + ".",
        "PyTorch runs nn.TransformerEncoder in training mode (its fused inference path "
        "does not apply); torch.compile compiles the model, Adam stays eager."])


if __name__ == "__main__":
    import common
    common.main_for(run, TITLE)
