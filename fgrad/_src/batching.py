"""Vectorization (vmap): the batch trace and helpers for batching rules.

A `BatchTracer` is a value of the parent level with one extra *batch dimension*
at position `bdim`. Each primitive's batching rule

    prim.batch(vals, dims, **params) -> (out, out_dim)     (lists if multiple results)

receives the parent-level values and their batch dimensions (None: not batched)
and runs at the parent level. Rules keep a batch dimension where it is unless
the operation needs it elsewhere. Custom-derivative calls are batched by
batching their function and rules, so their custom derivatives survive vmap.
"""
from . import core
from .core import Tracer, check_live, get_aval, set_current_trace
from .errors import FgradTypeError

_lax_module = None


def _lax():
    global _lax_module
    if _lax_module is None:
        from . import lax
        _lax_module = lax
    return _lax_module


class BatchTracer(Tracer):
    __slots__ = ("val", "bdim")

    def __init__(self, trace, val, bdim):
        self._trace = trace
        self.val = val
        self.bdim = bdim

    @property
    def aval(self):
        a = get_aval(self.val)
        shape = a.shape[:self.bdim] + a.shape[self.bdim + 1:]
        return core.ShapedArray(shape, a.dtype, a.weak_type)

    @property
    def shape(self):
        s = self.val.shape
        return tuple(s[:self.bdim]) + tuple(s[self.bdim + 1:])

    @property
    def dtype(self):
        return self.val.dtype


class BatchTrace(core.Trace):
    def __init__(self, parent, axis_size, description="vmap"):
        self.parent = parent
        self.axis_size = axis_size
        self.description = description

    def _unpack(self, args):
        vals, dims, batched = [], [], False
        for a in args:
            if type(a) is BatchTracer and a._trace is self:
                vals.append(a.val)
                dims.append(a.bdim)
                batched = True
            else:
                if isinstance(a, Tracer):
                    check_live(a, self)
                vals.append(a)
                dims.append(None)
        return vals, dims, batched

    def _pack(self, val, bdim):
        return val if bdim is None else BatchTracer(self, val, bdim)

    def process_primitive(self, prim, args, params):
        vals, dims, batched = self._unpack(args)
        if not batched:
            return core.bind_at(self.parent, prim, vals, params)
        if prim.batch is None:
            raise FgradTypeError(f"vmap: {prim.name} has no batching rule")
        with set_current_trace(self.parent):
            out, out_dim = prim.batch(vals, dims, **params)
        if prim.multiple_results:
            return [self._pack(o, d) for o, d in zip(out, out_dim)]
        return self._pack(out, out_dim)

    def process_custom_jvp_call(self, prim, fun, jvp, args, params):
        vals, dims, batched = self._unpack(args)
        if not batched:
            with set_current_trace(self.parent):
                return prim.bind_with(fun, jvp, vals, params)
        size = self.axis_size
        fun_b = batch_flat(fun, dims, size)

        def jvp_b(primals, tangents):
            n = len(primals)
            outs = batch_flat(lambda *xs: _concat_pair(jvp(list(xs[:n]), list(xs[n:]))),
                              dims + dims, size)(*primals, *tangents)
            half = len(outs) // 2
            return outs[:half], outs[half:]

        with set_current_trace(self.parent):
            outs = prim.bind_with(fun_b, jvp_b, vals, params)
        return [BatchTracer(self, o, 0) for o in outs]

    def process_custom_vjp_call(self, prim, fun, fwd, bwd, args, params):
        vals, dims, batched = self._unpack(args)
        if not batched:
            with set_current_trace(self.parent):
                return prim.bind_with(fun, (fwd, bwd), vals, params)
        size = self.axis_size
        fun_b = batch_flat(fun, dims, size)
        n_out = []

        def fwd_b(*primals):
            def flat_fwd(*xs):
                outs, res = fwd(*xs)
                n_out.append(len(outs))
                return list(outs) + list(res)
            both = batch_flat(flat_fwd, dims, size)(*primals)
            return both[:n_out[-1]], both[n_out[-1]:]

        def bwd_b(res, cts):
            n_res = len(res)
            cts_in = batch_flat(lambda *xs: bwd(list(xs[:n_res]), list(xs[n_res:])),
                                [0] * (n_res + len(cts)), size, none_ok=True)(*res, *cts)
            # An unbatched argument was used by every batch member: sum their cotangents.
            return [None if c is None else
                    (_lax().reduce_sum(c, (0,)) if d is None else moveaxis(c, 0, d))
                    for c, d in zip(cts_in, dims)]

        with set_current_trace(self.parent):
            outs = prim.bind_with(fun_b, (fwd_b, bwd_b), vals, params)
        return [BatchTracer(self, o, 0) for o in outs]


def _concat_pair(pair):
    outs, touts = pair
    return list(outs) + list(touts)


# ----------------------------------------------------------------------------
# Running a flat function batched

def batch_flat(fun, in_dims, axis_size, none_ok=False):
    """`fun` vectorized over inputs with batch dims `in_dims`; every output comes back
    batched at dimension 0 (unbatched outputs are broadcast; None outputs stay None
    when none_ok)."""
    def batched(*vals):
        trace = BatchTrace(core.current_trace(), axis_size)
        args = [BatchTracer(trace, v, d) if d is not None else v for v, d in zip(vals, in_dims)]
        try:
            with set_current_trace(trace):
                outs = fun(*args)
            return [None if (o is None and none_ok) else
                    move_to_front(*_unbatch(trace, o), axis_size) for o in outs]
        finally:
            trace.finish()
    return batched


def _unbatch(trace, x):
    if type(x) is BatchTracer and x._trace is trace:
        return x.val, x.bdim
    check_live(x)
    return core.full_lower(x), None


# ----------------------------------------------------------------------------
# Helpers for batching rules

def moveaxis(x, src, dst):
    """x with its axis `src` moved to position `dst` (no-op when they agree)."""
    if src == dst:
        return x
    nd = len(x.shape)
    perm = [i for i in range(nd) if i != src]
    perm.insert(dst, src)
    return _lax().transpose(x, tuple(perm))


def move_to_front(x, bdim, size):
    """x batched at dimension 0: moved there, or broadcast if unbatched (bdim None)."""
    if bdim is None:
        shape = tuple(x.shape)
        return _lax().broadcast_in_dim(x, (size,) + shape, tuple(range(1, len(shape) + 1)))
    return moveaxis(x, bdim, 0)


def axis_size_of(vals, dims):
    for v, d in zip(vals, dims):
        if d is not None:
            return v.shape[d]
    raise ValueError("no batched operand")


def unbatched_axis(axis, bdim):
    """Where an operand's (unbatched) axis sits once the batch dim is at `bdim`."""
    return axis if axis < bdim else axis + 1


def batched_axes(axes, bdim):
    return tuple(unbatched_axis(a, bdim) for a in axes)


def out_bdim_after_removing(bdim, removed):
    """The batch dim's new position after the (batched-numbering) axes are removed."""
    return bdim - sum(1 for a in removed if a < bdim)


def defvectorized(prim):
    """Unary element-wise ops: apply to the batched value, batch dim unchanged."""
    def rule(vals, dims, **params):
        return prim.bind(*vals, **params), dims[0]
    prim.batch = rule


def defbroadcasting(prim):
    """N-ary element-wise ops that broadcast like NumPy."""
    def rule(vals, dims, **params):
        vals, out_dim = align_for_broadcast(vals, dims)
        return prim.bind(*vals, **params), out_dim
    prim.batch = rule


def align_for_broadcast(vals, dims):
    """Make batched and unbatched operands broadcast correctly; returns (vals, out_dim).

    If every batched operand has the batch dim at the same place with full rank and
    the unbatched ones only cover trailing dimensions, nothing moves; otherwise the
    batch dims go to the front and batched operands are padded to the output rank.
    """
    ranks = [len(v.shape) - (d is not None) for v, d in zip(vals, dims)]
    out_rank = max(ranks)
    batched = [(v, d, r) for v, d, r in zip(vals, dims, ranks) if d is not None]
    first = batched[0][1]
    if all(d == first and r == out_rank for _, d, r in batched) and all(
            r <= out_rank - first for r, d in zip(ranks, dims) if d is None):
        return vals, first
    out = []
    for v, d, r in zip(vals, dims, ranks):
        if d is None:
            out.append(v)
            continue
        v = moveaxis(v, d, 0)
        if r < out_rank:
            shape = tuple(v.shape)
            v = _lax().reshape(v, shape[:1] + (1,) * (out_rank - r) + shape[1:])
        out.append(v)
    return out, 0


def defreduction(prim):
    """Reductions over `axes`: the batch dim is never reduced."""
    def rule(vals, dims, *, axes, **params):
        (x,), (d,) = vals, dims
        new_axes = batched_axes(axes, d)
        return prim.bind(x, axes=new_axes, **params), out_bdim_after_removing(d, new_axes)
    prim.batch = rule
