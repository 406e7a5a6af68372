"""Element-wise primitives: arithmetic, math functions, comparisons, select,
dtype conversion and integer/bitwise ops.

Operands of one primitive share a dtype (fgrad.numpy promotes first) and
broadcast like NumPy; a transpose rule sums a cotangent back down to its
operand's shape. Each primitive sits here with all of its rules.
"""
import math
import operator

import numpy as np

from .. import dtypes
from ..ad import TAPE_JOINT, TAPE_LINEAR, defjvp, defjvp_zero, deftape, is_undefined
from ..batching import defbroadcasting, defvectorized
from ..core import (Array, Primitive, ShapedArray, eager_float_pair, get_aval,
                    is_weak, lean_unary)
from ..errors import FgradTypeError
from .quiet import quiet as _quiet
from ._util import (broadcast_shapes, lift_scalars, nary_rule, reject_complex, shapes_str,
                    unbroadcast)

_PY_SCALARS = (bool, int, float, complex)

FLOAT = "f"
INEXACT = "fc"     # floating-point or complex
NUM = "fiu"        # ordered numbers (max, min, rem)
FIELD = "fiuc"     # arithmetic: every number type
SIGNED = "fi"
INT = "iu"
INT_BOOL = "iub"
ANY = "fiub"       # ordered: the comparisons lt, le, gt, ge
ANY_C = "fiubc"    # equality


def _prim(name, impl, kinds, out_dtype=None, quiet=False, refuse_complex=False):
    """An element-wise primitive: NumPy impl, broadcasting shape and batching rules.
    refuse_complex: its NumPy function would accept complex operands (ordering them
    lexicographically, say), so the eager impl refuses them (NumPy raises by
    itself for the other real-only functions)."""
    p = Primitive(name)
    p.impl = _quiet(impl) if quiet else impl
    if refuse_complex:
        p.impl = reject_complex(p.impl)
    p.abstract_eval = nary_rule(name, kinds, out_dtype)
    p.elementwise = True
    defbroadcasting(p)
    return p


def _unary_op(p):
    op = lean_unary(p, p.bind)
    op.__name__ = p.name
    op.__module__ = __name__
    return op


def _binary_op(p):
    lean = "f" in getattr(p.abstract_eval, "kinds", "f")    # (else EvalTrace refuses floats)

    def op(x, y):
        if lean and type(x) is Array and type(y) is Array:
            out = eager_float_pair(p, x, y)      # the lean path, where it applies
            if out is not None:
                return out
        if type(x) in _PY_SCALARS or type(y) in _PY_SCALARS:
            x, y = lift_scalars((x, y))
        if x.dtype != y.dtype:
            x, y = _match_weak_dtype(p, x, y)
        return p.bind(x, y)
    op.__name__ = p.name
    return op


def _match_weak_dtype(p, x, y):
    """A weakly typed operand takes the other's dtype, as a Python scalar would;
    otherwise mixed dtypes are an error (raised now: eager NumPy would promote)."""
    if is_weak(y) and not is_weak(x):
        return x, convert_element_type(y, x.dtype)
    if is_weak(x) and not is_weak(y):
        return convert_element_type(x, y.dtype), y
    p.abstract_eval(get_aval(x), get_aval(y))
    return x, y


def _arith(fn, op):
    """The impl of add, sub or mul: the ufunc `fn`, but on real floats Python's
    operator `op` (the same IEEE operation; on NumPy scalars it skips the ufunc
    machinery, about ten times cheaper). Integers wrap around silently (as in C and
    XLA)."""
    def impl(x, y):
        kind = x.dtype.kind
        if kind == "f":
            return op(x, y)
        if kind in "iu":
            with np.errstate(over="ignore"):
                return fn(x, y)
        return fn(x, y)
    return impl


# ----------------------------------------------------------------------------
# Arithmetic

neg_p = _prim("neg", np.negative, SIGNED + "c")
neg = _unary_op(neg_p)
defjvp(neg_p, lambda g, ans, x: neg(g))
deftape(neg_p, lambda g, ans, x: -g)
neg_p.transpose = lambda ct, x: [neg(ct)]

add_p = _prim("add", _arith(np.add, operator.add), FIELD)
add_p.float_impl = operator.add
add = _binary_op(add_p)
defjvp(add_p, lambda g, ans, x, y: g, lambda g, ans, x, y: g)
deftape(add_p, lambda g, ans, x, y: g, lambda g, ans, x, y: g)


def _add_transpose(ct, x, y):
    return [unbroadcast(ct, x.aval) if is_undefined(x) else None,
            unbroadcast(ct, y.aval) if is_undefined(y) else None]


add_p.transpose = _add_transpose

sub_p = _prim("sub", _arith(np.subtract, operator.sub), FIELD)
sub_p.float_impl = operator.sub
sub = _binary_op(sub_p)
defjvp(sub_p, lambda g, ans, x, y: g, lambda g, ans, x, y: neg(g))
deftape(sub_p, lambda g, ans, x, y: g, lambda g, ans, x, y: -g)


def _sub_transpose(ct, x, y):
    return [unbroadcast(ct, x.aval) if is_undefined(x) else None,
            unbroadcast(neg(ct), y.aval) if is_undefined(y) else None]


sub_p.transpose = _sub_transpose

mul_p = _prim("mul", _arith(np.multiply, operator.mul), FIELD)
mul_p.float_impl = operator.mul
mul = _binary_op(mul_p)
defjvp(mul_p, lambda g, ans, x, y: mul(g, y), lambda g, ans, x, y: mul(x, g))
deftape(mul_p, lambda g, ans, x, y: g * y, lambda g, ans, x, y: x * g)


def _mul_transpose(ct, x, y):
    if is_undefined(x) and is_undefined(y):
        raise TypeError("mul of two linear values is not linear and cannot be transposed")
    if is_undefined(x):
        return [unbroadcast(mul(ct, y), x.aval), None]
    return [None, unbroadcast(mul(x, ct), y.aval)]


mul_p.transpose = _mul_transpose


def _div_impl(x, y):
    if x.dtype.kind in "iu":  # C semantics: round toward zero
        q = np.floor_divide(x, y)
        fix = (np.remainder(x, y) != 0) & ((x < 0) != (y < 0))
        return (q + fix).astype(x.dtype)
    return np.true_divide(x, y)


div_p = _prim("div", _div_impl, FIELD, quiet=True)
div = _binary_op(div_p)
defjvp(div_p, lambda g, ans, x, y: div(g, y),
       lambda g, ans, x, y: mul(neg(g), div(ans, y)))
deftape(div_p, lambda g, ans, x, y: div_p.impl(g, y),
        lambda g, ans, x, y: -g * div_p.impl(ans, y))


def _div_transpose(ct, x, y):
    if is_undefined(y):
        raise TypeError("div is not linear in its divisor and cannot be transposed")
    return [unbroadcast(div(ct, y), x.aval), None]


div_p.transpose = _div_transpose

rem_p = _prim("rem", np.fmod, NUM, quiet=True)
rem = _binary_op(rem_p)
defjvp(rem_p, lambda g, ans, x, y: g,
       lambda g, ans, x, y: mul(neg(g), mul(sign(div(x, y)), floor(abs(div(x, y))))))


def _balanced_eq(x, z, y):
    """1 where x alone attains the extremum z, 0.5 on a tie with y, else 0."""
    one = select_n(eq(y, z), _full_like(z, 1.0), _full_like(z, 0.5))
    return select_n(eq(x, z), _full_like(z, 0.0), one)


def _real_part_rule(name, kinds):
    """Shape rule of a unary op whose result is real: a complex operand gives its
    parts' dtype (abs, real, imag)."""
    rule = nary_rule(name, kinds)

    def real_rule(x):
        out = rule(x)
        if out.dtype.kind == "c":
            return ShapedArray(out.shape, dtypes.real_dtype(out.dtype), out.weak_type)
        return out
    real_rule.kinds = kinds
    return real_rule


def _full_like(x, value):
    return Array(np.asarray(value, x.dtype), True)


def zeros_with_sign(x, positive):
    """Where x is +0 (positive) or -0 (not positive)."""
    return (x == 0) & (np.signbit(x) != positive)


def signed_zero(dtype, pick_max, seen):
    """The zero a maximum (pick_max) or minimum over several values ends on with
    IEEE 754-2019's -0 < +0 (reductions, scans and scatters: compiled code takes
    LLVM's maximum / minimum): a maximum is +0 where a +0 took part (`seen`), else
    -0; a minimum is -0 where a -0 took part, else +0."""
    plus, minus = dtype.type(0.0), dtype.type(-0.0)
    return np.where(seen, plus, minus) if pick_max else np.where(seen, minus, plus)


max_p = _prim("max", np.maximum, NUM, refuse_complex=True)
max = _binary_op(max_p)
defjvp(max_p, lambda g, ans, x, y: mul(g, _balanced_eq(x, ans, y)),
       lambda g, ans, x, y: mul(g, _balanced_eq(y, ans, x)))

min_p = _prim("min", np.minimum, NUM, refuse_complex=True)
min = _binary_op(min_p)
defjvp(min_p, lambda g, ans, x, y: mul(g, _balanced_eq(x, ans, y)),
       lambda g, ans, x, y: mul(g, _balanced_eq(y, ans, x)))


def _replace_zero(x):
    return select_n(eq(x, _full_like(x, 0)), x, _full_like(x, 1))


def _pow_dx(g, ans, x, y):
    """g y x^(y-1); at x = y = 0 (where it is 0 · inf) the exponent is replaced by 1,
    so d/dx x^0 is 0 there too, as everywhere else."""
    zero = _full_like(x, 0)
    both_zero = bitwise_and(eq(x, zero), eq(y, zero))
    return mul(g, mul(y, pow(x, select_n(both_zero, sub(y, _full_like(y, 1)),
                                         _full_like(y, 1)))))


def _pow_impl(x, y):
    """np.power with C99's pow at x = -0 and -inf: NumPy's loop computes x ** 0.5
    as sqrt(x) when the exponent is one broadcast value (giving -0 and NaN there,
    where pow and compiled code give +0 and +inf)."""
    out = np.power(x, y)
    if x.dtype.kind != "f":
        return out
    sqrt_specials = (y == 0.5) & ((x == 0) | (x == -np.inf))
    if np.any(sqrt_specials):
        out = np.where(sqrt_specials, np.where(x == 0, x.dtype.type(0), x.dtype.type(np.inf)),
                       out)
    return out


pow_p = _prim("pow", _pow_impl, INEXACT, quiet=True)
pow = _binary_op(pow_p)
defjvp(pow_p, _pow_dx, lambda g, ans, x, y: mul(g, mul(log(_replace_zero(x)), ans)))


# Float powers up to this magnitude are repeated squarings (as XLA computes them),
# beyond it pow; the backends emit the same multiplications (cpu/fused.py, gpu/cuda_c.py).
MAX_UNROLLED_POW = 64


def _integer_pow_impl(x, y):
    if y < 0 and x.dtype.kind in "iu":
        raise ValueError("integer_pow of an integer array to a negative power")
    if x.dtype.kind not in "fc":
        return np.power(x, y, dtype=x.dtype)
    if abs(y) > MAX_UNROLLED_POW:
        return np.power(x, x.dtype.type(y))
    return _repeated_squaring(x, y)


def _repeated_squaring(x, y):
    """x ** y by squaring, in the order compiled code multiplies (so the bits agree):
    negative powers take the reciprocal first (x ** -n underflows only where the
    result does); float16 is computed in float32 and rounded once, as compiled
    code holds float16 values in float registers."""
    wide = x.astype(np.float32) if x.dtype == dtypes.float16 else np.asarray(x)
    base = np.divide(wide.dtype.type(1), wide) if y < 0 else wide
    acc, n = None, abs(y)
    while n:
        if n & 1:
            acc = base if acc is None else np.multiply(acc, base)
        n >>= 1
        if n:
            base = np.multiply(base, base)
    if acc is None:
        acc = np.ones_like(wide)
    return np.asarray(acc).astype(x.dtype)


integer_pow_p = Primitive("integer_pow")
integer_pow_p.impl = _quiet(_integer_pow_impl, keywords=True)
integer_pow_p.abstract_eval = nary_rule("integer_pow", FIELD)
defvectorized(integer_pow_p)
integer_pow_p.elementwise = True


def integer_pow(x, y):
    return integer_pow_p.bind(x, y=int(y))


def _integer_pow_jvp(g, ans, x, *, y):
    if y == 0:
        return mul(g, _full_like(x, 0))
    return mul(g, mul(_full_like(x, y), integer_pow(x, y - 1)))


defjvp(integer_pow_p, _integer_pow_jvp)

abs_p = _prim("abs", np.abs, SIGNED + "c")
abs_p.abstract_eval = _real_part_rule("abs", SIGNED + "c")
abs = _unary_op(abs_p)


def _abs_jvp(g, ans, x):
    """sign(x) g; for complex x, Re(conj(x) g) / |x| (0 at x = 0, as for reals)."""
    if x.dtype.kind != "c":
        return mul(g, sign(x))
    return div(real(mul(conj(x), g)), _replace_zero(ans))


defjvp(abs_p, _abs_jvp)

sign_p = _prim("sign", np.sign, FIELD)
sign = _unary_op(sign_p)


def _sign_jvp(g, ans, x):
    """0 for real x. A complex sign s = x/|x| turns with x: ds = (g - s Re(conj(s) g))/|x|
    (NaN at x = 0, where the direction is undefined)."""
    if x.dtype.kind != "c":
        return mul(g, _full_like(ans, 0))
    radial = mul(ans, convert_element_type(real(mul(conj(ans), g)), ans.dtype))
    return div(sub(g, radial), convert_element_type(abs(x), ans.dtype))


defjvp(sign_p, _sign_jvp)

floor_p = _prim("floor", np.floor, FLOAT)
floor = _unary_op(floor_p)
defjvp_zero(floor_p)

ceil_p = _prim("ceil", np.ceil, FLOAT)
ceil = _unary_op(ceil_p)
defjvp_zero(ceil_p)


def _round_impl(x, *, rounding_method):
    if rounding_method == "to_nearest_even":
        return np.round(x)
    # Not floor(|x| + 0.5): that sum rounds up for the float just below 0.5 and for
    # odd integers of magnitude 2**mantissa_bits. x - trunc(x) is exact.
    t = np.trunc(x)
    return np.where(np.abs(x - t) >= 0.5, t + np.copysign(x.dtype.type(1), x), t)


round_p = Primitive("round")
def _round_real_only(x, *, rounding_method):
    if x.dtype.kind == "c":   # np.round would round the parts; the shape rule explains
        raise TypeError("complex operand")
    return _round_impl(x, rounding_method=rounding_method)


round_p.impl = _round_real_only
round_p.abstract_eval = nary_rule("round", FLOAT)
defvectorized(round_p)
round_p.elementwise = True
defjvp_zero(round_p)


def round(x, rounding_method="away_from_zero"):
    """Round to integral values; ties away from zero or to the nearest even value."""
    if rounding_method not in ("away_from_zero", "to_nearest_even"):
        raise ValueError(f"round: unknown rounding_method {rounding_method!r}")
    return round_p.bind(x, rounding_method=rounding_method)


# ----------------------------------------------------------------------------
# Transcendental functions

exp_p = _prim("exp", np.exp, INEXACT, quiet=True)
exp = _unary_op(exp_p)
defjvp(exp_p, lambda g, ans, x: mul(g, ans))
deftape(exp_p, lambda g, ans, x: g * ans)

log_p = _prim("log", np.log, INEXACT, quiet=True)
log = _unary_op(log_p)
defjvp(log_p, lambda g, ans, x: div(g, x))
deftape(log_p, lambda g, ans, x: div_p.impl(g, x))

log1p_p = _prim("log1p", np.log1p, INEXACT, quiet=True)
log1p = _unary_op(log1p_p)
defjvp(log1p_p, lambda g, ans, x: div(g, add(x, _full_like(x, 1))))

expm1_p = _prim("expm1", np.expm1, INEXACT, quiet=True)
expm1 = _unary_op(expm1_p)
defjvp(expm1_p, lambda g, ans, x: mul(g, add(ans, _full_like(ans, 1))))

sin_p = _prim("sin", np.sin, INEXACT, quiet=True)
sin = _unary_op(sin_p)
defjvp(sin_p, lambda g, ans, x: mul(g, cos(x)))
deftape(sin_p, lambda g, ans, x: g * cos_p.impl(x))

cos_p = _prim("cos", np.cos, INEXACT, quiet=True)
cos = _unary_op(cos_p)
defjvp(cos_p, lambda g, ans, x: neg(mul(g, sin(x))))
deftape(cos_p, lambda g, ans, x: -(g * sin_p.impl(x)))

tan_p = _prim("tan", np.tan, INEXACT, quiet=True)
tan = _unary_op(tan_p)
defjvp(tan_p, lambda g, ans, x: mul(g, add(_full_like(ans, 1), mul(ans, ans))))

tanh_p = _prim("tanh", np.tanh, INEXACT, quiet=True)
tanh = _unary_op(tanh_p)
defjvp(tanh_p, lambda g, ans, x: mul(g, sub(_full_like(ans, 1), mul(ans, ans))))
deftape(tanh_p, lambda g, ans, x: g * (np.asarray(1, ans.dtype) - ans * ans))

atan2_p = _prim("atan2", np.arctan2, FLOAT)
atan2 = _binary_op(atan2_p)
defjvp(atan2_p,
       lambda g, ans, x, y: mul(g, div(y, add(mul(x, x), mul(y, y)))),
       lambda g, ans, x, y: mul(g, div(neg(x), add(mul(x, x), mul(y, y)))))

sqrt_p = _prim("sqrt", np.sqrt, INEXACT, quiet=True)
sqrt = _unary_op(sqrt_p)
defjvp(sqrt_p, lambda g, ans, x: div(g, mul(ans, _full_like(ans, 2))))
deftape(sqrt_p, lambda g, ans, x: div_p.impl(g, ans * np.asarray(2, ans.dtype)))

rsqrt_p = _prim("rsqrt", lambda x: np.reciprocal(np.sqrt(x)), INEXACT, quiet=True)
rsqrt = _unary_op(rsqrt_p)
defjvp(rsqrt_p, lambda g, ans, x: mul(g, mul(_full_like(x, -0.5), div(ans, x))))


def _logistic_impl(x):
    # Stable for large |x|: never exponentiates a large positive number.
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype)


logistic_p = _prim("logistic", _logistic_impl, FLOAT, quiet=True, refuse_complex=True)
logistic = _unary_op(logistic_p)
defjvp(logistic_p, lambda g, ans, x: mul(g, mul(ans, sub(_full_like(ans, 1), ans))))


def _scipy_special():
    import scipy.special
    return scipy.special


erf_p = _prim("erf", lambda x: _scipy_special().erf(x).astype(x.dtype), FLOAT,
               refuse_complex=True)
erf = _unary_op(erf_p)
defjvp(erf_p, lambda g, ans, x: mul(g, mul(_full_like(x, 2 / math.sqrt(math.pi)),
                                          exp(neg(mul(x, x))))))

erf_inv_p = _prim("erf_inv", lambda x: _scipy_special().erfinv(x).astype(x.dtype), FLOAT,
                   refuse_complex=True)
erf_inv = _unary_op(erf_inv_p)
defjvp(erf_inv_p, lambda g, ans, x: mul(g, mul(_full_like(x, math.sqrt(math.pi) / 2),
                                              exp(mul(ans, ans)))))


# Inverse trigonometric and hyperbolic functions: NumPy's, with their principal
# branches, for complex numbers (fgrad.numpy's arcsin, ... of real arrays are
# compositions of atan2, log1p and sqrt, which compile natively; these run as
# NumPy steps under jit for real operands).

def _inverse_function(name, np_fn, derivative):
    p = _prim(name, np_fn, INEXACT, quiet=True)
    defjvp(p, lambda g, ans, x: mul(g, derivative(x)))
    return p, _unary_op(p)


def _one_minus_square(x):
    return sub(_full_like(x, 1), mul(x, x))


asin_p, asin = _inverse_function("asin", np.arcsin, lambda x: rsqrt(_one_minus_square(x)))
acos_p, acos = _inverse_function("acos", np.arccos,
                                 lambda x: neg(rsqrt(_one_minus_square(x))))
atan_p, atan = _inverse_function(
    "atan", np.arctan, lambda x: div(_full_like(x, 1), add(_full_like(x, 1), mul(x, x))))
asinh_p, asinh = _inverse_function(
    "asinh", np.arcsinh, lambda x: rsqrt(add(mul(x, x), _full_like(x, 1))))
acosh_p, acosh = _inverse_function(   # 1 / (sqrt(x - 1) sqrt(x + 1)): the principal branch
    "acosh", np.arccosh, lambda x: div(_full_like(x, 1), mul(sqrt(sub(x, _full_like(x, 1))),
                                                             sqrt(add(x, _full_like(x, 1))))))
atanh_p, atanh = _inverse_function(
    "atanh", np.arctanh, lambda x: div(_full_like(x, 1), _one_minus_square(x)))


# ----------------------------------------------------------------------------
# Comparisons and predicates (no derivative)

def _comparison(name, fn, kinds=ANY):
    p = _prim(name, fn, kinds, out_dtype=dtypes.bool_, refuse_complex="c" not in kinds)
    defjvp_zero(p)
    return p, _binary_op(p)


eq_p, eq = _comparison("eq", np.equal, ANY_C)
ne_p, ne = _comparison("ne", np.not_equal, ANY_C)
lt_p, lt = _comparison("lt", np.less)
le_p, le = _comparison("le", np.less_equal)
gt_p, gt = _comparison("gt", np.greater)
ge_p, ge = _comparison("ge", np.greater_equal)

is_finite_p = _prim("is_finite", np.isfinite, FLOAT, out_dtype=dtypes.bool_,
                    refuse_complex=True)
is_finite = _unary_op(is_finite_p)
defjvp_zero(is_finite_p)


# ----------------------------------------------------------------------------
# select_n: pick among cases by a boolean or integer selector

def _select_n_impl(which, *cases):
    if len(cases) == 1:
        return np.broadcast_to(cases[0], np.broadcast_shapes(which.shape, cases[0].shape))
    if which.dtype == np.bool_:
        return np.where(which, cases[1], cases[0])
    return np.choose(which, np.broadcast_arrays(*cases))


def _select_n_abstract_eval(which, *cases):
    if which.dtype.kind not in "biu":
        raise FgradTypeError(f"select_n: the selector must be boolean or integer, got "
                             f"{which.str_short()}")
    if which.dtype.kind == "b" and len(cases) > 2:
        raise FgradTypeError(f"select_n: a boolean selector picks between 2 cases, got "
                             f"{len(cases)}")
    from ._util import same_dtypes
    dtype = same_dtypes("select_n", cases)
    shape = broadcast_shapes("select_n", (which,) + cases)
    return ShapedArray(shape, dtype, all(c.weak_type for c in cases))


select_n_p = Primitive("select_n", weak_args=range(1, 1 << 30))  # the cases
select_n_p.impl = _select_n_impl
select_n_p.abstract_eval = _select_n_abstract_eval
defbroadcasting(select_n_p)
select_n_p.elementwise = True


def select_n(which, *cases):
    """cases[which] element-wise (for a boolean `which`: False -> cases[0])."""
    return select_n_p.bind(which, *lift_scalars(cases))


def _select_n_jvp(primals, tangents):
    which, *cases = primals
    ans = select_n_p.bind(which, *cases)
    if all(t is None for t in tangents[1:]):
        return ans, None
    ts = [t if t is not None else _zeros_of(c) for t, c in zip(tangents[1:], cases)]
    return ans, select_n_p.bind(which, *ts)


def _zeros_of(x):
    return Array(np.zeros(x.shape, x.dtype), False)


def _select_n_transpose(ct, which, *cases):
    # one 0-d zero (a literal under jit), not a constant array of ct's size to read
    zeros = Array(np.zeros((), ct.dtype), False)
    out = [None]
    for i, c in enumerate(cases):
        if is_undefined(c):
            picks = [zeros] * len(cases)
            picks[i] = ct
            out.append(unbroadcast(select_n_p.bind(which, *picks), c.aval))
        else:
            out.append(None)
    return out


select_n_p.jvp = _select_n_jvp
select_n_p.transpose = _select_n_transpose
select_n_p.tape = TAPE_JOINT


# ----------------------------------------------------------------------------
# Dtype conversion

def _convert_abstract_eval(x, *, new_dtype, weak_type):
    return ShapedArray(x.shape, new_dtype, weak_type)


def _convert_impl(x, *, new_dtype, weak_type):
    x = np.asarray(x)
    if x.dtype.kind == "c" and new_dtype.kind != "c":
        if new_dtype.kind == "b":
            return x != 0   # either part nonzero
        x = x.real  # a complex value becomes real (or an integer) through its real part
    if x.dtype.kind == "f" and new_dtype == dtypes.uint32:
        # Through int64, as compiled code converts: NumPy's own float -> uint32 of NaN
        # or of values outside [-2**31, 2**32) differs between its small-array and
        # SIMD loops (0 for 3 elements, 2**31 for 8).
        return x.astype(dtypes.int64).astype(new_dtype)
    return x.astype(new_dtype)


convert_element_type_p = Primitive("convert_element_type")
convert_element_type_p.impl = _quiet(_convert_impl, keywords=True)
convert_element_type_p.abstract_eval = _convert_abstract_eval
defvectorized(convert_element_type_p)
convert_element_type_p.elementwise = True


def convert_element_type(x, new_dtype, weak_type=False):
    new_dtype = dtypes.canonicalize(new_dtype)
    return convert_element_type_p.bind(x, new_dtype=new_dtype, weak_type=bool(weak_type))


def _convert_jvp(primals, tangents, *, new_dtype, weak_type):
    (x,), (t,) = primals, tangents
    ans = convert_element_type_p.bind(x, new_dtype=new_dtype, weak_type=weak_type)
    if t is None or new_dtype.kind not in "fc":
        return ans, None
    return ans, convert_element_type_p.bind(t, new_dtype=new_dtype, weak_type=weak_type)


def _convert_transpose(ct, x, *, new_dtype, weak_type):
    return [convert_element_type_p.bind(ct, new_dtype=x.aval.dtype,
                                        weak_type=x.aval.weak_type)]


convert_element_type_p.jvp = _convert_jvp
convert_element_type_p.transpose = _convert_transpose
convert_element_type_p.tape = TAPE_LINEAR   # as deflinear (the tape drops integer results)


def _bitcast_abstract_eval(x, *, new_dtype):
    if x.dtype.itemsize != new_dtype.itemsize:
        raise FgradTypeError(f"bitcast_convert_type: {x.str_short()} and {new_dtype} differ "
                             f"in width ({x.dtype.itemsize} vs {new_dtype.itemsize} bytes)")
    return ShapedArray(x.shape, new_dtype, False)


bitcast_convert_type_p = Primitive("bitcast_convert_type")
def _bitcast_impl(x, *, new_dtype):
    if x.dtype.itemsize != new_dtype.itemsize:   # a view would change the shape
        raise TypeError("widths differ")           # the shape rule explains
    return np.asarray(x).view(new_dtype)


bitcast_convert_type_p.impl = _bitcast_impl
bitcast_convert_type_p.abstract_eval = _bitcast_abstract_eval
defvectorized(bitcast_convert_type_p)
bitcast_convert_type_p.elementwise = True
defjvp_zero(bitcast_convert_type_p)


def bitcast_convert_type(x, new_dtype):
    """Reinterpret the bits of x as another dtype of the same width."""
    return bitcast_convert_type_p.bind(x, new_dtype=dtypes.canonicalize(new_dtype))


# ----------------------------------------------------------------------------
# Complex numbers: parts, conjugate and construction
#
# Cotangents pair with tangents as Re(ct * t) (no conjugation), so every transpose
# rule here and in the arithmetic above is the plain transpose of a real-linear
# map: mul's is mul by the same factor; real's embeds a real cotangent as ct + 0i;
# imag's is -i ct; conj's is conj. With this pairing, the gradient of a real
# function f(x + iy) is df/dx - i df/dy (fgrad.grad's documented convention).

def _complex_operand(name, x):
    if x.dtype.kind != "c":
        raise FgradTypeError(f"{name} requires a complex operand, got {x.str_short()}",
                             hint="fgrad.numpy's real, imag and conj accept real arrays too")


def _complex_only(impl):
    """An eager impl that refuses real operands (the shape rule then says why)."""
    def checked(x):
        if x.dtype.kind != "c":
            raise TypeError("real operand")
        return impl(x)
    return checked


def _parts_rule(name):
    def rule(x):
        _complex_operand(name, x)
        return ShapedArray(x.shape, dtypes.real_dtype(x.dtype), x.weak_type)
    return rule


real_p = Primitive("real")
real_p.impl = _complex_only(lambda x: np.real(x).copy(order="C"))
real_p.abstract_eval = _parts_rule("real")
defvectorized(real_p)
real_p.elementwise = True


def real(x):
    """The real part of a complex array (a real array of its parts' dtype)."""
    return real_p.bind(x)


imag_p = Primitive("imag")
imag_p.impl = _complex_only(lambda x: np.imag(x).copy(order="C"))
imag_p.abstract_eval = _parts_rule("imag")
defvectorized(imag_p)
imag_p.elementwise = True


def imag(x):
    """The imaginary part of a complex array."""
    return imag_p.bind(x)


def _conj_rule(x):
    _complex_operand("conj", x)
    return x


conj_p = Primitive("conj")
conj_p.impl = _complex_only(np.conjugate)
conj_p.abstract_eval = _conj_rule
defvectorized(conj_p)
conj_p.elementwise = True


def conj(x):
    """The complex conjugate of a complex array."""
    return conj_p.bind(x)


def _complex_rule(x, y):
    out = nary_rule("complex", FLOAT)(x, y)
    if out.dtype not in (dtypes.float32, dtypes.float64):
        raise FgradTypeError(f"complex: the parts must be float32 or float64, got "
                             f"{shapes_str([x, y])}", hint="convert them with .astype(...)")
    return ShapedArray(out.shape, dtypes.complex_dtype(out.dtype), out.weak_type)


def _complex_impl(x, y):
    if x.dtype != y.dtype or x.dtype not in (dtypes.float32, dtypes.float64):
        raise TypeError("complex of unsupported parts")  # the shape rule explains
    out = np.empty(np.broadcast_shapes(x.shape, y.shape), dtypes.complex_dtype(x.dtype))
    out.real, out.imag = x, y
    return out


complex_p = Primitive("complex")
complex_p.impl = _complex_impl
complex_p.abstract_eval = _complex_rule
defbroadcasting(complex_p)
complex_p.elementwise = True
complex = _binary_op(complex_p)
complex.__doc__ = "x + iy from real parts x and y (float32 -> complex64, float64 -> complex128)."


def _zero_part(x):
    return Array(np.zeros((), dtypes.real_dtype(x.dtype)), True)


defjvp(real_p, lambda g, ans, x: real(g))
real_p.transpose = lambda ct, x: [complex(ct, _zero_part(x.aval))]
defjvp(imag_p, lambda g, ans, x: imag(g))
imag_p.transpose = lambda ct, x: [complex(_zero_part(x.aval), neg(ct))]
defjvp(conj_p, lambda g, ans, x: conj(g))
conj_p.transpose = lambda ct, x: [conj(ct)]
defjvp(complex_p, lambda g, ans, x, y: complex(g, _zero_part(ans)),
       lambda g, ans, x, y: complex(_zero_part(ans), g))


def _complex_transpose(ct, x, y):
    return [unbroadcast(real(ct), x.aval) if is_undefined(x) else None,
            unbroadcast(neg(imag(ct)), y.aval) if is_undefined(y) else None]


complex_p.transpose = _complex_transpose


# ----------------------------------------------------------------------------
# Integer and bitwise ops (for the PRNG and for fgrad.numpy's integer functions)

def _bitwise(name, fn, kinds=INT_BOOL):
    p = _prim(name, fn, kinds)
    defjvp_zero(p)
    return p


and_p = _bitwise("and", np.bitwise_and)
bitwise_and = _binary_op(and_p)
or_p = _bitwise("or", np.bitwise_or)
bitwise_or = _binary_op(or_p)
xor_p = _bitwise("xor", np.bitwise_xor)
bitwise_xor = _binary_op(xor_p)
not_p = _bitwise("not", np.invert)
bitwise_not = _unary_op(not_p)


def _unsigned(dtype):
    return np.dtype(f"uint{dtype.itemsize * 8}")


def _shift_left_impl(x, y):
    bits = x.dtype.itemsize * 8
    out = np.left_shift(x, np.where(y < bits, y, 0).astype(y.dtype))
    return np.where((y >= 0) & (y < bits), out, 0).astype(x.dtype)


def _shift_right_logical_impl(x, y):
    bits = x.dtype.itemsize * 8
    u = _unsigned(x.dtype)
    ux, uy = np.asarray(x).view(u), np.asarray(y).astype(u)
    out = np.right_shift(ux, np.where(uy < bits, uy, 0).astype(u))
    return np.where(uy < bits, out, 0).astype(u).view(x.dtype)


def _shift_right_arithmetic_impl(x, y):
    bits = x.dtype.itemsize * 8
    if x.dtype.kind == "u":
        signed = np.dtype(f"int{bits}")
        return _shift_right_arithmetic_impl(np.asarray(x).view(signed),
                                            np.asarray(y).astype(signed)).view(x.dtype)
    return np.right_shift(x, np.where((y < 0) | (y >= bits), bits - 1, y)).astype(x.dtype)


shift_left_p = _bitwise("shift_left", _shift_left_impl, INT)
shift_left = _binary_op(shift_left_p)
shift_right_logical_p = _bitwise("shift_right_logical", _shift_right_logical_impl, INT)
shift_right_logical = _binary_op(shift_right_logical_p)
shift_right_arithmetic_p = _bitwise("shift_right_arithmetic", _shift_right_arithmetic_impl, INT)
shift_right_arithmetic = _binary_op(shift_right_arithmetic_p)

population_count_p = _bitwise(
    "population_count",
    lambda x: np.bitwise_count(np.asarray(x).view(_unsigned(x.dtype))).astype(x.dtype)
    if hasattr(np, "bitwise_count")
    else np.vectorize(lambda v: bin(int(v) & (2 ** (8 * x.dtype.itemsize) - 1)).count("1"),
                      otypes=[x.dtype])(x), INT)
population_count = _unary_op(population_count_p)


# ----------------------------------------------------------------------------
# stop_gradient

stop_gradient_p = Primitive("stop_gradient")
stop_gradient_p.impl = lambda x: x
stop_gradient_p.abstract_eval = lambda x: x
defvectorized(stop_gradient_p)
stop_gradient_p.elementwise = True
defjvp_zero(stop_gradient_p)


def stop_gradient(x):
    """x with zero derivative."""
    return stop_gradient_p.bind(x)
