"""Accuracy and vectorisation of the IR math library (fgrad._src.cpu.mathlib).

One module per dtype holds a loop ``void apply_<name>(int64_t* args)``
(args[0] = n, args[1] = input, args[2] = output, args[3] = second input for
pow) per function; it is compiled once and run over ~6e5 inputs per function:
random bit patterns, linear and logarithmic sweeps, special values.

Errors are measured in ulps against NumPy/libm in float64 (math.erf for erf,
long double for logistic, scipy's erfinv for erf_inv, and mpmath on a sample) and against the float64 result rounded to float32
for float32 (a better reference than NumPy's float32 SIMD code, which is
itself up to ~3 ulp off).
"""
import ctypes
import math
import platform
import re

import numpy as np
import pytest
from llvmlite import ir

from fgrad._src.cpu import engine, mathlib

MAX_ULP = 4
DTYPES = (np.float32, np.float64)
UNARY = [n for n in mathlib.FUNCTIONS if mathlib.ARITY[n] == 1]


# --------------------------------------------------------------------------
# Harness

def build_module(dtype, names, fma=None, called=False) -> str:
    """A loop `apply_<name>` per function; `called`: every function is called
    through its vector variants (mathlib.call_when_used_often), not inlined."""
    ty = ir.FloatType() if dtype == np.float32 else ir.DoubleType()
    i64 = ir.IntType(64)
    mod = ir.Module(name=f"mathlib_test_{np.dtype(dtype).name}")
    uses = {}
    for name in names:
        uses[mathlib.function_name(name, dtype)] = 1
        f = mathlib.emit(mod, name, dtype, fma=fma)
        fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [i64.as_pointer()]), f"apply_{name}")
        fn.args[0].add_attribute("noalias")
        entry = fn.append_basic_block("entry")
        loop = fn.append_basic_block("loop")
        done = fn.append_basic_block("done")
        b = ir.IRBuilder(entry)

        def arg(i):
            return b.load(b.gep(fn.args[0], [ir.Constant(i64, i)], inbounds=True))

        n = arg(0)
        xp = b.inttoptr(arg(1), ty.as_pointer())
        op = b.inttoptr(arg(2), ty.as_pointer())
        yp = b.inttoptr(arg(3), ty.as_pointer()) if mathlib.ARITY[name] == 2 else None
        b.cbranch(b.icmp_signed(">", n, ir.Constant(i64, 0)), loop, done)
        b.position_at_end(loop)
        i = b.phi(i64)
        i.add_incoming(ir.Constant(i64, 0), entry)
        call_args = [b.load(b.gep(xp, [i], inbounds=True))]
        if yp is not None:
            call_args.append(b.load(b.gep(yp, [i], inbounds=True)))
        b.store(b.call(f, call_args), b.gep(op, [i], inbounds=True))
        i2 = b.add(i, ir.Constant(i64, 1))
        i.add_incoming(i2, loop)
        b.cbranch(b.icmp_signed("<", i2, n), loop, done)
        b.position_at_end(done)
        b.ret_void()
    if called:
        mathlib.call_when_used_often(mod, uses, threshold=1)
    return str(mod)


class Runner:
    def __init__(self, dtype, names=mathlib.FUNCTIONS, fma=None, cache_dir=None, called=False):
        self.dtype = dtype
        self.text = build_module(dtype, names, fma, called)
        self.cm = engine.compile_module(self.text, [f"apply_{n}" for n in names],
                                        cache_dir=cache_dir, cache=cache_dir is not None)

    def __call__(self, name, x, y=None):
        x = np.ascontiguousarray(x, dtype=self.dtype)
        out = np.empty_like(x)
        args = np.zeros(4, np.int64)
        args[:3] = (x.size, x.ctypes.data, out.ctypes.data)
        if y is not None:
            y = np.ascontiguousarray(np.broadcast_to(y, x.shape), dtype=self.dtype)
            args[3] = y.ctypes.data
        self.cm.entry(f"apply_{name}")(args)
        return out


@pytest.fixture(scope="module")
def runners(tmp_path_factory):
    cache = tmp_path_factory.mktemp("fgrad-cache")
    return {dt: Runner(dt, cache_dir=cache) for dt in DTYPES}


# --------------------------------------------------------------------------
# References and ulp distance

def ordered(a):
    """Float bits mapped to integers that order like the floats (-0 == +0)."""
    a = np.asarray(a)
    if a.dtype == np.float64:
        i = a.view(np.int64)
        return np.where(i < 0, np.int64(-(2 ** 63)) - i, i)
    i = a.view(np.int32).astype(np.int64)
    return np.where(i < 0, np.int64(-(2 ** 31)) - i, i)


def ulp_dist(a, b):
    oa, ob = ordered(a), ordered(b)
    same = (oa >= 0) == (ob >= 0)
    d = np.where(same, np.abs(oa - ob).astype(np.float64),
                 np.abs(oa.astype(np.float64)) + np.abs(ob.astype(np.float64)))
    na, nb = np.isnan(a), np.isnan(b)
    d = np.where(na & nb, 0.0, d)
    return np.where(na != nb, np.inf, d)


def ref64(name, x, y=None):
    x = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):
        if name == "erf":
            return np.array([math.erf(v) for v in x.tolist()])
        if name == "logistic":
            xl = x.astype(np.longdouble)
            return (1 / (1 + np.exp(-xl))).astype(np.float64)
        if name == "pow":
            return np.power(x, np.asarray(y, np.float64))
        if name == "atan2":
            return np.arctan2(x, np.asarray(y, np.float64))
        if name == "erf_inv":
            import scipy.special
            return scipy.special.erfinv(x)
        return getattr(np, name)(x)


def reference(name, dtype, x, y=None):
    if dtype == np.float64:
        return ref64(name, x, y)
    with np.errstate(all="ignore"):
        return ref64(name, np.asarray(x, np.float64),
                     None if y is None else np.asarray(y, np.float64)).astype(np.float32)


# --------------------------------------------------------------------------
# Inputs

RANGES = {
    "exp": (-800, 800), "expm1": (-60, 720), "tanh": (-25, 25), "erf": (-7, 7),
    "logistic": (-800, 800), "sin": (-20, 20), "cos": (-20, 20), "log": (0, 4),
    "log1p": (-1, 4), "erf_inv": (-1, 1),
}


def special_values(dtype):
    fi = np.finfo(dtype)
    sub = float(fi.tiny) * float(fi.eps)
    vals = [0.0, -0.0, np.inf, -np.inf, np.nan, float(fi.max), -float(fi.max), float(fi.tiny),
            -float(fi.tiny), sub, -sub, float(fi.tiny) / 3, 1.0, -1.0, 0.5, -0.5, 2.0, 1e-30, -1e-30]
    return np.array(vals, dtype)


def unary_inputs(name, dtype, n=200_000, seed=0):
    rng = np.random.default_rng(seed)
    f64 = dtype == np.float64
    ity = np.uint64 if f64 else np.uint32
    bits = rng.integers(0, np.iinfo(ity).max, size=n, dtype=ity, endpoint=True).view(dtype)
    bits = bits[np.isfinite(bits)]
    lo, hi = RANGES[name]
    if not f64:
        lo, hi = max(lo, -120), min(hi, 120)
    lin = rng.uniform(lo, hi, n).astype(dtype)
    fi = np.finfo(dtype)
    sweep = np.logspace(np.log10(float(fi.tiny) * float(fi.eps)), np.log10(float(fi.max)) - 1e-9, n // 2)
    sweep = np.concatenate([sweep, -sweep]).astype(dtype)
    parts = [bits, lin, sweep, special_values(dtype)]
    if name in ("sin", "cos"):
        base = np.arange(-20000, 20000) * (np.pi / 2)
        parts.append(np.concatenate([base, np.nextafter(base, np.inf),
                                     np.nextafter(base, -np.inf)]).astype(dtype))
        huge = rng.uniform(-1, 1, n // 4) * 10.0 ** rng.uniform(0, 308 if f64 else 38, n // 4)
        parts.append(huge.astype(dtype))
        big = [1e22, 1e30, 2.0 ** 20, np.nextafter(2.0 ** 20, 0), np.nextafter(2.0 ** 20, 3e6), 1e6, 1e15,
               1e16, 3e38]
        if f64:
            big += [1e100, 1e300, 1e308]
        parts.append(np.array(big, dtype))
    if name == "log1p":
        parts.append((-1 + np.logspace(-16 if f64 else -7, 0, 2000)).astype(dtype))
    if name == "erf_inv":   # towards +-1, where erf_inv grows without bound
        near = 1 - np.logspace(-16 if f64 else -7.3, 0, n // 2)
        parts.append(np.concatenate([near, -near]).astype(dtype))
    return np.concatenate(parts)


def pow_inputs(dtype, n=100_000, seed=1):
    rng = np.random.default_rng(seed)
    f64 = dtype == np.float64
    xs = [np.exp(rng.uniform(-20, 20, n)), rng.uniform(0.9, 1.1, n),
          10 ** rng.uniform(-300 if f64 else -37, 300 if f64 else 37, n),
          -rng.uniform(0, 10, n), -rng.uniform(0, 10, n)]
    ys = [rng.uniform(-30, 30, n), rng.uniform(-1e4, 1e4, n) * (1 if f64 else 0.05),
          rng.uniform(-2, 2, n), rng.integers(-60, 60, n).astype(float),
          rng.integers(-60, 60, n) + 0.5]
    return (np.concatenate(xs).astype(dtype), np.concatenate(ys).astype(dtype))


# --------------------------------------------------------------------------
# Tests

@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name", UNARY)
def test_unary_accuracy(runners, name, dtype):
    x = unary_inputs(name, dtype)
    got = runners[dtype](name, x)
    ref = reference(name, dtype, x)
    d = ulp_dist(got, ref)
    i = int(np.argmax(d))
    assert d[i] <= MAX_ULP, (f"{name}[{np.dtype(dtype).name}]: {d[i]} ulp at x={x[i]!r}: "
                             f"got {got[i]!r}, expected {ref[i]!r}")


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_pow_accuracy(runners, dtype):
    x, y = pow_inputs(dtype)
    got = runners[dtype]("pow", x, y)
    ref = reference("pow", dtype, x, y)
    d = ulp_dist(got, ref)
    i = int(np.argmax(d))
    assert d[i] <= MAX_ULP, f"pow: {d[i]} ulp at x={x[i]!r} y={y[i]!r}: got {got[i]!r}, expected {ref[i]!r}"


def atan2_inputs(dtype, n=100_000, seed=4):
    rng = np.random.default_rng(seed)
    f64 = dtype == np.float64
    span = 300 if f64 else 37

    def mixed(k):
        return rng.choice([-1.0, 1.0], k) * 10.0 ** rng.uniform(-span, span, k)

    ys = [rng.standard_normal(n), mixed(n), rng.uniform(-1, 1, n)]
    xs = [rng.standard_normal(n), mixed(n), rng.uniform(-1, 1, n) * 1.001]
    # |y| / |x| at the reduction's interval edges (7/16, 11/16, 1) and beyond
    t = np.concatenate([np.full(n // 8, v) for v in (7 / 16, 11 / 16, 1.0, 16 / 7)])
    t = t * (1 + rng.uniform(-1e-3, 1e-3, t.size))
    base = rng.choice([-1.0, 1.0], t.size) * 10.0 ** rng.uniform(-5, 5, t.size)
    ys.append(base * t * rng.choice([-1.0, 1.0], t.size))
    xs.append(base)
    return np.concatenate(ys).astype(dtype), np.concatenate(xs).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_atan2_accuracy(runners, dtype):
    y, x = atan2_inputs(dtype)
    got = runners[dtype]("atan2", y, x)
    ref = reference("atan2", dtype, y, x)
    d = ulp_dist(got, ref)
    i = int(np.argmax(d))
    assert d[i] <= 2, f"atan2: {d[i]} ulp at y={y[i]!r} x={x[i]!r}: got {got[i]!r}, expected {ref[i]!r}"


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_atan2_special_cases_exact(runners, dtype):
    """C99 / NumPy: signed zeros, infinities (pi/4, 3pi/4), NaN, extremes."""
    fi = np.finfo(dtype)
    vals = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -3.0, float(fi.tiny),
            float(fi.tiny) * float(fi.eps), -float(fi.max), float(fi.max)]
    Y, X = np.meshgrid(np.array(vals, dtype), np.array(vals, dtype))
    y, x = Y.ravel(), X.ravel()
    got = runners[dtype]("atan2", y, x)
    want = np.arctan2(y, x)
    for yi, xi, g, w in zip(y, x, got, want):
        if np.isnan(w):
            assert np.isnan(g), (yi, xi, g)
        else:
            assert np.signbit(g) == np.signbit(w), (yi, xi, g, w)
            assert ulp_dist(np.array([g]), np.array([w]))[0] <= (0 if w == 0 or yi == 0 else 1), \
                (yi, xi, g, w)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_erf_inv_against_mpmath(runners, dtype):
    """A sample, with the points where our result and scipy's differ most, against
    erfinv in 40-digit arithmetic (scipy's float64 erfinv is itself up to 3 ulp off)."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 40
    x = unary_inputs("erf_inv", dtype, n=20_000, seed=5)
    x = x[np.abs(x) < 1]
    got = runners[dtype]("erf_inv", x)
    worst = np.argsort(-ulp_dist(got, reference("erf_inv", dtype, x)))[:400]
    sample = np.concatenate([x[worst], np.random.default_rng(6).choice(x, 800)])
    want = np.array([float(mp.erfinv(mp.mpf(float(v)))) for v in sample]).astype(dtype)
    d = ulp_dist(runners[dtype]("erf_inv", sample), want)
    i = int(np.argmax(d))
    assert d[i] <= 2, f"erf_inv: {d[i]} ulp at x={sample[i]!r}"


def test_pow_without_fma():
    """float64 pow with Dekker's exact products instead of FMA."""
    r = Runner(np.float64, ["pow"], fma=False)
    x, y = pow_inputs(np.float64, n=20_000, seed=3)
    d = ulp_dist(r("pow", x, y), reference("pow", np.float64, x, y))
    assert d.max() <= MAX_ULP


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name", UNARY)
def test_unary_special_values(runners, name, dtype):
    """±0, ±inf and NaN give exactly NumPy's result (sign of zero included);
    extremes (largest finite, smallest normal, subnormals) are within 1 ulp
    with the right sign."""
    x = special_values(dtype)
    got = runners[dtype](name, x)
    ref = reference(name, dtype, x)
    for xi, g, r in zip(x, got, ref):
        if np.isnan(r):
            assert np.isnan(g), (name, xi, g)
            continue
        assert np.signbit(g) == np.signbit(r), (name, xi, g, r)
        if xi == 0 or np.isinf(xi):
            assert g == r, (name, xi, g, r)
        else:
            assert ulp_dist(np.array([g]), np.array([r]))[0] <= 1, (name, xi, g, r)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_named_special_values(runners, dtype):
    r = runners[dtype]
    inf, nan = np.inf, np.nan
    cases = {
        "exp": [(-inf, 0.0), (inf, inf), (0.0, 1.0), (-0.0, 1.0), (1000.0, inf), (-1000.0, 0.0)],
        "expm1": [(-inf, -1.0), (inf, inf), (-0.0, -0.0), (1000.0, inf), (-1000.0, -1.0)],
        "log": [(0.0, -inf), (-0.0, -inf), (-1.0, nan), (inf, inf), (1.0, 0.0), (-inf, nan)],
        "log1p": [(-1.0, -inf), (-2.0, nan), (inf, inf), (-0.0, -0.0), (0.0, 0.0)],
        "sin": [(-0.0, -0.0), (inf, nan), (-inf, nan)],
        "cos": [(0.0, 1.0), (inf, nan), (-inf, nan)],
        "tanh": [(inf, 1.0), (-inf, -1.0), (-0.0, -0.0), (1000.0, 1.0), (-1000.0, -1.0)],
        "erf": [(inf, 1.0), (-inf, -1.0), (-0.0, -0.0), (10.0, 1.0), (-10.0, -1.0)],
        "logistic": [(inf, 1.0), (-inf, 0.0), (0.0, 0.5), (1000.0, 1.0), (-1000.0, 0.0),
                     (745.0, 1.0), (-80.0, 1.8048513878454153e-35)],
        "erf_inv": [(1.0, inf), (-1.0, -inf), (0.0, 0.0), (-0.0, 0.0), (1.5, nan),
                    (-1.0000001, nan), (inf, nan), (-inf, nan)],
    }
    for name, pairs in cases.items():
        x = np.array([p[0] for p in pairs], dtype)
        want = np.array([p[1] for p in pairs], dtype)
        got = r(name, x)
        for xi, g, w in zip(x, got, want):
            if np.isnan(w):
                assert np.isnan(g), (name, xi, g)
            elif name == "logistic" and xi == -80.0:
                assert ulp_dist(np.array([g]), np.array([w]))[0] <= 2, (name, xi, g, w)
            else:
                assert g == w and np.signbit(g) == np.signbit(w), (name, xi, g, w)
    for name in UNARY:
        assert np.isnan(r(name, np.array([nan, -nan], dtype))).all()


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_pow_special_cases_exact(runners, dtype):
    fi = np.finfo(dtype)
    vals = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0,
            0.25, 7.0, -7.0, 2.5, -2.5, float(fi.tiny) * float(fi.eps), float(fi.max), -float(fi.max),
            2.0 ** 24, 2.0 ** 24 + 2, 2.0 ** 53, 1e20, -1e20]
    X, Y = np.meshgrid(np.array(vals, dtype), np.array(vals, dtype))
    x, y = X.ravel(), Y.ravel()
    got = runners[dtype]("pow", x, y)
    with np.errstate(all="ignore"):
        want = np.power(x, y)
    for xi, yi, g, w in zip(x, y, got, want):
        if np.isnan(w):
            assert np.isnan(g), (xi, yi, g)
        else:
            assert ulp_dist(np.array([g]), np.array([w]))[0] <= 1 and np.signbit(g) == np.signbit(w), \
                (xi, yi, g, w)


# sin/cos at arguments whose reduction is hardest, exact values from mpmath
# (3000-bit arithmetic).  glibc's cos is 8 ulp off at the first one.
TRIG_HARD_F64 = [
    # x, sin(x), cos(x)
    ("0x1.6ac5b262ca1ffp+849", "0x1.0000000000000p+0", "-0x1.14ae72e6ba22fp-61"),
    ("0x1.0f0cf064dd592p+73", "-0x1.b453ab76bf397p-1", "0x1.0be2cef01c8f4p-1"),
    ("0x1.7e43c8800759cp+996", "-0x1.a2c16b010e385p-1", "-0x1.2699022adc4c1p-1"),
    ("0x1.fffffffffffffp+1023", "0x1.452fc98b34e97p-8", "-0x1.fffe62ecfab75p-1"),
    ("0x1.1ccf385ebc8a0p+1023", "0x1.d0472b6b4d936p-2", "-0x1.c859a523ff229p-1"),
    ("0x1.1c37937e08000p+53", "0x1.8f334432ebba5p-1", "-0x1.40991e398dbfcp-1"),
    ("0x1.921fb54442d18p+20", "-0x1.1a62633145c07p-34", "0x1.0000000000000p+0"),
    ("0x1.fffffffffffffp+19", "0x1.526ccb2de52a8p-2", "0x1.e33ada9352c61p-1"),
]


def test_trig_hard_arguments_f64(runners):
    r = runners[np.float64]
    x = np.array([float.fromhex(t[0]) for t in TRIG_HARD_F64])
    for sign in (1.0, -1.0):
        s = r("sin", sign * x)
        c = r("cos", sign * x)
        for i, (_, ws, wc) in enumerate(TRIG_HARD_F64):
            assert ulp_dist(s[i:i + 1], np.array([sign * float.fromhex(ws)]))[0] <= 1
            assert ulp_dist(c[i:i + 1], np.array([float.fromhex(wc)]))[0] <= 1


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name", ["sin", "cos"])
def test_trig_scalar_and_vector_paths(runners, name, dtype):
    """Short arrays run the scalar function (remainder loop), long ones the
    vector variants; huge lanes mixed with small ones take the slow path in
    both."""
    r = runners[dtype]
    rng = np.random.default_rng(7)
    x = rng.uniform(-10, 10, 64)
    x[::5] = rng.uniform(-1, 1, 13) * 1e30
    x[3] = np.inf
    x = x.astype(dtype)
    full = r(name, x)
    ref = reference(name, dtype, x)
    assert ulp_dist(full, ref).max() <= 1
    for n in range(1, 12):
        np.testing.assert_array_equal(r(name, x[:n]), full[:n])


# float32 arguments below 2^20 closest to a multiple of pi/2, one per
# binade where the minimum over the binade drops (an exhaustive search over
# every float32 below 2^20; |r| = 2^-24.5, 2^-26.3, 2^-27.8, 2^-24.1, 2^-25.9,
# 2^-24.8): the hardest cases for the float32 Cody-Waite reduction.  Twice
# such an argument is as close relative to its size, so the scaled copies
# are hard as well.
TRIG_HARD_F32 = ("0x1.921fb6p+0", "0x1.2d97c8p+2", "0x1.f9cbe2p+7", "0x1.17cc5p+11",
                 "0x1.9a48dep+15", "0x1.04ccbcp+18")


def trig_reduction_inputs(n=400_000, seed=8):
    """float32 arguments for the float32 reduction (|x| < 2^20): random bit
    patterns in [pi/4, 2^20) and, more densely, in [2^17, 2^20) (where the
    reduction's rounding errors are largest), the hardest cases above scaled
    by powers of two and their neighbours, and both sides of the 2^20 bound."""
    rng = np.random.default_rng(seed)
    lo, mid, hi = (int(np.float32(v).view(np.uint32)) for v in (0.7, 2.0 ** 17, 2.0 ** 20))
    parts = [rng.integers(lo, hi, n, dtype=np.uint32).view(np.float32),
             rng.integers(mid, hi, 5 * n, dtype=np.uint32).view(np.float32)]
    hard = np.array([float.fromhex(h) * 2.0 ** j for h in TRIG_HARD_F32 for j in range(20)])
    hard = hard[hard < 2 ** 20].astype(np.float32)
    parts += [hard, np.nextafter(hard, np.float32(0)), np.nextafter(hard, np.float32(np.inf))]
    edge = int(np.float32(2.0 ** 20).view(np.uint32))
    parts.append(np.arange(edge - 1000, edge + 1000, dtype=np.uint32).view(np.float32))
    x = np.concatenate(parts)
    return np.concatenate([x, -x])


@pytest.mark.parametrize("name", ["exp", "expm1"])
def test_f32_exp_reduction_with_fma(name):
    """float32 exp and expm1 on the FMA path (r = x - n ln2_hi exact, -n ln2_lo
    fed back as the kernel's correction, up to 2^-16.8) are within 1 ulp of
    the correctly rounded float64 result across the whole reduction range,
    largest |n| included (an exhaustive run over 0.3125 <= |x| < 112 gave at
    most 1 ulp; below, n = 0 and the correction is 0)."""
    r = Runner(np.float32, [name], fma=True)
    rng = np.random.default_rng(11)
    lo, hi = (-104.0, 89.0) if name == "exp" else (-20.0, 89.0)
    ends = np.concatenate([rng.uniform(lo, lo + 4, 100_000), rng.uniform(hi - 4, hi, 100_000)])
    x = np.concatenate([rng.uniform(lo, hi, 1_000_000), ends]).astype(np.float32)
    d = ulp_dist(r(name, x), reference(name, np.float32, x))
    i = int(np.argmax(d))
    assert d[i] <= 1, f"{name}: {d[i]} ulp at x={x[i]!r}"


def test_f32_exp_family_without_fma():
    """float32 exp and its users without FMA (the reduction then uses a 16-bit
    ln2_hi so that n*ln2_hi is exact without FMA)."""
    names = ["exp", "expm1", "tanh", "logistic"]
    r = Runner(np.float32, names, fma=False)
    for name in names:
        x = unary_inputs(name, np.float32, n=50_000, seed=9)
        d = ulp_dist(r(name, x), reference(name, np.float32, x))
        i = int(np.argmax(d))
        assert d[i] <= 2, f"{name}: {d[i]} ulp at x={x[i]!r}"


@pytest.mark.parametrize("fma", [None, False], ids=["host", "no-fma"])
@pytest.mark.parametrize("name", ["sin", "cos"])
def test_trig_f32_reduction(name, fma):
    """float32 sin/cos are within 1 ulp of the correctly rounded float64 result
    where the reduction is hardest; "host" runs the float32-arithmetic path
    (FMA hosts), "no-fma" the double-precision one (an exhaustive run of the
    float32 path over all |x| < 2^20 gave at most 1 ulp too)."""
    r = Runner(np.float32, [name], fma=fma)
    x = trig_reduction_inputs()
    d = ulp_dist(r(name, x), reference(name, np.float32, x))
    i = int(np.argmax(d))
    assert d[i] <= 1, f"{name}: {d[i]} ulp at x={x[i]!r}"


@pytest.mark.skipif(not engine.host_has_feature("fma"), reason="host lacks FMA")
def test_trig_f32_fast_path_in_float32(runners):
    """With FMA, the float32 sin/cos vector variants compute in float32: no
    double-precision values outside the Payne-Hanek function (which runs only
    for |x| >= 2^20)."""
    opt = engine.optimized_ir(runners[np.float32].text)
    for name in ("sin", "cos"):
        fname = mathlib.function_name(name, np.float32)
        start = opt.index(f"@{fname}_v8(")
        body = opt[start:opt.index("\n}\n", start)]
        assert "<8 x float>" in body and "double" not in body, f"{fname}_v8 uses double"


def _apply_body(opt_ir: str, name: str) -> str:
    start = opt_ir.index(f"@apply_{name}(")
    return opt_ir[start:opt_ir.index("\n}\n", start)]


@pytest.mark.skipif(not engine.host_has_feature("avx2"), reason="host lacks AVX2")
@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_loops_vectorise(runners, dtype):
    """The apply loop of every function is vectorised with full-width AVX2
    vectors: the inlined bodies, or for sin/cos calls to the explicit vector
    variants."""
    opt = engine.optimized_ir(runners[dtype].text)
    elem, min_lanes = ("float", 8) if dtype == np.float32 else ("double", 4)
    for name in mathlib.FUNCTIONS:
        body = _apply_body(opt, name)
        lanes = [int(n) for n in re.findall(r"<(\d+) x %s>" % elem, body)]
        if name in ("pow", "atan2", "erf_inv") and dtype == np.float32:   # work in double
            lanes += [int(n) for n in re.findall(r"<(\d+) x double>", body)]
        assert lanes and max(lanes) >= min_lanes, f"{name} loop not vectorised"
    for name in ("sin", "cos"):
        fname = mathlib.function_name(name, dtype)
        assert f"@{fname}_v" in _apply_body(opt, name)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_trig_variants_do_payne_hanek_lanes_out_of_line(dtype):
    """A sin vector variant hands the lanes its fast path cannot do to one
    out-of-line function (`_v<n>_ph`) behind a branch weighted as unlikely, so
    its hot path makes no call (which would spill its constants)."""
    fname = mathlib.function_name("sin", dtype)
    opt = engine.optimized_ir(build_module(dtype, ["sin"], fma=not mathlib._host_fma()))
    for n in mathlib.mathlib_runtime.WIDTHS[fname[-3:]]:
        start = opt.index(f"@{fname}_v{n}(")
        body = opt[start:opt.index("\n}\n", start)]
        assert len(re.findall(r"call [^\n]*@%s_v%d_ph\(" % (fname, n), body)) == 1
        assert "!prof" in body and f"@{fname}_ph(" not in body


@pytest.mark.skipif(not engine.host_has_feature("avx512f"), reason="host lacks AVX-512")
@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_exp_scaling_by_ldexp_is_bit_identical(dtype, monkeypatch):
    """On AVX-512 hosts exp scales by 2^n with `llvm.ldexp` (one vscalef), not
    two power-of-two factors; both round once, so the bits agree, subnormal,
    overflowing and special results included."""
    names = ["exp", "expm1", "tanh", "logistic"]
    runs = {}
    for ldexp in (True, False):
        monkeypatch.setattr(mathlib, "_host_scalef", lambda: ldexp)
        runs[ldexp] = Runner(dtype, names)
    assert "llvm.ldexp" in runs[True].text and "llvm.ldexp" not in runs[False].text
    assert "vscalefp" in engine.optimized_asm(runs[True].text)
    edge = (-760.0, 720.0) if dtype == np.float64 else (-110.0, 95.0)
    for name in names:
        x = np.concatenate([unary_inputs(name, dtype, n=50_000),
                            np.linspace(*edge, 200_001).astype(dtype)])
        np.testing.assert_array_equal(runs[True](name, x).view(np.uint8),
                                      runs[False](name, x).view(np.uint8), err_msg=name)


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86 FE_UNDERFLOW")
@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_exp_below_its_range_is_zero_without_underflow(runners, dtype):
    """exp at or below its underflow bound (masked attention scores are -inf) is
    +0, selected before the scaling by 2^n: an underflowing scaling would raise
    the underflow flag, and costs a microcode assist per lane. NaN lanes (NaN
    out, the input's bits) do not scale into underflow either."""
    fe_underflow = 0x10                          # glibc's value on x86
    libc = ctypes.CDLL(None)
    lo = -746.0 if dtype == np.float64 else -104.0
    x = np.concatenate([[-np.inf, lo, -1e30], np.linspace(10 * lo, lo, 1001)]).astype(dtype)
    nan = np.full(64, np.nan, dtype)
    nan[::2] = -nan[::2]
    libc.feclearexcept(fe_underflow)
    out = runners[dtype]("exp", x)
    out_nan = runners[dtype]("exp", nan)
    raised = libc.fetestexcept(fe_underflow)
    assert not raised
    assert not out.view(np.uint64 if dtype == np.float64 else np.uint32).any()   # +0
    np.testing.assert_array_equal(out_nan.view(np.uint8), nan.view(np.uint8))


@pytest.mark.skipif(not engine.host_has_feature("avx512f"), reason="host lacks AVX-512")
@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_exp_underflow_select_is_zero_masking(dtype):
    """On AVX-512 exp's selects of +0 below its range, and of NaN for NaN, cost
    no instruction of their own but one maxp: they mask the clamp (vminp {z}) and
    the scaling (vscalefp merged into that maxp), no blend, no NaN compare."""
    asm = engine.optimized_asm(build_module(dtype, ["exp"]))
    assert re.search(r"vscalefp[sd]\s.*\{%k\d\}", asm)
    assert re.search(r"vminp[sd]\s.*\{%k\d\} \{z\}", asm)
    assert "vblendm" not in asm and "vcmpunord" not in asm


@pytest.mark.skipif(not engine.host_has_feature("avx2"), reason="host lacks AVX2")
def test_assembly_uses_ymm(runners):
    asm = engine.optimized_asm(build_module(np.float32, ["exp"]))
    assert "ymm" in asm or "zmm" in asm


def test_emit_api():
    mod = ir.Module()
    f1 = mathlib.emit(mod, "exp", np.float32)
    assert mathlib.emit(mod, "exp", "float32") is f1
    assert mathlib.emit(mod, "exp", ir.FloatType()) is f1
    assert f1.name == "fgrad_exp_f32"
    f2 = mathlib.emit(mod, "pow", np.dtype("float64"))
    assert f2.name == "fgrad_pow_f64" and len(f2.args) == 2
    assert mathlib.emit(mod, "sin", "f64").name == "fgrad_sin_f64"
    assert mathlib.emit(mod, "sin", np.float64) is mathlib.emit(mod, "sin", np.float64)
    with pytest.raises(ValueError):
        mathlib.emit(mod, "gamma", np.float32)
    with pytest.raises(TypeError):
        mathlib.emit(mod, "exp", np.int32)
    engine.optimized_ir(str(mod))   # valid IR on its own


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_called_through_vector_variants_is_bit_identical(runners, dtype, tmp_path):
    """A function called at many sites runs its vector variants
    (call_when_used_often): the same operations as the inlined body, so the
    same bits, special values included."""
    names = [n for n in mathlib.FUNCTIONS if n not in ("sin", "cos")]
    called = Runner(dtype, names, cache_dir=tmp_path, called=True)
    assert "vector-function-abi-variant" in called.text
    for name in names:
        if mathlib.ARITY[name] == 1:
            x, y = unary_inputs(name, dtype, n=20_000), None
        else:
            x, y = pow_inputs(dtype, n=5_000)
        want = runners[dtype](name, x, y)
        got = called(name, x, y)
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8), err_msg=name)
    asm = engine.optimized_asm(called.text)
    # the loop calls a variant (through a register: the JIT's large code model)
    assert re.search(r"(call\w*|movabsq)\s+\$?fgrad_exp_f(32|64)_v\d+", asm), "no variant"
