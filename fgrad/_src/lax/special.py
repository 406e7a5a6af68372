"""Special-function primitives (the lax family behind fgrad.scipy.special).

Every primitive here is element-wise over float operands of one dtype, and its
values are SciPy's own: the NumPy impl calls the scipy.special ufunc in float64
and rounds the result to the operands' dtype once; under jit the CPU backend
calls the same double-precision kernel through the function pointer that
scipy.special.cython_special exports (`cpu/scipy_kernels.py`), then rounds the
same way, so jit equals eager bit for bit. Hurwitz `zeta` has no exported
kernel: it runs as a NumPy step under jit too. One primitive is fgrad's own:
`xdivy` (x / y, 0 where x = 0), which the derivatives of xlogy and the
entropies need.

Derivatives are closed forms in these primitives and fgrad's element-wise ones,
so they differentiate again to any order (gammaln -> digamma -> zeta(2, x) ->
zeta(3, x) ...). The incomplete gamma and beta functions' derivatives with
respect to their shape parameters have no closed form: they come from the
expansions in `special_expansions.py` (NaN where those do not converge).
The derivative of zeta with respect to its exponent `x` is not implemented:
asking for it raises NotImplementedError naming the argument (never a silent
zero).
"""
import math

import numpy as np

from ..ad import defjvp
from ..batching import defbroadcasting
from ..core import Array, Primitive, is_weak
from . import elementwise as ew
from . import special_expansions as expansions
from ._util import lift_scalars, nary_rule

__all__ = ["KERNELS"]

# primitive name -> (scipy.special ufunc name, cython_special capsule of its
# double-precision kernel or None when SciPy exports none)
KERNELS = {
    "gammaln": ("gammaln", "gammaln"),
    "digamma": ("psi", "__pyx_fuse_1psi"),
    "gamma": ("gamma", "__pyx_fuse_1gamma"),
    "erfc": ("erfc", "__pyx_fuse_1erfc"),
    "erfcx": ("erfcx", "__pyx_fuse_1erfcx"),
    "ndtr": ("ndtr", "__pyx_fuse_1ndtr"),
    "ndtri": ("ndtri", "ndtri"),
    "log_ndtr": ("log_ndtr", "__pyx_fuse_1log_ndtr"),
    "i0": ("i0", "i0"), "i0e": ("i0e", "i0e"), "i1": ("i1", "i1"), "i1e": ("i1e", "i1e"),
    "zetac": ("zetac", "zetac"),
    "zeta": ("zeta", None),
    "beta": ("beta", "beta"),
    "betaln": ("betaln", "betaln"),
    "gammainc": ("gammainc", "gammainc"),
    "gammaincc": ("gammaincc", "gammaincc"),
    "xlogy": ("xlogy", "__pyx_fuse_1xlogy"),
    "xlog1py": ("xlog1py", "__pyx_fuse_1xlog1py"),
    "betainc": ("betainc", "__pyx_fuse_0betainc"),
    "gammaincinv": ("gammaincinv", "gammaincinv"),
    "gammainccinv": ("gammainccinv", "gammainccinv"),
    "betaincinv": ("betaincinv", "__pyx_fuse_0betaincinv"),
    "entr": ("entr", "entr"),
    "rel_entr": ("rel_entr", "rel_entr"),
    "kl_div": ("kl_div", "kl_div"),
}


def _scipy_impl(ufunc_name):
    """The scipy.special ufunc computed in float64 and rounded once to the
    operands' dtype (what compiled code does with the double kernel)."""
    ufunc = []        # looked up on first use: importing scipy.special takes a while

    def impl(*args):
        if not ufunc:
            import scipy.special
            ufunc.append(getattr(scipy.special, ufunc_name))
        dtype = args[0].dtype
        with np.errstate(all="ignore"):
            out = ufunc[0](*[np.asarray(a, np.float64) for a in args])
        return np.asarray(out).astype(dtype, copy=False)
    impl.__name__ = f"scipy_{ufunc_name}"
    return impl


def _special_prim(name, nargs):
    p = Primitive(name)
    p.impl = _scipy_impl(KERNELS[name][0])
    p.abstract_eval = nary_rule(name, "f")
    p.elementwise = True
    defbroadcasting(p)

    def op(*args):
        if len(args) != nargs:
            raise TypeError(f"{name} takes {nargs} operand(s), got {len(args)}")
        args = lift_scalars(args)
        if len({a.dtype for a in args}) > 1:
            args = _match_weak(args)
        return p.bind(*args)
    op.__name__ = name
    return p, op


def _match_weak(args):
    """Weakly typed operands take the dtype of the strongly typed ones."""
    strong = [a for a in args if not is_weak(a)]
    if strong and len({a.dtype for a in strong}) == 1:
        dt = strong[0].dtype
        return [a if a.dtype == dt else ew.convert_element_type(a, dt) for a in args]
    return args      # the shape rule reports the mismatch


def _c(x, value):
    return Array(np.asarray(value, x.dtype), True)


_SQRT_2PI = math.sqrt(2 * math.pi)
_TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)

# ----------------------------------------------------------------------------
# Gamma function family

gammaln_p, gammaln = _special_prim("gammaln", 1)
digamma_p, digamma = _special_prim("digamma", 1)
gamma_p, gamma = _special_prim("gamma", 1)
zeta_p, zeta = _special_prim("zeta", 2)          # Hurwitz zeta(s, q)
zetac_p, zetac = _special_prim("zetac", 1)       # Riemann zeta(s) - 1

defjvp(gammaln_p, lambda g, ans, x: ew.mul(g, digamma(x)))
# digamma' = polygamma(1, x) = zeta(2, x)
defjvp(digamma_p, lambda g, ans, x: ew.mul(g, zeta(_c(x, 2.0), x)))
defjvp(gamma_p, lambda g, ans, x: ew.mul(g, ew.mul(ans, digamma(x))))
# d/dq zeta(s, q) = -s zeta(s + 1, q); d/ds by Euler-Maclaurin (special_expansions)
defjvp(zeta_p, lambda g, ans, s, q: ew.mul(g, expansions.zeta_ds(s, q)),
       lambda g, ans, s, q: ew.mul(g, ew.neg(ew.mul(s, zeta(ew.add(s, _c(s, 1.0)), q)))))
defjvp(zetac_p, lambda g, ans, s: ew.mul(g, expansions.zeta_ds(s, _c(s, 1.0))))

beta_p, beta = _special_prim("beta", 2)
betaln_p, betaln = _special_prim("betaln", 2)


def _dbetaln(a, b):
    """d/da log B(a, b) = digamma(a) - digamma(a + b)."""
    return ew.sub(digamma(a), digamma(ew.add(a, b)))


# Each rule scales the tangent once (by the whole factor), so that the rule applied
# to a cotangent is exactly its transpose (tape.py).
defjvp(betaln_p, lambda g, ans, a, b: ew.mul(g, _dbetaln(a, b)),
       lambda g, ans, a, b: ew.mul(g, _dbetaln(b, a)))
defjvp(beta_p, lambda g, ans, a, b: ew.mul(g, ew.mul(ans, _dbetaln(a, b))),
       lambda g, ans, a, b: ew.mul(g, ew.mul(ans, _dbetaln(b, a))))

# ----------------------------------------------------------------------------
# x log y, x log1p y and the x / y that their derivatives need


def _xdivy_impl(x, y):
    with np.errstate(all="ignore"):
        return np.where(x == 0, x.dtype.type(0), np.true_divide(x, y)).astype(x.dtype)


xdivy_p = Primitive("xdivy")
xdivy_p.impl = _xdivy_impl
xdivy_p.abstract_eval = nary_rule("xdivy", "f")
xdivy_p.elementwise = True
defbroadcasting(xdivy_p)


def xdivy(x, y):
    """x / y, and +0 where x == 0 (whatever y is)."""
    x, y = lift_scalars((x, y))
    return xdivy_p.bind(x, y)


# d/dx (x / y) = 1 / y; d/dy = -x / y^2 (0 where x == 0)
defjvp(xdivy_p, lambda g, ans, x, y: ew.div(g, y),
       lambda g, ans, x, y: ew.neg(ew.mul(g, xdivy(x, ew.mul(y, y)))))

xlogy_p, xlogy = _special_prim("xlogy", 2)
xlog1py_p, xlog1py = _special_prim("xlog1py", 2)
defjvp(xlogy_p, lambda g, ans, x, y: ew.mul(g, ew.log(y)),
       lambda g, ans, x, y: ew.mul(g, xdivy(x, y)))
defjvp(xlog1py_p, lambda g, ans, x, y: ew.mul(g, ew.log1p(y)),
       lambda g, ans, x, y: ew.mul(g, xdivy(x, ew.add(y, _c(y, 1.0)))))

# Entropies: -x log x; x log(x / y); x log(x / y) - x + y (x log(x/y) is 0 at x = 0)
entr_p, entr = _special_prim("entr", 1)
rel_entr_p, rel_entr = _special_prim("rel_entr", 2)
kl_div_p, kl_div = _special_prim("kl_div", 2)


def _log_ratio(x, y):
    """log x - log y: d/dx x log(x / y) - 1 (-inf at x = 0)."""
    return ew.sub(ew.log(x), ew.log(y))


defjvp(entr_p, lambda g, ans, x: ew.neg(ew.mul(g, ew.add(ew.log(x), _c(x, 1.0)))))
defjvp(rel_entr_p, lambda g, ans, x, y: ew.mul(g, ew.add(_log_ratio(x, y), _c(x, 1.0))),
       lambda g, ans, x, y: ew.neg(ew.mul(g, xdivy(x, y))))
defjvp(kl_div_p, lambda g, ans, x, y: ew.mul(g, _log_ratio(x, y)),
       lambda g, ans, x, y: ew.mul(g, ew.sub(_c(y, 1.0), xdivy(x, y))))

# ----------------------------------------------------------------------------
# Incomplete gamma and beta functions (regularized)

gammainc_p, gammainc = _special_prim("gammainc", 2)
gammaincc_p, gammaincc = _special_prim("gammaincc", 2)
betainc_p, betainc = _special_prim("betainc", 3)


def _gamma_density(a, x):
    """x^(a-1) e^-x / Gamma(a): d/dx of the regularized lower incomplete gamma."""
    return ew.exp(ew.sub(ew.sub(xlogy(ew.sub(a, _c(a, 1.0)), x), x), gammaln(a)))


def _beta_density(a, b, x):
    """x^(a-1) (1-x)^(b-1) / B(a, b): d/dx of the regularized incomplete beta."""
    one = _c(a, 1.0)
    log_density = ew.add(xlogy(ew.sub(a, one), x), xlog1py(ew.sub(b, one), ew.neg(x)))
    return ew.exp(ew.sub(log_density, betaln(a, b)))


defjvp(gammainc_p, lambda g, ans, a, x: ew.mul(g, expansions.gammainc_da(a, x)),
       lambda g, ans, a, x: ew.mul(g, _gamma_density(a, x)))
defjvp(gammaincc_p, lambda g, ans, a, x: ew.neg(ew.mul(g, expansions.gammainc_da(a, x))),
       lambda g, ans, a, x: ew.neg(ew.mul(g, _gamma_density(a, x))))
defjvp(betainc_p, lambda g, ans, a, b, x: ew.mul(g, expansions.betainc_da(a, b, x)),
       lambda g, ans, a, b, x: ew.mul(g, expansions.betainc_db(a, b, x)),
       lambda g, ans, a, b, x: ew.mul(g, _beta_density(a, b, x)))

# Their inverses in the last argument (quantile functions), differentiated by the
# implicit function theorem: F(params, x(params, y)) = y gives dx/dy = 1 / F_x and
# dx/dparam = -F_param / F_x, with F_x the densities above.
gammaincinv_p, gammaincinv = _special_prim("gammaincinv", 2)
gammainccinv_p, gammainccinv = _special_prim("gammainccinv", 2)
betaincinv_p, betaincinv = _special_prim("betaincinv", 3)


def _implicit_param(density, d_param):
    def rule(g, ans, *params_and_y):
        params = params_and_y[:-1]
        return ew.mul(g, ew.neg(ew.div(d_param(*params, ans), density(*params, ans))))
    return rule


def _implicit_y(density, sign=1.0):
    def rule(g, ans, *params_and_y):
        slope = density(*params_and_y[:-1], ans)
        return ew.div(g if sign > 0 else ew.neg(g), slope)
    return rule


defjvp(gammaincinv_p, _implicit_param(_gamma_density, expansions.gammainc_da),
       _implicit_y(_gamma_density))
# Q(a, x) = y: Q_x = -density, Q_a = -P_a
defjvp(gammainccinv_p, _implicit_param(_gamma_density, expansions.gammainc_da),
       _implicit_y(_gamma_density, sign=-1.0))
defjvp(betaincinv_p, _implicit_param(_beta_density, expansions.betainc_da),
       _implicit_param(_beta_density, expansions.betainc_db),
       _implicit_y(_beta_density))

# ----------------------------------------------------------------------------
# Error function and normal distribution

erfc_p, erfc = _special_prim("erfc", 1)
erfcx_p, erfcx = _special_prim("erfcx", 1)
ndtr_p, ndtr = _special_prim("ndtr", 1)
ndtri_p, ndtri = _special_prim("ndtri", 1)
log_ndtr_p, log_ndtr = _special_prim("log_ndtr", 1)


def _neg_half_square(x):
    return ew.mul(_c(x, -0.5), ew.mul(x, x))


defjvp(erfc_p, lambda g, ans, x: ew.mul(g, ew.mul(_c(x, -_TWO_OVER_SQRT_PI),
                                                  ew.exp(ew.neg(ew.mul(x, x))))))
# erfcx(x) = e^(x^2) erfc(x): erfcx' = 2 x erfcx(x) - 2 / sqrt(pi)
defjvp(erfcx_p, lambda g, ans, x: ew.mul(g, ew.sub(ew.mul(_c(x, 2.0), ew.mul(x, ans)),
                                                   _c(x, _TWO_OVER_SQRT_PI))))
defjvp(ndtr_p, lambda g, ans, x: ew.mul(g, ew.div(ew.exp(_neg_half_square(x)),
                                                  _c(x, _SQRT_2PI))))
defjvp(ndtri_p, lambda g, ans, p: ew.mul(g, ew.mul(_c(p, _SQRT_2PI),
                                                   ew.exp(ew.mul(_c(p, 0.5),
                                                                 ew.mul(ans, ans))))))
# d log Phi(x) = phi(x) / Phi(x) = exp(-x^2/2 - log Phi(x)) / sqrt(2 pi): no
# underflow of phi or Phi in the far tails
defjvp(log_ndtr_p, lambda g, ans, x: ew.mul(g, ew.div(ew.exp(ew.sub(_neg_half_square(x), ans)),
                                                      _c(x, _SQRT_2PI))))

# ----------------------------------------------------------------------------
# Modified Bessel functions of the first kind, orders 0 and 1 (and scaled by e^-|x|)

i0_p, i0 = _special_prim("i0", 1)
i0e_p, i0e = _special_prim("i0e", 1)
i1_p, i1 = _special_prim("i1", 1)
i1e_p, i1e = _special_prim("i1e", 1)


def _over_x(v, x):
    """v / x with its limit 1/2 at x = 0 (v is i1(x) or i1e(x), both ~ x/2 there)."""
    zero = ew.eq(x, _c(x, 0.0))
    safe = ew.select_n(zero, x, _c(x, 1.0))
    return ew.select_n(zero, ew.div(v, safe), _c(x, 0.5))


defjvp(i0_p, lambda g, ans, x: ew.mul(g, i1(x)))
defjvp(i0e_p, lambda g, ans, x: ew.mul(g, ew.sub(i1e(x), ew.mul(ew.sign(x), ans))))
# I1' = I0 - I1 / x; for the scaled one also - sign(x) i1e
defjvp(i1_p, lambda g, ans, x: ew.mul(g, ew.sub(i0(x), _over_x(ans, x))))
defjvp(i1e_p, lambda g, ans, x: ew.mul(g, ew.sub(ew.sub(i0e(x), _over_x(ans, x)),
                                                 ew.mul(ew.sign(x), ans))))
