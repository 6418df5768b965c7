"""The primitives behind the layers: convolution, pooling, and the activations and losses that
need their own rule for stability. Each is declared once, with both rules, as in ops.py.

Layout as in PyTorch: images are (N, C, H, W), a convolution weight is (out, in, kh, kw).
Everything is vectorised over the batch and the pixels; the only Python loops run over the
kh * kw kernel offsets. Convolution: `sliding_window_view` (a strided view of every window at
once) and one `tensordot`; its adjoint scatters back with one slice addition per kernel offset.
Pooling: one strided slice of the input per kernel offset, each of the output's shape (a max
pool is the maximum of those slices, with no window view and no argmax).

Closure under differentiation: the VJP of conv2d is two more primitives (`conv2d_grad_input`,
`conv2d_grad_weight`) whose own rules are conv2d and each other (all three are bilinear), and
likewise each pool and its scatter. So the rules run on Tensors too, and hvp / grad of grad work
through a CNN.
"""

import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .. import backend, ops
from .. import ops_elementwise as ew
from ..ops import defprim
from ..state import STATE
from ..tensor import Tensor


def _pair(value, name):
    """An int or a pair of ints, as a pair of non-negative ints."""
    pair = (value, value) if isinstance(value, (int, np.integer)) else tuple(value)
    if len(pair) != 2 or not all(isinstance(v, (int, np.integer)) and v >= 0 for v in pair):
        raise ValueError(f"{name} must be a non-negative int or a pair of them, got {value!r}")
    return int(pair[0]), int(pair[1])


def _padded_nhwc(x, padding):
    """x (N, C, H, W) as a zero-padded (N, H + 2 ph, W + 2 pw, C) copy: channels innermost, so
    that the window rows below are copied in contiguous runs of C (3x faster than from NCHW)."""
    n, c, h, w = x.shape
    ph, pw = padding
    out = backend.namespace(x).zeros((n, h + 2 * ph, w + 2 * pw, c), dtype=x.dtype)
    out[:, ph:ph + h, pw:pw + w, :] = x.transpose(0, 2, 3, 1)
    return out


def _im2col(x, kernel, stride, padding):
    """Every kernel window of x as one row: (N * Ho * Wo, kh * kw * C), and (N, Ho, Wo)."""
    if x.ndim != 4:
        raise ValueError(f"expected (N, C, H, W) input, got shape {x.shape}")
    xp = _padded_nhwc(x, padding)
    if xp.shape[1] < kernel[0] or xp.shape[2] < kernel[1]:
        raise ValueError(f"the (padded) input {xp.shape[1:3]} is smaller than the kernel {kernel}")
    win = sliding_window_view(xp, kernel, axis=(1, 2))[:, ::stride[0], ::stride[1]]  # (N, Ho, Wo, C, kh, kw)
    n, ho, wo = win.shape[:3]
    return win.transpose(0, 1, 2, 4, 5, 3).reshape(n * ho * wo, -1), (n, ho, wo)


def _rows(g):
    """A cotangent (N, O, Ho, Wo) as rows (N * Ho * Wo, O)."""
    return g.transpose(0, 2, 3, 1).reshape(-1, g.shape[1])


# ----- convolution: three bilinear primitives, each the others' rules ----------------------------
def _conv2d_forward(x, w, b=None, stride=(1, 1), padding=(0, 0)):
    if w.ndim != 4 or x.ndim != 4 or x.shape[1] != w.shape[1]:
        raise ValueError(f"the input (N, C, H, W) {np.shape(x)} and the weight (out, C, kh, kw) "
                         f"{np.shape(w)} must agree on C")
    cols, (n, ho, wo) = _im2col(x, w.shape[2:], stride, padding)
    out = cols @ w.transpose(2, 3, 1, 0).reshape(cols.shape[1], -1)     # (N * Ho * Wo, out)
    if b is not None:
        out += b
    return out.reshape(n, ho, wo, -1).transpose(0, 3, 1, 2)          # a view: no copy


def _conv2d_grad_input_forward(g, w, shape, stride=(1, 1), padding=(0, 0)):
    """d<conv2d(x, w), g>/dx for x of `shape` (a transposed convolution): the window rows'
    cotangents, added back into the padded image one kernel offset at a time."""
    n, c, h, wd = shape
    o, _, kh, kw = w.shape
    ho, wo = g.shape[2:]
    cols = (_rows(g) @ w.transpose(0, 2, 3, 1).reshape(o, -1)).reshape(n, ho, wo, kh, kw, c)
    ph, pw = padding
    sh, sw = stride
    out = backend.namespace(cols).zeros((n, h + 2 * ph, wd + 2 * pw, c), dtype=cols.dtype)
    for i in range(kh):
        for j in range(kw):
            out[:, i:i + sh * (ho - 1) + 1:sh, j:j + sw * (wo - 1) + 1:sw] += cols[:, :, :, i, j]
    return out[:, ph:ph + h, pw:pw + wd].transpose(0, 3, 1, 2)


def _conv2d_grad_weight_forward(x, g, kernel, stride=(1, 1), padding=(0, 0)):
    """d<conv2d(x, w), g>/dw for w with kernel size `kernel`."""
    cols, _ = _im2col(x, kernel, stride, padding)
    dw = _rows(g).T @ cols                                            # (out, kh * kw * C)
    return dw.reshape(g.shape[1], kernel[0], kernel[1], x.shape[1]).transpose(0, 3, 1, 2)


def _bias_tangent(t, ans):
    return ops.broadcast_to(ops.reshape(t, (-1, 1, 1)), ans.shape)


conv2d_prim = defprim(
    _conv2d_forward, "conv2d", nargs=3,
    vjp=[lambda g, ans, x, w, b, stride, padding:
         conv2d_grad_input(g, w, shape=x.shape, stride=stride, padding=padding),
         lambda g, ans, x, w, b, stride, padding:
         conv2d_grad_weight(x, g, kernel=w.shape[2:], stride=stride, padding=padding),
         lambda g, ans, x, w, b, stride, padding: g.sum(axis=(0, 2, 3))],
    jvp=[lambda t, ans, x, w, b, stride, padding: conv2d_prim(t, w, None, stride=stride, padding=padding),
         lambda t, ans, x, w, b, stride, padding: conv2d_prim(x, t, None, stride=stride, padding=padding),
         lambda t, ans, x, w, b, stride, padding: _bias_tangent(t, ans)])

conv2d_grad_input = defprim(
    _conv2d_grad_input_forward, "conv2d_grad_input", nargs=2,
    vjp=[lambda u, ans, g, w, shape, stride, padding: conv2d_prim(u, w, None, stride=stride, padding=padding),
         lambda u, ans, g, w, shape, stride, padding:
         conv2d_grad_weight(u, g, kernel=w.shape[2:], stride=stride, padding=padding)],
    jvp=[lambda t, ans, g, w, shape, stride, padding:
         conv2d_grad_input(t, w, shape=shape, stride=stride, padding=padding),
         lambda t, ans, g, w, shape, stride, padding:
         conv2d_grad_input(g, t, shape=shape, stride=stride, padding=padding)])

conv2d_grad_weight = defprim(
    _conv2d_grad_weight_forward, "conv2d_grad_weight", nargs=2,
    vjp=[lambda u, ans, x, g, kernel, stride, padding:
         conv2d_grad_input(g, u, shape=x.shape, stride=stride, padding=padding),
         lambda u, ans, x, g, kernel, stride, padding:
         conv2d_prim(x, u, None, stride=stride, padding=padding)],
    jvp=[lambda t, ans, x, g, kernel, stride, padding:
         conv2d_grad_weight(t, g, kernel=kernel, stride=stride, padding=padding),
         lambda t, ans, x, g, kernel, stride, padding:
         conv2d_grad_weight(x, t, kernel=kernel, stride=stride, padding=padding)])


def conv2d(x, weight, bias=None, stride=1, padding=0):
    """2-D cross-correlation, as torch.nn.functional.conv2d: x (N, C, H, W), weight (out, C, kh, kw),
    bias (out,) or None -> (N, out, Ho, Wo) with Ho = (H + 2 * padding - kh) // stride + 1."""
    return conv2d_prim(x, weight, bias, stride=_pair(stride, "stride"), padding=_pair(padding, "padding"))


# ----- pooling ------------------------------------------------------------------------------------
# A pool is kh * kw strided slices of the input, one per kernel offset, each of the output's shape
# (N, C, Ho, Wo): the max (or mean) of the slices is the pool. No window view, no copy of windows.
def _offsets(shape, kernel, stride):
    """[(i, j, index)]: the slice of x feeding every window's entry (i, j), in row-major order."""
    if len(shape) != 4:
        raise ValueError(f"expected (N, C, H, W) input, got shape {tuple(shape)}")
    if shape[2] < kernel[0] or shape[3] < kernel[1]:
        raise ValueError(f"the input {tuple(shape[2:])} is smaller than the kernel {kernel}")
    ho, wo = (shape[2] - kernel[0]) // stride[0] + 1, (shape[3] - kernel[1]) // stride[1] + 1
    return [(i, j, (slice(None), slice(None), slice(i, i + stride[0] * (ho - 1) + 1, stride[0]),
                    slice(j, j + stride[1] * (wo - 1) + 1, stride[1])))
            for i in range(kernel[0]) for j in range(kernel[1])]


def _max_pool_forward(x, kernel, stride):
    slices = _offsets(x.shape, kernel, stride)
    out = x[slices[0][2]].copy()
    for _, _, index in slices[1:]:
        np.maximum(out, x[index], out=out)
    return out


def _first_maxima(x, ans, kernel, stride):
    """(kh * kw, N, C, Ho, Wo) booleans: which entry of each window gets the gradient, the first
    maximum in row-major order at ties (as PyTorch)."""
    x = x.data if isinstance(x, Tensor) else x
    ans = ans.data if isinstance(ans, Tensor) else ans
    slices = _offsets(x.shape, kernel, stride)
    xp = backend.namespace(x)
    hits = xp.empty((len(slices),) + ans.shape, dtype=bool)
    np.equal(x[slices[0][2]], ans, out=hits[0])
    taken = hits[0].copy()                          # windows whose maximum is already placed
    equal = xp.empty(ans.shape, dtype=bool)
    for k, (_, _, index) in enumerate(slices[1:], start=1):
        np.equal(x[index], ans, out=equal)
        np.greater(equal, taken, out=hits[k])       # equal and not taken, in one operation
        taken |= equal
    return hits


def _unpool_forward(g, hits, shape, kernel, stride):
    """Each window's cotangent to the entry `hits` marks (overlapping windows add up)."""
    out = backend.namespace(g).zeros(shape, dtype=g.dtype)
    disjoint = stride[0] >= kernel[0] and stride[1] >= kernel[1]
    for k, (_, _, index) in enumerate(_offsets(shape, kernel, stride)):
        if disjoint:                     # each input entry in one window: write, no temporary
            np.multiply(g, hits[k], out=out[index])
        else:
            out[index] += g * hits[k]
    return out


def _gather(t, hits, kernel, stride):
    """The adjoint of _unpool: each window's value at its marked entry (arrays or Tensors)."""
    total = None
    for k, (_, _, index) in enumerate(_offsets(t.shape, kernel, stride)):
        part = t[index] * hits[k]
        total = part if total is None else total + part
    return total


_unpool = defprim(_unpool_forward, "max_unpool2d", nargs=1,
                  vjp=[lambda u, ans, g, hits, shape, kernel, stride: _gather(u, hits, kernel, stride)],
                  jvp=[lambda t, ans, g, hits, shape, kernel, stride:
                       _unpool(t, hits=hits, shape=shape, kernel=kernel, stride=stride)])

max_pool2d_prim = defprim(
    _max_pool_forward, "max_pool2d", nargs=1,
    vjp=[lambda g, ans, x, kernel, stride: _unpool(
        g, hits=_first_maxima(x, ans, kernel, stride), shape=x.shape, kernel=kernel, stride=stride)],
    jvp=[lambda t, ans, x, kernel, stride: _gather(t, _first_maxima(x, ans, kernel, stride), kernel, stride)])


def _avg_pool_forward(x, kernel, stride):
    slices = _offsets(x.shape, kernel, stride)
    out = x[slices[0][2]].copy()
    for _, _, index in slices[1:]:
        out += x[index]
    out /= kernel[0] * kernel[1]
    return out


def _avg_unpool_forward(g, shape, kernel, stride):
    """The adjoint of avg_pool2d: each output's cotangent spread evenly over its window."""
    g = g / (kernel[0] * kernel[1])
    out = backend.namespace(g).zeros(shape, dtype=g.dtype)
    for _, _, index in _offsets(shape, kernel, stride):
        out[index] += g
    return out


_avg_unpool = defprim(_avg_unpool_forward, "avg_unpool2d", nargs=1,
                      vjp=[lambda u, ans, g, shape, kernel, stride:
                           avg_pool2d_prim(u, kernel=kernel, stride=stride)],
                      jvp=[lambda t, ans, g, shape, kernel, stride:
                           _avg_unpool(t, shape=shape, kernel=kernel, stride=stride)])

avg_pool2d_prim = defprim(
    _avg_pool_forward, "avg_pool2d", nargs=1,
    vjp=[lambda g, ans, x, kernel, stride: _avg_unpool(g, shape=x.shape, kernel=kernel, stride=stride)],
    jvp=[lambda t, ans, x, kernel, stride: avg_pool2d_prim(t, kernel=kernel, stride=stride)])


def _pool_args(kernel_size, stride):
    kernel = _pair(kernel_size, "kernel_size")
    stride = kernel if stride is None else _pair(stride, "stride")
    if 0 in kernel or 0 in stride:
        raise ValueError(f"kernel_size and stride must be positive, got {kernel} and {stride}")
    return kernel, stride


def max_pool2d(x, kernel_size, stride=None):
    """The maximum of each kernel window of (N, C, H, W); stride defaults to the kernel size.
    The gradient goes to the first maximum of a window (as PyTorch)."""
    kernel, stride = _pool_args(kernel_size, stride)
    return max_pool2d_prim(x, kernel=kernel, stride=stride)


def avg_pool2d(x, kernel_size, stride=None):
    """The mean of each kernel window of (N, C, H, W); stride defaults to the kernel size."""
    kernel, stride = _pool_args(kernel_size, stride)
    return avg_pool2d_prim(x, kernel=kernel, stride=stride)


# ----- embedding: rows by integer index ---------------------------------------------------------------
def _embedding_forward(weight, index):
    # The range check is part of the forward, so it runs on every call, compiled ones included
    # (a negative index would otherwise pick a row from the end without a word).
    if index.size and (index.min() < 0 or index.max() >= weight.shape[0]):
        raise IndexError(f"embedding: indices must lie in [0, {weight.shape[0]}), got "
                         f"{index.min()}..{index.max()}")
    return weight[index]


# getitem's rules: the VJP scatters (repeated indices add up), the JVP picks the same rows.
embedding_prim = defprim(_embedding_forward, "embedding", nargs=1,
                         vjp=[lambda g, ans, weight, index: ops._index_adjoint(g, index=index,
                                                                               shape=weight.shape)],
                         jvp=[lambda t, ans, weight, index: t[index]])


# ----- activations: the op table's rows (ops_elementwise.py), with PyTorch's functional names -----
gelu = ew.gelu                # x * Phi(x), or approximate="tanh"
leaky_relu = ew.leaky_relu    # the gradient at 0 is negative_slope, as PyTorch


def softplus(x, beta=1.0, threshold=20.0):
    """log(1 + exp(beta * x)) / beta, finite for any finite x; x itself where beta * x > threshold
    (PyTorch's nn.Softplus)."""
    smooth = ew.softplus(x, beta=beta)
    if not math.isfinite(threshold):
        return smooth
    linear = ops.on_values(_above, (x, beta, threshold), {},
                           _above(x.data if isinstance(x, Tensor) else backend.asarray(x), beta, threshold))
    if STATE.recorder is None and not linear.any():   # (tt.compile: the branch is per call)
        return smooth
    return ew.where(linear, x, smooth)


def _above(x, beta, threshold):
    """Where softplus is x itself: beta * x > threshold."""
    return x * beta > threshold


# ----- binary cross-entropy on probabilities ----------------------------------------------------------
@np.errstate(divide="ignore")
def _clamped_logs(p):
    """log(p) and log(1 - p), each clamped at -100 (PyTorch's BCELoss: finite at p = 0 and 1)."""
    return np.maximum(np.log(p), -100.0), np.maximum(np.log(1 - p), -100.0)


def _bce_forward(p, y):
    if type(p) is np.ndarray and p.size and not (p.min() >= 0 and p.max() <= 1):   # NaN too, as torch
        raise ValueError(f"BCELoss: all elements of the input should be between 0 and 1 (probabilities), "
                         f"got values in [{p.min()}, {p.max()}]; for logits use BCEWithLogitsLoss")
    log_p, log_q = _clamped_logs(p)
    return -(y * log_p + (1 - y) * log_q)


def _bce_slope_p(p, y):   # PyTorch's: (p - y) / max(p (1 - p), 1e-12)
    return (p - y) / np.maximum(p * (1 - p), 1e-12)


def _bce_slope_y(p):
    log_p, log_q = _clamped_logs(p)
    return log_q - log_p


binary_cross_entropy_prim = defprim(
    _bce_forward, "binary_cross_entropy",
    vjp=[lambda g, ans, p, y: g * _bce_slope_p(p, y), lambda g, ans, p, y: g * _bce_slope_y(p)],
    jvp=[lambda t, ans, p, y: t * _bce_slope_p(p, y), lambda t, ans, p, y: t * _bce_slope_y(p)])


# ----- PyTorch's functional spellings of the losses and a few layers --------------------------------
def relu(x):
    return ops.relu(x)


def softmax(x, dim=-1):
    return ops.softmax(x, axis=dim)


def log_softmax(x, dim=-1):
    return ops.log_softmax(x, axis=dim)


def dropout(x, p=0.5, training=True, rng=None):
    """x * mask / (1 - p) with a fresh mask from `rng` when training (see nn.Dropout)."""
    from .layers import Dropout
    return Dropout(p, rng=rng).train(training)(x)


def _loss(name, *args, **options):
    from . import losses  # imported here: losses imports this module

    def call(prediction, target):
        return getattr(losses, name)(*args, **options)(prediction, target)
    return call


def cross_entropy(logits, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    return _loss("CrossEntropyLoss", weight=weight, ignore_index=ignore_index, reduction=reduction,
                 label_smoothing=label_smoothing)(logits, target)


def nll_loss(log_p, target, weight=None, ignore_index=-100, reduction="mean"):
    return _loss("NLLLoss", weight=weight, ignore_index=ignore_index, reduction=reduction)(log_p, target)


def binary_cross_entropy_with_logits(logits, target, weight=None, reduction="mean", pos_weight=None):
    loss = _loss("BCEWithLogitsLoss", weight=weight, reduction=reduction, pos_weight=pos_weight)
    return loss(logits, target)


def binary_cross_entropy(p, target, weight=None, reduction="mean"):
    return _loss("BCELoss", weight=weight, reduction=reduction)(p, target)


def mse_loss(prediction, target, reduction="mean"):
    return _loss("MSELoss", reduction=reduction)(prediction, target)


def l1_loss(prediction, target, reduction="mean"):
    return _loss("L1Loss", reduction=reduction)(prediction, target)


def huber_loss(prediction, target, reduction="mean", delta=1.0):
    return _loss("HuberLoss", reduction=reduction, delta=delta)(prediction, target)
