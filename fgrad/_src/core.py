"""The tracing core: abstract values, primitives, traces, tracers and eager arrays.

Every fgrad operation ends in `Primitive.bind`, which hands the primitive to
the *current trace*. The bottom trace (`EvalTrace`) runs NumPy; transform
traces (JVP, linearize, jaxpr building) interpret the primitive with their own
rules and call down to their parent trace. Tracers belong to exactly one trace:
a trace treats any other value as a constant of its parent's level, which is
what rules out perturbation confusion.
"""
import math
import threading

import numpy as np

from . import dtypes, placement
from .errors import (ArrayTooLargeError, ConcretizationError, EscapedTracerError,
                     FgradTypeError, user_frame)


# ----------------------------------------------------------------------------
# Abstract values

class ShapedArray:
    """What a trace knows about a value: its shape, dtype and weak type."""
    __slots__ = ("shape", "dtype", "weak_type")

    def __init__(self, shape, dtype, weak_type=False):
        self.shape = tuple(shape)
        self.dtype = dtype
        self.weak_type = weak_type

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return math.prod(map(int, self.shape))

    def __eq__(self, other):
        return (type(other) is ShapedArray and self.shape == other.shape
                and self.dtype == other.dtype and self.weak_type == other.weak_type)

    def __hash__(self):
        return hash((self.shape, self.dtype, self.weak_type))

    def str_short(self):
        return f"{dtypes.short_name(self.dtype)}[{','.join(map(str, self.shape))}]"

    def __repr__(self):
        return f"ShapedArray({self.str_short()}{', weak' if self.weak_type else ''})"


# The most bytes an array may span: NumPy's and the native kernels' indices and
# byte offsets are signed 64-bit integers.
MAX_BYTES = np.iinfo(np.intp).max


def check_size(name, shape, dtype=None):
    """Raise ArrayTooLargeError, naming the operation `name`, when an array of this
    shape (Python ints) and dtype (None: one byte per element) would span more
    than MAX_BYTES."""
    n = math.prod(shape)
    itemsize = 1 if dtype is None else np.dtype(dtype).itemsize
    if n * itemsize <= MAX_BYTES:
        return
    dims = ",".join(map(str, shape))
    what = (f"shape ({dims}) would have {n} elements" if dtype is None else
            f"result {dtypes.short_name(np.dtype(dtype))}[{dims}] would have {n} elements "
            f"({n * itemsize} bytes)")
    raise ArrayTooLargeError(
        f"{name}: the {what}, about 2^{(n * itemsize).bit_length() - 1} bytes; an array "
        f"may span at most 2^63 - 1 bytes (signed 64-bit indices)",
        hint="the shape is probably computed wrongly (a product or a broadcast of large "
             "dimensions); print the operands' shapes")


def check_avals(name, avals):
    """check_size for each of an operation's result avals."""
    for a in avals:
        if len(a.shape) > 1 or (a.shape and a.shape[0] > 1 << 59):
            check_size(name, a.shape, a.dtype)


def get_aval(x):
    """The abstract value of an fgrad Array, tracer, NumPy array or Python scalar."""
    t = type(x)
    if t is Array:
        v = x._value
        return ShapedArray(v.shape, v.dtype, x.weak_type)
    if isinstance(x, Tracer):
        return x.aval
    if isinstance(x, (np.ndarray, np.generic)):
        return ShapedArray(x.shape, dtypes.canonicalize(x.dtype), False)
    if isinstance(x, (bool, int, float, complex)):
        return ShapedArray((), dtypes.dtype_of_python_scalar(x), True)
    raise TypeError(f"fgrad cannot use a value of type {t.__name__} as an array "
                    f"(value: {x!r}); pass a NumPy array, an fgrad array or a Python number")


def is_weak(x):
    t = type(x)
    if t is Array:
        return x.weak_type
    if isinstance(x, Tracer):
        return x.aval.weak_type
    return t in (bool, int, float, complex)  # NumPy scalars (np.float64 is a float subclass) are strong


# ----------------------------------------------------------------------------
# Primitives

class Primitive:
    """A named operation. Its rules are attached where it is defined.

    impl(*numpy_values, **params) -> numpy value(s)
    abstract_eval(*avals, **params) -> aval(s)          (shape/dtype rule)
    jvp(primals, tangents, **params) -> (out, tangent)   (tangent None = zero)
    transpose(cts, *args, **params) -> cotangent per arg (linear primitives)
    batch                                                (batching rule, vmap)
    tape: how eager reverse mode records it (tape.py; set with the rules above by
    ad.defjvp, deflinear, defbilinear, defjvp_zero; None: linearized on its own);
    tape_rules: NumPy forms of the element-wise tangent rules (ad.deftape).
    weak_args: indices of the arguments whose weak type the output inherits.
    float_impl: the impl for operands known to be real floats of one dtype (the lean
    paths; None: impl), e.g. Python's operator for add, sub and mul.
    effectful: the primitive does something besides computing its outputs (a
    debug callback): tracing always records it, simplification never drops it.
    """
    effectful = False
    float_impl = None

    def __init__(self, name, multiple_results=False, weak_args=None):
        self.name = name
        self.multiple_results = multiple_results
        self.weak_args = weak_args
        self.impl = None
        self.abstract_eval = None
        self.jvp = None
        self.jvp_rules = None  # set by ad.defjvp: one tangent rule per argument
        self.out_weak_types = None  # params -> weak type per output, when inputs don't decide
        self.elementwise = False  # out[i] depends only on the (broadcast) inputs at i
        self.transpose = None
        self.batch = None
        self.tape = None
        self.tape_rules = None  # set by ad.deftape: NumPy forms of jvp_rules

    def bind(self, *args, **params):
        trace = _state.trace
        if trace is not eval_trace:
            trace = _threads.state.trace
        return trace.process_primitive(self, args, params)

    def __repr__(self):
        return self.name


# ----------------------------------------------------------------------------
# Traces and the current-trace state

class _TraceState:
    """The process-wide hint the fast paths read first (the native jit dispatcher
    too, through its slot): `eval_trace` while no thread is inside a transform,
    else `SOME_THREAD_TRACES`, and each thread's own trace is in its `ThreadTrace`."""
    __slots__ = ("trace",)


class ThreadTrace:
    """One thread's current trace; `depth`: how many `enter_trace`s are open."""
    __slots__ = ("trace", "depth")

    def __init__(self, trace):
        self.trace = trace
        self.depth = 0


class _Threads(threading.local):
    def __init__(self):
        self.state = ThreadTrace(eval_trace)


class _SomeThreadTraces:
    """The hint's value while some thread is inside a transform: read your own."""
    def __repr__(self):
        return "<per-thread traces>"


SOME_THREAD_TRACES = _SomeThreadTraces()
_state = _TraceState()
_registration = threading.Lock()
_acquire, _release = _registration.acquire, _registration.release   # bound once
_threads_inside = 0     # threads with an open enter_trace (guarded by _registration)


def thread_state():
    """This thread's ThreadTrace."""
    return _threads.state


def current_trace():
    trace = _state.trace
    return trace if trace is eval_trace else _threads.state.trace


def enter_trace(ts, trace):
    """Make `trace` current in the thread whose ThreadTrace is `ts` (the calling
    thread's); returns what `leave_trace` needs. The first open one of a thread
    turns the process-wide hint to per-thread, so other threads stop taking it for
    theirs; entering eval_trace from eval_trace changes nothing."""
    global _threads_inside
    prev = ts.trace
    if ts.depth == 0:
        if trace is eval_trace:
            return None
        _acquire()
        _threads_inside += 1
        _state.trace = SOME_THREAD_TRACES
        _release()
    ts.depth += 1
    ts.trace = trace
    return prev


def leave_trace(ts, prev):
    """Undo the matching enter_trace (`prev`: what it returned)."""
    global _threads_inside
    if prev is None:
        return
    ts.trace = prev
    ts.depth -= 1
    if ts.depth == 0:
        _acquire()
        _threads_inside -= 1
        if not _threads_inside:
            _state.trace = eval_trace
        _release()


class set_current_trace:
    """Context manager: make `trace` current in this thread for the duration of a block."""
    __slots__ = ("trace", "ts", "prev")

    def __init__(self, trace):
        self.trace = trace

    def __enter__(self):
        self.ts = ts = _threads.state
        self.prev = enter_trace(ts, self.trace)

    def __exit__(self, *exc):
        leave_trace(self.ts, self.prev)


def bind_at(trace, prim, args, params):
    """Bind `prim` with `trace` current (the fast path for handing work to a parent)."""
    ts = _threads.state
    if not ts.depth:    # not inside a transform: the hint must learn of it
        with set_current_trace(trace):
            return trace.process_primitive(prim, args, params)
    prev = ts.trace
    ts.trace = trace
    try:
        return trace.process_primitive(prim, args, params)
    finally:
        ts.trace = prev


class Trace:
    """A level of interpretation. `parent` is the level that runs its constants."""
    parent = None
    rule_trace = None  # where a JVP-like trace runs its rules (tangents live there)
    alive = True
    # What this trace is for and the user's line that started it (escaped-tracer errors).
    description = "a transform"
    # (code, offset of the calling instruction): its line (`f_lineno` costs about as
    # much as finding the frame) is looked up only for a message, by `origin`
    origin_at = None

    def mark_origin(self, skip=0):
        """Remember the user's source line that applied this transform. `skip`: how
        many of the callers are known to be fgrad's (passed over unexamined)."""
        f = user_frame(1 + skip)
        if f is not None:
            self.origin_at = (f.f_code, f.f_lasti)

    @property
    def origin(self):
        """'file:line (in function)' of the line that applied this transform, or None."""
        if self.origin_at is None:
            return None
        code, at = self.origin_at
        line = next((n for start, end, n in code.co_lines() if start <= at < end), None)
        return f"{code.co_filename}:{line} (in {code.co_name})"

    # Every concrete trace (EvalTrace, JVPTrace, JaxprTrace, BatchTrace) defines these.
    def process_primitive(self, prim, args, params):
        raise TypeError(f"{type(self).__name__} cannot interpret {prim.name}")

    def process_custom_jvp_call(self, prim, fun, jvp, args, params):
        raise TypeError(f"{type(self).__name__} cannot interpret custom_jvp functions")

    def process_custom_vjp_call(self, prim, fun, fwd, bwd, args, params):
        raise TypeError(f"{type(self).__name__} cannot interpret custom_vjp functions")

    def lean_float(self, prim, x, y, swap):
        """The lean path of `lean_unary` and `eager_float_pair` for this trace (the
        same arguments; y is None for one operand): the primitive's result, or None
        where fgrad.numpy must promote the operands and bind. None here: no lean path."""
        return None

    def finish(self):
        """Mark this trace finished: its tracers may no longer be used."""
        self.alive = False


def check_live(x, receiver=None):
    """Check a tracer that `receiver` (a trace) does not own: its transform must not
    have finished, and it must belong to an enclosing level of `receiver`."""
    if not isinstance(x, Tracer):
        return
    trace = x._trace
    if not trace.alive:
        where = f", which was applied at {trace.origin}," if trace.origin else ""
        raise EscapedTracerError(
            f"A traced value ({x.aval.str_short()}) was created inside {trace.description}"
            f"{where} and used after that transform finished. It was probably stored in "
            f"a global variable, an attribute or a closure while tracing, then used later."
            f"\n  hint: return the value from the transformed function instead.")
    level = receiver
    while level is not None:
        if level is trace or level.rule_trace is trace:
            return
        level = level.parent
    if receiver is not None:
        raise TracerLevelError(x)


class TracerLevelError(EscapedTracerError):
    """A live tracer reached a level below its own trace, e.g. because a custom
    derivative rule closed over it; custom-call handlers catch this and retry."""

    def __init__(self, tracer):
        self.trace = tracer._trace
        super().__init__(
            f"A traced value ({tracer.aval.str_short()}) of {self.trace.description} was "
            f"used at an outer level of evaluation, outside the function being transformed "
            f"(for example by a custom_vjp rule that closes over it).\n  hint: pass the "
            f"value to the function as an argument instead of closing over it.")


class EvalTrace(Trace):
    """The bottom level: primitives run NumPy on concrete values."""
    description = "eager evaluation"

    def process_primitive(self, prim, args, params):
        if prim.elementwise:
            _check_operand_kinds(prim, args, params)
        if (not params and output_check is None
                and prim.weak_args is None and not prim.multiple_results):
            # The common case, lean: one or two host Arrays in, one result out; it
            # gives what the general path below would.
            n = len(args)
            if n == 2:
                x, y = args
                if (type(x) is Array and type(y) is Array and type(x._value) in _NUMPY_OPERANDS
                        and type(y._value) in _NUMPY_OPERANDS):
                    try:
                        return Array(prim.impl(x._value, y._value), x.weak_type and y.weak_type)
                    except Exception as e:
                        _explain_impl_failure(prim, args, params, e)
                        raise
            elif n == 1:
                x = args[0]
                if type(x) is Array and type(x._value) in _NUMPY_OPERANDS:
                    try:
                        return Array(prim.impl(x._value), x.weak_type)
                    except Exception as e:
                        _explain_impl_failure(prim, args, params, e)
                        raise
        vals = []
        weak = True
        weak_args = prim.weak_args
        borrowed = False     # a NumPy array of the caller's is an operand
        i = 0
        for a in args:
            if type(a) is Array:
                vals.append(a._value)
                w = a.weak_type
            elif type(a) is np.ndarray or isinstance(a, np.generic):
                vals.append(a)
                borrowed = borrowed or type(a) is np.ndarray
                w = False
            else:
                vals.append(_concrete_value(a))
                w = is_weak(a)
            if not w and (weak_args is None or i in weak_args):
                weak = False
            i += 1
        try:
            device = placement.on_device(vals) if placement.array_types else None
            if device is not None:
                out = device.run_eager(prim, vals, params)   # e.g. CuPy values: on their GPU
            else:
                out = prim.impl(*vals, **params)
        except Exception as e:
            _explain_impl_failure(prim, args, params, e)
            raise
        if borrowed:
            out = _unshared(out, vals, prim.multiple_results)
        if output_check is not None:
            output_check(prim, vals, out, params)
        if "weak_type" in params:
            weak = params["weak_type"]
        elif not args:
            weak = False
        if prim.multiple_results:
            if prim.out_weak_types is not None:
                return [Array(o, w) for o, w in zip(out, prim.out_weak_types(params))]
            return [Array(o, weak) for o in out]
        return Array(out, weak)

    def process_custom_jvp_call(self, prim, fun, jvp, args, params):
        return fun(*args)

    def process_custom_vjp_call(self, prim, fun, fwd, bwd, args, params):
        return fun(*args)


def _check_operand_kinds(prim, args, params):
    """Raise the shape rule's error where an element-wise primitive gets operands of
    a kind its rule refuses (lax.sin of an int8, lax.div of bools): jit raises it
    while tracing, and NumPy's impl would otherwise promote them silently. The kinds
    are the rule's (`_util.nary_rule`); a rule without them is left to the impl."""
    kinds = getattr(prim.abstract_eval, "kinds", None)
    if kinds is None:
        return
    for a in args:
        dt = getattr(a, "dtype", None)
        if dt is None or dt.kind not in kinds:      # (a Python number: the rule decides)
            prim.abstract_eval(*[get_aval(a) for a in args], **params)
            return


# The exact NumPy types an eager fast path takes as operands without a copy (the
# scalar types of fgrad's dtypes, and ndarray; subclasses of ndarray take the
# general path).
_NUMPY_OPERANDS = frozenset([np.ndarray] + [d.type for d in dtypes.SUPPORTED])
# The floating-point and complex dtypes the lean paths take.
_INEXACT = frozenset(d for d in dtypes.SUPPORTED if d.kind in "fc")
_FLOATS = frozenset(d for d in dtypes.SUPPORTED if d.kind == "f")
# Array objects made without calling __init__ (the lean paths' hot spots): _new(Array),
# then both slots set.
_new = object.__new__


def lean_unary(prim, general):
    """The eager function of `prim`, an element-wise primitive of one operand and no
    parameters: for a floating-point or complex host Array or NumPy value (of a kind
    its shape rule takes) with nothing tracing or checking it runs the impl at once
    (what EvalTrace would give, without its general bookkeeping); under a transform
    the current trace's `lean_float` answers; `general(x)` runs everything else."""
    impl = prim.impl
    # the float and complex dtypes the shape rule takes (EvalTrace refuses the others)
    kinds = getattr(prim.abstract_eval, "kinds", "fc")
    lean_dtypes = frozenset(d for d in _INEXACT if d.kind in kinds)
    from .lax import quiet     # loaded with lax's primitives, before any lean_unary
    # a quiet impl (lax/quiet.py): its floating-point state is set here, one call fewer
    inner = getattr(impl, "quiet_inner", None)
    if inner is not None:
        get_state, set_state, reset_state = (quiet._extobj_contextvar.get,
                                             quiet._extobj_contextvar.set,
                                             quiet._extobj_contextvar.reset)

    def fn(x, /):
        trace = _state.trace
        if trace is not eval_trace:
            trace = _threads.state.trace
            if trace is not eval_trace:
                out = trace.lean_float(prim, x, None, False)
                return general(x) if out is None else out
        t = type(x)
        if t is Array:
            v = x._value
            if type(v) not in _NUMPY_OPERANDS:
                return general(x)   # a device value
            weak = x.weak_type
        elif t in _NUMPY_OPERANDS:
            v = x
            weak = False
        else:
            return general(x)
        if v.dtype not in lean_dtypes or output_check is not None:
            return general(x)
        try:
            if inner is None:
                out = impl(v)
            else:   # as quiet's wrapper does
                current = get_state()
                made_from, state = quiet._prepared
                token = set_state(state if made_from is current else quiet._prepare(current))
                try:
                    out = inner(v)
                finally:
                    reset_state(token)
        except Exception:
            return general(x)   # it raises the error the shape rule gives
        if t is not Array and type(out) is np.ndarray and (out is v or out.base is not None):
            out = _unshared(out, [v], False)
        a = _new(Array)
        a._value = out
        a.weak_type = weak
        return a
    return fn


# (Python int or float, dtype, the type of the value it meets) -> the NumPy value it
# is lifted to: the scalar beside a scalar (converting an int or float to a float32
# scalar costs about four times the dictionary lookup), a read-only 0-d array beside
# an ndarray (NumPy takes a 0-d array faster than a scalar: 16 float32s times a
# float32 scalar 0.37 µs, times a 0-d array 0.23 µs; the same loop, the same bits).
_LIFTED = {}


def lift_number(y, dtype, like):
    """dtype.type(y) for a Python int or float `y` meeting a value of type `like` (its
    0-d array if that is np.ndarray), remembered in _LIFTED (but not for zeros, whose
    sign equality ignores, NaNs, or beyond 1024 numbers)."""
    v = dtype.type(y)
    if like is np.ndarray:
        v = np.array(v)
        v.flags.writeable = False     # shared between calls
    if y and y == y and len(_LIFTED) < 1024:
        _LIFTED[y, dtype, like] = v
    return v


def eager_float_pair(prim, x, y, swap=False):
    """prim(x, y) (prim(y, x) with `swap`) run at once for an Array `x` of a
    floating-point or complex dtype and `y` an Array or NumPy value of the same
    dtype, or a Python int or float (lifted as promotion does: weakly typed, x's
    dtype), with nothing tracing or checking; None where the general path must run
    it. `prim`: an element-wise primitive of two operands and no parameters. Under a
    transform, the current trace's `lean_float` answers."""
    trace = _state.trace
    if trace is not eval_trace:
        trace = _threads.state.trace
        if trace is not eval_trace:
            return trace.lean_float(prim, x, y, swap)
    if type(x) is not Array or output_check is not None:
        return None
    xv = x._value
    dtype = xv.dtype
    tx = type(xv)
    if tx not in _NUMPY_OPERANDS:
        return None
    if dtype not in _FLOATS and (    # complex: where the shape rule takes it
            dtype not in _INEXACT or "c" not in getattr(prim.abstract_eval, "kinds", "fc")):
        return None
    t = type(y)
    if t is Array:
        yv = y._value
        if yv.dtype != dtype or type(yv) not in _NUMPY_OPERANDS:
            return None
        weak = x.weak_type and y.weak_type
    elif t is float or t is int:    # the value np.asarray(y, dtype) holds
        yv = _LIFTED.get((y, dtype, tx))
        if yv is None:
            yv = lift_number(y, dtype, tx)
        weak = x.weak_type
    elif t is dtype.type or (t is np.ndarray and y.dtype == dtype):
        yv = y
        weak = False
    else:
        return None
    impl = prim.float_impl
    if impl is None or dtype.kind != "f":
        impl = prim.impl
    try:
        out = impl(yv, xv) if swap else impl(xv, yv)
    except Exception:
        return None     # the general path raises the error the shape rule gives
    if t is np.ndarray and type(out) is np.ndarray and (out is yv or out.base is not None):
        out = _unshared(out, [yv], False)
    a = _new(Array)
    a._value = out
    a.weak_type = weak
    return a


def _unshared(out, vals, multiple):
    """`out` with each result that is, or views, a NumPy operand replaced by a copy:
    an Array never shares memory with an array its caller may write into."""
    def own(o):
        if type(o) is not np.ndarray or (o.base is None and
                                         not any(o is v for v in vals)):
            return o
        if any(type(v) is np.ndarray and np.may_share_memory(o, v) for v in vals):
            return o.copy()
        return o
    return [own(o) for o in out] if multiple else own(out)


def _concrete_value(a):
    if isinstance(a, Tracer):
        check_live(a, eval_trace)
    if type(a) in (bool, int, float, complex):
        return np.asarray(a, dtypes.dtype_of_python_scalar(a))
    return np.asarray(a)


def _explain_impl_failure(prim, args, params, err):
    """Turn a raw NumPy failure into the same error the shape rule gives when tracing."""
    if prim.abstract_eval is None or isinstance(err, FgradTypeError):
        return
    avals = [get_aval(a) for a in args]
    out = prim.abstract_eval(*avals, **params)  # raises FgradTypeError when inputs are bad
    check_avals(prim.name, out if prim.multiple_results else [out])


eval_trace = EvalTrace()
_state.trace = eval_trace
_threads = _Threads()

# Called as output_check(prim, input values, output, params) after every eager
# primitive when set (fgrad.debug installs its NaN/Inf checker here).
output_check = None


def set_output_check(fn):
    global output_check
    output_check = fn


# ----------------------------------------------------------------------------
# Array methods shared by eager arrays and tracers

_fnp_module = None


def _fnp():
    global _fnp_module
    if _fnp_module is None:
        from fgrad import numpy as fnp
        _fnp_module = fnp
    return _fnp_module


# The operators' dispatch table: fgrad.numpy name -> primitive, for the operators
# whose fgrad.numpy function, on floating-point operands of one dtype (or one such
# operand and a Python int or float), only binds that primitive (filled in by
# fgrad._src.numpy.ufuncs). Other operands, and operands the primitive refuses,
# take the fgrad.numpy function (its promotion and its errors).
OPERATOR_PRIMITIVES = {}


def _operands(x, y):
    """(x, y) ready for a float primitive, the Python number lifted as promotion
    would (weakly typed, x's dtype); None where promotion has more to do."""
    dtype = x.dtype
    if dtype.kind not in "fc":
        return None
    t = type(y)
    if t is float or t is int:
        return x, Array(np.asarray(y, dtype), True)
    if (t is Array or isinstance(y, Tracer)) and y.dtype == dtype:
        return x, y
    if (t is np.ndarray or t is dtype.type) and y.dtype == dtype:
        return x, Array(np.array(y), False)     # a copy, as fgrad.numpy.asarray makes
    return None


def _binop(name, reflected=False):
    prim = None     # OPERATOR_PRIMITIVES[name], once the table has it

    def method(self, other):
        nonlocal prim
        if prim is None:
            prim = OPERATOR_PRIMITIVES.get(name)
        if prim is not None:
            trace = _state.trace
            if trace is not eval_trace:
                trace = _threads.state.trace
            out = (eager_float_pair(prim, self, other, reflected) if trace is eval_trace
                   else trace.lean_float(prim, self, other, reflected))
            if out is not None:
                return out
            pair = _operands(self, other)
            if pair is not None:
                try:
                    return prim.bind(pair[1], pair[0]) if reflected else prim.bind(*pair)
                except FgradTypeError:
                    pass     # the fgrad.numpy function below names the operation
        fn = getattr(_fnp(), name)
        return fn(other, self) if reflected else fn(self, other)
    method.__name__ = name
    return method


def _method(name):
    def method(self, *args, **kwargs):
        return getattr(_fnp(), name)(self, *args, **kwargs)
    method.__name__ = name
    return method


def _in_place(name, instead):
    """A method standing for NumPy's in-place `name`: it says what to write instead."""
    def method(self, *args, **kwargs):
        raise TypeError(f"x.{name}(...) changes a NumPy array in place, and fgrad arrays "
                        f"are immutable.\n  hint: {instead}")
    method.__name__ = name
    return method


# NumPy methods that change their array in place -> the fgrad way to write them
_IN_PLACE_METHODS = {
    "sort": "x = fgrad.numpy.sort(x) (or fgrad.numpy.sort(x, axis=...))",
    "fill": "x = fgrad.numpy.full_like(x, value)",
    "put": "x = x.at[indices].set(values) (on x.ravel() for flat indices)",
    "itemset": "x = x.at[index].set(value)",
    "resize": "x = fgrad.numpy.reshape(x, shape), or concatenate/slice to change the size",
    "partition": "x = fgrad.numpy.sort(x) (a full sort is also a partition)",
    "setflags": "fgrad arrays have no writeable flag; x.at[...] makes updated copies",
}


class ArrayMethods:
    """Operators and NumPy-style methods, shared by `Array` and `Tracer`."""
    __slots__ = ()
    __array_priority__ = 100

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return math.prod(map(int, self.shape))

    @property
    def T(self):
        return _fnp().transpose(self)

    @property
    def real(self):
        return _fnp().real(self)

    @property
    def imag(self):
        return _fnp().imag(self)

    @property
    def at(self):
        from fgrad._src.numpy.indexing import IndexUpdateHelper
        return IndexUpdateHelper(self)

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self.shape[0]))

    def __getitem__(self, idx):
        from fgrad._src.numpy.indexing import getitem
        return getitem(self, idx)

    def __setitem__(self, idx, value):
        text = _index_text(idx)
        raise TypeError(
            f"fgrad arrays are immutable: x[{text}] = ... cannot change x in place.\n"
            f"  hint: x = x.at[{text}].set(value) makes the updated array (also .add, "
            f".multiply, .min, .max); under jit it is updated in place when possible")

    def __delitem__(self, idx):
        raise TypeError(
            f"fgrad arrays are immutable: del x[{_index_text(idx)}] cannot change x.\n"
            f"  hint: select what to keep instead, e.g. x = x[mask] or "
            f"x = fgrad.numpy.concatenate([x[:i], x[i + 1:]])")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        fn = getattr(_fnp(), ufunc.__name__, None)
        if method == "__call__" and fn is not None and not kwargs:
            return fn(*inputs)
        if method == "__call__" and "out" in kwargs:
            # NumPy writes into its own arrays (`numpy_array += fgrad_array`): let it,
            # on fgrad values converted to NumPy (a traced value says why it cannot)
            return ufunc(*[np.asarray(x) if isinstance(x, ArrayMethods) else x
                           for x in inputs], **kwargs)
        return NotImplemented

    __add__, __radd__ = _binop("add"), _binop("add", True)
    __sub__, __rsub__ = _binop("subtract"), _binop("subtract", True)
    __mul__, __rmul__ = _binop("multiply"), _binop("multiply", True)
    __truediv__, __rtruediv__ = _binop("true_divide"), _binop("true_divide", True)
    __floordiv__, __rfloordiv__ = _binop("floor_divide"), _binop("floor_divide", True)
    __mod__, __rmod__ = _binop("remainder"), _binop("remainder", True)
    __pow__, __rpow__ = _binop("power"), _binop("power", True)
    __matmul__, __rmatmul__ = _binop("matmul"), _binop("matmul", True)
    __and__, __rand__ = _binop("bitwise_and"), _binop("bitwise_and", True)
    __or__, __ror__ = _binop("bitwise_or"), _binop("bitwise_or", True)
    __xor__, __rxor__ = _binop("bitwise_xor"), _binop("bitwise_xor", True)
    __lshift__, __rlshift__ = _binop("left_shift"), _binop("left_shift", True)
    __rshift__, __rrshift__ = _binop("right_shift"), _binop("right_shift", True)
    __lt__, __le__ = _binop("less"), _binop("less_equal")
    __gt__, __ge__ = _binop("greater"), _binop("greater_equal")
    __eq__, __ne__ = _binop("equal"), _binop("not_equal")
    def __neg__(self):
        return _fnp().negative(self)

    __pos__ = _method("positive")
    __abs__ = _method("abs")
    __invert__ = _method("invert")
    __hash__ = None

    sum = _method("sum")
    mean = _method("mean")
    var = _method("var")
    std = _method("std")
    max = _method("max")
    min = _method("min")
    prod = _method("prod")
    argmax = _method("argmax")
    argmin = _method("argmin")
    all = _method("all")
    any = _method("any")
    cumsum = _method("cumsum")
    astype = _method("astype")
    ravel = _method("ravel")
    flatten = _method("ravel")
    squeeze = _method("squeeze")
    swapaxes = _method("swapaxes")
    dot = _method("dot")
    clip = _method("clip")
    round = _method("round")
    conj = _method("conj")
    conjugate = _method("conjugate")
    trace = _method("trace")
    diagonal = _method("diagonal")
    repeat = _method("repeat")

    def reshape(self, *shape, order="C"):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = shape[0]
        return _fnp().reshape(self, shape, order=order)

    def transpose(self, *axes):
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = axes[0]
        return _fnp().transpose(self, axes or None)

    @property
    def mT(self):
        """The matrix transpose: the last two axes swapped."""
        return _fnp().matrix_transpose(self)

    def __array_namespace__(self, /, *, api_version=None):
        """The Python Array API standard's namespace for fgrad arrays: fgrad.array_api."""
        if api_version not in (None, "2021.12", "2022.12", "2023.12"):
            raise ValueError(f"__array_namespace__: fgrad implements the Array API standard "
                             f"2023.12 (and the earlier versions it contains), not "
                             f"{api_version!r}\n  hint: api_version=None or '2023.12'")
        from fgrad import array_api
        return array_api

    @property
    def device(self):
        """Where a traced value's computation runs: the default device (concrete
        Arrays say where their data is)."""
        from .array_api.devices import default_device
        return default_device()

    def to_device(self, device, /, *, stream=None):
        """This array on `device` (a Device from fgrad.devices() or x.device)."""
        if stream is not None:
            raise ValueError("to_device: fgrad has no streams; pass stream=None")
        from .array_api.devices import place
        return place(self, device)


for _name, _instead in _IN_PLACE_METHODS.items():
    setattr(ArrayMethods, _name, _in_place(_name, _instead))


def _index_text(idx):
    """An index as code (`0`, `1:3`, `..., None`), or `i` when it holds arrays."""
    def one(i):
        if i is Ellipsis:
            return "..."
        if i is None or type(i) is bool:
            return repr(i)
        if isinstance(i, (int, np.integer)):
            return str(int(i))
        if type(i) is slice:
            parts = ["" if p is None else one(p) for p in (i.start, i.stop, i.step)]
            return ":".join(parts if i.step is not None else parts[:2])
        raise TypeError
    try:
        if type(idx) is tuple:
            return ", ".join(map(one, idx)) if idx else "()"
        return one(idx)
    except TypeError:
        return "i"


# ----------------------------------------------------------------------------
# Eager arrays

class HeldValue:
    """shape, dtype and aval read from a held NumPy value `_value` and its weak-type
    flag `weak_type`: an Array's, and the eager tape's tracer's (tape.TapeTracer)."""
    __slots__ = ()

    @property
    def shape(self):
        return self._value.shape

    @property
    def dtype(self):
        return self._value.dtype

    @property
    def aval(self):
        return ShapedArray(self._value.shape, self._value.dtype, self.weak_type)


class Array(HeldValue, ArrayMethods):
    """An immutable concrete array: a NumPy value (or, on a GPU, a CuPy value) plus
    its weak-type flag. `Array(value)` takes `value` as it is, without a copy (the
    internal constructor): nothing may write into it afterwards. Data that is
    still written to elsewhere becomes an Array through fgrad.numpy.asarray or
    fgrad.numpy.array, which copy it."""
    __slots__ = ("_value", "weak_type")

    def __init__(self, value, weak_type=False):
        self._value = value
        self.weak_type = weak_type

    @property
    def device(self):
        """The Device this array lives on (see fgrad.devices)."""
        return placement.device_of(self._value)

    def __array__(self, dtype=None, copy=None):
        if placement.platform_of(self._value) is not None:
            raise TypeError(
                f"Cannot convert an array on {self.device!r} ({self.aval.str_short()}) to a "
                f"NumPy array implicitly: moving data off the GPU is explicit in fgrad.\n"
                f"  hint: x = fgrad.device_put(x, fgrad.devices('cpu')[0]) first")
        v = np.asarray(self._value)
        if dtype is not None and v.dtype != dtype:
            return v.astype(dtype)
        if copy:
            return v.copy()
        v = v.view()
        v.flags.writeable = False  # Arrays are immutable: NumPy gets a read-only view
        return v

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """This array's buffer as a DLPack capsule, shared (read-only where the
        consumer's protocol can say so); see fgrad/_src/dlpack.py."""
        from .dlpack import export
        return export(self._value, stream, max_version, dl_device, copy)

    def __dlpack_device__(self):
        from .dlpack import device
        return device(self._value)

    def __bool__(self):
        return bool(self._value)

    def __float__(self):
        return float(self._value)

    def __int__(self):
        return int(self._value)

    def __index__(self):
        return int(self._value.__index__())

    def __complex__(self):
        return complex(self._value)

    def item(self, *args):
        return self._value.item(*args)

    def tolist(self):
        return _host(self._value).tolist()

    def __format__(self, spec):
        if self._value.ndim == 0:
            return format(self._value.item(), spec)
        return format(str(self), spec)

    def __repr__(self):
        body = np.array2string(_host(self._value), separator=", ", prefix="Array(")
        extra = ", weak_type=True" if self.weak_type else ""
        return f"Array({body}, dtype={self._value.dtype}{extra})"

    def __str__(self):
        return str(_host(self._value))

    def __reduce__(self):
        return (Array, (_host(self._value), self.weak_type))

    def __copy__(self):
        # a new Array object on the same (immutable) buffer: donating one of the two
        # to a jitted function copies it first and leaves the other intact
        return Array(self._value, self.weak_type)

    def __deepcopy__(self, memo):
        return self.__copy__()


def _host(value):
    """A NumPy copy of a device value, for printing and pickling; NumPy values as they are."""
    return placement.to_host(value)


# ----------------------------------------------------------------------------
# Tracers

class Tracer(ArrayMethods):
    """A value being traced by a transform; it belongs to one trace."""
    __slots__ = ("_trace",)

    @property
    def shape(self):
        return self.aval.shape

    @property
    def dtype(self):
        return self.aval.dtype

    def _concrete(self, what):
        raise ConcretizationError(
            f"{what} needs a concrete value, but this is a traced value "
            f"({self.aval.str_short()}) inside {self._trace.description}; its value is "
            f"not known while tracing.\n  hint: use fgrad.numpy.where or fgrad.lax.cond "
            f"for value-dependent choices, or mark the argument static "
            f"(static_argnums/static_argnames) when jitting.")

    def __bool__(self):
        return self._concrete("Python control flow (bool())")

    def __float__(self):
        return self._concrete("float()")

    def __int__(self):
        return self._concrete("int()")

    def __index__(self):
        return self._concrete("using a value as an index (__index__)")

    def item(self):
        return self._concrete("item()")

    def tolist(self):
        return self._concrete("tolist()")

    def __array__(self, dtype=None, copy=None):
        raise ConcretizationError(
            f"Cannot convert a traced value ({self.aval.str_short()}) inside "
            f"{self._trace.description} to a NumPy array: NumPy would drop what the "
            f"transform is tracking.\n  hint: use fgrad.numpy instead of numpy inside "
            f"transformed functions, or wrap the value in fgrad.stop_gradient and convert "
            f"after the transform returns.")

    def __dlpack__(self, **kwargs):
        raise ConcretizationError(
            f"Cannot export a traced value ({self.aval.str_short()}) inside "
            f"{self._trace.description} through DLPack: its value is not known while "
            f"tracing.\n  hint: call it outside jit/grad/vmap, on the result")

    __dlpack_device__ = __dlpack__

    def __repr__(self):
        return f"Traced<{self.aval.str_short()}> in {self._trace.description}"


def full_lower(x):
    """An eager Array for a NumPy value or Python scalar; tracers and Arrays unchanged.
    A NumPy array is copied (as fgrad.numpy.asarray does): the Array may outlive
    the call, and must not change when the NumPy array is written to."""
    if isinstance(x, (Array, Tracer)):
        return x
    if type(x) in (bool, int, float, complex):
        return Array(np.asarray(x, dtypes.dtype_of_python_scalar(x)), True)
    if isinstance(x, (np.ndarray, np.generic)):
        return Array(np.array(x, dtypes.canonicalize(x.dtype)), False)
    value = np.asarray(x)
    return Array(value.astype(dtypes.canonicalize(value.dtype), copy=False), False)
