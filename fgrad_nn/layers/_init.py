"""The layers' default initialisation (PyTorch's), from fgrad_nn.init, in one place."""
import fgrad.numpy as fnp
from fgrad import random

from fgrad_nn import init


def split(key, num):
    """`num` independent keys from `key`."""
    return random.split(key, num)


def torch_weight(key, shape, dtype):
    """U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for Linear (out, in) and Conv (out, in, kh, kw)
    weights, fan_in = in·kh·kw."""
    return init.torch_default_weight(dtype=dtype)(key, shape, dtype)


def torch_bias(key, shape, fan_in, dtype):
    """U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in being the weight's."""
    return init.torch_default_bias(fan_in, dtype=dtype)(key, shape, dtype)


def standard_normal(key, shape, dtype):
    """N(0, 1): PyTorch's default for Embedding weights."""
    return init.normal(1.0, dtype=dtype)(key, shape, dtype)


def resolve_dtype(dtype):
    return fnp.float32 if dtype is None else dtype
