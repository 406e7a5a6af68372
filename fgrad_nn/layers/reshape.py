"""Flatten (merge a range of dimensions into one) and Unflatten (split one)."""
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


class Unflatten(Module):
    """Split dimension `dim` into `unflattened_size` (a tuple whose product is that
    dimension's size; one entry may be -1), as PyTorch's Unflatten:
    Unflatten(1, (C, H, W)) maps (N, C·H·W) -> (N, C, H, W)."""
    dim: int = static_field()
    unflattened_size: tuple = static_field()

    def __init__(self, dim, unflattened_size):
        self.dim, self.unflattened_size = int(dim), tuple(int(n) for n in unflattened_size)

    def __call__(self, x, *, key=None):
        nd = x.ndim
        if not -nd <= self.dim < nd:
            raise ValueError(f"Unflatten: dim {self.dim} does not fit an input of shape "
                             f"{tuple(x.shape)}")
        d = self.dim % nd
        sizes = self.unflattened_size
        known = 1
        for n in sizes:
            known *= n if n != -1 else 1
        full = x.shape[d]
        if sizes.count(-1) > 1 or (-1 not in sizes and known != full) or \
                (-1 in sizes and (known == 0 or full % known)):
            raise ValueError(f"Unflatten: cannot split dimension {self.dim} of size {full} "
                             f"(input shape {tuple(x.shape)}) into {sizes}")
        sizes = tuple(full // known if n == -1 else n for n in sizes)
        return fnp.reshape(x, tuple(x.shape[:d]) + sizes + tuple(x.shape[d + 1:]))
