"""jacfwd, jacrev and hessian: vmap over jvp (one column per input coordinate) or
over vjp (one row per output coordinate).

Layout (as in JAX): the Jacobian has the structure of the output, and each
output leaf is replaced by a tree with the structure of the differentiated
arguments whose leaves have shape out_leaf.shape + in_leaf.shape.
"""
import functools
import math

import numpy as np

from . import lax, tree_util
from .api import (_as_arrays, _check_argnums, _check_float_inputs, _name, check_output_dtype,
                  jvp, vjp)
from .core import Array, get_aval
from .debug.tracebacks import api_boundary
from .vmap_api import vmap


def _split_args(fun, args, kwargs, argnums, has_aux, what, holomorphic, complex_ok):
    """The function of the differentiated leaves only, and those leaves."""
    single, nums = _check_argnums(what, argnums, len(args))
    flat, in_tree = tree_util.flatten([args[i] for i in nums])
    flat = _as_arrays(flat, what)
    _check_float_inputs(what, flat, in_tree, nums, False, holomorphic, complex_ok)

    def flat_fun(*leaves):
        new_args = list(args)
        for i, sub in zip(nums, tree_util.unflatten(in_tree, leaves)):
            new_args[i] = sub
        return fun(*new_args, **kwargs)

    def rebuild(pieces):
        """Input-structured tree from one piece per differentiated leaf."""
        trees = tree_util.unflatten(in_tree, pieces)
        return trees[0] if single else tuple(trees)

    return flat_fun, flat, rebuild


def _basis(leaves):
    """Rows of the identity, split into one (n, *leaf.shape) array per leaf."""
    sizes = [math.prod(map(int, x.shape)) for x in leaves]
    eye = np.eye(sum(sizes))
    out, start = [], 0
    for x, n in zip(leaves, sizes):
        block = eye[:, start:start + n].reshape((-1,) + tuple(x.shape))
        out.append(Array(block.astype(x.dtype), False))
        start += n
    return out, sizes


def jacfwd(fun, argnums=0, has_aux=False, holomorphic=False):
    """The Jacobian of `fun` by forward mode: vmap of jvp over the input basis.
    Inputs must be real, or complex with holomorphic=True (then the outputs are
    complex too and the Jacobian holds the complex derivatives)."""
    what = f"jacfwd of {_name(fun)}"

    @api_boundary
    @functools.wraps(fun)
    def jacfun(*args, **kwargs):
        flat_fun, flat, rebuild = _split_args(fun, args, kwargs, argnums, has_aux, what,
                                              holomorphic, complex_ok=False)
        basis, sizes = _basis(flat)

        def push(*tangents):
            out = jvp(flat_fun, tuple(flat), tuple(tangents), has_aux=has_aux)
            if holomorphic:
                for leaf in tree_util.leaves(out[0]):
                    check_output_dtype(what, get_aval(leaf), True)
            return out

        out_axes = (None, -1, None) if has_aux else (None, -1)
        result = vmap(push, out_axes=out_axes)(*basis)
        jac = tree_util.map(lambda j: rebuild(_split(j, flat, sizes, axis=-1)), result[1])
        return (jac, result[2]) if has_aux else jac

    return jacfun


def jacrev(fun, argnums=0, has_aux=False, holomorphic=False):
    """The Jacobian of `fun` by reverse mode: vmap of vjp over the output basis.
    Outputs must be real (complex inputs then get grad's convention, row by row),
    or complex with holomorphic=True (the Jacobian of complex derivatives)."""
    what = f"jacrev of {_name(fun)}"

    @api_boundary
    @functools.wraps(fun)
    def jacfun(*args, **kwargs):
        flat_fun, flat, rebuild = _split_args(fun, args, kwargs, argnums, has_aux, what,
                                              holomorphic, complex_ok=True)
        if has_aux:
            out, pullback, aux = vjp(flat_fun, *flat, has_aux=True)
        else:
            out, pullback = vjp(flat_fun, *flat)
        out_leaves, out_tree = tree_util.flatten(out)
        for leaf in out_leaves:
            if holomorphic or get_aval(leaf).dtype.kind == "c":
                check_output_dtype(what, get_aval(leaf), holomorphic)
        basis, sizes = _basis(out_leaves)
        rows = vmap(lambda *cts: pullback(tree_util.unflatten(out_tree, cts)))(*basis)
        # rows[i] has shape (sum(sizes), *flat[i].shape): split it per output leaf.
        per_input = [_split(r, out_leaves, sizes, axis=0) for r in rows]
        jac = tree_util.unflatten(out_tree, [
            rebuild([per_input[i][j] for i in range(len(flat))]) for j in range(len(out_leaves))])
        return (jac, aux) if has_aux else jac

    return jacfun


def _split(j, leaves, sizes, axis):
    """Split axis `axis` (0 or -1) of j into one block per leaf, shaped like the leaf."""
    out, start = [], 0
    for leaf, n in zip(leaves, sizes):
        ax = axis % len(j.shape)
        block = j if n == j.shape[ax] else lax.slice_in_dim(j, start, start + n, 1, ax)
        shape = tuple(block.shape)
        if axis == 0:
            out.append(lax.reshape(block, tuple(leaf.shape) + shape[1:]))
        else:
            out.append(lax.reshape(block, shape[:-1] + tuple(leaf.shape)))
        start += n
    return out


def hessian(fun, argnums=0, has_aux=False, holomorphic=False):
    """The Hessian: jacfwd of jacrev."""
    return jacfwd(jacrev(fun, argnums, has_aux, holomorphic), argnums, has_aux, holomorphic)
