"""fgrad_nn recurrent layers: shapes (one sequence and a batch), values against explicit
NumPy gate equations, check_grads (float64, order 2) w.r.t. inputs and parameters, jit
equals eager, pytree round trips, variable lengths by lengths/mask, PyTorch names, and
a cross-check against torch (skipped when torch is missing)."""
import numpy as np
import pytest

import fgrad
import fgrad_nn
from fgrad.test_util import check_grads
from fgrad_nn import layers as L
from tree_asserts import assert_trees_close

F64 = np.float64


def _key(i=0):
    return fgrad.random.key(i)


def _sig(v):
    return 1 / (1 + np.exp(-v))


def _np_step(mode, x, h, c, w_ih, w_hh, b_ih, b_hh):
    """PyTorch's gate equations written out in NumPy."""
    gi, gh = x @ w_ih.T + b_ih, h @ w_hh.T + b_hh
    H = h.shape[-1]
    if mode == "tanh":
        return np.tanh(gi + gh), None
    if mode == "relu":
        return np.maximum(gi + gh, 0), None
    if mode == "lstm":
        g = gi + gh
        i, f, gg, o = (g[..., k * H:(k + 1) * H] for k in range(4))
        c = _sig(f) * c + _sig(i) * np.tanh(gg)
        return _sig(o) * np.tanh(c), c
    r = _sig(gi[..., :H] + gh[..., :H])
    z = _sig(gi[..., H:2 * H] + gh[..., H:2 * H])
    n = np.tanh(gi[..., 2 * H:] + r * gh[..., 2 * H:])
    return (1 - z) * n + z * h, None


def _np_layer(layer, x, lengths=None):
    """Reference for a (T, N, I) input: loops over layers, directions, steps and
    sequences; a sequence stops at its length (reverse starts at its last step)."""
    mode = {"LSTM": "lstm", "GRU": "gru", "RNN_TANH": "tanh", "RNN_RELU": "relu"}[layer.mode]
    T, N, _ = x.shape
    H, D = layer.hidden_size, layer.num_directions
    lengths = np.full(N, T) if lengths is None else np.asarray(lengths)
    hs, cs = [], []
    for layer_i in range(layer.num_layers):
        out = np.zeros((T, N, D * H))
        for d in range(D):
            cell = layer.cells[layer_i * D + d]
            p = [np.asarray(a) for a in (cell.weight_ih, cell.weight_hh, cell.bias_ih,
                                         cell.bias_hh)]
            h_fin, c_fin = np.zeros((N, H)), np.zeros((N, H))
            for n in range(N):
                h, c = np.zeros(H), np.zeros(H)
                steps = range(lengths[n])
                for t in (reversed(steps) if d else steps):
                    h, c = _np_step(mode, x[t, n], h, c, *p)
                    out[t, n, d * H:(d + 1) * H] = h
                h_fin[n], c_fin[n] = h, (c if c is not None else 0)
            hs.append(h_fin)
            cs.append(c_fin)
        x = out
    return x, np.stack(hs), np.stack(cs)


def _close(got, want, rtol=1e-10, atol=1e-12):
    got = np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


CELLS = [(L.RNNCell, {"nonlinearity": "tanh"}, "tanh", 1),
         (L.RNNCell, {"nonlinearity": "relu"}, "relu", 1),
         (L.LSTMCell, {}, "lstm", 4), (L.GRUCell, {}, "gru", 3)]


@pytest.mark.parametrize("cls,kw,mode,gates", CELLS)
def test_cell_shapes_values_and_layout(cls, kw, mode, gates):
    cell = cls(3, 5, key=_key(1), dtype=F64, **kw)
    assert cell.weight_ih.shape == (gates * 5, 3) and cell.weight_hh.shape == (gates * 5, 5)
    assert cell.bias_ih.shape == cell.bias_hh.shape == (gates * 5,)
    for a in (cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh):
        assert np.abs(np.asarray(a)).max() <= 1 / np.sqrt(5)
    rng = np.random.default_rng(0)
    x, h, c = rng.normal(size=(4, 3)), rng.normal(size=(4, 5)), rng.normal(size=(4, 5))
    p = [np.asarray(a) for a in (cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh)]
    want_h, want_c = _np_step(mode, x, h, c, *p)
    if mode == "lstm":
        got_h, got_c = cell(x, (h, c))
        _close(got_c, want_c)
        one_h, _ = cell(x[0], (h[0], c[0]))
        zero_h, _ = cell(x)
        _close(zero_h, _np_step(mode, x, 0 * h, 0 * c, *p)[0])
    else:
        got_h = cell(x, h)
        one_h = cell(x[0], h[0])
        _close(cell(x), _np_step(mode, x, 0 * h, None, *p)[0])
    _close(got_h, want_h)
    _close(one_h, want_h[0])


def test_cell_without_bias_and_bad_input():
    cell = L.GRUCell(3, 2, bias=False, key=_key())
    assert cell.bias_ih is None and cell.bias_hh is None
    assert cell(np.ones(3, np.float32)).shape == (2,)
    with pytest.raises(ValueError, match="3 features"):
        cell(np.ones((2, 4), np.float32))


LAYERS = [(L.RNN, {}), (L.RNN, {"nonlinearity": "relu"}), (L.LSTM, {}), (L.GRU, {})]


@pytest.mark.parametrize("cls,kw", LAYERS)
@pytest.mark.parametrize("num_layers,bidirectional", [(1, False), (2, True)])
def test_layer_values_against_numpy(cls, kw, num_layers, bidirectional):
    layer = cls(3, 4, num_layers=num_layers, bidirectional=bidirectional, key=_key(2),
                dtype=F64, **kw)
    x = np.random.default_rng(1).normal(size=(6, 2, 3))
    want_y, want_h, want_c = _np_layer(layer, x)
    y, state = layer(x)
    h = state[0] if cls is L.LSTM else state
    _close(y, want_y)
    _close(h, want_h)
    if cls is L.LSTM:
        _close(state[1], want_c)
    D = 2 if bidirectional else 1
    assert y.shape == (6, 2, D * 4) and h.shape == (num_layers * D, 2, 4)
    # one sequence, and batch_first
    y1, s1 = layer(x[:, 0])
    _close(y1, want_y[:, 0])
    _close(s1[0] if cls is L.LSTM else s1, want_h[:, 0])
    bf = fgrad_nn.replace(layer, batch_first=True)
    yb, _ = bf(np.swapaxes(x, 0, 1))
    _close(yb, np.swapaxes(want_y, 0, 1))


@pytest.mark.parametrize("cls", [L.LSTM, L.GRU, L.RNN])
def test_lengths_and_mask(cls):
    layer = cls(3, 4, num_layers=2, bidirectional=True, key=_key(3), dtype=F64)
    x = np.random.default_rng(2).normal(size=(5, 3, 3))
    lengths = np.array([5, 2, 3])
    want_y, want_h, want_c = _np_layer(layer, x, lengths)
    y, state = layer(x, lengths=lengths)
    _close(y, want_y)
    _close(state[0] if cls is L.LSTM else state, want_h)
    mask = np.arange(5)[None, :] < lengths[:, None]          # (N, T) for batch_first
    bf = fgrad_nn.replace(layer, batch_first=True)
    yb, sb = bf(np.swapaxes(x, 0, 1), mask=mask)
    _close(yb, np.swapaxes(want_y, 0, 1))
    assert_trees_close(sb, state)
    with pytest.raises(ValueError, match="mask must be booleans of shape"):
        layer(x, mask=mask)
    with pytest.raises(ValueError, match="not both"):
        layer(x, lengths=lengths, mask=mask.T)


def test_initial_state_and_errors():
    layer = L.LSTM(3, 4, num_layers=2, key=_key(4), dtype=F64)
    rng = np.random.default_rng(3)
    x, h0, c0 = rng.normal(size=(4, 2, 3)), rng.normal(size=(2, 2, 4)), rng.normal(size=(2, 2, 4))
    y, (h, c) = layer(x, (h0, c0))
    # the same as running the two layers' cells by hand with those initial states
    seq, hs = x, []
    for k, cell in enumerate(layer.cells):
        hk, ck, outs = h0[k], c0[k], []
        for t in range(4):
            hk, ck = cell(seq[t], (hk, ck))
            outs.append(hk)
        seq, _ = np.stack(outs), hs.append(hk)
    _close(y, seq, rtol=1e-9)
    _close(h, np.stack(hs), rtol=1e-9)
    with pytest.raises(ValueError, match="initial states must have shape"):
        layer(x, (h0[:1], c0[:1]))
    with pytest.raises(TypeError, match="pair"):
        layer(x, h0)


def test_pytorch_names_are_attributes():
    layer = L.GRU(3, 4, num_layers=2, bidirectional=True, key=_key())
    assert layer.weight_ih_l0.shape == (12, 3)
    assert layer.weight_ih_l1_reverse.shape == (12, 8)
    assert layer.bias_hh_l1 is layer.cells[2].bias_hh
    with pytest.raises(AttributeError):
        layer.weight_ih_l2
    with pytest.raises(AttributeError):
        L.GRU(3, 4, key=_key()).weight_ih_l0_reverse


def test_dropout_between_layers():
    layer = L.LSTM(3, 4, num_layers=2, dropout=0.5, key=_key(5))
    x = np.random.default_rng(4).normal(size=(4, 2, 3)).astype(np.float32)
    with pytest.raises(ValueError, match="PRNG key"):
        layer(x)
    a, _ = layer(x, key=_key(6))
    b, _ = layer(x, key=_key(6))
    c, _ = layer(x, key=_key(7))
    _close(a, np.asarray(b), rtol=0, atol=0)
    assert not np.allclose(np.asarray(a), np.asarray(c))
    e, _ = fgrad_nn.eval_mode(layer)(x)
    want, _, _ = _np_layer(layer, x.astype(F64))
    _close(e, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("cls", [L.LSTM, L.GRU, L.RNN])
def test_grads_wrt_inputs_and_parameters(cls):
    layer = cls(2, 2, bidirectional=True, key=_key(8), dtype=F64)
    rng = np.random.default_rng(5)
    x = rng.normal(size=(3, 2, 2))
    lengths = np.array([3, 2])

    def f(model, x):
        y, state = model(x, lengths=lengths)
        h = state[0] if cls is L.LSTM else state
        return (y ** 2).sum() + (h * 0.5).sum()

    check_grads(lambda x: f(layer, x), (x,), order=2)
    leaves, treedef = fgrad.tree.flatten(layer)

    def of_params(*ps):
        return f(fgrad.tree.unflatten(treedef, ps), x)
    check_grads(of_params, tuple(np.asarray(p) for p in leaves), order=2, modes=("rev",))


@pytest.mark.parametrize("cls", [L.LSTM, L.GRU, L.RNN])
def test_jit_equals_eager_and_round_trip(cls):
    layer = cls(3, 4, bidirectional=True, batch_first=True, key=_key(9))
    x = np.random.default_rng(6).normal(size=(2, 5, 3)).astype(np.float32)
    leaves, treedef = fgrad.tree.flatten(layer)
    assert len(leaves) == 8
    again = fgrad.tree.unflatten(treedef, leaves)
    assert_trees_close(again, layer)
    eager = layer(x, lengths=np.array([5, 3]))
    jitted = fgrad.jit(lambda m, v, n: m(v, lengths=n))(layer, x, np.array([5, 3]))
    assert_trees_close(jitted, eager, rtol=1e-6, atol=1e-6)


def test_jit_grad_of_a_stack():
    layer = L.LSTM(3, 4, num_layers=2, key=_key(9))
    x = np.random.default_rng(6).normal(size=(5, 2, 3)).astype(np.float32)

    def loss(m):
        return (m(x)[0] ** 2).sum()
    assert_trees_close(fgrad.jit(fgrad.grad(loss))(layer), fgrad.grad(loss)(layer),
                       rtol=1e-5, atol=1e-6)


def _torch():
    try:
        import torch
    except ImportError:
        pytest.skip("torch is not installed (it lives in bench/.venv-peers)")
    return torch


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_against_torch(name):
    torch = _torch()
    layer = getattr(L, name)(3, 4, num_layers=2, bidirectional=True, batch_first=True,
                             key=_key(10), dtype=F64)
    ref = getattr(torch.nn, name)(3, 4, num_layers=2, bidirectional=True, batch_first=True,
                                  dtype=torch.float64)
    with torch.no_grad():
        for pname, p in ref.named_parameters():
            p.copy_(torch.from_numpy(np.array(getattr(layer, pname))))
    x = np.random.default_rng(7).normal(size=(2, 5, 3))
    tx = torch.from_numpy(x).requires_grad_()
    ty, _ = ref(tx)
    (ty ** 2).sum().backward()
    y, _ = layer(x)
    _close(y, ty.detach().numpy(), rtol=1e-9)
    gx = fgrad.grad(lambda v: (layer(v)[0] ** 2).sum())(x)
    _close(gx, tx.grad.numpy(), rtol=1e-8)
    gp = fgrad.grad(lambda m: (m(x)[0] ** 2).sum())(layer)
    for pname, p in ref.named_parameters():
        _close(getattr(gp, pname), p.grad.numpy(), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("cls", [L.LSTM, L.GRU])
def test_vmap_over_sequences_equals_the_batch(cls):
    layer = cls(3, 4, bidirectional=True, key=_key(11), dtype=F64)
    x = np.random.default_rng(8).normal(size=(3, 5, 3))          # (N, T, I)
    lengths = np.array([5, 1, 4])
    per_seq = fgrad.vmap(lambda v, n: layer(v, lengths=n))(x, lengths)
    batched = fgrad_nn.replace(layer, batch_first=True)(x, lengths=lengths)
    _close(per_seq[0], np.asarray(batched[0]))
    h_seq = per_seq[1][0] if cls is L.LSTM else per_seq[1]
    h_bat = batched[1][0] if cls is L.LSTM else batched[1]
    _close(np.swapaxes(np.asarray(h_seq), 0, 1), np.asarray(h_bat))
