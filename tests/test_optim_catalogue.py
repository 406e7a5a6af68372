"""fgrad_nn.optim, issue 18's catalogue: AdaBelief, RAdam, AMSGrad, Yogi, Adafactor,
schedule-free AdamW, SGD with dampening, the eps_in_sqrt / bias_correction /
mu_dtype keywords, and the wrappers (multi_transform, apply_if_finite, zero_nans,
ema, params_ema, lookahead, adaptive_grad_clip, accumulation with a schedule).

Each is run for 20 steps on a small problem whose gradients depend on the
params, against a NumPy reference written here from the published update rule;
jit equals eager; states are pytrees that survive flatten/unflatten."""
import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad_nn import optim, schedules

STEPS = 20
TARGET = {"w": np.array([[1.0, -2.0, 0.5], [3.0, 0.0, -1.0], [0.3, 0.7, -0.4], [2.0, 1.0, 0.1]]),
          "b": np.array([0.5, -0.5, 2.0, 1.0, -1.5])}
CURV = {"w": np.linspace(0.3, 2.0, 12).reshape(4, 3), "b": np.array([2.0, 0.6, 1.0, 0.8, 1.4])}


def np_grad(params, t):
    """A gradient with curvature, a wobble and a per-step push (so signs flip)."""
    out = {}
    for k, p in params.items():
        push = 0.8 * np.cos(1.7 * t + np.arange(p.size).reshape(p.shape))
        out[k] = CURV[k] * (p - TARGET[k]) + 0.3 * np.sin(3 * p) + push
    return out


def start():
    rng = np.random.RandomState(0)
    return {"w": rng.randn(4, 3), "b": rng.randn(5)}


def run(opt, steps=STEPS, jit=False, grads=np_grad, params=None):
    """`steps` steps of `opt` from start(); the NumPy params after each step, and the state."""
    p = fgrad.tree.map(fnp.asarray, start() if params is None else params)
    state = opt.init(p)
    update = fgrad.jit(opt.update) if jit else opt.update
    history = []
    for t in range(steps):
        g = grads({k: np.asarray(v) for k, v in p.items()}, t)
        u, state = update(fgrad.tree.map(fnp.asarray, g), state, p)
        p = optim.apply_updates(p, u)
        history.append({k: np.asarray(v) for k, v in p.items()})
    return history, state


def run_reference(make_rule, steps=STEPS, grads=np_grad):
    """`make_rule(p0) -> step(p, g, t) -> p` per leaf (keeping its own state)."""
    p = start()
    rules = {k: make_rule(v.copy()) for k, v in p.items()}
    history = []
    for t in range(steps):
        g = grads(p, t)
        p = {k: rules[k](p[k], g[k], t + 1) for k in p}
        history.append(dict(p))
    return history


def assert_histories_close(got, want, rtol=1e-10, atol=1e-12, name=""):
    for step, (g, w) in enumerate(zip(got, want, strict=True), start=1):
        for k in w:
            np.testing.assert_allclose(g[k], w[k], rtol=rtol, atol=atol,
                                       err_msg=f"{name}: leaf {k}, step {step}")


# ----------------------------------------------------------------------------
# References, from the papers / PyTorch's documented algorithms / Optax's docs.

def ref_sgd_dampening(lr, momentum, dampening, weight_decay=0.0):
    """PyTorch's SGD: buf = g on the first step, then momentum·buf + (1 - dampening)·g."""
    def make(p0):
        buf = [None]

        def step(p, g, t):
            g = g + weight_decay * p
            buf[0] = g.copy() if buf[0] is None else momentum * buf[0] + (1 - dampening) * g
            return p - lr * buf[0]
        return step
    return make


def ref_rmsprop(lr, decay, eps, eps_in_sqrt, bias_correction, centered=False):
    def make(p0):
        s = {"v": np.zeros_like(p0), "m": np.zeros_like(p0)}

        def step(p, g, t):
            s["v"] = decay * s["v"] + (1 - decay) * g * g
            s["m"] = decay * s["m"] + (1 - decay) * g
            corr = (1 - decay ** t) if bias_correction else 1.0
            var = s["v"] / corr - (s["m"] / corr) ** 2 if centered else s["v"] / corr
            denom = np.sqrt(var + eps) if eps_in_sqrt else np.sqrt(var) + eps
            return p - lr * g / denom
        return step
    return make


def ref_adam_mu_float32(lr, b1=0.9, b2=0.999, eps=1e-8):
    """Adam whose first moment is stored rounded to float32 between steps."""
    def make(p0):
        s = {"m": np.zeros(p0.shape, np.float32), "v": np.zeros_like(p0)}

        def step(p, g, t):
            m = b1 * s["m"].astype(np.float64) + (1 - b1) * g
            s["v"] = b2 * s["v"] + (1 - b2) * g * g
            s["m"] = m.astype(np.float32)
            return p - lr * (m / (1 - b1 ** t)) / (np.sqrt(s["v"] / (1 - b2 ** t)) + eps)
        return step
    return make


def ref_adabelief(lr, b1=0.9, b2=0.999, eps=1e-16, eps_root=1e-16):
    """AdaBelief (Zhuang et al. 2020, Algorithm 2)."""
    def make(p0):
        s = {"m": np.zeros_like(p0), "s": np.zeros_like(p0)}

        def step(p, g, t):
            s["m"] = b1 * s["m"] + (1 - b1) * g
            s["s"] = b2 * s["s"] + (1 - b2) * (g - s["m"]) ** 2 + eps_root
            m_hat = s["m"] / (1 - b1 ** t)
            s_hat = s["s"] / (1 - b2 ** t)
            return p - lr * m_hat / (np.sqrt(s_hat) + eps)
        return step
    return make


def ref_radam(lr, b1=0.9, b2=0.999, eps=1e-8, threshold=5.0):
    """RAdam (Liu et al. 2020, Algorithm 2)."""
    rho_inf = 2 / (1 - b2) - 1

    def make(p0):
        s = {"m": np.zeros_like(p0), "v": np.zeros_like(p0)}

        def step(p, g, t):
            s["m"] = b1 * s["m"] + (1 - b1) * g
            s["v"] = b2 * s["v"] + (1 - b2) * g * g
            m_hat = s["m"] / (1 - b1 ** t)
            rho = rho_inf - 2 * t * b2 ** t / (1 - b2 ** t)
            if rho >= threshold:
                r = np.sqrt((rho - 4) * (rho - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho))
                v_hat = np.sqrt(s["v"] / (1 - b2 ** t))
                return p - lr * r * m_hat / (v_hat + eps)
            return p - lr * m_hat
        return step
    return make


def ref_amsgrad(lr, b1=0.9, b2=0.999, eps=1e-8):
    """AMSGrad with bias-corrected moments, the max taken of the corrected v."""
    def make(p0):
        s = {"m": np.zeros_like(p0), "v": np.zeros_like(p0), "vmax": np.zeros_like(p0)}

        def step(p, g, t):
            s["m"] = b1 * s["m"] + (1 - b1) * g
            s["v"] = b2 * s["v"] + (1 - b2) * g * g
            s["vmax"] = np.maximum(s["vmax"], s["v"] / (1 - b2 ** t))
            return p - lr * (s["m"] / (1 - b1 ** t)) / (np.sqrt(s["vmax"]) + eps)
        return step
    return make


def ref_yogi(lr, b1=0.9, b2=0.999, eps=1e-3, initial=1e-6):
    """Yogi (Zaheer et al. 2018, Algorithm 2), moments starting at `initial`."""
    def make(p0):
        s = {"m": np.full_like(p0, initial), "v": np.full_like(p0, initial)}

        def step(p, g, t):
            s["m"] = b1 * s["m"] + (1 - b1) * g
            s["v"] = s["v"] - (1 - b2) * np.sign(s["v"] - g * g) * g * g
            m_hat, v_hat = s["m"] / (1 - b1 ** t), s["v"] / (1 - b2 ** t)
            return p - lr * m_hat / (np.sqrt(v_hat) + eps)
        return step
    return make


def ref_adafactor(lr, decay_rate=0.8, eps=1e-30, clip=1.0, momentum=None, weight_decay=None,
                  factor_min=2):
    """Adafactor (Shazeer & Stern 2018, Algorithms 4-5) with Optax's ordering: RMS
    clip, times lr, times max(rms(p), 1e-3), momentum, decoupled weight decay."""
    def make(p0):
        s = {"r": None, "c": None, "v": np.zeros_like(p0), "mom": np.zeros_like(p0)}
        factored = p0.ndim == 2 and sorted(p0.shape)[-2] >= factor_min

        def step(p, g, t):
            beta = 1 - t ** (-decay_rate)
            sq = g * g + eps
            if factored:
                # row/column means over the larger and the smaller axis
                big, small = np.argmax(p0.shape), 1 - np.argmax(p0.shape)
                r_new = sq.mean(axis=big)          # one entry per index of the small axis
                c_new = sq.mean(axis=small)        # one entry per index of the big axis
                s["r"] = r_new if s["r"] is None else beta * s["r"] + (1 - beta) * r_new
                s["c"] = c_new if s["c"] is None else beta * s["c"] + (1 - beta) * c_new
                v = np.expand_dims(s["r"], big) * np.expand_dims(s["c"], small) / s["r"].mean()
            else:
                s["v"] = beta * s["v"] + (1 - beta) * sq
                v = s["v"]
            u = g / np.sqrt(v)
            u = u / max(1.0, np.sqrt(np.mean(u * u)) / clip)
            u = lr * u * max(np.sqrt(np.mean(p * p)), 1e-3)
            if momentum is not None:
                s["mom"] = momentum * s["mom"] + (1 - momentum) * u
                u = s["mom"]
            if weight_decay is not None:
                u = u + weight_decay * p
            return p - u
        return step
    return make


def ref_lookahead_adam(lr, k, alpha):
    """Lookahead (Zhang et al. 2019, Algorithm 1) around Adam; returns (fast, slow)."""
    def make(p0):
        s = {"m": np.zeros_like(p0), "v": np.zeros_like(p0), "slow": p0.copy(), "n": 0}

        def step(p, g, t):
            s["m"] = 0.9 * s["m"] + 0.1 * g
            s["v"] = 0.999 * s["v"] + 0.001 * g * g
            fast = p - lr * (s["m"] / (1 - 0.9 ** t)) / (np.sqrt(s["v"] / (1 - 0.999 ** t)) + 1e-8)
            s["n"] += 1
            if s["n"] == k:
                s["n"] = 0
                s["slow"] = s["slow"] + alpha * (fast - s["slow"])
                fast = s["slow"].copy()
            return fast
        step.slow = lambda: s["slow"]
        return step
    return make


def ref_lion_mu_float32(lr, b1=0.9, b2=0.99, weight_decay=0.0):
    """Lion (Chen et al. 2023, Algorithm 2), its momentum stored rounded to float32."""
    def make(p0):
        s = {"m": np.zeros(p0.shape, np.float32)}

        def step(p, g, t):
            m = s["m"].astype(np.float64)
            p = p - lr * (np.sign(b1 * m + (1 - b1) * g) + weight_decay * p)
            s["m"] = (b2 * m + (1 - b2) * g).astype(np.float32)
            return p
        return step
    return make


def ref_sgd_momentum_float32(lr, momentum):
    """Heavy-ball momentum, the buffer stored rounded to float32 between steps."""
    def make(p0):
        s = {"buf": np.zeros(p0.shape, np.float32)}

        def step(p, g, t):
            buf = g + momentum * s["buf"].astype(np.float64)
            s["buf"] = buf.astype(np.float32)
            return p - lr * buf
        return step
    return make


CASES = {
    "lion_mu_dtype": (lambda: optim.lion(0.01, mu_dtype=fnp.float32, weight_decay=0.1),
                      ref_lion_mu_float32(0.01, weight_decay=0.1)),
    "sgd_accumulator_dtype": (lambda: optim.sgd(0.05, 0.9, accumulator_dtype=fnp.float32),
                              ref_sgd_momentum_float32(0.05, 0.9)),
    "sgd_dampening": (lambda: optim.sgd(0.05, momentum=0.9, dampening=0.3),
                      ref_sgd_dampening(0.05, 0.9, 0.3)),
    "sgd_dampening_wd": (lambda: optim.sgd(0.05, momentum=0.5, weight_decay=0.1, dampening=0.5),
                         ref_sgd_dampening(0.05, 0.5, 0.5, 0.1)),
    "rmsprop_eps_in_sqrt": (lambda: optim.rmsprop(0.01, decay=0.9, eps=1e-3, eps_in_sqrt=True),
                            ref_rmsprop(0.01, 0.9, 1e-3, True, False)),
    "rmsprop_bias_correction": (
        lambda: optim.rmsprop(0.01, decay=0.9, eps=1e-3, bias_correction=True),
        ref_rmsprop(0.01, 0.9, 1e-3, False, True)),
    "rmsprop_centered_both": (
        lambda: optim.rmsprop(0.01, decay=0.8, eps=1e-2, centered=True, eps_in_sqrt=True,
                              bias_correction=True),
        ref_rmsprop(0.01, 0.8, 1e-2, True, True, centered=True)),
    "adam_mu_dtype": (lambda: optim.adam(0.05, mu_dtype=fnp.float32), ref_adam_mu_float32(0.05)),
    "adabelief": (lambda: optim.adabelief(0.05), ref_adabelief(0.05)),
    "adabelief_eps": (lambda: optim.adabelief(0.05, eps=1e-3, eps_root=1e-4),
                      ref_adabelief(0.05, eps=1e-3, eps_root=1e-4)),
    "radam": (lambda: optim.radam(0.05), ref_radam(0.05)),
    "amsgrad": (lambda: optim.amsgrad(0.05), ref_amsgrad(0.05)),
    "yogi": (lambda: optim.yogi(0.05), ref_yogi(0.05)),
    "adafactor": (lambda: optim.adafactor(0.05, min_dim_size_to_factor=2),
                  ref_adafactor(0.05)),
    "adafactor_momentum_wd": (
        lambda: optim.adafactor(0.05, min_dim_size_to_factor=2, momentum=0.9,
                                dtype_momentum=fnp.float64, weight_decay_rate=0.01,
                                clipping_threshold=0.5),
        ref_adafactor(0.05, momentum=0.9, weight_decay=0.01, clip=0.5)),
    "adafactor_unfactored": (lambda: optim.adafactor(0.05, factored=False),
                             ref_adafactor(0.05, factor_min=10 ** 9)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_twenty_steps_match_numpy_reference(name):
    make, rule = CASES[name]
    got, state = run(make())
    want = run_reference(rule)
    assert_histories_close(got, want, name=name)
    for leaf in fgrad.tree.leaves(state):
        assert np.all(np.isfinite(np.asarray(leaf)))


@pytest.mark.parametrize("name", sorted(CASES))
def test_jit_equals_eager_and_state_is_a_pytree(name):
    make, _ = CASES[name]
    eager, eager_state = run(make(), steps=6)
    jitted, jit_state = run(make(), steps=6, jit=True)
    assert_histories_close(jitted, eager, rtol=1e-13, atol=1e-14, name=name)
    leaves, treedef = fgrad.tree.flatten(jit_state)
    for e, j in zip(fgrad.tree.leaves(eager_state), leaves, strict=True):
        np.testing.assert_allclose(np.asarray(j), np.asarray(e), rtol=1e-13, atol=1e-14)
        assert np.asarray(j).dtype == np.asarray(e).dtype
    rebuilt = fgrad.tree.unflatten(treedef, leaves)
    assert type(rebuilt) is type(jit_state)
    p = fgrad.tree.map(fnp.asarray, start())
    g = fgrad.tree.map(fnp.asarray, np_grad(start(), 0))
    u1, _ = make().update(g, rebuilt, p)
    u2, _ = make().update(g, jit_state, p)
    for a, b in zip(fgrad.tree.leaves(u1), fgrad.tree.leaves(u2), strict=True):
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes()


def test_mu_dtype_stores_the_first_moment_in_that_dtype():
    opt = optim.adam(0.1, mu_dtype="float32")
    state = opt.init({"w": fnp.zeros(3, fnp.float64)})
    assert state[0].mu["w"].dtype == np.float32 and state[0].nu["w"].dtype == np.float64
    _, state = fgrad.jit(opt.update)({"w": fnp.ones(3, fnp.float64)}, state,
                                     {"w": fnp.zeros(3, fnp.float64)})
    assert state[0].mu["w"].dtype == np.float32
    with pytest.raises(ValueError, match="mu_dtype must be a floating dtype"):
        optim.adam(0.1, mu_dtype=fnp.int32)


def test_radam_switches_from_momentum_to_rectified_steps():
    """With b2 = 0.999 the SMA length passes the threshold 5 at step 6: the first
    five updates are plain momentum, the later ones are scaled by 1/sqrt(v̂)."""
    opt = optim.scale_by_radam()
    g = {"w": fnp.asarray(np.array([4.0, -0.25]))}
    state = opt.init(g)
    outs = []
    for _ in range(7):
        u, state = opt.update(g, state)
        outs.append(np.asarray(u["w"]))
    for u in outs[:5]:
        np.testing.assert_allclose(u, [4.0, -0.25], rtol=1e-12)      # m̂ of a constant g is g
    assert np.all(np.abs(outs[6]) < 1.0)                            # r m̂ / |g| < 1


def test_sgd_dampening_errors():
    with pytest.raises(ValueError, match="nesterov momentum needs dampening=0"):
        optim.sgd(0.1, momentum=0.9, nesterov=True, dampening=0.1)
    with pytest.raises(ValueError, match="dampening applies to momentum"):
        optim.sgd(0.1, dampening=0.1)


# ----------------------------------------------------------------------------
# Schedule-free AdamW

def ref_schedule_free_adamw(lr, warmup, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.0,
                            power=2.0):
    """Defazio et al. 2024 with the x, y, z sequences kept explicitly. The learning
    rate of step t (1-based) weighs the average with lr(t); the base step uses
    lr(t - 1) (Optax reads its two schedules from counters one apart)."""
    def sched(t):
        return lr * min(t / warmup, 1.0) if warmup else lr

    def make(p0):
        s = {"x": p0.copy(), "z": p0.copy(), "v": np.zeros_like(p0), "ws": 0.0, "max_lr": 0.0}

        def step(y, g, t):
            s["max_lr"] = max(s["max_lr"], sched(t))
            w = s["max_lr"] ** power
            s["ws"] += w
            c = w / s["ws"] if s["ws"] > 0 else 0.0
            s["v"] = b2 * s["v"] + (1 - b2) * g * g
            d = g / (np.sqrt(s["v"] / (1 - b2 ** t)) + eps) + weight_decay * y
            s["z"] = s["z"] - sched(t - 1) * d
            s["x"] = (1 - c) * s["x"] + c * s["z"]
            return b1 * s["x"] + (1 - b1) * s["z"]
        step.x = lambda: s["x"]
        return step
    return make


@pytest.mark.parametrize("warmup,weight_decay", [(None, 0.0), (5, 0.05)])
@pytest.mark.parametrize("jit", [False, True])
def test_schedule_free_adamw_matches_reference_and_eval_params(warmup, weight_decay, jit):
    opt = optim.schedule_free_adamw(0.05, warmup_steps=warmup, weight_decay=weight_decay)
    got, state = run(opt, jit=jit)
    rules = {}

    def make(p0):
        rules[len(rules)] = ref_schedule_free_adamw(0.05, warmup, weight_decay=weight_decay)(p0)
        return rules[len(rules) - 1]

    want = run_reference(make)
    # the warmup schedule computes in float32, the reference in float64
    rtol = 1e-9 if warmup is None else 1e-6
    assert_histories_close(got, want, rtol=rtol, atol=rtol / 100, name="schedule_free_adamw")
    y = fgrad.tree.map(fnp.asarray, got[-1])
    x = optim.schedule_free_eval_params(state, y)
    for i, k in enumerate(start()):
        np.testing.assert_allclose(np.asarray(x[k]), rules[i].x(), rtol=rtol, atol=rtol / 100)


def test_schedule_free_eval_params_needs_its_state():
    with pytest.raises(ValueError, match="no ScheduleFreeState"):
        optim.schedule_free_eval_params(optim.adam(0.1).init({"w": fnp.ones(2)}),
                                        {"w": fnp.ones(2)})


def quadratic(q):
    return sum(0.5 * fnp.sum(CURV[k] * (q[k] - TARGET[k]) ** 2) for k in q)


def test_schedule_free_drives_quadratic_eval_params_to_minimum():
    """x averages all of z's iterates, so it lags; it still ends 1000x lower."""
    opt = optim.schedule_free_adamw(0.1, warmup_steps=10)
    p = {"w": fnp.zeros((4, 3)), "b": fnp.zeros(5)}
    state = opt.init(p)

    @fgrad.jit
    def step(p, state):
        g = fgrad.grad(quadratic)(p)
        u, state = opt.update(g, state, p)
        return optim.apply_updates(p, u), state

    first = float(quadratic(p))
    for _ in range(300):
        p, state = step(p, state)
    x = optim.schedule_free_eval_params(state, p)
    assert float(quadratic(x)) < 1e-3 * first


# ----------------------------------------------------------------------------
# Wrappers

def test_multi_transform_gives_each_group_its_optimizer():
    labels = {"w": "adam", "b": "sgd"}
    opt = optim.multi_transform({"adam": optim.adam(0.05), "sgd": optim.sgd(0.05, 0.9)}, labels)
    got, state = run(opt)
    want_w = run_reference(lambda p0: ref_amsgrad_free_adam(0.05)(p0))
    want_b = run_reference(ref_sgd_dampening(0.05, 0.9, 0.0))
    assert_histories_close([{"w": g["w"]} for g in got], [{"w": w["w"]} for w in want_w])
    assert_histories_close([{"b": g["b"]} for g in got], [{"b": w["b"]} for w in want_b])
    jitted, _ = run(opt, steps=5, jit=True)
    assert_histories_close(jitted, got[:5], rtol=1e-13)
    by_function = optim.multi_transform(
        {"adam": optim.adam(0.05), "sgd": optim.sgd(0.05, 0.9)},
        lambda p: fgrad.tree.map(lambda x: "adam" if x.ndim == 2 else "sgd", p))
    assert_histories_close(run(by_function, steps=5)[0], got[:5], rtol=0, atol=0)
    assert set(state.inner_states) == {"adam", "sgd"}


def ref_amsgrad_free_adam(lr):
    def make(p0):
        s = {"m": np.zeros_like(p0), "v": np.zeros_like(p0)}

        def step(p, g, t):
            s["m"] = 0.9 * s["m"] + 0.1 * g
            s["v"] = 0.999 * s["v"] + 0.001 * g * g
            return p - lr * (s["m"] / (1 - 0.9 ** t)) / (np.sqrt(s["v"] / (1 - 0.999 ** t)) + 1e-8)
        return step
    return make


def test_multi_transform_errors():
    p = {"w": fnp.ones((2, 2)), "b": fnp.ones(2)}
    with pytest.raises(ValueError, match="labels 'other' have no transformation"):
        optim.multi_transform({"a": optim.sgd(0.1)}, {"w": "a", "b": "other"}).init(p)
    with pytest.raises(ValueError, match="tree of labels"):
        optim.multi_transform({"a": optim.sgd(0.1)}, {"x": "a"}).init(p)
    with pytest.raises(TypeError, match="non-empty dict"):
        optim.multi_transform([optim.sgd(0.1)], {"w": "a", "b": "a"})


def nan_grads(bad_steps):
    def grads(p, t):
        g = np_grad(p, t)
        if t in bad_steps:
            g["w"] = g["w"].copy()
            g["w"][1, 2] = np.nan if t % 2 else np.inf
        return g
    return grads


@pytest.mark.parametrize("jit", [False, True])
def test_apply_if_finite_skips_and_counts_bad_steps(jit):
    bad = {3, 7, 8, 12, 13, 14}
    opt = optim.apply_if_finite(optim.adam(0.05), max_consecutive_errors=2)
    got, state = run(opt, steps=15, jit=jit, grads=nan_grads(bad))
    # the reference: Adam over the finite steps only; step 14 is the third bad one
    # in a row (> 2), so it goes through and poisons the params
    ref = ref_amsgrad_free_adam(0.05)
    p = start()
    rules = {k: ref(v.copy()) for k, v in p.items()}
    n = 0
    for t in range(14):
        g = nan_grads(bad)(p, t)
        if t not in bad:
            n += 1
            p = {k: rules[k](p[k], g[k], n) for k in p}
        assert_histories_close([got[t]], [p], name=f"step {t}")
    assert np.isnan(got[14]["w"]).any()
    assert int(state.total_notfinite) == 6 and int(state.notfinite_count) == 3
    assert not bool(state.last_finite)


def test_zero_nans_replaces_nans_and_flags_leaves():
    t = optim.zero_nans()
    g = {"w": fnp.asarray(np.array([1.0, np.nan, 3.0])), "b": fnp.asarray(np.array([np.inf]))}
    state = t.init(g)
    assert not bool(state.found_nan["w"])
    for update in (t.update, fgrad.jit(t.update)):
        u, s = update(g, state)
        np.testing.assert_array_equal(np.asarray(u["w"]), [1.0, 0.0, 3.0])
        np.testing.assert_array_equal(np.asarray(u["b"]), [np.inf])      # only NaNs go
        assert bool(s.found_nan["w"]) and not bool(s.found_nan["b"])


@pytest.mark.parametrize("debias", [True, False])
def test_ema_of_updates(debias):
    t = optim.ema(0.8, debias=debias)
    rng = np.random.RandomState(1)
    gs = [rng.randn(3) for _ in range(STEPS)]
    state = t.init({"a": fnp.zeros(3)})
    e = np.zeros(3)
    update = fgrad.jit(t.update)
    for i, g in enumerate(gs, start=1):
        u, state = update({"a": fnp.asarray(g)}, state)
        e = 0.8 * e + 0.2 * g
        np.testing.assert_allclose(np.asarray(u["a"]), e / (1 - 0.8 ** i) if debias else e,
                                   rtol=1e-12)
    np.testing.assert_allclose(np.asarray(state.ema["a"]), e, rtol=1e-12)


@pytest.mark.parametrize("debias", [False, True])
def test_params_ema_tracks_the_average_for_evaluation(debias):
    tracker = optim.params_ema(0.9, debias=debias)
    opt = optim.adam(0.05)
    p = fgrad.tree.map(fnp.asarray, start())
    state, ema_state = opt.init(p), tracker.init(p)

    @fgrad.jit
    def step(p, state, ema_state, g):
        u, state = opt.update(g, state, p)
        p = optim.apply_updates(p, u)
        return p, state, tracker.update(p, ema_state)

    avg = {k: (np.zeros_like(v) if debias else v.copy()) for k, v in start().items()}
    for t in range(1, STEPS + 1):
        g = fgrad.tree.map(fnp.asarray, np_grad({k: np.asarray(v) for k, v in p.items()}, t))
        p, state, ema_state = step(p, state, ema_state, g)
        avg = {k: 0.9 * avg[k] + 0.1 * np.asarray(p[k]) for k in avg}
        value = tracker.value(ema_state)
        for k in avg:
            want = avg[k] / (1 - 0.9 ** t) if debias else avg[k]
            np.testing.assert_allclose(np.asarray(value[k]), want, rtol=1e-12)
    with pytest.raises(ValueError, match="params_ema.update"):
        tracker.update({"w": p["w"]}, ema_state)
    fresh = fgrad.tree.map(fnp.asarray, start())
    assert tracker.init(fresh).average["w"] is not fresh["w"]   # a copy: params may be donated


@pytest.mark.parametrize("reset_state", [False, True])
@pytest.mark.parametrize("jit", [False, True])
def test_lookahead_matches_reference(jit, reset_state):
    k, alpha = 4, 0.5
    opt = optim.lookahead(optim.adam(0.05), sync_period=k, slow_step_size=alpha,
                          reset_state=reset_state)
    p = optim.LookaheadParams.init_synced(fgrad.tree.map(fnp.asarray, start()))
    state = opt.init(p)
    update = fgrad.jit(opt.update) if jit else opt.update
    rules = {}
    ref_p = start()
    for t in range(STEPS):
        g = np_grad({kk: np.asarray(v) for kk, v in p.fast.items()}, t)
        u, state = update(fgrad.tree.map(fnp.asarray, g), state, p)
        assert isinstance(u, optim.LookaheadParams)
        p = optim.apply_updates(p, u)
        if not rules or (reset_state and t % k == 0):
            rules = {kk: ref_lookahead_adam(0.05, k, alpha)(v.copy()) for kk, v in ref_p.items()}
            n0 = t
        ref_p = {kk: rules[kk](ref_p[kk], g[kk], t - n0 + 1) for kk in ref_p}
        for kk in ref_p:
            np.testing.assert_allclose(np.asarray(p.fast[kk]), ref_p[kk], rtol=1e-10, atol=1e-12)
            np.testing.assert_allclose(np.asarray(p.slow[kk]), rules[kk].slow(), rtol=1e-10,
                                       atol=1e-12)
    assert int(state.steps_since_sync) == STEPS % k


def test_lookahead_errors():
    with pytest.raises(ValueError, match="sync_period must be >= 1"):
        optim.lookahead(optim.sgd(0.1), 0, 0.5)
    opt = optim.lookahead(optim.sgd(0.1), 2, 0.5)
    with pytest.raises(TypeError, match="LookaheadParams"):
        opt.init({"w": fnp.ones(2)})


def ref_agc(clipping, eps, layout, axis=None):
    def norms(x):
        if axis is not None:
            axes = axis
        elif np.squeeze(x).ndim <= 1:
            axes = tuple(range(x.ndim))
        elif layout == "torch":
            axes = tuple(range(1, x.ndim))
        else:
            axes = {2: (0,), 3: (0,), 4: (0, 1, 2), 5: (0, 1, 2, 3)}[x.ndim]
        return np.broadcast_to(np.sqrt(np.sum(x * x, axis=axes, keepdims=True)), x.shape)

    def clip(g, p):
        gn, mx = norms(g), clipping * np.maximum(norms(p), eps)
        return np.where(gn < mx, g, g * mx / np.maximum(gn, 1e-6))
    return clip


@pytest.mark.parametrize("layout,axis", [("optax", None), ("torch", None), ("optax", 1)])
def test_adaptive_grad_clip(layout, axis):
    rng = np.random.RandomState(2)
    params = {"w": rng.randn(4, 3), "b": rng.randn(1, 5), "k": rng.randn(2, 2, 3, 4) * 0.1,
              "s": np.array(0.0), "m": rng.randn(2, 3, 4)}
    if axis is not None:
        params = {"w": params["w"], "m": params["m"]}
    grads = {k: rng.randn(*v.shape) * np.array([0.01, 1.0, 10.0])[rng.randint(3)]
             for k, v in params.items()}
    grads["w"][:, 0] *= 100
    grads["w"][0, :] *= 100
    t = optim.adaptive_grad_clip(0.1, axis=axis, layout=layout)
    fp, fg = fgrad.tree.map(fnp.asarray, params), fgrad.tree.map(fnp.asarray, grads)
    for update in (t.update, fgrad.jit(t.update)):
        u, _ = update(fg, t.init(fp), fp)
        for k in params:
            want = ref_agc(0.1, 1e-3, layout, axis)(grads[k], params[k])
            np.testing.assert_allclose(np.asarray(u[k]), want, rtol=1e-12, err_msg=k)
    assert not np.allclose(np.asarray(u["w"]), grads["w"])        # something was clipped


def test_adaptive_grad_clip_errors():
    with pytest.raises(ValueError, match="layout"):
        optim.adaptive_grad_clip(0.1, layout="jax")
    six = {"x": fnp.ones((2,) * 6)}
    t = optim.adaptive_grad_clip(0.1)
    with pytest.raises(ValueError, match="6-d.*pass axis="):
        t.update(six, t.init(six), six)
    with pytest.raises(ValueError, match="needs the parameters"):
        t.update(six, t.init(six))


@pytest.mark.parametrize("jit", [False, True])
def test_accumulation_with_a_schedule_of_k(jit):
    """every_k = 1, 2, 3, ... as real steps accumulate: windows of growing length,
    each a step of Adam on the window's mean gradient."""
    acc = optim.accumulate_gradients(optim.adam(0.05), every_k=lambda step: step + 1)
    got, state = run(acc, steps=15, jit=jit)
    p = start()
    rules = {k: ref_amsgrad_free_adam(0.05)(v.copy()) for k, v in p.items()}
    window, n, k = [], 0, 1
    for t in range(15):
        window.append(np_grad(p, t))
        if len(window) == k:
            n += 1
            mean = {kk: sum(w[kk] for w in window) / k for kk in p}
            p = {kk: rules[kk](p[kk], mean[kk], n) for kk in p}
            window, k = [], k + 1
        assert_histories_close([got[t]], [p], name=f"call {t}")
    assert int(state.gradient_step) == 5 and int(state.mini_step) == 0


def test_accumulation_sum_instead_of_mean():
    acc = optim.accumulate_gradients(optim.sgd(1.0), every_k=2, use_grad_mean=False)
    p = {"w": fnp.zeros(2)}
    state = acc.init(p)
    u, state = acc.update({"w": fnp.ones(2)}, state, p)
    u, state = acc.update({"w": fnp.ones(2)}, state, p)
    np.testing.assert_array_equal(np.asarray(u["w"]), [-2.0, -2.0])


def test_optimizers_drive_a_quadratic_down():
    """Each new optimizer, jitted, reduces a convex quadratic by 1000x in 300 steps."""
    loss = quadratic
    for name, opt in [("adabelief", optim.adabelief(schedules.cosine_decay_schedule(0.1, 300))),
                      ("radam", optim.radam(schedules.cosine_decay_schedule(0.3, 300))),
                      ("amsgrad", optim.amsgrad(schedules.cosine_decay_schedule(0.1, 300))),
                      ("yogi", optim.yogi(schedules.cosine_decay_schedule(0.1, 300))),
                      ("adafactor", optim.adafactor(schedules.cosine_decay_schedule(0.3, 300),
                                                    min_dim_size_to_factor=2))]:
        p = {"w": fnp.zeros((4, 3)) + 0.5, "b": fnp.zeros(5) + 0.5}
        state = opt.init(p)

        @fgrad.jit
        def step(p, state):
            g = fgrad.grad(loss)(p)
            u, state = opt.update(g, state, p)
            return optim.apply_updates(p, u), state

        first = float(loss(p))
        for _ in range(300):
            p, state = step(p, state)
        assert float(loss(p)) < 1e-3 * first, (name, float(loss(p)), first)


# ----------------------------------------------------------------------------
# States of the wrappers are pytrees; hyper-parameters may be injected

WRAPPED = {
    "multi_transform": lambda: optim.multi_transform(
        {"a": optim.adam(0.05), "s": optim.sgd(0.05, 0.9, dampening=0.1)}, {"w": "a", "b": "s"}),
    "apply_if_finite": lambda: optim.apply_if_finite(optim.radam(0.05), 3),
    "zero_nans_ema": lambda: optim.chain(optim.zero_nans(), optim.ema(0.9), optim.sgd(0.1)),
    "accumulate": lambda: optim.accumulate_gradients(optim.yogi(0.05), lambda s: 2),
    "schedule_free": lambda: optim.schedule_free_adamw(0.05, warmup_steps=3),
    "agc_adabelief": lambda: optim.chain(optim.adaptive_grad_clip(0.1, layout="torch"),
                                         optim.adabelief(0.05)),
}


@pytest.mark.parametrize("name", sorted(WRAPPED))
def test_wrapper_states_flatten_and_jit(name):
    eager, eager_state = run(WRAPPED[name](), steps=5)
    jitted, jit_state = run(WRAPPED[name](), steps=5, jit=True)
    assert_histories_close(jitted, eager, rtol=1e-13, atol=1e-14, name=name)
    leaves, treedef = fgrad.tree.flatten(jit_state)
    for e, j in zip(fgrad.tree.leaves(eager_state), leaves, strict=True):
        np.testing.assert_allclose(np.asarray(j), np.asarray(e), rtol=1e-13, atol=1e-14)
    init_state = WRAPPED[name]().init(fgrad.tree.map(fnp.asarray, start()))
    assert ([np.asarray(x).dtype for x in fgrad.tree.leaves(init_state)]
            == [np.asarray(x).dtype for x in leaves]), "state dtypes drifted"
    rebuilt = fgrad.tree.unflatten(treedef, [fnp.asarray(np.asarray(x)) for x in leaves])
    p = fgrad.tree.map(fnp.asarray, jitted[-1])
    g = fgrad.tree.map(fnp.asarray, np_grad(jitted[-1], 5))
    opt = WRAPPED[name]()
    u1, s1 = fgrad.jit(opt.update)(g, rebuilt, p)
    u2, s2 = opt.update(g, jit_state, p)
    for a, b in zip(fgrad.tree.leaves((u1, s1)), fgrad.tree.leaves((u2, s2)), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("make,reference", [
    (lambda: optim.inject_hyperparams(optim.adafactor)(0.05, min_dim_size_to_factor=2),
     lambda: optim.adafactor(0.05, min_dim_size_to_factor=2)),
    (lambda: optim.inject_hyperparams(optim.adam)(0.05, mu_dtype=fnp.float32),
     lambda: optim.adam(0.05, mu_dtype=fnp.float32)),
    (lambda: optim.inject_hyperparams(optim.sgd)(0.05, momentum=0.9, nesterov=True),
     lambda: optim.sgd(0.05, momentum=0.9, nesterov=True)),
    (lambda: optim.sgd(0.05, momentum=lambda c: 0.9, dampening=0.2),
     lambda: optim.sgd(0.05, momentum=0.9, dampening=0.2)),
    (lambda: optim.radam(0.05, b1=lambda c: 0.9), lambda: optim.radam(0.05)),
], ids=["adafactor", "adam_mu_dtype", "sgd_nesterov", "sgd_dampening", "radam"])
def test_injected_hyperparameters_give_the_same_steps(make, reference):
    """Sizes, dtypes and switches stay static under inject_hyperparams (each
    factory names its own), numbers become state arrays with the same values."""
    got, state = run(make(), steps=5, jit=True)
    want, _ = run(reference(), steps=5)
    assert_histories_close(got, want, rtol=1e-12, atol=1e-14)
    assert isinstance(state, optim.InjectHyperparamsState)


@pytest.mark.parametrize("name", ["adabelief", "radam", "yogi", "adafactor", "sgd_dampening"])
def test_updates_are_differentiable(name):
    """Two steps of an optimizer are an fgrad function of the initial params (e.g.
    for meta-learning): derivatives of order 2 against central differences."""
    from fgrad.test_util import check_grads
    make, _ = CASES[name]
    opt = make()

    def two_steps(w, b):
        p = {"w": w, "b": b}
        state = opt.init(p)
        for _ in range(2):
            g = fgrad.grad(lambda q: fnp.sum(fnp.sin(q["w"])) + fnp.sum(q["b"] ** 3 + q["b"]))(p)
            u, state = opt.update(g, state, p)
            p = optim.apply_updates(p, u)
        return p["w"], p["b"]

    p0 = start()
    check_grads(two_steps, (p0["w"], p0["b"]), order=2, modes=("fwd", "rev"))
