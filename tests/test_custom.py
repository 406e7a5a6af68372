"""custom_jvp and custom_vjp: user rules under every transform, nondiff
arguments, pytrees, residuals, and the classic examples (stable log1pexp,
gradient clipping)."""
import numpy as np
import pytest

import fgrad
from fgrad import lax
from fgrad.test_util import check_grads

f64 = np.float64


def _sum(x):
    return lax.reduce_sum(x, tuple(range(len(x.shape))))


def _fwd_deriv(f):
    return lambda x: fgrad.jvp(f, (x,), (f64(1.0),))[1]


# ----------------------------------------------------------------------------
# custom_jvp

@fgrad.custom_jvp
def log1pexp(x):
    return lax.log(1.0 + lax.exp(x))


@log1pexp.defjvp
def _log1pexp_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return log1pexp(x), t * lax.logistic(x)


def _naive_log1pexp(x):
    return lax.log(1.0 + lax.exp(x))


def test_log1pexp_custom_gradient_is_stable():
    with np.errstate(all="ignore"):
        naive = float(fgrad.grad(_naive_log1pexp)(f64(1000.0)))
    assert np.isnan(naive)
    assert float(fgrad.grad(log1pexp)(f64(1000.0))) == 1.0
    assert float(_fwd_deriv(log1pexp)(f64(1000.0))) == 1.0
    x = np.array([-30.0, -1.0, 0.0, 2.0, 50.0, 700.0])
    g = fgrad.grad(lambda x: _sum(log1pexp(x)))(x)
    np.testing.assert_allclose(np.asarray(g), 1 / (1 + np.exp(-x)), rtol=1e-14)


def test_log1pexp_values_and_check_grads():
    x = np.array([-2.0, 0.0, 0.5, 3.0])
    np.testing.assert_allclose(np.asarray(log1pexp(x)), np.log1p(np.exp(x)), rtol=1e-14)
    check_grads(log1pexp, (x,), order=2, modes=("fwd", "rev"))


def test_custom_jvp_rule_is_used_in_both_modes():
    calls = []

    @fgrad.custom_jvp
    def f(x):
        return lax.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        calls.append(1)
        (x,), (t,) = primals, tangents
        return lax.sin(x), t * 7.0  # deliberately not cos(x)

    x = f64(0.3)
    assert float(f(x)) == pytest.approx(np.sin(0.3))
    assert float(fgrad.jvp(f, (x,), (f64(2.0),))[1]) == 14.0
    assert float(fgrad.grad(f)(x)) == 7.0       # reverse mode transposes the rule
    _, pullback = fgrad.vjp(f, np.array([0.1, 0.2]))
    np.testing.assert_array_equal(np.asarray(pullback(np.array([1.0, 2.0]))[0]), [7.0, 14.0])
    _, f_lin = fgrad.linearize(f, x)
    assert float(f_lin(f64(1.0))) == 7.0
    assert len(calls) >= 4
    # Eager evaluation does not run the rule.
    before = len(calls)
    f(x)
    assert len(calls) == before


def test_custom_jvp_grad_of_grad_differentiates_the_rule():
    @fgrad.custom_jvp
    def cube(x):
        return x * x * x

    @cube.defjvp
    def _(primals, tangents):
        (x,), (t,) = primals, tangents
        return cube(x), t * 3.0 * x * x

    x = f64(1.5)
    assert float(fgrad.grad(cube)(x)) == pytest.approx(6.75)
    assert float(fgrad.grad(fgrad.grad(cube))(x)) == pytest.approx(9.0)
    assert float(_fwd_deriv(fgrad.grad(cube))(x)) == pytest.approx(9.0)
    assert float(fgrad.grad(_fwd_deriv(cube))(x)) == pytest.approx(9.0)
    assert float(_fwd_deriv(_fwd_deriv(cube))(x)) == pytest.approx(9.0)
    assert float(fgrad.grad(fgrad.grad(fgrad.grad(cube)))(x)) == pytest.approx(6.0)


def test_custom_jvp_make_jaxpr_shows_the_call():
    text = str(fgrad.make_jaxpr(log1pexp)(f64(1.0)))
    assert "custom_jvp_call" in text
    assert "log" in text and "exp" in text  # the traced body is shown
    assert "name='log1pexp'" in text
    jaxpr = fgrad.make_jaxpr(lambda x: log1pexp(x) * 2.0)(np.ones(3, np.float32))
    assert [e.primitive.name for e in jaxpr.eqns] == ["custom_jvp_call", "mul"]
    assert jaxpr.out_avals[0].dtype == np.float32
    # Under a jaxpr, the recorded call still differentiates with the custom rule.
    g = fgrad.make_jaxpr(fgrad.grad(log1pexp))(f64(1000.0))
    from fgrad._src.jaxpr import eval_closed
    assert float(eval_closed(g, f64(1000.0))[0]) == 1.0


def test_custom_jvp_inside_jaxpr_then_differentiated():
    """A jaxpr containing custom_jvp_call, re-evaluated under grad, uses the rule."""
    from fgrad._src.jaxpr import eval_closed
    closed = fgrad.make_jaxpr(log1pexp)(f64(0.0))
    g = fgrad.grad(lambda x: eval_closed(closed, x)[0])(f64(1000.0))
    assert float(g) == 1.0


def _closing_over(y, traced_arg):
    @fgrad.custom_jvp
    def scaled(x):
        return x * y

    @scaled.defjvp
    def _(primals, tangents):
        return scaled(primals[0]), tangents[0] * y
    return scaled(y * 1.5 if traced_arg else f64(3.0))


@pytest.mark.parametrize("mode", ["grad", "jvp"])
@pytest.mark.parametrize("traced_arg", [False, True], ids=["const_arg", "traced_arg"])
def test_custom_jvp_closure_over_traced_value(mode, traced_arg):
    """JAX recommends closing over traced values instead of nondiff_argnums."""
    f = lambda y: _closing_over(y, traced_arg)
    d = fgrad.grad(f) if mode == "grad" else _fwd_deriv(f)
    # d/dy (3y) = 3  or  d/dy (1.5 y * y) = 3y
    assert float(d(f64(2.0))) == (6.0 if traced_arg else 3.0)


def test_custom_jvp_closure_over_traced_value_make_jaxpr():
    jaxpr = fgrad.make_jaxpr(lambda y: _closing_over(y, False))(f64(2.0))
    assert "custom_jvp_call" in str(jaxpr)


def test_custom_jvp_closure_over_traced_value_with_traced_arg_make_jaxpr():
    jaxpr = fgrad.make_jaxpr(lambda y: _closing_over(y, True))(f64(2.0))
    assert "custom_jvp_call" in str(jaxpr)
    from fgrad._src.jaxpr import eval_closed
    assert float(eval_closed(jaxpr, f64(2.0))[0]) == 6.0


def test_custom_jvp_nondiff_argnums():
    @fgrad.custom_jvp
    def apply(fn, n, x):
        return fn(x) * float(n)

    def apply_jvp(fn, n, primals, tangents):
        (x,), (t,) = primals, tangents
        out, tout = fgrad.jvp(fn, (x,), (t,))
        return out * float(n), tout * float(n)
    apply = fgrad.custom_jvp(apply.fun, nondiff_argnums=(0, 1))
    apply.defjvp(apply_jvp)

    x = f64(0.4)
    assert float(apply(lax.sin, 3, x)) == pytest.approx(3 * np.sin(0.4))
    assert float(fgrad.grad(lambda x: apply(lax.sin, 3, x))(x)) == pytest.approx(3 * np.cos(0.4))
    assert float(_fwd_deriv(lambda x: apply(lax.exp, 2, x))(x)) == pytest.approx(2 * np.exp(0.4))


def test_custom_jvp_nondiff_argnum_in_the_middle():
    @fgrad.custom_jvp
    def f(x, power, y):
        return lax.integer_pow(x, power) * y

    f = fgrad.custom_jvp(f.fun, nondiff_argnums=(1,))

    @f.defjvp
    def _(power, primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        out = lax.integer_pow(x, power) * y
        return out, tx * float(power) * lax.integer_pow(x, power - 1) * y + \
            ty * lax.integer_pow(x, power)

    gx, gy = fgrad.grad(f, (0, 2))(f64(2.0), 3, f64(5.0))
    assert (float(gx), float(gy)) == (60.0, 8.0)


def test_custom_jvp_pytree_arguments_and_outputs():
    @fgrad.custom_jvp
    def f(p):
        return {"prod": p["a"] * p["b"], "sum": (p["a"] + p["b"],)}

    @f.defjvp
    def _(primals, tangents):
        (p,), (t,) = primals, tangents
        out = f(p)
        return out, {"prod": t["a"] * p["b"] + p["a"] * t["b"], "sum": (t["a"] + t["b"],)}

    p = {"a": np.array([1.0, 2.0]), "b": np.array([3.0, 4.0])}
    out = f(p)
    assert set(out) == {"prod", "sum"} and isinstance(out["sum"], tuple)
    _, t = fgrad.jvp(f, (p,), ({"a": np.ones(2), "b": np.zeros(2)},))
    np.testing.assert_array_equal(np.asarray(t["prod"]), [3.0, 4.0])
    np.testing.assert_array_equal(np.asarray(t["sum"][0]), [1.0, 1.0])
    g = fgrad.grad(lambda p: _sum(f(p)["prod"]) + _sum(f(p)["sum"][0]))(p)
    np.testing.assert_array_equal(np.asarray(g["a"]), [4.0, 5.0])
    np.testing.assert_array_equal(np.asarray(g["b"]), [2.0, 3.0])
    check_grads(lambda a, b: f({"a": a, "b": b}), (p["a"], p["b"]), order=2)


def test_custom_jvp_with_multiple_arguments_and_symbolic_zero_tangent():
    @fgrad.custom_jvp
    def f(x, y):
        return lax.sin(x) * y

    @f.defjvp
    def _(primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        # Tangents for inputs that are not being differentiated arrive as zeros.
        assert tx.shape == x.shape and ty.shape == y.shape
        return f(x, y), lax.cos(x) * y * tx + lax.sin(x) * ty

    x, y = f64(0.5), f64(2.0)
    assert float(fgrad.grad(f, 1)(x, y)) == pytest.approx(np.sin(0.5))
    assert float(fgrad.grad(f, 0)(x, y)) == pytest.approx(2 * np.cos(0.5))


def test_custom_jvp_with_keyword_arguments():
    @fgrad.custom_jvp
    def f(x, y):
        return x * y

    @f.defjvp
    def _(primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        return x * y, tx * y + x * ty
    assert float(fgrad.grad(lambda x: f(x, y=f64(3.0)))(f64(2.0))) == 3.0


def test_custom_jvp_rule_errors():
    @fgrad.custom_jvp
    def no_rule(x):
        return x
    with pytest.raises(AttributeError, match="defjvp"):
        no_rule(f64(1.0))

    @fgrad.custom_jvp
    def bad_shape(x):
        return lax.sin(x)

    @bad_shape.defjvp
    def _(primals, tangents):
        return lax.sin(primals[0]), lax.reduce_sum(tangents[0], (0,))
    with pytest.raises(TypeError, match="tangent"):
        fgrad.jvp(bad_shape, (np.ones(3),), (np.ones(3),))


def test_custom_jvp_nonlinear_rule_cannot_be_transposed():
    @fgrad.custom_jvp
    def f(x):
        return lax.sin(x)

    @f.defjvp
    def _(primals, tangents):
        (x,), (t,) = primals, tangents
        return lax.sin(x), t * t  # not linear in t
    assert float(fgrad.jvp(f, (f64(1.0),), (f64(3.0),))[1]) == 9.0
    with pytest.raises(TypeError, match="linear"):
        fgrad.grad(f)(f64(1.0))


# ----------------------------------------------------------------------------
# custom_vjp

@fgrad.custom_vjp
def sin_times(x, y):
    return lax.sin(x) * y


def _sin_times_fwd(x, y):
    return sin_times(x, y), (lax.cos(x), lax.sin(x), y)


def _sin_times_bwd(res, g):
    cos_x, sin_x, y = res
    return cos_x * y * g, sin_x * g


sin_times.defvjp(_sin_times_fwd, _sin_times_bwd)


def test_custom_vjp_value_grad_and_vjp():
    x, y = np.array([0.2, 0.9]), np.array([1.5, -2.0])
    np.testing.assert_allclose(np.asarray(sin_times(x, y)), np.sin(x) * y)
    gx, gy = fgrad.grad(lambda x, y: _sum(sin_times(x, y)), (0, 1))(x, y)
    np.testing.assert_allclose(np.asarray(gx), np.cos(x) * y, rtol=1e-15)
    np.testing.assert_allclose(np.asarray(gy), np.sin(x), rtol=1e-15)
    out, pullback = fgrad.vjp(sin_times, x, y)
    cx, cy = pullback(np.array([1.0, 10.0]))
    np.testing.assert_allclose(np.asarray(cx), np.cos(x) * y * [1, 10], rtol=1e-15)
    np.testing.assert_allclose(np.asarray(cy), np.sin(x) * [1, 10], rtol=1e-15)
    check_grads(sin_times, (x, y), order=2, modes=("rev",))


def test_custom_vjp_rules_are_used_and_residuals_passed():
    log = []

    @fgrad.custom_vjp
    def f(x):
        return lax.exp(x)

    def fwd(x):
        log.append("fwd")
        e = lax.exp(x)
        return e, (e, "a static note")

    def bwd(res, g):
        log.append("bwd")
        e, note = res if isinstance(res, tuple) else (res, None)
        return (g * e * 2.0,)  # deliberately twice the true derivative
    f.defvjp(fwd, bwd)
    assert float(f(f64(0.0))) == 1.0
    assert log == []  # eager: neither rule runs
    assert float(fgrad.grad(f)(f64(0.0))) == 2.0
    assert log == ["fwd", "bwd"]


def test_custom_vjp_grad_of_grad_when_bwd_is_differentiable():
    x, y = f64(1.0), f64(2.0)
    # d2/dx2 sin(x) y = -sin(x) y
    assert float(fgrad.grad(fgrad.grad(sin_times))(x, y)) == pytest.approx(-np.sin(1.0) * 2)
    # d/dy d/dx = cos(x)
    assert float(fgrad.grad(fgrad.grad(sin_times), 1)(x, y)) == pytest.approx(np.cos(1.0))
    # vjp of the vjp: the bwd rule is ordinary fgrad code.
    _, pullback = fgrad.vjp(lambda x: fgrad.vjp(sin_times, x, y)[1](f64(3.0))[0], x)
    assert float(pullback(f64(1.0))[0]) == pytest.approx(-np.sin(1.0) * 2 * 3)


def test_custom_vjp_forward_over_reverse_when_fwd_avoids_the_function():
    """jvp of grad works when fwd does not call the custom_vjp function itself:
    forward mode then only sees fwd's and bwd's ordinary operations."""
    @fgrad.custom_vjp
    def f(x):
        return lax.sin(x)

    f.defvjp(lambda x: (lax.sin(x), lax.cos(x)), lambda c, g: (c * g,))
    assert float(_fwd_deriv(fgrad.grad(f))(f64(1.0))) == pytest.approx(-np.sin(1.0))


def test_custom_vjp_bwd_none_means_zero():
    @fgrad.custom_vjp
    def f(x, y):
        return x * y

    f.defvjp(lambda x, y: (x * y, x), lambda x, g: (None, g * x))
    gx, gy = fgrad.grad(f, (0, 1))(f64(2.0), f64(3.0))
    assert (float(gx), float(gy)) == (0.0, 2.0)
    _, pullback = fgrad.vjp(f, np.ones(2), np.ones(2))
    cx, cy = pullback(np.ones(2))
    assert cx.shape == (2,) and not np.any(np.asarray(cx))


def test_custom_vjp_nondiff_argnums():
    def f(x, scale, y):
        return x * y * scale

    def fwd(x, scale, y):
        return x * y * scale, (x, y)

    def bwd(scale, res, g):
        x, y = res
        return (g * y * scale, g * x * scale * 100.0)  # y's rule deliberately scaled
    f = fgrad.custom_vjp(f, nondiff_argnums=(1,))
    f.defvjp(fwd, bwd)
    assert float(f(f64(2.0), 3.0, f64(5.0))) == 30.0
    gx, gy = fgrad.grad(f, (0, 2))(f64(2.0), 3.0, f64(5.0))
    assert (float(gx), float(gy)) == (15.0, 600.0)


def test_custom_vjp_pytree_arguments_and_outputs():
    @fgrad.custom_vjp
    def f(p):
        return (p["w"] * p["b"], {"w2": p["w"] * p["w"]})

    def fwd(p):
        return f(p), p

    def bwd(p, g):
        g0, g1 = g
        return ({"w": g0 * p["b"] + 2.0 * p["w"] * g1["w2"], "b": g0 * p["w"]},)
    f.defvjp(fwd, bwd)
    p = {"w": np.array([1.0, 2.0]), "b": np.array([3.0, 4.0])}
    g = fgrad.grad(lambda p: _sum(f(p)[0]) + _sum(f(p)[1]["w2"]))(p)
    np.testing.assert_array_equal(np.asarray(g["w"]), [5.0, 8.0])
    np.testing.assert_array_equal(np.asarray(g["b"]), [1.0, 2.0])
    out, pullback = fgrad.vjp(f, p)
    (cp,) = pullback((np.ones(2), {"w2": np.zeros(2)}))
    np.testing.assert_array_equal(np.asarray(cp["w"]), [3.0, 4.0])


def test_custom_vjp_forward_mode_raises_clear_error():
    for attempt in (lambda: fgrad.jvp(sin_times, (f64(1.0), f64(2.0)), (f64(1.0), f64(0.0))),
                    lambda: _fwd_deriv(fgrad.grad(lambda x: sin_times(x, f64(2.0))))(f64(1.0))):
        with pytest.raises(TypeError, match="custom_vjp") as info:
            attempt()
        assert "sin_times" in str(info.value)
    # Not differentiating the custom_vjp's inputs in forward mode is fine.
    _, t = fgrad.jvp(lambda y: sin_times(f64(1.0), f64(2.0)) * y, (f64(3.0),), (f64(1.0),))
    assert float(t) == pytest.approx(np.sin(1.0) * 2)


def test_custom_vjp_make_jaxpr_shows_the_call():
    jaxpr = fgrad.make_jaxpr(sin_times)(f64(1.0), f64(2.0))
    text = str(jaxpr)
    assert "custom_vjp_call" in text and "name='sin_times'" in text
    assert [e.primitive.name for e in jaxpr.eqns] == ["custom_vjp_call"]
    # grad of a jaxpr-traced custom_vjp still uses the custom rule
    g = fgrad.make_jaxpr(fgrad.grad(sin_times))(f64(1.0), f64(2.0))
    from fgrad._src.jaxpr import eval_closed
    assert float(eval_closed(g, f64(1.0), f64(2.0))[0]) == pytest.approx(np.cos(1.0) * 2)


def test_custom_vjp_bwd_must_return_one_cotangent_per_argument():
    @fgrad.custom_vjp
    def f(x, y):
        return x * y

    f.defvjp(lambda x, y: (x * y, (x, y)), lambda res, g: (g,))
    with pytest.raises(TypeError, match="one cotangent per"):
        fgrad.grad(f)(f64(1.0), f64(2.0))


def test_custom_vjp_without_rule():
    @fgrad.custom_vjp
    def f(x):
        return x
    with pytest.raises(AttributeError, match="defvjp"):
        f(f64(1.0))


# ----------------------------------------------------------------------------
# Gradient clipping: identity forward, clipped cotangent backward

@fgrad.custom_vjp
def clip_gradient(lo, hi, x):
    return x


def _clip_fwd(lo, hi, x):
    return x, (lo, hi)


def _clip_bwd(res, g):
    lo, hi = res
    return (None, None, lax.max(lax.min(g, hi), lo))


clip_gradient.defvjp(_clip_fwd, _clip_bwd)


def test_clip_gradient():
    x = np.array([0.1, 0.2, 0.3])
    scales = np.array([0.1, 3.0, -5.0])
    assert clip_gradient(-1.0, 1.0, x) is not None
    np.testing.assert_array_equal(np.asarray(clip_gradient(-1.0, 1.0, x)), x)
    g = fgrad.grad(lambda x: _sum(clip_gradient(-1.0, 1.0, x) * scales))(x)
    np.testing.assert_array_equal(np.asarray(g), [0.1, 1.0, -1.0])
    # Clipping applies to the cotangent arriving at that point, after the chain rule.
    g = fgrad.grad(lambda x: _sum(clip_gradient(-0.5, 0.5, x * 4.0)))(x)
    np.testing.assert_array_equal(np.asarray(g), [2.0, 2.0, 2.0])


def test_clip_gradient_with_nondiff_bounds():
    def clip(lo, hi, x):
        return x
    clip = fgrad.custom_vjp(clip, nondiff_argnums=(0, 1))
    clip.defvjp(lambda lo, hi, x: (x, None),
                lambda lo, hi, _, g: (lax.max(lax.min(g, hi), lo),))
    g = fgrad.grad(lambda x: clip(-2.0, 2.0, x) * 10.0)(f64(1.0))
    assert float(g) == 2.0


def test_custom_vjp_closing_over_traced_value_says_pass_it_as_argument():
    def outer(c):
        @fgrad.custom_vjp
        def f(x):
            return x * c

        f.defvjp(lambda x: (x * c, None), lambda res, g: (g * c,))
        return f(c)

    with pytest.raises(fgrad.EscapedTracerError, match="argument"):
        fgrad.grad(outer)(f64(2.0))


def test_custom_jvp_closure_under_second_order():
    """d²/dy² of c·y·y with the closed-over c = y: 6y -> second derivative 6."""
    def f(y):
        @fgrad.custom_jvp
        def scaled(x):
            return x * y

        @scaled.defjvp
        def scaled_jvp(primals, tangents):
            return scaled(primals[0]), tangents[0] * y

        return scaled(y * y)

    assert float(fgrad.grad(fgrad.grad(f))(f64(2.0))) == pytest.approx(12.0)
