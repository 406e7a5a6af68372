"""sort as a native merge sort (fgrad/_src/cpu/sorting.py) against the NumPy impl,
bit for bit: every dtype, NaNs and signed zeros (stability keeps -0.0/0.0 in
order), several keys, argsort, every axis, lengths around powers of two."""
import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad import jit, lax
from fgrad._src.jit.primitive import compile_jaxpr

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.int32, np.uint32, np.int64, np.uint64,
          np.float16, np.float32, np.float64]


def _labels(f, *args):
    return [k.label for k in compile_jaxpr(jit(f).lower(*args).jaxpr, "f").kernels]


def _bits(a):
    a = np.ascontiguousarray(a)
    return a.view(np.uint8) if a.dtype != np.bool_ else a


def _data(dt, shape, rng):
    if dt == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if np.dtype(dt).kind == "f":
        x = rng.integers(-4, 4, shape).astype(dt) * np.asarray(0.5, dt)   # many ties
        flat = x.reshape(-1)
        flat[::7] = np.nan
        flat[1::5] = -0.0
        flat[2::9] = np.inf
        return x
    info = np.iinfo(dt)
    return rng.integers(max(info.min, -5), min(info.max, 5), shape, endpoint=True).astype(dt)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape,axis", [((1,), 0), ((2,), 0), ((7,), 0), ((16,), 0), ((17,), 0),
                                        ((5, 9), 0), ((5, 9), 1), ((3, 4, 6), 1)])
def test_sort_and_argsort_match_numpy(dt, shape, axis):
    x = _data(dt, shape, np.random.default_rng(0))
    f = lambda x: (lax.sort(x, dimension=axis), fnp.argsort(x, axis=axis))  # noqa: E731
    assert _labels(f, x).count("native:sort") == 2
    for got, want in zip(jit(f)(x), f(x)):
        np.testing.assert_array_equal(_bits(got), _bits(want))


def test_several_keys_carry_the_other_operands():
    rng = np.random.default_rng(1)
    k1 = rng.integers(0, 3, 40).astype(np.int8)
    k2 = _data(np.float32, (40,), rng)
    v = np.arange(40.0)
    f = lambda a, b, c: lax.sort((a, b, c), num_keys=2)  # noqa: E731
    for got, want in zip(jit(f)(k1, k2, v), f(k1, k2, v)):
        np.testing.assert_array_equal(_bits(got), _bits(want))


def test_sorting_inside_gradients_and_random_permutations():
    x = np.array([0.3, -1.2, 2.5, 0.0, 1.1])
    loss = lambda x: fnp.sum(fnp.sort(x) * fnp.arange(5.0))  # noqa: E731
    np.testing.assert_allclose(jit(fgrad.grad(loss))(x), fgrad.grad(loss)(x))
    key = fgrad.random.key(3)
    perm = lambda k: fgrad.random.permutation(k, 50)  # noqa: E731
    np.testing.assert_array_equal(jit(perm)(key), perm(key))
    assert "native:sort" in _labels(perm, key)
