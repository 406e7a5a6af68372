"""fgrad_nn.optim's building blocks named by no alias test: each one's updates over
three steps on a small float64 tree against a NumPy reference written here from
Optax's formula (eps placement, eps_root, bias corrections, starting values);
its state keeps one structure; jit gives eager's bits; gradients through the
smooth ones match central differences. Hyper-parameters are chosen so that each
term of a formula moves the result (eps large enough to see where it sits)."""
import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad.test_util import check_grads
from fgrad_nn import losses, optim

PARAMS = {"w": np.array([[0.5, -1.5, 2.0, 0.1], [1.0, 0.3, -0.7, 2.5], [-0.2, 0.9, 1.2, -1.1]]),
          "b": np.array([0.05, -0.02, 0.03, 0.01])}
_rng = np.random.RandomState(3)
# three steps of gradients; magnitudes shrink (so running maxima bind), signs flip,
# and b's are smaller than w's (so block clipping scales w only)
GRADS = [{k: s * size * _rng.uniform(0.2, 1.5, p.shape) * _rng.choice([-1.0, 1.0], p.shape)
          for (k, p), size in zip(PARAMS.items(), (1.0, 0.25))} for s in (2.0, 1.0, 0.6)]
STEPS = len(GRADS)


def per_leaf(fn):
    """A reference from fn(gradients of one leaf over the steps, that leaf's param)."""
    return lambda gs, params: {k: fn([g[k] for g in gs], params[k]) for k in params}


def bias(rate, t):
    return 1 - rate ** t


@per_leaf
def ref_adadelta(gs, p, rho=0.8, eps=1e-2):
    e_g, e_x, out = 0.0, 0.0, []
    for g in gs:
        e_g = rho * e_g + (1 - rho) * g ** 2
        u = np.sqrt(e_x + eps) / np.sqrt(e_g + eps) * g
        e_x = rho * e_x + (1 - rho) * u ** 2
        out.append(u)
    return out


@per_leaf
def ref_adamax(gs, p, b1=0.8, b2=0.9, eps=0.1):
    m, u, out = 0.0, 0.0, []
    for t, g in enumerate(gs, 1):
        m = b1 * m + (1 - b1) * g
        u = np.maximum(np.abs(g) + eps, b2 * u)     # eps inside the maximum, none below
        out.append(m / bias(b1, t) / u)
    return out


@per_leaf
def ref_amsgrad(gs, p, b1=0.8, b2=0.9, eps=1e-3, eps_root=1e-4):
    m, v, v_max, out = 0.0, 0.0, 0.0, []
    for t, g in enumerate(gs, 1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g ** 2
        v_max = np.maximum(v_max, v / bias(b2, t))    # maximum of the corrected moment
        out.append(m / bias(b1, t) / (np.sqrt(v_max + eps_root) + eps))
    return out


@per_leaf
def ref_belief(gs, p, b1=0.8, b2=0.9, eps=1e-3, eps_root=1e-4):
    m, s, out = 0.0, 0.0, []
    for t, g in enumerate(gs, 1):
        m = b1 * m + (1 - b1) * g
        s = b2 * s + (1 - b2) * (g - m) ** 2 + eps_root   # deviation from the new m
        out.append(m / bias(b1, t) / (np.sqrt(s / bias(b2, t)) + eps))
    return out


@per_leaf
def ref_lion(gs, p, b1=0.8, b2=0.9):
    m, out = 0.0, []
    for g in gs:
        out.append(np.sign(b1 * m + (1 - b1) * g))
        m = b2 * m + (1 - b2) * g
    return out


def ref_rms(decay, eps, initial, eps_in_sqrt, bias_correction):
    @per_leaf
    def ref(gs, p):
        v, out = initial, []
        for t, g in enumerate(gs, 1):
            v = decay * v + (1 - decay) * g ** 2
            v_hat = v / bias(decay, t) if bias_correction else v
            out.append(g / (np.sqrt(v_hat + eps) if eps_in_sqrt else np.sqrt(v_hat) + eps))
        return out
    return ref


@per_leaf
def ref_rprop(gs, p, lr=0.1, eta_minus=0.5, eta_plus=1.2, lo=0.06, hi=0.13):
    """Riedmiller's Rprop as PyTorch runs it (Optax 0.2.8 emits each update one
    step late: google-deepmind/optax#1725)."""
    step, prev, out = np.full_like(p, lr), np.zeros_like(p), []
    for g in gs:
        same = g * prev
        step = np.where(same > 0, np.minimum(step * eta_plus, hi),
                        np.where(same < 0, np.maximum(step * eta_minus, lo), step))
        g = np.where(same < 0, 0.0, g)              # after a flip: no move, forget g
        out.append(np.sign(g) * step)
        prev = g
    return out


def ref_rss(initial, eps):
    @per_leaf
    def ref(gs, p):
        s, out = initial, []
        for g in gs:
            s = s + g ** 2
            with np.errstate(divide="ignore", invalid="ignore"):
                out.append(np.where(s > 0, g / np.sqrt(s + eps), 0.0))   # eps inside the root
        return out
    return ref


@per_leaf
def ref_yogi(gs, p, b1=0.8, b2=0.9, eps=1e-2, eps_root=1e-4, initial=0.3):
    m, v, out = initial, initial, []
    for t, g in enumerate(gs, 1):
        m = b1 * m + (1 - b1) * g
        v = v - (1 - b2) * np.sign(v - g ** 2) * g ** 2
        out.append(m / bias(b1, t) / (np.sqrt(v / bias(b2, t) + eps_root) + eps))
    return out


def ref_factored(decay_rate, min_dim, epsilon=1e-30):
    """Adafactor: decay 1 - t^-decay_rate at step t (1-based); a leaf whose two
    largest axes are >= min_dim keeps row and column means of g² + epsilon."""
    @per_leaf
    def ref(gs, p):
        factor = p.ndim == 2 and min(p.shape) >= min_dim
        v = v_row = v_col = 0.0
        out = []
        for t, g in enumerate(gs, 1):
            beta = 1 - t ** -decay_rate
            sq = g ** 2 + epsilon
            if factor:      # rows are axis 0 (3 < 4), columns axis 1
                v_row = beta * v_row + (1 - beta) * sq.mean(axis=1)
                v_col = beta * v_col + (1 - beta) * sq.mean(axis=0)
                out.append(g / np.sqrt(np.outer(v_row / v_row.mean(), v_col)))
            else:
                v = beta * v + (1 - beta) * sq
                out.append(g / np.sqrt(v))
        return out
    return ref


def ref_stateless(fn):
    return per_leaf(lambda gs, p: [fn(g, p) for g in gs])


def rms(x):
    return np.sqrt(np.mean(x ** 2))


# name: (transform, reference, its gradient: "smooth" (checked by finite
# differences), "flat" (zero almost everywhere) or "finite" (no NaN or inf))
CASES = {
    "adadelta": (lambda: optim.scale_by_adadelta(rho=0.8, eps=1e-2), ref_adadelta, "smooth"),
    "adamax": (lambda: optim.scale_by_adamax(b1=0.8, b2=0.9, eps=0.1), ref_adamax, "smooth"),
    "amsgrad": (lambda: optim.scale_by_amsgrad(b1=0.8, b2=0.9, eps=1e-3, eps_root=1e-4),
                ref_amsgrad, "smooth"),
    "belief": (lambda: optim.scale_by_belief(b1=0.8, b2=0.9, eps=1e-3, eps_root=1e-4),
               ref_belief, "smooth"),
    "lion": (lambda: optim.scale_by_lion(b1=0.8, b2=0.9), ref_lion, "flat"),
    "rms": (lambda: optim.scale_by_rms(0.8, 1e-2, 0.5),       # Optax's default: eps in the root
            ref_rms(0.8, 1e-2, 0.5, True, False), "smooth"),
    "rms_bias_corrected": (lambda: optim.scale_by_rms(0.8, 1e-2, eps_in_sqrt=False,
                                                      bias_correction=True),
                           ref_rms(0.8, 1e-2, 0.0, False, True), "smooth"),
    "rprop": (lambda: optim.scale_by_rprop(0.1, 0.5, 1.2, min_step_size=0.06,
                                           max_step_size=0.13), ref_rprop, "flat"),
    "rss": (lambda: optim.scale_by_rss(0.1, eps=1e-2), ref_rss(0.1, 1e-2), "smooth"),
    "rss_zero_start": (lambda: optim.scale_by_rss(0.0, eps=0.0), ref_rss(0.0, 0.0), "finite"),
    "yogi": (lambda: optim.scale_by_yogi(b1=0.8, b2=0.9, eps=1e-2, eps_root=1e-4,
                                         initial_accumulator_value=0.3), ref_yogi, "smooth"),
    "factored_rms": (lambda: optim.scale_by_factored_rms(decay_rate=0.7, min_dim_size_to_factor=2,
                                                         epsilon=1e-3),
                     ref_factored(0.7, 2, 1e-3), "smooth"),
    "factored_rms_whole": (lambda: optim.scale_by_factored_rms(decay_rate=0.7),
                           ref_factored(0.7, 128), "smooth"),
    "clip_by_block_rms": (lambda: optim.clip_by_block_rms(0.9),
                          ref_stateless(lambda g, p: g / max(1.0, rms(g) / 0.9)), "smooth"),
    "param_block_rms": (lambda: optim.scale_by_param_block_rms(min_scale=0.1),
                        ref_stateless(lambda g, p: g * max(rms(p), 0.1)), "smooth"),
    "set_to_zero": (optim.set_to_zero, ref_stateless(lambda g, p: np.zeros_like(g)), "flat"),
}
def kind(k):
    return [name for name, case in CASES.items() if case[2] == k]


def grads_at(step, zero_first=False):
    """The step's gradients; zero_first zeroes w[0, 0] throughout (a sum of squares at 0)."""
    g = {k: v.copy() for k, v in GRADS[step].items()}
    if zero_first:
        g["w"][0, 0] = 0.0
    return g


def run(opt, grads, jit=False):
    """The updates of every step and the states after init and each step."""
    params = fgrad.tree.map(fnp.asarray, PARAMS)
    update = fgrad.jit(opt.update) if jit else opt.update
    state = opt.init(params)
    updates, states = [], [state]
    for g in grads:
        u, state = update(fgrad.tree.map(fnp.asarray, g), state, params)
        updates.append(u)
        states.append(state)
    return updates, states


def case_grads(name):
    return [grads_at(t, zero_first=name == "rss_zero_start") for t in range(STEPS)]


@pytest.mark.parametrize("name", CASES)
def test_matches_reference(name):
    make, ref, _ = CASES[name]
    grads = case_grads(name)
    want = ref(grads, PARAMS)
    got, _ = run(make(), grads)
    for t, u in enumerate(got):
        for k in PARAMS:
            assert fnp.result_type(u[k]) == np.float64, f"{name}: {k}, step {t + 1}"
            np.testing.assert_allclose(np.asarray(u[k]), want[k][t], rtol=1e-12, atol=1e-15,
                                       err_msg=f"{name}: {k}, step {t + 1}")


def test_references_see_their_terms():
    """The chosen cases exercise what the references distinguish: rprop's step sizes
    reach both bounds and a flip, AMSGrad's maximum binds, block clipping scales w
    only, the zero-start sum of squares is 0 at w[0, 0], and Adafactor factors w."""
    out = ref_rprop(case_grads("rprop"), PARAMS)["w"]
    magnitudes = np.abs(np.stack(out))
    assert np.any(magnitudes == 0.13) and np.any(magnitudes == 0.06) and np.any(magnitudes == 0)
    v, v_hat = 0.0, []
    for t, g in enumerate(GRADS, 1):
        v = 0.9 * v + 0.1 * g["w"] ** 2
        v_hat.append(v / bias(0.9, t))
    assert np.any(v_hat[2] < np.maximum(v_hat[0], v_hat[1]))
    assert rms(GRADS[0]["w"]) > 0.9 > rms(GRADS[0]["b"])
    assert rms(PARAMS["w"]) > 0.1 > rms(PARAMS["b"])
    assert ref_rss(0.0, 0.0)(case_grads("rss_zero_start"), PARAMS)["w"][0][0, 0] == 0
    _, states = run(CASES["factored_rms"][0](), case_grads("factored_rms"))
    assert fnp.shape(states[-1].v_row["w"]) == (3,) and fnp.shape(states[-1].v["w"]) == (1,)


@pytest.mark.parametrize("name", CASES)
def test_state_structure_is_stable(name):
    _, states = run(CASES[name][0](), case_grads(name))
    first = fgrad.tree.structure(states[0])
    for t, s in enumerate(states[1:], 1):
        assert fgrad.tree.structure(s) == first, f"{name}: step {t}"
        for a, b in zip(fgrad.tree.leaves(states[0]), fgrad.tree.leaves(s)):
            assert fnp.shape(a) == fnp.shape(b) and fnp.result_type(a) == fnp.result_type(b)


@pytest.mark.parametrize("name", CASES)
def test_jit_equals_eager(name):
    grads = case_grads(name)
    eager = run(CASES[name][0](), grads)
    jitted = run(CASES[name][0](), grads, jit=True)
    for a, b in zip(fgrad.tree.leaves(eager), fgrad.tree.leaves(jitted), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=name)


def last_update(name):
    """The third step's updates (a flat concatenation) as a function of the three
    steps' gradients of w and b."""
    opt = CASES[name][0]()

    def f(*leaves):
        params = fgrad.tree.map(fnp.asarray, PARAMS)
        state = opt.init(params)
        for t in range(STEPS):
            u, state = opt.update({"b": leaves[2 * t], "w": leaves[2 * t + 1]}, state, params)
        return fnp.concatenate([fnp.ravel(u["b"]), fnp.ravel(u["w"])])

    args = [fnp.asarray(g[k]) for g in case_grads(name) for k in ("b", "w")]
    return f, args


@pytest.mark.parametrize("name", kind("smooth"))
def test_gradients_through_updates(name):
    f, args = last_update(name)
    check_grads(f, args, order=1)


def gradient_of_last_update(name):
    f, args = last_update(name)
    return fgrad.grad(lambda *a: fnp.sum(f(*a) * fnp.arange(16.0)), argnums=tuple(range(6)))(
        *args)


@pytest.mark.parametrize("name", kind("flat"))
def test_piecewise_constant_updates_have_zero_gradient(name):
    for g in gradient_of_last_update(name):
        np.testing.assert_array_equal(np.asarray(g), 0.0, err_msg=name)


def test_gradient_at_a_zero_sum_of_squares_is_finite():
    """scale_by_rss with nothing accumulated at w[0, 0] outputs 0 there; the root of
    that zero must not put a NaN into the gradient of the other elements' updates."""
    (name,) = kind("finite")
    grads = gradient_of_last_update(name)
    assert all(np.all(np.isfinite(np.asarray(g))) for g in grads)
    assert np.any(np.asarray(grads[-1]) != 0)


def test_l1_is_l1_loss():
    x, y = np.array([[0.5, -2.0], [1.0, 3.0]]), np.array([[1.0, 0.0], [-1.0, 3.5]])
    assert losses.l1 is losses.l1_loss
    np.testing.assert_allclose(np.asarray(losses.l1(fnp.asarray(x), fnp.asarray(y))),
                               np.mean(np.abs(x - y)), rtol=1e-15)
    np.testing.assert_allclose(np.asarray(losses.l1(x, y, reduction="sum")),
                               np.sum(np.abs(x - y)), rtol=1e-15)
