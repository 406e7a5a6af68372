"""Cotangent sums of a transposed scan moved after the loop.

The backward scan of a loop that reads a weight W (a const) adds W's cotangent
to an accumulator it carries, every iteration. For a product in the body
(h_t @ W) that cotangent is a product of two per-iteration values (h_t^T @ g_t),
so the loop makes `length` small products and as many W-sized additions; summed
over the iterations it is one product of the stacked values with the iteration
axis contracted too (one big product after the loop, H^T @ G over all rows).
(A bias's sum of reduce_sums stays in the loop: cheap there, and one reduce_sum
over many rows does not give NumPy's bits under jit.)

`hoist` finds accumulators updated as `acc + dot_general(a, b)` (no batch
dims) whose operands are stacked by the loop already
(xs it reads, ys it writes) or can be for no more memory per iteration than the
accumulator holds, and drops them from the body; `Sum.total` computes each one
after the loop. Sums are reassociated, so the last bits differ from the loop's
running sum, the same for jit and eager (both run this rule).
"""
import math

from ...jaxpr import ClosedJaxpr, Jaxpr, Var, dce_jaxpr


class Sum:
    """An accumulator's value: the product of dimension numbers `dimension_numbers`
    over the stacked operands `sources`, each ("in", k): the loop's k-th stacked
    input, or ("out", k): its k-th stacked output."""
    __slots__ = ("dimension_numbers", "sources")

    def __init__(self, dimension_numbers, sources):
        self.dimension_numbers, self.sources = dimension_numbers, sources

    def total(self, stacked_in, stacked_out):
        """The sum over the iterations, from the loop's stacked inputs and outputs."""
        from ..dot_general import dot_general
        ops = [stacked_in[k] if where == "in" else stacked_out[k] for where, k in self.sources]
        (lc, rc), _ = self.dimension_numbers
        return dot_general(ops[0], ops[1], (((0,) + tuple(d + 1 for d in lc),
                                             (0,) + tuple(d + 1 for d in rc)), ((), ())))


class Hoisted:
    """A transposed body without its hoisted accumulators: `body`, and per
    accumulator its `Sum` (None: still carried by the loop); `body` writes the
    operands it newly stacks after its other ys."""
    __slots__ = ("body", "sums")

    def __init__(self, body, sums):
        self.body, self.sums = body, sums


def hoist(closed, n_consts, n_acc, n_carry):
    """The Hoisted form of the transposed body `closed`, whose inputs are
    (consts, n_acc accumulators, n_carry carries, xs) and outputs (accumulators,
    carries, ys)."""
    jaxpr = closed.jaxpr
    ins, outs = jaxpr.invars, jaxpr.outvars
    xs, ys = ins[n_consts + n_acc + n_carry:], outs[n_acc + n_carry:]
    loop_held = set(ins[:n_consts + n_acc + n_carry])
    producer = {v: e for e in jaxpr.eqns for v in e.outvars}
    uses = {}
    for v in [a for e in jaxpr.eqns for a in e.invars] + outs:
        if type(v) is Var:
            uses[v] = uses.get(v, 0) + 1
    added, sums, dropped = [], [], set()
    for j in range(n_acc):
        acc, new = ins[n_consts + j], outs[j]
        found = _update(producer, uses, acc, new)
        sources = found and _sources(found[1], acc, xs, ys, added, loop_held)
        if not sources:
            sums.append(None)
            continue
        add, term = found
        dropped.add(id(add))
        sums.append(Sum(term.params["dimension_numbers"], sources))
    if not dropped:
        return Hoisted(closed, sums)
    kept = [j for j in range(n_acc) if sums[j] is None]
    body = Jaxpr(jaxpr.constvars,
                 ins[:n_consts] + [ins[n_consts + j] for j in kept] + ins[n_consts + n_acc:],
                 [e for e in jaxpr.eqns if id(e) not in dropped],
                 [outs[j] for j in kept] + outs[n_acc:] + added)
    body = dce_jaxpr(body, [True] * len(body.outvars), keep_effects=True)
    return Hoisted(ClosedJaxpr(body, closed.consts), sums)


def _update(producer, uses, acc, new):
    """(the add, the product it adds to `acc`) when the body's new accumulator
    `new` is acc + a product without batch dims that nothing else reads; else None."""
    add = producer.get(new)
    if add is None or add.primitive.name != "add" or uses.get(acc) != 1 \
            or uses.get(new) != 1 or acc not in add.invars:
        return None
    term = add.invars[1] if add.invars[0] is acc else add.invars[0]
    step = producer.get(term) if type(term) is Var else None
    if step is None or uses.get(term) != 1 or step.outvars[0].aval != new.aval \
            or step.primitive.name != "dot_general" \
            or step.params["dimension_numbers"][1] != ((), ()) \
            or step.params.get("preferred_element_type") is not None:
        return None
    return add, step


def _sources(step, acc, xs, ys, added, loop_held):
    """Where the loop stacks each operand of `step` (see Sum), stacking body values
    no bigger than `acc` as new ys (appended to `added`); None when an operand
    is a literal or a value the loop holds (a const, accumulator or carry)."""
    sources, new = [], []
    limit = math.prod(acc.aval.shape)
    for v in step.invars:
        if type(v) is not Var or v in loop_held:
            return None
        if v in xs:
            sources.append(("in", xs.index(v)))
        elif v in ys or v in added or v in new:
            stacked = list(ys) + added + new
            sources.append(("out", stacked.index(v)))
        elif math.prod(v.aval.shape) <= limit:
            new.append(v)
            sources.append(("out", len(ys) + len(added) + len(new) - 1))
        else:
            return None
    added.extend(new)
    return sources
