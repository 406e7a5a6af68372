"""Ready-made optimizers, each a `chain` of small transformations, with Optax's
names and signatures (PyTorch's behaviour where noted). Every learning_rate may
be a schedule; so may every other numeric hyper-parameter (see `schedulable`)."""
from fgrad_nn._checks import flag

from . import adaptive
from .base import chain
from .hyperparams import schedulable
from .transforms import add_decayed_weights, scale, scale_by_learning_rate, trace


def _is_zero(value):
    """True for a Python number equal to 0 (arrays, e.g. injected values, count as set)."""
    return isinstance(value, (int, float)) and value == 0


def _check_nesterov(name, momentum, nesterov):
    if flag(name, "nesterov", nesterov) and momentum is None:
        raise ValueError(f"{name}: nesterov=True needs a momentum (e.g. momentum=0.9)")


@schedulable()
def sgd(learning_rate, momentum=None, nesterov=False, weight_decay=0.0):
    """Stochastic gradient descent, as PyTorch's SGD (no dampening): the L2 term
    weight_decay * p joins the gradient before momentum t = g + momentum * t;
    nesterov uses g + momentum * t; then p ← p - learning_rate * (result)."""
    _check_nesterov("sgd", momentum, nesterov)
    parts = []
    if not _is_zero(weight_decay):
        parts.append(add_decayed_weights(weight_decay))
    if momentum is not None:
        parts.append(trace(momentum, nesterov))
    return chain(*parts, scale_by_learning_rate(learning_rate))


@schedulable()
def adam(learning_rate, b1=0.9, b2=0.999, eps=1e-8, eps_root=0.0, nesterov=False):
    """Adam (Kingma & Ba 2015): p ← p - lr · m̂ / (sqrt(v̂ + eps_root) + eps)."""
    return chain(adaptive.scale_by_adam(b1, b2, eps, eps_root, nesterov),
                 scale_by_learning_rate(learning_rate))


@schedulable()
def adamw(learning_rate, b1=0.9, b2=0.999, eps=1e-8, eps_root=0.0, weight_decay=1e-4,
          mask=None, nesterov=False):
    """Adam with decoupled weight decay (Loshchilov & Hutter):
    p ← p - lr · (adam direction + weight_decay · p); `mask` selects decayed leaves."""
    return chain(adaptive.scale_by_adam(b1, b2, eps, eps_root, nesterov),
                 add_decayed_weights(weight_decay, mask),
                 scale_by_learning_rate(learning_rate))


@schedulable()
def nadam(learning_rate, b1=0.9, b2=0.999, eps=1e-8, eps_root=0.0):
    """NAdam (Dozat 2016) in Optax's form: Adam with a Nesterov first moment.
    PyTorch's NAdam additionally decays the momentum (momentum_decay); this does not."""
    return adam(learning_rate, b1, b2, eps, eps_root, nesterov=True)


@schedulable()
def adamax(learning_rate, b1=0.9, b2=0.999, eps=1e-8):
    """AdaMax: p ← p - lr · m / (1 - b1^t) / (max(b2 u, |g|) + eps)."""
    return chain(adaptive.scale_by_adamax(b1, b2, eps), scale_by_learning_rate(learning_rate))


@schedulable()
def rmsprop(learning_rate, decay=0.9, eps=1e-8, initial_scale=0.0, centered=False,
            momentum=None, nesterov=False, *, alpha=None):
    """RMSprop as PyTorch computes it: d = g / (sqrt(v) + eps) (v centered on request);
    with momentum b = momentum · b + d; p ← p - lr · b. `alpha` is PyTorch's name for
    `decay` (PyTorch's default is 0.99) and replaces it when given."""
    _check_nesterov("rmsprop", momentum, nesterov)
    decay = decay if alpha is None else alpha
    parts = [adaptive.scale_by_rms(decay, eps, initial_scale, centered)]
    if momentum is not None:
        parts.append(trace(momentum, nesterov))
    return chain(*parts, scale_by_learning_rate(learning_rate))


@schedulable()
def adagrad(learning_rate, initial_accumulator_value=0.1, eps=1e-7):
    """AdaGrad (Duchi et al.): p ← p - lr · g / (sqrt(Σ g²) + eps)."""
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


@schedulable()
def lion(learning_rate, b1=0.9, b2=0.99, weight_decay=1e-3, mask=None):
    """Lion (Chen et al. 2023): p ← p - lr · (sign(b1 m + (1 - b1) g) + weight_decay · p)."""
    return chain(adaptive.scale_by_lion(b1, b2),
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
