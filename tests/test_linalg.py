"""fgrad.lax.linalg's primitives and fgrad.numpy.linalg: values against NumPy,
derivatives (check_grads, order 2, forward and reverse, float64, batched and
not), vmap against a loop, jit against eager (same bits: the same LAPACK call
runs), the classic identities, and what degenerate inputs give."""
import numpy as np
import pytest
import scipy.linalg as sla

import fgrad
import fgrad.numpy as fnp
from fgrad.lax import linalg as lax_linalg
from fgrad.test_util import check_grads

L = fnp.linalg


def _rng(seed=0):
    return np.random.default_rng(seed)


def spd(n, *batch, seed=0):
    """Well-conditioned symmetric positive definite matrices."""
    a = _rng(seed).standard_normal(batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def general(m, n, *batch, seed=0):
    """Well-conditioned matrices (square ones have a strong diagonal)."""
    a = _rng(seed).standard_normal(batch + (m, n))
    return a + (max(m, n) * np.eye(m, n) if m == n else 0)


def with_singular_values(m, n, *batch, seed=0):
    """Matrices with well-separated singular values k + 1, k, ..., 2."""
    rng = _rng(seed)
    k = min(m, n)
    out = []
    for _ in range(int(np.prod(batch))):
        u, _ = np.linalg.qr(rng.standard_normal((m, m)))
        v, _ = np.linalg.qr(rng.standard_normal((n, n)))
        out.append(u[:, :k] * (np.arange(k, 0, -1) + 1.0) @ v[:, :k].T)
    return np.array(out).reshape(batch + (m, n))


def symmetric_separated(n, *batch, seed=0):
    """Symmetric matrices with eigenvalues 1, 2, ..., n (well separated)."""
    rng = _rng(seed)
    out = []
    for _ in range(int(np.prod(batch))):
        q, _ = np.linalg.qr(rng.standard_normal((n, n)))
        out.append(q * np.arange(1.0, n + 1) @ q.T)
    return np.array(out).reshape(batch + (n, n))


def close(got, want, rtol=1e-10, atol=1e-12):
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def same_bits(a, b):
    for x, y in zip(fgrad.tree.leaves(a), fgrad.tree.leaves(b)):
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == y.dtype and x.shape == y.shape
        assert x.tobytes() == y.tobytes()


def loop(f, x, *rest):
    return np.stack([np.asarray(f(x[i], *rest)) for i in range(x.shape[0])])


# ----------------------------------------------------------------------------
# The primitives (fgrad.lax.linalg)

def test_primitives_match_lapack_through_numpy():
    a = general(4, 4, 2)
    s = spd(4, 2)
    close(lax_linalg.cholesky(s), np.linalg.cholesky(s), 0, 0)
    q, r = lax_linalg.qr(general(5, 3, 2), full_matrices=False)
    qn, rn = np.linalg.qr(general(5, 3, 2))
    close(q, qn), close(r, rn)
    v, w = lax_linalg.eigh(s)
    wn, vn = np.linalg.eigh(s)
    close(w, wn), close(np.abs(v), np.abs(vn))
    for m, n, full in [(5, 3, True), (3, 5, False), (4, 4, True)]:
        x = general(m, n, 2)
        u, sv, vt = lax_linalg.svd(x, full_matrices=full)
        un, svn, vtn = np.linalg.svd(x, full_matrices=full)
        close(sv, svn), close(np.abs(u), np.abs(un)), close(np.abs(vt), np.abs(vtn))
    lu, pivots, perm = lax_linalg.lu(a)
    for i in range(2):
        l_ = np.tril(np.asarray(lu[i]), -1) + np.eye(4)
        close(a[i][np.asarray(perm[i])], l_ @ np.triu(np.asarray(lu[i])))
    assert pivots.dtype == np.int32 and perm.dtype == np.int32


@pytest.mark.parametrize("m,n", [(5, 3), (3, 5), (4, 4)])
def test_lu_rectangular_reconstructs(m, n):
    a = general(m, n, seed=1)
    lu, _, perm = lax_linalg.lu(a)
    k = min(m, n)
    lu = np.asarray(lu)
    l_ = np.tril(lu[:, :k], -1) + np.eye(m, k)
    close(a[np.asarray(perm)], l_ @ np.triu(lu[:k]))


@pytest.mark.parametrize("kw", [dict(left_side=True, lower=True),
                                dict(left_side=True, lower=False, transpose_a=True),
                                dict(left_side=False, lower=True, unit_diagonal=True),
                                dict(left_side=False, lower=False, transpose_a=True)])
def test_triangular_solve_values(kw):
    a = general(4, 4, 2, seed=2)
    b = _rng(3).standard_normal((2, 4, 3) if kw["left_side"] else (2, 3, 4))
    t = np.tril(a) if kw["lower"] else np.triu(a)
    if kw.get("unit_diagonal"):
        t = t * (1 - np.eye(4)) + np.eye(4)
    op = np.swapaxes(t, -1, -2) if kw.get("transpose_a") else t
    want = np.linalg.solve(op, b) if kw["left_side"] else np.swapaxes(
        np.linalg.solve(np.swapaxes(op, -1, -2), np.swapaxes(b, -1, -2)), -1, -2)
    close(lax_linalg.triangular_solve(a, b, **kw), want, 1e-9)


def test_not_positive_definite_gives_nan_in_eager_and_jit():
    a = spd(3, 3)
    a[1] = -a[1]
    for f in (lax_linalg.cholesky, fgrad.jit(lax_linalg.cholesky)):
        out = np.asarray(f(a))
        assert np.isnan(out[1]).all()
        assert np.isfinite(out[[0, 2]]).all()


PRIMITIVE_FUNS = {
    "cholesky": (lax_linalg.cholesky, lambda *b: spd(3, *b)),
    "triangular_solve": (lambda a: lax_linalg.triangular_solve(a, a[..., :2, :], lower=True,
                                                               transpose_a=True),
                         lambda *b: general(3, 3, *b)),
    "lu": (lambda a: lax_linalg.lu(a)[0], lambda *b: general(4, 3, *b)),
    "inv": (lax_linalg.inv, lambda *b: general(3, 3, *b)),
    "qr_reduced": (lambda a: lax_linalg.qr(a, full_matrices=False), lambda *b: general(4, 3, *b)),
    "qr_wide": (lambda a: lax_linalg.qr(a, full_matrices=True), lambda *b: general(3, 4, *b)),
    "eigh": (lambda a: lax_linalg.eigh(a), lambda *b: symmetric_separated(3, *b)),
    "eigh_upper": (lambda a: lax_linalg.eigh(a, lower=False),
                   lambda *b: symmetric_separated(3, *b)),
    "svd_tall": (lambda a: lax_linalg.svd(a, full_matrices=False),
                 lambda *b: with_singular_values(4, 3, *b)),
    "svd_wide": (lambda a: lax_linalg.svd(a, full_matrices=False),
                 lambda *b: with_singular_values(3, 4, *b)),
    "svd_square_full": (lambda a: lax_linalg.svd(a), lambda *b: with_singular_values(3, 3, *b)),
    "svdvals": (lambda a: lax_linalg.svd(a, compute_uv=False),
                lambda *b: with_singular_values(4, 3, *b)),
}


@pytest.mark.parametrize("name", PRIMITIVE_FUNS)
@pytest.mark.parametrize("batch", [(), (2,)])
def test_primitive_grads(name, batch):
    f, make = PRIMITIVE_FUNS[name]
    check_grads(f, (make(*batch),), order=2)


def test_triangular_solve_grads_in_both_operands():
    a = general(3, 3, 2, seed=4)
    b = _rng(5).standard_normal((2, 3, 2))
    for kw in [dict(left_side=True, lower=True),
               dict(left_side=True, lower=False, transpose_a=True, unit_diagonal=True)]:
        check_grads(lambda a, b: lax_linalg.triangular_solve(a, b, **kw), (a, b), order=2)
    check_grads(lambda a, b: lax_linalg.triangular_solve(a, b, lower=True), (a[0], b[0].T),
                order=2)


@pytest.mark.parametrize("name", PRIMITIVE_FUNS)
def test_primitive_vmap_and_jit(name):
    f, make = PRIMITIVE_FUNS[name]
    x = make(3)
    want = [loop(lambda xi, k=k: fgrad.tree.leaves(f(xi))[k], x)
            for k in range(len(fgrad.tree.leaves(f(x[0]))))]
    for got, w in zip(fgrad.tree.leaves(fgrad.vmap(f)(x)), want):
        np.testing.assert_array_equal(got, w)
    same_bits(fgrad.jit(f)(x), f(x))


def test_float32():
    a = spd(4, 2).astype(np.float32)
    l = lax_linalg.cholesky(a)
    assert l.dtype == np.float32
    close(l, np.linalg.cholesky(a), 1e-5, 1e-5)
    s = lax_linalg.svd(a, compute_uv=False)
    assert s.dtype == np.float32


def test_primitive_shape_errors():
    with pytest.raises(fgrad.FgradTypeError, match="square"):
        lax_linalg.cholesky(np.ones((2, 3)))
    with pytest.raises(fgrad.FgradTypeError, match="supports float32, float64, complex64"):
        lax_linalg.eigh(np.ones((2, 2), np.int32))
    with pytest.raises(fgrad.FgradTypeError, match="batch dims"):
        lax_linalg.triangular_solve(np.eye(2), np.ones((3, 2, 2)), left_side=True)


# ----------------------------------------------------------------------------
# Degenerate inputs: NaN, never a finite wrong derivative

degenerate = pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning",
                                        "ignore:divide by zero:RuntimeWarning")


@degenerate
def test_eigh_repeated_eigenvalues_give_nan_eigenvector_derivatives():
    a = np.diag([1.0, 1.0, 2.0])
    da = _rng(6).standard_normal((3, 3))
    da = da + da.T
    (_, w), (dv, dw) = fgrad.jvp(lambda a: lax_linalg.eigh(a), (a,), (da,))
    assert np.isfinite(np.asarray(dw)).all()      # eigenvalues: fine
    assert not np.isfinite(np.asarray(dv)).all()  # eigenvectors: not defined
    g = fgrad.grad(lambda a: fnp.sum(lax_linalg.eigh(a)[0][:, 0]))(a)
    assert not np.isfinite(np.asarray(g)).all()


@degenerate
def test_svd_repeated_singular_values_give_nan_vector_derivatives():
    a = np.diag([2.0, 2.0, 1.0])
    da = _rng(7).standard_normal((3, 3))
    _, (du, ds, dvt) = fgrad.jvp(lambda a: lax_linalg.svd(a, compute_uv=True), (a,), (da,))
    assert np.isfinite(np.asarray(ds)).all()
    assert not np.isfinite(np.asarray(du)).all()


def test_complete_decomposition_derivatives_raise():
    with pytest.raises(NotImplementedError, match="full_matrices=False"):
        fgrad.jvp(lambda a: lax_linalg.svd(a), (general(4, 3),), (general(4, 3),))
    with pytest.raises(NotImplementedError, match="reduced"):
        fgrad.jvp(lambda a: lax_linalg.qr(a, True), (general(4, 3),), (general(4, 3),))


@degenerate
def test_singular_matrix_inverse_is_not_finite():
    a = np.array([[1.0, 2.0], [2.0, 4.0]])
    assert not np.isfinite(np.asarray(L.inv(a))).all()
    assert float(L.det(a)) == 0.0
    sign, logdet = L.slogdet(a)
    assert float(sign) == 0.0 and float(logdet) == -np.inf
    # det's derivative is the adjugate's (cofactors), finite here (it was NaN)
    np.testing.assert_allclose(np.asarray(fgrad.grad(L.det)(a)), [[4.0, -2.0], [-2.0, 1.0]])


# ----------------------------------------------------------------------------
# fgrad.numpy.linalg: values against NumPy

def test_values_against_numpy():
    a = general(4, 4, 2)
    b = _rng(1).standard_normal((2, 4, 3))
    v = _rng(2).standard_normal(4)
    s = spd(4, 2)
    close(L.solve(a, b), np.linalg.solve(a, b))
    close(L.solve(a[0], v), np.linalg.solve(a[0], v))
    close(L.solve(a, b[0]), np.linalg.solve(a, b[0]))      # broadcast batch dims
    close(L.inv(a), np.linalg.inv(a))
    close(L.det(a), np.linalg.det(a))
    for got, want in zip(L.slogdet(-a), np.linalg.slogdet(-a)):
        close(got, want)
    close(L.cholesky(s), np.linalg.cholesky(s))
    close(L.cholesky(s, upper=True), np.linalg.cholesky(s, upper=True))
    close(L.eigvalsh(s, "U"), np.linalg.eigvalsh(s, "U"))
    close(L.svdvals(b), np.linalg.svdvals(b))
    for mode in ("reduced", "complete"):
        for got, want in zip(L.qr(b, mode), np.linalg.qr(b, mode)):
            close(got, want)
    close(L.qr(b, "r"), np.linalg.qr(b, "r"))
    for full in (True, False):
        for got, want in zip(L.svd(b, full), np.linalg.svd(b, full)):
            close(np.abs(got), np.abs(want))
    u, sv, vh = L.svd(s, hermitian=True)
    close(sv, np.linalg.svd(s, hermitian=True).S)
    close(np.asarray(u) * np.asarray(sv)[..., None, :] @ np.asarray(vh), s)
    close(L.pinv(b), np.linalg.pinv(b))
    close(L.pinv(b, rtol=None), np.linalg.pinv(b, rtol=None))
    close(L.pinv(s, hermitian=True), np.linalg.pinv(s, hermitian=True))
    close(L.matrix_power(a, 3), np.linalg.matrix_power(a, 3))
    close(L.matrix_power(a, -2), np.linalg.matrix_power(a, -2))
    close(L.matrix_power(a, 0), np.linalg.matrix_power(a, 0))
    close(L.matrix_power(np.arange(4).reshape(2, 2), 5),
          np.linalg.matrix_power(np.arange(4).reshape(2, 2), 5))
    for p in (None, 2, -2, 1, -1, np.inf, -np.inf, "fro", "nuc"):
        close(L.cond(a, p), np.linalg.cond(a, p), 1e-9)


def test_rank_and_lstsq_against_numpy():
    x = _rng(3).standard_normal((6, 4)) @ np.diag([1.0, 1.0, 1.0, 0.0])
    assert int(L.matrix_rank(x)) == np.linalg.matrix_rank(x) == 3
    stacked = np.stack([x, general(6, 4)])
    np.testing.assert_array_equal(L.matrix_rank(stacked), np.linalg.matrix_rank(stacked))
    assert int(L.matrix_rank(spd(3), hermitian=True)) == 3
    assert int(L.matrix_rank(np.zeros(3))) == 0 and int(L.matrix_rank(np.ones(3))) == 1
    a = general(6, 3, seed=4)
    b = _rng(5).standard_normal((6, 2))
    for rhs in (b, b[:, 0]):
        for got, want in zip(L.lstsq(a, rhs), np.linalg.lstsq(a, rhs)):
            close(got, want, 1e-9)
    wide = general(2, 4)
    got, want = L.lstsq(wide, b[:2]), np.linalg.lstsq(wide, b[:2])
    close(got.x, want[0], 1e-9)
    assert got.residuals.shape == want[1].shape == (0,)


@pytest.mark.parametrize("ord", [None, 1, 2, np.inf, -np.inf, 0, 3, -1.5])
def test_vector_norms(ord):
    x = _rng(6).standard_normal((3, 4, 5))
    for axis in (0, -1):
        for keepdims in (False, True):
            close(L.norm(x, ord, axis, keepdims), np.linalg.norm(x, ord, axis, keepdims))
    close(L.norm(x[0, 0], ord), np.linalg.norm(x[0, 0], ord))


@pytest.mark.parametrize("ord", [None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf])
def test_matrix_norms(ord):
    x = _rng(7).standard_normal((3, 4, 5))
    for axis in ((0, 1), (2, 0), (-1, -2)):
        for keepdims in (False, True):
            close(L.norm(x, ord, axis, keepdims), np.linalg.norm(x, ord, axis, keepdims))
    close(L.norm(x[0], ord), np.linalg.norm(x[0], ord))
    close(L.matrix_norm(x, ord=ord or "fro"), np.linalg.matrix_norm(x, ord=ord or "fro"))


def test_array_api_functions():
    x = _rng(8).standard_normal((3, 4, 5))
    close(L.norm(x), np.linalg.norm(x))
    close(L.norm(x, keepdims=True), np.linalg.norm(x, keepdims=True))
    close(L.vector_norm(x, axis=(0, 2), ord=3), np.linalg.vector_norm(x, axis=(0, 2), ord=3))
    close(L.vector_norm(x, keepdims=True), np.linalg.vector_norm(x, keepdims=True))
    close(L.trace(x, offset=1), np.linalg.trace(x, offset=1))
    close(L.diagonal(x, offset=-1), np.linalg.diagonal(x, offset=-1))
    close(L.cross(x[..., :3], x[..., 1:4]), np.linalg.cross(x[..., :3], x[..., 1:4]))
    close(L.outer(x[0, 0], x[0, 1, :3]), np.linalg.outer(x[0, 0], x[0, 1, :3]))
    close(L.matmul(x, np.swapaxes(x, -1, -2)), np.linalg.matmul(x, np.swapaxes(x, -1, -2)))
    close(L.matrix_transpose(x), np.linalg.matrix_transpose(x))
    chain = [_rng(9).standard_normal(s) for s in [(3,), (3, 5), (5, 2), (2, 6), (6,)]]
    close(L.multi_dot(chain), np.linalg.multi_dot(chain))
    close(L.multi_dot(chain[1:4]), np.linalg.multi_dot(chain[1:4]))
    t = _rng(10).standard_normal((6, 2, 3))
    close(L.tensorinv(t, 1), np.linalg.tensorinv(t, 1))
    close(L.tensorsolve(t, chain[-1]), np.linalg.tensorsolve(t, chain[-1]))


def test_errors_like_numpy():
    with pytest.raises(np.linalg.LinAlgError, match="square"):
        L.inv(np.ones((2, 3)))
    with pytest.raises(np.linalg.LinAlgError, match="two-dimensional"):
        L.det(np.ones(3))
    with pytest.raises(L.LinAlgError, match="do not match"):
        L.solve(np.eye(3), np.ones(2))
    with pytest.raises(L.LinAlgError, match="unsupported"):
        L.inv(np.eye(2, dtype=np.float16))
    with pytest.raises(ValueError, match="norm order"):
        L.norm(np.ones(3), "fro")
    with pytest.raises(ValueError, match="mode"):
        L.qr(np.eye(2), "economic")
    with pytest.raises(L.LinAlgError, match="3-vectors"):
        L.cross(np.ones(2), np.ones(2))
    with pytest.raises(L.LinAlgError, match="one-dimensional"):
        L.outer(np.ones((2, 2)), np.ones(2))


# ----------------------------------------------------------------------------
# fgrad.numpy.linalg: derivatives, vmap, jit

NUMPY_FUNS = {
    "solve": (lambda a, b: L.solve(a, b), lambda *bt: (general(3, 3, *bt), general(3, 2, *bt))),
    "solve_vector": (lambda a, b: L.solve(a, b), lambda *bt: (general(3, 3, *bt),
                                                               general(3, 2)[:, 0])),
    "inv": (L.inv, lambda *bt: (general(3, 3, *bt),)),
    "det": (L.det, lambda *bt: (general(3, 3, *bt),)),
    "slogdet": (lambda a: L.slogdet(a).logabsdet, lambda *bt: (-general(3, 3, *bt),)),
    "cholesky": (lambda a: L.cholesky(a, upper=True), lambda *bt: (spd(3, *bt),)),
    "eigh": (lambda a: tuple(L.eigh(a, "U")), lambda *bt: (symmetric_separated(3, *bt),)),
    "eigvalsh": (L.eigvalsh, lambda *bt: (symmetric_separated(3, *bt),)),
    "svd": (lambda a: tuple(L.svd(a, full_matrices=False)),
            lambda *bt: (with_singular_values(4, 3, *bt),)),
    "svdvals": (L.svdvals, lambda *bt: (with_singular_values(3, 4, *bt),)),
    "qr": (lambda a: tuple(L.qr(a)), lambda *bt: (general(4, 3, *bt),)),
    "pinv": (L.pinv, lambda *bt: (with_singular_values(4, 3, *bt),)),
    "matrix_power": (lambda a: L.matrix_power(a, -3), lambda *bt: (general(3, 3, *bt),)),
    "cond": (L.cond, lambda *bt: (with_singular_values(3, 3, *bt),)),
    "cond_1": (lambda a: L.cond(a, 1), lambda *bt: (general(3, 3, *bt),)),
    "norm_nuc": (lambda a: L.norm(a, "nuc", axis=(-2, -1)),
                 lambda *bt: (with_singular_values(3, 4, *bt),)),
    "norm_2": (lambda a: L.matrix_norm(a, ord=2), lambda *bt: (with_singular_values(3, 4, *bt),)),
    "norm_fro": (lambda a: L.matrix_norm(a), lambda *bt: (general(3, 4, *bt),)),
    "vector_norm_3": (lambda a: L.vector_norm(a, ord=3, axis=-1),
                      lambda *bt: (general(3, 4, *bt),)),
    "trace": (lambda a: L.trace(a), lambda *bt: (general(3, 3, *bt),)),
}


@pytest.mark.parametrize("name", NUMPY_FUNS)
@pytest.mark.parametrize("batch", [(), (2,)])
def test_numpy_linalg_grads(name, batch):
    f, make = NUMPY_FUNS[name]
    check_grads(f, make(*batch), order=2)


def test_lstsq_and_multi_dot_grads():
    a, b = general(5, 3, seed=11), general(5, 2, seed=12)
    check_grads(lambda a, b: L.lstsq(a, b).x, (a, b), order=2)
    c = general(2, 4, seed=13)
    check_grads(lambda a, b, c: L.multi_dot([a.T, b, c]), (a, b, c), order=2)
    check_grads(lambda a, b, c: L.multi_dot([b[:, 0], a, c[:, 0]]), (a, b, general(3, 2)),
                order=2)


@pytest.mark.parametrize("name", NUMPY_FUNS)
def test_numpy_linalg_vmap_and_jit(name):
    f, make = NUMPY_FUNS[name]
    xs = make(3)
    in_axes = (0, None) if name == "solve_vector" else 0    # b stays one vector
    axes = in_axes if isinstance(in_axes, tuple) else (0,) * len(xs)
    example = lambda i: [x if ax is None else x[i] for x, ax in zip(xs, axes)]  # noqa: E731
    got = fgrad.tree.leaves(fgrad.vmap(f, in_axes=in_axes)(*xs))
    assert len(got) == len(fgrad.tree.leaves(f(*example(0))))
    for k, g in enumerate(got):
        want = np.stack([np.asarray(fgrad.tree.leaves(f(*example(i)))[k]) for i in range(3)])
        np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-13)
    # jit compiles the element-wise parts natively (their last bits may differ from
    # NumPy's); the decompositions run the same LAPACK calls
    for j, e in zip(fgrad.tree.leaves(fgrad.jit(f)(*xs)), fgrad.tree.leaves(f(*xs))):
        np.testing.assert_allclose(j, e, rtol=1e-13, atol=1e-14)


# ----------------------------------------------------------------------------
# Classic identities

def test_solve_gradient_matches_inverse():
    a, b = general(4, 4, seed=14), _rng(15).standard_normal(4)
    ga, gb = fgrad.grad(lambda a, b: fnp.sum(L.solve(a, b) ** 2), (0, 1))(a, b)
    ha, hb = fgrad.grad(lambda a, b: fnp.sum((L.inv(a) @ b) ** 2), (0, 1))(a, b)
    close(ga, ha, 1e-9), close(gb, hb, 1e-9)
    x = np.linalg.solve(a, b)     # d/db ||a^-1 b||^2 = 2 a^-T x;  d/da = -a^-T 2x x^T
    close(gb, 2 * np.linalg.solve(a.T, x), 1e-9)
    close(ga, -np.outer(2 * np.linalg.solve(a.T, x), x), 1e-9)


def test_slogdet_gradient_is_inverse_transpose():
    a = general(4, 4, 3, seed=16)
    g = fgrad.grad(lambda a: fnp.sum(L.slogdet(a).logabsdet))(a)
    close(g, np.swapaxes(np.linalg.inv(a), -1, -2), 1e-10)
    g = fgrad.grad(lambda a: L.det(a[0]))(a)
    close(g[0], np.linalg.det(a[0]) * np.linalg.inv(a[0]).T, 1e-9)


def test_gaussian_process_kernel_cholesky():
    x = np.linspace(0.0, 3.0, 12)
    y = np.sin(x)

    def nll(log_scale, log_noise):
        d2 = (x[:, None] - x[None, :]) ** 2
        k = fnp.exp(-0.5 * d2 / fnp.exp(2 * log_scale)) + fnp.exp(log_noise) * fnp.eye(12)
        chol = L.cholesky(k)
        alpha = lax_linalg.triangular_solve(chol, y[:, None], left_side=True, lower=True)
        return 0.5 * fnp.sum(alpha ** 2) + fnp.sum(fnp.log(fnp.diagonal(chol)))

    args = (np.float64(-0.3), np.float64(-2.0))
    value = nll(*args)
    k = np.exp(-0.5 * (x[:, None] - x) ** 2 / np.exp(-0.6)) + np.exp(-2.0) * np.eye(12)
    want = 0.5 * y @ np.linalg.solve(k, y) + 0.5 * np.linalg.slogdet(k)[1]
    close(value, want, 1e-10)
    check_grads(nll, args, order=2)
    g = fgrad.grad(nll, (0, 1))(*args)
    gj = fgrad.jit(fgrad.grad(nll, (0, 1)))(*args)
    close(gj[0], g[0], 1e-12), close(gj[1], g[1], 1e-12)


def test_eigh_gradient_under_symmetric_perturbation():
    a = symmetric_separated(4, seed=17)
    e = _rng(18).standard_normal((4, 4))
    e = e + e.T
    w, v = np.linalg.eigh(a)
    _, dw = fgrad.jvp(L.eigvalsh, (a,), (e,))
    close(dw, np.einsum("ji,jk,ki->i", v, e, v), 1e-10)      # dw_i = v_i^T e v_i
    eps = 1e-6
    fd = (np.linalg.eigh(a + eps * e)[1] - np.linalg.eigh(a - eps * e)[1]) / (2 * eps)
    _, (_, dv) = fgrad.jvp(lambda a: tuple(L.eigh(a)), (a,), (e,))
    close(dv, fd, 1e-6, 1e-7)
    g = np.asarray(fgrad.grad(lambda a: L.eigvalsh(a)[-1])(a))   # reads the lower triangle
    assert not np.triu(g, 1).any()
    close(np.tril(g) + np.tril(g, -1).T, np.outer(v[:, -1], v[:, -1]) * (2 - np.eye(4)), 1e-10)


# ----------------------------------------------------------------------------
# eig and eigvals (complex results)

def _z(n, *batch, seed=0):
    rng = _rng(seed)
    return rng.standard_normal(batch + (n, n)) + 1j * rng.standard_normal(batch + (n, n))


def _positive_largest(v):
    """v with each column's largest component made positive: LAPACK makes it real but
    of either sign, and that sign may flip between the nearby matrices finite
    differences evaluate, so derivatives are compared on this smooth normalization."""
    n = v.shape[-2]
    onehot = (fnp.arange(n)[:, None] == fnp.argmax(fnp.abs(v), axis=-2)[..., None, :])
    big = fnp.sum(v * onehot.astype(v.dtype), axis=-2)
    return v * fnp.sign(fnp.real(big)).astype(v.dtype)[..., None, :]


def _eig_smooth(a, left=False):
    w, *vectors = lax_linalg.eig(a, compute_left_eigenvectors=left)
    return (w,) + tuple(_positive_largest(v) for v in vectors)


@pytest.mark.parametrize("complex_input", [False, True])
def test_eig_values_against_numpy(complex_input):
    a = _z(4, 3) if complex_input else _rng(19).standard_normal((3, 4, 4))
    w, v = L.eig(a)
    wn, vn = np.linalg.eig(a)
    assert w.dtype == v.dtype == np.complex128
    close(w, wn, 1e-12), close(v, vn, 1e-12)
    close(L.eigvals(a), np.linalg.eigvals(a), 1e-12)
    close(np.asarray(a) @ np.asarray(v), np.asarray(v) * np.asarray(w)[..., None, :], 1e-10)
    w, vl, vr = lax_linalg.eig(a, compute_left_eigenvectors=True)
    vl_s = [sla.eig(x, left=True)[1] for x in a]
    close(np.abs(vl), np.abs(np.stack(vl_s)), 1e-10)
    f32 = L.eigvals(np.asarray(a, np.complex64 if complex_input else np.float32))
    assert f32.dtype == np.complex64


@pytest.mark.parametrize("batch", [(), (2,)])
@pytest.mark.parametrize("complex_input", [False, True])
def test_eig_grads(batch, complex_input):
    a = _z(3, *batch, seed=20) if complex_input else _rng(20).standard_normal(batch + (3, 3))
    check_grads(lambda a: L.eigvals(a), (a,), order=2)
    check_grads(_eig_smooth, (a,), order=2)
    check_grads(lambda a: _eig_smooth(a, left=True), (a,), order=2)


def test_eig_vmap_and_jit():
    a = _rng(21).standard_normal((3, 4, 4))
    for f in (lambda a: tuple(L.eig(a)), L.eigvals):
        got = fgrad.tree.leaves(fgrad.vmap(f)(a))
        for k, g in enumerate(got):
            np.testing.assert_array_equal(g, np.stack([fgrad.tree.leaves(f(x))[k] for x in a]))
        same_bits(fgrad.jit(f)(a), f(a))


@degenerate
def test_eig_degenerate_inputs():
    a = _rng(22).standard_normal((2, 3, 3))
    a[1, 0, 0] = np.inf
    w, v = L.eig(a)
    assert np.isnan(np.asarray(w)[1]).all() and np.isfinite(np.asarray(w)[0]).all()
    repeated = np.array([[2.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 1.0, 3.0]])
    da = _rng(23).standard_normal((3, 3))
    _, (_, dv) = fgrad.jvp(lambda a: tuple(L.eig(a)), (repeated,), (da,))
    assert not np.isfinite(np.asarray(dv)).all()
    with pytest.raises(fgrad.FgradTypeError, match="float32"):
        L.eig(np.eye(2, dtype=np.float16))


# ----------------------------------------------------------------------------
# Complex matrices (complex64/complex128 through every decomposition)

def _hermitian_pd(n, *batch, seed=0):
    z = _z(n, *batch, seed=seed)
    return z @ np.conj(np.swapaxes(z, -1, -2)) + n * np.eye(n)


def _projectors(v):
    """v_k v_k^H per column: what a unit eigenvector or singular vector determines
    (LAPACK's phase for it is arbitrary)."""
    return fnp.einsum("...ik,...jk->...kij", v, fnp.conj(v))


def test_complex_values_against_numpy():
    a = _z(4, 2, seed=24) + 4 * np.eye(4)
    b = _z(4, 2, seed=25)[..., :3]
    h = _hermitian_pd(4, 2, seed=26)
    close(L.solve(a, b), np.linalg.solve(a, b))
    close(L.inv(a), np.linalg.inv(a))
    close(L.det(a), np.linalg.det(a))
    for got, want in zip(L.slogdet(a), np.linalg.slogdet(a)):
        close(got, want)
    close(L.cholesky(h), np.linalg.cholesky(h))
    close(L.cholesky(h, upper=True), np.linalg.cholesky(h, upper=True))
    w, v = L.eigh(h)
    assert w.dtype == np.float64 and v.dtype == np.complex128
    close(w, np.linalg.eigvalsh(h))
    close(_projectors(v), _projectors(np.linalg.eigh(h)[1]), 1e-9, 1e-12)
    close(L.svdvals(b), np.linalg.svdvals(b))
    for got, want in zip(L.qr(b), np.linalg.qr(b)):
        close(got, want)
    close(L.pinv(b), np.linalg.pinv(b))
    for ord in (None, 1, 3, np.inf):
        close(L.norm(b, ord, axis=-1), np.linalg.norm(b, ord, axis=-1))
    for ord in ("fro", "nuc", 2, 1):
        close(L.norm(b, ord, axis=(-2, -1)), np.linalg.norm(b, ord, axis=(-2, -1)))
    close(L.cond(a), np.linalg.cond(a))
    x = L.solve(a.astype(np.complex64), b.astype(np.complex64))
    assert x.dtype == np.complex64
    close(x, np.linalg.solve(a, b), 1e-4, 1e-5)


def _svd_invariants(u, s, vh):
    """s, u's projectors and u[:, k] vh[k, 0]: unchanged by the phase u[:, k] and
    vh[k, :] share."""
    return s, _projectors(u), u * fnp.swapaxes(vh[..., :, :1], -1, -2)


COMPLEX_FUNS = {
    "solve": (L.solve, lambda: (_z(3, seed=27) + 3 * np.eye(3), _z(3, seed=28)[:, :2])),
    "inv": (L.inv, lambda: (_z(3, 2, seed=29) + 3 * np.eye(3),)),
    "det": (L.det, lambda: (_z(3, seed=30) + 3 * np.eye(3),)),
    "slogdet": (lambda a: tuple(L.slogdet(a)), lambda: (_z(3, 2, seed=31) + 3 * np.eye(3),)),
    "cholesky": (L.cholesky, lambda: (_hermitian_pd(3, 2, seed=32),)),
    "triangular_solve": (lambda a, b: lax_linalg.triangular_solve(
        a, b, left_side=True, transpose_a=True, conjugate_a=True),
        lambda: (_z(3, seed=33) + 3 * np.eye(3), _z(3, seed=34)[:, :2])),
    "lu": (lambda a: lax_linalg.lu(a)[0], lambda: (_z(3, 2, seed=35),)),
    "qr": (lambda a: tuple(L.qr(a)), lambda: (_z(4, 2, seed=36)[..., :3],)),
    "eigh": (lambda a: (L.eigh(a).eigenvalues, _projectors(L.eigh(a).eigenvectors)),
             lambda: (_hermitian_pd(3, 2, seed=37),)),
    "svd": (lambda a: _svd_invariants(*L.svd(a, full_matrices=False)),
            lambda: (_z(4, seed=38)[:3],)),
    "pinv": (L.pinv, lambda: (_z(4, seed=39)[:, :3],)),
    "norm_nuc": (lambda a: L.norm(a, "nuc"), lambda: (_z(3, seed=40),)),
    "vector_norm": (lambda a: L.vector_norm(a, axis=-1), lambda: (_z(3, seed=41),)),
}


@pytest.mark.parametrize("name", COMPLEX_FUNS)
def test_complex_grads(name):
    f, make = COMPLEX_FUNS[name]
    check_grads(f, make(), order=2)


def test_empty_matrices_like_numpy():
    e = np.zeros((2, 0, 0))
    for name in ("det", "inv", "cholesky", "eigvalsh", "svdvals", "pinv", "matrix_rank"):
        got, want = getattr(L, name)(e), getattr(np.linalg, name)(e)
        close(got, want)
    for got, want in zip(L.slogdet(e), np.linalg.slogdet(e)):
        close(got, want)
    for got, want in zip(L.qr(np.zeros((3, 0)), "complete"), np.linalg.qr(np.zeros((3, 0)),
                                                                        "complete")):
        close(got, want)
    assert L.solve(np.zeros((0, 0)), np.zeros((0, 2))).shape == (0, 2)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_matrices_give_nan(bad):
    a = spd(3, 2)
    a[1, 0, 1] = a[1, 1, 0] = bad
    for f in (lambda a: lax_linalg.eigh(a)[1], lambda a: lax_linalg.svd(a, compute_uv=False),
              lambda a: lax_linalg.svd(a)[0], lambda a: lax_linalg.eig(a)[0]):
        for g in (f, fgrad.jit(f)):
            out = np.asarray(g(a))
            assert np.isnan(out[1]).all() and np.isfinite(out[0]).all()
