"""Donation never changes another array, and Arrays never share memory with NumPy
arrays their owner may write into.

A donated Array's buffer is reused only when nothing else alive observes it
(jit/donation.py); otherwise the call writes into a copy. fgrad.numpy.array,
asarray and copy give Arrays of their own memory, and a jitted function that
closes over a NumPy array sees its value at trace time."""
import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad import lax
from fgrad._src.cpu import outputs

BASE = np.arange(6.0, dtype=np.float32)


def _times_ten():
    return fgrad.jit(lambda v: v * 10.0, donate_argnums=0)


def _base():
    return fnp.arange(6.0) * 1.0          # an Array owning its buffer


VIEWS = {
    "reshape": lambda b: b.reshape(2, 3),
    "slice": lambda b: b[1:4],
    "expand_dims": lambda b: fnp.expand_dims(b, 0),
    "stop_gradient": lambda b: lax.stop_gradient(b),
    "transpose": lambda b: b.reshape(2, 3).T,
    "ravel": lambda b: b.reshape(2, 3).ravel(),
    "squeeze": lambda b: fnp.squeeze(b[None]),
}
# these return the Array itself (as in JAX): donating it uses up that one Array
SAME = {
    "astype (no-op)": lambda b: b.astype(np.float32),
    "asarray": lambda b: fnp.asarray(b),
    "array(copy=False)": lambda b: fnp.array(b, copy=False),
    "real": lambda b: fnp.real(b),
}


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_donating_a_view_leaves_the_base_intact(name):
    base = _base()
    view = VIEWS[name](base)
    out = _times_ten()(view)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(VIEWS[name](BASE * 10)))
    np.testing.assert_array_equal(np.asarray(base), BASE)


@pytest.mark.parametrize("name", sorted(SAME))
def test_conversions_that_return_the_array_itself(name):
    base = _base()
    assert SAME[name](base) is base


def test_donated_numpy_backed_arrays_leave_the_numpy_array_intact():
    src = BASE.copy()
    _times_ten()(fnp.array(src))
    np.testing.assert_array_equal(src, BASE)
    _times_ten()(fnp.asarray(src))
    np.testing.assert_array_equal(src, BASE)


def test_copy_is_a_new_array_and_donating_it_keeps_the_original():
    a = _base()
    c = fnp.copy(a)
    assert c is not a and not np.shares_memory(np.asarray(c), np.asarray(a))
    _times_ten()(c)
    np.testing.assert_array_equal(np.asarray(a), BASE)
    d = fnp.array(a)                   # copy=True by default, as in NumPy
    assert d is not a and not np.shares_memory(np.asarray(d), np.asarray(a))


def test_donating_an_eager_view_of_a_jitted_output():
    out = fgrad.jit(lambda x: x + 1.0)(BASE)
    view = out.reshape(3, 2)
    _times_ten()(view)
    np.testing.assert_array_equal(np.asarray(out), BASE + 1)


def test_a_user_reference_to_the_buffer_is_respected():
    x = _base()
    seen = np.asarray(x)               # a read-only view the user holds
    _times_ten()(x)
    np.testing.assert_array_equal(seen, BASE)


def test_sole_owners_are_still_updated_in_place():
    step = fgrad.jit(lambda w, g: w - 0.5 * g, donate_argnums=0)
    g = np.ones(6, np.float32)
    w = _base()
    for k in range(1, 4):              # each output is donated in turn
        address = w._value.ctypes.data
        w = step(w, g)
        assert w._value.ctypes.data == address
        np.testing.assert_array_equal(np.asarray(w), BASE - 0.5 * k)
    # a temporary's view (its base is referred to by nothing else) is reused too
    w = (fnp.arange(6.0) * 1.0).reshape(2, 3)
    address = w._value.ctypes.data
    w = step(w, g.reshape(2, 3))
    assert w._value.ctypes.data == address


def test_big_outputs_from_the_reused_memory_are_updated_in_place():
    n = outputs.MIN_BYTES // 4        # float32: served from cpu.outputs' kept buffers
    step = fgrad.jit(lambda w: w * 0.5, donate_argnums=0)
    w = fgrad.jit(lambda x: x + 1.0)(np.zeros(n, np.float32))
    assert w._value.base is not None  # a view of a kept buffer
    address = w._value.ctypes.data
    w = step(w)
    assert w._value.ctypes.data == address
    np.testing.assert_array_equal(np.asarray(w[:3]), [0.5, 0.5, 0.5])
    kept = np.asarray(w)               # now observed by a view: copied, not overwritten
    step(w)
    np.testing.assert_array_equal(kept[:3], [0.5, 0.5, 0.5])


def test_arrays_made_from_numpy_do_not_follow_later_writes():
    made = {
        "array": fnp.array, "asarray": fnp.asarray, "reshape": lambda s: fnp.reshape(s, (2, 3)),
        "lax.reshape": lambda s: lax.reshape(s, (2, 3)), "transpose": fnp.transpose,
        "lax.slice": lambda s: lax.slice(s, (1,), (4,)), "stop_gradient": lax.stop_gradient,
        "vmap identity": fgrad.vmap(lambda x: x), "jit identity": fgrad.jit(lambda x: x),
    }
    for name, make in made.items():
        src = BASE.copy()
        out = make(src)
        expected = np.asarray(out).copy()
        src[:] = -1.0
        np.testing.assert_array_equal(np.asarray(out), expected, err_msg=name)


def test_value_and_grad_outputs_do_not_follow_later_writes():
    src = BASE.copy()
    value, aux = fgrad.value_and_grad(lambda x: (fnp.sum(x), x), has_aux=True)(src)[0]
    src[:] = -1.0
    np.testing.assert_array_equal(np.asarray(aux), BASE)


def test_jitted_functions_see_closed_over_numpy_arrays_at_trace_time():
    w = np.ones(3, np.float32)
    s = np.ones((), np.float32)           # 0-d: a Literal of the program
    big = np.ones(1000, np.float32)       # kept as a constant of the program
    f = fgrad.jit(lambda x: x + w + s)
    g = fgrad.jit(lambda x: lax.add(x, big))
    x = np.zeros(3, np.float32)
    np.testing.assert_array_equal(np.asarray(f(x)), 2.0)
    np.testing.assert_array_equal(np.asarray(g(np.zeros(1000, np.float32))), 1.0)
    w[:] = 5.0
    s[...] = 7.0
    big[:] = 9.0
    for _ in range(3):                     # the traced program, on every call path
        np.testing.assert_array_equal(np.asarray(f(x)), 2.0)
        np.testing.assert_array_equal(np.asarray(g(np.zeros(1000, np.float32))), 1.0)


def test_copy_module_copies_survive_donation_of_the_original():
    import copy
    params = {"w": _base(), "b": _base()[:2] * 1.0}
    kept = copy.deepcopy(params)
    shallow = copy.copy(params["w"])
    assert kept["w"] is not params["w"] and shallow is not params["w"]
    step = fgrad.jit(lambda p: fgrad.tree.map(lambda a: a * 10.0, p), donate_argnums=0)
    step(params)
    np.testing.assert_array_equal(np.asarray(kept["w"]), BASE)
    np.testing.assert_array_equal(np.asarray(kept["b"]), BASE[:2])
    np.testing.assert_array_equal(np.asarray(shallow), BASE)
    with pytest.raises(RuntimeError, match="donated"):
        np.asarray(params["w"])


def test_several_donated_arrays_each_updated_in_place_or_copied():
    step = fgrad.jit(lambda a, b, c: (a * 2.0, b * 3.0, c * 4.0), donate_argnums=(0, 1, 2))
    a, b, base = _base(), _base() + 1.0, _base()
    c = base[::-1] * 1.0                      # a fresh array (reversed, then computed)
    shared = base.reshape(2, 3)               # a view of base: must be copied
    addresses = [x._value.ctypes.data for x in (a, b, c)]
    a, b, c = step(a, b, c)
    assert [x._value.ctypes.data for x in (a, b, c)] == addresses
    step2 = fgrad.jit(lambda x, y: (x * 2.0, y * 3.0), donate_argnums=(0, 1))
    y = _base().reshape(2, 3) * 1.0
    address = y._value.ctypes.data
    _, y2 = step2(shared, y)                  # the first is copied, the second reused
    assert y2._value.ctypes.data == address
    np.testing.assert_array_equal(np.asarray(base), BASE)
