"""Native loop nests for fused element-wise groups (the CPU backend's kernels).

`compile_groups(groups, name)` emits every `Fused` group of one program into a
single llvmlite module (one LLVM compile per program, cached on disk by
`engine`) and returns one Python callable per group. Group i becomes

    void <name>_k<i>(i64* args)

whose argument table holds the group's non-Literal input arrays and then its
output arrays (plus, for a group with an integer `select_n`, one slot the
kernel sets when a selector is out of range); Literals are IR constants. A
slot holds the ndarray's object address and the kernel reads the data pointer
from the object (NumPy's ABI: `PyArrayObject_fields.data` follows the object
header; the offset is verified at import), which costs `id(a)` per array in
Python instead of ~1 us for `a.ctypes.data` / `__array_interface__`; if the
offset cannot be verified, slots hold data pointers instead.

The loop nest walks the group's output shape. Every input is C-contiguous (the
callable copies the rare one that is not) and is read with NumPy broadcasting:
by the flat index when it has the domain's size, as one hoisted scalar when it
has one element, otherwise through per-dimension strides (0 on broadcast
dimensions). Dimensions of extent 1 are dropped and adjacent dimensions every
operand walks contiguously are merged, so the inner loop is unit-stride (or
invariant) for each operand and LLVM's loop vectoriser handles it. The loop
body lives in an internal `alwaysinline` function whose pointer parameters are
`noalias` (outputs are fresh arrays; inputs are only read), so no runtime alias
checks are needed; GEPs are `inbounds`.

A group may end with a reduce_sum / reduce_prod / reduce_max / reduce_min
(numeric dtypes; max/min also bool) or a reduce_and / reduce_or (bool) whose
input has the domain's shape, or hold several of one kind over the same axes
(`fusion.join_sibling_reductions`, when `same_sums` finds each one's loop
nest, and so its order of terms, unchanged): each output is filled with the
identity (0, as NumPy's sums start from +0.0; 1; -inf / +inf or the integer
extremes; True / False) before the loop nest, and the body accumulates into it through strides
that are 0 on the reduced axes (a last-axis reduction's accumulator is
promoted to a register by LLVM).
Max/min propagate NaN like np.max / np.min and count -0.0 below +0.0 (IEEE
754-2019, LLVM's vectorisable maximum; the NumPy impls settle ties of zeros so,
as NumPy keeps whichever its SIMD order meets last; element-wise max/min are
np.maximum / np.minimum exactly); max/min of a
zero-size array is left to NumPy (it raises), and so are zero-size products
and `and`s (a kernel
over an empty domain only returns zeros); a zero-size sum is 0, an `or`
False. Only the accumulation of a float sum or product carries `reassoc` (so
it vectorises with partial sums; NumPy's pairwise sum reorders too). A float
sum of more than a block of terms per output element adds them in blocks whose
sums are added pairwise (`summation`): in registers when the innermost loops
are reduced, in a scratch row of output elements when they are kept (a sum
over outer axes). Inputs that are fused views (`Fused.reads`: expand_dims,
squeeze, broadcast_in_dim, transpose, slice, rev, size-1 reshapes) are read
from their source buffer through the view's IndexMap (strides, possibly
negative, from an offset).

Semantics are those of the NumPy impls in `lax/elementwise.py`: integer and
bool results are bit-for-bit equal, and so are the correctly rounded float
operations (add, sub, mul, div, sqrt, negation, abs, rounding, remainders,
comparisons, max/min, conversions), signs of zeros included: no element-wise float
operation carries a fast-math flag (`nsz` would let 0.0 - x give -0.0 at
x = +0.0; `contract` would fuse a*b + c into one fma, rounded once instead
of twice as NumPy does; `arcp`/`afn` would allow approximations; `nnan`/`ninf`
would break NaN/Inf). The transcendental functions come from `mathlib` (a
couple of ulp from NumPy's; tan = sin / cos), and a float integer_pow is a
chain of multiplications (NumPy's power calls pow: a few ulp apart for
exponents other than 0, 1, 2). `can_fuse(eqn)` says
which (primitive, dtypes) pairs have an emitter here; the rest run as NumPy
steps.

Complex operands and results (complex64, complex128) are pairs of registers
loaded from and stored to interleaved memory; `complex_emit` emits their
equations (NumPy's formulas, libm's complex functions) and says which it can.

float16 values are loaded as half, held in float registers and stored as
half; every operation on them is computed in float32 and its result rounded
to half (`_emit_half`), which is what NumPy's float16 loops do, so arithmetic,
square roots, comparisons and conversions are bit-for-bit NumPy's (a float64
-> float16 conversion rounds once; rsqrt and logistic round after each step of
their impls); transcendental functions are the float32 ones rounded (<= 1
half ulp).

A flat element-wise loop whose outputs reach `streaming.stream_bytes()` (the
last-level cache, at most 8 MiB) writes them with non-temporal stores, block
by block through buffers on the stack (`streaming`): the same values, without
reading each output line before writing it.

Standalone kernels (`can_lower_alone`): BLAS matmuls (`blas`), gather and the
scatters (`indexing`), and pad, concatenate, dynamic_slice,
dynamic_update_slice, the cumulative reductions and argmax / argmin
(`structural`).

float16 sums and products reach the backend as float32 ones between converts
(`simplify.widen_half_reductions`). Deliberate gaps (can_fuse says False):
bitcasts to or from bool, integer_pow of integers to negative powers (the NumPy impl raises). Float -> int conversions match NumPy on x86 (NaN
and out-of-range values give what cvttss2si/cvttsd2si give); float -> uint32
goes through the 64-bit conversion, as the NumPy impl does (NumPy's own answer
for NaN or values outside [-2**31, 2**32) differs between small and large
arrays).
"""
import functools
import math
import re

import numpy as np

from ..compiler.layout import c_strides, collapse, domain_strides
from ..jaxpr import Literal
from ..lax.elementwise import MAX_UNROLLED_POW as _MAX_UNROLLED_POW
from . import (blas, compiler_lock, complex_emit, convolution, engine, indexing, interrupts,
               lane_product, lapack, outputs, pool, program, sorting, streaming, structural,
               summation, threads, windows)
from .dispatch import NativeEntry
from . import scipy_kernels  # the special functions' emitters
from . import mpi  # fgrad.distributed's collectives as MPI calls
from . import mathlib_runtime  # sin and cos's shared code, found by engine
from .loops import interleave, no_unroll

engine.add_resolver(interrupts.resolve)    # loops' signal polling: shared code

__all__ = ["can_copy", "can_fuse", "can_lower_alone", "compile_groups", "emit_module",
           "FusedCompileError"]


class FusedCompileError(RuntimeError):
    """A fused group could not be turned into native code."""


# ----------------------------------------------------------------------------
# What has an emitter

_BOOL = np.dtype(bool)
_F16, _F32, _F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
_INTS = tuple(np.dtype(f"{k}int{b}") for k in ("", "u") for b in (8, 16, 32, 64))
_FLOATS = (_F16, _F32, _F64)
_ALL = frozenset((_BOOL,) + _INTS + _FLOATS)

_F = frozenset(_FLOATS)
_NUM = frozenset(_INTS + _FLOATS)
_SIGNED = frozenset(d for d in _NUM if d.kind in "if")
_INT = frozenset(_INTS)
_INT_BOOL = frozenset(_INTS + (_BOOL,))

# primitive name -> dtypes its operands may have (checked on the first operand,
# or on the cases for select_n; the shared-dtype rule is the primitive's own)
_OPERAND_DTYPES = {
    "add": _NUM, "sub": _NUM, "mul": _NUM, "div": _NUM, "rem": _NUM,
    "max": _NUM, "min": _NUM, "sign": _NUM, "integer_pow": _NUM,
    "neg": _SIGNED, "abs": _SIGNED,
    "pow": _F, "floor": _F, "ceil": _F, "round": _F, "exp": _F, "log": _F,
    "log1p": _F, "expm1": _F, "sin": _F, "cos": _F, "tan": _F, "tanh": _F,
    "sqrt": _F, "rsqrt": _F, "logistic": _F, "erf": _F, "is_finite": _F,
    "atan2": _F, "erf_inv": _F,
    "eq": _ALL, "ne": _ALL, "lt": _ALL, "le": _ALL, "gt": _ALL, "ge": _ALL,
    "select_n": _ALL, "convert_element_type": _ALL, "bitcast_convert_type": _ALL,
    "stop_gradient": _ALL,
    "and": _INT_BOOL, "or": _INT_BOOL, "xor": _INT_BOOL, "not": _INT_BOOL,
    "shift_left": _INT, "shift_right_logical": _INT, "shift_right_arithmetic": _INT,
    "population_count": _INT,
    **scipy_kernels.OPERAND_DTYPES,
}


def can_copy(aval):
    """Whether a view of an array of this type can be copied by a loop nest."""
    return aval.dtype in _ALL or aval.dtype in complex_emit.COMPLEX


def rhs_rows_first(eqn):
    """Whether a dot_general's rhs, stored (free, contracting), is better copied
    (contracting, free) first: a lane product reads it by rows (blas.lane_rows)."""
    spec = blas.gemm_spec(eqn)
    return spec is not None and spec.trans_b and min(spec.m, spec.n) >= 2 \
        and blas.lane_rows(eqn.outvars[0].aval.dtype, spec.n)


def can_lower_alone(eqn):
    """Whether `eqn` (not element-wise) has a native kernel of its own here: a
    dot_general that BLAS gemm runs without copies, a gather or a scatter (on
    array operands), or a structural primitive (`structural`: pad, concatenate,
    dynamic slices, iota, cumulative reductions, argmax/argmin; scalar Literal
    operands become constants)."""
    if structural.can_lower(eqn) or sorting.can_lower(eqn) or lapack.can_lower(eqn) \
            or convolution.can_lower(eqn) or mpi.can_lower(eqn) or windows.can_lower(eqn):
        return True
    if any(type(a) is Literal for a in eqn.invars):
        return False
    return blas.gemm_spec(eqn) is not None or indexing.can_lower(eqn)


def calls_note(group):
    """What a standalone kernel calls, for its label in `as_text`: ' (LAPACK
    dgeqrf, dorgqr)' for a decomposition, else ''."""
    eqn = group.eqns[0]
    if eqn.primitive.name in mpi.NAMES:
        return f" ({mpi.routine(eqn)})"
    if eqn.primitive.name not in lapack.NAMES:
        return ""
    names = lapack.routines(eqn)
    library = "BLAS" if eqn.primitive.name == "triangular_solve" else "LAPACK"
    return f" ({library} {', '.join(names)})"


def can_fuse(eqn):
    """Whether this backend has a loop-body emitter for `eqn` (primitive and dtypes)."""
    name = eqn.primitive.name
    if name in _REDUCE_DTYPES:
        x = eqn.invars[0].aval
        if x.dtype not in _REDUCE_DTYPES[name] or eqn.outvars[0].aval.dtype != x.dtype:
            return False
        # np.max / np.min of nothing raise: left to NumPy. Over an empty domain the
        # caller fills a sum/or with 0 and a product/and with 1 (their identities).
        return name not in ("reduce_max", "reduce_min") or math.prod(x.shape) > 0
    allowed = _OPERAND_DTYPES.get(name)
    if complex_emit.is_complex_eqn(eqn):
        return eqn.primitive.elementwise and complex_emit.can_fuse(eqn, _ALL)
    if allowed is None or not eqn.primitive.elementwise:
        return False
    if any(a.aval.dtype not in _ALL for a in eqn.invars):
        return False
    if any(v.aval.dtype not in _ALL for v in eqn.outvars):
        return False
    operands = eqn.invars[1:] if name == "select_n" else eqn.invars
    if not operands or operands[0].aval.dtype not in allowed:
        return False
    if name == "select_n":
        return eqn.invars[0].aval.dtype.kind in "biu"
    if name == "integer_pow":
        return eqn.params["y"] >= 0 or operands[0].aval.dtype.kind == "f"
    if name == "bitcast_convert_type":
        return _BOOL not in (operands[0].aval.dtype, eqn.outvars[0].aval.dtype)
    if name in scipy_kernels.EMITTERS:
        return scipy_kernels.available(name)
    return True


# ----------------------------------------------------------------------------
# IR helpers



def _ir():
    from llvmlite import ir
    return ir


def _bits(dt):
    return dt.itemsize * 8


class _Cx:
    """What an emitter needs: the builder, the module and type helpers."""

    def __init__(self, ir, module, builder):
        self.ir, self.module, self.b = ir, module, builder
        self.i1 = ir.IntType(1)
        self.i64 = ir.IntType(64)
        self.errors = []          # i1 values: a selector was out of range

    def ty(self, dt):
        """Register type of a dtype (bool is i1; float16 values live in float
        registers, rounded to half after every operation)."""
        ir = self.ir
        if dt.kind == "b":
            return ir.IntType(1)
        if dt.kind == "f":
            return ir.DoubleType() if dt.itemsize == 8 else ir.FloatType()
        return ir.IntType(_bits(dt))

    def mem_ty(self, dt):
        """Memory type of a dtype (bool is one byte, float16 is half)."""
        if dt.kind == "b":
            return self.ir.IntType(8)
        return self.ir.HalfType() if dt == _F16 else self.ty(dt)

    def from_mem(self, v, dt):
        """A loaded value (of `mem_ty(dt)`) as a register value."""
        if dt.kind == "b":
            return self.b.icmp_unsigned("!=", v, self.ir.Constant(v.type, 0))
        return self.b.fpext(v, self.ir.FloatType()) if dt == _F16 else v

    def to_mem(self, v, dt):
        """A register value as the value to store (of `mem_ty(dt)`)."""
        if dt.kind == "b":
            return self.b.zext(v, self.ir.IntType(8))
        return self.b.fptrunc(v, self.ir.HalfType()) if dt == _F16 else v

    def round_half(self, v):
        """A float register value rounded to the nearest float16 (NumPy computes
        float16 operations in float and rounds each result)."""
        return self.b.fpext(self.b.fptrunc(v, self.ir.HalfType()), self.ir.FloatType())

    def const(self, dt, value):
        ir = self.ir
        if dt.kind == "c":
            return complex_emit.const(self, dt, value)
        if dt.kind == "b":
            return ir.Constant(ir.IntType(1), int(bool(value)))
        if dt.kind == "f":
            v = float(np.asarray(value, dt))
            return ir.Constant(self.ty(dt), v)
        n = _bits(dt)
        v = int(value) & ((1 << n) - 1)
        if v >= 1 << (n - 1):
            v -= 1 << n
        return ir.Constant(self.ty(dt), v)

    def intrinsic(self, name, ret, args):
        fn = self.module.globals.get(name)
        if fn is None:
            fn = self.ir.Function(self.module, self.ir.FunctionType(ret, args), name)
        return fn

    def call_intr(self, base, dt, *args, flags=()):
        t = self.ty(dt)
        suffix = ("f64" if dt.itemsize == 8 else "f32") if dt.kind == "f" else f"i{_bits(dt)}"
        fn = self.intrinsic(f"llvm.{base}.{suffix}", t, [a.type for a in args])
        return self.b.call(fn, list(args), fastmath=flags)

    def math(self, name, dt, *args):
        from . import mathlib
        fn = mathlib.emit(self.module, name, _F32 if dt == _F16 else dt)
        return self.b.call(fn, list(args))


# ----------------------------------------------------------------------------
# Emitters: fn(cx, args, in_dtypes, out_dtype, params) -> ir value

def _arith(int_op, float_op):
    def emit(cx, args, dts, out, params):
        x, y = args
        if dts[0].kind == "f":
            return getattr(cx.b, float_op)(x, y)
        return getattr(cx.b, int_op)(x, y)
    return emit


def _div(cx, args, dts, out, params):
    b = cx.b
    x, y = args
    dt = dts[0]
    if dt.kind == "f":
        return b.fdiv(x, y)
    zero, one = cx.const(dt, 0), cx.const(dt, 1)
    y0 = b.icmp_unsigned("==", y, zero)
    if dt.kind == "u":
        return b.select(y0, zero, b.udiv(x, b.select(y0, one, y)))
    ym1 = b.icmp_signed("==", y, cx.const(dt, -1))
    safe = b.select(b.or_(y0, ym1), one, y)
    q = b.select(ym1, b.sub(zero, x), b.sdiv(x, safe))      # INT_MIN / -1 wraps
    return b.select(y0, zero, q)


def _rem(cx, args, dts, out, params):
    b = cx.b
    x, y = args
    dt = dts[0]
    if dt.kind == "f":
        return b.frem(x, y)
    zero, one = cx.const(dt, 0), cx.const(dt, 1)
    bad = b.icmp_unsigned("==", y, zero)
    if dt.kind == "u":
        return b.urem(x, b.select(bad, one, y))   # x % 1 == 0 == NumPy's x % 0
    bad = b.or_(bad, b.icmp_signed("==", y, cx.const(dt, -1)))
    return b.srem(x, b.select(bad, one, y))       # x % -1 == 0 as well


def _neg(cx, args, dts, out, params):
    (x,) = args
    if dts[0].kind == "f":
        return cx.b.fneg(x)      # exact: neg(0.0) is -0.0
    return cx.b.sub(cx.const(dts[0], 0), x)


def _abs(cx, args, dts, out, params):
    (x,) = args
    dt = dts[0]
    if dt.kind == "f":
        return cx.call_intr("fabs", dt, x)
    neg = cx.b.icmp_signed("<", x, cx.const(dt, 0))
    return cx.b.select(neg, cx.b.sub(cx.const(dt, 0), x), x)    # abs(INT_MIN) == INT_MIN


def _sign(cx, args, dts, out, params):
    b = cx.b
    (x,) = args
    dt = dts[0]
    zero, one, m1 = cx.const(dt, 0), cx.const(dt, 1), cx.const(dt, -1)
    if dt.kind == "f":   # NaN -> NaN, +-0 -> +0 (as np.sign)
        z = b.select(b.fcmp_ordered("==", x, zero), zero, x)
        return b.select(b.fcmp_ordered(">", x, zero), one,
                        b.select(b.fcmp_ordered("<", x, zero), m1, z))
    if dt.kind == "u":
        return b.zext(b.icmp_unsigned("!=", x, zero), x.type)
    return b.select(b.icmp_signed(">", x, zero), one,
                    b.select(b.icmp_signed("<", x, zero), m1, zero))


def _float_minmax(cx, op, x, y, tie_first=False):
    """np.maximum (op '>') / np.minimum ('<') exactly: x if x beats y or x is NaN,
    else y, so NaN propagates and of two equal values (0.0 and -0.0) the second
    is kept; NumPy's float16 loops keep the first (tie_first: '>=' / '<=')."""
    b = cx.b
    beats = b.fcmp_ordered(op + "=" if tie_first else op, x, y)
    return b.select(b.or_(beats, b.fcmp_unordered("uno", x, x)), x, y)


def _minmax(op):
    def emit(cx, args, dts, out, params):
        x, y = args
        dt = dts[0]
        if dt.kind == "f":
            return _float_minmax(cx, op, x, y)
        cmp = cx.b.icmp_unsigned if dt.kind == "u" else cx.b.icmp_signed
        return cx.b.select(cmp(op, x, y), x, y)
    return emit


def _pow(cx, args, dts, out, params):
    return cx.math("pow", dts[0], *args)


def _integer_pow(cx, args, dts, out, params):
    b = cx.b
    (x,) = args
    dt = dts[0]
    y = params["y"]
    n = abs(y)
    if dt.kind == "f" and n > _MAX_UNROLLED_POW:
        return cx.math("pow", dt, x, cx.const(dt, float(y)))

    def mul(p, q):
        return b.fmul(p, q) if dt.kind == "f" else b.mul(p, q)

    # negative powers: the reciprocal first, so x**-n underflows only where the
    # result does (1 / x**n would give 0 once x**n overflows)
    acc, base = None, (b.fdiv(cx.const(dt, 1.0), x) if y < 0 else x)
    while n:
        if n & 1:
            acc = base if acc is None else mul(acc, base)
        n >>= 1
        if n:
            base = mul(base, base)
    return cx.const(dt, 1) if acc is None else acc


def _unary_intr(base, flags=()):
    def emit(cx, args, dts, out, params):
        return cx.call_intr(base, dts[0], args[0], flags=flags)
    return emit


def _round(cx, args, dts, out, params):
    (x,) = args
    dt = dts[0]
    if params["rounding_method"] == "to_nearest_even":
        return cx.call_intr("roundeven", dt, x)
    # as the NumPy impl: trunc(x), one step away from zero when |x - trunc(x)| >= 0.5
    # (the difference is exact; floor(|x| + 0.5) would round the sum up)
    b = cx.b
    t = cx.call_intr("trunc", dt, x)
    frac = cx.call_intr("fabs", dt, b.fsub(x, t))
    half_or_more = b.fcmp_ordered(">=", frac, cx.const(dt, 0.5))
    step = cx.call_intr("copysign", dt, cx.const(dt, 1.0), x)
    return b.select(half_or_more, b.fadd(t, step), t)


def _mathfn(name):
    def emit(cx, args, dts, out, params):
        return cx.math(name, dts[0], *args)
    return emit


def _tan(cx, args, dts, out, params):
    (x,) = args
    dt = dts[0]
    return cx.b.fdiv(cx.math("sin", dt, x), cx.math("cos", dt, x))


def _sqrt(cx, args, dts, out, params):
    return cx.call_intr("sqrt", dts[0], args[0])


def _rsqrt(cx, args, dts, out, params):
    dt = dts[0]
    return cx.b.fdiv(cx.const(dt, 1.0), cx.call_intr("sqrt", dt, args[0]))


def _compare(op):
    def emit(cx, args, dts, out, params):
        x, y = args
        dt = dts[0]
        if dt.kind == "f":
            if op == "!=":
                return cx.b.fcmp_unordered(op, x, y)   # NaN != anything
            return cx.b.fcmp_ordered(op, x, y)
        if dt.kind == "i":
            return cx.b.icmp_signed(op, x, y)
        return cx.b.icmp_unsigned(op, x, y)          # unsigned ints and bool
    return emit


def _is_finite(cx, args, dts, out, params):
    dt = dts[0]
    return cx.b.fcmp_ordered("<", cx.call_intr("fabs", dt, args[0]), cx.const(dt, math.inf))


def _select_n(cx, args, dts, out, params):
    b = cx.b
    which, cases = args[0], args[1:]
    wdt = dts[0]
    if len(cases) == 1:
        return cases[0]
    if wdt.kind == "b":
        return b.select(which, cases[1], cases[0])
    # np.choose raises on an out-of-range selector: flag it (the caller raises)
    cx.errors.append(b.icmp_unsigned(">=", which, cx.const(wdt, len(cases))))
    result = cases[-1]
    for k in range(len(cases) - 2, -1, -1):
        result = b.select(b.icmp_unsigned("==", which, cx.const(wdt, k)), cases[k], result)
    return result


def _float_to_int(cx, x, src, dst):
    """x86/NumPy float -> int: truncation; NaN and out-of-range give what
    cvtt*2si gives (the minimum integer of the 32- or 64-bit conversion)."""
    b = cx.b
    ir = cx.ir

    def cvtt(v, bits):   # in range ? fptosi : INT_MIN
        it = ir.IntType(bits)
        lo, hi = cx.const(src, -2.0 ** (bits - 1)), cx.const(src, 2.0 ** (bits - 1))
        ok = b.and_(b.fcmp_ordered(">=", v, lo), b.fcmp_ordered("<", v, hi))
        return b.select(ok, b.fptosi(v, it), ir.Constant(it, -(1 << (bits - 1))))

    bits = _bits(dst)
    if dst.kind == "i" and bits == 64:
        return cvtt(x, 64)
    if dst.kind == "u" and bits == 64:
        big = cx.const(src, 2.0 ** 63)
        small = b.fcmp_unordered("<", x, big)          # NaN takes this branch
        high = b.xor(cvtt(b.fsub(x, big), 64), ir.Constant(ir.IntType(64), -(1 << 63)))
        return b.select(small, cvtt(x, 64), high)
    if dst.kind == "u" and bits == 32:
        return b.trunc(cvtt(x, 64), ir.IntType(32))
    v = cvtt(x, 32)
    return v if bits == 32 else b.trunc(v, ir.IntType(bits))


def _convert(cx, args, dts, out, params):
    b = cx.b
    (x,) = args
    src, dst = dts[0], out
    t = cx.ty(dst)
    if src == dst:
        return x
    if dst.kind == "b":
        if src.kind == "f":
            return b.fcmp_unordered("!=", x, cx.const(src, 0))
        return b.icmp_unsigned("!=", x, cx.const(src, 0))
    if src.kind == "b":
        return b.uitofp(x, t) if dst.kind == "f" else b.zext(x, t)
    if src.kind == "f":
        if dst.kind == "f":
            return b.fpext(x, t) if dst.itemsize > src.itemsize else b.fptrunc(x, t)
        return _float_to_int(cx, x, src, dst)
    if dst.kind == "f":
        return b.sitofp(x, t) if src.kind == "i" else b.uitofp(x, t)
    if dst.itemsize == src.itemsize:
        return x
    if dst.itemsize < src.itemsize:
        return b.trunc(x, t)
    return b.sext(x, t) if src.kind == "i" else b.zext(x, t)


def _bitcast(cx, args, dts, out, params):
    (x,) = args
    t = cx.ty(out)
    return x if x.type == t else cx.b.bitcast(x, t)


def _bitop(op):
    def emit(cx, args, dts, out, params):
        return getattr(cx.b, op)(*args)
    return emit


def _not(cx, args, dts, out, params):
    return cx.b.not_(args[0])


def _shift(kind):
    def emit(cx, args, dts, out, params):
        b = cx.b
        x, y = args
        dt = dts[0]
        n = _bits(dt)
        ok = b.icmp_unsigned("<", y, cx.const(dt, n))   # negative amounts are huge unsigned
        zero = cx.const(dt, 0)
        if kind == "shl":
            return b.select(ok, b.shl(x, b.select(ok, y, zero)), zero)
        if kind == "lshr":
            return b.select(ok, b.lshr(x, b.select(ok, y, zero)), zero)
        return b.ashr(x, b.select(ok, y, cx.const(dt, n - 1)))
    return emit


def _popcount(cx, args, dts, out, params):
    return cx.call_intr("ctpop", dts[0], args[0])


def _identity(cx, args, dts, out, params):
    return args[0]


EMITTERS = {
    "add": _arith("add", "fadd"), "sub": _arith("sub", "fsub"), "mul": _arith("mul", "fmul"),
    "div": _div, "rem": _rem, "neg": _neg, "abs": _abs, "sign": _sign,
    "max": _minmax(">"), "min": _minmax("<"),
    "pow": _pow, "integer_pow": _integer_pow,
    "floor": _unary_intr("floor"), "ceil": _unary_intr("ceil"), "round": _round,
    "exp": _mathfn("exp"), "log": _mathfn("log"), "log1p": _mathfn("log1p"),
    "expm1": _mathfn("expm1"), "sin": _mathfn("sin"), "cos": _mathfn("cos"),
    "tan": _tan, "tanh": _mathfn("tanh"), "logistic": _mathfn("logistic"),
    "erf": _mathfn("erf"), "erf_inv": _mathfn("erf_inv"), "atan2": _mathfn("atan2"),
    "sqrt": _sqrt, "rsqrt": _rsqrt,
    "eq": _compare("=="), "ne": _compare("!="), "lt": _compare("<"),
    "le": _compare("<="), "gt": _compare(">"), "ge": _compare(">="),
    "is_finite": _is_finite, "select_n": _select_n,
    "convert_element_type": _convert, "bitcast_convert_type": _bitcast,
    "and": _bitop("and_"), "or": _bitop("or_"), "xor": _bitop("xor"), "not": _not,
    "shift_left": _shift("shl"), "shift_right_logical": _shift("lshr"),
    "shift_right_arithmetic": _shift("ashr"),
    "population_count": _popcount, "stop_gradient": _identity,
    **scipy_kernels.EMITTERS,
}
assert set(EMITTERS) == set(_OPERAND_DTYPES)


# ----------------------------------------------------------------------------
# Loop nests

def _reduced_strides(domain, axes):
    """Element strides over `domain` of a reduction's C-contiguous output
    (0 on the reduced axes)."""
    kept = [d for d in range(len(domain)) if d not in axes]
    cs = c_strides([domain[d] for d in kept])
    out = [0] * len(domain)
    for d, s in zip(kept, cs):
        out[d] = 0 if domain[d] == 1 else s
    return out


def _layout(domain, operands, offsets=None):
    """Collapsed loop extents and, per operand (its element strides over the
    domain, and the offset of its first element), ('flat'|'scalar', None) or
    ('strided', strides over the collapsed loops)."""
    flat = domain_strides(domain, domain)
    offsets = offsets or [0] * len(operands)
    kinds, strided = [], []
    for st, offset in zip(operands, offsets):
        st = list(st)
        if not any(st):
            kinds.append("scalar")
        elif st == flat and not offset:
            kinds.append("flat")
        else:
            kinds.append("strided")
            strided.append(st)
    dims, strs = collapse(list(domain), strided)
    out, it = [], iter(strs)
    for k in kinds:
        out.append((k, next(it)) if k == "strided" else (k, None))
    return dims, out


# Reductions a group may end with: (identity, combine) per dtype kind. float16 sums
# and products accumulate in float32: simplify rewrites them to float32 ones.
_REDUCE_DTYPES = {"reduce_sum": _NUM - {_F16}, "reduce_prod": _NUM - {_F16},
                  "reduce_max": _NUM | {_BOOL}, "reduce_min": _NUM | {_BOOL},
                  "reduce_and": frozenset({_BOOL}), "reduce_or": frozenset({_BOOL})}
# The accumulation of a float sum (or product) may be reassociated (so it
# vectorises with several partial sums, as NumPy's pairwise sum also reorders);
# only that add (mul) carries `reassoc`, so nothing else is rewritten through it.
# No `nsz`, which would let partial sums start from either zero.
_SUM_FLAGS = ("reassoc",)


def _reduce_identity(cx, name, dt):
    if name == "reduce_sum":
        return cx.const(dt, 0)     # +0.0, as NumPy's: a sum of -0.0s is +0.0
    if name == "reduce_prod":
        return cx.const(dt, 1)
    if dt.kind == "b":      # and / min: True; or / max: False
        return cx.const(dt, name in ("reduce_and", "reduce_min"))
    if dt.kind == "f":
        return cx.const(dt, -math.inf if name == "reduce_max" else math.inf)
    info = np.iinfo(dt)
    return cx.const(dt, int(info.min if name == "reduce_max" else info.max))


def _reduce_combine(cx, name, dt, acc, x):
    b = cx.b
    if name == "reduce_sum":
        return b.fadd(acc, x, flags=_SUM_FLAGS) if dt.kind == "f" else b.add(acc, x)
    if name == "reduce_prod":
        return b.fmul(acc, x, flags=_SUM_FLAGS) if dt.kind == "f" else b.mul(acc, x)
    if dt.kind == "b":
        return b.and_(acc, x) if name in ("reduce_and", "reduce_min") else b.or_(acc, x)
    if dt.kind == "f":     # NaN-propagating, as np.max / np.min
        return cx.call_intr("maximum" if name == "reduce_max" else "minimum", dt, acc, x)
    op = ">" if name == "reduce_max" else "<"
    cmp = b.icmp_unsigned if dt.kind == "u" else b.icmp_signed
    return b.select(cmp(op, x, acc), x, acc)


def _pairwise_sum(ir, module, body, b, cx, red, red_out, red_layout, dims, split=None):
    """How a float reduce_sum adds up its terms (see `summation`): None (one
    running sum per output element, for few terms), or (a summation.PairwiseSum
    or PairwiseRows, the first loop level of the levels it sums over, the last
    of them). A PairwiseSum over the reduced levels inside the innermost kept
    one (all levels for a full sum); a PairwiseRows over the reduced levels just
    outside the kept ones inside them, when those hold more terms (each row
    then adds the terms of the inner reduced levels one after another) and
    its scratch rows fit. The other reduced levels, outside a kept one, add
    their sums one after another. `split`: (the level running [lo, hi), the
    first and stop output elements it owns) when the kernel may be split by
    kept elements (see _split_level): a row inside it sums only those."""
    if red_out is None or red.primitive.name != "reduce_sum" or not math.prod(dims):
        return None
    dt = red_out.aval.dtype
    kind, st = red_layout
    if dt.kind != "f" or kind == "flat":
        return None
    if kind == "scalar":
        st = [0] * len(dims)
    kept = [level for level in range(len(dims)) if st[level] != 0]
    inner = kept[-1] + 1 if kept else 0          # the reduced levels inside every kept one
    last = max((level for level in range(inner) if st[level] == 0), default=None)
    first = last
    while first is not None and first > 0 and st[first - 1] == 0:
        first -= 1
    inner_terms = math.prod(dims[inner:])
    rows = 1 if last is None else math.prod(dims[first:last + 1])
    if inner_terms < rows:
        width = math.prod(dims[level] for level in range(last + 1, len(dims)) if st[level])
        block = summation.block_rows(rows, inner_terms, width * dt.itemsize)
        if block is not None:
            span = split[1:] if split is not None and split[0] > last else None
            return (summation.PairwiseRows(ir, module, body, b, cx.ty(dt), rows, width, block,
                                           span), first, last)
    if not summation.worth_it(inner_terms):
        return None
    return (summation.PairwiseSum(ir, body, b, cx.ty(dt), inner_terms, _SUM_FLAGS),
            inner, len(dims) - 1)


# float16 operations whose float result is a float16 value already
_HALF_EXACT = frozenset({"select_n", "neg", "abs", "sign", "max", "min", "floor", "ceil",
                         "round", "rem", "stop_gradient"})


def _emit_half(cx, eqn, args, dts, out):
    """An equation with float16 operands or result: float16 values live in float
    registers, so it is computed as float32 and the result rounded to half, as
    NumPy's float16 loops do; a float64 -> float16 conversion rounds once, and
    bitcasts go through the half type."""
    b, ir = cx.b, cx.ir
    name = eqn.primitive.name
    half, single = ir.HalfType(), ir.FloatType()
    if name == "bitcast_convert_type":
        if dts[0] == out:
            return args[0]
        if dts[0] == _F16:
            return b.bitcast(b.fptrunc(args[0], half), cx.ty(out))
        return args[0] if out != _F16 else b.fpext(b.bitcast(args[0], half), single)
    if name == "convert_element_type" and out == _F16 and dts[0] == _F64:
        return b.fpext(b.fptrunc(args[0], half), single)

    if name in ("rsqrt", "logistic"):    # the impls round after each NumPy step
        return _half_steps(cx, name, args[0])
    if name in ("max", "min") and dts[0] == _F16:
        return _float_minmax(cx, ">" if name == "max" else "<", *args, tie_first=True)

    if name == "select_n" and out == _F16:
        # select the half values themselves (exact): selecting their float
        # extensions let LLVM 22 rewrite select(x > 0, 0, x) followed by neg / mul
        # and a second select on the same mask into select(x >= 0, -0.0, -x), which
        # is wrong for x = -0.0 (nn.elu(-0.0) gave +0.0)
        cases = [b.fptrunc(c, half) for c in args[1:]]
        v = EMITTERS[name](cx, [args[0]] + cases, [dts[0]] + [_F16] * len(cases), _F16, eqn.params)
        return b.fpext(v, single)

    def as32(dt):
        return _F32 if dt == _F16 else dt

    v = EMITTERS[name](cx, args, [as32(d) for d in dts], as32(out), eqn.params)
    exact = name in _HALF_EXACT or (name == "convert_element_type" and dts[0].kind == "b")
    return cx.round_half(v) if out == _F16 and not exact else v


def _half_steps(cx, name, x):
    """float16 rsqrt = 1 / sqrt(x) and logistic = 1 / (1 + e) or e / (1 + e) with
    e = exp(-|x|), each step rounded to half like the NumPy impls' steps."""
    b, r = cx.b, cx.round_half
    one = cx.const(_F32, 1.0)
    if name == "rsqrt":
        return r(b.fdiv(one, r(cx.call_intr("sqrt", _F32, x))))
    e = r(cx.math("exp", _F32, b.fneg(cx.call_intr("fabs", _F32, x))))
    d = r(b.fadd(one, e))
    res = b.select(b.fcmp_ordered(">=", x, cx.const(_F32, 0.0)), b.fdiv(one, d),
                   b.fdiv(e, d))
    return r(res)


def _loop_nest(group):
    """(the group's reductions, those whose outputs the group returns, the
    collapsed loop extents, per input and then the reduced outputs: its layout
    over them) of an element-wise group. Its reductions share their axes, so
    their outputs share a layout."""
    domain = tuple(group.shape)
    reads = [r for a, r in zip(group.inputs, group.reads) if type(a) is not Literal]
    ins = [a for a in group.inputs if type(a) is not Literal]
    reds = [e for e in group.eqns if e.primitive.name in _REDUCE_DTYPES]
    red_outs = [e for e in reds if e.outvars[0] in group.outputs]
    # a fused view (an IndexMap) reads its source with the view's strides from an offset
    operands = [domain_strides(domain, v.aval.shape, None) if m is None
                else domain_strides(domain, rv.aval.shape, m.strides)
                for v, (rv, m) in zip(ins, reads)]
    offsets = [0 if m is None else m.offset for _, m in reads]
    if red_outs:
        operands.append(_reduced_strides(domain, set(red_outs[0].params["axes"])))
        offsets.append(0)
    dims, layout = _layout(domain, operands, offsets)
    return reds, red_outs, dims, layout


def same_sums(parts, joined):
    """Whether each reduction of the groups `parts` adds up its terms in the same
    order in the group `joined` (which runs them all): the same loop nest over the
    terms and the same layout of the reduced outputs."""
    _, _, dims, layout = _loop_nest(joined)
    for part in parts:
        _, red_outs, part_dims, part_layout = _loop_nest(part)
        if part_dims != dims or (red_outs and part_layout[-1] != layout[-1]):
            return False
    return True


def _kept_split(red_outs, dims, red_layout):
    """(level, stride) when the reduced outputs' outermost kept elements are a
    loop level with only reduced levels outside it, else None: indices [lo, hi)
    of that level then own the output elements [lo * stride, hi * stride) (a
    column sum's columns, a BatchNorm sum's channels), and the loops inside and
    outside it add up all the terms of those elements, each in the order of
    the whole loop nest."""
    if not red_outs or not dims:
        return None
    kind, st = red_layout
    if kind == "flat":
        return 0, math.prod(dims[1:])
    if kind == "scalar":
        return None
    level = next(level for level, stride in enumerate(st) if stride)
    n_red = math.prod(red_outs[0].outvars[0].aval.shape)
    return (level, st[level]) if st[level] * dims[level] == n_red else None


# A sum over outer axes whose kept elements are innermost (a column sum) is split
# by columns only when a row of them holds this many bytes: each thread then
# reads its own cache lines of every row; narrower (BatchNorm's 64 channels
# last), the threads' parts of a row share lines and prefetched pairs, so each
# streams the whole input (measured: twice the CPU time, no faster).
SPLIT_ROW_BYTES = 512
# ... and only from this many terms: a column sum is a cheap vectorised add, so
# below it waking the workers costs what splitting saves (measured on 2 threads:
# 128x256 floats 2 -> 3 us, 256x512 even, 512x512 26 -> 20 us).
SPLIT_COLUMN_TERMS = 1 << 18


def _split_level(reds, red_outs, dims, red_layout):
    """The loop level whose range [lo, hi) a call of the kernel's body runs, cut
    into ranges run by different threads, or None when it may not be split: an
    element-wise kernel's outermost level; one with reductions, the level of
    `_kept_split` (each output element's terms are then added by the one call
    owning it, in the order one whole call adds them), not where a reduction
    accumulates across calls."""
    if not dims:
        return None
    if not reds:
        return 0
    split = _kept_split(red_outs, dims, red_layout) if len(red_outs) == len(reds) else None
    if split is None:
        return None
    level, stride = split
    row_bytes = stride * dims[level] * red_outs[0].outvars[0].aval.dtype.itemsize
    if level and red_layout[1][-1] and (row_bytes < SPLIT_ROW_BYTES
                                        or math.prod(dims) < SPLIT_COLUMN_TERMS):
        return None
    return level


def _checks_selector(group):
    """Whether the group's code reports a select_n selector out of range."""
    return any(e.primitive.name == "select_n" and len(e.invars) > 2
               and e.invars[0].aval.dtype.kind != "b" for e in group.eqns)


def _emit_group(ir, module, fname, group):
    domain = tuple(group.shape)
    reads = [r for a, r in zip(group.inputs, group.reads) if type(a) is not Literal]
    ins = [a for a in group.inputs if type(a) is not Literal]
    outs = list(group.outputs)
    n_in, n_out = len(ins), len(outs)
    ptr = ir.PointerType()
    i64 = ir.IntType(64)
    reds, red_outs, dims, layout = _loop_nest(group)
    elementwise = [e for e in group.eqns if e.primitive.name not in _REDUCE_DTYPES]
    # reduced output var -> its reduction equation
    reducing = {e.outvars[0]: e for e in red_outs}

    # a group that only copies elements through index maps (transposes, slices,
    # broadcasts) keeps its loops rolled: see loops.no_unroll
    read_vars = {v for v, _ in reads}
    moves_only = not reds and all(e.outvars[0] in read_vars for e in elementwise)
    # big outputs of one flat loop are streamed: the function below computes a block
    # of them into buffers, streaming.wrap makes the body of it
    streamed = not reds and len(dims) == 1 and not moves_only \
        and all(v.aval.dtype.kind != "c" for v in outs) and streaming.wanted(
            _x86(), sum(math.prod(v.aval.shape) * v.aval.dtype.itemsize for v in outs))

    lanes = None if streamed or moves_only else _one_vector(group, reds, dims, layout)
    # body(ptr noalias in..., ptr noalias out..., i64 lo, i64 hi) -> i1 (selector out of
    # range); [lo, hi) is the range of the outermost loop this call runs
    body_ty = ir.FunctionType(ir.IntType(1), [ptr] * (n_in + n_out) + [i64, i64])
    body = ir.Function(module, body_ty, fname + ("_block" if streamed else "_body"))
    body.linkage = "internal"
    body.attributes.add("noinline" if streamed else "alwaysinline")
    body.attributes.add("nounwind")
    for k, a in enumerate(body.args[:n_in + n_out]):
        a.add_attribute("noalias")
        a.name = f"in{k}" if k < n_in else f"out{k - n_in}"
    lo, hi = body.args[n_in + n_out:]
    lo.name, hi.name = "lo", "hi"
    b = ir.IRBuilder(body.append_basic_block("entry"))
    cx = _Cx(ir, module, b)
    offsets = [0 if m is None else m.offset for _, m in reads]
    red_layout = layout[n_in] if red_outs else None
    layout = layout[:n_in]

    def load(k, index):
        dt = ins[k].aval.dtype
        if dt.kind == "c":
            return complex_emit.load(cx, body.args[k], index, dt)
        mt = cx.mem_ty(dt)
        p = b.gep(body.args[k], [index], inbounds=True, source_etype=mt)
        return cx.from_mem(b.load(p, typ=mt), dt)

    zero = ir.Constant(i64, 0)
    hoisted = {k: load(k, ir.Constant(i64, offsets[k]))
               for k, (kind, _) in enumerate(layout) if kind == "scalar"}
    err_slot = None
    if _checks_selector(group):
        err_slot = b.alloca(ir.IntType(1), name="err")
        b.store(ir.Constant(ir.IntType(1), 0), err_slot)
    stride_keys = {}
    for kind, st in layout + ([red_layout] if red_layout else []):
        if kind == "strided":
            stride_keys.setdefault(tuple(st), len(stride_keys))
    strides = list(stride_keys)
    # per reduced output its pairwise sum; all of them sum over the same levels
    split = _split_level(reds, red_outs, dims, red_layout)
    ranged = split or 0             # the level running [lo, hi)
    kept_split = _kept_split(red_outs, dims, red_layout) if split is not None else None
    plans = [_pairwise_sum(ir, module, body, b, cx, e, e.outvars[0], red_layout, dims,
                           kept_split and (kept_split[0], b.mul(lo, ir.Constant(i64, kept_split[1])),
                                           b.mul(hi, ir.Constant(i64, kept_split[1]))))
             for e in red_outs]
    pairwise = {e.outvars[0]: p[0] for e, p in zip(red_outs, plans) if p is not None}
    assert len({p and p[1:] for p in plans}) <= 1 and len(pairwise) in (0, len(red_outs))
    _, sums_from, last_summed = (plans and plans[0]) or (None, None, None)
    by_rows = any(isinstance(p, summation.PairwiseRows) for p in pairwise.values())
    row_base = []        # by rows: the offset of the outputs' first element in the row

    def init_reduced():
        """Each reduced output starts at its reduction's identity: all of it, or
        when the kernel may be split, the elements that [lo, hi) own."""
        first, stop = zero, None
        if kept_split is not None:
            first = b.mul(lo, ir.Constant(i64, kept_split[1]), flags=("nuw", "nsw"))
            stop = b.mul(hi, ir.Constant(i64, kept_split[1]), flags=("nuw", "nsw"))
        for red_out, red in reducing.items():
            rdt = red_out.aval.dtype
            rmt = cx.mem_ty(rdt)
            rptr = body.args[n_in + outs.index(red_out)]
            ident = _reduce_identity(cx, red.primitive.name, rdt)
            pre = b.block
            loop = body.append_basic_block("init")
            done = body.append_basic_block("init_done")
            b.branch(loop)
            b.position_at_end(loop)
            i = b.phi(i64, name="r")
            i.add_incoming(first, pre)
            b.store(cx.to_mem(ident, rdt), b.gep(rptr, [i], inbounds=True, source_etype=rmt))
            nxt = b.add(i, ir.Constant(i64, 1), flags=("nuw", "nsw"))
            i.add_incoming(nxt, loop)
            end = stop if stop is not None else ir.Constant(i64, math.prod(red_out.aval.shape))
            b.cbranch(b.icmp_unsigned("<", nxt, end), loop, done)
            b.position_at_end(done)

    def emit_body(flat, offs):
        vals = {}
        for k, (v, _) in enumerate(reads):
            kind, st = layout[k]
            if kind == "scalar":
                vals[v] = hoisted[k]
            elif kind == "flat":
                vals[v] = load(k, flat)
            elif offsets[k]:
                vals[v] = load(k, b.add(offs[stride_keys[tuple(st)]],
                                        ir.Constant(i64, offsets[k]), flags=("nsw",)))
            else:
                vals[v] = load(k, offs[stride_keys[tuple(st)]])

        def read(a):
            if type(a) is Literal:
                return cx.const(a.aval.dtype, a.val)
            return vals[a]

        for eqn in elementwise:
            if eqn.outvars[0] in vals:
                continue          # a view copied through its index map: already read
            args = [read(a) for a in eqn.invars]
            dts = [a.aval.dtype for a in eqn.invars]
            out_dt = eqn.outvars[0].aval.dtype
            if out_dt.kind == "c" or any(d.kind == "c" for d in dts):
                vals[eqn.outvars[0]] = complex_emit.emit(cx, eqn, args, dts, out_dt)
            elif _F16 in dts or out_dt == _F16:
                vals[eqn.outvars[0]] = _emit_half(cx, eqn, args, dts, out_dt)
            else:
                vals[eqn.outvars[0]] = EMITTERS[eqn.primitive.name](cx, args, dts, out_dt,
                                                                    eqn.params)
        for j, v in enumerate(outs):
            dt = v.aval.dtype
            mt = cx.mem_ty(dt)
            red = reducing.get(v)
            if red is not None and pairwise and not by_rows:
                pairwise[v].add(read(red.invars[0]))
                continue
            if red is not None:
                p = (pairwise[v].at(b.sub(reduced_index(flat, offs), row_base[0],
                                          flags=("nsw",)))
                     if by_rows else reduced_at(j, flat, offs))
                acc = cx.from_mem(b.load(p, typ=mt), dt)
                b.store(cx.to_mem(_reduce_combine(cx, red.primitive.name, dt, acc,
                                                  read(red.invars[0])), dt), p)
                continue
            if dt.kind == "c":
                complex_emit.store(cx, body.args[n_in + j], flat, vals[v], dt)
                continue
            at = b.sub(flat, lo, flags=("nuw", "nsw")) if streamed else flat  # see streaming.wrap
            p = b.gep(body.args[n_in + j], [at], inbounds=True, source_etype=mt)
            b.store(cx.to_mem(vals[v], dt), p)
        if cx.errors:
            acc = b.load(err_slot, typ=ir.IntType(1))
            for e in cx.errors:
                acc = b.or_(acc, e)
            b.store(acc, err_slot)
            cx.errors.clear()

    def emit_vector(n):
        """The loop over one vector of n lanes ([lo, hi) is [0, n): see
        _one_vector) as the loop vectoriser makes it: vector loads of the
        inputs (a scalar's splat), each operation on vectors (sin and cos: their
        variant of n lanes), vector stores; nothing left for it to do."""
        vty = ir.VectorType(cx.ty(outs[0].aval.dtype), n)      # (one type: see _one_vector)
        lane0 = ir.Constant(ir.IntType(32), 0)
        splat_mask = ir.Constant(ir.VectorType(ir.IntType(32), n), [0] * n)

        def at(ptr_arg, dt):
            return b.gep(ptr_arg, [zero], inbounds=True, source_etype=cx.mem_ty(dt))

        def splat(x):
            one = b.insert_element(ir.Constant(vty, ir.Undefined), x, lane0)
            return b.shuffle_vector(one, ir.Constant(vty, ir.Undefined), splat_mask)

        vals, literals = {}, {}
        for k, (v, _) in enumerate(reads):
            dt = ins[k].aval.dtype
            vals[v] = (splat(hoisted[k]) if layout[k][0] == "scalar" else
                       b.load(at(body.args[k], dt), typ=vty, align=dt.itemsize))

        def read(a):
            if type(a) is Literal:      # each value splat once (shorter IR than its vectors)
                c = cx.const(a.aval.dtype, a.val)
                if str(c) not in literals:
                    literals[str(c)] = splat(c)
                return literals[str(c)]
            return vals[a]

        for eqn in elementwise:
            if eqn.outvars[0] in vals:
                continue
            args = [read(a) for a in eqn.invars]
            dts = [a.aval.dtype for a in eqn.invars]
            name = eqn.primitive.name
            if name in ("sin", "cos"):
                from . import mathlib
                scalar = mathlib.emit(module, name, dts[0])
                vals[eqn.outvars[0]] = b.call(module.globals[f"{scalar.name}_v{n}"], args)
            else:
                vals[eqn.outvars[0]] = EMITTERS[name](cx, args, dts, eqn.outvars[0].aval.dtype,
                                                      eqn.params)
        for j, v in enumerate(outs):
            b.store(vals[v], at(body.args[n_in + j], v.aval.dtype), align=v.aval.dtype.itemsize)

    def reduced_index(flat, offs):
        """Index of the reductions' output element at this point."""
        kind, st = red_layout
        return (zero if kind == "scalar" else flat if kind == "flat"
                else offs[stride_keys[tuple(st)]])

    def reduced_at(j, flat, offs):
        """Pointer to a reduction's output element (output j) at this point."""
        return b.gep(body.args[n_in + j], [reduced_index(flat, offs)], inbounds=True,
                     source_etype=cx.mem_ty(outs[j].aval.dtype))

    def emit_loops(level, flat, offs):
        if level == len(dims):
            emit_body(flat if flat is not None else zero, offs)
            return
        start, stop = (lo, hi) if level == ranged else (zero, ir.Constant(i64, dims[level]))
        emit = emit_level
        if pairwise and not by_rows and level == len(dims) - 1:
            emit = emit_blocks
        if pairwise and level == sums_from:
            # the nest from here sums into one element of each output (by rows:
            # into a row of them) in blocks, pairwise
            ps = {v: reduced_at(outs.index(v), flat, offs) for v in pairwise}
            for sums in pairwise.values():
                sums.start()
            if by_rows:
                row_base[:] = [reduced_index(flat, offs)]
            emit(level, flat, offs, start, stop)
            for v, sums in pairwise.items():
                if by_rows:
                    sums.total_into(ps[v])
                else:
                    b.store(b.fadd(b.load(ps[v], typ=cx.ty(v.aval.dtype)), sums.total()), ps[v])
        else:
            emit(level, flat, offs, start, stop)

    def emit_blocks(level, flat, offs, start, stop):
        """The innermost loop cut into pieces of at most one block, each followed
        by the block's bookkeeping (pushing a full block)."""
        step = ir.Constant(i64, summation.BLOCK)
        if level != ranged and dims[level] <= summation.BLOCK:
            emit_level(level, flat, offs, start, stop)
            for sums in pairwise.values():
                sums.terms_added(ir.Constant(i64, dims[level]))
            return
        pre = b.block
        loop = body.append_basic_block(f"blocks{level}")
        done = body.append_basic_block(f"blocks_done{level}")
        b.branch(loop)
        b.position_at_end(loop)
        first = b.phi(i64, name=f"block{level}")
        first.add_incoming(start, pre)
        room = b.sub(stop, first, flags=("nuw",))
        last = b.add(first, b.select(b.icmp_unsigned("<", room, step), room, step),
                     flags=("nuw", "nsw"))
        emit_level(level, flat, offs, first, last)
        for sums in pairwise.values():
            sums.terms_added(b.sub(last, first, flags=("nuw",)))
        first.add_incoming(last, b.block)
        b.cbranch(b.icmp_unsigned("<", last, stop), loop, done)
        b.position_at_end(done)

    def emit_level(level, flat, offs, start, stop):
        """for i in [start, stop) (at least once) over dims[level], the deeper levels inside."""
        n = dims[level]
        pre = b.block
        loop = body.append_basic_block(f"loop{level}")
        done = body.append_basic_block(f"done{level}")
        b.branch(loop)
        b.position_at_end(loop)
        i = b.phi(i64, name=f"i{level}")
        i.add_incoming(start, pre)
        flat2 = i if flat is None else b.add(b.mul(flat, ir.Constant(i64, n), flags=("nuw", "nsw")),
                                             i, flags=("nuw", "nsw"))
        offs2 = []
        for s, off in zip(strides, offs):
            step = s[level]
            if step == 0:
                offs2.append(off)
            else:
                # strides may be negative (reversed views): no `nuw`
                inc = i if step == 1 else b.mul(i, ir.Constant(i64, step), flags=("nsw",))
                offs2.append(inc if off is zero else b.add(off, inc, flags=("nsw",)))
        emit_loops(level + 1, flat2, offs2)
        if by_rows and level == last_summed:
            for sums in pairwise.values():
                sums.row_done()
        nxt = b.add(i, ir.Constant(i64, 1), flags=("nuw", "nsw"))
        i.add_incoming(nxt, b.block)
        back = b.cbranch(b.icmp_unsigned("<", nxt, stop), loop, done)
        if moves_only:
            no_unroll(ir, module, back)
        elif trig and level == len(dims) - 1:
            width = _trig_width(group, reds, dims)      # (one vector per row: no pair)
            interleave(ir, module, back, 1 if width else 2, width)
        b.position_at_end(done)

    # the vectoriser interleaves a loop calling sin/cos variants once; inlined
    # (mathlib), their long dependency chains gain from two vectors in flight
    trig = any(e.primitive.name in ("sin", "cos") for e in elementwise)
    if math.prod(domain) > 0:
        if dims:     # an empty range runs nothing (the loops below run at least once)
            run = body.append_basic_block("run")
            skip = body.append_basic_block("skip")
            b.cbranch(b.icmp_unsigned("<", lo, hi), run, skip)
            b.position_at_end(run)
            init_reduced()
            if lanes:
                emit_vector(lanes)
            else:
                emit_loops(0, None, [zero] * len(strides))
            b.branch(skip)
            b.position_at_end(skip)
        else:
            init_reduced()
            emit_loops(0, None, [zero] * len(strides))
    if by_rows:
        for sums in pairwise.values():
            sums.release()
    b.ret(b.load(err_slot, typ=ir.IntType(1)) if err_slot is not None
          else ir.Constant(ir.IntType(1), 0))
    if streamed:
        body = streaming.wrap(ir, module, fname + "_body", body, n_in,
                              [v.aval.dtype.itemsize for v in outs])

    # (reports a selector error, extent of the level running [lo, hi), whether it may
    # be split over threads: see _split_level)
    return body, (err_slot is not None, (dims[ranged] if dims else 0), split is not None)


def denormals_off(ir, module, b):
    """Set the x86 MXCSR flags that flush subnormal results and inputs to zero
    (FTZ, DAZ); returns a restore() that puts the caller's flags back. On other
    targets nothing is emitted."""
    if not _x86():
        return lambda: None
    i32 = ir.IntType(32)
    ptr = ir.PointerType()
    store = module.globals.get("llvm.x86.sse.stmxcsr") or ir.Function(
        module, ir.FunctionType(ir.VoidType(), [ptr]), "llvm.x86.sse.stmxcsr")
    load = module.globals.get("llvm.x86.sse.ldmxcsr") or ir.Function(
        module, ir.FunctionType(ir.VoidType(), [ptr]), "llvm.x86.sse.ldmxcsr")
    saved, flushing = b.alloca(i32, name="mxcsr"), b.alloca(i32, name="mxcsr_ftz")
    b.call(store, [saved])
    b.store(b.or_(b.load(saved, typ=i32), ir.Constant(i32, 0x8040)), flushing)
    b.call(load, [flushing])
    return lambda: b.call(load, [saved])


def _trig_width(group, reds, dims):
    """The vector width LLVM's loop vectoriser picks for an element-wise kernel
    calling sin or cos whose innermost loop runs over as many elements of one
    float type as a variant of theirs takes and a host vector holds (it then
    calls that variant once per row), else None. Named in the loop's metadata,
    the vectoriser skips comparing the costs of every width for every call (a
    third of O3 on a chain of 500 sins), and with no pair of vectors asked for
    (a row is one vector) it plans no interleaving (a fifth of what O3 had left);
    the code, and so its bits, is the same."""
    n = dims[-1] if dims else 0
    dtypes = {e.outvars[0].aval.dtype for e in group.eqns}
    if reds or len(dtypes) != 1:
        return None
    dt = dtypes.pop()
    suffix = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}.get(dt)
    if suffix is None or n not in mathlib_runtime.WIDTHS[suffix]:
        return None
    return n if n * dt.itemsize * 8 <= engine.host_vector_bits() else None


_VECTOR_OPS = frozenset({"add", "sub", "mul", "div", "neg", "sin", "cos"})


def _one_vector(group, reds, dims, layout):
    """The lanes of a kernel calling sin or cos whose one loop runs over exactly
    one vector of a variant's width (`_trig_width`), of arithmetic, sin and cos
    on one float type, reading whole arrays or scalars, too little work to be
    split over threads (so its body always runs [0, lanes)); else None. Such a
    kernel is emitted as the vector code the loop vectoriser would make of its
    loop (a quarter of O3 of a chain of 500 sins goes to vectorising it): the
    same code, so the same bits (a test compares the assembly)."""
    if len(dims) != 1 or not any(e.primitive.name in ("sin", "cos") for e in group.eqns) \
            or any(kind not in ("flat", "scalar") for kind, _ in layout) \
            or _work(group) >= SPLIT_WORK:
        return None
    width = _trig_width(group, reds, dims)
    dt = group.eqns[0].outvars[0].aval.dtype
    if width is None or any(e.primitive.name not in _VECTOR_OPS
                            or any(a.aval.dtype != dt for a in e.invars) for e in group.eqns):
        return None
    return width


def _x86():
    from . import engine
    return engine.host_triple().startswith(("x86_64", "i386", "i686"))


def _emit_entry(ir, module, fname, body, n_arrays, reports_error, outer, flush=False):
    """`void fname(i64* args)`: read the array pointers from the argument table
    (object addresses: the data pointer is read from the object), call `body`
    over the whole outer loop, [0, outer) (a kernel's own entry is never split:
    known bounds spare LLVM the vectorised loop's remainder code, a third of a
    small kernel's compile time), and store its error flag when it reports one."""
    ptr, i64 = ir.PointerType(), ir.IntType(64)
    entry = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr]), fname)
    entry.args[0].add_attribute("noalias")
    entry.args[0].name = "args"
    eb = ir.IRBuilder(entry.append_basic_block("entry"))
    ptrs = []
    for k in range(n_arrays):
        slot = eb.gep(entry.args[0], [ir.Constant(i64, k)], inbounds=True, source_etype=i64)
        p = eb.inttoptr(eb.load(slot, typ=i64), ptr)
        if _DATA_OFFSET is not None:   # the slot holds the ndarray object: read its data
            field = eb.gep(p, [ir.Constant(i64, _DATA_OFFSET)], inbounds=True,
                           source_etype=ir.IntType(8))
            p = eb.load(field, typ=ptr)
        ptrs.append(p)
    ptrs += [ir.Constant(i64, 0), ir.Constant(i64, outer)]
    restore = denormals_off(ir, module, eb) if flush else (lambda: None)
    err = eb.call(body, ptrs)
    restore()
    if reports_error:
        slot = eb.gep(entry.args[0], [ir.Constant(i64, n_arrays)], inbounds=True,
                      source_etype=i64)
        eb.store(eb.zext(err, i64), slot)
    eb.ret_void()


def _emit_indexing(ir, module, fname, group):
    """A single gather or scatter as a native loop (see `indexing`)."""
    (eqn,) = group.eqns
    return indexing.emit(ir, module, fname, eqn, _Cx), (False, 0, False)


def _emit_structural(ir, module, fname, group):
    """A single structural equation as a native loop (see `structural`)."""
    (eqn,) = group.eqns
    return structural.emit(ir, module, fname, eqn, _Cx), (False, 0, False)


def _emit_sort(ir, module, fname, group):
    """A single sort as a native merge sort (see `sorting`)."""
    (eqn,) = group.eqns
    return sorting.emit(ir, module, fname, eqn, _Cx), (False, 0, False)


def _emit_lapack(ir, module, fname, group):
    """A single decomposition as LAPACK calls (see `lapack`)."""
    (eqn,) = group.eqns
    return lapack.emit(ir, module, fname, eqn), (False, 0, False)


def _emit_mpi(ir, module, fname, group):
    """A single collective as one MPI call (see `mpi`)."""
    (eqn,) = group.eqns
    return mpi.emit(ir, module, fname, eqn), (False, 0, False)


def _emit_conv(ir, module, fname, group):
    """A single convolution as im2col and BLAS gemm calls (see `convolution`)."""
    (eqn,) = group.eqns
    return convolution.emit(ir, module, fname, eqn), _conv_info(eqn)


def _emit_windows(ir, module, fname, group):
    """A single windowed maximum or its derivative as a native loop (see `windows`)."""
    (eqn,) = group.eqns
    return windows.emit(ir, module, fname, eqn), _windows_info(eqn)


def _windows_info(eqn):
    """A windowed kernel's planes split like a gemm's rows."""
    return (False, windows.split_extent(eqn), blas.SPLIT_ROWS)


def _conv_info(eqn):
    """A convolution's units (group, block of examples) split like a gemm's rows."""
    return (False, convolution.split_extent(eqn), blas.SPLIT_ROWS)


def _dot_spec(group):
    """The GemmSpec of a dot_general group: the dot alone, or the dot and a
    transpose of its result written in place (see writes_transposed)."""
    if len(group.eqns) == 2:
        return blas.transposed_output(group.eqns[0], group.eqns[1].params["permutation"])
    return blas.gemm_spec(group.eqns[0])


def writes_transposed(dot, transpose):
    """Whether the kernel of `dot` can write its result as `transpose` (which reads
    it) gives it, so the group [dot, transpose] has no copy of its own."""
    return transpose.primitive.name == "transpose" and dot.primitive.name == "dot_general" \
        and blas.transposed_output(dot, transpose.params["permutation"]) is not None


def _emit_dot(ir, module, fname, group):
    """A dot_general as BLAS gemm calls (see `blas`)."""
    eqn = group.eqns[0]
    spec = _dot_spec(group)
    outer, kind = blas.split_extent(spec, eqn.outvars[0].aval.dtype)
    # splittable: blas.SPLIT_ROWS or SPLIT_SUM (products for OpenBLAS's threads: 0)
    return blas.emit_dot(ir, module, fname, eqn, spec), (False, outer, kind)


def _sanitize(name):
    name = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return name if name and not name[0].isdigit() else "f_" + name


def _describe(group):
    """'exp+add over (3, 4), from model.py:12 (f)': the group and the user's line."""
    where = next((e.source_info for e in group.eqns if e.source_info is not None), None)
    return ("+".join(e.primitive.name for e in group.eqns) + f" over {tuple(group.shape)}"
            + (f", from {where.short()}" if where is not None else ""))


def group_info(group, loops):
    """What emitting `group` reports (see emit_module), found without emitting it:
    code found in the disk cache is run only when it was emitted with these."""
    op = group.eqns[0].primitive.name
    if id(group) in loops:
        return (True, 0, False)
    if op == "dot_general":
        spec = _dot_spec(group)
        outer, kind = blas.split_extent(spec, group.eqns[0].outvars[0].aval.dtype)
        return (False, outer, kind)
    if op in convolution.NAMES:
        return _conv_info(group.eqns[0])
    if op in windows.NAMES:
        return _windows_info(group.eqns[0])
    if op in indexing.NAMES or op in structural.NAMES or op in sorting.NAMES \
            or op in lapack.NAMES or op in mpi.NAMES:
        return (False, 0, False)
    reds, red_outs, dims, layout = _loop_nest(group)
    split = _split_level(reds, red_outs, dims, layout[-1] if red_outs else None)
    return (_checks_selector(group), (dims[split or 0] if dims else 0), split is not None)


def _emit_bodies(ir, module, base, groups, name, loops, flush):
    """Every group's body function `<base>_k<i>_body`: (bodies, infos)."""
    bodies, infos = [], []
    for i, g in enumerate(groups):
        fname = f"{base}_k{i}"
        op = g.eqns[0].primitive.name
        if id(g) in loops:
            emit = functools.partial(_emit_loop, plan=loops[id(g)], name=name, flush=flush)
        elif op == "dot_general":
            emit = _emit_dot
        elif op in indexing.NAMES:
            emit = _emit_indexing
        elif op in structural.NAMES:
            emit = _emit_structural
        elif op in sorting.NAMES:
            emit = _emit_sort
        elif op in lapack.NAMES:
            emit = _emit_lapack
        elif op in mpi.NAMES:
            emit = _emit_mpi
        elif op in convolution.NAMES:
            emit = _emit_conv
        elif op in windows.NAMES:
            emit = _emit_windows
        elif _transposed_copy(g) is not None:
            emit = _emit_transposed_copy
        else:
            emit = _emit_group
        try:
            body, info = emit(ir, module, fname, g)
        except Exception as e:
            raise FusedCompileError(
                f"jit of {name}: could not emit native code for fused group {i} "
                f"({_describe(g)}): {type(e).__name__}: {e}") from e
        bodies.append(body)
        infos.append(info)
    return bodies, infos


TILE = 16     # a transposed copy's tiles: TILE x TILE elements
TILED = 1 << 14   # from this many elements (64 KiB of float32, L1's size): smaller
                  # copies stay one rolled loop nest (less code; they fit the cache)


def _transposed_copy(group):
    """(rows, cols, ld, offset) when `group` only copies a matrix of TILED or more
    elements read transposed (element (i, j) of its rows x cols output is element
    offset + i + j*ld of its input: a weight copied for a lane product, see
    compiler/dots.py), else None."""
    if len(group.shape) != 2 or len(group.eqns) != 1 or len(group.inputs) != 1 \
            or type(group.inputs[0]) is Literal or len(group.outputs) != 1:
        return None
    (view, m), = group.reads
    dt = np.dtype(view.aval.dtype)
    rows, cols = group.shape
    if view is not group.outputs[0] or m is None or m.strides[0] != 1 or min(rows, cols) < 2 \
            or rows * cols < TILED \
            or dt.kind not in "fiu" or dt.itemsize not in (4, 8) \
            or group_info(group, {})[1] != rows:      # (its split: by rows of the output)
        return None
    return rows, cols, m.strides[1], m.offset


def _emit_transposed_copy(ir, module, fname, group):
    """A transposed copy in TILE x TILE tiles: the generic loop nest walks the
    input a column at a time, rows ld elements apart, which for a 256 x 256
    float32 matrix (rows 1 KiB apart) keeps hitting the same few cache sets; a
    tile reads TILE lines once each. Its rows [lo, hi) of the output, as the
    generic kernel's (same info, same bits: a copy)."""
    from . import loops as nests      # (`loops` names the native loops in this module)
    rows, cols, ld, offset = _transposed_copy(group)
    dt = np.dtype(group.outputs[0].aval.dtype)
    ptr, i64 = ir.PointerType(), ir.IntType(64)
    word = ir.IntType(8 * dt.itemsize)
    body = ir.Function(module, ir.FunctionType(ir.IntType(1), [ptr, ptr, i64, i64]),
                       fname + "_body")
    body.linkage = "internal"
    body.attributes.add("alwaysinline")
    src, dst, lo, hi = body.args
    b = ir.IRBuilder(body.append_basic_block("entry"))

    def const(v):
        return ir.Constant(i64, v)

    def smaller(x, y):
        return b.select(b.icmp_signed("<", x, y), x, y)

    def tile_rows(t):
        i0 = b.add(lo, b.mul(t, const(TILE)))
        i1 = smaller(b.add(i0, const(TILE)), hi)

        def tile(u):
            j0 = b.mul(u, const(TILE))
            j1 = smaller(b.add(j0, const(TILE)), const(cols))

            def row(i):
                def element(j):
                    x = b.load(b.gep(src, [b.add(const(offset), b.add(i, b.mul(j, const(ld))))],
                                     inbounds=True, source_etype=word), typ=word)
                    b.store(x, b.gep(dst, [b.add(b.mul(i, const(cols)), j)], inbounds=True,
                                     source_etype=word))
                nests.upto(ir, b, body, j0, j1, element, "tj")
            nests.upto(ir, b, body, i0, i1, row, "ti")
        # (not unrolled: with few tiles LLVM unrolled them all, and the 140 x 140
        # copy of image_grid 5x5 took 200 ms of O3)
        nests.loop(ir, b, body, 0, -(-cols // TILE), tile, "tu", unroll=False)
    tiles = b.sdiv(b.add(b.sub(hi, lo), const(TILE - 1)), const(TILE))
    nests.upto(ir, b, body, const(0), tiles, tile_rows, "tt")
    b.ret(ir.Constant(ir.IntType(1), 0))
    return body, group_info(group, {})


def _emit_loop(ir, module, fname, group, *, plan, name, flush):
    """A scan, while loop or cond run natively (see `program.emit_scan`,
    `emit_while`, `emit_cond`): each part's kernels and its segment (reading raw
    pointers) go into this module.

    The loop's driver (tables, buffers, counters, signal polls: no arithmetic on
    floats, so no bits to change) is `optnone` and calls each part's segment,
    `noinline`, which O3 compiles once: inlined, every copy of the body in the
    driver (iteration 0, a pair, the odd one out) went through the vectoriser and
    code generation again, two thirds of a small scan's first call."""
    for j, part in enumerate(plan.parts):
        if part.segment is None:
            continue                 # a body that only passes its inputs through
        bodies, infos = _emit_bodies(ir, module, f"{fname}_p{j}", part.groups, name, {}, flush)
        segment = program.part_name(fname, j)
        program.emit_segment(ir, module, segment, part.segment,
                             {id(g): (b, info) for g, b, info in zip(part.groups, bodies, infos)},
                             None, False)
        fn = module.get_global(segment)
        fn.linkage = "internal"
        fn.attributes.add("noinline")
    emit = {"scan": program.emit_scan, "while": program.emit_while,
            "cond": program.emit_cond}[plan.kind]
    driver = emit(ir, module, fname, group.eqns[0], plan)
    driver.attributes.add("noinline")
    driver.attributes.add("optnone")
    return driver, (True, 0, False)


def emit_module(groups, name, segments=(), flush=False, loops=None):
    """(LLVM IR text, entry names, per group (reports a selector error, outer loop
    extent, outer loop splittable over threads), segment entry names).

    Every group gets a body; groups outside `segments` (see `program`) get an
    entry `<base>_k<i>` of their own, each segment an entry `<base>_s<j>`. With
    `flush`, entries run with subnormal numbers flushed to zero (FTZ/DAZ).
    `loops` maps id(group) of a group standing for a scan to its `program.LoopPlan`."""
    try:
        ir = _ir()
    except ImportError as e:
        raise FusedCompileError(
            f"jit of {name}: the native CPU backend needs llvmlite, which could not be "
            f"imported ({e}), to compile the fused group(s) "
            f"[{'; '.join(_describe(g) for g in groups)}]") from e
    module = ir.Module(name=_sanitize(name))
    base = "fgrad_" + _sanitize(name)
    names, segment_names = _entry_names(groups, name, segments)
    bodies, infos = _emit_bodies(ir, module, base, groups, name, loops or {}, flush)
    first = {}        # (a body's shape, outer extent) -> (the first such body, its entry)
    entry_of = {}     # a repeated one -> {text of a body with it: its entry}
    for g, body, info, entry in zip(groups, bodies, infos, names):
        if entry is not None:
            shape = (_body_shape(body), info[1])   # the entry runs the body over [0, outer)
            if shape not in first:
                first[shape] = (body, entry)
            else:
                seen = entry_of.setdefault(shape, {_body_text(first[shape][0]): first[shape][1]})
                same = seen.setdefault(_body_text(body), entry)
                if same != entry:
                    _emit_forward(ir, module, entry, module.get_global(same))
                    continue
            n_arrays = len([a for a in g.inputs if type(a) is not Literal]) + len(g.outputs)
            _emit_entry(ir, module, entry, body, n_arrays, info[0], info[1], flush)
    for seg, entry, plan in zip(segments, segment_names,
                                _parallel_plans(segments, groups, infos)):
        program.emit_segment(ir, module, entry, seg,
                             {id(g): (body, info) for g, body, info in zip(groups, bodies, infos)},
                             _DATA_OFFSET, flush, plan)
    from . import mathlib
    mathlib.call_when_used_often(module)
    if any(math.prod(getattr(g, "shape", ())) >= mathlib.INLINE_TRIG_ELEMENTS for g in groups):
        mathlib.inline_trig_variants(module)
    return str(module), names, infos, segment_names


def _body_shape(body):
    """What two bodies of equal code share, cheap to find (their text, which
    `_body_text` compares, is not: most programs repeat no kernel)."""
    return (str(body.function_type), tuple(len(bb.instructions) for bb in body.blocks))


def _body_text(body):
    """A body function's IR with its own name and metadata numbers left out: equal
    texts, equal code."""
    return _METADATA_REF.sub("!", str(body).replace(f'@"{body.name}"', "@", 1))


_METADATA_REF = re.compile(r"!\d+")


def _emit_forward(ir, module, fname, target):
    """`void fname(ptr args)` calling the entry `target` (never inlined): a kernel
    whose code equals an earlier one's is compiled once, so that programs repeating
    a kernel (say, a hundred 28x28 transposes) cost LLVM one copy of it."""
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ir.PointerType()]), fname)
    fn.args[0].name = "args"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.call(target, [fn.args[0]], attrs=("noinline",))
    b.ret_void()


# ----------------------------------------------------------------------------
# Compiling and calling

# A segment member splits over the worker pool from this much estimated work
# (units of `_cost_per_element`, or multiply-adds of a product): about 10 us on
# one thread.
SPLIT_WORK = 100_000


def parallel_plan(seg, info_of):
    """How the segment `seg` shares work with the worker pool (a program.Parallel),
    or None when it runs on one thread: its members above SPLIT_WORK whose outer
    loop may be split. Not with a product that may not be split (see
    blas.split_extent) and is big enough for OpenBLAS's own threads (they and
    ours would oversubscribe the cores: OpenBLAS's threads spin for a while
    after a call), nor with a decomposition (SciPy's OpenBLAS, whose thread count we
    leave alone, may use its threads even for 32x32 solves; on a busy machine
    our waiting workers made a batch of small inverses 20x slower), nor with a
    native loop."""
    n = _split_threads()
    if n < 2:
        return None
    split, scratch, calls_blas = {}, 0, False
    for g in seg.members:
        if not hasattr(g, "reads"):
            continue                    # an alias
        _, outer, splittable = info_of[id(g)]
        eqn = g.eqns[0]
        if eqn.primitive.name in ("scan", "while", "cond"):
            return None
        if eqn.primitive.name == "dot_general" and eqn.outvars[0].aval.dtype.kind == "f":
            if not splittable and not blas.is_small(blas.gemm_spec(eqn)):
                return None
            calls_blas = True
        if eqn.primitive.name in lapack.NAMES:
            return None            # SciPy's OpenBLAS may run it on threads of its own
        if eqn.primitive.name in mpi.NAMES:
            return None            # a collective runs on the calling thread only
        if eqn.primitive.name in convolution.NAMES:
            calls_blas = True       # its gemms run on each worker's thread
        if splittable and outer >= n and _work(g) >= SPLIT_WORK:
            split[id(g)] = int(splittable)
            if splittable == blas.SPLIT_SUM:
                out = g.outputs[0].aval
                scratch = max(scratch, n * math.prod(out.shape) * out.dtype.itemsize)
    if not split:
        return None
    teams = program.product_teams(seg, split, n)
    for team in teams.values():
        for member in team[1:]:
            del split[id(member)]
    return program.Parallel(split, n, scratch, calls_blas, teams)


def splits_alone(group):
    """Whether a kernel is worth a segment of its own: one whose outer loop the
    worker pool may split (an element-wise kernel, reductions split by kept
    elements, a product's rows, a convolution's examples, pooling's planes), big
    enough for the pool (see parallel_plan). Left out of a segment, it would run
    on the calling thread alone."""
    n = _split_threads()
    if n < 2 or _work(group) < SPLIT_WORK:
        return False
    _, outer, splittable = group_info(group, {})
    if group.eqns[0].primitive.name == "dot_general" and not splittable \
            and not blas.is_small(blas.gemm_spec(group.eqns[0])):
        return False            # OpenBLAS's own threads run it (see parallel_plan)
    return bool(splittable) and outer >= n


def _split_threads():
    return threads.split_threads()


def _work(group):
    """Estimated work of a kernel: multiply-adds of a product, else elements times
    `_cost_per_element`."""
    eqn = group.eqns[0]
    if eqn.primitive.name == "dot_general":
        spec = blas.gemm_spec(eqn)
        return math.prod(spec.batch) * spec.m * spec.n * spec.k
    if eqn.primitive.name in convolution.NAMES:
        return convolution.work(eqn)
    return math.prod(group.shape) * _cost_per_element(group)


def compile_groups(groups, name, inplace=None, segments=(), flush=False, loops=None,
                   fingerprint=None, canonical=None):
    """Callables for the `Fused` groups, all compiled in one LLVM module:
    (one per group, None for a group run by a segment; one per segment).

    A group's callable takes the NumPy values of its non-Literal inputs (in
    order) and returns the list of its outputs (fresh arrays, except where
    `inplace[g]` maps an output to a donated input whose buffer it reuses); a
    segment's takes its imported values and returns its exported ones. Each
    carries `llvm_ir()` (the module's unoptimised IR text, emitted on demand),
    `entry_name` and `module`.

    `fingerprint` (jit.fingerprint of the program and these options) finds
    code compiled by an earlier process without emitting any IR, when the plan
    agrees with that process's at the boundary between Python and native code:
    each entry's table (`canonical(var)` names the arrays in it) and each
    segment's workspace size (inside the IR anything may differ).
    """
    if not groups:
        return [], []
    from . import engine
    inplace = inplace or [{}] * len(groups)
    names, segment_names = _entry_names(groups, name, segments)
    entries = [n for n in names if n] + segment_names
    alias = None
    if fingerprint is not None:
        tables = [(n, [canonical(a) for a in g.inputs if type(a) is not Literal],
                   [canonical(v) for v in g.outputs]) for g, n in zip(groups, names) if n]
        tables += [(n, [canonical(v) for v in seg.imported], [canonical(v) for v in seg.exported],
                    seg.workspace) for seg, n in zip(segments, segment_names)]
        alias = engine.cache_key(f"fgrad program {fingerprint} {tables} threads "
                                 f"{threads.num_threads()} blas {blas.available()} "
                                 f"lapack {lapack.available()} stream {streaming.stream_bytes()}")
    found = engine.load_alias(alias, entries) if alias else None
    if found is not None:
        # the code was compiled for these infos and plans (they set loop bounds and
        # table layouts): what the disk says must be what this plan gives
        infos = [group_info(g, loops or {}) for g in groups]
        plans = _parallel_plans(segments, groups, infos)
        if found[1].get("infos") != [list(i) for i in infos] \
                or found[1].get("plans") != _plan_records(segments, plans):
            found = None          # not this program, or split otherwise now: emit it
    if found is not None:
        module = found[0]
        text = functools.lru_cache(maxsize=None)(
            lambda: _emit_locked(groups, name, segments, flush, loops)[0])
    else:
        emitted, names, infos, segment_names = _emit_locked(groups, name, segments, flush, loops)
        text = lambda: emitted  # noqa: E731
        try:
            module = engine.compile_module(emitted, entries)
        except Exception as e:
            raise FusedCompileError(
                f"jit of {name}: compiling native code for fused groups "
                f"[{'; '.join(_describe(g) for g in groups)}] failed: "
                f"{type(e).__name__}: {e}") from e
        plans = _parallel_plans(segments, groups, infos)
        if alias:
            engine.save_alias(alias, module, {"infos": infos,
                                              "plans": _plan_records(segments, plans)})
    fns = []
    for g, entry_name, (check, _, _), pairs in zip(groups, names, infos, inplace):
        if entry_name is None:
            fns.append(None)
            continue
        fns.append(_annotated(_make_caller(g, module.entry(entry_name), check, entry_name,
                                           pairs), text, entry_name, module))
    segment_fns = []
    for seg, entry_name, plan in zip(segments, segment_names, plans):
        fn = program.make_segment_caller(seg, module.entry(entry_name), entry_name,
                                         _prepared, _segment_inplace(seg, groups, inplace),
                                         _address, plan)
        segment_fns.append(_annotated(fn, text, entry_name, module))
    return fns, segment_fns


def _emit_locked(groups, name, segments, flush, loops):
    """emit_module, after `_prepare_emit`."""
    _prepare_emit()
    return emit_module(groups, name, segments, flush, loops)


def _prepare_emit():
    """What emitting imports (mathlib, llvmlite.ir) and its first ask for LLVM's
    view of the host, done once under the lock fork() takes (see compiler_lock).
    Emitting itself is Python building a new module: it goes on while another
    thread compiles (`mathlib_runtime.prefetch`)."""
    if not _emit_ready:
        with compiler_lock.lock:
            _ir()
            from . import mathlib  # noqa: F401
            engine.host_cpu()
            _emit_ready.append(True)


def prefetch_runtime(jaxpr):
    """Start compiling the sin and cos code and the lane-product kernels `jaxpr`
    will call and the disk cache lacks on background threads
    (`mathlib_runtime.prefetch`, `lane_product.prefetch`), emitting's set-up
    done first: a thread then holds the lock while this thread emits."""
    names = mathlib_runtime.to_compile(jaxpr)
    lanes = convolution.lane_dtypes(jaxpr) | blas.lane_dtypes(jaxpr)
    if names or lanes:
        _prepare_emit()
        mathlib_runtime.prefetch(names)
        lane_product.prefetch(lanes)


_emit_ready = []    # [True] once _emit_locked's imports are done


def _parallel_plans(segments, groups, infos):
    info_of = {id(g): info for g, info in zip(groups, infos)}
    return [parallel_plan(seg, info_of) for seg in segments]


def _plan_records(segments, plans):
    """What each segment's code and table layout take from its parallel plan, as
    JSON (checked when code compiled by another process is reused)."""
    return [None if plan is None else
            [[[k, plan.split[id(m)]] for k, m in enumerate(seg.members) if id(m) in plan.split],
             plan.chunks, plan.scratch, plan.blas,
             [[k for k, m in enumerate(seg.members) if m in team] for team in plan.teams.values()]]
            for seg, plan in zip(segments, plans)]


def _entry_names(groups, name, segments):
    """(per group: its entry `<base>_k<i>`, or None inside a segment; per segment:
    `<base>_s<j>`)."""
    base = "fgrad_" + _sanitize(name)
    in_segment = {id(m) for seg in segments for m in seg.members}
    return ([None if id(g) in in_segment else f"{base}_k{i}" for i, g in enumerate(groups)],
            [f"{base}_s{j}" for j in range(len(segments))])


def _annotated(fn, text, entry_name, module):
    fn.llvm_ir, fn.entry_name, fn.module = text, entry_name, module
    return fn


def _segment_inplace(seg, groups, inplace):
    """{exported index: imported index} from the members' in-place pairs (an output
    the segment keeps in its workspace is never written in place)."""
    pairs = {}
    position = {id(g): i for i, g in enumerate(groups)}
    for g in seg.members:
        if id(g) not in position:
            continue              # an alias step
        ins = [a for a in g.inputs if type(a) is not Literal]
        for j, k in inplace[position[id(g)]].items():
            out = g.outputs[j]
            if out in seg.exported and ins[k] in seg.imported:
                pairs[seg.exported.index(out)] = seg.imported.index(ins[k])
    return pairs


def _prepared(k, x, dt, shape, entry_name="native kernel"):
    """x as a C-contiguous array of the expected dtype and shape (the slow path)."""
    a = np.asarray(x)
    if a.dtype != dt and np.can_cast(a.dtype, dt, casting="equiv"):
        a = a.astype(dt)          # e.g. another byte order
    if a.dtype != dt or a.shape != shape:
        raise TypeError(f"{entry_name}: input {k} is {a.dtype}{list(a.shape)}, "
                        f"expected {dt}{list(shape)}")
    return np.ascontiguousarray(a)


_ndarray = np.ndarray


def _find_data_offset():
    """Offset of the data pointer inside an ndarray object (NumPy's C ABI:
    PyArrayObject_fields.data follows PyObject_HEAD), verified on a few arrays;
    None if it cannot be confirmed (then callers pass data pointers)."""
    import ctypes
    probes = [np.arange(5.0), np.arange(6, dtype=np.int8)[1:], np.zeros((2, 3), np.float32).T,
              np.empty(0), np.array(3, np.uint16)]
    for off in (16, 24, 32):
        try:
            if all(ctypes.c_void_p.from_address(id(a) + off).value == a.ctypes.data
                   for a in probes):
                return off
        except (ValueError, OSError):  # pragma: no cover
            pass
    return None  # pragma: no cover


_DATA_OFFSET = _find_data_offset()
if _DATA_OFFSET is not None:
    _address = id                 # kernels read the data pointer from the object
else:  # pragma: no cover
    def _address(a):
        return a.__array_interface__["data"][0]


def _make_caller(group, entry, check_selector, entry_name, inplace):
    """The Python side of one kernel (`entry`: the engine's compiled entry): check
    inputs, allocate outputs, fill the argument table (object addresses, or data
    pointers when the ndarray layout is unknown), call. `inplace` maps output j
    to input k when output j may be written into input k's (donated) buffer: the
    kernel reads each element of k once, at the index where it writes j, so it
    is used when writeable. The callable's `native` (a dispatch.NativeEntry, or
    None when the kernel writes in place or loops over nothing) lets native code
    call the kernel directly. (Kernels worth splitting over threads run as
    segments: see splits_alone.)"""
    cfunc = entry.cfunc
    ins = [a for a in group.inputs if type(a) is not Literal]
    in_specs = [(a.aval.dtype, tuple(a.aval.shape)) for a in ins]
    out_specs = [(tuple(v.aval.shape), v.aval.dtype) for v in group.outputs]
    ones = {e.outvars[0] for e in group.reductions
            if e.primitive.name in ("reduce_prod", "reduce_and")}
    empty_fills = [1 if v in ones else 0 for v in group.outputs]
    n_in, n_out = len(ins), len(out_specs)
    size = math.prod(group.shape)
    # slots: inputs, outputs, the selector-error flag
    n_slots = n_in + n_out + 1
    err = n_in + n_out
    # argument tables: one per concurrent call (ctypes releases the GIL), reused
    tables = []

    def new_table():
        t = np.zeros(n_slots, np.int64)
        return t, t.ctypes.data

    tables.append(new_table())
    empty = outputs.allocator(out_specs, group.eqns[0].primitive.name in mpi.NAMES)
    full = np.full
    address = _address

    def prepare(k, x):
        dt, shape = in_specs[k]
        return _prepared(k, x, dt, shape, f"native kernel {entry_name}")

    in_dtypes = [dt for dt, _ in in_specs]
    in_shapes = [shape for _, shape in in_specs]
    allocate = outputs.allocate

    def run(*xs):
        if size == 0:     # nothing to loop over: each output is its reduction's identity
            return [full(shape, fill, dt) for (shape, dt), fill in zip(out_specs, empty_fills)]
        table, table_addr = tables.pop() if tables else new_table()
        keep = None
        k = 0
        for x in xs:
            if type(x) is not _ndarray or x.dtype is not in_dtypes[k] \
                    or x.shape != in_shapes[k] or not x.flags.c_contiguous:
                x = prepare(k, x)
                keep = [x] if keep is None else keep + [x]
            table[k] = address(x)
            k += 1
        outs = allocate(out_specs, empty, xs, inplace, in_specs)  # inputs used as is
        for o in outs:
            table[k] = address(o)
            k += 1
        cfunc(table_addr)
        if check_selector and table[err]:
            table[err] = 0
            tables.append((table, table_addr))
            interrupts.raise_pending()
            raise ValueError("invalid entry in choice array")
        tables.append((table, table_addr))
        return outs

    run.__name__ = entry_name
    run.native = None
    if not inplace and size > 0:
        run.native = NativeEntry(entry.address, in_specs, n_out,
                                 err if check_selector else -1, lambda: (new_table()[0], ()))
    return run


# Rough cost of one loop iteration, in units of a simple arithmetic op, for
# deciding whether a kernel is worth splitting over threads.
_EXPENSIVE = frozenset({"exp", "log", "log1p", "expm1", "sin", "cos", "tan", "tanh", "erf",
                        "logistic", "pow", "div", "sqrt", "rsqrt", "atan2", "erf_inv",
                        *scipy_kernels.EMITTERS})


def _cost_per_element(group):
    return 2 + sum(8 if e.primitive.name in _EXPENSIVE else 1 for e in group.eqns)
