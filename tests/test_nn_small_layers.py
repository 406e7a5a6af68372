"""fgrad_nn small layers: a module per fgrad.nn activation, Embedding with
padding_idx, Bilinear, Unflatten, Lambda and Identity. Values against NumPy
formulas written here, check_grads (float64, order 2), jit equals eager,
flatten/unflatten, one example and a batch."""
import math

import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
import fgrad.random
from fgrad import nn
from fgrad.test_util import check_grads
from fgrad_nn import layers as L
from tree_asserts import assert_trees_close

F64 = fnp.float64


def _close(got, want, rtol=1e-10, atol=1e-12):
    got = np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def _round_trip_and_jit(layer, *xs):
    leaves, treedef = fgrad.tree.flatten(layer)
    assert_trees_close(fgrad.tree.unflatten(treedef, leaves), layer)
    eager = layer(*xs)
    _close(fgrad.jit(lambda m, *v: m(*v))(layer, *xs), np.asarray(eager), rtol=1e-9)
    return eager


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _softplus(x):
    return np.log1p(np.exp(x))


_ALPHA, _SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
ACTIVATIONS = [
    (L.SiLU(), lambda x: x * _sigmoid(x)),
    (L.Mish(), lambda x: x * np.tanh(_softplus(x))),
    (L.ReLU6(), lambda x: np.clip(x, 0, 6)),
    (L.LeakyReLU(), lambda x: np.where(x >= 0, x, 0.01 * x)),
    (L.LeakyReLU(0.2), lambda x: np.where(x >= 0, x, 0.2 * x)),
    (L.ELU(), lambda x: np.where(x > 0, x, np.expm1(x))),
    (L.ELU(0.5), lambda x: np.where(x > 0, x, 0.5 * np.expm1(x))),
    (L.CELU(2.0), lambda x: np.where(x > 0, x, 2.0 * np.expm1(x / 2.0))),
    (L.SELU(), lambda x: _SCALE * np.where(x > 0, x, _ALPHA * np.expm1(x))),
    (L.Softplus(), _softplus),
    (L.Softplus(beta=2.0, threshold=3.0),
     lambda x: np.where(2 * x > 3.0, x, _softplus(2 * x) / 2)),
    (L.Hardtanh(), lambda x: np.clip(x, -1, 1)),
    (L.Hardtanh(-0.5, 2.0), lambda x: np.clip(x, -0.5, 2.0)),
    (L.Hardsigmoid(), lambda x: np.clip(x + 3, 0, 6) / 6),
    (L.Hardswish(), lambda x: x * np.clip(x + 3, 0, 6) / 6),
    (L.LogSigmoid(), lambda x: np.log(_sigmoid(x))),
    (L.Softsign(), lambda x: x / (1 + np.abs(x))),
    (L.Tanhshrink(), lambda x: x - np.tanh(x)),
    (L.LogSoftmax(), lambda x: x - np.log(np.exp(x).sum(-1, keepdims=True))),
    (L.LogSoftmax(axis=0), lambda x: x - np.log(np.exp(x).sum(0, keepdims=True))),
    (L.GLU(), lambda x: x[..., :2] * _sigmoid(x[..., 2:])),
    (L.GLU(axis=0), lambda x: x[:2] * _sigmoid(x[2:])),
]


def _away_from_kinks(x):
    """Move points off the kinks of the piecewise activations (0, ±1, ±3, 6, and the
    Softplus/Hardtanh thresholds) so that finite differences are smooth."""
    for kink in (0.0, 1.0, -1.0, 3.0, -3.0, 1.5, -0.5, 2.0):
        x = np.where(np.abs(x - kink) < 0.08, kink + 0.2, x)
    return x


@pytest.mark.parametrize("module,ref", ACTIVATIONS, ids=lambda a: type(a).__name__)
def test_activation_modules_match_formulas(rng, module, ref):
    x = _away_from_kinks(rng.standard_normal((4, 4)) * 2.5)
    _close(_round_trip_and_jit(module, x), ref(x), rtol=1e-9)
    if not isinstance(module, L.GLU) or module.axis == -1:
        _close(module(x[1]), ref(x[1]), rtol=1e-9)             # one example
    check_grads(lambda v: module(v), (x[:, :4],), order=2)


def test_every_fgrad_nn_activation_has_a_module():
    """Each activation function of fgrad.nn is wrapped by some module."""
    modules = {"relu": L.ReLU, "relu6": L.ReLU6, "leaky_relu": L.LeakyReLU, "elu": L.ELU,
               "celu": L.CELU, "selu": L.SELU, "gelu": L.GELU, "silu": L.SiLU,
               "swish": L.SiLU, "sigmoid": L.Sigmoid, "log_sigmoid": L.LogSigmoid,
               "softplus": L.Softplus, "soft_sign": L.Softsign, "hard_tanh": L.Hardtanh,
               "hard_sigmoid": L.Hardsigmoid, "hard_silu": L.Hardswish,
               "hard_swish": L.Hardswish, "tanh": L.Tanh, "mish": L.Mish, "glu": L.GLU,
               "softmax": L.Softmax, "log_softmax": L.LogSoftmax}
    not_activations = {"logsumexp", "one_hot", "standardize", "normalize"}
    assert set(nn.__all__) - not_activations == set(modules)
    x = np.linspace(-4, 4, 12).reshape(3, 4)
    for name, cls in modules.items():
        _close(cls()(x), getattr(nn, name)(x) if name != "gelu" else nn.gelu(x, False))


def test_softplus_linear_tail_has_the_right_gradient():
    sp = L.Softplus(beta=1.0, threshold=20.0)
    x = np.array([-30.0, 0.0, 25.0, 1000.0])
    _close(sp(x), np.array([np.log1p(np.exp(-30.0)), np.log(2.0), 25.0, 1000.0]))
    _close(fgrad.vmap(fgrad.grad(sp))(x), np.array([_sigmoid(-30.0), 0.5, 1.0, 1.0]))


def test_identity_and_lambda(rng):
    x = rng.standard_normal((2, 3))
    _close(_round_trip_and_jit(L.Identity(), x), x)
    lam = L.Lambda(nn.silu)
    _close(_round_trip_and_jit(lam, x), x * _sigmoid(x))
    check_grads(lambda v: lam(v), (x,), order=2)


def test_embedding_padding_idx_is_zero_and_gets_no_gradient(rng):
    emb = L.Embedding(6, 3, padding_idx=-2, key=fgrad.random.key(0), dtype=F64)
    assert emb.padding_idx == 4
    w = np.asarray(emb.weight)
    _close(w[4], np.zeros(3))
    assert np.all(np.abs(w[[0, 1, 2, 3, 5]]) > 0)
    ids = np.array([[4, 1, 4], [2, 4, 0]])
    _close(_round_trip_and_jit(emb, ids), w[ids])
    _close(emb(ids[0]), w[ids[0]])                                # one example
    g = fgrad.grad(lambda m: fnp.sum(m(ids) ** 2))(emb)
    want = np.zeros((6, 3))
    np.add.at(want, ids.ravel(), 2 * w[ids.ravel()])
    want[4] = 0.0
    _close(g.weight, want)
    # a pretrained (non-zero) padding row is looked up as it is, still without gradient
    emb2 = fgrad.tree.map(lambda p: p + 1.0, emb)
    _close(emb2(np.array([4])), w[[4]] + 1.0)
    _close(fgrad.grad(lambda m: fnp.sum(m(np.array([4, 4]))))(emb2).weight, np.zeros((6, 3)))
    # finite differences would see the padding row move the output, by design not
    # the gradient; away from it the derivatives are the plain lookup's
    check_grads(lambda m: m(np.array([[0, 1, 3], [2, 5, 0]])), (emb,), order=2)
    with pytest.raises(ValueError, match="padding_idx must be in"):
        L.Embedding(6, 3, padding_idx=6, key=fgrad.random.key(0))


def test_bilinear_matches_formula_and_pytorch_init(rng):
    bil = L.Bilinear(3, 4, 2, key=fgrad.random.key(1), dtype=F64)
    assert bil.weight.shape == (2, 3, 4) and bil.bias.shape == (2,)
    assert np.all(np.abs(np.asarray(bil.weight)) <= 1 / math.sqrt(3))
    x1, x2 = rng.standard_normal((5, 3)), rng.standard_normal((5, 4))
    w, b = np.asarray(bil.weight), np.asarray(bil.bias)
    want = np.array([[x1[n] @ w[o] @ x2[n] + b[o] for o in range(2)] for n in range(5)])
    _close(_round_trip_and_jit(bil, x1, x2), want)
    _close(bil(x1[0], x2[0]), want[0])
    check_grads(lambda m, a, c: m(a, c), (bil, x1[:2], x2[:2]), order=2)
    assert L.Bilinear(3, 4, 2, bias=False, key=fgrad.random.key(1)).bias is None
    with pytest.raises(ValueError, match="same leading shape"):
        bil(x1, x2[:3])


def test_unflatten(rng):
    x = rng.standard_normal((2, 12, 5))
    _close(_round_trip_and_jit(L.Unflatten(1, (3, 4)), x), x.reshape(2, 3, 4, 5))
    _close(L.Unflatten(-1, (5, 1))(x), x.reshape(2, 12, 5, 1))
    _close(L.Unflatten(0, (-1, 2))(x[0]), x[0].reshape(6, 2, 5))      # one example
    _close(L.Sequential(L.Flatten(), L.Unflatten(1, (12, 5)))(x), x)
    check_grads(lambda v: L.Unflatten(1, (3, 4))(v), (x,), order=2)
    with pytest.raises(ValueError, match=r"cannot split dimension 1 of size 12"):
        L.Unflatten(1, (5, 3))(x)
