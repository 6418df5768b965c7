"""Layers: Linear, the activations, and Sequential."""

import math

import numpy as np

from .. import ops
from ..tensor import Tensor
from .module import Module


class Linear(Module):
    """y = x @ W + b, with W of shape (in_features, out_features) and b of shape (out_features,).

    W is laid out as in the lecture's dot(x, W) (PyTorch stores the transpose), so x of shape
    (..., in_features) gives y of shape (..., out_features). Both W and b start uniform in
    +-1/sqrt(in_features), as PyTorch's default init. `rng` is an np.random.Generator, a seed or
    None. `dtype` defaults to float32, as in PyTorch; pass np.float64 for gradient checks.
    Inputs should have the same dtype: NumPy promotes float32 @ float64 to float64.
    """

    def __init__(self, in_features, out_features, bias=True, rng=None, dtype=np.float32):
        super().__init__()
        if in_features < 1 or out_features < 1:
            raise ValueError(f"Linear: in_features and out_features must be positive, got "
                             f"{in_features} and {out_features}")
        self.in_features, self.out_features = int(in_features), int(out_features)
        rng = np.random.default_rng(rng)
        bound = 1 / math.sqrt(in_features)
        self.W = Tensor(rng.uniform(-bound, bound, (in_features, out_features)), dtype=dtype,
                        requires_grad=True, name="W")
        self.b = None
        if bias:
            self.b = Tensor(rng.uniform(-bound, bound, (out_features,)), dtype=dtype,
                            requires_grad=True, name="b")

    # PyTorch's names, for readers coming from it (W here is PyTorch's weight transposed).
    weight = property(lambda self: self.W)
    bias = property(lambda self: self.b)

    def forward(self, x):
        return ops.linear(x, self.W, self.b)   # one tape entry for x @ W + b

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.b is not None}, dtype={self.W.dtype}")


class ReLU(Module):
    """max(x, 0), elementwise."""

    def forward(self, x):
        return ops.relu(x)


class Tanh(Module):
    def forward(self, x):
        return ops.tanh(x)


class Sigmoid(Module):
    """1 / (1 + exp(-x)), elementwise."""

    def forward(self, x):
        return ops.sigmoid(x)


class Sequential(Module):
    """Layers applied in order: Sequential(a, b, c)(x) == c(b(a(x))).

    The layers are attributes named "0", "1", ... (as in PyTorch), so parameter names read
    "0.W", "2.b". Indexable (an int gives a layer, a slice a Sequential of the same layers),
    with len() and iteration.
    """

    def __init__(self, *layers):
        super().__init__()
        for i, layer in enumerate(layers):
            if not callable(layer):
                raise TypeError(f"Sequential: layer {i} is a {type(layer).__name__}, not callable")
            setattr(self, str(i), layer)

    def _layers(self):
        return [value for key, value in vars(self).items() if key.isdigit()]

    def forward(self, x):
        for layer in self._layers():
            x = layer(x)
        return x

    def __getitem__(self, index):
        layers = self._layers()
        if isinstance(index, slice):
            return Sequential(*layers[index])
        return layers[index]

    def __len__(self):
        return len(self._layers())

    def __iter__(self):
        return iter(self._layers())
