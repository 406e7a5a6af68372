"""fgrad_nn.losses, issue 18's catalogue: the class axis, ignore_index and class
weights of cross-entropy, NLL, KL divergence, sigmoid focal, hinge, hinge
embedding, multi-margin, smooth L1, Poisson NLL and cosine embedding losses.

Values against NumPy references written here with direct loops/formulas (PyTorch's
documented definitions), every reduction; check_grads order 2 forward and
reverse in float64 with respect to the inputs; jit equals eager; clear errors."""
import itertools

import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad.test_util import check_grads
from fgrad_nn import losses

REDUCTIONS = ["mean", "sum", "none"]


def _close(got, want, rtol=1e-10, atol=1e-12):
    got = np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def _reduce(values, reduction, denominator=None):
    if reduction == "none":
        return values
    if reduction == "sum":
        return values.sum()
    return values.sum() / (values.size if denominator is None else denominator)


def ref_cross_entropy(logits, labels, axis, weight=None, ignore_index=None, smoothing=0.0,
                      reduction="mean"):
    """Loop over every position of the class axis moved last."""
    z = np.moveaxis(logits, axis, -1)
    c = z.shape[-1]
    w = np.ones(c) if weight is None else weight
    out = np.zeros(labels.shape)
    denom = 0.0
    for idx in itertools.product(*map(range, labels.shape)):
        y = labels[idx]
        if ignore_index is not None and y == ignore_index:
            continue
        row = z[idx]
        logp = row - np.log(np.sum(np.exp(row - row.max()))) - row.max()
        out[idx] = (1 - smoothing) * w[y] * -logp[y] + smoothing / c * np.sum(w * -logp)
        denom += w[y]
    return _reduce(out, reduction, denom)


# ----------------------------------------------------------------------------
# Cross-entropy and NLL

@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("options", [
    dict(), dict(weight=True), dict(ignore_index=-100), dict(ignore_index=2),
    dict(weight=True, ignore_index=-100, smoothing=0.2), dict(smoothing=0.1)])
def test_cross_entropy_class_axis_1(rng, reduction, options):
    logits = rng.standard_normal((3, 4, 2, 5))                     # (N, C, d1, d2)
    labels = rng.integers(0, 4, (3, 2, 5))
    ignore = options.get("ignore_index")
    if ignore == -100:
        labels[0, 1, 2] = labels[2, 0, 0] = -100
    weight = rng.uniform(0.2, 2.0, 4) if options.get("weight") else None
    smoothing = options.get("smoothing", 0.0)
    want = ref_cross_entropy(logits, labels, 1, weight, ignore, smoothing, reduction)
    got = losses.softmax_cross_entropy(logits, labels, axis=1, weight=weight,
                                       ignore_index=ignore, label_smoothing=smoothing,
                                       reduction=reduction)
    _close(got, want)
    jitted = fgrad.jit(lambda z, y: losses.softmax_cross_entropy(
        z, y, axis=1, weight=weight, ignore_index=ignore, label_smoothing=smoothing,
        reduction=reduction))(logits, labels)
    _close(jitted, np.asarray(got), rtol=1e-14, atol=1e-15)


def test_cross_entropy_axis_last_equals_axis_1_moved(rng):
    logits = rng.standard_normal((3, 4, 6))
    labels = rng.integers(0, 4, (3, 6))
    a = losses.softmax_cross_entropy(logits, labels, axis=1, reduction="none")
    b = losses.softmax_cross_entropy(np.moveaxis(logits, 1, -1), labels, reduction="none")
    _close(a, np.asarray(b), rtol=1e-14)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_probability_targets_with_weight(rng, reduction):
    logits = rng.standard_normal((5, 3, 2))
    probs = np.exp(rng.standard_normal((5, 3, 2)))
    probs /= probs.sum(axis=1, keepdims=True)
    weight = rng.uniform(0.5, 2.0, 3)
    logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    want = _reduce(-(probs * logp * weight[None, :, None]).sum(axis=1), reduction)
    _close(losses.softmax_cross_entropy(logits, probs, axis=1, weight=weight,
                                        reduction=reduction), want)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_loss(rng, reduction):
    logits = rng.standard_normal((6, 4))
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    labels = np.array([0, 3, -1, 2, 1, -1])
    weight = np.array([0.5, 1.0, 2.0, 3.0])
    out, denom = np.zeros(6), 0.0
    for i, y in enumerate(labels):
        if y != -1:
            out[i] = -weight[y] * logp[i, y]
            denom += weight[y]
    _close(losses.nll_loss(logp, labels, weight=weight, ignore_index=-1, reduction=reduction),
           _reduce(out, reduction, denom))
    _close(losses.nll_loss(logp.T, labels.clip(0), axis=0, reduction=reduction),
           _reduce(-logp[np.arange(6), labels.clip(0)], reduction))


def test_cross_entropy_all_ignored_mean_is_nan():
    got = losses.softmax_cross_entropy(np.zeros((2, 3)), np.array([-100, -100]),
                                       ignore_index=-100)
    assert np.isnan(float(got))


def test_cross_entropy_and_nll_grads(rng):
    logits = rng.standard_normal((2, 3, 4))
    labels = np.array([[0, 2, 1, -100], [2, -100, 0, 1]])
    weight = np.array([0.5, 1.5, 1.0])
    check_grads(lambda z: losses.softmax_cross_entropy(
        z, labels, axis=1, weight=weight, ignore_index=-100, label_smoothing=0.1),
        (logits,), order=2, modes=("fwd", "rev"))
    check_grads(lambda lp: losses.nll_loss(lp, labels, axis=1, ignore_index=-100,
                                           reduction="sum"), (logits,), order=2)
    probs = rng.dirichlet(np.ones(3), size=(2, 4)).transpose(0, 2, 1)
    check_grads(lambda z, q: losses.softmax_cross_entropy(z, q, axis=1, weight=weight,
                                                          label_smoothing=0.1),
                (logits, probs), order=2)


def test_cross_entropy_errors_with_hints(rng):
    logits = rng.standard_normal((2, 3, 4))
    with pytest.raises(ValueError, match=r"labels must have shape \(2, 3\).*pass axis=1"):
        losses.softmax_cross_entropy(logits, np.zeros((2, 4), np.int32))
    with pytest.raises(ValueError, match=r"axis 3 is out of range"):
        losses.softmax_cross_entropy(logits, np.zeros((2, 3), np.int32), axis=3)
    with pytest.raises(ValueError, match=r"one entry per class, shape \(3,\)"):
        losses.softmax_cross_entropy(logits, np.zeros((2, 4), np.int32), axis=1,
                                     weight=np.ones(4))
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 3\)"):
        losses.softmax_cross_entropy(logits, np.full((2, 4), 5), axis=1, ignore_index=-100)
    with pytest.raises(ValueError, match="ignore_index applies to integer labels only"):
        losses.softmax_cross_entropy(logits, np.ones((2, 3, 4)) / 3, ignore_index=0)
    with pytest.raises(TypeError, match="labels must be integers"):
        losses.nll_loss(logits, np.zeros((2, 4)), axis=1)


# ----------------------------------------------------------------------------
# KL divergence

@pytest.mark.parametrize("reduction", REDUCTIONS + ["batchmean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(rng, reduction, log_target):
    logq = np.log(rng.dirichlet(np.ones(5), size=4))
    p = rng.dirichlet(np.ones(5), size=4)
    if not log_target:
        p[1, 2] = 0.0                                    # a zero target contributes 0
    target = np.log(p) if log_target else p
    with np.errstate(divide="ignore", invalid="ignore"):
        pointwise = np.where(p > 0, p * (np.log(p) - logq), 0.0)
    want = pointwise.sum() / 4 if reduction == "batchmean" else _reduce(pointwise, reduction)
    got = losses.kl_div(logq, target, reduction=reduction, log_target=log_target)
    _close(got, want)
    _close(fgrad.jit(lambda a, b: losses.kl_div(a, b, reduction=reduction,
                                                log_target=log_target))(logq, target),
           np.asarray(got), rtol=1e-14, atol=1e-15)


def test_kl_div_grads(rng):
    logq = np.log(rng.dirichlet(np.ones(4), size=3))
    p = rng.dirichlet(np.ones(4), size=3)
    check_grads(lambda a, b: losses.kl_div(a, b, reduction="batchmean"), (logq, p), order=2)
    check_grads(lambda a, b: losses.kl_div(a, b, log_target=True), (logq, np.log(p)), order=2)
    p[0, 1] = 0.0
    g = fgrad.grad(lambda a: losses.kl_div(a, p, reduction="sum"))(logq)
    _close(g, -p)                                       # finite where the target is 0


# ----------------------------------------------------------------------------
# Focal, hinge, multi-margin

@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("alpha,gamma", [(0.25, 2.0), (-1.0, 0.0), (0.6, 1.5)])
def test_sigmoid_focal_loss(rng, reduction, alpha, gamma):
    x = rng.standard_normal((4, 3)) * 2
    y = (rng.uniform(size=(4, 3)) < 0.4).astype(float)
    p = 1 / (1 + np.exp(-x))
    ce = -(y * np.log(p) + (1 - y) * np.log(1 - p))
    p_t = p * y + (1 - p) * (1 - y)
    loss = ce * (1 - p_t) ** gamma
    if alpha >= 0:
        loss = loss * (alpha * y + (1 - alpha) * (1 - y))
    _close(losses.sigmoid_focal_loss(x, y, alpha=alpha, gamma=gamma, reduction=reduction),
           _reduce(loss, reduction))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_hinge_losses(rng, reduction):
    s = rng.standard_normal((3, 4)) * 2
    y = np.where(rng.uniform(size=(3, 4)) < 0.5, -1.0, 1.0)
    _close(losses.hinge_loss(s, y, margin=0.5, reduction=reduction),
           _reduce(np.maximum(0, 0.5 - y * s), reduction))
    d = np.abs(s)
    _close(losses.hinge_embedding_loss(d, y, margin=1.5, reduction=reduction),
           _reduce(np.where(y == 1, d, np.maximum(0, 1.5 - d)), reduction))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("p,weighted", [(1, False), (2, True), (2, False)])
def test_multi_margin_loss(rng, reduction, p, weighted):
    x = rng.standard_normal((5, 4))
    labels = rng.integers(0, 4, 5)
    weight = rng.uniform(0.5, 2.0, 4) if weighted else None
    out = np.zeros(5)
    for n in range(5):
        y = labels[n]
        for i in range(4):
            if i != y:
                term = max(0.0, 0.7 - x[n, y] + x[n, i]) ** p
                out[n] += (weight[y] if weighted else 1.0) * term / 4
    _close(losses.multi_margin_loss(x, labels, p=p, margin=0.7, weight=weight,
                                    reduction=reduction), _reduce(out, reduction))


def test_margin_loss_grads(rng):
    x = rng.standard_normal((3, 4))
    y = np.array([[1.0, -1, 1, -1], [-1, -1, 1, 1], [1, 1, -1, -1]])
    for margin in (0.5,):
        assert np.all(np.abs(margin - y * x) > 1e-2)
    check_grads(lambda s: losses.hinge_loss(s, y, margin=0.5), (x,), order=2)
    check_grads(lambda s: losses.hinge_embedding_loss(s, y, margin=0.5), (np.abs(x),),
                order=2)
    labels = np.array([0, 3, 1])
    check_grads(lambda s: losses.multi_margin_loss(s, labels, p=2, margin=0.7,
                                                   weight=np.array([1.0, 2, 0.5, 1])),
                (x,), order=2)
    z = rng.standard_normal((3, 2))
    t = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    check_grads(lambda a: losses.sigmoid_focal_loss(a, t, gamma=2.0), (z,), order=2)
    check_grads(lambda a: losses.sigmoid_focal_loss(a, t, gamma=1.5, alpha=0.3), (z,), order=2)


# ----------------------------------------------------------------------------
# Regression and count losses, cosine embedding

@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("beta", [0.0, 0.5, 1.0, 2.0])
def test_smooth_l1_loss(rng, reduction, beta):
    a, b = rng.standard_normal((3, 4)) * 2, rng.standard_normal((3, 4))
    d = np.abs(a - b)
    want = d if beta == 0 else np.where(d < beta, 0.5 * d ** 2 / beta, d - 0.5 * beta)
    _close(losses.smooth_l1_loss(a, b, beta=beta, reduction=reduction),
           _reduce(want, reduction))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("log_input,full", [(True, False), (True, True), (False, True),
                                            (False, False)])
def test_poisson_nll_loss(rng, reduction, log_input, full):
    x = rng.standard_normal((4, 3)) if log_input else rng.uniform(0.1, 3.0, (4, 3))
    y = rng.poisson(2.0, (4, 3)).astype(float)
    loss = np.exp(x) - y * x if log_input else x - y * np.log(x + 1e-8)
    if full:
        for idx in np.ndindex(y.shape):
            t = y[idx]
            if t > 1:
                loss[idx] += t * np.log(t) - t + 0.5 * np.log(2 * np.pi * t)
    _close(losses.poisson_nll_loss(x, y, log_input=log_input, full=full, reduction=reduction),
           _reduce(loss, reduction))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cosine_embedding_loss(rng, reduction):
    x1, x2 = rng.standard_normal((5, 3)), rng.standard_normal((5, 3))
    x1[4] = 0.0                                            # zero vector: cos 0, no NaN
    y = np.array([1.0, -1, -1, 1, -1])
    out = np.zeros(5)
    for n in range(5):
        cos = x1[n] @ x2[n] / np.sqrt((x1[n] @ x1[n] + 1e-12) * (x2[n] @ x2[n] + 1e-12))
        out[n] = 1 - cos if y[n] == 1 else max(0.0, cos - 0.1)
    _close(losses.cosine_embedding_loss(x1, x2, y, margin=0.1, reduction=reduction),
           _reduce(out, reduction))


def test_regression_and_embedding_grads(rng):
    a, b = rng.standard_normal((3, 2)) * 2, rng.standard_normal((3, 2))
    assert np.all(np.abs(np.abs(a - b) - 0.8) > 1e-2)
    check_grads(lambda u, v: losses.smooth_l1_loss(u, v, beta=0.8), (a, b), order=2)
    y = rng.poisson(2.0, (3, 2)).astype(float)
    check_grads(lambda u: losses.poisson_nll_loss(u, y, full=True), (a,), order=2)
    check_grads(lambda u: losses.poisson_nll_loss(u, y, log_input=False),
                (np.abs(a) + 0.5,), order=2)
    x1, x2 = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    t = np.array([1.0, -1, 1, -1])
    cos = (x1 * x2).sum(-1) / np.linalg.norm(x1, axis=-1) / np.linalg.norm(x2, axis=-1)
    assert np.all(np.abs(cos + 0.2) > 1e-2)
    check_grads(lambda u, v: losses.cosine_embedding_loss(u, v, t, margin=-0.2), (x1, x2),
                order=2)


NEW_LOSSES = {
    "nll": lambda a, b: losses.nll_loss(a, b[..., 0].astype(np.int32) % 3, axis=1),
    "kl_div": lambda a, b: losses.kl_div(a, np.abs(b), reduction="batchmean"),
    "focal": lambda a, b: losses.sigmoid_focal_loss(a, (b > 0).astype(np.float32)),
    "hinge": lambda a, b: losses.hinge_loss(a, np.sign(b)),
    "hinge_embedding": lambda a, b: losses.hinge_embedding_loss(a, np.sign(b)),
    "multi_margin": lambda a, b: losses.multi_margin_loss(a, b[:, 0].astype(np.int32) % 3,
                                                          p=2),
    "smooth_l1": lambda a, b: losses.smooth_l1_loss(a, b, beta=0.5),
    "poisson": lambda a, b: losses.poisson_nll_loss(a, np.abs(b), full=True),
    "cosine": lambda a, b: losses.cosine_embedding_loss(a, b, np.sign(b[:, 0]), margin=0.1),
}


@pytest.mark.parametrize("name", sorted(NEW_LOSSES))
def test_jit_equals_eager_and_float32_is_kept(rng, name):
    a = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal((4, 3)).astype(np.float32)
    b[b == 0] = 0.5
    fn = NEW_LOSSES[name]
    eager = fn(fnp.asarray(a), b)
    jitted = fgrad.jit(lambda x: fn(x, b))(fnp.asarray(a))
    assert eager.dtype == jitted.dtype == np.float32
    _close(jitted, np.asarray(eager), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("call,match", [
    (lambda: losses.kl_div(np.zeros((2, 3)), np.zeros((3, 2))),
     r"log_predictions of shape \(2, 3\) and targets of shape \(3, 2\) differ.*reshape"),
    (lambda: losses.kl_div(np.zeros(3), np.zeros(3), reduction="batch"), "batchmean"),
    (lambda: losses.sigmoid_focal_loss(np.zeros(3), np.zeros((3, 1))), r"\(3, 1\)"),
    (lambda: losses.hinge_loss(np.zeros(3), np.array([1.0, 0.0, -1.0])), "1 or -1"),
    (lambda: losses.multi_margin_loss(np.zeros((2, 3)), np.zeros(3, np.int32)),
     r"labels must have shape \(2,\)"),
    (lambda: losses.multi_margin_loss(np.zeros((2, 3)), np.zeros(2, np.int32), p=3),
     "p must be 1 or 2"),
    (lambda: losses.smooth_l1_loss(np.zeros(2), np.zeros(2), beta=-1.0), "beta must be"),
    (lambda: losses.poisson_nll_loss(np.zeros(2), np.zeros(3)), r"inputs of shape \(2,\)"),
    (lambda: losses.cosine_embedding_loss(np.zeros((2, 3)), np.zeros((2, 3)), np.ones(3)),
     r"targets of shape \(3,\) must have the shape of x1 without its last"),
    (lambda: losses.cosine_embedding_loss(np.zeros((2, 3)), np.zeros((2, 4)), np.ones(2)),
     r"x1 of shape \(2, 3\) and x2 of shape \(2, 4\)"),
])
def test_errors_name_the_shapes_and_a_fix(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()
