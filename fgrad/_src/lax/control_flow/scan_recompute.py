"""Residuals of a linearized scan body recomputed instead of stacked.

The primal scan stacks every per-iteration residual (an LSTM step stores
sigmoid'(f) = s·(1 - s) beside s itself, 1 - tanh² beside tanh, ...): each is
one more array of `length` rows written by the forward loop and read by the
linear (or transposed) one. A residual that a short chain of cheap element-wise
equations (`CHEAP`, at most `MAX_CHAIN` of them, on literals and other stored
residuals) computes is dropped from the stacked outputs and recomputed by those
same equations at the start of the linear body: the same operations on the same
values, so the same bits.
"""
from ...jaxpr import Literal

CHEAP = frozenset({"add", "sub", "mul", "neg"})
MAX_CHAIN = 3


def _chain(var, defining, stored, limit):
    """The equations (in program order) computing `var` from literals and Vars in
    `stored` (not `var` itself), or None when none of at most `limit` cheap ones."""
    eqns, seen, todo = [], set(), [var]
    while todo:
        v = todo.pop()
        if v in seen:
            continue
        seen.add(v)
        eqn = defining.get(v)
        if (eqn is None or eqn.primitive.name not in CHEAP or eqn.params
                or any(type(a) is Literal and a.aval.shape for a in eqn.invars)
                or any(type(a) is not Literal and a.aval.shape != v.aval.shape
                       for a in eqn.invars)):
            return None
        eqns.append(eqn)
        if len(eqns) > limit:
            return None
        todo.extend(a for a in eqn.invars if type(a) is not Literal and a not in stored)
    return eqns


def droppable(known, n_out, variant):
    """{residual index: equations recomputing it} for the stacked residuals of
    `known` (outputs: n_out primal outputs, then residuals; `variant[k]` when
    residual k is stacked) that need not be stored: each chain reads only
    literals and stacked residuals that are themselves kept."""
    order = {id(e): i for i, e in enumerate(known.eqns)}
    defining = {v: e for e in known.eqns for v in e.outvars}
    residuals = known.outvars[n_out:]
    stacked = {}
    for k, (v, var) in enumerate(zip(variant, residuals)):
        if v and type(var) is not Literal and var not in known.outvars[:n_out]:
            stacked.setdefault(var, k)
    chains = {}
    for var, k in stacked.items():
        found = _chain(var, defining, stacked, MAX_CHAIN)
        if found is not None:
            chains[k] = sorted(found, key=lambda e: order[id(e)])
    dropped = {residuals[k] for k in chains}
    return {k: eqns for k, eqns in chains.items()
            if not any(type(a) is not Literal and a in dropped and a is not residuals[k]
                       for e in eqns for a in e.invars)}


def recompute(chains, residuals, stored):
    """Run the `chains` ({index: equations}) on `stored` ({residual Var: value});
    returns {index: value}."""
    env = dict(stored)
    out = {}
    for k, eqns in chains.items():
        for eqn in eqns:
            if eqn.outvars[0] not in env:
                ins = [a.val if type(a) is Literal else env[a] for a in eqn.invars]
                env[eqn.outvars[0]] = eqn.primitive.bind(*ins, **eqn.params)
        out[k] = env[residuals[k]]
    return out
