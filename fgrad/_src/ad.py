"""Automatic differentiation: forward mode (JVP), linearize, and transposition.

Forward mode carries (primal, tangent) pairs through each primitive's JVP rule.
Reverse mode is linearize + transpose: `linearize` runs the JVP with the
tangents as unknowns of a `JaxprTrace`, so the primal work runs now and only
the tangent (linear) work is recorded; `backward_pass` then walks that linear
jaxpr backwards applying transpose rules. All rules are written with fgrad
operations and bind at the current trace, so every derivative is itself
differentiable (grad of grad, jvp of grad, ...).

A tangent or cotangent of `None` means a symbolic zero.
"""
from . import core
from .config import config
from .core import (Tracer, TracerLevelError, check_live, full_lower, get_aval,
                   set_current_trace)
from .errors import ConcretizationError, FgradTypeError, provenance
from .partial_eval import JaxprTrace, trace_to_subjaxpr
from .jaxpr import Literal, dce_jaxpr, eval_jaxpr


_lax_module = None


def _lax():
    global _lax_module
    if _lax_module is None:
        from . import lax
        _lax_module = lax
    return _lax_module


# ----------------------------------------------------------------------------
# Forward mode

class JVPTracer(Tracer):
    """A primal value with its tangent. bool(), int() and indexing see the primal,
    so value-dependent Python control flow works under eager differentiation
    (their results are piecewise constant: a zero derivative is the right one).
    float(), complex(), item() and tolist() of a float or complex value would
    drop its derivative and give a silently wrong gradient, so they raise."""
    __slots__ = ("primal", "tangent")

    def __init__(self, trace, primal, tangent):
        self._trace = trace
        self.primal = primal
        self.tangent = tangent

    @property
    def aval(self):
        return get_aval(self.primal)

    @property
    def shape(self):
        return self.primal.shape

    @property
    def dtype(self):
        return self.primal.dtype

    def __bool__(self):
        return bool(self.primal)

    def _drops_derivative(self, what):
        """Refuse a conversion that would cut a float value off its derivative."""
        if self.primal.dtype.kind in "fc":
            raise ConcretizationError(
                f"{what} of a value being differentiated ({self.aval.str_short()}, inside "
                f"{self._trace.description}) would return a plain Python number and drop "
                f"its derivative, giving a silently wrong gradient.\n  hint: keep it an "
                f"array (use fgrad.numpy functions on it), or convert "
                f"fgrad.stop_gradient(x) if you mean a constant.")

    def __float__(self):
        self._drops_derivative("float()")
        return float(self.primal)

    def __complex__(self):
        self._drops_derivative("complex()")
        return complex(self.primal)

    def __int__(self):
        return int(self.primal)

    def __index__(self):
        return self.primal.__index__()

    def item(self):
        self._drops_derivative("item()")
        return self.primal.item()

    def tolist(self):
        self._drops_derivative("tolist()")
        return self.primal.tolist()


class JVPTrace(core.Trace):
    """Forward mode. Rules run at `rule_trace`: the parent for jvp, a jaxpr
    builder for linearize (so that tangent work is recorded, not run)."""

    def __init__(self, parent, description):
        self.parent = parent
        self.rule_trace = parent
        self.description = description

    def _unpack(self, args):
        primals, tangents, nonzero = [], [], False
        for a in args:
            if type(a) is JVPTracer and a._trace is self:
                primals.append(a.primal)
                tangents.append(a.tangent)
                nonzero = True
            else:
                if isinstance(a, Tracer):
                    check_live(a, self)
                primals.append(a)
                tangents.append(None)
        return primals, tangents, nonzero

    def _pack(self, primal, tangent):
        return primal if tangent is None else JVPTracer(self, primal, tangent)

    def process_primitive(self, prim, args, params):
        primals, tangents, nonzero = self._unpack(args)
        if not nonzero:
            return core.bind_at(self.parent, prim, primals, params)
        rules = prim.jvp_rules
        if rules is not None:  # per-argument rules (defjvp): the primal runs at the parent
            out = core.bind_at(self.parent, prim, primals, params)
            ts = core.thread_state()
            prev = core.enter_trace(ts, self.rule_trace)
            try:
                return self._pack(out, _sum_contributions(rules, out, primals, tangents, params))
            finally:
                core.leave_trace(ts, prev)
        if prim.jvp is None:
            raise FgradTypeError(f"{prim.name} has no differentiation rule")
        ts = core.thread_state()
        prev = core.enter_trace(ts, self.rule_trace)
        try:
            out, tout = prim.jvp(primals, tangents, **params)
        finally:
            core.leave_trace(ts, prev)
        if prim.multiple_results:
            return [self._pack(o, t) for o, t in zip(out, tout)]
        return self._pack(out, tout)

    def process_custom_jvp_call(self, prim, fun, jvp, args, params):
        primals, tangents, nonzero = self._unpack(args)
        if not nonzero:
            try:
                with set_current_trace(self.parent):
                    return prim.bind_with(fun, jvp, primals, params)
            except TracerLevelError as e:
                if e.trace is not self:
                    raise
            # The function closes over our tracers: differentiate through it as usual.
            with set_current_trace(self):
                return fun(*primals)
        try:
            with set_current_trace(self.rule_trace):
                tangents = [instantiate_zeros(t, p) for t, p in zip(tangents, primals)]
                outs, touts = jvp(primals, tangents)
            return [self._pack(o, t) for o, t in zip(outs, touts)]
        except TracerLevelError as e:
            if e.trace is not self:
                raise
        return self._custom_jvp_with_closure(fun, jvp, primals, tangents)

    def _custom_jvp_with_closure(self, fun, jvp, primals, tangents):
        """A custom JVP rule that closes over our tracers. The function run at our
        level carries the closed-over values' tangents; the rule, traced to a jaxpr and
        run with those values at their primals, gives the arguments' tangents."""
        with set_current_trace(self):
            outs = fun(*primals)
        n = len(primals)

        def flat_rule(*xs):
            rule_outs, rule_touts = jvp(list(xs[:n]), list(xs[n:]))
            return list(rule_outs) + list(rule_touts)

        rule = trace_to_subjaxpr(flat_rule, [get_aval(x) for x in primals + tangents], self)
        tangent_part = dce_jaxpr(rule.jaxpr, [False] * len(outs) + [True] * len(outs))
        consts = [c.primal if type(c) is JVPTracer and c._trace is self else c
                  for c in rule.consts]
        with set_current_trace(self.rule_trace):
            touts = eval_jaxpr(tangent_part, consts, *primals, *tangents)
            results = []
            for o, t in zip(outs, touts):
                o_primal, o_tangent = self._split(o)
                results.append(self._pack(o_primal, t if o_tangent is None
                                          else _lax().add(t, o_tangent)))
        return results

    def _split(self, x):
        if type(x) is JVPTracer and x._trace is self:
            return x.primal, x.tangent
        return x, None

    def process_custom_vjp_call(self, prim, fun, fwd, bwd, args, params):
        primals, tangents, nonzero = self._unpack(args)
        if not nonzero:
            return self._custom_vjp_without_tangents(prim, fun, fwd, bwd, primals, params)
        raise TypeError(
            f"forward-mode differentiation (jvp, jacfwd, hessian) of the custom_vjp "
            f"function {params.get('name', '')!r} is not possible: it defines only a "
            f"reverse-mode rule.\n  hint: use grad/vjp/jacrev, or define the function "
            f"with fgrad.custom_jvp instead.")

    def _custom_vjp_without_tangents(self, prim, fun, fwd, bwd, primals, params):
        try:
            with set_current_trace(self.parent):
                return prim.bind_with(fun, (fwd, bwd), primals, params)
        except TracerLevelError as e:
            if e.trace is not self:
                raise
        # Only closed-over values carry tangents here: differentiate the function itself.
        with set_current_trace(self):
            return fun(*primals)


def instantiate_zeros(t, primal):
    """A concrete zero tangent for a symbolic zero (None)."""
    if t is not None:
        return t
    return _lax().zeros_like(primal)


def jvp_flat(fun, primals, tangents, description="jvp"):
    """Forward mode on a flat function; tangents may hold None (zero)."""
    trace = JVPTrace(core.current_trace(), description)
    trace.mark_origin()
    args = [JVPTracer(trace, p, t) if t is not None else p for p, t in zip(primals, tangents)]
    try:
        with set_current_trace(trace):
            outs = fun(*args)
        return _unpack_outputs(trace, outs)
    finally:
        trace.finish()


def _unpack_outputs(trace, outs):
    primals, tangents = [], []
    for o in outs:
        if type(o) is JVPTracer and o._trace is trace:
            primals.append(o.primal)
            tangents.append(o.tangent)
        else:
            check_live(o)
            primals.append(full_lower(o))
            tangents.append(None)
    return primals, tangents


# ----------------------------------------------------------------------------
# Linearize: JVP with the tangent work recorded as a linear jaxpr

class LinearizeTrace(JVPTrace):
    def __init__(self, parent, description):
        super().__init__(parent, description)
        self.rule_trace = JaxprTrace(parent, f"the linear part of {description}",
                                     transient=True)

    def process_custom_vjp_call(self, prim, fun, fwd, bwd, args, params):
        primals, tangents, nonzero = self._unpack(args)
        if not nonzero:
            return self._custom_vjp_without_tangents(prim, fun, fwd, bwd, primals, params)
        with set_current_trace(self.parent):
            outs, residuals = fwd(*primals)
        with set_current_trace(self.rule_trace):
            tangents = [instantiate_zeros(t, p) for t, p in zip(tangents, primals)]
            touts = custom_lin_p.bind(*residuals, *tangents, num_res=len(residuals),
                                      bwd=bwd, out_avals=tuple(get_aval(o) for o in outs))
        return [self._pack(o, t) for o, t in zip(outs, touts)]


class LinearFunction:
    """The linear map found by `linearize`: a jaxpr, its residuals, and which
    inputs/outputs have (nonzero) tangents."""

    def __init__(self, jaxpr, consts, in_mask, out_mask):
        self.jaxpr = jaxpr
        self.consts = consts
        self.in_mask = in_mask
        self.out_mask = out_mask

    def jvp(self, tangents):
        from .jaxpr import eval_jaxpr
        ins = [t for t, m in zip(tangents, self.in_mask) if m]
        outs = iter(eval_jaxpr(self.jaxpr, self.consts, *ins))
        return [next(outs) if m else None for m in self.out_mask]

    def transpose(self, cts):
        cts = [c for c, m in zip(cts, self.out_mask) if m]
        got = iter(backward_pass(self.jaxpr, self.consts, cts))
        return [next(got) if m else None for m in self.in_mask]


def linearize_flat(fun, primals, description="linearize", in_mask=None, tangent_avals=None):
    """Returns (primal outputs, LinearFunction). `in_mask` says which inputs get a
    tangent (default: the floating-point ones); `tangent_avals` their types (default:
    the primals')."""
    parent = core.current_trace()
    trace = LinearizeTrace(parent, description)
    trace.mark_origin()
    pe = trace.rule_trace
    pe.origin_at = trace.origin_at
    in_avals = [get_aval(p) for p in primals]
    if in_mask is None:
        in_mask = [a.dtype.kind in "fc" for a in in_avals]
    t_avals = in_avals if tangent_avals is None else tangent_avals
    args = [JVPTracer(trace, p, pe.new_arg(t)) if m else p
            for p, t, m in zip(primals, t_avals, in_mask)]
    ts = core.thread_state()
    prev = core.enter_trace(ts, trace)
    try:
        try:
            outs = fun(*args)
        finally:
            core.leave_trace(ts, prev)
        primal_outs, tangent_outs = _unpack_outputs(trace, outs)
        out_mask = [t is not None for t in tangent_outs]
        closed = pe.to_jaxpr([t for t in tangent_outs if t is not None])
    finally:
        trace.alive = pe.alive = False
    return primal_outs, LinearFunction(closed.jaxpr, closed.consts, in_mask, out_mask)


# ----------------------------------------------------------------------------
# Transposition

class UndefinedPrimal:
    """Stands for a linear input of an equation being transposed."""
    __slots__ = ("aval",)

    def __init__(self, aval):
        self.aval = aval

    def __repr__(self):
        return f"UndefinedPrimal({self.aval.str_short()})"


def is_undefined(x):
    return type(x) is UndefinedPrimal


def backward_pass(jaxpr, consts, cts_out):
    """Transpose a linear jaxpr: cotangents of its outputs -> of its inputs.

    Constvars hold the residuals (known values); every equation has a linear input.
    """
    add = _lax().add
    primal_env = dict(zip(jaxpr.constvars, consts))
    ct_env = {}
    check = config.check_jaxprs

    def accumulate(v, ct):
        if check and tuple(ct.shape) != v.aval.shape:
            raise TypeError(f"cotangent shape {tuple(ct.shape)} does not match "
                            f"{v.aval.str_short()} (a transpose rule is wrong)")
        prev = ct_env.get(v)
        ct_env[v] = ct if prev is None else add(prev, ct)

    for v, ct in zip(jaxpr.outvars, cts_out):
        if ct is not None and type(v) is not Literal and v not in primal_env:
            accumulate(v, ct)
    for eqn in reversed(jaxpr.eqns):
        prim = eqn.primitive
        if prim.multiple_results:
            ct = [ct_env.pop(v, None) for v in eqn.outvars]
            if all(c is None for c in ct):
                continue
        else:
            ct = ct_env.pop(eqn.outvars[0], None)
            if ct is None:
                continue
        if prim.transpose is None:
            raise TypeError(
                f"cannot transpose {prim.name}: it is not linear. A custom_jvp rule "
                f"probably returned a tangent that is not linear in the input tangents.")
        args = []
        for a in eqn.invars:
            if type(a) is Literal:
                args.append(a.val)
            else:
                known = primal_env.get(a, _UNKNOWN)
                args.append(UndefinedPrimal(a.aval) if known is _UNKNOWN else known)
        _transpose_eqn(prim, eqn, ct, args, accumulate)
    return [ct_env.get(v) for v in jaxpr.invars]


_UNKNOWN = object()


def _transpose_eqn(prim, eqn, ct, args, accumulate):
    """Run the equation's transpose rule and accumulate the cotangents it gives; what
    this creates or reports (new equations, NaN errors) carries the equation's
    source line, marked as backward-pass work."""
    src = eqn.source_info
    outer = provenance.info
    if src is not None:
        provenance.info = src.in_backward_pass()
    try:
        cts_in = prim.transpose(ct, *args, **eqn.params)
        for a, x, c in zip(eqn.invars, args, cts_in):
            if c is not None and type(x) is UndefinedPrimal:
                accumulate(a, c)
    finally:
        provenance.info = outer


def backward_pass_partial(jaxpr, consts, args, cts_out):
    """Transpose a jaxpr some of whose inputs are known: `args` holds values for the
    known inputs and UndefinedPrimal for the linear ones. Equations that use only
    known values run forwards first; the rest is transposed by backward_pass.
    Returns one cotangent (or None) per linear input."""
    from .jaxpr import Jaxpr, Var
    known = dict(zip(jaxpr.constvars, consts))
    linear = set()
    for v, a in zip(jaxpr.invars, args):
        if type(a) is UndefinedPrimal:
            linear.add(v)
        else:
            known[v] = a
    linear_eqns = []
    for eqn in jaxpr.eqns:
        if any(type(a) is Var and a in linear for a in eqn.invars):
            linear_eqns.append(eqn)
            linear.update(eqn.outvars)
            continue
        ins = [a.val if type(a) is Literal else known[a] for a in eqn.invars]
        outs = eqn.primitive.bind(*ins, **eqn.params)
        for v, o in zip(eqn.outvars, outs if eqn.primitive.multiple_results else [outs]):
            known[v] = o
    linear_in = [v for v, a in zip(jaxpr.invars, args) if type(a) is UndefinedPrimal]
    restricted = Jaxpr(list(known), linear_in, linear_eqns, jaxpr.outvars)
    return backward_pass(restricted, list(known.values()), cts_out)


def transposed_program(closed, linear_mask, ct_avals, description):
    """A closed jaxpr from (the known inputs of `closed`, the nonzero output
    cotangents) to the cotangents of the inputs flagged in `linear_mask` (zeros
    where none flows). `ct_avals` has per output the cotangent's type, or None
    for a zero cotangent. Traced at the bottom level (only concrete constants)."""
    from .lax import zeros
    in_avals = closed.in_avals
    known_avals = [a for a, m in zip(in_avals, linear_mask) if not m]
    lin_avals = [a for a, m in zip(in_avals, linear_mask) if m]
    n_known = len(known_avals)

    def transposed(*xs):
        known, cts = iter(xs[:n_known]), iter(xs[n_known:])
        args = [UndefinedPrimal(a) if m else next(known) for a, m in zip(in_avals, linear_mask)]
        cts_out = [None if a is None else next(cts) for a in ct_avals]
        cts_in = backward_pass_partial(closed.jaxpr, closed.consts, args, cts_out)
        return [c if c is not None else zeros(a.shape, a.dtype) for c, a in zip(cts_in, lin_avals)]

    return trace_to_subjaxpr(transposed, known_avals + [a for a in ct_avals if a is not None],
                             core.eval_trace, description)


# ----------------------------------------------------------------------------
# Helpers for defining rules next to each primitive

# How the eager tape (tape.py) records a primitive, derived from its rules here.
TAPE_DIAGONAL = "diagonal"   # element-wise defjvp: the tangent rules are their transposes
TAPE_LINEAR = "linear"       # deflinear: the transpose rule, in the first argument
TAPE_BILINEAR = "bilinear"   # defbilinear: the transpose rule, one argument at a time
TAPE_JOINT = "joint"         # linear in all its float arguments together (select_n's
#                              cases, concatenate): the transpose rule, once
TAPE_ZERO = "zero"           # defjvp_zero: nothing to record

def defjvp(prim, *rules):
    """JVP from one rule per argument: rule(g, ans, *primals, **params) gives the
    output tangent contributed by that argument's tangent g (None: not differentiable)."""
    def jvp(primals, tangents, **params):
        ans = prim.bind(*primals, **params)
        return ans, _sum_contributions(rules, ans, primals, tangents, params)
    prim.jvp = jvp
    prim.jvp_rules = rules
    # An element-wise Jacobian is diagonal: each rule applied to a cotangent is its
    # transpose. (One result whose weak type is its operands': the tape's lean path
    # takes that from TAPE_DIAGONAL; other element-wise primitives are linearized.)
    diagonal = prim.elementwise and prim.weak_args is None and not prim.multiple_results
    prim.tape = TAPE_DIAGONAL if diagonal else None


def deftape(prim, *rules):
    """NumPy forms of an element-wise primitive's defjvp rules, for the eager tape's
    backward pass: rule(g, ans, *primals) on the NumPy values of a real
    floating-point cotangent g that is not weakly typed (so neither is the result)
    and of the values, giving the bits the defjvp rule gives on their Arrays: the
    same primitives' impls in the same order, Python's + - * and unary - standing
    for add's, sub's, mul's and neg's on real floats. One rule per argument, none
    None (the tape takes all of them or the defjvp rules)."""
    assert prim.tape == TAPE_DIAGONAL and len(rules) == len(prim.jvp_rules)
    assert None not in rules
    prim.tape_rules = rules


def _sum_contributions(rules, ans, primals, tangents, params):
    out = None
    for rule, t in zip(rules, tangents):
        if t is None or rule is None:
            continue
        c = rule(t, ans, *primals, **params)
        out = c if out is None else _lax().add(out, c)
    if out is not None and out.shape != ans.shape:
        out = _lax().broadcast_to(out, ans.shape)
    return out


def defbilinear(prim):
    """Linear in each of its two arguments (a product): the tangent for each is the
    primitive with the tangent in that argument's place; `prim.transpose` (set
    beside it) handles one linear argument at a time."""
    defjvp(prim, lambda g, ans, x, y, **params: prim.bind(g, y, **params),
           lambda g, ans, x, y, **params: prim.bind(x, g, **params))
    prim.tape = TAPE_BILINEAR


def defjvp_zero(prim):
    """The primitive's outputs have zero derivative (comparisons, floor, argmax, ...)."""
    def jvp(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        return out, ([None] * len(out) if prim.multiple_results else None)
    prim.jvp = jvp
    prim.tape = TAPE_ZERO


def deflinear(prim, transpose):
    """Linear in its first argument; the others (indices, ...) are not differentiated."""
    def jvp(primals, tangents, **params):
        ans = prim.bind(*primals, **params)
        if tangents[0] is None:
            return ans, None
        return ans, prim.bind(tangents[0], *primals[1:], **params)
    prim.jvp = jvp
    prim.transpose = transpose
    prim.tape = TAPE_LINEAR


# ----------------------------------------------------------------------------
# The linear primitive a custom_vjp function leaves in a linearized jaxpr

def _custom_lin_abstract_eval(*avals, num_res, bwd, out_avals):
    return list(out_avals)


def _custom_lin_transpose(cts, *args, num_res, bwd, out_avals):
    res = args[:num_res]
    cts = [_lax().zeros(a.shape, a.dtype) if c is None else c for c, a in zip(cts, out_avals)]
    cts_in = bwd(res, cts)
    return [None] * num_res + list(cts_in)


def _custom_lin_impl(*args, **params):
    raise TypeError("custom_vjp functions can only be differentiated in reverse mode")


def _custom_lin_batch(vals, dims, *, num_res, bwd, out_avals):
    """Batch the residuals and tangents at dim 0 and the bwd rule with them."""
    from .batching import axis_size_of, batch_flat, move_to_front
    size = axis_size_of(vals, dims)
    vals = [move_to_front(v, d, size) for v, d in zip(vals, dims)]
    n_cts = len(out_avals)

    def bwd_b(res, cts):
        cts_in = batch_flat(lambda *xs: bwd(list(xs[:num_res]), list(xs[num_res:])),
                            [0] * (num_res + n_cts), size, none_ok=True)(*res, *cts)
        return cts_in

    batched_avals = tuple(core.ShapedArray((size,) + a.shape, a.dtype, a.weak_type)
                          for a in out_avals)
    outs = custom_lin_p.bind(*vals, num_res=num_res, bwd=bwd_b, out_avals=batched_avals)
    return outs, [0] * len(outs)


custom_lin_p = core.Primitive("custom_lin", multiple_results=True)
custom_lin_p.impl = _custom_lin_impl
custom_lin_p.abstract_eval = _custom_lin_abstract_eval
custom_lin_p.transpose = _custom_lin_transpose
custom_lin_p.batch = _custom_lin_batch
