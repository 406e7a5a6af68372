"""Scaled dot-product attention, the functional core of the attention layers."""
import math

import numpy as np

import fgrad.numpy as fnp
from fgrad import nn, random

__all__ = ["scaled_dot_product_attention", "attention_weights", "causal_mask"]

# Query rows per block of causal attention (see _causal_blocks), which runs from
# two blocks on: a jitted MultiheadAttention forward and backward (d_model 128,
# 4 heads) took about 0.85x the unblocked time at sequence 128 and 0.7x at 256 on
# the (busy, 2-core) development machine; blocks of 32 rows gained less at 128.
CAUSAL_ROWS = 64


def causal_mask(length, source_length=None):
    """Boolean (L, S) mask, True where query i may attend to key j, i.e. j <= i
    (aligned at the top left, as PyTorch's is_causal)."""
    source_length = length if source_length is None else source_length
    return np.tril(np.ones((length, source_length), dtype=bool))


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None, *, key=None):
    """softmax(q·kᵀ·scale + mask)·v, as torch.nn.functional.scaled_dot_product_attention.

    q: (..., L, E), k: (..., S, E), v: (..., S, Ev) -> (..., L, Ev); leading (batch,
    head) axes broadcast. scale defaults to 1/sqrt(E). attn_mask broadcasts to
    (..., L, S): a boolean mask is True where attention is allowed (PyTorch's
    convention for this function; note MultiheadAttention's is the opposite), a
    float mask is added to the scores. is_causal=True applies causal_mask(L, S)
    and excludes attn_mask. dropout_p > 0 drops attention weights (inverted
    dropout) and needs a PRNG `key`.

    A query row whose keys are all masked out gives NaN, as PyTorch's reference
    implementation: there is no distribution to average with.
    Memory: one (..., L, S) score matrix is formed (no blockwise kernel), except
    that a long causal one (is_causal, no dropout) is formed by blocks of query
    rows without its fully masked part.
    """
    if v.ndim < 2 or k.ndim < 2 or k.shape[-2] != v.shape[-2]:
        raise ValueError(f"scaled_dot_product_attention: expected q (..., L, E), k (..., S, E) "
                         f"and v (..., S, Ev), got shapes {tuple(q.shape)}, {tuple(k.shape)}, "
                         f"{tuple(v.shape)}")
    if is_causal and attn_mask is None and dropout_p == 0.0 and q.shape[-2] >= 2 * CAUSAL_ROWS:
        return _causal_blocks(q, k, v, scale)
    weights = attention_weights(q, k, attn_mask, dropout_p, is_causal, scale, key=key)
    return fnp.matmul(weights, v)


def _causal_blocks(q, k, v, scale):
    """Causal attention by blocks of CAUSAL_ROWS query rows, each against only the
    key prefix it may see: the fully masked upper blocks are never formed. A row's
    allowed scores, softmax and products are those of the full computation; the
    skipped entries would only have added exact zeros."""
    if q.ndim < 2 or q.shape[-1] != k.shape[-1]:
        raise ValueError(f"attention: expected q (..., L, E) and k (..., S, E), got shapes "
                         f"{tuple(q.shape)}, {tuple(k.shape)}")
    length, source = q.shape[-2], k.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    outs = []
    for top in range(0, length, CAUSAL_ROWS):
        bottom = min(length, top + CAUSAL_ROWS)
        cols = min(source, bottom)
        scores = fnp.matmul(q[..., top:bottom, :], fnp.swapaxes(k[..., :cols, :], -1, -2)) * scale
        allowed = np.tril(np.ones((bottom - top, cols), dtype=bool), top)
        weights = nn.softmax(fnp.where(allowed, scores, -np.inf), axis=-1)
        outs.append(fnp.matmul(weights, v[..., :cols, :]))
    return fnp.concatenate(outs, axis=-2)


def attention_weights(q, k, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, *,
                      key=None):
    """The (..., L, S) attention weights of scaled_dot_product_attention (same
    arguments but v), after dropout."""
    if q.ndim < 2 or k.ndim < 2 or q.shape[-1] != k.shape[-1]:
        raise ValueError(f"attention: expected q (..., L, E) and k (..., S, E), got shapes "
                         f"{tuple(q.shape)}, {tuple(k.shape)}")
    if is_causal and attn_mask is not None:
        raise ValueError("attention: pass either attn_mask or "
                         "is_causal=True, not both (fold the causal mask into attn_mask)")
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"attention: dropout_p must be in [0, 1], got "
                         f"{dropout_p}")
    length, source = q.shape[-2], k.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    # scaled after the product (as PyTorch's reference): the multiply joins the
    # softmax's kernels, and q and its gradient stay a product's plain operand and
    # result (read and written in place through the heads' strides under jit)
    scores = fnp.matmul(q, fnp.swapaxes(k, -1, -2)) * scale
    if is_causal:
        attn_mask = causal_mask(length, source)
    if attn_mask is not None:
        attn_mask = fnp.asarray(attn_mask)
        if attn_mask.dtype == fnp.bool_:
            scores = fnp.where(attn_mask, scores, -np.inf)
        else:
            scores = scores + attn_mask
    weights = nn.softmax(scores, axis=-1)
    if dropout_p > 0.0:
        if key is None:
            raise ValueError("attention: dropout_p > 0 needs a PRNG key "
                             "(key=...); pass dropout_p=0.0 for inference")
        if dropout_p == 1.0:
            weights = fnp.zeros_like(weights)
        else:
            keep = random.bernoulli(key, 1.0 - dropout_p, tuple(weights.shape))
            weights = fnp.where(keep, weights / (1.0 - dropout_p), 0.0)
    return weights
