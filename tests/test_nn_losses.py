"""fgrad_nn.losses: values against plain NumPy formulas, reductions, stability at
extreme inputs, derivatives by check_grads, clear errors on bad shapes/dtypes."""
import numpy as np
import pytest
import scipy.special as sp

import fgrad
import fgrad.numpy as fnp
from fgrad.test_util import check_grads
from fgrad_nn import losses


def _np_log_softmax(x):
    return x - sp.logsumexp(x, axis=-1, keepdims=True)


def _reduce(loss, reduction):
    return {"mean": np.mean, "sum": np.sum, "none": lambda v: v}[reduction](loss)


def _close(got, want, rtol=1e-10, atol=1e-12):
    got = np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_cross_entropy_integer_labels(rng, reduction, smoothing):
    logits = rng.standard_normal((5, 4))
    labels = rng.integers(0, 4, 5)
    target = (1 - smoothing) * np.eye(4)[labels] + smoothing / 4
    want = _reduce(-(target * _np_log_softmax(logits)).sum(-1), reduction)
    for fn in (losses.softmax_cross_entropy, losses.softmax_cross_entropy_with_integer_labels):
        _close(fn(logits, labels, reduction=reduction, label_smoothing=smoothing), want)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_probability_targets(rng, reduction):
    logits = rng.standard_normal((2, 3, 5))
    probs = sp.softmax(rng.standard_normal((2, 3, 5)), axis=-1)
    want = _reduce(-(probs * _np_log_softmax(logits)).sum(-1), reduction)
    _close(losses.softmax_cross_entropy(logits, probs, reduction=reduction), want)


def test_cross_entropy_one_hot_equals_integer_labels(rng):
    logits = rng.standard_normal((6, 3))
    labels = rng.integers(0, 3, 6)
    _close(losses.softmax_cross_entropy(logits, np.eye(3)[labels]),
           np.asarray(losses.softmax_cross_entropy(logits, labels)))


def test_cross_entropy_is_stable_at_large_logits():
    logits = np.array([[1e4, -1e4, 0.0], [-5e3, 5e3, 5e3]])
    labels = np.array([1, 2])
    loss = np.asarray(losses.softmax_cross_entropy(logits, labels, reduction="none"))
    _close(loss, [2e4, np.log(2)])
    g = np.asarray(fgrad.grad(lambda z: losses.softmax_cross_entropy(z, labels))(logits))
    assert np.all(np.isfinite(g))
    _close(g, (sp.softmax(logits, -1) - np.eye(3)[labels]) / 2)


def test_cross_entropy_grads(rng):
    logits = rng.standard_normal((3, 4))
    labels = rng.integers(0, 4, 3)
    probs = sp.softmax(rng.standard_normal((3, 4)), axis=-1)
    check_grads(lambda z: losses.softmax_cross_entropy(z, labels, label_smoothing=0.2),
                (logits,), order=2)
    check_grads(lambda z, p: losses.softmax_cross_entropy(z, p, reduction="sum"),
                (logits, probs), order=2)


def test_cross_entropy_errors(rng):
    logits = rng.standard_normal((4, 3))
    with pytest.raises(ValueError, match=r"labels of shape \(3,\).*logits of shape \(4, 3\)"):
        losses.softmax_cross_entropy(logits, np.zeros(3, np.int32))
    with pytest.raises(ValueError, match=r"logits of shape \(4, 3\).*targets of shape \(4, 2\)"):
        losses.softmax_cross_entropy(logits, np.zeros((4, 2)))
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 3\)"):
        losses.softmax_cross_entropy(logits, np.array([0, 1, 2, 3]))
    with pytest.raises(TypeError, match="logits must be floating point"):
        losses.softmax_cross_entropy(np.zeros((4, 3), np.int32), np.zeros(4, np.int32))
    with pytest.raises(ValueError, match="reduction must be one of"):
        losses.softmax_cross_entropy(logits, np.zeros(4, np.int32), reduction="avg")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy_with_logits(rng, reduction):
    x = rng.standard_normal((4, 3)) * 3
    y = rng.uniform(0, 1, (4, 3))
    p = sp.expit(x)
    want = _reduce(-(y * np.log(p) + (1 - y) * np.log(1 - p)), reduction)
    _close(losses.binary_cross_entropy_with_logits(x, y, reduction=reduction), want)


def test_binary_cross_entropy_with_logits_is_stable():
    x = np.array([1e4, -1e4, 800.0, -800.0, 0.0])
    y = np.array([0.0, 1.0, 1.0, 0.0, 1.0])
    loss = np.asarray(losses.binary_cross_entropy_with_logits(x, y, reduction="none"))
    _close(loss, [1e4, 1e4, 0.0, 0.0, np.log(2)])
    g = np.asarray(fgrad.grad(
        lambda z: losses.binary_cross_entropy_with_logits(z, y, reduction="sum"))(x))
    _close(g, sp.expit(x) - y)


def test_binary_cross_entropy_with_logits_grads(rng):
    x = rng.standard_normal((3, 2))
    y = rng.uniform(0, 1, (3, 2))
    check_grads(lambda z, t: losses.binary_cross_entropy_with_logits(z, t), (x, y), order=2)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy_from_probabilities(rng, reduction):
    p = rng.uniform(0.05, 0.95, (5,))
    y = rng.uniform(0, 1, (5,))
    want = _reduce(-(y * np.log(p) + (1 - y) * np.log(1 - p)), reduction)
    _close(losses.binary_cross_entropy(p, y, reduction=reduction), want)


def test_binary_cross_entropy_clips_to_eps():
    p = np.array([0.0, 1.0, 0.0])
    y = np.array([1.0, 0.0, 0.0])
    loss = np.asarray(losses.binary_cross_entropy(p, y, reduction="none", eps=1e-7))
    _close(loss, [-np.log(1e-7), -np.log(1e-7), -np.log1p(-1e-7)], rtol=1e-9)


def test_binary_cross_entropy_grads(rng):
    p = rng.uniform(0.1, 0.9, (4,))
    y = rng.uniform(0, 1, (4,))
    check_grads(lambda q, t: losses.binary_cross_entropy(q, t), (p, y), order=2)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_regression_losses(rng, reduction):
    a = rng.standard_normal((3, 4)) * 2
    b = rng.standard_normal((3, 4))
    d = a - b
    _close(losses.mse_loss(a, b, reduction=reduction), _reduce(d ** 2, reduction))
    _close(losses.l1_loss(a, b, reduction=reduction), _reduce(np.abs(d), reduction))
    for delta in (0.5, 1.0, 2.5):
        want = np.where(np.abs(d) <= delta, 0.5 * d ** 2, delta * (np.abs(d) - 0.5 * delta))
        _close(losses.huber_loss(a, b, delta=delta, reduction=reduction),
               _reduce(want, reduction))
    assert losses.mse is losses.mse_loss and losses.huber is losses.huber_loss


def test_regression_loss_grads(rng):
    a = rng.standard_normal((3, 2)) * 2
    b = rng.standard_normal((3, 2))
    assert np.all(np.abs(np.abs(a - b) - 0.7) > 1e-2)       # away from the Huber kink
    check_grads(lambda u, v: losses.mse_loss(u, v), (a, b), order=2)
    check_grads(lambda u, v: losses.l1_loss(u, v, reduction="sum"), (a, b), order=2)
    check_grads(lambda u, v: losses.huber_loss(u, v, delta=0.7), (a, b), order=2)


def test_regression_loss_errors():
    with pytest.raises(ValueError, match=r"predictions of shape \(3,\).*targets of shape \(3, 1\)"):
        losses.mse_loss(np.zeros(3), np.zeros((3, 1)))
    with pytest.raises(ValueError, match="delta must be positive"):
        losses.huber_loss(np.zeros(3), np.zeros(3), delta=0.0)
    with pytest.raises(TypeError, match="predictions must be floating point"):
        losses.l1_loss(np.zeros(3, np.int32), np.zeros(3, np.int32))


def test_losses_keep_float32_and_jit(rng):
    logits = fnp.asarray(rng.standard_normal((4, 3)), fnp.float32)
    labels = fnp.asarray(rng.integers(0, 3, 4), fnp.int32)
    eager = losses.softmax_cross_entropy(logits, labels)
    jitted = fgrad.jit(losses.softmax_cross_entropy)(logits, labels)
    assert eager.dtype == jitted.dtype == np.float32
    _close(jitted, np.asarray(eager), rtol=1e-6)
