"""Forward and backward taps on fgrad_nn layers (fgrad_nn/taps.py)."""
import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
import fgrad_nn as nn
from fgrad_nn.taps import Tapped, tap, untap


def _model():
    keys = fgrad.random.split(fgrad.random.key(0), 3)
    return nn.Sequential((nn.Linear(4, 8, key=keys[0]), nn.ReLU(), nn.Linear(8, 3, key=keys[1])))


def _is_linear(path, module):
    return isinstance(module, nn.Linear)


@pytest.mark.parametrize("transform", [lambda f: f, fgrad.jit], ids=["eager", "jit"])
def test_forward_taps_see_each_layers_inputs_and_outputs(transform):
    model = _model()
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    seen = []
    tapped = tap(model, _is_linear, on_forward=lambda p, i, o: seen.append((p, i, o)))
    assert sum(isinstance(m, Tapped) for m in tapped.layers) == 2
    out = transform(lambda m, x: m(x))(tapped, x)
    np.testing.assert_allclose(out, model(x), rtol=1e-6)
    assert [p for p, _, _ in seen] == ["layers.0", "layers.2"]
    first = model.layers[0](x)
    np.testing.assert_allclose(seen[0][1], x)
    np.testing.assert_allclose(seen[0][2], first, rtol=1e-6)
    np.testing.assert_allclose(seen[1][1], np.maximum(first, 0), rtol=1e-6)
    np.testing.assert_allclose(seen[1][2], out, rtol=1e-6)


def test_backward_taps_receive_the_output_cotangents():
    model = _model()
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    cts = {}
    tapped = tap(model, _is_linear, on_backward=lambda p, ct: cts.setdefault(p, ct))
    loss = lambda m: fnp.sum(m(x) ** 2)  # noqa: E731
    grads = fgrad.grad(loss)(tapped)
    # the last layer's output cotangent is 2 * output; the first's is what flows back
    out = model(x)
    np.testing.assert_allclose(cts["layers.2"], 2 * np.asarray(out), rtol=1e-5)
    h = model.layers[0](x)
    _, pullback = fgrad.vjp(lambda h: model.layers[2](fnp.maximum(h, 0)), h)
    (want,) = pullback(2 * out)
    np.testing.assert_allclose(cts["layers.0"], want, rtol=1e-5)
    # the gradients themselves are the untapped model's
    plain = fgrad.grad(loss)(model)
    for a, b in zip(fgrad.tree.leaves(untap(grads)), fgrad.tree.leaves(plain)):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_untap_and_errors():
    model = _model()
    tapped = tap(model, lambda p, m: p == "layers.1", on_forward=lambda *a: None)
    assert isinstance(tapped.layers[1], Tapped) and tapped.layers[1].path == "layers.1"
    back = untap(tapped)
    assert fgrad.tree.structure(back) == fgrad.tree.structure(model)
    for a, b in zip(fgrad.tree.leaves(back), fgrad.tree.leaves(model)):
        assert a is b                                    # the same parameter arrays
    with pytest.raises(ValueError, match="on_forward"):
        tap(model, _is_linear)


def test_taps_on_stateful_layers():
    bn = nn.BatchNorm(3)
    model = nn.Sequential((nn.Linear(2, 3, key=fgrad.random.key(2)), bn))
    seen = []
    tapped = tap(model, lambda p, m: isinstance(m, nn.BatchNorm),
                 on_forward=lambda p, i, o: seen.append(o))
    x = np.random.default_rng(3).standard_normal((6, 2)).astype(np.float32)
    y, state = tapped(x, nn.init_state(tapped))
    want, want_state = model(x, nn.init_state(model))
    np.testing.assert_allclose(y, want, rtol=1e-6)
    np.testing.assert_allclose(seen[0], want, rtol=1e-6)
    for a, b in zip(fgrad.tree.leaves(state), fgrad.tree.leaves(want_state)):
        np.testing.assert_allclose(a, b, rtol=1e-6)
