"""reduce_window_max, select_and_gather_add and select_and_scatter_add as native
kernels (float32 and float64), with the semantics of lax/windows.py bit for bit:
each window's offsets are scanned in row-major order and the first element that
beats the ones before it is selected (greater, or NaN over a number, or +0 over
-0); the maximum is that element, the gather reads the tangent there, and the
scatter adds the cotangent there, windows in row-major order.

The operand's leading dimensions with no window (size, stride and dilation 1)
are planes, each independent: the body

    i1 fname_body(ptr inputs..., ptr out, i64 lo, i64 hi)

handles planes [lo, hi), so the worker pool can split a kernel by planes
(`split_extent`). The scatter zeroes its planes of the output first.
"""
import math

import numpy as np

from ..jaxpr import Literal
from ..lax.windows import out_shape
from . import loops

NAMES = frozenset({"reduce_window_max", "select_and_gather_add", "select_and_scatter_add"})
_DTYPES = frozenset({np.dtype("float32"), np.dtype("float64")})


def can_lower(eqn):
    """Whether `eqn` is one of NAMES on float32 or float64 arrays (no Literals)."""
    return (eqn.primitive.name in NAMES
            and not any(type(a) is Literal for a in eqn.invars)
            and np.dtype(eqn.outvars[0].aval.dtype) in _DTYPES)


def _planes(eqn):
    """How many leading dimensions have no window."""
    p = eqn.params
    n = 0
    for k, s, d in zip(p["window_dimensions"], p["window_strides"], p["window_dilation"]):
        if (k, s, d) != (1, 1, 1):
            break
        n += 1
    return n


def split_extent(eqn):
    """The number of planes (the body's [lo, hi) range)."""
    x = eqn.invars[-1].aval
    return math.prod(x.shape[:_planes(eqn)])


def _c_strides(shape):
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= n
    return strides[::-1]


def emit(ir, module, fname, eqn):
    """Emit `fname_body` for `eqn` (see `can_lower`); returns the function."""
    name = eqn.primitive.name
    p = eqn.params
    x_shape = tuple(eqn.invars[-1].aval.shape)
    o_shape = out_shape(x_shape, p["window_dimensions"], p["window_strides"],
                        p["window_dilation"])
    lead = _planes(eqn)
    x_plane, o_plane = math.prod(x_shape[lead:]), math.prod(o_shape[lead:])
    x_st = _c_strides(x_shape[lead:])
    kinds = p["window_dimensions"][lead:]
    step = [s * st for s, st in zip(p["window_strides"][lead:], x_st)]
    reach = [d * st for d, st in zip(p["window_dilation"][lead:], x_st)]
    # no element in two windows: the scatter stores without reading back (reading
    # what the zeroing loop has just written stalled the loop: 8x slower)
    disjoint = all(s >= (k - 1) * d + 1 for k, s, d in zip(
        kinds, p["window_strides"][lead:], p["window_dilation"][lead:]))
    dt = np.dtype(eqn.outvars[0].aval.dtype)
    fty = ir.FloatType() if dt == np.float32 else ir.DoubleType()
    ity = ir.IntType(8 * dt.itemsize)
    i64, i1, ptr = ir.IntType(64), ir.IntType(1), ir.PointerType()

    n_ptr = len(eqn.invars) + 1
    fn = ir.Function(module, ir.FunctionType(i1, [ptr] * n_ptr + [i64, i64]), fname + "_body")
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    fn.attributes.add("nounwind")
    for a in fn.args[:n_ptr]:
        a.add_attribute("noalias")
    *ins, out, lo, hi = fn.args
    x = ins[-1]
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    best_slot, where_slot = b.alloca(fty), b.alloca(i64)

    def k(v):
        return ir.Constant(i64, int(v))

    def at(base, index, ty=fty):
        return b.gep(base, [index], inbounds=True, source_etype=ty)

    def load(base, index):
        return b.load(at(base, index), typ=fty)

    def beats(v, best):
        greater = b.fcmp_ordered(">", v, best)
        nan_over_number = b.and_(b.fcmp_unordered("uno", v, v),
                                 b.fcmp_ordered("ord", best, best))
        vb, bb = b.bitcast(v, ity), b.bitcast(best, ity)
        zero = ir.Constant(ity, 0)
        plus_over_minus = b.and_(b.fcmp_ordered("==", v, best),
                                 b.and_(b.icmp_signed("<", bb, zero),
                                        b.icmp_signed(">=", vb, zero)))
        return b.or_(greater, b.or_(nan_over_number, plus_over_minus))

    def window(plane_x, o_index, o_idx):
        """Select in the window of output position o_idx; returns the input index."""
        start = b.add(plane_x, loops.linear(ir, b, o_idx, step))
        b.store(load(x, start), best_slot)
        b.store(start, where_slot)

        def offset(idx):
            pos = b.add(start, loops.linear(ir, b, idx, reach))
            v, best = load(x, pos), b.load(best_slot, typ=fty)
            take = beats(v, best)
            b.store(b.select(take, v, best), best_slot)
            b.store(b.select(take, pos, b.load(where_slot, typ=i64)), where_slot)
        loops.nest(ir, b, fn, list(kinds), offset, "k")
        where = b.load(where_slot, typ=i64)
        if name == "reduce_window_max":
            b.store(b.load(best_slot, typ=fty), at(out, o_index))
        elif name == "select_and_gather_add":
            b.store(load(ins[0], where), at(out, o_index))
        else:     # the element's sum so far (0 if no other window holds it) + g
            target = at(out, where)
            so_far = ir.Constant(fty, 0.0) if disjoint else b.load(target, typ=fty)
            b.store(b.fadd(so_far, load(ins[0], o_index)), target)

    def plane(j):
        plane_x = b.mul(j, k(x_plane), flags=("nsw",))
        plane_o = b.mul(j, k(o_plane), flags=("nsw",))
        if name == "select_and_scatter_add":
            loops.loop(ir, b, fn, 0, x_plane,
                       lambda i: b.store(ir.Constant(fty, 0.0), at(out, b.add(plane_x, i))),
                       "zero", False)
        o_st = _c_strides(o_shape[lead:])
        loops.nest(ir, b, fn, list(o_shape[lead:]),
                   lambda idx: window(plane_x, b.add(plane_o, loops.linear(ir, b, idx, o_st)),
                                      idx), "o")

    _range(ir, b, fn, lo, hi, plane)
    b.ret(ir.Constant(i1, 0))
    return fn


def _range(ir, b, fn, lo, hi, body):
    """for j in range(lo, hi): body(j), with run-time bounds."""
    i64 = ir.IntType(64)
    pre = b.block
    head, step, done = (fn.append_basic_block(n) for n in ("plane", "plane_next", "planes_done"))
    b.cbranch(b.icmp_signed("<", lo, hi), head, done)
    b.position_at_end(head)
    j = b.phi(i64, name="j")
    j.add_incoming(lo, pre)
    body(j)
    b.branch(step)
    b.position_at_end(step)
    nxt = b.add(j, ir.Constant(i64, 1), flags=("nsw",))
    j.add_incoming(nxt, step)
    b.cbranch(b.icmp_signed("<", nxt, hi), head, done)
    b.position_at_end(done)
