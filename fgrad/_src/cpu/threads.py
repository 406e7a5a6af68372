"""How many threads native kernels may use.

The big members of a segment are shared between the calling thread and the
native workers of `pool` (see `program.emit_segment` and
`fused.parallel_plan`). `FGRAD_NUM_THREADS` (default: the CPUs this process
may use) sets how many threads that is in all; 1 disables splitting.
"""
import os


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


def split_threads():
    """Threads a split kernel may use: 1 without native workers here (see `pool`);
    at most 64 (chunks are claimed in a 64-bit mask)."""
    from . import pool
    return min(num_threads(), 64) if pool.supported() else 1
