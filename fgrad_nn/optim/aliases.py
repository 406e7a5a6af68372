"""Ready-made optimizers, each a `chain` of small transformations, with Optax's
names and signatures (PyTorch's behaviour where noted). Every learning_rate may
be a schedule; so may every other numeric hyper-parameter (see `schedulable`)."""
from fgrad_nn._checks import flag

from . import adaptive, moments
from .averaging import ema
from .base import chain
from .hyperparams import schedulable
from .transforms import add_decayed_weights, scale, scale_by_learning_rate, trace


def _is_zero(value):
    """True for a Python number equal to 0 (arrays, e.g. injected values, count as set)."""
    return isinstance(value, (int, float)) and value == 0


def _check_nesterov(name, momentum, nesterov):
    if flag(name, "nesterov", nesterov) and momentum is None:
        raise ValueError(f"{name}: nesterov=True needs a momentum (e.g. momentum=0.9)")


@schedulable(static_args=("mask", "dampening", "accumulator_dtype"))
def sgd(learning_rate, momentum=None, nesterov=False, weight_decay=0.0, *, dampening=0.0,
        accumulator_dtype=None):
    """Stochastic gradient descent, as PyTorch's SGD: the L2 term weight_decay * p
    joins the gradient before momentum t = g + momentum * t; nesterov uses
    g + momentum * t; then p ← p - learning_rate * (result). dampening d (PyTorch's)
    makes later momentum steps t = momentum * t + (1 - d) * g (the first is t = g).
    accumulator_dtype (Optax's): the momentum buffer's storage dtype."""
    _check_nesterov("sgd", momentum, nesterov)
    if momentum is None and not _is_zero(dampening):
        raise ValueError("sgd: dampening applies to momentum; pass a momentum too")
    parts = []
    if not _is_zero(weight_decay):
        parts.append(add_decayed_weights(weight_decay))
    if momentum is not None:
        parts.append(trace(momentum, nesterov, dampening, accumulator_dtype=accumulator_dtype))
    return chain(*parts, scale_by_learning_rate(learning_rate))


@schedulable(static_args=("mask", "mu_dtype"))
def adam(learning_rate, b1=0.9, b2=0.999, eps=1e-8, eps_root=0.0, mu_dtype=None, *,
         nesterov=False):
    """Adam (Kingma & Ba 2015): p ← p - lr · m̂ / (sqrt(v̂ + eps_root) + eps);
    mu_dtype: the first moment's storage dtype (see scale_by_adam)."""
    return chain(adaptive.scale_by_adam(b1, b2, eps, eps_root, mu_dtype, nesterov=nesterov),
                 scale_by_learning_rate(learning_rate))


@schedulable(static_args=("mask", "mu_dtype"))
def adamw(learning_rate, b1=0.9, b2=0.999, eps=1e-8, eps_root=0.0, mu_dtype=None,
          weight_decay=1e-4, mask=None, *, nesterov=False):
    """Adam with decoupled weight decay (Loshchilov & Hutter):
    p ← p - lr · (adam direction + weight_decay · p); `mask` selects decayed leaves."""
    return chain(adaptive.scale_by_adam(b1, b2, eps, eps_root, mu_dtype, nesterov=nesterov),
                 add_decayed_weights(weight_decay, mask),
                 scale_by_learning_rate(learning_rate))


@schedulable(static_args=("mask", "mu_dtype"))
def nadam(learning_rate, b1=0.9, b2=0.999, eps=1e-8, eps_root=0.0, mu_dtype=None):
    """NAdam (Dozat 2016) in Optax's form: Adam with a Nesterov first moment.
    PyTorch's NAdam additionally decays the momentum (momentum_decay); this does not."""
    return adam(learning_rate, b1, b2, eps, eps_root, mu_dtype, nesterov=True)


@schedulable()
def adamax(learning_rate, b1=0.9, b2=0.999, eps=1e-8):
    """AdaMax: p ← p - lr · m / (1 - b1^t) / u, u = max(b2 u, |g| + eps)."""
    return chain(adaptive.scale_by_adamax(b1, b2, eps), scale_by_learning_rate(learning_rate))


@schedulable()
def rmsprop(learning_rate, decay=0.9, eps=1e-8, initial_scale=0.0, centered=False,
            momentum=None, nesterov=False, *, alpha=None, eps_in_sqrt=False,
            bias_correction=False):
    """RMSprop as PyTorch computes it: d = g / (sqrt(v) + eps) (v centered on request);
    with momentum b = momentum · b + d; p ← p - lr · b. `alpha` is PyTorch's name for
    `decay` (PyTorch's default is 0.99) and replaces it when given. eps_in_sqrt and
    bias_correction as in scale_by_rms (eps_in_sqrt=True is Optax's default)."""
    _check_nesterov("rmsprop", momentum, nesterov)
    decay = decay if alpha is None else alpha
    parts = [adaptive.scale_by_rms(decay, eps, initial_scale, centered,
                                   eps_in_sqrt=eps_in_sqrt, bias_correction=bias_correction)]
    if momentum is not None:
        parts.append(trace(momentum, nesterov))
    return chain(*parts, scale_by_learning_rate(learning_rate))


@schedulable()
def adagrad(learning_rate, initial_accumulator_value=0.1, eps=1e-7):
    """AdaGrad (Duchi et al.) as Optax: p ← p - lr · g / sqrt(Σ g² + eps), Σ g² starting
    at initial_accumulator_value."""
    return chain(adaptive.scale_by_rss(initial_accumulator_value, eps),
                 scale_by_learning_rate(learning_rate))


@schedulable()
def adadelta(learning_rate=1.0, rho=0.9, eps=1e-6, weight_decay=0.0, mask=None):
    """AdaDelta (Zeiler 2012), as PyTorch: L2 weight decay joins the gradient, then
    p ← p - lr · Δ."""
    parts = [] if _is_zero(weight_decay) else [add_decayed_weights(weight_decay, mask)]
    return chain(*parts, adaptive.scale_by_adadelta(rho, eps),
                 scale_by_learning_rate(learning_rate))


@schedulable(native=())
def rprop(learning_rate, eta_minus=0.5, eta_plus=1.2, min_step_size=1e-6, max_step_size=50.0):
    """Rprop as PyTorch's: learning_rate is each element's initial step size (a
    schedule is read once, at init); see scale_by_rprop."""
    return chain(adaptive.scale_by_rprop(learning_rate, eta_minus, eta_plus, min_step_size,
                                         max_step_size),
                 scale(-1.0))


@schedulable(static_args=("mask", "mu_dtype"))
def lion(learning_rate, b1=0.9, b2=0.99, mu_dtype=None, weight_decay=1e-3, mask=None):
    """Lion (Chen et al. 2023): p ← p - lr · (sign(b1 m + (1 - b1) g) + weight_decay · p);
    mu_dtype: the momentum's storage dtype."""
    return chain(adaptive.scale_by_lion(b1, b2, mu_dtype),
                 add_decayed_weights(weight_decay, mask),
                 scale_by_learning_rate(learning_rate))


@schedulable()
def lamb(learning_rate, b1=0.9, b2=0.999, eps=1e-6, eps_root=0.0, weight_decay=0.0, mask=None):
    """LAMB (You et al. 2020): the Adam direction plus weight_decay · p, rescaled per
    leaf by the trust ratio ||p|| / ||update||, times -lr."""
    return chain(adaptive.scale_by_adam(b1, b2, eps, eps_root),
                 add_decayed_weights(weight_decay, mask),
                 adaptive.scale_by_trust_ratio(),
                 scale_by_learning_rate(learning_rate))


@schedulable()
def adabelief(learning_rate, b1=0.9, b2=0.999, eps=1e-16, eps_root=1e-16, *, nesterov=False):
    """AdaBelief (Zhuang et al. 2020): Adam with the variance of the gradient around
    its running mean in the denominator (see scale_by_belief)."""
    return chain(moments.scale_by_belief(b1, b2, eps, eps_root, nesterov=nesterov),
                 scale_by_learning_rate(learning_rate))


@schedulable()
def radam(learning_rate, b1=0.9, b2=0.999, eps=1e-8, eps_root=0.0, threshold=5.0, *,
          nesterov=False):
    """Rectified Adam (Liu et al. 2020): momentum SGD while the variance estimate is
    unreliable, then rectified Adam (see scale_by_radam)."""
    return chain(moments.scale_by_radam(b1, b2, eps, eps_root, threshold, nesterov=nesterov),
                 scale_by_learning_rate(learning_rate))


@schedulable(static_args=("mask", "mu_dtype"))
def amsgrad(learning_rate, b1=0.9, b2=0.999, eps=1e-8, eps_root=0.0, mu_dtype=None, *,
            bias_correction_mu=True, bias_correction_nu=True):
    """AMSGrad (Reddi et al. 2018), Optax's form (see scale_by_amsgrad)."""
    return chain(moments.scale_by_amsgrad(b1, b2, eps, eps_root, mu_dtype,
                                          bias_correction_mu=bias_correction_mu,
                                          bias_correction_nu=bias_correction_nu),
                 scale_by_learning_rate(learning_rate))


@schedulable()
def yogi(learning_rate, b1=0.9, b2=0.999, eps=1e-3):
    """Yogi (Zaheer et al. 2018): Adam with an additive second moment (see scale_by_yogi)."""
    return chain(moments.scale_by_yogi(b1, b2, eps), scale_by_learning_rate(learning_rate))


@schedulable(static_args=("weight_decay_mask", "dtype_momentum", "factored",
                          "min_dim_size_to_factor", "multiply_by_parameter_scale"))
def adafactor(learning_rate=None, min_dim_size_to_factor=128, decay_rate=0.8, decay_offset=0,
              multiply_by_parameter_scale=True, clipping_threshold=1.0, momentum=None,
              dtype_momentum="float32", weight_decay_rate=None, eps=1e-30, factored=True,
              weight_decay_mask=None):
    """Adafactor (Shazeer & Stern 2018), Optax's chain: the factored RMS scaling,
    each leaf's update clipped to RMS clipping_threshold, times learning_rate (None:
    1), times max(rms(p), 1e-3) when multiply_by_parameter_scale, optional momentum
    (an EMA without debiasing, stored in dtype_momentum), optional decoupled weight
    decay, then negated."""
    parts = [moments.scale_by_factored_rms(factored, decay_rate, decay_offset,
                                           min_dim_size_to_factor, eps)]
    if clipping_threshold is not None:
        parts.append(moments.clip_by_block_rms(clipping_threshold))
    if learning_rate is not None:
        parts.append(scale_by_learning_rate(learning_rate, flip_sign=False))
    if flag("adafactor", "multiply_by_parameter_scale", multiply_by_parameter_scale):
        parts.append(moments.scale_by_param_block_rms())
    if momentum is not None:
        parts.append(ema(momentum, debias=False, accumulator_dtype=dtype_momentum))
    if weight_decay_rate is not None:
        parts.append(add_decayed_weights(weight_decay_rate, weight_decay_mask))
    return chain(*parts, scale(-1.0))
