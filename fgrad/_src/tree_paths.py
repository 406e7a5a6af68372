"""Pytree paths: where each leaf sits in a tree, and readable strings for it.

A path is an optree accessor: a tuple of entries, one per level (a dataclass or
named-tuple field, a sequence index, a mapping key), that can also be called on a
tree to fetch the leaf (`path(tree)`). `keystr(path)` writes it as Python would
reach it, e.g. "layers[0].weight".
"""
import optree

from fgrad._src.tree_util import NAMESPACE

_ATTRIBUTE_ENTRIES = (optree.GetAttrEntry, optree.DataclassEntry, optree.NamedTupleEntry)


def flatten_with_path(tree, is_leaf=None):
    """([(path, leaf), ...], treedef), the leaves in `flatten`'s order."""
    paths, leaves, treedef = optree.tree_flatten_with_accessor(
        tree, is_leaf=is_leaf, none_is_leaf=False, namespace=NAMESPACE)
    return list(zip(paths, leaves)), treedef


def leaves_with_path(tree, is_leaf=None):
    """[(path, leaf), ...] in `leaves`'s order."""
    return flatten_with_path(tree, is_leaf)[0]


def map_with_path(f, tree, *rest, is_leaf=None):
    """Like `map`, calling f(path, leaf, *corresponding leaves of rest)."""
    return optree.tree_map_with_accessor(f, tree, *rest, is_leaf=is_leaf, none_is_leaf=False,
                                         namespace=NAMESPACE)


def _entry_key(entry):
    """The field name, index or key one entry stands for."""
    if isinstance(entry, (optree.DataclassEntry, optree.NamedTupleEntry)):
        return entry.field
    return entry.entry


def keystr(path, *, simple=False, separator="."):
    """A path as a string. By default as Python reaches the leaf ("layers[0].weight",
    "['opt'][1].mu"); with simple=True the bare names and indices joined by
    `separator` ("layers.0.weight")."""
    entries = tuple(path)
    if simple:
        return separator.join(str(_entry_key(e)) for e in entries)
    parts = []
    for e in entries:
        if isinstance(e, _ATTRIBUTE_ENTRIES):
            parts.append(f".{_entry_key(e)}")
        elif isinstance(e, optree.SequenceEntry):
            parts.append(f"[{e.entry}]")
        else:
            parts.append(f"[{e.entry!r}]")
    return "".join(parts).lstrip(".")
