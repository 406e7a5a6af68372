"""Threefry-2x32 with 20 rounds (Salmon et al., "Parallel random numbers: as easy
as 1, 2, 3", SC 2011): a keyed bijection of pairs of 32-bit words.

Written with fgrad's uint32 primitives (add wraps modulo 2**32, shifts, xor,
or), so it runs eagerly, traces into jaxprs, batches under vmap and compiles
to native loops under jit, with the same bits everywhere.
"""
from .. import dtypes, lax

# The rotation constants of Threefry-2x32, used in alternating groups of four rounds.
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
# The key-schedule parity constant of Threefish/Threefry.
_PARITY = 0x1BD11BDA


def _rotate_left(x, r):
    return lax.bitwise_or(lax.shift_left(x, r), lax.shift_right_logical(x, 32 - r))


def threefry2x32(k0, k1, x0, x1):
    """Encrypt the counter words (x0, x1) under the key (k0, k1); all uint32,
    broadcasting like NumPy. Returns the two output words."""
    ks = (k0, k1, lax.bitwise_xor(lax.bitwise_xor(k0, k1), _PARITY))
    x0, x1 = lax.add(x0, ks[0]), lax.add(x1, ks[1])
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            x0 = lax.add(x0, x1)
            x1 = lax.bitwise_xor(x0, _rotate_left(x1, r))
        # key injection after every four rounds: the next two schedule words, plus i+1
        x0 = lax.add(x0, ks[(i + 1) % 3])
        x1 = lax.add(lax.add(x1, ks[(i + 2) % 3]), i + 1)
    return x0, x1


def hash_counts(key, counts):
    """Threefry of a flat uint32 counter array under a uint32[2] key (JAX's layout):
    the counters are cut into two halves (padded with one 0 when odd) that form the
    word pairs, and the two output halves are joined and trimmed back."""
    n = counts.shape[0]
    if n == 0:
        return counts
    if n % 2:
        counts = lax.concatenate([counts, lax.zeros((1,), dtypes.uint32)], 0)
    half = counts.shape[0] // 2
    k0, k1 = _key_words(key)
    y0, y1 = threefry2x32(k0, k1, lax.slice_in_dim(counts, 0, half),
                          lax.slice_in_dim(counts, half, 2 * half))
    out = lax.concatenate([y0, y1], 0)
    return lax.slice_in_dim(out, 0, n) if n % 2 else out


def _key_words(key):
    """The two scalar uint32 words of a key."""
    return (lax.reshape(lax.slice_in_dim(key, 0, 1), ()),
            lax.reshape(lax.slice_in_dim(key, 1, 2), ()))
