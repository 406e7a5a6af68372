"""sort as a native kernel of its own (not fused).

Each row along `dimension` is sorted by a stable bottom-up merge sort of its
positions (two index buffers, malloc'd per call), comparing the first
`num_keys` operands lexicographically in NumPy's order: NaNs last, -0.0 equal
to 0.0 (so they keep their order), unsigned integers unsigned, False before
True. Then every operand is gathered by the sorted positions. Stability makes
the result the one `np.sort(kind="stable")`, `np.argsort(kind="stable")` and
`np.lexsort` give, which the NumPy impl in `lax/sorting.py` uses.

The body has the signature of a fused group's,
`i1 fname_body(ptr operands..., ptr outputs..., i64, i64)` (the range is
ignored: a sort is never split over threads).
"""
import math

import numpy as np

from ..jaxpr import Var

NAMES = frozenset({"sort"})
_SUPPORTED = frozenset(np.dtype(d) for d in (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64"))


def can_lower(eqn):
    """A sort of array operands of supported dtypes along a non-empty dimension."""
    if eqn.primitive.name not in NAMES or any(type(a) is not Var for a in eqn.invars):
        return False
    shape = eqn.invars[0].aval.shape
    return (all(np.dtype(a.aval.dtype) in _SUPPORTED for a in eqn.invars)
            and 0 not in shape)


def emit(ir, module, fname, eqn, cx_of):
    """Emit `fname_body` for a sort equation; returns the function."""
    ops = list(eqn.invars)
    n_ops, num_keys, dim = len(ops), eqn.params["num_keys"], eqn.params["dimension"]
    shape = tuple(ops[0].aval.shape)
    n, outer, inner = shape[dim], math.prod(shape[:dim]), math.prod(shape[dim + 1:])
    ptr, i1, i64 = ir.PointerType(), ir.IntType(1), ir.IntType(64)
    fn = ir.Function(module, ir.FunctionType(i1, [ptr] * (2 * n_ops) + [i64, i64]),
                     fname + "_body")
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    cx = cx_of(ir, module, b)
    ins, outs = fn.args[:n_ops], fn.args[n_ops:2 * n_ops]

    def const(v):
        return ir.Constant(i64, v)

    def declare(name, ret, args):
        f = module.globals.get(name)
        return f if f is not None else ir.Function(module, ir.FunctionType(ret, args), name)

    malloc = declare("malloc", ptr, [i64])
    free = declare("free", ir.VoidType(), [ptr])

    def loop(start, stop, body, name, carried=()):
        """for x in [start, stop): carried = body(x, *carried); returns the final values."""
        pre = b.block
        head = fn.append_basic_block(name)
        step = fn.append_basic_block(name + "_body")
        done = fn.append_basic_block(name + "_done")
        b.branch(head)
        b.position_at_end(head)
        x = b.phi(i64, name=name)
        x.add_incoming(start, pre)
        phis = []
        for v in carried:
            p = b.phi(v.type)
            p.add_incoming(v, pre)
            phis.append(p)
        b.cbranch(b.icmp_signed("<", x, stop), step, done)
        b.position_at_end(step)
        new, nxt = body(x, *phis)
        x.add_incoming(nxt, b.block)
        for p, v in zip(phis, new):
            p.add_incoming(v, b.block)
        b.branch(head)
        b.position_at_end(done)
        return phis

    def load(p, index, dt):
        mt = cx.mem_ty(dt)
        return b.load(b.gep(p, [index], inbounds=True, source_etype=mt), typ=mt)

    def index_at(p, k):
        return b.load(b.gep(p, [k], inbounds=True, source_etype=i64), typ=i64)

    def key_value(j, base, position):
        dt = ops[j].aval.dtype
        v = load(ins[j], b.add(base, b.mul(position, const(inner))), dt)
        if dt == np.float16:
            v = b.fpext(v, ir.FloatType())
        return v

    def less(base, pa, pb):
        """Row element at position pa sorts strictly before the one at pb."""
        result, equal_so_far = ir.Constant(i1, 0), ir.Constant(i1, 1)
        for j in range(num_keys):
            dt = ops[j].aval.dtype
            x, y = key_value(j, base, pa), key_value(j, base, pb)
            if dt.kind == "f":
                nan_x, nan_y = b.fcmp_unordered("uno", x, x), b.fcmp_unordered("uno", y, y)
                lt = b.or_(b.fcmp_ordered("<", x, y), b.and_(b.not_(nan_x), nan_y))
                eq = b.or_(b.fcmp_ordered("==", x, y), b.and_(nan_x, nan_y))
            else:
                cmp = b.icmp_signed if dt.kind == "i" else b.icmp_unsigned
                lt, eq = cmp("<", x, y), b.icmp_unsigned("==", x, y)
            result = b.or_(result, b.and_(equal_so_far, lt))
            equal_so_far = b.and_(equal_so_far, eq)
        return result

    def smaller(x, y):
        return b.select(b.icmp_signed("<", x, y), x, y)

    scratch = b.call(malloc, [const(2 * n * 8)])
    first = scratch
    second = b.gep(scratch, [const(n)], inbounds=True, source_etype=i64)

    def row(o, *_):
        def column(q, *_):
            base = b.add(b.mul(o, const(n * inner)), q)

            def init(p):
                b.store(p, b.gep(first, [p], inbounds=True, source_etype=i64))
                return [], b.add(p, const(1))
            loop(const(0), const(n), init, "init")

            def merge_pass(width, src, dst):
                def merge_runs(lo, src=src, dst=dst):
                    mid = smaller(b.add(lo, width), const(n))
                    hi = smaller(b.add(lo, b.add(width, width)), const(n))

                    def take(k, i, j):
                        # clamped reads keep the loads in bounds; selects decide
                        pi = index_at(src, smaller(i, const(n - 1)))
                        pj = index_at(src, smaller(j, const(n - 1)))
                        right_left = b.icmp_signed("<", j, hi)
                        left_done = b.icmp_signed(">=", i, mid)
                        right = b.and_(right_left, b.or_(left_done, less(base, pj, pi)))
                        b.store(b.select(right, pj, pi),
                                b.gep(dst, [k], inbounds=True, source_etype=i64))
                        step = b.zext(right, i64)
                        return ([b.add(i, b.sub(const(1), step)), b.add(j, step)],
                                b.add(k, const(1)))
                    loop(lo, hi, take, "merge", (lo, mid))
                    return [], b.add(lo, b.add(width, width))
                loop(const(0), const(n), merge_runs, "runs")
                return [b.shl(width, const(1)), dst, src], b.shl(width, const(1))

            # widths 1, 2, 4, ... below n; the sorted positions end in `src`
            _, src, _ = loop_widths(merge_pass)
            for j in range(n_ops):
                dt = ops[j].aval.dtype
                mt = cx.mem_ty(dt)

                def gather(p, j=j, mt=mt):
                    position = index_at(src, p)
                    v = b.load(b.gep(ins[j], [b.add(base, b.mul(position, const(inner)))],
                                     inbounds=True, source_etype=mt), typ=mt)
                    b.store(v, b.gep(outs[j], [b.add(base, b.mul(p, const(inner)))],
                                     inbounds=True, source_etype=mt))
                    return [], b.add(p, const(1))
                loop(const(0), const(n), gather, "gather")
            return [], b.add(q, const(1))
        loop(const(0), const(inner), column, "column")
        return [], b.add(o, const(1))

    def loop_widths(merge_pass):
        """Run merge passes while width < n, alternating the two index buffers."""
        pre = b.block
        head = fn.append_basic_block("widths")
        body_block = fn.append_basic_block("widths_body")
        done = fn.append_basic_block("widths_done")
        b.branch(head)
        b.position_at_end(head)
        width = b.phi(i64, name="width")
        width.add_incoming(const(1), pre)
        src = b.phi(ptr, name="src")
        src.add_incoming(first, pre)
        dst = b.phi(ptr, name="dst")
        dst.add_incoming(second, pre)
        b.cbranch(b.icmp_signed("<", width, const(n)), body_block, done)
        b.position_at_end(body_block)
        (w2, new_src, new_dst), _ = merge_pass(width, src, dst)
        width.add_incoming(w2, b.block)
        src.add_incoming(new_src, b.block)
        dst.add_incoming(new_dst, b.block)
        b.branch(head)
        b.position_at_end(done)
        return width, src, dst

    loop(const(0), const(outer), row, "row")
    b.call(free, [scratch])
    b.ret(ir.Constant(i1, 0))
    return fn
