"""Static arguments and other Python values baked into programs are keyed by type
and value: values that `==` confuses (1, 1.0, True; 0.0, -0.0; (1, 2.0) and
(1.0, 2)) get programs of their own, and NaN finds its program again."""
import collections
import math

import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad._src.compiler.simplify import _param_key
from fgrad._src.value_keys import value_key

XI = np.arange(3, dtype=np.int32)


def _add_static():
    return fgrad.jit(lambda x, s: x + s, static_argnums=1)


CASES = [(1.0, np.float32), (True, np.int32), (1, np.int32)]   # (static value, result dtype)


@pytest.mark.parametrize("order", [(0, 1, 2), (1, 2, 0), (2, 0, 1)])
def test_equal_static_scalars_of_other_types_get_their_own_program(order):
    f = _add_static()
    for s, dtype in (CASES[i] for i in order):
        out = f(XI, s)
        assert out.dtype == dtype, (s, out.dtype)
        np.testing.assert_array_equal(np.asarray(out), np.asarray(XI + s, dtype))
    assert f.cache_info().misses == 3


def test_static_tuples_are_keyed_by_their_elements_types():
    f = fgrad.jit(lambda x, s: (x + s[0], x + s[1]), static_argnums=1)
    a, b = f(XI, (1, 2.0))
    c, d = f(XI, (1.0, 2))
    assert (a.dtype, b.dtype, c.dtype, d.dtype) == (np.int32, np.float32, np.float32, np.int32)
    Pair = collections.namedtuple("Pair", "a b")
    f(XI, Pair(1, 2.0))                       # a NamedTuple is not the plain tuple
    assert f.cache_info().misses == 3
    g = fgrad.jit(lambda x, s: x + sum(s), static_argnums=1)
    assert g(XI, frozenset({1, 2})).dtype == np.int32
    assert g(XI, frozenset({1.0, 2})).dtype == np.float32


def test_signed_zero_static_values_differ():
    f = fgrad.jit(lambda x, s: x * s, static_argnums=1)
    x = np.ones(2, np.float32)
    for s in (0.0, -0.0, np.float32(-0.0), np.float32(0.0), 0.0):
        np.testing.assert_array_equal(np.signbit(np.asarray(f(x, s))), np.signbit(s))


def test_nan_static_value_finds_its_program_again():
    f = fgrad.jit(lambda x, s: x + s, static_argnums=1)
    x = np.ones(2, np.float32)
    for s in (float("nan"), float("nan"), np.float32("nan"), np.float32("nan")):
        assert np.all(np.isnan(np.asarray(f(x, s))))
    assert f.cache_info().misses == 2      # one program for float NaN, one for float32 NaN


def test_static_argnames_are_keyed_the_same_way():
    f = fgrad.jit(lambda x, *, s: x + s, static_argnames="s")
    assert f(XI, s=1.0).dtype == np.float32
    assert f(XI, s=True).dtype == np.int32


def test_value_key_tells_apart_what_equality_confuses():
    pairs = [(1, 1.0), (1, True), (0.0, -0.0), ((1, 2.0), (1.0, 2)),
             (frozenset({0.0}), frozenset({-0.0})), (np.float32(1), 1.0),
             (np.float32(0.0), np.float32(-0.0)), (complex(0.0, 0.0), complex(-0.0, 0.0))]
    for a, b in pairs:
        assert a == b and value_key(a) != value_key(b), (a, b)
    assert value_key(float("nan")) == value_key(-math.nan)
    assert value_key((1, "a", None)) == value_key((1, "a", None))
    with pytest.raises(TypeError):
        value_key((1, [2]))


def test_cse_params_are_keyed_by_type_and_value():
    assert _param_key(np.float32(0.0)) != _param_key(np.float32(-0.0))
    assert _param_key((1, 2.0)) != _param_key((1.0, 2))
    assert _param_key(1) != _param_key(True)
    Pair = collections.namedtuple("Pair", "a b")
    assert _param_key(Pair(1, 2)) != _param_key((1, 2))


def test_dynamic_python_scalars_keep_their_types_on_every_path():
    f = fgrad.jit(lambda x: x * 2)
    for _ in range(3):                  # past the native call path's warm-up
        assert f(1.0).dtype == np.float32
    assert f(True).dtype == np.int32 and int(f(True)) == 2
    assert f(1).dtype == np.int32
    assert f(np.float64(1.0)).dtype == np.float64
    z = fgrad.jit(lambda x: 1.0 / x)
    assert float(z(0.0)) == np.inf and float(z(-0.0)) == -np.inf
    assert fnp.signbit(z(-0.0))
