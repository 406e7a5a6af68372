"""The Dirichlet distribution on the probability simplex, with SciPy's layout:
alpha is a vector of K concentrations and x holds the components along its
first axis, shape (K, ...) or (K - 1, ...) (the last component is then
1 - sum(x)); the result has x's trailing shape.

Where SciPy raises on x outside the simplex (an entry outside [0, 1], or
components that do not sum to 1 within a tolerance of 1e-9 in float64, 1e-4 in
float32, by the less precise of x's own dtype and the promoted one) the
log-density is -inf; a zero component with alpha < 1 gives +inf (the
density's limit; SciPy raises), and alpha with an entry <= 0 gives NaN.
"""
import numpy as _np

import fgrad.numpy as _fnp
from fgrad.scipy import special as _special

from ._util import promote as _promote

_SUM_TOLERANCE = {_np.dtype(_np.float64): 1e-9, _np.dtype(_np.float32): 1e-4,
                  _np.dtype(_np.float16): 1e-2}


def _tolerance(x):
    """The sum tolerance of x's own precision: float32 x promoted to float64 by
    float64 alpha still sums to 1 only within float32's rounding."""
    return _SUM_TOLERANCE.get(_np.dtype(_fnp.asarray(x).dtype), 0.0)


def _components(x, alpha):
    x, alpha = _promote(x, alpha)
    if alpha.ndim != 1:
        raise ValueError(f"dirichlet: alpha must be a vector of concentrations, got shape "
                         f"{alpha.shape}")
    k = alpha.shape[0]
    if x.ndim == 0 or x.shape[0] not in (k, k - 1):
        raise ValueError(f"dirichlet: x must have {k} or {k - 1} components along its first "
                         f"axis (alpha has {k}), got shape {x.shape}")
    if x.shape[0] == k - 1:
        x = _fnp.concatenate([x, 1 - _fnp.sum(x, axis=0, keepdims=True)], axis=0)
    return x, _fnp.reshape(alpha, (k,) + (1,) * (x.ndim - 1))


def logpdf(x, alpha):
    tol = _tolerance(x)
    x, alpha = _components(x, alpha)
    tol = max(tol, _SUM_TOLERANCE[x.dtype])
    in_simplex = (_fnp.all((x >= 0) & (x <= 1), axis=0)
                  & (_fnp.abs(_fnp.sum(x, axis=0) - 1) <= tol))
    log_norm = _fnp.sum(_special.gammaln(alpha), axis=0) - _special.gammaln(
        _fnp.sum(alpha, axis=0))
    out = _fnp.sum(_special.xlogy(alpha - 1, _fnp.where(in_simplex, x, 0.5)), axis=0) - log_norm
    out = _fnp.where(in_simplex, out, -_fnp.inf)
    valid = _fnp.all(alpha > 0, axis=0) & ~_fnp.any(_fnp.isnan(x), axis=0)
    return _fnp.where(valid, out, _fnp.nan)


def pdf(x, alpha):
    return _fnp.exp(logpdf(x, alpha))
