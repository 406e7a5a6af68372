"""CUDA C source for fused groups (the GPU backend's kernels).

`emit_program(groups, name)` turns the `Fused` groups of one program into one
CUDA C translation unit (compiled once, by NVRTC) and a `KernelPlan` per group
saying how to launch it. Sizes are baked into the source, so index arithmetic
divides by constants and the compiler turns it into multiplies and shifts.

Element-wise groups are one grid-stride loop over the group's domain: each
thread computes flat indices, reads every input with broadcasting strides (or a
fused view's strides and offset), runs the chain in registers and stores the
group's outputs. Operands that walk the domain contiguously are read at the
flat index, one-element operands are read once before the loop, and the rest
through per-dimension strides over the collapsed domain (see `layout`).

A group ending in reduce_sum / reduce_max / reduce_min (numeric dtypes) runs
its element-wise chain as the reduction's prologue, in one of two shapes:
- a *row reduction* (the innermost domain dimension is reduced): one thread
  block per output element (or per chunk of one, when there are few outputs
  and many reduced elements), threads striding over the reduced elements
  (coalesced), then a warp-shuffle and shared-memory block reduction; with
  chunks, a second kernel (`<name>_finish`) reduces the per-chunk partials;
- a *column reduction* (the innermost dimension is kept): one thread per
  output element looping over the reduced elements, so neighbouring threads
  read neighbouring addresses.
A thread's float sum of many terms is a three-level cascade (`_CASCADE`), so
that its error grows like that of a blocked sum, not like one running sum's.
Element-wise values the group also returns are stored at their flat domain
index as they are computed (every domain element is visited exactly once).

Semantics are those of the NumPy impls in `lax/elementwise.py`, as in the CPU
backend: integer arithmetic wraps (it is done in unsigned types, so there is
no undefined signed overflow), integer division and remainder by 0 give 0,
INT_MIN / -1 wraps and INT_MIN % -1 is 0, shifts by >= the width (or by
negative amounts) give 0 (arithmetic shifts: the sign), float max/min and
their reductions propagate NaN, float -> int conversions give what x86's
cvttss2si/cvttsd2si give (NaN and out-of-range values: the minimum integer of
the 32- or 64-bit conversion), bools are bytes in memory. Float functions are
CUDA's (exp/log/sin/... within 1-4 ulp; division and square roots correctly
rounded); NVRTC runs with `--fmad=false`, so `a*b + c` is rounded twice, as
NumPy and the CPU backend round it (no contraction into an fma).

Excluded (`can_fuse_gpu` says False, so they run as steps of their own):
float16 and other dtypes outside bool/int8..64/uint8..64/float32/float64,
atan2, erf_inv, bitcasts to or from bool, integer_pow of integers to negative
powers, reduce_prod/and/or, and reduce_max/min of zero elements (NumPy raises).
"""
import math
from typing import NamedTuple

import numpy as np

from ..jaxpr import Literal
from ..lax.elementwise import MAX_UNROLLED_POW as _MAX_UNROLLED_POW
from ..compiler import layout

__all__ = ["can_fuse_gpu", "emit_program", "KernelPlan", "BLOCK", "PRELUDE"]

BLOCK = 256            # threads per block (a multiple of the warp size)

# ----------------------------------------------------------------------------
# What has an emitter

_BOOL = np.dtype(bool)
_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
_INTS = tuple(np.dtype(f"{k}int{b}") for k in ("", "u") for b in (8, 16, 32, 64))
_ALL = frozenset((_BOOL,) + _INTS + (_F32, _F64))
_F = frozenset((_F32, _F64))
_NUM = frozenset(_INTS + (_F32, _F64))
_SIGNED = frozenset(d for d in _NUM if d.kind in "if")
_INT = frozenset(_INTS)
_INT_BOOL = frozenset(_INTS + (_BOOL,))

_OPERAND_DTYPES = {
    "add": _NUM, "sub": _NUM, "mul": _NUM, "div": _NUM, "rem": _NUM,
    "max": _NUM, "min": _NUM, "sign": _NUM, "integer_pow": _NUM,
    "neg": _SIGNED, "abs": _SIGNED,
    "pow": _F, "floor": _F, "ceil": _F, "round": _F, "exp": _F, "log": _F,
    "log1p": _F, "expm1": _F, "sin": _F, "cos": _F, "tan": _F, "tanh": _F,
    "sqrt": _F, "rsqrt": _F, "logistic": _F, "erf": _F, "is_finite": _F,
    "eq": _ALL, "ne": _ALL, "lt": _ALL, "le": _ALL, "gt": _ALL, "ge": _ALL,
    "select_n": _ALL, "convert_element_type": _ALL, "bitcast_convert_type": _ALL,
    "stop_gradient": _ALL,
    "and": _INT_BOOL, "or": _INT_BOOL, "xor": _INT_BOOL, "not": _INT_BOOL,
    "shift_left": _INT, "shift_right_logical": _INT, "shift_right_arithmetic": _INT,
    "population_count": _INT,
}
_REDUCE = {"reduce_sum", "reduce_max", "reduce_min"}


def can_fuse_gpu(eqn):
    """Whether this backend emits CUDA C for `eqn` (primitive and dtypes)."""
    name = eqn.primitive.name
    if name in _REDUCE:
        x = eqn.invars[0].aval
        if x.dtype not in _NUM or eqn.outvars[0].aval.dtype != x.dtype:
            return False
        return name == "reduce_sum" or math.prod(x.shape) > 0
    allowed = _OPERAND_DTYPES.get(name)
    if allowed is None or not eqn.primitive.elementwise:
        return False
    if any(a.aval.dtype not in _ALL for a in list(eqn.invars) + list(eqn.outvars)):
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
    return True


# ----------------------------------------------------------------------------
# C types and constants

_CTYPE = {
    _BOOL: "bool", np.dtype(np.int8): "signed char", np.dtype(np.uint8): "unsigned char",
    np.dtype(np.int16): "short", np.dtype(np.uint16): "unsigned short",
    np.dtype(np.int32): "int", np.dtype(np.uint32): "unsigned int",
    np.dtype(np.int64): "long long", np.dtype(np.uint64): "unsigned long long",
    _F32: "float", _F64: "double",
}


def ctype(dt):
    """Register type of a dtype."""
    return _CTYPE[np.dtype(dt)]


def mem_type(dt):
    """Memory type of a dtype (bool is one byte)."""
    return "unsigned char" if dt.kind == "b" else ctype(dt)


def _unsigned(dt):
    """The unsigned C type of dt's width."""
    return ctype(np.dtype(f"uint{dt.itemsize * 8}"))


def _signed(dt):
    return ctype(np.dtype(f"int{dt.itemsize * 8}"))


def _wrap(dt):
    """Unsigned type integer arithmetic on dt is done in (wraps, no promotion to int)."""
    return "unsigned long long" if dt.itemsize == 8 else "unsigned int"


def _f(dt, name):
    """The C math function for dt: sinf for float32, sin for float64."""
    return name + ("f" if dt == _F32 else "")


def const(dt, value):
    """A C expression of type dt for `value`."""
    dt = np.dtype(dt)
    if dt.kind == "b":
        return "true" if bool(value) else "false"
    if dt.kind == "f":
        v = float(np.asarray(value, dt))
        if math.isfinite(v):
            return v.hex() + ("f" if dt == _F32 else "")
        bits = np.asarray(v, dt).view(f"u{dt.itemsize}").item()
        return (f"fg_f32_bits({bits}u)" if dt == _F32 else f"fg_f64_bits({bits}ull)")
    n = dt.itemsize * 8
    v = int(value) & ((1 << n) - 1)
    if dt.kind == "u":
        return f"(({ctype(dt)}){v}ull)"
    if v >= 1 << (n - 1):
        v -= 1 << n
    if v == -(1 << 63):
        return "((long long)(-9223372036854775807ll - 1ll))"
    return f"(({ctype(dt)}){v}ll)"


# Helpers every translation unit starts with. NVRTC needs no headers for these.
PRELUDE = r"""// fgrad GPU kernels: generated CUDA C
__device__ __forceinline__ float fg_f32_bits(unsigned int b) { return __uint_as_float(b); }
__device__ __forceinline__ double fg_f64_bits(unsigned long long b) {
  return __longlong_as_double((long long)b);
}
template <class To, class From> __device__ __forceinline__ To fg_bitcast(From x) {
  To y; memcpy(&y, &x, sizeof(To)); return y;
}
// NaN-propagating max / min (as np.maximum / np.minimum)
__device__ __forceinline__ float fg_max(float a, float b) { return a != a ? a : (b != b ? b : (a > b ? a : b)); }
__device__ __forceinline__ double fg_max(double a, double b) { return a != a ? a : (b != b ? b : (a > b ? a : b)); }
__device__ __forceinline__ float fg_min(float a, float b) { return a != a ? a : (b != b ? b : (a < b ? a : b)); }
__device__ __forceinline__ double fg_min(double a, double b) { return a != a ? a : (b != b ? b : (a < b ? a : b)); }
// x86 truncating conversions: NaN and out-of-range values give the minimum integer
template <class F> __device__ __forceinline__ int fg_cvtt32(F v) {
  return (v >= (F)-2147483648.0 && v < (F)2147483648.0) ? (int)v : (int)0x80000000u;
}
template <class F> __device__ __forceinline__ long long fg_cvtt64(F v) {
  return (v >= (F)-9223372036854775808.0 && v < (F)9223372036854775808.0)
      ? (long long)v : (long long)0x8000000000000000ull;
}
template <class F> __device__ __forceinline__ unsigned long long fg_to_u64(F v) {
  return !(v >= (F)9223372036854775808.0)
      ? (unsigned long long)fg_cvtt64(v)
      : ((unsigned long long)fg_cvtt64(v - (F)9223372036854775808.0) ^ 0x8000000000000000ull);
}
// warp shuffles for every accumulator type (narrow integers travel as int)
template <class T> __device__ __forceinline__ T fg_shfl_down(T v, int d) {
  return (T)__shfl_down_sync(0xffffffffu, (int)v, d);
}
__device__ __forceinline__ unsigned int fg_shfl_down(unsigned int v, int d) { return __shfl_down_sync(0xffffffffu, v, d); }
__device__ __forceinline__ long long fg_shfl_down(long long v, int d) { return __shfl_down_sync(0xffffffffu, v, d); }
__device__ __forceinline__ unsigned long long fg_shfl_down(unsigned long long v, int d) { return __shfl_down_sync(0xffffffffu, v, d); }
__device__ __forceinline__ float fg_shfl_down(float v, int d) { return __shfl_down_sync(0xffffffffu, v, d); }
__device__ __forceinline__ double fg_shfl_down(double v, int d) { return __shfl_down_sync(0xffffffffu, v, d); }
"""


# ----------------------------------------------------------------------------
# Emitters: fn(cx, args, in_dtypes, out_dtype, params) -> C expression

class _Body:
    """Statements of a loop body; `tmp` names a value that is used more than once."""

    def __init__(self, indent):
        self.lines, self.errors, self.indent, self.n = [], [], indent, 0

    def add(self, line):
        self.lines.append(self.indent + line)

    def tmp(self, dt, expr):
        name = f"t{self.n}"
        self.n += 1
        self.add(f"const {ctype(dt)} {name} = {expr};")
        return name


def _arith(op):
    def emit(cx, args, dts, out, params):
        x, y = args
        dt = dts[0]
        if dt.kind == "f":
            return f"({x} {op} {y})"
        w = _wrap(dt)
        return f"({ctype(dt)})(({w}){x} {op} ({w}){y})"
    return emit


def _negate(dt, x):
    return f"({ctype(dt)})(({_wrap(dt)})0 - ({_wrap(dt)}){x})"


def _div(cx, args, dts, out, params):
    x, y = args
    dt = dts[0]
    t = ctype(dt)
    if dt.kind == "f":
        return f"({x} / {y})"
    if dt.kind == "u":
        return f"({y} == 0 ? ({t})0 : ({t})({x} / {y}))"
    # INT_MIN / -1 wraps to INT_MIN (C would overflow)
    return f"({y} == 0 ? ({t})0 : ({y} == ({t})-1 ? {_negate(dt, x)} : ({t})({x} / {y})))"


def _rem(cx, args, dts, out, params):
    x, y = args
    dt = dts[0]
    t = ctype(dt)
    if dt.kind == "f":
        return f"{_f(dt, 'fmod')}({x}, {y})"
    if dt.kind == "u":
        return f"({y} == 0 ? ({t})0 : ({t})({x} % {y}))"
    return f"(({y} == 0 || {y} == ({t})-1) ? ({t})0 : ({t})({x} % {y}))"


def _neg(cx, args, dts, out, params):
    (x,) = args
    return f"(-{x})" if dts[0].kind == "f" else _negate(dts[0], x)


def _abs(cx, args, dts, out, params):
    (x,) = args
    dt = dts[0]
    if dt.kind == "f":
        return f"{_f(dt, 'fabs')}({x})"
    return f"({x} < 0 ? {_negate(dt, x)} : {x})"        # abs(INT_MIN) == INT_MIN


def _sign_of(dt, x):
    t = ctype(dt)
    if dt.kind == "f":     # NaN -> NaN, +-0 -> +0 (as np.sign)
        return (f"({x} > 0 ? ({t})1 : ({x} < 0 ? ({t})-1 : ({x} == 0 ? ({t})0 : {x})))")
    if dt.kind == "u":
        return f"({t})({x} != 0)"
    return f"({t})(({x} > 0) - ({x} < 0))"


def _sign(cx, args, dts, out, params):
    return _sign_of(dts[0], args[0])


def _minmax(fname, op):
    def emit(cx, args, dts, out, params):
        x, y = args
        if dts[0].kind == "f":
            return f"{fname}({x}, {y})"
        return f"({x} {op} {y} ? {x} : {y})"
    return emit


def _integer_pow(cx, args, dts, out, params):
    (x,) = args
    dt = dts[0]
    y = params["y"]
    n = abs(y)
    t = ctype(dt)
    if dt.kind == "f" and n > _MAX_UNROLLED_POW:
        return f"{_f(dt, 'pow')}({x}, {const(dt, float(y))})"

    def mul(p, q):
        if dt.kind == "f":
            return f"({p} * {q})"
        return f"({t})(({_wrap(dt)}){p} * ({_wrap(dt)}){q})"

    # negative powers: the reciprocal first, so x**-n underflows only where the
    # result does (1 / x**n would give 0 once x**n overflows)
    base = cx.tmp(dt, f"({const(dt, 1.0)} / {x})") if y < 0 else x
    acc = None
    while n:
        if n & 1:
            acc = base if acc is None else cx.tmp(dt, mul(acc, base))
        n >>= 1
        if n:
            base = cx.tmp(dt, mul(base, base))
    return const(dt, 1) if acc is None else acc


def _call(fname):
    def emit(cx, args, dts, out, params):
        return f"{_f(dts[0], fname)}({', '.join(args)})"
    return emit


def _round(cx, args, dts, out, params):
    (x,) = args
    dt = dts[0]
    if params["rounding_method"] == "to_nearest_even":
        return f"{_f(dt, 'rint')}({x})"
    # C's round: ties away from zero, exact (floor(|x| + 0.5) rounds the sum up for
    # the float just below 0.5 and for odd integers of magnitude 2**mantissa_bits)
    return f"{_f(dt, 'round')}({x})"


def _rsqrt(cx, args, dts, out, params):
    dt = dts[0]
    return f"({const(dt, 1.0)} / {_f(dt, 'sqrt')}({args[0]}))"


def _logistic(cx, args, dts, out, params):
    # stable for large |x|: never exponentiates a large positive number
    (x,) = args
    dt = dts[0]
    one = const(dt, 1.0)
    e = cx.tmp(dt, f"{_f(dt, 'exp')}(-{_f(dt, 'fabs')}({x}))")
    return f"({x} >= 0 ? {one} / ({one} + {e}) : {e} / ({one} + {e}))"


def _compare(op):
    def emit(cx, args, dts, out, params):
        return f"({args[0]} {op} {args[1]})"     # C's != is true for NaN, as NumPy's
    return emit


def _is_finite(cx, args, dts, out, params):
    return f"isfinite({args[0]})"


def _select_n(cx, args, dts, out, params):
    which, cases = args[0], args[1:]
    wdt = dts[0]
    if len(cases) == 1:
        return cases[0]
    if wdt.kind == "b":
        return f"({which} ? {cases[1]} : {cases[0]})"
    # np.choose raises on an out-of-range selector: flag it (the caller raises)
    u = _unsigned(wdt)
    cx.errors.append(f"({u}){which} >= {len(cases)}u")
    result = cases[-1]
    for k in range(len(cases) - 2, -1, -1):
        result = f"({which} == {const(wdt, k)} ? {cases[k]} : {result})"
    return result


def _convert(cx, args, dts, out, params):
    (x,) = args
    src, dst = dts[0], out
    t = ctype(dst)
    if src == dst:
        return x
    if dst.kind == "b":
        return f"({x} != 0)"                      # NaN -> true
    if src.kind == "f" and dst.kind in "iu":
        bits = dst.itemsize * 8
        if dst.kind == "i" and bits == 64:
            return f"fg_cvtt64({x})"
        if dst.kind == "u" and bits == 64:
            return f"fg_to_u64({x})"
        if dst.kind == "u" and bits == 32:
            return f"(unsigned int)(unsigned long long)fg_cvtt64({x})"
        return f"({t})fg_cvtt32({x})"
    return f"({t})({x})"     # C conversions: rounding to nearest, integer wrap-around


def _bitcast(cx, args, dts, out, params):
    if dts[0] == out:
        return args[0]
    return f"fg_bitcast<{ctype(out)}>({args[0]})"


def _bitop(op, bool_op):
    def emit(cx, args, dts, out, params):
        x, y = args
        if dts[0].kind == "b":
            return f"({x} {bool_op} {y})"
        return f"({ctype(dts[0])})({x} {op} {y})"
    return emit


def _not(cx, args, dts, out, params):
    (x,) = args
    return f"(!{x})" if dts[0].kind == "b" else f"({ctype(dts[0])})(~{x})"


def _shift(kind):
    def emit(cx, args, dts, out, params):
        x, y = args
        dt = dts[0]
        t, u = ctype(dt), _unsigned(dt)
        n = dt.itemsize * 8
        ok = f"(({u}){y} < {n}u)"                   # negative amounts are huge unsigned
        if kind == "shl":
            return f"({ok} ? ({t})(({_wrap(dt)}){x} << ({u}){y}) : ({t})0)"
        if kind == "lshr":
            return f"({ok} ? ({t})(({u}){x} >> ({u}){y}) : ({t})0)"
        s = _signed(dt)
        return f"({t})(({s}){x} >> ({ok} ? (int)({u}){y} : {n - 1}))"
    return emit


def _popcount(cx, args, dts, out, params):
    dt = dts[0]
    fn = "__popcll" if dt.itemsize == 8 else "__popc"
    arg = f"({_unsigned(dt)}){args[0]}"
    return f"({ctype(dt)}){fn}({arg})"


def _identity(cx, args, dts, out, params):
    return args[0]


EMITTERS = {
    "add": _arith("+"), "sub": _arith("-"), "mul": _arith("*"),
    "div": _div, "rem": _rem, "neg": _neg, "abs": _abs, "sign": _sign,
    "max": _minmax("fg_max", ">"), "min": _minmax("fg_min", "<"),
    "pow": _call("pow"), "integer_pow": _integer_pow,
    "floor": _call("floor"), "ceil": _call("ceil"), "round": _round,
    "exp": _call("exp"), "log": _call("log"), "log1p": _call("log1p"),
    "expm1": _call("expm1"), "sin": _call("sin"), "cos": _call("cos"),
    "tan": _call("tan"), "tanh": _call("tanh"), "logistic": _logistic,
    "erf": _call("erf"), "sqrt": _call("sqrt"), "rsqrt": _rsqrt,
    "eq": _compare("=="), "ne": _compare("!="), "lt": _compare("<"),
    "le": _compare("<="), "gt": _compare(">"), "ge": _compare(">="),
    "is_finite": _is_finite, "select_n": _select_n,
    "convert_element_type": _convert, "bitcast_convert_type": _bitcast,
    "and": _bitop("&", "&&"), "or": _bitop("|", "||"), "xor": _bitop("^", "!="),
    "not": _not, "shift_left": _shift("shl"), "shift_right_logical": _shift("lshr"),
    "shift_right_arithmetic": _shift("ashr"),
    "population_count": _popcount, "stop_gradient": _identity,
}
assert set(EMITTERS) == set(_OPERAND_DTYPES)


# ----------------------------------------------------------------------------
# Reductions

def _identity_of(name, dt):
    if name == "reduce_sum":
        return const(dt, 0)     # +0.0, as NumPy's: a sum of -0.0s is +0.0
    if dt.kind == "f":
        return const(dt, -math.inf if name == "reduce_max" else math.inf)
    info = np.iinfo(dt)
    return const(dt, int(info.min if name == "reduce_max" else info.max))


def _combine(name, dt, a, b):
    if name == "reduce_sum":
        return _arith("+")(None, [a, b], [dt], dt, {})
    if dt.kind == "f":
        return f"{'fg_max' if name == 'reduce_max' else 'fg_min'}({a}, {b})"
    op = ">" if name == "reduce_max" else "<"
    return f"({a} {op} {b} ? {a} : {b})"


# ----------------------------------------------------------------------------
# Kernels

class KernelPlan(NamedTuple):
    """How to launch one group's kernel(s).

    strategy: 'elementwise', 'row' (block per output [chunk]) or 'column' (thread
    per output); work: items the main kernel's grid-stride loop covers (domain
    elements, output chunks or outputs); chunks: partials per output of a row
    reduction (> 1: `finish` reduces them); size: domain elements (0: nothing
    to run, outputs are zeros); reports_error: the kernel takes an int flag an
    out-of-range select_n selector sets.
    """
    entry: str
    finish: object
    strategy: str
    work: int
    chunks: int
    size: int
    reports_error: bool
    partial_dtype: object


def _index_type(group, ins, reads):
    """'int' when every index and offset fits in 31 bits, else 'long long'."""
    big = math.prod(group.shape)
    for a, (_, m) in zip(ins, reads):
        big = max(big, math.prod(a.aval.shape))
    return "int" if big < 2 ** 31 - 1 else "long long"


def _coords(body, prefix, index, dims, itype):
    """Statements decomposing `index` over `dims` (C order); the coordinate names."""
    if not dims:
        return []
    if len(dims) == 1:
        return [index]
    names = [f"{prefix}{d}" for d in range(len(dims))]
    body.add(f"{itype} {prefix}t = {index};")
    for d in range(len(dims) - 1, 0, -1):
        body.add(f"const {itype} {names[d]} = {prefix}t % {dims[d]}; {prefix}t /= {dims[d]};")
    body.add(f"const {itype} {names[0]} = {prefix}t;")
    return names


def _offset(coords, strides, base="0"):
    terms = [] if base == "0" else [base]
    for c, s in zip(coords, strides):
        if s == 1:
            terms.append(c)
        elif s:
            terms.append(f"{c} * {s}")
    return " + ".join(terms) if terms else "0"


def _emit_chain(body, eqns, values):
    """The element-wise equations as statements; `values` maps Vars to C names."""
    def read(a):
        if type(a) is Literal:
            return const(a.aval.dtype, a.val)
        return values[a]

    for k, eqn in enumerate(eqns):
        args = [read(a) for a in eqn.invars]
        dts = [a.aval.dtype for a in eqn.invars]
        out = eqn.outvars[0]
        expr = EMITTERS[eqn.primitive.name](body, args, dts, out.aval.dtype, eqn.params)
        name = f"v{len(values)}_{k}"
        body.add(f"const {ctype(out.aval.dtype)} {name} = {expr};  // {eqn.primitive.name}")
        values[out] = name
    return read


def _load(k, dt, index):
    v = f"in{k}[{index}]"
    return f"({v} != 0)" if dt.kind == "b" else v


def _store(j, dt, index, value):
    v = f"(unsigned char){value}" if dt.kind == "b" else value
    return f"out{j}[{index}] = {v};"


def _signature(fname, ins, outs, extra=()):
    params = [f"const {mem_type(a.aval.dtype)}* __restrict__ in{k}" for k, a in enumerate(ins)]
    params += [f"{mem_type(v.aval.dtype)}* __restrict__ out{j}" for j, v in enumerate(outs)]
    params += list(extra)
    return f'extern "C" __global__ void {fname}({", ".join(params) or "void"})'


def _operand_strides(domain, ins, reads):
    """Per input, its strides over the domain: a fused view is read through its
    IndexMap (strides over the view's own shape) from its source buffer."""
    return [layout.domain_strides(domain, a.aval.shape) if m is None
            else layout.domain_strides(domain, v.aval.shape, m.strides)
            for a, (v, m) in zip(ins, reads)]


def _emit_elementwise(fname, group, ins, reads, outs, itype):
    domain = tuple(group.shape)
    n = math.prod(domain)
    operands = _operand_strides(domain, ins, reads)
    offsets = [0 if m is None else m.offset for _, m in reads]
    flat = layout.domain_strides(domain, domain)
    kinds = ["scalar" if not any(st) else "flat" if st == flat and not off else "strided"
             for st, off in zip(operands, offsets)]
    dims, strided = layout.collapse(list(domain), [st for st, k in zip(operands, kinds)
                                                   if k == "strided"])
    strided = iter(strided)
    strides = [next(strided) if k == "strided" else None for k in kinds]

    pre, body = _Body("  "), _Body("    ")
    values = {}
    for k, (a, (v, _)) in enumerate(zip(ins, reads)):
        if kinds[k] == "scalar":
            name = f"a{k}"
            pre.add(f"const {ctype(a.aval.dtype)} {name} = {_load(k, a.aval.dtype, offsets[k])};")
            values[v] = name
    coords = _coords(body, "c", "i", dims, itype) if "strided" in kinds else []
    for k, (a, (v, _)) in enumerate(zip(ins, reads)):
        if kinds[k] == "scalar":
            continue
        index = "i" if kinds[k] == "flat" else _offset(coords, strides[k], str(offsets[k] or 0))
        name = f"a{k}"
        body.add(f"const {ctype(a.aval.dtype)} {name} = {_load(k, a.aval.dtype, index)};")
        values[v] = name
    _emit_chain(body, group.eqns, values)
    for j, v in enumerate(outs):
        body.add(_store(j, v.aval.dtype, "i", values[v]))
    errors = body.errors
    if errors:
        body.add(f"if ({' || '.join(errors)}) *err = 1;")
    extra = ["int* __restrict__ err"] if errors else []
    src = [_signature(fname, ins, outs, extra) + " {"] + pre.lines + [
        f"  for ({itype} i = ({itype})blockIdx.x * blockDim.x + threadIdx.x; i < {n}; "
        f"i += ({itype})gridDim.x * blockDim.x) {{"] + body.lines + ["  }", "}"]
    return "\n".join(src), KernelPlan(fname, None, "elementwise", n, 1, n, bool(errors), None)


def _block_reduce(body, name, dt, acc, dst):
    """Statements: the block's `acc` values combined, thread 0 storing into `dst`."""
    ident = _identity_of(name, dt)
    t = ctype(dt)
    body.add(f"for (int s = 16; s > 0; s >>= 1) {{ const {t} other = fg_shfl_down({acc}, s); "
             f"{acc} = {_combine(name, dt, acc, 'other')}; }}")
    body.add(f"if ((threadIdx.x & 31) == 0) fg_smem[threadIdx.x >> 5] = {acc};")
    body.add("__syncthreads();")
    body.add("if (threadIdx.x < 32) {")
    body.add(f"  {acc} = threadIdx.x < (blockDim.x >> 5) ? fg_smem[threadIdx.x] : {ident};")
    body.add(f"  for (int s = 16; s > 0; s >>= 1) {{ const {t} other = fg_shfl_down({acc}, s); "
             f"{acc} = {_combine(name, dt, acc, 'other')}; }}")
    body.add(f"  if (threadIdx.x == 0) {dst} = {acc};")
    body.add("}")
    body.add("__syncthreads();")


# A thread's float sum goes through three levels: blocks of _CASCADE terms, sums
# of _CASCADE blocks, and their running total (a cascade: one running sum of n
# terms stops growing at 2^24 times its terms in float32, and its error bound
# is n ulps; the cascade's is about 2 * _CASCADE + n / _CASCADE^2 ulps).
_CASCADE = 64


def _cascade_add(loop, dt, value):
    """Statements adding `value` to a thread's cascaded sum (s0, s1, acc)."""
    ident = _identity_of("reduce_sum", dt)
    loop.add(f"s0 = {_combine('reduce_sum', dt, 's0', value)};")
    loop.add(f"if (++n0 == {_CASCADE}) {{ s1 = {_combine('reduce_sum', dt, 's1', 's0')}; "
             f"s0 = {ident}; n0 = 0;")
    loop.add(f"  if (++n1 == {_CASCADE}) {{ acc = {_combine('reduce_sum', dt, 'acc', 's1')}; "
             f"s1 = {ident}; n1 = 0; }} }}")


def _cascade_end(cascade, dt):
    """After the loop: the cascade's levels added into acc, smallest first."""
    if not cascade:
        return []
    inner = _combine("reduce_sum", dt, "s0", "s1")
    return [f"    acc = {_combine('reduce_sum', dt, 'acc', inner)};"]


def _choose_chunks(n_out, n_red):
    """Partials per output for a row reduction: enough blocks to fill a big GPU
    (about 1024 in all), each reducing at least 4096 elements."""
    if n_out >= 1024 or n_out == 0 or n_red == 0:
        return 1
    return max(1, min(-(-1024 // n_out), n_red // 4096, 1024))


def _emit_reduction(fname, group, ins, reads, outs, itype):
    domain = tuple(group.shape)
    red = group.eqns[-1]
    name, rdt = red.primitive.name, red.outvars[0].aval.dtype
    axes = set(red.params["axes"])
    kept = [d for d in range(len(domain)) if d not in axes]
    reduced = [d for d in range(len(domain)) if d in axes]
    n_out = math.prod(domain[d] for d in kept)
    n_red = math.prod(domain[d] for d in reduced)
    red_out = red.outvars[0]
    ew_outs = [(j, v) for j, v in enumerate(outs) if v is not red_out]
    rj = outs.index(red_out)

    operands = _operand_strides(domain, ins, reads)
    offsets = [0 if m is None else m.offset for _, m in reads]
    if ew_outs:        # the flat domain index, where element-wise outputs are stored
        operands.append(layout.domain_strides(domain, domain))
        offsets.append(0)
    scalar = [not any(st) for st in operands]
    kdims, kstr = layout.collapse([domain[d] for d in kept], [[st[d] for d in kept]
                                                              for st in operands])
    rdims, rstr = layout.collapse([domain[d] for d in reduced], [[st[d] for d in reduced]
                                                                 for st in operands])
    inner = max((d for d in range(len(domain)) if domain[d] != 1), default=None)
    strategy = "row" if inner is None or inner in axes else "column"
    chunks = _choose_chunks(n_out, n_red) if strategy == "row" else 1
    clen = -(-n_red // chunks)

    pre, body = _Body("  "), _Body("    ")
    values = {}
    t = ctype(rdt)
    for k, (a, (v, _)) in enumerate(zip(ins, reads)):
        if scalar[k]:
            values[v] = f"a{k}"
            pre.add(f"const {ctype(a.aval.dtype)} a{k} = {_load(k, a.aval.dtype, offsets[k])};")
    loop = _Body("      ")
    ocoords = _coords(body, "o", "o", kdims, itype)
    bases = {}
    for k in range(len(operands)):
        if not scalar[k]:
            bases[k] = f"b{k}"
            body.add(f"const {itype} b{k} = {_offset(ocoords, kstr[k], str(offsets[k] or 0))};")
    rcoords = _coords(loop, "r", "r", rdims, itype)
    for k, (a, (v, _)) in enumerate(zip(ins, reads)):
        if scalar[k]:
            continue
        values[v] = f"a{k}"
        loop.add(f"const {ctype(a.aval.dtype)} a{k} = "
                 f"{_load(k, a.aval.dtype, _offset(rcoords, rstr[k], bases[k]))};")
    read = _emit_chain(loop, group.eqns[:-1], values)
    if ew_outs:
        flat = len(operands) - 1
        fi = _offset(rcoords, rstr[flat], bases[flat]) if not scalar[flat] else "0"
        loop.add(f"const {itype} fi = {fi};")
        for j, v in ew_outs:
            loop.add(_store(j, v.aval.dtype, "fi", values[v]))
    per_output = n_red if strategy == "column" else clen
    cascade = name == "reduce_sum" and rdt.kind == "f" and per_output > _CASCADE
    if cascade:
        _cascade_add(loop, rdt, read(red.invars[0]))
    else:
        loop.add(f"acc = {_combine(name, rdt, 'acc', read(red.invars[0]))};")
    if loop.errors:
        loop.add(f"if ({' || '.join(loop.errors)}) *err = 1;")
    extra = []
    partial = None
    if chunks > 1:
        partial = rdt
        extra.append(f"{t}* __restrict__ partial")
    if loop.errors:
        extra.append("int* __restrict__ err")
    ident = _identity_of(name, rdt)

    if strategy == "column":
        head = [f"  for ({itype} o = ({itype})blockIdx.x * blockDim.x + threadIdx.x; "
                f"o < {n_out}; o += ({itype})gridDim.x * blockDim.x) {{"]
        body.add(f"{t} acc = {ident};")
        if cascade:
            body.add(f"{t} s0 = {ident}, s1 = {ident}; int n0 = 0, n1 = 0;")
        body.add(f"for ({itype} r = 0; r < {n_red}; ++r) {{")
        tail = ["    }"] + _cascade_end(cascade, rdt) + ["    " + _store(rj, rdt, "o", "acc"),
                                                        "  }", "}"]
        work = n_out
    else:
        pre.add(f"__shared__ {t} fg_smem[32];")
        if chunks > 1:
            head = [f"  for ({itype} blk = blockIdx.x; blk < {n_out * chunks}; "
                    f"blk += gridDim.x) {{",
                    f"    const {itype} o = blk / {chunks};",
                    f"    const {itype} chunk = blk % {chunks};"]
            start, end = f"chunk * {clen}", f"min(chunk * {clen} + {clen}, ({itype}){n_red})"
            dst = "partial[blk]"
        else:
            head = [f"  for ({itype} o = blockIdx.x; o < {n_out}; o += gridDim.x) {{"]
            start, end, dst = "0", str(n_red), f"out{rj}[o]"
        body.add(f"{t} acc = {ident};")
        if cascade:
            body.add(f"{t} s0 = {ident}, s1 = {ident}; int n0 = 0, n1 = 0;")
        body.add(f"for ({itype} r = {start} + threadIdx.x; r < {end}; r += blockDim.x) {{")
        fin = _Body("    ")
        _block_reduce(fin, name, rdt, "acc", dst)
        tail = ["    }"] + _cascade_end(cascade, rdt) + fin.lines + ["  }", "}"]
        work = n_out * chunks
    src = ([_signature(fname, ins, outs, extra) + " {"] + pre.lines + head + body.lines
           + loop.lines + tail)
    finish = None
    if chunks > 1:
        finish = fname + "_finish"
        fb = _Body("    ")
        _block_reduce(fb, name, rdt, "acc", "out[o]")
        src += [f'extern "C" __global__ void {finish}(const {t}* __restrict__ partial, '
                f"{t}* __restrict__ out) {{",
                f"  __shared__ {t} fg_smem[32];",
                f"  for ({itype} o = blockIdx.x; o < {n_out}; o += gridDim.x) {{",
                f"    {t} acc = {ident};",
                f"    for (int c = threadIdx.x; c < {chunks}; c += blockDim.x) "
                f"acc = {_combine(name, rdt, 'acc', f'partial[o * {chunks} + c]')};"]
        src += fb.lines + ["  }", "}"]
    plan = KernelPlan(fname, finish, strategy, work, chunks, math.prod(domain),
                      bool(loop.errors), partial)
    return "\n".join(src), plan


def describe(group):
    return "+".join(e.primitive.name for e in group.eqns) + f" over {tuple(group.shape)}"


def emit_group(fname, group):
    """(CUDA C of one group's kernel(s), its KernelPlan)."""
    ins = [a for a in group.inputs if type(a) is not Literal]
    reads = [r for a, r in zip(group.inputs, group.reads) if type(a) is not Literal]
    outs = list(group.outputs)
    itype = _index_type(group, ins, reads)
    red = group.eqns[-1]
    if red.primitive.name in _REDUCE and red.outvars[0] in outs:
        return _emit_reduction(fname, group, ins, reads, outs, itype)
    if red.primitive.name in _REDUCE:     # its result is unused: only the chain runs
        group = type(group)(group.eqns[:-1], group.inputs, outs, tuple(red.invars[0].aval.shape),
                            group.reads)
    return _emit_elementwise(fname, group, ins, reads, outs, itype)


def _sanitize(name):
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return out if out and not out[0].isdigit() else "f_" + out


def emit_program(groups, name):
    """(CUDA C source of every group's kernel(s), one KernelPlan per group)."""
    base = "fgrad_" + _sanitize(name)
    parts, plans = [PRELUDE], []
    for i, g in enumerate(groups):
        src, plan = emit_group(f"{base}_k{i}", g)
        parts.append(f"// group {i}: {describe(g)}\n{src}")
        plans.append(plan)
    return "\n\n".join(parts) + "\n", plans
