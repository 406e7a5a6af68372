"""Activations as modules (stateless, elementwise or over one axis), and the
functions they wrap (fgrad.nn's). Any shape, one example or a batch."""
import numpy as np

from fgrad import nn
from fgrad.nn import gelu, relu, sigmoid, softmax, tanh  # noqa: F401  (the function forms)

from fgrad_nn.module import Module, static_field

__all__ = ["ReLU", "GELU", "Sigmoid", "Tanh", "Softmax", "Identity", "Lambda",
           "relu", "gelu", "sigmoid", "tanh", "softmax"]


class ReLU(Module):
    """max(x, 0)."""

    def __call__(self, x, *, key=None):
        return nn.relu(x)


class GELU(Module):
    """x·Φ(x); exact (erf) by default as PyTorch's GELU, the tanh approximation with
    approximate=True (note fgrad.nn.gelu defaults to the approximation, as JAX).

    approximate takes PyTorch's spellings too: 'none' (exact) and 'tanh'; any other
    value is an error rather than a guess (a non-empty string is truthy)."""
    approximate: bool = static_field()

    def __init__(self, approximate=False):
        self.approximate = _gelu_approximate(approximate)

    def __call__(self, x, *, key=None):
        return nn.gelu(x, approximate=self.approximate)


_GELU_SPELLINGS = {"none": False, "tanh": True}


def _gelu_approximate(value):
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, str) and value in _GELU_SPELLINGS:
        return _GELU_SPELLINGS[value]
    raise ValueError(f"GELU: approximate must be False or 'none' (exact, with erf) or True "
                     f"or 'tanh' (the tanh approximation), got {value!r}")


class Sigmoid(Module):
    """1 / (1 + exp(-x)), stable for large |x|."""

    def __call__(self, x, *, key=None):
        return nn.sigmoid(x)


class Tanh(Module):
    def __call__(self, x, *, key=None):
        return nn.tanh(x)


class Softmax(Module):
    """exp(x) / sum(exp(x)) along `axis` (default the last)."""
    axis: int = static_field(default=-1)

    def __call__(self, x, *, key=None):
        return nn.softmax(x, axis=self.axis)


class Identity(Module):
    def __call__(self, x, *, key=None):
        return x


class Lambda(Module):
    """Wraps a parameter-free function x -> y (e.g. fgrad.nn.relu) as a module; the
    function is static configuration, so it must be hashable."""
    fn: object = static_field()

    def __call__(self, x, *, key=None):
        return self.fn(x)
