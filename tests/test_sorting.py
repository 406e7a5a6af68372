"""The sort primitive (lax.sort, lax.sort_key_val) and fgrad.numpy's sort,
argsort and searchsorted: against NumPy for several dtypes, axes and NaNs;
derivatives by finite differences; vmap and jit."""
import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad import lax
from fgrad.test_util import check_grads

rng = np.random.default_rng(0)


def sample(dtype, shape, nans=False):
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if np.dtype(dtype).kind in "iu":
        return rng.integers(-5 if np.dtype(dtype).kind == "i" else 0, 6, shape).astype(dtype)
    x = rng.integers(-4, 5, shape).astype(dtype)  # plenty of ties
    x = x + rng.random(shape).astype(dtype) * (rng.random(shape) < 0.5)
    if nans:
        x[rng.random(shape) < 0.2] = np.nan
        x.flat[0] = -0.0
    return x


DTYPES = [np.float32, np.float64, np.int32, np.bool_, np.uint8, np.int64]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("axis", [0, 1, 2, -1, None])
def test_sort_and_argsort_match_numpy(dtype, axis):
    x = sample(dtype, (3, 4, 5), nans=True)
    out = fnp.sort(x, axis=axis)
    assert out.dtype == x.dtype
    np.testing.assert_array_equal(out, np.sort(x, axis=axis))
    perm = fnp.argsort(x, axis=axis)
    assert perm.dtype == np.int32
    np.testing.assert_array_equal(perm, np.argsort(x, axis=axis, kind="stable"))


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
def test_descending_is_stable(dtype):
    x = sample(dtype, (4, 9), nans=True)
    perm = np.asarray(fnp.argsort(x, axis=1, descending=True))
    # reference: stable sort of the negated order key (NaNs first when descending)
    for row, p in zip(x, perm):
        key = [(not np.isnan(v) if dtype == np.float32 else True,
                -float(v) if not (dtype == np.float32 and np.isnan(v)) else 0.0, i)
               for i, v in enumerate(row)]
        np.testing.assert_array_equal(p, [i for *_, i in sorted(key)])
    np.testing.assert_array_equal(fnp.sort(x, axis=1, descending=True),
                                  x[np.arange(4)[:, None], perm])


def test_lax_sort_of_several_operands():
    keys = np.array([[2, 1, 2, 1, 0], [0, 0, 0, 0, 0]], np.int32)
    second = np.array([[5.0, 4.0, 3.0, 4.0, 9.0], [3.0, 1.0, 2.0, 1.0, 0.0]])
    payload = np.arange(10.0).reshape(2, 5)
    a, b, c = lax.sort((keys, second, payload), num_keys=2)
    order = np.lexsort((second, keys), axis=-1)
    take = lambda v: np.take_along_axis(v, order, -1)  # noqa: E731
    np.testing.assert_array_equal(a, take(keys))
    np.testing.assert_array_equal(b, take(second))
    np.testing.assert_array_equal(c, take(payload))
    k, v = lax.sort_key_val(keys, payload, dimension=0)
    order0 = np.argsort(keys, axis=0, kind="stable")
    np.testing.assert_array_equal(v, np.take_along_axis(payload, order0, 0))


def test_sort_traces_to_one_primitive():
    jaxpr = fgrad.make_jaxpr(lambda x: fnp.argsort(x))(np.zeros(4, np.float32))
    text = str(jaxpr)
    assert text.count("sort[") == 1 and "num_keys=1" in text


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_sort_gradients(axis):
    x = rng.standard_normal((3, 4))
    check_grads(lambda v: fnp.sort(v, axis=axis), (x,), order=2, modes=("fwd", "rev"))
    check_grads(lambda v: fnp.sort(v, axis=axis, descending=True) ** 2, (x,), order=2,
                modes=("fwd", "rev"))


def test_sort_gradient_permutes_the_cotangent():
    x = np.array([3.0, 1.0, 2.0])
    g = fgrad.grad(lambda v: fnp.sum(fnp.sort(v) * np.array([1.0, 10.0, 100.0])))(x)
    np.testing.assert_array_equal(g, [100.0, 1.0, 10.0])


def test_carried_operands_get_gradients():
    keys = np.array([2.0, 0.0, 1.0])

    def f(values):
        _, v = lax.sort_key_val(keys, values)
        return v * np.array([1.0, 2.0, 3.0])
    check_grads(f, (rng.standard_normal(3),), order=2, modes=("fwd", "rev"))
    np.testing.assert_array_equal(fgrad.grad(lambda v: fnp.sum(f(v)))(np.zeros(3)), [3, 1, 2])


@pytest.mark.parametrize("in_axes", [0, 1])
def test_vmap(in_axes):
    x = sample(np.float32, (4, 6), nans=True)
    np.testing.assert_array_equal(fgrad.vmap(fnp.sort, in_axes=in_axes)(x),
                                  np.sort(x, axis=1 - in_axes) if in_axes == 0
                                  else np.sort(x, axis=0).T)
    np.testing.assert_array_equal(fgrad.vmap(fnp.argsort, in_axes=in_axes)(x),
                                  np.argsort(np.moveaxis(x, in_axes, 0), axis=-1, kind="stable"))
    # a batched key with an unbatched payload, and the reverse
    payload = np.arange(6.0)
    _, v = fgrad.vmap(lambda k: lax.sort_key_val(k, payload))(x)
    np.testing.assert_array_equal(v, np.argsort(x, axis=1, kind="stable").astype(np.float64))
    keys = x[0]
    _, v = fgrad.vmap(lambda p: lax.sort_key_val(keys, p))(x)
    np.testing.assert_array_equal(v, x[:, np.argsort(keys, kind="stable")])


def test_vmap_of_grad():
    x = rng.standard_normal((5, 4))
    w = np.arange(4.0)
    per_row = fgrad.vmap(fgrad.grad(lambda v: fnp.sum(fnp.sort(v) * w)))(x)
    expected = np.zeros_like(x)
    for i, row in enumerate(x):
        expected[i, np.argsort(row)] = w
    np.testing.assert_array_equal(per_row, expected)


def test_jit():
    x = sample(np.float64, (5, 7), nans=True)
    f = fgrad.jit(lambda v: (fnp.sort(v, axis=0), fnp.argsort(v, axis=1)))
    s, p = f(x)
    np.testing.assert_array_equal(s, np.sort(x, axis=0))
    np.testing.assert_array_equal(p, np.argsort(x, axis=1, kind="stable"))
    g = fgrad.jit(fgrad.grad(lambda v: fnp.sum(fnp.sort(v) ** 3)))
    y = rng.standard_normal(6)
    np.testing.assert_allclose(g(y), 3 * y ** 2)


@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted_matches_numpy(side):
    a = np.array([-1.0, 0.0, 0.0, 2.5, 3.0, np.nan])
    v = np.array([[-2.0, 0.0, 1.0], [3.0, np.nan, 9.0]])
    np.testing.assert_array_equal(fnp.searchsorted(a, v, side=side),
                                  np.searchsorted(a, v, side=side))
    ints = np.array([1, 1, 4, 7], np.int32)
    np.testing.assert_array_equal(fnp.searchsorted(ints, 4, side=side),
                                  np.searchsorted(ints, 4, side=side))
    unsorted = np.array([3.0, 1.0, 2.0])
    order = np.argsort(unsorted)
    np.testing.assert_array_equal(fnp.searchsorted(unsorted, [1.5, 3.0], side, sorter=order),
                                  np.searchsorted(unsorted, [1.5, 3.0], side, sorter=order))


def test_errors():
    def raises(fn, *words):
        with pytest.raises(fgrad.FgradTypeError) as info:
            fn()
        for w in words:
            assert w in str(info.value), (w, str(info.value))
        assert "hint:" in str(info.value)

    raises(lambda: lax.sort((np.zeros(3), np.zeros(4))), "sort", "one shape", "f64[3]", "f64[4]")
    raises(lambda: lax.sort(np.zeros((2, 3)), dimension=2), "sort", "dimension 2")
    raises(lambda: lax.sort(np.zeros(3), num_keys=2), "num_keys=2")
    raises(lambda: fnp.sort(np.float32(1.0)), "sort", "0-d")
    raises(lambda: fnp.argsort(np.zeros((2, 3)), axis=2), "argsort", "axis 2")
    raises(lambda: fnp.searchsorted(np.zeros((2, 2)), 1.0), "searchsorted", "1-d")
