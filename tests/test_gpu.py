"""The GPU backend on a GPU (marked `gpu`; skipped where CuPy sees no device).

Every program of the CPU fused-kernel suite (gpu_programs.py) runs jitted on
GPU arrays and is compared with the reference interpreter (eager NumPy on the
host): integers and bools identical, floats within the suite's ulp budgets.
Also: eager operations on GPU arrays, device_put round trips, jit running on
the device of its inputs, explicit transfers, and the select_n error flag.
"""
import math

import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad import jit, lax

pytestmark = [pytest.mark.gpu, pytest.mark.filterwarnings("ignore::RuntimeWarning")]


def _gpu_present():
    from fgrad._src.gpu import runtime
    return runtime.gpu_count() > 0


if not _gpu_present():
    pytest.skip("no CUDA GPU visible to CuPy", allow_module_level=True)

import gpu_programs  # noqa: E402

PROGRAMS = gpu_programs.programs()
CPU = fgrad.devices("cpu")[0]
GPU = fgrad.devices("gpu")[0]


def _to_host(tree):
    return fgrad.tree.map(lambda a: np.asarray(fgrad.device_put(a, CPU)), tree)


def _as_dict(out):
    return out if isinstance(out, dict) else {str(i): o for i, o in enumerate(out)}


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_program_matches_reference(program):
    want = _as_dict(program.f(*program.args))          # eager NumPy on the host
    dev_args = fgrad.device_put(program.args, GPU)
    got = jit(program.f)(*dev_args)
    assert all(a.device == GPU for a in fgrad.tree.leaves(got))
    got = _as_dict(_to_host(got))
    assert set(got) == set(want)
    for k in want:
        gpu_programs.compare(program, k, got[k], want[k])


def test_as_text_shows_the_cuda_program():
    x = fgrad.device_put(np.linspace(0, 1, 8, dtype=np.float32), GPU)
    text = jit(lambda x, y: fnp.sin(x) * y + fnp.exp(-x * x)).lower(x, x).as_text()
    assert "// 0: cuda:" in text and "__global__" in text and "sinf(" in text


def test_eager_operations_on_gpu_arrays():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((5, 7)), rng.standard_normal((7, 3))
    ga, gb = fgrad.device_put((a, b), GPU)
    cases = {
        "chain": (lambda x: fnp.tanh(x) * 2.0 + 1.0, (ga,), (a,)),
        "matmul": (lambda x, y: x @ y, (ga, gb), (a, b)),
        "sum": (lambda x: fnp.sum(x, axis=0), (ga,), (a,)),
        "max": (lambda x: fnp.max(x), (ga,), (a,)),
        "transpose": (lambda x: x.T + 0.0, (ga,), (a,)),
        "slice": (lambda x: x[1:4, ::2], (ga,), (a,)),
        "sort": (lambda x: fnp.sort(x, axis=1), (ga,), (a,)),
        "int_div": (lambda x: lax.div(x, np.int32(0) + x // 3), (fgrad.device_put(
            np.arange(-6, 6, dtype=np.int32), GPU),), (np.arange(-6, 6, dtype=np.int32),)),
    }
    for name, (f, gargs, hargs) in cases.items():
        got, want = f(*gargs), f(*hargs)
        assert got.device == GPU, name
        np.testing.assert_allclose(_to_host(got), np.asarray(want), rtol=1e-12, atol=1e-12,
                                   err_msg=name)


def test_float32_subnormals_are_kept_on_the_gpu():
    """As on the host: CuPy builds its own kernels with -ftz=true, which flushed
    these to zero on an H200 (fgrad's kernels, argmax/argmin, widening and
    k = 1 products now avoid CuPy's arithmetic)."""
    tiny = np.array([1, 3, 2, 0x80000004, 0], np.uint32).view(np.float32)   # 1.4e-45, ...

    def f(x):
        dot = lax.dot_general(x, x, (((0,), (0,)), ((), ())), preferred_element_type=np.float64)
        return -x, x != 0, x * 1.0, fnp.argmax(x), fnp.argmin(x), dot

    def products(a, b):       # exact products and sums that fall below float32's normal range
        return a[:, None] @ b[None, :], a.reshape(2, 2) @ b.reshape(2, 2), a * b

    two = np.float32(2.0)
    a, b = two ** -70 * np.arange(1, 5, dtype=np.float32), -two ** -72 * np.ones(4, np.float32)
    cases = [(f, (tiny,)), (products, (a, b))]
    for fn, args in cases:
        want = fn(*args)
        g = fgrad.device_put(args, GPU)
        _check_same_bits(want, fn(*g), "eager")
        _check_same_bits(want, jit(fn)(*g), "jit")


def test_flush_denormals_flushes_on_the_gpu_as_on_the_cpu():
    tiny = np.array([1, 3, 0x80000004, 0], np.uint32).view(np.float32)
    ones = np.ones(4, np.float32)
    f = jit(lambda x, y: x * y)
    fgrad.config.update("flush_denormals", True)
    try:
        want = f(tiny, ones)
        _check_same_bits([want], [f(*fgrad.device_put((tiny, ones), GPU))], "jit, flushing")
    finally:
        fgrad.config.update("flush_denormals", False)
    assert not np.any(np.asarray(want))          # flushed: every product is a zero


def _check_same_bits(want, got, name):
    for k, (a, b) in enumerate(zip(_to_host(got), want)):
        a, b = np.atleast_1d(a), np.atleast_1d(np.asarray(b))
        assert a.dtype == b.dtype, (name, k)
        np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8), err_msg=f"{name} {k}")


def test_grad_on_gpu():
    rng = np.random.default_rng(1)
    w, x = rng.standard_normal((4, 3)), rng.standard_normal((8, 4))
    loss = lambda w, x: fnp.mean(fnp.tanh(x @ w) ** 2)  # noqa: E731
    want = fgrad.grad(loss)(w, x)
    gw, gx = fgrad.device_put((w, x), GPU)
    for g in (fgrad.grad(loss)(gw, gx), jit(fgrad.grad(loss))(gw, gx)):
        assert g.device == GPU
        np.testing.assert_allclose(_to_host(g), want, rtol=1e-10)


def test_device_put_round_trips():
    tree = {"a": np.arange(6.0).reshape(2, 3), "b": [np.int8(3), np.array([True, False])],
            "c": 2.5}
    on_gpu = fgrad.device_put(tree, GPU)
    assert all(leaf.device == GPU for leaf in fgrad.tree.leaves(on_gpu))
    back = fgrad.device_put(on_gpu, CPU)
    for got, want in zip(fgrad.tree.leaves(back), fgrad.tree.leaves(tree)):
        assert got.device == CPU
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
        assert np.asarray(got).dtype == np.asarray(fgrad.numpy.asarray(want)).dtype
    assert fgrad.tree.leaves(on_gpu)[-1].weak_type      # a Python scalar stays weak
    assert fgrad.device_put(on_gpu["a"], GPU) is not None


def test_moving_to_the_host_is_explicit():
    x = fgrad.device_put(np.ones(3), GPU)
    with pytest.raises(TypeError, match="device_put"):
        np.asarray(x)
    assert float(fnp.sum(x)) == 3.0          # scalars and printing do copy
    assert "1." in repr(x)


def test_jit_runs_on_the_device_of_its_inputs():
    f = jit(lambda x: fnp.exp(x) * 2.0)
    x = np.linspace(0, 1, 5)
    cpu_out = f(x)
    gpu_out = f(fgrad.device_put(x, GPU))
    assert cpu_out.device == CPU and gpu_out.device == GPU
    np.testing.assert_allclose(_to_host(gpu_out), np.asarray(cpu_out), rtol=1e-15)


def test_select_n_out_of_range_raises_on_gpu():
    cases = [np.arange(8, dtype=np.float32) * k for k in (1, 10, 100)]
    g = jit(lambda w, a, b, c: lax.select_n(w, a, b, c))
    bad = fgrad.device_put(np.array([0, 1, 2, 0, 1, 2, 5, 0], np.int32), GPU)
    with pytest.raises(ValueError, match="invalid entry"):
        g(bad, *fgrad.device_put(cases, GPU))


def test_big_reductions_and_launch_sizes():
    rng = np.random.default_rng(2)
    x = rng.standard_normal(3_000_001).astype(np.float32)
    gx = fgrad.device_put(x, GPU)
    got = _to_host(jit(lambda x: (fnp.sum(x), fnp.max(x), fnp.sum(x.reshape(-1, 1)[:, 0])))(gx))
    np.testing.assert_allclose(got[0], x.astype(np.float64).sum(), rtol=1e-4)
    assert got[1] == x.max()
    y = rng.standard_normal((4096, 1000)).astype(np.float32)
    gy = fgrad.device_put(y, GPU)
    for axis in (0, 1):
        np.testing.assert_allclose(_to_host(jit(lambda y: fnp.sum(y, axis=axis))(gy)),
                                   y.sum(axis=axis, dtype=np.float64), rtol=1e-4, atol=1e-3)
    assert math.isfinite(float(fnp.sum(gy)))


def test_dlpack_shares_gpu_memory_with_cupy_both_ways():
    import cupy as cp
    x = fgrad.device_put(np.arange(6.0).reshape(2, 3), GPU) * 2.0
    assert x.__dlpack_device__() == (2, GPU.id)                      # kDLCUDA
    c = cp.from_dlpack(x)
    assert c.data.ptr == cp.from_dlpack(x).data.ptr                  # no copy per export
    np.testing.assert_array_equal(c.get(), [[0, 2, 4], [6, 8, 10]])
    a = cp.arange(12, dtype=cp.float32).reshape(3, 4)
    y = fgrad.from_dlpack(a.T)
    assert y.device == GPU and y.dtype == np.float32
    assert cp.from_dlpack(y).data.ptr == a.data.ptr
    np.testing.assert_array_equal(_to_host(fnp.sum(y, axis=0)), a.get().sum(axis=1))
    on_host = fgrad.from_dlpack(a, device=CPU)                       # moved: a copy
    assert on_host.device == CPU
    np.testing.assert_array_equal(np.asarray(on_host), a.get())
    with pytest.raises(BufferError, match="needs a copy"):
        fgrad.from_dlpack(a, device=CPU, copy=False)
