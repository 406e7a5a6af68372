"""Tree tools: fgrad.tree paths and keystr; fgrad_nn's filter/partition/combine,
is_array/is_inexact_array, tree_at, count_params and summary."""
import collections

import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
import fgrad_nn as nn
from tree_asserts import assert_trees_close

P = collections.namedtuple("P", "x y")


def _key(i=0):
    return fgrad.random.key(i)


def _model():
    return nn.Sequential(nn.Linear(3, 4, key=_key(1)), nn.LayerNorm(4), nn.ReLU(),
                         nn.Linear(4, 2, bias=False, key=_key(2)))


# ----------------------------------------------------------------------------
# fgrad.tree paths

def test_flatten_with_path_and_keystr():
    tree = {"a": _model(), "b": [1.0, (2.0,)], "n": P(3.0, None)}
    pairs, treedef = fgrad.tree.flatten_with_path(tree)
    leaves, treedef2 = fgrad.tree.flatten(tree)
    assert treedef == treedef2
    assert len(pairs) == len(leaves) and all(a is b for (_, a), b in zip(pairs, leaves))
    strs = [fgrad.tree.keystr(p) for p, _ in pairs]
    assert strs == ["['a'].layers[0].weight", "['a'].layers[0].bias",
                    "['a'].layers[1].weight", "['a'].layers[1].bias",
                    "['a'].layers[3].weight", "['b'][0]", "['b'][1][0]", "['n'].x"]
    assert fgrad.tree.keystr(pairs[0][0], simple=True) == "a.layers.0.weight"
    assert fgrad.tree.keystr(pairs[6][0], simple=True, separator="/") == "b/1/0"
    for path, leaf in pairs:          # a path fetches its leaf
        assert path(tree) is leaf
    assert fgrad.tree.leaves_with_path(tree)[5][1] == 1.0


def test_map_with_path():
    model = _model()
    names = fgrad.tree.map_with_path(lambda p, x: fgrad.tree.keystr(p), model)
    assert names.layers[0].weight == "layers[0].weight"
    assert names.layers[3].bias is None
    doubled = fgrad.tree.map_with_path(lambda p, x, y: x + y, model, model)
    np.testing.assert_array_equal(doubled.layers[1].weight, 2 * np.asarray(model.layers[1].weight))


# ----------------------------------------------------------------------------
# filter / partition / combine

def test_is_array_and_is_inexact_array():
    assert nn.is_array(np.zeros(2)) and nn.is_array(fnp.zeros(2))
    assert not nn.is_array(1.0) and not nn.is_array("x") and not nn.is_array([1.0])
    assert nn.is_inexact_array(fnp.zeros(2)) and nn.is_inexact_array(np.zeros(2, np.complex64))
    assert not nn.is_inexact_array(fnp.zeros(2, fnp.int32)) and not nn.is_inexact_array(1.0)
    seen = []
    fgrad.jit(lambda x: seen.append(nn.is_array(x)) or x)(fnp.ones(2))
    assert seen == [True]


def test_partition_combine_round_trip_and_grad():
    tree = {"w": fnp.ones((2, 2)), "step": fnp.zeros((), fnp.int32), "lr": 0.1}
    params, rest = nn.partition(tree, nn.is_inexact_array)
    assert params == {"w": params["w"], "step": None, "lr": None}
    assert rest["w"] is None and rest["lr"] == 0.1
    assert_trees_close(nn.combine(params, rest), tree)
    g = fgrad.grad(lambda p: (nn.combine(p, rest)["w"] ** 2).sum())(params)
    np.testing.assert_allclose(g["w"], 2 * np.ones((2, 2)))
    assert g["step"] is None


def test_filter_with_a_tree_spec_inverse_and_replace():
    model = _model()
    spec = fgrad.tree.map(lambda _: False, model)
    spec = nn.tree_at(lambda s: s.layers[0], spec, replace=True)    # a prefix: a whole layer
    kept = nn.filter(model, spec)
    assert kept.layers[0].weight is model.layers[0].weight and kept.layers[1].weight is None
    dropped = nn.filter(model, spec, inverse=True, replace=0)
    assert dropped.layers[0].weight == 0 and dropped.layers[1].weight is model.layers[1].weight
    with pytest.raises(TypeError, match="True or False"):
        nn.filter(model, lambda x: "yes")
    with pytest.raises(ValueError, match="prefix"):
        nn.filter(model, [True, False])
    with pytest.raises(ValueError, match="one structure"):
        nn.combine({"a": 1}, {"a": 1, "b": None})


def test_count_params():
    model = _model()
    assert nn.count_params(model) == 3 * 4 + 4 + 4 + 4 + 4 * 2
    lstm = nn.LSTM(3, 5, num_layers=2, key=_key())
    assert nn.count_params(lstm) == 4 * 5 * (3 + 5 + 2) + 4 * 5 * (5 + 5 + 2)
    assert nn.count_params({"a": fnp.zeros(3), "i": fnp.zeros(4, fnp.int32)}) == 3
    assert nn.count_params({"i": fnp.zeros(4, fnp.int32)}, nn.is_array) == 4


# ----------------------------------------------------------------------------
# tree_at

def test_tree_at_replace_and_replace_fn():
    model = _model()
    new = nn.tree_at(lambda m: m.layers[3].bias, model, replace=fnp.zeros(2))   # a None field
    assert new.layers[3].bias.shape == (2,) and model.layers[3].bias is None
    assert new.layers[0] is model.layers[0]               # untouched parts are shared
    x = np.ones(3, np.float32)
    np.testing.assert_allclose(new(x), model(x))
    scaled = nn.tree_at(lambda m: (m.layers[0].weight, m.layers[1].bias), model,
                        replace_fn=lambda w: w * 2)
    np.testing.assert_allclose(scaled.layers[0].weight, 2 * np.asarray(model.layers[0].weight))
    swapped = nn.tree_at(lambda m: m.layers[1], model, replace=nn.Identity())
    assert isinstance(swapped.layers[1], nn.Identity)
    both = nn.tree_at(lambda m: [m.layers[0].bias, m.layers[2]], model,
                      replace=[fnp.zeros(4), nn.Tanh()])
    assert isinstance(both.layers[2], nn.Tanh) and float(np.abs(both.layers[0].bias).sum()) == 0
    whole = nn.tree_at(lambda m: m.layers, model, replace=(nn.Identity(),))
    assert len(whole.layers) == 1
    plain = nn.tree_at(lambda t: t["b"][1], {"a": P(1, None), "b": [2, 3]},
                       replace_fn=lambda v: v * 10)
    assert plain == {"a": P(1, None), "b": [2, 30]}
    lstm = nn.LSTM(2, 3, key=_key())
    zeroed = nn.tree_at(lambda m: m.weight_hh_l0, lstm, replace=fnp.zeros((12, 3)))
    assert float(np.abs(zeroed.cells[0].weight_hh).sum()) == 0


def test_tree_at_errors():
    model = _model()
    with pytest.raises(TypeError, match="exactly one"):
        nn.tree_at(lambda m: m.layers[0], model)
    with pytest.raises(ValueError, match="nodes of the tree"):
        nn.tree_at(lambda m: m.layers[0].in_features, model, replace=1)
    with pytest.raises(AttributeError, match="reads .T of a leaf"):
        nn.tree_at(lambda m: m.layers[0].weight.T, model, replace=1)
    with pytest.raises(ValueError, match="one inside it"):
        nn.tree_at(lambda m: (m.layers[0], m.layers[0].weight), model, replace=(1, 2))
    with pytest.raises(ValueError, match="picks 2 nodes"):
        nn.tree_at(lambda m: (m.layers[0], m.layers[1]), model, replace=(1,))


# ----------------------------------------------------------------------------
# summary

def test_summary_lists_layers_shapes_and_counts():
    model = nn.Sequential(nn.Conv2d(1, 4, 3, key=_key()), nn.BatchNorm(4), nn.ReLU(),
                          nn.Flatten(), nn.MLP([4 * 6 * 6, 16, 3], key=_key(1)),
                          nn.Dropout(0.2))
    lines = []
    text = nn.summary(model, np.zeros((2, 1, 8, 8), np.float32), print_fn=lines.append)
    assert lines == [text]
    rows = [r.split() for r in text.splitlines()[2:-2]]
    assert rows[0] == ["(model)", "Sequential", "(2,", "3)", "2419"]
    assert rows[1] == ["layers.0", "Conv2d", "(2,", "4,", "6,", "6)", "40"]
    assert rows[4][:3] == ["layers.3", "Flatten", "(2,"]
    assert rows[5][:2] == ["layers.4", "MLP"] and rows[5][-1] == str(2320 + 51)
    assert rows[6][:2] == ["layers.4.layers.0", "Linear"] and rows[6][-1] == "2320"
    assert text.splitlines()[-1] == "total parameters: 2,419"
    assert nn.count_params(model) == 2419


def test_summary_traces_without_computing():
    lstm = nn.LSTM(3, 5, num_layers=2, key=_key())
    text = nn.summary(lstm, fgrad.ShapeDtypeStruct((7, 2, 3), np.float32), print_fn=lambda s: None)
    assert "((7, 2, 5), ((2, 2, 5), (2, 2, 5)))" in text
    calls = []
    model = nn.Sequential(nn.Lambda(lambda x: calls.append(type(x).__name__) or x))
    nn.summary(model, np.zeros(3), print_fn=lambda s: None)
    assert calls and calls[0] not in ("Array", "ndarray")     # a tracer: nothing computed


class _Encoder(nn.Module):
    """A custom module: calls its children and reads a child's field."""
    proj: nn.Linear
    rnn: nn.GRU

    def __call__(self, x, *, key=None):
        assert self.proj.out_features == 6
        y, h = self.rnn(self.proj(x))
        return h[-1]


def test_summary_of_a_custom_module():
    model = _Encoder(nn.Linear(3, 6, key=_key()), nn.GRU(6, 5, batch_first=True, key=_key(1)))
    text = nn.summary(model, np.zeros((2, 7, 3), np.float32), print_fn=lambda s: None)
    rows = [r.split() for r in text.splitlines()[2:-2]]
    assert [r[:2] for r in rows] == [["(model)", "_Encoder"], ["proj", "Linear"],
                                     ["rnn", "GRU"]]
    assert rows[0][2:] == ["(2,", "5)", str(nn.count_params(model))]
    assert rows[2][2:] == ["((2,", "7,", "5),", "(1,", "2,", "5))", str(3 * 5 * (6 + 5 + 2))]
