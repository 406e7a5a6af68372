"""The CPU backend's lock, held across fork().

LLVM's global state and pass pipelines are not thread-safe, so every use of
LLVM holds `lock` (see `engine`); so does the first import of the compiler
modules (`jit.executable._backend`), which takes a while. fork() copies a
process with only the forking thread, so a lock another thread held at that
moment (ours, llvmlite's own lock around each LLVM call, which a garbage
collected LLVM object takes too, or Python's lock on a module being imported)
stays held in the child forever, and the child hangs at its first compile.
Hence fork() takes `lock` and llvmlite's lock first: it waits while another
thread compiles (tens of milliseconds; seconds for a very large program),
and the child starts with neither held.

Importing this module is cheap (fgrad imports it at start-up, so the hooks
are in place before any compile).
"""
import os
import sys
import threading

__all__ = ["lock"]

lock = threading.RLock()
_held = []      # llvmlite's lock, while a fork() holds it


def _llvmlite_lock():
    """llvmlite's lock around every call into LLVM (a context manager), or None
    when llvmlite.binding is not loaded (or keeps no such lock)."""
    ffi = sys.modules.get("llvmlite.binding.ffi")
    return getattr(getattr(ffi, "lib", None), "_lock", None)


def _before_fork():
    lock.acquire()
    llvm = _llvmlite_lock()
    if llvm is not None:
        llvm.__enter__()
        _held.append(llvm)


def _after_fork():
    """(in parent and child: the child's copy of the forking thread holds both)"""
    while _held:
        _held.pop().__exit__(None, None, None)
    lock.release()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork,
                        after_in_child=_after_fork)
