"""The eager grad's lean layers give what the general layers give, bit for bit:
the tape's NumPy backward rules (ad.deftape) against the defjvp rules on the
jaxpr path, special values included, and grad's single-argument path against
the pytree path (values, dtypes, weak types, errors)."""
import gc

import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad._src import core

# Operand values that reach each rule's corner cases (zeros of both signs, inf, nan,
# negatives for log and sqrt); the second operand is a shifted copy.
_VALUES = [0.0, -0.0, 0.5, -1.5, 3.0, np.inf, -np.inf, np.nan, 1e-30, 7.0]


def _tape_rule_primitives():
    gc.collect()
    prims = {p.name: p for p in gc.get_objects() if isinstance(p, core.Primitive)}
    return sorted((p for p in prims.values() if p.tape_rules is not None),
                  key=lambda p: p.name)


@pytest.fixture
def tape_off():
    yield lambda off: fgrad.config.update("eager_tape", not off)
    fgrad.config.update("eager_tape", True)


def _bits(x):
    x = np.asarray(x)
    return x.dtype, x.shape, x.tobytes()


def test_common_primitives_have_numpy_tape_rules():
    names = {p.name for p in _tape_rule_primitives()}
    assert {"add", "sub", "mul", "div", "neg", "sin", "cos", "exp", "log", "tanh",
            "sqrt"} <= names


def _three_ways(run, tape_off, monkeypatch):
    """run() on the tape with its NumPy rules, on the tape with the defjvp rules
    alone, and on the jaxpr path."""
    tape_off(False)
    lean = run()
    with monkeypatch.context() as m:
        for p in _tape_rule_primitives():
            m.setattr(p, "tape_rules", None)
        rules = run()
    tape_off(True)
    off = run()
    tape_off(False)
    return lean, rules, off


def _check(lean, rules, off):
    """The NumPy rules give the defjvp rules' bits exactly (NaN signs and -0 too);
    the jaxpr path the same values (it may order a NaN's negation differently)."""
    for a, b, c in zip(lean, rules, off):
        assert a.weak_type == b.weak_type == c.weak_type
        assert _bits(a) == _bits(b)
        np.testing.assert_array_equal(np.asarray(a), np.asarray(c), strict=True)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("prim", _tape_rule_primitives(), ids=lambda p: p.name)
def test_numpy_tape_rules_give_the_defjvp_rules_bits(prim, dtype, tape_off, monkeypatch):
    n = len(prim.jvp_rules)
    x = np.array(_VALUES, dtype)
    args = [x, np.roll(x, 3)][:n]
    w = np.linspace(-2, 2, len(x)).astype(dtype)   # a cotangent with both signs

    def f(*xs):
        return fnp.sum(prim.bind(*xs) * w)

    _check(*_three_ways(lambda: fgrad.grad(f, argnums=tuple(range(n)))(*args),
                        tape_off, monkeypatch))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("prim", _tape_rule_primitives(), ids=lambda p: p.name)
def test_numpy_tape_rules_broadcast_and_take_weak_cotangents(prim, tape_off, monkeypatch):
    """Broadcast operands are summed back; a weakly typed cotangent (vjp of a weak
    output) takes the defjvp rules."""
    n = len(prim.jvp_rules)
    args = [np.linspace(0.2, 0.8, 12, dtype=np.float32).reshape(3, 4),
            np.linspace(0.3, 0.9, 4, dtype=np.float32)][:n]

    def run():
        _, pull = fgrad.vjp(lambda *xs: prim.bind(*xs) * 2.0, *args)
        strong = pull(fnp.ones((3, 4)))
        _, pull = fgrad.vjp(lambda x: prim.bind(*([x] * n)), 0.5)
        return strong + pull(1.0)

    _check(*_three_ways(run, tape_off, monkeypatch))


def _outcome(fn, *args):
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001 - compared between the two paths
        return type(e), str(e)


def _general(fn, **kw):
    """fgrad.grad(fn) through the pytree path: the argument wrapped in a tuple."""
    g = fgrad.value_and_grad(lambda t: fn(t[0]), **kw)
    return lambda x: (lambda vg: (vg[0], vg[1][0]))(g((x,)))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("x", [np.float32(0.5), 0.5, np.float64(-1.25), np.float16(0.75),
                               np.array([0.5, 2.0], np.float32), fnp.asarray(0.5), 2,
                               np.int32(2), 1.5j, np.complex64(1 + 1j)],
                         ids=lambda x: f"{type(x).__name__}")
@pytest.mark.parametrize("fn", [lambda x: fnp.sin(x) * x + 1, lambda x: x,
                                lambda x: fnp.sum(x * x), lambda x: x * fnp.ones(2),
                                lambda x: 3.0, lambda x: fnp.real(x) * 2],
                         ids=["tiny", "identity", "sum", "vector", "constant", "real"])
def test_single_argument_grad_matches_pytree_path(fn, x):
    lean = _outcome(fgrad.value_and_grad(fn), x)
    general = _outcome(_general(fn), x)
    if isinstance(general[0], type):
        assert lean[0] is general[0]
        assert lean[1].replace("<lambda>", "") == general[1].replace("<lambda>", "")
        return
    for a, b in zip(lean, general):
        assert a.weak_type == b.weak_type
        assert _bits(a) == _bits(b)


def test_single_argument_grad_does_not_share_the_callers_array():
    x = np.array([1.0, 2.0])
    g = fgrad.grad(lambda v: fnp.sum(v))(x)
    v, _ = fgrad.value_and_grad(lambda v: v[0])(x)
    x[0] = 5.0
    assert float(v) == 1.0
    np.testing.assert_array_equal(np.asarray(g), [1.0, 1.0])


@pytest.mark.parametrize("how", ["grad", "two arguments", "vjp"])
def test_escaped_tracer_error_names_the_users_line(how):
    leaked = []

    def f(x, y=1.0):
        leaked.append(x)
        return fnp.sin(x) * y

    if how == "grad":
        line = _line() + 1
        fgrad.grad(f)(np.float32(0.5))
    elif how == "two arguments":
        line = _line() + 1
        fgrad.grad(f)(np.float32(0.5), 2.0)
    else:
        line = _line() + 1
        fgrad.vjp(f, np.float32(0.5))
    with pytest.raises(fgrad.EscapedTracerError, match=f"applied at {__file__}:{line} "):
        leaked[0] + 1.0


@pytest.mark.parametrize("how", ["jvp", "vmap"])
def test_escaped_tracer_error_names_the_line_of_the_call(how):
    # traces keep the calling instruction's offset; the message maps it to its line
    leaked = []

    def f(x):
        leaked.append(x)
        return fnp.sin(x)

    x = np.float32(0.5)
    if how == "jvp":
        line = _line() + 1
        fgrad.jvp(f, (x,), (x,))
    else:
        line = _line() + 1
        fgrad.vmap(f)(np.ones(3, np.float32))
    with pytest.raises(fgrad.EscapedTracerError, match=f"applied at {__file__}:{line} "):
        leaked[0] + 1.0


@pytest.mark.parametrize("how", ["raised", "value_and_grad", "constant output", "array"])
def test_escaped_tracer_error_names_the_line_on_every_lean_exit(how):
    """The lean path finds the user's line at the end of the call, where a traced
    value outlives it: after an error too, and whatever the output was."""
    leaked = []

    def f(x):
        leaked.append(x)
        if how == "raised":
            raise ValueError("stop")
        return 2.0 if how == "constant output" else fnp.sum(fnp.sin(x))

    x = np.ones(3, np.float32) if how == "array" else np.float32(0.5)
    transform = fgrad.value_and_grad if how == "value_and_grad" else fgrad.grad
    with pytest.raises(ValueError) if how == "raised" else _no_error():
        line = _line() + 1
        transform(f)(x)
    with pytest.raises(fgrad.EscapedTracerError, match=f"applied at {__file__}:{line} "):
        leaked[0] + 1.0


def _no_error():
    import contextlib
    return contextlib.nullcontext()


def test_lean_grad_looks_for_the_users_line_only_when_a_traced_value_survives(monkeypatch):
    marked = []
    real = core.Trace.mark_origin

    def mark_origin(self, skip=0):
        marked.append(self.description)
        real(self, skip + 1)

    monkeypatch.setattr(core.Trace, "mark_origin", mark_origin)
    kept = []
    g = fgrad.grad(lambda x: fnp.sin(x) * x + 1)
    assert float(g(np.float32(0.5))) == pytest.approx(np.cos(0.5) * 0.5 + np.sin(0.5))
    assert marked == []
    fgrad.grad(lambda x: kept.append(x) or fnp.sin(x))(np.float32(0.5))
    assert marked == ["grad of <lambda>"]


def _line():
    import sys
    return sys._getframe(1).f_lineno


def test_user_frame_past_the_outermost_frame_is_none():
    from fgrad._src.errors import user_frame
    assert user_frame(skip=10 ** 6) is None
