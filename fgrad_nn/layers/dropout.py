"""Dropout with an explicit PRNG key; the identity in eval mode."""
from fgrad_nn import functional as F
from fgrad_nn._checks import flag
from fgrad_nn.module import Module, static_field


class Dropout(Module):
    """In training mode, zeroes each element with probability p and scales the rest by
    1/(1-p); `key` is required then (the same key gives the same mask). In eval mode
    (`fgrad_nn.eval_mode(model)` or training=False) it returns its input.
    Input: any shape, one example or a batch (elementwise)."""
    p: float = static_field(default=0.5)
    training: bool = static_field(default=True)

    def __post_init__(self):
        if not 0.0 <= self.p <= 1.0:
            raise ValueError(f"Dropout: p must be in [0, 1], got {self.p}")
        flag("Dropout", "training", self.training)

    def __call__(self, x, *, key=None):
        return F.dropout(x, self.p, key, self.training)
