"""API semantics of grad, value_and_grad, jvp, vjp and linearize: argnums,
has_aux, pytrees in and out, nesting, stop_gradient, integer inputs, and a
check that check_grads itself catches wrong derivatives."""
import dataclasses
from typing import NamedTuple

import numpy as np
import pytest

import fgrad
from fgrad import lax
from fgrad.test_util import check_grads

f64 = np.float64


def _sum(x):
    return lax.reduce_sum(x, tuple(range(len(x.shape))))


def _close(a, b, **kw):
    if isinstance(a, fgrad.Array):
        b = np.asarray(b)
    la, lb = fgrad.tree.leaves(a), fgrad.tree.leaves(b)
    assert fgrad.tree.structure(a) == fgrad.tree.structure(b), (a, b)
    for x, y in zip(la, lb):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=kw.get("rtol", 1e-13),
                                   atol=kw.get("atol", 1e-14))


class Pair(NamedTuple):
    a: object
    b: object


@fgrad.tree.register_dataclass
@dataclasses.dataclass
class Params:
    w: object
    b: object
    scale: float = dataclasses.field(default=2.0, metadata={"static": True})


def three(x, y, z):
    return lax.sin(x) * y + z * z * z


X, Y, Z = f64(0.7), f64(-1.3), f64(2.0)
D3 = {0: np.cos(0.7) * -1.3, 1: np.sin(0.7), 2: 3 * 4.0}


# ----------------------------------------------------------------------------
# argnums

@pytest.mark.parametrize("argnums", [0, 1, 2, -1, -3])
def test_grad_int_argnums(argnums):
    g = fgrad.grad(three, argnums)(X, Y, Z)
    assert isinstance(g, fgrad.Array)
    assert float(g) == pytest.approx(D3[argnums % 3], rel=1e-14)


@pytest.mark.parametrize("argnums", [(0,), (0, 1), (2, 0), (-1, 1), (0, 1, 2)])
def test_grad_tuple_argnums(argnums):
    g = fgrad.grad(three, argnums)(X, Y, Z)
    assert isinstance(g, tuple) and len(g) == len(argnums)
    for gi, i in zip(g, argnums):
        assert float(gi) == pytest.approx(D3[i % 3], rel=1e-14)


@pytest.mark.parametrize("argnums", [3, -4, (0, 5)])
def test_grad_out_of_range_argnums(argnums):
    with pytest.raises(TypeError, match="argnums"):
        fgrad.grad(three, argnums)(X, Y, Z)


def test_value_and_grad_argnums():
    value, g = fgrad.value_and_grad(three, (1, 2))(X, Y, Z)
    assert float(value) == pytest.approx(np.sin(0.7) * -1.3 + 8.0, rel=1e-14)
    assert float(g[0]) == pytest.approx(D3[1]) and float(g[1]) == pytest.approx(D3[2])


def test_grad_keyword_arguments_are_not_differentiated():
    def f(x, scale=1.0):
        return x * x * scale
    assert float(fgrad.grad(f)(f64(3.0), scale=f64(2.0))) == 12.0


def test_grad_preserves_function_name():
    def my_loss(x):
        return x * x
    assert fgrad.grad(my_loss).__name__ == "my_loss"
    assert fgrad.value_and_grad(my_loss).__name__ == "my_loss"


# ----------------------------------------------------------------------------
# has_aux

def _with_aux(x):
    loss = _sum(x * x)
    return loss, {"x2": x * 2.0, "tag": "hello", "n": 3}


def test_grad_has_aux():
    x = np.array([1.0, 2.0])
    g, aux = fgrad.grad(_with_aux, has_aux=True)(x)
    _close(g, 2 * x)
    assert aux["tag"] == "hello" and aux["n"] == 3
    assert isinstance(aux["x2"], fgrad.Array)  # a value, not a tracer
    np.testing.assert_array_equal(np.asarray(aux["x2"]), 2 * x)


def test_value_and_grad_has_aux():
    x = np.array([1.0, 2.0])
    (value, aux), g = fgrad.value_and_grad(_with_aux, has_aux=True)(x)
    assert float(value) == 5.0
    _close(g, 2 * x)
    np.testing.assert_array_equal(np.asarray(aux["x2"]), 2 * x)


def test_vjp_has_aux():
    x = np.array([1.0, 2.0])
    out, pullback, aux = fgrad.vjp(lambda x: (lax.sin(x), x * 3.0), x, has_aux=True)
    _close(out, np.sin(x))
    np.testing.assert_array_equal(np.asarray(aux), 3 * x)
    (ct,) = pullback(np.ones(2))
    _close(ct, np.cos(x))


def test_jvp_has_aux():
    x = np.array([1.0, 2.0])
    out, t, aux = fgrad.jvp(lambda x: (lax.sin(x), {"y": x * 3.0}), (x,), (np.ones(2),),
                            has_aux=True)
    _close(out, np.sin(x))
    _close(t, np.cos(x))
    assert type(aux["y"]) is fgrad.Array
    np.testing.assert_array_equal(np.asarray(aux["y"]), 3 * x)


def test_has_aux_requires_a_pair():
    with pytest.raises(TypeError, match="pair"):
        fgrad.grad(lambda x: x * x, has_aux=True)(f64(1.0))


def test_aux_of_nested_grad_is_concrete():
    def inner(x):
        return x * x * x, x * 2.0

    def outer(x):
        g, aux = fgrad.grad(inner, has_aux=True)(x)
        return g + aux
    # d/dx (3x^2 + 2x) = 6x + 2
    assert float(fgrad.grad(outer)(f64(2.0))) == 14.0


# ----------------------------------------------------------------------------
# Pytree inputs and outputs

def _tree_fun(p, d, lst, nothing):
    assert nothing is None
    return (_sum(p.a * p.b) + _sum(d.w * d.w) * d.scale + _sum(d.b)
            + _sum(lax.sin(lst[0]["k"])) + _sum(lst[1]))


def _tree_args():
    p = Pair(np.array([1.0, 2.0]), np.array([3.0, 4.0]))
    d = Params(np.array([[0.5, -0.5]]), np.array(1.5), scale=3.0)
    lst = [{"k": np.array([0.1, 0.2, 0.3])}, np.ones(2)]
    return p, d, lst, None


def _tree_expected_grads():
    p, d, lst, _ = _tree_args()
    return (Pair(p.b, p.a), Params(2 * 3.0 * d.w, np.array(1.0), scale=3.0),
            [{"k": np.cos(lst[0]["k"])}, np.ones(2)], None)


def test_grad_pytree_arguments():
    args = _tree_args()
    expected = _tree_expected_grads()
    g = fgrad.grad(_tree_fun, (0, 1, 2, 3))(*args)
    assert isinstance(g[0], Pair)
    assert isinstance(g[1], Params) and g[1].scale == 3.0
    assert isinstance(g[2], list) and isinstance(g[2][0], dict)
    assert g[3] is None
    _close(g, expected)
    _close(fgrad.grad(_tree_fun, 1)(*args), expected[1])


def test_grad_dict_with_none_value():
    g = fgrad.grad(lambda d: _sum(d["a"] * 2.0))({"a": np.ones(2), "b": None})
    assert g["b"] is None
    _close(g["a"], np.full(2, 2.0))


def test_value_and_grad_pytree():
    args = _tree_args()
    value, g = fgrad.value_and_grad(_tree_fun, (0, 1, 2))(*args)
    assert float(value) == pytest.approx(float(_tree_fun(*args)))
    _close(g, _tree_expected_grads()[:3])


def _tree_out(p, d):
    return {"sum": p.a + p.b, "pair": Pair(d.w * 2.0, [lax.sin(d.b), None]),
            "params": Params(d.w * d.w, d.b, scale=d.scale)}


def test_jvp_pytree_in_and_out():
    p, d, _, _ = _tree_args()
    tp = Pair(np.ones(2), np.full(2, 2.0))
    td = Params(np.ones((1, 2)), np.array(1.0), scale=3.0)
    out, t = fgrad.jvp(_tree_out, (p, d), (tp, td))
    assert fgrad.tree.structure(out) == fgrad.tree.structure(t)
    assert isinstance(t["pair"], Pair) and t["pair"].b[1] is None
    assert isinstance(t["params"], Params) and t["params"].scale == 3.0
    _close(out, _tree_out(p, d))
    _close(t["sum"], np.full(2, 3.0))
    _close(t["pair"].a, np.full((1, 2), 2.0))
    _close(t["pair"].b[0], np.cos(1.5))
    _close(t["params"].w, 2 * d.w)


def test_vjp_pytree_in_and_out():
    p, d, _, _ = _tree_args()
    out, pullback = fgrad.vjp(_tree_out, p, d)
    ct = fgrad.tree.map(lambda x: np.ones(np.shape(x)), out)
    cts = pullback(ct)
    assert isinstance(cts, tuple) and len(cts) == 2
    cp, cd = cts
    assert isinstance(cp, Pair) and isinstance(cd, Params) and cd.scale == 3.0
    _close(cp, Pair(np.ones(2), np.ones(2)))
    _close(cd.w, 2.0 + 2 * d.w)
    _close(cd.b, np.cos(1.5) + 1.0)


def test_linearize_pytree_matches_jvp():
    p, d, _, _ = _tree_args()
    tp = Pair(np.array([0.3, -1.0]), np.array([2.0, 0.5]))
    td = Params(np.array([[1.0, -2.0]]), np.array(0.25), scale=3.0)
    out, f_jvp = fgrad.linearize(_tree_out, p, d)
    _close(out, _tree_out(p, d))
    _close(f_jvp(tp, td), fgrad.jvp(_tree_out, (p, d), (tp, td))[1])


def test_jvp_requires_matching_structures():
    with pytest.raises(TypeError, match="structure"):
        fgrad.jvp(lambda a, b: a * b, (f64(1.0), f64(2.0)), (f64(1.0),))
    with pytest.raises(TypeError, match="shape"):
        fgrad.jvp(lax.sin, (np.ones(3),), (np.ones(2),))
    with pytest.raises(TypeError, match="tuples or lists"):
        fgrad.jvp(lax.sin, np.ones(3), np.ones(3))


def test_vjp_cotangent_must_match_output():
    _, pullback = fgrad.vjp(lambda x: (x, x), np.ones(2))
    with pytest.raises(TypeError, match="structure"):
        pullback(np.ones(2))
    with pytest.raises(TypeError, match="shape"):
        pullback((np.ones(2), np.ones(3)))


# ----------------------------------------------------------------------------
# linearize and vjp specifics

def _g(x, y):
    return lax.sin(x) * y + lax.exp(x * y)


@pytest.mark.parametrize("seed", range(3))
def test_linearize_equals_jvp(seed):
    rng = np.random.default_rng(seed)
    x, y = rng.standard_normal((2, 3)), rng.standard_normal(3)
    out, f_jvp = fgrad.linearize(_g, x, y)
    _close(out, _g(x, y))
    for _ in range(3):
        tx, ty = rng.standard_normal((2, 3)), rng.standard_normal(3)
        _close(f_jvp(tx, ty), fgrad.jvp(_g, (x, y), (tx, ty))[1])


def test_linearize_is_linear():
    x, y = np.array([0.3, 0.8]), np.array([1.5, -0.5])
    _, f_jvp = fgrad.linearize(_g, x, y)
    a, b = (np.array([1.0, 2.0]), np.array([0.0, 1.0])), (np.array([-1.0, 0.5]), np.ones(2))
    lhs = f_jvp(a[0] * 2 + b[0], a[1] * 2 + b[1])
    rhs = 2 * np.asarray(f_jvp(*a)) + np.asarray(f_jvp(*b))
    _close(lhs, rhs)


def test_linearize_does_not_rerun_the_function():
    calls = []

    def f(x):
        calls.append(1)
        return lax.sin(x)
    _, f_jvp = fgrad.linearize(f, np.ones(2))
    for _ in range(3):
        f_jvp(np.ones(2))
    assert len(calls) == 1


def test_vjp_pullback_returns_one_cotangent_per_primal():
    x, y = np.array([0.3, 0.8, 1.0]), np.array([1.5, -0.5, 2.0])
    out, pullback = fgrad.vjp(_g, x, y)
    cts = pullback(np.ones(3))
    assert isinstance(cts, tuple) and len(cts) == 2
    _close(cts[0], np.cos(x) * y + y * np.exp(x * y))
    _close(cts[1], np.sin(x) + x * np.exp(x * y))
    out1, pb1 = fgrad.vjp(lax.sin, x)
    res = pb1(np.ones(3))
    assert isinstance(res, tuple) and len(res) == 1


def test_vjp_pullback_reusable_and_linear():
    x = np.array([0.3, 0.8])
    _, pullback = fgrad.vjp(lax.sin, x)
    (a,) = pullback(np.array([1.0, 0.0]))
    (b,) = pullback(np.array([0.0, 1.0]))
    (c,) = pullback(np.array([2.0, 3.0]))
    _close(c, 2 * np.asarray(a) + 3 * np.asarray(b))


def test_vjp_matches_jvp_by_duality():
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((2, 3)), rng.standard_normal(3)
    tx, ty = rng.standard_normal((2, 3)), rng.standard_normal(3)
    u = rng.standard_normal((2, 3))
    _, t = fgrad.jvp(_g, (x, y), (tx, ty))
    _, pullback = fgrad.vjp(_g, x, y)
    cx, cy = pullback(u)
    lhs = np.sum(u * np.asarray(t))
    rhs = np.sum(np.asarray(cx) * tx) + np.sum(np.asarray(cy) * ty)
    assert lhs == pytest.approx(rhs, rel=1e-12)


def test_unused_input_gets_zero_cotangent_and_gradient():
    _, pullback = fgrad.vjp(lambda x, y: x * 2.0, np.ones(2), np.ones(3))
    cx, cy = pullback(np.ones(2))
    _close(cy, np.zeros(3))
    g = fgrad.grad(lambda x, y: _sum(x), (0, 1))(np.ones(2), np.ones(3))
    _close(g[1], np.zeros(3))
    _, t = fgrad.jvp(lambda x, y: y, (np.ones(2), np.ones(3)), (np.ones(2), np.zeros(3)))
    _close(t, np.zeros(3))


def test_constant_output_has_zero_derivatives():
    c = np.array([1.0, 2.0])
    out, t = fgrad.jvp(lambda x: c, (np.ones(2),), (np.ones(2),))
    _close(out, c)
    _close(t, np.zeros(2))
    assert float(fgrad.grad(lambda x: f64(3.0))(f64(1.0))) == 0.0


# ----------------------------------------------------------------------------
# Nesting

def test_grad_of_grad():
    f = lambda x: x * x * x * x
    assert float(fgrad.grad(fgrad.grad(f))(f64(2.0))) == 48.0


def test_jvp_of_grad():
    f = lambda x: lax.sin(x) * x
    x = f64(0.9)
    _, t = fgrad.jvp(fgrad.grad(f), (x,), (f64(1.0),))
    assert float(t) == pytest.approx(2 * np.cos(0.9) - 0.9 * np.sin(0.9), rel=1e-14)


def test_grad_of_function_calling_grad_internally():
    def energy(x):
        return _sum(x * x * x)

    def loss(x):
        force = fgrad.grad(energy)(x)       # 3x^2
        return _sum(force * force)          # sum 9x^4
    x = np.array([0.5, -1.0, 2.0])
    _close(fgrad.grad(loss)(x), 36 * x ** 3)


def test_vjp_of_jvp():
    f = lambda x: lax.sin(x) * x
    x = np.array([0.2, 0.7])
    v = np.array([1.0, -2.0])
    out, pullback = fgrad.vjp(lambda x: fgrad.jvp(f, (x,), (v,))[1], x)
    _close(out, (np.cos(x) * x + np.sin(x)) * v)
    (ct,) = pullback(np.ones(2))
    _close(ct, (2 * np.cos(x) - x * np.sin(x)) * v)


def test_jvp_of_vjp():
    f = lambda x: lax.exp(x) * x
    x = np.array([0.2, 0.7])

    def pull(x):
        return fgrad.vjp(f, x)[1](np.ones(2))[0]
    _, t = fgrad.jvp(pull, (x,), (np.ones(2),))
    _close(t, np.exp(x) * (x + 2))


def test_linearize_of_grad_and_grad_of_linearize():
    f = lambda x: _sum(lax.sin(x) * x)
    x = np.array([0.3, 1.1])
    _, hvp = fgrad.linearize(fgrad.grad(f), x)
    _close(hvp(np.array([1.0, 0.0])), [2 * np.cos(0.3) - 0.3 * np.sin(0.3), 0.0])
    g = fgrad.grad(lambda x: _sum(fgrad.linearize(lax.sin, x)[1](x)))(x)
    # d/dx sum(cos(x) * x) = cos(x) - x sin(x)
    _close(g, np.cos(x) - x * np.sin(x))


def test_three_levels_of_mixed_nesting():
    f = lambda x: lax.exp(x * 2.0)
    fwd = lambda h: (lambda x: fgrad.jvp(h, (x,), (f64(1.0),))[1])
    d3 = fgrad.grad(fwd(fgrad.grad(f)))
    assert float(d3(f64(0.1))) == pytest.approx(8 * np.exp(0.2), rel=1e-14)


# ----------------------------------------------------------------------------
# stop_gradient

def test_stop_gradient_blocks_reverse_and_forward():
    f = lambda x: x * x + fgrad.stop_gradient(x * x * x)
    assert float(fgrad.grad(f)(f64(2.0))) == 4.0
    assert float(fgrad.jvp(f, (f64(2.0),), (f64(1.0),))[1]) == 4.0
    assert float(f(f64(2.0))) == 12.0


def test_stop_gradient_pytree():
    tree = {"a": np.ones(2), "b": (f64(3.0), np.array([1, 2], np.int32)), "c": None}
    out = fgrad.stop_gradient(tree)
    assert fgrad.tree.structure(out) == fgrad.tree.structure(tree)
    np.testing.assert_array_equal(np.asarray(out["b"][1]), [1, 2])
    assert out["b"][1].dtype == np.int32 and out["c"] is None
    floats = {"a": np.ones(2), "b": f64(3.0)}
    g = fgrad.grad(lambda t: _sum(fgrad.stop_gradient(t)["a"] * t["a"])
                   * fgrad.stop_gradient(t)["b"])(floats)
    _close(g["a"], np.full(2, 3.0))
    _close(g["b"], f64(0.0))


def test_stop_gradient_under_nested_grads():
    # Inner: d/dy [y * stop(x*y)] = x*y (with the stopped factor treated as constant).
    def inner(x):
        return fgrad.grad(lambda y: y * fgrad.stop_gradient(x * y))(f64(3.0))
    # inner(x) = 3x; stop_gradient also hides x from the outer derivative.
    assert float(inner(f64(2.0))) == 6.0
    assert float(fgrad.grad(inner)(f64(2.0))) == 0.0
    # Stopping only the outer variable's path.
    assert float(fgrad.grad(lambda x: fgrad.grad(
        lambda y: fgrad.stop_gradient(x) * y * y)(f64(1.0)))(f64(5.0))) == 0.0
    # A stop_gradient inside a grad of grad of a polynomial.
    f = lambda x: x * x * x + fgrad.stop_gradient(x) * x * x
    # f' = 3x^2 + 2 s x with s = x held constant; f'' = 6x + 2s  (s still constant)
    assert float(fgrad.grad(fgrad.grad(f))(f64(2.0))) == 16.0


# ----------------------------------------------------------------------------
# Integer inputs

def test_jvp_integer_inputs_get_zero_tangents():
    x, i = np.array([1.0, 2.0]), np.array([3, 4], np.int32)
    out, t = fgrad.jvp(lambda x, i: x * lax.convert_element_type(i, np.float64),
                       (x, i), (np.ones(2), np.array([7, 7], np.int32)))
    _close(t, [3.0, 4.0])  # the integer tangent is ignored
    out, t = fgrad.jvp(lambda i: i * 2, (i,), (np.array([7, 7], np.int32),))
    np.testing.assert_array_equal(np.asarray(out), [6, 8])
    assert not np.any(np.asarray(t))


def test_vjp_integer_input_gets_zero_cotangent():
    _, pullback = fgrad.vjp(lambda x, i: x * lax.convert_element_type(i, np.float64),
                            np.ones(2), np.array([3, 4], np.int32))
    cx, ci = pullback(np.ones(2))
    _close(cx, [3.0, 4.0])
    assert not np.any(np.asarray(ci))


def test_grad_allow_int():
    g = fgrad.grad(lambda x, i: x * lax.convert_element_type(i, np.float64), (0, 1),
                   allow_int=True)(f64(2.0), np.int32(3))
    assert float(g[0]) == 3.0
    assert not np.any(np.asarray(g[1]))


def test_grad_with_integer_argument_not_differentiated():
    f = lambda x, n: x * lax.convert_element_type(n, np.float64)
    assert float(fgrad.grad(f)(f64(2.0), np.int32(5))) == 5.0


# ----------------------------------------------------------------------------
# check_grads catches a wrong derivative

@fgrad.custom_jvp
def sin_with_wrong_jvp(x):
    return lax.sin(x)


@sin_with_wrong_jvp.defjvp
def _sin_wrong_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return lax.sin(x), t * lax.cos(x) * 1.1  # 10% too large


@pytest.mark.parametrize("mode", ["fwd", "rev"])
def test_check_grads_catches_wrong_derivative(mode):
    x = np.array([0.3, 1.2])
    with pytest.raises(AssertionError):
        check_grads(sin_with_wrong_jvp, (x,), order=1, modes=(mode,))


def test_check_grads_passes_correct_custom_rule_and_rejects_bad_mode():
    @fgrad.custom_jvp
    def s(x):
        return lax.sin(x)

    @s.defjvp
    def _(primals, tangents):
        return lax.sin(primals[0]), tangents[0] * lax.cos(primals[0])
    check_grads(s, (np.array([0.3, 1.2]),), order=2)
    with pytest.raises(ValueError, match="mode"):
        check_grads(s, (np.ones(2),), modes=("sideways",))


def test_check_grads_catches_wrong_second_derivative():
    """First derivative right, its own derivative wrong: only order 2 sees it."""
    @fgrad.custom_jvp
    def cube(x):
        return x * x * x

    @cube.defjvp
    def _(primals, tangents):
        (x,), (t,) = primals, tangents
        # 3x^2 evaluated as 3 * x * stop(x): right value, wrong derivative.
        return cube(x), t * 3.0 * x * fgrad.stop_gradient(x)
    x = np.array([0.5, 1.5])
    check_grads(cube, (x,), order=1)
    for mode in ("fwd", "rev"):
        with pytest.raises(AssertionError):
            check_grads(cube, (x,), order=2, modes=(mode,))
