"""The LLVM side of the CPU backend: compile, call, disk cache, errors."""
import ctypes
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np
import pytest

from fgrad._src.cpu import engine

from concurrency import run_threads
from llvm_kernels import kernel

REPO = Path(__file__).resolve().parent.parent

def run_scale(cm, x):
    out = np.zeros_like(x)
    args = np.array([x.size, x.ctypes.data, out.ctypes.data], np.int64)
    cm.entry("scale")(args)
    return out


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("FGRAD_CACHE_DIR", str(d))
    return d


def test_initialize_is_idempotent():
    engine.initialize()
    engine.initialize()
    name, features = engine.host_cpu()
    assert name
    tm1, tm2 = engine.host_target_machine(), engine.host_target_machine()
    assert tm1 is not tm2


def test_compile_and_call(cache_dir):
    cm = engine.compile_module(kernel(3.0), ["scale"])
    x = np.arange(37, dtype=np.float64)
    np.testing.assert_array_equal(run_scale(cm, x), 3.0 * x)
    # int address of the argument table, and the raw ctypes function
    out = np.zeros_like(x)
    args = np.array([x.size, x.ctypes.data, out.ctypes.data], np.int64)
    cm.entry("scale")(int(args.ctypes.data))
    np.testing.assert_array_equal(out, 3.0 * x)
    out[:] = 0
    cm.entry("scale").cfunc(args.ctypes.data)
    np.testing.assert_array_equal(out, 3.0 * x)
    assert cm.address("scale") == cm.entry("scale").address != 0
    s = cm.stats
    assert not s.cache_hit and s.optimize_ms > 0 and s.codegen_ms > 0 and s.object_bytes > 0


def test_entry_argument_checks(cache_dir):
    e = engine.compile_module(kernel(), ["scale"]).entry("scale")
    with pytest.raises(TypeError):
        e(np.zeros(3, np.int32))
    with pytest.raises(TypeError):
        e([0, 0, 0])


def test_entry_keeps_engine_alive(cache_dir):
    e = engine.compile_module(kernel(5.0), ["scale"], cache=False).entry("scale")
    import gc
    gc.collect()
    x = np.ones(8)
    out = np.zeros(8)
    e(np.array([8, x.ctypes.data, out.ctypes.data], np.int64))
    np.testing.assert_array_equal(out, 5.0)


def test_disk_cache_hit(cache_dir):
    text = kernel(7.0)
    first = engine.compile_module(text, ["scale"])
    assert not first.stats.cache_hit
    path = Path(first.stats.cache_path)
    assert path.is_file() and path.parent.parent == cache_dir
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".tmp")]
    second = engine.compile_module(text, ["scale"])
    assert second.stats.cache_hit
    assert second.stats.optimize_ms == 0 and second.stats.codegen_ms == 0
    assert second.stats.total_ms < first.stats.total_ms / 2
    x = np.linspace(-1, 1, 101)
    np.testing.assert_array_equal(run_scale(second, x), 7.0 * x)
    # both engines stay usable side by side
    np.testing.assert_array_equal(run_scale(first, x), 7.0 * x)
    # a different IR text is a different key
    third = engine.compile_module(kernel(8.0), ["scale"])
    assert not third.stats.cache_hit and third.stats.key != first.stats.key


def test_explicit_cache_dir_and_disabled_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FGRAD_CACHE_DIR", str(tmp_path / "env"))
    d = tmp_path / "explicit"
    cm = engine.compile_module(kernel(9.0), ["scale"], cache_dir=d)
    assert Path(cm.stats.cache_path).parent.parent == d
    assert not [p for p in (tmp_path / "env").rglob("*") if p.suffix in (".o", ".so")]
    cm = engine.compile_module(kernel(10.0), ["scale"], cache=False)
    assert cm.stats.cache_path is None
    env = tmp_path / "env"
    assert not [p for p in env.rglob("*") if p.suffix in (".o", ".so")]
    monkeypatch.delenv("FGRAD_CACHE_DIR")
    assert engine.default_cache_dir() == Path.home() / ".cache" / "fgrad"


def test_cache_hit_in_fresh_process(cache_dir):
    """A new process finds the code; a shared library loads without LLVM."""
    text = kernel(11.0)
    first = engine.compile_module(text, ["scale"])
    assert not first.stats.cache_hit
    code = (
        "import sys, numpy as np\n"
        "from fgrad._src.cpu import engine\n"
        "cm = engine.compile_module(sys.stdin.read(), ['scale'])\n"
        "x = np.arange(5.0); out = np.zeros(5)\n"
        "cm.entry('scale')(np.array([5, x.ctypes.data, out.ctypes.data], np.int64))\n"
        "print(cm.stats.cache_hit, 'llvmlite.binding' in sys.modules, out.tolist())\n"
    )
    env = dict(os.environ, FGRAD_CACHE_DIR=str(cache_dir),
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    for _ in range(2):   # the first run also remembers LLVM's view of this CPU
        res = subprocess.run([sys.executable, "-c", code], input=text, capture_output=True,
                             text=True, env=env, timeout=120)
        assert res.returncode == 0, res.stderr
    llvm_loaded = engine._linker() is None       # MCJIT loads an object
    assert res.stdout.split("\n")[0] == f"True {llvm_loaded} [0.0, 11.0, 22.0, 33.0, 44.0]"


@pytest.mark.parametrize("damage", ["garbage", "truncate", "flip", "empty"])
def test_corrupt_cache_file_is_recompiled(cache_dir, damage):
    text = kernel(13.0)
    first = engine.compile_module(text, ["scale"])
    path = Path(first.stats.cache_path)
    data = path.read_bytes()
    if damage == "garbage":
        path.write_bytes(b"\x7fELF" + os.urandom(200))
    elif damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "flip":
        b = bytearray(data)
        b[len(b) // 2] ^= 0xFF
        path.write_bytes(bytes(b))
    else:
        path.write_bytes(b"")
    second = engine.compile_module(text, ["scale"])
    assert not second.stats.cache_hit
    assert "corrupt" in second.stats.cache_error
    x = np.arange(10.0)
    np.testing.assert_array_equal(run_scale(second, x), 13.0 * x)
    assert path.read_bytes() == data             # overwritten with a good object
    third = engine.compile_module(text, ["scale"])
    assert third.stats.cache_hit


def test_unwritable_cache_dir_is_not_fatal(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.warns(RuntimeWarning, match="does not use the disk cache.*Not a directory"):
        cm = engine.compile_module(kernel(15.0), ["scale"], cache_dir=blocker)
    assert not cm.stats.cache_hit and cm.stats.cache_error
    np.testing.assert_array_equal(run_scale(cm, np.ones(3)), 15.0)


def test_parse_error_is_clear(cache_dir):
    bad = kernel().replace("fmul double %v", "fmul double %undefined_value")
    with pytest.raises(engine.CompileError, match="(?s)parse error.*undefined_value"):
        engine.compile_module(bad, ["scale"])
    with pytest.raises(engine.CompileError, match="parse error"):
        engine.compile_module("this is not llvm ir", [])


def test_verification_error_is_clear(cache_dir):
    bad = """
define i32 @f(i32 %a) {
entry:
  %x = add i32 %y, 1
  %y = add i32 %a, 1
  ret i32 %x
}
"""
    with pytest.raises(engine.CompileError, match="(?s)verification failed.*dominate"):
        engine.compile_module(bad, ["f"])


def test_missing_entry_is_clear(cache_dir):
    with pytest.raises(engine.CompileError, match="'nope'"):
        engine.compile_module(kernel(), ["scale", "nope"])
    cm = engine.compile_module(kernel(), ["scale"])
    with pytest.raises(KeyError):
        cm.address("nope")


def test_optimized_ir_and_asm():
    text = engine.optimized_ir(kernel(2.0))
    assert "define void @scale" in text
    if engine.host_has_feature("avx2"):
        assert "<4 x double>" in text
    asm = engine.optimized_asm(kernel(2.0))
    assert "scale" in asm


FOLDABLE_IR = r"""
define i64 @f(i64 %x) #0 {
entry:
  %y = add i64 %x, 0
  ret i64 %y
}
attributes #0 = { nounwind ATTRIBUTES }
"""


@pytest.mark.parametrize("codegen_only", [False, True])
def test_codegen_only_modules_skip_the_ir_pipeline(cache_dir, codegen_only):
    """A function attribute CODEGEN_ONLY keeps the IR as written (the add of 0
    that the pipeline folds), and the code still runs."""
    text = FOLDABLE_IR.replace("ATTRIBUTES", f'"{engine.CODEGEN_ONLY}"="true"'
                               if codegen_only else "")
    assert ("add i64 %x, 0" in engine.optimized_ir(text)) == codegen_only
    module = engine.compile_module(text, ["f"])
    assert ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(module.address("f"))(41) == 41


CALLBACK_IR = r"""
declare void @fgrad_test_callback(i64)

define void @go(ptr %args) {
entry:
  %v = load i64, ptr %args
  call void @fgrad_test_callback(i64 %v)
  ret void
}
"""


def test_add_symbol_and_cached_external_reference(cache_dir):
    seen = []
    cb = ctypes.CFUNCTYPE(None, ctypes.c_int64)(seen.append)
    engine.add_symbol("fgrad_test_callback", ctypes.cast(cb, ctypes.c_void_p).value)
    for expect_hit in (False, True):
        cm = engine.compile_module(CALLBACK_IR, ["go"])
        assert cm.stats.cache_hit == expect_hit
        assert not cm.stats.shared_library   # a private symbol: MCJIT resolves it
        cm.entry("go")(np.array([42 + expect_hit], np.int64))
    assert seen == [42, 43]


def test_concurrent_compiles(cache_dir):
    results, errors = {}, []

    def work(k):
        try:
            cm = engine.compile_module(kernel(100.0 + k), ["scale"], cache=False)
            results[k] = run_scale(cm, np.ones(4))
        except Exception as e:      # pragma: no cover - reported below
            errors.append(e)

    run_threads(work, [(k,) for k in range(4)])
    assert not errors
    for k in range(4):
        np.testing.assert_array_equal(results[k], 100.0 + k)


def test_code_is_a_shared_library_when_a_linker_exists(cache_dir):
    cm = engine.compile_module(kernel(17.0), ["scale"])
    assert cm.stats.shared_library == (engine._linker() is not None)
    assert cm.stats.cache_path.endswith(".so" if cm.stats.shared_library else ".o")
    np.testing.assert_array_equal(run_scale(cm, np.arange(4.0)), 17.0 * np.arange(4.0))


def test_link_failure_falls_back_to_mcjit(cache_dir, monkeypatch):
    monkeypatch.setattr(engine, "_linker", lambda: "/bin/false")
    cm = engine.compile_module(kernel(19.0), ["scale"])
    assert not cm.stats.shared_library and cm.stats.link_error
    assert cm.stats.cache_path.endswith(".o")
    np.testing.assert_array_equal(run_scale(cm, np.arange(4.0)), 19.0 * np.arange(4.0))
    again = engine.compile_module(kernel(20.0), ["scale"])    # not tried a second time
    assert not again.stats.shared_library and again.stats.link_error is None


def test_aliases(cache_dir):
    assert engine.load_alias("a" * 64, ["scale"]) is None
    cm = engine.compile_module(kernel(23.0), ["scale"])
    engine.save_alias("b" * 64, cm, {"infos": [[True, 3, False]]})
    found, meta = engine.load_alias("b" * 64, ["scale"])
    assert found.stats.cache_hit and meta == {"infos": [[True, 3, False]]}
    np.testing.assert_array_equal(run_scale(found, np.ones(2)), 23.0)
    assert engine.load_alias("b" * 64, ["nope"]) is None   # no such entry: compile
    path = Path(cm.stats.cache_path).with_name("b" * 64 + ".alias")
    path.write_bytes(path.read_bytes()[:-3])           # damaged: no alias
    assert engine.load_alias("b" * 64, ["scale"]) is None
    uncached = engine.compile_module(kernel(24.0), ["scale"], cache=False)
    engine.save_alias("c" * 64, uncached, {})          # nothing on disk to name
    assert engine.load_alias("c" * 64, ["scale"]) is None


def test_a_forked_child_loads_code_and_leaves_the_parent_able_to(cache_dir):
    """A forked child loading code (and running its exit handlers) leaves
    nothing the parent needs to load its own."""
    import atexit
    engine.compile_module(kernel(25.0), ["scale"])
    pid = os.fork()
    if pid == 0:                   # the child: load code, run the exit handlers, leave
        ok = False
        try:
            cm = engine.compile_module(kernel(26.0), ["scale"])
            ok = np.array_equal(run_scale(cm, np.ones(2)), [26.0, 26.0])
            atexit._run_exitfuncs()
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    again = engine.compile_module(kernel(27.0), ["scale"])
    assert again.stats.link_error is None
    np.testing.assert_array_equal(run_scale(again, np.ones(2)), [27.0, 27.0])


def test_loading_a_library_leaves_no_files_behind(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    cm = engine.compile_module(kernel(28.0), ["scale"], cache=False)
    np.testing.assert_array_equal(run_scale(cm, np.ones(2)), [28.0, 28.0])
    assert list(tmp_path.iterdir()) == []


def test_host_features_are_detected_afresh_not_read_from_the_cache(cache_dir):
    """A description of the CPU planted in the cache (as fgrad once wrote one)
    claiming features the CPU lacks is never read: compiled code would die of
    SIGILL. A new process finds its code by a key made from /proc/cpuinfo."""
    fingerprint = engine._cpu_fingerprint()
    if fingerprint is None:
        pytest.skip("no /proc/cpuinfo")
    (cache_dir / "cpu").mkdir(parents=True, mode=0o700)
    (cache_dir / "cpu" / f"host-{fingerprint}.json").write_text(
        '{"name": "sapphirerapids", "features": "+avx512fp16,+avx512f", "triple": "x86_64"}')
    engine._host.cache_clear()
    try:
        llvm = engine._binding()
        assert engine.host_cpu() == (llvm.get_host_cpu_name(),
                                     llvm.get_host_cpu_features().flatten())
        assert engine.host_triple() == llvm.get_process_triple()
    finally:
        engine._host.cache_clear()


def test_fork_waits_for_a_compile_in_another_thread(cache_dir):
    """fork() takes the engine's lock (held across it, see compiler_lock): it waits
    for the thread holding it, and the child compiles (it would hang on a copy
    of a lock that thread held)."""
    import signal
    import time
    held = threading.Event()

    def holder():
        with engine._lock:
            held.set()
            time.sleep(0.5)
    t = threading.Thread(target=holder)
    t.start()
    assert held.wait(10)
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        ok = False
        try:
            cm = engine.compile_module(kernel(28.0), ["scale"], cache=False)
            ok = np.array_equal(run_scale(cm, np.ones(2)), [28.0, 28.0])
        finally:
            os._exit(0 if ok else 1)
    waited = time.monotonic() - start
    t.join()
    deadline = time.monotonic() + 60
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child deadlocked on the engine's lock")
        time.sleep(0.05)
    assert os.waitstatus_to_exitcode(status) == 0
    assert waited > 0.2                  # fork waited for the holder
    with engine._lock:                   # and gave the lock back in the parent
        pass
