"""fgrad.scipy.linalg: SciPy's scipy.linalg over fgrad's linear-algebra primitives.

Signatures follow SciPy's; `overwrite_*` and `check_finite` are accepted and
ignored (fgrad arrays are immutable; non-finite inputs give non-finite outputs).
Matrices may carry leading batch dimensions. Where SciPy raises LinAlgError on
values (a singular or not positive definite matrix), fgrad answers with inf/NaN,
the same in eager mode and under jit (see fgrad.numpy.linalg). Differences
from SciPy: cho_factor's other triangle is zero (SciPy leaves whatever was
there; cho_solve reads only the factor's triangle either way); svd always runs
LAPACK's gesdd; expm always uses the degree-13 Pade approximant; sqrtm is
real-valued (a matrix without a real square root gives NaN, SciPy a complex
result).
"""
import numpy as np

from .. import lax
from ..lax import linalg as lax_linalg
from ..numpy import complex_math, creation, reductions, shape, sorting, ufuncs
from ..numpy import linalg as _products
from ..numpy import linalg_ops
from ..numpy.linalg_ops import (LinAlgError, _H, _lu_solve, _main_diagonal, _matrices, _mT,
                                _take)
from ..numpy.util import asarray, promote_inexact, is_concrete

det = linalg_ops.det


def _as_matrix_rhs(name, a, b):
    """(a, b as (..., M, K) with a's batch dims, whether b was one vector)."""
    a, b = promote_inexact(a, asarray(b))
    vector = len(b.shape) == 1
    if vector:
        b = b[:, None]
    if len(b.shape) < 2 or b.shape[-2] != a.shape[-1]:
        raise LinAlgError(f"{name}: a of shape {tuple(a.shape)} and b of shape "
                          f"{tuple(b.shape) if not vector else (b.shape[0],)} do not match",
                          hint="b is (M,) or (..., M, K) for a of shape (..., M, M)")
    return (*linalg_ops._broadcast_batch(a, b), vector)


def _vector_back(x, vector):
    return x[..., 0] if vector else x


# ----------------------------------------------------------------------------
# Cholesky

def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    """The Cholesky factor: upper u with a = u^H @ u (reading a's upper triangle),
    or with lower, l with a = l @ l^H (reading the lower one)."""
    a = _matrices("cholesky", a, square=True)
    if lower:
        return lax_linalg.cholesky(a)
    return _H(lax_linalg.cholesky(_H(a)))


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """(c, lower) for cho_solve: c holds the factor in its `lower` or upper triangle."""
    return cholesky(a, lower), lower


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """x with a @ x = b, given cho_factor(a)."""
    c, lower = c_and_lower
    c = _matrices("cho_solve", c, square=True)
    c, b, vector = _as_matrix_rhs("cho_solve", c, b)
    tri = lax_linalg.triangular_solve
    # a = l l^H (lower) or u^H u: first the lower factor (l or u^H), then the upper
    y = tri(c, b, left_side=True, lower=lower, transpose_a=not lower, conjugate_a=not lower)
    x = tri(c, y, left_side=True, lower=lower, transpose_a=lower, conjugate_a=lower)
    return _vector_back(x, vector)


# ----------------------------------------------------------------------------
# Triangular systems and LU

_TRANS = {0: False, "N": False, 1: True, "T": True, 2: True, "C": True}


def _trans(name, trans):
    if trans not in _TRANS:
        raise ValueError(f"{name}: trans must be 0/'N', 1/'T' or 2/'C', got {trans!r}")
    return _TRANS[trans]


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                     check_finite=True):
    """x with op(a) @ x = b, op(a) = a, a.T (trans 1 or 'T') or a^H (2 or 'C'),
    reading only a's `lower` or upper triangle."""
    a = _matrices("solve_triangular", a, square=True)
    a, b, vector = _as_matrix_rhs("solve_triangular", a, b)
    x = lax_linalg.triangular_solve(a, b, left_side=True, lower=bool(lower),
                                    transpose_a=_trans("solve_triangular", trans),
                                    conjugate_a=trans in (2, "C"),
                                    unit_diagonal=bool(unit_diagonal))
    return _vector_back(x, vector)


def lu(a, permute_l=False, overwrite_a=False, check_finite=True, p_indices=False):
    """(p, l, u) with a = p @ l @ u (p_indices: p as row indices, a = l[p] @ u), l
    unit lower triangular (M x K), u upper (K x N); with permute_l, (p @ l, u)."""
    a = _matrices("lu", a)
    m, n = a.shape[-2:]
    k = min(m, n)
    packed, _, perm = lax_linalg.lu(a)
    l = _products.tril(packed[..., :, :k], -1) + creation.eye(m, k, dtype=a.dtype)
    u = _products.triu(packed[..., :k, :])
    p = _inverse_permutation(perm)
    if permute_l:
        return _take(l, p[..., :, None], axis=-2), u
    if p_indices:
        return p, l, u
    return _permutation_matrix(p, a.dtype), l, u


def _inverse_permutation(perm):
    return sorting.argsort(perm, axis=-1).astype(perm.dtype)


def _permutation_matrix(p, dtype):
    """P with (P @ x)[i] = x[p[i]]."""
    m = p.shape[-1]
    return (p[..., :, None] == creation.arange(m, dtype=p.dtype)).astype(dtype)


def lu_factor(a, overwrite_a=False, check_finite=True):
    """(lu, piv): l (unit diagonal, strict lower part) and u packed in one matrix,
    and LAPACK's row swaps, 0-based (row i was swapped with row piv[i])."""
    packed, pivots, _ = lax_linalg.lu(_matrices("lu_factor", a))
    return packed, pivots


def _permutation_from_pivots(piv, m):
    """The row permutation the swaps `piv` make: computed now for concrete pivots,
    as a loop of swaps when they are traced."""
    if is_concrete(piv):
        return asarray(lax_linalg.permutation_from_pivots(np.asarray(piv), m))
    k = piv.shape[-1]
    rows = creation.arange(m, dtype=piv.dtype)
    start = shape.broadcast_to(rows, tuple(piv.shape[:-1]) + (m,))

    def swap(i, perm):
        j = reductions.sum(ufuncs.where(creation.arange(k, dtype=piv.dtype) == i, piv, 0),
                           axis=-1, keepdims=True)
        at_i, at_j = rows == i, rows == j
        p_i = reductions.sum(ufuncs.where(at_i, perm, 0), axis=-1, keepdims=True)
        p_j = reductions.sum(ufuncs.where(at_j, perm, 0), axis=-1, keepdims=True)
        return ufuncs.where(at_i, p_j, ufuncs.where(at_j, p_i, perm))
    return lax.fori_loop(0, k, swap, start)


def lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    """x with a @ x = b (trans 0), a.T @ x = b (1 or 'T') or a^H @ x = b (2 or 'C'),
    given lu_factor(a)."""
    packed, piv = lu_and_piv
    packed = _matrices("lu_solve", packed, square=True)
    packed, b, vector = _as_matrix_rhs("lu_solve", packed, b)
    perm = _permutation_from_pivots(piv, packed.shape[-1])
    perm = shape.broadcast_to(perm, tuple(packed.shape[:-1]))
    x = _lu_solve(packed, perm, b, _trans("lu_solve", trans), conjugate=trans in (2, "C"))
    return _vector_back(x, vector)


# ----------------------------------------------------------------------------
# General solves and inverses

_ASSUME = {None: "gen", "gen": "gen", "general": "gen", "sym": "sym", "symmetric": "sym",
           "her": "her", "hermitian": "her", "pos": "pos", "positive definite": "pos",
           "diagonal": "diagonal", "tridiagonal": "tridiagonal", "banded": "gen",
           "upper triangular": "upper", "lower triangular": "lower"}


def _symmetric_from(a, lower, hermitian=True):
    """The symmetric (hermitian: Hermitian, with a real diagonal) matrix a's `lower`
    or upper triangle makes."""
    tri = _products.tril if lower else _products.triu
    strict = tri(a, -1 if lower else 1)
    d = _main_diagonal(a)
    if hermitian and a.dtype.kind == "c":
        return strict + _H(strict) + complex_math.real(d).astype(a.dtype)[..., None] * \
            creation.eye(a.shape[-1], dtype=a.dtype)
    return strict + _mT(strict) + d[..., None] * creation.eye(a.shape[-1], dtype=a.dtype)


def solve(a, b, lower=False, overwrite_a=False, overwrite_b=False, check_finite=True,
          assume_a=None, transposed=False):
    """x with a @ x = b (a.T @ x = b when transposed). assume_a picks the method:
    'gen' (LU, also for None and 'banded'), 'sym'/'her' (LU of the symmetric or
    Hermitian matrix a's `lower` or upper triangle makes), 'pos' (Cholesky of that
    triangle), 'diagonal', 'tridiagonal' (LU of the three diagonals), 'upper
    triangular', 'lower triangular': each reads only the entries SciPy's reads."""
    if assume_a not in _ASSUME:
        raise ValueError(f"solve: unknown assume_a {assume_a!r}; use one of "
                         f"{sorted(k for k in _ASSUME if k)}")
    kind = _ASSUME[assume_a]
    a = _matrices("solve", a, square=True)
    a, b2, vector = _as_matrix_rhs("solve", a, b)
    if kind == "tridiagonal":
        n = a.shape[-1]
        band = np.tri(n, n, 1) - np.tri(n, n, -2)
        a, kind = a * band.astype(a.dtype), "gen"
    if kind == "gen":
        packed, _, perm = lax_linalg.lu(a)
        return _vector_back(_lu_solve(packed, perm, b2, bool(transposed)), vector)
    if kind in ("sym", "her"):
        packed, _, perm = lax_linalg.lu(_symmetric_from(a, lower, kind == "her"))
        return _vector_back(_lu_solve(packed, perm, b2), vector)
    if kind == "pos":
        return _vector_back(cho_solve(cho_factor(a, lower), b2), vector)
    if kind == "diagonal":
        return _vector_back(b2 / _main_diagonal(a)[..., :, None], vector)
    x = lax_linalg.triangular_solve(a, b2, left_side=True, lower=kind == "lower",
                                    transpose_a=bool(transposed))
    return _vector_back(x, vector)


def inv(a, overwrite_a=False, check_finite=True, *, assume_a=None, lower=False):
    """The inverse of each square matrix (assume_a as for solve; a general one by
    lax.linalg.inv: NaN where singular)."""
    a = _matrices("inv", a, square=True)
    if _ASSUME.get(assume_a) == "gen":
        return lax_linalg.inv(a)
    return solve(a, shape.broadcast_to(creation.eye(a.shape[-1], dtype=a.dtype),
                                       tuple(a.shape)), lower=lower, assume_a=assume_a)


# ----------------------------------------------------------------------------
# Decompositions

def eigh(a, b=None, *, lower=True, eigvals_only=False, overwrite_a=False, overwrite_b=False,
         type=1, check_finite=True, subset_by_index=None, subset_by_value=None, driver=None):
    """(w ascending, v) of a symmetric a (reading its `lower` or upper triangle), or
    of the generalized problem a v = w b v with b positive definite (v^T b v = I)."""
    if type != 1 or subset_by_index is not None or subset_by_value is not None:
        raise NotImplementedError("eigh: only type=1 without subsets is offered")
    a = _matrices("eigh", a, square=True)
    if b is None:
        v, w = lax_linalg.eigh(a, lower=bool(lower))
        return w if eigvals_only else (w, v)
    a, b = promote_inexact(a, _matrices("eigh", b, square=True))
    a, b = linalg_ops._broadcast_batch(a, b)
    chol = lax_linalg.cholesky(_symmetric_from(b, lower) if not lower else b)
    tri = lax_linalg.triangular_solve
    conj = a.dtype.kind == "c"
    c = tri(chol, _symmetric_from(a, lower), left_side=True, lower=True)
    c = tri(chol, c, left_side=False, lower=True, transpose_a=True, conjugate_a=conj)
    y, w = lax_linalg.eigh(c)
    if eigvals_only:
        return w
    return w, tri(chol, y, left_side=True, lower=True, transpose_a=True, conjugate_a=conj)


def svd(a, full_matrices=True, compute_uv=True, overwrite_a=False, check_finite=True,
        lapack_driver="gesdd"):
    """(u, s, vh), or s alone; LAPACK's gesdd runs whichever driver is named."""
    if lapack_driver not in ("gesdd", "gesvd"):
        raise ValueError(f"svd: lapack_driver must be 'gesdd' or 'gesvd', got "
                         f"{lapack_driver!r}")
    out = linalg_ops.svd(a, full_matrices, compute_uv)
    return tuple(out) if compute_uv else out


def qr(a, overwrite_a=False, lwork=None, mode="full", pivoting=False, check_finite=True):
    """(q, r) for mode 'full' (complete) or 'economic' (reduced); (r,) for mode 'r'
    (r of the complete decomposition: M x N)."""
    if pivoting:
        raise NotImplementedError("qr: pivoting=True (LAPACK's geqp3) is not offered")
    if mode == "raw":
        raise NotImplementedError("qr: mode='raw' (LAPACK's Householder form) is not offered")
    if mode not in ("full", "economic", "r"):
        raise ValueError(f"qr: unknown mode {mode!r}; use 'full', 'economic' or 'r'")
    a = _matrices("qr", a)
    if mode == "r":   # the reduced r, padded with zero rows (differentiable for any shape)
        r = lax_linalg.qr(a, full_matrices=False)[1]
        m, k = a.shape[-2], r.shape[-2]
        return (shape.pad(r, [(0, 0)] * (len(r.shape) - 2) + [(0, m - k), (0, 0)]),)
    return lax_linalg.qr(a, full_matrices=mode == "full")


# ----------------------------------------------------------------------------
# Matrix functions

_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0,
           1187353796428800.0, 129060195264000.0, 10559470521600.0, 670442572800.0,
           33522128640.0, 1323241920.0, 40840800.0, 960960.0, 16380.0, 182.0, 1.0)
_THETA13 = 5.371920351148152
_MAX_SQUARINGS = 48      # traced inputs: 1-norms up to theta13 * 2^48 (beyond: NaN)


def expm(A):
    """The matrix exponential (Higham 2005: scaling, the degree-13 Pade approximant,
    squaring), of each square matrix; differentiable through the algorithm."""
    A = _matrices("expm", A, square=True)
    n = A.shape[-1]
    norm1 = reductions.max(reductions.sum(ufuncs.abs(A), axis=-2), axis=-1, initial=0.0)
    s = ufuncs.maximum(0.0, ufuncs.ceil(ufuncs.log2(norm1 / _THETA13)))
    s = lax.stop_gradient(s)
    X = A / (2.0 ** s)[..., None, None]
    mm = _products.matmul
    b = _PADE13
    eye = creation.eye(n, dtype=A.dtype)
    X2 = mm(X, X)
    X4 = mm(X2, X2)
    X6 = mm(X4, X2)
    U = mm(X, mm(X6, b[13] * X6 + b[11] * X4 + b[9] * X2)
           + b[7] * X6 + b[5] * X4 + b[3] * X2 + b[1] * eye)
    V = (mm(X6, b[12] * X6 + b[10] * X4 + b[8] * X2)
         + b[6] * X6 + b[4] * X4 + b[2] * X2 + b[0] * eye)
    R = linalg_ops.solve(V - U, V + U)
    # known now: as many squarings as the largest matrix needs; traced: the most offered
    steps = int(np.max(np.asarray(s), initial=0)) if is_concrete(s) else _MAX_SQUARINGS
    square = lambda i, R: ufuncs.where((s > i)[..., None, None], mm(R, R), R)  # noqa: E731
    R = lax.fori_loop(0, steps, square, R) if steps else R
    if not is_concrete(s):
        R = ufuncs.where((s > _MAX_SQUARINGS)[..., None, None], np.nan, R)
    return R


def block_diag(*arrs):
    """A block-diagonal matrix of the inputs (0-d and 1-d inputs are 1 x 1 and 1 x n)."""
    if not arrs:
        return creation.zeros((1, 0))
    blocks = [asarray(a) for a in arrs]
    blocks = [shape.reshape(b, (1, -1)) if len(b.shape) == 1 else
              shape.reshape(b, (1, 1)) if not b.shape else b for b in blocks]
    for b in blocks:
        if len(b.shape) > 2:
            raise ValueError(f"block_diag: arguments must have 2 or fewer dimensions, got "
                             f"shape {tuple(b.shape)}")
    blocks = promote_inexact(*blocks) if any(b.dtype.kind == "f" for b in blocks) else \
        list(blocks)
    total = sum(b.shape[1] for b in blocks)
    rows, left = [], 0
    for b in blocks:
        r, c = b.shape
        rows.append(shape.pad(b, ((0, 0), (left, total - left - c))))
        left += c
    return shape.concatenate(rows, axis=0)


_SQRTM_STEPS = 16      # enough for condition numbers up to 1e12 or so


def sqrtm(A, disp=True, blocksize=64):
    """The principal square root of each square matrix without eigenvalues on the
    closed negative real axis (the scaled product form of the Denman-Beavers
    iteration, a fixed number of steps); NaN where the iteration has not
    converged to a root (SciPy would return a complex root). With disp=False,
    (root, Frobenius-norm error estimate ||X @ X - A|| / ||A||)."""
    A = _matrices("sqrtm", A, square=True)
    n = A.shape[-1]
    mm = _products.matmul
    eye = creation.eye(n, dtype=A.dtype)

    def step(_, state):
        M, Y = state
        mu = ufuncs.exp(-linalg_ops.slogdet(M).logabsdet / (2 * n))[..., None, None]
        M_inv = linalg_ops.inv(M)
        return (0.5 * (eye + 0.5 * (mu * mu * M + M_inv / (mu * mu))),
                mu * mm(Y, eye + M_inv / (mu * mu)) * 0.5)
    _, Y = lax.fori_loop(0, _SQRTM_STEPS, step, (A, A))
    residual = linalg_ops.matrix_norm(mm(Y, Y) - A) / linalg_ops.matrix_norm(A)
    tol = np.sqrt(np.finfo(A.dtype).eps)
    Y = ufuncs.where((residual <= tol)[..., None, None], Y, np.nan)
    return Y if disp else (Y, residual)
