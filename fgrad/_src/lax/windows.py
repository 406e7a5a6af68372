"""Max over sliding windows: `reduce_window_max` and the two linear primitives its
derivatives are made of.

A window has, per operand dimension, a size k, a stride s and a dilation d (it
reads elements 0, d, ..., (k-1)·d from its start; windows start every s
elements); only whole windows count (padding is the caller's: `reduce_window_max`
pads with -inf, or the dtype's minimum). Output size per dimension:
(size - (k-1)·d - 1) // s + 1, or 0 when the window does not fit.

Each window *selects* one element: scanning its offsets in row-major order, the
first that beats every earlier one, where a beats b when a > b, or a is NaN and b
is not, or a is +0 and b is -0 (IEEE 754-2019 maximum, as the compiled max). So
the maximum is the selected element, NaN-propagating, and

- select_and_gather_add(t, x): per window, t at the element x selects (shape of
  the output); the JVP of the maximum;
- select_and_scatter_add(g, x): per window, g added to the element x selects
  (shape of x), windows in row-major order; the transpose of the gather.

So a gradient goes to one element of each window (PyTorch's and JAX's rule), not
split among ties. The NumPy impls run the native kernels' comparisons and
additions in the same order (cpu/windows.py), so eager and jit agree bit for bit.
"""
import itertools

import numpy as np

from ..ad import deflinear
from ..batching import move_to_front
from ..core import Primitive, ShapedArray
from ..errors import FgradTypeError
from ._util import check_kinds
from .convolution import padtype_to_pads
from .slicing import pad

PARAMS = ("window_dimensions", "window_strides", "window_dilation")


def out_shape(shape, window_dimensions, window_strides, window_dilation):
    """The windows' count per dimension."""
    out = []
    for n, k, s, d in zip(shape, window_dimensions, window_strides, window_dilation):
        span = (k - 1) * d + 1
        out.append((n - span) // s + 1 if n >= span else 0)
    return tuple(out)


def _check(name, x, window_dimensions, window_strides, window_dilation):
    for what, v in zip(PARAMS, (window_dimensions, window_strides, window_dilation)):
        if len(v) != x.ndim or any(int(e) < 1 for e in v):
            raise FgradTypeError(f"{name}: {what} {tuple(v)} needs one entry >= 1 per "
                                 f"dimension of {x.str_short()}",
                                 hint="give a window size, stride and dilation for every "
                                      "dimension (1 where there is no window)")
    check_kinds(name, [x], "f")


def _window_slice(offset, outs, strides, dilation):
    return tuple(slice(o * d, o * d + (m - 1) * s + 1, s) if m else slice(0, 0)
                 for o, m, s, d in zip(offset, outs, strides, dilation))


def _offsets(window_dimensions):
    return list(itertools.product(*(range(k) for k in window_dimensions)))


def _beats(v, best):
    """Elementwise: v replaces best as a window's selection (see the module doc)."""
    with np.errstate(invalid="ignore"):
        return (v > best) | (np.isnan(v) & ~np.isnan(best)) | (
            (v == 0) & (best == 0) & np.signbit(best) & ~np.signbit(v))


def _select(x, window_dimensions, window_strides, window_dilation):
    """(each window's selected value, its offset's row-major number)."""
    outs = out_shape(x.shape, window_dimensions, window_strides, window_dilation)
    best, which = None, np.zeros(outs, np.int64)
    for k, offset in enumerate(_offsets(window_dimensions)):
        v = x[_window_slice(offset, outs, window_strides, window_dilation)]
        if best is None:
            best = v.copy()
            continue
        b = _beats(v, best)
        best = np.where(b, v, best)
        which[b] = k
    return best, which


# ----------------------------------------------------------------------------
# The primitives

def _window_params(name, p, arity):
    def abstract_eval(*avals, window_dimensions, window_strides, window_dilation):
        x = avals[-1]
        _check(name, x, window_dimensions, window_strides, window_dilation)
        outs = out_shape(x.shape, window_dimensions, window_strides, window_dilation)
        if arity == 2:
            t, scatter = avals[0], name == "select_and_scatter_add"
            want, result = (outs, x.shape) if scatter else (x.shape, outs)
            if tuple(t.shape) != tuple(want) or t.dtype != x.dtype:
                raise FgradTypeError(f"{name}: the first operand must be {x.dtype}"
                                     f"{tuple(want)}, got {t.str_short()}")
            return ShapedArray(tuple(result), x.dtype, t.weak_type)
        return ShapedArray(outs, x.dtype, x.weak_type)
    p.abstract_eval = abstract_eval

    def batch(vals, dims, **params):
        # the batch dim gets a window of one element
        if arity == 1 or dims[0] == dims[1]:
            d = next(e for e in dims if e is not None)
        else:
            size = next(v.shape[e] for v, e in zip(vals, dims) if e is not None)
            vals, d = [move_to_front(v, e, size) for v, e in zip(vals, dims)], 0
        new = {k: tuple(v[:d]) + (1,) + tuple(v[d:]) for k, v in params.items()}
        return p.bind(*vals, **new), d
    p.batch = batch


reduce_window_max_p = Primitive("reduce_window_max")


def _reduce_window_max_impl(x, **params):
    return _select(x, **params)[0]


reduce_window_max_p.impl = _reduce_window_max_impl
_window_params("reduce_window_max", reduce_window_max_p, 1)


def _reduce_window_max_jvp(primals, tangents, **params):
    (x,), (t,) = primals, tangents
    ans = reduce_window_max_p.bind(x, **params)
    return ans, (None if t is None else select_and_gather_add_p.bind(t, x, **params))


reduce_window_max_p.jvp = _reduce_window_max_jvp

select_and_gather_add_p = Primitive("select_and_gather_add")


def _gather_impl(t, x, **params):
    which = _select(x, **params)[1]
    outs = which.shape
    out = np.zeros(outs, t.dtype)
    for k, offset in enumerate(_offsets(params["window_dimensions"])):
        picked = which == k
        out[picked] = t[_window_slice(offset, outs, params["window_strides"],
                                      params["window_dilation"])][picked]
    return out


select_and_gather_add_p.impl = _gather_impl
_window_params("select_and_gather_add", select_and_gather_add_p, 2)

select_and_scatter_add_p = Primitive("select_and_scatter_add")


def _scatter_impl(g, x, **params):
    """Offsets last to first: each element then receives its windows' shares in
    the windows' row-major order (a later offset belongs to an earlier window), as
    the native kernel adds them; adding an unselected +0 changes no sum."""
    which = _select(x, **params)[1]
    outs = which.shape
    out = np.zeros(x.shape, g.dtype)
    offsets = _offsets(params["window_dimensions"])
    for k in reversed(range(len(offsets))):
        view = out[_window_slice(offsets[k], outs, params["window_strides"],
                                 params["window_dilation"])]
        view += np.where(which == k, g, g.dtype.type(0))
    return out


select_and_scatter_add_p.impl = _scatter_impl
_window_params("select_and_scatter_add", select_and_scatter_add_p, 2)

deflinear(select_and_gather_add_p,
          lambda ct, t, x, **params: [select_and_scatter_add_p.bind(ct, x, **params), None])
deflinear(select_and_scatter_add_p,
          lambda ct, g, x, **params: [select_and_gather_add_p.bind(ct, x, **params), None])


# ----------------------------------------------------------------------------
# The function

def _ints(what, v, n, default):
    v = (default,) * n if v is None else tuple(v)
    if len(v) != n or not all(isinstance(e, (int, np.integer)) and e >= 1 for e in v):
        raise ValueError(f"reduce_window_max: {what} must be {n} ints >= 1, got {v!r}")
    return tuple(int(e) for e in v)


def reduce_window_max(operand, window_dimensions, window_strides=None, padding="VALID",
                      window_dilation=None):
    """The maximum over each window of `operand` (floating point): window size,
    stride (default 1) and dilation (default 1) per dimension; padding 'VALID',
    'SAME' or one (lo, hi) pair per dimension, padded with -inf. Gradients go to
    each window's first maximal element (NaN counts as the largest)."""
    n = len(operand.shape)
    if np.dtype(operand.dtype).kind != "f":
        raise TypeError(f"reduce_window_max: expected a floating-point operand, got "
                        f"{operand.dtype}")
    dims = _ints("window_dimensions", window_dimensions, n, None)
    strides = _ints("window_strides", window_strides, n, 1)
    dilation = _ints("window_dilation", window_dilation, n, 1)
    if isinstance(padding, str):
        spans = [(k - 1) * d + 1 for k, d in zip(dims, dilation)]
        padding = padtype_to_pads(tuple(operand.shape), spans, strides, padding)
    padding = [tuple(int(e) for e in p) for p in padding]
    if len(padding) != n or any(len(p) != 2 or min(p) < 0 for p in padding):
        raise ValueError(f"reduce_window_max: padding must be 'VALID', 'SAME' or {n} "
                         f"(lo, hi) pairs >= 0, got {padding!r}")
    if any(lo or hi for lo, hi in padding):
        operand = pad(operand, np.array(-np.inf, operand.dtype),
                      [(lo, hi, 0) for lo, hi in padding])
    return reduce_window_max_p.bind(operand, window_dimensions=dims, window_strides=strides,
                                    window_dilation=dilation)
