"""Every kernel the GPU backend generates compiles with NVRTC, on a machine with
no GPU (marked `nvrtc`: needs cupy-cuda12x and nvidia-cuda-nvrtc-cu12, the
`dev` extra). The programs are the CPU fused-kernel suite's (gpu_programs.py):
each is traced with fgrad.make_jaxpr, simplified, planned by the shared
planner with the GPU backend's `can_fuse_gpu`, emitted as CUDA C and compiled
to PTX. Also: the plans have the shapes the CPU suite asserts (what fuses),
a deliberately broken kernel gives NVRTC's log and the source, and fgrad works
without CuPy.
"""
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad._src.compiler.simplify import simplify

pytestmark = [pytest.mark.nvrtc, pytest.mark.filterwarnings("ignore::RuntimeWarning")]

cupy = pytest.importorskip("cupy", reason="the nvrtc tests need CuPy (pip install -e .[dev])")
nvrtc_mod = pytest.importorskip("fgrad._src.gpu.nvrtc")


def _nvrtc_available():
    try:
        nvrtc_mod.compile_to_ptx('extern "C" __global__ void probe() {}')
        return True
    except Exception:
        return False


if not _nvrtc_available():
    pytest.skip("NVRTC cannot be loaded (pip install nvidia-cuda-nvrtc-cu12)",
                allow_module_level=True)

from fgrad._src.gpu import cuda_c  # noqa: E402
from fgrad._src.gpu.executable import GpuExecutable  # noqa: E402
from fgrad._src.gpu.nvrtc import NvrtcError, compile_to_ptx  # noqa: E402

import gpu_programs  # noqa: E402

PROGRAMS = gpu_programs.programs()


def _executable(f, *args, name="f"):
    return GpuExecutable(simplify(fgrad.make_jaxpr(f)(*args)), name)


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_every_generated_kernel_compiles(program):
    exe = _executable(program.f, *program.args, name=program.name)
    labels = [s.label for s in exe.steps]
    cuda = [s for s in exe.steps if s.label.startswith("cuda:")]
    if program.all_fused:
        assert all(lab.startswith("cuda:") for lab in labels), labels
    if program.max_kernels is not None:
        assert len(labels) <= program.max_kernels, labels
    if not cuda:
        assert exe.module is None
        return
    ptx = compile_to_ptx(exe.cuda_source, f"{program.name}.cu")
    entries = set(re.findall(r"\.entry\s+(\w+)", ptx))
    for s in cuda:
        plan = s.fn.plan
        assert plan.entry in entries
        if plan.finish:
            assert plan.finish in entries


def test_plans_match_the_cpu_suite():
    x = np.ones((4, 5), np.float32)
    exe = _executable(lambda x, y, z: x * y + z, x, x, x)
    assert [s.label for s in exe.steps] == ["cuda:mul+add"]
    text = exe.as_text()
    assert "// 0: cuda:mul+add" in text and '__global__ void' in text
    x34 = np.linspace(-1, 1, 12).reshape(3, 4)

    def f(x):
        t = fnp.sin(x) * 2.0
        s = fnp.sum(t, axis=1, keepdims=True)
        return t * s + x, t

    exe = _executable(f, x34)
    assert [s.label for s in exe.steps] == ["cuda:sin+mul+reduce_sum", "cuda:mul+add"]
    assert len(exe.steps[0].outs) == 2
    # steps that are not kernels say what runs them
    w = np.ones((8, 4), np.float32)
    labels = [s.label for s in _executable(lambda a, b: fnp.sort(a @ b, axis=0), w, w.T).steps]
    assert labels == ["cublas:dot_general", "host:sort"], labels
    labels = [s.label for s in _executable(lambda a: lax_prod(a), x34).steps]
    assert labels == ["cuda:mul", "cupy:reduce_prod"], labels


def lax_prod(a):
    return fnp.prod(a * 2.0, axis=1)


def test_reduction_strategies():
    """Row reductions use a block per output (split into chunks plus a finishing
    kernel when there are few outputs), column reductions a thread per output."""
    def plans(f, x):
        return [s.fn.plan for s in _executable(f, x).steps]

    (p,) = plans(lambda x: fnp.sum(x, axis=1), np.ones((64, 1000), np.float32))
    assert (p.strategy, p.chunks, p.finish) == ("row", 1, None) and p.work == 64
    (p,) = plans(lambda x: fnp.sum(x), np.ones(1_000_000, np.float32))
    assert p.strategy == "row" and p.chunks > 1 and p.finish is not None
    assert p.work == p.chunks and p.partial_dtype == np.float32
    (p,) = plans(lambda x: fnp.max(x, axis=0), np.ones((300, 70)))
    assert (p.strategy, p.work) == ("column", 70)


def test_huge_domains_use_64_bit_indices():
    big = fgrad.ShapeDtypeStruct((2 ** 31 + 7,), np.float32)
    exe = GpuExecutable(simplify(fgrad.make_jaxpr(lambda x: fnp.sin(x) * 2.0)(big)), "big")
    assert "long long i = " in exe.cuda_source
    compile_to_ptx(exe.cuda_source)
    small = _executable(lambda x: fnp.sin(x) * 2.0, np.ones(10, np.float32))
    assert "int i = " in small.cuda_source and "long long i" not in small.cuda_source


def test_literals_are_exact():
    """Constants are written so NVRTC reads back the very same value."""
    for dt in (np.float32, np.float64):
        for v in (0.1, -0.0, 1e-45 if dt is np.float32 else 5e-324, np.inf, -np.inf, np.nan,
                  np.finfo(dt).max):
            text = cuda_c.const(np.dtype(dt), v)
            assert "inf" not in text.lower() and "nan" not in text.lower(), text
    assert cuda_c.const(np.dtype(np.int64), np.iinfo(np.int64).min).count("9223372036854775807")
    assert cuda_c.const(np.dtype(np.uint64), 2 ** 64 - 1) == "((unsigned long long)18446744073709551615ull)"
    # float constants survive the compile bit for bit (PTX stores their bits)
    for v in [0.1, 1 / 3, 3.4028234663852886e38, 1e-45, -2.5]:
        src = cuda_c.PRELUDE + ('extern "C" __global__ void k(float* o) '
                                f'{{ *o = {cuda_c.const(np.dtype(np.float32), v)}; }}')
        body = compile_to_ptx(src).split(".entry k")[1]
        bits = np.asarray(v, np.float32).view(np.uint32).item()
        assert re.search(rf"(?<![\d-])({bits}|{bits - 2 ** 32})(?!\d)|0f{bits:08X}", body), (v, body)


def test_launcher_keeps_float32_subnormals():
    """The launcher builds its module with fgrad's NVRTC options, so float32
    subnormals are kept as on the host. CuPy's RawModule adds -ftz=true, which
    flushed them on an H200 (-x of 4e-45 gave -0.0, bool(4e-45) False)."""
    from fgrad._src.gpu import launch
    exe = _executable(lambda x: (-x, x != 0, x * 0.5), np.full(8, 4e-45, np.float32))
    flushing = compile_to_ptx(exe.cuda_source, options=nvrtc_mod.OPTIONS + ("-ftz=true",))
    assert ".ftz." in flushing                     # what the check below would catch
    assert ".ftz." not in compile_to_ptx(exe.cuda_source)
    image = launch.device_image(exe.cuda_source, "subnormals.cu", 90)
    assert image[:4] == b"\x7fELF"                # machine code for sm_90
    assert launch.device_image(exe.cuda_source, "subnormals.cu", 10_000).startswith(b"//")  # PTX
    # config.flush_denormals asks compiled code to flush, on the GPU as on the CPU
    flushing_exe = GpuExecutable(exe.jaxpr, "flushing", flush_denormals=True)
    assert b".ftz." in launch.device_image(flushing_exe.cuda_source, "f.cu", 10_000,
                                           flushing_exe.module.options)


def test_a_broken_kernel_is_a_clear_error():
    src = 'extern "C" __global__ void broken(float* x) {\n  x[0] = undefined_name + 1.0f;\n}\n'
    with pytest.raises(NvrtcError) as info:
        compile_to_ptx(src, "broken.cu")
    message = str(info.value)
    assert "broken.cu" in message and "undefined_name" in message     # NVRTC's log
    assert "   2    x[0] = undefined_name + 1.0f;" in message        # the numbered source


def test_as_text_shows_cuda_for_gpu_inputs_only():
    """Without a GPU the CPU program is what `lower` shows; the GPU program's text
    is built without touching a device."""
    x = np.linspace(0, 1, 8, dtype=np.float32)
    f = lambda x, y: fnp.sin(x) * y + fnp.exp(-x * x)  # noqa: E731
    text = fgrad.jit(f).lower(x, x).as_text()
    assert "__global__" not in text
    gpu_text = _executable(f, x, x).as_text()
    assert "// 0: cuda:" in gpu_text and "sinf(" in gpu_text and "expf(" in gpu_text


def test_fgrad_works_without_cupy():
    code = textwrap.dedent("""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "cupy" or name.startswith("cupy."):
                    raise ImportError("cupy is hidden")
        sys.meta_path.insert(0, Block())
        import numpy as np
        import fgrad, fgrad.numpy as fnp
        assert "cupy" not in sys.modules
        y = fgrad.jit(lambda x: fnp.sum(fnp.sin(x) * 2.0))(np.arange(4.0))
        g = fgrad.grad(lambda x: fnp.sum(x * x))(np.arange(3.0))
        assert fgrad.devices() == [fgrad.devices("cpu")[0]]
        z = fgrad.device_put(np.ones(2))
        assert z.device.platform == "cpu"
        try:
            fgrad.devices("gpu")
        except RuntimeError as e:
            assert "no GPU" in str(e)
        else:
            raise AssertionError("devices('gpu') without CuPy")
        assert "cupy" not in sys.modules
        print("ok", float(y), list(np.asarray(g)))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ok")


# ----------------------------------------------------------------------------
# The generated code's values, computed on the host (no GPU): see cuda_emulation.py

import cuda_emulation  # noqa: E402

_EXES = {p.name: _executable(p.f, *p.args, name=p.name) for p in PROGRAMS}


@pytest.fixture(scope="module")
def host_kernels():
    if not cuda_emulation.available():
        pytest.skip("no host C++20 compiler (g++) to emulate the kernels")
    bodies = [e.cuda_source[len(cuda_c.PRELUDE):] for e in _EXES.values() if e.module]
    kernels = cuda_emulation.HostKernels(cuda_c.PRELUDE, bodies)
    yield kernels
    kernels.close()


def _run_on_host(exe, kernels, args):
    """The GPU plan with its kernels emulated and its other steps as NumPy impls."""
    env = list(exe.template)
    for i, a in zip(exe.in_slots, args):
        env[i] = np.asarray(a)
    for s in exe.steps:
        xs = [env[i] for i in s.ins]
        if s.primitive is None:
            result = cuda_emulation.run_kernel(kernels, s.fn.plan, s.fn.group, xs)
        else:
            result = s.primitive.impl(*xs, **s.params)
        if s.multiple:
            for i, r in zip(s.outs, result):
                env[i] = r
        else:
            env[s.outs[0]] = result
    return [env[i] for i in exe.out_refs]


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_kernels_match_the_reference_in_host_emulation(program, host_kernels):
    want = program.f(*program.args)
    flat_want, tree = fgrad.tree.flatten(want)
    got = fgrad.tree.unflatten(tree, _run_on_host(_EXES[program.name], host_kernels,
                                                  fgrad.tree.leaves(program.args)))
    want = want if isinstance(want, dict) else dict(enumerate(want))
    got = got if isinstance(got, dict) else dict(enumerate(got))
    for k in want:
        gpu_programs.compare(program, k, got[k], want[k])


def test_select_n_error_flag_in_host_emulation(host_kernels):
    exe = _EXES["select_n_integer"]
    which = np.array([0, 1, 2, 2, 1, 7], np.int32)
    args = [which] + [np.arange(6, dtype=np.float32) * k for k in (1, 10, 100)]
    with pytest.raises(ValueError, match="invalid entry"):
        _run_on_host(exe, host_kernels, args)


def _sums_of_ones(shape, axis):
    return lambda x: fnp.sum(fnp.broadcast_to(x, shape), axis=axis)


def test_float_sums_cascade_in_host_emulation():
    """A thread's float sum adds blocks of terms, then sums of blocks (a column
    sum of 2^24 + 2 ones stopped at 2^24 with one running sum), here and in the
    row reductions' strided loops, and stays within 2 ulps of the sum of
    magnitudes for random terms; sums of -0.0s are +0.0, as NumPy's."""
    if not cuda_emulation.available():
        pytest.skip("no host C++20 compiler (g++) to emulate the kernels")
    one, zero = np.float32(1.0), np.float32(-0.0)
    rng = np.random.default_rng(31)
    cols = rng.random((2**16, 4)).astype(np.float32)
    rows = rng.random((2, 2**18)).astype(np.float32)
    cases = {"ones_columns": (_sums_of_ones((2**24 + 2, 3), 0), one, "column"),
             "ones_rows": (_sums_of_ones((2, 2**25 + 2), 1), one, "row"),
             "random_columns": (lambda x: fnp.sum(x * 2.0, axis=0), cols, "column"),
             "random_rows": (lambda x: fnp.sum(x * 2.0, axis=1), rows, "row"),
             "zeros_columns": (_sums_of_ones((100, 3), 0), zero, "column"),
             "zeros_rows": (_sums_of_ones((3, 5000), 1), zero, "row")}
    exes = {k: _executable(f, x, name=k) for k, (f, x, _) in cases.items()}
    for k, (_, _, strategy) in cases.items():
        (step,) = exes[k].steps
        assert step.fn.plan.strategy == strategy and "s1 = " in exes[k].cuda_source
        compile_to_ptx(exes[k].cuda_source)
    kernels = cuda_emulation.HostKernels(
        cuda_c.PRELUDE, [e.cuda_source[len(cuda_c.PRELUDE):] for e in exes.values()])
    try:
        for k, (f, x, _) in cases.items():
            (got,) = _run_on_host(exes[k], kernels, [x])
            if k.startswith("ones"):
                n = {"ones_columns": 2**24 + 2, "ones_rows": 2**25 + 2}[k]
                np.testing.assert_array_equal(got, np.full(got.shape, n, np.float32))
            elif k.startswith("zeros"):
                np.testing.assert_array_equal(got, 0.0)
                assert not np.signbit(got).any(), k
            else:
                axis = 0 if k == "random_columns" else 1
                exact = np.sum(x.astype(np.float64) * 2.0, axis=axis)   # terms are positive
                worst = np.max(np.abs(got - exact) / exact) / np.finfo(np.float32).eps
                assert worst <= 2.0, (k, worst)
    finally:
        kernels.close()


def test_special_functions_run_as_host_steps():
    """The GPU backend has no kernels for the special-function primitives: they
    run as their NumPy impls on host copies, and as_text says so."""
    import fgrad.scipy.special as fs
    x = np.linspace(0.5, 2.0, 8).astype(np.float32)
    exe = _executable(lambda x: fs.gammaln(x * 2.0) + 1.0, x)
    assert [s.label for s in exe.steps] == ["cuda:mul", "host:gammaln", "cuda:add"]
    assert "host:gammaln" in exe.as_text()
