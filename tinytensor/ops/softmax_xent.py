"""Softmax and cross-entropy: the one special case of the op table, in one file.

    softmax, log_softmax      primitives (stable for any finite input)
    cross_entropy(p, y)       the lecture's crossEntropy; when p = softmax(z) it is computed from
                              the logits z (finite and exact for any finite z), see below
    softmax_cross_entropy     the same loss of the logits as one fused primitive (nn.CrossEntropyLoss)

Labels are integer class indices (of shape p.shape[:-1]) or dense labels of p's shape (one-hot
or soft). `check_class_range` is the one range check of class indices and its message: the
ops here, nn's losses and tt.compile's fused programs raise it.

How crossEntropy(softmax(z), y) sees the logits: the crossEntropy row takes a hidden third input,
the logits, which `wengert_list` does not show (its row declares `hidden_inputs=1`). `_softmax_logits`
finds them: a recorded softmax output's own input, or, off the tape (no_grad, plain arrays), the
logits `softmax` remembered for it in `_SOFTMAX_LOGITS`.
`FUSED_INTO_LOSS` remembers the softmax outputs a loss was computed around, so that
`retain_grad()` afterwards can say why they get no gradient of their own (it asks
`fused_into_loss(p)`). Both maps are weakid.IdentityWeakMap: an entry goes with its output.
tt.compile imports the public helpers below (check_class_range, class_indices, at_labels,
reduce_rows, ce_vjp_logits).
"""

import builtins
import math

import numpy as np
import scipy.special

from .. import backend, tape
from ..tensor import Tensor
from ..weakid import IdentityWeakMap
from .table import _array, defprim, public, publish

# ----- softmax and log_softmax --------------------------------------------------------------------
_ONES = {}
_TRANSPOSED_MAX = 32    # rows up to this long: the max of a transposed copy is the faster one


def _short_rows(x, axis):
    """Whether a reduction over `axis` of x runs over many short rows of its last axis (attention
    weights: rows of 32), where NumPy's reductions cost ~20-50 ns a row: there a BLAS x @ ones
    sums 3-4x faster (rounding as BLAS adds: exact to float rounding), and a transposed copy's
    max is the same number 2x faster."""
    if type(x) is not np.ndarray or x.ndim < 2:
        return False
    n = x.shape[-1]
    return (2 <= n <= 128 and x.size >= 256 * n and axis in (-1, x.ndim - 1)
            and x.dtype.type in (np.float32, np.float64))


def row_forms(x, axis):
    """Whether row_max and row_sum take their fast branches for arrays like x (tt.compile decides
    at trace time, where the shapes are fixed, and writes the plain NumPy method otherwise)."""
    fast = _short_rows(x, axis)
    return (fast and x.shape[-1] <= _TRANSPOSED_MAX), fast


def row_max(x, axis):
    """x.max(axis, keepdims=True), for softmax's shift."""
    return _max_of_rows(x) if _short_rows(x, axis) else x.max(axis=axis, keepdims=True)


def row_sum(x, axis):
    """x.sum(axis, keepdims=True), for softmax's sums."""
    return _sum_of_rows(x) if _short_rows(x, axis) else x.sum(axis=axis, keepdims=True)


def _max_of_rows(x):      # (many short rows: _short_rows)
    n = x.shape[-1]
    if n > _TRANSPOSED_MAX:
        return x.max(axis=-1, keepdims=True)
    return np.ascontiguousarray(x.reshape(-1, n).T).max(axis=0).reshape(x.shape[:-1] + (1,))


def _sum_of_rows(x):
    key = (x.shape[-1], x.dtype)
    ones = _ONES.get(key)
    if ones is None:
        ones = _ONES[key] = np.ones(x.shape[-1], x.dtype)
        ones.flags.writeable = False
    return (x @ ones)[..., None]


def _softmax_forward(x, axis=-1):
    if not np.size(x):                 # nothing to normalise: an empty result, as SciPy
        return np.exp(x)
    if _short_rows(x, axis):           # (row_max and row_sum, with one test)
        e = np.exp(x - _max_of_rows(x))
        e /= _sum_of_rows(e)
        return e
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    e /= e.sum(axis=axis, keepdims=True)
    return e


def _softmax_rule(g, ans, x, axis):   # the softmax Jacobian is symmetric: one formula for both
    return ans * (g - row_sum(g * ans, axis))


_softmax = defprim(_softmax_forward, "softmax", nargs=1,
                   vjp=[_softmax_rule], jvp=[_softmax_rule])


def _log_softmax_forward(x, axis=-1):
    # (x - max) - log(sum(exp(x - max))), not x - logsumexp(x): that rounds at the scale of max(x)
    # (an error of 2e-4 at logits of 1e4 in float32).
    if not np.size(x):
        return x - x                   # an empty result, as SciPy
    if _short_rows(x, axis):
        shifted = x - _max_of_rows(x)
        return shifted - np.log(_sum_of_rows(np.exp(shifted)))
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


_log_softmax = defprim(_log_softmax_forward,
                       "log_softmax", nargs=1,
                       vjp=[lambda g, ans, x, axis:
                            g - np.exp(ans) * np.sum(g, axis=axis, keepdims=True)],
                       jvp=[lambda t, ans, x, axis:
                            t - np.sum(np.exp(ans) * t, axis=axis, keepdims=True)])


def _hits(index, n):
    """On another device (CuPy): class indices as one-hot booleans, and per row whether the index
    lies in [0, n). There, labels are never used to index: CuPy wraps an out-of-range index
    silently, and raising IndexError, as on the CPU, would cost a round trip to the device every
    step. Rows with such a label get NaN (loss and gradient), which is never mistaken."""
    hit = index[..., None] == backend.namespace(index).arange(n)
    return hit, hit.any(axis=-1)


def _nan_unless(valid, values):
    return np.where(valid, values, np.nan).astype(values.dtype, copy=False)


def check_class_range(index, classes, name=None, ignore_index=None):
    """The one range check of integer class indices, with its one message (the ops here, nn's
    losses and tt.compile's programs raise it): each index lies in [0, classes) or, where
    `ignore_index` is given, equals it. `name` prefixes the message (the loss's name)."""
    kept = index if ignore_index is None else np.where(index != ignore_index, index, 0)
    if kept.size and (kept.min() < 0 or kept.max() >= classes):
        also = "" if ignore_index is None else f" (or equal ignore_index={ignore_index})"
        raise IndexError(f"{name + ': ' if name else ''}class indices must lie in [0, {classes}){also}; "
                         f"got {index.min()}..{index.max()}")


def class_indices(y, shape, check=False):
    """The labels as integer class indices of shape shape[:-1], or None for dense labels of
    `shape` (one-hot or soft). Anything else is an error naming both shapes."""
    value = y.data if isinstance(y, Tensor) else _array(y)
    shape = tuple(shape)
    if value.dtype.kind in "iu" and value.shape == shape[:-1]:
        if check and type(value) is np.ndarray:   # elsewhere: NaN (see _hits)
            check_class_range(value, shape[-1])
        return value
    if value.shape != shape:
        raise ValueError(f"labels must have the probabilities' shape {shape} "
                         f"or be integer class indices of shape {shape[:-1]}; got "
                         f"{value.dtype} labels of shape {value.shape}")
    return None


def _labels(y, shape, dtype, check=True):
    """The labels as a dense array (or Tensor) of `shape`: one-hot rows from class indices
    (range-checked: a negative index must not silently pick the last class; the rules pass
    check=False, as the forward has checked the same labels)."""
    index = class_indices(y, shape, check=check)
    if index is None:
        return y
    if type(index) is not np.ndarray:
        hit, valid = _hits(index, shape[-1])
        return _nan_unless(valid[..., None], hit.astype(dtype))
    onehot = np.zeros(shape, dtype=dtype)
    onehot.reshape(-1, shape[-1])[np.arange(index.size), index.ravel()] = 1
    return onehot


def at_labels(rows_by_class, index):
    """rows_by_class[..., index]: each row's entry at its class."""
    if type(index) is not np.ndarray:
        hit, valid = _hits(index, rows_by_class.shape[-1])
        return _nan_unless(valid, np.where(hit, rows_by_class, 0).sum(axis=-1))
    flat = rows_by_class.reshape(-1, rows_by_class.shape[-1])
    return flat[np.arange(index.size), index.ravel()].reshape(index.shape)


def reduce_rows(rows, reduction):
    if reduction == "mean":
        return rows.sum() / builtins.max(rows.size, 1)   # methods: NumPy's np.mean costs ~3 us more
    if reduction == "sum":
        return rows.sum()
    if reduction == "none":
        return rows
    raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _row_cotangent(g, reduction, shape):
    """The cotangent of each row's loss, shaped to broadcast over the classes."""
    if reduction == "mean":
        return g / (math.prod(shape[:-1]) or 1)
    if reduction == "sum":
        return g
    return g[..., None]


def _rows_from_logits(z, y, reduction):
    """-sum(y * log_softmax(z)) per row: finite for any finite logits."""
    index = class_indices(y, z.shape, check=True)
    log_p = _log_softmax_forward(z, axis=-1)
    if index is not None:
        return reduce_rows(-at_labels(log_p, index), reduction)
    y = y.data if isinstance(y, Tensor) else _array(y)
    if type(log_p) is not np.ndarray or log_p.min() == -np.inf:   # a logit of -inf: 0 * log 0 = 0,
        # and no RuntimeWarning (on a GPU always: asking would cost a round trip)
        log_p = np.where(y == 0, 0, log_p)
    return reduce_rows(-(y * log_p).sum(axis=-1), reduction)


def _softmax_minus_labels(g, p, y, reduction):
    """rowcotangent * (p * sum(y) - y): the exact gradient of crossEntropy(softmax(z), y) in z,
    given p = softmax(z). No 1/p, so it is finite for any finite logits."""
    index = class_indices(y, p.shape)
    scale = _row_cotangent(g, reduction, p.shape)
    if index is not None and not isinstance(p, Tensor) and not isinstance(g, Tensor):
        if type(index) is not np.ndarray:
            hit, valid = _hits(index, p.shape[-1])
            return _nan_unless(valid[..., None], (p - hit) * scale)
        # arrays: subtract at the labels, in place. C order, so that the reshape below is a view
        # (p is a transposed view for (N, C, d...) logits; a copy would lose the subtraction).
        grad = np.multiply(p, scale, order="C")
        flat = grad.reshape(-1, p.shape[-1])
        flat[np.arange(index.size), index.ravel()] -= scale if np.ndim(scale) == 0 else scale.ravel()
        return grad
    y = _labels(y, p.shape, p.dtype, check=False)
    return scale * (p * y.sum(axis=-1, keepdims=True) - y)


def _cross_entropy_forward(p, y, logits=None, reduction="mean"):
    if np.ndim(p) == 0:
        raise ValueError("cross_entropy: p must have a class axis (at least 1-D), got a scalar")
    if logits is not None:
        return _rows_from_logits(logits, y, reduction)
    if type(p) is np.ndarray and p.size and not (p.min() >= -1e-3 and p.max() <= 1 + 1e-3):   # slack:
        # rounding (a float32 softmax's 1 + ulp) and central differences at 0 or 1
        raise ValueError(f"p must hold probabilities in [0, 1], got values in "
                         f"[{p.min():.4g}, {p.max():.4g}]; for logits (PyTorch's F.cross_entropy) use "
                         f"tt.softmax_cross_entropy(logits, y), tt.cross_entropy(tt.softmax(logits), y) "
                         f"or nn.CrossEntropyLoss()")
    y = _labels(y, np.shape(p), p.dtype)
    xlogy = scipy.special.xlogy(y, p) if type(p) is np.ndarray else backend.xlogy(y, p)
    return reduce_rows(-np.sum(xlogy, axis=-1), reduction)


def _ce_vjp_p(g, ans, p, y, logits, reduction):
    if logits is not None:
        return None                           # the gradient goes straight to the logits
    y = _labels(y, np.shape(p), p.dtype, check=False)
    return -_row_cotangent(g, reduction, np.shape(p)) * (y / (p + (y == 0)))


def _ce_log_p(p, logits):
    return np.log(p) if logits is None else _log_softmax(logits, axis=-1)


def _ce_vjp_y(g, ans, p, y, logits, reduction):
    return -_row_cotangent(g, reduction, np.shape(p)) * _ce_log_p(p, logits)


def ce_vjp_logits(g, ans, p, y, logits, reduction):
    return _softmax_minus_labels(g, p, y, reduction)   # p is softmax(logits) exactly


def _ce_jvp(tangent_of_rows):
    return lambda t, ans, p, y, logits, reduction: reduce_rows(
        np.sum(tangent_of_rows(t, p, y, logits), axis=-1), reduction)


def _ce_jvp_p(t, ans, p, y, logits, reduction):
    if logits is not None:
        return None                           # counted through the logits' tangent
    y = _labels(y, np.shape(p), p.dtype, check=False)
    return reduce_rows(-np.sum(t * y / (p + (y == 0)), axis=-1), reduction)


_ce_jvp_y = _ce_jvp(lambda t, p, y, logits: -t * _ce_log_p(p, logits))
_ce_jvp_logits = _ce_jvp(lambda t, p, y, logits: t * _softmax_minus_labels(1, p, y, "sum"))

_cross_entropy = defprim(
    _cross_entropy_forward, "crossEntropy", hidden_inputs=1,   # (p, y) shown; the logits hidden
    vjp=[_ce_vjp_p, _ce_vjp_y, ce_vjp_logits],
    jvp=[_ce_jvp_p, _ce_jvp_y, _ce_jvp_logits])


# Cross-entropy of softmax(logits) as one fused, stable primitive (nn.CrossEntropyLoss): the
# rules are crossEntropy's logits and label rules, with p = softmax(z) recomputed.
_softmax_cross_entropy = defprim(
    lambda z, y, reduction="mean": _rows_from_logits(z, y, reduction), "softmax_cross_entropy",
    vjp=[lambda g, ans, z, y, reduction: _softmax_minus_labels(g, _softmax(z, axis=-1), y, reduction),
         lambda g, ans, z, y, reduction: _ce_vjp_y(g, ans, z, y, z, reduction)],
    jvp=[lambda t, ans, z, y, reduction: _ce_jvp_logits(t, ans, _softmax(z, axis=-1), y, z, reduction),
         lambda t, ans, z, y, reduction: _ce_jvp_y(t, ans, z, y, z, reduction)])


@public(numpy=scipy.special.softmax, method=True)
def softmax(x, axis=-1):
    """exp(x) / sum(exp(x)) along `axis`, stable for any finite input.

    Examples
    --------
    >>> tt.softmax(tt.tensor([0.0, 0.0]))
    tensor([0.5, 0.5])
    >>> tt.softmax(tt.tensor([1e4, 0.0]))   # stable: no overflow
    tensor([1., 0.])
    """
    p = _softmax(x, axis=axis)
    if (type(p) is np.ndarray or isinstance(p, Tensor) and p._prim is None) and p.ndim and axis in (
            -1, p.ndim - 1):   # off the tape: remembered (see cross_entropy)
        _SOFTMAX_LOGITS[p] = x
    return p


# The logits of a softmax off the tape: softmax output -> its logits, for plain arrays and for
# Tensors computed under no_grad (or from inputs that need no gradient), so that
# cross_entropy(softmax(z), y) is computed from z there too: an evaluation loop's loss stays finite.
# (A recorded softmax output finds its logits on the tape.)
_SOFTMAX_LOGITS = IdentityWeakMap()


@public(numpy=scipy.special.log_softmax, method=True)
def log_softmax(x, axis=-1):
    """`log(softmax(x))` along `axis`, computed stably (as `scipy.special.log_softmax`).

    Examples
    --------
    >>> tt.log_softmax(tt.tensor([0.0, 0.0])).numpy().round(4)
    array([-0.6931, -0.6931])
    """
    return _log_softmax(x, axis=axis)


def _labels_like(y, p):
    """Label data (not a Tensor) in p's float dtype: float64 one-hot labels must not silently
    turn a float32 model's loss into float64. Integer class indices stay integers."""
    if isinstance(y, Tensor):
        recorder = None if tape.SHARED.quiet else tape.STATE.recorder
        if recorder is None or not recorder.passed_as_array(y):
            return y
        # tt.compile: an array argument is a Tensor inside f; cast as the array it is eagerly
        p_dtype = p.dtype
        if y.dtype.kind == "f" and p_dtype.kind == "f" and y.dtype != p_dtype:
            return y.astype(p_dtype)
        return y
    p = p.data if isinstance(p, Tensor) else _array(p)
    if type(y) is not np.ndarray or type(p) is not np.ndarray:   # lists, or arrays of a device
        y = backend.asarray(y, like=p, what="the labels")
    dtype = p.dtype
    return y.astype(dtype) if y.dtype.kind == "f" and dtype.kind == "f" and y.dtype != dtype else y


@public
def softmax_cross_entropy(logits, y, reduction="mean"):
    """cross_entropy(softmax(logits), y) as one fused primitive: stable for any finite logits.

    `y` holds integer class indices of shape logits.shape[:-1], or labels of logits' shape.

    Examples
    --------
    >>> loss = tt.softmax_cross_entropy(tt.tensor([[1e4, 0.0]], requires_grad=True), [1])
    >>> loss.item()   # finite for any finite logits
    10000.0
    """
    return _softmax_cross_entropy(logits, _labels_like(y, logits), reduction=reduction)


@public
def cross_entropy(p, y, reduction="mean"):
    """-sum(y * log p) per row; `p` holds probabilities along the last axis.

    When `p` is the output of `softmax` over its last axis, the loss and its gradient are
    computed from the logits (finite and exact for any finite logits); the tape still reads
    softmax, crossEntropy.

    Parameters
    ----------
    p : Tensor or array_like
        Probabilities along the last axis.
    y : array_like
        An array of p's shape (one-hot or soft labels), or integer class indices of shape
        ``p.shape[:-1]``.
    reduction : {"mean", "sum", "none"}
        The mean over rows, their sum, or the per-row losses.

    Returns
    -------
    Tensor

    Raises
    ------
    ValueError
        `p` is not probabilities (logits belong in `softmax_cross_entropy`).
    IndexError
        A class index outside [0, C).

    Examples
    --------
    >>> p = tt.softmax(tt.tensor([[0.0, 0.0]], requires_grad=True))
    >>> loss = tt.cross_entropy(p, [0])          # class indices, or one-hot rows of p's shape
    >>> round(loss.item(), 4)
    0.6931
    """
    logits = _softmax_logits(p)
    if logits is not None and isinstance(p, Tensor) and p._prim is _softmax:
        FUSED_INTO_LOSS[p] = True         # for retain_grad() afterwards, which p can no longer honour
    return _cross_entropy(p, _labels_like(y, p), logits, reduction=reduction)


FUSED_INTO_LOSS = IdentityWeakMap()   # the recorded softmax outputs a loss was computed around


def fused_into_loss(p):
    """True when a cross_entropy of the recorded softmax output `p` was computed from its logits:
    p then gets no gradient of its own (what Tensor.retain_grad asks)."""
    return p in FUSED_INTO_LOSS


def _softmax_logits(p):
    """The logits z when p = softmax(z) over the last axis still holds and nothing asks for p's own
    gradient (retain_grad, or p made a leaf): then the loss is computed from z. Otherwise None."""
    if type(p) is np.ndarray:
        z = _SOFTMAX_LOGITS.get(p)
        if z is None:
            return None
        z = _array(z)
        return z if np.array_equal(_softmax_forward(z, axis=-1), p) else None   # not changed in place
    if not isinstance(p, Tensor):
        return None
    if p._prim is _softmax:                 # recorded: fused unless p's gradient is wanted
        if p._params["axis"] not in (-1, p.ndim - 1):
            return None
        wanted, z = tape.RETAINED and tape.RETAINED.get(p), p._inputs[0]
    elif p._prim is None:                   # softmax computed off the tape, unless made a leaf since
        z = _SOFTMAX_LOGITS.get(p)
        if z is None:
            return None
        wanted = p.requires_grad
    else:
        return None
    if wanted or p._version >= 0 or isinstance(z, Tensor) and z._version > p._id:   # p or z changed in
        return None                                                                  # place since then
    return z


# The lecture's spelling.
crossEntropy = publish(cross_entropy, "crossEntropy")
