"""The collectives of fgrad.distributed as native calls of MPI (the CPU backend's
kernels for `mpi_allreduce`, `mpi_allgather`, `mpi_reduce_scatter`, `mpi_broadcast`).

Where MPI comes from: the library mpi4py is linked against (the `mpich` wheel's
libmpi), found by looking the C entry points up through mpi4py's extension
module (dlsym searches a library's dependencies too). Each routine is
registered with `engine.add_symbol` as `fgrad_mpi_<routine>`. The communicator,
datatype and reduction-operation handles are mpi4py's (`MPI._handleof`),
written into the code as constants of the width the library's handles have
(an int for MPICH, a pointer for Open MPI).

Each kernel has a fused group's body signature,

    i1 fname_body(ptr operand, ptr output, i64, i64)

(the range is ignored: a collective is never split over threads, and
`fused.parallel_plan` keeps fgrad's worker threads out of segments holding
one, so it runs on the calling thread, in program order). An allreduce whose
output is its operand's buffer (a donated input, see `IN_PLACE`) passes
MPI_IN_PLACE. A nonzero MPI
return code calls MPI_Abort: a collective that fails ends the job rather
than returning garbage. Not lowered (left to the Python step, which calls
mpi4py): empty arrays, counts beyond a C int, dtypes without an MPI datatype,
and every collective while the cross-rank shape check of debug mode is on
when the program is compiled (`fgrad.distributed.set_debug`).
"""
import ctypes
import math
import sys

import numpy as np

from ..jaxpr import Var
from . import loops

NAMES = frozenset({"mpi_allreduce", "mpi_allgather", "mpi_reduce_scatter", "mpi_broadcast"})
# kernels that may write their output over their (donated) operand: MPI_IN_PLACE
IN_PLACE = frozenset({"mpi_allreduce"})
_ROUTINES = ("MPI_Allreduce", "MPI_Allgather", "MPI_Reduce_scatter_block", "MPI_Bcast",
             "MPI_Abort")
_GIL_API = ("PyGILState_Check", "PyEval_SaveThread", "PyEval_RestoreThread")
_registered = None


def _symbol(routine):
    return "fgrad_mpi_" + routine


def available():
    """Whether MPI can be called from native code (registers the routines once)."""
    global _registered
    if _registered is None:
        _registered = False
        module = sys.modules.get("mpi4py.MPI")
        if module is None:
            return False
        try:
            lib = ctypes.CDLL(module.__file__)
            addresses = {r: ctypes.cast(getattr(lib, r), ctypes.c_void_p).value
                         for r in _ROUTINES}
        except (OSError, AttributeError):
            return False
        if all(addresses.values()):
            from . import engine
            for name, address in addresses.items():
                engine.add_symbol(_symbol(name), address)
            for name in _GIL_API:
                engine.add_symbol(name, ctypes.cast(getattr(ctypes.pythonapi, name),
                                                    ctypes.c_void_p).value)
            _registered = True
    return _registered


def _datatype(dtype):
    from mpi4py import MPI
    mpi_type = MPI._typedict.get(np.dtype(dtype).char)
    return None if mpi_type is None else MPI._handleof(mpi_type)


def can_lower(eqn):
    """A collective on one non-empty array of a dtype MPI has, outside debug mode."""
    if eqn.primitive.name not in NAMES or type(eqn.invars[0]) is not Var:
        return False
    from ..distributed import runtime
    if runtime._debug or not available():
        return False
    aval = eqn.invars[0].aval
    size = max(math.prod(aval.shape), math.prod(eqn.outvars[0].aval.shape))
    return 0 < size < 2 ** 31 and _datatype(aval.dtype) is not None


def routine(eqn):
    """The MPI routine a lowered equation calls (its `as_text` note)."""
    return {"mpi_allreduce": "MPI_Allreduce", "mpi_allgather": "MPI_Allgather",
            "mpi_reduce_scatter": "MPI_Reduce_scatter_block",
            "mpi_broadcast": "MPI_Bcast"}[eqn.primitive.name]


def emit(ir, module, fname, eqn):
    """Emit `fname_body` calling the equation's MPI routine; returns the function."""
    from mpi4py import MPI
    ptr, i1, i32, i64 = ir.PointerType(), ir.IntType(1), ir.IntType(32), ir.IntType(64)
    handle = ir.IntType(8 * MPI._sizeof(MPI.Comm))

    def h(obj):
        return ir.Constant(handle, MPI._handleof(obj))

    fn = ir.Function(module, ir.FunctionType(i1, [ptr, ptr, i64, i64]), fname + "_body")
    fn.linkage = "internal"
    src, dst = fn.args[0], fn.args[1]
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    params = eqn.params
    comm = params["comm"].mpi
    aval = eqn.invars[0].aval
    dtype = ir.Constant(handle, _datatype(aval.dtype))
    count = ir.Constant(i32, math.prod(aval.shape))
    name = eqn.primitive.name

    def call(routine_name, args):
        callee = loops.declare(ir, module, _symbol(routine_name), i32, [a.type for a in args])
        return b.call(callee, args)

    resume = _release_gil(ir, module, b)
    if name == "mpi_allreduce":      # in place (MPI_IN_PLACE) when dst is src
        op = {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}[params["op"]]
        in_place = b.inttoptr(ir.Constant(i64, int(MPI.IN_PLACE)), ptr)
        send = b.select(b.icmp_unsigned("==", src, dst), in_place, src)
        rc = call("MPI_Allreduce", [send, dst, count, dtype, h(op), h(comm)])
    elif name == "mpi_allgather":
        rc = call("MPI_Allgather", [src, count, dtype, dst, count, dtype, h(comm)])
    elif name == "mpi_reduce_scatter":
        block = ir.Constant(i32, math.prod(eqn.outvars[0].aval.shape))
        rc = call("MPI_Reduce_scatter_block", [src, dst, block, dtype, h(MPI.SUM), h(comm)])
    else:                                  # broadcast: into the output, from a copy of x
        nbytes = ir.Constant(i64, math.prod(aval.shape) * np.dtype(aval.dtype).itemsize)
        memcpy = loops.declare(ir, module, "memcpy", ptr, [ptr, ptr, i64])
        b.call(memcpy, [dst, src, nbytes])
        rc = call("MPI_Bcast", [dst, count, dtype, ir.Constant(i32, params["root"]), h(comm)])
    resume()
    failed = b.icmp_signed("!=", rc, ir.Constant(i32, 0))
    with b.if_then(failed, likely=False):
        call("MPI_Abort", [h(MPI.COMM_WORLD), rc])
    b.ret(ir.Constant(i1, 0))
    return fn


_EAGER = []      # [(address of fgrad_mpi_allreduce, its module)] once compiled


def allreduce_entry():
    """The address of `void fgrad_mpi_allreduce(i64* table)`, fgrad's run-time code
    for eager allreduces (compiled once per process, disk-cached; cpu.dispatch
    calls it with the operand and output ndarrays' addresses in table[0:2]):
    MPI_Allreduce of table[2] elements, datatype table[3], op table[4], over
    communicator table[5] (handles as integers). None where native calls are out."""
    from .fused import _DATA_OFFSET
    if _DATA_OFFSET is None or not available():
        return None
    if not _EAGER:
        from mpi4py import MPI
        from . import engine
        width = 8 * MPI._sizeof(MPI.Comm)
        module = engine.compile_runtime(f"mpi allreduce {width} {_DATA_OFFSET}",
                                        ["fgrad_mpi_allreduce"],
                                        lambda: _emit_entry(width, _DATA_OFFSET))
        _EAGER.append((module.address("fgrad_mpi_allreduce"), module))
    return _EAGER[0][0]


def _emit_entry(width, data_offset):
    """LLVM IR text of `fgrad_mpi_allreduce` (see allreduce_entry)."""
    from llvmlite import ir
    from mpi4py import MPI
    ptr, i8, i32, i64 = ir.PointerType(), ir.IntType(8), ir.IntType(32), ir.IntType(64)
    handle = ir.IntType(width)
    module = ir.Module("fgrad_mpi_allreduce")
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr]), "fgrad_mpi_allreduce")
    b = ir.IRBuilder(fn.append_basic_block("entry"))

    def slot(k):
        return b.load(b.gep(fn.args[0], [ir.Constant(i64, k)], source_etype=i64), typ=i64)

    def data(k):
        obj = b.inttoptr(slot(k), ptr)
        return b.load(b.gep(obj, [ir.Constant(i64, data_offset)], source_etype=i8), typ=ptr)

    def as_handle(k):
        return slot(k) if width == 64 else b.trunc(slot(k), handle)

    def call(name, args):
        callee = loops.declare(ir, module, _symbol(name), i32, [a.type for a in args])
        return b.call(callee, args)

    send, recv, count = data(0), data(1), b.trunc(slot(2), i32)
    resume = _release_gil(ir, module, b)
    rc = call("MPI_Allreduce", [send, recv, count, as_handle(3), as_handle(4), as_handle(5)])
    resume()
    with b.if_then(b.icmp_signed("!=", rc, ir.Constant(i32, 0)), likely=False):
        call("MPI_Abort", [ir.Constant(handle, MPI._handleof(MPI.COMM_WORLD)), rc])
    b.ret_void()
    return str(module)


def _release_gil(ir, module, b):
    """Emit at `b`: release the GIL when this thread holds it (a call from native
    code, cpu.dispatch; ctypes calls come without it), so other Python threads
    run while the collective waits for the other ranks. Returns a function that
    emits taking it back."""
    ptr, i32 = ir.PointerType(), ir.IntType(32)
    check = loops.declare(ir, module, "PyGILState_Check", i32, [])
    save = loops.declare(ir, module, "PyEval_SaveThread", ptr, [])
    restore = loops.declare(ir, module, "PyEval_RestoreThread", ir.VoidType(), [ptr])
    held = b.icmp_signed("!=", b.call(check, []), ir.Constant(i32, 0))
    with b.if_else(held) as (then, otherwise):
        with then:
            saved = b.call(save, [])
            from_then = b.block
        with otherwise:
            from_else = b.block
    state = b.phi(ptr)
    state.add_incoming(saved, from_then)
    state.add_incoming(ir.Constant(ptr, None), from_else)

    def resume():
        with b.if_then(held):
            b.call(restore, [state])
    return resume
