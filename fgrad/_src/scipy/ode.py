"""`odeint`: adaptive Dormand–Prince 5(4) integration with gradients by the adjoint
method.

The forward pass walks the requested times with `lax.scan`; between two of them
a `lax.while_loop` takes Dormand–Prince steps (error estimate from the embedded
4th-order solution, step size from the usual err^(-1/5) controller, the first
step from Hairer's heuristic) until it passes the time, and the value there
comes from the method's 4th-order dense output on the last accepted step.

Reverse mode is a `custom_vjp`: the backward pass integrates the adjoint system
   dy/dt = f(y, t),  dλ/dt = -λᵀ ∂f/∂y,  dā/dt = -λᵀ ∂f/∂args
backwards from each requested time to the one before (restarting y from the
stored forward value there), adding each time's output cotangent to λ. The
time cotangents need no integral: moving t_i (i ≥ 1) moves only y(t_i), by
f(y_i, t_i), and moving t_0 shifts the start of the whole trajectory, by
-λ(t_0)·f(y_0, t_0), with λ(t_0) leaving out the cotangent of the output at
t_0 itself (that output is y_0 whatever t_0 is). The backward pass calls
`odeint` itself, so reverse mode nests (grad of grad). Forward mode (jvp) is
not defined: a custom_vjp has no JVP rule.

`func` may close over traced values: it is traced once into a jaxpr and those
values become explicit arguments, so they receive gradients too.
"""
import numpy as np

import fgrad.numpy as fnp
from .. import lax, tree_util
from ..api import vjp
from ..core import Tracer, get_aval
from ..custom_derivatives import custom_vjp
from ..errors import FgradTypeError
from ..jaxpr import eval_closed
from ..lax.control_flow import common

# The Dormand–Prince 5(4) tableau: nodes, stage weights, 5th-order weights (also
# the last stage's row: first-same-as-last), their difference from the 4th-order
# weights, and the weights of the dense-output correction term.
_C = (0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0)
_A = ((),
      (1 / 5,),
      (3 / 40, 9 / 40),
      (44 / 45, -56 / 15, 32 / 9),
      (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
      (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656))
_B = (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84)
_E = (71 / 57600, 0.0, -71 / 16695, 71 / 1920, -17253 / 339200, 22 / 525, -1 / 40)
_D = (-12715105075 / 11282082432, 0.0, 87487479700 / 32700410799,
      -10690763975 / 1880347072, 701980252875 / 199316789632,
      -1453857185 / 822651844, 69997945 / 29380423)


def _combine(weights, ks):
    """sum_i w_i k_i over the nonzero weights."""
    out = None
    for w, k in zip(weights, ks):
        if w != 0.0:
            out = w * k if out is None else out + w * k
    return out


def _rms(x):
    return fnp.sqrt(fnp.mean(x * x))


def _dopri_step(f, y, fy, t, h):
    """One step: (y1, f(y1), error estimate, dense-output coefficients)."""
    ks = [fy]
    for c, row in zip(_C[1:], _A[1:]):
        ks.append(f(y + h * _combine(row, ks), t + c * h))
    y1 = y + h * _combine(_B, ks)
    f1 = f(y1, t + h)
    ks.append(f1)
    err = h * _combine(_E, ks)
    r2 = y1 - y
    r3 = h * fy - r2
    r4 = r2 - h * f1 - r3
    r5 = h * _combine(_D, ks)
    return y1, f1, err, fnp.stack([y, r2, r3, r4, r5])


def _dense(coeffs, theta):
    """The dense output y(t0 + θ h) from a step's coefficients."""
    r1, r2, r3, r4, r5 = (coeffs[i] for i in range(5))
    return r1 + theta * (r2 + (1 - theta) * (r3 + theta * (r4 + (1 - theta) * r5)))


def _first_step(f, y0, f0, t0, rtol, atol):
    """Hairer's starting step: small enough that an Euler step changes y by about
    1% of its scale, then refined by an estimate of the second derivative."""
    scale = atol + fnp.abs(y0) * rtol
    d0, d1 = _rms(y0 / scale), _rms(f0 / scale)
    h0 = fnp.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / fnp.maximum(d1, 1e-300))
    f1 = f(y0 + h0 * f0, t0 + h0)
    d2 = _rms((f1 - f0) / scale) / h0
    big = fnp.maximum(d1, d2)
    h1 = fnp.where(big <= 1e-15, fnp.maximum(1e-6, h0 * 1e-3),
                   (0.01 / fnp.maximum(big, 1e-300)) ** 0.2)
    return fnp.minimum(100 * h0, h1)


def _integrate(f, y0, ts, rtol, atol, mxstep, hmax):
    """The solution of y' = f(y, t), y(ts[0]) = y0 at every time in ts, as a
    (len(ts), n) array; NaN at a time the step budget `mxstep` did not reach or
    that is earlier than the time before it."""
    dtype = y0.dtype
    t0 = ts[0]
    f0 = f(y0, t0)
    h = fnp.minimum(_first_step(f, y0, f0, t0, rtol, atol), hmax)
    zero_coeffs = fnp.stack([y0] + [y0 * 0] * 4)
    init = (y0, f0, t0, h, t0, zero_coeffs)

    def reach(state, target):
        carry, previous = state
        def more(state):
            n, (y, fy, t, h, last_t, coeffs) = state
            going = (t < target) & (h > 0)
            return going if mxstep is None else going & (n < mxstep)

        def step(state):
            n, (y, fy, t, h, last_t, coeffs) = state
            y1, f1, err, new_coeffs = _dopri_step(f, y, fy, t, h)
            scale = atol + rtol * fnp.maximum(fnp.abs(y), fnp.abs(y1))
            ratio = _rms(err / scale)
            accept = ratio <= 1
            factor = fnp.where(ratio == 0, 10.0,
                               0.9 * fnp.maximum(ratio, 1e-300) ** -0.2)
            factor = fnp.clip(factor, 0.2, fnp.where(accept, 10.0, 1.0))
            new = (fnp.where(accept, y1, y), fnp.where(accept, f1, fy),
                   fnp.where(accept, t + h, t), fnp.minimum(h * factor, hmax),
                   fnp.where(accept, t, last_t),
                   fnp.where(accept, new_coeffs, coeffs))
            return n + 1, new

        _, carry = lax.while_loop(more, step, (np.int32(0), carry))
        y, fy, t, h, last_t, coeffs = carry
        span = t - last_t
        theta = fnp.where(span > 0, (target - last_t) / fnp.where(span > 0, span, 1), 0)
        value = fnp.where(span > 0, _dense(coeffs, theta), y)
        # Unreached (step budget spent) or earlier than the time before: NaN.
        value = fnp.where((t >= target) & (target >= previous), value,
                          fnp.full_like(value, np.nan))
        return (carry, target), value

    _, ys = lax.scan(reach, (init, t0), ts[1:])
    return fnp.concatenate([y0[None], ys.astype(dtype)], axis=0)


# ----------------------------------------------------------------------------
# States as one flat vector

def _ravel(tree, what):
    """(flat vector of tree's float leaves in one dtype, function rebuilding the
    tree from a flat vector (or from a stack of them, with a leading axis))."""
    leaves, treedef = tree_util.flatten(tree)
    leaves = [fnp.asarray(x) for x in leaves]
    for x in leaves:
        if x.dtype.kind != "f":
            raise FgradTypeError(f"odeint: {what} must hold floating-point arrays, got "
                                 f"dtype {x.dtype}", hint="pass floats, e.g. x.astype(float)")
    dtype = fnp.result_type(*leaves) if leaves else np.float32
    shapes = [x.shape for x in leaves]
    sizes = [int(np.prod(s)) for s in shapes]
    flat = (fnp.concatenate([fnp.ravel(x).astype(dtype) for x in leaves]) if leaves
            else fnp.zeros((0,), dtype))

    def unravel(v):
        lead = v.shape[:-1]
        out, at = [], 0
        for leaf, shape, size in zip(leaves, shapes, sizes):
            out.append(v[..., at:at + size].reshape(lead + shape).astype(leaf.dtype))
            at += size
        return tree_util.unflatten(treedef, out)
    return flat, unravel


def _flat_dynamics(func, unravel, y_aval, t_aval, args):
    """func(y, t, *args) as a function of (flat y, t, *arg leaves, *closed-over values)
    giving a flat vector, and the closed-over traced values it needs."""
    arg_leaves, arg_tree = tree_util.flatten(list(args))
    arg_leaves = [fnp.asarray(a) for a in arg_leaves]
    n_args = len(arg_leaves)

    def flat(y, t, *leaves):
        out = func(unravel(y), t, *tree_util.unflatten(arg_tree, list(leaves)))
        v, _ = _ravel(out, "func's result")
        if v.shape != y.shape:
            raise FgradTypeError(f"odeint: func returned a value of {v.shape[0]} elements "
                                 f"for a state of {y.shape[0]}",
                                 hint="func(y, t, *args) must return dy/dt, shaped like y")
        return v.astype(y.dtype)

    in_avals = [y_aval, t_aval] + [get_aval(a) for a in arg_leaves]
    in_tree = tree_util.structure(tuple(range(len(in_avals))))
    closed, hoisted, _ = common.trace_function(lambda *a: flat(*a), in_tree, in_avals,
                                               "odeint (func)")

    def dynamics(y, t, *rest):
        leaves, consts = rest[:n_args], rest[n_args:]
        return eval_closed(closed, *consts, y, t, *leaves)[0]
    return dynamics, arg_leaves, list(hoisted)


# ----------------------------------------------------------------------------
# The differentiable solve on flat states

def _solve(f, rtol, atol, mxstep, hmax, y0, ts, *args):
    return _integrate(lambda y, t: f(y, t, *args), y0, ts, rtol, atol, mxstep, hmax)


_solve = custom_vjp(_solve, nondiff_argnums=(0, 1, 2, 3, 4))
_solve.__name__ = "odeint"  # the name errors (e.g. forward mode refused) show the user


def _solve_fwd(f, rtol, atol, mxstep, hmax, y0, ts, *args):
    ys = _solve(f, rtol, atol, mxstep, hmax, y0, ts, *args)
    return ys, (ys, ts, args)


def _is_float(x):
    return fnp.asarray(x).dtype.kind == "f"


def _solve_bwd(f, rtol, atol, mxstep, hmax, res, g):
    ys, ts, args = res
    floats = [i for i, a in enumerate(args) if _is_float(a)]

    def with_floats(values):
        full = list(args)
        for i, v in zip(floats, values):
            full[i] = v
        return full

    def adjoint(state, s, *all_args):
        """The adjoint system in reversed time s = -t (so it integrates forwards)."""
        y, lam, _ = state
        float_args = [all_args[i] for i in floats]

        def fy(y_, fa):
            full = list(all_args)
            for i, v in zip(floats, fa):
                full[i] = v
            return f(y_, -s, *full)
        dy, pullback = vjp(fy, y, float_args)
        lam_fy, lam_fargs = pullback(lam)
        return -dy, lam_fy, list(lam_fargs)

    def back_one_interval(carry, x):
        lam, args_bar = carry
        y_end, t_end, t_start, g_start = x
        path = odeint(adjoint, (y_end, lam, args_bar), fnp.stack([-t_end, -t_start]), *args,
                      rtol=rtol, atol=atol, hmax=hmax,
                      mxstep=np.inf if mxstep is None else mxstep)
        _, lam, args_bar = tree_util.map(lambda v: v[-1], path)
        return (lam + g_start, args_bar), None

    zero_bars = [fnp.zeros_like(fnp.asarray(args[i])) for i in floats]
    (lam, args_bar), _ = lax.scan(back_one_interval, (g[-1], zero_bars),
                                  (ys[1:], ts[1:], ts[:-1], g[:-1]), reverse=True)
    later = lax.map(lambda x: fnp.vdot(x[2], f(x[0], x[1], *args)), (ys[1:], ts[1:], g[1:]))
    # y(t_0) = y0 whatever t_0 is: only the later outputs move with the start time.
    t0_bar = -fnp.vdot(lam - g[0], f(ys[0], ts[0], *args))
    ts_bar = fnp.concatenate([t0_bar[None], later]).astype(ts.dtype)
    args_cts = [None] * len(args)
    for i, v in zip(floats, args_bar):
        args_cts[i] = v
    return (lam, ts_bar, *args_cts)


_solve.defvjp(_solve_fwd, _solve_bwd)


# ----------------------------------------------------------------------------
# The public function

def odeint(func, y0, t, *args, rtol=1.4e-8, atol=1.4e-8, mxstep=np.inf, hmax=np.inf):
    """Solve dy/dt = func(y, t, *args) from y(t[0]) = y0 and return y at every time
    in t (increasing), stacked along a new leading axis of each leaf of y0's tree.

    rtol, atol: the local error tolerances; mxstep: most steps between two
    requested times (a time not reached within them gives NaN); hmax: the largest
    step. The method is explicit (for non-stiff problems, unlike SciPy's LSODA):
    on a stiff problem it takes very many small steps, which mxstep can bound. The solve runs in y0's floating dtype (t is converted to it; y0's leaves
    are promoted to one dtype). Reverse-mode gradients with respect to y0, t and args come from the
    adjoint method (see this module's docstring); forward mode is not available.
    """
    if not callable(func):
        raise TypeError(f"odeint: func must be callable, got {type(func).__name__}")
    for name, v in (("rtol", rtol), ("atol", atol)):
        if not np.isscalar(v) or not v > 0:
            raise ValueError(f"odeint: {name} must be a positive number, got {v!r}")
    if not (mxstep == np.inf or (float(mxstep).is_integer() and mxstep > 0)):
        raise ValueError(f"odeint: mxstep must be a positive integer or inf, got {mxstep!r}")
    y_flat, unravel = _ravel(y0, "y0")
    ts = fnp.asarray(t)
    if ts.ndim != 1 or ts.shape[0] < 1:
        raise FgradTypeError(f"odeint: t must be a 1-D array of times, got shape {ts.shape}",
                             hint="pass at least the start time, e.g. fnp.array([0.0, 1.0])")
    known = None if isinstance(ts, Tracer) else np.asarray(ts)
    if known is not None and np.any(known[1:] < known[:-1]):
        raise ValueError("odeint: the times t must not decrease (under jit, a time earlier "
                         "than the one before it gives NaN)")
    ts = ts.astype(y_flat.dtype)
    f, arg_leaves, hoisted = _flat_dynamics(func, unravel, get_aval(y_flat), get_aval(ts[0]),
                                            args)
    ys = _solve(f, float(rtol), float(atol), None if mxstep == np.inf else int(mxstep),
                float(hmax), y_flat, ts, *arg_leaves, *hoisted)
    return unravel(ys)
