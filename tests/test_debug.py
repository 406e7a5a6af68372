"""fgrad.debug.print / callback under every transform, and tap_grad."""
import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad.test_util import check_grads

f64 = np.float64


def _lines(capsys):
    return capsys.readouterr().out.splitlines()


def _printing(x):
    fgrad.debug.print("x = {}", x)
    y = fnp.sin(x)
    fgrad.debug.print("y = {y}", y=y)
    return (y * 2.0).sum()


X = np.array([0.0, 1.0, 2.0])
X_LINE = f"x = {X}"
Y_LINE = f"y = {np.sin(X)}"


# ----------------------------------------------------------------------------
# debug.print

def test_print_eager(capsys):
    _printing(X)
    assert _lines(capsys) == [X_LINE, Y_LINE]


def test_print_scalar_format_spec(capsys):
    fgrad.debug.print("loss {:.3f} at step {}", fnp.asarray(f64(0.123456)), 7)
    assert _lines(capsys) == ["loss 0.123 at step 7"]


def test_print_pytree_kwargs(capsys):
    fgrad.debug.print("{p[w]} {p[b]}", p={"w": np.array([1.0, 2.0]), "b": np.float64(3.0)})
    assert _lines(capsys) == ["[1. 2.] 3.0"]


def test_print_under_jit_runs_every_call(capsys):
    f = fgrad.jit(_printing)
    f(X)
    f(X + 1.0)
    assert _lines(capsys) == [X_LINE, Y_LINE, f"x = {X + 1.0}", f"y = {np.sin(X + 1.0)}"]
    assert f.cache_info().misses == 1


def test_print_of_constants_under_jit_runs_at_run_time(capsys):
    @fgrad.jit
    def f(x):
        fgrad.debug.print("hello {}", np.float64(2.5))
        return x + 1.0

    f(X)
    f(X)
    assert _lines(capsys) == ["hello 2.5", "hello 2.5"]


def test_print_under_vmap_prints_each_member(capsys):
    xs = np.arange(6.0).reshape(2, 3)
    fgrad.vmap(_printing)(xs)
    # Each print runs once per member, in member order, before the next print.
    assert _lines(capsys) == [f"x = {xs[0]}", f"x = {xs[1]}",
                              f"y = {np.sin(xs[0])}", f"y = {np.sin(xs[1])}"]


def test_print_under_vmap_in_axes_1_and_unmapped(capsys):
    xs = np.arange(6.0).reshape(3, 2)

    def f(x, c):
        fgrad.debug.print("{} {}", x, c)
        return x * c

    fgrad.vmap(f, in_axes=(1, None))(xs, np.float64(4.0))
    assert _lines(capsys) == [f"{xs[:, 0]} 4.0", f"{xs[:, 1]} 4.0"]


def test_print_of_unmapped_value_under_vmap_prints_once(capsys):
    def f(x, c):
        fgrad.debug.print("c = {}", c)
        return x * c

    fgrad.vmap(f, in_axes=(0, None))(np.arange(3.0), np.float64(2.0))
    assert _lines(capsys) == ["c = 2.0"]


def test_print_under_nested_vmap(capsys):
    xs = np.arange(4.0).reshape(2, 2)
    fgrad.vmap(fgrad.vmap(lambda x: fgrad.debug.print("{}", x) or x))(xs)
    assert _lines(capsys) == ["0.0", "1.0", "2.0", "3.0"]


@pytest.mark.parametrize("transform", [
    fgrad.grad,
    lambda f: fgrad.jit(fgrad.grad(f)),
    lambda f: fgrad.grad(fgrad.jit(f)),
    lambda f: (lambda x: fgrad.jvp(f, (x,), (np.ones_like(x),))),
    lambda f: (lambda x: fgrad.vjp(f, x)[1](f64(1.0))),
])
def test_print_under_differentiation_prints_primals_once(capsys, transform):
    transform(_printing)(X)
    assert _lines(capsys) == [X_LINE, Y_LINE]


def test_pullback_and_linearized_function_do_not_print(capsys):
    _, pullback = fgrad.vjp(_printing, X)
    _, f_jvp = fgrad.linearize(_printing, X)
    capsys.readouterr()
    pullback(f64(1.0))
    f_jvp(np.ones(3))
    assert _lines(capsys) == []


def test_print_under_hessian(capsys):
    fgrad.hessian(_printing)(X)
    out = _lines(capsys)
    assert out and set(out) <= {X_LINE, Y_LINE}


def test_print_does_not_change_values_or_derivatives():
    def plain(x):
        return (fnp.sin(x) * 2.0).sum()

    np.testing.assert_allclose(fgrad.grad(_printing)(X), fgrad.grad(plain)(X))
    check_grads(lambda x: _printing(x), (X + 0.3,), order=2, modes=("fwd", "rev"))


def test_print_in_jaxpr_and_compiled_plan():
    jaxpr = fgrad.make_jaxpr(_printing)(X)
    names = [e.primitive.name for e in jaxpr.eqns]
    assert names.count("debug_callback") == 2
    assert "print('x = {}')" in str(jaxpr)
    text = fgrad.jit(_printing).lower(X).as_text()
    steps = [line for line in text.splitlines() if line.startswith("// ") and ": " in line]
    assert sum("python:debug_callback" in line for line in steps) == 2, steps


def test_print_outside_tracing_is_not_staged_twice(capsys):
    # Tracing (make_jaxpr) records the print but does not run it.
    fgrad.make_jaxpr(_printing)(X)
    assert _lines(capsys) == []


# ----------------------------------------------------------------------------
# debug.callback

def _ordered(log):
    def f(x):
        a = fnp.exp(x)
        b = a * 3.0          # computed before the first callback below
        fgrad.debug.callback(lambda v: log.append(("a", v)), a)
        fgrad.debug.callback(lambda v: log.append(("x", v)), x)
        fgrad.debug.callback(lambda v: log.append(("b", v)), b)
        return b.sum()
    return f


@pytest.mark.parametrize("transform", [lambda f: f, fgrad.jit, fgrad.grad,
                                       lambda f: fgrad.jit(fgrad.grad(f))])
def test_callback_order_as_written(transform):
    log = []
    transform(_ordered(log))(X)
    assert [k for k, _ in log] == ["a", "x", "b"]
    np.testing.assert_allclose(log[0][1], np.exp(X))
    np.testing.assert_allclose(log[1][1], X)
    np.testing.assert_allclose(log[2][1], 3 * np.exp(X))


def test_callback_receives_arrays_and_passes_other_values():
    got = []
    fgrad.jit(lambda x: fgrad.debug.callback(
        lambda a, tag, scale=None: got.append((a, tag, scale)), x, "t", scale=2) or x)(X)
    (a, tag, scale), = got
    assert isinstance(a, fgrad.Array) and tag == "t" and scale == 2
    np.testing.assert_array_equal(a, X)


def test_callback_whose_value_is_otherwise_unused_survives_jit():
    calls = []

    @fgrad.jit
    def f(x):
        fgrad.debug.callback(calls.append, fnp.cos(x))  # cos feeds only the callback
        fgrad.debug.callback(calls.append, fnp.cos(x))  # an identical callback is kept
        return x

    f(X)
    assert len(calls) == 2
    np.testing.assert_allclose(calls[0], np.cos(X))


def test_callback_under_vmap_of_jit_and_jit_of_vmap():
    xs = np.arange(6.0).reshape(2, 3)
    for t in (lambda f: fgrad.vmap(fgrad.jit(f)), lambda f: fgrad.jit(fgrad.vmap(f))):
        seen = []
        t(lambda x: fgrad.debug.callback(seen.append, x * 2.0) or x)(xs)
        assert len(seen) == 2
        for got, want in zip(seen, xs * 2.0):
            np.testing.assert_allclose(got, want)


def test_callback_under_jvp_sees_primals_only():
    seen = []
    fgrad.jvp(lambda x: fgrad.debug.callback(seen.append, x) or x * x, (X,), (np.ones(3),))
    assert len(seen) == 1
    np.testing.assert_array_equal(seen[0], X)


def test_callback_exception_propagates():
    def boom(x):
        raise RuntimeError("from the callback")

    with pytest.raises(RuntimeError, match="from the callback"):
        fgrad.jit(lambda x: fgrad.debug.callback(boom, x) or x)(X)


# ----------------------------------------------------------------------------
# tap_grad

def _model(tap):
    def f(x, w):
        h = fnp.tanh(x * w)
        h = fgrad.debug.tap_grad(h, tap)
        return (h * h).sum() + (h * x).sum()
    return f


def _expected_ct(x, w):
    h = np.tanh(x * w)
    _, pullback = fgrad.vjp(lambda h: (h * h).sum() + (h * x).sum(), h)
    return pullback(f64(1.0))[0]


@pytest.mark.parametrize("transform", [
    lambda f: fgrad.grad(f, argnums=(0, 1)),
    lambda f: fgrad.jit(fgrad.grad(f, argnums=(0, 1))),
    lambda f: fgrad.grad(fgrad.jit(f), argnums=(0, 1)),
    lambda f: (lambda x, w: fgrad.vjp(f, x, w)[1](f64(1.0))),
])
def test_tap_grad_receives_the_cotangent(transform):
    x, w = np.array([0.5, -1.0, 2.0]), np.array([1.5, 0.3, -0.7])
    seen = []
    grads = transform(_model(seen.append))(x, w)
    assert len(seen) == 1
    np.testing.assert_allclose(seen[0], _expected_ct(x, w), rtol=1e-12)
    want = fgrad.grad(_model(lambda ct: None), argnums=(0, 1))(x, w)
    for g, e in zip(grads, want):
        np.testing.assert_allclose(g, e, rtol=1e-12)


def test_tap_grad_is_identity_forward_and_silent():
    seen = []
    x = np.array([1.0, 2.0])
    np.testing.assert_array_equal(fgrad.debug.tap_grad(x, seen.append), x)
    np.testing.assert_array_equal(fgrad.jit(lambda x: fgrad.debug.tap_grad(x, seen.append))(x), x)
    assert seen == []


def test_tap_grad_on_a_pytree():
    seen = []

    def f(p):
        p = fgrad.debug.tap_grad(p, seen.append)
        return (p["a"] * 3.0).sum() + p["b"] ** 2

    fgrad.grad(f)({"a": np.ones(2), "b": f64(2.0)})
    (ct,), = [seen]
    np.testing.assert_allclose(ct["a"], [3.0, 3.0])
    np.testing.assert_allclose(ct["b"], 4.0)


def test_tap_grad_under_vmap_of_grad():
    seen = []
    xs = np.array([1.0, 2.0, 3.0])
    fgrad.vmap(fgrad.grad(lambda x: fnp.sin(fgrad.debug.tap_grad(x * x, seen.append))))(xs)
    # one call per batch member, each with that member's cotangent cos(x²)
    np.testing.assert_allclose(np.stack([np.asarray(s) for s in seen]), np.cos(xs * xs))


def test_tap_grad_keeps_derivatives():
    f = _model(lambda ct: None)
    check_grads(f, (np.array([0.5, -1.0]), np.array([1.5, 0.3])), order=2, modes=("rev",))


# ----------------------------------------------------------------------------
# Control flow: callbacks inside bodies run when the body runs, also compiled

def _looping(x):
    from fgrad import lax

    def body(c, xi):
        fgrad.debug.print("scan c={} x={}", c, xi)
        return c + xi, c * xi

    c, ys = lax.scan(body, 0.0, x)
    lax.cond(c > 2.0, lambda v: fgrad.debug.print("big {}", v),
             lambda v: fgrad.debug.print("small {}", v), c)

    def count(i):
        fgrad.debug.print("while {}", i)   # the loop's inputs are constants
        return i + 1

    lax.while_loop(lambda i: i < 2, count, 0)
    return c + ys.sum()


@pytest.mark.parametrize("transform", [lambda f: f, fgrad.jit, fgrad.grad,
                                       lambda f: fgrad.jit(fgrad.grad(f))])
def test_print_inside_control_flow(capsys, transform):
    f = transform(_looping)
    x = np.array([1.0, 2.0])
    expected = ["scan c=0.0 x=1.0", "scan c=1.0 x=2.0", "big 3.0", "while 0", "while 1"]
    f(x)
    assert _lines(capsys) == expected
    f(x)                                   # compiled: runs again, not at compile time
    assert _lines(capsys) == expected
