"""Launching generated kernels: one CUDA module per program, one caller per group.

The module is compiled (by fgrad's NVRTC path with its own options, to machine
code for the device in use) on the first call, not when the program is
planned, so planning and `as_text` need no GPU. Launch sizes come from the problem: BLOCK threads per block and enough
blocks to cover the work, capped at a few waves of the device's
multiprocessors (the kernels' grid-stride loops cover the rest).
"""
from . import cuda_c
from .nvrtc import OPTIONS, compile_to_cubin, compile_to_ptx
from .runtime import cupy

_WAVES = 8        # resident blocks per multiprocessor the grid aims for


class GpuModule:
    """The compiled CUDA C of one program (compiled on first use, per device).
    `flush_denormals`: float32 subnormals flushed to zero, as compiled CPU code
    does under `config.flush_denormals`."""

    def __init__(self, source, name, flush_denormals=False):
        self.source, self.name = source, name
        self.options = OPTIONS + (("-ftz=true",) if flush_denormals else ())
        self._modules = {}

    def function(self, entry):
        cp = cupy()
        dev = cp.cuda.Device().id
        module = self._modules.get(dev)
        if module is None:
            cc = int(cp.cuda.Device(dev).compute_capability)
            module = cp.cuda.function.Module()
            module.load(device_image(self.source, f"{self.name}.cu", cc, self.options))
            self._modules[dev] = module
        return module.get_function(entry)


def device_image(source, name, cc, options=OPTIONS):
    """What the driver loads for compute capability `cc` (e.g. 90): a cubin, or,
    for an architecture NVRTC cannot target, PTX for the newest one it can below
    it (the driver compiles that on load)."""
    archs = cupy().cuda.nvrtc.getSupportedArchs()
    if cc in archs:
        return compile_to_cubin(source, name, f"sm_{cc}", options)
    arch = f"compute_{max(a for a in archs if a <= cc)}"
    return compile_to_ptx(source, name, arch, options).encode()


_sm_count = {}


def _grid(work):
    cp = cupy()
    dev = cp.cuda.Device()
    sms = _sm_count.get(dev.id)
    if sms is None:
        sms = _sm_count[dev.id] = dev.attributes["MultiProcessorCount"]
    return max(1, min(work, sms * _WAVES))


def kernel_caller(module, plan, group):
    """A callable taking the group's non-Literal inputs (CuPy arrays) and returning
    the list of its outputs (fresh CuPy arrays)."""
    from ..jaxpr import Literal
    ins = [a for a in group.inputs if type(a) is not Literal]
    in_specs = [(a.aval.dtype, tuple(a.aval.shape)) for a in ins]
    out_specs = [(tuple(v.aval.shape), v.aval.dtype) for v in group.outputs]
    thread_work = plan.strategy != "row"
    blocks_for = (lambda w: -(-w // cuda_c.BLOCK)) if thread_work else (lambda w: w)
    state = {}

    def prepare(k, x):
        cp = cupy()
        dt, shape = in_specs[k]
        if not isinstance(x, cp.ndarray):
            x = cp.asarray(x)           # a host constant: moved once per call
        if x.dtype != dt or x.shape != shape:
            raise TypeError(f"GPU kernel {plan.entry}: input {k} is {x.dtype}{list(x.shape)}, "
                            f"expected {dt}{list(shape)}")
        return cp.ascontiguousarray(x)

    def run(*xs):
        cp = cupy()
        if plan.size == 0:               # nothing to loop over; an empty sum is 0
            return [cp.zeros(shape, dt) for shape, dt in out_specs]
        fn = state.get("fn")
        if fn is None:
            fn = state["fn"] = module.function(plan.entry)
            state["finish"] = module.function(plan.finish) if plan.finish else None
            state["grid"] = _grid(blocks_for(plan.work))
        args = [prepare(k, x) for k, x in enumerate(xs)]
        outs = [cp.empty(shape, dt) for shape, dt in out_specs]
        extra = []
        partial = None
        if plan.chunks > 1:
            partial = cp.empty(plan.work, plan.partial_dtype)
            extra.append(partial)
        err = None
        if plan.reports_error:
            err = cp.zeros(1, cp.int32)
            extra.append(err)
        fn((state["grid"],), (cuda_c.BLOCK,), tuple(args + outs + extra))
        if partial is not None:
            red = next(j for j, v in enumerate(group.outputs) if v is group.eqns[-1].outvars[0])
            n_out = plan.work // plan.chunks
            state["finish"]((_grid(n_out),), (cuda_c.BLOCK,), (partial, outs[red]))
        if err is not None and int(err.get()[0]):
            raise ValueError("invalid entry in choice array")
        return outs

    run.__name__ = plan.entry
    run.plan, run.group = plan, group
    return run
