"""Gradient taps: see the cotangent that reaches a value in the backward pass."""
from ..custom_derivatives import custom_vjp
from .callback import callback


def tap_grad(x, fn):
    """Return x unchanged; when reverse mode (grad, vjp, jacrev) propagates a
    cotangent back to this value, call fn(cotangent) (a pytree like x), also
    inside jit. The functional form of a tensor gradient hook: it observes, never
    changes, the gradient. Forward mode (jvp, jacfwd) through a tap is an error,
    since the tap is a custom_vjp function."""
    return _tap(fn, x)


def _identity(fn, x):
    return x


def _tap_fwd(fn, x):
    return x, None


def _tap_bwd(fn, residuals, ct):
    callback(fn, ct)
    return (ct,)


_tap = custom_vjp(_identity, nondiff_argnums=(0,))
_tap.__name__ = "tap_grad"
_tap.defvjp(_tap_fwd, _tap_bwd)
