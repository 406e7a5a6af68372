"""Sweep: fgrad_nn layers eagerly, under jit and under vmap.

Run as a script (`python tests/sweep_nn.py`). For each layer: forward and the
gradient of a scalar loss in the parameters, eager against jit (bits, up to the
documented last-bit freedom of transcendental functions and sums) and the
batch call against vmap over its examples.
"""
import warnings

import numpy as np

import fgrad
import fgrad.numpy as fnp
import fgrad_nn as nn

warnings.simplefilter("ignore")
K = fgrad.random.PRNGKey(0)
rng = np.random.default_rng(0)


def r(*s):
    return rng.standard_normal(s).astype(np.float32)


LAYERS = [
    ("Linear", nn.Linear(5, 3, key=K), r(4, 5)),
    ("Bilinear", nn.Bilinear(3, 2, 4, key=K), (r(4, 3), r(4, 2))),
    ("MLP", nn.MLP(5, 3, [8, 8], key=K) if False else nn.Sequential([nn.Linear(5, 8, key=K), nn.GELU(), nn.Linear(8, 3, key=K)]), r(4, 5)),
    ("Conv1d", nn.Conv1d(2, 3, 3, padding=1, key=K), r(4, 2, 7)),
    ("Conv2d s2", nn.Conv2d(2, 3, 3, stride=2, padding=1, key=K), r(4, 2, 7, 6)),
    ("Conv2d dil groups", nn.Conv2d(4, 4, 3, dilation=2, groups=2, key=K), r(4, 4, 7, 7)),
    ("ConvTranspose2d", nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1, output_padding=1, key=K), r(4, 2, 4, 4)),
    ("ConvTranspose1d", nn.ConvTranspose1d(2, 3, 4, stride=3, key=K), r(4, 2, 5)),
    ("MaxPool2d", nn.MaxPool2d(2), r(4, 2, 6, 6)),
    ("MaxPool2d pad", nn.MaxPool2d(3, stride=2, padding=1), r(4, 2, 7, 7)),
    ("AvgPool2d pad", nn.AvgPool2d(3, stride=2, padding=1), r(4, 2, 7, 7)),
    ("AvgPool2d ceil", nn.AvgPool2d(2, ceil_mode=True) if True else None, r(4, 2, 5, 5)),
    ("AdaptiveAvgPool2d", nn.AdaptiveAvgPool2d((3, 2)), r(4, 2, 7, 5)),
    ("AdaptiveMaxPool2d", nn.AdaptiveMaxPool2d((3, 2)), r(4, 2, 7, 5)),
    ("LayerNorm", nn.LayerNorm(5), r(4, 5)),
    ("RMSNorm", nn.RMSNorm(5), r(4, 5)),
    ("GroupNorm", nn.GroupNorm(2, 4), r(4, 4, 3, 2)),
    ("Embedding", nn.Embedding(10, 3, key=K), np.array([1, 9, 0, 3])),
    ("MHA", nn.MultiheadAttention(8, 2, batch_first=True, key=K), (r(4, 5, 8), r(4, 5, 8), r(4, 5, 8))),
    ("TransformerEncoderLayer", nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, key=K), r(4, 5, 8)),
    ("GRU", getattr(nn.layers.recurrent, "GRU")(3, 4, batch_first=True, key=K), r(4, 6, 3)),
    ("LSTM", getattr(nn.layers.recurrent, "LSTM")(3, 4, batch_first=True, key=K), r(4, 6, 3)),
    ("GLU", nn.GLU(), r(4, 6)),
    ("Softmax", nn.Softmax(), r(4, 6)),
    ("Mish", nn.Mish(), r(4, 6)),
]


def loss_of(model, x):
    out = model(*x) if isinstance(x, tuple) else model(x)
    out = out[0] if isinstance(out, tuple) else out
    return fnp.sum(fnp.sin(out.astype(fnp.float32)) * 1.5)


def cmp(a, b, rtol):
    out = []
    for x, y in zip(fgrad.tree.leaves(a), fgrad.tree.leaves(b)):
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape or x.dtype != y.dtype:
            return f"shape/dtype {x.shape}{x.dtype} vs {y.shape}{y.dtype}"
        if not np.allclose(x, y, rtol=rtol, atol=rtol, equal_nan=True):
            out.append(float(np.max(np.abs(x.astype(float) - y.astype(float)))))
    return f"max abs diff {max(out)}" if out else None


for name, model, x in LAYERS:
    try:
        v, g = fgrad.value_and_grad(loss_of)(model, x)
        vj, gj = fgrad.jit(fgrad.value_and_grad(loss_of))(model, x)
    except Exception as e:
        print(f"{name}: RAISES {type(e).__name__}: {str(e)[:200]}")
        continue
    m = cmp((v, g), (vj, gj), 2e-6)
    if m:
        print(f"{name}: jit vs eager {m}")
    xs = x
    try:
        batch = model(*xs) if isinstance(xs, tuple) else model(xs)
        per = fgrad.vmap(lambda *e: model(*e))(*xs) if isinstance(xs, tuple) else \
            fgrad.vmap(model)(xs)
        m = cmp(batch, per, 2e-6)
        if m:
            print(f"{name}: batch call vs vmap over examples {m}")
    except Exception as e:
        print(f"{name}: vmap RAISES {type(e).__name__}: {str(e)[:160]}")
print("done")
