"""A short GIL switch interval while a background compile runs.

A thread compiling sin and cos's shared code (`mathlib_runtime.prefetch`)
gives up the GIL at every call into LLVM and every file operation, and while
the calling thread runs Python (simplifying, planning, emitting the program)
it waits CPython's switch interval (5 ms by default) to get it back each time:
on a cold start it took 80 ms of wall time for 50 ms of work. `short()` sets
the interval to at most `INTERVAL` while any such thread runs and restores
the previous value when the last one ends (a process-wide setting: one
changed meanwhile by someone else is left as they set it).
"""
import contextlib
import sys
import threading

__all__ = ["short", "compile_in_background", "INTERVAL"]

INTERVAL = 0.0005     # seconds
_lock = threading.Lock()
_active = []          # (the interval before, the one set) while threads are inside short()


@contextlib.contextmanager
def short():
    """Run the body with the switch interval at most `INTERVAL`."""
    with _lock:
        if not _active:
            before = sys.getswitchinterval()
            if before > INTERVAL:
                sys.setswitchinterval(INTERVAL)
            _active.append((before, sys.getswitchinterval()))   # (as read back: rounded)
        else:
            _active.append(_active[0])
    try:
        yield
    finally:
        with _lock:
            before, now = _active.pop()
            if not _active and now != before and sys.getswitchinterval() == now:
                sys.setswitchinterval(before)


def compile_in_background(load, items, name):
    """load(key, text) for each (key, IR text) of `items` on a new thread named
    `name`, under `short()`. A failure is dropped: the program that needs the
    code loads it again on its own thread, and raises there."""
    def run():
        with short():
            for key, text in items:
                try:
                    load(key, text)
                except Exception:   # noqa: BLE001 -- reported by the program's own load
                    pass
    threading.Thread(target=run, name=name).start()
