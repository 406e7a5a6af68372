"""A split matrix product followed by an element-wise kernel over its rows: each
thread runs the kernel on its rows right after the product's (program.chained_rows),
with the bits eager computes, and never where the kernel could overwrite bytes
the product still reads."""
import numpy as np
import pytest

import fgrad.numpy as fnp
from fgrad import jit
from fgrad._src.core import ShapedArray
from fgrad._src.cpu import program, threads
from fgrad._src.jaxpr import Var
from fgrad._src.jit.primitive import compile_jaxpr

CHAINED = "(each thread's rows right after the product's)"

needs_threads = pytest.mark.skipif(threads.split_threads() < 2,
                                   reason="kernels are split over threads only with 2 or more")


def _labels(f, *args):
    return [k.label for k in compile_jaxpr(jit(f).lower(*args).jaxpr, "f").kernels]


def _mlp(x, w1, b1, w2, b2):
    h = fnp.maximum(x @ w1 + b1, 0.0)
    return fnp.minimum(h @ w2 + b2, 1.0) * 2.0


@needs_threads
def test_bias_and_activation_run_on_each_threads_rows_with_eager_bits():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((512, 300)).astype(np.float32)
    w1, w2 = (rng.standard_normal(s).astype(np.float32) / 16 for s in ((300, 256), (256, 128)))
    b1, b2 = (rng.standard_normal(n).astype(np.float32) for n in (256, 128))
    labels = _labels(_mlp, x, w1, b1, w2, b2)
    # the last kernel writes the program's output, which may be a donated input's
    # memory, so it waits for the whole product
    assert [CHAINED in lab for lab in labels] == [False, True, False, False], labels
    assert labels[1].startswith("native:add+max"), labels
    for _ in range(3):       # (the two threads' rows race if the chaining were wrong)
        assert np.array_equal(np.asarray(jit(_mlp)(x, w1, b1, w2, b2)),
                              np.asarray(_mlp(fnp.asarray(x), w1, b1, w2, b2)))


@needs_threads
def test_a_kernel_reading_other_rows_or_summing_is_not_chained():
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((256, 256)).astype(np.float32), \
        rng.standard_normal((256, 256)).astype(np.float32)
    columns = lambda x, w: (x @ w).T * 2.0 + x   # noqa: E731
    summed = lambda x, w: fnp.sum((x @ w) * x, 0)  # noqa: E731  (over the rows)
    for f in (columns, summed):
        assert not any(CHAINED in lab for lab in _labels(f, x, w))
    assert np.array_equal(np.asarray(jit(columns)(x, w)), np.asarray(columns(fnp.asarray(x), w)))


def test_outputs_that_may_share_bytes_with_the_products_operands_are_found():
    def var(n):
        return Var(ShapedArray((n,), np.dtype(np.float32)))
    a, b, out, exported, alias = var(64), var(64), var(64), var(64), var(64)
    seg = program.Segment([], [], [exported], {a: 0, out: 256, b: 384}, {alias: b}, 640)
    assert not program._may_overlap(seg, [out], [a])          # bytes 256-512 vs 0-256
    assert program._may_overlap(seg, [out], [alias])          # b's bytes, 384-640
    assert program._may_overlap(seg, [exported], [a])         # maybe a donated input's
