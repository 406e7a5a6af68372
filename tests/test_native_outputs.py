"""Big outputs of native kernels on reused memory (fgrad/_src/cpu/outputs.py):
memory is handed out again only once nothing refers to the previous output."""
import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad._src.cpu import outputs

N = outputs.MIN_BYTES // 4          # float32 elements of the smallest reused size


@pytest.fixture(autouse=True)
def _fresh_pool():
    outputs.release()
    yield
    outputs.release()


def _root(a):
    while a.base is not None:
        a = a.base
    return a


def test_memory_is_reused_only_after_the_output_is_dropped():
    f = fgrad.jit(lambda x: fnp.sin(x) * 2.0)
    x = np.linspace(-3, 3, N, dtype=np.float32)
    first = f(x)
    kept = np.asarray(first).copy()
    second = f(x * 0.5)
    assert not np.shares_memory(np.asarray(first), np.asarray(second))
    np.testing.assert_array_equal(np.asarray(first), kept)     # untouched
    address = np.asarray(second).ctypes.data
    del second
    third = f(x * 0.25)
    assert np.asarray(third).ctypes.data == address             # its memory again
    np.testing.assert_allclose(np.asarray(third), np.sin(x * 0.25) * 2, rtol=2e-6, atol=1e-6)
    assert not np.shares_memory(np.asarray(first), np.asarray(third))


def test_a_view_keeps_the_memory_in_use():
    view = outputs.empty((N,), np.float32)[10:20]
    other = outputs.empty((N,), np.float32)
    assert not np.shares_memory(view, other)
    address = other.ctypes.data
    del other
    again = outputs.empty((N // 2, 2), np.float32)
    assert again.ctypes.data == address and again.shape == (N // 2, 2)
    assert again.flags.c_contiguous and again.dtype == np.float32


def test_limits(monkeypatch):
    held = [outputs.empty((N,), np.float32) for _ in range(outputs.PER_SIZE + 1)]
    roots = {id(_root(a)) for a in held}
    assert len(roots) == len(held)                  # nothing shared while in use
    assert held[-1].base is None                    # beyond PER_SIZE: a plain array
    small = outputs.empty((10,), np.float64)
    assert small.base is None                        # small outputs: plain arrays
    outputs.release()
    monkeypatch.setenv("FGRAD_OUTPUT_CACHE_MB", "0")
    assert outputs.empty((N,), np.float32).base is None
    monkeypatch.setenv("FGRAD_OUTPUT_CACHE_MB", "lots")
    with pytest.raises(ValueError, match="FGRAD_OUTPUT_CACHE_MB"):
        outputs.empty((N,), np.float32)


def test_segments_and_donation_with_reused_outputs():
    f = fgrad.jit(lambda x, y: (fnp.exp(-x * x) * y, (x * y).sum()))
    step = fgrad.jit(lambda w, g: w - 0.5 * g, donate_argnums=0)
    x = np.linspace(-1, 1, N, dtype=np.float32)
    for k in range(3):
        a, s = f(x, x + k)
        np.testing.assert_allclose(np.asarray(a), np.exp(-x * x) * (x + k), rtol=2e-6, atol=1e-6)
        w = step(a, a)
        np.testing.assert_allclose(np.asarray(w), 0.5 * np.exp(-x * x) * (x + k), rtol=2e-6,
                                   atol=1e-6)


def test_unused_buffers_of_other_sizes_make_room(monkeypatch):
    monkeypatch.setenv("FGRAD_OUTPUT_CACHE_MB", str(3 * outputs.MIN_BYTES >> 20))
    held = outputs.empty((N,), np.float32)
    dropped = outputs.empty((N,), np.float32)
    assert dropped.base is not None and outputs._kept[0] == 2 * outputs.MIN_BYTES
    before = held.copy()
    del dropped
    bigger = outputs.empty((3 * N // 2,), np.float32)   # fits once the unused one goes
    assert bigger.base is not None
    assert outputs._kept[0] == outputs.MIN_BYTES + bigger.nbytes
    assert not np.shares_memory(held, bigger)
    bigger[:] = 7
    np.testing.assert_array_equal(held, before)           # the held buffer stays
    too_big = outputs.empty((4 * N,), np.float32)        # beyond the bound: dropping is useless
    assert too_big.base is None and outputs._kept[0] == outputs.MIN_BYTES + bigger.nbytes


def test_collective_outputs_are_reused_from_a_smaller_size():
    n = outputs.COLLECTIVE_BYTES // 4
    assert outputs.empty((n,), np.float32).base is None
    assert outputs.allocator([((n,), np.float32)]) is np.empty
    empty = outputs.allocator([((n,), np.float32)], collective=True)
    first = empty((n,), np.float32)
    address = first.ctypes.data
    assert first.base is not None
    del first
    assert empty((n // 2, 2), np.float32).ctypes.data == address
    assert outputs.allocator([((n - 1,), np.float32)], collective=True) is np.empty
