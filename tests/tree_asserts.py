"""Assertions on pytrees of arrays shared by the test modules."""
import numpy as np

import fgrad


def assert_trees_close(a, b, rtol=1e-12, atol=1e-13, check_dtype=True):
    """Same pytree structure, same leaf shapes (and dtypes), leaves equal to rounding."""
    assert fgrad.tree.structure(a) == fgrad.tree.structure(b), (a, b)
    for x, y in zip(fgrad.tree.leaves(a), fgrad.tree.leaves(b)):
        x, y = np.asarray(x), np.asarray(y)
        assert x.shape == y.shape, (x.shape, y.shape)
        if check_dtype:
            assert x.dtype == y.dtype, (x.dtype, y.dtype)
        np.testing.assert_allclose(x, y, rtol=rtol, atol=atol)
