"""Programs found in the disk cache by their fingerprint (jit/fingerprint.py): a
new process runs a cached program without emitting IR or loading LLVM, and the
fingerprint tells apart every difference that changes the compiled code."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad._src.compiler.simplify import simplify
from fgrad._src.cpu import engine
from fgrad._src.jit.fingerprint import fingerprint

REPO = Path(__file__).resolve().parent.parent

PROGRAM = """
import sys, numpy as np, fgrad, fgrad.numpy as fnp
f = fgrad.jit(lambda x, y: fnp.tanh(x @ y).sum(axis=0) * 2.0 + fnp.sin(x[0]))
x = np.linspace(-1, 1, 12).reshape(3, 4).astype(np.float32)
y = np.linspace(0, 1, 16).reshape(4, 4).astype(np.float32)
out = np.asarray(f(x, y))
loaded = [m for m in ("llvmlite.ir", "llvmlite.binding") if m in sys.modules]
print(out.tolist(), loaded, "define" in f.lower(x, y).as_text())
"""


def _run(cache):
    env = dict(os.environ, FGRAD_CACHE_DIR=str(cache),
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().rsplit(" ", 1)[0], done.stdout.split()[-1]


def test_new_process_runs_a_cached_program_without_emitting_ir(tmp_path):
    if engine._linker() is None:
        pytest.skip("no system linker: cached code is loaded by MCJIT")
    first, first_text = _run(tmp_path)
    assert "['llvmlite.ir', 'llvmlite.binding']" in first and first_text == "True"
    second, second_text = _run(tmp_path)
    values = first.split("]", 1)[0]
    assert second.startswith(values) and second.endswith("[]")   # neither was imported
    assert second_text == "True"      # as_text still shows the IR (emitted on demand)
    assert list((tmp_path / "cpu").glob("*.alias"))


def test_the_thread_count_is_in_the_programs_key(monkeypatch):
    """How gemms are cut into parts for the workers (blas.parts_of) depends on the
    thread count, so a program cached under one count is not reused under another."""
    from fgrad._src.cpu import threads
    from fgrad._src.jit import executable
    keys = []
    monkeypatch.setattr(executable, "fingerprint",
                        lambda *a: keys.append(fingerprint(*a)) or keys[-1])
    x = np.ones((8, 8), np.float32)
    for n in (1, 2, 2):
        monkeypatch.setattr(threads, "split_threads", lambda n=n: n)
        fgrad.jit(lambda x: x @ x * 2.0)(x)
    assert keys[0] is not None and keys[0] != keys[1] == keys[2]


def _closed(f, *args):
    return simplify(fgrad.jit(f).lower(*args).jaxpr)


def test_fingerprint_tells_programs_apart():
    x = np.ones((3, 4), np.float32)
    base = fingerprint(_closed(lambda x: (x * 2.0).sum(axis=0), x), "f", (), False)
    same = fingerprint(_closed(lambda x: (x * 2.0).sum(axis=0), x), "f", (), False)
    assert base is not None and base == same
    others = [
        fingerprint(_closed(lambda x: (x * 3.0).sum(axis=0), x), "f", (), False),  # literal
        fingerprint(_closed(lambda x: (x * 2.0).sum(axis=1), x), "f", (), False),  # param
        fingerprint(_closed(lambda x: (x * 2.0).sum(axis=0), x.T), "f", (), False),  # shape
        fingerprint(_closed(lambda x: (x * 2.0).sum(axis=0), x.astype(np.float64)),
                    "f", (), False),                                            # dtype
        fingerprint(_closed(lambda x: (x * 2.0).sum(axis=0), x), "g", (), False),  # name
        fingerprint(_closed(lambda x: (x * 2.0).sum(axis=0), x), "f", (0,), False),  # donation
        fingerprint(_closed(lambda x: (x * 2.0).sum(axis=0), x), "f", (), True),   # flush
    ]
    assert len({base, *others}) == len(others) + 1
    c1, c2 = np.arange(4.0, dtype=np.float32), np.arange(4.0, dtype=np.float32)[::-1]
    k1 = fingerprint(_closed(lambda x: x * fnp.asarray(c1), x), "f")
    k2 = fingerprint(_closed(lambda x: x * fnp.asarray(c2.copy()), x), "f")
    assert k1 != k2                                                      # constant values


def test_fingerprint_tells_apart_what_follows_a_literal():
    """An array's bytes go into the fingerprint between texts: the equations,
    operands and types after a literal count as much as those before it."""
    x = np.ones((3, 4), np.float32)
    variants = [lambda x: (x * 2.0 + x).sum(axis=0), lambda x: (x * 2.0 - x).sum(axis=0),
                lambda x: (x * 2.0 + x).max(axis=0), lambda x: (x * 2.0 + x * x).sum(axis=0)]
    keys = [fingerprint(_closed(f, x), "f") for f in variants]
    assert None not in keys and len(set(keys)) == len(keys)


def test_programs_with_callbacks_have_no_fingerprint():
    x = np.ones(3, np.float32)
    closed = _closed(lambda x: fgrad.debug.callback(lambda v: None, x) or x * 2, x)
    assert any(e.primitive.name == "debug_callback" for e in closed.jaxpr.eqns)
    assert fingerprint(closed, "f") is None
    f = fgrad.jit(lambda x: fgrad.debug.callback(lambda v: None, x) or x * 2)
    np.testing.assert_array_equal(f(x), 2 * x)      # still compiles and runs


def test_cached_code_is_reused_only_for_the_same_tables(tmp_path, monkeypatch):
    """A program found by its fingerprint must also agree on what goes in each
    native entry's table (planning could order arrays differently)."""
    from fgrad._src.cpu import fused
    from fgrad._src.jit import executable
    monkeypatch.setenv("FGRAD_CACHE_DIR", str(tmp_path))
    emitted = []
    emit = fused.emit_module
    monkeypatch.setattr(fused, "emit_module", lambda *a, **k: emitted.append(1) or emit(*a, **k))
    x, y = np.linspace(0, 1, 5), np.linspace(1, 2, 5)

    def f(x, y):
        return fnp.exp(x) * y + 1.0
    np.testing.assert_allclose(fgrad.jit(f)(x, y), np.exp(x) * y + 1)
    np.testing.assert_allclose(fgrad.jit(f)(x, y), np.exp(x) * y + 1)  # traced again
    assert len(emitted) == 1                                           # found by alias
    names = executable._canonical_names
    monkeypatch.setattr(executable, "_canonical_names",
                        lambda *a: (lambda v, name=names(*a): f"other {name(v)}"))
    np.testing.assert_allclose(fgrad.jit(f)(x, y), np.exp(x) * y + 1)
    assert len(emitted) == 2


def test_no_fingerprints_without_sources_to_read(monkeypatch):
    """Installed without its .py files, fgrad cannot tell its compiler versions
    apart, so it looks nothing up by fingerprint."""
    from fgrad._src.jit import fingerprint as fp
    x = np.ones(3, np.float32)
    closed = _closed(lambda x: x * 2.0, x)
    assert fingerprint(closed, "f") is not None
    monkeypatch.setattr(fp, "source_digest", lambda: None)
    assert fp.fingerprint(closed, "f") is None


def test_cached_code_is_reused_only_for_the_same_split(tmp_path, monkeypatch):
    """Code compiled while kernels split differently (SPLIT_WORK changed) has other
    tables: it is not reused."""
    from fgrad._src.cpu import fused, pool, threads
    if not pool.supported() or threads.num_threads() < 2:
        pytest.skip("native workers need x86-64 Linux and 2 CPUs")
    monkeypatch.setenv("FGRAD_CACHE_DIR", str(tmp_path))
    emitted = []
    emit = fused.emit_module
    monkeypatch.setattr(fused, "emit_module", lambda *a, **k: emitted.append(1) or emit(*a, **k))
    x, b = np.linspace(0, 1, 1000), np.ones((3, 3))

    def f(x, b):
        return fnp.exp(x) * 2.0 + 1.0, b @ b
    monkeypatch.setattr(fused, "SPLIT_WORK", 0)
    for _ in range(2):
        np.testing.assert_allclose(fgrad.jit(f)(x, b)[0], np.exp(x) * 2 + 1)
    assert len(emitted) == 1                                   # found by alias
    monkeypatch.setattr(fused, "SPLIT_WORK", 10 ** 9)
    for _ in range(2):
        np.testing.assert_allclose(fgrad.jit(f)(x, b)[0], np.exp(x) * 2 + 1)
    assert len(emitted) == 2 and "split" not in fgrad.jit(f).lower(x, b).as_text()
