"""fgrad_nn.init: shapes and dtypes, fans for PyTorch and JAX layouts, empirical
variances against the published formulas, orthogonality, and determinism."""
import math

import numpy as np
import pytest

import fgrad
from fgrad import random
from fgrad_nn import init

KEY = random.key(0)

# (name, initialiser, expected variance for a PyTorch-layout (out=64, in=100, 3, 3) weight)
FAN_IN, FAN_OUT = 100 * 9, 64 * 9
SHAPE = (64, 100, 3, 3)
VARIANCES = [
    ("normal", init.normal(0.5), 0.25),
    ("uniform", init.uniform(2.0), 4.0 / 12),
    ("truncated_normal", init.truncated_normal(1.0), 0.7737413),  # var of N(0,1) on [-2, 2]
    ("xavier_uniform", init.xavier_uniform(), 2.0 / (FAN_IN + FAN_OUT)),
    ("xavier_normal", init.xavier_normal(gain=2.0), 4 * 2.0 / (FAN_IN + FAN_OUT)),
    ("glorot_uniform", init.glorot_uniform(), 2.0 / (FAN_IN + FAN_OUT)),
    ("glorot_normal", init.glorot_normal(), 2.0 / (FAN_IN + FAN_OUT)),
    ("kaiming_uniform", init.kaiming_uniform(), 2.0 / FAN_IN),
    ("kaiming_normal_fan_out", init.kaiming_normal(mode="fan_out", nonlinearity="relu"),
     2.0 / FAN_OUT),
    ("kaiming_tanh", init.kaiming_normal(nonlinearity="tanh"), (5 / 3) ** 2 / FAN_IN),
    ("he_uniform", init.he_uniform(), 2.0 / FAN_IN),
    ("he_normal", init.he_normal(), 2.0 / FAN_IN),
    ("lecun_uniform", init.lecun_uniform(), 1.0 / FAN_IN),
    ("lecun_normal", init.lecun_normal(), 1.0 / FAN_IN),
    ("torch_default_weight", init.torch_default_weight(), 1.0 / (3 * FAN_IN)),
    ("torch_default_bias", init.torch_default_bias(FAN_IN), 1.0 / (3 * FAN_IN)),
    ("variance_scaling", init.variance_scaling(3.0, "fan_avg", "normal"),
     3.0 / ((FAN_IN + FAN_OUT) / 2)),
]


@pytest.mark.parametrize("name,initialiser,variance", VARIANCES, ids=[v[0] for v in VARIANCES])
def test_empirical_variance_matches_formula(name, initialiser, variance):
    w = np.asarray(initialiser(KEY, SHAPE))
    assert w.shape == SHAPE and w.dtype == np.float32
    w = w.astype(np.float64)
    n = w.size  # 57600 draws: the variance estimate is good to about 1%
    assert abs(w.var() / variance - 1) < 0.03, (w.var(), variance)
    if name != "uniform":
        assert abs(w.mean()) < 5 * math.sqrt(variance / n)


@pytest.mark.parametrize("name,initialiser,variance", VARIANCES, ids=[v[0] for v in VARIANCES])
def test_dtype_determinism_and_jit(name, initialiser, variance):
    w = initialiser(KEY, (5, 7), np.float64)
    assert w.dtype == np.float64 and w.shape == (5, 7)
    np.testing.assert_array_equal(initialiser(KEY, (5, 7), np.float64), w)
    assert not np.array_equal(initialiser(random.key(1), (5, 7), np.float64), w)
    jitted = fgrad.jit(lambda k: initialiser(k, (5, 7), np.float64))(KEY)
    np.testing.assert_allclose(jitted, w, rtol=1e-12, atol=1e-15)


def test_uniform_bounds():
    bound = 1 / math.sqrt(FAN_IN)
    for initialiser in (init.torch_default_weight(), init.torch_default_bias(FAN_IN)):
        w = np.asarray(initialiser(KEY, SHAPE))
        assert w.min() >= -bound and w.max() < bound and w.max() > 0.99 * bound
    b = math.sqrt(6 / (FAN_IN + FAN_OUT))
    w = np.asarray(init.xavier_uniform()(KEY, SHAPE))
    assert w.min() >= -b and w.max() < b and w.min() < -0.99 * b
    w = np.asarray(init.uniform(0.3)(KEY, (1000,)))
    assert w.min() >= 0 and w.max() < 0.3


def test_truncated_normal_initialisers_stay_within_two_stddevs():
    w = np.asarray(init.truncated_normal(0.1)(KEY, (10000,)))
    assert np.abs(w).max() < 0.2 and np.abs(w).max() > 0.19
    std = math.sqrt(2.0 / 50) / 0.87962566103423978  # he_normal for fan_in 50, before truncation
    w = np.asarray(init.he_normal()(KEY, (40, 50)))
    assert np.abs(w).max() < 2 * std


def test_constants():
    np.testing.assert_array_equal(init.zeros(KEY, (2, 3)), np.zeros((2, 3), np.float32))
    np.testing.assert_array_equal(init.ones(KEY, (4,), np.float64), np.ones(4))
    c = init.constant(0.25)(KEY, (3, 2))
    assert c.dtype == np.float32
    np.testing.assert_array_equal(c, np.full((3, 2), 0.25))
    assert init.zeros(KEY, (2,)).dtype == np.float32


def test_fans_for_each_layout():
    # PyTorch layouts (the default): Linear (out, in), Conv (out, in, kh, kw)
    assert init.compute_fans((10, 20)) == (20, 10)
    assert init.compute_fans((8, 4, 3, 3)) == (36, 72)
    # JAX layouts: dense (in, out), conv HWIO (kh, kw, in, out)
    assert init.compute_fans((20, 10), in_axis=-2, out_axis=-1) == (20, 10)
    assert init.compute_fans((3, 3, 4, 8), in_axis=-2, out_axis=-1) == (36, 72)
    # a batch axis is not part of the receptive field
    assert init.compute_fans((5, 8, 4), batch_axis=0, in_axis=2, out_axis=1) == (4, 8)
    # the same variance from either layout
    torch_w = np.asarray(init.kaiming_normal()(KEY, (300, 200)))
    jax_w = np.asarray(init.he_normal(in_axis=-2, out_axis=-1)(KEY, (200, 300)))
    assert abs(torch_w.var() / jax_w.var() - 1) < 0.03


def test_calculate_gain_matches_pytorch():
    assert init.calculate_gain("linear") == 1.0 and init.calculate_gain("sigmoid") == 1.0
    assert init.calculate_gain("tanh") == 5 / 3
    assert init.calculate_gain("relu") == math.sqrt(2)
    assert init.calculate_gain("leaky_relu") == math.sqrt(2 / (1 + 0.01 ** 2))
    assert init.calculate_gain("leaky_relu", math.sqrt(5)) == math.sqrt(1 / 3)
    assert init.calculate_gain("selu") == 0.75


@pytest.mark.parametrize("shape", [(6, 4), (4, 6), (5, 5), (30, 10), (10, 30)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_orthogonal_matrices(shape, dtype):
    q = np.asarray(init.orthogonal(scale=1.0)(KEY, shape, dtype), np.float64)
    assert q.shape == shape and init.orthogonal()(KEY, shape, dtype).dtype == dtype
    tol = 1e-5 if dtype == np.float32 else 1e-12
    if shape[0] >= shape[1]:
        np.testing.assert_allclose(q.T @ q, np.eye(shape[1]), atol=tol)
    else:
        np.testing.assert_allclose(q @ q.T, np.eye(shape[0]), atol=tol)
    scaled = np.asarray(init.orthogonal(scale=2.0)(KEY, shape, dtype))
    np.testing.assert_allclose(scaled, 2 * q, rtol=1e-6)


def test_orthogonal_is_the_sign_corrected_qr_of_a_gaussian():
    a = np.asarray(random.normal(KEY, (7, 4), np.float64))
    q, r = np.linalg.qr(a)
    expected = q * np.sign(np.diag(r))
    np.testing.assert_allclose(init.orthogonal()(KEY, (7, 4), np.float64), expected, atol=1e-12)


def test_orthogonal_conv_weights():
    # PyTorch conv layout (out, in, kh, kw): with column_axis=0 the output filters
    # are orthonormal
    w = np.asarray(init.orthogonal(column_axis=0)(KEY, (8, 3, 3, 3), np.float64))
    flat = w.reshape(8, -1)
    np.testing.assert_allclose(flat @ flat.T, np.eye(8), atol=1e-12)


def test_orthogonal_under_jit_and_vmap():
    f = init.orthogonal()
    jitted = fgrad.jit(lambda k: f(k, (6, 4), np.float64))(KEY)
    np.testing.assert_allclose(jitted, f(KEY, (6, 4), np.float64), atol=1e-12)
    keys = random.split(KEY, 3)
    batched = np.asarray(fgrad.vmap(lambda k: f(k, (5, 3), np.float64))(keys))
    for k, q in zip(keys, batched):
        np.testing.assert_allclose(q, f(k, (5, 3), np.float64), atol=1e-12)
        np.testing.assert_allclose(q.T @ q, np.eye(3), atol=1e-12)


def test_errors():
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        init.xavier_uniform()(KEY, (5,))
    with pytest.raises(ValueError, match="mode"):
        init.variance_scaling(1.0, "fan_sideways", "normal")
    with pytest.raises(ValueError, match="distribution"):
        init.variance_scaling(1.0, "fan_in", "cauchy")
    with pytest.raises(ValueError, match="nonlinearity"):
        init.kaiming_uniform(nonlinearity="swoosh")
    with pytest.raises(ValueError, match="two different axes"):
        init.compute_fans((3, 4), in_axis=0, out_axis=0)
    with pytest.raises(TypeError, match="floating-point"):
        init.normal()(KEY, (2, 2), np.int32)
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        init.orthogonal()(KEY, (4,))


def test_importable_as_a_submodule():
    import fgrad_nn.init as by_path
    assert by_path is init
