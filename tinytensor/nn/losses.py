"""Losses: a Module whose forward takes (prediction, target) and returns a Tensor (a scalar,
or one loss per element with reduction="none"), with PyTorch's formulas and options.

As in PyTorch, each Module holds its options and calls the functional form (nn/functional.py),
where the math is: `MSELoss(reduction)(p, y)` is `F.mse_loss(p, y, reduction)`. Targets that are
plain arrays are cast to the prediction's float dtype, so float64 labels do not silently turn a
float32 model's loss into float64.
"""

from . import functional as F
from .module import Module


class _Loss(Module):
    def __init__(self, reduction="mean"):
        super().__init__()
        self.reduction = F._check_reduction(reduction)

    def extra_repr(self):
        return f"reduction={self.reduction!r}"


class MSELoss(_Loss):
    """Mean of (prediction - target)**2 over every element (or its sum, or no reduction).

    Examples
    --------
    >>> tt.nn.MSELoss()(tt.tensor([1.0, 2.0]), tt.tensor([1.0, 4.0]))
    tensor(2.)
    """

    def forward(self, prediction, target):
        return F.mse_loss(prediction, target, self.reduction)


class L1Loss(_Loss):
    """Mean of |prediction - target| (the gradient at 0 is 0, as PyTorch).

    Examples
    --------
    >>> tt.nn.L1Loss()(tt.tensor([1.0, 2.0]), tt.tensor([2.0, 4.0]))
    tensor(1.5)
    """

    def forward(self, prediction, target):
        return F.l1_loss(prediction, target, self.reduction)


class HuberLoss(_Loss):
    """0.5 d**2 where |d| <= delta, delta * (|d| - 0.5 delta) elsewhere, d = prediction - target.

    Examples
    --------
    >>> loss = tt.nn.HuberLoss(delta=1.0)
    >>> loss(tt.tensor([0.5, 3.0]), tt.tensor([0.0, 0.0]))   # (0.125 + 2.5) / 2
    tensor(1.3125)
    """

    def __init__(self, reduction="mean", delta=1.0):
        super().__init__(reduction)
        self.delta = F._check_delta(delta)

    def forward(self, prediction, target):
        return F.huber_loss(prediction, target, self.reduction, self.delta)


class SmoothL1Loss(_Loss):
    """0.5 d**2 / beta where |d| < beta, |d| - 0.5 beta elsewhere, d = prediction - target, as
    PyTorch's (HuberLoss(delta) is delta * SmoothL1Loss(beta=delta)); beta=0 is L1Loss.

    Examples
    --------
    >>> loss = tt.nn.SmoothL1Loss(beta=1.0)
    >>> loss(tt.tensor([0.5, 3.0]), tt.tensor([0.0, 0.0]))   # (0.125 + 2.5) / 2
    tensor(1.3125)
    """

    def __init__(self, reduction="mean", beta=1.0):
        super().__init__(reduction)
        if not beta >= 0:
            raise ValueError(f"SmoothL1Loss: beta must be non-negative, got {beta!r}")
        self.beta = float(beta)

    def forward(self, prediction, target):
        return F.smooth_l1_loss(prediction, target, self.reduction, self.beta)

    def extra_repr(self):
        return f"reduction={self.reduction!r}, beta={self.beta}"


class KLDivLoss(_Loss):
    """KL divergence of `input` (log-probabilities) from `target`, as PyTorch's (see
    F.kl_div): reduction "mean" (every element), "batchmean" (the KL divergence per sample),
    "sum", "none"; log_target=True takes the target as log-probabilities.

    Examples
    --------
    >>> log_q = tt.log(tt.tensor([[0.5, 0.5]]))   # the model's log-probabilities
    >>> p = tt.tensor([[0.25, 0.75]])             # the target distribution
    >>> kl = tt.nn.KLDivLoss(reduction="batchmean")(log_q, p)
    >>> round(kl.item(), 4)                 # 0.25 log(0.25 / 0.5) + 0.75 log(0.75 / 0.5)
    0.1308
    """

    def __init__(self, reduction="mean", log_target=False):
        Module.__init__(self)
        if reduction not in F.KL_REDUCTIONS:
            raise ValueError(f"KLDivLoss: reduction must be one of {F.KL_REDUCTIONS}, got {reduction!r}")
        self.reduction, self.log_target = reduction, bool(log_target)

    def forward(self, input, target):
        return F.kl_div(input, target, self.reduction, self.log_target)

    def extra_repr(self):
        return f"reduction={self.reduction!r}, log_target={self.log_target}"


class BCELoss(_Loss):
    """-w * (y log p + (1 - y) log(1 - p)) on probabilities p, each log clamped at -100 as
    PyTorch (finite at p = 0 and 1). Prefer BCEWithLogitsLoss on logits.

    Examples
    --------
    >>> p = tt.tensor([0.9, 0.2])           # probabilities (after a sigmoid)
    >>> loss = tt.nn.BCELoss()(p, tt.tensor([1.0, 0.0]))
    >>> round(loss.item(), 4)               # -(log 0.9 + log 0.8) / 2
    0.1643
    """

    def __init__(self, weight=None, reduction="mean"):
        super().__init__(reduction)
        self.weight = weight

    def forward(self, p, target):
        return F.binary_cross_entropy(p, target, self.weight, self.reduction)


class BCEWithLogitsLoss(_Loss):
    """Binary cross-entropy of sigmoid(x) against y, computed from the logits x as PyTorch:
        loss = w * ((1 - y) x + (1 + (pos_weight - 1) y) softplus(-x))
    finite, with the exact gradient w * ((1 + (pw - 1) y) sigmoid(x) - pw y) ... for any finite
    logit (softplus and its slope sigmoid never form 1 / (1 + exp(x))). `pos_weight` weighs the
    positive term, broadcast over the last (class) axis; `weight` rescales each element.

    Examples
    --------
    >>> loss = tt.nn.BCEWithLogitsLoss()(tt.tensor([0.0]), tt.tensor([1.0]))
    >>> round(loss.item(), 4)
    0.6931
    """

    def __init__(self, weight=None, reduction="mean", pos_weight=None):
        super().__init__(reduction)
        self.weight, self.pos_weight = weight, pos_weight

    def forward(self, logits, target):
        return F.binary_cross_entropy_with_logits(logits, target, self.weight, self.reduction,
                                                  self.pos_weight)


class CrossEntropyLoss(_Loss):
    """Cross-entropy of softmax(logits) against the targets, as PyTorch's CrossEntropyLoss.

    logits (N, C) (or (..., C), or PyTorch's (N, C, d1, ...) with integer targets (N, d1, ...));
    target: integer class indices, or probabilities (one-hot or soft) of the logits' shape.
    `weight` (C,) weighs each class (a weighted mean divides by the sum of the targets' weights),
    rows whose target is `ignore_index` count for nothing, and `label_smoothing` s mixes the
    targets with the uniform distribution: (1 - s) y + s / C. Without options it is one fused,
    stable primitive (`tt.softmax_cross_entropy`); with them, log_softmax and a weighted sum.
    Both are finite for any finite logits.

    Examples
    --------
    >>> logits = tt.tensor([[0.0, 0.0], [0.0, 0.0]], requires_grad=True)
    >>> loss = tt.nn.CrossEntropyLoss()(logits, np.array([0, 1]))
    >>> round(loss.item(), 4)
    0.6931
    """

    def __init__(self, weight=None, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
        if isinstance(weight, str):     # the old signature, CrossEntropyLoss(reduction)
            weight, reduction = None, weight
        super().__init__(reduction)
        self.label_smoothing = F._check_smoothing(label_smoothing)
        self.weight, self.ignore_index = weight, int(ignore_index)

    def forward(self, logits, target):
        return F.cross_entropy(logits, target, self.weight, self.ignore_index, self.reduction,
                               self.label_smoothing)


class NLLLoss(_Loss):
    """-log_p[target] on log-probabilities (the output of LogSoftmax), with PyTorch's `weight`,
    `ignore_index` and reduction (a weighted mean divides by the sum of the targets' weights).

    Examples
    --------
    >>> tt.nn.NLLLoss()(tt.tensor([[-1.0, -2.0]]), np.array([1]))
    tensor(2.)
    """

    def __init__(self, weight=None, ignore_index=-100, reduction="mean"):
        super().__init__(reduction)
        self.weight, self.ignore_index = weight, int(ignore_index)

    def forward(self, log_p, target):
        return F.nll_loss(log_p, target, self.weight, self.ignore_index, self.reduction)
