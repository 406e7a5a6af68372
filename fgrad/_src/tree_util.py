"""Pytrees through optree: nested tuples, lists, dicts, None (an empty node),
NamedTuples, and classes registered here."""
import dataclasses
import operator

import optree

NAMESPACE = "fgrad"


def flatten(tree, is_leaf=None):
    """(leaves, treedef)."""
    return optree.tree_flatten(tree, is_leaf=is_leaf, none_is_leaf=False, namespace=NAMESPACE)


def unflatten(treedef, leaves):
    return optree.tree_unflatten(treedef, list(leaves))


def leaves(tree, is_leaf=None):
    return optree.tree_leaves(tree, is_leaf=is_leaf, none_is_leaf=False, namespace=NAMESPACE)


def structure(tree, is_leaf=None):
    return optree.tree_structure(tree, is_leaf=is_leaf, none_is_leaf=False, namespace=NAMESPACE)


def map(f, tree, *rest, is_leaf=None):
    """Apply f to corresponding leaves of `tree` and `rest` (same structure)."""
    return optree.tree_map(f, tree, *rest, is_leaf=is_leaf, none_is_leaf=False,
                           namespace=NAMESPACE)


def all_leaves_equal_structure(a, b):
    return structure(a) == structure(b)


def register_pytree_node(cls, flatten_fn, unflatten_fn):
    """Register a class: flatten_fn(obj) -> (children, aux); unflatten_fn(aux, children)."""
    optree.register_pytree_node(cls, flatten_fn, unflatten_fn, namespace=NAMESPACE)
    return cls


def _getter(names):
    """obj -> the tuple of its attributes `names` (operator.attrgetter: no Python
    loop per field; a training step flattens every layer of its model each call)."""
    if not names:
        return lambda obj: ()
    if len(names) == 1:
        get = operator.attrgetter(names[0])
        return lambda obj: (get(obj),)
    return operator.attrgetter(*names)


def register_dataclass(cls=None, *, data_fields=None, meta_fields=None):
    """Register a dataclass as a pytree (usable as a decorator).

    Data fields are children (arrays); meta fields are static and hashable, part
    of the tree structure. By default a field is meta when declared with
    `dataclasses.field(metadata={"static": True})`, data otherwise.
    """
    def register(cls):
        if not dataclasses.is_dataclass(cls):
            raise TypeError(f"register_dataclass: {cls.__name__} is not a dataclass; "
                            f"decorate it with @dataclasses.dataclass first")
        fields = [f for f in dataclasses.fields(cls) if f.init]
        if data_fields is None and meta_fields is None:
            meta = [f.name for f in fields if f.metadata.get("static", False)]
            data = [f.name for f in fields if f.name not in meta]
        else:
            data = list(data_fields or ())
            meta = list(meta_fields or ())
            missing = {f.name for f in fields} - set(data) - set(meta)
            if missing:
                raise TypeError(f"register_dataclass: fields {sorted(missing)} of "
                                f"{cls.__name__} are neither data nor meta fields")

        get_data, get_meta = _getter(data), _getter(meta)
        # fields in the instance __dict__ unless some class declares __slots__
        in_dict = not any("__slots__" in vars(k) for k in cls.__mro__)
        names = data + meta

        def flatten_fn(obj):
            return get_data(obj), get_meta(obj), data

        def unflatten_fn(aux, children):
            obj = object.__new__(cls)
            if in_dict:       # one update, not a __setattr__ per field
                obj.__dict__.update(zip(names, (*children, *aux)))
                return obj
            for n, v in zip(data, children):
                object.__setattr__(obj, n, v)
            for n, v in zip(meta, aux):
                object.__setattr__(obj, n, v)
            return obj

        optree.register_pytree_node(cls, flatten_fn, unflatten_fn, namespace=NAMESPACE)
        return cls

    return register if cls is None else register(cls)
