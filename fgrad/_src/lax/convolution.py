"""Convolution: the `conv_general_dilated` primitive and the functions built on it.

One N-d cross-correlation with window strides, explicit (lo, hi) padding per
spatial dim (negative values crop), lhs dilation (zeros between input elements,
as a transposed convolution needs), rhs dilation (holes in the kernel), feature
groups and batch groups, in any layout named by dimension numbers:

    lhs_spec = (batch dim, feature dim, spatial dims...)
    rhs_spec = (out-feature dim, in-feature dim, spatial dims...)
    out_spec = (batch dim, feature dim, spatial dims...)

In the canonical layout (N, C, spatial), with G feature groups and B batch
groups (at most one of them > 1), output feature o belongs to group
g = o // (O / G) (or b = o // (O / B)) and

    out[n, o, y] = sum_{c, k} x[b·N/B + n, g·C/G + c, y·stride + k·rhs_dil - lo] · w[o, c, k]

where x is lhs after lhs dilation (zeros outside it). Output size per spatial
dim: floor((dilated_in + lo + hi - dilated_kernel) / stride) + 1, at least 0.

For float32/float64 the impl computes what the CPU kernel (cpu.convolution)
computes, gemm call by gemm call (`runs_shifted`, `im2col_plan`) or through the
same lane-product kernel (`runs_lanes`, `runs_channels_last`), so eager and jit
agree bit for bit.

The rules work in the canonical layout (operands are transposed in and the
results out; nothing moves for NCHW/OIHW). Both gradients are convolutions
again: the input's uses the flipped kernel with its in/out features swapped
within each group, lhs dilation = stride and stride = lhs dilation; the
kernel's convolves the input (batch and feature roles swapped) with the
cotangent as kernel, rhs dilation = stride and stride = rhs dilation, feature
groups turning into batch groups and back.
"""
import itertools
import math
from typing import NamedTuple

import numpy as np

from .. import dtypes
from ..ad import defjvp, is_undefined
from ..core import Primitive, ShapedArray, get_aval
from ..cpu import blas
from ..errors import FgradTypeError
from ._util import check_kinds, shapes_str
from .elementwise import convert_element_type
from .shape_ops import reshape, transpose
from .slicing import rev


class ConvDimensionNumbers(NamedTuple):
    """Axis positions: lhs (batch, feature, spatial...), rhs (out feature, in feature,
    spatial...), out (batch, feature, spatial...)."""
    lhs_spec: tuple
    rhs_spec: tuple
    out_spec: tuple


def _fail(problem, avals, hint):
    raise FgradTypeError(f"conv_general_dilated: {problem} for {shapes_str(avals)}", hint=hint)


def _dilate(size, dilation):
    return 0 if size == 0 else (size - 1) * dilation + 1


def _out_size(size, kernel, stride, pads, lhs_dil, rhs_dil):
    padded = _dilate(size, lhs_dil) + pads[0] + pads[1]
    span = _dilate(kernel, rhs_dil)
    return max(0, (padded - span) // stride + 1) if padded >= span else 0


def _canonical_shapes(lhs, rhs, dn):
    return (tuple(lhs.shape[d] for d in dn.lhs_spec), tuple(rhs.shape[d] for d in dn.rhs_spec))


def _conv_abstract_eval(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                        dimension_numbers, feature_group_count, batch_group_count,
                        preferred_element_type):
    avals = [lhs, rhs]
    dn = dimension_numbers
    if lhs.dtype != rhs.dtype:
        _fail("operands of different dtypes", avals,
              "convert one operand with .astype(...) (lax does not promote)")
    check_kinds("conv_general_dilated", avals, "fiu")
    if lhs.ndim != rhs.ndim or lhs.ndim < 2:
        _fail("operands of different ranks (or rank < 2)", avals,
              "lhs is (batch, feature, spatial...) and rhs (out, in, spatial...) in some order")
    for spec, x in ((dn.lhs_spec, lhs), (dn.rhs_spec, rhs), (dn.out_spec, lhs)):
        if sorted(spec) != list(range(x.ndim)):
            _fail(f"dimension_numbers {tuple(dn)} that do not name each axis once", avals,
                  "each spec must be a permutation of the operand's axes")
    nsp = lhs.ndim - 2
    for name, v in (("window_strides", window_strides), ("lhs_dilation", lhs_dilation),
                    ("rhs_dilation", rhs_dilation)):
        if len(v) != nsp or min(v, default=1) < 1:
            _fail(f"{name}={v}", avals, f"give {nsp} positive ints, one per spatial dim")
    if len(padding) != nsp:
        _fail(f"padding={padding}", avals, f"give {nsp} (lo, hi) pairs, one per spatial dim")
    (n, c, *xs), (o, i, *ks) = _canonical_shapes(lhs, rhs, dn)
    g, bg = feature_group_count, batch_group_count
    if g < 1 or bg < 1 or (g > 1 and bg > 1):
        _fail(f"feature_group_count={g}, batch_group_count={bg}", avals,
              "both must be >= 1 and at most one of them > 1")
    if c != i * g:
        _fail(f"lhs features {c} != rhs in-features {i} x feature_group_count {g}", avals,
              "rhs's in-feature dim holds the features of one group")
    if o % g or o % bg:
        _fail(f"rhs out-features {o} not divisible by the group count", avals,
              "each group needs the same number of output features")
    if n % bg:
        _fail(f"lhs batch {n} not divisible by batch_group_count {bg}", avals,
              "each batch group needs the same number of examples")
    sizes = [_out_size(*args) for args in zip(xs, ks, window_strides, padding, lhs_dilation,
                                              rhs_dilation)]
    canonical = (n // bg, o, *sizes)
    shape = [0] * lhs.ndim
    for d, extent in zip(dn.out_spec, canonical):
        shape[d] = extent
    if preferred_element_type is not None:
        return ShapedArray(tuple(shape), preferred_element_type, False)
    return ShapedArray(tuple(shape), lhs.dtype, lhs.weak_type and rhs.weak_type)


def _windows(x, kernel, strides, padding, lhs_dilation, rhs_dilation, out_sizes):
    """x (N, C, *spatial) -> read-only view (N, C, *out_sizes, *kernel) of the
    dilated, padded input: element [..., y, k] is at y·stride + k·rhs_dil."""
    nsp = len(kernel)
    if any(d > 1 for d in lhs_dilation):
        full = np.zeros(x.shape[:2] + tuple(_dilate(s, d) for s, d in
                                            zip(x.shape[2:], lhs_dilation)), x.dtype)
        full[(slice(None), slice(None)) + tuple(slice(None, None, d) for d in lhs_dilation)] = x
        x = full
    crop = tuple(slice(max(-lo, 0), s - max(-hi, 0)) for (lo, hi), s in zip(padding, x.shape[2:]))
    x = x[(slice(None), slice(None)) + crop]
    x = np.pad(x, [(0, 0), (0, 0)] + [(max(lo, 0), max(hi, 0)) for lo, hi in padding])
    x = np.ascontiguousarray(x)
    st = x.strides
    shape = x.shape[:2] + tuple(out_sizes) + tuple(kernel)
    strides = (st[:2] + tuple(st[2 + j] * strides[j] for j in range(nsp))
               + tuple(st[2 + j] * rhs_dilation[j] for j in range(nsp)))
    return np.lib.stride_tricks.as_strided(x, shape, strides, writeable=False)


# The native kernel's plans (cpu.convolution): the impl follows them, gemm by gemm,
# because BLAS's rounding depends on the shapes of its products (its kernels for the
# last few rows or columns of a product sum differently), so that jit and eager
# agree bit for bit.
SHIFTED_MIN_FEATURES = 16    # shifted gemms: gemm's K, enough input features
SHIFTED_MAX_FEATURES = 256   # ... and few enough that BLAS sums them in one pass
SHIFTED_WASTE = 1.3          # wide positions per output position at most this
COL_ELEMENTS = 1 << 20       # im2col: elements of one column buffer
K_ROWS = 2048                # rows of it one gemm contracts
DIRECT_POSITIONS = 512       # output positions for one gemm per example
TRANSPOSED_RATIO = 4         # kernel positions per output position for a transposed layout
CHANNELS_LAST_FEATURES = 16  # channels-last lane products: output features in multiples of this
CHANNELS_LAST_WASTE = 1.15   # ... and wide positions per output position at most this


def _largest_divisor(n, fits):
    """The largest divisor d of n with fits(d), or 1."""
    return max((d for d in range(1, n + 1) if n % d == 0 and fits(d)), default=1)


def out_is_canonical(out_spec, shape):
    """Whether an output of canonical shape (N, O, *ys) laid out by out_spec has the
    element strides of a C-contiguous (N, O, *ys) array."""
    laid = [0] * len(shape)
    for d, extent in zip(out_spec, shape):
        laid[d] = extent
    strides = [math.prod(laid[d + 1:]) for d in range(len(laid))]
    return [strides[d] for d in out_spec] == [math.prod(shape[j + 1:]) for j in range(len(shape))]


def im2col_plan(rhs_shape, nb, ys, out_canonical):
    """(chunk, block, transposed, direct) for a canonical rhs (O, I, *ks), nb examples
    per group and output positions ys: the input features whose patches one gemm
    contracts (up to K_ROWS rows of the column buffer; a weight gradient's rows, in
    the thousands, come in chunks whose products are summed), the examples whose
    patches sit side by side in it (up to COL_ELEMENTS in all), whether it is laid
    out transposed, col[(example, y), (feature, k)] (a kernel far larger than the
    output: a weight gradient), and whether gemm writes an (N, O, spatial...) output
    directly, one product per example (out_canonical: the output has that layout)."""
    _, i, *ks = rhs_shape
    ksize, positions = math.prod(ks), math.prod(ys)
    chunk = _largest_divisor(i, lambda d: d * ksize <= K_ROWS)
    block = _largest_divisor(nb, lambda d: chunk * ksize * d * positions <= COL_ELEMENTS)
    transposed = ksize > TRANSPOSED_RATIO * positions
    direct = (out_canonical and not transposed
              and (block == 1 or positions >= DIRECT_POSITIONS))
    return chunk, block, transposed, direct


def padded_plane(xs, ys, padding):
    """(extents of the input padded by `padding`, their C-order element strides, the
    wide positions: how far one kernel offset's window reaches in that buffer when
    each output row runs the padded row's full length)."""
    extents = [x + lo + hi for x, (lo, hi) in zip(xs, padding)]
    strides = [math.prod(extents[d + 1:]) for d in range(len(extents))]
    return extents, strides, 1 + sum((y - 1) * st for y, st in zip(ys, strides))


def runs_shifted(rhs_shape, ys, params):
    """Whether a convolution (canonical rhs shape (O, I, *ks), output positions ys)
    sums as shifted gemms: for each kernel offset k in C order (offsets along the
    last dim in groups of `shifted_stack`), W[:, :, k] (O x I, or O x group·I)
    times the input read from k's offset, added to the total of the offsets before.
    For unit strides, no lhs dilation or cropping, one group, 16 to 256 input
    features, a kernel not much larger than the output (a weight gradient's is) and
    little waste in the wide rows."""
    p = params
    _, i, *ks = rhs_shape
    if not ys or p["feature_group_count"] * p["batch_group_count"] != 1 \
            or not SHIFTED_MIN_FEATURES <= i <= SHIFTED_MAX_FEATURES \
            or set(p["window_strides"]) != {1} or set(p["lhs_dilation"]) != {1} \
            or min(min(pad) for pad in p["padding"]) < 0 \
            or math.prod(ks) > TRANSPOSED_RATIO * math.prod(ys):
        return False
    xs = [y + (k - 1) * r - lo - hi for y, k, r, (lo, hi) in
          zip(ys, ks, p["rhs_dilation"], p["padding"])]
    return padded_plane(xs, ys, p["padding"])[2] <= SHIFTED_WASTE * math.prod(ys)


def shifted_stack(features, last_kernel):
    """How many consecutive offsets along the kernel's last dim one shifted gemm
    takes (their input rows stacked: K = that many times the input features): the
    most that divide the kernel's extent with at most SHIFTED_MAX_FEATURES rows."""
    return _largest_divisor(last_kernel, lambda d: d * features <= SHIFTED_MAX_FEATURES)


def shifted_rows(xs, ys, padding):
    """The layout of one input feature's rows for shifted gemms, as a C-order
    array (padded extents of the spatial dims but the last, the output's last
    extent), and the wide positions a kernel offset's window reaches in it: one
    copy per offset along the kernel's last dim holds the input read from that
    offset (zeros outside it), so that rows need no padding and a 2-d output's
    positions are all wide positions."""
    extents = [x + lo + hi for x, (lo, hi) in zip(xs[:-1], padding[:-1])] + [ys[-1]]
    strides = [math.prod(extents[d + 1:]) for d in range(len(extents))]
    return extents, strides, 1 + sum((y - 1) * st for y, st in zip(ys, strides))


def shifted_copy_range(x_last, y_last, offset, rhs_dilation, lo):
    """(first, end) of the output columns whose input column, read from kernel
    offset `offset` along the last dim, lies inside the input (others are 0)."""
    start = offset * rhs_dilation - lo
    first, end = max(0, -start), min(y_last, x_last - start)
    return first, max(first, end)


def runs_lanes(nb, rhs_shape, ys, params, dtype):
    """Whether a convolution sums as lane products (cpu.lane_product): a weight
    gradient's shape (a kernel far larger than the output), 2-d, one group, no
    lhs dilation or cropping, and nb examples in whole vectors of the kernel's
    lanes (they run across the vectors). Each output element is then one FMA
    chain over (input feature, kernel position) in C order, whatever the threads."""
    from ..cpu import lane_product
    p = params
    _, _, *ks = rhs_shape
    lanes = lane_product.LANES.get(np.dtype(dtype))
    return (lanes is not None and len(ks) == 2 and nb % lanes == 0
            and p["feature_group_count"] * p["batch_group_count"] == 1
            and set(p["lhs_dilation"]) == {1} and min(min(pad) for pad in p["padding"]) >= 0
            and math.prod(ks) > TRANSPOSED_RATIO * math.prod(ys))


def runs_channels_last(rhs_shape, ys, params):
    """Whether a convolution sums as channels-last lane products (cpu.lane_product):
    where shifted gemms would run (`runs_shifted`), in 2-d without rhs dilation, with
    output features in multiples of CHANNELS_LAST_FEATURES (a whole number of the
    kernel's vectors in float32 and float64) and few wide positions (`padded_plane`:
    a 3x3 kernel on 16x16 or more; at 14x14 with a 5x5 kernel, 27% more, the shifted
    gemms were faster). Each output element is then one FMA chain over (kernel row,
    kernel column, input feature) in C order."""
    o, i, *ks = rhs_shape
    if len(ks) != 2 or o % CHANNELS_LAST_FEATURES or set(params["rhs_dilation"]) != {1} \
            or not runs_shifted(rhs_shape, ys, params):
        return False
    xs = [y + k - 1 - lo - hi for y, k, (lo, hi) in zip(ys, ks, params["padding"])]
    return padded_plane(xs, ys, params["padding"])[2] <= CHANNELS_LAST_WASTE * math.prod(ys)


def _channels_last_sums(x, w, padding, out_sizes):
    """Canonical x (N, C, H, W) and w (O, C, kh, kw) convolved as the native kernel
    does it (`runs_channels_last`): each example copied, padded, channels last
    (Hp, Wp, C), w as (kh, kw, C, O); one kernel call per example adds, for each
    wide position y·Wp + x (`padded_plane`), w times the window read from it
    into acc[y, x, o] (output features across the vectors)."""
    from ..cpu import lane_product
    n, c, *xs = x.shape
    o, _, kh, kw = w.shape
    (hp, wp), _, wide = padded_plane(xs, out_sizes, padding)
    dt = np.result_type(x, w)
    planes = np.zeros((n, hp, wp, c), dt)
    (lo_h, _), (lo_w, _) = padding
    planes[:, lo_h:lo_h + xs[0], lo_w:lo_w + xs[1]] = np.transpose(x, (0, 2, 3, 1))
    w = np.ascontiguousarray(np.transpose(w, (2, 3, 1, 0)))
    acc = np.zeros((n, out_sizes[0], wp, o), dt)
    product = lane_product.function(dt)
    for e in range(n):
        product(planes[e].ctypes.data, c, wp * c, 1, w.ctypes.data, kw * c * o, o,
                acc[e].ctypes.data, o, wide, o, kh, kw * c)
    return np.transpose(acc[:, :, :out_sizes[1]], (0, 3, 1, 2))


def lane_layout(xs, ys, padding, strides, rhs_dilation, lanes):
    """For lane products over `lanes` examples: the padded plane (Hp, Wp) each
    input feature is copied into, examples innermost, and per output position y
    (C order) the offset of its window in that copy, and the copy's strides along
    the kernel's rows and columns (the kernel call's b, sb_r, sb_t)."""
    (h, w), ((lo_h, hi_h), (lo_w, hi_w)) = xs, padding
    hp, wp = h + lo_h + hi_h, w + lo_w + hi_w
    offsets = [(yh * strides[0] * wp + yw * strides[1]) * lanes
               for yh, yw in itertools.product(range(ys[0]), range(ys[1]))]
    return (hp, wp), offsets, (rhs_dilation[0] * wp * lanes, rhs_dilation[1] * lanes)


def _lane_sums(x, w, padding, strides, rhs_dilation, out_sizes):
    """Canonical x (N, C, H, W) and w (O, C, kh, kw) convolved as the native kernel
    does it (`runs_lanes`): each input feature's plane, padded, examples innermost;
    per feature and output position one kernel call adds w[:, feature] times the
    plane read from the position's window, into acc[y, o, example]."""
    from ..cpu import lane_product
    n, c, *xs = x.shape
    o, _, kh, kw = w.shape
    (hp, wp), offsets, (sb_r, sb_t) = lane_layout(xs, out_sizes, padding, strides,
                                                  rhs_dilation, n)
    dt = np.result_type(x, w)
    planes = np.zeros((c, hp, wp, n), dt)
    planes[:, padding[0][0]:padding[0][0] + xs[0], padding[1][0]:padding[1][0] + xs[1]] = \
        np.transpose(x, (1, 2, 3, 0))
    acc = np.zeros((len(offsets), o, n), dt)
    w = np.ascontiguousarray(w)
    product, item = lane_product.function(dt), dt.itemsize
    for ci in range(c):
        a = w.ctypes.data + ci * kh * kw * item
        plane = planes.ctypes.data + ci * hp * wp * n * item
        for y, offset in enumerate(offsets):
            product(a, c * kh * kw, kw, 1, plane + offset * item, sb_r, sb_t,
                    acc.ctypes.data + y * o * n * item, n, o, n, kh, kw)
    return np.transpose(acc, (2, 1, 0)).reshape((n, o, *out_sizes))


def _shifted_sums(x, w, padding, rhs_dilation, out_sizes):
    """Canonical x (N, C, *xs) and w (O, C, *ks) convolved as the native kernel does
    it (cpu.convolution), with the same gemm shapes: BLAS's rounding depends on
    them (its kernels for the last few columns of a product sum differently). The
    input's copies per offset along the kernel's last dim (`shifted_rows`); per
    group of `shifted_stack` of those offsets (groups in C order with the other
    kernel dims), W[:, :, group] times the group's copies read from the offset
    of the other dims, stacked; the products added group after group; then the
    output positions."""
    n, c, *xs = x.shape
    o, _, *ks = w.shape
    extents, strides, wide = shifted_rows(xs, out_sizes, padding)
    stack = shifted_stack(c, ks[-1])
    copies = np.zeros((n, ks[-1], c, *extents), np.result_type(x, w))
    inner = tuple(slice(lo, lo + size) for (lo, _), size in zip(padding[:-1], xs[:-1]))
    for kx in range(ks[-1]):
        first, end = shifted_copy_range(xs[-1], out_sizes[-1], kx, rhs_dilation[-1],
                                        padding[-1][0])
        start = kx * rhs_dilation[-1] - padding[-1][0]
        copies[(slice(None), kx, slice(None)) + inner + (slice(first, end),)] = \
            x[..., first + start:end + start]
    copies = copies.reshape(n, ks[-1] * c, -1)
    total = None
    for k in np.ndindex(*ks[:-1], ks[-1] // stack):
        shift = sum(kd * r * st for kd, r, st in zip(k[:-1], rhs_dilation, strides))
        rows = copies[:, k[-1] * stack * c:(k[-1] + 1) * stack * c, shift:shift + wide]
        wk = w[(slice(None), slice(None)) + k[:-1]
               + (slice(k[-1] * stack, (k[-1] + 1) * stack),)]
        wk = np.transpose(wk, (0, 2, 1)).reshape(o, stack * c)
        prod = np.stack([blas.gemm_from_python(wk, rows[e]) for e in range(n)])
        total = prod if total is None else prod + total
    where = np.zeros(out_sizes, np.intp)
    for d, (y, st) in enumerate(zip(out_sizes, strides)):
        where += (np.arange(y) * st).reshape([-1 if e == d else 1 for e in range(len(xs))])
    return total[:, :, where.ravel()].reshape((n, o, *out_sizes))


def _im2col_sums(win, w, g, bg, plan):
    """The convolution from win (N, C, *ys, *ks), its input's windows, and canonical w
    with the native kernel's im2col gemms (`im2col_plan`): per group, block of
    examples and chunk of input features one product, added chunk after chunk."""
    chunk, block, transposed, direct = plan
    n, _ = win.shape[:2]
    nsp = (win.ndim - 2) // 2
    o, i, *ks = w.shape
    ys = win.shape[2:2 + nsp]
    nb, og, positions = n // bg, o // (g * bg), math.prod(ys)
    rows, cols = chunk * math.prod(ks), block * positions
    spatial, kernel = tuple(range(2, 2 + nsp)), tuple(range(2 + nsp, 2 + 2 * nsp))
    out = np.empty((nb, o, positions), np.result_type(win, w))
    for gi, b0 in itertools.product(range(g * bg), range(0, nb, block)):
        first = (gi * nb if bg > 1 else 0) + b0
        total = None
        for c0 in range(0, i, chunk):
            c = (gi * i if g > 1 else 0) + c0
            patches = win[first:first + block, c:c + chunk]
            wmat = w[gi * og:(gi + 1) * og, c0:c0 + chunk].reshape(og, rows)
            if transposed:
                col = np.transpose(patches, (0,) + spatial + (1,) + kernel).reshape(cols, rows)
                prod = blas.gemm_from_python(col, wmat, trans_b=True)
            else:
                col = np.transpose(patches, (1,) + kernel + (0,) + spatial).reshape(rows, cols)
                prod = (np.stack([blas.gemm_from_python(
                    wmat, col[:, e * positions:(e + 1) * positions]) for e in range(block)])
                    if direct else blas.gemm_from_python(wmat, col))
            total = prod if total is None else prod + total
        if transposed:
            total = np.transpose(total.reshape(block, positions, og), (0, 2, 1))
        elif not direct:
            total = np.transpose(total.reshape(og, block, positions), (1, 0, 2))
        out[b0:b0 + block, gi * og:(gi + 1) * og] = total
    return out.reshape((nb, o, *ys))


def _conv_impl(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
               dimension_numbers, feature_group_count, batch_group_count,
               preferred_element_type):
    dn = dimension_numbers
    if preferred_element_type is not None:
        lhs = lhs.astype(preferred_element_type, copy=False)
        rhs = rhs.astype(preferred_element_type, copy=False)
    x, w = np.transpose(lhs, dn.lhs_spec), np.transpose(rhs, dn.rhs_spec)
    n, (o, i, *kernel) = x.shape[0], w.shape
    nsp = len(kernel)
    out_sizes = [_out_size(*a) for a in zip(x.shape[2:], kernel, window_strides, padding,
                                            lhs_dilation, rhs_dilation)]
    g, bg = feature_group_count, batch_group_count
    groups = g * bg
    nb, kk, y = n // bg, i * math.prod(kernel), math.prod(out_sizes)
    params = dict(window_strides=window_strides, padding=padding, lhs_dilation=lhs_dilation,
                  rhs_dilation=rhs_dilation, feature_group_count=g, batch_group_count=bg)
    native = (x.dtype == w.dtype and x.dtype in (np.float32, np.float64)
              and blas.available())     # else the jit runs this impl too
    if 0 in x.shape or 0 in w.shape or y == 0:
        out = np.zeros((nb, o, *out_sizes), np.result_type(x, w))
    elif native and runs_lanes(nb, w.shape, out_sizes, params, x.dtype):
        out = _lane_sums(x, w, padding, window_strides, rhs_dilation, out_sizes)
    elif native and runs_channels_last(w.shape, out_sizes, params):
        out = _channels_last_sums(x, w, padding, out_sizes)
    elif native and runs_shifted(w.shape, out_sizes, params):
        out = _shifted_sums(x, w, padding, rhs_dilation, out_sizes)
    elif native:
        win = _windows(x, kernel, window_strides, padding, lhs_dilation, rhs_dilation, out_sizes)
        canonical = out_is_canonical(dn.out_spec, (nb, o, *out_sizes))
        out = _im2col_sums(win, w, g, bg, im2col_plan(w.shape, nb, out_sizes, canonical))
    else:
        win = _windows(x, kernel, window_strides, padding, lhs_dilation, rhs_dilation, out_sizes)
        # (bg, nb, g, i, *y, *k) -> (groups, nb·y, i·k): one matmul per group
        win = win.reshape((bg, nb, g, i) + win.shape[2:])
        perm = (0, 2, 1) + tuple(range(4, 4 + nsp)) + (3,) + tuple(range(4 + nsp, 4 + 2 * nsp))
        cols = np.transpose(win, perm).reshape(groups, nb * y, kk)
        wmat = np.transpose(w.reshape(groups, o // groups, kk), (0, 2, 1))
        prod = np.matmul(cols, wmat)                     # (groups, nb·y, o/groups)
        out = np.transpose(prod.reshape(groups, nb, y, o // groups), (1, 0, 3, 2))
        out = out.reshape((nb, o, *out_sizes))
    return np.ascontiguousarray(np.transpose(out, np.argsort(dn.out_spec)))


conv_general_dilated_p = Primitive("conv_general_dilated")
conv_general_dilated_p.impl = _conv_impl
conv_general_dilated_p.abstract_eval = _conv_abstract_eval
defjvp(conv_general_dilated_p,
       lambda g, ans, lhs, rhs, **params: conv_general_dilated_p.bind(g, rhs, **params),
       lambda g, ans, lhs, rhs, **params: conv_general_dilated_p.bind(lhs, g, **params))


# ----------------------------------------------------------------------------
# Rules in the canonical layout

def _canonical_dn(ndim):
    axes = tuple(range(ndim))
    return ConvDimensionNumbers(axes, axes, axes)


def _to(x, spec):
    """x's axes in the order `spec` (nothing happens when that is already so)."""
    spec = tuple(spec)
    return x if spec == tuple(range(len(spec))) else transpose(x, spec)


def _from(x, spec):
    """The inverse of `_to`: canonical x back into the layout `spec` describes."""
    spec = tuple(spec)
    return x if spec == tuple(range(len(spec))) else transpose(x, tuple(np.argsort(spec)))


def _bind(lhs, rhs, strides, padding, lhs_dil, rhs_dil, groups=1, batch_groups=1, dn=None):
    return conv_general_dilated_p.bind(
        lhs, rhs, window_strides=tuple(strides), padding=tuple(map(tuple, padding)),
        lhs_dilation=tuple(lhs_dil), rhs_dilation=tuple(rhs_dil),
        dimension_numbers=dn or _canonical_dn(len(lhs.shape)), feature_group_count=groups,
        batch_group_count=batch_groups, preferred_element_type=None)


def _swap_in_groups(w, groups):
    """(O, I, *k) -> (groups·I, O/groups, *k): within each group of output features,
    in and out features trade places."""
    o, i, *k = w.shape
    w = reshape(w, (groups, o // groups, i, *k))
    w = transpose(w, (0, 2, 1) + tuple(range(3, 3 + len(k))))
    return reshape(w, (groups * i, o // groups, *k))


def _swapped(spec):
    """A spec with its first two roles exchanged (batch <-> feature, out <-> in)."""
    return (spec[1], spec[0]) + tuple(spec[2:])


def _lhs_cotangent(ct, w, dn, lhs_shape, strides, padding, lhs_dil, rhs_dil, g, bg):
    """Cotangent of lhs (canonical shape `lhs_shape`) from ct and w in their layouts."""
    nsp = len(strides)
    kernel = [w.shape[d] for d in dn.rhs_spec[2:]]
    ys = [ct.shape[d] for d in dn.out_spec[2:]]
    pads = []
    for k, x, y, s, (lo, _), ld, rd in zip(kernel, lhs_shape[2:], ys, strides, padding,
                                           lhs_dil, rhs_dil):
        pads.append((_dilate(k, rd) - 1 - lo, _dilate(x, ld) + lo - 1 - (y - 1) * s))
    groups = max(g, bg)
    if groups == 1:     # in/out features trade places through the dimension numbers
        flipped = rev(w, dn.rhs_spec[2:])
        return _bind(ct, flipped, lhs_dil, pads, strides, rhs_dil,
                     dn=ConvDimensionNumbers(dn.out_spec, _swapped(dn.rhs_spec), dn.lhs_spec))
    # groups: the kernel's features are regrouped in the canonical layout (rev last:
    # the jit backend copies a lone rev natively, not a view of one)
    spatial = tuple(range(2, 2 + nsp))
    flipped = rev(_swap_in_groups(_to(w, dn.rhs_spec), groups), spatial)
    out = _bind(_to(ct, dn.out_spec), flipped, lhs_dil, pads, strides, rhs_dil, groups=groups)
    if bg > 1:      # (N/bg, bg·C, *x) -> (bg·N/bg, C, *x): batch groups are major
        nb, _, *rest = out.shape
        c = lhs_shape[1]
        out = reshape(out, (nb, bg, c, *rest))
        out = transpose(out, (1, 0) + tuple(range(2, 3 + nsp)))
        out = reshape(out, (bg * nb, c, *rest))
    return _from(out, dn.lhs_spec)


def _rhs_cotangent(ct, x, dn, rhs_shape, strides, padding, lhs_dil, rhs_dil, g, bg):
    """Cotangent of rhs (canonical shape `rhs_shape`) from ct and x in their layouts:
    x's features act as the batch and its examples as the features, ct is the
    kernel with its examples as in-features, and the output is rhs's layout with
    out/in features as batch/features. Dimension numbers say so: nothing moves."""
    xs = [x.shape[d] for d in dn.lhs_spec[2:]]
    ys = [ct.shape[d] for d in dn.out_spec[2:]]
    pads = []
    for k, xsz, y, s, (lo, hi), ld, rd in zip(rhs_shape[2:], xs, ys, strides, padding,
                                              lhs_dil, rhs_dil):
        spare = _dilate(xsz, ld) + lo + hi - _dilate(k, rd) - (y - 1) * s   # unread tail
        pads.append((lo, hi - spare))
    trans = ConvDimensionNumbers(_swapped(dn.lhs_spec), _swapped(dn.out_spec),
                                 _swapped(dn.rhs_spec))
    return _bind(x, ct, rhs_dil, pads, lhs_dil, strides, groups=bg, batch_groups=g, dn=trans)


def _conv_transpose_rule(ct, lhs, rhs, *, window_strides, padding, lhs_dilation,
                         rhs_dilation, dimension_numbers, feature_group_count,
                         batch_group_count, preferred_element_type):
    if is_undefined(lhs) and is_undefined(rhs):
        raise TypeError("conv_general_dilated of two linear values is not linear and "
                        "cannot be transposed")
    dn = dimension_numbers
    args = (window_strides, padding, lhs_dilation, rhs_dilation, feature_group_count,
            batch_group_count)
    aval = lhs.aval if is_undefined(lhs) else rhs.aval
    if ct.dtype != aval.dtype:
        ct = convert_element_type(ct, aval.dtype)
    if is_undefined(lhs):
        shape = tuple(aval.shape[d] for d in dn.lhs_spec)
        return [_lhs_cotangent(ct, rhs, dn, shape, *args), None]
    shape = tuple(aval.shape[d] for d in dn.rhs_spec)
    return [None, _rhs_cotangent(ct, lhs, dn, shape, *args)]


conv_general_dilated_p.transpose = _conv_transpose_rule


def _conv_batch(vals, dims, *, window_strides, padding, lhs_dilation, rhs_dilation,
                dimension_numbers, feature_group_count, batch_group_count,
                preferred_element_type):
    """The vmapped axis folds into a convolution axis of the canonical layout:
    lhs only -> its batch, rhs only -> its out features, both -> feature groups
    (or batch groups when there are some), split out of the output again."""
    from ..batching import axis_size_of, moveaxis
    (lhs, rhs), (ld, rd) = vals, dims
    dn = dimension_numbers
    v = axis_size_of(vals, dims)
    g, bg = feature_group_count, batch_group_count
    nsp = len(window_strides)

    def canon(x, bdim, spec):   # (V, canonical axes...) for a batched operand
        x = moveaxis(x, bdim, 0)
        return _to(x, (0,) + tuple(d + 1 for d in spec))

    def bind(l, r, groups, batch_groups):
        return conv_general_dilated_p.bind(
            l, r, window_strides=window_strides, padding=padding, lhs_dilation=lhs_dilation,
            rhs_dilation=rhs_dilation, dimension_numbers=_canonical_dn(nsp + 2),
            feature_group_count=groups, batch_group_count=batch_groups,
            preferred_element_type=preferred_element_type)

    if ld is not None and rd is None:
        x, w = canon(lhs, ld, dn.lhs_spec), _to(rhs, dn.rhs_spec)
        _, n, c, *xs = x.shape
        # batch (bg, V, N/bg): each batch group keeps its examples together
        x = reshape(x, (v, bg, n // bg, c, *xs))
        x = reshape(transpose(x, (1, 0) + tuple(range(2, 4 + nsp))), (bg * v * (n // bg), c, *xs))
        out = bind(x, w, g, bg)
        nb, o, *ys = out.shape
        out = reshape(out, (v, nb // v, o, *ys))
    elif ld is None:
        x, w = _to(lhs, dn.lhs_spec), canon(rhs, rd, dn.rhs_spec)
        _, o, i, *ks = w.shape
        groups = max(g, bg)
        # out features (groups, V, O/groups)
        w = reshape(w, (v, groups, o // groups, i, *ks))
        w = reshape(transpose(w, (1, 0) + tuple(range(2, 4 + nsp))), (v * o, i, *ks))
        out = bind(x, w, g, bg)
        nb, _, *ys = out.shape
        out = reshape(out, (nb, groups, v, o // groups, *ys))
        out = reshape(transpose(out, (2, 0, 1) + tuple(range(3, 4 + nsp))), (v, nb, o, *ys))
    else:
        x, w = canon(lhs, ld, dn.lhs_spec), canon(rhs, rd, dn.rhs_spec)
        _, n, c, *xs = x.shape
        _, o, i, *ks = w.shape
        w = reshape(w, (v * o, i, *ks))
        if bg > 1:      # batch groups (V, bg, N/bg)
            x = reshape(x, (v * n, c, *xs))
            out = bind(x, w, 1, v * bg)
        else:           # feature groups (V, g, C/g)
            x = reshape(transpose(x, (1, 0) + tuple(range(2, 3 + nsp))), (n, v * c, *xs))
            out = bind(x, w, v * g, 1)
        nb, _, *ys = out.shape
        out = transpose(reshape(out, (nb, v, o, *ys)), (1, 0) + tuple(range(2, 3 + nsp)))
    return _from(out, (0,) + tuple(d + 1 for d in dn.out_spec)), 0


conv_general_dilated_p.batch = _conv_batch


# ----------------------------------------------------------------------------
# Public functions

def _spec_perm(spec, first, second, order):
    """Axis positions (first, second, spatial in `order`'s letter order) of a string spec."""
    spatial = sorted((j for j, ch in enumerate(spec) if ch not in (first, second)),
                     key=lambda j: order.index(spec[j]))
    return (spec.index(first), spec.index(second), *spatial)


def conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers):
    """ConvDimensionNumbers from None (canonical NC..., OI..., NC...), a
    ConvDimensionNumbers, or three strings like ('NHWC', 'HWIO', 'NHWC'); spatial
    dims pair up by letter, in the order they appear in the rhs string."""
    ndim = len(lhs_shape)
    if len(rhs_shape) != ndim:
        raise FgradTypeError(f"conv_general_dilated: lhs of rank {ndim} and rhs of rank "
                             f"{len(rhs_shape)}", hint="both operands need the same rank")
    if dimension_numbers is None:
        return _canonical_dn(ndim)
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return ConvDimensionNumbers(*(tuple(int(d) for d in s) for s in dimension_numbers))
    try:
        lhs, rhs, out = dimension_numbers
    except (TypeError, ValueError):
        lhs = None
    if not all(isinstance(s, str) for s in (lhs, rhs, out)):
        if all(isinstance(s, (tuple, list)) for s in (lhs, rhs, out)):
            return ConvDimensionNumbers(*(tuple(int(d) for d in s) for s in (lhs, rhs, out)))
        raise FgradTypeError(f"conv_general_dilated: dimension_numbers={dimension_numbers!r}",
                             hint="use None, a ConvDimensionNumbers or three strings such "
                                  "as ('NCHW', 'OIHW', 'NCHW')")
    spatial = [ch for ch in rhs if ch not in "OI"]
    ok = (len(lhs) == len(rhs) == len(out) == ndim
          and sorted(lhs) == sorted(out) == sorted(["N", "C", *spatial])
          and sorted(rhs) == sorted(["O", "I", *spatial]) and len(set(rhs)) == ndim)
    if not ok:
        raise FgradTypeError(f"conv_general_dilated: dimension_numbers {dimension_numbers!r} "
                             f"do not fit operands of rank {ndim}",
                             hint="lhs and out strings use N, C and the spatial letters, rhs "
                                  "uses O, I and the same spatial letters, once each")
    return ConvDimensionNumbers(_spec_perm(lhs, "N", "C", rhs), _spec_perm(rhs, "O", "I", rhs),
                                _spec_perm(out, "N", "C", rhs))


def _ints(name, value, count, default):
    if value is None:
        return (default,) * count
    value = tuple(int(v) for v in value)
    if len(value) != count:
        raise FgradTypeError(f"conv_general_dilated: {name}={value} for {count} spatial dims",
                             hint=f"give one value per spatial dimension ({count})")
    return value


def padtype_to_pads(in_shape, window_shape, window_strides, padding):
    """(lo, hi) per dim for 'VALID', 'SAME' (output ceil(in / stride), the odd one at
    the end) or 'SAME_LOWER' (the odd one at the start)."""
    kind = padding.upper()
    if kind == "VALID":
        return tuple((0, 0) for _ in in_shape)
    if kind not in ("SAME", "SAME_LOWER"):
        raise FgradTypeError(f"conv_general_dilated: padding={padding!r}",
                             hint="use 'SAME', 'SAME_LOWER', 'VALID' or (lo, hi) pairs")
    pads = []
    for n, k, s in zip(in_shape, window_shape, window_strides):
        total = max((-(-n // s) - 1) * s + k - n, 0)
        small, big = total // 2, total - total // 2
        pads.append((small, big) if kind == "SAME" else (big, small))
    return tuple(pads)


def conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=None,
                         rhs_dilation=None, dimension_numbers=None, feature_group_count=1,
                         batch_group_count=1, precision=None, preferred_element_type=None):
    """General N-d convolution (cross-correlation); see the module docstring.
    `padding`: (lo, hi) pairs, or 'SAME' / 'SAME_LOWER' / 'VALID' (computed from
    the undilated input and the dilated kernel). `precision` is accepted for JAX
    compatibility and ignored: sums run in the operands' dtype (or
    preferred_element_type)."""
    la, ra = get_aval(lhs), get_aval(rhs)
    dn = conv_dimension_numbers(la.shape, ra.shape, dimension_numbers)
    nsp = len(la.shape) - 2
    strides = _ints("window_strides", window_strides, nsp, 1)
    lhs_dil = _ints("lhs_dilation", lhs_dilation, nsp, 1)
    rhs_dil = _ints("rhs_dilation", rhs_dilation, nsp, 1)
    if isinstance(padding, str):
        xs = [la.shape[d] for d in dn.lhs_spec[2:]]
        ks = [_dilate(ra.shape[d], r) for d, r in zip(dn.rhs_spec[2:], rhs_dil)]
        pads = padtype_to_pads(xs, ks, strides, padding)
    else:
        try:
            pads = tuple((int(lo), int(hi)) for lo, hi in padding)
        except (TypeError, ValueError):
            pads = None
        if pads is None or len(pads) != nsp:
            raise FgradTypeError(f"conv_general_dilated: padding={padding!r}",
                                 hint=f"give {nsp} (lo, hi) pairs or 'SAME'/'VALID'")
    if preferred_element_type is not None:
        preferred_element_type = dtypes.canonicalize(preferred_element_type)
        if preferred_element_type == la.dtype:
            preferred_element_type = None
    params = dict(window_strides=strides, padding=pads, lhs_dilation=lhs_dil,
                  rhs_dilation=rhs_dil, dimension_numbers=dn,
                  feature_group_count=int(feature_group_count),
                  batch_group_count=int(batch_group_count),
                  preferred_element_type=preferred_element_type)
    _conv_abstract_eval(la, ra, **params)     # errors here, before any rule runs
    return conv_general_dilated_p.bind(lhs, rhs, **params)


def conv(lhs, rhs, window_strides, padding, precision=None, preferred_element_type=None):
    """Convolution in the canonical layout (N, C, spatial) x (O, I, spatial)."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_with_general_padding(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                              precision=None, preferred_element_type=None):
    """Canonical-layout convolution with explicit padding and both dilations."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                                precision=precision,
                                preferred_element_type=preferred_element_type)


def _conv_transpose_pads(kernel, stride, padding):
    """(lo, hi) for a transposed convolution's 'SAME' (output in·stride) or 'VALID'
    (output in·stride + max(kernel - stride, 0)) padding, kernel already dilated."""
    if padding == "SAME":
        total = kernel + stride - 2
        lo = kernel - 1 if stride > kernel - 1 else -(-total // 2)
    else:
        total = kernel + stride - 2 + max(kernel - stride, 0)
        lo = kernel - 1
    return lo, total - lo


def conv_transpose(lhs, rhs, strides, padding, rhs_dilation=None, dimension_numbers=None,
                   transpose_kernel=False, precision=None, preferred_element_type=None):
    """Transposed convolution: the input dilated by `strides`, then convolved.
    Default layout is channels-last ('NHC'/'HIO', 'NHWC'/'HWIO', 'NHWDC'/'HWDIO').
    `padding`: 'SAME', 'VALID' or (lo, hi) pairs applied to the dilated input.
    transpose_kernel=True flips the kernel's spatial dims and swaps its in/out
    features, giving the gradient of conv_general_dilated with the same kernel."""
    ndim = len(get_aval(lhs).shape)
    if dimension_numbers is None:
        defaults = {3: ("NHC", "HIO", "NHC"), 4: ("NHWC", "HWIO", "NHWC"),
                    5: ("NHWDC", "HWDIO", "NHWDC")}
        if ndim not in defaults:
            raise FgradTypeError(f"conv_transpose: no default layout for rank {ndim}",
                                 hint="pass dimension_numbers")
        dimension_numbers = defaults[ndim]
    dn = conv_dimension_numbers(get_aval(lhs).shape, get_aval(rhs).shape, dimension_numbers)
    nsp = ndim - 2
    rhs_dil = _ints("rhs_dilation", rhs_dilation, nsp, 1)
    strides = _ints("strides", strides, nsp, 1)
    kernel = [_dilate(get_aval(rhs).shape[d], r) for d, r in zip(dn.rhs_spec[2:], rhs_dil)]
    if isinstance(padding, str):
        if padding.upper() not in ("SAME", "VALID"):
            raise FgradTypeError(f"conv_transpose: padding={padding!r}",
                                 hint="use 'SAME', 'VALID' or (lo, hi) pairs")
        padding = tuple(_conv_transpose_pads(k, s, padding.upper())
                        for k, s in zip(kernel, strides))
    if transpose_kernel:
        rhs = rev(rhs, dn.rhs_spec[2:])
        perm = list(range(ndim))
        perm[dn.rhs_spec[0]], perm[dn.rhs_spec[1]] = dn.rhs_spec[1], dn.rhs_spec[0]
        rhs = transpose(rhs, tuple(perm))
    return conv_general_dilated(lhs, rhs, (1,) * nsp, padding, strides, rhs_dil, dn,
                                precision=precision,
                                preferred_element_type=preferred_element_type)
