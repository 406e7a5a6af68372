"""Sums of zero pads tiling an axis become a concatenate (fgrad._src.compiler.pad_sums):
the transpose of a split, in jitted programs."""
import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad import lax
from fgrad._src.compiler.pad_sums import join_pad_sums
from fgrad._src.jaxpr import check_jaxpr, eval_closed


def _names(closed):
    return [e.primitive.name for e in closed.jaxpr.eqns]


def _split_weighted(x):
    a, b, c = fnp.split(x, [1, 3], axis=1)
    return fnp.sum(fnp.sin(a)) + fnp.sum(b * b) + fnp.sum(fnp.cos(c))


def test_the_transpose_of_a_split_becomes_one_concatenate():
    x = np.linspace(-1, 1, 12).reshape(2, 6)
    closed = fgrad.make_jaxpr(fgrad.grad(_split_weighted))(x)
    assert _names(closed).count("pad") == 3
    joined = join_pad_sums(closed)
    check_jaxpr(joined.jaxpr)
    assert "pad" not in _names(joined) and _names(joined).count("concatenate") == 1
    np.testing.assert_array_equal(eval_closed(joined, x)[0], eval_closed(closed, x)[0])
    assert join_pad_sums(joined) is joined


def _pads(x, y, lo_y):
    """x padded to 6 columns at 0, y at lo_y, summed."""
    px = lax.pad(x, 0.0, [(0, 0, 0), (0, 6 - x.shape[1], 0)])
    py = lax.pad(y, 0.0, [(0, 0, 0), (lo_y, 6 - lo_y - y.shape[1], 0)])
    return px + py


@pytest.mark.parametrize("x_width,lo_y,y_width", [(2, 2, 4), (2, 3, 3), (3, 2, 4), (2, 0, 2)])
def test_only_pads_that_tile_the_axis_are_joined(x_width, lo_y, y_width):
    x, y = np.ones((2, x_width), np.float32), np.ones((2, y_width), np.float32)
    closed = fgrad.make_jaxpr(lambda x, y: _pads(x, y, lo_y))(x, y)
    joined = join_pad_sums(closed)
    tiles = x_width == lo_y and lo_y + y_width == 6     # not: a gap, an overlap
    assert (joined is not closed) == tiles
    np.testing.assert_array_equal(eval_closed(joined, x, y)[0], eval_closed(closed, x, y)[0])


def test_negative_zeros_come_out_positive_as_in_the_sum():
    x = np.array([[-0.0, 1.0], [2.0, -0.0]], np.float32)
    y = np.array([[-0.0] * 4, [3.0] * 4], np.float32)
    f = lambda x, y: _pads(x, y, 2)
    eager, jitted = np.asarray(f(x, y)), np.asarray(fgrad.jit(f)(x, y))
    assert not np.signbit(eager).any()
    np.testing.assert_array_equal(np.signbit(jitted), np.signbit(eager))
    np.testing.assert_array_equal(jitted, eager)


def test_a_pad_read_twice_is_not_joined():
    def f(x, y):
        px = lax.pad(x, 0.0, [(0, 0, 0), (0, 4, 0)])
        py = lax.pad(y, 0.0, [(0, 0, 0), (2, 0, 0)])
        return px + py, px
    x, y = np.ones((2, 2), np.float32), np.ones((2, 4), np.float32)
    closed = fgrad.make_jaxpr(f)(x, y)
    assert join_pad_sums(closed) is closed
