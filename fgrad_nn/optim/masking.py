"""Apply a transformation to some parameters only (`masked`), or freeze some
(`freeze`, built on `set_to_zero`)."""
from typing import NamedTuple

import fgrad
import fgrad.numpy as fnp
from fgrad_nn.module import is_function

from .base import EmptyState, GradientTransformation


class MaskedState(NamedTuple):
    """The inner transformation's state, covering the selected leaves only."""
    inner_state: object


def _leaf_flags(where, mask, tree):
    """One Python bool per leaf of `tree`, from `mask`: a tree of bools with the
    structure of `tree` or a prefix of it (a model of bools included, though a
    model is callable), or a function returning one."""
    if is_function(mask):
        mask = mask(tree)
    try:
        spread = fgrad.tree.map(lambda m, sub: fgrad.tree.map(lambda _: m, sub), mask, tree)
    except (ValueError, TypeError):
        raise ValueError(
            f"{where}: the mask must be a tree of bools with the structure of the params "
            f"(or a prefix of it); mask is {fgrad.tree.structure(mask)}, params are "
            f"{fgrad.tree.structure(tree)}") from None
    flags = fgrad.tree.leaves(spread)
    for f in flags:
        if not isinstance(f, (bool, fnp.bool_)):
            raise TypeError(f"{where}: mask leaves must be Python bools (fixed before "
                            f"tracing), got {type(f).__name__}")
    return [bool(f) for f in flags]


def _is_none(x):
    return x is None


def _select(tree, flags):
    """`tree` with the leaves whose flag is False replaced by None (an empty node)."""
    if tree is None:
        return None
    leaves, treedef = fgrad.tree.flatten(tree)
    return fgrad.tree.unflatten(treedef, [x if f else None for x, f in zip(leaves, flags)])


def masked(inner, mask):
    """Apply `inner` to the leaves where `mask` is True; pass the others through.

    The inner state covers only the selected leaves, and transformations that look
    at all leaves (e.g. clip_by_global_norm) see only those. `mask` is a tree of
    bools (or a prefix of the params' tree), e.g. `fgrad.tree.map(lambda p: p.ndim > 1,
    model)`, or a function of the params/updates returning one; a pytree is always
    taken as a tree, even a callable one such as a model.
    """
    def init(params):
        flags = _leaf_flags("masked.init", mask, params)
        return MaskedState(inner.init(_select(params, flags)))

    def update(updates, state, params=None):
        flags = _leaf_flags("masked.update", mask, updates)
        new, inner_state = inner.update(_select(updates, flags), state.inner_state,
                                        _select(params, flags))
        # Flattened with None as a leaf, `new` and `updates` line up position by
        # position, None fields of the model (a layer without bias) included.
        new_leaves = fgrad.tree.leaves(new, is_leaf=_is_none)
        old_leaves, treedef = fgrad.tree.flatten(updates, is_leaf=_is_none)
        leaf_flags = iter(flags)
        merged = [o if o is None else (n if next(leaf_flags) else o)
                  for n, o in zip(new_leaves, old_leaves)]
        return fgrad.tree.unflatten(treedef, merged), MaskedState(inner_state)

    return GradientTransformation(init, update)


def set_to_zero():
    """Replace every update by zeros: the parameters stay where they are."""
    def init(params):
        del params
        return EmptyState()

    def update(updates, state, params=None):
        del params
        return fgrad.tree.map(fnp.zeros_like, updates), state

    return GradientTransformation(init, update)


def freeze(mask):
    """Freeze the leaves where `mask` is True (their updates become zeros)."""
    return masked(set_to_zero(), mask)
