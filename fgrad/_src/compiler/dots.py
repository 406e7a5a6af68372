"""Matrix products in a layout BLAS takes: transpose the operands first.

gemm multiplies row-major matrices, possibly transposed, batched over leading
dimensions. A dot_general whose batch dimensions are not the operands' leading
ones, or whose contracting dimensions sit between free ones (an einsum such as
'bqhd,bkhd->bhqk'), does not fit. Transposing an operand to (batch, free,
contracting) or (batch, contracting, free) makes it fit, and a transpose that
only feeds a native kernel compiles to a copy loop, so the product runs
natively instead of as a NumPy step. An operand already in one of those
layouts is not copied, and a copy keeps the operand's last axis last where it
can (attention's 'bqhd,bkhd->bhqk' moves rows of d, not single elements with
a stride of h*d). The output layout (batch, lhs free, rhs free) does not change.

This runs after `simplify` (whose `fold_transposes_into_dots` would fold the
transposes back) and only where the backend says the dot's layout is all that
stops it.
"""
import math

from ..core import ShapedArray
from ..jaxpr import ClosedJaxpr, Eqn, Jaxpr, Literal, Var
from ..lax.shape_ops import transpose_p


SHORT_SUM = 64        # contracting sizes for which a batched rhs is copied untransposed


def blas_layout_dots(closed, takes):
    """`closed` with each dot_general that `takes(eqn)` rejects, but accepts once
    its operands are transposed, rewritten that way (the same object when none)."""
    jaxpr = closed.jaxpr
    eqns, changed = [], False
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general" and not takes(eqn):
            rewritten = _with_transposed_operands(eqn)
            if rewritten is not None and takes(rewritten[-1]):
                eqns.extend(rewritten)
                changed = True
                continue
        eqns.append(eqn)
    if not changed:
        return closed
    return ClosedJaxpr(Jaxpr(jaxpr.constvars, jaxpr.invars, eqns, jaxpr.outvars), closed.consts)


def _with_transposed_operands(eqn):
    """[transposes of the operands that need one..., the dot on them], or None."""
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lhs, rhs = eqn.invars
    if type(lhs) is Literal or type(rhs) is Literal:
        return None
    eqns, operands, contracting = [], [], []
    for a, batch, contract, side in ((lhs, lb, lc, "lhs"), (rhs, rb, rc, "rhs")):
        perm, first = _layout(a.aval.shape, batch, contract, side)
        nb, nc = len(batch), len(contract)
        contracting.append(tuple(range(nb, nb + nc)) if first
                           else tuple(range(len(perm) - nc, len(perm))))
        if perm == list(range(len(perm))):
            operands.append(a)
            continue
        aval = ShapedArray(tuple(a.aval.shape[d] for d in perm), a.aval.dtype, a.aval.weak_type)
        moved = Var(aval)
        eqns.append(Eqn(transpose_p, [a], [moved], {"permutation": tuple(perm)},
                        eqn.source_info))
        operands.append(moved)
    batch = tuple(range(len(lb)))
    dims = (tuple(contracting), (batch, batch))
    eqns.append(Eqn(eqn.primitive, operands, eqn.outvars,
                    dict(eqn.params, dimension_numbers=dims), eqn.source_info))
    return eqns


def _layout(shape, batch, contracting, side):
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
    for perm, first in options:
        if perm == list(range(ndim)):
            return perm, first
    if side == "rhs" and batch and math.prod(shape[d] for d in contracting) <= SHORT_SUM:
        return options[1]
    return next(((p, f) for p, f in options if p[-1] == ndim - 1), options[0])
