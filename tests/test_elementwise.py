"""Every element-wise primitive of fgrad/_src/lax/elementwise.py: eager values
against NumPy/SciPy, derivatives against finite differences (check_grads,
orders 1 and 2, forward and reverse) over broadcasting shapes, dtype rules,
integer/bitwise semantics, and the primitives with zero or special derivatives."""
import numpy as np
import pytest
import scipy.special

import fgrad
from fgrad import lax, nn
from fgrad._src.core import Primitive
from fgrad._src.lax import elementwise as ew
from fgrad.test_util import check_grads

# ----------------------------------------------------------------------------
# Input domains: each draws float64 values of a shape where the function is
# smooth (away from poles, branch cuts, kinks and ties).


def _u(lo, hi):
    return lambda rng, shape: rng.uniform(lo, hi, shape)


def _signed(lo, hi):
    """|x| in [lo, hi] with a random sign."""
    return lambda rng, shape: rng.uniform(lo, hi, shape) * rng.choice([-1.0, 1.0], shape)


def _normal(rng, shape):
    return rng.standard_normal(shape)


def _off_integer(rng, shape):
    """Values at least 0.2 away from every integer (and from half-integers'
    rounding ties for `round`)."""
    offset = rng.uniform(0.2, 0.4, shape) * rng.choice([-1.0, 1.0], shape)
    return rng.integers(-3, 4, shape) + offset


UNARY_SHAPES = [(), (3,), (2, 3)]
BINARY_SHAPES = [((), ()), ((3,), (3,)), ((2, 3), (3,)), ((2, 1), (1, 3)), ((), (2, 3))]


def _round_away(x):
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


# name -> (fgrad function, reference, domain)
UNARY = {
    "neg": (lax.neg, np.negative, _normal),
    "abs": (lax.abs, np.abs, _signed(0.3, 2.0)),
    "exp": (lax.exp, np.exp, _normal),
    "log": (lax.log, np.log, _u(0.5, 3.0)),
    "log1p": (lax.log1p, np.log1p, _u(-0.5, 2.0)),
    "expm1": (lax.expm1, np.expm1, _normal),
    "sin": (lax.sin, np.sin, _normal),
    "cos": (lax.cos, np.cos, _normal),
    "tan": (lax.tan, np.tan, _u(-1.2, 1.2)),
    "tanh": (lax.tanh, np.tanh, _normal),
    "sqrt": (lax.sqrt, np.sqrt, _u(0.5, 3.0)),
    "rsqrt": (lax.rsqrt, lambda x: 1 / np.sqrt(x), _u(0.5, 3.0)),
    "logistic": (lax.logistic, scipy.special.expit, _normal),
    "erf": (lax.erf, scipy.special.erf, _normal),
    "erf_inv": (lax.erf_inv, scipy.special.erfinv, _u(-0.8, 0.8)),
    "asin": (lax.asin, np.arcsin, _u(-0.8, 0.8)), "acos": (lax.acos, np.arccos, _u(-0.8, 0.8)),
    "atan": (lax.atan, np.arctan, _normal), "asinh": (lax.asinh, np.arcsinh, _normal),
    "acosh": (lax.acosh, np.arccosh, _u(1.2, 3.0)), "atanh": (lax.atanh, np.arctanh, _u(-0.8, 0.8)),
    "integer_pow_0": (lambda x: lax.integer_pow(x, 0), lambda x: x ** 0, _normal),
    "integer_pow_1": (lambda x: lax.integer_pow(x, 1), lambda x: x ** 1, _normal),
    "integer_pow_2": (lambda x: lax.integer_pow(x, 2), lambda x: x ** 2, _normal),
    "integer_pow_3": (lambda x: lax.integer_pow(x, 3), lambda x: x ** 3, _normal),
    "integer_pow_-2": (lambda x: lax.integer_pow(x, -2), lambda x: x ** -2.0, _signed(0.5, 2.0)),
    # Zero derivative almost everywhere (checked away from the jumps).
    "sign": (lax.sign, np.sign, _signed(0.3, 2.0)),
    "floor": (lax.floor, np.floor, _off_integer),
    "ceil": (lax.ceil, np.ceil, _off_integer),
    "round": (lax.round, _round_away, _off_integer),
    "round_even": (lambda x: lax.round(x, "to_nearest_even"), np.round, _off_integer),
}

# name -> (fgrad function, reference, domain of x, domain of y)
BINARY = {
    "add": (lax.add, np.add, _normal, _normal),
    "sub": (lax.sub, np.subtract, _normal, _normal),
    "mul": (lax.mul, np.multiply, _normal, _normal),
    "div": (lax.div, np.divide, _normal, _signed(0.5, 2.0)),
    # x/y stays inside (1.1, 1.95) in absolute value: away from fmod's jumps.
    "rem": (lax.rem, np.fmod, _signed(2.1, 2.9), _u(1.5, 1.9)),
    # |x| >= 1 and |y| <= 0.5: never tied, and each side wins somewhere.
    "max": (lax.max, np.maximum, _signed(1.0, 2.0), _u(-0.5, 0.5)),
    "min": (lax.min, np.minimum, _signed(1.0, 2.0), _u(-0.5, 0.5)),
    "pow": (lax.pow, np.power, _u(0.5, 2.0), _u(-1.5, 2.5)),
    "atan2": (lax.atan2, np.arctan2, _signed(0.5, 2.0), _signed(0.5, 2.0)),
}

ZERO_DERIVATIVE = {"sign", "floor", "ceil", "round", "round_even"}


def _draw(domain, shape, seed):
    return np.asarray(domain(np.random.default_rng(seed), shape), np.float64)


# ----------------------------------------------------------------------------
# Every primitive is covered by some test below.

COVERED = {
    "neg", "add", "sub", "mul", "div", "rem", "max", "min", "pow", "integer_pow", "abs",
    "sign", "floor", "ceil", "round", "exp", "log", "log1p", "expm1", "sin", "cos", "tan",
    "tanh", "atan2", "sqrt", "rsqrt", "logistic", "erf", "erf_inv",
    "eq", "ne", "lt", "le", "gt", "ge", "is_finite", "select_n", "convert_element_type",
    "bitcast_convert_type", "and", "or", "xor", "not", "shift_left", "shift_right_logical",
    "shift_right_arithmetic", "population_count", "stop_gradient",
    "real", "imag", "conj", "complex",  # and the complex forms of the others: test_complex.py
    "asin", "acos", "atan", "asinh", "acosh", "atanh",
}


def test_every_elementwise_primitive_is_covered():
    prims = {v.name for v in vars(ew).values() if isinstance(v, Primitive)}
    missing = prims - COVERED
    assert not missing, f"element-wise primitives without tests: {sorted(missing)}"


# ----------------------------------------------------------------------------
# Values and derivatives of float functions

@pytest.mark.parametrize("shape", UNARY_SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_value(name, shape):
    fn, ref, dom = UNARY[name]
    x = _draw(dom, shape, 1)
    out = fn(x)
    assert isinstance(out, fgrad.Array)
    assert out.dtype == np.float64 and out.shape == shape
    np.testing.assert_allclose(np.asarray(out), ref(x), rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("shape", UNARY_SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_grads(name, shape):
    fn, _, dom = UNARY[name]
    x = _draw(dom, shape, 2)
    check_grads(fn, (x,), order=2, modes=("fwd", "rev"))


@pytest.mark.parametrize("name", sorted(ZERO_DERIVATIVE))
def test_zero_derivative_ops_give_zero_gradients(name):
    fn, _, dom = UNARY[name]
    x = _draw(dom, (2, 3), 3)
    g = fgrad.grad(lambda x: lax.reduce_sum(fn(x), (0, 1)))(x)
    np.testing.assert_array_equal(np.asarray(g), np.zeros((2, 3)))
    _, t = fgrad.jvp(fn, (x,), (np.ones((2, 3)),))
    np.testing.assert_array_equal(np.asarray(t), np.zeros((2, 3)))


@pytest.mark.parametrize("shapes", BINARY_SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_value(name, shapes):
    fn, ref, dx, dy = BINARY[name]
    x, y = _draw(dx, shapes[0], 4), _draw(dy, shapes[1], 5)
    out = fn(x, y)
    expected = ref(x, y)
    assert out.dtype == np.float64 and out.shape == expected.shape
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("shapes", BINARY_SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_grads(name, shapes):
    fn, _, dx, dy = BINARY[name]
    x, y = _draw(dx, shapes[0], 6), _draw(dy, shapes[1], 7)
    check_grads(fn, (x, y), order=2, modes=("fwd", "rev"))


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_grad_shapes_follow_operands(name):
    """Reverse mode sums broadcast cotangents back down to each operand's shape."""
    fn, _, dx, dy = BINARY[name]
    x, y = _draw(dx, (2, 1), 8), _draw(dy, (1, 3), 9)
    gx, gy = fgrad.grad(lambda a, b: lax.reduce_sum(fn(a, b), (0, 1)), (0, 1))(x, y)
    assert gx.shape == (2, 1) and gy.shape == (1, 3)
    assert gx.dtype == np.float64 and gy.dtype == np.float64


@pytest.mark.parametrize("name,fn,expected", [
    ("mul", lambda x, y: lax.mul(x, y), lambda x, y: (y, x)),
    ("div", lambda x, y: lax.div(x, y), lambda x, y: (1 / y, -x / y ** 2)),
    ("pow", lambda x, y: lax.pow(x, y), lambda x, y: (y * x ** (y - 1), np.log(x) * x ** y)),
    ("atan2", lambda x, y: lax.atan2(x, y),
     lambda x, y: (y / (x * x + y * y), -x / (x * x + y * y))),
])
def test_binary_analytic_gradients(name, fn, expected):
    x, y = 1.3, 0.7
    g = fgrad.grad(fn, (0, 1))(np.float64(x), np.float64(y))
    np.testing.assert_allclose([float(g[0]), float(g[1])], expected(x, y), rtol=1e-12)


@pytest.mark.parametrize("fn,x,expected", [
    (lax.exp, 0.5, np.exp(0.5)),
    (lax.log, 2.0, 0.5),
    (lax.sin, 0.3, np.cos(0.3)),
    (lax.cos, 0.3, -np.sin(0.3)),
    (lax.tan, 0.3, 1 / np.cos(0.3) ** 2),
    (lax.tanh, 0.3, 1 - np.tanh(0.3) ** 2),
    (lax.sqrt, 4.0, 0.25),
    (lax.rsqrt, 4.0, -0.5 * 4.0 ** -1.5),
    (lax.log1p, 1.0, 0.5),
    (lax.expm1, 0.5, np.exp(0.5)),
    (lax.logistic, 0.3, scipy.special.expit(0.3) * (1 - scipy.special.expit(0.3))),
    (lax.erf, 0.3, 2 / np.sqrt(np.pi) * np.exp(-0.09)),
    (lax.erf_inv, 0.3, np.sqrt(np.pi) / 2 * np.exp(scipy.special.erfinv(0.3) ** 2)),
    (lax.abs, -2.0, -1.0),
    (lax.neg, 2.0, -1.0),
])
def test_unary_analytic_derivatives(fn, x, expected):
    assert float(fgrad.grad(fn)(np.float64(x))) == pytest.approx(expected, rel=1e-12)


def test_pow_gradient_at_zero_base_is_finite():
    """d/dy x**y at x = 0 must not be nan (log(0) * 0)."""
    gx, gy = fgrad.grad(lax.pow, (0, 1))(np.float64(0.0), np.float64(2.0))
    assert float(gx) == 0.0 and float(gy) == 0.0


def test_logistic_is_stable_for_large_inputs():
    x = np.array([-800.0, -40.0, 0.0, 40.0, 800.0])
    out = np.asarray(lax.logistic(x))
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out, scipy.special.expit(x), rtol=1e-15)
    g = np.asarray(fgrad.grad(lambda x: lax.reduce_sum(lax.logistic(x), (0,)))(x))
    assert np.all(np.isfinite(g))


# ----------------------------------------------------------------------------
# dtypes

FLOAT_UNARY_F32 = ["neg", "abs", "exp", "log", "log1p", "expm1", "sin", "cos", "tan", "tanh",
                   "sqrt", "rsqrt", "logistic", "erf", "erf_inv", "integer_pow_2",
                   "integer_pow_-2", "sign", "floor", "ceil", "round", "round_even"]


@pytest.mark.parametrize("name", FLOAT_UNARY_F32)
def test_unary_preserves_float32(name):
    fn, ref, dom = UNARY[name]
    x = _draw(dom, (2, 3), 10).astype(np.float32)
    out = fn(x)
    assert out.dtype == np.float32
    np.testing.assert_allclose(np.asarray(out), ref(x.astype(np.float64)), rtol=2e-6, atol=2e-6)
    g = fgrad.grad(lambda x: lax.reduce_sum(fn(x), (0, 1)))(x)
    assert g.dtype == np.float32
    assert fgrad.make_jaxpr(fn)(x).out_avals[0].dtype == np.float32


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_preserves_float32(name):
    fn, ref, dx, dy = BINARY[name]
    x = _draw(dx, (2, 3), 11).astype(np.float32)
    y = _draw(dy, (3,), 12).astype(np.float32)
    out = fn(x, y)
    assert out.dtype == np.float32
    np.testing.assert_allclose(np.asarray(out), ref(x.astype(np.float64), y.astype(np.float64)),
                               rtol=2e-6, atol=2e-6)
    gx, gy = fgrad.grad(lambda a, b: lax.reduce_sum(fn(a, b), (0, 1)), (0, 1))(x, y)
    assert gx.dtype == np.float32 and gy.dtype == np.float32
    # A Python scalar takes the array's dtype.
    assert fn(x, 1.5).dtype == np.float32 and fn(1.5, y).dtype == np.float32


def test_float16_is_preserved():
    x = np.array([0.5, 1.0], np.float16)
    assert lax.sin(x).dtype == np.float16
    assert lax.add(x, x).dtype == np.float16
    assert fgrad.grad(lambda x: lax.reduce_sum(lax.exp(x), (0,)))(x).dtype == np.float16


@pytest.mark.parametrize("fn", [lax.exp, lax.sin, lax.log, lax.sqrt, lax.floor, lax.erf])
def test_float_only_functions_reject_integers(fn):
    with pytest.raises(fgrad.FgradTypeError):
        fgrad.make_jaxpr(fn)(np.arange(3, dtype=np.int32))


def test_mixed_dtypes_rejected_when_traced():
    with pytest.raises(fgrad.FgradTypeError, match="dtype"):
        fgrad.make_jaxpr(lax.add)(np.ones(3, np.float32), np.ones(3, np.float64))


# ----------------------------------------------------------------------------
# Integer arithmetic and bitwise ops against NumPy

INT_DTYPES = [np.int32, np.uint32]


def _ints(dtype, shape, seed, lo=None, hi=None):
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype)
    lo = info.min if lo is None else lo
    hi = info.max if hi is None else hi
    return rng.integers(lo, hi, shape, dtype=dtype, endpoint=True)


def _c_div(x, y):
    """C (and XLA) integer division: the quotient rounds toward zero."""
    return np.array([int(a / b) if abs(int(a)) < 2 ** 52 else _exact_div(int(a), int(b))
                     for a, b in zip(x.ravel(), y.ravel())], np.int64)


def _exact_div(a, b):
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name,fn,ref", [
    ("add", lax.add, np.add),
    ("sub", lax.sub, np.subtract),
    ("mul", lax.mul, np.multiply),
    ("max", lax.max, np.maximum),
    ("min", lax.min, np.minimum),
    ("and", lax.bitwise_and, np.bitwise_and),
    ("or", lax.bitwise_or, np.bitwise_or),
    ("xor", lax.bitwise_xor, np.bitwise_xor),
])
def test_integer_binary_ops_wrap_like_numpy(name, fn, ref, dtype):
    x, y = _ints(dtype, (4, 5), 20), _ints(dtype, (5,), 21)
    out = fn(x, y)
    assert out.dtype == dtype
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(np.asarray(out), ref(x, y))


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int8, np.int64],
                         ids=lambda d: np.dtype(d).name)
def test_integer_div_and_rem_round_toward_zero(dtype):
    info = np.iinfo(dtype)
    x = _ints(dtype, (50,), 22, max(info.min, -1000), min(info.max, 1000))
    y = _ints(dtype, (50,), 23, 1 if info.min == 0 else -9, 9)
    y[y == 0] = 3
    q, r = lax.div(x, y), lax.rem(x, y)
    assert q.dtype == dtype and r.dtype == dtype
    expected_q = _c_div(x.astype(np.int64), y.astype(np.int64))
    np.testing.assert_array_equal(np.asarray(q).astype(np.int64), expected_q)
    np.testing.assert_array_equal(np.asarray(r), np.fmod(x, y))
    # The defining identity of truncated division.
    np.testing.assert_array_equal(np.asarray(q).astype(np.int64) * y + np.asarray(r), x)


def test_integer_div_signs():
    x = np.array([7, -7, 7, -7], np.int32)
    y = np.array([2, 2, -2, -2], np.int32)
    np.testing.assert_array_equal(np.asarray(lax.div(x, y)), [3, -3, -3, 3])
    np.testing.assert_array_equal(np.asarray(lax.rem(x, y)), [1, -1, 1, -1])


@pytest.mark.parametrize("dtype", [np.int32, np.int8], ids=lambda d: np.dtype(d).name)
def test_signed_integer_unary_ops(dtype):
    x = _ints(dtype, (30,), 24)
    x[:3] = [np.iinfo(dtype).min, 0, -1]
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(np.asarray(lax.neg(x)), np.negative(x))
        np.testing.assert_array_equal(np.asarray(lax.abs(x)), np.abs(x))
    np.testing.assert_array_equal(np.asarray(lax.sign(x)), np.sign(x))
    np.testing.assert_array_equal(np.asarray(lax.bitwise_not(x)), np.invert(x))
    for out in (lax.neg(x), lax.abs(x), lax.sign(x), lax.bitwise_not(x)):
        assert out.dtype == dtype


def test_integer_pow_on_integers():
    x = np.array([-3, -1, 0, 2, 5], np.int32)
    for n in range(5):
        out = lax.integer_pow(x, n)
        assert out.dtype == np.int32
        np.testing.assert_array_equal(np.asarray(out), x ** n)


def test_round_ties_and_bad_method():
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5])
    np.testing.assert_array_equal(np.asarray(lax.round(x)), [-3, -2, -1, 1, 2, 3])
    np.testing.assert_array_equal(np.asarray(lax.round(x, "to_nearest_even")),
                                  [-2, -2, -0, 0, 2, 2])
    with pytest.raises(ValueError, match="rounding_method"):
        lax.round(x, "up")


def test_integer_pow_negative_power_of_integers_fails():
    with pytest.raises(ValueError, match="negative"):
        lax.integer_pow(np.array([2], np.int32), -1)


@pytest.mark.parametrize("dtype", INT_DTYPES + [np.uint8, np.int64], ids=lambda d: np.dtype(d).name)
def test_bitwise_not_and_population_count(dtype):
    x = _ints(dtype, (40,), 25)
    np.testing.assert_array_equal(np.asarray(lax.bitwise_not(x)), np.invert(x))
    bits = np.dtype(dtype).itemsize * 8
    expected = [bin(int(v) & (2 ** bits - 1)).count("1") for v in x]
    out = lax.population_count(x)
    assert out.dtype == dtype
    np.testing.assert_array_equal(np.asarray(out), expected)


def test_bitwise_ops_on_bool():
    a = np.array([True, True, False, False])
    b = np.array([True, False, True, False])
    np.testing.assert_array_equal(np.asarray(lax.bitwise_and(a, b)), a & b)
    np.testing.assert_array_equal(np.asarray(lax.bitwise_or(a, b)), a | b)
    np.testing.assert_array_equal(np.asarray(lax.bitwise_xor(a, b)), a ^ b)
    np.testing.assert_array_equal(np.asarray(lax.bitwise_not(a)), ~a)
    assert lax.bitwise_not(a).dtype == np.bool_


def test_bitwise_ops_reject_floats():
    with pytest.raises(fgrad.FgradTypeError):
        fgrad.make_jaxpr(lax.bitwise_and)(np.ones(2), np.ones(2))
    with pytest.raises(fgrad.FgradTypeError):
        fgrad.make_jaxpr(lax.shift_left)(np.ones(2), np.ones(2))


def _shift_ref(kind, x, s, bits):
    """XLA's shifts: the amount is read as unsigned; amounts >= the width shift
    everything out (0, or the sign bit repeated for an arithmetic right shift)."""
    mask = 2 ** bits - 1
    u = int(x) & mask
    s = int(s) & mask
    sign = u >> (bits - 1)
    if kind == "left":
        r = (u << s) & mask if s < bits else 0
    elif kind == "right_logical":
        r = u >> s if s < bits else 0
    else:
        if s >= bits:
            s = bits - 1
        r = u >> s
        if sign:
            r |= (mask << (bits - s)) & mask
    return r


SHIFTS = [("left", lax.shift_left), ("right_logical", lax.shift_right_logical),
          ("right_arithmetic", lax.shift_right_arithmetic)]


@pytest.mark.parametrize("dtype", INT_DTYPES + [np.int8, np.uint16], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("kind,fn", SHIFTS, ids=[k for k, _ in SHIFTS])
def test_shifts_including_amounts_at_least_the_bit_width(kind, fn, dtype):
    bits = np.dtype(dtype).itemsize * 8
    x = _ints(dtype, (6, 1), 26)
    x[0, 0] = np.iinfo(dtype).max
    if np.iinfo(dtype).min < 0:
        x[1, 0] = np.iinfo(dtype).min
        x[2, 0] = -1
    s = np.array([0, 1, 3, bits - 1, bits, bits + 1, 2 * bits, 100], dtype)
    out = fn(x, s)
    assert out.dtype == dtype and out.shape == (6, 8)
    u = np.dtype(f"uint{bits}")
    expected = np.array([[_shift_ref(kind, a, b, bits) for b in s] for a in x[:, 0]],
                        np.uint64).astype(u).view(dtype)
    np.testing.assert_array_equal(np.asarray(out), expected)


@pytest.mark.parametrize("kind,fn", SHIFTS, ids=[k for k, _ in SHIFTS])
def test_shifts_by_negative_amounts_act_as_huge_unsigned_amounts(kind, fn):
    x = np.array([-8, 8, 1 << 30, -(1 << 30)], np.int32)
    s = np.full(4, -1, np.int32)
    expected = np.array([_shift_ref(kind, a, b, 32) for a, b in zip(x, s)],
                        np.uint64).astype(np.uint32).view(np.int32)
    np.testing.assert_array_equal(np.asarray(fn(x, s)), expected)


def test_shifts_in_range_match_numpy():
    x = _ints(np.int32, (20,), 27)
    s = _ints(np.int32, (20,), 28, 0, 31)
    np.testing.assert_array_equal(np.asarray(lax.shift_left(x, s)), np.left_shift(x, s))
    np.testing.assert_array_equal(np.asarray(lax.shift_right_arithmetic(x, s)),
                                  np.right_shift(x, s))
    np.testing.assert_array_equal(np.asarray(lax.shift_right_logical(x, s)),
                                  np.right_shift(x.view(np.uint32), s.astype(np.uint32))
                                  .view(np.int32))


# ----------------------------------------------------------------------------
# Comparisons and predicates

COMPARISONS = [("eq", lax.eq, np.equal), ("ne", lax.ne, np.not_equal), ("lt", lax.lt, np.less),
               ("le", lax.le, np.less_equal), ("gt", lax.gt, np.greater),
               ("ge", lax.ge, np.greater_equal)]


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32, np.uint32, np.bool_],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name,fn,ref", COMPARISONS, ids=[c[0] for c in COMPARISONS])
def test_comparisons(name, fn, ref, dtype):
    rng = np.random.default_rng(29)
    x = rng.integers(0, 3, (4, 3)).astype(dtype)
    y = rng.integers(0, 3, (3,)).astype(dtype)
    out = fn(x, y)
    assert out.dtype == np.bool_ and out.shape == (4, 3)
    np.testing.assert_array_equal(np.asarray(out), ref(x, y))
    jaxpr = fgrad.make_jaxpr(fn)(x, y)
    assert jaxpr.out_avals[0].dtype == np.bool_


@pytest.mark.parametrize("name,fn,ref", COMPARISONS, ids=[c[0] for c in COMPARISONS])
def test_comparisons_have_zero_derivative(name, fn, ref):
    x = np.array([0.5, 1.0, 1.5])

    def f(x):
        mask = lax.convert_element_type(fn(x, 1.0), np.float64)
        return lax.reduce_sum(lax.mul(mask, mask), (0,))
    np.testing.assert_array_equal(np.asarray(fgrad.grad(f)(x)), np.zeros(3))
    out, t = fgrad.jvp(lambda x: fn(x, 1.0), (x,), (np.ones(3),))
    np.testing.assert_array_equal(np.asarray(out), ref(x, 1.0))
    assert not np.any(np.asarray(t))
    # Used to gate a value, only the gated value is differentiated.
    gate = lambda x: lax.convert_element_type(fn(x, 1.0), x.dtype)
    g = fgrad.grad(lambda x: lax.reduce_sum(lax.mul(x, gate(x)), (0,)))(x)
    np.testing.assert_array_equal(np.asarray(g), ref(x, 1.0).astype(np.float64))


def test_is_finite():
    x = np.array([0.0, -1.5, np.inf, -np.inf, np.nan, 1e308])
    out = lax.is_finite(x)
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(np.asarray(out), np.isfinite(x))
    x32 = np.array([0.0, np.inf, -np.inf, np.nan, 3e38], np.float32)
    np.testing.assert_array_equal(np.asarray(lax.is_finite(x32)), np.isfinite(x32))
    g = fgrad.grad(lambda x: lax.reduce_sum(
        lax.select_n(lax.is_finite(x), lax.zeros_like(x), x), (0,)))(np.array([1.0, 2.0]))
    np.testing.assert_array_equal(np.asarray(g), [1.0, 1.0])


# ----------------------------------------------------------------------------
# max / min ties

@pytest.mark.parametrize("fn", [lax.max, lax.min], ids=["max", "min"])
def test_max_min_ties_split_the_gradient(fn):
    gx, gy = fgrad.grad(fn, (0, 1))(np.float64(1.5), np.float64(1.5))
    assert (float(gx), float(gy)) == (0.5, 0.5)
    # Forward mode agrees: the tangent is the average of the two.
    _, t = fgrad.jvp(fn, (np.float64(1.5), np.float64(1.5)), (np.float64(1.0), np.float64(3.0)))
    assert float(t) == 2.0
    # Element-wise, with broadcasting, ties only where the values are equal.
    x = np.array([1.0, 2.0, 3.0])
    y = np.float64(2.0)
    gx, gy = fgrad.grad(lambda a, b: lax.reduce_sum(fn(a, b), (0,)), (0, 1))(x, y)
    if fn is lax.max:
        np.testing.assert_array_equal(np.asarray(gx), [0.0, 0.5, 1.0])
        assert float(gy) == 1.5
    else:
        np.testing.assert_array_equal(np.asarray(gx), [1.0, 0.5, 0.0])
        assert float(gy) == 1.5


def test_relu_via_max_gradient():
    x = np.array([-2.0, -0.5, 0.5, 3.0])
    g = fgrad.grad(lambda x: lax.reduce_sum(lax.max(x, 0.0), (0,)))(x)
    np.testing.assert_array_equal(np.asarray(g), [0.0, 0.0, 1.0, 1.0])


# ----------------------------------------------------------------------------
# select_n

def test_select_n_bool_selector_value():
    which = np.array([True, False, True])
    a, b = np.array([1.0, 2.0, 3.0]), np.array([10.0, 20.0, 30.0])
    np.testing.assert_array_equal(np.asarray(lax.select_n(which, a, b)), [10.0, 2.0, 30.0])
    # Broadcasting of the selector and of the cases.
    out = lax.select_n(np.array([[True], [False]]), a, np.float64(0.0))
    np.testing.assert_array_equal(np.asarray(out), [[0.0, 0.0, 0.0], [1.0, 2.0, 3.0]])


def test_select_n_int_selector_value():
    which = np.array([2, 0, 1, 2], np.int32)
    cases = [np.full(4, 1.0), np.full(4, 2.0), np.full(4, 3.0)]
    np.testing.assert_array_equal(np.asarray(lax.select_n(which, *cases)), [3.0, 1.0, 2.0, 3.0])
    np.testing.assert_array_equal(np.asarray(lax.select_n(np.uint8(1), *cases)), cases[1])
    ints = lax.select_n(which, *[np.full(4, i, np.int32) for i in (7, 8, 9)])
    assert ints.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(ints), [9, 7, 8, 9])


def test_select_n_single_case():
    out = lax.select_n(np.array([0, 0], np.int32), np.float64(4.0))
    np.testing.assert_array_equal(np.asarray(out), [4.0, 4.0])


@pytest.mark.parametrize("which", [np.array([True, False, True]),
                                   np.array([1, 0, 1], np.int32)], ids=["bool", "int"])
def test_select_n_two_case_gradients(which):
    a, b = np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0, 6.0])

    def f(a, b):
        return lax.reduce_sum(lax.mul(lax.select_n(which, a, b), lax.select_n(which, a, b)), (0,))
    ga, gb = fgrad.grad(f, (0, 1))(a, b)
    picked = which.astype(bool)
    np.testing.assert_allclose(np.asarray(ga), np.where(picked, 0.0, 2 * a))
    np.testing.assert_allclose(np.asarray(gb), np.where(picked, 2 * b, 0.0))
    check_grads(lambda a, b: lax.select_n(which, a, b), (a, b), order=2)


def test_select_n_three_cases_with_broadcasting_gradients():
    which = np.array([[0, 1, 2], [2, 1, 0]], np.int32)
    c0 = np.array([1.0, 2.0, 3.0])         # (3,) broadcast over rows
    c1 = np.array([[4.0], [5.0]])           # (2, 1) broadcast over columns
    c2 = np.float64(7.0)                    # scalar
    total = lambda *c: lax.reduce_sum(lax.select_n(which, *c), (0, 1))
    g = fgrad.grad(total, (0, 1, 2))(c0, c1, c2)
    np.testing.assert_array_equal(np.asarray(g[0]), [1.0, 0.0, 1.0])
    np.testing.assert_array_equal(np.asarray(g[1]), [[1.0], [1.0]])
    assert float(g[2]) == 2.0
    check_grads(lambda *c: lax.select_n(which, *c), (c0, c1, c2), order=2)


def test_select_n_transpose_holds_no_array_of_zeros():
    """The cases not picked get a 0-d zero, not a constant of the cotangent's size
    that a jitted step would read (a relu's backward in every layer)."""
    x = np.linspace(-1.0, 1.0, 64).astype(np.float32).reshape(8, 8)
    jaxpr = fgrad.make_jaxpr(fgrad.grad(lambda x: lax.reduce_sum(nn.relu(x), (0, 1))))(x)
    zeros = [np.shape(c) for c in jaxpr.consts if np.size(c) > 1 and not np.any(np.asarray(c))]
    assert not zeros, zeros
    np.testing.assert_array_equal(np.asarray(fgrad.jit(fgrad.grad(
        lambda x: lax.reduce_sum(nn.relu(x), (0, 1))))(x)), (x > 0).astype(np.float32))


def test_select_n_selector_gets_no_gradient_and_tangents_pass_through():
    x = np.array([-1.0, 2.0])
    # A where-style relu: differentiable through the cases only.
    f = lambda x: lax.select_n(lax.gt(x, 0.0), lax.zeros_like(x), x)
    _, t = fgrad.jvp(f, (x,), (np.array([5.0, 7.0]),))
    np.testing.assert_array_equal(np.asarray(t), [0.0, 7.0])


def test_select_n_rejects_bad_selectors():
    with pytest.raises(fgrad.FgradTypeError, match="selector"):
        fgrad.make_jaxpr(lambda w, a, b: lax.select_n(w, a, b))(np.ones(2), np.ones(2), np.ones(2))
    with pytest.raises(fgrad.FgradTypeError, match="2 cases"):
        fgrad.make_jaxpr(lambda w, a: lax.select_n(w, a, a, a))(np.array([True, False]), np.ones(2))


# ----------------------------------------------------------------------------
# convert_element_type and bitcast_convert_type

@pytest.mark.parametrize("src,dst", [(np.float32, np.float64), (np.float64, np.float32),
                                     (np.float16, np.float32), (np.float64, np.float64)],
                         ids=lambda d: np.dtype(d).name)
def test_convert_float_to_float_gradients(src, dst):
    x = np.array([0.5, -1.25, 2.0], src)

    def f(x):
        y = lax.convert_element_type(x, dst)
        return lax.reduce_sum(lax.mul(y, y), (0,))
    g = fgrad.grad(f)(x)
    assert g.dtype == src
    np.testing.assert_allclose(np.asarray(g), 2 * x.astype(np.float64), rtol=1e-3)
    out, t = fgrad.jvp(lambda x: lax.convert_element_type(x, dst), (x,), (np.ones(3, src),))
    assert out.dtype == dst and t.dtype == dst
    np.testing.assert_array_equal(np.asarray(t), np.ones(3))


def test_convert_gradients_check_grads():
    x = np.array([0.3, -0.7])
    check_grads(lambda x: lax.sin(lax.convert_element_type(
        lax.convert_element_type(x, np.float32), np.float64)), (x,), order=2,
        atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize("dst", [np.int32, np.int64, np.uint8, np.bool_],
                         ids=lambda d: np.dtype(d).name)
def test_convert_to_integer_has_zero_gradient(dst):
    x = np.array([0.5, 1.5, 2.7])

    def f(x):
        back = lax.convert_element_type(lax.convert_element_type(x, dst), np.float64)
        return lax.reduce_sum(lax.mul(back, x), (0,))
    g = fgrad.grad(f)(x)
    # Only the direct factor x is differentiated.
    np.testing.assert_allclose(np.asarray(g), x.astype(dst).astype(np.float64))
    _, t = fgrad.jvp(lambda x: lax.convert_element_type(x, dst), (x,), (np.ones(3),))
    assert not np.any(np.asarray(t))


@pytest.mark.parametrize("src,dst", [(np.float64, np.int32), (np.float32, np.uint8),
                                     (np.int32, np.float32), (np.int32, np.bool_),
                                     (np.bool_, np.float64), (np.uint32, np.int32)],
                         ids=lambda d: np.dtype(d).name)
def test_convert_values_match_numpy(src, dst):
    x = np.array([0, 1, 2, 3, 7, 100]).astype(src)
    out = lax.convert_element_type(x, dst)
    assert out.dtype == dst
    np.testing.assert_array_equal(np.asarray(out), x.astype(dst))
    assert fgrad.make_jaxpr(lambda x: lax.convert_element_type(x, dst))(x).out_avals[0].dtype == dst


def test_convert_truncates_toward_zero():
    x = np.array([-2.7, -0.5, 0.5, 2.7])
    np.testing.assert_array_equal(np.asarray(lax.convert_element_type(x, np.int32)), [-2, 0, 0, 2])


@pytest.mark.parametrize("src,dst", [(np.float32, np.int32), (np.float32, np.uint32),
                                     (np.int32, np.float32), (np.float64, np.int64),
                                     (np.uint16, np.float16), (np.int8, np.uint8)],
                         ids=lambda d: np.dtype(d).name)
def test_bitcast_convert_type(src, dst):
    x = np.array([1.0, -2.5, 0.0, 3.25]).astype(src) if np.dtype(src).kind == "f" \
        else np.array([1, 2, 3, 100], src)
    out = lax.bitcast_convert_type(x, dst)
    assert out.dtype == dst
    np.testing.assert_array_equal(np.asarray(out), x.view(dst))
    back = lax.bitcast_convert_type(out, src)
    np.testing.assert_array_equal(np.asarray(back), x)
    assert fgrad.make_jaxpr(lambda x: lax.bitcast_convert_type(x, dst))(x).out_avals[0].dtype == dst


def test_bitcast_known_bits():
    out = lax.bitcast_convert_type(np.array([1.0, -2.0], np.float32), np.uint32)
    np.testing.assert_array_equal(np.asarray(out), [0x3F800000, 0xC0000000])


def test_bitcast_rejects_width_change():
    with pytest.raises(fgrad.FgradTypeError, match="width"):
        lax.bitcast_convert_type(np.ones(3, np.float32), np.float64)
    with pytest.raises(fgrad.FgradTypeError, match="width"):
        fgrad.make_jaxpr(lambda x: lax.bitcast_convert_type(x, np.int64))(np.ones(3, np.float32))


def test_bitcast_has_zero_derivative():
    x = np.array([1.0, 2.0])
    f = lambda x: lax.reduce_sum(lax.mul(x, lax.bitcast_convert_type(
        lax.bitcast_convert_type(x, np.int64), np.float64)), (0,))
    # Only the direct factor is differentiated: d/dx (x * stop(x)) = x.
    np.testing.assert_array_equal(np.asarray(fgrad.grad(f)(x)), x)


# ----------------------------------------------------------------------------
# stop_gradient

def test_stop_gradient_value_and_derivative():
    x = np.array([1.0, -2.0, 3.0])
    np.testing.assert_array_equal(np.asarray(fgrad.stop_gradient(x)), x)
    np.testing.assert_array_equal(np.asarray(lax.stop_gradient(x)), x)
    f = lambda x: lax.reduce_sum(lax.mul(x, fgrad.stop_gradient(x)), (0,))
    np.testing.assert_array_equal(np.asarray(fgrad.grad(f)(x)), x)
    _, t = fgrad.jvp(fgrad.stop_gradient, (x,), (np.ones(3),))
    np.testing.assert_array_equal(np.asarray(t), np.zeros(3))
    assert fgrad.stop_gradient(x.astype(np.float32)).dtype == np.float32


def test_stop_gradient_leaves_integers_alone():
    i = np.array([1, 2], np.int32)
    out = fgrad.stop_gradient(i)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(out), i)
    assert "stop_gradient" not in str(fgrad.make_jaxpr(fgrad.stop_gradient)(i))
    assert "stop_gradient" in str(fgrad.make_jaxpr(fgrad.stop_gradient)(np.ones(2)))
