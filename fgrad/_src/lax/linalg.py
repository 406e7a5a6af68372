"""Matrix decompositions and triangular solves: the linear-algebra primitives.

Every primitive works on the last two axes of its operands; leading axes are
batch axes (the impl loops over them, one LAPACK call per matrix). Operands are
float32 or float64 (LAPACK's s- or d- routine). The eager impl and the native
jit lowering call the same routine with the same arguments (column-major
copies, workspace sizes from LAPACK's own workspace query, lwork = -1), so jit
and eager give the same bits.

Primitive            params                            outputs (in this order)              routine
cholesky_p(a)        -                                 l (..., n, n), lower triangular      ?potrf (uplo 'L')
triangular_solve_p   left_side, lower, transpose_a,    x (shape of b)                       BLAS ?trsm (alpha 1)
  (a, b)             conjugate_a, unit_diagonal
lu_p(a)              -                                 lu (..., m, n), pivots int32          ?getrf
                                                       (..., min(m, n)), permutation int32
                                                       (..., m)
qr_p(a)              full_matrices                     q (..., m, m or k), r (..., m or k,   ?geqrf + ?orgqr
                                                       n), k = min(m, n)
eigh_p(a)            lower                             v (..., n, n) eigenvectors as          ?syevd (jobz 'V')
                                                       columns, w (..., n) ascending
svd_p(a)             full_matrices, compute_uv         s (..., k) descending, then u, vt     ?gesdd (jobz 'A'/'S'
                                                       when compute_uv                       /'N')

Conventions, all as LAPACK returns them (and as NumPy/SciPy do): cholesky reads
only the lower triangle of `a` and returns a factor whose strictly upper
triangle is zero; a matrix that is not positive definite gives a factor filled
with NaN (that batch element only). lu's pivots are 0-based row swaps (row i
was swapped with row pivots[i], in order); `a[permutation] == l @ u` with l unit
lower triangular (strict lower part of lu) and u upper (upper part of lu); a
singular matrix still factors (u has a zero on its diagonal). eigh reads only
the `lower` (or upper) triangle. A decomposition that fails to converge
(LAPACK info > 0) gives NaN outputs for that batch element.

Derivatives are forward-mode rules written with other primitives (so they
differentiate again, and reverse mode transposes them): Murray 2016 for
Cholesky, Giles 2008 for LU, QR and the solves, Townsend 2016 / Seeger et al.
2017 for eigh and SVD. Where the derivative does not exist the rules give
inf/NaN rather than a finite wrong value: eigenvectors at repeated eigenvalues,
singular vectors at repeated or (for the non-square complement) zero singular
values. Singular vectors of full_matrices=True with m != n, and the Q of a
complete QR with m > n, are not unique functions of `a`: their JVP raises.
"""
import numpy as np
from scipy.linalg import blas as _blas
from scipy.linalg import lapack as _lapack

from ..batching import axis_size_of
from ..core import Primitive, ShapedArray, get_aval
from ..errors import FgradTypeError
from ._util import shapes_str
from .slicing import batch_at

_PREFIX = {np.dtype(np.float32): "s", np.dtype(np.float64): "d"}


def _routine(module, name, dtype):
    """The LAPACK/BLAS wrapper `name` (without its type prefix) for `dtype`."""
    return getattr(module, _PREFIX[np.dtype(dtype)] + name)


def _check_matrix(name, a, square=False):
    if a.ndim < 2:
        raise FgradTypeError(f"{name}: needs a matrix (at least 2 dims), got {a.str_short()}",
                             hint="stack vectors into a matrix, or reshape to (..., m, n)")
    if square and a.shape[-1] != a.shape[-2]:
        raise FgradTypeError(f"{name}: needs square matrices, got {a.str_short()}",
                             hint="the last two dims must be equal")
    if np.dtype(a.dtype) not in _PREFIX:
        raise FgradTypeError(f"{name}: supports float32 and float64, got {a.str_short()}",
                             hint="convert with .astype(float32) or .astype(float64)")


def _not_weak(count):
    return lambda params: [False] * count


def _lwork(query):
    """LAPACK's preferred workspace size from a workspace-query result."""
    return max(1, int(np.asarray(query).ravel()[0].real))


def _batch_rule(p):
    """Move every operand's batch dim to the front (broadcasting unbatched ones):
    the primitive already maps over leading dims."""
    def batch(vals, dims, **params):
        size = axis_size_of(vals, dims)
        vals = [batch_at(v, d, 0, size) for v, d in zip(vals, dims)]
        outs = p.bind(*vals, **params)
        return outs, ([0] * len(outs) if p.multiple_results else 0)
    return batch


def _primitive(name, impl, abstract_eval, outputs):
    p = Primitive(name, multiple_results=outputs > 1)
    p.impl = impl
    p.abstract_eval = abstract_eval
    if outputs > 1:
        p.out_weak_types = _not_weak(outputs)
    p.batch = _batch_rule(p)
    return p


# ----------------------------------------------------------------------------
# cholesky

def _cholesky_abstract_eval(a):
    _check_matrix("cholesky", a, square=True)
    return ShapedArray(a.shape, a.dtype, False)


def _cholesky_impl(a):
    """?potrf with uplo 'L' per matrix; info > 0 (not positive definite) -> NaN."""
    out = np.zeros(a.shape, a.dtype)
    if a.shape[-1] == 0:
        return out
    potrf = _routine(_lapack, "potrf", a.dtype)
    for i in np.ndindex(a.shape[:-2]):
        l, info = potrf(a[i], lower=1, clean=1)
        out[i] = l if info == 0 else np.nan
    return out


cholesky_p = _primitive("cholesky", _cholesky_impl, _cholesky_abstract_eval, 1)


def cholesky(a):
    """Lower Cholesky factor l of each matrix (a = l @ l.T), reading only a's lower
    triangle; NaN where a matrix is not positive definite."""
    _cholesky_abstract_eval(get_aval(a))
    return cholesky_p.bind(a)


# ----------------------------------------------------------------------------
# triangular_solve

def _triangular_solve_abstract_eval(a, b, *, left_side, lower, transpose_a, conjugate_a,
                                    unit_diagonal):
    _check_matrix("triangular_solve", a, square=True)
    _check_matrix("triangular_solve", b)
    if a.dtype != b.dtype:
        raise FgradTypeError(f"triangular_solve: operands of different dtypes: "
                             f"{shapes_str([a, b])}", hint="convert one with .astype(...)")
    if a.shape[:-2] != b.shape[:-2]:
        raise FgradTypeError(f"triangular_solve: batch dims differ: {shapes_str([a, b])}",
                             hint="broadcast a and b to common leading dims first")
    k = b.shape[-2] if left_side else b.shape[-1]
    if a.shape[-1] != k:
        side = "rows" if left_side else "columns"
        raise FgradTypeError(f"triangular_solve: a is {a.shape[-1]}x{a.shape[-1]} but b has "
                             f"{k} {side}: {shapes_str([a, b])}",
                             hint="left_side=True solves op(a) @ x = b, left_side=False "
                                  "x @ op(a) = b")
    return ShapedArray(b.shape, b.dtype, False)


def _triangular_solve_impl(a, b, *, left_side, lower, transpose_a, conjugate_a,
                           unit_diagonal):
    """BLAS ?trsm per matrix: op(a) x = b (left) or x op(a) = b (right), op(a) = a,
    a.T (transpose_a) or, for complex, conj(a) / a^H; no check for singularity
    (a zero on the diagonal gives inf/NaN)."""
    out = np.zeros(b.shape, b.dtype)
    if b.size == 0:
        return out
    trsm = _routine(_blas, "trsm", b.dtype)
    trans = 0
    if transpose_a:
        trans = 2 if conjugate_a and a.dtype.kind == "c" else 1
    for i in np.ndindex(b.shape[:-2]):
        ai = np.conj(a[i]) if conjugate_a and not transpose_a and a.dtype.kind == "c" else a[i]
        out[i] = trsm(1.0, ai, b[i], side=0 if left_side else 1, lower=int(lower),
                      trans_a=trans, diag=int(unit_diagonal))
    return out


triangular_solve_p = _primitive("triangular_solve", _triangular_solve_impl,
                                _triangular_solve_abstract_eval, 1)


def triangular_solve(a, b, left_side=False, lower=False, transpose_a=False,
                     conjugate_a=False, unit_diagonal=False):
    """x with op(a) @ x = b (left_side) or x @ op(a) = b, where a is triangular
    (only its `lower` or upper triangle is read; with unit_diagonal its diagonal
    is taken to be ones) and op(a) is a, a.T (transpose_a) or conj as asked."""
    params = dict(left_side=bool(left_side), lower=bool(lower), transpose_a=bool(transpose_a),
                  conjugate_a=bool(conjugate_a), unit_diagonal=bool(unit_diagonal))
    _triangular_solve_abstract_eval(get_aval(a), get_aval(b), **params)
    return triangular_solve_p.bind(a, b, **params)


# ----------------------------------------------------------------------------
# lu

def _lu_abstract_eval(a):
    _check_matrix("lu", a)
    *batch, m, n = a.shape
    batch = tuple(batch)
    i32 = np.dtype(np.int32)
    return [ShapedArray(a.shape, a.dtype, False), ShapedArray(batch + (min(m, n),), i32, False),
            ShapedArray(batch + (m,), i32, False)]


def permutation_from_pivots(pivots, m):
    """The row permutation (int32, last axis m) that the row swaps `pivots` apply."""
    perm = np.broadcast_to(np.arange(m, dtype=np.int32), pivots.shape[:-1] + (m,)).copy()
    for i in np.ndindex(pivots.shape[:-1]):
        p = perm[i]
        for k, j in enumerate(pivots[i]):
            p[k], p[j] = p[j], p[k]
    return perm


def _lu_impl(a):
    """?getrf per matrix (partial pivoting); pivots made 0-based."""
    *batch, m, n = a.shape
    lu = np.zeros(a.shape, a.dtype)
    pivots = np.zeros(tuple(batch) + (min(m, n),), np.int32)
    if a.size:
        getrf = _routine(_lapack, "getrf", a.dtype)
        for i in np.ndindex(a.shape[:-2]):
            lu[i], pivots[i], _ = getrf(a[i])  # info > 0: singular, still factored
    return [lu, pivots, permutation_from_pivots(pivots, m)]


lu_p = _primitive("lu", _lu_impl, _lu_abstract_eval, 3)


def lu(a):
    """(lu, pivots, permutation) of LU with partial pivoting; see the module docstring."""
    _lu_abstract_eval(get_aval(a))
    return tuple(lu_p.bind(a))


# ----------------------------------------------------------------------------
# qr

def _qr_abstract_eval(a, *, full_matrices):
    _check_matrix("qr", a)
    *batch, m, n = a.shape
    batch = tuple(batch)
    k = m if full_matrices else min(m, n)
    return [ShapedArray(batch + (m, k), a.dtype, False),
            ShapedArray(batch + (k, n), a.dtype, False)]


def _qr_impl(a, *, full_matrices):
    """?geqrf (Householder reflectors), then ?orgqr forms q's first m (complete) or
    min(m, n) (reduced) columns; r is the upper triangle of geqrf's result."""
    *batch, m, n = a.shape
    k = min(m, n)
    cols = m if full_matrices else k
    q = np.zeros(tuple(batch) + (m, cols), a.dtype)
    r = np.zeros(tuple(batch) + (cols, n), a.dtype)
    if k == 0:
        q[...] = np.eye(m, cols, dtype=a.dtype)
        return [q, r]
    geqrf = _routine(_lapack, "geqrf", a.dtype)
    orgqr = _routine(_lapack, "orgqr", a.dtype)
    lwork_qr = _lwork(_routine(_lapack, "geqrf_lwork", a.dtype)(m, n)[0])
    reflectors = np.zeros((m, cols), a.dtype)
    lwork_q = _lwork(orgqr(reflectors, np.zeros(k, a.dtype), lwork=-1)[1])
    for i in np.ndindex(a.shape[:-2]):
        packed, tau, _, _ = geqrf(a[i], lwork=lwork_qr)
        r[i] = np.triu(packed[:cols])
        reflectors[:, :min(n, cols)] = packed[:, :min(n, cols)]
        q[i] = orgqr(reflectors, tau, lwork=lwork_q)[0]
    return [q, r]


qr_p = _primitive("qr", _qr_impl, _qr_abstract_eval, 2)


def qr(a, full_matrices=True):
    """(q, r) with a = q @ r, q orthonormal columns, r upper triangular (LAPACK's
    signs); complete (q m x m) when full_matrices, else reduced (k = min(m, n))."""
    _qr_abstract_eval(get_aval(a), full_matrices=bool(full_matrices))
    return tuple(qr_p.bind(a, full_matrices=bool(full_matrices)))


# ----------------------------------------------------------------------------
# eigh

def _eigh_abstract_eval(a, *, lower):
    _check_matrix("eigh", a, square=True)
    return [ShapedArray(a.shape, a.dtype, False), ShapedArray(a.shape[:-1], a.dtype, False)]


def _eigh_impl(a, *, lower):
    """?syevd (divide and conquer, eigenvectors) per matrix, reading the `lower`
    or upper triangle; info > 0 (no convergence) -> NaN."""
    v = np.zeros(a.shape, a.dtype)
    w = np.zeros(a.shape[:-1], a.dtype)
    n = a.shape[-1]
    if n == 0:
        return [v, w]
    syevd = _routine(_lapack, "syevd", a.dtype)
    work, iwork, _ = _routine(_lapack, "syevd_lwork", a.dtype)(n, compute_v=1, lower=int(lower))
    lwork, liwork = _lwork(work), _lwork(iwork)
    for i in np.ndindex(a.shape[:-2]):
        wi, vi, info = syevd(a[i], compute_v=1, lower=int(lower), lwork=lwork, liwork=liwork)
        if info:
            wi, vi = np.nan, np.nan
        v[i], w[i] = vi, wi
    return [v, w]


eigh_p = _primitive("eigh", _eigh_impl, _eigh_abstract_eval, 2)


def eigh(a, lower=True):
    """(v, w): eigenvectors (columns of v) and ascending eigenvalues w of each
    symmetric matrix, reading only its `lower` (or upper) triangle."""
    _eigh_abstract_eval(get_aval(a), lower=bool(lower))
    return tuple(eigh_p.bind(a, lower=bool(lower)))


# ----------------------------------------------------------------------------
# svd

def _svd_abstract_eval(a, *, full_matrices, compute_uv):
    _check_matrix("svd", a)
    *batch, m, n = a.shape
    batch = tuple(batch)
    k = min(m, n)
    s = ShapedArray(batch + (k,), a.dtype, False)
    if not compute_uv:
        return [s]
    ucols, vrows = (m, n) if full_matrices else (k, k)
    return [s, ShapedArray(batch + (m, ucols), a.dtype, False),
            ShapedArray(batch + (vrows, n), a.dtype, False)]


def _svd_impl(a, *, full_matrices, compute_uv):
    """?gesdd (divide and conquer) per matrix; info > 0 (no convergence) -> NaN."""
    *batch, m, n = a.shape
    outs = [np.zeros(aval.shape, a.dtype) for aval in _svd_abstract_eval(
        ShapedArray(a.shape, a.dtype), full_matrices=full_matrices, compute_uv=compute_uv)]
    if min(m, n) == 0:
        if compute_uv:  # the complement's basis: the identity's columns
            outs[1][...] = np.eye(*outs[1].shape[-2:], dtype=a.dtype)
            outs[2][...] = np.eye(*outs[2].shape[-2:], dtype=a.dtype)
        return outs
    gesdd = _routine(_lapack, "gesdd", a.dtype)
    flags = dict(compute_uv=int(compute_uv), full_matrices=int(full_matrices))
    lwork = _lwork(_routine(_lapack, "gesdd_lwork", a.dtype)(m, n, **flags)[0])
    for i in np.ndindex(a.shape[:-2]):
        u, s, vt, info = gesdd(a[i], lwork=lwork, **flags)
        parts = (s, u, vt) if compute_uv else (s,)
        for out, part in zip(outs, parts):
            out[i] = np.nan if info else part
    return outs


svd_p = _primitive("svd", _svd_impl, _svd_abstract_eval, 3)
svd_p.out_weak_types = lambda params: [False] * (3 if params["compute_uv"] else 1)


def svd(a, full_matrices=True, compute_uv=True):
    """Singular values s (descending), and with compute_uv (u, s, vt) where
    a = u[..., :k] * s @ vt[..., :k, :]; complete u, vt when full_matrices."""
    params = dict(full_matrices=bool(full_matrices), compute_uv=bool(compute_uv))
    _svd_abstract_eval(get_aval(a), **params)
    outs = svd_p.bind(a, **params)
    if compute_uv:
        s, u, vt = outs
        return u, s, vt
    return outs[0]
