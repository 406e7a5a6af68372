"""Pooling layers with PyTorch's arguments and defaults: max and average pooling
over 1-, 2- and 3-d windows (ceil_mode, count_include_pad) and adaptive pooling
(channels first; a batch (N, C, *spatial) or one example (C, *spatial))."""
from fgrad_nn import _conv
from fgrad_nn._checks import flag
from fgrad_nn.module import Module, static_field


class _MaxPoolNd(Module):
    """Maximum over each kernel_size window (stride defaults to kernel_size; padding
    counts as -inf; ceil_mode keeps a last partial window that starts inside the
    input or its left padding). return_indices is not supported."""
    kernel_size: object = static_field()
    stride: object = static_field(default=None)
    padding: object = static_field(default=0)
    dilation: object = static_field(default=1)
    return_indices: bool = static_field(default=False)
    ceil_mode: bool = static_field(default=False)

    def __post_init__(self):
        name = type(self).__name__
        if flag(name, "return_indices", self.return_indices):
            raise ValueError(f"{name}: return_indices=True is not supported")
        flag(name, "ceil_mode", self.ceil_mode)

    def __call__(self, x, *, key=None):
        return _conv.max_pool(self._n, type(self).__name__, x, self.kernel_size, self.stride,
                              self.padding, self.dilation, self.ceil_mode)


class MaxPool1d(_MaxPoolNd):
    """PyTorch's MaxPool1d; see _MaxPoolNd."""
    _n = 1


class MaxPool2d(_MaxPoolNd):
    """PyTorch's MaxPool2d; see _MaxPoolNd."""
    _n = 2


class MaxPool3d(_MaxPoolNd):
    """PyTorch's MaxPool3d; see _MaxPoolNd."""
    _n = 3


class _AvgPoolNd(Module):
    """Mean over each kernel_size window (stride defaults to kernel_size; zero
    padding, counted in the divisor unless count_include_pad=False; ceil_mode as
    for max pooling; divisor_override replaces the divisor), as PyTorch."""
    kernel_size: object = static_field()
    stride: object = static_field(default=None)
    padding: object = static_field(default=0)
    ceil_mode: bool = static_field(default=False)
    count_include_pad: bool = static_field(default=True)
    divisor_override: object = static_field(default=None)

    def __post_init__(self):
        name = type(self).__name__
        flag(name, "ceil_mode", self.ceil_mode)
        flag(name, "count_include_pad", self.count_include_pad)

    def __call__(self, x, *, key=None):
        return _conv.avg_pool(self._n, type(self).__name__, x, self.kernel_size, self.stride,
                              self.padding, self.ceil_mode, self.count_include_pad,
                              self.divisor_override)


class AvgPool1d(_AvgPoolNd):
    """PyTorch's AvgPool1d; see _AvgPoolNd."""
    _n = 1


class AvgPool2d(_AvgPoolNd):
    """PyTorch's AvgPool2d; see _AvgPoolNd."""
    _n = 2


class AvgPool3d(_AvgPoolNd):
    """PyTorch's AvgPool3d; see _AvgPoolNd."""
    _n = 3


class _AdaptivePoolNd(Module):
    """Pools to a fixed output size: window i of an axis of size n covers
    [floor(i·n/out), ceil((i+1)·n/out)), as PyTorch's adaptive pooling; an
    output_size entry of None keeps that axis."""
    output_size: object = static_field()

    def __call__(self, x, *, key=None):
        return _conv.adaptive_pool(self._n, type(self).__name__, x, self.output_size,
                                   self._reduce)


class AdaptiveAvgPool1d(_AdaptivePoolNd):
    """PyTorch's AdaptiveAvgPool1d; see _AdaptivePoolNd."""
    _n, _reduce = 1, "mean"


class AdaptiveAvgPool2d(_AdaptivePoolNd):
    """PyTorch's AdaptiveAvgPool2d; see _AdaptivePoolNd."""
    _n, _reduce = 2, "mean"


class AdaptiveMaxPool1d(_AdaptivePoolNd):
    """PyTorch's AdaptiveMaxPool1d (values only); see _AdaptivePoolNd."""
    _n, _reduce = 1, "max"


class AdaptiveMaxPool2d(_AdaptivePoolNd):
    """PyTorch's AdaptiveMaxPool2d (values only); see _AdaptivePoolNd."""
    _n, _reduce = 2, "max"
