"""Batching rules of every lax primitive, checked against a loop over examples.

For each case (a lax function with static parameters and example operands), the
vmapped function must equal stacking the function over slices, in value and dtype:
with in_axes 0, 1 and -1 on every operand, with only some operands batched, with
different axes on different operands, and under nested vmap. The batched function
is also traced with make_jaxpr (which type-checks the jaxpr: see conftest.py) and
the jaxpr run. Every primitive of fgrad's lax must have at least one case.
"""
import importlib
import pkgutil
from typing import Callable, NamedTuple

import numpy as np
import pytest

import fgrad
from fgrad import lax
from fgrad._src import batching, core
from fgrad._src import lax as lax_src
from fgrad._src.ad import custom_lin_p
from fgrad._src.jaxpr import eval_closed

B = 5            # batch size of one vmap
B_INNER, B_OUTER = 3, 2

f64, f32, i32, i64, u8, u32 = (np.dtype(t) for t in
                               ("float64", "float32", "int32", "int64", "uint8", "uint32"))
boolean = np.dtype(bool)


# ----------------------------------------------------------------------------
# Operand specs and cases

class Arg(NamedTuple):
    """An operand's per-example shape and dtype, and how to draw valid values."""
    shape: tuple
    dtype: np.dtype
    domain: object = "real"   # "real", "pos", "unit", "nonzero", "half", "small",
    #                           "bool", or (lo, hi) for integers in [lo, hi)

    def draw(self, rng, shape):
        d, dt = self.domain, self.dtype
        if dt == boolean or d == "bool":
            return rng.random(shape) < 0.5
        if isinstance(d, tuple):
            return rng.integers(d[0], d[1], size=shape).astype(dt)
        if d == "pos":
            v = rng.uniform(0.5, 2.0, shape)
        elif d == "unit":
            v = rng.uniform(-0.9, 0.9, shape)
        elif d == "nonzero":
            v = rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
        elif d == "half":   # ties for rounding
            v = rng.integers(-4, 4, shape) + 0.5
        elif d == "small":  # repeated values, for comparisons and extrema
            v = rng.integers(-2, 3, shape).astype(float)
        else:
            v = rng.standard_normal(shape)
        if dt.kind == "c":  # the domain's values turned by a random angle
            v = v * np.exp(1j * rng.uniform(-np.pi, np.pi, shape))
        return np.asarray(v).astype(dt)


def F(*shape, domain="real", dtype=f64):
    return Arg(tuple(shape), np.dtype(dtype), domain)


def I(*shape, lo=-4, hi=5, dtype=i32):
    return Arg(tuple(shape), np.dtype(dtype), (lo, hi))


def Bool(*shape):
    return Arg(tuple(shape), boolean, "bool")


class Case(NamedTuple):
    prim: str          # the primitive this case is for
    name: str
    fun: Callable
    args: tuple

    def __repr__(self):
        return f"{self.prim}:{self.name}"


CASES = []


def case(prim, name, fun, *args):
    CASES.append(Case(prim, name, fun, tuple(args)))


# Element-wise: unary

for _name, _dom in [("neg", "real"), ("sign", "small"), ("floor", "real"), ("ceil", "real"),
                    ("exp", "real"), ("log", "pos"), ("log1p", "pos"), ("expm1", "real"),
                    ("sin", "real"), ("cos", "real"), ("tan", "unit"), ("tanh", "real"),
                    ("sqrt", "pos"), ("rsqrt", "pos"), ("logistic", "real"), ("erf", "real"),
                    ("erf_inv", "unit"), ("abs", "real"), ("is_finite", "real"),
                    ("stop_gradient", "real")]:
    case(_name, "f64", getattr(lax, _name), F(2, 3, domain=_dom))
case("neg", "int", lax.neg, I(4))
case("abs", "scalar", lax.abs, F())
case("sign", "int", lax.sign, I(3, 2))
case("round", "away", lambda x: lax.round(x, "away_from_zero"), F(2, 3, domain="half"))
case("round", "even", lambda x: lax.round(x, "to_nearest_even"), F(4, domain="half"))
case("integer_pow", "cube", lambda x: lax.integer_pow(x, 3), F(2, 3))
case("integer_pow", "neg", lambda x: lax.integer_pow(x, -2), F(3, domain="nonzero"))
case("integer_pow", "int", lambda x: lax.integer_pow(x, 2), I(2, 2))
case("not", "int", lax.bitwise_not, I(2, 3, lo=-100, hi=100))
case("not", "bool", lax.bitwise_not, Bool(4))
case("population_count", "int", lax.population_count, I(2, 3, lo=-1000, hi=1000))
case("population_count", "uint8", lax.population_count, I(5, lo=0, hi=256, dtype=u8))
case("convert_element_type", "f2i", lambda x: lax.convert_element_type(x, i32), F(2, 3))
case("convert_element_type", "i2f", lambda x: lax.convert_element_type(x, f64), I(3))
case("convert_element_type", "f2b", lambda x: lax.convert_element_type(x, boolean),
     F(2, 2, domain="small"))
case("convert_element_type", "f2f32", lambda x: lax.convert_element_type(x, f32), F(3, 1))
case("bitcast_convert_type", "f2i", lambda x: lax.bitcast_convert_type(x, i64), F(2, 3))
case("bitcast_convert_type", "i2f32", lambda x: lax.bitcast_convert_type(x, f32),
     I(3, lo=0, hi=2 ** 20))

# Element-wise: complex numbers

c64, c128 = np.dtype("complex64"), np.dtype("complex128")
for _name in ("real", "imag", "conj", "exp", "abs", "sqrt", "neg"):
    case(_name, "c128", getattr(lax, _name), F(2, 3, domain="pos", dtype=c128))
case("real", "c64", lax.real, F(3, dtype=c64))
for _name in ("asin", "acos", "atan", "asinh", "acosh", "atanh"):
    case(_name, "c128", getattr(lax, _name), F(2, 3, domain="unit", dtype=c128))
case("asin", "f64", lax.asin, F(4, domain="unit"))
case("complex", "same", lax.complex, F(2, 3), F(2, 3))
case("complex", "bcast", lax.complex, F(2, 1, dtype=f32), F(3, dtype=f32))
case("mul", "c64", lax.mul, F(2, 3, dtype=c64), F(3, dtype=c64))
case("div", "c128", lax.div, F(3, 1, dtype=c128), F(1, 2, domain="pos", dtype=c128))
case("convert_element_type", "f2c", lambda x: lax.convert_element_type(x, c128), F(2, 3))
case("convert_element_type", "c2f", lambda x: lax.convert_element_type(x, f32),
     F(2, 3, dtype=c64))

# Element-wise: binary, with NumPy broadcasting between operands of different ranks

_binary = [("add", "real", "real"), ("sub", "real", "real"), ("mul", "real", "real"),
           ("div", "real", "nonzero"), ("rem", "real", "nonzero"), ("max", "small", "small"),
           ("min", "small", "small"), ("pow", "pos", "real"), ("atan2", "real", "nonzero"),
           ("eq", "small", "small"), ("ne", "small", "small"), ("lt", "small", "small"),
           ("le", "small", "small"), ("gt", "small", "small"), ("ge", "small", "small")]
for _name, _d1, _d2 in _binary:
    _f = getattr(lax, _name)
    case(_name, "same", _f, F(2, 3, domain=_d1), F(2, 3, domain=_d2))
    case(_name, "bcast_rank", _f, F(2, 3, domain=_d1), F(3, domain=_d2))
    case(_name, "bcast_ones", _f, F(2, 1, domain=_d1), F(1, 3, domain=_d2))
    case(_name, "scalar", _f, F(domain=_d1), F(2, 3, domain=_d2))
case("add", "int", lax.add, I(2, 3), I(3))
case("div", "int", lax.div, I(2, 3, lo=-9, hi=10), I(3, lo=1, hi=4))
case("rem", "int", lax.rem, I(4, lo=-9, hi=10), I(4, lo=1, hi=4))
case("max", "int", lax.max, I(3, 1), I(1, 2))
case("eq", "bool", lax.eq, Bool(2, 3), Bool(3))
case("lt", "int", lax.lt, I(3), I(2, 3))
for _name, _f in [("and", lax.bitwise_and), ("or", lax.bitwise_or), ("xor", lax.bitwise_xor)]:
    case(_name, "int", _f, I(2, 3, lo=-50, hi=50), I(3, lo=-50, hi=50))
    case(_name, "bool", _f, Bool(2, 1), Bool(1, 3))
    case(_name, "uint", _f, I(4, lo=0, hi=256, dtype=u8), I(4, lo=0, hi=256, dtype=u8))
for _name in ["shift_left", "shift_right_logical", "shift_right_arithmetic"]:
    _f = getattr(lax, _name)
    case(_name, "int32", _f, I(2, 3, lo=-1000, hi=1000), I(2, 3, lo=-1, hi=35))
    case(_name, "uint32", _f, I(4, lo=0, hi=2 ** 31, dtype=u32),
         I(4, lo=0, hi=34, dtype=u32))
    case(_name, "bcast", _f, I(2, 1, lo=-1000, hi=1000), I(3, lo=0, hi=32))

case("select_n", "bool", lax.select_n, Bool(2, 3), F(2, 3), F(2, 3))
case("select_n", "bcast", lax.select_n, Bool(3), F(2, 3), F(2, 1))
case("select_n", "int3", lax.select_n, I(2, 3, lo=0, hi=3), F(2, 3), F(3), F(2, 3))
case("select_n", "one", lax.select_n, Bool(2, 3), I(2, 3))
case("select_n", "scalar_which", lax.select_n, Bool(), F(3), F(3))

# Reductions

for _name, _dom, _dtype in [("reduce_sum", "real", f64), ("reduce_prod", "real", f64),
                            ("reduce_max", "small", f64), ("reduce_min", "small", f64),
                            ("reduce_and", "bool", boolean), ("reduce_or", "bool", boolean)]:
    _f = getattr(lax, _name)
    for _axes in [(0,), (1,), (0, 2), (0, 1, 2)]:
        case(_name, f"axes{_axes}", lambda x, _f=_f, _axes=_axes: _f(x, _axes),
             Arg((2, 3, 4), _dtype, _dom))
case("reduce_sum", "int", lambda x: lax.reduce_sum(x, (1,)), I(2, 3))
case("reduce_max", "int", lambda x: lax.reduce_max(x, (0,)), I(3, 2))
for _name in ["argmax", "argmin"]:
    _f = getattr(lax, _name)
    case(_name, "axis0", lambda x, _f=_f: _f(x, 0, i32), F(4, 3))
    case(_name, "axis1_i64", lambda x, _f=_f: _f(x, 1, i64), F(2, 4, 3))
    case(_name, "int", lambda x, _f=_f: _f(x, 0, i32), I(5, lo=-100, hi=100))

# Shape ops

case("broadcast_in_dim", "lead", lambda x: lax.broadcast_in_dim(x, (3, 2), (1,)), F(2))
case("broadcast_in_dim", "ones", lambda x: lax.broadcast_in_dim(x, (2, 4, 3), (0, 2)),
     F(2, 1))
case("broadcast_in_dim", "scalar", lambda x: lax.broadcast_in_dim(x, (2, 3), ()), F())
case("broadcast_in_dim", "mid", lambda x: lax.broadcast_in_dim(x, (2, 5, 3, 4), (0, 2)),
     F(2, 3))
case("reshape", "merge", lambda x: lax.reshape(x, (6,)), F(2, 3))
case("reshape", "split", lambda x: lax.reshape(x, (2, 3)), F(6))
case("reshape", "regroup", lambda x: lax.reshape(x, (3, 2, 2)), F(2, 6))
case("reshape", "to_scalar", lambda x: lax.reshape(x, ()), F(1, 1))
case("transpose", "perm3", lambda x: lax.transpose(x, (2, 0, 1)), F(2, 3, 4))
case("transpose", "swap", lambda x: lax.transpose(x, (1, 0)), I(2, 3))
case("squeeze", "mid", lambda x: lax.squeeze(x, (1,)), F(2, 1, 3))
case("squeeze", "two", lambda x: lax.squeeze(x, (0, 2)), F(1, 3, 1))
case("expand_dims", "front", lambda x: lax.expand_dims(x, (0,)), F(2, 3))
case("expand_dims", "many", lambda x: lax.expand_dims(x, (1, 3)), F(2, 3))
case("expand_dims", "scalar", lambda x: lax.expand_dims(x, (0,)), F())

# Slicing

case("slice", "strided", lambda x: lax.slice(x, (1, 0), (5, 6), (2, 3)), F(5, 6))
case("slice", "plain", lambda x: lax.slice(x, (0, 2, 1), (2, 4, 3)), F(3, 5, 4))
case("slice", "empty", lambda x: lax.slice(x, (2,), (2,)), F(4))
case("pad", "lohi", lambda x, v: lax.pad(x, v, ((1, 2, 0), (0, 1, 0))), F(2, 3), F())
case("pad", "interior", lambda x, v: lax.pad(x, v, ((0, 0, 1), (2, 0, 2))), F(3, 2), F())
case("pad", "int", lambda x, v: lax.pad(x, v, ((1, 1, 1),)), I(3), I())
case("pad", "bool", lambda x, v: lax.pad(x, v, ((1, 0, 0), (0, 1, 1))), Bool(2, 2), Bool())
case("pad", "scalar_operand", lambda x, v: lax.pad(x, v, ()), F(), F())
case("concatenate", "three", lambda a, b, c: lax.concatenate([a, b, c], 1),
     F(2, 1), F(2, 3), F(2, 2))
case("concatenate", "dim0", lambda a, b: lax.concatenate([a, b], 0), I(1, 3), I(2, 3))
case("concatenate", "one", lambda a: lax.concatenate([a], 0), F(3))
case("rev", "two", lambda x: lax.rev(x, (0, 2)), F(2, 3, 4))
case("rev", "none", lambda x: lax.rev(x, ()), F(3))
case("iota", "plus", lambda x: lax.add(x, lax.iota(f64, (2, 3), 1)), F(2, 3))
case("iota", "int", lambda x: lax.mul(x, lax.iota(i32, 4)), I(4))
# Starts in [-3, 7) on dims of 5 and 6: some windows get clamped back into range.
case("dynamic_slice", "2d", lambda x, i, j: lax.dynamic_slice(x, (i, j), (2, 3)),
     F(5, 6), I(lo=-3, hi=7), I(lo=-3, hi=7))
case("dynamic_slice", "3d_mixed_dtypes",
     lambda x, i, j, k: lax.dynamic_slice(x, (i, j, k), (1, 2, 4)),
     F(3, 4, 5), I(lo=-1, hi=4), I(lo=0, hi=5, dtype=i64), I(lo=0, hi=4, dtype=u8))
case("dynamic_slice", "1d_int", lambda x, i: lax.dynamic_slice(x, (i,), (3,)),
     I(6), I(lo=-2, hi=8))
case("dynamic_slice", "full", lambda x, i: lax.dynamic_slice(x, (i,), (4,)), F(4), I())
case("dynamic_update_slice", "2d",
     lambda x, u, i, j: lax.dynamic_update_slice(x, u, (i, j)),
     F(5, 6), F(2, 3), I(lo=-3, hi=7), I(lo=-3, hi=7))
case("dynamic_update_slice", "3d_mixed_dtypes",
     lambda x, u, i, j, k: lax.dynamic_update_slice(x, u, (i, j, k)),
     I(3, 4, 5), I(2, 1, 3), I(lo=-1, hi=4, dtype=i64), I(lo=0, hi=5), I(lo=0, hi=6, dtype=u8))
case("dynamic_update_slice", "bool", lambda x, u, i: lax.dynamic_update_slice(x, u, (i,)),
     Bool(6), Bool(2), I(lo=-2, hi=8))

# Gather and scatter. Index values run past both ends: gather clamps them, the
# scatters drop them, and few distinct values give duplicate indices.

case("gather", "rows", lambda x, i: lax.gather(x, [i], (0,)), F(5, 4), I(3, lo=-2, hi=7))
case("gather", "cols", lambda x, i: lax.gather(x, [i], (1,)), F(3, 5), I(2, 2, lo=0, hi=5))
case("gather", "two_axes", lambda x, i, j: lax.gather(x, [i, j], (2, 0)),
     F(4, 3, 5), I(2, 3, lo=-1, hi=6), I(2, 3, lo=0, hi=4))
case("gather", "scalar_index", lambda x, i: lax.gather(x, [i], (1,)), I(3, 4), I(lo=0, hi=4))
case("gather", "all_axes", lambda x, i, j: lax.gather(x, [i, j], (0, 1)),
     F(3, 4), I(5, lo=0, hi=3), I(5, lo=0, hi=4))
_scatter_domains = {"scatter": "real", "scatter_add": "real", "scatter_mul": "pos",
                    "scatter_min": "small", "scatter_max": "small"}
for _name, _dom in _scatter_domains.items():
    _f = getattr(lax, _name)
    case(_name, "rows", lambda x, i, u, _f=_f: _f(x, [i], u, (0,)),
         F(5, 4, domain=_dom), I(6, lo=-1, hi=6), F(6, 4, domain=_dom))
    case(_name, "two_axes", lambda x, i, j, u, _f=_f: _f(x, [i, j], u, (2, 0)),
         F(4, 3, 5, domain=_dom), I(2, 2, lo=0, hi=5), I(2, 2, lo=-1, hi=4),
         F(2, 2, 3, domain=_dom))
    case(_name, "int_scalar_index", lambda x, i, u, _f=_f: _f(x, [i], u, (1,)),
         I(3, 4, lo=-3, hi=4), I(lo=-1, hi=5), I(3, lo=-3, hi=4))
case("scatter", "bool", lambda x, i, u: lax.scatter(x, [i], u, (0,)),
     Bool(4), I(5, lo=0, hi=4), Bool(5))

# dot_general: ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))

_DOTS = [
    ("matmul", (3, 4), (4, 5), (((1,), (0,)), ((), ()))),
    ("contract_lead", (4, 3), (5, 4), (((0,), (1,)), ((), ()))),
    ("batch_mid", (3, 2, 4), (4, 2, 5), (((2,), (0,)), ((1,), (1,)))),
    ("batch_last", (4, 3, 2), (2, 5, 4), (((0,), (2,)), ((2,), (0,)))),
    ("bcast_lhs", (1, 3, 4), (2, 4, 5), (((2,), (1,)), ((0,), (0,)))),
    ("bcast_rhs", (3, 4, 2), (4, 1), (((1,), (0,)), ((2,), (1,)))),
    ("two_contract", (2, 3, 4), (4, 5, 2), (((0, 2), (2, 0)), ((), ()))),
    ("vector", (4,), (4,), (((0,), (0,)), ((), ()))),
    ("outer", (3,), (2,), (((), ()), ((), ()))),
]
for _name, _ls, _rs, _dn in _DOTS:
    case("dot_general", _name, lambda a, b, _dn=_dn: lax.dot_general(a, b, _dn),
         F(*_ls), F(*_rs))
case("dot_general", "int", lambda a, b: lax.dot_general(a, b, (((1,), (0,)), ((), ()))),
     I(2, 3), I(3, 2))
case("dot_general", "preferred",
     lambda a, b: lax.dot_general(a, b, (((0,), (0,)), ((), ())), preferred_element_type=f64),
     F(3, 2, dtype=f32), F(3, dtype=f32))

# Convolution: lhs / rhs / both batched fold into batch, out-feature or group axes

_CONVS = [
    ("plain_1d", (2, 3, 6), (4, 3, 2), dict(window_strides=(2,), padding="SAME")),
    ("groups_2d", (2, 4, 5, 4), (6, 2, 2, 3),
     dict(window_strides=(1, 2), padding=((1, 0), (0, 1)), lhs_dilation=(2, 1),
          rhs_dilation=(1, 2), feature_group_count=2)),
    ("batch_groups", (4, 3, 5), (4, 3, 2),
     dict(window_strides=(1,), padding="VALID", batch_group_count=2)),
    ("nhwc", (2, 5, 4, 3), (2, 2, 3, 4),
     dict(window_strides=(1, 1), padding="SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))),
]
for _name, _ls, _rs, _kw in _CONVS:
    case("conv_general_dilated", _name,
         lambda a, b, _kw=_kw: lax.conv_general_dilated(a, b, **_kw), F(*_ls), F(*_rs))

# Windowed maximum and its derivative primitives (the batch dim gets a window of one)

_WIN = dict(window_dimensions=(2, 3), window_strides=(2, 1), window_dilation=(1, 2))
case("reduce_window_max", "strided_dilated",
     lambda x: lax_src.windows.reduce_window_max_p.bind(x, **_WIN), F(5, 7))
case("select_and_gather_add", "strided_dilated",
     lambda t, x: lax_src.windows.select_and_gather_add_p.bind(t, x, **_WIN), F(5, 7), F(5, 7))
case("select_and_scatter_add", "strided_dilated",
     lambda g, x: lax_src.windows.select_and_scatter_add_p.bind(g, x, **_WIN), F(2, 3), F(5, 7))

# Cumulative

for _name, _dom in [("cumsum", "real"), ("cumprod", "real"), ("cummax", "small"),
                    ("cummin", "small")]:
    _f = getattr(lax, _name)
    case(_name, "axis0", lambda x, _f=_f: _f(x, 0), F(4, 3, domain=_dom))
    case(_name, "axis1_rev", lambda x, _f=_f: _f(x, 1, reverse=True), F(2, 4, 3, domain=_dom))
    case(_name, "int", lambda x, _f=_f: _f(x, 0, reverse=True), I(5, lo=-3, hi=4))

# Sorting (ties in the keys check stability; carried operands follow the keys)

case("sort", "axis1", lambda x: lax.sort(x, 1), F(3, 4, domain="small"))
case("sort", "key_val", lambda k, v: lax.sort_key_val(k, v, 0)[1], I(4, 3, lo=0, hi=3), F(4, 3))
case("sort", "two_keys", lambda a, b, c: lax.sort((a, b, c), 0, num_keys=2)[2],
     I(6, lo=0, hi=2), F(6, domain="small"), F(6))

# FFT (the batch dim moves to the front only when it lands among the transformed axes)

case("fft", "rfft", lambda x: lax.fft(x, "rfft", (6,)), F(3, 6))
case("fft", "rfft2_odd", lambda x: lax.fft(x, "rfft", (3, 5)), F(3, 5))
case("fft", "fft2", lambda x: lax.fft(x, "fft", (3, 4)), F(2, 3, 4, dtype=c128))
case("fft", "ifft_c64", lambda x: lax.fft(x, "ifft", (5,)), F(2, 5, dtype=c64))
case("fft", "irfft_even", lambda x: lax.fft(x, "irfft", (6,)), F(3, 4, dtype=c128))
case("fft", "irfft2_odd", lambda x: lax.fft(x, "irfft", (2, 5)), F(2, 3, dtype=c128))
# Linear algebra (the primitives map over leading dims; the rule moves the batch dim there)

def _spd(x):
    """A well-conditioned symmetric positive definite matrix made from x."""
    return lax.add(lax.dot_general(x, x, (((1,), (1,)), ((), ()))), 3.0 * np.eye(x.shape[-1]))


def _well_conditioned(a):
    return lax.add(a, 3.0 * np.eye(a.shape[-1]))


case("cholesky", "spd", lambda x: lax.linalg.cholesky(_spd(x)), F(3, 3))
case("cholesky", "not_pd", lax.linalg.cholesky, F(3, 3))  # NaN where not positive definite
case("triangular_solve", "left_lower", lambda a, b: lax.linalg.triangular_solve(
    _well_conditioned(a), b, left_side=True, lower=True), F(3, 3), F(3, 2))
case("triangular_solve", "right_upper_t", lambda a, b: lax.linalg.triangular_solve(
    _well_conditioned(a), b, transpose_a=True, unit_diagonal=True), F(3, 3), F(2, 3))
case("lu", "lu", lambda x: lax.linalg.lu(x)[0], F(4, 3))
case("lu", "pivots", lambda x: lax.linalg.lu(x)[1], F(3, 4))
case("lu", "permutation", lambda x: lax.linalg.lu(x)[2], F(4, 4))
case("inv", "inv", lambda x: lax.linalg.inv(_well_conditioned(x)), F(3, 3))
case("qr", "q_reduced", lambda x: lax.linalg.qr(x, full_matrices=False)[0], F(4, 3))
case("qr", "r_complete", lambda x: lax.linalg.qr(x, full_matrices=True)[1], F(4, 3))
case("eigh", "w", lambda x: lax.linalg.eigh(x)[1], F(3, 3))
case("eigh", "v_upper", lambda x: lax.linalg.eigh(_spd(x), lower=False)[0], F(3, 3))
case("svd", "s", lambda x: lax.linalg.svd(x, compute_uv=False), F(4, 3))
case("svd", "u_full", lambda x: lax.linalg.svd(x)[0], F(3, 4))
case("eig", "w", lambda x: lax.linalg.eig(x, compute_right_eigenvectors=False)[0], F(3, 3))
case("eig", "vr", lambda x: lax.linalg.eig(x)[1], F(3, 3))
case("eig", "vl", lambda x: lax.linalg.eig(x, True, False)[1], F(3, 3))
case("svd", "vt_reduced", lambda x: lax.linalg.svd(x, full_matrices=False)[2], F(4, 3))

# Control flow (a batched predicate or index selects per member)

case("cond", "cond", lambda p, x: lax.cond(p, lax.sin, lambda x: lax.mul(x, 2.0), x),
     Bool(), F(2, 3))
case("cond", "switch", lambda i, x: lax.switch(i, [lax.sin, lax.cos, lax.neg], x),
     I(lo=-1, hi=4), F(3))
# a cond whose index is batched (what vmap makes of cond): batched once more here
case("cond_lanes", "switch", lambda i, x: fgrad.vmap(
    lambda i, x: lax.switch(i, [lax.sin, lax.cos, lax.neg], x))(i, x), I(4, lo=-1, hi=4), F(4, 3))
case("cond_lanes", "shared_operand", lambda p, x, w: fgrad.vmap(
    lambda p, x: lax.cond(p, lambda x: lax.mul(x, w), lambda x: lax.sub(x, w), x))(p, x),
     Bool(4), F(4), F(4))
case("scan", "carry_and_ys",
     lambda c, xs: (lambda out: lax.add(out[0], lax.reduce_sum(out[1], (0,))))(
         lax.scan(lambda c, x: (lax.add(lax.sin(c), x), lax.mul(c, x)), c, xs)),
     F(3), F(4, 3))
case("while", "counted", lambda x, n: lax.while_loop(
    lambda s: lax.lt(s[0], n), lambda s: (lax.add(s[0], 1), lax.mul(s[1], 1.5)), (0, x))[1],
     F(3), I(lo=0, hi=5))


# Special functions (lax/special.py): element-wise, like the binary ops above
from fgrad._src.lax import special as _special  # noqa: E402

for _name, _dom in [("gammaln", "pos"), ("digamma", "pos"), ("gamma", "pos"), ("erfc", "real"),
                    ("erfcx", "real"), ("ndtr", "real"), ("log_ndtr", "real"), ("i0", "real"), ("i0e", "real"), ("i1", "real"),
                    ("i1e", "real"), ("zetac", "pos"), ("entr", "pos")]:
    case(_name, "f64", getattr(_special, _name), F(2, 3, domain=_dom))
case("ndtri", "f32", lambda p: _special.ndtri(lax.mul(p, 0.4)), F(2, 3, domain="pos", dtype=f32))
for _name in ("beta", "betaln", "gammainc", "gammaincc", "xlogy", "xlog1py", "xdivy", "zeta",
              "rel_entr", "kl_div", "gammaincinv", "gammainccinv"):
    _f = getattr(_special, _name)
    case(_name, "same", _f, F(2, 3, domain="pos"), F(2, 3, domain="pos"))
    case(_name, "bcast_rank", _f, F(2, 3, domain="pos"), F(3, domain="pos"))
case("betainc", "same", lambda a, b, x: _special.betainc(a, b, lax.mul(x, 0.4)),
     F(2, 3, domain="pos"), F(2, 3, domain="pos"), F(2, 3, domain="pos"))
case("betainc", "bcast", lambda a, b, x: _special.betainc(a, b, lax.mul(x, 0.4)),
     F(3, domain="pos"), F(domain="pos"), F(2, 3, domain="pos"))
case("betaincinv", "bcast", lambda a, b, y: _special.betaincinv(a, b, lax.mul(y, 0.4)),
     F(3, domain="pos"), F(domain="pos"), F(2, 3, domain="pos"))


# ----------------------------------------------------------------------------
# The harness

def all_primitives():
    """Every Primitive defined in, or imported into, fgrad._src.lax and its modules."""
    found = {}
    modules = [lax_src] + [importlib.import_module(f"{lax_src.__name__}.{m.name}")
                           for m in pkgutil.iter_modules(lax_src.__path__)]
    for mod in modules:
        for value in vars(mod).values():
            if isinstance(value, core.Primitive) and value is not custom_lin_p:
                found[value.name] = value
    return found


def fit_axis(axis, rank):
    """`axis` (0, 1 or -1) made valid for an operand of `rank` dims once batched."""
    return max(-(rank + 1), min(axis, rank))


def batched_shape(shape, axis, size):
    """`shape` with a batch dim of `size` inserted at `axis` (None: unchanged)."""
    if axis is None:
        return tuple(shape)
    at = axis % (len(shape) + 1)
    return tuple(shape[:at]) + (size,) + tuple(shape[at:])


def reference_vmap(f, in_axes, size):
    """vmap by a loop: f on each example's slices, stacked."""
    def looped(*xs):
        outs = [np.asarray(f(*[x if a is None else np.take(x, j, axis=a)
                               for x, a in zip(xs, in_axes)])) for j in range(size)]
        return np.stack(outs)
    return looped


def assert_same(got, want, what):
    got = np.asarray(got)
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, expected {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12, equal_nan=True,
                                   err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def single_configs(args):
    """in_axes tuples: all operands at 0, 1 or -1; one operand alone at each of those;
    and every operand at a different one of them."""
    n = len(args)
    ranks = [len(a.shape) for a in args]
    configs = []
    for axis in (0, 1, -1):
        configs.append(tuple(fit_axis(axis, r) for r in ranks))
    if n > 1:
        for i in range(n):
            for axis in (0, 1, -1):
                configs.append(tuple(fit_axis(axis, r) if k == i else None
                                     for k, r in enumerate(ranks)))
        for shift in range(3):
            configs.append(tuple(fit_axis((0, 1, -1)[(k + shift) % 3], r)
                                 for k, r in enumerate(ranks)))
    return list(dict.fromkeys(configs))


def nested_configs(args):
    """(inner in_axes, outer in_axes) pairs."""
    n = len(args)
    ranks = [len(a.shape) for a in args]
    pairs = [(0, 0), (1, 0), (-1, 1), (0, -1)]
    configs = []
    for a, b in pairs:
        inner = tuple(fit_axis(a, r) for r in ranks)
        outer = tuple(fit_axis(b, r + 1) for r in ranks)
        configs.append((inner, outer))
    if n > 1:
        # The inner vmap maps operand 0 only; the outer one maps every operand.
        inner = (0,) + (None,) * (n - 1)
        outer = tuple(fit_axis(1, r + (k == 0)) for k, r in enumerate(ranks))
        configs.append((inner, outer))
        # The inner vmap maps every operand; the outer one only the last.
        inner = tuple(fit_axis(-1, r) for r in ranks)
        outer = (None,) * (n - 1) + (0,)
        configs.append((inner, outer))
    return configs


def draw_args(c, rng, axes_per_level):
    """Operands for `c`, each with batch dims inserted: axes_per_level lists the
    (in_axes, size) of each vmap level, innermost first."""
    xs = []
    for k, arg in enumerate(c.args):
        shape = arg.shape
        for in_axes, size in axes_per_level:
            shape = batched_shape(shape, in_axes[k], size)
        xs.append(arg.draw(rng, shape))
    return xs


def check_batched(vf, ref, xs, what):
    want = ref(*xs)
    assert_same(vf(*xs), want, what)
    closed = fgrad.make_jaxpr(vf)(*xs)  # type-checked (conftest turns checking on)
    (aval,) = closed.out_avals
    assert (aval.shape, aval.dtype) == (want.shape, want.dtype), f"{what}: jaxpr {aval}"
    (out,) = eval_closed(closed, *xs)
    assert_same(out, want, f"{what} (jaxpr)")
    return closed


def test_every_primitive_has_a_case():
    prims = all_primitives()
    covered = {c.prim for c in CASES}
    missing = sorted(set(prims) - covered)
    assert not missing, f"primitives without a batching test case: {missing}"
    unknown = sorted(covered - set(prims))
    assert not unknown, f"cases for unknown primitives: {unknown}"
    no_rule = sorted(name for name, p in prims.items() if p.batch is None)
    assert not no_rule, f"primitives without a batching rule: {no_rule}"


@pytest.mark.parametrize("c", CASES, ids=repr)
def test_case_uses_its_primitive(c):
    """Each case's function binds the primitive it is for (iota, which has no
    operands, is computed while tracing and so never appears in a jaxpr)."""
    rng = np.random.default_rng(0)
    xs = draw_args(c, rng, [])
    closed = fgrad.make_jaxpr(c.fun)(*xs)
    names = {e.primitive.name for e in closed.eqns}
    if c.prim == "iota":
        return
    assert c.prim in names, f"{c!r} binds {sorted(names)}"


@pytest.mark.parametrize("c", CASES, ids=repr)
def test_vmap(c):
    rng = np.random.default_rng(1)
    for in_axes in single_configs(c.args):
        xs = draw_args(c, rng, [(in_axes, B)])
        vf = fgrad.vmap(c.fun, in_axes=in_axes)
        check_batched(vf, reference_vmap(c.fun, in_axes, B), xs, f"{c!r} in_axes={in_axes}")


@pytest.mark.parametrize("c", CASES, ids=repr)
def test_nested_vmap(c):
    rng = np.random.default_rng(2)
    for inner, outer in nested_configs(c.args):
        xs = draw_args(c, rng, [(inner, B_INNER), (outer, B_OUTER)])
        vf = fgrad.vmap(fgrad.vmap(c.fun, in_axes=inner), in_axes=outer)
        ref = reference_vmap(reference_vmap(c.fun, inner, B_INNER), outer, B_OUTER)
        check_batched(vf, ref, xs, f"{c!r} inner in_axes={inner}, outer in_axes={outer}")


# ----------------------------------------------------------------------------
# dot_general: batch dims go into the dot, nothing is transposed

def _vmap_in_place(f, in_axes, size, out_dims):
    """Like vmap, but the result keeps its batch dim where the rules put it (recorded
    in out_dims), so that the jaxpr shows only what the rules did."""
    def batched(*xs):
        trace = batching.BatchTrace(core.current_trace(), size)
        args = [x if a is None else batching.BatchTracer(trace, x, a % len(x.shape))
                for x, a in zip(xs, in_axes)]
        try:
            with core.set_current_trace(trace):
                out = f(*args)
            val, bdim = batching._unbatch(trace, out)
        finally:
            trace.finish()
        out_dims.append(bdim)
        return val
    return batched


@pytest.mark.parametrize("c", [c for c in CASES if c.prim == "dot_general"], ids=repr)
def test_dot_general_is_one_dot_without_transposes(c):
    rng = np.random.default_rng(3)
    configs = single_configs(c.args)
    assert {None} < {a for cfg in configs for a in cfg}  # only-lhs and only-rhs too
    for in_axes in configs:
        xs = draw_args(c, rng, [(in_axes, B)])
        out_dims = []
        closed = fgrad.make_jaxpr(_vmap_in_place(c.fun, in_axes, B, out_dims))(*xs)
        names = [e.primitive.name for e in closed.eqns]
        what = f"{c!r} in_axes={in_axes}: {closed}"
        assert names.count("dot_general") == 1 and "transpose" not in names, what
        assert set(names) <= {"dot_general"}, what
        (out,) = eval_closed(closed, *xs)
        want = reference_vmap(c.fun, in_axes, B)(*xs)
        assert_same(np.moveaxis(np.asarray(out), out_dims[-1], 0), want, what)


def test_dot_general_broadcast_batch_dim_with_vmap_batch():
    # A size-1 dot batch dim keeps broadcasting against the other side's, whichever
    # operands vmap batches.
    dn = (((2,), (1,)), ((0,), (0,)))
    rng = np.random.default_rng(4)
    lhs = rng.standard_normal((B, 1, 3, 4))
    rhs = rng.standard_normal((2, 4, 5))
    f = lambda a, b: lax.dot_general(a, b, dn)  # noqa: E731
    rhs_b = rng.standard_normal((B, 2, 4, 5))
    for in_axes, xs in [((0, None), (lhs, rhs)), ((None, 0), (lhs[0], rhs_b)),
                        ((0, 0), (lhs, rhs_b)), ((0, 1), (lhs, np.moveaxis(rhs_b, 0, 1)))]:
        check_batched(fgrad.vmap(f, in_axes), reference_vmap(f, in_axes, B), list(xs),
                      f"in_axes={in_axes}")


# ----------------------------------------------------------------------------
# Rules that keep the batch dim in place

@pytest.mark.parametrize("fun,shape,in_axis", [
    (lambda x: lax.slice(x, (1, 0), (3, 2), (1, 2)), (3, 2), 1),
    (lambda x: lax.rev(x, (0,)), (3, 2), 2),
    (lambda x: lax.cumsum(x, 1), (3, 2), 1),
    (lambda x: lax.cummax(x, 0, reverse=True), (3, 2), 2),
    (lambda x: lax.pad(x, 0.0, ((1, 0, 1), (0, 2, 0))), (3, 2), 1),
    (lambda x: lax.concatenate([x, x], 1), (3, 2), 1),
    (lambda x: lax.dynamic_slice(x, (1, 0), (2, 2)), (3, 2), 1),
])
def test_rules_do_not_move_the_batch_dim(fun, shape, in_axis):
    rng = np.random.default_rng(5)
    x = rng.standard_normal(batched_shape(shape, in_axis, B))
    out_dims = []
    closed = fgrad.make_jaxpr(_vmap_in_place(fun, (in_axis,), B, out_dims))(x)
    assert "transpose" not in [e.primitive.name for e in closed.eqns], str(closed)
    assert out_dims[-1] == in_axis


def test_scatter_duplicates_last_wins_per_example():
    # Each example's duplicates resolve among that example's updates only.
    idx = np.array([[0, 2, 0, 0], [1, 1, 3, 9]], np.int32)
    upd = np.arange(8.0).reshape(2, 4) + 1
    f = lambda x, i, u: lax.scatter(x, [i], u, (0,))  # noqa: E731
    out = fgrad.vmap(f, (None, 0, 0))(np.zeros(4), idx, upd)
    np.testing.assert_array_equal(np.asarray(out), [[4, 0, 2, 0], [0, 6, 0, 7]])


def test_weak_type_survives_batched_padding_value():
    f = lambda v: lax.pad(2.0, v, ())  # noqa: E731  (a weak operand: a weak result)
    v = np.arange(3.0)
    (want,) = fgrad.make_jaxpr(f)(v[0]).out_avals
    (got,) = fgrad.make_jaxpr(fgrad.vmap(f))(v).out_avals
    assert want.weak_type and got.weak_type
    np.testing.assert_array_equal(np.asarray(fgrad.vmap(f)(v)), [2.0, 2.0, 2.0])
