"""fgrad_nn normalisation layers: GroupNorm, RMSNorm, InstanceNorm1d/2d (with and
without running statistics) and LayerNorm over any trailing shape, against the
explicit formulas in NumPy; check_grads (float64, order 2) w.r.t. inputs and
parameters; jit equals eager; flatten/unflatten; one example and a batch."""
import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad.test_util import check_grads
from fgrad_nn import eval_mode
from fgrad_nn import layers as L
from tree_asserts import assert_trees_close

F64 = fnp.float64


def _close(got, want, rtol=1e-9, atol=1e-12):
    got = np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def _round_trip_and_jit(layer, x):
    leaves, treedef = fgrad.tree.flatten(layer)
    assert_trees_close(fgrad.tree.unflatten(treedef, leaves), layer)
    eager = layer(x)
    _close(fgrad.jit(lambda m, v: m(v))(layer, x), np.asarray(eager))
    return eager


def _perturbed(layer, rng):
    """The layer with non-trivial parameters (not the ones/zeros init)."""
    return fgrad.tree.map(lambda p: p + 0.5 * rng.standard_normal(p.shape), layer)


def _channel(p, ndim):
    return np.asarray(p).reshape((1, -1) + (1,) * (ndim - 2))


def test_group_norm_matches_formula(rng):
    gn = _perturbed(L.GroupNorm(2, 6, dtype=F64), rng)
    x = rng.standard_normal((3, 6, 4)) * 2 + 1
    g = x.reshape(3, 2, 12)
    norm = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5))
    want = norm.reshape(x.shape) * _channel(gn.weight, 3) + _channel(gn.bias, 3)
    _close(_round_trip_and_jit(gn, x), want)
    _close(gn(x[1:2]), want[1:2])                                       # a batch of one
    _close(gn(x.reshape(3, 6, 2, 2)), want.reshape(3, 6, 2, 2))         # any trailing dims
    check_grads(lambda m, v: m(v), (gn, x[:2, :, :3]), order=2)
    assert L.GroupNorm(3, 6, affine=False).weight is None
    with pytest.raises(ValueError, match="divisible by num_groups"):
        L.GroupNorm(4, 6)
    with pytest.raises(ValueError, match=r"expected input \(N, 6, ...\)"):
        gn(np.zeros((2, 4, 3)))


def test_rms_norm_matches_formula(rng):
    rms = _perturbed(L.RMSNorm((2, 3), eps=1e-6, dtype=F64), rng)
    x = rng.standard_normal((4, 2, 3))
    want = x / np.sqrt((x ** 2).mean(axis=(1, 2), keepdims=True) + 1e-6) * np.asarray(rms.weight)
    _close(_round_trip_and_jit(rms, x), want)
    _close(rms(x[0]), want[0])
    check_grads(lambda m, v: m(v), (rms, x[:2]), order=2)
    # eps=None: the dtype's machine epsilon, as PyTorch
    plain = L.RMSNorm(3, elementwise_affine=False)
    assert plain.weight is None
    x32 = np.full((2, 3), 1e-4, np.float32)
    _close(plain(x32), x32 / np.sqrt(np.float32(1e-8) + np.finfo(np.float32).eps),
           rtol=1e-5)


@pytest.mark.parametrize("cls,shape", [(L.InstanceNorm1d, (3, 4, 5)),
                                       (L.InstanceNorm2d, (2, 4, 3, 2))])
def test_instance_norm_matches_formula(rng, cls, shape):
    x = rng.standard_normal(shape) * 3 - 1
    axes = tuple(range(2, len(shape)))
    norm = (x - x.mean(axes, keepdims=True)) / np.sqrt(x.var(axes, keepdims=True) + 1e-5)
    plain = cls(4, dtype=F64)
    assert plain.weight is None and plain.init_state() is None and not plain.stateful
    _close(_round_trip_and_jit(plain, x), norm)
    _close(plain(x[0]), norm[0])                                         # one example
    affine = _perturbed(cls(4, affine=True, dtype=F64), rng)
    want = norm * _channel(affine.weight, x.ndim) + _channel(affine.bias, x.ndim)
    _close(_round_trip_and_jit(affine, x), want)
    small = x[:2, :, :3]
    check_grads(lambda m, v: m(v), (affine, small), order=2)
    with pytest.raises(ValueError, match="expected input"):
        plain(np.zeros(shape[:1] + (5,) + shape[2:]))


def test_instance_norm_running_statistics(rng):
    layer = L.InstanceNorm1d(3, momentum=0.2, affine=True, track_running_stats=True, dtype=F64)
    assert layer.stateful
    x = rng.standard_normal((4, 3, 6)) * 2 + 0.5
    state = layer.init_state()
    y, new = layer(x, state)
    norm = (x - x.mean(2, keepdims=True)) / np.sqrt(x.var(2, keepdims=True) + 1e-5)
    _close(y, norm)                                           # training: instance statistics
    _close(new.running_mean, 0.8 * 0 + 0.2 * x.mean(2).mean(0))
    _close(new.running_var, 0.8 * 1 + 0.2 * x.var(2, ddof=1).mean(0))
    jy, jnew = fgrad.jit(lambda m, v, s: m(v, s))(layer, x, state)
    _close(jy, y)
    assert_trees_close(jnew, new)
    y_eval, same = eval_mode(layer)(x, new)                   # eval: the running statistics
    rm, rv = np.asarray(new.running_mean), np.asarray(new.running_var)
    _close(y_eval, (x - rm[None, :, None]) / np.sqrt(rv[None, :, None] + 1e-5))
    assert_trees_close(same, new)
    check_grads(lambda m, v: m(v, state)[0], (layer, x[:2, :, :3]), order=2)
    with pytest.raises(TypeError, match="is stateful"):
        layer(x)


def test_layer_norm_any_trailing_shape_and_no_bias(rng):
    x = rng.standard_normal((2, 3, 2, 4))
    for shape in [(4,), (2, 4), (3, 2, 4)]:
        ln = _perturbed(L.LayerNorm(shape, bias=False, dtype=F64), rng)
        assert ln.bias is None
        axes = tuple(range(4 - len(shape), 4))
        want = ((x - x.mean(axes, keepdims=True)) / np.sqrt(x.var(axes, keepdims=True) + 1e-5)
                * np.asarray(ln.weight))
        _close(_round_trip_and_jit(ln, x), want)
        _close(ln(x[1]), want[1])
    check_grads(lambda m, v: m(v), (ln, x[:1]), order=2)


def test_stateful_instance_norm_in_sequential(rng):
    model = L.Sequential(L.InstanceNorm1d(3, track_running_stats=True, dtype=F64), L.ReLU())
    state = model.init_state()
    x = rng.standard_normal((2, 3, 4))
    y, new = model(x, state)
    want, inner = model.layers[0](x, state[0])
    _close(y, np.maximum(np.asarray(want), 0))
    assert_trees_close(new[0], inner)


def test_layer_norm_gradient_is_the_formula_and_one_pass_of_row_sums(rng):
    """dx = r (g - mean(g) - y mean(g y)) with g = w dy, y the normalised input and
    r = 1 / sqrt(var + eps); under jit both row means of the cotangent share one
    kernel."""
    x, dy = rng.standard_normal((2, 64, 32)), rng.standard_normal((2, 64, 32))
    ln = _perturbed(L.LayerNorm(32, dtype=F64), rng)
    loss = lambda m, v: fnp.sum(m(v) * dy)                   # noqa: E731
    r = 1 / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    y = (x - x.mean(-1, keepdims=True)) * r
    g = dy * np.asarray(ln.weight)
    want = r * (g - g.mean(-1, keepdims=True) - y * (g * y).mean(-1, keepdims=True))
    for grad in (fgrad.grad(loss, (0, 1)), fgrad.jit(fgrad.grad(loss, (0, 1)))):
        gm, gx = grad(ln, x)
        _close(gx, want)
        _close(gm.weight, (dy * y).sum((0, 1)))
        _close(gm.bias, dy.sum((0, 1)))
    text = fgrad.jit(fgrad.grad(loss, 1)).lower(ln, x).as_text().split("\n{")[0]
    sums = [line for line in text.splitlines() if "reduce_sum" in line]
    assert len(sums) == 3 and sums[-1].count("reduce_sum") == 2, text   # mean, var; both
