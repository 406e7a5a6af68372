"""Samplers built on threefry bits, with `jax.random`'s names, signatures and
algorithms (so the same key gives the same numbers as JAX, up to float rounding
in the transcendental functions).

Their log, erf and erf_inv come from `exact_math` (correctly rounded operations
only, in float64, rounded once to the sampler's dtype), not from the lax
primitives, whose eager (NumPy/SciPy) and compiled (mathlib) versions may differ
in the last bit: so every sampler gives the same bits eagerly, under jit and
under vmap.

Every sampler takes a key and consumes it: split the key for every further
draw. Shapes and dtypes are static; bounds and probabilities may be traced
(and are differentiated through where the maths allows, e.g. uniform's
minval/maxval).
"""
import math

import numpy as np

from .. import dtypes, lax
from ..lax._util import broadcast_shape
from ..core import Array, get_aval
from ..errors import FgradTypeError
from ..numpy import reductions as _reductions, shape as _shape, sorting as _sorting
from ..numpy.util import asarray, canonicalize_axis
from . import exact_math
from .keys import check_key, random_bits, split, static_shape

_UINTS = {8: dtypes.uint8, 16: dtypes.uint16, 32: dtypes.uint32, 64: dtypes.uint64}


def _float_dtype(name, dtype):
    """The float dtype asked for; None: the default float (fgrad.default_float)."""
    if dtype is None:
        return dtypes.default_float
    d = np.dtype(dtype)
    if d.kind != "f":
        raise FgradTypeError(f"{name}: dtype must be a floating-point type, got {d}",
                             hint="use float32 or float64 (None: the default float)")
    return dtypes.canonicalize(d)


def _param(name, what, value, dtype, shape):
    """A distribution parameter as an array of `dtype` that broadcasts to `shape`."""
    value = asarray(value)
    if value.dtype != dtype:
        value = lax.convert_element_type(value, dtype)
    try:
        fits = broadcast_shape(tuple(value.shape), shape) == shape
    except ValueError:
        fits = False
    if not fits:
        raise FgradTypeError(f"{name}: {what} of shape {tuple(value.shape)} does not broadcast "
                             f"to the requested shape {shape}",
                             hint=f"give {what} a shape that broadcasts to shape={shape}, "
                                  f"or pass a larger shape")
    return lax.broadcast_to(value, shape)


def _unit_interval(key, shape, dtype):
    """Uniform floats in [0, 1): random mantissa bits under the exponent of 1.0, minus 1."""
    finfo = np.finfo(dtype)
    nbits = finfo.bits
    uint = _UINTS[nbits]
    raw = random_bits(key, nbits, shape)
    one_bits = Array(np.asarray(1.0, dtype).view(uint), False)
    mantissa = lax.shift_right_logical(raw, Array(np.asarray(nbits - finfo.nmant, uint), False))
    return lax.sub(lax.bitcast_convert_type(lax.bitwise_or(mantissa, one_bits), dtype), 1.0)


def _uniform(key, shape, dtype, minval, maxval):
    """uniform without argument checks; minval/maxval already of `dtype` and `shape`."""
    u = _unit_interval(key, shape, dtype)
    return lax.max(minval, lax.add(lax.mul(u, lax.sub(maxval, minval)), minval))


def uniform(key, shape=(), dtype=None, minval=0., maxval=1.):
    """Uniform floats in [minval, maxval)."""
    key = check_key("uniform", key)
    shape = static_shape("uniform", shape)
    dtype = _float_dtype("uniform", dtype)
    lo = _param("uniform", "minval", minval, dtype, shape)
    hi = _param("uniform", "maxval", maxval, dtype, shape)
    return _uniform(key, shape, dtype, lo, hi)


def _const(value, dtype):
    return Array(np.asarray(value, dtype), False)


def _in_float64(fn, x, *rest):
    """fn of x (and rest) computed in float64, rounded once to x's dtype."""
    def wide(v):
        return v if v.dtype == dtypes.float64 else lax.convert_element_type(v, dtypes.float64)
    out = fn(wide(x), *map(wide, rest))
    return out if out.dtype == x.dtype else lax.convert_element_type(out, x.dtype)


def _sqrt2_erf_inv(u):
    return lax.mul(math.sqrt(2.0), exact_math.erf_inv(u))


def _standard_normal(key, shape, dtype):
    # inverse-CDF: u uniform in the open interval (-1, 1), then sqrt(2) * erfinv(u)
    lo = _const(np.nextafter(np.asarray(-1.0, dtype), np.asarray(0.0, dtype)), dtype)
    u = _uniform(key, shape, dtype, lax.broadcast_to(lo, shape),
                 lax.broadcast_to(_const(1.0, dtype), shape))
    return _in_float64(_sqrt2_erf_inv, u)


def normal(key, shape=(), dtype=None):
    """Standard normal floats (mean 0, variance 1)."""
    key = check_key("normal", key)
    shape = static_shape("normal", shape)
    return _standard_normal(key, shape, _float_dtype("normal", dtype))


def _next_toward(x, up):
    """The next representable float after x towards +inf (up) or -inf; infinities
    towards the other side become the largest finite float (np.nextafter)."""
    dtype = x.dtype
    uint = _UINTS[np.finfo(dtype).bits]
    step = lax.bitcast_convert_type(x, uint)
    toward_zero = lax.lt(x, 0.0) if up else lax.gt(x, 0.0)
    moved = lax.select_n(toward_zero, lax.add(step, 1), lax.sub(step, 1))
    tiny = np.finfo(dtype).smallest_subnormal
    out = lax.bitcast_convert_type(moved, dtype)
    out = lax.select_n(lax.eq(x, 0.0), out, lax.full((), tiny if up else -tiny, dtype))
    return lax.select_n(lax.eq(x, np.inf if up else -np.inf), out, x)


def truncated_normal(key, lower, upper, shape=None, dtype=None):
    """Standard normal floats conditioned on lower < x < upper (inverse-CDF sampling);
    shape defaults to the broadcast shape of lower and upper."""
    key = check_key("truncated_normal", key)
    dtype = _float_dtype("truncated_normal", dtype)
    if shape is None:
        shape = broadcast_shape(tuple(asarray(lower).shape), tuple(asarray(upper).shape))
    shape = static_shape("truncated_normal", shape)
    lower = _param("truncated_normal", "lower", lower, dtype, shape)
    upper = _param("truncated_normal", "upper", upper, dtype, shape)
    def cdf(bound):     # erf(bound / sqrt(2)), i.e. 2 Phi(bound) - 1
        return exact_math.erf(lax.div(bound, math.sqrt(2.0)))
    a, b = _in_float64(cdf, lower), _in_float64(cdf, upper)
    out = _in_float64(_sqrt2_erf_inv, _uniform(key, shape, dtype, a, b))
    # rounding in erf/erf_inv may land on or past a bound: keep strictly inside
    lo = _next_toward(lax.stop_gradient(lower), up=True)
    hi = _next_toward(lax.stop_gradient(upper), up=False)
    return lax.min(lax.max(out, lo), hi)


def _probability(name, p):
    p = asarray(p)
    if p.dtype.kind != "f":
        p = lax.convert_element_type(p, dtypes.default_float)
    return p


def bernoulli(key, p=0.5, shape=None):
    """Booleans that are True with probability p; shape defaults to p's shape."""
    key = check_key("bernoulli", key)
    p = _probability("bernoulli", p)
    shape = tuple(p.shape) if shape is None else static_shape("bernoulli", shape)
    p = _param("bernoulli", "p", p, p.dtype, shape)
    return lax.lt(_unit_interval(key, shape, p.dtype), p)


def exponential(key, shape=(), dtype=None):
    """Exponential floats with rate 1: -log(1 - u)."""
    key = check_key("exponential", key)
    shape = static_shape("exponential", shape)
    dtype = _float_dtype("exponential", dtype)
    # 1 - u is exact in float64; 0.0 - log gives +0.0 at u = 0, as -log1p(-0.0)
    return _in_float64(lambda u: lax.sub(0.0, exact_math.log(lax.sub(1.0, u))),
                       _unit_interval(key, shape, dtype))


def _gumbel(key, shape, dtype):
    tiny = lax.broadcast_to(_const(np.finfo(dtype).tiny, dtype), shape)
    u = _uniform(key, shape, dtype, tiny, lax.broadcast_to(_const(1.0, dtype), shape))
    return _in_float64(lambda u: lax.neg(exact_math.log(lax.neg(exact_math.log(u)))), u)


def gumbel(key, shape=(), dtype=None):
    """Standard Gumbel floats: -log(-log(u))."""
    key = check_key("gumbel", key)
    shape = static_shape("gumbel", shape)
    return _gumbel(key, shape, _float_dtype("gumbel", dtype))


def _int_bound(name, what, value, dtype, shape):
    """An integer bound of `dtype`, clipped into its range; also whether it was above."""
    info = np.iinfo(dtype)
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        above = int(value) > info.max
        value = Array(np.asarray(min(max(int(value), info.min), info.max), dtype), False)
        return _param(name, what, value, dtype, shape), above
    value = asarray(value)
    if value.dtype.kind not in "iu":
        raise FgradTypeError(f"{name}: {what} must be an integer, got "
                             f"{get_aval(value).str_short()}",
                             hint="pass Python ints or integer arrays as minval and maxval")
    return _param(name, what, value, dtype, shape), False


def randint(key, shape, minval, maxval, dtype=dtypes.int32):
    """Uniform integers in [minval, maxval) (minval where maxval <= minval).

    Two words of random bits per draw keep the modulo bias small; a Python int
    maxval above the dtype's range reaches its largest value.
    """
    key = check_key("randint", key)
    shape = static_shape("randint", shape)
    dtype = np.dtype(dtype)
    if dtype.kind not in "iu":
        raise FgradTypeError(f"randint: dtype must be an integer type, got {dtype}",
                             hint="use int32 (the default), int64 or an unsigned type")
    dtype = dtypes.canonicalize(dtype)
    lo, _ = _int_bound("randint", "minval", minval, dtype, shape)
    hi, hi_above = _int_bound("randint", "maxval", maxval, dtype, shape)
    nbits = dtype.itemsize * 8
    uint = _UINTS[nbits]
    k1, k2 = split(key)
    higher, lower = random_bits(k1, nbits, shape), random_bits(k2, nbits, shape)
    empty = lax.le(hi, lo)
    span = lax.convert_element_type(lax.sub(hi, lo), uint)
    if hi_above:  # the true span is one more than hi - lo (0 here: all 2**nbits values)
        span = lax.select_n(empty, lax.add(span, 1), span)
    span = lax.select_n(empty, span, lax.full((), 1, uint))
    every_value = lax.eq(span, 0)
    span = lax.select_n(every_value, span, lax.full((), 1, uint))
    # (higher * 2**nbits + lower) mod span, computed without overflowing nbits
    multiplier = lax.rem(lax.full((), 2 ** (nbits // 2), uint), span)
    multiplier = lax.rem(lax.mul(multiplier, multiplier), span)
    offset = lax.add(lax.mul(lax.rem(higher, span), multiplier), lax.rem(lower, span))
    offset = lax.select_n(every_value, lax.rem(offset, span), lower)
    return lax.add(lo, lax.convert_element_type(offset, dtype))


def categorical(key, logits, axis=-1, shape=None):
    """Category indices drawn with probabilities softmax(logits) along `axis`
    (the Gumbel-max trick). shape defaults to logits' shape without `axis`; a
    longer shape draws several samples per batch of logits (leading dims)."""
    key = check_key("categorical", key)
    logits = asarray(logits)
    if logits.dtype.kind != "f":
        raise FgradTypeError(f"categorical: logits must be floats, got "
                             f"{get_aval(logits).str_short()}",
                             hint="convert the logits with .astype(float32)")
    if not logits.shape:
        raise FgradTypeError("categorical: logits must have at least one dimension",
                             hint="pass unnormalised log-probabilities along `axis`")
    axis = canonicalize_axis("categorical", axis, logits.ndim, logits.shape)
    batch = tuple(n for d, n in enumerate(logits.shape) if d != axis)
    shape = batch if shape is None else static_shape("categorical", shape)
    if len(shape) < len(batch) or shape[len(shape) - len(batch):] != batch:
        raise FgradTypeError(f"categorical: shape {shape} must end with the batch shape "
                             f"{batch} of logits {tuple(logits.shape)} (axis {axis} removed)",
                             hint="extra leading dimensions give more samples per batch")
    prefix = shape[:len(shape) - len(batch)]
    full = prefix + tuple(logits.shape)
    noise = _gumbel(key, full, logits.dtype)
    scores = lax.add(noise, lax.broadcast_to(logits, full))
    return _reductions.argmax(scores, axis=len(prefix) + axis)


def _shuffle(key, x, axis):
    """x with its entries along `axis` in random order: sort by random 32-bit keys,
    repeated (with fresh keys) enough times that ties are negligible."""
    n = max(1, math.prod(x.shape))
    rounds = math.ceil(3 * math.log(n) / math.log(2 ** 32 - 1))
    for _ in range(rounds):
        key, subkey = split(key)
        _, x = lax.sort_key_val(random_bits(subkey, 32, tuple(x.shape)), x, axis)
    return x


def permutation(key, x, axis=0):
    """A random permutation of range(x) for an int x, else x shuffled along `axis`."""
    key = check_key("permutation", key)
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        if x < 0:
            raise FgradTypeError(f"permutation: n must be non-negative, got {x}",
                                 hint="pass n >= 0 to permute range(n)")
        return _shuffle(key, lax.iota(dtypes.int32, (int(x),)), 0)
    x = asarray(x)
    if not x.shape:
        raise FgradTypeError(f"permutation: x must be an int or an array with at least one "
                             f"dimension, got {get_aval(x).str_short()}",
                             hint="pass n to permute range(n), or an array to shuffle")
    axis = canonicalize_axis("permutation", axis, x.ndim, x.shape)
    order = _shuffle(key, lax.iota(dtypes.int32, (x.shape[axis],)), 0)
    return _shape.take(x, order, axis=axis)


def choice(key, a, shape=(), replace=True, p=None, axis=0):
    """Random draws from `a` (an int n means range(n)) along `axis`, with or without
    replacement, uniformly or with probabilities p (which need not be normalised)."""
    key = check_key("choice", key)
    shape = static_shape("choice", shape)
    if isinstance(a, (int, np.integer)) and not isinstance(a, bool):
        arr, n = None, int(a)
    else:
        arr = asarray(a)
        if not arr.shape:
            raise FgradTypeError("choice: a must be an int or an array with at least one "
                                 "dimension", hint="pass n to choose from range(n)")
        axis = canonicalize_axis("choice", axis, arr.ndim, arr.shape)
        n = arr.shape[axis]
    draws = math.prod(shape)
    if n <= 0 or (not replace and draws > n):
        raise FgradTypeError(f"choice: cannot take {draws} sample(s) from {n} "
                             f"{'entries' if replace else 'entries without replacement'}",
                             hint="use replace=True or a smaller shape")
    if p is None:
        if replace:
            index = randint(key, (draws,), 0, n)
        else:
            index = lax.slice_in_dim(permutation(key, n), 0, draws)
    else:
        p = _probability("choice", p)
        if tuple(p.shape) != (n,):
            raise FgradTypeError(f"choice: p must have shape ({n},) to match the {n} "
                                 f"entries, got {tuple(p.shape)}",
                                 hint="give one (unnormalised) probability per entry")
        if replace:
            cumulative = lax.cumsum(p, 0)
            total = lax.slice_in_dim(cumulative, n - 1, n)
            u = _unit_interval(key, (draws,), p.dtype)
            r = lax.mul(lax.broadcast_to(total, (draws,)), lax.sub(1.0, u))  # in (0, total]
            index = _sorting.searchsorted(cumulative, r)
        else:  # Gumbel top-k: the k largest perturbed log-probabilities
            scores = lax.add(_gumbel(key, (n,), p.dtype), _in_float64(exact_math.log, p))
            index = lax.slice_in_dim(_sorting.argsort(scores, descending=True), 0, draws)
    if arr is None:
        return lax.reshape(index, shape)
    out = _shape.take(arr, index, axis=axis)
    return lax.reshape(out, tuple(arr.shape[:axis]) + shape + tuple(arr.shape[axis + 1:]))
