"""Matrix products in a layout BLAS takes: transpose the operands first.

gemm multiplies row-major matrices, possibly transposed, whose rows may be
any number of elements apart (so batch dimensions before an operand's last
one, as attention's heads in 'bqhd,bkhd->bhqk', are read in place; see
cpu/blas.py). A dot_general whose contracting dimensions sit between free ones,
or whose last dimension is a batch one, does not fit. Transposing an operand to (batch, free,
contracting) or (batch, contracting, free) makes it fit, and a transpose that
only feeds a native kernel compiles to a copy loop, so the product runs
natively instead of as a NumPy step. An operand already in one of those
layouts, or read in place, is not copied (except attention's k, see _layout),
and a copy keeps the operand's last axis last where it can (rows of d move
whole, not single elements with a stride of h*d). The output layout (batch,
lhs free, rhs free) does not change.

This runs after `simplify` (whose `fold_transposes_into_dots` would fold the
transposes back) and only where the backend says the dot's layout is all that
stops it, or for attention's k.
"""
import math

from ..core import ShapedArray
from ..jaxpr import ClosedJaxpr, Eqn, Jaxpr, Literal, Var
from ..lax.shape_ops import transpose_p
from .fusion import VIEWS


SHORT_SUM = 64        # contracting sizes for which a batched rhs is copied untransposed


def blas_layout_dots(closed, takes, rows_first=lambda eqn: False):
    """`closed` with each dot_general that `takes(eqn)` rejects, but accepts once
    its operands are transposed, rewritten that way (the same object when none),
    and so is one whose batched rhs with a short sum is read in place transposed
    (see _layout), or one for which `rows_first(eqn)` holds: the backend reads
    its rhs by rows of the result's width (cpu/blas.py's lane products), so a
    rhs stored (free, contracting) is copied (contracting, free) once by a
    kernel of its own, not by each call of the product (not a view's: a copy of
    a view of a view would leave a NumPy step between kernels)."""
    jaxpr = closed.jaxpr
    views = {v for e in jaxpr.eqns if e.primitive.name in VIEWS for v in e.outvars}
    eqns, changed, early = [], False, []
    for eqn in jaxpr.eqns:
        first = eqn.primitive.name == "dot_general" and type(eqn.invars[1]) is Var \
            and eqn.invars[1] not in views and rows_first(eqn)
        if eqn.primitive.name == "dot_general" and (not takes(eqn) or _short_rhs_in_place(eqn)
                                                    or first):
            rewritten = _with_transposed_operands(eqn, takes, first)
            if rewritten is not None:
                eqns.extend(rewritten)
                if first and len(rewritten) > 1 and rewritten[-2].outvars[0] \
                        is rewritten[-1].invars[1]:
                    early.append(rewritten[-2])
                changed = True
                continue
        eqns.append(eqn)
    if not changed:
        return closed
    return ClosedJaxpr(Jaxpr(jaxpr.constvars, jaxpr.invars, _hoisted(eqns, early),
                             jaxpr.outvars), closed.consts)


def _hoisted(eqns, early):
    """`eqns` with each of `early` (copies of a rhs) moved up to right after the
    equation defining its operand (first when that is an input or constant): a
    weight's copy then runs before the layer's products and its element-wise
    kernels, not between a product and the kernel that follows it (which runs
    each thread's rows right after the product's, `program.chained_rows`)."""
    moved = {id(e) for e in early}
    defined = {v for e in eqns for v in e.outvars}
    out = [e for e in early if e.invars[0] not in defined]
    for e in eqns:
        if id(e) in moved:
            continue
        out.append(e)
        out.extend(m for m in early if m.invars[0] in e.outvars)
    return out


def _short_rhs_in_place(eqn):
    """Whether the rhs has batch dims, not leading, and a short sum over its last
    dim: gemm would read it in place as a transposed matrix (see _layout)."""
    (_, rc), (_, rb) = eqn.params["dimension_numbers"]
    shape = eqn.invars[1].aval.shape
    return bool(rb) and tuple(rb) != tuple(range(len(rb))) and len(shape) - 1 in rc \
        and math.prod(shape[d] for d in rc) <= SHORT_SUM


def _with_transposed_operands(eqn, takes, rows_first=False):
    """[transposes of the operands that need one..., the dot on them] that `takes`
    accepts, or None. An operand whose batch dims are not leading but whose other
    dims are in the order a copy would give them stays in place where `takes`
    accepts that (gemm reads its rows with a stride)."""
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lhs, rhs = eqn.invars
    if type(lhs) is Literal or type(rhs) is Literal:
        return None
    layouts = [_layout(a.aval.shape, batch, contract, side, rows_first)
               for a, batch, contract, side in ((lhs, lb, lc, "lhs"), (rhs, rb, rc, "rhs"))]
    in_order = [[d for d in perm if d not in batch] == [d for d in range(len(perm))
                                                         if d not in batch]
                for (perm, _), batch in zip(layouts, (lb, rb))]
    for keep in (in_order, [False, False]):
        rewritten = _rewrite(eqn, layouts, keep)
        if takes(rewritten[-1]):
            return rewritten
    return None


def _rewrite(eqn, layouts, keep):
    """The dot with each operand not kept transposed to its layout first."""
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    eqns, operands, contracting, batches = [], [], [], []
    for a, batch, contract, (perm, first), kept in zip(eqn.invars, (lb, rb), (lc, rc), layouts,
                                                       keep):
        nb, nc = len(batch), len(contract)
        if kept or perm == list(range(len(perm))):
            operands.append(a)
            contracting.append(tuple(contract))
            batches.append(tuple(batch))
            continue
        contracting.append(tuple(range(nb, nb + nc)) if first
                           else tuple(range(len(perm) - nc, len(perm))))
        batches.append(tuple(range(nb)))
        aval = ShapedArray(tuple(a.aval.shape[d] for d in perm), a.aval.dtype, a.aval.weak_type)
        moved = Var(aval)
        eqns.append(Eqn(transpose_p, [a], [moved], {"permutation": tuple(perm)},
                        eqn.source_info))
        operands.append(moved)
    dims = (tuple(contracting), tuple(batches))
    eqns.append(Eqn(eqn.primitive, operands, eqn.outvars,
                    dict(eqn.params, dimension_numbers=dims), eqn.source_info))
    return eqns


def _layout(shape, batch, contracting, side, rows_first=False):
    """(permutation, contracting dims first) of an operand to (batch, free,
    contracting) or (batch, contracting, free), contracting dims in pair order:
    the one it already has, else one that keeps its last axis last (the copy then
    moves contiguous rows, not single elements), except for a batched rhs with a
    short sum (attention's q·kᵀ over a head's 32 features): its copy goes to
    (batch, contracting, free), as gemm without a transposed rhs ran such products
    2x faster on the development machine and the copy is a small part of that."""
    ndim = len(shape)
    free = [d for d in range(ndim) if d not in contracting and d not in batch]
    options = [([*batch, *free, *contracting], False), ([*batch, *contracting, *free], True)]
    if side == "rhs" and rows_first:
        return options[1]
    for perm, first in options:
        if perm == list(range(ndim)):
            return perm, first
    if side == "rhs" and batch and math.prod(shape[d] for d in contracting) <= SHORT_SUM:
        return options[1]
    return next(((p, f) for p, f in options if p[-1] == ndim - 1), options[0])
