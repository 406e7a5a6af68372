"""`cond` and `switch`: run one of several functions, chosen by a (traced) index.

Both bind `cond_p`, whose operands are an int32 index (already clamped to the
branches) followed by the branches' operands, and whose `branches` param holds
one closed jaxpr per branch (every branch takes every branch's hoisted
constants, using its own). Rules:
- jvp: each branch is split into a primal part that also returns residuals and
  a linear part; one cond runs the primal parts, a second cond the linear ones,
  so under linearize only the linear cond is recorded;
- transpose: a cond of the transposed branches (the index is known);
- vmap: an unbatched index batches every branch; a batched one becomes a
  `cond_lanes` (every branch evaluated, each member picking its own; its
  derivatives keep the pick, so an untaken branch's NaN never leaks);
- jit: each branch is compiled to its own program, the choice made by a step
  labelled 'branch:cond'.
"""
import numpy as np

from ... import core
from ...ad import is_undefined
from ...batching import axis_size_of, move_to_front
from ...core import Primitive, Tracer, get_aval
from ...errors import FgradTypeError
from ...jaxpr import eval_closed
from ..elementwise import convert_element_type, max as lax_max, min as lax_min, ne
from . import common
from .cond_lanes import cond_lanes
from .transforms import (batch_jaxpr, linearize_jaxpr, memo, trace_program,
                         transpose_jaxpr, zeros_of)

cond_p = Primitive("cond", multiple_results=True)


def _out_avals(branches):
    """Branch 0's output types, weakly typed only where every branch's output is."""
    avals = []
    for k, a in enumerate(branches[0].out_avals):
        weak = all(b.out_avals[k].weak_type for b in branches)
        avals.append(core.ShapedArray(a.shape, a.dtype, weak))
    return avals


cond_p.abstract_eval = lambda index, *avals, branches: _out_avals(branches)
cond_p.out_weak_types = lambda params: [a.weak_type for a in _out_avals(params["branches"])]


def _pick(index, n):
    return int(np.clip(int(index), 0, n - 1))


def _cond_impl(index, *ops, branches):
    return common.evaluator(branches[_pick(index, len(branches))])(*ops)


cond_p.impl = _cond_impl


def _compile_step(params, name):
    """A step running the compiled program of the chosen branch."""
    programs = [common.compiled(b, f"{name}/branch{i}") for i, b in enumerate(params["branches"])]
    n = len(programs)

    def run(index, *ops):
        return programs[_pick(index, n)](*ops)
    return run, "branch:cond"


cond_p.compile_step = _compile_step


# ----------------------------------------------------------------------------
# The public functions

def cond(pred, true_fun, false_fun, *operands):
    """true_fun(*operands) if pred else false_fun(*operands); pred is a scalar (a
    nonzero number counts as true). Both functions must return the same types."""
    for name, f in (("true_fun", true_fun), ("false_fun", false_fun)):
        if not callable(f):
            raise TypeError(f"cond: {name} must be callable, got {type(f).__name__}")
    pred = core.full_lower(pred)
    aval = get_aval(pred)
    if aval.shape != ():
        raise FgradTypeError(f"cond: the predicate must be a scalar, got {aval.str_short()}",
                             "reduce it to one value (e.g. with .all() or .any()), or use "
                             "fgrad.numpy.where for an element-wise choice, or vmap the cond")
    if aval.dtype != np.bool_:
        pred = ne(pred, 0)
    index = convert_element_type(pred, np.int32)
    return _bind_branches("cond", index, [false_fun, true_fun], ["false_fun", "true_fun"],
                          operands, reference=1)


def switch(index, branches, *operands):
    """branches[index](*operands), with index clamped to [0, len(branches) - 1]."""
    branches = list(branches)
    if not branches:
        raise ValueError("switch: branches must hold at least one function")
    for i, f in enumerate(branches):
        if not callable(f):
            raise TypeError(f"switch: branches[{i}] must be callable, got {type(f).__name__}")
    n = len(branches)
    if isinstance(index, Tracer) or core.get_aval(index).shape != ():
        index = core.full_lower(index)
        aval = get_aval(index)
        if aval.shape != () or aval.dtype.kind not in "iub":
            raise FgradTypeError(f"switch: the index must be an integer scalar, got "
                                 f"{aval.str_short()}")
        dt = np.dtype(aval.dtype)     # clamp in the index's own dtype, as eagerly: a
        if dt.kind != "b":            # huge unsigned index must not wrap in the int32
            if dt.kind == "i":
                index = lax_max(index, np.zeros((), dt))
            if n - 1 <= np.iinfo(dt).max:
                index = lax_min(index, np.asarray(n - 1, dt))
        index = convert_element_type(index, np.int32)
    else:
        if np.dtype(get_aval(index).dtype).kind not in "iub":
            raise FgradTypeError(f"switch: the index must be an integer scalar, got {index!r}")
        index = core.Array(np.asarray(_pick(index, n), np.int32), False)
    return _bind_branches("switch", index, branches,
                          [f"branches[{i}]" for i in range(n)], operands, reference=0)


def _bind_branches(what, index, funs, names, operands, reference):
    flat, in_tree = common.flatten_arrays(operands, what)
    avals = [get_aval(x) for x in flat]
    traced = [common.trace_function(f, in_tree, avals, f"{what} ({name})")
              for f, name in zip(funs, names)]
    ref = traced[reference]
    for i, (closed, _, out_tree) in enumerate(traced):
        if i != reference:
            common.check_same_types(
                what, "the output", (names[reference], ref[2], ref[0].out_avals),
                (names[i], out_tree, closed.out_avals),
                "every branch must return the same tree of arrays with the same shapes and "
                "dtypes; cast or reshape in the branch that differs")
    const_avals = [[get_aval(c) for c in consts] for _, consts, _ in traced]
    jaxprs = []
    for i, (closed, _, _) in enumerate(traced):
        before = [a for avs in const_avals[:i] for a in avs]
        after = [a for avs in const_avals[i + 1:] for a in avs]
        closed = common.with_unused_inputs(closed, 0, before)
        jaxprs.append(common.with_unused_inputs(closed, len(before) + len(const_avals[i]),
                                                after))
    consts = [c for _, cs, _ in traced for c in cs]
    outs = cond_p.bind(index, *consts, *flat, branches=tuple(jaxprs))
    return common.tree_util.unflatten(ref[2], outs)


# ----------------------------------------------------------------------------
# Forward mode and linearization

def split_branches(branches, nonzero):
    """Per branch a primal part (operands -> outputs + every branch's residual slots,
    zeros in the others') and a linear part (all residuals + tangents -> tangents)."""
    n_out = len(branches[0].out_avals)
    first = [linearize_jaxpr(b, nonzero, [False] * n_out) for b in branches]
    out_nonzero = [any(s.out_nonzero[k] for s in first) for k in range(n_out)]
    splits = [linearize_jaxpr(b, nonzero, out_nonzero) for b in branches]
    res_avals = [s.known.out_avals[n_out:] for s in splits]
    offsets = np.cumsum([0] + [len(r) for r in res_avals]).tolist()
    all_res = [a for r in res_avals for a in r]
    known, linear = [], []
    for i, s in enumerate(splits):
        def primal(*ops, s=s, i=i):
            outs = eval_closed(s.known, *ops)
            mine = iter(outs[n_out:])
            res = [next(mine) if offsets[i] <= k < offsets[i + 1] else zeros_of(a)
                   for k, a in enumerate(all_res)]
            return list(outs[:n_out]) + res

        def tangent(*args, s=s, i=i):
            res = args[offsets[i]:offsets[i + 1]]
            return eval_closed(s.linear, *res, *args[len(all_res):])

        t_avals = [a for a, nz in zip(branches[i].in_avals, nonzero) if nz]
        known.append(trace_program(primal, branches[i].in_avals, "cond (primal part)"))
        linear.append(trace_program(tangent, all_res + t_avals, "cond (linear part)"))
    return tuple(known), tuple(linear), len(all_res), tuple(out_nonzero)


def _cond_jvp(primals, tangents, *, branches):
    index, ops = primals[0], primals[1:]
    op_tangents = tangents[1:]
    nonzero = tuple(t is not None and common.is_float(get_aval(p))
                    for p, t in zip(ops, op_tangents))
    known, linear, n_res, out_nonzero = memo(branches, ("jvp", nonzero),
                                             lambda: split_branches(branches, nonzero))
    both = cond_p.bind(index, *ops, branches=known)
    n_out = len(both) - n_res
    outs, residuals = both[:n_out], both[n_out:]
    ts = [t for t, nz in zip(op_tangents, nonzero) if nz]
    touts = iter(cond_p.bind(index, *residuals, *ts, branches=linear))
    return outs, [next(touts) if nz else None for nz in out_nonzero]


cond_p.jvp = _cond_jvp


def transposed_branches(branches, index, args, cts):
    """(which operands are linear, each branch transposed for them and the given
    cotangents), shared by cond and cond_lanes."""
    if is_undefined(index):
        raise TypeError("cond: the branch index cannot be a linear input")
    linear_mask = tuple(is_undefined(a) for a in args)
    ct_mask = tuple(c is not None for c in cts)
    transposed = memo(branches, ("transpose", linear_mask, ct_mask),
                      lambda: tuple(transpose_jaxpr(b, linear_mask, ct_mask) for b in branches))
    return linear_mask, transposed


def _cond_transpose(cts, index, *args, branches):
    linear_mask, transposed = transposed_branches(branches, index, args, cts)
    known = [a for a in args if not is_undefined(a)]
    outs = iter(cond_p.bind(index, *known, *[c for c in cts if c is not None],
                            branches=transposed))
    return [None] + [next(outs) if m else None for m in linear_mask]


cond_p.transpose = _cond_transpose


# ----------------------------------------------------------------------------
# Vectorization

def _cond_batch(vals, dims, *, branches):
    size = axis_size_of(vals, dims)
    index, ops = vals[0], vals[1:]
    index_dim, op_dims = dims[0], dims[1:]
    if index_dim is not None:
        return _batched_index(index, index_dim, ops, op_dims, branches, size)
    in_batched = tuple(d is not None for d in op_dims)
    ops = [move_to_front(x, d, size) if d is not None else x for x, d in zip(ops, op_dims)]

    def make():
        n_out = len(branches[0].out_avals)
        flags = [batch_jaxpr(b, in_batched, size, [False] * n_out)[1] for b in branches]
        force = [any(f[k] for f in flags) for k in range(n_out)]
        batched = tuple(batch_jaxpr(b, in_batched, size, force)[0] for b in branches)
        return batched, force

    batched, force = memo(branches, ("batch", in_batched, size), make)
    outs = cond_p.bind(index, *ops, branches=batched)
    return outs, [0 if f else None for f in force]


def _batched_index(index, index_dim, ops, op_dims, branches, size):
    """Each member takes its own branch: a cond_lanes (which see)."""
    index = move_to_front(index, index_dim, size)
    ops = [move_to_front(x, d, size) if d is not None else x for x, d in zip(ops, op_dims)]
    outs = cond_lanes(index, ops, branches, [d is not None for d in op_dims], size)
    return outs, [0] * len(outs)


cond_p.batch = _cond_batch
