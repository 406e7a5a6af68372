"""Loss functions: pure functions of predictions and targets.

Every loss takes `reduction='mean' | 'sum' | 'none'` (PyTorch's default 'mean';
'none' keeps one value per example, Optax's behaviour). Predictions and targets
must have the same shape (no silent broadcasting), except integer class labels,
which have the logits' shape without the class axis.

    loss = softmax_cross_entropy(logits, labels)          # labels int (N,) or probs (N, K)
    loss = binary_cross_entropy_with_logits(logits, y)    # stable for any logit
"""
import numpy as np

import fgrad
import fgrad.numpy as fnp
from fgrad import nn

__all__ = ["softmax_cross_entropy", "softmax_cross_entropy_with_integer_labels",
           "binary_cross_entropy_with_logits", "binary_cross_entropy", "mse_loss", "l1_loss",
           "huber_loss", "mse", "l1", "huber"]

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


def _same_shape(name, pred, target, pred_name="predictions"):
    if tuple(pred.shape) != tuple(target.shape):
        raise ValueError(f"{name}: {pred_name} of shape {tuple(pred.shape)} and targets of "
                         f"shape {tuple(target.shape)} differ; they must have the same shape")


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


def softmax_cross_entropy_with_integer_labels(logits, labels, *, reduction="mean",
                                              label_smoothing=0.0):
    """-log softmax(logits)[label] over the last axis; labels are integers of shape
    logits.shape[:-1]. With label_smoothing ε the target is (1-ε)·one_hot + ε/K."""
    name = "softmax_cross_entropy_with_integer_labels"
    logits, labels = _floats(name, "logits", logits), _as_array(labels)
    if np.dtype(labels.dtype).kind not in "iu":
        raise TypeError(f"{name}: labels must be integers, got dtype {labels.dtype}")
    if tuple(labels.shape) != tuple(logits.shape[:-1]):
        raise ValueError(f"{name}: labels of shape {tuple(labels.shape)} do not match logits "
                         f"of shape {tuple(logits.shape)}; labels must have shape "
                         f"{tuple(logits.shape[:-1])} (the logits without the class axis)")
    num_classes = logits.shape[-1]
    _check_labels_in_range(name, labels, num_classes)
    target = nn.one_hot(labels, num_classes, dtype=logits.dtype)
    target = _smooth(name, target, num_classes, label_smoothing)
    loss = -fnp.sum(target * nn.log_softmax(logits, axis=-1), axis=-1)
    return _reduce(name, loss, reduction)


def softmax_cross_entropy(logits, labels, *, reduction="mean", label_smoothing=0.0):
    """Cross-entropy between softmax(logits) and `labels` over the last axis.

    labels: integer class indices of shape logits.shape[:-1], or a probability
    (e.g. one-hot) target of the logits' shape. Stable for any logits (log-sum-exp).
    """
    name = "softmax_cross_entropy"
    labels = _as_array(labels)
    if np.dtype(labels.dtype).kind in "iu":
        return softmax_cross_entropy_with_integer_labels(
            logits, labels, reduction=reduction, label_smoothing=label_smoothing)
    logits, labels = _floats(name, "logits", logits), _floats(name, "labels", labels)
    _same_shape(name, logits, labels, "logits")
    target = _smooth(name, labels, logits.shape[-1], label_smoothing)
    loss = -fnp.sum(target * nn.log_softmax(logits, axis=-1), axis=-1)
    return _reduce(name, loss, reduction)


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


mse = mse_loss
l1 = l1_loss
huber = huber_loss
