"""Functional forms of the layers: pure functions of arrays, parameters passed in.

Image functions use PyTorch's NCHW layout: input (N, C, H, W) or one example
(C, H, W); convolution weights are (out_channels, in_channels, kh, kw).

Convolution and pooling share one patch extractor (`_patches`, im2col): after
padding, each of the kh·kw kernel offsets is one strided slice of the input, so
the patches tensor is (N, C, kh·kw, Ho, Wo). A convolution is then a single
matmul with the flattened weight; pooling is a max or mean over the kernel axis.
Everything is built from fgrad.numpy / fgrad.lax, so it differentiates to any
order, vmaps and jits.
"""
import numpy as np

import fgrad.lax as lax
import fgrad.numpy as fnp

__all__ = ["linear", "conv2d", "max_pool2d", "avg_pool2d", "layer_norm", "batch_norm",
           "dropout", "embedding"]


def _is_int(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _pair(name, value):
    """An int or a pair of ints as a pair of non-negative ints (no floats, strings
    or bools: a stray 1.5 or 'same' is an error, not a truncation)."""
    if _is_int(value):
        value = (value, value)
    if not (isinstance(value, (tuple, list)) and len(value) == 2
            and all(_is_int(v) for v in value) and min(value) >= 0):
        raise ValueError(f"{name} must be a non-negative int or a pair of them, got {value!r}")
    return tuple(int(v) for v in value)


def _as_batch(name, x):
    """(x as a 4-d NCHW batch, whether a batch axis was added)."""
    if x.ndim == 4:
        return x, False
    if x.ndim == 3:
        return fnp.expand_dims(x, 0), True
    raise ValueError(f"{name}: expected input of shape (N, C, H, W) or (C, H, W), got "
                     f"shape {tuple(x.shape)}")


def _output_size(name, size, pad_total, kernel, stride, dilation, which):
    span = dilation * (kernel - 1) + 1
    if size + pad_total < span:
        raise ValueError(f"{name}: the {which} of the padded input ({size} + {pad_total}) is "
                         f"smaller than the dilated kernel ({span}); pad more or use a "
                         f"smaller kernel")
    return (size + pad_total - span) // stride + 1


def _check_padding(name, padding):
    """'valid' or 'same' (either case) as given, or an int or pair as a pair."""
    if isinstance(padding, str):
        if padding.lower() not in ("valid", "same"):
            raise ValueError(f"{name}: padding must be an int, a pair of ints, 'valid' or "
                             f"'same', got {padding!r}")
        return padding
    return _pair(f"{name}: padding", padding)


def _padding_config(name, padding, sizes, kernel, stride, dilation):
    """((top, bottom), (left, right)) from an int, a pair, 'valid' or 'same'.

    'same' is JAX's (and TensorFlow's) SAME, strides included: the output has
    ceil(size / stride) positions, and the padding this needs, max((out - 1)·stride +
    (kernel - 1)·dilation + 1 - size, 0), is split with the extra one at the end.
    With stride 1 it is PyTorch's padding='same'.
    """
    padding = _check_padding(name, padding)
    if isinstance(padding, tuple):
        return tuple((p, p) for p in padding)
    if padding.lower() == "valid":
        return ((0, 0), (0, 0))
    pads = []
    for n, k, s, d in zip(sizes, kernel, stride, dilation):
        out = -(-n // s)
        total = max((out - 1) * s + (k - 1) * d + 1 - n, 0)
        pads.append((total // 2, total - total // 2))
    return tuple(pads)


def _patches(name, x, kernel, stride, padding, dilation, pad_value):
    """im2col: x (N, C, H, W) -> patches (N, C, kh*kw, Ho, Wo), for static sizes."""
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    (pt, pb), (pl, pr) = padding
    n, c, h, w = x.shape
    ho = _output_size(name, h, pt + pb, kh, sh, dh, "height")
    wo = _output_size(name, w, pl + pr, kw, sw, dw, "width")
    if pt or pb or pl or pr:
        x = lax.pad(x, fnp.asarray(pad_value, x.dtype), [(0, 0, 0), (0, 0, 0), (pt, pb, 0),
                                                         (pl, pr, 0)])
    cols = []
    for i in range(kh):
        for j in range(kw):
            top, left = i * dh, j * dw
            cols.append(lax.slice(x, (0, 0, top, left),
                                  (n, c, top + (ho - 1) * sh + 1, left + (wo - 1) * sw + 1),
                                  (1, 1, sh, sw)))
    return fnp.stack(cols, axis=2), ho, wo


def linear(x, weight, bias=None):
    """x @ weight.T + bias, weight of shape (out_features, in_features) as in PyTorch;
    x may have any leading dimensions."""
    if x.shape[-1:] != weight.shape[1:]:
        raise ValueError(f"linear: input of shape {tuple(x.shape)} does not end in "
                         f"in_features={weight.shape[1]} (weight shape {tuple(weight.shape)})")
    y = fnp.matmul(x, fnp.transpose(weight))
    return y if bias is None else y + bias


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1):
    """2-d cross-correlation (PyTorch's conv2d, groups=1) by im2col and one matmul.

    x: (N, C, H, W) or (C, H, W); weight: (O, C, kh, kw); bias: (O,) or None.
    stride, dilation: int or pair; padding: int, pair, 'valid' or 'same' (zeros;
    'same' as JAX's SAME: Ho = ceil(H / stride) for any stride, see _padding_config).
    Returns (N, O, Ho, Wo) (or (O, Ho, Wo)) with
    Ho = (H + pad_top + pad_bottom - dilation*(kh-1) - 1) // stride + 1.
    """
    xb, added = _as_batch("conv2d", x)
    if weight.ndim != 4 or weight.shape[1] != xb.shape[1]:
        raise ValueError(f"conv2d: weight of shape {tuple(weight.shape)} does not fit input "
                         f"of shape {tuple(x.shape)}; weight must be (out_channels, "
                         f"in_channels={xb.shape[1]}, kh, kw)")
    o, c, kh, kw = weight.shape
    stride, dilation = _pair("conv2d: stride", stride), _pair("conv2d: dilation", dilation)
    if min(stride) < 1 or min(dilation) < 1:
        raise ValueError(f"conv2d: stride {stride} and dilation {dilation} must be >= 1")
    pads = _padding_config("conv2d", padding, xb.shape[2:], (kh, kw), stride, dilation)
    cols, ho, wo = _patches("conv2d", xb, (kh, kw), stride, pads, dilation, 0)
    n = xb.shape[0]
    cols = fnp.reshape(cols, (n, c * kh * kw, ho * wo))
    y = fnp.matmul(fnp.reshape(weight, (o, c * kh * kw)), cols)          # (N, O, Ho*Wo)
    y = fnp.reshape(y, (n, o, ho, wo))
    if bias is not None:
        y = y + fnp.reshape(bias, (o, 1, 1))
    return y[0] if added else y


def _pool_args(name, kernel_size, stride, padding, dilation):
    kernel = _pair(f"{name}: kernel_size", kernel_size)
    stride = kernel if stride is None else _pair(f"{name}: stride", stride)
    dilation = _pair(f"{name}: dilation", dilation)
    ph, pw = _pair(f"{name}: padding", padding)
    if min(kernel) < 1 or min(stride) < 1 or min(dilation) < 1:
        raise ValueError(f"{name}: kernel_size {kernel}, stride {stride} and dilation "
                         f"{dilation} must be >= 1")
    if 2 * ph > kernel[0] or 2 * pw > kernel[1]:
        raise ValueError(f"{name}: padding {(ph, pw)} must be at most half the kernel size "
                         f"{kernel}")
    return kernel, stride, ((ph, ph), (pw, pw)), dilation


def max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1):
    """Maximum over each window (PyTorch's max_pool2d; stride defaults to the kernel
    size; padding counts as -inf). x: (N, C, H, W) or (C, H, W)."""
    xb, added = _as_batch("max_pool2d", x)
    kernel, stride, pads, dilation = _pool_args("max_pool2d", kernel_size, stride, padding,
                                                dilation)
    if xb.dtype.kind != "f":
        raise TypeError(f"max_pool2d: expected a floating-point input, got {xb.dtype}")
    cols, _, _ = _patches("max_pool2d", xb, kernel, stride, pads, dilation, -np.inf)
    y = fnp.max(cols, axis=2)
    return y[0] if added else y


def avg_pool2d(x, kernel_size, stride=None, padding=0, count_include_pad=True):
    """Mean over each window (PyTorch's avg_pool2d; stride defaults to the kernel
    size; zero padding, counted in the divisor unless count_include_pad=False).
    x: (N, C, H, W) or (C, H, W)."""
    xb, added = _as_batch("avg_pool2d", x)
    kernel, stride, pads, dilation = _pool_args("avg_pool2d", kernel_size, stride, padding, 1)
    cols, ho, wo = _patches("avg_pool2d", xb, kernel, stride, pads, dilation, 0)
    total = fnp.sum(cols, axis=2)
    if count_include_pad:
        y = total / (kernel[0] * kernel[1])
    else:
        ones = fnp.ones((1, 1) + tuple(xb.shape[2:]), xb.dtype)
        counts, _, _ = _patches("avg_pool2d", ones, kernel, stride, pads, dilation, 0)
        y = total / fnp.sum(counts, axis=2)
    return y[0] if added else y


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalise over the trailing `normalized_shape` dimensions (biased variance),
    then scale by weight and shift by bias (both of shape normalized_shape)."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if tuple(x.shape[x.ndim - len(shape):]) != shape:
        raise ValueError(f"layer_norm: input of shape {tuple(x.shape)} does not end in "
                         f"normalized_shape {shape}")
    axes = tuple(range(x.ndim - len(shape), x.ndim))
    mean = fnp.mean(x, axis=axes, keepdims=True)
    var = fnp.var(x, axis=axes, keepdims=True)     # float16: squares summed in float32
    y = (x - mean) * lax.rsqrt(var + eps)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


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
    else:
        mean, var = running_mean, running_var
        new_mean, new_var = running_mean, running_var
    y = (x - fnp.reshape(mean, channel)) * fnp.reshape(lax.rsqrt(var + eps), channel)
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
