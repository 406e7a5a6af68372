"""fgrad_nn attention: scaled_dot_product_attention, MultiheadAttention, the
Transformer encoder/decoder layers and stacks, position embeddings (sinusoidal,
learned, rotary). References are explicit softmax attention written in NumPy here;
derivatives by check_grads (float64, order 2) w.r.t. inputs and parameters; jit
equals eager; flatten/unflatten; one example and a batch."""
import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
import fgrad.random
from fgrad.test_util import check_grads
from fgrad_nn import eval_mode
from fgrad_nn import functional as F
from fgrad_nn import layers as L
from tree_asserts import assert_trees_close

F64 = fnp.float64


def _key(i=0):
    return fgrad.random.key(i)


def _close(got, want, rtol=1e-9, atol=1e-12):
    got = np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def _round_trip(layer):
    leaves, treedef = fgrad.tree.flatten(layer)
    assert_trees_close(fgrad.tree.unflatten(treedef, leaves), layer)


# ----------------------------------------------------------------------------
# NumPy references

def _np_softmax(s):
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _np_attention(q, k, v, allowed=None, additive=None, scale=None):
    """Explicit softmax(q kᵀ scale + mask) v, looping over the leading axes."""
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    q, k, v = (np.broadcast_to(t, lead + t.shape[-2:]) for t in (q, k, v))
    out = np.zeros(lead + (q.shape[-2], v.shape[-1]))
    for idx in np.ndindex(*lead):
        s = q[idx] @ k[idx].T * scale
        if allowed is not None:
            s = np.where(np.broadcast_to(allowed, lead + s.shape)[idx], s, -np.inf)
        if additive is not None:
            s = s + np.broadcast_to(additive, lead + s.shape)[idx]
        out[idx] = _np_softmax(s) @ v[idx]
    return out


def _np_mha(mha, query, keys, values, mask=None):
    """Batch-first MultiheadAttention by hand: projections, per-head attention with
    an additive (N, H, L, S) or (L, S) mask, output projection."""
    e, h = mha.embed_dim, mha.num_heads
    w = np.asarray(mha.in_proj_weight)
    b = np.asarray(mha.in_proj_bias)
    q, k, v = query @ w[:e].T + b[:e], keys @ w[e:2 * e].T + b[e:2 * e], \
        values @ w[2 * e:].T + b[2 * e:]
    n, length, d = q.shape[0], q.shape[1], e // h
    if mask is not None:
        mask = np.broadcast_to(mask, (n, h, length, keys.shape[1]))
    out = np.zeros((n, length, e))
    weights = np.zeros((n, h, length, keys.shape[1]))
    for i in range(n):
        for j in range(h):
            cols = slice(j * d, (j + 1) * d)
            s = q[i, :, cols] @ k[i, :, cols].T / np.sqrt(d)
            if mask is not None:
                s = s + mask[i, j]
            weights[i, j] = _np_softmax(s)
            out[i, :, cols] = weights[i, j] @ v[i, :, cols]
    out = out @ np.asarray(mha.out_proj.weight).T + np.asarray(mha.out_proj.bias)
    return out, weights


def _np_layer_norm(x, ln):
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + ln.eps) * np.asarray(ln.weight) + np.asarray(ln.bias)


def _np_linear(x, lin):
    return x @ np.asarray(lin.weight).T + np.asarray(lin.bias)


def _np_encoder_layer(layer, x, mask=None):
    def sa(v):
        return _np_mha(layer.self_attn, v, v, v, mask)[0]

    def ff(v):
        return _np_linear(np.maximum(_np_linear(v, layer.linear1), 0), layer.linear2)

    if layer.norm_first:
        x = x + sa(_np_layer_norm(x, layer.norm1))
        return x + ff(_np_layer_norm(x, layer.norm2))
    x = _np_layer_norm(x + sa(x), layer.norm1)
    return _np_layer_norm(x + ff(x), layer.norm2)


def _np_decoder_layer(layer, x, memory, tgt_mask=None):
    def sa(v):
        return _np_mha(layer.self_attn, v, v, v, tgt_mask)[0]

    def ca(v):
        return _np_mha(layer.multihead_attn, v, memory, memory)[0]

    def ff(v):
        return _np_linear(np.maximum(_np_linear(v, layer.linear1), 0), layer.linear2)

    if layer.norm_first:
        x = x + sa(_np_layer_norm(x, layer.norm1))
        x = x + ca(_np_layer_norm(x, layer.norm2))
        return x + ff(_np_layer_norm(x, layer.norm3))
    x = _np_layer_norm(x + sa(x), layer.norm1)
    x = _np_layer_norm(x + ca(x), layer.norm2)
    return _np_layer_norm(x + ff(x), layer.norm3)


def _perturbed(model, rng, scale=0.3):
    """Non-trivial parameters everywhere (zero biases and unit norms made random)."""
    return fgrad.tree.map(lambda p: p + scale * rng.standard_normal(p.shape), model)


# ----------------------------------------------------------------------------
# scaled_dot_product_attention

def test_sdpa_matches_explicit_softmax(rng):
    q = rng.standard_normal((2, 3, 4, 5))           # (N, H, L, E)
    k = rng.standard_normal((2, 3, 6, 5))
    v = rng.standard_normal((2, 3, 6, 7))
    sdpa = F.scaled_dot_product_attention
    _close(sdpa(q, k, v), _np_attention(q, k, v))
    _close(sdpa(q[0, 0], k[0, 0], v[0, 0]), _np_attention(q[0, 0], k[0, 0], v[0, 0]))
    _close(sdpa(q, k[:1], v[:1], scale=0.3), _np_attention(q, k[:1], v[:1], scale=0.3))
    allowed = rng.random((4, 6)) < 0.7
    allowed[:, 0] = True
    _close(sdpa(q, k, v, attn_mask=allowed), _np_attention(q, k, v, allowed=allowed))
    additive = rng.standard_normal((2, 1, 4, 6))
    _close(sdpa(q, k, v, attn_mask=additive), _np_attention(q, k, v, additive=additive))
    causal = np.tril(np.ones((4, 6), bool))
    _close(sdpa(q, k, v, is_causal=True), _np_attention(q, k, v, allowed=causal))
    _close(fgrad.jit(lambda *a: sdpa(*a, attn_mask=allowed))(q, k, v),
           np.asarray(sdpa(q, k, v, attn_mask=allowed)))
    with pytest.raises(ValueError, match="either attn_mask or is_causal"):
        sdpa(q, k, v, attn_mask=allowed, is_causal=True)
    with pytest.raises(ValueError, match="expected q"):
        sdpa(q, k[..., :4], v)


def test_sdpa_gradients(rng):
    q, k, v = (rng.standard_normal((2, 3, 2)) for _ in range(3))
    allowed = np.array([[True, False, True], [True, True, False], [False, True, True]])
    check_grads(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, attn_mask=allowed),
                (q, k, v), order=2)
    check_grads(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True),
                (q, k, v), order=2)


@pytest.mark.parametrize("length, source", [(11, 11), (12, 12), (13, 8), (7, 13)])
def test_sdpa_causal_blocks(rng, monkeypatch, length, source):
    """A long causal attention runs by blocks of CAUSAL_ROWS query rows, each against
    only the keys it may see (here 3 rows: several blocks, a short last one, L > S
    and L < S)."""
    from fgrad_nn import _attention
    monkeypatch.setattr(_attention, "CAUSAL_ROWS", 3)
    q, k = rng.standard_normal((2, length, 4)), rng.standard_normal((2, source, 4))
    v = rng.standard_normal((2, source, 5))
    sdpa = F.scaled_dot_product_attention
    want = _np_attention(q, k, v, allowed=np.tril(np.ones((length, source), bool)))
    _close(sdpa(q, k, v, is_causal=True), want)
    _close(fgrad.jit(lambda *a: sdpa(*a, is_causal=True))(q, k, v), want)
    # no (L, S) score matrix is formed: each product's output is a block's
    products = [e.outvars[0].aval.shape for e in
                fgrad.make_jaxpr(lambda *a: sdpa(*a, is_causal=True))(q, k, v).jaxpr.eqns
                if e.primitive.name == "dot_general"]
    assert products and all(shape[-2] <= 3 for shape in products), products
    check_grads(lambda a, b, c: sdpa(a, b, c, is_causal=True), (q, k, v), order=2)


def test_sdpa_fully_masked_row_is_nan(rng):
    q, k, v = (rng.standard_normal((2, 3, 2)) for _ in range(3))
    allowed = np.ones((3, 3), bool)
    allowed[1] = False
    out = np.asarray(F.scaled_dot_product_attention(q, k, v, attn_mask=allowed))
    assert np.all(np.isnan(out[:, 1])) and np.all(np.isfinite(out[:, [0, 2]]))


def test_sdpa_dropout_scales_kept_weights_and_needs_a_key(rng):
    q, k, v = rng.standard_normal((2, 50, 4)), rng.standard_normal((2, 40, 4)), np.eye(40)
    plain = np.asarray(F.scaled_dot_product_attention(q, k, v))     # v = I: the weights
    dropped = np.asarray(F.scaled_dot_product_attention(q, k, v, dropout_p=0.25, key=_key(3)))
    kept = dropped != 0
    assert 0.65 < kept.mean() < 0.85
    _close(dropped[kept], plain[kept] / 0.75)
    again = F.scaled_dot_product_attention(q, k, v, dropout_p=0.25, key=_key(3))
    _close(again, dropped)
    _close(F.scaled_dot_product_attention(q, k, v, dropout_p=1.0, key=_key(3)), 0 * plain)
    with pytest.raises(ValueError, match="needs a PRNG key"):
        F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)


# ----------------------------------------------------------------------------
# MultiheadAttention

def test_mha_layout_and_init():
    mha = L.MultiheadAttention(8, 2, key=_key())
    assert mha.in_proj_weight.shape == (24, 8) and mha.in_proj_bias.shape == (24,)
    assert mha.out_proj.weight.shape == (8, 8) and mha.q_proj_weight is None
    assert np.all(np.asarray(mha.in_proj_bias) == 0) and np.all(np.asarray(mha.out_proj.bias) == 0)
    assert np.abs(np.asarray(mha.in_proj_weight)).max() <= np.sqrt(6 / (24 + 8))   # Xavier
    kv = L.MultiheadAttention(8, 2, kdim=3, vdim=5, bias=False, key=_key())
    assert kv.in_proj_weight is None and kv.in_proj_bias is None and kv.out_proj.bias is None
    assert (kv.q_proj_weight.shape, kv.k_proj_weight.shape, kv.v_proj_weight.shape) == \
        ((8, 8), (8, 3), (8, 5))
    with pytest.raises(ValueError, match="divisible by num_heads"):
        L.MultiheadAttention(8, 3, key=_key())


def test_mha_matches_explicit_heads(rng):
    mha = _perturbed(L.MultiheadAttention(6, 2, batch_first=True, key=_key(), dtype=F64), rng)
    _round_trip(mha)
    x, mem = rng.standard_normal((3, 4, 6)), rng.standard_normal((3, 5, 6))
    want, weights = _np_mha(mha, x, mem, mem)
    out, w = mha(x, mem, mem)
    _close(out, want)
    _close(w, weights.mean(1))
    _close(mha(x, mem, mem, average_attn_weights=False)[1], weights)
    assert mha(x, mem, mem, need_weights=False)[1] is None
    _close(mha(x, mem, mem, need_weights=False)[0], want)
    one, w1 = mha(x[1], mem[1], mem[1])                                  # one example
    _close(one, want[1])
    _close(w1, weights.mean(1)[1])
    jo, jw = fgrad.jit(lambda m, a, b: m(a, b, b))(mha, x, mem)
    _close(jo, want)
    _close(jw, weights.mean(1))
    from fgrad_nn import replace
    seq_first = replace(mha, batch_first=False)
    _close(seq_first(x.transpose(1, 0, 2), mem.transpose(1, 0, 2), mem.transpose(1, 0, 2))[0],
           want.transpose(1, 0, 2))


def test_mha_masks(rng):
    mha = _perturbed(L.MultiheadAttention(4, 2, batch_first=True, key=_key(), dtype=F64), rng)
    x, mem = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 5, 4))
    padding = np.array([[False, False, False, True, True], [False, True, False, False, False]])
    pad_add = np.where(padding, -np.inf, 0.0)[:, None, None, :]
    _close(mha(x, mem, mem, key_padding_mask=padding)[0], _np_mha(mha, x, mem, mem, pad_add)[0])
    _close(mha(x, mem, mem, key_padding_mask=np.where(padding, -np.inf, 0.0))[0],
           _np_mha(mha, x, mem, mem, pad_add)[0])
    blocked = rng.random((3, 5)) < 0.3
    blocked[:, 0] = False
    both = pad_add + np.where(blocked, -np.inf, 0.0)
    _close(mha(x, mem, mem, key_padding_mask=padding, attn_mask=blocked)[0],
           _np_mha(mha, x, mem, mem, both)[0])
    per_head = rng.standard_normal((4, 3, 5))                           # (N·H, L, S) floats
    _close(mha(x, mem, mem, attn_mask=per_head)[0],
           _np_mha(mha, x, mem, mem, per_head.reshape(2, 2, 3, 5))[0])
    causal = np.where(np.triu(np.ones((3, 3), bool), 1), -np.inf, 0.0)
    _close(mha(x, x, x, is_causal=True)[0], _np_mha(mha, x, x, x, causal)[0])
    _close(mha(x, x, x, is_causal=True, need_weights=False)[0], _np_mha(mha, x, x, x, causal)[0])
    with pytest.raises(ValueError, match="key_padding_mask must have shape"):
        mha(x, mem, mem, key_padding_mask=padding[:, :4])
    with pytest.raises(ValueError, match="attn_mask must have shape"):
        mha(x, mem, mem, attn_mask=blocked[:2])


def test_mha_causal_runs_by_blocks(rng, monkeypatch):
    """A causal mask alone reaches scaled_dot_product_attention as is_causal, whose
    blocks skip the fully masked scores (1 query row per block here)."""
    from fgrad_nn import _attention
    monkeypatch.setattr(_attention, "CAUSAL_ROWS", 1)
    mha = _perturbed(L.MultiheadAttention(4, 2, batch_first=True, key=_key(), dtype=F64), rng)
    x = rng.standard_normal((2, 3, 4))
    causal = np.where(np.triu(np.ones((3, 3), bool), 1), -np.inf, 0.0)
    run = lambda m, v: m(v, v, v, is_causal=True, need_weights=False)[0]   # noqa: E731
    _close(run(mha, x), _np_mha(mha, x, x, x, causal)[0])
    _close(fgrad.jit(run)(mha, x), _np_mha(mha, x, x, x, causal)[0])
    scores = [e.outvars[0].aval.shape for e in fgrad.make_jaxpr(run)(mha, x).jaxpr.eqns
              if e.primitive.name == "dot_general" and len(e.outvars[0].aval.shape) == 4]
    assert scores and all(shape[-2] == 1 for shape in scores), scores


def test_mha_gradients_inputs_and_parameters(rng):
    mha = _perturbed(L.MultiheadAttention(4, 2, batch_first=True, key=_key(), dtype=F64), rng)
    x, mem = rng.standard_normal((1, 2, 4)), rng.standard_normal((1, 3, 4))
    padding = np.array([[False, False, True]])
    check_grads(lambda m, a, b: m(a, b, b, key_padding_mask=padding)[0], (mha, x, mem), order=2)
    kv = _perturbed(L.MultiheadAttention(4, 2, kdim=3, vdim=2, batch_first=True, key=_key(),
                                         dtype=F64), rng)
    check_grads(lambda m, a: m(a, mem[..., :3], mem[..., :2])[0], (kv, x), order=2)


def test_mha_dropout_follows_training_mode(rng):
    mha = L.MultiheadAttention(4, 2, dropout=0.5, batch_first=True, key=_key(), dtype=F64)
    x = rng.standard_normal((2, 6, 4))
    with pytest.raises(ValueError, match="needs a PRNG key"):
        mha(x, x, x)
    _, w = mha(x, x, x, key=_key(1), average_attn_weights=False)
    plain = eval_mode(mha)(x, x, x, average_attn_weights=False)[1]
    w, plain = np.asarray(w), np.asarray(plain)
    kept = w != 0
    assert 0.3 < kept.mean() < 0.7
    _close(w[kept], 2 * plain[kept])


# ----------------------------------------------------------------------------
# Transformer layers

@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_matches_reference(rng, norm_first):
    layer = L.TransformerEncoderLayer(4, 2, dim_feedforward=6, batch_first=True,
                                      norm_first=norm_first, key=_key(), dtype=F64)
    layer = _perturbed(eval_mode(layer), rng)
    _round_trip(layer)
    x = rng.standard_normal((2, 3, 4))
    causal = np.where(np.triu(np.ones((3, 3), bool), 1), -np.inf, 0.0)
    _close(layer(x), _np_encoder_layer(layer, x))
    _close(layer(x[0]), _np_encoder_layer(layer, x[:1])[0])             # one example
    _close(layer(x, is_causal=True), _np_encoder_layer(layer, x, causal))
    _close(fgrad.jit(lambda m, v: m(v, is_causal=True))(layer, x),
           _np_encoder_layer(layer, x, causal))
    # second differences through two LayerNorms and a softmax: FD noise ~1e-6
    check_grads(lambda m, v: m(v), (layer, x[:1, :2]), order=2, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_matches_reference(rng, norm_first):
    layer = L.TransformerDecoderLayer(4, 2, dim_feedforward=6, batch_first=True,
                                      norm_first=norm_first, key=_key(), dtype=F64)
    layer = _perturbed(eval_mode(layer), rng)
    _round_trip(layer)
    x, mem = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 5, 4))
    causal = np.where(np.triu(np.ones((3, 3), bool), 1), -np.inf, 0.0)
    want = _np_decoder_layer(layer, x, mem, causal)
    _close(layer(x, mem, tgt_is_causal=True), want)
    _close(layer(x[1], mem[1], tgt_is_causal=True), want[1])
    _close(fgrad.jit(lambda m, a, b: m(a, b, tgt_is_causal=True))(layer, x, mem), want)
    check_grads(lambda m, a, b: m(a, b), (layer, x[:1, :2], mem[:1, :2]), order=2, atol=1e-5,
                rtol=1e-4)


def test_stacks_and_training_dropout(rng):
    enc_layer = L.TransformerEncoderLayer(4, 2, 8, dropout=0.2, activation="gelu",
                                          key=_key(), dtype=F64)
    enc = L.TransformerEncoder(enc_layer, 2, norm=L.LayerNorm(4, dtype=F64))
    enc = _perturbed(enc, rng)
    _round_trip(enc)
    x = rng.standard_normal((3, 2, 4))                                   # (S, N, E)
    frozen = eval_mode(enc)
    y = x
    for layer in frozen.layers:
        y = layer(y)
    _close(frozen(x), np.asarray(frozen.norm(y)))
    with pytest.raises(ValueError, match="PRNG key"):
        enc(x)
    a, b = enc(x, key=_key(1)), enc(x, key=_key(1))
    _close(a, np.asarray(b))
    assert not np.allclose(np.asarray(a), np.asarray(frozen(x)))
    _close(fgrad.jit(lambda m, v, k: m(v, key=k))(enc, x, _key(1)), np.asarray(a))
    dec = eval_mode(L.TransformerDecoder(L.TransformerDecoderLayer(4, 2, 8, key=_key()), 3))
    assert dec(np.ones((3, 2, 4), np.float32), np.ones((5, 2, 4), np.float32)).shape == (3, 2, 4)
    with pytest.raises(ValueError, match="activation must be"):
        L.TransformerEncoderLayer(4, 2, activation="swish", key=_key())


# ----------------------------------------------------------------------------
# Position embeddings

def test_sinusoidal_positions(rng):
    table = np.asarray(L.sinusoidal_positions(5, 6, dtype=F64))
    for pos in range(5):
        for i in range(3):
            angle = pos / 10000 ** (2 * i / 6)
            _close(table[pos, 2 * i], np.sin(angle))
            _close(table[pos, 2 * i + 1], np.cos(angle))
    x = rng.standard_normal((2, 5, 6))
    _close(L.SinusoidalPositionalEmbedding(6)(x), x + table)
    _close(L.SinusoidalPositionalEmbedding(6, seq_axis=0)(x.transpose(1, 0, 2)),
           (x + table).transpose(1, 0, 2))


def test_learned_positions(rng):
    pe = L.LearnedPositionalEmbedding(7, 4, key=_key(), dtype=F64)
    _round_trip(pe)
    x = rng.standard_normal((2, 5, 4))
    _close(pe(x), x + np.asarray(pe.weight)[:5])
    _close(pe(x[0]), x[0] + np.asarray(pe.weight)[:5])
    check_grads(lambda m, v: m(v), (pe, x[:1, :2]), order=2)
    with pytest.raises(ValueError, match="longer than max_len"):
        pe(np.zeros((9, 4)))


def _np_rotary(x, positions, base=10000.0):
    d = x.shape[-1]
    out = np.empty_like(x)
    for p, pos in enumerate(positions):
        for i in range(d // 2):
            angle = pos * base ** (-2 * i / d)
            a, b = x[..., p, i], x[..., p, i + d // 2]
            out[..., p, i] = a * np.cos(angle) - b * np.sin(angle)
            out[..., p, i + d // 2] = b * np.cos(angle) + a * np.sin(angle)
    return out


def test_rotary_half_split_and_relative_positions(rng):
    q, k = rng.standard_normal((2, 3, 5, 8)), rng.standard_normal((2, 3, 5, 8))
    rope = L.RotaryEmbedding(8)
    rq, rk = rope(q, k)
    _close(rq, _np_rotary(q, range(5)))
    _close(rk, _np_rotary(k, range(5)))
    _close(L.apply_rotary(q, np.array([3, 1, 4, 1, 5])), _np_rotary(q, [3, 1, 4, 1, 5]))
    # scores depend on relative positions only: shifting every position changes nothing
    shifted = [L.apply_rotary(t, np.arange(5) + 7) for t in (q, k)]
    _close(np.asarray(rq) @ np.asarray(rk).swapaxes(-1, -2),
           np.asarray(shifted[0]) @ np.asarray(shifted[1]).swapaxes(-1, -2), rtol=1e-8)
    _close(fgrad.jit(L.apply_rotary)(q), np.asarray(rq))
    check_grads(lambda v: L.apply_rotary(v), (q[0, 0, :3, :4],), order=2)


def test_vmap_equals_a_loop(rng):
    q, k, v = rng.standard_normal((3, 4, 2)), rng.standard_normal((3, 5, 2)), \
        rng.standard_normal((3, 5, 3))
    sdpa = fgrad.vmap(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True))
    _close(sdpa(q, k, v), np.stack([np.asarray(F.scaled_dot_product_attention(
        q[i], k[i], v[i], is_causal=True)) for i in range(3)]))
    mha = L.MultiheadAttention(2, 2, key=_key(), dtype=F64)
    padding = np.array([[False] * 4 + [True], [False] * 5, [True] + [False] * 4])
    got = fgrad.vmap(lambda a, b, p: mha(a, b, b, key_padding_mask=p)[0])(q, k, padding)
    _close(got, np.stack([np.asarray(mha(q[i], k[i], k[i], key_padding_mask=padding[i])[0])
                          for i in range(3)]))


def test_jitted_gradient_of_multihead_attention_has_no_numpy_step():
    """The q, k and v rows of the packed in-projection weight are three blocks of one
    array: kernels read them (and the head views over them) through to the weight,
    so no NumPy step splits the compiled program (from executable.MANY_BLOCKS blocks
    of one array, each is NumPy's free view instead)."""
    mha = L.MultiheadAttention(16, 2, key=_key())
    x = np.random.default_rng(3).standard_normal((2, 5, 16)).astype(np.float32)

    def loss(m, x):
        out, _ = m(x, x, x, need_weights=False)
        return fnp.sum(out ** 2)

    g = fgrad.jit(fgrad.grad(loss))
    steps = [ln for ln in g.lower(mha, x).as_text().splitlines() if ln.startswith("// ")
             and ": numpy:" in ln]
    assert steps == [], steps
    assert_trees_close(g(mha, x), fgrad.grad(loss)(mha, x), rtol=1e-5, atol=1e-6)
