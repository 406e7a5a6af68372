"""`checkpoint` (alias `remat`): recompute a function's forward pass in the
backward pass instead of storing its intermediates.

A checkpointed call binds `checkpoint_p`, holding the function's closed jaxpr.
Under `linearize` (reverse mode) its JVP rule computes the primal outputs now
and records ONE linear equation: a `checkpoint_p` call of the function's JVP
(tangent outputs only) whose operands are the primal inputs and the tangents.
So the only residuals are the inputs. Its transpose runs the primal part again
(backward_pass_partial evaluates the known equations forwards) and then the
transposed linear part. With prevent_cse=True that backward computation is a
call of its own, so under jit it is a separate sub-program (labelled
'call:checkpoint') that common-subexpression elimination cannot merge with the
forward pass, which would undo the recomputation.
"""
import functools

from . import tree_util
from .ad import is_undefined
from .batching import axis_size_of, move_to_front
from .core import Primitive, get_aval
from .jaxpr import ClosedJaxpr, dce_jaxpr, eval_closed
from .lax.control_flow import common
from .lax.control_flow.transforms import batch_jaxpr, jvp_jaxpr, memo, transpose_jaxpr

checkpoint_p = Primitive("checkpoint", multiple_results=True)
checkpoint_p.abstract_eval = lambda *avals, jaxpr, prevent_cse: jaxpr.out_avals
checkpoint_p.out_weak_types = lambda params: [a.weak_type for a in params["jaxpr"].out_avals]
checkpoint_p.impl = lambda *args, jaxpr, prevent_cse: common.evaluator(jaxpr)(*args)


def _compile_step(params, name):
    program = common.compiled(params["jaxpr"], f"{name}/checkpoint")
    return program, "call:checkpoint"


checkpoint_p.compile_step = _compile_step


def checkpoint(fun, prevent_cse=True, static_argnums=(), policy=None):
    """`fun` whose intermediates are recomputed in the backward pass rather than
    stored: reverse-mode differentiation keeps only its inputs as residuals.
    Arguments at `static_argnums` are passed through as Python values."""
    if policy is not None:
        raise NotImplementedError("checkpoint: policies are not supported; every "
                                  "intermediate is recomputed")
    if not callable(fun):
        raise TypeError(f"checkpoint: expected a function, got {type(fun).__name__}")
    static = {static_argnums} if isinstance(static_argnums, int) else set(static_argnums)
    name = getattr(fun, "__name__", type(fun).__name__)

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        nums = {i % len(args) for i in static if -len(args) <= i < len(args)}
        dynamic = tuple(a for i, a in enumerate(args) if i not in nums)

        def call(dyn, kw):
            it = iter(dyn)
            return fun(*[args[i] if i in nums else next(it) for i in range(len(args))], **kw)

        flat, in_tree = common.flatten_arrays((dynamic, kwargs), f"checkpoint of {name}")
        closed, consts, out_tree = common.trace_function(
            call, in_tree, [get_aval(x) for x in flat], f"checkpoint of {name}")
        outs = checkpoint_p.bind(*consts, *flat, jaxpr=closed, prevent_cse=bool(prevent_cse))
        return tree_util.unflatten(out_tree, outs)

    return wrapped


remat = checkpoint


# ----------------------------------------------------------------------------
# Rules

def _tangent_program(jaxpr, nonzero):
    """(primal inputs, nonzero tangents) -> nonzero tangent outputs, and their flags."""
    joint, out_nonzero = jvp_jaxpr(jaxpr, nonzero, [False] * len(jaxpr.out_avals))
    n_out = len(jaxpr.out_avals)
    keep = [False] * n_out + [True] * sum(out_nonzero)
    return ClosedJaxpr(dce_jaxpr(joint.jaxpr, keep), joint.consts), joint, out_nonzero


def _checkpoint_jvp(primals, tangents, *, jaxpr, prevent_cse):
    nonzero = tuple(t is not None and common.is_float(get_aval(p))
                    for p, t in zip(primals, tangents))
    tangent_only, joint, out_nonzero = memo((jaxpr,), ("jvp", nonzero),
                                            lambda: _tangent_program(jaxpr, nonzero))
    ts = [t for t, m in zip(tangents, nonzero) if m]
    if common.is_linearizing(primals, tangents):
        outs = eval_closed(jaxpr, *primals)
        touts = iter(checkpoint_p.bind(*primals, *ts, jaxpr=tangent_only,
                                       prevent_cse=prevent_cse))
    else:
        both = checkpoint_p.bind(*primals, *ts, jaxpr=joint, prevent_cse=prevent_cse)
        outs, touts = both[:len(jaxpr.out_avals)], iter(both[len(jaxpr.out_avals):])
    return outs, [next(touts) if m else None for m in out_nonzero]


checkpoint_p.jvp = _checkpoint_jvp


def _checkpoint_transpose(cts, *args, jaxpr, prevent_cse):
    linear_mask = tuple(is_undefined(a) for a in args)
    ct_mask = tuple(c is not None for c in cts)
    program = memo((jaxpr,), ("transpose", linear_mask, ct_mask),
                   lambda: transpose_jaxpr(jaxpr, linear_mask, ct_mask))
    ins = [a for a in args if not is_undefined(a)] + [c for c in cts if c is not None]
    if prevent_cse:
        outs = checkpoint_p.bind(*ins, jaxpr=program, prevent_cse=True)
    else:
        outs = eval_closed(program, *ins)
    outs = iter(outs)
    return [next(outs) if m else None for m in linear_mask]


checkpoint_p.transpose = _checkpoint_transpose


def _checkpoint_batch(vals, dims, *, jaxpr, prevent_cse):
    size = axis_size_of(vals, dims)
    in_batched = tuple(d is not None for d in dims)
    program, out_batched = memo(
        (jaxpr,), ("batch", in_batched, size),
        lambda: batch_jaxpr(jaxpr, in_batched, size, [False] * len(jaxpr.out_avals)))
    vals = [move_to_front(v, d, size) if d is not None else v for v, d in zip(vals, dims)]
    outs = checkpoint_p.bind(*vals, jaxpr=program, prevent_cse=prevent_cse)
    return outs, [0 if b else None for b in out_batched]


checkpoint_p.batch = _checkpoint_batch
