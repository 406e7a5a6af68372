"""fgrad.scipy.optimize.minimize (BFGS, L-BFGS-B) against scipy.optimize.minimize
on Rosenbrock, quadratics and logistic regression, with and without bounds; the
strong Wolfe line search's conditions; result fields and status codes; jit
against eager; vmap over starting points against a Python loop; errors."""
import numpy as np
import pytest
import scipy.optimize

import fgrad
import fgrad.numpy as fnp
from fgrad._src.scipy.line_search import strong_wolfe
from fgrad.scipy.optimize import Bounds, minimize

METHODS = ["BFGS", "L-BFGS-B"]
X0 = np.array([-1.2, 1.0, 0.5, -0.3])


def rosen(x):
    return fnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


def _quadratic(n, seed):
    rng = np.random.default_rng(seed)
    m = rng.standard_normal((n, n))
    return m @ m.T + n * np.eye(n), rng.standard_normal(n)


def quad(x, A, b):
    return 0.5 * fnp.vdot(x, A @ x) - fnp.vdot(b, x)


def _logistic_data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((60, 3))
    y = (X @ np.array([1.0, -2.0, 0.5]) + 0.5 * rng.standard_normal(60) > 0).astype(float)
    return X, y


def nll(w, X, y, lam):
    z = X @ w
    return fnp.sum(fnp.logaddexp(0.0, z) - y * z) + lam * fnp.sum(w * w)


def _nll_np(w, X, y, lam):
    z = X @ w
    return np.sum(np.logaddexp(0.0, z) - y * z) + lam * np.sum(w * w)


@pytest.mark.parametrize("method", METHODS)
def test_rosenbrock_matches_scipy(method):
    got = minimize(rosen, X0, method=method)
    want = scipy.optimize.minimize(scipy.optimize.rosen, X0, jac=scipy.optimize.rosen_der,
                                   method=method)
    assert bool(got.success) and int(got.status) == 0 and want.success
    np.testing.assert_allclose(np.asarray(got.x), want.x, atol=2e-5)
    np.testing.assert_allclose(np.asarray(got.x), np.ones(4), atol=2e-5)
    assert float(got.fun) < 1e-9
    np.testing.assert_allclose(np.asarray(got.jac), scipy.optimize.rosen_der(np.asarray(got.x)),
                               rtol=1e-10, atol=1e-12)
    assert int(got.nfev) == int(got.njev) >= int(got.nit) > 0


@pytest.mark.parametrize("method", METHODS)
def test_quadratic_reaches_the_solution_of_the_linear_system(method):
    A, b = _quadratic(6, seed=1)
    got = minimize(quad, np.zeros(6), args=(A, b), method=method, tol=1e-10)
    np.testing.assert_allclose(np.asarray(got.x), np.linalg.solve(A, b), rtol=1e-7, atol=1e-9)
    if method == "BFGS":
        H = np.asarray(got.hess_inv)
        np.testing.assert_allclose(H, H.T, atol=1e-12)
        np.testing.assert_allclose(H @ A, np.eye(6), atol=0.2)  # a quasi-Newton estimate
    else:
        assert got.hess_inv is None


@pytest.mark.parametrize("method", METHODS)
def test_logistic_regression_matches_scipy(method):
    X, y = _logistic_data()
    got = minimize(nll, np.zeros(3), args=(X, y, 0.1), method=method, tol=1e-9)
    want = scipy.optimize.minimize(_nll_np, np.zeros(3), args=(X, y, 0.1), method=method,
                                   tol=1e-12)
    np.testing.assert_allclose(np.asarray(got.x), want.x, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(float(got.fun), want.fun, rtol=1e-12)


@pytest.mark.parametrize("bounds", [
    [(-0.5, 0.5), (None, 0.2), (0.0, None), (-1.0, 1.0)],
    Bounds(np.array([-2.0, 1.2, -np.inf, 0.0]), 2.0),
    scipy.optimize.Bounds([0.0, 0.0, 0.0, 0.0], [0.8, 2.0, 2.0, 2.0]),
], ids=["pairs", "Bounds", "scipy.Bounds"])
def test_bounded_rosenbrock_matches_scipy(bounds):
    got = minimize(rosen, X0, method="L-BFGS-B", bounds=bounds)
    if isinstance(bounds, Bounds):
        bounds = scipy.optimize.Bounds(np.broadcast_to(bounds.lb, 4),
                                       np.broadcast_to(bounds.ub, 4))
    want = scipy.optimize.minimize(scipy.optimize.rosen, X0, jac=scipy.optimize.rosen_der,
                                   method="L-BFGS-B", bounds=bounds)
    assert int(got.status) == 0
    np.testing.assert_allclose(np.asarray(got.x), want.x, atol=1e-5)
    np.testing.assert_allclose(float(got.fun), want.fun, rtol=1e-8, atol=1e-10)


def test_bounded_quadratic_satisfies_the_kkt_conditions():
    A, b = _quadratic(8, seed=2)
    b = 5 * b
    lb, ub = -0.3 * np.ones(8), 0.4 * np.ones(8)
    got = minimize(quad, np.zeros(8), args=(A, b), method="L-BFGS-B", tol=1e-12,
                   bounds=Bounds(lb, ub))
    x, g = np.asarray(got.x), np.asarray(got.jac)
    assert np.all(x >= lb) and np.all(x <= ub)
    assert np.any(x == lb) or np.any(x == ub)
    np.testing.assert_allclose(np.clip(x - g, lb, ub) - x, 0.0, atol=1e-6)
    want = scipy.optimize.minimize(lambda v: 0.5 * v @ A @ v - b @ v, np.zeros(8),
                                   jac=lambda v: A @ v - b, method="L-BFGS-B",
                                   bounds=list(zip(lb, ub)), tol=1e-12)
    np.testing.assert_allclose(x, want.x, atol=1e-6)


def test_bounds_stay_exact_and_hold_the_iterates():
    got = minimize(rosen, X0, method="L-BFGS-B", bounds=Bounds([0.0] * 4, [0.3] * 4))
    x = np.asarray(got.x)
    assert np.all(x >= 0.0) and np.all(x <= 0.3) and x[0] == 0.3


def test_start_outside_the_box_is_clipped():
    got = minimize(lambda x: fnp.sum((x - 3.0) ** 2), np.array([5.0, -5.0]),
                   method="L-BFGS-B", bounds=[(0.0, 1.0), (0.0, 1.0)])
    np.testing.assert_array_equal(np.asarray(got.x), [1.0, 1.0])
    assert int(got.status) == 0


def test_strong_wolfe_conditions_hold():
    def phi(a):
        return (a - 2.0) ** 4 - 3 * a + fnp.cos(3 * a)

    def evaluate(alpha):
        x = fnp.reshape(alpha, (1,))
        f, g = fgrad.value_and_grad(lambda v: phi(v[0]))(x)
        return f, g, g[0], x

    zero = np.zeros(1)
    f0, g0, d0, _ = evaluate(np.float64(0.0))
    for alpha0 in (1e-3, 1.0, 50.0):
        r = strong_wolfe(evaluate, f0, g0, zero, d0, np.float64(alpha0), c1=1e-4, c2=0.5)
        a = float(r.alpha)
        assert not bool(r.failed) and a > 0
        a = np.float64(a)
        assert float(phi(a)) <= float(f0) + 1e-4 * a * float(d0)
        assert abs(float(fgrad.grad(phi)(a))) <= 0.5 * abs(float(d0))
        np.testing.assert_allclose(float(r.fun), float(phi(a)), rtol=1e-14)
        assert int(r.nfev) >= 1


def test_status_codes_and_messages():
    hit_limit = minimize(rosen, X0, method="BFGS", options={"maxiter": 3})
    assert int(hit_limit.status) == 1 and not bool(hit_limit.success)
    assert int(hit_limit.nit) == 3 and "Maximum number" in hit_limit.message
    limited = minimize(rosen, X0, method="L-BFGS-B", options={"maxfun": 5})
    assert int(limited.status) == 1 and int(limited.nfev) >= 5
    nan = minimize(lambda x: fnp.sum(fnp.log(x)), np.array([-1.0, 1.0]), method="BFGS")
    assert int(nan.status) == 3 and "NaN" in nan.message

    @fgrad.custom_jvp
    def lying(x):
        return fnp.sum(x ** 2)

    @lying.defjvp
    def _lying_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return lying(x), -fnp.vdot(2 * x, t)  # the gradient points uphill

    for method in METHODS:
        stuck = minimize(lying, np.array([1.0, 2.0]), method=method)
        assert int(stuck.status) == 2 and "line search" in stuck.message
        np.testing.assert_array_equal(np.asarray(stuck.x), [1.0, 2.0])
    done = minimize(rosen, np.ones(4), method="BFGS")
    assert int(done.status) == 0 and int(done.nit) == 0 and int(done.nfev) == 1


def test_a_value_computed_in_another_dtype_takes_x0s():
    def f(x):
        return fnp.sum((x.astype(np.float32) - 1.5) ** 2)
    for method in METHODS:
        got = minimize(f, np.zeros(3), method=method)
        assert got.fun.dtype == got.x.dtype == np.float64 and int(got.status) == 0
        np.testing.assert_allclose(np.asarray(got.x), 1.5, rtol=1e-6)


def test_float32_stays_float32():
    for method in METHODS:
        got = minimize(rosen, X0[:3].astype(np.float32), method=method)
        assert got.x.dtype == np.float32 and got.fun.dtype == np.float32
        np.testing.assert_allclose(np.asarray(got.x), np.ones(3), atol=2e-3)


@pytest.mark.parametrize("method", METHODS)
def test_jit_matches_eager_and_takes_traced_args(method):
    X, y = _logistic_data(1)
    run = lambda w0, X, y: minimize(nll, w0, args=(X, y, 0.1), method=method)  # noqa: E731
    eager, jitted = run(np.zeros(3), X, y), fgrad.jit(run)(np.zeros(3), X, y)
    np.testing.assert_allclose(np.asarray(jitted.x), np.asarray(eager.x), rtol=1e-10,
                               atol=1e-12)
    assert int(jitted.status) == int(eager.status) == 0
    assert abs(int(jitted.nit) - int(eager.nit)) <= 1


@pytest.mark.parametrize("method", METHODS)
def test_vmap_over_starting_points_matches_a_loop(method):
    x0s = np.array([[-1.2, 1.0, 0.5], [0.0, 0.0, 0.0], [2.0, -1.0, 1.0]])
    kw = ({"bounds": [(-2.0, 2.0)] * 3, "options": {"maxcor": 4}} if method == "L-BFGS-B"
          else {})
    batched = fgrad.vmap(lambda x: minimize(rosen, x, method=method, **kw))(x0s)
    for i, x0 in enumerate(x0s):
        one = minimize(rosen, x0, method=method, **kw)
        np.testing.assert_allclose(np.asarray(batched.x[i]), np.asarray(one.x), rtol=1e-12,
                                   atol=1e-14)
        for field in ("nit", "nfev", "status"):
            assert int(getattr(batched, field)[i]) == int(getattr(one, field))


def test_vmap_over_bounds_matches_a_loop():
    uppers = np.array([0.3, 0.8, 2.0])
    def run(ub):
        return minimize(rosen, X0, method="L-BFGS-B", bounds=Bounds(-2.0, ub),
                        options={"maxcor": 4})
    batched = fgrad.vmap(run)(uppers)
    for i, ub in enumerate(uppers):
        np.testing.assert_allclose(np.asarray(batched.x[i]), np.asarray(run(ub).x), rtol=1e-12,
                                   atol=1e-14)
        assert np.all(np.asarray(batched.x[i]) <= ub)


def test_errors():
    with pytest.raises(ValueError, match="does not take bounds"):
        minimize(rosen, X0, method="BFGS", bounds=[(0, 1)] * 4)
    with pytest.raises(ValueError, match="unknown option"):
        minimize(rosen, X0, method="L-BFGS-B", options={"gtoll": 1e-3})
    with pytest.raises(ValueError, match="method must be"):
        minimize(rosen, X0, method="Nelder-Mead")
    with pytest.raises(TypeError, match="x0 must be 1-D"):
        minimize(rosen, np.ones((2, 2)), method="BFGS")
    with pytest.raises(ValueError, match="lower bound exceeds"):
        minimize(rosen, X0, method="L-BFGS-B", bounds=Bounds(1.0, 0.0))
    with pytest.raises(ValueError, match=r"\(min, max\) pairs"):
        minimize(rosen, X0, method="L-BFGS-B", bounds=[(0, 1)] * 3)
    with pytest.raises(TypeError, match="concrete status"):
        fgrad.vmap(lambda x: minimize(rosen, x, method="BFGS"))(np.ones((2, 4))).message
