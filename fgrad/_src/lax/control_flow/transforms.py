"""Transforms of the closed jaxprs that control-flow primitives hold.

Each function traces a transformed evaluation of a jaxpr into a new closed
jaxpr (at the bottom level, so only concrete constants are captured); the
primitives' rules bind themselves again with the result. Results are cached on
the jaxpr they came from, so a body is transformed once per pattern.
"""
from ... import core
from ...ad import instantiate_zeros, jvp_flat, linearize_flat, transposed_program
from ...batching import BatchTrace, BatchTracer, move_to_front, moveaxis
from ...core import full_lower, set_current_trace
from ...jaxpr import eval_closed, eval_jaxpr
from ...lru import derived
from ...partial_eval import trace_to_subjaxpr


def memo(jaxprs, key, make):
    """make() once per (jaxpr objects, key). Entries live on the first jaxpr (and die
    with it, see lru.derived); the others are held by the entry and checked by
    identity."""
    first, rest = jaxprs[0], tuple(jaxprs[1:])
    full_key = ("control_flow", key, tuple(id(j) for j in rest))
    hit = derived(first, full_key, lambda: (rest, make()))
    if any(a is not b for a, b in zip(hit[0], rest)):
        hit = (rest, make())
        first._derived[full_key] = hit
    return hit[1]


def trace_program(fun, avals, what):
    """Trace a flat function of arrays of types `avals` at the bottom level."""
    return trace_to_subjaxpr(fun, avals, core.eval_trace, what)


def zeros_of(aval):
    from .. import zeros
    return zeros(aval.shape, aval.dtype)


# ----------------------------------------------------------------------------
# Forward mode

def jvp_jaxpr(closed, nonzero, instantiate):
    """(program (primals, nonzero tangents) -> (outputs, nonzero output tangents),
    which outputs have a tangent). `instantiate[k]` forces output k's tangent
    (zeros where the derivative is zero)."""
    n = len(nonzero)
    t_avals = [a for a, nz in zip(closed.in_avals, nonzero) if nz]
    out_nonzero = []

    def joint(*args):
        it = iter(args[n:])
        tangents = [next(it) if nz else None for nz in nonzero]
        outs, touts = jvp_flat(lambda *xs: eval_closed(closed, *xs), list(args[:n]), tangents,
                               "jvp of control flow")
        touts = [instantiate_zeros(t, o) if inst else t
                 for t, o, inst in zip(touts, outs, instantiate)]
        out_nonzero[:] = [t is not None for t in touts]
        return list(outs) + [t for t in touts if t is not None]

    program = trace_program(joint, list(closed.in_avals) + t_avals, "jvp of control flow")
    return program, tuple(out_nonzero)


class Split:
    """A body linearized: `known` maps primals to outputs + residuals; `linear`
    maps residuals + nonzero tangents to the flagged output tangents."""
    __slots__ = ("known", "linear", "num_res", "out_nonzero")

    def __init__(self, known, linear, num_res, out_nonzero):
        self.known, self.linear = known, linear
        self.num_res, self.out_nonzero = num_res, out_nonzero


def linearize_jaxpr(closed, nonzero, instantiate):
    """Split `closed` into its primal part (emitting residuals) and its linear part,
    for tangents on the inputs flagged `nonzero`; `instantiate[k]` forces output k's
    tangent to be computed (zeros where the derivative is zero)."""
    box = {}

    def primal_and_residuals(*primals):
        outs, lin = linearize_flat(lambda *xs: eval_closed(closed, *xs), list(primals),
                                   "linearize of control flow", in_mask=list(nonzero))
        box["lin"] = lin
        return list(outs) + list(lin.consts)

    known = trace_program(primal_and_residuals, closed.in_avals, "control flow (primal part)")
    lin = box["lin"]
    num_res = len(lin.consts)
    res_avals = [v.aval for v in lin.jaxpr.constvars]
    t_avals = [a for a, nz in zip(closed.in_avals, nonzero) if nz]
    out_nonzero = tuple(m or bool(i) for m, i in zip(lin.out_mask, instantiate))

    def linear_part(*args):
        touts = iter(eval_jaxpr(lin.jaxpr, list(args[:num_res]), *args[num_res:]))
        outs = []
        for m, nz, aval in zip(lin.out_mask, out_nonzero, closed.out_avals):
            if m:
                outs.append(next(touts))
            elif nz:
                outs.append(zeros_of(aval))
        return outs

    linear = trace_program(linear_part, res_avals + t_avals, "control flow (linear part)")
    return Split(known, linear, num_res, out_nonzero)


# ----------------------------------------------------------------------------
# Transposition

def transpose_jaxpr(closed, linear_mask, ct_mask):
    """A program from (the known inputs, the nonzero output cotangents) to the
    cotangents of the inputs flagged in `linear_mask` (zeros where none flows)."""
    ct_avals = [a if m else None for a, m in zip(closed.out_avals, ct_mask)]
    return transposed_program(closed, linear_mask, ct_avals, "transpose of control flow")


# ----------------------------------------------------------------------------
# Vectorization

def batch_jaxpr(closed, in_batched, size, force_out):
    """(program over inputs batched at dimension 0 where `in_batched`, which outputs
    come out batched (at dimension 0)). Outputs flagged in `force_out` are always
    batched (broadcast when the body leaves them unbatched)."""
    out_batched = []

    def batched(*vals):
        trace = BatchTrace(core.current_trace(), size)
        args = [BatchTracer(trace, v, 0) if b else v for v, b in zip(vals, in_batched)]
        try:
            with set_current_trace(trace):
                outs = eval_closed(closed, *args)
            results, flags = [], []
            for o, force in zip(outs, force_out):
                if type(o) is BatchTracer and o._trace is trace:
                    results.append(moveaxis(o.val, o.bdim, 0))
                    flags.append(True)
                else:
                    o = full_lower(o)
                    results.append(move_to_front(o, None, size) if force else o)
                    flags.append(bool(force))
            out_batched[:] = flags
            return results
        finally:
            trace.finish()

    avals = [core.ShapedArray((size,) + tuple(a.shape), a.dtype, a.weak_type) if b else a
             for a, b in zip(closed.in_avals, in_batched)]
    program = trace_program(batched, avals, "vmap of control flow")
    return program, tuple(out_batched)
