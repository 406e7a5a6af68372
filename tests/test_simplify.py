"""The backend-independent simplification passes (fgrad._src.compiler.simplify)."""
import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad import lax
from fgrad._src import core
from fgrad._src.compiler.simplify import (cse, dce, fold_constants, forward_trivial,
                                          inline_calls, simplify)
from fgrad._src.core import Primitive, get_aval
from fgrad._src.jaxpr import (ClosedJaxpr, Jaxpr, Literal, Var, check_jaxpr, eval_closed,
                              eval_jaxpr)
from fgrad._src.lax.elementwise import convert_element_type_p
from fgrad._src.lax.shape_ops import broadcast_in_dim_p, reshape_p, transpose_p

PASSES = (inline_calls, forward_trivial, fold_constants, cse, dce)


# ----------------------------------------------------------------------------
# Helpers

def n_eqns(closed, name=None):
    return sum(1 for e in closed.jaxpr.eqns if name is None or e.primitive.name == name)


def close_over(closed, values):
    """Make the first len(values) inputs constvars holding `values` (concrete)."""
    j = closed.jaxpr
    k = len(values)
    consts = list(closed.consts) + [core.full_lower(v) for v in values]
    return ClosedJaxpr(Jaxpr(j.constvars + j.invars[:k], j.invars[k:], j.eqns, j.outvars),
                       consts)


def assert_same(orig, simp, *args):
    """`simp` type-checks and computes what `orig` computes, with the same types."""
    check_jaxpr(simp.jaxpr)
    assert simp.jaxpr.invars == orig.jaxpr.invars
    assert [a.aval for a in simp.jaxpr.outvars] == [a.aval for a in orig.jaxpr.outvars]
    want = eval_closed(orig, *args)
    got = eval_closed(simp, *args)
    assert len(want) == len(got)
    for w, g in zip(want, got):
        assert get_aval(g) == get_aval(w)
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6, atol=1e-12)


def assert_idempotent(closed):
    once = simplify(closed)
    assert str(simplify(once)) == str(once)
    for p in PASSES:
        assert p(p(closed)) is p(closed) or str(p(p(closed))) == str(p(closed))
    return once


@pytest.fixture
def x3(rng):
    return rng.standard_normal(3).astype(np.float32)


# A stand-in for the lead's `jit` primitive: a call whose params hold its body.
fake_jit_p = Primitive("jit", multiple_results=True)
fake_jit_p.impl = lambda *args, jaxpr, name: [np.asarray(o) for o in eval_closed(jaxpr, *args)]
fake_jit_p.abstract_eval = lambda *avals, jaxpr, name: jaxpr.out_avals


def fake_jit(f):
    def call(*args):
        closed = fgrad.make_jaxpr(f)(*args)
        return fake_jit_p.bind(*args, jaxpr=closed, name=getattr(f, "__name__", "f"))
    return call


# ----------------------------------------------------------------------------
# CSE

def test_cse_duplicated_sin(x3):
    closed = fgrad.make_jaxpr(lambda x: fnp.sin(x) * fnp.sin(x) + fnp.sin(x))(x3)
    assert n_eqns(closed, "sin") == 3
    s = simplify(closed)
    assert n_eqns(s, "sin") == 1
    assert n_eqns(s) == 3  # sin, mul, add
    assert_same(closed, s, x3)
    assert_idempotent(closed)


def test_cse_distinguishes_params_and_literals(x3):
    def f(x):
        return (lax.integer_pow(x, 2) + lax.integer_pow(x, 3) + x * 0.0 + x * -0.0
                + x * 2.0 + x * 2.0)
    closed = fgrad.make_jaxpr(f)(x3)
    s = cse(closed)
    assert n_eqns(s, "integer_pow") == 2
    assert n_eqns(s, "mul") == 3  # 0.0, -0.0 and one 2.0
    assert_same(closed, s, x3)


def test_cse_commutative_operands(x3):
    def f(x):
        y = fnp.cos(x)
        return (x * y) - (y * x) + (x - y) - (y - x) + (x + 2.0) * (2.0 + x)
    closed = fgrad.make_jaxpr(f)(x3)
    s = cse(closed)
    assert n_eqns(s, "mul") == 2 and n_eqns(s, "sub") == 4 and n_eqns(s, "add") == 3
    assert_same(closed, s, x3)


def test_cse_chains_and_multiple_outputs(rng):
    x = rng.standard_normal((2, 3))

    def f(x):
        a = fnp.exp(fnp.sum(x, axis=1))
        b = fnp.exp(fnp.sum(x, axis=1))
        return a * b, fnp.exp(fnp.sum(x, axis=0))
    closed = fgrad.make_jaxpr(f)(x)
    s = simplify(closed)
    assert n_eqns(s, "reduce_sum") == 2 and n_eqns(s, "exp") == 2
    assert_same(closed, s, x)


def test_cse_merges_shared_constvars(x3):
    c = fnp.arange(3.0, dtype=np.float32)
    closed = fgrad.make_jaxpr(lambda x: x * c)(x3)
    j = closed.jaxpr
    v2 = Var(j.constvars[0].aval)
    dup = ClosedJaxpr(Jaxpr(j.constvars + [v2], j.invars, j.eqns, j.outvars + [v2]),
                      closed.consts + [closed.consts[0]])
    s = cse(dup)
    assert len(s.jaxpr.constvars) == 1
    assert s.jaxpr.outvars[1] is s.jaxpr.constvars[0]
    assert_same(dup, s, x3)


# ----------------------------------------------------------------------------
# Constant folding

def test_fold_ones_times_two_plus_x(x3):
    closed = close_over(fgrad.make_jaxpr(lambda c, x: c * 2 + x)(fnp.ones(3), x3),
                        [fnp.ones(3, np.float32)])
    assert n_eqns(closed) == 2
    s = simplify(closed)
    assert [e.primitive.name for e in s.jaxpr.eqns] == ["add"]
    assert len(s.consts) == 1
    np.testing.assert_array_equal(np.asarray(s.consts[0]), [2.0, 2.0, 2.0])
    assert_same(closed, s, x3)
    assert_idempotent(closed)


def test_fold_scalar_results_become_literals(x3):
    def f(c, x):
        return x * fnp.exp(c) + fnp.sin(c) * 3.0
    closed = close_over(fgrad.make_jaxpr(f)(np.float32(0.5), x3), [np.float32(0.5)])
    s = simplify(closed)
    assert not s.jaxpr.constvars
    assert n_eqns(s) == 2  # mul, add
    lits = [a for e in s.jaxpr.eqns for a in e.invars if type(a) is Literal]
    assert len(lits) == 2 and all(type(a.val) is core.Array for a in lits)
    assert_same(closed, s, x3)


def test_fold_keeps_weak_types(x3):
    # weak scalar consts: the folded literal must stay weak, so x's dtype wins
    def f(c, x):
        return x + c * 2
    closed = close_over(fgrad.make_jaxpr(f)(1.5, x3), [1.5])
    s = simplify(closed)
    assert n_eqns(s) == 1
    (lit,) = [a for a in s.jaxpr.eqns[0].invars if type(a) is Literal]
    assert lit.aval.weak_type and lit.val.weak_type
    assert_same(closed, s, x3)


def test_fold_outputs_that_become_constants(x3):
    def f(c, x):
        return fnp.cos(c), (c + 1.0)[0], x
    closed = close_over(fgrad.make_jaxpr(f)(np.ones(3, np.float32), x3),
                        [np.ones(3, np.float32)])
    s = simplify(closed)
    assert n_eqns(s) == 0
    outs = s.jaxpr.outvars
    assert outs[0] in s.jaxpr.constvars
    assert type(outs[1]) is Literal
    assert outs[2] is s.jaxpr.invars[0]
    assert_same(closed, s, x3)
    assert_idempotent(closed)


def test_fold_skips_tracer_consts():
    x = np.ones(3, np.float32)

    def outer(y):
        inner = fgrad.make_jaxpr(lambda x: fnp.sin(y) * x)(x)
        assert any(isinstance(c, core.Tracer) for c in inner.consts)
        s = simplify(inner)
        assert n_eqns(s, "mul") == 1
        check_jaxpr(s.jaxpr)
        return eval_closed(s, x)[0]
    np.testing.assert_allclose(fgrad.grad(lambda y: fnp.sum(outer(y)))(x),
                               np.cos(x), rtol=1e-6)


def test_fold_size_limits():
    big = np.ones(2000, np.float32)
    closed = close_over(fgrad.make_jaxpr(lambda c, x: c * 2 + x)(big, big), [big])
    assert n_eqns(fold_constants(closed), "mul") == 0
    assert n_eqns(fold_constants(closed, max_elements=1000), "mul") == 1
    # expanding a scalar to a big array is left to fusion; small ones fold
    def f(s, x):
        return lax.broadcast_in_dim(s, x.shape, ()) + x
    one = np.float32(1.0)
    small = close_over(fgrad.make_jaxpr(f)(one, big[:4]), [one])
    assert n_eqns(simplify(small)) == 1
    large = close_over(fgrad.make_jaxpr(f)(one, big), [one])
    s = simplify(large)
    assert [e.primitive.name for e in s.jaxpr.eqns] == ["broadcast_in_dim", "add"]
    assert not s.consts
    assert_same(large, s, big)


def test_fold_skips_failing_impls(x3):
    calls = []
    bad_p = Primitive("bad")
    bad_p.abstract_eval = lambda x: x

    def impl(x):
        calls.append(1)
        raise ValueError("not now")
    bad_p.impl = impl
    closed = close_over(fgrad.make_jaxpr(lambda c, x: bad_p.bind(c) + x)(x3, x3), [x3])
    s = fold_constants(closed)
    assert s is closed and calls


# ----------------------------------------------------------------------------
# DCE

def test_dce_unused_results(x3):
    def f(x):
        unused = fnp.exp(x) * 3.0
        del unused
        return fnp.sin(x)
    closed = fgrad.make_jaxpr(f)(x3)
    assert n_eqns(closed) == 3
    s = simplify(closed)
    assert [e.primitive.name for e in s.jaxpr.eqns] == ["sin"]
    assert_same(closed, s, x3)


def test_dce_drops_unused_constvars(x3):
    c = np.arange(3.0, dtype=np.float32)
    closed = fgrad.make_jaxpr(lambda x: (x * c, fnp.sin(x)))(x3)
    j = closed.jaxpr
    only_sin = ClosedJaxpr(Jaxpr(j.constvars, j.invars, j.eqns, j.outvars[1:]), closed.consts)
    s = dce(only_sin)
    assert not s.jaxpr.constvars and not s.consts and n_eqns(s) == 1
    assert s.jaxpr.invars == j.invars
    assert_same(only_sin, s, x3)


# ----------------------------------------------------------------------------
# Forwarding trivial ops

def test_forward_trivial_ops(rng):
    x = rng.standard_normal((2, 3)).astype(np.float32)

    def f(x):
        a = convert_element_type_p.bind(x, new_dtype=np.dtype(np.float32), weak_type=False)
        b = reshape_p.bind(a, new_sizes=(2, 3))
        c = transpose_p.bind(b, permutation=(0, 1))
        d = broadcast_in_dim_p.bind(c, shape=(2, 3), broadcast_dimensions=(0, 1))
        e = lax.reduce_max(d, ())   # (a float sum over no axes is x + 0.0: not a no-op)
        kept = convert_element_type_p.bind(x, new_dtype=np.dtype(np.float32), weak_type=True)
        return fnp.sin(e), kept
    closed = fgrad.make_jaxpr(f)(x)
    s = simplify(closed)
    assert sorted(e.primitive.name for e in s.jaxpr.eqns) == ["convert_element_type", "sin"]
    (sin_eqn,) = [e for e in s.jaxpr.eqns if e.primitive.name == "sin"]
    assert sin_eqn.invars[0] is s.jaxpr.invars[0]
    assert_same(closed, s, x)
    assert_idempotent(closed)


def test_transposes_of_transposes_compose(rng):
    """A chain of transposes becomes one with the composed permutation (none when
    it is the identity); a middle result read elsewhere is kept."""
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)

    def chain(x):
        a = fnp.transpose(x, (0, 1, 3, 2))
        b = fnp.transpose(a, (0, 2, 1, 3))
        return fnp.transpose(b, (3, 0, 2, 1)), fnp.transpose(fnp.swapaxes(x, 1, 2), (0, 2, 1, 3))

    closed = fgrad.make_jaxpr(chain)(x)
    s = simplify(closed)
    perms = [e.params["permutation"] for e in s.jaxpr.eqns]
    assert perms == [(2, 0, 1, 3)]
    assert s.jaxpr.outvars[1] is s.jaxpr.invars[0]
    assert_same(closed, s, x)
    assert_idempotent(closed)

    def shared(x):
        a = fnp.swapaxes(x, 1, 2)
        return fnp.swapaxes(a, 0, 3), a * 2

    s = simplify(fgrad.make_jaxpr(shared)(x))
    assert [e.params["permutation"] for e in s.jaxpr.eqns if "permutation" in e.params] \
        == [(0, 2, 1, 3), (3, 2, 1, 0)]


def test_forward_to_output_and_literal(x3):
    def f(x):
        return reshape_p.bind(x, new_sizes=(3,)), transpose_p.bind(2.0, permutation=())
    closed = fgrad.make_jaxpr(f)(x3)
    s = simplify(closed)
    assert n_eqns(s) == 0
    assert s.jaxpr.outvars[0] is s.jaxpr.invars[0]
    assert type(s.jaxpr.outvars[1]) is Literal
    assert_same(closed, s, x3)


def test_outputs_that_are_inputs_or_constants(x3):
    c = np.arange(3.0, dtype=np.float32)
    closed = fgrad.make_jaxpr(lambda x: (x, c, 2.0, x))(x3)
    s = simplify(closed)
    assert s is closed or str(s) == str(closed)
    assert_same(closed, s, x3)


# ----------------------------------------------------------------------------
# Inlining nested calls

def test_inline_fake_jit(x3):
    def inner(x):
        return fnp.sin(x) * np.arange(3.0, dtype=np.float32), fnp.cos(x)

    def f(x):
        a, b = fake_jit(inner)(x)
        c, _ = fake_jit(inner)(a)
        return c + b
    closed = fgrad.make_jaxpr(f)(x3)
    assert n_eqns(closed, "jit") == 2
    i = inline_calls(closed)
    assert n_eqns(i, "jit") == 0 and n_eqns(i) == 7
    assert len(i.consts) == 2  # one per traced body (separate traces)
    assert_same(closed, i, x3)
    s = simplify(closed)
    assert n_eqns(s, "cos") == 1  # the second call's cos is dead
    assert n_eqns(s) == 6
    assert_same(closed, s, x3)
    assert_idempotent(closed)


def test_inline_same_body_twice_renames(x3):
    body = fgrad.make_jaxpr(lambda x: [fnp.exp(x) * 2.0])(x3)

    def f(x):
        (a,) = fake_jit_p.bind(x, jaxpr=body, name="g")
        (b,) = fake_jit_p.bind(a, jaxpr=body, name="g")
        return b
    closed = fgrad.make_jaxpr(f)(x3)
    s = inline_calls(closed)
    assert n_eqns(s) == 4
    check_jaxpr(s.jaxpr)  # would fail if the body's variables were reused
    assert_same(closed, s, x3)


def test_inline_nested_and_shared_consts(x3):
    c = np.linspace(0, 1, 3).astype(np.float32)

    def inner(x):
        return [x * c]

    def middle(x):
        (a,) = fake_jit(inner)(x)
        return [fnp.tanh(a), a]

    def f(x):
        p, q = fake_jit(middle)(x)
        return p - q, q
    closed = fgrad.make_jaxpr(f)(x3)
    s = inline_calls(closed)
    assert n_eqns(s, "jit") == 0
    assert [e.primitive.name for e in s.jaxpr.eqns] == ["mul", "tanh", "sub"]
    assert len(s.consts) == 1 and np.array_equal(np.asarray(s.consts[0]), c)
    assert_same(closed, s, x3)
    assert_idempotent(closed)


def test_inline_then_fold(x3):
    # a jit body computing on its own constants folds once inlined
    c = np.arange(3.0, dtype=np.float32)

    def inner(x):
        return [x + fnp.exp(fgrad.lax.stop_gradient(c)) * 2.0]

    def f(x):
        return fake_jit(inner)(x)[0]
    closed = fgrad.make_jaxpr(f)(x3)
    s = simplify(closed)
    assert [e.primitive.name for e in s.jaxpr.eqns] == ["add"]
    assert_same(closed, s, x3)


def test_inline_real_jit_if_present(x3):
    if not hasattr(fgrad, "jit"):
        pytest.skip("fgrad.jit not there yet")

    def f(x):
        return fnp.sin(x) * fnp.sin(x)
    try:
        closed = fgrad.make_jaxpr(lambda x: fgrad.jit(f)(x) + 1.0)(x3)
    except Exception as e:  # noqa: BLE001 -- the real jit is still being written
        pytest.skip(f"fgrad.jit cannot be traced yet: {e}")
    if n_eqns(closed, "jit") == 0:
        pytest.skip("fgrad.jit does not record a jit equation")
    s = simplify(closed)
    assert n_eqns(s, "jit") == 0 and n_eqns(s, "sin") == 1
    assert_same(closed, s, x3)


# ----------------------------------------------------------------------------
# Transformed programs

def _loss(w, x):
    h = fnp.tanh(x @ w)
    return fnp.mean(h ** 2) + 0.1 * fnp.sum(w * w)


def test_grad_program(rng):
    w = rng.standard_normal((3, 4)).astype(np.float32)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    closed = fgrad.make_jaxpr(fgrad.grad(_loss))(w, x)
    s = simplify(closed)
    assert n_eqns(s) < n_eqns(closed)
    assert n_eqns(s, "reduce_sum") == 0  # the loss value itself is dead
    assert_same(closed, s, w, x)
    assert_idempotent(closed)


def test_vmap_grad_program(rng):
    x = rng.standard_normal((4, 3))
    f = fgrad.vmap(fgrad.grad(lambda x: fnp.sum(fnp.sin(x) * fnp.sin(x))))
    closed = fgrad.make_jaxpr(f)(x)
    s = simplify(closed)
    assert n_eqns(s, "sin") == 1 and n_eqns(s, "cos") == 1
    assert n_eqns(s, "reduce_sum") == 0
    assert_same(closed, s, x)
    assert_idempotent(closed)


def test_value_and_grad_and_hessian_programs(rng):
    w = rng.standard_normal((3, 2))
    x = rng.standard_normal((4, 3))
    cases = [(fgrad.value_and_grad(_loss), (w, x)),
             (fgrad.hessian(lambda w: _loss(w, x)), (w,)),
             (fgrad.jacrev(lambda w: fnp.tanh(x @ w)), (w,)),
             (fgrad.jacfwd(lambda w: fnp.tanh(x @ w)), (w,))]
    for fn, args in cases:
        closed = fgrad.make_jaxpr(fn)(*args)
        s = simplify(closed)
        assert n_eqns(s) <= n_eqns(closed)
        assert_same(closed, s, *args)
        assert_idempotent(closed)


def test_custom_jvp_program(rng):
    @fgrad.custom_jvp
    def f(x):
        return fnp.sin(x) + fnp.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), 2 * fnp.cos(x) * t

    x = rng.standard_normal(3)
    for fn in (lambda x: f(x) * f(x), fgrad.grad(lambda x: fnp.sum(f(x) * f(x)))):
        closed = fgrad.make_jaxpr(fn)(x)
        s = simplify(closed)
        assert_same(closed, s, x)
        assert_idempotent(closed)


def test_passes_do_not_mutate_input(x3):
    closed = close_over(fgrad.make_jaxpr(lambda c, x: (c * 2 + x) * fnp.sin(x) * fnp.sin(x))(
        x3, x3), [x3])
    before = str(closed)
    eqns = list(closed.jaxpr.eqns)
    invars = [list(e.invars) for e in eqns]
    simplify(closed)
    assert str(closed) == before
    assert closed.jaxpr.eqns == eqns and [list(e.invars) for e in eqns] == invars


def test_simplify_result_runs_under_transforms(x3):
    closed = fgrad.make_jaxpr(lambda x: fnp.sin(x) * fnp.sin(x))(x3)
    s = simplify(closed)
    g = fgrad.grad(lambda x: fnp.sum(eval_jaxpr(s.jaxpr, s.consts, x)[0]))(x3)
    np.testing.assert_allclose(g, 2 * np.sin(x3) * np.cos(x3), rtol=1e-5)


def test_inline_calls_opens_custom_calls_with_their_constants():
    """A custom_jvp body that closes over an array constant takes it as a leading operand."""
    c = np.arange(3.0)

    @fgrad.custom_jvp
    def scaled(x):
        return fnp.sin(x) * c

    scaled.defjvp(lambda p, t: (scaled(p[0]), t[0] * fnp.cos(p[0]) * c))
    closed = fgrad.make_jaxpr(lambda x: scaled(x) + scaled(x))(np.ones(3))
    assert any(e.primitive.name == "custom_jvp_call" for e in closed.jaxpr.eqns)
    out = simplify(closed)
    check_jaxpr(out.jaxpr)
    assert all(e.primitive.name != "custom_jvp_call" for e in out.jaxpr.eqns)
    x = np.linspace(0.1, 1.0, 3)
    np.testing.assert_allclose(np.asarray(eval_closed(out, x)[0]), 2 * np.sin(x) * c)
