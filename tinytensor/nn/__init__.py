"""Neural-network building blocks on the tape: modules, layers, losses, init and utilities.

    model = tt.nn.Sequential(tt.nn.Linear(64, 128, rng=0), tt.nn.ReLU(), tt.nn.Linear(128, 10, rng=1))
    loss = tt.nn.CrossEntropyLoss()(model(x), y)

A parameter is just a leaf `tt.Tensor` with `requires_grad=True`; a `Module` finds its
parameters by walking its attributes (see `Module.named_parameters`). The primitives behind
convolution, pooling and the stable activations are in `tt.nn.functional`.
"""

from . import attention, functional, init, parallel, utils
from .attention import MultiheadAttention, scaled_dot_product_attention
from .conv import Conv1d, ConvTranspose1d, ConvTranspose2d
from .layers import (
    ELU,
    GELU,
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AdaptiveMaxPool2d,
    AvgPool2d,
    BatchNorm1d,
    BatchNorm2d,
    Conv2d,
    Dropout,
    Dropout2d,
    Embedding,
    Flatten,
    Identity,
    LayerNorm,
    LeakyReLU,
    Linear,
    LogSoftmax,
    MaxPool2d,
    MaxUnpool2d,
    Mish,
    ModuleDict,
    ModuleList,
    ParameterDict,
    ParameterList,
    PReLU,
    ReLU,
    Sequential,
    Sigmoid,
    SiLU,
    Softmax,
    Softplus,
    Tanh,
    Unflatten,
    Upsample,
    UpsamplingBilinear2d,
    UpsamplingNearest2d,
)
from .losses import (
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MSELoss,
    NLLLoss,
    SmoothL1Loss,
)
from .module import Module, functional_call
from .normalization import GroupNorm, InstanceNorm1d, InstanceNorm2d, RMSNorm
from .parameter import Parameter
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell
from .transformer import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)

functional.scaled_dot_product_attention = scaled_dot_product_attention   # F.<name>, as PyTorch

__all__ = [
    "Module", "functional_call", "functional", "init", "utils", "attention", "scaled_dot_product_attention",
    "parallel", "Parameter", "RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell",
    "Linear", "Conv2d", "MaxPool2d", "AvgPool2d", "Flatten", "Dropout", "LayerNorm", "BatchNorm1d",
    "BatchNorm2d", "Embedding", "Identity", "Sequential", "ModuleList", "ModuleDict",
    "ReLU", "Tanh", "Sigmoid", "LeakyReLU", "GELU", "Softplus", "Softmax", "LogSoftmax",
    "MultiheadAttention",
    "CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "HuberLoss", "BCELoss", "BCEWithLogitsLoss",
    "SmoothL1Loss", "KLDivLoss",
    "Conv1d", "ConvTranspose1d", "ConvTranspose2d", "GroupNorm", "InstanceNorm1d", "InstanceNorm2d",
    "RMSNorm", "Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d", "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d", "AdaptiveMaxPool2d", "Dropout2d", "SiLU", "ELU", "Mish", "PReLU", "Unflatten",
    "ParameterList", "ParameterDict", "TransformerEncoderLayer", "TransformerEncoder",
    "TransformerDecoderLayer", "TransformerDecoder", "Transformer", "MaxUnpool2d",
]
