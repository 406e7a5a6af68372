"""The public `vmap`: pytree in_axes/out_axes, axis checks and clear errors."""
import functools

import numpy as np
import optree

from . import core, tree_util
from .batching import BatchTrace, BatchTracer, move_to_front, moveaxis
from .core import Array, Tracer, check_live, full_lower, set_current_trace
from .debug.tracebacks import api_boundary
from .errors import user_location


_ARRAYS = (Array, Tracer, np.ndarray)


def _name(f):
    return getattr(f, "__name__", type(f).__name__)


def _axis_leaf(x):
    return x is None or isinstance(x, int)


def broadcast_prefix(prefix, tree, what):
    """One axis spec per leaf of `tree`, from a pytree prefix of ints and Nones."""
    if _axis_leaf(prefix):
        return [prefix] * len(tree_util.leaves(tree))
    spec = optree.tree_structure(prefix, is_leaf=_axis_leaf, none_is_leaf=True,
                                 namespace=tree_util.NAMESPACE)
    try:
        subtrees = spec.flatten_up_to(tree)
    except ValueError as e:
        raise ValueError(f"vmap: {what} {prefix!r} is not a prefix of the structure it "
                         f"applies to ({tree_util.structure(tree)}): {e}") from None
    axes = optree.tree_leaves(prefix, is_leaf=_axis_leaf, none_is_leaf=True,
                              namespace=tree_util.NAMESPACE)
    out = []
    for axis, sub in zip(axes, subtrees):
        if not _axis_leaf(axis):
            raise TypeError(f"vmap: {what} entries must be ints or None, got {axis!r}")
        out.extend([axis] * len(tree_util.leaves(sub)))
    return out


def _arg_names(all_args):
    """'argument 0', 'argument 1['w']', 'keyword argument ['scale']' for each leaf of
    the positional arguments followed by the keyword-argument dict."""
    paths, _, _ = optree.tree_flatten_with_path(tuple(all_args), none_is_leaf=False,
                                                namespace=tree_util.NAMESPACE)
    names = []
    for path in paths:
        rest = "".join(f"[{p!r}]" for p in path[1:])
        if path[0] == len(all_args) - 1:
            names.append(f"keyword argument {rest}")
        else:
            names.append(f"argument {path[0]}{rest}")
    return names


def vmap(fun, in_axes=0, out_axes=0, axis_size=None):
    """Vectorize `fun` over a new leading axis of its arguments.

    in_axes: an int, None (not mapped), or a tuple with one entry per positional
    argument, each a pytree prefix of that argument; negative axes count from the end.
    Array keyword arguments are mapped over axis 0; other keyword values pass through.
    out_axes: the same for the outputs. axis_size: needed only when nothing is mapped.
    """
    fname = _name(fun)
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)

    if not (in_axes is None or isinstance(in_axes, (int, tuple))):
        raise TypeError(f"vmap of {fname}: in_axes must be an int, None, or a tuple with one "
                        f"entry per positional argument, got {type(in_axes).__name__}")

    @api_boundary
    @functools.wraps(fun)
    def vmapped(*args, **kwargs):
        if isinstance(in_axes, tuple) and len(in_axes) != len(args):
            raise ValueError(f"vmap of {fname}: in_axes has {len(in_axes)} entries but the "
                             f"function was called with {len(args)} positional arguments")
        # Keyword arguments are mapped over axis 0 (as in JAX); non-array values pass through.
        kw_axes = tree_util.map(lambda v: 0 if isinstance(v, _ARRAYS) else None, kwargs)
        all_args = args + (kwargs,)
        flat, in_tree = tree_util.flatten(all_args)
        axes = (broadcast_prefix(in_axes, args, "in_axes")
                + broadcast_prefix(kw_axes, kwargs, "in_axes"))
        flat = [full_lower(x) if a is not None else x for x, a in zip(flat, axes)]
        axes, size = _check_in_axes(fname, flat, axes, all_args, axis_size)
        trace = BatchTrace(core.current_trace(), size, f"vmap of {fname}")
        trace.mark_origin()
        tracers = [BatchTracer(trace, x, a) if a is not None else x for x, a in zip(flat, axes)]
        try:
            with set_current_trace(trace):
                *new_args, new_kwargs = tree_util.unflatten(in_tree, tracers)
                out = fun(*new_args, **new_kwargs)
            out_leaves, out_tree = tree_util.flatten(out)
            outs = broadcast_prefix(out_axes, out, "out_axes")
            return tree_util.unflatten(out_tree, [
                _place_output(fname, trace, o, a, size, i)
                for i, (o, a) in enumerate(zip(out_leaves, outs))])
        finally:
            trace.finish()

    return vmapped


def _check_in_axes(fname, flat, axes, args, axis_size):
    normalized, sizes = [], []
    names = None
    for i, (x, a) in enumerate(zip(flat, axes)):
        if a is None:
            normalized.append(None)
            continue
        nd = len(x.shape)
        if not -nd <= a < nd:
            names = names or _arg_names(args)
            raise ValueError(
                f"vmap of {fname}: in_axes={a} is out of range for {names[i]} of shape "
                f"{tuple(x.shape)} ({nd} dimensions)\n  at {user_location()}\n  hint: use an "
                f"axis in [-{nd}, {nd}), or None to leave the argument unmapped")
        a %= nd
        normalized.append(a)
        sizes.append((i, x.shape[a]))
    if not sizes:
        if axis_size is None:
            raise ValueError(f"vmap of {fname}: no argument is mapped (every in_axes is None), "
                             f"so the batch size is unknown; pass axis_size= or map an argument")
        return normalized, axis_size
    size = sizes[0][1] if axis_size is None else axis_size
    if any(s != size for _, s in sizes):
        names = names or _arg_names(args)
        detail = ", ".join(f"{names[i]} has size {s} along axis {normalized[i]}"
                           for i, s in sizes)
        if axis_size is not None:
            detail = f"axis_size={axis_size}, " + detail
        raise ValueError(f"vmap of {fname}: the mapped axes have different sizes: {detail}"
                         f"\n  at {user_location()}\n  hint: every mapped axis must have the "
                         f"same length")
    return normalized, size


def _place_output(fname, trace, x, axis, size, i):
    if type(x) is BatchTracer and x._trace is trace:
        val, bdim = x.val, x.bdim
    else:
        check_live(x)
        val, bdim = full_lower(x), None
    if axis is None:
        if bdim is not None:
            raise ValueError(
                f"vmap of {fname}: out_axes=None for output {i}, but that output depends on "
                f"the mapped axis (its shape per example is {tuple(x.shape)}).\n  hint: give "
                f"it an out_axes entry, or return only values that do not vary over the batch")
        return val
    nd = len(val.shape) + (bdim is None)
    if not -nd <= axis < nd:
        raise ValueError(f"vmap of {fname}: out_axes={axis} is out of range for output {i} "
                         f"with {nd} dimensions once batched")
    if bdim is None:
        return moveaxis(move_to_front(val, None, size), 0, axis % nd)
    return moveaxis(val, bdim, axis % nd)
