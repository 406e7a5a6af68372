"""Cross-check of the attention, normalisation and small layers against PyTorch,
with weights copied from fgrad_nn into the torch layer: outputs and gradients (with
respect to the inputs and every parameter) must agree. Skipped where torch is not
importable (it is in the bench peers environment, not in CI). Runs as a script too
(the peers environment has no pytest):
    PYTHONPATH=$PWD bench/.venv-peers/bin/python tests/test_nn_torch_crosscheck.py"""
import numpy as np

try:
    import pytest
    torch = pytest.importorskip("torch")
except ImportError:         # run as a script in an environment without pytest
    pytest = None
    import torch

import fgrad
import fgrad.numpy as fnp
import fgrad.random
from fgrad_nn import eval_mode
from fgrad_nn import functional as F
from fgrad_nn import layers as L

F64 = fnp.float64


def _float64_torch():
    """Make torch's default dtype float64; returns a function that puts the one
    before back (a module-wide setting would leak into every later test file)."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    return lambda: torch.set_default_dtype(before)


if pytest is not None:
    @pytest.fixture(autouse=True)
    def float64_torch():
        restore = _float64_torch()
        yield
        restore()


def _key(i=0):
    return fgrad.random.key(i)


def _parameter(model, dotted):
    """The fgrad_nn array at PyTorch's parameter name ('layers.0.linear1.weight')."""
    node = model
    for part in dotted.split("."):
        node = node[int(part)] if part.isdigit() else getattr(node, part)
    return node


def _copy_into(torch_module, model):
    """Copy every fgrad_nn parameter into the torch module, by PyTorch's names; a
    parameter missing on either side is an error."""
    names = dict(torch_module.named_parameters())
    for name, p in names.items():
        value = np.asarray(_parameter(model, name))
        assert value.shape == tuple(p.shape), (name, value.shape, tuple(p.shape))
        with torch.no_grad():
            p.copy_(torch.from_numpy(value.copy()))
    ours = sum(1 for leaf in fgrad.tree.leaves(model) if getattr(leaf, "size", 0))
    assert ours == len(names), (ours, sorted(names))


def _perturbed(model, seed=0):
    rng = np.random.default_rng(seed)
    return fgrad.tree.map(lambda p: p + 0.3 * rng.standard_normal(p.shape), model)


def _check(model, torch_module, inputs, call=None, torch_call=None, rtol=1e-9, atol=1e-10):
    """Outputs, input gradients and parameter gradients of sum(out · R) agree."""
    call = call or (lambda m, *xs: m(*xs))
    torch_call = torch_call or (lambda m, *xs: m(*xs))
    _copy_into(torch_module, model)
    out = np.asarray(call(model, *inputs))
    cotangent = np.random.default_rng(7).standard_normal(out.shape)
    grads = fgrad.grad(lambda m, *xs: fnp.sum(call(m, *xs) * cotangent),
                       argnums=tuple(range(1 + len(inputs))))(model, *inputs)
    t_inputs = [torch.tensor(np.asarray(x), requires_grad=True) for x in inputs]
    torch_module.zero_grad(set_to_none=True)
    t_out = torch_call(torch_module, *t_inputs)
    np.testing.assert_allclose(out, t_out.detach().numpy(), rtol=rtol, atol=atol)
    (t_out * torch.from_numpy(cotangent)).sum().backward()
    for x_grad, t_x in zip(grads[1:], t_inputs):
        np.testing.assert_allclose(np.asarray(x_grad), _grad(t_x), rtol=rtol, atol=atol)
    for name, p in torch_module.named_parameters():
        np.testing.assert_allclose(np.asarray(_parameter(grads[0], name)), _grad(p),
                                   rtol=rtol, atol=atol, err_msg=name)


def _grad(t):
    """A torch leaf's gradient; zeros where the output does not depend on it."""
    return np.zeros(tuple(t.shape)) if t.grad is None else t.grad.numpy()


def _x(*shape, seed=1):
    return np.random.default_rng(seed).standard_normal(shape)


def test_sdpa_against_torch():
    q, k, v = _x(2, 3, 4, 5), _x(2, 3, 6, 5, seed=2), _x(2, 3, 6, 7, seed=3)
    allowed = np.random.default_rng(4).random((4, 6)) < 0.7
    allowed[:, 0] = True
    for kwargs in ({}, {"is_causal": True}, {"attn_mask": allowed},
                   {"attn_mask": _x(2, 1, 4, 6, seed=5)}, {"scale": 0.2}):
        t_kwargs = {k_: (torch.from_numpy(v_) if isinstance(v_, np.ndarray) else v_)
                    for k_, v_ in kwargs.items()}
        want = torch.nn.functional.scaled_dot_product_attention(
            *(torch.from_numpy(t) for t in (q, k, v)), **t_kwargs)
        np.testing.assert_allclose(np.asarray(F.scaled_dot_product_attention(q, k, v, **kwargs)),
                                   want.numpy(), rtol=1e-9, atol=1e-12)


def test_multihead_attention_against_torch():
    x, mem = _x(2, 3, 8), _x(2, 5, 8, seed=2)
    padding = np.array([[False, False, False, True, True], [False, True, False, False, False]])
    blocked = np.random.default_rng(3).random((3, 5)) < 0.3
    blocked[:, 0] = False
    for batch_first in (True, False):
        mha = _perturbed(L.MultiheadAttention(8, 2, batch_first=batch_first, key=_key(),
                                              dtype=F64))
        t = torch.nn.MultiheadAttention(8, 2, batch_first=batch_first)
        xs = (x, mem, mem) if batch_first else tuple(a.transpose(1, 0, 2) for a in (x, mem, mem))
        kw = dict(key_padding_mask=padding, attn_mask=blocked)
        t_kw = {k_: torch.from_numpy(v_) for k_, v_ in kw.items()}
        _check(mha, t, xs, lambda m, *a: m(*a, **kw)[0], lambda m, *a: m(*a, **t_kw)[0])
        _check(mha, t, xs, lambda m, *a: m(*a, average_attn_weights=False)[1],
               lambda m, *a: m(*a, average_attn_weights=False)[1])
    kv = _perturbed(L.MultiheadAttention(8, 4, kdim=3, vdim=6, batch_first=True, key=_key(),
                                         dtype=F64))
    t = torch.nn.MultiheadAttention(8, 4, kdim=3, vdim=6, batch_first=True)
    _check(kv, t, (x, mem[..., :3], mem[..., :6]), lambda m, *a: m(*a)[0],
           lambda m, *a: m(*a)[0])


def test_transformer_layers_against_torch():
    x, mem = _x(2, 4, 8), _x(2, 5, 8, seed=2)
    causal = torch.nn.Transformer.generate_square_subsequent_mask(4)
    for norm_first in (False, True):
        for activation in ("relu", "gelu"):
            kw = dict(dim_feedforward=16, activation=activation, batch_first=True,
                      norm_first=norm_first)
            enc = _perturbed(eval_mode(L.TransformerEncoderLayer(8, 2, key=_key(), dtype=F64,
                                                                  **kw)))
            t = torch.nn.TransformerEncoderLayer(8, 2, **kw).eval()
            _check(enc, t, (x,), lambda m, a: m(a, is_causal=True),
                   lambda m, a: m(a, src_mask=causal, is_causal=True))
            dec = _perturbed(eval_mode(L.TransformerDecoderLayer(8, 2, key=_key(), dtype=F64,
                                                                  **kw)))
            t = torch.nn.TransformerDecoderLayer(8, 2, **kw).eval()
            _check(dec, t, (x, mem), lambda m, a, b: m(a, b, tgt_is_causal=True),
                   lambda m, a, b: m(a, b, tgt_mask=causal, tgt_is_causal=True))
    layer = L.TransformerEncoderLayer(8, 2, 16, key=_key(), dtype=F64)
    stack = _perturbed(eval_mode(L.TransformerEncoder(layer, 3, L.LayerNorm(8, dtype=F64))))
    t = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(8, 2, 16), 3,
                                    torch.nn.LayerNorm(8), enable_nested_tensor=False).eval()
    _check(stack, t, (x.transpose(1, 0, 2),))


def test_norm_layers_against_torch():
    x = _x(3, 6, 5)
    _check(_perturbed(L.GroupNorm(3, 6, dtype=F64)), torch.nn.GroupNorm(3, 6), (x,))
    _check(_perturbed(L.RMSNorm((6, 5), dtype=F64)), torch.nn.RMSNorm((6, 5)), (x,))
    _check(_perturbed(L.RMSNorm(5, eps=1e-3, dtype=F64)), torch.nn.RMSNorm(5, eps=1e-3), (x,))
    _check(_perturbed(L.LayerNorm((6, 5), bias=False, dtype=F64)),
           torch.nn.LayerNorm((6, 5), bias=False), (x,))
    _check(_perturbed(L.InstanceNorm1d(6, affine=True, dtype=F64)),
           torch.nn.InstanceNorm1d(6, affine=True), (x,))
    _check(L.InstanceNorm1d(6, dtype=F64), torch.nn.InstanceNorm1d(6), (x[0],))
    _check(_perturbed(L.InstanceNorm2d(6, affine=True, dtype=F64)),
           torch.nn.InstanceNorm2d(6, affine=True), (x.reshape(3, 6, 5, 1),))
    # running statistics: the state after one training step, then eval
    ours = L.InstanceNorm2d(6, momentum=0.3, track_running_stats=True, dtype=F64)
    t = torch.nn.InstanceNorm2d(6, momentum=0.3, track_running_stats=True)
    xs = x.reshape(3, 6, 5, 1).repeat(2, axis=3)
    _, state = ours(xs, ours.init_state())
    t(torch.from_numpy(xs))
    np.testing.assert_allclose(np.asarray(state.running_mean), t.running_mean.numpy(), rtol=1e-9)
    np.testing.assert_allclose(np.asarray(state.running_var), t.running_var.numpy(), rtol=1e-9)
    y, _ = eval_mode(ours)(xs, state)
    np.testing.assert_allclose(np.asarray(y), t.eval()(torch.from_numpy(xs)).detach().numpy(),
                               rtol=1e-9, atol=1e-12)


def test_small_layers_against_torch():
    x = _x(4, 6) * 3
    pairs = [(L.SiLU(), torch.nn.SiLU()), (L.Mish(), torch.nn.Mish()),
             (L.ReLU6(), torch.nn.ReLU6()), (L.LeakyReLU(0.2), torch.nn.LeakyReLU(0.2)),
             (L.ELU(0.7), torch.nn.ELU(0.7)), (L.CELU(1.5), torch.nn.CELU(1.5)),
             (L.SELU(), torch.nn.SELU()), (L.Softplus(2.0, 3.0), torch.nn.Softplus(2.0, 3.0)),
             (L.Hardtanh(-0.5, 2.0), torch.nn.Hardtanh(-0.5, 2.0)),
             (L.Hardsigmoid(), torch.nn.Hardsigmoid()), (L.Hardswish(), torch.nn.Hardswish()),
             (L.LogSigmoid(), torch.nn.LogSigmoid()), (L.Softsign(), torch.nn.Softsign()),
             (L.Tanhshrink(), torch.nn.Tanhshrink()), (L.LogSoftmax(axis=0),
                                                         torch.nn.LogSoftmax(dim=0)),
             (L.GLU(), torch.nn.GLU()), (L.GELU(), torch.nn.GELU()),
             (L.Unflatten(1, (2, 3)), torch.nn.Unflatten(1, (2, 3)))]
    for ours, theirs in pairs:
        # PyTorch's hardsigmoid/hardswish backward kernels use float32 constants
        # (1/6, 3) even in float64: their gradients are off by ~3e-8 relative
        loose = isinstance(ours, (L.Hardsigmoid, L.Hardswish))
        _check(ours, theirs, (x,), rtol=1e-7 if loose else 1e-9)
    bil = _perturbed(L.Bilinear(3, 4, 2, key=_key(), dtype=F64))
    _check(bil, torch.nn.Bilinear(3, 4, 2), (_x(5, 3), _x(5, 4, seed=2)))
    emb = L.Embedding(6, 3, padding_idx=2, key=_key(), dtype=F64)
    ids = np.array([[2, 1, 2], [5, 2, 0]])
    _check(emb, torch.nn.Embedding(6, 3, padding_idx=2), (),
           lambda m: m(ids), lambda m: m(torch.from_numpy(ids)))


if __name__ == "__main__":
    _float64_torch()
    for name, test in list(globals().items()):
        if name.startswith("test_"):
            test()
            print("ok", name)
