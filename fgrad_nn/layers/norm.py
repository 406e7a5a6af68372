"""Normalisation layers: LayerNorm, RMSNorm, GroupNorm (stateless), BatchNorm and
InstanceNorm with running statistics (explicit state)."""
from typing import NamedTuple

import numpy as np

import fgrad
import fgrad.lax as lax
import fgrad.numpy as fnp

from fgrad_nn import functional as F
from fgrad_nn.layers import _init
from fgrad_nn._checks import flag
from fgrad_nn.module import Module, static_field


class LayerNorm(Module):
    """Normalise over the trailing `normalized_shape` dimensions, then scale and shift
    by weight (ones) and bias (zeros) of that shape, as PyTorch's LayerNorm
    (elementwise_affine=False drops both, bias=False only the bias).
    Input: (..., *normalized_shape), one example or any batch."""
    weight: fgrad.Array
    bias: fgrad.Array
    normalized_shape: tuple = static_field()
    eps: float = static_field()

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, *,
                 dtype=None):
        shape = _shape(normalized_shape)
        dtype = _init.resolve_dtype(dtype)
        elementwise_affine = flag("LayerNorm", "elementwise_affine", elementwise_affine)
        bias = flag("LayerNorm", "bias", bias)
        self.normalized_shape, self.eps = shape, float(eps)
        self.weight = fnp.ones(shape, dtype) if elementwise_affine else None
        self.bias = fnp.zeros(shape, dtype) if elementwise_affine and bias else None

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


def _shape(normalized_shape):
    return ((int(normalized_shape),) if isinstance(normalized_shape, (int, np.integer))
            else tuple(int(n) for n in normalized_shape))


class RMSNorm(Module):
    """x / sqrt(mean(x², over the trailing normalized_shape dims) + eps) · weight, as
    PyTorch's RMSNorm: weight (ones, of normalized_shape) unless
    elementwise_affine=False; eps=None means the machine epsilon of x's dtype.
    Input: (..., *normalized_shape), one example or any batch."""
    weight: fgrad.Array
    normalized_shape: tuple = static_field()
    eps: float = static_field()

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, *, dtype=None):
        self.normalized_shape = _shape(normalized_shape)
        self.eps = None if eps is None else float(eps)
        elementwise_affine = flag("RMSNorm", "elementwise_affine", elementwise_affine)
        self.weight = (fnp.ones(self.normalized_shape, _init.resolve_dtype(dtype))
                       if elementwise_affine else None)

    def __call__(self, x, *, key=None):
        shape = self.normalized_shape
        if tuple(x.shape[x.ndim - len(shape):]) != shape:
            raise ValueError(f"RMSNorm: input of shape {tuple(x.shape)} does not end in "
                             f"normalized_shape {shape}")
        eps = float(np.finfo(x.dtype).eps) if self.eps is None else self.eps
        axes = tuple(range(x.ndim - len(shape), x.ndim))
        y = x * lax.rsqrt(fnp.mean(x * x, axis=axes, keepdims=True) + eps)
        return y if self.weight is None else y * self.weight


class GroupNorm(Module):
    """Split the C channels into num_groups groups and normalise each group of each
    example over its channels and positions (biased variance), then scale and shift
    per channel by weight (ones) and bias (zeros), as PyTorch's GroupNorm.
    Input: (N, C, ...), a batch as PyTorch (fgrad.vmap over examples: give each
    example a batch axis of 1)."""
    weight: fgrad.Array
    bias: fgrad.Array
    num_groups: int = static_field()
    num_channels: int = static_field()
    eps: float = static_field()

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, *, dtype=None):
        self.num_groups, self.num_channels, self.eps = int(num_groups), int(num_channels), \
            float(eps)
        if self.num_groups < 1 or self.num_channels % self.num_groups:
            raise ValueError(f"GroupNorm: num_channels ({num_channels}) must be divisible by "
                             f"num_groups ({num_groups})")
        affine = flag("GroupNorm", "affine", affine)
        dtype = _init.resolve_dtype(dtype)
        self.weight = fnp.ones((self.num_channels,), dtype) if affine else None
        self.bias = fnp.zeros((self.num_channels,), dtype) if affine else None

    def __call__(self, x, *, key=None):
        if x.ndim < 2 or x.shape[1] != self.num_channels:
            raise ValueError(f"GroupNorm: expected input (N, {self.num_channels}, ...), got "
                             f"shape {tuple(x.shape)}")
        n, g = x.shape[0], self.num_groups
        grouped = fnp.reshape(x, (n, g, -1))
        mean = fnp.mean(grouped, axis=2, keepdims=True)
        var = fnp.var(grouped, axis=2, keepdims=True)
        y = fnp.reshape((grouped - mean) * lax.rsqrt(var + self.eps), x.shape)
        return _channel_affine(y, self.weight, self.bias)


def _channel_affine(y, weight, bias):
    """y·weight + bias with per-channel (axis 1) parameters, either may be None."""
    channel = (1, -1) + (1,) * (y.ndim - 2)
    if weight is not None:
        y = y * fnp.reshape(weight, channel)
    if bias is not None:
        y = y + fnp.reshape(bias, channel)
    return y


class _InstanceNorm(Module):
    """Shared by InstanceNorm1d/2d: normalise each channel of each example over its
    positions (biased variance), as PyTorch's InstanceNorm.

    affine=False by default (weight ones and bias zeros of (num_features,) with
    True). track_running_stats=False by default: instance statistics always, and
    the layer is stateless, called y = layer(x). With track_running_stats=True it is
    stateful like BatchNorm (same state type and update rule: the running mean and
    unbiased variance move towards the instance statistics averaged over the
    batch), called y, state = layer(x, state); eval mode then normalises with the
    running statistics."""
    weight: fgrad.Array
    bias: fgrad.Array
    num_features: int = static_field()
    eps: float = static_field()
    momentum: float = static_field()
    track_running_stats: bool = static_field()
    training: bool = static_field()
    dtype: object = static_field()

    spatial_dims = None   # 1 or 2, set by the subclasses

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False,
                 track_running_stats=False, *, training=True, dtype=None):
        name = type(self).__name__
        self.num_features, self.eps, self.momentum = int(num_features), float(eps), \
            float(momentum)
        affine = flag(name, "affine", affine)
        self.track_running_stats = flag(name, "track_running_stats", track_running_stats)
        self.training = flag(name, "training", training)
        self.dtype = _init.resolve_dtype(dtype)
        self.weight = fnp.ones((self.num_features,), self.dtype) if affine else None
        self.bias = fnp.zeros((self.num_features,), self.dtype) if affine else None

    @property
    def stateful(self):
        return self.track_running_stats

    def init_state(self):
        if not self.track_running_stats:
            return None
        return BatchNormState(fnp.zeros((self.num_features,), self.dtype),
                              fnp.ones((self.num_features,), self.dtype))

    def __call__(self, x, state=None, *, key=None):
        name, d = type(self).__name__, self.spatial_dims
        if x.ndim not in (d + 1, d + 2) or x.shape[x.ndim - d - 1] != self.num_features:
            raise ValueError(f"{name}: expected input (N, {self.num_features}, {d} spatial "
                             f"dims) or one example without N, got shape {tuple(x.shape)}")
        single = x.ndim == d + 1
        xb = fnp.expand_dims(x, 0) if single else x
        axes = tuple(range(2, xb.ndim))
        if self.track_running_stats and not isinstance(state, BatchNormState):
            raise TypeError(f"{name}(track_running_stats=True) is stateful: call y, state = "
                            f"layer(x, state) with state = layer.init_state()")
        if self.track_running_stats and not self.training:
            mean = fnp.reshape(state.running_mean, (1, -1) + (1,) * d)
            var = fnp.reshape(state.running_var, (1, -1) + (1,) * d)
        else:
            mean = fnp.mean(xb, axis=axes, keepdims=True)
            var = fnp.var(xb, axis=axes, keepdims=True)
        y = _channel_affine((xb - mean) * lax.rsqrt(var + self.eps), self.weight, self.bias)
        y = y[0] if single else y
        if not self.track_running_stats:
            return y
        if self.training:
            count = int(np.prod(xb.shape[2:]))
            if count < 2:
                raise ValueError(f"{name}: running statistics need more than one position "
                                 f"per channel, got input shape {tuple(x.shape)}")
            m = self.momentum
            batch_mean = lax.stop_gradient(fnp.mean(mean, axis=(0,) + axes))
            batch_var = lax.stop_gradient(fnp.mean(var, axis=(0,) + axes) * (count / (count - 1)))
            state = BatchNormState((1 - m) * state.running_mean + m * batch_mean,
                                   (1 - m) * state.running_var + m * batch_var)
        return y, state


class InstanceNorm1d(_InstanceNorm):
    """Instance normalisation of (N, C, L) or one example (C, L); see _InstanceNorm."""
    spatial_dims = 1


class InstanceNorm2d(_InstanceNorm):
    """Instance normalisation of (N, C, H, W) or one example (C, H, W); see
    _InstanceNorm."""
    spatial_dims = 2
