"""fgrad.scipy.integrate: odeint against SciPy (odeint and solve_ivp) and known
solutions; its adjoint gradients (reverse mode, orders 1 and 2) against finite
differences with respect to y0, t, args and closed-over values; pytree states;
jit against eager; vmap against a Python loop; mxstep/hmax; trapezoid against
scipy.integrate.trapezoid with its derivatives."""
import numpy as np
import pytest
import scipy.integrate

import fgrad
import fgrad.numpy as fnp
from fgrad.scipy.integrate import odeint, trapezoid
from fgrad.test_util import check_grads

TS = np.linspace(0.0, 2.0, 4)
Y0 = np.array([1.0, 0.0])
A, B = np.float64(1.3), np.float64(0.2)


def forced_oscillator(y, t, a, b):
    return fnp.stack([y[1], -a * y[0] - b * y[1] + fnp.sin(t)])


def _forced_oscillator_np(y, t, a, b):
    return [y[1], -a * y[0] - b * y[1] + np.sin(t)]


def test_values_match_scipy_odeint_and_solve_ivp():
    ts = np.linspace(0.0, 10.0, 41)
    got = np.asarray(odeint(forced_oscillator, Y0, ts, A, B))
    want = scipy.integrate.odeint(_forced_oscillator_np, Y0, ts, args=(A, B), rtol=1e-12,
                                  atol=1e-12)
    np.testing.assert_allclose(got, want, atol=1e-6)
    ivp = scipy.integrate.solve_ivp(lambda t, y: _forced_oscillator_np(y, t, A, B), (0, 10), Y0,
                                    t_eval=ts, method="DOP853", rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got, ivp.y.T, atol=1e-6)


@pytest.mark.parametrize("tol", [1e-6, 1e-9])
def test_error_follows_the_tolerance(tol):
    """A nonlinear pendulum: the global error tracks rtol/atol (within what LSODA,
    scipy.integrate.odeint's solver, reaches at the same tolerance)."""
    ts = np.linspace(0.0, 10.0, 37)
    ref = scipy.integrate.solve_ivp(lambda t, y: [y[1], -np.sin(y[0])], (0, 10), [2.0, 0.0],
                                    t_eval=ts, method="DOP853", rtol=1e-13, atol=1e-13).y.T
    got = odeint(lambda y, t: fnp.stack([y[1], -fnp.sin(y[0])]), np.array([2.0, 0.0]), ts,
                 rtol=tol, atol=tol)
    lsoda = scipy.integrate.odeint(lambda y, t: [y[1], -np.sin(y[0])], [2.0, 0.0], ts,
                                   rtol=tol, atol=tol)
    err = np.max(np.abs(np.asarray(got) - ref))
    assert err < 100 * tol
    assert err <= 2 * np.max(np.abs(lsoda - ref))


def test_pytree_state_and_dtype():
    def spring(s, t, k):
        return {"x": s["v"], "v": -k * s["x"]}
    out = odeint(spring, {"x": np.array(1.0), "v": np.array(0.0)}, TS, np.float64(4.0))
    np.testing.assert_allclose(np.asarray(out["x"]), np.cos(2 * TS), atol=1e-7)
    np.testing.assert_allclose(np.asarray(out["v"]), -2 * np.sin(2 * TS), atol=1e-7)
    ys32 = odeint(lambda y, t: -y, np.ones(3, np.float32), TS, rtol=1e-5, atol=1e-5)
    assert ys32.dtype == np.float32 and ys32.shape == (4, 3)
    np.testing.assert_allclose(np.asarray(ys32)[:, 0], np.exp(-TS), rtol=1e-4)


def test_gradients_by_the_adjoint_match_finite_differences():
    """Reverse mode with respect to every input, orders 1 and 2 (forward mode is
    not defined for odeint)."""
    check_grads(lambda y0, ts, a, b: odeint(forced_oscillator, y0, ts, a, b), (Y0, TS, A, B),
                order=1, modes="rev")
    check_grads(lambda y0, a: odeint(forced_oscillator, y0, TS, a, B), (Y0, A), order=2,
                modes="rev")


def test_gradient_reaches_values_the_function_closes_over():
    check_grads(lambda a: odeint(lambda y, t: forced_oscillator(y, t, a, B), Y0, TS), (A,),
                order=1, modes="rev")


def test_pytree_and_integer_arguments_and_scalar_states():
    def decay(y, t, p, n):
        return -p["k"] * y ** n + p["c"]
    p = {"k": np.float64(0.7), "c": np.array([0.1, 0.2])}
    check_grads(lambda p: odeint(decay, np.ones(2), TS, p, 2), (p,), order=1, modes="rev")
    ys = odeint(lambda y, t: -y * y, np.float64(1.0), TS)
    assert ys.shape == (4,)
    np.testing.assert_allclose(np.asarray(ys), 1 / (1 + TS), rtol=1e-7)
    np.testing.assert_allclose(float(fgrad.grad(lambda y0: odeint(lambda y, t: -y * y, y0,
                                                                  TS)[-1])(np.float64(1.0))),
                               1 / (1 + TS[-1]) ** 2, rtol=1e-6)


def test_forward_mode_is_refused_clearly():
    with pytest.raises(TypeError, match="forward-mode.*'odeint'"):
        fgrad.jvp(lambda y: odeint(lambda y, t: -y, y, TS), (Y0,), (Y0,))


def test_jit_matches_eager_values_and_gradients():
    def run(y0, ts, a):
        return odeint(forced_oscillator, y0, ts, a, B)
    np.testing.assert_allclose(np.asarray(fgrad.jit(run)(Y0, TS, A)),
                               np.asarray(run(Y0, TS, A)), rtol=1e-13, atol=1e-13)
    loss = fgrad.grad(lambda y0, a: fnp.sum(run(y0, TS, a) ** 2), argnums=(0, 1))
    for got, want in zip(fgrad.jit(loss)(Y0, A), loss(Y0, A)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-11, atol=1e-12)


def test_vmap_over_initial_points_matches_a_loop():
    y0s = np.array([[1.0, 0.0], [0.5, 0.2], [-1.0, 2.0]])
    got = fgrad.vmap(lambda y: odeint(forced_oscillator, y, TS, A, B))(y0s)
    want = np.stack([np.asarray(odeint(forced_oscillator, y, TS, A, B)) for y in y0s])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, atol=1e-12)
    grads = fgrad.vmap(fgrad.grad(lambda y: fnp.sum(odeint(forced_oscillator, y, TS, A, B))))
    want = np.stack([np.asarray(fgrad.grad(
        lambda y: fnp.sum(odeint(forced_oscillator, y, TS, A, B)))(y)) for y in y0s])
    np.testing.assert_allclose(np.asarray(grads(y0s)), want, rtol=1e-10, atol=1e-12)


def test_per_parameter_gradients_under_vmap_and_jit_with_a_closure():
    def loss(a):
        return fnp.sum(odeint(lambda y, t: forced_oscillator(y, t, a, B), Y0, TS)[-1] ** 2)
    a_s = np.array([0.5, 1.3, 2.0])
    got = fgrad.jit(fgrad.vmap(fgrad.grad(loss)))(a_s)
    want = [float(fgrad.grad(loss)(a)) for a in a_s]
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-9)
    eps = 1e-6
    np.testing.assert_allclose(want, [(float(loss(a + eps)) - float(loss(a - eps))) / (2 * eps)
                                      for a in a_s], rtol=1e-5)


def test_step_budget_and_largest_step():
    ys = odeint(lambda y, t: -y, np.ones(2), np.array([0.0, 1.0, 60.0]), mxstep=20)
    np.testing.assert_allclose(np.asarray(ys[1]), np.exp(-1.0), rtol=1e-7)
    assert np.all(np.isnan(np.asarray(ys[2])))  # not reached within 20 steps: NaN
    ys = odeint(lambda y, t: -y, np.ones(1), np.array([0.0, 1.0, 1.0, 2.0]), hmax=0.01)
    np.testing.assert_allclose(np.asarray(ys)[:, 0], np.exp(-np.array([0, 1, 1, 2.0])),
                               rtol=1e-9)
    np.testing.assert_array_equal(np.asarray(odeint(lambda y, t: -y, np.ones(2),
                                                    np.array([0.0]))), [[1.0, 1.0]])


def test_errors():
    with pytest.raises(TypeError, match="floating-point"):
        odeint(lambda y, t: -y, np.ones(2, np.int32), TS)
    with pytest.raises(TypeError, match="return dy/dt"):
        odeint(lambda y, t: y[:1], np.ones(2), TS)
    with pytest.raises(TypeError, match="1-D array of times"):
        odeint(lambda y, t: -y, np.ones(2), 1.0)
    with pytest.raises(ValueError, match="must not decrease"):
        odeint(lambda y, t: -y, np.ones(2), np.array([0.0, 1.0, 0.5]))
    traced = fgrad.jit(lambda ts: odeint(lambda y, t: -y, np.ones(2), ts))(
        np.array([0.0, 1.0, 0.5, 2.0]))
    assert np.all(np.isnan(np.asarray(traced)[2])) and not np.any(np.isnan(np.asarray(traced)[1]))
    with pytest.raises(ValueError, match="rtol"):
        odeint(lambda y, t: -y, np.ones(2), TS, rtol=-1.0)


# ----------------------------------------------------------------------------
# trapezoid

@pytest.mark.parametrize("kwargs", [{}, {"dx": 0.3}, {"axis": 0}, {"x": "sorted"},
                                    {"x": "sorted2d"}, {"axis": 0, "x": "three"}])
def test_trapezoid_matches_scipy_and_differentiates(kwargs):
    rng = np.random.default_rng(0)
    y = rng.standard_normal((3, 5))
    kw = dict(kwargs)
    if "x" in kw:
        kw["x"] = {"sorted": np.sort(rng.standard_normal(5)),
                   "sorted2d": np.sort(rng.standard_normal((3, 5)), axis=1),
                   "three": np.array([0.0, 0.5, 2.0])}[kw["x"]]
    np.testing.assert_allclose(np.asarray(trapezoid(y, **kw)),
                               scipy.integrate.trapezoid(y, **kw), rtol=1e-13, atol=1e-14)
    if "x" in kw:
        check_grads(lambda y, x: trapezoid(y, x=x, axis=kw.get("axis", -1)), (y, kw["x"]),
                    order=2, modes=("fwd", "rev"))
    else:
        check_grads(lambda y: trapezoid(y, **kw), (y,), order=2, modes=("fwd", "rev"))


def test_trapezoid_dtypes_jit_and_vmap():
    assert float(trapezoid(np.arange(5))) == scipy.integrate.trapezoid(np.arange(5))
    assert trapezoid(np.ones(4, np.float32)).dtype == np.float32
    assert float(trapezoid(np.ones(1))) == 0.0
    ys = np.random.default_rng(1).standard_normal((4, 6))
    np.testing.assert_allclose(np.asarray(fgrad.vmap(trapezoid)(ys)),
                               [float(trapezoid(y)) for y in ys], rtol=1e-14)
    np.testing.assert_allclose(float(fgrad.jit(trapezoid)(ys[0])), float(trapezoid(ys[0])),
                               rtol=1e-14)
