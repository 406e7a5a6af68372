"""lax.reduce_window_max and its derivative primitives (select_and_gather_add,
select_and_scatter_add): values against direct loops written here, gradients
(check_grads, order 2, float64), jit against eager bit for bit (also split over
threads), batching, the native lowering of a CNN's pooling, and errors."""
import itertools
import re

import numpy as np
import pytest

import fgrad
from fgrad import lax
from fgrad import FgradTypeError
from fgrad._src.cpu import fused
from fgrad._src.lax.windows import (reduce_window_max_p, select_and_gather_add_p,
                                    select_and_scatter_add_p)
from fgrad.test_util import check_grads


def _windows(shape, dims, strides, dilation):
    """Per output position (row-major), the input positions of its window (row-major)."""
    outs = [(n - (k - 1) * d - 1) // s + 1 if n >= (k - 1) * d + 1 else 0
            for n, k, s, d in zip(shape, dims, strides, dilation)]
    for o in itertools.product(*map(range, outs)):
        yield o, [tuple(oi * s + ki * d for oi, s, ki, d in zip(o, strides, k, dilation))
                  for k in itertools.product(*map(range, dims))]


def _first_max(x, positions):
    """The first position holding the maximum (NaN largest; +0 above -0)."""
    def key(p):
        v = x[p]
        return (1, 0, 0) if np.isnan(v) else (0, v, not np.signbit(v))
    best = positions[0]
    for p in positions[1:]:
        if key(p) > key(best):
            best = p
    return best


def reference(x, dims, strides, dilation):
    """(maximum per window, its selected position per window) by direct loops."""
    picks = {o: _first_max(x, ps) for o, ps in _windows(x.shape, dims, strides, dilation)}
    outs = [(n - (k - 1) * d - 1) // s + 1 if n >= (k - 1) * d + 1 else 0
            for n, k, s, d in zip(x.shape, dims, strides, dilation)]
    y = np.zeros(outs, x.dtype)
    for o, p in picks.items():
        y[o] = x[p]
    return y, picks


def steps(text):
    """The step labels of a compiled program's listing ('native:...', 'numpy:...')."""
    return [line.split(": ", 1)[1].split("  [segment")[0] for line in text.splitlines()
            if re.match(r"// \d+: ", line)]


def params(dims, strides, dilation):
    return dict(window_dimensions=dims, window_strides=strides, window_dilation=dilation)


CASES = [((2, 3, 7, 6), (1, 1, 2, 2), (1, 1, 2, 2), (1, 1, 1, 1)),     # a CNN's pool
         ((2, 3, 9, 8), (1, 1, 3, 3), (1, 1, 2, 1), (1, 1, 1, 2)),     # overlapping, dilated
         ((5, 7), (2, 3), (1, 2), (1, 1)),                             # no plane dimension
         ((4, 6, 5), (2, 1, 2), (1, 1, 1), (1, 1, 1)),                 # windows in dim 0
         ((3, 4, 2), (1, 5, 1), (1, 1, 1), (1, 1, 1)),                 # no window fits
         ((3, 2), (1, 3), (1, 2), (1, 1))]                             # none, strided


def _data(shape, dt, seed=0):
    """Random values with ties, zeros of both signs, a NaN and an infinity."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-3, 4, shape).astype(dt) * dt(0.5)
    flat = x.reshape(-1)
    if flat.size > 10:
        flat[::5] = -0.0
        flat[3], flat[8] = np.nan, np.inf
    return x


@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_values_against_direct_loops(case, dt):
    shape, dims, strides, dilation = case
    x = _data(shape, dt)
    want, picks = reference(x, dims, strides, dilation)
    p = params(dims, strides, dilation)
    got = lax.reduce_window_max(x, dims, strides, "VALID", dilation)
    np.testing.assert_array_equal(np.asarray(got), want)
    assert (np.signbit(np.asarray(got)) == np.signbit(want)).all()
    rng = np.random.default_rng(1)
    g = rng.standard_normal(want.shape).astype(dt)
    t = rng.standard_normal(shape).astype(dt)
    scatter, gather = np.zeros(shape, dt), np.zeros(want.shape, dt)
    for o, pos in picks.items():          # windows in row-major order
        scatter[pos] += g[o]
        gather[o] = t[pos]
    np.testing.assert_array_equal(np.asarray(select_and_scatter_add_p.bind(g, x, **p)),
                                  scatter)
    np.testing.assert_array_equal(np.asarray(select_and_gather_add_p.bind(t, x, **p)), gather)


@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_jit_equals_eager_bit_for_bit(case, dt):
    shape, dims, strides, dilation = case
    x = _data(shape, dt)
    p = params(dims, strides, dilation)
    rng = np.random.default_rng(2)
    y = np.asarray(lax.reduce_window_max(x, dims, strides, "VALID", dilation))
    g = rng.standard_normal(y.shape).astype(dt)
    fns = [(lambda x: lax.reduce_window_max(x, dims, strides, "VALID", dilation), (x,)),
           (lambda g, x: select_and_scatter_add_p.bind(g, x, **p), (g, x)),
           (lambda t, x: select_and_gather_add_p.bind(t, x, **p), (x * 3, x))]
    for f, args in fns:
        jitted = fgrad.jit(f)
        labels = steps(jitted.lower(*args).as_text())
        assert labels and not any(lb.startswith("numpy:") for lb in labels), labels
        eager, first, second = (np.asarray(v) for v in (f(*args), jitted(*args), jitted(*args)))
        assert eager.tobytes() == first.tobytes() == second.tobytes()


@pytest.mark.parametrize("dims,strides", [((1, 1, 2, 2), (1, 1, 2, 2)),
                                          ((1, 1, 3, 3), (1, 1, 2, 2))])
def test_large_kernels_split_over_threads_match_eager(dims, strides):
    """Big enough, and in a segment with other kernels, for the worker pool to split
    the planes (where the pool runs on more than one thread)."""
    rng = np.random.default_rng(3)
    x = np.maximum(rng.standard_normal((32, 16, 29, 29)).astype(np.float32), 0)
    f = lambda x: lax.reduce_window_max(x * 2, dims, strides) * 3   # noqa: E731
    y = f(x)
    g = rng.standard_normal(y.shape).astype(np.float32)
    vjp = lambda x, g: fgrad.vjp(f, x)[1](g)[0]                     # noqa: E731
    threads = fused._split_threads()
    for fn, args, prim in ((f, (x,), "reduce_window_max"), (vjp, (x, g), "select_and_scatter_add")):
        jitted = fgrad.jit(fn)
        if threads > 1:
            assert f"native:{prim} (split over {threads} threads)" in steps(
                jitted.lower(*args).as_text())
        assert np.asarray(fn(*args)).tobytes() == np.asarray(jitted(*args)).tobytes()


@pytest.mark.parametrize("case", CASES[:4], ids=str)
def test_gradients_order_two(case):
    shape, dims, strides, dilation = case
    x = np.random.default_rng(4).permutation(np.prod(shape)).reshape(shape) * 0.1  # no ties
    check_grads(lambda x: lax.reduce_window_max(x, dims, strides, "VALID", dilation), (x,),
                order=2)


def test_gradient_goes_to_the_first_maximum_of_each_window():
    x = np.array([[1., 1., 0., 2.], [1., 0., 2., 2.]])
    g = fgrad.grad(lambda x: lax.reduce_window_max(x, (2, 2), (2, 2)).sum())(x)
    np.testing.assert_array_equal(np.asarray(g), [[1., 0., 0., 1.], [0., 0., 0., 0.]])
    # overlapping windows add up at an element several of them select
    g = fgrad.grad(lambda x: lax.reduce_window_max(x, (3,), (1,)).sum())(np.array([0., 5., 1., 2.]))
    np.testing.assert_array_equal(np.asarray(g), [0., 2., 0., 0.])


def test_padding_strings_and_pairs():
    x = np.arange(12.0).reshape(3, 4)
    same = lax.reduce_window_max(x, (2, 3), (2, 2), "SAME")
    pairs = lax.reduce_window_max(x, (2, 3), (2, 2), [(0, 1), (0, 1)])
    np.testing.assert_array_equal(np.asarray(same), np.asarray(pairs))
    np.testing.assert_array_equal(np.asarray(same), [[6., 7.], [10., 11.]])


def test_vmap():
    rng = np.random.default_rng(5)
    xs = rng.standard_normal((3, 2, 6, 5))
    f = lambda x: lax.reduce_window_max(x, (1, 2, 3), (1, 2, 1))   # noqa: E731
    got = fgrad.vmap(f)(xs)
    np.testing.assert_array_equal(np.asarray(got), np.stack([np.asarray(f(x)) for x in xs]))
    # the cotangents batched, the operand not: the operand is broadcast
    g = rng.standard_normal((3,) + tuple(got.shape[1:]))
    vjp = lambda g: fgrad.vjp(f, xs[0])[1](g)[0]                   # noqa: E731
    np.testing.assert_array_equal(np.asarray(fgrad.vmap(vjp)(g)),
                                  np.stack([np.asarray(vjp(gi)) for gi in g]))
    # forward mode batched over tangents
    jvp = lambda t: fgrad.jvp(f, (xs[0],), (t,))[1]                # noqa: E731
    np.testing.assert_array_equal(np.asarray(fgrad.vmap(jvp)(xs)),
                                  np.stack([np.asarray(jvp(t)) for t in xs]))


def test_a_cnn_steps_pooling_is_native():
    import fgrad_nn as nn
    k = fgrad.random.split(fgrad.random.PRNGKey(0), 2)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1, key=k[0]), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(4 * 4 * 4, 3, key=k[1]))
    x = np.random.default_rng(6).standard_normal((2, 1, 8, 8)).astype(np.float32)
    grad = fgrad.jit(fgrad.grad(lambda m: fgrad.numpy.sum(m(x) ** 2)))
    labels = steps(grad.lower(model).as_text())
    assert "native:reduce_window_max" in labels and "native:select_and_scatter_add" in labels
    assert not [lb for lb in labels if lb.startswith("numpy:") and lb != "numpy:reshape"]


def test_errors():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(ValueError, match="window_dimensions must be 2 ints"):
        lax.reduce_window_max(x, (2,))
    with pytest.raises(ValueError, match="padding must be"):
        lax.reduce_window_max(x, (1, 2), padding=[(0, 0)])
    with pytest.raises(TypeError, match="floating-point"):
        lax.reduce_window_max(np.zeros((2, 3), np.int32), (1, 2))
    with pytest.raises(FgradTypeError, match="window_strides"):
        reduce_window_max_p.bind(x, window_dimensions=(1, 2), window_strides=(1,),
                                 window_dilation=(1, 1))
    with pytest.raises(FgradTypeError, match="first operand must be"):
        select_and_scatter_add_p.bind(x, x, **params((1, 2), (1, 1), (1, 1)))
