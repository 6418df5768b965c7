"""Optimizers: the weight-update step of the SGD loop, with PyTorch's exact update rules.

    opt = tt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for xb, yb in batches:
        loss = loss_fn(model(xb), yb)   # 1. forward
        opt.zero_grad()
        loss.backward()                 # 2. backward
        opt.step()                      # 3. update: p <- p - lr * g

`step()` works on the raw arrays (`p.data`, `p.grad`), in place and outside the tape: it
creates no Tensor, records nothing, and parameters stay leaves. Hyperparameters are kept as
Python floats and state buffers in the parameter's dtype, so float32 parameters stay float32
(NumPy 2 would promote float32 * np.float64 to float64).
"""

import math
from numbers import Real

import numpy as np

from . import backend
from .tensor import Tensor


def _number(name, value, low=0.0, high=math.inf, high_open=False):
    """A hyperparameter as a Python float, checked against [low, high] (or [low, high))."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if not (low <= value <= high) or (high_open and value == high):
        interval = f"[{low}, {high}{')' if high_open else ']'}"
        raise ValueError(f"invalid {name}: {value} (must lie in {interval})")
    return value


class Optimizer:
    """Holds a list of parameters (leaf Tensors with requires_grad=True)."""

    def __init__(self, params):
        if isinstance(params, Tensor):
            raise TypeError("params must be an iterable of Tensors (e.g. model.parameters()), "
                            "not a single Tensor: wrap it in a list")
        self.params = []
        seen = set()
        for i, p in enumerate(params):
            if not isinstance(p, Tensor):
                raise TypeError(f"parameter {i} is a {type(p).__name__}, not a tt.Tensor")
            if not p.requires_grad:
                raise ValueError(f"parameter {i} (shape {p.shape}) does not require grad")
            if p._prim is not None:
                raise ValueError(f"parameter {i} (shape {p.shape}) is computed from other tensors; "
                                 f"an optimizer can only update leaves")
            if id(p) not in seen:      # a parameter given twice is updated once
                seen.add(id(p))
                self.params.append(p)
        if not self.params:
            raise ValueError("the optimizer got an empty parameter list")

    def zero_grad(self):
        """Set every parameter's `.grad` to None, as PyTorch does by default."""
        for p in self.params:
            p.grad = None

    def step(self):
        raise NotImplementedError

    def _grads(self):
        """(index, parameter, gradient) for each parameter that received a gradient."""
        for i, p in enumerate(self.params):
            if p.grad is not None:
                if p.grad.shape != p.data.shape:
                    raise ValueError(f"parameter {i} has shape {p.shape} but its grad has shape "
                                     f"{p.grad.shape}")
                yield i, p, p.grad


class SGD(Optimizer):
    """Stochastic gradient descent, optionally with momentum, as torch.optim.SGD (dampening 0).

    Per parameter p with gradient grad:
        g = grad + weight_decay * p
        buf = g (first step), else buf = momentum * buf + g        (when momentum != 0)
        g = g + momentum * buf if nesterov else buf                 (when momentum != 0)
        p = p - lr * g
    """

    def __init__(self, params, lr, momentum=0.0, weight_decay=0.0, nesterov=False):
        super().__init__(params)
        self.lr = _number("lr", lr)
        self.momentum = _number("momentum", momentum)
        self.weight_decay = _number("weight_decay", weight_decay)
        if nesterov and self.momentum == 0:
            raise ValueError("nesterov=True requires a momentum > 0")
        self.nesterov = bool(nesterov)
        self.momentum_buffers = [None] * len(self.params)

    def step(self):
        lr, momentum, weight_decay = self.lr, self.momentum, self.weight_decay
        for i, p, g in self._grads():
            if weight_decay:
                g = g + weight_decay * p.data      # a new array: the user's .grad is left alone
            if momentum:
                buf = self.momentum_buffers[i]
                if buf is None:
                    buf = self.momentum_buffers[i] = backend.copy(g, p.dtype)   # on p's device
                else:
                    buf *= momentum
                    buf += g
                g = g + momentum * buf if self.nesterov else buf
            p.data -= lr * g


class Adam(Optimizer):
    """Adam, as torch.optim.Adam (weight decay added to the gradient, not decoupled).

    Per parameter p with gradient grad, at its step t = 1, 2, ...:
        g = grad + weight_decay * p
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g**2
        p = p - lr * (m / (1 - beta1**t)) / (sqrt(v / (1 - beta2**t)) + eps)
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        super().__init__(params)
        self.lr = _number("lr", lr)
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise ValueError(f"betas must be a pair (beta1, beta2), got {betas!r}")
        self.betas = (_number("beta1", betas[0], high=1.0, high_open=True),
                      _number("beta2", betas[1], high=1.0, high_open=True))
        self.eps = _number("eps", eps)
        self.weight_decay = _number("weight_decay", weight_decay)
        self.steps = [0] * len(self.params)   # per parameter, as PyTorch: a skipped one waits
        self.m = [np.zeros_like(p.data) for p in self.params]   # first moment, p's dtype
        self.v = [np.zeros_like(p.data) for p in self.params]   # second moment

    def step(self):
        lr, eps, weight_decay = self.lr, self.eps, self.weight_decay
        beta1, beta2 = self.betas
        for i, p, g in self._grads():
            if weight_decay:
                g = g + weight_decay * p.data
            self.steps[i] += 1
            t = self.steps[i]
            m, v = self.m[i], self.v[i]
            m *= beta1
            m += (1 - beta1) * g
            v *= beta2
            v += (1 - beta2) * (g * g)
            m_hat = m / (1 - beta1 ** t)          # bias corrections: Python floats
            v_hat = v / (1 - beta2 ** t)
            p.data -= lr * m_hat / (np.sqrt(v_hat) + eps)
