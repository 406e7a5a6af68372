"""GPU executables: a simplified jaxpr as a fixed plan of GPU steps.

The same planner as the CPU backend (`compiler.fusion.plan`) groups the
equations; `cuda_c.can_fuse_gpu` decides what a kernel can hold. Every group
becomes a CUDA C kernel (all of a program's kernels in one translation unit,
compiled once by NVRTC on the first call; steps labelled `cuda:`); dot_general
runs through cuBLAS (`cublas:`); other primitives run with CuPy (`cupy:`) or,
where CuPy has no counterpart, as their NumPy impl on host copies (`host:`).
Planning needs no GPU: `as_text()` (the plan, the jaxpr and the CUDA C) works
anywhere; device memory is touched on the first call only. Complex dtypes are
refused (`_refuse_complex`): this backend has no complex kernels.
"""
import time

from ..compiler.fusion import Fused, plan
from ..compiler.simplify import simplify
from ..config import config
from ..core import Array
from ..errors import FgradTypeError
from ..jaxpr import ClosedJaxpr, Jaxpr, Literal, pretty_print
from ..jit.slots import Slots, run_steps, step_summary
from . import cuda_c, launch, ops
from .runtime import cupy


class Step:
    """One step: a callable on CuPy arrays, its slots, a label, and the primitive it
    runs (None for a fused kernel)."""
    __slots__ = ("fn", "ins", "outs", "params", "multiple", "label", "primitive")

    def __init__(self, fn, ins, outs, params, multiple, label, primitive=None):
        self.fn, self.ins, self.outs, self.params = fn, ins, outs, params
        self.multiple, self.label, self.primitive = multiple, label, primitive


def _raw(value):
    return value._value if type(value) is Array else value


class GpuExecutable:
    """A compiled program for GPU inputs: call it with CuPy arrays (host arrays
    among the inputs are copied to the device first)."""

    def __init__(self, closed, name="jit", flush_denormals=False):
        self.name, self.jaxpr = name, closed
        jaxpr = closed.jaxpr
        _refuse_complex(jaxpr, name)
        slots = Slots(closed, _raw)
        template, slot_of, ref = slots.template, slots.of, slots.ref
        self.in_slots = slots.inputs

        steps = plan(jaxpr, cuda_c.can_fuse_gpu)
        groups = [s for s in steps if type(s) is Fused]
        self.cuda_source, plans = cuda_c.emit_program(groups, name)
        self.module = launch.GpuModule(self.cuda_source, name, flush_denormals) if groups else None
        plan_of = dict(zip(map(id, groups), plans))
        self.steps = []
        for step in steps:
            if type(step) is Fused:
                p = plan_of[id(step)]
                ins = [a for a in step.inputs if type(a) is not Literal]
                self.steps.append(Step(launch.kernel_caller(self.module, p, step),
                                       [ref(a) for a in ins], [slot_of(v) for v in step.outputs],
                                       {}, True, "cuda:" + "+".join(e.primitive.name
                                                                   for e in step.eqns)))
                continue
            prim = step.primitive
            fn, label = ops.step_for(prim)
            self.steps.append(Step(fn, [ref(a) for a in step.invars],
                                   [slot_of(v) for v in step.outvars], step.params,
                                   prim.multiple_results, label, prim))
        self.out_refs = [ref(a) for a in jaxpr.outvars]
        computed = {i for s in self.steps for i in s.outs}
        self.out_copy = [i not in computed for i in self.out_refs]
        self.out_weak = [a.aval.weak_type for a in jaxpr.outvars]
        self.template = template
        self._device_template = {}      # device id -> template with constants on it
        self.compile_stats = None       # (the CPU backend's disk-cache statistics)

    @property
    def kernels(self):
        """The steps (named as the CPU Executable's, for logging)."""
        return self.steps

    def _template_on_device(self):
        cp = cupy()
        dev = cp.cuda.Device().id
        t = self._device_template.get(dev)
        if t is None:
            t = self._device_template[dev] = [None if v is None else cp.asarray(v)
                                              for v in self.template]
        return t

    def __call__(self, *args):
        cp = cupy()
        env = self._template_on_device().copy()
        for i, a in zip(self.in_slots, args):
            env[i] = a if isinstance(a, cp.ndarray) else cp.asarray(a)
        run_steps(self.steps, env)
        # outputs are fresh arrays: copy those that are inputs or constants
        return [env[i].copy() if copy else env[i] for i, copy in zip(self.out_refs, self.out_copy)]

    def as_text(self):
        lines = [f"// GPU program {self.name}: {len(self.steps)} steps "
                 f"({step_summary(self.steps)})",
                 "// cuda: fused CUDA C kernels (below); cublas: dot_general as cupy.matmul; "
                 "cupy: CuPy operations; host: the NumPy impl on host copies (no GPU "
                 "lowering for that primitive)"]
        lines += [f"// {i}: {s.label}" for i, s in enumerate(self.steps)]
        lines += ["", pretty_print(self.jaxpr.jaxpr)]
        if self.module is not None:
            lines += ["", "// CUDA C of the fused kernels", self.cuda_source]
        return "\n".join(lines)


def _complex_values(jaxpr):
    """(where, aval) of the first complex value in a jaxpr or its sub-jaxprs, or None."""
    for v in list(jaxpr.invars) + list(jaxpr.constvars):
        if v.aval.dtype.kind == "c":
            return "an input", v.aval
    for eqn in jaxpr.eqns:
        for v in list(eqn.invars) + list(eqn.outvars):
            if v.aval.dtype.kind == "c":
                return f"{eqn.primitive.name}", v.aval
        for p in eqn.params.values():
            sub = p.jaxpr if isinstance(p, ClosedJaxpr) else p if isinstance(p, Jaxpr) else None
            found = sub is not None and _complex_values(sub)
            if found:
                return found
    return None


def _refuse_complex(jaxpr, name):
    found = _complex_values(jaxpr)
    if found:
        where, aval = found
        raise FgradTypeError(
            f"{name} on the GPU: complex numbers are not supported by the GPU backend "
            f"({aval.str_short()} in {where})",
            hint="run complex code on the CPU: move its inputs there with "
                 "fgrad.device_put(x, fgrad.devices('cpu')[0])")


def compile_gpu(closed, name):
    """The GpuExecutable for a closed jaxpr (built once per jaxpr object)."""
    from ..jit.log import log_compile
    from ..jit.primitive import _memo, detached

    def make():
        start = time.perf_counter()
        exe = GpuExecutable(detached(simplify(closed), closed), name, config.flush_denormals)
        log_compile(name, closed, exe, time.perf_counter() - start)
        return exe
    return _memo(closed, ("gpu_executable", config.flush_denormals), make)
