"""`minimize(fun, x0, args=(), method=..., tol=None, bounds=None, options=None)`:
SciPy's interface to the BFGS and L-BFGS-B methods of `quasi_newton`, with
gradients from fgrad. The whole solve is `lax.while_loop`s, so it runs under jit
and vmap (say, over starting points). It is not meant to be differentiated:
reverse mode through a while_loop is refused, and forward mode differentiates
the iterations themselves (line-search decisions included), which follows the
solution's derivative only as far as the iterations have converged."""
from typing import Any, NamedTuple

import numpy as np

import fgrad.numpy as fnp
from ..core import Array, Tracer
from ..errors import FgradTypeError
from ..numpy.util import to_inexact
from . import quasi_newton

_MESSAGES = {
    0: "Optimization terminated successfully.",
    1: "Maximum number of iterations (or function evaluations) has been exceeded.",
    2: "Desired error not necessarily achieved: the line search found no acceptable step.",
    3: "NaN or infinite value encountered.",
}


class OptimizeResults(NamedTuple):
    """The result of `minimize`, with scipy.optimize.OptimizeResult's field names
    (a pytree: it passes through jit and vmap). hess_inv is BFGS's dense estimate
    of the inverse Hessian, None for L-BFGS-B. `message` reads `status`."""
    x: Any
    success: Any
    status: Any
    fun: Any
    jac: Any
    hess_inv: Any
    nfev: Any
    njev: Any
    nit: Any

    @property
    def message(self):
        if isinstance(self.status, Tracer) or np.ndim(self.status) != 0:
            raise TypeError("OptimizeResults.message needs one concrete status; read .status "
                            "outside jit/vmap (0 success, 1 iteration limit, 2 line search "
                            "failed, 3 NaN or inf)")
        return _MESSAGES[int(self.status)]


class Bounds(NamedTuple):
    """Box bounds lb ≤ x ≤ ub for L-BFGS-B (scalars or arrays shaped like x0;
    ±inf for none). scipy.optimize.Bounds objects are accepted too."""
    lb: Any
    ub: Any


_BFGS_OPTIONS = {"gtol": 1e-5, "norm": np.inf, "maxiter": None, "c1": 1e-4, "c2": 0.9,
                 "hess_inv0": None, "maxls": 30}
_LBFGSB_OPTIONS = {"maxcor": 10, "ftol": 2.220446049250313e-09, "gtol": 1e-5,
                   "maxiter": 15000, "maxfun": 15000, "maxls": 20}


def _options(method, defaults, options, tol, tol_sets):
    options = dict(options or {})
    unknown = sorted(set(options) - set(defaults))
    if unknown:
        raise ValueError(f"minimize: unknown option(s) {unknown} for method {method!r}; "
                         f"supported: {sorted(defaults)}")
    out = dict(defaults)
    if tol is not None:
        out.update({k: tol for k in tol_sets})
    out.update(options)
    return out


def _as_dtype(value, dtype):
    """value in dtype, rounded once (a list of floats, say, is not first made float32)."""
    if isinstance(value, (Array, Tracer)):
        return value.astype(dtype)
    return fnp.asarray(np.asarray(value, dtype))


def _bounds(bounds, x0):
    """(lower, upper) arrays shaped like x0 from SciPy's forms of bounds."""
    if hasattr(bounds, "lb") and hasattr(bounds, "ub"):
        lower, upper = bounds.lb, bounds.ub
    else:
        pairs = list(bounds)
        if len(pairs) != x0.shape[0] or any(np.ndim(p) != 1 or len(p) != 2 for p in pairs):
            raise ValueError(f"minimize: bounds must be {x0.shape[0]} (min, max) pairs, one per "
                             f"variable (None for no bound), or a Bounds(lb, ub); got {bounds!r}")
        lower = np.array([-np.inf if lo is None else lo for lo, _ in pairs], float)
        upper = np.array([np.inf if hi is None else hi for _, hi in pairs], float)
    lower, upper = (fnp.broadcast_to(_as_dtype(b, x0.dtype), x0.shape) for b in (lower, upper))
    if not isinstance(lower, Tracer) and not isinstance(upper, Tracer):
        if np.any(np.asarray(lower) > np.asarray(upper)):
            raise ValueError("minimize: a lower bound exceeds its upper bound")
    return lower, upper


def minimize(fun, x0, args=(), *, method, tol=None, bounds=None, options=None):
    """Minimise the scalar function fun(x, *args) from the 1-D x0.

    method: "BFGS" (options gtol, norm, maxiter (200·n), c1, c2, hess_inv0, maxls)
    or "L-BFGS-B" (options maxcor, ftol, gtol, maxiter, maxfun, maxls; bounds as
    (min, max) pairs or Bounds(lb, ub)). tol sets gtol (BFGS) or ftol and gtol
    (L-BFGS-B), as in SciPy. Returns OptimizeResults. See
    fgrad._src.scipy.quasi_newton for the algorithms and the line search.
    """
    if not callable(fun):
        raise TypeError(f"minimize: fun must be callable, got {type(fun).__name__}")
    if not isinstance(args, tuple):
        args = (args,)
    x0 = to_inexact(x0)
    if x0.ndim != 1:
        raise FgradTypeError(f"minimize: x0 must be 1-D, got shape {x0.shape}",
                             hint="ravel x0 and reshape inside fun")
    user_fun = fun

    def fun(x, *args):  # the value in x's dtype, whatever precision fun computed it in
        return fnp.asarray(user_fun(x, *args)).astype(x.dtype)

    name = method.upper() if isinstance(method, str) else method
    if name == "BFGS":
        if bounds is not None:
            raise ValueError("minimize: method 'BFGS' does not take bounds; use 'L-BFGS-B'")
        o = _options("BFGS", _BFGS_OPTIONS, options, tol, ("gtol",))
        maxiter = 200 * x0.shape[0] if o["maxiter"] is None else int(o["maxiter"])
        s = quasi_newton.bfgs(fun, x0, args, gtol=o["gtol"], norm=o["norm"], maxiter=maxiter,
                              c1=o["c1"], c2=o["c2"], hess_inv0=o["hess_inv0"],
                              maxls=int(o["maxls"]))
        hess_inv = s.H
    elif name == "L-BFGS-B":
        o = _options("L-BFGS-B", _LBFGSB_OPTIONS, options, tol, ("ftol", "gtol"))
        lower, upper = _bounds(Bounds(-np.inf, np.inf) if bounds is None else bounds, x0)
        s = quasi_newton.lbfgsb(fun, x0, args, lower, upper, maxcor=int(o["maxcor"]),
                                ftol=o["ftol"], gtol=o["gtol"], maxiter=int(o["maxiter"]),
                                maxfun=int(o["maxfun"]), maxls=int(o["maxls"]))
        hess_inv = None
    else:
        raise ValueError(f"minimize: method must be 'BFGS' or 'L-BFGS-B', got {method!r}")
    return OptimizeResults(x=s.x, success=s.status == 0, status=s.status, fun=s.f, jac=s.g,
                           hess_inv=hess_inv, nfev=s.nfev, njev=s.nfev, nit=s.k)
