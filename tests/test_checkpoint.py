"""fgrad.checkpoint / remat: the forward pass is recomputed in the backward pass."""
import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad import lax
from fgrad.test_util import check_grads


def _block(x, w):
    y = fnp.sin(x) * fnp.exp(w * x)
    return fnp.tanh(y * x + w)


def _loss(x, w):
    return (_block(x, w) ** 2).sum()


def _ckpt_loss(x, w):
    return (fgrad.checkpoint(_block)(x, w) ** 2).sum()


X = np.linspace(0.1, 1.0, 4)
W = np.float64(0.3)


def test_identical_values_and_gradients():
    np.testing.assert_array_equal(np.asarray(_ckpt_loss(X, W)), np.asarray(_loss(X, W)))
    g, g_ref = fgrad.grad(_ckpt_loss, (0, 1))(X, W), fgrad.grad(_loss, (0, 1))(X, W)
    for a, b in zip(g, g_ref):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-14)
    g_jit = fgrad.jit(fgrad.grad(_ckpt_loss, (0, 1)))(X, W)
    for a, b in zip(g_jit, g_ref):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12)
    check_grads(_ckpt_loss, (X, W), order=2)
    assert fgrad.remat is fgrad.checkpoint


def _residuals(f, *args):
    """The arrays the linearized function keeps from the forward pass."""
    _, f_jvp = fgrad.linearize(f, *args)
    return fgrad.make_jaxpr(f_jvp)(*args).jaxpr.constvars


def test_only_the_inputs_are_residuals():
    plain = _residuals(_block, X, W)
    ckpt = _residuals(fgrad.checkpoint(_block), X, W)
    assert len(plain) > 2
    assert [v.aval.shape for v in ckpt] == [(4,)]  # x (w is a scalar, kept inline)
    _, pullback = fgrad.vjp(fgrad.checkpoint(_block), X, W)
    consts = fgrad.make_jaxpr(pullback)(np.ones(4)).jaxpr.constvars
    assert [v.aval.shape for v in consts] == [(4,)]


def test_jit_keeps_the_recomputation_apart():
    text = fgrad.jit(fgrad.grad(_ckpt_loss)).lower(X, W).as_text()
    assert "call:checkpoint" in text


def test_composes_with_vmap_jvp_scan_and_static_args():
    xs = np.stack([X, 2 * X])
    np.testing.assert_allclose(
        np.asarray(fgrad.vmap(fgrad.grad(_ckpt_loss), (0, None))(xs, W)),
        np.stack([np.asarray(fgrad.grad(_loss)(x, W)) for x in xs]), rtol=1e-12)
    out, t = fgrad.jvp(_ckpt_loss, (X, W), (np.ones(4), np.float64(1)))
    out_ref, t_ref = fgrad.jvp(_loss, (X, W), (np.ones(4), np.float64(1)))
    np.testing.assert_allclose(np.asarray(t), np.asarray(t_ref), rtol=1e-12)

    def rnn(w, xs, remat):
        cell = lambda h, x: (fnp.tanh(w * h + x), h)  # noqa: E731
        cell = fgrad.checkpoint(cell) if remat else cell
        h, hs = lax.scan(cell, 0.0 * w, xs)
        return h + hs.sum()

    seq = np.linspace(-1, 1, 20)
    g = fgrad.grad(rnn)(W, seq, True)
    np.testing.assert_allclose(np.asarray(g), np.asarray(fgrad.grad(rnn)(W, seq, False)),
                               rtol=1e-12)

    def scaled(x, n):
        return fnp.sin(x) * n

    f = fgrad.checkpoint(scaled, static_argnums=(1,))
    np.testing.assert_allclose(np.asarray(fgrad.grad(lambda x: f(x, 3).sum())(X)),
                               3 * np.cos(X), rtol=1e-14)


def test_bad_arguments():
    with pytest.raises(TypeError, match="expected a function"):
        fgrad.checkpoint(3)
