"""fgrad.numpy.linalg: NumPy's linear algebra over the lax.linalg primitives.

Every function maps over leading (batch) dimensions as NumPy's does, works in
float32 or float64 (integer inputs become the default float), differentiates
to any order and compiles under jit. Where NumPy raises LinAlgError on values
(a singular or not positive definite matrix), fgrad gives the same answer in
eager mode and under jit: inv of a singular matrix gives NaN, solve inf/NaN,
cholesky of a matrix that is not positive definite gives a NaN factor, det of
a singular matrix is 0 with a NaN gradient. Shape errors raise LinAlgError
(a subclass of numpy.linalg.LinAlgError) at the call.
"""
from typing import NamedTuple

import numpy as np

from .. import dtypes
from ..custom_derivatives import custom_jvp
from ..errors import FgradTypeError
from ..lax import linalg as lax_linalg
from . import complex_math, creation, reductions, shape, sorting, ufuncs
from . import linalg as _products
from .util import asarray, canonicalize_axis, promote_inexact, static_int, to_inexact


class LinAlgError(FgradTypeError, np.linalg.LinAlgError):
    """A linear-algebra function got arrays of the wrong shape or dtype."""


class EighResult(NamedTuple):
    eigenvalues: object
    eigenvectors: object


class SVDResult(NamedTuple):
    U: object
    S: object
    Vh: object


class QRResult(NamedTuple):
    Q: object
    R: object


class EigResult(NamedTuple):
    eigenvalues: object
    eigenvectors: object


class SlogdetResult(NamedTuple):
    sign: object
    logabsdet: object


class LstsqResult(NamedTuple):
    x: object
    residuals: object
    rank: object
    s: object


_LAPACK_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_WITH_COMPLEX = _LAPACK_DTYPES + (np.dtype(np.complex64), np.dtype(np.complex128))


def _matrices(name, a, square=False, dtypes=_WITH_COMPLEX):
    """a as a float array of (stacked) matrices, or LinAlgError."""
    a = to_inexact(asarray(a))
    if len(a.shape) < 2:
        raise LinAlgError(f"{name}: {len(a.shape)}-dimensional array given; the array must "
                          f"be at least two-dimensional", hint="pass a matrix (..., M, N)")
    if square and a.shape[-1] != a.shape[-2]:
        raise LinAlgError(f"{name}: the last 2 dimensions of the array must be square, got "
                          f"shape {tuple(a.shape)}")
    if a.dtype not in dtypes:
        raise LinAlgError(f"{name}: array type {a.dtype} is unsupported in linalg",
                          hint="convert to float32 or float64 with .astype(...)")
    return a


def _mT(x):
    return shape.swapaxes(x, -1, -2)


def _H(x):
    """Conjugate transpose (the transpose of real matrices)."""
    return complex_math.conj(_mT(x)) if x.dtype.kind == "c" else _mT(x)


def _take(x, index, axis):
    """take_along_axis, for complex x part by part (gather's transpose, a
    scatter-add, takes real operands only)."""
    if x.dtype.kind != "c":
        return shape.take_along_axis(x, index, axis=axis)
    from .. import lax
    return lax.complex(shape.take_along_axis(complex_math.real(x), index, axis=axis),
                       shape.take_along_axis(complex_math.imag(x), index, axis=axis))


def _main_diagonal(x):
    """The main diagonal of each square matrix (as a masked sum: no gather)."""
    return reductions.sum(x * creation.eye(x.shape[-1], dtype=x.dtype), axis=-1)


def _real(dtype):
    return dtypes.real_dtype(np.dtype(dtype))


def _abs2(x):
    """|x|^2, smooth at 0 for complex x too."""
    return complex_math.real(x * complex_math.conj(x)) if x.dtype.kind == "c" else x * x


# ----------------------------------------------------------------------------
# Solving and inverting (LU with partial pivoting)

def _lu_solve(lu_packed, perm, b, transposed=False, conjugate=False):
    """x with a @ x = b (or a.T @ x = b, or with conjugate a^H @ x = b), given a's LU
    factors; b (..., m, k) with a's batch dims."""
    tri = lax_linalg.triangular_solve
    if not transposed:
        pb = _take(b, perm[..., :, None], axis=-2)
        y = tri(lu_packed, pb, left_side=True, lower=True, unit_diagonal=True)
        return tri(lu_packed, y, left_side=True, lower=False)
    z = tri(lu_packed, b, left_side=True, lower=False, transpose_a=True, conjugate_a=conjugate)
    w = tri(lu_packed, z, left_side=True, lower=True, transpose_a=True, conjugate_a=conjugate,
            unit_diagonal=True)
    inverse = sorting.argsort(perm, axis=-1)
    return _take(w, inverse[..., :, None], axis=-2)


def _broadcast_batch(a, b):
    batch = shape.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    return (shape.broadcast_to(a, batch + tuple(a.shape[-2:])),
            shape.broadcast_to(b, batch + tuple(b.shape[-2:])))


def _solve_operands(name, a, b):
    """(a, b as stacked matrices, whether b was a vector): NumPy 2's rule, b is a
    vector only when it is 1-D."""
    a = _matrices(name, a, square=True)
    a, b = promote_inexact(a, asarray(b))
    vector = len(b.shape) == 1
    if vector:
        b = b[:, None]
    if len(b.shape) < 2 or b.shape[-2] != a.shape[-1]:
        raise LinAlgError(f"{name}: a of shape {tuple(a.shape)} and b of shape "
                          f"{tuple(b.shape) if not vector else (b.shape[0],)} do not match",
                          hint="b is (M,) or (..., M, K) for a of shape (..., M, M)")
    a, b = _broadcast_batch(a, b)
    return a, b, vector


def solve(a, b):
    """x with a @ x = b (LU with partial pivoting); b is (M,) or (..., M, K)."""
    a, b, vector = _solve_operands("solve", a, b)
    lu_packed, _, perm = lax_linalg.lu(a)
    x = _lu_solve(lu_packed, perm, b)
    return x[..., 0] if vector else x


def inv(a):
    """The inverse of each square matrix (NaN for a singular one)."""
    return lax_linalg.inv(_matrices("inv", a, square=True))


def _lu_sign_and_diagonal(name, a):
    a = _matrices(name, a, square=True)
    lu_packed, pivots, _ = lax_linalg.lu(a)
    return _pivots_sign(pivots, a.dtype), _main_diagonal(lu_packed)


def _pivots_sign(pivots, dtype):
    """The determinant of the row permutation that LU's pivots (row swaps) make."""
    n = pivots.shape[-1]
    swaps = reductions.sum(pivots != creation.arange(n, dtype=pivots.dtype), axis=-1)
    return ufuncs.where(swaps % 2 == 1, -1.0, 1.0).astype(dtype)


def det(a):
    """The determinant of each square matrix, from its LU factors; a singular one
    gives +0.0, as NumPy's (adding 0 turns the product's -0.0 into +0.0). Its
    derivative is the adjugate's, finite at singular matrices too (see _det_jvp)."""
    return _det(_matrices("det", a, square=True))


@custom_jvp
def _det(a):
    lu_packed, pivots, _ = lax_linalg.lu(a)
    return _det_from_lu(lu_packed, pivots)


def _det_from_lu(lu_packed, pivots):
    return _pivots_sign(pivots, lu_packed.dtype) * reductions.prod(
        _main_diagonal(lu_packed), axis=-1) + 0


@_det.defjvp
def _det_jvp(primals, tangents):
    """d det(a) = tr(adj(a) da). With a[perm] = l u: tr(adj(a) da) = sign tr(adj(u) m),
    m = l^-1 da[perm]. u' is u with zero pivots set to 1 and p the product of its
    pivots: adj(u) = p u'^-1 when no pivot is zero, p u'^-1 e_k e_k^T u'^-1 when only
    pivot k is (u's null vectors are u'^-1 e_k and its transpose's), and 0 is taken
    for more (exact when rank(a) < n - 1). The chain rule through lu instead divided
    by the zero pivot: NaN for every singular matrix."""
    (a,), (da,) = primals, tangents
    lu_packed, pivots, perm = lax_linalg.lu(a)
    n = a.shape[-1]
    eye = creation.eye(n, dtype=a.dtype)
    d = _main_diagonal(lu_packed)
    zero = d == 0
    d1 = ufuncs.where(zero, 1, d).astype(a.dtype)
    u1 = lu_packed + (d1 - d)[..., None] * eye     # (only the upper triangle is read)
    rows = (perm[..., :, None] == creation.arange(n, dtype=perm.dtype)).astype(a.dtype)
    m = _products.matmul(rows, da)                  # da[perm] (a gather's transpose
    #                                                 would be a complex scatter_add)
    m = lax_linalg.triangular_solve(lu_packed, m, left_side=True, lower=True,
                                    unit_diagonal=True)
    w = lax_linalg.triangular_solve(u1, m, left_side=True, lower=False)      # u'^-1 m
    v = lax_linalg.triangular_solve(u1, w, left_side=False, lower=False)     # .. u'^-1
    p = _pivots_sign(pivots, a.dtype) * reductions.prod(d1, axis=-1)
    zeros = reductions.sum(zero, axis=-1)
    one_zero = reductions.sum(ufuncs.where(zero, _main_diagonal(v), 0), axis=-1)
    t = ufuncs.where(zeros == 0, _main_diagonal(w).sum(axis=-1),
                     ufuncs.where(zeros == 1, one_zero, 0))
    return _det_from_lu(lu_packed, pivots), p * t


def slogdet(a):
    """(sign, log|det|) of each square matrix (for complex ones, sign is det / |det|);
    a singular one gives (0, -inf)."""
    sign, d = _lu_sign_and_diagonal("slogdet", a)
    if d.dtype.kind == "c":
        size = ufuncs.abs(d).astype(d.dtype)
        unit = ufuncs.where(size == 0, 0, d / ufuncs.where(size == 0, 1, size))
    else:
        unit = ufuncs.sign(d)
    sign = sign * reductions.prod(unit, axis=-1) + 0      # +0.0 when singular
    return SlogdetResult(sign, reductions.sum(ufuncs.log(ufuncs.abs(d)), axis=-1))


def matrix_power(a, n):
    """a multiplied by itself n times (n < 0: the inverse's power; n = 0: identity)."""
    n = static_int("matrix_power", "the exponent n", n) if not isinstance(n, bool) else int(n)
    a = asarray(a)
    if len(a.shape) < 2 or a.shape[-1] != a.shape[-2]:
        raise LinAlgError(f"matrix_power: needs square matrices, got shape {tuple(a.shape)}")
    if n < 0:
        a, n = inv(a), -n
    if n == 0:
        return shape.broadcast_to(creation.eye(a.shape[-1], dtype=a.dtype), tuple(a.shape))
    result, power = None, a
    while n:
        if n & 1:
            result = power if result is None else _products.matmul(result, power)
        n >>= 1
        if n:
            power = _products.matmul(power, power)
    return result


# ----------------------------------------------------------------------------
# Decompositions

def cholesky(a, /, *, upper=False):
    """The lower (or, with upper, upper) Cholesky factor, reading a's lower
    triangle; a matrix that is not positive definite gives a NaN factor."""
    l = lax_linalg.cholesky(_matrices("cholesky", a, square=True))
    return _H(l) if upper else l


def _check_uplo(name, UPLO):
    if UPLO not in ("L", "U"):
        raise ValueError(f"{name}: UPLO must be 'L' or 'U', got {UPLO!r}")
    return UPLO == "L"


def eigh(a, UPLO="L"):
    """(eigenvalues ascending, eigenvectors as columns) of each symmetric matrix,
    reading its lower ('L') or upper ('U') triangle."""
    lower = _check_uplo("eigh", UPLO)
    v, w = lax_linalg.eigh(_matrices("eigh", a, square=True), lower=lower)
    return EighResult(w, v)


def eigvalsh(a, UPLO="L"):
    """The ascending eigenvalues of each symmetric matrix."""
    return eigh(a, UPLO).eigenvalues


def eig(a):
    """(eigenvalues, right eigenvectors as unit-norm columns) of each square matrix,
    both complex (NumPy returns real arrays when every eigenvalue is real: a dtype
    that depends on values, which jit cannot give). Each eigenvector's largest
    component is real but of either sign (LAPACK's choice, which may flip between
    nearby matrices); derivatives are those of the branch at hand, and NaN/inf at
    repeated eigenvalues."""
    w, v = lax_linalg.eig(_matrices("eig", a, square=True, dtypes=_WITH_COMPLEX))
    return EigResult(w, v)


def eigvals(a):
    """The (complex) eigenvalues of each square matrix."""
    a = _matrices("eigvals", a, square=True, dtypes=_WITH_COMPLEX)
    return lax_linalg.eig(a, compute_right_eigenvectors=False)[0]


def _hermitian_svd(a, compute_uv):
    """SVD of symmetric matrices from eigh: s = |w| in descending order."""
    w, v = eigh(a)
    order = sorting.argsort(-ufuncs.abs(w), axis=-1)
    w = shape.take_along_axis(w, order, axis=-1)
    s = ufuncs.abs(w)
    if not compute_uv:
        return s
    v = _take(v, order[..., None, :], axis=-1)
    return SVDResult(v, s, _H(v * ufuncs.sign(w).astype(v.dtype)[..., None, :]))


def svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    """(U, S, Vh) with a = U[..., :k] * S @ Vh[..., :k, :], S descending; only S
    when not compute_uv. Differentiate with full_matrices=False unless square."""
    a = _matrices("svd", a)
    if hermitian:
        return _hermitian_svd(a, compute_uv)
    if not compute_uv:
        return lax_linalg.svd(a, compute_uv=False)
    return SVDResult(*lax_linalg.svd(a, full_matrices=bool(full_matrices)))


def svdvals(x, /):
    """The singular values of each matrix, descending."""
    return svd(x, compute_uv=False)


def qr(a, mode="reduced"):
    """QR with LAPACK's signs: mode 'reduced' (Q m x k), 'complete' (Q m x m) or
    'r' (R only, k x n); 'raw' (Householder form) is not offered."""
    a = _matrices("qr", a)
    if mode == "raw":
        raise NotImplementedError("qr: mode='raw' (LAPACK's Householder form) is not "
                                  "offered; use 'reduced', 'complete' or 'r'")
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"qr: unrecognized mode {mode!r}; use 'reduced', 'complete' or 'r'")
    q, r = lax_linalg.qr(a, full_matrices=mode == "complete")
    return r if mode == "r" else QRResult(q, r)


# ----------------------------------------------------------------------------
# Pseudo-inverse, least squares, rank

@custom_jvp
def _pinv(a, rcond):
    u, s, vt = lax_linalg.svd(a, full_matrices=False)
    cutoff = rcond[..., None] * reductions.max(s, axis=-1, keepdims=True, initial=0.0)
    large = s > cutoff
    s_inv = ufuncs.where(large, 1.0 / ufuncs.where(large, s, 1.0), 0.0)
    return _products.matmul(_H(vt) * s_inv.astype(a.dtype)[..., None, :], _H(u))


@_pinv.defjvp
def _pinv_jvp(primals, tangents):
    """Golub & Pereyra 1973: where the rank is locally constant,
    dp = -p da p + p p^H da^H (I - a p) + (I - p a) da^H p^H p."""
    (a, rcond), (da, _) = primals, tangents
    p = _pinv(a, rcond)
    mm = _products.matmul
    pt, dat = _H(p), _H(da)
    eye_m = creation.eye(a.shape[-2], dtype=a.dtype)
    eye_n = creation.eye(a.shape[-1], dtype=a.dtype)
    dp = (-mm(mm(p, da), p) + mm(mm(mm(p, pt), dat), eye_m - mm(a, p))
          + mm(mm(eye_n - mm(p, a), dat), mm(pt, p)))
    return p, dp


_NO_VALUE = object()


def pinv(a, rcond=None, hermitian=False, *, rtol=_NO_VALUE):
    """Moore-Penrose pseudo-inverse from the SVD, dropping singular values at or
    below rcond (default 1e-15; rtol=None: max(M, N) * eps) times the largest.
    Its derivative is the pseudo-inverse's where the rank does not change."""
    a = _matrices("pinv", a)
    if rcond is None:
        if rtol is _NO_VALUE:
            rcond = 1e-15
        elif rtol is None:
            rcond = max(a.shape[-2:]) * np.finfo(a.dtype).eps
        else:
            rcond = rtol
    elif rtol is not _NO_VALUE:
        raise ValueError("pinv: `rtol` and `rcond` can't be both set")
    rcond = shape.broadcast_to(asarray(rcond, _real(a.dtype)), tuple(a.shape[:-2]))
    if hermitian:  # the SVD of a symmetric matrix, from eigh (not differentiated apart)
        a = (a + _H(a)) * 0.5
    return _pinv(a, rcond)


def _rank_of(s, tol):
    return reductions.count_nonzero(s > tol, axis=-1)


def matrix_rank(A, tol=None, hermitian=False, *, rtol=None):
    """How many singular values exceed tol (default: the largest times
    max(M, N) * eps, or times rtol)."""
    if rtol is not None and tol is not None:
        raise ValueError("matrix_rank: `tol` and `rtol` can't be both set")
    A = to_inexact(asarray(A))
    if len(A.shape) < 2:
        return reductions.any(A != 0).astype(np.int32)
    A = _matrices("matrix_rank", A)
    s = svd(A, compute_uv=False, hermitian=hermitian)
    if tol is None:
        if rtol is None:
            rtol = max(A.shape[-2:]) * np.finfo(A.dtype).eps
        else:
            rtol = asarray(rtol, _real(A.dtype))[..., None]
        tol = reductions.max(s, axis=-1, keepdims=True, initial=0.0) * rtol
    else:
        tol = asarray(tol, _real(A.dtype))[..., None]
    return _rank_of(s, tol)


def lstsq(a, b, rcond=None):
    """(x, residuals, rank, s): the minimum-norm least-squares solution of a @ x = b
    (a is M x N, b is (M,) or (M, K)) from the pseudo-inverse, cutting singular
    values at or below rcond (default max(M, N) * eps) times the largest.
    residuals are the squared column norms of b - a @ x when M > N (NumPy also
    leaves them empty when a is rank-deficient: a shape that depends on values,
    which jit cannot give), else an empty array."""
    a = _matrices("lstsq", a)
    a, b = promote_inexact(a, asarray(b))
    if len(a.shape) != 2 or len(b.shape) not in (1, 2) or b.shape[0] != a.shape[0]:
        raise LinAlgError(f"lstsq: a of shape {tuple(a.shape)} and b of shape "
                          f"{tuple(b.shape)} do not match",
                          hint="a is (M, N) and b is (M,) or (M, K)")
    m, n = a.shape
    if rcond is None:
        rcond = np.finfo(a.dtype).eps * max(m, n)
    vector = len(b.shape) == 1
    b2 = b[:, None] if vector else b
    p = _pinv(a, asarray(rcond, _real(a.dtype)))
    x = _products.matmul(p, b2)
    s = svd(a, compute_uv=False)
    cutoff = rcond * reductions.max(s, initial=0.0)
    rank = _rank_of(s, cutoff)
    if m > n:
        r = b2 - _products.matmul(a, x)
        residuals = reductions.sum(_abs2(r), axis=0)
    else:
        residuals = creation.zeros((0,), a.dtype)
    return LstsqResult(x[:, 0] if vector else x, residuals, rank, s)


# ----------------------------------------------------------------------------
# Norms and condition numbers

def _vector_norm(x, ord, axes, keepdims):
    ax = ufuncs.abs(x)
    if ord is None or ord == 2:
        return ufuncs.sqrt(reductions.sum(_abs2(x), axis=axes, keepdims=keepdims))
    if ord == np.inf:
        return reductions.max(ax, axis=axes, keepdims=keepdims)
    if ord == -np.inf:
        return reductions.min(ax, axis=axes, keepdims=keepdims)
    if ord == 0:
        return reductions.sum((x != 0).astype(ax.dtype), axis=axes, keepdims=keepdims)
    if ord == 1:
        return reductions.sum(ax, axis=axes, keepdims=keepdims)
    if isinstance(ord, str):
        raise ValueError(f"norm: invalid norm order {ord!r} for vectors")
    total = reductions.sum(ax ** ord, axis=axes, keepdims=keepdims)
    return total ** (1.0 / ord)


def _keep(out, axes, keepdims):
    return shape.expand_dims(out, axes) if keepdims else out


def _matrix_norm(x, ord, row, col, keepdims):
    if ord in (None, "fro"):
        return ufuncs.sqrt(reductions.sum(_abs2(x), axis=(row, col), keepdims=keepdims))
    if ord in (2, -2, "nuc"):
        s = svdvals(shape.moveaxis(x, (row, col), (-2, -1)))
        out = (reductions.max(s, axis=-1) if ord == 2 else
               reductions.min(s, axis=-1) if ord == -2 else reductions.sum(s, axis=-1))
        return _keep(out, tuple(sorted((row, col))), keepdims)
    if ord in (1, -1, np.inf, -np.inf):
        summed, kept = (row, col) if ord in (1, -1) else (col, row)
        sums = reductions.sum(ufuncs.abs(x), axis=summed)
        kept -= kept > summed
        pick = reductions.max if ord in (1, np.inf) else reductions.min
        return _keep(pick(sums, axis=kept), tuple(sorted((row, col))), keepdims)
    raise ValueError(f"norm: invalid norm order {ord!r} for matrices")


def norm(x, ord=None, axis=None, keepdims=False):
    """NumPy's norm: the 2-norm of the flattened array by default; vector norms
    (ord p, inf, -inf, 0) along one axis; matrix norms ('fro', 'nuc', 1, -1, 2,
    -2, inf, -inf) over two axes. Its gradient at 0 is NaN for the 2-norms."""
    x = to_inexact(asarray(x))
    nd = len(x.shape)
    if axis is None:
        if ord is None:
            out = ufuncs.sqrt(reductions.sum(_abs2(x)))
            return shape.reshape(out, (1,) * nd) if keepdims else out
        if nd not in (1, 2):
            raise ValueError("norm: improper number of dimensions to norm (pass axis for "
                             "arrays of more than two dimensions)")
        axis = tuple(range(nd))
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    axes = tuple(canonicalize_axis("norm", a, nd, x.shape) for a in axes)
    if len(axes) == 1:
        return _vector_norm(x, ord, axes, keepdims)
    if len(axes) == 2:
        if axes[0] == axes[1]:
            raise ValueError("norm: duplicate axes given")
        return _matrix_norm(x, ord, axes[0], axes[1], keepdims)
    raise ValueError("norm: improper number of dimensions to norm")


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    """The Array API's vector norm over `axis` (all axes, as one vector, by default)."""
    x = to_inexact(asarray(x))
    nd = len(x.shape)
    if axis is None:
        out = _vector_norm(shape.reshape(x, (-1,)), ord, (0,), False)
        return shape.reshape(out, (1,) * nd) if keepdims else out
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    axes = tuple(canonicalize_axis("vector_norm", a, nd, x.shape) for a in axes)
    return _vector_norm(x, ord, axes, keepdims)


def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    """The Array API's matrix norm over the last two axes."""
    x = _matrices("matrix_norm", x)
    nd = len(x.shape)
    return _matrix_norm(x, ord, nd - 2, nd - 1, keepdims)


def cond(x, p=None):
    """The condition number in norm p: s_max / s_min for p None or 2 (s_min / s_max
    for -2), else norm(x, p) * norm(inv(x), p)."""
    x = _matrices("cond", x)
    if 0 in x.shape[-2:]:
        raise LinAlgError(f"cond: not defined on empty matrices, got {tuple(x.shape)}")
    if p in (None, 2, -2):
        s = svdvals(x)
        big, small = s[..., 0], s[..., -1]
        r = big / small if p != -2 else small / big
    else:
        if x.shape[-1] != x.shape[-2]:
            raise LinAlgError(f"cond: norm {p!r} needs square matrices, got {tuple(x.shape)}")
        r = norm(x, p, axis=(-2, -1)) * norm(inv(x), p, axis=(-2, -1))
    # as NumPy: a singular matrix's NaN (0 / 0) is inf unless x holds a NaN
    singular = ufuncs.isnan(r) & ~reductions.any(ufuncs.isnan(x), axis=(-2, -1))
    return ufuncs.where(singular, np.inf, r)


def multi_dot(arrays, *, out=None):
    """The product of a chain of matrices, multiplied in the cheapest order; the
    first may be 1-D (a row) and the last 1-D (a column)."""
    if out is not None:
        raise TypeError("multi_dot: out= is not supported (fgrad arrays are immutable)")
    arrays = [asarray(a) for a in arrays]
    if len(arrays) < 2:
        raise ValueError("multi_dot: expecting at least two arrays")
    if len(arrays) == 2:
        return _products.dot(arrays[0], arrays[1])
    first_vector, last_vector = len(arrays[0].shape) == 1, len(arrays[-1].shape) == 1
    if first_vector:
        arrays[0] = arrays[0][None, :]
    if last_vector:
        arrays[-1] = arrays[-1][:, None]
    for a in arrays:
        if len(a.shape) != 2:
            raise LinAlgError(f"multi_dot: {len(a.shape)}-dimensional array given; arrays "
                              f"must be two-dimensional (the first and last may be 1-D)")
    result = _chain(arrays, _chain_order([a.shape[0] for a in arrays] + [arrays[-1].shape[1]]),
                    0, len(arrays) - 1)
    if first_vector:
        result = result[0]
    if last_vector:
        result = result[..., 0]
    return result


def _chain_order(dims):
    """split[i][j]: where to split the product of matrices i..j (dynamic programming
    over the number of scalar multiplications)."""
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j], split[i][j] = min(
                (cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1], k)
                for k in range(i, j))
    return split


def _chain(arrays, split, i, j):
    if i == j:
        return arrays[i]
    k = split[i][j]
    return _products.dot(_chain(arrays, split, i, k), _chain(arrays, split, k + 1, j))


def tensorinv(a, ind=2):
    """The inverse of a seen as a matrix from its first `ind` axes to the rest."""
    a = asarray(a)
    rows = int(np.prod(a.shape[:ind]))
    inverse = inv(shape.reshape(a, (rows, -1)))
    return shape.reshape(inverse, tuple(a.shape[ind:]) + tuple(a.shape[:ind]))


def tensorsolve(a, b, axes=None):
    """x with tensordot(a, x, x.ndim) = b."""
    a, b = asarray(a), asarray(b)
    if axes is not None:
        nd = len(a.shape)
        moved = [canonicalize_axis("tensorsolve", k, nd) for k in axes]
        a = shape.moveaxis(a, moved, list(range(nd - len(moved), nd)))
    x_shape = tuple(a.shape[len(b.shape):])
    x = solve(shape.reshape(a, (int(np.prod(b.shape)), -1)), shape.reshape(b, (-1,)))
    return shape.reshape(x, x_shape)


# ----------------------------------------------------------------------------
# The Array API's variants of products NumPy also has in its main namespace

def outer(x1, x2, /):
    """The outer product of two 1-D arrays."""
    x1, x2 = asarray(x1), asarray(x2)
    if len(x1.shape) != 1 or len(x2.shape) != 1:
        raise LinAlgError(f"outer: input arrays must be one-dimensional, got shapes "
                          f"{tuple(x1.shape)} and {tuple(x2.shape)}")
    return _products.outer(x1, x2)


def cross(x1, x2, /, *, axis=-1):
    """The cross product of 3-vectors along `axis` (broadcast over the others)."""
    x1, x2 = asarray(x1), asarray(x2)
    for x in (x1, x2):
        nd = len(x.shape)
        if not nd or not -nd <= axis < nd or x.shape[axis] != 3:
            raise LinAlgError(f"cross: both inputs must hold 3-vectors along axis {axis}, "
                              f"got shapes {tuple(x1.shape)} and {tuple(x2.shape)}")
    return _products.cross(x1, x2, axis=axis)


def trace(x, /, *, offset=0, dtype=None):
    """The sum of each matrix's `offset` diagonal (over the last two axes)."""
    return _products.trace(x, offset, -2, -1, dtype)


def diagonal(x, /, *, offset=0):
    """The `offset` diagonal of each matrix (over the last two axes)."""
    return _products.diagonal(x, offset, -2, -1)


matmul = _products.matmul
tensordot = _products.tensordot
vecdot = _products.vecdot
matrix_transpose = shape.matrix_transpose
