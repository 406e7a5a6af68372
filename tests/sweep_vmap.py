"""Sweep: vmap(f)(xs) against stacking f over the examples, for many public functions.

Run as a script (`python tests/sweep_vmap.py [name-substring]`); prints every
case whose batched answer differs (bits, dtype or shape) from the loop, or that
raises where the loop does not. Each case is checked with in_axes 0 and with
the batch on the last axis, under jit(vmap), and under a nested vmap.
"""
import os

import numpy as np

import fgrad
import fgrad.numpy as fnp
import fgrad.scipy.special as fsp
import fgrad.scipy.linalg as fsl
import fgrad.scipy.signal as fss
from fgrad import lax
from sweep_util import equal_bits, run_cases

B = 3
rng = np.random.default_rng(0)


def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return f"shape/dtype {a.shape} {a.dtype} vs {b.shape} {b.dtype}"
    if not equal_bits(a, b).all():
        return "values differ" + (f": max abs {np.nanmax(np.abs(a - b))}"
                                  if a.dtype.kind in "fc" and a.size else "")
    return None


def close(a, b, rtol):
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return f"shape/dtype {a.shape} {a.dtype} vs {b.shape} {b.dtype}"
    if a.dtype.kind in "fc":
        return None if np.allclose(a, b, rtol=rtol, atol=rtol, equal_nan=True) else \
            f"not close: max abs {np.nanmax(np.abs(a - b))}"
    return None if np.array_equal(a, b) else "values differ"


def cmp_tree(a, b, rtol=0):
    la, lb = fgrad.tree.leaves(a), fgrad.tree.leaves(b)
    if len(la) != len(lb):
        return f"{len(la)} leaves vs {len(lb)}"
    for x, y in zip(la, lb):
        r = same(x, y) if rtol == 0 else close(x, y, rtol)
        if r:
            return r
    return None


def stack_loop(f, args, batched):
    outs = []
    for i in range(B):
        outs.append(f(*[fnp.asarray(a[i] if b else a) for a, b in zip(args, batched)]))
    return fgrad.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *outs)


CASES = []


def case(name, f, *args, batched=None, rtol=0):
    """args are per-example arrays; batched marks which get a batch axis."""
    batched = batched or [True] * len(args)
    CASES.append((name, f, args, batched, rtol))


FLOAT = os.environ.get("SWEEP_FLOAT", "float64")   # float32 / float16 rerun the cases


def r(*shape, dt=None):
    return rng.standard_normal(shape).astype(dt or FLOAT)


def ties(*shape):
    return rng.integers(-2, 3, shape).astype(FLOAT)


# --- reductions
for nm in ["sum", "prod", "mean", "var", "std", "max", "min", "argmax", "argmin",
           "any", "all", "median", "ptp", "nansum", "nanmean", "nanmax", "nanmin",
           "nanargmax", "nanargmin", "nanvar", "nanstd", "nanmedian", "count_nonzero",
           "nanprod", "cumsum", "cumprod", "nancumsum", "sort", "argsort", "diff"]:
    for ax in [None, 0, 1, -1]:
        if nm in ("cumsum", "cumprod", "nancumsum", "sort", "argsort", "diff") and ax is None:
            continue
        fn = getattr(fnp, nm)
        case(f"{nm}(axis={ax})", lambda x, fn=fn, ax=ax: fn(x, axis=ax), ties(3, 4))
        if nm not in ("cumsum", "cumprod", "nancumsum", "sort", "argsort", "diff",
                      "argmax", "argmin", "nanargmax", "nanargmin"):
            case(f"{nm}(axis={ax},keepdims)", lambda x, fn=fn, ax=ax: fn(x, axis=ax, keepdims=True),
                 ties(3, 4))
xn = ties(3, 4); xn[0, 1] = np.nan; xn[2, 3] = np.nan
for nm in ["nansum", "nanmean", "nanmax", "nanmin", "nanvar", "nanmedian", "max", "sort",
           "argsort", "median", "argmax", "nanargmax", "cumsum", "nancumsum"]:
    case(f"{nm}(nan,axis=1)", lambda x, fn=getattr(fnp, nm): fn(x, axis=1), xn)
for q in [0.3, 0.5, [0.1, 0.9]]:
    for ax in [None, 0, 1]:
        for meth in ["linear", "lower", "higher", "nearest", "midpoint"]:
            case(f"quantile({q},{ax},{meth})",
                 lambda x, q=q, ax=ax, m=meth: fnp.quantile(x, np.asarray(q), axis=ax, method=m),
                 ties(3, 4))
case("percentile batched q", lambda x, q: fnp.percentile(x, q, axis=1), r(3, 4), np.float64(30.0))
case("average weights", lambda x, w: fnp.average(x, axis=1, weights=w), r(3, 4), np.abs(r(4)) + 0.1)
case("average weights returned", lambda x, w: fnp.average(x, axis=0, weights=w, returned=True),
     r(3, 4), np.abs(r(3)) + 0.1)
case("logsumexp", lambda x: fsp.logsumexp(x, axis=1), r(3, 4))
case("logsumexp b", lambda x, b: fsp.logsumexp(x, axis=1, b=b), r(3, 4), r(3, 4))
case("logsumexp -inf", lambda x: fsp.logsumexp(x, axis=1), np.full((3, 4), -np.inf))
case("softmax", lambda x: fgrad.nn.softmax(x, axis=0), r(3, 4))
case("log_softmax", lambda x: fgrad.nn.log_softmax(x, axis=-1), r(3, 4))
case("cov", lambda x: fnp.cov(x), r(3, 5))
case("corrcoef", lambda x: fnp.corrcoef(x), r(3, 5))
case("average none", lambda x: fnp.average(x), r(3, 4))

# --- indexing
idx = rng.integers(0, 4, (5,))
case("take axis1", lambda x, i: fnp.take(x, i, axis=1), r(3, 4), idx)
case("take flat", lambda x, i: fnp.take(x, i), r(3, 4), idx)
case("take unbatched idx", lambda x, i: fnp.take(x, i, axis=1), r(3, 4), idx, batched=[True, False])
case("take batched idx only", lambda x, i: fnp.take(x, i, axis=1), r(3, 4), idx, batched=[False, True])
case("take clip", lambda x, i: fnp.take(x, i, axis=1, mode="clip"), r(3, 4), np.array([-3, 0, 7]))
case("take wrap", lambda x, i: fnp.take(x, i, axis=1, mode="wrap"), r(3, 4), np.array([-3, 0, 7]))
case("take fill", lambda x, i: fnp.take(x, i, axis=1, mode="fill"), r(3, 4), np.array([-3, 0, 3]))
case("take_along_axis", lambda x, i: fnp.take_along_axis(x, i, axis=1), r(3, 4),
     rng.integers(0, 4, (3, 2)))
case("take_along_axis neg", lambda x, i: fnp.take_along_axis(x, i, axis=0), r(3, 4),
     rng.integers(-3, 3, (2, 4)))
case("getitem int array", lambda x, i: x[i], r(4, 3), idx)
case("getitem neg int", lambda x, i: x[i], r(4, 3), np.array([-1, -4, 2]))
case("getitem 2 arrays", lambda x, i, j: x[i, j], r(4, 3), idx, rng.integers(0, 3, (5,)))
case("getitem slice+array", lambda x, i: x[:, i], r(4, 3), np.array([2, 0, -1]))
case("getitem scalar idx", lambda x, i: x[i], r(4, 3), np.int64(2))
case("getitem neg scalar idx", lambda x, i: x[i], r(4, 3), np.int64(-1))
case("getitem array,None,slice", lambda x, i: x[i, None, 1:], r(4, 3), np.array([0, -1]))
case("getitem slice,array,array split", lambda x, i: x[i, :, i], r(3, 2, 3), np.array([0, -1]))
case("getitem ellipsis", lambda x, i: x[..., i], r(4, 3), np.array([0, -1]))
case("getitem bool const", lambda x: x[np.array([True, False, True, True])], r(4, 3))
case("at set", lambda x, i, v: x.at[i].set(v), r(4, 3), np.array([1, 1, -1]), r(3, 3))
case("at add dup", lambda x, i, v: x.at[i].add(v), r(4, 3), np.array([1, 1, -1]), r(3, 3))
case("at mul", lambda x, i, v: x.at[i].multiply(v), r(4, 3), np.array([1, 1, -1]), r(3, 3))
case("at min", lambda x, i, v: x.at[i].min(v), r(4, 3), np.array([1, 1, -1]), r(3, 3))
case("at max", lambda x, i, v: x.at[i].max(v), r(4, 3), np.array([1, 1, -1]), r(3, 3))
case("at get", lambda x, i: x.at[i].get(mode="fill", fill_value=-7.0), r(4, 3), np.array([1, 9, -1]))
case("at get clip", lambda x, i: x.at[i].get(mode="clip"), r(4, 3), np.array([1, 9, -7]))
case("at set clip", lambda x, i, v: x.at[i].set(v, mode="clip"), r(4, 3), np.array([1, 9, -7]), r(3, 3))
case("at add drop", lambda x, i, v: x.at[i].add(v, mode="drop"), r(4, 3), np.array([1, 9, -7]), r(3, 3))
case("take fill oob", lambda x, i: fnp.take(x, i, axis=0, mode="fill"), r(4, 3), np.array([1, 9, -7]))
case("at set scalar v", lambda x, i, v: x.at[i].set(v), r(4, 3), np.array([1, 2]), np.float64(3.0))
case("at set only v batched", lambda x, i, v: x.at[i].set(v), r(4, 3), np.array([1, 2]), r(2, 3),
     batched=[False, False, True])
case("at add only idx batched", lambda x, i, v: x.at[i].add(v), r(4, 3), np.array([1, 1]), r(2, 3),
     batched=[False, True, False])
case("at set [:, i]", lambda x, i, v: x.at[:, i].set(v), r(4, 3), np.array([0, 2]), r(4, 2))
case("at set 2d", lambda x, i, j, v: x.at[i, j].set(v), r(4, 3), np.array([0, 2]), np.array([1, -1]), r(2))
case("put_along_axis", lambda x, i, v: fnp.put_along_axis(x, i, v, axis=1, inplace=False),
     r(3, 4), rng.integers(0, 4, (3, 1)), r(3, 1))
case("where 3", lambda c, x, y: fnp.where(c, x, y), rng.random((3, 4)) < 0.5, r(3, 4), r(4))
case("where 3 c only", lambda c, x, y: fnp.where(c, x, y), rng.random((3, 4)) < 0.5, r(3, 4), r(4),
     batched=[True, False, False])
case("where nan", lambda c, x: fnp.where(c, x, np.nan), rng.random((3, 4)) < 0.5, r(3, 4))
case("select", lambda a, b, x: fnp.select([a, b], [x, -x], 7.0), rng.random(4) < 0.5,
     rng.random(4) < 0.5, r(4))
case("choose", lambda i, x, y: fnp.choose(i, [x, y]), rng.integers(0, 2, (4,)), r(4), r(4))
case("clip", lambda x, lo, hi: fnp.clip(x, lo, hi), r(4), np.float64(-0.5), np.float64(0.5))
case("clip lo>hi", lambda x, lo, hi: fnp.clip(x, lo, hi), r(4), np.float64(0.5), np.float64(-0.5))
case("searchsorted", lambda a, v: fnp.searchsorted(a, v), np.sort(r(6)), r(4))
case("searchsorted right", lambda a, v: fnp.searchsorted(a, v, side="right"), np.sort(ties(6)), ties(4))
case("searchsorted sorter", lambda a, v, s: fnp.searchsorted(a, v, sorter=s), r(6), r(4),
     np.argsort(r(6)), batched=[True, True, False])
case("digitize", lambda x, b: fnp.digitize(x, b), r(5), np.sort(r(4)))
case("digitize right", lambda x, b: fnp.digitize(x, b, right=True), ties(5), np.sort(ties(4)))
case("interp", lambda x, xp, fp: fnp.interp(x, xp, fp), r(5), np.sort(r(4)), r(4))
case("interp lr", lambda x, xp, fp: fnp.interp(x, xp, fp, left=-9.0, right=9.0), 3 * r(5),
     np.sort(r(4)), r(4))
case("bincount", lambda i: fnp.bincount(i, length=6), rng.integers(0, 6, (7,)))
case("bincount w", lambda i, w: fnp.bincount(i, w, length=6), rng.integers(0, 6, (7,)), r(7))
case("nonzero size", lambda x: fnp.nonzero(x, size=5, fill_value=-1), rng.integers(0, 2, (3, 4)))
case("argwhere size", lambda x: fnp.argwhere(x, size=4), rng.integers(0, 2, (3, 4)))
case("flatnonzero size", lambda x: fnp.flatnonzero(x, size=4), rng.integers(0, 2, (6,)))
case("unique size", lambda x: fnp.unique(x, size=5, fill_value=0.0), ties(6))
case("unique_counts size", lambda x: fnp.unique(x, size=5, return_counts=True), ties(6))
case("unique_inverse size", lambda x: fnp.unique(x, size=5, return_inverse=True,
                                                 return_index=True), ties(6))
case("isin", lambda x, y: fnp.isin(x, y), ties(5), ties(3))
case("partition", lambda x: fnp.partition(x, 2, axis=-1), ties(3, 5))
case("argpartition", lambda x: fnp.argpartition(x, 2, axis=0), ties(5, 3))
case("lexsort", lambda a, b: fnp.lexsort((a, b)), ties(6), ties(6))
case("sort desc", lambda x: fnp.sort(x, descending=True, stable=True), ties(6))
case("argsort desc", lambda x: fnp.argsort(x, descending=True, stable=True), ties(6))
case("sort_key_val", lambda k, v: lax.sort_key_val(k, v), ties(6), r(6))
case("top_k-like sort", lambda x: lax.sort(x, dimension=0), ties(4, 3))
case("lax.sort multi", lambda a, b: lax.sort((a, b), num_keys=2), ties(6), ties(6))
case("cummax", lambda x: lax.cummax(x, axis=1), ties(3, 4))
case("cummin rev", lambda x: lax.cummin(x, axis=0, reverse=True), ties(3, 4))
case("cumsum rev", lambda x: lax.cumsum(x, axis=1, reverse=True), r(3, 4))
case("cumlogsumexp", lambda x: getattr(lax, "cumlogsumexp", lax.cumsum)(x, axis=1), r(3, 4))
case("dynamic_slice", lambda x, i: lax.dynamic_slice(x, (i, 1), (2, 2)), r(4, 4), np.int32(1))
case("dynamic_slice clamp", lambda x, i: lax.dynamic_slice(x, (i, -5), (2, 2)), r(4, 4), np.int32(3))
case("dynamic_slice neg", lambda x, i: lax.dynamic_slice(x, (i, 0), (2, 2)), r(4, 4), np.int32(-1))
case("dynamic_slice idx only", lambda x, i: lax.dynamic_slice(x, (i, 0), (2, 2)), r(4, 4),
     np.int32(7), batched=[False, True])
case("dynamic_update_slice", lambda x, u, i: lax.dynamic_update_slice(x, u, (i, 1)), r(4, 4),
     r(2, 2), np.int32(3))
case("dynamic_update_slice neg", lambda x, u, i: lax.dynamic_update_slice(x, u, (i, 1)), r(4, 4),
     r(2, 2), np.int32(-1))
case("dynamic_update_slice u only", lambda x, u, i: lax.dynamic_update_slice(x, u, (i, 1)),
     r(4, 4), r(2, 2), np.int32(1), batched=[False, True, False])
case("dynamic_index_in_dim", lambda x, i: lax.dynamic_index_in_dim(x, i, axis=1, keepdims=False),
     r(4, 4), np.int32(-2))
case("dynamic_update_index", lambda x, u, i: lax.dynamic_update_index_in_dim(x, u, i, axis=0),
     r(4, 3), r(3), np.int32(2))
case("python dyn index", lambda x, i: x[i:i + 2] if False else lax.dynamic_slice_in_dim(x, i, 2),
     r(5), np.int32(4))

# --- shapes
case("concatenate", lambda x, y: fnp.concatenate([x, y], axis=1), r(3, 2), r(3, 4))
case("concatenate ax0 unbatched y", lambda x, y: fnp.concatenate([x, y], axis=0), r(3, 2), r(1, 2),
     batched=[True, False])
case("stack -1", lambda x, y: fnp.stack([x, y], axis=-1), r(3, 2), r(3, 2))
case("hstack", lambda x, y: fnp.hstack([x, y]), r(3), r(2))
case("vstack 1d", lambda x, y: fnp.vstack([x, y]), r(3), r(3))
case("column_stack", lambda x, y: fnp.column_stack([x, y]), r(3), r(3, 2))
case("dstack", lambda x, y: fnp.dstack([x, y]), r(3), r(3))
case("block", lambda a, b: fnp.block([[a, b], [b, a]]), r(2, 2), r(2, 2))
case("split", lambda x: fnp.split(x, [1, 3], axis=1), r(2, 5))
case("array_split", lambda x: fnp.array_split(x, 3, axis=0), r(5, 2))
case("unstack", lambda x: fnp.unstack(x, axis=1), r(2, 3))
case("tile", lambda x: fnp.tile(x, (2, 1, 2)), r(2, 3))
case("repeat", lambda x: fnp.repeat(x, 2, axis=0), r(2, 3))
case("repeat arr", lambda x: fnp.repeat(x, np.array([1, 0, 2]), axis=1, total_repeat_length=3),
     r(2, 3))
case("repeat none", lambda x: fnp.repeat(x, 2), r(2, 3))
case("reshape -1", lambda x: fnp.reshape(x, (-1, 2)), r(2, 3, 2))
case("reshape F", lambda x: fnp.reshape(x, (3, 4), order="F"), r(2, 6))
case("ravel F", lambda x: fnp.ravel(x, order="F"), r(2, 3))
case("transpose", lambda x: fnp.transpose(x, (2, 0, 1)), r(2, 3, 4))
case("T", lambda x: x.T, r(2, 3, 4))
case("mT", lambda x: x.mT, r(2, 3, 4))
case("swapaxes", lambda x: fnp.swapaxes(x, 0, -1), r(2, 3, 4))
case("moveaxis", lambda x: fnp.moveaxis(x, [0, 1], [-1, 0]), r(2, 3, 4))
case("rollaxis", lambda x: fnp.rollaxis(x, 2, 0), r(2, 3, 4))
case("squeeze", lambda x: fnp.squeeze(x), r(1, 3, 1))
case("squeeze ax", lambda x: fnp.squeeze(x, axis=-1), r(1, 3, 1))
case("expand_dims", lambda x: fnp.expand_dims(x, (0, -1)), r(3))
case("broadcast_to", lambda x: fnp.broadcast_to(x, (2, 3, 4)), r(3, 1))
case("broadcast_arrays", lambda x, y: fnp.broadcast_arrays(x, y), r(3, 1), r(4))
case("atleast_2d", lambda x: fnp.atleast_2d(x), r(3))
case("atleast_3d", lambda x: fnp.atleast_3d(x), r(3))
case("atleast_1d scalar", lambda x: fnp.atleast_1d(x), np.float64(2.0))
case("roll", lambda x: fnp.roll(x, 2, axis=1), r(3, 4))
case("roll none", lambda x: fnp.roll(x, -1), r(3, 4))
case("roll multi", lambda x: fnp.roll(x, (1, 2), axis=(0, 1)), r(3, 4))
case("roll batched shift", lambda x, s: fnp.roll(x, s, axis=0), r(4), np.int32(3))
case("flip", lambda x: fnp.flip(x), r(3, 4))
case("flip ax", lambda x: fnp.flip(x, -1), r(3, 4))
case("rot90", lambda x: fnp.rot90(x, 3), r(3, 4))
case("rot90 axes", lambda x: fnp.rot90(x, 1, axes=(1, 2)), r(2, 3, 4))
case("fliplr", lambda x: fnp.fliplr(x), r(3, 4))
for mode in ["constant", "edge", "reflect", "symmetric", "wrap"]:
    case(f"pad {mode}", lambda x, m=mode: fnp.pad(x, ((1, 2), (2, 0)), mode=m), r(3, 4))
case("pad constant val", lambda x: fnp.pad(x, 2, constant_values=(1.5, -2.0)), r(3))
case("pad batched val", lambda x, v: fnp.pad(x, 1, constant_values=v), r(3), np.float64(4.0))
case("lax.pad interior", lambda x: lax.pad(x, 0.0, [(1, 2, 1), (1, 0, 0)]), r(3, 4))
case("diagonal", lambda x: fnp.diagonal(x, 1), r(3, 4))
case("diagonal neg", lambda x: fnp.diagonal(x, -1, axis1=1, axis2=0), r(3, 4))
case("diagonal 3d", lambda x: fnp.diagonal(x, 0, 0, 2), r(3, 2, 4))
case("trace", lambda x: fnp.trace(x, 1), r(3, 4))
case("diag 1d", lambda x: fnp.diag(x, -1), r(3))
case("diag 2d", lambda x: fnp.diag(x, 1), r(3, 4))
case("diagflat", lambda x: fnp.diagflat(x), r(2, 2))
case("tril", lambda x: fnp.tril(x, -1), r(3, 4))
case("triu", lambda x: fnp.triu(x, 1), r(2, 3, 4))
case("fill_diagonal", lambda x: fnp.fill_diagonal(x, 5.0, inplace=False), r(3, 3))
case("delete", lambda x: fnp.delete(x, [0, 2], axis=1), r(3, 4))
case("insert", lambda x: fnp.insert(x, 1, 9.0, axis=1), r(3, 4))
case("insert batched val", lambda x, v: fnp.insert(x, 1, v, axis=0), r(3), np.float64(3.0))
case("append", lambda x, y: fnp.append(x, y, axis=0), r(3, 2), r(1, 2))
case("append flat", lambda x, y: fnp.append(x, y), r(3, 2), r(2))
case("resize", lambda x: fnp.resize(x, (3, 3)), r(4))
case("trim_zeros-like", lambda x: fnp.ediff1d(x, to_begin=1.0), r(4))
case("vander", lambda x: fnp.vander(x, 3), r(4))
case("meshgrid", lambda x, y: fnp.meshgrid(x, y), r(3), r(2))
case("meshgrid ij", lambda x, y: fnp.meshgrid(x, y, indexing="ij"), r(3), r(2))
case("gradient", lambda x: fnp.gradient(x), r(5))
case("gradient 2d", lambda x: fnp.gradient(x, axis=1), r(3, 5))
case("gradient spacing", lambda x: fnp.gradient(x, 0.5, edge_order=2), r(5))
case("trapezoid", lambda y, x: fnp.trapezoid(y, x), r(5), np.sort(r(5)))
case("trapezoid ax", lambda y: fnp.trapezoid(y, dx=0.5, axis=0), r(5, 2))
case("unwrap", lambda x: fnp.unwrap(x * 4), r(6))
case("cross", lambda a, b: fnp.cross(a, b), r(2, 3), r(2, 3))
case("cross ax", lambda a, b: fnp.cross(a, b, axisa=0, axisb=0), r(3, 2), r(3, 2))
case("cross 2d", lambda a, b: fnp.cross(a, b), r(4, 2), r(4, 2))

# --- products
case("matmul", lambda a, b: a @ b, r(2, 3), r(3, 4))
case("matmul vec", lambda a, b: a @ b, r(3), r(3, 4))
case("matmul mat vec", lambda a, b: fnp.matmul(a, b), r(2, 3), r(3))
case("matmul b-only", lambda a, b: a @ b, r(2, 3), r(3, 4), batched=[False, True])
case("matmul bcast", lambda a, b: a @ b, r(2, 2, 3), r(3, 4))
case("dot", lambda a, b: fnp.dot(a, b), r(2, 3), r(3))
case("dot nd", lambda a, b: fnp.dot(a, b), r(2, 3), r(2, 3, 4))
case("vdot", lambda a, b: fnp.vdot(a, b), r(2, 3), r(2, 3))
case("inner", lambda a, b: fnp.inner(a, b), r(2, 3), r(4, 3))
case("outer", lambda a, b: fnp.outer(a, b), r(2, 3), r(4))
case("kron", lambda a, b: fnp.kron(a, b), r(2, 2), r(2, 3))
case("tensordot", lambda a, b: fnp.tensordot(a, b, axes=([0, 2], [1, 0])), r(2, 3, 4), r(4, 2, 5), rtol=1e-14)
case("tensordot int", lambda a, b: fnp.tensordot(a, b, 1), r(2, 3), r(3, 2))
case("einsum", lambda a, b: fnp.einsum("ij,jk->ki", a, b), r(2, 3), r(3, 4))
case("einsum trace", lambda a: fnp.einsum("ii->", a), r(3, 3))
case("einsum diag", lambda a: fnp.einsum("ii->i", a), r(3, 3))
case("einsum ellipsis", lambda a, b: fnp.einsum("...ij,...jk", a, b), r(2, 2, 3), r(3, 1))
case("einsum repeated", lambda a, b: fnp.einsum("iij,j->i", a, b), r(3, 3, 2), r(2))
case("einsum 3", lambda a, b, c: fnp.einsum("i,j,k->jk", a, b, c), r(2), r(3), r(2))
case("vecdot", lambda a, b: fnp.vecdot(a, b, axis=0), r(3, 2), r(3, 2))
case("matvec", lambda a, b: fnp.matvec(a, b), r(2, 3), r(3))
case("vecmat", lambda a, b: fnp.vecmat(a, b), r(2), r(2, 3))
case("int matmul", lambda a, b: a @ b, rng.integers(-3, 3, (2, 3)), rng.integers(-3, 3, (3, 2)))
case("f32 matmul", lambda a, b: a @ b, r(2, 3, dt="float32"), r(3, 2, dt="float32"))
case("convolve", lambda a, b: fnp.convolve(a, b), r(6), r(3))
case("convolve same", lambda a, b: fnp.convolve(a, b, mode="same"), r(6), r(4))
case("convolve valid swap", lambda a, b: fnp.convolve(a, b, mode="valid"), r(3), r(6))
case("correlate full", lambda a, b: fnp.correlate(a, b, mode="full"), r(6), r(3))
case("signal convolve2d", lambda a, b: fss.convolve2d(a, b), r(4, 4), r(2, 3))
case("signal correlate2d same", lambda a, b: fss.correlate2d(a, b, mode="same"), r(4, 4), r(2, 3))
case("signal convolve", lambda a, b: fss.convolve(a, b, mode="same"), r(4, 5), r(2, 3))
case("polyval", lambda p, x: fnp.polyval(p, x), r(3), r(4))
case("polymul", lambda a, b: fnp.polymul(a, b), r(3), r(2))
case("polyder", lambda a: fnp.polyder(a, 2), r(4))
case("polyint", lambda a: fnp.polyint(a), r(4))
case("polyfit", lambda x, y: fnp.polyfit(x, y, 2), np.linspace(0, 1, 6), r(6), rtol=1e-12)
case("conv_general_dilated",
     lambda x, w: lax.conv_general_dilated(x, w, (1, 2), "SAME", rhs_dilation=(1, 2)),
     r(1, 2, 5, 6), r(3, 2, 2, 2))
case("conv_general_dilated w only",
     lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "VALID", feature_group_count=2),
     r(2, 4, 5, 6), r(4, 2, 2, 2), batched=[False, True])
case("conv lhs_dil", lambda x, w: lax.conv_general_dilated(x, w, (1,), [(1, 1)], lhs_dilation=(2,)),
     r(1, 1, 5), r(2, 1, 3))
case("conv_transpose", lambda x, w: lax.conv_transpose(x, w, (2, 2), "SAME",
                                                        dimension_numbers=("NHWC", "HWIO", "NHWC")),
     r(1, 4, 4, 2), r(3, 3, 2, 3))

# --- linalg
def spd(n):
    a = r(n, n)
    return a @ a.T + n * np.eye(n)


for nm, arg in [("inv", r(3, 3)), ("det", r(3, 3)), ("slogdet", r(3, 3)), ("cholesky", spd(3)),
                ("qr", r(4, 3)), ("svd", r(4, 3)), ("svdvals", r(4, 3)), ("eigh", spd(3)),
                ("eigvalsh", spd(3)), ("pinv", r(4, 3)), ("matrix_rank", r(4, 3)),
                ("eig", r(3, 3)), ("eigvals", r(3, 3)), ("norm", r(3, 3)), ("cond", r(3, 3)),
                ("matrix_norm", r(3, 3)), ("vector_norm", r(3, 3))]:
    fn = getattr(fnp.linalg, nm, None)
    if fn is not None:
        case(f"linalg.{nm}", fn, arg)
case("det singular", fnp.linalg.det, np.ones((3, 3)))
case("det 2x2 zero", fnp.linalg.det, np.zeros((2, 2)))
case("slogdet singular", fnp.linalg.slogdet, np.ones((3, 3)))
case("inv batched stack", fnp.linalg.inv, r(2, 3, 3))
for o in [None, 1, 2, -1, -2, np.inf, -np.inf, "fro", "nuc"]:
    case(f"norm mat ord={o}", lambda x, o=o: fnp.linalg.norm(x, ord=o), r(3, 4))
for o in [None, 0, 1, 2, 3, -1, np.inf, -np.inf, 0.5]:
    case(f"norm vec ord={o}", lambda x, o=o: fnp.linalg.norm(x, ord=o), r(4))
    case(f"norm vec ord={o} axis", lambda x, o=o: fnp.linalg.norm(x, ord=o, axis=0, keepdims=True),
         r(4, 2))
case("norm zero", lambda x: fnp.linalg.norm(x), np.zeros(3))
case("solve", fnp.linalg.solve, r(3, 3), r(3))
case("solve mat", fnp.linalg.solve, r(3, 3), r(3, 2))
case("solve b only", fnp.linalg.solve, r(3, 3), r(3), batched=[False, True])
case("solve a only", fnp.linalg.solve, r(3, 3), r(3, 2), batched=[True, False])
case("lstsq", lambda a, b: fnp.linalg.lstsq(a, b)[0], r(4, 3), r(4), rtol=1e-12)
case("matrix_power", lambda a: fnp.linalg.matrix_power(a, 3), r(3, 3))
case("matrix_power neg", lambda a: fnp.linalg.matrix_power(a, -2), r(3, 3))
case("multi_dot", lambda a, b, c: fnp.linalg.multi_dot([a, b, c]), r(2, 3), r(3, 4), r(4))
case("tensorsolve", lambda a, b: fnp.linalg.tensorsolve(a, b), r(2, 3, 6), r(2, 3))
case("tensorinv", lambda a: fnp.linalg.tensorinv(a, ind=1), r(4, 2, 2))
case("solve_triangular", lambda a, b: fsl.solve_triangular(a, b, lower=True), np.tril(r(3, 3)) + 3 * np.eye(3), r(3))
case("solve_triangular trans", lambda a, b: fsl.solve_triangular(a, b, trans=1), np.triu(r(3, 3)) + 3 * np.eye(3), r(3, 2))
case("cho_solve", lambda c, b: fsl.cho_solve((c, True), b), np.linalg.cholesky(spd(3)), r(3))
case("lu", lambda a: fsl.lu(a), r(3, 3))
case("lu_factor", lambda a: fsl.lu_factor(a), r(3, 3))
case("lu_solve", lambda a, b: fsl.lu_solve(fsl.lu_factor(a), b), r(3, 3), r(3))
case("expm", lambda a: fsl.expm(a), r(3, 3))
case("sqrtm-like eigh", lambda a: fsl.eigh(a, eigvals_only=True), spd(3))
case("block_diag", lambda a, b: fsl.block_diag(a, b), r(2, 2), r(1, 3))
case("scipy det", fsl.det, r(3, 3))
case("cholesky upper", lambda a: fsl.cholesky(a), spd(3))
case("qr r", lambda a: fnp.linalg.qr(a, mode="r"), r(4, 3))
case("qr complete", lambda a: fnp.linalg.qr(a, mode="complete"), r(4, 3))
case("svd nofull", lambda a: fnp.linalg.svd(a, full_matrices=False), r(4, 3))

# --- fft
for nm in ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"]:
    case(f"fft.{nm}", lambda x, fn=getattr(fnp.fft, nm): fn(x), r(3, 6))
    case(f"fft.{nm} n ax0", lambda x, fn=getattr(fnp.fft, nm): fn(x, n=4, axis=0), r(3, 6))
    case(f"fft.{nm} ortho", lambda x, fn=getattr(fnp.fft, nm): fn(x, norm="ortho"), r(3, 6))
for nm in ["fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn", "rfftn", "irfftn"]:
    case(f"fft.{nm}", lambda x, fn=getattr(fnp.fft, nm): fn(x), r(3, 4))
    case(f"fft.{nm} s", lambda x, fn=getattr(fnp.fft, nm): fn(x, s=(2, 6)), r(3, 4))
case("fftshift", lambda x: fnp.fft.fftshift(x), r(5))
case("ifftshift ax", lambda x: fnp.fft.ifftshift(x, axes=1), r(3, 5))
case("fft complex", lambda x: fnp.fft.fft(x * (1 + 2j)), r(4))

# --- elementwise with edge values and mixed dtypes
edge = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 1e-310, 2.5, -2.5])
for nm in ["sign", "abs", "sqrt", "log", "exp", "sin", "tanh", "floor", "round", "rint",
           "signbit", "isnan", "nan_to_num", "reciprocal", "square", "cbrt", "expm1", "log1p",
           "sinc", "fix", "spacing", "arctan", "positive", "negative", "modf", "frexp"]:
    case(f"{nm}(edge)", getattr(fnp, nm), edge)
for nm in ["maximum", "minimum", "fmax", "fmin", "arctan2", "copysign", "hypot", "logaddexp",
           "power", "mod", "fmod", "floor_divide", "divide", "heaviside", "nextafter",
           "float_power", "remainder", "divmod", "ldexp" if False else "subtract"]:
    case(f"{nm}(edge,edge')", getattr(fnp, nm), edge, edge[::-1].copy())
ie = np.array([0, -1, 5, -7, np.iinfo(np.int32).min, np.iinfo(np.int32).max], dtype=np.int32)
for nm in ["floor_divide", "mod", "remainder", "fmod", "right_shift", "left_shift", "gcd", "lcm",
           "power", "bitwise_and", "divmod"]:
    case(f"{nm}(int32)", getattr(fnp, nm), ie, np.abs(ie[::-1] % 31).astype(np.int32)
         if "shift" in nm or nm == "power" else ie[::-1].copy())
case("abs int min", fnp.abs, ie)
case("bool add", lambda a, b: a + b, rng.random(4) < .5, rng.random(4) < .5)
case("f16 add", lambda a, b: a * b + a, r(4, dt="float16"), r(4, dt="float16"))
case("f16 sum", lambda a: fnp.sum(a), (100 * r(40)).astype("float16"))
case("f16 mean", lambda a: fnp.mean(a), (100 * r(40)).astype("float16"))
case("f16 var", lambda a: fnp.var(a), (100 * r(40)).astype("float16"))
case("f32 mean", lambda a: fnp.mean(a, axis=0), r(40, 3, dt="float32"))
case("int mean", lambda a: fnp.mean(a, axis=0), rng.integers(-100, 100, (5, 3)))
case("uint8 sum", lambda a: fnp.sum(a), rng.integers(0, 255, (50,)).astype("uint8"))
case("int8 cumsum", lambda a: fnp.cumsum(a), rng.integers(-100, 100, (50,)).astype("int8"))
case("astype int", lambda a: a.astype(np.int32), 10 * r(5))
case("astype uint8", lambda a: a.astype(np.uint8), 300 * r(5))
case("isclose", lambda a, b: fnp.isclose(a, b), edge, edge[::-1].copy())
case("allclose", lambda a, b: fnp.allclose(a, b), r(4), r(4))
case("array_equal", lambda a, b: fnp.array_equal(a, b), ties(4), ties(4))
case("real_if_close-like angle", lambda x: fnp.angle(x + 1j * x[::-1]), r(4))
case("complex abs", lambda x: fnp.abs(x + 1j * x[::-1]), edge)

# --- special
for nm in ["erf", "erfc", "erfinv", "gammaln", "digamma", "expit", "logit", "i0e", "i1e",
           "log_ndtr", "ndtr", "ndtri", "xlogy" if False else "entr", "sinc" if False else "gamma",
           "i0", "i1", "spence", "erfcx" if hasattr(fsp, "erfcx") else "erf"]:
    fn = getattr(fsp, nm, None)
    if fn is not None:
        case(f"special.{nm}", fn, np.concatenate([edge, rng.uniform(0.01, 0.99, 4)]), rtol=0)
case("xlogy", fsp.xlogy, np.array([0.0, 0.0, 1.0, 2.0]), np.array([0.0, -1.0, 0.0, 3.0]))
case("xlog1py", fsp.xlog1py, np.array([0.0, 0.0, 1.0, 2.0]), np.array([-1.0, -2.0, 0.0, 3.0]))
case("gammainc", fsp.gammainc, np.array([0.5, 1.0, 3.0]), np.array([0.0, 1.0, 2.0]))
case("betainc", fsp.betainc, np.array([0.5, 1.0, 3.0]), np.array([2.0, 1.0, 2.0]),
     np.array([0.0, 0.5, 1.0]))
case("zeta", fsp.zeta, np.array([2.0, 3.0, 4.5]), np.array([1.0, 2.0, 0.5]))
case("polygamma", fsp.polygamma, np.array([1, 2, 0]), np.array([1.0, 2.5, 3.0]))
case("multigammaln", lambda x: fsp.multigammaln(x, 3), np.array([2.0, 3.0]))
case("softmax sp", lambda x: fsp.softmax(x, axis=1), r(2, 3))

# --- nn activations
for nm in ["relu", "relu6", "sigmoid", "softplus", "silu", "gelu", "elu", "leaky_relu",
           "log_sigmoid", "celu", "selu", "hard_tanh", "hard_sigmoid", "hard_swish", "glu",
           "standardize", "one_hot" if False else "soft_sign", "sparse_plus", "mish"]:
    fn = getattr(fgrad.nn, nm, None)
    if fn is not None:
        case(f"nn.{nm}", fn, np.concatenate([edge, r(4)]).reshape(7, 2))
case("nn.one_hot", lambda i: fgrad.nn.one_hot(i, 4), np.array([0, 3, -1, 5]))
case("nn.gelu approx False", lambda x: fgrad.nn.gelu(x, approximate=False), r(5))
case("nn.logsumexp where", lambda x, w: fgrad.nn.logsumexp(x, axis=1, where=w) if False
     else fsp.logsumexp(x, axis=1), r(2, 3), rng.random((2, 3)) < .5)

# --- control flow
case("cond", lambda p, x: lax.cond(p, lambda v: v * 2, lambda v: -v, x), np.array(True), r(3))
case("cond pred only", lambda p, x: lax.cond(p, lambda v: v * 2, lambda v: -v, x),
     np.array(True), r(3), batched=[True, False])
case("cond int pred", lambda p, x: lax.cond(p, lambda v: v * 2, lambda v: -v, x),
     np.array(2), r(3))
case("switch", lambda i, x: lax.switch(i, [lambda v: v, lambda v: v * 3, lambda v: -v], x),
     np.array(1), r(3))
case("switch oob", lambda i, x: lax.switch(i, [lambda v: v, lambda v: v * 3, lambda v: -v], x),
     np.array(7), r(3))
case("switch neg", lambda i, x: lax.switch(i, [lambda v: v, lambda v: v * 3, lambda v: -v], x),
     np.array(-4), r(3))
case("while", lambda x: lax.while_loop(lambda c: c[0] < 10.0, lambda c: (c[0] * 2 + 1, c[1] + 1),
                                        (x, 0)), np.float64(0.5))
case("fori batched bounds", lambda n, x: lax.fori_loop(0, n, lambda i, c: c * 1.5 + i, x),
     np.int32(3), r(2))
case("fori", lambda x: lax.fori_loop(0, 4, lambda i, c: c * 1.5 + i, x), r(2))
case("scan", lambda x, xs: lax.scan(lambda c, a: (c * a + 1, c - a), x, xs), r(2), r(4, 2))
case("scan rev", lambda x, xs: lax.scan(lambda c, a: (c * a + 1, c - a), x, xs, reverse=True),
     r(2), r(4, 2))
case("scan xs only", lambda x, xs: lax.scan(lambda c, a: (c * a + 1, c - a), x, xs),
     r(2), r(4, 2), batched=[False, True])
case("scan len no xs", lambda x: lax.scan(lambda c, _: (c * 2, c), x, None, length=3), r(2))
case("map", lambda xs: lax.map(lambda a: a.sum() * a, xs), r(3, 2))
case("cummax via scan", lambda xs: lax.associative_scan(fnp.maximum, xs) if hasattr(lax, "associative_scan") else fnp.maximum.accumulate(xs) if hasattr(fnp.maximum, "accumulate") else xs, r(5))

# --- random (keys batched)
case("random normal", lambda k: fgrad.random.normal(k, (3,)),
     np.asarray(fgrad.random.PRNGKey(1)))
case("random split", lambda k: fgrad.random.split(k, 2), np.asarray(fgrad.random.PRNGKey(2)))
case("random randint", lambda k: fgrad.random.randint(k, (4,), -3, 9), np.asarray(fgrad.random.PRNGKey(3)))
case("random perm", lambda k: fgrad.random.permutation(k, 5), np.asarray(fgrad.random.PRNGKey(4)))
case("random choice", lambda k: fgrad.random.choice(k, 5, (3,), replace=False), np.asarray(fgrad.random.PRNGKey(5)))
case("random uniform", lambda k: fgrad.random.uniform(k, (3,), minval=-1, maxval=2), np.asarray(fgrad.random.PRNGKey(6)))
case("random bernoulli", lambda k: fgrad.random.bernoulli(k, 0.3, (5,)), np.asarray(fgrad.random.PRNGKey(7)))
case("random categorical", lambda k, l: fgrad.random.categorical(k, l), np.asarray(fgrad.random.PRNGKey(9)), r(5))
case("random fold_in", lambda k, d: fgrad.random.fold_in(k, d), np.asarray(fgrad.random.PRNGKey(9)), np.uint32(7))


# ----------------------------------------------------------------------------

def batch_args(args, batched, axis):
    out = []
    for a, b in zip(args, batched):
        a = np.asarray(a)
        if not b:
            out.append(a)
            continue
        # per-example variation: perturb the copies so examples differ
        if a.dtype.kind == "f":
            st = np.stack([a * (1 + 0.25 * i) if i else a for i in range(B)])
        elif a.dtype.kind in "iu" and a.shape == () and a.dtype != np.uint32:
            st = np.stack([a - i for i in range(B)]).astype(a.dtype)
        elif a.dtype.kind in "iu" and a.dtype != np.uint32:
            st = np.stack([np.roll(a, i) for i in range(B)])
        elif a.dtype == bool:
            st = np.stack([a if i % 2 == 0 else ~a for i in range(B)])
        else:
            st = np.stack([a] * B)
        out.append(np.moveaxis(st, 0, axis) if axis else st)
    return out


def run_case(name, f, args, batched, rtol):
    probs = []
    st0 = batch_args(args, batched, 0)
    try:
        ref = stack_loop(f, st0, batched)
    except Exception as e:  # the loop itself fails: not a vmap question
        return [f"LOOP FAILS {type(e).__name__}: {e}"[:200]]
    for axis in (0, -1):
        stx = batch_args(args, batched, axis) if axis == 0 else \
            [np.moveaxis(s, 0, -1) if b else s for s, b in zip(st0, batched)]
        in_axes = tuple((axis if b else None) for b in batched)
        stx = [s if b else fnp.asarray(s) for s, b in zip(stx, batched)]
        for label, g in [("vmap", fgrad.vmap(f, in_axes=in_axes)),
                         ("jit(vmap)", fgrad.jit(fgrad.vmap(f, in_axes=in_axes)))]:
            if label == "jit(vmap)" and axis != 0:
                continue
            try:
                out = g(*stx)
            except Exception as e:
                probs.append(f"{label} in_axes={axis}: RAISES {type(e).__name__}: {str(e)[:300]}")
                continue
            # jit may differ in transcendental last bits: tolerance there
            tol = rtol if label == "vmap" else max(rtol, 1e-6)
            msg = cmp_tree(out, ref, tol)
            if msg:
                probs.append(f"{label} in_axes={axis}: {msg}")
    # nested: batch of batches (2 x B) on the batched args
    try:
        st2 = [np.stack([s, s[::-1]]) if b else fnp.asarray(s) for s, b in zip(st0, batched)]
        in_axes = tuple((0 if b else None) for b in batched)
        out = fgrad.vmap(fgrad.vmap(f, in_axes=in_axes), in_axes=in_axes)(*st2)
        ref2 = fgrad.tree.map(lambda a: np.stack([np.asarray(a), np.asarray(a)[::-1]]), ref)
        msg = cmp_tree(out, ref2, rtol)
        if msg:
            probs.append(f"nested: {msg}")
    except Exception as e:
        probs.append(f"nested RAISES {type(e).__name__}: {str(e)[:300]}")
    return probs


def main():
    import warnings
    warnings.simplefilter("ignore")
    run_cases(CASES, run_case)


if __name__ == "__main__":
    main()
