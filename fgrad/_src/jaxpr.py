"""The IR: typed SSA jaxprs, their printer, evaluator and type checker.

A `Jaxpr` has constvars (values supplied by a `ClosedJaxpr`), invars, equations
and outvars. An equation applies one primitive with static params to atoms
(variables or literals) and defines new variables. Everything is typed by
`ShapedArray`s, so the checker can re-derive each equation's output types.
"""
import numpy as np

from .errors import provenance


class Var:
    """An SSA variable; names are given when printing."""
    __slots__ = ("aval",)

    def __init__(self, aval):
        self.aval = aval

    def __repr__(self):
        return f"Var({self.aval.str_short()})"


class Literal:
    """A scalar constant written inline in an equation, e.g. `3.0:f32[]`."""
    __slots__ = ("val", "aval")

    def __init__(self, val, aval):
        self.val = val
        self.aval = aval

    def __repr__(self):
        return f"{_format_scalar(self.val)}:{self.aval.str_short()}"


def _format_scalar(v):
    v = np.asarray(v).item()
    return repr(v)


class Eqn:
    """One primitive application; `source_info` is the user's source line that
    created it (an errors.SourceInfo, or None when unknown)."""
    __slots__ = ("primitive", "invars", "outvars", "params", "source_info")

    def __init__(self, primitive, invars, outvars, params, source_info=None):
        self.primitive = primitive
        self.invars = invars
        self.outvars = outvars
        self.params = params
        self.source_info = source_info


class Jaxpr:
    __slots__ = ("constvars", "invars", "eqns", "outvars")

    def __init__(self, constvars, invars, eqns, outvars):
        self.constvars = list(constvars)
        self.invars = list(invars)
        self.eqns = list(eqns)
        self.outvars = list(outvars)

    @property
    def in_avals(self):
        return [v.aval for v in self.invars]

    @property
    def out_avals(self):
        return [v.aval for v in self.outvars]

    def __str__(self):
        return pretty_print(self)

    __repr__ = __str__

    def pretty_print(self, print_locations=False):
        return pretty_print(self, print_locations=print_locations)


class ClosedJaxpr:
    """A jaxpr together with the values of its constvars. `_derived`: values made
    from it (see lru.derived), kept on it so that they die with it."""
    __slots__ = ("jaxpr", "consts", "_derived", "__weakref__")

    def __init__(self, jaxpr, consts):
        self.jaxpr = jaxpr
        self.consts = list(consts)
        self._derived = None

    in_avals = property(lambda self: self.jaxpr.in_avals)
    out_avals = property(lambda self: self.jaxpr.out_avals)
    eqns = property(lambda self: self.jaxpr.eqns)

    def __str__(self):
        return pretty_print(self.jaxpr)

    __repr__ = __str__

    def pretty_print(self, print_locations=False):
        return pretty_print(self.jaxpr, print_locations=print_locations)


class LocatedClosedJaxpr(ClosedJaxpr):
    """A ClosedJaxpr that prints each equation's source line
    (what make_jaxpr(..., print_locations=True) returns)."""
    __slots__ = ()

    def __str__(self):
        return pretty_print(self.jaxpr, print_locations=True)

    __repr__ = __str__


# ----------------------------------------------------------------------------
# Evaluation

def eval_jaxpr(jaxpr, consts, *args):
    """Run a jaxpr by binding each primitive at the current trace. Work done for an
    equation (new equations, error reports) inherits that equation's source info."""
    env = {}
    for v, x in zip(jaxpr.constvars, consts):
        env[v] = x
    for v, x in zip(jaxpr.invars, args):
        env[v] = x

    def read(a):
        return a.val if type(a) is Literal else env[a]

    outer = provenance.info
    try:
        for eqn in jaxpr.eqns:
            provenance.info = eqn.source_info or outer
            outs = eqn.primitive.bind(*[read(a) for a in eqn.invars], **eqn.params)
            if eqn.primitive.multiple_results:
                for v, o in zip(eqn.outvars, outs):
                    env[v] = o
            else:
                env[eqn.outvars[0]] = outs
    finally:
        provenance.info = outer
    return [read(a) for a in jaxpr.outvars]


def eval_closed(closed, *args):
    return eval_jaxpr(closed.jaxpr, closed.consts, *args)


def dce_jaxpr(jaxpr, used_outputs, keep_effects=False):
    """The jaxpr restricted to the outputs flagged in `used_outputs`, without the
    equations those outputs do not need (inputs are kept). Effectful equations
    (debug callbacks) are dropped too unless `keep_effects`: keep them in the one
    slice of a split program that runs them (e.g. the primal part)."""
    outvars = [v for v, used in zip(jaxpr.outvars, used_outputs) if used]
    live = {v for v in outvars if type(v) is Var}
    eqns = []
    for eqn in reversed(jaxpr.eqns):
        if any(v in live for v in eqn.outvars) or (
                keep_effects and has_effects(eqn.primitive, eqn.params)):
            eqns.append(eqn)
            live.update(a for a in eqn.invars if type(a) is Var)
    return Jaxpr(jaxpr.constvars, jaxpr.invars, eqns[::-1], outvars)


def read_counts(jaxpr):
    """Var -> how many times the equations of `jaxpr` read it, plus once per output
    it is (the passes that rewrite single-use values ask)."""
    counts = {}
    for e in jaxpr.eqns:
        for a in e.invars:
            if type(a) is Var:
                counts[a] = counts.get(a, 0) + 1
    for a in jaxpr.outvars:
        if type(a) is Var:
            counts[a] = counts.get(a, 0) + 1
    return counts


def has_effects(prim, params):
    """Whether an equation of `prim` with `params` has side effects: the primitive's
    own (a debug callback), or an effectful equation inside one of its sub-jaxprs
    (a cond branch, a loop body, a jit call)."""
    if prim.effectful:
        return True
    for p in params.values():
        for sub in (p if type(p) is tuple else (p,)):
            if isinstance(sub, ClosedJaxpr):
                sub = sub.jaxpr
            if type(sub) is Jaxpr and any(has_effects(e.primitive, e.params) for e in sub.eqns):
                return True
    return False


# ----------------------------------------------------------------------------
# Type checking

class JaxprTypeError(TypeError):
    pass


def check_jaxpr(jaxpr):
    """Check that every variable is defined once before use and every equation's
    output types are what its primitive's shape rule derives from its inputs."""
    defined = set()

    def define(v):
        if not isinstance(v, Var):
            raise JaxprTypeError(f"binder {v!r} is not a Var")
        if v in defined:
            raise JaxprTypeError(f"variable {v!r} defined twice")
        defined.add(v)

    def check_atom(a, where):
        if type(a) is Literal:
            if np.shape(a.val) != a.aval.shape:
                raise JaxprTypeError(f"literal {a!r} has the wrong shape in {where}")
            return
        if a not in defined:
            raise JaxprTypeError(f"variable {a!r} used before definition in {where}")

    for v in jaxpr.constvars + jaxpr.invars:
        define(v)
    for i, eqn in enumerate(jaxpr.eqns):
        where = f"equation {i} ({eqn.primitive.name})"
        for a in eqn.invars:
            check_atom(a, where)
        expected = eqn.primitive.abstract_eval(*[a.aval for a in eqn.invars], **eqn.params)
        if not eqn.primitive.multiple_results:
            expected = [expected]
        got = [v.aval for v in eqn.outvars]
        if len(expected) != len(got) or any(
                e.shape != g.shape or e.dtype != g.dtype for e, g in zip(expected, got)):
            raise JaxprTypeError(
                f"{where}: outputs typed {[g.str_short() for g in got]} but the shape "
                f"rule gives {[e.str_short() for e in expected]}")
        for v in eqn.outvars:
            define(v)
        for sub in _sub_jaxprs(eqn.params):
            check_jaxpr(sub)
    for a in jaxpr.outvars:
        check_atom(a, "outputs")


def all_eqns(jaxpr):
    """The equations of `jaxpr` and of the jaxprs in their parameters (closed or
    not, alone or in tuples and lists: cond's branches), depth first."""
    for eqn in jaxpr.eqns:
        yield eqn
        for p in eqn.params.values():
            for sub in (p if isinstance(p, (tuple, list)) else (p,)):
                sub = getattr(sub, "jaxpr", sub)
                if hasattr(sub, "eqns"):
                    yield from all_eqns(sub)


def _sub_jaxprs(params):
    for p in params.values():
        if isinstance(p, ClosedJaxpr):
            yield p.jaxpr
        elif isinstance(p, Jaxpr):
            yield p


# ----------------------------------------------------------------------------
# Pretty printing

_WIDTH = 100


class _Names:
    def __init__(self):
        self.names = {}

    def __call__(self, v):
        if type(v) is Literal:
            return repr(v)
        name = self.names.get(v)
        if name is None:
            name = self.names[v] = _name_of(len(self.names))
        return name


def _name_of(i):
    letters = "abcdefghijklmnopqrstuvwxyz"
    s = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        s = letters[r] + s
    return s


def _format_param(value, indent, print_locations):
    if isinstance(value, ClosedJaxpr):
        value = value.jaxpr
    if isinstance(value, Jaxpr):
        return pretty_print(value, indent=indent + 2, print_locations=print_locations)
    if isinstance(value, np.dtype):
        return str(value)
    if callable(value) and not isinstance(value, type):
        return getattr(value, "__name__", type(value).__name__)
    return repr(value)


def pretty_print(jaxpr, indent=0, print_locations=False):
    """JAX's textual form; on one line when it fits in 80 columns. With
    print_locations, one equation per line, each followed by `# file:line (function)`
    of the user code that created it."""
    name = _Names()

    def binder(v):
        return f"{name(v)}:{v.aval.str_short()}"

    consts = " ".join(binder(v) for v in jaxpr.constvars)
    args = " ".join(binder(v) for v in jaxpr.invars)
    head = f"{{ lambda {consts}; {args}. let" if consts else f"{{ lambda ; {args}. let"
    lines = []
    for eqn in jaxpr.eqns:
        lhs = " ".join(binder(v) for v in eqn.outvars)
        params = ""
        if eqn.params:
            params = "[" + " ".join(f"{k}={_format_param(v, indent, print_locations)}"
                                    for k, v in sorted(eqn.params.items())) + "]"
        rhs = " ".join(name(a) for a in eqn.invars)
        line = f"{lhs + ' = ' if lhs else ''}{eqn.primitive.name}{params} {rhs}".rstrip()
        if print_locations and eqn.source_info is not None:
            line += f"  # {eqn.source_info.short()}"
        lines.append(line)
    outs = ", ".join(name(a) for a in jaxpr.outvars)
    tail = f"in ({outs},) }}" if len(jaxpr.outvars) == 1 else f"in ({outs}) }}"
    one_line = f"{head} {'; '.join(lines)} {tail}" if lines else f"{head} {tail}"
    if len(one_line) + indent <= _WIDTH and "\n" not in one_line and not print_locations:
        return one_line
    pad = " " * indent
    body = "".join(f"\n{pad}    {line}" for line in lines)
    return f"{head}{body}\n{pad}  {tail}"
