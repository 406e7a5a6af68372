"""PRNG keys and raw random bits, following JAX's (original, non-partitionable)
threefry conventions so that keys and bits agree with `jax.random`.

A key is a uint32 array of shape (2,). Keys are never reused: `split` derives
new keys from a key, `fold_in` mixes an integer into one, and every sampler
consumes the key it is given. All functions here are traceable: they work
eagerly, under `fgrad.jit` and under `fgrad.vmap` (over a batch of keys).
"""
import math

import numpy as np

from .. import dtypes, lax
from ..core import Array, Tracer, check_size, get_aval
from ..errors import FgradTypeError
from .threefry import hash_counts

_KEY_HINT = ("a PRNG key is a uint32 array of shape (2,): make one with "
             "fgrad.random.key(seed) and derive more with fgrad.random.split(key)")


def check_key(name, key):
    """The key as an fgrad value, or an error saying what a key is."""
    if isinstance(key, (int, float)) and not isinstance(key, bool):
        raise FgradTypeError(f"{name}: expected a PRNG key, got the number {key!r}",
                             hint=_KEY_HINT)
    if not isinstance(key, (Array, Tracer)):
        try:
            value = np.asarray(key)
        except Exception:
            value = None
        if value is None or value.dtype != np.uint32:
            raise FgradTypeError(f"{name}: expected a PRNG key, got {type(key).__name__} "
                                 f"{key!r}", hint=_KEY_HINT)
        key = Array(value, False)
    aval = get_aval(key)
    if aval.shape != (2,) or aval.dtype != dtypes.uint32:
        extra = ""
        if aval.dtype == dtypes.uint32 and aval.ndim == 2 and aval.shape[-1] == 2:
            extra = "; for a batch of keys, use fgrad.vmap over the first axis"
        raise FgradTypeError(f"{name}: expected a PRNG key (u32[2]), got {aval.str_short()}"
                             f"{extra}", hint=_KEY_HINT)
    return key


def static_shape(name, shape):
    """A shape argument as a tuple of non-negative Python ints."""
    if shape is None:
        return ()
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        dims = tuple(shape)
    except TypeError:
        raise FgradTypeError(f"{name}: shape must be a tuple of ints, got {shape!r}",
                             hint="pass e.g. shape=(3, 4); shapes are static Python "
                                  "values") from None
    for d in dims:
        if isinstance(d, Tracer) or not isinstance(d, (int, np.integer)) or isinstance(d, bool) \
                or d < 0:
            raise FgradTypeError(f"{name}: shape must be a tuple of non-negative ints, "
                                 f"got {shape!r}",
                                 hint="pass e.g. shape=(3, 4); shapes are static Python values")
    dims = tuple(int(d) for d in dims)
    check_size(name, dims)
    return dims


def _seed_array(seed):
    """A Python int seed as the integer array JAX would see (int32 when it fits)."""
    if isinstance(seed, (Array, Tracer, np.ndarray, np.generic)):
        if seed.shape != () or np.dtype(seed.dtype).kind not in "iu":
            raise FgradTypeError(f"key: a seed must be a scalar integer, got "
                                 f"{get_aval(seed).str_short()}",
                                 hint="pass a Python int or a 0-d integer array")
        return seed if isinstance(seed, (Array, Tracer)) else Array(np.asarray(seed), False)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise FgradTypeError(f"key: a seed must be an integer, got {type(seed).__name__} "
                             f"{seed!r}", hint="pass a Python int, e.g. fgrad.random.key(0)")
    for dtype in (np.int32, np.int64, np.uint64):
        info = np.iinfo(dtype)
        if info.min <= seed <= info.max:
            return Array(np.asarray(seed, dtype), False)
    raise FgradTypeError(f"key: seed {seed} does not fit in 64 bits",
                         hint="use a seed in [-2**63, 2**64)")


def key(seed):
    """A PRNG key from an integer seed: uint32[2] = [high 32 bits, low 32 bits].

    A Python int is read as int32 when it fits (as JAX does by default), else as
    a 64-bit integer; a traced integer seed works too (under jit or vmap).
    """
    seed = _seed_array(seed)
    high = lax.shift_right_logical(seed, 32)  # 0 for 32-bit seeds
    low = lax.bitwise_and(seed, Array(np.asarray(0xFFFFFFFF, seed.dtype), False)) \
        if seed.dtype.itemsize > 4 else seed
    words = [lax.reshape(lax.convert_element_type(w, dtypes.uint32), (1,)) for w in (high, low)]
    return lax.concatenate(words, 0)


PRNGKey = key


def _counts(n):
    return lax.iota(dtypes.uint32, (n,))


def split(key, num=2):
    """`num` new keys (shape (num, 2)) derived from `key`; use each once."""
    key = check_key("split", key)
    shape = static_shape("split", num)
    n = math.prod(shape)
    return lax.reshape(hash_counts(key, _counts(2 * n)), shape + (2,))


def fold_in(key, data):
    """A new key that mixes the 32-bit integer `data` into `key` (e.g. a step count)."""
    key = check_key("fold_in", key)
    if isinstance(data, (Array, Tracer)):
        if data.shape != () or data.dtype.kind not in "iu":
            raise FgradTypeError(f"fold_in: data must be a scalar integer, got "
                                 f"{get_aval(data).str_short()}",
                                 hint="pass a Python int or a 0-d integer array")
        word = lax.convert_element_type(data, dtypes.uint32)
    else:
        if isinstance(data, bool) or not isinstance(data, (int, np.integer)):
            raise FgradTypeError(f"fold_in: data must be an integer, got {data!r}",
                                 hint="pass a Python int or a 0-d integer array")
        word = Array(np.asarray(int(data) & 0xFFFFFFFF, np.uint32), False)
    counts = lax.concatenate([lax.zeros((1,), dtypes.uint32), lax.reshape(word, (1,))], 0)
    return hash_counts(key, counts)


_UINTS = {8: dtypes.uint8, 16: dtypes.uint16, 32: dtypes.uint32, 64: dtypes.uint64}


def random_bits(key, bit_width, shape):
    """Uniformly random unsigned integers of `bit_width` (8, 16, 32 or 64) bits."""
    key = check_key("random_bits", key)
    shape = static_shape("random_bits", shape)
    if bit_width not in _UINTS:
        raise FgradTypeError(f"random_bits: bit_width must be 8, 16, 32 or 64, got {bit_width!r}",
                             hint="pass a dtype such as fgrad.numpy.uint32 to fgrad.random.bits")
    size = math.prod(shape)
    words = hash_counts(key, _counts(-(-bit_width * size // 32)))
    dtype = _UINTS[bit_width]
    if bit_width == 64:
        high, low = (lax.convert_element_type(lax.slice_in_dim(words, i * size, (i + 1) * size),
                                              dtype) for i in (0, 1))
        words = lax.bitwise_or(lax.shift_left(high, 32), low)
    elif bit_width < 32:
        # each word yields 32 // bit_width values, least significant bits first
        per_word = 32 // bit_width
        n = words.shape[0]
        offsets = lax.mul(lax.iota(dtypes.uint32, (n, per_word), 1), bit_width)
        parts = lax.shift_right_logical(lax.broadcast_in_dim(words, (n, per_word), (0,)), offsets)
        parts = lax.convert_element_type(lax.bitwise_and(parts, (1 << bit_width) - 1), dtype)
        words = lax.slice_in_dim(lax.reshape(parts, (n * per_word,)), 0, size)
    return lax.reshape(words, shape)


def bits(key, shape=(), dtype=dtypes.uint32):
    """Uniformly random bits as an unsigned integer array (uint8/16/32/64)."""
    dtype = np.dtype(dtype)
    if dtype.kind != "u":
        raise FgradTypeError(f"bits: dtype must be an unsigned integer type, got {dtype}",
                             hint="use uint8, uint16, uint32 or uint64")
    return random_bits(key, dtype.itemsize * 8, shape)
