"""Ctrl-C (and any other signal with a Python handler) during a long native loop.

A native call runs with the GIL released, and Python handles a signal only
between bytecodes, so a 5 s `fori_loop` would hear Ctrl-C only when it
returns. Instead, native scan and while loops look about every `INTERVAL`
cycles (a few milliseconds) whether a signal came:

- CPython's own signal handler writes a byte to the *wakeup fd*
  (`signal.set_wakeup_fd`); `arm()` sets one (a non-blocking pipe) when none
  is set, or else watches the one that is (then it never drains it). Looking
  costs a `poll` system call with a zero timeout; nothing else is shared
  with the signal handler.
- When the fd has data and the loop runs on the main thread (the only one
  that runs Python's signal handlers), the loop drains the pipe, takes the
  GIL and calls `PyErr_CheckSignals`, which runs the handlers. If one raised
  (KeyboardInterrupt from Ctrl-C), the exception is fetched into `STATE` and
  the loop stops, reporting an error as a bad selector would; the Python
  side of the call then raises that exception (`raise_pending`). A handler
  that returns lets the loop go on.
- A loop run by the native dispatcher (`dispatch`, which holds the GIL) runs
  no handler (one could call the same function, whose tables are in use): it
  stops, the dispatcher hands the call to the Python path, where Python runs
  the handlers; if none raises, that path runs the call again. Such a loop
  reads `HELD_STATE` (the same, with HELD set) instead of `STATE`.

The loop reads the clock only every `stride` iterations, a stride that grows
while iterations are quick and shrinks when they are slow, so a loop of 2 ns
iterations pays a counter decrement per iteration, and one of 100 ms
iterations still looks after each. `STATE` reaches the loop as one more
constant input (see jit.executable), so no address is compiled into the code.

Signals are not noticed this way when the wakeup fd was replaced after `arm()`
(by asyncio's `add_signal_handler`, say), nor in loops that run on other
threads (signals are the main thread's business there too); the call then
raises once it returns, as before.
"""
import ctypes
import os
import platform
import signal
import threading
import time

import numpy as np

from . import loops

INTERVAL = 1 << 24               # clock ticks between looks (about 6 ms at 3 GHz; 17 ms)
_MAX_STRIDE = 1 << 30
FD, MAIN, OURS, EXC_TYPE, EXC_VALUE, EXC_TB, HELD = range(7)

# [wakeup fd to poll (-1: none), main thread id, 1 if the fd is our pipe (drained),
#  fetched exception type, value, traceback (owned references, or 0), 1 if the
#  loop runs with the GIL held]
STATE = np.zeros(8, np.int64)
STATE[FD] = -1
HELD_STATE = STATE.copy()
HELD_STATE[HELD] = 1


def _watch(fd, ours, main):
    for state in (STATE, HELD_STATE):
        state[FD], state[OURS], state[MAIN] = fd, ours, main
_pipe = []                       # [(read fd, write fd)] of our wakeup pipe


def arm():
    """Make native loops notice signals (see the module docstring). Only the main
    thread may set the wakeup fd: elsewhere this does nothing (the next compile on
    the main thread arms)."""
    if STATE[FD] >= 0 or threading.current_thread() is not threading.main_thread():
        return
    r, w = os.pipe()             # not inherited by exec'd children (Python's default)
    os.set_blocking(r, False)
    os.set_blocking(w, False)
    try:
        old = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    except (ValueError, OSError):
        os.close(r)
        os.close(w)
        return
    main = threading.main_thread().ident
    if old != -1:                # someone else's: watch theirs, leave it as it was
        signal.set_wakeup_fd(old)
        os.close(r)
        os.close(w)
        _watch(old, 0, main)
    else:
        _pipe.append((r, w))
        _watch(r, 1, main)


def _after_fork_in_child():
    """A child gets a pipe of its own (its signals must not wake the parent's loops)."""
    _watch(-1, 0, 0)
    STATE[EXC_TYPE:EXC_TB + 1] = 0
    if _pipe:
        try:
            signal.set_wakeup_fd(-1)
        except ValueError:       # not the main thread: CPython keeps writing to the pipe
            return
        for fd in _pipe.pop():
            os.close(fd)
    arm()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


_restore = ctypes.pythonapi.PyErr_Restore
_restore.argtypes = [ctypes.c_void_p] * 3
_restore.restype = None


def raise_pending():
    """Raise the exception a native loop stopped for, if any (on the main thread).
    Called where a native call reports an error."""
    if STATE[EXC_TYPE] and threading.get_ident() == STATE[MAIN]:
        t, v, tb = (int(x) for x in STATE[EXC_TYPE:EXC_TB + 1])
        STATE[EXC_TYPE:EXC_TB + 1] = 0
        _restore(t, v or None, tb or None)     # steals the references; ctypes raises


# ----------------------------------------------------------------------------
# Native side

POLL = "fgrad_poll_signals"
_runtime = []       # the CompiledModule defining POLL, once loaded


def resolve(name):
    """`engine`'s resolver for POLL: its code is compiled once (`compile_runtime`)
    and shared by every loop that calls it, not compiled again in each program."""
    if name != POLL:
        return False
    from . import engine
    from .compiler_lock import lock
    with lock:
        if not _runtime:
            module = engine.compile_runtime("poll signals", [POLL], _emit_runtime, export=True)
            engine.add_symbol(POLL, module.address(POLL))
            _runtime.append(module)
    return True


def _emit_runtime():
    from llvmlite import ir
    module = ir.Module(name=POLL)
    _define_poll(ir, module, _declare_poll(ir, module))
    return str(module)


def _poll_attributes(ir):
    class Attributes(ir.values.FunctionAttributes):
        """noinline cold, and: the call touches only `state` (and memory nobody else
        sees). Not so for the Python handlers it may run, but what they could see
        (a loop's carry, half done) means nothing to them; with this, the loop
        keeps its carry in registers, as it does without the call."""

        def __bool__(self):
            return True

        def _to_list(self, ret_type):
            return super()._to_list(ret_type) + ["memory(argmem: readwrite, "
                                                 "inaccessiblemem: readwrite)"]
    attributes = Attributes()
    attributes.add("noinline")
    attributes.add("cold")
    attributes.add("nounwind")
    return attributes


def _declare_poll(ir, module):
    """`i1 fgrad_poll_signals(ptr state)`, declared once per module (its code is the
    shared runtime's, see `resolve`): true when a signal handler raised (its
    exception fetched into state)."""
    fn = module.globals.get(POLL)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ir.IntType(1), [ir.PointerType()]), POLL)
        fn.attributes = _poll_attributes(ir)
    return fn


def _define_poll(ir, module, fn):
    i1, i8, i32, i64, ptr = (ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64),
                             ir.PointerType())
    state = fn.args[0]
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    no = fn.append_basic_block("no")
    b_ = {n: fn.append_basic_block(n) for n in ("main", "look", "drain", "check", "raised")}

    def word(k):
        return b.load(b.gep(state, [ir.Constant(i64, k)], inbounds=True, source_etype=i64),
                      typ=i64)

    def at(k):
        return b.gep(state, [ir.Constant(i64, k)], inbounds=True, source_etype=i64)

    fd = word(FD)
    b.cbranch(b.icmp_signed("<", fd, ir.Constant(i64, 0)), no, b_["main"])
    b.position_at_end(b_["main"])
    self_id = b.call(loops.declare(ir, module, "pthread_self", i64, []), [])
    b.cbranch(b.icmp_unsigned("==", self_id, word(MAIN)), b_["look"], no)
    b.position_at_end(b_["look"])
    # struct pollfd {int fd; short events = POLLIN, revents = 0} (x86-64: little-endian)
    pollfd = b.alloca(i64)
    b.store(b.or_(b.and_(fd, ir.Constant(i64, 0xFFFFFFFF)), ir.Constant(i64, 1 << 32)), pollfd)
    poll = loops.declare(ir, module, "poll", i32, [ptr, i64, i32])
    ready = b.call(poll, [pollfd, ir.Constant(i64, 1), ir.Constant(i32, 0)])
    drains = b.icmp_unsigned("!=", word(OURS), ir.Constant(i64, 0))
    b.cbranch(b.icmp_signed(">", ready, ir.Constant(i32, 0)), b_["drain"], no)
    b.position_at_end(b_["drain"])           # empty our pipe first: a later signal refills it
    buf = b.alloca(i8, ir.Constant(i64, 256))
    read = loops.declare(ir, module, "read", i64, [i32, ptr, i64])
    again = fn.append_basic_block("again")
    b.cbranch(drains, again, b_["check"])
    b.position_at_end(again)
    got = b.call(read, [b.trunc(fd, i32), buf, ir.Constant(i64, 256)])
    b.cbranch(b.icmp_signed(">", got, ir.Constant(i64, 0)), again, b_["check"])
    b.position_at_end(b_["check"])
    # called with the GIL held (cpu.dispatch runs the kernel so): stop without
    # running handlers, which could call back into this very function's tables;
    # the dispatcher's caller takes the Python path, where Python runs them
    handle = fn.append_basic_block("handle")
    stop = fn.append_basic_block("stop")
    b.cbranch(b.icmp_unsigned("!=", word(HELD), ir.Constant(i64, 0)), stop, handle)
    b.position_at_end(stop)
    b.ret(ir.Constant(i1, 1))
    b.position_at_end(handle)
    ensure = loops.declare(ir, module, "PyGILState_Ensure", i32, [])
    release = loops.declare(ir, module, "PyGILState_Release", ir.VoidType(), [i32])
    check = loops.declare(ir, module, "PyErr_CheckSignals", i32, [])
    fetch = loops.declare(ir, module, "PyErr_Fetch", ir.VoidType(), [ptr, ptr, ptr])
    gil = b.call(ensure, [])
    failed = b.icmp_signed("!=", b.call(check, []), ir.Constant(i32, 0))
    done = fn.append_basic_block("done")
    b.cbranch(failed, b_["raised"], done)
    b.position_at_end(b_["raised"])
    b.call(fetch, [at(EXC_TYPE), at(EXC_VALUE), at(EXC_TB)])
    b.branch(done)
    b.position_at_end(done)
    b.call(release, [gil])
    b.ret(failed)
    b.position_at_end(no)
    b.ret(ir.Constant(i1, 0))


class Poller:
    """Emits a loop's looks for signals. The loop runs in chunks of `stride(b)`
    iterations (no call inside a chunk, so its carry may stay in registers);
    `start(b)` goes before the loop, `check(b, fn)` after each chunk: an i1, stop
    (a handler raised)."""

    def __init__(self, ir, module, state):
        self.ir, self.module, self.state = ir, module, state
        self.i64 = ir.IntType(64)

    def _clock(self, b):
        """x86-64: the cycle counter; elsewhere (where reading it may trap)
        clock_gettime's nanoseconds."""
        ir, i64 = self.ir, self.i64
        if self._ts is None:
            return b.call(loops.declare(ir, self.module, "llvm.readcyclecounter", i64, []), [])
        ts = self._ts
        b.call(loops.declare(ir, self.module, "clock_gettime", ir.IntType(32),
                             [ir.IntType(32), ir.PointerType()]),
               [ir.Constant(ir.IntType(32), time.CLOCK_MONOTONIC), ts])
        sec = b.load(b.gep(ts, [self._const(0), self._const(0)], inbounds=True), typ=i64)
        nsec = b.load(b.gep(ts, [self._const(0), self._const(1)], inbounds=True), typ=i64)
        return b.add(b.mul(sec, self._const(1_000_000_000)), nsec)

    def _const(self, v):
        return self.ir.Constant(self.i64, v)

    def start(self, b):
        i64, c = self.i64, self._const
        self._stride, self._last, self._due = (b.alloca(i64) for _ in range(3))
        self._ts = (None if platform.machine().lower() in ("x86_64", "amd64")
                    else b.alloca(self.ir.ArrayType(i64, 2)))      # struct timespec
        now = self._clock(b)
        b.store(c(1), self._stride)
        b.store(now, self._last)
        b.store(b.add(now, c(INTERVAL)), self._due)

    def stride(self, b):
        """The number of iterations of the next chunk."""
        return b.load(self._stride, typ=self.i64)

    def check(self, b, fn):
        ir, i64, c = self.ir, self.i64, self._const
        i1 = ir.IntType(1)
        now = self._clock(b)            # the chunk took `span` cycles: adapt the stride
        span = b.sub(now, b.load(self._last, typ=i64))
        b.store(now, self._last)
        stride = b.load(self._stride, typ=i64)
        quick = b.and_(b.icmp_unsigned("<", span, c(INTERVAL // 8)),
                       b.icmp_unsigned("<", stride, c(_MAX_STRIDE)))
        slow = b.and_(b.icmp_unsigned(">", span, c(INTERVAL // 2)),
                      b.icmp_unsigned(">", stride, c(1)))
        stride = b.select(quick, b.shl(stride, c(1)),
                          b.select(slow, b.lshr(stride, c(1)), stride))
        b.store(stride, self._stride)
        here = b.block
        look = fn.append_basic_block("look")
        after = fn.append_basic_block("looked")
        b.cbranch(b.icmp_unsigned(">=", now, b.load(self._due, typ=i64)), look, after)
        b.position_at_end(look)
        b.store(b.add(now, c(INTERVAL)), self._due)
        raised = b.call(_declare_poll(ir, self.module), [self.state])
        looked = b.block
        b.branch(after)
        b.position_at_end(after)
        stop = b.phi(i1, name="interrupted")
        stop.add_incoming(ir.Constant(i1, 0), here)
        stop.add_incoming(raised, looked)
        return stop
