"""gather and the scatters as native loops (kernels of their own, not fused).

Semantics are those of the NumPy impls in `lax/gather_scatter.py`: the index
arrays (one per indexed axis, all of the index shape B) pick positions on the
operand's `axes`; the other ("rest") axes are copied whole, in the operand's
order, after B. gather clamps each index into range; a scatter starts from a
copy of the operand and applies the updates in index order (as NumPy's
`ufunc.at` does, so sums are bit-identical), dropping an update whose index is
out of range (negative included); `scatter` lets the last duplicate win.

Each kernel has the body signature of a fused group,

    i1 fname_body(ptr operands..., ptr out, i64 lo, i64 hi)

(the range is ignored: these kernels are never split over threads), so single
callers and segments drive them like any other kernel.
"""
import math

import numpy as np

from ..compiler.layout import c_strides
from . import loops

# scatter primitive -> combine(cx, dtype, old, new)
_COMBINE = {"scatter": None, "scatter_add": "add", "scatter_mul": "mul",
            "scatter_min": "min", "scatter_max": "max"}

NAMES = frozenset({"gather"}) | frozenset(_COMBINE)


def can_lower(eqn):
    """Whether `eqn` is a gather/scatter this module emits (numeric or bool data,
    integer indices, no zero-size operand; the combining scatters not on bool).
    A float16 combine is computed in float32 and rounded to half, as NumPy's
    float16 loops compute each update of `ufunc.at`."""
    name = eqn.primitive.name
    if name not in NAMES:
        return False
    operand = eqn.invars[0].aval
    if 0 in operand.shape or operand.dtype.kind not in "biuf" or operand.dtype.itemsize > 8:
        return False
    if _COMBINE.get(name) is not None and operand.dtype.kind == "b":
        return False
    return True


def emit(ir, module, fname, eqn, cx_of):
    """Emit `fname_body` for a gather or scatter equation; returns the function.
    `cx_of(builder)` gives the fused backend's type/intrinsic helpers."""
    name = eqn.primitive.name
    axes = tuple(eqn.params["axes"])
    operand = eqn.invars[0].aval
    scatter = name != "gather"
    indices = eqn.invars[2:] if scatter else eqn.invars[1:]
    dt = operand.dtype
    ptr, i64 = ir.PointerType(), ir.IntType(64)
    n_ins = len(eqn.invars)
    fn = ir.Function(module, ir.FunctionType(ir.IntType(1), [ptr] * (n_ins + 1) + [i64, i64]),
                     fname + "_body")
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    cx = cx_of(ir, module, b)
    args = fn.args
    out = args[n_ins]
    data_ptr = args[0]
    index_ptrs = args[n_ins - len(indices):n_ins]
    combine = _COMBINE.get(name)
    # plain copies move bytes; combining needs the arithmetic type
    elem = cx.mem_ty(dt) if combine is not None else ir.IntType(8 * dt.itemsize)

    batch = tuple(indices[0].aval.shape)
    op_strides = c_strides(operand.shape)
    rest = [d for d in range(len(operand.shape)) if d not in axes]
    rest_extents = [operand.shape[d] for d in rest]
    rest_strides = [op_strides[d] for d in rest]
    rest_size = math.prod(rest_extents)

    def load_index(j, b_flat):
        idt = indices[j].aval.dtype
        t = cx.ty(idt)
        v = b.load(b.gep(index_ptrs[j], [b_flat], inbounds=True, source_etype=t), typ=t)
        if t.width < 64:
            v = b.zext(v, i64) if idt.kind == "u" else b.sext(v, i64)
        return v, idt.kind == "u"

    def position(b_flat):
        """(element offset of the indexed block in the operand, all indices in range)."""
        offset, ok = ir.Constant(i64, 0), ir.Constant(ir.IntType(1), 1)
        for j, axis in enumerate(axes):
            v, unsigned = load_index(j, b_flat)
            n = ir.Constant(i64, operand.shape[axis])
            top = ir.Constant(i64, operand.shape[axis] - 1)
            if scatter:
                inside = b.icmp_unsigned("<", v, n) if unsigned else b.and_(
                    b.icmp_signed(">=", v, ir.Constant(i64, 0)), b.icmp_signed("<", v, n))
                ok = b.and_(ok, inside)
            else:               # clamp into [0, n - 1]
                if unsigned:
                    v = b.select(b.icmp_unsigned(">", v, top), top, v)
                else:
                    v = b.select(b.icmp_signed("<", v, ir.Constant(i64, 0)),
                                 ir.Constant(i64, 0), v)
                    v = b.select(b.icmp_signed(">", v, top), top, v)
            offset = b.add(offset, b.mul(v, ir.Constant(i64, op_strides[axis])))
        return offset, ok

    if not scatter:
        def gather_row(bi):
            b_flat = loops.linear(ir, b, bi, c_strides(batch))
            base, _ = position(b_flat)

            def copy(ri):
                src = b.add(base, loops.linear(ir, b, ri, rest_strides))
                dst = b.add(b.mul(b_flat, ir.Constant(i64, rest_size)),
                            loops.linear(ir, b, ri, c_strides(rest_extents)))
                v = b.load(b.gep(data_ptr, [src], inbounds=True, source_etype=elem), typ=elem)
                b.store(v, b.gep(out, [dst], inbounds=True, source_etype=elem))
            loops.nest(ir, b, fn, rest_extents, copy, "rest")
        loops.nest(ir, b, fn, list(batch), gather_row, "batch")
    else:
        updates_ptr = args[1]

        def copy_operand(ii):
            v = b.load(b.gep(data_ptr, ii, inbounds=True, source_etype=elem), typ=elem)
            b.store(v, b.gep(out, ii, inbounds=True, source_etype=elem))
        loops.nest(ir, b, fn, [math.prod(operand.shape)], copy_operand, "copy")

        def scatter_row(bi):
            b_flat = loops.linear(ir, b, bi, c_strides(batch))
            base, ok = position(b_flat)
            apply = fn.append_basic_block("apply")
            skip = fn.append_basic_block("skip")
            b.cbranch(ok, apply, skip)
            b.position_at_end(apply)

            def update(ri):
                dst = b.add(base, loops.linear(ir, b, ri, rest_strides))
                src = b.add(b.mul(b_flat, ir.Constant(i64, rest_size)),
                            loops.linear(ir, b, ri, c_strides(rest_extents)))
                new = b.load(b.gep(updates_ptr, [src], inbounds=True, source_etype=elem),
                             typ=elem)
                target = b.gep(out, [dst], inbounds=True, source_etype=elem)
                if combine is not None and dt == np.float16:   # in float32, rounded
                    wide = np.dtype(np.float32)                 # (as NumPy's half loops)
                    new = cx.to_mem(_combine(cx, combine, wide,
                                             cx.from_mem(b.load(target, typ=elem), dt),
                                             cx.from_mem(new, dt)), dt)
                elif combine is not None:
                    new = _combine(cx, combine, dt, b.load(target, typ=elem), new)
                b.store(new, target)
            loops.nest(ir, b, fn, rest_extents, update, "rest")
            b.branch(skip)
            b.position_at_end(skip)
        loops.nest(ir, b, fn, list(batch), scatter_row, "batch")
    b.ret(ir.Constant(ir.IntType(1), 0))
    return fn


def _combine(cx, op, dt, old, new):
    """old (op) new, as NumPy's ufunc of that name computes it (no fast-math)."""
    b = cx.b
    if dt.kind == "f":
        if op == "add":
            return b.fadd(old, new)
        if op == "mul":
            return b.fmul(old, new)
        return cx.call_intr("minimum" if op == "min" else "maximum", dt, old, new)
    if op == "add":
        return b.add(old, new)
    if op == "mul":
        return b.mul(old, new)
    cmp = b.icmp_unsigned if dt.kind == "u" else b.icmp_signed
    return b.select(cmp("<" if op == "min" else ">", new, old), new, old)
