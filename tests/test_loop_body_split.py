"""A native loop's body shared with the worker pool (fused._body_parallel): a
per-step product split by its output's columns (blas.SPLIT_COLUMNS), each
range one gemm on one thread, the element-wise kernels around it by rows, with
the bits of the loop on one thread, and NumPy's product bits (eager's matmul).
"""
import numpy as np
import pytest

import fgrad
import fgrad_nn
from fgrad import lax
from fgrad._src.cpu import blas, pool, threads
from fgrad._src.jit.primitive import compile_jaxpr


def _splits_body(f, *args):
    """Whether the compiled program's loop body runs on the shared pool."""
    exe = compile_jaxpr(fgrad.jit(f).lower(*args).jaxpr, "f")
    return pool.RUN_SHARED in exe.llvm_ir


def _one_thread(f, args, monkeypatch):
    with monkeypatch.context() as m:
        m.setenv("FGRAD_NUM_THREADS", "1")
        assert not _splits_body(f, *args)
        return fgrad.jit(f)(*args)


def _assert_same(got, want):
    for g, w in zip(fgrad.tree.leaves(got), fgrad.tree.leaves(want)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


@pytest.fixture(autouse=True)
def _two_threads():
    if threads.split_threads() < 2:
        pytest.skip("one worker thread")


@pytest.mark.parametrize("n,transposed", [(640, False), (1000, False), (640, True)])
@pytest.mark.parametrize("length", [1, 4, 7])
def test_a_scans_per_step_product_splits_by_columns(n, transposed, length, monkeypatch):
    rng = np.random.default_rng(n + length)
    k = 96
    w = (rng.standard_normal((n, k) if transposed else (k, n)) / 8).astype(np.float32)
    h0 = rng.standard_normal((48, k)).astype(np.float32)
    xs = rng.standard_normal((length, 48, n)).astype(np.float32)

    def f(w, h0, xs):
        def step(h, x):
            z = (h @ (w.T if transposed else w)) + x
            h = lax.tanh(z[:, :k]) * lax.logistic(z[:, n - k:])
            return h, z
        return lax.scan(step, h0, xs)

    assert _splits_body(f, w, h0, xs)
    got = fgrad.jit(f)(w, h0, xs)
    _assert_same(got, _one_thread(f, (w, h0, xs), monkeypatch))
    # the first step's product has NumPy's bits
    np.testing.assert_array_equal(np.asarray(got[1][0]),
                                  h0 @ (w.T if transposed else w) + xs[0])
    for g, e in zip(fgrad.tree.leaves(got), fgrad.tree.leaves(f(w, h0, xs))):    # eager
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-5, atol=1e-5)


def test_lstm_gradient_loops_split_with_one_threads_bits(monkeypatch):
    """Both scans of an LSTM's gradient (the forward's h @ W_hh^T, the backward's
    gate cotangents @ W_hh) share their steps with the workers."""
    model = fgrad_nn.LSTM(64, 64, key=fgrad.random.key(0), dtype=np.float32)
    x = np.random.default_rng(2).standard_normal((6, 32, 64)).astype(np.float32)

    def loss(m, x):
        return (m(x)[0] ** 2).sum()
    g = fgrad.grad(loss)
    exe = compile_jaxpr(fgrad.jit(g).lower(model, x).jaxpr, "lstm")
    assert exe.llvm_ir.count(f'call void @"{pool.RUN_SHARED}"(') == 2     # one in each loop
    got = fgrad.jit(g)(model, x)
    _assert_same(got, _one_thread(g, (model, x), monkeypatch))
    for a, e in zip(fgrad.tree.leaves(got), fgrad.tree.leaves(g(model, x))):    # eager
        np.testing.assert_allclose(np.asarray(a), np.asarray(e), rtol=1e-4, atol=1e-5)


def test_products_that_columns_would_change_stay_whole(monkeypatch):
    """Where column ranges would not give NumPy's bits, the body is not split."""
    monkeypatch.setattr(blas, "splits_columns_exactly", lambda *args: False)
    w = np.ones((128, 512), np.float32)
    xs = np.ones((3, 32, 512), np.float32)

    def f(w, xs):
        return lax.scan(lambda h, x: (lax.tanh((h @ w + x)[:, :128]), None),
                        np.zeros((32, 128), np.float32), xs)
    assert not _splits_body(f, w, xs)
