"""Flatten: merge a range of dimensions into one."""
import fgrad.numpy as fnp

from fgrad_nn.module import Module, static_field


class Flatten(Module):
    """Merge dimensions start_dim..end_dim (inclusive) into one, as PyTorch's Flatten.
    The default start_dim=1 keeps a leading batch axis: (N, C, H, W) -> (N, C·H·W).
    For one example (or under fgrad.vmap) use Flatten(start_dim=0)."""
    start_dim: int = static_field(default=1)
    end_dim: int = static_field(default=-1)

    def __call__(self, x, *, key=None):
        nd = x.ndim
        if not (-nd <= self.start_dim < nd and -nd <= self.end_dim < nd) or \
                self.start_dim % nd > self.end_dim % nd:
            raise ValueError(f"Flatten: dimensions {self.start_dim}..{self.end_dim} do not "
                             f"fit an input of shape {tuple(x.shape)}")
        start, end = self.start_dim % nd, self.end_dim % nd
        shape = tuple(x.shape)
        merged = 1
        for n in shape[start:end + 1]:
            merged *= n
        return fnp.reshape(x, shape[:start] + (merged,) + shape[end + 1:])
