"""Splitting big native kernels over the machine's cores.

A fused kernel's outer loop can run as several [lo, hi) ranges at once: the
calling thread takes the first range and persistent worker threads the rest
(ctypes releases the GIL during a native call, so they truly run in
parallel). Handing work to a Python worker costs about 150 us here (most of
it the operating system waking the sleeping thread), so a kernel is split only
above `MIN_WORK` units of estimated work (elements times a per-element cost;
see `fused._cost_per_element`), roughly 350 us of single-threaded time.
Measured on this project's 2-core machine: sin(x)*y + exp(-x*x) on 3e5
float32 elements takes 0.26 ms on one thread and 0.29 ms split; on 1e6, 0.90
and 0.65 ms; the ReLU kernels of a batch-1024 MLP step (5e5 elements, 8
units each) run faster unsplit inside their segment (step 13.6 -> 12.9 ms). `FGRAD_NUM_THREADS` (default: the CPUs this process may
use) sets how many threads a kernel uses; 1 disables splitting.
"""
import os
from concurrent.futures import ThreadPoolExecutor

MIN_WORK = 8_000_000

_pool = None


def num_threads():
    """Threads per kernel: FGRAD_NUM_THREADS, else the CPUs available to us."""
    value = os.environ.get("FGRAD_NUM_THREADS")
    if value:
        try:
            return max(1, int(value))
        except ValueError:
            raise ValueError(f"FGRAD_NUM_THREADS={value!r} is not a whole number of "
                             f"threads; unset it or set e.g. FGRAD_NUM_THREADS=1") from None
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover (not Linux)
        return os.cpu_count() or 1


def chunks(work, outer):
    """The [lo, hi) ranges of an outer loop of `outer` iterations for a kernel of
    `work` units, one per thread; None when splitting would not pay."""
    n = min(num_threads(), outer)
    if n < 2 or work < MIN_WORK:
        return None
    bounds = [outer * k // n for k in range(n + 1)]
    return list(zip(bounds[:-1], bounds[1:]))


def run_parallel(cfunc, tables):
    """cfunc(table) for every argument-table address, the first on this thread."""
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=max(1, num_threads() - 1),
                                   thread_name_prefix="fgrad-kernel")
    pending = [_pool.submit(cfunc, t) for t in tables[1:]]
    cfunc(tables[0])
    for p in pending:
        p.result()
