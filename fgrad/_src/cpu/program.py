"""Runs of native kernels called as one native function (a *segment*).

Calling a kernel from Python costs a few microseconds (allocating its outputs,
filling its argument table, the ctypes call); a small program of twenty kernels
spends more time there than computing. So consecutive native steps of a plan
become one segment: a single native entry

    void <name>_s<j>(i64* args)

that calls each member kernel's body in order. Values a segment defines and
only its own members read live in a workspace whose layout is planned here by
liveness (a value's bytes are reused once its last reader has run); values
other steps or the caller need are arrays allocated by the segment's Python
caller. The argument table holds the imported arrays (object addresses, as
for single kernels), then the exported arrays, then the workspace's aligned
data pointer, then the selector-error flag.

Reshapes, squeezes and expand_dims inside a segment cost nothing: a C-order
buffer read with another shape is the same bytes, so their result is their
operand's pointer (when only the segment reads the result).

Kernels that split over threads, and kernels over zero-size domains, stay
single steps.

A `scan` whose body is itself one segment becomes a native loop (`emit_scan`):
a kernel like any other, so it joins its neighbours' segment; each iteration
fills the body segment's table with raw pointers (the body's entry reads
pointers, not ndarray objects) and calls it.
"""
import math

import numpy as np

from ..jaxpr import Literal, Var

ALIGN = 64

# Steps that only give a C-contiguous buffer another shape.
ALIASES = frozenset({"reshape", "squeeze", "expand_dims"})


class Segment:
    """Steps `members` (indices into the plan, consecutive) run by one entry.

    imported: Vars read by the members and defined elsewhere (table order);
    exported: Vars the members define that later steps or the program's outputs
    need; offsets: byte offset in the workspace of every other Var the members
    define, except aliases: `aliases` maps an alias step's result to the Var
    whose bytes it is; workspace: the workspace's size in bytes.
    """
    __slots__ = ("members", "imported", "exported", "offsets", "aliases", "workspace")

    def __init__(self, members, imported, exported, offsets, aliases, workspace):
        self.members, self.imported, self.exported = members, imported, exported
        self.offsets, self.aliases, self.workspace = offsets, aliases, workspace


def _nbytes(aval):
    return max(1, math.prod(aval.shape)) * np.dtype(aval.dtype).itemsize


def is_alias(step):
    return not hasattr(step, "reads") and step.primitive.name in ALIASES \
        and type(step.invars[0]) is Var


def _arrays_read(step):
    atoms = step.inputs if hasattr(step, "reads") else step.invars
    return [a for a in atoms if type(a) is not Literal]


def _defined(step):
    return step.outputs if hasattr(step, "reads") else step.outvars


def plan_segments(steps, fits, program_outs, min_kernels=2):
    """Segments of consecutive steps for which `fits(step)` holds (or that are
    aliases read only inside the segment), each with at least `min_kernels`
    kernels."""
    readers = {}
    for i, step in enumerate(steps):
        for a in _arrays_read(step):
            if type(a) is Var:
                readers.setdefault(a, set()).add(i)
    runs, run = [], []
    for i, step in enumerate(steps):
        if fits(step) or is_alias(step):
            run.append(i)
        else:
            runs.append(run)
            run = []
    runs.append(run)
    segments = []
    while runs:
        run = runs.pop()
        inside = set(run)
        # an alias whose result is needed outside is not a member: split there
        cut = next((i for i in run if is_alias(steps[i]) and (
            steps[i].outvars[0] in program_outs or readers.get(steps[i].outvars[0], set())
            - inside)), None)
        if cut is not None:
            k = run.index(cut)
            runs += [run[:k], run[k + 1:]]
            continue
        while run and is_alias(steps[run[0]]):     # no use in leading or trailing aliases
            run = run[1:]
        while run and is_alias(steps[run[-1]]):
            run = run[:-1]
        if sum(not is_alias(steps[i]) for i in run) >= min_kernels:
            segments.append(_segment(run, steps, readers, program_outs))
    segments.sort(key=lambda seg: seg.members[0])
    return segments


def _segment(members, steps, readers, program_outs):
    inside = set(members)
    defined, imported, exported, aliases = {}, [], [], {}
    for i in members:
        step = steps[i]
        for a in _arrays_read(step):
            a = aliases.get(a, a)
            if a not in defined and a not in imported:
                imported.append(a)
        if is_alias(step):
            src = step.invars[0]
            aliases[step.outvars[0]] = aliases.get(src, src)
            continue
        for v in _defined(step):
            defined[v] = i
            if v in program_outs or readers.get(v, set()) - inside:
                exported.append(v)
    last = {}
    for v, d in defined.items():
        if v in exported:
            continue
        uses = [r for r in readers.get(v, ()) if r in inside]
        uses += [r for a, src in aliases.items() if src is v
                 for r in readers.get(a, ()) if r in inside]
        last[v] = max([d] + uses)
    offsets, placed, size = {}, [], 0     # placed: (first, last, start, end)
    for v in sorted(last, key=lambda v: defined[v]):
        first, end_use = defined[v], last[v]
        n = -(-_nbytes(v.aval) // ALIGN) * ALIGN
        start = 0
        for f, l, s, e in sorted(placed, key=lambda p: p[2]):
            if f <= end_use and first <= l and start < e and s < start + n:
                start = e             # overlaps in time and in memory: go past it
        offsets[v] = start
        placed.append((first, end_use, start, start + n))
        size = max(size, start + n)
    return Segment(list(members), imported, exported, offsets, aliases, size)


def emit_segment(ir, module, fname, seg, bodies, data_offset, flush=False):
    """The segment's entry: each member kernel's body (`bodies[id(group)]` is
    (body function, (reports an error, outer extent, splittable))) on pointers
    into the imported and exported arrays or the workspace, in order; the OR of
    their error flags goes to the last table slot. `seg.members` holds the steps
    themselves here. With `flush`, subnormals are flushed to zero meanwhile."""
    from . import fused
    ptr, i64, i1 = ir.PointerType(), ir.IntType(64), ir.IntType(1)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr]), fname)
    fn.args[0].add_attribute("noalias")
    fn.args[0].name = "args"
    b = ir.IRBuilder(fn.append_basic_block("entry"))

    def slot(k):
        return b.load(b.gep(fn.args[0], [ir.Constant(i64, k)], inbounds=True, source_etype=i64),
                      typ=i64)

    pointers = {}
    for k, v in enumerate(seg.imported + seg.exported):
        p = b.inttoptr(slot(k), ptr)
        if data_offset is not None:      # the slot holds the ndarray object
            p = b.load(b.gep(p, [ir.Constant(i64, data_offset)], inbounds=True,
                             source_etype=ir.IntType(8)), typ=ptr)
        pointers[v] = p
    n_arrays = len(seg.imported) + len(seg.exported)
    workspace = b.inttoptr(slot(n_arrays), ptr)
    for v, offset in seg.offsets.items():
        pointers[v] = b.gep(workspace, [ir.Constant(i64, offset)], inbounds=True,
                            source_etype=ir.IntType(8))
    for v, src in seg.aliases.items():
        pointers[v] = pointers[src]
    err = ir.Constant(i1, 0)
    restore = fused.denormals_off(ir, module, b) if flush else (lambda: None)
    for step in seg.members:
        if not hasattr(step, "reads"):
            continue              # an alias: its result already has its source's pointer
        body, (_, outer, _) = bodies[id(step)]
        args = ([pointers[a] for a in _arrays_read(step)] + [pointers[v] for v in step.outputs]
                + [ir.Constant(i64, 0), ir.Constant(i64, outer)])
        err = b.or_(err, b.call(body, args))
    restore()
    b.store(b.zext(err, i64), b.gep(fn.args[0], [ir.Constant(i64, n_arrays + 1)],
                                    inbounds=True, source_etype=i64))
    b.ret_void()


def make_segment_caller(seg, cfunc, entry_name, prepare, inplace, address):
    """The Python side of a segment: take the imported arrays (in `seg.imported`
    order), allocate the exported ones (or reuse a donated input: `inplace` maps
    an exported index to an imported index), run, return the exported arrays.
    `prepare(k, x, dtype, shape)` makes an odd input C-contiguous; `address(a)`
    is what a table slot holds for array a."""
    in_specs = [(v.aval.dtype, tuple(v.aval.shape)) for v in seg.imported]
    out_specs = [(tuple(v.aval.shape), v.aval.dtype) for v in seg.exported]
    n_in, n_out = len(in_specs), len(out_specs)
    ws_slot, err = n_in + n_out, n_in + n_out + 1
    pool = []            # (table, its address, workspace, aligned address): one per call

    def new_context():
        table = np.zeros(n_in + n_out + 2, np.int64)
        ws = np.empty(seg.workspace + ALIGN, np.uint8)
        base = ws.ctypes.data
        table[ws_slot] = base + (-base % ALIGN)
        return table, table.ctypes.data, ws

    pool.append(new_context())
    empty, ndarray = np.empty, np.ndarray

    def run(*xs):
        table, table_address, ws = pool.pop() if pool else new_context()
        keep = []
        for k, x in enumerate(xs):
            dt, shape = in_specs[k]
            if type(x) is not ndarray or x.dtype is not dt or x.shape != shape \
                    or not x.flags.c_contiguous:
                x = prepare(k, x, dt, shape)
                keep.append(x)
            table[k] = address(x)
        outs = [empty(shape, dt) for shape, dt in out_specs]
        for j, k in inplace.items():   # a donated input used as is becomes the output
            x = xs[k]
            dt, shape = in_specs[k]
            if type(x) is ndarray and x.dtype is dt and x.shape == shape \
                    and x.flags.c_contiguous and x.flags.writeable:
                outs[j] = x
        for j, o in enumerate(outs):
            table[n_in + j] = address(o)
        cfunc(table_address)
        failed = table[err]
        table[err] = 0
        pool.append((table, table_address, ws))
        if failed:
            raise ValueError("invalid entry in choice array")
        return outs

    run.__name__ = entry_name
    return run


# ----------------------------------------------------------------------------
# Native loops

class LoopPlan:
    """A scan whose body is one all-native segment: the body program (simplified),
    its kernel groups, and the segment (members as steps) that runs one iteration."""
    __slots__ = ("body", "groups", "segment")

    def __init__(self, body, groups, segment):
        self.body, self.groups, self.segment = body, groups, segment


def _declare(ir, module, name, ret, args):
    fn = module.globals.get(name)
    return fn if fn is not None else ir.Function(module, ir.FunctionType(ret, args), name)


def emit_scan(ir, module, fname, eqn, plan, segment_fn):
    """`i1 fname_body(ptr inputs..., ptr outputs..., i64, i64)` running the scan
    `eqn` as a native loop: each iteration fills the body segment's pointer table
    (consts, the current carry, row i of each xs; the next carry, row i of each
    ys) and calls it. Carries alternate between the carry outputs and a scratch
    buffer so that the last iteration writes the outputs; the body's workspace
    follows the scratch carries in one malloc'd block."""
    p = eqn.params
    n_consts, n_carry, length, reverse = (p["num_consts"], p["num_carry"], p["length"],
                                          p["reverse"])
    ptr, i8, i64 = ir.PointerType(), ir.IntType(8), ir.IntType(64)
    body = plan.body.jaxpr
    # inputs: the scan's operands, then the body's own constants (arrays the caller
    # places once); outputs: the final carries, then the stacked ys
    ins, outs = list(eqn.invars) + list(body.constvars), list(eqn.outvars)
    fn = ir.Function(module, ir.FunctionType(ir.IntType(1), [ptr] * (len(ins) + len(outs))
                                             + [i64, i64]), fname + "_body")
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    args = fn.args
    n_ops = len(eqn.invars)
    consts, inits, xs = (args[:n_consts], args[n_consts:n_consts + n_carry],
                         args[n_consts + n_carry:n_ops])
    carry_out, ys = args[len(ins):len(ins) + n_carry], args[len(ins) + n_carry:len(ins) + len(outs)]
    carry_bytes = [_nbytes(v.aval) for v in outs[:n_carry]]
    padded = [-(-n // ALIGN) * ALIGN for n in carry_bytes]
    x_rows = [_nbytes(v.aval) // max(length, 1) for v in ins[n_consts + n_carry:n_ops]]
    y_rows = [_nbytes(v.aval) // max(length, 1) for v in outs[n_carry:]]
    seg = plan.segment
    malloc = _declare(ir, module, "malloc", ptr, [i64])
    free = _declare(ir, module, "free", ir.VoidType(), [ptr])
    memcpy = _declare(ir, module, "llvm.memcpy.p0.p0.i64", ir.VoidType(),
                      [ptr, ptr, i64, ir.IntType(1)])

    def at(base, offset):
        return b.gep(base, [offset], inbounds=True, source_etype=i8)

    if length == 0:          # the carries come out as they went in; no rows
        for src, dst, n in zip(inits, carry_out, carry_bytes):
            b.call(memcpy, [dst, src, ir.Constant(i64, n), ir.Constant(ir.IntType(1), 0)])
        b.ret(ir.Constant(ir.IntType(1), 0))
        return fn
    block = b.call(malloc, [ir.Constant(i64, sum(padded) + seg.workspace + ALIGN)])
    scratch, offset = [], 0
    for n in padded:
        scratch.append(at(block, ir.Constant(i64, offset)))
        offset += n
    base = b.ptrtoint(at(block, ir.Constant(i64, offset)), i64)
    workspace = b.and_(b.add(base, ir.Constant(i64, ALIGN - 1)), ir.Constant(i64, -ALIGN))
    n_slots = len(seg.imported) + len(seg.exported) + 2
    table = b.alloca(i64, ir.Constant(i64, n_slots), name="table")

    def put(k, value):
        b.store(value if value.type == i64 else b.ptrtoint(value, i64),
                b.gep(table, [ir.Constant(i64, k)], inbounds=True, source_etype=i64))

    put(n_slots - 2, workspace)
    pre = b.block
    loop = fn.append_basic_block("iteration")
    done = fn.append_basic_block("done")
    b.branch(loop)
    b.position_at_end(loop)
    t = b.phi(i64, name="t")
    t.add_incoming(ir.Constant(i64, 0), pre)
    err = b.phi(ir.IntType(1), name="err")
    err.add_incoming(ir.Constant(ir.IntType(1), 0), pre)
    row = b.sub(ir.Constant(i64, length - 1), t) if reverse else t
    # iteration t writes the outputs when (length - 1 - t) is even, else the scratch
    final = b.icmp_unsigned("==", b.and_(b.sub(ir.Constant(i64, length - 1), t),
                                          ir.Constant(i64, 1)), ir.Constant(i64, 0))
    first = b.icmp_unsigned("==", t, ir.Constant(i64, 0))
    source = dict(zip(body.constvars, args[n_ops:len(ins)]))   # body input -> its pointer
    for k, v in enumerate(body.invars):
        if k < n_consts:
            source[v] = consts[k]
        elif k < n_consts + n_carry:
            c = k - n_consts      # read what the previous iteration wrote
            previous = b.select(final, scratch[c], carry_out[c])
            source[v] = b.select(first, inits[c], previous)
        else:
            j = k - n_consts - n_carry
            source[v] = at(xs[j], b.mul(row, ir.Constant(i64, x_rows[j])))
    target, sizes = [], []   # per body output: where it goes this iteration, its bytes
    for k, v in enumerate(body.outvars):
        if k < n_carry:
            target.append(b.select(final, carry_out[k], scratch[k]))
            sizes.append(carry_bytes[k])
        else:
            j = k - n_carry
            target.append(at(ys[j], b.mul(row, ir.Constant(i64, y_rows[j]))))
            sizes.append(y_rows[j])
    first_out = {}
    for k, v in enumerate(body.outvars):
        first_out.setdefault(v, k)
    for k, v in enumerate(seg.imported):
        put(k, source[v])
    for k, v in enumerate(seg.exported):
        put(len(seg.imported) + k, target[first_out[v]])
    put(n_slots - 1, ir.Constant(i64, 0))
    b.call(segment_fn, [table])
    flag = b.load(b.gep(table, [ir.Constant(i64, n_slots - 1)], inbounds=True,
                        source_etype=i64), typ=i64)
    # outputs the body passes through from an input, or repeats: copied
    for k, v in enumerate(body.outvars):
        src = source.get(v) if v in source else (target[first_out[v]] if first_out[v] != k
                                                 else None)
        if src is not None and sizes[k]:
            b.call(memcpy, [target[k], src, ir.Constant(i64, sizes[k]),
                            ir.Constant(ir.IntType(1), 0)])
    failed = b.or_(err, b.icmp_unsigned("!=", flag, ir.Constant(i64, 0)))
    nxt = b.add(t, ir.Constant(i64, 1))
    t.add_incoming(nxt, b.block)
    err.add_incoming(failed, b.block)
    b.cbranch(b.icmp_unsigned("<", nxt, ir.Constant(i64, length)), loop, done)
    b.position_at_end(done)
    b.call(free, [block])
    b.ret(failed)
    return fn
