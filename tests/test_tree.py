"""fgrad.tree: map, leaves, structure, flatten, unflatten, register_dataclass,
register_pytree_node; None is an empty node; NamedTuples are nodes."""
import dataclasses
from typing import NamedTuple

import numpy as np
import pytest

import fgrad
from fgrad import lax


class Point(NamedTuple):
    x: object
    y: object


@fgrad.tree.register_dataclass
@dataclasses.dataclass
class Layer:
    weight: object
    bias: object
    activation: str = dataclasses.field(default="relu", metadata={"static": True})


class Box:
    """A plain class registered by hand: children (lo, hi), static label."""

    def __init__(self, lo, hi, label):
        self.lo, self.hi, self.label = lo, hi, label

    def __eq__(self, other):
        return (type(other) is Box and self.label == other.label
                and self.lo == other.lo and self.hi == other.hi)


fgrad.tree.register_pytree_node(
    Box, lambda b: ((b.lo, b.hi), b.label), lambda label, children: Box(*children, label))


# ----------------------------------------------------------------------------
# leaves / structure / flatten / unflatten

@pytest.mark.parametrize("tree,leaves", [
    (1, [1]),
    ((1, 2), [1, 2]),
    ([1, [2, (3,)]], [1, 2, 3]),
    ({"b": 2, "a": 1}, [1, 2]),              # dicts flatten in sorted key order
    ((1, None, 2), [1, 2]),                  # None is an empty node, not a leaf
    (None, []),
    ([None, (None,), {}], []),
    (Point(1, (2, 3)), [1, 2, 3]),
    (Layer(1, 2, "tanh"), [1, 2]),
    (Box(1, 2, "b"), [1, 2]),
])
def test_leaves_and_round_trip(tree, leaves):
    assert fgrad.tree.leaves(tree) == leaves
    flat, treedef = fgrad.tree.flatten(tree)
    assert flat == leaves
    assert treedef.num_leaves == len(leaves)
    rebuilt = fgrad.tree.unflatten(treedef, flat)
    assert fgrad.tree.structure(rebuilt) == treedef
    assert type(rebuilt) is type(tree)
    if not isinstance(tree, Layer):
        assert rebuilt == tree


def test_unflatten_with_new_leaves():
    tree = {"a": (1, None), "b": [Point(2, 3)]}
    _, treedef = fgrad.tree.flatten(tree)
    out = fgrad.tree.unflatten(treedef, ["x", "y", "z"])
    assert out == {"a": ("x", None), "b": [Point("y", "z")]}
    with pytest.raises(ValueError):
        fgrad.tree.unflatten(treedef, ["too", "few"])


def test_structure_distinguishes_containers():
    s = fgrad.tree.structure
    assert s((1, 2)) != s([1, 2])
    assert s((1, 2)) != s(Point(1, 2))
    assert s({"a": 1}) != s({"b": 1})
    assert s((1, None)) != s((1, 2))
    assert s((1, None)) == s((5, None))
    assert s(np.ones(3)) == s(7)  # arrays are leaves


def test_arrays_and_fgrad_values_are_leaves():
    a, b = np.ones((2, 3)), lax.sin(np.ones(2))
    assert len(fgrad.tree.leaves([a, b])) == 2
    assert fgrad.tree.leaves([a, b])[1] is b


# ----------------------------------------------------------------------------
# map

def test_map_single_tree():
    tree = {"a": [1, 2], "b": None, "c": Point(3, (4,))}
    out = fgrad.tree.map(lambda v: v * 10, tree)
    assert out == {"a": [10, 20], "b": None, "c": Point(30, (40,))}


def test_map_multiple_trees():
    out = fgrad.tree.map(lambda a, b: a + b, (1, [2, 3]), (10, [20, 30]))
    assert out == (11, [22, 33])
    with pytest.raises(ValueError):
        fgrad.tree.map(lambda a, b: a + b, (1, 2), (1, 2, 3))


def test_map_is_leaf():
    tree = {"p": Point(1, 2), "q": [Point(3, 4)]}
    out = fgrad.tree.map(lambda p: p.x + p.y, tree, is_leaf=lambda n: isinstance(n, Point))
    assert out == {"p": 3, "q": [7]}
    assert fgrad.tree.leaves(tree, is_leaf=lambda n: isinstance(n, Point)) == \
        [Point(1, 2), Point(3, 4)]


def test_map_over_arrays():
    tree = {"w": np.ones((2, 2)), "b": np.zeros(2)}
    out = fgrad.tree.map(lambda x: lax.add(x, 1.0), tree)
    np.testing.assert_array_equal(np.asarray(out["w"]), np.full((2, 2), 2.0))
    np.testing.assert_array_equal(np.asarray(out["b"]), np.ones(2))


# ----------------------------------------------------------------------------
# register_dataclass with a static field

def test_dataclass_static_field_is_part_of_structure():
    a = Layer(np.ones(2), np.zeros(2), "relu")
    b = Layer(np.ones(2), np.zeros(2), "tanh")
    leaves, treedef = fgrad.tree.flatten(a)
    assert len(leaves) == 2
    assert fgrad.tree.structure(a) != fgrad.tree.structure(b)
    assert fgrad.tree.structure(a) == fgrad.tree.structure(Layer(1, 2, "relu"))
    rebuilt = fgrad.tree.unflatten(treedef, [5, 6])
    assert isinstance(rebuilt, Layer)
    assert (rebuilt.weight, rebuilt.bias, rebuilt.activation) == (5, 6, "relu")


def test_dataclass_map_keeps_static_field():
    out = fgrad.tree.map(lambda v: v + 1, Layer(1, 2, "gelu"))
    assert (out.weight, out.bias, out.activation) == (2, 3, "gelu")


def test_dataclass_explicit_fields():
    @dataclasses.dataclass
    class Cfg:
        a: object
        b: object
        name: str

    fgrad.tree.register_dataclass(Cfg, data_fields=["a", "b"], meta_fields=["name"])
    leaves, treedef = fgrad.tree.flatten(Cfg(1, 2, "n"))
    assert leaves == [1, 2]
    assert fgrad.tree.unflatten(treedef, [3, 4]) == Cfg(3, 4, "n")


@pytest.mark.parametrize("slots", [False, True])
@pytest.mark.parametrize("data,meta", [([], []), (["a"], []), ([], ["name"]),
                                       (["a", "b"], ["name"])])
def test_dataclass_round_trip(slots, data, meta):
    """Any number of data and meta fields, frozen, with or without __slots__ (whose
    values do not live in the instance dict), and a subclass adding a field."""
    @dataclasses.dataclass(frozen=True, slots=slots)
    class Base:
        a: object = 1
        b: object = 2
        name: str = "n"

    @dataclasses.dataclass(frozen=True)
    class Sub(Base):
        c: object = 3

    for cls, extra in [(Base, []), (Sub, ["c"])]:
        fgrad.tree.register_dataclass(cls, data_fields=data + extra,
                                      meta_fields=meta + [n for n in ("a", "b", "name")
                                                          if n not in data + meta])
        leaves, treedef = fgrad.tree.flatten(cls(a=10, b=20, name="x"))
        assert leaves == [{"a": 10, "b": 20, "name": "x", "c": 3}[n] for n in data + extra]
        rebuilt = fgrad.tree.unflatten(treedef, [-v for v in leaves])
        assert type(rebuilt) is cls
        assert rebuilt == cls(**{"a": 10, "b": 20, "name": "x",
                                 **{n: -v for n, v in zip(data + extra, leaves)}})


def test_register_dataclass_errors():
    class NotADataclass:
        pass
    with pytest.raises(TypeError, match="dataclass"):
        fgrad.tree.register_dataclass(NotADataclass)

    @dataclasses.dataclass
    class Partial:
        a: object
        b: object
    with pytest.raises(TypeError, match="neither"):
        fgrad.tree.register_dataclass(Partial, data_fields=["a"], meta_fields=[])


def test_dataclass_under_grad():
    def loss(layer, x):
        assert layer.activation == "tanh"
        return lax.reduce_sum(lax.tanh(layer.weight * x + layer.bias), (0,))
    layer = Layer(np.array([0.5, -1.0]), np.array([0.1, 0.2]), "tanh")
    x = np.array([2.0, 3.0])
    g = fgrad.grad(loss)(layer, x)
    assert isinstance(g, Layer) and g.activation == "tanh"
    d = 1 - np.tanh(layer.weight * x + layer.bias) ** 2
    np.testing.assert_allclose(np.asarray(g.weight), d * x, rtol=1e-14)
    np.testing.assert_allclose(np.asarray(g.bias), d, rtol=1e-14)


# ----------------------------------------------------------------------------
# register_pytree_node

def test_registered_node_map_and_grad():
    out = fgrad.tree.map(lambda v: v * 2, Box(1, 2, "lbl"))
    assert out == Box(2, 4, "lbl")
    g = fgrad.grad(lambda b: lax.mul(b.lo, b.hi))(Box(np.float64(3.0), np.float64(4.0), "k"))
    assert isinstance(g, Box) and g.label == "k"
    assert (float(g.lo), float(g.hi)) == (4.0, 3.0)


def test_registered_node_label_in_structure():
    assert fgrad.tree.structure(Box(1, 2, "a")) != fgrad.tree.structure(Box(1, 2, "b"))
    assert fgrad.tree.structure(Box(1, 2, "a")) == fgrad.tree.structure(Box(5, 6, "a"))


def test_register_pytree_node_returns_class():
    class Thing:
        def __init__(self, v):
            self.v = v
    assert fgrad.tree.register_pytree_node(
        Thing, lambda t: ((t.v,), None), lambda _, c: Thing(*c)) is Thing
    assert fgrad.tree.leaves([Thing(1), Thing((2, 3))]) == [1, 2, 3]


# ----------------------------------------------------------------------------
# None and NamedTuple through transforms

def test_none_and_namedtuple_through_jvp_and_vjp():
    def f(p, extra):
        assert extra is None
        return Point(lax.sin(p.x), None), p.y * 2.0
    p = Point(np.float64(0.5), np.float64(1.0))
    out, t = fgrad.jvp(f, (p, None), (Point(np.float64(1.0), np.float64(1.0)), None))
    assert isinstance(t[0], Point) and t[0].y is None
    assert float(t[0].x) == pytest.approx(np.cos(0.5)) and float(t[1]) == 2.0
    out, pullback = fgrad.vjp(f, p, None)
    ct_p, ct_extra = pullback((Point(np.float64(1.0), None), np.float64(1.0)))
    assert ct_extra is None
    assert isinstance(ct_p, Point)
    assert float(ct_p.x) == pytest.approx(np.cos(0.5)) and float(ct_p.y) == 2.0
