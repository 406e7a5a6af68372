"""Structured control flow: cond, switch, while_loop, fori_loop, scan, map under
jvp, reverse mode, vmap and jit."""
import re

import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad import lax
from fgrad.test_util import check_grads


def _close(a, b, **kw):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), **kw)


# ----------------------------------------------------------------------------
# scan

def _step(c, x):
    return fnp.sin(c) * x + c, c * x


def _scan_loss(c0, xs, reverse=False):
    c, ys = lax.scan(_step, c0, xs, reverse=reverse)
    return c + (ys * fnp.arange(1.0, len(xs) + 1)).sum()


def _unrolled_loss(c0, xs, reverse=False):
    c, ys = c0, [None] * len(xs)
    order = range(len(xs) - 1, -1, -1) if reverse else range(len(xs))
    for i in order:
        c, ys[i] = _step(c, xs[i])
    return c + (fnp.stack(ys) * fnp.arange(1.0, len(xs) + 1)).sum()


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_grad_equals_unrolled_loop(reverse):
    c0, xs = np.float64(0.3), np.linspace(0.1, 1.0, 6)
    _close(_scan_loss(c0, xs, reverse), _unrolled_loss(c0, xs, reverse), rtol=1e-12)
    g = fgrad.grad(_scan_loss, (0, 1))(c0, xs, reverse)
    g_ref = fgrad.grad(_unrolled_loss, (0, 1))(c0, xs, reverse)
    _close(g[0], g_ref[0], rtol=1e-10)
    _close(g[1], g_ref[1], rtol=1e-10)
    check_grads(lambda c, x: _scan_loss(c, x, reverse), (c0, xs), order=2)


def test_scan_pytrees_and_length_without_xs():
    def f(carry, x):
        a, b = carry["a"], carry["b"]
        return {"a": a + x["u"], "b": b * 2}, (a * x["v"], b)
    xs = {"u": np.arange(4.0), "v": np.ones((4, 2))}
    carry, (p, q) = lax.scan(f, {"a": np.zeros(2), "b": np.float64(1)}, xs)
    _close(carry["a"], [6.0, 6.0])
    _close(carry["b"], 16.0)
    _close(p[:, 0], [0.0, 0.0, 1.0, 3.0])
    _close(q, [1.0, 2.0, 4.0, 8.0])
    c, ys = lax.scan(lambda c, _: (c + 1, c * c), 0, None, length=4)
    assert int(c) == 4 and ys.tolist() == [0, 1, 4, 9]


def test_map():
    xs = np.arange(5.0)
    _close(lax.map(lambda x: x ** 2 + 1, xs), xs ** 2 + 1)
    _close(fgrad.grad(lambda x: lax.map(fnp.sin, x).sum())(xs), np.cos(xs))


def test_scan_jvp_and_jit():
    c0, xs = np.float64(0.3), np.linspace(0.1, 1.0, 6)
    out, t = fgrad.jvp(_scan_loss, (c0, xs), (1.0, np.ones(6)))
    out_ref, t_ref = fgrad.jvp(_unrolled_loss, (c0, xs), (1.0, np.ones(6)))
    _close(t, t_ref, rtol=1e-12)
    _close(fgrad.jit(_scan_loss)(c0, xs), out_ref, rtol=1e-12)
    g = fgrad.jit(fgrad.grad(_scan_loss, (0, 1)))(c0, xs)
    _close(g[1], fgrad.grad(_unrolled_loss, 1)(c0, xs), rtol=1e-10)


def test_vmap_of_scan():
    xs = np.linspace(0.1, 1.0, 6)
    c0s = np.array([0.1, 0.2, 0.7])
    _close(fgrad.vmap(_scan_loss, (0, None))(c0s, xs), [_unrolled_loss(c, xs) for c in c0s])
    xss = np.stack([xs, 2 * xs])   # batched xs, unbatched initial carry
    _close(fgrad.vmap(_scan_loss, (None, 0))(0.3, xss),
           [_unrolled_loss(0.3, x) for x in xss])
    _close(fgrad.vmap(_scan_loss, (None, 1))(0.3, xss.T),
           [_unrolled_loss(0.3, x) for x in xss])
    g = fgrad.jit(fgrad.vmap(fgrad.grad(_scan_loss), (0, None)))(c0s, xs)
    _close(g, [fgrad.grad(_unrolled_loss)(c, xs) for c in c0s], rtol=1e-10)


def test_grad_of_grad_through_scan():
    xs = np.linspace(0.1, 1.0, 5)
    f = lambda c: _scan_loss(c, xs)  # noqa: E731
    f_ref = lambda c: _unrolled_loss(c, xs)  # noqa: E731
    _close(fgrad.grad(fgrad.grad(f))(0.3), fgrad.grad(fgrad.grad(f_ref))(0.3), rtol=1e-10)
    _close(fgrad.hessian(f)(0.3), fgrad.hessian(f_ref)(0.3), rtol=1e-10)


def test_scan_closes_over_traced_values():
    w = np.array([[0.5, -0.2], [0.1, 0.3]])

    def loss(w, h0, xs):
        h, _ = lax.scan(lambda h, x: (fnp.tanh(w @ h + x), None), h0, xs)
        return (h ** 2).sum()

    args = (w, np.array([0.1, -0.4]), np.linspace(-1, 1, 10).reshape(5, 2))
    check_grads(loss, args, order=2)


def test_rnn_1000_steps_gradient_against_finite_differences():
    rng = np.random.default_rng(0)
    hidden, n_in, steps = 4, 3, 1000
    params = {"w": rng.standard_normal((hidden, hidden)) * 0.4,
              "u": rng.standard_normal((hidden, n_in)) * 0.4,
              "b": rng.standard_normal(hidden) * 0.1}
    xs = rng.standard_normal((steps, n_in))

    def loss(params, xs):
        def cell(h, x):
            h = fnp.tanh(params["w"] @ h + params["u"] @ x + params["b"])
            return h, h.sum()
        h, ys = lax.scan(cell, fnp.zeros(hidden, dtype=np.float64), xs)
        return (h ** 2).sum() + (ys ** 2).mean()

    check_grads(loss, (params, xs), order=1, modes=("rev",))
    g = fgrad.grad(loss)(params, xs)
    g_jit = fgrad.jit(fgrad.grad(loss))(params, xs)
    for k in params:
        _close(g_jit[k], g[k], rtol=1e-9, atol=1e-12)


def test_scan_jit_program_does_not_grow_with_length():
    def run(xs):
        return lax.scan(lambda c, x: (c * 0.5 + fnp.sin(x), c), 0.0, xs)

    short = fgrad.jit(run).lower(np.zeros(10, np.float32)).as_text()
    long = fgrad.jit(run).lower(np.zeros(10_000, np.float32)).as_text()
    assert "native:scan" in short                  # a loop in the compiled program
    # the same program, up to the numbers that spell the length
    assert re.sub(r"\d+", "N", short) == re.sub(r"\d+", "N", long)
    assert len(long) - len(short) < 100


def test_scan_errors():
    with pytest.raises(TypeError, match=r"carry\['a'\] is f32\[2\].*f32\[3\]"):
        lax.scan(lambda c, x: ({"a": fnp.zeros(3)}, x), {"a": fnp.zeros(2)}, np.ones(3))
    with pytest.raises(TypeError, match="must return a pair"):
        lax.scan(lambda c, x: c, 0.0, np.ones(3))
    with pytest.raises(TypeError, match="leading axes of sizes"):
        lax.scan(lambda c, x: (c, x), 0.0, (np.ones(3), np.ones(4)))
    with pytest.raises(TypeError, match="pass length="):
        lax.scan(lambda c, x: (c, x), 0.0, None)


# ----------------------------------------------------------------------------
# cond and switch

def _branchy(x, p):
    return lax.cond(p > 0, lambda x: fnp.sin(x) * p, lambda x: fnp.cos(x), x)


def test_cond_eager_grad_and_jit():
    for p in (1.5, -1.0):
        want = np.sin(0.7) * p if p > 0 else np.cos(0.7)
        _close(_branchy(0.7, p), want, rtol=1e-6)
        _close(fgrad.jit(_branchy)(0.7, p), want, rtol=1e-6)
        dwant = np.cos(0.7) * p if p > 0 else -np.sin(0.7)
        _close(fgrad.grad(_branchy)(0.7, p), dwant, rtol=1e-6)
        _close(fgrad.jit(fgrad.grad(_branchy))(0.7, p), dwant, rtol=1e-6)
        check_grads(_branchy, (np.float64(0.7), np.float64(p)), order=2)
    assert "native:cond" in fgrad.jit(_branchy).lower(0.7, 1.0).as_text()


def test_cond_vmap_batched_and_unbatched_predicate():
    xs, ps = np.array([0.3, 0.7, 1.1]), np.array([1.0, -1.0, 2.0])
    want = [np.sin(x) * p if p > 0 else np.cos(x) for x, p in zip(xs, ps)]
    _close(fgrad.vmap(_branchy)(xs, ps), want)
    _close(fgrad.jit(fgrad.vmap(_branchy))(xs, ps), want)
    _close(fgrad.vmap(_branchy, (0, None))(xs, -1.0), np.cos(xs))
    dwant = [np.cos(x) * p if p > 0 else -np.sin(x) for x, p in zip(xs, ps)]
    _close(fgrad.vmap(fgrad.grad(_branchy))(xs, ps), dwant)
    _close(fgrad.grad(lambda xs: fgrad.vmap(_branchy)(xs, ps).sum())(xs), dwant)


# vmap of cond with a batched predicate: each member differentiates only the
# branch it takes (the other branch's NaN must be selected away, not multiplied)

def _sqrt_or_identity(x):
    return lax.cond(x > 0, fnp.sqrt, lambda x: x, x)


def _log_or_square(x):
    return lax.cond(x > 0, fnp.log, lambda x: x * x, x)


def _three_way(x):
    i = (x > 0).astype(np.int32) + (x > 10).astype(np.int32)
    return lax.switch(i, [lambda x: -x, fnp.sqrt, lambda x: fnp.log(x - 10)], x)


_UNTAKEN_NAN = [
    (_sqrt_or_identity, np.array([-1.0, 4.0, 0.0]),
     lambda x: np.where(x > 0, 0.5 / np.sqrt(abs(x)), 1.0)),
    (_log_or_square, np.array([-2.0, 0.5, 0.0]), lambda x: np.where(x > 0, 1 / abs(x), 2 * x)),
    (_three_way, np.array([-3.0, 4.0, 12.0, 0.0]),
     lambda x: np.select([x > 10, x > 0], [1 / abs(x - 10), 0.5 / np.sqrt(abs(x))], -1.0)),
]


@pytest.mark.parametrize("f, xs, df", _UNTAKEN_NAN, ids=["sqrt", "log", "switch"])
def test_grad_of_vmap_of_cond_ignores_the_branch_not_taken(f, xs, df):
    with np.errstate(divide="ignore"):
        want = df(xs)
    total = lambda xs: fnp.sum(fgrad.vmap(f)(xs))
    _close(fgrad.vmap(fgrad.grad(f))(xs), want)
    _close(fgrad.grad(total)(xs), want)
    _close(fgrad.jit(fgrad.grad(total))(xs), want)
    _close(fgrad.grad(fgrad.jit(total))(xs), want)
    _close(fgrad.jacfwd(total)(xs), want)
    _close(fgrad.jacrev(fgrad.vmap(f))(xs), np.diag(want))
    _close(fgrad.jit(fgrad.jacfwd(fgrad.vmap(f)))(xs), np.diag(want))


def test_grad_of_vmap_of_cond_shared_operand_and_second_order():
    w = np.float64(2.0)

    def f(w, x):  # w is shared by every member (unbatched under vmap)
        return lax.cond(x > 0, lambda x: fnp.sqrt(w * x), lambda x: w * x, x)

    xs = np.array([-1.0, 2.0, -3.0, 8.0])
    dw = np.where(xs > 0, 0.5 * np.sqrt(abs(xs) / w), xs).sum()
    total = lambda w, xs: fnp.sum(fgrad.vmap(f, (None, 0))(w, xs))
    _close(fgrad.grad(total)(w, xs), dw)
    _close(fgrad.jit(fgrad.grad(total))(w, xs), dw)
    # second order, per member and through the batched cond
    d2 = np.where(xs > 0, -0.25 * abs(xs) ** -1.5, 0.0)
    g = fgrad.grad(lambda xs: fnp.sum(fgrad.vmap(fgrad.grad(_sqrt_or_identity))(xs)))
    _close(g(xs), d2)
    _close(fgrad.jit(g)(xs), d2)
    _close(fgrad.hessian(lambda xs: fnp.sum(fgrad.vmap(_sqrt_or_identity)(xs)))(xs), np.diag(d2))
    # a vmap of a vmap: the outer batch joins the members
    xss = np.stack([xs, -xs])
    want = np.where(xss > 0, 0.5 / np.sqrt(abs(xss)), 1.0)
    nested = lambda xss: fnp.sum(fgrad.vmap(fgrad.vmap(_sqrt_or_identity))(xss))
    _close(fgrad.grad(nested)(xss), want)
    _close(fgrad.jit(fgrad.grad(nested))(xss), want)
    _close(fgrad.vmap(fgrad.vmap(_sqrt_or_identity))(xss),
           np.where(xss > 0, np.sqrt(abs(xss)), xss))
    # every mode to order 2 against finite differences (members off the switch points)
    check_grads(lambda xs: fnp.sum(fgrad.vmap(_three_way)(xs) ** 2),
                (np.array([-3.0, 4.0, 12.5, 0.5]),), order=2)
    check_grads(lambda w, xs: fgrad.vmap(f, (None, 0))(w, xs), (w, xs), order=2)
    # inside a scan body
    def rows(xs):
        return lax.scan(lambda c, x: (c + _sqrt_or_identity(x), None), 0.0, xs)[0]
    _close(fgrad.grad(lambda xs: fnp.sum(fgrad.vmap(rows)(xs)))(xss), want)


def test_eager_vmap_of_cond_runs_each_branch_only_on_its_members():
    calls = []

    def spy(x):
        fgrad.debug.callback(lambda v: calls.extend(np.ravel(v).tolist()), x)
        return fnp.sqrt(x)

    f = lambda x: lax.cond(x > 0, spy, lambda x: x, x)
    xs = np.array([-1.0, 4.0, -2.0, 9.0, 16.0])
    fgrad.config.update("debug_nans", True)      # sqrt(-1) is never computed
    try:
        _close(fgrad.vmap(f)(xs), [-1.0, 2.0, -2.0, 3.0, 4.0])
        assert sorted(calls) == [4.0, 9.0, 16.0]
        _close(fgrad.grad(lambda xs: fnp.sum(fgrad.vmap(f)(xs)))(xs),
               [1.0, 0.25, 1.0, 1 / 6, 0.125])
    finally:
        fgrad.config.update("debug_nans", False)


def test_vmap_of_while_with_batched_predicate_keeps_finished_members_tangents():
    def halve_past_one(x):  # a finished member (x <= 1) would give NaN if run on
        return lax.while_loop(lambda x: x > 1, lambda x: fnp.sqrt(x - 1), x)

    xs = np.array([0.5, 5.0, 17.0])
    # 0.5: no step; 5 -> 2 -> 1; 17 -> 4 -> sqrt 3 -> sqrt(sqrt 3 - 1)
    d = [1.0, 0.5 / 2 * 0.5 / 1, None]
    a = np.sqrt(17 - 1)
    b = np.sqrt(a - 1)
    c = np.sqrt(b - 1)
    d[2] = 0.5 / a * 0.5 / b * 0.5 / c
    _close(fgrad.jacfwd(lambda xs: fgrad.vmap(halve_past_one)(xs))(xs), np.diag(d))
    _close(fgrad.jit(fgrad.vmap(fgrad.jacfwd(halve_past_one)))(xs), d)


def _switched(i, x):
    return lax.switch(i, [lambda x: x, lambda x: x ** 2, lambda x: fnp.sin(x) * x], x)


def test_switch_clamps_and_differentiates():
    x = np.float64(1.3)
    refs = [x, x ** 2, np.sin(x) * x]
    drefs = [1.0, 2 * x, np.cos(x) * x + np.sin(x)]
    for i, k in [(-4, 0), (0, 0), (1, 1), (2, 2), (9, 2)]:
        _close(_switched(i, x), refs[k])
        _close(fgrad.jit(_switched)(i, x), refs[k])
        _close(fgrad.grad(_switched, 1)(i, x), drefs[k])
        _close(fgrad.jit(fgrad.grad(_switched, 1))(i, x), drefs[k])
    idx = np.array([0, 1, 2, 7, -1])
    xs = np.full(5, x)
    _close(fgrad.vmap(_switched)(idx, xs), [refs[0], refs[1], refs[2], refs[2], refs[0]])
    _close(fgrad.vmap(_switched, (None, 0))(1, xs), np.full(5, refs[1]))
    _close(fgrad.vmap(fgrad.grad(_switched, 1))(idx, xs),
           [drefs[0], drefs[1], drefs[2], drefs[2], drefs[0]])
    check_grads(lambda x: _switched(2, x), (x,), order=2)


def test_cond_pytrees_and_closures():
    w = np.array([1.0, 2.0])

    def f(w, x, p):
        return lax.cond(p, lambda a: {"y": a["x"] * w, "z": a["x"].sum()},
                        lambda a: {"y": a["x"] - w, "z": w.sum()}, {"x": x})

    x = np.array([0.5, 0.25])
    out = f(w, x, True)
    _close(out["y"], x * w)
    g = fgrad.grad(lambda w: (f(w, x, False)["y"] ** 2).sum() + f(w, x, False)["z"])(w)
    _close(g, 2 * (x - w) * -1 + 1)


def test_cond_branch_type_errors_name_the_leaf():
    with pytest.raises(TypeError) as e:
        lax.cond(True, lambda x: {"a": x, "b": x}, lambda x: {"a": x, "b": x[:2]}, np.ones(3))
    msg = str(e.value)
    assert "['b']" in msg and "shape (3,)" in msg and "shape (2,)" in msg
    assert "true_fun" in msg and "false_fun" in msg
    with pytest.raises(TypeError, match=r"dtype float32.*dtype int32|dtype int32.*dtype float32"):
        lax.cond(True, lambda x: x, lambda x: x.astype(np.int32), np.ones(3, np.float32))
    with pytest.raises(TypeError, match="different tree structures"):
        lax.cond(True, lambda x: (x, x), lambda x: x, 1.0)
    with pytest.raises(TypeError, match=r"branches\[1\]"):
        lax.switch(0, [lambda x: x, lambda x: x.sum()], np.ones(3))
    with pytest.raises(TypeError, match="scalar"):
        lax.cond(np.array([True, False]), lambda: 1.0, lambda: 2.0)


# ----------------------------------------------------------------------------
# while_loop and fori_loop

def newton_sqrt(a):
    def body(state):
        x, _ = state
        return 0.5 * (x + a / x), x

    def keep_going(state):
        x, prev = state
        return fnp.abs(x - prev) > 1e-12 * x

    return lax.while_loop(keep_going, body, (a, a + 1.0))[0]


def test_while_newton_sqrt_eager_jit_and_jvp():
    for a in (2.0, 9.0, 1e4):
        a = np.float64(a)
        _close(newton_sqrt(a), np.sqrt(a), rtol=1e-14)
        _close(fgrad.jit(newton_sqrt)(a), np.sqrt(a), rtol=1e-14)
        out, t = fgrad.jvp(newton_sqrt, (a,), (np.float64(1),))
        _close(t, 0.5 / np.sqrt(a), rtol=1e-10)
        out, t = fgrad.jit(lambda a: fgrad.jvp(newton_sqrt, (a,), (np.float64(1),)))(a)
        _close(t, 0.5 / np.sqrt(a), rtol=1e-10)
    _close(fgrad.jacfwd(newton_sqrt)(np.float64(4)), 0.25, rtol=1e-10)
    check_grads(newton_sqrt, (np.float64(3),), order=2, modes=("fwd",))
    assert "native:while" in fgrad.jit(newton_sqrt).lower(np.float64(2)).as_text()


def test_while_vmap_runs_until_every_member_is_done():
    a = np.array([1.0, 4.0, 1e6, 0.01])
    _close(fgrad.vmap(newton_sqrt)(a), np.sqrt(a), rtol=1e-14)
    _close(fgrad.jit(fgrad.vmap(newton_sqrt))(a), np.sqrt(a), rtol=1e-14)
    # a count per member: finished members keep their carry
    counts = fgrad.vmap(lambda n: lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 2),
                                                 (0, 1.0))[1])(np.array([0, 3, 5]))
    _close(counts, [1.0, 8.0, 32.0])
    # an unbatched predicate with a batched body
    def cubed_again(x):
        return lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * x), (0, x))[1]
    _close(fgrad.vmap(cubed_again)(np.array([2.0, 3.0])), [16.0, 81.0])


def test_while_reverse_mode_is_refused_with_an_explanation():
    with pytest.raises(TypeError, match=r"(?s)while_loop.*trip count.*scan.*fori_loop"):
        fgrad.grad(newton_sqrt)(np.float64(2))
    with pytest.raises(TypeError, match="Reverse-mode"):
        fgrad.jit(fgrad.grad(newton_sqrt))(np.float64(2))
    # linearize alone (forward mode) is fine
    out, f_jvp = fgrad.linearize(newton_sqrt, np.float64(4))
    _close(f_jvp(np.float64(1)), 0.25, rtol=1e-10)


def test_while_type_errors():
    with pytest.raises(TypeError, match=r"carry\[1\] is f32\[\] .* f32\[2\]"):
        lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, fnp.zeros(2)), (0, 1.0))
    with pytest.raises(TypeError, match="boolean scalar"):
        lax.while_loop(lambda c: c, lambda c: c + 1, 1.0)


def _power_sum(x):
    return lax.fori_loop(1, 6, lambda i, c: c * x + i, 1.0)


def test_fori_loop_grad_with_static_bounds_and_jit():
    x = np.float64(1.5)
    c = 1.0
    for i in range(1, 6):
        c = c * x + i
    _close(_power_sum(x), c)
    check_grads(_power_sum, (x,), order=2)
    _close(fgrad.jit(fgrad.grad(_power_sum))(x), fgrad.grad(_power_sum)(x))
    assert "native:scan" in fgrad.jit(_power_sum).lower(x).as_text()
    # traced bounds: a while loop (forward mode only)
    dyn = fgrad.jit(lambda x, n: lax.fori_loop(1, n, lambda i, c: c * x + i, 1.0))
    _close(dyn(x, 6), c)
    assert "native:while" in dyn.lower(x, 6).as_text()
    _close(lax.fori_loop(5, 2, lambda i, c: c + i, 0), 0)


# ----------------------------------------------------------------------------
# Nesting

def test_nested_scan_and_cond_under_jit_and_grad():
    def inner(c, x):
        c = lax.cond(x > 0, lambda c: c * x, lambda c: c - x, c)
        return c, c

    def outer(c, xs_row):
        c2, ys = lax.scan(inner, c, xs_row)
        return c2 * 0.5, ys.sum()

    def loss(c0, xs):
        c, ys = lax.scan(outer, c0, xs)
        return c + ys.sum()

    def ref(c0, xs):
        c, total = c0, 0.0
        for row in xs:
            s = 0.0
            for x in row:
                c = c * x if x > 0 else c - x
                s = s + c
            c = c * 0.5
            total = total + s
        return c + total

    xs = np.array([[0.5, -1.0, 2.0], [1.5, 0.3, -0.2]])
    c0 = np.float64(0.7)
    _close(loss(c0, xs), ref(c0, xs))
    _close(fgrad.jit(loss)(c0, xs), ref(c0, xs))
    _close(fgrad.grad(loss, (0, 1))(c0, xs)[1], fgrad.grad(ref, (0, 1))(c0, xs)[1])
    _close(fgrad.jit(fgrad.grad(loss))(c0, xs), fgrad.grad(ref)(c0, xs))
    check_grads(loss, (c0, xs), order=2)

    def scan_in_cond(p, x):
        return lax.cond(p, lambda x: lax.scan(lambda c, y: (c * y, c), 1.0, x)[0],
                        lambda x: x.sum(), x)

    x = np.array([1.5, 2.0, 3.0])
    _close(fgrad.jit(scan_in_cond)(True, x), 9.0)
    _close(fgrad.grad(scan_in_cond, 1)(True, x), [6.0, 4.5, 3.0])
    _close(fgrad.vmap(scan_in_cond)(np.array([True, False]), np.stack([x, x])), [9.0, 6.5])
