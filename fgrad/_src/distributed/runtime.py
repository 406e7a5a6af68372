"""The MPI runtime behind `fgrad.distributed`: loading mpi4py, communicators,
aborting the job when a rank fails, and the optional cross-rank shape check.

mpi4py is imported on first use, so fgrad imports and runs without it. Every
MPI call fgrad makes through mpi4py goes through `one_at_a_time`, a process-wide
lock, and the native calls of small programs and eager allreduces hold the GIL:
two Python threads of one rank never run those collectives concurrently
(fgrad's native worker threads never call MPI at all; collectives are steps of
the calling thread).
"""
import os
import sys
import threading
import traceback

from ..errors import FgradTypeError

one_at_a_time = threading.RLock()
_debug = os.environ.get("FGRAD_MPI_DEBUG", "") not in ("", "0")
_hook_installed = False


def mpi():
    """mpi4py's MPI module, or a clear error naming the extra that provides it."""
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise ImportError("fgrad.distributed needs mpi4py and an MPI library: "
                          "pip install 'fgrad[mpi]' (installs mpi4py and MPICH), then "
                          "start the program with `mpiexec -n N python ...`") from e
    return MPI


class Comm:
    """A hashable handle on an mpi4py communicator, used as a primitive parameter
    (so jitted programs are cached per communicator)."""
    __slots__ = ("mpi", "_key")

    def __init__(self, comm):
        self.mpi = comm
        self._key = mpi()._handleof(comm)

    def __eq__(self, other):
        return type(other) is Comm and other._key == self._key

    def __hash__(self):
        return hash(self._key)

    def __repr__(self):
        name = self.mpi.Get_name() or "comm"
        return f"{name}[{self.mpi.Get_size()}]"


_world = None


def as_comm(comm):
    """The `Comm` for an mpi4py communicator, a `Comm`, or None (the world)."""
    global _world
    if comm is None and _world is not None:
        return _world
    if isinstance(comm, Comm):
        return comm
    if comm is None:
        init()
        if _world is None:
            _world = Comm(mpi().COMM_WORLD)
        return _world
    return Comm(comm)


def init(abort_on_error=True):
    """Start MPI (once) and, by default, install the abort-on-error hook: an
    exception that ends any rank's program prints that rank's traceback and
    aborts every rank (MPI_Abort), so a failure never leaves the others hanging
    in a collective."""
    MPI = mpi()
    if not MPI.Is_initialized():
        MPI.Init_thread()
    if abort_on_error:
        _install_abort_hook()


def _install_abort_hook():
    global _hook_installed
    if _hook_installed:
        return
    _hook_installed = True
    previous = sys.excepthook

    def abort_job(kind, value, tb):
        MPI = mpi()
        world = MPI.COMM_WORLD
        if world.Get_size() == 1 or MPI.Is_finalized():
            return previous(kind, value, tb)
        sys.stderr.write(f"fgrad.distributed: rank {world.Get_rank()} of "
                         f"{world.Get_size()} failed; aborting all ranks\n")
        traceback.print_exception(kind, value, tb, file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        world.Abort(1)

    sys.excepthook = abort_job


def set_debug(enabled=True):
    """Check, before every collective, that all ranks pass the same shape and
    dtype (one small allgather each); a mismatch raises an error naming both.
    Also on with the environment variable FGRAD_MPI_DEBUG=1. Programs jitted
    while it is on keep the check (their collectives stay Python steps).

    Without it a mismatch is MPI's undefined behaviour: usually MPI reports a
    truncated message and the job aborts, but a small mismatch can also pass
    unnoticed and give wrong values."""
    global _debug
    _debug = bool(enabled)


def check_same_shape(comm, name, x, root=None):
    """In debug mode, raise on every rank if the ranks' operands differ."""
    if not _debug:
        return
    mine = (tuple(x.shape), x.dtype.str)
    every = comm.mpi.allgather(mine)
    for r, theirs in enumerate(every):
        if theirs != mine:
            raise FgradTypeError(
                f"{name}: rank {comm.mpi.Get_rank()} passes shape {mine[0]} dtype "
                f"{mine[1]} but rank {r} passes shape {theirs[0]} dtype {theirs[1]}",
                hint="every rank must call the same collective with operands of "
                     "one shape and dtype")
