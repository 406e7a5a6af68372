"""Containers: Sequential, Residual, MLP and the ResMLP block.

A container is stateful when any child is (e.g. holds a BatchNorm). Stateless
containers are called `model(x, *, key=None) -> y`; stateful ones
`model(x, state, *, key=None) -> (y, new_state)`, with
`state = fgrad_nn.init_state(model)` (a tuple with one entry per child, None for
stateless children). A key, when given, is split between the children.
"""
from fgrad import nn

from fgrad_nn.layers import _init
from fgrad_nn.layers.activations import Identity, Lambda
from fgrad_nn.layers.dropout import Dropout
from fgrad_nn.layers.linear import Linear
from fgrad_nn.layers.norm import BatchNorm, LayerNorm
from fgrad_nn.module import Module, is_function, is_stateful, static_field


def _as_module(layer):
    if isinstance(layer, Module):
        return layer
    if is_function(layer):
        return Lambda(layer)
    if callable(layer):   # a callable pytree: as a Lambda its arrays would be static
        raise TypeError(f"expected a Module or a function, got {type(layer).__name__}, a "
                        f"callable pytree: wrapped as a function its arrays would become "
                        f"static configuration, hidden from grad and optimizers; make it a "
                        f"subclass of fgrad_nn.Module")
    raise TypeError(f"expected a Module or a function, got {type(layer).__name__}")


def _keys(key, n):
    return [None] * n if key is None else list(_init.split(key, n))


def _missing_state(name):
    return TypeError(f"{name} holds a stateful layer (e.g. BatchNorm) and must be called "
                     f"y, state = model(x, state) with state = fgrad_nn.init_state(model)")


class Sequential(Module):
    """Applies its layers in order: Sequential(a, b, c)(x) = c(b(a(x))). Plain
    functions become Lambda modules. Batch handling is that of the layers."""
    layers: tuple

    def __init__(self, *layers):
        if len(layers) == 1 and isinstance(layers[0], (list, tuple)):
            layers = tuple(layers[0])
        self.layers = tuple(_as_module(layer) for layer in layers)

    @property
    def stateful(self):
        return any(is_stateful(layer) for layer in self.layers)

    def init_state(self):
        if not self.stateful:
            return None
        return tuple(layer.init_state() if is_stateful(layer) else None
                     for layer in self.layers)

    def __call__(self, x, state=None, *, key=None):
        stateful = self.stateful
        if stateful and state is None:
            raise _missing_state("Sequential")
        states = list(state) if stateful else [None] * len(self.layers)
        for i, (layer, k) in enumerate(zip(self.layers, _keys(key, len(self.layers)))):
            if is_stateful(layer):
                x, states[i] = layer(x, states[i], key=k)
            else:
                x = layer(x, key=k)
        return (x, tuple(states)) if stateful else x

    def __len__(self):
        return len(self.layers)

    def __getitem__(self, i):
        return self.layers[i]


class Residual(Module):
    """x + fn(x); fn must keep the shape of x."""
    fn: Module

    def __init__(self, fn):
        self.fn = _as_module(fn)

    @property
    def stateful(self):
        return is_stateful(self.fn)

    def init_state(self):
        return self.fn.init_state() if self.stateful else None

    def __call__(self, x, state=None, *, key=None):
        if self.stateful:
            if state is None:
                raise _missing_state(type(self).__name__)
            y, state = self.fn(x, state, key=key)
        else:
            y = self.fn(x, key=key)
        if tuple(y.shape) != tuple(x.shape):
            raise ValueError(f"{type(self).__name__}: the branch maps shape {tuple(x.shape)} "
                             f"to {tuple(y.shape)}; a residual needs the same shape")
        return (x + y, state) if self.stateful else x + y


class MLP(Module):
    """Linear layers of the given sizes, e.g. MLP([784, 128, 10]): Linear(784, 128),
    activation, Linear(128, 10), final_activation (none by default).
    Input: (..., sizes[0]), one example or any batch."""
    layers: tuple
    activation: object = static_field()
    final_activation: object = static_field()

    def __init__(self, sizes, activation=None, final_activation=None, bias=True, *, key,
                 dtype=None):
        sizes = tuple(int(s) for s in sizes)
        if len(sizes) < 2:
            raise ValueError(f"MLP: sizes needs at least an input and an output size, got "
                             f"{sizes}")
        keys = _init.split(key, len(sizes) - 1)
        self.layers = tuple(Linear(a, b, bias, key=k, dtype=dtype)
                            for a, b, k in zip(sizes[:-1], sizes[1:], keys))
        self.activation = nn.relu if activation is None else activation
        self.final_activation = final_activation

    def __call__(self, x, *, key=None):
        for layer in self.layers[:-1]:
            x = self.activation(layer(x))
        x = self.layers[-1](x)
        return x if self.final_activation is None else self.final_activation(x)


class ResMLPBlock(Residual):
    """Pre-norm residual MLP block: x + Dropout(Linear(act(Linear(norm(x))))).

    dim -> hidden_dim -> dim; norm='layer' (LayerNorm over the features, any batch
    shape) or 'batch' (BatchNorm: input (N, dim), and the block becomes stateful).
    Dropout needs a key in training mode when dropout > 0.
    """

    def __init__(self, dim, hidden_dim, activation=None, dropout=0.0, norm="layer", *, key,
                 dtype=None):
        if norm == "layer":
            norm_layer = LayerNorm(dim, dtype=dtype)
        elif norm == "batch":
            norm_layer = BatchNorm(dim, dtype=dtype)
        else:
            raise ValueError(f"ResMLPBlock: norm must be 'layer' or 'batch', got {norm!r}")
        k1, k2 = _init.split(key, 2)
        self.fn = Sequential(norm_layer, Linear(dim, hidden_dim, key=k1, dtype=dtype),
                             activation or nn.relu, Linear(hidden_dim, dim, key=k2, dtype=dtype),
                             Dropout(dropout) if dropout > 0 else Identity())
