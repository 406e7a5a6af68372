"""Convolution and pooling in 1, 2 and 3 spatial dims with PyTorch's semantics.

Channels-first layout: input (N, C, *spatial) or one example (C, *spatial);
convolution weights (out_channels, in_channels / groups, *kernel), transposed
convolution weights (in_channels, out_channels / groups, *kernel).

Convolutions are one `fgrad.lax.conv_general_dilated` each (a native kernel
under jit, for the forward pass and both gradients). Average pooling is a
convolution of every channel with one constant kernel. Max pooling over
non-overlapping windows (stride = kernel, no dilation) is a reshape and a max;
overlapping windows take one strided slice per kernel offset.
"""
import math

import numpy as np

import fgrad.lax as lax
import fgrad.numpy as fnp

_TUPLE_WORDS = {1: "a 1-tuple", 2: "a pair", 3: "a triple"}
_LAYOUTS = {1: "(N, C, L) or (C, L)", 2: "(N, C, H, W) or (C, H, W)",
            3: "(N, C, D, H, W) or (C, D, H, W)"}
_PAD_MODES = {"zeros": None, "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def is_int(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def ints(name, value, n):
    """An int or an n-tuple of ints as a tuple of non-negative ints (no floats,
    strings or bools: a stray 1.5 or 'same' is an error, not a truncation)."""
    if is_int(value):
        value = (value,) * n
    if not (isinstance(value, (tuple, list)) and len(value) == n
            and all(is_int(v) for v in value) and min(value) >= 0):
        raise ValueError(f"{name} must be a non-negative int or {_TUPLE_WORDS[n]} of them, "
                         f"got {value!r}")
    return tuple(int(v) for v in value)


def check_padding(name, padding, n):
    """'valid' or 'same' (either case) as given, or an int or n-tuple as a tuple."""
    if isinstance(padding, str):
        if padding.lower() not in ("valid", "same"):
            raise ValueError(f"{name}: padding must be an int, {_TUPLE_WORDS[n]} of ints, "
                             f"'valid' or 'same', got {padding!r}")
        return padding
    return ints(f"{name}: padding", padding, n)


def check_padding_mode(name, mode):
    if mode not in _PAD_MODES:
        raise ValueError(f"{name}: padding_mode must be one of {sorted(_PAD_MODES)}, "
                         f"got {mode!r}")
    return mode


def as_batch(name, x, n):
    """(x with a batch axis, whether one was added)."""
    if x.ndim == n + 2:
        return x, False
    if x.ndim == n + 1:
        return fnp.expand_dims(x, 0), True
    raise ValueError(f"{name}: expected input of shape {_LAYOUTS[n]}, got shape "
                     f"{tuple(x.shape)}")


def _check_fits(name, sizes, pads, kernel, dilation):
    which = ("length",) if len(sizes) == 1 else ("height", "width") if len(sizes) == 2 \
        else ("depth", "height", "width")
    for size, (lo, hi), k, d, w in zip(sizes, pads, kernel, dilation, which):
        span = d * (k - 1) + 1
        if size + lo + hi < span:
            raise ValueError(f"{name}: the {w} of the padded input ({size} + {lo + hi}) is "
                             f"smaller than the dilated kernel ({span}); pad more or use a "
                             f"smaller kernel")


def padding_pairs(name, padding, sizes, kernel, stride, dilation):
    """(lo, hi) per spatial dim from an int, a tuple, 'valid' or 'same'.

    'same' is JAX's (and TensorFlow's) SAME, strides included: the output has
    ceil(size / stride) positions, and the padding this needs, max((out - 1)·stride +
    (kernel - 1)·dilation + 1 - size, 0), is split with the extra one at the end.
    With stride 1 it is PyTorch's padding='same'.
    """
    padding = check_padding(name, padding, len(sizes))
    if isinstance(padding, tuple):
        return tuple((p, p) for p in padding)
    if padding.lower() == "valid":
        return tuple((0, 0) for _ in sizes)
    pads = []
    for n, k, s, d in zip(sizes, kernel, stride, dilation):
        out = -(-n // s)
        total = max((out - 1) * s + (k - 1) * d + 1 - n, 0)
        pads.append((total // 2, total - total // 2))
    return tuple(pads)


def _common_dtype(x, weight):
    dtype = fnp.result_type(x, weight)
    return fnp.asarray(x, dtype), fnp.asarray(weight, dtype)


def _add_bias(y, bias, n):
    return y if bias is None else y + fnp.reshape(bias, (-1,) + (1,) * n)


def conv(n, name, x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1,
         padding_mode="zeros"):
    """N-d cross-correlation (PyTorch's conv1d/2d/3d, plus padding_mode)."""
    xb, added = as_batch(name, x, n)
    groups = ints(f"{name}: groups", groups, 1)[0]
    c = xb.shape[1]
    if (weight.ndim != n + 2 or groups < 1 or c % groups or weight.shape[0] % groups
            or weight.shape[1] * groups != c):
        raise ValueError(f"{name}: weight of shape {tuple(weight.shape)} does not fit input "
                         f"of shape {tuple(x.shape)} with groups={groups}; weight must be "
                         f"(out_channels, in_channels={c} / groups, *kernel), out_channels "
                         f"divisible by groups")
    kernel = tuple(weight.shape[2:])
    stride, dilation = ints(f"{name}: stride", stride, n), ints(f"{name}: dilation", dilation, n)
    if min(stride) < 1 or min(dilation) < 1:
        raise ValueError(f"{name}: stride {stride} and dilation {dilation} must be >= 1")
    pads = padding_pairs(name, padding, xb.shape[2:], kernel, stride, dilation)
    mode = _PAD_MODES[check_padding_mode(name, padding_mode)]
    if mode is not None and any(lo or hi for lo, hi in pads):
        xb = fnp.pad(xb, [(0, 0), (0, 0), *pads], mode=mode)
        pads = tuple((0, 0) for _ in pads)
    _check_fits(name, xb.shape[2:], pads, kernel, dilation)
    xb, weight = _common_dtype(xb, weight)
    y = lax.conv_general_dilated(xb, weight, stride, pads, None, dilation,
                                 feature_group_count=groups)
    y = _add_bias(y, bias, n)
    return y[0] if added else y


def conv_transpose(n, name, x, weight, bias=None, stride=1, padding=0, output_padding=0,
                   groups=1, dilation=1):
    """N-d transposed convolution (PyTorch's conv_transpose1d/2d/3d): the gradient of
    conv with respect to its input. Output size per dim:
    (in - 1)·stride - 2·padding + dilation·(kernel - 1) + output_padding + 1."""
    xb, added = as_batch(name, x, n)
    groups = ints(f"{name}: groups", groups, 1)[0]
    c = xb.shape[1]
    if weight.ndim != n + 2 or groups < 1 or weight.shape[0] != c or c % groups:
        raise ValueError(f"{name}: weight of shape {tuple(weight.shape)} does not fit input "
                         f"of shape {tuple(x.shape)} with groups={groups}; weight must be "
                         f"(in_channels={c}, out_channels / groups, *kernel)")
    kernel = tuple(weight.shape[2:])
    stride, dilation = ints(f"{name}: stride", stride, n), ints(f"{name}: dilation", dilation, n)
    padding = ints(f"{name}: padding", padding, n)
    output_padding = ints(f"{name}: output_padding", output_padding, n)
    if min(stride) < 1 or min(dilation) < 1:
        raise ValueError(f"{name}: stride {stride} and dilation {dilation} must be >= 1")
    if any(op >= s and op >= d for op, s, d in zip(output_padding, stride, dilation)):
        raise ValueError(f"{name}: output_padding {output_padding} must be smaller than "
                         f"either stride {stride} or dilation {dilation}")
    pads = []
    for k, d, p, op, size, s in zip(kernel, dilation, padding, output_padding, xb.shape[2:],
                                    stride):
        lo = d * (k - 1) - p
        pads.append((lo, lo + op))
        if (size - 1) * s - 2 * p + d * (k - 1) + op + 1 <= 0:
            raise ValueError(f"{name}: padding {padding} leaves no output for input of "
                             f"shape {tuple(x.shape)}")
    xb, weight = _common_dtype(xb, weight)
    flipped = lax.rev(weight, tuple(range(2, n + 2)))
    spatial = tuple(range(2, n + 2))
    if groups == 1:     # weight (in, out, *k) read as (O, I) = axes (1, 0)
        dn = lax.ConvDimensionNumbers((0, 1) + spatial, (1, 0) + spatial, (0, 1) + spatial)
        y = lax.conv_general_dilated(xb, flipped, (1,) * n, pads, stride, dilation, dn)
    else:               # (g·in/g, out/g, *k) -> (g·out/g, in/g, *k)
        cin_g, cout_g = c // groups, weight.shape[1]
        w = fnp.reshape(flipped, (groups, cin_g, cout_g) + kernel)
        w = fnp.reshape(fnp.swapaxes(w, 1, 2), (groups * cout_g, cin_g) + kernel)
        y = lax.conv_general_dilated(xb, w, (1,) * n, pads, stride, dilation,
                                     feature_group_count=groups)
    y = _add_bias(y, bias, n)
    return y[0] if added else y


# ----------------------------------------------------------------------------
# Pooling

def _pool_args(n, name, kernel_size, stride, padding, dilation):
    kernel = ints(f"{name}: kernel_size", kernel_size, n)
    stride = kernel if stride is None else ints(f"{name}: stride", stride, n)
    dilation = ints(f"{name}: dilation", dilation, n)
    padding = ints(f"{name}: padding", padding, n)
    if min(kernel) < 1 or min(stride) < 1 or min(dilation) < 1:
        raise ValueError(f"{name}: kernel_size {kernel}, stride {stride} and dilation "
                         f"{dilation} must be >= 1")
    if any(2 * p > k for p, k in zip(padding, kernel)):
        raise ValueError(f"{name}: padding {padding} must be at most half the kernel size "
                         f"{kernel}")
    return kernel, stride, padding, dilation


def _pool_sizes(name, sizes, kernel, stride, padding, dilation, ceil_mode):
    """Output sizes (PyTorch's rule: with ceil_mode a last window must start inside
    the input or its left padding)."""
    out = []
    for size, k, s, p, d in zip(sizes, kernel, stride, padding, dilation):
        span = d * (k - 1) + 1
        if size + 2 * p < span:
            raise ValueError(f"{name}: input size {size} with padding {p} is smaller than the "
                             f"window ({span})")
        room = size + 2 * p - span
        o = (-(-room // s) if ceil_mode else room // s) + 1
        if ceil_mode and (o - 1) * s >= size + p:
            o -= 1
        out.append(o)
    return out


def max_pool(n, name, x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    """Maximum over each window (PyTorch's max_pool1d/2d/3d; padding counts as -inf)."""
    xb, added = as_batch(name, x, n)
    kernel, stride, padding, dilation = _pool_args(n, name, kernel_size, stride, padding,
                                                   dilation)
    if xb.dtype.kind != "f":
        raise TypeError(f"{name}: expected a floating-point input, got {xb.dtype}")
    sizes = tuple(xb.shape[2:])
    outs = _pool_sizes(name, sizes, kernel, stride, padding, dilation, ceil_mode)
    # the input, padded (or cut) to exactly what the windows read
    ends = [(o - 1) * s + d * (k - 1) + 1 for o, s, d, k in zip(outs, stride, dilation, kernel)]
    neg = fnp.asarray(-np.inf, xb.dtype)
    config = [(0, 0, 0), (0, 0, 0)] + [(p, 0, 0) for p in padding]
    if any(padding):
        xb = lax.pad(xb, neg, config)
    extra = [e - (size + p) for e, size, p in zip(ends, sizes, padding)]
    if any(e > 0 for e in extra):
        xb = lax.pad(xb, neg, [(0, 0, 0), (0, 0, 0)] + [(0, max(e, 0), 0) for e in extra])
    if any(e < 0 for e in extra):
        xb = lax.slice(xb, (0,) * (n + 2), tuple(xb.shape[:2]) + tuple(ends))
    y = lax.reduce_window_max(xb, (1, 1) + tuple(kernel), (1, 1) + tuple(stride), "VALID",
                              (1, 1) + tuple(dilation))
    return y[0] if added else y


def _divisors(sizes, outs, kernel, stride, padding, count_include_pad, divisor_override):
    """PyTorch's avg-pool divisor per output position: the window clipped to the
    padded input (count_include_pad) or to the input itself."""
    if divisor_override is not None:
        return float(divisor_override)
    per_dim = []
    for size, o, k, s, p in zip(sizes, outs, kernel, stride, padding):
        start = np.arange(o) * s - p
        end = np.minimum(start + k, size + p)
        if not count_include_pad:
            start, end = np.maximum(start, 0), np.minimum(end, size)
        per_dim.append((end - start).astype(np.float64))
    total = per_dim[0]
    for d in per_dim[1:]:
        total = np.multiply.outer(total, d)
    if np.all(total == math.prod(kernel)):
        return float(math.prod(kernel))
    return total


def avg_pool(n, name, x, kernel_size, stride=None, padding=0, ceil_mode=False,
             count_include_pad=True, divisor_override=None):
    """Mean over each window (PyTorch's avg_pool1d/2d/3d): a sum by convolving every
    channel with a kernel of ones, divided by PyTorch's divisor."""
    xb, added = as_batch(name, x, n)
    kernel, stride, padding, _ = _pool_args(n, name, kernel_size, stride, padding, 1)
    if xb.dtype.kind != "f":
        raise TypeError(f"{name}: expected a floating-point input, got {xb.dtype}")
    sizes = tuple(xb.shape[2:])
    outs = _pool_sizes(name, sizes, kernel, stride, padding, (1,) * n, ceil_mode)
    pads = [(p, (o - 1) * s + k - size - p) for p, o, s, k, size in
            zip(padding, outs, stride, kernel, sizes)]
    batch, channels = xb.shape[:2]
    flat = fnp.reshape(xb, (batch * channels, 1) + sizes)
    ones = fnp.ones((1, 1) + kernel, xb.dtype)
    total = lax.conv_general_dilated(flat, ones, stride, pads)
    total = fnp.reshape(total, (batch, channels) + tuple(outs))
    divisor = _divisors(sizes, outs, kernel, stride, padding, count_include_pad,
                        divisor_override)
    y = total / fnp.asarray(divisor, xb.dtype)
    return y[0] if added else y


def _adaptive_bounds(size, out):
    """PyTorch's adaptive windows: [floor(i·size/out), ceil((i+1)·size/out))."""
    return [(i * size // out, -(-(i + 1) * size // out)) for i in range(out)]


def _output_size(name, output_size, sizes):
    n = len(sizes)
    if output_size is None or is_int(output_size):
        output_size = (output_size,) * n
    if not (isinstance(output_size, (tuple, list)) and len(output_size) == n):
        raise ValueError(f"{name}: output_size must be an int, None or {_TUPLE_WORDS[n]} "
                         f"of them, got {output_size!r}")
    out = tuple(s if o is None else o for o, s in zip(output_size, sizes))
    if not all(is_int(o) and o >= 1 for o in out):
        raise ValueError(f"{name}: output_size entries must be positive ints, got "
                         f"{output_size!r}")
    return out


def adaptive_pool(n, name, x, output_size, reduce):
    """Adaptive pooling (PyTorch's): windows cover the input as evenly as they can.
    An evenly dividing size is a plain pool; otherwise each axis is pooled in turn
    (the windows are products of intervals), one slice per output position."""
    xb, added = as_batch(name, x, n)
    sizes = tuple(xb.shape[2:])
    outs = _output_size(name, output_size, sizes)
    if all(s % o == 0 for s, o in zip(sizes, outs)):
        kernel = tuple(s // o for s, o in zip(sizes, outs))
        y = (max_pool(n, name, xb, kernel) if reduce == "max"
             else avg_pool(n, name, xb, kernel))
    else:
        if reduce == "max" and xb.dtype.kind != "f":
            raise TypeError(f"{name}: expected a floating-point input, got {xb.dtype}")
        y = xb
        fn = fnp.max if reduce == "max" else fnp.mean
        for axis, (size, out) in enumerate(zip(sizes, outs), start=2):
            if size == out:
                continue
            parts = [fn(lax.slice_in_dim(y, lo, hi, axis=axis), axis=axis, keepdims=True)
                     for lo, hi in _adaptive_bounds(size, out)]
            y = fnp.concatenate(parts, axis=axis)
    return y[0] if added else y
