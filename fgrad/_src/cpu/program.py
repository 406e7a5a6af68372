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

Kernels over zero-size domains stay single steps. The big members of a
segment may be shared with native worker threads (`Parallel`, see `pool`), so
a big element-wise kernel is a segment even alone.

A `scan` whose body is itself one segment becomes a native loop (`emit_scan`):
a kernel like any other, so it joins its neighbours' segment; each iteration
fills the body segment's table with raw pointers (the body's entry reads
pointers, not ndarray objects) and calls it. Scan and while loops look for
signals every few milliseconds and stop when a handler raised (see
`interrupts`): the caller then raises that exception.
"""
import math

import numpy as np

from ..jaxpr import Literal, Var
from . import blas, interrupts, loops, mpi, outputs
from .dispatch import NativeEntry

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


def plan_segments(steps, fits, program_outs, min_kernels=2, alone=lambda step: False):
    """Segments of consecutive steps for which `fits(step)` holds (or that are
    aliases read only inside the segment), each with at least `min_kernels`
    kernels, or one kernel for which `alone(step)` holds."""
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
        kernels = [i for i in run if not is_alias(steps[i])]
        if len(kernels) >= min_kernels or (len(kernels) == 1 and alone(steps[kernels[0]])):
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
    beside = _next_kernels(members, steps)
    last = {}
    for v, d in defined.items():
        if v in exported:
            continue
        uses = [r for r in readers.get(v, ()) if r in inside]
        uses += [r for a, src in aliases.items() if src is v
                 for r in readers.get(a, ()) if r in inside]
        last[v] = max([d] + [beside.get(r, r) for r in uses])
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


def _next_kernels(members, steps):
    """{member: the next kernel member} where the first is a matrix product: the
    next may run beside it (another product, see product_teams) or on each
    thread's rows right after the product's (see chained_rows), so what the
    product reads must keep its bytes until the next kernel is done."""
    kernels = [i for i in members if not is_alias(steps[i])]
    return {i: j for i, j in zip(kernels, kernels[1:])
            if hasattr(steps[i], "reads") and steps[i].eqns[0].primitive.name == "dot_general"}


class Parallel:
    """How a segment shares its big members with the pool's workers: `split` maps
    id(step) of each member whose outer loop is cut into `chunks` ranges to how
    (blas.SPLIT_ROWS: ranges of the output; SPLIT_SUM: terms of a product's
    sum, whose partial products go to a scratch buffer of `scratch` bytes and
    are added by the calling thread); `blas`: whether a member calls BLAS
    (pinned to one thread meanwhile: two threads changing OpenBLAS's thread
    count at once could leave it wrong); `teams` (see `product_teams`) maps
    id(step) of a split product to the products, itself first, that run beside
    it as its chunks, each whole (the others are not in `split`)."""
    __slots__ = ("split", "chunks", "scratch", "blas", "teams")

    def __init__(self, split, chunks, scratch, blas, teams=None):
        self.split, self.chunks, self.scratch, self.blas = split, chunks, scratch, blas
        self.teams = teams or {}

    # table slots after the error flag, counted from it: the pool, the run
    # function, the stage, the scratch buffer, then per split member the mask of
    # chunks claimed and the count of chunks done (`counters`)
    POOL, RUN, STAGE, SCRATCH = 1, 2, 3, 4

    @staticmethod
    def counters(number):
        """(claimed, done) slots of split member `number`, counted from the error flag."""
        return 5 + 2 * number, 6 + 2 * number

    @property
    def slots(self):
        """How many table slots follow the error flag."""
        return 4 + 2 * len(self.split)


def emit_segment(ir, module, fname, seg, bodies, data_offset, flush=False, parallel=None):
    """The segment's entry: each member kernel's body (`bodies[id(group)]` is
    (body function, (reports an error, outer extent, splittable))) on pointers
    into the imported and exported arrays or the workspace, in order; the OR of
    their error flags goes to the table slot after the workspace. `seg.members`
    holds the steps themselves here. With `flush`, subnormals are flushed to zero
    meanwhile.

    With `parallel` (a `Parallel`), the members run in `fname_work(table,
    thread)`, which the entry hands to the worker pool (see `pool`). The
    calling thread (thread 0) runs every member; before a split member it
    publishes the member's number (the stage), and every thread then claims
    chunks of its outer loop (a bit each in a mask) until none is left, thread
    t trying chunk t first, so that each thread keeps to the same rows of the
    same arrays from member to member and call to call; thread 0 goes on once
    all chunks are done. Workers only take part in split members, so a worker
    that comes late, or never, costs nothing but its share."""
    ptr, i64 = ir.PointerType(), ir.IntType(64)
    n_arrays = len(seg.imported) + len(seg.exported)
    err_slot = n_arrays + 1
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr]), fname)
    fn.args[0].add_attribute("noalias")
    fn.args[0].name = "args"
    if parallel is None:
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        failed = _emit_members(ir, module, fn, b, seg, bodies, data_offset, flush, None, None)
        b.store(b.zext(failed, i64), _slot(ir, b, fn.args[0], err_slot))
        b.ret_void()
        return
    work = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr, i64]), fname + "_work")
    work.linkage = "internal"
    work.args[0].name, work.args[1].name = "args", "thread"
    b = ir.IRBuilder(work.append_basic_block("entry"))
    failed = _emit_members(ir, module, work, b, seg, bodies, data_offset, flush, parallel,
                           work.args[1])
    with b.if_then(failed, likely=False):
        b.atomic_rmw("or", _slot(ir, b, work.args[0], err_slot), ir.Constant(i64, 1), "monotonic")
    b.ret_void()

    b = ir.IRBuilder(fn.append_basic_block("entry"))
    args = fn.args[0]
    pool_slot, run_slot = err_slot + Parallel.POOL, err_slot + Parallel.RUN
    for k in (0, Parallel.STAGE, *range(Parallel.counters(0)[0], parallel.slots + 1)):
        b.store(ir.Constant(i64, 0), _slot(ir, b, args, err_slot + k))  # error, stage, counters
    restore_blas = blas.one_thread(ir, module, b) if parallel.blas else (lambda: None)
    run = b.inttoptr(b.load(_slot(ir, b, args, run_slot), typ=i64),
                     ir.FunctionType(ir.VoidType(), [ptr, ptr, ptr]).as_pointer())
    b.call(run, [b.inttoptr(b.load(_slot(ir, b, args, pool_slot), typ=i64), ptr), work, args])
    restore_blas()
    b.ret_void()


def _slot(ir, b, table, k):
    i64 = ir.IntType(64)
    return b.gep(table, [ir.Constant(i64, k)], inbounds=True, source_etype=i64)


def _emit_members(ir, module, fn, b, seg, bodies, data_offset, flush, parallel, thread):
    """Call each member's body at `b` (see emit_segment); returns the OR of their
    error flags (i1)."""
    from . import fused
    from .pool import emit_clock, emit_wait
    ptr, i64, i1 = ir.PointerType(), ir.IntType(64), ir.IntType(1)
    table = fn.args[0]

    def const(v):
        return ir.Constant(i64, v)

    def slot(k):
        return b.load(_slot(ir, b, table, k), typ=i64)

    pointers = {}
    for k, v in enumerate(seg.imported + seg.exported):
        p = b.inttoptr(slot(k), ptr)
        if data_offset is not None:      # the slot holds the ndarray object
            p = b.load(b.gep(p, [const(data_offset)], inbounds=True,
                             source_etype=ir.IntType(8)), typ=ptr)
        pointers[v] = p
    n_arrays = len(seg.imported) + len(seg.exported)
    workspace = b.inttoptr(slot(n_arrays), ptr)
    for v, offset in seg.offsets.items():
        pointers[v] = b.gep(workspace, [const(offset)], inbounds=True,
                            source_etype=ir.IntType(8))
    for v, src in seg.aliases.items():
        pointers[v] = pointers[src]
    err = b.alloca(i1, name="failed")
    b.store(ir.Constant(i1, 0), err)
    restore = fused.denormals_off(ir, module, b) if flush else (lambda: None)
    split = [] if parallel is None else [id(st) for st in seg.members if id(st) in parallel.split]
    main = None if parallel is None else b.icmp_unsigned("==", thread, const(0))

    def call(step, lo, hi, outs=None):
        body, _ = bodies[id(step)]
        args = ([pointers[a] for a in _arrays_read(step)]
                + (outs or [pointers[v] for v in step.outputs]) + [lo, hi])
        b.store(b.or_(b.load(err, typ=i1), b.call(body, args)), err)

    def spin_until(done):
        """wait until done() (emitted in a loop block) holds"""
        since = emit_clock(ir, module, b)
        loop, after = fn.append_basic_block("spin"), fn.append_basic_block("spun")
        b.branch(loop)
        b.position_at_end(loop)
        ready = done()
        with b.if_then(b.not_(ready)):
            emit_wait(ir, module, b, since)
        b.cbranch(ready, after, loop)
        b.position_at_end(after)

    chained = chained_rows(seg, parallel, lambda st: bodies[id(st)][1][1])
    teams = {} if parallel is None else parallel.teams
    beside = {id(m) for team in teams.values() for m in team[1:]}
    for step in seg.members:
        if not hasattr(step, "reads") or id(step) in chained.values() or id(step) in beside:
            continue              # an alias (its result has its source's pointer), chained,
                                  # or run beside an earlier product
        outer = bodies[id(step)][1][1]
        if id(step) not in split:
            if main is None:
                call(step, const(0), const(outer))
            else:
                with b.if_then(main):
                    call(step, const(0), const(outer))
            continue
        number = split.index(id(step))
        err_slot = n_arrays + 1
        stage = _slot(ir, b, table, err_slot + Parallel.STAGE)
        mask, done = (_slot(ir, b, table, err_slot + k) for k in Parallel.counters(number))
        with b.if_else(main) as (publish, wait):
            with publish:
                b.atomic_rmw("xchg", stage, const(number + 1), "release")
            with wait:
                spin_until(lambda: b.icmp_signed(">", b.load_atomic(stage, "acquire", 8, typ=i64),
                                                 const(number)))
        k = parallel.chunks
        partial = parallel.split[id(step)] == blas.SPLIT_SUM
        if partial:
            out = step.outputs[0]
            real = ir.FloatType() if out.aval.dtype.itemsize == 4 else ir.DoubleType()
            n_out = math.prod(out.aval.shape)
            scratch = b.inttoptr(slot(err_slot + Parallel.SCRATCH), ptr)

        def attempt(i):
            chunk = b.urem(b.add(thread, i), const(k))
            bit = b.shl(const(1), chunk)
            old = b.atomic_rmw("or", mask, bit, "monotonic")
            with b.if_then(b.icmp_unsigned("==", b.and_(old, bit), const(0))):
                lo = b.udiv(b.mul(chunk, const(outer)), const(k))
                hi = b.udiv(b.mul(b.add(chunk, const(1)), const(outer)), const(k))
                outs = None
                if partial:
                    outs = [b.gep(scratch, [b.mul(chunk, const(n_out))], inbounds=True,
                                  source_etype=real)]
                if id(step) in teams:         # chunk c: the team's product c, whole
                    for c, member in enumerate(teams[id(step)]):
                        with b.if_then(b.icmp_unsigned("==", chunk, const(c))):
                            call(member, const(0), const(bodies[id(member)][1][1]))
                else:
                    call(step, lo, hi, outs)
                if id(step) in chained:
                    call(chained[id(step)], lo, hi)
                b.atomic_rmw("add", done, const(1), "release")
        loops.loop(ir, b, fn, 0, k, attempt, "attempt")
        with b.if_then(main):
            spin_until(lambda: b.icmp_signed(">=", b.load_atomic(done, "acquire", 8, typ=i64),
                                             const(k)))
            if partial:          # out = the partial products added in chunk order
                target = pointers[step.outputs[0]]

                def add_parts(j):
                    total = None
                    for c in range(k):
                        x = b.load(b.gep(scratch, [b.add(j, const(c * n_out))], inbounds=True,
                                         source_etype=real), typ=real)
                        total = x if total is None else b.fadd(total, x)
                    b.store(total, b.gep(target, [j], inbounds=True, source_etype=real))
                loops.loop(ir, b, fn, 0, n_out, add_parts, "part")
    restore()
    return b.load(err, typ=i1)


def chained_rows(seg, parallel, outer):
    """{id(product): the member after it} (`outer(member)`: the extent of its split
    loop) where a split matrix product is followed
    by a split element-wise kernel over its output's rows that reads that output
    element by element: each thread runs the kernel on the rows of its chunk
    right after computing them (no wait between the two; the rows are still in
    its cache). Not where the kernel's outputs may share bytes with the product's
    operands (another thread may still read them)."""
    if parallel is None:
        return {}
    steps = [st for st in seg.members if hasattr(st, "reads")]
    out = {}
    for gemm, kernel in zip(steps, steps[1:]):
        if id(gemm) in parallel.teams or parallel.split.get(id(gemm)) != blas.SPLIT_ROWS \
                or parallel.split.get(id(kernel)) != blas.SPLIT_ROWS \
                or gemm.eqns[0].primitive.name != "dot_general" or kernel.reductions \
                or id(gemm) in out.values():
            continue
        spec = blas.gemm_spec(gemm.eqns[0])
        product = gemm.outputs[0]
        if spec is None or spec.batch or min(spec.m, spec.n) < 2 \
                or not tuple(kernel.shape) == tuple(product.aval.shape) == (spec.m, spec.n) \
                or outer(gemm) != spec.m or outer(kernel) != spec.m:
            continue
        if any(a is product and m is not None for a, (_, m) in zip(kernel.inputs, kernel.reads)):
            continue              # read through a view: other rows
        if _may_overlap(seg, kernel.outputs, _arrays_read(gemm)):
            continue
        out[id(gemm)] = kernel
    return out


def product_teams(seg, split, chunks):
    """{id(first): (products...)}: runs of `chunks` consecutive members of `seg`,
    each a matrix product split by rows (`split`: see Parallel) that one thread
    computes whole with the bits of its split (blas.whole_gives_split_bits),
    about equal in work (within TEAM_BALANCE), none reading another's result
    or writing bytes another reads or writes: the backward pass's weight and
    input gradients of a layer. Each runs whole on one thread beside the
    others: the threads wait for each other once per team rather than once
    per product, and an OpenBLAS gemm packs its weight once instead of once
    per thread's rows (a lane product packs nothing)."""
    if chunks < 2:
        return {}
    steps = [st for st in seg.members if hasattr(st, "reads")]

    def work(step):
        if split.get(id(step)) != blas.SPLIT_ROWS or step.eqns[0].primitive.name != "dot_general":
            return None
        spec = blas.gemm_spec(step.eqns[0])
        dtype = step.outputs[0].aval.dtype
        if spec is None or spec.batch or not blas.whole_gives_split_bits(spec, dtype):
            return None
        return spec.m * spec.n * spec.k

    def reads(step):
        return [seg.aliases.get(a, a) for a in _arrays_read(step)]

    def apart(p, q):
        return not set(p.outputs) & set(reads(q)) and not set(q.outputs) & set(reads(p)) \
            and not _may_overlap(seg, q.outputs, reads(p) + p.outputs) \
            and not _may_overlap(seg, p.outputs, reads(q))

    teams, i = {}, 0
    while i + chunks <= len(steps):
        run = steps[i:i + chunks]
        works = [work(st) for st in run]
        if None not in works and max(works) <= TEAM_BALANCE * min(works) and all(
                apart(p, q) for j, p in enumerate(run) for q in run[j + 1:]):
            teams[id(run[0])] = tuple(run)
            i += chunks
        else:
            i += 1
    return teams


# a team's products differ in work by at most this factor (the threads wait for
# the longest)
TEAM_BALANCE = 1.25


def _may_overlap(seg, written, read):
    """Whether a Var of `written` may share bytes with one of `read` (both in the
    workspace and overlapping, or written not in the workspace at all: an output
    may be written in place of a donated input)."""
    def span(v):
        v = seg.aliases.get(v, v)
        start = seg.offsets.get(v)
        return None if start is None else (start, start + _nbytes(v.aval))
    spans = [span(a) for a in read if type(a) is Var]
    for v in written:
        w = span(v)
        if w is None or any(r is not None and r[0] < w[1] and w[0] < r[1] for r in spans):
            return True
    return False


def make_segment_caller(seg, entry, entry_name, prepare, inplace, address, parallel=None):
    """The Python side of a segment (`entry`: the engine's compiled entry): take
    the imported arrays (in `seg.imported` order), allocate the exported ones (or
    reuse a donated input: `inplace` maps an exported index to an imported
    index), run, return the exported arrays. `prepare(k, x, dtype, shape)` makes
    an odd input C-contiguous; `address(a)` is what a table slot holds for array
    a; `parallel`: the segment's `Parallel` plan, if any. The callable's `native`
    lets native code call the segment directly."""
    cfunc = entry.cfunc
    in_specs = [(v.aval.dtype, tuple(v.aval.shape)) for v in seg.imported]
    out_specs = [(tuple(v.aval.shape), v.aval.dtype) for v in seg.exported]
    n_in, n_out = len(in_specs), len(out_specs)
    ws_slot, err = n_in + n_out, n_in + n_out + 1
    workers = None
    if parallel is not None:
        from . import pool as worker_pool
        workers = (worker_pool.shared(parallel.chunks).address, worker_pool.run_address())
    pool = []            # (table, its address, workspace, aligned address): one per call

    def new_context():
        table = np.zeros(n_in + n_out + 2 + (parallel.slots if parallel else 0), np.int64)
        ws = np.empty(seg.workspace + ALIGN, np.uint8)
        base = ws.ctypes.data
        table[ws_slot] = base + (-base % ALIGN)
        if workers:
            table[err + Parallel.POOL], table[err + Parallel.RUN] = workers
            scratch = np.empty(parallel.scratch + ALIGN, np.uint8)
            base = scratch.ctypes.data
            table[err + Parallel.SCRATCH] = base + (-base % ALIGN)
            ws = (ws, scratch)
        return table, table.ctypes.data, ws

    pool.append(new_context())
    empty = outputs.allocator(out_specs, any(
        g.eqns[0].primitive.name in mpi.NAMES for g in seg.members if hasattr(g, "eqns")))
    ndarray, allocate = np.ndarray, outputs.allocate

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
        outs = allocate(out_specs, empty, xs, inplace, in_specs)
        for j, o in enumerate(outs):
            table[n_in + j] = address(o)
        cfunc(table_address)
        failed = table[err]
        table[err] = 0
        pool.append((table, table_address, ws))
        if failed:
            interrupts.raise_pending()
            raise ValueError("invalid entry in choice array")
        return outs

    run.__name__ = entry_name
    run.parallel = parallel
    run.native = None
    if not inplace:
        run.native = NativeEntry(entry.address, in_specs, n_out, err,
                                 lambda: (lambda ctx: (ctx[0], ctx[2]))(new_context()))
    return run


# ----------------------------------------------------------------------------
# Native loops

class BodyPlan:
    """A loop's body (or condition, or a cond branch) that is one all-native
    segment: the program (simplified), its kernel groups, and the segment (members
    as steps; None when the body only passes inputs through)."""
    __slots__ = ("body", "groups", "segment")

    def __init__(self, body, groups, segment):
        self.body, self.groups, self.segment = body, groups, segment


class LoopPlan:
    """A scan (parts: its body), a while loop (parts: condition, body) or a cond
    (parts: the branches) run natively."""
    __slots__ = ("kind", "parts")

    def __init__(self, kind, parts):
        self.kind, self.parts = kind, parts

    @property
    def constvars(self):
        """The parts' own constants, passed to the loop after the operands (then,
        when it `polls`, interrupts.STATE)."""
        return [v for part in self.parts for v in part.body.jaxpr.constvars]

    @property
    def polls(self):
        """Whether the loop looks for signals (a scan or while loop, not a cond)."""
        return self.kind != "cond"



class _LoopEmitter:
    """What emit_scan and emit_while share: the function, malloc'd scratch, and
    running one part (fill its table, call its segment, copy pass-through outputs)."""

    def __init__(self, ir, module, fname, eqn, plan):
        self.ir, self.module, self.plan, self.fname = ir, module, plan, fname
        ptr, self.i8, self.i64 = ir.PointerType(), ir.IntType(8), ir.IntType(64)
        self.ins = list(eqn.invars) + plan.constvars
        self.outs = list(eqn.outvars)
        polls = int(plan.polls)      # then interrupts.STATE follows the constants
        self.fn = ir.Function(module, ir.FunctionType(
            ir.IntType(1), [ptr] * (len(self.ins) + polls + len(self.outs))
            + [self.i64, self.i64]), fname + "_body")
        self.fn.linkage = "internal"
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))
        self.args = self.fn.args
        self.n_ops = len(eqn.invars)
        consts = self.args[self.n_ops:len(self.ins)]
        self.constants, k = [], 0          # per part: {its constvar: pointer}
        for part in plan.parts:
            n = len(part.body.jaxpr.constvars)
            self.constants.append(dict(zip(part.body.jaxpr.constvars, consts[k:k + n])))
            k += n
        self.poller = interrupts.Poller(ir, module, self.args[len(self.ins)]) if polls else None
        start = len(self.ins) + polls
        self.out_args = self.args[start:start + len(self.outs)]
        self.malloc = loops.declare(ir, module, "malloc", ptr, [self.i64])
        self.free = loops.declare(ir, module, "free", ir.VoidType(), [ptr])
        self.memcpy_fn = loops.declare(ir, module, "llvm.memcpy.p0.p0.i64", ir.VoidType(),
                                  [ptr, ptr, self.i64, ir.IntType(1)])
        self.tables = [self.b.alloca(self.i64, ir.Constant(self.i64, self._slots(part)),
                                     name=f"table{j}") if part.segment is not None else None
                       for j, part in enumerate(plan.parts)]

    @staticmethod
    def _slots(part):
        return len(part.segment.imported) + len(part.segment.exported) + 2

    @staticmethod
    def _workspace(part):
        return part.segment.workspace if part.segment is not None else 0

    def const(self, n):
        return self.ir.Constant(self.i64, n)

    def at(self, base, offset):
        return self.b.gep(base, [offset], inbounds=True, source_etype=self.i8)

    def memcpy(self, dst, src, n):
        if n:
            self.b.call(self.memcpy_fn, [dst, src, self.const(n),
                                         self.ir.Constant(self.ir.IntType(1), 0)])

    def scratch(self, sizes):
        """One malloc'd block: an aligned buffer per size, then each part's aligned
        workspace (written into its table). Returns (block, buffers)."""
        padded = [-(-n // ALIGN) * ALIGN for n in sizes]
        total = sum(padded) + sum(self._workspace(p) + ALIGN for p in self.plan.parts)
        block = self.b.call(self.malloc, [self.const(total + ALIGN)])
        buffers, offset = [], 0
        for n in padded:
            buffers.append(self.at(block, self.const(offset)))
            offset += n
        for part, table in zip(self.plan.parts, self.tables):
            if table is not None:
                base = self.b.ptrtoint(self.at(block, self.const(offset)), self.i64)
                aligned = self.b.and_(self.b.add(base, self.const(ALIGN - 1)),
                                      self.const(-ALIGN))
                self._put(table, self._slots(part) - 2, aligned)
            offset += self._workspace(part) + ALIGN
        return block, buffers

    def _put(self, table, k, value):
        b = self.b
        b.store(value if value.type == self.i64 else b.ptrtoint(value, self.i64),
                b.gep(table, [self.const(k)], inbounds=True, source_etype=self.i64))

    def open_chunks(self, failed):
        """Start a loop run in chunks, between which signals are looked for: branch
        into a `chunk` block whose error flag `err0` (a phi) starts at `failed`.
        Returns (block entered from, chunk, loop body block, chunk_done block, err0)."""
        b = self.b
        self.poller.start(b)
        pre = b.block
        chunk = self.fn.append_basic_block("chunk")
        loop = self.fn.append_basic_block("pair")
        looked = self.fn.append_basic_block("chunk_done")
        b.branch(chunk)
        b.position_at_end(chunk)
        err0 = b.phi(self.ir.IntType(1), name="err0")
        err0.add_incoming(failed, pre)
        return pre, chunk, loop, looked, err0

    def run_part(self, j, inputs, targets, sizes):
        """Run part j on pointers `inputs` (one per body input, constants excluded)
        writing `targets` (one per body output, `sizes` bytes each); returns its
        error flag (i1)."""
        b, part, table = self.b, self.plan.parts[j], self.tables[j]
        jaxpr, seg = part.body.jaxpr, part.segment
        source = dict(self.constants[j])
        source.update(zip(jaxpr.invars, inputs))
        first = {}
        for k, v in enumerate(jaxpr.outvars):
            first.setdefault(v, k)
        if seg is not None:
            for k, v in enumerate(seg.imported):
                self._put(table, k, source[v])
            for k, v in enumerate(seg.exported):
                self._put(table, len(seg.imported) + k, targets[first[v]])
            flag_slot = self._slots(part) - 1
            self._put(table, flag_slot, self.const(0))
            b.call(self.module.get_global(part_name(self.fname, j)), [table])
        # outputs the body passes through from an input, or repeats: copied
        for k, v in enumerate(jaxpr.outvars):
            src = source[v] if v in source else (targets[first[v]] if first[v] != k else None)
            if src is not None:
                self.memcpy(targets[k], src, sizes[k])
        if seg is None:
            return self.ir.Constant(self.ir.IntType(1), 0)
        flag = b.load(b.gep(table, [self.const(flag_slot)], inbounds=True,
                            source_etype=self.i64), typ=self.i64)
        return b.icmp_unsigned("!=", flag, self.const(0))


def part_name(fname, j):
    """The name of a loop kernel's j-th part's segment function."""
    return f"{fname}_seg{j}"


def emit_scan(ir, module, fname, eqn, plan):
    """`i1 fname_body(ptr inputs..., ptr state, ptr outputs..., i64, i64)` running
    the scan `eqn` natively: each iteration runs the body's segment on the consts,
    the current carry and row i of each xs, writing the next carry and row i of
    each ys. Carries alternate between the carry outputs and a scratch buffer so
    that the last iteration writes the outputs. Iteration 0 runs first, then the
    others in pairs (each pair in one loop turn, so which buffer each reads and
    writes is known when compiling), in chunks of pairs between which the loop
    looks for signals (`interrupts`); an odd one out runs last. Each runs the
    body's segment by a call (see `fused._emit_loop`)."""
    p = eqn.params
    n_consts, n_carry, length, reverse = (p["num_consts"], p["num_carry"], p["length"],
                                          p["reverse"])
    e = _LoopEmitter(ir, module, fname, eqn, plan)
    b, i64, args, n_ops = e.b, e.i64, e.args, e.n_ops
    i1 = ir.IntType(1)
    consts, inits, xs = (args[:n_consts], args[n_consts:n_consts + n_carry],
                         args[n_consts + n_carry:n_ops])
    carry_out, ys = e.out_args[:n_carry], e.out_args[n_carry:]
    carry_bytes = [_nbytes(v.aval) for v in e.outs[:n_carry]]
    x_rows = [_nbytes(v.aval) // max(length, 1) for v in eqn.invars[n_consts + n_carry:]]
    y_rows = [_nbytes(v.aval) // max(length, 1) for v in e.outs[n_carry:]]
    if length == 0:          # the carries come out as they went in; no rows
        for src, dst, n in zip(inits, carry_out, carry_bytes):
            e.memcpy(dst, src, n)
        b.ret(ir.Constant(i1, 0))
        return e.fn
    block, scratch = e.scratch(carry_bytes)

    def iteration(t, index, err):
        """Iteration t (an i64), of the parity of `index` (a Python int: t itself for
        the first and the last); returns the error flag so far."""
        final = (length - 1 - index) % 2 == 0
        row = b.sub(e.const(length - 1), t) if reverse else t
        # iteration t writes the outputs when (length - 1 - t) is even, else the scratch
        sources = inits if index == 0 else (scratch if final else carry_out)
        inputs = list(consts) + list(sources)
        inputs += [e.at(x, b.mul(row, e.const(n))) for x, n in zip(xs, x_rows)]
        targets = list(carry_out if final else scratch)
        targets += [e.at(y, b.mul(row, e.const(n))) for y, n in zip(ys, y_rows)]
        return b.or_(err, e.run_part(0, inputs, targets, carry_bytes + y_rows))

    failed = iteration(e.const(0), 0, ir.Constant(i1, 0))
    pairs = (length - 1) // 2
    if pairs:
        pre, chunk, loop, looked, err0 = e.open_chunks(failed)
        k0 = b.phi(i64, name="k0")
        k0.add_incoming(e.const(0), pre)
        end = b.add(k0, e.poller.stride(b))
        end = b.select(b.icmp_unsigned("<", end, e.const(pairs)), end, e.const(pairs))
        b.branch(loop)
        b.position_at_end(loop)
        k = b.phi(i64, name="k")                  # pair k: iterations 2k + 1 and 2k + 2
        k.add_incoming(k0, chunk)
        err = b.phi(i1, name="err")
        err.add_incoming(err0, chunk)
        t = b.add(b.mul(k, e.const(2)), e.const(1))
        failed = iteration(b.add(t, e.const(1)), 2, iteration(t, 1, err))
        nxt = b.add(k, e.const(1))
        k.add_incoming(nxt, b.block)
        err.add_incoming(failed, b.block)
        b.cbranch(b.icmp_unsigned("<", nxt, end), loop, looked)
        b.position_at_end(looked)
        failed = b.or_(failed, e.poller.check(b, e.fn))
        k0.add_incoming(nxt, b.block)
        err0.add_incoming(failed, b.block)
        go_on = e.fn.append_basic_block("pairs_done")
        # an error stops the loop (the call raises)
        b.cbranch(b.and_(b.icmp_unsigned("<", nxt, e.const(pairs)), b.not_(failed)), chunk,
                  go_on)
        b.position_at_end(go_on)
    if (length - 1) % 2:
        failed = iteration(e.const(length - 1), length - 1, failed)
    b.call(e.free, [block])
    b.ret(failed)
    return e.fn


def emit_while(ir, module, fname, eqn, plan):
    """`i1 fname_body(...)` running the while loop `eqn` natively: the condition's
    segment writes a bool; while it is true the body's segment maps the current
    carry to the other of two buffers (the outputs and a scratch). At the end the
    carry is copied to the outputs unless it is already there. The first turn
    reads the inputs; the others run in pairs (outputs to scratch, scratch to
    outputs: known when compiling), in chunks of pairs between which the loop
    looks for signals (`interrupts`)."""
    p = eqn.params
    n_cc, n_bc = p["cond_nconsts"], p["body_nconsts"]
    e = _LoopEmitter(ir, module, fname, eqn, plan)
    b, i64, args = e.b, e.i64, e.args
    i1 = ir.IntType(1)
    cond_consts, body_consts = args[:n_cc], args[n_cc:n_cc + n_bc]
    inits = args[n_cc + n_bc:e.n_ops]
    carry_out = e.out_args
    carry_bytes = [_nbytes(v.aval) for v in e.outs]
    block, buffers = e.scratch(carry_bytes + [1])
    scratch, pred = buffers[:-1], buffers[-1]
    done = e.fn.append_basic_block("done")
    exits = []          # (block, where the carry is: 0 inputs, 1 outputs, 2 scratch, error)
    where = {0: inits, 1: carry_out, 2: scratch}

    def turn(state, err):
        """Test the condition on the carry in `where[state]` (leaving for `done` when
        it is false or an error is set), then run the body into the other buffer;
        returns the error flag so far."""
        current = where[state]
        cond_failed = b.or_(err, e.run_part(0, list(cond_consts) + list(current), [pred], [1]))
        go = b.icmp_unsigned("!=", b.load(pred, typ=e.i8), ir.Constant(e.i8, 0))
        step = e.fn.append_basic_block("step")
        exits.append((b.block, state, cond_failed))
        b.cbranch(b.and_(go, b.not_(cond_failed)), step, done)
        b.position_at_end(step)
        targets = scratch if state == 1 else carry_out
        return b.or_(cond_failed, e.run_part(1, list(body_consts) + list(current), targets,
                                             carry_bytes))

    failed = turn(0, ir.Constant(i1, 0))
    # (when a handler raised, err0 is set and the next test ends the loop)
    _, chunk, loop, looked, err0 = e.open_chunks(failed)
    stride = e.poller.stride(b)
    b.branch(loop)
    b.position_at_end(loop)
    left = b.phi(i64, name="left")     # pairs left in this chunk
    left.add_incoming(stride, chunk)
    err = b.phi(i1, name="err")
    err.add_incoming(err0, chunk)
    failed = turn(2, turn(1, err))
    left_now = b.sub(left, e.const(1))
    left.add_incoming(left_now, b.block)
    err.add_incoming(failed, b.block)
    b.cbranch(b.icmp_unsigned("!=", left_now, e.const(0)), loop, looked)
    b.position_at_end(looked)
    failed = b.or_(failed, e.poller.check(b, e.fn))
    err0.add_incoming(failed, b.block)
    b.branch(chunk)
    b.position_at_end(done)
    state = b.phi(i64, name="state")
    cond_failed = b.phi(i1, name="failed")
    for block_, where_, flag in exits:
        state.add_incoming(e.const(where_), block_)
        cond_failed.add_incoming(flag, block_)
    in_outputs = b.icmp_unsigned("==", state, e.const(1))
    current = [b.select(b.icmp_unsigned("==", state, e.const(0)), init, tmp)
               for init, tmp in zip(inits, scratch)]
    for out, cur, n in zip(carry_out, current, carry_bytes):
        copy = e.fn.append_basic_block("copy")
        after = e.fn.append_basic_block("copied")
        b.cbranch(in_outputs, after, copy)
        b.position_at_end(copy)
        e.memcpy(out, cur, n)
        b.branch(after)
        b.position_at_end(after)
    b.call(e.free, [block])
    b.ret(cond_failed)
    return e.fn


def emit_cond(ir, module, fname, eqn, plan):
    """`i1 fname_body(...)` running a cond natively: the index (clamped into range,
    as the impl does) picks the branch whose segment writes the outputs."""
    e = _LoopEmitter(ir, module, fname, eqn, plan)
    b, i64 = e.b, e.i64
    index_aval = eqn.invars[0].aval
    bits = 8 * np.dtype(index_aval.dtype).itemsize
    raw = b.load(e.args[0], typ=ir.IntType(bits))
    unsigned = index_aval.dtype.kind in "bu"
    index = raw if bits == 64 else (b.zext(raw, i64) if unsigned else b.sext(raw, i64))
    last = e.const(len(plan.parts) - 1)
    if unsigned:
        index = b.select(b.icmp_unsigned(">", index, last), last, index)
    else:
        index = b.select(b.icmp_signed("<", index, e.const(0)), e.const(0), index)
        index = b.select(b.icmp_signed(">", index, last), last, index)
    block, _ = e.scratch([])
    operands = list(e.args[1:e.n_ops])
    sizes = [_nbytes(v.aval) for v in e.outs]
    join = e.fn.append_basic_block("join")
    cases = [e.fn.append_basic_block(f"branch{j}") for j in range(len(plan.parts))]
    switch = b.switch(index, cases[-1])
    for j, case in enumerate(cases[:-1]):
        switch.add_case(e.const(j), case)
    flags = []
    for j, case in enumerate(cases):
        b.position_at_end(case)
        flags.append((e.run_part(j, operands, list(e.out_args), sizes), b.block))
        b.branch(join)
    b.position_at_end(join)
    failed = b.phi(ir.IntType(1), name="failed")
    for flag, block_j in flags:
        failed.add_incoming(flag, block_j)
    b.call(e.free, [block])
    b.ret(failed)
    return e.fn
