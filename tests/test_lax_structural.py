"""Structural lax primitives: slicing, gather/scatter, dot_general, reductions
and cumulative ops. Each is checked against NumPy, by finite differences to
second order in both modes, under make_jaxpr with the type checker on, and for
its shape-error message."""
import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad import lax
from fgrad.test_util import check_grads

fgrad.config.update("check_jaxprs", True)

rng = np.random.default_rng(0)


def randn(*shape):
    return rng.standard_normal(shape)


def check(f, args, expected, grads=True):
    """Eager result vs NumPy, the traced output type, and derivatives."""
    expected = np.asarray(expected)
    out = f(*args)
    assert out.dtype == expected.dtype
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-12, atol=1e-12)
    (aval,) = fgrad.make_jaxpr(f)(*args).out_avals
    assert aval.shape == expected.shape and aval.dtype == expected.dtype
    if grads:
        check_grads(f, args, order=2, modes=("fwd", "rev"))


def raises(fn, *words):
    with pytest.raises(fgrad.FgradTypeError) as info:
        fn()
    message = str(info.value)
    for w in words:
        assert w in message, (w, message)
    assert "hint:" in message


# ----------------------------------------------------------------------------
# slice, pad, concatenate, rev

@pytest.mark.parametrize("start,limit,strides", [
    ((1, 0), (5, 6), (2, 3)),
    ((0, 2), (5, 2), None),
    ((4, 1), (5, 6), (1, 4)),
])
def test_slice(start, limit, strides):
    x = randn(5, 6)
    st = strides or (1, 1)
    expected = x[start[0]:limit[0]:st[0], start[1]:limit[1]:st[1]]
    check(lambda x: lax.slice(x, start, limit, strides), (x,), expected)


def test_slice_errors():
    x = np.zeros((5, 6))
    raises(lambda: lax.slice(x, (0, 0), (6, 6)), "slice", "f64[5,6]")
    raises(lambda: lax.slice(x, (0,), (5,)), "slice", "f64[5,6]")
    raises(lambda: lax.slice(x, (0, 0), (5, 6), (1, 0)), "slice", "f64[5,6]")


def _pad_ref(x, value, config):
    shape = [lo + hi + n + max(n - 1, 0) * i for (lo, hi, i), n in zip(config, x.shape)]
    out = np.full(shape, value, x.dtype)
    out[tuple(slice(lo, lo + n + max(n - 1, 0) * i, i + 1)
              for (lo, hi, i), n in zip(config, x.shape))] = x
    return out


@pytest.mark.parametrize("config", [((1, 2, 1), (0, 1, 0)), ((0, 0, 0), (3, 0, 2)),
                                    ((2, 2, 3), (1, 1, 1))])
def test_pad(config):
    x, value = randn(3, 4), np.float64(1.5)
    check(lambda x, v: lax.pad(x, v, config), (x, value), _pad_ref(x, value, config))


def test_pad_python_scalar_and_empty():
    x = np.zeros((0, 3))
    out = lax.pad(x, 2.0, ((1, 1, 2), (0, 0, 0)))
    np.testing.assert_array_equal(np.asarray(out), np.full((2, 3), 2.0))


def test_pad_errors():
    x = np.zeros((2, 3))
    raises(lambda: lax.pad(x, 0.0, ((-1, 0, 0), (0, 0, 0))), "pad", "f64[2,3]")
    raises(lambda: lax.pad(x, np.zeros(2), ((0, 0, 0), (0, 0, 0))), "pad", "f64[2,3]", "f64[2]")
    raises(lambda: lax.pad(x, 0.0, ((0, 0, 0),)), "pad", "f64[2,3]")


def test_concatenate():
    a, b, c = randn(2, 3), randn(2, 1), randn(2, 4)
    check(lambda a, b, c: lax.concatenate([a, b, c], 1), (a, b, c),
          np.concatenate([a, b, c], 1))
    check(lambda a: lax.concatenate([a, a * 2.0], 0), (a,), np.concatenate([a, 2 * a], 0))


def test_concatenate_errors():
    raises(lambda: lax.concatenate([np.zeros((2, 3)), np.zeros((3, 3))], 1),
           "concatenate", "f64[2,3]", "f64[3,3]")
    raises(lambda: lax.concatenate([np.zeros((2, 3))], 2), "concatenate", "f64[2,3]")
    raises(lambda: lax.concatenate([np.zeros(2), np.zeros(2, np.float32)], 0),
           "concatenate", "f64[2]", "f32[2]")


def test_rev():
    x = randn(3, 4, 2)
    check(lambda x: lax.rev(x, (0, 2)), (x,), x[::-1, :, ::-1])
    raises(lambda: lax.rev(x, (3,)), "rev", "f64[3,4,2]")


# ----------------------------------------------------------------------------
# dynamic_slice, dynamic_update_slice, iota

@pytest.mark.parametrize("starts,clamped", [((1, 2), (1, 2)), ((7, -3), (3, 0)), ((3, 4), (3, 3))])
def test_dynamic_slice(starts, clamped):
    x = randn(5, 6)
    expected = x[clamped[0]:clamped[0] + 2, clamped[1]:clamped[1] + 3]
    check(lambda x: lax.dynamic_slice(x, starts, (2, 3)), (x,), expected)
    # Traced start indices, in the primal and in the transposed computations.
    i, j = np.int32(starts[0]), np.int64(starts[1])
    check(lambda x, i, j: lax.dynamic_slice(x, (i, j), (2, 3)), (x, i, j), expected)


def test_dynamic_slice_errors():
    x = np.zeros((5, 6))
    raises(lambda: lax.dynamic_slice(x, (0, 0), (6, 1)), "dynamic_slice", "f64[5,6]")
    raises(lambda: lax.dynamic_slice(x, (0,), (1, 1)), "dynamic_slice", "f64[5,6]")
    raises(lambda: lax.dynamic_slice(x, (0, np.float64(1)), (1, 1)), "dynamic_slice", "f64[]")


@pytest.mark.parametrize("starts,clamped", [((1, 2), (1, 2)), ((9, -1), (3, 0))])
def test_dynamic_update_slice(starts, clamped):
    x, u = randn(5, 6), randn(2, 3)
    expected = x.copy()
    expected[clamped[0]:clamped[0] + 2, clamped[1]:clamped[1] + 3] = u
    check(lambda x, u: lax.dynamic_update_slice(x, u, starts), (x, u), expected)
    i, j = np.int32(starts[0]), np.int32(starts[1])
    check(lambda x, u, i, j: lax.dynamic_update_slice(x, u, (i, j)), (x, u, i, j), expected)
    check(lambda u: lax.dynamic_update_slice(x, u, starts), (u,), expected)


def test_dynamic_update_slice_errors():
    x = np.zeros((5, 6))
    raises(lambda: lax.dynamic_update_slice(x, np.zeros((6, 1)), (0, 0)),
           "dynamic_update_slice", "f64[5,6]", "f64[6,1]")
    raises(lambda: lax.dynamic_update_slice(x, np.zeros((1, 1), np.float32), (0, 0)),
           "dynamic_update_slice", "f64[5,6]", "f32[1,1]")


def test_iota():
    out = lax.iota(np.int32, (3, 4), 1)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(out), np.broadcast_to(np.arange(4), (3, 4)))
    np.testing.assert_array_equal(np.asarray(lax.iota(np.float64, 5)), np.arange(5.0))
    jaxpr = fgrad.make_jaxpr(lambda x: lax.add(x, lax.iota(np.float64, (2, 3), 0)))(np.zeros(3))
    assert jaxpr.out_avals[0].shape == (2, 3)
    raises(lambda: lax.iota(np.int32, (3, 4), 2), "iota", "i32[3,4]")


# ----------------------------------------------------------------------------
# gather and the scatter family

def _clip(indices, shape, axes):
    return tuple(np.clip(i, 0, shape[a] - 1) for i, a in zip(indices, axes))


@pytest.mark.parametrize("axes", [(0,), (2,), (2, 0)])
def test_gather(axes):
    x = randn(4, 5, 3)
    # Duplicates and out-of-bounds (clamped) entries, including negative ones.
    raw = [np.array([[0, 3, 3], [9, -2, 1]]), np.array([[1, 1, 0], [2, 5, 2]])][:len(axes)]
    expected = np.moveaxis(x, axes, range(len(axes)))[_clip(raw, x.shape, axes)]
    check(lambda x: lax.gather(x, raw, axes), (x,), expected)
    check(lambda x, *idx: lax.gather(x, idx, axes), (x, *raw), expected)


def test_gather_errors():
    x = np.zeros((4, 5))
    raises(lambda: lax.gather(x, (np.zeros(2, int), np.zeros(3, int)), (0, 1)),
           "gather", "f64[4,5]", "i64[2]", "i64[3]")
    raises(lambda: lax.gather(x, (np.zeros(2),), (0,)), "gather", "f64[4,5]", "f64[2]")
    raises(lambda: lax.gather(x, (np.zeros(2, int),), (2,)), "gather", "f64[4,5]")


def _scatter_ref(combine, x, indices, updates, axes):
    """Apply updates one at a time, in order, dropping out-of-bounds ones."""
    out = x.copy()
    moved = np.moveaxis(out, axes, range(len(axes)))
    for b in np.ndindex(indices[0].shape):
        pos = tuple(int(i[b]) for i in indices)
        if all(0 <= p < n for p, n in zip(pos, moved.shape)):
            moved[pos] = combine(moved[pos], updates[b])
    return out


_COMBINE = {"scatter": lambda old, new: new, "scatter_add": np.add,
            "scatter_mul": np.multiply, "scatter_min": np.minimum,
            "scatter_max": np.maximum}

# Duplicated positions, plus out-of-bounds and negative indices that are dropped.
_IDX = (np.array([[0, 3, 3], [7, 1, 0], [-1, 3, 2]]), np.array([[1, 2, 2], [0, 0, 1], [2, 2, 9]]))


@pytest.mark.parametrize("name", list(_COMBINE))
@pytest.mark.parametrize("axes", [(1,), (2, 0)])
def test_scatter(name, axes):
    op = getattr(lax, name)
    x = rng.permutation(4 * 5 * 3).reshape(4, 5, 3) * 0.1 - 3.0  # no ties: min/max differentiable
    indices = _IDX[:len(axes)]
    ushape = indices[0].shape + tuple(n for d, n in enumerate(x.shape) if d not in axes)
    if name == "scatter_mul":
        updates = rng.uniform(0.5, 2.0, ushape) * rng.choice([-1, 1], ushape)
    else:
        updates = rng.permutation(int(np.prod(ushape))).reshape(ushape) * 0.1 - 2.05
    expected = _scatter_ref(_COMBINE[name], x, indices, updates, axes)
    check(lambda x, u: op(x, indices, u, axes), (x, updates), expected)
    check(lambda x, u, *idx: op(x, idx, u, axes), (x, updates, *indices), expected)


def test_scatter_add_accumulates_and_drops():
    out = lax.scatter_add(np.zeros(3), (np.array([1, 1, 1, 3, -1, 0]),),
                          np.array([1.0, 2.0, 3.0, 100.0, 100.0, 5.0]), (0,))
    np.testing.assert_array_equal(np.asarray(out), [5.0, 6.0, 0.0])
    ints = lax.scatter_add(np.zeros(2, np.int32), (np.array([0, 0, 1]),),
                           np.array([1, 2, 3], np.int32), (0,))
    assert ints.dtype == np.int32 and ints.tolist() == [3, 3]


def test_scatter_last_write_wins():
    idx = (np.array([2, 0, 2, 2]),)
    out = lax.scatter(np.zeros(3), idx, np.array([1.0, 2.0, 3.0, 4.0]), (0,))
    np.testing.assert_array_equal(np.asarray(out), [2.0, 0.0, 4.0])
    # Only the winning update gets a cotangent.
    _, pullback = fgrad.vjp(lambda x, u: lax.scatter(x, idx, u, (0,)), np.ones(3), np.ones(4))
    ct_x, ct_u = pullback(np.array([10.0, 20.0, 30.0]))
    np.testing.assert_array_equal(np.asarray(ct_x), [0.0, 20.0, 0.0])
    np.testing.assert_array_equal(np.asarray(ct_u), [0.0, 10.0, 0.0, 30.0])


def test_scatter_max_ties_average():
    f = lambda x, u: lax.scatter_max(x, (np.array([1, 1]),), u, (0,))  # noqa: E731
    out, tangent = fgrad.jvp(f, (np.array([1.0, 2.0]), np.array([2.0, 0.0])),
                             (np.array([10.0, 20.0]), np.array([40.0, 80.0])))
    np.testing.assert_array_equal(np.asarray(out), [1.0, 2.0])
    np.testing.assert_array_equal(np.asarray(tangent), [10.0, 30.0])


def test_scatter_errors():
    x = np.zeros((4, 5))
    idx = (np.zeros(2, int),)
    raises(lambda: lax.scatter_add(x, idx, np.zeros((2, 4)), (0,)),
           "scatter_add", "f64[4,5]", "f64[2,4]", "f64[2,5]")
    raises(lambda: lax.scatter(x, idx, np.zeros((2, 5), np.float32), (0,)),
           "scatter", "f64[4,5]", "f32[2,5]")
    raises(lambda: lax.scatter_max(x, (np.zeros(2, int), np.zeros(3, int)), np.zeros(2), (0, 1)),
           "scatter_max", "f64[4,5]", "i64[3]")


# ----------------------------------------------------------------------------
# dot_general

def _dot_ref(a, b, dims):
    """einsum, after broadcasting size-1 batch dims."""
    (lc, rc), (lb, rb) = dims
    ashape, bshape = list(a.shape), list(b.shape)
    for i, j in zip(lb, rb):
        ashape[i] = bshape[j] = max(a.shape[i], b.shape[j])
    a, b = np.broadcast_to(a, ashape), np.broadcast_to(b, bshape)
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    la, lr = [None] * a.ndim, [None] * b.ndim
    for i, j in zip(lc, rc):
        la[i] = lr[j] = next(letters)
    batch = []
    for i, j in zip(lb, rb):
        la[i] = lr[j] = next(letters)
        batch.append(la[i])
    free = []
    for labels in (la, lr):
        for d, v in enumerate(labels):
            if v is None:
                labels[d] = next(letters)
                free.append(labels[d])
    return np.einsum(f"{''.join(la)},{''.join(lr)}->{''.join(batch + free)}", a, b)


_DOT_CASES = [
    ((3, 4), (4, 5), (((1,), (0,)), ((), ()))),                # matmul
    ((4, 3), (5, 4), (((0,), (1,)), ((), ()))),                # contracting dims not last
    ((2, 3, 4), (4, 5, 3), (((1, 2), (2, 0)), ((), ()))),      # two contracting dims
    ((3,), (4,), (((), ()), ((), ()))),                        # outer product
    ((4,), (4,), (((0,), (0,)), ((), ()))),                    # inner product
    ((6, 2, 3), (6, 3, 4), (((2,), (1,)), ((0,), (0,)))),      # batched matmul
    ((2, 6, 3), (3, 4, 6), (((2,), (0,)), ((1,), (2,)))),      # batch dims not leading
    ((1, 2, 3), (1, 3, 2), (((2,), (1,)), ((0,), (0,)))),      # size-1 batch on both sides
    ((4, 1, 2, 3), (1, 5, 3, 2), (((3,), (2,)), ((0, 1), (0, 1)))),  # (4,1,2,3) @ (5,3,2)
    ((3, 1, 2, 4), (1, 5, 4, 2), (((3,), (2,)), ((0, 1), (0, 1)))),  # broadcast both ways
    ((3, 1, 2), (4, 3, 5), (((0,), (1,)), ((1,), (2,)))),      # broadcast, odd dim order
    ((2, 3, 1, 4), (4, 2, 6, 3), (((1, 3), (3, 0)), ((2, 0), (2, 1)))),
]


@pytest.mark.parametrize("lshape,rshape,dims", _DOT_CASES)
def test_dot_general(lshape, rshape, dims):
    a, b = randn(*lshape), randn(*rshape)
    check(lambda a, b: lax.dot_general(a, b, dims), (a, b), _dot_ref(a, b, dims))


def test_dot_general_numpy_style_batched_matmul():
    a, b = randn(4, 1, 2, 3), randn(5, 3, 2)
    dims = (((3,), (2,)), ((0, 1), (0, 1)))
    f = lambda a, b: lax.dot_general(a, lax.expand_dims(b, (0,)), dims)  # noqa: E731
    check(f, (a, b), np.matmul(a, b))


def test_dot_general_preferred_element_type():
    a = np.full((2, 3), 100, np.int8)
    out = lax.dot_general(a, a.T.copy(), (((1,), (0,)), ((), ())), preferred_element_type=np.int32)
    assert out.dtype == np.int32 and np.all(np.asarray(out) == 30000)
    x, y = randn(2, 3).astype(np.float32), randn(3, 4).astype(np.float32)
    f = lambda x: lax.reduce_sum(  # noqa: E731
        lax.dot_general(x, y, (((1,), (0,)), ((), ())), preferred_element_type=np.float64), None)
    g = fgrad.grad(f)(x)
    assert g.dtype == np.float32
    np.testing.assert_allclose(np.asarray(g), np.broadcast_to(y.sum(1), (2, 3)), rtol=1e-6)


def test_dot_general_errors():
    raises(lambda: lax.dot_general(np.zeros((2, 3)), np.zeros((4, 5)), (((1,), (0,)), ((), ()))),
           "dot_general", "f64[2,3]", "f64[4,5]")
    raises(lambda: lax.dot_general(np.zeros((2, 3)), np.zeros((3, 5), np.float32),
                                   (((1,), (0,)), ((), ()))), "dot_general", "f64[2,3]", "f32[3,5]")
    raises(lambda: lax.dot_general(np.zeros((2, 2, 3)), np.zeros((3, 3, 5)),
                                   (((2,), (1,)), ((0,), (0,)))),
           "dot_general", "f64[2,2,3]", "f64[3,3,5]")
    raises(lambda: lax.dot_general(np.zeros((2, 3)), np.zeros((3, 5)),
                                   (((1, 1), (0, 0)), ((), ()))), "dot_general", "f64[2,3]")


# ----------------------------------------------------------------------------
# Reductions

def _with_zeros():
    x = randn(3, 4, 5)
    x[0, 1, 2] = 0.0                      # one zero in a reduction
    x[1, 2, 0] = x[1, 2, 3] = 0.0         # two zeros along the last axis
    x[2, 0, :] = 0.0
    return x


@pytest.mark.parametrize("axes", [(2,), (0, 2), (1,), None])
def test_reduce_prod(axes):
    x = _with_zeros()
    check(lambda x: lax.reduce_prod(x, axes), (x,), np.prod(x, axis=axes))


def test_reduce_prod_integers_and_empty():
    x = np.arange(1, 7, dtype=np.int32).reshape(2, 3)
    out = lax.reduce_prod(x, (1,))
    assert out.dtype == np.int32 and out.tolist() == [6, 120]
    check(lambda x: lax.reduce_prod(x, (1,)), (np.zeros((2, 0)),), np.ones(2))
    raises(lambda: lax.reduce_prod(np.zeros(3, bool), (0,)), "reduce_prod", "bool[3]")


def test_reduce_and_or():
    x = rng.random((3, 4)) > 0.3
    for name, ref in (("reduce_and", np.all), ("reduce_or", np.any)):
        op = getattr(lax, name)
        check(lambda x: op(x, (1,)), (x,), ref(x, axis=1), grads=False)
        check(lambda x: op(x, None), (x,), ref(x), grads=False)
        raises(lambda: op(np.zeros((3, 4)), (1,)), name, "f64[3,4]")


# ----------------------------------------------------------------------------
# Cumulative ops

def _cum_ref(ufunc, x, axis, reverse):
    if reverse:
        return np.flip(ufunc.accumulate(np.flip(x, axis), axis=axis), axis)
    return ufunc.accumulate(x, axis=axis)


_CUM = {"cumsum": np.add, "cumprod": np.multiply, "cummax": np.maximum, "cummin": np.minimum}


@pytest.mark.parametrize("name", list(_CUM))
@pytest.mark.parametrize("axis,reverse", [(0, False), (1, False), (1, True), (0, True)])
def test_cumulative(name, axis, reverse):
    op = getattr(lax, name)
    if name == "cumprod":
        x = _with_zeros()[:, :, 0].copy()  # exact derivatives where entries are zero
    else:
        x = rng.permutation(20).reshape(4, 5) * 0.3 - 2.0  # no ties
    check(lambda x: op(x, axis, reverse), (x,), _cum_ref(_CUM[name], x, axis, reverse))


def test_cumulative_integers():
    x = np.array([[3, 1, 4, 1, 5], [9, 2, 6, 5, 3]], np.int32)
    for name, ufunc in _CUM.items():
        out = getattr(lax, name)(x, 1)
        assert out.dtype == np.int32
        np.testing.assert_array_equal(np.asarray(out), ufunc.accumulate(x, axis=1))


def test_cummax_tangent_follows_first_record():
    x = np.array([1.0, 3.0, 3.0, 2.0, 5.0])
    t = np.array([10.0, 20.0, 30.0, 40.0, 50.0])
    _, tangent = fgrad.jvp(lambda x: lax.cummax(x, 0), (x,), (t,))
    np.testing.assert_array_equal(np.asarray(tangent), [10.0, 20.0, 20.0, 20.0, 50.0])
    _, tangent = fgrad.jvp(lambda x: lax.cummin(x, 0, reverse=True), (x,), (t,))
    np.testing.assert_array_equal(np.asarray(tangent), [10.0, 40.0, 40.0, 40.0, 50.0])


def test_cumulative_errors():
    for name in _CUM:
        raises(lambda: getattr(lax, name)(np.zeros((2, 3)), 2), name, "f64[2,3]")
    raises(lambda: lax.cumsum(np.zeros(3, bool), 0), "cumsum", "bool[3]")


def test_weight_gradients_need_no_transpose():
    # d/dW of sum(x @ W): the cotangent is x^T @ g computed in W's layout directly
    x, w = randn(5, 3), randn(3, 4)
    jaxpr = fgrad.make_jaxpr(fgrad.grad(lambda w, x: fnp.sum(x @ w)))(w, x)
    names = [e.primitive.name for e in jaxpr.jaxpr.eqns]
    assert "dot_general" in names and "transpose" not in names, names
    np.testing.assert_allclose(fgrad.grad(lambda w, x: fnp.sum(x @ w))(w, x),
                               np.broadcast_to(x.sum(0)[:, None], (3, 4)), rtol=1e-12)
