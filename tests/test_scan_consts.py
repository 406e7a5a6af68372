"""A scan reads a transposed matrix constant's source when its body's products then
need no transpose flag (fgrad._src.compiler.scan_consts)."""
import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad import lax
from fgrad._src.compiler.scan_consts import untranspose_scan_consts
from fgrad._src.compiler.simplify import simplify
from fgrad._src.jaxpr import check_jaxpr, eval_closed


def _loop(w, h0, xs, right):
    """h' = tanh(x + h @ w^T); right: h @ (w^T)^T instead, a transposed read of w^T."""
    wt = fnp.transpose(w)

    def step(h, x):
        y = lax.dot_general(h, wt, (((1,), (1,)), ((), ()))) if right else h @ wt
        return fnp.tanh(x + y), h
    return lax.scan(step, h0, xs)


def _args(seed=0):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(6, 6)).astype(np.float32) / 3,
            rng.normal(size=(4, 6)).astype(np.float32),
            rng.normal(size=(5, 4, 6)).astype(np.float32))


def _scan(closed):
    [eqn] = [e for e in closed.jaxpr.eqns if e.primitive.name == "scan"]
    return eqn


@pytest.mark.parametrize("right", [True, False])
def test_only_transposed_reads_take_the_source(right):
    args = _args()
    closed = fgrad.make_jaxpr(lambda *a: _loop(*a, right=right))(*args)
    new = untranspose_scan_consts(closed)
    assert (new is not closed) == right
    if right:
        check_jaxpr(new.jaxpr)
        eqn = _scan(new)
        assert eqn.invars[0] is new.jaxpr.invars[0]           # w itself
        [dot] = [e for e in eqn.params["jaxpr"].jaxpr.eqns if e.primitive.name == "dot_general"]
        assert dot.params["dimension_numbers"] == (((1,), (0,)), ((), ()))
        for a, b in zip(eval_closed(new, *args), eval_closed(closed, *args)):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_a_constant_also_read_untransposed_stays_transposed():
    def f(w, h0, xs):
        wt = fnp.transpose(w)

        def step(h, x):
            y = lax.dot_general(h, wt, (((1,), (1,)), ((), ())))
            return fnp.tanh(x @ wt + y), h       # x @ wt: a plain read of wt
        return lax.scan(step, h0, xs)
    closed = fgrad.make_jaxpr(f)(*_args())
    assert untranspose_scan_consts(closed) is closed


def test_the_backward_loop_of_a_recurrence_reads_the_weight_itself():
    def loss(w, h0, xs):
        return fnp.sum(_loop(w, h0, xs, right=False)[1] ** 2)
    args = _args(1)
    g = fgrad.grad(loss)
    program = simplify(fgrad.make_jaxpr(g)(*args))
    backward = [e for e in program.jaxpr.eqns
                if e.primitive.name == "scan" and e.params["reverse"]]
    assert len(backward) == 1 and backward[0].invars[0] is program.jaxpr.invars[0]
    np.testing.assert_allclose(fgrad.jit(g)(*args), g(*args), rtol=1e-6, atol=1e-6)
