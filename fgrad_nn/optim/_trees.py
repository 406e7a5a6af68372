"""Tree helpers for optimizers: leaf paths for error messages, and a tree map
that first checks that its trees agree (structure, then shapes) and says where
they do not."""
import dataclasses

import fgrad
import fgrad.numpy as fnp


def _children(node):
    """The direct children of a pytree node, with a name for each, or None for a leaf."""
    if node is None:
        return []
    if isinstance(node, dict):
        try:
            keys = sorted(node)
        except TypeError:
            keys = list(node)
        return [(f"[{k!r}]", node[k]) for k in keys]
    if isinstance(node, tuple) and hasattr(node, "_fields"):
        return [(f".{f}", getattr(node, f)) for f in node._fields]
    if isinstance(node, (list, tuple)):
        return [(f"[{i}]", c) for i, c in enumerate(node)]
    kids = fgrad.tree.leaves(node, is_leaf=lambda x: x is not node)
    if len(kids) == 1 and kids[0] is node:
        return None
    attrs = vars(node) if hasattr(node, "__dict__") else {}
    if dataclasses.is_dataclass(node):
        attrs = {f.name: getattr(node, f.name) for f in dataclasses.fields(node)}
    names = []
    for i, kid in enumerate(kids):
        name = next((a for a, v in attrs.items() if v is kid), None)
        names.append(f".{name}" if name else f"<{i}>")
    return list(zip(names, kids))


def leaf_paths(tree):
    """A readable path (e.g. "['layer1']['w']") for every leaf, in flatten order."""
    out = []

    def walk(node, prefix):
        kids = _children(node)
        if kids is None:
            out.append(prefix or "<root>")
            return
        for name, kid in kids:
            walk(kid, prefix + name)

    walk(tree, "")
    n = len(fgrad.tree.leaves(tree))
    return out if len(out) == n else [f"leaf #{i}" for i in range(n)]


def _describe(leaf):
    shape = getattr(leaf, "shape", ())
    dtype = getattr(leaf, "dtype", type(leaf).__name__)
    return f"shape {tuple(shape)} {dtype}"


def check_same_tree(where, named_trees, hint):
    """Raise ValueError unless all (name, tree) pairs share one structure and shapes."""
    (ref_name, ref), *rest = named_trees
    ref_def = fgrad.tree.structure(ref)
    for name, other in rest:
        if fgrad.tree.structure(other) != ref_def:
            a, b = leaf_paths(ref), leaf_paths(other)
            only_a = [p for p in a if p not in b]
            only_b = [p for p in b if p not in a]
            detail = ""
            if only_a or only_b:
                detail = (f" Leaves only in {ref_name}: {only_a[:8]}; "
                          f"leaves only in {name}: {only_b[:8]}.")
            raise ValueError(
                f"{where}: the {name} tree does not match the {ref_name} tree.{detail}\n"
                f"  {ref_name}: {ref_def}\n  {name}: {fgrad.tree.structure(other)}\n{hint}")
        pairs = list(zip(fgrad.tree.leaves(ref), fgrad.tree.leaves(other)))
        if all(fnp.shape(x) == fnp.shape(y) for x, y in pairs):
            continue
        for path, (x, y) in zip(leaf_paths(ref), pairs):
            if fnp.shape(x) != fnp.shape(y):
                raise ValueError(
                    f"{where}: shapes differ at {path}: {ref_name} has {_describe(x)}, "
                    f"{name} has {_describe(y)}.\n{hint}")


GRADS_HINT = ("Hint: the gradients (updates) must have the structure and shapes of the "
              "params given to init (the state's trees were built from them); differentiate "
              "the loss with respect to those params.")


def map_checked(where, fn, updates, *others, names):
    """tree.map(fn, updates, *others) after checking that all the trees agree."""
    check_same_tree(where, [("updates", updates), *zip(names, others)], GRADS_HINT)
    return fgrad.tree.map(fn, updates, *others)


def hyper(value, like):
    """A hyper-parameter ready to combine with the array `like`: Python numbers
    stay weakly typed; arrays take like's dtype, so states keep their dtypes."""
    if isinstance(value, (int, float)):
        return value
    return fnp.asarray(value).astype(fnp.result_type(like))


def float_dtype(tree):
    """The widest floating dtype among a tree's leaves (float32 when there is none)."""
    dtypes = [fnp.result_type(x) for x in fgrad.tree.leaves(tree)]
    floats = [d for d in dtypes if fnp.issubdtype(d, fnp.floating)]
    return fnp.result_type(*floats) if floats else fnp.dtype(fnp.float32)


def sum_of_squares(x):
    """sum(x**2), float16 leaves squared and summed in float32 (in float16 the
    squares overflow above 256 and the sum above 65504, so a norm would be inf)."""
    if fnp.result_type(x) == fnp.float16:
        x = fnp.astype(x, fnp.float32)
    return fnp.sum(fnp.square(x))
