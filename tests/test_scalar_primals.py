"""Python-scalar (weakly typed) primals take the dtype of a wider tangent or
cotangent, so code written for float64 tangents keeps float64 precision."""
import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp


def f(x):
    return fnp.sin(x) * x


def df(x):  # d/dx sin(x)·x in float64
    return np.cos(x) * x + np.sin(x)


def test_jvp_python_float_primal_takes_float64_tangent_dtype():
    out, t = fgrad.jvp(f, (5.0,), (np.float64(1.0),))
    assert out.dtype == t.dtype == np.float64
    np.testing.assert_allclose(out, np.sin(5.0) * 5.0, rtol=1e-15)
    np.testing.assert_allclose(t, df(5.0), rtol=1e-15)


def test_jvp_pytree_mixes_weak_and_strong_primals():
    def g(p):
        return p["a"] * p["b"] + p["c"]
    primals = ({"a": 2.0, "b": np.float32(3.0), "c": 1.0},)
    tangents = ({"a": np.float64(1.0), "b": np.float32(0.5), "c": 2.0},)
    out, t = fgrad.jvp(g, primals, tangents)
    # a became float64; b stays float32; the product promotes to float64
    assert out.dtype == t.dtype == np.float64
    np.testing.assert_allclose(t, 1.0 * 3.0 + 2.0 * 0.5 + 2.0)


def test_strong_primal_still_rejects_a_different_tangent_dtype():
    with pytest.raises(TypeError, match="tangent has dtype float64 but its primal has dtype "
                                        "float32"):
        fgrad.jvp(f, (np.float32(5.0),), (np.float64(1.0),))


def test_weak_tangent_takes_the_primal_dtype():
    out, t = fgrad.jvp(f, (np.float64(5.0),), (1.0,))
    assert t.dtype == np.float64
    np.testing.assert_allclose(t, df(5.0), rtol=1e-15)


def test_linearize_relinearizes_for_float64_tangents():
    out, f_jvp = fgrad.linearize(f, 5.0)
    assert out.dtype == np.float32
    t64 = f_jvp(np.float64(1.0))
    assert t64.dtype == np.float64
    np.testing.assert_allclose(t64, df(5.0), rtol=1e-15)
    t32 = f_jvp(1.0)  # a Python float tangent stays in the primal's dtype
    assert t32.dtype == np.float32
    np.testing.assert_allclose(t32, df(5.0), rtol=1e-6)


def test_vjp_float64_cotangent_for_weak_output():
    out, pullback = fgrad.vjp(f, 5.0)
    (g,) = pullback(np.float64(1.0))
    assert g.dtype == np.float64
    np.testing.assert_allclose(g, df(5.0), rtol=1e-15)
    (g32,) = pullback(1.0)
    assert g32.dtype == np.float32


def test_vjp_strong_output_rejects_a_different_cotangent_dtype():
    _, pullback = fgrad.vjp(f, np.float32(5.0))
    with pytest.raises(TypeError, match="cotangent has dtype float64 but its output has dtype "
                                        "float32"):
        pullback(np.float64(1.0))


def test_vjp_weak_output_without_weak_inputs_casts_the_cotangent():
    (y, c), pullback = fgrad.vjp(lambda x: (x * 2.0, 3.0), np.float32(2.0))
    assert c.weak_type and c.dtype == np.float32
    (g,) = pullback((np.float32(1.0), np.float64(1.0)))
    assert g.dtype == np.float32 and float(g) == 2.0


def test_grad_of_jvp_with_python_float():
    def directional(x):
        return fgrad.jvp(f, (x,), (np.float64(1.0),))[1]
    g = fgrad.grad(directional)(5.0)
    # d²/dx² sin(x)·x = 2cos(x) - x sin(x); the float64 tangent made the inner
    # computation float64, the gradient flows back to the weak float32 input.
    np.testing.assert_allclose(g, 2 * np.cos(5.0) - 5.0 * np.sin(5.0), rtol=1e-6)


def test_jvp_under_jit_and_vmap():
    def tangent(x):
        return fgrad.jvp(f, (x,), (np.float64(1.0),))[1]
    t = fgrad.jit(tangent)(5.0)
    assert t.dtype == np.float64
    np.testing.assert_allclose(t, df(5.0), rtol=1e-15)
    xs = np.array([1.0, 2.0, 3.0], np.float64)
    tv = fgrad.vmap(lambda x: fgrad.jvp(f, (x,), (x * 0 + 1.0,))[1])(xs)
    np.testing.assert_allclose(tv, df(xs), rtol=1e-14)
