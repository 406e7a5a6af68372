"""Workload 10: convolutional networks, float32, NCHW.

1. A small CNN's training step: Conv2d(1→32, 5×5, pad 2), ReLU, MaxPool 2, Conv2d(32→64,
   5×5, pad 2), ReLU, MaxPool 2, Linear(3136→10); softmax cross-entropy; Adam (lr 1e-3);
   batch 128 of 28×28 images. Every library starts from the same weights (fgrad_nn's,
   copied) and sees the same batch; the first two steps' losses are checked.
2. A ResNet basic block at 64 channels, 32×32, batch 64: conv3×3, BatchNorm (batch
   statistics), ReLU, conv3×3, BatchNorm, + input, ReLU; forward and backward (gradients
   of sum(out · g) for a fixed g with respect to the input and every parameter),
   checked against fgrad's.

fgrad runs fgrad_nn's layers under fgrad.jit (convolutions are lax.conv_general_dilated,
a native kernel: for stride-1 convolutions with 16+ input features, lane products over a
channels-last copy of each example (fgrad's own register-blocked FMA kernel,
cpu/lane_product.py; 16k output features) or sgemms over copies of the input shifted along
the kernel's last dim, weight gradients as lane products, else im2col + sgemm; max pooling
is lax.reduce_window_max, a native kernel, and its gradient one native scatter); PyTorch its nn modules eager and under torch.compile;
JAX the same functions with lax.conv_general_dilated / reduce_window and Optax.
"""
from common import (FGRAD, PEER, Column, Disagrees, Section, Table, agree, budget,  # first
                    guarded, time_call, to_numpy)
import peers

import numpy as np

import fgrad
import fgrad.numpy as fnp
import fgrad_nn
from fgrad_nn import functional as F, losses, optim

NAME = "cnn"
TITLE = "10. Convolutional networks: CNN training step, ResNet basic block (float32)"
BATCH, LR = 128, 1e-3
RES_BATCH, RES_CH, RES_HW = 64, 64, 32
COLUMNS = [Column("fgrad jit", FGRAD), Column("torch eager", PEER),
           Column("torch.compile", PEER), Column("jax.jit", PEER)]


def cnn_model():
    k = fgrad.random.split(fgrad.random.PRNGKey(0), 3)
    return fgrad_nn.Sequential(
        fgrad_nn.Conv2d(1, 32, 5, padding=2, key=k[0]), fgrad_nn.ReLU(), fgrad_nn.MaxPool2d(2),
        fgrad_nn.Conv2d(32, 64, 5, padding=2, key=k[1]), fgrad_nn.ReLU(), fgrad_nn.MaxPool2d(2),
        fgrad_nn.Flatten(), fgrad_nn.Linear(64 * 7 * 7, 10, key=k[2]))


def cnn_data():
    rng = np.random.default_rng(0)
    return (rng.random((BATCH, 1, 28, 28), np.float32),
            rng.integers(0, 10, BATCH).astype(np.int64))


def cnn_weights(model):
    """[w1, b1, w2, b2, w3, b3] as writable NumPy arrays (PyTorch's layouts)."""
    c1, c2, lin = model.layers[0], model.layers[3], model.layers[7]
    return [np.array(v) for v in (c1.weight, c1.bias, c2.weight, c2.bias, lin.weight, lin.bias)]


def _stepper(step, state, ready):
    """(first two losses, a zero-argument function running one more step)."""
    box = [state]
    seen = []
    for _ in range(2):
        box[0], loss = step(box[0])
        seen.append(float(ready(loss)))

    def one():
        box[0], loss = step(box[0])
        ready(loss)
    return seen, one


def cnn_fgrad(x, y):
    model, opt = cnn_model(), optim.adam(LR)

    @fgrad.jit
    def train_step(model, opt_state):
        def loss_fn(m):
            return losses.softmax_cross_entropy_with_integer_labels(m(x), y)
        loss, g = fgrad.value_and_grad(loss_fn)(model)
        updates, opt_state = opt.update(g, opt_state, model)
        return (optim.apply_updates(model, updates), opt_state), loss
    return _stepper(lambda s: train_step(*s), (model, opt.init(model)), np.asarray)


def cnn_torch(x, y, w, compiled):
    torch = peers.torch()
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(64 * 7 * 7, 10))
    with torch.no_grad():
        for p, v in zip(model.parameters(), w):
            p.copy_(torch.from_numpy(v))
    forward = torch.compile(model, dynamic=False) if compiled else model
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)

    def step(state):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(forward(tx), ty)
        loss.backward()
        opt.step()
        return state, loss.detach()
    return _stepper(step, None, lambda v: v.item())


def _jax_conv(jax, x, w, b, pad):
    out = jax.lax.conv_general_dilated(x, w, (1, 1), ((pad, pad), (pad, pad)))
    return out + b[None, :, None, None]


def cnn_jax(x, y, w):
    jax, optax = peers.jax(), peers.optax()
    jnp = jax.numpy

    def pool(h):
        return jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2),
                                     "VALID")

    def loss_fn(p, x, y):
        w1, b1, w2, b2, w3, b3 = p
        h = pool(jax.nn.relu(_jax_conv(jax, x, w1, b1, 2)))
        h = pool(jax.nn.relu(_jax_conv(jax, h, w2, b2, 2)))
        logits = h.reshape(h.shape[0], -1) @ w3.T + b3
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

    opt = optax.adam(LR)

    @jax.jit
    def train_step(p, opt_state, x, y):
        loss, g = jax.value_and_grad(loss_fn)(p, x, y)
        updates, opt_state = opt.update(g, opt_state, p)
        return (optax.apply_updates(p, updates), opt_state), loss
    params = jax.device_put(w)
    jx, jy = jax.device_put(x), jax.device_put(y.astype(np.int32))
    return _stepper(lambda s: train_step(*s, jx, jy), (params, opt.init(params)),
                    lambda v: v.block_until_ready())


# ----------------------------------------------------------------------------
# ResNet basic block, forward + backward

def res_params():
    rng = np.random.default_rng(1)
    scale = 1 / np.sqrt(RES_CH * 9)
    def conv():
        return (rng.standard_normal((RES_CH, RES_CH, 3, 3)) * scale).astype(np.float32)

    def bn():
        return (1 + 0.1 * rng.standard_normal(RES_CH).astype(np.float32),
                0.1 * rng.standard_normal(RES_CH).astype(np.float32))
    (g1, b1), (g2, b2) = bn(), bn()
    return [conv(), g1, b1, conv(), g2, b2]


def res_data():
    rng = np.random.default_rng(2)
    shape = (RES_BATCH, RES_CH, RES_HW, RES_HW)
    return rng.standard_normal(shape).astype(np.float32), rng.standard_normal(shape).astype(
        np.float32)


def _bn(np_like, h, gamma, beta):
    mean = np_like.mean(h, axis=(0, 2, 3), keepdims=True)
    var = np_like.mean((h - mean) ** 2, axis=(0, 2, 3), keepdims=True)
    return (h - mean) / np_like.sqrt(var + 1e-5) * gamma[None, :, None, None] \
        + beta[None, :, None, None]


def res_block_grad(g):
    """fgrad's jitted gradient of the block's sum(out · g) w.r.t. (params, x), with
    fgrad_nn's batch_norm (batch statistics) and fgrad.nn.relu, as PyTorch uses its own."""
    stats = np.zeros(RES_CH, np.float32), np.ones(RES_CH, np.float32)   # unused running stats

    def bn(h, gamma, beta):
        return F.batch_norm(h, *stats, gamma, beta, training=True)[0]

    def block(p, x):
        w1, g1, b1, w2, g2, b2 = p
        h = fgrad.nn.relu(bn(F.conv2d(x, w1, padding=1), g1, b1))
        h = bn(F.conv2d(h, w2, padding=1), g2, b2)
        return fnp.sum(fgrad.nn.relu(h + x) * g)
    return fgrad.jit(fgrad.grad(block, argnums=(0, 1)))


def res_fgrad(p, x, g):
    grad = res_block_grad(g)
    return grad(p, x), lambda: fgrad.tree.map(np.asarray, grad(p, x))


def res_torch(p, x, g, compiled):
    torch = peers.torch()
    F_ = torch.nn.functional
    tp = [torch.from_numpy(v.copy()).requires_grad_() for v in p]
    tx = torch.from_numpy(x.copy()).requires_grad_()
    tg = torch.from_numpy(g)

    def block(w1, g1, b1, w2, g2, b2, x):
        h = F_.relu(F_.batch_norm(F_.conv2d(x, w1, padding=1), None, None, g1, b1, True))
        h = F_.batch_norm(F_.conv2d(h, w2, padding=1), None, None, g2, b2, True)
        return (F_.relu(h + x) * tg).sum()
    fn = torch.compile(block, dynamic=False) if compiled else block

    def grads():
        out = fn(*tp, tx)
        return torch.autograd.grad(out, (*tp, tx))
    first = grads()
    return (list(first[:-1]), first[-1]), grads


def res_jax(p, x, g):
    jax = peers.jax()
    jnp = jax.numpy

    def block(p, x):
        w1, g1, b1, w2, g2, b2 = p
        zero = jnp.zeros(RES_CH, jnp.float32)
        h = jax.nn.relu(_bn(jnp, _jax_conv(jax, x, w1, zero, 1), g1, b1))
        h = _bn(jnp, _jax_conv(jax, h, w2, zero, 1), g2, b2)
        return jnp.sum(jax.nn.relu(h + x) * g)
    grad = jax.jit(jax.grad(block, argnums=(0, 1)))
    jp, jx = jax.device_put(p), jax.device_put(x)
    first = grad(jp, jx)
    return first, lambda: jax.block_until_ready(grad(jp, jx))


# ----------------------------------------------------------------------------
# The two models' big convolutions on their own: forward, input and weight gradient

PART_SHAPES = [  # (label, batch, in features, out features, height = width, kernel, pad)
    (f"ResNet conv {RES_CH}→{RES_CH} 3×3, {RES_BATCH}×{RES_HW}×{RES_HW}",
     RES_BATCH, RES_CH, RES_CH, RES_HW, 3, 1),
    (f"CNN conv2 32→64 5×5, {BATCH}×14×14", BATCH, 32, 64, 14, 5, 2)]
PARTS = ("forward", "input gradient", "weight gradient")


def part_data(n, c, o, hw, k):
    rng = np.random.default_rng(3)
    return (rng.standard_normal((n, c, hw, hw)).astype(np.float32),
            (rng.standard_normal((o, c, k, k)) / np.sqrt(c * k * k)).astype(np.float32),
            rng.standard_normal((n, o, hw, hw)).astype(np.float32))


def parts_jax_style(lib, pad):
    """Each part as a jitted function of (x, w, ct), in fgrad or JAX (the same API)."""
    def conv(x, w):
        return lib.lax.conv_general_dilated(x, w, (1, 1), [(pad, pad)] * 2)
    return dict(zip(PARTS, (
        lib.jit(lambda x, w, ct: conv(x, w)),
        lib.jit(lambda x, w, ct: lib.vjp(lambda x: conv(x, w), x)[1](ct)[0]),
        lib.jit(lambda x, w, ct: lib.vjp(lambda w: conv(x, w), w)[1](ct)[0]))))


def parts_torch(pad):
    torch = peers.torch()
    F_, G_ = torch.nn.functional, torch.nn.grad
    return dict(zip(PARTS, (
        lambda x, w, ct: F_.conv2d(x, w, padding=pad),
        lambda x, w, ct: G_.conv2d_input(x.shape, w, ct, padding=pad),
        lambda x, w, ct: G_.conv2d_weight(x, w.shape, ct, padding=pad))))


def conv_parts(repeat, budget_s):
    """A table timing each part of each convolution in PART_SHAPES, every peer's
    result checked against fgrad's."""
    table = Table("10b. The big convolutions on their own (float32)", COLUMNS,
                  short="10b conv parts")
    torch, jax = peers.torch(), peers.jax()
    for label, n, c, o, hw, k, pad in PART_SHAPES:
        x, w, ct = part_data(n, c, o, hw, k)
        ours = parts_jax_style(fgrad, pad)
        libs = {"torch eager": (parts_torch(pad), torch.from_numpy) if torch
                else peers.missing("torch"),
                "jax.jit": (parts_jax_style(jax, pad), jax.device_put) if jax else peers.missing("jax")}
        for part in PARTS:
            expected = np.asarray(ours[part](x, w, ct))
            cells = {"fgrad jit": guarded(lambda: time_call(
                lambda: np.asarray(ours[part](x, w, ct)), repeat, budget_s))}
            for name, lib in libs.items():
                if isinstance(lib, str):
                    cells[name] = lib
                    continue
                fns, put = lib
                args = [put(a) for a in (x, w, ct)]

                def go(fn=fns[part], args=args, name=name):
                    close_in_norm(f"{name} {part}", fn(*args), expected, 1e-4)
                    return time_call(lambda: to_numpy(fn(*args)), repeat, budget_s)
                cells[name] = guarded(go)
            table.add(f"{label}: {part}", cells)
    return table


def close_in_norm(what, got, expected, rtol):
    """Each gradient within rtol of fgrad's in the 2-norm. Not element-wise: a ReLU
    input within rounding of 0 switches sides between libraries, which moves that
    element's gradient by a whole g and the weight gradients a little."""
    got, expected = fgrad.tree.leaves(got), fgrad.tree.leaves(expected)
    if len(got) != len(expected):
        raise Disagrees(f"{what}: {len(got)} outputs, expected {len(expected)}")
    for i, (a, b) in enumerate(zip(got, expected)):
        a, b = to_numpy(a).astype(np.float64), to_numpy(b).astype(np.float64)
        err = np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30)
        if a.shape != b.shape or not err <= rtol:
            raise Disagrees(f"{what}, output {i}: relative 2-norm error {err:.2e}")


def run(quick=False):
    repeat, budget_s = budget(quick, 2.0, repeat=5)
    x, y = cnn_data()
    w = cnn_weights(cnn_model())
    have_torch, have_jax = peers.torch() is not None, peers.jax() is not None
    runs = {"fgrad jit": lambda: cnn_fgrad(x, y),
            "torch eager": (lambda: cnn_torch(x, y, w, False)) if have_torch else None,
            "torch.compile": ((lambda: cnn_torch(x, y, w, True))
                              if have_torch and not peers.torch_compile_ok() else None),
            "jax.jit": ((lambda: cnn_jax(x, y, w))
                        if have_jax and peers.optax() is not None else None)}
    cells, first_losses = {}, {}

    def cell(name, start, reference):
        def go():
            seen, one = start()
            first_losses[name] = seen
            if reference is not None:
                agree(f"{name} losses of steps 1-2", seen, reference, 1e-4, 1e-5)
            return time_call(one, repeat, budget_s)
        return guarded(go)
    reference = None
    for name, start in runs.items():
        if start is None:
            cells[name] = (peers.torch_compile_ok() if name == "torch.compile" and have_torch
                           else peers.missing("jax" if name == "jax.jit" else "torch"))
            continue
        cells[name] = cell(name, start, reference)
        if name == "fgrad jit" and "fgrad jit" in first_losses:
            reference = first_losses["fgrad jit"]
    cnn = Table(TITLE, COLUMNS, short="10 CNN step")
    cnn.add(f"CNN training step, batch {BATCH}, 28×28", cells)

    p, (rx, rg) = res_params(), res_data()
    expected, fgrad_run = res_fgrad(p, rx, rg)
    res_cells = {"fgrad jit": guarded(lambda: time_call(fgrad_run, repeat, budget_s))}

    def checked(name, start):
        def go():
            first, one = start()
            close_in_norm(f"{name} block gradients", first, expected, 1e-2)
            return time_call(one, repeat, budget_s)
        return guarded(go)
    res_cells["torch eager"] = (checked("torch eager", lambda: res_torch(p, rx, rg, False))
                                if have_torch else peers.missing("torch"))
    res_cells["torch.compile"] = (peers.torch_compile_ok() or
                                  checked("torch.compile", lambda: res_torch(p, rx, rg, True)))
    res_cells["jax.jit"] = (checked("jax.jit", lambda: res_jax(p, rx, rg)) if have_jax
                            else peers.missing("jax"))
    cnn.add(f"ResNet basic block fwd+bwd, {RES_BATCH}×{RES_CH}×{RES_HW}×{RES_HW}", res_cells)
    parts = conv_parts(repeat, budget_s)
    losses_line = "; ".join(f"{k} {v[0]:.5f} / {v[1]:.5f}" for k, v in first_losses.items())
    return Section(TITLE, [cnn, parts], [
        "Per step / per call, median (min); the ratio column is fgrad's time / the best "
        "peer's (< 1: fgrad is faster).",
        f"CNN losses of the first two steps (checked to rtol 1e-4): {losses_line}.",
        "ResNet block: every library's gradients were checked against fgrad's by the "
        "relative 2-norm error of each gradient (≤ 1e-2): not element-wise, since a ReLU "
        "input within rounding of 0 falls on different sides in different libraries, and "
        "the BatchNorm shift gradients are float32 sums of 65,536 terms that mostly cancel. "
        "BatchNorm and ReLU: fgrad_nn's batch_norm and fgrad.nn.relu for fgrad, PyTorch's "
        "for torch (each library's own, with its backward rule), the BatchNorm formula "
        "written out in jax.numpy and jax.nn.relu for JAX.",
        "torch.compile compiles the forward pass (and its backward); Adam stays eager.",
        "10b: each convolution of the two models alone (x, w, cotangent ct of the "
        "output): conv(x, w), its input gradient, its weight gradient; fgrad and "
        "jax.jit as jitted vjps, torch as conv2d, torch.nn.grad.conv2d_input and "
        "conv2d_weight; every result within 1e-4 of fgrad's in the 2-norm."])


if __name__ == "__main__":
    import common
    common.main_for(run, TITLE)
