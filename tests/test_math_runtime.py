"""Shared run-time code (cpu.mathlib_runtime, interrupts.resolve): sin, cos and
the loops' signal polling are compiled once and called by programs, which
only declare them; the results are those of code that defines them inline."""
import ctypes
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad import lax
from fgrad._src.cpu import disk_cache, engine, mathlib, mathlib_runtime, switch_interval
from fgrad._src.jaxpr import all_eqns

from test_mathlib import Runner

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def cache(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("FGRAD_CACHE_DIR", str(d))
    return d


def inputs(dtype):
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2 ** 32 if dtype == np.float32 else 2 ** 63, 20000)
    x = bits.astype(np.uint32 if dtype == np.float32 else np.uint64).view(dtype)
    sweep = np.linspace(-30, 30, 5001, dtype=dtype)
    return np.concatenate([x, sweep, np.array([0, -0.0, np.inf, -np.inf, np.nan, 1e30, 2 ** 20],
                                              dtype)])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_shared_sin_and_cos_give_the_bits_of_inline_code(dtype, monkeypatch):
    shared = Runner(dtype, ["sin", "cos"])
    assert not re.search(r"^define .*@\"fgrad_(sin|cos)", shared.text, re.M)
    assert re.search(r"^declare .*@\"fgrad_sin_f..\"", shared.text, re.M)
    monkeypatch.setattr(mathlib, "_declare_runtime", lambda module, fname, ty: mathlib._emit_trig(
        module, fname, ty, mathlib._host_fma(), fname.startswith("fgrad_cos")))
    inline = Runner(dtype, ["sin", "cos"])
    assert re.search(r"^define .*@\"fgrad_sin_f..\"", inline.text, re.M)
    x = inputs(dtype)
    for name in ("sin", "cos"):
        a, b = shared(name, x), inline(name, x)
        np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8), err_msg=name)


@pytest.mark.parametrize("name", ["sin", "cos"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_unoptimised_slow_path_gives_the_bits_of_an_optimised_one(name, dtype):
    """`_ph` (Payne-Hanek, huge lanes) is `optnone` to compile faster; with O3
    on it (the attribute dropped) its results are the same bits."""
    suffix = "f32" if dtype == np.float32 else "f64"
    ph = f"fgrad_{name}_{suffix}_ph"
    text = mathlib.emit_runtime(name, suffix)
    header = re.search(rf'^define .*@"{ph}".*$', text, re.M).group(0)
    assert " optnone" in header
    optimised = text.replace(header, header.replace(" optnone", ""))
    ctype = ctypes.c_float if dtype == np.float32 else ctypes.c_double
    x = inputs(dtype)
    x = x[~(np.abs(x) < 2.0 ** 20)]                 # the lanes it is called for
    assert x.size > 5000
    outs = []
    for ir_text in (text, optimised):
        module = engine.compile_module(ir_text, [ph], cache=False)
        fn = ctypes.CFUNCTYPE(ctype, ctype)(module.address(ph))
        outs.append(np.array([fn(v) for v in x.tolist()], dtype))
    np.testing.assert_array_equal(outs[0].view(np.uint8), outs[1].view(np.uint8))


def test_programs_call_the_vector_variants(cache):
    """A program declares sin; the vectoriser still calls a variant per vector."""
    f = fgrad.jit(lambda x: fnp.sin(x) * 2.0)
    x = np.linspace(-3, 3, 64, dtype=np.float32)
    np.testing.assert_allclose(np.asarray(f(x)), np.sin(x.astype(np.float64)) * 2, rtol=1e-6)
    text = next(iter(f._cache.values())).executable.llvm_ir
    assert "declare" in text and not re.search(r"^define .*fgrad_sin", text, re.M)
    optimized = engine.optimized_ir(text)
    assert re.search(r"call <\d+ x float> @fgrad_sin_f32_v\d+", optimized)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_long_loop_inlines_its_variant_with_the_shared_bits(dtype, cache):
    """A loop of INLINE_TRIG_ELEMENTS or more defines the variant of its width and
    inlines it after vectorisation (no call per vector), with the bits of the
    shared code a short loop calls, huge, inf and NaN lanes included."""
    f = fgrad.jit(lambda x: fnp.sin(x) * 2.0 + fnp.cos(x))
    x = np.resize(inputs(dtype), mathlib.INLINE_TRIG_ELEMENTS)
    out = np.asarray(f(x))
    text = f.lower(x).as_text()
    assert re.search(r"^define .*@\"fgrad_sin_f.._v\d+\".*fgrad-late-inline", text, re.M)
    optimized = engine.optimized_ir(text.split("; LLVM IR of the native kernels", 1)[1]
                                    .split("\n", 1)[1])
    assert not re.search(r"call <\d+ x (float|double)> @\"?fgrad_(sin|cos)_f.._v\d+", optimized)
    short = np.concatenate([np.asarray(f(c)) for c in np.array_split(x, 64)])
    assert not re.search(r"^define .*fgrad_sin", f.lower(x[:1000]).as_text(), re.M)
    np.testing.assert_array_equal(out.view(np.uint8), short.view(np.uint8))


def _functions(asm):
    """Each function's assembly in `asm`, local labels numbered per function."""
    parts = re.split(r"^(\w+):[ \t]*(?:#.*)?$", asm, flags=re.M)
    return {parts[i]: re.sub(r"\.(LBB|LCPI|Ltmp)\d+_", ".L", parts[i + 1].split(".Lfunc_end")[0])
            for i in range(1, len(parts), 2)}


@pytest.mark.parametrize("name", ["sin", "cos"])
@pytest.mark.parametrize("suffix", ["f32", "f64"])
def test_each_piece_is_the_code_of_the_whole_module(name, suffix):
    """Each exported function of the runtime, compiled as a piece of its own
    (what it calls kept as internal copies), is the machine code it has in the
    whole module, and so are those copies: the same bits. (In position-
    independent code, a piece calls its own `_ph` directly, not through the
    PLT.)"""
    text = mathlib.emit_runtime(name, suffix)
    whole = _functions(engine.optimized_asm(text))
    for piece in mathlib_runtime.symbols(name, suffix):
        own = _functions(engine.optimized_asm(
            mathlib_runtime._piece_text(text, piece, name, suffix)))
        assert set(own) < set(whole)
        for fn, code in own.items():
            assert code == whole[fn], (piece, fn)


_ONLY_V8 = """
import json, numpy as np, fgrad, fgrad.numpy as fnp
from fgrad._src.cpu import engine, mathlib_runtime
f = fgrad.jit(lambda x: fnp.sin(x) * 3.0)
out = np.asarray(f(np.linspace(-9, 9, 8, dtype=np.float32)))
print(json.dumps([sorted(mathlib_runtime._loaded), engine.host_vector_bits(),
                  next(iter(f._cache.values())).executable.compile_stats.needs]))
"""


def test_a_program_loads_only_the_pieces_it_calls(cache):
    """A program of 8 floats calls sin's variant of 8 lanes only: a new process
    compiles (and loads) that piece alone, not the whole runtime of sin."""
    env = dict(os.environ, FGRAD_CACHE_DIR=str(cache),
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", _ONLY_V8], env=env, timeout=300,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    loaded, bits, needs = json.loads(done.stdout.splitlines()[-1])
    assert loaded == needs
    if bits >= 256:
        assert needs == ["fgrad_sin_f32_v8"]


@pytest.mark.skipif(not engine.host_triple().startswith("x86_64"),
                    reason="the guess is made for x86's vector widths")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_prefetch_guesses_the_pieces_a_loop_calls(dtype, cache):
    """`to_compile` guesses which pieces a loop of n elements calls (the
    vectoriser's widest vectors, then narrower ones over the rest, then the
    scalar function) so that the background thread compiles just those. (The
    host's vector width it reads from /proc/cpuinfo, without LLVM: LLVM's.)"""
    assert engine.vector_bits_hint() == engine.host_vector_bits()
    for n in (1, 3, 4, 8, 13, 16, 28, 40, 100):
        f = fgrad.jit(lambda x: fnp.sin(x) * 2.0)
        f(np.ones(n, dtype))
        needs = next(iter(f._cache.values())).executable.compile_stats.needs
        assert sorted(mathlib_runtime._pieces("sin", np.dtype(dtype), (n,))) == sorted(needs), n


def test_a_scan_polls_through_the_shared_function(cache):
    def f(x):
        return lax.scan(lambda h, _: (fnp.sin(h) * 0.5 + 0.25, None), x, None, length=10)[0]
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    jitted = fgrad.jit(f)
    out = np.asarray(jitted(x))
    expected = x
    for _ in range(10):
        expected = np.sin(expected) * np.float32(0.5) + np.float32(0.25)
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    text = next(iter(jitted._cache.values())).executable.llvm_ir
    assert re.search(r"^declare .*@\"fgrad_poll_signals\"", text, re.M)
    assert not re.search(r"^define .*@\"fgrad_poll_signals\"", text, re.M)


def test_an_alias_needing_an_unknown_function_is_not_loaded(cache):
    """What an alias record says the code needs steers only fgrad's own run-time
    functions: any other name and the record is ignored (the caller compiles)."""
    text = Runner(np.float32, ["sin"]).text
    cm = engine.compile_module(text, ["apply_sin"])
    # what the optimised code calls: the scalar function (the remainder) and one
    # variant, not those the vectoriser did not pick, nor the variants' _ph
    called = re.findall(r"call [^\n]*@\"?(fgrad_sin_f32\w*)", engine.optimized_ir(text))
    assert sorted(cm.stats.needs) == sorted(set(called))
    assert "fgrad_sin_f32" in cm.stats.needs
    assert len(cm.stats.needs) < len(mathlib_runtime.symbols("sin", "f32")) - 1
    key = "d" * 64
    engine.save_alias(key, cm, {})
    assert engine.load_alias(key, ["apply_sin"]) is not None
    record = json.loads(disk_cache.read(f"{key}.alias")[0])
    assert record["needs"] == cm.stats.needs
    for needs in (["system"], ["fgrad_sin_f32", "PyRun_SimpleString"], "fgrad_sin_f32", [7]):
        disk_cache.write(f"{key}.alias", json.dumps(dict(record, needs=needs)).encode())
        assert engine.load_alias(key, ["apply_sin"]) is None, needs


_FRESH = """
import sys, numpy as np, fgrad, fgrad.numpy as fnp
from fgrad import lax
x = np.linspace(-2, 2, 16, dtype=np.float32)
f = fgrad.jit(lambda x: lax.scan(lambda h, _: (fnp.cos(fnp.sin(h)), None), x, None, length=5)[0])
out = np.asarray(f(x))
print(out.tobytes().hex(), next(iter(f._cache.values())).executable.compile_stats.cache_hit,
      "llvmlite.binding" in sys.modules)
"""


def _two_fresh_runs(script, cache):
    """stdout of `script` run twice, each in a new process sharing the disk cache."""
    env = dict(os.environ, FGRAD_CACHE_DIR=str(cache),
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    outs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", script], env=env, timeout=300,
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        outs.append(done.stdout)
    return outs


def test_a_new_process_loads_shared_code_before_a_cached_program(cache):
    """The program's library, found by fingerprint in a new process, needs the
    shared functions loaded first (else dlopen fails on their symbols, and the
    program is emitted again, which asks LLVM about the CPU)."""
    runs = [out.split() for out in _two_fresh_runs(_FRESH, cache)]
    assert runs[0][1:] == ["False", "True"] and runs[1][1] == "True"
    assert runs[0][0] == runs[1][0]
    if engine._linker() is not None:    # (MCJIT loads an object with LLVM)
        assert runs[1][2] == "False"


def test_sin_and_cos_are_found_in_nested_programs_with_their_real_type():
    def f(x, z):
        y = lax.scan(lambda c, _: (fnp.sin(c), None), x, None, length=3)[0]
        w = lax.cond(x[0] > 0, lambda v: fnp.cos(v), lambda v: v, z)
        return y, w, fnp.exp(x)
    jaxpr = fgrad.make_jaxpr(f)(np.ones(4, np.float32), np.ones(2, np.complex128)).jaxpr
    pieces = {p for eqn in all_eqns(jaxpr) if eqn.primitive.name in ("sin", "cos")
              for p in mathlib_runtime._pieces(eqn.primitive.name, eqn.outvars[0].aval.dtype,
                                               eqn.outvars[0].aval.shape)}
    assert pieces == {"fgrad_sin_f32_v4", "fgrad_cos_f64_v2"}


_PREFETCH = """
import json, sys, threading, numpy as np, fgrad, fgrad.numpy as fnp
from fgrad._src.cpu import engine, mathlib
compiled_on, emitted_on = [], []
compile_runtime, emit_runtime = engine.compile_runtime, mathlib.emit_runtime
def recording(*args, **kwargs):
    module = compile_runtime(*args, **kwargs)
    compiled_on.append((threading.current_thread().name, module.stats.cache_hit,
                        sys.getswitchinterval()))
    return module
def emitting(*args):
    emitted_on.append(threading.current_thread().name)
    return emit_runtime(*args)
engine.compile_runtime, mathlib.emit_runtime = recording, emitting
out = fgrad.jit(lambda x: fnp.sin(x) * 3.0)(np.linspace(-9, 9, 40, dtype=np.float32))
print(np.asarray(out).tobytes().hex())
print(json.dumps([compiled_on, emitted_on, sys.getswitchinterval()]))
"""


def test_a_cold_process_compiles_sin_on_a_background_thread(cache):
    """With an empty disk cache, sin's shared code, emitted on the calling
    thread, compiles on the prefetch thread (with a short GIL switch interval,
    restored afterwards) while the program is planned and emitted; with it
    cached, the program's thread loads it."""
    runs = []
    for stdout in _two_fresh_runs(_PREFETCH, cache):
        out, compiled_on = stdout.splitlines()[-2:]
        runs.append((out, json.loads(compiled_on)))
    default = sys.getswitchinterval()
    # 40 floats: the variant of 16 lanes over 32, then that of 8 (AVX-512; on
    # other hosts, other pieces): each compiled on the thread, then loaded
    pieces = len(runs[0][1][0])
    assert pieces >= 1
    assert runs[0][1] == [[["fgrad math runtime", False, switch_interval.INTERVAL]] * pieces,
                          ["MainThread"], default]
    assert runs[1][1] == [[["MainThread", True, default]] * pieces, [], default]
    assert runs[1][0] == runs[0][0]
