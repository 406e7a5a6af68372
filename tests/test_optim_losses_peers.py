"""Cross-checks of issue 18's optimizers and losses against Optax and PyTorch.

Runs only where those are importable (the bench environment,
bench/.venv-peers); skipped elsewhere. Optimizers: 20 steps on the catalogue
tests' problem, float64 on both sides. Losses: values and input gradients."""
import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad_nn import losses, optim

from test_optim_catalogue import STEPS, np_grad, run, start


@pytest.fixture
def optax():
    optax = pytest.importorskip("optax")
    import jax
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield optax
    jax.config.update("jax_enable_x64", before)


@pytest.fixture
def torch():
    torch = pytest.importorskip("torch")
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield torch
    torch.set_default_dtype(before)


def run_optax(optax, opt, grads=np_grad, steps=STEPS, lookahead=False):
    import jax.numpy as jnp
    p = {k: jnp.asarray(v) for k, v in start().items()}
    if lookahead:
        p = optax.LookaheadParams.init_synced(p)
    state = opt.init(p)
    history = []
    for t in range(steps):
        fast = p.fast if lookahead else p
        g = {k: jnp.asarray(v) for k, v in grads({k: np.asarray(v) for k, v in fast.items()},
                                                 t).items()}
        u, state = opt.update(g, state, p)
        p = optax.apply_updates(p, u)
        history.append(p)
    return history, state


def assert_same(got, want, rtol=1e-9, atol=1e-11, name=""):
    for step, (g, w) in enumerate(zip(got, want, strict=True), start=1):
        for k in w:
            np.testing.assert_allclose(np.asarray(g[k]), np.asarray(w[k]), rtol=rtol, atol=atol,
                                       err_msg=f"{name}: {k}, step {step}")


def optax_cases(optax):
    import jax.numpy as jnp
    every_k = lambda step: 1 + (step >= 1) * 1 + (step >= 3) * 2  # noqa: E731  1, 2, 2, 4, ...
    return {
        "adabelief": (optim.adabelief(0.05), optax.adabelief(0.05)),
        "radam": (optim.radam(0.05), optax.radam(0.05)),
        "amsgrad": (optim.amsgrad(0.05), optax.amsgrad(0.05)),
        "yogi": (optim.yogi(0.05), optax.yogi(0.05)),
        "adafactor": (optim.adafactor(0.05, min_dim_size_to_factor=2),
                      optax.adafactor(0.05, min_dim_size_to_factor=2)),
        "adafactor_momentum_wd": (
            optim.adafactor(0.05, min_dim_size_to_factor=2, momentum=0.9,
                            dtype_momentum=fnp.float64, weight_decay_rate=0.01),
            optax.adafactor(0.05, min_dim_size_to_factor=2, momentum=0.9,
                            dtype_momentum=jnp.float64, weight_decay_rate=0.01)),
        "rmsprop_in_sqrt_bias": (
            optim.rmsprop(0.01, eps=1e-3, eps_in_sqrt=True, bias_correction=True),
            optax.rmsprop(0.01, eps=1e-3, eps_in_sqrt=True, bias_correction=True)),
        # centered with eps outside the root: the first step's variance is 0 up to
        # rounding; Optax takes sqrt of a tiny negative (NaN), fgrad_nn clamps it at 0
        "rmsprop_centered": (
            optim.rmsprop(0.01, eps=1e-3, centered=True, eps_in_sqrt=True,
                          bias_correction=True),
            optax.rmsprop(0.01, eps=1e-3, centered=True, eps_in_sqrt=True,
                          bias_correction=True)),
        "adam_mu_dtype": (optim.adam(0.05, mu_dtype=fnp.float32),
                          optax.adam(0.05, mu_dtype=jnp.float32)),
        "lion_mu_dtype": (optim.lion(0.01, mu_dtype=fnp.float32, weight_decay=0.1),
                          optax.lion(0.01, mu_dtype=jnp.float32, weight_decay=0.1)),
        "sgd_accumulator_dtype": (optim.sgd(0.05, 0.9, accumulator_dtype=fnp.float32),
                                  optax.sgd(0.05, 0.9, accumulator_dtype=jnp.float32)),
        "schedule_free_adamw": (
            optim.schedule_free_adamw(0.05, warmup_steps=5, weight_decay=0.05),
            optax.contrib.schedule_free_adamw(0.05, warmup_steps=5, weight_decay=0.05)),
        "multi_transform": (
            optim.multi_transform({"a": optim.adam(0.05), "s": optim.sgd(0.05, 0.9)},
                                  {"w": "a", "b": "s"}),
            optax.multi_transform({"a": optax.adam(0.05), "s": optax.sgd(0.05, 0.9)},
                                  {"w": "a", "b": "s"})),
        "ema_chain": (optim.chain(optim.ema(0.8), optim.sgd(0.1)),
                      optax.chain(optax.ema(0.8), optax.sgd(0.1))),
        "agc": (optim.chain(optim.adaptive_grad_clip(0.05), optim.sgd(0.1)),
                optax.chain(optax.adaptive_grad_clip(0.05), optax.sgd(0.1))),
        "multisteps_schedule": (
            optim.accumulate_gradients(optim.adam(0.05), every_k),
            optax.MultiSteps(optax.adam(0.05), every_k).gradient_transformation()),
    }


CASE_NAMES = ["adabelief", "radam", "amsgrad", "yogi", "adafactor", "adafactor_momentum_wd",
              "rmsprop_in_sqrt_bias", "rmsprop_centered", "adam_mu_dtype", "lion_mu_dtype",
              "sgd_accumulator_dtype",
              "schedule_free_adamw", "multi_transform", "ema_chain", "agc",
              "multisteps_schedule"]


@pytest.mark.parametrize("name", CASE_NAMES)
def test_optimizer_matches_optax_over_20_steps(optax, name):
    ours, theirs = optax_cases(optax)[name]
    got, state = run(ours)
    want, their_state = run_optax(optax, theirs)
    # Optax computes Adafactor's decay rate in float32, and with mu_dtype=float32
    # rounds b1·mu (momentum·trace) in float32 where fgrad_nn widens to float64 first;
    # MultiSteps keeps a running mean where fgrad_nn sums and divides once
    rtol = {"adam_mu_dtype": 1e-5, "sgd_accumulator_dtype": 1e-5, "adafactor": 1e-7,
            "adafactor_momentum_wd": 1e-7, "schedule_free_adamw": 1e-7,
            "multisteps_schedule": 1e-7}.get(name, 1e-9)
    assert_same(got, want, rtol=rtol, atol=rtol / 100, name=name)
    if name == "schedule_free_adamw":
        x = optim.schedule_free_eval_params(state, fgrad.tree.map(fnp.asarray, got[-1]))
        their_x = optax.contrib.schedule_free_eval_params(their_state, want[-1])
        assert_same([x], [their_x], rtol=rtol, atol=rtol / 100, name="eval params")


def test_lookahead_matches_optax(optax):
    ours = optim.lookahead(optim.adam(0.05), 4, 0.5, reset_state=True)
    theirs = optax.lookahead(optax.adam(0.05), 4, 0.5, reset_state=True)
    want, _ = run_optax(optax, theirs, lookahead=True)
    p = optim.LookaheadParams.init_synced(fgrad.tree.map(fnp.asarray, start()))
    state = ours.init(p)
    for t in range(STEPS):
        g = np_grad({k: np.asarray(v) for k, v in p.fast.items()}, t)
        u, state = ours.update(fgrad.tree.map(fnp.asarray, g), state, p)
        p = optim.apply_updates(p, u)
        assert_same([p.fast, p.slow], [want[t].fast, want[t].slow], name=f"lookahead {t}")


def test_apply_if_finite_and_zero_nans_match_optax(optax):
    def grads(p, t):
        g = np_grad(p, t)
        if t in (3, 7, 8, 12, 13, 14):
            g["w"] = g["w"].copy()
            g["w"][1, 2] = np.nan
        return g

    got, state = run(optim.apply_if_finite(optim.adam(0.05), 2), grads=grads, steps=14)
    want, their_state = run_optax(optax, optax.apply_if_finite(optax.adam(0.05), 2),
                                  grads=grads, steps=14)
    assert_same(got, want, name="apply_if_finite")
    assert int(state.total_notfinite) == int(their_state.total_notfinite)
    got, _ = run(optim.chain(optim.zero_nans(), optim.adam(0.05)), grads=grads)
    want, _ = run_optax(optax, optax.chain(optax.zero_nans(), optax.adam(0.05)), grads=grads)
    assert_same(got, want, name="zero_nans")


def test_sgd_dampening_matches_torch(torch):
    p0 = start()
    tp = {k: torch.tensor(v, requires_grad=True) for k, v in p0.items()}
    topt = torch.optim.SGD(list(tp.values()), lr=0.05, momentum=0.9, dampening=0.3,
                           weight_decay=0.1)
    got, _ = run(optim.sgd(0.05, momentum=0.9, dampening=0.3, weight_decay=0.1))
    for t in range(STEPS):
        g = np_grad({k: v.detach().numpy() for k, v in tp.items()}, t)
        for k, v in tp.items():
            v.grad = torch.tensor(g[k])
        topt.step()
        for k in tp:
            np.testing.assert_allclose(got[t][k], tp[k].detach().numpy(), rtol=1e-10,
                                       err_msg=f"{k}, step {t + 1}")


# ----------------------------------------------------------------------------
# Losses against torch.nn.functional: values and gradients w.r.t. the inputs

def loss_cases(torch):
    F = torch.nn.functional
    rng = np.random.default_rng(7)
    logits = rng.standard_normal((3, 4, 5))
    labels = rng.integers(0, 4, (3, 5))
    labels[1, 2] = -100
    weight = rng.uniform(0.3, 2.0, 4)
    probs = rng.dirichlet(np.ones(4), size=(3, 5)).transpose(0, 2, 1)
    x2, y2 = rng.standard_normal((6, 4)), rng.integers(0, 4, 6)
    signs = np.where(rng.uniform(size=(6, 4)) < 0.5, -1.0, 1.0)
    a, b = rng.standard_normal((6, 4)) * 2, rng.standard_normal((6, 4))
    counts = rng.poisson(2.0, (6, 4)).astype(float)
    logq = np.log(rng.dirichlet(np.ones(4), size=6))
    p = rng.dirichlet(np.ones(4), size=6)
    ys = np.sign(rng.standard_normal(6))
    T = torch.tensor
    W = T(weight)
    return {
        "cross_entropy": (
            lambda z: losses.softmax_cross_entropy(z, labels, axis=1, weight=weight,
                                                   ignore_index=-100, label_smoothing=0.1),
            lambda z: F.cross_entropy(z, T(labels), weight=W, ignore_index=-100,
                                      label_smoothing=0.1), logits),
        "cross_entropy_probs": (
            lambda z: losses.softmax_cross_entropy(z, probs, axis=1, weight=weight,
                                                   label_smoothing=0.2),
            lambda z: F.cross_entropy(z, T(probs), weight=W, label_smoothing=0.2), logits),
        "nll": (lambda z: losses.nll_loss(z, labels, axis=1, weight=weight, ignore_index=-100,
                                          reduction="sum"),
                lambda z: F.nll_loss(z, T(labels), weight=W, ignore_index=-100,
                                     reduction="sum"), logits),
        "kl_batchmean": (lambda z: losses.kl_div(z, p, reduction="batchmean"),
                         lambda z: F.kl_div(z, T(p), reduction="batchmean"), logq),
        "kl_log_target": (lambda z: losses.kl_div(z, np.log(p), log_target=True),
                          lambda z: F.kl_div(z, T(np.log(p)), reduction="mean",
                                             log_target=True), logq),
        "hinge_embedding": (lambda z: losses.hinge_embedding_loss(z, signs, margin=1.5),
                            lambda z: F.hinge_embedding_loss(z, T(signs), margin=1.5),
                            np.abs(a)),
        "multi_margin": (lambda z: losses.multi_margin_loss(z, y2, p=2, margin=0.7,
                                                            weight=weight),
                         lambda z: F.multi_margin_loss(z, T(y2), p=2, margin=0.7, weight=W),
                         x2),
        "smooth_l1": (lambda z: losses.smooth_l1_loss(z, b, beta=0.7),
                      lambda z: F.smooth_l1_loss(z, T(b), beta=0.7), a),
        "huber": (lambda z: losses.huber_loss(z, b, delta=0.7),
                  lambda z: F.huber_loss(z, T(b), delta=0.7), a),
        "poisson_full": (lambda z: losses.poisson_nll_loss(z, counts, full=True),
                         lambda z: F.poisson_nll_loss(z, T(counts), full=True), a),
        "poisson_rates": (lambda z: losses.poisson_nll_loss(z, counts, log_input=False,
                                                            reduction="sum"),
                          lambda z: F.poisson_nll_loss(z, T(counts), log_input=False,
                                                       reduction="sum"), np.abs(a) + 0.1),
        "cosine_embedding": (lambda z: losses.cosine_embedding_loss(z, b, ys, margin=0.1),
                             lambda z: F.cosine_embedding_loss(z, T(b), T(ys), margin=0.1), a),
    }


LOSS_NAMES = ["cross_entropy", "cross_entropy_probs", "nll", "kl_batchmean", "kl_log_target",
              "hinge_embedding", "multi_margin", "smooth_l1", "huber", "poisson_full",
              "poisson_rates", "cosine_embedding"]


@pytest.mark.parametrize("name", LOSS_NAMES)
def test_loss_value_and_gradient_match_torch(torch, name):
    ours, theirs, x = loss_cases(torch)[name]
    value, grad = fgrad.value_and_grad(ours)(fnp.asarray(x))
    tx = torch.tensor(x, requires_grad=True)
    tvalue = theirs(tx)
    tvalue.backward()
    np.testing.assert_allclose(float(value), tvalue.item(), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(grad), tx.grad.numpy(), rtol=1e-10, atol=1e-13)


def test_sigmoid_focal_loss_matches_torchvision(torch):
    tv_ops = pytest.importorskip("torchvision.ops")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 3)) * 2
    y = (rng.uniform(size=(5, 3)) < 0.3).astype(float)
    value, grad = fgrad.value_and_grad(
        lambda z: losses.sigmoid_focal_loss(z, y, alpha=0.4, gamma=1.5, reduction="sum"))(x)
    tx = torch.tensor(x, requires_grad=True)
    tvalue = tv_ops.sigmoid_focal_loss(tx, torch.tensor(y), alpha=0.4, gamma=1.5,
                                       reduction="sum")
    tvalue.backward()
    np.testing.assert_allclose(float(value), tvalue.item(), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(grad), tx.grad.numpy(), rtol=1e-10)
