"""A character-level decoder-only transformer (a small GPT) trained on a text.

    python examples/transformer.py                   # the default text, offline
    python examples/transformer.py --text book.txt   # any UTF-8 text file

The default text ships with Python: the help topics of pydoc_data/topics.py (the
prose `help("if")` prints: about 465,000 characters of the language reference).
Its last 10% is held out for validation.

Model: Embedding(chars, d_model) + a learned position table -> layers x pre-norm
TransformerEncoderLayer (causal self-attention, so each position sees only the
characters before it; GELU feed-forward) -> LayerNorm -> Linear(d_model, chars).
Training: AdamW (warm-up + cosine), one jitted step on random windows of the
training text. Every --eval-every steps the run measures the validation loss
(nats per character) and prints a sample drawn from the model (continuing the
validation text's first four characters). At the end it
writes under --out (default runs/transformer/) the curves (curves.png), the
history (history.json) and a checkpoint (checkpoint.safetensors, with the
vocabulary and the settings in its metadata), reloads the checkpoint and checks
that it gives the same validation loss.
"""
import argparse
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

try:
    import fgrad
except ImportError:  # a source checkout run without `make install`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import fgrad
import fgrad_nn as fnn
from fgrad_nn import checkpoint, optim, schedules
from fgrad_nn._attention import causal_mask
from fgrad_nn.losses import softmax_cross_entropy
from fgrad_nn.training import History, Progress, plot_curves


@dataclass
class Config:
    """Every setting of a run (the command line's flags)."""
    text: str = None           # a file; None: Python's pydoc help topics
    steps: int = 800
    eval_every: int = 200
    batch_size: int = 32
    block: int = 64            # context length (characters)
    d_model: int = 64
    heads: int = 4
    layers: int = 2
    dropout: float = 0.1
    lr: float = 3e-3
    weight_decay: float = 0.01
    warmup_steps: int = 50
    sample_chars: int = 200
    seed: int = 0
    out: str = "runs/transformer"


# -- data -------------------------------------------------------------------------------

def default_text():
    """The help topics shipped with Python (pydoc_data.topics), joined in name order."""
    from pydoc_data.topics import topics
    return "\n".join(topics[name] for name in sorted(topics))


def load_text(path=None):
    if path is None:
        return default_text()
    text = Path(path).read_text(encoding="utf-8")
    if len(text) < 100:
        raise ValueError(f"--text {path}: {len(text)} characters is too short to train on")
    return text


class Vocabulary:
    """The text's distinct characters <-> integer ids."""

    def __init__(self, chars):
        self.chars = "".join(sorted(set(chars)))
        self.index = {c: i for i, c in enumerate(self.chars)}

    def __len__(self):
        return len(self.chars)

    def encode(self, text):
        return np.array([self.index[c] for c in text], dtype=np.int32)

    def decode(self, ids):
        return "".join(self.chars[int(i)] for i in ids)


def split(ids, fraction=0.9):
    cut = int(len(ids) * fraction)
    return ids[:cut], ids[cut:]


def random_windows(ids, block, batch_size, rng):
    """(x, y): batch_size random windows of `block` ids and the same shifted by one."""
    starts = rng.integers(0, len(ids) - block - 1, batch_size)
    x = np.stack([ids[s:s + block] for s in starts])
    y = np.stack([ids[s + 1:s + block + 1] for s in starts])
    return x, y


# -- model ------------------------------------------------------------------------------

class CharTransformer(fnn.Module):
    """ids (N, L) -> next-character logits (N, L, vocab), L <= block."""
    embed: fnn.Embedding
    positions: fnn.LearnedPositionalEmbedding
    blocks: tuple
    norm: fnn.LayerNorm
    head: fnn.Linear

    def __init__(self, vocab, block, d_model, heads, layers, dropout=0.0, *, key):
        keys = fgrad.random.split(key, layers + 3)
        self.embed = fnn.Embedding(vocab, d_model, key=keys[0])
        self.positions = fnn.LearnedPositionalEmbedding(block, d_model, key=keys[1])
        self.blocks = tuple(
            fnn.TransformerEncoderLayer(d_model, heads, 4 * d_model, dropout, "gelu",
                                        batch_first=True, norm_first=True, key=k)
            for k in keys[2:-1])
        self.norm = fnn.LayerNorm(d_model)
        self.head = fnn.Linear(d_model, vocab, key=keys[-1])

    def __call__(self, ids, *, key=None):
        # Embedding draws N(0, 1); scale it to the positions' and the residual
        # stream's size, as GPT-2's initialisation does.
        x = self.positions(0.02 * self.embed(ids))
        mask = ~causal_mask(ids.shape[-1])          # True: may not attend
        keys = fgrad.random.split(key, len(self.blocks)) if key is not None else \
            [None] * len(self.blocks)
        for block, k in zip(self.blocks, keys):
            x = block(x, mask, key=k)
        return self.head(self.norm(x))


def build_model(config, vocab, *, key):
    return CharTransformer(vocab, config.block, config.d_model, config.heads, config.layers,
                           config.dropout, key=key)


def make_optimizer(config):
    schedule = schedules.warmup_cosine_decay_schedule(
        init_value=0.0, peak_value=config.lr, warmup_steps=config.warmup_steps,
        decay_steps=max(config.steps, config.warmup_steps + 1), end_value=config.lr * 0.05)
    return optim.adamw(schedule, weight_decay=config.weight_decay,
                       mask=lambda model: fgrad.tree.map(lambda p: p.ndim >= 2, model))


def loss_fn(model, x, y, key=None):
    logits = model(x, key=key)
    return softmax_cross_entropy(logits, y)


def make_train_step(optimizer):
    """One jitted step (model and optimizer state donated)."""
    def step(model, opt_state, x, y, key):
        loss, grads = fgrad.value_and_grad(loss_fn)(model, x, y, key)
        updates, opt_state = optimizer.update(grads, opt_state, model)
        return optim.apply_updates(model, updates), opt_state, loss
    return fgrad.jit(step, donate_argnums=(0, 1))


eval_loss = fgrad.jit(loss_fn)


def validation_loss(model, ids, block, batches=8, batch_size=32):
    """Mean loss (nats per character) over fixed windows spread through `ids`."""
    model = fnn.eval_mode(model)
    count = batches * batch_size
    starts = np.linspace(0, len(ids) - block - 1, count).astype(np.int64)
    total = 0.0
    for b in range(batches):
        chunk = starts[b * batch_size:(b + 1) * batch_size]
        x = np.stack([ids[s:s + block] for s in chunk])
        y = np.stack([ids[s + 1:s + block + 1] for s in chunk])
        total += float(eval_loss(model, x, y))
    return total / batches


@fgrad.jit
def _next_logits(model, window, position):
    return model(window[None])[0, position]


def sample(model, vocab, prompt, n, block, rng, temperature=0.8):
    """Continue `prompt` by n characters drawn from the model one at a time. The
    context (the last `block` characters) is padded on the right to `block`, so one
    compiled forward serves every step; the causal mask keeps the padding unseen."""
    model = fnn.eval_mode(model)
    ids = list(vocab.encode(prompt))
    for _ in range(n):
        context = ids[-block:]
        window = np.zeros(block, np.int32)
        window[:len(context)] = context
        logits = np.asarray(_next_logits(model, window, len(context) - 1), np.float64)
        p = np.exp((logits - logits.max()) / temperature)
        ids.append(int(rng.choice(len(p), p=p / p.sum())))
    return vocab.decode(ids)


# -- training ---------------------------------------------------------------------------

def train(config, *, progress=None, log=print):
    """Train as `config` says. Returns a dict with the `model`, `opt_state`, `history`,
    `vocab`, the final `val_loss` and the `val_ids`."""
    text = load_text(config.text)
    vocab = Vocabulary(text)
    train_ids, val_ids = split(vocab.encode(text))
    if min(len(train_ids), len(val_ids)) <= config.block + 1:
        raise ValueError(f"the text ({len(text)} characters) is too short for windows of "
                         f"{config.block}: pass a longer --text or a smaller --block")
    rng = np.random.default_rng(config.seed)
    key = fgrad.random.key(config.seed)
    init_key, key = fgrad.random.split(key)
    model = build_model(config, len(vocab), key=init_key)
    optimizer = make_optimizer(config)
    opt_state = optimizer.init(model)
    train_step = make_train_step(optimizer)
    log(f"text: {len(text):,} characters, {len(vocab)} distinct; model: "
        f"{fnn.count_params(model):,} parameters")

    prompt = vocab.decode(val_ids[:4])     # samples continue the validation text's start
    rounds = -(-config.steps // config.eval_every)
    progress = progress or Progress(rounds)
    history = History()
    step = 0
    for _ in progress.epochs():
        todo = min(config.eval_every, config.steps - step)
        for _ in progress.batches(range(todo), desc=f"steps {step + 1}-{step + todo}"):
            x, y = random_windows(train_ids, config.block, config.batch_size, rng)
            step_key, key = fgrad.random.split(key)
            model, opt_state, loss = train_step(model, opt_state, x, y, step_key)
            progress.log(loss=loss)
        step += todo
        val = validation_loss(model, val_ids, config.block)
        train_loss = progress.means()["loss"]
        history.append(step=step, train_loss=train_loss, val_loss=val,
                       lr=float(optim.current_learning_rate(opt_state)))
        progress.summary(train_loss=train_loss, val_loss=val)
        text_out = sample(model, vocab, prompt, config.sample_chars, config.block, rng)
        log(f"step {step}: train loss {train_loss:.3f}, validation loss {val:.3f} "
            f"nats/char; sample:\n{text_out}\n")
    return {"model": fnn.eval_mode(model), "opt_state": opt_state, "history": history,
            "vocab": vocab, "val_loss": val, "val_ids": val_ids}


# -- checkpoint -------------------------------------------------------------------------

def save_checkpoint(path, model, opt_state, config, vocab, val_loss):
    checkpoint.save(path, {"model": model, "opt_state": opt_state},
                    metadata={"config": asdict(config), "vocab": vocab.chars,
                              "val_loss": val_loss})


def load_checkpoint(path):
    """(model, vocab, metadata) from a checkpoint written by `save_checkpoint`."""
    metadata = checkpoint.load_metadata(path)
    config = Config(**metadata["config"])
    vocab = Vocabulary(metadata["vocab"])
    template = fnn.eval_mode(build_model(config, len(vocab), key=fgrad.random.key(0)))
    opt_state = make_optimizer(config).init(template)
    state = checkpoint.load(path, like={"model": template, "opt_state": opt_state})
    return state["model"], vocab, metadata


# -- command line -----------------------------------------------------------------------

def parse_args(argv=None):
    d = Config()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--text", default=None, metavar="FILE",
                   help="a UTF-8 text file (default: Python's pydoc help topics)")
    for name in ("steps", "eval_every", "batch_size", "block", "d_model", "heads", "layers",
                 "warmup_steps", "sample_chars", "seed"):
        p.add_argument(f"--{name.replace('_', '-')}", type=int, default=getattr(d, name))
    for name in ("dropout", "lr", "weight_decay"):
        p.add_argument(f"--{name.replace('_', '-')}", type=float, default=getattr(d, name))
    p.add_argument("--out", default=d.out,
                   help="directory for the checkpoint, the curves PNG and the history")
    p.add_argument("--quick", action="store_true",
                   help="a smoke run: 20 steps of a one-layer model, short windows")
    bars = p.add_mutually_exclusive_group()
    bars.add_argument("--progress", dest="progress", action="store_true", default=None,
                      help="show progress bars even when stderr is not a terminal")
    bars.add_argument("--no-progress", dest="progress", action="store_false",
                      help="hide the progress bars (default: shown on a terminal)")
    args = p.parse_args(argv)
    if args.quick:
        args.steps, args.eval_every, args.layers, args.d_model = 20, 10, 1, 32
        args.block, args.batch_size, args.warmup_steps, args.sample_chars = 16, 8, 5, 40
    for name in ("steps", "eval_every", "batch_size", "block", "d_model", "heads", "layers"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.d_model % args.heads:
        p.error(f"--d-model ({args.d_model}) must be a multiple of --heads ({args.heads})")
    return args


def main(argv=None):
    args = parse_args(argv)
    config = Config(**{k: v for k, v in vars(args).items()
                       if k in Config.__dataclass_fields__})
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"char transformer on {config.text or 'pydoc_data.topics'}: {config.layers} layers, "
          f"d_model {config.d_model}, {config.heads} heads, context {config.block}; "
          f"{config.steps} steps of batch {config.batch_size}, AdamW peak lr {config.lr}")
    rounds = -(-config.steps // config.eval_every)
    progress = Progress(rounds, disable=None if args.progress is None else not args.progress)
    start = time.perf_counter()
    result = train(config, progress=progress)
    seconds = time.perf_counter() - start
    print(f"trained in {seconds:.1f} s; validation loss {result['val_loss']:.4f} nats/char")

    curves = plot_curves(result["history"], out / "curves.png",
                         title="char transformer: loss (nats/char)")
    result["history"].to_json(out / "history.json")
    path = out / "checkpoint.safetensors"
    save_checkpoint(path, result["model"], result["opt_state"], config, result["vocab"],
                    result["val_loss"])
    print(f"saved {path}, {curves} and {out / 'history.json'}")
    model, _, _ = load_checkpoint(path)
    again = validation_loss(model, result["val_ids"], config.block)
    print(f"reloaded the checkpoint: validation loss {again:.4f} nats/char")
    if again != result["val_loss"]:
        raise SystemExit(f"the reloaded model's validation loss {again} differs from "
                         f"{result['val_loss']}: the checkpoint did not round-trip")
    return result["val_loss"]


if __name__ == "__main__":
    main()
