"""The multivariate normal distribution N(mean, cov) over the last axis of x.

As in JAX, leading axes of x, mean and cov are batch axes that broadcast
together, and the result has their broadcast shape (SciPy instead squeezes it).
`cov` may also be a scalar (cov * identity) or a vector (a diagonal), as SciPy
allows (a variance <= 0 there gives NaN); a 0-d mean makes the distribution
univariate. The full-matrix case uses
a Cholesky factor of the symmetrized cov, (cov + cov^T) / 2, so the gradient with
respect to cov is symmetric. A cov that is not positive definite gives NaN
(SciPy raises); allow_singular=True (SciPy's pseudo-inverse density) is not
implemented.
"""
import fgrad.numpy as _fnp
from fgrad.lax import linalg as _linalg

from ._util import LOG_2PI as _LOG_2PI
from ._util import promote as _promote


def logpdf(x, mean=None, cov=1, allow_singular=False):
    if allow_singular:
        raise NotImplementedError(
            "multivariate_normal.logpdf: allow_singular=True (a density on the "
            "support of a singular cov) is not implemented; pass a positive definite cov")
    if mean is None:
        x = _promote(x)[0]
        mean = _fnp.zeros(x.shape[-1:], x.dtype)
    x, mean, cov = _promote(x, mean, cov)
    if mean.ndim == 0:
        return -0.5 * ((x - mean) ** 2 / cov + _fnp.log(cov) + _LOG_2PI)
    diff = x - mean
    dim = diff.shape[-1]
    if cov.ndim <= 1:
        var = _fnp.broadcast_to(_fnp.where(cov > 0, cov, _fnp.nan), (dim,))
        quad = _fnp.sum(diff * diff / var, axis=-1)
        logdet = _fnp.sum(_fnp.log(var))
    else:
        quad, logdet = _cholesky_terms(diff, cov)
    return -0.5 * (quad + logdet + dim * _LOG_2PI)


def pdf(x, mean=None, cov=1, allow_singular=False):
    return _fnp.exp(logpdf(x, mean, cov, allow_singular))


def _cholesky_terms(diff, cov):
    """(diff^T cov^-1 diff, log det cov) from the Cholesky factor l of cov: with
    l y = diff, the quadratic form is |y|^2 and log det cov = 2 sum(log diag l)."""
    dim = diff.shape[-1]
    if cov.shape[-2:] != (dim, dim):
        raise ValueError(f"multivariate_normal: cov has shape {cov.shape} but x - mean has "
                         f"{dim} components; cov must be ({dim}, {dim}) (with optional "
                         f"leading batch axes)")
    l = _linalg.cholesky(0.5 * (cov + _fnp.matrix_transpose(cov)))
    logdet = 2 * _fnp.sum(_fnp.log(_fnp.diagonal(l, axis1=-2, axis2=-1)), axis=-1)
    if cov.ndim == 2:  # one factor for every x: solve for all of them as columns
        batch = diff.shape[:-1]
        cols = _fnp.reshape(diff, (-1, dim)).T
        y = _linalg.triangular_solve(l, cols, left_side=True, lower=True)
        quad = _fnp.reshape(_fnp.sum(y * y, axis=0), batch)
    else:
        batch = _fnp.broadcast_shapes(diff.shape[:-1], cov.shape[:-2])
        l = _fnp.broadcast_to(l, batch + (dim, dim))
        rhs = _fnp.broadcast_to(diff, batch + (dim,))[..., None]
        y = _linalg.triangular_solve(l, rhs, left_side=True, lower=True)
        quad = _fnp.sum(y[..., 0] ** 2, axis=-1)
    return quad, logdet
