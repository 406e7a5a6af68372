"""Complex numbers: complex64 and complex128 as dtypes through creation,
promotion, the element-wise functions, reductions and matmul; real, imag, conj,
angle and the predicates; derivatives (check_grads on complex inputs, grad's
convention for real functions of complex inputs, holomorphic=True) and vmap."""
import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad import lax
from fgrad.test_util import check_grads

c64, c128 = np.dtype("complex64"), np.dtype("complex128")
f16, f32, f64 = np.dtype("float16"), np.dtype("float32"), np.dtype("float64")
i8, i32, i64, u8, u64 = (np.dtype(t) for t in ("int8", "int32", "int64", "uint8", "uint64"))
COMPLEX = [c64, c128]


def _z(shape, dtype=c128, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    return ((rng.standard_normal(shape) + 1j * rng.standard_normal(shape)) * scale).astype(dtype)


def _tol(dtype):
    return dict(rtol=2e-6, atol=2e-6) if dtype == c64 else dict(rtol=1e-13, atol=1e-13)


# ----------------------------------------------------------------------------
# Dtypes and creation

@pytest.mark.parametrize("dtype", COMPLEX, ids=str)
def test_creation_keeps_the_complex_dtype(dtype):
    for x in (fnp.zeros(3, dtype), fnp.ones((2, 2), dtype), fnp.full(2, 1 + 2j, dtype),
              fnp.asarray(np.array([1 + 2j, 3j], dtype)), fnp.array([1, 2j], dtype=dtype),
              fnp.arange(3).astype(dtype)):
        assert x.dtype == dtype and not x.weak_type


def test_python_complex_is_weakly_typed_complex64():
    z = fnp.asarray(1 + 2j)
    assert z.dtype == c64 and z.weak_type
    assert complex(z) == 1 + 2j
    assert fnp.asarray([1, 2j]).dtype == c64          # lists take 32-bit defaults
    assert fnp.asarray(np.complex128(1j)).dtype == c128  # NumPy values keep theirs


def test_python_complex_follows_the_array_it_meets():
    assert (fnp.ones(2, f32) * 1j).dtype == c64
    assert (fnp.ones(2, f64) * 1j).dtype == c128
    assert (fnp.ones(2, f16) + 1j).dtype == c64
    assert (fnp.ones(2, i64) + 1j).dtype == c64
    assert (fnp.ones(2, c128) + 1j).dtype == c128
    assert (fnp.ones(2, c64) + 2.5).dtype == c64      # a Python float never widens


# JAX's lattice (jax.numpy.promote_types): a complex dtype is as wide as its
# widest part, and integers leave it as it is.
PROMOTIONS = [
    (c64, c64, c64), (c64, c128, c128), (c64, f16, c64), (c64, f32, c64), (c64, f64, c128),
    (c128, f32, c128), (c64, i64, c64), (c64, u64, c64), (c64, bool, c64), (c128, i8, c128),
    (c64, u8, c64),
]


@pytest.mark.parametrize("a,b,expected", PROMOTIONS, ids=str)
def test_promotion_lattice(a, b, expected):
    assert fnp.promote_types(a, b) == expected
    assert fnp.promote_types(b, a) == expected
    x, y = fnp.ones(2, a), fnp.ones(2, b)
    assert (x + y).dtype == expected and (y * x).dtype == expected


def test_supported_dtype_names():
    assert fnp.complex64 is np.complex64 and fnp.complex128 is np.complex128
    assert fnp.issubdtype(c64, fnp.complexfloating)
    with pytest.raises(TypeError, match="does not support dtype complex256"):
        fnp.zeros(2, "complex256")


# ----------------------------------------------------------------------------
# Element-wise functions: values against NumPy

def _away_from_cuts(shape, dtype, seed):
    """Values with |re| >= 0.3 (log, sqrt and power have their branch cut on the
    negative real axis; keep them off it and away from 0)."""
    z = _z(shape, c128, seed)
    re = np.where(np.abs(z.real) < 0.3, 0.3 + np.abs(z.real), z.real)
    return (re + 1j * z.imag).astype(dtype)


UNARY = {
    "negative": (fnp.negative, np.negative), "positive": (fnp.positive, np.positive),
    "exp": (fnp.exp, np.exp), "log": (fnp.log, np.log), "sqrt": (fnp.sqrt, np.sqrt),
    "sin": (fnp.sin, np.sin), "cos": (fnp.cos, np.cos), "tan": (fnp.tan, np.tan),
    "sinh": (fnp.sinh, np.sinh), "cosh": (fnp.cosh, np.cosh), "tanh": (fnp.tanh, np.tanh),
    "expm1": (fnp.expm1, np.expm1), "log1p": (fnp.log1p, np.log1p),
    "log2": (fnp.log2, np.log2), "log10": (fnp.log10, np.log10),
    "exp2": (fnp.exp2, np.exp2), "square": (fnp.square, np.square),
    "reciprocal": (fnp.reciprocal, np.reciprocal), "abs": (fnp.abs, np.abs),
    "sign": (fnp.sign, np.sign), "conj": (fnp.conj, np.conj), "real": (fnp.real, np.real),
    "imag": (fnp.imag, np.imag), "angle": (fnp.angle, np.angle),
    "cube": (lambda z: z ** 3, lambda z: z ** 3), "rint": (fnp.rint, np.rint),
    "arcsin": (fnp.arcsin, np.arcsin), "arccos": (fnp.arccos, np.arccos),
    "arctan": (fnp.arctan, np.arctan), "arcsinh": (fnp.arcsinh, np.arcsinh),
    "arccosh": (fnp.arccosh, np.arccosh), "arctanh": (fnp.arctanh, np.arctanh),
    "round1": (lambda z: fnp.round(z, 1), lambda z: np.round(z, 1)),
}


@pytest.mark.parametrize("dtype", COMPLEX, ids=str)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_values(name, dtype):
    fn, ref = UNARY[name]
    z = _away_from_cuts((2, 3), dtype, 1)
    out, expected = fn(z), ref(z)
    assert out.dtype == expected.dtype, (out.dtype, expected.dtype)
    np.testing.assert_allclose(np.asarray(out), expected, **_tol(dtype))


BINARY = {
    "add": (fnp.add, np.add), "subtract": (fnp.subtract, np.subtract),
    "multiply": (fnp.multiply, np.multiply), "divide": (fnp.divide, np.divide),
    "power": (fnp.power, np.power), "equal": (fnp.equal, np.equal),
    "not_equal": (fnp.not_equal, np.not_equal),
}


@pytest.mark.parametrize("dtype", COMPLEX, ids=str)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_values(name, dtype):
    fn, ref = BINARY[name]
    x = _away_from_cuts((2, 3), dtype, 2)
    y = _away_from_cuts((3,), dtype, 3)
    if name in ("equal", "not_equal"):
        y = x[1]
    out, expected = fn(x, y), ref(x, y)
    assert out.dtype == expected.dtype
    np.testing.assert_allclose(np.asarray(out), expected, **_tol(dtype))


@pytest.mark.parametrize("dtype", COMPLEX, ids=str)
def test_mixed_real_and_complex_operands(dtype):
    z = _z((3,), dtype, 4)
    x = np.array([-1.0, 0.5, 2.0]).astype(np.dtype(f"float{dtype.itemsize * 4}"))
    for fn, ref in ((fnp.add, np.add), (fnp.multiply, np.multiply),
                    (fnp.divide, np.divide)):
        np.testing.assert_allclose(np.asarray(fn(x, z)), ref(x, z), **_tol(dtype))
        np.testing.assert_allclose(np.asarray(fn(z, x)), ref(z, x), **_tol(dtype))


def test_predicates_and_nan_handling():
    z = np.array([1 + 0j, 2j, np.nan + 1j, 1 + np.inf * 1j, 3 - 0j], c128)
    for name in ("isnan", "isinf", "isfinite", "iscomplex", "isreal"):
        np.testing.assert_array_equal(np.asarray(getattr(fnp, name)(z)), getattr(np, name)(z))
    np.testing.assert_array_equal(np.asarray(fnp.nan_to_num(z)), np.nan_to_num(z))
    assert fnp.iscomplexobj(fnp.ones(2, c64)) and not fnp.iscomplexobj(fnp.ones(2))
    assert fnp.isrealobj(np.ones(2)) and not fnp.isrealobj(1j)
    x = np.array([-1.0, 2.0])
    np.testing.assert_array_equal(np.asarray(fnp.real(x)), x)
    np.testing.assert_array_equal(np.asarray(fnp.imag(x)), np.zeros(2))
    np.testing.assert_array_equal(np.asarray(fnp.conj(x)), x)
    np.testing.assert_allclose(np.asarray(fnp.angle(x, deg=True)), np.angle(x, deg=True))
    a, b = z[:2], z[:2] + 1e-9
    np.testing.assert_array_equal(np.asarray(fnp.isclose(a, b)), np.isclose(a, b))


def test_array_properties():
    z = fnp.asarray(_z((2,), c64))
    np.testing.assert_array_equal(np.asarray(z.real), np.asarray(z).real)
    np.testing.assert_array_equal(np.asarray(z.imag), np.asarray(z).imag)
    np.testing.assert_array_equal(np.asarray(z.conjugate()), np.asarray(z).conj())


@pytest.mark.parametrize("fn", [fnp.maximum, fnp.minimum, fnp.less, fnp.greater_equal],
                         ids=lambda f: f.__name__)
def test_orderings_raise(fn):
    z = fnp.ones(2, c64)
    with pytest.raises(TypeError, match="complex numbers have no order"):
        fn(z, z)
    with pytest.raises(TypeError, match="complex"):
        fnp.max(z)
    with pytest.raises(TypeError, match="complex"):
        fnp.floor(z)


def test_lax_complex_builds_from_parts():
    x, y = np.array([1.0, -2.0], f32), np.array([0.5, 3.0], f32)
    z = lax.complex(x, y)
    assert z.dtype == c64
    np.testing.assert_array_equal(np.asarray(z), x + 1j * y)
    assert lax.complex(x.astype(f64), 1.0).dtype == c128
    with pytest.raises(TypeError, match="float32 or float64"):
        lax.complex(x.astype(f16), x.astype(f16))
    with pytest.raises(TypeError, match="requires a complex operand"):
        lax.real(x)


# ----------------------------------------------------------------------------
# Reductions and matmul

@pytest.mark.parametrize("dtype", COMPLEX, ids=str)
def test_reductions_and_matmul(dtype):
    a, b = _z((3, 4), dtype, 5), _z((4, 2), dtype, 6)
    for fn, ref in ((fnp.sum, np.sum), (fnp.prod, np.prod), (fnp.mean, np.mean),
                    (fnp.var, np.var), (fnp.std, np.std), (fnp.cumsum, np.cumsum)):
        out = fn(a, axis=1)
        assert out.dtype == ref(a, axis=1).dtype
        np.testing.assert_allclose(np.asarray(out), ref(a, axis=1), **_tol(dtype))
    np.testing.assert_allclose(np.asarray(a @ b), a @ b, **_tol(dtype))
    np.testing.assert_allclose(np.asarray(fnp.einsum("ij,jk->ik", a, b)), a @ b, **_tol(dtype))
    np.testing.assert_allclose(np.asarray(fnp.vdot(a, a)), np.vdot(a, a), **_tol(dtype))


# ----------------------------------------------------------------------------
# Derivatives: check_grads on complex inputs (both parts perturbed)

SMOOTH = {
    "exp": fnp.exp, "log": fnp.log, "sqrt": fnp.sqrt, "sin": fnp.sin, "cos": fnp.cos,
    "tan": fnp.tan, "sinh": fnp.sinh, "cosh": fnp.cosh, "tanh": fnp.tanh,
    "expm1": fnp.expm1, "log1p": fnp.log1p, "reciprocal": fnp.reciprocal,
    "square": fnp.square, "abs": fnp.abs, "sign": fnp.sign, "conj": fnp.conj,
    "real": fnp.real, "imag": fnp.imag, "angle": fnp.angle, "cube": lambda z: z ** 3,
    "power": lambda z: z ** (z * 0.5), "rational": lambda z: (z * z - 1j) / (z + 2),
    "abs2": lambda z: fnp.abs(z) ** 2, "sum": fnp.sum, "prod": fnp.prod, "mean": fnp.mean,
    "var": fnp.var, "cumsum": fnp.cumsum, "matmul": lambda z: z @ z[::-1],
    "outer": lambda z: fnp.outer(z, fnp.conj(z)),
    "to_real": lambda z: lax.convert_element_type(z, f64) * fnp.imag(z),
    "from_real": lambda z: fnp.real(z).astype(c128) * z,
    "parts": lambda z: lax.complex(fnp.imag(z) ** 2, fnp.real(z) * 3.0),
    "arcsin": fnp.arcsin, "arccos": fnp.arccos, "arctan": fnp.arctan,
    "arcsinh": fnp.arcsinh, "arccosh": fnp.arccosh, "arctanh": fnp.arctanh,
}


@pytest.mark.parametrize("name", sorted(SMOOTH))
def test_check_grads(name):
    check_grads(SMOOTH[name], (_away_from_cuts((3,), c128, 7),), order=2)


def test_check_grads_mixed_real_and_complex_arguments():
    x = np.array([0.3, -1.2])
    z = _away_from_cuts((2,), c128, 8)
    check_grads(lambda x, z: fnp.exp(x * z) + x, (x, z), order=2)


# ----------------------------------------------------------------------------
# grad's convention: for real f(x + iy), grad f = df/dx - i df/dy

def test_grad_of_squared_magnitude_is_twice_the_conjugate():
    z = np.array(3.0 + 4.0j)
    g = fgrad.grad(lambda z: fnp.abs(z) ** 2)(z)
    assert g.dtype == c128
    np.testing.assert_allclose(np.asarray(g), 2 * np.conj(z))   # 6 - 8j
    g = fgrad.grad(lambda z: fnp.real(z * fnp.conj(z)))(z)
    np.testing.assert_allclose(np.asarray(g), 6 - 8j)


def test_grad_of_real_inner_product():
    # f = Re(z conj(w)) = xz xw + yz yw: df/dz = xw - i yw = conj(w), df/dw = conj(z)
    z, w = np.array(1.5 - 0.5j), np.array(-2.0 + 0.25j)
    gz, gw = fgrad.grad(lambda z, w: fnp.real(z * fnp.conj(w)), argnums=(0, 1))(z, w)
    np.testing.assert_allclose(np.asarray(gz), np.conj(w))
    np.testing.assert_allclose(np.asarray(gw), np.conj(z))


def test_grad_matches_partial_derivatives_by_finite_differences():
    def f(z):
        return fnp.sum(fnp.abs(fnp.sin(z)) * fnp.real(z) + fnp.imag(z ** 2))

    z = _z((3,), c128, 9)
    g = np.asarray(fgrad.grad(f)(z))
    eps = 1e-6
    for k in range(3):
        e = np.zeros(3)
        e[k] = eps
        dx = (float(f(z + e)) - float(f(z - e))) / (2 * eps)
        dy = (float(f(z + 1j * e)) - float(f(z - 1j * e))) / (2 * eps)
        np.testing.assert_allclose(g[k], dx - 1j * dy, rtol=1e-7)


def test_gradient_descent_with_the_conjugate_minimises():
    target = np.array([1.0 - 2.0j, 0.5j])

    def loss(z):
        return fnp.sum(fnp.abs(z - target) ** 2)

    z = np.zeros(2, c128)
    for _ in range(50):
        z = z - 0.25 * np.conj(np.asarray(fgrad.grad(loss)(z)))
    np.testing.assert_allclose(z, target, atol=1e-10)


def test_grad_of_complex_output_needs_holomorphic():
    with pytest.raises(TypeError, match="holomorphic=True"):
        fgrad.grad(lambda z: z * z)(np.array(1j))
    with pytest.raises(TypeError, match="holomorphic=True"):
        fgrad.jacrev(lambda z: z * z)(np.array([1j]))
    with pytest.raises(TypeError, match="holomorphic=True"):
        fgrad.jacfwd(lambda z: fnp.abs(z))(np.array([1j]))


def test_holomorphic_needs_complex_inputs_and_outputs():
    with pytest.raises(TypeError, match="must be complex"):
        fgrad.grad(lambda x: x * 1j, holomorphic=True)(np.array(1.0))
    with pytest.raises(TypeError, match="output must be complex"):
        fgrad.grad(lambda z: fnp.abs(z), holomorphic=True)(np.array(1j))
    with pytest.raises(TypeError, match="output must be complex"):
        fgrad.jacfwd(lambda z: fnp.abs(z), holomorphic=True)(np.array([1j]))


# ----------------------------------------------------------------------------
# holomorphic=True: the complex derivative

HOLOMORPHIC = {
    "sin": (fnp.sin, np.cos), "exp": (fnp.exp, np.exp), "log": (fnp.log, lambda z: 1 / z),
    "sqrt": (fnp.sqrt, lambda z: 0.5 / np.sqrt(z)),
    "tanh": (fnp.tanh, lambda z: 1 / np.cosh(z) ** 2),
    "poly": (lambda z: z ** 3 - 2j * z, lambda z: 3 * z ** 2 - 2j),
    "arcsin": (fnp.arcsin, lambda z: 1 / np.sqrt(1 - z * z)),
    "arccosh": (fnp.arccosh, lambda z: 1 / (np.sqrt(z - 1) * np.sqrt(z + 1))),
}


@pytest.mark.parametrize("name", sorted(HOLOMORPHIC))
def test_holomorphic_grad_is_the_complex_derivative(name):
    fn, deriv = HOLOMORPHIC[name]
    z = _away_from_cuts((), c128, 10)
    g = fgrad.grad(fn, holomorphic=True)(z)
    np.testing.assert_allclose(np.asarray(g), deriv(z), rtol=1e-12)


def test_holomorphic_jacfwd_equals_jacrev():
    a = _z((3, 3), c128, 11)

    def f(z):
        return fnp.exp(a @ z) * z[0]

    z = _z((3,), c128, 12)
    jf = fgrad.jacfwd(f, holomorphic=True)(z)
    jr = fgrad.jacrev(f, holomorphic=True)(z)
    assert jf.dtype == c128 and jf.shape == (3, 3)
    np.testing.assert_allclose(np.asarray(jf), np.asarray(jr), rtol=1e-12)
    # column k is the derivative along e_k
    e = np.zeros(3, c128)
    e[1] = 1
    _, col = fgrad.jvp(f, (z,), (e,))
    np.testing.assert_allclose(np.asarray(jf)[:, 1], np.asarray(col), rtol=1e-12)


def test_jacrev_of_a_real_function_of_complex_inputs_follows_grad():
    z = _z((2,), c128, 13)
    j = fgrad.jacrev(lambda z: fnp.abs(z) ** 2)(z)
    np.testing.assert_allclose(np.asarray(j), np.diag(2 * np.conj(z)), rtol=1e-12)


# ----------------------------------------------------------------------------
# vmap equals a loop

@pytest.mark.parametrize("fn", [fnp.exp, fnp.abs, fnp.real, fnp.conj, fnp.angle,
                                lambda z: fnp.sum(z * fnp.conj(z[::-1])),
                                lambda z: lax.complex(fnp.imag(z), fnp.real(z))])
def test_vmap_equals_a_loop(fn):
    zs = _z((4, 3), c64, 14)
    out = fgrad.vmap(fn)(zs)
    expected = np.stack([np.asarray(fn(z)) for z in zs])
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-6)


def test_vmap_of_grad_on_complex_inputs():
    zs = _z((4,), c128, 15)
    g = fgrad.vmap(fgrad.grad(lambda z: fnp.abs(fnp.sin(z))))(zs)
    expected = [np.asarray(fgrad.grad(lambda z: fnp.abs(fnp.sin(z)))(z)) for z in zs]
    np.testing.assert_allclose(np.asarray(g), expected, rtol=1e-12)


# ----------------------------------------------------------------------------
# The GPU backend refuses complex programs (planning needs no GPU)

def test_gpu_backend_refuses_complex_clearly():
    from fgrad._src.gpu.executable import GpuExecutable
    real = fgrad.make_jaxpr(lambda x: fnp.sin(x) * 2)(np.ones(3, f32))
    GpuExecutable(real, "real_program")             # a real program plans fine
    for f in (lambda z: z * 2,
              lambda x: fnp.real(x * 1j),            # complex only inside
              lambda x: lax.fori_loop(0, 2, lambda i, c: c + fnp.abs(c * 1j), x)):
        closed = fgrad.make_jaxpr(f)(np.ones(3, c64) if f.__code__.co_varnames[0] == "z"
                                     else np.ones(3, f32))
        with pytest.raises(TypeError, match="complex numbers are not supported by the GPU"):
            GpuExecutable(closed, "complex_program")


# ----------------------------------------------------------------------------
# jit: native complex arithmetic, equal to eager bit for bit

def _bits_equal(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _steps(jitted, *args):
    text = jitted.lower(*args).as_text()
    return [line.split(": ", 1)[1] for line in text.splitlines()
            if line.startswith("// ") and line[3:4].isdigit()]


JIT_PROGRAMS = {
    "arithmetic": lambda z, w: (z * w - w / (z + 1.5j)) * 2.0 + fnp.conj(z),
    "functions": lambda z, w: fnp.exp(z) * fnp.sqrt(w) + fnp.log(z) - fnp.tanh(w) / fnp.cos(z),
    # (angle is atan2 of the parts: fgrad's real math library, a few ulp from NumPy's)
    "parts": lambda z, w: lax.complex(fnp.abs(z) * fnp.real(w), -fnp.imag(w)) + fnp.sign(z),
    "powers": lambda z, w: z ** 3 + fnp.reciprocal(w) + fnp.square(z - w),
    "views": lambda z, w: z[::-1] * w[1:].sum() + fnp.flip(w) / z,
    "mixed": lambda z, w: fnp.real(z) * 3 + z.astype(c128) * fnp.imag(w).astype(f32),
}


@pytest.mark.parametrize("dtype", COMPLEX, ids=str)
@pytest.mark.parametrize("name", sorted(JIT_PROGRAMS))
def test_jit_equals_eager_bit_for_bit(name, dtype):
    f = JIT_PROGRAMS[name]
    z, w = _away_from_cuts((64,), dtype, 16), _away_from_cuts((64,), dtype, 17)
    assert _bits_equal(fgrad.jit(f)(z, w), f(fnp.asarray(z), fnp.asarray(w)))


def test_jit_of_grad_on_complex_inputs():
    def loss(z, w):
        return fnp.sum(fnp.abs(fnp.exp(z) * w - 1.0) ** 2)

    z, w = _z((16,), c128, 18), _z((16,), c128, 19)
    g = fgrad.grad(loss, argnums=(0, 1))
    for a, b in zip(fgrad.jit(g)(z, w), g(z, w)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-13)


def test_jit_lowers_complex_arithmetic_natively():
    z = _away_from_cuts((8,), c64, 20)
    steps = _steps(fgrad.jit(JIT_PROGRAMS["arithmetic"]), z, z)
    assert steps and all(s.startswith("native:") for s in steps), steps
    # what has no native lowering runs as a NumPy step, and as_text says so
    steps = _steps(fgrad.jit(lambda z, w: fnp.power(z, w) + fnp.log1p(z)), z, z)
    assert "numpy:pow" in steps and "numpy:log1p" in steps, steps
    assert any(s.startswith("native:") for s in steps), steps
