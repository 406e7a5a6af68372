"""Convolution layers: Conv1d/2d/3d and ConvTranspose1d/2d/3d with PyTorch's
parameter layout, initialisation and arguments (groups, dilation, padding modes)."""
import math

import fgrad

from fgrad_nn import _conv
from fgrad_nn.layers import _init
from fgrad_nn._checks import flag
from fgrad_nn.module import Module, static_field


class _ConvNd(Module):
    """Shared by Conv1d/2d/3d (`_n` spatial dims).

    weight: (out_channels, in_channels / groups, *kernel_size), bias: (out_channels,)
    or None, both drawn from U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in =
    in_channels / groups · prod(kernel_size), as in PyTorch.
    stride, dilation: int or tuple; padding: int, tuple, 'valid' or 'same' ('same' is
    JAX's SAME for every stride: output size ceil(input / stride); PyTorch's for
    stride 1); padding_mode: 'zeros', 'reflect', 'replicate' or 'circular'.
    Input: a batch (N, C, *spatial) or one example (C, *spatial).
    """
    weight: fgrad.Array
    bias: fgrad.Array
    in_channels: int = static_field()
    out_channels: int = static_field()
    kernel_size: tuple = static_field()
    stride: tuple = static_field()
    padding: object = static_field()
    dilation: tuple = static_field()
    groups: int = static_field()
    padding_mode: str = static_field()

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 dilation=1, groups=1, bias=True, padding_mode="zeros", *, key, dtype=None):
        n, name = self._n, type(self).__name__
        dtype = _init.resolve_dtype(dtype)
        self.kernel_size = _conv.ints(f"{name}: kernel_size", kernel_size, n)
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.groups = _conv.ints(f"{name}: groups", groups, 1)[0]
        if (self.groups < 1 or self.in_channels % self.groups
                or self.out_channels % self.groups):
            raise ValueError(f"{name}: in_channels {in_channels} and out_channels "
                             f"{out_channels} must be divisible by groups {groups}")
        self.stride = _conv.ints(f"{name}: stride", stride, n)
        self.dilation = _conv.ints(f"{name}: dilation", dilation, n)
        self.padding = _conv.check_padding(name, padding, n)
        self.padding_mode = _conv.check_padding_mode(name, padding_mode)
        fan_in = self.in_channels // self.groups * math.prod(self.kernel_size)
        wkey, bkey = _init.split(key, 2)
        shape = (self.out_channels, self.in_channels // self.groups) + self.kernel_size
        self.weight = _init.torch_weight(wkey, shape, dtype)
        bias = flag(name, "bias", bias)
        self.bias = _init.torch_bias(bkey, (self.out_channels,), fan_in, dtype) if bias else None

    def __call__(self, x, *, key=None):
        return _conv.conv(self._n, type(self).__name__, x, self.weight, self.bias, self.stride,
                          self.padding, self.dilation, self.groups, self.padding_mode)


class Conv1d(_ConvNd):
    """PyTorch's Conv1d: input (N, C, L) or (C, L); see _ConvNd."""
    _n = 1


class Conv2d(_ConvNd):
    """PyTorch's Conv2d: input (N, C, H, W) or (C, H, W); see _ConvNd."""
    _n = 2


class Conv3d(_ConvNd):
    """PyTorch's Conv3d: input (N, C, D, H, W) or (C, D, H, W); see _ConvNd."""
    _n = 3


class _ConvTransposeNd(Module):
    """Shared by ConvTranspose1d/2d/3d (`_n` spatial dims): the gradient of a
    convolution with respect to its input, as a layer.

    weight: (in_channels, out_channels / groups, *kernel_size) (PyTorch's layout),
    bias: (out_channels,) or None, both drawn from U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    with fan_in = out_channels / groups · prod(kernel_size), as PyTorch computes it.
    Output size per dim: (in - 1)·stride - 2·padding + dilation·(kernel - 1) +
    output_padding + 1 (output_padding < stride or < dilation).
    """
    weight: fgrad.Array
    bias: fgrad.Array
    in_channels: int = static_field()
    out_channels: int = static_field()
    kernel_size: tuple = static_field()
    stride: tuple = static_field()
    padding: tuple = static_field()
    output_padding: tuple = static_field()
    groups: int = static_field()
    dilation: tuple = static_field()

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros", *,
                 key, dtype=None):
        n, name = self._n, type(self).__name__
        if padding_mode != "zeros":
            raise ValueError(f"{name}: only padding_mode='zeros' is supported (as in "
                             f"PyTorch), got {padding_mode!r}")
        dtype = _init.resolve_dtype(dtype)
        self.kernel_size = _conv.ints(f"{name}: kernel_size", kernel_size, n)
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.groups = _conv.ints(f"{name}: groups", groups, 1)[0]
        if (self.groups < 1 or self.in_channels % self.groups
                or self.out_channels % self.groups):
            raise ValueError(f"{name}: in_channels {in_channels} and out_channels "
                             f"{out_channels} must be divisible by groups {groups}")
        self.stride = _conv.ints(f"{name}: stride", stride, n)
        self.padding = _conv.ints(f"{name}: padding", padding, n)
        self.output_padding = _conv.ints(f"{name}: output_padding", output_padding, n)
        self.dilation = _conv.ints(f"{name}: dilation", dilation, n)
        fan_in = self.out_channels // self.groups * math.prod(self.kernel_size)
        wkey, bkey = _init.split(key, 2)
        shape = (self.in_channels, self.out_channels // self.groups) + self.kernel_size
        self.weight = _init.torch_weight(wkey, shape, dtype)
        bias = flag(name, "bias", bias)
        self.bias = _init.torch_bias(bkey, (self.out_channels,), fan_in, dtype) if bias else None

    def __call__(self, x, *, key=None):
        return _conv.conv_transpose(self._n, type(self).__name__, x, self.weight, self.bias,
                                    self.stride, self.padding, self.output_padding,
                                    self.groups, self.dilation)


class ConvTranspose1d(_ConvTransposeNd):
    """PyTorch's ConvTranspose1d: input (N, C, L) or (C, L); see _ConvTransposeNd."""
    _n = 1


class ConvTranspose2d(_ConvTransposeNd):
    """PyTorch's ConvTranspose2d: input (N, C, H, W) or (C, H, W); see _ConvTransposeNd."""
    _n = 2


class ConvTranspose3d(_ConvTransposeNd):
    """PyTorch's ConvTranspose3d: input (N, C, D, H, W) or (C, D, H, W); see
    _ConvTransposeNd."""
    _n = 3
