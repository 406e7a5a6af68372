"""Streaming (non-temporal) stores for the big outputs of element-wise kernels.

A plain store to a line that is not in the cache first reads the line
(read-for-ownership), so a kernel reading x and y and writing out moves 16
bytes per float32 element where 12 are needed. Past the caches that read is
a quarter of the traffic. `wrap` cuts such a kernel's range into blocks of
`BLOCK_BYTES` per output that end on cache lines, has the kernel's loop
compute each block into buffers on the stack (they stay in L1), and `copy`
writes the block's whole lines with aligned non-temporal stores (`MOVNTPS`,
which skip the read), its partial lines at either end with plain ones; the
range ends with an SFENCE, so a thread's streamed lines are visible before it
reports its share done. Only the stores change, never a value computed.
x86 only (the fence is SFENCE).

A kernel streams when its outputs are at least as big as the last-level cache,
at most `MAX_STREAM_BYTES` (`stream_bytes`): smaller ones may still be in
cache for the next kernel, which a streamed output would have to read from
memory. The cap is measured: on the bench host (an Intel Xeon VM whose sysfs
lists 480 MB of L3, 2 cores) out = x*y + 1 on float32 took 0.68 / 2.0 / 8.2 ms
with plain stores at 10^6 / 3*10^6 / 10^7 elements and 0.47 / 1.4 / 6.5 ms
streamed (NumPy's copy: 0.25 / 0.85 / 5.4 ms); followed by a sum of its
output, streaming lost at 10^6 (0.66 -> 0.86 ms), broke even at 2*10^6 and
won at 3*10^6 (2.7 -> 2.4 ms).
"""
import functools
import os

from . import loops

LINE = 64
BLOCK_BYTES = 8192          # per output: two pages of L1 per block
MAX_STREAM_BYTES = 1 << 23  # 8 MiB (see above)
DEFAULT_CACHE = 32 << 20    # when the host does not say (see cache_size)


def wanted(x86, out_bytes):
    """Whether a kernel writing `out_bytes` in all streams its outputs (on x86, from
    `stream_bytes()`)."""
    return x86 and out_bytes >= stream_bytes()


@functools.cache
def stream_bytes():
    """The size of the host's last-level cache (see cache_size), at most MAX_STREAM_BYTES."""
    return min(cache_size("/sys/devices/system/cpu/cpu0/cache"), MAX_STREAM_BYTES)


def cache_size(root):
    """The size of the highest cache level Linux's sysfs lists under `root`
    (index*/level, index*/size such as 491520K), else DEFAULT_CACHE."""
    sizes = {}
    try:
        for entry in (e for e in os.listdir(root) if e.startswith("index")):
            with open(os.path.join(root, entry, "level")) as f:
                level = int(f.read())
            with open(os.path.join(root, entry, "size")) as f:
                size = f.read().strip()
            sizes[level] = int(size.rstrip("KMG")) << {"K": 10, "M": 20, "G": 30}.get(size[-1:], 0)
    except (OSError, ValueError):
        return DEFAULT_CACHE
    return sizes[max(sizes)] if sizes else DEFAULT_CACHE


def block_end(ir, b, out, first, hi, itemsize):
    """The end of the block starting at element `first` (< hi): BLOCK_BYTES
    further, moved back so that it ends on a cache line of `out` (so only the
    first and last blocks of a range have partial lines), at most `hi`."""
    i64 = ir.IntType(64)
    base = b.ptrtoint(out, i64)
    size = ir.Constant(i64, itemsize)
    end = b.add(base, b.mul(b.add(first, ir.Constant(i64, BLOCK_BYTES // itemsize)), size))
    last = b.udiv(b.sub(b.and_(end, ir.Constant(i64, -LINE)), base), size)
    return b.select(b.icmp_unsigned("<", last, hi), last, hi)


def wrap(ir, module, name, block, n_in, itemsizes):
    """`i1 name(ptr in..., ptr out..., i64 lo, i64 hi)`, a kernel's body, streaming
    its outputs (item sizes `itemsizes`) over [lo, hi) by blocks that
    `block(in..., buffer..., first, last)` computes; its error flag is any block's.
    `block` stays a function of its own, called per block: inlined, its loop nested
    in the block loop, LLVM rematerialised 28 constants in the vector loop (208
    instructions per 32 elements of sin(x)*y + exp(-x*x) instead of 169)."""
    i64, i1 = ir.IntType(64), ir.IntType(1)
    fn = ir.Function(module, block.function_type, name)
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    fn.attributes.add("nounwind")
    ins, outs = fn.args[:n_in], fn.args[n_in:-2]
    lo, hi = fn.args[-2:]
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    per_block = BLOCK_BYTES // itemsizes[0]        # elements (see block_end)
    buffers = []
    for size in itemsizes:
        buf = b.alloca(ir.IntType(8), size=per_block * size)
        buf.align = LINE
        buffers.append(buf)
    failed = b.alloca(i1)
    b.store(ir.Constant(i1, 0), failed)

    def one_block(first):
        last = block_end(ir, b, outs[0], first, hi, itemsizes[0])
        err = b.call(block, list(ins) + buffers + [first, last])
        b.store(b.or_(b.load(failed, typ=i1), err), failed)
        for out, buf, size in zip(outs, buffers, itemsizes):
            k = ir.Constant(i64, size)
            b.call(copy(ir, module), [b.gep(out, [b.mul(first, k)], inbounds=True,
                                            source_etype=ir.IntType(8)),
                                      buf, b.mul(b.sub(last, first), k)])
        return last

    loops.stepping(ir, b, fn, lo, hi, one_block, "first")
    fence(ir, module, b)
    b.ret(b.load(failed, typ=i1))
    return fn


def copy(ir, module):
    """`void fgrad_stream_copy(ptr dst, ptr src, i64 n)`: n bytes from src (any
    alignment) to dst; the whole 64-byte lines of dst by non-temporal stores, the
    partial ones at either end by `_small` (no call to memcpy)."""
    fn = module.globals.get("fgrad_stream_copy")
    if fn is not None:
        return fn
    ptr, i64, i8 = ir.PointerType(), ir.IntType(64), ir.IntType(8)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr, ptr, i64]), "fgrad_stream_copy")
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    fn.attributes.add("alwaysinline")
    dst, src, n = fn.args
    for a in (dst, src):
        a.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    line = ir.Constant(i64, LINE)
    to_line = b.and_(b.sub(ir.Constant(i64, 0), b.ptrtoint(dst, i64)), ir.Constant(i64, LINE - 1))
    head = b.select(b.icmp_unsigned("<", to_line, n), to_line, n)
    lines = b.udiv(b.sub(n, head), line)
    tail = b.add(head, b.mul(lines, line))
    _small(ir, module, b, fn, dst, src, head)
    vec = ir.VectorType(ir.IntType(32), LINE // 4)
    nontemporal = module.add_metadata([ir.Constant(ir.IntType(32), 1)])

    def one_line(at):
        v = b.load(b.gep(src, [at], inbounds=True, source_etype=i8), typ=vec)
        v.align = 1
        st = b.store(v, b.gep(dst, [at], inbounds=True, source_etype=i8))
        st.align = LINE
        st.set_metadata("nontemporal", nontemporal)
        return b.add(at, line, flags=("nuw",))

    loops.stepping(ir, b, fn, head, tail, one_line, "at")
    _small(ir, module, b, fn, b.gep(dst, [tail], inbounds=True, source_etype=i8),
           b.gep(src, [tail], inbounds=True, source_etype=i8), b.sub(n, tail))
    b.ret_void()
    return fn


def _small(ir, module, b, fn, dst, src, n):
    """Copy n < 64 bytes with plain stores: a copy of 32, 16, ..., 1 bytes for each
    bit set in n (`llvm.memcpy.inline`, never a call)."""
    ptr, i64, i8 = ir.PointerType(), ir.IntType(64), ir.IntType(8)
    inline = module.globals.get("llvm.memcpy.inline.p0.p0.i64") or ir.Function(
        module, ir.FunctionType(ir.VoidType(), [ptr, ptr, i64, ir.IntType(1)]),
        "llvm.memcpy.inline.p0.p0.i64")
    at = ir.Constant(i64, 0)
    for size in (32, 16, 8, 4, 2, 1):
        bit = ir.Constant(i64, size)
        with b.if_then(b.icmp_unsigned("!=", b.and_(n, bit), ir.Constant(i64, 0))):
            b.call(inline, [b.gep(dst, [at], inbounds=True, source_etype=i8),
                            b.gep(src, [at], inbounds=True, source_etype=i8), bit,
                            ir.Constant(ir.IntType(1), 0)])
        at = b.add(at, b.and_(n, bit))


def fence(ir, module, b):
    """SFENCE at `b`: the streamed stores before it are ordered before what follows."""
    fn = module.globals.get("llvm.x86.sse.sfence") or ir.Function(
        module, ir.FunctionType(ir.VoidType(), []), "llvm.x86.sse.sfence")
    b.call(fn, [])
