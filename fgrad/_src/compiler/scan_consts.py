"""Matrix products in a scan body read a transposed constant's source instead.

A recurrent layer's backward loop multiplies by the transpose of the weight the
forward loop used: ct @ (W^T)^T. When the scan's constant is `transpose(W)` of a
matrix, a product in the body that reads it with its rows contracted from the
right (or columns from the left) runs as gemm with a transpose flag, which
packs the weight on every iteration slower than a plain product (~30% for
OpenBLAS's sgemm at 64x1024 @ 1024x256). `untranspose_scan_consts` passes W
itself when every product reading the constant then reads it untransposed
(lhs contracting its last dim, rhs its first), as eager NumPy does on the
transposed view.
"""
from ..jaxpr import ClosedJaxpr, Eqn, Jaxpr, Var


def _plain(dims, position):
    """Whether a 2-d operand at `position` (0 lhs, 1 rhs) with these (contracting,
    batch) dims is read by gemm without a transpose flag."""
    contracting, batch = dims
    return not batch and tuple(contracting) == ((1,) if position == 0 else (0,))


def _rewritten(body, k, perm, source_aval):
    """The body reading constant k as its transpose's source, or None."""
    from .simplify import _untransposed_dims
    jaxpr = body.jaxpr
    var = jaxpr.invars[k]
    if var in jaxpr.outvars:
        return None
    new_var, eqns = Var(source_aval), []
    for eqn in jaxpr.eqns:
        if not any(a is var for a in eqn.invars):
            eqns.append(eqn)
            continue
        if eqn.primitive.name != "dot_general" or eqn.invars[0] is eqn.invars[1]:
            return None
        position = 0 if eqn.invars[0] is var else 1
        (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
        old = ((lc, lb), (rc, rb))[position]
        new = _untransposed_dims(perm, old[0], old[1], 2)
        if new is None or not _plain(new, position) or _plain(old, position):
            return None
        dims = [[lc, lb], [rc, rb]]
        dims[position] = list(new)
        invars = list(eqn.invars)
        invars[position] = new_var
        params = dict(eqn.params, dimension_numbers=((dims[0][0], dims[1][0]),
                                                     (dims[0][1], dims[1][1])))
        eqns.append(Eqn(eqn.primitive, invars, eqn.outvars, params, eqn.source_info))
    invars = list(jaxpr.invars)
    invars[k] = new_var
    return ClosedJaxpr(Jaxpr(jaxpr.constvars, invars, eqns, jaxpr.outvars), body.consts)


def untranspose_scan_consts(closed):
    """Pass each scan the source of a transposed 2-d constant when all the body's
    products reading it then read it without a transpose flag."""
    jaxpr = closed.jaxpr
    transposes = {e.outvars[0]: e for e in jaxpr.eqns if e.primitive.name == "transpose"
                  and len(e.outvars[0].aval.shape) == 2}
    if not transposes:
        return closed
    eqns, changed = [], False
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "scan":
            body, invars = eqn.params["jaxpr"], list(eqn.invars)
            for k in range(eqn.params["num_consts"]):
                t = transposes.get(invars[k]) if type(invars[k]) is Var else None
                new = t and _rewritten(body, k, t.params["permutation"], t.invars[0].aval)
                if new is not None:
                    body, invars[k] = new, t.invars[0]
            if body is not eqn.params["jaxpr"]:
                eqn = Eqn(eqn.primitive, invars, eqn.outvars, dict(eqn.params, jaxpr=body),
                          eqn.source_info)
                changed = True
        eqns.append(eqn)
    if not changed:
        return closed
    return ClosedJaxpr(Jaxpr(jaxpr.constvars, jaxpr.invars, eqns, jaxpr.outvars),
                       closed.consts)
