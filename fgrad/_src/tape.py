"""Eager reverse mode on a tape.

`grad`, `value_and_grad` and `vjp` called with no enclosing transform run the
function once on `TapeTracer`s of a `TapeTrace`, whose tangent slot holds a node
number. Every primitive runs at once on its concrete operands; one that involves a
traced value appends an entry to the tape, and the backward pass walks the tape in
reverse, applying each primitive's own derivative rules to concrete cotangents.
Nothing is traced to a jaxpr: no avals, equations or source lines.

A primitive's tape entry follows from the rules defined with it (`prim.tape`, set
by the helpers in ad.py):

- element-wise (`defjvp`) on real floats: the Jacobian is diagonal, so each
  argument's tangent rule applied to the cotangent is its transpose (complex rules
  may be only real-linear, e.g. sign's, and are linearized instead);
- linear (`deflinear`, and convert_element_type): its transpose rule;
- bilinear (`defbilinear`, dot_general): its transpose rule, one argument at a time;
- jointly linear (select_n, concatenate, pad): its transpose rule, once;
- zero derivative (`defjvp_zero`): nothing is recorded.

Any other primitive (scatter, reductions to extrema, sort, control flow,
jit calls, linear algebra, custom_jvp/custom_vjp functions, ...) is linearized on its own by the jaxpr path (`ad.linearize_flat`)
and the transpose of that linear map is its entry. The entries run the same rules
on the same values as linearize + transpose, so gradients are the same bits.
`grad` of `grad` differentiates the inner (jaxpr-path) gradient on the outer tape.
A custom rule that closes over a traced value makes the whole call start again
on the jaxpr path (`Unsupported`).
"""
from sys import getrefcount as _refcount

import numpy as np

from . import ad, core, dtypes, placement
from .ad import (TAPE_DIAGONAL, TAPE_JOINT, TAPE_LINEAR, TAPE_ZERO,
                 JVPTracer, UndefinedPrimal)
from .config import config
from .core import Array, Tracer, TracerLevelError, check_live, full_lower, get_aval
from .lax import add, zeros_like
from .lax._util import unbroadcast

_GENERIC = "generic"
_HOST = core._NUMPY_OPERANDS   # the types of host values (a device value: the general path)
_new = object.__new__   # Arrays and tracers made without __init__ on the lean paths
_NO_PARAMS = {}   # the parameters of a lean entry (never written to)
# Real floating-point NumPy scalar types -> their dtypes (a scalar's type says its
# dtype: a dictionary lookup costs half of reading a scalar's `dtype`).
_SCALAR_DTYPES = {d.type: d for d in dtypes.SUPPORTED if d.kind == "f"}
# The entries `TapeTrace.lean_float` records, flat: (_LEAN1, prim, node, ans, id,
# value, weak) for one operand, and (_LEAN2, ..., id, value, weak) for two: the
# result's NumPy value, then each operand's node id (None: a constant), NumPy value
# and weak type. No Arrays or tracers: the tape holds only NumPy values.
_LEAN1 = "lean unary"
_LEAN2 = "lean binary"


class TapeTracer(core.HeldValue, JVPTracer):
    """A value on the tape: its primal's NumPy value `_value` and weak type are kept
    in the tracer itself (no Array per recorded op; `primal`, JVPTracer's slot, is
    unused: the property makes the Array when asked), its tangent is the node number."""
    __slots__ = ("_value", "weak_type")

    @property
    def primal(self):
        return _array(self._value, self.weak_type)


def _tracer(trace, value, weak, node):
    t = _new(TapeTracer)
    t._trace = trace
    t._value = value
    t.weak_type = weak
    t.tangent = node
    return t


def _array(value, weak):
    a = _new(Array)
    a._value = value
    a.weak_type = weak
    return a


class Unsupported(BaseException):
    """The tape cannot record this call exactly; the jaxpr path must run it. (A
    BaseException, so that a user's `except Exception` does not swallow it.)"""


def usable():
    """True where a reverse-mode call may use the tape: no enclosing transform, and
    no per-primitive checks (debug_nans) that the tape would skip. (Device arrays
    are refused as they show up: `process_primitive`.)"""
    return (core.current_trace() is core.eval_trace and config.eager_tape
            and core.output_check is None)


class TapeTrace(core.Trace):
    """Runs primitives eagerly and records how to pull cotangents back through them."""

    in_ids = out_ids = None    # the nodes of the inputs and outputs (linearize_flat)

    def __init__(self, parent, description, thread_trace):
        self.parent = self.rule_trace = parent
        self.description = description
        self.thread_trace = thread_trace    # the ThreadTrace of the thread it runs in
        self.entries = []
        self.primals = []   # per node (the inputs, then each traced output): its NumPy value

    def new_node(self, primal):
        """A tracer of a new node whose primal is the Array `primal`."""
        self.primals.append(primal._value)
        return _tracer(self, primal._value, primal.weak_type, len(self.primals) - 1)

    def _unpack(self, args):
        vals, ids, traced = [], [], False
        for a in args:
            if type(a) is TapeTracer and a._trace is self:
                vals.append(a.primal)
                ids.append(a.tangent)
                traced = True
            else:
                if isinstance(a, Tracer):
                    check_live(a, self)
                vals.append(a)
                ids.append(None)
        return vals, ids, traced

    def process_primitive(self, prim, args, params):
        if prim.tape is TAPE_DIAGONAL and not params and 0 < len(args) <= 2:
            out = self.lean_float(prim, args[0], args[1] if len(args) == 2 else None, False)
            if out is not None:
                return out
        vals, ids, traced = self._unpack(args)
        kind = prim.tape
        if not traced or kind is TAPE_ZERO:
            return core.bind_at(self.parent, prim, vals, params)
        if kind is None:
            return self._primitive_linearized(prim, vals, ids, params)
        out = core.bind_at(self.parent, prim, vals, params)   # an Array (parent: eval)
        if placement.array_types and isinstance(out._value, placement.array_types):
            raise Unsupported   # device arrays: the jaxpr path (the tape is host-only)
        if kind is TAPE_DIAGONAL:
            # operands of an element-wise primitive share a dtype: check a traced one
            k = 0
            while ids[k] is None:
                k += 1
            dtype = out._value.dtype
            if dtype.kind != "f" or vals[k]._value.dtype != dtype:
                return self._primitive_linearized(prim, vals, ids, params)
        elif kind is TAPE_LINEAR and ids[0] is None:
            return out     # only the first argument is differentiated
        if kind is not TAPE_DIAGONAL and out._value.dtype.kind not in "fc":
            return out     # an integer result has no derivative
        self.entries.append((kind, prim, params, vals, out, ids, len(self.primals), None))
        return self.new_node(out)

    def lean_float(self, prim, x, y, swap):
        """core.lean_unary and eager_float_pair on the tape, and the common case of
        `process_primitive`, lean: an element-wise primitive without parameters of
        one operand `x` (y None) or two (swapped with `swap`) on host Arrays of one
        real floating-point dtype, or this tape's tracers of them, and a Python int
        or float lifted as promotion lifts it. It runs and records what the general
        path would, without its dispatch; None where the general path must run it."""
        if prim.tape is not TAPE_DIAGONAL or core.output_check is not None:
            return None     # (TAPE_DIAGONAL: one result, no weak_args; ad.defjvp)
        t = type(x)
        if t is TapeTracer and x._trace is self:
            i0 = x.tangent
        elif t is Array:
            i0 = None
        else:
            return None
        x0 = x._value
        w0 = x.weak_type
        dtype = _SCALAR_DTYPES.get(type(x0))
        if dtype is None:
            if type(x0) is not np.ndarray:
                return None
            dtype = x0.dtype
            if dtype.kind != "f":
                return None
        if y is None:
            weak = w0
            traced = i0 is not None
        else:
            t = type(y)
            if t is float or t is int:   # the value promotion lifts y to (as eager_float_pair)
                i1, w1 = None, True
                tx = type(x0)
                x1 = core._LIFTED.get((y, dtype, tx))
                if x1 is None:
                    x1 = core.lift_number(y, dtype, tx)
            else:
                if t is TapeTracer and y._trace is self:
                    i1, x1, w1 = y.tangent, y._value, y.weak_type
                elif t is Array:
                    i1, x1, w1 = None, y._value, y.weak_type
                else:
                    return None
                d = _SCALAR_DTYPES.get(type(x1))
                if d is None:
                    if type(x1) is not np.ndarray:
                        return None
                    d = x1.dtype
                if d is not dtype and d != dtype:
                    return None
            if swap:
                i0, i1, x0, x1, w0, w1 = i1, i0, x1, x0, w1, w0
            weak = w0 and w1
            traced = i0 is not None or i1 is not None
        try:    # NumPy work only: no trace is consulted (tests check every such impl)
            impl = prim.float_impl or prim.impl    # operands: real floats of one dtype
            out = impl(x0) if y is None else impl(x0, x1)
        except Exception:
            return None     # the general path raises the error the shape rule gives
        d = _SCALAR_DTYPES.get(type(out))
        if d is None:
            d = out.dtype
        if d is not dtype and d != dtype:
            return None
        if not traced:
            return _array(out, weak)
        primals = self.primals
        node = len(primals)
        # one flat tuple of NumPy values per entry (see `_LEAN1`): each further object
        # would cost its allocation and the garbage collector's walks of the growing tape
        self.entries.append((_LEAN1, prim, node, out, i0, x0, w0) if y is None else
                            (_LEAN2, prim, node, out, i0, x0, w0, i1, x1, w1))
        primals.append(out)
        tracer = _new(TapeTracer)     # _tracer(self, out, weak, node), inline
        tracer._trace = self
        tracer._value = out
        tracer.weak_type = weak
        tracer.tangent = node
        return tracer

    def _primitive_linearized(self, prim, vals, ids, params):
        outs = self._linearized(lambda *xs: prim.bind(*xs, **params), vals, ids)
        return outs if prim.multiple_results else outs[0]

    def _linearized(self, fun, vals, ids):
        """Outputs of fun(*vals), linearized on the jaxpr path in the traced values."""
        def flat(*xs):
            out = fun(*xs)
            return list(out) if isinstance(out, (list, tuple)) else [out]
        ts = self.thread_trace
        prev = ts.trace
        ts.trace = self.parent
        try:
            outs, lin = ad.linearize_flat(flat, vals, self.description,
                                       in_mask=[i is not None for i in ids])
        except TracerLevelError as e:
            if e.trace is self:
                raise Unsupported from None   # a rule closes over one of our values
            raise
        finally:
            ts.trace = prev
        out_ids = []
        results = []
        for o, m in zip(outs, lin.out_mask):
            if m:
                out_ids.append(len(self.primals))
                results.append(self.new_node(o))
            else:
                out_ids.append(None)
                results.append(o)
        self.entries.append((_GENERIC, lin, ids, out_ids))
        return results

    def process_custom_jvp_call(self, prim, fun, jvp, args, params):
        return self._custom_call(prim, fun, jvp, args, params)

    def process_custom_vjp_call(self, prim, fun, fwd, bwd, args, params):
        return self._custom_call(prim, fun, (fwd, bwd), args, params)

    def _custom_call(self, prim, fun, rules, args, params):
        vals, ids, traced = self._unpack(args)
        if not traced:
            try:
                with core.set_current_trace(self.parent):
                    return prim.bind_with(fun, rules, vals, params)
            except TracerLevelError as e:
                if e.trace is not self:
                    raise
            # The function closes over our values: differentiate through it as usual.
            with core.set_current_trace(self):
                return fun(*vals)
        return self._linearized(lambda *xs: prim.bind_with(fun, rules, list(xs), params),
                                vals, ids)

    def transpose(self, out_cts):
        """The backward pass, as ad.LinearFunction.transpose: cotangents of the nodes
        `in_ids` (None: none, or no node) from `out_cts`, those of the nodes
        `out_ids` (both set by `linearize_flat`); run at the current trace, like
        ad.backward_pass. Eager on the
        host (`lean`), element-wise entries run their NumPy rules (prim.tape_rules) and
        keep a cotangent as its raw NumPy value, standing for Array(value) (not weakly
        typed); everything else sees the Array (`_boxed`)."""
        cts = [None] * len(self.primals)
        for i, c in zip(self.out_ids, out_cts):
            if i is not None and c is not None:
                cts[i] = c if cts[i] is None else add(cts[i], c)
        self._pull(cts)
        grads = []
        for i in self.in_ids:
            c = None if i is None else cts[i]
            grads.append(_array(c, False) if type(c) in _HOST else c)    # _boxed(c), inline
        return grads

    def _pull(self, cts):
        """Pull the cotangents `cts` (per node: None, a raw host value or an fgrad
        value) back through the tape's entries, last first, in place."""
        accumulate = self._checked if config.check_jaxprs else None
        lean = core.current_trace() is core.eval_trace and core.output_check is None
        for entry in reversed(self.entries):
            kind = entry[0]
            if kind is _LEAN1 or kind is _LEAN2:
                ct = cts[entry[2]]
                if ct is None:
                    continue
                fast = entry[1].tape_rules
                g = None if fast is None or not lean else (
                    ct if type(ct) in _HOST else _raw(ct))
                if g is None:
                    entry = _unflattened(entry)     # the general rules below
                    kind = TAPE_DIAGONAL
                else:   # its NumPy rules, last operand first (as the transposed jaxpr)
                    cts[entry[2]] = None
                    a = entry[3]
                    if kind is _LEAN1:
                        _, _, _, _, i, x, w = entry
                        c = fast[0](g, a, x)
                    else:
                        _, _, _, _, i0, x0, w0, i, x, w = entry
                        if i is not None:
                            c = fast[1](g, a, x0, x)
                            t = type(c)     # below: _contribute's common case inline
                            if (cts[i] is None and accumulate is None and
                                    (t in _SCALAR_DTYPES or (t is np.ndarray and c.shape == x.shape))):
                                cts[i] = c
                            else:
                                _contribute(cts, i, c, x, w, accumulate, lean)
                        i, w = i0, w0
                        c = None if i is None else fast[0](g, a, x0, x)
                        x = x0
                    if i is not None:
                        t = type(c)
                        if (cts[i] is None and accumulate is None and
                                (t in _SCALAR_DTYPES or (t is np.ndarray and c.shape == x.shape))):
                            cts[i] = c
                        else:
                            _contribute(cts, i, c, x, w, accumulate, lean)
                    continue
            if kind is _GENERIC:
                self._generic_backward(entry, cts, accumulate)
                continue
            _, prim, params, vals, ans, ids, node, values = entry
            ct = cts[node]
            if ct is None:
                continue
            cts[node] = None
            if kind is TAPE_DIAGONAL:
                rules = prim.jvp_rules
                fast = prim.tape_rules
                if fast is None or not lean:
                    g = None
                else:
                    g = ct if type(ct) in _HOST else _raw(ct)
                if g is not None and values is None:
                    values = _host_values(vals)   # None: an operand was not an Array
                if g is not None and values is not None:
                    a = ans._value
                else:
                    fast = None
                    ct = _boxed(ct)
                k = len(ids)
                while k:     # as the transposed jaxpr: last first
                    k -= 1
                    i = ids[k]
                    if i is None or rules[k] is None:
                        continue
                    rule = None if fast is None else fast[k]
                    if rule is not None:
                        c = rule(g, a, *values)
                        t = type(c)     # a NumPy scalar: all operands were scalars too
                        if t not in _SCALAR_DTYPES and (t not in _HOST
                                                        or c.shape != values[k].shape):
                            c = unbroadcast(Array(c, False), get_aval(vals[k]))
                    else:
                        c = rules[k](ct, ans, *vals, **params)
                        x = vals[k]
                        if c.shape != x.shape:
                            c = unbroadcast(c, get_aval(x))
                    _add_into(cts, i, c, accumulate, lean)
                continue
            ct = _boxed(ct)
            if kind is TAPE_LINEAR:
                got = [(ids[0], prim.transpose(ct, UndefinedPrimal(get_aval(vals[0])),
                                               *vals[1:], **params)[0])]
            elif kind is TAPE_JOINT:
                args = [v if i is None else UndefinedPrimal(get_aval(v))
                        for v, i in zip(vals, ids)]
                got = [(i, c) for i, c in zip(ids, prim.transpose(ct, *args, **params))
                       if i is not None and c is not None]
            else:   # TAPE_BILINEAR
                got = []
                for k in range(len(ids) - 1, -1, -1):   # as the transposed jaxpr: last first
                    if ids[k] is not None:
                        args = list(vals)
                        args[k] = UndefinedPrimal(get_aval(vals[k]))
                        got.append((ids[k], prim.transpose(ct, *args, **params)[k]))
            for i, c in got:
                if accumulate is not None:
                    accumulate(cts, i, c)
                prev = cts[i]
                cts[i] = c if prev is None else _add(prev, c, lean)

    def _generic_backward(self, entry, cts, accumulate):
        _, lin, ids, outs = entry
        out_cts = [None if o is None else _boxed(cts[o]) for o in outs]
        if all(c is None for c in out_cts):
            return
        for o in outs:
            if o is not None:
                cts[o] = None
        got = lin.transpose(out_cts)
        for i, c in zip(reversed(ids), reversed(got)):
            if i is not None and c is not None:
                if accumulate is not None:
                    accumulate(cts, i, c)
                cts[i] = c if cts[i] is None else add(_boxed(cts[i]), c)

    def _checked(self, cts, i, c):
        """config.check_jaxprs: a cotangent must have its value's shape."""
        if tuple(c.shape) != tuple(self.primals[i].shape):
            raise TypeError(f"cotangent shape {tuple(c.shape)} does not match "
                            f"{get_aval(self.primals[i]).str_short()} (a transpose rule "
                            f"is wrong)")


def _contribute(cts, i, c, x, weak, accumulate, lean):
    """Add the raw contribution c (of a NumPy rule) to the cotangent of node i, whose
    operand has the NumPy value x and weak type `weak`."""
    t = type(c)     # a NumPy scalar: all operands were scalars too
    if t not in _SCALAR_DTYPES and (t not in _HOST or c.shape != x.shape):
        c = unbroadcast(Array(c, False), get_aval(_array(x, weak)))
    _add_into(cts, i, c, accumulate, lean)


def _add_into(cts, i, c, accumulate, lean):
    """Add the contribution c to the cotangent of node i (and report it to
    `accumulate`, when given)."""
    if accumulate is not None:
        accumulate(cts, i, c)
    prev = cts[i]
    if prev is None:
        cts[i] = c
    elif type(prev) is type(c) and type(c) in _SCALAR_DTYPES and lean:
        cts[i] = prev + c    # _add's case of two raw scalars (add's float_impl)
    else:
        cts[i] = _add(prev, c, lean)


def _unflattened(entry):
    """A flat entry of `lean_float` in the general entries' form."""
    kind, prim, node, out = entry[:4]
    ops = entry[4:]     # (id, value, weak) per operand
    vals = tuple(_array(x, w) for x, w in zip(ops[1::3], ops[2::3]))
    ans = _array(out, all(w for w in ops[2::3]))
    return TAPE_DIAGONAL, prim, _NO_PARAMS, vals, ans, ops[::3], node, ops[1::3]


def _add(a, b, lean):
    """add(a, b) of two cotangents of the backward pass (raw or Arrays); with `lean`
    (eager, unchecked) two host values of one real floating-point dtype, not weakly
    typed, are added by add's impl at once (the same bits), giving a raw value."""
    if lean:
        x, y = _raw(a), _raw(b)
        if x is not None and y is not None and x.dtype == y.dtype and x.dtype.kind == "f":
            return x + y    # add's float_impl
    return add(_boxed(a), _boxed(b))


def _raw(c):
    """The host NumPy value of a cotangent that is raw or an Array not weakly typed;
    None for anything else."""
    t = type(c)
    if t in _HOST:
        return c
    if t is Array and not c.weak_type and type(c._value) in _HOST:
        return c._value
    return None


def _host_values(vals):
    """The NumPy values of operands that are all host Arrays, else None (an entry
    recorded by the general path may hold a raw operand, e.g. a jaxpr's literal
    evaluated on the tape: its rule then runs on the operands as given)."""
    values = []
    for v in vals:
        if type(v) is not Array or type(v._value) not in _HOST:
            return None
        values.append(v._value)
    return tuple(values)


def _boxed(c):
    """A cotangent as an fgrad value: a raw NumPy value becomes its Array."""
    return Array(c, False) if type(c) in _HOST else c


def linearize_flat(fun, primals, description):
    """(primal outputs, the TapeTrace, whose `transpose` is the pullback) for a flat
    function at the top level; the floating-point inputs are differentiated. Raises
    Unsupported (having run part of `fun`) where only the jaxpr path is exact."""
    ts = core._threads.state
    trace = TapeTrace(ts.trace, description, ts)
    trace.mark_origin(skip=3)   # this function, _linearize, and grad's or vjp's
    nodes = trace.primals
    args, in_ids = [], []
    for p in primals:
        if type(p) is not Array:
            raise Unsupported   # a tracer (escaped from a finished transform)
        v = p._value
        if v.dtype.kind in "fc":
            node = len(nodes)
            in_ids.append(node)
            nodes.append(v)
            w = p.weak_type
            p = _new(TapeTracer)
            p._trace, p._value, p.weak_type, p.tangent = trace, v, w, node
        else:
            in_ids.append(None)
        args.append(p)
    prev = core.enter_trace(ts, trace)
    try:
        try:
            outs = fun(*args)
        finally:
            core.leave_trace(ts, prev)
        primal_outs, out_ids = [], []
        for o in outs:
            if type(o) is TapeTracer and o._trace is trace:
                primal_outs.append(o.primal)
                out_ids.append(o.tangent)
            else:
                check_live(o)
                primal_outs.append(full_lower(o))
                out_ids.append(None)
    finally:
        trace.alive = False
    trace.in_ids, trace.out_ids = in_ids, out_ids
    return primal_outs, trace


# The cotangent 1 of a real scalar loss, raw, per NumPy scalar type.
_ONE = {t: t(1) for t in _SCALAR_DTYPES}


def value_and_grad_one(fun, checked, v, weak, description, with_value):
    """grad's lean path in one frame: the gradient of `fun` at its one argument, the
    real floating-point host value `v` (weakly typed with `weak`), on the tape, and
    with `with_value` (value, gradient). `checked(out)` checks an output that is not
    a real scalar of this tape and lowers it (grad's errors). None where the tape may
    not be used (nothing has run then); raises Unsupported as `linearize_flat` does.

    The user's line for escaped-tracer messages is found only where a traced value
    may outlive the call (the trace is referenced from elsewhere at its end): the
    calling line is the same all along the call, so the message is too."""
    ts = core._threads.state
    if ts.trace is not core.eval_trace or not config.eager_tape or core.output_check is not None:
        return None
    trace = TapeTrace(core.eval_trace, description, ts)
    trace.primals.append(v)
    alone = _refcount(trace)    # no traced value refers to the trace yet
    x = _new(TapeTracer)        # node 0: _tracer(trace, v, weak, 0), inline
    x._trace, x._value, x.weak_type, x.tangent = trace, v, weak, 0
    prev = core.enter_trace(ts, trace)
    try:
        out = fun(x)
        if type(out) is not TapeTracer or type(out._value) not in _SCALAR_DTYPES:
            out = checked(out)
    except BaseException:
        trace.mark_origin(skip=2)   # its traceback may hold traced values
        raise
    finally:
        core.leave_trace(ts, prev)
        trace.alive = False
    if type(out) is TapeTracer and out._trace is trace:
        node, ans, w = out.tangent, out._value, out.weak_type
    else:
        check_live(out)
        node, ans = None, out
    x = out = None
    if _refcount(trace) != alone:
        trace.mark_origin(skip=2)   # this function and grad's: the user's line
    g = None
    if node is not None:
        cts = [None] * len(trace.primals)
        cts[node] = _ONE.get(type(ans)) or ans.dtype.type(1)
        trace._pull(cts)
        g = cts[0]
    if g is None:
        g = zeros_like(_array(v, weak))
    elif type(g) in _HOST:
        g = _array(g, False)
    if not with_value:
        return g
    return (_array(ans, w) if node is not None else ans), g
