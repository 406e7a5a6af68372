"""fgrad.numpy against NumPy: values (float64 inputs), dtype rules, derivatives
(check_grads, orders 1 and 2, forward and reverse) over broadcasting shapes,
indexing and .at updates, error messages, and tracing under make_jaxpr."""
import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad._src.jaxpr import eval_closed
from fgrad.test_util import check_grads

MODES = ("fwd", "rev")


def _check_grads(f, args, order=2):
    check_grads(f, args, order=order, modes=MODES)


def _assert_like(got, want, rtol=1e-7, atol=1e-9):
    """Same shape and values (dtype compared separately where it matters)."""
    if isinstance(got, (list, tuple)):
        assert isinstance(want, (list, tuple)) and len(got) == len(want)
        for g, w in zip(got, want):
            _assert_like(g, w, rtol, atol)
        return
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype.kind == "b":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)


# ----------------------------------------------------------------------------
# Input domains (float64), away from poles, branch cuts, kinks and ties

def _u(lo, hi):
    return lambda rng, shape: np.asarray(rng.uniform(lo, hi, shape))


def _signed(lo, hi):
    return lambda rng, shape: np.asarray(rng.uniform(lo, hi, shape) *
                                         rng.choice([-1.0, 1.0], shape))


def _normal(rng, shape):
    return np.asarray(rng.standard_normal(shape))


def _off_integer(rng, shape):
    return np.asarray(rng.integers(-3, 4, shape) +
                      rng.uniform(0.2, 0.4, shape) * rng.choice([-1, 1], shape))


UNARY = [
    ("exp", _normal), ("expm1", _normal), ("exp2", _normal), ("log", _u(0.5, 3)),
    ("log1p", _u(-0.5, 2)), ("log2", _u(0.5, 3)), ("log10", _u(0.5, 3)),
    ("sqrt", _u(0.5, 3)), ("cbrt", _signed(0.5, 2)), ("square", _normal),
    ("reciprocal", _signed(0.5, 2)), ("sin", _normal), ("cos", _normal),
    ("tan", _u(-1.2, 1.2)), ("arcsin", _u(-0.9, 0.9)), ("arccos", _u(-0.9, 0.9)),
    ("arctan", _normal), ("sinh", _u(-3, 3)), ("cosh", _u(-3, 3)), ("tanh", _normal),
    ("arcsinh", _u(-3, 3)), ("arccosh", _u(1.2, 3)), ("arctanh", _u(-0.9, 0.9)),
    ("negative", _normal), ("positive", _normal), ("abs", _signed(0.3, 2)),
    ("absolute", _signed(0.3, 2)), ("fabs", _signed(0.3, 2)), ("deg2rad", _normal),
    ("rad2deg", _normal), ("radians", _normal), ("degrees", _normal),
    ("sinc", _signed(0.2, 2)), ("conj", _normal), ("real", _normal),
]
UNARY_NONDIFF = ["sign", "floor", "ceil", "trunc", "rint", "round", "around", "fix",
                 "isnan", "isinf", "isfinite", "signbit", "logical_not", "isposinf",
                 "isneginf"]
SHAPES = [(), (3,), (2, 3)]


@pytest.mark.parametrize("name,domain", UNARY, ids=[u[0] for u in UNARY])
def test_unary_values_and_dtypes(name, domain, rng):
    x = domain(rng, (2, 3))
    f = getattr(fnp, name)
    _assert_like(f(x), getattr(np, name)(x), rtol=1e-6)
    assert f(x).dtype == np.float64
    assert f(x.astype(np.float32)).dtype == np.float32
    assert f(np.ones(3, np.int32)).dtype == np.dtype(
        np.int32 if name in ("square", "negative", "positive", "abs", "absolute", "conj",
                             "real") else np.float32)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name,domain", UNARY, ids=[u[0] for u in UNARY])
def test_unary_grads(name, domain, shape, rng):
    _check_grads(getattr(fnp, name), (domain(rng, shape),))


@pytest.mark.parametrize("name", UNARY_NONDIFF)
def test_unary_nondifferentiable(name, rng):
    x = np.array([-2.5, -1.5, -0.5, 0.0, 0.5, 1.5, 2.7, np.inf, -np.inf, np.nan])
    _assert_like(getattr(fnp, name)(x), getattr(np, name)(x))
    if name not in ("isnan", "isinf", "isfinite", "signbit", "logical_not", "isposinf",
                    "isneginf"):
        g = fgrad.grad(lambda v: fnp.sum(getattr(fnp, name)(v)))(rng.standard_normal(4))
        _assert_like(g, np.zeros(4))


def test_special_values():
    f32 = np.float32
    _assert_like(fnp.arccos(-1.0), np.pi, rtol=1e-6)
    assert np.isfinite(float(fnp.sinh(f32(89.0)))) and np.isfinite(float(fnp.cosh(f32(89.0))))
    _assert_like(fnp.arcsinh(np.array([1e30, -1e30, 0.0])),
                 np.arcsinh(np.array([1e30, -1e30, 0.0])))
    _assert_like(fnp.arccosh(1e30), np.arccosh(1e30))
    _assert_like(fnp.logaddexp(-np.inf, -np.inf), -np.inf)
    _assert_like(fnp.logaddexp(np.inf, 1.0), np.inf)
    _assert_like(fnp.hypot(np.float64(1e200), 1e200), np.hypot(1e200, 1e200))
    _assert_like(fnp.sinc(0.0), 1.0)
    # derivatives at the points where naive formulas fail
    _assert_like(fgrad.grad(fnp.arcsinh)(0.0), 1.0)
    _assert_like(fgrad.grad(fgrad.grad(fnp.cosh))(0.0), 1.0)
    _assert_like(fgrad.grad(lambda x: fnp.power(x, 2))(0.0), 0.0)
    _assert_like(fgrad.grad(lambda x: fnp.power(x, 3))(-2.0), 12.0)


BINARY = [
    ("add", _normal, _normal), ("subtract", _normal, _normal),
    ("multiply", _normal, _normal), ("divide", _normal, _signed(0.5, 2)),
    ("true_divide", _normal, _signed(0.5, 2)), ("power", _u(0.5, 2), _normal),
    ("float_power", _u(0.5, 2), _normal), ("maximum", _normal, _normal),
    ("minimum", _normal, _normal), ("fmax", _normal, _normal), ("fmin", _normal, _normal),
    ("arctan2", _normal, _normal), ("hypot", _signed(0.3, 2), _signed(0.3, 2)),
    ("logaddexp", _normal, _normal), ("logaddexp2", _normal, _normal),
    ("copysign", _signed(0.3, 2), _signed(0.3, 2)),
    ("remainder", _off_integer, _u(0.97, 1.03)), ("mod", _off_integer, _u(0.97, 1.03)),
    ("fmod", _off_integer, _u(0.97, 1.03)),
]
BINARY_SHAPES = [((), ()), ((3,), (3,)), ((2, 3), (3,)), ((2, 1), (1, 3)), ((), (2, 3))]


@pytest.mark.parametrize("shapes", BINARY_SHAPES, ids=str)
@pytest.mark.parametrize("name,d1,d2", BINARY, ids=[b[0] for b in BINARY])
def test_binary_values(name, d1, d2, shapes, rng):
    x, y = d1(rng, shapes[0]), d2(rng, shapes[1])
    _assert_like(getattr(fnp, name)(x, y), getattr(np, name)(x, y), rtol=1e-6)


@pytest.mark.parametrize("shapes", BINARY_SHAPES[2:], ids=str)
@pytest.mark.parametrize("name,d1,d2", BINARY, ids=[b[0] for b in BINARY])
def test_binary_grads(name, d1, d2, shapes, rng):
    _check_grads(getattr(fnp, name), (d1(rng, shapes[0]), d2(rng, shapes[1])))


BINARY_NONDIFF = ["floor_divide", "equal", "not_equal", "less", "less_equal", "greater",
                  "greater_equal", "heaviside", "logical_and", "logical_or", "logical_xor"]


@pytest.mark.parametrize("name", BINARY_NONDIFF)
def test_binary_nondifferentiable(name, rng):
    x = np.array([[-2.5, -1.0, 0.0, 0.0, 1.5, 3.0]])
    y = np.array([[1.0], [-2.0], [0.0], [0.5]])
    with np.errstate(all="ignore"):
        _assert_like(getattr(fnp, name)(x, y), getattr(np, name)(x, y))


def test_integer_division_and_remainder():
    x = np.array([-7, -6, -1, 0, 1, 6, 7], np.int32)[:, None]
    y = np.array([-3, -2, 2, 3], np.int32)
    for name in ("floor_divide", "remainder", "fmod"):
        got = getattr(fnp, name)(x, y)
        assert got.dtype == np.int32
        _assert_like(got, getattr(np, name)(x, y))
    _assert_like(fnp.floor_divide(x.astype(float), y.astype(float)),
                 np.floor_divide(x.astype(float), y.astype(float)))
    with np.errstate(all="ignore"):
        z = np.array([1.0, -1.0, 0.0])
        _assert_like(fnp.floor_divide(z, 0.0), np.floor_divide(z, 0.0))
        _assert_like(fnp.remainder(z, 0.0), np.remainder(z, 0.0))
    q, r = fnp.divmod(x, y)
    _assert_like(q, x // y)
    _assert_like(r, x % y)


def test_integer_power_and_bitwise():
    x = np.array([-3, -1, 0, 2, 5], np.int32)
    y = np.array([0, 1, 2, 3, 4], np.int32)
    _assert_like(fnp.power(x, y), np.power(x, y))
    assert fnp.power(x, y).dtype == np.int32 and fnp.power(x, 3).dtype == np.int32
    assert "integer_pow" in str(fgrad.make_jaxpr(lambda v: v ** 3)(np.ones(2)))
    for exponent in (-1, -y):
        with pytest.raises(ValueError, match="negative"):
            fnp.power(x, exponent)
    a, b = np.array([5, 12, -7], np.int32), np.array([3, 10, 2], np.int32)
    for name in ("bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift"):
        _assert_like(getattr(fnp, name)(a, b), getattr(np, name)(a, b))
    _assert_like(fnp.invert(a), np.invert(a))
    _assert_like(fnp.right_shift(np.uint8(200), np.uint8(3)), np.uint8(200) >> 3)
    _assert_like(fnp.negative(np.uint8(3)), np.negative(np.uint8(3)))


@pytest.mark.parametrize("decimals", [-2, -1, 0, 1, 2])
def test_round_decimals(decimals):
    ints = np.array([-250, -25, -15, -14, 0, 5, 14, 15, 25, 26, 149, 150], np.int32)
    floats = np.array([1.25, 2.675, -0.125, 12345.678, -0.5, 0.5, 1.5])
    for a in (ints, floats):
        got = fnp.round(a, decimals)
        assert got.dtype == a.dtype
        _assert_like(got, np.round(a, decimals))
    _assert_like(fnp.asarray(floats).round(decimals), floats.round(decimals))


# (x, y, expected dtype): weak Python scalars, the promotion lattice, kept float64.
i8, i32, u8, f32, f64 = (np.ones(2, d) for d in (np.int8, np.int32, np.uint8, np.float32,
                                                   np.float64))
PROMOTION = [
    (f32, f32, np.float32), (i32, f32, np.float32), (f32, 2.0, np.float32),
    (f32, 2, np.float32), (i32, 2, np.int32), (i32, 2.5, np.float32), (i8, 1, np.int8),
    (f64, f32, np.float64), (f64, 2.0, np.float64), (u8, i8, np.int16),
    (i8, i32, np.int32), (np.array([True]), 1, np.int32), (2.0, i32, np.float32),
]


@pytest.mark.parametrize("x,y,dtype", PROMOTION)
def test_promotion(x, y, dtype):
    assert fnp.add(x, y).dtype == dtype
    assert fnp.multiply(y, x).dtype == dtype
    assert fnp.maximum(x, y).dtype == dtype


def test_inexact_and_weak_results():
    assert fnp.divide(i32, i32).dtype == np.float32
    assert fnp.divide(f64, 2).dtype == np.float64
    assert fnp.sqrt(i8).dtype == np.float32
    w = fnp.add(2.0, 3.0)
    assert w.dtype == np.float32 and w.weak_type
    assert not fnp.add(f32, 3.0).weak_type
    assert fnp.add(fnp.asarray(1.5), np.ones(2, np.float16)).dtype == np.float16
    assert (fnp.asarray(f32) + True).dtype == np.float32
    assert fnp.add(np.array([True]), np.array([True])).dtype == np.bool_
    assert fnp.astype(f64, np.float32).dtype == np.float32
    assert fnp.astype(f64, bool).dtype == np.bool_
    assert fnp.asarray(f32).astype("int32").dtype == np.int32


def test_where_clip_and_closeness(rng):
    c = rng.standard_normal((2, 3)) > 0
    x, y = rng.standard_normal((2, 3)), rng.standard_normal(3)
    _assert_like(fnp.where(c, x, y), np.where(c, x, y))
    _assert_like(fnp.where(c, 1.0, 0), np.where(c, 1.0, 0))
    assert fnp.where(c, np.float32(1), 0.0).dtype == np.float32
    _assert_like(fnp.where(c), np.where(c))
    _check_grads(lambda a, b: fnp.where(c, a, b), (x, y))
    _assert_like(fnp.clip(x, -0.5, 0.5), np.clip(x, -0.5, 0.5))
    _assert_like(fnp.clip(x, max=0.1), np.clip(x, None, 0.1))
    _assert_like(fnp.clip(x, y[None, :], None), np.clip(x, y, None))
    _check_grads(lambda a: fnp.clip(a, -0.5, 0.5), (x,))
    a = np.array([1.0, 1e-9, np.inf, np.nan, 1.0])
    b = np.array([1.0 + 1e-7, 0.0, np.inf, np.nan, 2.0])
    _assert_like(fnp.isclose(a, b), np.isclose(a, b))
    _assert_like(fnp.isclose(a, b, equal_nan=True), np.isclose(a, b, equal_nan=True))
    ac = fnp.allclose(a[:3], b[:3])
    assert isinstance(ac, fgrad.Array) and ac.dtype == np.bool_ and bool(ac)
    assert not bool(fnp.allclose(a, b))
    _assert_like(fnp.nan_to_num(a * -1), np.nan_to_num(a * -1))
    assert bool(fnp.array_equal(x, x)) and not bool(fnp.array_equal(x, y))


def test_ufunc_dispatch_from_numpy():
    x = fnp.asarray(np.array([1.0, 2.0]))
    assert isinstance(np.sin(x), fgrad.Array)
    assert isinstance(np.add(np.ones(2), x), fgrad.Array)
    _assert_like(np.maximum(x, 1.5), [1.5, 2.0])


# ----------------------------------------------------------------------------
# Creation

def test_creation_defaults_and_dtypes():
    for f in (fnp.zeros, fnp.ones, fnp.empty):
        assert f((2, 3)).dtype == np.float32 and f(3).shape == (3,)
        assert f((2,), np.float64).dtype == np.float64
    assert fnp.full((2,), 3.0).dtype == np.float32
    assert fnp.full((2,), 3).dtype == np.int32
    assert fnp.full((2,), 3, np.float64).dtype == np.float64
    _assert_like(fnp.full((2, 3), np.arange(3.0)), np.full((2, 3), np.arange(3.0)))
    assert fnp.arange(5).dtype == np.int32 and fnp.arange(0.0, 1.0, 0.25).dtype == np.float32
    _assert_like(fnp.arange(2, 11, 3), np.arange(2, 11, 3))
    _assert_like(fnp.arange(5.0, 0.0, -1.5), np.arange(5.0, 0.0, -1.5))
    assert fnp.arange(3, dtype=np.float64).dtype == np.float64
    _assert_like(fnp.linspace(-1, 2, 7), np.linspace(-1, 2, 7), rtol=1e-6)
    assert fnp.linspace(0, 1, 5).dtype == np.float32
    _assert_like(fnp.linspace(0, 1, 4, endpoint=False), np.linspace(0, 1, 4, endpoint=False))
    _assert_like(fnp.linspace(np.zeros(2), np.ones(2), 3, axis=1),
                 np.linspace(np.zeros(2), np.ones(2), 3, axis=1))
    _assert_like(fnp.eye(3, 4, k=1), np.eye(3, 4, k=1))
    _assert_like(fnp.identity(2, dtype=np.int32), np.identity(2))
    _assert_like(fnp.tri(3, k=-1), np.tri(3, k=-1))
    x64 = np.ones((2, 2))
    for f in (fnp.zeros_like, fnp.ones_like, fnp.empty_like):
        assert f(x64).dtype == np.float64 and f(x64).shape == (2, 2)
    _assert_like(fnp.full_like(x64, 7), np.full_like(x64, 7))
    assert fnp.asarray([1.0, 2.0]).dtype == np.float32
    assert fnp.asarray([1, 2]).dtype == np.int32
    assert fnp.asarray(np.ones(2)).dtype == np.float64
    assert fnp.array([1, 2], dtype=np.float64).dtype == np.float64
    assert fnp.array(3.0, ndmin=2).shape == (1, 1)
    _assert_like(fnp.meshgrid(np.arange(3), np.arange(2)),
                 np.meshgrid(np.arange(3), np.arange(2)))
    _assert_like(fnp.meshgrid(np.arange(3), np.arange(2), indexing="ij"),
                 np.meshgrid(np.arange(3), np.arange(2), indexing="ij"))
    _assert_like(fnp.logspace(0, 2, 3), np.logspace(0, 2, 3), rtol=1e-5)


def test_creation_from_traced_values():
    f = lambda a, b: fnp.linspace(a, b, 5)  # noqa: E731
    _assert_like(f(np.float64(1.0), np.float64(3.0)), np.linspace(1.0, 3.0, 5))
    jaxpr = fgrad.make_jaxpr(f)(np.float64(1.0), np.float64(3.0))
    _assert_like(eval_closed(jaxpr, np.float64(1.0), np.float64(3.0))[0], np.linspace(1, 3, 5))
    _check_grads(f, (np.float64(0.5), np.float64(2.0)))
    g = fgrad.grad(lambda v: fnp.sum(fnp.full((3,), v) * fnp.asarray([v, 1.0, 2.0])))
    _assert_like(g(2.0), 2 * 2.0 + 3.0)
    _assert_like(fgrad.grad(lambda v: fnp.sum(fnp.stack([v, 2 * v])))(1.0), 3.0)


# ----------------------------------------------------------------------------
# Reductions

REDUCTIONS = [
    ("sum", {}), ("sum", {"axis": 1}), ("sum", {"axis": (0, 2), "keepdims": True}),
    ("sum", {"axis": -1, "initial": 2.0}), ("mean", {}), ("mean", {"axis": (1, 2)}),
    ("mean", {"axis": 0, "keepdims": True}), ("var", {}), ("var", {"axis": 1, "ddof": 1}),
    ("std", {"axis": -1}), ("std", {"ddof": 1, "keepdims": True}), ("max", {}),
    ("max", {"axis": 1}), ("amax", {"axis": (0, 1), "keepdims": True}), ("min", {"axis": 2}),
    ("amin", {}), ("prod", {"axis": 1}), ("prod", {}), ("ptp", {"axis": 0}),
    ("cumsum", {}), ("cumsum", {"axis": 1}), ("cumprod", {"axis": -1}),
    ("nansum", {"axis": 0}), ("nanmean", {}), ("nanmax", {"axis": 2}), ("nanmin", {}),
    ("average", {"axis": 1}),
]
REDUCTIONS_NONDIFF = [
    ("argmax", {}), ("argmax", {"axis": 1}), ("argmin", {"axis": -1, "keepdims": True}),
    ("all", {}), ("all", {"axis": 1}), ("any", {"axis": (0, 2), "keepdims": True}),
    ("count_nonzero", {"axis": 0}),
]


@pytest.mark.parametrize("name,kw", REDUCTIONS + REDUCTIONS_NONDIFF, ids=str)
def test_reduction_values(name, kw, rng):
    x = rng.standard_normal((2, 3, 4))
    if name in ("all", "any", "count_nonzero"):
        x = np.round(x)
    _assert_like(getattr(fnp, name)(x, **kw), getattr(np, name)(x, **kw))
    assert getattr(fnp, name)(x.astype(np.float32), **kw).dtype == \
        {"argmax": np.int32, "argmin": np.int32, "all": np.bool_, "any": np.bool_,
         "count_nonzero": np.int32}.get(name, np.float32)


@pytest.mark.parametrize("name,kw", REDUCTIONS, ids=str)
def test_reduction_grads(name, kw, rng):
    x = rng.uniform(0.5, 1.5, (2, 3, 4)) * rng.choice([-1, 1], (2, 3, 4))
    _check_grads(lambda v: getattr(fnp, name)(v, **kw), (x,))


def test_reduction_options_and_dtypes(rng):
    x = rng.standard_normal((3, 4))
    w = rng.standard_normal((3, 4)) > 0
    _assert_like(fnp.sum(x, axis=1, where=w), np.sum(x, axis=1, where=w))
    _assert_like(fnp.mean(x, axis=0, where=w | np.eye(3, 4, dtype=bool)),
                 np.mean(x, axis=0, where=w | np.eye(3, 4, dtype=bool)))
    _assert_like(fnp.max(x, axis=1, where=w, initial=-5.0),
                 np.max(x, axis=1, where=w, initial=-5.0))
    _assert_like(fnp.var(x, axis=1, where=w | np.eye(3, 4, dtype=bool)),
                 np.var(x, axis=1, where=w | np.eye(3, 4, dtype=bool)))
    _assert_like(fnp.average(x, axis=1, weights=np.arange(1.0, 5.0)),
                 np.average(x, axis=1, weights=np.arange(1.0, 5.0)))
    _assert_like(fnp.cumulative_sum(x, axis=1, include_initial=True),
                 np.cumulative_sum(x, axis=1, include_initial=True))
    ints = np.array([[1, 2, 3], [4, 5, 6]], np.int8)
    assert fnp.sum(ints).dtype == np.int32 and fnp.sum(w).dtype == np.int32
    assert fnp.mean(ints).dtype == np.float32 and fnp.cumsum(ints).dtype == np.int32
    assert fnp.sum(x, dtype=np.float32).dtype == np.float32
    _assert_like(fnp.prod(ints, axis=1), np.prod(ints, axis=1))
    _assert_like(fnp.all(np.zeros((0, 2)), axis=0), np.all(np.zeros((0, 2)), axis=0))
    _assert_like(fnp.any(np.zeros((0, 2))), False)
    _assert_like(fnp.max(np.zeros((0, 2)), axis=0, initial=1.0), [1.0, 1.0])
    with pytest.raises(ValueError, match="zero-size"):
        fnp.max(np.zeros((0, 2)), axis=0)
    # ties share the derivative of max equally
    _assert_like(fgrad.grad(fnp.max)(np.array([1.0, 3.0, 3.0])), [0.0, 0.5, 0.5])
    # methods go through the same functions
    fx = fnp.asarray(x)
    _assert_like(fx.sum(axis=0), x.sum(axis=0))
    _assert_like(fx.std(ddof=1), x.std(ddof=1))
    _assert_like(fx.argmax(axis=1), x.argmax(axis=1))
    _assert_like(fx.cumsum(0), x.cumsum(0))


# ----------------------------------------------------------------------------
# Shape functions (one table: f(module, x) is called with numpy and fgrad.numpy)

X = np.random.default_rng(3).standard_normal((2, 3, 4))
ORDER = np.argsort(X, axis=1)

SHAPE_CASES = {
    "reshape": lambda m, x: m.reshape(x, (4, -1)),
    "reshape_F": lambda m, x: m.reshape(x, (3, 8), order="F"),
    "ravel": lambda m, x: m.ravel(x),
    "method_reshape": lambda m, x: x.reshape(6, 4),
    "transpose": lambda m, x: m.transpose(x),
    "transpose_axes": lambda m, x: m.transpose(x, (1, 2, 0)),
    "T": lambda m, x: x.T,
    "swapaxes": lambda m, x: m.swapaxes(x, 0, 2),
    "moveaxis": lambda m, x: m.moveaxis(x, 0, -1),
    "moveaxis_multi": lambda m, x: m.moveaxis(x, (0, 1), (2, 0)),
    "expand_squeeze": lambda m, x: m.squeeze(m.expand_dims(x, (0, 3)), 3),
    "squeeze_all": lambda m, x: m.squeeze(m.expand_dims(x, 1)),
    "broadcast_to": lambda m, x: m.broadcast_to(m.sum(x, 0), (5, 3, 4)),
    "broadcast_arrays": lambda m, x: m.broadcast_arrays(x, m.sum(x, (0, 2), keepdims=True)),
    "atleast_3d": lambda m, x: m.atleast_3d(m.sum(x)),
    "concatenate": lambda m, x: m.concatenate([x, 2 * x[:, :1]], axis=1),
    "concatenate_none": lambda m, x: m.concatenate([x, x[0]], axis=None),
    "stack": lambda m, x: m.stack([x, 3 * x], axis=-1),
    "hstack": lambda m, x: m.hstack([x, x]),
    "vstack": lambda m, x: m.vstack([x[0], x[1, :1]]),
    "dstack": lambda m, x: m.dstack([x[0], x[1]]),
    "column_stack": lambda m, x: m.column_stack([x[0, 0], x[1, 1]]),
    "split": lambda m, x: m.split(x, 2, axis=2),
    "split_indices": lambda m, x: m.split(x, [1, 3], axis=-1),
    "array_split": lambda m, x: m.array_split(x, 3, axis=2),
    "tile": lambda m, x: m.tile(x, (2, 1, 3)),
    "tile_short": lambda m, x: m.tile(x[0], 2),
    "repeat": lambda m, x: m.repeat(x, 2, axis=1),
    "repeat_flat": lambda m, x: m.repeat(x, 3),
    "repeat_counts": lambda m, x: m.repeat(x, [1, 0, 2], axis=1),
    "pad": lambda m, x: m.pad(x, ((1, 0), (0, 2), (1, 1)), constant_values=1.5),
    "pad_mixed": lambda m, x: m.pad(x, 1, constant_values=((1, 2), (3, 4), (5, 6))),
    "pad_edge": lambda m, x: m.pad(x, ((0, 0), (2, 1), (1, 2)), mode="edge"),
    "pad_reflect": lambda m, x: m.pad(x, ((0, 1), (2, 2), (3, 1)), mode="reflect"),
    "pad_symmetric": lambda m, x: m.pad(x, 2, mode="symmetric"),
    "pad_wrap": lambda m, x: m.pad(x, ((1, 1), (0, 4), (2, 0)), mode="wrap"),
    "flip": lambda m, x: m.flip(x),
    "flip_axis": lambda m, x: m.flip(x, (0, 2)),
    "fliplr": lambda m, x: m.fliplr(x),
    "flipud": lambda m, x: m.flipud(x),
    "rot90": lambda m, x: m.rot90(x, 1, (1, 2)),
    "rot90_3": lambda m, x: m.rot90(x, 3),
    "roll": lambda m, x: m.roll(x, 2, axis=2),
    "roll_neg": lambda m, x: m.roll(x, -1, axis=1),
    "roll_flat": lambda m, x: m.roll(x, 5),
    "roll_multi": lambda m, x: m.roll(x, (1, 3), axis=(0, 2)),
    "take": lambda m, x: m.take(x, np.array([[2, 0], [-1, 1]]), axis=1),
    "take_flat": lambda m, x: m.take(x, np.array([0, 23, -2])),
    "take_clip": lambda m, x: m.take(x, np.array([5, -9]), axis=2, mode="clip"),
    "take_wrap": lambda m, x: m.take(x, np.array([5, -9]), axis=2, mode="wrap"),
    "take_along_axis": lambda m, x: m.take_along_axis(x, ORDER, axis=1),
    "take_along_bcast": lambda m, x: m.take_along_axis(x, ORDER[:1, :, :1], axis=1),
    "diff": lambda m, x: m.diff(x),
    "diff_2": lambda m, x: m.diff(x, n=2, axis=1, prepend=0.5),
    "tril": lambda m, x: m.tril(x, -1),
    "triu": lambda m, x: m.triu(x, 1),
    "diagonal": lambda m, x: m.diagonal(x, 1, 1, 2),
    "diagonal_neg": lambda m, x: m.diagonal(x, -1, 2, 0),
    "trace": lambda m, x: m.trace(x, 0, 1, 2),
    "diag_2d": lambda m, x: m.diag(x[0], 1),
    "diag_1d": lambda m, x: m.diag(x[0, 0], -2),
    "diagflat": lambda m, x: m.diagflat(x[0, :2, :2]),
    "select": lambda m, x: m.select([x > 0.5, x < -0.5], [x, 2 * x], -1.0),
    "unstack": lambda m, x: m.unstack(x, axis=1),
}


@pytest.mark.parametrize("name", list(SHAPE_CASES))
def test_shape_functions(name):
    f = SHAPE_CASES[name]
    _assert_like(f(fnp, fnp.asarray(X)), f(np, X))
    _check_grads(lambda x: f(fnp, x), (X,))


def test_shape_functions_keep_dtype_and_promote():
    x32 = X.astype(np.float32)
    assert fnp.concatenate([x32, x32]).dtype == np.float32
    assert fnp.concatenate([x32, np.ones((1, 3, 4), np.int32)]).dtype == np.float32
    assert fnp.stack([x32[0], X[0]]).dtype == np.float64
    assert fnp.pad(x32, 1, constant_values=2).dtype == np.float32
    assert fnp.reshape(x32, -1).dtype == np.float32
    assert fnp.shape(X) == (2, 3, 4) and fnp.ndim(X) == 3 and fnp.size(X, 1) == 3


def test_traced_roll_and_take():
    def f(x, s):
        return fnp.roll(x, s, axis=1)
    jaxpr = fgrad.make_jaxpr(f)(X, np.int32(2))
    for s in (2, -1, 7):
        _assert_like(eval_closed(jaxpr, X, np.int32(s))[0], np.roll(X, s, axis=1))
    jaxpr = fgrad.make_jaxpr(lambda x, i: fnp.take(x, i, axis=2))(X, np.array([0, -1]))
    _assert_like(eval_closed(jaxpr, X, np.array([3, -2]))[0], np.take(X, [3, -2], axis=2))


# ----------------------------------------------------------------------------
# Products

A3, B3 = np.random.default_rng(4).standard_normal((2, 3))
MATMUL_SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)),
                 ((4, 1, 2, 3), (5, 3, 2)), ((2, 2, 3), (3,)), ((3,), (2, 3, 4)),
                 ((1, 2, 3), (4, 3, 2))]


@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=str)
def test_matmul(shapes, rng):
    a, b = rng.standard_normal(shapes[0]), rng.standard_normal(shapes[1])
    _assert_like(fnp.matmul(a, b), np.matmul(a, b))
    _assert_like(fnp.asarray(a) @ b, a @ b)
    _check_grads(fnp.matmul, (a, b))


def test_matmul_dtypes():
    a32, b64 = np.ones((2, 3), np.float32), np.ones((3, 2))
    assert fnp.matmul(a32, a32.T).dtype == np.float32
    assert fnp.matmul(a32, b64).dtype == np.float64
    ai = np.arange(6, dtype=np.int32).reshape(2, 3)
    assert fnp.matmul(ai, ai.T).dtype == np.int32
    _assert_like(fnp.matmul(ai, ai.T), ai @ ai.T)
    m = np.array([[True, False], [False, False]])
    _assert_like(fnp.matmul(m, m), m @ m)


PRODUCT_CASES = {
    "dot_vv": (lambda m, a, b: m.dot(a, b), (3,), (3,)),
    "dot_mm": (lambda m, a, b: m.dot(a, b), (2, 3), (3, 4)),
    "dot_nd": (lambda m, a, b: m.dot(a, b), (2, 2, 3), (4, 3, 5)),
    "dot_scalar": (lambda m, a, b: m.dot(a, b), (), (2, 3)),
    "dot_method": (lambda m, a, b: a.dot(b), (2, 3), (3,)),
    "vdot": (lambda m, a, b: m.vdot(a, b), (2, 3), (6,)),
    "inner": (lambda m, a, b: m.inner(a, b), (2, 3), (4, 3)),
    "outer": (lambda m, a, b: m.outer(a, b), (3,), (2, 2)),
    "kron": (lambda m, a, b: m.kron(a, b), (2, 3), (2, 2)),
    "cross": (lambda m, a, b: m.cross(a, b), (4, 3), (3,)),
    "tensordot_int": (lambda m, a, b: m.tensordot(a, b, 2), (2, 3, 4), (3, 4, 5)),
    "tensordot_pairs": (lambda m, a, b: m.tensordot(a, b, ([0, 2], [2, 0])), (2, 3, 4),
                        (4, 5, 2)),
    "tensordot_0": (lambda m, a, b: m.tensordot(a, b, 0), (2,), (3,)),
    "einsum_mm": (lambda m, a, b: m.einsum("ij,jk->ik", a, b), (2, 3), (3, 4)),
    "einsum_implicit": (lambda m, a, b: m.einsum("ij,jk", a, b), (2, 3), (3, 4)),
    "einsum_implicit_order": (lambda m, a, b: m.einsum("ba,ca", a, b), (2, 3), (4, 3)),
    "einsum_batch": (lambda m, a, b: m.einsum("bij,bjk->bik", a, b), (5, 2, 3), (5, 3, 4)),
    "einsum_ellipsis": (lambda m, a, b: m.einsum("...ij,...jk->...ik", a, b),
                        (4, 1, 2, 3), (5, 3, 2)),
    "einsum_ellipsis_implicit": (lambda m, a, b: m.einsum("...j,j", a, b), (2, 4, 3), (3,)),
    "einsum_ellipsis_keep": (lambda m, a, b: m.einsum("i...,i...->...", a, b), (2, 3, 4),
                             (2, 1, 4)),
    "einsum_outer": (lambda m, a, b: m.einsum("i,j->ij", a, b), (3,), (4,)),
    "einsum_inner": (lambda m, a, b: m.einsum("i,i->", a, b), (3,), (3,)),
    "einsum_hadamard": (lambda m, a, b: m.einsum("ij,ij->ij", a, b), (2, 3), (2, 3)),
    "einsum_trace_prod": (lambda m, a, b: m.einsum("ii,jk->jk", a, b), (3, 3), (2, 2)),
    "einsum_sum_free": (lambda m, a, b: m.einsum("ij,kl->j", a, b), (2, 3), (4, 5)),
    "einsum_three": (lambda m, a, b: m.einsum("ijk,jl,lk->i", a, b, b.T[:, :2]),
                     (2, 3, 2), (3, 4)),
    "einsum_chain": (lambda m, a, b: m.einsum("ab,bc,cd,de->ae", a, b, b.T, a.T),
                     (2, 3), (3, 3)),
    "einsum_sublists": (lambda m, a, b: m.einsum(a, [0, 1], b, [1, 2], [0, 2]), (2, 3),
                        (3, 4)),
}
EINSUM_SINGLE = ["ii->i", "ii", "ij->ji", "ij->", "ijk->kj", "iij->j", "i...->...",
                 "...ii->...i", "jii->ij"]


@pytest.mark.parametrize("name", list(PRODUCT_CASES))
def test_products(name, rng):
    f, sa, sb = PRODUCT_CASES[name]
    a, b = rng.standard_normal(sa), rng.standard_normal(sb)
    _assert_like(f(fnp, fnp.asarray(a), fnp.asarray(b)), f(np, a, b))
    _check_grads(lambda u, v: f(fnp, u, v), (a, b))


@pytest.mark.parametrize("spec", EINSUM_SINGLE)
def test_einsum_single_operand(spec, rng):
    x = rng.standard_normal((3, 3, 3)[:len(spec.split("->")[0].replace("...", "")) or 3])
    if "..." in spec:
        x = rng.standard_normal((2, 3, 3))
    _assert_like(fnp.einsum(spec, x), np.einsum(spec, x))
    _check_grads(lambda v: fnp.einsum(spec, v), (x,))


# ----------------------------------------------------------------------------
# Indexing

IDX = np.arange(60.0).reshape(3, 4, 5) / 7.0
INDEX_CASES = [
    1, -1, (0, 2), (-1, -2, -3), slice(1, None), (slice(None), slice(None, None, 2)),
    (slice(None, None, -1),), (Ellipsis, slice(3, 0, -2)), (slice(-2, None, -1), 1),
    (slice(5, 10),), (slice(2, 1),), None, (None, 0, None), (Ellipsis, None),
    (0, Ellipsis, 1), Ellipsis, (),
    [2, 0, 0], np.array([-1, 1]), (slice(None), [0, 3]), (slice(None), [0, 2], [1, 4]),
    ([0, 2], slice(None), [1, 4]), (1, slice(None), [0, 1, 4]), (slice(None), 1, [2, 3]),
    ([[0], [2]], slice(1, 3), [[1, 2, 3]]), (np.array([[0, 1], [2, 2]]),),
    (Ellipsis, np.array([0, -1])), (None, [1, 2], None, slice(None, None, -2)),
    (IDX[:, 0, 0] > 1,), (slice(None), IDX[0] > 3), (IDX > 4.0,), (slice(None), IDX[0, :, 0] < 1),
    ([True, False, True], slice(None), 1), True, (0, False), (np.int32(1), np.int64(-1)),
]


@pytest.mark.parametrize("idx", INDEX_CASES, ids=lambda i: repr(i)[:40])
def test_getitem(idx):
    _assert_like(fnp.asarray(IDX)[idx], IDX[idx])
    _check_grads(lambda x: x[idx], (IDX,))


def test_getitem_dtypes_and_tracers():
    x32 = fnp.asarray(IDX.astype(np.float32))
    assert x32[0, 1:].dtype == np.float32 and x32[[0, 1]].dtype == np.float32
    f = lambda x, i, j: x[i, :, j]  # noqa: E731
    jaxpr = fgrad.make_jaxpr(f)(IDX, np.int32(0), np.array([0, 1]))
    for i, j in ((2, np.array([4, -1])), (-1, np.array([-5, 0]))):
        _assert_like(eval_closed(jaxpr, IDX, np.int32(i), j)[0], IDX[i, :, j])
    jaxpr = fgrad.make_jaxpr(lambda x, i: x[i])(IDX, np.int32(0))
    _assert_like(eval_closed(jaxpr, IDX, np.int32(-2))[0], IDX[-2])
    g = fgrad.grad(lambda x: fnp.sum(x[[0, 0, 2], 1] ** 2))(IDX)
    expected = np.zeros_like(IDX)
    expected[0, 1] = 4 * IDX[0, 1]
    expected[2, 1] = 2 * IDX[2, 1]
    _assert_like(g, expected)


def test_getitem_errors():
    x = fnp.asarray(IDX)
    with pytest.raises(IndexError, match=r"index 4 is out of bounds for axis 1 with size 4"):
        x[0, 4]
    with pytest.raises(IndexError, match=r"index -6 is out of bounds for axis 2 with size 5"):
        x[:, :, [0, -6]]
    with pytest.raises(IndexError, match="too many indices"):
        x[0, 0, 0, 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        x[..., ...]
    with pytest.raises(IndexError, match="boolean index did not match"):
        x[np.array([True, False])]
    with pytest.raises(IndexError, match="could not be broadcast"):
        x[[0, 1], [0, 1, 2]]
    with pytest.raises(IndexError, match="valid indices"):
        x[1.5]
    with pytest.raises(fgrad.ConcretizationError, match="where"):
        fgrad.make_jaxpr(lambda v: v[v > 0])(IDX)
    with pytest.raises(fgrad.FgradTypeError, match="static"):
        fgrad.make_jaxpr(lambda v, i: v[i:])(IDX, 1)


AT_CASES = [
    (1, "set", 7.0), ((0, slice(1, 3)), "set", np.arange(5.0)),
    (([0, 2, 0], 1), "set", np.array([[1.0], [2.0], [3.0]])),
    (([0, 0, 2], 1, [4, 4, 4]), "add", 1.5), ((Ellipsis, 0), "add", np.ones((3, 4))),
    (([1, 1], [0, 0]), "add", np.arange(10.0).reshape(2, 5)),
    ((IDX > 5.0,), "multiply", 2.0), (([0, 0], 2), "mul", 3.0),
    ((slice(None), [1, 3]), "min", 0.5), ((2, [0, 0], slice(None, None, -2)), "max", 4.0),
    ((slice(None, None, -1), None, 0), "set", 0.0),
]


def _numpy_at(x, idx, op, v):
    out = x.copy()
    if op == "set":
        out[idx] = v
        return out
    ufunc = {"add": np.add, "multiply": np.multiply, "mul": np.multiply,
             "min": np.minimum, "max": np.maximum}[op]
    ufunc.at(out, idx, v)
    return out


@pytest.mark.parametrize("idx,op,v", AT_CASES, ids=lambda c: repr(c)[:30])
def test_at_updates(idx, op, v):
    got = getattr(fnp.asarray(IDX).at[idx], op)(v)
    _assert_like(got, _numpy_at(IDX, idx, op, v))
    assert got.dtype == IDX.dtype
    v = np.asarray(v, np.float64)
    _check_grads(lambda x, u: getattr(fnp.asarray(x).at[idx], op)(u), (IDX, v + 0.01))


def test_at_semantics():
    x = fnp.zeros(4)
    _assert_like(x.at[np.array([1, 1, 3])].add(1.0), [0, 2, 0, 1])
    _assert_like(x.at[[0, 0]].set(np.array([1.0, 2.0])), [2, 0, 0, 0])
    _assert_like(x.at[1:3].get(), [0, 0])
    x32 = fnp.zeros(3, np.float32)
    assert x32.at[0].set(2.5).dtype == np.float32
    assert x32.at[0].add(np.float64(1.0)).dtype == np.float32
    xi = fnp.zeros(3, np.int32)
    _assert_like(xi.at[1].set(2.7), [0, 2, 0])
    _assert_like(fnp.ones(3).at[1].divide(4.0), [1, 0.25, 1])
    _assert_like(fnp.full(3, 2.0).at[[0, 2]].power(3), [8, 2, 8])
    b = fnp.zeros(3, bool)
    _assert_like(b.at[[0, 0]].add(True), [True, False, False])
    with pytest.raises(fgrad.FgradTypeError, match=r"updates of shape \(4,\)"):
        fnp.zeros(3).at[:].set(np.ones(4))
    # gradient with respect to the updates: duplicates accumulate for add, last wins for set
    _assert_like(fgrad.grad(lambda u: fnp.sum(fnp.zeros(3).at[[0, 0, 1]].add(u) ** 2))(
        np.array([1.0, 2.0, 3.0])), [6.0, 6.0, 6.0])
    _assert_like(fgrad.grad(lambda u: fnp.sum(fnp.zeros(3).at[[0, 0]].set(u)))(
        np.array([1.0, 2.0])), [0.0, 1.0])


def test_at_traced_index():
    f = lambda x, i, v: x.at[i].add(v)  # noqa: E731
    jaxpr = fgrad.make_jaxpr(f)(IDX, np.int32(0), 1.0)
    _assert_like(eval_closed(jaxpr, IDX, np.int32(-1), 1.0)[0], _numpy_at(IDX, -1, "add", 1.0))
    jaxpr = fgrad.make_jaxpr(lambda x, i: x.at[:, i].set(0.0))(IDX, np.array([0, 1]))
    _assert_like(eval_closed(jaxpr, IDX, np.array([3, -1]))[0],
                 _numpy_at(IDX, (slice(None), [3, -1]), "set", 0.0))


def test_nonzero_family():
    m = np.array([[0, 1.5, 0], [2, 0, 3]])
    _assert_like(fnp.nonzero(m), np.nonzero(m))
    _assert_like(fnp.argwhere(m), np.argwhere(m))
    _assert_like(fnp.flatnonzero(m), np.flatnonzero(m))
    _assert_like(fnp.extract(m > 1, m), np.extract(m > 1, m))
    jaxpr = fgrad.make_jaxpr(lambda v: fnp.nonzero(v, size=4, fill_value=-1))(m)
    rows, cols = eval_closed(jaxpr, m)
    _assert_like(rows, [0, 1, 1, -1])
    _assert_like(cols, [1, 0, 2, -1])
    _assert_like(fnp.unravel_index(np.array([5, -1, 3]), (2, 3)),
                 np.unravel_index(np.array([5, 5, 3]), (2, 3)))
    _assert_like(fnp.ravel_multi_index((np.array([1, 0]), np.array([2, 1])), (2, 3)),
                 np.ravel_multi_index((np.array([1, 0]), np.array([2, 1])), (2, 3)))
    _assert_like(fnp.tril_indices(3, -1), np.tril_indices(3, -1))
    ii = fnp.ix_(np.array([0, 1]), np.array([2, 0]))
    _assert_like(fnp.asarray(m)[ii], m[np.ix_([0, 1], [2, 0])])


# ----------------------------------------------------------------------------
# Errors: operation names and shapes in the message

ERRORS = [
    (lambda: fnp.add(np.ones(3), np.ones(4)), r"add.*f64\[3\].*f64\[4\]"),
    (lambda: fnp.multiply(np.ones((2, 3)), np.ones(2)), r"multiply.*\[2,3\]"),
    (lambda: fnp.subtract(np.ones((2, 3)), 1.0) - np.ones(4), r"subtract.*\[2,3\].*\[4\]"),
    (lambda: fnp.asarray(np.ones(3)) < np.ones(2), r"less.*\[3\].*\[2\]"),
    (lambda: fnp.matmul(np.ones((2, 3)), np.ones((4, 5))), r"matmul.*\[2,3\].*\[4,5\]"),
    (lambda: fnp.matmul(np.ones((2, 2, 3)), np.ones((3, 3, 2))), r"matmul.*\(2,\).*\(3,\)"),
    (lambda: fnp.matmul(np.ones(3), 2.0), r"matmul"),
    (lambda: fnp.dot(np.ones((2, 3)), np.ones(2)), r"dot.*\[2,3\]"),
    (lambda: fnp.tensordot(np.ones((2, 3)), np.ones((2, 3)), 1), r"tensordot.*\[2,3\]"),
    (lambda: fnp.einsum("ij,jk->ik", np.ones((2, 3)), np.ones((4, 5))),
     r"einsum.*'j'.*3.*4"),
    (lambda: fnp.reshape(np.ones(6), (4, -1)), r"reshape.*\(6,\).*\(4, -1\)"),
    (lambda: fnp.concatenate([np.ones((2, 3)), np.ones((2, 4))]), r"concatenate.*\(2, 3\)"),
    (lambda: fnp.stack([np.ones(2), np.ones(3)]), r"stack.*\(2,\).*\(3,\)"),
    (lambda: fnp.broadcast_to(np.ones(3), (2, 4)), r"broadcast_to.*\(3,\).*\(2, 4\)"),
    (lambda: fnp.sum(np.ones(3), axis=1), r"sum.*axis 1"),
    (lambda: fnp.where(np.ones(3) > 0, np.ones(2), 0.0), r"where.*bool\[3\].*f64\[2\]"),
    (lambda: fnp.take_along_axis(np.ones((2, 3)), np.zeros(2, int), 1), r"take_along_axis"),
    (lambda: fnp.squeeze(np.ones((2, 3)), 0), r"squeeze.*\(2, 3\)"),
]


@pytest.mark.parametrize("fn,pattern", ERRORS, ids=lambda e: e if isinstance(e, str) else "")
def test_shape_errors(fn, pattern):
    with pytest.raises(fgrad.FgradTypeError, match=pattern):
        fn()


def test_errors_also_while_tracing():
    with pytest.raises(fgrad.FgradTypeError, match=r"matmul.*\[2,3\]"):
        fgrad.make_jaxpr(lambda a, b: a @ b)(np.ones((2, 3)), np.ones((2, 3)))
    with pytest.raises(fgrad.FgradTypeError, match=r"\[3\].*\[4\]"):
        fgrad.grad(lambda a: fnp.sum(a + np.ones(4)))(np.ones(3))


# ----------------------------------------------------------------------------
# Everything traces: make_jaxpr output equals eager output (values and types)

TRACED = {
    "ufuncs": lambda x, y: fnp.arcsinh(x) * fnp.remainder(x, 0.7) + fnp.hypot(x, y[0]),
    "compare": lambda x, y: fnp.where(fnp.isclose(x, x[0]), fnp.floor_divide(x, 0.3), y[1]),
    "reductions": lambda x, y: fnp.var(x, axis=1, keepdims=True) + fnp.prod(y, 0) +
    fnp.argmax(x, axis=1)[:, None] + fnp.cumsum(x, 1) - fnp.max(x) + fnp.mean(fnp.all(x > 0)),
    "shape": lambda x, y: fnp.concatenate([fnp.flip(x, 1), fnp.pad(x, ((0, 0), (1, 0)))[:, :3]]),
    "shape2": lambda x, y: fnp.tile(fnp.roll(x, 1), (2, 1)) + fnp.repeat(y[:1], 2, axis=0)[0],
    "linalg": lambda x, y: fnp.einsum("ij,kj->ik", x, y) + fnp.trace(x @ y.T) + fnp.diag(x[0, :2]),
    "indexing": lambda x, y: x[::-1, None, [0, 2]] + fnp.asarray(y)[1, 1:].at[0].add(x[0, 0]),
    "creation": lambda x, y: fnp.zeros_like(x) + fnp.arange(3) + fnp.eye(2, 3) + fnp.tri(2, 3),
    "nn": lambda x, y: fgrad.nn.softmax(x) + fgrad.nn.logsumexp(y, axis=0) +
    fgrad.nn.one_hot(fnp.argmax(x, 1), 3),
}


@pytest.mark.parametrize("name", list(TRACED))
def test_traced_equals_eager(name, rng):
    f = TRACED[name]
    x, y = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    eager = f(x, y)
    closed = fgrad.make_jaxpr(f)(x, y)
    (aval,) = closed.jaxpr.out_avals
    assert aval.shape == eager.shape and aval.dtype == eager.dtype
    _assert_like(eval_closed(closed, x, y)[0], eager)
    x32 = x.astype(np.float32)
    (aval32,) = fgrad.make_jaxpr(f)(x32, y.astype(np.float32)).jaxpr.out_avals
    assert aval32.dtype == np.float32


WINDOW_CASES = [0, -1, (1, slice(1, 3)), (slice(None), 2, slice(None, None, 2)),
                (Ellipsis, slice(4, 0, -2)), (slice(None, None, -1), 0), (slice(2, 2),), ()]


@pytest.mark.parametrize("op", ["set", "add", "multiply", "min", "max"])
@pytest.mark.parametrize("idx", WINDOW_CASES, ids=lambda i: repr(i)[:30])
def test_at_window_updates(idx, op, rng):
    """ints and slices only: the window path (no scatter of flat positions)."""
    shape = np.empty((3, 4, 5))[idx].shape
    v = rng.standard_normal(shape[1:] if shape else ())
    _assert_like(getattr(fnp.asarray(IDX).at[idx], op)(v), _numpy_at(IDX, idx, op, v))
    _check_grads(lambda x, u: getattr(fnp.asarray(x).at[idx], op)(u), (IDX, v))


# ----------------------------------------------------------------------------
# Array-API names, aliases and small helpers against NumPy (f(module, x) tables as above)

NAN_AT = np.zeros((2, 3, 4), bool)
NAN_AT[0, 1, 2] = NAN_AT[1, 0, :2] = True
API_CASES = {
    "atleast_1d": lambda m, x: m.atleast_1d(m.sum(x)),
    "atleast_1d_many": lambda m, x: m.atleast_1d(m.sum(x), x[0, 0], x),
    "atleast_2d": lambda m, x: m.atleast_2d(x[0, 0]),
    "atleast_2d_many": lambda m, x: m.atleast_2d(m.sum(x), x[0, 0], x),
    "compress": lambda m, x: m.compress([True, False, True], x, axis=1),
    "compress_short": lambda m, x: m.compress([0, 2], x, axis=-1),
    "compress_flat": lambda m, x: m.compress(X.ravel() > 0, x),
    "concat": lambda m, x: m.concat([x, 2 * x[:, :, :1]], axis=-1),
    "concat_none": lambda m, x: m.concat([x, x[0]], axis=None),
    "conjugate": lambda m, x: m.conjugate(x),
    "copy": lambda m, x: m.copy(x) * 2,
    "imag": lambda m, x: m.imag(x) + x,
    "cumulative_prod": lambda m, x: m.cumulative_prod(x, axis=1),
    "cumulative_prod_initial": lambda m, x: m.cumulative_prod(x, axis=-1, include_initial=True),
    "cumulative_prod_1d": lambda m, x: m.cumulative_prod(x[0, 0]),
    "nanprod": lambda m, x: m.nanprod(m.where(NAN_AT, m.nan, x)),
    "nanprod_axis": lambda m, x: m.nanprod(m.where(NAN_AT, m.nan, x), axis=2),
    "nanprod_keepdims": lambda m, x: m.nanprod(m.where(NAN_AT, m.nan, x), axis=(0, 2),
                                               keepdims=True),
    "expand_dims": lambda m, x: m.expand_dims(x, 1),
    "expand_dims_multi": lambda m, x: m.expand_dims(x, (0, -1)),
    "matrix_transpose": lambda m, x: m.matrix_transpose(x),
    "permute_dims": lambda m, x: m.permute_dims(x, (2, 0, 1)),
    "permute_dims_neg": lambda m, x: m.permute_dims(x, (-1, 0, 1)),
    "rollaxis": lambda m, x: m.rollaxis(x, 2),
    "rollaxis_start": lambda m, x: m.rollaxis(x, 0, 3),
    "rollaxis_neg": lambda m, x: m.rollaxis(x, -1, 1),
    # numpy.row_stack is a deprecated alias of vstack
    "row_stack": lambda m, x: (fnp.row_stack if m is fnp else np.vstack)([x[0, 0], x[1]]),
    "dsplit": lambda m, x: m.dsplit(x, 2),
    "dsplit_indices": lambda m, x: m.dsplit(x, [1, 3]),
    "hsplit": lambda m, x: m.hsplit(x, 3),
    "hsplit_1d": lambda m, x: m.hsplit(x[0, 0], [1]),
    "vsplit": lambda m, x: m.vsplit(x, 2),
    "vsplit_indices": lambda m, x: m.vsplit(x[0], [1, 5]),
}


@pytest.mark.parametrize("name", list(API_CASES))
def test_api_functions(name):
    f = API_CASES[name]
    eager = f(fnp, fnp.asarray(X))
    _assert_like(eager, f(np, X))
    _check_grads(lambda x: f(fnp, x), (X,))
    closed = fgrad.make_jaxpr(lambda x: f(fnp, x))(X)
    eager = list(eager) if isinstance(eager, (list, tuple)) else [eager]
    assert [(a.shape, a.dtype) for a in closed.jaxpr.out_avals] == \
        [(tuple(e.shape), e.dtype) for e in eager]
    _assert_like(list(eval_closed(closed, X)), eager)


API_PRODUCTS = {
    "vecdot": (lambda m, a, b: m.vecdot(a, b), (2, 3), (3,)),
    "vecdot_axis": (lambda m, a, b: m.vecdot(a, b, axis=0), (3, 2), (3, 1)),
    "vecdot_batch": (lambda m, a, b: m.vecdot(a, b), (4, 1, 3), (2, 3)),
    "matvec": (lambda m, a, b: m.matvec(a, b), (3, 4), (4,)),
    "matvec_batch": (lambda m, a, b: m.matvec(a, b), (2, 1, 3, 4), (5, 4)),
    "vecmat": (lambda m, a, b: m.vecmat(a, b), (3,), (3, 4)),
    "vecmat_batch": (lambda m, a, b: m.vecmat(a, b), (5, 3), (2, 1, 3, 4)),
}


@pytest.mark.parametrize("name", list(API_PRODUCTS))
def test_api_products(name, rng):
    f, sa, sb = API_PRODUCTS[name]
    a, b = rng.standard_normal(sa), rng.standard_normal(sb)
    _assert_like(f(fnp, a, b), f(np, a, b))
    _check_grads(lambda u, v: f(fnp, u, v), (a, b))
    closed = fgrad.make_jaxpr(lambda u, v: f(fnp, u, v))(a, b)
    _assert_like(eval_closed(closed, a, b)[0], f(np, a, b))
    ai = (np.arange(np.prod(sa, dtype=int)) % 5 - 2).astype(np.int32).reshape(sa)
    bi = (np.arange(np.prod(sb, dtype=int)) % 3 + 1).astype(np.int32).reshape(sb)
    assert f(fnp, ai, bi).dtype == np.int32
    _assert_like(f(fnp, ai, bi), f(np, ai, bi))


def test_api_shape_errors():
    with pytest.raises(ValueError, match="vsplit only works on arrays of 2 or more"):
        fnp.vsplit(np.ones(4), 2)
    with pytest.raises(ValueError, match="dsplit only works on arrays of 3 or more"):
        fnp.dsplit(np.ones((2, 4)), 2)
    with pytest.raises(ValueError, match="hsplit only works on arrays of 1 or more"):
        fnp.hsplit(np.float64(1.0), 1)
    with pytest.raises(ValueError, match="equal division"):
        fnp.hsplit(np.ones((2, 5)), 2)
    with pytest.raises(fgrad.FgradTypeError, match="matrix_transpose"):
        fnp.matrix_transpose(np.ones(3))
    with pytest.raises(fgrad.FgradTypeError, match="cumulative_prod: axis must be given"):
        fnp.cumulative_prod(np.ones((2, 3)))
    with pytest.raises(fgrad.FgradTypeError, match="expand_dims: repeated axis"):
        fnp.expand_dims(np.ones(3), (0, 0))
    with pytest.raises(IndexError, match="out of bounds"):
        fnp.compress([False, False, True], np.ones(2))
    with pytest.raises(fgrad.FgradTypeError, match="broadcast_shapes"):
        fnp.broadcast_shapes((2,), (3,))


BITS = {
    "int8": np.array([-128, -7, -1, 0, 3, 127], np.int8),
    "int32": np.array([-(2 ** 31), -7, -1, 0, 12, 2 ** 31 - 1], np.int32),
    "int64": np.array([-(2 ** 40), -5, 0, 2 ** 40 + 3], np.int64),
    "uint8": np.array([0, 1, 7, 200, 255], np.uint8),
    "bool": np.array([True, False, True]),
}


@pytest.mark.parametrize("dtype", list(BITS))
def test_bitwise_array_api_names(dtype):
    x = BITS[dtype]
    for name in ("bitwise_count", "bitwise_invert", "bitwise_not"):
        got = getattr(fnp, name)(x)
        want = getattr(np, name)(x)
        assert got.dtype == want.dtype, (name, got.dtype, want.dtype)
        _assert_like(got, want)
        closed = fgrad.make_jaxpr(getattr(fnp, name))(x)
        _assert_like(eval_closed(closed, x)[0], want)
    if dtype != "bool":
        bits = 8 * x.dtype.itemsize
        s = (np.arange(x.size) * 3 % bits).astype(x.dtype)
        for name in ("bitwise_left_shift", "bitwise_right_shift"):
            for y in (s, x.dtype.type(2), 1):
                got = getattr(fnp, name)(x, y)
                want = getattr(np, name)(x, y)
                assert got.dtype == x.dtype
                _assert_like(got, want)


def test_bitwise_count_details():
    _assert_like(fnp.bitwise_count(-7), np.bitwise_count(-7))
    assert fnp.bitwise_count(np.int16(-1)).dtype == np.uint8
    with pytest.raises(fgrad.FgradTypeError, match="bitwise_count"):
        fnp.bitwise_count(np.ones(2))
    with pytest.raises(fgrad.FgradTypeError, match="invert"):
        fnp.bitwise_invert(np.ones(2))
    with pytest.raises(fgrad.FgradTypeError, match="left_shift"):
        fnp.bitwise_left_shift(np.ones(2), 1)


INDEX_GENERATORS = {
    "diag_indices": lambda m: m.diag_indices(3),
    "diag_indices_3d": lambda m: m.diag_indices(2, 3),
    "diag_indices_0": lambda m: m.diag_indices(0),
    "triu_indices": lambda m: m.triu_indices(3),
    "triu_indices_k": lambda m: m.triu_indices(4, 1),
    "triu_indices_neg_k": lambda m: m.triu_indices(3, -1),
    "triu_indices_m": lambda m: m.triu_indices(3, 0, 5),
    "indices": lambda m: m.indices((2, 3)),
    "indices_3d": lambda m: m.indices((2, 1, 3)),
    "indices_sparse": lambda m: m.indices((2, 3), sparse=True),
    "indices_dtype": lambda m: m.indices((3, 2), dtype=np.float32),
    "indices_empty": lambda m: m.indices(()),
}


@pytest.mark.parametrize("name", list(INDEX_GENERATORS))
def test_index_generators(name):
    f = INDEX_GENERATORS[name]
    got, want = f(fnp), f(np)
    _assert_like(got, want)
    for g, w in zip(got if isinstance(got, tuple) else [got],
                    want if isinstance(want, tuple) else [want]):
        assert g.dtype == (np.float32 if w.dtype == np.float32 else np.int32)
    if name.startswith(("diag", "triu")) and name != "diag_indices_0":
        a = np.arange(60.0).reshape((4, 5, 3) if len(got) == 3 else (6, 10)) / 7.0
        _assert_like(fnp.asarray(a)[got], a[want])
        _check_grads(lambda v: v[got], (a,))


PROMOTE_SAME_KIND = [
    (np.int8, np.uint8), (np.int32, np.int64), (np.uint32, np.int32), (np.uint8, np.uint16),
    (np.bool_, np.int8), (np.bool_, np.uint16), (np.float16, np.float32),
    (np.float32, np.float64), (np.bool_, np.float16), ("float32", "f8"), (np.int16, np.int16),
]
# fgrad's lattice (as JAX): an integer meeting a float takes the float's dtype.
PROMOTE_MIXED = [(np.int32, np.float32, np.float32), (np.int16, np.float16, np.float16),
                 (np.int64, np.float32, np.float32), (np.uint8, np.float64, np.float64)]


def test_dtype_helpers():
    for t1, t2 in PROMOTE_SAME_KIND:
        want = np.promote_types(t1, t2)
        assert fnp.promote_types(t1, t2) == want and fnp.promote_types(t2, t1) == want
        assert fnp.result_type(t1, t2) == want
        assert fnp.result_type(np.ones(2, t1), np.zeros(1, t2)) == want
    for t1, t2, want in PROMOTE_MIXED:
        assert fnp.promote_types(t1, t2) == want and fnp.promote_types(t2, t1) == want
        assert fnp.result_type(np.ones(2, t1), t2) == want
    for x, y, want in PROMOTION:     # result_type agrees with what the ufuncs do
        assert fnp.result_type(x, y) == want == fnp.add(x, y).dtype
    assert fnp.result_type(np.float64, np.int16, np.bool_) == np.float64
    assert fnp.result_type(f32, 2.0) == np.result_type(f32, 2.0) == np.float32
    assert fnp.result_type(1.0) == np.float32 and fnp.result_type(1) == np.int32
    for shapes in [((2, 1), (3,), ()), ((), ()), ((1, 4), (5, 1, 1)), (3, (1,)), ()]:
        assert fnp.broadcast_shapes(*shapes) == np.broadcast_shapes(*shapes)
    for t, cls in [(np.float32, np.floating), (np.int8, np.signedinteger),
                   (np.uint8, np.signedinteger), (np.float64, np.integer),
                   (fnp.asarray(X).dtype, np.inexact), (np.bool_, np.number)]:
        assert fnp.issubdtype(t, cls) == np.issubdtype(t, cls)
