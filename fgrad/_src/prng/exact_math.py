"""log, erf and erf_inv for the random samplers, built only from operations that
IEEE arithmetic rounds correctly (+, -, *, /, sqrt), comparisons, selects and
bit casts, so that NumPy (eager) and compiled code compute the same bits.

Why: fgrad.random promises bit-identical numbers eagerly, under jit and under
vmap. The transcendental primitives do not: eagerly they are NumPy's and
SciPy's, under jit the CPU backend's `mathlib` (and CUDA's on a GPU), and these
may differ in the last bit (normal(key(23), (64,)) differed in 17 of 64
values). Every operation here has one correct result, and the backends neither
reassociate element-wise arithmetic nor contract a*b + c into an fma
(cpu/fused.py, gpu/cuda_c.py), so both paths agree exactly. Only the samplers
use these functions; fgrad.numpy's log/erf keep the faster library versions.

Everything is evaluated in float64 and rounded once to the caller's dtype
(float16/float32: the correctly rounded value except in rare double-rounding
cases; float64: within a few ulp). Inputs are float64 arrays.

Methods:
* log: x = 2^k m with m in [sqrt(1/2), sqrt(2)) by bit manipulation
  (subnormals prescaled by 2^54); log m = f - (f^2/2 - s (f^2/2 + R(s^2))) with
  f = m - 1 (exact), s = f / (2 + f) and R the atanh series
  sum_k 2 z^k / (2k + 1), k = 1..11 (|s| < 0.172, truncation < 2^-60); plus
  k ln2 with ln2 in two parts (k ln2_hi exact).
* erf: x P(x^2) for |x| < 1; 1 - erfc(|x|) with erfc a polynomial in |x| - mid
  on [1, 1.5, 2, 2.5, 3, 4, 5, 6) (absolute error < 3e-17); 1 beyond.
* erf_inv: u Q(u^2) for |u| <= 1/2; otherwise a polynomial in s - mid with
  s = sqrt(-log(1 - |u|)) (1 - |u| is exact) on s in [0.83, 1.5, 2.5, 4, 6.07],
  which covers every float64 |u| < 1 (1 - |u| >= 2^-53).

The polynomials were fitted with mpmath.chebyfit at 60 digits (Chebyshev
interpolation on each interval, in t = x - mid, converted to monomials; the
fit errors are below 1e-18 relative, below the float64 rounding of Horner's
rule); coefficients are listed lowest degree first as hex floats.
"""
import numpy as np

from .. import dtypes, lax
from ..core import Array
from ..custom_derivatives import custom_jvp

_ERF_SMALL = (
    (
        '0x1.20dd750429b6dp+0', '-0x1.812746b0379e6p-2', '0x1.ce2f21a042b30p-4',
        '-0x1.b82ce31284e00p-6', '0x1.565bcd0dbaa38p-8', '-0x1.c02db3dac435fp-11',
        '0x1.f9a321d5b8e1ep-14', '-0x1.f4d1e3183f7aep-17', '0x1.b9df224ca4b97p-20',
        '-0x1.5f1ecb6f0764cp-23', '0x1.f7b4bf3b13964p-27', '-0x1.389d4f2641625p-30',
        '0x1.05ffd737fb32ep-34'),
)
_ERFC = (
    (
        '0x1.3bcd133aa0ffcp-4', '-0x1.e4652fadcb6b2p-3', '0x1.2ebf3dcc9f22fp-2',
        '-0x1.571d01c5c56bep-3', '0x1.93a9a7bb80a3ep-8', '0x1.8281ce0b35106p-5',
        '-0x1.5d0003afa9b53p-6', '-0x1.db43c973154d9p-9', '0x1.75672d24189b3p-8',
        '-0x1.cc2254af80885p-11', '-0x1.a0078bd4938dcp-11', '0x1.53b149881dcfcp-12',
        '0x1.baad99fc0de56p-15', '-0x1.d4368ce52587dp-15', '0x1.6848252bc8ae9p-19',
        '0x1.a5aca541ab638p-18'),
    (
        '0x1.b4be201caa4b4p-7', '-0x1.b055303221015p-5', '0x1.7a4a8a2bdce13p-4',
        '-0x1.7148c3d57c312p-4', '0x1.8a0da543060e5p-5', '-0x1.b22257dd01957p-8',
        '-0x1.25b378c91c97dp-7', '0x1.8d10fb6bb87d8p-8', '-0x1.7ec1d20f5fc9cp-11',
        '-0x1.d4cf0b41dc048p-11', '0x1.d041fd4713df3p-12', '0x1.6d78370b21451p-18',
        '-0x1.200c078de40bdp-14', '0x1.292a40138a9afp-16', '0x1.392b2d7b76a05p-18',
        '-0x1.ac84dbb25f7bep-19'),
    (
        '0x1.7f713f9cc9784p-10', '-0x1.d4143a9dfe965p-8', '0x1.074b60f8df349p-6',
        '-0x1.63ef61e824425p-6', '0x1.38a9832789003p-6', '-0x1.5d3b17bbe0da8p-7',
        '0x1.7cae0d45ea5e6p-9', '0x1.5f8313b640af6p-11', '-0x1.0602e3577326fp-10',
        '0x1.8352cd6259986p-12', '0x1.80c30d5199efep-17', '-0x1.11324e7ddd22bp-14',
        '0x1.7c93c9acf90e7p-16', '0x1.667e6542625f2p-20', '-0x1.c5adf3e3d60a8p-19',
        '0x1.bc289a338c674p-21'),
    (
        '0x1.a609f7584d32cp-14', '-0x1.3360ccd23db3ap-11', '0x1.a6a519a114d69p-10',
        '-0x1.69cf466ccdf60p-9', '0x1.ab0c273ac2ae5p-9', '-0x1.6935960664eefp-9',
        '0x1.b2755bfd28e37p-10', '-0x1.52b6263edca0fp-11', '0x1.75577387fa838p-14',
        '0x1.2abb3c563f803p-14', '-0x1.cd59725544d30p-15', '0x1.09d0d14ef9f43p-16',
        '0x1.204026b71d3c8p-20', '-0x1.68d52d562c1edp-19', '0x1.dcd224c940fb9p-21',
        '0x1.953f803612c9dp-28'),
    (
        '0x1.8ef2a9a18d857p-21', '-0x1.6a597219a4d40p-18', '0x1.3d0e43d673eb6p-16',
        '-0x1.62ccea6434f97p-15', '0x1.1c07721acffaap-14', '-0x1.586bafbe21fa1p-14',
        '0x1.46153fb7c9381p-14', '-0x1.e827fd4218bc3p-15', '0x1.1f63053682c15p-15',
        '-0x1.0134e919898dep-16', '0x1.3773eea504656p-18', '-0x1.ddf29bcdbfe31p-22',
        '-0x1.dc6deed48f01bp-22', '0x1.45dd752d3c772p-22', '-0x1.8db51c3eee3eep-24',
        '0x1.a8fe4bfb167a1p-30', '0x1.3303127da8299p-27'),
    (
        '0x1.b05cfe2e99435p-33', '-0x1.f1e3523c51302p-30', '0x1.180fde4164464p-27',
        '-0x1.99b8664962a4dp-26', '0x1.b598cb433989cp-25', '-0x1.6b1baff71f9eap-24',
        '0x1.e650e39526154p-24', '-0x1.0d6786d14cdb5p-23', '0x1.f5f313845545dp-24',
        '-0x1.8d2f4abdd0e02p-24', '0x1.0c3aac4366dd7p-24', '-0x1.34e0d7fe4408fp-25',
        '0x1.2cc95b74aa551p-26', '-0x1.e659360692f7ep-28', '0x1.3347346815ccap-29',
        '-0x1.bab593e031977p-32', '-0x1.e2c42226d603cp-36'),
    (
        '0x1.09182b326b229p-47', '-0x1.7258603ec956dp-44', '0x1.fd39855df3f78p-42',
        '-0x1.cb12ec89ffce8p-40', '0x1.31011f688e42ep-38', '-0x1.3e49dc9238cd4p-37',
        '0x1.0f6e7e56938ddp-36', '-0x1.84a82904f17a8p-36', '0x1.dc39dc3e6f508p-36',
        '-0x1.fa4f047bf68f6p-36', '0x1.d868253c2d55fp-36', '-0x1.86de26537be03p-36',
        '0x1.1df9da93ad9dcp-36', '-0x1.6a67911c5f5dbp-37', '0x1.ac8308069f667p-38',
        '-0x1.14406bc177bbdp-38', '0x1.e9a8fd616b951p-40'),
)
_ERFINV_CENTRAL = (
    (
        '0x1.c5bf891b4ef6bp-1', '0x1.db29fb2fee5d7p-3', '0x1.053c2c0aba07cp-3',
        '0x1.62847c4705debp-4', '0x1.0a1318d0130dcp-4', '0x1.a7c84db275d4ap-5',
        '0x1.5eec804dd7c46p-5', '0x1.2aa3f3e188ee7p-5', '0x1.049c5b96cfb40p-5',
        '0x1.b9dcba921c856p-6', '0x1.fa6e99af1c795p-6', '-0x1.7eea0f1d96346p-10',
        '0x1.6549e2528d134p-4', '-0x1.8af293987967fp-4', '0x1.ebabd1a6a2469p-4'),
)
_ERFINV_TAIL = (
    (
        '0x1.9a0d5817ff2a7p-1', '0x1.0262a77ff90a3p+0', '0x1.2bd9fcad52b21p-4',
        '-0x1.31c9070780106p-4', '0x1.a96af1cd86648p-5', '-0x1.ca7a61d2eabd7p-6',
        '0x1.629ebef7430b1p-7', '-0x1.5ec8e417ac83ap-10', '-0x1.3bebfb8d994b2p-9',
        '0x1.79619c10b5fb1p-9', '-0x1.06a7ab49635fep-9', '0x1.ebf69cae1b930p-11',
        '-0x1.7811f37f6c65ep-13', '-0x1.8bcb5179eb434p-13', '0x1.1f1dbc6a20431p-12',
        '-0x1.c0dd8137c325ep-13', '0x1.8647ddabdfd12p-14'),
    (
        '0x1.ab0e63b50a61cp+0', '0x1.0caf81c5f0051p+0', '0x1.d4e0cab7b161fp-11',
        '-0x1.d4f2c5392c8f2p-8', '0x1.51a5a283b550ap-8', '-0x1.6b85a7836f480p-9',
        '0x1.52215c9f99758p-10', '-0x1.1998a4971a10dp-11', '0x1.a41193777ba6bp-13',
        '-0x1.0ff908766ca76p-14', '0x1.12273eac56dd5p-16', '-0x1.ae6c3ed103fd5p-20',
        '-0x1.a41cc9cc6ae5ap-20', '0x1.8a1143d918bbfp-20', '-0x1.dd28f8d2f5727p-21',
        '0x1.0f9b8182d3f99p-21', '-0x1.ad0eec8542804p-23'),
    (
        '0x1.7cc84198493d9p+1', '0x1.0a0012199f333p+0', '-0x1.5a2f7c2f73820p-8',
        '0x1.54fc01a686a06p-12', '0x1.66a69d9dead9fp-13', '-0x1.ca737060db2cbp-14',
        '0x1.787121ad50925p-15', '-0x1.084cefa3868d2p-16', '0x1.5444b07de8339p-18',
        '-0x1.9c6e3634ec642p-20', '0x1.dc0eee77d12acp-22', '-0x1.06c0182bf5c64p-23',
        '0x1.151588bd87159p-25', '-0x1.1535b7d610dc9p-27', '0x1.0596ee530ffc8p-29',
        '-0x1.cef7ef95423dbp-32', '0x1.2dc8c43aa80d2p-34'),
    (
        '0x1.342cf0920c959p+2', '0x1.063fca74c1950p+0', '-0x1.8674bd3ee34e6p-9',
        '0x1.6e47b567789a1p-12', '-0x1.1f47d1547eee7p-15', '0x1.81cc46c88ec9ap-20',
        '0x1.286f51511305ap-21', '-0x1.02a95652078f8p-22', '0x1.24cce50998b6ep-24',
        '-0x1.1d46e96449d34p-26', '0x1.00ed2d850a73fp-28', '-0x1.b871422df6dd6p-31',
        '0x1.6bfc79a693595p-33', '-0x1.20abeeac6809cp-35', '0x1.c5905a278a6d2p-38',
        '-0x1.9d9841fb5bbe0p-40', '0x1.35b05e5f34407p-42'),
)

_ERFC_EDGES = (1.5, 2.0, 2.5, 3.0, 4.0, 5.0)
_ERFC_MIDS = (1.25, 1.75, 2.25, 2.75, 3.5, 4.5, 5.5)
_ERFINV_EDGES = (1.5, 2.5, 4.0)
_ERFINV_MIDS = (1.165, 2.0, 3.25, 5.035)
_LN2_HI = float.fromhex("0x1.62e42fee00000p-1")      # 32 trailing zero bits
_LN2_LO = float.fromhex("0x1.a39ef35793c76p-33")
_ATANH_SERIES = tuple(2.0 / (2 * k + 1) for k in range(1, 12))
_F64 = dtypes.float64


def _floats(table):
    """Hex coefficient rows as floats, zero-padded to one length."""
    rows = [[float.fromhex(c) for c in row] for row in table]
    n = max(len(r) for r in rows)
    return [r + [0.0] * (n - len(r)) for r in rows]


def _const(value):
    """A float64 scalar (select_n broadcasts it)."""
    return Array(np.asarray(value, np.float64), False)


def _horner(t, coeffs):
    """sum_i coeffs[i] t^i, each coefficient a float or an array."""
    acc = coeffs[-1]
    for c in reversed(coeffs[:-1]):
        acc = lax.add(lax.mul(acc, t), c)
    return acc


def _pick(below, values):
    """values[i] where x lies in the i-th interval; below[i] is x < the i-th edge."""
    out = _const(values[-1])
    for cond, value in reversed(list(zip(below, values[:-1]))):
        out = lax.select_n(cond, out, _const(value))
    return out


def _piecewise(x, edges, mids, table):
    """The polynomial of x's interval (cut by ascending `edges`), in x - mid."""
    rows = _floats(table)
    below = [lax.lt(x, edge) for edge in edges]
    t = lax.sub(x, _pick(below, mids))
    return _horner(t, [_pick(below, [row[i] for row in rows]) for i in range(len(rows[0]))])


def _signed(x, magnitude):
    """magnitude with x's sign (x < 0 gives -magnitude)."""
    return lax.select_n(lax.lt(x, 0.0), magnitude, lax.neg(magnitude))


@custom_jvp
def log(x):
    """Natural log of a float64 array (log 0 = -inf, log of negatives NaN); its
    derivative is 1/x (the bit manipulation has none)."""
    tiny = lax.lt(x, np.finfo(np.float64).tiny)
    xs = lax.mul(x, lax.select_n(tiny, _const(1.0), _const(2.0 ** 54)))
    bits = lax.bitcast_convert_type(xs, dtypes.int64)
    sqrt_half = 0x3FE6A09E667F3BCD                      # bits of sqrt(1/2)
    ix = lax.add(bits, lax.full((), 0x3FF0000000000000 - sqrt_half, dtypes.int64))
    k = lax.sub(lax.shift_right_arithmetic(ix, lax.full((), 52, dtypes.int64)),
                lax.select_n(tiny, lax.full((), 1023, dtypes.int64),
                             lax.full((), 1023 + 54, dtypes.int64)))
    mant = lax.bitwise_and(ix, lax.full((), (1 << 52) - 1, dtypes.int64))
    m = lax.bitcast_convert_type(lax.add(mant, lax.full((), sqrt_half, dtypes.int64)), _F64)
    f = lax.sub(m, 1.0)
    hfsq = lax.mul(lax.mul(f, f), 0.5)
    s = lax.div(f, lax.add(f, 2.0))
    z = lax.mul(s, s)
    r = lax.mul(z, _horner(z, list(_ATANH_SERIES)))
    kf = lax.convert_element_type(k, _F64)
    inner = lax.add(lax.mul(s, lax.add(hfsq, r)), lax.mul(kf, _LN2_LO))
    out = lax.sub(lax.mul(kf, _LN2_HI), lax.sub(lax.sub(hfsq, inner), f))
    out = lax.select_n(lax.lt(x, 0.0), out, _const(np.nan))
    out = lax.select_n(lax.eq(x, 0.0), out, _const(-np.inf))
    out = lax.select_n(lax.eq(x, np.inf), out, _const(np.inf))
    return lax.select_n(lax.ne(x, x), out, x)


@log.defjvp
def _log_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return log(x), lax.div(t, x)


def erf(x):
    """The error function of a float64 array."""
    ax = lax.abs(x)
    small = lax.mul(x, _horner(lax.mul(x, x), _floats(_ERF_SMALL)[0]))
    large = lax.sub(1.0, _piecewise(ax, _ERFC_EDGES, _ERFC_MIDS, _ERFC))
    out = lax.select_n(lax.lt(ax, 6.0), _const(1.0), large)
    out = lax.select_n(lax.lt(ax, 1.0), _signed(x, out), small)
    return lax.select_n(lax.ne(x, x), out, x)


def erf_inv(u):
    """The inverse error function of a float64 array (+-inf at +-1, NaN beyond)."""
    au = lax.abs(u)
    central = lax.mul(u, _horner(lax.mul(u, u), _floats(_ERFINV_CENTRAL)[0]))
    d = lax.sub(1.0, lax.max(au, _const(0.5)))       # exact for |u| >= 1/2
    s = lax.sqrt(lax.neg(log(lax.max(d, _const(2.0 ** -60)))))
    tail = _signed(u, _piecewise(s, _ERFINV_EDGES, _ERFINV_MIDS, _ERFINV_TAIL))
    out = lax.select_n(lax.le(au, 0.5), tail, central)
    out = lax.select_n(lax.eq(au, 1.0), out, _signed(u, _const(np.inf)))
    out = lax.select_n(lax.gt(au, 1.0), out, _const(np.nan))
    return lax.select_n(lax.ne(u, u), out, u)
