"""The linear-algebra primitives lowered to native LAPACK calls
(fgrad/_src/cpu/lapack.py) against their eager impls, bit for bit: every
primitive and parameter, float32/64 and complex64/128, batched and unbatched, odd
shapes (m < n, m > n, one row or column, 1x1, an empty batch), failures
(matrices that are not positive definite, singular ones, NaN); the labels
as_text shows; what stays a NumPy step; derivative programs and native loops
calling them; memory (workspaces freed, programs unloaded)."""
import gc
import os
import subprocess
import sys
import textwrap
import weakref

import numpy as np
import optree
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad import jit, lax
from fgrad._src.cpu import fused, lapack
from fgrad._src.jit.primitive import compile_jaxpr
from fgrad._src.lax import linalg

# NaN-filled results and singular solves on purpose
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


def _labels(f, *args):
    return [k.label for k in compile_jaxpr(jit(f).lower(*args).jaxpr, "f").kernels]


def _assert_same_bits(got, want, what=""):
    got, want = optree.tree_leaves(got), optree.tree_leaves(want)
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, (what, k, g.shape, w.shape)
        assert np.array_equal(np.ascontiguousarray(g).view(np.uint8),
                              np.ascontiguousarray(w).view(np.uint8)), \
            f"{what} output {k}: jit differs from eager by {np.nanmax(np.abs(g - w))}"


def _check(f, *args, native):
    """jit(f) gives eager f's bits and runs every one of `native` (primitive names)
    as a native step calling LAPACK/BLAS, none as a NumPy step."""
    labels = _labels(f, *args)
    for name in native:
        assert any(label.startswith(f"native:{name} (") and ("LAPACK" in label or "BLAS" in label)
                   for label in labels), (name, labels)
    assert not [label for label in labels if label.startswith("numpy:")], labels
    _assert_same_bits(jit(f)(*args), f(*args), native)


def _random(rng, shape, dt):
    a = rng.standard_normal(shape)
    return (a + 1j * rng.standard_normal(shape) if np.dtype(dt).kind == "c" else a).astype(dt)


def _spd(rng, shape, dt):
    a = _random(rng, shape, dt)
    return (a @ np.conj(np.swapaxes(a, -1, -2)) + shape[-1] * np.eye(shape[-1])).astype(dt)


# (sizes from 8 up are copied in 8x8 blocks, with ragged edges)
SQUARE = [(1, 1), (2, 3, 4, 4), (2, 17, 17), (0, 4, 4)]
RECTANGULAR = [(1, 1), (3, 5), (5, 3), (4, 1), (2, 19, 11), (0, 3, 2)]


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape", SQUARE)
def test_cholesky_and_eigh(dt, shape):
    rng = np.random.default_rng(0)
    a = _spd(rng, shape, dt)
    if a.size:
        a[(0,) * (a.ndim - 2)] += _random(rng, shape[-2:], dt)      # not Hermitian
    _check(lambda a: (linalg.cholesky(a), linalg.eigh(a, lower=True),
                      linalg.eigh(a, lower=False)), a, native=["cholesky", "eigh"])


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape", RECTANGULAR)
def test_lu_qr_svd(dt, shape):
    a = _random(np.random.default_rng(1), shape, dt)

    def f(a):
        return (linalg.lu(a), linalg.qr(a, full_matrices=True), linalg.qr(a, full_matrices=False),
                linalg.svd(a, full_matrices=True), linalg.svd(a, full_matrices=False),
                linalg.svd(a, compute_uv=False))
    _check(f, a, native=["lu", "qr", "svd"])


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (3, 5, 5), (2, 9, 9), (0, 3, 3)])
def test_eig(dt, shape):
    """Real matrices' complex pairs are assembled as NumPy does it, signs of zeros
    included (exact zeros: a rotation's eigenvectors); an inf gives NaN outputs."""
    rng = np.random.default_rng(8)
    a = _random(rng, shape, dt)
    if len(shape) == 3 and shape[0] == 3:
        a[1] = 0
        a[1, 0, 1], a[1, 1, 0] = -1, 1            # eigenvalues +-i, vectors with zeros
        a[2, 0, 0] = np.inf

    def f(a):
        return [linalg.eig(a, compute_left_eigenvectors=vectors,
                           compute_right_eigenvectors=vectors) for vectors in (False, True)]
    _check(f, a, native=["eig"])


@pytest.mark.parametrize("dt", DTYPES)
def test_triangular_solve_every_flag(dt):
    rng = np.random.default_rng(2)
    a = (_random(rng, (2, 5, 5), dt) + 4 * np.eye(5)).astype(dt)
    b_left, b_right = _random(rng, (2, 5, 3), dt), _random(rng, (2, 3, 5), dt)
    flags = [dict(left_side=s, lower=lo, transpose_a=t, conjugate_a=c, unit_diagonal=t == lo)
             for s in (True, False) for lo in (True, False) for t in (False, True)
             for c in ((False, True) if np.dtype(dt).kind == "c" else (False,))]

    def f(a, b_left, b_right):
        return [linalg.triangular_solve(a, b_left if p["left_side"] else b_right, **p)
                for p in flags]
    _check(f, a, b_left, b_right, native=["triangular_solve"])


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape", SQUARE)
def test_inv_is_one_native_step_with_eager_bits(dt, shape):
    rng = np.random.default_rng(5)
    a = (_random(rng, shape, dt) + 3 * np.eye(shape[-1])).astype(dt)
    _check(linalg.inv, a, native=["inv"])
    if a.size:
        p = {"float32": "s", "float64": "d", "complex64": "c", "complex128": "z"}[
            np.dtype(dt).name]
        assert f"native:inv (LAPACK {p}getrf, {p}getri)" in jit(linalg.inv).lower(a).as_text()
    tol = 1e-4 if np.dtype(dt) in (np.float32, np.complex64) else 1e-12
    if a.size:
        np.testing.assert_allclose(np.asarray(fnp.linalg.inv(a)), np.linalg.inv(a), rtol=tol,
                                   atol=tol)


def test_inv_of_a_singular_matrix_is_nan_in_eager_and_jit():
    a = np.stack([np.ones((3, 3)), 2 * np.eye(3)])
    for got in (linalg.inv(a), jit(linalg.inv)(a)):
        got = np.asarray(got)
        assert np.isnan(got[0]).all()
        np.testing.assert_array_equal(got[1], 0.5 * np.eye(3))


@pytest.mark.parametrize("dt", DTYPES)
def test_triangular_solve_every_flag_matches_numpy(dt):
    """The transposed formulation (trsm on the row-major operands read column-major:
    other side, other triangle) solves the asked system, eager and jit."""
    rng = np.random.default_rng(4)
    a = (_random(rng, (2, 5, 5), dt) + 4 * np.eye(5)).astype(dt)
    tol = 1e-4 if np.dtype(dt) in (np.float32, np.complex64) else 1e-11
    for s in (True, False):
        b = _random(rng, (2, 5, 3) if s else (2, 3, 5), dt)
        for lo in (True, False):
            for t in (False, True):
                for c in (False, True):
                    for unit in (False, True):
                        kw = dict(left_side=s, lower=lo, transpose_a=t, conjugate_a=c,
                                  unit_diagonal=unit)
                        tri = np.tril(a) if lo else np.triu(a)
                        if unit:
                            tri = tri * (1 - np.eye(5)) + np.eye(5)
                        op = np.conj(tri) if c else tri
                        op = np.swapaxes(op, -1, -2) if t else op
                        want = (np.linalg.solve(op, b) if s else np.swapaxes(np.linalg.solve(
                            np.swapaxes(op, -1, -2), np.swapaxes(b, -1, -2)), -1, -2))
                        for got in (linalg.triangular_solve(a, b, **kw),
                                    jit(lambda a, b: linalg.triangular_solve(a, b, **kw))(a, b)):
                            np.testing.assert_allclose(np.asarray(got), want, rtol=tol,
                                                       atol=tol, err_msg=str(kw))


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("a_shape,b_shape", [((1, 1), (1, 1)), ((4, 4), (4, 1)),
                                             ((1, 1), (1, 6)), ((3, 6, 6), (3, 6, 2)),
                                             ((2, 9, 9), (2, 9, 16)),
                                             ((0, 3, 3), (0, 3, 2))])
def test_triangular_solve_shapes(dt, a_shape, b_shape):
    rng = np.random.default_rng(3)
    a = (_random(rng, a_shape, dt) + 3 * np.eye(a_shape[-1])).astype(dt)
    b = _random(rng, b_shape, dt)
    _check(lambda a, b: linalg.triangular_solve(a, b, left_side=True, lower=True,
                                                transpose_a=True), a, b,
           native=["triangular_solve"])


@pytest.mark.parametrize("dt", [np.float64, np.complex64])
def test_failures_agree_with_eager(dt):
    """A matrix that is not positive definite: that batch element's factor is NaN;
    singular matrices factor and solve to inf/NaN; a NaN or inf in a matrix (for
    eigh: in the triangle it reads, as NumPy) gives eigh and svd NaN results
    without calling LAPACK, the same in jit and eager."""
    rng = np.random.default_rng(4)
    a = _spd(rng, (3, 4, 4), dt)
    a[1, 2, 2] = -50.0
    chol = jit(linalg.cholesky)(a)
    assert np.isnan(chol[1]).all() and not np.isnan(chol[[0, 2]]).any()
    _assert_same_bits(chol, linalg.cholesky(a))

    singular = np.ones((2, 3, 3), dt)
    singular[1] = np.diag([1.0, 0.0, 2.0])
    _assert_same_bits(jit(linalg.lu)(singular), linalg.lu(singular))
    solve = lambda a, b: linalg.triangular_solve(a, b, left_side=True, lower=False)  # noqa: E731
    b = np.ones((2, 3, 1), dt)
    assert not np.isfinite(jit(solve)(singular, b)[1]).all()
    _assert_same_bits(jit(solve)(singular, b), solve(singular, b))

    bad = _random(rng, (2, 4, 4), dt)
    bad[0, 1, 1] = np.nan
    for f in (lambda a: linalg.eigh(a), lambda a: linalg.svd(a),
              lambda a: linalg.svd(a, compute_uv=False)):
        got = optree.tree_leaves(jit(f)(bad))
        _assert_same_bits(got, f(bad))
        assert all(np.isnan(np.asarray(o)[0]).all() for o in got)
        assert not any(np.isnan(np.asarray(o)[1]).any() for o in got)
    unread = _spd(rng, (2, 3, 3), dt)
    unread[1, 0, 2] = np.inf                    # above the diagonal: eigh reads below
    _assert_same_bits(jit(linalg.eigh)(unread), linalg.eigh(unread))
    assert np.isfinite(jit(linalg.eigh)(unread)[1]).all()
    unread[1, 2, 0] = np.inf                    # and below: NaN
    _assert_same_bits(jit(linalg.eigh)(unread), linalg.eigh(unread))
    assert np.isnan(jit(linalg.eigh)(unread)[1][1]).all()


def test_as_text_names_the_routines():
    a = np.eye(3, dtype=np.float32) * 2
    text = jit(lambda a: (linalg.qr(a), linalg.triangular_solve(a, a, left_side=True))
               ).lower(a).as_text()
    assert "native:qr (LAPACK sgeqrf, sorgqr)" in text
    assert "native:triangular_solve (BLAS strsm)" in text
    assert "fgrad_lapack_sgeqrf" in text          # the LLVM IR calls it


def test_what_cannot_be_lowered_stays_a_correct_numpy_step(monkeypatch):
    # lu of matrices with no columns: empty factors beside a non-empty permutation
    a = np.ones((2, 3, 0))
    assert "numpy:lu" in _labels(linalg.lu, a)
    _assert_same_bits(jit(linalg.lu)(a), linalg.lu(a))
    # no LAPACK to call (SciPy without cython_lapack): every decomposition is NumPy's
    monkeypatch.setattr(lapack, "_registered", False)
    b = _spd(np.random.default_rng(5), (4, 4), np.float64)
    assert _labels(linalg.cholesky, b) == ["numpy:cholesky"]
    _assert_same_bits(jit(linalg.cholesky)(b), linalg.cholesky(b))


def test_native_loops_and_derivative_programs_call_lapack():
    rng = np.random.default_rng(6)
    a = _spd(rng, (5, 5), np.float64)

    def body(c, _):
        l = linalg.cholesky(c)
        return c + 0.1 * (l @ l.T), linalg.eigh(c)[1]
    scan = lambda a: lax.scan(body, a, None, length=3)  # noqa: E731
    labels = _labels(scan, a)
    assert labels == ["native:scan"], labels           # the loop and its body are native
    _assert_same_bits(jit(scan)(a)[1], scan(a)[1])
    np.testing.assert_allclose(jit(scan)(a)[0], scan(a)[0], rtol=1e-14)

    def nll(a, y):
        l = fnp.linalg.cholesky(a)
        z = linalg.triangular_solve(l, y, left_side=True, lower=True)
        return 0.5 * fnp.sum(z ** 2) + fnp.sum(fnp.log(fnp.diagonal(l)))
    y = rng.standard_normal((5, 2))
    g = fgrad.grad(nll)
    labels = _labels(g, a, y)
    assert sum(label.startswith("native:triangular_solve") for label in labels) >= 3, labels
    assert not [label for label in labels if label.startswith("numpy:")], labels
    np.testing.assert_allclose(jit(g)(a, y), g(a, y), rtol=1e-12, atol=1e-14)


def test_a_decomposition_keeps_fgrads_workers_out_of_its_segment(monkeypatch):
    monkeypatch.setenv("FGRAD_NUM_THREADS", "2")
    x = np.linspace(0.0, 1.0, 512 * 512).reshape(512, 512)

    def spd(x):
        return fnp.exp(fnp.sin(x) * x) * 1e-3 + 512.0 * fnp.eye(512)
    if fused.pool.supported():       # alone, the element-wise kernel is shared
        assert [label for label in _labels(spd, x) if "split over 2 threads" in label]
    labels = _labels(lambda x: linalg.cholesky(spd(x)), x)
    assert any(label.startswith("native:cholesky") for label in labels)
    assert not [label for label in labels if "split over" in label], labels


def test_dropped_programs_free_their_native_code():
    a = _spd(np.random.default_rng(7), (4, 4), np.float64)
    alive = []
    for k in (1.0, 2.0):
        f = jit(lambda a, k=k: linalg.svd(a * k, compute_uv=False))
        f(a)
        f(a)
        exe = next(iter(f._cache.values())).executable
        module = next(c.fn.module for c in exe.calls if hasattr(c.fn, "module"))
        assert not module.stats.shared_library      # LAPACK's names: loaded by MCJIT
        alive.append(weakref.ref(module._code))
        del exe, module
    del f
    gc.collect()
    assert [w() for w in alive] == [None, None], "dropped LAPACK programs' code is alive"


_RSS_SCRIPT = """
import os, sys
import numpy as np
import fgrad
from fgrad._src.lax import linalg

def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

rng = np.random.default_rng(0)
a = rng.standard_normal((2, 100, 80))
spd = a @ np.swapaxes(a, -1, -2)            # rank 80 of 100: not positive definite
f = fgrad.jit(lambda a, s: (linalg.svd(a), linalg.qr(a), linalg.eigh(s), linalg.cholesky(s),
                            linalg.lu(a), linalg.eig(s[:, :40, :40])))
for _ in range(20):
    f(a, spd)
start = rss_mb()
for _ in range(int(sys.argv[1])):
    f(a, spd)
print(start, rss_mb())
"""


def test_workspaces_are_freed_on_every_path():
    """Calls that fail (a Cholesky factor of a singular matrix) and calls with big
    workspaces (SVD, QR, eigh, eig) give their memory back: 250 calls of a program
    malloc'ing about 0.6 MB each would grow by 150 MB if they leaked."""
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""),
               OPENBLAS_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(_RSS_SCRIPT), "250"],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    first, last = map(float, done.stdout.split())
    assert last - first < 20, f"RSS grew from {first:.0f} MB to {last:.0f} MB"


_CACHED_SCRIPT = """
import hashlib
import numpy as np
import optree
import fgrad
from fgrad._src.lax import linalg
a = np.random.default_rng(0).standard_normal((3, 6, 5))
f = lambda a: (linalg.qr(a), linalg.svd(a), linalg.lu(a))
g = fgrad.jit(f)
out = [np.asarray(x) for x in optree.tree_leaves(g(a))]
same = all(np.array_equal(x, np.asarray(y)) for x, y in zip(out, optree.tree_leaves(f(a))))
stats = next(iter(g._cache.values())).executable.compile_stats
print(same, stats.cache_hit, hashlib.sha256(b"".join(x.tobytes() for x in out)).hexdigest())
"""


def test_a_new_process_runs_cached_lapack_code(tmp_path):
    """Code calling LAPACK is loaded from the disk cache by MCJIT in a new process
    (the routines' addresses are that process's): same results, same bits."""
    env = dict(os.environ, FGRAD_CACHE_DIR=str(tmp_path),
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    runs = [subprocess.run([sys.executable, "-c", _CACHED_SCRIPT], capture_output=True,
                           text=True, timeout=300, env=env) for _ in range(2)]
    for done in runs:
        assert done.returncode == 0, done.stderr[-2000:]
    (same0, hit0, bits0), (same1, hit1, bits1) = (done.stdout.split() for done in runs)
    assert (same0, same1, hit0, hit1) == ("True", "True", "False", "True")
    assert bits0 == bits1
    assert list((tmp_path / "cpu").glob("*.o")) and list((tmp_path / "cpu").glob("*.alias"))
