"""PyTorch state_dict names of the layers added for convolutions, normalisation,
attention and transformers: torch_state_dict(model) gives PyTorch's keys in
PyTorch's order with PyTorch's shapes (the expected lists are written by hand
from torch.nn's documented parameters), and loading them back round-trips. Where
torch is importable (bench/.venv-peers), the real modules' state_dicts load."""
import numpy as np
import pytest

import fgrad
import fgrad_nn as nn


def _key(i=0):
    return fgrad.random.key(i)


def _mha_names(prefix, e, kdim=None, vdim=None):
    if kdim is None:
        names = {"in_proj_weight": (3 * e, e)}
    else:
        names = {"q_proj_weight": (e, e), "k_proj_weight": (e, kdim),
                 "v_proj_weight": (e, vdim)}
    names.update({"in_proj_bias": (3 * e,), "out_proj.weight": (e, e), "out_proj.bias": (e,)})
    return {prefix + k: v for k, v in names.items()}


def _feed_forward_names(prefix, e, f, norms):
    names = {"linear1.weight": (f, e), "linear1.bias": (f,), "linear2.weight": (e, f),
             "linear2.bias": (e,)}
    for i in range(1, norms + 1):
        names.update({f"norm{i}.weight": (e,), f"norm{i}.bias": (e,)})
    return {prefix + k: v for k, v in names.items()}


def _encoder_layer_names(prefix=""):
    return {**_mha_names(prefix + "self_attn.", 8), **_feed_forward_names(prefix, 8, 16, 2)}


# name -> (fgrad_nn model, {PyTorch key: shape} in PyTorch's order)
CASES = {
    "Conv1d": (lambda: nn.Conv1d(2, 6, 3, groups=2, key=_key()),
               {"weight": (6, 1, 3), "bias": (6,)}),
    "Conv2d": (lambda: nn.Conv2d(2, 3, (3, 2), key=_key()),
               {"weight": (3, 2, 3, 2), "bias": (3,)}),
    "Conv3d": (lambda: nn.Conv3d(2, 3, 2, bias=False, key=_key()),
               {"weight": (3, 2, 2, 2, 2)}),
    "ConvTranspose1d": (lambda: nn.ConvTranspose1d(4, 6, 3, groups=2, key=_key()),
                        {"weight": (4, 3, 3), "bias": (6,)}),
    "ConvTranspose2d": (lambda: nn.ConvTranspose2d(2, 3, 3, key=_key()),
                        {"weight": (2, 3, 3, 3), "bias": (3,)}),
    "ConvTranspose3d": (lambda: nn.ConvTranspose3d(2, 3, 2, key=_key()),
                        {"weight": (2, 3, 2, 2, 2), "bias": (3,)}),
    "GroupNorm": (lambda: nn.GroupNorm(2, 4), {"weight": (4,), "bias": (4,)}),
    "RMSNorm": (lambda: nn.RMSNorm((3, 4)), {"weight": (3, 4)}),
    "InstanceNorm1d": (lambda: nn.InstanceNorm1d(4, affine=True),
                       {"weight": (4,), "bias": (4,)}),
    "InstanceNorm2d(no affine)": (lambda: nn.InstanceNorm2d(4), {}),
    "MultiheadAttention": (lambda: nn.MultiheadAttention(8, 2, key=_key()), _mha_names("", 8)),
    "MultiheadAttention(kdim, vdim)": (
        lambda: nn.MultiheadAttention(8, 2, kdim=4, vdim=6, key=_key()),
        _mha_names("", 8, 4, 6)),
    "TransformerEncoderLayer": (lambda: nn.TransformerEncoderLayer(8, 2, 16, key=_key()),
                                _encoder_layer_names()),
    "TransformerDecoderLayer": (
        lambda: nn.TransformerDecoderLayer(8, 2, 16, key=_key()),
        {**_mha_names("self_attn.", 8), **_mha_names("multihead_attn.", 8),
         **_feed_forward_names("", 8, 16, 3)}),
    "TransformerEncoder": (
        lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, key=_key()), 2,
                                      nn.LayerNorm(8)),
        {**_encoder_layer_names("layers.0."), **_encoder_layer_names("layers.1."),
         "norm.weight": (8,), "norm.bias": (8,)}),
    "Bilinear": (lambda: nn.Bilinear(2, 3, 4, key=_key()),
                 {"weight": (4, 2, 3), "bias": (4,)}),
    "Embedding": (lambda: nn.Embedding(5, 3, padding_idx=0, key=_key()), {"weight": (5, 3)}),
}


@pytest.mark.parametrize("name", list(CASES))
def test_names_and_shapes_are_pytorchs(name):
    make, expected = CASES[name]
    model = make()
    sd = nn.torch_state_dict(model)
    assert list(sd) == list(expected)
    assert {k: v.shape for k, v in sd.items()} == expected
    # every value comes back to its own place
    rng = np.random.default_rng(0)
    new = {k: rng.normal(size=v.shape) for k, v in sd.items()}
    loaded = nn.load_torch_state_dict(model, new)
    for k, v in nn.torch_state_dict(loaded).items():
        np.testing.assert_allclose(v, new[k], rtol=1e-6)


def test_instancenorm_running_statistics_are_buffers():
    model = nn.Sequential(nn.Conv2d(2, 4, 3, key=_key()),
                          nn.InstanceNorm2d(4, affine=True, track_running_stats=True))
    state = nn.init_state(model)
    assert list(nn.torch_buffer_names(model, state)) == ["1.running_mean", "1.running_var"]
    rng = np.random.default_rng(1)
    sd = {k: rng.normal(size=v.shape) for k, v in nn.torch_state_dict(model).items()}
    sd.update({"1.running_mean": rng.normal(size=4), "1.running_var": rng.uniform(1, 2, 4),
               "1.num_batches_tracked": np.array(3)})     # PyTorch's count: not kept
    new_model, new_state = nn.load_torch_state_dict(model, sd, state=state)
    np.testing.assert_allclose(new_state[1].running_var, sd["1.running_var"], rtol=1e-6)
    back = nn.torch_state_dict(new_model, new_state)
    assert list(back) == ["0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean",
                          "1.running_var"]
    np.testing.assert_allclose(back["1.running_mean"], sd["1.running_mean"], rtol=1e-6)


def _torch():
    try:
        import torch
    except ImportError:
        pytest.skip("torch is not installed (it lives in bench/.venv-peers)")
    return torch


def _torch_twins(torch):
    """name -> the PyTorch module matching CASES[name]'s model."""
    t = torch.nn
    return {
        "Conv1d": lambda: t.Conv1d(2, 6, 3, groups=2),
        "Conv2d": lambda: t.Conv2d(2, 3, (3, 2)),
        "Conv3d": lambda: t.Conv3d(2, 3, 2, bias=False),
        "ConvTranspose1d": lambda: t.ConvTranspose1d(4, 6, 3, groups=2),
        "ConvTranspose2d": lambda: t.ConvTranspose2d(2, 3, 3),
        "ConvTranspose3d": lambda: t.ConvTranspose3d(2, 3, 2),
        "GroupNorm": lambda: t.GroupNorm(2, 4),
        "RMSNorm": lambda: t.RMSNorm((3, 4)),
        "InstanceNorm1d": lambda: t.InstanceNorm1d(4, affine=True),
        "InstanceNorm2d(no affine)": lambda: t.InstanceNorm2d(4),
        "MultiheadAttention": lambda: t.MultiheadAttention(8, 2),
        "MultiheadAttention(kdim, vdim)": lambda: t.MultiheadAttention(8, 2, kdim=4, vdim=6),
        "TransformerEncoderLayer": lambda: t.TransformerEncoderLayer(8, 2, 16),
        "TransformerDecoderLayer": lambda: t.TransformerDecoderLayer(8, 2, 16),
        "TransformerEncoder": lambda: t.TransformerEncoder(
            t.TransformerEncoderLayer(8, 2, 16), 2, t.LayerNorm(8), enable_nested_tensor=False),
        "Bilinear": lambda: t.Bilinear(2, 3, 4),
        "Embedding": lambda: t.Embedding(5, 3, padding_idx=0),
    }


@pytest.mark.parametrize("name", list(CASES))
def test_real_torch_state_dicts_load_both_ways(name):
    torch = _torch()
    torch.manual_seed(0)
    ref = _torch_twins(torch)[name]()
    want = ref.state_dict()
    model = CASES[name][0]()
    assert list(nn.torch_state_dict(model)) == list(want)
    loaded = nn.load_torch_state_dict(model, want)
    for k, v in nn.torch_state_dict(loaded).items():
        np.testing.assert_array_equal(v, want[k].numpy())
    back = _torch_twins(torch)[name]()
    back.load_state_dict({k: torch.from_numpy(v) for k, v in nn.torch_state_dict(loaded).items()})
    for k, v in back.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), want[k].numpy())


def test_real_torch_instancenorm_with_running_statistics():
    torch = _torch()
    torch.manual_seed(2)
    ref = torch.nn.InstanceNorm2d(4, affine=True, track_running_stats=True).double()
    ref(torch.randn(3, 4, 5, 5, dtype=torch.float64))       # moves the running statistics
    ref.eval()
    model = nn.InstanceNorm2d(4, affine=True, track_running_stats=True, dtype=np.float64)
    model, state = nn.load_torch_state_dict(model, ref.state_dict(),
                                            state=nn.init_state(model))
    x = np.random.default_rng(3).normal(size=(2, 4, 5, 5))
    y, _ = nn.eval_mode(model)(x, state)
    np.testing.assert_allclose(y, ref(torch.from_numpy(x)).detach().numpy(), rtol=1e-12)
