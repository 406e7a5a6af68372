"""jit and eager give the same bits for correctly rounded float arithmetic:
signs of zeros (no `nsz`), a*b + c rounded twice (no fma contraction),
maximum/minimum/clip of 0.0 and -0.0 (NumPy keeps the second operand; its
float16 loops the first), and sums of zeros. Each case is compared bit for bit
(NaNs as NaNs). Not covered, by design: which of +0.0 and -0.0 a max/min
reduction returns (see cpu/fused.py), and transcendental functions (a few ulp)."""
import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp

# The cases divide by zero and take inf - inf on purpose: NumPy's warnings are noise.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

CASES = {
    "0 - x": lambda x: 0.0 - x,
    "arctan2(0 - x, -1)": lambda x: fnp.arctan2(0.0 - x, -1.0),
    "1 / (0 - x)": lambda x: 1.0 / (0.0 - x),
    "x * 0": lambda x: x * 0.0,
    "1 / (x * 0)": lambda x: 1.0 / (x * 0.0),
    "x + (-0.0)": lambda x: x + (-0.0),
    "(x - x) * -1": lambda x: (x - x) * -1.0,
    "-(x - x)": lambda x: -(x - x),
    "x * x - x * x": lambda x: x * x - x * x,
    "max(x, -x)": lambda x: fnp.maximum(x, -x),
    "min(x, -x)": lambda x: fnp.minimum(x, -x),
    "max(-x, x)": lambda x: fnp.maximum(-x, x),
    "clip(x, -0, 0)": lambda x: fnp.clip(x, -0.0, 0.0),
    "clip(-x, -0, 0)": lambda x: fnp.clip(-x, -0.0, 0.0),
    "max(x, 0)": lambda x: fnp.maximum(x, 0.0),
    "min(x, -0)": lambda x: fnp.minimum(x, -0.0),
    "max(-0, x)": lambda x: fnp.maximum(-0.0, x),
    "copysign(1, 0 - x)": lambda x: fnp.copysign(1.0, 0.0 - x),
    "sign(0 - x)": lambda x: fnp.sign(0.0 - x),
    "abs(x) * -0": lambda x: fnp.abs(x) * -0.0,
    "sqrt(0 - x)": lambda x: fnp.sqrt(0.0 - x),
    "x / -inf": lambda x: x / -np.inf,
    "floor(0 - x)": lambda x: fnp.floor(0.0 - x),
    "round(x * -0.1)": lambda x: fnp.round(x * -0.1),
    "where(x > 1, x, 0 - x) * 1": lambda x: fnp.where(x > 1, x, 0.0 - x) * 1.0,
}

VALUES = [0.0, -0.0, 1.0, -1.0, 0.25, -3.0, np.inf, -np.inf, 1e-40, -1e-40, np.nan]


def _assert_same_bits(got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, what
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan, err_msg=what)
    u = f"u{want.dtype.itemsize}"
    np.testing.assert_array_equal(got[~nan].view(u), want[~nan].view(u), err_msg=what)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(CASES))
def test_jit_keeps_the_sign_of_zero(name, dtype):
    fn = CASES[name]
    x = np.array(VALUES, dtype)
    _assert_same_bits(fgrad.jit(fn)(x), fn(x), f"{name} on {x}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_scalar_arctan2_of_negated_zero(dtype):
    """The issue's repro: arctan2(0.0 - x, -1.0) at x = +0.0 is +pi, jitted too."""
    f = lambda x: fnp.arctan2(0.0 - x, -1.0)
    x = dtype(0.0)
    assert np.asarray(fgrad.jit(f)(x)) == np.asarray(f(x)) == dtype(np.pi)
    inv = lambda x: 1.0 / (0.0 - x)
    assert np.asarray(fgrad.jit(inv)(x)) == np.asarray(inv(x)) == np.inf


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_multiply_add_is_rounded_twice(dtype):
    """a*b + c is two roundings, as in NumPy: never contracted into one fma."""
    k = np.finfo(dtype).nmant // 2 + 1
    a = np.full(8, 1 + 2.0 ** -k, dtype)           # a*a = 1 + 2^(1-k) + 2^-2k exactly
    c = np.full(8, -(1 + 2.0 ** (1 - k)), dtype)
    f = lambda a, c: a * a + c
    want = f(a, c)
    assert np.all(np.asarray(want) == 0)           # 2^-2k is below half an ulp of 1
    _assert_same_bits(fgrad.jit(f)(a, c), want, "a*a + c")
    g = lambda a, c: c + a * a
    _assert_same_bits(fgrad.jit(g)(a, c), g(a, c), "c + a*a")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 7, 64, 1000])
def test_sums_of_zeros_have_numpys_sign(n, dtype):
    """NumPy's sums start from +0.0 (a sum of -0.0s is +0.0); cumsum starts from
    the first element; products keep the sign."""
    x = np.full(n, -0.0, dtype)
    for f in (fnp.sum, lambda x: fnp.sum(x * 1.0), lambda x: fnp.sum(x.reshape(1, -1), axis=1),
              lambda x: fnp.sum(x.reshape(-1, 1), axis=0), fnp.cumsum,
              lambda x: fnp.prod(x - 1.0) * 0.0):
        _assert_same_bits(fgrad.jit(f)(x), f(x), "sum of -0.0")
