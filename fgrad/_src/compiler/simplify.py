"""Backend-independent simplification of closed jaxprs, run before fusion.

`simplify` runs small passes to a (bounded) fixpoint:

- `inline_calls`: nested `jit` equations are replaced by their bodies;
- `expand_dots`: a dot_general that contracts nothing but size-1 dims (an
  outer product, e.g. a weight gradient at batch 1) becomes a multiply of
  broadcasts, which fusion folds into its consumers; one with a
  preferred_element_type becomes a dot of converted operands;
- `join_pad_sums`: a sum of zero pads tiling an axis becomes a concatenate
  (see pad_sums);
- `forward_trivial`: identity reshapes/transposes/broadcasts/conversions are
  replaced by their operand;
- `compose_transposes`: a transpose of a transpose reads the inner one's
  operand with the composed permutation (one copy, not two);
- `fold_transposes_into_dots`: a dot_general reading a transposed operand reads
  the untransposed one with renumbered dimensions (BLAS takes the transpose as
  a flag; no copy is made);
- `untranspose_scan_consts`: a scan reads a transposed matrix constant's
  source when its body's products then need no transpose flag (see scan_consts);
- `fold_constants`: equations whose inputs are all known are evaluated with the
  primitive's NumPy `impl` and become constants (0-d ones Literals);
- `cse`: an equation identical to an earlier one reuses the earlier's outputs;
- `dce`: equations whose outputs are unused, and unused constvars, are dropped.

Every pass maps a ClosedJaxpr to a type-correct ClosedJaxpr, never mutates its
input, is idempotent, and returns its input object itself when it has nothing
to do (so `p(x) is x` means "no change"). Invars are never removed: the calling
convention of the program is kept.
"""
import math

import numpy as np

from ..core import Array, Tracer
from ..jaxpr import ClosedJaxpr, Eqn, Jaxpr, Literal, Var, dce_jaxpr, has_effects
from ..value_keys import value_key
from .pad_sums import join_pad_sums
from .scan_consts import untranspose_scan_consts
from .scan_xs import sink_into_scans

# Call-like primitives whose `impl` cannot be run on their operands directly.
NO_FOLD = {"jit", "custom_jvp_call", "custom_vjp_call", "custom_lin"}

MAX_FOLD_ELEMENTS = 1_000_000
# An op whose result is bigger than its inputs (broadcast, iota, pad) is folded
# only up to this size: a fused broadcast costs nothing, a big constant costs loads.
MAX_EXPAND_ELEMENTS = 1024

MAX_ROUNDS = 4

# Binary primitives whose operands may be swapped (exactly, in IEEE arithmetic
# too): cse treats mul(a, b) and mul(b, a) as the same expression. Not max / min:
# like np.maximum they keep the second of two equal values, so max(0.0, -0.0) is
# -0.0 and max(-0.0, 0.0) is 0.0.
COMMUTATIVE = {"add", "mul", "and", "or", "xor", "eq", "ne"}


def simplify(closed, max_rounds=MAX_ROUNDS):
    """Inline nested calls, then forward trivial ops, fold constants, eliminate
    common subexpressions and dead code until nothing changes (at most
    `max_rounds` rounds)."""
    closed = join_pad_sums(widen_half_reductions(expand_dots(inline_calls(closed))))
    for _ in range(max_rounds):
        start = closed
        for p in (forward_trivial, compose_transposes, fold_transposes_into_dots,
                  untranspose_scan_consts, sink_into_scans,
                  fold_constants, cse, dce):
            closed = p(closed)
        if closed is start:
            break
    return closed


# ----------------------------------------------------------------------------
# Helpers

def _callee(eqn):
    """(body, n) for a call equation whose body can be inlined: `jit`, the
    custom-derivative calls (their rules matter only to differentiation, which is
    over once a program is compiled), and primitives defined by an expansion into
    others (`inline_body(params)`, e.g. cond_lanes). The first n operands feed the
    body's constvars; with n = 0 the body carries its own consts. None otherwise."""
    name = eqn.primitive.name
    if name == "jit" and isinstance(eqn.params.get("jaxpr"), ClosedJaxpr):
        return eqn.params["jaxpr"], 0
    if name in ("custom_jvp_call", "custom_vjp_call"):
        return eqn.params["call_jaxpr"], eqn.params["num_consts"]
    expand = getattr(eqn.primitive, "inline_body", None)
    if expand is not None:
        return expand(eqn.params), 0
    return None


def _is_effectful(eqn):
    """Side effects (debug callbacks, also inside sub-jaxprs): never folded, merged
    or dropped."""
    return has_effects(eqn.primitive, eqn.params)


def _reader(env):
    def read(a):
        return env.get(a, a) if type(a) is Var else a
    return read


def _with_invars(eqn, invars):
    if all(a is b for a, b in zip(invars, eqn.invars)):
        return eqn
    return Eqn(eqn.primitive, invars, eqn.outvars, eqn.params, eqn.source_info)


def _rebuilt(closed, constvars, consts, eqns, outvars):
    return ClosedJaxpr(Jaxpr(constvars, closed.jaxpr.invars, eqns, outvars), consts)


def _size(aval):
    return math.prod(map(int, aval.shape))


# ----------------------------------------------------------------------------
# inline_calls

def inline_calls(closed):
    """Replace every call equation (`jit`, custom_jvp_call, custom_vjp_call) by its
    body, recursively. Inner variables are
    renamed (a body inlined twice gets fresh variables each time); the body's
    consts become consts of the outer program (shared by identity); the call's
    outputs are replaced by whatever atoms the body returns."""
    jaxpr = closed.jaxpr
    if not any(_callee(e) is not None for e in jaxpr.eqns):
        return closed
    constvars, consts = list(jaxpr.constvars), list(closed.consts)
    const_vars_by_id = {(id(c), v.aval): v for v, c in zip(constvars, consts)}
    eqns = []

    def add_const(var, value):
        key = (id(value), var.aval)
        v = const_vars_by_id.get(key)
        if v is None:
            v = const_vars_by_id[key] = Var(var.aval)
            constvars.append(v)
            consts.append(value)
        return v

    def emit(eqn, invars, fresh):
        """Append `eqn` (or its inlined body) on `invars`; returns its output atoms."""
        callee = _callee(eqn)
        if callee is None:
            outvars = [Var(v.aval) for v in eqn.outvars] if fresh else list(eqn.outvars)
            eqns.append(Eqn(eqn.primitive, invars, outvars, eqn.params, eqn.source_info))
            return outvars
        inner, n = callee
        if n:
            env = dict(zip(inner.jaxpr.constvars, invars[:n]))
            invars = invars[n:]
        else:
            env = {v: add_const(v, c) for v, c in zip(inner.jaxpr.constvars, inner.consts)}
        env.update(zip(inner.jaxpr.invars, invars))
        read = _reader(env)
        for ie in inner.jaxpr.eqns:
            env.update(zip(ie.outvars, emit(ie, [read(a) for a in ie.invars], True)))
        return [read(a) for a in inner.jaxpr.outvars]

    env = {}
    read = _reader(env)
    for eqn in jaxpr.eqns:
        outs = emit(eqn, [read(a) for a in eqn.invars], False)
        if _callee(eqn) is not None:
            env.update(zip(eqn.outvars, outs))
    return _rebuilt(closed, constvars, consts, eqns, [read(a) for a in jaxpr.outvars])


# ----------------------------------------------------------------------------
# expand_dots

def _is_outer_product(eqn):
    if eqn.primitive.name != "dot_general":
        return False
    (lc, _), _ = eqn.params["dimension_numbers"]
    lhs_shape = eqn.invars[0].aval.shape
    return all(lhs_shape[d] == 1 for d in lc)


def _outer_product_body(eqn):
    """A function computing `eqn`'s dot_general as broadcast operands multiplied."""
    from .. import lax
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    dtype = eqn.params["preferred_element_type"]
    out_shape = eqn.outvars[0].aval.shape
    nb = len(lb)

    def operand(x, contracting, batch, out_dims):
        free = tuple(d for d in range(x.ndim) if d not in contracting and d not in batch)
        kept = lax.transpose(x, batch + free + contracting)
        kept = lax.reshape(kept, tuple(x.shape[d] for d in batch + free))
        if dtype is not None:
            kept = lax.convert_element_type(kept, dtype)
        return lax.broadcast_in_dim(kept, out_shape, tuple(range(nb)) + out_dims(len(free)))

    def body(lhs, rhs):
        n_lhs_free = lhs.ndim - len(lc) - nb
        a = operand(lhs, lc, lb, lambda n: tuple(range(nb, nb + n)))
        b = operand(rhs, rc, rb, lambda n: tuple(range(nb + n_lhs_free, nb + n_lhs_free + n)))
        return [lax.mul(a, b)]
    return body


def _converted_dot_body(eqn):
    """A function computing `eqn`'s dot_general with a preferred_element_type as a
    dot of its operands converted to that type (what the NumPy impl does), which
    the backends then run as a plain matmul."""
    from .. import lax
    dims, dtype = eqn.params["dimension_numbers"], eqn.params["preferred_element_type"]

    def body(lhs, rhs):
        return [lax.dot_general(lax.convert_element_type(lhs, dtype),
                                lax.convert_element_type(rhs, dtype), dims)]
    return body


def _dot_expansion(eqn):
    """The replacement body for a dot_general worth rewriting, or None."""
    if eqn.primitive.name != "dot_general":
        return None
    if _is_outer_product(eqn):
        return _outer_product_body(eqn)
    if eqn.params["preferred_element_type"] is not None:
        return _converted_dot_body(eqn)
    return None


def expand_dots(closed):
    """Replace each dot_general whose contracting dims all have size 1 by a
    multiply of its operands broadcast to the output (exactly the same sums: each
    has one term), and each with a preferred_element_type by a dot of converted
    operands."""
    jaxpr = closed.jaxpr
    if not any(_dot_expansion(e) is not None for e in jaxpr.eqns):
        return closed
    from ..partial_eval import trace_to_jaxpr
    env = {}
    read = _reader(env)
    eqns = []
    for eqn in jaxpr.eqns:
        invars = [read(a) for a in eqn.invars]
        expansion = _dot_expansion(eqn)
        if expansion is None:
            eqns.append(_with_invars(eqn, invars))
            continue
        body = trace_to_jaxpr(expansion, [a.aval for a in eqn.invars],
                              "expanding a dot_general").jaxpr
        assert not body.constvars, "an expanded dot_general needs no constants"
        inner = dict(zip(body.invars, invars))
        inner_read = _reader(inner)
        for ie in body.eqns:
            eqns.append(Eqn(ie.primitive, [inner_read(a) for a in ie.invars], ie.outvars,
                            ie.params, eqn.source_info))
        env[eqn.outvars[0]] = inner_read(body.outvars[0])
    return _rebuilt(closed, jaxpr.constvars, closed.consts, eqns,
                    [read(a) for a in jaxpr.outvars])


# ----------------------------------------------------------------------------
# widen_half_reductions

_ACCUMULATED = ("reduce_sum", "reduce_prod", "cumsum", "cumprod")


def widen_half_reductions(closed):
    """Write each float16 sum and product (also cumulative) as what it computes
    (lax/reductions.py, lax/cumulative.py): convert to float32, reduce, convert
    back, so the backend runs a float32 reduction instead of needing a float16
    accumulator."""
    from ..core import ShapedArray
    from ..lax.elementwise import convert_element_type_p
    jaxpr = closed.jaxpr
    if not any(e.primitive.name in _ACCUMULATED and e.invars[0].aval.dtype == np.float16
               for e in jaxpr.eqns):
        return closed
    eqns = []
    for eqn in jaxpr.eqns:
        x = eqn.invars[0]
        if eqn.primitive.name not in _ACCUMULATED or x.aval.dtype != np.float16:
            eqns.append(eqn)
            continue
        out = eqn.outvars[0]
        wide_in = Var(ShapedArray(x.aval.shape, np.dtype(np.float32)))
        wide_out = Var(ShapedArray(out.aval.shape, np.dtype(np.float32)))
        eqns += [Eqn(convert_element_type_p, [x], [wide_in],
                     {"new_dtype": np.dtype(np.float32), "weak_type": False}, eqn.source_info),
                 Eqn(eqn.primitive, [wide_in], [wide_out], eqn.params, eqn.source_info),
                 Eqn(convert_element_type_p, [wide_out], [out],
                     {"new_dtype": np.dtype(np.float16), "weak_type": out.aval.weak_type},
                     eqn.source_info)]
    return _rebuilt(closed, jaxpr.constvars, closed.consts, eqns, jaxpr.outvars)


# ----------------------------------------------------------------------------
# compose_transposes

def compose_transposes(closed):
    """Let each transpose of a transpose's result read the inner one's operand
    with the composed permutation (the inner one is dropped by dce when nothing
    else reads it)."""
    jaxpr = closed.jaxpr
    transposes = {e.outvars[0]: e for e in jaxpr.eqns if e.primitive.name == "transpose"}
    eqns, changed = [], False
    for eqn in jaxpr.eqns:
        inner = transposes.get(eqn.invars[0]) if eqn.primitive.name == "transpose" \
            and type(eqn.invars[0]) is Var else None
        if inner is not None:
            first, then = inner.params["permutation"], eqn.params["permutation"]
            eqn = Eqn(eqn.primitive, [inner.invars[0]], eqn.outvars,
                      dict(eqn.params, permutation=tuple(first[d] for d in then)),
                      eqn.source_info)
            transposes[eqn.outvars[0]] = eqn
            changed = True
        eqns.append(eqn)
    if not changed:
        return closed
    return _rebuilt(closed, jaxpr.constvars, closed.consts, eqns, jaxpr.outvars)


# ----------------------------------------------------------------------------
# fold_transposes_into_dots

def _untransposed_dims(perm, contracting, batch, ndim):
    """(contracting, batch) dims of a transpose's source for a dot that read the
    transpose with these dims, or None when the free dims would change order (the
    dot's output lists each operand's free dims in the operand's order)."""
    free = [perm[d] for d in range(ndim) if d not in contracting and d not in batch]
    if free != sorted(free):
        return None
    return tuple(perm[d] for d in contracting), tuple(perm[d] for d in batch)


def fold_transposes_into_dots(closed):
    """Let each dot_general read through transposes of its operands where the
    output keeps its layout."""
    jaxpr = closed.jaxpr
    transposes = {e.outvars[0]: e for e in jaxpr.eqns if e.primitive.name == "transpose"}
    if not transposes:
        return closed
    eqns, changed = [], False
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general" and any(a in transposes for a in eqn.invars
                                                       if type(a) is Var):
            (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
            dims = [[lc, lb], [rc, rb]]
            invars = list(eqn.invars)
            for i, a in enumerate(invars):
                t = transposes.get(a) if type(a) is Var else None
                if t is None:
                    continue
                new = _untransposed_dims(t.params["permutation"], dims[i][0], dims[i][1],
                                         len(a.aval.shape))
                if new is not None:
                    dims[i] = list(new)
                    invars[i] = t.invars[0]
            if invars != list(eqn.invars):
                params = dict(eqn.params, dimension_numbers=((dims[0][0], dims[1][0]),
                                                             (dims[0][1], dims[1][1])))
                eqn = Eqn(eqn.primitive, invars, eqn.outvars, params, eqn.source_info)
                changed = True
        eqns.append(eqn)
    if not changed:
        return closed
    return _rebuilt(closed, jaxpr.constvars, closed.consts, eqns, jaxpr.outvars)


# ----------------------------------------------------------------------------
# forward_trivial

def _identity_perm(p):
    return tuple(p) == tuple(range(len(p)))


# primitive name -> (params -> index of the operand the result equals, or None)
_TRIVIAL = {
    "convert_element_type": lambda p: 0,  # the aval check below does the work
    "reshape": lambda p: 0,
    "broadcast_in_dim": lambda p: 0 if _identity_perm(p["broadcast_dimensions"]) else None,
    "transpose": lambda p: 0 if _identity_perm(p["permutation"]) else None,
    "squeeze": lambda p: None if p["dimensions"] else 0,
    "expand_dims": lambda p: None if p["dimensions"] else 0,
    "rev": lambda p: None if p["dimensions"] else 0,
    "reduce_sum": lambda p: None if p["axes"] else 0,
    "reduce_prod": lambda p: None if p["axes"] else 0,
    "reduce_max": lambda p: None if p["axes"] else 0,
    "reduce_min": lambda p: None if p["axes"] else 0,
    "reduce_and": lambda p: None if p["axes"] else 0,
    "reduce_or": lambda p: None if p["axes"] else 0,
    "slice": lambda p: 0 if (not any(p["start_indices"])
                             and all(s == 1 for s in p["strides"])) else None,
    "pad": lambda p: None if any(v for c in p["padding_config"] for v in c) else 0,
    "concatenate": lambda p: 0,  # trivial only with one operand (checked below)
    "select_n": lambda p: 1,     # trivial only with one case (checked below)
}
_SINGLE_OPERAND = {"concatenate": 1, "select_n": 2}


def _forwarded_operand(eqn):
    rule = _TRIVIAL.get(eqn.primitive.name)
    if rule is None or eqn.primitive.multiple_results or _is_effectful(eqn):
        return None
    n = _SINGLE_OPERAND.get(eqn.primitive.name)
    if n is not None and len(eqn.invars) != n:
        return None
    try:
        i = rule(eqn.params)
    except (KeyError, TypeError):
        return None
    if i is None or i >= len(eqn.invars):
        return None
    if eqn.primitive.name == "reduce_sum" and eqn.invars[0].aval.dtype.kind == "f":
        return None   # a float sum over no axes is x + 0.0, which turns -0.0 into +0.0
    # Same shape, dtype and weak type: the result is the operand itself.
    return i if eqn.invars[i].aval == eqn.outvars[0].aval else None


def forward_trivial(closed):
    """Drop ops that return their operand unchanged (a conversion to the same
    dtype and weak type, a reshape/broadcast to the same shape, an identity
    transpose, an empty squeeze/rev/reduction, a full slice, a zero pad, a
    one-operand concatenate, a one-case select_n): uses of the result read the
    operand instead."""
    jaxpr = closed.jaxpr
    env = {}
    read = _reader(env)
    eqns = []
    changed = False
    for eqn in jaxpr.eqns:
        invars = [read(a) for a in eqn.invars]
        i = _forwarded_operand(eqn)
        if i is not None:
            env[eqn.outvars[0]] = invars[i]
            changed = True
            continue
        new = _with_invars(eqn, invars)
        changed |= new is not eqn
        eqns.append(new)
    if not changed:
        return closed
    return _rebuilt(closed, jaxpr.constvars, closed.consts, eqns,
                    [read(a) for a in jaxpr.outvars])


# ----------------------------------------------------------------------------
# fold_constants

def _foldable(eqn):
    prim = eqn.primitive
    if prim.impl is None or prim.name in NO_FOLD or _is_effectful(eqn):
        return False
    return not any(isinstance(p, (ClosedJaxpr, Jaxpr)) for p in eqn.params.values())


def _literal(value, aval):
    return Literal(Array(np.asarray(value, aval.dtype), aval.weak_type), aval)


def fold_constants(closed, max_elements=MAX_FOLD_ELEMENTS,
                   max_expand_elements=MAX_EXPAND_ELEMENTS):
    """Evaluate, with the primitive's NumPy `impl`, each equation whose inputs are
    all known (Literals, or constvars whose values are concrete, not tracers).
    Non-scalar results become constvars holding `Array(value, weak_type)`; 0-d
    results (and 0-d concrete constvars) become Literals. An equation is kept
    when its result would have more than `max_elements` elements, when it
    expands its inputs to more than `max_expand_elements` elements, or when its
    impl fails or disagrees with the equation's types."""
    jaxpr = closed.jaxpr
    known = {}  # Var -> concrete value (anything np.asarray accepts)
    env = {}
    read = _reader(env)
    constvars, consts = [], []
    changed = False
    for v, c in zip(jaxpr.constvars, closed.consts):
        if not v.aval.shape and not isinstance(c, Tracer):
            env[v] = _literal(c, v.aval)
            changed = True
            continue
        constvars.append(v)
        consts.append(c)
        if not isinstance(c, Tracer):
            known[v] = c

    def value_of(a):
        return np.asarray(a.val if type(a) is Literal else known[a], a.aval.dtype)

    eqns = []
    for eqn in jaxpr.eqns:
        invars = [read(a) for a in eqn.invars]
        outs = None
        if all(type(a) is Literal or a in known for a in invars) and _foldable(eqn):
            outs = _try_fold(eqn, invars, value_of, max_elements, max_expand_elements)
        if outs is None:
            new = _with_invars(eqn, invars)
            changed |= new is not eqn
            eqns.append(new)
            continue
        changed = True
        for v, val in zip(eqn.outvars, outs):
            if v.aval.shape:
                known[v] = val = Array(val, v.aval.weak_type)
                constvars.append(v)  # the defining variable becomes a constvar
                consts.append(val)
            else:
                env[v] = _literal(val, v.aval)
    if not changed:
        return closed
    return _rebuilt(closed, constvars, consts, eqns, [read(a) for a in jaxpr.outvars])


def _try_fold(eqn, invars, value_of, max_elements, max_expand_elements):
    out_size = sum(_size(v.aval) for v in eqn.outvars)
    in_size = sum(_size(a.aval) for a in invars)
    if out_size > max_elements or (out_size > in_size and out_size > max_expand_elements):
        return None
    try:
        with np.errstate(all="ignore"):
            outs = eqn.primitive.impl(*[value_of(a) for a in invars], **eqn.params)
    except Exception:  # noqa: BLE001 -- a rule that cannot run now runs later
        return None
    if not eqn.primitive.multiple_results:
        outs = [outs]
    outs = list(outs)
    if len(outs) != len(eqn.outvars):
        return None
    result = []
    for v, o in zip(eqn.outvars, outs):
        o = np.asarray(o)
        if o.shape != v.aval.shape or o.dtype.kind != np.dtype(v.aval.dtype).kind:
            return None
        result.append(np.asarray(o, v.aval.dtype))
    return result


# ----------------------------------------------------------------------------
# cse

def _param_key(v):
    """Params equal by type and value (value_key: 1 vs 1.0 vs True, -0.0 vs 0.0);
    sub-jaxprs and unhashable values by identity."""
    if isinstance(v, (ClosedJaxpr, Jaxpr)):
        return ("id", id(v))
    if isinstance(v, tuple):
        return (type(v),) + tuple(_param_key(x) for x in v)
    try:
        return value_key(v)
    except TypeError:
        return ("id", id(v))


def _atom_key(a):
    if type(a) is Literal:
        val = np.asarray(a.val, a.aval.dtype)
        return ("lit", a.aval, val.tobytes())
    return a


def _order(key):
    return (0, id(key), b"") if type(key) is Var else (1, 0, repr(key).encode())


def _operands_key(eqn, invars):
    keys = tuple(_atom_key(a) for a in invars)
    if eqn.primitive.name in COMMUTATIVE and len(keys) == 2:
        keys = tuple(sorted(keys, key=_order))
    return keys


def cse(closed):
    """Common-subexpression elimination: an equation with the same primitive,
    equal params (sub-jaxprs by identity), the same inputs (variables by
    identity, Literals by value and type; in either order for COMMUTATIVE
    primitives) and the same output types as an earlier one is dropped and its outputs replaced by the earlier's.
    Constvars holding the same object are merged the same way. Effectful
    primitives are never merged."""
    jaxpr = closed.jaxpr
    env = {}
    read = _reader(env)
    changed = False
    constvars, consts, by_id = [], [], {}
    for v, c in zip(jaxpr.constvars, closed.consts):
        prev = by_id.setdefault((id(c), v.aval), v)
        if prev is not v:
            env[v] = prev
            changed = True
        else:
            constvars.append(v)
            consts.append(c)
    seen = {}
    eqns = []
    for eqn in jaxpr.eqns:
        invars = [read(a) for a in eqn.invars]
        key = None
        if not _is_effectful(eqn):
            key = (eqn.primitive,
                   tuple(sorted((k, _param_key(p)) for k, p in eqn.params.items())),
                   _operands_key(eqn, invars),
                   tuple(v.aval for v in eqn.outvars))
            prev = seen.get(key)
            if prev is not None:
                env.update(zip(eqn.outvars, prev.outvars))
                changed = True
                continue
        new = _with_invars(eqn, invars)
        changed |= new is not eqn
        eqns.append(new)
        if key is not None:
            seen[key] = new
    if not changed:
        return closed
    return _rebuilt(closed, constvars, consts, eqns, [read(a) for a in jaxpr.outvars])


# ----------------------------------------------------------------------------
# dce

def dce(closed):
    """Drop equations none of whose outputs is used (by a later equation or the
    program's outputs) and constvars nothing uses. Effectful equations stay."""
    jaxpr = closed.jaxpr
    if any(_is_effectful(e) for e in jaxpr.eqns):
        eqns = _live_eqns_keeping_effects(jaxpr)
    else:
        eqns = dce_jaxpr(jaxpr, [True] * len(jaxpr.outvars)).eqns
    used = {a for e in eqns for a in e.invars if type(a) is Var}
    used.update(a for a in jaxpr.outvars if type(a) is Var)
    kept = [(v, c) for v, c in zip(jaxpr.constvars, closed.consts) if v in used]
    if len(eqns) == len(jaxpr.eqns) and len(kept) == len(jaxpr.constvars):
        return closed
    return _rebuilt(closed, [v for v, _ in kept], [c for _, c in kept], eqns,
                    jaxpr.outvars)


def _live_eqns_keeping_effects(jaxpr):
    live = {a for a in jaxpr.outvars if type(a) is Var}
    eqns = []
    for eqn in reversed(jaxpr.eqns):
        if _is_effectful(eqn) or any(v in live for v in eqn.outvars):
            eqns.append(eqn)
            live.update(a for a in eqn.invars if type(a) is Var)
    return eqns[::-1]
