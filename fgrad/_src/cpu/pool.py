"""Native worker threads for the parallel parts of a segment.

Handing a chunk of work to a Python thread costs about 150 us here, mostly
the operating system waking it, so small programs (an SGD step at batch 1
makes five 1-2 MB passes of 15-45 us each) could not use the second core.
These workers wait in native code instead: a worker spins on its slot for
about `SPIN_CYCLES` after its last job (so back-to-back calls find it awake),
after the first 20 us yielding its CPU at every turn to any other thread that
wants it (OpenBLAS's for instance: a 0.5 ms sgemm took 0.8 ms beside a worker
spinning without yielding), and then sleeps on a futex.

A job is a function `void work(i64* table, i64 thread)`; `fgrad_pool_run`
posts it to every worker (thread 1, 2, ..., waking those asleep: that costs
the caller a system call, and a small job then runs before the worker is up,
but a second call finds it spinning), runs it on the calling thread (thread
0) and returns when no worker is still inside it. Work is shared by
claiming, not by thread number (see `program.emit_segment`): the calling
thread alone can finish a job, so a job a worker has not started yet is
simply taken back, and a late worker never makes the caller wait. When
another thread is using the pool, the job runs on the calling thread alone.

Memory (int64 words): a header line [busy, workers], then one 128-byte slot
per worker: flag (i32: IDLE, POSTED, RUNNING, STOP), sleeping (i32), work,
table, thread number, jobs run. Each Pool's worker threads are Python
threads parked in a ctypes call (which releases the GIL) and hold the Pool,
so its memory outlives them.

x86-64 Linux only (futex system call number, the pause instruction); elsewhere
`shared()` is None and segments run on one thread.
"""
import ctypes
import os
import platform
import sys
import threading

import numpy as np

from . import loops

IDLE, POSTED, RUNNING, STOP = 0, 1, 2, 3
SLOT = 128                     # bytes per worker slot (two cache lines)
SPIN_CYCLES = 1 << 20          # about 0.3 ms of spinning after a job
EAGER_CYCLES = 1 << 16         # spin-waits yield the CPU after about 20 us
_FUTEX, _WAIT, _WAKE = 202, 0 | 128, 1 | 128     # SYS_futex; FUTEX_*_PRIVATE

_FUNCTIONS = []                # [(worker address, run address, module)]
_shared = []                   # [Pool] once made


def supported():
    """Whether native workers run here (x86-64 Linux)."""
    return sys.platform.startswith("linux") and platform.machine() == "x86_64"


def _emit():
    from llvmlite import ir
    i32, i64, ptr = ir.IntType(32), ir.IntType(64), ir.PointerType()
    module = ir.Module(name="fgrad_pool")
    syscall = ir.Function(module, ir.FunctionType(i64, [i64], var_arg=True), "syscall")
    clock = _clock(ir, module)
    work_t = ir.FunctionType(ir.VoidType(), [ptr, i64]).as_pointer()

    def c32(v):
        return ir.Constant(i32, v)

    def c64(v):
        return ir.Constant(i64, v)

    def field(b, base, offset):
        return b.gep(base, [c64(offset)], inbounds=True, source_etype=ir.IntType(8))

    def swap(b, p, old, new):
        """compare-and-swap an i32; whether it happened."""
        pair = b.cmpxchg(p, c32(old), c32(new), "seq_cst", "seq_cst")
        return b.extract_value(pair, 1)

    # void fgrad_pool_worker(ptr slot): serve jobs until the flag says STOP
    worker = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr]), "fgrad_pool_worker")
    slot = worker.args[0]
    blocks = {n: worker.append_basic_block(n) for n in
              ("entry", "poll", "posted", "run", "other", "spin", "sleep", "nap", "woke", "out")}
    b = ir.IRBuilder(blocks["entry"])
    flag, sleeping = slot, field(b, slot, 4)
    deadline = b.alloca(i64)
    b.store(b.add(b.call(clock, []), c64(SPIN_CYCLES)), deadline)
    b.branch(blocks["poll"])
    b.position_at_end(blocks["poll"])
    state = b.load_atomic(flag, "acquire", 4, typ=i32)
    b.cbranch(b.icmp_unsigned("==", state, c32(POSTED)), blocks["posted"], blocks["other"])
    b.position_at_end(blocks["posted"])
    b.cbranch(swap(b, flag, POSTED, RUNNING), blocks["run"], blocks["poll"])
    b.position_at_end(blocks["run"])
    work = b.inttoptr(b.load(field(b, slot, 8), typ=i64), work_t)
    table = b.load(field(b, slot, 16), typ=ptr)
    b.call(work, [table, b.load(field(b, slot, 24), typ=i64)])
    jobs = field(b, slot, 32)
    b.store(b.add(b.load(jobs, typ=i64), c64(1)), jobs)
    b.atomic_rmw("xchg", flag, c32(IDLE), "release")
    b.store(b.add(b.call(clock, []), c64(SPIN_CYCLES)), deadline)
    b.branch(blocks["poll"])
    b.position_at_end(blocks["other"])
    b.cbranch(b.icmp_unsigned("==", state, c32(STOP)), blocks["out"], blocks["spin"])
    b.position_at_end(blocks["spin"])
    emit_wait(ir, module, b, b.sub(b.load(deadline, typ=i64), c64(SPIN_CYCLES)))
    late = b.icmp_unsigned(">", b.call(clock, []), b.load(deadline, typ=i64))
    b.cbranch(late, blocks["sleep"], blocks["poll"])
    b.position_at_end(blocks["sleep"])       # announce the nap, then look once more
    b.atomic_rmw("xchg", sleeping, c32(1), "seq_cst")
    idle = b.icmp_unsigned("==", b.load_atomic(flag, "seq_cst", 4, typ=i32), c32(IDLE))
    b.cbranch(idle, blocks["nap"], blocks["woke"])
    b.position_at_end(blocks["nap"])
    b.call(syscall, [c64(_FUTEX), flag, c64(_WAIT), c32(IDLE), ir.Constant(ptr, None)])
    b.branch(blocks["woke"])
    b.position_at_end(blocks["woke"])
    b.atomic_rmw("xchg", sleeping, c32(0), "seq_cst")
    b.store(b.add(b.call(clock, []), c64(SPIN_CYCLES)), deadline)
    b.branch(blocks["poll"])
    b.position_at_end(blocks["out"])
    b.ret_void()

    # void fgrad_pool_run(ptr pool, ptr work, ptr table)
    run = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr, ptr, ptr]), "fgrad_pool_run")
    pool, raw_work, table = run.args
    entry = run.append_basic_block("entry")
    alone = run.append_basic_block("alone")
    shared = run.append_basic_block("shared")
    b = ir.IRBuilder(entry)
    work = b.inttoptr(b.ptrtoint(raw_work, i64), work_t)
    taken = b.extract_value(b.cmpxchg(pool, c64(0), c64(1), "acquire", "monotonic"), 1)
    b.cbranch(taken, shared, alone)
    b.position_at_end(alone)
    b.call(work, [table, c64(0)])
    b.ret_void()
    b.position_at_end(shared)
    workers = b.load(field(b, pool, 8), typ=i64)

    def each_worker(body):
        before = b.block
        head, done = run.append_basic_block("w"), run.append_basic_block("w_done")
        b.cbranch(b.icmp_signed(">", workers, c64(0)), head, done)
        b.position_at_end(head)
        w = b.phi(i64)
        w.add_incoming(c64(0), before)
        body(b.gep(pool, [b.add(c64(SLOT), b.mul(w, c64(SLOT)))], inbounds=True,
                   source_etype=ir.IntType(8)), w)
        nxt = b.add(w, c64(1))
        w.add_incoming(nxt, b.block)
        b.cbranch(b.icmp_signed("<", nxt, workers), head, done)
        b.position_at_end(done)

    def post(s, w):
        b.store(raw_work, field(b, s, 8))
        b.store(table, field(b, s, 16))
        b.store(b.add(w, c64(1)), field(b, s, 24))
        b.atomic_rmw("xchg", s, c32(POSTED), "seq_cst")
        asleep = b.icmp_unsigned("!=", b.load_atomic(field(b, s, 4), "seq_cst", 4, typ=i32),
                                 c32(0))
        with b.if_then(asleep, likely=False):
            b.call(syscall, [c64(_FUTEX), s, c64(_WAKE), c32(1)])

    def collect(s, _):
        """take the job back if the worker has not started it, else wait for it"""
        with b.if_then(b.not_(swap(b, s, POSTED, IDLE))):
            wait = run.append_basic_block("wait")
            done = run.append_basic_block("waited")
            b.branch(wait)
            b.position_at_end(wait)
            b.call(_pause(ir, module), [])
            busy = b.icmp_unsigned("!=", b.load_atomic(s, "acquire", 4, typ=i32), c32(IDLE))
            b.cbranch(busy, wait, done)
            b.position_at_end(done)

    each_worker(post)
    b.call(work, [table, c64(0)])
    each_worker(collect)
    b.atomic_rmw("xchg", pool, c64(0), "release")
    b.ret_void()
    return str(module)


def emit_wait(ir, module, b, since):
    """One turn of a spin-wait that began at cycle `since`: the x86 `pause` hint,
    and after EAGER_CYCLES also sched_yield, so that another thread that wants
    this CPU gets it (a yield costs about a microsecond of reaction time, which
    short waits, the common ones, do not pay)."""
    i64 = ir.IntType(64)
    b.call(_pause(ir, module), [])
    waited = b.sub(b.call(_clock(ir, module), []), since)
    with b.if_then(b.icmp_unsigned(">", waited, ir.Constant(i64, EAGER_CYCLES))):
        b.call(loops.declare(ir, module, "sched_yield", ir.IntType(32), []), [])


def emit_clock(ir, module, b):
    """The CPU's cycle counter now (for emit_wait's `since`)."""
    return b.call(_clock(ir, module), [])


def _pause(ir, module):
    return loops.declare(ir, module, "llvm.x86.sse2.pause", ir.VoidType(), [])


def _clock(ir, module):
    return loops.declare(ir, module, "llvm.readcyclecounter", ir.IntType(64), [])


def _functions():
    """(worker address, run address), compiled once per process."""
    if not _FUNCTIONS:
        from . import engine
        module = engine.compile_runtime("pool", ["fgrad_pool_worker", "fgrad_pool_run"], _emit)
        _FUNCTIONS.append((module.address("fgrad_pool_worker"),
                           module.address("fgrad_pool_run"), module))
    return _FUNCTIONS[0][:2]


def run_address():
    """Address of `void fgrad_pool_run(ptr pool, ptr work, ptr table)`."""
    return _functions()[1]


class Pool:
    """`workers` native worker threads and the memory they wait on."""

    def __init__(self, workers):
        self.workers = workers
        self._memory = np.zeros((SLOT * (workers + 2)) // 8, np.int64)
        base = self._memory.ctypes.data
        self.address = base + (-base % SLOT)
        self._words = self._at(0, ctypes.c_int64 * 2)
        self._words[1] = workers
        self._serve = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(_functions()[0])
        self._threads = []
        self._start()

    def _at(self, offset, ctype):
        return ctype.from_address(self.address + offset)

    def _flag(self, w):
        return self._at(SLOT * (w + 1), ctypes.c_int32)

    def _start(self):
        """Start the worker threads; as many as the system allows (with none,
        every job runs on its caller alone)."""
        self._words[0] = 0
        for w in range(self.workers):
            ctypes.memset(self.address + SLOT * (w + 1), 0, SLOT)
        self._threads = []
        for w in range(self.workers):
            t = threading.Thread(target=self._serve_slot, args=(w,), daemon=True,
                                 name=f"fgrad-worker-{w}")
            try:
                t.start()
            except RuntimeError:        # "can't start new thread"
                break
            self._threads.append(t)
        self.workers = self._words[1] = len(self._threads)

    def _serve_slot(self, w):
        self._serve(self.address + SLOT * (w + 1))    # self (the memory) lives meanwhile

    def jobs_run(self):
        """How many jobs the workers have run (they count their own)."""
        return sum(self._at(SLOT * (w + 1) + 32, ctypes.c_int64).value
                   for w in range(self.workers))

    def close(self):
        """Stop the workers (for tests; the shared pool lives as long as the process)."""
        libc = ctypes.CDLL(None, use_errno=True)
        for w in range(self.workers):
            self._flag(w).value = STOP
            libc.syscall(ctypes.c_long(_FUTEX), ctypes.c_void_p(self.address + SLOT * (w + 1)),
                         ctypes.c_long(_WAKE), ctypes.c_int(1))
        for t in self._threads:
            t.join()

    def _after_fork(self):
        """A forked child has none of its parent's threads: start its own."""
        self._start()


def shared(threads):
    """The process's pool for `threads` threads in all (workers: threads - 1, and
    no more than the other CPUs this process may use), made on first use; None
    when native workers are unsupported here or threads < 2. (Jobs do not
    depend on the number of workers: any thread may claim any chunk.)"""
    if threads < 2 or not supported():
        return None
    if not _shared:
        pool = Pool(max(1, min(threads, len(os.sched_getaffinity(0))) - 1))
        _shared.append(pool)
        os.register_at_fork(after_in_child=pool._after_fork)
    return _shared[0]
