"""Executables: a simplified jaxpr turned into a fixed plan of kernel calls.

Every variable gets a slot in a flat environment; constants and literals are
placed once when the plan is built, so a call only runs the kernels. The plan
comes from `compiler.fusion.plan`: runs of element-wise equations the CPU
backend can lower (`cpu.fused.can_fuse`) become `Fused` groups, all compiled
together into one LLVM module (one native kernel per group, labelled
'native:<primitives>'); every other equation is a step running the primitive's
NumPy implementation (labelled 'numpy:<primitive>', followed by '(calls
<library>)' when that implementation calls a library such as scipy.fft: the
primitive's `impl_library`). `as_text()` lists the plan,
says which steps are which (so nothing falls back unannounced) and shows the
module's LLVM IR. A group that cannot be compiled is an error, never a silent
NumPy fallback.
"""
import collections
import math

import numpy as np

from .. import core
from ..compiler.dots import blas_layout_dots
from ..compiler.fusion import VIEWS, Fused, identity_map, plan, view_map
from ..cpu import compiler_lock, interrupts, mpi, threads
from ..cpu.blas import SPLIT_SUM
from ..cpu.program import chained_rows, plan_segments
from ..config import config
from ..core import Array
from ..jaxpr import Literal, Var, pretty_print
from .donation import _root, unshare_donated
from .fingerprint import fingerprint
from .slots import Slots, run_steps, step_summary


def _backend():
    """The CPU backend's fused-kernel module (with the engine: imported on first
    use, under the lock fork() takes; a child forked meanwhile would find the
    import half done by a thread it does not have, and wait for it forever).
    Later calls skip the lock, which a background compile may hold for tens of
    milliseconds (`prefetch`)."""
    if not _loaded:
        with compiler_lock.lock:
            from ..cpu import engine, fused  # noqa: F401
            _loaded.append(fused)
    return _loaded[0]


_loaded = []    # [the fused module] once _backend imported it


def prefetch(closed):
    """Start, on a background thread, what compiling `closed` will need and can
    be compiled meanwhile (sin and cos's shared code: `fused.prefetch_runtime`)."""
    _backend().prefetch_runtime(closed.jaxpr)


def _raw(value):
    return value._value if type(value) is Array else np.asarray(value)


class Kernel:
    """One step of a plan: a callable on NumPy values giving one or more outputs."""
    __slots__ = ("fn", "ins", "outs", "params", "multiple", "label", "segment")

    def __init__(self, fn, ins, outs, params, multiple, label):
        self.fn, self.ins, self.outs, self.params = fn, ins, outs, params
        self.multiple, self.label = multiple, label
        self.segment = None      # the segment (one native call) that runs this kernel


class Executable:
    """A compiled program: call it with the NumPy values of the jaxpr's inputs."""

    def __init__(self, closed, name="jit", donated=()):
        fused = _backend()
        closed = blas_layout_dots(closed, fused.can_lower_alone, fused.rhs_rows_first)
        self.name = name
        self.jaxpr = closed
        jaxpr = closed.jaxpr
        slots = Slots(closed, _raw)
        template, slot_of, ref = slots.template, slots.of, slots.ref
        self.in_slots = slots.inputs

        steps = _native_steps(jaxpr, fused)
        loops = {}               # id(group) -> LoopPlan of a loop run natively
        for i, step in enumerate(steps):
            loop = _native_loop(step, fused) if type(step) is not Fused else None
            if loop is not None:     # the bodies' constants become inputs of the loop
                for part in loop.parts:
                    for v, c in zip(part.body.jaxpr.constvars, part.body.consts):
                        template[slot_of(v)] = _raw(c)
                operands = []        # a Literal operand is passed as a 0-d constant
                for a in step.invars:
                    if type(a) is Literal:
                        v = Var(a.aval)
                        template[slot_of(v)] = np.asarray(_raw(a.val), a.aval.dtype)
                        a = v
                    operands.append(a)
                polled = []          # a loop that looks for signals reads their state
                if loop.polls:
                    polled = [Var(core.ShapedArray(interrupts.STATE.shape, np.int64))]
                    template[slot_of(polled[0])] = interrupts.STATE
                    interrupts.arm()
                steps[i] = Fused([step], operands + loop.constvars + polled,
                                 list(step.outvars), (1,))
                loops[id(steps[i])] = loop
        groups = [s for s in steps if type(s) is Fused]
        for eqn in steps:
            if type(eqn) is not Fused and eqn.primitive.impl is None:
                raise NotImplementedError(
                    f"jit cannot compile {eqn.primitive.name}: it has no implementation to "
                    f"run (in {name})")
        self._llvm_ir = None      # () -> the native module's IR text (emitted on demand)
        self.compile_stats = None  # the native module's compile statistics (disk-cache hit, ms)
        inplace = _in_place(groups, steps, jaxpr, donated)
        # consecutive native kernels run as one native call (a segment)
        program_outs = {a for a in jaxpr.outvars if type(a) is Var}
        segments = plan_segments(steps, lambda st: type(st) is Fused and _size(st.shape) > 0,
                                 program_outs, alone=fused.splits_alone)
        group_index = {id(g): i for i, g in enumerate(groups)}
        segment_of = {}          # step index -> (segment number, first member?)
        for j, seg in enumerate(segments):
            for n, i in enumerate(seg.members):
                segment_of[i] = (j, n == 0)
            seg.members = [steps[i] for i in seg.members]
        fns, segment_fns = [None] * len(groups), []
        if groups:
            # raises FusedCompileError (naming the group and the cause) on failure
            # how gemms are cut into parts (blas.parts_of) depends on the thread count
            # and on NumPy's OpenBLAS (its version): both are in the key
            key = fingerprint(closed, name, tuple(donated), config.flush_denormals,
                              threads.split_threads(), np.__version__)
            fns, segment_fns = fused.compile_groups(groups, name, inplace, segments,
                                                    config.flush_denormals, loops, key,
                                                    _canonical_names(jaxpr, template, slot_of))
            first = next(f for f in fns + segment_fns if f is not None)
            self._llvm_ir = first.llvm_ir
            self.compile_stats = first.module.stats
        self.kernels = []        # the program's steps, as listed by as_text
        self.calls = []          # what a call runs: steps, with segments as one call each
        pairs_of = dict(zip(map(id, groups), inplace))
        chained = [{id(k) for k in chained_rows(seg, f.parallel,
                                                lambda g: fused.group_info(g, loops)[1]).values()}
                   for seg, f in zip(segments, segment_fns)]
        written = set()
        for index, step in enumerate(steps):
            if type(step) is Fused:
                label = "native:" + "+".join(e.primitive.name for e in step.eqns) \
                    + fused.calls_note(step)
                ins = [a for a in step.inputs if type(a) is not Literal]
                pairs = pairs_of[id(step)]
                if pairs:
                    reused = [jaxpr.invars.index(ins[k]) for k in pairs.values()]
                    written.update(reused)
                    label += f" (in place of donated input{'s' * (len(reused) > 1)} " \
                             f"{', '.join(map(str, reused))})"
                kernel = Kernel(fns[group_index[id(step)]], [ref(a) for a in ins],
                                [slot_of(v) for v in step.outputs], {}, True, label)
                self.kernels.append(kernel)
                if index not in segment_of:
                    self.calls.append(kernel)
                    continue
                j, first_member = segment_of[index]
                kernel.segment = j
                parallel = segment_fns[j].parallel
                beside = parallel is not None and any(
                    step in team for team in parallel.teams.values())
                if beside:
                    kernel.label += f" (whole, beside other products on {parallel.chunks} threads)"
                elif parallel is not None and id(step) in parallel.split:
                    sums = parallel.split[id(step)] == SPLIT_SUM
                    kernel.label += (f" (split over {parallel.chunks} threads"
                                     f"{', partial sums' if sums else ''})")
                if id(step) in chained[j]:
                    kernel.label += " (each thread's rows right after the product's)"
                if first_member:
                    seg = segments[j]
                    self.calls.append(Kernel(segment_fns[j], [ref(a) for a in seg.imported],
                                             [slot_of(v) for v in seg.exported], {}, True,
                                             f"native:segment {j}"))
                continue
            eqn = step
            prim = eqn.primitive
            if index in segment_of:      # a reshape inside a segment: its operand's bytes
                kernel = Kernel(None, [ref(a) for a in eqn.invars], [slot_of(eqn.outvars[0])],
                                {}, False, f"native:{prim.name} (no copy)")
                kernel.segment = segment_of[index][0]
                self.kernels.append(kernel)
                if segment_of[index][1]:
                    raise AssertionError("a segment starts with a kernel")
                continue
            compile_step = getattr(prim, "compile_step", None)
            if compile_step is not None:
                # control flow: its bodies are compiled to sub-programs now, and a
                # Python step (labelled e.g. 'loop:scan') drives them on each call
                fn, label = compile_step(eqn.params, name)
                kernel = Kernel(fn, [ref(a) for a in eqn.invars],
                                [slot_of(v) for v in eqn.outvars], {}, True, label)
            else:
                library = getattr(prim, "impl_library", None)   # e.g. scipy.fft
                kernel = Kernel(prim.impl, [ref(a) for a in eqn.invars],
                                [slot_of(v) for v in eqn.outvars], eqn.params,
                                prim.multiple_results,
                                f"{'python' if prim.effectful else 'numpy'}:{prim.name}"
                                + (f" (calls {library})" if library else ""))
            self.kernels.append(kernel)
            self.calls.append(kernel)
        # Constants read by native kernels are made C-contiguous once, not per call.
        for k in self.calls:
            if k.label.startswith("native:"):
                for i in k.ins:
                    if type(template[i]) is np.ndarray and not template[i].flags.c_contiguous:
                        template[i] = np.ascontiguousarray(template[i])
        self.out_refs = [ref(a) for a in jaxpr.outvars]
        # Outputs are fresh arrays owned by the caller: copy those that would otherwise
        # alias an input or one of the program's constants.
        computed = {i for k in self.calls for i in k.outs}
        self.out_copy = [i not in computed for i in self.out_refs]
        self.out_weak = [a.aval.weak_type for a in jaxpr.outvars]
        self.out_dtypes = [a.aval.dtype for a in jaxpr.outvars]
        self.template = template
        # donated inputs some kernel may write into (guarded against aliasing per call)
        self.donated = sorted(written)
        self.const_roots = {_root(c) for c in template if type(c) is np.ndarray}
        # a program that is one call (a segment, say) on its inputs and constants,
        # giving its outputs, runs that call without the step environment:
        # (fn, per call input: (program input index or None, constant) -- None when
        # they are the inputs in order, output picks -- None when in order)
        only = self.calls[0] if len(self.calls) == 1 else None
        self._single = None
        if only is not None and only.multiple and not only.params and not any(self.out_copy):
            position = {slot: k for k, slot in enumerate(self.in_slots)}
            self._single = (only.fn,
                            None if only.ins == self.in_slots
                            else [(position.get(i), template[i]) for i in only.ins],
                            None if only.outs == self.out_refs
                            else [only.outs.index(i) for i in self.out_refs])

    def __call__(self, *args):
        if self.donated:
            args = unshare_donated(args, self.donated, self.const_roots)
        if self._single is not None:
            fn, sources, picks = self._single
            outs = fn(*(args if sources is None else
                        [const if k is None else args[k] for k, const in sources]))
            return outs if picks is None else [outs[j] for j in picks]
        env = self.template.copy()
        for i, a in zip(self.in_slots, args):
            env[i] = a
        run_steps(self.calls, env)
        return [np.array(env[i]) if copy else env[i]
                for i, copy in zip(self.out_refs, self.out_copy)]

    @property
    def llvm_ir(self):
        """The LLVM IR of the native kernels (as emitted), or None when there are none."""
        return self._llvm_ir() if self._llvm_ir is not None else None

    def native_call(self):
        """(NativeEntry, per input of the call: the program input it reads or None,
        per input of the call: the constant it reads or None) when the program is
        one native call reading only the program's inputs and constants and giving
        exactly its outputs (native code may then run it; see cpu.dispatch), else None."""
        only = self.calls[0] if len(self.calls) == 1 else None
        native = getattr(only.fn, "native", None) if only is not None else None
        if native is None or self.donated or any(self.out_copy) or only.params \
                or not only.multiple or only.outs != self.out_refs:
            return None
        avals = [v.aval for v in self.jaxpr.jaxpr.invars]
        call_map, constants = [], []
        for i, (dt, shape) in zip(only.ins, native.in_specs):
            if i in self.in_slots:
                k = self.in_slots.index(i)
                if avals[k].dtype != dt or tuple(avals[k].shape) != tuple(shape):
                    return None
                call_map.append(k)
                constants.append(None)
                continue
            c = self.template[i]
            if c is interrupts.STATE:    # the dispatcher holds the GIL (see interrupts)
                c = interrupts.HELD_STATE
            if type(c) is not np.ndarray or c.dtype != dt or c.shape != tuple(shape) \
                    or not c.flags.c_contiguous:
                return None
            call_map.append(None)
            constants.append(c)
        return native, call_map, constants

    def as_text(self):
        lines = [f"// program {self.name}: {len(self.kernels)} steps "
                 f"({step_summary(self.kernels)} kernels)",
                 "// steps marked native: are fused loops or BLAS calls compiled to machine "
                 "code (or call the LAPACK/BLAS routines named, SciPy's, from it); numpy: run the primitive's NumPy implementation (no native lowering "
                 "for that primitive and dtype); python: call back into Python (debug "
                 "callbacks); loop:/branch:/call: drive compiled sub-programs; kernels in "
                 "one [segment] run as a single native call"]
        lines += [f"// {i}: {k.label}" + ("" if k.segment is None else f"  [segment {k.segment}]")
                  for i, k in enumerate(self.kernels)]
        lines += ["", pretty_print(self.jaxpr.jaxpr)]
        if self.llvm_ir is not None:
            lines += ["", "; LLVM IR of the native kernels (as emitted, before optimisation)",
                      self.llvm_ir]
        return "\n".join(lines)


def _canonical_names(jaxpr, template, slot_of):
    """var -> a name that is the same in every process compiling this jaxpr: its
    position in the jaxpr, or for a constant placed for a native loop, its type and
    a digest of its value."""
    import hashlib
    position = {v: i for i, v in enumerate(
        jaxpr.constvars + jaxpr.invars + [v for e in jaxpr.eqns for v in e.outvars])}

    def name(v):
        if v in position:
            return position[v]
        if template[slot_of(v)] is interrupts.STATE:
            return "signal state"        # its contents differ from process to process
        value = np.ascontiguousarray(template[slot_of(v)])
        return f"{v.aval.str_short()}:{hashlib.sha256(value.tobytes()).hexdigest()[:24]}"
    return name


def _native_steps(jaxpr, fused):
    """The fusion plan, with each step the backend lowers on its own (a BLAS matmul,
    a gather, a pad, ...) wrapped as a one-equation fused group (scalar Literal
    operands become constants of its kernel), and views read only by such kernels
    turned into copies (see _native_copies)."""
    steps = [Fused([s], list(s.invars), list(s.outvars), tuple(s.outvars[0].aval.shape))
             if type(s) is not Fused and fused.can_lower_alone(s) else s
             for s in plan(jaxpr, fused.can_fuse, fused.same_sums, recompute=True)]
    return _native_copies(_transposed_dots(steps, jaxpr, fused), jaxpr, fused)


def _transposed_dots(steps, jaxpr, fused):
    """A transpose that is the only reader of a native product's result joins the
    product's group when its kernel can write the result transposed in place
    (attention's heads merged back), so there is no copy."""
    readers = {}
    for step in steps:
        for a in (step.inputs if type(step) is Fused else step.invars):
            if type(a) is Var:
                readers[a] = readers.get(a, 0) + 1
    outputs = {a for a in jaxpr.outvars if type(a) is Var}
    producer = {s.outputs[0]: s for s in steps if type(s) is Fused and len(s.eqns) == 1}
    joined, out = {}, []
    for step in steps:
        source = step.invars[0] if type(step) is not Fused and step.invars else None
        dot = producer.get(source) if type(source) is Var else None
        if dot is not None and readers[source] == 1 and source not in outputs \
                and fused.writes_transposed(dot.eqns[0], step):
            view = step.outvars[0]
            joined[id(dot)] = Fused([dot.eqns[0], step], dot.inputs, [view],
                                    tuple(view.aval.shape), dot.reads)
            continue
        out.append(step)
    return [joined.get(id(s), s) for s in out]


def _native_copies(steps, jaxpr, fused):
    """A view (transpose, slice, rev, broadcast, ...) that is a step of its own feeds
    kernels that need contiguous operands (BLAS, gathers, ...), reshapes that regroup
    a view that is no contiguous block (attention's heads merged back), or is an
    output: NumPy's view would be copied anyway (by NumPy's reshape on one thread).
    Such a view, when native kernels and such reshapes are its only readers, becomes
    a native copy (a loop reading its source through the view's index map), so it can
    join their segment, and a reshape of it is free."""
    readers = {}
    for step in steps:
        for a in (step.inputs if type(step) is Fused else step.invars):
            if type(a) is Var:
                readers.setdefault(a, []).append(step)
    outputs = {a for a in jaxpr.outvars if type(a) is Var}
    views = {s.outvars[0]: s for s in steps if type(s) is not Fused
             and s.primitive.name in VIEWS and type(s.invars[0]) is Var}
    blocks = {o for o, v in views.items() if _contiguous_block(v)}
    per_array = collections.Counter(views[o].invars[0] for o in blocks)
    kept_views = {o: v for o, v in views.items()
                  if o not in blocks or per_array[v.invars[0]] < MANY_BLOCKS}
    out = []
    for step in steps:
        if type(step) is not Fused and step.primitive.name in VIEWS \
                and type(step.invars[0]) is Var:
            view = step.outvars[0]
            src, index_map = _through_views(step, kept_views)
            users = readers.get(view, [])
            # an output is copied anyway (outputs are fresh arrays)
            if index_map is not None and (users or view in outputs) \
                    and fused.can_copy(view.aval) and _size(view.aval.shape) > 0 \
                    and all(type(u) is Fused or _copying_reshape(u, index_map, view.aval.shape)
                            for u in users):
                step = Fused([step], [src], [view], tuple(view.aval.shape), [(view, index_map)])
        out.append(step)
    kept, read = [], set(outputs)         # less the views no step reads any more
    for step in reversed(out):
        if type(step) is not Fused and step.primitive.name in VIEWS and step.outvars[0] not in read:
            continue
        kept.append(step)
        read.update(a for a in (step.inputs if type(step) is Fused else step.invars)
                    if type(a) is Var)
    return kept[::-1]


def _through_views(step, views):
    """(buffer, IndexMap) of a view step read through the view steps under it (a
    block of attention's heads: a slice of a transpose of a reshape) from the
    buffer below them all, where the maps compose; else from its own operand
    (which would otherwise be made C-contiguous by NumPy first). `views`: the view
    steps that may be read through."""
    chain, src = [step], step.invars[0]
    while src in views:
        chain.insert(0, views[src])
        src = chain[0].invars[0]
    while True:
        index_map = identity_map(src.aval.shape)
        for eqn in chain:
            index_map = view_map(eqn, index_map)
            if index_map is None:
                break
        if index_map is not None or len(chain) == 1:
            return src, index_map
        src = chain.pop(0).outvars[0]


# From this many contiguous blocks `x[i]` (i > 0) of one array, kernels read each
# block as NumPy's free view rather than through it: read through, every block's
# copy has code of its own (its offset compiled in), while reading the view at
# offset 0 they have equal code, compiled once (image_grid's hundred transposes:
# 1.6 s to compile read through, 0.6 s not). Fewer blocks (attention's q, k and v
# rows of one weight) are read through, so their readers stay in one segment.
MANY_BLOCKS = 8


def _contiguous_block(view):
    """Whether the view step's result is a C-contiguous block of its operand that
    starts past its first element (`x[i]` for i > 0; a reshape starts at it)."""
    m = view_map(view, identity_map(view.invars[0].aval.shape))
    if m is None or m.offset == 0:
        return False
    shape = view.outvars[0].aval.shape
    dense = identity_map(shape).strides
    return all(n == 1 or s == d for n, s, d in zip(shape, m.strides, dense))


def _copying_reshape(eqn, index_map, shape):
    """Whether `eqn` is a reshape regrouping elements (not a view) of a view with
    this IndexMap and shape that is no C-contiguous block of its source: NumPy
    copies the view there."""
    if eqn.primitive.name != "reshape" or view_map(eqn, identity_map(shape)) is not None:
        return False
    return any(s != c for s, c, n in zip(index_map.strides, identity_map(shape).strides, shape)
               if n != 1)


def _native_body(closed, fused):
    """A BodyPlan when the loop body `closed`, simplified, is one native segment
    (outputs that are inputs or repeats are copied by the loop; its constants are
    passed in), else None."""
    from ..compiler.simplify import simplify
    from ..cpu.program import BodyPlan, is_alias
    body = blas_layout_dots(simplify(closed), fused.can_lower_alone,
                            fused.rhs_rows_first)
    outs = body.jaxpr.outvars
    if any(type(v) is not Var for v in outs):
        return None
    computed = {id(v) for v in outs if v not in body.jaxpr.invars}
    steps = _native_steps(body.jaxpr, fused)
    if not steps and not computed:       # every output is an input: copies only
        return BodyPlan(body, [], None)
    if not all((type(s) is Fused and _size(s.shape) > 0)
               or (type(s) is not Fused and is_alias(s)) for s in steps):
        return None
    segments = plan_segments(steps, lambda st: type(st) is Fused, set(outs), min_kernels=1)
    if len(segments) != 1 or len(segments[0].members) != len(steps) \
            or set(map(id, segments[0].exported)) != computed:
        return None
    segment = segments[0]
    segment.members = [steps[i] for i in segment.members]
    return BodyPlan(body, [s for s in steps if type(s) is Fused], segment)


def _native_loop(eqn, fused):
    """A LoopPlan when `eqn` is a scan, while loop or cond whose bodies (condition,
    branches) are native segments, else None (it then runs as a step calling its
    compiled bodies from Python)."""
    from ..cpu.program import LoopPlan
    name = eqn.primitive.name
    if name == "scan":
        closed = [eqn.params["jaxpr"]]
    elif name == "while":
        closed = [eqn.params["cond_jaxpr"], eqn.params["body_jaxpr"]]
    elif name == "cond":
        closed = list(eqn.params["branches"])
    else:
        return None
    parts = [_native_body(c, fused) for c in closed]
    return None if None in parts else LoopPlan(name, parts)


# NumPy steps whose impl always returns new memory (never a view of an operand).
_FRESH_RESULTS = frozenset({
    "dot_general", "gather", "scatter", "scatter_add", "scatter_mul", "scatter_min",
    "scatter_max", "concatenate", "pad", "cumsum", "cumprod", "cummax", "cummin", "argmax",
    "argmin", "sort", "reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and",
    "reduce_or"})


def _in_place(groups, steps, jaxpr, donated):
    """Per fused group, {output index: input index} for outputs that may be written
    into the buffer of a donated program input. The group must be the last step
    reading that buffer (directly or through a NumPy step's result that may be a
    view of it), read it once, element by element at the output's own index (a
    plain read over the group's domain), and the output must have its shape and
    dtype; a buffer that may be returned as an output is never reused. A collective
    that MPI runs in place (`cpu.mpi.IN_PLACE`) counts as element by element."""
    if not donated:
        return [{} for _ in groups]
    owner = {jaxpr.invars[i]: jaxpr.invars[i] for i in donated}   # var -> donated buffer
    last_read = {}
    for index, step in enumerate(steps):
        atoms = step.inputs if type(step) is Fused else step.invars
        for a in atoms:
            if type(a) is Var and a in owner:
                last_read[owner[a]] = index
        if type(step) is not Fused and step.primitive.name not in _FRESH_RESULTS:
            shared = {owner[a] for a in step.invars if type(a) is Var and a in owner}
            for v in step.outvars:
                if len(shared) == 1:
                    owner[v] = next(iter(shared))
                elif shared:       # may alias several: never reuse any of them
                    for buf in shared:
                        last_read[buf] = len(steps)
    for a in jaxpr.outvars:
        if type(a) is Var and a in owner:
            last_read[owner[a]] = len(steps)
    position = {id(step): index for index, step in enumerate(steps)}
    result = []
    for g in groups:
        reduced = {e.outvars[0] for e in g.reductions}
        if not all(e.primitive.elementwise or e.outvars[0] in reduced for e in g.eqns) \
                and not (len(g.eqns) == 1 and g.eqns[0].primitive.name in mpi.IN_PLACE):
            result.append({})      # e.g. a matmul reads all of its inputs for each output
            continue
        ins = [a for a in g.inputs if type(a) is not Literal]
        plain = [st is None for a, (_, st) in zip(g.inputs, g.reads) if type(a) is not Literal]
        buffers = [owner.get(a) for a in ins]
        pairs = {}
        reads = _inputs_read(g)
        for j, o in enumerate(g.outputs):
            if o in reduced:
                continue
            for k, a in enumerate(ins):
                # o must be computed from a: its store then depends on a's load at the
                # same index (a store of another output could be scheduled before it)
                if (owner.get(a) is a and plain[k] and buffers.count(a) == 1
                        and a in reads.get(o, ())
                        and last_read.get(a) == position[id(g)] and k not in pairs.values()
                        and a.aval.shape == o.aval.shape == tuple(g.shape)
                        and a.aval.dtype == o.aval.dtype):
                    pairs[j] = k
                    break
        result.append(pairs)
    return result


def _inputs_read(group):
    """{var defined in the group: the group inputs its value is computed from}."""
    reads = {}
    for e in group.eqns:
        found = set()
        for a in e.invars:
            if type(a) is Var:
                found |= reads.get(a, {a})
        for v in e.outvars:
            reads[v] = found
    return reads


def _size(shape):
    return math.prod(map(int, shape))
