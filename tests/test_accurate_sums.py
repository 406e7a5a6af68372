"""Accuracy of float sums under jit (fgrad/_src/cpu/summation.py): native
reduce_sum kernels add terms in blocks and the block sums pairwise, along
inner, outer and middle axes, for fused producers, inside native loops and
with the thread split on.

Broadcast ones cost no memory, so sums of up to 2^31 terms are exact checks:
one running sum (or 64 vectorised partial sums) stops growing at 2^24 times
its terms. Random sums are checked against the float64 sum: within 2 ulps of
the sum of magnitudes (a pairwise sum's rounding errors grow like log n at
worst; the running sums it replaced reached 2-95 ulps at these sizes).
"""
import math

import numpy as np
import pytest

import fgrad.numpy as fnp
from fgrad import jit, lax
from fgrad._src.cpu import summation
from fgrad._src.jit.primitive import compile_jaxpr

F32_EPS = float(np.finfo(np.float32).eps)


def _native_labels(f, *args):
    return [k.label for k in compile_jaxpr(jit(f).lower(*args).jaxpr, "f").kernels]


def _sum_of_ones(shape, axes):
    """jit: the sum of float32 ones broadcast to `shape` over `axes` (the ones
    are 2 * 0.5, so the sum has a fused producer)."""
    def f(two, half):
        return fnp.sum(fnp.broadcast_to(two, shape) * fnp.broadcast_to(half, shape), axis=axes)
    return jit(f)


ONES = [
    ((2**31,), None),                    # one sum of 2^31 terms (64 partial sums gave 2^30)
    ((2, 2**31 - 128), 1),               # inner axis
    ((2**24 + 2, 3), 0),                 # outer axis (one running sum gave 2^24)
    ((3, 2**24 + 2, 2), 1),              # middle axis
    ((2**24 + 2, 3, 2), (0, 2)),         # outer and inner axes around a kept one
    ((3, 2**12 + 1, 2**12 + 3), (0, 1, 2)),   # rows shorter than a block fill it together
    ((2**24 + 3,), None),                # 2^24 + 3 rounds to 2^24 + 4
]


@pytest.mark.parametrize("shape,axes", ONES)
def test_sums_of_many_ones_are_exact(shape, axes):
    n = math.prod(shape) if axes is None else math.prod(
        shape[a] for a in ((axes,) if isinstance(axes, int) else axes))
    f = _sum_of_ones(shape, axes)
    two, half = np.float32(2.0), np.float32(0.5)
    got = np.asarray(f(two, half))
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, np.full(got.shape, n, np.float32))   # n rounded once
    assert all(lab.startswith("native:") for lab in _native_labels(f, two, half))


def _check_error(got, x, y, axis, ulps=2.0):
    exact = np.sum(x.astype(np.float64) * y.astype(np.float64), axis=axis)
    size = np.sum(np.abs(x.astype(np.float64) * y.astype(np.float64)), axis=axis)
    err = np.abs(np.asarray(got, np.float64) - exact)
    worst = float(np.max(err / size)) / F32_EPS
    assert worst <= ulps, f"error {worst:.2f} ulps of the sum of magnitudes (axis {axis})"


RANDOM = [((2**22,), None), ((4, 2**20), 1), ((2**20, 4), 0), ((2, 2**19, 4), 1),
          ((2**12, 4, 2**8), (0, 2)), ((2**10 + 1, 3), None)]


@pytest.mark.parametrize("shape,axis", RANDOM)
@pytest.mark.parametrize("dist", ["uniform", "near_one"])
def test_float32_sums_are_within_two_ulps_of_float64(shape, axis, dist):
    rng = np.random.default_rng(5)
    x = (rng.random(shape) if dist == "uniform" else 1 + 1e-3 * rng.random(shape))
    x = x.astype(np.float32)
    y = (rng.random(shape) + 0.5).astype(np.float32)
    f = jit(lambda x, y: fnp.sum(x * y, axis=axis))
    _check_error(f(x, y), x, y, axis)
    # one kernel (split over the workers by rows where its outer loop is kept)
    assert [lab.split(" (split")[0] for lab in _native_labels(f, x, y)] \
        == ["native:mul+reduce_sum"]


def test_float64_sum_matches_fsum():
    x = np.random.default_rng(6).standard_normal(2**20) * 10.0 ** np.arange(-4, 4).repeat(2**17)
    got = float(jit(lambda x: fnp.sum(x))(x))
    exact = math.fsum(x)
    assert abs(got - exact) <= 2 * np.finfo(np.float64).eps * math.fsum(np.abs(x))


def test_mean_and_var_go_through_the_accurate_sum():
    x = (1 + 1e-3 * np.random.default_rng(7).random((2**18, 4))).astype(np.float32)
    mean = np.asarray(jit(lambda x: fnp.mean(x, axis=0))(x))
    np.testing.assert_allclose(mean, np.mean(x.astype(np.float64), axis=0), rtol=2 * F32_EPS)
    var = np.asarray(jit(lambda x: fnp.var(x))(x))
    np.testing.assert_allclose(var, np.var(x.astype(np.float64)), rtol=1e-3)


def test_sums_inside_native_loops_are_exact():
    def body(total, k):
        ones = fnp.broadcast_to(k, (2**24 + 2, 2))
        return total + fnp.sum(ones, axis=0), None

    f = jit(lambda k: lax.scan(body, fnp.zeros(2, np.float32), k)[0])
    k = np.ones(2, np.float32)
    np.testing.assert_array_equal(f(k), np.full(2, 2 * (2**24 + 2), np.float32))
    assert all(lab.startswith("native:") for lab in _native_labels(f, k))


def test_sums_with_the_thread_split_on(monkeypatch):
    from fgrad._src.cpu import fused, pool
    if not pool.supported():
        pytest.skip("native workers need x86-64 Linux")
    monkeypatch.setattr(fused, "SPLIT_WORK", 0)
    monkeypatch.setenv("FGRAD_NUM_THREADS", "2")
    rng = np.random.default_rng(8)
    x = rng.random((2**14, 64)).astype(np.float32)
    y = (rng.random((2**14, 64)) + 0.5).astype(np.float32)
    z = rng.random(2**16).astype(np.float32)
    f = jit(lambda x, y, z: (fnp.exp(z) * 2.0, fnp.sum(x * y, axis=0), fnp.sum(x * y)))
    labels = _native_labels(f, x, y, z)
    assert any("split over 2 threads" in lab for lab in labels), labels
    for _ in range(5):
        big, rows, total = f(x, y, z)
        _check_error(rows, x, y, 0)
        _check_error(total, x, y, None)
        np.testing.assert_allclose(big, np.exp(z) * 2.0, rtol=4 * F32_EPS)


LAYOUTS = [((37,), None), ((5, 7, 3), (0,)), ((5, 7, 3), (1,)), ((5, 7, 3), (2,)),
           ((5, 7, 3), (0, 2)), ((5, 7, 3), (0, 1)), ((5, 7, 3), (1, 2)), ((9, 1, 11), (0,)),
           ((4, 3, 5, 6), (0, 2)), ((4, 3, 5, 6), (1, 3)), ((4, 3, 5, 6), (0, 1, 3)),
           ((64, 3), (0,)), ((3, 64), (1,)), ((2, 33, 2, 17), (1, 3))]


@pytest.mark.parametrize("shape,axes", LAYOUTS)
def test_blocks_in_every_layout(monkeypatch, shape, axes):
    """With tiny blocks every reduction layout (inner, outer, middle axes,
    broadcast and transposed operands, rows shorter or longer than a block)
    takes the blocked paths: the sums must still be the float64 sums."""
    monkeypatch.setattr(summation, "BLOCK", 2)
    monkeypatch.setattr(summation, "ROW_TERMS", 2)
    rng = np.random.default_rng(10)
    x = rng.standard_normal(shape)
    row = rng.standard_normal(shape[-1])
    t = rng.standard_normal(shape[::-1])

    def f(x, row, t):
        y = x * row      # also an output of the summing kernel
        return (y, fnp.sum(y, axis=axes), fnp.sum(x + fnp.transpose(t), axis=axes),
                fnp.sum(x[::-1] * 2.0, axis=axes))

    wants = (x * row, np.sum(x * row, axis=axes), np.sum(x + t.T, axis=axes),
             np.sum(x[::-1] * 2.0, axis=axes))
    for got, want in zip(jit(f)(x, row, t), wants):
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)
    text = compile_jaxpr(jit(f).lower(x, row, t).jaxpr, "f").llvm_ir
    assert "pair" in text or "malloc" in text


def _ir(f, x):
    return compile_jaxpr(jit(f).lower(x).jaxpr, "f").llvm_ir


def test_only_long_sums_take_blocks():
    """Sums of up to a block of terms stay one vectorised loop, as before."""
    assert not summation.worth_it(summation.BLOCK) and summation.worth_it(summation.BLOCK + 1)
    rows = lambda x: fnp.sum(x, axis=1)  # noqa: E731
    assert "pair" not in _ir(rows, np.ones((64, summation.BLOCK), np.float32))
    assert "pair" in _ir(rows, np.ones((64, summation.BLOCK + 1), np.float32))
    assert summation.block_rows(summation.ROW_TERMS, 1, 4) is None
    assert summation.block_rows(summation.ROW_TERMS + 1, 1, 4) == summation.ROW_TERMS
    assert summation.block_rows(10**6, 64, 4) == 1           # rows of 64 terms: blocks of one
    # the scratch rows stay within SCRATCH_BYTES: longer blocks, or none when too wide
    wide = summation.SCRATCH_BYTES // 8
    block = summation.block_rows(10**6, 1, wide)
    assert block > summation.ROW_TERMS and (summation._depth(10**6 / block) + 1) * wide \
        <= summation.SCRATCH_BYTES
    assert summation.block_rows(10**6, 1, summation.SCRATCH_BYTES) is None
    columns = lambda x: fnp.sum(x, axis=0)  # noqa: E731
    assert "malloc" not in _ir(columns, np.ones((summation.ROW_TERMS, 64), np.float32))
    assert "malloc" in _ir(columns, np.ones((summation.ROW_TERMS + 1, 64), np.float32))


def test_blocked_sums_are_vectorised():
    import re
    from fgrad._src.cpu import engine
    if not engine.host_has_feature("avx2"):
        pytest.skip("host has no AVX2")
    cases = [(lambda x: fnp.sum(x), (10**5,), "pairs"),
             (lambda x: fnp.sum(x, axis=1), (3, 5000), "pairs"),
             (lambda x: fnp.sum(x, axis=0), (1000, 64), "malloc")]    # block rows
    for f, shape, blocked in cases:
        text = _ir(f, np.ones(shape, np.float32))
        assert blocked in text
        assert re.search(r"fadd [a-z ]*<(8|16) x float>", engine.optimized_ir(text)), shape


@pytest.mark.slow
@pytest.mark.parametrize("shape,axis", [((2**26,), None), ((2**24, 4), 0), ((4, 2**24), 1)])
def test_float32_sums_of_2_to_26_terms(shape, axis):
    rng = np.random.default_rng(9)
    x = rng.random(shape, dtype=np.float32)
    y = np.ones(shape, np.float32)
    _check_error(jit(lambda x, y: fnp.sum(x * y, axis=axis))(x, y), x, y, axis)


@pytest.mark.parametrize("shape,axis", [((5000,), None), ((3, 5000), 1), ((5000, 3), 0),
                                        ((100,), None), ((7, 3), 0), ((3, 2000, 4), (0, 2))])
def test_sums_of_negative_zeros_are_positive_zeros_as_in_numpy(shape, axis):
    """NumPy's sums start from +0.0, so a sum of -0.0s is +0.0, in every layout."""
    x = np.full(shape, -0.0, np.float32)
    got, want = np.asarray(jit(lambda x: fnp.sum(x, axis=axis))(x)), np.sum(x, axis=axis)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    assert not np.signbit(want).any()
