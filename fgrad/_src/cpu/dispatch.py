"""The native call path of a jitted function: argument checks, output allocation,
the kernel call and the result's Array wrappers in one C-level function.

A jitted call through Python costs several microseconds (flattening, the
cache key, ctypes, wrapping); the kernel itself often takes less. A program
that is one native call (a kernel or a segment) reading only its inputs and
constants gets a builtin function, `fgrad_dispatch` bound to a spec, that
Python calls with the user's arguments. It checks, in native code, that the
arguments are what the program was compiled for (fgrad Arrays or ndarrays of
the same dtype object, shape and weak type, C-contiguous), that no transform is
tracing and that jit is not disabled, allocates the outputs with `np.empty`,
fills the kernel's argument table, calls the kernel and returns the outputs
as Arrays (one, a tuple, or the output tree through a `finish` callable).
Anything unexpected returns the `MISS` sentinel and the caller takes the
Python path, which handles every case (and raises the errors).

The function is generic: one LLVM function per process (disk-cached like the
kernels), driven by an int64 spec array. It reads object fields at offsets of
CPython's and NumPy's ABI; `_layout()` verifies each on probe objects at first
use, and when any check fails there is no fast path (calls take the Python
path). It holds the GIL while the kernel runs, so only programs with small
operands (`MAX_BYTES`) use it.
"""
import ctypes

import numpy as np

from ..config import config

MISS = type("Miss", (), {"__repr__": lambda self: "<fgrad dispatch miss>"})()
MAX_BYTES = 1 << 18     # total bytes of operands and results for the native path

# spec words (int64): the header, then per input (descr, weak, ndim, dims
# offset), per output (shape, dtype, weak), then the input dims
N_IN, N_OUT, KERNEL, TABLE, ARRAY_T, NDARRAY_T, MISS_OBJ, EMPTY, FINISH, ERR_SLOT, \
    BLOCKED, STATE, EVAL, FALSE_OBJ, HITS, AS_TUPLE, CALL_MAP = range(17)
HEADER = 17
IN_WORDS, OUT_WORDS = 4, 3

_blocked = np.zeros(1, np.int64)   # nonzero while disable_jit or debug_nans is on


def _update_blocked(_value=None):
    _blocked[0] = int(bool(config.disable_jit or config.debug_nans))


_update_blocked()
config.on_update("disable_jit", _update_blocked)
config.on_update("debug_nans", _update_blocked)


class NativeEntry:
    """How native code calls one compiled entry `void f(i64* table)`: its address,
    (dtype, shape) of the arrays in its first table slots (then come its n_out
    outputs), the slot it sets on an error (or -1), and `new_table()` -> (an
    int64 table with every other slot filled, objects to keep alive)."""
    __slots__ = ("address", "in_specs", "n_out", "err_slot", "new_table")

    def __init__(self, address, in_specs, n_out, err_slot, new_table):
        self.address, self.in_specs, self.n_out = address, in_specs, n_out
        self.err_slot, self.new_table = err_slot, new_table


# ----------------------------------------------------------------------------
# ABI offsets, verified

def _word(address):
    return ctypes.c_int64.from_address(address).value


def _find_slot(make, value_of):
    """The byte offset at which objects made by `make()` hold `value_of(obj)`."""
    probes = [make() for _ in range(3)]
    for off in range(16, 80, 8):
        if all(_word(id(p) + off) == id(value_of(p)) for p in probes):
            return off
    return None


def _probe_layout():
    from .. import core
    from .fused import _DATA_OFFSET
    if _DATA_OFFSET is None:
        return None
    arrays = [np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float32).T, np.arange(5.0),
              np.array(7, np.int8), np.zeros((1, 4, 2), np.uint16)[:, 1:]]
    layout = dict(data=_DATA_OFFSET, ob_type=8, tuple_items=24, nd=24, dims=32, descr=56,
                  flags=64)
    ok = all(_word(id(x) + 8) == id(type(x)) for x in (1.5, "s", arrays[0], core.eval_trace))
    t = (arrays[0], arrays[1])
    ok = ok and _word(id(t) + 24) == id(t[0]) and _word(id(t) + 32) == id(t[1])
    for a in arrays:
        ok = ok and ctypes.c_int32.from_address(id(a) + 24).value == a.ndim
        dims = _word(id(a) + 32)
        ok = ok and all(_word(dims + 8 * d) == n for d, n in enumerate(a.shape))
        ok = ok and _word(id(a) + 56) == id(a.dtype)
        ok = ok and bool(ctypes.c_int32.from_address(id(a) + 64).value & 1) \
            == a.flags.c_contiguous
    layout["value"] = _find_slot(lambda: core.Array(np.zeros(1), object()), lambda a: a._value)
    layout["weak"] = _find_slot(lambda: core.Array(np.zeros(1), object()), lambda a: a.weak_type)
    layout["trace"] = _find_slot(lambda: _state_like(core), lambda s: s.trace)
    if not ok or None in layout.values():
        return None
    return layout


def _state_like(core):
    s = type(core._state)()
    s.trace = object()
    return s


_LAYOUT = []      # [layout or None] once probed
_FUNCTION = []    # [(dispatcher address, the compiled module)] once compiled


def layout():
    """The verified offsets, or None when this interpreter's layout is unknown."""
    if not _LAYOUT:
        try:
            _LAYOUT.append(_probe_layout())
        except (ValueError, OSError, TypeError, AttributeError):  # pragma: no cover
            _LAYOUT.append(None)
    return _LAYOUT[0]


# ----------------------------------------------------------------------------
# The generic dispatcher in LLVM IR

_C_API = ("PyObject_Vectorcall", "Py_IncRef", "Py_DecRef", "PyType_GenericAlloc",
          "PyTuple_New")


def _emit(L):
    """LLVM IR text of `fgrad_dispatch(self, args, nargs)` for layout L."""
    from llvmlite import ir
    ptr, i64, i32, i8 = ir.PointerType(), ir.IntType(64), ir.IntType(32), ir.IntType(8)
    module = ir.Module("fgrad_dispatch")

    def declare(name, ret, args):
        return ir.Function(module, ir.FunctionType(ret, args), name)

    vectorcall = declare("PyObject_Vectorcall", ptr, [ptr, ptr, i64, ptr])
    incref = declare("Py_IncRef", ir.VoidType(), [ptr])
    decref = declare("Py_DecRef", ir.VoidType(), [ptr])
    generic_alloc = declare("PyType_GenericAlloc", ptr, [ptr, i64])
    tuple_new = declare("PyTuple_New", ptr, [i64])
    fn = ir.Function(module, ir.FunctionType(ptr, [ptr, ptr, i64]), "fgrad_dispatch")
    self_obj, args, nargs = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    c64 = lambda v: ir.Constant(i64, v)  # noqa: E731
    null = ir.Constant(ptr, None)

    def field(p, offset, typ=ptr):
        return b.load(b.gep(p, [c64(offset)], inbounds=True, source_etype=i8), typ=typ)

    def put(p, offset, value):
        b.store(value, b.gep(p, [c64(offset)], inbounds=True, source_etype=i8))

    def item(p, index, typ=i64):
        return b.load(b.gep(p, [index], inbounds=True, source_etype=typ), typ=typ)

    def set_item(p, index, value, typ=i64):
        b.store(value, b.gep(p, [index], inbounds=True, source_etype=typ))

    spec = field(field(self_obj, L["tuple_items"]), L["data"])

    def word(k):
        return item(spec, c64(k) if isinstance(k, int) else k)

    def obj(k):
        return b.inttoptr(word(k), ptr)

    n_in, n_out = word(N_IN), word(N_OUT)
    vals = b.alloca(ptr, n_in)
    outs = b.alloca(ptr, n_out)
    pair = b.alloca(ptr, 2)
    counter = b.alloca(i64)
    d = b.alloca(i64)

    blocks = {name: fn.append_basic_block(name) for name in (
        "miss", "fail", "check", "check_end", "unwrap", "plain", "array", "dims", "dims_end",
        "alloc", "alloc_end", "fill", "fill_end", "call_end", "err", "wrap", "wrap_end",
        "tuple", "tuple_end", "finish", "single")}
    B = blocks

    def loop_start(block, end, limit):
        """Counter from 0: jump to `block` while counter < limit, else to `end`."""
        b.store(c64(0), counter)
        b.cbranch(b.icmp_signed("<", c64(0), limit), block, end)

    def loop_next(block, end, limit):
        i = b.add(b.load(counter, typ=i64), c64(1))
        b.store(i, counter)
        b.cbranch(b.icmp_signed("<", i, limit), block, end)

    def releasing(name, then):
        """A block that drops outs[counter - 1], ..., outs[0], then goes to `then`."""
        head, one = fn.append_basic_block(name), fn.append_basic_block(name + "_one")
        here = b.block
        b.position_at_end(head)
        k = b.load(counter, typ=i64)
        b.cbranch(b.icmp_signed(">", k, c64(0)), one, then)
        b.position_at_end(one)
        b.store(b.sub(k, c64(1)), counter)
        b.call(decref, [item(outs, b.sub(k, c64(1)), ptr)])
        b.branch(head)
        b.position_at_end(here)
        return head

    release = releasing("release", B["fail"])    # then return NULL (an exception)
    drop = releasing("drop", B["miss"])          # then take the Python path

    # a state the native path serves: jit on, no transform tracing, the arity
    current = field(obj(STATE), L["trace"])
    ok = b.and_(b.icmp_unsigned("==", item(obj(BLOCKED), c64(0)), c64(0)),
                b.and_(b.icmp_unsigned("==", current, obj(EVAL)),
                       b.icmp_signed("==", nargs, n_in)))
    fresh = fn.append_basic_block("start")
    b.cbranch(ok, fresh, B["miss"])
    b.position_at_end(fresh)
    loop_start(B["check"], B["check_end"], n_in)

    # per argument: unwrap an Array (checking its weak type), check the ndarray
    b.position_at_end(B["check"])
    i = b.load(counter, typ=i64)
    rec = b.add(c64(HEADER), b.mul(i, c64(IN_WORDS)))
    a = item(args, i, ptr)
    b.cbranch(b.icmp_unsigned("==", field(a, L["ob_type"]), obj(ARRAY_T)), B["unwrap"],
              B["plain"])
    b.position_at_end(B["unwrap"])
    weak_ok = b.icmp_unsigned("==", field(a, L["weak"]), obj(b.add(rec, c64(1))))
    inner = field(a, L["value"])
    b.cbranch(weak_ok, B["array"], B["miss"])
    b.position_at_end(B["plain"])
    b.cbranch(b.icmp_unsigned("==", obj(b.add(rec, c64(1))), obj(FALSE_OBJ)), B["array"],
              B["miss"])
    b.position_at_end(B["array"])
    x = b.phi(ptr)
    x.add_incoming(inner, B["unwrap"])
    x.add_incoming(a, B["plain"])
    ndim = word(b.add(rec, c64(2)))
    good = b.and_(b.icmp_unsigned("==", field(x, L["ob_type"]), obj(NDARRAY_T)),
                  b.icmp_unsigned("==", field(x, L["descr"]), obj(rec)))
    good = b.and_(good, b.icmp_signed("==", b.sext(field(x, L["nd"], i32), i64), ndim))
    good = b.and_(good, b.icmp_unsigned("!=", b.and_(field(x, L["flags"], i32),
                                                     ir.Constant(i32, 1)), ir.Constant(i32, 0)))
    set_item(vals, i, x, ptr)
    dims_at = word(b.add(rec, c64(3)))
    b.store(c64(0), d)
    b.cbranch(good, B["dims"], B["miss"])
    b.position_at_end(B["dims"])         # compare dims while d < ndim
    dk = b.load(d, typ=i64)
    more = b.icmp_signed("<", dk, ndim)
    step = fn.append_basic_block("dim")
    b.cbranch(more, step, B["dims_end"])
    b.position_at_end(step)
    same = b.icmp_signed("==", item(field(x, L["dims"]), dk), word(b.add(dims_at, dk)))
    b.store(b.add(dk, c64(1)), d)
    b.cbranch(same, B["dims"], B["miss"])
    b.position_at_end(B["dims_end"])
    loop_next(B["check"], B["check_end"], n_in)

    # allocate the outputs: np.empty(shape, dtype)
    b.position_at_end(B["check_end"])
    outs_at = b.add(c64(HEADER), b.mul(n_in, c64(IN_WORDS)))
    loop_start(B["alloc"], B["alloc_end"], n_out)
    b.position_at_end(B["alloc"])
    j = b.load(counter, typ=i64)
    orec = b.add(outs_at, b.mul(j, c64(OUT_WORDS)))
    set_item(pair, c64(0), obj(orec), ptr)
    set_item(pair, c64(1), obj(b.add(orec, c64(1))), ptr)
    out = b.call(vectorcall, [obj(EMPTY), pair, c64(2), null])
    failed = fn.append_basic_block("alloc_failed")
    stored = fn.append_basic_block("alloc_ok")
    b.cbranch(b.icmp_unsigned("==", out, null), failed, stored)
    b.position_at_end(failed)            # release the outputs made so far
    b.store(j, counter)
    b.branch(release)
    b.position_at_end(stored)
    set_item(outs, j, out, ptr)
    loop_next(B["alloc"], B["alloc_end"], n_out)

    # fill the kernel's table (inputs by the call map, -1: a preset slot), call it
    b.position_at_end(B["alloc_end"])
    table = obj(TABLE)
    n_call = word(b.add(word(CALL_MAP), c64(0)))
    loop_start(B["fill"], B["fill_end"], n_call)
    b.position_at_end(B["fill"])
    p = b.load(counter, typ=i64)
    source = word(b.add(word(CALL_MAP), b.add(p, c64(1))))
    take = fn.append_basic_block("take")
    skip = fn.append_basic_block("skip")
    b.cbranch(b.icmp_signed(">=", source, c64(0)), take, skip)
    b.position_at_end(take)
    set_item(table, p, b.ptrtoint(item(vals, source, ptr), i64))
    b.branch(skip)
    b.position_at_end(skip)
    loop_next(B["fill"], B["fill_end"], n_call)
    b.position_at_end(B["fill_end"])
    for_out = fn.append_basic_block("out_slots")
    loop_start(for_out, B["call_end"], n_out)
    b.position_at_end(for_out)
    j = b.load(counter, typ=i64)
    set_item(table, b.add(n_call, j), b.ptrtoint(item(outs, j, ptr), i64))
    loop_next(for_out, B["call_end"], n_out)
    b.position_at_end(B["call_end"])
    kernel = b.inttoptr(word(KERNEL), ir.FunctionType(ir.VoidType(), [ptr]).as_pointer())
    b.call(kernel, [table])
    err_slot = word(ERR_SLOT)
    has_err = fn.append_basic_block("has_err")
    b.cbranch(b.icmp_signed(">=", err_slot, c64(0)), has_err, B["wrap_end"])
    b.position_at_end(has_err)
    b.cbranch(b.icmp_unsigned("!=", item(table, err_slot), c64(0)), B["err"],
              B["wrap_end"])
    b.position_at_end(B["err"])          # e.g. a bad selector: the Python path raises
    set_item(table, err_slot, c64(0))
    b.store(n_out, counter)
    b.branch(drop)

    # wrap each output: an Array with the value and weak flag set directly
    b.position_at_end(B["wrap_end"])
    wrap_done = fn.append_basic_block("wrapped")
    loop_start(B["wrap"], wrap_done, n_out)
    b.position_at_end(B["wrap"])
    j = b.load(counter, typ=i64)
    wrapper = b.call(generic_alloc, [obj(ARRAY_T), c64(0)])
    no_mem = fn.append_basic_block("wrap_failed")
    made = fn.append_basic_block("wrap_ok")
    b.cbranch(b.icmp_unsigned("==", wrapper, null), no_mem, made)
    b.position_at_end(no_mem)
    b.store(n_out, counter)
    b.branch(release)
    b.position_at_end(made)
    weak = obj(b.add(b.add(outs_at, b.mul(j, c64(OUT_WORDS))), c64(2)))
    b.call(incref, [weak])
    put(wrapper, L["value"], item(outs, j, ptr))
    put(wrapper, L["weak"], weak)
    set_item(outs, j, wrapper, ptr)
    loop_next(B["wrap"], wrap_done, n_out)

    b.position_at_end(wrap_done)
    set_item(spec, c64(HITS), b.add(word(HITS), c64(1)))
    b.cbranch(b.icmp_unsigned("==", word(AS_TUPLE), c64(0)), B["single"], B["tuple"])
    b.position_at_end(B["single"])
    b.ret(item(outs, c64(0), ptr))
    b.position_at_end(B["tuple"])
    tup = b.call(tuple_new, [n_out])
    tuple_ok = fn.append_basic_block("tuple_ok")
    b.cbranch(b.icmp_unsigned("==", tup, null), no_mem, tuple_ok)
    b.position_at_end(tuple_ok)
    loop_start(B["tuple_end"], B["finish"], n_out)   # (reusing the block name: fill loop)
    b.position_at_end(B["tuple_end"])
    j = b.load(counter, typ=i64)
    put(b.gep(tup, [b.mul(j, c64(8))], inbounds=True, source_etype=i8), L["tuple_items"],
        item(outs, j, ptr))
    loop_next(B["tuple_end"], B["finish"], n_out)
    b.position_at_end(B["finish"])
    finish = word(FINISH)
    plain_tuple = fn.append_basic_block("plain_tuple")
    call_finish = fn.append_basic_block("call_finish")
    b.cbranch(b.icmp_unsigned("==", finish, c64(0)), plain_tuple, call_finish)
    b.position_at_end(plain_tuple)
    b.ret(tup)
    b.position_at_end(call_finish)
    set_item(pair, c64(0), tup, ptr)
    result = b.call(vectorcall, [b.inttoptr(finish, ptr), pair, c64(1), null])
    b.call(decref, [tup])
    b.ret(result)

    b.position_at_end(B["miss"])
    b.call(incref, [obj(MISS_OBJ)])
    b.ret(obj(MISS_OBJ))
    b.position_at_end(B["fail"])
    b.ret(null)
    return str(module)


def _dispatcher():
    """(address of fgrad_dispatch, its module), compiled once per process (found
    in the disk cache without emitting IR when an earlier process compiled it)."""
    if not _FUNCTION:
        from . import engine
        for name in _C_API:
            engine.add_symbol(name, ctypes.cast(getattr(ctypes.pythonapi, name),
                                                ctypes.c_void_p).value)
        module = engine.compile_runtime(f"dispatch {sorted(layout().items())}",
                                        ["fgrad_dispatch"], lambda: _emit(layout()))
        _FUNCTION.append((module.address("fgrad_dispatch"), module))
    return _FUNCTION[0][0]


class _MethodDef(ctypes.Structure):
    _fields_ = [("ml_name", ctypes.c_char_p), ("ml_meth", ctypes.c_void_p),
                ("ml_flags", ctypes.c_int), ("ml_doc", ctypes.c_char_p)]


_METH_FASTCALL = 0x0080
_new_function = ctypes.pythonapi.PyCFunction_NewEx
_new_function.restype = ctypes.py_object
_new_function.argtypes = [ctypes.c_void_p, ctypes.py_object, ctypes.c_void_p]


def fast_function(native, in_avals, call_map, constants, out_avals, finish, as_tuple,
                  keep_alive, name="jitted", allocate=np.empty):
    """A builtin taking the program's arguments: its outputs (an Array, a tuple of
    Arrays, or finish(tuple)) or MISS. `native`: the NativeEntry of the program's
    one call; `call_map[p]`: the argument read by the call's input p, or None
    for a constant (`constants[p]`, preset in the table); `in_avals` and
    `out_avals`: (shape, dtype, weak) of arguments and outputs; `allocate(shape,
    dtype)` makes each output."""
    from .. import core
    L = layout()
    if L is None:
        return None
    table, table_keep = native.new_table()
    for p, source in enumerate(call_map):
        if source is None:
            table[p] = id(constants[p])
    dtypes = [np.dtype(dt) for _, dt, _ in in_avals]
    out_dtypes = [np.dtype(dt) for _, dt, _ in out_avals]
    out_shapes = [tuple(shape) for shape, _, _ in out_avals]
    dims, dims_at = [], HEADER + IN_WORDS * len(in_avals) + OUT_WORDS * len(out_avals)
    records = []
    for (shape, _, weak), dt in zip(in_avals, dtypes):
        records += [id(dt), id(bool(weak)), len(shape), dims_at + len(dims)]
        dims += list(shape)
    for shape, dt, (_, _, weak) in zip(out_shapes, out_dtypes, out_avals):
        records += [id(shape), id(dt), id(bool(weak))]
    call_map_at = dims_at + len(dims)
    calls = [len(call_map)] + [-1 if s is None else s for s in call_map]
    header = [0] * HEADER
    header[N_IN], header[N_OUT] = len(in_avals), len(out_avals)
    header[KERNEL], header[TABLE] = native.address, table.ctypes.data
    header[ARRAY_T], header[NDARRAY_T] = id(core.Array), id(np.ndarray)
    header[MISS_OBJ], header[EMPTY] = id(MISS), id(allocate)
    header[FINISH] = 0 if finish is None else id(finish)
    header[ERR_SLOT] = native.err_slot
    header[BLOCKED], header[STATE], header[EVAL] = _blocked.ctypes.data, id(core._state), \
        id(core.eval_trace)
    header[FALSE_OBJ], header[AS_TUPLE], header[CALL_MAP] = id(False), int(as_tuple), \
        call_map_at
    spec = np.array(header + records + dims + calls, np.int64)
    method = _MethodDef(f"{name} (native call)".encode(), _dispatcher(), _METH_FASTCALL, None)
    # `self` keeps everything the spec points to alive, the method definition too
    bound = (spec, table, table_keep, method, out_shapes, dtypes, out_dtypes, finish,
             constants, keep_alive, allocate)
    fast = _new_function(ctypes.addressof(method), bound, None)
    return fast


def hits(fast):
    """How many calls `fast` has served (counted in its spec, `self`'s first item)."""
    return int(fast.__self__[0][HITS])
