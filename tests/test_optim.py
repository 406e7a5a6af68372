"""fgrad_nn.optim: every optimizer's first three steps against the published update
rule written here in plain NumPy, convergence on a convex quadratic, jit vs eager,
masking/freezing, gradient accumulation, schedules and injected hyper-parameters,
and errors for mismatched trees."""
import dataclasses

import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad_nn import optim
from fgrad_nn import schedules

# ----------------------------------------------------------------------------
# The fixed problem: two leaves of different shapes and three gradients, with
# elements whose sign flips between steps (Rprop) and some that keep it.

DTYPES = {"f32": (np.float32, np.float32), "f64": (np.float64, np.float64),
          "mixed": (np.float32, np.float64)}
TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-11, atol=1e-13)}


def problem(dtypes):
    rng = np.random.RandomState(0)
    dw, db = dtypes
    params = {"w": rng.randn(2, 3).astype(dw), "b": rng.randn(4).astype(db)}
    grads = []
    g = {k: rng.randn(*v.shape).astype(v.dtype) for k, v in params.items()}
    for _ in range(3):
        grads.append(g)
        flip = {k: np.where(rng.rand(*v.shape) < 0.4, -1.0, 1.0) * rng.uniform(0.5, 1.5, v.shape)
                for k, v in g.items()}
        g = {k: (g[k] * flip[k]).astype(g[k].dtype) for k in g}
    return params, grads


def run(opt, params, grads, jit=False):
    """Three steps of `opt`; the params after each step, as NumPy arrays."""
    fparams = fgrad.tree.map(fnp.asarray, params)
    state = opt.init(fparams)
    update = fgrad.jit(opt.update) if jit else opt.update
    out = []
    for g in grads:
        updates, state = update(fgrad.tree.map(fnp.asarray, g), state, fparams)
        fparams = optim.apply_updates(fparams, updates)
        out.append({k: np.asarray(v) for k, v in fparams.items()})
    return out, state


def run_reference(rule, params, grads):
    """Apply a per-leaf NumPy `rule(p, gs) -> [p1, p2, p3]` in float64."""
    per_leaf = {k: rule(params[k].astype(np.float64), [g[k].astype(np.float64) for g in grads])
                for k in params}
    return [{k: per_leaf[k][i] for k in params} for i in range(len(grads))]


# ----------------------------------------------------------------------------
# Reference update rules, each written from its paper / PyTorch's documented algorithm.

def ref_sgd(lr, momentum=0.0, nesterov=False, weight_decay=0.0):
    def rule(p, gs):
        out, buf = [], None
        for g in gs:
            d = g + weight_decay * p
            if momentum:
                buf = d.copy() if buf is None else momentum * buf + d
                d = d + momentum * buf if nesterov else buf
            p = p - lr * d
            out.append(p)
        return out
    return rule


def ref_adam(lr, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.0, nesterov=False):
    def rule(p, gs):
        out, m, v = [], np.zeros_like(p), np.zeros_like(p)
        for t, g in enumerate(gs, start=1):
            m = b1 * m + (1 - b1) * g
            v = b2 * v + (1 - b2) * g * g
            if nesterov:
                m_hat = b1 * m / (1 - b1 ** (t + 1)) + (1 - b1) * g / (1 - b1 ** t)
            else:
                m_hat = m / (1 - b1 ** t)
            v_hat = v / (1 - b2 ** t)
            p = p - lr * (m_hat / (np.sqrt(v_hat) + eps) + weight_decay * p)
            out.append(p)
        return out
    return rule


def ref_adamax(lr, b1=0.9, b2=0.999, eps=1e-8):
    def rule(p, gs):
        out, m, u = [], np.zeros_like(p), np.zeros_like(p)
        for t, g in enumerate(gs, start=1):
            m = b1 * m + (1 - b1) * g
            u = np.maximum(b2 * u, np.abs(g) + eps)     # Optax's and PyTorch's eps placement
            p = p - lr / (1 - b1 ** t) * m / u
            out.append(p)
        return out
    return rule


def ref_rmsprop(lr, alpha, eps=1e-8, centered=False, momentum=0.0):
    """PyTorch's RMSprop algorithm."""
    def rule(p, gs):
        out, sq, ga, buf = [], np.zeros_like(p), np.zeros_like(p), np.zeros_like(p)
        for g in gs:
            sq = alpha * sq + (1 - alpha) * g * g
            if centered:
                ga = alpha * ga + (1 - alpha) * g
                avg = np.sqrt(sq - ga * ga) + eps
            else:
                avg = np.sqrt(sq) + eps
            if momentum:
                buf = momentum * buf + g / avg
                p = p - lr * buf
            else:
                p = p - lr * g / avg
            out.append(p)
        return out
    return rule


def ref_adagrad(lr, initial=0.1, eps=1e-7):
    def rule(p, gs):
        out, s = [], np.full_like(p, initial)
        for g in gs:
            s = s + g * g
            p = p - lr * g / np.sqrt(s + eps)     # Optax's: eps inside the root
            out.append(p)
        return out
    return rule


def ref_adadelta(lr, rho=0.9, eps=1e-6, weight_decay=0.0):
    """PyTorch's Adadelta algorithm."""
    def rule(p, gs):
        out, sq, acc = [], np.zeros_like(p), np.zeros_like(p)
        for g in gs:
            g = g + weight_decay * p
            sq = rho * sq + (1 - rho) * g * g
            delta = np.sqrt(acc + eps) / np.sqrt(sq + eps) * g
            acc = rho * acc + (1 - rho) * delta * delta
            p = p - lr * delta
            out.append(p)
        return out
    return rule


def ref_rprop(lr, etaminus=0.5, etaplus=1.2, step_min=1e-6, step_max=50.0):
    """PyTorch's Rprop algorithm, element by element."""
    def rule(p, gs):
        out = []
        p = p.copy().ravel()
        prev, step = np.zeros_like(p), np.full_like(p, lr)
        for g in gs:
            g = g.ravel().copy()
            for i in range(p.size):
                s = g[i] * prev[i]
                factor = etaplus if s > 0 else (etaminus if s < 0 else 1.0)
                step[i] = min(max(step[i] * factor, step_min), step_max)
                if s < 0:
                    g[i] = 0.0
                p[i] -= np.sign(g[i]) * step[i]
                prev[i] = g[i]
            out.append(p.copy())
        shape = gs[0].shape
        return [x.reshape(shape) for x in out]
    return rule


def ref_lion(lr, b1=0.9, b2=0.99, weight_decay=0.0):
    def rule(p, gs):
        out, m = [], np.zeros_like(p)
        for g in gs:
            c = b1 * m + (1 - b1) * g
            p = p - lr * (np.sign(c) + weight_decay * p)
            m = b2 * m + (1 - b2) * g
            out.append(p)
        return out
    return rule


def ref_lamb(lr, b1=0.9, b2=0.999, eps=1e-6, weight_decay=0.0):
    def rule(p, gs):
        out, m, v = [], np.zeros_like(p), np.zeros_like(p)
        for t, g in enumerate(gs, start=1):
            m = b1 * m + (1 - b1) * g
            v = b2 * v + (1 - b2) * g * g
            r = (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps) + weight_decay * p
            pn, rn = np.linalg.norm(p), np.linalg.norm(r)
            ratio = pn / rn if pn > 0 and rn > 0 else 1.0
            p = p - lr * ratio * r
            out.append(p)
        return out
    return rule


def ref_sgd_l1(lr, coef):
    def rule(p, gs):
        out = []
        for g in gs:
            p = p - lr * (g + coef * np.sign(p))
            out.append(p)
        return out
    return rule


def ref_sgd_clip(lr, max_delta):
    def rule(p, gs):
        out = []
        for g in gs:
            p = p - lr * np.clip(g, -max_delta, max_delta)
            out.append(p)
        return out
    return rule


CASES = {
    "sgd": (lambda: optim.sgd(0.1), ref_sgd(0.1)),
    "sgd_momentum": (lambda: optim.sgd(0.1, momentum=0.9), ref_sgd(0.1, 0.9)),
    "sgd_nesterov_wd": (lambda: optim.sgd(0.1, momentum=0.8, nesterov=True, weight_decay=0.05),
                        ref_sgd(0.1, 0.8, True, 0.05)),
    "adam": (lambda: optim.adam(0.05), ref_adam(0.05)),
    "adam_eps": (lambda: optim.adam(0.05, b1=0.8, b2=0.99, eps=0.1),
                 ref_adam(0.05, 0.8, 0.99, 0.1)),
    "adamw": (lambda: optim.adamw(0.05, weight_decay=0.1), ref_adam(0.05, weight_decay=0.1)),
    "nadam": (lambda: optim.nadam(0.05), ref_adam(0.05, nesterov=True)),
    "adamax": (lambda: optim.adamax(0.05), ref_adamax(0.05)),
    "rmsprop": (lambda: optim.rmsprop(0.01, decay=0.99), ref_rmsprop(0.01, 0.99)),
    "rmsprop_centered_momentum": (
        lambda: optim.rmsprop(0.01, alpha=0.9, centered=True, momentum=0.5),
        ref_rmsprop(0.01, 0.9, centered=True, momentum=0.5)),
    "adagrad": (lambda: optim.adagrad(0.1), ref_adagrad(0.1)),
    "adadelta": (lambda: optim.adadelta(1.0, weight_decay=0.05),
                 ref_adadelta(1.0, weight_decay=0.05)),
    "rprop": (lambda: optim.rprop(0.01), ref_rprop(0.01)),
    "lion": (lambda: optim.lion(0.01, weight_decay=0.1), ref_lion(0.01, weight_decay=0.1)),
    "lamb": (lambda: optim.lamb(0.05, weight_decay=0.02), ref_lamb(0.05, weight_decay=0.02)),
    "sgd_l1": (lambda: optim.chain(optim.add_l1_decay(0.03), optim.sgd(0.1)),
               ref_sgd_l1(0.1, 0.03)),
    "sgd_clip": (lambda: optim.chain(optim.clip(0.5), optim.sgd(0.1)), ref_sgd_clip(0.1, 0.5)),
}


@pytest.mark.parametrize("dtypes", sorted(DTYPES))
@pytest.mark.parametrize("name", sorted(CASES))
def test_first_three_steps_match_numpy_reference(name, dtypes):
    make, rule = CASES[name]
    params, grads = problem(DTYPES[dtypes])
    got, state = run(make(), params, grads)
    want = run_reference(rule, params, grads)
    for step, (g, w) in enumerate(zip(got, want), start=1):
        for k in params:
            assert g[k].dtype == params[k].dtype, (name, k)
            np.testing.assert_allclose(g[k], w[k], **TOL[params[k].dtype.type],
                                       err_msg=f"{name}, leaf {k}, step {step}")
    init_state = make().init(fgrad.tree.map(fnp.asarray, params))
    assert ([np.result_type(x) for x in fgrad.tree.leaves(state)]
            == [np.result_type(x) for x in fgrad.tree.leaves(init_state)]), "state dtypes drifted"


@pytest.mark.parametrize("name", sorted(CASES))
def test_jitted_update_equals_eager(name):
    make, _ = CASES[name]
    params, grads = problem(DTYPES["mixed"])
    eager, eager_state = run(make(), params, grads)
    jitted, jit_state = run(make(), params, grads, jit=True)
    for e, j in zip(eager, jitted):
        for k in params:
            np.testing.assert_allclose(j[k], e[k], rtol=1e-6, atol=1e-7)
    for e, j in zip(fgrad.tree.leaves(eager_state), fgrad.tree.leaves(jit_state)):
        np.testing.assert_allclose(np.asarray(j), np.asarray(e), rtol=1e-6, atol=1e-7)


def test_clip_by_global_norm():
    params, grads = problem(DTYPES["f64"])
    g = grads[0]
    norm = np.sqrt(sum(np.sum(x ** 2) for x in g.values()))
    for max_norm in [norm / 3, norm * 2]:
        t = optim.clip_by_global_norm(max_norm)
        out, _ = t.update(fgrad.tree.map(fnp.asarray, g), t.init(params))
        factor = min(1.0, max_norm / norm)
        for k in g:
            np.testing.assert_allclose(np.asarray(out[k]), g[k] * factor, rtol=1e-12)
    assert float(optim.global_norm(fgrad.tree.map(fnp.asarray, g))) == pytest.approx(norm)


def test_param_block_norm_and_trust_ratio():
    params, grads = problem(DTYPES["f64"])
    fp, fg = fgrad.tree.map(fnp.asarray, params), fgrad.tree.map(fnp.asarray, grads[0])
    for t, factor in [
        (optim.scale_by_param_block_norm(), lambda k: np.linalg.norm(params[k])),
        (optim.scale_by_trust_ratio(),
         lambda k: np.linalg.norm(params[k]) / np.linalg.norm(grads[0][k]))]:
        out, _ = t.update(fg, t.init(fp), fp)
        for k in params:
            np.testing.assert_allclose(np.asarray(out[k]), grads[0][k] * factor(k), rtol=1e-12)
    zero = {"w": fnp.zeros((2, 3), fnp.float64), "b": fp["b"]}
    t = optim.scale_by_trust_ratio()
    out, _ = t.update(fg, t.init(zero), zero)
    np.testing.assert_array_equal(np.asarray(out["w"]), grads[0]["w"])  # ||p|| = 0: ratio 1


# ----------------------------------------------------------------------------
# Convergence on a convex quadratic

TARGET = {"w": np.array([[1.0, -2.0, 0.5], [3.0, 0.0, -1.0]]), "b": np.array([0.5, -0.5, 2.0, 1.0])}
CURVATURE = {"w": np.array([[0.5, 1.0, 2.0], [1.5, 0.7, 1.2]]), "b": np.array([2.0, 0.6, 1.0, 0.8])}


def quadratic(p):
    return sum(0.5 * fnp.sum(CURVATURE[k] * (p[k] - TARGET[k]) ** 2) for k in p)


def decaying(lr, steps):
    return schedules.cosine_decay_schedule(lr, steps)


CONVERGENCE = {
    "sgd": lambda n: optim.sgd(0.3),
    "sgd_momentum": lambda n: optim.sgd(0.1, momentum=0.9),
    "sgd_nesterov": lambda n: optim.sgd(0.1, momentum=0.9, nesterov=True),
    "adam": lambda n: optim.adam(decaying(0.1, n)),
    "adamw": lambda n: optim.adamw(decaying(0.1, n), weight_decay=0.0),
    "nadam": lambda n: optim.nadam(decaying(0.1, n)),
    "adamax": lambda n: optim.adamax(decaying(0.1, n)),
    "rmsprop": lambda n: optim.rmsprop(decaying(0.05, n)),
    "rmsprop_centered_momentum": lambda n: optim.rmsprop(decaying(0.02, n), centered=True,
                                                         momentum=0.5),
    "adagrad": lambda n: optim.adagrad(0.5),
    "adadelta": lambda n: optim.adadelta(1.0, eps=1e-4),
    "rprop": lambda n: optim.rprop(0.1),
    "lion": lambda n: optim.lion(decaying(0.05, n), weight_decay=0.0),
    "lamb": lambda n: optim.lamb(decaying(0.05, n)),
    "clipped_sgd": lambda n: optim.chain(optim.clip_by_global_norm(1.0), optim.sgd(0.3)),
}


@pytest.mark.parametrize("name", sorted(CONVERGENCE))
def test_drives_convex_quadratic_to_its_minimum(name):
    n = 400
    opt = CONVERGENCE[name](n)
    params = {"w": fnp.zeros((2, 3), fnp.float64), "b": fnp.zeros(4, fnp.float64)}
    state = opt.init(params)

    @fgrad.jit
    def step(params, state):
        loss, g = fgrad.value_and_grad(quadratic)(params)
        updates, state = opt.update(g, state, params)
        return optim.apply_updates(params, updates), state, loss

    first = None
    for _ in range(n):
        params, state, loss = step(params, state)
        first = float(loss) if first is None else first
    for k in TARGET:
        np.testing.assert_allclose(np.asarray(params[k]), TARGET[k], atol=2e-2, err_msg=name)
    assert float(quadratic(params)) < 1e-3 * first


def test_full_training_step_under_jit_equals_eager():
    rng = np.random.RandomState(3)
    x, y = rng.randn(8, 3).astype(np.float32), rng.randn(8).astype(np.float32)

    def loss(p, x, y):
        return fnp.mean((fnp.tanh(x @ p["w"]) @ p["v"] + p["b"] - y) ** 2)

    opt = optim.adamw(1e-2, weight_decay=1e-2)

    def step(p, s, x, y):
        value, g = fgrad.value_and_grad(loss)(p, x, y)
        u, s = opt.update(g, s, p)
        return optim.apply_updates(p, u), s, value

    p = {"w": fnp.asarray(rng.randn(3, 4).astype(np.float32)),
         "v": fnp.asarray(rng.randn(4).astype(np.float32)), "b": fnp.zeros((), fnp.float32)}
    pe, se = p, opt.init(p)
    pj, sj = p, opt.init(p)
    jstep = fgrad.jit(step)
    for _ in range(3):
        pe, se, le = step(pe, se, x, y)
        pj, sj, lj = jstep(pj, sj, x, y)
        np.testing.assert_allclose(float(lj), float(le), rtol=1e-5)
    for e, j in zip(fgrad.tree.leaves(pe), fgrad.tree.leaves(pj)):
        np.testing.assert_allclose(np.asarray(j), np.asarray(e), rtol=1e-5, atol=1e-6)
        assert np.asarray(j).dtype == np.float32


# ----------------------------------------------------------------------------
# Masking and freezing

def three_leaf_problem():
    rng = np.random.RandomState(5)
    params = {"w": fnp.asarray(rng.randn(2, 3)), "b": fnp.asarray(rng.randn(3)),
              "c": fnp.asarray(rng.randn(4, 1))}
    grads = [{k: fnp.asarray(rng.randn(*v.shape)) for k, v in params.items()} for _ in range(3)]
    return params, grads


def steps(opt, params, grads, jit=False):
    state = opt.init(params)
    update = fgrad.jit(opt.update) if jit else opt.update
    for g in grads:
        u, state = update(g, state, params)
        params = optim.apply_updates(params, u)
    return params, state


@pytest.mark.parametrize("jit", [False, True])
def test_freeze_keeps_exactly_the_frozen_leaves(jit):
    params, grads = three_leaf_problem()
    frozen = {"w": False, "b": True, "c": False}
    out, _ = steps(optim.chain(optim.freeze(frozen), optim.adam(0.1)), params, grads, jit)
    free, _ = steps(optim.adam(0.1), params, grads, jit)
    assert np.asarray(out["b"]).tobytes() == np.asarray(params["b"]).tobytes()
    for k in ["w", "c"]:
        assert not np.array_equal(np.asarray(out[k]), np.asarray(params[k]))
        np.testing.assert_array_equal(np.asarray(out[k]), np.asarray(free[k]))


def test_masked_applies_inner_to_selected_leaves_only():
    params, grads = three_leaf_problem()
    mask = {"w": True, "b": False, "c": True}
    opt = optim.masked(optim.adam(0.1), mask)
    state = opt.init(params)
    # adam's count and mu, nu of w and c only; then the learning-rate state (count, lr)
    assert len(fgrad.tree.leaves(state)) == 1 + 2 * 2 + 2
    u, state = opt.update(grads[0], state, params)
    assert np.asarray(u["b"]).tobytes() == np.asarray(grads[0]["b"]).tobytes()  # passed through
    ref_u, _ = optim.adam(0.1).update(grads[0], optim.adam(0.1).init(params), params)
    for k in ["w", "c"]:
        np.testing.assert_array_equal(np.asarray(u[k]), np.asarray(ref_u[k]))


def test_masked_by_function_and_frozen_rest():
    params, grads = three_leaf_problem()
    trainable = lambda p: {k: v.ndim == 2 for k, v in p.items()}  # noqa: E731
    opt = optim.chain(optim.masked(optim.sgd(0.1, momentum=0.9), trainable),
                      optim.freeze(lambda p: {k: v.ndim != 2 for k, v in p.items()}))
    out, _ = steps(opt, params, grads)
    assert np.asarray(out["b"]).tobytes() == np.asarray(params["b"]).tobytes()
    assert not np.array_equal(np.asarray(out["w"]), np.asarray(params["w"]))


def test_adamw_mask_decays_only_masked_leaves():
    params, grads = problem(DTYPES["f64"])
    opt = optim.adamw(0.05, weight_decay=0.3, mask={"w": True, "b": False})
    got, _ = run(opt, params, grads)
    with_decay = run_reference(ref_adam(0.05, weight_decay=0.3), params, grads)
    without = run_reference(ref_adam(0.05), params, grads)
    np.testing.assert_allclose(got[-1]["w"], with_decay[-1]["w"], rtol=1e-11)
    np.testing.assert_allclose(got[-1]["b"], without[-1]["b"], rtol=1e-11)


def test_mask_prefix_tree_and_bad_mask():
    params = {"layer": {"w": fnp.ones((2, 2)), "b": fnp.ones(2)}, "out": fnp.ones(3)}
    grads = fgrad.tree.map(fnp.ones_like, params)
    opt = optim.chain(optim.freeze({"layer": True, "out": False}), optim.sgd(1.0))
    u, _ = opt.update(grads, opt.init(params), params)
    assert float(fnp.sum(fnp.abs(u["layer"]["w"]))) == 0 and float(fnp.sum(u["out"])) == -3
    with pytest.raises(ValueError, match="mask"):
        optim.freeze({"nope": True}).init(params)


def small_model():
    from fgrad_nn import layers as L
    keys = fgrad.random.split(fgrad.random.key(0), 2)
    return L.Sequential(L.Linear(3, 4, key=keys[0]), L.ReLU(), L.Linear(4, 2, key=keys[1]))


def matrices(tree):
    return fgrad.tree.map(lambda p: p.ndim > 1, tree)


@pytest.mark.parametrize("make", [
    lambda mask: optim.adamw(0.05, weight_decay=0.3, mask=mask),
    lambda mask: optim.lion(0.05, weight_decay=0.3, mask=mask),
    lambda mask: optim.lamb(0.05, weight_decay=0.3, mask=mask),
    lambda mask: optim.adadelta(0.5, weight_decay=0.3, mask=mask),
    lambda mask: optim.chain(optim.masked(optim.sgd(0.1, momentum=0.9), mask),
                             optim.add_decayed_weights(0.3, mask), optim.scale(-0.1)),
    lambda mask: optim.chain(optim.freeze(mask), optim.sgd(0.1)),
    lambda mask: optim.inject_hyperparams(optim.adamw)(0.05, weight_decay=0.3, mask=mask),
    lambda mask: optim.adamw(schedules.constant_schedule(0.05), weight_decay=0.3, mask=mask,
                             b1=lambda count: 0.9),
], ids=["adamw", "lion", "lamb", "adadelta", "masked", "freeze", "inject", "schedulable"])
def test_mask_may_be_a_model_shaped_tree_of_bools(make):
    """A model is callable, but a model of bools is a mask, not a mask function: it
    must select the same leaves as the function returning it."""
    model = small_model()
    assert callable(model)
    grads = fgrad.tree.map(lambda p: fnp.full_like(p, 0.5), model)
    as_tree, _ = steps(make(matrices(model)), model, [grads] * 2)
    as_function, _ = steps(make(matrices), model, [grads] * 2)
    for got, want in zip(fgrad.tree.leaves(as_tree), fgrad.tree.leaves(as_function),
                         strict=True):
        assert np.asarray(got).tobytes() == np.asarray(want).tobytes()


def test_callable_tree_argument_is_a_value_not_a_schedule():
    """inject_hyperparams takes functions for schedules; a model of bools given for an
    argument it does not know to be static is still a tree, passed on as it is."""
    model = small_model()
    grads = fgrad.tree.map(lambda p: fnp.full_like(p, 0.5), model)
    injected = optim.inject_hyperparams(optim.add_decayed_weights, static_args=())
    got, _ = steps(optim.chain(injected(0.3, matrices(model)), optim.sgd(0.1)), model, [grads])
    want, _ = steps(optim.chain(optim.add_decayed_weights(0.3, matrices(model)),
                                optim.sgd(0.1)), model, [grads])
    for g, w in zip(fgrad.tree.leaves(got), fgrad.tree.leaves(want), strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)


def test_mask_model_of_bools_selects_its_true_leaves():
    model = small_model()
    grads = fgrad.tree.map(fnp.ones_like, model)
    u, _ = optim.freeze(matrices(model)).update(grads, optim.freeze(matrices(model))
                                                .init(model), model)
    for p, g in zip(fgrad.tree.leaves(model), fgrad.tree.leaves(u), strict=True):
        assert float(fnp.sum(fnp.abs(g))) == (0 if p.ndim > 1 else p.size)


# ----------------------------------------------------------------------------
# Gradient accumulation

@pytest.mark.parametrize("jit", [False, True])
def test_accumulation_equals_one_step_on_the_mean_gradient(jit):
    params, grads = three_leaf_problem()
    grads = grads + [fgrad.tree.map(lambda g: 2.0 * g - 0.3, g) for g in grads]
    acc = optim.accumulate_gradients(optim.adam(0.1), every_k=3)
    update = fgrad.jit(acc.update) if jit else acc.update
    state = acc.init(params)
    ref_opt = optim.adam(0.1)
    ref_state = ref_opt.init(params)
    p, ref_p = params, params
    for i, g in enumerate(grads, start=1):
        u, state = update(g, state, p)
        p_new = optim.apply_updates(p, u)
        if i % 3:
            for k in p:
                assert np.asarray(p_new[k]).tobytes() == np.asarray(p[k]).tobytes()
        else:
            window = grads[i - 3:i]
            mean = fgrad.tree.map(lambda a, b, c: (a + b + c) / 3, *window)
            ref_u, ref_state = ref_opt.update(mean, ref_state, ref_p)
            ref_p = optim.apply_updates(ref_p, ref_u)
            for k in p:
                np.testing.assert_allclose(np.asarray(p_new[k]), np.asarray(ref_p[k]), rtol=1e-12)
        p = p_new
    assert int(state.mini_step) == 0


# ----------------------------------------------------------------------------
# Schedules as hyper-parameters; the learning rate in the state

def test_schedule_as_learning_rate():
    params, grads = three_leaf_problem()
    sched = schedules.exponential_decay(0.5, 1, 0.5)
    opt = optim.sgd(sched)
    state = opt.init(params)
    assert float(optim.current_learning_rate(state)) == 0.5
    for count, g in enumerate(grads):
        u, state = opt.update(g, state, params)
        lr = 0.5 * 0.5 ** count
        assert float(optim.current_learning_rate(state)) == pytest.approx(lr)
        for k in params:
            np.testing.assert_allclose(np.asarray(u[k]), -lr * np.asarray(g[k]), rtol=1e-7)


def test_current_learning_rate_under_jit_and_for_constant_rates():
    params, grads = three_leaf_problem()
    opt = optim.adam(schedules.linear_schedule(1.0, 0.0, 4))
    state = opt.init(params)
    update = fgrad.jit(opt.update)
    seen = []
    for g in grads:
        _, state = update(g, state, params)
        seen.append(float(optim.current_learning_rate(state)))
    np.testing.assert_allclose(seen, [1.0, 0.75, 0.5])
    assert float(optim.current_learning_rate(optim.sgd(0.3).init(params))) == pytest.approx(0.3)
    with pytest.raises(ValueError, match="no learning rate"):
        optim.current_learning_rate(optim.rprop(0.1).init(params))


def test_inject_hyperparams_reads_and_overrides_values():
    params, grads = three_leaf_problem()
    opt = optim.inject_hyperparams(optim.adam)(learning_rate=0.1, b1=0.8)
    state = opt.init(params)
    assert float(state.hyperparams["learning_rate"]) == pytest.approx(0.1)
    assert float(state.hyperparams["b1"]) == pytest.approx(0.8)
    assert state.hyperparams["b1"].dtype == np.float64                 # the params' dtype
    lr = fnp.asarray(0.01, fnp.float64)
    changed = state._replace(hyperparams={**state.hyperparams, "learning_rate": lr})
    u, _ = fgrad.jit(opt.update)(grads[0], changed, params)
    ref_u, _ = optim.adam(0.01, b1=0.8).update(grads[0], optim.adam(0.01, b1=0.8).init(params))
    for k in params:
        np.testing.assert_allclose(np.asarray(u[k]), np.asarray(ref_u[k]), rtol=1e-12)


def test_any_hyperparameter_may_be_a_schedule():
    params, grads = problem(DTYPES["f64"])
    momentum = lambda count: 0.5 + 0.2 * count  # noqa: E731
    got, state = run(optim.sgd(0.1, momentum=momentum), params, grads)
    assert float(state.hyperparams["momentum"]) == pytest.approx(0.9)  # the value used last

    def rule(p, gs):
        out, buf = [], np.zeros_like(p)
        for count, g in enumerate(gs):
            buf = g + (0.5 + 0.2 * count) * buf
            p = p - 0.1 * buf
            out.append(p)
        return out

    want = run_reference(rule, params, grads)
    for g, w in zip(got, want):
        for k in params:
            np.testing.assert_allclose(g[k], w[k], rtol=1e-6)


def test_scale_by_schedule():
    t = optim.scale_by_schedule(lambda count: 2.0 ** count)
    x = {"a": fnp.ones(3)}
    state = t.init(x)
    for count in range(3):
        u, state = t.update(x, state)
        np.testing.assert_array_equal(np.asarray(u["a"]), np.full(3, 2.0 ** count, np.float32))


# ----------------------------------------------------------------------------
# Errors

def test_mismatched_grads_tree_names_the_missing_leaf():
    params, grads = three_leaf_problem()
    opt = optim.adam(0.1)
    state = opt.init(params)
    with pytest.raises(ValueError, match=r"\['c'\]"):
        opt.update({"w": grads[0]["w"], "b": grads[0]["b"]}, state, params)


def test_mismatched_shape_names_path_and_shapes():
    params, grads = three_leaf_problem()
    bad = {**grads[0], "w": fnp.ones((3, 2), fnp.float64)}
    for opt in [optim.adamw(0.1), optim.sgd(0.1, weight_decay=0.1), optim.lamb(0.1)]:
        with pytest.raises(ValueError, match=r"\['w'\].*\(3, 2\).*\(2, 3\)"):
            opt.update(bad, opt.init(params), params)
    with pytest.raises(ValueError, match=r"apply_updates.*\['w'\]"):
        optim.apply_updates(params, bad)


@fgrad.tree.register_dataclass
@dataclasses.dataclass
class Dense:
    weight: object
    bias: object
    width: int = dataclasses.field(default=0, metadata={"static": True})


def test_nested_paths_in_messages():
    params = {"layers": [{"w": fnp.ones((2, 2))}, {"w": fnp.ones(3)}]}
    grads = {"layers": [{"w": fnp.ones((2, 2))}, {"w": fnp.ones(4)}]}
    with pytest.raises(ValueError, match=r"\['layers'\]\[1\]\['w'\]"):
        optim.apply_updates(params, grads)
    model = (Dense(fnp.ones((2, 3)), fnp.ones(3), 3), Dense(fnp.ones((3, 1)), None, 1))
    bad = (Dense(fnp.ones((2, 3)), fnp.ones(3), 3), Dense(fnp.ones((1, 3)), None, 1))
    with pytest.raises(ValueError, match=r"\[1\]\.weight.*\(1, 3\).*\(3, 1\)"):
        opt = optim.sgd(0.1, weight_decay=0.1)
        opt.update(bad, opt.init(model), model)


@pytest.mark.parametrize("make,error,match", [
    (lambda: optim.chain(optim.adam), TypeError, "adam"),
    (lambda: optim.sgd(0.1, nesterov=True), ValueError, "momentum"),
    (lambda: optim.accumulate_gradients(optim.sgd(0.1), 0), ValueError, "every_k"),
    (lambda: optim.accumulate_gradients(optim.sgd(0.1), 2.5), TypeError, "every_k"),
    # a string is truthy: 'False' must not switch a flag on
    (lambda: optim.sgd(0.1, nesterov="False"), ValueError, "sgd: nesterov must be True or"),
    (lambda: optim.sgd(0.1, 0.9, nesterov="False"), ValueError, "nesterov must be True or"),
    (lambda: optim.adam(0.1, nesterov="no"), ValueError, "scale_by_adam: nesterov must be"),
    (lambda: optim.rmsprop(0.1, centered="False"), ValueError, "centered must be True or"),
    (lambda: optim.trace(0.9, nesterov=None), ValueError, "trace: nesterov must be True or"),
    (lambda: optim.scale_by_learning_rate(0.1, flip_sign="yes"), ValueError, "flip_sign"),
])
def test_bad_construction(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_params_required_where_read():
    params, grads = three_leaf_problem()
    for opt in [optim.adamw(0.1), optim.lamb(0.1), optim.chain(optim.add_l1_decay(0.1))]:
        with pytest.raises(ValueError, match="needs the parameters"):
            opt.update(grads[0], opt.init(params))


def test_accumulation_advances_schedules_once_per_real_step():
    params, grads = three_leaf_problem()
    sched = schedules.linear_schedule(1.0, 0.0, 4)
    acc = optim.accumulate_gradients(optim.sgd(sched, momentum=lambda c: 0.5), every_k=2)
    state = acc.init(params)
    update = fgrad.jit(acc.update)
    seen = []
    for g in grads + grads:
        u, state = update(g, state, params)
        seen.append(float(optim.current_learning_rate(state)))
    np.testing.assert_allclose(seen, [1.0, 1.0, 1.0, 0.75, 0.75, 0.5])


@pytest.mark.parametrize("name", ["sgd_nesterov_wd", "adam", "rmsprop_centered_momentum",
                                  "lamb", "adadelta"])
def test_updates_are_differentiable_in_params(name):
    """An update is an fgrad function of the params and gradients (e.g. for meta-
    learning): check its derivatives, through two steps, against central differences."""
    from fgrad.test_util import check_grads
    make, _ = CASES[name]
    opt = make()
    params, _ = problem(DTYPES["f64"])
    params = fgrad.tree.map(fnp.asarray, params)

    def two_steps(w, b):
        p = {"w": w, "b": b}
        state = opt.init(p)
        for _ in range(2):
            g = fgrad.grad(lambda q: fnp.sum(fnp.sin(q["w"])) + fnp.sum(q["b"] ** 3 + q["b"]))(p)
            u, state = opt.update(g, state, p)
            p = optim.apply_updates(p, u)
        return p["w"], p["b"]

    check_grads(two_steps, (params["w"], params["b"]), order=2, modes=("fwd", "rev"))


def test_mask_lines_up_past_none_fields_of_a_model():
    # MultiheadAttention keeps None in q/k/v_proj_weight: the masked update must
    # still put each leaf's update in its own place (it once shifted them).
    import fgrad_nn as fnn
    model = fnn.MultiheadAttention(8, 2, key=fgrad.random.key(0))
    opt = optim.masked(optim.sgd(1.0), lambda t: fgrad.tree.map(lambda p: p.ndim >= 2, t))
    grads = fgrad.tree.map(lambda p: fnp.full_like(p, 2.0), model)
    updates, _ = opt.update(grads, opt.init(model), model)
    assert fgrad.tree.structure(updates) == fgrad.tree.structure(model)
    np.testing.assert_array_equal(np.asarray(updates.out_proj.weight), -2.0)
    np.testing.assert_array_equal(np.asarray(updates.in_proj_weight), -2.0)
    np.testing.assert_array_equal(np.asarray(updates.out_proj.bias), 2.0)
    np.testing.assert_array_equal(np.asarray(updates.in_proj_bias), 2.0)
