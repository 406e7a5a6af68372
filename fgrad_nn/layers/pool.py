"""Max and average pooling over 2-d windows (NCHW)."""
from fgrad_nn import functional as F
from fgrad_nn._checks import flag
from fgrad_nn.module import Module, static_field


class MaxPool2d(Module):
    """Maximum over each kernel_size window (stride defaults to kernel_size; padding
    counts as -inf). Input: a batch (N, C, H, W) or one example (C, H, W)."""
    kernel_size: object = static_field()
    stride: object = static_field(default=None)
    padding: object = static_field(default=0)
    dilation: object = static_field(default=1)

    def __call__(self, x, *, key=None):
        return F.max_pool2d(x, self.kernel_size, self.stride, self.padding, self.dilation)


class AvgPool2d(Module):
    """Mean over each kernel_size window (stride defaults to kernel_size; zero padding
    counted in the divisor unless count_include_pad=False, as PyTorch).
    Input: a batch (N, C, H, W) or one example (C, H, W)."""
    kernel_size: object = static_field()
    stride: object = static_field(default=None)
    padding: object = static_field(default=0)
    count_include_pad: bool = static_field(default=True)

    def __post_init__(self):
        flag("AvgPool2d", "count_include_pad", self.count_include_pad)

    def __call__(self, x, *, key=None):
        return F.avg_pool2d(x, self.kernel_size, self.stride, self.padding,
                            self.count_include_pad)
