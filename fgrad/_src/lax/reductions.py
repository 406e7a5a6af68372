"""Reductions over axes: reduce_sum, reduce_prod, reduce_max, reduce_min,
reduce_and, reduce_or, argmax, argmin.

The output drops the reduced axes (fgrad.numpy adds keepdims on top). float16
sums and products accumulate in float32 and round once, as XLA does (NumPy
rounds every step along an axis it does not reduce pairwise: the sum of 10^4
float16 ones would be 2048).
"""
import math

import numpy as np

from ..ad import defjvp, defjvp_zero, deflinear, jvp_flat
from ..batching import defreduction
from ..core import Array, Primitive, ShapedArray
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


def _accumulated(reduce):
    """x's reduction in x's dtype; float16 accumulated in float32."""
    def impl(x, *, axes):
        if x.dtype == np.float16:
            return reduce(x, axis=axes, dtype=np.float32).astype(np.float16)
        return reduce(x, axis=axes, dtype=x.dtype)
    return impl


def _reduce_sum_impl(x, *, axes):
    if x.dtype.kind == "b":
        raise TypeError("reduce_sum of booleans")  # (NumPy would give their `any`)
    return _accumulated(np.sum)(x, axes=axes)


reduce_sum_p = Primitive("reduce_sum")
reduce_sum_p.impl = _reduce_sum_impl
reduce_sum_p.abstract_eval = _reduction_rule("reduce_sum", "fiuc")
defreduction(reduce_sum_p)
deflinear(reduce_sum_p, _reduce_sum_transpose)


def reduce_sum(x, axes):
    axes = normalize_axes(axes, len(x.shape))
    return reduce_sum_p.bind(x, axes=axes)


# ----------------------------------------------------------------------------
# reduce_prod: the JVP differentiates a pairwise product tree made of muls, so
# it is exact where elements are zero and is itself differentiable.

def _tree_prod(v):
    """Product over the last axis of v by pairwise multiplication (log depth)."""
    from .elementwise import mul
    from .shape_ops import reshape
    from .slicing import pad, slice_in_dim
    last = len(v.shape) - 1
    one = Array(np.ones((), v.dtype), False)
    while v.shape[last] > 1:
        if v.shape[last] % 2:
            v = pad(v, one, [(0, 0, 0)] * last + [(0, 1, 0)])
        n = v.shape[last]
        v = mul(slice_in_dim(v, 0, n, 2, last), slice_in_dim(v, 1, n, 2, last))
    return reshape(v, v.shape[:last])


def _reduce_prod_jvp(primals, tangents, *, axes):
    from .shape_ops import reshape, transpose
    (x,), (t,) = primals, tangents
    ans = reduce_prod_p.bind(x, axes=axes)
    n = math.prod(map(int, [x.shape[a] for a in axes]))
    if t is None or n == 0:
        return ans, None
    kept = tuple(i for i in range(len(x.shape)) if i not in axes)

    def flat(v):  # reduced axes last, as one axis
        return reshape(transpose(v, kept + axes), tuple(ans.shape) + (n,))

    _, (t_out,) = jvp_flat(lambda v: [_tree_prod(v)], [flat(x)], [flat(t)])
    return ans, t_out


def _reduce_prod_impl(x, *, axes):
    if x.dtype.kind == "b":
        raise TypeError("reduce_prod of booleans")  # the shape rule explains
    return _accumulated(np.prod)(x, axes=axes)


reduce_prod_p = Primitive("reduce_prod")
reduce_prod_p.impl = _reduce_prod_impl
reduce_prod_p.abstract_eval = _reduction_rule("reduce_prod", "fiuc")
defreduction(reduce_prod_p)
reduce_prod_p.jvp = _reduce_prod_jvp


def reduce_prod(x, axes):
    return reduce_prod_p.bind(x, axes=normalize_axes(axes, len(x.shape)))


# ----------------------------------------------------------------------------
# reduce_and / reduce_or (booleans)

def _boolean_reduction(fn):
    def impl(x, *, axes):
        if x.dtype.kind != "b":
            raise TypeError("a boolean reduction of non-booleans")  # the shape rule explains
        return fn(x, axis=axes)
    return impl


reduce_and_p = Primitive("reduce_and")
reduce_and_p.impl = _boolean_reduction(np.all)
reduce_and_p.abstract_eval = _reduction_rule("reduce_and", "b")
defreduction(reduce_and_p)
defjvp_zero(reduce_and_p)


def reduce_and(x, axes):
    return reduce_and_p.bind(x, axes=normalize_axes(axes, len(x.shape)))


reduce_or_p = Primitive("reduce_or")
reduce_or_p.impl = _boolean_reduction(np.any)
reduce_or_p.abstract_eval = _reduction_rule("reduce_or", "b")
defreduction(reduce_or_p)
defjvp_zero(reduce_or_p)


def reduce_or(x, axes):
    return reduce_or_p.bind(x, axes=normalize_axes(axes, len(x.shape)))


# ----------------------------------------------------------------------------
# reduce_max / reduce_min: the tangent is averaged over tied maxima

def _extremum_jvp(g, ans, x, *, axes):
    from .elementwise import convert_element_type, div, eq, mul
    from .shape_ops import broadcast_in_dim
    kept = tuple(i for i in range(len(x.shape)) if i not in axes)
    location = convert_element_type(eq(x, broadcast_in_dim(ans, x.shape, kept)), g.dtype)
    counts = reduce_sum(location, axes)
    return div(reduce_sum(mul(g, location), axes), counts)


def _extremum_impl(pick_max):
    """np.max / np.min with IEEE 754-2019's -0 < +0, as compiled code computes them
    (NumPy's answer for a tie of zeros depends on the order it visits them)."""
    from .elementwise import signed_zero, zeros_with_sign
    reduce = np.max if pick_max else np.min

    def impl(x, *, axes):
        _unordered(x)
        out = reduce(x, axis=axes)
        if x.dtype.kind == "f":
            zeros = out == 0
            if np.any(zeros):
                seen = np.any(zeros_with_sign(x, pick_max), axis=axes)
                out = np.where(zeros, signed_zero(x.dtype, pick_max, seen), out)
        return out
    return impl


reduce_max_p = Primitive("reduce_max")
reduce_max_p.impl = _extremum_impl(True)
reduce_max_p.abstract_eval = _reduction_rule("reduce_max", "fiub")
defreduction(reduce_max_p)
defjvp(reduce_max_p, _extremum_jvp)


def reduce_max(x, axes):
    return reduce_max_p.bind(x, axes=normalize_axes(axes, len(x.shape)))


reduce_min_p = Primitive("reduce_min")
reduce_min_p.impl = _extremum_impl(False)
reduce_min_p.abstract_eval = _reduction_rule("reduce_min", "fiub")
defreduction(reduce_min_p)
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
        check_kinds(name, [x], "fiub")
        return ShapedArray(_reduced_shape(x.shape, axes), index_dtype, False)
    return rule


def _unordered(x):
    """Refuse complex operands (NumPy would order them lexicographically): the
    shape rule then explains."""
    if x.dtype.kind == "c":
        raise TypeError("complex operand")


def _argmax_impl(x, *, axes, index_dtype):
    _unordered(x)
    return np.argmax(x, axis=axes[0]).astype(index_dtype)


def _argmin_impl(x, *, axes, index_dtype):
    _unordered(x)
    return np.argmin(x, axis=axes[0]).astype(index_dtype)


argmax_p = Primitive("argmax")
argmax_p.impl = _argmax_impl
argmax_p.abstract_eval = _arg_rule("argmax")
defreduction(argmax_p)
defjvp_zero(argmax_p)

argmin_p = Primitive("argmin")
argmin_p.impl = _argmin_impl
argmin_p.abstract_eval = _arg_rule("argmin")
defreduction(argmin_p)
defjvp_zero(argmin_p)


def argmax(x, axis, index_dtype):
    return argmax_p.bind(x, axes=(int(axis) % len(x.shape),), index_dtype=np.dtype(index_dtype))


def argmin(x, axis, index_dtype):
    return argmin_p.bind(x, axes=(int(axis) % len(x.shape),), index_dtype=np.dtype(index_dtype))
