"""vmap: in_axes/out_axes (ints, None, negative, pytree prefixes), axis_size,
nesting, broadcasting of unbatched outputs, compositions with grad/jvp/vjp and
custom derivatives (each checked against a Python loop), per-example gradients
of a small MLP, and the error messages for misuse. JAX's semantics are the spec."""
import functools
import re

import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad import lax

from tree_asserts import assert_trees_close

f64 = np.float64


def _np(x):
    return np.asarray(x)


_close = functools.partial(assert_trees_close, check_dtype=False)


def _stack(trees):
    """Stack a list of same-structured pytrees along a new leading axis."""
    leaves = [fgrad.tree.leaves(t) for t in trees]
    stacked = [np.stack([_np(ls[i]) for ls in leaves]) for i in range(len(leaves[0]))]
    return fgrad.tree.unflatten(fgrad.tree.structure(trees[0]), stacked)


def _loop(f, *args, in_axes=0):
    """Reference vmap: a Python loop over the mapped axis, results stacked at axis 0."""
    axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
    size = next(_np(a).shape[ax] for a, ax in zip(args, axes) if ax is not None)
    outs = []
    for i in range(size):
        sliced = [a if ax is None else np.take(_np(a), i, axis=ax) for a, ax in zip(args, axes)]
        outs.append(f(*sliced))
    return _stack(outs)


@pytest.fixture
def xs(rng):
    return rng.standard_normal((5, 3))


def f_elem(x):
    return lax.sin(x) * x + 2.0


def f_scalar(x):
    """R^n -> R, with no matmul or indexing (runs on elementwise + reductions only)."""
    return fnp.sum(fnp.sin(x) * x ** 2) + fnp.prod(fnp.cos(x))


# ----------------------------------------------------------------------------
# in_axes

def test_in_axes_int_zero_and_default(xs):
    _close(fgrad.vmap(f_scalar)(xs), _loop(f_scalar, xs))
    _close(fgrad.vmap(f_scalar, 0)(xs), _loop(f_scalar, xs))
    assert fgrad.vmap(f_elem)(xs).shape == (5, 3)


def test_in_axes_int_nonzero(rng):
    x = rng.standard_normal((2, 6, 3))
    out = fgrad.vmap(f_scalar, in_axes=1)(x)
    assert out.shape == (6,)
    _close(out, _loop(f_scalar, x, in_axes=1))
    out = fgrad.vmap(lambda a: fnp.sum(a, axis=0), in_axes=2)(x)
    assert out.shape == (3, 6)
    _close(out, _loop(lambda a: np.sum(a, axis=0), x, in_axes=2))


@pytest.mark.parametrize("axis", [-1, -2, -3])
def test_in_axes_negative(rng, axis):
    x = rng.standard_normal((2, 4, 3))
    out = fgrad.vmap(f_scalar, in_axes=axis)(x)
    _close(out, _loop(f_scalar, x, in_axes=axis % 3))


def test_in_axes_none_and_tuple_per_argument(rng):
    x, y = rng.standard_normal((4, 3)), rng.standard_normal(3)

    def f(a, b):
        return fnp.sum(a * b) + b

    out = fgrad.vmap(f, in_axes=(0, None))(x, y)
    assert out.shape == (4, 3)
    _close(out, _loop(f, x, y, in_axes=(0, None)))
    # Both mapped, along different axes.
    z = rng.standard_normal((3, 4))
    _close(fgrad.vmap(f, in_axes=(0, 1))(x, z), _loop(f, x, z, in_axes=(0, 1)))
    # None first, then a negative axis.
    _close(fgrad.vmap(lambda b, a: f(a, b), in_axes=(None, -1))(y, z),
           _loop(lambda b, a: f(a, b), y, z, in_axes=(None, 1)))


def test_in_axes_list_is_a_tuple(rng):
    x, y = rng.standard_normal((4, 3)), rng.standard_normal(3)
    f = lambda a, b: a * b  # noqa: E731
    _close(fgrad.vmap(f, in_axes=[0, None])(x, y), fgrad.vmap(f, in_axes=(0, None))(x, y))
    _close(fgrad.vmap(f, in_axes=[0, None])(x, y), x * y)


def test_in_axes_pytree_prefix_dict(rng):
    params = dict(a=rng.standard_normal((4, 3)), b=rng.standard_normal((3, 4)),
                  c=rng.standard_normal(2))

    def f(p):
        return fnp.sum(p["a"] * p["b"]) + fnp.sum(p["c"])

    out = fgrad.vmap(f, in_axes=(dict(a=0, b=1, c=None),))(params)
    expected = [np.sum(params["a"][i] * params["b"][:, i]) + params["c"].sum() for i in range(4)]
    _close(out, np.array(expected))


def test_in_axes_pytree_prefix_tuple_and_nested(rng):
    x, w, y = rng.standard_normal((4, 3)), rng.standard_normal(3), rng.standard_normal((2, 4))

    def f(pair, other):
        a, (b, c) = pair
        return fnp.sum(a * b) * c + other

    # A tuple argument whose leaves get their own axes; a None subtree leaves
    # the whole (b, c) subtree unmapped.
    out = fgrad.vmap(f, in_axes=((0, None), 1))(
        (x, (w, f64(2.0))), y)
    expected = np.stack([np.sum(x[i] * w) * 2.0 + y[:, i] for i in range(4)])
    _close(out, expected)
    # The same with per-leaf axes written out.
    out2 = fgrad.vmap(f, in_axes=((0, (None, None)), -1))((x, (w, f64(2.0))), y)
    _close(out2, expected)


def test_in_axes_pytree_prefix_mismatch_is_an_error(rng):
    x = rng.standard_normal((4, 3))
    with pytest.raises(ValueError, match="in_axes"):
        fgrad.vmap(lambda p: p["a"], in_axes=(dict(b=0),))(dict(a=x))


def test_kwargs_non_arrays_pass_through_arrays_map_over_axis_0(xs):
    def f(x, *, scale, mode):
        assert mode == "square"
        return fnp.sum(x * x) * scale

    out = fgrad.vmap(f)(xs, scale=3.0, mode="square")
    _close(out, 3.0 * np.sum(xs * xs, axis=1))
    # As in JAX, an array keyword argument is mapped over its leading axis.
    out = fgrad.vmap(lambda x, y=None: x * y)(xs, y=xs)
    _close(out, xs * xs)
    with pytest.raises(ValueError, match="keyword argument"):
        fgrad.vmap(lambda x, y: x + y)(xs, y=np.ones((len(xs) + 1, 3)))


def test_in_axes_dict_for_all_arguments_is_a_clear_error(xs):
    with pytest.raises(TypeError, match="in_axes must be an int, None, or a tuple"):
        fgrad.vmap(lambda p: p["a"], in_axes={"a": 0})


def test_integer_and_bool_inputs(rng):
    n = np.arange(12).reshape(4, 3)
    out = fgrad.vmap(lambda a: fnp.sum(a * 2))(n)
    assert out.dtype.kind == "i"
    _close(out, np.sum(n * 2, axis=1))
    mask = n % 2 == 0
    x = rng.standard_normal((4, 3))
    _close(fgrad.vmap(lambda m, a: fnp.where(m, a, -a))(mask, x), np.where(mask, x, -x))


def test_unmapped_python_scalar_argument(xs):
    out = fgrad.vmap(lambda a, s: a * s, in_axes=(0, None))(xs, 2.5)
    _close(out, 2.5 * xs)


# ----------------------------------------------------------------------------
# out_axes

def test_out_axes_int(rng):
    x = rng.standard_normal((4, 3, 2))
    f = lambda a: lax.sin(a) * 2  # noqa: E731
    for axis in range(3):
        out = fgrad.vmap(f, out_axes=axis)(x)
        _close(out, np.moveaxis(np.sin(x) * 2, 0, axis))


@pytest.mark.parametrize("axis", [-1, -2, -3])
def test_out_axes_negative(rng, axis):
    x = rng.standard_normal((4, 3, 2))
    out = fgrad.vmap(lambda a: lax.cos(a), out_axes=axis)(x)
    _close(out, np.moveaxis(np.cos(x), 0, axis))


def test_out_axes_with_in_axes_roundtrip(rng):
    x = rng.standard_normal((3, 5, 2))
    _close(fgrad.vmap(lambda a: a * 1.0, in_axes=1, out_axes=1)(x), x)
    _close(fgrad.vmap(lambda a: a * 1.0, in_axes=-1, out_axes=-1)(x), x)


def test_out_axes_none_for_unbatched_output(xs):
    w = np.arange(3.0)

    def f(x):
        return fnp.sum(x * w), w * 2.0

    batched, unbatched = fgrad.vmap(f, out_axes=(0, None))(xs)
    _close(batched, xs @ w)
    assert unbatched.shape == (3,)
    _close(unbatched, w * 2)


def test_out_axes_per_output_tuple(rng):
    x = rng.standard_normal((4, 3, 2))

    def f(a):
        return a * 2.0, fnp.sum(a, axis=1), a + 1.0

    a, b, c = fgrad.vmap(f, out_axes=(0, 1, -1))(x)
    _close(a, x * 2)
    _close(b, np.sum(x, axis=2).T)
    _close(c, np.moveaxis(x + 1, 0, -1))


def test_out_axes_pytree_prefix(rng):
    x = rng.standard_normal((4, 3))

    def f(a):
        return dict(p=(a, a * 2.0), q=fnp.sum(a), r=np.float64(7.0))

    out = fgrad.vmap(f, out_axes=dict(p=(1, 0), q=0, r=None))(x)
    _close(out["p"][0], x.T)
    _close(out["p"][1], 2 * x)
    _close(out["q"], x.sum(axis=1))
    assert out["r"].shape == ()
    _close(out["r"], np.float64(7.0))
    # A prefix: one axis for the whole "p" subtree.
    out = fgrad.vmap(f, out_axes=dict(p=1, q=0, r=0))(x)
    _close(out["p"][1], 2 * x.T)
    _close(out["r"], np.full(4, 7.0))


# ----------------------------------------------------------------------------
# axis_size, broadcasting of unbatched outputs, nesting

def test_axis_size_when_nothing_is_mapped(rng):
    x = rng.standard_normal(3)
    out = fgrad.vmap(lambda a: a * 2.0, in_axes=None, axis_size=4)(x)
    assert out.shape == (4, 3)
    _close(out, np.broadcast_to(2 * x, (4, 3)))
    out = fgrad.vmap(lambda a: a * 2.0, in_axes=None, out_axes=1, axis_size=5)(x)
    assert out.shape == (3, 5)
    # axis_size agreeing with the mapped axes is accepted.
    y = rng.standard_normal((4, 2))
    _close(fgrad.vmap(lambda a: a + 1.0, axis_size=4)(y), y + 1)


def test_axis_size_with_no_arguments():
    out = fgrad.vmap(lambda: fnp.ones(3), axis_size=2)()
    assert out.shape == (2, 3)
    _close(out, np.ones((2, 3)))


def test_outputs_independent_of_batch_are_broadcast(xs):
    w = np.arange(3.0)

    def f(x):
        return dict(const=fnp.asarray(w), scal=np.float64(1.5), dep=fnp.sum(x),
                    unbatched_in=w * 0.5)

    out = fgrad.vmap(f)(xs)
    _close(out["const"], np.broadcast_to(w, (5, 3)))
    _close(out["scal"], np.full(5, 1.5))
    _close(out["unbatched_in"], np.broadcast_to(w * 0.5, (5, 3)))
    _close(out["dep"], xs.sum(axis=1))
    # The input returned unchanged.
    _close(fgrad.vmap(lambda a: a)(xs), xs)
    _close(fgrad.vmap(lambda a, b: b, in_axes=(0, None))(xs, w), np.broadcast_to(w, (5, 3)))


def test_python_scalar_output_is_broadcast(xs):
    out = fgrad.vmap(lambda a: 3.0)(xs)
    assert out.shape == (5,)
    _close(out, np.full(5, 3.0))


def test_nested_vmap_two_axes(rng):
    x = rng.standard_normal((4, 5, 3))
    out = fgrad.vmap(fgrad.vmap(f_scalar))(x)
    assert out.shape == (4, 5)
    _close(out, np.array([[f_scalar(x[i, j]) for j in range(5)] for i in range(4)]).astype(
        np.float64))
    # The inner vmap over the last axis, the outer over the first.
    out = fgrad.vmap(fgrad.vmap(f_scalar, in_axes=1), in_axes=0)(x)
    assert out.shape == (4, 3)
    _close(out, np.array([[float(f_scalar(x[i, :, k])) for k in range(3)] for i in range(4)]))


def test_nested_vmap_outer_product_with_different_in_axes(rng):
    a, b = rng.standard_normal((4, 2)), rng.standard_normal((3, 2))

    def kernel(u, v):
        return fnp.exp(-fnp.sum((u - v) ** 2))

    gram = fgrad.vmap(fgrad.vmap(kernel, in_axes=(None, 0)), in_axes=(0, None))(a, b)
    assert gram.shape == (4, 3)
    expected = np.exp(-((a[:, None, :] - b[None, :, :]) ** 2).sum(-1))
    _close(gram, expected)
    # Swapped order: the outer vmap maps b, so the result is transposed.
    gram_t = fgrad.vmap(fgrad.vmap(kernel, in_axes=(0, None)), in_axes=(None, 0))(a, b)
    _close(gram_t, expected.T)
    # The inner vmap mapping both, the outer an axis other than 0.
    x = rng.standard_normal((3, 4, 2))
    out = fgrad.vmap(fgrad.vmap(kernel), in_axes=(1, 1))(x, x + 1.0)
    _close(out, np.full((4, 3), np.exp(-2.0)))


def test_nested_vmap_inner_returns_outer_value(rng):
    ys, xs = rng.standard_normal(3), rng.standard_normal(4)
    out = fgrad.vmap(lambda y: fgrad.vmap(lambda x: y)(xs))(ys)
    assert out.shape == (3, 4)
    _close(out, np.broadcast_to(ys[:, None], (3, 4)))
    out = fgrad.vmap(lambda y: fgrad.vmap(lambda x: x * y)(xs))(ys)
    _close(out, np.outer(ys, xs))


def test_nested_vmap_out_axes(rng):
    x = rng.standard_normal((4, 5, 3))
    out = fgrad.vmap(fgrad.vmap(lambda a: a * 2.0, out_axes=1), out_axes=2)(x)
    # Inner: (5, 3) -> (3, 5); outer puts its axis (4) last: (3, 5, 4).
    assert out.shape == (3, 5, 4)
    _close(out, np.transpose(2 * x, (2, 1, 0)))


# ----------------------------------------------------------------------------
# Compositions with differentiation, each against a Python loop

def test_vmap_of_grad_per_example(xs):
    g = fgrad.vmap(fgrad.grad(f_scalar))(xs)
    _close(g, _loop(fgrad.grad(f_scalar), xs))


def test_grad_of_vmap_based_loss(rng):
    xs, w = rng.standard_normal((6, 3)), rng.standard_normal(3)

    def loss(w, xs):
        per = fgrad.vmap(lambda x: fnp.tanh(fnp.sum(x * w)) ** 2)(xs)
        return fnp.mean(per)

    def loss_loop(w, xs):
        total = 0.0
        for i in range(xs.shape[0]):
            total = total + fnp.tanh(fnp.sum(xs[i] * w)) ** 2
        return total / xs.shape[0]

    _close(loss(w, xs), loss_loop(w, xs))
    _close(fgrad.grad(loss)(w, xs), fgrad.grad(loss_loop)(w, xs))
    # Gradient with respect to the mapped argument too.
    _close(fgrad.grad(loss, argnums=1)(w, xs), fgrad.grad(loss_loop, argnums=1)(w, xs))


def test_vmap_of_jvp(rng):
    xs, ts = rng.standard_normal((5, 3)), rng.standard_normal((5, 3))

    def push(x, t):
        return fgrad.jvp(f_scalar, (x,), (t,))

    out, tout = fgrad.vmap(push)(xs, ts)
    ref_out, ref_tout = _loop(push, xs, ts)
    _close(out, ref_out)
    _close(tout, ref_tout)
    # The same primal, a batch of tangents (a Jacobian-vector product per row).
    x = xs[0]
    _, touts = fgrad.vmap(lambda t: fgrad.jvp(f_elem, (x,), (t,)))(ts)
    _close(touts, ts * (np.cos(x) * x + np.sin(x)))


def test_jvp_of_vmap(rng):
    xs, ts = rng.standard_normal((5, 3)), rng.standard_normal((5, 3))
    out, tout = fgrad.jvp(fgrad.vmap(f_scalar), (xs,), (ts,))
    ref = _loop(lambda x, t: fgrad.jvp(f_scalar, (x,), (t,)), xs, ts)
    _close(out, ref[0])
    _close(tout, ref[1])


def test_vmap_of_vjp_pullback(rng):
    x = rng.standard_normal(3)
    cts = rng.standard_normal((4, 3))
    _, pullback = fgrad.vjp(f_elem, x)
    (rows,) = fgrad.vmap(pullback)(cts)
    _close(rows, cts * (np.cos(x) * x + np.sin(x)))
    _close(rows, _loop(lambda c: pullback(c)[0], cts))
    # vjp itself inside vmap: a primal and a cotangent per example.
    xs = rng.standard_normal((4, 3))

    def vjp_one(x, ct):
        out, pb = fgrad.vjp(f_elem, x)
        return out, pb(ct)[0]

    _close(fgrad.vmap(vjp_one)(xs, cts), _loop(vjp_one, xs, cts))


def test_vmap_of_grad_of_grad(rng):
    xs = rng.standard_normal(7)
    g2 = fgrad.vmap(fgrad.grad(fgrad.grad(f_elem)))(xs)
    # f = sin(x)·x + 2: f'' = 2cos(x) − x·sin(x)
    _close(g2, 2 * np.cos(xs) - xs * np.sin(xs))
    _close(g2, _loop(fgrad.grad(fgrad.grad(f_elem)), xs))


def test_grad_of_vmap_of_grad(rng):
    xs = rng.standard_normal((4, 3))

    def outer(xs):
        return fnp.sum(fgrad.vmap(fgrad.grad(f_scalar))(xs) ** 2)

    def outer_loop(xs):
        total = 0.0
        for i in range(xs.shape[0]):
            total = total + fnp.sum(fgrad.grad(f_scalar)(xs[i]) ** 2)
        return total

    _close(outer(xs), outer_loop(xs))
    _close(fgrad.grad(outer)(xs), fgrad.grad(outer_loop)(xs))


def test_vmap_with_python_scalars_and_constants(rng):
    xs = rng.standard_normal((4, 3))
    c = np.array([1.0, -2.0, 0.5])

    def f(x):
        y = 2 * x + 1.5 - c * 0.25
        return fnp.sum(y * y / 3.0) + 7, 4.0

    out, const = fgrad.vmap(f)(xs)
    ref = _loop(lambda x: f(x)[0], xs)
    _close(out, ref)
    _close(const, np.full(4, 4.0))
    g = fgrad.vmap(fgrad.grad(lambda x: f(x)[0]))(xs)
    _close(g, 2 * 2 * (2 * xs + 1.5 - c * 0.25) / 3.0)


def test_vmap_of_value_and_grad_and_has_aux(xs):
    vals, grads = fgrad.vmap(fgrad.value_and_grad(f_scalar))(xs)
    _close(vals, _loop(f_scalar, xs))
    _close(grads, _loop(fgrad.grad(f_scalar), xs))
    g, aux = fgrad.vmap(fgrad.grad(lambda x: (f_scalar(x), x * 2.0), has_aux=True))(xs)
    _close(g, grads)
    _close(aux, 2 * xs)


def test_vmap_of_linearize_and_linear_transpose(rng):
    x, ts = rng.standard_normal(3), rng.standard_normal((4, 3))
    _, f_jvp = fgrad.linearize(f_scalar, x)
    _close(fgrad.vmap(f_jvp)(ts), _loop(f_jvp, ts))
    f_t = fgrad.linear_transpose(lambda v: v * 2.0 + fnp.sum(v), x)
    _close(fgrad.vmap(f_t)(ts), _loop(f_t, ts))


def test_jvp_of_vmap_with_unmapped_argument(rng):
    xs, w = rng.standard_normal((4, 3)), rng.standard_normal(3)
    f = fgrad.vmap(lambda x, w: fnp.sin(x * w), in_axes=(0, None))
    tx, tw = rng.standard_normal((4, 3)), rng.standard_normal(3)
    out, tout = fgrad.jvp(f, (xs, w), (tx, tw))
    _close(out, np.sin(xs * w))
    _close(tout, np.cos(xs * w) * (tx * w + xs * tw))
    # A zero tangent for the unmapped argument.
    _, tout = fgrad.jvp(f, (xs, w), (tx, np.zeros(3)))
    _close(tout, np.cos(xs * w) * tx * w)


def test_vmap_of_hessian_and_jacobians(xs):
    per = fgrad.vmap(fgrad.hessian(f_scalar))(xs)
    assert per.shape == (5, 3, 3)
    _close(per, _loop(fgrad.hessian(f_scalar), xs))


def test_empty_batch(rng):
    x = np.zeros((0, 3))
    assert fgrad.vmap(f_scalar)(x).shape == (0,)
    assert fgrad.vmap(fgrad.grad(f_scalar))(x).shape == (0, 3)


def test_none_leaves_in_arguments_and_outputs(xs):
    out = fgrad.vmap(lambda x, n: (x * 2.0, n))(xs, None)
    _close(out[0], 2 * xs)
    assert out[1] is None
    out = fgrad.vmap(lambda x, n: x * 2.0, in_axes=(0, None))(xs, None)
    _close(out, 2 * xs)


def test_vmap_preserves_float32(rng):
    xs = rng.standard_normal((4, 3)).astype(np.float32)
    out = fgrad.vmap(lambda x: fnp.sum(x * 2.0) + 1)(xs)
    assert out.dtype == np.float32
    g = fgrad.vmap(fgrad.grad(f_scalar))(xs)
    assert g.dtype == np.float32


# custom_jvp / custom_vjp inside vmap

@fgrad.custom_jvp
def softclip(x):
    return lax.log(1.0 + lax.exp(x))


@softclip.defjvp
def _softclip_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    # A deliberately *different* derivative (2x the true one) so the test can
    # tell the custom rule from differentiating the function body.
    return softclip(x), 2.0 * t * lax.logistic(x)


@fgrad.custom_vjp
def scaled_sq(x, w):
    return x * x * w


def _scaled_sq_fwd(x, w):
    return scaled_sq(x, w), (x, w)


def _scaled_sq_bwd(res, ct):
    x, w = res
    # Again not the true derivative (3x in x, the true one in w).
    return 3.0 * 2 * x * w * ct, x * x * ct


scaled_sq.defvjp(_scaled_sq_fwd, _scaled_sq_bwd)


def _sig(x):
    return 1 / (1 + np.exp(-x))


def test_vmap_custom_jvp_values_and_gradients(rng):
    xs = rng.standard_normal((4, 3))
    f = lambda x: fnp.sum(softclip(x) * x)  # noqa: E731
    _close(fgrad.vmap(f)(xs), np.sum(np.log1p(np.exp(xs)) * xs, axis=1))
    expected = 2 * _sig(xs) * xs + np.log1p(np.exp(xs))
    # vmap(grad(f))
    _close(fgrad.vmap(fgrad.grad(f))(xs), expected)
    _close(fgrad.vmap(fgrad.grad(f))(xs), _loop(fgrad.grad(f), xs))
    # grad(vmap(f))
    _close(fgrad.grad(lambda xs: fnp.sum(fgrad.vmap(f)(xs)))(xs), expected)
    # jvp of vmap and vmap of jvp
    ts = rng.standard_normal((4, 3))
    _, t1 = fgrad.jvp(fgrad.vmap(f), (xs,), (ts,))
    _, t2 = fgrad.vmap(lambda x, t: fgrad.jvp(f, (x,), (t,)))(xs, ts)
    _close(t1, np.sum(expected * ts, axis=1))
    _close(t2, np.sum(expected * ts, axis=1))


def test_vmap_custom_jvp_with_unbatched_argument(rng):
    @fgrad.custom_jvp
    def mulpow(x, w):
        return x * w

    @mulpow.defjvp
    def _jvp(primals, tangents):
        (x, w), (tx, tw) = primals, tangents
        return mulpow(x, w), 10.0 * tx * w + tw * x

    xs, w = rng.standard_normal((4, 3)), rng.standard_normal(3)
    loss = lambda w, xs: fnp.sum(fgrad.vmap(mulpow, in_axes=(0, None))(xs, w))  # noqa: E731
    _close(fgrad.grad(loss)(w, xs), xs.sum(axis=0))
    _close(fgrad.grad(loss, argnums=1)(w, xs), 10.0 * np.broadcast_to(w, xs.shape))
    per = fgrad.vmap(fgrad.grad(lambda x, w: fnp.sum(mulpow(x, w))), in_axes=(0, None))(xs, w)
    _close(per, 10.0 * np.broadcast_to(w, xs.shape))


def test_vmap_custom_vjp_values_and_gradients(rng):
    xs, w = rng.standard_normal((4, 3)), rng.standard_normal(3)
    f = lambda x, w: fnp.sum(scaled_sq(x, w))  # noqa: E731
    _close(fgrad.vmap(f, in_axes=(0, None))(xs, w), np.sum(xs * xs * w, axis=1))
    # vmap(grad(f)) in both arguments, against a loop.
    gx, gw = fgrad.vmap(fgrad.grad(f, argnums=(0, 1)), in_axes=(0, None))(xs, w)
    _close(gx, 6 * xs * w)
    _close(gw, xs * xs)
    _close((gx, gw), _loop(fgrad.grad(f, argnums=(0, 1)), xs, w, in_axes=(0, None)))
    # grad(vmap(f)): the unbatched w collects the sum over the batch.
    loss = lambda xs, w: fnp.sum(fgrad.vmap(f, in_axes=(0, None))(xs, w))  # noqa: E731
    gx, gw = fgrad.grad(loss, argnums=(0, 1))(xs, w)
    _close(gx, 6 * xs * w)
    _close(gw, np.sum(xs * xs, axis=0))
    # Both mapped.
    ws = rng.standard_normal((4, 3))
    gx, gw = fgrad.grad(lambda xs, ws: fnp.sum(fgrad.vmap(f)(xs, ws)), argnums=(0, 1))(xs, ws)
    _close(gx, 6 * xs * ws)
    _close(gw, xs * xs)


def test_custom_derivatives_with_nonzero_in_axes(rng):
    xs, w = rng.standard_normal((3, 4)), rng.standard_normal(3)   # mapped along axis 1
    f = lambda x, w: fnp.sum(scaled_sq(x, w))  # noqa: E731
    loss = lambda xs, w: fnp.sum(fgrad.vmap(f, in_axes=(1, None))(xs, w))  # noqa: E731
    gx, gw = fgrad.grad(loss, argnums=(0, 1))(xs, w)
    _close(gx, 6 * xs * w[:, None])
    _close(gw, np.sum(xs * xs, axis=1))
    per = fgrad.vmap(fgrad.grad(f), in_axes=(1, None), out_axes=1)(xs, w)
    _close(per, 6 * xs * w[:, None])
    g = lambda x: fnp.sum(softclip(x) * x)  # noqa: E731
    expected = 2 * _sig(xs) * xs + np.log1p(np.exp(xs))
    _close(fgrad.grad(lambda xs: fnp.sum(fgrad.vmap(g, in_axes=1)(xs)))(xs), expected)
    _, t = fgrad.jvp(fgrad.vmap(g, in_axes=-1), (xs,), (np.ones_like(xs),))
    _close(t, expected.sum(axis=0))


def test_vmap_custom_vjp_batched_only_in_second_argument(rng):
    x, ws = rng.standard_normal(3), rng.standard_normal((4, 3))
    f = lambda x, w: fnp.sum(scaled_sq(x, w))  # noqa: E731
    gx = fgrad.grad(lambda x: fnp.sum(fgrad.vmap(f, in_axes=(None, 0))(x, ws)))(x)
    _close(gx, np.sum(6 * x * ws, axis=0))
    per = fgrad.vmap(fgrad.grad(f), in_axes=(None, 0))(x, ws)
    _close(per, 6 * x * ws)


def test_vmap_custom_vjp_multiple_outputs_and_none_cotangent(rng):
    @fgrad.custom_vjp
    def two(x):
        return x * 2.0, x * 3.0

    two.defvjp(lambda x: (two(x), None), lambda _, ct: (ct[0] * 20.0 + ct[1] * 30.0,))

    @fgrad.custom_vjp
    def scale(x, n):
        return x * n

    # None: no cotangent for n.
    scale.defvjp(lambda x, n: (scale(x, n), n), lambda n, ct: (ct * n * 10.0, None))

    xs = rng.standard_normal((4, 3))
    _close(fgrad.vmap(two)(xs), (2 * xs, 3 * xs))
    # Only the first output is used: its cotangent is 1, the other's 0.
    _close(fgrad.vmap(fgrad.grad(lambda x: fnp.sum(two(x)[0])))(xs), np.full((4, 3), 20.0))
    _close(fgrad.grad(lambda x: fnp.sum(fgrad.vmap(two)(x)[1]))(xs), np.full((4, 3), 30.0))
    ns = rng.standard_normal((4, 3))
    _close(fgrad.grad(lambda x: fnp.sum(fgrad.vmap(scale, in_axes=(0, None))(x, 2.0)))(xs),
           np.full((4, 3), 20.0))
    _close(fgrad.grad(lambda x: fnp.sum(fgrad.vmap(scale)(x, ns)))(xs), 10 * ns)
    _close(fgrad.vmap(fgrad.grad(lambda x, n: fnp.sum(scale(x, n))))(xs, ns), 10 * ns)


def test_vmap_with_stop_gradient(rng):
    xs = rng.standard_normal((4, 3))

    def f(x):
        return fnp.sum(fgrad.stop_gradient(x * x) * x)

    g = fgrad.vmap(fgrad.grad(f))(xs)
    _close(g, xs * xs)
    g2 = fgrad.grad(lambda xs: fnp.sum(fgrad.vmap(f)(xs)))(xs)
    _close(g2, xs * xs)
    _close(fgrad.vmap(fgrad.stop_gradient)(xs), xs)


def test_vmap_inside_make_jaxpr(xs):
    # check_jaxprs is on in conftest: every jaxpr built here is type-checked.
    jaxpr = fgrad.make_jaxpr(fgrad.vmap(f_scalar))(xs)
    text = str(jaxpr)
    assert "f64[5,3]" in text and "f64[5]" in text, text
    assert "reduce_sum" in text and "sin" in text
    jaxpr = fgrad.make_jaxpr(fgrad.vmap(fgrad.grad(f_scalar)))(xs)
    assert "f64[5,3]" in str(jaxpr)
    jaxpr = fgrad.make_jaxpr(fgrad.vmap(lambda a, b: a * b, in_axes=(0, None)))(xs, xs[0])
    text = str(jaxpr)
    assert "mul" in text and "f64[3]" in text and "f64[5,3]" in text, text


def test_vmap_of_an_evaluated_jaxpr(xs):
    # vmap of a function traced once to a jaxpr and evaluated: same as vmap(f).
    from fgrad._src.jaxpr import eval_jaxpr
    closed = fgrad.make_jaxpr(f_scalar)(xs[0])
    run = lambda x: eval_jaxpr(closed.jaxpr, closed.consts, x)[0]  # noqa: E731
    _close(fgrad.vmap(run)(xs), fgrad.vmap(f_scalar)(xs))


# ----------------------------------------------------------------------------
# Per-example gradients of a small MLP (the test)

def _init_mlp(rng, sizes=(4, 8, 3)):
    return dict(w1=rng.standard_normal(sizes[:2]) * 0.5, b1=rng.standard_normal(sizes[1]) * 0.1,
                w2=rng.standard_normal(sizes[1:]) * 0.5, b2=rng.standard_normal(sizes[2]) * 0.1)


def _mlp_loss(params, x, y):
    h = fnp.tanh(x @ params["w1"] + params["b1"])
    out = fnp.tanh(h @ params["w2"] + params["b2"])
    return fnp.sum((out - y) ** 2)


def test_per_example_gradients_mlp(rng):
    params = _init_mlp(rng)
    xs, ys = rng.standard_normal((6, 4)), rng.standard_normal((6, 3))
    per_example = fgrad.vmap(fgrad.grad(_mlp_loss), in_axes=(None, 0, 0))(params, xs, ys)
    loop = [fgrad.grad(_mlp_loss)(params, xs[i], ys[i]) for i in range(6)]
    assert set(per_example) == {"w1", "b1", "w2", "b2"}
    for k in per_example:
        assert per_example[k].shape == (6,) + params[k].shape
    _close(per_example, _stack(loop))
    # Their mean is the gradient of the mean loss.
    mean_loss = lambda p: fnp.mean(  # noqa: E731
        fgrad.vmap(_mlp_loss, in_axes=(None, 0, 0))(p, xs, ys))
    g = fgrad.grad(mean_loss)(params)
    _close(g, {k: _np(v).mean(axis=0) for k, v in per_example.items()})


def test_per_example_gradients_mlp_float32(rng):
    params = {k: v.astype(np.float32) for k, v in _init_mlp(rng).items()}
    xs = rng.standard_normal((5, 4)).astype(np.float32)
    ys = rng.standard_normal((5, 3)).astype(np.float32)
    per_example = fgrad.vmap(fgrad.grad(_mlp_loss), in_axes=(None, 0, 0))(params, xs, ys)
    loop = _stack([fgrad.grad(_mlp_loss)(params, xs[i], ys[i]) for i in range(5)])
    for k in per_example:
        assert per_example[k].dtype == np.float32
    _close(per_example, loop, rtol=1e-5, atol=1e-6)


def test_vmap_of_indexing_and_matmul(rng):
    xs, w = rng.standard_normal((4, 5)), rng.standard_normal((5, 2))
    _close(fgrad.vmap(lambda x: x[1:] - x[:-1] ** 2)(xs), xs[:, 1:] - xs[:, :-1] ** 2)
    _close(fgrad.vmap(lambda x: x @ w)(xs), xs @ w)
    _close(fgrad.vmap(lambda x, w: x @ w, in_axes=(None, 1))(xs, w), (xs @ w).T)
    _close(fgrad.vmap(fgrad.grad(lambda x: fnp.sum(fnp.cumsum(x) * x[::-1])))(xs),
           _loop(fgrad.grad(lambda x: fnp.sum(fnp.cumsum(x) * x[::-1])), xs))


# ----------------------------------------------------------------------------
# Errors

def test_error_inconsistent_axis_sizes(rng):
    x, y = rng.standard_normal((3, 2)), rng.standard_normal((4, 2))

    def pair(a, b):
        return a + b

    with pytest.raises(ValueError) as e:
        fgrad.vmap(pair)(x, y)
    msg = str(e.value)
    assert "pair" in msg
    assert "different sizes" in msg
    assert "argument 0 has size 3" in msg and "argument 1 has size 4" in msg, msg
    # Pytree arguments are named by their path, axes other than 0 are reported.
    with pytest.raises(ValueError) as e:
        fgrad.vmap(lambda p: p["a"] + p["b"], in_axes=(dict(a=0, b=1),))(
            dict(a=rng.standard_normal((3, 2)), b=rng.standard_normal((3, 2))))
    msg = str(e.value)
    assert "'a'" in msg and "'b'" in msg and "size 3" in msg and "size 2" in msg, msg
    assert "along axis 1" in msg, msg


def test_error_axis_size_disagrees_with_mapped_axis(rng):
    with pytest.raises(ValueError) as e:
        fgrad.vmap(lambda a: a, axis_size=5)(rng.standard_normal((3, 2)))
    msg = str(e.value)
    assert "axis_size=5" in msg and "size 3" in msg, msg


def test_error_in_axis_out_of_range(rng):
    x = rng.standard_normal((3, 4))
    with pytest.raises(ValueError) as e:
        fgrad.vmap(lambda a: a, in_axes=2)(x)
    msg = str(e.value)
    assert "in_axes=2" in msg and "(3, 4)" in msg and "argument 0" in msg, msg
    with pytest.raises(ValueError) as e:
        fgrad.vmap(lambda a, b: a, in_axes=(None, -3))(x, x)
    msg = str(e.value)
    assert "in_axes=-3" in msg and "(3, 4)" in msg and "argument 1" in msg, msg
    # A scalar cannot be mapped at all.
    with pytest.raises(ValueError, match=r"in_axes=0 .*shape \(\)"):
        fgrad.vmap(lambda a: a)(f64(1.0))


def test_error_out_axis_out_of_range(xs):
    with pytest.raises(ValueError, match="out_axes=3"):
        fgrad.vmap(lambda a: a, out_axes=3)(xs)


def test_error_out_axes_none_for_batched_output(xs):
    def f(a):
        return a * 2.0, fnp.sum(a)

    with pytest.raises(ValueError) as e:
        fgrad.vmap(f, out_axes=(None, 0))(xs)
    msg = str(e.value)
    assert "out_axes=None" in msg and "output 0" in msg and "depends on the mapped axis" in msg
    assert "(3,)" in msg, msg


def test_error_in_axes_tuple_wrong_length(xs):
    with pytest.raises(ValueError) as e:
        fgrad.vmap(lambda a, b: a * b, in_axes=(0, None, 0))(xs, xs)
    msg = str(e.value)
    assert "3 entries" in msg and "2 positional arguments" in msg, msg
    with pytest.raises(ValueError, match="1 entries"):
        fgrad.vmap(lambda a, b: a * b, in_axes=[0])(xs, xs)


def test_error_nothing_mapped_without_axis_size(xs):
    with pytest.raises(ValueError) as e:
        fgrad.vmap(lambda a: a * 2.0, in_axes=None)(xs)
    msg = str(e.value)
    assert "axis_size" in msg and "no argument is mapped" in msg, msg
    with pytest.raises(ValueError, match="axis_size"):
        fgrad.vmap(lambda: 1.0)()


def test_error_bad_in_axes_entry(xs):
    with pytest.raises((TypeError, ValueError), match="in_axes"):
        fgrad.vmap(lambda a: a, in_axes=("x",))(xs)


def test_escaped_batch_tracer_is_an_error(xs):
    leaked = []

    def f(a):
        leaked.append(a)
        return a * 2.0

    fgrad.vmap(f)(xs)
    with pytest.raises(fgrad.EscapedTracerError, match=re.escape("vmap")):
        leaked[0] + 1.0
