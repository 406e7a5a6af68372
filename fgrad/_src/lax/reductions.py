"""Reductions over axes: reduce_sum, reduce_max, reduce_min, argmax, argmin.

The output drops the reduced axes (fgrad.numpy adds keepdims on top).
"""
import numpy as np

from ..ad import defjvp, defjvp_zero, deflinear
from ..core import Primitive, ShapedArray
from ..errors import FgradTypeError
from ._util import check_kinds


def _check_axes(name, x, axes):
    for a in axes:
        if not 0 <= a < x.ndim:
            raise FgradTypeError(f"{name}: axis {a} is out of range for {x.str_short()}",
                                 hint=f"axes must lie in [0, {x.ndim})")
    if len(set(axes)) != len(axes):
        raise FgradTypeError(f"{name}: repeated axis in {axes} for {x.str_short()}")


def _reduced_shape(shape, axes):
    return tuple(s for i, s in enumerate(shape) if i not in axes)


def _reduction_rule(name, kinds):
    def rule(x, *, axes):
        _check_axes(name, x, axes)
        check_kinds(name, [x], kinds)
        return ShapedArray(_reduced_shape(x.shape, axes), x.dtype, x.weak_type)
    return rule


def normalize_axes(axes, ndim):
    """Axes as a sorted tuple of non-negative ints (None: all axes)."""
    if axes is None:
        return tuple(range(ndim))
    if isinstance(axes, (int, np.integer)):
        axes = (axes,)
    return tuple(sorted(int(a) % ndim if -ndim <= int(a) < ndim else int(a) for a in axes))


# ----------------------------------------------------------------------------
# reduce_sum (linear)

def _reduce_sum_transpose(ct, x, *, axes):
    from .shape_ops import broadcast_in_dim
    shape = x.aval.shape
    kept = tuple(i for i in range(len(shape)) if i not in axes)
    return [broadcast_in_dim(ct, shape, kept)]


reduce_sum_p = Primitive("reduce_sum")
reduce_sum_p.impl = lambda x, *, axes: np.sum(x, axis=axes, dtype=x.dtype)
reduce_sum_p.abstract_eval = _reduction_rule("reduce_sum", "fiu")
deflinear(reduce_sum_p, _reduce_sum_transpose)


def reduce_sum(x, axes):
    axes = normalize_axes(axes, len(x.shape))
    return reduce_sum_p.bind(x, axes=axes)


# ----------------------------------------------------------------------------
# reduce_max / reduce_min: the tangent is averaged over tied maxima

def _extremum_jvp(g, ans, x, *, axes):
    from .elementwise import convert_element_type, div, eq, mul
    from .shape_ops import broadcast_in_dim
    kept = tuple(i for i in range(len(x.shape)) if i not in axes)
    location = convert_element_type(eq(x, broadcast_in_dim(ans, x.shape, kept)), g.dtype)
    counts = reduce_sum(location, axes)
    return div(reduce_sum(mul(g, location), axes), counts)


reduce_max_p = Primitive("reduce_max")
reduce_max_p.impl = lambda x, *, axes: np.max(x, axis=axes)
reduce_max_p.abstract_eval = _reduction_rule("reduce_max", "fiub")
defjvp(reduce_max_p, _extremum_jvp)


def reduce_max(x, axes):
    return reduce_max_p.bind(x, axes=normalize_axes(axes, len(x.shape)))


reduce_min_p = Primitive("reduce_min")
reduce_min_p.impl = lambda x, *, axes: np.min(x, axis=axes)
reduce_min_p.abstract_eval = _reduction_rule("reduce_min", "fiub")
defjvp(reduce_min_p, _extremum_jvp)


def reduce_min(x, axes):
    return reduce_min_p.bind(x, axes=normalize_axes(axes, len(x.shape)))


# ----------------------------------------------------------------------------
# argmax / argmin over one axis (integer results, no derivative)

def _arg_rule(name):
    def rule(x, *, axes, index_dtype):
        _check_axes(name, x, axes)
        if len(axes) != 1:
            raise FgradTypeError(f"{name} reduces exactly one axis, got {axes}")
        return ShapedArray(_reduced_shape(x.shape, axes), index_dtype, False)
    return rule


def _argmax_impl(x, *, axes, index_dtype):
    return np.argmax(x, axis=axes[0]).astype(index_dtype)


def _argmin_impl(x, *, axes, index_dtype):
    return np.argmin(x, axis=axes[0]).astype(index_dtype)


argmax_p = Primitive("argmax")
argmax_p.impl = _argmax_impl
argmax_p.abstract_eval = _arg_rule("argmax")
defjvp_zero(argmax_p)

argmin_p = Primitive("argmin")
argmin_p.impl = _argmin_impl
argmin_p.abstract_eval = _arg_rule("argmin")
defjvp_zero(argmin_p)


def argmax(x, axis, index_dtype):
    return argmax_p.bind(x, axes=(int(axis) % len(x.shape),), index_dtype=np.dtype(index_dtype))


def argmin(x, axis, index_dtype):
    return argmin_p.bind(x, axes=(int(axis) % len(x.shape),), index_dtype=np.dtype(index_dtype))
