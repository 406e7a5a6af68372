"""Memory that jitted functions hold is given back: dropping a function (or
clearing its cache) frees its programs, their constants and their native code;
in-memory caches stay within `config.jit_cache_size`. Checked by weak references
to the constants, by the libraries mapped into the process and by the resident
set size of a fresh process."""
import gc
import os
import subprocess
import sys
import textwrap
import weakref

import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad import lax

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _mapped_libraries():
    """The paths of fgrad's libraries mapped into this process (each load has its
    own)."""
    with open("/proc/self/maps") as f:
        return {line.split(None, 5)[5].split(" (deleted)")[0].strip()
                for line in f if "fgrad-lib-" in line}


@pytest.fixture
def small_cache():
    old = fgrad.config.jit_cache_size
    fgrad.config.update("jit_cache_size", 4)
    yield
    fgrad.config.update("jit_cache_size", old)


def _constant(n, value):
    """An fgrad Array constant and a weak reference to the memory it holds (what a
    program that closes over it keeps, copy or not)."""
    w = fnp.asarray(np.full(n, value, np.float32))
    return w, weakref.ref(w._value)


# Each builds a jitted computation closing over the constant w, and its input.
X = np.linspace(0.1, 1.0, 64).astype(np.float32)
PROGRAMS = {
    "plain": lambda w: (fgrad.jit(lambda x: fnp.sin(x) + w), X),
    "grad_of_jit": lambda w: (fgrad.grad(fgrad.jit(lambda x: fnp.sum(fnp.sin(x) * w))), X),
    "jit_of_grad": lambda w: (fgrad.jit(fgrad.grad(lambda x: fnp.sum(fnp.sin(x) * w))), X),
    "vmap_of_jit": lambda w: (fgrad.jit(fgrad.vmap(fgrad.jit(lambda x: fnp.sin(x) * w))),
                              np.stack([X, X])),
    "fori_loop": lambda w: (fgrad.jit(lambda x: lax.fori_loop(
        0, 5, lambda i, c: c * 0.5 + w, x)), X),
    "while_loop": lambda w: (fgrad.jit(lambda x: lax.while_loop(
        lambda c: c[0] < 4, lambda c: (c[0] + 1, c[1] * w), (0, x))[1]), X),
    "scan": lambda w: (fgrad.jit(lambda x: lax.scan(lambda c, r: (c + r * w, c), x,
                                                    fnp.stack([x, x]))[0]), X),
    "grad_of_scan": lambda w: (fgrad.jit(fgrad.grad(lambda x: fnp.sum(lax.scan(
        lambda c, r: (fnp.sin(c) * w + r, c), x, fnp.stack([x, x]))[0]))), X),
}


@pytest.mark.parametrize("kind", sorted(PROGRAMS))
def test_dropping_a_jitted_function_frees_its_constants(kind):
    w, alive = _constant(64, 1.5)
    f, x = PROGRAMS[kind](w)
    for _ in range(3):          # the third call runs through the native call path
        f(x)
    del w
    gc.collect()
    assert alive() is not None   # the program holds it (else this test shows nothing)
    del f
    gc.collect()
    assert alive() is None, f"{kind}: a dropped jitted function still holds its constant"


def test_clear_cache_frees_the_programs():
    x = np.ones(32, np.float32)
    w, alive = _constant(32, 2.0)
    box = [w]
    del w
    f = fgrad.jit(lambda x: fnp.sin(x) + box.pop())   # only the program keeps the value
    f(x)
    f(x)
    gc.collect()
    assert alive() is not None
    f.clear_cache()
    gc.collect()
    assert alive() is None, "clear_cache() left the program's constant alive"
    assert f.cache_info().entries == 0


def test_the_cache_of_a_function_is_bounded(small_cache):
    x = np.arange(8, dtype=np.float32)
    constants = []

    def scaled(x, k):
        c, alive = _constant(8, float(k))
        constants.append(alive)
        return x * c

    f = fgrad.jit(scaled, static_argnums=1)
    for k in range(10):
        np.testing.assert_array_equal(f(x, k), x * k)
        np.testing.assert_array_equal(f(x, k), x * k)
    assert f.cache_info().entries == 4
    gc.collect()
    assert [c() is not None for c in constants] == [False] * 6 + [True] * 4
    # an evicted program is traced and compiled again
    np.testing.assert_array_equal(f(x, 0), x * 0)
    assert f.cache_info().misses == 11


def test_the_most_recently_used_programs_stay(small_cache):
    x = np.arange(4, dtype=np.float32)
    f = fgrad.jit(lambda x, k: x + k, static_argnums=1)
    for k in range(4):
        f(x, k)
    for _ in range(3):
        f(x, 0)                      # 0 is now the most recent (served natively, too)
    f(x, 9)                          # evicts the least recent: 1
    misses = f.cache_info().misses
    f(x, 0)
    assert f.cache_info().misses == misses
    f(x, 1)
    assert f.cache_info().misses == misses + 1


def test_derived_programs_are_bounded(small_cache):
    g = fgrad.jit(lambda x: fnp.sin(x) * 2.0)
    g(np.ones(3, np.float32))
    for n in range(1, 10):           # a vmapped program per batch size
        fgrad.vmap(g)(np.ones((n, 3), np.float32))
    inner = next(iter(g._cache.values())).jaxpr
    assert len(inner._derived) <= 4


def test_cache_size_setting_is_checked():
    with pytest.raises(ValueError, match="jit_cache_size must be a positive int"):
        fgrad.config.update("jit_cache_size", 0)
    with pytest.raises(ValueError, match="jit_cache_size"):
        fgrad.config.update("jit_cache_size", 2.5)


def _module(f):
    """The CompiledModule of a jitted function's (only) program."""
    exe = next(iter(f._cache.values())).executable
    return next(k.fn.module for k in exe.calls if hasattr(k.fn, "module"))


def _shared_library_used(f):
    return _module(f).stats.shared_library


def test_native_code_is_unloaded_and_shared():
    x = np.ones(16, np.float32)
    warm = fgrad.jit(lambda x: x * 3.0)     # the run-time code of native calls: loaded for good
    for _ in range(3):
        warm(x)
    base = _mapped_libraries()
    fs = [fgrad.jit(lambda x, k=k: fnp.sin(x) * k + 0.25) for k in (2.0, 3.0, 4.0)]
    for f in fs:
        f(x)
        f(x)
    if not _shared_library_used(fs[0]):
        pytest.skip("no linker here: programs are loaded by MCJIT, not as libraries")
    loaded = _mapped_libraries() - base
    assert len(loaded) == 3
    # the same program jitted afresh maps no second copy
    again = fgrad.jit(lambda x, k=3.0: fnp.sin(x) * k + 0.25)
    expected = np.asarray(fs[1](x))
    np.testing.assert_array_equal(again(x), expected)
    assert _mapped_libraries() - base == loaded
    del fs, f
    gc.collect()
    assert len(_mapped_libraries() - base) == 1      # `again`'s, shared with a dropped one
    np.testing.assert_array_equal(again(x), expected)      # still runs
    del again
    gc.collect()
    assert not _mapped_libraries() - base, "dropped programs' libraries are still mapped"


_RSS_SCRIPT = """
import gc, os, sys
import numpy as np
import fgrad, fgrad.numpy as fnp
from fgrad import lax

def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

n, size, rounds = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
x = np.ones(size, np.float32)
start = None
for r in range(rounds):
    for i in range(n):
        w = np.full(size, float(i), np.float32)
        if i % 2:
            f = fgrad.jit(lambda x: fnp.sin(x) + w)
        else:
            f = fgrad.jit(lambda x: lax.fori_loop(0, 3, lambda j, c: c * 0.5 + w, x))
        f(x); f(x); f(x)
        del f, w
    gc.collect()
    if start is None:
        start = rss_mb()
print(start, rss_mb())
"""


def _rss_growth(n, size, rounds):
    """(RSS after the first round, after the last) in MB, in a fresh process that
    jits and drops n functions per round, each closing over `size` float32s."""
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(_RSS_SCRIPT), str(n),
                           str(size), str(rounds)], capture_output=True, text=True,
                          timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    first, last = map(float, done.stdout.split())
    return first, last


def test_rss_stays_bounded_when_jitted_functions_are_dropped():
    # 3 rounds of 10 functions with 8 MB constants each: 240 MB if they leaked
    first, last = _rss_growth(10, 2 << 20, 3)
    assert last - first < 40, f"RSS grew from {first:.0f} MB to {last:.0f} MB"


@pytest.mark.slow
def test_rss_stays_bounded_over_thousands_of_jitted_functions():
    # 2000 small functions a round: programs, libraries and caches must all go
    first, last = _rss_growth(2000, 256, 3)
    assert last - first < 30, f"RSS grew from {first:.0f} MB to {last:.0f} MB"


def test_mcjit_engines_are_freed(monkeypatch):
    from fgrad._src.cpu import engine
    if engine._linker() is not None:        # load programs by MCJIT, as without a linker
        monkeypatch.setattr(engine, "_broken_linkers", {engine._linker()})
    x = np.ones(16, np.float32)
    alive = []
    for k in (5.0, 6.0):
        f = fgrad.jit(lambda x, k=k: fnp.cos(x) * k - 0.75)
        f(x)
        f(x)
        assert not _shared_library_used(f)
        alive.append(weakref.ref(_module(f)._code))
    del f
    gc.collect()
    assert [a() for a in alive] == [None, None], "dropped programs' MCJIT engines are alive"
