"""fgrad_nn.optim: Optax-style optimizers.

A GradientTransformation is an (init, update) pair of pure functions:
`state = opt.init(params)`; `updates, state = opt.update(grads, state, params)`;
`params = apply_updates(params, updates)`. States are NamedTuples of arrays, so
the whole step jits. Optimizers are chains of small transforms; any
hyper-parameter may be a schedule (a function of the int32 step count).
"""
from .accumulate import AccumulateGradientsState, accumulate_gradients  # noqa: F401
from .adaptive import (ScaleByAdadeltaState, ScaleByAdamaxState, ScaleByAdamState,  # noqa: F401
                       ScaleByCenteredRmsState, ScaleByLionState, ScaleByRmsState,
                       ScaleByRpropState, ScaleByRssState, scale_by_adadelta, scale_by_adam,
                       scale_by_adamax, scale_by_lion, scale_by_param_block_norm,
                       scale_by_rms, scale_by_rprop, scale_by_rss, scale_by_trust_ratio)
from .aliases import (adadelta, adagrad, adam, adamax, adamw, lamb, lion, nadam,  # noqa: F401
                      rmsprop, rprop, sgd)
from .base import (EmptyState, GradientTransformation, apply_updates, chain,  # noqa: F401
                   identity)
from .hyperparams import InjectHyperparamsState, inject_hyperparams, schedulable  # noqa: F401
from .masking import MaskedState, freeze, masked, set_to_zero  # noqa: F401
from .transforms import (ScaleByLearningRateState, ScaleByScheduleState,  # noqa: F401
                         TraceState, add_decayed_weights, add_l1_decay, clip,
                         clip_by_global_norm, current_learning_rate, global_norm, scale,
                         scale_by_learning_rate, scale_by_schedule, trace)
