"""The default float (fgrad.default_float, config.default_float, FGRAD_DEFAULT_FLOAT):
it decides what defaults decide, never a dtype the user passed."""
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad.test_util import check_grads

F32, F64 = np.dtype("float32"), np.dtype("float64")


@pytest.fixture(autouse=True)
def _restore_global_default():
    yield
    fgrad.config.update("default_float", "float32")


def defaulted_dtypes():
    """The dtype of each thing a default decides."""
    key = fgrad.random.key(0)
    return {
        "zeros": fnp.zeros(2).dtype, "ones": fnp.ones(2).dtype, "empty": fnp.empty(2).dtype,
        "full": fnp.full(2, 1.5).dtype, "eye": fnp.eye(2).dtype, "tri": fnp.tri(2).dtype,
        "identity": fnp.identity(2).dtype, "arange": fnp.arange(0.0, 2.0).dtype,
        "linspace": fnp.linspace(0, 1, 3).dtype, "array": fnp.array([0.5, 1.0]).dtype,
        "asarray": fnp.asarray(0.5).dtype, "sqrt(2.0)": fnp.sqrt(2.0).dtype,
        "sin(int)": fnp.sin(fnp.arange(3)).dtype, "mean(int)": fnp.mean(fnp.arange(3)).dtype,
        "int + float": (fnp.arange(3) + 0.5).dtype,
        "uniform": fgrad.random.uniform(key, (2,)).dtype,
        "normal": fgrad.random.normal(key, (2,)).dtype,
        "exponential": fgrad.random.exponential(key, (2,)).dtype,
    }


def test_float32_by_default():
    assert set(defaulted_dtypes().values()) == {F32}
    assert fgrad.config.default_float == F32


@pytest.mark.parametrize("how", ["context", "config"])
def test_float64_default_changes_every_defaulted_dtype(how):
    if how == "context":
        with fgrad.default_float("float64"):
            got = defaulted_dtypes()
    else:
        fgrad.config.update("default_float", np.float64)
        got = defaulted_dtypes()
    assert {k: v for k, v in got.items() if v != F64} == {}
    # weakly typed Python floats stay weak, now as float64
    with fgrad.default_float("float64"):
        x = fnp.asarray(2.0)
        assert x.weak_type and x.dtype == F64
        np.testing.assert_array_equal(fnp.sqrt(2.0), np.sqrt(2.0))


def test_float64_default_never_changes_a_dtype_the_user_passed():
    with fgrad.default_float("float64"):
        x32 = fnp.ones(3, dtype=fnp.float32)
        assert x32.dtype == F32
        assert (x32 + 2.0).dtype == F32          # a weak float does not widen a strong one
        assert (x32 * fnp.sqrt(2.0)).dtype == F32
        assert fnp.asarray(np.ones(2, np.float32)).dtype == F32
        assert fnp.zeros(2, fnp.float16).dtype == np.float16
        assert fnp.array([1.0], dtype="float32").dtype == F32
        assert fgrad.random.normal(fgrad.random.key(0), (2,), np.float32).dtype == F32
        assert fnp.arange(3).dtype == np.int32   # ints keep their default
    with fgrad.default_float("float32"):
        assert fnp.ones(2, fnp.float64).dtype == F64
        assert (fnp.ones(2, fnp.float64) + 2.0).dtype == F64
        assert fnp.asarray(np.ones(2)).dtype == F64   # a NumPy float64 array stays float64


def test_scoped_settings_nest_and_restore():
    fgrad.config.update("default_float", "float64")
    assert fnp.zeros(1).dtype == F64
    with fgrad.default_float("float32"):
        assert fnp.zeros(1).dtype == F32
        with fgrad.default_float("float64"):
            assert fnp.zeros(1).dtype == F64
        assert fnp.zeros(1).dtype == F32
        with pytest.raises(RuntimeError):
            with fgrad.default_float("float64"):
                raise RuntimeError("leaves the block")
        assert fnp.zeros(1).dtype == F32
    assert fnp.zeros(1).dtype == F64  # back to the global setting


@pytest.mark.parametrize("bad", ["int32", "float16", "complex64", "double-ish"])
def test_bad_settings_are_clear_errors(bad):
    with pytest.raises(ValueError, match="default float must be 'float32' or 'float64'"):
        with fgrad.default_float(bad):
            pass
    with pytest.raises(ValueError, match="default float must be 'float32' or 'float64'"):
        fgrad.config.update("default_float", bad)
    assert fgrad.config.default_float == F32


def test_threads_keep_their_own_scoped_setting():
    barrier = threading.Barrier(2, timeout=10)
    seen = {}

    def work(name, dtype):
        with fgrad.default_float(dtype):
            barrier.wait()              # both blocks are open at once
            seen[name] = (fnp.zeros(1).dtype, fnp.asarray(1.0).dtype)
            barrier.wait()

    threads = [threading.Thread(target=work, args=("a", "float64")),
               threading.Thread(target=work, args=("b", "float32"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {"a": (F64, F64), "b": (F32, F32)}
    assert fnp.zeros(1).dtype == F32


def test_jit_cache_keeps_the_settings_apart():
    f = fgrad.jit(lambda x: fnp.zeros(3) + x * 0.1)
    x = np.arange(3, dtype=np.int32)
    for _ in range(4):                   # enough calls for the native call path
        assert f(x).dtype == F32
    with fgrad.default_float("float64"):
        for _ in range(4):
            out = f(x)
            assert out.dtype == F64
        np.testing.assert_array_equal(out, np.arange(3) * 0.1)
    assert f(x).dtype == F32
    info = f.cache_info()
    assert info.misses == 2 and info.entries == 2
    fgrad.config.update("default_float", "float64")
    assert f(x).dtype == F64
    assert f.cache_info().misses == 2    # the global setting shares the float64 entry


def test_env_var_sets_the_process_default():
    code = ("import fgrad, fgrad.numpy as fnp; "
            "print(fnp.zeros(1).dtype, fnp.asarray(1.0).dtype, fgrad.config.default_float)")
    env = dict(os.environ, FGRAD_DEFAULT_FLOAT="float64")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["float64", "float64", "float64"]
    env["FGRAD_DEFAULT_FLOAT"] = "float128"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode != 0 and "FGRAD_DEFAULT_FLOAT" in out.stderr


def _logistic_problem():
    """autograd's logistic-regression example, written as NumPy code would be."""
    inputs = fnp.array([[0.52, 1.12, 0.77], [0.88, -1.08, 0.15],
                        [0.52, 0.06, -1.30], [0.74, -2.49, 1.39]])
    targets = fnp.array([True, True, False, True])

    def sigmoid(x):
        return 0.5 * (fnp.tanh(x / 2.0) + 1)

    def training_loss(weights):
        preds = sigmoid(fnp.dot(inputs, weights))
        label_probabilities = preds * targets + (1 - preds) * (1 - targets)
        return -fnp.sum(fnp.log(label_probabilities))

    return training_loss, fnp.array([0.0, 0.0, 0.0])


def test_logistic_regression_gradient_check_under_float64_default():
    with fgrad.default_float("float64"):
        loss, weights = _logistic_problem()
        assert weights.dtype == F64
        g = fgrad.grad(loss)(weights)
        assert g.dtype == F64
        check_grads(loss, (weights,), order=2, modes=("fwd", "rev"))
        w = weights
        for _ in range(100):
            w = w - 0.01 * fgrad.grad(loss)(w)
        assert w.dtype == F64 and float(loss(w)) < float(loss(weights))
    loss32, weights32 = _logistic_problem()
    assert weights32.dtype == F32 and fgrad.grad(loss32)(weights32).dtype == F32
