"""The standard's element-wise functions: fgrad.numpy's ufuncs under the standard's
names (acos for arccos, pow for power, ...) and positional-only signatures."""
from .. import lax
from ..numpy import ufuncs as _u
from ..numpy import util as _util
from ... import numpy as _fnp

# standard name -> fgrad.numpy name, where they differ
_RENAMED = {
    "acos": "arccos", "acosh": "arccosh", "asin": "arcsin", "asinh": "arcsinh",
    "atan": "arctan", "atanh": "arctanh", "atan2": "arctan2", "pow": "power",
}
_UNARY = (
    "abs acos acosh asin asinh atan atanh bitwise_invert ceil conj cos cosh exp expm1 "
    "floor imag isfinite isinf isnan log log1p log2 log10 logical_not negative positive "
    "real sign signbit sin sinh square sqrt tan tanh trunc").split()
_BINARY = (
    "add atan2 bitwise_and bitwise_left_shift bitwise_or bitwise_right_shift bitwise_xor "
    "copysign divide equal floor_divide greater greater_equal hypot less less_equal "
    "logaddexp logical_and logical_or logical_xor maximum minimum multiply not_equal pow "
    "remainder subtract").split()


def _unary(name, fn):
    def function(x, /):
        return fn(x)
    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"Element-wise {name} (fgrad.numpy.{fn.__name__})."
    return function


def _binary(name, fn):
    def function(x1, x2, /):
        return fn(x1, x2)
    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"Element-wise {name} (fgrad.numpy.{fn.__name__}), broadcasting."
    return function


def functions():
    """{standard name: function} for the plain element-wise functions."""
    out = {}
    for names, make in ((_UNARY, _unary), (_BINARY, _binary)):
        for name in names:
            out[name] = make(name, getattr(_fnp, _RENAMED.get(name, name)))
    return out


def round(x, /):
    """Round to the nearest integer value, halves to even; keeps x's dtype."""
    return _u.round(x)


def clip(x, /, min=None, max=None):
    """x limited to [min, max] (either may be None, a scalar or an array); the result
    keeps x's dtype, as the standard asks."""
    x = _util.asarray(x)
    out = _u.clip(x, min=min, max=max)
    return out if out.dtype == x.dtype else lax.convert_element_type(out, x.dtype)


def where(condition, x1, x2, /):
    """x1 where condition holds, else x2 (broadcast together)."""
    return _u.where(condition, x1, x2)
