"""`trapezoid`: the composite trapezoidal rule along one axis."""
import fgrad.numpy as fnp
from ..numpy.util import canonicalize_axis, promote_inexact


def trapezoid(y, x=None, dx=1.0, axis=-1):
    """Integrate samples y along `axis` by the trapezoidal rule, at the points x
    (an array along that axis, or broadcasting against y) or spaced dx apart, as
    scipy.integrate.trapezoid. Integer samples integrate as floats."""
    y = fnp.asarray(y)
    axis = canonicalize_axis("trapezoid", axis, y.ndim)
    n = y.shape[axis]
    upper = fnp.take(y, fnp.arange(1, n), axis=axis)
    lower = fnp.take(y, fnp.arange(0, max(n - 1, 0)), axis=axis)
    if x is None:
        (total,) = promote_inexact(fnp.sum(upper + lower, axis=axis))
        return total * (dx / 2)
    x = fnp.asarray(x)
    if x.ndim == 1:
        d = fnp.diff(x)
        shape = [1] * y.ndim
        shape[axis] = d.shape[0]
        d = d.reshape(shape)
    else:
        d = fnp.diff(x, axis=axis)
    y_sum, d = promote_inexact(upper + lower, d)
    return fnp.sum(d * y_sum, axis=axis) / 2
