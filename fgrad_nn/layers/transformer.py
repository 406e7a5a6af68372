"""Transformer encoder and decoder layers and stacks, as PyTorch's (same submodule
names, so parameters line up with a PyTorch state_dict)."""
from fgrad import nn

from fgrad_nn.layers import _init
from fgrad_nn.layers.attention import MultiheadAttention
from fgrad_nn.layers.dropout import Dropout
from fgrad_nn.layers.linear import Linear
from fgrad_nn.layers.norm import LayerNorm
from fgrad_nn._checks import flag
from fgrad_nn.module import Module, static_field

__all__ = ["TransformerEncoderLayer", "TransformerDecoderLayer", "TransformerEncoder",
           "TransformerDecoder"]


def _gelu_exact(x):
    """PyTorch's gelu (erf, not the tanh approximation)."""
    return nn.gelu(x, approximate=False)


_ACTIVATIONS = {"relu": nn.relu, "gelu": _gelu_exact}


def _activation(name, value):
    if isinstance(value, str):
        if value not in _ACTIVATIONS:
            raise ValueError(f"{name}: activation must be 'relu', 'gelu' or a function, got "
                             f"{value!r}")
        return _ACTIVATIONS[value]
    if not callable(value):
        raise TypeError(f"{name}: activation must be 'relu', 'gelu' or a function, got "
                        f"{type(value).__name__}")
    return value


def _split(key, n):
    return [None] * n if key is None else list(_init.split(key, n))


class TransformerEncoderLayer(Module):
    """Self-attention then a feed-forward block, each with a residual connection and
    LayerNorm, as PyTorch's TransformerEncoderLayer (defaults dim_feedforward=2048,
    dropout=0.1, activation 'relu' (or 'gelu', exact, or a function),
    layer_norm_eps=1e-5, batch_first=False, norm_first=False: post-norm
    x = norm(x + block(x)); norm_first=True: pre-norm x = x + block(norm(x))).

    Called `layer(src, src_mask=None, src_key_padding_mask=None, is_causal=False, *,
    key=None)`; masks as MultiheadAttention's. Shapes: (S, N, E), or (N, S, E) with
    batch_first, or one example (S, E). In training mode with dropout > 0 a PRNG key
    is needed; eval_mode(model) turns dropout off.
    """
    self_attn: MultiheadAttention
    linear1: Linear
    dropout: Dropout
    linear2: Linear
    norm1: LayerNorm
    norm2: LayerNorm
    dropout1: Dropout
    dropout2: Dropout
    activation: object = static_field()
    norm_first: bool = static_field()

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True, *, key,
                 training=True, dtype=None):
        k1, k2, k3 = _init.split(key, 3)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout, bias,
                                            batch_first=batch_first, key=k1,
                                            training=training, dtype=dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias, key=k2, dtype=dtype)
        self.linear2 = Linear(dim_feedforward, d_model, bias, key=k3, dtype=dtype)
        self.norm1 = LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout, self.dropout1, self.dropout2 = (Dropout(dropout, training)
                                                      for _ in range(3))
        self.activation = _activation("TransformerEncoderLayer", activation)
        self.norm_first = flag("TransformerEncoderLayer", "norm_first", norm_first)

    def _feed_forward(self, x, k1, k2):
        x = self.dropout(self.activation(self.linear1(x)), key=k1)
        return self.dropout2(self.linear2(x), key=k2)

    def __call__(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False, *,
                 key=None):
        ka, k1, kf1, kf2 = _split(key, 4)

        def attend(x):
            y, _ = self.self_attn(x, x, x, src_key_padding_mask, False, src_mask,
                                  is_causal=is_causal, key=ka)
            return self.dropout1(y, key=k1)

        x = src
        if self.norm_first:
            x = x + attend(self.norm1(x))
            return x + self._feed_forward(self.norm2(x), kf1, kf2)
        x = self.norm1(x + attend(x))
        return self.norm2(x + self._feed_forward(x, kf1, kf2))


class TransformerDecoderLayer(Module):
    """Self-attention, attention over the encoder's output (`memory`), then a
    feed-forward block, each with a residual connection and LayerNorm, as PyTorch's
    TransformerDecoderLayer (same arguments and defaults as
    TransformerEncoderLayer).

    Called `layer(tgt, memory, tgt_mask=None, memory_mask=None,
    tgt_key_padding_mask=None, memory_key_padding_mask=None, tgt_is_causal=False,
    memory_is_causal=False, *, key=None)`.
    """
    self_attn: MultiheadAttention
    multihead_attn: MultiheadAttention
    linear1: Linear
    dropout: Dropout
    linear2: Linear
    norm1: LayerNorm
    norm2: LayerNorm
    norm3: LayerNorm
    dropout1: Dropout
    dropout2: Dropout
    dropout3: Dropout
    activation: object = static_field()
    norm_first: bool = static_field()

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True, *, key,
                 training=True, dtype=None):
        k0, k1, k2, k3 = _init.split(key, 4)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout, bias,
                                            batch_first=batch_first, key=k0,
                                            training=training, dtype=dtype)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout, bias,
                                                 batch_first=batch_first, key=k1,
                                                 training=training, dtype=dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias, key=k2, dtype=dtype)
        self.linear2 = Linear(dim_feedforward, d_model, bias, key=k3, dtype=dtype)
        self.norm1, self.norm2, self.norm3 = (LayerNorm(d_model, layer_norm_eps, bias=bias,
                                                        dtype=dtype) for _ in range(3))
        self.dropout, self.dropout1, self.dropout2, self.dropout3 = (
            Dropout(dropout, training) for _ in range(4))
        self.activation = _activation("TransformerDecoderLayer", activation)
        self.norm_first = flag("TransformerDecoderLayer", "norm_first", norm_first)

    def _feed_forward(self, x, k1, k2):
        x = self.dropout(self.activation(self.linear1(x)), key=k1)
        return self.dropout3(self.linear2(x), key=k2)

    def __call__(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                 memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False, *,
                 key=None):
        ks, k1, kc, k2, kf1, kf2 = _split(key, 6)

        def self_block(x):
            y, _ = self.self_attn(x, x, x, tgt_key_padding_mask, False, tgt_mask,
                                  is_causal=tgt_is_causal, key=ks)
            return self.dropout1(y, key=k1)

        def cross_block(x):
            y, _ = self.multihead_attn(x, memory, memory, memory_key_padding_mask, False,
                                       memory_mask, is_causal=memory_is_causal, key=kc)
            return self.dropout2(y, key=k2)

        x = tgt
        if self.norm_first:
            x = x + self_block(self.norm1(x))
            x = x + cross_block(self.norm2(x))
            return x + self._feed_forward(self.norm3(x), kf1, kf2)
        x = self.norm1(x + self_block(x))
        x = self.norm2(x + cross_block(x))
        return self.norm3(x + self._feed_forward(x, kf1, kf2))


class TransformerEncoder(Module):
    """num_layers copies of encoder_layer applied in turn, then `norm` if given, as
    PyTorch's TransformerEncoder (the copies start equal, as PyTorch's deep copies,
    and train independently). Called like the layer."""
    layers: tuple
    norm: Module = None

    def __init__(self, encoder_layer, num_layers, norm=None):
        self.layers = (encoder_layer,) * int(num_layers)
        self.norm = norm

    def __call__(self, src, mask=None, src_key_padding_mask=None, is_causal=False, *,
                 key=None):
        x = src
        for layer, k in zip(self.layers, _split(key, len(self.layers))):
            x = layer(x, mask, src_key_padding_mask, is_causal, key=k)
        return x if self.norm is None else self.norm(x)


class TransformerDecoder(Module):
    """num_layers copies of decoder_layer applied in turn, then `norm` if given, as
    PyTorch's TransformerDecoder. Called like the layer."""
    layers: tuple
    norm: Module = None

    def __init__(self, decoder_layer, num_layers, norm=None):
        self.layers = (decoder_layer,) * int(num_layers)
        self.norm = norm

    def __call__(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                 memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False, *,
                 key=None):
        x = tgt
        for layer, k in zip(self.layers, _split(key, len(self.layers))):
            x = layer(x, memory, tgt_mask, memory_mask, tgt_key_padding_mask,
                      memory_key_padding_mask, tgt_is_causal, memory_is_causal, key=k)
        return x if self.norm is None else self.norm(x)
