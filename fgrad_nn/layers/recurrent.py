"""Recurrent layers with PyTorch's gate order, parameter layout and initialisation:
the cells RNNCell, LSTMCell, GRUCell (one time step) and the layers RNN, LSTM, GRU
(a whole sequence through `fgrad.lax.scan`, stacked and optionally bidirectional).

Gate equations (W_i* rows of weight_ih, W_h* rows of weight_hh, in this order):
    RNN:  h' = act(W_ih x + b_ih + W_hh h + b_hh), act tanh or relu
    LSTM: i, f, g, o = split(W_ih x + b_ih + W_hh h + b_hh, 4)
          c' = sigmoid(f) c + sigmoid(i) tanh(g),  h' = sigmoid(o) tanh(c')
    GRU:  r, z = sigmoid(split(W_ih x + b_ih + W_hh h + b_hh, 3)[:2])
          n = tanh(W_in x + b_in + r (W_hn h + b_hn)),  h' = (1 - z) n + z h
Every weight and bias is drawn from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)).

Variable lengths: the layers take `lengths` (N,) or a boolean `mask` (one entry per
step and sequence, laid out as the input without its feature axis). A sequence's
state is frozen past its end (h_n, c_n are the states at its last valid step) and
its outputs there are zero; the reverse direction starts at each sequence's own last
step, as PyTorch's packed sequences. The mask must be a prefix (True then False).
"""
import fgrad
import fgrad.numpy as fnp
from fgrad import lax, nn

from fgrad_nn import functional as F
from fgrad_nn.init import torch_default_bias
from fgrad_nn.layers import _init
from fgrad_nn._checks import flag
from fgrad_nn.module import Module, static_field

__all__ = ["RNNCell", "LSTMCell", "GRUCell", "RNN", "LSTM", "GRU"]

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _uniform(key, shape, hidden_size, dtype):
    return torch_default_bias(hidden_size, dtype=dtype)(key, shape, dtype)


def _affine(x, weight, bias):
    y = x @ fnp.transpose(weight)
    return y if bias is None else y + bias


def _step(mode, gi, h, c, weight_hh_t, bias_hh):
    """One step from the input part gi = W_ih x + b_ih and the transposed weight_hh:
    (h', c') (c' None but for LSTM)."""
    gh = h @ weight_hh_t
    gh = gh if bias_hh is None else gh + bias_hh
    if mode == "RNN_TANH":
        return fnp.tanh(gi + gh), None
    if mode == "RNN_RELU":
        return nn.relu(gi + gh), None
    if mode == "LSTM":
        i, f, g, o = fnp.split(gi + gh, 4, axis=-1)
        c = nn.sigmoid(f) * c + nn.sigmoid(i) * fnp.tanh(g)
        return nn.sigmoid(o) * fnp.tanh(c), c
    ir, iz, in_ = fnp.split(gi, 3, axis=-1)
    hr, hz, hn = fnp.split(gh, 3, axis=-1)
    r, z = nn.sigmoid(ir + hr), nn.sigmoid(iz + hz)
    n = fnp.tanh(in_ + r * hn)
    return (1 - z) * n + z * h, None


def _cell_params(self, name, mode, input_size, hidden_size, bias, key, dtype):
    dtype = _init.resolve_dtype(dtype)
    if int(input_size) < 1 or int(hidden_size) < 1:
        raise ValueError(f"{name}: input_size and hidden_size must be positive, got "
                         f"{input_size} and {hidden_size}")
    self.input_size, self.hidden_size = int(input_size), int(hidden_size)
    rows = _GATES[mode] * self.hidden_size
    k = _init.split(key, 4)
    self.weight_ih = _uniform(k[0], (rows, self.input_size), self.hidden_size, dtype)
    self.weight_hh = _uniform(k[1], (rows, self.hidden_size), self.hidden_size, dtype)
    bias = flag(name, "bias", bias)
    self.bias_ih = _uniform(k[2], (rows,), self.hidden_size, dtype) if bias else None
    self.bias_hh = _uniform(k[3], (rows,), self.hidden_size, dtype) if bias else None


def _check_input(name, x, input_size, ranks):
    if x.ndim not in ranks or x.shape[-1] != input_size:
        want = " or ".join(f"{r}-d" for r in ranks)
        raise ValueError(f"{name}: expected a {want} input with {input_size} features on "
                         f"its last axis, got shape {tuple(x.shape)}")


def _zeros_state(x, batch_shape, hidden_size):
    return fnp.zeros(tuple(batch_shape) + (hidden_size,), fnp.result_type(x))


class _Cell(Module):
    weight_ih: fgrad.Array
    weight_hh: fgrad.Array
    bias_ih: fgrad.Array
    bias_hh: fgrad.Array
    input_size: int = static_field()
    hidden_size: int = static_field()

    def _prepare(self, x):
        x = fnp.asarray(x)
        _check_input(type(self).__name__, x, self.input_size, (1, 2))
        return x, _affine(x, self.weight_ih, self.bias_ih)


class RNNCell(_Cell):
    """One Elman RNN step h' = act(W_ih x + b_ih + W_hh h + b_hh), act 'tanh' or 'relu'.
    weight_ih: (hidden, input), weight_hh: (hidden, hidden), biases (hidden,).
    Call cell(x, h=None): x (input,) or a batch (N, input); h zeros when None."""
    nonlinearity: str = static_field()

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", *, key,
                 dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNNCell: nonlinearity must be 'tanh' or 'relu', got "
                             f"{nonlinearity!r}")
        self.nonlinearity = nonlinearity
        _cell_params(self, "RNNCell", "RNN_TANH", input_size, hidden_size, bias, key, dtype)

    def __call__(self, x, h=None, *, key=None):
        x, gi = self._prepare(x)
        h = _zeros_state(x, x.shape[:-1], self.hidden_size) if h is None else h
        return _step("RNN_" + self.nonlinearity.upper(), gi, h, None,
                     fnp.transpose(self.weight_hh), self.bias_hh)[0]


class LSTMCell(_Cell):
    """One LSTM step (gates i, f, g, o, PyTorch's order). weight_ih: (4·hidden, input),
    weight_hh: (4·hidden, hidden), biases (4·hidden,). Call cell(x, (h, c)=None)
    -> (h', c'); x (input,) or (N, input); zero states when None."""

    def __init__(self, input_size, hidden_size, bias=True, *, key, dtype=None):
        _cell_params(self, "LSTMCell", "LSTM", input_size, hidden_size, bias, key, dtype)

    def __call__(self, x, hc=None, *, key=None):
        x, gi = self._prepare(x)
        if hc is None:
            hc = (_zeros_state(x, x.shape[:-1], self.hidden_size),) * 2
        return _step("LSTM", gi, hc[0], hc[1], fnp.transpose(self.weight_hh), self.bias_hh)


class GRUCell(_Cell):
    """One GRU step (gates r, z, n, PyTorch's order and its n = tanh(W_in x + b_in +
    r·(W_hn h + b_hn))). weight_ih: (3·hidden, input), weight_hh: (3·hidden, hidden),
    biases (3·hidden,). Call cell(x, h=None) -> h'; x (input,) or (N, input)."""

    def __init__(self, input_size, hidden_size, bias=True, *, key, dtype=None):
        _cell_params(self, "GRUCell", "GRU", input_size, hidden_size, bias, key, dtype)

    def __call__(self, x, h=None, *, key=None):
        x, gi = self._prepare(x)
        h = _zeros_state(x, x.shape[:-1], self.hidden_size) if h is None else h
        return _step("GRU", gi, h, None, fnp.transpose(self.weight_hh), self.bias_hh)[0]


class _Recurrent(Module):
    """A stack of num_layers recurrent layers, each one or two directions (see the
    module docstring). `cells` holds one cell per layer and direction in PyTorch's
    order (l0, l0_reverse, l1, ...); the PyTorch names weight_ih_l0,
    bias_hh_l1_reverse, ... are also attributes."""
    cells: tuple
    mode: str = static_field()
    input_size: int = static_field()
    hidden_size: int = static_field()
    num_layers: int = static_field()
    bidirectional: bool = static_field()
    batch_first: bool = static_field()
    dropout: float = static_field()
    training: bool = static_field()

    def _build(self, mode, input_size, hidden_size, num_layers, bias, batch_first, dropout,
               bidirectional, training, key, dtype):
        name = type(self).__name__
        if int(num_layers) < 1:
            raise ValueError(f"{name}: num_layers must be at least 1, got {num_layers}")
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"{name}: dropout must be in [0, 1], got {dropout}")
        self.mode, self.num_layers, self.dropout = mode, int(num_layers), float(dropout)
        self.input_size, self.hidden_size = int(input_size), int(hidden_size)
        self.bidirectional = flag(name, "bidirectional", bidirectional)
        self.batch_first = flag(name, "batch_first", batch_first)
        self.training = flag(name, "training", training)
        dirs = 2 if self.bidirectional else 1
        cell_cls = {"LSTM": LSTMCell, "GRU": GRUCell}.get(mode, RNNCell)
        extra = {"nonlinearity": mode[4:].lower()} if cell_cls is RNNCell else {}
        keys = _init.split(key, self.num_layers * dirs)
        self.cells = tuple(
            cell_cls(self.input_size if k // dirs == 0 else dirs * self.hidden_size,
                     self.hidden_size, bias, key=keys[k], dtype=dtype, **extra)
            for k in range(self.num_layers * dirs))

    @property
    def num_directions(self):
        return 2 if self.bidirectional else 1

    def __getattr__(self, name):
        # PyTorch's parameter names: {weight,bias}_{ih,hh}_l{k}[_reverse]
        parts = name.split("_")
        if (len(parts) in (3, 4) and parts[0] in ("weight", "bias") and parts[1] in ("ih", "hh")
                and parts[2][:1] == "l" and parts[2][1:].isdigit()
                and (len(parts) == 3 or parts[3] == "reverse")):
            layer, rev = int(parts[2][1:]), len(parts) == 4
            if layer < self.num_layers and (not rev or self.bidirectional):
                cell = self.cells[layer * self.num_directions + rev]
                return getattr(cell, f"{parts[0]}_{parts[1]}")
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def _run(self, x, state, lengths, mask, key):
        name = type(self).__name__
        x = fnp.asarray(x)
        _check_input(name, x, self.input_size, (2, 3))
        unbatched = x.ndim == 2
        if unbatched:
            x = x[:, None, :]
        elif self.batch_first:
            x = fnp.swapaxes(x, 0, 1)
        steps, batch = x.shape[0], x.shape[1]
        valid = self._valid(steps, batch, unbatched, lengths, mask)
        dirs = self.num_directions
        lstm = self.mode == "LSTM"
        h0, c0 = self._initial(x, state, unbatched, batch)
        use_dropout = self.training and self.dropout > 0 and self.num_layers > 1
        if use_dropout and key is None:
            raise ValueError(f"{name}: dropout={self.dropout} between layers in training "
                             f"mode needs a PRNG key (key=...); or use eval mode")
        keys = _init.split(key, self.num_layers) if use_dropout else None
        hs, cs = [], []
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                k = layer * dirs + d
                y, h, c = self._direction(self.cells[k], x, h0[k], None if c0 is None else c0[k],
                                          valid, reverse=d == 1)
                outs.append(y)
                hs.append(h)
                cs.append(c)
            x = outs[0] if dirs == 1 else fnp.concatenate(outs, axis=-1)
            if use_dropout and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, keys[layer], True)
        h_n, c_n = fnp.stack(hs), (fnp.stack(cs) if lstm else None)
        if unbatched:
            x, h_n = x[:, 0, :], h_n[:, 0, :]
            c_n = None if c_n is None else c_n[:, 0, :]
        elif self.batch_first:
            x = fnp.swapaxes(x, 0, 1)
        return x, h_n, c_n

    def _valid(self, steps, batch, unbatched, lengths, mask):
        """(T, N, 1) booleans, or None when every sequence runs the whole length."""
        name = type(self).__name__
        if lengths is not None and mask is not None:
            raise ValueError(f"{name}: give lengths or mask, not both")
        if lengths is not None:
            lengths = fnp.asarray(lengths)
            want = () if unbatched else (batch,)
            if lengths.dtype.kind not in "iu" or tuple(lengths.shape) != want:
                raise ValueError(f"{name}: lengths must be integers of shape {want}, got "
                                 f"{lengths.dtype}{list(lengths.shape)}")
            return (fnp.arange(steps)[:, None] < fnp.reshape(lengths, (1, -1)))[..., None]
        if mask is None:
            return None
        mask = fnp.asarray(mask)
        want = ((steps,) if unbatched else
                (batch, steps) if self.batch_first else (steps, batch))
        if mask.dtype != fnp.bool_ or tuple(mask.shape) != want:
            raise ValueError(f"{name}: mask must be booleans of shape {want} (the input's "
                             f"shape without its feature axis), got "
                             f"{mask.dtype}{list(mask.shape)}")
        if unbatched:
            mask = mask[:, None]
        elif self.batch_first:
            mask = fnp.transpose(mask)
        return mask[..., None]

    def _initial(self, x, state, unbatched, batch):
        name = type(self).__name__
        n = self.num_layers * self.num_directions
        want = (n, self.hidden_size) if unbatched else (n, batch, self.hidden_size)
        lstm = self.mode == "LSTM"
        if state is None:
            z = fnp.zeros((n, batch, self.hidden_size), fnp.result_type(x))
            return z, (z if lstm else None)
        parts = state if lstm else (state,)
        if lstm and (not isinstance(state, (tuple, list)) or len(state) != 2):
            raise TypeError(f"{name}: the initial state must be a pair (h_0, c_0)")
        for p in parts:
            if tuple(fnp.shape(p)) != want:
                raise ValueError(f"{name}: initial states must have shape {want} "
                                 f"(num_layers·num_directions, [batch,] hidden_size), got "
                                 f"{tuple(fnp.shape(p))}")
        parts = [fnp.asarray(p)[:, None, :] if unbatched else fnp.asarray(p) for p in parts]
        return parts[0], (parts[1] if lstm else None)

    def _direction(self, cell, x, h, c, valid, reverse):
        """One direction of one layer over the sequence x (T, N, features):
        (outputs (T, N, hidden), final h, final c or None)."""
        mode, weight_hh_t = self.mode, fnp.transpose(cell.weight_hh)   # once, not per step
        bias_ih, bias_hh = cell.bias_ih, cell.bias_hh
        if mode != "GRU" and bias_hh is not None:
            # both biases add to the gates: once for every step, before the loop
            bias_ih, bias_hh = bias_ih + bias_hh, None
        gi = _affine(x, cell.weight_ih, bias_ih)   # input part of every step at once

        def body(carry, inputs):
            h, c = carry
            g, v = inputs
            h_new, c_new = _step(mode, g, h, c, weight_hh_t, bias_hh)
            if v is None:
                return (h_new, c_new), h_new
            h_new = fnp.where(v, h_new, h)
            if c is not None:
                c_new = fnp.where(v, c_new, c)
            return (h_new, c_new), fnp.where(v, h_new, fnp.zeros_like(h_new))

        (h, c), ys = lax.scan(body, (h, c), (gi, valid), reverse=reverse)
        return ys, h, c


def _layer_doc(name, gates, state):
    return (f"""PyTorch's {name}: num_layers stacked layers over a sequence, each
    optionally bidirectional (outputs of both directions concatenated).

    Parameters (also as attributes by PyTorch's names): weight_ih_l{{k}}
    ({gates}·hidden, input_size for k = 0 else num_directions·hidden), weight_hh_l{{k}}
    ({gates}·hidden, hidden), bias_ih_l{{k}}, bias_hh_l{{k}} ({gates}·hidden,), and
    *_reverse for the backward direction; U(-1/sqrt(hidden), 1/sqrt(hidden)).

    Call layer(x, {state}=None, *, lengths=None, mask=None, key=None) ->
    (output, {'(h_n, c_n)' if name == 'LSTM' else 'h_n'}).
    x: (T, N, input_size), or (N, T, input_size) with batch_first, or one sequence
    (T, input_size). output: (T, N, num_directions·hidden) (batch_first: (N, T, ...));
    h_n{', c_n' if name == 'LSTM' else ''}: (num_layers·num_directions, N, hidden)
    (without N for one sequence); initial states have that shape, zeros when None.
    lengths / mask: variable lengths (see the module docstring). dropout: applied to
    each layer's output but the last's in training mode, with `key` (required then).
    """)


class RNN(_Recurrent):
    __doc__ = _layer_doc("RNN", 1, "h_0") + "nonlinearity: 'tanh' or 'relu'.\n"

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, *, training=True, key,
                 dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: nonlinearity must be 'tanh' or 'relu', got "
                             f"{nonlinearity!r}")
        self._build("RNN_" + nonlinearity.upper(), input_size, hidden_size, num_layers, bias,
                    batch_first, dropout, bidirectional, training, key, dtype)

    def __call__(self, x, h_0=None, *, lengths=None, mask=None, key=None):
        y, h, _ = self._run(x, h_0, lengths, mask, key)
        return y, h


class LSTM(_Recurrent):
    __doc__ = _layer_doc("LSTM", 4, "(h_0, c_0)")

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, *, training=True, key, dtype=None):
        self._build("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                    bidirectional, training, key, dtype)

    def __call__(self, x, hc_0=None, *, lengths=None, mask=None, key=None):
        y, h, c = self._run(x, hc_0, lengths, mask, key)
        return y, (h, c)


class GRU(_Recurrent):
    __doc__ = _layer_doc("GRU", 3, "h_0")

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, *, training=True, key, dtype=None):
        self._build("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                    bidirectional, training, key, dtype)

    def __call__(self, x, h_0=None, *, lengths=None, mask=None, key=None):
        y, h, _ = self._run(x, h_0, lengths, mask, key)
        return y, h

