"""`while_loop` and `fori_loop`.

`while_p`'s operands are the predicate's consts, the body's consts, then the
carry; `cond_jaxpr` maps (cond consts, carry) to a scalar bool and `body_jaxpr`
maps (body consts, carry) to the new carry. Rules:
- jvp: one loop carrying primals and tangents. Reverse mode is refused: the
  trip count depends on the data, so there is no fixed set of iterations whose
  values could be stored (use scan, or fori_loop with concrete bounds);
- vmap: an unbatched predicate batches the body; a batched one runs until every
  member is done, and members already done keep their carry (a select);
- jit: predicate and body are compiled to their own programs, driven by a step
  labelled 'loop:while'.

`fori_loop` with concrete bounds is a `scan` (so it has reverse mode); with
traced bounds it is a `while_loop`.
"""
import numpy as np

from ... import core, tree_util
from ...ad import instantiate_zeros
from ...batching import axis_size_of, move_to_front
from ...core import Primitive, Tracer, get_aval
from ...errors import FgradTypeError
from ...jaxpr import eval_closed
from ..elementwise import add, lt, select_n
from ..reductions import reduce_or
from ..shape_ops import broadcast_in_dim
from . import common
from .scan import scan
from .transforms import batch_jaxpr, jvp_jaxpr, memo, trace_program

while_p = Primitive("while", multiple_results=True)
while_p.abstract_eval = lambda *avals, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts: \
    body_jaxpr.out_avals
while_p.out_weak_types = lambda params: [a.weak_type for a in params["body_jaxpr"].out_avals]


def run_while(cond, body, args, cond_nconsts, body_nconsts):
    """The loop itself, on NumPy values."""
    cc = args[:cond_nconsts]
    bc = args[cond_nconsts:cond_nconsts + body_nconsts]
    carry = list(args[cond_nconsts + body_nconsts:])
    ran = False
    while bool(cond(*cc, *carry)[0]):
        carry = body(*bc, *carry)
        ran = True
    return carry if ran else [np.array(c) for c in carry]


def _while_impl(*args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    return run_while(common.evaluator(cond_jaxpr), common.evaluator(body_jaxpr), args,
                     cond_nconsts, body_nconsts)


def _compile_step(params, name):
    cond = common.compiled(params["cond_jaxpr"], f"{name}/while_cond")
    body = common.compiled(params["body_jaxpr"], f"{name}/while_body")
    n_c, n_b = params["cond_nconsts"], params["body_nconsts"]
    return (lambda *args: run_while(cond, body, args, n_c, n_b)), "loop:while"


while_p.impl = _while_impl
while_p.compile_step = _compile_step


# ----------------------------------------------------------------------------
# The public functions

def while_loop(cond_fun, body_fun, init_val):
    """val = init_val; while cond_fun(val): val = body_fun(val); return val.
    cond_fun must return a boolean scalar; body_fun a value of init_val's type."""
    for name, f in (("cond_fun", cond_fun), ("body_fun", body_fun)):
        if not callable(f):
            raise TypeError(f"while_loop: {name} must be callable, got {type(f).__name__}")
    flat, tree = common.flatten_arrays(init_val, "while_loop (init_val)")
    avals = [get_aval(x) for x in flat]
    for _ in range(3):  # traced again while weakly typed carries take the body's types
        in_tree = tree_util.structure((tree_util.unflatten(tree, avals),))
        body, body_consts, out_tree = common.trace_function(body_fun, in_tree, avals,
                                                            "while_loop (body_fun)")
        promoted = common.promote_weak_carry(avals, body.out_avals) if out_tree == tree else None
        if promoted is None:
            break
        avals = promoted
    common.check_same_types(
        "while_loop", "carry", ("init_val", tree, avals),
        ("the value body_fun returns", out_tree, body.out_avals),
        "body_fun must return a value of the same tree, shapes and dtypes as init_val; cast "
        "the initial value (e.g. with .astype) or the value body_fun returns")
    cond, cond_consts, cond_tree = common.trace_function(cond_fun, in_tree, avals,
                                                         "while_loop (cond_fun)")
    pred = cond.out_avals
    if cond_tree.num_leaves != 1 or pred[0].shape != () or pred[0].dtype != np.bool_:
        got = ", ".join(a.str_short() for a in pred) or "nothing"
        raise FgradTypeError(f"while_loop: cond_fun must return a boolean scalar, got {got}",
                             "compare to get a bool (e.g. x < n), and reduce arrays with "
                             ".all() or .any()")
    flat = [common.cast_to(x, a) for x, a in zip(flat, avals)]
    outs = while_p.bind(*cond_consts, *body_consts, *flat, cond_jaxpr=cond, body_jaxpr=body,
                        cond_nconsts=len(cond_consts), body_nconsts=len(body_consts))
    return tree_util.unflatten(tree, outs)


def _concrete_int(x):
    """x as a Python int when it is a concrete scalar, else None."""
    if isinstance(x, Tracer):
        return None
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return int(x)
    aval = get_aval(x)
    if aval.shape == () and aval.dtype.kind in "iu":
        return int(np.asarray(x))
    return None


def fori_loop(lower, upper, body_fun, init_val):
    """val = init_val; for i in range(lower, upper): val = body_fun(i, val).
    With concrete bounds this is a scan (differentiable in reverse mode);
    with traced bounds a while_loop (forward mode only)."""
    if not callable(body_fun):
        raise TypeError(f"fori_loop: body_fun must be callable, got {type(body_fun).__name__}")
    lo, hi = core.full_lower(lower), core.full_lower(upper)
    for name, b in (("lower", lo), ("upper", hi)):
        a = get_aval(b)
        if a.shape != () or a.dtype.kind not in "iu":
            raise FgradTypeError(f"fori_loop: {name} must be an integer scalar, got "
                                 f"{a.str_short()}")
    if get_aval(lo).dtype != get_aval(hi).dtype:
        from ..elementwise import convert_element_type
        dtype = np.promote_types(get_aval(lo).dtype, get_aval(hi).dtype)
        lo, hi = convert_element_type(lo, dtype), convert_element_type(hi, dtype)
    lo_int, hi_int = _concrete_int(lower), _concrete_int(upper)
    if lo_int is not None and hi_int is not None:
        def step(carry, _):
            i, val = carry
            return (add(i, 1), body_fun(i, val)), None
        (_, val), _ = scan(step, (lo, init_val), None, length=max(hi_int - lo_int, 0))
        return val

    def cond_fun(carry):
        return lt(carry[0], carry[1])

    def body(carry):
        i, stop, val = carry
        return add(i, 1), stop, body_fun(i, val)

    return while_loop(cond_fun, body, (lo, hi, init_val))[2]


# ----------------------------------------------------------------------------
# Forward mode

def _while_jvp(primals, tangents, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    n_c, n_b = cond_nconsts, body_nconsts
    nonzero = [t is not None and common.is_float(get_aval(p)) for p, t in zip(primals, tangents)]
    bconst_nz, carry_nz = nonzero[n_c:n_c + n_b], nonzero[n_c + n_b:]

    def make(carry_nz):
        while True:  # which carries have tangents: a fixed point
            joint, out_nz = jvp_jaxpr(body_jaxpr, tuple(bconst_nz + carry_nz), tuple(carry_nz))
            grown = [a or b for a, b in zip(carry_nz, out_nz)]
            if grown == carry_nz:
                break
            carry_nz = grown
        # joint inputs: body consts, carry, const tangents, carry tangents; reorder to
        # consts (body consts, const tangents) then carry (carry, carry tangents)
        n_carry, n_tc, n_tcarry = len(carry_nz), sum(bconst_nz), sum(carry_nz)
        order = (list(range(n_b)) + list(range(n_b + n_carry, n_b + n_carry + n_tc))
                 + list(range(n_b, n_b + n_carry))
                 + list(range(n_b + n_carry + n_tc, n_b + n_carry + n_tc + n_tcarry)))
        body = common.permute_inputs(joint, order)
        t_avals = [a for a, nz in zip(body_jaxpr.out_avals, carry_nz) if nz]
        cond = common.with_unused_inputs(cond_jaxpr, len(cond_jaxpr.in_avals), t_avals)
        return cond, body, carry_nz

    cond, body, carry_nz = memo((cond_jaxpr, body_jaxpr),
                                ("jvp", n_c, n_b, tuple(nonzero)), lambda: make(carry_nz))
    cc, bc = primals[:n_c], primals[n_c:n_c + n_b]
    carry = primals[n_c + n_b:]
    t_bc = [t for t, m in zip(tangents[n_c:n_c + n_b], bconst_nz) if m]
    t_carry = [instantiate_zeros(t, p) for t, p, m in zip(tangents[n_c + n_b:], carry, carry_nz)
               if m]
    outs = while_p.bind(*cc, *bc, *t_bc, *carry, *t_carry, cond_jaxpr=cond, body_jaxpr=body,
                        cond_nconsts=n_c, body_nconsts=n_b + len(t_bc))
    n = len(carry)
    primal_outs, touts = outs[:n], iter(outs[n:])
    if common.is_linearizing(primals, tangents):
        # The loop above is recorded in the linear program, primal work and all (its
        # transpose explains why that fails); the primal results must be known now.
        primal_outs = while_p.bind(*primals, cond_jaxpr=cond_jaxpr, body_jaxpr=body_jaxpr,
                                   cond_nconsts=n_c, body_nconsts=n_b)
    return primal_outs, [next(touts) if m else None for m in carry_nz]


while_p.jvp = _while_jvp


def _while_transpose(cts, *args, **params):
    raise TypeError(
        "Reverse-mode differentiation (grad, vjp, jacrev) of fgrad.lax.while_loop is not "
        "supported: its trip count depends on the data, so the backward pass cannot know "
        "how many iterations' values to store and replay in reverse.\n  hint: use "
        "fgrad.lax.scan with a fixed number of steps, or fgrad.lax.fori_loop with concrete "
        "(Python int) bounds, which runs as a scan; forward mode (jvp, jacfwd) works for "
        "while_loop as it is.")


while_p.transpose = _while_transpose


# ----------------------------------------------------------------------------
# Vectorization

def _while_batch(vals, dims, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    n_c, n_b = cond_nconsts, body_nconsts
    size = axis_size_of(vals, dims)
    batched = tuple(d is not None for d in dims)
    cc_b, bc_b = list(batched[:n_c]), list(batched[n_c:n_c + n_b])

    def make():
        carry_b = list(batched[n_c + n_b:])
        while True:
            body, out_b = batch_jaxpr(body_jaxpr, tuple(bc_b + carry_b), size, carry_b)
            cond, pred_b = batch_jaxpr(cond_jaxpr, tuple(cc_b + carry_b), size, [False])
            grown = [a or b for a, b in zip(carry_b, out_b)]
            if pred_b[0] and not all(grown):
                grown = [True] * len(grown)  # members finish at different times
            if grown == carry_b:
                break
            carry_b = grown
        if pred_b[0]:
            cond, body = _until_all_done(cond, body, n_c, n_b, len(carry_b))
            return cond, body, carry_b, n_c + n_b
        return cond, body, carry_b, n_b

    cond, body, carry_b, body_n = memo((cond_jaxpr, body_jaxpr),
                                       ("batch", n_c, n_b, batched, size), make)
    ops = [move_to_front(v, d, size) if d is not None else v for v, d in zip(vals, dims)]
    cc, bc, carry = ops[:n_c], ops[n_c:n_c + n_b], ops[n_c + n_b:]
    carry = [move_to_front(v, dims[n_c + n_b + k], size) if b and dims[n_c + n_b + k] is None
             else v for k, (v, b) in enumerate(zip(carry, carry_b))]
    body_consts = cc + bc if body_n == n_c + n_b else bc
    outs = while_p.bind(*cc, *body_consts, *carry, cond_jaxpr=cond, body_jaxpr=body,
                        cond_nconsts=n_c, body_nconsts=body_n)
    return outs, [0 if b else None for b in carry_b]


def _until_all_done(cond, body, n_c, n_b, n_carry):
    """For a per-member predicate: loop while any member goes on; the body takes the
    predicate's consts too and keeps the carry of members that are done."""
    def any_cond(*args):
        return [reduce_or(eval_closed(cond, *args)[0], (0,))]

    def masked_body(*args):
        cc, bc, carry = args[:n_c], args[n_c:n_c + n_b], args[n_c + n_b:]
        going = eval_closed(cond, *cc, *carry)[0]
        new = eval_closed(body, *bc, *carry)
        return [select_n(broadcast_in_dim(going, tuple(c.shape), (0,)), c, x)
                for c, x in zip(carry, new)]

    new_cond = trace_program(any_cond, cond.in_avals, "vmap of while_loop (predicate)")
    new_body = trace_program(masked_body, cond.in_avals[:n_c] + body.in_avals,
                             "vmap of while_loop (body)")
    return new_cond, new_body


while_p.batch = _while_batch
