"""Neural-network building blocks on the tape: modules, layers and losses.

    model = tt.nn.Sequential(tt.nn.Linear(64, 128, rng=0), tt.nn.ReLU(), tt.nn.Linear(128, 10, rng=1))
    loss = tt.nn.CrossEntropyLoss()(model(x), y)

A parameter is just a leaf `tt.Tensor` with `requires_grad=True`; a `Module` finds its
parameters by walking its attributes (see `Module.named_parameters`).
"""

from .layers import Linear, ReLU, Sequential, Sigmoid, Tanh
from .losses import CrossEntropyLoss, MSELoss
from .module import Module

__all__ = ["Module", "Linear", "ReLU", "Tanh", "Sigmoid", "Sequential", "CrossEntropyLoss", "MSELoss"]
