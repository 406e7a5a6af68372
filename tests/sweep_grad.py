"""Sweep: derivatives of public functions at edge points, against JAX and themselves.

Run with the peers' Python (it has JAX): `python tests/sweep_grad.py [substring]`.
For each case (a function written once against a numpy-like module `m`, and
float64 points, many at ties, zeros and boundaries) it checks:
  * fgrad's value, grad and Hessian-vector product against JAX's (x64);
  * forward against reverse: <u, J v> (jvp) == <J^T u, v> (vjp);
  * jit(grad) against grad, bit for bit up to a tolerance for math functions;
  * the gradient against central differences where the function is smooth there.
It prints what differs; a difference is then judged by hand (JAX is a reference,
not the specification: fgrad documents where it chose otherwise).
"""
import warnings

import numpy as np

import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp                                   # noqa: E402
import jax.scipy.special as jsp                          # noqa: E402
import jax.nn as jnn                                     # noqa: E402
import jax.scipy.stats as jst                             # noqa: E402

import fgrad                                             # noqa: E402
import fgrad.numpy as fnp                                # noqa: E402
import fgrad.scipy.special as fsp                        # noqa: E402
import fgrad.nn as fnn                                   # noqa: E402
import fgrad.scipy.stats as fst                          # noqa: E402
from sweep_util import run_cases                          # noqa: E402

warnings.simplefilter("ignore")


class M:
    """The module pair a case function sees: numpy, special, nn, and grad/jvp tools."""

    def __init__(self, np_, sp, nn):
        self.np, self.sp, self.nn = np_, sp, nn


FG = M(fnp, fsp, fnn)
JX = M(jnp, jsp, jnn)
CASES = []


def case(name, f, *points, smooth=False):
    for p in points:
        CASES.append((name, f, np.asarray(p, dtype=np.float64), smooth))


inf, nan = np.inf, np.nan
# --- elementwise at their edges (summed so that grad applies)
E = {
    "abs": [0.0, -0.0, [0.0, -1.0, 2.0]],
    "sqrt": [0.0, [0.0, 4.0]],
    "cbrt": [0.0, -8.0],
    "sign": [0.0, 1.0],
    "floor": [1.0, 1.5],
    "round": [0.5, 2.5],
    "log": [0.0],
    "log1p": [-1.0],
    "expm1": [0.0],
    "exp2": [0.0],
    "log2": [1.0],
    "tanh": [0.0, 30.0],
    "sinc": [0.0, 1e-9, 1.0],
    "arcsin": [1.0, 0.0],
    "arccos": [1.0],
    "arctan": [0.0, inf],
    "arcsinh": [0.0],
    "arccosh": [1.0],
    "arctanh": [0.0],
    "square": [0.0],
    "reciprocal": [0.0],
    "deg2rad": [1.0],
    "fix": [1.5],
    "nan_to_num": [inf, nan, 1.0],
    "sinh": [0.0, 800.0],
    "cosh": [0.0, 800.0],
}
for nm, pts in E.items():
    case(f"{nm}", lambda m, x, nm=nm: getattr(m.np, nm)(x).sum(), *pts)
B2 = {
    "maximum": [(0.0, 0.0), (1.0, 1.0), (-0.0, 0.0), (nan, 1.0)],
    "minimum": [(0.0, 0.0), (2.0, 2.0)],
    "fmax": [(1.0, 1.0), (nan, 1.0)],
    "fmin": [(1.0, 1.0), (1.0, nan)],
    "arctan2": [(0.0, 0.0), (0.0, -1.0), (1.0, 0.0)],
    "hypot": [(0.0, 0.0), (3.0, 4.0)],
    "power": [(0.0, 2.0), (0.0, 0.0), (0.0, 0.5), (2.0, 0.0), (-2.0, 3.0), (0.0, 1.0), (1.0, 0.0)],
    "float_power": [(0.0, 2.0), (0.0, 0.0)],
    "logaddexp": [(-inf, -inf), (inf, inf), (0.0, 0.0), (-inf, 1.0)],
    "logaddexp2": [(-inf, -inf), (0.0, 0.0)],
    "copysign": [(1.0, -0.0), (0.0, 1.0)],
    "mod": [(5.0, 3.0), (-5.0, 3.0), (6.0, 3.0)],
    "fmod": [(5.0, 3.0), (-5.0, 3.0)],
    "remainder": [(-5.5, 2.0)],
    "divide": [(1.0, 0.0), (0.0, 0.0)],
    "true_divide": [(3.0, 2.0)],
    "floor_divide": [(5.0, 2.0)],
    "heaviside": [(0.0, 0.5)],
    "ldexp" if False else "subtract": [(1.0, 2.0)],
}
for nm, pts in B2.items():
    case(f"{nm}", lambda m, x, nm=nm: getattr(m.np, nm)(x[0], x[1]), *pts)
case("x**2", lambda m, x: (x ** 2).sum(), 0.0)
case("x**3 neg", lambda m, x: (x ** 3).sum(), -2.0)
case("x**0", lambda m, x: (x ** 0).sum(), 0.0)
case("x**0.5", lambda m, x: (x ** 0.5).sum(), 0.0)
case("x**-1", lambda m, x: (x ** -1).sum(), 0.0)
case("x**1.5", lambda m, x: (x ** 1.5).sum(), 0.0)
case("x**y self", lambda m, x: x ** x, 0.0)
case("2**x", lambda m, x: 2.0 ** x, 0.0)
case("0**x", lambda m, x: m.np.zeros(()) ** x, 0.0, 1.0)
case("clip lo", lambda m, x: m.np.clip(x, 0.0, 1.0).sum(), [0.0, 1.0, 0.5, -1.0, 2.0])
case("clip params", lambda m, x: m.np.clip(x[0], x[1], x[2]), (0.0, 0.0, 1.0), (1.0, 0.0, 1.0),
     (0.5, 1.0, 0.0))
case("where sqrt", lambda m, x: m.np.where(x > 0, m.np.sqrt(x), 0.0).sum(), [-1.0, 4.0])
case("where log", lambda m, x: m.np.where(x > 0, m.np.log(x), x).sum(), [0.0, 2.0])
case("where div", lambda m, x: m.np.where(x != 0, 1 / x, 0.0).sum(), [0.0, 2.0])
case("where inf branch", lambda m, x: m.np.where(x < 1, x, m.np.exp(1000 * x)).sum(), [0.5])
case("relu", lambda m, x: m.nn.relu(x).sum(), [0.0, -1.0, 1.0])
case("relu6", lambda m, x: m.nn.relu6(x).sum(), [0.0, 6.0, 3.0])
case("leaky_relu", lambda m, x: m.nn.leaky_relu(x).sum(), [0.0, -1.0])
case("elu", lambda m, x: m.nn.elu(x).sum(), [0.0, -1.0, 1.0, -800.0])
case("celu", lambda m, x: m.nn.celu(x).sum(), [0.0, -1.0])
case("selu", lambda m, x: m.nn.selu(x).sum(), [0.0, -1.0])
case("gelu", lambda m, x: m.nn.gelu(x).sum(), [0.0, -1.0, 40.0, -40.0])
case("gelu exact", lambda m, x: m.nn.gelu(x, approximate=False).sum(), [0.0, -1.0, 40.0, -40.0])
case("silu", lambda m, x: m.nn.silu(x).sum(), [0.0, -800.0, 800.0])
case("softplus", lambda m, x: m.nn.softplus(x).sum(), [0.0, -800.0, 800.0])
case("sigmoid", lambda m, x: m.nn.sigmoid(x).sum(), [0.0, -800.0, 800.0])
case("log_sigmoid", lambda m, x: m.nn.log_sigmoid(x).sum(), [0.0, -800.0, 800.0])
case("hard_tanh", lambda m, x: m.nn.hard_tanh(x).sum(), [1.0, -1.0, 0.0])
case("hard_sigmoid", lambda m, x: m.nn.hard_sigmoid(x).sum(), [3.0, -3.0, 0.0])
case("hard_swish", lambda m, x: m.nn.hard_swish(x).sum(), [3.0, -3.0, 0.0])
case("soft_sign", lambda m, x: m.nn.soft_sign(x).sum(), [0.0])
case("mish", lambda m, x: m.nn.mish(x).sum(), [0.0, -100.0])
case("squareplus", lambda m, x: m.nn.squareplus(x).sum(), [0.0])
case("softmax", lambda m, x: (m.nn.softmax(x) * m.np.arange(3.0)).sum(), [0.0, 0.0, 0.0],
     [-inf, 0.0, 1.0], [1000.0, 0.0, -1000.0])
case("log_softmax", lambda m, x: (m.nn.log_softmax(x) * m.np.arange(3.0)).sum(), [0.0, 0.0, 0.0],
     [-inf, 0.0, 1.0])
case("logsumexp", lambda m, x: m.sp.logsumexp(x), [0.0, 0.0], [-inf, -inf], [-inf, 1.0],
     [inf, 1.0], [inf, inf])
case("logsumexp b", lambda m, x: m.sp.logsumexp(x, b=m.np.array([1.0, 0.0, -1.0])),
     [1.0, 2.0, 0.0])
case("standardize", lambda m, x: (m.nn.standardize(x) * m.np.arange(3.0)).sum(), [1.0, 2.0, 4.0])
# --- reductions with ties
R = [[1.0, 3.0, 3.0, -1.0], [2.0, 2.0, 2.0, 2.0], [0.0, -0.0, 0.0, -0.0], [1.0, nan, 2.0, 0.0]]
for nm in ["max", "min", "amax", "ptp", "median", "sum", "prod", "mean", "var", "std",
           "nanmax", "nanmin", "nansum", "nanmean", "nanmedian", "nanvar", "nanstd", "nanprod"]:
    case(f"{nm}", lambda m, x, nm=nm: getattr(m.np, nm)(x), *R)
case("prod zeros", lambda m, x: m.np.prod(x), [0.0, 2.0, 3.0], [0.0, 0.0, 3.0])
case("cumprod zeros", lambda m, x: (m.np.cumprod(x) * m.np.arange(1.0, 4.0)).sum(),
     [0.0, 2.0, 3.0], [2.0, 0.0, 0.0])
case("cumsum", lambda m, x: (m.np.cumsum(x) * m.np.arange(1.0, 4.0)).sum(), [1.0, 2.0, 3.0])
case("max axis", lambda m, x: (m.np.max(x.reshape(2, 2), axis=1) * m.np.array([1.0, 3.0])).sum(),
     [1.0, 1.0, 2.0, 2.0])
case("sort ties", lambda m, x: (m.np.sort(x) * m.np.arange(4.0)).sum(), *R[:3])
case("quantile", lambda m, x: m.np.quantile(x, 0.3), *R[:3])
case("percentile mid", lambda m, x: m.np.percentile(x, 50.0, method="midpoint"), *R[:3])
case("var 1", lambda m, x: m.np.var(x, ddof=1), [1.0, 1.0])
case("std0", lambda m, x: m.np.std(x), [1.0, 1.0])
case("norm", lambda m, x: m.np.linalg.norm(x), [0.0, 0.0], [3.0, 4.0])
case("norm 1", lambda m, x: m.np.linalg.norm(x, 1), [0.0, 0.0], [3.0, -4.0])
case("norm inf", lambda m, x: m.np.linalg.norm(x, np.inf), [3.0, -3.0], [0.0, 0.0])
case("norm -inf", lambda m, x: m.np.linalg.norm(x, -np.inf), [3.0, -3.0])
case("norm 3", lambda m, x: m.np.linalg.norm(x, 3), [0.0, 0.0], [1.0, 2.0])
case("norm 0.5", lambda m, x: m.np.linalg.norm(x, 0.5), [1.0, 2.0])
case("norm 0", lambda m, x: m.np.linalg.norm(x, 0), [1.0, 0.0])
case("norm fro", lambda m, x: m.np.linalg.norm(x.reshape(2, 2)), [0.0] * 4)
case("norm nuc", lambda m, x: m.np.linalg.norm(x.reshape(2, 2), "nuc"), [1.0, 2.0, 3.0, 4.0])
case("norm mat 2", lambda m, x: m.np.linalg.norm(x.reshape(2, 2), 2), [1.0, 2.0, 3.0, 4.0])
case("norm mat 1", lambda m, x: m.np.linalg.norm(x.reshape(2, 2), 1), [1.0, 2.0, 3.0, 4.0],
     [1.0, 1.0, 1.0, 1.0])
case("norm mat inf", lambda m, x: m.np.linalg.norm(x.reshape(2, 2), np.inf), [1.0, 2.0, 3.0, 4.0])
case("vector_norm 0", lambda m, x: m.np.linalg.vector_norm(x), [0.0, 0.0])
case("det", lambda m, x: m.np.linalg.det(x.reshape(2, 2)), [1.0, 2.0, 3.0, 4.0],
     [1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0])
case("det3 singular", lambda m, x: m.np.linalg.det(x.reshape(3, 3)), np.arange(9.0))
case("slogdet", lambda m, x: m.np.linalg.slogdet(x.reshape(2, 2))[1], [1.0, 2.0, 3.0, 4.0])
case("inv", lambda m, x: m.np.linalg.inv(x.reshape(2, 2)).sum(), [1.0, 2.0, 3.0, 4.0])
case("eigh", lambda m, x: (m.np.linalg.eigh(x.reshape(2, 2) + x.reshape(2, 2).T)[0]
                           * m.np.array([1.0, 2.0])).sum(), [1.0, 2.0, 3.0, 4.0])
case("svdvals", lambda m, x: (m.np.linalg.svd(x.reshape(2, 2), compute_uv=False)
                              * m.np.array([1.0, 2.0])).sum(), [1.0, 2.0, 3.0, 4.0])
case("cholesky", lambda m, x: m.np.linalg.cholesky(x.reshape(2, 2) @ x.reshape(2, 2).T
                                                   + m.np.eye(2)).sum(), [1.0, 2.0, 3.0, 4.0])
case("pinv", lambda m, x: m.np.linalg.pinv(x.reshape(2, 2)).sum(), [1.0, 2.0, 3.0, 4.0])
case("solve", lambda m, x: m.np.linalg.solve(x[:4].reshape(2, 2), x[4:]).sum(),
     [1.0, 2.0, 3.0, 4.0, 1.0, -1.0])
case("qr", lambda m, x: (m.np.linalg.qr(x.reshape(3, 2))[1] * m.np.arange(4.0).reshape(2, 2)).sum(),
     np.arange(1.0, 7.0) ** 1.5)
case("expm", lambda m, x: __import__("jax.scipy.linalg" if m is JX else "fgrad.scipy.linalg",
                                     fromlist=["x"]).expm(x.reshape(2, 2)).sum(), [0.1, 0.2, 0.3, 0.4])
case("matrix_power", lambda m, x: m.np.linalg.matrix_power(x.reshape(2, 2), 3).sum(),
     [1.0, 2.0, 3.0, 4.0])
# --- special functions
for nm, pts in {"erf": [0.0, 6.0], "erfc": [0.0, 30.0], "erfinv": [0.0, 0.999],
                "gammaln": [1.0, 0.5, 1e-300], "digamma": [1.0, 0.5], "expit": [0.0, -800.0],
                "logit": [0.5, 0.0, 1.0], "ndtr": [0.0, -40.0], "ndtri": [0.5, 0.99],
                "log_ndtr": [0.0, -40.0, 40.0], "i0e": [0.0, 1.0], "i1e": [0.0, 1.0],
                "i0": [0.0, 1.0], "i1": [0.0, 1.0], "entr": [0.0, 1.0, 0.5], "gamma": [0.5, 3.0],
                "erfcx": [0.0, 10.0]}.items():
    case(f"special.{nm}", lambda m, x, nm=nm: getattr(m.sp, nm)(x).sum(), *pts)
case("xlogy", lambda m, x: m.sp.xlogy(x[0], x[1]), (0.0, 0.0), (0.0, 1.0), (1.0, 2.0))
case("xlog1py", lambda m, x: m.sp.xlog1py(x[0], x[1]), (0.0, -1.0), (0.0, 1.0))
case("gammainc", lambda m, x: m.sp.gammainc(x[0], x[1]), (2.0, 1.0), (0.5, 0.0))
case("betainc x", lambda m, x: m.sp.betainc(2.0, 3.0, x), 0.3, 0.0)
# --- indexing and structure
case("getitem dup", lambda m, x: (x[m.np.array([0, 0, 1])] * m.np.arange(1.0, 4.0)).sum(), [1.0, 2.0])
case("at set", lambda m, x: (x.at[m.np.array([0, 0])].set(x[1:] * 3) * x).sum(), [1.0, 2.0, 3.0])
case("at add", lambda m, x: (x.at[m.np.array([0, 0])].add(x[1:] ** 2) * x).sum(), [1.0, 2.0, 3.0])
case("at mul", lambda m, x: (x.at[m.np.array([0, 0])].multiply(x[1:]) * x).sum(), [1.0, 2.0, 3.0],
     [0.0, 2.0, 3.0], [1.0, 0.0, 3.0])
case("at min", lambda m, x: (x.at[m.np.array([0, 0])].min(x[1:]) * m.np.arange(1.0, 4.0)).sum(),
     [1.0, 2.0, 3.0], [2.0, 2.0, 2.0], [3.0, 2.0, 2.0])
case("at max", lambda m, x: (x.at[m.np.array([0, 0])].max(x[1:]) * m.np.arange(1.0, 4.0)).sum(),
     [1.0, 2.0, 3.0], [2.0, 2.0, 2.0], [1.0, 2.0, 2.0])
case("take_along", lambda m, x: m.np.take_along_axis(x, m.np.argsort(x), axis=0)[0], [3.0, 1.0, 2.0])
case("pad reflect", lambda m, x: (m.np.pad(x, 2, mode="reflect") * m.np.arange(7.0)).sum(),
     [1.0, 2.0, 3.0])
case("pad wrap", lambda m, x: (m.np.pad(x, 2, mode="wrap") * m.np.arange(7.0)).sum(), [1.0, 2.0, 3.0])
case("pad edge", lambda m, x: (m.np.pad(x, 2, mode="edge") * m.np.arange(7.0)).sum(), [1.0, 2.0, 3.0])
case("pad symm", lambda m, x: (m.np.pad(x, 2, mode="symmetric") * m.np.arange(7.0)).sum(), [1.0, 2.0, 3.0])
case("roll", lambda m, x: (m.np.roll(x, 1) * m.np.arange(3.0)).sum(), [1.0, 2.0, 3.0])
case("interp", lambda m, x: m.np.interp(x[0], m.np.array([0.0, 1.0, 2.0]), m.np.array([0.0, 2.0, 1.0])),
     0.5, 1.0, 0.0, 2.0, -1.0, 3.0)
case("interp xp", lambda m, x: m.np.interp(0.5, x, m.np.array([0.0, 2.0, 1.0])), [0.0, 1.0, 2.0])
case("convolve", lambda m, x: (m.np.convolve(x, m.np.array([1.0, -2.0, 0.5])) * m.np.arange(5.0)).sum(),
     [1.0, 2.0, 3.0])
case("polyval", lambda m, x: m.np.polyval(x, 2.0), [1.0, 2.0, 3.0])
case("einsum", lambda m, x: m.np.einsum("ii->", x.reshape(2, 2) @ x.reshape(2, 2)), [1.0, 2.0, 3.0, 4.0])
case("fft", lambda m, x: (m.np.abs(m.np.fft.fft(x)) ** 2 * m.np.arange(4.0)).sum(), [1.0, 2.0, 0.0, -1.0])
case("rfft", lambda m, x: (m.np.fft.rfft(x).real * m.np.arange(3.0)).sum() +
     (m.np.fft.rfft(x).imag * m.np.arange(3.0)).sum(), [1.0, 2.0, 0.0, -1.0])
case("irfft", lambda m, x: (m.np.fft.irfft(x) * m.np.arange(4.0)).sum(), [1.0, 2.0, 0.5])
case("abs complex", lambda m, x: m.np.abs(x[0] + 1j * x[1]), (0.0, 0.0), (3.0, 4.0))
case("angle", lambda m, x: m.np.angle(x[0] + 1j * x[1]), (1.0, 0.0), (-1.0, 0.0))
case("sqrt complex", lambda m, x: m.np.sqrt(x[0] + 1j * x[1]).real, (4.0, 1.0))
case("cross", lambda m, x: m.np.cross(x[:3], x[3:]).sum(), np.arange(6.0))
case("trapezoid", lambda m, x: m.np.trapezoid(x, dx=0.5), [1.0, 2.0, 4.0])
case("diff", lambda m, x: (m.np.diff(x, 2) * 2.0).sum(), [1.0, 2.0, 4.0, 0.0])
case("cov", lambda m, x: m.np.cov(x.reshape(2, 3)).sum(), np.arange(6.0) ** 1.3)
case("corrcoef", lambda m, x: m.np.corrcoef(x.reshape(2, 3))[0, 1], np.arange(6.0) ** 1.3)
case("average w", lambda m, x: m.np.average(x[:3], weights=x[3:]), [1.0, 2.0, 3.0, 1.0, 0.0, 2.0])
case("gradient", lambda m, x: (m.np.gradient(x) * m.np.arange(4.0)).sum(), [1.0, 2.0, 4.0, 0.0])
case("unwrap", lambda m, x: m.np.unwrap(x).sum(), [0.0, 3.0, 6.5])
case("arctan2 0", lambda m, x: m.np.arctan2(x, x).sum(), 0.0)
case("hypot 0", lambda m, x: m.np.hypot(x, x).sum(), 0.0)
case("sinc 0 second", lambda m, x: m.np.sinc(x).sum(), 0.0)
case("max(x, 0) at 0", lambda m, x: m.np.maximum(x, 0.0).sum(), 0.0)
case("abs(x)**2", lambda m, x: (m.np.abs(x) ** 2).sum(), 0.0)
case("sqrt(x**2)", lambda m, x: m.np.sqrt(x ** 2).sum(), 0.0)
case("round", lambda m, x: m.np.round(x, 1).sum(), 0.25)

# --- infinite derivatives at the edge of the domain
case("arctanh", lambda m, x: m.np.arctanh(x).sum(), 1.0, -1.0)
case("arcsin", lambda m, x: m.np.arcsin(x).sum(), 1.0, -1.0)
case("arccos", lambda m, x: m.np.arccos(x).sum(), 1.0, -1.0)
case("arccosh", lambda m, x: m.np.arccosh(x).sum(), 1.0)
case("cbrt", lambda m, x: m.np.cbrt(x).sum(), 0.0, -0.0)
case("erfinv", lambda m, x: m.sp.erfinv(x).sum(), 1.0, -1.0)
case("ndtri", lambda m, x: m.sp.ndtri(x).sum(), 0.0, 1.0)
case("logit", lambda m, x: m.sp.logit(x).sum(), 0.0, 1.0)
case("pow third", lambda m, x: (x ** (1/3)).sum(), 0.0)
case("sqrt", lambda m, x: m.np.sqrt(x).sum(), 0.0)
case("log", lambda m, x: m.np.log(x).sum(), 0.0)
case("log1p", lambda m, x: m.np.log1p(x).sum(), -1.0)
case("log2", lambda m, x: m.np.log2(x).sum(), 0.0)
case("log10", lambda m, x: m.np.log10(x).sum(), 0.0)
case("reciprocal", lambda m, x: (1/x).sum(), 0.0)
case("arctan2", lambda m, x: m.np.arctan2(x, 1.0).sum(), 0.0)
case("xlogy", lambda m, x: m.sp.xlogy(1.0, x).sum(), 0.0)
case("entr", lambda m, x: m.sp.entr(x).sum(), 0.0)
case("gammaln", lambda m, x: m.sp.gammaln(x).sum(), 0.0)
case("digamma", lambda m, x: m.sp.digamma(x).sum(), 0.0)
case("log_ndtr", lambda m, x: m.sp.log_ndtr(x).sum(), -np.inf)
case("sqrt complex-ish hypot", lambda m, x: m.np.hypot(x, 0.0).sum(), 0.0)
case("norm of 1", lambda m, x: m.np.linalg.norm(m.np.stack([x, x])), 0.0)
case("std single", lambda m, x: m.np.std(m.np.stack([x, 2*x])), 0.0)
case("power frac base0", lambda m, x: m.np.power(x, 0.3).sum(), 0.0)
case("arcsinh", lambda m, x: m.np.arcsinh(x).sum(), np.inf)
case("logaddexp", lambda m, x: m.np.logaddexp(x, 0.0).sum(), np.inf, -np.inf)
case("softplus", lambda m, x: m.nn.softplus(x).sum(), np.inf, -np.inf)
case("sigmoid", lambda m, x: m.nn.sigmoid(x).sum(), np.inf, -np.inf)
case("tanh", lambda m, x: m.np.tanh(x).sum(), np.inf)
case("exp", lambda m, x: m.np.exp(x).sum(), -np.inf)
case("expit", lambda m, x: m.sp.expit(x).sum(), np.inf, -np.inf)
case("log_softmax", lambda m, x: m.nn.log_softmax(m.np.stack([x, 0.0]))[1], np.inf, -np.inf)
case("erfc", lambda m, x: m.sp.erfc(x).sum(), np.inf, -np.inf)
case("arctan", lambda m, x: m.np.arctan(x).sum(), np.inf)
# --- scipy.stats at support boundaries
ST = {FG: fst, JX: jst}
def S(m): return ST[FG] if m is FG else ST[JX]
pts = {
 "norm.logpdf": (lambda m, x: S(m).norm.logpdf(x[0], x[1], x[2]), [(0.,0.,1.), (inf,0.,1.), (1., 1., 2.)]),
 "norm.logcdf": (lambda m, x: S(m).norm.logcdf(x[0], x[1], x[2]), [(-40.,0.,1.), (0.,0.,1.), (40., 0., 1.)]),
 "norm.cdf": (lambda m, x: S(m).norm.cdf(x[0], x[1], x[2]), [(0.,0.,1.), (-inf, 0., 1.)]),
 "norm.sf": (lambda m, x: S(m).norm.sf(x[0], x[1], x[2]), [(0.,0.,1.), (10., 0., 1.)]),
 "norm.ppf": (lambda m, x: S(m).norm.ppf(x[0], x[1], x[2]), [(0.5,0.,1.), (0.999,0.,2.)]),
 "t.logpdf": (lambda m, x: S(m).t.logpdf(x[0], x[1]), [(0., 3.), (2., 1.), (1e3, 2.)]),
 "t.cdf" : (lambda m, x: S(m).t.cdf(x[0], x[1]), [(0., 3.), (2., 1.)]),
 "gamma.logpdf": (lambda m, x: S(m).gamma.logpdf(x[0], x[1]), [(0., 1.), (0., 2.), (1., 0.5), (2., 3.)]),
 "gamma.cdf": (lambda m, x: S(m).gamma.cdf(x[0], x[1]), [(1., 2.), (0., 2.)]),
 "beta.logpdf": (lambda m, x: S(m).beta.logpdf(x[0], x[1], x[2]), [(0.5, 2., 3.), (0., 1., 2.), (1., 2., 1.), (0., 2., 2.)]),
 "beta.cdf": (lambda m, x: S(m).beta.cdf(x[0], x[1], x[2]), [(0.3, 2., 3.)]),
 "expon.logpdf": (lambda m, x: S(m).expon.logpdf(x[0], 0., x[1]), [(0., 1.), (2., 0.5)]),
 "expon.cdf": (lambda m, x: S(m).expon.cdf(x[0], 0., x[1]), [(0., 1.), (2., 0.5)]),
 "laplace.logpdf": (lambda m, x: S(m).laplace.logpdf(x[0], x[1], x[2]), [(0., 0., 1.), (1., 0., 2.)]),
 "laplace.cdf": (lambda m, x: S(m).laplace.cdf(x[0], x[1], x[2]), [(0., 0., 1.), (1., 0., 2.)]),
 "logistic.logpdf": (lambda m, x: S(m).logistic.logpdf(x[0]), [(0.,), (800.,), (-800.,)]),
 "logistic.cdf": (lambda m, x: S(m).logistic.cdf(x[0]), [(0.,), (800.,), (-800.,)]),
 "cauchy.logpdf": (lambda m, x: S(m).cauchy.logpdf(x[0], x[1], x[2]), [(0., 0., 1.), (1e10, 0., 1.)]),
 "uniform.logpdf": (lambda m, x: S(m).uniform.logpdf(x[0], x[1], x[2]), [(0.5, 0., 1.), (0., 0., 1.)]),
 "chi2.logpdf": (lambda m, x: S(m).chi2.logpdf(x[0], x[1]), [(1., 2.), (0., 2.), (0., 3.)]),
 "poisson.logpmf mu": (lambda m, x: S(m).poisson.logpmf(3.0, x[0]), [(2.,), (0.,)]),
 "poisson.logpmf k0 mu0": (lambda m, x: S(m).poisson.logpmf(0.0, x[0]), [(0.,), (1.,)]),
 "binom.logpmf p": (lambda m, x: S(m).binom.logpmf(3.0, 5.0, x[0]), [(0.3,), (0.,), (1.,)]),
 "binom.logpmf k0 p0": (lambda m, x: S(m).binom.logpmf(0.0, 5.0, x[0]), [(0.,), (0.5,)]),
 "bernoulli.logpmf": (lambda m, x: S(m).bernoulli.logpmf(1.0, x[0]), [(0.3,), (1.,), (0.,)]),
 "bernoulli.logpmf k0": (lambda m, x: S(m).bernoulli.logpmf(0.0, x[0]), [(0.,), (1.,)]),
 "geom.logpmf": (lambda m, x: S(m).geom.logpmf(2.0, x[0]), [(0.3,), (1.,)]),
 "nbinom.logpmf": (lambda m, x: S(m).nbinom.logpmf(2.0, 3.0, x[0]), [(0.3,), (1.,)]),
 "dirichlet.logpdf": (lambda m, x: S(m).dirichlet.logpdf(m.np.array([0.2, 0.3, 0.5]), x), [(1., 2., 3.), (1., 1., 1.)]),
 "mvn.logpdf": (lambda m, x: S(m).multivariate_normal.logpdf(x, m.np.zeros(2), m.np.array([[2., 0.5], [0.5, 1.]])), [(0., 0.), (1., -1.)]),
}
for nm, (f, ps) in pts.items():
    case(nm, f, *ps)

def jx_fn(f):
    return lambda x: f(JX, x)


def fg_fn(f):
    return lambda x: f(FG, x)


def cmp(a, b, rtol=1e-9):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        return f"shape {a.shape} vs {b.shape}"
    ok = np.isclose(a, b, rtol=rtol, atol=rtol, equal_nan=True)
    ok &= np.isnan(a) == np.isnan(b)
    if not ok.all():
        return f"{a.tolist()} vs {b.tolist()}"
    return None


def run(name, f, x, smooth):
    out = []
    ff, jf = fg_fn(f), jx_fn(f)
    xa = fnp.asarray(x)
    try:
        jv = jf(jnp.asarray(x))
        jg = jax.grad(jf)(jnp.asarray(x))
    except Exception as e:
        return [f"JAX FAILS {type(e).__name__}: {str(e)[:120]}"]
    try:
        v = ff(xa)
        g = fgrad.grad(ff)(xa)
    except Exception as e:
        return [f"FGRAD RAISES {type(e).__name__}: {str(e)[:300]}"]
    for what, a, b in [("value", v, jv), ("grad", g, jg)]:
        m = cmp(a, b)
        if m:
            out.append(f"{what} fgrad vs jax: {m}")
    u = np.linspace(0.5, 1.5, x.size).reshape(x.shape) if x.ndim else np.float64(0.7)
    try:
        _, t = fgrad.jvp(ff, (xa,), (fnp.asarray(u),))
        _, pb = fgrad.vjp(ff, xa)
        (ct,) = pb(fnp.asarray(1.0))
        lhs, rhs = float(t), float(np.sum(np.asarray(ct) * u))
        if not (np.isclose(lhs, rhs, rtol=1e-9, atol=1e-12) or (np.isnan(lhs) and np.isnan(rhs))):
            out.append(f"jvp {lhs} vs vjp {rhs}")
        jt = jax.jvp(jf, (jnp.asarray(x),), (jnp.asarray(u),))[1]
        m = cmp(t, jt)
        if m:
            out.append(f"jvp fgrad vs jax: {m}")
    except Exception as e:
        out.append(f"jvp/vjp RAISES {type(e).__name__}: {str(e)[:300]}")
    try:
        gj = fgrad.jit(fgrad.grad(ff))(xa)
        m = cmp(gj, g, 1e-13)
        if m:
            out.append(f"jit(grad) vs grad: {m}")
    except Exception as e:
        out.append(f"jit(grad) RAISES {type(e).__name__}: {str(e)[:300]}")
    # second order: Hessian-vector product by jvp of grad
    try:
        hv = fgrad.jvp(fgrad.grad(ff), (xa,), (fnp.asarray(u),))[1]
        jhv = jax.jvp(jax.grad(jf), (jnp.asarray(x),), (jnp.asarray(u),))[1]
        m = cmp(hv, jhv, 1e-7)
        if m:
            out.append(f"hvp fgrad vs jax: {m}")
        hr = fgrad.grad(lambda y: fnp.vdot(fgrad.grad(ff)(y), fnp.asarray(u)))(xa)
        m = cmp(hr, hv, 1e-7)
        if m:
            out.append(f"hvp reverse-over-reverse vs forward-over-reverse: {m}")
    except Exception as e:
        out.append(f"hvp RAISES {type(e).__name__}: {str(e)[:300]}")
    return out


def main():
    run_cases(CASES, run, lambda case: f"{case[0]} at {case[2].tolist()}")


if __name__ == "__main__":
    main()
