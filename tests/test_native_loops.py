"""Scans as native loops in the CPU backend (fgrad/_src/cpu/program.py emit_scan):
the loop runs inside the compiled program, calling the body's native segment
with pointers into the carries (double-buffered), the rows of xs and ys."""
import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad import jit, lax
from fgrad._src.jit.primitive import compile_jaxpr


def _labels(f, *args):
    return [k.label for k in compile_jaxpr(jit(f).lower(*args).jaxpr, "f").kernels]


def _same(got, want, rtol=1e-12):
    for g, w in zip(fgrad.tree.leaves(got), fgrad.tree.leaves(want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-300)


def _cell(c, x):
    c = fnp.sin(c) * x + 0.5
    return c, c * 2.0


@pytest.mark.parametrize("length", [1, 2, 3, 4, 5, 6, 7])
@pytest.mark.parametrize("reverse", [False, True])
def test_scan_is_a_native_loop(length, reverse):
    # iteration 0, then pairs in chunks (see emit_scan), then an odd one out
    x0 = np.linspace(0.0, 1.0, 4)
    xs = np.linspace(1.0, 2.0, 4 * length).reshape(length, 4)
    f = lambda x0, xs: lax.scan(_cell, x0, xs, reverse=reverse)  # noqa: E731
    assert _labels(f, x0, xs) == ["native:scan"]
    _same(jit(f)(x0, xs), f(x0, xs))


def test_empty_scan_returns_its_init():
    x0, xs = np.arange(3.0), np.zeros((0, 3))
    f = lambda x0, xs: lax.scan(_cell, x0, xs)  # noqa: E731
    carry, ys = jit(f)(x0, xs)
    np.testing.assert_array_equal(carry, x0)
    assert np.asarray(ys).shape == (0, 3)


def test_several_carries_pass_through_and_repeated_outputs():
    def body(carry, x):
        a, b, n = carry
        a2 = a * x + b
        return (a2, b, n + 1), (a2, x, a2)     # b passes through; ys repeat a2, copy x

    init = (np.ones(3), np.full(3, 0.5), np.int32(0))
    xs = np.linspace(0.5, 1.5, 12).reshape(4, 3)
    f = lambda init, xs: lax.scan(body, init, xs)  # noqa: E731
    assert _labels(f, init, xs) == ["native:scan"]
    _same(jit(f)(init, xs), f(init, xs))


def test_rnn_gradient_runs_both_scans_natively():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((5, 5)) / 3
    xs = rng.standard_normal((30, 2, 5))

    def loss(w, xs):
        h, _ = lax.scan(lambda h, x: (fnp.tanh(x + h @ w), None), np.zeros((2, 5)), xs)
        return fnp.sum(h * h)

    g = fgrad.grad(loss)
    labels = _labels(g, w, xs)
    assert labels.count("native:scan") == 2 and not any(lab.startswith("loop:") for lab in labels)
    _same(jit(g)(w, xs), g(w, xs), rtol=1e-10)


def test_selector_errors_inside_the_loop_body():
    cases = (np.zeros(3), np.ones(3), np.full(3, 2.0))

    def f(which):
        def body(c, w):
            return c + lax.select_n(w, *cases), None
        return lax.scan(body, np.zeros(3), which)[0]

    good = np.array([[0, 1, 2], [2, 1, 0]], np.int32)
    assert _labels(f, good) == ["native:scan"]
    _same(jit(f)(good), f(good))
    with pytest.raises(ValueError, match="invalid entry"):
        jit(f)(np.array([[0, 1, 2], [2, 7, 0]], np.int32))


def test_scans_that_cannot_be_native_still_run_as_loops():
    def nested(x0, xs):   # a scan in the body: the body is not one native segment
        def body(c, x):
            inner, _ = lax.scan(lambda d, y: (d * y + 1.0, None), c, x[None])
            return inner, inner
        return lax.scan(body, x0, xs)

    x0, xs = np.ones(3), np.linspace(0.5, 1.0, 12).reshape(4, 3)
    labels = _labels(nested, x0, xs)
    assert "loop:scan" in labels, labels
    _same(jit(nested)(x0, xs), nested(x0, xs))


def test_loop_compile_time_does_not_grow_with_the_trip_count():
    x0 = np.ones(4)
    sizes = []
    for n in (10, 10_000):
        f = lambda x0, n=n: lax.scan(lambda c, _: (fnp.cos(c), None), x0, None, length=n)[0]  # noqa: E731
        exe = compile_jaxpr(jit(f).lower(x0).jaxpr, "f")
        sizes.append(len(exe.llvm_ir))
        _same(jit(f)(x0), f(x0))
    assert abs(sizes[0] - sizes[1]) <= 16, sizes     # only the trip count's digits differ


def _newton(a):
    def cond(s):
        x, it = s
        return (fnp.abs(x * x - a) > 1e-12 * a) & (it < 100)

    def body(s):
        x, it = s
        return 0.5 * (x + a / x), it + 1
    return lax.while_loop(cond, body, (a, 0))


@pytest.mark.parametrize("a", [1.0, 2.0, 9.0, 1e6])
def test_while_loop_is_a_native_loop(a):
    a = np.float64(a)                 # 1.0 stops at once: the carry is never written
    labels = _labels(_newton, a)
    assert "native:while" in labels and not any(lab.startswith("loop:") for lab in labels)
    _same(jit(_newton)(a), _newton(a))


def test_while_loop_with_traced_bounds_and_arrays():
    f = lambda n, x: lax.fori_loop(0, n, lambda i, c: c * 2.0 + x, x)  # noqa: E731
    x = np.linspace(0.0, 1.0, 5)
    for n in range(9):        # the first turn, then pairs: every place the loop can end
        _same(jit(f)(np.int32(n), x), f(np.int32(n), x))
    assert "native:while" in _labels(f, np.int32(3), x)
    batched = fgrad.vmap(_newton)          # a batched predicate: loops until all are done
    a = np.array([1.0, 4.0, 1e6, 0.01])
    _same(jit(batched)(a), batched(a))


def _branches(x, y):
    return lax.switch((fnp.sum(x) > 0).astype(fnp.int32) + (fnp.sum(y) > 2).astype(fnp.int32), [
        lambda x, y: (fnp.sin(x) * y, y),
        lambda x, y: (x, x + y),                 # one output passes an operand through
        lambda x, y: (y, x),                     # both do: copies only
    ], x, y)


@pytest.mark.parametrize("shift", [-5.0, 0.5, 5.0])
def test_cond_and_switch_are_native_branches(shift):
    x, y = np.linspace(-1.0, 1.0, 6) + shift, np.linspace(0.0, 1.0, 6) + shift
    labels = _labels(_branches, x, y)
    assert "native:cond" in labels and not any(lab.startswith("branch:") for lab in labels)
    _same(jit(_branches)(x, y), _branches(x, y))


def test_cond_index_is_clamped_like_the_interpreter():
    f = lambda i, x: lax.switch(i, [lambda x: x + 1.0, lambda x: x * 3.0], x)  # noqa: E731
    x = np.arange(3.0)
    for i, dt in [(-4, np.int32), (0, np.int8), (1, np.int64), (9, np.uint8), (2 ** 40, np.uint64)]:
        _same(jit(f)(dt(i), x), f(dt(i), x))
    g = lambda p, x: lax.cond(p, lambda x: x - 1.0, lambda x: x * 2.0, x)  # noqa: E731
    for p in (True, False):
        _same(jit(g)(np.bool_(p), x), g(np.bool_(p), x))
    assert "native:cond" in _labels(g, np.bool_(True), x)


def test_grad_through_cond_inside_scan_is_native():
    def loss(w, xs):
        def body(c, x):
            c = lax.cond(x > 0, lambda c: fnp.tanh(c * w), lambda c: c * 0.5, c)
            return c, c
        return fnp.sum(lax.scan(body, np.float64(0.3), xs)[1])

    xs = np.array([0.5, -1.0, 2.0, -0.3, 0.7])
    g = fgrad.grad(loss)
    _same(jit(g)(np.float64(1.3), xs), g(np.float64(1.3), xs))
