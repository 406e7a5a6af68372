"""Normalisation layers: LayerNorm (stateless) and BatchNorm (explicit running state)."""
from typing import NamedTuple

import fgrad
import fgrad.numpy as fnp

from fgrad_nn import functional as F
from fgrad_nn.layers import _init
from fgrad_nn._checks import flag
from fgrad_nn.module import Module, static_field


class LayerNorm(Module):
    """Normalise over the trailing `normalized_shape` dimensions, then scale and shift
    by weight (ones) and bias (zeros) of that shape, as PyTorch's LayerNorm.
    Input: (..., *normalized_shape), one example or any batch."""
    weight: fgrad.Array
    bias: fgrad.Array
    normalized_shape: tuple = static_field()
    eps: float = static_field()

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, *, dtype=None):
        shape = ((int(normalized_shape),) if isinstance(normalized_shape, int)
                 else tuple(int(n) for n in normalized_shape))
        dtype = _init.resolve_dtype(dtype)
        elementwise_affine = flag("LayerNorm", "elementwise_affine", elementwise_affine)
        self.normalized_shape, self.eps = shape, float(eps)
        self.weight = fnp.ones(shape, dtype) if elementwise_affine else None
        self.bias = fnp.zeros(shape, dtype) if elementwise_affine else None

    def __call__(self, x, *, key=None):
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)


class BatchNormState(NamedTuple):
    """BatchNorm's running statistics, kept outside the parameters; with
    momentum=None also the number of training batches seen (int32; else None)."""
    running_mean: fgrad.Array
    running_var: fgrad.Array
    num_batches_tracked: object = None


class BatchNorm(Module):
    """Batch normalisation over every axis but the channel axis 1 (PyTorch's
    BatchNorm1d on (N, C) or (N, C, L), BatchNorm2d on (N, C, H, W)).

    Stateful: the running statistics are a separate pytree,

        state = bn.init_state()                 # running_mean 0, running_var 1
        y, state = bn(x, state)                 # training: batch statistics, state moves
        y, _ = fgrad_nn.eval_mode(bn)(x, state) # eval: running statistics, state unchanged

    The running update is PyTorch's: new = (1 - momentum)·old + momentum·batch, with
    the unbiased batch variance; momentum=None makes it PyTorch's cumulative
    average, momentum = 1 / (number of training batches so far), counted in the
    state's num_batches_tracked. weight (ones) and bias (zeros) have shape
    (num_features,); affine=False drops them. Input is always a batch (training needs
    batch statistics; fgrad.vmap over single examples is not supported).
    """
    weight: fgrad.Array
    bias: fgrad.Array
    num_features: int = static_field()
    eps: float = static_field()
    momentum: float = static_field()
    training: bool = static_field()
    dtype: object = static_field()

    stateful = True

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, *, training=True,
                 dtype=None):
        dtype = _init.resolve_dtype(dtype)
        if momentum is not None:
            if not (isinstance(momentum, (int, float)) and not isinstance(momentum, bool)
                    and 0.0 <= momentum <= 1.0):
                raise ValueError(f"BatchNorm: momentum must be a number in [0, 1], or None "
                                 f"for a cumulative average (as PyTorch), got {momentum!r}")
            momentum = float(momentum)
        self.num_features, self.eps, self.momentum = int(num_features), float(eps), momentum
        self.training = flag("BatchNorm", "training", training)
        affine = flag("BatchNorm", "affine", affine)
        self.weight = fnp.ones((num_features,), dtype) if affine else None
        self.bias = fnp.zeros((num_features,), dtype) if affine else None
        self.dtype = dtype

    def init_state(self):
        """Running mean zeros and running variance ones, as PyTorch (and a zero
        batch count with momentum=None)."""
        count = fnp.zeros((), fnp.int32) if self.momentum is None else None
        return BatchNormState(fnp.zeros((self.num_features,), self.dtype),
                              fnp.ones((self.num_features,), self.dtype), count)

    def __call__(self, x, state, *, key=None):
        if not isinstance(state, BatchNormState):
            raise TypeError(f"BatchNorm: expected the state from bn.init_state() (a "
                            f"BatchNormState), got {type(state).__name__}; call "
                            f"y, state = bn(x, state)")
        momentum, count = self.momentum, state.num_batches_tracked
        if momentum is None:
            if count is None:
                raise TypeError("BatchNorm(momentum=None): the state has no "
                                "num_batches_tracked; make it with bn.init_state()")
            if self.training:
                count = count + 1
                momentum = 1 / fnp.astype(count, fnp.result_type(state.running_mean))
        y, mean, var = F.batch_norm(x, state.running_mean, state.running_var, self.weight,
                                    self.bias, self.training, momentum, self.eps)
        return y, BatchNormState(mean, var, count)
