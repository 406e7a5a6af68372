"""One thread count for every library, set before any of them is imported.

BLAS and OpenMP pools read their size from the environment when they load, so
`configure(n)` must run before NumPy, PyTorch, JAX or fgrad are imported; the
benchmarks import this module first. PyTorch's intra-op pool is set again with
torch.set_num_threads in peers.py. With n below the CPU count the process is
also pinned to n CPUs, so that libraries sizing their pools from the CPUs they
can see (XLA, fgrad) see the same n.
"""
import os

_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
         "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "FGRAD_NUM_THREADS")


def default_count():
    """BENCH_THREADS if set, else every CPU this process may run on."""
    value = os.environ.get("BENCH_THREADS")
    return int(value) if value else len(os.sched_getaffinity(0))


def configure(n):
    """Set every library's thread count to n (call before importing them)."""
    n = int(n)
    if n < 1:
        raise ValueError(f"thread count must be >= 1, got {n}")
    for var in _VARS:
        os.environ[var] = str(n)
    os.environ["BENCH_THREADS"] = str(n)
    # XLA: one intra-op thread turns Eigen's pool off; more threads use the CPUs
    # the process is pinned to.
    flags = os.environ.get("XLA_FLAGS", "")
    if n == 1 and "xla_cpu_multi_thread_eigen" not in flags:
        flags += " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    os.environ["XLA_FLAGS"] = flags.strip()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    cpus = sorted(os.sched_getaffinity(0))
    if n < len(cpus):
        os.sched_setaffinity(0, cpus[:n])
    return n


def describe():
    """The settings as one line for the report."""
    n = os.environ.get("BENCH_THREADS", "?")
    cpus = sorted(os.sched_getaffinity(0))
    return (f"{n} thread(s) for every library: {', '.join(f'{v}={n}' for v in _VARS)}, "
            f"torch.set_num_threads({n}), XLA_FLAGS='{os.environ.get('XLA_FLAGS', '')}', "
            f"process pinned to CPUs {cpus}")


COUNT = configure(default_count())
