"""Where each operand of a fused group lives, as strides over the group's domain.

A group's loop walks its domain (a shape). Every operand is read with NumPy
broadcasting, or through a fused view's `IndexMap` (strides, possibly negative,
from an offset): its *domain strides* are element strides per domain
dimension, 0 on broadcast and size-1 dimensions. Dimensions of extent 1 are
dropped and adjacent ones that every operand walks as one are merged, so the
index arithmetic in a kernel divides by as few extents as possible.
"""


def c_strides(shape):
    """Element strides of a C-contiguous array of `shape`."""
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= n
    return strides[::-1]


def domain_strides(domain, shape, strides=None):
    """Strides over `domain` of an operand of `shape` (C-contiguous unless a view's
    `strides` over `shape` are given), broadcast NumPy-style."""
    rank = len(domain)
    if strides is None:
        strides = c_strides(shape)
    pad = (1,) * (rank - len(shape)) + tuple(shape)
    st = (0,) * (rank - len(shape)) + tuple(strides)
    return [0 if pad[d] == 1 else st[d] for d in range(rank)]


def collapse(dims, operand_strides):
    """(extents, per-operand strides) with size-1 dimensions dropped and adjacent
    dimensions merged where every operand walks them contiguously."""
    keep = [d for d in range(len(dims)) if dims[d] != 1]
    out_dims = [dims[d] for d in keep]
    strs = [[st[d] for d in keep] for st in operand_strides]
    j = len(out_dims) - 1
    while j > 0:
        if all(st[j - 1] == st[j] * out_dims[j] for st in strs):
            out_dims[j - 1] *= out_dims[j]
            del out_dims[j]
            for st in strs:
                del st[j - 1]          # the merged dimension keeps the inner stride
        j -= 1
    return out_dims, strs
