"""Conv2d: 2-d convolution (cross-correlation) in NCHW by im2col and one matmul."""
import fgrad

from fgrad_nn import functional as F
from fgrad_nn.layers import _init
from fgrad_nn._checks import flag
from fgrad_nn.module import Module, static_field


class Conv2d(Module):
    """PyTorch's Conv2d with groups=1.

    weight: (out_channels, in_channels, kh, kw), bias: (out_channels,) or None, both
    drawn from U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = in_channels·kh·kw.
    stride, dilation: int or pair; padding: int, pair, 'valid' or 'same' (zeros;
    'same' is JAX's SAME for every stride: output size ceil(input / stride)).
    Input: a batch (N, C, H, W) or one example (C, H, W); output (N, O, Ho, Wo) or
    (O, Ho, Wo).
    """
    weight: fgrad.Array
    bias: fgrad.Array
    in_channels: int = static_field()
    out_channels: int = static_field()
    kernel_size: tuple = static_field()
    stride: tuple = static_field()
    padding: object = static_field()
    dilation: tuple = static_field()

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 dilation=1, bias=True, *, key, dtype=None):
        dtype = _init.resolve_dtype(dtype)
        kh, kw = F._pair("Conv2d: kernel_size", kernel_size)
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.kernel_size = (kh, kw)
        self.stride = F._pair("Conv2d: stride", stride)
        self.dilation = F._pair("Conv2d: dilation", dilation)
        self.padding = F._check_padding("Conv2d", padding)
        fan_in = self.in_channels * kh * kw
        wkey, bkey = _init.split(key, 2)
        self.weight = _init.torch_weight(wkey, (out_channels, in_channels, kh, kw), dtype)
        bias = flag("Conv2d", "bias", bias)
        self.bias = _init.torch_bias(bkey, (out_channels,), fan_in, dtype) if bias else None

    def __call__(self, x, *, key=None):
        return F.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation)
