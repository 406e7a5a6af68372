"""Every equation remembers the user's source line that created it."""
import inspect
import os

import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad._src.compiler.simplify import simplify

THIS_FILE = os.path.basename(__file__)


def _line_of(fn, text):
    lines, first = inspect.getsourcelines(fn)
    (offset,) = [i for i, line in enumerate(lines) if text in line]
    return first + offset


def model(x, w):
    h = fnp.tanh(x * w)
    y = fnp.sqrt(h * h + 1.0)
    return y.sum()


X, W = np.array([0.5, -1.0, 2.0]), np.array([1.5, 0.3, -0.7])
H_LINE = _line_of(model, "fnp.tanh")
Y_LINE = _line_of(model, "fnp.sqrt")
S_LINE = _line_of(model, "y.sum()")


def _all_eqns(jaxpr):
    """The equations of a jaxpr and of every sub-jaxpr in its params."""
    for eqn in jaxpr.eqns:
        yield eqn
        for p in eqn.params.values():
            inner = getattr(p, "jaxpr", p)
            if hasattr(inner, "eqns"):
                yield from _all_eqns(inner)


def test_every_equation_has_its_line():
    jaxpr = fgrad.make_jaxpr(model)(X, W)
    got = [(e.primitive.name, e.source_info.line) for e in jaxpr.eqns]
    assert got == [("mul", H_LINE), ("tanh", H_LINE), ("mul", Y_LINE), ("add", Y_LINE),
                   ("sqrt", Y_LINE), ("reduce_sum", S_LINE)]
    for e in jaxpr.eqns:
        assert e.source_info.file == __file__ and e.source_info.function == "model"
        assert not e.source_info.backward


def test_print_locations():
    text = str(fgrad.make_jaxpr(model, print_locations=True)(X, W))
    lines = text.splitlines()
    assert any("tanh" in ln and f"# {THIS_FILE}:{H_LINE} (model)" in ln for ln in lines)
    assert any("sqrt" in ln and f"# {THIS_FILE}:{Y_LINE} (model)" in ln for ln in lines)
    assert any("reduce_sum" in ln and f"# {THIS_FILE}:{S_LINE} (model)" in ln for ln in lines)
    # the default print is unchanged
    assert THIS_FILE not in str(fgrad.make_jaxpr(model)(X, W))


def test_backward_equations_carry_the_forward_line():
    jaxpr = fgrad.make_jaxpr(fgrad.grad(model, argnums=(0, 1)))(X, W)
    infos = [e.source_info for e in jaxpr.eqns]
    assert all(i is not None and i.file == __file__ for i in infos)
    backward = {i.line for i in infos if i.backward}
    forward = {i.line for i in infos if not i.backward}
    assert forward == {H_LINE, Y_LINE, S_LINE}
    assert {H_LINE, Y_LINE} <= backward <= forward  # (sum's cotangent is a constant)
    text = str(fgrad.make_jaxpr(fgrad.grad(model), print_locations=True)(X, W))
    assert f"{THIS_FILE}:{Y_LINE} (model, backward pass)" in text


@pytest.mark.parametrize("transform,xs", [
    (lambda f: fgrad.grad(fgrad.jit(f)), X),
    (lambda f: fgrad.vmap(fgrad.jit(f), in_axes=(0, None)), np.stack([X, X])),
    (lambda f: fgrad.jit(fgrad.vmap(f, in_axes=(0, None))), np.stack([X, X])),
])
def test_derived_programs_keep_the_lines(transform, xs):
    jaxpr = fgrad.make_jaxpr(transform(model))(xs, W)
    lines = {e.source_info.line for e in _all_eqns(jaxpr)
             if e.primitive.name != "jit" and e.source_info is not None
             and e.source_info.file == __file__}
    assert {H_LINE, Y_LINE, S_LINE} <= lines


def test_custom_jvp_body_prints_locations():
    @fgrad.custom_jvp
    def softplus(x):
        return fnp.log1p(fnp.exp(x))

    @softplus.defjvp
    def softplus_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return softplus(x), t / (1 + fnp.exp(-x))

    text = str(fgrad.make_jaxpr(lambda x: softplus(x).sum(), print_locations=True)(X))
    assert f"{THIS_FILE}:{_line_of(softplus, 'log1p')} (softplus)" in text


def test_simplified_program_keeps_the_lines():
    def f(x):
        a = fnp.sin(x)
        b = fnp.sin(x)
        return a + b

    simple = simplify(fgrad.make_jaxpr(f)(X))
    # cse merged the two sins and rewrote the add: both still know their lines
    assert [(e.primitive.name, e.source_info.line) for e in simple.eqns] == [
        ("sin", _line_of(f, "a = ")), ("add", _line_of(f, "a + b"))]


def test_shape_error_under_jit_names_the_line():
    def bad(x):
        return fnp.dot(x, np.ones((4, 2)))

    with pytest.raises(TypeError) as info:
        fgrad.jit(bad)(X)
    assert f"{THIS_FILE}:{_line_of(bad, 'fnp.dot')}" in str(info.value)
