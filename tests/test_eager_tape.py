"""Eager reverse mode on the tape (fgrad/_src/tape.py) gives the jaxpr path's
gradients bit for bit: every primitive the tape records with its own rules is
differentiated both ways (config.eager_tape on and off) in float64 and checked
numerically; the cases the tape hands to the jaxpr path (custom rules, control
flow, jit, nested grad) agree too. Also: the Array operators' dispatch table
(core.OPERATOR_PRIMITIVES) gives what the fgrad.numpy functions give."""
import gc
import operator

import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
import fgrad.scipy.special
from fgrad import lax
from fgrad._src import ad, core, tape, tree_util
from fgrad._src.ad import TAPE_BILINEAR, TAPE_DIAGONAL, TAPE_JOINT, TAPE_LINEAR
from fgrad._src.lax import windows
from fgrad._src.errors import ConcretizationError, EscapedTracerError
from fgrad.test_util import check_grads


@pytest.fixture
def jaxpr_path():
    """Run a block with the tape off (restored after the test)."""
    yield lambda on: fgrad.config.update("eager_tape", not on)
    fgrad.config.update("eager_tape", True)


def _both(jaxpr_path, fn):
    """fn() with the tape on, then off."""
    jaxpr_path(False)
    on = fn()
    jaxpr_path(True)
    off = fn()
    jaxpr_path(False)
    return on, off


def _same_bits(a, b):
    for x, y in zip(tree_util.leaves(a), tree_util.leaves(b)):
        if not hasattr(x, "dtype"):
            assert x == y
            continue
        assert x.dtype == y.dtype
        assert getattr(x, "weak_type", False) == getattr(y, "weak_type", False)
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y), strict=True)


def _loss(out):
    """A real scalar that weighs every output element differently."""
    w = fnp.linspace(0.5, 1.5, out.size).reshape(out.shape)
    if fnp.iscomplexobj(out):
        return fnp.sum(lax.real(out) * w + lax.imag(out) * w * w)
    return fnp.sum(out * w)


def _arg(shape, lo=0.2, hi=0.8, seed=0):
    return np.random.default_rng(seed).uniform(lo, hi, shape)


# Inputs outside (0.2, 0.8) for primitives whose domain needs them.
_DOMAIN = {"acosh": (1.2, 2.0), "zeta": (1.5, 3.0), "zetac": (1.5, 3.0)}
_COMPLEX_ONLY = {"conj", "imag", "real"}


def _diagonal_primitives():
    gc.collect()
    prims = {p.name: p for p in gc.get_objects() if isinstance(p, core.Primitive)}
    return sorted((p for p in prims.values() if p.tape is TAPE_DIAGONAL), key=lambda p: p.name)


class _Consulted(BaseException):
    """A trace was consulted where none may be."""


class _NoTrace(core.Trace):
    """Current where code must do NumPy work only: binding anything fails."""
    def process_primitive(self, prim, args, params):
        raise _Consulted(prim.name)

    def lean_float(self, prim, x, y, swap):
        raise _Consulted(prim.name)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("prim", _diagonal_primitives(), ids=lambda p: p.name)
def test_diagonal_impls_do_numpy_work_only(prim, dtype):
    """The tape's lean path runs an element-wise impl with the tape still current
    (tape.lean_float): no impl may bind a primitive or ask the current trace."""
    n = len(prim.jvp_rules)
    lo, hi = _DOMAIN.get(prim.name, (0.2, 0.8))
    for x in (np.linspace(lo, hi, 4, dtype=dtype), dtype(lo)):
        for impl in {prim.impl, prim.float_impl} - {None}:
            with core.set_current_trace(_NoTrace()):
                try:
                    impl(*[x] * n)
                except Exception:   # noqa: BLE001 - e.g. it needs parameters: never lean
                    pass


def test_the_no_trace_check_catches_a_binding_impl():
    with pytest.raises(_Consulted), core.set_current_trace(_NoTrace()):
        lax.sin(np.float32(0.5))


@pytest.mark.parametrize("prim", _diagonal_primitives(), ids=lambda p: p.name)
def test_diagonal_primitive_tape_matches_jaxpr_path(prim, jaxpr_path):
    n = len(prim.jvp_rules)
    lo, hi = _DOMAIN.get(prim.name, (0.2, 0.8))
    params = {"y": 3} if prim.name == "integer_pow" else {}
    # operands of different shapes: the tape sums the broadcast cotangents back
    shapes = [(3, 4), (4,), (1, 4)][:n]
    args = [_arg(s, lo, hi, seed=i) for i, s in enumerate(shapes)]
    if prim.name in _COMPLEX_ONLY:
        args = [a + 1j * a[::-1] for a in args]

    def f(*xs):
        return _loss(prim.bind(*xs, **params))

    argnums = tuple(i for i, r in enumerate(prim.jvp_rules) if r is not None)
    on, off = _both(jaxpr_path, lambda: fgrad.grad(f, argnums=argnums)(*args))
    _same_bits(on, off)


_WINDOW = dict(window_dimensions=(2, 2), window_strides=(1, 2), window_dilation=(1, 1))
LINEAR_CASES = {
    "broadcast_in_dim": lambda x: fnp.broadcast_to(x[0], (2, 3, 4)),
    "cumsum": lambda x: fnp.cumsum(x, axis=1),
    "dynamic_slice": lambda x: lax.dynamic_slice(x, (1, 1), (2, 2)),
    "expand_dims": lambda x: fnp.expand_dims(x, 1),
    "fft": lambda x: fnp.fft.fft(x),
    "gather": lambda x: x[np.array([2, 0, 2])],
    "reduce_sum": lambda x: fnp.sum(x, axis=0),
    "reshape": lambda x: x.reshape(4, 3),
    "rev": lambda x: fnp.flip(x, 1),
    "slice": lambda x: x[1:, ::2],
    "squeeze": lambda x: fnp.squeeze(x[:1]),
    "transpose": lambda x: x.T,
    "convert_element_type": lambda x: fnp.real(x.astype(np.complex128) * (1 + 2j)),
    "dot_general": lambda x: x @ fnp.sin(x).T,
    "select_n": lambda x: fnp.where(x > 0.5, x, fnp.sin(x)) + fnp.where(x < 0.4, x, 0.0),
    "concatenate": lambda x: fnp.concatenate([x, fnp.exp(x), x[:1], np.ones((1, 4))]),
    "pad": lambda x: lax.pad(x, fnp.sum(x), [(1, 2, 1), (0, 1, 0)]),
    "select_and_gather_add": lambda x: windows.select_and_gather_add_p.bind(
        fnp.sin(x), x, **_WINDOW),
    "select_and_scatter_add": lambda x: windows.select_and_scatter_add_p.bind(
        fnp.sin(x[:2, :2]), x, **_WINDOW),
}
# The tape's linear primitives that need a running MPI job (tests/test_distributed.py).
_EXEMPT = {"mpi_allgather", "mpi_broadcast", "mpi_reduce_scatter"}


def test_every_linear_primitive_has_a_case():
    gc.collect()
    names = {p.name for p in gc.get_objects() if isinstance(p, core.Primitive)
             and p.tape in (TAPE_LINEAR, TAPE_BILINEAR, TAPE_JOINT)}
    covered = set()
    for fn in LINEAR_CASES.values():
        closed = fgrad.make_jaxpr(fn)(_arg((3, 4)))
        covered |= {e.primitive.name for e in closed.jaxpr.eqns}
    assert names - _EXEMPT <= covered, names - _EXEMPT - covered


@pytest.mark.parametrize("name", sorted(LINEAR_CASES))
def test_linear_primitive_tape_matches_jaxpr_path(name, jaxpr_path):
    fn = LINEAR_CASES[name]
    x = _arg((3, 4))
    on, off = _both(jaxpr_path, lambda: fgrad.grad(lambda x: _loss(fn(x)))(x))
    _same_bits(on, off)
    check_grads(lambda x: _loss(fn(x)), (x,), order=1, modes="rev")


def _tiny(x):
    return fnp.sin(x) * x + 1


@fgrad.custom_jvp
def _softplus(x):
    return fnp.log1p(fnp.exp(x))


_softplus.defjvp(lambda primals, tangents: (_softplus(primals[0]),
                                            tangents[0] * lax.logistic(primals[0])))


@fgrad.custom_vjp
def _clip_grad(x):
    return x * 2


_clip_grad.defvjp(lambda x: (x * 2, x), lambda x, g: (fnp.clip(g * 2, -1, 1),))

MIXED_CASES = {
    "tiny": _tiny,
    "custom_jvp": lambda x: fnp.sum(_softplus(x) * x),
    "custom_vjp": lambda x: fnp.sum(_clip_grad(x) * fnp.cos(x)),
    "where": lambda x: fnp.sum(fnp.where(x > 0.5, x * x, fnp.exp(x))),
    "maximum": lambda x: fnp.sum(fnp.maximum(x, 0.5) ** 2),
    "jit": lambda x: fnp.sum(fgrad.jit(lambda y: fnp.tanh(y) * y)(x) * x),
    "cond": lambda x: fnp.sum(lax.cond(fnp.sum(x) > 0, lambda y: y * fnp.sin(y),
                                       lambda y: -y, x)),
    "scan": lambda x: fnp.sum(lax.scan(lambda c, y: (c * y + fnp.sin(c), c), x[0], x)[0]),
    "vmap": lambda x: fnp.sum(fgrad.vmap(lambda r: fnp.dot(r, fnp.cos(r)))(x)),
    "grad_inside": lambda x: fnp.sum(fgrad.grad(lambda y: fnp.sum(fnp.sin(y) ** 3))(x) * x),
    "int_pow": lambda x: fnp.sum(x ** 3 - 2 * x ** 2),
    "mean_var": lambda x: fnp.mean(x) * fnp.var(x),
    "logsumexp": lambda x: fgrad.scipy.special.logsumexp(x),
    "linalg": lambda x: fnp.linalg.slogdet(x.T @ x + fnp.eye(4))[1],
}


@pytest.mark.parametrize("name", sorted(MIXED_CASES))
def test_mixed_function_tape_matches_jaxpr_path(name, jaxpr_path):
    fn = MIXED_CASES[name]
    x = _arg((3, 4)) - 0.3
    f = (lambda x: fnp.sum(fn(x))) if name == "tiny" else fn
    on, off = _both(jaxpr_path, lambda: fgrad.value_and_grad(f)(x))
    _same_bits(on, off)
    check_grads(f, (x,), order=1, modes="rev")


def test_grad_of_grad_is_exact_on_the_tape(jaxpr_path):
    f = lambda x: fnp.sin(x) * x ** 2 + fnp.exp(-x)          # noqa: E731
    for x in (0.3, np.float64(-1.2), np.float32(0.7)):
        on, off = _both(jaxpr_path, lambda: fgrad.grad(fgrad.grad(fgrad.grad(f)))(x))
        _same_bits(on, off)
    check_grads(lambda x: fgrad.grad(f)(x), (np.float64(0.4),), order=2, modes="rev")


def test_tape_path_builds_no_jaxpr(monkeypatch):
    """A top-level grad of recordable primitives never linearizes through a jaxpr."""
    def refuse(*args, **kwargs):
        raise AssertionError("the jaxpr path ran")
    monkeypatch.setattr(ad, "linearize_flat", refuse)
    monkeypatch.setattr(fgrad._src.api, "linearize_flat", refuse)
    g = fgrad.grad(lambda x: fnp.sum(fnp.tanh(x) @ x.T * 2.0))(_arg((3, 3)))
    assert g.shape == (3, 3)


def test_a_loaded_device_backend_leaves_host_code_on_the_tape(monkeypatch):
    """Once a device library has loaded (CuPy imported by anything), host arrays
    still take the tape; only a device result sends the call to the jaxpr path."""
    from fgrad._src import placement

    class DeviceArray:
        pass

    monkeypatch.setattr(placement, "array_types", (DeviceArray,))
    test_tape_path_builds_no_jaxpr(monkeypatch)


def test_transforms_and_checks_use_the_jaxpr_path(monkeypatch, jaxpr_path):
    calls = []     # one per call that ran on the tape (either entry point)

    def counted(real):
        def run(*args):
            out = real(*args)
            if out is not None:
                calls.append(1)
            return out
        return run

    for name in ("linearize_flat", "value_and_grad_one"):
        monkeypatch.setattr(tape, name, counted(getattr(tape, name)))
    f = fgrad.grad(_tiny)
    f(0.5)
    assert calls == [1]
    fgrad.jit(f)(0.5)
    fgrad.vmap(f)(np.ones(3, np.float32))
    fgrad.config.update("debug_nans", True)
    try:
        f(0.5)
    finally:
        fgrad.config.update("debug_nans", False)
    jaxpr_path(True)
    f(0.5)
    assert calls == [1]


def test_custom_rule_closing_over_a_traced_value_starts_again(jaxpr_path):
    """The tape cannot record a custom rule closing over its values: the call runs
    again on the jaxpr path, with the same result."""
    def f(x):
        @fgrad.custom_jvp
        def scaled(y):
            return y * x

        scaled.defjvp(lambda p, t: (scaled(p[0]), t[0] * x))
        return fnp.sum(scaled(fnp.sin(x)))

    x = _arg((3,))
    on, off = _both(jaxpr_path, lambda: fgrad.value_and_grad(f)(x))
    _same_bits(on, off)


def test_api_options_on_the_tape(jaxpr_path):
    def f(x, n, y):
        return fnp.sum(fnp.sin(x["a"]) * y) + n * fnp.sum(x["b"]), {"n": n}

    args = ({"a": _arg((2,)), "b": np.float32(0.5)}, 3, 2.0)
    for kw in ({"argnums": (0, 2)}, {"argnums": 0}, {"argnums": (1, 2), "allow_int": True}):
        on, off = _both(jaxpr_path, lambda: fgrad.value_and_grad(f, has_aux=True, **kw)(*args))
        _same_bits(on, off)
    with pytest.raises(TypeError, match="cannot differentiate with respect to an input"):
        fgrad.grad(lambda n: n * 2.0, argnums=0)(3)


def test_vjp_on_the_tape(jaxpr_path):
    f = lambda x, y: (fnp.sin(x) * y, fnp.cumsum(x) @ y)     # noqa: E731
    x, y = _arg((3,)), _arg((3,), seed=1)
    ct = (np.ones(3), 2.0)

    def run():
        out, pullback = fgrad.vjp(f, x, y)
        return out, pullback(ct), pullback(ct)      # a pullback may run twice
    on, off = _both(jaxpr_path, run)
    _same_bits(on, off)
    # a float64 cotangent of a weakly typed output widens (the jaxpr path, again)
    on, off = _both(jaxpr_path, lambda: fgrad.vjp(fnp.sin, 0.5)[1](np.float64(1.0)))
    _same_bits(on, off)


def test_tape_tracers_keep_their_errors():
    leaked = []

    def f(x):
        leaked.append(x)
        return fnp.sum(x * x)

    fgrad.grad(f)(_arg((2,)))
    with pytest.raises(EscapedTracerError, match="grad of f"):
        leaked[0] + 1
    with pytest.raises(ConcretizationError, match="drop its derivative"):
        fgrad.grad(lambda x: float(x) * x)(0.5)
    assert fgrad.grad(lambda x: x * 2 if x > 0 else x)(0.5) == 2   # bool() sees the value


# ----------------------------------------------------------------------------
# The Array operators' dispatch table

_OPERATORS = [(operator.add, "add"), (operator.sub, "subtract"), (operator.mul, "multiply"),
              (operator.truediv, "true_divide")]
_OPERANDS = [fnp.asarray(np.float32([1.5, -2.0])), fnp.asarray(np.float64([3.0, 0.5])),
             fnp.asarray(np.float32(2.0)) * 1.0, fnp.asarray(np.complex64([1 + 2j, 3])),
             fnp.asarray(np.int32([1, 2])), fnp.asarray(np.float32([1.0, 2.0, 3.0])),
             2, 2.5, True, 1j, 10 ** 40, np.float32(1.5), np.float64(2.0),
             np.array([1.0, 2.0], np.float32), np.array([4.0, 5.0]), np.int8(3)]


def _outcome(fn, *args):
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001 - compared between the two ways
        return (type(e), str(e))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")   # 10 ** 40 in float32, both ways
@pytest.mark.parametrize("op,name", _OPERATORS, ids=[n for _, n in _OPERATORS])
def test_operators_match_fgrad_numpy(op, name):
    fn = getattr(fnp, name)
    for a in _OPERANDS[:6]:
        for b in _OPERANDS:
            for x, y in ((a, b), (b, a)):
                got, want = _outcome(op, x, y), _outcome(fn, x, y)
                if isinstance(want, tuple):
                    assert got == want
                else:
                    _same_bits(got, want)
    for a in _OPERANDS[:6]:
        _same_bits(-a, fnp.negative(a)) if a.dtype.kind != "b" else None


_LEAN_OPERANDS = [np.float32([0.5, -1.5]), np.float64(0.25), 0.75, 2, 1j, True,
                  np.int32(3), np.array([1.0, 2.0], np.float32), fnp.asarray(np.float32(2.0)),
                  fnp.asarray(0.5)]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("op,name", _OPERATORS, ids=[n for _, n in _OPERATORS])
def test_lean_operators_on_the_tape_match_jaxpr_path(op, name, jaxpr_path):
    """The tape's lean path (operators and fgrad.numpy's unary functions, Python
    numbers lifted there) records what promote-and-bind records, for every operand
    kind on either side."""
    def f(x, c):
        y = fnp.sin(op(x, c)) + -fnp.exp(op(c, x))
        return fnp.sum(fnp.real(y) if fnp.iscomplexobj(y) else y)
    for x in (np.float32([0.3, 0.6]), np.float64(0.4), 0.4):
        for c in _LEAN_OPERANDS:
            run = lambda: _outcome(fgrad.value_and_grad(f), x, c)   # noqa: E731
            on, off = _both(jaxpr_path, run)
            if isinstance(off, tuple) and isinstance(off[0], type):
                assert on == off
            else:
                _same_bits(on, off)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_lean_operators_leave_integer_constants_to_promotion(jaxpr_path):
    """On the tape, an integer Array and a Python number promote as in fgrad.numpy
    (the lean path must not lift the number to the integer dtype)."""
    c = fnp.asarray(np.int32([1, 2]))

    def f(x):
        return fnp.sum(x * (c * 1e40 > 0) + c * 2.5 + 2.5 * c - c * 3)
    on, off = _both(jaxpr_path, lambda: fgrad.value_and_grad(f)(np.float32([1.0, 2.0])))
    _same_bits(on, off)


@pytest.mark.parametrize("name", ["mul", "add", "sub", "div", "atan2", "pow"])
def test_tape_entry_with_a_raw_numpy_operand(name):
    """An element-wise primitive bound to a raw NumPy operand (a closed jaxpr
    evaluated on the tape, given a plain ndarray) is recorded by the general path;
    its backward must run the rule on the operands as given, whether or not the
    lean NumPy rules are on (they used to read `._value` of the raw operand)."""
    from fgrad._src.jaxpr import eval_closed
    x = np.array([0.5, 1.25, 2.0], np.float32)
    op = getattr(lax, name)

    def f(y):
        closed = fgrad.make_jaxpr(lambda x: op(fnp.sin(y) + 2.0, x))(x)
        return fnp.sum(eval_closed(closed, x)[0])

    def reference(y):
        return fnp.sum(op(fnp.sin(y) + 2.0, fnp.asarray(x)))

    y = np.array([0.3, -0.7, 1.1], np.float32)
    got = fgrad.grad(f)(y)
    want = fgrad.grad(reference)(y)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_lean_entries_hold_numpy_values_and_free_without_the_collector():
    """Element-wise ops on the tape record flat entries of NumPy values (no Arrays or
    tracers: a tracer on the tape would make a reference cycle through its trace),
    the traced values are TapeTracers, and the tape is freed by reference counting
    alone once the gradient is taken (its memory never waits for the collector)."""
    import weakref
    traces = []

    def f(x):
        y = fnp.sin(x) * 1.5 + x     # sin, a constant operand, two traced operands
        assert type(y) is tape.TapeTracer and y.primal.weak_type is False
        traces.append(weakref.ref(y._trace))
        return fnp.sum(y * y)

    x = np.linspace(-1, 1, 5, dtype=np.float32)
    gc.disable()
    try:
        got = fgrad.grad(f)(x)
        assert traces and traces[0]() is None   # freed already: no cycle
    finally:
        gc.enable()
    want = (np.cos(x) * np.float32(1.5) + 1) * 2 * (np.sin(x) * np.float32(1.5) + x)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)

    ts = core.thread_state()
    trace = tape.TapeTrace(ts.trace, "test", ts)
    prev = core.enter_trace(ts, trace)
    try:
        t = trace.new_node(core.Array(x))
        fnp.sin(t) * 1.5 + t
    finally:
        core.leave_trace(ts, prev)
    assert [e[0] for e in trace.entries] == [tape._LEAN1, tape._LEAN2, tape._LEAN2]
    for entry in trace.entries:
        assert not any(isinstance(v, (core.Array, core.Tracer)) for v in entry), entry
