"""MultiheadAttention (PyTorch's parameter layout) and position embeddings
(sinusoidal, learned, rotary)."""
import numpy as np

import fgrad
import fgrad.numpy as fnp

from fgrad_nn import init
from fgrad_nn._attention import attention_weights, causal_mask, scaled_dot_product_attention
from fgrad_nn._checks import flag
from fgrad_nn.layers import _init
from fgrad_nn.layers.linear import Linear
from fgrad_nn.module import Module, replace, static_field

__all__ = ["MultiheadAttention", "SinusoidalPositionalEmbedding", "LearnedPositionalEmbedding",
           "RotaryEmbedding", "sinusoidal_positions", "apply_rotary"]


def _additive(mask, dtype):
    """A MultiheadAttention mask as an additive float mask: boolean True (PyTorch's
    'masked out' in this layer) becomes -inf, floats are kept."""
    mask = fnp.asarray(mask)
    if mask.dtype == fnp.bool_:
        return fnp.where(mask, -np.inf, 0.0).astype(dtype)
    return mask.astype(dtype)


class MultiheadAttention(Module):
    """Multi-head attention as PyTorch's nn.MultiheadAttention, same parameters:

    - in_proj_weight (3E, E) (rows: query, key, value projections) when kdim ==
      vdim == E, else q_proj_weight (E, E), k_proj_weight (E, kdim), v_proj_weight
      (E, vdim) (and in_proj_weight None); initialised Xavier-uniform;
    - in_proj_bias (3E,) zeros (None with bias=False);
    - out_proj: Linear(E, E) with a zero bias.

    Called `mha(query, keys, values, key_padding_mask=None, need_weights=True,
    attn_mask=None, average_attn_weights=True, is_causal=False, *, key=None)` ->
    (output, weights or None). The attention keys are named `keys` because `key`
    is the PRNG key everywhere in fgrad_nn (needed for dropout in training mode).
    Shapes (batch_first=False, PyTorch's default): query (L, N, E), keys (S, N,
    kdim), values (S, N, vdim), output (L, N, E); batch_first=True puts N first;
    one example is (L, E). weights: (N, L, S) averaged over heads, or (N, H, L, S).
    Masks as PyTorch's layer: key_padding_mask (N, S) and attn_mask (L, S) or
    (N·H, L, S); boolean True means "do not attend", float masks are added to the
    scores. is_causal=True without attn_mask applies the causal mask.
    """
    in_proj_weight: fgrad.Array
    q_proj_weight: fgrad.Array
    k_proj_weight: fgrad.Array
    v_proj_weight: fgrad.Array
    in_proj_bias: fgrad.Array
    out_proj: Linear
    embed_dim: int = static_field()
    num_heads: int = static_field()
    dropout: float = static_field()
    kdim: int = static_field()
    vdim: int = static_field()
    batch_first: bool = static_field()
    training: bool = static_field()

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, kdim=None, vdim=None,
                 batch_first=False, *, key, training=True, dtype=None):
        e, h = int(embed_dim), int(num_heads)
        if h < 1 or e % h:
            raise ValueError(f"MultiheadAttention: embed_dim ({embed_dim}) must be divisible "
                             f"by num_heads ({num_heads})")
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"MultiheadAttention: dropout must be in [0, 1], got {dropout}")
        dtype = _init.resolve_dtype(dtype)
        self.embed_dim, self.num_heads, self.dropout = e, h, float(dropout)
        self.kdim = e if kdim is None else int(kdim)
        self.vdim = e if vdim is None else int(vdim)
        self.batch_first = flag("MultiheadAttention", "batch_first", batch_first)
        self.training = flag("MultiheadAttention", "training", training)
        bias = flag("MultiheadAttention", "bias", bias)
        keys = _init.split(key, 4)
        xavier = init.xavier_uniform(dtype=dtype)
        if self.kdim == e and self.vdim == e:
            self.in_proj_weight = xavier(keys[0], (3 * e, e), dtype)
            self.q_proj_weight = self.k_proj_weight = self.v_proj_weight = None
        else:
            self.in_proj_weight = None
            self.q_proj_weight = xavier(keys[0], (e, e), dtype)
            self.k_proj_weight = xavier(keys[1], (e, self.kdim), dtype)
            self.v_proj_weight = xavier(keys[2], (e, self.vdim), dtype)
        self.in_proj_bias = fnp.zeros((3 * e,), dtype) if bias else None
        self.out_proj = _zero_bias(Linear(e, e, bias, key=keys[3], dtype=dtype))

    def _projection_weights(self):
        if self.in_proj_weight is not None:
            e = self.embed_dim
            w = self.in_proj_weight
            return w[:e], w[e:2 * e], w[2 * e:]
        return self.q_proj_weight, self.k_proj_weight, self.v_proj_weight

    def __call__(self, query, keys, values, key_padding_mask=None, need_weights=True,
                 attn_mask=None, average_attn_weights=True, is_causal=False, *, key=None):
        e, h = self.embed_dim, self.num_heads
        single = query.ndim == 2
        if single:
            query, keys, values = (fnp.expand_dims(t, 0) for t in (query, keys, values))
            if key_padding_mask is not None:
                key_padding_mask = fnp.expand_dims(fnp.asarray(key_padding_mask), 0)
        elif not self.batch_first:
            query, keys, values = (fnp.swapaxes(t, 0, 1) for t in (query, keys, values))
        if query.ndim != 3 or keys.ndim != 3 or values.ndim != 3 or query.shape[-1] != e or \
                keys.shape[-1] != self.kdim or values.shape[-1] != self.vdim or \
                keys.shape[:2] != values.shape[:2] or query.shape[0] != keys.shape[0]:
            raise ValueError(f"MultiheadAttention: expected query (.., L, {e}), keys "
                             f"(.., S, {self.kdim}) and values (.., S, {self.vdim}) with the "
                             f"same batch (batch_first={self.batch_first}), got shapes "
                             f"{tuple(query.shape)}, {tuple(keys.shape)}, {tuple(values.shape)}")
        n, length, source = query.shape[0], query.shape[1], keys.shape[1]
        wq, wk, wv = self._projection_weights()
        b = self.in_proj_bias
        bq, bk, bv = (None,) * 3 if b is None else (b[:e], b[e:2 * e], b[2 * e:])

        def heads(x, w, b):     # (N, T, dim) -> (N, H, T, E/H)
            y = fnp.matmul(x, fnp.swapaxes(w, 0, 1))
            y = y if b is None else y + b
            return fnp.swapaxes(fnp.reshape(y, (n, y.shape[1], h, e // h)), 1, 2)

        q, k, v = heads(query, wq, bq), heads(keys, wk, bk), heads(values, wv, bv)
        p = self.dropout if self.training else 0.0
        # a causal mask alone goes to the attention functions as is_causal (without
        # weights, scaled_dot_product_attention skips its fully masked blocks)
        causal = is_causal and attn_mask is None and key_padding_mask is None
        mask = None if causal else self._mask(attn_mask, key_padding_mask, is_causal, n, length,
                                              source, q.dtype)
        if need_weights:
            weights = attention_weights(q, k, mask, p, causal, key=key)
            out = fnp.matmul(weights, v)
        else:
            weights = None
            out = scaled_dot_product_attention(q, k, v, mask, p, causal, key=key)
        out = fnp.reshape(fnp.swapaxes(out, 1, 2), (n, length, e))
        out = self.out_proj(out)
        if weights is not None and average_attn_weights:
            weights = fnp.mean(weights, axis=1)
        if single:
            return out[0], (None if weights is None else weights[0])
        if not self.batch_first:
            out = fnp.swapaxes(out, 0, 1)
        return out, weights

    def _mask(self, attn_mask, key_padding_mask, is_causal, n, length, source, dtype):
        """One additive mask broadcasting to (N, H, L, S), or None."""
        if attn_mask is None and is_causal:
            attn_mask = ~causal_mask(length, source)
        mask = None
        if attn_mask is not None:
            mask = _additive(attn_mask, dtype)
            if mask.shape == (length, source):
                pass
            elif mask.shape == (n * self.num_heads, length, source):
                mask = fnp.reshape(mask, (n, self.num_heads, length, source))
            else:
                raise ValueError(f"MultiheadAttention: attn_mask must have shape (L, S) = "
                                 f"{(length, source)} or (N·num_heads, L, S) = "
                                 f"{(n * self.num_heads, length, source)}, got "
                                 f"{tuple(mask.shape)}")
        if key_padding_mask is not None:
            pad = _additive(key_padding_mask, dtype)
            if pad.shape != (n, source):
                raise ValueError(f"MultiheadAttention: key_padding_mask must have shape "
                                 f"(N, S) = {(n, source)}, got {tuple(pad.shape)}")
            pad = fnp.reshape(pad, (n, 1, 1, source))
            mask = pad if mask is None else mask + pad
        return mask


def _zero_bias(linear):
    if linear.bias is None:
        return linear
    return replace(linear, bias=fnp.zeros_like(linear.bias))


def sinusoidal_positions(length, dim, base=10000.0, dtype=fnp.float32):
    """(length, dim) table of "Attention is all you need": column 2i is
    sin(pos / base^(2i/dim)), column 2i+1 the cos of the same angle (dim even)."""
    if dim % 2:
        raise ValueError(f"sinusoidal_positions: dim must be even, got {dim}")
    pos = np.arange(length, dtype=np.float64)[:, None]
    freq = base ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)
    table = np.zeros((length, dim))
    table[:, 0::2] = np.sin(pos * freq)
    table[:, 1::2] = np.cos(pos * freq)
    return fnp.asarray(table, dtype=dtype)


class SinusoidalPositionalEmbedding(Module):
    """Adds sinusoidal_positions to x of shape (..., L, dim) (positions along
    `seq_axis`, default -2: batch-first (N, L, dim) or one example (L, dim); use
    seq_axis=0 for PyTorch's (L, N, dim)). No parameters."""
    dim: int = static_field()
    base: float = static_field(default=10000.0)
    seq_axis: int = static_field(default=-2)

    def __call__(self, x, *, key=None):
        ax = self.seq_axis % x.ndim
        table = sinusoidal_positions(x.shape[ax], self.dim, self.base, x.dtype)
        return x + fnp.reshape(table, table.shape[:1] + (1,) * (x.ndim - 2 - ax) + (self.dim,))


class LearnedPositionalEmbedding(Module):
    """A trained (max_len, dim) table; x of shape (..., L, dim) (positions along
    `seq_axis`, default -2) gets rows 0..L-1 added. weight drawn from N(0, 0.02²)
    (GPT-2's choice; PyTorch has no such layer)."""
    weight: fgrad.Array
    max_len: int = static_field()
    dim: int = static_field()
    seq_axis: int = static_field()

    def __init__(self, max_len, dim, seq_axis=-2, *, key, dtype=None):
        self.max_len, self.dim, self.seq_axis = int(max_len), int(dim), int(seq_axis)
        dtype = _init.resolve_dtype(dtype)
        self.weight = init.normal(0.02, dtype=dtype)(key, (self.max_len, self.dim), dtype)

    def __call__(self, x, *, key=None):
        ax = self.seq_axis % x.ndim
        if x.shape[ax] > self.max_len:
            raise ValueError(f"LearnedPositionalEmbedding: sequence of length {x.shape[ax]} "
                             f"is longer than max_len {self.max_len}")
        table = self.weight[:x.shape[ax]]
        return x + fnp.reshape(table, table.shape[:1] + (1,) * (x.ndim - 2 - ax) + (self.dim,))


def apply_rotary(x, positions=None, base=10000.0):
    """Rotary position embedding (RoPE) of x (..., L, D), D even, with the half-split
    convention (GPT-NeoX, Hugging Face LLaMA): feature i of the first half pairs with
    feature i + D/2, and the pair rotates by angle pos·base^(-2i/D):
    (a, b) -> (a·cos - b·sin, b·cos + a·sin). positions: (L,) integers or floats,
    default 0..L-1. Apply it to queries and keys per head, before the scores."""
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"apply_rotary: the feature size must be even, got shape "
                         f"{tuple(x.shape)}")
    length = x.shape[-2]
    pos = (fnp.arange(length, dtype=x.dtype) if positions is None
           else fnp.asarray(positions).astype(x.dtype))
    freq = fnp.asarray(base ** (-np.arange(0, d, 2, dtype=np.float64) / d), dtype=x.dtype)
    angle = pos[:, None] * freq[None, :]                         # (L, D/2)
    cos, sin = fnp.cos(angle), fnp.sin(angle)
    a, b = x[..., :d // 2], x[..., d // 2:]
    return fnp.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)


class RotaryEmbedding(Module):
    """apply_rotary as a layer: `q, k = rope(q, k, positions=None)` for per-head
    (..., L, head_dim) queries and keys; no parameters."""
    dim: int = static_field()
    base: float = static_field(default=10000.0)

    def __call__(self, q, k, positions=None, *, key=None):
        if q.shape[-1] != self.dim or k.shape[-1] != self.dim:
            raise ValueError(f"RotaryEmbedding({self.dim}): got q {tuple(q.shape)} and k "
                             f"{tuple(k.shape)}; both must end in {self.dim}")
        return apply_rotary(q, positions, self.base), apply_rotary(k, positions, self.base)
