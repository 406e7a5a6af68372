"""Element-wise functions with NumPy's names, promotion and broadcasting."""
from .. import lax
from .util import promote, promote_inexact


def _binary(lax_fn, inexact=False):
    conv = promote_inexact if inexact else promote

    def fn(x1, x2):
        return lax_fn(*conv(x1, x2))
    fn.__name__ = lax_fn.__name__
    return fn


def _unary(lax_fn, inexact=False):
    conv = promote_inexact if inexact else promote

    def fn(x):
        return lax_fn(*conv(x))
    fn.__name__ = lax_fn.__name__
    return fn


add = _binary(lax.add)
subtract = _binary(lax.sub)
multiply = _binary(lax.mul)
true_divide = divide = _binary(lax.div, inexact=True)
sin = _unary(lax.sin, inexact=True)
cos = _unary(lax.cos, inexact=True)
exp = _unary(lax.exp, inexact=True)
log = _unary(lax.log, inexact=True)
negative = _unary(lax.neg)
