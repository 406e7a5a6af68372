"""Shared pieces for defining primitives: shape rules, scalar lifting, unbroadcast."""
import numpy as np

from .. import dtypes
from ..core import Array, ShapedArray, Tracer, get_aval
from ..errors import FgradTypeError

_PY_SCALARS = (bool, int, float, complex)


def shapes_str(avals):
    return ", ".join(a.str_short() for a in avals)


def broadcast_shape(*shapes):
    """NumPy's broadcast_shapes in Python ints (exact at any size, where NumPy's
    fails near 2^63); ValueError when the shapes do not broadcast."""
    rank = max(map(len, shapes), default=0)
    out = [1] * rank
    for s in shapes:
        for k, d in enumerate(s, rank - len(s)):
            if d != 1:
                if out[k] not in (1, d):
                    raise ValueError(f"shapes {', '.join(map(str, shapes))} do not broadcast")
                out[k] = d
    return tuple(out)


def broadcast_shapes(name, avals):
    """NumPy broadcasting of the avals' shapes, or an error naming the op and shapes."""
    shapes = [a.shape for a in avals]
    first = shapes[0]
    if all(s == first for s in shapes):
        return first
    try:
        return broadcast_shape(*shapes)
    except ValueError:
        raise FgradTypeError(
            f"{name}: incompatible shapes for broadcasting: {shapes_str(avals)}",
            hint="shapes broadcast when, aligned from the right, each pair of sizes is "
                 "equal or one of them is 1; reshape or expand_dims an operand to fit") from None


def same_dtypes(name, avals):
    dtype = avals[0].dtype
    for a in avals[1:]:
        if a.dtype != dtype:
            raise FgradTypeError(
                f"{name} requires operands of one dtype, got {shapes_str(avals)}",
                hint="convert one operand with .astype(...) (fgrad.numpy functions "
                     "promote dtypes for you; lax functions do not)")
    return dtype


_KIND_NAMES = {"f": "floating-point", "i": "integer", "u": "integer", "b": "boolean",
               "c": "complex"}


def check_kinds(name, avals, kinds):
    for a in avals:
        if a.dtype.kind not in kinds:
            allowed = sorted({_KIND_NAMES[k] for k in kinds})
            hint = "convert the operand with .astype(...)"
            if a.dtype.kind == "c":
                hint = ("complex numbers have no order (no max, min, <, sort, ...): "
                        "compare their real parts, imaginary parts or magnitudes instead")
            raise FgradTypeError(
                f"{name} requires {' or '.join(allowed)} operands, got {shapes_str(avals)}",
                hint=hint)


def reject_complex(impl):
    """An eager impl (positional operands only) that refuses complex operands
    (NumPy would order them lexicographically, or take a real part): the shape
    rule then names the op."""
    def checked(x, *rest):
        if x.dtype.kind == "c":
            raise TypeError("complex operand")
        return impl(x, *rest)
    checked.__name__ = getattr(impl, "__name__", "impl")
    return checked


def nary_rule(name, kinds, out_dtype=None):
    """Shape rule of an element-wise op: same dtypes, broadcast shapes."""
    def rule(*avals, **params):
        first = avals[0]
        shape, dtype, weak = first.shape, first.dtype, first.weak_type
        for a in avals:
            if a.shape != shape or a.dtype != dtype:
                break
            weak = weak and a.weak_type
        else:
            if dtype.kind in kinds:  # the common case: nothing to broadcast or check
                return ShapedArray(shape, out_dtype or dtype, weak and out_dtype is None)
        dtype = same_dtypes(name, avals)
        check_kinds(name, avals, kinds)
        shape = broadcast_shapes(name, avals)
        weak = all(a.weak_type for a in avals)
        return ShapedArray(shape, out_dtype or dtype, weak and out_dtype is None)
    rule.kinds = kinds      # (read by the eager paths, which check operands' kinds themselves)
    return rule


def lift_scalars(args):
    """Python scalars among operands become weak arrays of the other operands' dtype."""
    for a in args:
        if type(a) in _PY_SCALARS:
            break
    else:
        return args
    dtype = None
    for a in args:
        if type(a) not in _PY_SCALARS:
            dtype = a.dtype
            break
    out = []
    for a in args:
        if type(a) in _PY_SCALARS:
            d = dtype if dtype is not None else dtypes.dtype_of_python_scalar(a)
            a = Array(np.asarray(a, d), True)
        out.append(a)
    return out


def unbroadcast(ct, aval):
    """Sum a cotangent down to `aval`'s shape (the transpose of broadcasting)."""
    shape = tuple(ct.shape)
    target = aval.shape
    if shape == target:
        return ct
    from . import reduce_sum, reshape
    lead = len(shape) - len(target)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, (t, s) in enumerate(zip(target, shape[lead:])) if t == 1 and s != 1)
    if axes:
        ct = reduce_sum(ct, axes)
    if tuple(ct.shape) != target:
        ct = reshape(ct, target)
    return ct


def is_traced(x):
    return isinstance(x, Tracer)


def aval_of(x):
    return get_aval(x)
