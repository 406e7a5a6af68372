"""fgrad_nn.module: subclasses are dataclasses and pytrees (arrays as leaves, static
fields in the structure), immutable after construction, replace, train/eval mode
copies, state helpers, and modules through grad and jit."""
import dataclasses

import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad_nn.layers import BatchNorm, Dropout, Linear, Residual, Sequential
from fgrad_nn.module import (Module, eval_mode, field, init_state, is_stateful, replace,
                             static_field, train_mode)
from tree_asserts import assert_trees_close


class Scale(Module):
    """A module with the dataclass __init__: one array and one static field."""
    weight: fgrad.Array
    power: int = static_field(default=1)

    def __call__(self, x, *, key=None):
        return x * self.weight ** self.power


class Pair(Module):
    """A module with its own __init__ and a nested sub-module."""
    inner: Scale
    offset: fgrad.Array
    name: str = field(static=True)

    def __init__(self, value, name="pair"):
        self.inner = Scale(fnp.asarray(value))
        self.offset = fnp.asarray(np.ones(2) * value)
        self.name = name

    def __call__(self, x, *, key=None):
        return self.inner(x) + self.offset


def test_subclasses_are_dataclasses_and_pytrees():
    m = Scale(np.array([1.0, 2.0]), power=2)
    assert dataclasses.is_dataclass(m)
    leaves, treedef = fgrad.tree.flatten(m)
    assert len(leaves) == 1 and leaves[0] is m.weight
    back = fgrad.tree.unflatten(treedef, leaves)
    assert type(back) is Scale and back.power == 2 and back.weight is m.weight
    # static fields are part of the structure
    assert fgrad.tree.structure(Scale(np.ones(2), power=3)) != treedef
    assert fgrad.tree.structure(Scale(np.zeros(2), power=2)) == treedef


def test_nested_modules_flatten_in_field_order():
    p = Pair(3.0)
    leaves = fgrad.tree.leaves(p)
    assert [np.asarray(v).tolist() for v in leaves] == [3.0, [3.0, 3.0]]
    doubled = fgrad.tree.map(lambda v: v * 2, p)
    assert type(doubled) is Pair and type(doubled.inner) is Scale and doubled.name == "pair"
    np.testing.assert_allclose(np.asarray(doubled(np.ones(2))), [12.0, 12.0])


def test_modules_are_immutable_and_replace_copies():
    m = Scale(np.ones(2))
    with pytest.raises(AttributeError, match="immutable.*replace"):
        m.weight = np.zeros(2)
    m2 = replace(m, power=3)
    assert m.power == 1 and m2.power == 3 and m2.weight is m.weight
    with pytest.raises(TypeError, match="has no fields \\['pow'\\]"):
        replace(m, pow=2)


def test_custom_init_must_set_every_field():
    class Half(Module):
        a: fgrad.Array
        b: fgrad.Array

        def __init__(self):
            self.a = fnp.zeros(1)

    with pytest.raises(TypeError, match=r"did not set the fields \['b'\]"):
        Half()


def test_static_fields_must_be_hashable():
    with pytest.raises(TypeError, match="static field 'power' must be hashable.*list"):
        Scale(np.ones(2), power=[1, 2])


def test_repr_shows_shapes_not_values():
    text = repr(Pair(np.float64(1.0)))
    assert text == "Pair(inner=Scale(weight=f64[], power=1), offset=f64[2], name='pair')"


def test_grad_with_respect_to_a_module_is_a_module():
    p = Pair(2.0)
    x = np.array([1.0, -1.0])
    g = fgrad.grad(lambda m: fnp.sum(m(x)))(p)
    assert type(g) is Pair and g.name == "pair"
    np.testing.assert_allclose(np.asarray(g.inner.weight), 0.0)   # d/dw sum(w*x) = sum x
    np.testing.assert_allclose(np.asarray(g.offset), [1.0, 1.0])


def test_jit_keys_on_static_fields():
    calls = []

    def forward(m, x):
        calls.append(m.power)
        return m(x)

    f = fgrad.jit(forward)
    x = np.array([2.0, 3.0])
    np.testing.assert_allclose(np.asarray(f(Scale(np.array([2.0, 2.0])), x)), [4.0, 6.0])
    np.testing.assert_allclose(np.asarray(f(Scale(np.array([3.0, 3.0])), x)), [6.0, 9.0])
    np.testing.assert_allclose(np.asarray(f(Scale(np.array([2.0, 2.0]), 2), x)), [8.0, 12.0])
    assert calls == [1, 2]               # retraced once, for the new static power


def _model():
    key = fgrad.random.key(0)
    return Sequential(Linear(3, 4, key=key), Residual(Sequential(BatchNorm(4), Dropout(0.3))))


def test_train_and_eval_mode_set_the_flag_throughout_the_tree():
    model = _model()
    bn, drop = model.layers[1].fn.layers
    assert bn.training and drop.training
    ev = eval_mode(model)
    ev_bn, ev_drop = ev.layers[1].fn.layers
    assert not ev_bn.training and not ev_drop.training
    assert bn.training and drop.training                      # the original is unchanged
    assert ev_bn.weight is bn.weight and ev.layers[0].weight is model.layers[0].weight
    back = train_mode(ev)
    assert fgrad.tree.structure(back) == fgrad.tree.structure(model)
    # mode helpers also walk plain containers of modules
    both = eval_mode({"a": model, "b": [Dropout(0.1)]})
    assert not both["b"][0].training and not both["a"].layers[1].fn.layers[1].training


def test_state_helpers():
    model = _model()
    assert is_stateful(model) and not is_stateful(Linear(2, 2, key=fgrad.random.key(1)))
    state = init_state(model)
    assert state[0] is None and state[1][1] is None
    bn_state = state[1][0]
    np.testing.assert_array_equal(np.asarray(bn_state.running_mean), np.zeros(4))
    np.testing.assert_array_equal(np.asarray(bn_state.running_var), np.ones(4))
    assert init_state(Linear(2, 2, key=fgrad.random.key(1))) is None


def test_flatten_unflatten_round_trip_of_a_container():
    model = _model()
    leaves, treedef = fgrad.tree.flatten(model)
    assert len(leaves) == 4                     # Linear weight, bias; BatchNorm weight, bias
    assert_trees_close(fgrad.tree.unflatten(treedef, leaves), model)
