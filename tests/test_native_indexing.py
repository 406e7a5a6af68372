"""gather and the scatters as native loops (fgrad/_src/cpu/indexing.py) against
the reference interpreter: every dtype, clamped and dropped out-of-range
indices, duplicates (bit-exact sums in index order, last write wins), several
axis layouts, empty index sets, and the programs grad and vmap make of them."""
import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad import jit, lax
from fgrad._src.jit.primitive import compile_jaxpr

# NaNs in the data on purpose: the eager reference warns about them
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

DTYPES = [np.bool_, np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64,
          np.float16, np.float32, np.float64]
SCATTERS = [lax.scatter, lax.scatter_add, lax.scatter_mul, lax.scatter_min, lax.scatter_max]


def _labels(f, *args):
    return [k.label for k in compile_jaxpr(jit(f).lower(*args).jaxpr, "f").kernels]


def _data(dt, shape, rng):
    if dt == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if np.dtype(dt).kind == "f":
        x = rng.standard_normal(shape).astype(dt)
        x.flat[::7] = np.nan
        return x
    info = np.iinfo(dt)
    return rng.integers(max(info.min, -100), min(info.max, 100), shape, endpoint=True).astype(dt)


def _same(got, want):
    got, want = np.ascontiguousarray(got), np.ascontiguousarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))   # bit for bit


# (operand shape, axes, index shape)
LAYOUTS = [((7,), (0,), (5,)), ((5, 4, 3), (0, 2), (6,)), ((5, 4, 3), (1,), (2, 3)),
           ((4, 6), (1, 0), (5,)), ((3, 4, 5), (2,), ())]


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape,axes,ishape", LAYOUTS)
def test_gather_matches_numpy(dt, shape, axes, ishape):
    rng = np.random.default_rng(1)
    x = _data(dt, shape, rng)
    idx = tuple(rng.integers(-3, shape[a] + 3, ishape).astype(np.int32) for a in axes)
    f = lambda x, *idx: lax.gather(x, idx, axes)  # noqa: E731
    _same(jit(f)(x, *idx), f(x, *idx))
    assert _labels(f, x, *idx) == ["native:gather"]


# every scatter with every dtype it lowers natively (only scatter (set) takes bool;
# float16 combines compute in float32 and round, as NumPy's half loops: bit-equal)
OP_DTYPES = [(op, dt) for op in SCATTERS for dt in DTYPES
             if dt is not np.bool_ or op is lax.scatter]


@pytest.mark.parametrize("op,dt", OP_DTYPES, ids=lambda v: getattr(v, "__name__", str(v)))
@pytest.mark.parametrize("shape,axes,ishape", LAYOUTS)
def test_scatters_match_numpy(op, dt, shape, axes, ishape):
    rng = np.random.default_rng(2)
    x = _data(dt, shape, rng)
    idx = tuple(rng.integers(-2, shape[a] + 2, ishape).astype(np.int64) for a in axes)
    rest = tuple(n for d, n in enumerate(shape) if d not in axes)
    u = _data(dt, tuple(ishape) + rest, rng)
    f = lambda x, u, *idx: op(x, idx, u, axes)  # noqa: E731
    _same(jit(f)(x, u, *idx), f(x, u, *idx))
    assert _labels(f, x, u, *idx) == [f"native:{op.__name__}"]


def test_duplicates_accumulate_in_index_order_and_last_write_wins():
    x = np.zeros(4, np.float32)
    idx = np.array([1, 1, 1, 3, 1], np.int32)
    u = np.array([1e8, 1.0, -1e8, 2.0, 0.5], np.float32)   # order matters in float32
    for op in SCATTERS:
        f = lambda x, u, i: op(x, (i,), u, (0,))  # noqa: E731
        _same(jit(f)(x, u, idx), f(x, u, idx))


def test_float16_duplicates_round_every_update_like_numpy():
    x = np.zeros(3, np.float16)
    idx = np.array([0] * 3000 + [1, 2, 1], np.int32)
    u = np.concatenate([np.ones(3000), [65504.0, 0.1, 65504.0]]).astype(np.float16)
    for op in SCATTERS:
        f = lambda x, u, i: op(x, (i,), u, (0,))  # noqa: E731
        _same(jit(f)(x, u, idx), f(x, u, idx))      # 2048 + 1 rounds back to 2048, inf


def test_unsigned_and_huge_indices():
    x = np.arange(10.0)
    i = np.array([0, 9, 10, 2 ** 63, 2 ** 64 - 1], np.uint64)
    g = lambda x, i: lax.gather(x, (i,), (0,))  # noqa: E731
    _same(jit(g)(x, i), g(x, i))
    s = lambda x, u, i: lax.scatter_add(x, (i,), u, (0,))  # noqa: E731
    u = np.ones(5)
    _same(jit(s)(x, u, i), s(x, u, i))


def test_empty_index_sets():
    x = np.arange(12.0).reshape(3, 4)
    i = np.zeros((0,), np.int32)
    g = lambda x, i: lax.gather(x, (i,), (0,))  # noqa: E731
    _same(jit(g)(x, i), g(x, i))
    s = lambda x, u, i: lax.scatter_add(x, (i,), u, (0,))  # noqa: E731
    _same(jit(s)(x, np.zeros((0, 4)), i), s(x, np.zeros((0, 4)), i))


def test_fancy_indexing_programs_under_grad_and_vmap():
    rng = np.random.default_rng(3)
    logits = rng.standard_normal((8, 10))
    labels = rng.integers(0, 10, 8)

    def loss(logits, labels):
        logp = fgrad.nn.log_softmax(logits)
        return -fnp.mean(logp[fnp.arange(8), labels])

    g = fgrad.value_and_grad(loss)
    for got, want in zip(jit(g)(logits, labels), g(logits, labels)):
        np.testing.assert_allclose(got, want, rtol=1e-12)
    labels_of = _labels(g, logits, labels)
    assert "native:gather" in labels_of and "native:scatter_add" in labels_of, labels_of
    assert all(lab.startswith("native:") for lab in labels_of), labels_of
    rows = fgrad.vmap(lambda x, i: x[i], in_axes=(0, 0))
    idx = rng.integers(-10, 10, 8)
    np.testing.assert_array_equal(jit(rows)(logits, idx), rows(logits, idx))
    upd = fgrad.vmap(lambda x, i: x.at[i].add(1.0), in_axes=(0, 0))
    np.testing.assert_array_equal(jit(upd)(logits, idx), upd(logits, idx))
