"""Workload 10: the real FFT of 2^20 float32 samples (fgrad.numpy.fft.rfft).

fgrad's fft primitive runs SciPy's pocketfft (scipy.fft), eagerly and as one
step of a jitted program, so scipy.fft is its limit: the target is within 1.2×
of it. NumPy's own pocketfft computes float32 without SIMD (it is slower);
jax.jit calls XLA's DUCC FFT, torch its pocketfft/MKL.
"""
from common import FGRAD, LIMIT, PEER, Column, Section, Table, budget, measure  # first: threads
import peers

import numpy as np

import fgrad
import fgrad.numpy as fnp

NAME = "fft"
TITLE = "10. FFT: rfft of 2^20 float32 samples"
N = 1 << 20
COLUMNS = [Column("NumPy", PEER), Column("fgrad eager", FGRAD), Column("fgrad jit", FGRAD),
           Column("jax.jit", PEER), Column("torch", PEER), Column("scipy.fft", LIMIT)]


def _row(quick):
    import scipy.fft
    x = np.random.default_rng(0).standard_normal(N).astype(np.float32)
    expected = np.fft.rfft(x.astype(np.float64))
    repeat, budget_s = budget(quick, 1.0)
    # float32 transforms of unit normals: errors ~1e-7 * sqrt(N) * log2(N) per frequency
    check = dict(expected=expected, rtol=1e-4, atol=2e-3, repeat=repeat, budget_s=budget_s)
    cells = {"NumPy": measure("NumPy", lambda: np.fft.rfft(x), **check),
             "scipy.fft": measure("scipy.fft", lambda: scipy.fft.rfft(x), **check)}
    xf = fnp.asarray(x)
    cells["fgrad eager"] = measure("fgrad eager", lambda: fnp.fft.rfft(xf), **check)
    f = fgrad.jit(fnp.fft.rfft)
    cells["fgrad jit"] = measure("fgrad jit", lambda: f(x), **check)

    jax = peers.jax()
    if jax is None:
        cells["jax.jit"] = peers.missing("jax")
    else:
        jf = jax.jit(jax.numpy.fft.rfft)
        jx = jax.device_put(x)
        cells["jax.jit"] = measure("jax.jit", lambda: jf(jx).block_until_ready(), **check)

    torch = peers.torch()
    if torch is None:
        cells["torch"] = peers.missing("torch")
    else:
        tx = torch.from_numpy(x)
        cells["torch"] = measure("torch", lambda: torch.fft.rfft(tx), **check)
    return cells


def run(quick=False):
    table = Table(TITLE, COLUMNS, short="10 rfft 2^20 f32", note=(
        "complex64 results, checked against NumPy's float64 transform (rtol 1e-4, "
        "atol 2e-3; the largest magnitudes are about 1e3). scipy.fft is the limit: "
        "fgrad calls it."))
    table.add(f"N = 2^20 = {N:,}", _row(quick))
    return Section(TITLE, [table], [
        "fgrad's jitted rfft is one step that calls scipy.fft (as_text: "
        "'numpy:fft (calls scipy.fft (pocketfft))'): pocketfft has no C entry point a "
        "native kernel could call."])


if __name__ == "__main__":
    import common
    common.main_for(run, TITLE)
