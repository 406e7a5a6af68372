"""Counted loops over static extents in LLVM IR, for the kernels that are not
fused loop nests (BLAS batches, gathers and scatters, structural kernels), and
`declare` for the external functions they call."""


def declare(ir, module, name, ret, args):
    """The function `name` of `module`, declared (ret (args...)) if it is not yet."""
    fn = module.globals.get(name)
    return fn if fn is not None else ir.Function(module, ir.FunctionType(ret, args), name)


def loop(ir, b, fn, start, stop, body, name="i"):
    """for i in range(start, stop): body(i), emitted at `b` in `fn` (nothing when
    the range is empty)."""
    if stop > start:
        _counted(ir, b, fn, start, stop, lambda i, _: body(i), None, name)


def nest(ir, b, fn, extents, body, name="d"):
    """Nested loops over `extents` (outermost first): body(indices); nothing when
    an extent is 0, body([]) once when there are none."""
    if any(n == 0 for n in extents):
        return

    def level(j, indices):
        if j == len(extents):
            body(indices)
            return
        loop(ir, b, fn, 0, extents[j], lambda i: level(j + 1, indices + [i]), f"{name}{j}")
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
    return _counted(ir, b, fn, 0, extent, body, init, name)


def _counted(ir, b, fn, start, stop, body, init, name):
    """The loop of `loop` and `fold` (start < stop), carrying an accumulator from
    `init` unless it is None; returns the last accumulator."""
    i64 = ir.IntType(64)
    pre = b.block
    head = fn.append_basic_block(name)
    done = fn.append_basic_block(name + "_done")
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(i64, name=name)
    i.add_incoming(ir.Constant(i64, int(start)), pre)
    acc = None
    if init is not None:
        acc = b.phi(init.type, name=name + "_acc")
        acc.add_incoming(init, pre)
    new = body(i, acc)
    nxt = b.add(i, ir.Constant(i64, 1), flags=("nuw", "nsw"))
    i.add_incoming(nxt, b.block)
    if init is not None:
        acc.add_incoming(new, b.block)
    b.cbranch(b.icmp_signed("<", nxt, ir.Constant(i64, int(stop))), head, done)
    b.position_at_end(done)
    return new
