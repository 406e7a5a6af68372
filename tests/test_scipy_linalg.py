"""fgrad.scipy.linalg against SciPy: values, derivatives (check_grads order 2,
forward and reverse, float64, batched and not), vmap against a loop, jit
against eager, and what inputs without an answer give."""
import numpy as np
import pytest
import scipy.linalg as sla

import fgrad
import fgrad.scipy.linalg as fsl
from fgrad.test_util import check_grads


def _rng(seed=0):
    return np.random.default_rng(seed)


def general(n, *batch, seed=0):
    return _rng(seed).standard_normal(batch + (n, n)) + n * np.eye(n)


def spd(n, *batch, seed=0):
    a = _rng(seed).standard_normal(batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def close(got, want, rtol=1e-10, atol=1e-12):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def close_all(got, want, **kw):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        close(g, w, **kw)


# ----------------------------------------------------------------------------
# Values against SciPy

@pytest.mark.parametrize("lower", [False, True])
def test_cholesky_family(lower):
    a, b = spd(4), _rng(1).standard_normal((4, 2))
    close(fsl.cholesky(a, lower), sla.cholesky(a, lower))
    c = fsl.cho_factor(a, lower)
    assert c[1] == lower
    close(fsl.cho_solve(c, b), sla.cho_solve(sla.cho_factor(a, lower), b))
    close(fsl.cho_solve(c, b[:, 0]), sla.cho_solve(sla.cho_factor(a, lower), b[:, 0]))
    junk = np.asarray(c[0]) + (np.triu(a, 1) if lower else np.tril(a, -1))  # SciPy's layout
    close(fsl.cho_solve((junk, lower), b), sla.cho_solve(sla.cho_factor(a, lower), b))


@pytest.mark.parametrize("trans", [0, 1, 2, "N", "T", "C"])
def test_solve_triangular(trans):
    a, b = general(4), _rng(2).standard_normal((4, 3))
    for lower in (False, True):
        for unit in (False, True):
            close(fsl.solve_triangular(a, b, trans, lower, unit),
                  sla.solve_triangular(a, b, trans, lower, unit))
    close(fsl.solve_triangular(a, b[:, 0], trans), sla.solve_triangular(a, b[:, 0], trans))


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5)])
def test_lu_and_qr_and_svd(shape):
    x = _rng(3).standard_normal(shape)
    close_all(fsl.lu(x), sla.lu(x))
    close_all(fsl.lu(x, p_indices=True), sla.lu(x, p_indices=True))
    close_all(fsl.lu(x, permute_l=True), sla.lu(x, permute_l=True))
    for mode in ("full", "economic", "r"):
        close_all(fsl.qr(x, mode=mode), sla.qr(x, mode=mode))
    for full in (True, False):
        close_all([np.abs(v) for v in fsl.svd(x, full)], [np.abs(v) for v in sla.svd(x, full)])
    close(fsl.svd(x, compute_uv=False), sla.svd(x, compute_uv=False))


@pytest.mark.parametrize("trans", [0, 1])
def test_lu_factor_and_solve(trans):
    a, b = general(5), _rng(4).standard_normal((5, 2))
    lu, piv = fsl.lu_factor(a)
    lu_s, piv_s = sla.lu_factor(a)
    close(lu, lu_s)
    np.testing.assert_array_equal(piv, piv_s)
    want = sla.lu_solve((lu_s, piv_s), b, trans)
    close(fsl.lu_solve((lu, piv), b, trans), want)
    # traced pivots: the permutation comes from a loop of swaps
    close(fgrad.jit(lambda lu, piv, b: fsl.lu_solve((lu, piv), b, trans))(lu, piv, b), want)


@pytest.mark.parametrize("assume_a", [None, "gen", "sym", "her", "pos", "diagonal",
                                      "tridiagonal", "banded", "upper triangular",
                                      "lower triangular"])
def test_solve_assume_a(assume_a):
    a = spd(4) if assume_a in ("sym", "her", "pos") else general(4)
    if assume_a == "diagonal":
        a = np.diag(np.diag(a))
    b = _rng(5).standard_normal((4, 2))
    for lower in (False, True):
        close(fsl.solve(a, b, lower=lower, assume_a=assume_a),
              sla.solve(a, b, lower=lower, assume_a=assume_a), 1e-9)
    close(fsl.solve(a, b[:, 0], assume_a=assume_a), sla.solve(a, b[:, 0], assume_a=assume_a),
          1e-9)


def test_solve_transposed_inv_det():
    a, b = general(4), _rng(6).standard_normal((4, 2))
    close(fsl.solve(a, b, transposed=True), sla.solve(a, b, transposed=True))
    close(fsl.inv(a), sla.inv(a))
    close(fsl.inv(spd(4), assume_a="pos"), sla.inv(spd(4)))
    close(fsl.det(a), sla.det(a))
    with pytest.raises(ValueError, match="assume_a"):
        fsl.solve(a, b, assume_a="nonsense")


def test_eigh_standard_and_generalized():
    a, b = spd(4, seed=7), spd(4, seed=8)
    w, v = fsl.eigh(a)
    ws, vs = sla.eigh(a)
    close(w, ws, 1e-12), close(np.abs(v), np.abs(vs), 1e-9)
    c = a - 5 * np.eye(4)
    for lower in (True, False):
        w, v = fsl.eigh(c, b, lower=lower)
        ws, vs = sla.eigh(c, b, lower=lower)
        close(w, ws, 1e-10), close(np.abs(v), np.abs(vs), 1e-9)
        close(fsl.eigh(c, b, lower=lower, eigvals_only=True), ws, 1e-10)
    with pytest.raises(NotImplementedError):
        fsl.eigh(a, subset_by_index=[0, 1])


@pytest.mark.parametrize("scale", [1e-3, 0.5, 3.0, 40.0])
def test_expm(scale):
    a = scale * _rng(9).standard_normal((2, 4, 4))
    want = np.stack([sla.expm(x) for x in a])
    close(fsl.expm(a), want, 1e-11)
    close(fgrad.jit(fsl.expm)(a), want, 1e-11)
    close(fgrad.vmap(fsl.expm)(a), want, 1e-11)


def test_expm_identities():
    a = _rng(10).standard_normal((3, 3))
    close(fsl.expm(np.zeros((3, 3))), np.eye(3), 1e-15, 0)
    close(fsl.expm(a) @ fsl.expm(-a), np.eye(3), 1e-12, 1e-12)
    skew = a - a.T
    r = np.asarray(fsl.expm(skew))
    close(r @ r.T, np.eye(3), 1e-12, 1e-12)


def test_block_diag():
    a, b = general(2), _rng(11).standard_normal((2, 3))
    for args in [(a, b), ([1, 2], [[3.0]], 4, np.zeros((0, 2))), (a,), (1.0, 2.0)]:
        close(fsl.block_diag(*args), sla.block_diag(*args))


def test_sqrtm():
    for a in (spd(4, seed=12), general(4, seed=13)):
        close(fsl.sqrtm(a), sla.sqrtm(a), 1e-10)
        root, err = fsl.sqrtm(a, disp=False)
        assert float(err) < 1e-12
    batch = spd(3, 2, seed=14)
    close(fsl.sqrtm(batch), np.stack([sla.sqrtm(x) for x in batch]), 1e-10)


def test_sqrtm_without_a_real_root_is_nan():
    a = -spd(3)              # negative eigenvalues: SciPy gives a complex root
    assert np.isnan(np.asarray(fsl.sqrtm(a))).all()
    assert np.isnan(np.asarray(fgrad.jit(fsl.sqrtm)(a))).all()


def test_not_positive_definite_is_nan():
    a = -spd(3)
    assert np.isnan(np.asarray(fsl.cholesky(a))).all()
    assert np.isnan(np.asarray(fsl.solve(a, np.ones(3), assume_a="pos"))).all()


# ----------------------------------------------------------------------------
# Derivatives, vmap, jit

SCIPY_FUNS = {
    "cholesky": (fsl.cholesky, lambda *bt: (spd(3, *bt),)),
    "cho_solve": (lambda c, b: fsl.cho_solve((c, True), b),
                  lambda *bt: (np.linalg.cholesky(spd(3, *bt)), general(3, *bt)[..., :2])),
    "solve_triangular": (lambda a, b: fsl.solve_triangular(a, b, trans="T", lower=True),
                         lambda *bt: (general(3, *bt), general(3, *bt, seed=1)[..., :2])),
    "lu": (lambda a: fsl.lu(a)[1:], lambda *bt: (general(3, *bt),)),
    "lu_solve": (lambda lu, b: fsl.lu_solve((lu, np.array([2, 1, 2], np.int32)), b),
                 lambda *bt: (general(3, *bt), general(3, *bt, seed=1)[..., :2])),
    "solve_gen": (fsl.solve, lambda *bt: (general(3, *bt), general(3, *bt, seed=1)[..., :2])),
    "solve_sym": (lambda a, b: fsl.solve(a, b, assume_a="sym"),
                  lambda *bt: (general(3, *bt), general(3, *bt, seed=1)[..., :2])),
    "solve_pos": (lambda a, b: fsl.solve(a, b, assume_a="pos", lower=True),
                  lambda *bt: (spd(3, *bt), general(3, *bt, seed=1)[..., :2])),
    "inv": (fsl.inv, lambda *bt: (general(3, *bt),)),
    "det": (fsl.det, lambda *bt: (general(3, *bt),)),
    "eigh_generalized": (lambda a, b: fsl.eigh(a, b),
                         lambda *bt: (spd(3, *bt) + np.diag([0.0, 4.0, 9.0]),
                                      spd(3, *bt, seed=2))),
    "qr_r": (lambda a: fsl.qr(a, mode="r"), lambda *bt: (general(3, *bt)[..., :2],)),
    "expm": (fsl.expm, lambda *bt: (0.7 * general(3, *bt),)),
    "sqrtm": (fsl.sqrtm, lambda *bt: (spd(3, *bt),)),
}


@pytest.mark.parametrize("name", SCIPY_FUNS)
@pytest.mark.parametrize("batch", [(), (2,)])
def test_scipy_linalg_grads(name, batch):
    f, make = SCIPY_FUNS[name]
    check_grads(f, make(*batch), order=2)


def test_block_diag_grads():     # block_diag has no batched form
    check_grads(lambda a, b: fsl.block_diag(a, b, 2.0), (general(2), general(3)[:2]), order=2)


@pytest.mark.parametrize("name", SCIPY_FUNS)
def test_scipy_linalg_vmap_and_jit(name):
    f, make = SCIPY_FUNS[name]
    xs = make(3)
    got = fgrad.tree.leaves(fgrad.vmap(f)(*xs))
    for k, g in enumerate(got):
        want = np.stack([np.asarray(fgrad.tree.leaves(f(*[x[i] for x in xs]))[k])
                         for i in range(3)])
        np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-13)
    for j, e in zip(fgrad.tree.leaves(fgrad.jit(f)(*xs)), fgrad.tree.leaves(f(*xs))):
        np.testing.assert_allclose(j, e, rtol=1e-13, atol=1e-14)


def test_lu_solve_with_batched_traced_pivots():
    a, b = general(4, 3, seed=15), _rng(16).standard_normal((3, 4, 2))
    lu, piv = fsl.lu_factor(a)
    got = fgrad.vmap(lambda lu, piv, b: fsl.lu_solve((lu, piv), b))(lu, piv, b)
    close(got, np.linalg.solve(a, b))


def test_expm_gradient_jit_matches_eager():
    a = 2.0 * _rng(17).standard_normal((3, 3))
    g = fgrad.grad(lambda a: fgrad.numpy.sum(fsl.expm(a)[0]))
    close(fgrad.jit(g)(a), g(a), 1e-12)
    # d/dt expm(t a) = a expm(t a)
    _, d = fgrad.jvp(lambda t: fsl.expm(t * a), (np.float64(1.0),), (np.float64(1.0),))
    close(d, a @ sla.expm(a), 1e-10)


# ----------------------------------------------------------------------------
# Complex matrices

def _z(n, *batch, seed=0):
    rng = _rng(seed)
    return rng.standard_normal(batch + (n, n)) + 1j * rng.standard_normal(batch + (n, n))


def _hermitian_pd(n, seed=0):
    z = _z(n, seed=seed)
    return z @ z.conj().T + n * np.eye(n)


def test_complex_values_against_scipy():
    a, h = _z(4, seed=18) + 4 * np.eye(4), _hermitian_pd(4, seed=19)
    b = _z(4, seed=20)[:, :2]
    for lower in (False, True):
        close(fsl.cholesky(h, lower), sla.cholesky(h, lower))
        close(fsl.cho_solve(fsl.cho_factor(h, lower), b),
              sla.cho_solve(sla.cho_factor(h, lower), b))
        for assume_a, m in (("gen", a), ("sym", a + a.T), ("her", h), ("pos", h)):
            close(fsl.solve(m, b, lower=lower, assume_a=assume_a),
                  sla.solve(m, b, lower=lower, assume_a=assume_a), 1e-9)
        w, v = fsl.eigh(a + a.conj().T, h, lower=lower)
        ws, vs = sla.eigh(a + a.conj().T, h, lower=lower)
        close(w, ws, 1e-10)
        close(np.asarray(v).conj().T @ h @ np.asarray(v), np.eye(4), 1e-10, 1e-10)
    for trans in (0, 1, 2):
        close(fsl.solve_triangular(a, b, trans), sla.solve_triangular(a, b, trans))
        close(fsl.lu_solve(fsl.lu_factor(a), b, trans), sla.lu_solve(sla.lu_factor(a), b, trans))
    close(fsl.expm(0.3 * a), sla.expm(0.3 * a), 1e-11)
    close(fsl.sqrtm(a), sla.sqrtm(a), 1e-10)


COMPLEX_FUNS = {
    "cho_solve": (lambda c, b: fsl.cho_solve((c, False), b),
                  lambda: (np.linalg.cholesky(_hermitian_pd(3, seed=21)).conj().T,
                           _z(3, seed=22)[:, :2])),
    "solve_her": (lambda a, b: fsl.solve(a, b, assume_a="her"),
                  lambda: (_hermitian_pd(3, seed=23), _z(3, seed=24)[:, :2])),
    "solve_triangular_C": (lambda a, b: fsl.solve_triangular(a, b, trans="C", lower=True),
                           lambda: (_z(3, seed=25) + 3 * np.eye(3), _z(3, seed=26)[:, :2])),
    "lu": (lambda a: fsl.lu(a)[1:], lambda: (_z(3, seed=27),)),
    "expm": (fsl.expm, lambda: (0.5 * _z(3, seed=28),)),
}


@pytest.mark.parametrize("name", COMPLEX_FUNS)
def test_complex_grads(name):
    f, make = COMPLEX_FUNS[name]
    check_grads(f, make(), order=2)
