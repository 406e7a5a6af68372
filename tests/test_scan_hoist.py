"""The transpose of scan computes sums of per-iteration products after the loop
(fgrad/_src/lax/control_flow/scan_hoist.py): a weight's cotangent as one product
over the stacked values instead of an accumulator the backward loop carries."""
import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad import jit, lax
from fgrad.test_util import check_grads


def _rnn_loss(w, u, b, h0, xs):
    """An Elman RNN: h' = tanh(x @ u + h @ w + b); w and u read inside the body."""
    def step(h, x):
        h = fnp.tanh(x @ u + h @ w + b)
        return h, h
    _, hs = lax.scan(step, h0, xs)
    return fnp.sum(hs ** 2)


def _args(batch, features, hidden, steps=5, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(hidden, hidden)) / hidden, rng.normal(size=(features, hidden)) / 3,
            rng.normal(size=hidden), rng.normal(size=(batch, hidden)),
            rng.normal(size=(steps, batch, features)))


def _backward_scan(f, *args):
    """The scan equation of the gradient's program that runs backwards."""
    jaxpr = fgrad.make_jaxpr(fgrad.grad(f, argnums=(0, 1, 2)))(*args).jaxpr
    scans = [e for e in jaxpr.eqns if e.primitive.name == "scan" and e.params["reverse"]]
    assert len(scans) == 1
    return scans[0]


def _carried_shapes(eqn):
    p = eqn.params
    return [tuple(v.aval.shape) for v in
            eqn.invars[p["num_consts"]:p["num_consts"] + p["num_carry"]]]


def test_weight_and_bias_cotangents_leave_the_backward_loop():
    args = _args(batch=3, features=4, hidden=6)
    carried = _carried_shapes(_backward_scan(_rnn_loss, *args))
    assert sorted(carried) == [(3, 6), (6,)]    # h's and b's cotangents: no (6, 6) or (4, 6)


def test_operands_bigger_than_their_weights_stay_accumulated():
    # batch 8: stacking the (8, 6) pre-activation cotangent (not a ys of the loop,
    # xs is not differentiated) would cost more per iteration than any accumulator
    args = _args(batch=8, features=2, hidden=6)
    carried = _carried_shapes(_backward_scan(_rnn_loss, *args))
    assert sorted(carried) == [(2, 6), (6,), (6, 6), (8, 6)]


@pytest.mark.parametrize("batch,features,order", [(3, 4, 2), (8, 2, 1)])
def test_gradients_against_finite_differences(batch, features, order):
    check_grads(_rnn_loss, _args(batch, features, hidden=5, steps=4), order=order)


@pytest.mark.parametrize("reverse", [False, True])
def test_gradients_equal_the_unrolled_loop(reverse):
    w, u, b, h0, xs = _args(batch=3, features=4, hidden=6, steps=6, seed=1)

    def scanned(w, u, b):
        def step(h, x):
            h = fnp.tanh(x @ u + h @ w + b)
            return h, h
        return fnp.sum(lax.scan(step, h0, xs, reverse=reverse)[1] ** 2)

    def unrolled(w, u, b):
        h, total = h0, 0.0
        for x in (xs[::-1] if reverse else xs):
            h = fnp.tanh(x @ u + h @ w + b)
            total = total + fnp.sum(h ** 2)
        return total

    got = fgrad.grad(scanned, argnums=(0, 1, 2))(w, u, b)
    want = fgrad.grad(unrolled, argnums=(0, 1, 2))(w, u, b)
    for g, e in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-12, atol=1e-14)


def test_jit_equals_eager_bit_for_bit():
    def relu_rnn_loss(w, u, b, h0, xs):    # (tanh's bits differ between NumPy and jit)
        def step(h, x):
            h = fgrad.nn.relu(x @ u + h @ w + b)
            return h, h
        return fnp.sum(lax.scan(step, h0, xs)[1] ** 2)

    args = [a.astype(np.float32) for a in _args(batch=16, features=32, hidden=24, steps=7)]
    g = fgrad.grad(relu_rnn_loss, argnums=(0, 1, 2))
    for e, j in zip(g(*args), jit(g)(*args)):
        np.testing.assert_array_equal(np.asarray(e), np.asarray(j))


def test_zero_length_scan_gives_zero_cotangents():
    w, u, b, h0, _ = _args(batch=3, features=4, hidden=6)
    xs = np.zeros((0, 3, 4))
    gw, gu, gb = fgrad.grad(lambda w, u, b: _rnn_loss(w, u, b, h0, xs) + fnp.sum(w),
                            argnums=(0, 1, 2))(w, u, b)
    np.testing.assert_array_equal(np.asarray(gw), np.ones_like(w))
    np.testing.assert_array_equal(np.asarray(gu), np.zeros_like(u))
    np.testing.assert_array_equal(np.asarray(gb), np.zeros_like(b))
