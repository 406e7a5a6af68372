"""Sorting: the `sort` primitive over one or several operands of one shape.

`sort_p` reorders every operand along `dimension` by the lexicographic order
of the first `num_keys` operands; the other operands are carried along, which
is how argsort (an iota operand) and sort_key_val are built. The order is
NumPy's and is always stable: NaNs sort last, -0.0 and 0.0 compare equal.

The JVP permutes each tangent like its operand (a gather by the permutation,
found by sorting an extra iota operand); gather is linear and has its own
transpose, so reverse mode needs no transpose rule for sort itself.
"""
import numpy as np

from ..batching import axis_size_of
from ..core import Primitive, ShapedArray, get_aval
from ..errors import FgradTypeError
from ._util import check_kinds, shapes_str
from .gather_scatter import gather
from .slicing import batch_at, index_dtype, iota


def _sort_abstract_eval(*operands, dimension, is_stable, num_keys):
    if not operands:
        raise FgradTypeError("sort: needs at least one operand",
                             hint="pass an array or a sequence of arrays")
    shape = operands[0].shape
    if any(x.shape != shape for x in operands):
        raise FgradTypeError(f"sort: operands must share one shape, got {shapes_str(operands)}",
                             hint="broadcast the operands to a common shape first")
    if not 0 <= dimension < len(shape):
        raise FgradTypeError(f"sort: dimension {dimension} is out of range for "
                             f"{operands[0].str_short()}",
                             hint=f"dimension must lie in [0, {len(shape)}); 0-d arrays "
                                  f"cannot be sorted (reshape to 1-d first)")
    if not 1 <= num_keys <= len(operands):
        raise FgradTypeError(f"sort: num_keys={num_keys} with {len(operands)} operand(s)",
                             hint="num_keys counts the leading operands that decide the order; "
                                  "it must lie in [1, number of operands]")
    check_kinds("sort", operands, "fiub")
    weak = all(x.weak_type for x in operands)
    return [ShapedArray(shape, x.dtype, weak) for x in operands]


def _sort_impl(*operands, dimension, is_stable, num_keys):
    keys = operands[:num_keys]
    if len(operands) == 1:
        return [np.sort(operands[0], axis=dimension, kind="stable")]
    if num_keys == 1:
        perm = np.argsort(keys[0], axis=dimension, kind="stable")
    else:  # np.lexsort's primary key is its last
        perm = np.lexsort(keys[::-1], axis=dimension)
    return [np.take_along_axis(x, perm, axis=dimension) for x in operands]


sort_p = Primitive("sort", multiple_results=True)
sort_p.impl = _sort_impl
sort_p.abstract_eval = _sort_abstract_eval


def _sort_jvp(primals, tangents, *, dimension, is_stable, num_keys):
    if all(t is None for t in tangents):
        return sort_p.bind(*primals, dimension=dimension, is_stable=is_stable,
                           num_keys=num_keys), [None] * len(primals)
    shape = tuple(primals[0].shape)
    position = iota(index_dtype(shape[dimension]), shape, dimension)
    *outs, perm = sort_p.bind(*primals, position, dimension=dimension, is_stable=is_stable,
                              num_keys=num_keys)
    index = [perm if d == dimension else iota(index_dtype(n), shape, d)
             for d, n in enumerate(shape)]
    axes = tuple(range(len(shape)))
    return outs, [None if t is None else gather(t, index, axes) for t in tangents]


def _sort_batch(vals, dims, *, dimension, is_stable, num_keys):
    size = axis_size_of(vals, dims)
    vals = [batch_at(v, d, 0, size) for v, d in zip(vals, dims)]
    outs = sort_p.bind(*vals, dimension=dimension + 1, is_stable=is_stable, num_keys=num_keys)
    return outs, [0] * len(outs)


sort_p.jvp = _sort_jvp
sort_p.batch = _sort_batch


def sort(operand, dimension=-1, is_stable=True, num_keys=1):
    """Sort along `dimension`. `operand` is an array (returns the sorted array) or a
    sequence of arrays of one shape (returns a tuple): they are ordered by the first
    `num_keys` of them, lexicographically, and the rest follow the same permutation.
    The sort is always stable (`is_stable` is accepted for JAX compatibility)."""
    single = not isinstance(operand, (tuple, list))
    operands = (operand,) if single else tuple(operand)
    if not operands:
        raise FgradTypeError("sort: needs at least one operand",
                             hint="pass an array or a sequence of arrays")
    ndim = len(get_aval(operands[0]).shape)
    d = int(dimension)
    if ndim and -ndim <= d < ndim:
        d %= ndim
    params = dict(dimension=d, is_stable=bool(is_stable), num_keys=int(num_keys))
    _sort_abstract_eval(*map(get_aval, operands), **params)  # errors before any rule runs
    outs = sort_p.bind(*operands, **params)
    return outs[0] if single else tuple(outs)


def sort_key_val(keys, values, dimension=-1, is_stable=True):
    """(keys sorted along `dimension`, values permuted the same way)."""
    return sort((keys, values), dimension, is_stable, num_keys=1)

