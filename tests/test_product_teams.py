"""Independent matrix products side by side (program.product_teams): a layer's
weight and input gradients each run whole on one thread, with the bits of one
thread and of eager."""
import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad._src.cpu import blas, threads

BESIDE = "(whole, beside other products on"

needs_threads = pytest.mark.skipif(threads.split_threads() < 2,
                                   reason="kernels are shared between threads only with 2 or more")


def _loss(params, x):
    w1, w2, w3 = params
    relu = lambda v: fnp.maximum(v, 0.0)  # noqa: E731  (jit's tanh would be fgrad's own)
    return fnp.sum(relu(relu(relu(x @ w1) @ w2) @ w3) ** 2)


def _sgd(params, x):
    """One SGD step (the gradients stay inside the program)."""
    return tuple(w - 0.1 * g for w, g in zip(params, fgrad.grad(_loss)(params, x)))


def _labels(f, *args):
    return [line for line in f.lower(*args).as_text().splitlines() if line.startswith("// ")]


@needs_threads
def test_a_layers_gradient_products_run_side_by_side_with_one_threads_bits(monkeypatch):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 256)).astype(np.float32)
    params = tuple(rng.standard_normal((256, 256)).astype(np.float32) / 16 for _ in range(3))
    step = fgrad.jit(_sgd)
    labels = _labels(step, params, x)
    teamed = [lab for lab in labels if BESIDE in lab]
    if blas.whole_gives_split_bits(blas.GemmSpec((), (), (), 128, 256, 256, False, False, 256,
                                                 256, 256, ()), np.float32):
        # w3's and w2's layers: (dw, dx) pairs; w1's layer has no dx
        assert len(teamed) == 4 and all("dot_general" in lab for lab in teamed), labels
    with monkeypatch.context() as m:
        m.setenv("FGRAD_NUM_THREADS", "1")
        one = fgrad.jit(_sgd)
        assert not any(BESIDE in lab for lab in _labels(one, params, x))
        want = [np.asarray(g) for g in one(params, x)]
    eager = _sgd(tuple(map(fnp.asarray, params)), fnp.asarray(x))
    for _ in range(3):      # (two threads writing bytes the other reads would race)
        for got, w, e in zip(step(params, x), want, eager):
            np.testing.assert_array_equal(np.asarray(got), w)
            np.testing.assert_array_equal(np.asarray(got), np.asarray(e))


@needs_threads
def test_products_that_read_each_others_results_are_not_teamed():
    rng = np.random.default_rng(1)
    x, w1, w2 = (rng.standard_normal((256, 256)).astype(np.float32) for _ in range(3))
    chain = fgrad.jit(lambda x, w1, w2: (x @ w1) @ w2 * 2.0)
    assert not any(BESIDE in lab for lab in _labels(chain, x, w1, w2))
    np.testing.assert_array_equal(np.asarray(chain(x, w1, w2)),
                                  np.asarray((fnp.asarray(x) @ w1) @ w2 * 2.0))
