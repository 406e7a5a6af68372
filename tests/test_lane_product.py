"""cpu.lane_product, the runtime kernel of weight-gradient-shaped convolutions:
every tile shape and tail (rows as full tiles plus binary digits, columns in
blocks of 4, 2 and 1 vectors) against a float64 sum, with strided operands."""
import numpy as np
import pytest

from fgrad._src.cpu import blas, lane_product

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
