"""Losses: a Module whose forward takes (prediction, target) and returns a scalar Tensor."""

import numpy as np

from .. import backend, ops
from ..tensor import Tensor
from .module import Module

_REDUCTIONS = ("mean", "sum", "none")


def _check_reduction(reduction):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be one of {_REDUCTIONS}, got {reduction!r}")
    return reduction


class CrossEntropyLoss(Module):
    """Cross-entropy of softmax(logits) against the targets, as PyTorch's CrossEntropyLoss.

    logits: (n, classes) (or (..., classes)); target: integer class indices of shape (n,), or
    one-hot / soft labels of the logits' shape. One fused, stable primitive
    (`tt.softmax_cross_entropy`): finite for any finite logits, gradient (softmax - onehot) / n.
    """

    def __init__(self, reduction="mean"):
        super().__init__()
        self.reduction = _check_reduction(reduction)

    def forward(self, logits, target):
        return ops.softmax_cross_entropy(logits, target, reduction=self.reduction)


class MSELoss(Module):
    """Mean of (prediction - target)**2 over every element (or its sum, or no reduction)."""

    def __init__(self, reduction="mean"):
        super().__init__()
        self.reduction = _check_reduction(reduction)

    def forward(self, prediction, target):
        if not isinstance(target, Tensor):
            # A float64 array target must not silently promote a float32 model's loss.
            target = backend.asarray(target, np.result_type(prediction.dtype, np.float16),
                                     like=prediction.data, what="MSELoss's target")
        if np.shape(target) != prediction.shape:
            raise ValueError(f"MSELoss: prediction has shape {prediction.shape} but target has "
                             f"shape {np.shape(target)} (broadcasting is not applied, as a silent "
                             f"(n, 1) - (n,) broadcast is a classic bug)")
        squares = ops.square(prediction - target)
        if self.reduction == "none":
            return squares
        return ops.mean(squares) if self.reduction == "mean" else ops.sum(squares)
