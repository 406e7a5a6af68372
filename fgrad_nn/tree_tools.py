"""Working with models as pytrees (Equinox's style): pick out the arrays
(`filter`, `partition`, `combine`, `is_array`, `is_inexact_array`), count
parameters, and change a model functionally (`tree_at`).

    params, static = partition(model, is_inexact_array)   # trainable leaves / the rest
    grads = fgrad.grad(lambda p: loss(combine(p, static), x))(params)
    model = tree_at(lambda m: m.layers[0].bias, model, replace=fnp.zeros(10))
"""
import numpy as np
import optree

import fgrad
from fgrad._src.tree_util import NAMESPACE

from fgrad_nn.module import is_function

__all__ = ["is_array", "is_inexact_array", "filter", "partition", "combine", "tree_at",
           "count_params"]


def is_array(x):
    """Whether x is an array (an fgrad Array, a traced value, or a NumPy array); Python
    scalars and everything else are not."""
    if isinstance(x, (np.ndarray, fgrad.Array)):
        return True
    return hasattr(x, "shape") and hasattr(x, "dtype") and hasattr(x, "aval")


def is_inexact_array(x):
    """Whether x is an array of floating or complex dtype (what an optimizer trains)."""
    return is_array(x) and np.dtype(x.dtype).kind in "fc"


def _spec_tree(filter_spec, tree, is_leaf):
    """`filter_spec` (a bool, a function of a leaf, or a tree of those that is a prefix
    of `tree`) as one bool per leaf of `tree`."""
    def decide(spec, leaf):
        if callable(spec) and not isinstance(spec, (bool, np.bool_)):
            keep = spec(leaf)
        else:
            keep = spec
        if not isinstance(keep, (bool, np.bool_)):
            raise TypeError(f"filter: a filter spec must give True or False for each leaf, "
                            f"got {keep!r} ({type(keep).__name__})")
        return bool(keep)
    try:
        full = optree.tree_broadcast_prefix(filter_spec, tree, is_leaf=is_function,
                                            none_is_leaf=False, namespace=NAMESPACE)
    except ValueError as e:
        raise ValueError(f"filter: filter_spec must be a bool, a function of a leaf, or a "
                         f"tree of those whose structure is a prefix of the tree's: {e}") from None
    return optree.tree_map(decide, full, tree, is_leaf=is_leaf, none_is_leaf=False,
                           namespace=NAMESPACE)


def filter(tree, filter_spec, inverse=False, replace=None, is_leaf=None):
    """`tree` with the leaves the spec rejects (accepts, with inverse=True) replaced by
    `replace` (None: an empty subtree, so grad and optimizers skip it)."""
    keep = _spec_tree(filter_spec, tree, is_leaf)
    return optree.tree_map(lambda k, x: x if k != inverse else replace, keep, tree,
                           is_leaf=is_leaf, none_is_leaf=False, namespace=NAMESPACE)


def partition(tree, filter_spec, replace=None, is_leaf=None):
    """(the leaves the spec accepts, the others), each with `replace` (None) in the
    other's places; `combine` puts them back together."""
    return (filter(tree, filter_spec, False, replace, is_leaf),
            filter(tree, filter_spec, True, replace, is_leaf))


def combine(*trees, is_leaf=None):
    """Merge trees of the same structure leaf by leaf, taking each leaf from the first
    tree where it is not None (undoes `partition`)."""
    if not trees:
        raise TypeError("combine: give at least one tree")

    def first(*leaves):
        return next((x for x in leaves if x is not None), None)
    try:
        return optree.tree_map(first, *trees, is_leaf=is_leaf, none_is_leaf=True,
                               namespace=NAMESPACE)
    except ValueError as e:
        raise ValueError(f"combine: the trees must have one structure (None marking the "
                         f"holes), as partition makes them: {e}") from None


def count_params(model, filter_spec=is_inexact_array):
    """The number of scalars in the model's floating-point arrays (or in the leaves
    `filter_spec` accepts)."""
    kept = filter(model, filter_spec)
    return int(sum(int(np.prod(np.shape(x), dtype=np.int64)) for x in fgrad.tree.leaves(kept)))


# ----------------------------------------------------------------------------
# tree_at

_AMBIGUOUS = "ambiguous"


class _Hole:
    """Stands in for one leaf (or None) of the tree in the copy `where` is run on."""
    __slots__ = ("path",)

    def __init__(self, path):
        self.path = path

    def __repr__(self):
        return f"<leaf at {self.path!r}>"

    def __getattr__(self, name):
        raise AttributeError(f"tree_at: where(tree) must only pick nodes, but it reads "
                             f".{name} of a leaf; compute on arrays after tree_at, not "
                             f"inside where")


def _is_node(x, is_leaf):
    if x is None:
        return False
    return not optree.tree_is_leaf(x, is_leaf=is_leaf, none_is_leaf=True, namespace=NAMESPACE)


def _children(x, is_leaf):
    children, meta, _, unflatten = optree.tree_flatten_one_level(
        x, is_leaf=is_leaf, none_is_leaf=True, namespace=NAMESPACE)
    return list(children), lambda new: unflatten(meta, new)


def _mirror(x, path, is_leaf, nodes):
    """A copy of x built from fresh nodes, leaves replaced by _Holes; `nodes` maps
    id(copy node) -> path for every node and hole."""
    if _is_node(x, is_leaf):
        children, unflatten = _children(x, is_leaf)
        copy = unflatten([_mirror(c, path + (i,), is_leaf, nodes)
                          for i, c in enumerate(children)])
        # an empty node (e.g. ()) may be a shared singleton: then it is ambiguous
        nodes[id(copy)] = _AMBIGUOUS if id(copy) in nodes else path
        return copy
    hole = _Hole(path)
    nodes[id(hole)] = path
    return hole


def _rebuild(x, path, targets, values, is_leaf):
    if path in targets:
        return values[path](x)
    if not _is_node(x, is_leaf) or not any(t[:len(path)] == path for t in targets):
        return x
    children, unflatten = _children(x, is_leaf)
    return unflatten([_rebuild(c, path + (i,), targets, values, is_leaf)
                      for i, c in enumerate(children)])


_MISSING = object()


def tree_at(where, tree, replace=_MISSING, replace_fn=_MISSING, is_leaf=None):
    """A copy of `tree` with the nodes `where(tree)` picks replaced (functional model
    surgery: the original is unchanged).

    where: a function returning one node of the tree (a leaf, a None field, a
    sub-module, a tuple...) or a tuple/list of nodes, e.g.
    `lambda m: (m.layers[0].weight, m.layers[2])`. replace: the new value (a
    sequence of them when where picks several); or replace_fn(old) -> new.
    """
    if (replace is _MISSING) == (replace_fn is _MISSING):
        raise TypeError("tree_at: give exactly one of replace=... and replace_fn=...")
    nodes = {}
    mirror = _mirror(tree, (), is_leaf, nodes)
    picked = where(mirror)
    if id(picked) in nodes or not isinstance(picked, (tuple, list)):
        picked, single = [picked], True
    else:
        picked, single = list(picked), False
    paths = []
    for node in picked:
        if id(node) not in nodes:
            raise ValueError(f"tree_at: where(tree) must return nodes of the tree (its "
                             f"fields, sub-modules, leaves), got {type(node).__name__} "
                             f"{node!r:.80}; static fields (sizes, flags) are not nodes: "
                             f"use fgrad_nn.replace")
        if nodes[id(node)] is _AMBIGUOUS:
            raise ValueError(f"tree_at: where(tree) returns {node!r}, an empty node that "
                             f"occurs more than once in the tree; pick its parent instead")
        paths.append(nodes[id(node)])
    if len(set(paths)) != len(paths):
        raise ValueError("tree_at: where(tree) picks the same node twice")
    for p in paths:
        for q in paths:
            if p != q and q[:len(p)] == p:
                raise ValueError("tree_at: where(tree) picks a node and one inside it; "
                                 "pick one of them")
    if replace_fn is not _MISSING:
        values = {p: replace_fn for p in paths}
    else:
        news = [replace] if single else list(replace)
        if len(news) != len(paths):
            raise ValueError(f"tree_at: where(tree) picks {len(paths)} nodes but replace "
                             f"has {len(news)} values")
        values = {p: (lambda old, v=v: v) for p, v in zip(paths, news)}
    return _rebuild(tree, (), set(paths), values, is_leaf)
