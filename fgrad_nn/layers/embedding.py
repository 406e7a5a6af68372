"""Embedding: a lookup table of vectors indexed by integer ids."""
import fgrad
import fgrad.lax as lax
import fgrad.numpy as fnp

from fgrad_nn import functional as F
from fgrad_nn.layers import _init
from fgrad_nn.module import Module, static_field


class Embedding(Module):
    """weight: (num_embeddings, embedding_dim), drawn from N(0, 1) as in PyTorch.
    Input: integer ids of any shape (one example or a batch); output ids.shape +
    (embedding_dim,).

    padding_idx (may be negative, counted from the end), as PyTorch: that row starts
    at zeros and receives no gradient, so it stays as it is under training (a
    pretrained non-zero row is looked up as it is)."""
    weight: fgrad.Array
    num_embeddings: int = static_field()
    embedding_dim: int = static_field()
    padding_idx: int = static_field(default=None)

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, *, key, dtype=None):
        self.num_embeddings, self.embedding_dim = int(num_embeddings), int(embedding_dim)
        weight = _init.standard_normal(key, (num_embeddings, embedding_dim),
                                       _init.resolve_dtype(dtype))
        if padding_idx is not None:
            if not -self.num_embeddings <= int(padding_idx) < self.num_embeddings:
                raise ValueError(f"Embedding: padding_idx must be in [-{num_embeddings}, "
                                 f"{num_embeddings}) for {num_embeddings} embeddings, got "
                                 f"{padding_idx}")
            padding_idx = int(padding_idx) % self.num_embeddings
            weight = weight.at[padding_idx].set(0)
        self.padding_idx = padding_idx
        self.weight = weight

    def __call__(self, ids, *, key=None):
        weight = self.weight
        if self.padding_idx is not None:
            rows = fnp.arange(self.num_embeddings)[:, None] == self.padding_idx
            weight = fnp.where(rows, lax.stop_gradient(weight), weight)
        return F.embedding(ids, weight)
