"""The programs of the CPU fused-kernel suite (tests/test_fused_kernels.py), as
data, for the GPU backend's tests: `test_nvrtc.py` compiles every kernel the
GPU backend generates for them (no GPU needed); `test_gpu.py` runs them on a
GPU against the reference interpreter.

Each Program is (name, f, args, ulps, all_fused, max_kernels, scale): f returns a
dict of outputs (or a tuple); ulps maps an output name (the part before '/') to
its float tolerance in ulp (default 4); all_fused: every step must be a `cuda:`
kernel; max_kernels: a bound on the number of steps, when the CPU suite has one;
scale: for compound expressions (which may contract to fmas and reorder sums),
float outputs are compared relative to this operand scale (one for all outputs,
or a dict per output name) instead of in ulp, as the CPU suite's `_close` does.
The edge-value generators and primitive tables are the CPU suite's own, so a
primitive added there is covered here too.
"""
import math
from typing import NamedTuple

import numpy as np

import fgrad.numpy as fnp
from fgrad import grad, lax

from test_fused_kernels import (ALL, BOOL, F32, F64, FLOATS, INTS, REDUCE_AXES, _BITCASTS,
                                _F_BINARY, _F_ULPS, _F_UNARY, _I_BINARY, _I_UNARY, _POWERS,
                                _check, _close, _float_values, _int_values, _pairs, _softmax)

# GPU math functions (CUDA's libdevice) are within 1-4 ulp like the CPU's; the
# float32 tan, pow and erf may be off by a few more (CUDA documents tanf: 4 ulp,
# powf: 4 ulp, plus the input's own rounding in a chain).
GPU_ULPS = dict(_F_ULPS, tan=8, pow=8, erf=4, expm1=4, log1p=4)


class Program(NamedTuple):
    name: str
    f: object
    args: tuple
    ulps: dict = {}
    all_fused: bool = True
    max_kernels: int = None
    scale: object = None


def _float_primitives(dt):
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

    return Program(f"float_primitives_{dt}", f, (vals, bx, by), GPU_ULPS)


def _integer_primitives(dt):
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

    return Program(f"integer_primitives_{dt}", f, (vals, a, b))


def _bool_primitives():
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

    return Program("bool_primitives", f, (a, b))


def _convert_all_pairs():
    rng = np.random.default_rng(2)
    args = {}
    for dt in ALL:
        if dt == BOOL:
            args[dt] = np.array([False, True] * 20)
        elif dt.kind == "f":
            args[dt] = _float_values(dt, rng)[:40]
        else:
            args[dt] = np.resize(_int_values(dt), 40)
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

    return Program("convert_all_pairs", f, tuple([args[s] for s in srcs]
                                                 + [in_range[d] for d in FLOATS]),
                   {"": 0})


def _float_to_int_edges():
    vals = {dt: np.array([np.nan, np.inf, -np.inf, 1e20, -1e20, 300.0, -300.0, 70000.0, -70000.0,
                          3e9, -3e9, 5e9, 1.9e19, -1.0, -2.5, 2.7, 2.0 ** 63, 2.0 ** 64, -0.0],
                         dt) for dt in FLOATS}
    targets = [d for d in INTS if d != np.dtype(np.uint32)]

    def f(x32, x64):
        return {f"{x.dtype}->{d}": lax.convert_element_type(x, d)
                for x in (x32, x64) for d in targets}

    return Program("float_to_int_edges", f, (vals[F32], vals[F64]))


def bitcast_program():
    rng = np.random.default_rng(3)
    srcs = sorted({np.dtype(s) for s, _ in _BITCASTS}, key=str)
    args = []
    for dt in srcs:
        if dt.kind == "f":
            args.append(_float_values(dt, rng)[:32])
        else:
            args.append(rng.integers(0, 256, 32 * dt.itemsize, np.uint8).view(dt))

    def f(*xs):
        by = dict(zip(srcs, xs))
        return {f"{s}->{np.dtype(d)}": lax.bitcast_convert_type(by[np.dtype(s)], d)
                for s, d in _BITCASTS}

    return Program("bitcasts", f, tuple(args))


def _select_n_integer():
    which = np.array([0, 1, 2, 2, 1, 0], np.int32)
    cases = [np.arange(6, dtype=np.float32) * k for k in (1, 10, 100)]

    def f(w, a, b, c):
        return {"i32": lax.select_n(w, a, b, c),
                "u8": lax.select_n(lax.convert_element_type(w, np.uint8), a, b, c),
                "i8_2": lax.select_n(lax.convert_element_type(lax.min(w, 1), np.int8), a, b),
                "one": lax.select_n(w, a)}

    return Program("select_n_integer", f, (which, *cases))


def _broadcasting():
    rng = np.random.default_rng(4)
    args = (rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal(4).astype(np.float32),
            rng.standard_normal((3, 1)).astype(np.float32), np.ones((), np.float32) * 1.7,
            rng.standard_normal((2, 1)), rng.standard_normal((1, 3)),
            rng.integers(-50, 50, (2, 3, 4)).astype(np.int32),
            rng.integers(-5, 5, (3, 1)).astype(np.int32), rng.integers(-5, 5, (1, 4)).astype(np.int32))

    def f(x, row, col, s, a21, a13, t, m31, m14):
        return {
            "row": x * row + 2.0, "col": lax.max(x, col) - row, "scalar": x * s + s,
            "outer": a21 * a13 + 1.0, "outer_sel": lax.select_n(a21 > 0.0, a13, a21),
            "row_col": row + col,
            "3d_mid": t * m31 + 1, "3d_last": lax.div(t, m14), "3d_both": t - m31 * m14,
            "scalar_only": s * 2.0 + 1.0,
        }

    return Program("broadcasting", f, args)


def _zero_size(shapes):
    f = lambda a, b: {"exp": lax.exp(a) * b + 1.0, "lt": a < b}  # noqa: E731
    return Program(f"zero_size_{shapes}", f, (np.ones(shapes[0]), np.ones(shapes[1])))


def _scalars(x, y):
    f = lambda x, y: {"chain": lax.sin(x) * y + lax.exp(-x * x), "lt": x < y}  # noqa: E731
    return Program(f"scalars_{np.asarray(x).dtype}", f, (x, y), scale=4.0)


def _fusion_patterns():
    rng = np.random.default_rng(5)
    x45 = np.ones((4, 5), np.float32)
    lin = np.linspace(-2, 2, 50, dtype=np.float32)
    x34 = np.linspace(-1, 1, 12).reshape(3, 4)

    def intermediates(x):
        t = fnp.sin(x) * 2.0
        s = fnp.sum(t, axis=1, keepdims=True)
        return {"out": t * s + x, "t": t}

    def across_steps(x, v):
        a = x * 2.0
        u = v + 1.0
        return {"a": a - 1.0, "u": u * 3.0}

    def ordered(x):
        s = fnp.sum(x * x, axis=1, keepdims=True)
        return {"div": x / s, "add": x + 1.0}

    def view_same_group(x):
        t = fnp.sin(x)
        return {"out": lax.broadcast_in_dim(t, (6,), (0,)) * t + t}

    return [
        Program("fma", lambda x, y, z: {"out": x * y + z}, (x45, x45, x45), max_kernels=1, scale=4.0),
        Program("transcendental_chain",
                lambda x, y: {"out": fnp.sin(x) * y + fnp.exp(-x * x)},
                (lin, np.linspace(1, 3, 50, dtype=np.float32)), max_kernels=1, scale=3.0),
        Program("intermediates", intermediates, (x34,), max_kernels=2, scale=8.0),
        Program("one_module", lambda x: {"out": fnp.exp(fnp.sum(fnp.sin(x), axis=0)) * 2.0
                                         + fnp.cos(x)}, (x34,), scale=64.0),
        Program("across_steps", across_steps, (rng.standard_normal((4, 6)),
                                               rng.standard_normal(6)), max_kernels=2, scale=4.0),
        Program("ordered", ordered, (rng.standard_normal((4, 6)),), scale=4.0),
        Program("view_same_group", view_same_group, (np.linspace(-1, 1, 6),), scale=4.0),
        Program("unsupported_pairs",
                lambda x: {"out": lax.atan2(x, x + 1.0) * 2.0 + lax.erf_inv(x)},
                (np.linspace(0.1, 0.9, 6),), all_fused=False, scale=8.0),
        Program("prod", lambda x: {"out": fnp.prod(x * 2.0, axis=1)},
                (np.linspace(0.5, 1.5, 12).reshape(3, 4),), all_fused=False),
    ]


def _reduction_programs():
    out = []
    rng = np.random.default_rng(12)
    for dt in FLOATS + [np.dtype(np.int32), np.dtype(np.uint8), np.dtype(np.int64)]:
        for shape, axes in REDUCE_AXES:
            x = (rng.standard_normal(shape) if dt.kind == "f"
                 else rng.integers(0, 200, shape)).astype(dt)
            f = (lambda axes: lambda x: {  # noqa: E731
                "sum": lax.reduce_sum(x, axes), "max": lax.reduce_max(x, axes),
                "min": lax.reduce_min(x, axes), "sum_of_sq": lax.reduce_sum(x * x, axes)})(axes)
            n = max(1, math.prod(shape[a] for a in axes))
            scale = 4.0 * n * float(np.abs(x).max()) if x.size else 1.0   # sums reorder
            out.append(Program(f"reduce_{dt}_{shape}_{axes}", f, (x,),
                               scale={"sum": scale, "sum_of_sq": scale ** 2}))
    x = rng.standard_normal((6, 5, 4))
    for axis in (0, 1, 2, -1, (0, 2), None):
        f = (lambda axis: lambda x: {  # noqa: E731
            "sum": fnp.sum(fnp.exp(x), axis=axis, keepdims=True),
            "max": fnp.max(x * 2.0, axis=axis, keepdims=True),
            "min": fnp.min(x, axis=axis, keepdims=True) - x})(axis)
        out.append(Program(f"keepdims_{axis}", f, (x,), all_fused=False, scale=64.0))
    nan = np.array([[1.0, np.nan, 3.0], [-np.inf, -np.inf, -np.inf], [np.inf, 2.0, np.nan],
                    [0.5, -7.0, 2.5]], np.float32)
    out.append(Program("max_min_nan", lambda x: {
        "max1": lax.reduce_max(x, (1,)), "min1": lax.reduce_min(x, (1,)),
        "max0": lax.reduce_max(x, (0,)), "min01": lax.reduce_min(x, (0, 1)),
        "sum1": lax.reduce_sum(x, (1,))}, (nan,)))
    i8 = np.array([[np.iinfo(np.int8).min, 5], [np.iinfo(np.int8).max, -3]], np.int8)
    out.append(Program("int8_reductions", lambda i: {
        "max": lax.reduce_max(i, (1,)), "min": lax.reduce_min(i, (0,)),
        "sum": lax.reduce_sum(i, (0,))}, (i8,)))
    for shape, axes in [((0,), (0,)), ((3, 0), (1,)), ((0, 4), (1,)), ((2, 0, 3), (0, 2))]:
        x = np.ones(shape, np.float32)
        out.append(Program(f"zero_size_sum_{shape}_{axes}", (lambda axes: lambda x: {
            "f32": lax.reduce_sum(x * 2.0, axes),
            "i16": lax.reduce_sum(lax.convert_element_type(x, np.int16), axes)})(axes), (x,)))
    for dt in FLOATS:   # big enough for several blocks, and for split row reductions
        big = (rng.standard_normal((64, 1000)) * 10).astype(dt)
        out.append(Program(f"softmax_{dt}", lambda x: {"out": _softmax(x)}, (big,),
                           max_kernels=3, scale=64.0))
        full = rng.standard_normal(300_000).astype(dt)
        out.append(Program(f"full_reductions_{dt}", lambda x: {
            "sum": fnp.sum(x * x), "max": fnp.max(fnp.abs(x)), "min": fnp.min(x)}, (full,),
            {"sum": 300_000}))
        cols = rng.standard_normal((3000, 70)).astype(dt)
        out.append(Program(f"column_sums_{dt}", lambda x: {
            "sum0": fnp.sum(x, axis=0), "max0": fnp.max(x, axis=0)}, (cols,), {"sum0": 3000}))
    return out


def _views():
    rng = np.random.default_rng(14)
    x, v, c = rng.standard_normal((4, 5)), rng.standard_normal(5), rng.standard_normal(4)

    def shape_views(x, v, c):
        return {
            "expand": x - lax.expand_dims(c, (1,)),
            "reshape": x * lax.reshape(c, (4, 1)) + lax.reshape(v, (1, 5)),
            "bcast": lax.broadcast_in_dim(c, (4, 5), (0,)) * x,
            "bcast_row": lax.broadcast_in_dim(v, (3, 4, 5), (2,)) + 1.0,
            "squeeze": lax.squeeze(lax.reshape(c, (1, 4, 1)), (0, 2)) * c,
            "chain": lax.expand_dims(lax.reshape(c, (4, 1)), (0,)) + x,
        }

    x68, v8 = rng.standard_normal((6, 8)), rng.standard_normal(8)

    def slices(x, v):
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

    out = [Program("shape_views", shape_views, (x, v, c), scale=8.0),
           Program("slices_and_reversals", slices, (x68, v8), scale=4.0),
           Program("regrouping_reshape", lambda x: {"out": lax.reshape(x, (5, 4)) * 2.0}, (x,),
                   all_fused=False),
           Program("view_outputs", lambda c: {"v": lax.expand_dims(c, (1,)),
                                              "w": lax.expand_dims(c, (1,)) * 2.0}, (c,),
                   all_fused=False),
           Program("transpose_fuses", lambda x, w: {"out": w - 0.1 * lax.transpose(x, (1, 0))},
                   (rng.standard_normal((3, 5)), rng.standard_normal((5, 3))), max_kernels=1),
           Program("transpose_3d", lambda y: {"out": fnp.exp(lax.transpose(y, (2, 0, 1))) + 1.0},
                   (rng.standard_normal((2, 3, 4)),), max_kernels=1, scale=4.0)]
    for dt in (np.int32, np.uint8, np.bool_, np.float32):
        xd = (np.arange(24).reshape(4, 6) % 7).astype(dt)
        out.append(Program(f"views_of_{np.dtype(dt)}", lambda x: {
            "out": lax.rev(lax.slice(x, (1, 0), (4, 6), (1, 2)), (0, 1)) == lax.transpose(
                lax.slice(x, (0, 1), (3, 4)), (1, 0))[:, ::-1].T}, (xd,)))
    return out


def _gradients():
    rng = np.random.default_rng(15)

    def loss(w, x, y):
        return fnp.mean((fnp.tanh(x @ w) - y) ** 2)

    xs = np.linspace(-1.0, 1.0, 10)
    slicing = lambda x: fnp.sum((x[1:] - x[:-1]) ** 2) + fnp.sum(fnp.exp(x[::-1] * x))  # noqa: E731
    a, b, w = rng.standard_normal((1, 4)), rng.standard_normal((1, 3)), rng.standard_normal((4, 3))
    p, q = rng.standard_normal((2, 3, 1)), rng.standard_normal((2, 1, 5))
    return [
        Program("mlp_gradient", lambda w, x, y: {"g": grad(loss)(w, x, y)},
                (rng.standard_normal((4, 3)), rng.standard_normal((8, 4)),
                 rng.standard_normal((8, 3))), all_fused=False, scale=64.0),
        Program("gradient_of_slicing", lambda x: {"g": grad(slicing)(x)}, (xs,), all_fused=False, scale=64.0),
        Program("outer_update", lambda w, a, b: {"out": w - 0.5 * (a.T @ b)}, (w, a, b), max_kernels=1, scale=4.0),
        Program("batched_dot", lambda p, q: {"out": lax.dot_general(
            p, q, (((2,), (1,)), ((0,), (0,))))}, (p, q), all_fused=False, scale=8.0),
        Program("matmul_bias_relu", lambda x, w, b: {"out": fnp.maximum(x @ w + b, 0.0)},
                (rng.standard_normal((16, 8)).astype(np.float32),
                 rng.standard_normal((8, 4)).astype(np.float32),
                 rng.standard_normal(4).astype(np.float32)), all_fused=False, scale=64.0),
    ]


def programs():
    """Every program of the suite (built fresh: arguments are NumPy arrays)."""
    out = [_float_primitives(dt) for dt in FLOATS]
    out += [_integer_primitives(dt) for dt in INTS]
    out += [_bool_primitives(), _convert_all_pairs(), _float_to_int_edges(), bitcast_program(),
            _select_n_integer(), _broadcasting()]
    out += [_zero_size(s) for s in [((0,), (0,)), ((0, 3), (3,)), ((3, 0), (3, 1)),
                                    ((2, 0, 4), (1, 4))]]
    out += [_scalars(np.float64(0.3), np.float64(-2.0)),
            _scalars(np.array(1.5, np.float32), np.array(0.25, np.float32))]
    out += _fusion_patterns() + _reduction_programs() + _views() + _gradients()
    return out


def ulps_for(program, key):
    u = program.ulps
    return u.get(key.split("/")[0], u.get("", 4))


def scale_for(program, key):
    s = program.scale
    return s.get(key) if isinstance(s, dict) else s


def compare(program, key, got, want):
    """Assert one output of `program` agrees with the reference."""
    got, want = np.asarray(got), np.asarray(want)
    what = f"{program.name}: {key}"
    if program.name == "bitcasts":     # bits, not values
        assert got.dtype == want.dtype, what
        np.testing.assert_array_equal(got.view(f"u{got.dtype.itemsize}"),
                                      want.view(f"u{want.dtype.itemsize}"), err_msg=what)
    elif scale_for(program, key) is not None and want.dtype.kind == "f":
        _close(got, want, scale_for(program, key), what)
    else:
        _check(got, want, what, ulps_for(program, str(key)))
