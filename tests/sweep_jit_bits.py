"""Sweep: jit(f)(x) against f(x), bit for bit, for fgrad.numpy's composite functions.

Run as a script (`python tests/sweep_jit_bits.py [substring]`). Every public
function of one or two arrays is run on special values (+-0, +-inf, NaN,
subnormals, extremes, halves) in every dtype it accepts, eagerly and under
jit; differences are printed with the ulps they amount to. fgrad documents that
only its own transcendental functions (within 2 ulp) and float sums (order) may
differ, so those are reported separately with their size.
"""
import sys
import warnings

import numpy as np

import fgrad
import fgrad.numpy as fnp
import fgrad.scipy.special as fsp
from sweep_util import equal_bits

warnings.simplefilter("ignore")

FLOATS = ["float16", "float32", "float64"]
INTS = ["int8", "uint8", "int32", "uint32", "int64"]


def specials(dt):
    dt = np.dtype(dt)
    if dt == bool:
        return np.array([False, True, True, False])
    if dt.kind in "iu":
        info = np.iinfo(dt)
        v = [0, 1, 2, 3, 7, info.max, info.min, info.max - 1, info.min + 1]
        if dt.kind == "i":
            v += [-1, -2, -3, -7]
        return np.array(v, dt)
    fi = np.finfo(dt)
    v = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -2.5, np.inf, -np.inf, np.nan, fi.max, -fi.max,
         fi.tiny, -fi.tiny, fi.smallest_subnormal, -fi.smallest_subnormal, 3.0, 1e-3, 0.1, 100.0,
         -100.0, 0.999, 1.001, 2.0 ** 20 + 0.5, 7.0, -7.0, 1e4]
    return np.array(v, dt)


UNARY = ["abs", "negative", "positive", "sign", "floor", "ceil", "trunc", "rint", "round",
         "fix", "square", "sqrt", "cbrt", "reciprocal", "exp", "exp2", "expm1", "log", "log2",
         "log10", "log1p", "sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh",
         "tanh", "arcsinh", "arccosh", "arctanh", "deg2rad", "rad2deg", "sinc", "signbit",
         "isnan", "isinf", "isfinite", "isposinf", "isneginf", "nan_to_num", "spacing",
         "logical_not", "invert", "bitwise_count", "real", "imag", "conj", "angle", "i0" if False
         else "fabs", "cumsum", "cumprod", "nancumsum", "sort", "argsort", "max", "min", "argmax",
         "argmin", "nanmax", "nanmin", "nanargmax", "ptp", "any", "all", "count_nonzero",
         "diff", "flip", "unwrap", "median", "nanmedian", "round", "around", "modf", "frexp",
         "trim_zeros" if False else "ravel", "clip" if False else "msort" if False else "sum",
         "prod", "mean", "var", "std", "nansum", "nanmean", "nanvar", "nanprod", "gradient",
         "ediff1d", "unique"]
BINARY = ["add", "subtract", "multiply", "divide", "true_divide", "floor_divide", "mod",
          "remainder", "fmod", "divmod", "power", "float_power", "maximum", "minimum", "fmax",
          "fmin", "arctan2", "hypot", "copysign", "nextafter", "logaddexp", "logaddexp2",
          "heaviside", "ldexp", "equal", "not_equal", "less", "greater", "less_equal",
          "logical_and", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor",
          "left_shift", "right_shift", "gcd", "lcm", "isclose", "dot", "inner", "outer",
          "convolve", "correlate", "polyval", "searchsorted", "digitize", "interp" if False
          else "cross" if False else "kron", "vdot", "trapezoid", "matmul" if False else "where"]
SPECIAL = ["erf", "erfc", "erfinv", "expit", "logit", "gammaln", "digamma", "ndtr", "ndtri",
           "log_ndtr", "i0e", "i1e", "i0", "i1", "entr", "log_expit", "gamma", "erfcx",
           "sinc" if False else "spence"]
# documented: fgrad's own math library under jit (cpu/mathlib.py, within 2 ulp of
# NumPy, tan = sin/cos) and float sums added in other blocks.
MATHLIB = {"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan",
           "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh",
           "arctanh", "sinc", "power", "float_power", "arctan2", "logaddexp", "logaddexp2",
           "unwrap", "cbrt", "hypot"} | set(SPECIAL)
SUMS = {"sum", "mean", "var", "std", "nansum", "nanmean", "nanvar", "dot", "inner", "vdot",
        "convolve", "correlate", "trapezoid", "cumsum", "nancumsum", "polyval", "prod",
        "nanprod", "cumprod"}


def ulps(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind != "f":
        return None
    w = np.float64
    d = np.abs(a.astype(w) - b.astype(w))
    sp = np.spacing(np.maximum(np.abs(a), np.abs(b))).astype(w)
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    with np.errstate(all="ignore"):
        r = np.where(same, 0.0, np.where(np.isfinite(d), d / sp, np.inf))
    return float(np.max(r)) if r.size else 0.0


def diff(a, b):
    la, lb = fgrad.tree.leaves(a), fgrad.tree.leaves(b)
    for x, y in zip(la, lb):
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape or x.dtype != y.dtype:
            return f"shape/dtype {x.shape} {x.dtype} vs {y.shape} {y.dtype}"
        eq = equal_bits(x, y)
        if not np.all(eq):
            i = np.flatnonzero(~np.asarray(eq).ravel())[0] if np.ndim(eq) else 0
            return (f"at flat {i}: eager {x.ravel()[i] if x.ndim else x} jit "
                    f"{y.ravel()[i] if y.ndim else y} (max ulps {ulps(x, y)})")
    return None


def main():
    pat = sys.argv[1] if len(sys.argv) > 1 else ""
    found = 0
    jobs = []
    for nm in UNARY:
        f = getattr(fnp, nm, None)
        if f is not None:
            jobs.append((nm, f, 1))
    for nm in BINARY:
        f = getattr(fnp, nm, None)
        if f is not None:
            jobs.append((nm, f, 2))
    for nm in SPECIAL:
        f = getattr(fsp, nm, None)
        if f is not None:
            jobs.append(("special." + nm, f, 1))
    jobs.append(("where3", lambda c, x: fnp.where(c, x, -x), 2))
    for name, f, arity in jobs:
        if pat not in name:
            continue
        for dt in FLOATS + INTS + ["bool"]:
            x = specials(dt)
            args = (x,) if arity == 1 else (x, np.roll(x, 3))
            if name == "where3":
                args = (x.astype(bool), np.roll(x, 1))
            try:
                want = f(*args)
            except Exception:
                continue
            try:
                got = fgrad.jit(f)(*args)
            except Exception as e:
                print(f"{name} {dt}: jit RAISES {type(e).__name__}: {str(e)[:150]}")
                found += 1
                continue
            m = diff(want, got)
            if m:
                base = name.split(".")[-1]
                tag = "(mathlib)" if base in MATHLIB or name.startswith("special") else \
                      "(sum order)" if base in SUMS else "!!"
                print(f"{tag} {name} {dt}: {m}")
                found += 1
    print(f"{found} differences")


if __name__ == "__main__":
    main()
