"""Fusion planning: which equations run together as one loop nest.

Runs of element-wise equations that produce the same shape become one `Fused`
kernel whose loop walks that shape (its *domain*), reading every input with
broadcasting strides (so `x*y+z` is one loop and no intermediate is stored).

A reduction the backend can lower (`can_fuse` says so) whose input has the
group's domain joins the group as its LAST equation: the loop still walks the
domain (the reduction's input shape) and accumulates into the reduced output,
so `sum(exp(x - m), -1)` is one loop nest. A reduction whose input comes from
elsewhere starts a group of its own. `join_sibling_reductions` then lets a later
reduction group over the same domain and axes (`sum(g * xhat)` beside `sum(g)`)
join an earlier one when it reads none of its reductions' results: one loop
nest, several reduced outputs. `split_streams` runs a big group made of
independent chains (an optimizer's update of several same-shaped parameters)
as a few groups, each walking fewer arrays at once.

Shape ops that only re-index their operand (`expand_dims`, `squeeze`,
`broadcast_in_dim`, `transpose`, `slice`, `rev`, and `reshape`s that only
insert or remove size-1 dimensions) are *views*: when every consumer of a view
is fused (or is itself such a view), the view is not a step at all; the
consuming group reads the view's source buffer through an `IndexMap`: element
strides (0 on inserted and broadcast dimensions, negative on reversed ones)
and the offset of the view's first element. `Fused.reads[k]` is then
`(view var, IndexMap)` for input k (the var the group's equations read and how
it indexes `inputs[k]`); it is `(input, None)` for a plain input.

Values a group defines but later equations or the program's outputs need
become the kernel's outputs. Everything else stays a single-equation step.
"""
import math
from typing import NamedTuple

from ..jaxpr import Literal, Var

VIEWS = frozenset({"expand_dims", "squeeze", "reshape", "broadcast_in_dim", "transpose",
                   "slice", "rev"})
REDUCTIONS = frozenset({"reduce_sum", "reduce_max", "reduce_min", "reduce_prod",
                        "reduce_and", "reduce_or"})


class Fused:
    """Equations run as one loop nest over `shape` (the domain).

    eqns: element-wise equations and reductions whose input has the domain's
    shape (all over the same axes; no equation reads a reduction's result), at
    least one of them last when there are any; inputs: atoms from outside the group (Vars or
    Literals) in first-use order, possibly repeated (two views of one array);
    reads: per input, (the var the group reads, its IndexMap into the input) for a
    fused view, else (input, None); outputs: the group's Vars that are used
    after it.
    """
    __slots__ = ("eqns", "inputs", "outputs", "shape", "reads")

    def __init__(self, eqns, inputs, outputs, shape, reads=None):
        self.eqns, self.inputs, self.outputs, self.shape = eqns, inputs, outputs, shape
        self.reads = reads if reads is not None else [(a, None) for a in inputs]

    @property
    def reductions(self):
        """The group's reduction equations, in order (empty when it has none)."""
        return [e for e in self.eqns if e.primitive.name in REDUCTIONS]

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


class IndexMap(NamedTuple):
    """Where a view's elements live in its source buffer: element `(i, j, ...)` of
    the view is source element `offset + i*strides[0] + j*strides[1] + ...`."""
    strides: tuple
    offset: int = 0


def identity_map(shape):
    """The IndexMap of a C-contiguous array onto itself."""
    return IndexMap(_c_strides(shape), 0)


def view_map(eqn, m):
    """The IndexMap of `eqn`'s result given its operand's map `m`, or None when
    `eqn` is not a pure re-indexing this planner understands."""
    name = eqn.primitive.name
    strides, offset = m
    in_shape = tuple(eqn.invars[0].aval.shape)
    out_shape = tuple(eqn.outvars[0].aval.shape)
    if name == "expand_dims":
        out = list(strides)
        for d in sorted(eqn.params["dimensions"]):
            out.insert(d, 0)
        return IndexMap(tuple(out), offset)
    if name == "squeeze":
        dims = set(eqn.params["dimensions"])
        return IndexMap(tuple(s for i, s in enumerate(strides) if i not in dims), offset)
    if name == "reshape":
        src = [(n, s) for n, s in zip(in_shape, strides) if n != 1]
        if [n for n, _ in src] != [n for n in out_shape if n != 1]:
            return None           # the reshape regroups elements: not a view here
        it = iter(src)
        return IndexMap(tuple(0 if n == 1 else next(it)[1] for n in out_shape), offset)
    if name == "transpose":
        return IndexMap(tuple(strides[d] for d in eqn.params["permutation"]), offset)
    if name == "broadcast_in_dim":
        out = [0] * len(out_shape)
        for i, d in enumerate(eqn.params["broadcast_dimensions"]):
            if in_shape[i] == out_shape[d]:
                out[d] = strides[i]
        return IndexMap(tuple(out), offset)
    if name == "slice":
        steps = eqn.params["strides"] or (1,) * len(strides)
        start = eqn.params["start_indices"]
        return IndexMap(tuple(s * k for s, k in zip(strides, steps)),
                        offset + sum(s * b for s, b in zip(strides, start)))
    if name == "rev":
        dims = set(eqn.params["dimensions"])
        return IndexMap(tuple(-s if d in dims else s for d, s in enumerate(strides)),
                        offset + sum((in_shape[d] - 1) * strides[d] for d in dims
                                     if in_shape[d] > 0))
    return None


# A group of independent chains runs as several groups of at most this many
# arrays read or written in the domain's size each: AdamW's update of 8 (256, 256)
# parameters (56 arrays) as one loop ran 40% slower than one array of all their
# elements (the hardware prefetchers follow a limited number of streams); two
# parameters per loop (14 arrays) cost what the one array did.
MAX_STREAMS = 16
# ... over domains of at least this many elements (smaller arrays stay in cache,
# and a kernel more costs more than it saves)
STREAMS_MIN_ELEMENTS = 1 << 14


def plan(jaxpr, can_fuse, same_sums=None, recompute=False, streams=MAX_STREAMS):
    """Steps for `jaxpr`: Fused groups and single equations, in a valid order.

    `can_fuse(eqn)` says whether the backend has a loop-body lowering for an
    element-wise equation or a reduction. With `same_sums(parts, joined)` (the
    backend says whether each reduction of the Fused groups `parts` adds its
    terms in the same order in the Fused group `joined`), sibling reduction
    groups are joined (see join_sibling_reductions). With `recompute`, short
    element-wise chains are recomputed rather than stored (see recompute_chains).
    Groups walking more than `streams` arrays are split (see split_streams; None:
    never).
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
        if view_map(eqn, identity_map(eqn.invars[0].aval.shape)) is None:
            continue
        users = consumers.get(out, [])
        if users and all(kinds[j] is not None or j in transparent for j in users):
            transparent.add(i)

    resolved = {}          # view var -> (source Var, its IndexMap into the source)
    for i in sorted(transparent):
        eqn = eqns[i]
        a = eqn.invars[0]
        src, m = resolved.get(a, (a, identity_map(a.aval.shape)))
        resolved[eqn.outvars[0]] = (src, view_map(eqn, m))

    readers = _readers(jaxpr, transparent, resolved)
    steps = []
    pending = []           # groups not yet placed in `steps`, oldest first
    producer = {}          # Var -> the pending group that defines it

    def emit(group):
        """Place a pending group in `steps`, after the pending groups it reads."""
        for dep in [g for g in pending if g in group.deps]:   # oldest first
            if dep in pending:
                emit(dep)
        pending.remove(group)
        for v in group.defined:
            producer.pop(v, None)
        steps.append(_make_group(group.eqns, readers, program_outs, resolved))

    def sources(eqn):
        """The buffers `eqn` reads: its Var operands, or a fused view's source."""
        return [resolved[a][0] if a in resolved else a for a in eqn.invars if type(a) is Var]

    def depends_on(group, target):
        return group is target or any(depends_on(d, target) for d in group.deps
                                      if d in pending)

    for i, eqn in enumerate(eqns):
        if i in transparent:
            continue
        k = kinds[i]
        reads = {producer[a] for a in sources(eqn) if a in producer}
        if k is None:
            for g in [g for g in pending if g in reads]:
                if g in pending:
                    emit(g)
            steps.append(eqn)
            continue
        domain = tuple((eqn.invars[0] if k == "red" else eqn.outvars[0]).aval.shape)
        # Join the newest open group over the same domain unless this equation reads
        # one of its values through a view (that needs memory), or a group it reads
        # depends on that group (joining would make a cycle). The group then runs
        # later than it was started: only pending groups (whose values nothing has
        # read yet) can take new members, so moving them is safe.
        group = None
        for g in reversed(pending):
            if g.closed or g.domain != domain:
                continue
            through_view = any(type(a) is Var and a in resolved and resolved[a][0] in g.defined
                               for a in eqn.invars)
            if not through_view and not any(depends_on(r, g) for r in reads if r is not g):
                group = g
            break
        if group is None:
            group = _Pending(domain)
            pending.append(group)
        group.eqns.append((i, eqn))
        group.deps.update(r for r in reads if r is not group)
        group.defined.update(eqn.outvars)
        for v in eqn.outvars:
            producer[v] = group
        if k == "red":
            group.closed = True
    while pending:
        emit(pending[0])
    del emit, depends_on   # recursive closures (a cycle): free what they hold now
    if same_sums is not None:
        steps = join_sibling_reductions(steps, jaxpr, readers, program_outs, resolved,
                                        same_sums)
    if recompute:
        steps = recompute_chains(steps, jaxpr, readers, program_outs, resolved)
    if streams is not None:
        steps = split_streams(steps, jaxpr, readers, program_outs, resolved, streams)
    return steps


def _reduction_kind(step):
    """What the reductions of a Fused step share ((name, axes, dtype) and its
    domain), or None when it has none or they differ."""
    if type(step) is not Fused:
        return None
    kinds = {(e.primitive.name, tuple(sorted(e.params["axes"])), e.outvars[0].aval.dtype)
             for e in step.reductions}
    return (kinds.pop(), tuple(step.shape)) if len(kinds) == 1 else None


def join_sibling_reductions(steps, jaxpr, readers, program_outs, resolved, same_sums):
    """`steps` with each reduction group joined to the latest earlier group of
    the same kind (reductions of one name, axes and dtype over the same domain)
    when everything it reads is ready there and none of it is that group's
    reduced results or read through a view of that group's values (it then runs
    in that group's loop nest, at its place), and `same_sums` agrees that no
    sum's order changes. Sums such as sum(x) and sum(x * x), or a batch norm's
    gradient sums, then read their operands once."""
    index = {id(e): i for i, e in enumerate(jaxpr.eqns)}
    out, where = [], {}           # where: Var -> position in `out` of its step
    for step in steps:
        kind = _reduction_kind(step)
        target = None
        if kind is not None:
            sources = [a for a in step.inputs if type(a) is Var]
            viewed = [a for a, (_, m) in zip(step.inputs, step.reads) if m is not None]
            pos = len(out) - 1       # the latest group of this kind, unless a later step
            while pos >= 0 and _reduction_kind(out[pos]) != kind:   # defines what it reads
                pos = -1 if any(where.get(a) == pos for a in sources) else pos - 1
            if pos >= 0:
                g = out[pos]
                reduced = {e.outvars[0] for e in g.reductions}
                if not any(a in reduced for a in sources) \
                        and not any(where.get(a) == pos for a in viewed):
                    joined = _make_group([(index[id(e)], e) for e in g.eqns + step.eqns],
                                         readers, program_outs, resolved)
                    if same_sums([g, step], joined):
                        target, out[pos] = pos, joined
        if target is None:
            target = len(out)
            out.append(step)
        for v in (out[target].outputs if type(out[target]) is Fused else step.outvars):
            where[v] = target
    return out


# Element-wise primitives cheap enough to compute twice (not exp: recomputing a
# softmax's exponentials cost more CPU time than storing them, one thread, 2 M
# elements), and the most of them a group recomputes for one value it would
# otherwise read.
RECOMPUTABLE = frozenset({"add", "sub", "mul", "neg", "max", "min", "select_n",
                          "convert_element_type", "stop_gradient", "is_finite",
                          "eq", "ne", "lt", "le", "gt", "ge"})
MAX_RECOMPUTED = 4
# Reductions whose float results depend on the order of their terms: the loop
# vectoriser may pick another one for a longer loop body, so a group summing
# never takes recomputed equations.
ORDERED = frozenset({"reduce_sum", "reduce_prod"})


def _chain(group, v):
    """The equations of `group` that compute its value `v` from the group's
    inputs, in the group's order, when they are few and cheap; else None."""
    defined = {out: e for e in group.eqns for out in e.outvars}
    chain, need = set(), [v]
    while need:
        e = defined.get(need.pop())
        if e is None or id(e) in chain:
            continue
        if e.primitive.name not in RECOMPUTABLE:
            return None
        chain.add(id(e))
        need += [a for a in e.invars if type(a) is Var]
    eqns = [e for e in group.eqns if id(e) in chain]
    return eqns if len(eqns) <= MAX_RECOMPUTED else None


def recompute_chains(steps, jaxpr, readers, program_outs, resolved):
    """`steps` where a Fused group reading a value that an earlier group over the
    same domain computes by a short chain of cheap element-wise equations
    (`_chain`), and that nothing else reads, computes it again from that
    group's inputs instead: the earlier group no longer stores it (a layer
    norm's centred values, read only by its last kernel). Only
    into a group without a sum or product (`ORDERED`) that reads none of the
    chain's values through a view, and only when the chain reads at most one
    array of the domain's size the group does not read already, so no more
    memory is read than the value's own bytes. The same equations on the same
    inputs give the same bits."""
    index = {id(e): i for i, e in enumerate(jaxpr.eqns)}
    readers = {v: set(r) for v, r in readers.items()}
    steps = list(steps)
    where = {v: pos for pos, s in enumerate(steps) if type(s) is Fused for v in s.outputs}

    def source(a):
        return resolved[a][0] if a in resolved else a

    for pos, step in enumerate(steps):
        if type(step) is not Fused or any(e.primitive.name in ORDERED for e in step.reductions):
            continue
        for a, (_, m) in zip(list(step.inputs), list(step.reads)):
            if type(a) is not Var or m is not None or a in program_outs or a not in where:
                continue
            first = steps[where[a]]
            if first is step or tuple(first.shape) != tuple(step.shape):
                continue
            ours = {index[id(e)] for e in step.eqns}
            if readers.get(a, set()) - {index[id(e)] for e in first.eqns} - ours:
                continue
            chain = _chain(first, a)
            if chain is None:
                continue
            made = {v for e in chain for v in e.outvars}
            if any(x in made for x, (_, view) in zip(step.inputs, step.reads)
                   if view is not None):
                continue
            sources = {source(x) for x in step.inputs if type(x) is Var}
            leaves = {source(x) for e in chain for x in e.invars
                      if type(x) is Var and x not in made}
            if sum(math.prod(x.aval.shape) == math.prod(step.shape)
                   for x in leaves - sources) > 1:
                continue
            readers[a] -= ours
            joined = _make_group([(index[id(e)], e) for e in chain + step.eqns], readers,
                                 program_outs, resolved)
            joined.outputs = [v for v in joined.outputs if v not in made]
            for v in made:      # the chain's reads from inside `first` are now ours too
                readers.get(v, set()).difference_update(
                    index[id(e)] for e in step.eqns if v in e.invars)
            steps[pos] = step = joined
            p = where[a]
            steps[p] = _make_group([(index[id(e)], e) for e in first.eqns], readers,
                                   program_outs, resolved)
            if not steps[p].outputs:        # all it computed is recomputed where read
                steps[p] = None
            where = {v: q for q, s in enumerate(steps) if type(s) is Fused for v in s.outputs}
    return [s for s in steps if s is not None]


def _streams(eqns, size, stored):
    """How many arrays of `size` elements `eqns` read from outside or store
    (define and find in `stored`)."""
    defined = {v for e in eqns for v in e.outvars}
    read = {a for e in eqns for a in e.invars
            if type(a) is Var and a not in defined and math.prod(a.aval.shape) == size}
    return len(read) + len(defined & stored)


def _chains(group):
    """The group's equations cut into independent chains (sharing no value of the
    domain's size, read or defined), each in the group's order, the chains in the
    order of their first equations."""
    size = math.prod(group.shape)
    parent = list(range(len(group.eqns)))

    def root(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner = {}               # a Var of the domain's size -> an equation using it
    for i, e in enumerate(group.eqns):
        for a in (*e.invars, *e.outvars):
            if type(a) is Var and math.prod(a.aval.shape) == size:
                j = owner.setdefault(a, i)
                parent[root(j)] = root(i)
    chains = {}
    for i, e in enumerate(group.eqns):
        chains.setdefault(root(i), []).append(e)
    return list(chains.values())      # (keys first seen in the group's order)


def split_streams(steps, jaxpr, readers, program_outs, resolved, streams=MAX_STREAMS):
    """`steps` where an element-wise group (no reductions) over at least
    `STREAMS_MIN_ELEMENTS` elements that reads and writes more than `streams`
    arrays of its domain's size, and whose equations form independent chains,
    runs as consecutive groups of whole chains, each of at most `streams` arrays
    (a longer chain alone). Each element is computed by the same equations from
    the same inputs, so the bits do not change."""
    index = {id(e): i for i, e in enumerate(jaxpr.eqns)}
    out = []
    for step in steps:
        size = math.prod(step.shape) if type(step) is Fused else 0
        stored = set(step.outputs) if size else set()
        if size < STREAMS_MIN_ELEMENTS or step.reductions \
                or _streams(step.eqns, size, stored) <= streams:
            out.append(step)
            continue
        parts = [[]]
        for chain in _chains(step):
            if parts[-1] and _streams(parts[-1] + chain, size, stored) > streams:
                parts.append([])
            parts[-1] += chain
        if len(parts) == 1:
            out.append(step)
            continue
        ordered = {id(e): k for k, e in enumerate(step.eqns)}
        for part in parts:
            part.sort(key=lambda e: ordered[id(e)])
            out.append(_make_group([(index[id(e)], e) for e in part], readers, program_outs,
                                   resolved))
    return out


class _Pending:
    """A group being built: its (index, equation) pairs, domain, defined vars and
    the other pending groups whose values it reads."""
    __slots__ = ("eqns", "domain", "defined", "deps", "closed")

    def __init__(self, domain):
        self.eqns, self.domain, self.defined, self.deps = [], domain, set(), set()
        self.closed = False


def _readers(jaxpr, transparent=(), resolved=None):
    """Var -> indices of the (non-view) equations that read it; a read of a fused
    view counts as a read of its source."""
    resolved = resolved or {}
    readers = {}
    for i, eqn in enumerate(jaxpr.eqns):
        if i in transparent:
            continue
        for a in eqn.invars:
            if type(a) is Var:
                readers.setdefault(a, set()).add(i)
                if a in resolved:
                    readers.setdefault(resolved[a][0], set()).add(i)
    return readers


def _make_group(indexed, readers, program_outs, resolved=None):
    resolved = resolved or {}
    members = {i for i, _ in indexed}
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
    outputs = [v for _, eqn in indexed for v in eqn.outvars
               if v in program_outs or readers.get(v, set()) - members]
    eqns = [eqn for _, eqn in indexed]
    last = eqns[-1]
    shape = (last.invars[0] if last.primitive.name in REDUCTIONS else last.outvars[0]).aval.shape
    return Fused(eqns, inputs, outputs, tuple(shape), reads)


__all__ = ["Fused", "IndexMap", "plan", "join_sibling_reductions", "recompute_chains",
           "split_streams", "view_map", "VIEWS", "REDUCTIONS"]
