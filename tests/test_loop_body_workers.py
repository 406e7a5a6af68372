"""Loop bodies share their big members with the native workers (fused._body_plan,
program.emit_segment(in_loop=True), pool.RUN_SHARED): an RNN step's product and
element-wise work split by rows in every iteration, with one thread's bits."""
import time

import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad import lax
from fgrad._src.cpu import pool, threads

pytestmark = pytest.mark.skipif(not pool.supported() or threads.num_threads() < 2,
                                reason="native workers need x86-64 Linux and 2 CPUs")

RNG = np.random.default_rng(0)


def _relu_rnn(w, h0, xs):
    def step(h, x):
        h = fnp.maximum(h @ w + x, 0.0) * 0.5
        return h, h * h
    return lax.scan(step, h0, xs)


def _args(rows=256, hidden=512, steps=6):
    return (RNG.standard_normal((hidden, hidden)).astype(np.float32) / 16,
            RNG.standard_normal((rows, hidden)).astype(np.float32),
            RNG.standard_normal((steps, rows, hidden)).astype(np.float32))


def _jobs_while(f, *args, calls=20):
    """(f(*args) after `calls` calls and on until the workers ran a job or 5 s
    passed (a sleeping CPU may take milliseconds to wake), jobs they ran)."""
    shared = pool.shared(threads.num_threads())
    before, give_up, k = shared.jobs_run(), time.monotonic() + 5, 0
    while True:
        out, k = f(*args), k + 1
        if k >= calls and (shared.jobs_run() > before or time.monotonic() > give_up):
            return out, shared.jobs_run() - before


def test_a_scan_body_runs_on_the_workers_with_eager_bits():
    args = _args()
    out, jobs = _jobs_while(fgrad.jit(_relu_rnn), *args)
    assert jobs > 0
    for got, want in zip(out, _relu_rnn(*args)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_its_gradient_through_both_loops_with_eager_bits():
    args = _args(rows=128, hidden=256, steps=5)
    loss = lambda w, h0, xs: fnp.sum(_relu_rnn(w, h0, xs)[1])  # noqa: E731
    g = fgrad.grad(loss, argnums=(0, 1))
    out, jobs = _jobs_while(fgrad.jit(g), *args)
    assert jobs > 0
    for got, want in zip(out, g(*args)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_one_thread_gives_the_same_bits(monkeypatch):
    args = _args(steps=3)
    split = fgrad.jit(_relu_rnn)(*args)
    monkeypatch.setenv("FGRAD_NUM_THREADS", "1")
    alone = fgrad.jit(lambda *a: _relu_rnn(*a))(*args)
    for a, b in zip(split, alone):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
