"""fgrad_nn's convolution and pooling layers (1-3 spatial dims): values against
direct NumPy loops written here with PyTorch's rules (groups, dilation, padding
modes, transposed convolutions with output_padding, ceil_mode, count_include_pad,
adaptive windows), shapes for one example and a batch, check_grads (float64,
order 2) for inputs and parameters, pytree round trips, jit against eager, and a
jitted CNN training step with no NumPy step."""
import itertools

import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad.test_util import check_grads
from fgrad_nn import layers as L
from fgrad_nn import losses, optim
from tree_asserts import assert_trees_close

F64 = fnp.float64


def _key(i=0):
    return fgrad.random.key(i)


def _close(got, want, rtol=1e-10, atol=1e-12):
    got = np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def _round_trip_and_jit(layer, x):
    """The layer survives flatten/unflatten and gives the same output under jit."""
    leaves, treedef = fgrad.tree.flatten(layer)
    assert_trees_close(fgrad.tree.unflatten(treedef, leaves), layer)
    eager = layer(x)
    _close(fgrad.jit(lambda m, v: m(v))(layer, x), np.asarray(eager), rtol=1e-9)
    return np.asarray(eager)


# ----------------------------------------------------------------------------
# References by direct loops

def ref_conv(x, w, b, stride, pads, dilation, groups):
    """PyTorch's convolution on an (N, C, *s) batch already padded by `pads` zeros."""
    x = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pads])
    n, c, *sizes = x.shape
    o, cg, *ks = w.shape
    outs = [(s - d * (k - 1) - 1) // st + 1 for s, k, st, d in zip(sizes, ks, stride, dilation)]
    y = np.zeros((n, o, *outs))
    per = o // groups
    for bi, oc in itertools.product(range(n), range(o)):
        c0 = oc // per * cg
        for pos in itertools.product(*map(range, outs)):
            total = 0.0
            for ci, k in itertools.product(range(cg), itertools.product(*map(range, ks))):
                at = tuple(p * st + kk * d for p, st, kk, d in zip(pos, stride, k, dilation))
                total += x[(bi, c0 + ci) + at] * w[(oc, ci) + k]
            y[(bi, oc) + pos] = total + (0.0 if b is None else b[oc])
    return y


def ref_conv_transpose(x, w, b, stride, pads, out_pads, dilation, groups):
    """PyTorch's transposed convolution by scattering every input element."""
    n, c, *sizes = x.shape
    _, og, *ks = w.shape
    full = [(s - 1) * st + d * (k - 1) + 1 + op for s, st, d, k, op in
            zip(sizes, stride, dilation, ks, out_pads)]
    y = np.zeros((n, og * groups, *full))
    cg = c // groups
    for bi, ci in itertools.product(range(n), range(c)):
        grp = ci // cg
        for pos in itertools.product(*map(range, sizes)):
            for oc, k in itertools.product(range(og), itertools.product(*map(range, ks))):
                at = tuple(p * st + kk * d for p, st, kk, d in zip(pos, stride, k, dilation))
                y[(bi, grp * og + oc) + at] += x[(bi, ci) + pos] * w[(ci, oc) + k]
    crop = tuple(slice(p, f - p) for p, f in zip(pads, full))
    y = y[(slice(None), slice(None)) + crop]
    return y if b is None else y + b.reshape((-1,) + (1,) * len(sizes))


def ref_pool(x, kernel, stride, pads, dilation, ceil_mode, kind, count_include_pad=True):
    """PyTorch's max/avg pooling rules, window by window."""
    n, c, *sizes = x.shape
    outs = []
    for s, k, st, p, d in zip(sizes, kernel, stride, pads, dilation):
        room = s + 2 * p - d * (k - 1) - 1
        o = (-(-room // st) if ceil_mode else room // st) + 1
        if ceil_mode and (o - 1) * st >= s + p:
            o -= 1
        outs.append(o)
    y = np.zeros((n, c, *outs))
    for bi, ci in itertools.product(range(n), range(c)):
        for pos in itertools.product(*map(range, outs)):
            starts = [q * st - p for q, st, p in zip(pos, stride, pads)]
            if kind == "max":
                vals = [x[(bi, ci) + tuple(s0 + kk * d for s0, kk, d in zip(starts, k, dilation))]
                        for k in itertools.product(*map(range, kernel))
                        if all(0 <= s0 + kk * d < s for s0, kk, d, s in
                               zip(starts, k, dilation, sizes))]
                y[(bi, ci) + pos] = max(vals)
                continue
            ends = [min(s0 + k, s + p) for s0, k, s, p in zip(starts, kernel, sizes, pads)]
            divisor = np.prod([e - s0 for s0, e in zip(starts, ends)])
            lo = [max(s0, 0) for s0 in starts]
            hi = [min(e, s) for e, s in zip(ends, sizes)]
            if not count_include_pad:
                divisor = np.prod([h - l for l, h in zip(lo, hi)])
            window = x[(bi, ci) + tuple(slice(l, h) for l, h in zip(lo, hi))]
            y[(bi, ci) + pos] = window.sum() / divisor
    return y


def ref_adaptive(x, outs, kind):
    n, c, *sizes = x.shape
    y = np.zeros((n, c, *outs))
    for pos in itertools.product(*map(range, outs)):
        window = tuple(slice(q * s // o, -(-(q + 1) * s // o)) for q, s, o in zip(pos, sizes, outs))
        part = x[(slice(None), slice(None)) + window]
        axes = tuple(range(2, 2 + len(sizes)))
        y[(slice(None), slice(None)) + pos] = part.max(axes) if kind == "max" else part.mean(axes)
    return y


# ----------------------------------------------------------------------------
# Convolutions

CONV_CASES = [  # (layer, in, out, kernel, stride, padding, dilation, groups, input shape)
    (L.Conv1d, 4, 6, 3, 2, 1, 1, 2, (2, 4, 9)),
    (L.Conv1d, 3, 3, 2, 1, "same", 2, 3, (2, 3, 7)),
    (L.Conv2d, 4, 4, (3, 2), (1, 2), (1, 0), (2, 1), 4, (2, 4, 7, 6)),
    (L.Conv2d, 2, 6, 3, 1, "valid", 1, 2, (1, 2, 5, 5)),
    (L.Conv3d, 2, 4, 2, (1, 2, 1), 1, 1, 2, (1, 2, 4, 5, 3)),
]


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: f"{c[0].__name__}")
def test_conv_layers_match_direct_loops(case):
    layer_cls, cin, cout, kernel, stride, padding, dilation, groups, shape = case
    layer = layer_cls(cin, cout, kernel, stride, padding, dilation, groups, key=_key(),
                      dtype=F64)
    n = len(shape) - 2
    assert layer.weight.shape == (cout, cin // groups) + layer.kernel_size
    x = np.random.default_rng(0).standard_normal(shape)
    y = _round_trip_and_jit(layer, x)
    if padding == "same":
        pads = [d * (k - 1) // 2 for k, d in zip(layer.kernel_size, layer.dilation)]
        assert all(d * (k - 1) % 2 == 0 for k, d in zip(layer.kernel_size, layer.dilation))
    elif padding == "valid":
        pads = [0] * n
    else:
        pads = layer.padding
    want = ref_conv(x, np.asarray(layer.weight), np.asarray(layer.bias), layer.stride, pads,
                    layer.dilation, groups)
    _close(y, want, rtol=1e-9)
    _close(layer(x[0]), want[0], rtol=1e-9)              # one example
    if padding == "same":
        assert y.shape[2:] == x.shape[2:]


@pytest.mark.parametrize("mode, np_mode", [("reflect", "reflect"), ("replicate", "edge"),
                                           ("circular", "wrap")])
def test_padding_modes(mode, np_mode):
    layer = L.Conv2d(2, 3, 3, padding=(2, 1), padding_mode=mode, key=_key(1), dtype=F64)
    x = np.random.default_rng(1).standard_normal((2, 2, 5, 6))
    y = _round_trip_and_jit(layer, x)
    padded = np.pad(x, [(0, 0), (0, 0), (2, 2), (1, 1)], mode=np_mode)
    want = ref_conv(padded, np.asarray(layer.weight), np.asarray(layer.bias), (1, 1), (0, 0),
                    (1, 1), 1)
    _close(y, want, rtol=1e-9)
    check_grads(lambda m, v: m(v), (layer, x[:1]), order=2)


TRANSPOSE_CASES = [  # (layer, in, out, kernel, stride, padding, output_padding, groups, dil, x)
    (L.ConvTranspose1d, 2, 3, 3, 2, 1, 1, 1, 1, (2, 2, 5)),
    (L.ConvTranspose2d, 4, 2, (3, 2), (2, 3), (1, 0), (1, 2), 2, 1, (2, 4, 3, 4)),
    (L.ConvTranspose2d, 2, 2, 2, 1, 0, 1, 1, 2, (1, 2, 3, 3)),
    (L.ConvTranspose3d, 2, 2, 2, 2, 0, 0, 1, 1, (1, 2, 2, 3, 2)),
]


@pytest.mark.parametrize("case", TRANSPOSE_CASES, ids=lambda c: c[0].__name__)
def test_conv_transpose_layers_match_scatter_loops(case):
    layer_cls, cin, cout, kernel, stride, padding, out_pad, groups, dil, shape = case
    layer = layer_cls(cin, cout, kernel, stride, padding, out_pad, groups, dilation=dil,
                      key=_key(2), dtype=F64)
    assert layer.weight.shape == (cin, cout // groups) + layer.kernel_size
    x = np.random.default_rng(2).standard_normal(shape)
    y = _round_trip_and_jit(layer, x)
    want = ref_conv_transpose(x, np.asarray(layer.weight), np.asarray(layer.bias),
                              layer.stride, layer.padding, layer.output_padding, layer.dilation,
                              groups)
    _close(y, want, rtol=1e-9)
    _close(layer(x[0]), want[0], rtol=1e-9)


@pytest.mark.parametrize("layer", [
    L.Conv1d(2, 4, 3, stride=2, padding=1, groups=2, key=_key(3), dtype=F64),
    L.Conv2d(2, 2, 2, dilation=2, groups=2, bias=False, key=_key(4), dtype=F64),
    L.ConvTranspose2d(2, 4, 3, stride=2, padding=1, output_padding=1, groups=2, key=_key(5),
                      dtype=F64),
    L.ConvTranspose1d(3, 2, 2, stride=3, key=_key(6), dtype=F64),
], ids=["conv1d_groups", "conv2d_depthwise", "convT2d_groups", "convT1d"])
def test_conv_gradients_order_two(layer):
    n = len(layer.kernel_size)
    x = np.random.default_rng(3).standard_normal((1, layer.in_channels) + (4,) * n)
    check_grads(lambda m, v: m(v), (layer, x), order=2)


def test_conv_layer_errors():
    with pytest.raises(ValueError, match="divisible by groups"):
        L.Conv2d(3, 4, 3, groups=2, key=_key())
    with pytest.raises(ValueError, match="padding_mode"):
        L.Conv1d(1, 1, 3, padding_mode="mirror", key=_key())
    with pytest.raises(ValueError, match="output_padding"):
        L.ConvTranspose2d(1, 1, 3, stride=2, output_padding=2, key=_key())(np.ones((1, 3, 3)))
    with pytest.raises(ValueError, match=r"\(N, C, L\) or \(C, L\)"):
        L.Conv1d(1, 1, 3, key=_key())(np.ones((1, 1, 1, 5)))
    with pytest.raises(ValueError, match="kernel_size must be a non-negative int or a triple"):
        L.Conv3d(1, 1, (3, 3), key=_key())


# ----------------------------------------------------------------------------
# Pooling

MAX_CASES = [  # (layer, kernel, stride, padding, dilation, ceil_mode, x shape)
    (L.MaxPool1d, 3, 2, 1, 1, True, (2, 2, 8)),
    (L.MaxPool2d, 2, None, 0, 1, False, (2, 3, 7, 6)),
    (L.MaxPool2d, 2, None, 0, 1, True, (1, 2, 7, 5)),
    (L.MaxPool2d, (3, 2), (2, 1), (1, 0), (1, 2), True, (1, 2, 8, 7)),
    (L.MaxPool3d, 2, 2, 1, 1, False, (1, 1, 5, 4, 4)),
]


@pytest.mark.parametrize("case", MAX_CASES, ids=lambda c: c[0].__name__)
def test_max_pool_matches_direct_loops(case):
    layer_cls, kernel, stride, padding, dilation, ceil_mode, shape = case
    layer = layer_cls(kernel, stride, padding, dilation, ceil_mode=ceil_mode)
    n = len(shape) - 2
    x = np.random.default_rng(4).standard_normal(shape)
    y = _round_trip_and_jit(layer, x)
    as_n = lambda v: (v,) * n if isinstance(v, int) else tuple(v)  # noqa: E731
    want = ref_pool(x, as_n(kernel), as_n(kernel if stride is None else stride), as_n(padding),
                    as_n(dilation), ceil_mode, "max")
    _close(y, want)
    _close(layer(x[0]), want[0])


AVG_CASES = [  # (layer, kernel, stride, padding, ceil_mode, count_include_pad, x shape)
    (L.AvgPool1d, 3, 2, 1, True, True, (2, 2, 8)),
    (L.AvgPool1d, 3, 2, 1, True, False, (1, 2, 8)),
    (L.AvgPool2d, 2, None, 0, True, True, (1, 2, 5, 7)),
    (L.AvgPool2d, (3, 2), (2, 1), (1, 1), False, False, (2, 2, 6, 5)),
    (L.AvgPool3d, 2, 2, 1, True, True, (1, 1, 5, 4, 3)),
]


@pytest.mark.parametrize("case", AVG_CASES, ids=lambda c: c[0].__name__)
def test_avg_pool_matches_direct_loops(case):
    layer_cls, kernel, stride, padding, ceil_mode, count_include_pad, shape = case
    layer = layer_cls(kernel, stride, padding, ceil_mode, count_include_pad)
    n = len(shape) - 2
    x = np.random.default_rng(5).standard_normal(shape)
    y = _round_trip_and_jit(layer, x)
    as_n = lambda v: (v,) * n if isinstance(v, int) else tuple(v)  # noqa: E731
    want = ref_pool(x, as_n(kernel), as_n(kernel if stride is None else stride), as_n(padding),
                    (1,) * n, ceil_mode, "avg", count_include_pad)
    _close(y, want)
    _close(layer(x[0]), want[0])


def test_avg_pool_divisor_override():
    x = np.random.default_rng(6).standard_normal((1, 2, 4, 4))
    y = L.AvgPool2d(2, divisor_override=3)(x)
    _close(y, ref_pool(x, (2, 2), (2, 2), (0, 0), (1, 1), False, "avg") * 4 / 3)


@pytest.mark.parametrize("layer_cls, out, shape, kind", [
    (L.AdaptiveAvgPool1d, 3, (2, 2, 7), "mean"),
    (L.AdaptiveAvgPool2d, (3, 2), (1, 2, 7, 4), "mean"),
    (L.AdaptiveAvgPool2d, (None, 5), (1, 1, 3, 7), "mean"),
    (L.AdaptiveMaxPool1d, 4, (1, 2, 9), "max"),
    (L.AdaptiveMaxPool2d, 2, (2, 1, 5, 4), "max"),
], ids=lambda v: getattr(v, "__name__", None))
def test_adaptive_pools_match_direct_loops(layer_cls, out, shape, kind):
    layer = layer_cls(out)
    x = np.random.default_rng(7).standard_normal(shape)
    y = _round_trip_and_jit(layer, x)
    n = len(shape) - 2
    outs = (out,) * n if isinstance(out, int) else tuple(s if o is None else o
                                                       for o, s in zip(out, shape[2:]))
    _close(y, ref_adaptive(x, outs, kind))
    check_grads(lambda v: layer(v), (x[:1],), order=2)


@pytest.mark.parametrize("layer", [L.MaxPool2d(3, 2, 1, ceil_mode=True), L.AvgPool1d(3, 2, 1),
                                   L.AvgPool2d(2, ceil_mode=True, count_include_pad=False),
                                   L.MaxPool1d(2)], ids=repr)
def test_pool_gradients_order_two(layer):
    n = 2 if "2d" in type(layer).__name__ else 1
    x = np.random.default_rng(8).standard_normal((1, 2) + (5,) * n)
    check_grads(lambda v: layer(v), (x,), order=2)


# ----------------------------------------------------------------------------
# A jitted CNN training step runs native code only

def test_jitted_cnn_training_step_is_native_and_matches_eager():
    k = fgrad.random.split(_key(9), 3)
    model = L.Sequential(L.Conv2d(1, 4, 3, padding=1, key=k[0]), L.ReLU(), L.MaxPool2d(2),
                         L.Conv2d(4, 8, 3, padding=1, key=k[1]), L.ReLU(), L.AvgPool2d(2),
                         L.Flatten(), L.Linear(8 * 2 * 2, 3, key=k[2]))
    opt = optim.adam(1e-2)
    rng = np.random.default_rng(9)
    x, y = rng.random((6, 1, 8, 8), np.float32), rng.integers(0, 3, 6)

    def step(model, state):
        def loss_fn(m):
            return losses.softmax_cross_entropy_with_integer_labels(m(x), y)
        loss, g = fgrad.value_and_grad(loss_fn)(model)
        updates, state = opt.update(g, state, model)
        return optim.apply_updates(model, updates), state, loss
    state = opt.init(model)
    jitted = fgrad.jit(step)
    text = jitted.lower(model, state).as_text()
    assert text.count("native:conv_general_dilated") >= 5    # 2 forward, 2 weight, 1 input
    assert ": numpy:" not in text
    got, want = jitted(model, state), step(model, state)
    assert_trees_close(got, want, rtol=1e-4, atol=1e-5)


# ----------------------------------------------------------------------------
# PyTorch cross-check (runs where torch imports, e.g. bench/.venv-peers)

TORCH_LAYERS = [
    ("Conv1d", (4, 6, 3), dict(stride=2, padding=1, groups=2, padding_mode="circular"),
     (2, 4, 9)),
    ("Conv2d", (3, 6, (3, 2)), dict(padding="same", dilation=(2, 1), groups=3,
                                     padding_mode="reflect"), (2, 3, 7, 6)),
    ("Conv2d", (2, 4, 3), dict(stride=2, padding=(1, 0), bias=True), (2, 2, 7, 6)),
    ("Conv3d", (2, 2, 2), dict(padding=1, padding_mode="replicate"), (1, 2, 3, 4, 3)),
    ("ConvTranspose2d", (4, 2, 3), dict(stride=2, padding=1, output_padding=1, groups=2,
                                        dilation=1), (2, 4, 3, 4)),
    ("ConvTranspose1d", (2, 3, 4), dict(stride=3, padding=2, dilation=2), (1, 2, 5)),
    ("MaxPool2d", (3,), dict(stride=2, padding=1, ceil_mode=True), (2, 2, 8, 7)),
    ("AvgPool2d", (3,), dict(stride=2, padding=1, ceil_mode=True, count_include_pad=False),
     (2, 2, 8, 7)),
    ("AvgPool1d", (2,), dict(ceil_mode=True), (1, 2, 7)),
    ("AdaptiveAvgPool2d", ((3, 5),), {}, (1, 2, 7, 9)),
    ("AdaptiveMaxPool1d", (4,), {}, (2, 2, 10)),
]


@pytest.mark.torch
@pytest.mark.parametrize("name, args, kwargs, shape", TORCH_LAYERS,
                         ids=[c[0] for c in TORCH_LAYERS])
def test_layers_match_pytorch(name, args, kwargs, shape):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(10).standard_normal(shape)
    ours_cls = getattr(L, name)
    is_conv = name.startswith("Conv")
    ours = ours_cls(*args, **kwargs, key=_key(11), dtype=F64) if is_conv else ours_cls(*args,
                                                                                       **kwargs)
    theirs = getattr(torch.nn, name)(*args, **kwargs).double()
    if is_conv:
        with torch.no_grad():
            theirs.weight.copy_(torch.from_numpy(np.array(ours.weight)))
            theirs.bias.copy_(torch.from_numpy(np.array(ours.bias)))
    tx = torch.from_numpy(x).requires_grad_()
    ty = theirs(tx)
    g = np.random.default_rng(12).standard_normal(tuple(ty.shape))
    ty.backward(torch.from_numpy(g))
    _close(ours(x), ty.detach().numpy(), rtol=1e-10)

    def loss(model, v):
        return fnp.sum(model(v) * g)
    if is_conv:
        gm, gx = fgrad.grad(loss, argnums=(0, 1))(ours, x)
        _close(gm.weight, theirs.weight.grad.numpy(), rtol=1e-9)
        _close(gm.bias, theirs.bias.grad.numpy(), rtol=1e-9)
    else:
        gx = fgrad.grad(lambda v: loss(ours, v))(x)
    _close(gx, tx.grad.numpy(), rtol=1e-9)
