"""Building jaxprs by tracing: `JaxprTrace`.

A `JaxprTrace` records every primitive that touches one of its own tracers as
an equation; operations on other values (constants, or tracers of enclosing
transforms) run at the parent level and enter the jaxpr as constants. Used
for `make_jaxpr` (every input is unknown) and inside `linearize` (only the
tangents are unknown, so the recorded jaxpr is the linear part).
"""
import numpy as np

from . import core
from .config import config
from .core import Tracer, TracerLevelError, check_live, get_aval, set_current_trace
from .errors import ConcretizationError, provenance, source_info
from .jaxpr import ClosedJaxpr, Eqn, Jaxpr, Literal, Var, check_jaxpr, has_effects


class JaxprTracer(Tracer):
    __slots__ = ("var",)

    def __init__(self, trace, var):
        self._trace = trace
        self.var = var

    @property
    def aval(self):
        return self.var.aval

    @property
    def shape(self):
        return self.var.aval.shape

    @property
    def dtype(self):
        return self.var.aval.dtype

    def _concrete(self, what):
        found = self._trace.inputs_behind(self.var)
        if not found:
            return super()._concrete(what)
        listed = ", ".join(repr(display) for display, _ in found)
        names = tuple(dict.fromkeys(h for _, h in found if isinstance(h, str)))
        nums = tuple(dict.fromkeys(h for _, h in found if isinstance(h, int)))
        static = " and ".join(([f"static_argnames={names!r}"] if names else [])
                              + ([f"static_argnums={nums!r}"] if nums else []))
        raise ConcretizationError(
            f"{what} needs a concrete value, but this value ({self.aval.str_short()}) depends "
            f"on the traced argument(s) {listed} of {self._trace.description}, whose values "
            f"are not known while tracing.\n  hint: make the argument static ({static}) if "
            f"it is a Python setting, or express the choice with fgrad.numpy.where, "
            f"fgrad.lax.cond or fgrad.lax.while_loop.")


class JaxprTrace(core.Trace):
    """Records primitives as equations. Each equation gets the user's source line
    (a stack walk, ~1-2 us) unless the trace is `transient` (the linear part of an
    eager grad, thrown away after the backward pass) and nothing keeps its result:
    no enclosing jaxpr trace and no debug_nans."""
    arg_names = None

    def __init__(self, parent, description="tracing to a jaxpr", transient=False):
        self.parent = parent
        self.description = description
        self.transient = transient
        self.record_source = not transient or config.debug_nans or _inside_staging(parent)
        self.invars = []
        self.eqns = []
        self.constvars = []
        self.consts = []
        self._const_ids = {}

    # -- inputs and atoms --------------------------------------------------
    def new_arg(self, aval):
        v = Var(aval)
        self.invars.append(v)
        return JaxprTracer(self, v)

    def to_atom(self, x):
        if type(x) is JaxprTracer and x._trace is self:
            return x.var
        if isinstance(x, Tracer):
            check_live(x, self)
        aval = get_aval(x)
        if not aval.shape and not isinstance(x, Tracer):
            val = x if type(x) is core.Array else core.Array(np.array(x, aval.dtype),
                                                             aval.weak_type)
            return Literal(val, aval)
        key = id(x)
        found = self._const_ids.get(key)
        if found is None:
            v = Var(aval)
            self._const_ids[key] = (v, x)     # x kept alive: its id stays its own
            self.constvars.append(v)
            # a NumPy array is copied now: the program sees its value at trace time
            self.consts.append(np.array(x) if type(x) is np.ndarray else x)
            return v
        return found[0]

    def _is_own(self, x):
        return type(x) is JaxprTracer and x._trace is self

    # -- primitives ----------------------------------------------------------
    def process_primitive(self, prim, args, params):
        for a in args:
            if type(a) is JaxprTracer and a._trace is self:
                break
        else:
            # Effects are staged even on constants, except by a transient trace (a
            # linear part), whose rules rely on constants running at the parent.
            if self.transient or not has_effects(prim, params):
                return core.bind_at(self.parent, prim, args, params)
        atoms = [a.var if type(a) is JaxprTracer and a._trace is self else self.to_atom(a)
                 for a in args]
        out_avals = prim.abstract_eval(*[a.aval for a in atoms], **params)
        core.check_avals(prim.name, out_avals if prim.multiple_results else (out_avals,))
        return self._record(prim, atoms, out_avals, params)

    def _record(self, prim, atoms, out_avals, params):
        src = provenance.info
        if src is None and self.record_source:
            src = source_info(3)  # skip _record, process_primitive and its caller (bind)
        if prim.multiple_results:
            outvars = [Var(a) for a in out_avals]
            self.eqns.append(Eqn(prim, atoms, outvars, params, src))
            return [JaxprTracer(self, v) for v in outvars]
        outvar = Var(out_avals)
        self.eqns.append(Eqn(prim, atoms, (outvar,), params, src))
        return JaxprTracer(self, outvar)

    def _bind_at_parent(self, prim, fun, rules, args, params):
        """Run a custom call at the parent level; None if it closes over our tracers."""
        try:
            with set_current_trace(self.parent):
                return prim.bind_with(fun, rules, args, params)
        except TracerLevelError as e:
            if e.trace is not self:
                raise
            return None

    def process_custom_jvp_call(self, prim, fun, jvp, args, params):
        if not any(self._is_own(a) for a in args):
            out = self._bind_at_parent(prim, fun, jvp, args, params)
            if out is not None:
                return out
        closed = trace_to_subjaxpr(fun, [get_aval(a) for a in args], self)
        atoms = [self.to_atom(c) for c in closed.consts] + [self.to_atom(a) for a in args]
        inner = ClosedJaxpr(closed.jaxpr, [])
        new_params = dict(params, call_jaxpr=inner, jvp=jvp, num_consts=len(closed.consts))
        return self._record(prim, atoms, inner.out_avals, new_params)

    def process_custom_vjp_call(self, prim, fun, fwd, bwd, args, params):
        if not any(self._is_own(a) for a in args):
            out = self._bind_at_parent(prim, fun, (fwd, bwd), args, params)
            if out is not None:
                return out
        closed = trace_to_subjaxpr(fun, [get_aval(a) for a in args], self)
        atoms = [self.to_atom(c) for c in closed.consts] + [self.to_atom(a) for a in args]
        inner = ClosedJaxpr(closed.jaxpr, [])
        new_params = dict(params, call_jaxpr=inner, fwd=fwd, bwd=bwd,
                          num_consts=len(closed.consts))
        return self._record(prim, atoms, inner.out_avals, new_params)

    def inputs_behind(self, var):
        """(display name, static hint) of the named inputs `var` depends on; the hint is
        a parameter name for static_argnames or a position for static_argnums."""
        if not self.arg_names:
            return []
        producer = {v: e for e in self.eqns for v in e.outvars}
        seen, stack, names = set(), [var], []
        while stack:
            v = stack.pop()
            if v in seen:
                continue
            seen.add(v)
            if v in self.arg_names:
                names.append(self.arg_names[v])
            eqn = producer.get(v)
            if eqn is not None:
                stack.extend(a for a in eqn.invars if isinstance(a, Var))
        return sorted(set(names), key=names.index)

    # -- result ----------------------------------------------------------------
    def to_jaxpr(self, outs):
        """Close the trace over `outs`; returns a ClosedJaxpr."""
        outvars = [self.to_atom(o) for o in outs]
        jaxpr = Jaxpr(self.constvars, self.invars, self.eqns, outvars)
        if config.check_jaxprs:
            check_jaxpr(jaxpr)
        return ClosedJaxpr(jaxpr, self.consts)


def _inside_staging(trace):
    """Whether an enclosing level records equations that are kept."""
    while trace is not None:
        if type(trace) is JaxprTrace and trace.record_source:
            return True
        trace = trace.parent
    return False


def trace_to_subjaxpr(fun, in_avals, parent, description="tracing to a jaxpr",
                      arg_names=None):
    """Trace a flat function of arrays to a ClosedJaxpr at level `parent`;
    `arg_names` (one (display name, static hint) pair per input) are used in
    concretization errors."""
    trace = JaxprTrace(parent, description)
    trace.mark_origin()
    args = [trace.new_arg(a) for a in in_avals]
    if arg_names is not None:
        trace.arg_names = {t.var: n for t, n in zip(args, arg_names)}
    try:
        with set_current_trace(trace):
            outs = fun(*args)
        return trace.to_jaxpr(list(outs))
    finally:
        trace.finish()


def trace_to_jaxpr(fun, in_avals, description="tracing to a jaxpr", arg_names=None):
    return trace_to_subjaxpr(fun, in_avals, core.current_trace(), description, arg_names)
