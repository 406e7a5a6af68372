"""Functional forms of the layers: pure functions of arrays, parameters passed in.

Image functions use PyTorch's channels-first layout: input (N, C, *spatial) or
one example (C, *spatial); convolution weights are (out_channels, in_channels /
groups, *kernel). Convolutions (1-3 spatial dims, groups, dilation, padding
modes, transposed) and pooling are implemented in `fgrad_nn._conv`: each
convolution is one `fgrad.lax.conv_general_dilated` (a native kernel under
jit). Everything is built from fgrad.numpy / fgrad.lax, so it differentiates
to any order, vmaps and jits.
"""
import functools

import numpy as np

import fgrad
import fgrad.lax as lax
import fgrad.numpy as fnp

from fgrad_nn import _conv

__all__ = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d", "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d",
           "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d", "adaptive_avg_pool2d",
           "adaptive_max_pool1d", "adaptive_max_pool2d", "layer_norm", "batch_norm",
           "dropout", "embedding"]


def linear(x, weight, bias=None):
    """x @ weight.T + bias, weight of shape (out_features, in_features) as in PyTorch;
    x may have any leading dimensions."""
    if x.shape[-1:] != weight.shape[1:]:
        raise ValueError(f"linear: input of shape {tuple(x.shape)} does not end in "
                         f"in_features={weight.shape[1]} (weight shape {tuple(weight.shape)})")
    y = fnp.matmul(x, fnp.transpose(weight))
    return y if bias is None else y + bias


def conv1d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1,
           padding_mode="zeros"):
    """1-d cross-correlation (PyTorch's conv1d): x (N, C, L) or (C, L), weight
    (O, C / groups, k). padding: int, 'valid' or 'same' (JAX's SAME for any
    stride: L_out = ceil(L / stride)); padding_mode: 'zeros', 'reflect',
    'replicate' or 'circular'."""
    return _conv.conv(1, "conv1d", x, weight, bias, stride, padding, dilation, groups,
                      padding_mode)


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1,
           padding_mode="zeros"):
    """2-d cross-correlation (PyTorch's conv2d), one lax.conv_general_dilated.

    x: (N, C, H, W) or (C, H, W); weight: (O, C / groups, kh, kw); bias: (O,) or None.
    stride, dilation: int or pair; padding: int, pair, 'valid' or 'same' ('same' as
    JAX's SAME: Ho = ceil(H / stride) for any stride; PyTorch's for stride 1).
    Returns (N, O, Ho, Wo) (or (O, Ho, Wo)) with
    Ho = (H + pad_top + pad_bottom - dilation*(kh-1) - 1) // stride + 1.
    """
    return _conv.conv(2, "conv2d", x, weight, bias, stride, padding, dilation, groups,
                      padding_mode)


def conv3d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1,
           padding_mode="zeros"):
    """3-d cross-correlation (PyTorch's conv3d): x (N, C, D, H, W) or (C, D, H, W),
    weight (O, C / groups, kd, kh, kw); arguments as conv2d's."""
    return _conv.conv(3, "conv3d", x, weight, bias, stride, padding, dilation, groups,
                      padding_mode)


def conv_transpose1d(x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """PyTorch's conv_transpose1d: weight (C_in, C_out / groups, k); L_out =
    (L - 1)·stride - 2·padding + dilation·(k - 1) + output_padding + 1."""
    return _conv.conv_transpose(1, "conv_transpose1d", x, weight, bias, stride, padding,
                                output_padding, groups, dilation)


def conv_transpose2d(x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """PyTorch's conv_transpose2d: weight (C_in, C_out / groups, kh, kw)."""
    return _conv.conv_transpose(2, "conv_transpose2d", x, weight, bias, stride, padding,
                                output_padding, groups, dilation)


def conv_transpose3d(x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """PyTorch's conv_transpose3d: weight (C_in, C_out / groups, kd, kh, kw)."""
    return _conv.conv_transpose(3, "conv_transpose3d", x, weight, bias, stride, padding,
                                output_padding, groups, dilation)


def max_pool1d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    """Maximum over each window (PyTorch's max_pool1d; padding counts as -inf)."""
    return _conv.max_pool(1, "max_pool1d", x, kernel_size, stride, padding, dilation, ceil_mode)


def max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    """Maximum over each window (PyTorch's max_pool2d; stride defaults to the kernel
    size; padding counts as -inf). x: (N, C, H, W) or (C, H, W)."""
    return _conv.max_pool(2, "max_pool2d", x, kernel_size, stride, padding, dilation, ceil_mode)


def max_pool3d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    """Maximum over each window (PyTorch's max_pool3d)."""
    return _conv.max_pool(3, "max_pool3d", x, kernel_size, stride, padding, dilation, ceil_mode)


def avg_pool1d(x, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    """Mean over each window (PyTorch's avg_pool1d)."""
    return _conv.avg_pool(1, "avg_pool1d", x, kernel_size, stride, padding, ceil_mode,
                          count_include_pad)


def avg_pool2d(x, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """Mean over each window (PyTorch's avg_pool2d; stride defaults to the kernel
    size; zero padding, counted in the divisor unless count_include_pad=False).
    x: (N, C, H, W) or (C, H, W)."""
    return _conv.avg_pool(2, "avg_pool2d", x, kernel_size, stride, padding, ceil_mode,
                          count_include_pad, divisor_override)


def avg_pool3d(x, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """Mean over each window (PyTorch's avg_pool3d)."""
    return _conv.avg_pool(3, "avg_pool3d", x, kernel_size, stride, padding, ceil_mode,
                          count_include_pad, divisor_override)


def adaptive_avg_pool1d(x, output_size):
    """PyTorch's adaptive_avg_pool1d: output length `output_size`."""
    return _conv.adaptive_pool(1, "adaptive_avg_pool1d", x, output_size, "mean")


def adaptive_avg_pool2d(x, output_size):
    """PyTorch's adaptive_avg_pool2d: output (H, W) = output_size (None keeps a size)."""
    return _conv.adaptive_pool(2, "adaptive_avg_pool2d", x, output_size, "mean")


def adaptive_max_pool1d(x, output_size):
    """PyTorch's adaptive_max_pool1d (values only)."""
    return _conv.adaptive_pool(1, "adaptive_max_pool1d", x, output_size, "max")


def adaptive_max_pool2d(x, output_size):
    """PyTorch's adaptive_max_pool2d (values only)."""
    return _conv.adaptive_pool(2, "adaptive_max_pool2d", x, output_size, "max")


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalise over the trailing `normalized_shape` dimensions (biased variance),
    then scale by weight and shift by bias (both of shape normalized_shape)."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if tuple(x.shape[x.ndim - len(shape):]) != shape:
        raise ValueError(f"layer_norm: input of shape {tuple(x.shape)} does not end in "
                         f"normalized_shape {shape}")
    y = _normalized(x, tuple(range(x.ndim - len(shape), x.ndim)), eps)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


@functools.partial(fgrad.custom_jvp, nondiff_argnums=(1, 2))
def _normalized(x, axes, eps):
    """(x - mean) / sqrt(var + eps) over `axes` (biased variance)."""
    return _statistics(x, axes, eps)[0]


def _statistics(x, axes, eps):
    mean = fnp.mean(x, axis=axes, keepdims=True)
    var = fnp.var(x, axis=axes, keepdims=True)     # float16: squares summed in float32
    r = lax.rsqrt(var + eps)
    return (x - mean) * r, r


@_normalized.defjvp
def _normalized_jvp(axes, eps, primals, tangents):
    """y' = r (x' - mean(x') - y mean(y x')) with r = 1 / sqrt(var + eps): reverse
    mode keeps y and r, and sums the two statistics of the cotangent in one pass
    (not the chain rule through the mean, the variance and rsqrt)."""
    (x,), (dx,) = primals, tangents
    y, r = _statistics(x, axes, eps)
    # both means first: transposed, both sums then precede their uses (one kernel)
    along_y = fnp.mean(y * dx, axis=axes, keepdims=True)
    mean = fnp.mean(dx, axis=axes, keepdims=True)
    return y, r * (dx - mean - y * along_y)


def batch_norm(x, running_mean, running_var, weight=None, bias=None, training=True,
               momentum=0.1, eps=1e-5):
    """Batch normalisation over every axis but the channel axis 1, as PyTorch.

    x: (N, C) or (N, C, ...). Returns (y, new_running_mean, new_running_var).
    training=True normalises with the batch mean and biased variance and moves the
    running statistics: new = (1 - momentum)·old + momentum·batch, with the unbiased
    batch variance for running_var. training=False normalises with the running
    statistics and returns them unchanged. momentum may be an array (e.g. the
    1 / count of a cumulative average, as the BatchNorm layer's momentum=None).
    """
    if training and momentum is None:
        raise TypeError("batch_norm: momentum=None (PyTorch's cumulative average) needs the "
                        "number of batches seen; use the BatchNorm layer, which counts "
                        "them, or pass momentum=1/count")
    if x.ndim < 2 or tuple(running_mean.shape) != (x.shape[1],):
        raise ValueError(f"batch_norm: expected input (N, C, ...) with C = "
                         f"{running_mean.shape[0]} channels (running_mean shape "
                         f"{tuple(running_mean.shape)}), got input shape {tuple(x.shape)}")
    axes = (0,) + tuple(range(2, x.ndim))
    channel = (1, -1) + (1,) * (x.ndim - 2)
    if training:
        count = int(np.prod(x.shape)) // x.shape[1]
        if count < 2:
            raise ValueError(f"batch_norm: training needs more than one value per channel, "
                             f"got input shape {tuple(x.shape)}; use eval mode for single "
                             f"examples")
        mean = fnp.mean(x, axis=axes)
        var = fnp.var(x, axis=axes)     # float16: squares summed in float32
        stats = lax.stop_gradient(mean), lax.stop_gradient(var * (count / (count - 1)))
        new_mean = (1 - momentum) * running_mean + momentum * stats[0]
        new_var = (1 - momentum) * running_var + momentum * stats[1]
        # the batch statistics' own rule: the backward pass keeps y and 1/sqrt(var + eps)
        y = _normalized(x, axes, eps)
    else:
        new_mean, new_var = running_mean, running_var
        y = (x - fnp.reshape(running_mean, channel)) * fnp.reshape(
            lax.rsqrt(running_var + eps), channel)
    if weight is not None:
        y = y * fnp.reshape(weight, channel)
    if bias is not None:
        y = y + fnp.reshape(bias, channel)
    return y, new_mean, new_var


def dropout(x, p, key, training=True):
    """Zero each element with probability p and scale the survivors by 1/(1-p)
    (inverted dropout, as PyTorch); the identity when training is False or p == 0."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: p must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return x
    if key is None:
        raise ValueError("dropout: training mode needs a PRNG key (key=...); pass one, or "
                         "use eval mode (fgrad_nn.eval_mode(model)) for inference")
    if p == 1.0:
        return fnp.zeros_like(x)
    from fgrad import random
    keep = random.bernoulli(key, 1.0 - p, tuple(x.shape))
    return fnp.where(keep, x / (1.0 - p), fnp.zeros_like(x))


def embedding(ids, weight):
    """Rows of weight (num_embeddings, dim) picked by integer ids of any shape:
    result shape ids.shape + (dim,)."""
    ids = fnp.asarray(ids)
    if ids.dtype.kind not in "iu":
        raise TypeError(f"embedding: ids must be integers, got dtype {ids.dtype}")
    return fnp.take(weight, ids, axis=0)


from fgrad_nn._attention import causal_mask, scaled_dot_product_attention  # noqa: E402,F401

__all__ += ["scaled_dot_product_attention", "causal_mask"]
