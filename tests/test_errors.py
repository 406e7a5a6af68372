"""Error messages: what went wrong, where (the user's source line), and a hint."""
import os

import numpy as np
import pytest

import fgrad
from fgrad import lax

f64 = np.float64
THIS_FILE = os.path.basename(__file__)


def _sum(x):
    return lax.reduce_sum(x, tuple(range(len(x.shape))))


# ----------------------------------------------------------------------------
# grad's input and output checks

def test_grad_of_non_scalar_output():
    with pytest.raises(TypeError, match="scalar") as info:
        fgrad.grad(lambda x: lax.sin(x))(np.ones(3))
    msg = str(info.value)
    assert "(3,)" in msg
    assert "<lambda>" in msg
    with pytest.raises(TypeError, match=r"scalar[\s\S]*\(2, 4\)"):
        fgrad.value_and_grad(lambda x: x * 2.0)(np.ones((2, 4)))


def test_grad_of_non_array_output():
    with pytest.raises(TypeError, match="scalar"):
        fgrad.grad(lambda x: (x, x))(f64(1.0))
    with pytest.raises(TypeError, match="has_aux|scalar"):
        fgrad.grad(lambda x: [x * 2.0, "aux"])(f64(1.0))


def test_grad_of_integer_output():
    with pytest.raises(TypeError, match="floating-point"):
        fgrad.grad(lambda x: lax.convert_element_type(x, np.int32))(f64(1.5))


@pytest.mark.parametrize("value,dtype", [(np.int32(3), "int32"),
                                         (np.arange(3, dtype=np.int64), "int64"),
                                         (np.array([True]), "bool"),
                                         (3, "int32")])
def test_grad_with_respect_to_integer_input(value, dtype):
    with pytest.raises(TypeError, match=dtype) as info:
        fgrad.grad(lambda x: f64(1.0))(value)
    assert "allow_int" in str(info.value)


def test_grad_integer_input_inside_pytree():
    with pytest.raises(TypeError, match="int32"):
        fgrad.grad(lambda p: p["x"])({"x": f64(1.0), "n": np.int32(2)})


def test_grad_of_unsupported_value():
    with pytest.raises(TypeError, match="str|<U5"):
        fgrad.grad(lambda x: x)("hello")
    with pytest.raises(TypeError, match="object|dict_keys"):
        fgrad.make_jaxpr(lambda x: x)({"a": 1}.keys())


# ----------------------------------------------------------------------------
# Shape and dtype errors name the op, the shapes, and the user's line

def _assert_shape_message(err):
    msg = str(err)
    assert "add" in msg
    assert "f64[3]" in msg and "f64[4]" in msg
    assert THIS_FILE in msg, msg
    assert "hint" in msg


def test_shape_mismatch_under_make_jaxpr():
    with pytest.raises(fgrad.FgradTypeError) as info:
        fgrad.make_jaxpr(lambda x, y: lax.add(x, y))(np.ones(3), np.ones(4))
    _assert_shape_message(info.value)


def test_shape_mismatch_eagerly():
    with pytest.raises(fgrad.FgradTypeError) as info:
        lax.add(np.ones(3), np.ones(4))
    _assert_shape_message(info.value)


def test_shape_mismatch_under_grad_and_jvp():
    y = np.ones(4)
    with pytest.raises(fgrad.FgradTypeError) as info:
        fgrad.grad(lambda x: _sum(lax.add(x, y)))(np.ones(3))
    _assert_shape_message(info.value)
    with pytest.raises(fgrad.FgradTypeError) as info:
        fgrad.jvp(lambda x: lax.add(x, y), (np.ones(3),), (np.ones(3),))
    _assert_shape_message(info.value)


def test_shape_error_points_at_the_users_line():
    def model(x):
        h = lax.sin(x)
        return lax.add(h, np.ones((2, 2)))  # the bad line
    line = model.__code__.co_firstlineno + 2
    with pytest.raises(fgrad.FgradTypeError) as info:
        fgrad.make_jaxpr(model)(np.ones(3))
    assert f"{THIS_FILE}:{line}" in str(info.value)
    assert "model" in str(info.value)


def test_fgrad_type_error_is_a_type_error():
    assert issubclass(fgrad.FgradTypeError, TypeError)


def test_dtype_mismatch_under_make_jaxpr():
    with pytest.raises(fgrad.FgradTypeError) as info:
        fgrad.make_jaxpr(lax.add)(np.ones(3), np.ones(3, np.float32))
    msg = str(info.value)
    assert "add" in msg and "dtype" in msg
    assert "f64[3]" in msg and "f32[3]" in msg
    assert "hint" in msg and "astype" in msg


@pytest.mark.parametrize("other", [np.ones(3, np.float32), np.ones(3, np.int32)],
                         ids=["f32", "i32"])
def test_dtype_mismatch_eagerly(other):
    with pytest.raises(fgrad.FgradTypeError, match="dtype"):
        lax.add(np.ones(3), other)


def test_float_only_op_on_integers_message():
    with pytest.raises(fgrad.FgradTypeError, match="sin") as info:
        fgrad.make_jaxpr(lax.sin)(np.arange(3, dtype=np.int32))
    assert "i32[3]" in str(info.value) and "floating-point" in str(info.value)


def test_jvp_tangent_dtype_and_shape_mismatch():
    with pytest.raises(TypeError, match="dtype"):
        fgrad.jvp(lax.sin, (np.ones(3),), (np.ones(3, np.float32),))
    with pytest.raises(TypeError, match=r"shape \(2,\)"):
        fgrad.jvp(lax.sin, (np.ones(3),), (np.ones(2),))


# ----------------------------------------------------------------------------
# Escaped tracers

def test_escaped_tracer_from_grad():
    saved = []

    def f(x):
        saved.append(x)
        return lax.sin(x)
    fgrad.grad(f)(f64(1.0))
    for use in (lambda t: lax.add(t, 1.0), lambda t: t * 2.0, lambda t: lax.sin(t)):
        with pytest.raises(fgrad.EscapedTracerError) as info:
            use(saved[0])
        msg = str(info.value)
        assert "escaped" in msg or "after that transform finished" in msg, msg
        assert "grad of f" in msg
        assert "global" in msg  # says how it probably happened


def test_escaped_tracer_from_make_jaxpr_and_jvp():
    saved = []

    def f(x):
        saved.append(x)
        return x * 2.0
    fgrad.make_jaxpr(f)(np.ones(2))
    fgrad.jvp(f, (np.ones(2),), (np.ones(2),))
    for t in saved:
        with pytest.raises(fgrad.EscapedTracerError):
            lax.mul(t, t)


def test_escaped_tracer_used_inside_a_later_transform():
    saved = []
    fgrad.grad(lambda x: saved.append(x) or x * x)(f64(1.0))
    with pytest.raises(fgrad.EscapedTracerError):
        fgrad.grad(lambda y: y * saved[0])(f64(2.0))
    with pytest.raises(fgrad.EscapedTracerError):
        fgrad.make_jaxpr(lambda y: y * saved[0])(f64(2.0))


def test_escaped_tracer_error_is_a_runtime_error():
    assert issubclass(fgrad.EscapedTracerError, RuntimeError)


# ----------------------------------------------------------------------------
# Concretization

def test_bool_of_tracer_under_make_jaxpr():
    def f(x):
        if lax.gt(x, 0.0):
            return x
        return -x
    with pytest.raises(fgrad.ConcretizationError) as info:
        fgrad.make_jaxpr(f)(f64(1.0))
    msg = str(info.value)
    assert "bool" in msg
    assert "hint" in msg and "where" in msg
    assert "make_jaxpr of f" in msg


@pytest.mark.parametrize("convert", [float, int, lambda t: t.item(), lambda t: t.tolist()],
                         ids=["float", "int", "item", "tolist"])
def test_other_concretizations_under_make_jaxpr(convert):
    with pytest.raises(fgrad.ConcretizationError, match="concrete"):
        fgrad.make_jaxpr(lambda x: convert(x))(f64(1.0))


@pytest.mark.parametrize("convert", [float, complex, lambda t: t.item(), lambda t: t.tolist()],
                         ids=["float", "complex", "item", "tolist"])
@pytest.mark.parametrize("transform", ["grad", "jvp", "vjp", "hessian"])
def test_python_number_of_a_differentiated_value_is_refused(convert, transform):
    """float(x) under grad would cut x off its derivative: a silent zero gradient."""
    def f(x):
        return f64(convert(x * x))
    x = f64(3.0)
    with pytest.raises(fgrad.ConcretizationError) as info:
        if transform == "grad":
            fgrad.grad(f)(x)
        elif transform == "jvp":
            fgrad.jvp(f, (x,), (f64(1.0),))
        elif transform == "vjp":
            fgrad.vjp(f, x)
        else:
            fgrad.hessian(f)(x)
    msg = str(info.value)
    assert "derivative" in msg and "f64[]" in msg and "stop_gradient" in msg


def test_control_flow_and_stopped_values_still_convert_under_grad():
    def f(x):
        scale = float(fgrad.stop_gradient(x))       # a constant, by the user's choice
        if x > 0:                                    # bool(): piecewise, exact
            return x * scale + int(x)                # int(): zero derivative a.e.
        return -x
    assert float(fgrad.grad(f)(f64(3.5))) == 3.5
    assert float(fgrad.grad(f)(f64(-2.0))) == -1.0


def test_numpy_conversion_of_tracer_inside_grad():
    def f(x):
        return f64(np.asarray(x).sum())
    with pytest.raises(fgrad.ConcretizationError) as info:
        fgrad.grad(f)(np.ones(3))
    msg = str(info.value)
    assert "NumPy" in msg and "f64[3]" in msg
    assert "hint" in msg and "fgrad.numpy" in msg


def test_numpy_conversion_of_tracer_under_make_jaxpr_and_jvp():
    with pytest.raises(fgrad.ConcretizationError, match="NumPy"):
        fgrad.make_jaxpr(lambda x: np.asarray(x))(np.ones(2))
    with pytest.raises(fgrad.ConcretizationError, match="NumPy"):
        fgrad.jvp(lambda x: np.array(x) * 2, (np.ones(2),), (np.ones(2),))


def test_concretization_error_is_a_type_error():
    assert issubclass(fgrad.ConcretizationError, TypeError)


# ----------------------------------------------------------------------------
# Misuse of the transforms

def test_argnums_out_of_range_message():
    with pytest.raises(TypeError, match=r"argnums=2.*1 positional"):
        fgrad.grad(lambda x: x, argnums=2)(f64(1.0))


def test_config_rejects_unknown_option():
    with pytest.raises(AttributeError, match="check_jaxprs"):
        fgrad.config.update("no_such_option", True)


# ----------------------------------------------------------------------------
# Arrays are immutable: item assignment says so and shows .at

@pytest.mark.parametrize("index, text", [
    (0, "0"), ((0, slice(1, None)), "0, 1:"), ((Ellipsis, None), "..., None"),
    (slice(None, None, 2), "::2"), (np.int64(2), "2"), (np.array([0, 1]), "i")])
def test_item_assignment_says_arrays_are_immutable(index, text):
    import fgrad.numpy as fnp
    x = fnp.zeros((3, 3))
    with pytest.raises(TypeError) as info:
        x[index] = 1.0
    msg = str(info.value)
    assert "immutable" in msg and f"x = x.at[{text}].set(value)" in msg
    np.testing.assert_array_equal(np.asarray(x), np.zeros((3, 3)))


def test_item_assignment_and_deletion_of_a_traced_value():
    import fgrad.numpy as fnp

    def assign(x):
        x[1] = 0.0
        return x

    for transform in (fgrad.jit, fgrad.grad, fgrad.vmap):
        with pytest.raises(TypeError, match=r"immutable(?s:.*)x\.at\[1\]\.set"):
            transform(lambda x: fnp.sum(assign(x)))(np.ones(3))
    with pytest.raises(TypeError, match=r"immutable: del x\[0\]"):
        del fnp.ones(3)[0]


@pytest.mark.parametrize("method, hint", [
    ("sort", "fgrad.numpy.sort(x)"), ("fill", "full_like"), ("put", "x.at[indices].set"),
    ("itemset", "x.at[index].set"), ("resize", "reshape"), ("partition", "sort"),
    ("setflags", "x.at")])
def test_numpys_in_place_methods_say_what_to_write_instead(method, hint):
    import fgrad.numpy as fnp
    x = fnp.array([3.0, 1.0, 2.0])
    with pytest.raises(TypeError, match=r"x\.%s\(\.\.\.\) changes a NumPy array in place"
                       % method) as info:
        getattr(x, method)(0)
    assert hint in str(info.value)
    np.testing.assert_array_equal(np.asarray(x), [3.0, 1.0, 2.0])
    with pytest.raises(TypeError, match="immutable"):
        fgrad.jit(lambda x: getattr(x, method)(0))(np.ones(3))


def test_augmented_assignment_rebinds_and_numpy_targets_are_written():
    import fgrad.numpy as fnp
    a = fnp.ones(3)
    b = a
    a += 1                     # a new array: b, the same object before, is unchanged
    np.testing.assert_array_equal(np.asarray(b), np.ones(3))
    np.testing.assert_array_equal(np.asarray(a), np.full(3, 2.0))


    def traced(x):
        y = x
        x += 1.0               # rebinds the traced x too; y is still the argument
        x *= 2.0
        return y, x

    for transform in (fgrad.jit, lambda f: lambda x: fgrad.vmap(f)(x)):
        y, x = transform(traced)(np.ones(3))
        np.testing.assert_array_equal(np.asarray(y), np.ones(3))
        np.testing.assert_array_equal(np.asarray(x), np.full(3, 4.0))
    n = np.ones(3)
    view = n
    n += fnp.arange(3.0)       # NumPy updates its own array in place, as with NumPy values
    assert view is n
    np.testing.assert_array_equal(n, [1.0, 2.0, 3.0])
    with pytest.raises(fgrad.ConcretizationError):
        fgrad.jit(lambda x: np.add(np.ones(3), x, out=np.empty(3)))(np.ones(3))


# ----------------------------------------------------------------------------
# Arrays too large to index: the operation, the shape and the limit

BIG = [
    ("broadcast_to", lambda a: fnp_().broadcast_to(a, (2**62, 4)), "f32[4611686018427387904,4]"),
    ("broadcast_to", lambda a: fnp_().broadcast_to(a, (2**64,)), "f32[18446744073709551616]"),
    ("broadcast_in_dim", lambda a: lax.broadcast_in_dim(a, (2**61,), (0,)),
     "f32[2305843009213693952]"),
    ("add", lambda a: lax.broadcast_in_dim(a, (2**40, 1), (1,))
     + lax.broadcast_in_dim(a, (1, 2**30), (1,)), "f32[1099511627776,1073741824]"),
    ("dot_general", lambda a: lax.broadcast_in_dim(a, (2**31, 1), (1,))
     @ lax.broadcast_in_dim(a, (1, 2**31), (1,)), "f32[2147483648,2147483648]"),
    ("zeros", lambda a: fnp_().zeros((2**40, 2**40)) + a, "f32[1099511627776,1099511627776]"),
    ("iota", lambda a: lax.iota(np.float32, 2**62) + a, "f32[4611686018427387904]"),
]


def fnp_():
    import fgrad.numpy as fnp
    return fnp


@pytest.mark.parametrize("how", ["eager", "jit", "make_jaxpr"])
@pytest.mark.parametrize("case", range(len(BIG)))
def test_too_large_arrays_name_the_op_the_shape_and_the_limit(case, how):
    name, fn, shape = BIG[case]
    a = np.ones(1, np.float32)
    run = {"eager": lambda: fn(fnp_().asarray(a)), "jit": lambda: fgrad.jit(fn)(a),
           "make_jaxpr": lambda: fgrad.make_jaxpr(fn)(a)}[how]
    with pytest.raises(fgrad.ArrayTooLargeError) as info:
        run()
    msg = str(info.value)
    assert msg.startswith(f"{name}: ") and shape in msg and "2^63 - 1 bytes" in msg, msg
    assert THIS_FILE in msg and "hint" in msg
    assert isinstance(info.value, ValueError) and isinstance(info.value, TypeError)


@pytest.mark.parametrize("name, make", [
    ("zeros", lambda: fnp_().zeros((2**62, 4))), ("ones", lambda: fnp_().ones(2**64)),
    ("full", lambda: fnp_().full((2**62, 4), 1.0)), ("eye", lambda: fnp_().eye(2**32)),
    ("linspace", lambda: fnp_().linspace(0.0, 1.0, 2**62)),
    ("indices", lambda: fnp_().indices((2**31, 2**31))),
    ("reshape", lambda: fnp_().reshape(fnp_().ones(4), (2**62, 2**62))),
    ("broadcast_in_dim", lambda: fgrad.random.normal(fgrad.random.key(0), (2**62,)))])
def test_creating_too_large_arrays(name, make):
    with pytest.raises(fgrad.ArrayTooLargeError, match=f"^{name}: .*2\\^63 - 1 bytes"):
        make()


def test_the_size_limit_is_in_bytes_and_exact():
    fine = fgrad.make_jaxpr(lambda a: fnp_().broadcast_to(a, (2**63 - 1,)))(np.ones(1, bool))
    assert "bool[9223372036854775807]" in str(fine)
    fgrad.make_jaxpr(lambda a: fnp_().broadcast_to(a, (2**61 - 1, 4)))(np.ones(1, np.int8))
    with pytest.raises(fgrad.ArrayTooLargeError, match="2\\^63 bytes"):
        fgrad.make_jaxpr(lambda a: fnp_().broadcast_to(a, (2**63,)))(np.ones(1, bool))
    with pytest.raises(fgrad.ArrayTooLargeError):
        fgrad.make_jaxpr(lambda a: fnp_().broadcast_to(a, (2**61, 4)))(np.ones(1, np.int8))


def test_incompatible_shapes_are_still_reported_as_such():
    def f(a):
        return (lax.broadcast_in_dim(a, (3,), (0,))
                + lax.broadcast_in_dim(a, (2**62,), (0,)))
    for transform in (fgrad.make_jaxpr, fgrad.jit):
        with pytest.raises(fgrad.FgradTypeError,
                           match=r"add: incompatible shapes for broadcasting: bool\[3\], "
                                 r"bool\[4611686018427387904\]") as info:
            transform(f)(np.ones(1, bool))
        assert not isinstance(info.value, fgrad.ArrayTooLargeError)


def test_arange_bounds_that_do_not_fit_the_dtype():
    fnp = fnp_()
    with pytest.raises(OverflowError, match=r"arange: 9223372036854775808 .*int32(?s:.*)int64"):
        fnp.arange(2**63)                      # NumPy gives an empty int32 array
    with pytest.raises(OverflowError, match="int64"):
        fnp.arange(0, 2**63, dtype=np.int64)
    with pytest.raises(fgrad.ArrayTooLargeError, match="arange"):
        fnp.arange(0, 2**62, dtype=np.int64)   # fits int64, but 2^65 bytes
    np.testing.assert_array_equal(np.asarray(fnp.arange(10, 0, -3)), [10, 7, 4, 1])
