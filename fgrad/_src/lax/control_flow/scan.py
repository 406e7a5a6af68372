"""`scan` and `map`: a loop of fixed length carrying state and stacking outputs.

`scan_p`'s operands are consts, then the initial carry, then the stacked xs; its
`jaxpr` maps (consts, carry, x) to (new carry, y). Rules:
- jvp: the body is split (for the fixed point of which carries have tangents)
  into a primal part that also emits residuals and a linear part. Residuals
  that depend only on the consts are computed once, outside the loop; the rest
  are stacked per iteration by the primal scan and read as xs by a second,
  linear scan. Under linearize only the linear scan is recorded;
- transpose: the linear scan run backwards: cotangents of the carry are the
  carry, cotangents of linear consts are accumulated in it (or, for sums of
  per-iteration matrix products, computed after it: `scan_hoist`), those of xs are
  stacked as ys;
- vmap: batch dims of consts and carries at 0, of xs at 1 (the scanned axis
  stays first); a carry becomes batched when the body makes it so;
- jit: the body is compiled once to its own program and the loop is a step
  labelled 'loop:scan' (compile time does not depend on the length).
"""
import numpy as np

from ... import core, tree_util
from ...ad import UndefinedPrimal, backward_pass_partial, instantiate_zeros, is_undefined
from ...batching import axis_size_of, move_to_front, moveaxis
from ...core import Primitive, get_aval
from ...errors import FgradTypeError
from ...jaxpr import ClosedJaxpr, Jaxpr, Literal, dce_jaxpr, eval_closed
from ..elementwise import add
from . import common, scan_hoist, scan_recompute
from .transforms import batch_jaxpr, linearize_jaxpr, memo, trace_program, zeros_of

scan_p = Primitive("scan", multiple_results=True)


def _scan_abstract_eval(*avals, jaxpr, num_consts, num_carry, length, reverse):
    outs = jaxpr.out_avals
    return list(outs[:num_carry]) + [common.stacked(a, length) for a in outs[num_carry:]]


scan_p.abstract_eval = _scan_abstract_eval
scan_p.out_weak_types = lambda params: [a.weak_type for a in params["jaxpr"].out_avals]


def run_scan(body, args, jaxpr, num_consts, num_carry, length, reverse):
    """The loop itself, on NumPy values; `body` runs one iteration."""
    consts = list(args[:num_consts])
    carry = list(args[num_consts:num_consts + num_carry])
    xs = [np.asarray(x) for x in args[num_consts + num_carry:]]
    ys = [np.empty((length,) + tuple(a.shape), a.dtype) for a in jaxpr.out_avals[num_carry:]]
    for step in range(length):
        i = length - 1 - step if reverse else step
        outs = body(*consts, *carry, *[x[i] for x in xs])
        carry = outs[:num_carry]
        for buf, y in zip(ys, outs[num_carry:]):
            buf[i] = y
    if length == 0:  # outputs are fresh arrays, never the caller's inputs
        carry = [np.array(c) for c in carry]
    return list(carry) + ys


def _scan_impl(*args, **params):
    return run_scan(common.evaluator(params["jaxpr"]), args, **params)


def _compile_step(params, name):
    body = common.compiled(params["jaxpr"], f"{name}/scan_body")
    return (lambda *args: run_scan(body, args, **params)), "loop:scan"


scan_p.impl = _scan_impl
scan_p.compile_step = _compile_step


# ----------------------------------------------------------------------------
# The public functions

def scan(f, init, xs=None, length=None, reverse=False, unroll=1):
    """Loop `carry, y = f(carry, x)` over the leading axis of xs (or `length` times
    with x None); returns (final carry, ys stacked along a new leading axis).
    reverse=True walks xs from the end (ys stay aligned with xs). `unroll` is
    accepted for compatibility; the loop is never unrolled."""
    if not callable(f):
        raise TypeError(f"scan: f must be callable, got {type(f).__name__}")
    if not isinstance(unroll, (bool, int)) or unroll < 0:
        raise TypeError(f"scan: unroll must be a non-negative int or a bool, got {unroll!r}")
    flat_init, init_tree = common.flatten_arrays(init, "scan (init)")
    flat_xs, xs_tree = common.flatten_arrays(xs, "scan (xs)")
    length = _scan_length(flat_xs, xs_tree, length)
    carry_avals = [get_aval(c) for c in flat_init]
    x_avals = [common.unstacked(get_aval(x)) for x in flat_xs]

    def pair(carry, x):
        out = f(carry, x)
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise TypeError(f"scan: f must return a pair (new carry, y), got "
                            f"{type(out).__name__}" + (f" of length {len(out)}"
                                                       if isinstance(out, (tuple, list)) else ""))
        return tuple(out)

    for _ in range(3):  # traced again while weakly typed carries take the body's types
        in_tree = tree_util.structure((tree_util.unflatten(init_tree, carry_avals),
                                       tree_util.unflatten(xs_tree, x_avals)))
        closed, consts, out_tree = common.trace_function(pair, in_tree, carry_avals + x_avals,
                                                         "scan (body)")
        carry_tree, y_tree = out_tree.children()
        n_carry = carry_tree.num_leaves
        out_carry = closed.out_avals[:n_carry]
        promoted = (common.promote_weak_carry(carry_avals, out_carry)
                    if carry_tree == init_tree else None)
        if promoted is None:
            break
        carry_avals = promoted
    common.check_same_types(
        "scan", "carry", ("the initial carry (init)", init_tree, carry_avals),
        ("the carry f returns", carry_tree, out_carry),
        "f(carry, x) must return a new carry of the same tree, shapes and dtypes as init; "
        "cast the initial value (e.g. with .astype) or the value f returns")
    flat_init = [common.cast_to(c, a) for c, a in zip(flat_init, carry_avals)]
    outs = scan_p.bind(*consts, *flat_init, *flat_xs, jaxpr=closed, num_consts=len(consts),
                       num_carry=n_carry, length=length, reverse=bool(reverse))
    return (tree_util.unflatten(carry_tree, outs[:n_carry]),
            tree_util.unflatten(y_tree, outs[n_carry:]))


def _scan_length(flat_xs, xs_tree, length):
    lengths = []
    for x in flat_xs:
        shape = get_aval(x).shape
        if not shape:
            raise FgradTypeError("scan: every leaf of xs must have a leading axis to scan over, "
                                 f"got a scalar ({get_aval(x).str_short()}) in xs {xs_tree}")
        lengths.append(shape[0])
    if length is not None:
        try:
            length = int(length)
        except (TypeError, core.ConcretizationError):
            raise TypeError(f"scan: length must be a concrete int, got {length!r}") from None
    if len(set(lengths)) > 1 or (lengths and length is not None and lengths[0] != length):
        given = f" and length={length}" if length is not None else ""
        raise FgradTypeError(f"scan: the leaves of xs have leading axes of sizes {lengths}"
                             f"{given}; they must all be the same")
    if not lengths and length is None:
        raise TypeError("scan: with no xs, pass length= to say how many iterations to run")
    return lengths[0] if lengths else length


def map(f, xs):
    """[f(x) for x in xs] along the leading axis, stacked (a scan without a carry)."""
    _, ys = scan(lambda carry, x: (carry, f(x)), None, xs)
    return ys


# ----------------------------------------------------------------------------
# Forward mode and linearization

def _variant_outputs(jaxpr, num_consts):
    """Per output, whether it depends on a carry or an x (not only on the consts)."""
    variant = set(jaxpr.invars[num_consts:])
    for eqn in jaxpr.eqns:
        if any(a in variant for a in eqn.invars if type(a) is not Literal):
            variant.update(eqn.outvars)
    return [type(a) is not Literal and a in variant for a in jaxpr.outvars]


class _ScanSplit:
    """A scan body linearized. `invariant` computes the residuals that depend only
    on the consts (run once, outside the loop); `known` is the primal body that also
    emits the per-iteration residuals as ys; `linear` takes (invariant residuals,
    const tangents, carry tangents, stacked residuals, x tangents)."""

    def __init__(self, jaxpr, num_consts, num_carry, nonzero):
        n_out = len(jaxpr.out_avals)
        carry_nz = list(nonzero[num_consts:num_consts + num_carry])
        while True:  # which carries have tangents: a fixed point
            inst = carry_nz + [False] * (n_out - num_carry)
            nz = list(nonzero[:num_consts]) + carry_nz + list(nonzero[num_consts + num_carry:])
            split = linearize_jaxpr(jaxpr, nz, inst)
            grown = [a or b for a, b in zip(carry_nz, split.out_nonzero[:num_carry])]
            if grown == carry_nz:
                break
            carry_nz = grown
        self.nonzero = tuple(nz)
        self.out_nonzero = split.out_nonzero
        known = split.known.jaxpr
        n_res = split.num_res
        variant = _variant_outputs(known, num_consts)[n_out:]
        chains = scan_recompute.droppable(known, n_out, variant)
        stored = [v and k not in chains for k, v in enumerate(variant)]
        keep = [True] * n_out + stored
        body = dce_jaxpr(known, keep, keep_effects=True)  # per-iteration prints run here
        self.known = ClosedJaxpr(body, split.known.consts)
        inv = dce_jaxpr(known, [False] * n_out + [not v for v in variant])
        self.invariant = ClosedJaxpr(Jaxpr(inv.constvars, inv.invars[:num_consts], inv.eqns,
                                           inv.outvars), split.known.consts)
        self.num_stacked = sum(stored)
        self.num_invariant = n_res - sum(variant)
        # linear inputs: residuals (in known's order) then tangents (consts, carry, xs)
        inv_idx = [k for k in range(n_res) if not variant[k]]
        st_idx = [k for k in range(n_res) if variant[k]]
        n_tc = sum(nz[:num_consts])
        n_tcarry = sum(carry_nz)
        t0 = n_res
        order = (inv_idx + list(range(t0, t0 + n_tc)) + list(range(t0 + n_tc, t0 + n_tc + n_tcarry))
                 + st_idx + list(range(t0 + n_tc + n_tcarry, n_res + sum(nz))))
        self.linear = common.permute_inputs(split.linear, order)
        self.num_linear_consts = len(inv_idx) + n_tc
        self.num_linear_carry = n_tcarry
        if chains:
            self.linear = _recomputing(self.linear, self.num_linear_consts + n_tcarry, st_idx,
                                       chains, known.outvars[n_out:])


def _recomputing(linear, n_before, st_idx, chains, residuals):
    """`linear` (inputs: n_before consts and carries, the stacked residuals
    `st_idx`, the x tangents) taking only the stacked residuals not in `chains`
    and recomputing the others first (see scan_recompute)."""
    kept = [k for k in st_idx if k not in chains]
    avals = linear.in_avals
    n_st = len(st_idx)
    pos = {k: n_before + j for j, k in enumerate(st_idx)}
    new_avals = avals[:n_before] + [avals[pos[k]] for k in kept] + avals[n_before + n_st:]

    def body(*args):
        given = dict(zip(kept, args[n_before:n_before + len(kept)]))
        given.update(scan_recompute.recompute(
            chains, residuals, {residuals[k]: v for k, v in given.items()}))
        return eval_closed(linear, *args[:n_before], *[given[k] for k in st_idx],
                           *args[n_before + len(kept):])

    return trace_program(body, new_avals, "control flow (linear part)")


def _scan_jvp(primals, tangents, *, jaxpr, num_consts, num_carry, length, reverse):
    nonzero = tuple(t is not None and common.is_float(get_aval(p))
                    for p, t in zip(primals, tangents))
    s = memo((jaxpr,), ("jvp", num_consts, num_carry, nonzero),
             lambda: _ScanSplit(jaxpr, num_consts, num_carry, nonzero))
    consts = primals[:num_consts]
    invariant = eval_closed(s.invariant, *consts)
    both = scan_p.bind(*primals, jaxpr=s.known, num_consts=num_consts, num_carry=num_carry,
                       length=length, reverse=reverse)
    n_out = len(jaxpr.out_avals)
    outs, stacked = both[:n_out], both[n_out:]
    nz = s.nonzero
    t_consts = [t for t, m in zip(tangents[:num_consts], nz[:num_consts]) if m]
    carry = slice(num_consts, num_consts + num_carry)
    t_carry = [instantiate_zeros(t, p) for t, p, m in
               zip(tangents[carry], primals[carry], nz[carry]) if m]
    t_xs = [t for t, m in zip(tangents[num_consts + num_carry:], nz[num_consts + num_carry:]) if m]
    touts = iter(scan_p.bind(*invariant, *t_consts, *t_carry, *stacked, *t_xs, jaxpr=s.linear,
                             num_consts=s.num_linear_consts, num_carry=s.num_linear_carry,
                             length=length, reverse=reverse))
    return outs, [next(touts) if m else None for m in s.out_nonzero]


scan_p.jvp = _scan_jvp


# ----------------------------------------------------------------------------
# Transposition

def _transposed_body(jaxpr, num_consts, num_carry, const_lin, xs_lin, ct_ys_avals):
    """The body of the backward scan: (known consts, [const cotangent accumulators,
    carry cotangents], [known xs, y cotangents]) -> (accumulators, carry cotangents,
    x cotangents)."""
    in_avals = jaxpr.in_avals
    const_avals = in_avals[:num_consts]
    carry_avals = in_avals[num_consts:num_consts + num_carry]
    x_avals = in_avals[num_consts + num_carry:]
    kc_avals = [a for a, m in zip(const_avals, const_lin) if not m]
    lc_avals = [a for a, m in zip(const_avals, const_lin) if m]
    kx_avals = [a for a, m in zip(x_avals, xs_lin) if not m]
    n_kc, n_lc, n_kx = len(kc_avals), len(lc_avals), len(kx_avals)

    def body(*vals):
        kc = iter(vals[:n_kc])
        acc = vals[n_kc:n_kc + n_lc]
        ct_carry = vals[n_kc + n_lc:n_kc + n_lc + num_carry]
        rest = vals[n_kc + n_lc + num_carry:]
        kx, ct_ys = iter(rest[:n_kx]), rest[n_kx:]
        args = ([UndefinedPrimal(a) if m else next(kc) for a, m in zip(const_avals, const_lin)]
                + [UndefinedPrimal(a) for a in carry_avals]
                + [UndefinedPrimal(a) if m else next(kx) for a, m in zip(x_avals, xs_lin)])
        cts = backward_pass_partial(jaxpr.jaxpr, jaxpr.consts, args,
                                    list(ct_carry) + list(ct_ys))
        avals = lc_avals + list(carry_avals) + [a for a, m in zip(x_avals, xs_lin) if m]
        cts = [c if c is not None else zeros_of(a) for c, a in zip(cts, avals)]
        new_acc = [add(a, c) for a, c in zip(acc, cts[:n_lc])]
        return new_acc + cts[n_lc:]

    return trace_program(body, kc_avals + lc_avals + list(carry_avals) + kx_avals
                         + list(ct_ys_avals), "transpose of scan (body)")


def _scan_transpose(cts, *args, jaxpr, num_consts, num_carry, length, reverse):
    consts, carry = args[:num_consts], args[num_consts:num_consts + num_carry]
    xs = args[num_consts + num_carry:]
    # Every carry of a linear scan is linear; a known one is an instantiated zero
    # tangent, whose cotangent nobody needs.
    carry_lin = [is_undefined(c) for c in carry]
    const_lin = tuple(is_undefined(c) for c in consts)
    xs_lin = tuple(is_undefined(x) for x in xs)
    out_avals = jaxpr.out_avals
    ct_carry = [zeros_of(a) if c is None else c for c, a in zip(cts[:num_carry], out_avals)]
    ct_ys = [zeros_of(common.stacked(a, length)) if c is None else c
             for c, a in zip(cts[num_carry:], out_avals[num_carry:])]
    n_lc = sum(const_lin)
    plan = memo((jaxpr,), ("transpose", num_consts, num_carry, const_lin, xs_lin),
                lambda: scan_hoist.hoist(
                    _transposed_body(jaxpr, num_consts, num_carry, const_lin, xs_lin,
                                     out_avals[num_carry:]),
                    num_consts - n_lc, n_lc, num_carry))
    known_consts = [c for c in consts if not is_undefined(c)]
    acc = [zeros_of(c.aval) for c, s in zip([c for c in consts if is_undefined(c)], plan.sums)
           if s is None]
    known_xs = [x for x in xs if not is_undefined(x)]
    outs = scan_p.bind(*known_consts, *acc, *ct_carry, *known_xs, *ct_ys, jaxpr=plan.body,
                       num_consts=len(known_consts), num_carry=len(acc) + num_carry,
                       length=length, reverse=not reverse)
    carried, ct_init = iter(outs[:len(acc)]), outs[len(acc):len(acc) + num_carry]
    stacked = outs[len(acc) + num_carry:]
    ct_consts = iter([next(carried) if s is None else s.total(known_xs + ct_ys, stacked)
                      for s in plan.sums])
    ct_xs = iter(stacked)
    return ([next(ct_consts) if m else None for m in const_lin]
            + [c if m else None for c, m in zip(ct_init, carry_lin)]
            + [next(ct_xs) if m else None for m in xs_lin])


scan_p.transpose = _scan_transpose


# ----------------------------------------------------------------------------
# Vectorization

def _scan_batch(vals, dims, *, jaxpr, num_consts, num_carry, length, reverse):
    size = axis_size_of(vals, dims)
    batched = [d is not None for d in dims]
    n_ys = len(jaxpr.out_avals) - num_carry
    carry_b = batched[num_consts:num_consts + num_carry]

    def make(carry_b):
        while True:  # a carry is batched if it starts so or the body makes it so
            in_b = batched[:num_consts] + carry_b + batched[num_consts + num_carry:]
            body, out_b = batch_jaxpr(jaxpr, tuple(in_b), size, carry_b + [False] * n_ys)
            grown = [a or b for a, b in zip(carry_b, out_b[:num_carry])]
            if grown == carry_b:
                return body, out_b
            carry_b = grown

    body, out_b = memo((jaxpr,), ("batch", num_consts, num_carry, tuple(batched), size),
                       lambda: make(list(carry_b)))
    carry_b = out_b[:num_carry]
    consts = [move_to_front(v, d, size) if d is not None else v
              for v, d in zip(vals[:num_consts], dims[:num_consts])]
    carry = [move_to_front(v, d, size) if b else v for v, d, b in
             zip(vals[num_consts:num_consts + num_carry], dims[num_consts:num_consts + num_carry],
                 carry_b)]
    xs = [moveaxis(v, d, 1) if d is not None else v
          for v, d in zip(vals[num_consts + num_carry:], dims[num_consts + num_carry:])]
    outs = scan_p.bind(*consts, *carry, *xs, jaxpr=body, num_consts=num_consts,
                       num_carry=num_carry, length=length, reverse=reverse)
    out_dims = ([0 if b else None for b in carry_b]
                + [1 if b else None for b in out_b[num_carry:]])
    return outs, out_dims


scan_p.batch = _scan_batch
