"""Element-wise functions with NumPy's names, promotion and broadcasting.

Each function promotes its operands (util.promote: Python scalars are weak,
int32 + float32 -> float32) and is written with lax operations only, so it
works on tracers and is differentiable wherever the maths is.
"""
import functools
import math
from decimal import Decimal, localcontext

import numpy as np

from .. import core, dtypes, lax
from ..lax._util import broadcast_shape
from ..core import Array, Tracer
from ..errors import FgradTypeError
from .util import (NUMPY_TYPES, asarray, from_numpy, is_weak, promote, promote_inexact,
                   scalar_like)

_ARRAYS = (Array, Tracer)


def _inexact1(x):
    """x as a floating-point or complex fgrad value (fast path for float arrays)."""
    t = type(x)
    if t is Array or isinstance(x, Tracer):
        if x.dtype.kind in "fc":
            return x
    elif t in NUMPY_TYPES and x.dtype.kind in "fc":
        x = from_numpy(x)         # an Array as promote makes it (for a supported dtype)
        if type(x) is Array:
            return x
    return promote_inexact(x)[0]


def _half_in_float32(fn):
    """`fn` with float16 operands computed in float32 and the result rounded to half
    once, as NumPy's float16 loops do: a composition of several operations that
    rounds to half at each step drifts by up to ~16 half-ulps (logaddexp, hypot,
    sinh, ...). Other dtypes go to `fn` unchanged."""
    def widened(*args):
        if not any(getattr(a, "dtype", None) == dtypes.float16 for a in args):
            return fn(*args)
        args = promote(*args)
        if args[0].dtype != dtypes.float16:
            return fn(*args)
        out = fn(*(lax.convert_element_type(a, dtypes.float32) for a in args))
        return lax.convert_element_type(out, dtypes.float16)
    widened.__name__, widened.__qualname__, widened.__doc__ = (
        fn.__name__, fn.__qualname__, fn.__doc__)
    return widened


def _value1(x):
    if type(x) is Array or isinstance(x, Tracer):
        return x
    return asarray(x)


def _binary(name, lax_fn, inexact=False):
    conv = promote_inexact if inexact else promote

    def fn(x1, x2, /):
        return lax_fn(*conv(x1, x2))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Element-wise {name} with NumPy promotion and broadcasting."
    return fn


def _unary_inexact(name, prim):
    """The fgrad.numpy function of an element-wise primitive of one operand."""
    fn = core.lean_unary(prim, lambda x: prim.bind(_inexact1(x)))
    fn.__name__ = fn.__qualname__ = name
    fn.__module__ = __name__
    fn.__doc__ = f"Element-wise {name} (integer inputs become float32)."
    return fn


def _c(x, v):
    """A weak constant of x's dtype."""
    return scalar_like(x, v)


def _kind(x):
    return x.dtype.kind


# ----------------------------------------------------------------------------
# Arithmetic

def add(x1, x2, /):
    x1, x2 = promote(x1, x2)
    if _kind(x1) == "b":
        return lax.bitwise_or(x1, x2)
    return lax.add(x1, x2)


def subtract(x1, x2, /):
    x1, x2 = promote(x1, x2)
    if _kind(x1) == "b":
        raise FgradTypeError("subtract: boolean subtract is not supported (as in NumPy); "
                             "use logical_xor or bitwise_xor instead")
    return lax.sub(x1, x2)


def multiply(x1, x2, /):
    x1, x2 = promote(x1, x2)
    if _kind(x1) == "b":
        return lax.bitwise_and(x1, x2)
    return lax.mul(x1, x2)


def true_divide(x1, x2, /):
    return lax.div(*promote_inexact(x1, x2))


divide = true_divide


def _floor_divmod(x1, x2):
    """NumPy's floor division and remainder (remainder takes the divisor's sign)."""
    if _kind(x1) == "u":
        return lax.div(x1, x2), lax.rem(x1, x2)
    zero = _c(x1, 0)
    mod = lax.rem(x1, x2)
    fix = lax.bitwise_and(lax.ne(mod, zero), lax.ne(lax.lt(mod, zero), lax.lt(x2, zero)))
    if _kind(x1) == "f":
        div = lax.div(lax.sub(x1, mod), x2)
    else:
        div = lax.div(x1, x2)
    div = lax.select_n(fix, div, lax.sub(div, _c(div, 1)))
    mod = lax.select_n(fix, mod, lax.add(mod, x2))
    if _kind(x1) == "f":
        div = lax.round(div, "to_nearest_even")  # exact integers; zero derivative
        # zeros carry NumPy's (and Python's) signs: a zero quotient that of x1 / x2,
        # a zero remainder the divisor's
        div = lax.select_n(lax.eq(div, zero), div, lax.mul(zero, lax.div(x1, x2)))
        # (with mod's derivative: d(x mod y)/dx is 1 at exact multiples too)
        signed = lax.select_n(signbit(x2), zero, lax.neg(zero))
        mod = lax.select_n(lax.eq(mod, zero), mod, _derivatives_from(signed, mod))
    return div, mod


def _derivatives_from(value, source):
    """value's bits (a -0.0 included) with source's derivatives of every order:
    value - (source - source), the zero's derivative taken from source alone.
    For a formula accurate in value whose derivative meets 0 * inf (NaN) in
    reverse mode where a finite-valued source formula does not. source must be
    finite where the result is used."""
    return lax.sub(lax.stop_gradient(value), lax.sub(lax.stop_gradient(source), source))


@_half_in_float32
def floor_divide(x1, x2, /):
    x1, x2 = promote(x1, x2)
    if _kind(x1) == "b":
        x1, x2 = (lax.convert_element_type(x, dtypes.int8) for x in (x1, x2))
    if _kind(x1) == "f":
        # Python semantics for the edge cases NumPy follows: x // 0 = +-inf or nan.
        q, _ = _floor_divmod(x1, x2)
        plain = lax.div(x1, x2)
        return lax.select_n(lax.eq(x2, _c(x2, 0)), q, plain)
    q, _ = _floor_divmod(x1, x2)
    return q


def remainder(x1, x2, /):
    x1, x2 = promote(x1, x2)
    if _kind(x1) == "b":
        x1, x2 = (lax.convert_element_type(x, dtypes.int8) for x in (x1, x2))
    return _floor_divmod(x1, x2)[1]


mod = remainder


def divmod(x1, x2, /):
    return floor_divide(x1, x2), remainder(x1, x2)


def fmod(x1, x2, /):
    """Remainder with the sign of the dividend (C's fmod); booleans as int8, NumPy's."""
    x1, x2 = promote(x1, x2)
    if _kind(x1) == "b":
        x1, x2 = (lax.convert_element_type(x, dtypes.int8) for x in (x1, x2))
    return lax.rem(x1, x2)


def _int_pow(x, y):
    """x ** y for integer arrays, by squaring (y >= 0)."""
    bits = y.dtype.itemsize * 8
    acc = lax.broadcast_to(_c(x, 1), broadcast_shape(tuple(x.shape), tuple(y.shape)))
    base = x
    one = _c(y, 1)
    for _ in range(bits):
        odd = lax.eq(lax.bitwise_and(y, one), one)
        acc = lax.select_n(odd, acc, lax.mul(acc, base))
        base = lax.mul(base, base)
        y = lax.shift_right_logical(y, one)
    return acc


def power(x1, x2, /):
    """x1 ** x2. A static Python int exponent uses integer_pow (exact, and
    differentiable at x1 <= 0); integer arrays stay integer."""
    if type(x2) is int and not isinstance(x1, bool):
        x1 = _value1(x1)
        if type(x1) is not Array and not isinstance(x1, Tracer):
            x1 = asarray(x1)
        if _kind(x1) == "b":
            x1 = promote(x1, x2)[0]
        if x2 < 0 and _kind(x1) in "iu":
            raise ValueError("power: integers to negative integer powers are not allowed")
        return lax.integer_pow(x1, x2)
    x1, x2 = promote(x1, x2)
    if _kind(x1) in "iub":
        if _kind(x1) == "b":
            x1, x2 = promote(lax.convert_element_type(x1, dtypes.int32, is_weak(x1)), x2)
        if type(x2) is Array and _kind(x2) == "i" and (np.asarray(x2._value) < 0).any():
            raise ValueError("power: integers to negative integer powers are not allowed")
        return _int_pow(x1, x2)
    return lax.pow(x1, x2)


def float_power(x1, x2, /):
    return lax.pow(*promote_inexact(x1, x2))


def _negative(x, /):
    x = _value1(x)
    k = _kind(x)
    if k == "u":
        return lax.sub(_c(x, 0), x)
    if k == "b":
        raise FgradTypeError("negative: the negative of a boolean array is not supported "
                             "(as in NumPy); use logical_not or ~")
    return lax.neg(x)


negative = core.lean_unary(lax.neg_p, _negative)
negative.__name__ = negative.__qualname__ = "negative"
negative.__module__ = __name__
negative.__doc__ = "Element-wise negation."


def positive(x, /):
    return _value1(x)


def absolute(x, /):
    x = _value1(x)
    if _kind(x) in "ub":
        return x
    return lax.abs(x)


abs = absolute
fabs = _unary_inexact("fabs", lax.abs_p)


def sign(x, /):
    x = _value1(x)
    if _kind(x) == "b":
        return x
    return lax.sign(x)


def square(x, /):
    x = _value1(x)
    if _kind(x) == "b":
        return lax.bitwise_and(x, x)
    return lax.integer_pow(x, 2)


def reciprocal(x, /):
    return lax.integer_pow(_inexact1(x), -1)


def maximum(x1, x2, /):
    x1, x2 = promote(x1, x2)
    if _kind(x1) == "b":
        return lax.bitwise_or(x1, x2)
    return lax.max(x1, x2)


def minimum(x1, x2, /):
    x1, x2 = promote(x1, x2)
    if _kind(x1) == "b":
        return lax.bitwise_and(x1, x2)
    return lax.min(x1, x2)


def fmax(x1, x2, /):
    """Maximum that ignores NaNs (returns the other operand)."""
    x1, x2 = promote(x1, x2)
    if _kind(x1) != "f":
        return maximum(x1, x2)
    out = lax.max(x1, x2)
    out = lax.select_n(lax.ne(x1, x1), out, x2)
    return lax.select_n(lax.ne(x2, x2), out, x1)


def fmin(x1, x2, /):
    x1, x2 = promote(x1, x2)
    if _kind(x1) != "f":
        return minimum(x1, x2)
    out = lax.min(x1, x2)
    out = lax.select_n(lax.ne(x1, x1), out, x2)
    return lax.select_n(lax.ne(x2, x2), out, x1)


def clip(a, a_min=None, a_max=None, out=None, *, min=None, max=None):
    """Limit values to [min, max] (either may be None; array bounds broadcast)."""
    if min is not None:
        a_min = min
    if max is not None:
        a_max = max
    if a_min is None and a_max is None:
        raise ValueError("clip: at least one of a_min and a_max must be given")
    a = _value1(a)
    if a_min is not None:
        a = maximum(a, a_min)
    if a_max is not None:
        a = minimum(a, a_max)
    return a


# ----------------------------------------------------------------------------
# Exponents, logarithms, powers

exp = _unary_inexact("exp", lax.exp_p)
expm1 = _unary_inexact("expm1", lax.expm1_p)
log = _unary_inexact("log", lax.log_p)
log1p = _unary_inexact("log1p", lax.log1p_p)
sqrt = _unary_inexact("sqrt", lax.sqrt_p)


@_half_in_float32
def exp2(x, /):
    """2**x as pow(2, x) (exact at integers; exp(x·ln 2) was tens of ulps off)."""
    x = _inexact1(x)
    if _kind(x) == "c":
        return lax.exp(_per_part(lax.mul, x, math.log(2)))
    return lax.pow(_c(x, 2.0), x)


def _per_part(op, z, k):
    """op(z, k) for complex z and real k, on each part (a complex product or
    quotient would make NaN of inf·0: log2(0j) is -inf+0j, not -inf+nanj)."""
    re, im = lax.real(z), lax.imag(z)
    return lax.complex(op(re, _c(re, k)), op(im, _c(im, k)))


def _split(d, bits=53):
    """A Decimal as (hi, lo) float64s whose sum carries about 53 + bits of it (hi
    keeps `bits` significant bits, so hi times a small integer is exact)."""
    scale = Decimal(2) ** (bits - math.frexp(float(d))[1])
    hi = float(round(d * scale) / scale)
    return hi, float(d - Decimal(hi))


with localcontext() as _ctx:
    _ctx.prec = 40
    _INV_LN2 = _split(1 / Decimal(2).ln())
    _INV_LN10 = _split(1 / Decimal(10).ln())
    _LOG10_2 = _split(Decimal(2).ln() / Decimal(10).ln(), bits=40)


def _times(x, pair):
    """x times the constant hi + lo (finite x): about one rounding, not two."""
    return lax.add(lax.mul(x, _c(x, pair[0])), lax.mul(x, _c(x, pair[1])))


def _via_float64(fn, x):
    """fn (a float64 formula) of real x, rounded once to x's dtype."""
    if x.dtype == dtypes.float64:
        return fn(x)
    return lax.convert_element_type(fn(lax.convert_element_type(x, dtypes.float64)), x.dtype)


def _binade(x):
    """(ok, e, log m) with x = m·2**e, e = round(log2 x), for finite x > 0 (ok);
    m = 1 at powers of two, so log m = 0 exactly."""
    ok = lax.bitwise_and(lax.is_finite(x), lax.gt(x, _c(x, 0)))
    safe = lax.select_n(ok, _c(x, 1), x)
    e = lax.stop_gradient(lax.round(lax.mul(lax.log(safe), _c(x, _INV_LN2[0])),
                                    rounding_method="to_nearest_even"))
    half = lax.floor(lax.mul(e, _c(x, 0.5)))       # 2**-e in two steps: no overflow
    m = lax.mul(lax.mul(safe, lax.pow(_c(x, 2.0), lax.neg(half))),
                lax.pow(_c(x, 2.0), lax.sub(half, e)))
    return ok, e, lax.log(m)


def _log2_float64(x):
    """e + log2(m): exact at powers of two, within an ulp elsewhere."""
    ok, e, log_m = _binade(x)
    out = lax.add(e, _times(log_m, _INV_LN2))
    return lax.select_n(ok, lax.mul(lax.log(x), _c(x, _INV_LN2[0])), out)


def _log10_float64(x):
    """e·log10(2) + log10(m), e·hi exact (hi has 40 bits): within an ulp."""
    ok, e, log_m = _binade(x)
    small = lax.add(_times(log_m, _INV_LN10), lax.mul(e, _c(x, _LOG10_2[1])))
    out = lax.add(lax.mul(e, _c(x, _LOG10_2[0])), small)
    return lax.select_n(ok, lax.mul(lax.log(x), _c(x, _INV_LN10[0])), out)


def log2(x, /):
    """Real x: computed in float64 (exact at powers of two), rounded once."""
    x = _inexact1(x)
    if _kind(x) == "c":
        return _per_part(lax.div, lax.log(x), math.log(2))
    return _via_float64(_log2_float64, x)


def log10(x, /):
    """Real x: computed in float64, rounded once (log10(1000) is 3)."""
    x = _inexact1(x)
    if _kind(x) == "c":
        return _per_part(lax.div, lax.log(x), math.log(10))
    return _via_float64(_log10_float64, x)


def cbrt(x, /):
    x = _inexact1(x)
    # sign(x) * |x|^(1/3) with a select (not sign * ...) so the derivative is
    # right away from 0.
    neg = signbit(x)          # (not x < 0: cbrt(-0.0) is -0.0)
    a = lax.select_n(neg, x, lax.neg(x))
    r = lax.pow(a, _c(x, 1.0 / 3.0))
    # 1/3 is not exact, so r is off by |log a| * eps (dozens of ulp for huge or tiny
    # a); one Newton step for r^3 = a corrects it (0 and inf stay as they are)
    # the Newton step sees 1 where it is not taken (at 0 and inf), so its
    # derivative (inf * 0 there) cannot turn the root's into NaN in reverse mode
    ok = lax.is_finite(lax.div(a, r))
    ra = lax.select_n(ok, _c(x, 1), r)
    aa = lax.select_n(ok, _c(x, 1), a)
    newton = lax.sub(ra, lax.div(lax.sub(ra, lax.div(aa, lax.mul(ra, ra))), _c(x, 3)))
    r = lax.select_n(ok, r, newton)
    return lax.select_n(neg, r, lax.neg(r))


def _ordered(x1, x2):
    """(the larger, the smaller) of x1 and x2, picked by one select (x1 on a tie, and
    the smaller is x1 where either is NaN). Unlike max and min, whose derivative
    splits a tie in halves, each side carries one operand's tangent whole, so a
    formula in (hi, lo) that is analytic in both keeps every derivative at the tie."""
    first = lax.ge(x1, x2)
    return lax.select_n(first, x2, x1), lax.select_n(first, x1, x2)


@_half_in_float32
def logaddexp(x1, x2, /):
    """log(exp(x1) + exp(x2)) = hi + log1p(exp(lo - hi)), computed stably; derivatives
    of every order are right at x1 == x2 (see `_ordered`)."""
    return _log_add(x1, x2, lax.exp, None)


@_half_in_float32
def logaddexp2(x1, x2, /):
    """log2(2**x1 + 2**x2) = hi + log1p(2**(lo - hi)) / ln 2: hi is exact (scaling
    the operands by ln 2 cost a few ulps: logaddexp2(120, 120) was 120.99999)."""
    return _log_add(x1, x2, exp2, math.log(2))


def _log_add(x1, x2, exp, ln_base):
    """hi + log1p(exp(lo - hi)) [/ ln_base] with equal infinities giving their mean."""
    x1, x2 = promote_inexact(x1, x2)
    hi, lo = _ordered(x1, x2)
    # Equal infinities (lo - hi is nan) give x1/2 + x2/2 (inf or -inf, derivative 1/2
    # each, as at any tie: the function grows by t when both do). Both sides of the
    # select get inputs where they are defined, so no nan enters the derivative of
    # the other; a nan operand stays nan.
    equal_inf = lax.bitwise_and(lax.eq(x1, x2), lax.eq(lax.abs(x1), _c(x1, np.inf)))
    hi = lax.select_n(equal_inf, hi, _c(hi, 0))
    lo = lax.select_n(equal_inf, lo, _c(lo, 0))
    tail = lax.log1p(exp(lax.sub(lo, hi)))
    if ln_base is not None:
        tail = lax.div(tail, _c(tail, ln_base))
    out = lax.add(hi, tail)
    zero, half = _c(x1, 0), _c(x1, 0.5)
    both = lax.add(lax.mul(half, lax.select_n(equal_inf, zero, x1)),
                   lax.mul(half, lax.select_n(equal_inf, zero, x2)))
    return lax.select_n(equal_inf, out, both)


# ----------------------------------------------------------------------------
# Trigonometric and hyperbolic functions

sin = _unary_inexact("sin", lax.sin_p)
cos = _unary_inexact("cos", lax.cos_p)
tan = _unary_inexact("tan", lax.tan_p)
tanh = _unary_inexact("tanh", lax.tanh_p)


def arctan2(x1, x2, /):
    return lax.atan2(*promote_inexact(x1, x2))


def arcsin(x, /):
    x = _inexact1(x)
    if _kind(x) == "c":
        return lax.asin(x)
    return lax.atan2(x, _cos_of_arcsin(x))


def arccos(x, /):
    """atan2(sqrt((1 - x)(1 + x)), x): accurate near ±1 (no cancellation in the root)
    and one formula on the whole domain, so the derivative at -1 is the true one
    (no constant pi substituted there, whose derivative would be 0)."""
    x = _inexact1(x)
    if _kind(x) == "c":
        return lax.acos(x)
    return lax.atan2(_cos_of_arcsin(x), x)


def _cos_of_arcsin(x):
    """sqrt((1 - x)(1 + x)), differentiated as sqrt(1 - x) sqrt(1 + x): the product
    under one root meets 0 * inf in reverse mode at ±1 (NaN where the derivative of
    arcsin is ±inf); the value keeps the single root's rounding."""
    one = _c(x, 1)
    return _derivatives_from(lax.sqrt(lax.mul(lax.sub(one, x), lax.add(one, x))),
                             lax.mul(lax.sqrt(lax.sub(one, x)), lax.sqrt(lax.add(one, x))))


def arctan(x, /):
    x = _inexact1(x)
    if _kind(x) == "c":
        return lax.atan(x)
    return lax.atan2(x, _c(x, 1))


_LN2 = math.log(2)


def _half_exps(a):
    """(exp(a)/2, exp(-a)/2) for a >= 0, within an ulp or two of each: 0.5·exp(a)
    and 0.5/exp(a) up to `top`, where exp overflows; beyond it (cosh still fits up
    to top + ln 2) exp(top)/2 · exp(a - top), whose a - top is exact and whose
    derivative never forms exp(a); past `limit`, where that overflows, exp(a)
    itself (inf without a warning, as the transcendentals give it). (exp(a - ln 2)
    rounded a - ln 2 first: up to 25 ulps in float32, 495 in float64.)"""
    top, half_top, limit = _exp_limits(a.dtype)
    fits = lax.le(a, _c(a, top))
    over = lax.gt(a, _c(a, limit))
    e = lax.exp(lax.select_n(fits, _c(a, top), a))          # never inf
    between = lax.select_n(fits, lax.select_n(over, a, _c(a, limit)), _c(a, top))
    rest = lax.exp(lax.sub(between, _c(a, top)))
    beyond = lax.exp(lax.select_n(over, _c(a, 0), a))        # inf only where taken
    big = lax.select_n(over, lax.mul(_c(a, half_top), rest), beyond)
    return lax.select_n(fits, big, lax.mul(_c(a, 0.5), e)), lax.div(_c(a, 0.5), e)


@functools.cache
def _exp_limits(dtype):
    """(top, exp(top)/2, limit) in `dtype`: top the largest value whose exp is
    finite, limit the largest a with exp(top)/2 · exp(a - top) finite. Constants,
    so eager and jit use the same bits."""
    with np.errstate(over="ignore"):
        top = np.log(np.finfo(dtype).max)
        while not np.isfinite(np.exp(top)):
            top = np.nextafter(top, dtype.type(0))
        half_top = np.exp(top) / dtype.type(2)
        limit = top + np.log(np.finfo(dtype).max / half_top)   # then to the last finite
        for _ in range(4):
            limit = np.nextafter(limit, dtype.type(np.inf))
        while not np.isfinite(half_top * np.exp(limit - top)):
            limit = np.nextafter(limit, dtype.type(0))
    return top, half_top, limit


@_half_in_float32
def sinh(x, /):
    x = _inexact1(x)
    if _kind(x) == "c":
        return _complex_sinh(x)
    small = lax.lt(lax.abs(x), _c(x, 1))
    xs = lax.select_n(small, _c(x, 0), x)           # safe input for the small branch
    xl = lax.select_n(small, x, _c(x, 1))            # safe input for the large branch
    small_val = lax.mul(lax.sub(lax.expm1(xs), lax.expm1(lax.neg(xs))), _c(x, 0.5))
    a, neg = _abs_by_select(xl)
    up, down = _half_exps(a)
    big = lax.sub(up, down)
    big_val = lax.select_n(neg, big, lax.neg(big))
    return lax.select_n(small, big_val, small_val)


@_half_in_float32
def cosh(x, /):
    x = _inexact1(x)
    if _kind(x) == "c":
        return _complex_cosh(x)
    up, down = _half_exps(_abs_by_select(x)[0])
    return lax.add(up, down)


def _abs_by_select(x):
    """(|x|, x's sign bit) with |x| by a select, so d|x|/dx is +-1 even at 0 (the
    sign bit, not x < 0, so that |-0.0| is +0.0)."""
    neg = signbit(x)
    return lax.select_n(neg, x, lax.neg(x)), neg


def _log_asymptote_from(x):
    """Where arcsinh / arccosh may use log(2|x|): from 1/sqrt(eps) on, the
    neglected 1/(4x^2) is below the rounding error (and x*x still fits float16)."""
    return _c(x, 1 / math.sqrt(np.finfo(x.dtype).eps))


def arcsinh(x, /):
    x = _inexact1(x)
    if _kind(x) == "c":
        return lax.asinh(x)
    a, neg = _abs_by_select(x)
    big = lax.gt(a, _log_asymptote_from(x))
    s = lax.select_n(big, a, _c(x, 1))
    s2 = lax.mul(s, s)
    small_val = lax.log1p(lax.add(s, lax.div(s2, lax.add(_c(x, 1),
                                                         lax.sqrt(lax.add(_c(x, 1), s2))))))
    b = lax.select_n(big, _c(x, 2), a)
    big_val = lax.add(lax.log(b), _c(x, _LN2))
    r = lax.select_n(big, small_val, big_val)
    return lax.select_n(neg, r, lax.neg(r))


def arccosh(x, /):
    x = _inexact1(x)
    if _kind(x) == "c":
        return lax.acosh(x)
    big = lax.gt(x, _log_asymptote_from(x))
    s = lax.select_n(big, x, _c(x, 1))
    t = lax.sub(s, _c(x, 1))
    # the root differentiated as sqrt(t) sqrt(s + 1) (see _cos_of_arcsin): at x = 1
    # the derivative is inf, not 0 * inf
    root = _derivatives_from(lax.sqrt(lax.mul(t, lax.add(s, _c(x, 1)))),
                             lax.mul(lax.sqrt(t), lax.sqrt(lax.add(s, _c(x, 1)))))
    small_val = lax.log1p(lax.add(t, root))
    b = lax.select_n(big, _c(x, 2), x)
    big_val = lax.add(lax.log(b), _c(x, _LN2))
    # below 1 it is NaN (the formula gives -inf or inf for large negative x)
    return lax.select_n(lax.lt(x, _c(x, 1)), lax.select_n(big, small_val, big_val),
                        _c(x, np.nan))


def arctanh(x, /):
    x = _inexact1(x)
    if _kind(x) == "c":
        return lax.atanh(x)
    return lax.mul(_c(x, 0.5), lax.sub(lax.log1p(x), lax.log1p(lax.neg(x))))


@_half_in_float32
def hypot(x1, x2, /):
    """sqrt(x1² + x2²) as |hi| sqrt(1 + (lo/hi)²), hi the operand of larger magnitude.
    The signed operands (not their absolute values) enter the formula, so the
    derivatives are right where either is 0 (d²/dx² hypot(x, 1) = 1 at 0) and at
    |x1| == |x2|. Where an operand is infinite the result is +inf (even with a nan,
    as C's hypot), with the formula's inputs replaced so no nan enters the derivative."""
    x1, x2 = promote_inexact(x1, x2)
    inf = lax.bitwise_or(lax.eq(lax.abs(x1), _c(x1, np.inf)),
                         lax.eq(lax.abs(x2), _c(x2, np.inf)))
    first = lax.ge(lax.abs(x1), lax.abs(x2))
    hi, lo = lax.select_n(first, x2, x1), lax.select_n(first, x1, x2)
    hs, ls = lax.select_n(inf, hi, _c(hi, 1)), lax.select_n(inf, lo, _c(lo, 0))
    a = lax.abs(hs)
    r = lax.div(ls, lax.select_n(lax.eq(a, _c(a, 0)), hs, _c(hs, 1)))
    out = lax.mul(a, lax.sqrt(lax.add(_c(a, 1), lax.mul(r, r))))
    big = lax.abs(hi)       # inf, or nan when the other operand is the infinite one
    big = lax.select_n(lax.eq(big, _c(big, np.inf)), _c(big, np.inf), big)
    return lax.select_n(inf, out, big)


def deg2rad(x, /):
    x = _inexact1(x)
    return lax.mul(x, _c(x, math.pi / 180))


def rad2deg(x, /):
    x = _inexact1(x)
    return lax.mul(x, _c(x, 180 / math.pi))


radians, degrees = deg2rad, rad2deg


# sin(u)/u = sum_k (-1)^k u^(2k) / (2k+1)!: for |u| < 1 nine terms are exact to
# float64 rounding, and near 0 they keep the derivatives that the quotient loses
# to cancellation (the 2nd derivative of sinc at 0 is -pi²/3, the 4th pi⁴/5).
_SINC_SERIES = [(-1) ** k / math.factorial(2 * k + 1) for k in range(9)]


def sinc(x, /):
    """sin(pi x) / (pi x), 1 at 0: a Taylor series for |pi x| < 1, so derivatives of
    every order are right at and near 0."""
    x = _inexact1(x)
    u = lax.mul(x, _c(x, math.pi))
    near = lax.lt(lax.abs(u), _c(x, 1))
    un = lax.select_n(near, _c(x, 0), u)            # safe input for the series
    uf = lax.select_n(near, u, _c(x, 1))            # safe input for the quotient
    u2 = lax.mul(un, un)
    series = _c(x, _SINC_SERIES[-1])
    for c in reversed(_SINC_SERIES[:-1]):
        series = lax.add(lax.mul(series, u2), _c(x, c))
    return lax.select_n(near, lax.div(lax.sin(uf), uf), series)


# ----------------------------------------------------------------------------
# Rounding

def _no_complex(name, x):
    if _kind(x) == "c":
        raise FgradTypeError(f"{name} is not defined for complex numbers (as in NumPy), got "
                             f"{x.dtype}", hint="apply it to the real and imaginary parts "
                             "(fgrad.numpy.real, fgrad.numpy.imag)")


def floor(x, /):
    x = _value1(x)
    _no_complex("floor", x)
    return lax.floor(x) if _kind(x) == "f" else x


def ceil(x, /):
    x = _value1(x)
    _no_complex("ceil", x)
    return lax.ceil(x) if _kind(x) == "f" else x


def trunc(x, /):
    x = _value1(x)
    _no_complex("trunc", x)
    if _kind(x) != "f":
        return x
    return lax.select_n(lax.lt(x, _c(x, 0)), lax.floor(x), lax.ceil(x))


fix = trunc


def rint(x, /):
    x = _value1(x)
    if _kind(x) == "c":
        return _on_parts(rint, x)
    return lax.round(x, "to_nearest_even") if _kind(x) == "f" else x


def round(a, decimals=0, out=None):
    """Round half to even, to `decimals` decimal places (as numpy.round)."""
    a = _value1(a)
    decimals = int(decimals)
    if _kind(a) == "c":
        return _on_parts(lambda part: round(part, decimals), a)
    if _kind(a) != "f":
        if decimals >= 0:
            return a
        # Round half to even at a multiple of f = 10**-decimals, in integers.
        f = 10 ** (-decimals)
        if f > np.iinfo(a.dtype).max:
            return lax.mul(a, _c(a, 0))
        q, r = _floor_divmod(a, _c(a, f))
        twice = lax.mul(r, _c(a, 2))
        odd = lax.ne(lax.rem(q, _c(a, 2)), _c(a, 0))
        up = lax.bitwise_or(lax.gt(twice, _c(a, f)),
                            lax.bitwise_and(lax.eq(twice, _c(a, f)), odd))
        q = lax.select_n(up, q, lax.add(q, _c(a, 1)))
        return lax.mul(q, _c(a, f))
    if decimals == 0:
        return lax.round(a, "to_nearest_even")
    f = _c(a, 10.0 ** decimals)
    return lax.div(lax.round(lax.mul(a, f), "to_nearest_even"), f)


around = round


# ----------------------------------------------------------------------------
# Comparisons and predicates

def _comparison(name, lax_fn):
    def fn(x1, x2, /):
        return lax_fn(*promote(x1, x2))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Element-wise {name} (a boolean array)."
    return fn


equal = _comparison("equal", lax.eq)
not_equal = _comparison("not_equal", lax.ne)
less = _comparison("less", lax.lt)
less_equal = _comparison("less_equal", lax.le)
greater = _comparison("greater", lax.gt)
greater_equal = _comparison("greater_equal", lax.ge)


def isnan(x, /):
    x = _value1(x)
    if _kind(x) == "c":
        return _any_part(isnan, x)
    if _kind(x) != "f":
        return _const_bool(x, False)
    return lax.ne(x, x)


def isinf(x, /):
    x = _value1(x)
    if _kind(x) == "c":
        return _any_part(isinf, x)
    if _kind(x) != "f":
        return _const_bool(x, False)
    return lax.eq(lax.abs(x), _c(x, np.inf))


def isposinf(x, /):
    x = _value1(x)
    if _kind(x) != "f":
        return _const_bool(x, False)
    return lax.eq(x, _c(x, np.inf))


def isneginf(x, /):
    x = _value1(x)
    if _kind(x) != "f":
        return _const_bool(x, False)
    return lax.eq(x, _c(x, -np.inf))


def isfinite(x, /):
    x = _value1(x)
    if _kind(x) == "c":
        return _both_parts(isfinite, x)
    if _kind(x) != "f":
        return _const_bool(x, True)
    return lax.is_finite(x)


def signbit(x, /):
    x = _value1(x)
    k = _kind(x)
    if k in "ub":
        return _const_bool(x, False)
    if k == "i":
        return lax.lt(x, _c(x, 0))
    bits = np.dtype(f"int{x.dtype.itemsize * 8}")
    return lax.lt(lax.bitcast_convert_type(x, bits), Array(np.asarray(0, bits), True))


def copysign(x1, x2, /):
    x1, x2 = promote_inexact(x1, x2)
    a, _ = _abs_by_select(x1)
    return lax.select_n(signbit(x2), a, lax.neg(a))


def _const_bool(x, value):
    return Array(np.full(tuple(x.shape), value, np.bool_), False)


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|a - b| <= atol + rtol |b| element-wise; infinities equal only to themselves."""
    a, b = promote(a, b)
    if _kind(a) not in "fc":
        a, b = promote_inexact(a, b)
    with np.errstate(invalid="ignore"):  # inf - inf: decided by the equality test below
        diff = lax.abs(lax.sub(a, b))
    tol = lax.add(_c(diff, atol), lax.mul(_c(diff, rtol), lax.abs(b)))
    out = lax.bitwise_and(lax.le(diff, tol), isfinite(b))
    out = lax.bitwise_or(out, lax.eq(a, b))
    if equal_nan:
        out = lax.bitwise_or(out, lax.bitwise_and(isnan(a), isnan(b)))
    return out


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether all elements are close: a 0-d boolean array."""
    from .reductions import all as _all
    return _all(isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan))


def array_equal(a1, a2, equal_nan=False):
    a1, a2 = asarray(a1), asarray(a2)
    if tuple(a1.shape) != tuple(a2.shape):
        return Array(np.asarray(False), False)
    from .reductions import all as _all
    eq = lax.eq(*promote(a1, a2))
    if equal_nan and a1.dtype.kind in "fc":
        eq = lax.bitwise_or(eq, lax.bitwise_and(isnan(a1), isnan(a2)))
    return _all(eq)


def heaviside(x1, x2, /):
    """0 for x1 < 0, x2 where x1 == 0, 1 for x1 > 0 (nan stays nan)."""
    x1, x2 = promote_inexact(x1, x2)
    out = lax.select_n(lax.gt(x1, _c(x1, 0)), x2, 1.0)
    out = lax.select_n(lax.lt(x1, _c(x1, 0)), out, 0.0)
    return lax.select_n(lax.ne(x1, x1), out, x1)


# ----------------------------------------------------------------------------
# Logical and bitwise operations

def _to_bool(x):
    x = _value1(x)
    if _kind(x) == "b":
        return x
    return lax.ne(x, _c(x, 0))


def logical_and(x1, x2, /):
    return lax.bitwise_and(_to_bool(x1), _to_bool(x2))


def logical_or(x1, x2, /):
    return lax.bitwise_or(_to_bool(x1), _to_bool(x2))


def logical_xor(x1, x2, /):
    return lax.bitwise_xor(_to_bool(x1), _to_bool(x2))


def logical_not(x, /):
    return lax.bitwise_not(_to_bool(x))


def _int_binary(name, lax_fn):
    def fn(x1, x2, /):
        x1, x2 = promote(x1, x2)
        if _kind(x1) == "f":
            raise FgradTypeError(f"{name} is not defined for floating-point operands "
                                 f"({x1.dtype}); convert them with .astype(int)")
        return lax_fn(x1, x2)
    fn.__name__ = fn.__qualname__ = name
    return fn


bitwise_and = _int_binary("bitwise_and", lax.bitwise_and)
bitwise_or = _int_binary("bitwise_or", lax.bitwise_or)
bitwise_xor = _int_binary("bitwise_xor", lax.bitwise_xor)


def invert(x, /):
    x = _value1(x)
    if _kind(x) == "f":
        raise FgradTypeError(f"invert is not defined for floating-point operands ({x.dtype})")
    return lax.bitwise_not(x)


bitwise_not = bitwise_invert = invert


def _shift_operands(name, x1, x2):
    x1, x2 = promote(x1, x2)
    if _kind(x1) not in "iu":
        raise FgradTypeError(f"{name} requires integer operands, got {x1.dtype}")
    return x1, x2


def left_shift(x1, x2, /):
    return lax.shift_left(*_shift_operands("left_shift", x1, x2))


def right_shift(x1, x2, /):
    x1, x2 = _shift_operands("right_shift", x1, x2)
    if _kind(x1) == "u":
        return lax.shift_right_logical(x1, x2)
    return lax.shift_right_arithmetic(x1, x2)


bitwise_left_shift, bitwise_right_shift = left_shift, right_shift


def bitwise_count(x, /):
    """The number of 1 bits in |x|, as uint8 (numpy.bitwise_count: a negative
    integer counts the bits of its absolute value)."""
    x = _value1(x)
    if _kind(x) == "f":
        raise FgradTypeError(f"bitwise_count is not defined for floating-point operands "
                             f"({x.dtype})")
    if _kind(x) == "b":
        x = lax.convert_element_type(x, dtypes.uint8)
    elif _kind(x) == "i":
        x = lax.abs(x)
    out = lax.population_count(x)
    return lax.convert_element_type(out, dtypes.uint8)


# ----------------------------------------------------------------------------
# Selection and conversion

def where(condition, x=None, y=None, /):
    """x where condition else y (broadcast together); with only `condition`, the
    indices of its nonzero elements (concrete values only), as numpy.where."""
    if x is None and y is None:
        from .indexing import nonzero
        return nonzero(condition)
    if x is None or y is None:
        raise ValueError("where: either both or neither of x and y must be given")
    cond = _to_bool(condition)
    x, y = promote(x, y)
    return lax.select_n(cond, y, x)


def astype(x, dtype, /, *, copy=True):
    """x converted to `dtype` (a strongly typed result; a complex array becomes
    real through its real part, with NumPy's ComplexWarning)."""
    x = _value1(x)
    dtype = dtypes.canonicalize(dtype)
    if x.dtype == dtype and not is_weak(x):
        return x
    if dtype.kind == "b" and _kind(x) != "b":
        return lax.ne(x, _c(x, 0))
    if _kind(x) == "c" and dtype.kind != "c":
        import warnings
        warnings.warn("Casting complex values to real discards the imaginary part",
                      np.exceptions.ComplexWarning, stacklevel=2)
    return lax.convert_element_type(x, dtype)


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    x = _value1(x)
    if _kind(x) == "c":
        return _on_parts(lambda part: nan_to_num(part, copy, nan, posinf, neginf), x)
    if _kind(x) != "f":
        return x
    info = np.finfo(x.dtype)
    posinf = info.max if posinf is None else posinf
    neginf = info.min if neginf is None else neginf
    out = lax.select_n(lax.ne(x, x), x, _c(x, nan))
    out = lax.select_n(lax.eq(out, _c(x, np.inf)), out, _c(x, posinf))
    return lax.select_n(lax.eq(out, _c(x, -np.inf)), out, _c(x, neginf))



# ----------------------------------------------------------------------------
# Complex arrays: the forms NumPy's functions take on them (parts, conjugate and
# predicates are in complex_math.py)

def _times_i(z):
    """i z, exactly (the parts swap, one changes sign)."""
    return lax.complex(lax.neg(lax.imag(z)), lax.real(z))


def _times_minus_i(z):
    """-i z, exactly."""
    return lax.complex(lax.imag(z), lax.neg(lax.real(z)))


def _complex_sinh(z):
    """sinh z = -i sin(iz)."""
    return _times_minus_i(lax.sin(_times_i(z)))


def _complex_cosh(z):
    """cosh z = cos(iz)."""
    return lax.cos(_times_i(z))


def _any_part(pred, z):
    """pred(re) | pred(im): NaN or infinite where either part is."""
    return lax.bitwise_or(pred(lax.real(z)), pred(lax.imag(z)))


def _both_parts(pred, z):
    """pred(re) & pred(im): finite where both parts are."""
    return lax.bitwise_and(pred(lax.real(z)), pred(lax.imag(z)))


def _on_parts(fn, z):
    """fn applied to the real and imaginary parts separately (round, nan_to_num)."""
    return lax.complex(fn(lax.real(z)), fn(lax.imag(z)))


# ----------------------------------------------------------------------------
# Shape errors name the fgrad.numpy function (not the lax primitive it binds)

def _named_shape_errors(fn):
    name = fn.__name__

    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except FgradTypeError:
            shapes = [tuple(np.shape(a)) if not isinstance(a, _ARRAYS) else tuple(a.shape)
                      for a in args if a is not None]
            try:
                broadcast_shape(*shapes)
            except ValueError:
                from .util import shape_str
                raise FgradTypeError(
                    f"{name}: incompatible shapes for broadcasting: "
                    + ", ".join(shape_str(asarray(a)) if not isinstance(a, _ARRAYS)
                                else shape_str(a) for a in args if a is not None),
                    hint="shapes broadcast when, aligned from the right, each pair of sizes "
                         "is equal or one of them is 1; reshape or expand_dims an operand "
                         "to fit") from None
            raise
    wrapper.__name__ = wrapper.__qualname__ = name
    wrapper.__doc__ = fn.__doc__
    wrapper.__wrapped__ = fn
    return wrapper


for _name in ("add", "subtract", "multiply", "true_divide", "floor_divide", "remainder",
              "fmod", "power", "float_power", "maximum", "minimum", "fmax", "fmin", "arctan2",
              "hypot", "logaddexp", "logaddexp2", "copysign", "heaviside", "equal",
              "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and",
              "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor",
              "left_shift", "right_shift", "where", "isclose", "divmod"):
    globals()[_name] = _named_shape_errors(globals()[_name])
divide = true_divide
mod = remainder

# Array operators on float operands bind these directly (core.OPERATOR_PRIMITIVES):
# on such operands each function above only promotes a Python number and binds.
core.OPERATOR_PRIMITIVES.update(add=lax.add_p, subtract=lax.sub_p, multiply=lax.mul_p,
                                true_divide=lax.div_p)
bitwise_left_shift, bitwise_right_shift = left_shift, right_shift
del _name
