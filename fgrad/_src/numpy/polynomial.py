"""Polynomials (NumPy's legacy poly* functions, highest power first) and 1-d
convolution: polyval, polyfit, roots, poly, polyadd, polysub, polymul, polydiv,
polyder, polyint, vander, convolve, correlate, trim_zeros.

Everything with a static result shape is built from fgrad operations, so it
differentiates, batches and compiles. polyfit solves its least-squares problem
with a QR factorisation (modified Gram-Schmidt, applied twice) of the column-
scaled Vandermonde matrix, as NumPy scales its columns before lstsq; a
rank-deficient fit gives inf/NaN rather than NumPy's minimum-norm answer.
convolve/correlate shift and add over the shorter input's taps.
`roots` (eigenvalues of the companion matrix) runs NumPy on concrete
coefficients and needs complex results for complex roots: see its docstring.
"""
import numpy as np

from .. import lax
from ..core import Array, Tracer
from ..errors import ConcretizationError, FgradTypeError
from . import reductions, ufuncs
from .concrete import concrete_value
from .creation import ones_like, zeros
from .shape import concatenate, flip, stack
from .util import asarray, promote, promote_inexact, static_int, to_inexact


def _vector(name, p):
    p = asarray(p)
    if p.ndim != 1:
        raise FgradTypeError(f"{name}: expected a 1-d array of coefficients, got shape "
                             f"{tuple(p.shape)}")
    return p


def polyval(p, x, *, unroll=None):
    """p[0]·x^(n-1) + ... + p[n-1] by Horner's rule (x of any shape; `unroll` is
    accepted for JAX compatibility: the loop is always unrolled)."""
    p = _vector("polyval", p)
    p, x = promote(p, x)
    y = zeros(tuple(x.shape), p.dtype)
    for i in range(p.shape[0]):
        y = y * x + p[i]
    return y


def vander(x, N=None, increasing=False):
    """Columns x^(N-1), ..., x, 1 (increasing=True: 1, x, ..., x^(N-1)), built by
    repeated products so every power differentiates at x = 0."""
    x = asarray(x)
    if x.ndim != 1:
        raise FgradTypeError(f"vander: x must be 1-d, got shape {tuple(x.shape)}")
    n = x.shape[0] if N is None else static_int("vander", "N", N)
    if n < 0:
        raise ValueError("vander: N must be non-negative")
    cols, power = [], ones_like(x)
    for _ in range(n):
        cols.append(power)
        power = power * x
    if not cols:
        return zeros((x.shape[0], 0), x.dtype)
    out = stack(cols, axis=1)
    return out if increasing else flip(out, axis=1)


def _qr_solve(lhs, rhs):
    """Least-squares solution of lhs @ c = rhs (lhs m×k with m ≥ k, full rank) by
    modified Gram-Schmidt with reorthogonalisation, then back substitution."""
    m, k = lhs.shape
    qs, r = [], [[None] * k for _ in range(k)]
    b = rhs
    for j in range(k):
        v = lhs[:, j]
        coeffs = [0.0] * j
        for _ in range(2):      # twice is enough (Giraud et al. 2005)
            for i, q in enumerate(qs):
                c = reductions.sum(q * v)
                coeffs[i] = coeffs[i] + c
                v = v - c * q
        norm = ufuncs.sqrt(reductions.sum(v * v))
        q = v / norm
        for i in range(j):
            r[i][j] = coeffs[i]
        r[j][j] = norm
        qs.append(q)
    qb = [reductions.sum(q.reshape((m,) + (1,) * (b.ndim - 1)) * b, axis=0) for q in qs]
    c = [None] * k
    for j in reversed(range(k)):
        acc = qb[j]
        for i in range(j + 1, k):
            acc = acc - r[j][i] * c[i]
        c[j] = acc / r[j][j]
    return stack(c), r


def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """Least-squares polynomial fit of degree `deg` (coefficients highest power first;
    y may be 2-d: one fit per column). cov=True (or 'unscaled') also returns the
    coefficients' covariance, as NumPy does; full=True is not supported (it reports
    singular values, which need an SVD)."""
    if full:
        raise FgradTypeError("polyfit: full=True is not supported (NumPy reports the "
                             "singular values of the Vandermonde matrix)",
                             hint="call polyfit(x, y, deg) and compute residuals from "
                                  "polyval")
    deg = static_int("polyfit", "deg", deg)
    if deg < 0:
        raise ValueError("polyfit: expected deg >= 0")
    x, y = promote_inexact(asarray(x), asarray(y))
    if x.ndim != 1 or y.ndim not in (1, 2) or y.shape[0] != x.shape[0]:
        raise FgradTypeError(f"polyfit: x must be 1-d and y 1-d or 2-d with as many rows, "
                             f"got shapes {tuple(x.shape)} and {tuple(y.shape)}")
    order = deg + 1
    if x.shape[0] < order:
        raise ValueError(f"polyfit: {x.shape[0]} points cannot determine a polynomial of "
                         f"degree {deg} (fgrad does not compute NumPy's minimum-norm fit)")
    lhs, rhs = vander(x, order), y
    if w is not None:
        w = asarray(w).astype(x.dtype)
        lhs = lhs * w[:, None]
        rhs = rhs * (w if y.ndim == 1 else w[:, None])
    scale = ufuncs.sqrt(reductions.sum(lhs * lhs, axis=0))
    c, r = _qr_solve(lhs / scale, rhs)
    c = c / (scale if y.ndim == 1 else scale[:, None])
    if not cov:
        return c
    # inv(lhsᵀ lhs) in scaled coordinates is R⁻¹ R⁻ᵀ
    rinv = _upper_inverse(r, order, x.dtype)
    base = (rinv @ rinv.T) / (scale[:, None] * scale[None, :])
    if cov == "unscaled":
        return c, base
    if x.shape[0] <= order:
        raise ValueError("polyfit: the number of data points must exceed order to scale "
                         "the covariance matrix")
    resid = rhs - lhs @ c
    fac = reductions.sum(resid * resid, axis=0) / (x.shape[0] - order)
    if y.ndim == 1:
        return c, base * fac
    return c, base[:, :, None] * fac


def _upper_inverse(r, k, dtype):
    """The inverse of the upper-triangular k×k matrix given by rows of entries."""
    cols = []
    for j in range(k):      # solve R x = e_j by back substitution
        x = [None] * k
        for i in reversed(range(k)):
            acc = 1.0 if i == j else 0.0
            for t in range(i + 1, k):
                acc = acc - r[i][t] * x[t]
            x[i] = acc / r[i][i]
        cols.append(stack([asarray(v).astype(dtype) for v in x]))
    return stack(cols, axis=1)


def roots(p, *, strip_zeros=True):
    """The roots of the polynomial p (eigenvalues of its companion matrix, as
    NumPy computes them), on concrete coefficients. Only real roots can be
    returned until fgrad has complex dtypes: complex roots raise an error, as does
    a traced p (the eigenvalue routine is not an fgrad primitive yet)."""
    p = _vector("roots", p)
    if isinstance(p, Tracer):
        raise ConcretizationError(
            f"roots of a traced polynomial ({p.aval.str_short()}): fgrad computes roots "
            f"with NumPy on concrete coefficients only (no eigenvalue primitive yet, so "
            f"no derivative either).\n  hint: call roots outside jit/grad/vmap")
    if not strip_zeros:
        raise FgradTypeError("roots: strip_zeros=False is not supported",
                             hint="leading zeros are removed, as NumPy does")
    out = np.roots(np.asarray(p._value))
    if np.iscomplexobj(out):
        if np.any(out.imag != 0):
            raise FgradTypeError(
                f"roots: the polynomial has complex roots {out.tolist()}, and fgrad has no "
                f"complex dtype yet", hint="use numpy.roots for complex roots")
        out = out.real
    dtype = p.dtype if p.dtype.kind == "f" else to_inexact(p).dtype
    return Array(out.astype(dtype), False)


def poly(seq_of_zeros):
    """The coefficients (highest power first, leading 1) of the polynomial with the
    given real roots. A square matrix (NumPy: its characteristic polynomial) needs
    eigenvalues and is not supported."""
    z = asarray(seq_of_zeros)
    if z.ndim == 2 and z.shape[0] == z.shape[1] and z.shape[0] > 0:
        raise FgradTypeError("poly of a matrix (its characteristic polynomial) is not "
                             "supported", hint="pass the roots as a 1-d array")
    z = _vector("poly", z)
    z, = promote_inexact(z)
    c = Array(np.ones(1, z.dtype), False)
    for i in range(z.shape[0]):
        c = concatenate([c, zeros(1, z.dtype)]) - concatenate([zeros(1, z.dtype), c * z[i]])
    return c


def _pad_front(p, n):
    return p if p.shape[0] >= n else concatenate([zeros(n - p.shape[0], p.dtype), p])


def polyadd(a1, a2):
    a1, a2 = promote(_vector("polyadd", a1), _vector("polyadd", a2))
    n = max(a1.shape[0], a2.shape[0])
    return _pad_front(a1, n) + _pad_front(a2, n)


def polysub(a1, a2):
    a1, a2 = promote(_vector("polysub", a1), _vector("polysub", a2))
    n = max(a1.shape[0], a2.shape[0])
    return _pad_front(a1, n) - _pad_front(a2, n)


def polymul(a1, a2, *, trim_leading_zeros=False):
    """The product polynomial (the full convolution of the coefficients)."""
    return convolve(_vector("polymul", a1), _vector("polymul", a2))


def polyder(p, m=1):
    """The m-th derivative's coefficients."""
    p = _vector("polyder", p)
    m = static_int("polyder", "m", m)
    if m < 0:
        raise ValueError("polyder: order of derivative must be positive (see polyint)")
    for _ in range(m):
        n = max(p.shape[0] - 1, 0)
        p = p[:n] * Array(np.arange(n, 0, -1).astype(p.dtype), False)
    return p


def polyint(p, m=1, k=None):
    """The m-th antiderivative's coefficients; k: the integration constants (a
    scalar for all, or m values, lowest order last as NumPy)."""
    p = _vector("polyint", p)
    m = static_int("polyint", "m", m)
    if m < 0:
        raise ValueError("polyint: order of integral must be positive (see polyder)")
    p, = promote_inexact(p)
    ks = asarray(np.zeros(m) if k is None else k).astype(p.dtype)
    ks = ks.reshape(1) if ks.ndim == 0 else ks
    if ks.shape[0] == 1 and m > 1:
        ks = concatenate([ks] * m)
    if ks.shape[0] < m:
        raise ValueError("polyint: k must be a scalar or a rank-1 array of length 1 or >m")
    for i in range(m):
        n = p.shape[0]
        p = concatenate([p / Array(np.arange(n, 0, -1).astype(p.dtype), False), ks[i:i + 1]])
    return p


def polydiv(u, v, *, trim_leading_zeros=False):
    """(quotient, remainder) of u / v. The remainder keeps u's length (leading zeros
    included) unless trim_leading_zeros=True, which needs concrete values, as the
    trimmed length depends on them."""
    u, v = promote_inexact(_vector("polydiv", u), _vector("polydiv", v))
    n, m = u.shape[0], v.shape[0]
    if m == 0:
        raise ValueError("polydiv: the divisor has no coefficients")
    scale = 1.0 / v[0]
    r = u
    q_terms = []
    for k in range(max(n - m + 1, 0)):
        d = scale * r[k]
        q_terms.append(d)
        r = r - concatenate([zeros(k, u.dtype), d * v, zeros(n - m - k, u.dtype)])
    q = stack(q_terms) if q_terms else zeros(1, u.dtype)
    if trim_leading_zeros:
        r = trim_zeros(r, "f")
        r = r if r.shape[0] else zeros(1, u.dtype)
    return q, r


def trim_zeros(filt, trim="fb", axis=None):
    """filt without its leading ('f') and/or trailing ('b') zeros; the result's
    length depends on the values, so filt must be concrete."""
    filt = asarray(filt)
    known = concrete_value(filt)
    if known is None:
        raise ConcretizationError(
            f"trim_zeros of a traced value ({filt.aval.str_short()}): the result's length "
            f"depends on the values.\n  hint: call it outside jit/vmap, or keep the zeros "
            f"and mask them with where")
    if filt.ndim != 1:
        raise FgradTypeError("trim_zeros: filt must be 1-d", hint="ravel it first")
    nonzero = np.flatnonzero(known)
    if nonzero.size == 0:
        return filt[:0]
    lo = nonzero[0] if "f" in trim.lower() else 0
    hi = nonzero[-1] + 1 if "b" in trim.lower() else filt.shape[0]
    return filt[int(lo):int(hi)]


# ----------------------------------------------------------------------------
# 1-d convolution

_MODES = ("full", "same", "valid")


_UNROLL = 128   # kernels up to this many taps: one static slice per tap


def _convolve(a, v, mode):
    """full/same/valid convolution of 1-d a and v with len(a) >= len(v), by shift and
    add over v's taps (static slices up to _UNROLL taps, a fori_loop of dynamic
    slices beyond): work O((len(a) + len(v))·len(v)), memory O(len(a) + len(v)).
    Each tap's products land only where they overlap a (as in NumPy, sums start
    from +0.0), so an inf or NaN in v reaches no output it does not touch."""
    n, m = a.shape[0], v.shape[0]
    length = n + m - 1
    if m <= _UNROLL:
        full = zeros(length, a.dtype)
        for j in range(m):
            full = full + lax.pad(v[j] * a, 0, [(j, m - 1 - j, 0)])
    else:
        def add_tap(j, acc):
            tap = lax.dynamic_index_in_dim(v, j, 0, False)
            part = lax.dynamic_slice_in_dim(acc, j, n) + tap * a
            return lax.dynamic_update_slice_in_dim(acc, part, j, 0)
        full = lax.fori_loop(0, m, add_tap, zeros(length, a.dtype))
    if mode == "full":
        return full
    if mode == "same":
        start = (m - 1) // 2
        return full[start:start + n]
    return full[m - 1:n]


def _pair(name, a, v, mode):
    if mode not in _MODES:
        raise ValueError(f"{name}: mode must be one of {_MODES}, got {mode!r}")
    a, v = promote(_vector(name, a), _vector(name, v))
    if a.shape[0] == 0 or v.shape[0] == 0:
        raise ValueError(f"{name}: inputs cannot be empty")
    return a, v


def convolve(a, v, mode="full", *, precision=None, preferred_element_type=None):
    """The discrete linear convolution of two 1-d arrays (modes 'full', 'same',
    'valid', as NumPy: 'same' and 'valid' are taken relative to the longer input)."""
    a, v = _pair("convolve", a, v, mode)
    if v.shape[0] > a.shape[0]:
        a, v = v, a
    return _convolve(a, v, mode)


def correlate(a, v, mode="valid", *, precision=None, preferred_element_type=None):
    """Cross-correlation of two 1-d arrays, c[k] = sum_n a[n+k]·v[n] (modes as
    NumPy's, default 'valid')."""
    a, v = _pair("correlate", a, v, mode)
    if v.shape[0] > a.shape[0]:
        return flip(_convolve(v, flip(a, 0), mode), 0)
    return _convolve(a, flip(v, 0), mode)
