"""dot_general: contractions with batch dimensions, the one matmul primitive.

dimension_numbers = ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch)).
The output holds the batch dims, then lhs's free dims, then rhs's free dims
(free: neither contracted nor batch), each in their operand's order.

Unlike JAX, a batch dim of size 1 on one side pairs with any size on the
other (NumPy broadcasting), so fgrad.numpy.matmul maps onto one dot_general
after aligning ranks. The transpose rules undo that broadcast by contracting
over it.
"""
import math

import numpy as np

from .. import dtypes
from ..ad import defbilinear, is_undefined
from ..batching import batched_axes
from ..core import Primitive, ShapedArray
from ..cpu import blas
from ..errors import FgradTypeError
from ._util import check_kinds, shapes_str
from .elementwise import convert_element_type
from .shape_ops import reshape, transpose


def _free(ndim, contracting, batch):
    return tuple(d for d in range(ndim) if d not in contracting and d not in batch)


def _batch_size(m, n):
    return n if m == 1 else m


def _dot_general_abstract_eval(lhs, rhs, *, dimension_numbers, preferred_element_type):
    (lc, rc), (lb, rb) = dimension_numbers

    def fail(problem, hint):
        raise FgradTypeError(
            f"dot_general: {problem} for {shapes_str([lhs, rhs])} with "
            f"dimension_numbers={dimension_numbers}", hint=hint)

    if lhs.dtype != rhs.dtype:
        fail("operands of different dtypes",
             "convert one operand with .astype(...) (fgrad.numpy.matmul promotes for you)")
    check_kinds("dot_general", [lhs, rhs], "fiuc")
    if len(lc) != len(rc) or len(lb) != len(rb):
        fail("lhs and rhs name different numbers of contracting or batch dims",
             "contracting and batch dims come in (lhs, rhs) pairs")
    for x, dims in ((lhs, lc + lb), (rhs, rc + rb)):
        if len(set(dims)) != len(dims) or any(not 0 <= d < x.ndim for d in dims):
            fail("repeated or out-of-range dims",
                 "each operand's contracting and batch dims must be distinct axes of it")
    if any(lhs.shape[a] != rhs.shape[b] for a, b in zip(lc, rc)):
        fail("contracting dims of different sizes", "paired contracting dims must be equal")
    if any(m != n and 1 not in (m, n) for m, n in ((lhs.shape[a], rhs.shape[b])
                                                   for a, b in zip(lb, rb))):
        fail("batch dims that do not broadcast", "paired batch dims must be equal or 1")
    shape = (tuple(_batch_size(lhs.shape[a], rhs.shape[b]) for a, b in zip(lb, rb))
             + tuple(lhs.shape[d] for d in _free(lhs.ndim, lc, lb))
             + tuple(rhs.shape[d] for d in _free(rhs.ndim, rc, rb)))
    if preferred_element_type is not None:
        return ShapedArray(shape, preferred_element_type, False)
    return ShapedArray(shape, lhs.dtype, lhs.weak_type and rhs.weak_type)


def _dot_general_impl(lhs, rhs, *, dimension_numbers, preferred_element_type):
    # One np.matmul: lhs as (batch..., M, K), rhs as (batch..., K, N).
    (lc, rc), (lb, rb) = dimension_numbers
    if lhs.dtype != rhs.dtype or len(lc) != len(rc) or len(lb) != len(rb):
        raise TypeError("dot_general: mismatched operands")  # the shape rule explains
    if preferred_element_type is not None:
        lhs = lhs.astype(preferred_element_type, copy=False)
        rhs = rhs.astype(preferred_element_type, copy=False)
    ls, rs = lhs.shape, rhs.shape
    lf, rf = _free(lhs.ndim, lc, lb), _free(rhs.ndim, rc, rb)
    lhs_batch = tuple(ls[d] for d in lb)
    rhs_batch = tuple(rs[d] for d in rb)
    lhs_free = tuple(ls[d] for d in lf)
    rhs_free = tuple(rs[d] for d in rf)
    k = math.prod(ls[d] for d in lc)
    a = lhs.transpose(lb + lf + lc).reshape(lhs_batch + (math.prod(lhs_free), k))
    b = rhs.transpose(rb + rc + rf).reshape(rhs_batch + (k, math.prod(rhs_free)))
    # An outer product (K = 1, e.g. per-example weight gradients) is faster broadcast.
    out = a * b if k == 1 else blas.matmul(a, b)        # (the native kernels' bits)
    return out.reshape(tuple(_batch_size(p, q) for p, q in zip(lhs_batch, rhs_batch))
                       + lhs_free + rhs_free)


def _operand_cotangent(ct, y, x_aval, xc, xb, yc, yb, ct_y_free):
    """Cotangent of operand x given the other operand y (a value).

    ct's axes are [batch..., x free or y free...]; `ct_y_free` are the positions
    of y's free dims in ct. Contracting those with y's free dims leaves
    [batch, x free, y's contracting dims]. A batch dim where x had size 1 but
    ct has more was broadcast, so it is contracted as well (summed away).
    """
    if ct.dtype != x_aval.dtype:
        ct = convert_element_type(ct, x_aval.dtype)
    y_free = _free(len(y.shape), yc, yb)
    summed = tuple(i for i, d in enumerate(xb) if x_aval.shape[d] == 1 and ct.shape[i] != 1)
    kept = tuple(i for i in range(len(xb)) if i not in summed)
    # contracted pairs in ct's axis order (summed batch axes lead), so a product over
    # (batch, rows) -- a weight's cotangent -- is one gemm on both operands as stored
    pairs = sorted(zip(summed + tuple(ct_y_free), tuple(yb[i] for i in summed) + y_free))
    contract = (tuple(p[0] for p in pairs), tuple(p[1] for p in pairs))
    batch = (kept, tuple(yb[i] for i in kept))
    # Which axis of x each axis of the product is (the summed batch axes come back as
    # size 1): dot(ct, y) gives [kept batch, x's free dims, x's contracting dims],
    # dot(y, ct) gives [kept batch, x's contracting dims, x's free dims]. Pick the
    # order that needs no transpose when there is one (e.g. x^T @ g for a weight).
    kept_labels = [xb[i] for i in kept]
    free_labels = list(_free(len(x_aval.shape), xc, xb))
    contracted_labels = [xc[yc.index(d)] for d in sorted(yc)]
    labels = kept_labels + free_labels + contracted_labels
    swapped = kept_labels + contracted_labels + free_labels
    if sorted(swapped) == swapped and sorted(labels) != labels:
        out = dot_general(y, ct, (contract[::-1], batch[::-1]))
        labels = swapped
    else:
        out = dot_general(ct, y, (contract, batch))
    return reshape(transpose(out, np.argsort(labels)), x_aval.shape)


def _dot_general_transpose(ct, lhs, rhs, *, dimension_numbers, preferred_element_type):
    (lc, rc), (lb, rb) = dimension_numbers
    if is_undefined(lhs) and is_undefined(rhs):
        raise TypeError("dot_general of two linear values is not linear and cannot be "
                        "transposed")
    nb = len(lb)
    if is_undefined(lhs):
        n_lhs_free = len(_free(len(lhs.aval.shape), lc, lb))
        rhs_free_pos = range(nb + n_lhs_free, len(ct.shape))
        return [_operand_cotangent(ct, rhs, lhs.aval, lc, lb, rc, rb, rhs_free_pos), None]
    n_lhs_free = len(_free(len(lhs.shape), lc, lb))
    lhs_free_pos = range(nb, nb + n_lhs_free)
    return [None, _operand_cotangent(ct, lhs, rhs.aval, rc, rb, lc, lb, lhs_free_pos)]


dot_general_p = Primitive("dot_general")
dot_general_p.impl = _dot_general_impl
dot_general_p.abstract_eval = _dot_general_abstract_eval
defbilinear(dot_general_p)
dot_general_p.transpose = _dot_general_transpose


def _dot_general_batch(vals, dims, *, dimension_numbers, preferred_element_type):
    """No operand moves. Both batched: the two batch dims become a new (first) pair of
    dot batch dims, so the output is batched at 0. One batched: its batch dim is one
    more free dim of that operand, and lands among that operand's free output dims."""
    (lhs, rhs), (ld, rd) = vals, dims
    (lc, rc), (lb, rb) = dimension_numbers
    if ld is not None:
        lc, lb = batched_axes(lc, ld), batched_axes(lb, ld)
    if rd is not None:
        rc, rb = batched_axes(rc, rd), batched_axes(rb, rd)
    if ld is not None and rd is not None:
        lb, rb = (ld,) + lb, (rd,) + rb
        out_dim = 0
    elif ld is not None:
        out_dim = len(lb) + sum(1 for d in _free(len(lhs.shape), lc, lb) if d < ld)
    else:
        out_dim = (len(lb) + len(_free(len(lhs.shape), lc, lb))
                   + sum(1 for d in _free(len(rhs.shape), rc, rb) if d < rd))
    out = dot_general_p.bind(lhs, rhs, dimension_numbers=((lc, rc), (lb, rb)),
                             preferred_element_type=preferred_element_type)
    return out, out_dim


dot_general_p.batch = _dot_general_batch


def dot_general(lhs, rhs, dimension_numbers, preferred_element_type=None):
    """General contraction; see the module docstring for dimension_numbers."""
    (lc, rc), (lb, rb) = dimension_numbers
    dims = ((tuple(int(d) for d in lc), tuple(int(d) for d in rc)),
            (tuple(int(d) for d in lb), tuple(int(d) for d in rb)))
    if preferred_element_type is not None:
        preferred_element_type = dtypes.canonicalize(preferred_element_type)
        if preferred_element_type == lhs.dtype:
            preferred_element_type = None
    return dot_general_p.bind(lhs, rhs, dimension_numbers=dims,
                              preferred_element_type=preferred_element_type)
