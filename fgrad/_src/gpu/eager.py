"""Eager primitives on GPU arrays.

An element-wise primitive or a reduction runs as a one-equation program on
the GPU backend (a CUDA kernel compiled once per primitive, parameters, shapes
and dtypes, as JAX compiles its eager operations), so eager and jitted GPU
code agree bit for bit. Other primitives run their GPU step (`ops`). A `jit`
equation met eagerly (e.g. under a transform's rule) runs the inner program
on the GPU backend. Host NumPy operands are copied to the device (moving data
to the GPU is what an operation on GPU arrays asks for; only the way back must
be explicit, with `fgrad.device_put`).
"""
from ..compiler.fusion import REDUCTIONS
from ..lru import LRU
from . import ops
from .runtime import cupy

_programs = LRU()  # (primitive, params, avals) -> GpuExecutable of one equation


def _one_equation(prim, params, avals):
    from .. import core
    from ..partial_eval import trace_to_jaxpr
    from .executable import GpuExecutable
    from ..compiler.simplify import simplify

    def fun(*xs):
        out = prim.bind(*xs, **params)
        return list(out) if prim.multiple_results else [out]

    closed = trace_to_jaxpr(fun, [core.ShapedArray(s, d) for s, d in avals],
                            f"GPU eager {prim.name}")
    return GpuExecutable(simplify(closed), f"eager_{prim.name}")


def run(prim, vals, params):
    cp = cupy()
    vals = [v if isinstance(v, cp.ndarray) else cp.asarray(v) for v in vals]
    if prim.name == "jit":
        from .executable import compile_gpu
        return compile_gpu(params["jaxpr"], params["name"])(*vals)
    if prim.elementwise or prim.name in REDUCTIONS:
        try:
            key = (prim, tuple(sorted(params.items())),
                   tuple((v.shape, v.dtype) for v in vals))
            hash(key)
        except TypeError:
            key = None
        exe = _programs.get(key) if key is not None else None
        if exe is None:
            exe = _one_equation(prim, params, [(v.shape, v.dtype) for v in vals])
            if key is not None:
                _programs[key] = exe
        outs = exe(*vals)
        return outs if prim.multiple_results else outs[0]
    fn, _ = ops.step_for(prim)
    return fn(*vals, **params)
