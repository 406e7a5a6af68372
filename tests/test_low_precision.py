"""float16 statistics accumulate in float32 and round once at the end (as NumPy
and JAX do), eagerly and under jit: means, variances, cumulative sums and
products, weighted averages, softmax/logsumexp/standardize and the layer and
batch norms of fgrad_nn. Results keep the float16 dtype."""
import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad import lax, nn

from fgrad_nn import functional as F

H = np.float16


def _both(f, *args):
    """f's result eagerly and under jit (each checked to be float16)."""
    out = [np.asarray(f(*args)), np.asarray(fgrad.jit(f)(*args))]
    for o in out:
        assert o.dtype == H, o.dtype
    return out


def _f16(x):
    return np.asarray(x, np.float64).astype(H)


def test_mean_of_large_values_does_not_overflow():
    x = np.full(1000, 100, H)                     # the float16 sum, 1e5, is inf
    for got in _both(fnp.mean, x):
        assert got == 100
    for got in _both(fnp.var, x) + _both(fnp.std, x):
        assert got == 0
    for got in _both(lambda x: fnp.average(x, weights=fnp.ones_like(x)), x):
        assert got == 100
    for got in _both(fnp.nanmean, np.where(np.arange(1000) % 3 == 0, np.nan, x).astype(H)):
        assert got == 100


@pytest.mark.parametrize("n", [65_504, 70_000, 200_000])
def test_statistics_over_more_elements_than_float16_can_count(n):
    rng = np.random.default_rng(n)
    x = rng.normal(3.0, 2.0, n).astype(H)
    x64 = x.astype(np.float64)
    for f, want in ((fnp.mean, x64.mean()), (fnp.var, x64.var()), (fnp.std, x64.std()),
                    (lambda x: fnp.var(x, ddof=1), x64.var(ddof=1))):
        for got in _both(f, x):
            assert got == _f16(want) or abs(float(got) - want) <= 1e-3 * abs(want), (got, want)


def test_axis_statistics():
    rng = np.random.default_rng(1)
    x = (rng.random((3, 40_000)) * 200).astype(H)
    x64 = x.astype(np.float64)
    for got in _both(lambda x: fnp.mean(x, axis=1), x):
        np.testing.assert_allclose(got.astype(np.float64), x64.mean(axis=1), rtol=1e-3)
    for got in _both(lambda x: fnp.std(x, axis=1, keepdims=True), x):
        np.testing.assert_allclose(got.astype(np.float64), x64.std(axis=1, keepdims=True),
                                   rtol=2e-3)


@pytest.mark.parametrize("reverse", [False, True])
def test_cumsum_accumulates_in_float32(reverse):
    x = np.ones(10_000, H)
    want = np.cumsum(x.astype(np.float32)).astype(H)      # each prefix rounded once
    if reverse:
        want = want[::-1]
        f = lambda x: lax.cumsum(x, 0, reverse=True)
    else:
        f = fnp.cumsum
    for got in _both(f, x):
        np.testing.assert_array_equal(got, want)
        assert got[-1 if not reverse else 0] == 10_000


def test_cumsum_and_cumprod_of_random_values_match_float32_rounded_once():
    rng = np.random.default_rng(2)
    x = rng.normal(0, 1, (4, 3000)).astype(H)
    want = np.cumsum(x.astype(np.float32), axis=1).astype(H)
    for got in _both(lambda x: fnp.cumsum(x, axis=1), x):
        np.testing.assert_array_equal(got, want)
    y = (1 + rng.normal(0, 0.01, 2000)).astype(H)
    want = np.cumprod(y.astype(np.float32)).astype(H)
    for got in _both(fnp.cumprod, y):
        np.testing.assert_array_equal(got, want)


def test_nn_normalisations_of_many_float16_values():
    n = 100_000
    z = np.zeros(n, H)
    for got in _both(nn.logsumexp, z):
        assert got == _f16(np.log(n))
    for got in _both(nn.softmax, z):
        np.testing.assert_array_equal(got, np.full(n, _f16(1 / n)))
    for got in _both(nn.log_softmax, z):
        np.testing.assert_array_equal(got, np.full(n, _f16(-np.log(n))))
    x = np.arange(1000).astype(H) * 60                   # squares overflow float16
    x64 = x.astype(np.float64)
    want = (x64 - x64.mean()) / np.sqrt(x64.var() + 1e-5)
    for got in _both(nn.standardize, x):
        np.testing.assert_allclose(got.astype(np.float64), want, atol=5e-3)


def test_fgrad_nn_norms_of_large_float16_values():
    # deviations reach 300, whose squares overflow float16; the variance fits
    x = (np.arange(2000).reshape(2, 1000) % 1000 * 0.6).astype(H)
    x64 = x.astype(np.float64)
    want = (x64 - x64.mean(1, keepdims=True)) / np.sqrt(x64.var(1, keepdims=True) + 1e-5)
    for got in _both(lambda x: F.layer_norm(x, 1000), x):
        assert np.all(np.isfinite(got))
        np.testing.assert_allclose(got.astype(np.float64), want, atol=5e-3)
    xb = x.T.copy()                                       # (N=1000, C=2)
    rm, rv = np.zeros(2, H), np.ones(2, H)
    y, _, new_var = F.batch_norm(xb, rm, rv)
    assert np.asarray(y).dtype == H and np.all(np.isfinite(np.asarray(y)))
    np.testing.assert_allclose(np.asarray(y).astype(np.float64), want.T, atol=5e-3)
    assert np.all(np.isfinite(np.asarray(new_var)))


def test_float32_statistics_are_unchanged():
    """The float32 path computes exactly what it did: sum / count in float32."""
    rng = np.random.default_rng(3)
    x = rng.normal(0, 1, 1001).astype(np.float32)
    assert np.asarray(fnp.mean(x)) == np.sum(x, dtype=np.float32) / np.float32(1001)
    c = x - np.sum(x, dtype=np.float32) / np.float32(1001)
    assert np.asarray(fnp.var(x)) == np.sum(c * c, dtype=np.float32) / np.float32(1001)


def test_fgrad_nn_norms_of_float16_updates():
    """global_norm / clip_by_global_norm / the LAMB trust ratio of float16 leaves: the
    sum of squares of 1e5 ones is 1e5 (inf in float16, which zeroed every update)."""
    from fgrad_nn import optim
    n = 100_000
    g = {"w": np.ones(n, H), "b": np.full(3, 300, H)}      # 300**2 overflows float16
    want = np.sqrt(n + 3 * 300.0 ** 2)
    np.testing.assert_allclose(float(optim.global_norm(g)), want, rtol=1e-6)
    tx = optim.clip_by_global_norm(1.0)
    u, _ = tx.update(g, tx.init(g), g)
    assert np.asarray(u["w"]).dtype == H
    np.testing.assert_allclose(np.asarray(u["w"], np.float64), 1 / want, rtol=1e-3)
    tx = optim.lamb(1e-3)
    u, _ = fgrad.jit(tx.update)(g, tx.init(g), g)
    assert np.asarray(u["w"]).dtype == H and np.all(np.asarray(u["w"]) != 0)
