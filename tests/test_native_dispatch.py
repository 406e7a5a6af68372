"""The native call path of jitted functions (fgrad/_src/cpu/dispatch.py): a small
program that is one native call is served by a builtin that checks the arguments,
allocates and wraps the outputs in native code; anything else takes the Python
path, which must give the same results and errors."""
import gc
import sys

import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad._src.core import Array
from fgrad._src.cpu import dispatch

from concurrency import run_threads


def served(f):
    """Calls of f served by its current native path."""
    return dispatch.hits(f._fast) if f._fast else 0


def warm(f, *args):
    """Call f until its native path (installed on the second cache hit) has served."""
    for _ in range(4):
        out = f(*args)
    return out


def test_layout_is_known_on_this_interpreter():
    assert dispatch.layout() is not None


def test_small_program_is_served_natively_with_equal_results():
    f = fgrad.jit(lambda x, y: fnp.sin(x) * y + 1.0)
    x = fnp.asarray(np.linspace(-2, 2, 7, dtype=np.float32))
    y = fnp.asarray(np.arange(7, dtype=np.float32))
    warm(f, x, y)
    before = served(f)
    out = f(x, y)
    assert served(f) == before + 1
    assert type(out) is Array and out.dtype == np.float32 and out.weak_type is False
    np.testing.assert_allclose(np.asarray(out), np.sin(np.asarray(x)) * np.asarray(y) + 1,
                               rtol=1e-6)
    hits = f.cache_info().hits
    f(x, y)
    assert f.cache_info() == (hits + 1, 1, 1)


def test_tuple_and_tree_outputs_and_weak_types():
    x = fnp.asarray(np.arange(4.0))
    pair = fgrad.jit(lambda x: (x * 2, x + 1))
    tree = fgrad.jit(lambda x: {"a": x * 2, "b": [x - 1, (x * x,)]})
    weak = fgrad.jit(lambda s: s * 3)
    for f in (pair, tree):
        out = warm(f, x)
        assert f._fast and served(f) >= 1
    a, b = pair(x)
    np.testing.assert_array_equal(a, np.arange(4.0) * 2)
    np.testing.assert_array_equal(b, np.arange(4.0) + 1)
    out = tree(x)
    assert set(out) == {"a", "b"} and isinstance(out["b"], list) and len(out["b"][1]) == 1
    np.testing.assert_array_equal(out["b"][1][0], np.arange(4.0) ** 2)
    s = fnp.asarray(2.0)          # a weakly typed scalar stays weak through the native path
    assert s.weak_type
    out = warm(weak, s)
    assert weak._fast and out.weak_type and float(out) == 6.0


def test_constants_are_read_natively():
    a = np.random.default_rng(0).uniform(size=(5, 5))
    b = np.random.default_rng(1).uniform(size=5)
    f = fgrad.jit(lambda x: fnp.log(b @ x) + x @ (a @ x))
    x = np.linspace(0.5, 1.0, 5)
    out = warm(f, x)
    assert f._fast
    np.testing.assert_allclose(np.asarray(out), np.log(b @ x) + x @ (a @ x), rtol=1e-12)


@pytest.mark.parametrize("other", [
    "new shape", "non-contiguous", "other dtype", "strong to weak", "numpy array",
    "python scalar", "keyword", "list argument"])
def test_arguments_it_does_not_serve_take_the_python_path(other):
    f = fgrad.jit(lambda x, y: x * y + 1.0)
    x = fnp.asarray(np.arange(6.0, dtype=np.float32).reshape(2, 3))
    y = fnp.asarray(np.full((2, 3), 2.0, np.float32))
    warm(f, x, y)
    args, kwargs = {
        "new shape": ((np.ones(3, np.float32), np.ones(3, np.float32)), {}),
        "non-contiguous": ((np.arange(12.0, dtype=np.float32).reshape(2, 6)[:, ::2],
                            np.asarray(y)), {}),
        "other dtype": ((np.arange(6.0).reshape(2, 3), y), {}),
        "strong to weak": ((x, fnp.asarray(2.0)), {}),
        "numpy array": ((np.asarray(x), np.asarray(y)), {}),
        "python scalar": ((x, 2.0), {}),
        "keyword": ((x,), {"y": y}),
        "list argument": ((x, [[2.0] * 3] * 2), {}),
    }[other]
    expected = np.asarray(args[0]) * np.asarray(kwargs.get("y", args[-1])) + 1
    before = served(f)
    out = f(*args, **kwargs)
    np.testing.assert_allclose(np.asarray(out), expected)
    if other != "numpy array":       # NumPy arrays of the same type are served
        assert served(f) == before


def test_wrong_arity_is_the_usual_error():
    f = fgrad.jit(lambda x, y: x * y)
    x = fnp.ones(3)
    warm(f, x, x)
    with pytest.raises(TypeError, match="positional argument"):
        f(x)


def test_transforms_take_the_python_path():
    f = fgrad.jit(lambda x: fnp.sin(x) * x)
    x = fnp.asarray(np.linspace(0, 1, 4))
    warm(f, x)
    before = served(f)
    g = fgrad.grad(lambda x: f(x).sum())(x)
    np.testing.assert_allclose(np.asarray(g), np.cos(np.asarray(x)) * np.asarray(x)
                               + np.sin(np.asarray(x)))
    batched = fgrad.vmap(f)(fnp.stack([x, x]))
    assert batched.shape == (2, 4)
    assert served(f) == before


def test_config_switches_are_honoured_after_the_fast_path_exists():
    calls = []

    def body(x):
        calls.append(1)
        return fnp.log(x)
    f = fgrad.jit(body)
    x = fnp.asarray(np.array([1.0, 2.0]))
    warm(f, x)
    traced = len(calls)
    fgrad.config.update("disable_jit", True)
    try:
        f(x)
        assert len(calls) == traced + 1      # ran eagerly
    finally:
        fgrad.config.update("disable_jit", False)
    f(x)
    assert len(calls) == traced + 1
    fgrad.config.disable_jit = True           # set directly: honoured as well
    try:
        f(x)
        assert len(calls) == traced + 2
    finally:
        fgrad.config.disable_jit = False
    fgrad.config.update("debug_nans", True)
    try:
        with pytest.raises(FloatingPointError):
            f(fnp.asarray(np.array([-1.0, 2.0])))
        with pytest.raises(FloatingPointError):
            f(x * -1)
    finally:
        fgrad.config.update("debug_nans", False)


def test_kernel_errors_are_raised_on_every_call():
    f = fgrad.jit(lambda i, a, b: fgrad.lax.select_n(i, a, b))
    a, b = fnp.zeros(3), fnp.ones(3)
    good = fnp.asarray(np.array([0, 1, 0], np.int32))
    bad = fnp.asarray(np.array([0, 5, 0], np.int32))
    warm(f, good, a, b)
    assert f._fast
    for _ in range(3):
        with pytest.raises(ValueError, match="choice"):
            f(bad, a, b)
    np.testing.assert_array_equal(f(good, a, b), [0.0, 1.0, 0.0])


def test_no_reference_leaks():
    f = fgrad.jit(lambda x, y: (x * y, x - y))
    x, y = fnp.asarray(np.arange(5.0)), fnp.asarray(np.ones(5))
    warm(f, x, y)
    assert f._fast
    refs = sys.getrefcount(x), sys.getrefcount(x._value), sys.getrefcount(np.empty)
    gc.collect()
    objects = len(gc.get_objects())
    for _ in range(2000):
        out = f(x, y)
    del out
    gc.collect()
    assert len(gc.get_objects()) <= objects + 5
    assert (sys.getrefcount(x), sys.getrefcount(x._value), sys.getrefcount(np.empty)) == refs
    first, second = f(x, y)
    counts = sys.getrefcount(first), sys.getrefcount(second._value)
    assert counts == (2, 2)


def test_concurrent_calls_from_threads():
    f = fgrad.jit(lambda x, y: x * y + x)
    warm(f, fnp.ones(64), fnp.ones(64))
    errors = []

    def work(seed):
        rng = np.random.default_rng(seed)
        for _ in range(300):
            x, y = rng.normal(size=64), rng.normal(size=64)
            if not np.allclose(np.asarray(f(x, y)), x * y + x, rtol=1e-12, atol=1e-12):
                errors.append(seed)
    run_threads(work, [(s,) for s in range(4)])
    assert not errors and served(f) > 0


def test_large_and_donated_programs_keep_the_python_path():
    big = fgrad.jit(lambda x: x * 2)
    x = fnp.ones(dispatch.MAX_BYTES // 8 + 1)
    warm(big, x)
    assert not big._fast
    step = fgrad.jit(lambda w, g: w - 0.1 * g, donate_argnums=0)
    w, g = fnp.ones(4), fnp.ones(4)
    for _ in range(3):
        w = step(w, g)
    assert not step._fast
    np.testing.assert_allclose(np.asarray(w), 0.7, rtol=1e-6)


def test_a_failed_allocation_raises_and_releases_what_was_made():
    """The native path's error exit: the outputs made before the failure are freed."""
    import weakref
    f = fgrad.jit(lambda x: (x * 2, x + 1))
    x = fnp.ones(3)
    warm(f, x)
    entry = next(iter(f._cache.values()))
    made = []

    def allocate(shape, dtype):
        if made:
            raise MemoryError("no room for the second output")
        made.append(weakref.ref(out := np.empty(shape, dtype)))
        return out
    native, call_map, constants = entry.executable.native_call()
    avals = [(v.aval.shape, v.aval.dtype, v.aval.weak_type)
             for v in entry.jaxpr.jaxpr.invars]
    outs = [(v.aval.shape, v.aval.dtype, False) for v in entry.jaxpr.jaxpr.outvars]
    fast = dispatch.fast_function(native, avals, call_map, constants, outs, None, True,
                                  entry.executable, allocate=allocate)
    with pytest.raises(MemoryError, match="second output"):
        fast(x)
    gc.collect()
    assert len(made) == 1 and made[0]() is None
    with pytest.raises(MemoryError):     # now the first allocation fails: none to free
        fast(x)
