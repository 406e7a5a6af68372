"""Activations as modules (stateless, elementwise or over one axis), and the
functions they wrap (fgrad.nn's). Any shape, one example or a batch."""
import numpy as np

import fgrad.numpy as fnp
from fgrad import nn
from fgrad.nn import gelu, relu, sigmoid, softmax, tanh  # noqa: F401  (the function forms)

from fgrad_nn.module import Module, static_field

__all__ = ["ReLU", "GELU", "Sigmoid", "Tanh", "Softmax", "Identity", "Lambda",
           "relu", "gelu", "sigmoid", "tanh", "softmax", "SiLU", "Mish", "ReLU6", "LeakyReLU",
           "ELU", "CELU", "SELU", "Softplus", "Hardtanh", "Hardsigmoid", "Hardswish",
           "LogSigmoid", "Softsign", "Tanhshrink", "LogSoftmax", "GLU"]


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


# ----------------------------------------------------------------------------
# One module per remaining fgrad.nn activation, with PyTorch's names and defaults.

class SiLU(Module):
    """x·sigmoid(x) (also called swish)."""

    def __call__(self, x, *, key=None):
        return nn.silu(x)


class Mish(Module):
    """x·tanh(softplus(x))."""

    def __call__(self, x, *, key=None):
        return nn.mish(x)


class ReLU6(Module):
    """min(max(x, 0), 6)."""

    def __call__(self, x, *, key=None):
        return nn.relu6(x)


class LeakyReLU(Module):
    """x for x ≥ 0, negative_slope·x otherwise (PyTorch's default slope 0.01)."""
    negative_slope: float = static_field(default=0.01)

    def __call__(self, x, *, key=None):
        return nn.leaky_relu(x, self.negative_slope)


class ELU(Module):
    """x for x > 0, alpha·(exp(x) - 1) otherwise."""
    alpha: float = static_field(default=1.0)

    def __call__(self, x, *, key=None):
        return nn.elu(x, self.alpha)


class CELU(Module):
    """x for x > 0, alpha·(exp(x / alpha) - 1) otherwise."""
    alpha: float = static_field(default=1.0)

    def __call__(self, x, *, key=None):
        return nn.celu(x, self.alpha)


class SELU(Module):
    """scale·elu(x, alpha) with the self-normalising constants."""

    def __call__(self, x, *, key=None):
        return nn.selu(x)


class Softplus(Module):
    """log(1 + exp(beta·x)) / beta, and x itself where beta·x > threshold (PyTorch's
    linear tail, defaults beta=1, threshold=20)."""
    beta: float = static_field(default=1.0)
    threshold: float = static_field(default=20.0)

    def __call__(self, x, *, key=None):
        x = fnp.asarray(x)
        scaled = x * self.beta
        return fnp.where(scaled > self.threshold, x, nn.softplus(scaled) / self.beta)


class Hardtanh(Module):
    """x clipped to [min_val, max_val] (default [-1, 1])."""
    min_val: float = static_field(default=-1.0)
    max_val: float = static_field(default=1.0)

    def __call__(self, x, *, key=None):
        if (self.min_val, self.max_val) == (-1.0, 1.0):
            return nn.hard_tanh(x)
        x = fnp.asarray(x)
        return fnp.where(x < self.min_val, self.min_val,
                         fnp.where(x > self.max_val, self.max_val, x))


class Hardsigmoid(Module):
    """relu6(x + 3) / 6."""

    def __call__(self, x, *, key=None):
        return nn.hard_sigmoid(x)


class Hardswish(Module):
    """x·relu6(x + 3) / 6."""

    def __call__(self, x, *, key=None):
        return nn.hard_swish(x)


class LogSigmoid(Module):
    """log(sigmoid(x)), stable."""

    def __call__(self, x, *, key=None):
        return nn.log_sigmoid(x)


class Softsign(Module):
    """x / (1 + |x|)."""

    def __call__(self, x, *, key=None):
        return nn.soft_sign(x)


class Tanhshrink(Module):
    """x - tanh(x)."""

    def __call__(self, x, *, key=None):
        x = fnp.asarray(x)
        return x - nn.tanh(x)


class LogSoftmax(Module):
    """log(softmax(x)) along `axis` (default the last), stable."""
    axis: int = static_field(default=-1)

    def __call__(self, x, *, key=None):
        return nn.log_softmax(x, axis=self.axis)


class GLU(Module):
    """Gated linear unit: halves a, b of x along `axis` (PyTorch's default -1);
    a·sigmoid(b)."""
    axis: int = static_field(default=-1)

    def __call__(self, x, *, key=None):
        return nn.glu(x, axis=self.axis)
