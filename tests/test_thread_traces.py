"""Threads and the current trace: each thread has its own (core.ThreadTrace), and the
process-wide hint that the fast paths and the native jit dispatcher read says
eval_trace only while no thread is inside a transform. A thread computing eagerly
(a data loader, a callback) while another is inside grad, jit or vmap must neither
see nor disturb that transform."""
import threading

import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad._src import core
from fgrad._src.core import Array


def _run_in_thread(fn):
    """fn() in a new thread, joined; its result, or the exception it raised."""
    box = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as e:     # re-raised below, in the test's thread
            box["error"] = e
    t = threading.Thread(target=target)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def _eager_work():
    x = np.ones(3, np.float32)
    return core.current_trace(), fnp.sin(x) * 2.0 + x


def _expected_eager():
    x = np.ones(3, np.float32)
    return np.sin(x) * np.float32(2) + x


def _assert_idle():
    assert core._state.trace is core.eval_trace
    assert core._threads_inside == 0
    assert core.thread_state().depth == 0


@pytest.mark.parametrize("transform", ["grad", "jit", "vmap", "jvp", "grad_of_grad"])
def test_a_new_thread_computes_eagerly_while_another_is_inside_a_transform(transform):
    seen = {}

    def f(x):
        seen["trace"], seen["value"] = _run_in_thread(_eager_work)
        assert core._state.trace is core.SOME_THREAD_TRACES
        return fnp.sum(fnp.sin(x) * x)

    x = np.linspace(0.1, 1.0, 3).astype(np.float32)
    if transform == "grad":
        g = fgrad.grad(f)(x)
        np.testing.assert_allclose(np.asarray(g), np.cos(x) * x + np.sin(x), rtol=1e-6)
    elif transform == "jit":
        np.testing.assert_allclose(np.asarray(fgrad.jit(f)(x)), np.sum(np.sin(x) * x),
                                   rtol=1e-6)
    elif transform == "vmap":
        out = fgrad.vmap(f)(x[:, None])
        np.testing.assert_allclose(np.asarray(out), np.sin(x) * x, rtol=1e-6)
    elif transform == "jvp":
        _, t = fgrad.jvp(f, (x,), (np.ones_like(x),))
        np.testing.assert_allclose(np.asarray(t), np.sum(np.cos(x) * x + np.sin(x)),
                                   rtol=1e-6)
    else:
        h = fgrad.grad(lambda y: fnp.sum(fgrad.grad(f)(y)))(x)
        np.testing.assert_allclose(np.asarray(h), 2 * np.cos(x) - np.sin(x) * x, rtol=1e-5)
    assert seen["trace"] is core.eval_trace
    assert type(seen["value"]) is Array
    np.testing.assert_array_equal(np.asarray(seen["value"]), _expected_eager())
    _assert_idle()


def test_a_jitted_function_called_from_another_thread_inside_grad():
    """The native dispatcher reads the hint: while a thread is inside grad, another
    thread's call of a compiled function takes the Python path and still runs it
    eagerly rather than tracing it into the first thread's grad."""
    h = fgrad.jit(lambda v: fnp.exp(v) + 1.0)
    v = np.arange(4, dtype=np.float32)
    want = np.asarray(h(v))     # compiled now, at the native dispatcher
    np.testing.assert_allclose(want, np.exp(v) + 1, rtol=1e-6)
    got = {}

    def f(x):
        got["out"] = _run_in_thread(lambda: h(v))
        return fnp.sum(x * x)

    g = fgrad.grad(f)(np.float32(3.0))
    assert float(g) == 6.0
    assert type(got["out"]) is Array
    np.testing.assert_array_equal(np.asarray(got["out"]), want)
    _assert_idle()


def test_two_threads_inside_grad_at_the_same_time():
    """Each thread enters grad, then waits inside it until the other has entered too:
    their tapes are both open at once, and each gradient is still its own."""
    both_inside = threading.Barrier(2, timeout=30)

    def worker(scale):
        def f(x):
            y = fnp.sin(x) * scale
            both_inside.wait()
            return fnp.sum(y * x)
        x = np.linspace(0.2, 0.8, 4).astype(np.float32)
        g = fgrad.grad(f)(x)
        return np.asarray(g), scale * (np.cos(x) * x + np.sin(x))

    results = []
    threads = [threading.Thread(target=lambda s=s: results.append(worker(s)))
               for s in (2.0, 5.0)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 2
    for got, want in results:
        np.testing.assert_allclose(got, want, rtol=1e-5)
    _assert_idle()


def test_leaving_a_transform_by_an_exception_restores_the_thread_and_the_hint():
    def f(x):
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        fgrad.grad(f)(np.float32(1.0))
    with pytest.raises(ValueError, match="boom"):
        fgrad.jvp(f, (np.float32(1.0),), (np.float32(1.0),))
    _assert_idle()


def test_threads_mixing_grad_and_eager_work_many_times():
    """The stress case that raised TracerLevelError while the trace was process-wide:
    one thread takes gradients while another computes eagerly, interleaved by the
    interpreter's thread switches (a short switch interval makes them frequent)."""
    import sys
    errors, grads = [], []
    stop = threading.Event()

    def eager_loop():
        x = np.ones(8, np.float32)
        want = _expected_eager()
        try:
            while not stop.is_set():
                out = fnp.sin(x[:3]) * 2.0 + x[:3]
                if type(out) is not Array or not np.array_equal(np.asarray(out), want):
                    errors.append(f"eager result {out!r}")
        except BaseException as e:      # reported by the assertion below
            errors.append(repr(e))

    def f(x):
        for _ in range(20):
            x = fnp.sin(x) * 0.5 + x
        return fnp.sum(x)

    x = np.linspace(0.1, 1.0, 5).astype(np.float32)
    want = np.asarray(fgrad.grad(f)(x))
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    other = threading.Thread(target=eager_loop)
    other.start()
    try:
        for _ in range(100):
            grads.append(np.asarray(fgrad.grad(f)(x)))
    finally:
        stop.set()
        other.join()
        sys.setswitchinterval(old)
    assert not errors, errors[:3]
    for g in grads:
        np.testing.assert_array_equal(g, want)
    _assert_idle()
