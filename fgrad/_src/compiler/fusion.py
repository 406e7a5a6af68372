"""Fusion planning: which equations run together as one loop nest.

Runs of element-wise equations that produce the same shape become one `Fused`
kernel whose loop walks that shape (its *domain*), reading every input with
broadcasting strides (so `x*y+z` is one loop and no intermediate is stored).

A reduction the backend can lower (`can_fuse` says so) whose input has the
group's domain joins the group as its LAST equation: the loop still walks the
domain (the reduction's input shape) and accumulates into the reduced output,
so `sum(exp(x - m), -1)` is one loop nest. A reduction whose input comes from
elsewhere starts a group of its own.

Shape ops that only re-index their operand (`expand_dims`, `squeeze`,
`broadcast_in_dim`, and `reshape`s that only insert or remove size-1
dimensions) are *views*: when every consumer of a view is fused (or is itself
such a view), the view is not a step at all; the consuming group reads the
view's source buffer with the view's element strides (0 on inserted and
broadcast dimensions). `Fused.reads[k]` is then `(view var, strides)` for input
k (the var the group's equations read and its element strides into
`inputs[k]`); it is `(input, None)` for a plain input.

Values a group defines but later equations or the program's outputs need
become the kernel's outputs. Everything else stays a single-equation step.
"""
from ..jaxpr import Literal, Var

VIEWS = frozenset({"expand_dims", "squeeze", "reshape", "broadcast_in_dim"})
REDUCTIONS = frozenset({"reduce_sum", "reduce_max", "reduce_min", "reduce_prod",
                        "reduce_and", "reduce_or"})


class Fused:
    """Equations run as one loop nest over `shape` (the domain).

    eqns: element-wise equations, possibly ending with one reduction whose
    input has the domain's shape; inputs: atoms from outside the group (Vars or
    Literals) in first-use order, possibly repeated (two views of one array);
    reads: per input, (the var the group reads, its element strides into the
    input) for a fused view, else (input, None); outputs: the group's Vars that
    are used after it.
    """
    __slots__ = ("eqns", "inputs", "outputs", "shape", "reads")

    def __init__(self, eqns, inputs, outputs, shape, reads=None):
        self.eqns, self.inputs, self.outputs, self.shape = eqns, inputs, outputs, shape
        self.reads = reads if reads is not None else [(a, None) for a in inputs]

    @property
    def reduction(self):
        """The group's closing reduction equation, or None."""
        last = self.eqns[-1]
        return last if last.primitive.name in REDUCTIONS else None

    def __repr__(self):
        return (f"Fused({'+'.join(e.primitive.name for e in self.eqns)} over "
                f"{self.shape}, {len(self.inputs)} in, {len(self.outputs)} out)")


def _c_strides(shape):
    """Element strides of a C-contiguous array, 0 on size-1 dimensions."""
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc if n != 1 else 0)
        acc *= n
    return tuple(strides[::-1])


def view_strides(eqn, strides):
    """Element strides over the view's output given its operand's strides, or
    None when `eqn` is not a pure re-indexing this planner understands."""
    name = eqn.primitive.name
    in_shape = tuple(eqn.invars[0].aval.shape)
    out_shape = tuple(eqn.outvars[0].aval.shape)
    if name == "expand_dims":
        out = list(strides)
        for d in sorted(eqn.params["dimensions"]):
            out.insert(d, 0)
        return tuple(out)
    if name == "squeeze":
        dims = set(eqn.params["dimensions"])
        return tuple(s for i, s in enumerate(strides) if i not in dims)
    if name == "reshape":
        src = [(n, s) for n, s in zip(in_shape, strides) if n != 1]
        if [n for n, _ in src] != [n for n in out_shape if n != 1]:
            return None           # the reshape regroups elements: not a view here
        it = iter(src)
        return tuple(0 if n == 1 else next(it)[1] for n in out_shape)
    if name == "broadcast_in_dim":
        out = [0] * len(out_shape)
        for i, d in enumerate(eqn.params["broadcast_dimensions"]):
            if in_shape[i] == out_shape[d]:
                out[d] = strides[i]
        return tuple(out)
    return None


def plan(jaxpr, can_fuse):
    """Steps for `jaxpr`: Fused groups and single equations, in a valid order.

    `can_fuse(eqn)` says whether the backend has a loop-body lowering for an
    element-wise equation or a reduction.
    """
    eqns = jaxpr.eqns
    n = len(eqns)

    def kind(eqn):
        name = eqn.primitive.name
        if eqn.primitive.elementwise and can_fuse(eqn):
            return "ew"
        if name in REDUCTIONS and can_fuse(eqn):
            return "red"
        return None

    kinds = [kind(e) for e in eqns]
    consumers = {}
    for i, eqn in enumerate(eqns):
        for a in eqn.invars:
            if type(a) is Var:
                consumers.setdefault(a, []).append(i)
    program_outs = {a for a in jaxpr.outvars if type(a) is Var}

    # views that need no step: every consumer is fused or such a view
    transparent = set()
    for i in range(n - 1, -1, -1):
        eqn = eqns[i]
        if eqn.primitive.name not in VIEWS or type(eqn.invars[0]) is not Var:
            continue
        out = eqn.outvars[0]
        if out in program_outs:
            continue
        if view_strides(eqn, _c_strides(eqn.invars[0].aval.shape)) is None:
            continue
        users = consumers.get(out, [])
        if users and all(kinds[j] is not None or j in transparent for j in users):
            transparent.add(i)

    resolved = {}          # view var -> (source Var, strides over the view's shape)
    for i in sorted(transparent):
        eqn = eqns[i]
        a = eqn.invars[0]
        src, st = resolved.get(a, (a, _c_strides(a.aval.shape)))
        resolved[eqn.outvars[0]] = (src, view_strides(eqn, st))

    uses_after = _last_uses(jaxpr, transparent, resolved)
    steps, group = [], []
    defined = set()

    def close():
        if group:
            steps.append(_make_group(list(group), uses_after, resolved))
            group.clear()
            defined.clear()

    domain = None
    for i, eqn in enumerate(eqns):
        if i in transparent:
            continue
        k = kinds[i]
        if k is None:
            close()
            steps.append(eqn)
            continue
        shape = tuple((eqn.invars[0] if k == "red" else eqn.outvars[0]).aval.shape)
        # a view of a value this group defines is read from memory: close first
        through_view = any(type(a) is Var and a in resolved and resolved[a][0] in defined
                           for a in eqn.invars)
        if group and (shape != domain or through_view):
            close()
        if not group:
            domain = shape
        group.append((i, eqn))
        defined.update(eqn.outvars)
        if k == "red":
            close()
    close()
    return steps


def _last_uses(jaxpr, transparent=(), resolved=None):
    """Var -> index of the last equation that reads it (len(eqns) for outputs);
    a read of a fused view counts as a read of its source."""
    resolved = resolved or {}
    last = {}
    for i, eqn in enumerate(jaxpr.eqns):
        if i in transparent:
            continue
        for a in eqn.invars:
            if type(a) is Var:
                last[a] = i
                if a in resolved:
                    last[resolved[a][0]] = i
    for a in jaxpr.outvars:
        if type(a) is Var:
            last[a] = len(jaxpr.eqns)
    return last


def _make_group(indexed, uses_after, resolved=None):
    resolved = resolved or {}
    end = indexed[-1][0]
    defined = set()
    inputs, reads, seen = [], [], set()
    for _, eqn in indexed:
        for a in eqn.invars:
            if type(a) is Literal:
                inputs.append(a)
                reads.append((a, None))
            elif a not in defined and a not in seen:
                seen.add(a)
                if a in resolved:
                    src, st = resolved[a]
                    inputs.append(src)
                    reads.append((a, st))
                else:
                    inputs.append(a)
                    reads.append((a, None))
        defined.update(eqn.outvars)
    outputs = [v for _, eqn in indexed for v in eqn.outvars if uses_after.get(v, -1) > end]
    eqns = [eqn for _, eqn in indexed]
    first = eqns[-1]
    shape = (first.invars[0] if first.primitive.name in REDUCTIONS else first.outvars[0]).aval.shape
    return Fused(eqns, inputs, outputs, tuple(shape), reads)


__all__ = ["Fused", "plan", "view_strides", "VIEWS", "REDUCTIONS"]
