"""Fusion planning: which equations run together as one loop nest.

This first planner fuses runs of element-wise equations that produce the same
shape: each run becomes one `Fused` kernel whose loop walks that shape, reading
every input with broadcasting strides (so `x*y+z` is one loop and no
intermediate is stored). Values a run defines but later equations or the
program's outputs need become the kernel's outputs. Everything else stays a
single-equation step. Reductions fed by a run, and reshapes/transposes/slices
as index arithmetic, are the next planner's job.
"""
from ..jaxpr import Literal, Var


class Fused:
    """Element-wise equations run as one loop over `shape`.

    inputs: atoms from outside the group (Vars or Literals), in first-use order;
    outputs: the group's Vars that are used after it.
    """
    __slots__ = ("eqns", "inputs", "outputs", "shape")

    def __init__(self, eqns, inputs, outputs, shape):
        self.eqns, self.inputs, self.outputs, self.shape = eqns, inputs, outputs, shape

    def __repr__(self):
        return (f"Fused({'+'.join(e.primitive.name for e in self.eqns)} over "
                f"{self.shape}, {len(self.inputs)} in, {len(self.outputs)} out)")


def plan(jaxpr, can_fuse):
    """Steps for `jaxpr`: Fused groups and single equations, in a valid order.

    `can_fuse(eqn)` says whether the backend has a loop-body lowering for it.
    """
    uses_after = _last_uses(jaxpr)
    steps, group = [], []

    def close():
        if group:
            steps.append(_make_group(list(group), uses_after))
            group.clear()

    for i, eqn in enumerate(jaxpr.eqns):
        fusible = eqn.primitive.elementwise and can_fuse(eqn)
        shape = eqn.outvars[0].aval.shape if fusible else None
        if fusible and (not group or group[-1][1].outvars[0].aval.shape == shape):
            group.append((i, eqn))
            continue
        close()
        if fusible:
            group.append((i, eqn))
        else:
            steps.append(eqn)
    close()
    return steps


def _last_uses(jaxpr):
    """Var -> index of the last equation that reads it (len(eqns) for outputs)."""
    last = {}
    for i, eqn in enumerate(jaxpr.eqns):
        for a in eqn.invars:
            if type(a) is Var:
                last[a] = i
    for a in jaxpr.outvars:
        if type(a) is Var:
            last[a] = len(jaxpr.eqns)
    return last


def _make_group(indexed, uses_after):
    end = indexed[-1][0]
    defined = set()
    inputs, seen = [], set()
    for _, eqn in indexed:
        for a in eqn.invars:
            if type(a) is Literal:
                inputs.append(a)
            elif a not in defined and a not in seen:
                seen.add(a)
                inputs.append(a)
        defined.update(eqn.outvars)
    outputs = [v for _, eqn in indexed for v in eqn.outvars if uses_after.get(v, -1) > end]
    eqns = [eqn for _, eqn in indexed]
    return Fused(eqns, inputs, outputs, eqns[-1].outvars[0].aval.shape)
