"""fgrad_nn.schedules: values at known steps against closed forms written here,
restart boundaries of SGDR, eager vs jit with a traced int32 step, and errors."""
import math

import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad_nn import schedules as S

STEPS = list(range(0, 25)) + [99, 100, 101, 1000]


def values(schedule, steps=STEPS):
    return np.array([float(schedule(s)) for s in steps])


def expected(fn, steps=STEPS):
    return np.array([fn(s) for s in steps])


def close(schedule, fn, steps=STEPS):
    np.testing.assert_allclose(values(schedule, steps), expected(fn, steps), rtol=1e-6, atol=1e-7)


def test_constant():
    close(S.constant_schedule(0.25), lambda s: 0.25)


@pytest.mark.parametrize("step_size,gamma", [(1, 0.5), (3, 0.1), (10, 0.9)])
def test_step_decay_like_torch_steplr(step_size, gamma):
    close(S.step_decay_schedule(0.2, step_size, gamma), lambda s: 0.2 * gamma ** (s // step_size))


@pytest.mark.parametrize("staircase", [False, True])
@pytest.mark.parametrize("begin", [0, 5])
def test_exponential_decay(staircase, begin):
    def ref(s):
        k = max(s - begin, 0)
        e = k // 4 if staircase else k / 4
        return 0.5 * 0.3 ** e
    close(S.exponential_decay(0.5, 4, 0.3, transition_begin=begin, staircase=staircase), ref)


def test_exponential_decay_end_value_floor_and_ceiling():
    close(S.exponential_decay(1.0, 2, 0.5, end_value=0.1), lambda s: max(0.5 ** (s / 2), 0.1))
    close(S.exponential_decay(1.0, 2, 1.5, end_value=3.0), lambda s: min(1.5 ** (s / 2), 3.0))


def test_piecewise_constant():
    def ref(s):
        return (2.0 * (0.5 if s >= 3 else 1.0) * (0.1 if s >= 10 else 1.0)
                * (3.0 if s >= 100 else 1.0))
    close(S.piecewise_constant_schedule(2.0, {10: 0.1, 3: 0.5, 100: 3.0}), ref)


@pytest.mark.parametrize("begin", [0, 4])
def test_linear_and_polynomial(begin):
    def frac(s):
        return min(max(s - begin, 0), 8) / 8
    close(S.linear_schedule(1.0, 0.2, 8, transition_begin=begin),
          lambda s: 1.0 + (0.2 - 1.0) * frac(s))
    close(S.polynomial_schedule(1.0, 0.2, 2.0, 8, transition_begin=begin),
          lambda s: (1.0 - 0.2) * (1 - frac(s)) ** 2 + 0.2)


def test_linear_warmup():
    close(S.linear_warmup_schedule(0.6, 5), lambda s: 0.6 * min(s, 5) / 5)
    close(S.linear_warmup_schedule(0.6, 5, init_value=0.1), lambda s: 0.1 + 0.5 * min(s, 5) / 5)


@pytest.mark.parametrize("alpha,exponent", [(0.0, 1.0), (0.1, 1.0), (0.0, 2.0)])
def test_cosine_decay(alpha, exponent):
    def ref(s):
        c = (0.5 * (1 + math.cos(math.pi * min(s, 20) / 20))) ** exponent
        return 0.3 * ((1 - alpha) * c + alpha)
    close(S.cosine_decay_schedule(0.3, 20, alpha=alpha, exponent=exponent), ref)


def test_warmup_cosine_decay():
    def ref(s):
        if s < 4:
            return 0.1 + (1.0 - 0.1) * s / 4
        t = min(s - 4, 16) / 16
        return 0.05 + (1.0 - 0.05) * 0.5 * (1 + math.cos(math.pi * t))
    sched = S.warmup_cosine_decay_schedule(0.1, 1.0, 4, 20, end_value=0.05)
    close(sched, ref)
    assert float(sched(4)) == pytest.approx(1.0) and float(sched(20)) == pytest.approx(0.05)


def sgdr_reference(step, init, t0, t_mult, eta_min):
    """Walk the cycles: cycle i starts where cycle i-1 ended and lasts t0 * t_mult^i."""
    start, length = 0, t0
    while step >= start + length:
        start, length = start + length, length * t_mult
    return eta_min + (init - eta_min) * (1 + math.cos(math.pi * (step - start) / length)) / 2


def torch_formula(epoch, init, t0, t_mult, eta_min):
    """PyTorch CosineAnnealingWarmRestarts.step(epoch)'s closed form (T_mult > 1)."""
    n = int(math.log(epoch / t0 * (t_mult - 1) + 1, t_mult))
    t_cur = epoch - t0 * (t_mult ** n - 1) / (t_mult - 1)
    t_i = t0 * t_mult ** n
    return eta_min + (init - eta_min) * (1 + math.cos(math.pi * t_cur / t_i)) / 2


@pytest.mark.parametrize("t0,t_mult", [(10, 1), (10, 2), (3, 3), (1, 2), (5, 1)])
def test_cosine_warm_restarts_matches_cycle_walk(t0, t_mult):
    sched = S.cosine_warm_restarts_schedule(0.5, t0, t_mult, eta_min=0.01)
    steps = list(range(0, 200))
    close(sched, lambda s: sgdr_reference(s, 0.5, t0, t_mult, 0.01), steps)


def test_cosine_warm_restarts_boundaries_exact():
    sched = S.cosine_warm_restarts_schedule(1.0, 10, 2, eta_min=0.0)
    for restart in [10, 30, 70, 150, 310, 10 * (2 ** 20 - 1)]:
        assert float(sched(restart)) == 1.0, restart          # a restart begins at full value
        before = float(sched(restart - 1))
        assert 0.0 <= before < 0.03, (restart, before)        # the step before is near the floor
    steps = list(range(1, 160))
    close(sched, lambda s: torch_formula(s, 1.0, 10, 2, 0.0), steps)


def test_join_schedules():
    sched = S.join_schedules([S.linear_schedule(0.0, 1.0, 5), S.constant_schedule(1.0),
                              S.cosine_decay_schedule(1.0, 10)], [5, 8])

    def ref(s):
        if s < 5:
            return s / 5
        if s < 8:
            return 1.0
        return 0.5 * (1 + math.cos(math.pi * min(s - 8, 10) / 10))
    close(sched, ref)


ALL = {
    "constant": S.constant_schedule(0.1),
    "step": S.step_decay_schedule(1.0, 3, 0.5),
    "exponential": S.exponential_decay(1.0, 4, 0.5, transition_begin=2, end_value=0.2),
    "piecewise": S.piecewise_constant_schedule(1.0, {3: 0.5, 6: 0.1}),
    "linear": S.linear_schedule(0.0, 1.0, 7),
    "cosine": S.cosine_decay_schedule(1.0, 8, alpha=0.1),
    "warmup_cosine": S.warmup_cosine_decay_schedule(0.0, 1.0, 3, 12, 0.1),
    "sgdr": S.cosine_warm_restarts_schedule(1.0, 2, 2, 0.1),
    "sgdr_1": S.cosine_warm_restarts_schedule(1.0, 3),
    "join": S.join_schedules([S.constant_schedule(1.0), S.linear_schedule(1.0, 0.0, 4)], [3]),
}


@pytest.mark.parametrize("name", sorted(ALL))
def test_jit_with_traced_int32_step_equals_eager(name):
    sched = ALL[name]
    jitted = fgrad.jit(sched)
    steps = list(range(0, 30))
    got = np.array([float(jitted(fnp.asarray(s, dtype=fnp.int32))) for s in steps])
    np.testing.assert_allclose(got, values(sched, steps), rtol=1e-6, atol=1e-7)
    out = jitted(fnp.asarray(3, dtype=fnp.int32))
    assert out.shape == () and out.dtype == np.float32


@pytest.mark.parametrize("make,match", [
    (lambda: S.step_decay_schedule(1.0, 0), "step_size"),
    (lambda: S.exponential_decay(1.0, 0, 0.5), "transition_steps"),
    (lambda: S.cosine_decay_schedule(1.0, 2.5), "decay_steps"),
    (lambda: S.warmup_cosine_decay_schedule(0.0, 1.0, 10, 10), "decay_steps"),
    (lambda: S.cosine_warm_restarts_schedule(1.0, 0), "T_0"),
    (lambda: S.cosine_warm_restarts_schedule(1.0, 10, 1.5), "T_mult"),
    (lambda: S.join_schedules([S.constant_schedule(1.0)] * 3, [4]), "boundaries"),
])
def test_bad_arguments_raise_clear_errors(make, match):
    with pytest.raises(ValueError, match=match):
        make()
