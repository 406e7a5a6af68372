"""Differences, integrals and interpolation on sampled data: gradient, interp,
unwrap, trapezoid, ediff1d.

All are slices and arithmetic (interp also a search among the sample points),
so they differentiate, batch and compile. interp is piecewise linear: its
derivative with respect to x jumps at the sample points xp, where fgrad gives
the slope of the segment to the right (as the value is computed from it).
"""
import math

import numpy as np

from . import reductions, ufuncs
from .shape import broadcast_to, concatenate, diff
from .sorting import argsort, searchsorted
from .util import asarray, canonicalize_axis, promote_inexact, to_inexact


def _along(x, axis, start, stop):
    """x[..., start:stop, ...] on `axis`."""
    index = [slice(None)] * x.ndim
    index[axis] = slice(start, stop)
    return x[tuple(index)]


def _spacing_for(name, h, n, dtype):
    """A scalar spacing, or the differences of a coordinate array of length n."""
    h = asarray(h)
    if h.ndim == 0:
        return h.astype(dtype), True
    if h.ndim != 1 or h.shape[0] != n:
        raise ValueError(f"{name}: distances must be either scalars or 1d arrays of the "
                         f"same length as the corresponding dimension ({n}), got shape "
                         f"{tuple(h.shape)}")
    return diff(h.astype(dtype)), False


def gradient(f, *varargs, axis=None, edge_order=1):
    """The derivative of sampled f along each axis by central differences inside and
    one-sided differences (edge_order 1 or 2) at the ends, as numpy.gradient;
    spacings: one scalar for all axes, or one scalar or coordinate array per axis.
    One axis gives an array, several a tuple."""
    f = to_inexact(asarray(f))
    if axis is None:
        axes = tuple(range(f.ndim))
    else:
        axes = tuple(canonicalize_axis("gradient", a, f.ndim, f.shape)
                     for a in ((axis,) if np.ndim(axis) == 0 else axis))
    if len(varargs) == 0:
        spacings = [1.0] * len(axes)
    elif len(varargs) == 1 and np.ndim(varargs[0]) == 0:
        spacings = list(varargs) * len(axes)
    elif len(varargs) == len(axes):
        spacings = list(varargs)
    else:
        raise TypeError(f"gradient: expected 0, 1 or {len(axes)} spacing arguments, got "
                        f"{len(varargs)}")
    if edge_order not in (1, 2):
        raise ValueError("gradient: edge_order must be 1 or 2")
    out = [_gradient_along(f, ax, h, edge_order) for ax, h in zip(axes, spacings)]
    return out[0] if len(out) == 1 else tuple(out)


def _gradient_along(f, ax, h, edge_order):
    n = f.shape[ax]
    if n < edge_order + 1:
        raise ValueError(f"gradient: shape of the array along axis {ax} is {n}, too small "
                         f"to calculate a numerical gradient; at least (edge_order + 1) "
                         f"= {edge_order + 1} elements are required")
    d, uniform = _spacing_for("gradient", h, n, f.dtype)

    def at(start, stop):
        return _along(f, ax, start, stop)

    def one(i):             # the slice of f at position i (negative: from the end)
        return _along(f, ax, i, i + 1 if i != -1 else None)

    def spread(v):       # a 1-d array of spacings, aligned with `ax`
        shape = [1] * f.ndim
        shape[ax] = v.shape[0]
        return v.reshape(shape)

    if uniform:
        inner = (at(2, None) - at(0, -2)) / (2.0 * d)
    else:
        d1, d2 = spread(d[:-1]), spread(d[1:])
        inner = (-d2 / (d1 * (d1 + d2)) * at(0, -2) + (d2 - d1) / (d1 * d2) * at(1, -1)
                 + d1 / (d2 * (d1 + d2)) * at(2, None))
    first_d, last_d = (d, d) if uniform else (d[0], d[-1])
    if edge_order == 1:
        head = (one(1) - one(0)) / first_d
        tail = (one(-1) - one(-2)) / last_d
    else:
        if uniform:
            a, b, c = -1.5 / d, 2.0 / d, -0.5 / d
            e1, e2, e3 = 0.5 / d, -2.0 / d, 1.5 / d
        else:
            d1, d2 = d[0], d[1]
            a = -(2.0 * d1 + d2) / (d1 * (d1 + d2))
            b = (d1 + d2) / (d1 * d2)
            c = -d1 / (d2 * (d1 + d2))
            d1, d2 = d[-2], d[-1]
            e1 = d2 / (d1 * (d1 + d2))
            e2 = -(d2 + d1) / (d1 * d2)
            e3 = (2.0 * d2 + d1) / (d2 * (d1 + d2))
        head = a * one(0) + b * one(1) + c * one(2)
        tail = e1 * one(-3) + e2 * one(-2) + e3 * one(-1)
    return concatenate([head, inner, tail], axis=ax)


def interp(x, xp, fp, left=None, right=None, period=None):
    """Piecewise-linear interpolation of the points (xp, fp) (xp increasing) at x;
    left/right: the values below xp[0] / above xp[-1] (default fp[0] / fp[-1]);
    period: xp and x are angles of that period (left/right then do not apply)."""
    xp, fp = asarray(xp), asarray(fp)
    if xp.ndim != 1 or fp.ndim != 1 or xp.shape[0] != fp.shape[0]:
        raise ValueError(f"interp: xp and fp must be 1-d sequences of the same length, got "
                         f"shapes {tuple(xp.shape)} and {tuple(fp.shape)}")
    if xp.shape[0] == 0:
        raise ValueError("interp: array of sample points is empty")
    x, xp = promote_inexact(x, xp)
    fp, = promote_inexact(fp)
    if period is not None:
        if period == 0:
            raise ValueError("interp: period must be a non-zero value")
        period = abs(period)
        x = ufuncs.mod(x, period)
        xp = ufuncs.mod(xp, period)
        order = argsort(xp)
        xp, fp = xp[order], fp[order]
        xp = concatenate([xp[-1:] - period, xp, xp[:1] + period])
        fp = concatenate([fp[-1:], fp, fp[:1]])
    n = xp.shape[0]
    if n == 1:
        y = broadcast_to(fp[0], tuple(x.shape))
    else:
        j = ufuncs.clip(searchsorted(xp, x, side="right") - 1, 0, n - 2)
        x0, x1, f0, f1 = xp[j], xp[j + 1], fp[j], fp[j + 1]
        slope = (f1 - f0) / (x1 - x0)
        y = slope * (x - x0) + f0
        y = ufuncs.where(x == xp[-1], fp[-1], y)
    if period is None:
        y = ufuncs.where(x < xp[0], fp[0] if left is None else left, y)
        y = ufuncs.where(x > xp[-1], fp[-1] if right is None else right, y)
    return y


def unwrap(p, discont=None, axis=-1, *, period=2 * math.pi):
    """p with jumps between neighbours larger than `discont` (default and at least
    period/2) replaced by their equivalents modulo `period`."""
    p = to_inexact(asarray(p))
    axis = canonicalize_axis("unwrap", axis, p.ndim, p.shape)
    high = period / 2
    discont = high if discont is None else max(discont, high)
    dd = diff(p, axis=axis)
    wrapped = ufuncs.mod(dd + high, period) - high
    wrapped = ufuncs.where(ufuncs.logical_and(wrapped == -high, dd > 0), high, wrapped)
    correction = ufuncs.where(ufuncs.abs(dd) < discont, 0.0, wrapped - dd)
    head = _along(p, axis, 0, 1)
    rest = _along(p, axis, 1, None) + reductions.cumsum(correction, axis=axis)
    return concatenate([head, rest], axis=axis)


def trapezoid(y, x=None, dx=1.0, axis=-1):
    """The integral of sampled y along `axis` by the trapezoidal rule, with sample
    points x (1-d along the axis, or y's shape) or a constant spacing dx."""
    y = to_inexact(asarray(y))
    axis = canonicalize_axis("trapezoid", axis, y.ndim, y.shape)
    if x is None:
        d = dx
    else:
        x = asarray(x)
        if x.ndim == 1:
            shape = [1] * y.ndim
            shape[axis] = x.shape[0]
            d = diff(x).reshape(shape[:axis] + [x.shape[0] - 1] + shape[axis + 1:])
        else:
            d = diff(x, axis=axis)
    mids = (_along(y, axis, 1, None) + _along(y, axis, 0, -1)) / 2.0
    return reductions.sum(d * mids, axis=axis)


def ediff1d(ary, to_end=None, to_begin=None):
    """Differences of consecutive elements of the flattened array, with to_begin /
    to_end joined at the ends."""
    flat = asarray(ary).ravel()
    parts = [] if to_begin is None else [asarray(to_begin).ravel().astype(flat.dtype)]
    parts.append(flat[1:] - flat[:-1])
    if to_end is not None:
        parts.append(asarray(to_end).ravel().astype(flat.dtype))
    return concatenate(parts)
