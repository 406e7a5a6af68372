"""Public transforms over pytrees: grad, value_and_grad, jvp, vjp, linearize,
make_jaxpr, stop_gradient. The layers below see flat lists of arrays."""
import functools

import numpy as np

from . import dtypes, tape, tree_util
from .ad import JVPTracer, backward_pass, jvp_flat, linearize_flat
from .tape import TapeTracer
from .core import Array, ShapedArray, Tracer, full_lower, get_aval
from .config import config
from .debug.tracebacks import api_boundary, with_filtered_traceback
from .jaxpr import LocatedClosedJaxpr
from .lax import convert_element_type as _convert
from .lax import stop_gradient as _stop_gradient_array, zeros, zeros_like
from .partial_eval import trace_to_jaxpr


def _name(f):
    return getattr(f, "__name__", type(f).__name__)


def _as_arrays(flat, what):
    out = []
    for x in flat:
        try:
            out.append(full_lower(x))
        except TypeError as e:
            raise TypeError(f"{what}: {e}") from None
    return out


def _strip_finished(x):
    """Aux outputs: replace tracers of transforms that just finished by their values."""
    while isinstance(x, JVPTracer) and not x._trace.alive:     # tape.TapeTracer too
        x = x.primal
    return x


def _check_argnums(fname, argnums, nargs):
    if type(argnums) is int and 0 <= argnums < nargs:
        return True, (argnums,)
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    for i in nums:
        if not -nargs <= i < nargs:
            raise TypeError(f"{fname}: argnums={argnums} but the function was called with "
                            f"{nargs} positional argument(s)")
    return single, tuple(i % nargs for i in nums)


class _FlatFun:
    """The user's function on flat lists of leaves; remembers its output tree
    structure and, with has_aux, its auxiliary output."""

    def __init__(self, fun, in_tree, what, has_aux=False):
        self.fun, self.in_tree, self.what, self.has_aux = fun, in_tree, what, has_aux
        self.out_tree = self.aux = None

    def __call__(self, *leaves):
        out = self.fun(*tree_util.unflatten(self.in_tree, leaves))
        if self.has_aux:
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                raise TypeError(f"{self.what} with has_aux=True: the function must return a "
                                f"pair (output, aux), got {type(out).__name__}")
            out, self.aux = out
        out_leaves, self.out_tree = tree_util.flatten(out)
        return [full_lower(x) for x in out_leaves]

    def aux_values(self):
        """The aux output, with tracers of the finished transform replaced by values."""
        return tree_util.map(_strip_finished, self.aux)

    def cotangent_leaves(self, ct):
        """Flatten a cotangent for the outputs, checking its tree structure."""
        ct_leaves, ct_tree = tree_util.flatten(ct)
        if ct_tree != self.out_tree:
            raise TypeError(f"{self.what}: the cotangent has tree structure {ct_tree}, but the "
                            f"function's output has {self.out_tree}")
        return _as_arrays(ct_leaves, self.what)


# ----------------------------------------------------------------------------
# Reverse mode

def value_and_grad(fun, argnums=0, has_aux=False, allow_int=False, holomorphic=False):
    """Returns f(*args) and its gradient with respect to args[argnums].

    f must return a real scalar (or (scalar, aux) with has_aux=True); the result is
    (value, grad) or ((value, aux), grad). A tuple `argnums` gives a tuple of grads.

    Complex inputs (JAX's convention): for a real f of z = x + iy the gradient is
    df/dx - i df/dy, the conjugate of the direction of steepest ascent (so
    grad(lambda z: abs(z) ** 2)(z) == 2 * conj(z); descend with z - lr * conj(g)).
    With holomorphic=True, f maps complex inputs to a complex scalar and the
    gradient is its complex derivative f'(z).
    """
    return _value_and_grad(fun, argnums, has_aux, allow_int, holomorphic)


def _value_and_grad(fun, argnums, has_aux, allow_int, holomorphic, value=True):
    """value_and_grad's function, its own traceback boundary (a frame fewer on the
    lean path); with value=False, grad's function (the gradient, or (gradient,
    aux) with has_aux)."""
    fname = _name(fun)
    description = f"grad of {fname}"

    lean = type(argnums) is int and argnums == 0 and not (has_aux or holomorphic)

    def checked(out):
        """fun's output checked as a loss and lowered (the lean path's)."""
        if type(out) is TapeTracer and type(out._value) in _FLOAT_SCALARS:
            return out    # a real scalar loss on the tape: _check_scalar_output's case
        _check_scalar_output(fname, out, holomorphic)
        return full_lower(out)

    def one_output(x):
        """fun at one argument, its output checked (the lean path's flat function)."""
        return [checked(fun(x))]

    @functools.wraps(fun)
    def value_and_grad_f(*args, **kwargs):
        __tracebackhide__ = True  # noqa: F841 -- pytest: do not show this frame
        try:
            if lean and len(args) == 1 and not kwargs:
                # one real floating-point argument: on the tape, without the layers below
                x = args[0]
                t = type(x)
                if t in _FLOAT_SCALARS:     # immutable: full_lower's copy is not needed
                    v, weak = x, False
                elif t is float:            # full_lower's value, as a NumPy scalar
                    v, weak = dtypes.default_float_dtype().type(x), True
                elif t in _LEAF_TYPES:
                    x = full_lower(x)
                    v, weak = x._value, x.weak_type
                    if v.dtype.kind != "f":
                        v = None    # the general path checks it (or differentiates complex x)
                else:
                    v = None
                if v is not None:
                    try:
                        out = tape.value_and_grad_one(fun, checked, v, weak, description, value)
                    except tape.Unsupported:
                        x = Array(v, weak)
                        (ans,), lin = linearize_flat(one_output, [x], description)
                        g, = lin.transpose([_one(ans.dtype)])
                        g = zeros_like(x) if g is None else g
                        out = (ans, g) if value else g
                    if out is not None:
                        return out
            return general(args, kwargs)
        except Exception as e:
            if not config.traceback_filtering:
                raise
            raise with_filtered_traceback(e)

    def general(args, kwargs):
        single, nums = _check_argnums(description, argnums, len(args))
        diff = [args[i] for i in nums]
        flat, in_tree = _flatten(diff)
        flat = _as_arrays(flat, description)
        _check_float_inputs(fname, flat, in_tree, nums, allow_int, holomorphic)
        aux_box = []

        def flat_fun(*xs):
            new_args = list(args)
            for i, sub in zip(nums, _unflatten(in_tree, xs)):
                new_args[i] = sub
            out = fun(*new_args, **kwargs)
            if has_aux:
                if not (isinstance(out, (tuple, list)) and len(out) == 2):
                    raise TypeError(f"grad of {fname} with has_aux=True: the function must "
                                    f"return a pair (output, aux), got {type(out).__name__}")
                out, aux = out
                aux_box.append(aux)
            _check_scalar_output(fname, out, holomorphic)
            return [full_lower(out)]

        (ans,), lin = _linearize(flat_fun, flat, description, aux_box.clear)
        cts = lin.transpose([_one(ans.dtype)])
        grads = [c if c is not None else zeros_like(x) for c, x in zip(cts, flat)]
        g = tuple(_unflatten(in_tree, grads))
        g = g[0] if single else g
        if has_aux:
            aux = tree_util.map(_strip_finished, aux_box[0])
            return ((ans, aux), g) if value else (g, aux)
        return (ans, g) if value else g

    return value_and_grad_f


# Values that are always one pytree leaf (the common single-array argument skips optree).
_LEAF_TYPES = frozenset([Array, np.ndarray, float, int] + [d.type for d in dtypes.SUPPORTED])
_FLOAT_SCALARS = frozenset(d.type for d in dtypes.SUPPORTED if d.kind == "f")


def _flatten(args):
    """tree_util.flatten of a list of arguments; (args, None) for one plain array."""
    if len(args) == 1 and (type(args[0]) in _LEAF_TYPES or isinstance(args[0], Tracer)):
        return args, None
    return tree_util.flatten(args)


def _unflatten(tree, leaves):
    return list(leaves) if tree is None else tree_util.unflatten(tree, leaves)


def _linearize(fun, flat, description, reset):
    """linearize_flat, on the eager tape where it is exact (tape.py), else on the
    jaxpr path (`reset` forgets what a partial run on the tape left behind)."""
    if tape.usable():
        try:
            return tape.linearize_flat(fun, flat, description)
        except tape.Unsupported:
            reset()
    return linearize_flat(fun, flat, description)


_ONES = {}


def _one(dtype):
    """The output cotangent 1 of a scalar loss (Arrays are immutable, so shared): a
    NumPy scalar, as NumPy's own scalar arithmetic gives (cheaper than a 0-d array)."""
    one = _ONES.get(dtype)
    if one is None:
        one = _ONES[dtype] = Array(dtype.type(1), False)
    return one


def grad(fun, argnums=0, has_aux=False, allow_int=False, holomorphic=False):
    """The gradient of a scalar function with respect to args[argnums] (for complex
    inputs and holomorphic=True see value_and_grad)."""
    return _value_and_grad(fun, argnums, has_aux, allow_int, holomorphic, value=False)


def _check_float_inputs(fname, flat, in_tree, nums, allow_int, holomorphic=False,
                        complex_ok=True):
    """Inputs to differentiate must be floating-point or complex (all complex with
    holomorphic=True; none complex where `complex_ok` is False, as for jacfwd)."""
    for x in flat:
        kind = x.dtype.kind
        if holomorphic and kind != "c":
            raise TypeError(
                f"{_what(fname)} with holomorphic=True: every input to differentiate must be "
                f"complex, got {get_aval(x).str_short()} among arguments {nums}.\n  hint: "
                f"convert it (x.astype('complex64')), or drop holomorphic=True for a real "
                f"function")
        if kind == "c" and not complex_ok and not holomorphic:
            raise TypeError(
                f"{_what(fname)}: the input {get_aval(x).str_short()} is complex; a forward-mode "
                f"Jacobian needs real inputs or holomorphic=True.\n  hint: pass "
                f"holomorphic=True for a holomorphic function, or differentiate with respect "
                f"to the real and imaginary parts (or use jvp directly)")
    if allow_int:
        return
    for x in flat:
        dtype = x.dtype
        if dtype.kind not in "fc":
            raise TypeError(
                f"grad of {fname}: cannot differentiate with respect to an input of dtype "
                f"{dtype} (shape {tuple(x.shape)}) among arguments {nums}; gradients need "
                f"floating-point inputs.\n  hint: pass a float array (e.g. x.astype('float32')), "
                f"exclude the argument via argnums, or set allow_int=True for zero gradients.")


def _what(fname):
    """'grad of f' for a bare function name; descriptions ('jacrev of f') as they are."""
    return fname if " of " in fname else f"grad of {fname}"


def check_output_dtype(what, aval, holomorphic):
    """A real output, or with holomorphic=True a complex one (clear errors otherwise)."""
    if holomorphic:
        if aval.dtype.kind != "c":
            raise TypeError(f"{what} with holomorphic=True: the output must be complex, got "
                            f"{aval.str_short()}.\n  hint: drop holomorphic=True for a real "
                            f"output")
        return
    if aval.dtype.kind == "c":
        raise TypeError(
            f"{what}: the output {aval.str_short()} is complex; reverse-mode derivatives "
            f"need a real output or holomorphic=True.\n  hint: pass holomorphic=True for a "
            f"holomorphic function, reduce the output to a real number (abs(z) ** 2, "
            f"z.real), or use vjp directly with a complex cotangent")
    if aval.dtype.kind != "f":
        raise TypeError(f"{what}: the output must be a real floating-point value, got "
                        f"{aval.str_short()}")


def _check_scalar_output(fname, out, holomorphic=False):
    if (isinstance(out, JVPTracer) and not holomorphic and out.shape == ()
            and out.dtype.kind == "f"):     # JVPTracer or tape.TapeTracer
        return      # the common case: a real scalar loss being differentiated
    if not isinstance(out, (Array, Tracer, np.ndarray, np.generic, float, int)):
        raise TypeError(f"grad of {fname}: the function must return a scalar array, got "
                        f"{type(out).__name__}; use vjp or jacrev for pytree outputs")
    aval = get_aval(out)
    if aval.shape != ():
        raise TypeError(
            f"grad of {fname}: the function must return a scalar, but it returned an array "
            f"of shape {aval.shape} ({aval.str_short()}).\n  hint: reduce it (e.g. .sum() or "
            f".mean()), or use vjp / jacrev for non-scalar outputs.")
    check_output_dtype(f"grad of {fname}", aval, holomorphic)


@api_boundary
def vjp(fun, *primals, has_aux=False):
    """(out, pullback) or (out, pullback, aux); pullback(ct) returns one cotangent per primal.

    A cotangent may be wider than a weakly typed output (a float64 cotangent for the
    output of f(5.0)): the pullback then linearizes f again with the weakly typed
    primals in the cotangent's dtype, so float64 cotangents give float64 precision."""
    what = f"vjp of {_name(fun)}"
    flat, in_tree = tree_util.flatten(list(primals))
    flat = _as_arrays(flat, what)
    flat_fun = _FlatFun(fun, in_tree, what, has_aux)
    outs, lin = _linearize(flat_fun, flat, what, lambda: None)
    widened = {}  # dtype -> (outputs, LinearFunction) with weak primals in that dtype

    @api_boundary
    def pullback(ct):
        ct_leaves = flat_fun.cotangent_leaves(ct)
        target = _cotangent_dtype(what, ct_leaves, outs)
        lin_now, outs_now = lin, outs
        if target is not None and any(_is_weak_float(x) for x in flat):
            if target not in widened:
                again = _FlatFun(fun, in_tree, what, has_aux)
                wide = [_convert(x, target) if _is_weak_float(x) else x for x in flat]
                widened[target] = linearize_flat(again, wide, what)
            outs_now, lin_now = widened[target]
        ct_leaves = [c if c.dtype == o.dtype else _convert(c, o.dtype, get_aval(o).weak_type)
                     for c, o in zip(ct_leaves, outs_now)]
        cts = lin_now.transpose(ct_leaves)
        cts = [c if c is not None else zeros_like(x) for c, x in zip(cts, flat)]
        return tuple(tree_util.unflatten(in_tree, cts))

    out = tree_util.unflatten(flat_fun.out_tree, outs)
    if has_aux:
        return out, pullback, flat_fun.aux_values()
    return out, pullback


def _is_weak_float(x):
    aval = get_aval(x)
    return aval.weak_type and aval.dtype.kind == "f"


def _cotangent_dtype(what, cts, outs):
    """Checks cotangents against outputs; returns the float dtype the weakly typed
    outputs' cotangents ask for, or None when every dtype already matches."""
    wanted = []
    for c, o in zip(cts, outs):
        if tuple(c.shape) != tuple(o.shape):
            raise TypeError(f"{what}: cotangent shape {tuple(c.shape)} does not match the "
                            f"output's shape {tuple(o.shape)}")
        if c.dtype == o.dtype or o.dtype.kind != "f":
            continue
        if c.dtype.kind != "f":
            raise TypeError(f"{what}: a cotangent has dtype {c.dtype} but its output has "
                            f"dtype {o.dtype}; cotangents of float outputs must be floats")
        if get_aval(c).weak_type:
            continue  # a Python float takes the output's dtype
        if not get_aval(o).weak_type:
            raise TypeError(f"{what}: a cotangent has dtype {c.dtype} but its output has "
                            f"dtype {o.dtype}; they must match.\n  hint: pass "
                            f"ct.astype({str(o.dtype)!r}), or call f on {c.dtype} inputs")
        wanted.append(c.dtype)
    return np.result_type(*wanted) if wanted else None


# ----------------------------------------------------------------------------
# Forward mode

def _check_tangents(fname, primals, tangents):
    """Flat primals and tangents, checked against each other. A weakly typed float
    primal (a Python float) takes the dtype of a strongly typed float tangent, so
    jvp(f, (5.0,), (np.float64(1.0),)) runs in float64; a weakly typed tangent takes
    its primal's dtype."""
    p_leaves, p_tree = tree_util.flatten(primals)
    t_leaves, t_tree = tree_util.flatten(tangents)
    if p_tree != t_tree:
        raise TypeError(f"jvp of {fname}: primals and tangents must have the same tree "
                        f"structure, got {p_tree} and {t_tree}")
    p_leaves = _as_arrays(p_leaves, f"jvp of {fname}")
    t_leaves = _as_arrays(t_leaves, f"jvp of {fname}")
    out = []
    for i, (p, t) in enumerate(zip(p_leaves, t_leaves)):
        pa, ta = get_aval(p), get_aval(t)
        if pa.shape != ta.shape:
            raise TypeError(f"jvp of {fname}: a tangent has shape {ta.shape} but its primal "
                            f"has shape {pa.shape}")
        if pa.dtype.kind not in "fc":
            out.append(None)  # integer inputs have no tangent
            continue
        if ta.dtype.kind == "c" and pa.dtype.kind != "c":
            raise TypeError(f"jvp of {fname}: a tangent is complex ({ta.str_short()}) but its "
                            f"primal is real ({pa.str_short()}); make the primal complex")
        widen = ta.dtype != pa.dtype and pa.weak_type and ta.dtype.kind == "f"
        if ta.dtype != pa.dtype and not ta.weak_type and not widen:
            raise TypeError(f"jvp of {fname}: a tangent has dtype {ta.dtype} but its primal "
                            f"has dtype {pa.dtype}; they must match")
        if widen and not ta.weak_type:
            p_leaves[i] = _convert(p, ta.dtype)     # a Python float takes its dtype
        elif ta.dtype != pa.dtype:
            t = _convert(t, pa.dtype)
        out.append(t)
    return p_leaves, out, p_tree


@api_boundary
def jvp(fun, primals, tangents, has_aux=False):
    """(f(*primals), J·tangents); with has_aux, (out, tangent_out, aux)."""
    fname = _name(fun)
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError(f"jvp of {fname}: primals and tangents must be tuples or lists, got "
                        f"{type(primals).__name__} and {type(tangents).__name__}")
    p_flat, t_flat, in_tree = _check_tangents(fname, tuple(primals), tuple(tangents))
    flat_fun = _FlatFun(fun, in_tree, f"jvp of {fname}", has_aux)
    outs, touts = jvp_flat(flat_fun, p_flat, t_flat, f"jvp of {fname}")
    touts = [t if t is not None else zeros_like(o) for t, o in zip(touts, outs)]
    out_tree = flat_fun.out_tree
    result = (tree_util.unflatten(out_tree, outs), tree_util.unflatten(out_tree, touts))
    if has_aux:
        return result + (flat_fun.aux_values(),)
    return result


@api_boundary
def linearize(fun, *primals):
    """(f(*primals), f_jvp) where f_jvp(*tangents) applies the Jacobian at primals.

    Tangents wider than weakly typed primals (float64 tangents for f(5.0)) make
    f_jvp linearize f again with those primals in the tangents' dtypes."""
    fname = _name(fun)
    what = f"linearize of {fname}"
    flat, in_tree = tree_util.flatten(list(primals))
    flat = _as_arrays(flat, what)
    flat_fun = _FlatFun(fun, in_tree, what)
    outs, lin = linearize_flat(flat_fun, flat, what)
    widened = {tuple(x.dtype for x in flat): (outs, lin)}

    @api_boundary
    def f_jvp(*tangents):
        p_flat, t_flat, _ = _check_tangents(fname, tuple(primals), tuple(tangents))
        key = tuple(p.dtype for p in p_flat)
        if key not in widened:
            widened[key] = linearize_flat(_FlatFun(fun, in_tree, what), p_flat, what)
        outs_now, lin_now = widened[key]
        touts = lin_now.jvp(t_flat)
        touts = [t if t is not None else zeros_like(o) for t, o in zip(touts, outs_now)]
        return tree_util.unflatten(flat_fun.out_tree, touts)

    return tree_util.unflatten(flat_fun.out_tree, outs), f_jvp


@api_boundary
def linear_transpose(fun, *primals):
    """The transpose of a linear function: returns f_t with f_t(ct) = Jᵀ ct, a tuple
    with one cotangent per argument. `primals` give the argument shapes/dtypes only."""
    what = f"linear_transpose of {_name(fun)}"
    flat, in_tree = tree_util.flatten(list(primals))
    avals = [_arg_aval(x) for x in flat]
    flat_fun = _FlatFun(fun, in_tree, what)
    closed = trace_to_jaxpr(flat_fun, avals, what)

    @api_boundary
    def transposed(ct):
        cts = backward_pass(closed.jaxpr, closed.consts, flat_fun.cotangent_leaves(ct))
        cts = [c if c is not None else zeros(a.shape, a.dtype) for c, a in zip(cts, avals)]
        return tuple(tree_util.unflatten(in_tree, cts))

    return transposed


# ----------------------------------------------------------------------------
# Tracing and stop_gradient

class ShapeDtypeStruct:
    """A stand-in argument for tracing: only its shape and dtype matter."""

    def __init__(self, shape, dtype, weak_type=False):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.weak_type = weak_type

    def __repr__(self):
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype})"


def _arg_aval(x):
    if isinstance(x, ShapeDtypeStruct):
        return ShapedArray(x.shape, x.dtype, x.weak_type)
    return get_aval(x)


def make_jaxpr(fun, static_argnums=(), print_locations=False):
    """Returns a function that traces `fun` on its arguments' shapes and dtypes and
    gives the ClosedJaxpr (print it to read the IR). With print_locations=True the
    printed form ends each equation with the user's source line that created it."""
    static = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    fname = _name(fun)

    @api_boundary
    @functools.wraps(fun)
    def make(*args, **kwargs):
        dyn = [a for i, a in enumerate(args) if i not in static]
        flat, in_tree = tree_util.flatten(dyn)
        avals = [_arg_aval(x) for x in flat]

        def flat_fun(*xs):
            it = iter(tree_util.unflatten(in_tree, xs))
            full = [a if i in static else next(it) for i, a in enumerate(args)]
            return [full_lower(x) for x in tree_util.leaves(fun(*full, **kwargs))]

        closed = trace_to_jaxpr(flat_fun, avals, f"make_jaxpr of {fname}")
        if print_locations:
            return LocatedClosedJaxpr(closed.jaxpr, closed.consts)
        return closed

    return make


def stop_gradient(x):
    """x unchanged, with zero derivative (applies to every leaf of a pytree)."""
    def stop(leaf):
        leaf = full_lower(leaf)
        return _stop_gradient_array(leaf) if leaf.dtype.kind in "fc" else leaf
    return tree_util.map(stop, x)
