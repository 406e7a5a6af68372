"""Native worker threads (fgrad/_src/cpu/pool.py) and the segments that share
their big members with them (program.emit_segment with a Parallel plan): every
result equals a single thread's or NumPy's, whichever threads take part."""
import ctypes
import itertools
import os
import threading

import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad import lax
from fgrad._src.cpu import blas, engine, pool, threads

from concurrency import run_threads

pytestmark = pytest.mark.skipif(not pool.supported() or threads.num_threads() < 2,
                                reason="native workers need x86-64 Linux and 2 CPUs")

# work(table, thread): table = [counter address, amount, thread-0 runs]; every
# thread that runs the job adds `amount` to the counter; thread 0 counts its runs
# and then lingers for about 20000 cycles, so that a worker has time to join
COUNT = r"""
declare i64 @llvm.readcyclecounter()
define void @count(ptr %table, i64 %thread) {
entry:
  %a = load i64, ptr %table
  %counter = inttoptr i64 %a to ptr
  %vp = getelementptr inbounds i64, ptr %table, i64 1
  %v = load i64, ptr %vp
  %old = atomicrmw add ptr %counter, i64 %v seq_cst
  %is_main = icmp eq i64 %thread, 0
  %m = zext i1 %is_main to i64
  %mp = getelementptr inbounds i64, ptr %table, i64 2
  %old2 = atomicrmw add ptr %mp, i64 %m seq_cst
  br i1 %is_main, label %linger, label %done
linger:
  %t0 = call i64 @llvm.readcyclecounter()
  %until = add i64 %t0, 20000
  br label %wait
wait:
  %t = call i64 @llvm.readcyclecounter()
  %more = icmp ult i64 %t, %until
  br i1 %more, label %wait, label %done
done:
  ret void
}
"""


@pytest.fixture(scope="module")
def count_job():
    cm = engine.compile_module(COUNT, ["count"], cache=False)
    run = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p,
                           ctypes.c_void_p)(pool.run_address())
    return cm, cm.address("count"), run


@pytest.mark.parametrize("workers", [1, 3])
def test_every_job_runs_once_on_the_caller_and_once_per_worker_that_took_it(count_job,
                                                                           workers):
    _, job, run = count_job
    p = pool.Pool(workers)
    try:
        counter = np.zeros(1, np.int64)

        def calls(n, amount):
            table = np.array([counter.ctypes.data, amount, 0], np.int64)
            for _ in range(n):
                run(p.address, job, table.ctypes.data)
            return table[2]

        before = p.jobs_run()
        assert calls(3000, 1) == 3000                   # the caller ran every job
        assert counter[0] == 3000 + (p.jobs_run() - before)
        assert p.jobs_run() > before                    # and the workers took part
        # several threads at once: one has the pool, the others run alone
        counter[0] = 0
        before = p.jobs_run()
        main_runs = []
        run_threads(lambda: main_runs.append(calls(2000, 1)), [()] * 3)
        assert main_runs == [2000] * 3
        assert counter[0] == 6000 + (p.jobs_run() - before)
    finally:
        p.close()


def test_a_sleeping_worker_is_woken(count_job):
    _, job, run = count_job
    p = pool.Pool(1)
    try:
        counter = np.zeros(1, np.int64)
        table = np.array([counter.ctypes.data, 1, 0], np.int64)
        while not p._at(pool.SLOT + 4, ctypes.c_int32).value:      # until it sleeps
            threading.Event().wait(0.001)
        before, calls = p.jobs_run(), 0
        while p.jobs_run() == before and calls < 200_000:   # a woken CPU may take ms
            run(p.address, job, table.ctypes.data)
            calls += 1
        assert p.jobs_run() > before and counter[0] == calls + p.jobs_run() - before
    finally:
        p.close()


def split_labels(f, *args):
    return [line for line in f.lower(*args).as_text().splitlines()
            if line.startswith("//") and "split over" in line]


def test_a_forked_child_gets_workers_of_its_own():
    shared = pool.shared(threads.num_threads())
    f = fgrad.jit(lambda w, x, b: (w * 2.0 + x, b @ b))
    w, b = np.ones((600, 700), np.float32), np.ones((4, 4), np.float32)
    assert split_labels(f, w, np.ones(700, np.float32), b)
    pid = os.fork()
    if pid == 0:
        ok = False
        try:
            before = shared.jobs_run()
            for _ in range(300):
                out, _ = f(w, np.ones(700, np.float32), b)
            ok = bool(np.all(np.asarray(out) == 3.0)) and shared.jobs_run() > before
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


# ----------------------------------------------------------------------------
# Segments split over the workers

def run_many(f, *args, calls=60):
    """f(*args) `calls` times, and on until the shared pool's workers have run a
    job (a sleeping CPU may take milliseconds to wake) or 5 s have passed; (the
    last result, jobs the workers ran meanwhile)."""
    import time
    shared = pool.shared(threads.num_threads())
    before, give_up = shared.jobs_run(), time.monotonic() + 5
    for k in itertools.count():
        out = f(*args)
        if k + 1 >= calls and (shared.jobs_run() > before or time.monotonic() > give_up):
            return out, shared.jobs_run() - before


RNG = np.random.default_rng(0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matrix_vector_products_in_every_layout(dtype):
    w = RNG.standard_normal((700, 600)).astype(dtype)
    x, v = RNG.standard_normal(700).astype(dtype), RNG.standard_normal(600).astype(dtype)

    def products(w, x, v):
        # x @ w and w.T @ x sum over w's rows (partial sums), w @ v and v @ w.T
        # give rows of the result
        return (x[None, :] @ w, w.T @ x, w @ v, v[None, :] @ w.T,
                w - 0.01 * x[:, None] * v[None, :])

    f = fgrad.jit(products)
    labels = split_labels(f, w, x, v)
    assert sum("partial sums" in line for line in labels) == 2 and len(labels) == 5
    out, jobs = run_many(f, w, x, v)
    assert jobs > 0
    tol = dict(rtol=2e-4, atol=2e-4) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    want = (x[None, :] @ w, w.T @ x, w @ v, v[None, :] @ w.T, w - 0.01 * np.outer(x, v))
    for got, expected in zip(out, want):
        np.testing.assert_allclose(np.asarray(got), expected, **tol)


def test_matrix_products_split_their_rows():
    a = RNG.standard_normal((96, 300)).astype(np.float32)
    b = RNG.standard_normal((300, 80)).astype(np.float32)
    c = np.ones((600, 700), np.float32)
    f = fgrad.jit(lambda a, b, c: (fnp.maximum(a @ b, 0.0), c * 3.0))
    assert len(split_labels(f, a, b, c)) == 2
    out, _ = run_many(f, a, b, c)
    np.testing.assert_allclose(np.asarray(out[0]), np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("m,k,n", [(512, 256, 300), (256, 600, 300), (128, 784, 512),
                                   (200, 200, 300), (784, 1024, 512), (1024, 784, 512)])
def test_products_of_any_size_split_over_the_workers_with_eager_bits(m, k, n, dt):
    """A product too big for one thread alone (more than SMALL_GEMM multiply-adds),
    up to an MLP's first layer at batch 1024, is split by rows over fgrad's workers
    with its neighbours, each part a gemm on one thread, and gives eager's bits,
    also for shapes whose blocks OpenBLAS's threads cut otherwise (blas.parts_of:
    eager computes those in the same parts)."""
    a = RNG.standard_normal((m, k)).astype(dt)
    b = RNG.standard_normal((k, n)).astype(dt)
    assert blas.SMALL_GEMM < m * k * n <= blas.PROBE_GEMM
    g = lambda a, b: fnp.maximum(a @ b, 0.0) * 2.0  # noqa: E731
    f = fgrad.jit(g)
    labels = split_labels(f, a, b)
    assert any("dot_general" in line for line in labels), labels
    out, jobs = run_many(f, a, b, calls=3)
    assert jobs > 0
    np.testing.assert_array_equal(np.asarray(out), np.asarray(g(fnp.asarray(a), b)))


@pytest.mark.parametrize("dims,rshape", [
    ((((3,), (3,)), ((0, 1), (0, 1))), (4, 3, 40, 16)),    # q @ k^T per (batch, head)
    ((((3,), (2,)), ((0, 1), (0, 1))), (4, 3, 16, 40)),    # q @ k per (batch, head)
])
def test_batched_products_split_their_batch(dims, rshape):
    """A batch of small gemms is shared by the workers, element by element, and
    gives the bits the interpreter does."""
    q = RNG.standard_normal((4, 3, 50, 16)).astype(np.float32)
    k = RNG.standard_normal(rshape).astype(np.float32)
    def g(q, k):
        return fnp.maximum(lax.dot_general(q, k, dims) * 0.25, 0.0)
    f = fgrad.jit(g)
    labels = split_labels(f, q, k)
    assert any("dot_general" in line for line in labels), labels
    out, jobs = run_many(f, q, k)
    assert jobs > 0
    np.testing.assert_array_equal(np.asarray(out), np.asarray(g(q, k)))


def test_donated_updates_in_place_and_concurrent_callers():
    def step(w, x):
        h = fnp.tanh(x @ w)
        return w - 0.001 * x[:, None] * h, fnp.sum(h)

    w0 = RNG.standard_normal((800, 500)).astype(np.float32) / 30
    x = RNG.standard_normal(800).astype(np.float32)
    f = fgrad.jit(step, donate_argnums=(0,))
    assert split_labels(f, w0.copy(), x)

    def reference(n):
        w = w0.astype(np.float64)
        for _ in range(n):
            h = np.tanh(x @ w)
            w = w - 0.001 * np.outer(x, h)
        return w

    results = {}

    def train(k):
        w = fnp.asarray(w0.copy())
        for _ in range(40):
            w, _ = f(w, x)
        results[k] = np.asarray(w)

    run_threads(train, [(k,) for k in range(3)])
    for k in range(3):
        np.testing.assert_allclose(results[k], reference(40), rtol=2e-3, atol=2e-4)


def test_an_invalid_selector_in_a_split_member_raises():
    which = np.zeros((600, 700), np.int32)
    which[599, 699] = 7                     # in the last rows: a worker's chunk
    a = np.ones((600, 700), np.float32)
    b = np.ones((4, 4), np.float32)
    f = fgrad.jit(lambda w, a, b: (lax.select_n(w, a, a * 2.0) * 3.0, b @ b))
    assert split_labels(f, which, a, b)
    with pytest.raises(ValueError, match="invalid entry in choice array"):
        run_many(f, which, a, b)
    which[599, 699] = 1
    out, _ = run_many(f, which, a, b, calls=3)
    assert np.asarray(out[0])[599, 699] == 6.0


def test_subnormals_are_flushed_in_every_chunk():
    x = np.full((600, 700), 1e-30, np.float32)
    b = np.ones((4, 4), np.float32)
    f = fgrad.jit(lambda x, b: (x * 1e-10, b @ b))
    saved = fgrad.config.flush_denormals
    fgrad.config.update("flush_denormals", True)
    try:
        assert split_labels(f, x, b)
        out, jobs = run_many(f, x, b)
        assert jobs > 0 and not np.any(np.asarray(out[0]))
    finally:
        fgrad.config.update("flush_denormals", saved)
    out = fgrad.jit(lambda x, b: (x * 1e-10, b @ b))(x, b)[0]
    assert np.all(np.asarray(out) > 0)              # kept by programs compiled without it


def test_one_thread_splits_nothing(monkeypatch):
    monkeypatch.setenv("FGRAD_NUM_THREADS", "1")
    f = fgrad.jit(lambda x, b: (x * 2.0, b @ b))
    x, b = np.ones((600, 700), np.float32), np.ones((4, 4), np.float32)
    assert not split_labels(f, x, b)
    np.testing.assert_array_equal(np.asarray(f(x, b)[0]), 2 * x)


def test_more_threads_than_a_mask_holds(monkeypatch):
    monkeypatch.setenv("FGRAD_NUM_THREADS", "100")
    f = fgrad.jit(lambda x, b: (x * 2.0 + 1.0, b @ b))
    x, b = RNG.standard_normal((600, 700)).astype(np.float32), np.ones((4, 4), np.float32)
    labels = split_labels(f, x, b)
    assert labels and "split over 64 threads" in labels[0]
    out, _ = run_many(f, x, b, calls=5)
    np.testing.assert_allclose(np.asarray(out[0]), x * 2 + 1, rtol=1e-6)


def test_the_native_call_path_runs_split_segments():
    from fgrad._src.cpu import dispatch
    x = RNG.standard_normal(20000).astype(np.float32)   # small enough for the native path
    b = np.ones((4, 4), np.float32)
    f = fgrad.jit(lambda x, b: (b @ b, fnp.sin(x) * 2.0 + fnp.exp(-x * x)))
    assert split_labels(f, x, b)
    for _ in range(4):
        f(x, b)
    assert f._fast and dispatch.hits(f._fast) >= 1
    out, jobs = run_many(f, x, b, calls=300)
    assert jobs > 0
    np.testing.assert_allclose(np.asarray(out[1]), np.sin(x) * 2 + np.exp(-x * x), rtol=2e-6,
                               atol=1e-6)


def test_without_threads_to_start_jobs_run_on_the_caller(count_job, monkeypatch):
    _, job, run = count_job

    def refuse(self):
        raise RuntimeError("can't start new thread")
    monkeypatch.setattr(threading.Thread, "start", refuse)
    p = pool.Pool(2)
    monkeypatch.undo()
    assert p.workers == 0
    counter = np.zeros(1, np.int64)
    table = np.array([counter.ctypes.data, 1, 0], np.int64)
    for _ in range(10):
        run(p.address, job, table.ctypes.data)
    assert counter[0] == 10 and table[2] == 10


# ----------------------------------------------------------------------------
# Reductions split by their kept elements

def _one_thread(fn, *args, monkeypatch):
    """fn jitted and run with splitting disabled (FGRAD_NUM_THREADS=1)."""
    with monkeypatch.context() as m:
        m.setenv("FGRAD_NUM_THREADS", "1")
        f = fgrad.jit(fn)
        assert not split_labels(f, *args)
        return np.asarray(f(*args))


def test_a_lone_big_kernel_is_split_over_the_workers(monkeypatch):
    """A product, convolution or max pooling that is a program's only kernel still
    shares its rows / examples / planes with the workers (it used to run on the calling thread
    alone: a jitted 64x64x32x32 3x3 convolution took twice the time of its
    gradient), with one thread's bits and eager's."""
    if threads.split_threads() < 2:
        pytest.skip("one worker thread")
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((256, 512), np.float32), rng.standard_normal((512, 256), np.float32)
    x = rng.standard_normal((8, 16, 20, 20)).astype(np.float32)
    w = rng.standard_normal((16, 16, 3, 3)).astype(np.float32)
    pool_in = rng.standard_normal((64, 64, 32, 32)).astype(np.float32)
    cases = [(lambda a, b: a @ b, (a, b)),
             (lambda x, w: fgrad.lax.conv_general_dilated(x, w, (1, 1), "SAME"), (x, w)),
             # a weight gradient's shape: lane products, split by vectors of examples
             # (4 of them), or by output features (2)
             (lambda x, w: fgrad.lax.conv_general_dilated(x, w, (1, 1), ((1, 1), (1, 1))),
              (rng.standard_normal((64, 3, 14, 14)).astype(np.float32),
               rng.standard_normal((8, 3, 13, 13)).astype(np.float32))),
             (lambda x, w: fgrad.lax.conv_general_dilated(x, w, (1, 1), ((1, 1), (1, 1))),
              (rng.standard_normal((32, 3, 14, 14)).astype(np.float32),
               rng.standard_normal((9, 3, 13, 13)).astype(np.float32))),
             (lambda p: fgrad.lax.reduce_window_max(p, (1, 1, 2, 2), (1, 1, 2, 2)), (pool_in,))]
    for f, args in cases:
        assert split_labels(fgrad.jit(f), *args)
        got = np.asarray(fgrad.jit(f)(*args))
        np.testing.assert_array_equal(got, _one_thread(f, *args, monkeypatch=monkeypatch))
        eager = f(*[fgrad.numpy.asarray(v) for v in args])          # (a @ b: fgrad's product)
        np.testing.assert_array_equal(got, np.asarray(eager))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,axes,reduce", [
    ((600, 700), (-1,), fnp.sum),              # one running sum per row
    ((60, 3000), (-1,), fnp.sum),              # blocked pairwise sums (summation.PairwiseSum)
    ((600, 700), (-1,), fnp.max),
    ((40, 300, 60), (1,), fnp.sum),            # a middle axis: block rows (PairwiseRows)
    ((8, 50, 40, 30), (1, 2), fnp.sum),        # middle axes
    ((8, 50, 40, 30), (1, 2), fnp.max),
    ((30, 40, 20, 12), (1, 3), fnp.sum),       # kept axes between reduced ones
])
def test_reductions_split_by_kept_elements_give_one_threads_bits(shape, axes, reduce, dtype,
                                                                  monkeypatch):
    """A kernel ending in reductions whose outer loop runs over kept elements is
    shared by the workers in ranges of those elements; each output element still
    adds its terms in one thread's order, so the bits are one thread's."""
    x = RNG.standard_normal(shape).astype(dtype)
    fn = lambda x: (reduce(fnp.exp(x * 0.5), axis=axes), x * 2.0)  # noqa: E731
    f = fgrad.jit(fn)
    labels = split_labels(f, x)
    assert any("reduce_" in line for line in labels), labels
    out, jobs = run_many(f, x, calls=3)
    assert jobs > 0
    np.testing.assert_array_equal(np.asarray(out[0]),
                                  _one_thread(lambda x: fn(x)[0], x, monkeypatch=monkeypatch))
    np.testing.assert_allclose(np.asarray(out[0]), reduce(np.exp(x * 0.5), axis=axes),
                               rtol=1e-5 if dtype == np.float32 else 1e-12)


def test_softmax_rows_split_with_one_threads_bits(monkeypatch):
    """Softmax over the last axis: its row maximum and row sum kernels are split
    by rows."""
    x = RNG.standard_normal((32, 4, 128, 128)).astype(np.float32)

    def softmax(x):
        e = fnp.exp(x - fnp.max(x, axis=-1, keepdims=True))
        return e / fnp.sum(e, axis=-1, keepdims=True)
    f = fgrad.jit(softmax)
    assert sum("reduce_" in line for line in split_labels(f, x)) == 2
    out, _ = run_many(f, x, calls=3)
    np.testing.assert_array_equal(np.asarray(out), _one_thread(softmax, x, monkeypatch=monkeypatch))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,axes,reduce", [
    ((700, 600), (0,), fnp.sum),               # column sums (a bias gradient): block rows
    ((20, 16384), (0,), fnp.sum),              # few rows: one running sum per column
    ((700, 600), (0,), fnp.max),
    ((16, 32, 12, 12), (0, 2, 3), fnp.sum),    # BatchNorm's sums, channels in the middle
    ((16, 8, 8, 256), (0, 1, 2), fnp.sum),     # and channels last
    ((30, 40, 20, 12), (0, 2), fnp.sum),       # reduced axes around a kept one
])
def test_reductions_over_leading_axes_split_by_kept_elements(shape, axes, reduce, dtype,
                                                             monkeypatch):
    """A reduction over leading axes is split by ranges of the kept elements
    (columns, channels): each thread adds all the rows of its own elements in
    one thread's order, so the bits are one thread's."""
    x = RNG.standard_normal(shape).astype(dtype)
    fn = lambda x: reduce(fnp.exp(x * 0.5), axis=axes)  # noqa: E731
    f = fgrad.jit(fn)
    assert any("reduce_" in line for line in split_labels(f, x))
    out, jobs = run_many(f, x, calls=3)
    assert jobs > 0
    np.testing.assert_array_equal(np.asarray(out), _one_thread(fn, x, monkeypatch=monkeypatch))
    np.testing.assert_allclose(np.asarray(out), reduce(np.exp(x * 0.5), axis=axes),
                               rtol=1e-5 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("shape,axes", [
    ((700, 600), None),            # a full sum accumulates across every loop
    ((64, 16, 16, 32), (0, 1, 2)), # columns narrower than fused.SPLIT_ROW_BYTES
    ((128, 1024), (0,)),           # fewer terms than fused.SPLIT_COLUMN_TERMS
])
def test_sums_that_stay_on_one_thread(shape, axes):
    x = RNG.standard_normal(shape).astype(np.float32)
    f = fgrad.jit(lambda x: fnp.sum(fnp.exp(x), axis=axes))
    assert not split_labels(f, x)
    np.testing.assert_allclose(np.asarray(f(x)), np.exp(x).sum(axis=axes), rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128, np.float16, np.int32])
def test_row_sums_of_other_dtypes_split_with_one_threads_bits(dtype, monkeypatch):
    x = RNG.standard_normal((300, 3000)) * 4
    if np.dtype(dtype).kind == "c":
        x = x + 1j * RNG.standard_normal(x.shape)
    x = x.astype(dtype)
    fn = lambda x: fnp.sum(x * 2, axis=-1)  # noqa: E731
    f = fgrad.jit(fn)
    assert split_labels(f, x)
    out, _ = run_many(f, x, calls=3)
    np.testing.assert_array_equal(np.asarray(out), _one_thread(fn, x, monkeypatch=monkeypatch))
    if np.dtype(dtype).kind == "i":
        np.testing.assert_array_equal(np.asarray(out), np.sum(x * 2, axis=-1))
