"""lax.conv_general_dilated and the functions on it: values against a direct-loop
reference written here, both gradients (check_grads, order 2, float64), jit
against eager, layouts, padding strings, conv_transpose, and errors."""
import itertools

import numpy as np
import pytest

import fgrad
from fgrad import lax
from fgrad import FgradTypeError
from fgrad.test_util import check_grads


def reference(x, w, strides, pads, lhs_dil, rhs_dil, groups=1, batch_groups=1):
    """Canonical (N, C, *xs) x (O, I, *ks) convolution by direct loops in float64."""
    n, c, *xs = x.shape
    o, i, *ks = w.shape
    nsp = len(xs)
    dil = [(s - 1) * d + 1 for s, d in zip(xs, lhs_dil)]
    span = [(k - 1) * d + 1 for k, d in zip(ks, rhs_dil)]
    ys = [max(0, (dd + lo + hi - sp) // st + 1) if dd + lo + hi >= sp else 0
          for dd, (lo, hi), sp, st in zip(dil, pads, span, strides)]
    nb, per_out = n // batch_groups, o // max(groups, batch_groups)
    out = np.zeros((nb, o, *ys))
    for b, oc in itertools.product(range(nb), range(o)):
        grp = oc // per_out
        src = b + (grp * nb if batch_groups > 1 else 0)
        c0 = grp * i if groups > 1 else 0
        for y in itertools.product(*map(range, ys)):
            total = 0.0
            for ci, k in itertools.product(range(i), itertools.product(*map(range, ks))):
                pos = [y[d] * strides[d] + k[d] * rhs_dil[d] - pads[d][0] for d in range(nsp)]
                if all(0 <= p < dd and p % ld == 0 for p, dd, ld in zip(pos, dil, lhs_dil)):
                    idx = tuple(p // ld for p, ld in zip(pos, lhs_dil))
                    total += x[(src, c0 + ci) + idx] * w[(oc, ci) + k]
            out[(b, oc) + y] = total
    return out


# (x shape, w shape, strides, pads, lhs_dil, rhs_dil, groups, batch_groups)
CASES = {
    "1d_plain": ((2, 3, 9), (4, 3, 3), (1,), ((0, 0),), (1,), (1,), 1, 1),
    "1d_stride_pad": ((2, 2, 10), (3, 2, 4), (3,), ((2, 1),), (1,), (1,), 1, 1),
    "2d_all": ((2, 4, 7, 6), (6, 2, 3, 2), (2, 1), ((1, 2), (0, 1)), (1, 2), (2, 1), 2, 1),
    "2d_depthwise": ((1, 3, 6, 5), (6, 1, 3, 3), (1, 2), ((1, 1), (1, 1)), (1, 1), (1, 1), 3, 1),
    "2d_negative_pad": ((2, 2, 8, 7), (2, 2, 2, 3), (1, 1), ((-1, 2), (1, -2)), (1, 1), (1, 1),
                        1, 1),
    "2d_lhs_dil": ((1, 2, 4, 5), (3, 2, 3, 3), (1, 2), ((2, 2), (1, 0)), (2, 3), (1, 1), 1, 1),
    "2d_batch_groups": ((4, 3, 5, 5), (6, 3, 2, 2), (1, 1), ((0, 1), (1, 0)), (1, 1), (1, 1),
                        1, 2),
    "3d": ((1, 2, 4, 5, 3), (2, 1, 2, 3, 2), (1, 2, 1), ((1, 0), (0, 1), (1, 1)), (1, 1, 1),
           (1, 1, 2), 2, 1),
    "2d_empty_out": ((1, 1, 2, 2), (1, 1, 3, 3), (1, 1), ((0, 0), (0, 0)), (1, 1), (1, 1), 1, 1),
    # a kernel far larger than the output (a weight gradient's shape): the native kernel
    # lays its columns out transposed
    # unit strides, 16 features: the native kernel runs shifted gemms (no im2col)
    "2d_shifted": ((2, 16, 5, 12), (16, 16, 3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), (2, 1),
                   1, 1),
    "2d_big_kernel": ((2, 3, 10, 10), (2, 3, 9, 5), (1, 2), ((1, 0), (0, 1)), (1, 1), (1, 2),
                      1, 1),
    # shifted gemms whose copies per offset along the kernel's last dim are read with
    # rhs dilation, gathered two offsets per gemm (2 groups), one per gemm (3 groups),
    # in 1-d and in 3-d
    "2d_shifted_dilated": ((2, 20, 6, 30), (16, 20, 2, 3), (1, 1), ((1, 0), (2, 1)), (1, 1),
                           (1, 2), 1, 1),
    "2d_shifted_two_groups": ((1, 128, 3, 24), (4, 128, 1, 4), (1, 1), ((0, 0), (2, 1)),
                              (1, 1), (1, 1), 1, 1),
    "2d_shifted_three_groups": ((1, 96, 4, 20), (8, 96, 3, 3), (1, 1), ((1, 1), (1, 1)),
                                (1, 1), (1, 1), 1, 1),
    "1d_shifted": ((2, 16, 40), (8, 16, 3), (1,), ((1, 1),), (1,), (1,), 1, 1),
    "3d_shifted": ((1, 16, 3, 3, 60), (4, 16, 2, 2, 3), (1, 1, 1), ((0, 0), (0, 0), (1, 1)),
                   (1, 1, 1), (1, 1, 1), 1, 1),
    # a weight gradient's shape with whole vectors of examples: lane products (the
    # examples across the vectors), with window strides and rhs dilation
    "2d_lanes": ((16, 3, 12, 11), (4, 3, 10, 10), (1, 1), ((1, 1), (1, 0)), (1, 1), (1, 1),
                 1, 1),
    "2d_lanes_strided": ((32, 2, 14, 13), (5, 2, 12, 5), (2, 1), ((0, 2), (1, 1)), (1, 1),
                         (1, 3), 1, 1),
    # unit strides and dilations, output features in multiples of 16: channels-last
    # lane products (the output features across the vectors), with uneven padding
    "2d_channels_last": ((2, 16, 5, 20), (16, 16, 3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1),
                         (1, 1), 1, 1),
    "2d_channels_last_uneven": ((3, 20, 6, 16), (32, 20, 2, 3), (1, 1), ((1, 0), (0, 2)),
                                (1, 1), (1, 1), 1, 1),
    # as 2d_channels_last on narrower rows: too many wide positions, shifted gemms
    "2d_shifted_narrow": ((2, 16, 5, 7), (16, 16, 3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1),
                          (1, 1), 1, 1),
}
# the cases above that run lane products (in float32 and float64)
LANES = {"2d_lanes", "2d_lanes_strided"}
# the cases above that run channels-last lane products (in float32 and float64)
CHANNELS_LAST = {"2d_channels_last", "2d_channels_last_uneven"}
# the cases above that run shifted gemms, with the offsets along the kernel's last dim
# that one gemm takes (shifted_stack)
SHIFTED = {"2d_shifted": 3, "2d_shifted_dilated": 3, "2d_shifted_two_groups": 2,
           "2d_shifted_three_groups": 1, "1d_shifted": 3, "3d_shifted": 3,
           "2d_shifted_narrow": 3}
# the cases whose shape shifted gemms take, run as channels-last lane products instead
SHIFTED.update({name: 3 for name in CHANNELS_LAST})


def _draw(case, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    xs, ws = case[:2]
    return rng.standard_normal(xs).astype(dtype), rng.standard_normal(ws).astype(dtype)


def _call(case):
    _, _, strides, pads, ld, rd, g, bg = case
    return lambda x, w: lax.conv_general_dilated(x, w, strides, pads, ld, rd,
                                                 feature_group_count=g, batch_group_count=bg)


@pytest.mark.parametrize("name", CASES)
def test_values_match_direct_loops(name):
    case = CASES[name]
    x, w = _draw(case)
    got = np.asarray(_call(case)(x, w))
    np.testing.assert_allclose(got, reference(x, w, *case[2:]), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", CASES)
def test_jitted_values_match_direct_loops(name):
    """Every case through the native kernel (float64: dgemm's rounding only)."""
    case = CASES[name]
    x, w = _draw(case, seed=4)
    got = np.asarray(fgrad.jit(_call(case))(x, w))
    np.testing.assert_allclose(got, reference(x, w, *case[2:]), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["1d_stride_pad", "2d_all", "2d_lhs_dil", "2d_batch_groups",
                                  "2d_negative_pad", "3d", "2d_lanes", "2d_channels_last"])
def test_gradients_order_two(name):
    case = CASES[name]
    x, w = _draw(case, seed=1)
    f = _call(case)
    check_grads(f, (x, w), order=2, modes=("fwd", "rev"))


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_jit_equals_eager_bit_for_bit(name, dtype):
    """The impl follows the native kernel's products (plans, gemm shapes, the order
    chunks and kernel offsets are added in), so the bits agree."""
    case = CASES[name]
    x, w = _draw(case, dtype, seed=2)
    f = _call(case)
    jitted = np.asarray(fgrad.jit(f)(x, w))
    np.testing.assert_array_equal(jitted, np.asarray(f(x, w)))
    ref = reference(x.astype(np.float64), w.astype(np.float64), *case[2:])
    np.testing.assert_allclose(jitted, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", CASES)
def test_jitted_gradients_equal_eager(name):
    case = CASES[name]
    x, w = _draw(case, np.float32, seed=3)
    f = _call(case)
    ct = np.random.default_rng(4).standard_normal(np.shape(f(x, w))).astype(np.float32)

    def pullback(x, w, ct):
        return fgrad.vjp(f, x, w)[1](ct)
    for a, b in zip(fgrad.jit(pullback)(x, w, ct), pullback(x, w, ct)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("name", CASES)
def test_cases_take_the_shifted_gemms_named(name):
    """SHIFTED names exactly the cases the native kernel runs as shifted gemms, and
    how many kernel offsets each gemm stacks."""
    from fgrad._src.lax.convolution import _out_size, runs_shifted, shifted_stack
    xs, ws, strides, pads, ld, rd, g, bg = CASES[name]
    ys = [_out_size(*a) for a in zip(xs[2:], ws[2:], strides, pads, ld, rd)]
    params = dict(window_strides=strides, padding=pads, lhs_dilation=ld, rhs_dilation=rd,
                  feature_group_count=g, batch_group_count=bg)
    assert runs_shifted(ws, ys, params) == (name in SHIFTED)
    if name in SHIFTED:
        assert shifted_stack(ws[1], ws[-1]) == SHIFTED[name]


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cases_take_the_lane_products_named(name, dtype):
    """LANES names exactly the cases the native kernel runs as lane products."""
    from fgrad._src.lax.convolution import _out_size, runs_lanes
    xs, ws, strides, pads, ld, rd, g, bg = CASES[name]
    ys = [_out_size(*a) for a in zip(xs[2:], ws[2:], strides, pads, ld, rd)]
    params = dict(window_strides=strides, padding=pads, lhs_dilation=ld, rhs_dilation=rd,
                  feature_group_count=g, batch_group_count=bg)
    assert runs_lanes(xs[0] // bg, ws, ys, params, dtype) == (name in LANES)


@pytest.mark.parametrize("name", CASES)
def test_cases_take_the_channels_last_products_named(name):
    """CHANNELS_LAST names exactly the cases the native kernel runs as
    channels-last lane products (in either dtype)."""
    from fgrad._src.lax.convolution import _out_size, runs_channels_last
    xs, ws, strides, pads, ld, rd, g, bg = CASES[name]
    ys = [_out_size(*a) for a in zip(xs[2:], ws[2:], strides, pads, ld, rd)]
    params = dict(window_strides=strides, padding=pads, lhs_dilation=ld, rhs_dilation=rd,
                  feature_group_count=g, batch_group_count=bg)
    assert runs_channels_last(ws, ys, params) == (name in CHANNELS_LAST)


def test_lane_products_in_any_layout():
    """Lane products read and write every layout the dimension numbers give (a
    weight gradient's, channels last), jit and eager alike."""
    rng = np.random.default_rng(12)
    x = rng.standard_normal((16, 11, 12, 3)).astype(np.float32)      # N H W C
    w = rng.standard_normal((10, 3, 4, 10)).astype(np.float32)       # H I O W
    f = lambda x, w: lax.conv_general_dilated(  # noqa: E731
        x, w, (1, 1), ((1, 0), (0, 1)), dimension_numbers=("NHWC", "HIOW", "CHWN"))
    got = np.asarray(f(x, w))
    np.testing.assert_array_equal(np.asarray(fgrad.jit(f)(x, w)), got)
    want = reference(np.transpose(x, (0, 3, 1, 2)).astype(np.float64),
                     np.transpose(w, (2, 1, 0, 3)).astype(np.float64), (1, 1),
                     ((1, 0), (0, 1)), (1, 1), (1, 1))
    np.testing.assert_allclose(np.transpose(got, (3, 0, 1, 2)), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["2d_shifted", "2d_channels_last"])
def test_shifted_gemms_in_any_layout(name):
    """Forward and input gradient through the shifted-gemm and the channels-last
    kernels, in NCHW and in NHWC/HWIO, against direct loops; jit equals eager bit
    for bit."""
    case = CASES[name]
    x, w = _draw(case, seed=5)
    _, _, strides, pads, ld, rd, _, _ = case
    want = reference(x, w, *case[2:])

    def nhwc(x, w):
        return lax.conv_general_dilated(x, w, strides, pads, ld, rd, ("NHWC", "HWIO", "NHWC"))
    xt, wt = np.transpose(x, (0, 2, 3, 1)), np.transpose(w, (2, 3, 1, 0))
    np.testing.assert_allclose(np.asarray(fgrad.jit(nhwc)(xt, wt)),
                               np.transpose(want, (0, 2, 3, 1)), rtol=1e-12, atol=1e-12)
    for f, args in ((_call(case), (x, w)), (nhwc, (xt, wt))):
        ct = np.random.default_rng(6).standard_normal(np.shape(f(*args)))

        def pullback(x, w, ct):
            return fgrad.vjp(f, x, w)[1](ct)
        eager = pullback(*args, ct)
        jitted = fgrad.jit(pullback)(*args, ct)
        for a, b in zip(jitted, eager):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_array_equal(np.asarray(fgrad.jit(nhwc)(xt, wt)), np.asarray(nhwc(xt, wt)))


def test_dimension_number_strings_permute_axes():
    case = CASES["2d_all"]
    x, w = _draw(case)
    want = np.asarray(_call(case)(x, w))
    got = lax.conv_general_dilated(np.transpose(x, (0, 2, 3, 1)), np.transpose(w, (2, 3, 1, 0)),
                                   (2, 1), ((1, 2), (0, 1)), (1, 2), (2, 1),
                                   ("NHWC", "HWIO", "NHWC"), feature_group_count=2)
    np.testing.assert_allclose(np.asarray(got), np.transpose(want, (0, 2, 3, 1)), rtol=1e-12)
    dn = lax.conv_dimension_numbers(x.shape, w.shape, ("NCHW", "OIHW", "NHWC"))
    assert dn == lax.ConvDimensionNumbers((0, 1, 2, 3), (0, 1, 2, 3), (0, 3, 1, 2))
    # the spatial order comes from the rhs string: 'WH' in rhs swaps the spatial dims
    dn = lax.conv_dimension_numbers(x.shape, w.shape, ("NCHW", "OIWH", "NCHW"))
    assert dn.lhs_spec == (0, 1, 3, 2) and dn.rhs_spec == (0, 1, 2, 3)


def test_gradients_in_channels_last_layout():
    x, w = _draw(((2, 5, 4, 3), (2, 3, 3, 4), None), seed=4)
    f = lambda x, w: lax.conv_general_dilated(x, w, (2, 1), "SAME", None, (1, 2),  # noqa: E731
                                              ("NHWC", "HWIO", "NHWC"))
    check_grads(f, (x, w), order=2, modes=("fwd", "rev"))


@pytest.mark.parametrize("kind", ["SAME", "SAME_LOWER", "VALID"])
def test_padding_strings(kind):
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((1, 2, 7, 6)), rng.standard_normal((3, 2, 4, 3))
    strides, rd = (2, 3), (1, 2)
    got = np.asarray(lax.conv_general_dilated(x, w, strides, kind, rhs_dilation=rd))
    pads = []
    for n, k, s, d in zip((7, 6), (4, 3), strides, rd):
        span = (k - 1) * d + 1
        total = 0 if kind == "VALID" else max((-(-n // s) - 1) * s + span - n, 0)
        lo = total // 2 if kind == "SAME" else total - total // 2
        pads.append((lo, total - lo))
    np.testing.assert_allclose(got, reference(x, w, strides, pads, (1, 1), rd), rtol=1e-12)
    if kind != "VALID":
        assert got.shape[2:] == (4, 2)


def test_conv_and_general_padding_wrappers():
    x, w = _draw(CASES["2d_lhs_dil"])
    np.testing.assert_allclose(np.asarray(lax.conv(x, w, (1, 2), "VALID")),
                               reference(x, w, (1, 2), ((0, 0), (0, 0)), (1, 1), (1, 1)))
    got = lax.conv_with_general_padding(x, w, (1, 2), ((1, 0), (2, 1)), (2, 1), (1, 2))
    np.testing.assert_allclose(np.asarray(got),
                               reference(x, w, (1, 2), ((1, 0), (2, 1)), (2, 1), (1, 2)))


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_conv_transpose_is_the_input_gradient(padding):
    """conv_transpose(transpose_kernel=True) with stride s is the vjp of the strided
    convolution with the same kernel and padding string."""
    rng = np.random.default_rng(6)
    y = rng.standard_normal((2, 4, 3, 5))            # NHWC cotangent
    w = rng.standard_normal((3, 2, 2, 5))            # HWIO of the forward conv
    out = lax.conv_transpose(y, w, (2, 2), padding, transpose_kernel=True)

    def fwd(x):
        return lax.conv_general_dilated(x, w, (2, 2), padding, None, None,
                                        ("NHWC", "HWIO", "NHWC"))
    x = np.zeros(out.shape)
    assert fwd(x).shape == y.shape
    _, vjp = fgrad.vjp(fwd, x)
    np.testing.assert_allclose(np.asarray(out), np.asarray(vjp(y)[0]), rtol=1e-12, atol=1e-12)


def test_conv_transpose_shapes_and_values():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 3, 4, 2))       # NHWC
    w = rng.standard_normal((3, 2, 2, 3))       # HWIO
    for padding, want in [("SAME", (1, 6, 8, 3)), ("VALID", (1, 7, 8, 3))]:
        out = lax.conv_transpose(x, w, (2, 2), padding)
        assert out.shape == want
    out = np.asarray(lax.conv_transpose(x, w, (2, 2), "VALID"))
    ref = reference(np.transpose(x, (0, 3, 1, 2)), np.transpose(w, (3, 2, 0, 1)), (1, 1),
                    ((2, 2), (1, 1)), (2, 2), (1, 1))
    np.testing.assert_allclose(out, np.transpose(ref, (0, 2, 3, 1)), rtol=1e-12)


def test_preferred_element_type():
    x, w = _draw(CASES["1d_plain"], np.float32)
    out = lax.conv_general_dilated(x, w, (1,), "VALID", preferred_element_type=np.float64)
    assert out.dtype == np.float64
    np.testing.assert_allclose(np.asarray(out), reference(x.astype(float), w.astype(float), (1,),
                                                          ((0, 0),), (1,), (1,)), rtol=1e-12)


def test_integer_operands():
    rng = np.random.default_rng(8)
    x = rng.integers(-5, 5, (1, 2, 6)).astype(np.int32)
    w = rng.integers(-5, 5, (2, 2, 3)).astype(np.int32)
    out = lax.conv_general_dilated(x, w, (1,), "VALID")
    assert out.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(out),
                                  reference(x, w, (1,), ((0, 0),), (1,), (1,)).astype(np.int32))


@pytest.mark.parametrize("kwargs, match", [
    (dict(w=(4, 2, 3, 3)), "in-features"),
    (dict(window_strides=(0, 1)), "window_strides"),
    (dict(window_strides=(1,)), "window_strides"),
    (dict(padding=((1, 1),)), "padding"),
    (dict(padding="FULL"), "padding"),
    (dict(feature_group_count=2, batch_group_count=2), "at most one"),
    (dict(w=(3, 3, 3, 3), feature_group_count=1, batch_group_count=2), "divisible"),
    (dict(dimension_numbers=("NCHW", "OIHW", "NCH")), "dimension_numbers"),
    (dict(w_dtype=np.float32), "dtypes"),
])
def test_errors_name_the_problem(kwargs, match):
    x = np.zeros((3, 3, 5, 5))
    w = np.zeros(kwargs.pop("w", (4, 3, 3, 3)), kwargs.pop("w_dtype", np.float64))
    args = dict(window_strides=(1, 1), padding="VALID")
    args.update(kwargs)
    with pytest.raises(FgradTypeError, match=match):
        lax.conv_general_dilated(x, w, **args)


def test_vmap_over_both_operands_matches_a_loop():
    rng = np.random.default_rng(9)
    xs, ws = rng.standard_normal((3, 2, 4, 6, 5)), rng.standard_normal((3, 4, 2, 2, 3))
    f = lambda x, w: lax.conv_general_dilated(x, w, (2, 1), "SAME",  # noqa: E731
                                              feature_group_count=2)
    got = np.asarray(fgrad.vmap(f)(xs, ws))
    want = np.stack([np.asarray(f(a, b)) for a, b in zip(xs, ws)])
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("dn", [("NCHW", "OIHW", "NCHW"), ("NHWC", "HWIO", "NHWC"),
                                ("NCHW", "IOHW", "NHWC")])
def test_jit_runs_a_native_step_in_any_layout(dn):
    """The convolution and both its gradients lower to native steps (no NumPy step)
    and agree with eager, in the canonical layout and in others."""
    rng = np.random.default_rng(10)
    x = rng.standard_normal((3, 4, 6, 5)).astype(np.float32)
    w = rng.standard_normal((4, 4, 3, 2)).astype(np.float32)
    x = np.transpose(x, ["NCHW".index(ch) for ch in dn[0]])
    w = np.transpose(w, ["OIHW".index(ch) for ch in dn[1]])

    def loss(x, w):
        y = lax.conv_general_dilated(x, w, (2, 1), "SAME", None, (1, 2), dn)
        return fgrad.numpy.sum(y * y)
    g = fgrad.jit(fgrad.value_and_grad(loss, argnums=(0, 1)))
    text = g.lower(x, w).as_text()
    assert text.count("native:conv_general_dilated") == 3
    assert ": numpy:" not in text
    (v1, (gx1, gw1)), (v2, (gx2, gw2)) = g(x, w), fgrad.value_and_grad(loss, argnums=(0, 1))(x, w)
    for a, b in [(v1, v2), (gx1, gx2), (gw1, gw2)]:
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-4)


def test_jitted_weight_gradient_sums_row_chunks():
    """A weight gradient contracts over examples and positions: more rows than one
    gemm takes (convolution.K_ROWS), summed chunk by chunk; and a batch split into
    several blocks of examples. Both against float64."""
    from fgrad._src.lax import convolution as native
    rng = np.random.default_rng(11)
    x = rng.standard_normal((4, 3, 40, 36)).astype(np.float32)
    w = rng.standard_normal((5, 3, 3, 3)).astype(np.float32)
    ct = rng.standard_normal((4, 5, 20, 34)).astype(np.float32)

    def grads(x, w, ct):
        f = lambda x, w: lax.conv_general_dilated(x, w, (2, 1), ((1, 0), (0, 0)))  # noqa: E731
        return fgrad.vjp(f, x, w)[1](ct)
    assert 4 * 20 * 34 > native.K_ROWS
    got = fgrad.jit(grads)(x, w, ct)
    want = grads(x.astype(np.float64), w.astype(np.float64), ct.astype(np.float64))
    for a, b in zip(got, want):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-3)
