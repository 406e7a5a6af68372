"""The primal scan of a linearized body stacks only residuals that cheap chains
cannot recompute (fgrad/_src/lax/control_flow/scan_recompute.py): an LSTM step's
sigmoid'(x) = s·(1 - s) and 1 - tanh² are rebuilt from s and tanh in the
backward loop instead of stored per step."""
import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad import jit, lax, nn
from fgrad._src.lax.control_flow import scan_recompute
from fgrad.test_util import check_grads


def _lstm_loss(w, b, h0, c0, xs):
    def step(carry, x):
        h, c = carry
        i, f, g, o = fnp.split(x + h @ w + b, 4, axis=-1)
        c = nn.sigmoid(f) * c + nn.sigmoid(i) * fnp.tanh(g)
        h = nn.sigmoid(o) * fnp.tanh(c)
        return (h, c), h
    _, hs = lax.scan(step, (h0, c0), xs)
    return fnp.sum(hs ** 2)


def _args(batch=3, hidden=4, steps=5, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(hidden, 4 * hidden)) / hidden, rng.normal(size=4 * hidden) / 3,
            rng.normal(size=(batch, hidden)), rng.normal(size=(batch, hidden)),
            rng.normal(size=(steps, batch, 4 * hidden)))


def _forward_scan(f, *args):
    jaxpr = fgrad.make_jaxpr(fgrad.grad(f, argnums=(0, 1, 4)))(*args).jaxpr
    scans = [e for e in jaxpr.eqns if e.primitive.name == "scan" and not e.params["reverse"]]
    assert len(scans) == 1
    return scans[0]


def _stacked(eqn):
    return len(eqn.outvars) - eqn.params["num_carry"]


def test_derivatives_of_activations_are_not_stacked():
    eqn = _forward_scan(_lstm_loss, *_args())
    # ys, h and c going in, sigmoid of i, f, o, tanh of g and of c: nothing else
    assert _stacked(eqn) == 1 + 2 + 5
    body = eqn.params["jaxpr"].jaxpr
    assert not any(e.primitive.name == "sub" for e in body.eqns)   # no 1 - s left


def test_gradients_when_a_recomputable_value_is_also_a_ys():
    def loss(w, xs):
        def step(h, x):
            s = nn.sigmoid(x + h @ w)
            d = s * (1 - s)             # recomputable from s
            return fnp.sin(d * h), d    # d also a ys: stored as that
        _, ys = lax.scan(step, fnp.ones_like(xs[0]), xs)
        return fnp.sum(ys) + fnp.sum(ys ** 2)
    rng = np.random.default_rng(1)
    args = (rng.normal(size=(3, 3)), rng.normal(size=(4, 2, 3)))
    check_grads(loss, args, order=1)


@pytest.mark.parametrize("order", [1, 2])
def test_gradients_against_finite_differences(order):
    check_grads(_lstm_loss, _args(steps=3), order=order)


@pytest.mark.parametrize("compiled", [False, True])
def test_recomputed_residuals_give_the_stored_ones_bits(monkeypatch, compiled):
    args = [a.astype(np.float32) for a in _args(batch=5, hidden=8, steps=7)]

    def gradients():      # a new function each time: nothing cached is reused
        g = fgrad.grad(lambda *a: _lstm_loss(*a), argnums=(0, 1, 2, 3, 4))
        return [np.asarray(v) for v in (jit(g) if compiled else g)(*args)]
    recomputed = gradients()
    monkeypatch.setattr(scan_recompute, "MAX_CHAIN", 0)
    assert _stacked(_forward_scan(lambda *a: _lstm_loss(*a), *_args())) > 8
    for r, s in zip(recomputed, gradients()):
        np.testing.assert_array_equal(r, s)


def test_forward_mode_through_the_scan():
    args = _args(steps=4)
    check_grads(_lstm_loss, args, order=1, modes=("fwd",))
