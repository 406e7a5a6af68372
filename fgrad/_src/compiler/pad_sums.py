"""Sums of zero-padded pieces that tile an axis become one concatenate.

The transpose of `split` (slices) pads each piece's cotangent back to the whole
and adds the pads: an LSTM's backward step builds its (batch, 4·hidden) gate
cotangent as four pads and three adds, each writing the whole array. Where
every element gets exactly one piece and zeros from all the other pads, the
sum is `concatenate(piece + 0.0, ...)`: the same bits (x + 0.0 is x, but -0.0
becomes +0.0 as in the sum), one copy, and the `+ 0.0` fuses into the
pieces' producers.
"""
import numpy as np

from ..jaxpr import ClosedJaxpr, Eqn, Jaxpr, Literal, Var, dce_jaxpr, read_counts


def _zero_pad_axis(eqn):
    """(axis, lo, hi) of a pad by +0.0 along one axis, or None."""
    if eqn.primitive.name != "pad" or type(eqn.invars[1]) is not Literal:
        return None
    value = np.asarray(eqn.invars[1].val)
    if value != 0 or np.signbit(value):
        return None
    axes = [(d, lo, hi) for d, (lo, hi, interior) in enumerate(eqn.params["padding_config"])
            if lo or hi or interior]
    if len(axes) != 1 or any(c < 0 for c in eqn.params["padding_config"][axes[0][0]]) \
            or eqn.params["padding_config"][axes[0][0]][2]:
        return None
    return axes[0]


def _pieces(root, defining, readers):
    """[(lo, piece Var)] tiling the root add's axis, with that axis; or None."""
    aval = root.outvars[0].aval
    if not np.issubdtype(aval.dtype, np.floating):
        return None
    leaves, todo = [], list(root.invars)
    while todo:
        a = todo.pop()
        eqn = defining.get(a) if type(a) is Var else None
        if eqn is None or readers.get(a, 0) != 1 or a.aval != aval:
            return None
        if eqn.primitive.name == "add":
            todo.extend(eqn.invars)
        else:
            leaves.append(eqn)
    found = [_zero_pad_axis(e) for e in leaves]
    if None in found or len({d for d, _, _ in found}) != 1:
        return None
    axis = found[0][0]
    pieces = sorted(((lo, e.invars[0]) for (_, lo, _), e in zip(found, leaves)),
                    key=lambda piece: piece[0])   # (equal offsets: no tiling, below)
    at = 0
    for lo, piece in pieces:
        if lo != at:
            return None
        at += piece.aval.shape[axis]
    return (axis, pieces) if at == aval.shape[axis] else None


def join_pad_sums(closed):
    """Replace each add tree of single-use zero pads tiling one axis by a
    concatenate of the pieces plus 0.0 (see the module docstring)."""
    from ..lax import concatenate
    from ..lax.elementwise import add
    from ..partial_eval import trace_to_jaxpr
    jaxpr = closed.jaxpr
    defining = {v: e for e in jaxpr.eqns for v in e.outvars}
    readers = read_counts(jaxpr)
    eqns, changed = [], False
    for eqn in jaxpr.eqns:
        found = _pieces(eqn, defining, readers) if eqn.primitive.name == "add" else None
        if found is None:
            eqns.append(eqn)
            continue
        axis, pieces = found
        body = trace_to_jaxpr(lambda *xs: [concatenate([add(x, 0.0) for x in xs], axis)],
                              [p.aval for _, p in pieces], "joining padded pieces").jaxpr
        inner = dict(zip(body.invars, [p for _, p in pieces]))
        for ie in body.eqns:
            eqns.append(Eqn(ie.primitive, [inner.get(a, a) if type(a) is Var else a
                                           for a in ie.invars], ie.outvars, ie.params,
                            eqn.source_info))
        last = eqns.pop()
        assert last.outvars[0] is body.outvars[0], "the concatenate comes last"
        eqns.append(Eqn(last.primitive, last.invars, eqn.outvars, last.params,
                        eqn.source_info))
        changed = True
    if not changed:
        return closed
    kept = dce_jaxpr(Jaxpr(jaxpr.constvars, jaxpr.invars, eqns, jaxpr.outvars),
                     [True] * len(jaxpr.outvars), keep_effects=True)
    return ClosedJaxpr(kept, closed.consts)
