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

from ..compiler.layout import c_strides
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


def emit(ir, module, fname, eqn):
    """Emit `fname_body` for `eqn` (see `can_lower`); returns the function."""
    name = eqn.primitive.name
    p = eqn.params
    x_shape = tuple(eqn.invars[-1].aval.shape)
    o_shape = out_shape(x_shape, p["window_dimensions"], p["window_strides"],
                        p["window_dilation"])
    lead = _planes(eqn)
    x_dims, o_dims = x_shape[lead:], o_shape[lead:]
    x_plane, o_plane = math.prod(x_dims), math.prod(o_dims)
    x_st, o_st = c_strides(x_dims), c_strides(o_dims)
    kinds, strides = p["window_dimensions"][lead:], p["window_strides"][lead:]
    spans = [(kk - 1) * d + 1 for kk, d in zip(kinds, p["window_dilation"][lead:])]
    step = [s * st for s, st in zip(strides, x_st)]
    reach = [d * st for d, st in zip(p["window_dilation"][lead:], x_st)]
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
    best_slot, where_slot, sum_slot = b.alloca(fty), b.alloca(i64), b.alloca(fty)
    zero_f = ir.Constant(fty, 0.0)

    def k(v):
        return ir.Constant(i64, int(v))

    def at(base, index, ty=fty):
        return b.gep(base, [index], inbounds=True, source_etype=ty)

    def load(base, index, ty=fty):
        return b.load(at(base, index, ty), typ=ty)

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

    def select(plane_x, o_idx):
        """Scan the window of output position o_idx: (its maximum, the input index)."""
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
        return b.load(best_slot, typ=fty), b.load(where_slot, typ=i64)

    def windows(plane_x, plane_o, body):
        """body(output index, maximum, input index) for each window of the plane."""
        def visit(idx):
            best, where = select(plane_x, idx)
            body(b.add(plane_o, loops.linear(ir, b, idx, o_st)), best, where)
        loops.nest(ir, b, fn, list(o_dims), visit, "o")

    def zero(plane_x):
        loops.loop(ir, b, fn, 0, x_plane,
                   lambda i: b.store(zero_f, at(out, b.add(plane_x, i))), "zero", False)

    scratch = None
    if name == "select_and_scatter_add" and o_plane and any(
            s < span for s, span in zip(strides, spans)):
        # Overlapping windows: adding into the output (reading back what was just
        # stored at a just-computed address) ran 20x slower than storing. So the
        # selections go to a buffer, then each element sums the cotangents of the
        # windows that hold it and selected it, in the windows' row-major order.
        free = loops.declare(ir, module, "free", ir.VoidType(), [ptr])
        malloc = loops.declare(ir, module, "malloc", ptr, [i64])
        scratch = b.call(malloc, [k(8 * o_plane)])
    reach_back = [-(-span // s) for span, s in zip(spans, strides)]   # windows per element

    def gather_sums(plane_x, plane_o):
        g = ins[0]

        def element(e_idx):
            e = b.add(plane_x, loops.linear(ir, b, e_idx, x_st))
            b.store(zero_f, sum_slot)

            def candidate(c_idx):
                inside, o_parts = None, []
                for e_j, c_j, n_j, s, size in zip(e_idx, c_idx, reach_back, strides, o_dims):
                    # window o_j = e_j // s - (n_j - 1) + c_j, if it exists
                    o_j = b.add(b.sdiv(e_j, k(s)), b.add(c_j, k(1 - n_j)))
                    ok = b.and_(b.icmp_signed(">=", o_j, k(0)),
                                b.icmp_signed("<", o_j, k(size)))
                    inside = ok if inside is None else b.and_(inside, ok)
                    o_parts.append(b.select(ok, o_j, k(0)))
                o = b.add(plane_o, loops.linear(ir, b, o_parts, o_st))
                local = b.sub(o, plane_o)
                hit = b.and_(inside, b.icmp_signed("==", load(scratch, local, i64), e))
                b.store(b.fadd(b.load(sum_slot, typ=fty), b.select(hit, load(g, o), zero_f)),
                        sum_slot)
            loops.nest(ir, b, fn, reach_back, candidate, "c")
            b.store(b.load(sum_slot, typ=fty), at(out, e))
        loops.nest(ir, b, fn, list(x_dims), element, "e")

    def plane(j):
        plane_x = b.mul(j, k(x_plane), flags=("nsw",))
        plane_o = b.mul(j, k(o_plane), flags=("nsw",))
        if name == "reduce_window_max":
            windows(plane_x, plane_o, lambda o, best, where: b.store(best, at(out, o)))
        elif name == "select_and_gather_add":
            windows(plane_x, plane_o,
                    lambda o, best, where: b.store(load(ins[0], where), at(out, o)))
        elif scratch is None:     # windows share no element: store 0 + g there
            zero(plane_x)
            windows(plane_x, plane_o, lambda o, best, where: b.store(
                b.fadd(zero_f, load(ins[0], o)), at(out, where)))
        else:
            windows(plane_x, plane_o, lambda o, best, where: b.store(
                where, at(scratch, b.sub(o, plane_o), i64)))
            gather_sums(plane_x, plane_o)

    _range(ir, b, fn, lo, hi, plane)
    if scratch is not None:
        b.call(free, [scratch])
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
