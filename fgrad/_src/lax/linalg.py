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

from ..ad import defjvp, is_undefined
from ..batching import axis_size_of
from ..core import Array, Primitive, ShapedArray, get_aval
from ..errors import FgradTypeError
from ._util import shapes_str
from .dot_general import dot_general
from .elementwise import add, convert_element_type, div, eq, mul, neg, sub
from .reductions import reduce_sum
from .shape_ops import expand_dims, transpose
from .slicing import batch_at, iota, pad, slice_in_dim

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


# ----------------------------------------------------------------------------
# Helpers for the derivative rules (operands share their leading batch dims)

def _const(value, dtype):
    return Array(np.asarray(value, dtype), False)


def _mT(x):
    """Swap the last two axes."""
    nd = len(x.shape)
    return transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def _mm(a, b):
    """Batched matrix product over the shared leading dims."""
    nd = len(a.shape)
    batch = tuple(range(nd - 2))
    return dot_general(a, b, (((nd - 1,), (nd - 2,)), (batch, batch)))


def _tri(x, k, lower=True):
    """x's lower triangle (below and on the k-th diagonal), or its upper one (on and
    above the k-th diagonal), the rest zero."""
    m, n = x.shape[-2:]
    mask = np.tri(m, n, k) if lower else 1 - np.tri(m, n, k - 1)
    return mul(x, _const(mask, x.dtype))


def _diag(x):
    """The main diagonal of each (square) matrix."""
    n = x.shape[-1]
    return reduce_sum(mul(x, _const(np.eye(n), x.dtype)), (len(x.shape) - 1,))


def _symmetric_from(x, lower):
    """The symmetric matrix whose `lower` (or upper) triangle is x's."""
    if lower:
        return add(_tri(x, 0), _mT(_tri(x, -1)))
    return add(_tri(x, 0, lower=False), _mT(_tri(x, 1, lower=False)))


def _inverse_gaps(v):
    """F[..., i, j] = 1 / (v[j] - v[i]) off the diagonal, 0 on it: inf where two
    values are equal (there the derivative does not exist)."""
    n = v.shape[-1]
    nd = len(v.shape)
    gaps = sub(expand_dims(v, (nd - 1,)), expand_dims(v, (nd,)))
    eye = np.eye(n)
    safe = add(gaps, _const(eye, v.dtype))     # the diagonal gaps are exactly 0
    return mul(div(1.0, safe), _const(1 - eye, v.dtype))


# ----------------------------------------------------------------------------
# cholesky: dL = L phi(L^-1 dA L^-T), phi = lower triangle with half the diagonal
# (Murray 2016); dA is the symmetric matrix the tangent's lower triangle makes.

def _cholesky_jvp(primals, tangents):
    (a,), (da,) = primals, tangents
    l = cholesky_p.bind(a)
    if da is None:
        return l, None
    n = a.shape[-1]
    y = triangular_solve(l, _symmetric_from(da, True), left_side=True, lower=True)
    x = triangular_solve(l, y, left_side=False, lower=True, transpose_a=True)
    phi = mul(x, _const(np.tri(n, n, -1) + 0.5 * np.eye(n), a.dtype))
    return l, _mm(l, phi)


cholesky_p.jvp = _cholesky_jvp


# ----------------------------------------------------------------------------
# triangular_solve: linear in b; in a, d(op(a)^-1) = -op(a)^-1 op(da) op(a)^-1

def _op(x, transpose_a):
    return _mT(x) if transpose_a else x


def _triangle_read(da, lower, unit_diagonal):
    """The part of a tangent that triangular_solve reads."""
    offset = int(unit_diagonal) * (-1 if lower else 1)
    return _tri(da, offset, lower)


def _triangular_solve_jvp_a(g, x, a, b, *, left_side, lower, transpose_a, conjugate_a,
                            unit_diagonal):
    dop = _op(_triangle_read(g, lower, unit_diagonal), transpose_a)
    rhs = _mm(dop, x) if left_side else _mm(x, dop)
    return neg(triangular_solve_p.bind(
        a, rhs, left_side=left_side, lower=lower, transpose_a=transpose_a,
        conjugate_a=conjugate_a, unit_diagonal=unit_diagonal))


def _triangular_solve_transpose(ct, a, b, *, left_side, lower, transpose_a, conjugate_a,
                                unit_diagonal):
    if is_undefined(a):
        raise TypeError("triangular_solve is linear in b only; a must be known to transpose")
    return [None, triangular_solve_p.bind(a, ct, left_side=left_side, lower=lower,
                                          transpose_a=not transpose_a,
                                          conjugate_a=conjugate_a,
                                          unit_diagonal=unit_diagonal)]


defjvp(triangular_solve_p, _triangular_solve_jvp_a,
       lambda g, x, a, b, **params: triangular_solve_p.bind(a, g, **params))
triangular_solve_p.transpose = _triangular_solve_transpose


# ----------------------------------------------------------------------------
# lu: with l, u padded to square (identity in the padding), X = l^-1 P da u^-1
# gives dl = l tril(X, -1) and du = triu(X) u, packed as one tangent of lu.

def _permutation_matrix(perm, dtype):
    """P with P @ a == a[perm] (perm along the last axis)."""
    m = perm.shape[-1]
    nd = len(perm.shape)
    cols = iota(perm.dtype, tuple(perm.shape) + (m,), nd)
    return convert_element_type(eq(expand_dims(perm, (nd,)), cols), dtype)


def _padded_factors(lu_packed):
    m, n = lu_packed.shape[-2:]
    k = min(m, n)
    nd = len(lu_packed.shape)
    zero = _const(0, lu_packed.dtype)
    l = _tri(slice_in_dim(lu_packed, 0, k, axis=nd - 1), -1)
    if m > k:
        l = pad(l, zero, [(0, 0, 0)] * (nd - 1) + [(0, m - k, 0)])
    l = add(l, _const(np.eye(m), l.dtype))
    u = _tri(slice_in_dim(lu_packed, 0, k, axis=nd - 2), 0, lower=False)
    if n > k:
        u = pad(u, zero, [(0, 0, 0)] * (nd - 2) + [(0, n - k, 0), (0, 0, 0)])
        u = add(u, _const(np.diag([0.0] * k + [1.0] * (n - k)), u.dtype))
    return l, u


def _lu_jvp(primals, tangents):
    (a,), (da,) = primals, tangents
    lu_packed, pivots, perm = lu_p.bind(a)
    if da is None:
        return [lu_packed, pivots, perm], [None, None, None]
    l, u = _padded_factors(lu_packed)
    pda = _mm(_permutation_matrix(perm, a.dtype), da)
    la = triangular_solve(l, pda, left_side=True, lower=True, unit_diagonal=True)
    x = triangular_solve(u, la, left_side=False, lower=False)
    dlu = add(_mm(l, _tri(x, -1)), _mm(_tri(x, 0, lower=False), u))
    return [lu_packed, pivots, perm], [dlu, None, None]


lu_p.jvp = _lu_jvp


# ----------------------------------------------------------------------------
# qr (Giles 2008 / Walter & Lehmann): with R1 = r[:, :k], C = q^T da[:, :k] R1^-1 and
# the skew matrix W = tril(C, -1) - tril(C, -1)^T: dq = (da[:, :k] R1^-1 - q C) + q W,
# dr = q^T da - W r. Singular R1 (rank-deficient a) gives inf/NaN.

def _qr_jvp(primals, tangents, *, full_matrices):
    (a,), (da,) = primals, tangents
    m, n = a.shape[-2:]
    k = min(m, n)
    q, r = qr_p.bind(a, full_matrices=full_matrices)
    if da is None:
        return [q, r], [None, None]
    if full_matrices and m > n:
        raise NotImplementedError(
            "qr: the derivative of the complete q (full_matrices=True, more rows than "
            "columns) is not defined: its last m - n columns are any orthonormal basis of "
            "the complement. Use the reduced decomposition (mode='reduced').")
    nd = len(a.shape)
    r1 = slice_in_dim(r, 0, k, axis=nd - 1)
    da1 = slice_in_dim(da, 0, k, axis=nd - 1)
    da_rinv = triangular_solve(r1, da1, left_side=False, lower=False)
    c = _mm(_mT(q), da_rinv)
    low = _tri(c, -1)
    w = sub(low, _mT(low))
    dq = add(sub(da_rinv, _mm(q, c)), _mm(q, w))
    dr = sub(_mm(_mT(q), da), _mm(w, r))
    return [q, r], [dq, dr]


qr_p.jvp = _qr_jvp


# ----------------------------------------------------------------------------
# eigh: with dA the symmetric tangent (from the triangle read) and P = v^T dA v:
# dw = diag(P), dv = v (F * P), F[i, j] = 1 / (w[j] - w[i]); inf/NaN at repeated
# eigenvalues, where the eigenvectors are not differentiable.

def _eigh_jvp(primals, tangents, *, lower):
    (a,), (da,) = primals, tangents
    v, w = eigh_p.bind(a, lower=lower)
    if da is None:
        return [v, w], [None, None]
    p = _mm(_mT(v), _mm(_symmetric_from(da, lower), v))
    dv = _mm(v, mul(_inverse_gaps(w), p))
    return [v, w], [dv, _diag(p)]


eigh_p.jvp = _eigh_jvp


# ----------------------------------------------------------------------------
# svd (Townsend 2016): with a = u s v^T reduced, P = u^T da v, F[i, j] =
# 1 / (s[j]^2 - s[i]^2): ds = diag(P),
#   du = u (F * (P s + s P^T)) + (I - u u^T) da v / s,
#   dv = v (F * (s P + P^T s)) + (I - v v^T) da^T u / s.
# Repeated singular values give inf/NaN in du, dv; so does a zero singular value
# when the complement term is present (m != n); ds is defined everywhere but at
# repeated values' crossings (there it is one-sided, as the sort's).

def _svd_jvp(primals, tangents, *, full_matrices, compute_uv):
    (a,), (da,) = primals, tangents
    m, n = a.shape[-2:]
    k = min(m, n)
    if da is None:
        outs = svd_p.bind(a, full_matrices=full_matrices, compute_uv=compute_uv)
        return outs, [None] * len(outs)
    if compute_uv and full_matrices and m != n:
        raise NotImplementedError(
            "svd: the derivative of the complete singular vectors (full_matrices=True) of "
            "a non-square matrix is not defined: the extra columns are any orthonormal "
            "basis of the complement. Use full_matrices=False.")
    s, u, vt = svd_p.bind(a, full_matrices=False, compute_uv=True)
    v = _mT(vt)
    p = _mm(_mT(u), _mm(da, v))
    ds = _diag(p)
    if not compute_uv:
        return [s], [ds]
    nd = len(a.shape)
    s_row = expand_dims(s, (nd - 2,))          # s[j] along a row
    s_col = expand_dims(s, (nd - 1,))          # s[i] down a column
    f = _inverse_gaps(mul(s, s))
    du = _mm(u, mul(f, add(mul(p, s_row), mul(s_col, _mT(p)))))
    dv = _mm(v, mul(f, add(mul(s_col, p), mul(_mT(p), s_row))))
    if m > k:
        dav = div(_mm(da, v), s_row)
        du = add(du, sub(dav, _mm(u, _mm(_mT(u), dav))))
    if n > k:
        datu = div(_mm(_mT(da), u), s_row)
        dv = add(dv, sub(datu, _mm(v, _mm(vt, datu))))
    return [s, u, vt], [ds, du, _mT(dv)]


svd_p.jvp = _svd_jvp
