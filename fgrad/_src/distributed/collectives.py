"""MPI collectives and point-to-point messages as primitives.

Every primitive here is *effectful*: tracing records it even on constants and
simplification never drops, folds or reorders it, so a jitted program performs
its collectives in program order on the calling thread (never on fgrad's native
worker threads). Eagerly they call mpi4py on NumPy buffers (no pickling), except
an allreduce of a kind called before, which calls MPI natively (see
`_native_allreduce`); outputs from 128 KB are on reused memory (cpu.outputs); under
jit, allreduce, allgather, reduce_scatter and broadcast are native kernels
calling MPI's C routines from the compiled code (`fgrad/_src/cpu/mpi.py`,
`native:mpi_allreduce (MPI_Allreduce)` in `as_text`), while send/recv, debug
mode and dtypes MPI lacks stay `python:mpi_*` steps calling mpi4py. Every rank must call the same
collectives in the same order with operands of one shape and dtype
(`set_debug(True)` checks the shapes).

Derivatives treat the ranks as one program whose inputs and outputs are the
per-rank values; each rule is that program's exact derivative:

- allreduce(x, "sum"): y_r = sum_s x_s. JVP: allreduce-sum of the tangents.
  Transpose: allreduce-sum of the cotangents (x_s feeds every y_r), as in
  mpi4jax. So `grad` of a loss that every rank computes from an allreduce-sum
  counts each rank's loss once per rank: average a gradient *after* computing
  it locally (what `fgrad_nn.distributed` does) rather than differentiating
  through a mean of losses.
- allreduce(x, "max"/"min"): the tangent of the winning elements, averaged
  over the ranks that tie (built from allreduce-sums, so it transposes).
- allgather(x): y_r = stack_s x_s (a new leading axis of length size).
  Transpose: reduce_scatter-sum of the cotangents.
- reduce_scatter(x): x has a leading axis of length size; y_r = sum_s x_s[r].
  Transpose: allgather of the cotangents.
- broadcast(x, root): y_r = x_root. Transpose: the allreduce-sum of the
  cotangents on the root, zero on the other ranks.
- send/recv carry values only: the received value has a zero tangent and a
  sent value contributes none (use the collectives to move derivatives).

Batching (vmap): every rank must map the same axis size; the collectives act on
the whole batched array, which is the batched result (allgather's and
reduce_scatter's rank axis stays leading).
"""
import numpy as np

from .. import core, placement
from ..ad import deflinear, defjvp
from ..batching import moveaxis
from ..core import Array, Primitive, ShapedArray
from ..cpu import dispatch, outputs
from ..errors import FgradTypeError
from . import runtime

_OPS = ("sum", "max", "min")


_mpi_ops = {}


def _mpi_op(op):
    if not _mpi_ops:
        MPI = runtime.mpi()
        _mpi_ops.update(sum=MPI.SUM, max=MPI.MAX, min=MPI.MIN)
    return _mpi_ops[op]


def _contiguous(x):
    """x as a C-contiguous NumPy array of its own shape (0-d stays 0-d)."""
    if type(x) is np.ndarray and x.flags.c_contiguous:
        return x
    x = np.asarray(x)
    return x if x.flags.c_contiguous else np.ascontiguousarray(x).reshape(x.shape)


def _empty(shape, dtype):
    """A collective's output, on reused memory when it is big (see cpu.outputs)."""
    return outputs.empty(shape, dtype, outputs.COLLECTIVE_BYTES)


def _reduced(x, op, comm):
    """allreduce of a C-contiguous ndarray x into a new array."""
    out = np.empty(x.shape, x.dtype) if x.nbytes < outputs.COLLECTIVE_BYTES \
        else _empty(x.shape, x.dtype)
    with runtime.one_at_a_time:
        comm.mpi.Allreduce(x, out, _mpi_op(op))
    return out


def _check_kind(name, x, kinds):
    if x.dtype.kind not in kinds:
        raise FgradTypeError(f"{name}: unsupported dtype {x.dtype}",
                             hint="pass a numeric array (booleans: cast to int first)")


def _effectful(name, multiple_results=False):
    prim = Primitive(name, multiple_results=multiple_results)
    prim.effectful = True
    prim.impl_library = "mpi4py"
    return prim


# ----------------------------------------------------------------------------
# allreduce

def _allreduce_abstract_eval(x, *, op, comm):
    _check_kind("allreduce", x, "fiuc" if op == "sum" else "fiu")
    return ShapedArray(x.shape, x.dtype, x.weak_type)


def _allreduce_impl(x, *, op, comm):
    if runtime._debug:
        runtime.check_same_shape(comm, f"allreduce({op!r})", x)
    return _reduced(_contiguous(x), op, comm)


allreduce_p = _effectful("mpi_allreduce")
allreduce_p.impl = _allreduce_impl
allreduce_p.abstract_eval = _allreduce_abstract_eval


def _allreduce_jvp(primals, tangents, *, op, comm):
    from ..lax import elementwise as el
    (x,), (t,) = primals, tangents
    out = allreduce_p.bind(x, op=op, comm=comm)
    if t is None:
        return out, None
    if op == "sum":
        return out, allreduce_p.bind(t, op="sum", comm=comm)
    wins = el.eq(x, out)
    zero = el.convert_element_type(np.zeros((), t.dtype), t.dtype)
    picked = el.select_n(wins, el.mul(t, zero), t)
    ties = allreduce_p.bind(el.convert_element_type(wins, t.dtype), op="sum", comm=comm)
    return out, el.div(allreduce_p.bind(picked, op="sum", comm=comm), ties)


def _allreduce_transpose(ct, x, *, op, comm):
    assert op == "sum", "only allreduce-sum is linear"
    return [allreduce_p.bind(ct, op="sum", comm=comm)]


def _same_dim_batch(prim):
    def batch(vals, dims, **params):
        return prim.bind(*vals, **params), dims[0]
    return batch


allreduce_p.jvp = _allreduce_jvp
allreduce_p.transpose = _allreduce_transpose
allreduce_p.batch = _same_dim_batch(allreduce_p)


# ----------------------------------------------------------------------------
# allgather and reduce_scatter (each other's transpose)

def _allgather_abstract_eval(x, *, comm):
    _check_kind("allgather", x, "fiucb")
    return ShapedArray((comm.mpi.Get_size(),) + tuple(x.shape), x.dtype, x.weak_type)


def _allgather_impl(x, *, comm):
    runtime.check_same_shape(comm, "allgather", x)
    x = _contiguous(x)
    out = _empty((comm.mpi.Get_size(),) + x.shape, x.dtype)
    with runtime.one_at_a_time:
        comm.mpi.Allgather(x, out)
    return out


def _reduce_scatter_abstract_eval(x, *, comm):
    _check_kind("reduce_scatter", x, "fiuc")
    n = comm.mpi.Get_size()
    if len(x.shape) == 0 or x.shape[0] != n:
        raise FgradTypeError(f"reduce_scatter: operand {x.str_short()} needs a leading "
                             f"axis of length {n} (the number of ranks)",
                             hint="reshape to (size, ...): row r is summed into rank r")
    return ShapedArray(tuple(x.shape[1:]), x.dtype, x.weak_type)


def _reduce_scatter_impl(x, *, comm):
    runtime.check_same_shape(comm, "reduce_scatter", x)
    x = _contiguous(x)
    out = _empty(x.shape[1:], x.dtype)
    with runtime.one_at_a_time:
        comm.mpi.Reduce_scatter_block(x, out, op=_mpi_op("sum"))
    return out


allgather_p = _effectful("mpi_allgather")
allgather_p.impl = _allgather_impl
allgather_p.abstract_eval = _allgather_abstract_eval
reduce_scatter_p = _effectful("mpi_reduce_scatter")
reduce_scatter_p.impl = _reduce_scatter_impl
reduce_scatter_p.abstract_eval = _reduce_scatter_abstract_eval

deflinear(allgather_p, lambda ct, x, *, comm: [reduce_scatter_p.bind(ct, comm=comm)])
deflinear(reduce_scatter_p, lambda ct, x, *, comm: [allgather_p.bind(ct, comm=comm)])


def _allgather_batch(vals, dims, *, comm):
    (x,), (d,) = vals, dims
    return allgather_p.bind(x, comm=comm), d + 1


def _reduce_scatter_batch(vals, dims, *, comm):
    (x,), (d,) = vals, dims
    if d == 0:                       # keep the rank axis leading
        x, d = moveaxis(x, 0, 1), 1
    return reduce_scatter_p.bind(x, comm=comm), d - 1


allgather_p.batch = _allgather_batch
reduce_scatter_p.batch = _reduce_scatter_batch


# ----------------------------------------------------------------------------
# broadcast

def _broadcast_abstract_eval(x, *, root, comm):
    if not 0 <= root < comm.mpi.Get_size():
        raise FgradTypeError(f"broadcast: root {root} is not a rank of {comm!r}",
                             hint=f"root must lie in [0, {comm.mpi.Get_size()})")
    return ShapedArray(x.shape, x.dtype, x.weak_type)


def _broadcast_impl(x, *, root, comm):
    runtime.check_same_shape(comm, "broadcast", x)
    x = np.asarray(x)
    out = _empty(x.shape, x.dtype)
    np.copyto(out, x)
    with runtime.one_at_a_time:
        comm.mpi.Bcast(out, root=root)
    return out


def _broadcast_transpose(ct, x, *, root, comm):
    from ..lax import zeros_like
    total = allreduce_p.bind(ct, op="sum", comm=comm)
    return [total if comm.mpi.Get_rank() == root else zeros_like(total)]


broadcast_p = _effectful("mpi_broadcast")
broadcast_p.impl = _broadcast_impl
broadcast_p.abstract_eval = _broadcast_abstract_eval
deflinear(broadcast_p, _broadcast_transpose)
broadcast_p.batch = _same_dim_batch(broadcast_p)


# ----------------------------------------------------------------------------
# send / recv

def _send_impl(x, *, dest, tag, comm):
    with runtime.one_at_a_time:
        comm.mpi.Send(_contiguous(x), dest=dest, tag=tag)
    return []


def _send_batch(vals, dims, *, dest, tag, comm):
    (x,), (d,) = vals, dims
    send_p.bind(moveaxis(x, d, 0) if d is not None else x, dest=dest, tag=tag, comm=comm)
    return [], []


send_p = _effectful("mpi_send", multiple_results=True)
send_p.impl = _send_impl
send_p.abstract_eval = lambda x, *, dest, tag, comm: []
send_p.batch = _send_batch
defjvp(send_p, None)


def _recv_impl(*, shape, dtype, source, tag, comm):
    out = _empty(shape, dtype)
    with runtime.one_at_a_time:
        comm.mpi.Recv(out, source=source, tag=tag)
    return out


recv_p = _effectful("mpi_recv")
recv_p.impl = _recv_impl
recv_p.abstract_eval = lambda *, shape, dtype, source, tag, comm: ShapedArray(shape, dtype)
defjvp(recv_p)


# ----------------------------------------------------------------------------
# The public functions

def _operand(x):
    import fgrad.numpy as fnp
    return fnp.asarray(x)


def allreduce(x, op="sum", *, comm=None):
    """The elementwise reduction of x over all ranks, on every rank. op: "sum",
    "mean", "max" or "min"."""
    if type(x) is Array and not runtime._debug and type(x._value) is np.ndarray:
        # eagerly: what bind would do, without its general dispatch
        v, comm = x._value, runtime.as_comm(comm)
        key = (v.shape, v.dtype, x.weak_type, op, comm._key)
        fast = _native.get(key)
        if fast:
            out = fast(x)
            if out is not dispatch.MISS:
                return out
        kinds = _EAGER_KINDS.get(op)
        if kinds is not None and v.dtype.kind in kinds and v.flags.c_contiguous:
            if fast is None and 0 < v.size < 2 ** 31:
                seen = key in _native        # made on the second call of a kind
                _native[key] = _native_allreduce(v, x.weak_type, op, comm) if seen else None
            if _plain_eager():
                return Array(_reduced(v, op, comm), x.weak_type)
    if op not in _OPS + ("mean",):
        raise ValueError(f"allreduce: op must be one of sum, mean, max, min; got {op!r}")
    comm = runtime.as_comm(comm)
    x = _operand(x)
    if op == "mean":
        return allreduce(x, "sum", comm=comm) / comm.mpi.Get_size()
    return allreduce_p.bind(x, op=op, comm=comm)


_EAGER_KINDS = {"sum": "fiuc", "max": "fiu", "min": "fiu"}
_native = {}      # (shape, dtype, weak, op, comm) -> native call, None once seen, or False


def _native_allreduce(v, weak, op, comm):
    """A builtin running eager allreduces of Arrays like v (shape, dtype, weak)
    natively, as a jitted allreduce would (cpu.dispatch and cpu.mpi's run-time
    entry: no compilation per shape), returning the result Array or a miss
    marker; or False where native calls are out. Made on a shape's second call:
    it saves mpi4py's and fgrad's Python overhead (1 KB on 2 ranks: 6.9 -> 3.5
    us; mpi4py into a reused buffer: 3.4 us)."""
    from ..cpu import mpi as cpu_mpi
    address = cpu_mpi.allreduce_entry()
    datatype = cpu_mpi._datatype(v.dtype)
    if address is None or datatype is None:
        return False
    MPI = runtime.mpi()
    table = np.array([0, 0, v.size, datatype, MPI._handleof(_mpi_op(op)),
                      MPI._handleof(comm.mpi)], np.int64)
    native = dispatch.NativeEntry(address, [(v.dtype, v.shape)], 1, -1, lambda: (table, ()))
    aval = (v.shape, v.dtype, weak)
    allocate = outputs.allocator([(v.shape, v.dtype)], collective=True)
    return dispatch.fast_function(native, [aval], [0], [None], [aval], None, False, table,
                                  "allreduce", allocate) or False


def _plain_eager():
    """Whether a primitive bound now would just run its impl on host values (no
    transform tracing, no output check, no device arrays)."""
    return type(core.current_trace()) is core.EvalTrace and core.output_check is None \
        and not placement.array_types


def allgather(x, *, comm=None):
    """Every rank's x stacked along a new leading axis (row r is rank r's x)."""
    return allgather_p.bind(_operand(x), comm=runtime.as_comm(comm))


def reduce_scatter(x, *, comm=None):
    """x has a leading axis of length size(); rank r gets the sum over ranks of x[r]."""
    return reduce_scatter_p.bind(_operand(x), comm=runtime.as_comm(comm))


def broadcast(x, root=0, *, comm=None):
    """Rank `root`'s x on every rank (the others' x give only shape and dtype)."""
    return broadcast_p.bind(_operand(x), root=int(root), comm=runtime.as_comm(comm))


def send(x, dest, tag=0, *, comm=None):
    """Send x to rank `dest` (blocking until its buffer may be reused)."""
    send_p.bind(_operand(x), dest=int(dest), tag=int(tag), comm=runtime.as_comm(comm))


def recv(shape, dtype, source, tag=0, *, comm=None):
    """Receive an array of the given shape and dtype from rank `source`."""
    return recv_p.bind(shape=tuple(int(n) for n in shape), dtype=np.dtype(dtype),
                       source=int(source), tag=int(tag), comm=runtime.as_comm(comm))
