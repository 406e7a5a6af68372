"""A register-blocked product with a fixed sum order, compiled once (runtime code).

    void fgrad_lane_product_<f32|f64>(ptr a, i64 sa_m, i64 sa_r, i64 sa_t,
                                      ptr b, i64 sb_r, i64 sb_t, ptr c, i64 sc_m,
                                      i64 m, i64 n, i64 rows, i64 cols)

adds to each c[i·sc_m + j] (i < m, j < n) the terms a[i·sa_m + r·sa_r + t·sa_t] ·
b[r·sb_r + t·sb_t + j] for r < rows, t < cols, in that order, one fused
multiply-add each. n is a multiple of `LANES` (b and c are read along j in
vectors); a's elements are broadcast. Each c element is one FMA chain, so its
bits do not depend on how the tiles cut (i, j), on how a caller splits n or
contracts in several calls: the convolution's weight gradient (cpu.convolution
under jit, lax.convolution eager) gets the same bits through this one code
(cf. `mathlib_runtime`), whatever the threads. A tile keeps MR x NV vectors of
c in registers (no packing, no copies): for each (r, t), NV vector loads of b
and MR broadcasts of a.

Its IR is compiled without LLVM's IR passes (`engine.CODEGEN_ONLY`: the same
inner loops, about a quarter of O3's compile time), and a jitted program that
runs lane products starts that compile on a background thread while it is
planned (`prefetch`, from `fused.prefetch_runtime`).
"""
import ctypes

import numpy as np

from . import engine, loops, switch_interval
from .compiler_lock import lock

LANES = {np.dtype(np.float32): 16, np.dtype(np.float64): 8}
_SUFFIX = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}
TILES = ((4, 6), (2, 12), (1, 12))    # (vectors across j, rows of i) per tile, widest first
_loaded = {}
_prefetched = set()   # dtypes a prefetch thread was started for


def symbol(dtype):
    return f"fgrad_lane_product_{_SUFFIX[np.dtype(dtype)]}"


def resolve(name):
    """`engine`'s resolver: load the kernel when `name` is one of its symbols."""
    for dt in LANES:
        if name == symbol(dt):
            _module(dt)
            return True
    return False


def prefetch(dtypes):
    """Compile the kernel for those of `dtypes` that are neither loaded, nor in
    the disk cache, nor being prefetched, on a background thread (its IR emitted
    here first), as `mathlib_runtime.prefetch` does for sin and cos: called when
    a program that runs lane products is about to be planned."""
    todo = sorted({np.dtype(d) for d in dtypes} - _loaded.keys() - _prefetched, key=str)
    todo = [dt for dt in todo if not engine.runtime_cached(_tag(dt))]
    if todo:
        _prefetched.update(todo)
        texts = [(dt, _emit(dt)) for dt in todo]
        switch_interval.compile_in_background(_module, texts, "fgrad lane product")


def _tag(dt):
    return f"lane product {symbol(dt)}"


def _module(dt, text=None):
    with lock:
        if dt not in _loaded:
            name = symbol(dt)
            module = engine.compile_runtime(_tag(dt), [name],
                                            lambda: _emit(dt) if text is None else text,
                                            export=True)
            engine.add_symbol(name, module.address(name))
            _loaded[dt] = module
    return _loaded[dt]


def function(dtype):
    """The kernel as a ctypes function (for eager callers)."""
    dt = np.dtype(dtype)
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    proto = ctypes.CFUNCTYPE(None, ptr, i64, i64, i64, ptr, i64, i64, ptr, i64, i64, i64,
                             i64, i64)
    return proto(_module(dt).address(symbol(dt)))


def declare(ir, module, dtype):
    """The kernel's declaration in a program's module."""
    ptr, i64 = ir.PointerType(), ir.IntType(64)
    return loops.declare(ir, module, symbol(dtype), ir.VoidType(),
                         [ptr, i64, i64, i64, ptr, i64, i64, ptr, i64, i64, i64, i64, i64])


def _emit(dt):
    from llvmlite import ir
    module = ir.Module(name=symbol(dt))
    real = ir.FloatType() if dt.itemsize == 4 else ir.DoubleType()
    lanes = LANES[dt]
    vec = ir.VectorType(real, lanes)
    ptr, i64, i32 = ir.PointerType(), ir.IntType(64), ir.IntType(32)
    fma = ir.Function(module, ir.FunctionType(vec, [vec] * 3),
                      f"llvm.fma.v{lanes}f{dt.itemsize * 8}")
    args = [ptr, i64, i64, i64, ptr, i64, i64, ptr, i64, i64, i64, i64, i64]

    class Attributes(ir.values.FunctionAttributes):
        """nounwind, vectors of the kernel's width are legal (else LLVM may
        split 512-bit vectors in two where the host prefers 256 bits), and no IR
        passes: the tiles are already blocked, and code generation alone makes
        the same inner loops in a quarter of the time."""

        def __bool__(self):
            return True

        def _to_list(self, ret_type):
            return super()._to_list(ret_type) + [
                f'"min-legal-vector-width"="{lanes * dt.itemsize * 8}"',
                f'"{engine.CODEGEN_ONLY}"="true"']

    def attributes(fn):
        fn.attributes = Attributes()
        fn.attributes.add("nounwind")

    def tile(nv, mr):
        """c[0:mr, 0:nv·lanes] += the terms, accumulators in registers."""
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), args[:9] + [i64, i64]),
                         f"tile_{nv}_{mr}")
        fn.linkage = "internal"
        attributes(fn)
        a, sa_m, sa_r, sa_t, bp, sb_r, sb_t, c, sc_m, rows, cols = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))

        def at(base, index):
            return b.gep(base, [index], inbounds=True, source_etype=real)

        def cvec(i, v):
            return at(c, b.add(b.mul(ir.Constant(i64, i), sc_m), ir.Constant(i64, v * lanes)))
        acc = [[b.load(cvec(i, v), typ=vec, align=dt.itemsize) for v in range(nv)]
               for i in range(mr)]
        flat = [x for row in acc for x in row]
        undef = ir.Constant(vec, ir.Undefined)
        zeros = ir.Constant(ir.VectorType(i32, lanes), [0] * lanes)

        def over(count, carry, body, name):
            """carry through `for x in range(count)` (count >= 0 at run time)."""
            pre = b.block
            head, step, done = (fn.append_basic_block(name + s) for s in ("", "_body", "_done"))
            b.branch(head)
            b.position_at_end(head)
            x = b.phi(i64)
            x.add_incoming(ir.Constant(i64, 0), pre)
            phis = [b.phi(vec) for _ in carry]
            for p, v in zip(phis, carry):
                p.add_incoming(v, pre)
            b.cbranch(b.icmp_signed("<", x, count), step, done)
            b.position_at_end(step)
            new = body(x, phis)
            x.add_incoming(b.add(x, ir.Constant(i64, 1)), b.block)
            for p, v in zip(phis, new):
                p.add_incoming(v, b.block)
            b.branch(head)
            b.position_at_end(done)
            return phis

        def row(r, carry):
            a_r, b_r = at(a, b.mul(r, sa_r)), at(bp, b.mul(r, sb_r))

            def term(t, carry):
                bt = at(b_r, b.mul(t, sb_t))
                bv = [b.load(at(bt, ir.Constant(i64, v * lanes)), typ=vec, align=dt.itemsize)
                      for v in range(nv)]
                at_t = at(a_r, b.mul(t, sa_t))
                out = []
                for i in range(mr):
                    s = b.load(at(at_t, b.mul(ir.Constant(i64, i), sa_m)), typ=real)
                    s = b.shuffle_vector(b.insert_element(undef, s, ir.Constant(i32, 0)),
                                         undef, zeros)
                    out += [b.call(fma, [s, bv[v], carry[i * nv + v]]) for v in range(nv)]
                return out
            return over(cols, carry, term, "t")
        flat = over(rows, flat, row, "r")
        for i in range(mr):
            for v in range(nv):
                b.store(flat[i * nv + v], cvec(i, v), align=dt.itemsize)
        b.ret_void()
        return fn

    kernels = {(nv, mr): tile(nv, mr) for nv, top in TILES for mr in _rows(top)}
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), args), symbol(dt))
    attributes(fn)
    a, sa_m, sa_r, sa_t, bp, sb_r, sb_t, c, sc_m, m, n, rows, cols = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))

    def at(base, index):
        return b.gep(base, [index], inbounds=True, source_etype=real)
    # j from 0 in blocks of nv·lanes, widest first; i in tiles of mr, the last few shorter
    zero = j = ir.Constant(i64, 0)
    for nv, top in TILES:
        step = nv * lanes
        blocks = b.sdiv(b.sub(n, j), ir.Constant(i64, step))
        j0 = j

        def block(jb, nv=nv, top=top, step=step, j0=j0):
            jj = b.add(j0, b.mul(jb, ir.Constant(i64, step)))
            full = b.sdiv(m, ir.Constant(i64, top))

            def call(mr, i):
                b.call(kernels[(nv, mr)], [at(a, b.mul(i, sa_m)), sa_m, sa_r, sa_t,
                                           at(bp, jj), sb_r, sb_t,
                                           at(c, b.add(b.mul(i, sc_m), jj)), sc_m, rows, cols])
            loops.upto(ir, b, fn, zero, full,
                       lambda it: call(top, b.mul(it, ir.Constant(i64, top))))
            rest = b.srem(m, ir.Constant(i64, top))
            first = b.mul(full, ir.Constant(i64, top))
            for mr in _rows(top)[1:]:    # the rest's binary digits, highest first
                with b.if_then(b.icmp_signed("!=", b.and_(rest, ir.Constant(i64, mr)),
                                             ir.Constant(i64, 0))):
                    call(mr, b.add(first, b.and_(rest, ir.Constant(i64, -2 * mr))))
        loops.upto(ir, b, fn, zero, blocks, block)
        j = b.add(j0, b.mul(blocks, ir.Constant(i64, step)))
    b.ret_void()
    return str(module)


def _rows(top):
    """The tiles' row counts for a full tile of `top` rows: top, then powers of two
    below it (the last rows, fewer than top, go as their binary digits)."""
    return [top] + [1 << k for k in reversed(range(top.bit_length())) if 1 << k < top]


engine.add_resolver(resolve)
