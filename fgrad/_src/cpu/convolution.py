"""conv_general_dilated as a native kernel: im2col by index arithmetic, then BLAS gemm.

For each group (feature or batch group) and each block of examples, the kernel
writes the block's patches into a column buffer col[I·k, block·P] (P output
positions per example; an element is the input at y·stride + k·rhs_dil - lo in
lhs-dilated coordinates, or 0 in the padding and between dilated elements), and
one gemm multiplies the group's weights W[O/groups, I·k] by it. Layouts come
from the dimension numbers as element strides, so no operand is transposed: a
weight that is not (O, I, k...) contiguous is packed once per call, and an
output that is not (N, O, spatial...) contiguous is written from a buffer.

The blocks hold as many examples as keep the column buffer near `COL_ELEMENTS`
(a divisor of the batch, so every block has the same static size). OpenBLAS
always runs on the calling thread: the parallelism is fgrad's own, over
(group, block) units (on a busy machine OpenBLAS's spinning workers made
large convolutions 10x slower). Sums are gemm's (its blocking decides their order), so
jit agrees with the NumPy impl (im2col + matmul) to rounding, not bit for bit.

The body has the signature of a fused group's,
`i1 fname_body(ptr lhs, ptr rhs, ptr out, i64 lo, i64 hi)`: [lo, hi) selects
(group, block) units (`split_extent`), so fgrad's worker threads can share a
convolution, each thread with its own buffers and OpenBLAS on one thread.
"""
import math

import numpy as np

from ..jaxpr import Var
from . import blas, loops

NAMES = frozenset({"conv_general_dilated"})
COL_ELEMENTS = 1 << 20


def _layout(shape, spec):
    """Element strides of the canonical axes (spec order) of a C-contiguous array."""
    strides, acc = [0] * len(shape), 1
    for d in reversed(range(len(shape))):
        strides[d] = acc
        acc *= shape[d]
    return [strides[d] for d in spec]


def _sizes(eqn):
    dn = eqn.params["dimension_numbers"]
    lhs, rhs = (a.aval.shape for a in eqn.invars)
    out = eqn.outvars[0].aval.shape
    return ([lhs[d] for d in dn.lhs_spec], [rhs[d] for d in dn.rhs_spec],
            [out[d] for d in dn.out_spec])


def can_lower(eqn):
    """A float32/float64 convolution of two arrays with no empty axis, no
    preferred_element_type, when gemm can be called natively."""
    if eqn.primitive.name not in NAMES or any(type(a) is not Var for a in eqn.invars):
        return False
    lhs, rhs = (a.aval for a in eqn.invars)
    out = eqn.outvars[0].aval
    return (eqn.params["preferred_element_type"] is None and lhs.dtype == rhs.dtype
            and np.dtype(lhs.dtype) in (np.dtype(np.float32), np.dtype(np.float64))
            and 0 not in lhs.shape and 0 not in rhs.shape and 0 not in out.shape
            and blas.available())


def work(eqn):
    """Multiply-adds of the convolution (its gemms)."""
    _, (o, i, *ks), (n, _, *ys) = _sizes(eqn)
    return n * o * i * math.prod(ks) * math.prod(ys)


def is_small(eqn):
    """Whether the products are too small for OpenBLAS's threads (see blas)."""
    return work(eqn) < blas.SMALL_GEMM


def _block(examples, per_example):
    """The largest divisor of `examples` whose columns fit COL_ELEMENTS (at least 1)."""
    best = 1
    for d in range(1, examples + 1):
        if examples % d == 0 and d * per_example <= COL_ELEMENTS:
            best = d
    return best


def split_extent(eqn):
    """The body's units of work, (group, block of examples) pairs: its [lo, hi)
    range, which threads may share (each with its own buffers)."""
    p = eqn.params
    (_, _, *_), (o, i, *ks), (nb, _, *ys) = _sizes(eqn)
    groups = p["feature_group_count"] * p["batch_group_count"]
    return groups * (nb // _block(nb, i * math.prod(ks) * math.prod(ys)))


def _range_loop(ir, b, fn, lo, hi, body):
    """for u in [lo, hi): body(u), with run-time bounds."""
    i64 = ir.IntType(64)
    pre = b.block
    head, step, done = (fn.append_basic_block(n) for n in ("unit", "unit_body", "unit_done"))
    b.branch(head)
    b.position_at_end(head)
    u = b.phi(i64, name="u")
    u.add_incoming(lo, pre)
    b.cbranch(b.icmp_signed("<", u, hi), step, done)
    b.position_at_end(step)
    body(u)
    u.add_incoming(b.add(u, ir.Constant(i64, 1)), b.block)
    b.branch(head)
    b.position_at_end(done)


def emit(ir, module, fname, eqn):
    """Emit `fname_body` for a conv_general_dilated equation; returns the function."""
    p = eqn.params
    dn = p["dimension_numbers"]
    dt = np.dtype(eqn.outvars[0].aval.dtype)
    (n, c, *xs), (o, i, *ks), (nb, _, *ys) = _sizes(eqn)
    nsp = len(xs)
    g, bg = p["feature_group_count"], p["batch_group_count"]
    groups = g * bg
    og = o // groups
    ksize, positions = math.prod(ks), math.prod(ys)
    kk = i * ksize
    block = _block(nb, kk * positions)
    blocks = nb // block
    cols = block * positions
    x_st = _layout([a.aval.shape for a in eqn.invars][0], dn.lhs_spec)
    w_st = _layout(eqn.invars[1].aval.shape, dn.rhs_spec)
    o_st = _layout(eqn.outvars[0].aval.shape, dn.out_spec)
    w_packed = w_st == _layout([o, i, *ks], range(nsp + 2))
    out_direct = o_st == _layout([nb, o, *ys], range(nsp + 2))
    dil = [(s - 1) * d + 1 for s, d in zip(xs, p["lhs_dilation"])]

    ptr, i1, i32, i64 = ir.PointerType(), ir.IntType(1), ir.IntType(32), ir.IntType(64)
    real = ir.FloatType() if dt.itemsize == 4 else ir.DoubleType()
    fn = ir.Function(module, ir.FunctionType(i1, [ptr, ptr, ptr, i64, i64]), fname + "_body")
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    lhs, rhs, out = fn.args[:3]
    gemm = loops.declare(ir, module, blas._SYMBOLS[dt], ir.VoidType(),
                         [i32, i32, i32, i64, i64, i64, real, ptr, i64, ptr, i64, real, ptr,
                          i64])
    malloc = loops.declare(ir, module, "malloc", ptr, [i64])
    free = loops.declare(ir, module, "free", ir.VoidType(), [ptr])

    def const(v):
        return v if isinstance(v, ir.Value) else ir.Constant(i64, int(v))

    def at(base, index):
        return b.gep(base, [index], inbounds=True, source_etype=real)

    def alloc(elements):
        return b.call(malloc, [const(elements * dt.itemsize)])

    restore = blas.one_thread(ir, module, b)
    col = alloc(kk * cols)
    buf = None if out_direct else alloc(og * cols)
    weights = rhs
    if not w_packed:        # weights as (O, I·k) rows
        weights = alloc(o * kk)

        def pack(idx):
            src = loops.linear(ir, b, idx, w_st)
            dst = loops.linear(ir, b, idx, [kk, ksize] + _layout(ks, range(nsp)))
            b.store(b.load(at(rhs, src), typ=real), at(weights, dst))
        loops.nest(ir, b, fn, [o, i, *ks], pack, "pack")

    zero = ir.Constant(real, 0.0)

    def unit(u):         # u = group · blocks + block: the kernel's unit of work
        gi, bi = b.udiv(u, const(blocks)), b.urem(u, const(blocks))
        x_n0 = b.mul(gi, const(nb * x_st[0])) if bg > 1 else const(0)
        x_c0 = b.mul(gi, const(i * x_st[1])) if g > 1 else const(0)
        w_g = at(weights, b.mul(gi, const(og * kk)))
        o_g = b.mul(gi, const(og * o_st[1]))

        def block_of(bi):
            first = b.mul(bi, const(block))

            def patch(idx):      # idx: ci, k..., example in block, y...
                ci, kidx, e, yidx = idx[0], idx[1:1 + nsp], idx[1 + nsp], idx[2 + nsp:]
                offset = b.add(b.add(x_n0, x_c0), b.add(
                    b.mul(b.add(first, e), const(x_st[0])), b.mul(ci, const(x_st[1]))))
                valid = ir.Constant(i1, 1)
                for d in range(nsp):
                    pos = b.sub(b.add(b.mul(yidx[d], const(p["window_strides"][d])),
                                      b.mul(kidx[d], const(p["rhs_dilation"][d]))),
                                const(p["padding"][d][0]))
                    valid = b.and_(valid, b.icmp_unsigned("<", pos, const(dil[d])))
                    ld = p["lhs_dilation"][d]
                    if ld > 1:
                        valid = b.and_(valid, b.icmp_unsigned(
                            "==", b.urem(pos, const(ld)), const(0)))
                        pos = b.udiv(pos, const(ld))
                    offset = b.add(offset, b.mul(pos, const(x_st[2 + d])))
                v = b.load(at(lhs, b.select(valid, offset, const(0))), typ=real)
                row = b.add(b.mul(ci, const(ksize)), loops.linear(ir, b, kidx, _layout(ks, range(nsp))))
                column = b.add(b.mul(e, const(positions)),
                               loops.linear(ir, b, yidx, _layout(ys, range(nsp))))
                b.store(b.select(valid, v, zero),
                        at(col, b.add(b.mul(row, const(cols)), column)))
            loops.nest(ir, b, fn, [i, *ks, block, *ys], patch, "col")

            if out_direct:      # one gemm per example, straight into the output
                def example(e):
                    b_mat = at(col, b.mul(e, const(positions)))
                    c_mat = at(out, b.add(o_g, b.mul(b.add(first, e), const(o_st[0]))))
                    b.call(gemm, [ir.Constant(i32, blas._ROW_MAJOR),
                                  ir.Constant(i32, blas._NO_TRANS),
                                  ir.Constant(i32, blas._NO_TRANS), const(og),
                                  const(positions), const(kk), ir.Constant(real, 1.0), w_g,
                                  const(kk), b_mat, const(cols), ir.Constant(real, 0.0), c_mat,
                                  const(positions)])
                loops.loop(ir, b, fn, 0, block, example, "example")
                return
            b.call(gemm, [ir.Constant(i32, blas._ROW_MAJOR), ir.Constant(i32, blas._NO_TRANS),
                          ir.Constant(i32, blas._NO_TRANS), const(og), const(cols), const(kk),
                          ir.Constant(real, 1.0), w_g, const(kk), col, const(cols),
                          ir.Constant(real, 0.0), buf, const(cols)])

            def scatter(idx):    # idx: o in group, example in block, y...
                oi, e, yidx = idx[0], idx[1], idx[2:]
                src = b.add(b.mul(oi, const(cols)), b.add(
                    b.mul(e, const(positions)), loops.linear(ir, b, yidx, _layout(ys, range(nsp)))))
                dst = b.add(b.add(o_g, b.mul(oi, const(o_st[1]))), b.add(
                    b.mul(b.add(first, e), const(o_st[0])), loops.linear(ir, b, yidx, o_st[2:])))
                b.store(b.load(at(buf, src), typ=real), at(out, dst))
            loops.nest(ir, b, fn, [og, block, *ys], scatter, "scatter")
        block_of(bi)
    _range_loop(ir, b, fn, fn.args[3], fn.args[4], unit)

    for allocated in (col, buf, None if w_packed else weights):
        if allocated is not None:
            b.call(free, [allocated])
    restore()
    b.ret(ir.Constant(i1, 0))
    return fn
