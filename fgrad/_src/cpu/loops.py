"""Counted loops over static extents in LLVM IR, for the kernels that are not
fused loop nests (BLAS batches, gathers and scatters, structural kernels), and
`declare` for the external functions they call."""
import functools


def declare(ir, module, name, ret, args):
    """The function `name` of `module`, declared (ret (args...)) if it is not yet."""
    fn = module.globals.get(name)
    return fn if fn is not None else ir.Function(module, ir.FunctionType(ret, args), name)


def loop(ir, b, fn, start, stop, body, name="i", unroll=True):
    """for i in range(start, stop): body(i), emitted at `b` in `fn` (nothing when
    the range is empty); `unroll=False` marks it with `no_unroll`."""
    if stop > start:
        _counted(ir, b, fn, start, stop, lambda i, _: body(i), None, name, unroll)


def span(ir, b, fn, start, stop, body, name="i"):
    """for i in range(start, stop): body(i), emitted at `b` in `fn`, over i64
    values `start` < `stop` (the caller makes sure the range is not empty)."""
    _counted(ir, b, fn, start, stop, lambda i, _: body(i), None, name, True)


def upto(ir, b, fn, start, stop, body, name="i"):
    """for i in range(start, stop): body(i), over i64 values known at run time
    only (the range may be empty: the loop tests before its body)."""
    i64 = ir.IntType(64)
    pre = b.block
    head, step, done = (fn.append_basic_block(name + s) for s in ("", "_body", "_done"))
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(i64, name=name)
    i.add_incoming(start, pre)
    b.cbranch(b.icmp_signed("<", i, stop), step, done)
    b.position_at_end(step)
    body(i)
    i.add_incoming(b.add(i, ir.Constant(i64, 1)), b.block)
    b.branch(head)
    b.position_at_end(done)


def stepping(ir, b, fn, start, stop, body, name="i", signed=False):
    """i = start; while i < stop: i = body(i), over i64 values known at run time
    only: body(i) emits one pass and returns the next i (steps of any size). The
    range is tested before the first pass and after each (unsigned unless
    `signed`)."""
    less = b.icmp_signed if signed else b.icmp_unsigned
    pre = b.block
    head, done = fn.append_basic_block(name + "_loop"), fn.append_basic_block(name + "_done")
    b.cbranch(less("<", start, stop), head, done)
    b.position_at_end(head)
    i = b.phi(ir.IntType(64), name=name)
    i.add_incoming(start, pre)
    nxt = body(i)
    i.add_incoming(nxt, b.block)
    b.cbranch(less("<", nxt, stop), head, done)
    b.position_at_end(done)


def nest(ir, b, fn, extents, body, name="d", unroll=True):
    """Nested loops over `extents` (outermost first): body(indices); nothing when
    an extent is 0, body([]) once when there are none."""
    if any(n == 0 for n in extents):
        return

    def level(j, indices):
        if j == len(extents):
            body(indices)
            return
        loop(ir, b, fn, 0, extents[j], lambda i: level(j + 1, indices + [i]), f"{name}{j}",
             unroll)
    level(0, [])


def linear(ir, b, indices, strides, base=0):
    """base + sum(index * stride) as an i64 (zero strides add nothing)."""
    i64 = ir.IntType(64)
    acc = ir.Constant(i64, int(base))
    for i, s in zip(indices, strides):
        if s:
            acc = b.add(acc, i if s == 1 else b.mul(i, ir.Constant(i64, int(s)), flags=("nsw",)),
                        flags=("nsw",))
    return acc


def fold(ir, b, fn, extent, body, init, name="p"):
    """acc = init; for x in range(extent): acc = body(x, acc); the final acc
    (extent >= 1)."""
    return _counted(ir, b, fn, 0, extent, body, init, name, True)


def _counted(ir, b, fn, start, stop, body, init, name, unroll):
    """The loop of `loop` and `fold` (start < stop), carrying an accumulator from
    `init` unless it is None; returns the last accumulator."""
    i64 = ir.IntType(64)
    pre = b.block
    head = fn.append_basic_block(name)
    done = fn.append_basic_block(name + "_done")
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(i64, name=name)
    i.add_incoming(_i64(ir, start), pre)
    acc = None
    if init is not None:
        acc = b.phi(init.type, name=name + "_acc")
        acc.add_incoming(init, pre)
    new = body(i, acc)
    nxt = b.add(i, ir.Constant(i64, 1), flags=("nuw", "nsw"))
    i.add_incoming(nxt, b.block)
    if init is not None:
        acc.add_incoming(new, b.block)
    back = b.cbranch(b.icmp_signed("<", nxt, _i64(ir, stop)), head, done)
    if not unroll:
        no_unroll(ir, fn.module, back)
    b.position_at_end(done)
    return new


def _i64(ir, v):
    """An i64 bound: an int as a constant, an IR value as it is."""
    return v if isinstance(v, ir.Value) else ir.Constant(ir.IntType(64), int(v))


def no_unroll(ir, module, back_edge):
    """Ask LLVM not to unroll the loop whose back edge is the branch `back_edge`
    (it may still vectorise it). For loops that only move data: unrolling
    them buys little at run time, but fully unrolling every loop with a short
    static trip count (and its vectorised copy) multiplies the code LLVM then
    optimises and compiles, which made compile time the larger cost of programs
    that move many small arrays around."""
    disable = module.add_metadata([ir.MetaDataString(module, "llvm.loop.unroll.disable")])
    back_edge.set_metadata("llvm.loop", _LoopID(ir, module, disable))


def interleave(ir, module, back_edge, count, width=None):
    """Ask LLVM's loop vectoriser to keep `count` vectors of the loop whose back
    edge is `back_edge` in flight; it chooses the vector width unless `width`
    names it."""
    def prop(name, value):
        return module.add_metadata([ir.MetaDataString(module, name),
                                    ir.Constant(ir.IntType(32), value)])
    props = [prop("llvm.loop.interleave.count", count)]
    if width is not None:
        props.append(prop("llvm.loop.vectorize.width", width))
    back_edge.set_metadata("llvm.loop", _LoopID(ir, module, *props))


def _LoopID(ir, module, *properties):
    """A loop's identifying metadata node, distinct and listing itself first as
    LLVM requires (llvmlite's IR builder has no such node)."""
    return _loop_id_class(ir)(module, properties, name=str(len(module.metadata)))


@functools.lru_cache(maxsize=None)
def _loop_id_class(ir):
    class LoopID(ir.values.MDValue):
        def descr(self, buf):
            refs = ", ".join([self.get_reference()] + [p.get_reference() for p in self.operands])
            buf += (f"distinct !{{ {refs} }}", "\n")
    return LoopID
