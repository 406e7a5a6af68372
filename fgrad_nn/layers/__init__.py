"""Layers as modules (pytrees). Each class documents its parameter layout and
whether it takes one example, a batch, or both; activations also come as functions."""
from fgrad_nn.layers.activations import (GELU, Identity, Lambda, ReLU, Sigmoid,  # noqa: F401
                                         Softmax, Tanh, gelu, relu, sigmoid, softmax, tanh)
from fgrad_nn.layers.containers import MLP, Residual, ResMLPBlock, Sequential  # noqa: F401
from fgrad_nn.layers.conv import Conv2d  # noqa: F401
from fgrad_nn.layers.dropout import Dropout  # noqa: F401
from fgrad_nn.layers.embedding import Embedding  # noqa: F401
from fgrad_nn.layers.linear import Linear  # noqa: F401
from fgrad_nn.layers.norm import BatchNorm, BatchNormState, LayerNorm  # noqa: F401
from fgrad_nn.layers.pool import AvgPool2d, MaxPool2d  # noqa: F401
from fgrad_nn.layers.reshape import Flatten  # noqa: F401

__all__ = ["Linear", "Conv2d", "MaxPool2d", "AvgPool2d", "Flatten", "Embedding", "LayerNorm",
           "BatchNorm", "BatchNormState", "Dropout", "ReLU", "GELU", "Sigmoid", "Tanh",
           "Softmax", "Identity", "Lambda", "Sequential", "Residual", "MLP", "ResMLPBlock",
           "relu", "gelu", "sigmoid", "tanh", "softmax"]
from fgrad_nn.layers.recurrent import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell  # noqa: F401,E402

__all__ += ["RNNCell", "LSTMCell", "GRUCell", "RNN", "LSTM", "GRU"]
