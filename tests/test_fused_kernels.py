"""Native fused kernels (fgrad/_src/cpu/fused.py) against the reference
interpreter (eager evaluation with each primitive's NumPy impl).

For every element-wise primitive and every dtype it accepts, one program per
dtype applies all of them to edge values (NaN, +-Inf, +-0, subnormals, huge
values; min/max integers, division by zero, shifts by >= the width and by
negative amounts), so each dtype costs one LLVM compile. Integer and bool
results must be identical, float results within a few ulp. Then broadcasting,
non-contiguous and zero-size inputs, the fusion plan (what becomes one kernel,
which intermediates are stored), as_text, errors, and vectorisation.
"""
import itertools
import math
import re

import numpy as np
import pytest

import fgrad.numpy as fnp
from fgrad import jit, lax, tree
from fgrad._src.cpu import fused
from fgrad._src.jit import executable
from fgrad._src.jit.primitive import compile_jaxpr

# Inputs include NaN/Inf on purpose: the eager NumPy reference warns about them.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
FLOATS = [F32, F64]
SIGNED = [np.dtype(f"int{b}") for b in (8, 16, 32, 64)]
UNSIGNED = [np.dtype(f"uint{b}") for b in (8, 16, 32, 64)]
INTS = SIGNED + UNSIGNED
BOOL = np.dtype(bool)
ALL = [BOOL] + INTS + FLOATS


# ----------------------------------------------------------------------------
# Helpers

def _exe(f, *args):
    """The Executable jit builds for f at these arguments."""
    return compile_jaxpr(jit(f).lower(*args).jaxpr, getattr(f, "__name__", "f"))


def _labels(f, *args):
    return [k.label for k in _exe(f, *args).kernels]


def _assert_all_native(f, *args):
    numpy_steps = [lab for lab in _labels(f, *args) if not lab.startswith("native:")]
    assert not numpy_steps, numpy_steps


def _ulp_close(got, want, ulps, what=""):
    """Same NaNs and infinities; finite values within `ulps` ulp of each other."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, \
        (what, got.shape, got.dtype, want.shape, want.dtype)
    g, w = got.ravel(), want.ravel()
    bad = np.isnan(g) != np.isnan(w)
    both = ~np.isnan(g) & ~np.isnan(w)
    inf = both & (np.isinf(g) | np.isinf(w))
    bad |= inf & (g != w)
    fin = both & ~inf
    g64, w64 = g[fin].astype(np.float64), w[fin].astype(np.float64)
    scale = np.maximum(np.abs(g[fin]), np.abs(w[fin]))
    tol = ulps * np.spacing(scale).astype(np.float64)
    tol = np.maximum(tol, ulps * np.finfo(got.dtype).smallest_subnormal)
    bad_fin = np.abs(g64 - w64) > tol
    idx = np.flatnonzero(bad)
    fidx = np.flatnonzero(fin)[bad_fin]
    assert not idx.size and not fidx.size, (
        f"{what}: {idx.size + fidx.size} mismatches, e.g. at {list(idx[:3]) + list(fidx[:3])}: "
        f"got {g[list(idx[:3]) + list(fidx[:3])]}, want {w[list(idx[:3]) + list(fidx[:3])]}")


def _check(got, want, what="", ulps=4):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    if got.dtype.kind == "f":
        _ulp_close(got, want, ulps, what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def _close(got, want, scale=4.0, what=""):
    """For compound expressions: fused code may contract a*b+c into an fma and
    reassociate, so errors are relative to the operands (`scale`), not the result."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got, want)
    eps = np.finfo(got.dtype).eps
    np.testing.assert_allclose(got, want, rtol=8 * eps, atol=8 * eps * scale, err_msg=what)


def _compare_programs(f, args, ulps=None, all_native=True, default_ulps=4):
    """jit(f)(*args) against eager f(*args); f returns a dict name -> value;
    ulps: float tolerance per name (the part before '/'), default_ulps otherwise."""
    ulps = ulps or {}
    eager = f(*args)
    compiled = jit(f)(*args)
    assert set(eager) == set(compiled)
    for name in eager:
        _check(compiled[name], eager[name], name, ulps.get(name.split("/")[0], default_ulps))
    if all_native:
        _assert_all_native(f, *args)
    return eager


# ----------------------------------------------------------------------------
# Edge values

def _float_values(dt, rng):
    fi = np.finfo(dt)
    special = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 3.0, 0.7, -1.3, 10.0,
               -10.0, 100.0, -100.0, 1e-3, 1e-20, -1e-20, 1e20, -1e20, float(fi.max),
               -float(fi.max), float(fi.tiny), float(fi.smallest_subnormal) * 3,
               math.inf, -math.inf, math.nan, math.pi / 2, 88.7, -103.9, 709.9, -745.0,
               0.49999997, 4503599627370497.0, 1e30]
    rand = rng.standard_normal(60) * 10.0 ** rng.uniform(-4, 4, 60)
    return np.concatenate([np.array(special, dt), rand.astype(dt)])


def _int_values(dt):
    ii = np.iinfo(dt)
    bits = dt.itemsize * 8
    cands = [0, 1, 2, 3, 5, 7, 13, -1, -2, -3, -7, bits - 1, bits, bits + 1, 2 * bits, 100, -100,
             ii.min, ii.min + 1, ii.max, ii.max - 1, ii.max // 2, ii.min // 2]
    return np.array([v for v in dict.fromkeys(cands) if ii.min <= v <= ii.max], dt)


def _pairs(values):
    a, b = zip(*itertools.product(values, values))
    return np.array(a, values.dtype), np.array(b, values.dtype)


# ----------------------------------------------------------------------------
# Every primitive, every dtype

_F_UNARY = {
    "neg": lax.neg, "abs": lax.abs, "sign": lax.sign, "floor": lax.floor, "ceil": lax.ceil,
    "round_away": lambda x: lax.round(x, "away_from_zero"),
    "round_even": lambda x: lax.round(x, "to_nearest_even"),
    "exp": lax.exp, "log": lax.log, "log1p": lax.log1p, "expm1": lax.expm1, "sin": lax.sin,
    "cos": lax.cos, "tan": lax.tan, "tanh": lax.tanh, "sqrt": lax.sqrt, "rsqrt": lax.rsqrt,
    "logistic": lax.logistic, "erf": lax.erf, "is_finite": lax.is_finite,
    "stop_gradient": lax.stop_gradient,
}
_POWERS = (0, 1, 2, 3, 5, 8, 13, -1, -2, -3, 100, -100)
_F_BINARY = {
    "add": lax.add, "sub": lax.sub, "mul": lax.mul, "div": lax.div, "rem": lax.rem,
    "max": lax.max, "min": lax.min, "pow": lax.pow,
    "eq": lax.eq, "ne": lax.ne, "lt": lax.lt, "le": lax.le, "gt": lax.gt, "ge": lax.ge,
}
# ulp budgets beyond the default 4 (tan = sin/cos; pow and integer_pow by repeated
# multiplication round more often than NumPy's pow)
_F_ULPS = {"tan": 8, "pow": 8, "integer_pow": 16, "round_away": 0, "round_even": 0,
           "floor": 0, "ceil": 0, "add": 1, "sub": 1, "mul": 1, "div": 1, "rem": 0,
           "sqrt": 1, "rsqrt": 2, "neg": 0, "abs": 0, "sign": 0, "max": 0, "min": 0}


@pytest.mark.parametrize("dt", FLOATS, ids=str)
def test_float_primitives(dt):
    rng = np.random.default_rng(1)
    vals = _float_values(dt, rng)
    bvals = np.concatenate([np.array([0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 1e-20, 1e20, 2.0,
                                      -3.0, 1 / 3, math.inf, -math.inf, math.nan], dt),
                            (rng.standard_normal(6) * 5).astype(dt)])
    bx, by = _pairs(bvals)
    bx = np.concatenate([bx, (rng.standard_normal(50) * 3).astype(dt)])
    by = np.concatenate([by, (rng.standard_normal(50) * 3).astype(dt)])

    def f(x, a, b):
        out = {name: fn(x) for name, fn in _F_UNARY.items()}
        out.update({f"integer_pow/{y}": lax.integer_pow(x, y) for y in _POWERS})
        out.update({name: fn(a, b) for name, fn in _F_BINARY.items()})
        out["select_n"] = lax.select_n(lax.lt(a, b), a, b)
        return out

    _compare_programs(f, (vals, bx, by), _F_ULPS)


_I_UNARY = {"sign": lax.sign, "not": lax.bitwise_not, "population_count": lax.population_count,
            "stop_gradient": lax.stop_gradient}
_I_BINARY = {
    "add": lax.add, "sub": lax.sub, "mul": lax.mul, "div": lax.div, "rem": lax.rem,
    "max": lax.max, "min": lax.min, "eq": lax.eq, "ne": lax.ne, "lt": lax.lt, "le": lax.le,
    "gt": lax.gt, "ge": lax.ge, "and": lax.bitwise_and, "or": lax.bitwise_or,
    "xor": lax.bitwise_xor, "shift_left": lax.shift_left,
    "shift_right_logical": lax.shift_right_logical,
    "shift_right_arithmetic": lax.shift_right_arithmetic,
}


@pytest.mark.parametrize("dt", INTS, ids=str)
def test_integer_primitives(dt):
    vals = _int_values(dt)
    a, b = _pairs(vals)

    def f(x, a, b):
        out = {name: fn(x) for name, fn in _I_UNARY.items()}
        if dt.kind == "i":
            out["neg"], out["abs"] = lax.neg(x), lax.abs(x)
        out.update({f"integer_pow/{y}": lax.integer_pow(x, y) for y in (0, 1, 2, 3, 7, 13, 64)})
        out.update({name: fn(a, b) for name, fn in _I_BINARY.items()})
        out["select_n"] = lax.select_n(lax.gt(a, b), a, b)
        return out

    _compare_programs(f, (vals, a, b))
    # the edge cases really are in there
    assert (b == 0).any() and ((a == np.iinfo(dt).min) & (b == -1) if dt.kind == "i" else b).any()


def test_bool_primitives():
    a, b = _pairs(np.array([False, True]))

    def f(a, b):
        out = {name: fn(a, b) for name, fn in
               {"eq": lax.eq, "ne": lax.ne, "lt": lax.lt, "le": lax.le, "gt": lax.gt, "ge": lax.ge,
                "and": lax.bitwise_and, "or": lax.bitwise_or,
                "xor": lax.bitwise_xor}.items()}
        out["not"] = lax.bitwise_not(a)
        out["select_n"] = lax.select_n(a, b, lax.bitwise_not(b))
        out["stop_gradient"] = lax.stop_gradient(a)
        return out

    _compare_programs(f, (a, b))


def test_convert_element_type_all_pairs():
    rng = np.random.default_rng(2)
    args = {}
    for dt in ALL:
        if dt == BOOL:
            args[dt] = np.array([False, True] * 20)
        elif dt.kind == "f":
            args[dt] = _float_values(dt, rng)[:40]
        else:
            v = _int_values(dt)
            args[dt] = np.resize(v, 40)
    # float -> uint32 of NaN / values outside [-2**31, 2**32) is unspecified (NumPy's own
    # small-array and SIMD paths disagree): feed those conversions in-range values
    in_range = {dt: np.resize(np.array([0.0, 1.0, 2.7, -1.0, -2.5, 3e9, -2e9, 4294967040.0,
                                        65535.9, -300.0], dt), 40) for dt in FLOATS}
    srcs = list(args)

    def f(*xs):
        out = {}
        for src, x in zip(srcs, xs):
            for dst in ALL:
                if src.kind == "f" and dst == np.dtype(np.uint32):
                    continue
                out[f"{src}->{dst}"] = lax.convert_element_type(x, dst)
        for src, x in zip(FLOATS, xs[len(srcs):]):
            out[f"{src}->uint32 in range"] = lax.convert_element_type(x, np.uint32)
        return out

    _compare_programs(f, [args[s] for s in srcs] + [in_range[d] for d in FLOATS],
                      default_ulps=0)


def test_float_to_int_edge_values_match_numpy_on_x86():
    vals = {dt: np.array([np.nan, np.inf, -np.inf, 1e20, -1e20, 300.0, -300.0, 70000.0, -70000.0,
                          3e9, -3e9, 5e9, 1.9e19, -1.0, -2.5, 2.7, 2.0 ** 63, 2.0 ** 64, -0.0],
                         dt) for dt in FLOATS}
    targets = [d for d in INTS if d != np.dtype(np.uint32)]

    def f(x32, x64):
        return {f"{x.dtype}->{d}": lax.convert_element_type(x, d)
                for x in (x32, x64) for d in targets}

    _compare_programs(f, (vals[F32], vals[F64]))


_BITCASTS = [(F32, np.int32), (F32, np.uint32), (F64, np.int64), (F64, np.uint64),
             (np.int8, np.uint8), (np.int16, np.uint16), (np.uint32, np.int32),
             (np.uint64, np.int64), (np.int32, F32), (np.uint64, F64)]


def test_bitcast_convert_type_is_bit_exact():
    rng = np.random.default_rng(3)
    srcs = sorted({np.dtype(s) for s, _ in _BITCASTS}, key=str)
    args = []
    for dt in srcs:
        if dt.kind == "f":
            args.append(_float_values(dt, rng)[:32])
        else:   # arbitrary bit patterns, NaN payloads included
            args.append(rng.integers(0, 256, 32 * dt.itemsize, np.uint8).view(dt))

    def f(*xs):
        by = dict(zip(srcs, xs))
        return {f"{s}->{np.dtype(d)}": lax.bitcast_convert_type(by[np.dtype(s)], d)
                for s, d in _BITCASTS}

    eager, compiled = f(*args), jit(f)(*args)
    for k in eager:   # compare the bits, not the values
        want, got = np.asarray(eager[k]), np.asarray(compiled[k])
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.view(f"u{got.dtype.itemsize}"),
                                      want.view(f"u{want.dtype.itemsize}"), err_msg=k)
    _assert_all_native(f, *args)


def test_select_n_integer_selector():
    which = np.array([0, 1, 2, 2, 1, 0], np.int32)
    cases = [np.arange(6, dtype=np.float32) * k for k in (1, 10, 100)]

    def f(w, a, b, c):
        return {"i32": lax.select_n(w, a, b, c),
                "u8": lax.select_n(lax.convert_element_type(w, np.uint8), a, b, c),
                "i8_2": lax.select_n(lax.convert_element_type(lax.min(w, 1), np.int8), a, b),
                "one": lax.select_n(w, a)}

    _compare_programs(f, (which, *cases))
    # out of range: NumPy's choose raises, and so does the kernel (and it recovers)
    g = jit(lambda w, a, b, c: lax.select_n(w, a, b, c))
    bad = np.array([0, 3, 1, -1, 0, 0], np.int32)
    with pytest.raises(ValueError):
        lax.select_n(bad, *cases)
    with pytest.raises(ValueError, match="invalid entry"):
        g(bad, *cases)
    np.testing.assert_array_equal(g(which, *cases), lax.select_n(which, *cases))
    _assert_all_native(lambda w, a, b, c: lax.select_n(w, a, b, c), which, *cases)


# ----------------------------------------------------------------------------
# Broadcasting, layouts, sizes

def test_broadcasting_shapes():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    row = rng.standard_normal(4).astype(np.float32)
    col = rng.standard_normal((3, 1)).astype(np.float32)
    s = np.float32(1.7) * np.ones((), np.float32)
    a21 = rng.standard_normal((2, 1))
    a13 = rng.standard_normal((1, 3))
    t = rng.integers(-50, 50, (2, 3, 4)).astype(np.int32)
    m31 = rng.integers(-5, 5, (3, 1)).astype(np.int32)
    m14 = rng.integers(-5, 5, (1, 4)).astype(np.int32)

    def f(x, row, col, s, a21, a13, t, m31, m14):
        return {
            "row": x * row + 2.0, "col": lax.max(x, col) - row, "scalar": x * s + s,
            "outer": a21 * a13 + 1.0, "outer_sel": lax.select_n(a21 > 0.0, a13, a21),
            "row_col": row + col,
            "3d_mid": t * m31 + 1, "3d_last": lax.div(t, m14), "3d_both": t - m31 * m14,
            "scalar_only": s * 2.0 + 1.0,
        }

    _compare_programs(f, (x, row, col, s, a21, a13, t, m31, m14))


def test_non_contiguous_inputs():
    rng = np.random.default_rng(5)
    base = rng.standard_normal((6, 8))
    xt = base.T                       # transposed view
    xs = base[::2, 1::3]              # strided view
    y = rng.standard_normal((8, 6))
    f = lambda a, b: lax.sin(a) * b + 1.0  # noqa: E731
    _close(jit(f)(xt, y), f(xt, y), 8.0, "transposed")
    g = lambda a: lax.exp(a) * a  # noqa: E731
    _check(jit(g)(xs), g(xs), "strided")
    # a view made inside the program (a NumPy step) feeding a native kernel
    h = lambda a, b: lax.transpose(a, (1, 0)) * b  # noqa: E731
    _check(jit(h)(base, y), h(base, y), "transpose step")
    assert any(lab.startswith("native:") for lab in _labels(h, base, y))


@pytest.mark.parametrize("shapes", [((0,), (0,)), ((0, 3), (3,)), ((3, 0), (3, 1)),
                                    ((2, 0, 4), (1, 4))])
def test_zero_size(shapes):
    a = np.ones(shapes[0], np.float64)
    b = np.ones(shapes[1], np.float64)
    f = lambda a, b: (lax.exp(a) * b + 1.0, a < b)  # noqa: E731
    got, want = jit(f)(a, b), f(a, b)
    for g, w in zip(got, want):
        _check(g, w)


def test_scalar_programs():
    f = lambda x, y: (lax.sin(x) * y + lax.exp(-x * x), x < y)  # noqa: E731
    for x, y in [(np.float64(0.3), np.float64(-2.0)), (np.array(1.5, np.float32),
                                                         np.array(0.25, np.float32))]:
        for g, w in zip(jit(f)(x, y), f(x, y)):
            _check(g, w)
    _check(jit(lambda x: x * 2 + 1)(3), np.asarray(7, np.int32))


def test_outputs_are_fresh_and_inputs_untouched():
    x = np.arange(5.0)
    f = jit(lambda x: (x * 2.0, x))
    a, b = f(x)
    a2, _ = f(x)
    assert np.asarray(a) is not np.asarray(a2)
    np.testing.assert_array_equal(x, np.arange(5.0))
    assert not np.shares_memory(np.asarray(b), x)


# ----------------------------------------------------------------------------
# The fusion plan

def test_fma_like_is_one_kernel():
    x = y = z = np.ones((4, 5), np.float32)
    exe = _exe(lambda x, y, z: x * y + z, x, y, z)
    assert [k.label for k in exe.kernels] == ["native:mul+add"]
    text = exe.as_text()
    assert "// 0: native:mul+add" in text and "define" in text and "// 1:" not in text
    _close(jit(lambda x, y, z: x * y + z)(x, y, z), x * y + z)


def test_transcendental_chain_is_one_kernel():
    x = np.linspace(-2, 2, 50, dtype=np.float32)
    y = np.linspace(1, 3, 50, dtype=np.float32)
    f = lambda x, y: fnp.sin(x) * y + fnp.exp(-x * x)  # noqa: E731
    labels = _labels(f, x, y)
    assert len(labels) == 1 and labels[0].startswith("native:"), labels
    assert {"sin", "exp", "mul", "add", "neg"} <= set(labels[0][len("native:"):].split("+"))
    _close(jit(f)(x, y), f(x, y), 3.0)


def test_intermediates_used_later_become_outputs():
    x = np.linspace(-1, 1, 12).reshape(3, 4)

    def f(x):
        t = fnp.sin(x) * 2.0          # used by the reduction and at the end
        s = fnp.sum(t, axis=1, keepdims=True)
        return t * s + x, t

    exe = _exe(f, x)
    labels = [k.label for k in exe.kernels]
    # the sum joins t's loop nest; the keepdims expand_dims is a view of it
    assert labels == ["native:sin+mul+reduce_sum", "native:mul+add"], labels
    first, last = exe.kernels[0], exe.kernels[-1]
    assert len(first.outs) == 2           # t and the sum: sin's result stays in a register
    assert set(first.outs) <= set(last.ins)   # ... both read again by the last kernel
    got, want = jit(f)(x), f(x)
    _close(got[0], want[0], 8.0)
    _check(got[1], want[1])


def test_unsupported_pairs_run_as_numpy_steps_and_are_listed():
    # an integer to a negative power raises in NumPy: a NumPy step, listed as such
    x = np.arange(1, 7, dtype=np.int32)
    f = lambda x: lax.integer_pow(x * 2, -1) + 1  # noqa: E731
    exe = _exe(f, x)
    labels = [k.label for k in exe.kernels]
    assert labels == ["native:mul", "numpy:integer_pow", "native:add"], labels
    text = exe.as_text()
    assert "numpy:integer_pow" in text and "define" in text


def test_atan2_erf_inv_and_float16_are_native():
    x = np.linspace(-0.95, 0.95, 6)
    f = lambda x: lax.atan2(x, x + 1.0) * 2.0 + lax.erf_inv(x)  # noqa: E731
    assert _labels(f, x) == ["native:add+atan2+mul+erf_inv+add"]
    _close(jit(f)(x), f(x))
    h = np.linspace(-3, 3, 5).astype(np.float16)
    assert _labels(lambda a: a * a + a, h) == ["native:mul+add"]
    _check(jit(lambda a: a * a + a)(h), h * h + h, ulps=0)


def test_one_module_per_program():
    x = np.linspace(-1, 1, 12).reshape(3, 4)
    f = lambda x: fnp.exp(fnp.sum(fnp.sin(x), axis=0)) * 2.0 + fnp.cos(x)  # noqa: E731
    exe = _exe(f, x)
    natives = [k for k in exe.kernels if k.label.startswith("native:")]
    assert len(natives) >= 2
    calls = [k for k in exe.calls if k.label.startswith("native:")]
    assert len({id(k.fn.module) for k in calls}) == 1
    # one entry per native call: the kernels run back to back form one segment
    assert len(calls) == 1 and calls[0].label == "native:segment 0"
    assert {k.segment for k in natives} == {0}
    assert len(re.findall(r"^define void", exe.llvm_ir, re.M)) == len(calls)
    _check(jit(f)(x), f(x))


def test_can_fuse_table():
    """can_fuse accepts every (primitive, dtype) pair elementwise.py accepts, except
    the documented gaps."""
    assert set(fused.EMITTERS) == {
        "add", "sub", "mul", "div", "rem", "neg", "abs", "sign", "max", "min", "pow",
        "integer_pow", "floor", "ceil", "round", "exp", "log", "log1p", "expm1", "sin", "cos",
        "tan", "tanh", "sqrt", "rsqrt", "logistic", "erf", "eq", "ne", "lt", "le", "gt", "ge",
        "is_finite", "select_n", "convert_element_type", "bitcast_convert_type", "and", "or",
        "xor", "not", "shift_left", "shift_right_logical", "shift_right_arithmetic",
        "population_count", "stop_gradient", "atan2", "erf_inv",
        # special functions: SciPy's kernels (cpu/scipy_kernels.py), float32/float64
        "gammaln", "digamma", "gamma", "erfc", "erfcx", "ndtr", "ndtri", "log_ndtr", "i0",
        "i0e", "i1", "i1e", "zetac", "beta", "betaln", "gammainc", "gammaincc", "xlogy",
        "xlog1py", "betainc", "entr", "rel_entr", "kl_div", "xdivy", "gammaincinv",
        "gammainccinv", "betaincinv"}
    x = np.ones(3, np.int32)
    # integer_pow of integers to a negative power raises in NumPy: left to NumPy
    assert _labels(lambda x: lax.integer_pow(x, -1), x) == ["numpy:integer_pow"]
    b = np.ones(3, np.int8)
    assert _labels(lambda b: lax.bitcast_convert_type(b, np.bool_), b) == \
        ["numpy:bitcast_convert_type"]


# ----------------------------------------------------------------------------
# Errors and code quality

def test_compile_failure_is_a_clear_error(monkeypatch):
    from fgrad._src.cpu import engine

    def broken(*a, **k):
        raise engine.CompileError("LLVM says no")

    monkeypatch.setattr(engine, "compile_module", broken)
    # the message names the kernel, the user's line that created it, and the cause
    with pytest.raises(fused.FusedCompileError,
                       match=r"mul\+add over \(3,\), from test_fused_kernels.py:\d+ .*LLVM says no"):
        jit(lambda x, y: x * y + 1.0)(np.ones(3), np.ones(3))


def test_missing_llvmlite_is_a_clear_error(monkeypatch):
    def no_llvmlite():
        raise ImportError("No module named 'llvmlite'")

    monkeypatch.setattr(fused, "_ir", no_llvmlite)
    with pytest.raises(fused.FusedCompileError, match=r"llvmlite.*sub over \(2,\)"):
        jit(lambda x: x - 1.0)(np.ones(2))


def test_ir_attributes():
    x = np.ones(64, np.float32)
    ir_text = _exe(lambda x, y: x * y + x, x, x).llvm_ir
    assert "noalias" in ir_text and "getelementptr inbounds" in ir_text
    # element-wise float arithmetic carries no fast-math flag: NumPy's bits
    assert re.search(r"= fmul float", ir_text) and re.search(r"= fadd float", ir_text)
    for flag in ("nnan", "ninf", "nsz", "arcp", "contract", "afn", "reassoc", "fast"):
        assert flag not in ir_text, flag
    # a sum's accumulation is only reassociated (it vectorises; no nsz)
    sum_ir = _exe(lambda x: fnp.sum(x * x), x).llvm_ir
    assert re.search(r"= fadd reassoc float", sum_ir)
    assert not re.search(r"\b(nsz|contract|arcp|afn)\b", sum_ir)


def test_float32_loops_are_vectorised():
    from fgrad._src.cpu import engine
    if not engine.host_has_feature("avx2"):
        pytest.skip("host has no AVX2")
    x = np.ones(1000, np.float32)
    exe = _exe(lambda x, y: (x + y, x * y, fnp.exp(x)), x, x)
    opt = engine.optimized_ir(exe.llvm_ir)
    widths = {int(n) for n in re.findall(r"<(\d+) x float>", opt)}
    assert widths and max(widths) >= 8, widths
    for body in re.split(r"^define ", opt, flags=re.M)[1:]:
        assert "memcheck" not in body   # noalias: no runtime alias checks


# ----------------------------------------------------------------------------
# Random broadcasting programs, threads

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@st.composite
def _broadcast_programs(draw):
    rank = draw(st.integers(0, 3))
    domain = tuple(draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    shapes = []
    for _ in range(3):
        r = draw(st.integers(0, rank))
        dims = domain[rank - r:]
        shapes.append(tuple(d if draw(st.booleans()) else 1 for d in dims))
    ops = draw(st.lists(st.tuples(st.sampled_from(["add", "sub", "mul", "max", "sel"]),
                                  st.integers(0, 9), st.integers(0, 9)), min_size=1, max_size=6))
    dtype = draw(st.sampled_from([np.int32, np.float64, np.uint8]))
    return shapes, ops, np.dtype(dtype)


def _run_ops(ops, *xs):
    vals = list(xs)
    for op, i, j in ops:
        a, b = vals[i % len(vals)], vals[j % len(vals)]
        if op == "sel":
            vals.append(lax.select_n(lax.lt(a, b), a, b))
        else:
            vals.append(getattr(lax, op)(a, b))
    return vals[len(xs):]


@settings(max_examples=25, deadline=None)
@given(_broadcast_programs())
def test_random_broadcasting_programs(program):
    shapes, ops, dt = program
    rng = np.random.default_rng(len(ops))
    xs = [rng.integers(0, 50, s).astype(dt) for s in shapes]
    f = lambda *xs: _run_ops(ops, *xs)  # noqa: E731
    got, want = jit(f)(*xs), f(*xs)
    for g, w in zip(got, want):
        _check(g, w, ulps=0)
    _assert_all_native(f, *xs)


def test_concurrent_calls():
    from concurrent.futures import ThreadPoolExecutor
    f = jit(lambda x, y: lax.exp(x) * y - x)
    rng = np.random.default_rng(6)
    inputs = [(rng.standard_normal(1000 + 7 * i), rng.standard_normal(1000 + 7 * i) * 0 +
               rng.standard_normal()) for i in range(4)]
    for x, y in inputs:   # compile each shape first
        f(x, y)

    def work(k):
        x, y = inputs[k % 4]
        for _ in range(30):
            _close(f(x, y), lax.exp(x) * y - x, 8.0)
        return True

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(work, range(16)))


def test_no_algebra_that_breaks_inf_and_nan():
    x = np.array([np.inf, -np.inf, np.nan, 1.0, 0.0], np.float32)
    f = lambda x: ((x + 1.0) - x, x - x, x * 0.0, x / x, (x * 2.0) / 2.0)  # noqa: E731
    for g, w in zip(jit(f)(x), f(x)):
        np.testing.assert_array_equal(g, w)


def test_negative_zero_and_nan_semantics():
    x = np.array([0.0, -0.0, np.nan, np.inf, -np.inf])
    def f(x):
        one = np.float64(1.0)
        return (lax.neg(x), lax.div(one, lax.neg(x)), lax.div(one, x), lax.max(x, x), x != x,
                lax.is_finite(x))

    for g, w in zip(jit(f)(x), f(x)):
        g, w = np.asarray(g), np.asarray(w)
        np.testing.assert_array_equal(g, w)
        if g.dtype.kind == "f":   # signs of zeros and infinities (a NaN's sign is noise)
            ok = ~np.isnan(w)
            np.testing.assert_array_equal(np.signbit(g[ok]), np.signbit(w[ok]))


# ----------------------------------------------------------------------------
# Reductions in the loop nest, shape ops as index arithmetic

def _softmax(x):
    m = fnp.max(x, -1, keepdims=True)
    e = fnp.exp(x - m)
    return e / fnp.sum(e, -1, keepdims=True)


@pytest.mark.parametrize("dt", FLOATS)
def test_softmax_is_at_most_three_kernels(dt):
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((64, 1000)) * 10).astype(dt)
    labels = _labels(_softmax, x)
    assert all(lab.startswith("native:") for lab in labels), labels
    assert len(labels) <= 3, labels
    got, want = jit(_softmax)(x), _softmax(x)
    assert got.dtype == want.dtype == dt and got.shape == want.shape
    # the sums are ordered differently from NumPy's pairwise sum
    np.testing.assert_allclose(got, want, rtol=64 * np.finfo(dt).eps, atol=0)


def test_centred_values_are_recomputed_not_stored_with_the_same_bits(monkeypatch):
    """x - mean is summed squared by the variance's kernel and read again by the
    last one: that kernel computes it again, so the variance's kernel stores only
    its sums (a sum's kernel itself never takes recomputed equations)."""
    x = np.random.default_rng(13).standard_normal((64, 1000)).astype(np.float32)

    def f(x):
        centred = x - fnp.mean(x, -1, keepdims=True)
        return centred / fnp.sqrt(fnp.mean(centred * centred, -1, keepdims=True) + 1e-5)
    kernels = _exe(f, x).kernels
    labels = [k.label.split(" (split")[0] for k in kernels]
    assert labels[2] == "native:sub+mul+reduce_sum" and len(kernels[2].outs) == 1, labels
    assert labels[-1] == "native:sub+div", labels
    got = np.asarray(jit(f)(x))
    plan = executable.plan
    monkeypatch.setattr(executable, "plan", lambda *a, **k: plan(*a, **{**k, "recompute": False}))
    stored = [k.label.split(" (split")[0] for k in _exe(f, x).kernels]
    assert stored[-1] == "native:div", stored
    assert np.array_equal(got, np.asarray(jit(lambda x: f(x))(x)))


def _adam_like(gs, ps, ms, vs):
    """An AdamW-like update of each parameter: independent chains over one shape."""
    out = []
    for g, p, m, v in zip(gs, ps, ms, vs):
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        out.append((p - 1e-3 * (m / (fnp.sqrt(v) + 1e-8) + 1e-4 * p), m, v))
    return out


def test_independent_chains_walking_many_arrays_are_split_with_the_same_bits(monkeypatch):
    """8 updates of (256, 256) parameters read 32 arrays and store 24: the plan runs
    them in groups of at most MAX_STREAMS arrays (two updates of 7 each); the
    same element-wise equations give the same bits as the one group and as eager."""
    rng = np.random.default_rng(14)
    args = [[rng.standard_normal((256, 256)).astype(np.float32) for _ in range(8)]
            for _ in range(4)]
    args[3] = [np.abs(v) for v in args[3]]
    kernels = _exe(_adam_like, *args).kernels
    assert len(kernels) == 4, [k.label for k in kernels]
    assert all(len(k.ins) == 8 and len(k.outs) == 6 for k in kernels)
    got = jit(_adam_like)(*args)
    plan = executable.plan
    monkeypatch.setattr(executable, "plan", lambda *a, **k: plan(*a, **{**k, "streams": None}))
    assert len(_exe(_adam_like, *args).kernels) == 1
    one = jit(lambda *a: _adam_like(*a))(*args)
    for g, o, e in zip(tree.leaves(got), tree.leaves(one),
                       tree.leaves(_adam_like(*args))):
        assert np.array_equal(np.asarray(g), np.asarray(o))
        assert np.array_equal(np.asarray(g), np.asarray(e))


def test_chains_sharing_an_array_or_over_small_domains_are_not_split():
    """Chains that read one array of the domain's size stay one group (it is read
    once), and so do chains over a domain that fits in cache."""
    rng = np.random.default_rng(15)
    x = rng.standard_normal((256, 256)).astype(np.float32)
    ys = [rng.standard_normal((256, 256)).astype(np.float32) for _ in range(20)]
    assert len(_exe(lambda x, ys: [x * y + 1.0 for y in ys], x, ys).kernels) == 1
    small = [y[:64, :64] for y in ys]
    assert len(_exe(lambda ys: [y * 2.0 + 1.0 for y in ys], small).kernels) == 1
    assert len(_exe(lambda ys: [y * 2.0 + 1.0 for y in ys], ys).kernels) == 3


def _reduce_ref(name, x, axes):
    return {"sum": np.sum(x, axis=axes, dtype=x.dtype), "max": np.max(x, axis=axes),
            "min": np.min(x, axis=axes)}[name]


REDUCE_AXES = [((5, 7, 3), (0,)), ((5, 7, 3), (2,)), ((5, 7, 3), (1,)), ((5, 7, 3), (0, 2)),
               ((5, 7, 3), (0, 1, 2)), ((5, 7, 3), ()), ((40, 1, 9), (1,)), ((1, 33), (0, 1))]


@pytest.mark.parametrize("dt", FLOATS + [np.dtype(np.int32), np.dtype(np.uint8),
                                         np.dtype(np.int64)])
def test_reductions_over_axes_match_numpy(dt):
    rng = np.random.default_rng(12)
    for shape, axes in REDUCE_AXES:
        if dt.kind == "f":
            x = rng.standard_normal(shape).astype(dt)
        else:
            x = rng.integers(0, 200, shape).astype(dt)   # sums wrap like NumPy's
        f = lambda x: {  # noqa: E731
            "sum": lax.reduce_sum(x, axes), "max": lax.reduce_max(x, axes),
            "min": lax.reduce_min(x, axes), "sum_of_sq": lax.reduce_sum(x * x, axes)}
        got = jit(f)(x)
        for name in ("sum", "max", "min"):
            want = _reduce_ref(name, x, axes)
            if dt.kind == "f" and name == "sum":
                n = max(1, math.prod(shape[a] for a in axes))
                np.testing.assert_allclose(got[name], want, rtol=0,
                                           atol=n * np.finfo(dt).eps * np.abs(x).max())
            else:
                _check(got[name], want, f"{name} {shape} {axes}")
        sq = np.sum(x * x, axis=axes, dtype=dt)
        assert got["sum_of_sq"].dtype == dt and got["sum_of_sq"].shape == sq.shape
        if dt.kind != "f":
            np.testing.assert_array_equal(got["sum_of_sq"], sq)
        labels = _labels(f, x)
        assert all(lab.startswith("native:") for lab in labels), labels
        # x * x fused into its sum, which shares a loop nest with sum(x)
        assert "native:reduce_sum+mul+reduce_sum" in labels or not axes, labels


# (shape, axes) covering each way a float sum adds up its terms: running sums (few
# terms), blocked pairwise sums over inner axes, rows of pairwise sums over outer
# axes, a full sum, and a batch norm's (0, 2, 3)
SIBLING_SUMS = [((1000, 37), (0,)), ((37, 3000), (1,)), ((5000, 64), (0,)),
                ((700, 1000), (0, 1)), ((8, 16, 32, 32), (0, 2, 3)), ((3000,), (0,))]


@pytest.mark.parametrize("dt", FLOATS)
def test_sibling_reductions_share_one_kernel_with_the_same_bits(dt):
    rng = np.random.default_rng(14)
    for shape, axes in SIBLING_SUMS:
        x = rng.standard_normal(shape).astype(dt)
        y = rng.standard_normal(shape).astype(dt)
        first = lambda x, y: lax.reduce_sum(x, axes)             # noqa: E731
        second = lambda x, y: lax.reduce_sum(x * y, axes)        # noqa: E731
        both = lambda x, y: (first(x, y), second(x, y))          # noqa: E731
        (label,) = _labels(both, x, y)       # a row sum may be split over threads
        assert label.split(" (split")[0] == "native:reduce_sum+mul+reduce_sum", (shape, axes)
        got = jit(both)(x, y)
        for k, alone in enumerate((first, second)):   # each sum's order is unchanged
            want = np.asarray(jit(alone)(x, y))
            assert np.array_equal(np.asarray(got[k]).view(want.dtype.str.replace("f", "u")),
                                  want.view(want.dtype.str.replace("f", "u"))), (shape, axes, k)


def test_batch_norm_gradient_sums_share_one_kernel():
    rng = np.random.default_rng(15)
    g, h = (rng.standard_normal((4, 8, 16, 16)).astype(np.float32) for _ in range(2))

    def sums(g, h):      # a batch norm's gradients w.r.t. its shift and scale
        xhat = h * lax.rsqrt(lax.reduce_sum(h * h, (0, 2, 3)) + 1.0)[None, :, None, None]
        return lax.reduce_sum(g, (0, 2, 3)), lax.reduce_sum(g * xhat, (0, 2, 3))
    labels = _labels(sums, g, h)
    assert labels[-1] == "native:mul+reduce_sum+mul+reduce_sum", labels   # xhat, then both sums
    assert len(labels) == 3, labels
    for got, want in zip(jit(sums)(g, h), sums(g, h)):
        _close(got, want, 64.0)


def test_reductions_that_cannot_share_a_kernel():
    rng = np.random.default_rng(16)
    x = rng.standard_normal((64, 1000)).astype(np.float32)
    y = rng.standard_normal((1000, 64)).astype(np.float32)
    cases = {
        "reads the other's result": lambda x, y: (lax.reduce_sum(x, (0,)),
                                                  lax.reduce_sum(x - lax.reduce_sum(x, (0, 1)),
                                                                 (0,))),
        "other axes": lambda x, y: (lax.reduce_sum(x, (0,)), lax.reduce_sum(x * x, (1,))),
        "other reduction": lambda x, y: (lax.reduce_sum(x, (0,)), lax.reduce_max(x * x, (0,))),
        # x alone is summed as one flat loop, x * y.T over two levels: joined, the
        # first sum's terms would be added in another order
        "other loop nest": lambda x, y: (lax.reduce_sum(x, (0, 1)),
                                         lax.reduce_sum(x * y.T, (0, 1))),
    }
    for what, f in cases.items():
        labels = _labels(f, x, y)
        assert not any(lab.count("reduce_") > 1 for lab in labels), (what, labels)
        for got, want in zip(jit(f)(x, y), f(x, y)):
            _close(got, want, 64.0, what)


def test_reductions_with_keepdims_and_fnp():
    rng = np.random.default_rng(13)
    x = rng.standard_normal((6, 5, 4))
    for axis in (0, 1, 2, -1, (0, 2), None):
        f = lambda x: {  # noqa: E731
            "sum": fnp.sum(fnp.exp(x), axis=axis, keepdims=True),
            "max": fnp.max(x * 2.0, axis=axis, keepdims=True),
            "min": fnp.min(x, axis=axis, keepdims=True) - x}
        got, want = jit(f)(x), f(x)
        for k in want:
            _close(got[k], want[k], 64.0, f"{k} {axis}")
        labels = _labels(f, x)   # (keepdims of an output is a NumPy reshape view)
        assert all(lab.startswith("native:") or lab == "numpy:expand_dims"
                   for lab in labels), labels


def test_max_min_propagate_nan_and_inf():
    x = np.array([[1.0, np.nan, 3.0], [-np.inf, -np.inf, -np.inf], [np.inf, 2.0, np.nan],
                  [0.5, -7.0, 2.5]], np.float32)
    f = lambda x: (lax.reduce_max(x, (1,)), lax.reduce_min(x, (1,)),  # noqa: E731
                   lax.reduce_max(x, (0,)), lax.reduce_min(x, (0, 1)),
                   lax.reduce_sum(x, (1,)))
    for g, w in zip(jit(f)(x), f(x)):
        _check(g, w)
    _assert_all_native(f, x)
    i = np.array([[np.iinfo(np.int8).min, 5], [np.iinfo(np.int8).max, -3]], np.int8)
    def g(i):
        return lax.reduce_max(i, (1,)), lax.reduce_min(i, (0,)), lax.reduce_sum(i, (0,))
    for a, w in zip(jit(g)(i), g(i)):
        _check(a, w)


@pytest.mark.parametrize("shape,axes", [((0,), (0,)), ((3, 0), (1,)), ((0, 4), (1,)),
                                        ((2, 0, 3), (0, 2))])
def test_zero_size_reductions(shape, axes):
    x = np.ones(shape, np.float32)
    f = lambda x: lax.reduce_sum(x * 2.0, axes)  # noqa: E731
    _check(jit(f)(x), np.sum(x * 2.0, axis=axes, dtype=np.float32))
    _assert_all_native(f, x)
    _check(jit(lambda x: lax.reduce_sum(x, axes))(x.astype(np.int16)),
           np.sum(x.astype(np.int16), axis=axes, dtype=np.int16))
    # max/min of nothing: NumPy's error, via a NumPy step
    labels = _labels(lambda x: lax.reduce_max(x, axes), x)
    assert labels == ["numpy:reduce_max"], labels
    if math.prod(shape[a] for a in axes) == 0:
        with pytest.raises(ValueError):
            jit(lambda x: lax.reduce_max(x, axes))(x)
        with pytest.raises(ValueError):
            jit(lambda x: lax.reduce_min(x, axes))(x)


def test_products_and_boolean_reductions_fuse():
    x = np.linspace(0.5, 1.5, 12).reshape(3, 4)
    f = lambda x: fnp.prod(x * 2.0, axis=1)  # noqa: E731
    assert _labels(f, x) == ["native:mul+reduce_prod"]
    _close(jit(f)(x), f(x))
    b = np.array([[True, False], [True, True]])
    assert _labels(lambda b: lax.reduce_max(b, (1,)), b) == ["native:reduce_max"]
    _check(jit(lambda b: lax.reduce_max(b, (1,)))(b), np.array([True, True]))


@pytest.mark.parametrize("axis", [0, 1, None])
@pytest.mark.parametrize("reduce", ["sum", "prod"])
def test_float16_sums_and_products_accumulate_in_float32_natively(axis, reduce):
    """As XLA does: the sum of 10^4 float16 ones is 10^4 (NumPy's own float16 sum
    along axis 0 would stop at 2048), eagerly and under jit, in native code."""
    rng = np.random.default_rng(21)
    if reduce == "sum":
        h = np.ones((10_000, 3), np.float16)
        f = lambda h: fnp.sum(h * h, axis=axis)  # noqa: E731
        exact = np.sum(h.astype(np.float64) ** 2, axis=axis)
    else:
        h = rng.uniform(0.97, 1.03, (300, 3)).astype(np.float16)
        f = lambda h: fnp.prod(h, axis=axis)  # noqa: E731
        exact = np.prod(h.astype(np.float64), axis=axis)
    eager, compiled = np.asarray(f(h)), np.asarray(jit(f)(h))
    assert eager.dtype == compiled.dtype == np.float16
    ulp = np.spacing(exact.astype(np.float16)).astype(np.float64)
    assert np.all(np.abs(eager - exact) <= ulp) and np.all(np.abs(compiled - exact) <= ulp)
    np.testing.assert_allclose(compiled.astype(np.float64), eager, rtol=0, atol=ulp.max())
    labels = _labels(f, h)
    assert all(lab.startswith("native:") for lab in labels), labels


def test_shape_views_are_index_arithmetic():
    rng = np.random.default_rng(14)
    x = rng.standard_normal((4, 5))
    v = rng.standard_normal(5)
    c = rng.standard_normal(4)

    def f(x, v, c):
        return {
            "expand": x - lax.expand_dims(c, (1,)),
            "reshape": x * lax.reshape(c, (4, 1)) + lax.reshape(v, (1, 5)),
            "bcast": lax.broadcast_in_dim(c, (4, 5), (0,)) * x,
            "bcast_row": lax.broadcast_in_dim(v, (3, 4, 5), (2,)) + 1.0,
            "squeeze": lax.squeeze(lax.reshape(c, (1, 4, 1)), (0, 2)) * c,
            "chain": lax.expand_dims(lax.reshape(c, (4, 1)), (0,)) + x,
        }

    got, want = jit(f)(x, v, c), f(x, v, c)
    for k in want:
        _close(got[k], want[k], 8.0, k)
    labels = _labels(f, x, v, c)
    assert all(lab.startswith("native:") for lab in labels), labels
    # a reshape that regroups elements is not a view: it stays a NumPy step
    g = lambda x: lax.reshape(x, (5, 4)) * 2.0  # noqa: E731
    assert _labels(g, x) == ["numpy:reshape", "native:mul"]
    _check(jit(g)(x), g(x))
    # a view that is also an output is materialised
    h = lambda c: (lax.expand_dims(c, (1,)), lax.expand_dims(c, (1,)) * 2.0)  # noqa: E731
    for a, w in zip(jit(h)(c), h(c)):
        _check(a, w)


def test_a_view_regrouped_by_a_reshape_is_a_native_copy():
    # attention's heads merged back, (N, H, T, E) -> (N, T, H*E): NumPy's reshape would
    # copy the transposed view on one thread; the transpose is a native copy (in the
    # segment of its readers) and the reshape of it is free
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)
    f = lambda x: fnp.reshape(fnp.swapaxes(x, 1, 2), (2, 4, 15)) * 2.0  # noqa: E731
    assert _labels(f, x) == ["native:transpose", "native:reshape (no copy)", "native:mul"]
    np.testing.assert_array_equal(np.asarray(jit(f)(x)), np.asarray(f(x)))
    # a contiguous block (x[1]) reshapes without a copy: it stays a NumPy view
    g = lambda x: fnp.reshape(x[1], (12, 5)) * 2.0  # noqa: E731
    assert _labels(g, x)[0] == "numpy:slice"
    np.testing.assert_array_equal(np.asarray(jit(g)(x)), np.asarray(g(x)))


def test_view_of_a_value_defined_in_the_same_group():
    x = np.linspace(-1, 1, 6)

    def f(x):
        t = fnp.sin(x)
        u = lax.broadcast_in_dim(t, (6,), (0,))   # identity broadcast: a view of t
        return u * t + t

    _close(jit(f)(x), f(x), 4.0)


def test_mlp_gradient_reductions_fuse():
    from fgrad import grad
    rng = np.random.default_rng(15)

    def loss(w, x, y):
        return fnp.mean((fnp.tanh(x @ w) - y) ** 2)

    w, x, y = rng.standard_normal((4, 3)), rng.standard_normal((8, 4)), rng.standard_normal((8, 3))
    labels = _labels(grad(loss), w, x, y)
    assert not any(lab == "numpy:reduce_sum" for lab in labels), labels
    np.testing.assert_allclose(jit(grad(loss))(w, x, y), grad(loss)(w, x, y), rtol=1e-12)


def test_reduction_loops_are_vectorised():
    from fgrad._src.cpu import engine
    if not engine.host_has_feature("avx2"):
        pytest.skip("host has no AVX2")
    x = np.ones((64, 1000), np.float32)
    opt = engine.optimized_ir(_exe(_softmax, x).llvm_ir)
    assert "llvm.vector.reduce.fadd" in opt and "<8 x float>" in opt
    # reassoc only on the accumulation of a sum
    plain = _exe(lambda x: fnp.exp(x) * 2.0, x).llvm_ir
    assert "reassoc" not in plain


def test_transpose_is_a_view_and_fuses():
    rng = np.random.default_rng(16)
    x, w = rng.standard_normal((3, 5)), rng.standard_normal((5, 3))

    def f(x, w):
        return w - 0.1 * lax.transpose(x, (1, 0))

    assert _labels(f, x, w) == ["native:mul+sub"]
    _check(jit(f)(x, w), f(x, w))
    y = rng.standard_normal((2, 3, 4))
    g = lambda y: fnp.exp(lax.transpose(y, (2, 0, 1))) + 1.0  # noqa: E731
    assert _labels(g, y) == ["native:exp+add"]
    _close(jit(g)(y), g(y), 4.0)


def test_outer_products_become_fused_multiplies():
    rng = np.random.default_rng(17)
    a, b, w = rng.standard_normal((1, 4)), rng.standard_normal((1, 3)), rng.standard_normal((4, 3))

    def update(w, a, b):    # a weight gradient at batch 1: a^T b
        return w - 0.5 * (a.T @ b)

    assert _labels(update, w, a, b) == ["native:mul+mul+sub"]
    _check(jit(update)(w, a, b), update(w, a, b))
    # batch dims, broadcast batch dims, a preferred dtype and integers keep their meaning
    p, q = rng.standard_normal((2, 3, 1)), rng.standard_normal((2, 1, 5))
    i, j = np.arange(6, dtype=np.int32).reshape(2, 3, 1), np.arange(10, dtype=np.int32).reshape(2, 1, 5)
    cases = {
        "batched": (lambda p, q: lax.dot_general(p, q, (((2,), (1,)), ((0,), (0,)))), (p, q)),
        "broadcast_batch": (lambda p, q: lax.dot_general(p, q, (((2,), (1,)), ((0,), (0,)))),
                            (p[:1], q)),
        "free_after_contracting": (lambda p, q: lax.dot_general(
            p, q, (((0,), (0,)), ((), ()))), (a, b)),
        "to_f64": (lambda p, q: lax.dot_general(p, q, (((2,), (1,)), ((0,), (0,))),
                                                preferred_element_type=np.float64),
                   (p.astype(np.float32), q.astype(np.float32))),
        "int": (lambda p, q: lax.dot_general(p, q, (((2,), (1,)), ((0,), (0,)))), (i, j)),
    }
    for name, (f, args) in cases.items():
        got, want = jit(f)(*args), f(*args)
        assert got.dtype == want.dtype and got.shape == want.shape, name
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=name)
        assert not any("dot_general" in lab for lab in _labels(f, *args)), name


def test_groups_over_one_domain_fuse_across_other_steps():
    rng = np.random.default_rng(18)
    x, v = rng.standard_normal((4, 6)), rng.standard_normal(6)

    def f(x, v):
        a = x * 2.0          # domain (4, 6)
        u = v + 1.0          # domain (6,): another group in between
        return a - 1.0, u * 3.0

    assert sorted(_labels(f, x, v)) == ["native:add+mul", "native:mul+sub"]
    for got, want in zip(jit(f)(x, v), f(x, v)):
        _check(got, want)

    def g(x):                # a value read by a reduction's consumer stays ordered
        s = fnp.sum(x * x, axis=1, keepdims=True)
        return x / s, x + 1.0

    for got, want in zip(jit(g)(x), g(x)):
        _close(got, want, 4.0)


@pytest.mark.parametrize("shape", [(1000,), (7, 300), (3, 1, 500), (2, 3, 4)])
def test_big_kernels_split_over_threads(monkeypatch, shape):
    from fgrad._src.cpu import fused, pool
    if not pool.supported():
        pytest.skip("native workers need x86-64 Linux")
    monkeypatch.setattr(fused, "SPLIT_WORK", 0)
    monkeypatch.setattr(fused, "SPLIT_COLUMN_TERMS", 0)
    monkeypatch.setenv("FGRAD_NUM_THREADS", "3")
    rng = np.random.default_rng(19)
    x = rng.standard_normal(shape).astype(np.float32)
    y = rng.standard_normal(shape[-1:]).astype(np.float32)

    def f(x, y):
        return fnp.sin(x) * y + fnp.exp(-x * x)

    def g(x, y):   # a sum over the outer axis: each chunk of columns sums all rows
        return fnp.sum(x * y, axis=0)

    def h(x, y):   # a sum over the inner axis: each chunk of rows sums its own rows
        return fnp.sum(x * y, axis=-1)

    (kernel,) = _exe(f, x, y).kernels     # alone, yet a segment: it is split
    assert "split over 3 threads" in kernel.label and kernel.segment == 0
    # a full sum (1-d x) accumulates across every loop; columns narrower than
    # SPLIT_ROW_BYTES stay on one thread
    for reduction, split in ((g, x[0].nbytes >= fused.SPLIT_ROW_BYTES), (h, True)):
        (kernel,) = _exe(reduction, x, y).kernels
        assert ("split over 3 threads" in kernel.label) == (x.ndim > 1 and split)
    for _ in range(20):
        _close(jit(f)(x, y), f(x, y), 4.0)
        _close(jit(g)(x, y), g(x, y), 4.0)
        _close(jit(h)(x, y), h(x, y), 4.0)


def test_split_kernels_report_selector_errors(monkeypatch):
    from fgrad._src.cpu import fused, pool
    if not pool.supported():
        pytest.skip("native workers need x86-64 Linux")
    monkeypatch.setattr(fused, "SPLIT_WORK", 0)
    monkeypatch.setenv("FGRAD_NUM_THREADS", "2")
    cases = [np.arange(8, dtype=np.float32) * k for k in (1, 10, 100)]
    g = jit(lambda w, a, b, c: lax.select_n(w, a, b, c))
    bad = np.array([0, 1, 2, 0, 1, 2, 5, 0], np.int32)   # the error is in the 2nd half
    assert "split over 2 threads" in _exe(g, bad, *cases).kernels[0].label
    for _ in range(20):
        with pytest.raises(ValueError, match="invalid entry"):
            g(bad, *cases)
    good = np.array([0, 1, 2, 0, 1, 2, 1, 0], np.int32)
    np.testing.assert_array_equal(g(good, *cases), lax.select_n(good, *cases))


def test_bad_thread_count_is_a_clear_error(monkeypatch):
    from fgrad._src.cpu import threads
    monkeypatch.setenv("FGRAD_NUM_THREADS", "many")
    with pytest.raises(ValueError, match="FGRAD_NUM_THREADS"):
        threads.num_threads()


def test_slices_and_reversals_are_index_arithmetic():
    rng = np.random.default_rng(20)
    x = rng.standard_normal((6, 8))
    v = rng.standard_normal(8)

    def f(x, v):
        return {
            "slice": lax.slice(x, (1, 2), (5, 8)) * 2.0,
            "strided": lax.slice(x, (0, 1), (6, 8), (2, 3)) + 1.0,
            "rev": lax.rev(x, (1,)) - x,
            "rev_both": lax.rev(x, (0, 1)) * lax.rev(v, (0,)),
            "slice_of_rev": lax.slice(lax.rev(x, (0,)), (1, 0), (4, 8), (2, 1)) + 0.5,
            "rev_of_transpose": lax.rev(lax.transpose(x, (1, 0)), (0,)) * 3.0,
            "differences": x[1:] - x[:-1],
            "scalar_element": x[2:3, 5:6] * x,
            "empty": lax.slice(x, (2, 0), (2, 8)) + 1.0,
        }

    got, want = jit(f)(x, v), f(x, v)
    for k in want:
        _close(got[k], want[k], 4.0, k)
    labels = _labels(f, x, v)
    assert all(lab.startswith("native:") for lab in labels), labels


@pytest.mark.parametrize("dt", [np.int32, np.uint8, np.bool_, np.float32])
def test_views_of_every_dtype(dt):
    x = (np.arange(24).reshape(4, 6) % 7).astype(dt)

    def f(x):
        return lax.rev(lax.slice(x, (1, 0), (4, 6), (1, 2)), (0, 1)) == lax.transpose(
            lax.slice(x, (0, 1), (3, 4)), (1, 0))[:, ::-1].T

    np.testing.assert_array_equal(jit(f)(x), f(x))


def test_gradient_of_slicing_stays_fused():
    from fgrad import grad
    x = np.linspace(-1.0, 1.0, 10)
    loss = lambda x: fnp.sum((x[1:] - x[:-1]) ** 2) + fnp.sum(fnp.exp(x[::-1] * x))  # noqa: E731
    np.testing.assert_allclose(jit(grad(loss))(x), grad(loss)(x), rtol=1e-12)
    forward = _labels(loss, x)
    assert all(lab.startswith("native:") for lab in forward), forward


# ----------------------------------------------------------------------------
# Segments: consecutive native kernels as one native call

def _chain(x, v):
    """Kernels over alternating domains, each value read only by the next ones."""
    a = fnp.sin(x) * 2.0                       # (6, 5)
    s = fnp.sum(a, axis=1)                     # (6,)
    b = fnp.exp(s / 10.0) + 1.0                # (6,)
    c = a * b[:, None] - x                     # (6, 5)
    t = fnp.sum(c * c, axis=0)                 # (5,)
    d = fnp.tanh(t) * v                        # (5,)
    e = c @ d                                  # (6,): a BLAS call inside the segment
    return e * b, fnp.max(c, axis=1) + e


def test_segment_runs_kernels_in_one_call_and_reuses_workspace():
    from fgrad._src.cpu.program import plan_segments  # noqa: F401 (the planner under test)
    rng = np.random.default_rng(21)
    x, v = rng.standard_normal((6, 5)), rng.standard_normal(5)
    exe = _exe(_chain, x, v)
    calls = [k for k in exe.calls if k.label.startswith("native:")]
    assert [k.label for k in calls] == ["native:segment 0"], [k.label for k in exe.calls]
    assert sum(k.label.startswith("native:") for k in exe.kernels) >= 6
    for got, want in zip(jit(_chain)(x, v), _chain(x, v)):
        _close(got, want, 8.0)


def test_segment_workspace_is_planned_by_liveness():
    from fgrad._src.compiler.fusion import plan
    from fgrad._src.cpu.program import plan_segments
    from fgrad._src.compiler.simplify import simplify
    x = np.ones((64, 64))

    def f(x):            # five (64,)-sized temporaries, each dead after the next kernel
        y = x
        for k in range(5):
            y = fnp.sum(fnp.sin(y + k), axis=1, keepdims=True) * x * 0.01
        return fnp.sum(y)

    jaxpr = simplify(jit(f).lower(x).jaxpr).jaxpr
    steps = plan(jaxpr, fused.can_fuse)
    (seg,) = plan_segments(steps, lambda st: hasattr(st, "reads"), set(jaxpr.outvars))
    sizes = [int(np.prod(v.aval.shape)) * 8 for v in seg.offsets]
    assert len(seg.offsets) == 5 and seg.workspace == 2 * 512, (seg.workspace, sizes)
    # values alive at the same time never share bytes
    np.testing.assert_allclose(jit(f)(x), f(x), rtol=1e-12)


def test_segment_reports_selector_errors_and_recovers():
    cases = [np.arange(6, dtype=np.float32) * k for k in (1, 10, 100)]

    def f(w, a, b, c):
        s = lax.select_n(w, a, b, c)
        return fnp.exp(fnp.sum(s) / 1000.0) * a, fnp.cumsum(a)[0]

    g = jit(f)
    assert any(k.segment is not None for k in _exe(f, np.zeros(6, np.int32), *cases).kernels)
    with pytest.raises(ValueError, match="invalid entry"):
        g(np.array([0, 1, 2, 5, 0, 0], np.int32), *cases)
    good = np.array([0, 1, 2, 2, 1, 0], np.int32)
    for got, want in zip(g(good, *cases), f(good, *cases)):
        _close(got, want, 8.0)


def test_segments_under_concurrent_calls():
    from concurrent.futures import ThreadPoolExecutor
    rng = np.random.default_rng(22)
    x, v = rng.standard_normal((6, 5)), rng.standard_normal(5)
    f = jit(_chain)
    want = _chain(x, v)

    def work(k):
        for _ in range(20):
            for got, w in zip(f(x * (k % 3 + 1), v), _chain(x * (k % 3 + 1), v)):
                _close(got, w, 8.0)
        return True

    f(x, v)
    with ThreadPoolExecutor(6) as pool:
        assert all(pool.map(work, range(12)))
    for got, w in zip(f(x, v), want):
        _close(got, w, 8.0)


def test_donated_update_inside_a_segment():
    rng = np.random.default_rng(23)
    w0, x, g = rng.standard_normal((5, 3)), rng.standard_normal((4, 5)), rng.standard_normal((4, 3))
    step = jit(lambda w, x, g: w - 0.1 * (x.T @ g), donate_argnums=(0,))
    w = fnp.asarray(w0)
    address = w._value.ctypes.data      # (a reference to the buffer would observe it)
    exe = step.lower(w, x, g)
    assert "in place of donated input 0" in exe.as_text() and "[segment 0]" in exe.as_text()
    out = step(w, x, g)
    np.testing.assert_allclose(out, w0 - 0.1 * (x.T @ g), rtol=1e-12)
    assert out._value.ctypes.data == address


def test_flush_denormals_option(monkeypatch):
    from fgrad import config
    from fgrad._src.cpu import engine
    if not engine.host_triple().startswith("x86_64"):
        pytest.skip("FTZ/DAZ are x86 MXCSR flags")
    tiny = np.array([1e-40, -3e-39, 1e-30, 1.0], np.float32)      # two subnormals

    def f(x):
        return x * 3.0, x * 1e-10, fnp.sum(x * 2.0)

    exact = jit(f)(tiny)
    for got, want in zip(exact, f(tiny)):   # default: subnormals kept, as NumPy
        np.testing.assert_array_equal(got, want)
    monkeypatch.setattr(config, "flush_denormals", True)
    flushed = jit(f)(tiny)
    f32 = np.float32
    np.testing.assert_array_equal(flushed[0], np.array([0, 0, 3e-30, 3], f32))  # inputs read as 0
    np.testing.assert_array_equal(flushed[1], np.array([0, 0, 0, 1e-10], f32))  # results flushed
    assert "llvm.x86.sse.ldmxcsr" in _exe(f, tiny).llvm_ir
    # the caller's flags are restored: NumPy still sees subnormals afterwards
    assert np.float32(1e-40) * np.float32(1.0) != 0


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16, np.int32, np.bool_])
def test_views_feeding_native_kernels_are_native_copies(dt):
    rng = np.random.default_rng(24)
    x = (rng.standard_normal((6, 8)) * 4).astype(dt)
    idx = np.array([0, 3, 5, 1])

    def f(x, idx):       # a slice, a reversal and a transpose, each read by a gather
        return (fnp.take(x[1:5, ::2], idx % 4, axis=0),
                fnp.take(lax.rev(x, (0,)), idx, axis=0),
                fnp.take(x.T, idx, axis=1))

    labels = _labels(f, x, idx)
    copies = [lab for lab in labels if lab.split(":")[1] in ("slice", "rev", "transpose")]
    assert len(copies) == 4, labels
    assert not any(lab.startswith("numpy:") for lab in labels), labels
    for got, want in zip(jit(f)(x, idx), f(x, idx)):
        np.testing.assert_array_equal(got, want)


def test_views_of_views_are_read_through_to_their_buffer():
    """A block of attention's heads (a slice of a transpose of a reshape) feeding a
    native kernel is one native copy reading the buffer under all three views, not
    a copy of a transposed view that NumPy first makes contiguous; the views no
    step reads any more are no steps."""
    rng = np.random.default_rng(26)
    x, w = rng.standard_normal((4, 6, 8)), rng.standard_normal((3, 3))

    def f(x, w):
        heads = fnp.swapaxes(fnp.reshape(x, (4, 6, 2, 4)), 1, 2)      # (4, 2, 6, 4)
        return heads[:, :, 1:4, 1:] @ w

    labels = [k.label for k in _exe(f, x, w).calls]
    assert "numpy:transpose" not in labels and "native:segment 0" in labels, labels
    np.testing.assert_array_equal(jit(f)(x, w), f(x, w))


def test_sliced_and_broadcast_matmul_operands_stay_in_one_segment():
    rng = np.random.default_rng(25)
    x, w, b = rng.standard_normal((6, 8)), rng.standard_normal((5, 3)), rng.standard_normal(5)

    def f(x, w, b):
        return (x[:, 1:6] @ w, lax.broadcast_in_dim(b, (4, 5), (1,)) @ w)

    exe = _exe(f, x, w, b)
    assert [k.label for k in exe.calls] == ["native:segment 0"], [k.label for k in exe.calls]
    for got, want in zip(jit(f)(x, w, b), f(x, w, b)):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_math_functions_used_at_many_sites_are_called_not_inlined():
    """Sixteen or more exps in one program call exp's vector variants (one copy of
    its code instead of sixteen inlined ones) and give the inlined results."""
    x = np.linspace(-3, 3, 1001)
    few = lambda x: sum(fnp.exp(x * (0.1 * k)) for k in range(3))  # noqa: E731
    many = lambda x: sum(fnp.exp(x * (0.1 * k)) for k in range(20))  # noqa: E731
    assert "vector-function-abi-variant" not in _exe(few, x).llvm_ir
    assert "vector-function-abi-variant" in _exe(many, x).llvm_ir
    _close(jit(many)(x), many(x))
    _close(jit(many)(x.astype(np.float32)), many(x.astype(np.float32)))


def test_trig_loops_keep_two_vectors_in_flight():
    """A fused loop evaluating sin or cos asks the vectoriser to interleave two
    vectors (the inlined variants' long dependency chains); other loops leave
    the choice to LLVM."""
    from fgrad._src.cpu import engine
    x = np.linspace(-3, 3, 4096, dtype=np.float32)
    trig = _exe(lambda x: fnp.cos(x) * x, x).llvm_ir
    plain = _exe(lambda x: fnp.exp(x) * x, x).llvm_ir
    assert "llvm.loop.interleave.count\", i32 2" in trig
    assert "interleave" not in plain
    vector_body = re.search(r"^vector\.body:.*?^\S", engine.optimized_ir(trig), re.M | re.S)
    assert len(re.findall(r"load <\d+ x float>", vector_body.group(0))) == 2
    _close(jit(lambda x: fnp.cos(x) * x)(x), fnp.cos(x) * x)


def test_a_one_segment_program_calls_its_segment_directly():
    """A program that is one segment, reading its inputs in another order and a
    constant, and giving its outputs in another order (one twice), skips the step
    environment; donated inputs are still copied when they alias another."""
    c = np.arange(6.0).reshape(2, 3)

    def f(w, x, y):
        s = fnp.sum(y * c)
        return x * 2.0 + s, w - 0.5 * y, x * 2.0 + s

    w, x, y = np.ones((2, 3)), np.full((2, 3), 2.0), np.full((2, 3), 3.0)
    exe = _exe(f, w, x, y)
    fn, sources, picks = exe._single
    assert sources is not None and picks == [0, 1, 0]
    want = f(w, x, y)
    step = jit(f, donate_argnums=(0,))
    for got, expected in zip(step(w.copy(), x, y), want):
        np.testing.assert_allclose(got, expected)
    shared = np.ones((2, 3))
    out = step(shared, shared, y)            # donated and read again: copied first
    np.testing.assert_allclose(out[0], 2.0 + np.sum(y * c))
    np.testing.assert_allclose(out[1], 1.0 - 1.5)


def test_an_output_goes_into_a_donated_buffer_only_if_computed_from_it():
    """In a kernel with two outputs, only the one computed from the donated input
    may take its buffer: the other one's store does not wait for the input's load
    (with x * 2 + s in w's buffer, LLVM stored it before loading w for w - y / 2,
    which then gave 45.5 instead of -0.5)."""
    c = np.arange(6.0).reshape(2, 3)

    def f(w, x, y):
        return x * 2.0 + fnp.sum(y * c), w - 0.5 * y

    step = jit(f, donate_argnums=(0,))
    w, x, y = np.ones((2, 3)), np.ones((2, 3)), np.full((2, 3), 3.0)
    assert "in place of donated input 0" in step.lower(w, x, y).as_text()
    a, b = step(w, x, y)
    np.testing.assert_array_equal(a, np.full((2, 3), 47.0))
    np.testing.assert_array_equal(b, np.full((2, 3), -0.5))
