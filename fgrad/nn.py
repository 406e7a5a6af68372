"""fgrad.nn: activation functions and friends (JAX's `jax.nn` names and signatures).

    import fgrad.nn as nn
    probs = nn.softmax(logits, axis=-1)

Every function is built from fgrad.numpy/lax operations, so it is traceable and
differentiable. Where the maths needs care the implementation takes it:
sigmoid and softplus never exponentiate a large positive number, softmax and
log_softmax subtract the (gradient-stopped) maximum, and logsumexp returns
-inf for rows that are all -inf. relu and friends have derivative 0 at the kink.
"""
import functools
import math

import numpy as np

import fgrad.numpy as fnp
from fgrad._src import dtypes, lax
from fgrad._src.core import Array, Tracer
from fgrad._src.custom_derivatives import custom_jvp
from fgrad._src.numpy.util import asarray as _asarray
from fgrad._src.numpy.util import canonicalize_axes as _canonicalize_axes
from fgrad._src.numpy.util import promote_inexact as _promote_inexact

__all__ = ["relu", "relu6", "leaky_relu", "elu", "celu", "selu", "gelu", "silu", "swish",
           "sigmoid", "log_sigmoid", "softplus", "soft_sign", "hard_tanh", "hard_sigmoid",
           "hard_silu", "hard_swish", "tanh", "mish", "glu", "softmax", "log_softmax",
           "logsumexp", "one_hot", "standardize", "normalize"]


def _float(x):
    if (type(x) is Array or isinstance(x, Tracer)) and x.dtype.kind == "f":
        return x
    return _promote_inexact(x)[0]


def _c(x, v):
    return Array(np.asarray(v, x.dtype), True)


def relu(x):
    """max(x, 0), with derivative 0 at 0 (NaN stays NaN)."""
    x = x if isinstance(x, (Array, Tracer)) else _asarray(x)
    return lax.select_n(lax.le(x, _c(x, 0)), x, _c(x, 0))


def relu6(x):
    """min(max(x, 0), 6), with derivative 0 at 0 and at 6."""
    x = relu(x)
    return lax.select_n(lax.ge(x, _c(x, 6)), x, _c(x, 6))


def leaky_relu(x, negative_slope=0.01):
    x = _float(x)
    return lax.select_n(lax.ge(x, _c(x, 0)), lax.mul(x, _c(x, negative_slope)), x)


def elu(x, alpha=1.0):
    """x for x > 0, alpha (exp(x) - 1) otherwise."""
    x = _float(x)
    pos = lax.gt(x, _c(x, 0))
    safe = lax.select_n(pos, x, _c(x, 0))        # no overflow in the unused branch
    return lax.select_n(pos, lax.mul(_c(x, alpha), lax.expm1(safe)), x)


def celu(x, alpha=1.0):
    x = _float(x)
    pos = lax.gt(x, _c(x, 0))
    safe = lax.select_n(pos, x, _c(x, 0))
    return lax.select_n(pos, lax.mul(_c(x, alpha), lax.expm1(lax.div(safe, _c(x, alpha)))), x)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(x):
    x = _float(x)
    return lax.mul(_c(x, _SELU_SCALE), elu(x, _SELU_ALPHA))


def sigmoid(x):
    """1 / (1 + exp(-x)), stable for large |x|."""
    return lax.logistic(_float(x))


def log_sigmoid(x):
    """log(sigmoid(x)) = -softplus(-x), stable."""
    x = _float(x)
    return lax.neg(softplus(lax.neg(x)))


def softplus(x):
    """log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)), stable. The max and -|x| are
    picked by one select (as in fgrad.numpy's logaddexp), so that at 0 one analytic
    formula, x + log1p(exp(-x)), gives every derivative."""
    x = _float(x)
    first = lax.ge(x, _c(x, 0))
    hi = lax.select_n(first, _c(x, 0), x)
    lo = lax.select_n(first, x, _c(x, 0))
    return lax.add(hi, lax.log1p(lax.exp(lax.sub(lo, hi))))


def soft_sign(x):
    x = _float(x)
    return lax.div(x, lax.add(lax.abs(x), _c(x, 1)))


def silu(x):
    """x * sigmoid(x)."""
    x = _float(x)
    return lax.mul(x, lax.logistic(x))


swish = silu


def mish(x):
    x = _float(x)
    return lax.mul(x, lax.tanh(softplus(x)))


_GELU_SPELLINGS = {"none": False, "tanh": True}     # PyTorch's names


def gelu(x, approximate=True):
    """Gaussian error linear unit: the tanh approximation (approximate=True or
    'tanh'; JAX's default) or the exact x * Phi(x) with erf (False or 'none', as
    PyTorch spells it). Any other value is an error, not a guess: a non-empty
    string such as 'none' is truthy."""
    approximate = _gelu_spelling(approximate)
    x = _float(x)
    if approximate:
        k = math.sqrt(2 / math.pi)
        # tanh is 1 to the last bit long before |x| = 30: bounding its argument there
        # keeps x³ finite, so the derivative is not 0 · inf = nan for huge |x|.
        xs = lax.select_n(lax.gt(x, _c(x, 30)), x, _c(x, 30))
        xs = lax.select_n(lax.lt(xs, _c(x, -30)), xs, _c(x, -30))
        inner = lax.mul(_c(x, k), lax.add(xs, lax.mul(_c(x, 0.044715), lax.integer_pow(xs, 3))))
        return lax.mul(lax.mul(_c(x, 0.5), x), lax.add(_c(x, 1), lax.tanh(inner)))
    return lax.mul(lax.mul(_c(x, 0.5), x),
                   lax.add(_c(x, 1), lax.erf(lax.mul(x, _c(x, 1 / math.sqrt(2))))))


def _gelu_spelling(value):
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, str) and value in _GELU_SPELLINGS:
        return _GELU_SPELLINGS[value]
    raise ValueError(f"gelu: approximate must be False or 'none' (exact, with erf) or True "
                     f"or 'tanh' (the tanh approximation), got {value!r}")


def tanh(x):
    return lax.tanh(_float(x))


def hard_tanh(x):
    x = _float(x)
    x = lax.select_n(lax.gt(x, _c(x, 1)), x, _c(x, 1))
    return lax.select_n(lax.lt(x, _c(x, -1)), x, _c(x, -1))


def hard_sigmoid(x):
    """relu6(x + 3) / 6."""
    x = _float(x)
    return lax.div(relu6(lax.add(x, _c(x, 3))), _c(x, 6))


def hard_silu(x):
    x = _float(x)
    return lax.mul(x, hard_sigmoid(x))


hard_swish = hard_silu


def glu(x, axis=-1):
    """Gated linear unit: split x in two halves a, b along `axis`; a * sigmoid(b)."""
    x = _float(x)
    ax = axis % x.ndim
    n = x.shape[ax]
    if n % 2:
        from fgrad._src.errors import FgradTypeError
        raise FgradTypeError(f"glu: axis {axis} of shape {tuple(x.shape)} must have an even "
                             f"size")
    a, b = fnp.split(x, 2, axis=ax)
    return lax.mul(a, lax.logistic(b))


# ----------------------------------------------------------------------------
# Normalisations over axes

def _reduction_axes(name, x, axis):
    return _canonicalize_axes(name, axis, x.ndim, x.shape)


def _max_shift(x, axes):
    """The maximum over `axes` (kept dims), gradient-stopped, 0 where not finite
    or where `axes` are empty (so an empty sum gives log 0 = -inf, as SciPy)."""
    if any(x.shape[a] == 0 for a in axes):
        kept = tuple(d for i, d in enumerate(x.shape) if i not in axes)
        return lax.expand_dims(fnp.zeros(kept, x.dtype), axes)
    m = lax.reduce_max(x, axes)
    m = lax.select_n(lax.is_finite(m), _c(m, 0), m)
    m = lax.stop_gradient(m)
    return lax.expand_dims(m, axes)


def _widened(x):
    """(x as computed in, x's dtype): float16 normalisations run in float32 and
    round once at the end, so sums over many elements neither overflow nor drift."""
    if x.dtype == dtypes.float16:
        return lax.convert_element_type(x, dtypes.float32), x.dtype
    return x, x.dtype


def _narrowed(y, dtype):
    return y if y.dtype == dtype else lax.convert_element_type(y, dtype)


def _where_mask(x, where):
    if where is None:
        return None
    w = _asarray(where)
    if w.dtype.kind != "b":
        w = lax.ne(w, Array(np.asarray(0, w.dtype), True))
    return lax.broadcast_to(w, tuple(x.shape))


def softmax(x, axis=-1, where=None, initial=None):
    """exp(x) / sum(exp(x)) over `axis` (the maximum is subtracted first)."""
    x, dtype = _widened(_float(x))
    axes = _reduction_axes("softmax", x, axis)
    w = _where_mask(x, where)
    if w is not None:
        x = lax.select_n(w, _c(x, -np.inf), x)
    out = _softmax(x, axes)
    if w is not None:
        out = lax.select_n(w, _c(out, 0), out)
    return _narrowed(out, dtype)


@functools.partial(custom_jvp, nondiff_argnums=(1,))
def _softmax(x, axes):
    unnormalized = lax.exp(lax.sub(x, _max_shift(x, axes)))
    total = lax.expand_dims(lax.reduce_sum(unnormalized, axes), axes)
    return lax.div(unnormalized, total)


@_softmax.defjvp
def _softmax_jvp(axes, primals, tangents):
    """y' = y x' - y sum(y x'): reverse mode keeps only y (attention's weights),
    not exp(x) and exp(x) / sum^2 from the division's rule."""
    (x,), (dx,) = primals, tangents
    y = _softmax(x, axes)
    inner = lax.expand_dims(lax.reduce_sum(lax.mul(y, dx), axes), axes)
    return y, lax.sub(lax.mul(y, dx), lax.mul(y, inner))


def log_softmax(x, axis=-1, where=None, initial=None):
    """x - logsumexp(x) over `axis`, computed stably."""
    x, dtype = _widened(_float(x))
    axes = _reduction_axes("log_softmax", x, axis)
    w = _where_mask(x, where)
    if w is not None:
        x = lax.select_n(w, _c(x, -np.inf), x)
    shifted = lax.sub(x, _max_shift(x, axes))
    lse = lax.log(lax.reduce_sum(lax.exp(shifted), axes))
    out = lax.sub(shifted, lax.expand_dims(lse, axes))
    if w is not None:
        out = lax.select_n(w, _c(out, -np.inf), out)
    return _narrowed(out, dtype)


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False, where=None):
    """log(sum(b * exp(a))) over `axis`, stable; rows of -inf give -inf. With
    return_sign=True, returns (log|sum|, sign(sum))."""
    a = _float(a)
    if b is not None:
        a, b = _promote_inexact(a, b)
        a, b = fnp.broadcast_arrays(a, b)
        b, _ = _widened(b)
    a, dtype = _widened(a)
    axes = _reduction_axes("logsumexp", a, axis)
    w = _where_mask(a, where)
    if w is not None:
        a = lax.select_n(w, _c(a, -np.inf), a)
    shift = _max_shift(a, axes)
    e = lax.exp(lax.sub(a, shift))
    if b is not None:
        e = lax.mul(e, b)
    total = lax.reduce_sum(e, axes)
    shift_r = lax.reshape(shift, tuple(total.shape))
    if return_sign:
        sign = lax.sign(total)
        out = lax.add(lax.log(lax.abs(total)), shift_r)
    else:
        out = lax.add(lax.log(total), shift_r)
    if keepdims:
        out = lax.expand_dims(out, axes)
        if return_sign:
            sign = lax.expand_dims(sign, axes)
    out = _narrowed(out, dtype)
    return (out, _narrowed(sign, dtype)) if return_sign else out


def standardize(x, axis=-1, mean=None, variance=None, epsilon=1e-5, where=None):
    """(x - mean) / sqrt(variance + epsilon), statistics over `axis` by default."""
    x, dtype = _widened(_float(x))
    if mean is None:
        mean = fnp.mean(x, axis, keepdims=True, where=where)
    if variance is None:
        variance = fnp.mean(fnp.square(fnp.subtract(x, mean)), axis, keepdims=True,
                            where=where)
    out = fnp.multiply(fnp.subtract(x, mean), lax.rsqrt(fnp.add(variance, epsilon)))
    return _narrowed(out, dtype)


normalize = standardize


def one_hot(x, num_classes, *, dtype=dtypes.float32, axis=-1):
    """A one-hot encoding of integer labels: a new axis of size num_classes at
    `axis`; out-of-range labels give all zeros."""
    x = _asarray(x)
    num_classes = int(num_classes)
    nd = x.ndim + 1
    ax = axis % nd if -nd <= axis < nd else None
    if ax is None:
        from fgrad._src.errors import FgradTypeError
        raise FgradTypeError(f"one_hot: axis {axis} is out of range for a result of "
                             f"{nd} dimensions")
    if x.dtype.kind == "b":
        x = lax.convert_element_type(x, dtypes.int32)
    if x.dtype.kind in "iu" and num_classes - 1 > np.iinfo(x.dtype).max:
        x = lax.convert_element_type(x, dtypes.int64)   # class numbers must not wrap
    labels = lax.expand_dims(x, (ax,))
    cshape = [1] * nd
    cshape[ax] = num_classes
    classes = Array(np.arange(num_classes, dtype=x.dtype).reshape(cshape), False)
    return lax.convert_element_type(lax.eq(labels, classes), dtypes.canonicalize(dtype))
