"""Complex numbers in the CPU backend's fused loops.

A complex value is a pair of real registers (re, im) of its parts' type (float
for complex64, double for complex128); in memory a complex array is NumPy's
interleaved pairs, so element k of a complex operand is loaded from parts 2k
and 2k + 1 (strides and offsets of fused views stay in elements). `fused`
hands every equation with a complex operand or result to `emit`.

Each formula is the one the NumPy impl runs, so jit equals eager bit for bit:

* add, sub, neg, conj, real, imag, complex, eq, ne, select_n, conversions:
  part by part (a complex value converts to a real or integer one through its
  real part; to bool it is "either part nonzero");
* mul: NumPy's SIMD loops form (ar br - ai bi, ar bi + ai br) with fused
  multiply-adds, fma(ar, br, -(ai bi)) and fma(ar, bi, ai br), on hosts with
  FMA (and plain products without, as NumPy's baseline loop);
* div: Smith's algorithm as NumPy's loop writes it (scale by the larger part
  of the divisor; a zero divisor divides the parts by +0);
* integer_pow: repeated squaring with that multiplication (negative powers:
  the reciprocal first, by that division), as the NumPy impl does;
* abs: NumPy's vectorised loop, larger * sqrt(1 + (smaller / larger)^2)
  (with a fused multiply-add on FMA hosts); sign: z / hypot(re, im) (libm's
  hypot, as NumPy's loop) with NumPy's special cases (0 at 0, NaN where the
  magnitude is NaN, the unit direction of an infinite part);
* exp, log, sqrt, sin, cos, tan, tanh, asin, acos, atan, asinh, acosh, atanh:
  calls of libm's cexp, clog, csqrt, ...
  (what NumPy's loops call), on x86-64 only, where the C ABI of complex
  arguments is known here (`_complex_abi`); elsewhere they run as NumPy steps.

Not lowered (NumPy steps, labelled `numpy:` in as_text): pow, log1p, expm1,
rsqrt (NumPy's own complex formulas), integer_pow beyond MAX_UNROLLED_POW, and
the complex reductions and matmuls (dot_general runs NumPy's matmul, which
calls BLAS's cgemm / zgemm).
"""
import functools

import numpy as np

from ..lax.elementwise import MAX_UNROLLED_POW

_C64, _C128 = np.dtype(np.complex64), np.dtype(np.complex128)
_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
COMPLEX = frozenset({_C64, _C128})

# libm's complex functions NumPy's loops call for these primitives
_LIBM = {"exp": "cexp", "log": "clog", "sqrt": "csqrt", "sin": "csin", "cos": "ccos",
         "tan": "ctan", "tanh": "ctanh", "asin": "casin", "acos": "cacos", "atan": "catan",
         "asinh": "casinh", "acosh": "cacosh", "atanh": "catanh"}


def part(dt):
    """The dtype of a complex dtype's parts."""
    return _F64 if dt == _C128 else _F32


def is_complex_eqn(eqn):
    return any(a.aval.dtype in COMPLEX for a in list(eqn.invars) + list(eqn.outvars))


def can_fuse(eqn, real_dtypes):
    """Whether `emit` lowers this equation (it has a complex operand or result;
    its other dtypes are among the backend's `real_dtypes`)."""
    name = eqn.primitive.name
    if any(a.aval.dtype not in COMPLEX and a.aval.dtype not in real_dtypes
           for a in list(eqn.invars) + list(eqn.outvars)):
        return False
    if name in _LIBM:
        return _complex_abi()
    if name == "integer_pow":
        return abs(eqn.params["y"]) <= MAX_UNROLLED_POW
    if name == "select_n":
        return eqn.invars[0].aval.dtype.kind in "biu"
    return name in EMITTERS


# ----------------------------------------------------------------------------
# Loads, stores and constants

def load(cx, ptr, index, dt):
    """Element `index` of a complex array at `ptr`: its (re, im) pair."""
    b, ir = cx.b, cx.ir
    pt = cx.ty(part(dt))
    i2 = b.mul(index, ir.Constant(index.type, 2), flags=("nsw",))
    re = b.load(b.gep(ptr, [i2], inbounds=True, source_etype=pt), typ=pt)
    i2p1 = b.add(i2, ir.Constant(index.type, 1), flags=("nsw",))
    im = b.load(b.gep(ptr, [i2p1], inbounds=True, source_etype=pt), typ=pt)
    return re, im


def store(cx, ptr, index, value, dt):
    b, ir = cx.b, cx.ir
    pt = cx.ty(part(dt))
    i2 = b.mul(index, ir.Constant(index.type, 2), flags=("nsw",))
    b.store(value[0], b.gep(ptr, [i2], inbounds=True, source_etype=pt))
    i2p1 = b.add(i2, ir.Constant(index.type, 1), flags=("nsw",))
    b.store(value[1], b.gep(ptr, [i2p1], inbounds=True, source_etype=pt))


def const(cx, dt, value):
    v = complex(np.asarray(value, dt))
    pt = part(dt)
    return cx.const(pt, v.real), cx.const(pt, v.imag)


# ----------------------------------------------------------------------------
# Emitters: fn(cx, args, in_dtypes, out_dtype, params); complex values are pairs

def _partwise(op):
    def emit(cx, args, dts, out, params):
        (xr, xi), (yr, yi) = args
        f = getattr(cx.b, op)
        return f(xr, yr), f(xi, yi)
    return emit


def _neg(cx, args, dts, out, params):
    re, im = args[0]
    return cx.b.fneg(re), cx.b.fneg(im)


def _conj(cx, args, dts, out, params):
    re, im = args[0]
    return re, cx.b.fneg(im)


def _real(cx, args, dts, out, params):
    return args[0][0]


def _imag(cx, args, dts, out, params):
    return args[0][1]


def _complex(cx, args, dts, out, params):
    return args[0], args[1]


def _identity(cx, args, dts, out, params):
    return args[0]


def _host_fma():
    from . import mathlib
    return mathlib._host_fma()


def mul(cx, x, y, dt):
    """NumPy's complex product (fused multiply-adds where the host has FMA)."""
    b = cx.b
    (ar, ai), (br, bi) = x, y
    if _host_fma():
        fma = cx.call_intr("fma", part(dt), ar, br, b.fneg(b.fmul(ai, bi)))
        fma_im = cx.call_intr("fma", part(dt), ar, bi, b.fmul(ai, br))
        return fma, fma_im
    return b.fsub(b.fmul(ar, br), b.fmul(ai, bi)), b.fadd(b.fmul(ar, bi), b.fmul(ai, br))


def div(cx, x, y, dt):
    """NumPy's complex quotient (Smith's algorithm, no fused operations)."""
    b = cx.b
    pt = part(dt)
    (ar, ai), (br, bi) = x, y
    abr, abi = cx.call_intr("fabs", pt, br), cx.call_intr("fabs", pt, bi)
    one, zero = cx.const(pt, 1.0), cx.const(pt, 0.0)
    real_larger = b.fcmp_ordered(">=", abr, abi)
    both_zero = b.and_(b.fcmp_ordered("==", abr, zero), b.fcmp_ordered("==", abi, zero))
    # |br| >= |bi|
    rat = b.fdiv(bi, br)
    scl = b.fdiv(one, b.fadd(br, b.fmul(bi, rat)))
    re1 = b.fmul(b.fadd(ar, b.fmul(ai, rat)), scl)
    im1 = b.fmul(b.fsub(ai, b.fmul(ar, rat)), scl)
    re0, im0 = b.fdiv(ar, abr), b.fdiv(ai, abr)
    # |br| < |bi| (or a NaN part)
    rat2 = b.fdiv(br, bi)
    scl2 = b.fdiv(one, b.fadd(bi, b.fmul(br, rat2)))
    re2 = b.fmul(b.fadd(b.fmul(ar, rat2), ai), scl2)
    im2 = b.fmul(b.fsub(b.fmul(ai, rat2), ar), scl2)
    re = b.select(real_larger, b.select(both_zero, re0, re1), re2)
    im = b.select(real_larger, b.select(both_zero, im0, im1), im2)
    return re, im


def _mul(cx, args, dts, out, params):
    return mul(cx, args[0], args[1], out)


def _div(cx, args, dts, out, params):
    return div(cx, args[0], args[1], out)


def _integer_pow(cx, args, dts, out, params):
    (x,) = args
    dt = dts[0]
    y = params["y"]
    n = abs(y)
    one = const(cx, dt, 1)
    acc, base = None, (div(cx, one, x, dt) if y < 0 else x)
    while n:
        if n & 1:
            acc = base if acc is None else mul(cx, acc, base, dt)
        n >>= 1
        if n:
            base = mul(cx, base, base, dt)
    return one if acc is None else acc


def _eq(cx, args, dts, out, params):
    (xr, xi), (yr, yi) = args
    b = cx.b
    return b.and_(b.fcmp_ordered("==", xr, yr), b.fcmp_ordered("==", xi, yi))


def _ne(cx, args, dts, out, params):
    (xr, xi), (yr, yi) = args
    b = cx.b
    return b.or_(b.fcmp_unordered("!=", xr, yr), b.fcmp_unordered("!=", xi, yi))


def _select_n(cx, args, dts, out, params):
    from .fused import EMITTERS as REAL
    which, cases = args[0], args[1:]
    pt = part(out)
    wdts = [dts[0]] + [pt] * len(cases)
    re = REAL["select_n"](cx, [which] + [c[0] for c in cases], wdts, pt, params)
    im = REAL["select_n"](cx, [which] + [c[1] for c in cases], wdts, pt, params)
    return re, im


def _convert(cx, args, dts, out, params):
    from .fused import EMITTERS as REAL, _F16
    (x,) = args
    src = dts[0]
    b = cx.b
    if src in COMPLEX and out in COMPLEX:
        if src == out:
            return x
        t = cx.ty(part(out))
        grow = out.itemsize > src.itemsize
        return tuple(b.fpext(v, t) if grow else b.fptrunc(v, t) for v in x)
    if src in COMPLEX:           # to a real dtype: the real part (bool: either part)
        pt = part(src)
        if out.kind == "b":
            zero = cx.const(pt, 0.0)
            return b.or_(b.fcmp_unordered("!=", x[0], zero), b.fcmp_unordered("!=", x[1], zero))
        if out == _F16:          # rounded once from the part, as NumPy converts
            h = b.fptrunc(x[0], cx.ir.HalfType())
            return b.fpext(h, cx.ir.FloatType())
        return REAL["convert_element_type"](cx, [x[0]], [pt], out, params)
    # a real (or bool, or integer) value as the real part; +0 as the imaginary part
    pt = part(out)
    if src == _F16:              # float16 values live in float registers already
        re = x if pt == _F32 else b.fpext(x, cx.ty(pt))
    else:
        re = REAL["convert_element_type"](cx, [x], [src], pt, params)
    return re, cx.const(pt, 0.0)


# ----------------------------------------------------------------------------
# libm: hypot for abs and sign, the complex functions (x86-64)

def _hypot(cx, re, im, dt):
    pt = part(dt)
    name = "hypot" if pt == _F64 else "hypotf"
    ty = cx.ty(pt)
    fn = _declare(cx, name, ty, [ty, ty])
    return cx.b.call(fn, [re, im])


def _declare(cx, name, ret, args):
    fn = cx.module.globals.get(name)
    if fn is None:
        _register(name)
        fn = cx.ir.Function(cx.module, cx.ir.FunctionType(ret, args), name)
    return fn


@functools.lru_cache(maxsize=None)
def _register(name):
    """Tell the engine where the C library's `name` is (for MCJIT's loader)."""
    import ctypes
    from . import engine
    try:
        address = ctypes.cast(getattr(ctypes.CDLL(None), name), ctypes.c_void_p).value
    except AttributeError:
        return False
    engine.add_symbol(name, address)
    return True


@functools.lru_cache(maxsize=None)
def _complex_abi():
    """Whether libm's complex functions can be called here: x86-64 (System V),
    where a double complex travels as two doubles (returned as a pair) and a
    float complex as one <2 x float> vector, with every function present."""
    from .fused import _x86
    import platform
    if not _x86() or platform.system() not in ("Linux", "Darwin") or not platform.machine() \
            .lower() in ("x86_64", "amd64"):
        return False
    return all(_register(n) and _register(n + "f") for n in _LIBM.values())


def _abs(cx, args, dts, out, params):
    """NumPy's vectorised complex absolute value: an infinite part makes it inf, a
    NaN part (otherwise) NaN; else larger * sqrt(ratio * ratio + 1) with ratio =
    smaller / larger (0 when larger is 0 or smaller is inf), the square and the
    add fused where the host has FMA."""
    b = cx.b
    pt = part(dts[0])
    re, im = (cx.call_intr("fabs", pt, v) for v in args[0])
    inf, nan = cx.const(pt, float("inf")), cx.const(pt, float("nan"))
    zero, one = cx.const(pt, 0.0), cx.const(pt, 1.0)
    im = b.select(b.fcmp_ordered("==", re, inf), inf, im)
    re = b.select(b.fcmp_ordered("==", im, inf), inf, re)
    im = b.select(b.fcmp_ordered("ord", re, re), im, nan)
    re = b.select(b.fcmp_ordered("ord", im, im), re, nan)
    larger = b.select(b.fcmp_ordered(">", re, im), re, im)
    smaller = b.select(b.fcmp_ordered("<", im, re), im, re)
    divide = b.not_(b.or_(b.fcmp_ordered("==", larger, zero),
                          b.fcmp_ordered("==", smaller, inf)))
    ratio = b.select(divide, b.fdiv(smaller, larger), zero)
    if _host_fma():
        square_plus_one = cx.call_intr("fma", pt, ratio, ratio, one)
    else:
        square_plus_one = b.fadd(b.fmul(ratio, ratio), one)
    return b.fmul(cx.call_intr("sqrt", pt, square_plus_one), larger)


def _sign(cx, args, dts, out, params):
    """NumPy's complex sign: z / |z|; 0 at 0; NaN where |z| is NaN; where |z| is
    infinite, the unit vector of the infinite part (NaN when both are)."""
    b = cx.b
    re, im = args[0]
    dt = dts[0]
    pt = part(dt)
    h = _hypot(cx, re, im, dt)
    zero, nan, inf = cx.const(pt, 0.0), cx.const(pt, float("nan")), cx.const(pt, float("inf"))
    one = cx.const(pt, 1.0)

    def is_inf(v):
        return b.fcmp_ordered("==", cx.call_intr("fabs", pt, v), inf)

    re_inf, im_inf = is_inf(re), is_inf(im)
    inf_re = b.select(re_inf, b.select(im_inf, nan, cx.call_intr("copysign", pt, one, re)), zero)
    inf_im = b.select(re_inf, b.select(im_inf, nan, zero), cx.call_intr("copysign", pt, one, im))
    out_re, out_im = b.fdiv(re, h), b.fdiv(im, h)
    h_inf, h_zero = b.fcmp_ordered("==", h, inf), b.fcmp_ordered("==", h, zero)
    h_nan = b.fcmp_unordered("uno", h, h)
    out_re = b.select(h_inf, inf_re, b.select(h_zero, zero, out_re))
    out_im = b.select(h_inf, inf_im, b.select(h_zero, zero, out_im))
    return b.select(h_nan, nan, out_re), b.select(h_nan, nan, out_im)


def _libm_complex(name):
    def emit(cx, args, dts, out, params):
        ir, b = cx.ir, cx.b
        dt = dts[0]
        re, im = args[0]
        if part(dt) == _F64:
            d = ir.DoubleType()
            fn = _declare(cx, name, ir.LiteralStructType([d, d]), [d, d])
            res = b.call(fn, [re, im])
            return b.extract_value(res, 0), b.extract_value(res, 1)
        v2 = ir.VectorType(ir.FloatType(), 2)
        fn = _declare(cx, name + "f", v2, [v2])
        packed = b.insert_element(b.insert_element(ir.Constant(v2, None), re,
                                                   ir.Constant(cx.i64, 0)),
                                  im, ir.Constant(cx.i64, 1))
        res = b.call(fn, [packed])
        return (b.extract_element(res, ir.Constant(cx.i64, 0)),
                b.extract_element(res, ir.Constant(cx.i64, 1)))
    return emit


EMITTERS = {
    "add": _partwise("fadd"), "sub": _partwise("fsub"), "mul": _mul, "div": _div,
    "neg": _neg, "conj": _conj, "real": _real, "imag": _imag, "complex": _complex,
    "integer_pow": _integer_pow, "eq": _eq, "ne": _ne, "select_n": _select_n,
    "convert_element_type": _convert, "stop_gradient": _identity,
    "abs": _abs, "sign": _sign,
    **{prim: _libm_complex(fn) for prim, fn in _LIBM.items()},
}


def emit(cx, eqn, args, dts, out):
    return EMITTERS[eqn.primitive.name](cx, args, dts, out, eqn.params)
