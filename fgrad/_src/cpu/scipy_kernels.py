"""Loop-body emitters for the special-function primitives (`lax/special.py`):
calls of SciPy's own scalar kernels.

scipy.special.cython_special exports the double-precision kernels behind
scipy.special's ufuncs as PyCapsules in `__pyx_capi__` (C signature
``double f(double, ..., int skip_dispatch)``). Their addresses are given to the
engine as ``fgrad_scipy_<primitive>`` and a fused loop calls them once per
element (scalar calls: these loops do not vectorise, but they fuse with the
element-wise code around them). float32 operands are widened to double and the
result rounded once, which is what the primitives' NumPy impls do with the
ufunc, so jit and eager agree bit for bit. float16 is left to the NumPy impl,
and so is Hurwitz `zeta` (no capsule) and any kernel the installed SciPy does
not export.
"""
import ctypes
import functools

import numpy as np

from ..lax.special import KERNELS
from . import engine

__all__ = ["EMITTERS", "OPERAND_DTYPES", "available"]

_FLOAT_DTYPES = frozenset({np.dtype(np.float32), np.dtype(np.float64)})


def _symbol(prim):
    return f"fgrad_scipy_{prim}"


@functools.lru_cache(maxsize=None)
def _capsule(capsule_name):
    """(address, number of double arguments) of a cython_special kernel, or None."""
    try:
        from scipy.special import cython_special
    except ImportError:
        return None
    capsule = cython_special.__pyx_capi__.get(capsule_name)
    if capsule is None:
        return None
    get_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(
        ("PyCapsule_GetName", ctypes.pythonapi))
    get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
        ("PyCapsule_GetPointer", ctypes.pythonapi))
    name = get_name(capsule)
    if not name.startswith(b"double (double"):     # not the real double kernel
        return None
    return get_pointer(capsule, name), name.count(b"double") - 1


def available(prim):
    """Whether the installed SciPy exports `prim`'s kernel (registers it once)."""
    if prim == "xdivy":
        return True
    return _kernel(prim) is not None


@functools.lru_cache(maxsize=None)
def _kernel(prim):
    capsule_name = KERNELS[prim][1]
    kernel = _capsule(capsule_name) if capsule_name else None
    if not kernel or not kernel[0]:
        return None
    engine.add_symbol(_symbol(prim), kernel[0])
    return kernel


def _call_kernel(prim):
    def emit(cx, args, dts, out, params):
        ir, b = cx.ir, cx.b
        double = ir.DoubleType()
        fn = cx.module.globals.get(_symbol(prim))
        if fn is None:
            nargs = _kernel(prim)[1]
            fn = ir.Function(cx.module, ir.FunctionType(double, [double] * nargs + [ir.IntType(32)]),
                             _symbol(prim))
        wide = [a if a.type == double else b.fpext(a, double) for a in args]
        r = b.call(fn, wide + [ir.Constant(ir.IntType(32), 0)])
        return r if dts[0].itemsize == 8 else b.fptrunc(r, cx.ty(dts[0]))
    return emit


def _xdivy(cx, args, dts, out, params):
    """+0 where x == 0, else x / y (the NumPy impl's np.where)."""
    b = cx.b
    x, y = args
    zero = cx.const(dts[0], 0.0)
    return b.select(b.fcmp_ordered("==", x, zero), zero, b.fdiv(x, y))


# every kernel SciPy may export; `available` says whether this one does
EMITTERS = {"xdivy": _xdivy, **{prim: _call_kernel(prim) for prim, (_, capsule) in KERNELS.items()
                                if capsule is not None}}
OPERAND_DTYPES = {name: _FLOAT_DTYPES for name in EMITTERS}
