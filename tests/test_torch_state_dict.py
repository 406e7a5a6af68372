"""PyTorch state_dicts into fgrad_nn models and back, by PyTorch's names: round trips,
a Sequential of Linear/LayerNorm/LSTM from a hand-built dict, errors for missing,
unexpected and mis-shaped entries, naming rules, and (with torch) a real torch
model's state_dict giving the same outputs."""
import numpy as np
import pytest

import fgrad
import fgrad_nn as nn
from fgrad_nn.module import Module, static_field


def _key(i=0):
    return fgrad.random.key(i)


class _Tensorish:
    """Stands in for a torch tensor: has .numpy(), is not an ndarray."""
    def __init__(self, a):
        self.a = a

    def numpy(self):
        return self.a


def _hand_built(rng, hidden=3):
    """A state_dict as torch.nn.Sequential(Linear(2, 4), LayerNorm(4), LSTM(4, hidden,
    bidirectional=True)) would name it."""
    sd = {"0.weight": rng.normal(size=(4, 2)), "0.bias": rng.normal(size=4),
          "1.weight": rng.normal(size=4), "1.bias": rng.normal(size=4)}
    for sfx in ("", "_reverse"):
        sd[f"2.weight_ih_l0{sfx}"] = rng.normal(size=(4 * hidden, 4))
        sd[f"2.weight_hh_l0{sfx}"] = rng.normal(size=(4 * hidden, hidden))
        sd[f"2.bias_ih_l0{sfx}"] = rng.normal(size=4 * hidden)
        sd[f"2.bias_hh_l0{sfx}"] = _Tensorish(rng.normal(size=4 * hidden))
    return sd


def _model(dtype=np.float64):
    return nn.Sequential(nn.Linear(2, 4, key=_key(1), dtype=dtype), nn.LayerNorm(4, dtype=dtype),
                         nn.LSTM(4, 3, bidirectional=True, key=_key(2), dtype=dtype))


def _sig(v):
    return 1 / (1 + np.exp(-v))


def test_load_hand_built_sequential_and_check_output():
    rng = np.random.default_rng(0)
    sd = _hand_built(rng)
    model = nn.load_torch_state_dict(_model(), sd)
    np.testing.assert_array_equal(model.layers[0].weight, sd["0.weight"])
    np.testing.assert_array_equal(model.layers[2].bias_hh_l0_reverse, sd["2.bias_hh_l0_reverse"].a)
    x = rng.normal(size=(5, 2))          # one sequence of 5 steps
    y, (h, c) = model(x)
    # the same by hand from the dict: linear, layer norm, forward LSTM direction
    z = x @ sd["0.weight"].T + sd["0.bias"]
    z = (z - z.mean(-1, keepdims=True)) / np.sqrt(z.var(-1, keepdims=True) + 1e-5)
    z = z * sd["1.weight"] + sd["1.bias"]
    hh, cc = np.zeros(3), np.zeros(3)
    for t in range(5):
        g = (sd["2.weight_ih_l0"] @ z[t] + sd["2.bias_ih_l0"] + sd["2.weight_hh_l0"] @ hh
             + sd["2.bias_hh_l0"].a)
        i, f, gg, o = np.split(g, 4)
        cc = _sig(f) * cc + _sig(i) * np.tanh(gg)
        hh = _sig(o) * np.tanh(cc)
    np.testing.assert_allclose(np.asarray(y)[-1, :3], hh, rtol=1e-10)
    np.testing.assert_allclose(np.asarray(c)[0], cc, rtol=1e-10)


def test_round_trip_and_dtype_cast():
    model = _model(np.float32)
    sd = nn.torch_state_dict(model)
    assert list(sd)[:4] == ["0.weight", "0.bias", "1.weight", "1.bias"]
    assert len(sd) == 4 + 8 and all(isinstance(v, np.ndarray) for v in sd.values())
    other = nn.load_torch_state_dict(_model(np.float32), {k: v.astype(np.float64)
                                                         for k, v in sd.items()})
    for name, value in nn.torch_state_dict(other).items():
        assert value.dtype == np.float32
        np.testing.assert_array_equal(value, sd[name])
    assert set(nn.torch_names(model)) == set(sd)
    assert nn.torch_names(model)["2.weight_hh_l0_reverse"] == ("layers", 2, "cells", 1,
                                                               "weight_hh")


def test_errors_missing_unexpected_shape():
    model = _model()
    sd = _hand_built(np.random.default_rng(1))
    del sd["1.bias"]
    sd["3.running_mean"] = np.zeros(4)
    with pytest.raises(ValueError, match=r"(?s)missing \(1\): 1.bias.*unexpected \(1\): "
                                         r"3.running_mean.*BatchNorm"):
        nn.load_torch_state_dict(model, sd)
    loose = nn.load_torch_state_dict(model, sd, strict=False)
    assert loose.layers[1].bias is model.layers[1].bias
    np.testing.assert_array_equal(loose.layers[1].weight, sd["1.weight"])
    sd["1.bias"] = np.zeros(5)
    with pytest.raises(ValueError, match=r"shape mismatch for 1.bias: the model has \(4,\), "
                                         r"the state_dict \(5,\)"):
        nn.load_torch_state_dict(model, sd, strict=False)


def test_no_bias_and_nested_names():
    model = nn.Sequential(nn.Linear(2, 3, bias=False, key=_key()),
                          nn.Sequential(nn.Linear(3, 1, key=_key(1))))
    assert list(nn.torch_names(model)) == ["0.weight", "1.0.weight", "1.0.bias"]
    mlp = nn.MLP([2, 3, 1], key=_key())
    assert list(nn.torch_names(mlp)) == ["layers.0.weight", "layers.0.bias",
                                         "layers.1.weight", "layers.1.bias"]


class _Attn(Module):
    """A layer that stores q and k apart while PyTorch keeps one in_proj_weight:
    registered with a rule naming its fields."""
    wq: object
    wk: object
    scale: float = static_field(default=1.0)


def test_register_torch_names_rule():
    nn.register_torch_names(_Attn, lambda m: {"q_proj_weight": ("wq",),
                                              "k_proj_weight": ("wk",)})
    layer = _Attn(np.zeros((2, 2)), np.ones((2, 2)))
    assert list(nn.torch_state_dict(layer)) == ["q_proj_weight", "k_proj_weight"]
    new = nn.load_torch_state_dict(layer, {"q_proj_weight": np.eye(2),
                                           "k_proj_weight": np.eye(2)})
    np.testing.assert_array_equal(new.wq, np.eye(2))
    with pytest.raises(TypeError, match="Module subclass"):
        nn.register_torch_names(int, lambda m: {})


def _torch():
    try:
        import torch
    except ImportError:
        pytest.skip("torch is not installed (it lives in bench/.venv-peers)")
    return torch


def test_real_torch_model_round_trip():
    torch = _torch()
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.LayerNorm(4),
                              torch.nn.Identity(),
                              torch.nn.Linear(4, 3)).double()
    model = nn.Sequential(nn.Linear(2, 4, key=_key(), dtype=np.float64),
                          nn.LayerNorm(4, dtype=np.float64), nn.Identity(),
                          nn.Linear(4, 3, key=_key(1), dtype=np.float64))
    model = nn.load_torch_state_dict(model, ref.state_dict())
    x = np.random.default_rng(2).normal(size=(5, 2))
    np.testing.assert_allclose(model(x), ref(torch.from_numpy(x)).detach().numpy(), rtol=1e-12)
    lstm_ref = torch.nn.LSTM(3, 4, num_layers=2, bidirectional=True).double()
    lstm = nn.load_torch_state_dict(nn.LSTM(3, 4, num_layers=2, bidirectional=True,
                                            key=_key(), dtype=np.float64),
                                    lstm_ref.state_dict())
    xs = np.random.default_rng(3).normal(size=(6, 2, 3))
    want, (wh, wc) = lstm_ref(torch.from_numpy(xs))
    got, (h, c) = lstm(xs)
    np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-10)
    np.testing.assert_allclose(c, wc.detach().numpy(), rtol=1e-10)
    # and back: torch loads ours strictly
    back = torch.nn.LSTM(3, 4, num_layers=2, bidirectional=True).double()
    back.load_state_dict({k: torch.from_numpy(v) for k, v in nn.torch_state_dict(lstm).items()})
    np.testing.assert_allclose(back(torch.from_numpy(xs))[0].detach().numpy(), got, rtol=1e-10)


def test_batchnorm_buffers_through_the_state():
    model = nn.Sequential(nn.Linear(2, 3, key=_key()), nn.BatchNorm(3),
                          nn.ResMLPBlock(3, 4, norm="batch", key=_key(1)))
    state = nn.init_state(model)
    rng = np.random.default_rng(4)
    sd = {k: rng.normal(size=v.shape) for k, v in nn.torch_state_dict(model).items()}
    assert "1.running_mean" not in sd
    sd.update({"1.running_mean": rng.normal(size=3), "1.running_var": rng.uniform(1, 2, 3),
               "1.num_batches_tracked": np.array(7),
               "2.fn.0.running_mean": rng.normal(size=3),
               "2.fn.0.running_var": rng.uniform(1, 2, 3),
               "2.fn.0.num_batches_tracked": np.array(7)})
    assert set(nn.torch_buffer_names(model, state)) == {
        "1.running_mean", "1.running_var", "2.fn.0.running_mean", "2.fn.0.running_var"}
    with pytest.raises(ValueError, match="pass state=fgrad_nn.init_state"):
        nn.load_torch_state_dict(model, sd)
    new_model, new_state = nn.load_torch_state_dict(model, sd, state=state)
    np.testing.assert_allclose(new_state[1].running_var, sd["1.running_var"], rtol=1e-6)
    np.testing.assert_allclose(new_state[2][0].running_mean, sd["2.fn.0.running_mean"],
                               rtol=1e-6)      # the block's state is its Sequential's
    assert new_state[1].running_mean.dtype == np.float32
    back = nn.torch_state_dict(new_model, new_state)
    assert set(back) == set(sd) - {"1.num_batches_tracked", "2.fn.0.num_batches_tracked"}
    # momentum=None keeps the count, which then loads as well
    counted = nn.Sequential(nn.BatchNorm(3, momentum=None))
    _, st = nn.load_torch_state_dict(counted, {"0.weight": np.ones(3), "0.bias": np.zeros(3),
                                               "0.running_mean": np.zeros(3),
                                               "0.running_var": np.ones(3),
                                               "0.num_batches_tracked": np.array(5)},
                                     state=nn.init_state(counted))
    assert int(st[0].num_batches_tracked) == 5 and st[0].num_batches_tracked.dtype == np.int32


def test_real_torch_batchnorm_model():
    torch = _torch()
    torch.manual_seed(1)
    ref = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.BatchNorm1d(3), torch.nn.ReLU(),
                              torch.nn.Linear(3, 1)).double()
    ref(torch.randn(16, 2, dtype=torch.float64))       # moves the running statistics
    ref.eval()
    model = nn.Sequential(nn.Linear(2, 3, key=_key(), dtype=np.float64),
                          nn.BatchNorm(3, dtype=np.float64), nn.ReLU(),
                          nn.Linear(3, 1, key=_key(1), dtype=np.float64))
    model, state = nn.load_torch_state_dict(model, ref.state_dict(),
                                            state=nn.init_state(model))
    x = np.random.default_rng(5).normal(size=(4, 2))
    y, _ = nn.eval_mode(model)(x, state)
    np.testing.assert_allclose(y, ref(torch.from_numpy(x)).detach().numpy(), rtol=1e-12)
    again = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.BatchNorm1d(3), torch.nn.ReLU(),
                                torch.nn.Linear(3, 1)).double().eval()
    again.load_state_dict({k: torch.from_numpy(v)
                           for k, v in nn.torch_state_dict(model, state).items()}, strict=False)
    np.testing.assert_allclose(again(torch.from_numpy(x)).detach().numpy(), y, rtol=1e-12)
