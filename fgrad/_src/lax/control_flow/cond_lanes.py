"""`cond_lanes`: a cond whose index differs per batch member, which is what vmap
makes of a cond or switch with a batched predicate.

Operands: an int32 index of shape (size,), then the branches' operands, those
flagged in `in_batched` carrying the batch at dimension 0. `branches` are the
cond's own (unbatched) branches; every output is batched at dimension 0, and
member m's outputs are `branches[index[m]]` applied to member m's operands.

Under jit the equation is inlined as its expansion: every branch runs on the
whole batch and each member picks its results with select_n. Eagerly each
branch runs only on the members that take it. What the primitive adds over the
expansion is its derivatives, which keep the per-member choice: the JVP is a
cond_lanes of the branches' JVPs and the transpose a cond_lanes of the
transposed branches, so each member's cotangent comes from its own branch
alone. A branch not taken by a member therefore never multiplies that member's
zero cotangent into a NaN (sqrt or log of a negative member), as a plain select
of both branches' results does.
"""
import numpy as np

from ... import core
from ...ad import is_undefined
from ...batching import axis_size_of, batch_flat, move_to_front
from ...core import Primitive
from ...jaxpr import eval_closed
from ..elementwise import select_n
from ..reductions import reduce_sum
from ..shape_ops import broadcast_in_dim, reshape
from . import common
from .transforms import memo, trace_program

cond_lanes_p = Primitive("cond_lanes", multiple_results=True)


def _out_avals(branches, size):
    """Branch 0's output types batched by `size`, weak only where every branch's is."""
    avals = []
    for k, a in enumerate(branches[0].out_avals):
        weak = all(b.out_avals[k].weak_type for b in branches)
        avals.append(core.ShapedArray((size,) + tuple(a.shape), a.dtype, weak))
    return avals


cond_lanes_p.abstract_eval = \
    lambda index, *avals, branches, in_batched, size: _out_avals(branches, size)
cond_lanes_p.out_weak_types = \
    lambda params: [a.weak_type for a in _out_avals(params["branches"], params["size"])]


def cond_lanes(index, ops, branches, in_batched, size):
    """Member m of the results is branches[index[m]] of member m of `ops`."""
    return cond_lanes_p.bind(index, *ops, branches=tuple(branches),
                             in_batched=tuple(in_batched), size=size)


# ----------------------------------------------------------------------------
# Evaluation: every branch on the whole batch, then a per-member pick

def _every_branch(index, *ops, branches, in_batched, size):
    dims = [0 if b else None for b in in_batched]
    results = [batch_flat(lambda *xs, b=b: eval_closed(b, *xs), dims, size)(*ops)
               for b in branches]
    outs = []
    for cases in zip(*results):
        which = broadcast_in_dim(index, tuple(cases[0].shape), (0,))
        outs.append(select_n(which, *cases))
    return outs


def expansion(params):
    """The equation as a closed jaxpr of ordinary primitives (what jit inlines)."""
    branches, in_batched, size = params["branches"], params["in_batched"], params["size"]

    def make():
        avals = [core.ShapedArray((size,), np.dtype(np.int32), False)]
        avals += [common.stacked(a, size) if b else a
                  for a, b in zip(branches[0].in_avals, in_batched)]
        return trace_program(lambda *args: _every_branch(*args, **params), avals,
                             "vmap of cond (every branch)")
    return memo(branches, ("lanes", in_batched, size), make)


def _lanes_impl(index, *ops, branches, in_batched, size):
    """Eagerly each branch runs on the members that take it, and only on them: no
    work, floating-point warning or debug_nans alarm comes from a branch not taken."""
    index = np.asarray(index)
    dims = [0 if b else None for b in in_batched]
    outs = [np.empty(a.shape, a.dtype) for a in _out_avals(branches, size)]
    for i, branch in enumerate(branches):
        members = np.flatnonzero(index == i)
        if not members.size:
            continue
        own = [np.asarray(x)[members] if b else x for x, b in zip(ops, in_batched)]
        with core.set_current_trace(core.eval_trace):
            results = batch_flat(lambda *xs, b=branch: eval_closed(b, *xs), dims,
                                 members.size)(*own)
        for out, r in zip(outs, results):
            out[members] = common.raw(r)
    return outs


cond_lanes_p.impl = _lanes_impl
cond_lanes_p.inline_body = expansion


# ----------------------------------------------------------------------------
# Forward mode and transposition

def _lanes_jvp(primals, tangents, *, branches, in_batched, size):
    from .cond import split_branches
    index, ops = primals[0], primals[1:]
    nonzero = tuple(t is not None and common.is_float(core.get_aval(p))
                    for p, t in zip(ops, tangents[1:]))
    known, linear, n_res, out_nonzero = memo(branches, ("jvp", nonzero),
                                             lambda: split_branches(branches, nonzero))
    both = cond_lanes(index, ops, known, in_batched, size)
    n_out = len(both) - n_res
    outs, residuals = both[:n_out], both[n_out:]
    ts = [t for t, nz in zip(tangents[1:], nonzero) if nz]
    t_batched = [b for b, nz in zip(in_batched, nonzero) if nz]
    touts = iter(cond_lanes(index, residuals + ts, linear, [True] * n_res + t_batched, size))
    return outs, [next(touts) if nz else None for nz in out_nonzero]


def _lanes_transpose(cts, index, *args, branches, in_batched, size):
    from .cond import transposed_branches
    _, transposed = transposed_branches(branches, index, args, cts)
    known = [a for a in args if not is_undefined(a)]
    known_batched = [b for a, b in zip(args, in_batched) if not is_undefined(a)]
    given = [c for c in cts if c is not None]
    # Per member, the cotangents its own branch gives; a linear operand shared by
    # every member (unbatched) gets the sum over members.
    per_member = iter(cond_lanes(index, known + given, transposed,
                                 known_batched + [True] * len(given), size))
    out = [None]
    for a, b in zip(args, in_batched):
        if not is_undefined(a):
            out.append(None)
            continue
        ct = next(per_member)
        out.append(ct if b else reduce_sum(ct, (0,)))
    return out


cond_lanes_p.jvp = _lanes_jvp
cond_lanes_p.transpose = _lanes_transpose


# ----------------------------------------------------------------------------
# Vectorization: an outer batch joins the members (outer x inner, flattened)

def _merge(x, dim, inner_batched, outer, inner):
    """x as (outer * inner, ...): outer members first, each with its inner ones."""
    x = move_to_front(x, dim, outer)
    shape = tuple(x.shape)
    if not inner_batched:
        shape = (outer, inner) + shape[1:]
        x = broadcast_in_dim(x, shape, (0,) + tuple(range(2, len(shape))))
    return reshape(x, (outer * inner,) + shape[2:])


def _lanes_batch(vals, dims, *, branches, in_batched, size):
    outer = axis_size_of(vals, dims)
    index = _merge(vals[0], dims[0], True, outer, size)
    ops, flags = [], []
    for x, d, b in zip(vals[1:], dims[1:], in_batched):
        if d is None and not b:     # shared by every member, inner and outer
            ops.append(x)
            flags.append(False)
        else:
            ops.append(_merge(x, d, b, outer, size))
            flags.append(True)
    outs = cond_lanes(index, ops, branches, flags, outer * size)
    return [reshape(o, (outer, size) + tuple(o.shape[1:])) for o in outs], [0] * len(outs)


cond_lanes_p.batch = _lanes_batch
