"""The disk cache of compiled code is code this process runs: it is used only
when nobody else can write it, what it holds is checked before it steers
native code, it stays under its size limit, and compiles leave no debris.
Also: fork() while another thread compiles (the child must not hang).

The tests run as root, which passes every permission check: other owners are
made with chown, and what a user without rights sees is run in a forked child
that has become another user."""
import json
import os
import re
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad._src.cpu import disk_cache, engine, scratch

from llvm_kernels import kernel

REPO = Path(__file__).resolve().parent.parent
OTHER_UID = 12345
NOBODY = 65534

as_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                             reason="needs root, to chown files to another user")

def scaled(cm, n=4):
    x, out = np.arange(float(n)), np.zeros(n)
    cm.entry("scale")(np.array([n, x.ctypes.data, out.ctypes.data], np.int64))
    return out


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh cache directory, and this process's once-only state reset."""
    d = tmp_path / "cache"
    monkeypatch.setenv("FGRAD_CACHE_DIR", str(d))
    monkeypatch.setattr(disk_cache, "_warned", set())
    monkeypatch.setattr(disk_cache, "_usage", {})
    return d


def compile_twice(scale):
    """Compile a kernel twice, recording warnings: (first, second, warnings)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = engine.compile_module(kernel(scale), ["scale"])
        second = engine.compile_module(kernel(scale), ["scale"])
    return first, second, [w for w in caught if "disk cache" in str(w.message)]


def cached_code(cache_dir):
    return [p for p in (cache_dir / "cpu").iterdir() if p.suffix in (".so", ".o")]


# --------------------------------------------------------------------------
# Modes and ownership

def test_cache_directories_are_0700_and_files_0600(cache):
    old = os.umask(0o022)
    try:
        cm = engine.compile_module(kernel(2.0), ["scale"])
        engine.save_alias("a" * 64, cm, {})
    finally:
        os.umask(old)
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert stat.S_IMODE((cache / "cpu").stat().st_mode) == 0o700
    files = list((cache / "cpu").iterdir())
    assert {p.suffix for p in files} == {Path(cm.stats.cache_path).suffix, ".alias"}
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in files)


@as_root
@pytest.mark.parametrize("which", ["root", "cpu"])
@pytest.mark.parametrize("flaw", ["owner", "group-writable", "other-writable"])
def test_a_directory_others_can_write_is_refused(cache, which, flaw):
    (cache / "cpu").mkdir(parents=True, mode=0o700)
    d = cache if which == "root" else cache / "cpu"
    if flaw == "owner":
        os.chown(d, OTHER_UID, OTHER_UID)
    else:
        os.chmod(d, 0o770 if flaw == "group-writable" else 0o707)
    first, second, warned = compile_twice(3.0)
    assert len(warned) == 1                                   # one warning, not one a call
    message = str(warned[0].message)
    assert str(d) in message
    assert (f"owned by uid {OTHER_UID}" if flaw == "owner" else "writable by") in message
    assert not first.stats.cache_hit and not second.stats.cache_hit
    assert first.stats.cache_error == second.stats.cache_error and first.stats.cache_error
    np.testing.assert_array_equal(scaled(second), 3.0 * np.arange(4.0))
    assert cached_code(cache) == []                           # nothing written there
    assert fgrad.disk_cache_info().problem == first.stats.cache_error
    with pytest.raises(PermissionError, match="nothing was removed"):
        fgrad.clear_disk_cache()


@as_root
@pytest.mark.parametrize("flaw", ["owner", "group-writable", "other-writable", "symlink",
                                  "fifo"])
def test_a_cache_file_others_could_write_is_not_loaded(cache, tmp_path, flaw):
    first = engine.compile_module(kernel(5.0), ["scale"])
    path = Path(first.stats.cache_path)
    good = path.read_bytes()
    if flaw == "owner":
        os.chown(path, OTHER_UID, OTHER_UID)
    elif flaw == "symlink":              # to a valid object elsewhere
        elsewhere = tmp_path / "elsewhere.so"
        elsewhere.write_bytes(good)
        path.unlink()
        path.symlink_to(elsewhere)
    elif flaw == "fifo":                 # (must not block the reader)
        path.unlink()
        os.mkfifo(path, 0o600)
    else:
        os.chmod(path, 0o620 if flaw == "group-writable" else 0o602)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        second = engine.compile_module(kernel(5.0), ["scale"])
    assert not second.stats.cache_hit and second.stats.cache_error
    assert [w for w in caught if str(path) in str(w.message)]
    np.testing.assert_array_equal(scaled(second), 5.0 * np.arange(4.0))
    st = os.lstat(path)                  # replaced by a file of our own
    assert stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid()
    assert stat.S_IMODE(st.st_mode) == 0o600 and path.read_bytes() == good
    assert engine.compile_module(kernel(5.0), ["scale"]).stats.cache_hit


def _as_user(uid, fn):
    """Run fn() in a forked child that has become user `uid`; returns what it
    returned (a string), or raises what it raised, as text."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            os.setgid(uid)
            os.setuid(uid)
            try:
                out = "ok " + fn()
            except BaseException as e:    # reported to the parent
                out = f"raised {type(e).__name__}: {e}"
            os.write(w, out.encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        out = f.read().decode()
    _wait(pid, 120)
    return out


def _wait(pid, timeout):
    """waitpid with a watchdog: the exit code, or kill the child and fail."""
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail(f"child {pid} hung (killed after {timeout} s)")
        time.sleep(0.02)


@as_root
@pytest.mark.parametrize("mode", [0o400, 0o100, 0o000])
def test_a_cache_directory_that_cannot_be_searched_is_not_an_error(mode):
    """Listable but not searchable (r--), searchable but not listable (--x) or
    neither: the first call compiles without the disk cache and says why once."""
    fgrad.jit(lambda a: fnp.cos(a) * 4.5)(np.ones(3))      # (imports done as root)
    base = tempfile.mkdtemp(prefix="fgrad-test-perm-")
    try:
        os.chmod(base, 0o755)
        cache_dir = Path(base) / "cache"
        (cache_dir / "cpu").mkdir(parents=True, mode=0o700)
        os.chown(cache_dir / "cpu", NOBODY, NOBODY)
        os.chown(cache_dir, NOBODY, NOBODY)
        os.chmod(cache_dir, mode)

        def first_call():
            os.environ["FGRAD_CACHE_DIR"] = str(cache_dir)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                out = fgrad.jit(lambda a: fnp.sin(a) * 7.25 + 1.0)(np.ones(3))
                again = fgrad.jit(lambda a: fnp.sin(a) * 7.5 + 1.0)(np.ones(3))
            np.testing.assert_allclose(out, np.sin(1.0) * 7.25 + 1.0, rtol=1e-6)
            np.testing.assert_allclose(again, np.sin(1.0) * 7.5 + 1.0, rtol=1e-6)
            return " | ".join(str(w.message) for w in caught if "disk cache" in str(w.message))
        out = _as_user(NOBODY, first_call)
    finally:
        os.chmod(Path(base) / "cache", 0o700)
        subprocess.run(["rm", "-rf", base], check=True)
    assert out.startswith("ok "), out
    assert out.count("does not use the disk cache") == 1 and "Permission denied" in out


def test_unreadable_sources_mean_no_fingerprints_not_an_error(monkeypatch):
    """The same class: the digest of fgrad's sources (part of every fingerprint)
    read a file it may not read without a guard."""
    from fgrad._src.jit import fingerprint

    def guarded(path, *args):
        if os.path.basename(path) == "api.py":
            raise PermissionError(13, "Permission denied", str(path))
        return open(path, *args)
    monkeypatch.setattr(fingerprint, "open", guarded, raising=False)
    fingerprint.source_digest.cache_clear()
    try:
        assert fingerprint.source_digest() is None
        np.testing.assert_allclose(fgrad.jit(lambda a: a * 3.5 - 1.0)(np.ones(2)), 2.5)
    finally:
        monkeypatch.undo()
        fingerprint.source_digest.cache_clear()
    assert fingerprint.source_digest() is not None


# --------------------------------------------------------------------------
# What the cache says is checked before it steers native code

def test_alias_records_are_checked(cache):
    cm = engine.compile_module(kernel(6.0), ["scale"])
    key, shared = cm.stats.key, cm.stats.cache_path.endswith(".so")
    good = {"key": key, "shared": shared, "meta": {"infos": []}}
    assert engine.load_alias(*_alias(good)) is not None
    bad = [dict(good, key="../" * 8 + "tmp/evil"), dict(good, key=key.upper()),
           dict(good, key=7), dict(good, shared="yes"), dict(good, shared=1),
           dict(good, meta=[1, 2]), [key, shared], "text"]
    for record in bad:
        assert engine.load_alias(*_alias(record)) is None, record


def _alias(record):
    name = os.urandom(32).hex()
    assert disk_cache.write(f"{name}.alias", json.dumps(record).encode()) is None
    return name, ["scale"]


_TAMPER = """
import json, sys, numpy as np, fgrad, fgrad.numpy as fnp
from pathlib import Path
from fgrad._src.cpu import disk_cache
x = np.linspace(-1, 1, 3000).reshape(30, 100)
f = lambda x: fnp.tanh(x) * 3.0 + x[0]
if sys.argv[1] == "tamper":
    for path in Path(disk_cache.root(), "cpu").glob("*.alias"):
        payload, _ = disk_cache.read(path.name)
        record = json.loads(payload)
        for info in record["meta"].get("infos", ()):
            info[1] = 2 ** 40 if info[1] else info[1]
        disk_cache.write(path.name, json.dumps(record).encode())
out = np.asarray(fgrad.jit(f)(x))
print(np.allclose(out, np.tanh(x) * 3.0 + x[0], rtol=1e-12, atol=0))
"""


def test_a_tampered_loop_bound_in_an_alias_is_not_run(tmp_path):
    """Code found by fingerprint runs only with the loop bounds and tables this
    process plans for it: an alias claiming a loop of 2**40 rows segfaulted."""
    env = dict(os.environ, FGRAD_CACHE_DIR=str(tmp_path),
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    for step in ("fill", "tamper"):
        done = subprocess.run([sys.executable, "-c", _TAMPER, step], env=env, timeout=300,
                              capture_output=True, text=True)
        assert done.returncode == 0, (step, done.returncode, done.stderr[-2000:])
        assert done.stdout.split() == ["True"], done.stdout
    assert list((tmp_path / "cpu").glob("*.alias"))


def test_group_info_is_what_emitting_reports(cache):
    """fused.group_info (what found code is checked against) agrees with what
    emitting each kind of group reports."""
    from fgrad._src.cpu import fused
    seen = []
    emit = fused.emit_module

    def checked(groups, name, segments=(), flush=False, loops=None):
        out = emit(groups, name, segments, flush, loops)
        seen.append(([fused.group_info(g, loops or {}) for g in groups], list(out[2])))
        return out
    x = np.linspace(-1, 1, 60).reshape(3, 4, 5)
    i = np.array([2, 0, 1])
    programs = [
        lambda x: fnp.sin(x) * 2.0 + x[:, :1],                  # broadcast
        lambda x: fnp.sum(fnp.exp(x), axis=1),                   # reduction
        lambda x: fnp.max(x * x),                                # full reduction
        lambda x: fnp.transpose(x, (2, 0, 1)) + 1.0,            # strided
        lambda x: fgrad.lax.select_n(i[:, None, None] % 3, x, -x, x * 2),  # checked selector
        lambda x: x.reshape(12, 5) @ x.reshape(12, 5).T,         # dot
        lambda x: x.reshape(60)[::-1] @ x.reshape(60),          # dot of vectors
        lambda x: x[i] * 2.0,                                    # gather
        lambda x: fnp.sort(x, axis=-1),                          # sort
        lambda x: fnp.cumsum(x, axis=0),                         # structural
        lambda x: fgrad.lax.fori_loop(0, 3, lambda k, v: v * 1.5 + k, x),  # loop
    ]
    import unittest.mock
    with unittest.mock.patch.object(fused, "emit_module", checked):
        for f in programs:
            fgrad.jit(f)(x)
    assert len(seen) == len(programs)
    for computed, emitted in seen:
        assert computed == emitted


# --------------------------------------------------------------------------
# Size: bounded, least recently used removed, visible, clearable

def test_the_cache_stays_under_its_limit_removing_the_least_recently_used(cache, monkeypatch):
    sizes = []
    for k in range(3):
        sizes.append(Path(engine.compile_module(kernel(10.0 + k), ["scale"]).stats.cache_path)
                     .stat().st_size)
    limit = int(max(sizes) * 3.5)        # room for three
    monkeypatch.setattr(fgrad.config, "disk_cache_max_bytes", limit)
    monkeypatch.setattr(disk_cache, "_usage", {})
    for k in range(3):                   # 10.0 is used again: the most recent
        time.sleep(0.01)
        assert engine.compile_module(kernel(10.0 + 2 - k), ["scale"]).stats.cache_hit
    for k in range(3, 8):
        time.sleep(0.01)
        engine.compile_module(kernel(10.0 + k), ["scale"])
        info = fgrad.disk_cache_info()
        assert info.bytes <= limit and info.files <= 3, (k, info)
    assert engine.compile_module(kernel(17.0), ["scale"]).stats.cache_hit     # newest kept
    assert not engine.compile_module(kernel(11.0), ["scale"]).stats.cache_hit  # oldest gone


def test_the_directory_is_listed_rarely(cache, monkeypatch):
    listed = []
    listing = disk_cache._listing
    monkeypatch.setattr(disk_cache, "_listing",
                        lambda *a, **k: listed.append(1) or listing(*a, **k))
    for k in range(12):
        engine.compile_module(kernel(30.0 + k), ["scale"])
    assert len(listed) == 1                              # the first write of this process
    monkeypatch.setattr(fgrad.config, "disk_cache_max_bytes", 8 * fgrad.disk_cache_info().bytes)
    for k in range(12, 24):                              # an eighth of the limit written
        engine.compile_module(kernel(30.0 + k), ["scale"])
    assert 2 <= len(listed) <= 4


def test_a_limit_of_zero_caches_nothing(cache, monkeypatch):
    monkeypatch.setattr(fgrad.config, "disk_cache_max_bytes", 0)
    cm = engine.compile_module(kernel(40.0), ["scale"])
    assert "limit" in cm.stats.cache_error
    assert not engine.compile_module(kernel(40.0), ["scale"]).stats.cache_hit


def test_disk_cache_info_and_clear(cache):
    assert fgrad.disk_cache_info() == disk_cache.DiskCacheInfo(
        str(cache / "cpu"), 0, 0, fgrad.config.disk_cache_max_bytes, None)
    assert fgrad.clear_disk_cache() == 0                 # none yet: nothing to do
    cms = [engine.compile_module(kernel(50.0 + k), ["scale"]) for k in range(3)]
    engine.save_alias("b" * 64, cms[0], {})
    (cache / "cpu" / "notes.txt").write_text("not fgrad's")
    (cache / "mine").write_text("not fgrad's either")
    info = fgrad.disk_cache_info()
    assert info.files == 4 and info.problem is None
    assert info.bytes == sum(p.stat().st_size for p in (cache / "cpu").iterdir()
                             if p.name != "notes.txt")
    assert fgrad.clear_disk_cache() == info.bytes
    assert sorted(p.name for p in (cache / "cpu").iterdir()) == ["notes.txt"]
    assert (cache / "mine").exists()
    assert fgrad.disk_cache_info().files == 0
    np.testing.assert_array_equal(scaled(cms[1]), 51.0 * np.arange(4.0))   # still loaded
    assert not engine.compile_module(kernel(50.0), ["scale"]).stats.cache_hit


@pytest.mark.parametrize("bad", ["2G", -1, 1.5, True, None])
def test_a_bad_cache_limit_is_a_clear_error(cache, monkeypatch, bad):
    monkeypatch.setattr(fgrad.config, "disk_cache_max_bytes", bad)
    with pytest.raises(ValueError, match=r"disk_cache_max_bytes must be a whole number.*"
                                         + re.escape(repr(bad))):
        engine.compile_module(kernel(45.0), ["scale"])


@pytest.mark.parametrize("text, value", [("123", 123), ("512M", 512 << 20), ("2g", 2 << 30),
                                         ("1GiB", 1 << 30), ("0", 0), ("", 1 << 30)])
def test_cache_limit_from_the_environment(monkeypatch, text, value):
    from fgrad._src import config
    monkeypatch.setenv("FGRAD_CACHE_MAX_BYTES", text)
    assert config._bytes("FGRAD_CACHE_MAX_BYTES", 1 << 30) == value


def test_a_malformed_cache_limit_warns_and_keeps_the_default(monkeypatch):
    from fgrad._src import config
    monkeypatch.setenv("FGRAD_CACHE_MAX_BYTES", "lots")
    with pytest.warns(RuntimeWarning, match="FGRAD_CACHE_MAX_BYTES='lots'"):
        assert config._bytes("FGRAD_CACHE_MAX_BYTES", 1 << 30) == 1 << 30


# --------------------------------------------------------------------------
# Debris of processes killed while compiling

def _dead_pid():
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def _age(path, seconds):
    t = time.time() - seconds
    os.utime(path, (t, t))


def test_scratch_directories_of_dead_compiles_are_removed(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(scratch, "_swept", False)
    dead, me = _dead_pid(), os.getpid()
    names = {f"fgrad-link-{dead}-aaaa": 120, f"fgrad-lib-{dead}-bbbb": 120,
             f"fgrad-link-{dead}-cccc": 5,          # young: may be in use
             f"fgrad-link-{me}-dddd": 120,          # its process runs
             "fgrad-link-k2j4_x9q": 7200,           # an older fgrad's, no pid
             "fgrad-lib-zz_9ab1c": 600,             # ... young for one without a pid
             "fgrad-other-1-eeee": 7200, "unrelated": 7200}
    for name, age in names.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "k.o").write_bytes(b"x")
        _age(tmp_path / name, age)
    engine.compile_module(kernel(60.0), ["scale"], cache=False)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted(["fgrad-link-%d-cccc" % dead, f"fgrad-link-{me}-dddd",
                           "fgrad-lib-zz_9ab1c", "fgrad-other-1-eeee", "unrelated"])


_SLOW_LINK = """
import os, sys, tempfile
tempfile.tempdir = sys.argv[1]
from fgrad._src.cpu import engine
engine._linker = lambda: sys.argv[2]
print("linking", flush=True)
engine.compile_module(engine_text, ["scale"], cache=False)
"""


def test_a_compile_killed_while_linking_leaves_nothing_for_long(tmp_path, monkeypatch):
    """kill -9 during a link leaves its scratch directory; the next compile of a
    later process removes it once it is a minute old."""
    if engine._linker() is None:
        pytest.skip("no system linker")
    scratch_root = tmp_path / "tmp"
    scratch_root.mkdir()
    slow_ld = tmp_path / "slow-ld"
    slow_ld.write_text("#!/bin/sh\nsleep 60\n")
    slow_ld.chmod(0o755)
    env = dict(os.environ,
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    code = f"engine_text = {kernel(61.0)!r}\n" + _SLOW_LINK
    child = subprocess.Popen([sys.executable, "-c", code, str(scratch_root), str(slow_ld)],
                             env=env, stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not list(scratch_root.glob("fgrad-link-*")):
            assert time.monotonic() < deadline and child.poll() is None
            time.sleep(0.05)
    finally:
        child.kill()                    # SIGKILL
        child.wait()
    (left,) = scratch_root.glob("fgrad-link-*")
    assert left.name.startswith(f"fgrad-link-{child.pid}-")
    monkeypatch.setattr(tempfile, "tempdir", str(scratch_root))
    monkeypatch.setattr(scratch, "_swept", False)
    engine.compile_module(kernel(62.0), ["scale"], cache=False)
    assert left.exists()                # too young to tell from one in use
    _age(left, 120)
    monkeypatch.setattr(scratch, "_swept", False)
    engine.compile_module(kernel(63.0), ["scale"], cache=False)
    assert not left.exists()


def test_temporary_cache_files_of_dead_writers_are_removed(cache):
    engine.compile_module(kernel(70.0), ["scale"])
    cpu = cache / "cpu"
    dead = _dead_pid()
    stale, young = cpu / f".tmp-{dead}-0123abcd", cpu / f".tmp-{dead}-4567abcd"
    old_style = cpu / ".tmp-x1_y2z3w"
    for p in (stale, young, old_style):
        p.write_bytes(b"partial")
    _age(stale, 120)
    _age(old_style, 7200)
    disk_cache._usage.clear()           # a new process: its first write lists the directory
    engine.compile_module(kernel(71.0), ["scale"])
    assert not stale.exists() and not old_style.exists() and young.exists()


# --------------------------------------------------------------------------
# fork() while another thread compiles

_FORKS = """
import os, signal, sys, threading, time
import numpy as np, fgrad, fgrad.numpy as fnp
forks, timeout = int(sys.argv[1]), float(sys.argv[2])
x = np.ones(8, np.float32)
stop = False

def compile_forever():
    k = 0
    while not stop:
        k += 1
        fgrad.jit(lambda a, k=k: fnp.tanh(a * k) + k)(x)

threading.Thread(target=compile_forever, daemon=True).start()
hung = 0
for i in range(forks):
    time.sleep(0.07)
    pid = os.fork()
    if pid == 0:
        ok = False
        try:
            out = fgrad.jit(lambda a: fnp.cos(a) * (i + 1000.5))(x)
            ok = np.allclose(out, np.cos(1.0) * (i + 1000.5))
        finally:
            os._exit(0 if ok else 1)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0, "the child computed a wrong value"
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            hung += 1
            break
        time.sleep(0.01)
stop = True
print("hung", hung, "of", forks)
"""


def _forks_while_compiling(tmp_path, forks, timeout):
    """The issue's repro, in a new process with an empty cache (its first
    compiles also import the compiler): a thread jits new functions while the
    main thread forks every 70 ms; each child jits a function of its own."""
    env = dict(os.environ, FGRAD_CACHE_DIR=str(tmp_path),
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", _FORKS, str(forks), str(timeout)], env=env,
                          capture_output=True, text=True, timeout=forks * (timeout + 5) + 120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["hung", "0", "of", str(forks)]


def test_fork_while_another_thread_compiles(tmp_path):
    _forks_while_compiling(tmp_path, forks=4, timeout=20)


@pytest.mark.slow
def test_fork_while_another_thread_compiles_many_times(tmp_path):
    _forks_while_compiling(tmp_path, forks=40, timeout=20)


def test_fork_while_a_thread_compiles_with_the_engine(cache):
    """The same at the engine: children forked while a thread is inside LLVM
    (parsing, optimising, linking) compile (checked by a watchdog)."""
    stop = threading.Event()
    errors = []

    def compile_forever():
        k = 0
        while not stop.is_set():
            k += 1
            try:
                engine.compile_module(kernel(1000.0 + k), ["scale"], cache=False)
            except Exception as e:      # pragma: no cover - reported below
                errors.append(e)
    t = threading.Thread(target=compile_forever)
    t.start()
    try:
        for i in range(4):
            time.sleep(0.07)
            pid = os.fork()
            if pid == 0:
                ok = False
                try:
                    cm = engine.compile_module(kernel(2000.0 + i), ["scale"], cache=False)
                    ok = np.array_equal(scaled(cm), (2000.0 + i) * np.arange(4.0))
                finally:
                    os._exit(0 if ok else 1)
            assert _wait(pid, 30) == 0
    finally:
        stop.set()
        t.join()
    assert not errors
