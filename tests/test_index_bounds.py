"""Integer indices of every dtype, beyond the int32 range included, keep their
documented meaning: traced out-of-bounds indices are clamped by reads (gather,
take, x[i], dynamic_slice) and dropped by writes (scatters, x.at[i]); indices
are saturated before they are narrowed to int32, never wrapped (2**32 + 3 is
not 3). Concrete out-of-bounds indices raise IndexError eagerly."""
import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad import lax

N = 10
A = np.arange(N, dtype=np.float32) * 10

WIDE = {
    np.int64: [2 ** 32 + 3, -(2 ** 32) - 3, 2 ** 31, -(2 ** 31) - 1, 2 ** 63 - 1, -(2 ** 63),
               2 ** 32 - 1, 3, -1, -N, N, -N - 1],
    np.uint64: [2 ** 64 - 1, 2 ** 63, 2 ** 32 + 3, 2 ** 31, 3, N],
    np.uint32: [2 ** 32 - 1, 2 ** 31, 2 ** 31 - 1, 3, N],
    np.int32: [2 ** 31 - 1, -(2 ** 31), 3, -1, N, -N - 1],
    np.int8: [127, -128, 3, -1, N, -N - 1],
    np.uint8: [255, 128, 3, N],
}
CASES = [(dt, v) for dt, vs in WIDE.items() for v in vs]
IDS = [f"{np.dtype(dt).name}:{v}" for dt, v in CASES]


def _read(i, n=N):
    """The position a read of index i gives: negatives wrap once, then clamp."""
    i = int(i)
    return min(max(i + n if i < 0 else i, 0), n - 1)


def _write(i, n=N):
    """The position a write of index i lands on, or None (dropped)."""
    i = int(i)
    return i % n if -n <= i < n else None


@pytest.mark.parametrize("dt,v", CASES, ids=IDS)
def test_traced_scalar_index_reads_clamp(dt, v):
    i = dt(v)
    want = A[_read(v)]
    assert fgrad.jit(lambda a, i: a[i])(A, i) == want
    assert fgrad.jit(lambda a, i: fnp.take(a, i))(A, i) == want
    assert fgrad.jit(lambda a, i: a[fnp.stack([i, i])])(A, i).tolist() == [want, want]
    assert fgrad.jit(lambda a, i: a.at[i].get())(A, i) == want
    a2 = A.reshape(2, 5)
    got = fgrad.jit(lambda a, i: a[:, i])(a2, i)
    np.testing.assert_array_equal(got, a2[:, _read(v, 5)])


@pytest.mark.parametrize("dt,v", CASES, ids=IDS)
def test_traced_scalar_index_writes_drop(dt, v):
    i = dt(v)
    want = A.copy()
    if _write(v) is not None:
        want[_write(v)] = -1
    np.testing.assert_array_equal(fgrad.jit(lambda a, i: a.at[i].set(-1.0))(A, i), want)
    want_add = A.copy()
    if _write(v) is not None:
        want_add[_write(v)] += 5
    np.testing.assert_array_equal(fgrad.jit(lambda a, i: a.at[i].add(5.0))(A, i), want_add)
    a2 = A.reshape(2, 5)
    want2 = a2.copy()
    if _write(v, 5) is not None:
        want2[:, _write(v, 5)] = -1
    np.testing.assert_array_equal(fgrad.jit(lambda a, i: a.at[:, i].set(-1.0))(a2, i), want2)


@pytest.mark.parametrize("dt,v", CASES, ids=IDS)
def test_take_modes_of_wide_indices(dt, v):
    i = np.array([v, 3], dt)
    for mode in ("clip", "wrap"):
        # (not np.take: its 'wrap' steps down by N at a time, for ever at 2**63)
        want = A[[int(v) % N, 3]] if mode == "wrap" else A[[min(max(int(v), 0), N - 1), 3]]
        np.testing.assert_array_equal(
            fgrad.jit(lambda a, i, mode=mode: fnp.take(a, i, mode=mode))(A, i), want,
            err_msg=mode)
    idx = np.array([[v], [3]], dt)
    a2 = np.stack([A, A + 1])
    want = np.stack([a2[0, _read(v)], a2[1, 3]])[:, None]
    np.testing.assert_array_equal(
        fgrad.jit(lambda a, i: fnp.take_along_axis(a, i, axis=1))(a2, idx), want)


@pytest.mark.parametrize("dt,v", CASES, ids=IDS)
def test_dynamic_windows_clamp_wide_starts(dt, v):
    i = dt(v)
    start = min(max(int(v), 0), N - 3)
    np.testing.assert_array_equal(
        fgrad.jit(lambda a, i: lax.dynamic_slice(a, (i,), (3,)))(A, i), A[start:start + 3])
    want = A.copy()
    want[start:start + 3] = -1
    np.testing.assert_array_equal(
        fgrad.jit(lambda a, i: lax.dynamic_update_slice(a, -np.ones(3, np.float32), (i,)))(A, i),
        want)
    # batched starts take the gather/scatter path of the batching rules
    starts = np.array([v, 0], dt)
    got = fgrad.jit(fgrad.vmap(lambda i: lax.dynamic_slice(A, (i,), (3,))))(starts)
    np.testing.assert_array_equal(got, np.stack([A[start:start + 3], A[0:3]]))
    got = fgrad.jit(fgrad.vmap(
        lambda i: lax.dynamic_update_slice(A, -np.ones(3, np.float32), (i,))))(starts)
    first = A.copy()
    first[0:3] = -1
    np.testing.assert_array_equal(got, np.stack([want, first]))


@pytest.mark.parametrize("dt,v", CASES, ids=IDS)
def test_roll_by_a_wide_traced_shift(dt, v):
    np.testing.assert_array_equal(fgrad.jit(lambda a, s: fnp.roll(a, s))(A, dt(v)),
                                  np.roll(A, int(v) % N))


def test_gather_primitive_with_int64_indices_clamps():
    idx = np.array([2 ** 32 + 3, -(2 ** 32), 2], np.int64)
    f = lambda a, i: lax.gather(a, (i,), (0,))
    np.testing.assert_array_equal(fgrad.jit(f)(A, idx), A[[N - 1, 0, 2]])
    np.testing.assert_array_equal(f(A, idx), A[[N - 1, 0, 2]])


@pytest.mark.parametrize("dt", [np.int64, np.uint64])
def test_concrete_wide_indices_raise(dt):
    i = dt(2 ** 32 + 3)
    with pytest.raises(IndexError):
        fnp.take(fnp.asarray(A), i)
    with pytest.raises(IndexError):
        fnp.asarray(A)[fnp.asarray(np.array([i]))]
    with pytest.raises(IndexError):
        fnp.asarray(A).at[fnp.asarray(np.array([i]))].set(0.0)


@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int16])
def test_one_hot_of_narrow_labels_beyond_their_range(dt):
    """Class numbers above the label dtype's range must not wrap onto labels."""
    info = np.iinfo(dt)
    labels = np.array([info.min, 0, info.max, 5], dt)
    n = int(info.max) + 200
    want = (np.array(labels, np.int64)[:, None] == np.arange(n)).astype(np.float32)
    np.testing.assert_array_equal(fgrad.nn.one_hot(labels, n), want)
    np.testing.assert_array_equal(fgrad.jit(lambda l: fgrad.nn.one_hot(l, n))(labels), want)


@pytest.mark.parametrize("dt", [np.int8, np.uint8])
def test_narrow_indices_into_a_long_axis(dt):
    """An int8 index into an axis longer than 127: negatives wrap without overflow."""
    a = np.arange(1000, dtype=np.float32)
    vals = np.array([-1, -100, 5, 127], np.int64) if dt == np.int8 else \
        np.array([255, 5, 0], np.int64)
    i = vals.astype(dt)
    np.testing.assert_array_equal(fgrad.jit(lambda a, i: a[i])(a, i), a[vals])
    np.testing.assert_array_equal(fgrad.jit(lambda a, i: fnp.take(a, i))(a, i), a[vals])
    np.testing.assert_array_equal(fnp.take(a, i), a[vals])
    np.testing.assert_array_equal(fnp.asarray(a)[fnp.asarray(i)], a[vals])
    np.testing.assert_array_equal(
        fgrad.jit(lambda a, i: fnp.take(a, i, mode="wrap"))(a, i), a[vals % 1000])


MIXED = {  # index builders (a traced index mixed with slices / new axes), i's axis size
    "i, 1:3": (lambda i: (i, slice(1, 3)), 3),
    "i, ::-2": (lambda i: (i, slice(None, None, -2)), 3),
    "1:, i": (lambda i: (slice(1, None), i), 4),
    "None, i, 1:": (lambda i: (None, i, slice(1, None)), 3),
    "i, ..., -3:": (lambda i: (i, Ellipsis, slice(-3, None)), 3),
}


@pytest.mark.parametrize("name", sorted(MIXED))
@pytest.mark.parametrize("values", [[5], [-7], [2 ** 32 + 1], [-1], [0, 9, -1, -4, 2]],
                         ids=lambda v: str(v))
def test_updates_through_slices_drop_out_of_bounds_indices(name, values):
    """x.at[i, 1:3] and kin write nothing for an out-of-bounds traced i (they wrote the
    clamped row); in-bounds entries of an index array still land."""
    a = np.arange(12.0).reshape(3, 4)
    build, size = MIXED[name]
    idx = np.array(values if len(values) > 1 else values[0], np.int64)
    f = fgrad.jit(lambda a, i: a.at[build(i)].add(100.0))
    want = a.copy()
    for v in np.atleast_1d(idx):
        if -size <= v < size:
            view = want[build(int(v))]
            view += 100.0                   # basic indices give views into want
    np.testing.assert_array_equal(f(a, idx), want)
    g = fgrad.jit(lambda a, i: a.at[build(i)].set(-1.0))
    want = a.copy()
    for v in np.atleast_1d(idx):
        if -size <= v < size:
            want[build(int(v))] = -1.0
    np.testing.assert_array_equal(g(a, idx), want)
