"""Cumulative reductions along one axis: cumsum, cumprod, cummax, cummin.

`reverse=True` accumulates from the end of the axis towards the start. float16
sums and products accumulate in float32, each result rounded once to float16
(as reduce_sum does; NumPy's float16 cumsum of 10,000 ones stops at 2048).
"""
import numpy as np

from .. import dtypes
from ..ad import deflinear, jvp_flat
from ..batching import unbatched_axis
from ..core import Array, Primitive, ShapedArray
from ..errors import FgradTypeError
from ._util import check_kinds
from .elementwise import bitwise_or, eq, gt, lt, mul, select_n, signed_zero, zeros_with_sign
from .gather_scatter import gather
from .slicing import iota, pad, rev, slice_in_dim


def _cumulative_rule(name, kinds):
    def rule(x, *, axis, reverse):
        if not 0 <= axis < x.ndim:
            raise FgradTypeError(f"{name}: axis {axis} is out of range for {x.str_short()}",
                                 hint=f"axis must lie in [0, {x.ndim})")
        check_kinds(name, [x], kinds)
        return ShapedArray(x.shape, x.dtype, x.weak_type)
    return rule


def _accumulate(ufunc, x, axis, dtype):
    """ufunc.accumulate in `dtype`; for maximum / minimum with IEEE 754-2019's
    -0 < +0, as compiled code computes them (NumPy keeps whichever zero its loop
    prefers)."""
    out = ufunc.accumulate(x, axis=axis, dtype=dtype)
    if ufunc in (np.maximum, np.minimum) and x.dtype.kind == "f":
        zeros = out == 0
        if zeros.any():
            pick_max = ufunc is np.maximum
            seen = np.logical_or.accumulate(zeros_with_sign(x, pick_max), axis=axis)
            out = np.where(zeros, signed_zero(x.dtype, pick_max, seen), out)
    return out


def _cumulative_impl(ufunc, kinds, widen_half):
    """ufunc.accumulate along `axis`; with widen_half (sums, products) float16 is
    accumulated in float32 and each result rounded once, as reduce_sum does."""
    def impl(x, *, axis, reverse):
        if x.dtype.kind not in kinds:
            raise TypeError("unsupported dtype")  # the shape rule explains
        acc = np.float32 if widen_half and x.dtype == np.float16 else x.dtype
        if reverse:
            out = np.flip(_accumulate(ufunc, np.flip(x, axis), axis, acc), axis)
        else:
            out = _accumulate(ufunc, x, axis, acc)
        return out.astype(x.dtype, copy=False)
    return impl


def _cumulative_primitive(name, ufunc, kinds):
    p = Primitive(name)
    p.impl = _cumulative_impl(ufunc, kinds, widen_half=name in ("cumsum", "cumprod"))
    p.abstract_eval = _cumulative_rule(name, kinds)

    def batch(vals, dims, *, axis, reverse):
        # Accumulate along the same operand axis; the batch dim stays in place.
        (x,), (d,) = vals, dims
        return p.bind(x, axis=unbatched_axis(axis, d), reverse=reverse), d
    p.batch = batch

    def op(x, axis=0, reverse=False):
        ndim = len(x.shape)
        axis = int(axis) % ndim if -ndim <= int(axis) < ndim else int(axis)
        return p.bind(x, axis=axis, reverse=bool(reverse))
    op.__name__ = name
    op.__doc__ = f"{name} along `axis` (from the end when reverse=True)."
    return p, op


def _shift_in(x, axis, fill):
    """x moved one step along `axis` (towards higher indices), `fill` entering at 0."""
    n = x.shape[axis]
    config = [(0, 0, 0)] * len(x.shape)
    config[axis] = (1, 0, 0)
    return pad(slice_in_dim(x, 0, n - 1, axis=axis), fill, config)


# ----------------------------------------------------------------------------
# cumsum: linear; its transpose accumulates in the other direction

cumsum_p, cumsum = _cumulative_primitive("cumsum", np.add, "fiuc")
deflinear(cumsum_p, lambda ct, x, *, axis, reverse: [cumsum(ct, axis, not reverse)])


# ----------------------------------------------------------------------------
# cumprod: the JVP differentiates a log-depth prefix-product scan made of muls,
# so it is exact where elements are zero and is itself differentiable.

def _prefix_prod(x, axis):
    """Inclusive product scan along `axis` (Hillis-Steele: log2(n) rounds of muls)."""
    n = x.shape[axis]
    one = Array(np.ones((), x.dtype), False)
    shift = 1
    while shift < n:
        config = [(0, 0, 0)] * len(x.shape)
        config[axis] = (shift, 0, 0)
        x = mul(x, pad(slice_in_dim(x, 0, n - shift, axis=axis), one, config))
        shift *= 2
    return x


def _cumprod_jvp(primals, tangents, *, axis, reverse):
    (x,), (t,) = primals, tangents
    ans = cumprod_p.bind(x, axis=axis, reverse=reverse)
    if t is None:
        return ans, None
    if reverse:
        x, t = rev(x, (axis,)), rev(t, (axis,))
    _, (t_out,) = jvp_flat(lambda v: [_prefix_prod(v, axis)], [x], [t])
    return ans, rev(t_out, (axis,)) if reverse else t_out


cumprod_p, cumprod = _cumulative_primitive("cumprod", np.multiply, "fiuc")
cumprod_p.jvp = _cumprod_jvp


# ----------------------------------------------------------------------------
# cummax / cummin: each output's tangent is the tangent of the element that
# holds the running extremum (the first one to reach it, on ties).

def _cumulative_extremum_jvp(p, beats):
    def jvp(primals, tangents, *, axis, reverse):
        (x,), (t,) = primals, tangents
        ans = p.bind(x, axis=axis, reverse=reverse)
        if t is None or x.shape[axis] == 0:
            return ans, None
        if reverse:
            x, t, ans_fwd = rev(x, (axis,)), rev(t, (axis,)), rev(ans, (axis,))
        else:
            ans_fwd = ans
        shape = tuple(x.shape)
        position = iota(dtypes.int32, shape, axis)
        # A new record: the first element, or one that beats the running extremum before it.
        record = bitwise_or(eq(position, 0), beats(x, _shift_in(ans_fwd, axis, _zero(x.dtype))))
        source = cummax(select_n(record, 0, position), axis)
        index = [source if d == axis else iota(dtypes.int32, shape, d) for d in range(len(shape))]
        t_out = gather(t, index, range(len(shape)))
        return ans, rev(t_out, (axis,)) if reverse else t_out
    return jvp


def _zero(dtype):
    return Array(np.zeros((), dtype), False)


cummax_p, cummax = _cumulative_primitive("cummax", np.maximum, "fiu")
cummax_p.jvp = _cumulative_extremum_jvp(cummax_p, gt)

cummin_p, cummin = _cumulative_primitive("cummin", np.minimum, "fiu")
cummin_p.jvp = _cumulative_extremum_jvp(cummin_p, lt)
