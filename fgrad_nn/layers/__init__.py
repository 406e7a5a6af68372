"""Layers as modules (pytrees). Each class documents its parameter layout and
whether it takes one example, a batch, or both; activations also come as functions."""
from fgrad_nn.layers.activations import (GELU, Identity, Lambda, ReLU, Sigmoid,  # noqa: F401
                                         Softmax, Tanh, gelu, relu, sigmoid, softmax, tanh)
from fgrad_nn.layers.containers import MLP, Residual, ResMLPBlock, Sequential  # noqa: F401
from fgrad_nn.layers.conv import (Conv1d, Conv2d, Conv3d, ConvTranspose1d,  # noqa: F401
                                   ConvTranspose2d, ConvTranspose3d)
from fgrad_nn.layers.dropout import Dropout  # noqa: F401
from fgrad_nn.layers.embedding import Embedding  # noqa: F401
from fgrad_nn.layers.linear import Linear  # noqa: F401
from fgrad_nn.layers.norm import BatchNorm, BatchNormState, LayerNorm  # noqa: F401
from fgrad_nn.layers.pool import (AdaptiveAvgPool1d, AdaptiveAvgPool2d,  # noqa: F401
                                   AdaptiveMaxPool1d, AdaptiveMaxPool2d, AvgPool1d,
                                   AvgPool2d, AvgPool3d, MaxPool1d, MaxPool2d, MaxPool3d)
from fgrad_nn.layers.reshape import Flatten  # noqa: F401
from fgrad_nn.layers.activations import (CELU, ELU, GLU, SELU, Hardsigmoid,  # noqa: F401,E402
                                         Hardswish, Hardtanh, LeakyReLU, LogSigmoid,
                                         LogSoftmax, Mish, ReLU6, SiLU, Softplus, Softsign,
                                         Tanhshrink)
from fgrad_nn.layers.attention import (LearnedPositionalEmbedding,  # noqa: F401,E402
                                       MultiheadAttention, RotaryEmbedding,
                                       SinusoidalPositionalEmbedding, apply_rotary,
                                       sinusoidal_positions)
from fgrad_nn.layers.linear import Bilinear  # noqa: F401,E402
from fgrad_nn.layers.norm import GroupNorm, InstanceNorm1d, InstanceNorm2d, RMSNorm  # noqa
from fgrad_nn.layers.reshape import Unflatten  # noqa: F401,E402
from fgrad_nn.layers.transformer import (TransformerDecoder,  # noqa: F401,E402
                                         TransformerDecoderLayer, TransformerEncoder,
                                         TransformerEncoderLayer)

__all__ = ["Linear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
           "ConvTranspose3d", "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d",
           "AvgPool3d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveMaxPool1d",
           "AdaptiveMaxPool2d", "Flatten", "Embedding", "LayerNorm",
           "BatchNorm", "BatchNormState", "Dropout", "ReLU", "GELU", "Sigmoid", "Tanh",
           "Softmax", "Identity", "Lambda", "Sequential", "Residual", "MLP", "ResMLPBlock",
           "relu", "gelu", "sigmoid", "tanh", "softmax"]
__all__ += ["SiLU", "Mish", "ReLU6", "LeakyReLU", "ELU", "CELU", "SELU", "Softplus", "Hardtanh",
            "Hardsigmoid", "Hardswish", "LogSigmoid", "Softsign", "Tanhshrink", "LogSoftmax",
            "GLU", "Bilinear", "Unflatten", "GroupNorm", "RMSNorm", "InstanceNorm1d",
            "InstanceNorm2d", "MultiheadAttention", "SinusoidalPositionalEmbedding",
            "LearnedPositionalEmbedding", "RotaryEmbedding", "sinusoidal_positions",
            "apply_rotary", "TransformerEncoderLayer", "TransformerDecoderLayer",
            "TransformerEncoder", "TransformerDecoder"]
from fgrad_nn.layers.recurrent import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell  # noqa: F401,E402

__all__ += ["RNNCell", "LSTMCell", "GRUCell", "RNN", "LSTM", "GRU"]
