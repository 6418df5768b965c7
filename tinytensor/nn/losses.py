"""Losses: a Module whose forward takes (prediction, target) and returns a Tensor (a scalar,
or one loss per element with reduction="none"), with PyTorch's formulas and options.

Targets that are plain arrays are cast to the prediction's float dtype, so float64 labels do not
silently turn a float32 model's loss into float64.
"""

import numpy as np

from .. import backend, ops
from ..tensor import Tensor
from . import functional as F
from .module import Module

_REDUCTIONS = ("mean", "sum", "none")


def _check_reduction(reduction):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be one of {_REDUCTIONS}, got {reduction!r}")
    return reduction


def _reduce(loss, reduction):
    if reduction == "none":
        return loss
    return ops.mean(loss) if reduction == "mean" else ops.sum(loss)


def _float_dtype(x):
    dtype = x.dtype if isinstance(x, Tensor) else backend.asarray(x).dtype
    return dtype if dtype.kind == "f" else np.dtype(np.float64)


def _as_float(value, prediction, what):
    """A constant (weights, pos_weight) or plain-array target in the prediction's float dtype, on
    its device (numbers and lists are made there; an array elsewhere is an error naming both)."""
    if value is None or isinstance(value, Tensor):
        return value
    return backend.asarray(value, _float_dtype(prediction), like=prediction, what=what)


def _same_shape(name, prediction, target):
    """The elementwise losses do not broadcast: a silent (n, 1) - (n,) broadcast is a classic bug."""
    target = _as_float(target, prediction, f"{name}'s target")
    if np.shape(target.data if isinstance(target, Tensor) else target) != tuple(np.shape(
            prediction.data if isinstance(prediction, Tensor) else prediction)):
        raise ValueError(f"{name}: prediction has shape {tuple(prediction.shape)} but target has "
                         f"shape {tuple(np.shape(target))}; they must be equal (no broadcasting: "
                         f"reshape one of them)")
    return target


class _Loss(Module):
    def __init__(self, reduction="mean"):
        super().__init__()
        self.reduction = _check_reduction(reduction)

    def extra_repr(self):
        return f"reduction={self.reduction!r}"


class MSELoss(_Loss):
    """Mean of (prediction - target)**2 over every element (or its sum, or no reduction)."""

    def forward(self, prediction, target):
        target = _same_shape("MSELoss", prediction, target)
        return _reduce(ops.square(prediction - target), self.reduction)


class L1Loss(_Loss):
    """Mean of |prediction - target| (the gradient at 0 is 0, as PyTorch)."""

    def forward(self, prediction, target):
        target = _same_shape("L1Loss", prediction, target)
        return _reduce(ops.abs(prediction - target), self.reduction)


class HuberLoss(_Loss):
    """0.5 d**2 where |d| <= delta, delta * (|d| - 0.5 delta) elsewhere, d = prediction - target."""

    def __init__(self, reduction="mean", delta=1.0):
        super().__init__(reduction)
        if not delta > 0:
            raise ValueError(f"HuberLoss: delta must be positive, got {delta!r}")
        self.delta = float(delta)

    def forward(self, prediction, target):
        target = _same_shape("HuberLoss", prediction, target)
        a = ops.abs(prediction - target)
        q = ops.minimum(a, self.delta)                       # |d| clipped at delta
        return _reduce(0.5 * (q * q) + self.delta * (a - q), self.reduction)


class BCELoss(_Loss):
    """-w * (y log p + (1 - y) log(1 - p)) on probabilities p, each log clamped at -100 as
    PyTorch (finite at p = 0 and 1). Prefer BCEWithLogitsLoss on logits."""

    def __init__(self, weight=None, reduction="mean"):
        super().__init__(reduction)
        self.weight = weight

    def forward(self, p, target):
        target = _same_shape("BCELoss", p, target)
        loss = F.binary_cross_entropy_prim(p, target)
        if self.weight is not None:
            loss = loss * _as_float(self.weight, p, "BCELoss's weight")
        return _reduce(loss, self.reduction)


class BCEWithLogitsLoss(_Loss):
    """Binary cross-entropy of sigmoid(x) against y, computed from the logits x as PyTorch:
        loss = w * ((1 - y) x + (1 + (pos_weight - 1) y) softplus(-x))
    finite, with the exact gradient w * ((1 + (pw - 1) y) sigmoid(x) - pw y) ... for any finite
    logit (softplus and its slope sigmoid never form 1 / (1 + exp(x))). `pos_weight` weighs the
    positive term, broadcast over the last (class) axis; `weight` rescales each element."""

    def __init__(self, weight=None, reduction="mean", pos_weight=None):
        super().__init__(reduction)
        self.weight, self.pos_weight = weight, pos_weight

    def forward(self, logits, target):
        target = _same_shape("BCEWithLogitsLoss", logits, target)
        tail = F.softplus(-logits, threshold=np.inf)      # softplus(-x) = -log sigmoid(x)
        scale = 1.0
        if self.pos_weight is not None:
            scale = 1 + (_as_float(self.pos_weight, logits, "BCEWithLogitsLoss's pos_weight") - 1) * target
        loss = (1 - target) * logits + scale * tail
        if self.weight is not None:
            loss = loss * _as_float(self.weight, logits, "BCEWithLogitsLoss's weight")
        return _reduce(loss, self.reduction)


# ----- cross-entropy and NLL with PyTorch's options -----------------------------------------------
def _class_last(x, target):
    """PyTorch's K-dimensional layout (N, C, d1, ...) with integer targets (N, d1, ...): move the
    class axis last. Anything else keeps the class axis last (tinytensor's (..., C) layout)."""
    shape = tuple(x.shape)
    t_shape = np.shape(target.data if isinstance(target, Tensor) else target)
    if len(shape) > 2 and t_shape == shape[:1] + shape[2:] and t_shape != shape[:-1]:
        return ops.transpose(x, (0,) + tuple(range(2, len(shape))) + (1,))
    return x


def _weighted_nll(log_p, target, weight, ignore_index, smoothing, reduction, name):
    """-sum_c coef[..., c] * log_p[..., c] per row, with coef built as PyTorch's cross_entropy:
    class indices: (1 - s) w[y] onehot(y) + (s / C) w, rows with y == ignore_index zeroed, mean
    divided by the sum of w[y] over the rows kept; probabilities y: w * ((1 - s) y + s / C),
    mean divided by the number of rows."""
    C = log_p.shape[-1]
    dtype = log_p.dtype
    xp = backend.namespace(log_p)
    w = xp.ones(C, dtype) if weight is None else backend.asarray(
        weight.data if isinstance(weight, Tensor) else weight, dtype, like=log_p, what=f"{name}'s weight")
    if w.shape != (C,):
        raise ValueError(f"{name}: weight must have one entry per class, shape ({C},), got {w.shape}")
    t = backend.asarray(target.data if isinstance(target, Tensor) else target, like=log_p,
                        what=f"{name}'s target")
    if t.dtype.kind in "iu" and t.shape == tuple(log_p.shape[:-1]):
        # functions of the labels' values, computed off the tape: ops.on_values has tt.compile
        # compute them again on every call
        args = (target, w, ignore_index, smoothing, name)
        coef = ops.on_values(_label_coefficients, args, {}, _label_coefficients(t, *args[1:]))
        total = ops.on_values(_label_total, args, {}, _label_total(t, *args[1:]))
    elif t.shape == tuple(log_p.shape):
        if t.dtype.kind != "f":
            raise TypeError(f"{name}: targets of the input's shape must be probabilities (floats), "
                            f"got dtype {t.dtype}")
        if isinstance(target, Tensor) and target.requires_grad:   # soft labels that learn
            coef = (target * (1 - smoothing) + smoothing / C) * w
        else:
            args = (target, w, smoothing, dtype)
            coef = ops.on_values(_soft_coefficients, args, {}, _soft_coefficients(t, *args[1:]))
        total = t.size // C
    else:
        raise ValueError(f"{name}: target must be integer class indices of shape "
                         f"{tuple(log_p.shape[:-1])} or probabilities of shape {tuple(log_p.shape)}, "
                         f"got {t.dtype} of shape {t.shape}")
    rows = -ops.sum(log_p * coef, axis=-1)
    if reduction == "mean":
        total = total if backend.is_array(total) else dtype.type(total)   # a 0-d array off NumPy
        return ops.sum(rows) / total     # 0 / 0 = nan when every row is ignored
    return rows if reduction == "none" else ops.sum(rows)


def _label_coefficients(t, w, ignore_index, smoothing, name):
    """(..., C) weights of log_p for class indices t: (1 - s) w[y] onehot(y) + (s / C) w, rows
    with y == ignore_index zeroed."""
    C = w.shape[0]
    keep = t != ignore_index
    safe = np.where(keep, t, 0)
    if safe.size and (safe.min() < 0 or safe.max() >= C):
        raise IndexError(f"{name}: class indices must lie in [0, {C}) (or equal ignore_index="
                         f"{ignore_index}), got {t.min()}..{t.max()}")
    row_weight = w[safe] * keep
    onehot = safe[..., None] == backend.namespace(w).arange(C)   # (no put_along_axis everywhere)
    coef = onehot * ((1 - smoothing) * row_weight)[..., None]
    if smoothing:
        coef += (smoothing / C) * (keep[..., None] * w)
    return coef


def _label_total(t, w, ignore_index, smoothing, name):
    """The weighted mean's divisor: the sum of w[y] over the rows kept."""
    keep = t != ignore_index
    return (w[np.where(keep, t, 0)] * keep).sum()


def _soft_coefficients(t, w, smoothing, dtype):
    return (t.astype(dtype) * (1 - smoothing) + smoothing / w.shape[0]) * w


class CrossEntropyLoss(_Loss):
    """Cross-entropy of softmax(logits) against the targets, as PyTorch's CrossEntropyLoss.

    logits (N, C) (or (..., C), or PyTorch's (N, C, d1, ...) with integer targets (N, d1, ...));
    target: integer class indices, or probabilities (one-hot or soft) of the logits' shape.
    `weight` (C,) weighs each class (a weighted mean divides by the sum of the targets' weights),
    rows whose target is `ignore_index` count for nothing, and `label_smoothing` s mixes the
    targets with the uniform distribution: (1 - s) y + s / C. Without options it is one fused,
    stable primitive (`tt.softmax_cross_entropy`); with them, log_softmax and a weighted sum.
    Both are finite for any finite logits.
    """

    def __init__(self, weight=None, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
        if isinstance(weight, str):     # the old signature, CrossEntropyLoss(reduction)
            weight, reduction = None, weight
        super().__init__(reduction)
        if not 0.0 <= label_smoothing <= 1.0:
            raise ValueError(f"CrossEntropyLoss: label_smoothing must lie in [0, 1], got {label_smoothing}")
        self.weight, self.ignore_index = weight, int(ignore_index)
        self.label_smoothing = float(label_smoothing)

    def forward(self, logits, target):
        logits = _class_last(logits, target)
        t = target.data if isinstance(target, Tensor) else backend.asarray(target)
        plain = self.weight is None and self.label_smoothing == 0.0
        if plain and not (t.dtype.kind in "iu" and (t == self.ignore_index).any()):
            return ops.softmax_cross_entropy(logits, target, reduction=self.reduction)
        return _weighted_nll(ops.log_softmax(logits, axis=-1), target, self.weight, self.ignore_index,
                             self.label_smoothing, self.reduction, "CrossEntropyLoss")


class NLLLoss(_Loss):
    """-log_p[target] on log-probabilities (the output of LogSoftmax), with PyTorch's `weight`,
    `ignore_index` and reduction (a weighted mean divides by the sum of the targets' weights)."""

    def __init__(self, weight=None, ignore_index=-100, reduction="mean"):
        super().__init__(reduction)
        self.weight, self.ignore_index = weight, int(ignore_index)

    def forward(self, log_p, target):
        log_p = _class_last(log_p, target)
        t = backend.asarray(target.data if isinstance(target, Tensor) else target)
        if t.dtype.kind not in "iu":
            raise TypeError(f"NLLLoss: target must be integer class indices, got dtype {t.dtype}")
        return _weighted_nll(log_p, t, self.weight, self.ignore_index, 0.0, self.reduction, "NLLLoss")
