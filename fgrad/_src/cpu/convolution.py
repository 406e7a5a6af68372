"""conv_general_dilated as a native kernel: shifted gemms, or im2col then BLAS gemm.

A convolution with unit strides, no lhs dilation and no cropping, one group and
enough input features (a forward pass and its input gradient, usually) needs no
im2col (`_shifted`): each example is copied once per offset along the kernel's
last dim, read from that offset (zeros where it falls outside the input), into
rows of the output's width whose other spatial dims are zero-padded
(lax.convolution.shifted_rows); for each offset of the other dims and group of
offsets along the last dim (`shifted_stack`: several, stacked, make gemm's K up
to 256), one gemm adds W[:, :, group] (O x group·I) times the group's copies read
from the other dims' offset (group·I x wide) into a wide output. In 1-d and 2-d
every wide position is an output position (gemm writes an (N, O, H, W) output
itself); in 3-d the padded middle dims add a few, dropped when the output
positions are copied out. lax.convolution.runs_shifted says when; the
primitive's NumPy impl sums in the same order, so jit and eager agree bit for
bit.

Where shifted gemms would run in 2-d, without rhs dilation and with output
features in multiples of 16 (lax.convolution.runs_channels_last: a ResNet
block's forward and input gradient), lane products run instead, channels last
(`_emit_channels_last`, the runtime kernel cpu.lane_product): the weights packed
once as (kh, kw, C, O), each example copied into a padded (Hp, Wp, C) plane, and
one call per example adds at each wide position y·Wp + x the weights times the
window read from it (output features across the vectors, no BLAS packing of
operands per product); eager calls the same kernel.

A weight gradient's shape (a kernel far larger than the output) in 2-d with
one group, no lhs dilation or cropping, and examples in whole vectors
(lax.convolution.runs_lanes) runs lane products instead (`_emit_lanes`, the
runtime kernel cpu.lane_product): the input's features copied one at a time
into a padded plane with the examples innermost, and per output position one
call adding W[:, feature] (broadcast) times the plane read from the position's
window (examples across the vectors) into an accumulator kept per output
position: no im2col, no packing, each output element one FMA chain, so jit and
eager (which calls the same kernel) agree whatever the threads.

Otherwise, im2col:
For each group (feature or batch group) and each block of examples, the kernel
writes patches into a column buffer col[chunk·k, block·P] (P output positions
per example; an element is the input at y·stride + k·rhs_dil - lo in
lhs-dilated coordinates, or 0 in the padding and between dilated elements) and
a gemm multiplies the matching columns of the group's weights W[O/groups, I·k]
by it, chunk after chunk of input features (gemm's beta = 1 adds them up; see
`_plan`). A large kernel over few output positions (what a weight gradient
is) is laid out transposed instead, col[(example, y), (feature, k)], and gemm
computes the output's transpose: its copy loops then run along the long kernel
rows. Both copy whole runs along the last spatial dim (their in-bounds range
computed once per run) unless it has lhs dilation. Layouts come from the
dimension numbers as element strides, so no
operand is transposed: a weight that is not (O, I, k...) contiguous is packed
once per call, and an output that is not (N, O, spatial...) contiguous is
written from a buffer.

OpenBLAS always runs on the calling thread: the parallelism is fgrad's own,
over units of work (on a busy machine OpenBLAS's spinning workers made
large convolutions 10x slower). The plans (`runs_shifted`, `im2col_plan`) live
in lax.convolution, whose impl makes the same gemm calls in the same order (on
one thread, where gemm's bits depend on its threads), so eager and jit agree
bit for bit; several chunks' products are added outside gemm (beta = 1 would
add inside its own K blocks).

The body has the signature of a fused group's,
`i1 fname_body(ptr lhs, ptr rhs, ptr out, i64 lo, i64 hi)`: [lo, hi) selects
units of work, (group, block) pairs or examples (`split_extent`), so fgrad's
worker threads can share a
convolution, each thread with its own buffers and OpenBLAS on one thread.
"""
import math

import numpy as np

from ..jaxpr import Var, all_eqns
from ..lax.convolution import (im2col_plan, lane_layout, out_is_canonical, padded_plane,
                               runs_channels_last, runs_lanes, runs_shifted,
                               shifted_copy_range, shifted_rows, shifted_stack)
from . import blas, lane_product, loops

NAMES = frozenset({"conv_general_dilated"})


def _layout(shape, spec):
    """Element strides of the canonical axes (spec order) of a C-contiguous array."""
    strides, acc = [0] * len(shape), 1
    for d in reversed(range(len(shape))):
        strides[d] = acc
        acc *= shape[d]
    return [strides[d] for d in spec]


def _layouts(eqn):
    """The element strides of a convolution's input, weights and output, each in
    the (batch or feature, feature, spatial...) order of its dimension numbers."""
    dn = eqn.params["dimension_numbers"]
    return (_layout(eqn.invars[0].aval.shape, dn.lhs_spec),
            _layout(eqn.invars[1].aval.shape, dn.rhs_spec),
            _layout(eqn.outvars[0].aval.shape, dn.out_spec))


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


def _plan(eqn):
    """lax.convolution.im2col_plan for the equation: (chunk, block, transposed, direct)."""
    _, rhs, (nb, o, *ys) = _sizes(eqn)
    canonical = out_is_canonical(eqn.params["dimension_numbers"].out_spec, (nb, o, *ys))
    return im2col_plan(rhs, nb, ys, canonical)


def split_extent(eqn):
    """The body's units of work, (group, block of examples) pairs: its [lo, hi)
    range, which threads may share (each with its own buffers)."""
    p = eqn.params
    nb = _sizes(eqn)[2][0]
    if _lanes(eqn):
        blocks = nb // lane_product.LANES[np.dtype(eqn.outvars[0].aval.dtype)]
        return blocks if blocks >= LANE_BLOCKS else _sizes(eqn)[1][0]
    if _shifted(eqn) or _channels_last(eqn):
        return nb
    return p["feature_group_count"] * p["batch_group_count"] * (nb // _plan(eqn)[1])


def _channels_last(eqn):
    """Whether the kernel runs channels-last lane products
    (lax.convolution.runs_channels_last)."""
    _, rhs, (_, _, *ys) = _sizes(eqn)
    return runs_channels_last(rhs, ys, eqn.params)


def _shifted(eqn):
    """Whether the kernel runs shifted gemms (lax.convolution.runs_shifted)."""
    _, rhs, (_, _, *ys) = _sizes(eqn)
    return runs_shifted(rhs, ys, eqn.params)


# lane products split by vectors of examples when there are this many, else by
# output features (each worker's tiles then keep all the examples' vectors: one
# vector of them per tile, its broadcasts as many as its multiply-adds, ran at
# two thirds of the speed of two or more)
LANE_BLOCKS = 4


def lane_dtypes(jaxpr):
    """The dtypes of the lane-product convolutions in `jaxpr`, nested ones too."""
    return {eqn.outvars[0].aval.dtype for eqn in all_eqns(jaxpr)
            if eqn.primitive.name in NAMES and can_lower(eqn)
            and (_lanes(eqn) or _channels_last(eqn))}


def _lanes(eqn):
    """Whether the kernel runs lane products (lax.convolution.runs_lanes)."""
    _, rhs, (nb, _, *ys) = _sizes(eqn)
    return runs_lanes(nb, rhs, ys, eqn.params, eqn.outvars[0].aval.dtype)


def _max(b, x, y):
    return b.select(b.icmp_signed(">", x, y), x, y)


def _run_bound(b, const, distance, step, low, high):
    """The first t in [low, high] with t·step >= distance (step > 0), as an i64."""
    up = b.sdiv(b.add(distance, const(step - 1)), const(step))
    up = b.select(b.icmp_signed(">", distance, const(0)), up, const(0))
    return b.select(b.icmp_signed("<", up, const(high)), _max(b, up, const(low)), const(high))


class _Tools:
    """The IR helpers both emitters share: constants, addresses, malloc, gemm."""

    def __init__(self, ir, module, b, dt):
        self.ir, self.b, self.dt = ir, b, dt
        ptr, i32, i64 = ir.PointerType(), ir.IntType(32), ir.IntType(64)
        self.real = ir.FloatType() if dt.itemsize == 4 else ir.DoubleType()
        self.gemm_fn = loops.declare(ir, module, blas._SYMBOLS[dt], ir.VoidType(),
                                     [i32, i32, i32, i64, i64, i64, self.real, ptr, i64, ptr,
                                      i64, self.real, ptr, i64])
        self.malloc = loops.declare(ir, module, "malloc", ptr, [i64])
        self.free = loops.declare(ir, module, "free", ir.VoidType(), [ptr])
        self.zero, self.one = ir.Constant(self.real, 0.0), ir.Constant(self.real, 1.0)

    def const(self, v):
        return v if isinstance(v, self.ir.Value) else self.ir.Constant(self.ir.IntType(64), int(v))

    def at(self, base, index):
        return self.b.gep(base, [self.const(index)], inbounds=True, source_etype=self.real)

    def alloc(self, elements):
        return self.b.call(self.malloc, [self.const(elements * self.dt.itemsize)])

    def gemm(self, a, bmat, c, m, ncols, k, lda, ldb, ldc, beta, trans_b=False):
        """c = a @ op(bmat) + beta·c, row-major (op transposes when trans_b)."""
        ir, const = self.ir, self.const
        i32 = ir.IntType(32)
        self.b.call(self.gemm_fn, [
            ir.Constant(i32, blas._ROW_MAJOR), ir.Constant(i32, blas._NO_TRANS),
            ir.Constant(i32, blas._TRANS if trans_b else blas._NO_TRANS),
            const(m), const(ncols), const(k), self.one, a, const(lda), bmat, const(ldb), beta,
            c, const(ldc)])


def _start(ir, module, fname, dt):
    """(the body function, a builder at its entry, its _Tools)."""
    ptr, i64 = ir.PointerType(), ir.IntType(64)
    fn = ir.Function(module, ir.FunctionType(ir.IntType(1), [ptr, ptr, ptr, i64, i64]),
                     fname + "_body")
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    return fn, b, _Tools(ir, module, b, dt)


def _emit_shifted(ir, module, fname, eqn):
    """The body of a convolution `_shifted` accepts: per example, the input is copied
    once per offset along the kernel's last dim, read from that offset, into rows
    whose other spatial dims are zero-padded (`shifted_rows`); one gemm per group
    of `shifted_stack` such offsets (and offset of the other dims) adds
    W[:, :, group] times the group's copies read from the other dims' offset
    into a wide output, whose output positions are copied out."""
    p = eqn.params
    dt = np.dtype(eqn.outvars[0].aval.dtype)
    (_, _, *xs), (o, i, *ks), (_, _, *ys) = _sizes(eqn)
    nsp = len(xs)
    extents, r_st, wide = shifted_rows(xs, ys, p["padding"])
    plane = math.prod(extents)
    stack = shifted_stack(i, ks[-1])
    groups = ks[-1] // stack
    rows = stack * i        # gemm's K: the stacked offsets' input features
    x_st, w_st, o_st = _layouts(eqn)

    fn, b, t = _start(ir, module, fname, dt)
    lhs, rhs, out = fn.args[:3]
    const, at, real = t.const, t.at, t.real
    restore = blas.one_thread(ir, module, b)
    weights, copies = t.alloc(math.prod(ks) * o * i), t.alloc(ks[-1] * i * plane)
    # gemm writes an example's output itself when its wide positions are the output
    # positions (2-d) in an (N, O, spatial...) layout
    direct = wide == math.prod(ys) and o_st[1:] == _layout([o, *ys], range(nsp + 1))
    result = None if direct else t.alloc(o * wide)

    def pack(idx):          # weights as (k_outer..., group, O, offset in group, I)
        src = loops.linear(ir, b, idx, w_st[:-1] + [stack * w_st[-1], w_st[-1]])
        dst = loops.linear(ir, b, idx, [rows, 1] + [
            st * groups * o * rows for st in _layout(ks[:-1], range(nsp - 1))] + [o * rows, i])
        b.store(b.load(at(rhs, src), typ=real), at(weights, dst))
    loops.nest(ir, b, fn, [o, i, *ks[:-1], groups, stack], pack, "pack")
    loops.loop(ir, b, fn, 0, ks[-1] * i * plane, lambda j: b.store(t.zero, at(copies, j)),
               "clear", unroll=False)
    lo = [pad[0] for pad in p["padding"]]

    def example(n):
        for kx in range(ks[-1]):    # copies[kx, ci, x + lo, y] = lhs[n, ci, x, y + kx - lo]
            first, end = shifted_copy_range(xs[-1], ys[-1], kx, p["rhs_dilation"][-1], lo[-1])
            start = kx * p["rhs_dilation"][-1] - lo[-1]

            def fill(idx, first=first, end=end, start=start, kx=kx):
                src = b.add(b.mul(n, const(x_st[0])), loops.linear(
                    ir, b, idx, x_st[1:-1], (first + start) * x_st[-1]))
                dst = loops.linear(ir, b, idx, [plane] + r_st[:-1], kx * i * plane + first
                                   + sum(l * st for l, st in zip(lo, r_st[:-1])))
                loops.loop(ir, b, fn, 0, end - first, lambda j: b.store(
                    b.load(at(lhs, b.add(src, b.mul(j, const(x_st[-1])))), typ=real),
                    at(copies, b.add(dst, j))), "fill", unroll=False)
            if end > first:
                loops.nest(ir, b, fn, [i, *xs[:-1]], fill, f"row{kx}")

        target = at(out, b.mul(n, const(o_st[0]))) if direct else result

        def offset(kidx):   # target += W[group] @ the group's copies from the offset
            shift = loops.linear(ir, b, kidx[:-1],
                                 [r * st for r, st in zip(p["rhs_dilation"], r_st)])
            shift = b.add(shift, b.mul(kidx[-1], const(rows * plane)))
            k = loops.linear(ir, b, kidx, _layout(ks[:-1] + [groups], range(nsp)))
            beta = b.select(b.icmp_unsigned("==", k, const(0)), t.zero, t.one)
            t.gemm(at(weights, b.mul(k, const(o * rows))), at(copies, shift), target, o, wide,
                   rows, rows, plane, wide, beta)
        loops.nest(ir, b, fn, ks[:-1] + [groups], offset, "k")
        if direct:
            return

        def put(idx):       # out[n, oi, y] = result[oi, y · row strides]
            src = loops.linear(ir, b, idx, [wide] + r_st)
            dst = b.add(b.mul(n, const(o_st[0])), loops.linear(ir, b, idx, o_st[1:]))
            b.store(b.load(at(result, src), typ=real), at(out, dst))
        loops.nest(ir, b, fn, [o, *ys], put, "put")
    loops.upto(ir, b, fn, fn.args[3], fn.args[4], example)
    for allocated in (weights, copies, result):
        if allocated is not None:
            b.call(t.free, [allocated])
    restore()
    b.ret(ir.Constant(ir.IntType(1), 0))
    return fn


def _emit_lanes(ir, module, fname, eqn):
    """The body of a convolution `_lanes` accepts: units [lo, hi) are vectors of
    examples, which run together across the kernel's vectors (n = their lanes),
    or with fewer than LANE_BLOCKS such vectors output features (all examples).
    Per input feature its plane is copied, padded, examples innermost; per output
    position one lane_product call adds W[:, feature] times the plane read from
    the position's window into acc[y, o, example]; then acc goes to the output."""
    p = eqn.params
    dt = np.dtype(eqn.outvars[0].aval.dtype)
    (nb, c, *xs), (o, _, kh, kw), (_, _, *ys) = _sizes(eqn)
    lanes = lane_product.LANES[dt]
    (hp, wp), offsets, (sb_r, sb_t) = lane_layout(xs, ys, p["padding"], p["window_strides"],
                                                  p["rhs_dilation"], 1)
    x_st, w_st, o_st = _layouts(eqn)
    (lo_h, _), (lo_w, _) = p["padding"]

    fn, b, t = _start(ir, module, fname, dt)
    lhs, rhs, out = fn.args[:3]
    const, at, real = t.const, t.at, t.real
    product = lane_product.declare(ir, module, dt)
    lo, hi = fn.args[3:5]
    if nb // lanes >= LANE_BLOCKS:      # examples [first, first + n), features [0, o)
        first, n = b.mul(lo, const(lanes)), b.mul(b.sub(hi, lo), const(lanes))
        o0, m = const(0), const(o)
    else:                               # all examples, features [o0, o0 + m)
        first, n, o0, m = const(0), const(nb), lo, b.sub(hi, lo)
    plane, acc = t.alloc(hp * wp * nb), t.alloc(len(offsets) * o * nb)
    loops.upto(ir, b, fn, const(0), b.mul(n, const(hp * wp)),
                lambda j: b.store(t.zero, at(plane, j)))
    loops.upto(ir, b, fn, const(0), b.mul(n, const(len(offsets) * o)),
                lambda j: b.store(t.zero, at(acc, j)))

    def feature(ci):
        def fill(e):    # plane[h + lo_h, w + lo_w, e] = lhs[first + e, ci, h, w]
            src = b.add(b.mul(b.add(first, e), const(x_st[0])), b.mul(ci, const(x_st[1])))

            def element(idx):
                dst = b.mul(loops.linear(ir, b, idx, [wp, 1], lo_h * wp + lo_w), n)
                v = b.load(at(lhs, b.add(src, loops.linear(ir, b, idx, x_st[2:]))), typ=real)
                b.store(v, at(plane, b.add(dst, e)))
            loops.nest(ir, b, fn, xs, element, "fill", unroll=False)
        loops.upto(ir, b, fn, const(0), n, fill)
        a = at(rhs, b.add(b.mul(ci, const(w_st[1])), b.mul(o0, const(w_st[0]))))
        for y, offset in enumerate(offsets):
            c_y = b.mul(n, b.add(o0, const(y * o)))
            b.call(product, [a, const(w_st[0]), const(w_st[2]), const(w_st[3]),
                             at(plane, b.mul(n, const(offset))), b.mul(n, const(sb_r)),
                             b.mul(n, const(sb_t)), at(acc, c_y), n, m, n, const(kh),
                             const(kw)])
    loops.loop(ir, b, fn, 0, c, feature, "feature", unroll=False)

    def put(oi):        # out[first + e, oi, y] = acc[y, oi, e]
        def position(idx):
            y = b.add(b.mul(idx[0], const(ys[1])), idx[1])
            src = b.mul(b.add(b.mul(y, const(o)), oi), n)
            dst = b.add(b.mul(oi, const(o_st[1])), loops.linear(ir, b, idx, o_st[2:]))

            def one(e):
                b.store(b.load(at(acc, b.add(src, e)), typ=real),
                        at(out, b.add(dst, b.mul(b.add(first, e), const(o_st[0])))))
            loops.upto(ir, b, fn, const(0), n, one)
        loops.nest(ir, b, fn, ys, position, "put", unroll=False)
    loops.upto(ir, b, fn, o0, b.add(o0, m), put)
    b.call(t.free, [plane])
    b.call(t.free, [acc])
    b.ret(ir.Constant(ir.IntType(1), 0))
    return fn


def _emit_channels_last(ir, module, fname, eqn):
    """The body of a convolution `_channels_last` accepts: units [lo, hi) are
    examples. The weights are packed once as (kh, kw, C, O); per example its input
    is copied into a padded plane (Hp, Wp, C) and one lane_product call adds, at
    each wide position y·Wp + x, the weights times the window read from it into
    acc[y, x, o]; then acc's output positions go to the output."""
    p = eqn.params
    dt = np.dtype(eqn.outvars[0].aval.dtype)
    (_, c, *xs), (o, _, kh, kw), (_, _, *ys) = _sizes(eqn)
    (hp, wp), _, wide = padded_plane(xs, ys, p["padding"])
    x_st, w_st, o_st = _layouts(eqn)
    (lo_h, _), (lo_w, _) = p["padding"]

    fn, b, t = _start(ir, module, fname, dt)
    lhs, rhs, out = fn.args[:3]
    const, at, real = t.const, t.at, t.real
    product = lane_product.declare(ir, module, dt)
    weights, plane, acc = t.alloc(kh * kw * c * o), t.alloc(hp * wp * c), t.alloc(wide * o)

    def pack(idx):          # weights[ky, kx, ci, oi] = rhs[oi, ci, ky, kx]
        b.store(b.load(at(rhs, loops.linear(ir, b, idx, w_st)), typ=real),
                at(weights, loops.linear(ir, b, idx, [1, o, kw * c * o, c * o])))
    loops.nest(ir, b, fn, [o, c, kh, kw], pack, "pack")
    loops.loop(ir, b, fn, 0, hp * wp * c, lambda j: b.store(t.zero, at(plane, j)), "clear",
               unroll=False)

    def example(n):
        def fill(idx):      # plane[h + lo_h, w + lo_w, ci] = lhs[n, ci, h, w]
            src = b.add(b.mul(n, const(x_st[0])),
                        loops.linear(ir, b, idx, [x_st[2], x_st[1], x_st[3]]))
            dst = loops.linear(ir, b, idx, [wp * c, 1, c], (lo_h * wp + lo_w) * c)
            b.store(b.load(at(lhs, src), typ=real), at(plane, dst))
        # by input row: its copy (W·C elements) stays in the L1 cache
        loops.nest(ir, b, fn, [xs[0], c, xs[1]], fill, "fill", unroll=False)
        loops.loop(ir, b, fn, 0, wide * o, lambda j: b.store(t.zero, at(acc, j)), "zero",
                   unroll=False)
        b.call(product, [plane, const(c), const(wp * c), const(1), weights, const(kw * c * o),
                         const(o), acc, const(o), const(wide), const(o), const(kh),
                         const(kw * c)])

        def put(idx):       # out[n, oi, y, x] = acc[y, x, oi]
            src = loops.linear(ir, b, idx, [wp * o, 1, o])
            dst = b.add(b.mul(n, const(o_st[0])),
                        loops.linear(ir, b, idx, [o_st[2], o_st[1], o_st[3]]))
            b.store(b.load(at(acc, src), typ=real), at(out, dst))
        loops.nest(ir, b, fn, [ys[0], o, ys[1]], put, "put", unroll=False)   # by row
    loops.upto(ir, b, fn, fn.args[3], fn.args[4], example)
    for allocated in (weights, plane, acc):
        b.call(t.free, [allocated])
    b.ret(ir.Constant(ir.IntType(1), 0))
    return fn


def emit(ir, module, fname, eqn):
    """Emit `fname_body` for a conv_general_dilated equation; returns the function."""
    if _lanes(eqn):
        return _emit_lanes(ir, module, fname, eqn)
    if _channels_last(eqn):
        return _emit_channels_last(ir, module, fname, eqn)
    if _shifted(eqn):
        return _emit_shifted(ir, module, fname, eqn)
    p = eqn.params
    dt = np.dtype(eqn.outvars[0].aval.dtype)
    (n, c, *xs), (o, i, *ks), (nb, _, *ys) = _sizes(eqn)
    nsp = len(xs)
    g, bg = p["feature_group_count"], p["batch_group_count"]
    groups = g * bg
    og = o // groups
    ksize, positions = math.prod(ks), math.prod(ys)
    kk = i * ksize
    chunk, block, transposed, out_direct = _plan(eqn)
    chunks, rows, blocks = i // chunk, chunk * ksize, nb // block
    cols = block * positions
    x_st, w_st, o_st = _layouts(eqn)
    w_packed = w_st == _layout([o, i, *ks], range(nsp + 2))
    dil = [(s - 1) * d + 1 for s, d in zip(xs, p["lhs_dilation"])]
    k_st, y_st = _layout(ks, range(nsp)), _layout(ys, range(nsp))

    fn, b, t = _start(ir, module, fname, dt)
    lhs, rhs, out = fn.args[:3]
    i1 = ir.IntType(1)
    const, at, alloc, gemm, real, zero = t.const, t.at, t.alloc, t.gemm, t.real, t.zero
    restore = blas.one_thread(ir, module, b)
    col = alloc(rows * cols)
    buf = None if out_direct else alloc(og * cols)
    part = alloc(og * cols) if chunks > 1 else None
    weights = rhs
    if not w_packed:        # weights as (O, I·k) rows
        weights = alloc(o * kk)

        def pack(idx):
            src = loops.linear(ir, b, idx, w_st)
            dst = loops.linear(ir, b, idx, [kk, ksize] + k_st)
            b.store(b.load(at(rhs, src), typ=real), at(weights, dst))
        loops.nest(ir, b, fn, [o, i, *ks], pack, "pack")

    def unit(u):         # u = group · blocks + block: the kernel's unit of work
        gi, bi = b.udiv(u, const(blocks)), b.urem(u, const(blocks))
        x_base = const(0)
        if bg > 1:
            x_base = b.add(x_base, b.mul(gi, const(nb * x_st[0])))
        if g > 1:
            x_base = b.add(x_base, b.mul(gi, const(i * x_st[1])))
        w_g = at(weights, b.mul(gi, const(og * kk)))
        o_g = b.mul(gi, const(og * o_st[1]))
        first = b.mul(bi, const(block))

        def chunk_of(ch):
            c0 = b.mul(ch, const(chunk))

            def source(ci, e, kidx, yidx, dims):
                """(offset of the input element, whether it is inside the input) over
                spatial dims `dims` (the others add nothing)."""
                offset = b.add(x_base, b.add(b.mul(b.add(first, e), const(x_st[0])),
                                             b.mul(b.add(c0, ci), const(x_st[1]))))
                valid = ir.Constant(i1, 1)
                for d in dims:
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
                return offset, valid

            def where(ci, e, kidx, yidx):
                row = b.add(b.mul(ci, const(ksize)), loops.linear(ir, b, kidx, k_st))
                column = b.add(b.mul(e, const(positions)), loops.linear(ir, b, yidx, y_st))
                return (b.add(b.mul(column, const(rows)), row) if transposed
                        else b.add(b.mul(row, const(cols)), column))

            def patch(idx):      # idx: input feature in chunk, k..., example in block, y...
                ci, kidx, e, yidx = idx[0], idx[1:1 + nsp], idx[1 + nsp], idx[2 + nsp:]
                offset, valid = source(ci, e, kidx, yidx, range(nsp))
                v = b.load(at(lhs, b.select(valid, offset, const(0))), typ=real)
                b.store(b.select(valid, v, zero), at(col, where(ci, e, kidx, yidx)))

            def row(idx):        # as patch, for the whole run along col's last axis
                ci, kidx, e, yidx = idx[0], idx[1:1 + nsp], idx[1 + nsp], idx[2 + nsp:]
                zero_i = const(0)
                if transposed:   # the run is over the kernel's last dim
                    kidx = kidx[:-1] + [zero_i]
                    step, count = p["rhs_dilation"][-1], ks[-1]
                    pos0 = b.mul(yidx[-1], const(p["window_strides"][-1]))
                else:            # over the output's last dim
                    yidx = yidx[:-1] + [zero_i]
                    step, count = p["window_strides"][-1], ys[-1]
                    pos0 = b.mul(kidx[-1], const(p["rhs_dilation"][-1]))
                pos0 = b.sub(pos0, const(p["padding"][-1][0]))
                offset, valid = source(ci, e, kidx, yidx, range(nsp - 1))
                begin = _run_bound(b, const, b.neg(pos0), step, 0, count)
                end = _run_bound(b, const, b.sub(const(dil[-1]), pos0), step, 0, count)
                end = b.select(valid, _max(b, end, begin), begin)
                dst = at(col, where(ci, e, kidx, yidx))

                def put(t, value):
                    b.store(value, at(dst, t))

                def copy(t):
                    pos = b.add(pos0, b.mul(t, const(step)))
                    put(t, b.load(at(lhs, b.add(offset, b.mul(pos, const(x_st[-1])))),
                                  typ=real))
                loops.upto(ir, b, fn, const(0), begin, lambda t: put(t, zero))
                loops.upto(ir, b, fn, begin, end, copy)
                loops.upto(ir, b, fn, end, const(count), lambda t: put(t, zero))
            # runs along the last spatial dim when it has no lhs dilation (their bounds
            # are computed once, so the copies are plain loops), else element by element
            by_row = nsp > 0 and p["lhs_dilation"][-1] == 1
            if transposed:      # idx reordered so the kernel's positions run innermost
                extents = [block, *ys, chunk, *ks[:-1]] if by_row else [block, *ys, chunk, *ks]
                loops.nest(ir, b, fn, extents, lambda idx: (row if by_row else patch)(
                    [idx[1 + nsp], *idx[2 + nsp:], *([const(0)] if by_row else []), idx[0],
                     *idx[1:1 + nsp]]), "col")
            else:
                extents = [chunk, *ks, block, *ys[:-1]] if by_row else [chunk, *ks, block, *ys]
                loops.nest(ir, b, fn, extents, lambda idx: (row if by_row else patch)(
                    idx + ([const(0)] if by_row else [])), "col")

            w_chunk = at(w_g, b.mul(ch, const(rows)))

            def product(target, m, ncols, emit_gemm):
                """target (m x ncols, contiguous) = the chunk's product, + target after
                the first chunk: with several chunks gemm writes `part`, added here
                (gemm's beta = 1 would add target inside its own K blocks, which the
                impl's matmul cannot follow)."""
                if chunks == 1:
                    emit_gemm(target, zero)
                    return
                emit_gemm(part, zero)
                later = b.icmp_unsigned("!=", ch, const(0))

                def add(j):
                    new = b.load(at(part, j), typ=real)
                    old = b.load(at(target, j), typ=real)
                    b.store(b.select(later, b.fadd(new, old), new), at(target, j))
                loops.loop(ir, b, fn, 0, m * ncols, add, "add", unroll=False)
            if out_direct:      # one gemm per example, straight into the output
                def example(e):
                    c_mat = at(out, b.add(o_g, b.mul(b.add(first, e), const(o_st[0]))))
                    product(c_mat, og, positions, lambda c, beta: gemm(
                        w_chunk, at(col, b.mul(e, const(positions))), c, og, positions, rows,
                        kk, cols, positions, beta))
                loops.loop(ir, b, fn, 0, block, example, "example")
            elif transposed:    # buf[(example, y), o] = col @ W_chunk^T
                product(buf, cols, og, lambda c, beta: gemm(
                    col, w_chunk, c, cols, og, rows, rows, kk, og, beta, trans_b=True))
            else:
                product(buf, og, cols, lambda c, beta: gemm(
                    w_chunk, col, c, og, cols, rows, kk, cols, cols, beta))
        loops.loop(ir, b, fn, 0, chunks, chunk_of, "chunk")
        if out_direct:
            return

        def scatter(idx):    # idx: o in group, example in block, y...
            oi, e, yidx = idx[0], idx[1], idx[2:]
            column = b.add(b.mul(e, const(positions)), loops.linear(ir, b, yidx, y_st))
            src = (b.add(b.mul(column, const(og)), oi) if transposed
                   else b.add(b.mul(oi, const(cols)), column))
            dst = b.add(b.add(o_g, b.mul(oi, const(o_st[1]))), b.add(
                b.mul(b.add(first, e), const(o_st[0])), loops.linear(ir, b, yidx, o_st[2:])))
            b.store(b.load(at(buf, src), typ=real), at(out, dst))
        loops.nest(ir, b, fn, [og, block, *ys], scatter, "scatter")
    loops.upto(ir, b, fn, fn.args[3], fn.args[4], unit)

    for allocated in (col, buf, part, None if w_packed else weights):
        if allocated is not None:
            b.call(t.free, [allocated])
    restore()
    b.ret(ir.Constant(i1, 0))
    return fn
