"""Multi-process computing over MPI (start programs with `mpiexec -n N python ...`).

Needs the `mpi` extra (`pip install 'fgrad[mpi]'`: mpi4py and MPICH); fgrad
itself imports without it. The collectives are primitives: they work eagerly,
inside jit (in program order; compiled to native MPI calls), under vmap, and have
JVP and transpose rules (semantics in fgrad/_src/distributed/collectives.py).

- `init()`, `rank()`, `size()`, `barrier()`, `world()`
- `allreduce(x, op)` (op: sum, mean, max, min), `allgather`, `reduce_scatter`,
  `broadcast(x, root)`, `send(x, dest)`, `recv(shape, dtype, source)`
- `set_debug(True)` (or FGRAD_MPI_DEBUG=1): check operand shapes across ranks
  before every collective; a mismatch names both shapes.
"""
from fgrad._src.distributed import runtime as _runtime
from fgrad._src.distributed.collectives import (  # noqa: F401
    allgather, allreduce, broadcast, recv, reduce_scatter, send)
from fgrad._src.distributed.runtime import init, set_debug  # noqa: F401


def world():
    """The mpi4py communicator of all ranks (MPI.COMM_WORLD)."""
    return _runtime.as_comm(None).mpi


def rank(comm=None):
    """This process's rank in comm (default: the world)."""
    return _runtime.as_comm(comm).mpi.Get_rank()


def size(comm=None):
    """The number of ranks in comm (default: the world)."""
    return _runtime.as_comm(comm).mpi.Get_size()


def barrier(comm=None):
    """Wait until every rank of comm has reached this call."""
    c = _runtime.as_comm(comm)
    with _runtime.one_at_a_time:
        c.mpi.Barrier()


__all__ = ["init", "rank", "size", "barrier", "world", "allreduce", "allgather",
           "reduce_scatter", "broadcast", "send", "recv", "set_debug"]
