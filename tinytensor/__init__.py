"""tinytensor: a vectorised tensor autograd on NumPy, with both modes on one tape.

    import tinytensor as tt
    x = tt.tensor([[1.0, 2.0]], requires_grad=True, name="x")
    W = tt.tensor(np.ones((2, 3)), requires_grad=True, name="W")
    loss = tt.crossEntropy(tt.softmax(tt.dot(x, W)), [[0.0, 1.0, 0.0]]) + tt.frobeniusNorm(W)
    loss.backward()          # reverse mode: W.grad
    loss.jvp({W: dW})        # forward mode: the directional derivative along dW
"""

from . import data, nn, ops, optim, scalar
from .checks import GradcheckError, check_rules, gradcheck, numerical_grad
from .compile import compile
from .graph import to_dot, wengert_list
from .ops import (
                  abs,
                  add,
                  astype,
                  broadcast_to,
                  concatenate,
                  cos,
                  cross_entropy,
                  crossEntropy,
                  div,
                  dot,
                  exp,
                  frobenius_norm,
                  frobeniusNorm,
                  linear,
                  log,
                  log_softmax,
                  logsumexp,
                  matmul,
                  max,
                  maximum,
                  mean,
                  minimum,
                  mul,
                  neg,
                  power,
                  relu,
                  reshape,
                  sigmoid,
                  sin,
                  softmax,
                  softmax_cross_entropy,
                  sqrt,
                  square,
                  stack,
                  sub,
                  sum,
                  swapaxes,
                  tanh,
                  transpose,
)
from .tape import REGISTRY, Primitive, detect_anomaly, no_grad, primitive, unbroadcast
from .tensor import Tensor, ones, randn, tensor, zeros
from .transforms import grad, hvp, jacobian, jvp, value_and_grad, vjp

__all__ = [
    "Tensor", "tensor", "zeros", "ones", "randn",
    "add", "sub", "mul", "div", "neg", "power", "exp", "log", "sin", "cos", "tanh", "sigmoid",
    "relu", "sqrt", "square", "abs", "maximum", "minimum", "sum", "mean", "max", "logsumexp",
    "reshape", "transpose", "swapaxes", "linear", "broadcast_to", "astype", "concatenate", "stack", "dot",
    "matmul", "softmax", "log_softmax", "cross_entropy", "softmax_cross_entropy",
    "frobenius_norm", "crossEntropy", "frobeniusNorm",
    "no_grad", "detect_anomaly", "primitive", "Primitive", "REGISTRY", "unbroadcast",
    "numerical_grad", "gradcheck", "GradcheckError", "check_rules",
    "wengert_list", "to_dot", "ops", "data", "nn", "optim", "scalar",
    "grad", "value_and_grad", "vjp", "jvp", "jacobian", "hvp", "compile",
]
