"""Vectorisable math functions emitted as LLVM IR (float32 and float64).

`emit(module, name, dtype)` declares ``fgrad_<name>_f32`` / ``_f64`` in an
llvmlite `ir.Module` on first use (and returns the existing function after)
and returns it: a function taking and returning scalars (`pow` and
`atan2(y, x)` take two).
Call it from a loop and the loop vectoriser does the rest, which it does not
for calls to libm (``sinf``) or the ``llvm.sin`` intrinsics on this LLVM.

* exp, log, log1p, expm1, tanh, erf, logistic, pow, atan2, erf_inv are
  ``internal`` + ``alwaysinline``: branch-free straight-line code (selects; no calls but the
  ``llvm.fmuladd``/``fma``/``fabs``/``copysign`` intrinsics) that the loop
  vectoriser vectorises once inlined.
* ... unless a module calls one of them at `CALL_AFTER_USES` or more sites:
  then it is called like sin and cos (`call_when_used_often`).
* sin, cos are ``internal`` + ``noinline`` scalar functions carrying the
  ``vector-function-abi-variant`` attribute, with explicit vector variants
  ``fgrad_sin_f64_v2/_v4/_v8`` (float32: ``_v4/_v8/_v16``; ``weak_odr`` so
  they survive until the vectoriser runs and modules can be linked).  A variant runs the vectorised fast
  path and, only when some lane is huge (or inf/NaN), a scalar Payne-Hanek
  reduction per lane in an out-of-line function; its table loads thus stay
  out of the caller's loop, where they would defeat the runtime alias
  checks, and cost nothing for ordinary arguments.  Callers get one call per
  vector of results.  With the host's FMA choice (the default) a module only
  declares them (`_declare_runtime`): their code is compiled once per process
  and dtype and shared (`mathlib_runtime`); with the other choice it is
  emitted inline.  (Inlining the variants into a loop after vectorisation runs
  a float32 sin loop 12% faster, but every program then compiles sin again:
  the shared code's first-call saving was judged worth more, except for long
  loops, which define and inline the variant of their width:
  `inline_trig_variants`.)
* exp's 2^n scaling is one `llvm.ldexp` on AVX-512 hosts (vscalef), two
  exact power-of-two factors elsewhere; both round once, so results agree.

Nothing uses fast-math flags, so results do not depend on the caller's flags
(callers must not set function-wide "unsafe-fp-math"-style attributes on
functions these get inlined into).  Methods:

* exp, expm1: Cody-Waite reduction x = n ln2 + r + c (ln2 in two parts, the
  first short enough that n*ln2_hi is exact; r = x - n*ln2_hi - n*ln2_lo
  rounded and c its rounding error; float32 on FMA hosts: 24-bit parts,
  x - n*ln2_hi exact in an FMA, n rounded inside one, and for exp r is that
  and c = -n*ln2_lo), a minimax polynomial for p = expm1(r) on |r| <= ln2/2
  and c fed back as p + c(1 + p); 2^n applied as two factors so subnormal
  results round once.
* log, log1p: exponent/mantissa split through bitcasts (subnormals prescaled),
  m in [sqrt(1/2), sqrt(2)), log(1+f) = f - f^2/2 + s(f^2/2 + R(s^2)),
  s = f/(2+f) (fdlibm's scheme with our own minimax R); log1p adds the
  rounding error of 1+x as a first-order correction.
* sin, cos: float64, |x| <= 2^20: three-stage Cody-Waite reduction by pi/2 (33-bit
  pieces, ~118 bits of pi/2) giving r as a double-double; larger |x|:
  Payne-Hanek with integer arithmetic on 32-bit limbs against a table of 2/pi
  bits (192 bits per binary exponent for float64, 128 for float32); then
  fdlibm-style kernels on (r_hi, r_lo).  float32, |x| < 2^20, in float32
  arithmetic (8 lanes per AVX2 vector): Cody-Waite with pi/2 in three
  24-bit pieces and FMA, r as a float pair (exact to ~2^-50 relative: the
  closest float32 to a multiple of pi/2 below 2^20 is 2^-27.8 from it),
  minimax kernels with the rounding error of 1 - r^2/2 fed back; hosts
  without FMA reduce and evaluate in double precision.  Payne-Hanek
  beyond 2^20 works in double precision for both types.
* tanh = t/(t+2) with t = expm1(2|x|); logistic = 1/(1+e^-x) or
  e^x/(1+e^x) by sign; erf: odd minimax polynomial on |x| < 1, piecewise
  minimax polynomials for erfc on [1, 6) (float32: [1, 4)), 1 beyond.
* pow: C99/NumPy special cases by selects; float64 computes log|x| as a
  double-double (~2^-66 relative), y*log|x| as a double-double and exp of it
  with the low part as a correction (exact products by FMA where the host has
  it, else Dekker's splitting); float32 works in double precision.
* atan2 (float32 via double): t = min(|x|,|y|) / max(|x|,|y|) in [0, 1],
  atan(t) = c + atan(u) with c in {0, atan(1/2), pi/4} and |u| <= 7/16
  (fdlibm's breakpoints 7/16, 11/16; 2t - 1 and t - 1 are exact), an odd
  polynomial for atan(u), then base +- atan(t) + base_lo with base in
  {0, pi/2, pi} by quadrant; C99 special cases (signed zeros, infinities) by
  selects.
* erf_inv (float32 via double): |x| <= 1/2: x P(x^2); else a polynomial in
  s = sqrt(-log(1 - |x|)) on five intervals of s (up to 6.06 for float64),
  with s formed as s_hi + s_lo from log(1 - |x|) as a double-double (its
  rounding error is otherwise amplified near |x| = 1/2). erf_inv(+-1) = +-inf,
  NaN beyond; -0.0 gives +0.0 as scipy's erfinv (the NumPy impl) does.

Polynomial coefficients are weighted minimax (Remez) fits made with mpmath at
60 digits and rounded to the target precision (atan2 and erf_inv: mpmath's
Chebyshev fits, near-minimax).  The pi-related constants and
the 2/pi table are computed here exactly with integer arithmetic.

Accuracy (tests/test_mathlib.py): at most 2 ulp for every function and dtype
over the whole range against NumPy/libm (float64) or the correctly rounded
float64 result (float32); erf_inv against mpmath (scipy's float64 erfinv is
itself up to 3 ulp off); ±0, ±inf and NaN give exactly NumPy's results.
"""
from __future__ import annotations

import functools
from decimal import Decimal, getcontext
from fractions import Fraction

from llvmlite import ir

from . import mathlib_runtime  # sin and cos: shared code, only declared in programs

__all__ = ["FUNCTIONS", "ARITY", "emit", "function_name"]

FUNCTIONS = ("exp", "log", "log1p", "expm1", "sin", "cos", "tanh", "erf",
             "logistic", "pow", "atan2", "erf_inv")
ARITY = {name: (2 if name in ("pow", "atan2") else 1) for name in FUNCTIONS}

_F32 = ir.FloatType()
_F64 = ir.DoubleType()
_I32 = ir.IntType(32)
_I64 = ir.IntType(64)

# Minimax coefficients (lowest degree first), as exact hex floats.  Fits
# (Remez exchange in mpmath, 60 digits; max error after rounding in brackets):
#   expq:  (e^r - 1 - r)/r^2 on |r| <= ln2/2               [2^-58.4 / 2^-27.8]
#   logP:  (2 atanh(s) - 2s)/s^3 in z = s^2, s <= 0.1716   [2^-51.5 / 2^-25.4]
#   logQ:  (2 atanh(s) - 2s - 2s^3/3)/s^5 in z = s^2       [2^-55.3]
#   sinS:  (sin r - r)/r^3 in z = r^2, |r| <= pi/4         [2^-56.6 / 2^-27.6]
#   cosC:  (cos r - 1 + z/2)/z^2, z = r^2                  [2^-58.6 / 2^-29.6]
#          (f32: three coefficients, a minimax (Lawson's iteration) of cos's
#          relative error on |r| <= 0.88, the reach of an n off by one,
#          rounded to float32 one at a time, the rest refitted: 2^-31.2, the
#          four of the plain fit 2^-29.8; one FMA fewer, cos r still within
#          1 ulp, slightly more results 1 ulp off: 0.85% -> 0.88% on a sample)
#   erfA:  erf(x)/x - 1 in z = x^2, |x| < 1                 [2^-55.7 / 2^-26.0]
#   erfBk: erfc(x) in t = x - mid on [1,2],[2,3],[3,4],[4,6] (f64)
#          and [1,2],[2,4] (f32), absolute          [<= 2^-58.3 / 2^-26.7]
# (f64 / f32 errors are absolute errors of the fitted function.)
_COEFFS = {
    "expq_f64": (
        '0x1.0000000000000p-1', '0x1.5555555555557p-3', '0x1.5555555555558p-5',
        '0x1.11111111100d8p-7', '0x1.6c16c16c151f7p-10', '0x1.a01a01abe9f2ep-13',
        '0x1.a01a01acfcd72p-16', '0x1.71de022b703fcp-19', '0x1.27e4ccc909da1p-22',
        '0x1.af4df63014592p-26', '0x1.1f8b549826b14p-29',
    ),
    "expq_f32": (
        '0x1.0000000000000p-1', '0x1.5555560000000p-3', '0x1.5554e80000000p-5',
        '0x1.1110ac0000000p-7', '0x1.6d43380000000p-10', '0x1.a17e1e0000000p-13',
    ),
    "logP_f64": (
        '0x1.5555555555558p-1', '0x1.99999999951bfp-2', '0x1.2492492e0f030p-2',
        '0x1.c71c62c21809fp-3', '0x1.7462be2caad05p-3', '0x1.39fd33f7c7c28p-3',
        '0x1.2b662bd638363p-3',
    ),
    "logP_f32": (
        '0x1.5555560000000p-1', '0x1.9999ec0000000p-2', '0x1.245bf20000000p-2',
        '0x1.ddde500000000p-3',
    ),
    "logQ_f64": (
        '0x1.999999999999ap-2', '0x1.2492492492491p-2', '0x1.c71c71c71cffbp-3',
        '0x1.745d17451101bp-3', '0x1.3b13b1bdbb125p-3', '0x1.1110df4d61e43p-3',
        '0x1.e1f81997e2158p-4', '0x1.ac47e76cc5d04p-4', '0x1.b8eb5934a4dd9p-4',
    ),
    "sinS_f64": (
        '-0x1.5555555555555p-3', '0x1.1111111111110p-7', '-0x1.a01a01a019938p-13',
        '0x1.71de3a546091ep-19', '-0x1.ae645412baa0bp-26', '0x1.61217f0053b44p-33',
        '-0x1.ab17cc211a6c3p-41',
    ),
    "cosC_f64": (
        '0x1.5555555555555p-5', '-0x1.6c16c16c16967p-10', '0x1.a01a019f4eb44p-16',
        '-0x1.27e4fa17db6c2p-22', '0x1.1eeb68e764238p-29', '-0x1.907da02fc4a17p-37',
    ),
    "sinS_f32": (
        '-0x1.5555560000000p-3', '0x1.11110e0000000p-7', '-0x1.a013a80000000p-13',
        '0x1.6dbe300000000p-19',
    ),
    "cosC_f32": (
        '0x1.55553e0000000p-5', '-0x1.6c05a60000000p-10', '0x1.983dfa0000000p-16',
    ),
    "erfA_f64": (
        '0x1.06eba8214db69p-3', '-0x1.812746b0379e6p-2', '0x1.ce2f21a042b34p-4',
        '-0x1.b82ce31284f28p-6', '0x1.565bcd0dbd695p-8', '-0x1.c02db3db41e0cp-11',
        '0x1.f9a321e3d38c5p-14', '-0x1.f4d1e423010f6p-17', '0x1.b9df2f72391b1p-20',
        '-0x1.5f1f38fd5cf4dp-23', '0x1.f7b945294eb72p-27', '-0x1.38ab0a72622e3p-30',
        '0x1.06245149ddf02p-34',
    ),
    "erfA_f32": (
        '0x1.06eba80000000p-3', '-0x1.81273e0000000p-2', '0x1.ce2d200000000p-4',
        '-0x1.b7fbb00000000p-6', '0x1.5419ce0000000p-8', '-0x1.a484b80000000p-11',
        '0x1.4ae14e0000000p-14',
    ),
    "erfB0_f64": (
        '0x1.15aaa8ec85205p-5', '-0x1.e723726b824aap-4', '0x1.6d5a95d0a1b7ep-3',
        '-0x1.1c2a02beb6a4ep-3', '0x1.6d5a95d0a1c03p-5', '0x1.e723726b65332p-7',
        '-0x1.3ca3d72c4af23p-6', '0x1.36d73a6926e20p-8', '0x1.35ae4e3bacf41p-9',
        '-0x1.c0380e34fbf56p-10', '0x1.85b5f122b25a6p-14', '0x1.0acf49947d262p-12',
        '-0x1.45dae45db4b62p-14', '-0x1.2d5cc51c6cd64p-16', '0x1.d8d733623d821p-17',
        '-0x1.31251989edb84p-21', '-0x1.9ad10d5a9a3d9p-20', '0x1.2d6b68f4ce9c4p-22',
        '0x1.b0774d8f2df26p-24',
    ),
    "erfB1_f64": (
        '0x1.aab859b20ac9ep-12', '-0x1.1d83170fbf6fep-9', '0x1.64e3dcd3af4b7p-8',
        '-0x1.119da0c46cc26p-7', '0x1.1a89b97cead40p-7', '-0x1.90e81283ff7bap-8',
        '0x1.6ecdbf67bf890p-9', '-0x1.1c610bc6c93f2p-11', '-0x1.11551debdda84p-12',
        '0x1.0671781f6435dp-12', '-0x1.4a8449ff09899p-14', '-0x1.58bb5fccb6ccbp-18',
        '0x1.d872d608c4a23p-17', '-0x1.3ad84b8904c1ep-18', '-0x1.861137b1380d2p-23',
        '0x1.597e187749a98p-21', '-0x1.7f075110bcf52p-23', '-0x1.872cc3356e6bfp-26',
        '0x1.7d936c5ae531fp-26',
    ),
    "erfB2_f64": (
        '0x1.8ef2a9a18d85bp-21', '-0x1.6a597219a93a2p-18', '0x1.3d0e43d674107p-16',
        '-0x1.62ccea63cb73ep-15', '0x1.1c07721ac8a3dp-14', '-0x1.586bafc9ab4bbp-14',
        '0x1.46153fb96af9cp-14', '-0x1.e827fafe303aep-15', '0x1.1f6304e3d72d7p-15',
        '-0x1.0135257d1f461p-16', '0x1.3774113add0eap-18', '-0x1.dd80729145917p-22',
        '-0x1.dc7e528021bd7p-22', '0x1.43f1cb5bbdae0p-22', '-0x1.8c9a43dc84a90p-24',
        '0x1.83253f8eadd18p-28', '0x1.1ec98c879c722p-27', '-0x1.08546df185060p-28',
        '0x1.30c9457f9413fp-31',
    ),
    "erfB3_f64": (
        '0x1.b0c1b8bc8ea1fp-40', '-0x1.13af2729895bap-36', '0x1.589af1bbe10c7p-34',
        '-0x1.196e3571487fep-32', '0x1.516df50b4e96ap-31', '-0x1.3c4f472829042p-30',
        '0x1.e2314bec8dc6ep-30', '-0x1.32d130531c46fp-29', '0x1.4bdb5661c8e44p-29',
        '-0x1.34db4b4f7f697p-29', '0x1.f3ba4a5fccee6p-30', '-0x1.624d34e354327p-30',
        '0x1.b7099017edea5p-31', '-0x1.d4f1e01d5ad9ap-32', '0x1.b6807d74be62bp-33',
        '-0x1.7893f95746a06p-34', '0x1.099f69a544056p-35', '-0x1.8914cfa25532fp-38',
        '-0x1.330b8217aa4f4p-45',
    ),
    "erfB0_f32": (
        '0x1.15aaa80000000p-5', '-0x1.e723720000000p-4', '0x1.6d5a960000000p-3',
        '-0x1.1c2a1e0000000p-3', '0x1.6d5aea0000000p-5', '0x1.e749960000000p-7',
        '-0x1.3cae000000000p-6', '0x1.34193c0000000p-8', '0x1.37edc80000000p-9',
        '-0x1.93d4720000000p-10', '0x1.28a3b60000000p-15',
    ),
    "erfB1_f32": (
        '0x1.72a4440000000p-16', '-0x1.23d2420000000p-13', '0x1.b5f4ee0000000p-12',
        '-0x1.9ecc060000000p-11', '0x1.12086a0000000p-10', '-0x1.0769d80000000p-10',
        '0x1.80f2be0000000p-11', '-0x1.b618ea0000000p-12', '0x1.29cac80000000p-13',
        '0x1.d8c2e60000000p-17', '-0x1.78eb8c0000000p-16',
    ),
    # atanP: 2^-63.6
    "atanP_f64": (
        '-0x1.5555555555555p-2', '0x1.999999999998fp-3', '-0x1.24924924918e8p-3',
        '0x1.c71c71c6740b1p-4', '-0x1.745d171e3eb9fp-4', '0x1.3b13abae16efbp-4',
        '-0x1.111090a2806b0p-4', '0x1.e1d23dd1aec1fp-5', '-0x1.ae802f8797bc7p-5',
        '0x1.812dbb32976abp-5', '-0x1.4ac2f13f00fb9p-5', '0x1.ddf4141252423p-6',
        '-0x1.9a239e5a9c793p-7',
    ),
    # erfinvC: 2^-69.6
    "erfinvC_f64": (
        '0x1.c5bf891b4ef6bp-1', '0x1.db29fb2fee5e4p-3', '0x1.053c2c0ab91e1p-3',
        '0x1.62847c47db921p-4', '0x1.0a13189d13ce2p-4', '0x1.a7c85c4bb4814p-5',
        '0x1.5eeb24f5a81bep-5', '0x1.2ab9f028c982dp-5', '0x1.03a306c075187p-5',
        '0x1.c980554d83d03p-6', '0x1.a1ed61ec91bfdp-6', '0x1.4013c4af02961p-6',
        '0x1.1df2a40058af0p-5', '-0x1.daa08282ebc92p-6', '0x1.067118a8feb9cp-3',
        '-0x1.2ab08112a4ba1p-3', '0x1.190d76e8757e7p-3',
    ),
    # erfinvT0a: 2^-85.7, mid 0x1.d5224c8b0e6a4p-1
    "erfinvT0a_f64": (
        '0x1.1c8b073aa115ep-1', '0x1.e916e3441ddf8p-1', '0x1.3995282447fe4p-3',
        '-0x1.2cee401097e11p-3', '0x1.8acae0e269bb5p-4', '-0x1.5699a5e548c30p-5',
        '0x1.a7389219a9a97p-9', '0x1.e2cf1ba08c0dbp-7', '-0x1.107ce6386bdbdp-6',
        '0x1.51c9e36d97164p-7', '-0x1.599868caa3e65p-9', '-0x1.42f873b1a50e2p-9',
        '0x1.09c29bc4b97cdp-8', '-0x1.9789cbc7ef83ep-9', '0x1.3da71b932bef9p-10',
        '0x1.a8b24a65c527fp-12', '-0x1.22785e4004a5bp-10', '0x0.0p+0',
        '0x0.0p+0',
    ),
    # erfinvT0b: 2^-64.5, mid 0x1.4000000000000p+0
    "erfinvT0b_f64": (
        '0x1.c639ee691e926p-1', '0x1.05301ab66a235p+0', '0x1.ccdad4050f209p-5',
        '-0x1.e26d256bfea2bp-5', '0x1.514da833126c6p-5', '-0x1.747553dee0404p-6',
        '0x1.3cc2b553d890fp-7', '-0x1.356529adc0a1dp-9', '-0x1.937c30bd4e624p-11',
        '0x1.8e578a8743880p-10', '-0x1.4358ef71cea0ep-10', '0x1.6d365d6ecb846p-11',
        '-0x1.0fa4f1fc476ccp-12', '0x1.3fa18ea4a1732p-17', '0x1.6be8953f81400p-14',
        '-0x1.a28bce1e37361p-14', '0x1.0a2aaf5b73c22p-14', '0x0.0p+0',
        '0x0.0p+0',
    ),
    # erfinvT1: 2^-65.7
    "erfinvT1_f64": (
        '0x1.ab0e63b50a61cp+0', '0x1.0caf81c5f0052p+0', '0x1.d4e0cab7b13f7p-11',
        '-0x1.d4f2c5393a9c7p-8', '0x1.51a5a283b88b2p-8', '-0x1.6b85a77d498dbp-9',
        '0x1.52215c9cc7c41p-10', '-0x1.1998a70150a6ap-11', '0x1.a41195ad91904p-13',
        '-0x1.0ff806e33d89dp-14', '0x1.12265323b7e65p-16', '-0x1.b05345c4acb12p-20',
        '-0x1.a3ad9479e8846p-20', '0x1.924322f86b217p-20', '-0x1.e0e612bcaaeecp-21',
        '0x1.d44b39e103074p-22', '-0x1.8ae83f6c489bbp-23', '0x1.1a0baf72d35bcp-24',
        '-0x1.00ee8fa8bfecdp-26',
    ),
    # erfinvT2: 2^-65.4
    "erfinvT2_f64": (
        '0x1.7cc84198493d9p+1', '0x1.0a0012199f333p+0', '-0x1.5a2f7c2f73829p-8',
        '0x1.54fc01a68adf7p-12', '0x1.66a69d9df0ce7p-13', '-0x1.ca7370627d7dap-14',
        '0x1.787121aafbfc1p-15', '-0x1.084cef5b1f4eep-16', '0x1.5444b14f4f675p-18',
        '-0x1.9c6e50d34c44ep-20', '0x1.dc0ea0944bbecp-22', '-0x1.06bd50d47d53bp-23',
        '0x1.151dbefaa5b81p-25', '-0x1.158a5f1648218p-27', '0x1.049a99e38ebacp-29',
        '-0x1.c445289f9f3dfp-32', '0x1.4de983be688ddp-34', '-0x1.1d341de0cc206p-38',
        '-0x1.af0fe19eda38dp-39',
    ),
    # erfinvT3: 2^-67.5
    "erfinvT3_f64": (
        '0x1.3528b01f951d0p+2', '0x1.0639f30d95aadp+0', '-0x1.8466d8762e292p-9',
        '0x1.6c210206a56c4p-12', '-0x1.1e5c65cc4425ep-15', '0x1.8ed5dd26bbb50p-20',
        '0x1.1b154bbc7339cp-21', '-0x1.f40a5675508f9p-23', '0x1.1b552fd5ad6ecp-24',
        '-0x1.13d08577742c6p-26', '0x1.f0089df640c1ep-29', '-0x1.a8259fb571311p-31',
        '0x1.5dd9f21273fffp-33', '-0x1.18be04cf3db29p-35', '0x1.b7b8534c153a5p-38',
        '-0x1.4c2efc39fc7e3p-40', '0x1.f445385cf4f9dp-43', '-0x1.ba8afed910ac2p-45',
        '0x1.3da72438197fbp-47',
    ),
}


def _c(name):
    return [float.fromhex(h) for h in _COEFFS[name]]


# --------------------------------------------------------------------------
# Exact constants

@functools.lru_cache(maxsize=None)
def _pi_fixed(bits: int) -> int:
    """floor(pi * 2**bits) (Machin's formula in integer arithmetic)."""
    guard = 64
    one = 1 << (bits + guard)

    def arctan_inv(n):
        total = term = one // n
        n2, k, sign = n * n, 1, -1
        while term:
            term //= n2
            total += sign * (term // (2 * k + 1))
            sign, k = -sign, k + 1
        return total

    return (16 * arctan_inv(5) - 4 * arctan_inv(239)) >> guard


def _pi_fraction(bits: int = 400) -> Fraction:
    return Fraction(_pi_fixed(bits), 1 << bits)


@functools.lru_cache(maxsize=None)
def _ln2_fraction() -> Fraction:
    getcontext().prec = 80
    return Fraction(Decimal(2).ln())


def _trunc_bits(x: Fraction, bits: int) -> float:
    """x truncated to `bits` significant bits (exact as a float)."""
    if x == 0:
        return 0.0
    sign = -1 if x < 0 else 1
    x = abs(x)
    e = x.numerator.bit_length() - x.denominator.bit_length()
    if Fraction(2) ** e > x:
        e -= 1
    scale = Fraction(2) ** (bits - 1 - e)
    return sign * float(Fraction(int(x * scale)) / scale)


def _round32(v: float) -> float:
    import struct
    return struct.unpack("f", struct.pack("f", v))[0]


def _split(x: Fraction, hi_bits: int, f32: bool = False) -> tuple[float, float]:
    hi = _trunc_bits(x, hi_bits)
    lo = float(x - Fraction(hi))
    if f32:
        lo = _round32(lo)
    return hi, lo


@functools.lru_cache(maxsize=None)
def _consts(f64: bool):
    """Per-precision constants (a plain namespace)."""
    class C:
        pass
    c = C()
    ln2 = _ln2_fraction()
    pi = _pi_fraction()
    if f64:
        c.ln2hi, c.ln2lo = _split(ln2, 32)
        c.log2e = float(1 / ln2)
        c.exp_lo, c.exp_hi = -746.0, 710.0
        c.expm1_lo, c.expm1_mid = -45.0, 56
        c.tanh_clamp = 20.0
        c.mant, c.bias, c.sqrth_bits = 52, 1023, 0x3FE6A09E667F3BCD
        c.min_normal = 2.0 ** -1022
        c.expq = _c("expq_f64")
        c.logP = _c("logP_f64")
        c.erfA = _c("erfA_f64")
        c.erfB_edges = (2.0, 3.0, 4.0)
        c.erfB_mids = (1.5, 2.5, 3.5, 5.0)
        c.erfB = [_c("erfB%d_f64" % i) for i in range(4)]
        c.erf_one = 6.0
        c.atanP = _c("atanP_f64")
        c.erfinvC = _c("erfinvC_f64")
        c.erfinvT = [_c("erfinvT%s_f64" % i) for i in ("0a", "0b", "1", "2", "3")]
    else:
        c.ln2hi, c.ln2lo = _split(ln2, 16, f32=True)
        c.ln2hi_fma, c.ln2lo_fma = _split(ln2, 24, f32=True)   # with FMA
        c.log2e = _round32(float(1 / ln2))
        c.exp_lo, c.exp_hi = -104.0, 89.0
        c.expm1_lo, c.expm1_mid = -20.0, 27
        c.tanh_clamp = 10.0
        c.mant, c.bias, c.sqrth_bits = 23, 127, 0x3F3504F3
        c.min_normal = 2.0 ** -126
        c.expq = _c("expq_f32")
        c.logP = _c("logP_f32")
        c.erfA = _c("erfA_f32")
        c.erfB_edges = (2.0,)
        c.erfB_mids = (1.5, 3.0)
        c.erfB = [_c("erfB%d_f32" % i) for i in range(2)]
        c.erf_one = 4.0
        # pi/2 as three float32 pieces of 24 bits (~72 bits) for the float32
        # Cody-Waite reduction, and 2/pi rounded to float32.
        rem = _pi_fraction() / 2
        c.pio2_f32 = []
        for _ in range(3):
            piece = _trunc_bits(rem, 24)
            c.pio2_f32.append(piece)
            rem -= Fraction(piece)
        c.twoopi_f32 = _round32(float(2 / _pi_fraction()))
    c.bits = 64 if f64 else 32
    c.magic = 1.5 * 2.0 ** c.mant
    # Trig (always double precision constants).
    pio2 = pi / 2
    c.twoopi = float(2 / pi)
    p1 = _trunc_bits(pio2, 33)
    rem = pio2 - Fraction(p1)
    p1t = float(rem)
    p2 = _trunc_bits(rem, 33)
    rem -= Fraction(p2)
    p2t = float(rem)
    p3 = _trunc_bits(rem, 33)
    rem -= Fraction(p3)
    p3t = float(rem)
    c.pio2_1, c.pio2_1t, c.pio2_2, c.pio2_2t, c.pio2_3, c.pio2_3t = p1, p1t, p2, p2t, p3, p3t
    c.pio2_hi = float(pio2)
    c.pio2_lo = float(pio2 - Fraction(c.pio2_hi))
    c.pio4_hi, c.pio4_lo = float(pi / 4), float(pi / 4 - Fraction(float(pi / 4)))
    c.pi_hi, c.pi_lo = float(pi), float(pi - Fraction(float(pi)))
    c.three_pio4 = float(3 * pi / 4)
    c.two3_hi = float(Fraction(2, 3))
    c.two3_lo = float(Fraction(2, 3) - Fraction(c.two3_hi))
    return c


# Payne-Hanek tables: for each binary exponent E (x = M * 2^E, M the integer
# significand), C_E = floor((2/pi) * 2^E * 2^F) mod 2^(32 n): 2 integer bits
# (the quadrant) and F = 32 n - 2 fraction bits, as n 32-bit words, least
# significant first.
_PH = {
    # f64: |x| > 2^20 -> E in [-32, 971] (+ inf/nan at 972, clamped)
    True: dict(words=6, emin=-32, emax=972),
    # f32: |x| >= 2^20 -> E in [-3, 104] (+ inf/nan at 105)
    False: dict(words=4, emin=-3, emax=105),
}


@functools.lru_cache(maxsize=None)
def _ph_table(f64: bool) -> list[int]:
    p = _PH[f64]
    n, emin, emax = p["words"], p["emin"], p["emax"]
    frac_bits = 32 * n - 2
    bits = emax + frac_bits + 128
    pi = _pi_fixed(bits + 8)
    twoopi = (1 << (2 * bits + 9)) // pi          # floor(2/pi * 2^bits) (within 1)
    out = []
    for e in range(emin, emax + 1):
        shift = bits - e - frac_bits
        v = (twoopi >> shift) & ((1 << (32 * n)) - 1)
        out.extend((v >> (32 * j)) & 0xFFFFFFFF for j in range(n))
    return out


# --------------------------------------------------------------------------
# A tiny emitter over llvmlite's IRBuilder

def _intrinsic_suffix(ty) -> str:
    if isinstance(ty, ir.VectorType):
        return f"v{ty.count}{ty.element.intrinsic_name}"
    return ty.intrinsic_name


def _signed(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


class _Em:
    """Arithmetic helpers for one floating type (float or double).

    Plain Python numbers are turned into constants of the emitter's types.
    No fast-math flags are used: the algorithms rely on exact rounding
    behaviour (error-free transformations, Cody-Waite reduction).
    """

    def __init__(self, b: ir.IRBuilder, ty, fma_hw: bool):
        self.b = b
        self.ty = ty
        self.lanes = ty.count if isinstance(ty, ir.VectorType) else None
        elem = ty.element if self.lanes else ty
        self.f64 = isinstance(elem, ir.DoubleType)
        self.bits = 64 if self.f64 else 32
        self.ity = self.vec(ir.IntType(self.bits))
        self.fma_hw = fma_hw
        self.C = _consts(self.f64)

    def vec(self, elem):
        """`elem`, or a vector of it with this emitter's lane count."""
        return ir.VectorType(elem, self.lanes) if self.lanes else elem

    def other(self, elem) -> "_Em":
        """An emitter for another element type with the same lane count."""
        return _Em(self.b, self.vec(elem), self.fma_hw)

    # constants
    def k(self, v):
        return v if isinstance(v, ir.Value) else ir.Constant(self.ty, float(v))

    def ik(self, v):
        return v if isinstance(v, ir.Value) else ir.Constant(self.ity, _signed(int(v), self.bits))

    # intrinsics
    def _intr(self, name, nargs, ty=None):
        ty = ty or self.ty
        full = f"{name}.{_intrinsic_suffix(ty)}"
        mod = self.b.module
        fn = mod.globals.get(full)
        if fn is None:
            fn = ir.Function(mod, ir.FunctionType(ty, [ty] * nargs), full)
        return fn

    # float arithmetic
    def add(self, a, b):
        return self.b.fadd(self.k(a), self.k(b))

    def sub(self, a, b):
        return self.b.fsub(self.k(a), self.k(b))

    def mul(self, a, b):
        return self.b.fmul(self.k(a), self.k(b))

    def div(self, a, b):
        return self.b.fdiv(self.k(a), self.k(b))

    def neg(self, a):
        return self.b.fneg(self.k(a))

    def fmuladd(self, a, b, c):
        """a*b + c, fused where the target has FMA (either is fine)."""
        return self.b.call(self._intr("llvm.fmuladd", 3), [self.k(a), self.k(b), self.k(c)])

    def fma(self, a, b, c):
        return self.b.call(self._intr("llvm.fma", 3), [self.k(a), self.k(b), self.k(c)])

    def abs(self, a):
        return self.b.call(self._intr("llvm.fabs", 1), [self.k(a)])

    def copysign(self, mag, sgn):
        return self.b.call(self._intr("llvm.copysign", 2), [self.k(mag), self.k(sgn)])

    def poly(self, x, coeffs):
        """Horner: coeffs[0] + x*(coeffs[1] + ...)."""
        acc = self.k(coeffs[-1])
        for c in reversed(coeffs[:-1]):
            acc = self.fmuladd(acc, x, c)
        return acc

    # comparisons (ordered: false for NaN) and selects
    def lt(self, a, b):
        return self.b.fcmp_ordered("<", self.k(a), self.k(b))

    def le(self, a, b):
        return self.b.fcmp_ordered("<=", self.k(a), self.k(b))

    def gt(self, a, b):
        return self.b.fcmp_ordered(">", self.k(a), self.k(b))

    def ge(self, a, b):
        return self.b.fcmp_ordered(">=", self.k(a), self.k(b))

    def eq(self, a, b):
        return self.b.fcmp_ordered("==", self.k(a), self.k(b))

    def isnan(self, a):
        return self.b.fcmp_unordered("uno", self.k(a), self.k(a))

    def not_finite(self, a):
        """|a| is inf or NaN."""
        return self.b.fcmp_unordered(">=", self.abs(a), self.k(float("inf")))

    def sel(self, c, a, b):
        if not isinstance(a, ir.Value) and not isinstance(b, ir.Value):
            a = self.k(a)
        if isinstance(a, ir.Value) and not isinstance(b, ir.Value):
            b = self.k(b) if not isinstance(a.type, ir.IntType) else ir.Constant(a.type, b)
        if isinstance(b, ir.Value) and not isinstance(a, ir.Value):
            a = self.k(a) if not isinstance(b.type, ir.IntType) else ir.Constant(b.type, a)
        return self.b.select(c, a, b)

    def and_(self, a, b):
        return self.b.and_(a, b)

    def or_(self, a, b):
        return self.b.or_(a, b)

    def not_(self, a):
        return self.b.not_(a)

    def clamp(self, x, lo, hi):
        """min(max(x, lo), hi), NaN -> lo (so later integer conversions stay defined)."""
        x = self.sel(self.gt(x, lo), x, lo)
        return self.sel(self.lt(x, hi), x, hi)

    # integers of the same width
    def bits_of(self, a):
        return self.b.bitcast(self.k(a), self.ity)

    def from_bits(self, i):
        return self.b.bitcast(i, self.ty)

    def iadd(self, a, b):
        return self.b.add(self.ik(a), self.ik(b))

    def isub(self, a, b):
        return self.b.sub(self.ik(a), self.ik(b))

    def iand(self, a, b):
        return self.b.and_(self.ik(a), self.ik(b))

    def ior(self, a, b):
        return self.b.or_(self.ik(a), self.ik(b))

    def ixor(self, a, b):
        return self.b.xor(self.ik(a), self.ik(b))

    def shl(self, a, n):
        return self.b.shl(self.ik(a), self.ik(n))

    def lshr(self, a, n):
        return self.b.lshr(self.ik(a), self.ik(n))

    def ashr(self, a, n):
        return self.b.ashr(self.ik(a), self.ik(n))

    def icmp(self, op, a, b):
        return self.b.icmp_signed(op, self.ik(a), self.ik(b))

    def itof(self, i):
        return self.b.sitofp(i, self.ty)

    # helpers
    def rint(self, x):
        """(n as float, n as int) with n = round-to-nearest(x), |x| < 2^(mant-1)."""
        magic = self.C.magic
        t = self.add(x, magic)
        nf = self.sub(t, magic)
        ni = self.isub(self.bits_of(t), self.bits_of(self.k(magic)))
        return nf, ni

    def rint_mul(self, x, y):
        """`rint(x*y)` as `rint` gives it, the product rounded once (in an FMA:
        one operation fewer; needs the host's FMA)."""
        magic = self.C.magic
        t = self.fma(x, y, magic)
        return self.sub(t, magic), self.isub(self.bits_of(t), self.bits_of(self.k(magic)))

    def pow2(self, n):
        """2^n for integer n in the normal exponent range."""
        return self.from_bits(self.shl(self.iadd(n, self.C.bias), self.C.mant))

    def scale2(self, x, n):
        """x * 2^n rounded once, |n| < 2^31: `llvm.ldexp` where the host does
        it in one instruction (AVX-512's vscalef), else two exact
        power-of-two factors."""
        if _host_scalef():
            ity = self.vec(_I32)
            if self.f64:
                n = self.b.trunc(n, ity)
            name = f"llvm.ldexp.{_intrinsic_suffix(self.ty)}.{_intrinsic_suffix(ity)}"
            fn = self.b.module.globals.get(name) or ir.Function(
                self.b.module, ir.FunctionType(self.ty, [self.ty, ity]), name)
            return self.b.call(fn, [self.k(x), n])
        n1 = self.ashr(n, 1)
        n2 = self.isub(n, n1)
        return self.mul(self.mul(x, self.pow2(n1)), self.pow2(n2))

    def flip_sign_like(self, v, x):
        """v with its sign flipped where x is negative (sin is odd)."""
        sign = self.iand(self.bits_of(x), 1 << (self.bits - 1))
        return self.from_bits(self.ixor(self.bits_of(v), sign))

    # error-free transformations (double-double arithmetic)
    def fast_two_sum(self, a, b):
        """s + e == a + b exactly, if exponent(a) >= exponent(b) or a == 0."""
        s = self.add(a, b)
        e = self.sub(b, self.sub(s, a))
        return s, e

    def two_sum(self, a, b):
        s = self.add(a, b)
        bb = self.sub(s, a)
        e = self.add(self.sub(a, self.sub(s, bb)), self.sub(b, bb))
        return s, e

    def _split_dekker(self, a):
        c = self.mul(a, float(2 ** 27 + 1) if self.f64 else float(2 ** 12 + 1))
        ah = self.sub(c, self.sub(c, a))
        return ah, self.sub(a, ah)

    def two_prod(self, a, b):
        """p + e == a * b exactly (FMA if the host has it, else Dekker)."""
        p = self.mul(a, b)
        if self.fma_hw:
            return p, self.fma(a, b, self.neg(p))
        ah, al = self._split_dekker(a)
        bh, bl = self._split_dekker(b)
        e = self.add(self.add(self.add(self.sub(self.mul(ah, bh), p),
                                       self.mul(ah, bl)), self.mul(al, bh)),
                     self.mul(al, bl))
        return p, e

    def dd_add(self, ah, al, bh, bl):
        s, e = self.two_sum(ah, bh)
        e = self.add(e, self.add(al, bl))
        return self.fast_two_sum(s, e)

    def dd_add_d(self, ah, al, b):
        s, e = self.two_sum(ah, b)
        return self.fast_two_sum(s, self.add(e, al))

    def dd_mul(self, ah, al, bh, bl):
        p, e = self.two_prod(ah, bh)
        e = self.add(e, self.add(self.mul(ah, bl), self.mul(al, bh)))
        return self.fast_two_sum(p, e)


# --------------------------------------------------------------------------
# exp / expm1

def _exp_reduce(em: _Em, x, lo_clamp=None, fold_lo=True):
    """xc = n ln2 + r + c for xc = x clamped to [lo_clamp, exp_hi] (NaN ->
    lo_clamp); returns (n as int, r, c), |r| <= ~ln2/2: r = xc - n ln2 rounded
    and c its rounding error, or with `fold_lo` false (float32 with FMA only)
    r = xc - n ln2_hi exact and c = -n ln2_lo (|c| <= 2^-16.8, so c^2 is
    negligible in `_expm1_kernel`): two operations fewer, for exp, whose
    result 1 + p absorbs the second rounding at p's scale that this costs in
    `_expm1_kernel` (expm1's 2^n p + (2^n - 1) may cancel: up to 2 ulp).
    Without `lo_clamp` x is taken as clamped already (xc = x)."""
    C = em.C
    xc = x if lo_clamp is None else em.clamp(x, lo_clamp, C.exp_hi)
    if em.f64 or not em.fma_hw:
        nf, ni = em.rint(em.mul(xc, C.log2e))
        hi = em.sub(xc, em.mul(nf, C.ln2hi))           # exact
        lo = em.mul(nf, C.ln2lo)
        r, c = em.fast_two_sum(hi, em.neg(lo))
        return ni, r, c
    # float32 with FMA: n rounded inside the FMA, xc - n ln2hi exact with a
    # 24-bit ln2hi (|n| <= 150; |ln2lo| < 2^-24), c = the rounding error of
    # r (r - rr exact unless |r| is so small that c does not matter).
    nf, ni = em.rint_mul(xc, C.log2e)
    nneg = em.neg(nf)
    hi = em.fma(nneg, C.ln2hi_fma, xc)
    if not fold_lo:
        return ni, hi, em.mul(nneg, C.ln2lo_fma)
    r = em.fma(nneg, C.ln2lo_fma, hi)
    c = em.fma(nneg, C.ln2lo_fma, em.sub(hi, r))
    return ni, r, c


def _expm1_kernel(em: _Em, r, c):
    """expm1(r + c) = p + c (1 + p) + O(c^2), p = expm1(r), for |r| <= ~ln2/2, c tiny."""
    p = em.fmuladd(em.mul(r, r), em.poly(r, em.C.expq), r)
    return em.fmuladd(c, em.add(p, 1.0), p)


def _exp_core(em: _Em, x, extra_lo=None, dead=0.0):
    """exp(x [+ extra_lo]) without NaN handling: at or below exp_lo, and for NaN,
    it is `dead` (default +0; it must be +0 at or below exp_lo).

    The scaling rounds to zero at or below exp_lo: the result is selected
    there, and those lanes compute exp(0) meanwhile, as a scaling
    that underflows costs a microcode assist per lane (~8x slower on causally
    masked attention scores, half of them -inf). The input, not n, is replaced:
    LLVM would drop a select on n that the result's select makes redundant in
    value. Both selects keep the lanes above exp_lo, so that AVX-512 does them as
    masking (no instruction of their own): zero-masking of the clamp to exp_hi,
    the scaling merged into `dead`."""
    C = em.C
    live = em.gt(x, C.exp_lo)
    xc = em.sel(live, em.sel(em.lt(x, C.exp_hi), x, C.exp_hi), 0.0)
    ni, r, c = _exp_reduce(em, xc, fold_lo=False)
    if extra_lo is not None:
        clamped = em.b.fcmp_unordered("!=", xc, x)
        c = em.add(c, em.sel(clamped, 0.0, extra_lo))
    p = _expm1_kernel(em, r, c)
    return em.sel(live, em.scale2(em.add(p, 1.0), ni), dead)


def _exp(em: _Em, x):
    # x for NaN, +0 below exp_lo: one maxps (NaN gives its second operand), the
    # scaling merge-masked into it
    return _exp_core(em, x, dead=em.sel(em.gt(0.0, x), 0.0, x))


def _expm1_core(em: _Em, x):
    C = em.C
    ni, r, c = _exp_reduce(em, x, C.expm1_lo)
    p = _expm1_kernel(em, r, c)
    big = em.icmp(">", ni, C.expm1_mid)
    nm = em.sel(big, ir.Constant(em.ity, C.expm1_mid), ni)
    t = em.pow2(nm)
    mid = em.fmuladd(t, p, em.sub(t, 1.0))        # 2^n expm1(r) + (2^n - 1)
    large = em.scale2(em.add(p, 1.0), ni)
    return em.sel(big, large, mid)


def _expm1(em: _Em, x):
    res = _expm1_core(em, x)
    res = em.sel(em.eq(x, 0.0), x, res)            # keeps -0
    return em.sel(em.isnan(x), x, res)


# --------------------------------------------------------------------------
# log / log1p

def _log_split(em: _Em, x):
    """x > 0 finite -> (k int, f) with x = 2^k (1 + f), 1 + f in [sqrt(1/2), sqrt(2))."""
    C = em.C
    sub = em.lt(x, C.min_normal)
    pre = C.mant + 2
    xs = em.sel(sub, em.mul(x, 2.0 ** pre), x)
    kb = em.sel(sub, ir.Constant(em.ity, -pre), ir.Constant(em.ity, 0))
    one_bits = C.bias << C.mant
    ix = em.iadd(em.bits_of(xs), one_bits - C.sqrth_bits)
    k = em.iadd(em.isub(em.ashr(ix, C.mant), C.bias), kb)
    m = em.from_bits(em.iadd(em.iand(ix, (1 << C.mant) - 1), C.sqrth_bits))
    return k, em.sub(m, 1.0)


def _log_kernel(em: _Em, kf, f, c):
    """k ln2 + log(1 + f) + c  (fdlibm's arrangement)."""
    C = em.C
    hfsq = em.mul(em.mul(f, f), 0.5)
    s = em.div(f, em.add(f, 2.0))
    z = em.mul(s, s)
    R = em.mul(z, em.poly(z, C.logP))
    inner = em.fmuladd(s, em.add(hfsq, R), em.fmuladd(kf, C.ln2lo, c))
    return em.sub(em.mul(kf, C.ln2hi), em.sub(em.sub(hfsq, inner), f))


def _log(em: _Em, x):
    k, f = _log_split(em, x)
    res = _log_kernel(em, em.itof(k), f, em.k(0.0))
    inf = float("inf")
    res = em.sel(em.lt(x, 0.0), float("nan"), res)
    res = em.sel(em.eq(x, 0.0), -inf, res)
    res = em.sel(em.eq(x, inf), inf, res)
    return em.sel(em.isnan(x), x, res)


def _log1p(em: _Em, x):
    u = em.add(x, 1.0)
    k, fu = _log_split(em, u)
    kzero = em.icmp("==", k, 0)
    # rounding error of u = fl(1 + x) (Fast2Sum with the larger operand first)
    err = em.sel(em.gt(x, 1.0), em.sub(1.0, em.sub(u, x)), em.sub(x, em.sub(u, 1.0)))
    c = em.sel(kzero, 0.0, em.div(err, u))
    f = em.sel(kzero, x, fu)
    res = _log_kernel(em, em.itof(k), f, c)
    inf = float("inf")
    res = em.sel(em.lt(x, -1.0), float("nan"), res)
    res = em.sel(em.eq(x, -1.0), -inf, res)
    res = em.sel(em.eq(x, inf), inf, res)
    res = em.sel(em.eq(x, 0.0), x, res)
    return em.sel(em.isnan(x), x, res)


# --------------------------------------------------------------------------
# tanh / logistic / erf

def _tanh(em: _Em, x):
    ax = em.abs(x)
    ax = em.sel(em.lt(ax, em.C.tanh_clamp), ax, em.C.tanh_clamp)
    t = _expm1_core(em, em.mul(ax, 2.0))
    res = em.copysign(em.div(t, em.add(t, 2.0)), x)
    return em.sel(em.isnan(x), x, res)


def _logistic(em: _Em, x):
    e = _exp_core(em, em.neg(em.abs(x)))
    d = em.add(e, 1.0)
    res = em.sel(em.ge(x, 0.0), em.div(1.0, d), em.div(e, d))
    return em.sel(em.isnan(x), x, res)


def _erf(em: _Em, x):
    C = em.C
    ax = em.abs(x)
    # |x| < 1: erf = x + x P(x^2)
    small = em.fmuladd(ax, em.poly(em.mul(ax, ax), C.erfA), ax)
    # 1 <= |x| < erf_one: erf = 1 - erfc, erfc piecewise polynomial in |x| - mid
    conds = [em.lt(ax, edge) for edge in C.erfB_edges]

    def pick(values):
        v = em.k(values[-1])
        for cond, val in reversed(list(zip(conds, values[:-1]))):
            v = em.sel(cond, em.k(val), v)
        return v

    t = em.sub(ax, pick(C.erfB_mids))
    ncoef = len(C.erfB[0])
    acc = pick([cs[-1] for cs in C.erfB])
    for i in range(ncoef - 2, -1, -1):
        acc = em.fmuladd(acc, t, pick([cs[i] for cs in C.erfB]))
    large = em.sub(1.0, acc)
    res = em.sel(em.lt(ax, 1.0), small, em.sel(em.lt(ax, C.erf_one), large, 1.0))
    res = em.copysign(res, x)
    return em.sel(em.isnan(x), x, res)


# --------------------------------------------------------------------------
# sin / cos

def _ph_table_global(module, f64: bool):
    name = "fgrad_2opi_bits_f64" if f64 else "fgrad_2opi_bits_f32"
    g = module.globals.get(name)
    if g is None:
        vals = _ph_table(f64)
        aty = ir.ArrayType(_I32, len(vals))
        g = ir.GlobalVariable(module, aty, name)
        g.global_constant = True
        g.linkage = "internal"
        g.unnamed_addr = True
        g.align = 16
        g.initializer = ir.Constant(aty, [_signed(v, 32) for v in vals])
    return g


def _payne_hanek(em64: _Em, M, E, f64: bool):
    """x = M 2^E (M < 2^53 integer, i64), returns (q i64, V_hi, V_lo, neg) with
    x*2/pi = q + (-1)^neg V (mod 4), V in [0, 1/2] as a double-double."""
    b = em64.b
    p = _PH[f64]
    n, emin, emax = p["words"], p["emin"], p["emax"]
    table = _ph_table_global(b.module, f64)
    idx = em64.isub(E, emin)
    idx = em64.sel(em64.icmp("<", idx, 0), ir.Constant(_I64, 0), idx)
    idx = em64.sel(em64.icmp(">", idx, emax - emin), ir.Constant(_I64, emax - emin), idx)
    base = b.mul(idx, ir.Constant(_I64, n))
    zero = ir.Constant(_I64, 0)
    cw = []
    for j in range(n):
        ptr = b.gep(table, [ir.Constant(_I64, 0), em64.iadd(base, j)], inbounds=True)
        cw.append(b.zext(b.load(ptr), _I64))
    mask = 0xFFFFFFFF
    mw = [em64.iand(M, mask), em64.lshr(M, 32)] if f64 else [M]
    # partial products split in 32-bit halves, column sums with carries
    lo_terms = [[] for _ in range(n)]
    hi_terms = [[] for _ in range(n + 1)]
    for i, m in enumerate(mw):
        for j, cj in enumerate(cw):
            kcol = i + j
            if kcol >= n:
                continue
            prod = b.mul(m, cj)
            lo_terms[kcol].append(em64.iand(prod, mask))
            hi_terms[kcol + 1].append(em64.lshr(prod, 32))
    words = []
    carry = zero
    for kcol in range(n):
        acc = carry
        for t in lo_terms[kcol] + hi_terms[kcol]:
            acc = b.add(acc, t)
        words.append(em64.iand(acc, mask))
        carry = em64.lshr(acc, 32)

    def w(i):
        return words[i] if i >= 0 else zero

    quad = em64.lshr(w(n - 1), 30)
    hi = em64.ior(em64.ior(em64.shl(w(n - 1), 34), em64.shl(w(n - 2), 2)), em64.lshr(w(n - 3), 30))
    lo = em64.ior(em64.ior(em64.shl(w(n - 3), 34), em64.shl(w(n - 4), 2)), em64.lshr(w(n - 5), 30))
    neg = em64.icmp("<", hi, 0)                     # fraction >= 1/2: round up
    q = em64.iand(em64.iadd(quad, b.zext(neg, _I64)), 3)
    nlo = em64.isub(0, lo)
    nhi = em64.iadd(em64.ixor(hi, -1), b.zext(em64.b.icmp_unsigned("==", lo, zero), _I64))
    hi = em64.sel(neg, nhi, hi)
    lo = em64.sel(neg, nlo, lo)

    def u32_to_f64(v):   # exact for 0 <= v < 2^52
        t = em64.from_bits(em64.ior(v, 0x4330000000000000))
        return em64.sub(t, 2.0 ** 52)

    d1 = em64.mul(u32_to_f64(em64.lshr(hi, 32)), 2.0 ** -32)
    d2 = em64.mul(u32_to_f64(em64.iand(hi, mask)), 2.0 ** -64)
    d3 = em64.mul(u32_to_f64(em64.lshr(lo, 32)), 2.0 ** -96)
    d4 = em64.mul(u32_to_f64(em64.iand(lo, mask)), 2.0 ** -128)
    t, te = em64.fast_two_sum(d1, d2)
    vh, vl = em64.fast_two_sum(t, em64.add(te, em64.add(d3, d4)))
    return q, vh, vl, neg


_TRIG_HUGE = 2.0 ** 20       # fast-path bound on |x| (float64: <=, float32: <)


def _trig_select(em64: _Em, q, ks, kc, is_cos):
    """sin or cos of q pi/2 + r from the kernels ks = sin r, kc = cos r."""
    odd = em64.icmp("!=", em64.iand(q, 1), 0)
    if is_cos:
        v = em64.sel(odd, ks, kc)
        negate = em64.icmp("!=", em64.iand(em64.iadd(q, 1), 2), 0)
    else:
        v = em64.sel(odd, kc, ks)
        negate = em64.icmp("!=", em64.iand(q, 2), 0)
    return em64.sel(negate, em64.neg(v), v)


def _ksin64(em: _Em, x, y):
    """sin(x + y), |x| <= pi/4, |y| <~ ulp(x)."""
    S = _c("sinS_f64")
    z = em.mul(x, x)
    v = em.mul(z, x)
    r = em.poly(z, S[1:])
    # x + S1 x^3 + x^5 r + y (1 - x^2/2)
    return em.sub(x, em.sub(em.sub(em.mul(z, em.sub(em.mul(y, 0.5), em.mul(v, r))), y),
                            em.mul(v, S[0])))


def _kcos64(em: _Em, x, y):
    """cos(x + y), |x| <= pi/4, |y| <~ ulp(x)."""
    Cc = _c("cosC_f64")
    z = em.mul(x, x)
    r = em.mul(z, em.poly(z, Cc))
    hz = em.mul(z, 0.5)
    w = em.sub(1.0, hz)
    return em.add(w, em.add(em.sub(em.sub(1.0, w), hz), em.sub(em.mul(z, r), em.mul(x, y))))


def _trig_huge_mask(em: _Em, ax):
    """Lanes the fast path cannot do: |x| beyond the bound, inf or NaN."""
    op = ">" if em.f64 else ">="
    return em.b.fcmp_unordered(op, ax, em.k(_TRIG_HUGE))


def _trig_fast_f64(em: _Em, x, is_cos: bool):
    """Three-stage Cody-Waite (fdlibm's __ieee754_rem_pio2 medium case, every
    stage always done).  Lanes with |x| > 2^20 or non-finite give garbage."""
    C = em.C
    ax = em.abs(x)
    axm = em.sel(_trig_huge_mask(em, ax), 0.0, ax)
    nf, ni = em.rint(em.mul(axm, C.twoopi))
    r = em.sub(axm, em.mul(nf, C.pio2_1))               # exact
    t = r
    w = em.mul(nf, C.pio2_2)
    r = em.sub(t, w)
    w = em.sub(em.mul(nf, C.pio2_2t), em.sub(em.sub(t, r), w))
    t = r
    w = em.mul(nf, C.pio2_3)
    r = em.sub(t, w)
    w = em.sub(em.mul(nf, C.pio2_3t), em.sub(em.sub(t, r), w))
    y0 = em.sub(r, w)
    y1 = em.sub(em.sub(r, y0), w)
    res = _trig_select(em, ni, _ksin64(em, y0, y1), _kcos64(em, y0, y1), is_cos)
    return res if is_cos else em.flip_sign_like(res, x)


def _trig_slow_f64(em: _Em, x, is_cos: bool):
    """Payne-Hanek for |x| > 2^20 (scalar); NaN for inf/NaN."""
    C = em.C
    ax = em.abs(x)
    ib = em.bits_of(ax)
    E = em.isub(em.lshr(ib, 52), 1075)
    M = em.ior(em.iand(ib, (1 << 52) - 1), 1 << 52)
    q, vh, vl, neg = _payne_hanek(em, M, E, True)
    p, pe = em.two_prod(vh, C.pio2_hi)
    pe = em.add(pe, em.fmuladd(vh, C.pio2_lo, em.mul(vl, C.pio2_hi)))
    rh, rl = em.fast_two_sum(p, pe)
    rh = em.sel(neg, em.neg(rh), rh)
    rl = em.sel(neg, em.neg(rl), rl)
    res = _trig_select(em, q, _ksin64(em, rh, rl), _kcos64(em, rh, rl), is_cos)
    if not is_cos:
        res = em.flip_sign_like(res, x)
    return em.sel(em.not_finite(x), em.sub(x, x), res)


def _trig_kernels_f32(em64: _Em, q, r, is_cos):
    """float32 kernels evaluated in double precision."""
    z = em64.mul(r, r)
    ks = em64.fmuladd(em64.mul(r, z), em64.poly(z, _c("sinS_f32")), r)
    kc = em64.fmuladd(em64.mul(z, z), em64.poly(z, _c("cosC_f32")),
                      em64.fmuladd(z, -0.5, 1.0))
    return _trig_select(em64, q, ks, kc, is_cos)


def _trig_fast_f32_in_f64(em: _Em, x, is_cos: bool):
    """Two-constant Cody-Waite and the kernels in double precision for
    |x| < 2^20 (hosts without FMA)."""
    b = em.b
    em64 = em.other(_F64)
    C = em64.C
    ax = em.abs(x)
    axd = b.fpext(em.sel(_trig_huge_mask(em, ax), 0.0, ax), em64.ty)
    nf, ni = em64.rint(em64.mul(axd, C.twoopi))
    r = em64.sub(em64.sub(axd, em64.mul(nf, C.pio2_1)), em64.mul(nf, C.pio2_1t))
    res = b.fptrunc(_trig_kernels_f32(em64, ni, r, is_cos), em.ty)
    return res if is_cos else em.flip_sign_like(res, x)


def _trig_fast_f32(em: _Em, x, is_cos: bool):
    """float32 arithmetic throughout (needs FMA), |x| < 2^20.

    Reduction: n = rint(|x| 2/pi) (the product rounded once, in an FMA),
    r = |x| - n pi/2 as rh + rl with pi/2 = P1 + P2 + P3 (24-bit pieces):
    a = |x| - n P1 is exact (FMA; for n > 0 both are multiples of 2^-24 and
    the difference is below 1), n P2 = p + pe exactly (FMA), a - p = rh + e
    exactly (Fast2Sum: a is a multiple of 2^-24 below 1 and |p| < 1, so a
    needs no lower exponent than p; for n = 0 p = 0), rl = e - pe - n P3.
    |r| >= 2^-27.8 for every float32 in (pi/4, 2^20) (found by an exhaustive
    search), so the ~2^-75 n error of P1 + P2 + P3 and the rounding of rl
    stay below 2^-50 relative.  n may be off by one where |x| 2/pi is within
    the error of 2/pi in float32 of a half-integer (|r| up to ~0.87); the
    kernels stay within 2^-27.9 relative there.

    Kernels on (rh, rl): sin = rh + (rh z S(z) + rl), cos = w + (ew + z^2
    C(z) - rh rl) with w = fl(1 - rh^2/2) and ew its rounding error (FMA)."""
    C = em.C
    P1, P2, P3 = C.pio2_f32
    ax = em.abs(x)
    nf, ni = em.rint_mul(ax, C.twoopi_f32)
    nneg = em.neg(nf)
    a = em.fma(nneg, P1, ax)
    p = em.mul(nf, P2)
    pe = em.fma(nf, P2, em.neg(p))
    rh, e = em.fast_two_sum(a, em.neg(p))
    rl = em.fma(nneg, P3, em.sub(e, pe))
    z = em.mul(rh, rh)
    ks = em.add(rh, em.fma(em.mul(rh, z), em.poly(z, _c("sinS_f32")), rl))
    hr = em.mul(rh, -0.5)
    w = em.fma(hr, rh, 1.0)
    ew = em.fma(hr, rh, em.sub(1.0, w))
    t = em.fma(em.mul(z, z), em.poly(z, _c("cosC_f32")), ew)
    kc = em.add(w, em.fma(em.neg(rh), rl, t))
    odd = em.icmp("!=", em.iand(ni, 1), 0)
    if is_cos:
        v = em.sel(odd, ks, kc)
        sign = em.shl(em.iadd(ni, 1), 30)             # bit 1 of n + 1
    else:
        v = em.sel(odd, kc, ks)
        sign = em.ixor(em.shl(ni, 30), em.bits_of(x))  # bit 1 of n, sign of x
    sign = em.iand(sign, 1 << 31)
    return em.from_bits(em.ixor(em.bits_of(v), sign))


def _trig_slow_f32(em: _Em, x, is_cos: bool):
    b = em.b
    em64 = em.other(_F64)
    C = em64.C
    ax = em.abs(x)
    ib = em.bits_of(ax)
    E = b.sext(em.isub(em.lshr(ib, 23), 150), _I64)
    M = b.zext(em.ior(em.iand(ib, (1 << 23) - 1), 1 << 23), _I64)
    q, vh, _vl, neg = _payne_hanek(em64, M, E, False)
    r = em64.mul(vh, C.pio2_hi)
    r = em64.sel(neg, em64.neg(r), r)
    res = b.fptrunc(_trig_kernels_f32(em64, q, r, is_cos), em.ty)
    if not is_cos:
        res = em.flip_sign_like(res, x)
    return em.sel(em.not_finite(x), em.sub(x, x), res)


def _trig_fast(em, x, is_cos):
    if em.f64:
        return _trig_fast_f64(em, x, is_cos)
    return (_trig_fast_f32 if em.fma_hw else _trig_fast_f32_in_f64)(em, x, is_cos)


def _trig_slow(em, x, is_cos):
    return (_trig_slow_f64 if em.f64 else _trig_slow_f32)(em, x, is_cos)


# Vector widths for which sin/cos get explicit vector variants.
_TRIG_WIDTHS = mathlib_runtime.WIDTHS


class _VariantAttributes(ir.values.FunctionAttributes):
    """Function attributes plus LLVM string attributes (llvmlite only knows
    the enumerated ones)."""

    def __init__(self, strings: dict[str, str]):
        super().__init__()
        self._strings = strings

    def __bool__(self):
        return True

    def _to_list(self, ret_type):
        return super()._to_list(ret_type) + [f'"{k}"="{v}"' for k, v in self._strings.items()]


class _PureAttributes(_VariantAttributes):
    """What LLVM infers about sin and cos where it sees their code, said of a
    declaration (without `memory(none)` and `willreturn` a call in a loop that
    stores keeps the loop from vectorising)."""

    def _to_list(self, ret_type):
        return ["nounwind", "willreturn", "nosync", "nofree", "memory(none)"] \
            + super()._to_list(ret_type)


def emit_runtime(name: str, suffix: str) -> str:
    """IR text of the math runtime's module for sin or cos (`mathlib_runtime.symbols`
    external, with the host's FMA choice): the code `_emit_trig` gives a
    program that defines the function itself."""
    module = ir.Module(name=f"fgrad_math_{name}_{suffix}")
    ty = _F32 if suffix == "f32" else _F64
    _emit_trig(module, f"fgrad_{name}_{suffix}", ty, _host_fma(), name == "cos")
    for symbol in mathlib_runtime.symbols(name, suffix):
        module.get_global(symbol).linkage = ""
    return str(module)


def _declare_runtime(module: ir.Module, fname: str, ty) -> ir.Function:
    """Declare sin or cos and its vector variants (kept in `llvm.compiler.used`
    until the vectoriser has looked for them)."""
    widths = _TRIG_WIDTHS[fname[-3:]]
    variants = ",".join(f"_ZGV_LLVM_N{n}v_{fname}({fname}_v{n})" for n in widths)
    fn = ir.Function(module, ir.FunctionType(ty, [ty]), fname)
    fn.attributes = _PureAttributes({"vector-function-abi-variant": variants})
    kept = []
    for n in widths:
        vty = ir.VectorType(ty, n)
        vf = ir.Function(module, ir.FunctionType(vty, [vty]), f"{fname}_v{n}")
        vf.attributes = _PureAttributes({})
        kept.append(vf)
    _keep(module, kept)
    return fn


def _keep(module: ir.Module, functions) -> None:
    """Add `functions` to the module's `llvm.compiler.used` list."""
    used = module.globals.get("llvm.compiler.used")
    if used is None:
        used = ir.GlobalVariable(module, ir.ArrayType(ir.PointerType(), 0), "llvm.compiler.used")
        used.linkage = "appending"
        used.section = "llvm.metadata"
        used.initializer = ir.Constant(used.value_type, [])
    items = list(used.initializer.constant) + list(functions)
    used.value_type = ir.ArrayType(ir.PointerType(), len(items))
    used.initializer = ir.Constant(used.value_type, items)


def _unkeep(module: ir.Module, functions) -> None:
    """Take `functions` off the module's `llvm.compiler.used` list (weak_odr
    definitions live until the vectoriser ran without it; unused, they are then
    dropped instead of compiled)."""
    used = module.globals["llvm.compiler.used"]
    items = [f for f in used.initializer.constant if f not in functions]
    if not items:                       # (LLVM rejects an empty list)
        del module.globals["llvm.compiler.used"]
        return
    used.value_type = ir.ArrayType(ir.PointerType(), len(items))
    used.initializer = ir.Constant(used.value_type, items)


def _emit_trig(module: ir.Module, fname: str, ty, fma: bool, is_cos: bool) -> ir.Function:
    """sin/cos as three pieces:

    * ``<fname>_ph``: Payne-Hanek for |x| beyond the fast path (and NaN for
      inf/NaN), scalar, not inlined, not optimised (`optnone`: rare lanes; O3
      and code generation of it were 40% of the shared code's compile time,
      and without fast-math flags optimisation never changes its bits);
    * ``<fname>``: the scalar function (fast path, or a call to ``_ph``
      behind a branch), not inlined, carrying the
      ``vector-function-abi-variant`` attribute;
    * ``<fname>_v<N>``: explicit vector variants: the vectorised fast path
      and, only if some lane needs it, ``_ph`` on each lane.

    The loop vectoriser replaces calls to the scalar function by calls to a
    variant, so the Payne-Hanek table loads never enter the vectorised loop
    (where they would defeat its runtime alias checks) and cost nothing
    unless a huge argument shows up.  ``_ph`` carries no variant attribute,
    so the SLP vectoriser cannot turn a variant's lane calls back into a
    call of the variant itself."""
    suffix = fname.rsplit("_", 1)[1]
    widths = _TRIG_WIDTHS[suffix]

    ph = _out_of_line(ir.Function(module, ir.FunctionType(ty, [ty]), fname + "_ph"))
    ph.attributes.add("optnone")
    b = ir.IRBuilder(ph.append_basic_block("entry"))
    b.ret(_trig_slow(_Em(b, ty, fma), ph.args[0], is_cos))

    variants = ",".join(f"_ZGV_LLVM_N{n}v_{fname}({fname}_v{n})" for n in widths)
    fn = ir.Function(module, ir.FunctionType(ty, [ty]), fname)
    fn.attributes = _VariantAttributes({"vector-function-abi-variant": variants})
    _out_of_line(fn)
    x = fn.args[0]
    x.name = "x"
    entry = fn.append_basic_block("entry")
    fast_bb = fn.append_basic_block("fast")
    slow_bb = fn.append_basic_block("slow")
    b = ir.IRBuilder(entry)
    em = _Em(b, ty, fma)
    b.cbranch(_trig_huge_mask(em, em.abs(x)), slow_bb, fast_bb)
    b.position_at_end(fast_bb)
    b.ret(_trig_fast(em, x, is_cos))
    b.position_at_end(slow_bb)
    b.ret(b.call(ph, [x]))

    for n in widths:
        _emit_variant(module, fname, ir.VectorType(ty, n), fma, is_cos, ph)
    return fn


def _out_of_line(fn):
    """`fn`, made a module-internal function kept out of line that only reads memory."""
    fn.linkage = "internal"
    for attr in ("noinline", "nounwind", "readonly"):
        fn.attributes.add(attr)
    return fn


def _emit_variant(module, fname, vty, fma, is_cos, lane_fn, vf=None):
    """Define the vector variant ``<fname>_v<N>`` (`vf`: its declaration, else a
    new weak_odr function): the fast path, and `lane_fn` (scalar) on each lane
    only if some lane needs the slow path."""
    n = vty.count
    # the lanes the fast path cannot do, one `lane_fn` call each, out of line:
    # the variant's hot path then makes no call that would make it spill
    # its constants (every vector register is caller-saved)
    lanes = _out_of_line(ir.Function(module, ir.FunctionType(vty, [vty, vty]),
                                     f"{fname}_v{n}_ph"))
    b = ir.IRBuilder(lanes.append_basic_block("entry"))
    vx, fast = lanes.args
    emv = _Em(b, vty, fma)
    v = fast
    for i in range(n):
        lane = ir.Constant(_I32, i)
        v = b.insert_element(v, b.call(lane_fn, [b.extract_element(vx, lane)]), lane)
    b.ret(b.select(_trig_huge_mask(emv, emv.abs(vx)), v, fast))

    if vf is None:
        vf = ir.Function(module, ir.FunctionType(vty, [vty]), f"{fname}_v{n}")
        vf.attributes.add("nounwind")
        vf.attributes.add("readonly")
    # weak_odr keeps the variant alive until the vectoriser has used it
    # (an unused internal or linkonce function would be deleted first)
    # and lets modules that each define it be linked together.
    vf.linkage = "weak_odr"
    vx = vf.args[0]
    vx.name = "x"
    entry = vf.append_basic_block("entry")
    slow_bb = vf.append_basic_block("slow")
    done_bb = vf.append_basic_block("done")
    b = ir.IRBuilder(entry)
    emv = _Em(b, vty, fma)
    res = _trig_fast(emv, vx, is_cos)
    huge = _trig_huge_mask(emv, emv.abs(vx))
    any_huge = b.icmp_unsigned("!=", b.bitcast(huge, ir.IntType(n)),
                               ir.Constant(ir.IntType(n), 0))
    _unlikely(module, b.cbranch(any_huge, slow_bb, done_bb))
    b.position_at_end(slow_bb)
    v = b.call(lanes, [vx, res])
    b.branch(done_bb)
    b.position_at_end(done_bb)
    phi = b.phi(vty)
    phi.add_incoming(res, entry)
    phi.add_incoming(v, slow_bb)
    b.ret(phi)
    return vf


def _unlikely(module: ir.Module, branch):
    """Mark the conditional `branch` as almost never taken (its true edge), so
    that LLVM lays out and allocates registers for the other path."""
    weights = module.add_metadata([ir.MetaDataString(module, "branch_weights"),
                                   ir.Constant(_I32, 1), ir.Constant(_I32, 1 << 20)])
    branch.set_metadata("prof", weights)
    return branch


# --------------------------------------------------------------------------
# pow

def _log_dd(em: _Em, ax):
    """log(ax) as a double-double (relative error ~2^-66), ax > 0 finite."""
    C = em.C
    k, f = _log_split(em, ax)
    m = em.add(f, 1.0)
    dh, dl = em.fast_two_sum(1.0, m)                # 1 + m
    sh = em.div(f, dh)
    p, pe = em.two_prod(sh, dh)
    rem = em.sub(em.sub(em.sub(f, p), pe), em.mul(sh, dl))
    sl = em.div(rem, dh)
    sh, sl = em.fast_two_sum(sh, sl)
    # z = s^2
    zh, zl = em.dd_mul(sh, sl, sh, sl)
    # (2/3) s^3
    s3h, s3l = em.dd_mul(zh, zl, sh, sl)
    t2h, t2l = em.dd_mul(s3h, s3l, C.two3_hi, C.two3_lo)
    # s^5 Q(z)
    t3 = em.mul(em.mul(em.mul(zh, zh), sh), em.poly(zh, _c("logQ_f64")))
    kf = em.itof(k)
    lh, ll = em.fast_two_sum(em.mul(kf, C.ln2hi), em.mul(kf, C.ln2lo))
    lh, ll = em.dd_add(lh, ll, em.mul(sh, 2.0), em.mul(sl, 2.0))
    lh, ll = em.dd_add(lh, ll, t2h, t2l)
    return em.dd_add_d(lh, ll, t3)


def _pow_special(em: _Em, x, y, general):
    """Apply C99 / NumPy special cases to `general` = |x|^y (sign fixed up here)."""
    inf = float("inf")
    nan = float("nan")
    C = em.C
    ax = em.abs(x)
    ay = em.abs(y)
    two_m = 2.0 ** C.mant
    # integer / odd-integer tests for finite y
    small = em.lt(ay, two_m)
    tb = em.sel(small, em.add(ay, two_m), ay)
    yint = em.or_(em.not_(small), em.eq(em.sub(tb, two_m), ay))
    low_bit = em.icmp("!=", em.iand(em.bits_of(tb), 1), 0)
    yodd = em.and_(em.and_(yint, low_bit), em.lt(ay, 2 * two_m))
    xneg = em.lt(x, 0.0)
    sign_src = em.sel(yodd, x, 1.0)
    res = em.copysign(general, sign_src)
    res = em.sel(em.and_(xneg, em.not_(yint)), nan, res)
    # x = +-inf / +-0
    ypos = em.gt(y, 0.0)
    res = em.sel(em.eq(ax, inf), em.copysign(em.sel(ypos, inf, 0.0), sign_src), res)
    res = em.sel(em.eq(ax, 0.0), em.copysign(em.sel(ypos, 0.0, inf), sign_src), res)
    # y = +-inf
    yinf = em.sel(em.eq(ax, 1.0), 1.0, em.sel(em.b.icmp_unsigned("==", em.lt(ax, 1.0), ypos), 0.0, inf))
    res = em.sel(em.eq(ay, inf), yinf, res)
    res = em.sel(em.b.or_(em.isnan(x), em.isnan(y)), em.add(x, y), res)
    res = em.sel(em.eq(x, 1.0), 1.0, res)
    return em.sel(em.eq(y, 0.0), 1.0, res)


def _pow(em: _Em, x, y):
    if em.f64:
        ax = em.abs(x)
        lh, ll = _log_dd(em, ax)
        wh, wl = em.two_prod(y, lh)
        wl = em.fmuladd(y, ll, wl)       # (no renormalisation: wh may be +-inf)
        general = _exp_core(em, wh, wl)
        return _pow_special(em, x, y, general)
    b = em.b
    em64 = em.other(_F64)
    xd = b.fpext(x, em64.ty)
    yd = b.fpext(y, em64.ty)
    axd = em64.abs(xd)
    k, f = _log_split(em64, axd)
    lg = _log_kernel(em64, em64.itof(k), f, em64.k(0.0))
    general = _exp_core(em64, em64.mul(yd, lg))
    return b.fptrunc(_pow_special(em64, xd, yd, general), em.ty)


# --------------------------------------------------------------------------
# atan2 / erf_inv (float32 evaluates the float64 code and rounds once)

_ATAN_HALF = (float.fromhex('0x1.dac670561bb4fp-2'), float.fromhex('0x1.a2b7f222f65e2p-56'))


def _in_double(em: _Em, body, *args):
    """body(em64, *args) in double precision, rounded to the caller's type."""
    if em.f64:
        return body(em, *args)
    em64 = em.other(_F64)
    res = body(em64, *[em.b.fpext(a, em64.ty) for a in args])
    return em.b.fptrunc(res, em.ty)


def _atan2_f64(em: _Em, y, x):
    C = em.C
    ax, ay = em.abs(x), em.abs(y)
    swap = em.gt(ay, ax)
    t = em.div(em.sel(swap, ax, ay), em.sel(swap, ay, ax))      # in [0, 1] (or NaN)
    # atan(t) = c + atan(u), |u| <= 7/16 (2t - 1 and t - 1 are exact)
    mid = em.lt(t, 11 / 16)
    small = em.lt(t, 7 / 16)
    num = em.sel(small, t, em.sel(mid, em.sub(em.mul(t, 2.0), 1.0), em.sub(t, 1.0)))
    den = em.sel(small, 1.0, em.sel(mid, em.add(t, 2.0), em.add(t, 1.0)))
    u = em.div(num, den)
    c_hi = em.sel(small, 0.0, em.sel(mid, _ATAN_HALF[0], C.pio4_hi))
    c_lo = em.sel(small, 0.0, em.sel(mid, _ATAN_HALF[1], C.pio4_lo))
    z = em.mul(u, u)
    a = em.add(c_hi, em.add(em.fmuladd(em.mul(u, z), em.poly(z, C.atanP), c_lo), u))
    # quadrant: base +- a with base in {0, pi/2, pi} (hi + lo)
    neg = em.icmp("<", em.bits_of(x), 0)              # x < 0 or x = -0.0
    b_hi = em.sel(swap, C.pio2_hi, em.sel(neg, C.pi_hi, 0.0))
    b_lo = em.sel(swap, C.pio2_lo, em.sel(neg, C.pi_lo, 0.0))
    flip = em.b.xor(neg, swap)                        # subtract a: pi - a, pi/2 - a
    res = em.add(em.add(b_hi, em.sel(flip, em.neg(a), a)), b_lo)
    # both zero: 0 or pi; both infinite: pi/4 or 3 pi/4
    inf = float("inf")
    res = em.sel(em.and_(em.eq(ax, 0.0), em.eq(ay, 0.0)), em.sel(neg, C.pi_hi, 0.0), res)
    both_inf = em.and_(em.eq(ax, inf), em.eq(ay, inf))
    res = em.sel(both_inf, em.sel(neg, C.three_pio4, C.pio4_hi), res)
    res = em.copysign(res, y)
    return em.sel(em.or_(em.isnan(x), em.isnan(y)), em.add(x, y), res)


def _atan2(em: _Em, y, x):
    return _in_double(em, _atan2_f64, y, x)


_ERFINV_EDGES = (1.0, 1.5, 2.5, 4.0)
_ERFINV_MIDS = (float.fromhex('0x1.d5224c8b0e6a4p-1'), 1.25, 2.0, 3.25, 5.05)


def _erf_inv_f64(em: _Em, x):
    C = em.C
    ax = em.abs(x)
    # |x| <= 1/2: x P(x^2)
    central = em.mul(x, em.poly(em.mul(x, x), C.erfinvC))
    # |x| > 1/2: a polynomial in s = sqrt(-log(1 - |x|)) on four intervals
    # (1 - |x| is exact; it is >= 2^-53, so s < 6.06). s is formed as s_hi + s_lo
    # from log(1 - |x|) as a double-double: its rounding error would be amplified.
    d = em.sub(1.0, em.sel(em.gt(ax, 0.5), ax, 0.5))
    lh, ll = _log_dd(em, d)
    s = em.b.call(em._intr("llvm.sqrt", 1), [em.neg(lh)])
    s_lo = em.div(em.sub(em.fma(em.neg(s), s, em.neg(lh)), ll), em.mul(s, 2.0))
    conds = [em.lt(s, edge) for edge in _ERFINV_EDGES]

    def pick(values):
        v = em.k(values[-1])
        for cond, val in reversed(list(zip(conds, values[:-1]))):
            v = em.sel(cond, em.k(val), v)
        return v

    t = em.add(em.sub(s, pick(_ERFINV_MIDS)), s_lo)
    ncoef = len(C.erfinvT[0])
    acc = pick([cs[-1] for cs in C.erfinvT])
    for i in range(ncoef - 2, -1, -1):
        acc = em.fmuladd(acc, t, pick([cs[i] for cs in C.erfinvT]))
    res = em.sel(em.gt(ax, 0.5), em.copysign(acc, x), central)
    res = em.sel(em.eq(ax, 0.0), 0.0, res)     # +0.0 for -0.0 too, as scipy's erfinv
    inf, nan = float("inf"), float("nan")
    res = em.sel(em.eq(ax, 1.0), em.copysign(inf, x), res)
    res = em.sel(em.gt(ax, 1.0), nan, res)
    return em.sel(em.isnan(x), x, res)


def _erf_inv(em: _Em, x):
    return _in_double(em, _erf_inv_f64, x)


# --------------------------------------------------------------------------

_BODIES = {
    "exp": _exp, "log": _log, "log1p": _log1p, "expm1": _expm1,
    "sin": None, "cos": None, "tanh": _tanh, "erf": _erf,
    "logistic": _logistic, "pow": _pow, "atan2": _atan2, "erf_inv": _erf_inv,
}


def _dtype_suffix(dtype) -> str:
    if isinstance(dtype, ir.FloatType):
        return "f32"
    if isinstance(dtype, ir.DoubleType):
        return "f64"
    s = str(getattr(dtype, "name", dtype)).lower()
    if s in ("float32", "f32"):
        return "f32"
    if s in ("float64", "f64", "double"):
        return "f64"
    try:
        import numpy as np
        s = np.dtype(dtype).name
    except TypeError:
        pass
    if s == "float32":
        return "f32"
    if s == "float64":
        return "f64"
    raise TypeError(f"mathlib supports float32 and float64, not {dtype!r}")


def function_name(name: str, dtype) -> str:
    """The IR name of `name` for `dtype`, e.g. ``fgrad_exp_f32``."""
    if name not in _BODIES:
        raise ValueError(f"unknown math function {name!r}; have {', '.join(FUNCTIONS)}")
    return f"fgrad_{name}_{_dtype_suffix(dtype)}"


@functools.lru_cache(maxsize=None)
def _host_fma() -> bool:
    from . import engine
    return engine.host_has_feature("fma")


def _host_scalef() -> bool:
    """Whether LLVM lowers `llvm.ldexp` to one instruction here (x86 with
    AVX-512: vscalefps/pd, scalar and on vectors; elsewhere it may become a
    call to libm's ldexp, which would stop the loop vectoriser)."""
    from . import engine
    return engine.host_has_feature("avx512f")


CALL_AFTER_USES = 16


def call_when_used_often(module: ir.Module, uses: dict | None = None,
                         threshold: int = CALL_AFTER_USES):
    """Turn each inlined function called at `threshold` or more sites (`uses`:
    function name -> call sites; default: how often `emit` was asked for each
    in this module) into a called one, as sin and cos are: the
    scalar function becomes `noinline` with `vector-function-abi-variant`
    vector variants (the same body on vectors), so the vectoriser replaces
    each call by one call of a variant. Inlined, each exp costs LLVM about
    5 ms to optimise and compile (200 of them: 1.15 s; as calls: 77 ms); as
    calls they run about as fast up to a handful per loop, 27% slower at 12
    (the variant reloads its constants that the inlined loop keeps in
    registers), hence the threshold."""
    if uses is None:
        uses = getattr(module, "fgrad_math_uses", {})
    for fname, n in uses.items():
        fn = module.globals.get(fname)
        name = fname[len("fgrad_"):-len("_f32")]
        widths = _TRIG_WIDTHS[fname[-3:]]
        if n < threshold or fn is None or name in ("sin", "cos") \
                or f"{fname}_v{widths[0]}" in module.globals:      # done already
            continue
        ty = fn.function_type.return_type
        arity = len(fn.args)
        variants = ",".join(f"_ZGV_LLVM_N{k}{'v' * arity}_{fname}({fname}_v{k})"
                            for k in widths)
        fn.attributes = _VariantAttributes({"vector-function-abi-variant": variants})
        for attr in ("noinline", "nounwind", "readnone"):
            fn.attributes.add(attr)
        for k in widths:
            vty = ir.VectorType(ty, k)
            vf = ir.Function(module, ir.FunctionType(vty, [vty] * arity), f"{fname}_v{k}")
            vf.linkage = "weak_odr"     # kept until the vectoriser has used it
            vf.attributes.add("nounwind")
            vf.attributes.add("readnone")
            b = ir.IRBuilder(vf.append_basic_block("entry"))
            b.ret(_BODIES[name](_Em(b, vty, _host_fma()), *vf.args))


INLINE_TRIG_ELEMENTS = mathlib_runtime.INLINE_TRIG_ELEMENTS


def inline_trig_variants(module: ir.Module):
    """Define here the vector variant, of the width long loops get on this host,
    of each runtime sin and cos that `module` declares (unless called at
    `CALL_AFTER_USES` or more sites), marked to be inlined once the vectoriser
    called it (`engine.LATE_INLINE`). The loop then keeps the constants in
    registers and makes no call per vector (the fused sin·y + exp(-x²) row about
    10% faster); lanes beyond the fast path call the runtime's scalar slow path,
    out of line, so the bits are the runtime's. Compiling the fast path into the
    program costs about 25 ms, so `fused` asks for it for long loops only
    (`INLINE_TRIG_ELEMENTS`)."""
    from . import engine
    inlined = []
    for fname, count in getattr(module, "fgrad_math_uses", {}).items():
        fn = module.globals.get(fname)
        name = fname[len("fgrad_"):-len("_f32")]
        if name not in ("sin", "cos") or count >= CALL_AFTER_USES or fn is None \
                or not fn.is_declaration:
            continue
        ty = fn.function_type.return_type
        lanes = engine.host_vector_bits() // (32 if ty == _F32 else 64)
        vf = module.globals.get(f"{fname}_v{lanes}")
        if vf is None or not vf.is_declaration:
            continue
        # the lanes beyond the fast path: the runtime's scalar slow path (calls
        # of `fn`, which names the variants, could be vectorised back into one
        # of the variant being defined)
        ph = ir.Function(module, ir.FunctionType(ty, [ty]), f"{fname}_ph")
        for attr in ("nounwind", "readonly"):
            ph.attributes.add(attr)
        vf.attributes = _PureAttributes({engine.LATE_INLINE: "true"})
        vf.attributes.add("alwaysinline")
        _emit_variant(module, fname, ir.VectorType(ty, lanes), _host_fma(), name == "cos",
                      ph, vf)
        inlined.append(vf)
    if inlined:
        _unkeep(module, inlined)


def emit(module: ir.Module, name: str, dtype, *, fma: bool | None = None) -> ir.Function:
    """Declare `name` for `dtype` in `module` (once) and return the function.

    `dtype`: float32/float64 as a NumPy dtype (or anything ``np.dtype``
    takes), ``"f32"``/``"f64"`` or an llvmlite float type.  The function
    takes one scalar (two for ``pow``) of the dtype and returns one; it is
    ``internal`` + ``alwaysinline``, except sin/cos, which are called, with
    explicit vector variants (declared: the shared code of `mathlib_runtime`,
    unless `fma` differs from the host's; see the module docstring).  `fma` chooses
    how exact products are formed (float64 pow, huge-argument sin/cos):
    hardware FMA or Dekker's splitting, and whether float32 sin/cos and the
    exp reduction run in float32 with FMA or (sin/cos) in double precision;
    default: whatever the host has.  Results are correct either way.
    """
    fname = function_name(name, dtype)
    uses = module.__dict__.setdefault("fgrad_math_uses", {})   # for call_when_used_often
    uses[fname] = uses.get(fname, 0) + 1
    existing = module.globals.get(fname)
    if existing is not None:
        return existing
    ty = _F32 if fname.endswith("f32") else _F64
    fma = _host_fma() if fma is None else bool(fma)
    if name in ("sin", "cos"):
        if fma == _host_fma():      # the math runtime's code (see mathlib_runtime)
            return _declare_runtime(module, fname, ty)
        return _emit_trig(module, fname, ty, fma, name == "cos")
    fnty = ir.FunctionType(ty, [ty] * ARITY[name])
    fn = ir.Function(module, fnty, fname)
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    fn.attributes.add("nounwind")
    for i, a in enumerate(fn.args):
        a.name = "xy"[i] if ARITY[name] == 2 else "x"
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    em = _Em(builder, ty, fma)
    builder.ret(_BODIES[name](em, *fn.args))
    return fn
