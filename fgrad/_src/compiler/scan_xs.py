"""Element-wise equations that only make a scan's xs run in the scan's body.

A recurrent layer adds its biases to the input projection of every step before
the loop (`x @ W_ih^T + b`): one pass over the whole (steps, batch, 4·hidden)
array, written out and read back by the loop. When an element-wise equation's
result is read by nothing but one scan, as xs, its operands that are stacked
like it (a row per step) become xs themselves and those of lower rank (the
same for every step) constants, and the equation runs on each step's row at
the start of the body, where it fuses into the body's own kernels: the same
operations on the same elements, so the same bits.
"""
from ..core import ShapedArray
from ..jaxpr import ClosedJaxpr, Eqn, Jaxpr, Literal, Var, has_effects, read_counts


def _sinkable(eqn, length):
    """Whether `eqn` may run on each row of its result, `length` rows."""
    if not getattr(eqn.primitive, "elementwise", False) or len(eqn.outvars) != 1 \
            or has_effects(eqn.primitive, eqn.params):
        return False
    shape = eqn.outvars[0].aval.shape
    if not shape or shape[0] != length:
        return False
    return all(type(a) is Literal or a.aval.shape == shape or len(a.aval.shape) < len(shape)
               for a in eqn.invars)


def _sunk(eqn, producer, uses):
    """The scan `eqn` computing its sinkable xs in its body, and the equations that
    computed them; or None."""
    p = eqn.params
    n_consts, n_carry, length = p["num_consts"], p["num_carry"], p["length"]
    body = p["jaxpr"]
    split = n_consts + n_carry
    consts, xs = list(eqn.invars[:n_consts]), list(eqn.invars[split:])
    body_consts, body_xs = list(body.jaxpr.invars[:n_consts]), list(body.jaxpr.invars[split:])
    new_xs, new_body_xs, first, moved = [], [], [], []
    for x, row in zip(xs, body_xs):
        e = producer.get(x) if type(x) is Var else None
        if e is None or uses.get(x) != 1 or not _sinkable(e, length):
            new_xs.append(x)
            new_body_xs.append(row)
            continue
        args = []
        for a in e.invars:
            if type(a) is Literal:
                args.append(a)
            elif a.aval.shape == x.aval.shape:          # a row per step
                v = Var(ShapedArray(a.aval.shape[1:], a.aval.dtype, a.aval.weak_type))
                new_xs.append(a)
                new_body_xs.append(v)
                args.append(v)
            else:                                        # the same for every step
                v = Var(a.aval)
                consts.append(a)
                body_consts.append(v)
                args.append(v)
        first.append(Eqn(e.primitive, args, [row], e.params, e.source_info))
        moved.append(e)
    if not moved:
        return None
    jaxpr = body.jaxpr
    invars = body_consts + list(jaxpr.invars[n_consts:split]) + new_body_xs
    new_body = ClosedJaxpr(Jaxpr(jaxpr.constvars, invars, first + list(jaxpr.eqns),
                                 jaxpr.outvars), body.consts)
    params = dict(p, jaxpr=new_body, num_consts=len(consts))
    return (Eqn(eqn.primitive, consts + list(eqn.invars[n_consts:split]) + new_xs,
                eqn.outvars, params, eqn.source_info), moved)


def sink_into_scans(closed):
    """Run each element-wise equation whose result only a scan reads, as xs, on
    the rows inside that scan's body."""
    jaxpr = closed.jaxpr
    if not any(e.primitive.name == "scan" for e in jaxpr.eqns):
        return closed
    uses = read_counts(jaxpr)      # an output (read once more) is never sunk
    producer = {e.outvars[0]: e for e in jaxpr.eqns if len(e.outvars) == 1}
    replaced, dropped = {}, set()
    for e in jaxpr.eqns:
        if e.primitive.name == "scan":
            new = _sunk(e, producer, uses)
            if new is not None:
                replaced[id(e)] = new[0]
                dropped.update(id(m) for m in new[1])
    if not replaced:
        return closed
    eqns = [replaced.get(id(e), e) for e in jaxpr.eqns if id(e) not in dropped]
    return ClosedJaxpr(Jaxpr(jaxpr.constvars, jaxpr.invars, eqns, jaxpr.outvars), closed.consts)
