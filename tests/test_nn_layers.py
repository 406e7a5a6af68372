"""fgrad_nn layers and functional forms: output shapes for one example and a batch,
derivatives by check_grads (float64, order 2) w.r.t. parameters and inputs, pytree
round trips, jit, convolution and pooling against direct NumPy loops, BatchNorm
train/eval semantics, Dropout scaling and determinism, and a jitted training step."""
import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
import fgrad.random
from fgrad.test_util import check_grads
from fgrad_nn import functional as F
from fgrad_nn import layers as L
from fgrad_nn import losses
from fgrad_nn.module import eval_mode, init_state
from tree_asserts import assert_trees_close

F64 = fnp.float64


def _key(i=0):
    return fgrad.random.key(i)


def _close(got, want, rtol=1e-10, atol=1e-12):
    got = np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def _round_trip_and_jit(layer, x):
    """The layer survives flatten/unflatten and gives the same output under jit."""
    leaves, treedef = fgrad.tree.flatten(layer)
    assert_trees_close(fgrad.tree.unflatten(treedef, leaves), layer)
    eager = layer(x)
    _close(fgrad.jit(lambda m, v: m(v))(layer, x), np.asarray(eager), rtol=1e-9)
    return eager


# ----------------------------------------------------------------------------
# NumPy references written as direct loops

def _np_conv2d(x, w, b, stride, padding, dilation):
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    ho = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    wo = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, o, ho, wo))
    for i in range(ho):
        for j in range(wo):
            for p in range(kh):
                for q in range(kw):
                    patch = xp[:, :, i * sh + p * dh, j * sw + q * dw]        # (n, c)
                    out[:, :, i, j] += patch @ w[:, :, p, q].T
    return out if b is None else out + b[None, :, None, None]


def _np_pool(x, kernel, stride, padding, dilation, reduce, pad_value, divisor=None):
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    n, c, h, wd = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=pad_value)
    ho = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    wo = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, c, ho, wo))
    for i in range(ho):
        for j in range(wo):
            window = [xp[:, :, i * sh + p * dh, j * sw + q * dw]
                      for p in range(kh) for q in range(kw)]
            out[:, :, i, j] = reduce(np.stack(window, -1), -1)
            if divisor is not None:
                rows = [i * sh + p for p in range(kh)]
                cols = [j * sw + q for q in range(kw)]
                inside = sum(ph <= r < ph + h for r in rows) * sum(pw <= s < pw + wd for s in cols)
                out[:, :, i, j] /= divisor if divisor != "valid" else inside
    return out


CONV_CASES = [  # (kernel, stride, padding, dilation)
    ((3, 3), (1, 1), (0, 0), (1, 1)),
    ((3, 3), (2, 2), (1, 1), (1, 1)),
    ((2, 3), (1, 2), (1, 0), (1, 1)),
    ((3, 2), (2, 1), (2, 1), (2, 1)),
    ((1, 1), (3, 3), (0, 0), (1, 1)),
]


@pytest.mark.parametrize("kernel,stride,padding,dilation", CONV_CASES)
def test_conv2d_matches_direct_loops(rng, kernel, stride, padding, dilation):
    x = rng.standard_normal((2, 3, 7, 8))
    w = rng.standard_normal((4, 3) + kernel)
    b = rng.standard_normal(4)
    _close(F.conv2d(x, w, b, stride, padding, dilation),
           _np_conv2d(x, w, b, stride, padding, dilation), rtol=1e-9)


def test_conv2d_same_and_valid_padding(rng):
    x = rng.standard_normal((1, 2, 6, 5))
    w = rng.standard_normal((3, 2, 3, 3))
    _close(F.conv2d(x, w, padding="same"), _np_conv2d(x, w, None, (1, 1), (1, 1), (1, 1)))
    _close(F.conv2d(x, w, padding="valid"), _np_conv2d(x, w, None, (1, 1), (0, 0), (1, 1)))
    _close(F.conv2d(x, w, padding="same", dilation=2),
           _np_conv2d(x, w, None, (1, 1), (2, 2), (2, 2)))


def _jax_same_pads(sizes, kernel, stride, dilation):
    """SAME as JAX (lax.padtype_to_pads) defines it: ceil(size / stride) outputs and the
    padding that needs, split with the extra one at the end."""
    pads = []
    for n, k, s, d in zip(sizes, kernel, stride, dilation):
        total = max((-(-n // s) - 1) * s + (k - 1) * d + 1 - n, 0)
        pads.append((total // 2, total - total // 2))
    return pads


def _scipy_conv2d(x, w, stride, pads, dilation):
    """Cross-correlation of explicitly zero-padded input with scipy, then strided."""
    from scipy.signal import correlate2d
    xp = np.pad(x, ((0, 0), (0, 0), *pads))
    kh, kw = w.shape[2:]
    wd = np.zeros(w.shape[:2] + ((kh - 1) * dilation[0] + 1, (kw - 1) * dilation[1] + 1))
    wd[:, :, ::dilation[0], ::dilation[1]] = w
    return np.array([[sum(correlate2d(xp[i, c], wd[o, c], mode="valid")
                          for c in range(x.shape[1]))[::stride[0], ::stride[1]]
                      for o in range(w.shape[0])] for i in range(x.shape[0])])


def test_jax_same_pads_by_hand():
    assert _jax_same_pads((4, 5), (3, 3), (2, 2), (1, 1)) == [(0, 1), (1, 1)]
    assert _jax_same_pads((6, 7), (4, 1), (3, 3), (1, 1)) == [(0, 1), (0, 0)]
    assert _jax_same_pads((5, 6), (3, 3), (1, 1), (2, 2)) == [(2, 2), (2, 2)]


@pytest.mark.parametrize("stride", [1, 2, 3, (2, 3)])
@pytest.mark.parametrize("size", [(7, 8), (6, 5), (1, 4)])
@pytest.mark.parametrize("kernel,dilation", [((3, 3), (1, 1)), ((2, 4), (1, 1)),
                                             ((3, 2), (2, 1))])
def test_conv2d_same_padding_for_every_stride(rng, stride, size, kernel, dilation):
    x = rng.standard_normal((2, 2) + size)
    w = rng.standard_normal((3, 2) + kernel)
    stride2 = stride if isinstance(stride, tuple) else (stride, stride)
    y = np.asarray(F.conv2d(x, w, None, stride, "same", dilation))
    assert y.shape[2:] == tuple(-(-n // s) for n, s in zip(size, stride2))   # ceil
    pads = _jax_same_pads(size, kernel, stride2, dilation)
    _close(y, _scipy_conv2d(x, w, stride2, pads, dilation), rtol=1e-9)


def test_conv2d_layer_same_padding_with_stride(rng):
    conv = L.Conv2d(2, 3, kernel_size=3, stride=2, padding="same", key=_key(), dtype=F64)
    x = rng.standard_normal((2, 2, 6, 7))
    y = _round_trip_and_jit(conv, x)
    assert y.shape == (2, 3, 3, 4)
    pads = _jax_same_pads((6, 7), (3, 3), (2, 2), (1, 1))
    want = _scipy_conv2d(x, np.asarray(conv.weight), (2, 2), pads, (1, 1))
    _close(y, want + np.asarray(conv.bias)[None, :, None, None], rtol=1e-9)
    assert not np.allclose(np.asarray(y), np.asarray(F.conv2d(x, conv.weight, conv.bias, 2, 1)))


def test_padding_and_size_arguments_are_checked():
    key = _key()
    for bad in ("full", "SAME_LOWER", 1.5, (1, 2, 3), (1.0, 1)):
        with pytest.raises(ValueError, match="padding must be"):
            L.Conv2d(1, 1, 3, padding=bad, key=key)
    with pytest.raises(ValueError, match=r"stride must be a non-negative int or a pair"):
        L.Conv2d(1, 1, 3, stride=1.5, key=key)
    with pytest.raises(ValueError, match=r"kernel_size must be a non-negative int"):
        L.Conv2d(1, 1, (3, "3"), key=key)
    with pytest.raises(ValueError, match=r"max_pool2d: padding must be a non-negative int"):
        F.max_pool2d(np.zeros((1, 1, 4, 4)), 2, padding="same")
    x = np.ones((1, 1, 5, 5))
    assert np.asarray(L.Conv2d(1, 1, 3, padding="SAME", key=key)(x)).shape == (1, 1, 5, 5)


def test_conv2d_errors(rng):
    with pytest.raises(ValueError, match=r"weight of shape \(4, 2, 3, 3\).*in_channels=3"):
        F.conv2d(np.zeros((1, 3, 5, 5)), np.zeros((4, 2, 3, 3)))
    with pytest.raises(ValueError, match=r"\(N, C, H, W\) or \(C, H, W\), got shape \(5, 5\)"):
        F.conv2d(np.zeros((5, 5)), np.zeros((1, 1, 3, 3)))
    with pytest.raises(ValueError, match="smaller than the dilated kernel"):
        F.conv2d(np.zeros((1, 1, 2, 2)), np.zeros((1, 1, 3, 3)))


def test_conv2d_layer_shapes_init_and_grads(rng):
    conv = L.Conv2d(2, 3, kernel_size=3, stride=2, padding=1, key=_key(), dtype=F64)
    assert conv.weight.shape == (3, 2, 3, 3) and conv.bias.shape == (3,)
    bound = 1 / np.sqrt(2 * 9)
    assert np.all(np.abs(np.asarray(conv.weight)) <= bound)
    assert np.abs(np.asarray(conv.weight)).max() > 0.5 * bound
    x = rng.standard_normal((2, 2, 5, 6))
    y = _round_trip_and_jit(conv, x)
    assert y.shape == (2, 3, 3, 3)
    assert conv(x[0]).shape == (3, 3, 3)                      # one example (C, H, W)
    _close(conv(x[0]), np.asarray(y)[0])
    _close(fgrad.vmap(conv)(x), np.asarray(y))
    check_grads(lambda m, v: m(v), (conv, x[:1, :, :4, :4]), order=2)
    nobias = L.Conv2d(1, 2, (2, 3), bias=False, key=_key(), dtype=F64)
    assert nobias.bias is None and nobias(np.ones((1, 4, 4))).shape == (2, 3, 2)


POOL_CASES = [  # (kernel, stride, padding, dilation)
    ((2, 2), (2, 2), (0, 0), (1, 1)),
    ((3, 3), (1, 1), (1, 1), (1, 1)),
    ((3, 2), (2, 1), (1, 0), (1, 1)),
    ((2, 2), (1, 2), (1, 1), (2, 1)),
]


@pytest.mark.parametrize("kernel,stride,padding,dilation", POOL_CASES)
def test_max_pool_matches_direct_loops(rng, kernel, stride, padding, dilation):
    x = rng.standard_normal((2, 3, 7, 6))
    _close(F.max_pool2d(x, kernel, stride, padding, dilation),
           _np_pool(x, kernel, stride, padding, dilation, np.max, -np.inf))


@pytest.mark.parametrize("kernel,stride,padding",
                         [case[:3] for case in POOL_CASES if case[3] == (1, 1)])
def test_avg_pool_matches_direct_loops(rng, kernel, stride, padding):
    dilation = (1, 1)                                    # AvgPool2d has no dilation
    x = rng.standard_normal((2, 3, 7, 6))
    area = kernel[0] * kernel[1]
    _close(F.avg_pool2d(x, kernel, stride, padding),
           _np_pool(x, kernel, stride, padding, dilation, np.sum, 0.0, area))
    _close(F.avg_pool2d(x, kernel, stride, padding, count_include_pad=False),
           _np_pool(x, kernel, stride, padding, dilation, np.sum, 0.0, "valid"))


def test_pool_layers_shapes_and_grads(rng):
    x = rng.standard_normal((2, 3, 6, 6))
    for pool in (L.MaxPool2d(2), L.AvgPool2d(3, stride=2, padding=1),
                 L.MaxPool2d(3, stride=1, padding=1, dilation=1)):
        y = _round_trip_and_jit(pool, x)
        assert pool(x[0]).shape == y.shape[1:]
        _close(pool(x[1]), np.asarray(y)[1])
        check_grads(lambda v: pool(v), (x[:1, :2],), order=2)
    assert L.MaxPool2d(2)(x).shape == (2, 3, 3, 3)
    with pytest.raises(ValueError, match="at most half the kernel size"):
        F.max_pool2d(x, 2, padding=2)


def test_linear_shapes_init_and_grads(rng):
    lin = L.Linear(4, 3, key=_key(), dtype=F64)
    assert lin.weight.shape == (3, 4) and lin.bias.shape == (3,)
    assert np.all(np.abs(np.asarray(lin.weight)) <= 0.5)           # 1/sqrt(4)
    x = rng.standard_normal((5, 4))
    y = _round_trip_and_jit(lin, x)
    _close(y, x @ np.asarray(lin.weight).T + np.asarray(lin.bias))
    _close(lin(x[0]), np.asarray(y)[0])
    assert lin(rng.standard_normal((2, 5, 4))).shape == (2, 5, 3)
    check_grads(lambda m, v: m(v), (lin, x[:2]), order=2)
    assert L.Linear(4, 3, bias=False, key=_key()).bias is None
    lin32 = L.Linear(4, 3, key=_key())
    assert lin32.weight.dtype == np.float32 and lin32(x.astype(np.float32)).dtype == np.float32
    with pytest.raises(ValueError, match=r"input of shape \(5, 3\).*in_features=4"):
        lin(np.zeros((5, 3)))
    # different keys give different weights, the same key the same weights
    assert not np.allclose(np.asarray(L.Linear(4, 3, key=_key(1)).weight),
                           np.asarray(L.Linear(4, 3, key=_key(2)).weight))
    assert_trees_close(L.Linear(4, 3, key=_key(1)), L.Linear(4, 3, key=_key(1)))


def test_flatten(rng):
    x = rng.standard_normal((2, 3, 4, 5))
    assert L.Flatten()(x).shape == (2, 60)
    assert L.Flatten(start_dim=0)(x[0]).shape == (60,)
    assert L.Flatten(1, 2)(x).shape == (2, 12, 5)
    _close(fgrad.vmap(L.Flatten(start_dim=0))(x), x.reshape(2, 60))
    with pytest.raises(ValueError, match=r"do not fit an input of shape \(2, 3\)"):
        L.Flatten(start_dim=2)(np.zeros((2, 3)))


def test_embedding(rng):
    emb = L.Embedding(10, 3, key=_key(), dtype=F64)
    assert emb.weight.shape == (10, 3)
    ids = np.array([[1, 9], [0, 1]])
    y = _round_trip_and_jit(emb, ids)
    _close(y, np.asarray(emb.weight)[ids])
    assert emb(np.int32(4)).shape == (3,)
    check_grads(lambda m: m(ids), (emb,), order=2)
    g = fgrad.grad(lambda m: fnp.sum(m(ids)))(emb)
    _close(g.weight, np.bincount(ids.ravel(), minlength=10)[:, None] * np.ones((1, 3)))
    with pytest.raises(TypeError, match="ids must be integers"):
        emb(np.zeros(2))


def test_layer_norm_matches_numpy(rng):
    x = rng.standard_normal((3, 2, 4)) * 3 + 1
    ln = L.LayerNorm((2, 4), dtype=F64)
    ln = fgrad.tree.map(lambda p: p + rng.standard_normal(p.shape), ln)   # non-trivial affine
    mean = x.mean(axis=(1, 2), keepdims=True)
    var = x.var(axis=(1, 2), keepdims=True)
    want = (x - mean) / np.sqrt(var + 1e-5) * np.asarray(ln.weight) + np.asarray(ln.bias)
    _close(_round_trip_and_jit(ln, x), want, rtol=1e-9)
    _close(ln(x[1]), want[1], rtol=1e-9)
    check_grads(lambda m, v: m(v), (ln, x[:2]), order=2)
    assert L.LayerNorm(4, elementwise_affine=False)(np.ones((2, 4))).shape == (2, 4)
    with pytest.raises(ValueError, match=r"does not end in normalized_shape \(2, 4\)"):
        ln(np.zeros((4, 2)))


def test_batch_norm_train_then_eval_semantics(rng):
    bn = L.BatchNorm(3, momentum=0.2, dtype=F64)
    bn = fgrad.tree.map(lambda p: p + rng.standard_normal(p.shape), bn)
    state = bn.init_state()
    w, b = np.asarray(bn.weight), np.asarray(bn.bias)
    running_mean, running_var = np.zeros(3), np.ones(3)
    for step in range(3):
        x = rng.standard_normal((5, 3, 2, 2)) * (step + 1) + step
        y, state = bn(x, state)
        mean, var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
        c = (1, 3, 1, 1)
        want = (x - mean.reshape(c)) / np.sqrt(var.reshape(c) + 1e-5) * w.reshape(c)
        _close(y, want + b.reshape(c), rtol=1e-9)
        running_mean = 0.8 * running_mean + 0.2 * mean
        running_var = 0.8 * running_var + 0.2 * x.var(axis=(0, 2, 3), ddof=1)
        _close(state.running_mean, running_mean)
        _close(state.running_var, running_var)
    # eval mode: running statistics, state unchanged, single-valued batches allowed
    ev = eval_mode(bn)
    x = rng.standard_normal((1, 3, 2, 2))
    y, same = ev(x, state)
    c = (1, 3, 1, 1)
    want = ((x - running_mean.reshape(c)) / np.sqrt(running_var.reshape(c) + 1e-5)
            * w.reshape(c) + b.reshape(c))
    _close(y, want, rtol=1e-9)
    assert same is state or all(a is b_ for a, b_ in zip(same, state))
    with pytest.raises(ValueError, match="more than one value per channel"):
        bn(np.zeros((1, 3)), state)


@pytest.mark.parametrize("jit", [False, True])
def test_batch_norm_momentum_none_is_a_cumulative_average(rng, jit):
    """PyTorch's momentum=None: running statistics are the plain mean of the batch
    statistics seen in training (momentum = 1 / batches so far)."""
    bn = L.BatchNorm(3, momentum=None, dtype=F64)
    state = bn.init_state()
    assert int(state.num_batches_tracked) == 0
    call = fgrad.jit(lambda m, v, s: m(v, s)) if jit else (lambda m, v, s: m(v, s))
    means, variances = [], []
    for step in range(4):
        x = rng.standard_normal((6, 3, 2)) * (step + 1) + 3 * step
        _, state = call(bn, x, state)
        means.append(x.mean(axis=(0, 2)))
        variances.append(x.var(axis=(0, 2), ddof=1))
        _close(state.running_mean, np.mean(means, axis=0), rtol=1e-12)
        _close(state.running_var, np.mean(variances, axis=0), rtol=1e-12)
        assert int(state.num_batches_tracked) == step + 1
    _, after_eval = call(eval_mode(bn), x, state)
    assert int(after_eval.num_batches_tracked) == 4
    _close(after_eval.running_mean, state.running_mean, rtol=0)
    with pytest.raises(TypeError, match="has no num_batches_tracked"):
        bn(x, L.BatchNormState(state.running_mean, state.running_var))
    with pytest.raises(ValueError, match=r"momentum must be a number in \[0, 1\], or None"):
        L.BatchNorm(3, momentum="0.1")
    with pytest.raises(TypeError, match="use the BatchNorm layer"):
        F.batch_norm(x, np.zeros(3), np.ones(3), momentum=None)


def test_batch_norm_1d_grads_and_jit(rng):
    bn = L.BatchNorm(2, dtype=F64)
    bn = fgrad.tree.map(lambda p: p + rng.standard_normal(p.shape), bn)
    state = bn.init_state()
    x = rng.standard_normal((4, 2))
    check_grads(lambda m, v: m(v, state)[0], (bn, x), order=2)
    check_grads(lambda m, v: eval_mode(m)(v, state)[0], (bn, x), order=2)
    eager = bn(x, state)
    assert_trees_close(fgrad.jit(lambda m, v, s: m(v, s))(bn, x, state), eager, rtol=1e-9)
    with pytest.raises(TypeError, match="expected the state from bn.init_state"):
        bn(x, None)
    with pytest.raises(ValueError, match=r"C = 2 channels.*got input shape \(4, 3\)"):
        bn(np.zeros((4, 3)), state)


def test_batch_norm_training_gradient_is_the_chain_rule(rng):
    """Training-mode batch_norm normalises with its own rule (the cotangent's two
    statistics, not the chain rule through mean, variance and rsqrt): its
    values and gradients equal those of the formula written out, order 2 too."""
    x = rng.standard_normal((3, 2, 4, 5))
    gamma, beta = rng.standard_normal(2), rng.standard_normal(2)

    def rule(x, gamma, beta):
        return F.batch_norm(x, np.zeros(2), np.ones(2), gamma, beta, training=True)[0]

    def formula(x, gamma, beta):
        mean = fnp.mean(x, axis=(0, 2, 3), keepdims=True)
        var = fnp.mean((x - mean) ** 2, axis=(0, 2, 3), keepdims=True)
        return ((x - mean) / fnp.sqrt(var + 1e-5) * gamma[None, :, None, None]
                + beta[None, :, None, None])
    ct = rng.standard_normal(x.shape)
    np.testing.assert_allclose(rule(x, gamma, beta), formula(x, gamma, beta), rtol=1e-12)
    for got, want in zip(fgrad.vjp(rule, x, gamma, beta)[1](ct),
                         fgrad.vjp(formula, x, gamma, beta)[1](ct)):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    check_grads(rule, (x, gamma, beta), order=2, modes=("fwd", "rev"))


def test_dropout_scaling_and_determinism(rng):
    x = rng.uniform(1, 2, (200, 50))
    drop = L.Dropout(0.3)
    y1 = np.asarray(drop(x, key=_key(1)))
    y2 = np.asarray(drop(x, key=_key(1)))
    y3 = np.asarray(drop(x, key=_key(2)))
    np.testing.assert_array_equal(y1, y2)                       # same key, same mask
    assert not np.array_equal(y1 == 0, y3 == 0)                 # new key, new mask
    kept = y1 != 0
    _close(y1[kept], x[kept] / 0.7)
    assert abs(kept.mean() - 0.7) < 0.02                        # 10000 draws: sd 0.005
    _close(fgrad.jit(lambda m, v, k: m(v, key=k))(drop, x, _key(1)), y1)
    _close(eval_mode(drop)(x), x)                               # identity, no key needed
    _close(L.Dropout(0.0)(x), x)
    _close(L.Dropout(1.0)(x, key=_key()), np.zeros_like(x))
    g = fgrad.grad(lambda v: fnp.sum(drop(v, key=_key(1))))(x)
    _close(g, kept / 0.7)
    check_grads(lambda v: drop(v, key=_key(3)), (x[:3, :4],), order=2)
    with pytest.raises(ValueError, match="needs a PRNG key"):
        drop(x)
    with pytest.raises(ValueError, match=r"p must be in \[0, 1\]"):
        L.Dropout(1.5)


ACTIVATIONS = [
    (L.ReLU(), lambda x: np.maximum(x, 0)),
    (L.Sigmoid(), lambda x: 1 / (1 + np.exp(-x))),
    (L.Tanh(), np.tanh),
    (L.GELU(), lambda x: 0.5 * x * (1 + np.vectorize(__import__("math").erf)(x / np.sqrt(2)))),
    (L.GELU(approximate=True),
     lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))),
    (L.Softmax(), lambda x: np.exp(x) / np.exp(x).sum(-1, keepdims=True)),
    (L.Softmax(axis=0), lambda x: np.exp(x) / np.exp(x).sum(0, keepdims=True)),
    (L.Identity(), lambda x: x),
]


@pytest.mark.parametrize("module,ref", ACTIVATIONS, ids=lambda a: type(a).__name__)
def test_activation_modules(rng, module, ref):
    x = rng.standard_normal((3, 4))
    x = np.where(np.abs(x) < 0.05, 0.3, x)                      # away from ReLU's kink
    _close(_round_trip_and_jit(module, x), ref(x), rtol=1e-9)
    check_grads(lambda v: module(v), (x,), order=2)


def test_gelu_takes_pytorchs_spellings_and_refuses_others(rng):
    x = rng.standard_normal((3, 4))
    exact = 0.5 * x * (1 + np.vectorize(__import__("math").erf)(x / np.sqrt(2)))
    tanh_form = L.GELU(approximate=True)(x)
    for spelling in ("none", False, np.bool_(False)):
        assert L.GELU(approximate=spelling).approximate is False
        _close(L.GELU(approximate=spelling)(x), exact, rtol=1e-12)
    for spelling in ("tanh", True, np.bool_(True)):
        assert L.GELU(approximate=spelling).approximate is True
        assert np.asarray(L.GELU(approximate=spelling)(x)).tobytes() == \
            np.asarray(tanh_form).tobytes()
    for bad in ("None", "exact", "", 1, None):
        with pytest.raises(ValueError, match="GELU: approximate must be False or 'none'"):
            L.GELU(approximate=bad)


@pytest.mark.parametrize("make,name", [
    (lambda v: L.Linear(2, 3, bias=v, key=_key()), "Linear: bias"),
    (lambda v: L.Conv2d(1, 1, 3, bias=v, key=_key()), "Conv2d: bias"),
    (lambda v: L.MLP([2, 3], bias=v, key=_key()), "Linear: bias"),
    (lambda v: L.LayerNorm(3, elementwise_affine=v), "LayerNorm: elementwise_affine"),
    (lambda v: L.BatchNorm(3, affine=v), "BatchNorm: affine"),
    (lambda v: L.BatchNorm(3, training=v), "BatchNorm: training"),
    (lambda v: L.Dropout(0.5, training=v), "Dropout: training"),
    (lambda v: L.AvgPool2d(2, count_include_pad=v), "AvgPool2d: count_include_pad"),
])
def test_flags_refuse_strings_and_other_non_bools(make, name):
    """'False' is truthy: a flag given as a string (e.g. from a config file) must
    not silently mean True."""
    for bad in ("False", "no", None, 0):
        with pytest.raises(ValueError, match=f"{name} must be True or False"):
            make(bad)
    make(np.bool_(False)), make(True)


def test_activation_functions_are_fgrad_nn_functions():
    assert (L.relu, L.gelu, L.sigmoid, L.tanh, L.softmax) == (
        fgrad.nn.relu, fgrad.nn.gelu, fgrad.nn.sigmoid, fgrad.nn.tanh, fgrad.nn.softmax)


def test_sequential_refuses_a_callable_pytree_that_is_not_a_module():
    """Plain functions become Lambda modules (static); a callable pytree holding
    arrays must not, or its arrays would be hidden from grad as configuration."""
    import dataclasses

    @fgrad.tree.register_dataclass
    @dataclasses.dataclass(frozen=True)
    class Scale:
        factor: object

        def __call__(self, x):
            return x * self.factor

    with pytest.raises(TypeError, match="Scale, a callable pytree.*subclass of fgrad_nn.Module"):
        L.Sequential(L.Identity(), Scale(fnp.asarray(2.0)))
    assert isinstance(L.Sequential(fnp.tanh).layers[0], L.Lambda)


def test_sequential_and_residual(rng):
    k1, k2, k3 = fgrad.random.split(_key(), 3)
    model = L.Sequential(L.Linear(4, 5, key=k1, dtype=F64), fnp.tanh,
                         L.Residual(L.Linear(5, 5, key=k2, dtype=F64)),
                         L.Linear(5, 2, key=k3, dtype=F64))
    assert len(model) == 4 and isinstance(model[1], L.Lambda)
    x = rng.standard_normal((3, 4))
    h = np.tanh(np.asarray(model[0](x)))
    h = h + np.asarray(model[2].fn(h))
    _close(_round_trip_and_jit(model, x), np.asarray(model[3](h)), rtol=1e-9)
    _close(fgrad.vmap(model)(x), np.asarray(model(x)), rtol=1e-9)
    check_grads(lambda m, v: m(v), (model, x[:2]), order=2)
    with pytest.raises(ValueError, match=r"maps shape \(3, 4\) to \(3, 2\)"):
        L.Residual(L.Linear(4, 2, key=k1))(np.zeros((3, 4)))


def test_stateful_sequential_threads_state_and_keys(rng):
    model = L.Sequential(L.Linear(3, 4, key=_key(1), dtype=F64), L.BatchNorm(4, dtype=F64),
                         L.Dropout(0.5), L.ReLU())
    state = init_state(model)
    x = rng.standard_normal((6, 3))
    y, new_state = model(x, state, key=_key(2))
    h, bn_state = model[1](model[0](x), state[1])
    keys = fgrad.random.split(_key(2), 4)
    _close(y, np.asarray(model[3](model[2](h, key=keys[2]))))
    assert_trees_close(new_state[1], bn_state)
    assert new_state[0] is None and new_state[2] is None
    with pytest.raises(TypeError, match="holds a stateful layer"):
        model(x, key=_key(2))


def test_mlp(rng):
    mlp = L.MLP([3, 8, 8, 2], key=_key(), dtype=F64)
    assert [lin.weight.shape for lin in mlp.layers] == [(8, 3), (8, 8), (2, 8)]
    x = rng.standard_normal((5, 3))
    h = x
    for lin in mlp.layers[:-1]:
        h = np.maximum(h @ np.asarray(lin.weight).T + np.asarray(lin.bias), 0)
    want = h @ np.asarray(mlp.layers[-1].weight).T + np.asarray(mlp.layers[-1].bias)
    _close(_round_trip_and_jit(mlp, x), want, rtol=1e-9)
    _close(mlp(x[2]), want[2], rtol=1e-9)
    soft = L.MLP([3, 4], activation=fnp.tanh, final_activation=fgrad.nn.softmax, key=_key())
    _close(np.asarray(soft(x)).sum(-1), np.ones(5), rtol=1e-6)
    tanh_mlp = L.MLP([3, 4, 2], activation=fnp.tanh, key=_key(), dtype=F64)
    check_grads(lambda m, v: m(v), (tanh_mlp, x[:2]), order=2)


def test_res_mlp_block(rng):
    block = L.ResMLPBlock(4, 6, activation=fnp.tanh, dropout=0.2, key=_key(), dtype=F64)
    x = rng.standard_normal((3, 4))
    y = block(x, key=_key(5))
    norm, lin1, act, lin2, drop = block.fn.layers
    want = x + np.asarray(drop(lin2(act(lin1(norm(x)))), key=fgrad.random.split(_key(5), 5)[4]))
    _close(y, want, rtol=1e-9)
    ev = eval_mode(block)
    _close(ev(x), x + np.asarray(lin2(act(lin1(norm(x))))), rtol=1e-9)
    _close(ev(x[0]), np.asarray(ev(x))[0], rtol=1e-9)
    check_grads(lambda m, v: m(v), (ev, x[:2]), order=2)
    bn_block = L.ResMLPBlock(4, 6, norm="batch", key=_key(), dtype=F64)
    y, state = bn_block(x, init_state(bn_block))
    assert y.shape == (3, 4) and state[0].running_mean.shape == (4,)


def _small_cnn(key):
    k1, k2 = fgrad.random.split(key)
    return L.Sequential(L.Conv2d(1, 2, kernel_size=3, padding=1, key=k1, dtype=F64),
                        L.BatchNorm(2, dtype=F64), L.ReLU(), L.MaxPool2d(2), L.Flatten(),
                        L.Dropout(0.25), L.Linear(2 * 3 * 3, 3, key=k2, dtype=F64))


def test_training_step_under_jit_equals_eager(rng):
    model = _small_cnn(_key())
    state = init_state(model)
    x = rng.standard_normal((4, 1, 6, 6))
    labels = np.array([0, 2, 1, 2])

    def loss_fn(m, s, v, y, key):
        logits, s = m(v, s, key=key)
        return losses.softmax_cross_entropy(logits, y), s

    def step(m, s, v, y, key):
        (loss, s), g = fgrad.value_and_grad(loss_fn, has_aux=True)(m, s, v, y, key)
        m = fgrad.tree.map(lambda p, gp: p - 0.1 * gp, m, g)
        return m, s, loss

    eager = step(model, state, x, labels, _key(7))
    jitted = fgrad.jit(step)(model, state, x, labels, _key(7))
    assert_trees_close(jitted, eager, rtol=1e-9, atol=1e-12)
    new_model, _, loss = eager
    assert type(new_model) is L.Sequential and np.isfinite(float(loss))
    assert not np.allclose(np.asarray(new_model[0].weight), np.asarray(model[0].weight))
    # a second step with the updated model and state still agrees
    assert_trees_close(fgrad.jit(step)(*jitted[:2], x, labels, _key(8)),
                       step(*eager[:2], x, labels, _key(8)), rtol=1e-9, atol=1e-12)
