"""Loss functions: pure functions of predictions and targets.

Every loss takes `reduction='mean' | 'sum' | 'none'` (PyTorch's default 'mean';
'none' keeps one value per example, Optax's behaviour). Predictions and targets
must have the same shape (no silent broadcasting), except integer class labels,
which have the logits' shape without the class axis.

    loss = softmax_cross_entropy(logits, labels)          # labels int (N,) or probs (N, K)
    loss = softmax_cross_entropy(logits, labels, axis=1)  # PyTorch's (N, C, H, W) logits
    loss = binary_cross_entropy_with_logits(logits, y)    # stable for any logit
"""
import numpy as np

import fgrad
import fgrad.numpy as fnp
from fgrad import nn

__all__ = ["softmax_cross_entropy", "softmax_cross_entropy_with_integer_labels", "nll_loss",
           "binary_cross_entropy_with_logits", "binary_cross_entropy", "sigmoid_focal_loss",
           "kl_div", "mse_loss", "l1_loss", "huber_loss", "smooth_l1_loss", "hinge_loss",
           "hinge_embedding_loss", "multi_margin_loss", "poisson_nll_loss",
           "cosine_embedding_loss", "mse", "l1", "huber"]

_REDUCTIONS = ("mean", "sum", "none")


def _reduce(name, loss, reduction):
    if reduction == "mean":
        return fnp.mean(loss)
    if reduction == "sum":
        return fnp.sum(loss)
    if reduction == "none":
        return loss
    raise ValueError(f"{name}: reduction must be one of {_REDUCTIONS}, got {reduction!r}")


def _as_array(x):
    return x if hasattr(x, "shape") and hasattr(x, "dtype") else fnp.asarray(x)


def _floats(name, what, x):
    x = _as_array(x)
    if np.dtype(x.dtype).kind != "f":
        raise TypeError(f"{name}: {what} must be floating point, got dtype {x.dtype}; "
                        f"convert with .astype(fgrad.numpy.float32)")
    return x


def _same_shape(name, pred, target, pred_name="predictions", target_name="targets"):
    if tuple(pred.shape) != tuple(target.shape):
        raise ValueError(f"{name}: {pred_name} of shape {tuple(pred.shape)} and {target_name} "
                         f"of shape {tuple(target.shape)} differ; they must have the same "
                         f"shape (no broadcasting: reshape one, e.g. targets[:, None] for a "
                         f"column of predictions)")


def _check_labels_in_range(name, labels, num_classes):
    """Range check for concrete labels (traced labels cannot be inspected)."""
    if isinstance(labels, (np.ndarray, fgrad.Array)):
        values = np.asarray(labels)
        if values.size and (values.min() < 0 or values.max() >= num_classes):
            raise ValueError(f"{name}: labels must lie in [0, {num_classes}), got values "
                             f"from {values.min()} to {values.max()}")


def _smooth(name, target, num_classes, label_smoothing):
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"{name}: label_smoothing must be in [0, 1], got {label_smoothing}")
    if label_smoothing == 0.0:
        return target
    return (1.0 - label_smoothing) * target + label_smoothing / num_classes


def _class_axis(name, logits, axis):
    """`axis` as a non-negative class axis of `logits`."""
    ndim = logits.ndim
    if ndim == 0 or not -ndim <= axis < ndim:
        raise ValueError(f"{name}: axis {axis} is out of range for logits of shape "
                         f"{tuple(logits.shape)}")
    return axis % ndim


def _axis_hint(shape, axis):
    if axis == len(shape) - 1 and len(shape) > 2:
        return ("; for PyTorch-layout (N, C, d1, ...) logits pass axis=1")
    return ""


def _class_weights(name, weight, num_classes, dtype):
    """The (C,) class weights as an array of the logits' dtype, or None."""
    if weight is None:
        return None
    weight = _as_array(weight)
    if tuple(weight.shape) != (num_classes,):
        raise ValueError(f"{name}: weight must have one entry per class, shape "
                         f"({num_classes},); got shape {tuple(weight.shape)}")
    return fnp.astype(weight, dtype)


def _integer_labels(name, labels, logits, axis, ignore_index):
    """Checked integer labels and the mask of those that count (not ignore_index)."""
    labels = _as_array(labels)
    if np.dtype(labels.dtype).kind not in "iu":
        raise TypeError(f"{name}: labels must be integers, got dtype {labels.dtype}")
    expected = tuple(logits.shape[:axis]) + tuple(logits.shape[axis + 1:])
    if tuple(labels.shape) != expected:
        raise ValueError(f"{name}: labels of shape {tuple(labels.shape)} do not match logits "
                         f"of shape {tuple(logits.shape)}; labels must have shape {expected} "
                         f"(the logits without the class axis {axis})"
                         f"{_axis_hint(tuple(logits.shape), axis)}")
    num_classes = logits.shape[axis]
    if ignore_index is None:
        _check_labels_in_range(name, labels, num_classes)
        return labels, None
    if isinstance(labels, (np.ndarray, fgrad.Array)):
        kept = np.asarray(labels)[np.asarray(labels) != ignore_index]
        _check_labels_in_range(name, kept, num_classes)
    valid = labels != ignore_index
    return fnp.where(valid, labels, 0), valid


def _nll_from_log_probs(name, log_probs, labels, *, axis, weight, ignore_index,
                        label_smoothing, reduction):
    """PyTorch's class-index cross-entropy on log-probabilities: per element
    (1-ε) w[y] (-log p_y) + ε/C Σ_c w_c (-log p_c), 0 where the label is ignored;
    'mean' divides by Σ w[y] over the labels that count (NaN if none counts)."""
    axis = _class_axis(name, log_probs, axis)
    labels, valid = _integer_labels(name, labels, log_probs, axis, ignore_index)
    num_classes = log_probs.shape[axis]
    weight = _class_weights(name, weight, num_classes, log_probs.dtype)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"{name}: label_smoothing must be in [0, 1], got {label_smoothing}")
    logp = fnp.moveaxis(log_probs, axis, -1)
    one_hot = nn.one_hot(labels, num_classes, dtype=logp.dtype)
    weighted = logp if weight is None else logp * weight
    # picked by a select, not a product: a class masked with a -inf logit is
    # 0 * -inf = nan in a product, and must not count where it is not the label
    loss = -fnp.sum(fnp.where(one_hot > 0, weighted, 0), axis=-1)
    if label_smoothing:
        loss = (1.0 - label_smoothing) * loss - label_smoothing / num_classes * fnp.sum(
            weighted, axis=-1)
    label_weight = (fnp.ones_like(loss) if weight is None
                    else fnp.sum(one_hot * weight, axis=-1))
    if valid is not None:
        loss = fnp.where(valid, loss, 0)
        label_weight = fnp.where(valid, label_weight, 0)
    if reduction == "mean" and (weight is not None or valid is not None):
        return fnp.sum(loss) / fnp.sum(label_weight)
    return _reduce(name, loss, reduction)


def softmax_cross_entropy_with_integer_labels(logits, labels, *, axis=-1, reduction="mean",
                                              label_smoothing=0.0, ignore_index=None,
                                              weight=None):
    """-log softmax(logits)[label] over the class axis `axis` (default the last;
    axis=1 for PyTorch's (N, C, d1, ...) layout); labels are integers of the
    logits' shape without that axis.

    label_smoothing ε: the target is (1-ε)·one_hot + ε/C. weight: a (C,) class
    weight; ignore_index: a label value that contributes nothing. With either,
    'mean' is PyTorch's weighted mean Σ loss / Σ weight[label] over the labels
    that count (NaN when none does)."""
    name = "softmax_cross_entropy_with_integer_labels"
    logits = _floats(name, "logits", logits)
    ax = _class_axis(name, logits, axis)
    return _nll_from_log_probs(name, nn.log_softmax(logits, axis=ax), labels, axis=ax,
                               weight=weight, ignore_index=ignore_index,
                               label_smoothing=label_smoothing, reduction=reduction)


def softmax_cross_entropy(logits, labels, *, axis=-1, reduction="mean", label_smoothing=0.0,
                          ignore_index=None, weight=None):
    """Cross-entropy between softmax(logits) and `labels` over the class axis.

    labels: integer class indices of the logits' shape without `axis` (see
    softmax_cross_entropy_with_integer_labels for ignore_index and weight), or a
    probability (e.g. one-hot) target of the logits' shape, where weight scales
    each class's term and 'mean' is the plain mean over examples (PyTorch's).
    Stable for any logits (log-sum-exp).
    """
    name = "softmax_cross_entropy"
    labels = _as_array(labels)
    if np.dtype(labels.dtype).kind in "iu":
        return softmax_cross_entropy_with_integer_labels(
            logits, labels, axis=axis, reduction=reduction, label_smoothing=label_smoothing,
            ignore_index=ignore_index, weight=weight)
    if ignore_index is not None:
        raise ValueError(f"{name}: ignore_index applies to integer labels only; "
                         f"these labels are probabilities (dtype {labels.dtype})")
    logits, labels = _floats(name, "logits", logits), _floats(name, "labels", labels)
    _same_shape(name, logits, labels, "logits")
    ax = _class_axis(name, logits, axis)
    target = _smooth(name, labels, logits.shape[ax], label_smoothing)
    weight = _class_weights(name, weight, logits.shape[ax], logits.dtype)
    terms = target * nn.log_softmax(logits, axis=ax)
    if weight is not None:
        terms = terms * fnp.reshape(weight, (-1,) + (1,) * (logits.ndim - 1 - ax))
    return _reduce(name, -fnp.sum(terms, axis=ax), reduction)


def nll_loss(log_probs, labels, *, axis=-1, weight=None, ignore_index=None, reduction="mean"):
    """Negative log-likelihood -w[y]·log_probs[y] of integer labels, from
    log-probabilities (e.g. log_softmax outputs), PyTorch's NLLLoss: class axis
    `axis` (axis=1 for (N, C, d1, ...)), class weights, ignore_index and the
    weighted mean Σ loss / Σ w[y]."""
    name = "nll_loss"
    log_probs = _floats(name, "log_probs", log_probs)
    return _nll_from_log_probs(name, log_probs, labels, axis=axis, weight=weight,
                               ignore_index=ignore_index, label_smoothing=0.0,
                               reduction=reduction)


def binary_cross_entropy_with_logits(logits, targets, *, reduction="mean"):
    """-(y·log σ(x) + (1-y)·log(1-σ(x))), computed as softplus(x) - x·y, which never
    overflows and keeps every derivative at x = 0 (the Hessian of a logistic
    regression at zero weights is not zero)."""
    name = "binary_cross_entropy_with_logits"
    logits, targets = _floats(name, "logits", logits), _floats(name, "targets", targets)
    _same_shape(name, logits, targets, "logits")
    loss = nn.softplus(logits) - logits * targets
    return _reduce(name, loss, reduction)


def binary_cross_entropy(probs, targets, *, reduction="mean", eps=1e-7):
    """-(y·log p + (1-y)·log(1-p)) from probabilities p, clipped to [eps, 1-eps] so that
    p = 0 or 1 gives a finite loss (the gradient is zero where clipping is active).
    Prefer binary_cross_entropy_with_logits when you have logits."""
    name = "binary_cross_entropy"
    probs, targets = _floats(name, "probs", probs), _floats(name, "targets", targets)
    _same_shape(name, probs, targets, "probs")
    p = fnp.clip(probs, eps, 1.0 - eps)
    loss = -(targets * fnp.log(p) + (1.0 - targets) * fnp.log1p(-p))
    return _reduce(name, loss, reduction)


def mse_loss(predictions, targets, *, reduction="mean"):
    """(predictions - targets)²."""
    name = "mse_loss"
    predictions, targets = _floats(name, "predictions", predictions), _as_array(targets)
    _same_shape(name, predictions, targets)
    return _reduce(name, fnp.square(predictions - targets), reduction)


def l1_loss(predictions, targets, *, reduction="mean"):
    """|predictions - targets| (derivative 0 where they are equal)."""
    name = "l1_loss"
    predictions, targets = _floats(name, "predictions", predictions), _as_array(targets)
    _same_shape(name, predictions, targets)
    return _reduce(name, fnp.abs(predictions - targets), reduction)


def huber_loss(predictions, targets, *, delta=1.0, reduction="mean"):
    """0.5·d² where |d| < delta, delta·(|d| - 0.5·delta) from there on (d = predictions -
    targets), as PyTorch's HuberLoss. The quadratic part is d² itself (not |d|²), so
    its second derivative is 1 at d = 0; at |d| = delta it is the linear side's 0."""
    name = "huber_loss"
    if delta <= 0:
        raise ValueError(f"{name}: delta must be positive, got {delta}")
    predictions, targets = _floats(name, "predictions", predictions), _as_array(targets)
    _same_shape(name, predictions, targets)
    d = predictions - targets
    err = fnp.abs(d)
    loss = fnp.where(err < delta, 0.5 * fnp.square(d), delta * (err - 0.5 * delta))
    return _reduce(name, loss, reduction)


def smooth_l1_loss(predictions, targets, *, beta=1.0, reduction="mean"):
    """PyTorch's SmoothL1Loss: 0.5·d²/beta where |d| < beta, |d| - 0.5·beta from there
    on (d = predictions - targets); beta = 0 is the L1 loss. Equals
    huber_loss(delta=beta) / beta."""
    name = "smooth_l1_loss"
    if beta < 0:
        raise ValueError(f"{name}: beta must be >= 0, got {beta}")
    predictions, targets = _floats(name, "predictions", predictions), _as_array(targets)
    _same_shape(name, predictions, targets)
    d = predictions - targets
    err = fnp.abs(d)
    if beta == 0:
        return _reduce(name, err, reduction)
    loss = fnp.where(err < beta, 0.5 * fnp.square(d) / beta, err - 0.5 * beta)
    return _reduce(name, loss, reduction)


def _reduce_kl(name, loss, reduction):
    if reduction == "batchmean":
        return fnp.sum(loss) / (loss.shape[0] if loss.ndim else 1)
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{name}: reduction must be one of {_REDUCTIONS + ('batchmean',)}, "
                         f"got {reduction!r}")
    return _reduce(name, loss, reduction)


def kl_div(log_predictions, targets, *, reduction="mean", log_target=False):
    """PyTorch's KLDivLoss: targets · (log targets - log_predictions) per element, the
    predictions given as log-probabilities; the targets as probabilities (a zero
    target contributes 0) or, with log_target=True, as log-probabilities.
    reduction 'batchmean' (the KL divergence per example: the sum divided by the
    first axis's length) is the mathematically right one; 'mean' averages over
    all elements, as PyTorch's default does."""
    name = "kl_div"
    log_predictions = _floats(name, "log_predictions", log_predictions)
    targets = _floats(name, "targets", targets)
    _same_shape(name, log_predictions, targets, "log_predictions")
    if log_target:
        loss = fnp.exp(targets) * (targets - log_predictions)
    else:
        positive = targets > 0
        safe = fnp.where(positive, targets, 1)      # log(0) would poison the gradient
        loss = fnp.where(positive, targets * (fnp.log(safe) - log_predictions), 0)
    return _reduce_kl(name, loss, reduction)


def sigmoid_focal_loss(logits, targets, *, alpha=0.25, gamma=2.0, reduction="mean"):
    """Focal loss (Lin et al. 2017) as torchvision's sigmoid_focal_loss: the binary
    cross-entropy with logits times (1 - p_t)^gamma, p_t = p·y + (1-p)(1-y), times
    alpha_t = alpha·y + (1-alpha)(1-y) when alpha >= 0 (alpha < 0: no weighting).
    torchvision's default reduction is 'none'; this module's is 'mean'."""
    name = "sigmoid_focal_loss"
    logits, targets = _floats(name, "logits", logits), _floats(name, "targets", targets)
    _same_shape(name, logits, targets, "logits")
    if gamma < 0:
        raise ValueError(f"{name}: gamma must be >= 0, got {gamma}")
    p = nn.sigmoid(logits)
    ce = nn.softplus(logits) - logits * targets
    p_t = p * targets + (1 - p) * (1 - targets)
    loss = ce if gamma == 0 else ce * (1 - p_t) ** gamma
    if alpha >= 0:
        loss = (alpha * targets + (1 - alpha) * (1 - targets)) * loss
    return _reduce(name, loss, reduction)


def _signs(name, targets):
    """Targets of ±1 as floats; concrete targets are checked."""
    targets = _as_array(targets)
    if isinstance(targets, (np.ndarray, fgrad.Array)):
        values = np.asarray(targets)
        if values.size and not np.all((values == 1) | (values == -1)):
            raise ValueError(f"{name}: targets must be 1 or -1, got values "
                             f"{np.unique(values)[:6]}")
    return targets


def hinge_loss(scores, targets, *, margin=1.0, reduction="mean"):
    """Binary hinge loss max(0, margin - y·score) for targets y of ±1 (Optax's
    hinge_loss at margin 1; a linear SVM's loss)."""
    name = "hinge_loss"
    scores = _floats(name, "scores", scores)
    targets = _signs(name, targets)
    _same_shape(name, scores, targets, "scores")
    return _reduce(name, fnp.maximum(0, margin - targets * scores), reduction)


def hinge_embedding_loss(inputs, targets, *, margin=1.0, reduction="mean"):
    """PyTorch's HingeEmbeddingLoss: x where y = 1, max(0, margin - x) where y = -1
    (x is typically a distance between two embeddings)."""
    name = "hinge_embedding_loss"
    inputs = _floats(name, "inputs", inputs)
    targets = _signs(name, targets)
    _same_shape(name, inputs, targets, "inputs")
    loss = fnp.where(targets == 1, inputs, fnp.maximum(0, margin - inputs))
    return _reduce(name, loss, reduction)


def multi_margin_loss(scores, labels, *, p=1, margin=1.0, weight=None, reduction="mean"):
    """PyTorch's MultiMarginLoss (multi-class hinge): per example
    Σ_{i≠y} w[y]·max(0, margin - x[y] + x[i])^p / C over the last axis of C class
    scores; p is 1 or 2; 'mean' is the plain mean over examples."""
    name = "multi_margin_loss"
    if p not in (1, 2):
        raise ValueError(f"{name}: p must be 1 or 2, got {p}")
    scores = _floats(name, "scores", scores)
    axis = _class_axis(name, scores, -1)
    labels, _ = _integer_labels(name, labels, scores, axis, None)
    num_classes = scores.shape[-1]
    weight = _class_weights(name, weight, num_classes, scores.dtype)
    one_hot = nn.one_hot(labels, num_classes, dtype=scores.dtype)
    correct = fnp.sum(one_hot * scores, axis=-1, keepdims=True)
    hinge = fnp.maximum(0, margin - correct + scores)
    if p == 2:
        hinge = fnp.square(hinge)
    loss = fnp.sum(hinge * (1 - one_hot), axis=-1) / num_classes
    if weight is not None:
        loss = loss * fnp.sum(one_hot * weight, axis=-1)
    return _reduce(name, loss, reduction)


def poisson_nll_loss(inputs, targets, *, log_input=True, full=False, eps=1e-8,
                     reduction="mean"):
    """PyTorch's PoissonNLLLoss: exp(x) - y·x when the inputs are log-rates
    (log_input=True), else x - y·log(x + eps); full=True adds Stirling's term
    y·log y - y + 0.5·log(2πy) for targets above 1 (0 elsewhere)."""
    name = "poisson_nll_loss"
    inputs, targets = _floats(name, "inputs", inputs), _floats(name, "targets", targets)
    _same_shape(name, inputs, targets, "inputs")
    if log_input:
        loss = fnp.exp(inputs) - targets * inputs
    else:
        loss = inputs - targets * fnp.log(inputs + eps)
    if full:
        big = targets > 1
        safe = fnp.where(big, targets, 2)
        stirling = safe * fnp.log(safe) - safe + 0.5 * fnp.log(2 * np.pi * safe)
        loss = loss + fnp.where(big, stirling, 0)
    return _reduce(name, loss, reduction)


def cosine_embedding_loss(x1, x2, targets, *, margin=0.0, reduction="mean"):
    """PyTorch's CosineEmbeddingLoss over the last axis: 1 - cos(x1, x2) where the
    target is 1, max(0, cos(x1, x2) - margin) where it is -1; the cosine is
    x1·x2 / sqrt((|x1|² + 1e-12)(|x2|² + 1e-12)), so zero vectors give 0, not NaN."""
    name = "cosine_embedding_loss"
    x1, x2 = _floats(name, "x1", x1), _floats(name, "x2", x2)
    _same_shape(name, x1, x2, "x1", "x2")
    targets = _signs(name, targets)
    if x1.ndim == 0 or tuple(targets.shape) != tuple(x1.shape[:-1]):
        raise ValueError(f"{name}: targets of shape {tuple(targets.shape)} must have the "
                         f"shape of x1 without its last (feature) axis, "
                         f"{tuple(x1.shape[:-1])}; x1 has shape {tuple(x1.shape)}")
    dot = fnp.sum(x1 * x2, axis=-1)
    norms = fnp.sqrt((fnp.sum(fnp.square(x1), axis=-1) + 1e-12)
                     * (fnp.sum(fnp.square(x2), axis=-1) + 1e-12))
    cos = dot / norms
    loss = fnp.where(targets == 1, 1 - cos, fnp.maximum(0, cos - margin))
    return _reduce(name, loss, reduction)


mse = mse_loss
l1 = l1_loss
huber = huber_loss
