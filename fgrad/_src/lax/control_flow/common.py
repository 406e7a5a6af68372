"""Tracing the user functions that control-flow primitives hold, and checking
that their types agree.

A branch or loop body is traced once, at the current trace, to a closed jaxpr.
Values it closes over that are tracers of enclosing transforms are hoisted out
of the jaxpr's constants into leading inputs, so the primitive receives them as
ordinary operands and every transform sees them (concrete constants stay in the
closed jaxpr).
"""
import numpy as np
import optree

from ... import core, tree_util
from ...core import Array, Tracer, full_lower, get_aval
from ...errors import FgradTypeError
from ...jaxpr import ClosedJaxpr, Jaxpr, Var
from ...partial_eval import JaxprTracer, trace_to_subjaxpr


# ----------------------------------------------------------------------------
# Tracing

def flatten_arrays(tree, what):
    """The leaves of `tree` as fgrad arrays (tracers stay), and its structure."""
    leaves, treedef = tree_util.flatten(tree)
    out = []
    for x in leaves:
        try:
            get_aval(x)
        except TypeError as e:
            raise TypeError(f"{what}: {e}") from None
        out.append(full_lower(x))
    return out, treedef


def trace_function(fun, in_tree, in_avals, description):
    """Trace `fun(*args)`, where `args` is the tuple `in_tree` unflattens from leaves
    of types `in_avals`. Returns (closed jaxpr whose inputs are the hoisted traced
    constants then the leaves, those constants, the output tree)."""
    out_trees = []

    def flat_fun(*leaves):
        out = fun(*tree_util.unflatten(in_tree, leaves))
        out_leaves, out_tree = flatten_arrays(out, description)
        out_trees.append(out_tree)
        return out_leaves

    closed = trace_to_subjaxpr(flat_fun, in_avals, core.current_trace(), description)
    closed, consts = hoist_traced_consts(closed)
    return closed, consts, out_trees[0]


def hoist_traced_consts(closed):
    """(closed jaxpr whose traced constants are leading inputs, those constants)."""
    jaxpr = closed.jaxpr
    keep = [(v, c) for v, c in zip(jaxpr.constvars, closed.consts) if not isinstance(c, Tracer)]
    hoist = [(v, c) for v, c in zip(jaxpr.constvars, closed.consts) if isinstance(c, Tracer)]
    if not hoist:
        return closed, []
    new = Jaxpr([v for v, _ in keep], [v for v, _ in hoist] + jaxpr.invars, jaxpr.eqns,
                jaxpr.outvars)
    return ClosedJaxpr(new, [c for _, c in keep]), [c for _, c in hoist]


def with_unused_inputs(closed, at, avals):
    """`closed` taking extra inputs of types `avals`, which it ignores, at position `at`."""
    if not avals:
        return closed
    j = closed.jaxpr
    invars = list(j.invars[:at]) + [Var(a) for a in avals] + list(j.invars[at:])
    return ClosedJaxpr(Jaxpr(j.constvars, invars, j.eqns, j.outvars), closed.consts)


def permute_inputs(closed, order):
    """`closed` with its inputs reordered: new input k is old input order[k]."""
    j = closed.jaxpr
    return ClosedJaxpr(Jaxpr(j.constvars, [j.invars[i] for i in order], j.eqns, j.outvars),
                       closed.consts)


def unstacked(aval):
    """The type of one slice along the leading axis."""
    return core.ShapedArray(aval.shape[1:], aval.dtype, aval.weak_type)


def stacked(aval, length):
    return core.ShapedArray((length,) + tuple(aval.shape), aval.dtype, aval.weak_type)


def is_float(aval):
    return np.dtype(aval.dtype).kind in "fc"


def is_linearizing(primals, tangents):
    """Whether a JVP rule runs inside `linearize` (reverse mode): the tangents are
    being recorded by the current jaxpr trace while the primals are not. Rules
    then keep primal work out of what they bind with tangents, since everything
    bound with a tangent ends up in the linear (transposed) program."""
    trace = core.current_trace()

    def own(x):
        return type(x) is JaxprTracer and x._trace is trace

    return any(own(t) for t in tangents if t is not None) and not any(own(p) for p in primals)


def raw(x):
    """The NumPy value of an eager result."""
    return x._value if type(x) is Array else np.asarray(x)


def evaluator(closed):
    """A function running `closed` eagerly on NumPy values, giving NumPy values."""
    from ...jaxpr import eval_closed

    def run(*args):
        with core.set_current_trace(core.eval_trace):
            return [raw(o) for o in eval_closed(closed, *args)]
    return run


def compiled(closed, name):
    """The jit Executable of `closed` (compiled once per jaxpr object)."""
    from ...jit.primitive import compile_jaxpr
    return compile_jaxpr(closed, name)


# ----------------------------------------------------------------------------
# Type errors

def _paths(treedef):
    """A readable path ('[0]['w']') for each leaf of `treedef`."""
    dummy = tree_util.unflatten(treedef, range(treedef.num_leaves))
    paths, _, _ = optree.tree_flatten_with_path(dummy, none_is_leaf=False,
                                                namespace=tree_util.NAMESPACE)
    return ["".join(f"[{p!r}]" for p in path) for path in paths]


def _describe(aval):
    return f"{aval.str_short()} (shape {aval.shape}, dtype {np.dtype(aval.dtype).name})"


def check_same_types(what, root, left, right, hint):
    """Raise if two (name, treedef, avals) triples differ in tree structure, or in
    a leaf's shape or dtype; the message names each differing leaf by its path
    under `root`, with its type on both sides."""
    (lname, ltree, lavals), (rname, rtree, ravals) = left, right
    if ltree != rtree:
        raise FgradTypeError(
            f"{what}: {lname} and {rname} have different tree structures:\n"
            f"    {lname}: {ltree}\n    {rname}: {rtree}", hint)
    diffs = [f"{root}{path} is {_describe(a)} in {lname} but {_describe(b)} in {rname}"
             for path, a, b in zip(_paths(ltree), lavals, ravals)
             if a.shape != b.shape or a.dtype != b.dtype]
    if diffs:
        raise FgradTypeError(f"{what}: {lname} and {rname} must have the same types, but\n    "
                             + "\n    ".join(diffs), hint)


def promote_weak_carry(carry_in, carry_out):
    """Carry types where a weakly typed initial value (a Python scalar, say) takes the
    type the body returns for it (same shape, another dtype or a strong type), so the
    loop can be traced again with them; None when nothing needs to change."""
    changed = False
    new = []
    for a, b in zip(carry_in, carry_out):
        if a.weak_type and a.shape == b.shape and (a.dtype != b.dtype or not b.weak_type):
            new.append(core.ShapedArray(a.shape, b.dtype, b.weak_type))
            changed = True
        else:
            new.append(a)
    return new if changed else None


def cast_to(x, aval):
    """x converted to `aval`'s dtype and weak type where it differs."""
    if get_aval(x).dtype == aval.dtype and core.is_weak(x) == aval.weak_type:
        return x
    from ..elementwise import convert_element_type
    return convert_element_type(x, aval.dtype, weak_type=aval.weak_type)
