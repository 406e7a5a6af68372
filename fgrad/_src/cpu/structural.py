"""Structural primitives as native kernels of their own (not fused): pad,
concatenate, dynamic_slice, dynamic_update_slice, the cumulative reductions
(cumsum, cumprod, cummax, cummin) and argmax / argmin. (iota needs no kernel:
it has no operands, so tracing evaluates it and programs hold its value.)

Semantics are those of the NumPy impls in `lax/slicing.py`,
`lax/cumulative.py` and `lax/reductions.py`, bit for bit (moves copy bytes;
arithmetic runs in the order NumPy runs it):

- pad fills the output with the padding value, then places the operand's
  elements at low + i * (interior + 1) in every dimension (the primitive's
  padding amounts are never negative);
- dynamic_slice / dynamic_update_slice clamp every start index into
  [0, size - window] (signed or unsigned, as `np.clip` on the index's dtype);
- cumsum / cumprod accumulate sequentially, as `ufunc.accumulate` does (float
  sums are not reassociated, integers wrap); cummax / cummin take the
  maximum / minimum at every step, NaN-propagating and with -0.0 < 0.0 (IEEE
  754-2019, as the fused max / min; the NumPy impls settle ties of zeros so);
  `reverse` accumulates from the end;
- argmax / argmin give the first index of the extremum; the first NaN wins
  (as in NumPy); the index is converted to `index_dtype` with wrap-around
  like `astype`. An empty reduced axis is left to NumPy (it raises).

float16 arithmetic is done in float and rounded to half after each step,
which is what NumPy's float16 loops do.

Each kernel has the body signature of a fused group,

    i1 fname_body(ptr inputs..., ptr outputs..., i64 lo, i64 hi)

with a pointer per non-Literal operand; a Literal operand (a folded scalar:
pad's padding value, a constant start index) is an IR constant. The range is
ignored: these kernels are never split over threads.
"""
import math

import numpy as np

from ..compiler.layout import c_strides
from ..jaxpr import Literal
from . import loops

_SUPPORTED = frozenset(np.dtype(d) for d in (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64"))
_CUMULATIVE = frozenset({"cumsum", "cumprod", "cummax", "cummin"})
_ARG = frozenset({"argmax", "argmin"})
NAMES = frozenset({"pad", "concatenate", "dynamic_slice", "dynamic_update_slice"}) \
    | _CUMULATIVE | _ARG


def can_lower(eqn):
    """Whether `eqn` is a primitive this module emits, on supported dtypes, with
    scalar Literals only (and, for argmax/argmin, a non-empty reduced axis)."""
    name = eqn.primitive.name
    if name not in NAMES:
        return False
    atoms = list(eqn.invars) + list(eqn.outvars)
    if any(np.dtype(a.aval.dtype) not in _SUPPORTED for a in atoms):
        return False
    if any(type(a) is Literal and np.ndim(a.val) != 0 for a in eqn.invars):
        return False
    if name == "concatenate" and any(type(a) is Literal for a in eqn.invars):
        return False
    if name in _CUMULATIVE:
        return eqn.outvars[0].aval.dtype.kind in "fiu"
    if name in _ARG:
        return eqn.invars[0].aval.shape[eqn.params["axes"][0]] > 0
    return True


class _Kernel:
    """The body function of one equation and helpers to fill it."""

    def __init__(self, ir, module, fname, eqn, cx_of):
        self.ir, self.eqn = ir, eqn
        self.unroll = eqn.primitive.name not in _EMIT     # moves stay rolled (loops.no_unroll)
        self.i64 = ir.IntType(64)
        ptr = ir.PointerType()
        ins = [a for a in eqn.invars if type(a) is not Literal]
        n = len(ins) + len(eqn.outvars)
        fn = ir.Function(module, ir.FunctionType(ir.IntType(1), [ptr] * n + [self.i64] * 2),
                         fname + "_body")
        fn.linkage = "internal"
        fn.attributes.add("alwaysinline")
        fn.attributes.add("nounwind")
        for a in fn.args[:n]:      # inputs are only read; outputs are fresh buffers
            a.add_attribute("noalias")
        self.fn = fn
        self.b = ir.IRBuilder(fn.append_basic_block("entry"))
        self.cx = cx_of(ir, module, self.b)
        args = iter(fn.args)
        # per operand: its pointer, or None for a Literal
        self.ins = [None if type(a) is Literal else next(args) for a in eqn.invars]
        self.outs = [next(args) for _ in eqn.outvars]

    def k(self, v):
        return self.ir.Constant(self.i64, int(v))

    # addressing
    def bits_ty(self, dt):
        """An integer type as wide as one element (for moving bytes)."""
        return self.ir.IntType(8 * np.dtype(dt).itemsize)

    def load(self, p, index, ty):
        return self.b.load(self.b.gep(p, [index], inbounds=True, source_etype=ty), typ=ty)

    def store(self, v, p, index):
        self.b.store(v, self.b.gep(p, [index], inbounds=True, source_etype=v.type))

    def raw(self, k, index):
        """Element `index` of operand k as raw bits (a Literal is its constant)."""
        a = self.eqn.invars[k]
        ty = self.bits_ty(a.aval.dtype)
        if self.ins[k] is None:
            dt = np.dtype(a.aval.dtype)
            bits = int(np.asarray(a.val, dt).reshape(1).view(f"u{dt.itemsize}")[0])
            return self.ir.Constant(ty, bits - (1 << ty.width) * (bits >> (ty.width - 1)))
        return self.load(self.ins[k], index, ty)

    def value(self, k, index):
        """Element `index` of operand k as a register value."""
        a = self.eqn.invars[k]
        dt = np.dtype(a.aval.dtype)
        if self.ins[k] is None:
            return self.cx.const(dt, np.asarray(a.val, dt))
        return self.cx.from_mem(self.load(self.ins[k], index, self.cx.mem_ty(dt)), dt)

    def linear(self, indices, strides, base=0):
        return loops.linear(self.ir, self.b, indices, strides, base)

    # loops over static extents
    def loop(self, start, stop, body, name="i"):
        loops.loop(self.ir, self.b, self.fn, start, stop, body, name, self.unroll)

    def loops(self, extents, body, name="d"):
        loops.nest(self.ir, self.b, self.fn, extents, body, name, self.unroll)

    def finish(self):
        self.b.ret(self.ir.Constant(self.ir.IntType(1), 0))
        return self.fn


def emit(ir, module, fname, eqn, cx_of):
    """Emit `fname_body` for `eqn` (see `can_lower`); returns the function.
    `cx_of(ir, module, builder)` gives the fused backend's type helpers."""
    kernel = _Kernel(ir, module, fname, eqn, cx_of)
    name = eqn.primitive.name
    if name in _CUMULATIVE:
        _cumulative(kernel)
    elif name in _ARG:
        _arg_extremum(kernel)
    else:
        _EMIT[name](kernel)
    return kernel.finish()


# ----------------------------------------------------------------------------
# Moves

def _pad(kn):
    eqn = kn.eqn
    x = eqn.invars[0].aval
    out_shape = eqn.outvars[0].aval.shape
    out = kn.outs[0]
    fill = kn.raw(1, kn.k(0))
    kn.loop(0, math.prod(out_shape), lambda i: kn.store(fill, out, i), "fill")
    ostrides = c_strides(out_shape)
    config = eqn.params["padding_config"]
    base = sum(lo * s for (lo, _, _), s in zip(config, ostrides))
    steps = [(interior + 1) * s for (_, _, interior), s in zip(config, ostrides)]

    def place(idx):
        kn.store(kn.raw(0, kn.linear(idx, c_strides(x.shape))), out,
                 kn.linear(idx, steps, base))
    kn.loops(list(x.shape), place)


def _concatenate(kn):
    eqn = kn.eqn
    d = eqn.params["dimension"]
    out_shape = eqn.outvars[0].aval.shape
    outer, tail = math.prod(out_shape[:d]), math.prod(out_shape[d + 1:])
    row = out_shape[d] * tail
    offset = 0
    for k, a in enumerate(eqn.invars):
        n = a.aval.shape[d] * tail

        def copy(idx, n=n, offset=offset, k=k):
            o, j = idx
            src = kn.b.add(kn.b.mul(o, kn.k(n), flags=("nsw",)), j, flags=("nsw",))
            dst = kn.b.add(kn.b.mul(o, kn.k(row), flags=("nsw",)), kn.b.add(j, kn.k(offset)),
                           flags=("nsw",))
            kn.store(kn.raw(k, src), kn.outs[0], dst)
        kn.loops([outer, n], copy, f"cat{k}_")
        offset += n


def _clamped_starts(kn, first, shape, window):
    """The start indices (operands first, first + 1, ...) as i64, clamped so that
    the window fits: into [0, size - window] per dimension."""
    b, i64 = kn.b, kn.i64
    starts = []
    for d, (n, w) in enumerate(zip(shape, window)):
        a = kn.eqn.invars[first + d]
        dt = np.dtype(a.aval.dtype)
        top = n - w
        if kn.ins[first + d] is None:      # a constant start: clamp now
            starts.append(kn.k(min(max(int(a.val), 0), top)))
            continue
        v = kn.value(first + d, kn.k(0))
        if dt.kind == "u":
            v = b.zext(v, i64) if v.type.width < 64 else v
            starts.append(b.select(b.icmp_unsigned(">", v, kn.k(top)), kn.k(top), v))
        else:
            v = b.sext(v, i64) if v.type.width < 64 else v
            v = b.select(b.icmp_signed("<", v, kn.k(0)), kn.k(0), v)
            starts.append(b.select(b.icmp_signed(">", v, kn.k(top)), kn.k(top), v))
    return starts


def _dynamic_slice(kn):
    eqn = kn.eqn
    shape = eqn.invars[0].aval.shape
    sizes = eqn.params["slice_sizes"]
    starts = _clamped_starts(kn, 1, shape, sizes)
    strides = c_strides(shape)

    def copy(idx):
        src = kn.linear([kn.b.add(s, i, flags=("nsw",)) for s, i in zip(starts, idx)], strides)
        kn.store(kn.raw(0, src), kn.outs[0], kn.linear(idx, c_strides(sizes)))
    kn.loops(list(sizes), copy)


def _dynamic_update_slice(kn):
    eqn = kn.eqn
    shape = eqn.invars[0].aval.shape
    window = eqn.invars[1].aval.shape
    out = kn.outs[0]
    kn.loop(0, math.prod(shape), lambda i: kn.store(kn.raw(0, i), out, i), "copy")
    starts = _clamped_starts(kn, 2, shape, window)
    strides = c_strides(shape)

    def place(idx):
        dst = kn.linear([kn.b.add(s, i, flags=("nsw",)) for s, i in zip(starts, idx)], strides)
        kn.store(kn.raw(1, kn.linear(idx, c_strides(window))), out, dst)
    kn.loops(list(window), place)


_EMIT = {"pad": _pad, "concatenate": _concatenate, "dynamic_slice": _dynamic_slice,
         "dynamic_update_slice": _dynamic_update_slice}


# ----------------------------------------------------------------------------
# Scans and arg-reductions

def _beats(cx, name, dt, new, old):
    """i1: `new` replaces `old` as the running extremum of cummax ("max") /
    cummin ("min") / argmax / argmin."""
    b = cx.b
    op = ">" if name in ("cummax", "argmax") else "<"
    if dt.kind == "f":
        strictly = b.fcmp_ordered(op, new, old)
        return b.or_(strictly, b.and_(b.fcmp_unordered("uno", new, new),
                                      b.fcmp_ordered("ord", old, old)))
    cmp = b.icmp_signed if dt.kind == "i" else b.icmp_unsigned
    return cmp(op, new, old)


def _combine(cx, name, dt, acc, x):
    """The accumulate step of cumsum/cumprod/cummax/cummin (NumPy's ufunc)."""
    b = cx.b
    if name == "cumsum":
        return b.fadd(acc, x) if dt.kind == "f" else b.add(acc, x)
    if name == "cumprod":
        return b.fmul(acc, x) if dt.kind == "f" else b.mul(acc, x)
    if dt.kind == "f":   # NaN-propagating, -0 < +0 (IEEE 754-2019), as the fused max/min
        return cx.call_intr("maximum" if name == "cummax" else "minimum", dt, acc, x)
    op = ">" if name == "cummax" else "<"
    keep = (b.icmp_signed if dt.kind == "i" else b.icmp_unsigned)(op, acc, x)
    return b.select(keep, acc, x)


def _cumulative(kn):
    b, eqn, cx = kn.b, kn.eqn, kn.cx
    name = eqn.primitive.name
    shape = eqn.invars[0].aval.shape
    dt = np.dtype(eqn.invars[0].aval.dtype)
    axis, reverse = eqn.params["axis"], eqn.params["reverse"]
    outer, n, inner = math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])
    out, mt = kn.outs[0], cx.mem_ty(dt)

    def at(o, k, j):
        return b.add(b.mul(b.add(b.mul(o, kn.k(n), flags=("nsw",)), k, flags=("nsw",)),
                           kn.k(inner), flags=("nsw",)), j, flags=("nsw",))

    def row(o):
        first = kn.k(n - 1 if reverse else 0)
        kn.loop(0, inner, lambda j: kn.store(kn.raw(0, at(o, first, j)), out, at(o, first, j)),
                "first")

        def step(s):
            k = b.sub(kn.k(n - 1), s) if reverse else s
            prev = b.add(k, kn.k(1)) if reverse else b.sub(k, kn.k(1))

            def element(j):
                acc = cx.from_mem(kn.load(out, at(o, prev, j), mt), dt)
                x = kn.value(0, at(o, k, j))
                kn.store(cx.to_mem(_combine(cx, name, dt, acc, x), dt), out, at(o, k, j))
            kn.loop(0, inner, element, "inner")
        kn.loop(1, n, step, "step")
    kn.loop(0, outer, row, "outer")


def _arg_extremum(kn):
    b, eqn, cx = kn.b, kn.eqn, kn.cx
    name = eqn.primitive.name
    shape = eqn.invars[0].aval.shape
    dt = np.dtype(eqn.invars[0].aval.dtype)
    (axis,) = eqn.params["axes"]
    outer, n, inner = math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])
    out_ty = cx.ty(np.dtype(eqn.outvars[0].aval.dtype))
    # running (value, index): allocas in the entry block, promoted to registers
    best_slot = b.alloca(cx.ty(dt), name="best")
    index_slot = b.alloca(kn.i64, name="best_index")

    def at(o, k, j):
        return b.add(b.mul(b.add(b.mul(o, kn.k(n), flags=("nsw",)), k, flags=("nsw",)),
                           kn.k(inner), flags=("nsw",)), j, flags=("nsw",))

    def position(idx):
        o, j = idx
        b.store(kn.value(0, at(o, kn.k(0), j)), best_slot)
        b.store(kn.k(0), index_slot)

        def candidate(k):
            v = kn.value(0, at(o, k, j))
            best = b.load(best_slot, typ=cx.ty(dt))
            take = _beats(cx, name, dt, v, best)
            b.store(b.select(take, v, best), best_slot)
            b.store(b.select(take, k, b.load(index_slot, typ=kn.i64)), index_slot)
        kn.loop(1, n, candidate, "k")
        i = b.load(index_slot, typ=kn.i64)
        kn.store(b.trunc(i, out_ty) if out_ty.width < 64 else i, kn.outs[0],
                 b.add(b.mul(o, kn.k(inner), flags=("nsw",)), j, flags=("nsw",)))
    kn.loops([outer, inner], position, "pos")
