"""Core behaviour: the founding example, shared nodes, dense Hessians, higher
derivatives, perturbation confusion, the jaxpr printer and type checker, deep
chains, Python control flow and weak types."""
import numpy as np
import pytest

import fgrad
from fgrad import lax
from fgrad._src.core import ShapedArray
from fgrad._src.jaxpr import ClosedJaxpr, Jaxpr, JaxprTypeError, Var, check_jaxpr, eval_closed

f64 = np.float64


def _sum(x):
    return lax.reduce_sum(x, tuple(range(len(x.shape))))


# ----------------------------------------------------------------------------
# The founding example: f(x1, x2) = ln(x1) + x1*x2 - sin(x2) at (2, 5)

def founding(x1, x2):
    return lax.log(x1) + x1 * x2 - lax.sin(x2)


def test_founding_example_value_and_gradient():
    value, (d1, d2) = fgrad.value_and_grad(founding, argnums=(0, 1))(f64(2.0), f64(5.0))
    assert value.dtype == np.float64 and d1.dtype == np.float64
    assert round(float(value), 3) == 11.652
    assert round(float(d1), 3) == 5.5
    assert round(float(d2), 3) == 1.716
    # Exactly: 1/x1 + x2 and x1 - cos(x2).
    assert float(value) == pytest.approx(np.log(2) + 10 - np.sin(5), abs=1e-14)
    assert float(d1) == pytest.approx(5.5, abs=1e-14)
    assert float(d2) == pytest.approx(2 - np.cos(5), abs=1e-14)


def test_founding_example_forward_mode_and_vjp_agree():
    x1, x2 = f64(2.0), f64(5.0)
    _, t1 = fgrad.jvp(founding, (x1, x2), (f64(1.0), f64(0.0)))
    _, t2 = fgrad.jvp(founding, (x1, x2), (f64(0.0), f64(1.0)))
    out, pullback = fgrad.vjp(founding, x1, x2)
    c1, c2 = pullback(f64(1.0))
    assert float(out) == pytest.approx(11.652072, abs=1e-6)
    assert float(t1) == float(c1) == pytest.approx(5.5, abs=1e-14)
    assert float(t2) == pytest.approx(float(c2), abs=1e-14)
    assert round(float(t2), 3) == 1.716


def test_founding_example_in_float32():
    value, (d1, d2) = fgrad.value_and_grad(founding, (0, 1))(np.float32(2.0), np.float32(5.0))
    assert value.dtype == d1.dtype == d2.dtype == np.float32
    np.testing.assert_allclose([float(value), float(d1), float(d2)], [11.652, 5.5, 1.716],
                               atol=1e-3)


# ----------------------------------------------------------------------------
# A shared node: y = e^x (e^x + 1) uses e^x twice

@pytest.mark.parametrize("x", [-2.0, 0.0, 0.5, 3.0])
def test_shared_node_derivative(x):
    def y(x):
        e = lax.exp(x)
        return e * (e + 1.0)
    expected = 2 * np.exp(2 * x) + np.exp(x)
    assert float(fgrad.grad(y)(f64(x))) == pytest.approx(expected, rel=1e-14)
    assert float(fgrad.jvp(y, (f64(x),), (f64(1.0),))[1]) == pytest.approx(expected, rel=1e-14)
    assert float(fgrad.grad(fgrad.grad(y))(f64(x))) == pytest.approx(
        4 * np.exp(2 * x) + np.exp(x), rel=1e-13)


def test_same_input_used_many_times_accumulates():
    # x appears 5 times: d/dx (x + x + x*x + sin(x)) = 2 + 2x + cos(x)
    f = lambda x: x + x + x * x + lax.sin(x)
    assert float(fgrad.grad(f)(f64(0.7))) == pytest.approx(2 + 1.4 + np.cos(0.7), rel=1e-14)


# ----------------------------------------------------------------------------
# A dense 50-dimensional Hessian, two ways, against finite differences

N_HESS = 50


def dense(x):
    return _sum(lax.sin(x) * x * x) + _sum(x) * _sum(lax.exp(x / 10.0))


def _analytic_hessian(x):
    e = np.exp(x / 10)
    h = np.add.outer(e, e) / 10
    h += np.diag(2 * np.sin(x) + 4 * x * np.cos(x) - x * x * np.sin(x) + np.sum(x) * e / 100)
    return h


@pytest.fixture(scope="module")
def hess_point():
    return np.random.default_rng(5).uniform(-1.5, 1.5, N_HESS)


@pytest.fixture(scope="module")
def fd_hessian(hess_point):
    g = fgrad.grad(dense)
    h = 1e-5
    rows = []
    for i in range(N_HESS):
        e = np.zeros(N_HESS)
        e[i] = h
        rows.append((np.asarray(g(hess_point + e)) - np.asarray(g(hess_point - e))) / (2 * h))
    return np.array(rows)


def test_fd_hessian_is_sane(hess_point, fd_hessian):
    np.testing.assert_allclose(fd_hessian, _analytic_hessian(hess_point), atol=1e-6)
    assert np.count_nonzero(np.abs(fd_hessian) > 1e-3) == N_HESS * N_HESS  # dense


def test_hessian_grad_of_grad(hess_point, fd_hessian):
    g = fgrad.grad(dense)
    rows = []
    for i in range(N_HESS):
        e = np.zeros(N_HESS)
        e[i] = 1.0
        rows.append(np.asarray(fgrad.grad(lambda x: _sum(g(x) * e))(hess_point)))
    hess = np.array(rows)
    np.testing.assert_allclose(hess, fd_hessian, atol=1e-6, rtol=1e-6)
    np.testing.assert_allclose(hess, _analytic_hessian(hess_point), atol=1e-12, rtol=1e-12)
    np.testing.assert_allclose(hess, hess.T, atol=1e-12)


def test_hessian_jvp_of_grad(hess_point, fd_hessian):
    g = fgrad.grad(dense)
    cols = [np.asarray(fgrad.jvp(g, (hess_point,), (e,))[1]) for e in np.eye(N_HESS)]
    hess = np.array(cols).T
    np.testing.assert_allclose(hess, fd_hessian, atol=1e-6, rtol=1e-6)
    np.testing.assert_allclose(hess, _analytic_hessian(hess_point), atol=1e-12, rtol=1e-12)


def test_hessian_vector_products_agree(hess_point):
    v = np.random.default_rng(6).standard_normal(N_HESS)
    g = fgrad.grad(dense)
    fwd_over_rev = np.asarray(fgrad.jvp(g, (hess_point,), (v,))[1])
    rev_over_rev = np.asarray(fgrad.grad(lambda x: _sum(g(x) * v))(hess_point))
    _, g_lin = fgrad.linearize(g, hess_point)
    lin = np.asarray(g_lin(v))
    rev_over_fwd = np.asarray(fgrad.grad(
        lambda x: fgrad.jvp(dense, (x,), (v,))[1])(hess_point))
    expected = _analytic_hessian(hess_point) @ v
    for hvp in (fwd_over_rev, rev_over_rev, lin, rev_over_fwd):
        np.testing.assert_allclose(hvp, expected, rtol=1e-12, atol=1e-12)


# ----------------------------------------------------------------------------
# Higher derivatives

@pytest.mark.parametrize("x", [-1.3, 0.0, 0.4, 2.0])
def test_third_derivative_of_sin(x):
    d3 = fgrad.grad(fgrad.grad(fgrad.grad(lax.sin)))
    assert float(d3(f64(x))) == pytest.approx(-np.cos(x), abs=1e-15)

    def fwd(f):
        return lambda x: fgrad.jvp(f, (x,), (f64(1.0),))[1]
    assert float(fwd(fwd(fwd(lax.sin)))(f64(x))) == pytest.approx(-np.cos(x), abs=1e-15)
    mixed = fwd(fgrad.grad(fwd(lax.sin)))
    assert float(mixed(f64(x))) == pytest.approx(-np.cos(x), abs=1e-15)


def test_fourth_and_fifth_derivatives_of_exp_sin():
    f = lambda x: lax.exp(lax.sin(x))
    d = f
    for _ in range(5):
        d = fgrad.grad(d)
    x, h = 0.3, 1e-3
    d4 = f
    for _ in range(4):
        d4 = fgrad.grad(d4)
    fd = (float(d4(f64(x + h))) - float(d4(f64(x - h)))) / (2 * h)
    assert float(d(f64(x))) == pytest.approx(fd, rel=1e-5)


# ----------------------------------------------------------------------------
# Perturbation confusion

@pytest.mark.parametrize("x", [-2.0, 0.0, 1.0, 3.5])
def test_perturbation_confusion(x):
    """d/dx [x * d/dy (x + y)] = d/dx [x * 1] = 1, not 2."""
    def outer(x):
        return x * fgrad.grad(lambda y: x + y)(f64(1.0))
    assert float(fgrad.grad(outer)(f64(x))) == 1.0
    assert float(fgrad.jvp(outer, (f64(x),), (f64(1.0),))[1]) == 1.0

    def outer_fwd(x):
        return x * fgrad.jvp(lambda y: x + y, (f64(1.0),), (f64(1.0),))[1]
    assert float(fgrad.grad(outer_fwd)(f64(x))) == 1.0
    assert float(fgrad.jvp(outer_fwd, (f64(x),), (f64(1.0),))[1]) == 1.0


@pytest.mark.parametrize("x", [-2.0, 0.5, 3.0])
def test_perturbation_confusion_product(x):
    """d/dx [x * d/dy (x * y)] = d/dx [x * x] = 2x."""
    def outer(x):
        return x * fgrad.grad(lambda y: x * y)(f64(2.0))
    assert float(fgrad.grad(outer)(f64(x))) == pytest.approx(2 * x)
    assert float(fgrad.jvp(outer, (f64(x),), (f64(1.0),))[1]) == pytest.approx(2 * x)


def test_nested_gradients_of_closure_over_outer_variable():
    # d/dx d/dy (x^2 y^3) = 2x * 3y^2
    def f(x, y):
        return fgrad.grad(lambda y: x * x * y * y * y)(y)
    assert float(fgrad.grad(f)(f64(1.5), f64(2.0))) == pytest.approx(2 * 1.5 * 3 * 4.0)


# ----------------------------------------------------------------------------
# make_jaxpr golden text

def _one_line(text):
    """The one-line form of a printed jaxpr (undoes the printer's line wrapping)."""
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    eqns = [line.strip() for line in lines[1:-1]]
    return f"{lines[0]} {'; '.join(eqns)} {lines[-1].strip()}"


SUM_SIN = ("{ lambda ; a:f32[8]. let b:f32[8] = sin a; c:f32[] = reduce_sum[axes=(0,)] b "
           "in (c,) }")


def test_make_jaxpr_golden_sum_sin():
    jaxpr = fgrad.make_jaxpr(lambda x: lax.reduce_sum(lax.sin(x), (0,)))(np.ones(8, np.float32))
    assert str(jaxpr) == SUM_SIN


def test_make_jaxpr_sum_sin_structure():
    """What the golden above checks, independent of line wrapping."""
    jaxpr = fgrad.make_jaxpr(lambda x: lax.reduce_sum(lax.sin(x), (0,)))(np.ones(8, np.float32))
    assert _one_line(str(jaxpr)) == SUM_SIN
    assert isinstance(jaxpr, ClosedJaxpr)
    assert [e.primitive.name for e in jaxpr.eqns] == ["sin", "reduce_sum"]
    assert jaxpr.in_avals == [ShapedArray((8,), np.dtype("float32"))]
    assert jaxpr.out_avals == [ShapedArray((), np.dtype("float32"))]


def test_make_jaxpr_golden_short_one_line():
    jaxpr = fgrad.make_jaxpr(lambda x: lax.sin(x) * 2.0)(np.float32(1.0))
    assert str(jaxpr) == ("{ lambda ; a:f32[]. let b:f32[] = sin a; "
                          "c:f32[] = mul b 2.0:f32[] in (c,) }")


def test_make_jaxpr_golden_multi_line():
    def f(x, y):
        z = lax.sin(x) * y + lax.exp(y)
        return lax.reduce_sum(z, (0,)), lax.convert_element_type(z, np.float64)
    jaxpr = fgrad.make_jaxpr(f)(np.ones(4, np.float32), np.ones(4, np.float32))
    assert str(jaxpr) == """\
{ lambda ; a:f32[4] b:f32[4]. let
    c:f32[4] = sin a
    d:f32[4] = mul c b
    e:f32[4] = exp b
    f:f32[4] = add d e
    g:f32[] = reduce_sum[axes=(0,)] f
    h:f64[4] = convert_element_type[new_dtype=float64 weak_type=False] f
  in (g, h) }"""


def test_make_jaxpr_golden_with_constvar():
    c = np.array([1.0, 2.0, 3.0], np.float32)

    def f(x):
        return lax.reduce_sum(lax.mul(x, c) + 2.0, (0,))
    jaxpr = fgrad.make_jaxpr(f)(np.ones(3, np.float32))
    assert str(jaxpr) == """\
{ lambda a:f32[3]; b:f32[3]. let
    c:f32[3] = mul b a
    d:f32[3] = add c 2.0:f32[]
    e:f32[] = reduce_sum[axes=(0,)] d
  in (e,) }"""
    assert len(jaxpr.consts) == 1
    np.testing.assert_array_equal(np.asarray(jaxpr.consts[0]), c)
    assert float(eval_closed(jaxpr, np.ones(3, np.float32))[0]) == 12.0


def test_make_jaxpr_multiple_outputs_and_passthrough():
    jaxpr = fgrad.make_jaxpr(lambda x, y: (x * 2.0, y))(np.float32(1), np.int32(2))
    assert str(jaxpr) == "{ lambda ; a:f32[] b:i32[]. let c:f32[] = mul a 2.0:f32[] in (c, b) }"


def test_make_jaxpr_of_grad_evaluates_like_grad():
    f = lambda x: _sum(lax.sin(x) * x)
    x = np.linspace(-1, 1, 5)
    jaxpr = fgrad.make_jaxpr(fgrad.grad(f))(x)
    (out,) = eval_closed(jaxpr, x)
    np.testing.assert_allclose(np.asarray(out), np.asarray(fgrad.grad(f)(x)), rtol=1e-15)
    np.testing.assert_allclose(np.asarray(out), np.cos(x) * x + np.sin(x), rtol=1e-14)
    names = [e.primitive.name for e in jaxpr.eqns]
    assert "sin" in names and "cos" in names


def test_make_jaxpr_accepts_shape_dtype_struct_and_pytrees():
    spec = fgrad.ShapeDtypeStruct((2, 3), np.float32)
    jaxpr = fgrad.make_jaxpr(lambda d: lax.add(d["a"], d["b"]))({"a": spec, "b": spec})
    assert jaxpr.in_avals == [ShapedArray((2, 3), np.dtype("float32"))] * 2
    assert [e.primitive.name for e in jaxpr.eqns] == ["add"]


def test_make_jaxpr_static_argnums():
    def f(x, n, kind):
        for _ in range(n):
            x = lax.sin(x) if kind == "sin" else lax.cos(x)
        return x
    jaxpr = fgrad.make_jaxpr(f, static_argnums=(1, 2))(np.ones(2), 3, "cos")
    assert [e.primitive.name for e in jaxpr.eqns] == ["cos"] * 3
    assert len(jaxpr.in_avals) == 1


def test_make_jaxpr_python_control_flow_on_static_values():
    def f(x):
        return lax.exp(x) if x.shape[0] > 2 else lax.log(x)
    assert fgrad.make_jaxpr(f)(np.ones(3)).eqns[0].primitive.name == "exp"
    assert fgrad.make_jaxpr(f)(np.ones(2)).eqns[0].primitive.name == "log"


# ----------------------------------------------------------------------------
# The type checker

def _f(x):
    return _sum(lax.sin(x) * lax.exp(x) + x)


def _g(x, y):
    return lax.log(x) * y + lax.tanh(y)


X = np.linspace(0.5, 1.5, 4)


@pytest.mark.parametrize("name,fun,args", [
    ("grad", fgrad.grad(_f), (X,)),
    ("grad_of_grad", fgrad.grad(lambda x: _sum(fgrad.grad(_f)(x))), (X,)),
    ("value_and_grad", fgrad.value_and_grad(lambda x, y: _sum(_g(x, y)), (0, 1)), (X, X)),
    ("jvp", lambda x, t: fgrad.jvp(_f, (x,), (t,)), (X, X)),
    ("vjp", lambda x, ct: fgrad.vjp(_g, x, x)[1](ct), (X, X)),
    ("linearize", lambda x, t: fgrad.linearize(_g, x, x)[1](t, t), (X, X)),
    ("jvp_of_grad", lambda x, t: fgrad.jvp(fgrad.grad(_f), (x,), (t,)), (X, X)),
    ("vjp_of_jvp", lambda x, t: fgrad.vjp(lambda x: fgrad.jvp(_f, (x,), (t,))[1], x)[1](
        f64(1.0)), (X, X)),
])
def test_type_checker_accepts_transformed_jaxprs(name, fun, args):
    closed = fgrad.make_jaxpr(fun)(*args)
    check_jaxpr(closed.jaxpr)
    expected = fun(*args)
    got = eval_closed(closed, *args)
    for e, g in zip(fgrad.tree.leaves(expected), got):
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-14)


def _fresh():
    return fgrad.make_jaxpr(lambda x: _sum(lax.sin(x) * x))(np.ones(3, np.float32)).jaxpr


def test_type_checker_rejects_wrong_equation_output_aval():
    jaxpr = _fresh()
    jaxpr.eqns[0].outvars[0].aval = ShapedArray((4,), np.dtype("float32"))
    with pytest.raises(JaxprTypeError, match="sin"):
        check_jaxpr(jaxpr)


def test_type_checker_rejects_wrong_output_dtype():
    jaxpr = _fresh()
    jaxpr.eqns[-1].outvars[0].aval = ShapedArray((), np.dtype("float64"))
    with pytest.raises(JaxprTypeError, match="reduce_sum"):
        check_jaxpr(jaxpr)


def test_type_checker_rejects_use_before_definition():
    jaxpr = _fresh()
    broken = Jaxpr(jaxpr.constvars, jaxpr.invars, list(reversed(jaxpr.eqns)), jaxpr.outvars)
    with pytest.raises(JaxprTypeError, match="before definition"):
        check_jaxpr(broken)


def test_type_checker_rejects_undefined_outvar():
    jaxpr = _fresh()
    stray = Var(ShapedArray((), np.dtype("float32")))
    broken = Jaxpr(jaxpr.constvars, jaxpr.invars, jaxpr.eqns, [stray])
    with pytest.raises(JaxprTypeError, match="before definition"):
        check_jaxpr(broken)


def test_type_checker_rejects_double_definition():
    jaxpr = _fresh()
    broken = Jaxpr(jaxpr.constvars, jaxpr.invars, jaxpr.eqns + jaxpr.eqns[:1], jaxpr.outvars)
    with pytest.raises(JaxprTypeError, match="twice"):
        check_jaxpr(broken)


def test_type_checker_rejects_ill_typed_inputs():
    jaxpr = _fresh()
    jaxpr.invars[0].aval = ShapedArray((3,), np.dtype("int32"))  # sin of an integer
    with pytest.raises(TypeError):
        check_jaxpr(jaxpr)


# ----------------------------------------------------------------------------
# A deep chain: no recursion limits in tracing, linearize or the backward pass

CHAIN_STEPS = 20000


def _chain(x):
    for _ in range(CHAIN_STEPS):
        x = x * 1.0001 + 0.0001 * lax.sin(x)
    return x


def test_grad_of_20000_op_chain():
    x0 = 0.3
    x, d = x0, 1.0
    for _ in range(CHAIN_STEPS):
        x, d = x * 1.0001 + 0.0001 * np.sin(x), d * (1.0001 + 0.0001 * np.cos(x))
    g = fgrad.grad(_chain)(f64(x0))
    assert float(g) == pytest.approx(d, rel=1e-10)
    out, t = fgrad.jvp(_chain, (f64(x0),), (f64(1.0),))
    assert float(out) == pytest.approx(x, rel=1e-12)
    assert float(t) == pytest.approx(float(g), rel=1e-12)


# ----------------------------------------------------------------------------
# Python control flow on values under eager differentiation

def _piecewise(x):
    if lax.gt(x, 0.0):
        return x * x
    return -3.0 * x


def _halve_until_small(x):
    while lax.gt(x, 1.0):
        x = x * 0.5
    return x


@pytest.mark.parametrize("x,expected", [(2.0, 4.0), (-1.0, -3.0)])
def test_if_on_value_under_grad_and_jvp(x, expected):
    assert float(fgrad.grad(_piecewise)(f64(x))) == expected
    assert float(fgrad.jvp(_piecewise, (f64(x),), (f64(1.0),))[1]) == expected
    assert float(fgrad.grad(fgrad.grad(_piecewise))(f64(x))) == (2.0 if x > 0 else 0.0)


def test_while_on_value_under_grad_and_jvp():
    # 10 -> 5 -> 2.5 -> 1.25 -> 0.625: four halvings.
    assert float(fgrad.grad(_halve_until_small)(f64(10.0))) == 0.0625
    out, t = fgrad.jvp(_halve_until_small, (f64(10.0),), (f64(1.0),))
    assert (float(out), float(t)) == (0.625, 0.0625)


def test_python_conversions_see_the_primal_under_grad():
    """int() and bool() see the primal (piecewise constant: exact derivatives);
    float() of a differentiated value raises (test_errors.py), so a logged value
    goes through stop_gradient."""
    seen = []

    def f(x):
        seen.append((float(fgrad.stop_gradient(x)), int(x), bool(lax.gt(x, 1.0))))
        n = int(x)
        return x * n
    assert float(fgrad.grad(f)(f64(3.7))) == 3.0
    assert seen == [(3.7, 3, True)]
    fgrad.jvp(f, (f64(2.5),), (f64(1.0),))
    assert seen[-1] == (2.5, 2, True)


def test_python_loop_count_from_value():
    def power(x, n):
        out = 1.0
        for _ in range(int(n)):
            out = out * x
        return out
    assert float(fgrad.grad(power)(f64(2.0), f64(4.0))) == 32.0  # 4 x^3


# ----------------------------------------------------------------------------
# Weak types

def test_python_scalar_keeps_array_dtype():
    x = np.ones(3, np.float32)
    assert lax.add(x, 2.0).dtype == np.float32
    assert lax.mul(2.0, x).dtype == np.float32
    a = fgrad.numpy.asarray(x)
    assert (a + 2.0).dtype == np.float32
    assert (2.0 * a).dtype == np.float32
    assert (a + 2).dtype == np.float32
    assert (fgrad.numpy.asarray(np.ones(3, np.float16)) * 3.0).dtype == np.float16
    assert (fgrad.numpy.asarray(np.ones(3)) + 2.0).dtype == np.float64


def test_python_float_input_to_grad_is_float32():
    g = fgrad.grad(lambda x: x * x)(3.0)
    assert g.dtype == np.float32
    assert float(g) == 6.0
    value, g = fgrad.value_and_grad(founding, (0, 1))(2.0, 5.0)
    assert value.dtype == np.float32 and g[0].dtype == np.float32 and g[1].dtype == np.float32


def test_numpy_scalars_are_strongly_typed():
    g = fgrad.grad(lambda x: x * x)(np.float64(3.0))
    assert g.dtype == np.float64
    assert fgrad.make_jaxpr(lambda x: x)(np.float64(1.0)).in_avals[0].dtype == np.float64
    out, t = fgrad.jvp(lambda x: x * 2.0, (np.float64(1.0),), (np.float64(1.0),))
    assert out.dtype == np.float64 and t.dtype == np.float64


def test_weak_type_flags():
    w = lax.mul(2.0, 3.0)
    assert w.dtype == np.float32 and w.weak_type
    strong = lax.mul(np.float32(2.0), 3.0)
    assert strong.dtype == np.float32 and not strong.weak_type
    jaxpr = fgrad.make_jaxpr(lambda x: x * 2.0)(np.ones(2, np.float32))
    assert not jaxpr.out_avals[0].weak_type


# ----------------------------------------------------------------------------
# The session runs with check_jaxprs on (tests/conftest.py), which also checks
# every cotangent's shape in backward passes.

def test_check_jaxprs_is_on():
    assert fgrad.config.check_jaxprs is True


def _bad_linear_primitive():
    from fgrad._src.ad import deflinear
    from fgrad._src.core import Primitive
    p = Primitive("double_with_bad_transpose")
    p.impl = lambda x: x * 2
    p.abstract_eval = lambda x: x
    # Wrong on purpose: the cotangent should keep x's shape.
    deflinear(p, lambda ct, x: [lax.reduce_sum(ct, (0,))])
    return p


def test_backward_pass_rejects_wrong_cotangent_shape():
    p = _bad_linear_primitive()
    x = np.array([1.0, 2.0])
    _, t = fgrad.jvp(lambda x: p.bind(x), (x,), (np.ones(2),))  # forward mode is fine
    np.testing.assert_array_equal(np.asarray(t), [2.0, 2.0])
    with pytest.raises(TypeError, match="cotangent shape"):
        fgrad.grad(lambda x: _sum(p.bind(x)))(x)


def test_dce_jaxpr_keeps_only_what_the_chosen_outputs_need():
    from fgrad._src.jaxpr import check_jaxpr, dce_jaxpr
    closed = fgrad.make_jaxpr(lambda x: (lax.sin(x), lax.exp(lax.cos(x))))(np.ones(3))
    pruned = dce_jaxpr(closed.jaxpr, [False, True])
    check_jaxpr(pruned)
    assert [e.primitive.name for e in pruned.eqns] == ["cos", "exp"]
    assert len(pruned.outvars) == 1
