"""Numerical gradient checking: `check_grads(f, args, order=2, modes=("fwd", "rev"))`.

Forward mode: the JVP along a random direction v is compared directly with the
central difference (f(x + εv) − f(x − εv)) / 2ε. Reverse mode: the VJP of a
random output cotangent u is checked through <u, J v> = <Jᵀu, v>, with J v from
central differences. Higher orders recurse on the derivative functions
themselves (x ↦ jvp(f, x, v) and x ↦ vjp(f, x)(u)). Use float64 inputs: float32
is too coarse for finite differences (looser tolerances apply).

Complex inputs are perturbed in both parts, and cotangents pair with tangents as
Re(sum(ct * t)) (fgrad's convention, see fgrad.grad), so the reverse check covers
the derivatives with respect to real and imaginary parts alike.
"""
import numpy as np

from fgrad._src import tree_util
from fgrad._src.api import jvp, make_jaxpr, vjp
from fgrad._src.config import config

_DEFAULTS = {  # dtype: (eps, atol, rtol)
    np.dtype("float64"): (1e-4, 1e-6, 1e-5),
    np.dtype("float32"): (3e-3, 3e-2, 3e-2),
    np.dtype("float16"): (1e-1, 3e-1, 3e-1),
    np.dtype("complex128"): (1e-4, 1e-6, 1e-5),
    np.dtype("complex64"): (3e-3, 3e-2, 3e-2),
}


def _inexact(x):
    return x.dtype.kind in "fc"


def _wide(x):
    """x in float64 or complex128, for finite differences and comparisons."""
    return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)


def _np(x):
    return np.asarray(x)


def _float_leaves(tree):
    return [_np(x) for x in tree_util.leaves(tree)]


def _tolerances(args, eps, atol, rtol):
    kinds = [x.dtype for x in _float_leaves(args) if _inexact(x)]
    worst = min(kinds, key=lambda d: d.itemsize) if kinds else np.dtype("float64")
    e, a, r = _DEFAULTS.get(worst, _DEFAULTS[np.dtype("float64")])
    return (eps or e), (atol or a), (rtol or r)


def _random_like(tree, rng):
    def draw(x):
        x = _np(x)
        if not _inexact(x):
            return np.zeros(x.shape, x.dtype)
        if x.dtype.kind == "c":
            return (rng.standard_normal(x.shape) + 1j * rng.standard_normal(x.shape)
                    ).astype(x.dtype)
        return rng.standard_normal(x.shape).astype(x.dtype)
    return tree_util.map(draw, tree)


def _axpy(a, v, x):
    """x + a·v on pytrees of arrays (integer leaves stay as they are)."""
    return tree_util.map(lambda xi, vi: _np(xi) + (a * _np(vi)).astype(_np(xi).dtype)
                         if _inexact(_np(xi)) else xi, x, v)


def _inner(a, b):
    return sum(float(np.real(np.sum(_wide(_np(x)) * _wide(_np(y)))))
               for x, y in zip(_float_leaves(a), _float_leaves(b)))


def _numerical_jvp(f, args, v, eps):
    plus = f(*_axpy(eps, v, args))
    minus = f(*_axpy(-eps, v, args))
    return tree_util.map(lambda p, m: (_wide(_np(p)) - _wide(_np(m))) / (2 * eps), plus, minus)


def _assert_close(what, got, expected, atol, rtol):
    got_leaves, exp_leaves = _float_leaves(got), _float_leaves(expected)
    if len(got_leaves) != len(exp_leaves):
        raise AssertionError(f"{what}: {len(got_leaves)} outputs vs {len(exp_leaves)} expected")
    for g, e in zip(got_leaves, exp_leaves):
        if g.shape != e.shape:
            raise AssertionError(f"{what}: shape {g.shape} vs expected {e.shape}")
        if not _inexact(g) and not _inexact(e):
            continue
        g64, e64 = _wide(g), _wide(e)
        if not np.allclose(g64, e64, atol=atol, rtol=rtol, equal_nan=True):
            err = np.max(np.abs(g64 - e64)) if g64.size else 0.0
            raise AssertionError(
                f"{what} does not match finite differences (max abs error {err:.3g}, "
                f"atol={atol}, rtol={rtol}):\n  got      {g64.ravel()[:8]}\n"
                f"  expected {e64.ravel()[:8]}")


def check_jvp(f, args, eps=None, atol=None, rtol=None, rng=None):
    rng = rng or np.random.default_rng(0)
    eps, atol, rtol = _tolerances(args, eps, atol, rtol)
    v = _random_like(args, rng)
    _, tangent_out = jvp(f, tuple(args), tuple(v))
    expected = _numerical_jvp(f, args, v, eps)
    _assert_close("jvp", tangent_out, expected, atol, rtol)
    if config.check_jaxprs:
        make_jaxpr(lambda *a: jvp(f, a, tuple(v)))(*args)


def check_vjp(f, args, eps=None, atol=None, rtol=None, rng=None):
    rng = rng or np.random.default_rng(1)
    eps, atol, rtol = _tolerances(args, eps, atol, rtol)
    out, pullback = vjp(f, *args)
    u = _random_like(out, rng)
    v = _random_like(args, rng)
    ct = pullback(u)
    lhs = _inner(ct, v)
    rhs = _inner(u, _numerical_jvp(f, args, v, eps))
    if not np.isclose(lhs, rhs, atol=atol * max(1.0, abs(rhs)), rtol=rtol):
        raise AssertionError(f"vjp: <J^T u, v> = {lhs!r} but <u, J v> = {rhs!r} "
                             f"by finite differences (atol={atol}, rtol={rtol})")
    if config.check_jaxprs:
        make_jaxpr(lambda *a: vjp(f, *a)[1](u))(*args)


def check_grads(f, args, order=2, modes=("fwd", "rev"), eps=None, atol=None, rtol=None):
    """Check f's derivatives of orders 1..order in the given modes against central
    differences; raises AssertionError on a mismatch."""
    args = tuple(args)
    if isinstance(modes, str):
        modes = (modes,)
    for mode in modes:
        if mode not in ("fwd", "rev"):
            raise ValueError(f"check_grads: unknown mode {mode!r}; use 'fwd' and/or 'rev'")
    rng = np.random.default_rng(42)

    def recurse(fun, level):
        if "fwd" in modes:
            check_jvp(fun, args, eps, atol, rtol, rng)
            if level < order:
                v = _random_like(args, rng)
                recurse(lambda *a: jvp(fun, a, tuple(v))[1], level + 1)
        if "rev" in modes:
            check_vjp(fun, args, eps, atol, rtol, rng)
            if level < order:
                u = _random_like(fun(*args), rng)
                recurse(lambda *a: vjp(fun, *a)[1](u), level + 1)

    recurse(f, 1)
