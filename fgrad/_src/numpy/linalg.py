"""Products and matrix helpers: matmul, dot, vdot, inner, outer, tensordot,
einsum, trace, diagonal, diag, tril, triu.

All products are one `dot_general` (contracting and batch dimensions; the
output is batch dims, then lhs free dims, then rhs free dims; batch dims of
size 1 broadcast) plus reshapes and transposes. einsum contracts its operands
pairwise, left to right, summing out every index as soon as no later operand
or the output needs it.
"""
import numpy as np

from .. import dtypes, lax
from ..lax._util import broadcast_shape
from ..core import Array, Tracer
from ..errors import FgradTypeError
from .util import asarray, canonicalize_axis, promote, shape_str


def _value(x):
    if type(x) is Array or isinstance(x, Tracer):
        return x
    return asarray(x)


def _operands(name, *xs):
    xs = promote(*xs)
    if xs[0].dtype.kind == "b":
        # Boolean products: any(a and b); compute in int32 and compare.
        return [lax.convert_element_type(x, dtypes.int32) for x in xs], True
    return xs, False


def _finish(out, was_bool):
    if was_bool:
        return lax.ne(out, Array(np.asarray(0, out.dtype), True))
    return out


# ----------------------------------------------------------------------------
# matmul and friends

def matmul(x1, x2, /):
    """NumPy's matmul: 1-D operands are promoted to matrices (and the added
    dimension removed after), batch dimensions broadcast."""
    a, b = _value(x1), _value(x2)
    if a.ndim == 0 or b.ndim == 0:
        raise FgradTypeError(f"matmul: operands must be at least 1-D, got shapes "
                             f"{shape_str(a)} and {shape_str(b)}",
                             hint="use multiply (or *) for scalars")
    (a, b), was_bool = _operands("matmul", a, b)
    a_vec, b_vec = a.ndim == 1, b.ndim == 1
    if a_vec:
        a = lax.reshape(a, (1, a.shape[0]))
    if b_vec:
        b = lax.reshape(b, (b.shape[0], 1))
    if a.shape[-1] != b.shape[-2]:
        raise FgradTypeError(
            f"matmul: contracting dimensions differ: {shape_str(_value(x1))} @ "
            f"{shape_str(_value(x2))} ({a.shape[-1]} vs {b.shape[-2]})",
            hint="the last dimension of the first operand must equal the second-to-last "
                 "dimension of the second")
    batch_a, batch_b = tuple(a.shape[:-2]), tuple(b.shape[:-2])
    try:
        broadcast_shape(batch_a, batch_b)
    except ValueError:
        raise FgradTypeError(
            f"matmul: batch dimensions {batch_a} and {batch_b} of {shape_str(_value(x1))} @ "
            f"{shape_str(_value(x2))} do not broadcast") from None
    nb = max(len(batch_a), len(batch_b))
    if len(batch_a) < nb:
        a = lax.reshape(a, (1,) * (nb - len(batch_a)) + tuple(a.shape))
    if len(batch_b) < nb:
        b = lax.reshape(b, (1,) * (nb - len(batch_b)) + tuple(b.shape))
    batch = tuple(range(nb))
    out = lax.dot_general(a, b, (((nb + 1,), (nb,)), (batch, batch)))
    if a_vec and b_vec:
        out = lax.reshape(out, tuple(out.shape[:-2]))
    elif a_vec:
        out = lax.reshape(out, tuple(out.shape[:-2]) + (out.shape[-1],))
    elif b_vec:
        out = lax.reshape(out, tuple(out.shape[:-1]))
    return _finish(out, was_bool)


def vecdot(x1, x2, /, *, axis=-1):
    from .reductions import sum as _sum
    from .ufuncs import multiply
    return _sum(multiply(x1, x2), axis=axis)


def matvec(x1, x2, /):
    x2 = _value(x2)
    return matmul(x1, lax.expand_dims(x2, (x2.ndim,)))[..., 0]


def vecmat(x1, x2, /):
    x1 = _value(x1)
    return matmul(lax.expand_dims(x1, (x1.ndim - 1,)), x2)[..., 0, :]


def tensordot(a, b, axes=2):
    """Sum of products over the last `axes` axes of a and the first of b, or over
    the axes given as a pair of sequences."""
    a, b = _value(a), _value(b)
    if isinstance(axes, (int, np.integer)):
        n = int(axes)
        if n < 0 or n > a.ndim or n > b.ndim:
            raise FgradTypeError(f"tensordot: cannot contract {n} axes of shapes "
                                 f"{shape_str(a)} and {shape_str(b)}")
        ca, cb = tuple(range(a.ndim - n, a.ndim)), tuple(range(n))
    else:
        try:
            ax_a, ax_b = axes
        except (TypeError, ValueError):
            raise TypeError("tensordot: axes must be an int or a pair of sequences") from None
        ax_a = (ax_a,) if isinstance(ax_a, (int, np.integer)) else tuple(ax_a)
        ax_b = (ax_b,) if isinstance(ax_b, (int, np.integer)) else tuple(ax_b)
        if len(ax_a) != len(ax_b):
            raise FgradTypeError(f"tensordot: axes {ax_a} and {ax_b} differ in length")
        ca = tuple(canonicalize_axis("tensordot", x, a.ndim, a.shape) for x in ax_a)
        cb = tuple(canonicalize_axis("tensordot", x, b.ndim, b.shape) for x in ax_b)
    for i, j in zip(ca, cb):
        if a.shape[i] != b.shape[j]:
            raise FgradTypeError(
                f"tensordot: shape mismatch: axis {i} of {shape_str(a)} ({a.shape[i]}) vs "
                f"axis {j} of {shape_str(b)} ({b.shape[j]})")
    (a, b), was_bool = _operands("tensordot", a, b)
    return _finish(lax.dot_general(a, b, ((ca, cb), ((), ()))), was_bool)


def dot(a, b, out=None):
    """NumPy's dot: scalars multiply, vectors give an inner product, matrices a
    matrix product, and N-D arrays sum over a's last and b's second-to-last axis."""
    a, b = _value(a), _value(b)
    if a.ndim == 0 or b.ndim == 0:
        from .ufuncs import multiply
        return multiply(a, b)
    bax = 0 if b.ndim == 1 else b.ndim - 2
    if a.shape[-1] != b.shape[bax]:
        raise FgradTypeError(f"dot: shapes {shape_str(a)} and {shape_str(b)} not aligned: "
                             f"{a.shape[-1]} (dim {a.ndim - 1}) != {b.shape[bax]} (dim {bax})")
    return tensordot(a, b, ((a.ndim - 1,), (bax,)))


def vdot(a, b, /):
    """The dot product of the flattened arrays, conjugating a complex `a` (as NumPy)."""
    a, b = _value(a), _value(b)
    if a.dtype.kind == "c":
        a = lax.conj(a)
    if a.size != b.size:
        raise FgradTypeError(f"vdot: operands of sizes {a.size} and {b.size} "
                             f"({shape_str(a)}, {shape_str(b)}) differ")
    return dot(lax.reshape(a, (a.size,)), lax.reshape(b, (b.size,)))


def inner(a, b, /):
    a, b = _value(a), _value(b)
    if a.ndim == 0 or b.ndim == 0:
        from .ufuncs import multiply
        return multiply(a, b)
    if a.shape[-1] != b.shape[-1]:
        raise FgradTypeError(f"inner: last dimensions of {shape_str(a)} and {shape_str(b)} "
                             f"differ")
    return tensordot(a, b, ((a.ndim - 1,), (b.ndim - 1,)))


def outer(a, b, out=None):
    from .ufuncs import multiply
    a, b = _value(a), _value(b)
    return multiply(lax.reshape(a, (a.size, 1)), lax.reshape(b, (1, b.size)))


def kron(a, b):
    """Kronecker product."""
    from .ufuncs import multiply
    a, b = _value(a), _value(b)
    nd = max(a.ndim, b.ndim)
    a = lax.reshape(a, (1,) * (nd - a.ndim) + tuple(a.shape))
    b = lax.reshape(b, (1,) * (nd - b.ndim) + tuple(b.shape))
    ai = [s for d in a.shape for s in (d, 1)]
    bi = [s for d in b.shape for s in (1, d)]
    prod = multiply(lax.reshape(a, ai), lax.reshape(b, bi))
    return lax.reshape(prod, tuple(p * q for p, q in zip(a.shape, b.shape)))


def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """Cross product of 3-vectors (2-vectors are extended with a zero z)."""
    from .shape import moveaxis, stack
    from .ufuncs import multiply, subtract
    a, b = _value(a), _value(b)
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = moveaxis(a, axisa, -1), moveaxis(b, axisb, -1)
    if a.shape[-1] not in (2, 3) or b.shape[-1] not in (2, 3):
        raise FgradTypeError(f"cross: incompatible dimensions for cross product (dimension "
                             f"must be 2 or 3), got {shape_str(a)} and {shape_str(b)}")
    def comp(x, i):
        if i >= x.shape[-1]:
            return None
        return x[..., i]
    a0, a1, a2 = (comp(a, i) for i in range(3))
    b0, b1, b2 = (comp(b, i) for i in range(3))
    if a2 is None and b2 is None:
        return subtract(multiply(a0, b1), multiply(a1, b0))
    zero = 0
    a2 = zero if a2 is None else a2
    b2 = zero if b2 is None else b2
    c = stack([subtract(multiply(a1, b2), multiply(a2, b1)),
               subtract(multiply(a2, b0), multiply(a0, b2)),
               subtract(multiply(a0, b1), multiply(a1, b0))], -1)
    return moveaxis(c, -1, axisc)


# ----------------------------------------------------------------------------
# einsum

_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _sublist_to_str(sub):
    out = []
    for s in sub:
        if s is Ellipsis:
            out.append("...")
        else:
            out.append(_LETTERS[int(s)])
    return "".join(out)


def _parse_einsum(args):
    if isinstance(args[0], str):
        return args[0].replace(" ", ""), list(args[1:])
    # Interleaved form: op0, sublist0, op1, sublist1, ..., [sublist_out]
    ops, subs = [], []
    rest = list(args)
    while len(rest) >= 2:
        ops.append(rest.pop(0))
        subs.append(_sublist_to_str(rest.pop(0)))
    spec = ",".join(subs)
    if rest:
        spec += "->" + _sublist_to_str(rest[0])
    return spec, ops


def einsum(*operands, out=None, optimize=None, precision=None, dtype=None,
           preferred_element_type=None):
    """Einstein summation over any number of operands: explicit ('ij,jk->ik') or
    implicit output, '...' broadcasting, repeated indices (diagonals, traces)."""
    spec, ops = _parse_einsum(operands)
    ops = [_value(o) for o in ops]
    if "->" in spec:
        ins, outspec = spec.split("->")
        explicit = True
    else:
        ins, outspec, explicit = spec, None, False
    in_specs = ins.split(",")
    if len(in_specs) != len(ops):
        raise FgradTypeError(f"einsum: {spec!r} names {len(in_specs)} operands but "
                             f"{len(ops)} were given")
    for s in in_specs + ([outspec] if explicit else []):
        bad = set(s.replace("...", "")) - set(_LETTERS)
        if bad or s.count("...") > 1:
            raise ValueError(f"einsum: invalid subscripts {s!r} in {spec!r}")
    if dtype is None and preferred_element_type is not None:
        dtype = preferred_element_type
    ops = promote(*ops) if len(ops) > 1 else ops
    if dtype is not None:
        ops = [asarray(o, dtype) for o in ops]
    was_bool = ops[0].dtype.kind == "b"
    if was_bool:
        ops = [lax.convert_element_type(o, dtypes.int32) for o in ops]

    # Expand '...' into fresh letters (right-aligned across operands).
    used = set("".join(in_specs))
    free_letters = [c for c in _LETTERS if c not in used]
    n_ell = 0
    for s, o in zip(in_specs, ops):
        if "..." in s:
            n_ell = max(n_ell, o.ndim - (len(s) - 3))
    ell = "".join(free_letters[:n_ell])
    terms = []
    for s, o in zip(in_specs, ops):
        if "..." in s:
            k = o.ndim - (len(s) - 3)
            if k < 0:
                raise FgradTypeError(f"einsum: operand of shape {shape_str(o)} has fewer "
                                     f"dimensions than subscripts {s!r}")
            s = s.replace("...", ell[n_ell - k:] if k else "")
        if len(s) != o.ndim:
            raise FgradTypeError(f"einsum: subscripts {s!r} do not match operand of shape "
                                 f"{shape_str(o)} ({o.ndim} dimensions)")
        terms.append(s)
    if explicit:
        if n_ell and "..." not in outspec:
            raise ValueError(f"einsum: output has more dimensions than subscripts given in "
                             f"{spec!r}, but no '...' to broadcast the extra dimensions")
        out_terms = outspec.replace("...", ell)
    else:
        counts = {}
        for t in terms:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        out_terms = ell + "".join(sorted(c for c, n in counts.items()
                                         if n == 1 and c not in ell))
    if len(set(out_terms)) != len(out_terms):
        raise ValueError(f"einsum: output subscript {outspec!r} repeats an index")
    all_in = set("".join(terms))
    for c in out_terms:
        if c not in all_in:
            raise ValueError(f"einsum: output subscript {c!r} does not appear in the inputs "
                             f"of {spec!r}")

    # Sizes, checked across operands (size 1 broadcasts).
    sizes = {}
    for t, o in zip(terms, ops):
        for c, n in zip(t, o.shape):
            m = sizes.get(c)
            if m is None or m == 1:
                sizes[c] = n
            elif n != m and n != 1:
                raise FgradTypeError(
                    f"einsum: index {c!r} has inconsistent sizes {m} and {n} in {spec!r} "
                    f"for operands " + ", ".join(shape_str(x) for x in ops))

    operands_ = [_einsum_prepare(o, t) for o, t in zip(ops, terms)]
    # Pairwise contraction, left to right.
    while True:
        later = [set(t) for _, t in operands_]
        keep_out = set(out_terms)
        reduced = []
        for i, (o, t) in enumerate(operands_):
            needed = keep_out.union(*(later[:i] + later[i + 1:]))
            reduced.append(_einsum_sum_unneeded(o, t, needed))
        operands_ = reduced
        if len(operands_) == 1:
            break
        (a, ta), (b, tb) = operands_[0], operands_[1]
        rest = operands_[2:]
        needed_later = set(out_terms).union(*[set(t) for _, t in rest])
        a, ta, b, tb = _einsum_broadcast_contracted(a, ta, b, tb, needed_later)
        batch = [c for c in ta if c in tb and c in needed_later]
        contract = [c for c in ta if c in tb and c not in needed_later]
        dims = (((tuple(ta.index(c) for c in contract), tuple(tb.index(c) for c in contract)),
                 (tuple(ta.index(c) for c in batch), tuple(tb.index(c) for c in batch))))
        res = lax.dot_general(a, b, dims)
        tres = "".join(batch) + "".join(c for c in ta if c not in tb) + \
            "".join(c for c in tb if c not in ta)
        operands_ = [(res, tres)] + rest
    res, t = operands_[0]
    # Broadcast size-1 output dims (from '...' broadcasting within one operand).
    if t != out_terms:
        res = lax.transpose(res, tuple(t.index(c) for c in out_terms))
    target = tuple(sizes[c] for c in out_terms)
    if tuple(res.shape) != target:
        res = lax.broadcast_in_dim(res, target, tuple(range(len(target))))
    return _finish(res, was_bool)


def _einsum_prepare(o, t):
    """Take diagonals for indices repeated within one operand."""
    while len(set(t)) != len(t):
        for i, c in enumerate(t):
            j = t.find(c, i + 1)
            if j >= 0:
                break
        # diagonal over axes i and j: result has the other axes, then the diagonal.
        o = _diagonal(o, 0, i, j)
        t = "".join(x for k, x in enumerate(t) if k not in (i, j)) + c
    return o, t


def _einsum_sum_unneeded(o, t, needed):
    axes = tuple(i for i, c in enumerate(t) if c not in needed)
    if not axes:
        return o, t
    return lax.reduce_sum(o, axes), "".join(c for c in t if c in needed)


def _einsum_broadcast_contracted(a, ta, b, tb, needed_later):
    """Contracted indices of size 1 on one side and n on the other: sum the n side."""
    for c in [c for c in ta if c in tb and c not in needed_later]:
        i, j = ta.index(c), tb.index(c)
        if a.shape[i] == 1 and b.shape[j] != 1:
            b = lax.reduce_sum(b, (j,))
            b = lax.expand_dims(b, (j,))
        elif b.shape[j] == 1 and a.shape[i] != 1:
            a = lax.reduce_sum(a, (i,))
            a = lax.expand_dims(a, (i,))
    return a, ta, b, tb


# ----------------------------------------------------------------------------
# Diagonals and triangles

def _diagonal(a, offset, axis1, axis2):
    """The diagonal over two axes: the other axes, then the diagonal (gather)."""
    n1, n2 = a.shape[axis1], a.shape[axis2]
    r0, c0 = max(-offset, 0), max(offset, 0)
    length = max(0, min(n1 - r0, n2 - c0))
    rest = tuple(s for d, s in enumerate(a.shape) if d not in (axis1, axis2))
    if length == 0:
        return Array(np.zeros(rest + (0,), a.dtype), False)
    i = np.arange(length, dtype=np.int32)
    rows, cols = Array(i + r0, False), Array(i + c0, False)
    out = lax.gather(a, (rows, cols), (axis1, axis2))       # (length,) + rest
    return lax.transpose(out, tuple(range(1, out.ndim)) + (0,))


def diagonal(a, offset=0, axis1=0, axis2=1):
    """The `offset` diagonal over axes axis1 and axis2, as the last axis of the result."""
    a = _value(a)
    if a.ndim < 2:
        raise FgradTypeError(f"diagonal: needs at least 2 dimensions, got shape "
                             f"{tuple(a.shape)}")
    i = canonicalize_axis("diagonal", axis1, a.ndim, a.shape)
    j = canonicalize_axis("diagonal", axis2, a.ndim, a.shape)
    if i == j:
        raise ValueError("diagonal: axis1 and axis2 cannot be the same")
    return _diagonal(a, int(offset), i, j)


def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    from .reductions import sum as _sum
    return _sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


def diag(v, k=0):
    """A 1-D array's diagonal matrix (on the k-th diagonal), or a 2-D array's
    k-th diagonal."""
    v = _value(v)
    k = int(k)
    if v.ndim == 2:
        return _diagonal(v, k, 0, 1)
    if v.ndim != 1:
        raise FgradTypeError(f"diag: input must be 1-D or 2-D, got shape {tuple(v.shape)}")
    n = v.shape[0]
    mask = Array(np.eye(n, dtype=bool), False)
    zero = Array(np.asarray(0, v.dtype), False)
    m = lax.select_n(mask, zero, lax.broadcast_in_dim(v, (n, n), (1,)))
    if k == 0:
        return m
    a = abs(k)
    cfg = [(0, a, 0), (a, 0, 0)] if k > 0 else [(a, 0, 0), (0, a, 0)]
    return lax.pad(m, zero, cfg)


def diagflat(v, k=0):
    v = _value(v)
    return diag(lax.reshape(v, (v.size,)), k)


def _triangle(name, m, k, lower):
    m = _value(m)
    if m.ndim < 2:
        raise FgradTypeError(f"{name}: needs at least 2 dimensions, got shape "
                             f"{tuple(m.shape)}")
    n1, n2 = m.shape[-2], m.shape[-1]
    mask = np.tri(n1, n2, int(k), dtype=bool) if lower else ~np.tri(n1, n2, int(k) - 1,
                                                                     dtype=bool)
    zero = Array(np.asarray(0, m.dtype), False)
    return lax.select_n(Array(mask, False), zero, m)


def tril(m, k=0):
    """Zero above the k-th diagonal (of the last two axes)."""
    return _triangle("tril", m, k, True)


def triu(m, k=0):
    """Zero below the k-th diagonal (of the last two axes)."""
    return _triangle("triu", m, k, False)
