"""Linear (y = x @ weight.T + bias) and Bilinear, with PyTorch's parameter layouts and
initialisation."""
import math

import fgrad
import fgrad.numpy as fnp
from fgrad import random

from fgrad_nn import functional as F
from fgrad_nn.layers import _init
from fgrad_nn._checks import flag
from fgrad_nn.module import Module, static_field


class Linear(Module):
    """Affine map from in_features to out_features.

    weight: (out_features, in_features), bias: (out_features,) or None, both drawn
    from U(-1/sqrt(in_features), 1/sqrt(in_features)) as in PyTorch.
    Input: (..., in_features), one example or any batch; output (..., out_features).
    """
    weight: fgrad.Array
    bias: fgrad.Array
    in_features: int = static_field()
    out_features: int = static_field()

    def __init__(self, in_features, out_features, bias=True, *, key, dtype=None):
        dtype = _init.resolve_dtype(dtype)
        wkey, bkey = _init.split(key, 2)
        self.in_features, self.out_features = int(in_features), int(out_features)
        self.weight = _init.torch_weight(wkey, (out_features, in_features), dtype)
        bias = flag("Linear", "bias", bias)
        self.bias = _init.torch_bias(bkey, (out_features,), in_features, dtype) if bias else None

    def __call__(self, x, *, key=None):
        return F.linear(x, self.weight, self.bias)


class Bilinear(Module):
    """y_o = x1 · weight[o] · x2 + bias[o], as PyTorch's Bilinear.

    weight: (out_features, in1_features, in2_features), bias: (out_features,) or
    None, both drawn from U(-1/sqrt(in1_features), 1/sqrt(in1_features)) as PyTorch.
    Inputs: (..., in1_features) and (..., in2_features) with the same leading shape
    (one example or any batch); output (..., out_features)."""
    weight: fgrad.Array
    bias: fgrad.Array
    in1_features: int = static_field()
    in2_features: int = static_field()
    out_features: int = static_field()

    def __init__(self, in1_features, in2_features, out_features, bias=True, *, key,
                 dtype=None):
        dtype = _init.resolve_dtype(dtype)
        wkey, bkey = _init.split(key, 2)
        self.in1_features, self.in2_features = int(in1_features), int(in2_features)
        self.out_features = int(out_features)
        shape = (self.out_features, self.in1_features, self.in2_features)
        bound = 1 / math.sqrt(self.in1_features)
        self.weight = random.uniform(wkey, shape, dtype, -bound, bound)
        bias = flag("Bilinear", "bias", bias)
        self.bias = (random.uniform(bkey, (self.out_features,), dtype, -bound, bound)
                     if bias else None)

    def __call__(self, x1, x2, *, key=None):
        if x1.shape[-1:] != (self.in1_features,) or x2.shape[-1:] != (self.in2_features,) \
                or x1.shape[:-1] != x2.shape[:-1]:
            raise ValueError(f"Bilinear: expected inputs (..., {self.in1_features}) and "
                             f"(..., {self.in2_features}) with the same leading shape, got "
                             f"{tuple(x1.shape)} and {tuple(x2.shape)}")
        y = fnp.einsum("...i,oij,...j->...o", x1, self.weight, x2)
        return y if self.bias is None else y + self.bias
