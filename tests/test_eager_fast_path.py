"""The eager fast paths give what the general path gives: NumPy operands that
fgrad.numpy converts on its quick path (util.promote) must come out with the same
values, dtypes and weak types as when converted by fnp.asarray first, never share
memory with the caller's array, and the quiet element-wise impls must not leak
NumPy's floating-point warnings or change its error state."""
import warnings

import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad import FgradTypeError, jit, lax
from fgrad._src import core

DTYPES = [np.bool_, np.int8, np.int32, np.int64, np.uint8, np.float16, np.float32,
          np.float64, np.complex64, np.complex128]
UNARY = ["sin", "exp", "negative", "abs", "sqrt", "tanh", "log1p", "square"]
BINARY = ["add", "subtract", "multiply", "true_divide", "maximum", "power"]


def _sample(dtype, shape=(4,)):
    vals = np.array([1, 2, 3, 0], dtype=np.float64).reshape(-1)[:int(np.prod(shape))]
    return vals.reshape(shape).astype(dtype)


def _same(a, b):
    assert a.dtype == b.dtype
    assert a.weak_type == b.weak_type
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def _outcome(fn, *args):
    """fn(*args), or the error type and message it raises."""
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001 - compared between the two paths
        return (type(e), str(e))


def _check(fast, slow):
    if isinstance(slow, tuple):
        assert fast == slow
    else:
        _same(fast, slow)


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("dtype", DTYPES)
def test_unary_numpy_operand_matches_asarray(name, dtype):
    fn = getattr(fnp, name)
    for x in (_sample(dtype), _sample(dtype)[0]):        # an array and a NumPy scalar
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _check(_outcome(fn, x), _outcome(fn, fnp.asarray(x)))


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("da", DTYPES)
@pytest.mark.parametrize("db", [np.int32, np.float32, np.float64, np.complex64])
def test_binary_numpy_operands_match_asarray(name, da, db):
    fn = getattr(fnp, name)
    a, b = _sample(da), _sample(db)
    operands = [(a, b), (a, fnp.asarray(b)), (fnp.asarray(a), b), (a[0], fnp.asarray(b)),
                (fnp.asarray(a), b[0]), (a, 2), (2.5, b), (a[0], b[0])]
    for x, y in operands:
        ax = x if isinstance(x, (int, float, fgrad.Array)) else fnp.asarray(x)
        ay = y if isinstance(y, (int, float, fgrad.Array)) else fnp.asarray(y)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _check(_outcome(fn, x, y), _outcome(fn, ax, ay))


def test_numpy_operand_is_copied():
    x = np.ones(4, np.float32)
    zeros = fnp.zeros(4, np.float32)
    outs = [fnp.negative(x), fnp.add(x, zeros), fnp.multiply(x, 1.0), fnp.fabs(x),
            zeros + x, x - zeros, zeros * x[0] + 1]
    x[:] = 7
    for out in outs:
        assert np.all(np.abs(np.asarray(out)) == 1)


def test_unsupported_numpy_dtype_still_refused():
    with pytest.raises(TypeError, match="does not support dtype"):
        fnp.sin(np.array(["a"]))
    with pytest.raises(TypeError, match="does not support dtype"):
        fnp.sin(np.zeros(2, np.dtype(">f4")))
    with pytest.raises(TypeError, match="does not support dtype"):
        fnp.add(np.zeros(2, np.float32), np.zeros(2, np.dtype(">f4")))


def test_numpy_operands_under_transforms():
    c = np.linspace(0, 1, 4, dtype=np.float32)

    def f(x):
        return fnp.sum(fnp.sin(c) * x + c * c)
    x = fnp.ones(4, np.float32)
    np.testing.assert_allclose(fgrad.grad(f)(x), np.sin(c), rtol=1e-6)
    np.testing.assert_allclose(fgrad.jit(f)(x), f(x), rtol=1e-6)
    np.testing.assert_allclose(fgrad.vmap(lambda x: fnp.sin(c) * x)(fnp.ones((3, 4))),
                               np.broadcast_to(np.sin(c), (3, 4)), rtol=1e-6)


def test_quiet_impls_warn_nothing_and_keep_numpy_error_state():
    before = np.geterr()
    with np.errstate(all="raise"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            out = fnp.sin(np.array([np.inf, 1.0], np.float32))
            assert np.isnan(np.asarray(out)[0])
            fnp.log(np.array([0.0], np.float32))
            big = fnp.asarray(np.array([1e30], np.float32))
            assert np.isinf(np.asarray(fgrad.lax.integer_pow(big, 2)))   # keyword impls
            wide = fnp.asarray(np.array([1e300], np.float64))
            assert np.isinf(np.asarray(fgrad.lax.convert_element_type(wide, np.float32)))
        with pytest.raises(FloatingPointError):
            np.log(np.array([0.0]))                  # NumPy's own state is untouched
    assert np.geterr() == before


def test_quiet_impls_follow_changes_of_numpy_state():
    x = np.array([0.0], np.float32)
    fnp.log(x)                                        # prepared from the default state
    with np.errstate(divide="raise"):
        fnp.log(x)                                    # rebuilt from this one
        with pytest.raises(FloatingPointError):
            np.log(np.array([0.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fnp.log(x)                                    # back to the default state
        with pytest.warns(RuntimeWarning):
            np.log(np.array([0.0]))


def _elementwise_primitives(arity):
    from fgrad._src.lax import elementwise
    prims = [p for p in vars(elementwise).values()
             if isinstance(p, core.Primitive) and p.elementwise and not p.multiple_results
             and p.weak_args is None]
    out = []
    for p in prims:
        try:
            p.abstract_eval(*[core.ShapedArray((2,), np.dtype(np.float32))] * arity)
        except Exception:  # noqa: BLE001 - another arity, or needs parameters
            continue
        out.append(p)
    return out


def _bind_general(bind, args):
    """The general eager path (an output check turns the lean path off)."""
    core.set_output_check(lambda *a: None)
    try:
        return _outcome(bind, *args)
    finally:
        core.set_output_check(None)


_VALUES = [(np.float32, False), (np.float32, True), (np.float64, False), (np.int32, False),
           (np.int32, True), (np.bool_, False), (np.complex64, False), (np.uint8, False)]


def _arr(dtype, weak, shape=(3,)):
    n = int(np.prod(shape))
    return fgrad.Array(np.linspace(-2, 2, n).reshape(shape).astype(dtype), weak)


def _check_lean_against_general(fn, arity, extra_pairs):
    """fn on every operand kind of _VALUES (and, for two operands, broadcasting
    shapes and each of `extra_pairs` as the second operand): the lean path's
    outcome is the general path's."""
    for (da, wa) in _VALUES:
        operand_sets = [(_arr(da, wa),)] if arity == 1 else [
            (_arr(da, wa), _arr(db, wb)) for db, wb in _VALUES[:5]] + [
            (_arr(da, wa, (3,)), _arr(da, wa, (2, 1)))] + [
            (_arr(da, wa), y) for y in extra_pairs]
        for args in operand_sets:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                lean = _outcome(fn, *args)
                general = _bind_general(fn, args)
            _check(lean, general)


@pytest.mark.parametrize("arity", [1, 2])
def test_lean_eager_path_matches_general_path(arity):
    prims = _elementwise_primitives(arity)
    assert len(prims) > (20 if arity == 1 else 10)
    for prim in prims:
        bind = prim.bind     # one call site: errors name the same user line
        _check_lean_against_general(bind, arity, extra_pairs=())


def _lax_ops():
    """fgrad.lax's element-wise functions that take the lean path (`_unary_op`, made
    by core.lean_unary, and `_binary_op`), with their arity."""
    from fgrad._src.lax import elementwise
    ops = []
    for fn in vars(elementwise).values():
        kind = getattr(fn, "__qualname__", "").split(".")[0]
        if kind in ("lean_unary", "_binary_op"):
            ops.append((fn, 1 if kind == "lean_unary" else 2))
    return ops


def test_lax_functions_lean_path_matches_general_path():
    ops = _lax_ops()
    assert len(ops) > 30
    for fn, arity in ops:
        _check_lean_against_general(fn, arity, extra_pairs=(2.0,))


def test_lean_paths_check_operand_values_not_a_loaded_backend(monkeypatch):
    """Once a device library has loaded, host operands still take the lean paths
    (EvalTrace is not called), while an Array holding a device value goes to the
    general path, which hands it to its platform."""
    from fgrad._src import placement

    class DeviceValue:
        dtype = np.dtype(np.float32)
        shape = (2,)

    class Platform:
        def run_eager(self, prim, vals, params):
            ran.append(prim.name)
            return DeviceValue()

    ran = []
    monkeypatch.setattr(placement, "array_types", (DeviceValue,))
    monkeypatch.setitem(placement._platform_of_type, DeviceValue, Platform())
    x = np.linspace(-1, 1, 4, dtype=np.float32)
    with monkeypatch.context() as m:
        def refuse(*args):
            raise AssertionError("the general path ran")
        m.setattr(core.EvalTrace, "process_primitive", refuse)
        _same(fnp.sin(x), fnp.asarray(np.sin(x)))
        a = fnp.asarray(x)
        _same(-a * a + a / 2.0, fnp.asarray(-x * x + x / np.float32(2)))
        _same(fgrad.lax.exp(a), fnp.asarray(np.exp(x)))
    d = fgrad.Array(DeviceValue())
    assert type(fnp.sin(d)._value) is DeviceValue
    assert type((d * d)._value) is DeviceValue
    assert ran == ["sin", "mul"]


def _bits(a):
    """An fgrad or NumPy float value's bytes, dtype and weak type (-0.0 and NaN exact)."""
    v = np.asarray(a)
    return v.tobytes(), v.dtype, getattr(a, "weak_type", False)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("shape", [(3,), (), "scalar"])
def test_python_numbers_lifted_exactly(dtype, shape):
    """A Python number meeting an Array is lifted to the Array's dtype exactly as the
    general path lifts it (zeros keep their sign, NaN, overflow to inf), the second
    time (a remembered lifted value: a 0-d array beside an ndarray, a scalar beside a
    scalar) as the first, eagerly and on the tape, with the same kind of result."""
    v = np.array([1.5, -2.0, 0.0], dtype)
    x = fgrad.Array(v if shape == (3,) else v[1] if shape == "scalar" else v[1, ...].copy())
    numbers = [0.0, -0.0, 0, 1, 1.0, 3, -7.25, 1e300, float("nan"), float("inf"), 2 ** 60]
    for y in numbers:
        for _ in range(2):
            for op in (lambda a, b: a * b, lambda a, b: b - a, lambda a, b: a + b,
                       lambda a, b: b / a):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")     # overflow in the cast, inf - inf
                    general = _bind_general(op, (x, y))
                    lean = op(x, y)
                    assert _bits(lean) == _bits(general), (y, dtype)
                    assert type(lean._value) is type(general._value)
                    taped, g = fgrad.value_and_grad(lambda a: fnp.sum(op(a, y)))(x)
                    assert _bits(taped) == _bits(fnp.sum(general)), (y, dtype)
                    fgrad.config.update("eager_tape", False)
                    try:
                        _, g_jaxpr = fgrad.value_and_grad(lambda a: fnp.sum(op(a, y)))(x)
                    finally:
                        fgrad.config.update("eager_tape", True)
                    # (the jaxpr path may order a NaN's negation differently)
                    assert _bits(g)[1:] == _bits(g_jaxpr)[1:]
                    np.testing.assert_array_equal(np.asarray(g), np.asarray(g_jaxpr))
    assert all(not a.flags.writeable for a in core._LIFTED.values() if type(a) is np.ndarray)


_REFUSED_KINDS = [
    (lax.sin, (np.int8(3),)), (lax.exp, (np.arange(3, dtype=np.int32),)),
    (lax.erf, (np.int32(1),)), (lax.erf, (np.complex64(1),)),
    (lax.logistic, (np.complex64(1),)), (lax.neg, (np.uint8(3),)),
    (lax.abs, (np.bool_(True),)), (lax.div, (np.bool_(True), np.bool_(True))),
    (lax.rem, (np.bool_(True), np.bool_(True))), (lax.max, (np.bool_(True), np.bool_(False))),
    (lax.add, (np.bool_(True), np.bool_(True))), (lax.atan2, (np.int32(2), np.int32(3))),
    (lax.is_finite, (np.int32(2),)), (lax.round, (np.int32(2),)),
    (lambda x: lax.reduce_sum(x, (0,)), (np.array([True, False]),)),
]


@pytest.mark.parametrize("fn,args", _REFUSED_KINDS,
                         ids=[f"{getattr(f, '__name__', '')}-{a[0].dtype}" for f, a in _REFUSED_KINDS])
@pytest.mark.parametrize("as_arrays", [False, True])
def test_eager_lax_refuses_the_dtypes_jit_refuses(fn, args, as_arrays):
    """A lax primitive refuses eagerly what its shape rule refuses under jit:
    NumPy's impl would have promoted the operands (lax.sin of an int8 gave a
    float16, lax.div of bools a float64, lax.erf of an int32 an int32, reduce_sum
    of bools their `any`)."""
    with pytest.raises(FgradTypeError):
        jit(fn)(*args)
    with pytest.raises(FgradTypeError):
        fn(*[fnp.asarray(a) for a in args] if as_arrays else args)


@pytest.mark.parametrize("fn,args", [
    (lax.shift_right_logical, (np.float32(8), np.float32(1))),
    (lax.population_count, (np.float64(3),)), (lax.bitwise_and, (np.float32(2), np.float32(1)))])
def test_eager_bit_operations_refuse_floats(fn, args):
    """The lean float paths run only primitives whose rule takes floats: an eager
    shift_right_logical or population_count of floats gave numbers (jit refuses)."""
    for operands in (args, [fnp.asarray(a) for a in args]):
        with pytest.raises(FgradTypeError):
            fn(*operands)
