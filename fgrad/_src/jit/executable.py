"""Executables: a simplified jaxpr turned into a fixed plan of kernel calls.

Every variable gets a slot in a flat environment; constants and literals are
placed once when the plan is built, so a call only runs the kernels. Each step
is a `Kernel`: a native kernel from a backend where one exists, otherwise the
primitive's NumPy implementation. `as_text()` lists the plan and says which
steps are which, so nothing falls back unannounced.
"""
import numpy as np

from ..core import Array
from ..jaxpr import Literal, pretty_print

def _raw(value):
    return value._value if type(value) is Array else np.asarray(value)


class Kernel:
    """One step of a plan: a callable on NumPy values giving one or more outputs."""
    __slots__ = ("fn", "ins", "outs", "params", "multiple", "label")

    def __init__(self, fn, ins, outs, params, multiple, label):
        self.fn, self.ins, self.outs, self.params = fn, ins, outs, params
        self.multiple, self.label = multiple, label


class Executable:
    """A compiled program: call it with the NumPy values of the jaxpr's inputs."""

    def __init__(self, closed, name="jit"):
        self.name = name
        self.jaxpr = closed
        jaxpr = closed.jaxpr
        slots = {}
        template = []

        def slot_of(v):
            if v not in slots:
                slots[v] = len(template)
                template.append(None)
            return slots[v]

        for v, c in zip(jaxpr.constvars, closed.consts):
            template[slot_of(v)] = _raw(c)
        self.in_slots = [slot_of(v) for v in jaxpr.invars]

        def ref(a):
            if type(a) is Literal:
                template.append(_raw(a.val))
                return len(template) - 1
            return slot_of(a)

        self.kernels = []
        for eqn in jaxpr.eqns:
            prim = eqn.primitive
            if prim.impl is None:
                raise NotImplementedError(
                    f"jit cannot compile {prim.name}: it has no implementation to run "
                    f"(in {name})")
            self.kernels.append(Kernel(prim.impl, [ref(a) for a in eqn.invars],
                                       [slot_of(v) for v in eqn.outvars], eqn.params,
                                       prim.multiple_results, f"numpy:{prim.name}"))
        self.out_refs = [ref(a) for a in jaxpr.outvars]
        # Outputs are fresh arrays owned by the caller: copy those that would otherwise
        # alias an input or one of the program's constants.
        computed = {i for k in self.kernels for i in k.outs}
        self.out_copy = [i not in computed for i in self.out_refs]
        self.out_weak = [a.aval.weak_type for a in jaxpr.outvars]
        self.out_dtypes = [a.aval.dtype for a in jaxpr.outvars]
        self.template = template

    def __call__(self, *args):
        env = self.template.copy()
        for i, a in zip(self.in_slots, args):
            env[i] = a
        for k in self.kernels:
            result = k.fn(*[env[i] for i in k.ins], **k.params)
            if k.multiple:
                for i, r in zip(k.outs, result):
                    env[i] = r
            else:
                env[k.outs[0]] = result
        return [np.array(env[i]) if copy else env[i]
                for i, copy in zip(self.out_refs, self.out_copy)]

    def as_text(self):
        counts = {}
        for k in self.kernels:
            kind = k.label.split(":")[0]
            counts[kind] = counts.get(kind, 0) + 1
        summary = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "no"
        lines = [f"// program {self.name}: {len(self.kernels)} steps ({summary} kernels)",
                 "// steps marked numpy: run the primitive's NumPy implementation "
                 "(native lowering pending)"]
        lines += [f"// {i}: {k.label}" for i, k in enumerate(self.kernels)]
        lines += ["", pretty_print(self.jaxpr.jaxpr)]
        return "\n".join(lines)
