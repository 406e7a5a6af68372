"""cpu.lane_product, the runtime kernel of weight-gradient-shaped convolutions:
every tile shape and tail (rows as full tiles plus binary digits, columns in
blocks of 4, 2 and 1 vectors) against a float64 sum, with strided operands."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fgrad._src.cpu import blas, engine, lane_product

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(not blas.available(), reason="no native kernels")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m", [1, 5, 6, 7, 12, 13, 25])
@pytest.mark.parametrize("vectors", [1, 2, 3, 7])
def test_adds_the_products_to_c(dtype, m, vectors):
    lanes = lane_product.LANES[np.dtype(dtype)]
    n, rows, cols = vectors * lanes, 3, 5
    rng = np.random.default_rng(m * 10 + vectors)
    a = rng.standard_normal((m, rows, cols + 2)).astype(dtype)     # t stride 1, r stride 7
    b = rng.standard_normal((rows, 2 * cols, n)).astype(dtype)     # t stride 2n
    c = rng.standard_normal((m, n + lanes)).astype(dtype)          # row stride n + lanes
    want = c.astype(np.float64)
    want[:, :n] += np.einsum("irt,rtj->ij", a[:, :, :cols].astype(np.float64),
                             b[:, ::2].astype(np.float64))
    lane_product.function(dtype)(a.ctypes.data, rows * (cols + 2), cols + 2, 1,
                                 b.ctypes.data, 2 * cols * n, 2 * n, c.ctypes.data, n + lanes,
                                 m, n, rows, cols)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(c[:, n:], want[:, n:])     # beyond n: untouched


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_widest_tile_keeps_its_accumulators_in_registers(dtype):
    """Code generation alone (no IR passes: engine.CODEGEN_ONLY) makes the inner
    loop of the widest tile: per term, its vectors of b loaded once and one
    broadcast of a per row, MR·NV multiply-adds, nothing on the stack."""
    nv, mr = lane_product.TILES[0]
    asm = engine.optimized_asm(lane_product._emit(np.dtype(dtype)))
    loops = [block for block in re.split(r"^\.LBB\w+:", asm, flags=re.M)
             if len(re.findall(r"\bvfmadd\w+\s", block)) == nv * mr]
    assert loops, "no inner loop of the widest tile"
    body = loops[0]
    assert len(re.findall(r"\bvbroadcasts[sd]\s", body)) == mr
    assert len(re.findall(r"\bvmovup[sd]\s+-?\d*\(", body)) == nv
    assert "%rsp" not in body


_COLD = """
import json, threading, numpy as np, fgrad
from fgrad import lax
from fgrad._src.cpu import engine
compiled_on = []
compile_runtime = engine.compile_runtime
def recording(tag, *args, **kwargs):
    module = compile_runtime(tag, *args, **kwargs)
    if tag.startswith("lane product"):
        compiled_on.append((threading.current_thread().name, module.stats.cache_hit))
    return module
engine.compile_runtime = recording
rng = np.random.default_rng(0)
x = rng.standard_normal((16, 16, 8, 8)).astype(np.float32)
ct = rng.standard_normal((16, 32, 8, 8)).astype(np.float32)
w = np.zeros((32, 16, 3, 3), np.float32)
conv = lambda w: lax.conv_general_dilated(x, w, (1, 1), [(1, 1), (1, 1)])
out = fgrad.jit(lambda w, ct: fgrad.vjp(conv, w)[1](ct)[0])(w, ct)
print(np.asarray(out).tobytes().hex())
print(json.dumps(compiled_on))
"""


def test_a_cold_process_compiles_the_kernel_on_a_background_thread(tmp_path):
    """With an empty disk cache, a jitted weight gradient's kernel compiles on
    the prefetch thread while the program is planned; with it cached, the
    program's thread loads it; the same bits both times."""
    env = dict(os.environ, FGRAD_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    runs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", _COLD], env=env, timeout=300,
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        out, compiled_on = done.stdout.splitlines()[-2:]
        runs.append((out, json.loads(compiled_on)))
    assert runs[0][1] == [["fgrad lane product", False]]
    assert runs[1][1] == [["MainThread", True]]
    assert runs[0][0] == runs[1][0]
