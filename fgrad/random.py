"""fgrad.random: pseudo-random numbers with explicit keys (JAX's `jax.random` API).

    key = fgrad.random.key(0)
    k1, k2 = fgrad.random.split(key)
    w = fgrad.random.normal(k1, (3, 4))

A key is a uint32 array of shape (2,) (JAX's raw `PRNGKey`); numbers are
threefry-2x32 hashes of a counter under the key, laid out as JAX's original
threefry scheme does (`jax_threefry_partitionable=False`), so `key`, `split`,
`fold_in`, `bits`, `uniform`, ... give the same numbers as `jax.random` there
(float samplers up to rounding in erf_inv/log). Newer JAX versions default to
the partitionable scheme, whose `split` and `bits` differ. Everything is built
from fgrad primitives: the same key gives bit-identical numbers eagerly, under
`fgrad.jit` and under `fgrad.vmap` (vmap over a batch of keys equals stacking
the per-key results). For that, the samplers' log, erf and erf_inv are their
own, made of correctly rounded operations only and evaluated in float64 (one
rounding to the requested dtype), not fgrad.numpy's, whose NumPy and compiled
versions may differ in the last bit. (With `config.flush_denormals` on, jitted
code flushes subnormals and may differ where they occur.) Never reuse a key:
split it.
"""
from fgrad._src.prng.distributions import (bernoulli, categorical, choice,  # noqa: F401
                                           exponential, gumbel, normal, permutation, randint,
                                           truncated_normal, uniform)
from fgrad._src.prng.keys import PRNGKey, bits, fold_in, key, random_bits, split  # noqa: F401

__all__ = ["PRNGKey", "bernoulli", "bits", "categorical", "choice", "exponential", "fold_in",
           "gumbel", "key", "normal", "permutation", "randint", "random_bits", "split",
           "truncated_normal", "uniform"]
