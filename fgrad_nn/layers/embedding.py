"""Embedding: a lookup table of vectors indexed by integer ids."""
import fgrad

from fgrad_nn import functional as F
from fgrad_nn.layers import _init
from fgrad_nn.module import Module, static_field


class Embedding(Module):
    """weight: (num_embeddings, embedding_dim), drawn from N(0, 1) as in PyTorch.
    Input: integer ids of any shape (one example or a batch); output ids.shape +
    (embedding_dim,)."""
    weight: fgrad.Array
    num_embeddings: int = static_field()
    embedding_dim: int = static_field()

    def __init__(self, num_embeddings, embedding_dim, *, key, dtype=None):
        self.num_embeddings, self.embedding_dim = int(num_embeddings), int(embedding_dim)
        self.weight = _init.standard_normal(key, (num_embeddings, embedding_dim),
                                            _init.resolve_dtype(dtype))

    def __call__(self, ids, *, key=None):
        return F.embedding(ids, self.weight)
