"""Matrix decompositions and triangular solves: the linear-algebra primitives.

Every primitive works on the last two axes of its operands; leading axes are
batch axes (the impl loops over them, one LAPACK call per matrix). Operands are
float32, float64, complex64 or complex128 (LAPACK's s-, d-, c- or z- routine;
for complex matrices ?ungqr and ?heevd stand in for ?orgqr and ?syevd, and
transposes below are conjugate transposes). eigh's eigenvalues and svd's
singular values are real; eig always returns complex results. The eager impl and the
native jit lowering call the same routine with the same arguments (column-major
copies, or for trsm the row-major operands read as their transposes; workspace
sizes from LAPACK's own workspace query, lwork = -1), so jit and eager give the
same bits.

Primitive (operands) / params -> outputs, in this order; the routine called:
- cholesky_p(a) -> l (..., n, n) lower triangular; ?potrf (uplo 'L').
- triangular_solve_p(a, b) / left_side, lower, transpose_a, conjugate_a,
  unit_diagonal -> x (shape of b); BLAS ?trsm (alpha 1).
- lu_p(a) -> lu (..., m, n), pivots int32 (..., min(m, n)), permutation int32
  (..., m); ?getrf.
- inv_p(a) -> the inverse (..., n, n); ?getrf then ?getri, on the row-major
  matrix read column-major (its transpose: the inverse of a.T, read back
  row-major, is a's), so no transposing copies; a singular matrix (?getri's
  info > 0) gives NaN.
- qr_p(a) / full_matrices -> q (..., m, m or k), r (..., m or k, n), k = min(m, n);
  ?geqrf, then ?orgqr.
- eigh_p(a) / lower -> v (..., n, n) eigenvectors as columns, w (..., n)
  ascending; ?syevd (jobz 'V').
- svd_p(a) / full_matrices, compute_uv -> s (..., k) descending, then (when
  compute_uv) u, vt; ?gesdd (jobz 'A', 'S' or 'N').
- eig_p(a) / compute_left_eigenvectors, compute_right_eigenvectors -> w (..., n)
  complex, then vl and/or vr (..., n, n) complex as asked; ?geev.

Conventions, all as LAPACK returns them (and as NumPy/SciPy do): cholesky reads
only the lower triangle of `a` and returns a factor whose strictly upper
triangle is zero; a matrix that is not positive definite gives a factor filled
with NaN (that batch element only). lu's pivots are 0-based row swaps (row i
was swapped with row pivots[i], in order); `a[permutation] == l @ u` with l unit
lower triangular (strict lower part of lu) and u upper (upper part of lu); a
singular matrix still factors (u has a zero on its diagonal). eigh reads only
the `lower` (or upper) triangle. A decomposition that fails to converge
(LAPACK info > 0) gives NaN outputs for that batch element. eig's
eigenvectors have unit norm and their largest component real, but of either
sign (LAPACK's choice can flip between nearby matrices, so they are smooth only
up to that sign). eigh, svd and eig give NaN outputs for a matrix holding an
inf or NaN (without calling LAPACK, which would fail on it).

Derivatives are forward-mode rules written with other primitives (so they
differentiate again, and reverse mode transposes them): Murray 2016 for
Cholesky, Giles 2008 for LU, QR, eig and the solves, Townsend 2016 / Seeger et
al. 2017 for eigh and SVD. Where the derivative does not exist the rules give
inf/NaN rather than a finite wrong value: eigenvectors at repeated eigenvalues
(eigh and eig), singular vectors at repeated or (for the non-square complement)
zero singular values. Singular vectors of full_matrices=True with m != n, and
the q of a complete QR with m > n, are not unique functions of `a`: their JVP
raises NotImplementedError.
"""
import numpy as np
from scipy.linalg import blas as _blas
from scipy.linalg import lapack as _lapack

from ..ad import defjvp, is_undefined
from ..batching import axis_size_of
from ..core import Array, Primitive, ShapedArray, get_aval
from ..errors import FgradTypeError
from .. import dtypes as _dtypes
from ._util import shapes_str
from .dot_general import dot_general
from .elementwise import (add, complex as make_complex, conj, convert_element_type, div, eq,
                          imag, mul, neg, real, sub)
from .reductions import argmax, reduce_sum
from .shape_ops import expand_dims, transpose
from .slicing import batch_at, iota, pad, slice_in_dim

_PREFIX = {np.dtype(np.float32): "s", np.dtype(np.float64): "d",
           np.dtype(np.complex64): "c", np.dtype(np.complex128): "z"}
_ALL = tuple(_PREFIX)
_COMPLEX_NAMES = {"orgqr": "ungqr", "syevd": "heevd", "syevd_lwork": "heevd_lwork"}


def _routine(module, name, dtype):
    """The LAPACK/BLAS wrapper `name` (without its type prefix) for `dtype` (the
    complex routines of real-only names, e.g. orgqr -> ungqr, syevd -> heevd)."""
    if np.dtype(dtype).kind == "c":
        name = _COMPLEX_NAMES.get(name, name)
    return getattr(module, _PREFIX[np.dtype(dtype)] + name)


def _check_matrix(name, a, square=False, dtypes=_ALL):
    if a.ndim < 2:
        raise FgradTypeError(f"{name}: needs a matrix (at least 2 dims), got {a.str_short()}",
                             hint="stack vectors into a matrix, or reshape to (..., m, n)")
    if square and a.shape[-1] != a.shape[-2]:
        raise FgradTypeError(f"{name}: needs square matrices, got {a.str_short()}",
                             hint="the last two dims must be equal")
    if np.dtype(a.dtype) not in dtypes:
        names = " and ".join(", ".join(map(str, dtypes)).rsplit(", ", 1))
        raise FgradTypeError(f"{name}: supports {names}, got {a.str_short()}",
                             hint="convert with .astype(...)")


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
    (a zero on the diagonal gives inf/NaN).

    Row-major a and b are, read column-major, a.T and b.T; so trsm solves the
    transposed system (x.T op(a).T = b.T: the other side, the other triangle,
    the same trans flag) on them as they lie, with no transposing copies (the
    native lowering does the same, see `cpu/lapack.py`)."""
    out = np.zeros(b.shape, b.dtype)
    if b.size == 0:
        return out
    trsm = _routine(_blas, "trsm", b.dtype)
    trans = 0
    if transpose_a:
        trans = 2 if conjugate_a and a.dtype.kind == "c" else 1
    for i in np.ndindex(b.shape[:-2]):
        ai = np.conj(a[i]) if conjugate_a and not transpose_a and a.dtype.kind == "c" else a[i]
        out[i] = trsm(1.0, ai.T, b[i].T, side=1 if left_side else 0, lower=int(not lower),
                      trans_a=trans, diag=int(unit_diagonal)).T
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
    batch = pivots.shape[:-1]
    count = int(np.prod(batch))
    perm = np.broadcast_to(np.arange(m, dtype=np.int32), (count, m)).copy()
    rows = np.arange(count)
    for k, j in enumerate(pivots.reshape(count, pivots.shape[-1]).T):  # swap k <-> j at once
        at_k = perm[:, k].copy()
        perm[:, k] = perm[rows, j]
        perm[rows, j] = at_k
    return perm.reshape(batch + (m,))


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
# inv

def _inv_abstract_eval(a):
    _check_matrix("inv", a, square=True)
    return ShapedArray(a.shape, a.dtype, False)


def _inv_impl(a):
    """?getrf then ?getri per matrix, on a.T as it lies (a row-major matrix read
    column-major): inv(a.T).T == inv(a). The workspace from ?getri's query;
    info > 0 (a zero pivot: singular) gives NaN."""
    out = np.zeros(a.shape, a.dtype)
    if a.size == 0:
        return out
    n = a.shape[-1]
    getrf, getri = _routine(_lapack, "getrf", a.dtype), _routine(_lapack, "getri", a.dtype)
    lwork = _lwork(_routine(_lapack, "getri_lwork", a.dtype)(n)[0])
    for i in np.ndindex(a.shape[:-2]):
        lu_t, pivots, _ = getrf(a[i].T)
        x_t, info = getri(lu_t, pivots, lwork=lwork)
        out[i] = np.nan if info else x_t.T
    return out


inv_p = _primitive("inv", _inv_impl, _inv_abstract_eval, 1)


def inv(a):
    """The inverse of each square matrix, by LU with partial pivoting of its
    transpose (?getrf, ?getri); NaN for a singular one."""
    _inv_abstract_eval(get_aval(a))
    return inv_p.bind(a)


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
    return [ShapedArray(a.shape, a.dtype, False),
            ShapedArray(a.shape[:-1], _dtypes.real_dtype(a.dtype), False)]


def _eigh_impl(a, *, lower):
    """?syevd (?heevd for complex; divide and conquer, eigenvectors) per matrix,
    reading the `lower` or upper triangle (a complex diagonal's imaginary parts
    are taken as zero); an inf or NaN in that triangle, or info > 0 (no
    convergence), gives NaN."""
    v = np.zeros(a.shape, a.dtype)
    w = np.zeros(a.shape[:-1], _dtypes.real_dtype(a.dtype))
    n = a.shape[-1]
    if n == 0:
        return [v, w]
    syevd = _routine(_lapack, "syevd", a.dtype)
    query = _routine(_lapack, "syevd_lwork", a.dtype)(n, compute_v=1, lower=int(lower))
    sizes = dict(lwork=_lwork(query[0]), liwork=_lwork(query[1]))
    if a.dtype.kind == "c":
        sizes["lrwork"] = _lwork(query[2])
    for i in np.ndindex(a.shape[:-2]):
        read = np.tril(a[i]) if lower else np.triu(a[i])
        if not np.isfinite(read).all():   # LAPACK would fail on it (and print why)
            v[i], w[i] = np.nan, np.nan
            continue
        wi, vi, info = syevd(a[i], compute_v=1, lower=int(lower), **sizes)
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
    s = ShapedArray(batch + (k,), _dtypes.real_dtype(a.dtype), False)
    if not compute_uv:
        return [s]
    ucols, vrows = (m, n) if full_matrices else (k, k)
    return [s, ShapedArray(batch + (m, ucols), a.dtype, False),
            ShapedArray(batch + (vrows, n), a.dtype, False)]


def _svd_impl(a, *, full_matrices, compute_uv):
    """?gesdd (divide and conquer) per matrix; a matrix with an inf or NaN, or
    info != 0 (no convergence), gives NaN."""
    *batch, m, n = a.shape
    outs = [np.zeros(aval.shape, aval.dtype) for aval in _svd_abstract_eval(
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
        if not np.isfinite(a[i]).all():   # LAPACK would fail on it (and print why)
            for out in outs:
                out[i] = np.nan
            continue
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


def _is_complex(x):
    return np.dtype(x.dtype).kind == "c"


def _H(x):
    """The conjugate transpose of each matrix (the transpose of real ones)."""
    return conj(_mT(x)) if _is_complex(x) else _mT(x)


def _like(x, dtype):
    """Real x as `dtype` (a complex one), for products with complex values."""
    return convert_element_type(x, dtype) if np.dtype(x.dtype) != np.dtype(dtype) else x


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
    """The symmetric (Hermitian) matrix whose `lower` (or upper) triangle is x's; a
    complex diagonal's imaginary parts are dropped, as LAPACK drops them."""
    strict = _tri(x, -1) if lower else _tri(x, 1, lower=False)
    d = _diag(x)
    if _is_complex(x):
        d = _like(real(d), x.dtype)
    eye = _const(np.eye(x.shape[-1]), x.dtype)
    return add(add(strict, _H(strict)), mul(expand_dims(d, (len(x.shape) - 1,)), eye))


def _zero_like(x):
    return mul(x, _const(0, x.dtype))


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
# cholesky: dL = L phi(L^-1 dA L^-H), phi = lower triangle with half the diagonal
# (Murray 2016); dA is the Hermitian matrix the tangent's lower triangle makes.

def _cholesky_jvp(primals, tangents):
    (a,), (da,) = primals, tangents
    l = cholesky_p.bind(a)
    if da is None:
        return l, None
    n = a.shape[-1]
    y = triangular_solve(l, _symmetric_from(da, True), left_side=True, lower=True)
    x = triangular_solve(l, y, left_side=False, lower=True, transpose_a=True,
                         conjugate_a=_is_complex(l))
    phi = mul(x, _const(np.tri(n, n, -1) + 0.5 * np.eye(n), a.dtype))
    return l, _mm(l, phi)


cholesky_p.jvp = _cholesky_jvp


# ----------------------------------------------------------------------------
# triangular_solve: linear in b; in a, d(op(a)^-1) = -op(a)^-1 op(da) op(a)^-1

def _op(x, transpose_a, conjugate_a):
    if conjugate_a and _is_complex(x):
        x = conj(x)
    return _mT(x) if transpose_a else x


def _triangle_read(da, lower, unit_diagonal):
    """The part of a tangent that triangular_solve reads."""
    offset = int(unit_diagonal) * (-1 if lower else 1)
    return _tri(da, offset, lower)


def _triangular_solve_jvp_a(g, x, a, b, *, left_side, lower, transpose_a, conjugate_a,
                            unit_diagonal):
    dop = _op(_triangle_read(g, lower, unit_diagonal), transpose_a, conjugate_a)
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
# inv: d(a^-1) = -a^-1 da a^-1 (Giles 2008)

def _inv_jvp(primals, tangents):
    (a,), (da,) = primals, tangents
    x = inv_p.bind(a)
    if da is None:
        return x, None
    return x, neg(_mm(x, _mm(da, x)))


inv_p.jvp = _inv_jvp


# ----------------------------------------------------------------------------
# qr (Giles 2008 / Walter & Lehmann): with R1 = r[:, :k], C = q^H da[:, :k] R1^-1 and
# the skew-Hermitian W = tril(C, -1) - tril(C, -1)^H (+ i Im diag(C) for complex,
# where LAPACK's r has a real diagonal): dq = (da[:, :k] R1^-1 - q C) + q W,
# dr = q^H da - W r. Singular R1 (rank-deficient a) gives inf/NaN.

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
    c = _mm(_H(q), da_rinv)
    low = _tri(c, -1)
    w = sub(low, _H(low))
    if _is_complex(c):   # q^H dq is skew-Hermitian: its diagonal is imaginary
        eye = _const(np.eye(k), c.dtype)
        w = add(w, mul(_like(make_complex(_zero_like(real(c)), imag(c)), c.dtype), eye))
    dq = add(sub(da_rinv, _mm(q, c)), _mm(q, w))
    dr = sub(_mm(_H(q), da), _mm(w, r))
    return [q, r], [dq, dr]


qr_p.jvp = _qr_jvp


# ----------------------------------------------------------------------------
# eigh: with dA the Hermitian tangent (from the triangle read) and P = v^H dA v:
# dw = diag(P), dv = v (F * P), F[i, j] = 1 / (w[j] - w[i]); inf/NaN at repeated
# eigenvalues, where the eigenvectors are not differentiable. A complex eigenvector's
# phase is LAPACK's arbitrary choice: dv is the one with v^H dv zero on the diagonal.

def _eigh_jvp(primals, tangents, *, lower):
    (a,), (da,) = primals, tangents
    v, w = eigh_p.bind(a, lower=lower)
    if da is None:
        return [v, w], [None, None]
    p = _mm(_H(v), _mm(_symmetric_from(da, lower), v))
    dv = _mm(v, mul(_like(_inverse_gaps(w), p.dtype), p))
    dw = real(_diag(p)) if _is_complex(p) else _diag(p)
    return [v, w], [dv, dw]


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
    v = _H(vt)
    p = _mm(_H(u), _mm(da, v))
    ds = real(_diag(p)) if _is_complex(p) else _diag(p)
    if not compute_uv:
        return [s], [ds]
    nd = len(a.shape)
    sc = _like(s, a.dtype)
    s_row = expand_dims(sc, (nd - 2,))         # s[j] along a row
    s_col = expand_dims(sc, (nd - 1,))         # s[i] down a column
    f = _like(_inverse_gaps(mul(s, s)), a.dtype)
    du = _mm(u, mul(f, add(mul(p, s_row), mul(s_col, _H(p)))))
    dv = _mm(v, mul(f, add(mul(s_col, p), mul(_H(p), s_row))))
    if _is_complex(p):   # the phase shared by u[:, i] and v[:, i]: put on u, v^H dv = 0
        phase = make_complex(_zero_like(s), div(imag(_diag(p)), s))
        du = add(du, mul(u, expand_dims(phase, (nd - 2,))))
    if m > k:
        dav = div(_mm(da, v), s_row)
        du = add(du, sub(dav, _mm(u, _mm(_H(u), dav))))
    if n > k:
        datu = div(_mm(_H(da), u), s_row)
        dv = add(dv, sub(datu, _mm(v, _mm(vt, datu))))
    return [s, u, vt], [ds, du, _H(dv)]


svd_p.jvp = _svd_jvp


# ----------------------------------------------------------------------------
# eig: eigenvalues and eigenvectors of general (non-symmetric) matrices

def _eig_abstract_eval(a, *, compute_left_eigenvectors, compute_right_eigenvectors):
    _check_matrix("eig", a, square=True)
    c = _dtypes.complex_dtype(_dtypes.real_dtype(a.dtype))
    outs = [ShapedArray(a.shape[:-1], c, False)]
    outs += [ShapedArray(a.shape, c, False)] * (int(compute_left_eigenvectors)
                                                + int(compute_right_eigenvectors))
    return outs


def _complex_vectors(w_imag, v, dtype):
    """LAPACK's real packing of eigenvectors (a conjugate pair's vectors as the real
    and imaginary parts in columns j, j + 1) as complex vectors."""
    out = v.astype(dtype)
    for j in np.nonzero(w_imag > 0)[0]:
        out[:, j] = v[:, j] + 1j * v[:, j + 1]
        out[:, j + 1] = v[:, j] - 1j * v[:, j + 1]
    return out


def _eig_impl(a, *, compute_left_eigenvectors, compute_right_eigenvectors):
    """?geev per matrix (no balancing options: LAPACK's defaults). Eigenvectors have
    unit 2-norm and their largest component real; eigenvalues come in LAPACK's
    order. A matrix with infinite or NaN entries, or where geev fails (info > 0),
    gives NaN outputs."""
    avals = _eig_abstract_eval(ShapedArray(a.shape, a.dtype), compute_left_eigenvectors=
                               compute_left_eigenvectors, compute_right_eigenvectors=
                               compute_right_eigenvectors)
    outs = [np.zeros(v.shape, v.dtype) for v in avals]
    n = a.shape[-1]
    if n == 0:
        return outs
    cdt = avals[0].dtype
    geev = _routine(_lapack, "geev", a.dtype)
    flags = dict(compute_vl=int(compute_left_eigenvectors),
                 compute_vr=int(compute_right_eigenvectors))
    lwork = _lwork(_routine(_lapack, "geev_lwork", a.dtype)(n, **flags)[0])
    for i in np.ndindex(a.shape[:-2]):
        if not np.isfinite(a[i]).all():
            for out in outs:
                out[i] = np.nan
            continue
        if a.dtype.kind == "f":
            wr, wi, vl, vr, info = geev(a[i], lwork=lwork, **flags)
            w = wr + 1j * wi
            vl, vr = _complex_vectors(wi, vl, cdt), _complex_vectors(wi, vr, cdt)
        else:
            w, vl, vr, info = geev(a[i], lwork=lwork, **flags)
        parts = [w] + [vl] * flags["compute_vl"] + [vr] * flags["compute_vr"]
        for out, part in zip(outs, parts):
            out[i] = np.nan if info else part
    return outs


eig_p = _primitive("eig", _eig_impl, _eig_abstract_eval, 3)
eig_p.out_weak_types = lambda params: [False] * len(_eig_abstract_eval(
    ShapedArray((1, 1), np.dtype(np.float64)), **params))


def eig(a, compute_left_eigenvectors=False, compute_right_eigenvectors=True):
    """Eigenvalues w (complex, LAPACK's order) of each square matrix, then its left
    eigenvectors (columns, u^H a = w u^H) and right ones (a v = w v) as asked."""
    params = dict(compute_left_eigenvectors=bool(compute_left_eigenvectors),
                  compute_right_eigenvectors=bool(compute_right_eigenvectors))
    _eig_abstract_eval(get_aval(a), **params)
    return tuple(eig_p.bind(a, **params))


def _first_largest(v):
    """One-hot (along axis -2) of each column's first component of largest modulus."""
    nd = len(v.shape)
    size = add(mul(real(v), real(v)), mul(imag(v), imag(v)))
    k = argmax(size, nd - 2, np.int32)
    rows = iota(np.int32, tuple(v.shape), nd - 2)
    return convert_element_type(eq(rows, expand_dims(k, (nd - 2,))), v.dtype)


def _keep_normalized(v, dv):
    """dv plus the multiple of each column v_j that keeps LAPACK's normalization of
    v_j (unit 2-norm, its first largest component real)."""
    nd = len(v.shape)
    norm_part = real(reduce_sum(mul(conj(v), dv), (nd - 2,)))
    pick = _first_largest(v)
    ratio = div(reduce_sum(mul(pick, dv), (nd - 2,)), reduce_sum(mul(pick, v), (nd - 2,)))
    c = make_complex(neg(norm_part), neg(imag(ratio)))
    return add(dv, mul(v, expand_dims(c, (nd - 2,))))


def _eig_jvp(primals, tangents, *, compute_left_eigenvectors, compute_right_eigenvectors):
    """With u, v the left and right eigenvectors, D = diag(u^H v) and
    Q = D^-1 u^H da v (= v^-1 da v), F[i, j] = 1 / (w[j] - w[i]):
    dw = diag(Q); dv = v (F * Q); du = u K^H with K[i, j] = -D[i] F[i, j] Q[i, j] / D[j]
    (from differentiating u^H a = w u^H); then a multiple of each vector is added to
    keep LAPACK's normalization (unit norm, largest component real). Repeated
    eigenvalues give inf/NaN; so does a defective matrix (D singular)."""
    (a,), (da,) = primals, tangents
    params = dict(compute_left_eigenvectors=compute_left_eigenvectors,
                  compute_right_eigenvectors=compute_right_eigenvectors)
    if da is None:
        outs = eig_p.bind(a, **params)
        return outs, [None] * len(outs)
    w, u, v = eig_p.bind(a, compute_left_eigenvectors=True, compute_right_eigenvectors=True)
    nd = len(a.shape)
    uh = conj(_mT(u))
    dac = convert_element_type(da, w.dtype) if da.dtype != w.dtype else da
    d = _diag(_mm(uh, v))
    q = div(_mm(uh, _mm(dac, v)), expand_dims(d, (nd - 1,)))
    f_q = mul(_inverse_gaps(w), q)
    outs, touts = [w], [_diag(q)]
    if compute_left_eigenvectors:
        k = div(mul(expand_dims(d, (nd - 1,)), f_q), expand_dims(d, (nd - 2,)))
        outs.append(u)
        touts.append(_keep_normalized(u, neg(_mm(u, conj(_mT(k))))))
    if compute_right_eigenvectors:
        outs.append(v)
        touts.append(_keep_normalized(v, _mm(v, f_q)))
    return outs, touts


eig_p.jvp = _eig_jvp
