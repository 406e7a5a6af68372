"""Schedules: functions of the step count (0 for the first update) returning a
float32 scalar. They use no Python control flow on the step, so an optimizer
calls them with its traced int32 counter under fgrad.jit; boundaries are found
with integer arithmetic, so they are exact. Names follow Optax (PyTorch's
equivalents are noted)."""
import math
import numbers

import fgrad.numpy as fnp

_INT32_MAX = 2**31 - 1


def _check_int(where, name, value, minimum):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{where}: {name} must be an int >= {minimum}, got {value!r}")


def _step(step):
    return fnp.asarray(step)


def _float(x):
    return fnp.astype(x, fnp.float32)


def constant_schedule(value):
    """value at every step."""
    return lambda step: fnp.full((), value, fnp.float32)


def step_decay_schedule(init_value, step_size, gamma=0.1):
    """init_value · gamma^(step // step_size): PyTorch's StepLR."""
    _check_int("step_decay_schedule", "step_size", step_size, 1)

    def schedule(step):
        k = _step(step) // step_size
        return _float(init_value * fnp.power(gamma, _float(k)))

    return schedule


def exponential_decay(init_value, transition_steps, decay_rate, transition_begin=0,
                      staircase=False, end_value=None):
    """init_value · decay_rate^((step - transition_begin) / transition_steps), held at
    init_value before transition_begin; staircase floors the exponent; end_value
    bounds the value (a floor when decaying, a ceiling when growing). PyTorch's
    ExponentialLR is transition_steps=1."""
    _check_int("exponential_decay", "transition_steps", transition_steps, 1)
    _check_int("exponential_decay", "transition_begin", transition_begin, 0)

    def schedule(step):
        elapsed = fnp.maximum(_step(step) - transition_begin, 0)
        exponent = (_float(elapsed // transition_steps) if staircase
                    else _float(elapsed) / transition_steps)
        value = init_value * fnp.power(decay_rate, exponent)
        if end_value is not None:
            value = (fnp.maximum(value, end_value) if decay_rate < 1
                     else fnp.minimum(value, end_value))
        return _float(value)

    return schedule


def piecewise_constant_schedule(init_value, boundaries_and_scales=None):
    """init_value, multiplied by `scale` from each step `boundary` on
    ({boundary: scale}); PyTorch's MultiStepLR is scales all equal to gamma."""
    items = sorted((boundaries_and_scales or {}).items())
    for boundary, _ in items:
        _check_int("piecewise_constant_schedule", "each boundary", boundary, 0)

    def schedule(step):
        s = _step(step)
        value = fnp.full((), init_value, fnp.float32)
        for boundary, factor in items:
            value = fnp.where(s >= boundary, value * factor, value)
        return _float(value)

    return schedule


def polynomial_schedule(init_value, end_value, power, transition_steps, transition_begin=0):
    """From init_value to end_value over transition_steps (after transition_begin),
    following (1 - fraction done)^power; end_value afterwards."""
    _check_int("polynomial_schedule", "transition_steps", transition_steps, 1)
    _check_int("polynomial_schedule", "transition_begin", transition_begin, 0)

    def schedule(step):
        done = fnp.clip(_step(step) - transition_begin, 0, transition_steps)
        remaining = 1 - _float(done) / transition_steps
        return _float((init_value - end_value) * remaining ** power + end_value)

    return schedule


def linear_schedule(init_value, end_value, transition_steps, transition_begin=0):
    """Linear from init_value to end_value over transition_steps, then constant."""
    return polynomial_schedule(init_value, end_value, 1, transition_steps, transition_begin)


def linear_warmup_schedule(peak_value, warmup_steps, init_value=0.0):
    """Linear warm-up from init_value to peak_value over warmup_steps, then peak_value."""
    return linear_schedule(init_value, peak_value, warmup_steps)


def _half_cosine(fraction, exponent):
    """(1 + cos(π·fraction)) / 2, raised to `exponent`: 1 at fraction 0, 0 at 1."""
    return (0.5 * (1 + fnp.cos(math.pi * fraction))) ** exponent


def cosine_decay_schedule(init_value, decay_steps, alpha=0.0, exponent=1.0):
    """init_value · ((1 - alpha) · c + alpha), c = (1 + cos(π·min(step, decay_steps) /
    decay_steps)) / 2 raised to `exponent`: PyTorch's CosineAnnealingLR with
    eta_min = alpha · init_value, held at the floor after decay_steps."""
    _check_int("cosine_decay_schedule", "decay_steps", decay_steps, 1)

    def schedule(step):
        fraction = _float(fnp.minimum(_step(step), decay_steps)) / decay_steps
        return _float(init_value * ((1 - alpha) * _half_cosine(fraction, exponent) + alpha))

    return schedule


def warmup_cosine_decay_schedule(init_value, peak_value, warmup_steps, decay_steps,
                                 end_value=0.0, exponent=1.0):
    """Linear warm-up from init_value to peak_value over warmup_steps, then cosine
    decay to end_value, reached at step decay_steps (which counts the warm-up)."""
    _check_int("warmup_cosine_decay_schedule", "warmup_steps", warmup_steps, 0)
    if not isinstance(decay_steps, numbers.Integral) or decay_steps <= warmup_steps:
        raise ValueError(f"warmup_cosine_decay_schedule: decay_steps ({decay_steps!r}) must "
                         f"be an int larger than warmup_steps ({warmup_steps}); it counts "
                         f"the warm-up steps too")
    cosine_steps = decay_steps - warmup_steps

    def schedule(step):
        s = _step(step)
        warm = init_value + (peak_value - init_value) * (
            _float(s) / warmup_steps if warmup_steps else 1.0)
        fraction = _float(fnp.clip(s - warmup_steps, 0, cosine_steps)) / cosine_steps
        decay = end_value + (peak_value - end_value) * _half_cosine(fraction, exponent)
        return _float(fnp.where(s < warmup_steps, warm, decay))

    return schedule


def cosine_warm_restarts_schedule(init_value, T_0, T_mult=1, eta_min=0.0):  # noqa: N803
    """Cosine annealing with warm restarts (SGDR, Loshchilov & Hutter), exactly as
    PyTorch's CosineAnnealingWarmRestarts stepped once per update: cycle i lasts
    T_0 · T_mult^i steps; within it the value is eta_min + (init_value - eta_min) ·
    (1 + cos(π · t / T_i)) / 2, t counting from 0 at the restart."""
    _check_int("cosine_warm_restarts_schedule", "T_0", T_0, 1)
    _check_int("cosine_warm_restarts_schedule", "T_mult", T_mult, 1)
    restarts = []  # (first step of cycle i, its length), i >= 1, as long as int32 steps reach
    if T_mult > 1:
        start, length = T_0, T_0 * T_mult
        while start <= _INT32_MAX:
            restarts.append((start, length))
            start, length = start + length, length * T_mult

    def schedule(step):
        s = _step(step)
        if T_mult == 1:
            t, period = s % T_0, float(T_0)
        else:
            start, period = fnp.zeros_like(s), fnp.full((), float(T_0), fnp.float32)
            for first, length in restarts:
                start = fnp.where(s >= first, first, start)
                period = fnp.where(s >= first, float(length), period)
            t = s - start
        return _float(eta_min + (init_value - eta_min) * _half_cosine(_float(t) / period, 1.0))

    return schedule


def join_schedules(schedules, boundaries):
    """schedules[0] until boundaries[0], then schedules[1] (called with
    step - boundaries[0]) until boundaries[1], and so on."""
    schedules, boundaries = list(schedules), list(boundaries)
    if len(boundaries) != len(schedules) - 1:
        raise ValueError(f"join_schedules: {len(schedules)} schedules need "
                         f"{len(schedules) - 1} boundaries, got {len(boundaries)}")
    for b in boundaries:
        _check_int("join_schedules", "each boundary", b, 0)

    def schedule(step):
        s = _step(step)
        value = _float(schedules[0](s))
        for boundary, later in zip(boundaries, schedules[1:]):
            value = fnp.where(s < boundary, value, _float(later(s - boundary)))
        return value

    return schedule
