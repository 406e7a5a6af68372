"""Parameter initialisers: `init(key, shape, dtype=float32) -> array`.

Every initialiser is a function of (key, shape, dtype), as in `jax.nn.initializers`;
those with parameters are made by a factory, e.g. `normal(stddev=0.02)` or
`kaiming_uniform(a=math.sqrt(5))`. They use only fgrad's public API, so they run
eagerly, under `fgrad.jit` and under `fgrad.vmap` (over keys).

Fans. `fan_in` and `fan_out` are read from the axes `in_axis` and `out_axis`,
times the *receptive field*: the product of every other axis (except
`batch_axis`). The default is PyTorch's layout, which fgrad_nn's layers use:
Linear weights are (out, in) and Conv weights (out, in, kh, kw), so
`in_axis=1, out_axis=0`. For JAX/Flax layouts, dense kernels (in, out) and
HWIO conv kernels (kh, kw, in, out), pass `in_axis=-2, out_axis=-1`.

Names. The PyTorch names follow `torch.nn.init` (xavier_* take `gain`, kaiming_*
take `a`, `mode` and `nonlinearity`, and their normal variants are plain normals);
the JAX names follow `jax.nn.initializers` (glorot_*, he_*, lecun_* are
`variance_scaling` presets whose normal variants are truncated at two standard
deviations and rescaled to the same variance). Both give the same variance.
"""
import math

import numpy as np

import fgrad.numpy as fnp
from fgrad import random

__all__ = ["zeros", "ones", "constant", "normal", "uniform", "truncated_normal",
           "variance_scaling", "compute_fans", "calculate_gain",
           "xavier_uniform", "xavier_normal", "glorot_uniform", "glorot_normal",
           "kaiming_uniform", "kaiming_normal", "he_uniform", "he_normal",
           "lecun_uniform", "lecun_normal", "orthogonal",
           "torch_default_weight", "torch_default_bias"]

float32 = np.dtype("float32")


def _shape(name, shape):
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        shape = tuple(shape)
    except TypeError:
        raise TypeError(f"{name}: shape must be a tuple of ints, got {shape!r}") from None
    if not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0
               for d in shape):
        raise TypeError(f"{name}: shape must be a tuple of non-negative ints, got {shape!r}")
    return tuple(int(d) for d in shape)


def _float_dtype(name, dtype):
    d = np.dtype(float32 if dtype is None else dtype)
    if d.kind != "f":
        raise TypeError(f"{name}: parameters must have a floating-point dtype, got {d} "
                        f"(hint: use float32 or float64)")
    return d


# ----------------------------------------------------------------------------
# Constants

def zeros(key, shape, dtype=float32):
    """All zeros (the key is unused)."""
    return fnp.zeros(_shape("zeros", shape), dtype)


def ones(key, shape, dtype=float32):
    """All ones (the key is unused)."""
    return fnp.ones(_shape("ones", shape), dtype)


def constant(value, dtype=float32):
    """An initialiser filling the shape with `value`."""
    def init(key, shape, dtype=dtype):
        return fnp.full(_shape("constant", shape), value, dtype)
    return init


# ----------------------------------------------------------------------------
# Plain distributions

def normal(stddev=1.0, mean=0.0, dtype=float32):
    """An initialiser drawing from N(mean, stddev**2) (torch.nn.init.normal_)."""
    def init(key, shape, dtype=dtype):
        d = _float_dtype("normal", dtype)
        return random.normal(key, _shape("normal", shape), d) * stddev + mean
    return init


def uniform(scale=1.0, dtype=float32):
    """An initialiser drawing from U[0, scale) (JAX's `uniform`; with the default
    scale, torch.nn.init.uniform_'s U(0, 1))."""
    def init(key, shape, dtype=dtype):
        d = _float_dtype("uniform", dtype)
        return random.uniform(key, _shape("uniform", shape), d, 0.0, scale)
    return init


def truncated_normal(stddev=1.0, dtype=float32, lower=-2.0, upper=2.0):
    """An initialiser drawing from N(0, stddev**2) truncated to
    [lower*stddev, upper*stddev] (JAX's convention: bounds in standard deviations).
    The samples' standard deviation is below `stddev` (about 0.88*stddev for ±2)."""
    def init(key, shape, dtype=dtype):
        d = _float_dtype("truncated_normal", dtype)
        return random.truncated_normal(key, lower, upper, _shape("truncated_normal", shape),
                                       d) * stddev
    return init


# ----------------------------------------------------------------------------
# Fans and variance scaling

def compute_fans(shape, in_axis=1, out_axis=0, batch_axis=()):
    """(fan_in, fan_out) of a weight of `shape`: the sizes of in_axis and out_axis
    times the receptive field (the product of the other, non-batch axes)."""
    shape = _shape("compute_fans", shape)
    if len(shape) < 2:
        raise ValueError(f"compute_fans: fan_in and fan_out need a weight with at least 2 "
                         f"dimensions, got shape {shape} (hint: biases have no fans; use "
                         f"torch_default_bias(fan_in) or a constant initialiser)")
    nd = len(shape)
    try:
        ins, outs = in_axis % nd, out_axis % nd
        batch = {b % nd for b in ((batch_axis,) if isinstance(batch_axis, int) else batch_axis)}
        assert -nd <= in_axis < nd and -nd <= out_axis < nd and ins != outs
    except (AssertionError, TypeError):
        raise ValueError(f"compute_fans: in_axis={in_axis} and out_axis={out_axis} must be "
                         f"two different axes of shape {shape}") from None
    receptive = math.prod(n for d, n in enumerate(shape) if d not in batch | {ins, outs})
    return shape[ins] * receptive, shape[outs] * receptive


_MODES = ("fan_in", "fan_out", "fan_avg")
_DISTRIBUTIONS = ("truncated_normal", "normal", "uniform")
# std of N(0, 1) truncated to [-2, 2]: dividing by it restores unit variance
_TRUNCATED_STD = 0.87962566103423978


def variance_scaling(scale, mode, distribution, in_axis=1, out_axis=0, batch_axis=(),
                     dtype=float32):
    """An initialiser with variance scale / n, n = fan_in, fan_out or their mean (mode),
    drawn from a truncated normal (rescaled to that variance), a normal or a uniform
    distribution. Fans as in `compute_fans` (PyTorch layout by default)."""
    if mode not in _MODES:
        raise ValueError(f"variance_scaling: mode must be one of {_MODES}, got {mode!r}")
    if distribution not in _DISTRIBUTIONS:
        raise ValueError(f"variance_scaling: distribution must be one of {_DISTRIBUTIONS}, "
                         f"got {distribution!r}")
    if scale < 0:
        raise ValueError(f"variance_scaling: scale must be non-negative, got {scale}")

    def init(key, shape, dtype=dtype):
        shape = _shape("variance_scaling", shape)
        d = _float_dtype("variance_scaling", dtype)
        fan_in, fan_out = compute_fans(shape, in_axis, out_axis, batch_axis)
        n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2}[mode]
        variance = scale / max(1.0, n)
        if distribution == "uniform":
            bound = math.sqrt(3.0 * variance)
            return random.uniform(key, shape, d, -bound, bound)
        if distribution == "normal":
            return random.normal(key, shape, d) * math.sqrt(variance)
        std = math.sqrt(variance) / _TRUNCATED_STD
        return random.truncated_normal(key, -2.0, 2.0, shape, d) * std
    return init


# ----------------------------------------------------------------------------
# PyTorch's names (torch.nn.init)

def calculate_gain(nonlinearity, param=None):
    """PyTorch's recommended gain for a nonlinearity (torch.nn.init.calculate_gain)."""
    linear = ("linear", "identity", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
              "conv_transpose2d", "conv_transpose3d", "sigmoid")
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3.0
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else float(param)
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4.0
    raise ValueError(f"calculate_gain: unknown nonlinearity {nonlinearity!r} (known: "
                     f"{', '.join(linear + ('tanh', 'relu', 'leaky_relu', 'selu'))})")


def xavier_uniform(gain=1.0, in_axis=1, out_axis=0, dtype=float32):
    """U(-b, b) with b = gain * sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio, 2010)."""
    return variance_scaling(gain ** 2, "fan_avg", "uniform", in_axis, out_axis, dtype=dtype)


def xavier_normal(gain=1.0, in_axis=1, out_axis=0, dtype=float32):
    """N(0, std**2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    return variance_scaling(gain ** 2, "fan_avg", "normal", in_axis, out_axis, dtype=dtype)


def _kaiming(distribution, a, mode, nonlinearity, in_axis, out_axis, dtype):
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"kaiming_{distribution}: mode must be 'fan_in' or 'fan_out', "
                         f"got {mode!r}")
    gain = calculate_gain(nonlinearity, a)
    return variance_scaling(gain ** 2, mode, distribution, in_axis, out_axis, dtype=dtype)


def kaiming_uniform(a=0.0, mode="fan_in", nonlinearity="leaky_relu", in_axis=1, out_axis=0,
                    dtype=float32):
    """U(-b, b) with b = gain * sqrt(3 / fan), gain = calculate_gain(nonlinearity, a)
    (He et al., 2015). With a=sqrt(5) this is PyTorch's default for Linear/Conv
    weights, U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    return _kaiming("uniform", a, mode, nonlinearity, in_axis, out_axis, dtype)


def kaiming_normal(a=0.0, mode="fan_in", nonlinearity="leaky_relu", in_axis=1, out_axis=0,
                   dtype=float32):
    """N(0, std**2) with std = gain / sqrt(fan), gain = calculate_gain(nonlinearity, a)."""
    return _kaiming("normal", a, mode, nonlinearity, in_axis, out_axis, dtype)


def torch_default_weight(in_axis=1, out_axis=0, dtype=float32):
    """PyTorch's default for Linear and Conv weights: kaiming_uniform(a=sqrt(5)),
    i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    return kaiming_uniform(math.sqrt(5.0), "fan_in", "leaky_relu", in_axis, out_axis, dtype)


def torch_default_bias(fan_in, dtype=float32):
    """PyTorch's default for Linear and Conv biases: U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
    where fan_in is that of the layer's weight (zero when fan_in is 0)."""
    bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0

    def init(key, shape, dtype=dtype):
        d = _float_dtype("torch_default_bias", dtype)
        return random.uniform(key, _shape("torch_default_bias", shape), d, -bound, bound)
    return init


# ----------------------------------------------------------------------------
# JAX's names (jax.nn.initializers)

def glorot_uniform(in_axis=1, out_axis=0, batch_axis=(), dtype=float32):
    """U(-b, b) with b = sqrt(6 / (fan_in + fan_out))."""
    return variance_scaling(1.0, "fan_avg", "uniform", in_axis, out_axis, batch_axis, dtype)


def glorot_normal(in_axis=1, out_axis=0, batch_axis=(), dtype=float32):
    """Truncated normal with variance 2 / (fan_in + fan_out)."""
    return variance_scaling(1.0, "fan_avg", "truncated_normal", in_axis, out_axis, batch_axis,
                            dtype)


def he_uniform(in_axis=1, out_axis=0, batch_axis=(), dtype=float32):
    """U(-b, b) with b = sqrt(6 / fan_in)."""
    return variance_scaling(2.0, "fan_in", "uniform", in_axis, out_axis, batch_axis, dtype)


def he_normal(in_axis=1, out_axis=0, batch_axis=(), dtype=float32):
    """Truncated normal with variance 2 / fan_in."""
    return variance_scaling(2.0, "fan_in", "truncated_normal", in_axis, out_axis, batch_axis,
                            dtype)


def lecun_uniform(in_axis=1, out_axis=0, batch_axis=(), dtype=float32):
    """U(-b, b) with b = sqrt(3 / fan_in)."""
    return variance_scaling(1.0, "fan_in", "uniform", in_axis, out_axis, batch_axis, dtype)


def lecun_normal(in_axis=1, out_axis=0, batch_axis=(), dtype=float32):
    """Truncated normal with variance 1 / fan_in."""
    return variance_scaling(1.0, "fan_in", "truncated_normal", in_axis, out_axis, batch_axis,
                            dtype)


# ----------------------------------------------------------------------------
# Orthogonal

def _orthonormal_columns(a):
    """Q of the QR factorisation of a tall matrix a (m >= n), with the signs chosen
    so that R's diagonal is positive (which makes Q Haar-distributed for Gaussian a).
    Householder reflections, written with fgrad.numpy so that it traces."""
    m, n = a.shape
    r = a
    reflectors = []
    for j in range(n):
        x = r[j:, j]
        sign = fnp.where(x[0] >= 0, 1.0, -1.0).astype(a.dtype)
        v = x.at[0].add(sign * fnp.sqrt(fnp.sum(x * x)))
        vv = fnp.sum(v * v)
        beta = fnp.where(vv > 0, 2.0 / fnp.where(vv > 0, vv, 1.0), 0.0).astype(a.dtype)
        r = r.at[j:, j:].add(-beta * fnp.outer(v, v @ r[j:, j:]))
        reflectors.append((v, beta))
    q = fnp.eye(m, n, dtype=a.dtype)
    for j in reversed(range(n)):
        v, beta = reflectors[j]
        q = q.at[j:, j:].add(-beta * fnp.outer(v, v @ q[j:, j:]))
    d = fnp.sign(fnp.diagonal(r))
    return q * fnp.where(d == 0, 1.0, d).astype(a.dtype)


def orthogonal(scale=1.0, column_axis=-1, dtype=float32):
    """An initialiser giving a (scaled) random orthogonal matrix: the shape is viewed
    as a matrix whose columns run along `column_axis` (rows: every other axis);
    its columns are orthonormal if there are no more columns than rows, else its
    rows are (Saxe et al., 2014). For PyTorch's conv layout (out, in, kh, kw), pass
    column_axis=0 to make the output filters orthonormal."""
    def init(key, shape, dtype=dtype):
        shape = _shape("orthogonal", shape)
        d = _float_dtype("orthogonal", dtype)
        if len(shape) < 2:
            raise ValueError(f"orthogonal: needs a shape with at least 2 dimensions, got "
                             f"{shape}")
        axis = column_axis % len(shape)
        n_cols = shape[axis]
        n_rows = math.prod(shape) // n_cols if n_cols else 0
        tall = n_rows >= n_cols
        a = random.normal(key, (n_rows, n_cols) if tall else (n_cols, n_rows), d)
        q = _orthonormal_columns(a)
        if not tall:
            q = q.T
        rest = tuple(n for i, n in enumerate(shape) if i != axis)
        return fnp.moveaxis(fnp.reshape(q, rest + (n_cols,)), -1, axis) * scale
    return init
