"""sink_into_scans: an element-wise equation whose result only a scan reads, as
xs, runs on each step's row in the body (a recurrent layer's bias added to the
input projection), with the same bits."""
import numpy as np
import pytest

import fgrad
from fgrad import lax
from fgrad._src.compiler.simplify import simplify


def _simplified(f, *args):
    return simplify(fgrad.jit(f).lower(*args).jaxpr).jaxpr


def _names(jaxpr):
    return [e.primitive.name for e in jaxpr.eqns]


def _scan(jaxpr):
    return next(e for e in jaxpr.eqns if e.primitive.name == "scan")


def _step(h, x):
    h = h * 0.5 + x * x
    return h, h * 2.0


def _same(got, want):
    for g, w in zip(fgrad.tree.leaves(got), fgrad.tree.leaves(want)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


@pytest.mark.parametrize("reverse", [False, True])
def test_a_bias_added_to_every_step_moves_into_the_body(reverse):
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((5, 3, 8)).astype(np.float32)
    ys = rng.standard_normal((5, 3, 8)).astype(np.float32)
    bias = rng.standard_normal(8).astype(np.float32)
    h0 = np.zeros((3, 8), np.float32)

    def f(xs, ys, bias):
        return lax.scan(_step, h0, xs * ys + bias, reverse=reverse)

    jaxpr = _simplified(f, xs, ys, bias)
    assert _names(jaxpr) == ["scan"]
    scan = _scan(jaxpr)
    body = scan.params["jaxpr"].jaxpr
    assert _names(body)[:2] == ["mul", "add"]
    assert scan.params["num_consts"] == 1 and scan.invars[0] is jaxpr.invars[2]   # the bias
    _same(fgrad.jit(f)(xs, ys, bias), f(xs, ys, bias))


def test_what_else_reads_stays_outside():
    xs = np.linspace(0.0, 1.0, 24, dtype=np.float32).reshape(4, 6)
    bias = np.float32(0.25)

    def returned(xs):
        p = xs + bias
        return lax.scan(_step, np.zeros(6, np.float32), p), p

    def broadcast_rows(xs, first):              # (1, 6) broadcast over the steps
        return lax.scan(_step, np.zeros(6, np.float32), xs + first)

    for f, args in [(returned, (xs,)), (broadcast_rows, (xs, xs[:1]))]:
        jaxpr = _simplified(f, *args)
        assert "add" in _names(jaxpr)
        _same(fgrad.jit(f)(*args), f(*args))


def test_lstm_input_projection_bias_runs_in_the_loop():
    import fgrad_nn
    model = fgrad_nn.LSTM(16, 16, key=fgrad.random.key(0), dtype=np.float32)
    x = np.random.default_rng(1).standard_normal((7, 4, 16)).astype(np.float32)

    def loss(m, x):
        return (m(x)[0] ** 2).sum()
    g = fgrad.grad(loss)
    jaxpr = _simplified(g, model, x)
    forward = _scan(jaxpr)
    producers = {v for e in jaxpr.eqns for v in e.outvars if e.primitive.name == "add"}
    xs = forward.invars[forward.params["num_consts"] + forward.params["num_carry"]:]
    assert xs and not any(v in producers for v in xs)
    for a, e in zip(fgrad.tree.leaves(fgrad.jit(g)(model, x)), fgrad.tree.leaves(g(model, x))):
        np.testing.assert_allclose(np.asarray(a), np.asarray(e), rtol=1e-5, atol=1e-6)
