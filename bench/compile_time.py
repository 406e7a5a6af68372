"""Workload 5: trace + compile time.

The first call of a jitted element-wise chain (sin and a multiply by a constant,
alternating; one row with tanh instead of sin, whose code is inlined where sin's
is called) on 8 float32 elements: tracing, optimisation, code generation and a
negligible run. Every repeat changes the constant so that no cache can answer
(fgrad also gets an empty disk cache each time); one-time costs of the process
(loading LLVM, fgrad's shared math code, JAX's first dispatch) are paid by a
small program first. Also: grad of grad of a 100-op
chain, and the first call in a fresh process, cold and with the disk cache a
previous process left (fgrad's object cache, JAX's persistent compilation cache);
and two programs that move many small arrays: `image_grid` (tiling n*n 28x28
images, from JAX's mnist_vae example) at 3x3, 5x5 and 10x10, and that example's
`evaluate` (bench/vae_evaluate.py: an ELBO on 1,000 images, 100 sampled images
tiled 10x10);
the fresh-process rows exclude the time to import the library. Fresh processes
may write Python bytecode (PYTHONDONTWRITEBYTECODE is unset for them), as an
installed library has it: otherwise every fresh process would compile fgrad's
lazily imported modules from source, which JAX's wheel never has to.
"""
from common import FGRAD, PEER, Column, Section, Table, Timing, agree, guarded  # first: threads
import peers

import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import fgrad
import fgrad.numpy as fnp
import vae_evaluate

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
    # one-time costs (LLVM and the math library set-up, JAX's first dispatch) first,
    # as in control_flow: these rows time one program's trace and compile
    fgrad.jit(chain(fnp, 4, 1.0))(x)
    if jax is not None:
        jax.jit(chain(jax.numpy, 4, 1.0))(x).block_until_ready()
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
    rows.update(_image_grid_rows(jax, repeat))
    rows["mnist_vae `evaluate`"] = _vae_row(jax, 1 if quick else 2)
    return rows


def _image_grid_rows(jax, repeat):
    """First call of jit(image_grid) on (n*n, 784) float32 (its input scaled by the
    varying constant, so that no cache can answer)."""
    rows = {}
    for n in (3, 5, 10):
        x = np.random.default_rng(n).random((n * n, 784), dtype=np.float32)

        def grid(m, c, n=n):
            return lambda v: vae_evaluate.image_grid(m, n, n, v * c, (28, 28))
        expected = lambda c, n=n, x=x: grid(np, np.float32(c))(x)  # noqa: E731
        cells = {"fgrad jit": guarded(lambda: _first_calls(_fgrad_first_call(
            lambda c: lambda: fgrad.jit(grid(fnp, c))(x)), expected, repeat))}
        if jax is None:
            cells["jax.jit"] = peers.missing("jax")
        else:
            cells["jax.jit"] = guarded(lambda: _first_calls(
                lambda c: lambda: jax.jit(grid(jax.numpy, c))(x).block_until_ready(),
                expected, repeat))
        rows[f"image_grid {n}x{n}"] = cells
    return rows


def _vae_row(jax, repeat):
    """First call of the VAE's jitted `evaluate`, each library checked against its
    own eager run (their random streams differ)."""
    params, images = vae_evaluate.init_params(), vae_evaluate.test_images()

    def first_calls(make_evaluate, key, jit, cold):
        eager = make_evaluate()(params, images, key)
        times = []
        for _ in range(repeat):
            with cold():
                jitted = jit(make_evaluate())
                start = time.perf_counter()
                out = jitted(params, images, key)
                times.append(time.perf_counter() - start)
            agree("evaluate", out, eager, rtol=1e-4, atol=1e-3)
        return Timing(statistics.median(times), min(times), repeat, 1)

    @contextlib.contextmanager
    def fgrad_cold_cache():
        with tempfile.TemporaryDirectory(prefix="fgrad-bench-cold-") as cache:
            os.environ["FGRAD_CACHE_DIR"] = cache
            yield

    @contextlib.contextmanager
    def jax_cold_caches():
        jax.clear_caches()
        yield

    import fgrad.nn
    import fgrad.random
    cells = {"fgrad jit": guarded(lambda: first_calls(
        lambda: vae_evaluate.make_evaluate(fnp, fgrad.random, fgrad.nn.softplus),
        fgrad.random.PRNGKey(0), fgrad.jit, fgrad_cold_cache))}
    if jax is None:
        cells["jax.jit"] = peers.missing("jax")
    else:
        def jax_jit(f):
            jitted = jax.jit(f)
            return lambda *a: jax.block_until_ready(jitted(*a))
        cells["jax.jit"] = guarded(lambda: first_calls(
            lambda: vae_evaluate.make_evaluate(jax.numpy, jax.random, jax.nn.softplus),
            jax.random.PRNGKey(0), jax_jit, jax_cold_caches))
    return cells


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
