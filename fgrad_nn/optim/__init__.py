"""fgrad_nn.optim: Optax-style optimizers.

A GradientTransformation is an (init, update) pair of pure functions:
`state = opt.init(params)`; `updates, state = opt.update(grads, state, params)`;
`params = apply_updates(params, updates)`. States are NamedTuples of arrays, so
the whole step jits. Optimizers are chains of small transforms; any
hyper-parameter may be a schedule (a function of the int32 step count).
"""
from .accumulate import AccumulateGradientsState, accumulate_gradients  # noqa: F401
from .adaptive import (ScaleByAdadeltaState, ScaleByAdamaxState, ScaleByAdamState,  # noqa: F401
                       ScaleByCenteredRmsState, ScaleByCenteredRmsWithCountState,
                       ScaleByLionState, ScaleByRmsState, ScaleByRmsWithCountState,
                       ScaleByRpropState, ScaleByRssState, scale_by_adadelta, scale_by_adam,
                       scale_by_adamax, scale_by_lion, scale_by_param_block_norm,
                       scale_by_rms, scale_by_rprop, scale_by_rss, scale_by_trust_ratio)
from .aliases import (adabelief, adadelta, adafactor, adagrad, adam, adamax,  # noqa: F401
                      adamw, amsgrad, lamb, lion, nadam, radam, rmsprop, rprop, sgd, yogi)
from .averaging import EmaState, ParamsEma, ParamsEmaState, ema, params_ema  # noqa: F401
from .base import (EmptyState, GradientTransformation, apply_updates, chain,  # noqa: F401
                   identity)
from .hyperparams import InjectHyperparamsState, inject_hyperparams, schedulable  # noqa: F401
from .masking import MaskedState, freeze, masked, set_to_zero  # noqa: F401
from .moments import (FactoredState, ScaleByAmsgradState, ScaleByBeliefState,  # noqa: F401
                      ScaleByRadamState, ScaleByYogiState, clip_by_block_rms,
                      scale_by_amsgrad, scale_by_belief, scale_by_factored_rms, scale_by_radam,
                      scale_by_param_block_rms, scale_by_yogi)
from .transforms import (DampenedTraceState, ScaleByLearningRateState,  # noqa: F401
                         ScaleByScheduleState, TraceState, add_decayed_weights, add_l1_decay, clip,
                         clip_by_global_norm, current_learning_rate, global_norm, scale,
                         scale_by_learning_rate, scale_by_schedule, trace)
from .wrappers import (ApplyIfFiniteState, LookaheadParams, LookaheadState,  # noqa: F401
                       MultiTransformState, ScheduleFreeState, ZeroNansState,
                       adaptive_grad_clip, apply_if_finite, lookahead, multi_transform,
                       schedule_free, schedule_free_adamw, schedule_free_eval_params, zero_nans)
