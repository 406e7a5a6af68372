"""jacfwd, jacrev and hessian: agreement with each other and with float64
central differences on non-square Jacobians with pytree inputs and outputs,
argnums, has_aux, JAX's layout (output structure outside, input structure
inside, leaf shape out.shape + in.shape), and Hessians of Rosenbrock and of the
Helmholtz free energy from the AD survey (Baydin et al., 2018)."""
import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp

f64 = np.float64


def _np(x):
    return np.asarray(x)


def _close(a, b, rtol=1e-11, atol=1e-12):
    """Same pytree structure, same leaf shapes, leaves close."""
    assert fgrad.tree.structure(a) == fgrad.tree.structure(b), (
        fgrad.tree.structure(a), fgrad.tree.structure(b))
    for x, y in zip(fgrad.tree.leaves(a), fgrad.tree.leaves(b)):
        x, y = _np(x), _np(y)
        assert x.shape == y.shape, (x.shape, y.shape)
        np.testing.assert_allclose(x, y, rtol=rtol, atol=atol)


def fd_jacobian(f, args, argnums=0, eps=1e-6):
    """Central-difference Jacobian of f at args in JAX's layout.

    For every output leaf (outer structure) a tree shaped like the
    differentiated argument(s) (inner structure) whose leaves have shape
    out_leaf.shape + in_leaf.shape. The step is scaled by max(1, |x_i|).
    """
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    args = [fgrad.tree.map(lambda x: np.array(x, np.float64), a) for a in args]
    diff = [args[i] for i in nums]
    in_leaves, in_tree = fgrad.tree.flatten(diff)

    def call(leaves):
        new = list(args)
        for i, sub in zip(nums, fgrad.tree.unflatten(in_tree, leaves)):
            new[i] = sub
        return fgrad.tree.map(lambda y: np.array(y, np.float64), f(*new))

    out = call(in_leaves)
    out_leaves, out_tree = fgrad.tree.flatten(out)
    # blocks[j][i]: d out_leaf j / d in_leaf i, shape out_j.shape + in_i.shape
    blocks = [[np.zeros(o.shape + x.shape) for x in in_leaves] for o in out_leaves]
    for i, x in enumerate(in_leaves):
        for idx in np.ndindex(*x.shape):
            h = eps * max(1.0, abs(float(x[idx])))
            plus = [np.array(v) for v in in_leaves]
            minus = [np.array(v) for v in in_leaves]
            plus[i][idx] += h
            minus[i][idx] -= h
            d = [(p - m) / (2 * h) for p, m in
                 zip(fgrad.tree.leaves(call(plus)), fgrad.tree.leaves(call(minus)))]
            for j, dj in enumerate(d):
                blocks[j][i][(Ellipsis,) + idx] = dj
    per_out = []
    for row in blocks:
        trees = fgrad.tree.unflatten(in_tree, row)
        per_out.append(trees[0] if single else tuple(trees))
    return fgrad.tree.unflatten(out_tree, per_out)


# ----------------------------------------------------------------------------
# Non-square Jacobians with pytree inputs and outputs

def pytree_fun(p):
    """dict(a=(3,), b=(2, 2)) -> (vector(4), scalar); no matmul or indexing."""
    a, b = p["a"], p["b"]
    v = fnp.sin(fnp.reshape(b, (4,))) * fnp.sum(a ** 2) + fnp.prod(fnp.cos(a))
    s = fnp.sum(a * fnp.exp(fnp.sum(b) * 0.3)) + fnp.sum(fnp.tanh(b) ** 3)
    return v, s


@pytest.fixture
def tree_point(rng):
    return dict(a=rng.standard_normal(3), b=rng.standard_normal((2, 2)))


@pytest.mark.parametrize("jac", [fgrad.jacfwd, fgrad.jacrev])
def test_pytree_jacobian_matches_finite_differences(jac, tree_point):
    got = jac(pytree_fun)(tree_point)
    _close(got, fd_jacobian(pytree_fun, (tree_point,)), rtol=1e-6, atol=1e-8)


def test_jacfwd_equals_jacrev_pytree(tree_point):
    _close(fgrad.jacfwd(pytree_fun)(tree_point), fgrad.jacrev(pytree_fun)(tree_point))


@pytest.mark.parametrize("jac", [fgrad.jacfwd, fgrad.jacrev])
def test_jax_layout_explicitly(jac, tree_point):
    """Output structure outside, input structure inside, out.shape + in.shape."""
    j = jac(pytree_fun)(tree_point)
    assert isinstance(j, tuple) and len(j) == 2
    jv, js = j
    assert isinstance(jv, dict) and set(jv) == {"a", "b"}
    assert isinstance(js, dict) and set(js) == {"a", "b"}
    assert jv["a"].shape == (4, 3)
    assert jv["b"].shape == (4, 2, 2)
    assert js["a"].shape == (3,)
    assert js["b"].shape == (2, 2)
    # Entries mean d out[i] / d in[k]: check two of them by hand.
    a, b = tree_point["a"], tree_point["b"]
    # d v[i] / d b[r, c] = cos(b.ravel()[i]) * sum(a^2) if i == 2r + c else 0
    expected_vb = np.zeros((4, 2, 2))
    for i in range(4):
        expected_vb[i].flat[i] = np.cos(b.ravel()[i]) * np.sum(a ** 2)
    _close(jv["b"], expected_vb)
    # d s / d a = exp(0.3 * sum(b))
    _close(js["a"], np.full(3, np.exp(0.3 * b.sum())))


@pytest.mark.parametrize("jac", [fgrad.jacfwd, fgrad.jacrev])
def test_matrix_to_matrix_layout(jac, rng):
    x = rng.standard_normal((2, 3))

    def f(x):
        return fnp.sin(fnp.reshape(fnp.transpose(x), (1, 6, 1)) * 2.0)

    j = jac(f)(x)
    assert j.shape == (1, 6, 1, 2, 3)
    _close(j, fd_jacobian(f, (x,)), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("jac", [fgrad.jacfwd, fgrad.jacrev])
def test_scalar_in_scalar_out(jac):
    f = lambda x: fnp.sin(x) * x ** 2  # noqa: E731
    j = jac(f)(f64(0.7))
    assert j.shape == ()
    assert float(j) == pytest.approx(np.cos(0.7) * 0.49 + 2 * 0.7 * np.sin(0.7), rel=1e-14)
    # A Python float is accepted (weakly typed: float32, as in JAX without x64).
    j32 = jac(f)(0.7)
    assert j32.shape == () and j32.dtype == np.float32
    assert float(j32) == pytest.approx(float(j), rel=1e-6)


@pytest.mark.parametrize("jac", [fgrad.jacfwd, fgrad.jacrev])
def test_scalar_in_vector_out_and_vector_in_scalar_out(jac, rng):
    x = rng.standard_normal(4)
    j = jac(lambda t: fnp.sin(x * t))(f64(0.3))
    assert j.shape == (4,)
    _close(j, x * np.cos(x * 0.3))
    j = jac(lambda v: fnp.sum(v ** 3))(x)
    assert j.shape == (4,)
    _close(j, 3 * x ** 2)


@pytest.mark.parametrize("jac", [fgrad.jacfwd, fgrad.jacrev])
def test_argnums_int(jac, rng):
    x, y = rng.standard_normal(3), rng.standard_normal(2)

    def f(x, y):
        return fnp.reshape(fnp.sin(fnp.reshape(x, (3, 1)) * fnp.reshape(y, (1, 2))), (6,))

    j1 = jac(f, argnums=1)(x, y)
    assert j1.shape == (6, 2)
    _close(j1, fd_jacobian(f, (x, y), argnums=1), rtol=1e-6, atol=1e-8)
    _close(jac(f, argnums=-1)(x, y), j1)
    j0 = jac(f)(x, y)
    assert j0.shape == (6, 3)
    _close(j0, fd_jacobian(f, (x, y), argnums=0), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("jac", [fgrad.jacfwd, fgrad.jacrev])
def test_argnums_tuple(jac, rng, tree_point):
    w = rng.standard_normal(2)

    def f(p, c, w):
        v, s = pytree_fun(p)
        return dict(v=v * c, s=s * fnp.sum(w ** 2) * c)

    args = (tree_point, f64(1.5), w)
    j = jac(f, argnums=(0, 2))(*args)
    # Outer: the output dict; inner: a tuple over argnums.
    assert set(j) == {"v", "s"}
    assert isinstance(j["v"], tuple) and len(j["v"]) == 2
    assert j["v"][0]["a"].shape == (4, 3) and j["v"][0]["b"].shape == (4, 2, 2)
    assert j["v"][1].shape == (4, 2)
    assert j["s"][0]["b"].shape == (2, 2) and j["s"][1].shape == (2,)
    _close(j, fd_jacobian(f, args, argnums=(0, 2)), rtol=1e-6, atol=1e-8)
    # A one-element tuple still gives a tuple.
    j1 = jac(f, argnums=(1,))(*args)
    assert isinstance(j1["v"], tuple) and j1["v"][0].shape == (4,)
    _close(j1, fd_jacobian(f, args, argnums=(1,)), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("jac", [fgrad.jacfwd, fgrad.jacrev])
def test_has_aux(jac, tree_point):
    def f(p):
        v, s = pytree_fun(p)
        return v, dict(s=s, n=fnp.sum(p["a"]))

    j, aux = jac(f, has_aux=True)(tree_point)
    _close(j, fgrad.jacfwd(lambda p: pytree_fun(p)[0])(tree_point))
    _, s = pytree_fun(tree_point)
    _close(aux, dict(s=s, n=tree_point["a"].sum()))


@pytest.mark.parametrize("jac", [fgrad.jacfwd, fgrad.jacrev])
def test_kwargs_are_passed_through(jac, rng):
    x = rng.standard_normal(3)
    f = lambda x, *, scale: fnp.sin(x) * scale  # noqa: E731
    _close(jac(f)(x, scale=2.0), np.diag(2 * np.cos(x)))


@pytest.mark.parametrize("jac", [fgrad.jacfwd, fgrad.jacrev])
def test_constant_output_has_zero_jacobian(jac, rng):
    x = rng.standard_normal(3)
    j = jac(lambda x: (fnp.ones(2), x * 0.0 + 1.0))(x)
    _close(j, (np.zeros((2, 3)), np.zeros((3, 3))))


@pytest.mark.parametrize("jac", [fgrad.jacfwd, fgrad.jacrev])
def test_argument_the_output_does_not_depend_on(jac, rng):
    x, y = rng.standard_normal(3), rng.standard_normal(2)
    jx, jy = jac(lambda x, y: fnp.sin(x), argnums=(0, 1))(x, y)
    _close(jx, np.diag(np.cos(x)))
    _close(jy, np.zeros((3, 2)))


@pytest.mark.parametrize("jac", [fgrad.jacfwd, fgrad.jacrev])
def test_integer_input_is_an_error(jac):
    with pytest.raises(TypeError):
        jac(lambda x: x * 2.0)(np.arange(3))


def test_jacobians_compose_with_vmap(rng):
    xs = rng.standard_normal((4, 3))
    f = lambda x: fnp.sin(x) * fnp.sum(x ** 2)  # noqa: E731
    per = fgrad.vmap(fgrad.jacrev(f))(xs)
    assert per.shape == (4, 3, 3)
    _close(per, np.stack([_np(fgrad.jacfwd(f)(x)) for x in xs]))
    _close(fgrad.vmap(fgrad.jacfwd(f))(xs), per)


def test_jacobian_float32_dtype(rng):
    x = rng.standard_normal(3).astype(np.float32)
    f = lambda x: fnp.sin(x) * 2.0  # noqa: E731
    for jac in (fgrad.jacfwd, fgrad.jacrev, fgrad.hessian):
        out = jac(lambda x: fnp.sum(f(x)) if jac is fgrad.hessian else f(x))(x)
        assert out.dtype == np.float32, jac


# ----------------------------------------------------------------------------
# Hessians

def rosenbrock(x):
    return fnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def rosenbrock_hessian_exact(x):
    n = x.size
    h = np.zeros((n, n))
    for i in range(n - 1):
        h[i, i] += 1200 * x[i] ** 2 - 400 * x[i + 1] + 2
        h[i + 1, i + 1] += 200
        h[i, i + 1] -= 400 * x[i]
        h[i + 1, i] -= 400 * x[i]
    return h


R_GAS, TEMP = 8.314, 300.0


def helmholtz(x, b, A):
    """Helmholtz free energy of a mixture (Baydin et al., "Automatic
    differentiation in machine learning: a survey", 2018), written with matmul."""
    bx = b @ x
    return (R_GAS * TEMP * fnp.sum(x * fnp.log(x / (1.0 - bx)))
            - (x @ A @ x) / (np.sqrt(8.0) * bx)
            * fnp.log((1.0 + (1.0 + np.sqrt(2.0)) * bx) / (1.0 + (1.0 - np.sqrt(2.0)) * bx)))


def helmholtz_elementwise(x, b, A):
    """The same with products and sums only (no dot_general)."""
    n = b.shape[0]
    bx = fnp.sum(b * x)
    xax = fnp.sum(fnp.reshape(x, (n, 1)) * A * fnp.reshape(x, (1, n)))
    return (R_GAS * TEMP * fnp.sum(x * fnp.log(x / (1.0 - bx)))
            - xax / (np.sqrt(8.0) * bx)
            * fnp.log((1.0 + (1.0 + np.sqrt(2.0)) * bx) / (1.0 + (1.0 - np.sqrt(2.0)) * bx)))


def helmholtz_problem(n, seed=0):
    rng = np.random.default_rng(seed)
    b = rng.uniform(0.1, 1.0, n)
    a = rng.standard_normal((n, n))
    A = (a + a.T) / 2
    x = rng.uniform(0.1, 1.0, n)
    x *= 0.5 / (b @ x)   # bᵀx = 0.5 < 1
    return x, b, A


def fd_of_gradient(f, x, eps=1e-5):
    """Central differences of the (reverse-mode) gradient, one column per coordinate."""
    g = fgrad.grad(f)
    n = x.size
    h = np.zeros((n, n))
    for j in range(n):
        step = eps * max(1.0, abs(x[j]))
        e = np.zeros(n)
        e[j] = step
        h[:, j] = (_np(g(x + e)) - _np(g(x - e))) / (2 * step)
    return h


def _check_hessian(f, x, rtol):
    hess = _np(fgrad.hessian(f)(x))
    n = x.size
    assert hess.shape == (n, n)
    np.testing.assert_allclose(hess, hess.T, rtol=1e-12, atol=1e-12 * np.abs(hess).max())
    fd = fd_of_gradient(f, x)
    np.testing.assert_allclose(hess, fd, rtol=rtol, atol=rtol * np.abs(hess).max())
    return hess


def test_rosenbrock_hessian(rng):
    x = rng.uniform(-1.5, 1.5, 10)
    hess = _check_hessian(rosenbrock, x, rtol=1e-7)
    np.testing.assert_allclose(hess, rosenbrock_hessian_exact(x), rtol=1e-13, atol=1e-10)


@pytest.mark.parametrize("n", [8, 20])
def test_helmholtz_hessian(n):
    x, b, A = helmholtz_problem(n)
    assert b @ x < 1
    f = lambda x: helmholtz(x, b, A)  # noqa: E731
    hess = _check_hessian(f, x, rtol=1e-6)
    _close(hess, fgrad.hessian(lambda x: helmholtz_elementwise(x, b, A))(x), rtol=1e-10)


@pytest.mark.parametrize("n", [8, 20])
def test_helmholtz_hessian_elementwise(n):
    x, b, A = helmholtz_problem(n, seed=1)
    _check_hessian(lambda x: helmholtz_elementwise(x, b, A), x, rtol=1e-6)


@pytest.mark.parametrize("name", ["rosenbrock", "helmholtz", "helmholtz_elementwise"])
def test_hessian_equals_nested_jacobians(name, rng):
    if name == "rosenbrock":
        f, x = rosenbrock, rng.uniform(-1.5, 1.5, 10)
    else:
        x, b, A = helmholtz_problem(8, seed=2)
        fun = helmholtz if name == "helmholtz" else helmholtz_elementwise
        f = lambda x: fun(x, b, A)  # noqa: E731
    hess = fgrad.hessian(f)(x)
    rtol = 1e-10
    _close(fgrad.jacrev(fgrad.jacrev(f))(x), hess, rtol=rtol, atol=1e-10)
    _close(fgrad.jacfwd(fgrad.jacfwd(f))(x), hess, rtol=rtol, atol=1e-10)
    _close(fgrad.jacrev(fgrad.jacfwd(f))(x), hess, rtol=rtol, atol=1e-10)
    _close(fgrad.jacfwd(fgrad.grad(f))(x), hess, rtol=rtol, atol=1e-10)


def test_hessian_pytree_and_argnums(rng, tree_point):
    def f(p, w):
        v, s = pytree_fun(p)
        return fnp.sum(v * w) + s

    w = rng.standard_normal(4)
    h = fgrad.hessian(f)(tree_point, w)
    # Input structure twice: h[k1][k2] has shape in1.shape + in2.shape.
    assert h["a"]["a"].shape == (3, 3)
    assert h["a"]["b"].shape == (3, 2, 2)
    assert h["b"]["a"].shape == (2, 2, 3)
    assert h["b"]["b"].shape == (2, 2, 2, 2)
    _close(h["a"]["b"], np.transpose(_np(h["b"]["a"]), (2, 0, 1)), rtol=1e-12, atol=1e-12)
    _close(h, fd_jacobian(fgrad.grad(f), (tree_point, w)), rtol=1e-6, atol=1e-7)
    # argnums tuple: nested tuples ((H00, H01), (H10, H11)).
    x, y = rng.standard_normal(3), rng.standard_normal(2)
    g = lambda x, y: fnp.sum(fnp.sin(x) ** 2) * fnp.sum(y ** 3)  # noqa: E731
    hh = fgrad.hessian(g, argnums=(0, 1))(x, y)
    assert [[b.shape for b in row] for row in hh] == [[(3, 3), (3, 2)], [(2, 3), (2, 2)]]
    _close(hh, fd_jacobian(fgrad.grad(g, argnums=(0, 1)), (x, y), argnums=(0, 1)),
           rtol=1e-6, atol=1e-7)
    _close(hh[0][1], _np(hh[1][0]).T, rtol=1e-12, atol=1e-12)


def test_hessian_scalar_and_has_aux():
    f = lambda x: (x ** 4 + fnp.sin(x), x * 2)  # noqa: E731
    h, aux = fgrad.hessian(f, has_aux=True)(f64(0.5))
    assert h.shape == ()
    assert float(h) == pytest.approx(12 * 0.25 - np.sin(0.5), rel=1e-14)
    assert float(aux) == 1.0
