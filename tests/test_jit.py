"""jit: values equal eager for many programs (pytrees, dtypes, weak types), the
decorator forms and static arguments, the trace cache (one trace per key, hits,
misses and the reasons for them), lower()/as_text()/compile(), composition with
every transform in both directions (each checked against eager), concretization
errors, the config switches and their environment variables, and a property
test of random programs compiled vs eager. JAX's jit semantics are the spec."""
import ast
import logging
import os
import re
import subprocess
import sys
import warnings
from typing import NamedTuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fgrad
import fgrad.numpy as fnp
from fgrad import jit, lax
from fgrad._src.jaxpr import check_jaxpr

from tree_asserts import assert_trees_close

f64 = np.float64
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _np(x):
    return np.asarray(x)


_close = assert_trees_close


def _weak(x):
    return bool(getattr(x, "weak_type", False))


@pytest.fixture
def restore_config():
    """Put disable_jit / log_compiles back however the test ends."""
    saved = (fgrad.config.disable_jit, fgrad.config.log_compiles)
    yield
    fgrad.config.update("disable_jit", saved[0])
    fgrad.config.update("log_compiles", saved[1])


@pytest.fixture
def rng():
    return np.random.default_rng(0)


class Pair(NamedTuple):
    a: object
    b: object


# ----------------------------------------------------------------------------
# Values equal eager

def _mlp(p, x):
    h = fnp.tanh(x @ p["w1"] + p["b1"])
    return fgrad.nn.log_softmax(h @ p["w2"], axis=-1)


def _indexing(x):
    y = x.at[0].set(3.0).at[1:, 1].add(x[0, :2]).at[:, -1].multiply(2.0)
    return y[::-1, 1:], x[1], x[:, 0], x[0, 1]


PROGRAMS = [
    ("elementwise", lambda x, y: fnp.sin(x) * fnp.exp(-y) + fnp.sqrt(fnp.abs(x)) - x / 3.0),
    ("reductions", lambda x, y: (fnp.sum(x), fnp.max(x, axis=0), fnp.mean(y, axis=1),
                                 fnp.prod(x[:2, :2]), fnp.min(y, axis=(0, 1)))),
    ("matmul", lambda x, y: (x @ y.T, fnp.dot(x[0], y[1]), fnp.einsum("ij,kj->ik", x, y))),
    ("lax", lambda x, y: lax.add(lax.mul(x, y), lax.tanh(lax.sub(x, y)))),
    ("broadcast_row", lambda x, y: x * y[0] + fnp.expand_dims(y[:, 0], 1)),
    ("indexing_at", lambda x, y: _indexing(x)),
    ("where_clip", lambda x, y: fnp.where(x > y, fnp.clip(x, -0.5, 0.5), y * y)),
    ("shapes", lambda x, y: (fnp.reshape(x, (-1,)), fnp.transpose(y), fnp.concatenate([x, y]),
                             fnp.stack([x, y], axis=-1)[..., 0], fnp.cumsum(x, axis=1))),
    ("nn", lambda x, y: (fgrad.nn.relu(x), fgrad.nn.softmax(x, axis=-1), fgrad.nn.gelu(y),
                         fgrad.nn.sigmoid(x), fgrad.nn.logsumexp(y, axis=0),
                         fgrad.nn.one_hot(fnp.argmax(x, axis=1), 4))),
    ("integer", lambda x, y: (fnp.argmax(x), fnp.arange(5) * 2, (x > 0).sum())),
]


@pytest.mark.parametrize("name,f", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_values_equal_eager(name, f, rng):
    x, y = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    eager = f(fnp.asarray(x), fnp.asarray(y))
    jf = jit(f)
    _close(jf(x, y), eager)
    # a second call takes the cached (fast) path and gives the same result
    _close(jf(x, y), eager)


def test_mlp_pytree_params(rng):
    p = {"w1": rng.normal(size=(4, 5)), "b1": rng.normal(size=5), "w2": rng.normal(size=(5, 3))}
    x = rng.normal(size=(6, 4))
    jf = jit(_mlp)
    _close(jf(p, x), _mlp(p, x))
    _close(jf(p, x), _mlp(p, x))


def test_pytrees_in_and_out(rng):
    def f(tree, pair, opt):
        assert opt is None
        a, (b, c) = tree["a"], tree["bc"]
        return {"sum": a + b, "pair": Pair(c * 2, None), "list": [pair.a * pair.b, (a,)],
                "none": None}

    tree = {"a": rng.normal(size=3), "bc": (rng.normal(size=3), rng.normal(size=(2,)))}
    pair = Pair(rng.normal(size=2), f64(3.0))
    out = jit(f)(tree, pair, None)
    _close(out, f(tree, pair, None))
    assert isinstance(out["pair"], Pair) and out["pair"].b is None and out["none"] is None


def test_mixed_output_structure_and_constants(rng):
    c = rng.normal(size=3)

    def f(x):
        return x, (x * 2, [c, 3.0, None]), {"k": fnp.zeros(2), "i": 7}

    x = rng.normal(size=3)
    out = jit(f)(x)
    eager = f(x)
    assert fgrad.tree.structure(out) == fgrad.tree.structure(eager)
    _close(out[0], x)
    _close(out[1][0], x * 2)
    _close(out[1][1][0], c)
    assert float(out[1][1][1]) == 3.0 and _weak(out[1][1][1])
    assert out[1][1][2] is None
    _close(out[2]["k"], fnp.zeros(2))
    assert int(out[2]["i"]) == 7 and _weak(out[2]["i"])
    assert all(isinstance(leaf, fgrad.Array) for leaf in fgrad.tree.leaves(out))


def test_returns_only_constants_and_inputs():
    x = np.arange(3.0)
    assert float(jit(lambda x: 2.5)(x)) == 2.5
    _close(jit(lambda x: (x, x))(x), (fnp.asarray(x), fnp.asarray(x)))
    _close(jit(lambda x, y: y)(x, 1.5), fnp.asarray(1.5))
    assert jit(lambda: fnp.ones(2))().shape == (2,)  # no arguments at all


def test_float32_stays_float32():
    x = np.linspace(-1, 1, 5, dtype=np.float32)
    f = jit(lambda x: fnp.sin(x) * 2.0 + fnp.sum(x) / 3 - 1)
    out = f(x)
    assert out.dtype == np.float32 and not _weak(out)
    np.testing.assert_allclose(_np(out), _np(f.fun(x)), rtol=1e-6)
    assert f(x.astype(np.float64)).dtype == np.float64


def test_weak_types_of_outputs():
    f = lambda x: x * 2.0  # noqa: E731
    out = jit(f)(2.0)
    eager = f(fnp.asarray(2.0))
    assert _weak(out) and _weak(eager)
    assert out.dtype == eager.dtype and float(out) == 4.0
    strong = jit(f)(np.float32(2.0))
    assert not _weak(strong) and strong.dtype == np.float32
    strong64 = jit(f)(f64(2.0))
    assert not _weak(strong64) and strong64.dtype == np.float64
    # a weak output mixed with a strong input promotes like eager
    g = lambda x, y: (x + y, y * 3)  # noqa: E731
    a, b = jit(g)(np.ones(2, np.float32), 1.5)
    ea, eb = g(fnp.ones(2, np.float32), fnp.asarray(1.5))
    assert (a.dtype, _weak(a)) == (ea.dtype, _weak(ea)) == (np.float32, False)
    assert (b.dtype, _weak(b)) == (eb.dtype, _weak(eb))
    assert _weak(b)


def test_python_scalars_as_args():
    f = jit(lambda x, n, b: fnp.where(b, x * n, -x))
    _close(f(1.5, 3, True), fnp.asarray(4.5))
    _close(f(1.5, 3, False), fnp.asarray(-1.5))
    assert jit(lambda n: n + 1)(3).dtype == fnp.asarray(3).dtype
    assert bool(jit(lambda b: fnp.logical_not(b))(False))


def test_keyword_and_default_arguments():
    def f(x, y=2.0, *, scale):
        return x * y * scale

    jf = jit(f)
    _close(jf(np.ones(2), scale=3.0), np.full(2, 6.0))
    _close(jf(np.ones(2), y=f64(1.0), scale=f64(3.0)), np.full(2, 3.0))
    _close(jf(x=np.ones(2), y=f64(1.0), scale=f64(3.0)), np.full(2, 3.0))


# ----------------------------------------------------------------------------
# Decorator forms and static arguments

def test_decorator_forms():
    @jit
    def a(x):
        return x + 1

    @jit(static_argnames="n")
    def b(x, n):
        return x * n

    @jit(static_argnums=(1,), donate_argnums=0)
    def c(x, n):
        return x ** n

    assert isinstance(a, fgrad._src.jit.api.Jitted)
    assert a.__name__ == "a" and b.__name__ == "b"
    _close(a(np.ones(2)), np.full(2, 2.0))
    _close(b(np.ones(2), 3), np.full(2, 3.0))
    _close(c(np.full(2, 2.0), 3), np.full(2, 8.0))
    _close(jit(lambda x, n: x - n, static_argnums=1)(np.ones(2), 5), np.full(2, -4.0))


@pytest.mark.parametrize("kw", [dict(static_argnums=1), dict(static_argnums=-1),
                                dict(static_argnames="mode"), dict(static_argnames=("mode",)),
                                dict(static_argnums=(1,), static_argnames=("mode",))])
def test_static_argument_forms(kw):
    calls = []

    def f(x, mode):
        calls.append(mode)
        if mode == "double":  # value-dependent control flow on a static argument
            return x * 2
        return x + 1

    jf = jit(f, **kw)
    x = np.arange(3.0)
    _close(jf(x, "double"), x * 2)
    _close(jf(x, "inc"), x + 1)
    _close(jf(x, "double"), x * 2)
    assert calls == ["double", "inc"]
    if kw.get("static_argnums") != -1:  # a negative index counts positional arguments only
        _close(jf(x, mode="inc"), x + 1)
        _close(jf(x=x, mode="double"), x * 2)


def test_static_argnames_matched_to_positional():
    jf = jit(lambda x, n: x * 2 if n > 0 else -x, static_argnames="n")
    _close(jf(np.ones(2), 1), np.full(2, 2.0))
    _close(jf(np.ones(2), -1), np.full(2, -1.0))
    _close(jf(np.ones(2), n=1), np.full(2, 2.0))


def test_static_argnums_matched_to_keyword():
    jf = jit(lambda x, n: x * 2 if n > 0 else -x, static_argnums=1)
    _close(jf(np.ones(2), n=-1), np.full(2, -1.0))


def test_unhashable_static_value_is_a_clear_type_error():
    jf = jit(lambda x, shape: fnp.reshape(x, shape), static_argnums=1)
    with pytest.raises(TypeError, match=r"(?s)static argument 'shape'.*hashable.*list"):
        jf(np.ones(6), [2, 3])
    _close(jf(np.ones(6), (2, 3)), np.ones((2, 3)))
    jk = jit(lambda x, *, opts: x, static_argnames="opts")
    with pytest.raises(TypeError, match=r"(?s)'opts'.*hashable.*dict"):
        jk(np.ones(2), opts={"a": 1})


def test_non_array_dynamic_argument_suggests_static():
    jf = jit(lambda x, mode: x)
    with pytest.raises(TypeError, match=r"(?s)str.*static_argnames"):
        jf(np.ones(2), "fast")
    with pytest.raises(TypeError, match="static_argnames"):
        jf(np.ones(2), mode=object())


# ----------------------------------------------------------------------------
# Cache

def test_one_trace_per_key():
    traces = []

    @jit
    def f(x, y):
        traces.append(1)
        return fnp.sin(x) * y

    x, y = np.ones(3), np.full(3, 2.0)
    for _ in range(5):
        _close(f(x, y), np.sin(x) * y)
    assert len(traces) == 1
    assert f.cache_info() == fgrad._src.jit.api.CacheInfo(hits=4, misses=1, entries=1)
    # Arrays and NumPy arrays of the same type share the entry
    f(fnp.asarray(x), y)
    f(x, y=y)  # keyword: a different argument structure
    assert len(traces) == 2
    info = f.cache_info()
    assert (info.hits, info.misses, info.entries) == (5, 2, 2)


def test_retrace_on_each_key_part():
    traces = []

    def f(x, n):
        traces.append(1)
        return x * n

    jf = jit(f, static_argnames="n")
    x = np.ones(3)
    jf(x, 2)
    jf(x, 2)
    jf(np.ones((2, 3)), 2)                      # shape
    jf(np.ones((2, 3), np.float32), 2)          # dtype
    jf(1.0, 2)                                  # weak f32[] ...
    jf(np.float32(1.0), 2)                      # ... vs strong f32[]
    jf(x, 3)                                    # static value
    jf((x, x), 3)                               # tree structure
    assert len(traces) == 7
    assert jf.cache_info() == (1, 7, 7)
    for args in [(x, 2), (np.ones((2, 3)), 2), (1.0, 2), (np.float32(1.0), 2), (x, 3)]:
        jf(*args)
    assert len(traces) == 7 and jf.cache_info() == (6, 7, 7)


def test_cache_miss_reasons():
    jf = jit(lambda x, y, n: x * n + y, static_argnames="n")
    jf(np.ones(3), np.ones(3), 2)
    jf(np.ones((2, 3)), np.ones(3), 2)
    jf(np.ones((2, 3)), np.ones(3, np.float32), 2)
    jf(np.ones((2, 3)), 1.0, 2)
    jf(np.ones((2, 3)), 1.0, 5)
    jf((np.ones(3),), 1.0, 5)
    reasons = jf.cache_misses()
    assert len(reasons) == 6
    assert "first" in reasons[0]
    assert "x" in reasons[1] and "f64[3] -> f64[2,3]" in reasons[1] and "y:" not in reasons[1]
    assert "y:" in reasons[2] and "f64[3] -> f32[3]" in reasons[2]
    assert "y:" in reasons[3] and "weak" in reasons[3]
    assert "static" in reasons[4] and "'n'" in reasons[4] and "2 -> 5" in reasons[4]
    assert "structure" in reasons[5]


def test_cache_miss_reason_names_pytree_leaf():
    jf = jit(lambda p: p["w"] @ p["b"])
    jf({"w": np.ones((2, 2)), "b": np.ones(2)})
    jf({"w": np.ones((3, 2)), "b": np.ones(2)})
    assert "p['w']" in jf.cache_misses()[-1] and "f64[2,2] -> f64[3,2]" in jf.cache_misses()[-1]


def test_clear_cache_retraces():
    traces = []
    jf = jit(lambda x: traces.append(1) or x + 1)
    jf(np.ones(2))
    jf.clear_cache()
    jf(np.ones(2))
    assert len(traces) == 2 and jf.cache_info().entries == 1


def test_separate_jit_objects_have_separate_caches():
    def f(x):
        return x * 2
    a, b = jit(f), jit(f)
    a(np.ones(2))
    assert a.cache_info().misses == 1 and b.cache_info() == (0, 0, 0)


# ----------------------------------------------------------------------------
# lower / as_text / compile

def test_lower(rng):
    def prog(x, y):
        return fnp.sum(fnp.sin(x) * y)

    jf = jit(prog)
    x, y = rng.normal(size=3), rng.normal(size=3)
    lowered = jf.lower(x, y)
    text = str(lowered.jaxpr)
    print(text)
    assert "sin" in text and "mul" in text and "reduce_sum" in text
    assert "f64[3]" in text
    asm = lowered.as_text()
    print(asm)
    assert "prog" in asm and "steps" in asm and "sin" in asm
    compiled = lowered.compile()
    assert callable(compiled)
    _close(compiled(x, y), prog(x, y))
    # lowering traced once; the call reused that trace
    assert jf.cache_info().misses == 1


def test_lower_with_static_args():
    jf = jit(lambda x, n: x ** n, static_argnums=1)
    lowered = jf.lower(np.ones(2), 3)
    assert "integer_pow" in str(lowered.jaxpr) or "pow" in str(lowered.jaxpr)
    _close(lowered.compile()(np.full(2, 2.0), 3), np.full(2, 8.0))


# ----------------------------------------------------------------------------
# Composition with transforms (each against eager)

def _f(x):
    return fnp.sum(fnp.sin(x) * fnp.exp(x) + x ** 3)


def _s(x):
    return fnp.sin(x) * x ** 3


def _v(x):
    return fnp.sin(x) * x + fnp.cumsum(x)


X = np.linspace(-1.0, 1.0, 4)
T = np.linspace(0.5, 2.0, 4)


def test_jit_of_grad_and_grad_of_jit():
    _close(jit(fgrad.grad(_f))(X), fgrad.grad(_f)(X))
    _close(fgrad.grad(jit(_f))(X), fgrad.grad(_f)(X))
    _close(fgrad.value_and_grad(jit(_f))(X), fgrad.value_and_grad(_f)(X))


def test_vmap_compositions():
    xs = np.linspace(-1, 1, 12).reshape(3, 4)
    _close(jit(fgrad.vmap(_f))(xs), fgrad.vmap(_f)(xs))
    _close(fgrad.vmap(jit(_f))(xs), fgrad.vmap(_f)(xs))
    _close(fgrad.vmap(jit(_v), in_axes=1, out_axes=1)(xs),
           fgrad.vmap(_v, in_axes=1, out_axes=1)(xs))
    g = lambda x, y: x * y + 1.0  # noqa: E731
    _close(fgrad.vmap(jit(g), in_axes=(0, None))(xs, X), fgrad.vmap(g, in_axes=(0, None))(xs, X))
    _close(fgrad.vmap(jit(lambda x: 3.0))(xs), fgrad.vmap(lambda x: 3.0)(xs))
    _close(fgrad.vmap(fgrad.grad(jit(_f)))(xs), fgrad.vmap(fgrad.grad(_f))(xs))
    _close(jit(fgrad.vmap(fgrad.grad(_f)))(xs), fgrad.vmap(fgrad.grad(_f))(xs))


def test_jit_inside_jit():
    inner = jit(lambda x, n: fnp.sin(x) * n, static_argnums=1)
    outer = jit(lambda x: inner(x, 2) + inner(x * 2, 3))
    ref = lambda x: fnp.sin(x) * 2 + fnp.sin(x * 2) * 3  # noqa: E731
    _close(outer(X), ref(X))
    _close(jit(jit(_f))(X), _f(X))
    _close(fgrad.grad(jit(jit(_f)))(X), fgrad.grad(_f)(X))
    jaxpr = fgrad.make_jaxpr(outer)(X)
    assert str(jaxpr).count("jit[") >= 3


def test_jvp_compositions():
    _close(fgrad.jvp(jit(_f), (X,), (T,)), fgrad.jvp(_f, (X,), (T,)))
    _close(fgrad.jvp(jit(_v), (X,), (T,)), fgrad.jvp(_v, (X,), (T,)))
    _close(jit(lambda x, t: fgrad.jvp(_v, (x,), (t,)))(X, T), fgrad.jvp(_v, (X,), (T,)))
    # an output that does not depend on the input has a zero tangent
    g = lambda x: (x * 2, fnp.ones(3))  # noqa: E731
    _close(fgrad.jvp(jit(g), (X[:3],), (T[:3],)), fgrad.jvp(g, (X[:3],), (T[:3],)))
    # only some inputs carry tangents
    h = lambda x, y: fnp.sin(x) * y  # noqa: E731
    _close(fgrad.jvp(jit(h), (X, T), (T, np.zeros(4))), fgrad.jvp(h, (X, T), (T, np.zeros(4))))


def test_vjp_of_jit():
    y, pb = fgrad.vjp(jit(_v), X)
    y2, pb2 = fgrad.vjp(_v, X)
    _close(y, y2)
    _close(pb(T), pb2(T))
    _close(pb(X), pb2(X))  # the pullback is reusable

    def tree_f(p):
        return {"a": p[0] * p[1], "b": (fnp.sum(p[0]),)}

    p = (X, T)
    out, pb = fgrad.vjp(jit(tree_f), p)
    out2, pb2 = fgrad.vjp(tree_f, p)
    ct = {"a": np.ones(4), "b": (f64(2.0),)}
    _close(out, out2)
    _close(pb(ct), pb2(ct))


def test_higher_order():
    # float64 scalars: compiled float32 math may differ from NumPy's libm in the last ulp.
    for x in (np.float64(0.7), np.float64(-1.3)):
        _close(fgrad.grad(fgrad.grad(jit(_s)))(x), fgrad.grad(fgrad.grad(_s))(x))
        _close(fgrad.grad(jit(fgrad.grad(_s)))(x), fgrad.grad(fgrad.grad(_s))(x))
    g3 = lambda f: fgrad.grad(fgrad.grad(fgrad.grad(f)))  # noqa: E731
    _close(g3(jit(_s))(np.float64(0.4)), g3(_s)(np.float64(0.4)))
    _close(jit(fgrad.hessian(_f))(X), fgrad.hessian(_f)(X))
    _close(fgrad.hessian(jit(_f))(X), fgrad.hessian(_f)(X))
    _close(fgrad.jacfwd(jit(_v))(X), fgrad.jacfwd(_v)(X))
    _close(fgrad.jacrev(jit(_v))(X), fgrad.jacrev(_v)(X))
    _close(jit(fgrad.jacrev(_v))(X), fgrad.jacrev(_v)(X))


def test_linearize_of_jit():
    out, lin = fgrad.linearize(jit(_v), X)
    out2, lin2 = fgrad.linearize(_v, X)
    _close(out, out2)
    _close(lin(T), lin2(T))
    _close(jit(lin)(T), lin2(T))
    tr = fgrad.linear_transpose(jit(lambda x: 2 * x + fnp.sum(x)), X)
    tr2 = fgrad.linear_transpose(lambda x: 2 * x + fnp.sum(x), X)
    _close(tr(T), tr2(T))


def test_grad_of_jit_pytrees_static_and_aux():
    def loss(p, x, n):
        return fnp.sum((p["w"] * x + p["b"]) ** n), p["w"]

    p = {"w": X, "b": f64(0.3)}
    jl = jit(loss, static_argnums=2)
    g = fgrad.grad(jl, has_aux=True)(p, T, 2)
    _close(g, fgrad.grad(loss, has_aux=True)(p, T, 2))
    _close(fgrad.grad(jl, argnums=1, has_aux=True)(p, T, 3),
           fgrad.grad(loss, argnums=1, has_aux=True)(p, T, 3))
    # integer inputs are not differentiated but can flow through the program
    h = lambda x, i: x[i] * 2.0 + fnp.sum(x)  # noqa: E731
    _close(fgrad.grad(jit(h))(X, 1), fgrad.grad(h)(X, 1))


def test_custom_jvp_inside_jit():
    @fgrad.custom_jvp
    def f(x):
        return fnp.sin(x)

    f.defjvp(lambda primals, tangents: (f(primals[0]), 2.0 * tangents[0]))

    g = lambda x: f(x) * x  # noqa: E731
    x = f64(1.1)
    _close(jit(f)(x), fnp.sin(x))
    _close(fgrad.grad(jit(f))(x), f64(2.0))
    _close(jit(fgrad.grad(f))(x), f64(2.0))
    _close(fgrad.grad(jit(g))(x), fgrad.grad(g)(x))
    _close(jit(fgrad.grad(g))(x), fgrad.grad(g)(x))
    _close(fgrad.vmap(jit(fgrad.grad(g)))(X), fgrad.vmap(fgrad.grad(g))(X))


def test_custom_vjp_inside_jit():
    @fgrad.custom_vjp
    def f(x):
        return fnp.sin(x)

    f.defvjp(lambda x: (f(x), x), lambda res, ct: (3.0 * ct * res,))

    g = lambda x: f(x) * 2.0  # noqa: E731
    x = f64(0.9)
    _close(jit(f)(x), fnp.sin(x))
    _close(fgrad.grad(jit(f))(x), f64(3.0 * 0.9))
    _close(jit(fgrad.grad(f))(x), f64(3.0 * 0.9))
    _close(fgrad.grad(jit(g))(x), fgrad.grad(g)(x))
    _close(jit(fgrad.grad(g))(x), fgrad.grad(g)(x))


def test_closing_over_traced_and_concrete_values():
    _close(fgrad.grad(lambda x: jit(lambda y: x * y)(2.0))(3.0), fgrad.grad(lambda x: x * 2.0)(3.0))
    assert float(fgrad.grad(lambda x: jit(lambda y: x * y)(2.0))(3.0)) == 2.0
    _close(fgrad.grad(lambda x: jit(lambda y: fnp.sin(x) * y)(f64(2.0)))(f64(0.3)),
           f64(2.0 * np.cos(0.3)))
    _close(fgrad.vmap(lambda x: jit(lambda y: x * y + x)(f64(2.0)))(X), X * 3.0)
    _close(fgrad.jvp(lambda x: jit(lambda y: x * y)(X), (f64(2.0),), (f64(1.0),)),
           (X * 2.0, X))
    c = np.arange(4.0)
    _close(jit(lambda x: x * c)(X), X * c)
    _close(fgrad.grad(jit(lambda x: fnp.sum(x * c)))(X), c)


def test_closures_nested_and_passed_through():
    assert float(jit(lambda x: jit(lambda y: x * y)(2.0))(3.0)) == 6.0
    # an output that is the closed-over tracer itself
    assert float(fgrad.grad(lambda x: jit(lambda y: x)(1.0))(2.0)) == 1.0
    assert float(fgrad.grad(lambda x: jit(lambda y: (x, y))(1.0)[0] * 3)(2.0)) == 3.0
    _close(fgrad.hessian(lambda x: jit(lambda y: fnp.sum(x ** 3 * y))(f64(2.0)))(np.ones(2)),
           np.diag([12.0, 12.0]))


def test_trace_once_under_transforms():
    traces = []

    def ref(x, n):
        return fnp.sum(fnp.sin(x) ** n)

    def f(x, n):
        traces.append(1)
        return ref(x, n)

    jf = jit(f, static_argnums=1)
    for _ in range(3):
        _close(fgrad.grad(jf)(X, 2), fgrad.grad(ref)(X, 2))
    assert len(traces) == 1
    for _ in range(3):
        _close(fgrad.vmap(jf, in_axes=(0, None))(np.ones((3, 4)), 3),
               fgrad.vmap(ref, in_axes=(0, None))(np.ones((3, 4)), 3))
    assert len(traces) == 2


def test_keyword_arguments_under_transforms():
    g = lambda x, y: fnp.sum(x * y)  # noqa: E731
    _close(fgrad.grad(jit(g))(X, y=T), fgrad.grad(g)(X, y=T))
    h = lambda x, y: x + y  # noqa: E731
    xs = np.ones((2, 3))
    _close(fgrad.vmap(jit(h))(xs, y=xs * 2), fgrad.vmap(h)(xs, y=xs * 2))


def test_zero_size_and_recursive_jit():
    _close(jit(lambda x: fnp.sum(x) + x.shape[0])(np.ones(0)), fnp.asarray(f64(0.0)))

    @jit(static_argnums=1)
    def power(x, n):
        return x if n == 0 else x * power(x, n - 1)

    _close(power(f64(1.5), 3), f64(1.5 ** 4))


def test_escaped_tracer_is_detected():
    store = []

    @jit
    def leak(x):
        store.append(x)
        return x

    leak(1.0)
    with pytest.raises(fgrad.EscapedTracerError):
        store[0] + 1


def test_make_jaxpr_of_grad_of_jit_has_jit_equation():
    jaxpr = fgrad.make_jaxpr(fgrad.grad(jit(_f)))(X)
    print(jaxpr)
    assert any(e.primitive.name == "jit" for e in jaxpr.jaxpr.eqns)
    check_jaxpr(jaxpr.jaxpr)
    for e in jaxpr.jaxpr.eqns:
        if e.primitive.name == "jit":
            check_jaxpr(e.params["jaxpr"].jaxpr)
    plain = fgrad.make_jaxpr(jit(_f))(X)
    assert [e.primitive.name for e in plain.jaxpr.eqns] == ["jit"]
    check_jaxpr(plain.jaxpr)


# ----------------------------------------------------------------------------
# Concretization errors

def test_python_control_flow_on_traced_value_raises():
    @jit
    def f(x):
        if x > 0:
            return x
        return -x

    with pytest.raises(fgrad.ConcretizationError) as info:
        f(1.0)
    msg = str(info.value)
    assert "'x'" in msg and "static_argnames" in msg and "lax.cond" in msg and "where" in msg
    assert isinstance(info.value, TypeError)


@pytest.mark.parametrize("conv", [float, int, bool])
def test_concretization_names_the_argument(conv):
    jf = jit(lambda scale, y: y * conv(scale))
    with pytest.raises(fgrad.ConcretizationError, match="'scale'"):
        jf(f64(2.0), np.ones(2))


def test_static_value_control_flow_works():
    @jit(static_argnames="n")
    def f(x, n):
        for _ in range(n):
            x = fnp.sin(x)
        return x if n % 2 else -x

    _close(f(X, 3), np.sin(np.sin(np.sin(X))))
    _close(f(X, 2), -np.sin(np.sin(X)))


def _leaf_flow(p):
    return 1.0 if p["a"].sum() > 0 else 0.0


def _vararg_flow(x, *rest):
    return x if rest[0] > 0 else -x


@pytest.mark.parametrize("fun,args,params", [
    (_leaf_flow, ({"a": np.ones(2)},), ("p",)),
    (_vararg_flow, (np.ones(2), 1.0), ("x",)),
], ids=["pytree_leaf", "varargs"])
def test_concretization_hint_names_real_parameters(fun, args, params):
    with pytest.raises(fgrad.ConcretizationError) as info:
        jit(fun)(*args)
    msg = str(info.value)
    m = re.search(r"static_argnames=(\(.*?\))\)", msg)
    if m:
        names = ast.literal_eval(m.group(1))
        assert all(n in params for n in names), names
    assert "args[1]" not in msg


def test_concretization_under_transforms_names_the_argument():
    def f(x, y):
        return fnp.sum(x * y) if y.sum() > 0 else fnp.sum(x)

    for call in (lambda: fgrad.grad(jit(f))(X, T),
                 lambda: fgrad.vmap(jit(f))(np.ones((2, 3)), np.ones((2, 3))),
                 lambda: jit(fgrad.grad(f))(X, T)):
        with pytest.raises(fgrad.ConcretizationError, match="'y'"):
            call()


# ----------------------------------------------------------------------------
# config: disable_jit, log_compiles and their environment variables

def test_disable_jit_runs_eagerly(restore_config):
    calls = []

    @jit
    def f(x):
        calls.append(type(x))
        return fnp.sin(x)

    fgrad.config.update("disable_jit", True)
    for _ in range(3):
        _close(f(X), np.sin(X))
    assert len(calls) == 3
    assert f.cache_info().misses == 0
    # Python control flow on values works when jit is disabled
    g = jit(lambda x: x if x > 0 else -x)
    assert float(g(-2.0)) == 2.0
    fgrad.config.update("disable_jit", False)
    f(X)
    f(X)
    assert len(calls) == 4 and f.cache_info().misses == 1


def test_log_compiles(restore_config, caplog):
    fgrad.config.update("log_compiles", True)
    jf = jit(lambda x: x + 1)
    with caplog.at_level(logging.DEBUG, logger="fgrad.jit"):
        jf(np.ones(2))
        first = [r.getMessage() for r in caplog.records if r.name == "fgrad.jit"]
        assert first, "no log record on the first compile"
        assert any("first call" in m for m in first)
        assert any("compiled" in m for m in first)
        caplog.clear()
        jf(np.ones(2))
        assert not [r for r in caplog.records if r.name == "fgrad.jit"]  # a hit logs nothing
        jf(np.ones(3))
        again = [r.getMessage() for r in caplog.records if r.name == "fgrad.jit"]
        assert any("x" in m and "f64[2] -> f64[3]" in m for m in again), again
    fgrad.config.update("log_compiles", False)
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="fgrad.jit"):
        jf(np.ones(4))
    assert not [r for r in caplog.records if r.name == "fgrad.jit"]


def test_unknown_config_option():
    with pytest.raises(AttributeError, match="disable_jit"):
        fgrad.config.update("disable_jitt", True)


def _run_python(code, **env):
    full = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for k in ("FGRAD_DISABLE_JIT", "FGRAD_LOG_COMPILES"):
        full.pop(k, None)
    full.update(env)
    return subprocess.run([sys.executable, "-c", code], env=full, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def test_env_vars_read_at_import():
    code = ("import fgrad, numpy as np\n"
            "calls = []\n"
            "f = fgrad.jit(lambda x: calls.append(1) or x + 1)\n"
            "f(np.ones(2)); f(np.ones(2))\n"
            "print(fgrad.config.disable_jit, fgrad.config.log_compiles, len(calls))\n")
    on = _run_python(code, FGRAD_DISABLE_JIT="1")
    assert on.returncode == 0, on.stderr
    assert on.stdout.split() == ["True", "False", "2"]
    off = _run_python(code)
    assert off.returncode == 0, off.stderr
    assert off.stdout.split() == ["False", "False", "1"]
    zero = _run_python(code, FGRAD_DISABLE_JIT="0")
    assert zero.stdout.split() == ["False", "False", "1"]
    log = _run_python(code, FGRAD_LOG_COMPILES="1")
    assert log.returncode == 0, log.stderr
    assert log.stdout.split() == ["False", "True", "1"]
    assert "fgrad.jit" in log.stderr or "first call" in log.stderr


# ----------------------------------------------------------------------------
# Fixed bugs, kept as regression tests

def test_output_that_is_an_input_is_a_fresh_array():
    a = np.ones(3)
    out = jit(lambda x: (x, x * 1))(a)
    a[0] = 5.0
    _close(out[0], np.ones(3))


def test_output_constant_does_not_alias_the_program():
    jf = jit(lambda x: (x + 1, fnp.arange(3.0), 2.5))
    _, arr, lit = jf(1.0)
    view = np.asarray(arr)
    with pytest.raises(ValueError, match="read-only"):
        view[0] = 99.0  # Arrays are immutable: NumPy sees a read-only view
    _, arr2, lit2 = jf(1.0)
    assert np.asarray(arr2) is not view and not np.shares_memory(np.asarray(arr2), view)
    _close(arr2, fnp.arange(3.0))
    assert float(lit2) == 2.5


def test_invalid_static_argnames_are_reported():
    def f(a, b):
        return a + b

    problems = 0
    for kw in (dict(static_argnames="c"), dict(static_argnums=5)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                jit(f, **kw)
            except (ValueError, TypeError):
                problems += 1
                continue
        problems += bool(caught)
    assert problems == 2


def test_miss_reason_names_with_negative_static_argnums():
    def f(n, x, y):
        return x * n + y

    jf = jit(f, static_argnums=-3)
    jf(2, np.ones(3), np.ones(3))
    jf(2, np.ones(4), np.ones(3)[:1])
    reason = jf.cache_misses()[-1]
    assert "x: f64[3] -> f64[4]" in reason and "y: f64[3] -> f64[1]" in reason, reason
    assert "n:" not in reason


def test_weak_type_of_derivatives_through_jit_matches_eager():
    f = lambda x: fnp.sin(x) * 2.0  # noqa: E731
    eager, through = fgrad.grad(f)(2.0), fgrad.grad(jit(f))(2.0)
    assert _weak(jit(fgrad.grad(f))(2.0)) == _weak(eager)
    half = np.ones(2, np.float16)
    assert (through + half).dtype == (eager + half).dtype
    assert _weak(through) == _weak(eager)
    _, t_eager = fgrad.jvp(f, (2.0,), (np.float32(1.0),))
    _, t_jit = fgrad.jvp(jit(f), (2.0,), (np.float32(1.0),))
    assert _weak(t_jit) == _weak(t_eager)


# ----------------------------------------------------------------------------
# Property test: random programs, compiled vs eager

_UNARY = {
    "sin": fnp.sin,
    "cos": lax.cos,
    "tanh": fnp.tanh,
    "exp": lambda x: fnp.exp(fnp.clip(x, -3.0, 3.0)),
    "abs": lax.abs,
    "neg": lax.neg,
    "half": lambda x: x * 0.5,
    "square_tanh": lambda x: fnp.tanh(x) ** 2,
    "log1p_abs": lambda x: fnp.log1p(fnp.abs(x)),
}
_BINARY = {
    "add": lax.add,
    "sub": fnp.subtract,
    "mul": lambda a, b: a * fnp.tanh(b),
    "max": fnp.maximum,
    "min": lax.min,
    "where": lambda a, b: fnp.where(a > b, a, b * 0.5),
}
_ROW = {
    "add_row": lambda x, r: x + r,
    "mul_row": lambda x, r: x * r,
    "max_row": lambda x, r: fnp.maximum(x, r[None, :]),
}
_REDUCE = {
    "center0": lambda x: x - fnp.mean(x, axis=0, keepdims=True),
    "sum1": lambda x: fnp.sum(x, axis=1, keepdims=True) * 0.1 + x,
    "max0": lambda x: lax.broadcast_in_dim(lax.reduce_max(x, (0,)), x.shape, (1,)) - x,
    "lse1": lambda x: x - fgrad.nn.logsumexp(x, axis=1, keepdims=True),
}
_OPS = ([("u", k) for k in _UNARY] + [("b", k) for k in _BINARY] + [("r", k) for k in _ROW]
        + [("red", k) for k in _REDUCE])


def _run_program(program, x, r):
    vals = [x]
    for (kind, name), i, j in program:
        a, b = vals[i % len(vals)], vals[j % len(vals)]
        if kind == "u":
            out = _UNARY[name](a)
        elif kind == "b":
            out = _BINARY[name](a, b)
        elif kind == "r":
            out = _ROW[name](a, r)
        else:
            out = _REDUCE[name](a)
        vals.append(out)
    return vals[-1], fnp.sum(vals[-1], axis=0), fnp.sum(vals[len(vals) // 2])


_programs = st.lists(st.tuples(st.sampled_from(_OPS), st.integers(0, 63), st.integers(0, 63)),
                     min_size=1, max_size=30)


@st.composite
def _inputs(draw):
    m, n = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    elems = st.floats(-2.0, 2.0, allow_nan=False, allow_infinity=False)
    x = draw(hnp.arrays(np.float64, (m, n), elements=elems))
    r = draw(hnp.arrays(np.float64, (n,), elements=elems))
    return x, r


@settings(max_examples=50, deadline=None)
@given(_programs, _inputs())
def test_random_programs_compiled_vs_eager(program, inputs):
    x, r = inputs
    f = lambda x, r: _run_program(program, x, r)  # noqa: E731
    eager = f(x, r)
    jf = jit(f)
    _close(jf(x, r), eager, rtol=1e-10, atol=1e-12)
    for _ in range(3):     # the cached path, then the native call path (cpu/dispatch.py)
        _close(jf(x, r), eager, rtol=1e-10, atol=1e-12)
    assert jf.cache_info() == (3, 1, 1)
    # traced again: the compiled code is found by the program's fingerprint
    _close(jit(f)(x, r), eager, rtol=1e-10, atol=1e-12)


@settings(max_examples=25, deadline=None)
@given(_programs, _inputs())
def test_random_programs_grad_of_jit_vs_eager(program, inputs):
    x, r = inputs
    loss = lambda x, r: _run_program(program, x, r)[2]  # noqa: E731
    _close(fgrad.grad(jit(loss))(x, r), fgrad.grad(loss)(x, r), rtol=1e-9, atol=1e-11)
    _close(jit(fgrad.grad(loss))(x, r), fgrad.grad(loss)(x, r), rtol=1e-9, atol=1e-11)


def test_a_fresh_process_reuses_compiled_code_from_the_disk_cache(tmp_path):
    """The first process compiles and writes the object code; a second one loads it."""
    import subprocess
    import sys
    code = ("import numpy as np, fgrad, fgrad.numpy as fnp\n"
            "from fgrad._src.jit.primitive import compile_jaxpr\n"
            "f = fgrad.jit(lambda x, y: fnp.sin(x) * y + fnp.exp(-x * x))\n"
            "x = np.linspace(0, 1, 8, dtype=np.float32)\n"
            "np.testing.assert_allclose(np.asarray(f(x, x)), np.sin(x) * x + np.exp(-x * x),"
            " rtol=1e-5)\n"
            "exe = next(iter(f._cache.values())).executable\n"
            "print('HIT' if exe.compile_stats.cache_hit else 'MISS')\n")
    env = dict(os.environ, FGRAD_CACHE_DIR=str(tmp_path))
    runs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, timeout=120) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr
    assert [r.stdout.strip() for r in runs] == ["MISS", "HIT"]


# ----------------------------------------------------------------------------
# Donation

def _sgd(w, g):
    return w - 0.5 * g


def test_donated_parameters_are_updated_in_place():
    step = jit(_sgd, donate_argnums=(0,))
    w0 = np.arange(12, dtype=np.float32).reshape(3, 4)
    g = np.ones((3, 4), np.float32)
    w = fnp.asarray(w0)
    address = w._value.ctypes.data                   # (a reference would be an observer)
    assert "in place of donated input 0" in step.lower(w, g).as_text()
    out = step(w, g)
    np.testing.assert_array_equal(out, w0 - 0.5)
    assert out._value.ctypes.data == address         # the donated memory was reused
    with pytest.raises(RuntimeError, match="donated to the jitted function '_sgd'"):
        w + 1.0                                      # the donated Array is used up
    again = step(out, g)                             # outputs can be donated in turn
    np.testing.assert_array_equal(again, w0 - 1.0)
    # without donation, the input stays intact and the output is fresh
    plain = jit(_sgd)
    w = fnp.asarray(w0.copy())
    out = plain(w, g)
    assert out._value is not w._value
    np.testing.assert_array_equal(w, w0)


def test_donation_never_overwrites_what_the_program_still_reads():
    g = np.ones((2, 3))

    def reads_twice(w, g):        # w is needed after the update is written
        new = w - g
        return new, fnp.sum(w * w)

    def view_read(w, g):          # w read through a transpose elsewhere
        return w - g, w.T * 2.0

    def returned(w, g):           # w itself is an output
        return w - g, w

    for f in (reads_twice, view_read, returned):
        w0 = np.arange(6.0).reshape(2, 3)
        want = f(fnp.asarray(w0), g)
        got = jit(f, donate_argnums=(0,))(fnp.asarray(w0.copy()), g)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, err_msg=f.__name__)


def test_donated_buffer_passed_twice_is_copied_first():
    step = jit(lambda w, g: w * 2.0 + g, donate_argnums=(0,))
    x = np.arange(4.0)
    out = step(x, x)              # the same buffer is both arguments
    np.testing.assert_array_equal(out, np.arange(4.0) * 3)
    np.testing.assert_array_equal(x, np.arange(4.0))   # a copy was written, not x


def test_donated_numpy_arrays_and_non_contiguous_inputs():
    step = jit(_sgd, donate_argnums=(0,))
    w = np.ones((4, 4))
    out = step(w, np.ones((4, 4)))
    np.testing.assert_array_equal(out, 0.5)
    strided = np.ones((4, 8))[:, ::2]           # not contiguous: no reuse, still right
    np.testing.assert_array_equal(step(strided, np.ones((4, 4))), 0.5)
    readonly = np.ones((4, 4))
    readonly.flags.writeable = False
    np.testing.assert_array_equal(step(readonly, np.ones((4, 4))), 0.5)
    np.testing.assert_array_equal(readonly, 1.0)


def test_donation_of_pytrees_and_under_transforms():
    def update(params, grads):
        return fgrad.tree.map(lambda p, g: p - 0.1 * g, params, grads)

    step = jit(update, donate_argnums=(0,))
    params = {"w": fnp.asarray(np.ones((2, 2))), "b": fnp.asarray(np.zeros(2))}
    grads = {"w": np.ones((2, 2)), "b": np.ones(2)}
    new = step(params, grads)
    np.testing.assert_allclose(new["w"], 0.9)
    np.testing.assert_allclose(new["b"], -0.1)
    with pytest.raises(RuntimeError, match="donated"):
        np.asarray(params["b"])
    # under grad, donation is ignored and the input survives
    x = fnp.asarray(np.ones(3))
    g = fgrad.grad(lambda x: fnp.sum(jit(lambda x: x * x, donate_argnums=(0,))(x)))(x)
    np.testing.assert_allclose(g, 2.0)
    np.testing.assert_allclose(x, 1.0)


def test_donate_argnums_errors():
    with pytest.raises(ValueError, match="both static and donated"):
        jit(_sgd, static_argnums=(1,), donate_argnums=(1,))
    with pytest.raises(TypeError, match="donate_argnums must be ints"):
        jit(_sgd, donate_argnums=("w",))
