"""Linear: y = x @ weight.T + bias, with PyTorch's parameter layout and initialisation."""
import fgrad

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
