"""Structural primitives as native kernels (fgrad/_src/cpu/structural.py) and
the reductions fused loops now cover, against the reference interpreter (eager
evaluation with each primitive's NumPy impl), bit for bit: pad, concatenate,
dynamic_slice, dynamic_update_slice, cumsum/cumprod/cummax/cummin,
argmax/argmin (every dtype each accepts), reduce_prod/reduce_and/reduce_or;
edge cases (zero-size operands, negative and out-of-range start indices of
every index dtype, NaN/Inf/-0.0, integer wrap-around); the labels as_text
shows; and the programs grad makes of them."""
import numpy as np
import pytest

import fgrad.numpy as fnp
from fgrad import grad, jit, lax
from fgrad._src.compiler.fusion import Fused
from fgrad._src.cpu import fused
from fgrad._src.jit.primitive import compile_jaxpr
from fgrad._src.jaxpr import Literal

# NaNs and overflow in the data on purpose: the eager reference warns about them
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

INTS = [np.dtype(f"{k}int{b}") for k in ("", "u") for b in (8, 16, 32, 64)]
FLOATS = [np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)]
NUMERIC = INTS + FLOATS
ALL = [np.dtype(bool)] + NUMERIC


def _exe(f, *args):
    return compile_jaxpr(jit(f).lower(*args).jaxpr, "f")


def _labels(f, *args):
    return [k.label for k in _exe(f, *args).kernels]


def _data(dt, shape, rng):
    """Values of dtype `dt`: for floats with NaN, +-Inf, +-0.0 mixed in; for
    integers the full range (so sums and products wrap)."""
    dt = np.dtype(dt)
    if dt.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if dt.kind == "f":
        x = (rng.standard_normal(shape) * 4).astype(dt)
        flat = x.reshape(-1)
        specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0], dt)
        flat[::5][:len(specials)] = specials[:len(flat[::5])]
        return x
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max, shape, endpoint=True, dtype=dt)


def _same(got, want, what=""):
    """Equal dtype, shape and bits (so -0.0 differs from 0.0), NaN where NaN is
    (the sign and payload of a NaN are not specified: LLVM may commute an add)."""
    got, want = np.ascontiguousarray(got), np.ascontiguousarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, \
        (what, got.dtype, got.shape, want.dtype, want.shape)
    if got.dtype.kind == "f":
        nan = np.isnan(want)
        np.testing.assert_array_equal(np.isnan(got), nan, err_msg=what)
        got, want = got[~nan], want[~nan]
    np.testing.assert_array_equal(got.view(f"u{got.dtype.itemsize}"),
                                  want.view(f"u{want.dtype.itemsize}"), err_msg=what)


def _compare(f, *args):
    """jit(f) against eager f, bit for bit; f returns a dict."""
    got, want = jit(f)(*args), f(*args)
    assert set(got) == set(want)
    for k in want:
        _same(got[k], want[k], k)


def _native(f, *args):
    labels = _labels(f, *args)
    assert all(lab.startswith("native:") for lab in labels), labels
    return labels


# ----------------------------------------------------------------------------
# Moves: pad, concatenate, dynamic_slice, dynamic_update_slice

@pytest.mark.parametrize("dt", ALL, ids=str)
def test_moves_every_dtype(dt):
    rng = np.random.default_rng(1)
    x, y = _data(dt, (3, 4), rng), _data(dt, (3, 2), rng)
    v = _data(dt, (), rng)
    u = _data(dt, (2, 3), rng)
    empty = _data(dt, (3, 0), rng)

    def f(x, y, v, u, empty, i, j):
        return {
            "pad": lax.pad(x, v, [(1, 2, 0), (0, 1, 2)]),
            "pad_interior_only": lax.pad(y, v, [(0, 0, 3), (0, 0, 1)]),
            "pad_empty": lax.pad(empty, v, [(1, 0, 1), (2, 1, 4)]),
            "concat": lax.concatenate([x, empty, y, x], 1),
            "concat0": lax.concatenate([x, x], 0),
            "dslice": lax.dynamic_slice(x, [i, j], [2, 3]),
            "dslice_empty": lax.dynamic_slice(x, [i, j], [0, 2]),
            "dupdate": lax.dynamic_update_slice(x, u, [i, j]),
            "dupdate_empty": lax.dynamic_update_slice(x, empty, [i, j]),
        }

    for i, j in [(0, 0), (1, 1), (-4, 7), (2, -1), (100, -100)]:
        args = (x, y, v, u, empty, np.int32(i), np.int32(j))
        _compare(f, *args)
    labels = _native(f, *args)
    for name in ("pad", "concatenate", "dynamic_slice", "dynamic_update_slice"):
        assert f"native:{name}" in labels, labels


@pytest.mark.parametrize("idt", INTS, ids=str)
def test_dynamic_start_indices_of_every_dtype_are_clamped(idt):
    """Negative and huge starts (unsigned ones above the signed range too) are
    clamped into [0, size - window], as the impl's np.clip does."""
    x = np.arange(30.0).reshape(5, 6)
    u = -np.ones((2, 4))
    info = np.iinfo(idt)
    f = lambda x, u, i, j: {"s": lax.dynamic_slice(x, [i, j], [2, 4]),  # noqa: E731
                            "u": lax.dynamic_update_slice(x, u, [i, j])}
    for i, j in [(0, 0), (3, 2), (4, 5), (info.max, info.min), (info.min, info.max),
                 (info.max // 2 + 1, 1), (-1 if info.min else 1, 2)]:
        _compare(f, x, u, idt.type(i), idt.type(j))
    _native(f, x, u, idt.type(0), idt.type(0))


def test_full_size_windows_and_zero_dimensional_operands():
    x = np.arange(12, dtype=np.int16).reshape(3, 4)
    s = np.array(7, np.int16)
    f = lambda x, s, i: {  # noqa: E731
        "whole": lax.dynamic_slice(x, [i, i], [3, 4]),
        "replace_all": lax.dynamic_update_slice(x, x * 2, [i, i]),
        "scalar": lax.dynamic_update_slice(s, s + 1, []),
        "pad_scalar": lax.pad(s, s, []),
    }
    _compare(f, x, s, np.int32(5))


def test_zero_size_results():
    x = np.ones((0, 3), np.float32)
    f = lambda x, v: {"pad": lax.pad(x, v, [(0, 0, 2), (1, 1, 0)]),  # noqa: E731
                      "cat": lax.concatenate([x, x], 0),
                      "cum": lax.cumsum(x, 1)}
    _compare(f, x, np.float32(2))


# ----------------------------------------------------------------------------
# Cumulative reductions

@pytest.mark.parametrize("dt", NUMERIC, ids=str)
def test_cumulative_every_dtype(dt):
    rng = np.random.default_rng(2)
    x = _data(dt, (4, 7, 3), rng)

    def f(x):
        out = {}
        for name in ("cumsum", "cumprod", "cummax", "cummin"):
            op = getattr(lax, name)
            for axis in (0, 1, 2):
                for reverse in (False, True):
                    out[f"{name}/{axis}/{reverse}"] = op(x, axis, reverse)
        return out

    _compare(f, x)
    _native(f, x)


def test_cummax_cummin_nan_and_signed_zero_order():
    """NumPy keeps the running value only when it is NaN or strictly beats the new
    element, so on a tie of -0.0 and 0.0 the later one wins."""
    x = np.array([-0.0, 0.0, -0.0, 1.0, np.nan, 5.0, -np.inf, np.inf, 0.0, -0.0])
    f = lambda x: {f"{n}/{r}": getattr(lax, n)(x, 0, r)  # noqa: E731
                   for n in ("cummax", "cummin", "cumsum", "cumprod") for r in (False, True)}
    for d in (np.float64, np.float32, np.float16):
        _compare(f, x.astype(d))
        _compare(f, x[4:].astype(d)[::-1].copy())


def test_float16_cumsum_rounds_every_step():
    x = np.full(5000, 0.1, np.float16)     # the sum stalls once 0.1 is below half an ulp
    f = lambda x: {"s": lax.cumsum(x, 0), "p": lax.cumprod(x + 1, 0)}  # noqa: E731
    _compare(f, x)


# ----------------------------------------------------------------------------
# argmax / argmin

@pytest.mark.parametrize("dt", ALL, ids=str)
def test_arg_extrema_every_dtype(dt):
    rng = np.random.default_rng(3)
    x = _data(dt, (5, 6, 4), rng)
    if dt.kind in "iu":
        x[1] = x[1, :1]                   # ties: the first index wins
    f = lambda x: {f"{n}/{a}": getattr(lax, n)(x, a, np.int32)  # noqa: E731
                   for n in ("argmax", "argmin") for a in range(3)}
    _compare(f, x)
    _native(f, x)


def test_arg_extrema_nan_ties_and_index_dtypes():
    x = np.array([[1.0, np.nan, 3.0, np.nan], [2.0, 5.0, 5.0, 1.0], [-0.0, 0.0, -0.0, 0.0],
                  [-np.inf, -np.inf, np.inf, np.inf]])
    for d in (np.float16, np.float32, np.float64):
        f = lambda x: {f"{n}/{a}/{i}": getattr(lax, n)(x, a, i)  # noqa: E731
                       for n in ("argmax", "argmin") for a in (0, 1)
                       for i in (np.int8, np.uint16, np.int64)}
        _compare(f, x.astype(d))
    # an index beyond the index dtype's range wraps, as astype does
    long = np.zeros(300, np.float32)
    long[200] = 1.0
    g = lambda x: {"i8": lax.argmax(x, 0, np.int8), "u8": lax.argmin(-x, 0, np.uint8)}  # noqa: E731
    _compare(g, long)


def test_arg_extrema_of_an_empty_axis_stay_numpy_and_raise():
    x = np.ones((3, 0), np.float32)
    f = lambda x: lax.argmax(x, 1, np.int32)  # noqa: E731
    assert _labels(f, x) == ["numpy:argmax"]
    with pytest.raises(ValueError):
        jit(f)(x)
    g = lambda x: lax.argmin(x, 0, np.int32)   # an empty result over a non-empty axis  # noqa: E731
    assert _labels(g, x) == ["native:argmin"]
    _same(jit(g)(x), g(x))


# ----------------------------------------------------------------------------
# Fused reductions: reduce_prod, reduce_and, reduce_or, and max/min of booleans

@pytest.mark.parametrize("dt", INTS + FLOATS[1:], ids=str)
def test_reduce_prod_every_dtype(dt):
    rng = np.random.default_rng(4)
    x = _data(dt, (6, 5), rng) if dt.kind != "f" else \
        rng.uniform(0.5, 1.5, (6, 5)).astype(dt)
    f = lambda x: {"0": lax.reduce_prod(x, (0,)), "1": lax.reduce_prod(x, (1,)),  # noqa: E731
                   "all": lax.reduce_prod(x, (0, 1))}
    got, want = jit(f)(x), f(x)
    for k in want:
        if dt.kind == "f":     # products may be reassociated, as sums are
            np.testing.assert_allclose(got[k], want[k], rtol=8 * np.finfo(dt).eps, err_msg=k)
            assert got[k].dtype == want[k].dtype
        else:                  # integer products wrap identically in any order
            _same(got[k], want[k], k)
    assert all(lab.startswith("native:reduce_prod") for lab in _labels(f, x))


def test_boolean_reductions():
    rng = np.random.default_rng(5)
    b = rng.integers(0, 2, (5, 7, 3)).astype(bool)
    b[0] = True
    b[1] = False

    def f(b, x):
        out = {}
        for axes in ((0,), (1,), (2,), (0, 2), (0, 1, 2)):
            out[f"and{axes}"] = lax.reduce_and(b, axes)
            out[f"or{axes}"] = lax.reduce_or(b, axes)
            out[f"max{axes}"] = lax.reduce_max(b, axes)
            out[f"min{axes}"] = lax.reduce_min(b, axes)
        out["fused"] = lax.reduce_or(x > 0.5, (1,))   # the comparison joins the loop
        return out

    x = rng.uniform(0, 1, (5, 7)).astype(np.float32)
    _compare(f, b, x)
    labels = _native(f, b, x)
    assert "native:gt+reduce_or" in labels, labels


def test_zero_size_boolean_and_product_reductions():
    e = np.ones((3, 0), bool)
    f = lambda e: {"or": lax.reduce_or(e, (1,)), "or0": lax.reduce_or(e, (0,))}  # noqa: E731
    _compare(f, e)
    _native(f, e)
    # an empty product / and is its identity, 1 / True, also natively
    for g in (lambda e: lax.reduce_and(e, (1,)),
              lambda e: lax.reduce_prod(e.astype(np.float32), (1,)),
              lambda e: lax.reduce_prod(e.astype(np.int32), (0, 1))):
        assert _labels(g, e)[-1].startswith("native:")
        _same(jit(g)(e), g(e))


# ----------------------------------------------------------------------------
# Programs: segments, gradients, as_text, Literal operands

def test_structural_kernels_join_native_segments():
    x = np.linspace(-2, 2, 24).reshape(4, 6)

    def f(x, i):
        c = lax.cumsum(x * 2.0, 1)
        s = lax.dynamic_slice(c, [i, i], [2, 3])
        p = lax.pad(s, fnp.max(x), [(1, 1, 1), (0, 2, 0)])
        return {"out": lax.concatenate([p + 1.0, p], 0), "arg": lax.argmax(c, 1, np.int32)}

    _compare(f, x, np.int32(1))
    exe = _exe(f, x, np.int32(1))
    labels = [k.label for k in exe.kernels]
    assert all(lab.startswith("native:") for lab in labels), labels
    assert [k.label for k in exe.calls] == ["native:segment 0"]
    assert "// 1: native:cumsum  [segment 0]" in exe.as_text()


def test_gradients_through_structural_primitives():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((4, 5))

    def loss(x, i):
        a = lax.dynamic_slice(x, [i, i], [2, 3])             # grad: dynamic_update_slice
        b = lax.concatenate([x, fnp.sin(x)], 1)              # grad: slices of the cotangent
        c = lax.cumsum(x, 1)                                 # grad: a reverse cumsum
        d = lax.dynamic_update_slice(x, a * 3.0, [i, i])
        return fnp.sum(a ** 2) + fnp.sum(b * b) + fnp.sum(fnp.tanh(c)) + fnp.sum(d ** 3)

    g = grad(loss)
    for i in (0, 2, 9, -3):
        np.testing.assert_allclose(jit(g)(x, np.int32(i)), g(x, np.int32(i)), rtol=1e-13)
    labels = _labels(g, x, np.int32(1))
    for name in ("dynamic_slice", "dynamic_update_slice", "concatenate", "cumsum"):
        assert f"native:{name}" in labels, labels
    assert not any(lab.startswith(("numpy:dynamic", "numpy:cumsum", "numpy:concatenate"))
                   for lab in labels), labels


def _run_single(eqn, *arrays):
    """Compile `eqn` alone as a native kernel (Literal operands become constants)."""
    group = Fused([eqn], list(eqn.invars), list(eqn.outvars), tuple(eqn.outvars[0].aval.shape))
    (fn,), _ = fused.compile_groups([group], "single")
    return fn(*arrays)


def test_literal_operands_are_ir_constants():
    """pad's padding value and constant start indices are folded Literals in real
    programs; the kernels take them as constants (no pointer)."""
    x = np.arange(12.0).reshape(3, 4)

    def f(x):
        return {"pad": lax.pad(x, -1.5, [(1, 0, 1), (0, 2, 0)]),
                "slice": lax.dynamic_slice(x, [1, 9], [2, 2]),
                "update": lax.dynamic_update_slice(x, x[:1, :2] * 0 + 7.0, [-5, 1])}

    eqns = {e.primitive.name: e for e in jit(f).lower(x).jaxpr.jaxpr.eqns}
    want = f(x)
    for name, key in (("pad", "pad"), ("dynamic_slice", "slice")):
        eqn = eqns[name]
        assert any(type(a) is Literal for a in eqn.invars[1:])
        assert fused.can_lower_alone(eqn)
        _same(_run_single(eqn, x)[0], want[key], name)
    upd = eqns["dynamic_update_slice"]
    assert all(type(a) is Literal for a in upd.invars[2:])
    _same(_run_single(upd, x, np.full((1, 2), 7.0))[0], want["update"])


def test_literal_operands_run_native_end_to_end():
    x = np.arange(12.0).reshape(3, 4)
    labels = _labels(grad(lambda x: fnp.sum(x[1:, ::2] ** 2)), x)   # grad of a slice: pad
    assert "native:pad" in labels, labels
    assert _labels(lambda x: lax.dynamic_slice(x, [1, 2], [2, 2]), x) == \
        ["native:dynamic_slice"]


# ----------------------------------------------------------------------------
# float16 in fused element-wise loops: computed in float, rounded per operation

def _half_ulps(got, want):
    """Distance in float16 ulps (NaN positions must agree; they count as 0)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype == np.float16 and got.shape == want.shape
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)

    def ordered(v):
        i = v.view(np.int16).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFF), i)
    dist = np.abs(ordered(got) - ordered(want))
    dist[nan] = 0
    return dist.max(initial=0)


def test_float16_elementwise_matches_numpy():
    rng = np.random.default_rng(7)
    h = np.concatenate([rng.standard_normal(2000) * 10, rng.standard_normal(500) * 1e-5,
                        [np.nan, np.inf, -np.inf, 0.0, -0.0, 65504, -65504, 6e-8, 2049, 2051,
                         0.5, -0.5, 1.5, 2.5]]).astype(np.float16)
    g = np.roll(h, 7)
    d = np.concatenate([rng.standard_normal(len(h) - 8) * 10,
                        [1e6, 65519.9, 65520, 1e-9, np.nan, -0.0, 2.9802322387695312e-08,
                         2.98023223876953125e-08 * (1 + 2 ** -40)]])

    def f(h, g, d):
        return {
            # exact operations: bit for bit
            "add": h + g, "sub": h - g, "mul": h * g, "div": h / g, "chain": h * g + h,
            "sqrt": lax.sqrt(h), "rsqrt": lax.rsqrt(h), "neg": -h, "abs": lax.abs(h),
            "sign": lax.sign(h), "max": lax.max(h, g), "min": lax.min(h, g),
            "floor": lax.floor(h), "ceil": lax.ceil(h), "round": lax.round(h),
            "round_even": lax.round(h, "to_nearest_even"),
            "rem": lax.rem(h, g), "lt": h < g, "is_finite": lax.is_finite(h),
            "select": lax.select_n(h < g, h, g), "logistic": lax.logistic(h),
            "from_f64": lax.convert_element_type(d, np.float16),
            "from_f32": lax.convert_element_type(d.astype(np.float32), np.float16),
            "from_i32": lax.convert_element_type(lax.convert_element_type(d * 300, np.int32),
                                                 np.float16),
            "to_i32": lax.convert_element_type(h, np.int32),
            "to_f64": lax.convert_element_type(h, np.float64),
            "bits": lax.bitcast_convert_type(h, np.int16),
            "from_bits": lax.bitcast_convert_type(lax.bitcast_convert_type(g, np.uint16),
                                                  np.float16),
            "max_all": fnp.max(h), "min_rows": fnp.min(h[:2500].reshape(5, 500) * 2, axis=1),
            # transcendental: float32 functions (<= 2 ulp) rounded to half
            "~exp": lax.exp(h), "~log": lax.log(h), "~sin": lax.sin(h), "~cos": lax.cos(h),
            "~tan": lax.tan(h), "~tanh": lax.tanh(h), "~erf": lax.erf(h),
            "~expm1": lax.expm1(h), "~log1p": lax.log1p(h), "~pow": lax.pow(h, g),
            "~ipow": lax.integer_pow(h, 3), "~ipow_neg": lax.integer_pow(h, -2),
        }

    got, want = jit(f)(h, g, d), f(h, g, d)
    for k in want:
        if k.startswith("~"):
            assert _half_ulps(got[k], want[k]) <= 1, k
        else:
            _same(got[k], want[k], k)
    labels = _labels(f, h, g, d)
    assert not [lab for lab in labels if lab.startswith("numpy:")
                and lab not in ("numpy:slice", "numpy:reshape")], labels
