"""Workload 5: trace + compile time.

The first call of a jitted element-wise chain (sin and a multiply by a constant,
alternating; one row with tanh instead of sin, whose code is inlined where sin's
is called) on 8 float32 elements: tracing, optimisation, code generation and a
negligible run. Every repeat changes the constant so that no cache can answer
(fgrad also gets an empty disk cache each time). Also: grad of grad of a 100-op
chain, and the first call in a fresh process, cold and with the disk cache a
previous process left (fgrad's object cache, JAX's persistent compilation cache);
the fresh-process rows exclude the time to import the library. Fresh processes
may write Python bytecode (PYTHONDONTWRITEBYTECODE is unset for them), as an
installed library has it: otherwise every fresh process would compile fgrad's
lazily imported modules from source, which JAX's wheel never has to.
"""
from common import FGRAD, PEER, Column, Section, Table, Timing, agree, guarded  # first: threads
import peers

import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import fgrad
import fgrad.numpy as fnp

NAME = "compile_time"
TITLE = "5. Trace + compile time (first call)"
CHAINS = (100, 1000, 5000)
FRESH_PROCESS_OPS = 1000
COLUMNS = [Column("fgrad jit", FGRAD), Column("jax.jit", PEER)]


def chain(m, ops, c, fn="sin"):
    def f(x):
        for _ in range(ops // 2):
            x = getattr(m, fn)(x) * c
        return x
    return f


def chain_numpy(x, ops, c, fn="sin"):
    for _ in range(ops // 2):
        x = getattr(np, fn)(x) * np.float32(c)
    return x


def _first_calls(make_jitted, expected_for, repeat):
    """Timing of the first call of `repeat` freshly built programs (constant k varies)."""
    times = []
    for k in range(repeat):
        c = 1.0 + 1e-4 * (k + 1)
        fn = make_jitted(c)
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
        agree("first call", out, expected_for(c), rtol=1e-4, atol=1e-5)
    return Timing(statistics.median(times), min(times), repeat, 1)


def _fgrad_first_call(build):
    """make(c) -> a thunk running build(c)() under a new, empty disk cache."""
    def with_empty_cache(c):
        with tempfile.TemporaryDirectory(prefix="fgrad-bench-cold-") as cache:
            os.environ["FGRAD_CACHE_DIR"] = cache
            return build(c)()
    return lambda c: lambda: with_empty_cache(c)


def _in_process_rows(quick):
    jax = peers.jax()
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    repeat = 2 if quick else 3
    rows = {}
    for ops, fn in [(n, "sin") for n in CHAINS] + [(1000, "tanh")]:
        expected = lambda c, ops=ops, fn=fn: chain_numpy(x, ops, c, fn)  # noqa: E731
        cells = {"fgrad jit": guarded(lambda: _first_calls(_fgrad_first_call(
            lambda c: lambda: fgrad.jit(chain(fnp, ops, c, fn))(x)), expected, repeat))}
        if jax is None:
            cells["jax.jit"] = peers.missing("jax")
        else:
            cells["jax.jit"] = guarded(lambda: _first_calls(
                lambda c: lambda: jax.jit(chain(jax.numpy, ops, c, fn))(x).block_until_ready(),
                expected, repeat))
        rows[f"{ops}-op chain" + ("" if fn == "sin" else f" of {fn}")] = cells

    s = np.float32(0.3)

    def second_derivative(c, ops=100):  # d²/ds² of the chain at s, by finite differences
        h = 1e-3
        f = lambda v: float(chain_numpy(np.float64(v), ops, c))  # noqa: E731
        return np.float32((f(s + h) - 2 * f(s) + f(s - h)) / h ** 2)

    cells = {"fgrad jit": guarded(lambda: _first_calls(_fgrad_first_call(
        lambda c: lambda: fgrad.jit(fgrad.grad(fgrad.grad(chain(fnp, 100, c))))(s)),
        second_derivative, repeat))}
    if jax is None:
        cells["jax.jit"] = peers.missing("jax")
    else:
        cells["jax.jit"] = guarded(lambda: _first_calls(
            lambda c: lambda: jax.jit(jax.grad(jax.grad(chain(jax.numpy, 100, c))))(
                s).block_until_ready(), second_derivative, repeat))
    rows["grad of grad, 100-op chain"] = cells
    return rows


_FRESH = {
    "fgrad jit": """
import time, numpy as np, fgrad, fgrad.numpy as m
jit = fgrad.jit
""",
    "jax.jit": """
import time, numpy as np, jax, jax.numpy as m
jax.config.update("jax_platforms", "cpu")
jax.config.update("jax_compilation_cache_dir", {cache!r})
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
jit = lambda f: (lambda x: jax.jit(f)(x).block_until_ready())
""",
}
_FRESH_BODY = """
def f(x):
    for _ in range({ops} // 2):
        x = m.sin(x) * 1.0001
    return x
x = np.linspace(-1, 1, 8, dtype=np.float32)
start = time.perf_counter()
jit(f)(x)
print(time.perf_counter() - start)
"""


def _fresh_process(lib, cache, runs):
    code = _FRESH[lib].format(cache=cache) + _FRESH_BODY.format(ops=FRESH_PROCESS_OPS)
    env = dict(os.environ, FGRAD_CACHE_DIR=cache)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    times = []
    for _ in range(runs):
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True, timeout=300)
        if done.returncode:
            raise RuntimeError(done.stderr.strip().splitlines()[-1])
        times.append(float(done.stdout.strip().splitlines()[-1]))
    return Timing(statistics.median(times), min(times), runs, 1)


def _fresh_process_rows(quick):
    runs = 1 if quick else 2
    cold, warm = {}, {}
    for lib in ("fgrad jit", "jax.jit"):
        if lib == "jax.jit" and peers.jax() is None:
            cold[lib] = warm[lib] = peers.missing("jax")
            continue
        with tempfile.TemporaryDirectory(prefix="bench-cache-") as cache:
            cold[lib] = guarded(lambda: _fresh_process(lib, cache, 1))  # fills the cache
            warm[lib] = guarded(lambda: _fresh_process(lib, cache, runs))
    return {f"{FRESH_PROCESS_OPS}-op chain, fresh process, cold": cold,
            f"{FRESH_PROCESS_OPS}-op chain, fresh process, from the disk cache": warm}


def run(quick=False):
    table = Table(TITLE, COLUMNS, short="5 compile", note=(
        "Time of the first call: tracing + compilation (+ a run on 8 elements). JAX's rows "
        "include lowering to XLA and XLA's compilation; its disk cache is the persistent "
        "compilation cache (`jax_compilation_cache_dir`, thresholds set to 0)."))
    saved = os.environ.get("FGRAD_CACHE_DIR")
    try:
        rows = _in_process_rows(quick)
    finally:
        if saved is None:
            os.environ.pop("FGRAD_CACHE_DIR", None)
        else:
            os.environ["FGRAD_CACHE_DIR"] = saved
    rows.update(_fresh_process_rows(quick))
    for case, cells in rows.items():
        table.add(case, cells)
    return Section(TITLE, [table], [
        "In-process rows: a new function and constant per repeat (median and min of 3 first "
        "calls; fgrad with an empty disk cache each time). Fresh-process rows: one cold run "
        "fills the cache, then the median and min of 2 runs read it.",
        "Every first call's result was checked against NumPy (the grad-of-grad row against "
        "central second differences)."])


if __name__ == "__main__":
    import common
    common.main_for(run, TITLE)
