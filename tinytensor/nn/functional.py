"""The primitives behind the layers: convolution, pooling, and the activations and losses that
need their own rule for stability. Each is declared once, with both rules, as in ops/core.py.
And the math behind nn's Modules, as in PyTorch: the losses (losses.py's Modules call
`mse_loss`, `cross_entropy`, ... with their options) and dropout's mask (nn.Dropout). This
module imports neither layers.py nor losses.py: they import it.

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
from numpy.lib.stride_tricks import as_strided, sliding_window_view

from .. import backend, draws, ops
from ..ops import elementwise as ew
from ..ops.core import _index_adjoint, _matmul_forward, _matmul_vjp_b
from ..ops.softmax_xent import check_class_range
from ..ops.table import _swap_last, defprim, on_values
from ..rng import generator
from ..state import SHARED, STATE, constant_read
from ..tensor import Tensor
from ..torch_interop import host_array

__all__ = [   # the public names: the API reference lists these (docs/_ext/tt_api.py)
    "conv2d", "max_pool2d", "avg_pool2d", "softplus", "gelu", "leaky_relu", "linear", "relu",
    "softmax", "log_softmax", "dropout", "mse_loss", "l1_loss",
    "huber_loss", "smooth_l1_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits",
    "cross_entropy", "nll_loss", "kl_div",
    # PyTorch's, the second step (issue 31)
    "conv1d", "conv_transpose1d", "conv_transpose2d", "max_unpool2d", "layer_norm", "group_norm",
    "instance_norm", "rms_norm", "normalize", "interpolate", "adaptive_avg_pool1d", "adaptive_avg_pool2d",
    "adaptive_max_pool2d", "dropout2d", "silu", "mish", "elu", "prelu", "one_hot", "pad", "embedding",
]


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


def _spread(kernel, dilation):
    """The extent of a kernel whose taps are `dilation` apart: (k - 1) * d + 1 per axis."""
    return ((kernel[0] - 1) * dilation[0] + 1, (kernel[1] - 1) * dilation[1] + 1)


def _im2col(x, kernel, stride, padding, dilation=(1, 1)):
    """Every kernel window of x as one row: (N * Ho * Wo, kh * kw * C), and (N, Ho, Wo)."""
    if x.ndim != 4:
        raise ValueError(f"expected (N, C, H, W) input, got shape {x.shape}")
    xp = _padded_nhwc(x, padding)
    extent = _spread(kernel, dilation)
    if xp.shape[1] < extent[0] or xp.shape[2] < extent[1]:
        dilated = "" if extent == tuple(kernel) else f" (kernel {tuple(kernel)} dilated by {dilation})"
        raise ValueError(f"the (padded) input {xp.shape[1:3]} is smaller than the kernel {extent}{dilated}")
    win = _windows(xp, kernel, stride, dilation, extent)     # (N, Ho, Wo, C, kh, kw)
    n, ho, wo, c = win.shape[:4]
    if c < 4 and type(xp) is np.ndarray:
        # Few channels (an image's first layer): one copy per kernel offset, in runs of Wo * C,
        # instead of one copy of all windows in runs of C (bench_cnn's first conv, C = 1, batch
        # 128: 0.22 -> 0.12 ms, 2-core EPYC, loaded). From 4 channels on the single copy wins.
        cols = np.empty((n, ho, wo) + tuple(kernel) + (c,), dtype=xp.dtype)
        for i in range(kernel[0]):
            for j in range(kernel[1]):
                cols[:, :, :, i, j] = win[..., i, j]
        return cols.reshape(n * ho * wo, -1), (n, ho, wo)
    return win.transpose(0, 1, 2, 4, 5, 3).reshape(n * ho * wo, -1), (n, ho, wo)


def _windows(xp, kernel, stride, dilation, extent):
    """Every (dilated) kernel window of the padded NHWC image xp, strided: a view (N, Ho, Wo, C, kh,
    kw). For NumPy arrays one as_strided call: sliding_window_view's checks and its slicings cost
    tens of microseconds a call (bench_cnn's step at batch 32: 1.30 -> 1.22 ms CPU time, medians of
    3 alternated runs); other libraries through sliding_window_view."""
    if type(xp) is not np.ndarray:
        win = sliding_window_view(xp, extent, axis=(1, 2))[:, ::stride[0], ::stride[1]]
        return win if extent == tuple(kernel) else win[..., ::dilation[0], ::dilation[1]]
    n, h, w, c = xp.shape
    sn, sh, sw, sc = xp.strides
    ho, wo = (h - extent[0]) // stride[0] + 1, (w - extent[1]) // stride[1] + 1
    return as_strided(xp, (n, ho, wo, c, kernel[0], kernel[1]),
                      (sn, sh * stride[0], sw * stride[1], sc, sh * dilation[0], sw * dilation[1]),
                      writeable=False)


def _rows(g):
    """A cotangent (N, O, Ho, Wo) as rows (N * Ho * Wo, O)."""
    return g.transpose(0, 2, 3, 1).reshape(-1, g.shape[1])


# ----- convolution: three bilinear primitives, each the others' rules ----------------------------
def _conv2d_forward(x, w, b=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1)):
    if w.ndim != 4 or x.ndim != 4 or x.shape[1] != w.shape[1]:
        raise ValueError(f"the input (N, C, H, W) {np.shape(x)} and the weight (out, C, kh, kw) "
                         f"{np.shape(w)} must agree on C")
    cols, (n, ho, wo) = _im2col(x, w.shape[2:], stride, padding, dilation)
    out = cols @ w.transpose(2, 3, 1, 0).reshape(cols.shape[1], -1)     # (N * Ho * Wo, out)
    if b is not None:
        out += b
    return out.reshape(n, ho, wo, -1).transpose(0, 3, 1, 2)          # a view: no copy


def _conv2d_grad_input_forward(g, w, shape, stride=(1, 1), padding=(0, 0), dilation=(1, 1)):
    """d<conv2d(x, w), g>/dx for x of `shape` (a transposed convolution): the window rows'
    cotangents, added back into the padded image one kernel offset at a time. The rows of offset
    (i, j) come from their own product rows @ w[:, :, i, j] (one matmul batched over the offsets),
    so each is a contiguous (N, Ho, Wo, C) block and each addition runs over whole rows of Wo * C
    values; cut out of one (N * Ho * Wo, kh * kw * C) product they were runs of C (bench_cnn's
    conv2 at batch 128: 0.66 -> 0.46 ms, 2-core EPYC, loaded)."""
    n, c, h, wd = shape
    o, _, kh, kw = w.shape
    ho, wo = g.shape[2:]
    blocks = (_rows(g) @ w.transpose(2, 3, 0, 1).reshape(kh * kw, o, c)).reshape(kh, kw, n, ho, wo, c)
    ph, pw = padding
    sh, sw = stride
    dh, dw = dilation
    out = backend.namespace(blocks).zeros((n, h + 2 * ph, wd + 2 * pw, c), dtype=blocks.dtype)
    for i in range(kh):
        for j in range(kw):
            rows = slice(i * dh, i * dh + sh * (ho - 1) + 1, sh)
            out[:, rows, j * dw:j * dw + sw * (wo - 1) + 1:sw] += blocks[i, j]
    return out[:, ph:ph + h, pw:pw + wd].transpose(0, 3, 1, 2)


def _conv2d_grad_weight_forward(x, g, kernel, stride=(1, 1), padding=(0, 0), dilation=(1, 1)):
    """d<conv2d(x, w), g>/dw for w with kernel size `kernel`."""
    cols, _ = _im2col(x, kernel, stride, padding, dilation)
    rows = _rows(g)
    if rows.shape[0] >= 4096 and rows.shape[1] * cols.shape[1] <= 1024 and isinstance(rows, np.ndarray):
        # A long, thin product (an image's first layer: 8192 rows of 16 outputs by 9 taps) runs at
        # a fifth of BLAS's speed in one call; as 8 row blocks summed, 2x faster (75 -> 33 us).
        k = rows.shape[0] // 8 * 8
        dw = np.matmul(rows[:k].reshape(8, -1, rows.shape[1]).transpose(0, 2, 1),
                       cols[:k].reshape(8, -1, cols.shape[1])).sum(axis=0)
        if k < rows.shape[0]:
            dw += rows[k:].T @ cols[k:]
    else:
        dw = rows.T @ cols                                            # (out, kh * kw * C)
    return dw.reshape(g.shape[1], kernel[0], kernel[1], x.shape[1]).transpose(0, 3, 1, 2)


def _bias_gradient(g):
    """g summed over all but the channel axis. A convolution's cotangent is mostly channels-last
    in memory, and NumPy sums over the outer axes (0, 2, 3) of that in runs of C (168 us for
    (128, 16, 8, 8) float32); as ones @ rows it is one BLAS call (8 us)."""
    if isinstance(g, np.ndarray) and g.ndim == 4 and g.strides[1] == g.itemsize and g.shape[1] > 1:
        rows = _rows(g)
        return np.ones(rows.shape[0], dtype=g.dtype) @ rows
    return g.sum(axis=(0, 2, 3))


def _bias_tangent(t, ans):
    return ops.broadcast_to(ops.reshape(t, (-1, 1, 1)), ans.shape)


# The static parameters (stride, padding, dilation) pass through every rule unchanged (**p).
conv2d_prim = defprim(
    _conv2d_forward, "conv2d", nargs=3,
    vjp=[lambda g, ans, x, w, b, **p: conv2d_grad_input(g, w, shape=x.shape, **p),
         lambda g, ans, x, w, b, **p: conv2d_grad_weight(x, g, kernel=w.shape[2:], **p),
         lambda g, ans, x, w, b, **p: _bias_gradient(g)],
    jvp=[lambda t, ans, x, w, b, **p: conv2d_prim(t, w, None, **p),
         lambda t, ans, x, w, b, **p: conv2d_prim(x, t, None, **p),
         lambda t, ans, x, w, b, **p: _bias_tangent(t, ans)])

conv2d_grad_input = defprim(
    _conv2d_grad_input_forward, "conv2d_grad_input", nargs=2,
    vjp=[lambda u, ans, g, w, shape, **p: conv2d_prim(u, w, None, **p),
         lambda u, ans, g, w, shape, **p: conv2d_grad_weight(u, g, kernel=w.shape[2:], **p)],
    jvp=[lambda t, ans, g, w, shape, **p: conv2d_grad_input(t, w, shape=shape, **p),
         lambda t, ans, g, w, shape, **p: conv2d_grad_input(g, t, shape=shape, **p)])

conv2d_grad_weight = defprim(
    _conv2d_grad_weight_forward, "conv2d_grad_weight", nargs=2,
    vjp=[lambda u, ans, x, g, kernel, **p: conv2d_grad_input(g, u, shape=x.shape, **p),
         lambda u, ans, x, g, kernel, **p: conv2d_prim(x, u, None, **p)],
    jvp=[lambda t, ans, x, g, kernel, **p: conv2d_grad_weight(t, g, kernel=kernel, **p),
         lambda t, ans, x, g, kernel, **p: conv2d_grad_weight(x, t, kernel=kernel, **p)])


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D cross-correlation, as torch.nn.functional.conv2d: x (N, C, H, W), weight
    (out, C / groups, kh, kw), bias (out,) or None -> (N, out, Ho, Wo) with
    Ho = (H + 2 * padding - dilation * (kh - 1) - 1) // stride + 1. `dilation` spaces the kernel's
    taps; `groups` splits the channels into independent convolutions (one per group, joined).

    Examples
    --------
    >>> F = tt.nn.functional
    >>> x = tt.ones((1, 1, 4, 4))
    >>> w = tt.ones((2, 1, 3, 3))           # two 3x3 filters
    >>> F.conv2d(x, w).shape
    (1, 2, 2, 2)
    >>> F.conv2d(x, w, padding=1)[0, 0].numpy()   # 9 taps inside, fewer at the zero border
    array([[4., 6., 6., 4.],
           [6., 9., 9., 6.],
           [6., 9., 9., 6.],
           [4., 6., 6., 4.]])
    """
    params = dict(stride=_pair(stride, "stride"), padding=_pair(padding, "padding"))
    dilation = _pair(dilation, "dilation")
    if 0 in dilation:
        raise ValueError(f"conv2d: dilation must be positive, got {dilation}")
    if dilation != (1, 1):
        params["dilation"] = dilation
    groups = int(groups)
    if groups == 1:
        return conv2d_prim(x, weight, bias, **params)
    c, o = np.shape(x.data if isinstance(x, Tensor) else x)[-3], np.shape(weight)[0]
    if groups < 1 or c % groups or o % groups or np.shape(weight)[1] * groups != c:
        raise ValueError(f"conv2d: groups={groups} must divide the input channels ({c}) and the "
                         f"output channels ({o}), with a weight of shape (out, in / groups, kh, kw); "
                         f"got weight {tuple(np.shape(weight))}")
    ci, co = c // groups, o // groups
    parts = [conv2d_prim(x[:, k * ci:(k + 1) * ci], weight[k * co:(k + 1) * co],
                         None if bias is None else bias[k * co:(k + 1) * co], **params)
             for k in range(groups)]
    return ops.concatenate(parts, axis=1)


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


# The pools and their adjoints keep their input's memory layout: a convolution's output is a
# channels-last array seen as (N, C, H, W) (see _conv2d_forward), and a C-order result would make
# every later elementwise call (the next pool's slices, a ReLU's rule) mix two layouts, which
# NumPy iterates element by element (bench_cnn at batch 128: ~0.4 ms of a 4 ms step).
def _max_pool_forward(x, kernel, stride):
    slices = _offsets(x.shape, kernel, stride)
    if len(slices) == 1:
        return x[slices[0][2]].copy()
    out = np.maximum(x[slices[0][2]], x[slices[1][2]])     # a fresh array in x's layout
    for _, _, index in slices[2:]:
        np.maximum(out, x[index], out=out)
    return out


def _stacked_empty(count, like, dtype):
    """An empty (count,) + like.shape array whose last axes are laid out in memory as `like`'s."""
    if type(like) is not np.ndarray:
        return backend.namespace(like).empty((count,) + like.shape, dtype=dtype)
    order = sorted(range(like.ndim), key=lambda axis: -abs(like.strides[axis]))   # outermost first
    out = np.empty((count,) + tuple(like.shape[axis] for axis in order), dtype=dtype)
    return out.transpose((0,) + tuple(1 + order.index(axis) for axis in range(like.ndim)))


def _first_maxima(x, ans, kernel, stride):
    """(kh * kw, N, C, Ho, Wo) booleans: which entry of each window gets the gradient, the first
    maximum in row-major order at ties (as PyTorch)."""
    x = x.data if isinstance(x, Tensor) else x
    ans = ans.data if isinstance(ans, Tensor) else ans
    slices = _offsets(x.shape, kernel, stride)
    hits = _stacked_empty(len(slices), ans, bool)
    np.equal(x[slices[0][2]], ans, out=hits[0])
    taken = np.copy(hits[0])                        # windows whose maximum is already placed
    equal = np.empty_like(ans, dtype=bool)
    for k, (_, _, index) in enumerate(slices[1:], start=1):
        np.equal(x[index], ans, out=equal)
        np.greater(equal, taken, out=hits[k])       # equal and not taken, in one operation
        taken |= equal
    return hits


def _unpool_forward(g, hits, shape, kernel, stride):
    """Each window's cotangent to the entry `hits` marks (overlapping windows add up), in g's
    layout. (Channels last always, or hits's layout, made a compiled BatchNorm CNN round
    differently from eager code in tests/compile/test_compile_round6.py: kept as g's.)"""
    out = np.zeros_like(g, shape=shape)
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

def _hits(x, ans, kernel, stride):
    """_first_maxima in a rule: on Tensors (a rule applied at a higher order, tt.hessian, hvp),
    computed on their values through on_values, so that tt.compile computes it on every call."""
    hits = _first_maxima(x, ans, kernel, stride)
    if isinstance(x, Tensor) or isinstance(ans, Tensor):
        hits = on_values(_first_maxima, (x, ans, kernel, stride), {}, hits, "max_pool2d_hits")
    return hits


max_pool2d_prim = defprim(
    _max_pool_forward, "max_pool2d", nargs=1,
    vjp=[lambda g, ans, x, kernel, stride: _unpool(
        g, hits=_hits(x, ans, kernel, stride), shape=x.shape, kernel=kernel, stride=stride)],
    jvp=[lambda t, ans, x, kernel, stride: _gather(t, _hits(x, ans, kernel, stride), kernel, stride)])


def _avg_pool_forward(x, kernel, stride):
    slices = _offsets(x.shape, kernel, stride)
    out = np.copy(x[slices[0][2]])                          # in x's layout
    for _, _, index in slices[1:]:
        out += x[index]
    out /= kernel[0] * kernel[1]
    return out


def _avg_unpool_forward(g, shape, kernel, stride):
    """The adjoint of avg_pool2d: each output's cotangent spread evenly over its window."""
    g = g / (kernel[0] * kernel[1])
    out = np.zeros_like(g, shape=shape)                    # in g's layout
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


def _pool_borders(shape, kernel, stride, padding, ceil_mode, name):
    """PyTorch's pooled size: floor (or ceil) of (n + 2p - k) / s, plus one; with ceil_mode the
    last window must start inside the input or its left padding. Returns the zeros to add after
    the right padding so that every window fits: (extra rows, extra columns)."""
    if len(shape) != 4:
        raise ValueError(f"{name}: expected (N, C, H, W) input, got shape {tuple(shape)}")
    extra = []
    for n, k, s, p in zip(shape[2:], kernel, stride, padding):
        if p > k // 2:
            raise ValueError(f"{name}: padding should be at most half of the kernel size, got padding "
                             f"{padding} for kernel {kernel}")
        size = (n + 2 * p - k + (s - 1 if ceil_mode else 0)) // s + 1
        if ceil_mode and (size - 1) * s >= n + p:
            size -= 1
        if size < 1:
            raise ValueError(f"{name}: the (padded) input {tuple(shape[2:])} is smaller than the kernel "
                             f"{kernel}")
        extra.append(max(0, (size - 1) * s + k - (n + 2 * p)))
    return extra


def _padded(x, padding, extra, value):
    widths = ((0, 0), (0, 0), (padding[0], padding[0] + extra[0]), (padding[1], padding[1] + extra[1]))
    return ops.PUBLIC["pad"](x, widths, constant_values=value)


def max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """The maximum of each kernel window of (N, C, H, W); stride defaults to the kernel size.
    The gradient goes to the first maximum of a window (as PyTorch). `padding` (at most half the
    kernel) adds -inf borders; `ceil_mode` rounds the output size up, as PyTorch's. With
    return_indices, also each maximum's flat index into its (H, W) plane (int64, as PyTorch's,
    for max_unpool2d).

    Examples
    --------
    >>> x = tt.tensor(np.arange(16.0).reshape(1, 1, 4, 4))
    >>> tt.nn.functional.max_pool2d(x, 2)
    tensor([[[[ 5.,  7.],
              [13., 15.]]]])
    """
    if dilation not in (1, (1, 1)):
        raise ValueError("max_pool2d: dilation is not supported (dilation=1)")
    kernel, stride = _pool_args(kernel_size, stride)
    padding = _pair(padding, "padding")
    if padding == (0, 0) and not ceil_mode:
        out = max_pool2d_prim(x, kernel=kernel, stride=stride)
    else:
        extra = _pool_borders(np.shape(x.data if isinstance(x, Tensor) else x), kernel, stride, padding,
                              ceil_mode, "max_pool2d")
        out = max_pool2d_prim(_padded(x, padding, extra, -np.inf), kernel=kernel, stride=stride)
    if not return_indices:
        return out
    size = _shape_of(out)[2:]
    index = _max_pool_indices(x, kernel, stride, padding, size)
    return out, Tensor(on_values(_max_pool_indices, (x, kernel, stride, padding, size), {}, index,
                                 "max_pool2d_indices"))


def _max_pool_indices(x, kernel, stride, padding, size):
    """The flat (H, W) index of each window's first maximum (NaN counts as the maximum, as
    PyTorch's); windows as max_pool2d's, `size` its output's (Ho, Wo)."""
    x = backend.to_host(x.data if isinstance(x, Tensor) else backend.asarray(x))
    (kh, kw), (sh, sw), (ph, pw), (ho, wo) = kernel, stride, padding, size
    h, w = x.shape[2:]
    rows, cols = (ho - 1) * sh + kh, (wo - 1) * sw + kw
    xp = np.full(x.shape[:2] + (max(rows, h + 2 * ph), max(cols, w + 2 * pw)), -np.inf, x.dtype)
    xp[:, :, ph:ph + h, pw:pw + w] = x
    win = sliding_window_view(xp, (kh, kw), axis=(2, 3))[:, :, ::sh, ::sw][:, :, :ho, :wo]
    local = win.reshape(win.shape[:4] + (-1,)).argmax(-1)
    a, b = np.divmod(local, kw)
    ys = np.arange(ho)[:, None] * sh - ph + a
    xs = np.arange(wo)[None, :] * sw - pw + b
    return (ys * w + xs).astype(np.int64)


def _rows_and_columns(indices, size):
    idx = indices.data if isinstance(indices, Tensor) else np.asarray(indices)
    return np.stack([idx // size[1], idx % size[1]])


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """As torch.nn.functional.max_unpool2d: each value of (N, C, H, W) input put back at its flat
    index (from max_pool2d(..., return_indices=True)) in zeros of (N, C, Ho, Wo), Ho = (H - 1)
    stride - 2 padding + kernel (or output_size). On the tape: the gradient picks those entries.

    Examples
    --------
    >>> F = tt.nn.functional
    >>> x = tt.tensor([[[[1.0, 5.0], [3.0, 2.0]]]])
    >>> pooled, idx = F.max_pool2d(x, 2, return_indices=True)
    >>> idx
    tensor([[[[1]]]], dtype=int64)
    >>> F.max_unpool2d(pooled, idx, 2)
    tensor([[[[0., 5.],
              [0., 0.]]]])
    """
    name = "max_unpool2d"
    kernel, stride = _pool_args(kernel_size, stride)
    padding = _pair(padding, "padding")
    shape = _shape_of(input)
    if len(shape) != 4:
        raise ValueError(f"{name}: expected (N, C, H, W) input, got shape {shape}")
    if output_size is None:
        size = tuple((n - 1) * s - 2 * p + k for n, s, p, k in zip(shape[2:], stride, padding, kernel))
    else:
        size = tuple(int(n) for n in tuple(output_size)[-2:])
    idx = host_array(indices)
    idx = idx.data if isinstance(idx, Tensor) else backend.asarray(idx)
    if idx.dtype.kind not in "iu" or tuple(idx.shape) != shape:
        raise ValueError(f"{name}: indices must be integers of the input's shape {shape} (from "
                         f"max_pool2d(..., return_indices=True)), got {idx.dtype} {tuple(idx.shape)}")
    if idx.size and (idx.min() < 0 or idx.max() >= size[0] * size[1]):
        raise ValueError(f"{name}: indices must lie in [0, {size[0] * size[1]}) for the output size {size}, "
                         f"got {int(idx.min())}..{int(idx.max())}")
    n, c = np.ogrid[:shape[0], :shape[1]]
    # the rows and columns through on_values: tt.compile recomputes them from each call's indices
    rc = on_values(_rows_and_columns, (indices, size), {}, _rows_and_columns(idx, size), "max_unpool2d")
    index = (n[..., None, None], c[..., None, None], rc[0], rc[1])
    # Written, not added: overlapping windows may name one position twice (with the same value).
    # The later duplicates add input - input = 0, yet each gets the gradient at its position, as
    # PyTorch's backward (a gather): input - detach(input * later).
    later = on_values(_later_duplicates, (indices, size), {}, _later_duplicates(idx, size), "max_unpool2d")
    if later.any():
        x = input if isinstance(input, Tensor) else Tensor(backend.asarray(input))
        input = x - (x * backend.like(later.astype(x.dtype), x.data)).detach()
    return _index_adjoint(input, index=index, shape=shape[:2] + size)


def _later_duplicates(idx, size):
    """True where a flat index repeats an earlier one of the same (n, c) plane."""
    idx = backend.to_host(idx.data if isinstance(idx, Tensor) else backend.asarray(idx))
    planes = np.arange(idx.shape[0] * idx.shape[1]).reshape(idx.shape[:2] + (1, 1))
    keys = (planes * (size[0] * size[1]) + idx).ravel()
    later = np.ones(keys.size, bool)
    later[np.unique(keys, return_index=True)[1]] = False
    return later.reshape(idx.shape)


def avg_pool2d(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """The mean of each kernel window of (N, C, H, W); stride defaults to the kernel size.
    `padding` adds zero borders, counted in the mean unless count_include_pad=False; with
    ceil_mode the windows that run past the (padded) input divide by the part inside, as PyTorch's.
    `divisor_override` divides every window's sum by that number instead.

    Examples
    --------
    >>> x = tt.tensor(np.arange(16.0).reshape(1, 1, 4, 4))
    >>> tt.nn.functional.avg_pool2d(x, 2)
    tensor([[[[ 2.5,  4.5],
              [10.5, 12.5]]]])
    """
    kernel, stride = _pool_args(kernel_size, stride)
    padding = _pair(padding, "padding")
    area = kernel[0] * kernel[1]
    if padding == (0, 0) and not ceil_mode and divisor_override is None:
        return avg_pool2d_prim(x, kernel=kernel, stride=stride)
    shape = np.shape(x.data if isinstance(x, Tensor) else x)
    extra = _pool_borders(shape, kernel, stride, padding, ceil_mode, "avg_pool2d")
    mean = avg_pool2d_prim(_padded(x, padding, extra, 0), kernel=kernel, stride=stride)
    if divisor_override is not None:
        if not divisor_override > 0:
            raise ValueError(f"avg_pool2d: divisor_override must be positive, got {divisor_override}")
        return mean * (area / float(divisor_override))
    h, w = shape[2:]
    inside = np.zeros((1, 1, h + 2 * padding[0] + extra[0], w + 2 * padding[1] + extra[1]))
    if count_include_pad:
        inside[:, :, :h + 2 * padding[0], :w + 2 * padding[1]] = 1
    else:
        inside[:, :, padding[0]:padding[0] + h, padding[1]:padding[1] + w] = 1
    counts = _avg_pool_forward(inside, kernel, stride) * area
    data = x.data if isinstance(x, Tensor) else x
    return mean * backend.like(area / counts, data, data.dtype)     # on x's device


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


# ----- activations: the op table's rows (ops/elementwise.py), with PyTorch's functional names -----
gelu = ew.gelu                # x * Phi(x), or approximate="tanh"
leaky_relu = ew.leaky_relu    # the gradient at 0 is negative_slope, as PyTorch


def softplus(x, beta=1.0, threshold=20.0):
    """log(1 + exp(beta * x)) / beta, finite for any finite x; x itself where beta * x > threshold
    (PyTorch's nn.Softplus).

    Examples
    --------
    >>> F = tt.nn.functional
    >>> F.softplus(tt.tensor(0.0))          # log 2
    tensor(0.69314718)
    >>> F.softplus(tt.tensor(1000.0))       # no overflow
    tensor(1000.)
    >>> F.softplus(tt.tensor(1.0), beta=10.0)   # nearer relu as beta grows
    tensor(1.00000454)
    """
    smooth = ew.softplus(x, beta=beta)
    if not math.isfinite(threshold):
        return smooth
    linear = ops.on_values(_above, (x, beta, threshold), {},
                           _above(x.data if isinstance(x, Tensor) else backend.asarray(x), beta, threshold))
    if STATE.recorder is None and not STATE.batch and not linear.any():   # (tt.compile, tt.vmap:
        # the branch is per call, per example)
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


# ----- linear, in PyTorch's layout: weight (out_features, in_features) ---------------------------------
def _linear_forward(x, weight, bias):
    out = _matmul_forward(x, weight.T)
    out += bias            # in place on the fresh product
    return out


def _linear_t_vjp_weight(g, ans, x, w, b):
    """d weight = g^T x over all batch rows, computed as (out, in) directly: C-ordered like the
    weight (the transpose of x^T g would be Fortran-ordered, and every in-place optimizer update
    would then walk the weight's memory across the grain, 5-7x slower)."""
    if w.ndim == 2 and g.ndim >= 1 and x.ndim >= 1:
        return g.reshape(-1, g.shape[-1]).T @ x.reshape(-1, x.shape[-1])
    return _swap_last(_matmul_vjp_b(g, ans, x, w))


# x @ weight.T + bias as one tape entry (nn.Linear); the rules are matmul's with the weight's
# transpose, the bias gradient is g itself (summed over the batch axes by the engine).
linear_prim = defprim(
    _linear_forward, "linear_t",
    vjp=[lambda g, ans, x, w, b: _matmul_forward(g, w),
         _linear_t_vjp_weight,
         lambda g, ans, x, w, b: g],
    jvp=[lambda t, ans, x, w, b: t @ _swap_last(w), lambda t, ans, x, w, b: x @ _swap_last(t),
         lambda t, ans, x, w, b: t])


def linear(x, weight, bias=None):
    """PyTorch's F.linear: x @ weight.T + bias, weight of shape (out_features, in_features).
    (`tt.linear(x, W, b)` keeps the lecture's x @ W + b, W of shape (in, out).)

    Examples
    --------
    >>> x = tt.tensor([[1.0, 2.0]])
    >>> weight = tt.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 2.0]])   # (out_features, in_features)
    >>> tt.nn.functional.linear(x, weight, tt.tensor([0.0, 0.0, 1.0]))
    tensor([[1., 3., 5.]])
    """
    shape_x, shape_w = np.shape(x.data if isinstance(x, Tensor) else x), np.shape(
        weight.data if isinstance(weight, Tensor) else weight)
    if len(shape_w) != 2 or not shape_x or shape_x[-1] != shape_w[1]:
        raise ValueError(f"linear: x of shape {tuple(shape_x)} and weight of shape {tuple(shape_w)} do not "
                         f"fit: weight must be (out_features, in_features) with in_features = x's last "
                         f"axis (PyTorch's layout; tt.linear(x, W, b) takes W as (in, out))")
    if bias is None:
        return ops.matmul(x, ops.transpose(weight))
    return linear_prim(x, weight, bias)


# ----- PyTorch's functional spellings of a few layers ------------------------------------------------
def relu(x):
    """`max(x, 0)`, elementwise (as `torch.nn.functional.relu`).

    Examples
    --------
    >>> tt.nn.functional.relu(tt.tensor([-1.0, 0.0, 2.0]))
    tensor([0., 0., 2.])
    """
    return ops.relu(x)


def softmax(x, dim=-1):
    """Softmax along `dim` (as `torch.nn.functional.softmax`).

    Examples
    --------
    >>> tt.nn.functional.softmax(tt.tensor([[0.0, np.log(3.0)]]), dim=1)
    tensor([[0.25, 0.75]])
    """
    return ops.softmax(x, axis=dim)


def log_softmax(x, dim=-1):
    """Log-softmax along `dim` (as `torch.nn.functional.log_softmax`).

    Examples
    --------
    >>> tt.nn.functional.log_softmax(tt.tensor([[0.0, 0.0]]), dim=1)
    tensor([[-0.69314718, -0.69314718]])
    """
    return ops.log_softmax(x, axis=dim)


def _check_dropout(p):
    if isinstance(p, bool) or not 0.0 <= float(p) <= 1.0:
        raise ValueError(f"Dropout: p must be a probability in [0, 1], got {p!r}")
    return float(p)


def _dropout_mask(rng, x, p, dtype):
    """1 / (1 - p) where kept, 0 where dropped (probability p), on x's device and in `dtype`:
    drawn by the NumPy Generator `rng` (the same masks on every device), then moved."""
    keep = generator(rng).random(x.shape) >= p      # resolved per call: a seed, None (global)
    scale = np.dtype(dtype).type(0.0 if p == 1.0 else 1.0 / (1.0 - p))   # rounded once, as a cast
    return backend.like(np.multiply(keep, scale, dtype=dtype), x)          # (4x faster than where)


def _dropout(x, p, rng):
    """x * mask and the mask (see _dropout_mask). The mask is a draw tt.compile repeats on every
    call (tinytensor/draws.py), and a constant of the product, so the backward pass uses exactly
    the forward's mask."""
    x = x if isinstance(x, Tensor) else backend.asarray(x)
    dtype = x.dtype if x.dtype.kind == "f" else np.dtype(np.float64)
    if STATE.batch:          # inside tt.vmap: as its randomness= says (vmap.batched_draw)
        from ..vmap import batched_draw
        mask = batched_draw("Dropout", x.shape, lambda shape: draws.draw_once(
            _dropout_mask, rng, np.broadcast_to(np.zeros((), dtype), shape), p, dtype))
        return x * mask, mask
    mask = draws.draw(_dropout_mask, rng, x, p, dtype)
    return x * mask, mask


def dropout(x, p=0.5, training=True, rng=None):
    """x * mask / (1 - p) with a fresh mask from `rng` (a seed or an np.random.Generator; None:
    the global generator, tt.manual_seed) when training; x itself otherwise (see nn.Dropout).

    Examples
    --------
    >>> F = tt.nn.functional
    >>> F.dropout(tt.ones(6), p=0.5, rng=0)   # kept entries scaled by 1 / (1 - p)
    tensor([2., 0., 0., 0., 2., 2.])
    >>> F.dropout(tt.ones(3), p=0.5, training=False)
    tensor([1., 1., 1.])
    """
    p = _check_dropout(p)
    if not training or p == 0.0:
        return x
    return _dropout(x, p, rng)[0]


# ----- losses: the math behind nn's loss Modules (losses.py), with PyTorch's formulas and options --
# Targets that are plain arrays are cast to the prediction's float dtype, so float64 labels do not
# silently turn a float32 model's loss into float64.
_REDUCTIONS = ("mean", "sum", "none")


def _check_reduction(reduction):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be one of {_REDUCTIONS}, got {reduction!r}")
    return reduction


def _check_delta(delta):
    if not delta > 0:
        raise ValueError(f"HuberLoss: delta must be positive, got {delta!r}")
    return float(delta)


def _check_smoothing(label_smoothing):
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"CrossEntropyLoss: label_smoothing must lie in [0, 1], got {label_smoothing}")
    return float(label_smoothing)


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
    if value is None or isinstance(value, Tensor) and (
            SHARED.quiet or STATE.recorder is None or not STATE.recorder.passed_as_array(value)):
        return value                      # (tt.compile: an array argument is a Tensor inside f)
    if isinstance(value, Tensor):
        dtype = _float_dtype(prediction)  # cast as the plain array the caller passed
        return value if value.dtype == dtype else ops.astype(value, dtype)
    if type(value) is np.ndarray and not SHARED.quiet and STATE.recorder is not None:
        # tt.compile: an array the loss holds (pos_weight, a target kept and refilled) is read
        # anew on every call: a recorded copy, and what is computed from it is on the tape
        t = Tensor(value)
        STATE.recorder.held_array(t)      # eagerly the array: a loss of such arrays alone is one too
        dtype = _float_dtype(prediction)
        return t if t.dtype == dtype else ops.astype(t, dtype)
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


def mse_loss(prediction, target, reduction="mean"):
    """Mean of (prediction - target)**2 over every element (or its sum, or no reduction).

    Examples
    --------
    >>> F = tt.nn.functional
    >>> F.mse_loss(tt.tensor([1.0, 2.0]), tt.tensor([1.0, 4.0]))
    tensor(2.)
    >>> F.mse_loss(tt.tensor([1.0, 2.0]), tt.tensor([1.0, 4.0]), reduction="none")
    tensor([0., 4.])
    """
    reduction = _check_reduction(reduction)
    target = _same_shape("MSELoss", prediction, target)
    return _reduce(ops.square(prediction - target), reduction)


def l1_loss(prediction, target, reduction="mean"):
    """Mean of |prediction - target| (the gradient at 0 is 0, as PyTorch).

    Examples
    --------
    >>> tt.nn.functional.l1_loss(tt.tensor([1.0, 2.0]), tt.tensor([2.0, 4.0]))
    tensor(1.5)
    """
    reduction = _check_reduction(reduction)
    target = _same_shape("L1Loss", prediction, target)
    return _reduce(ops.abs(prediction - target), reduction)


def huber_loss(prediction, target, reduction="mean", delta=1.0):
    """0.5 d**2 where |d| <= delta, delta * (|d| - 0.5 delta) elsewhere, d = prediction - target.

    Examples
    --------
    >>> F = tt.nn.functional
    >>> F.huber_loss(tt.tensor([0.5, 3.0]), tt.tensor([0.0, 0.0]), reduction="none")
    tensor([0.125, 2.5  ])
    """
    reduction, delta = _check_reduction(reduction), _check_delta(delta)
    target = _same_shape("HuberLoss", prediction, target)
    a = ops.abs(prediction - target)
    q = ops.minimum(a, delta)                       # |d| clipped at delta
    return _reduce(0.5 * (q * q) + delta * (a - q), reduction)


def binary_cross_entropy(p, target, weight=None, reduction="mean"):
    """-w * (y log p + (1 - y) log(1 - p)) on probabilities p, each log clamped at -100 as
    PyTorch (finite at p = 0 and 1). Prefer binary_cross_entropy_with_logits on logits.

    Examples
    --------
    >>> F = tt.nn.functional
    >>> F.binary_cross_entropy(tt.tensor([0.5, 0.5]), tt.tensor([1.0, 0.0]))   # log(2)
    tensor(0.69314718)
    >>> F.binary_cross_entropy(tt.tensor([0.0]), tt.tensor([1.0]))   # clamped: finite
    tensor(100.)
    """
    reduction = _check_reduction(reduction)
    target = _same_shape("BCELoss", p, target)
    loss = binary_cross_entropy_prim(p, target)
    if weight is not None:
        loss = loss * _as_float(weight, p, "BCELoss's weight")
    return _reduce(loss, reduction)


def binary_cross_entropy_with_logits(logits, target, weight=None, reduction="mean", pos_weight=None):
    """Binary cross-entropy of sigmoid(x) against y from the logits x (see nn.BCEWithLogitsLoss).

    Examples
    --------
    >>> F = tt.nn.functional
    >>> logits = tt.tensor([0.0, 0.0], requires_grad=True)
    >>> loss = F.binary_cross_entropy_with_logits(logits, tt.tensor([1.0, 0.0]))
    >>> round(loss.item(), 4)               # log 2
    0.6931
    >>> loss.backward()
    >>> logits.grad                         # (sigmoid(x) - y) / n
    array([-0.25,  0.25])
    """
    reduction = _check_reduction(reduction)
    target = _same_shape("BCEWithLogitsLoss", logits, target)
    tail = softplus(-logits, threshold=np.inf)      # softplus(-x) = -log sigmoid(x)
    scale = 1.0
    if pos_weight is not None:
        scale = 1 + (_as_float(pos_weight, logits, "BCEWithLogitsLoss's pos_weight") - 1) * target
    loss = (1 - target) * logits + scale * tail
    if weight is not None:
        loss = loss * _as_float(weight, logits, "BCEWithLogitsLoss's weight")
    return _reduce(loss, reduction)


def _class_last(x, target):
    """PyTorch's K-dimensional layout: logits (N, C, d1, ...) have the class axis at 1, with
    integer targets (N, d1, ...) or probabilities of the logits' shape, whatever the sizes (C == d1
    included): move it last. Integer targets (N, d1) that only fit a class-last (N, d1, C) layout
    (PyTorch would raise) keep tinytensor's class-last meaning; 1-D and 2-D logits are (C,), (N, C)."""
    shape = tuple(x.shape)
    if len(shape) <= 2:
        return x, target
    values = target.data if isinstance(target, Tensor) else backend.asarray(target)
    last = (0,) + tuple(range(2, len(shape))) + (1,)
    if values.dtype.kind in "iu" and values.shape == shape[:1] + shape[2:]:
        return ops.transpose(x, last), target
    if values.dtype.kind not in "iu" and values.shape == shape:          # probabilities, (N, C, d...)
        return ops.transpose(x, last), ops.transpose(target, last) if isinstance(target, Tensor) \
            else values.transpose(last)
    return x, target


def _weighted_nll(log_p, target, weight, ignore_index, smoothing, reduction, name):
    """-sum_c coef[..., c] * log_p[..., c] per row, with coef built as PyTorch's cross_entropy:
    class indices: (1 - s) w[y] onehot(y) + (s / C) w, rows with y == ignore_index zeroed, mean
    divided by the sum of w[y] over the rows kept; probabilities y: w * ((1 - s) y + s / C),
    mean divided by the number of rows."""
    C = log_p.shape[-1]
    dtype = log_p.dtype
    xp = backend.namespace(log_p)
    w_arg = None        # a Tensor weight stays one where it is an operand (tt.compile reads it anew)
    if isinstance(weight, Tensor):
        w_arg = weight if weight.dtype == dtype else ops.astype(weight, dtype)
        weight = w_arg.data
    elif isinstance(weight, np.ndarray) and type(weight) is not np.ndarray:   # tt.compile's recorded
        w_arg = weight if weight.dtype == dtype else weight.astype(dtype)     # array (np.bincount(y))
        weight = np.ndarray.view(w_arg, np.ndarray)
    w = xp.ones(C, dtype) if weight is None else backend.asarray(weight, dtype, like=log_p,
                                                                  what=f"{name}'s weight")
    w_arg = w if w_arg is None else w_arg
    if w.shape != (C,):
        raise ValueError(f"{name}: weight must have one entry per class, shape ({C},), got {w.shape}")
    t = backend.asarray(target.data if isinstance(target, Tensor) else target, like=log_p,
                        what=f"{name}'s target")
    if t.dtype.kind in "iu" and t.shape == tuple(log_p.shape[:-1]):
        # functions of the labels' values, computed off the tape (the range check in the first):
        # ops.on_values has tt.compile compute them again on every call
        args = (target, w_arg, ignore_index, smoothing, name)
        plain = np.ndarray.view(t, np.ndarray) if isinstance(t, np.ndarray) and type(t) is not np.ndarray \
            else t
        values = (plain, w, ignore_index, smoothing, name)     # (computed on the values; recorded
        #                                                        with the labels `target` as they are)
        coef = ops.on_values(_label_coefficients, args, {}, _label_coefficients(*values))
        total = ops.on_values(_label_total, args, {}, _label_total(*values))
    elif t.shape == tuple(log_p.shape):
        if t.dtype.kind != "f":
            raise TypeError(f"{name}: targets of the input's shape must be probabilities (floats), "
                            f"got dtype {t.dtype}")
        if isinstance(target, Tensor) and target.requires_grad:   # soft labels that learn
            coef = (target * (1 - smoothing) + smoothing / C) * w
        else:
            args = (target, w_arg, smoothing, dtype)
            coef = ops.on_values(_soft_coefficients, args, {}, _soft_coefficients(t, w, smoothing, dtype))
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


def _label_coefficients(t, w, ignore_index, smoothing, name=None):
    """(..., C) weights of log_p for class indices t, checked to lie in [0, C) (or equal
    ignore_index): (1 - s) w[y] onehot(y) + (s / C) w, rows with y == ignore_index zeroed."""
    C = w.shape[0]
    check_class_range(t, C, name, ignore_index)
    keep = t != ignore_index
    safe = np.where(keep, t, 0)
    row_weight = w[safe] * keep
    onehot = safe[..., None] == backend.namespace(w).arange(C)   # (no put_along_axis everywhere)
    coef = onehot * ((1 - smoothing) * row_weight)[..., None]
    if smoothing:
        coef += (smoothing / C) * (keep[..., None] * w)
    return coef


def _label_total(t, w, ignore_index, smoothing, name=None):
    """The weighted mean's divisor: the sum of w[y] over the rows kept."""
    keep = t != ignore_index
    return (w[np.where(keep, t, 0)] * keep).sum()


def _soft_coefficients(t, w, smoothing, dtype):
    return (t.astype(dtype) * (1 - smoothing) + smoothing / w.shape[0]) * w


def cross_entropy(logits, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """Cross-entropy of softmax(logits) against the targets, as PyTorch's F.cross_entropy (see
    nn.CrossEntropyLoss). Without options it is one fused, stable primitive
    (`tt.softmax_cross_entropy`); with them, log_softmax and a weighted sum.

    Examples
    --------
    >>> F = tt.nn.functional
    >>> logits = tt.tensor([[2.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    >>> labels = np.array([0, 2])
    >>> round(F.cross_entropy(logits, labels).item(), 6)
    0.669079
    >>> round(F.cross_entropy(logits, labels, label_smoothing=0.1).item(), 6)
    0.735745
    >>> F.cross_entropy(logits, labels, reduction="none").numpy().round(6)
    array([0.239545, 1.098612])
    """
    reduction, label_smoothing = _check_reduction(reduction), _check_smoothing(label_smoothing)
    ignore_index = int(ignore_index)
    logits, target = _class_last(logits, target)
    t = target.data if isinstance(target, Tensor) else backend.asarray(target)
    if isinstance(target, (list, tuple)):
        target = t                           # labels as a Python list: the array, as NumPy's
    if t.dtype.kind in "iub" and t.ndim and t.shape == tuple(logits.shape):
        raise ValueError(
            f"CrossEntropyLoss: integer targets of the logits' shape {t.shape}: class indices must "
            f"have shape {tuple(logits.shape[:-1])} (logits (N, C)), and targets of the logits' "
            f"shape must be float probabilities. For binary classification with one logit per "
            f"example use BCEWithLogitsLoss (float targets), or logits of shape (N, 2)")
    plain = weight is None and label_smoothing == 0.0
    if plain and not isinstance(t, np.ndarray) and t.dtype.kind in "iu" \
            and t.shape == tuple(logits.shape[:-1]):       # (a device's labels; a traced array is NumPy's)
        return _device_cross_entropy(logits, t, ignore_index, reduction)
    # whether some label is ignored: through ops.equal, which tt.compile recomputes (a guard)
    labels = target if isinstance(target, Tensor) else t     # (a torch tensor handed over: t)
    if plain and not (t.dtype.kind in "iu" and ops.PUBLIC["equal"](labels, ignore_index).any()):
        if STATE.recorder is not None and t.dtype.kind in "iu":   # tt.compile: checked per call
            target = ops.on_values(_none_ignored, (target, ignore_index), {},
                                   _none_ignored(target, ignore_index))
        return ops.softmax_cross_entropy(logits, target, reduction=reduction)
    return _weighted_nll(ops.log_softmax(logits, axis=-1), target, weight, ignore_index,
                         label_smoothing, reduction, "CrossEntropyLoss")


def _device_cross_entropy(logits, t, ignore_index, reduction):
    """Class indices on a device (CuPy): no value comes back to the host, since a round trip
    stalls the GPU's queue every step (0.9 ms of a 3.7 ms step at B=1024, H=4096 on an H200):
    rows whose label is ignore_index weigh 0, through the fused primitive's per-row losses
    (labels out of range give NaN rows there, as the fused primitive does on a device)."""
    xp = backend.namespace(t)
    keep = t != ignore_index
    rows = ops.softmax_cross_entropy(logits, xp.where(keep, t, 0), reduction="none")
    rows = rows * keep.astype(rows.dtype)
    if reduction == "none":
        return rows
    total = ops.sum(rows)
    return total if reduction == "sum" else total / keep.sum().astype(rows.dtype)


def _none_ignored(target, ignore_index):
    """The labels (a copy: a program temporary aliasing no input), after checking that none
    is ignore_index: a compiled program recorded on labels without one took the fused path,
    which has no ignored rows."""
    t = target.data if isinstance(target, Tensor) else target
    if (t == ignore_index).any():
        raise ValueError(
            f"CrossEntropyLoss: this compiled program was recorded on targets with no label equal "
            f"to ignore_index={ignore_index} (it computes the fused softmax_cross_entropy, which has "
            f"no ignored rows), and this call's targets have some. Record it on targets that "
            f"include an ignored label (that program handles both), or pass "
            f"weight=np.ones(num_classes), which takes the general path on every call")
    return t.copy()


def nll_loss(log_p, target, weight=None, ignore_index=-100, reduction="mean"):
    """-log_p[target] on log-probabilities (see nn.NLLLoss).

    Examples
    --------
    >>> log_p = tt.log(tt.tensor([[0.5, 0.25, 0.25], [0.1, 0.8, 0.1]]))
    >>> loss = tt.nn.functional.nll_loss(log_p, np.array([0, 1]))
    >>> round(loss.item(), 4)               # -(log 0.5 + log 0.8) / 2
    0.4581
    """
    reduction, ignore_index = _check_reduction(reduction), int(ignore_index)
    log_p, target = _class_last(log_p, target)
    t = backend.asarray(target.data if isinstance(target, Tensor) else target)
    if isinstance(target, (list, tuple)):
        target = t
    if t.dtype.kind not in "iu":
        raise TypeError(f"NLLLoss: target must be integer class indices, got dtype {t.dtype}")
    return _weighted_nll(log_p, t, weight, ignore_index, 0.0, reduction, "NLLLoss")


def smooth_l1_loss(prediction, target, reduction="mean", beta=1.0):
    """0.5 d**2 / beta where |d| < beta, |d| - 0.5 beta elsewhere, d = prediction - target, as
    PyTorch's (huber_loss(delta) is delta * smooth_l1_loss(beta=delta)); beta=0 is l1_loss.

    Examples
    --------
    >>> F = tt.nn.functional
    >>> F.smooth_l1_loss(tt.tensor([0.5, 3.0]), tt.tensor([0.0, 0.0]), reduction="none", beta=2.0)
    tensor([0.0625, 2.    ])
    """
    reduction = _check_reduction(reduction)
    if not beta >= 0:
        raise ValueError(f"SmoothL1Loss: beta must be non-negative, got {beta!r}")
    beta = float(beta)
    target = _same_shape("SmoothL1Loss", prediction, target)
    a = ops.abs(prediction - target)
    if beta == 0:
        return _reduce(a, reduction)
    q = ops.minimum(a, beta)                        # |d| clipped at beta
    return _reduce((0.5 / beta) * (q * q) + (a - q), reduction)


def _xlogx(t):
    """t log t, 0 at t = 0 (a constant for a plain target; recorded, with slope log t + 1 where
    t > 0 and 0 at t = 0, for a Tensor)."""
    if not isinstance(t, Tensor):
        if type(t) is np.ndarray:      # (ops.on_values: tt.compile reads a held target anew)
            return ops.on_values(_xlogx_values, (t,), {}, _xlogx_values(t))
        ns = backend.namespace(t)                     # another device: the same, from where and log
        return ns.where(t > 0, t * ns.log(ns.where(t > 0, t, 1)), 0)
    positive = ops.PUBLIC["greater"](t, 0)            # recomputed by tt.compile on every call
    return t * ops.log(ops.PUBLIC["where"](positive, t, 1.0))


def _xlogx_values(t):
    """t log t of an array, in its own dtype and with the Tensor form's operations, so a target
    passed as an array or as a Tensor (tt.compile makes array arguments Tensors) gives the same
    bits (PyTorch's xlogy also computes in the target's dtype)."""
    return t * np.log(np.where(t > 0, t, np.ones((), t.dtype)))


KL_REDUCTIONS = _REDUCTIONS + ("batchmean",)


def kl_div(input, target, reduction="mean", log_target=False):
    """KL divergence of `input` (log-probabilities) from `target`, pointwise as PyTorch's:
    target * (log(target) - input) (0 where target is 0), or with log_target=True (target given
    as log-probabilities) exp(target) * (target - input). reduction "mean" averages over every
    element (as PyTorch's default; not the KL divergence), "batchmean" sums and divides by the
    batch size (the first axis: the true KL divergence per sample), "sum", "none".

    Examples
    --------
    >>> F = tt.nn.functional
    >>> log_q = tt.log(tt.tensor([[0.5, 0.5]]))
    >>> p = tt.tensor([[0.25, 0.75]])
    >>> round(F.kl_div(log_q, p, reduction="batchmean").item(), 4)   # sum(p log(p / q)) per sample
    0.1308
    >>> round(F.kl_div(log_q, tt.log(p), reduction="batchmean", log_target=True).item(), 4)
    0.1308
    """
    if reduction not in KL_REDUCTIONS:
        raise ValueError(f"KLDivLoss: reduction must be one of {KL_REDUCTIONS}, got {reduction!r}")
    target = _same_shape("KLDivLoss", input, target)
    if log_target:
        loss = ops.exp(target) * (target - input)
    else:
        loss = _xlogx(target) - target * input
    if reduction == "batchmean":
        n = input.shape[0] if len(input.shape) else 1
        return ops.sum(loss) / n
    return _reduce(loss, reduction)


# ----- PyTorch's functional forms for convolutional decoders, U-Nets and TCNs (issue 31) -------------
# Each is composed from the primitives above (conv2d, conv2d_grad_input) and the op table's rows
# (reshape, getitem with index arrays, matmul, pad, ...), so both modes come from their rules. Index
# arrays and weights are computed from shapes only, never from the input's values.
def _single(value, name):
    v = value[0] if isinstance(value, (tuple, list)) and len(value) == 1 else value
    if not isinstance(v, (int, np.integer)) or v < 0:
        raise ValueError(f"{name} must be a non-negative int (or a 1-tuple), got {value!r}")
    return int(v)


def _shape_of(x):
    return tuple(np.shape(x.data if isinstance(x, Tensor) else x))


def _same_padding(kernel, dilation, stride, name):
    """PyTorch's padding='same' (stride 1): the total d (k - 1), the extra one on the right."""
    if any(s != 1 for s in stride):
        raise ValueError(f"{name}: padding='same' needs stride 1, got stride {stride}")
    total = [d * (k - 1) for k, d in zip(kernel, dilation)]
    return [(t // 2, t - t // 2) for t in total]


def conv1d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D cross-correlation, as torch.nn.functional.conv1d: x (N, C, L) or (C, L), weight
    (out, C / groups, k), bias (out,) -> (N, out, Lo), Lo = (L + 2 padding - dilation (k - 1) - 1)
    // stride + 1. padding may be "valid" or "same" (stride 1; an even extent pads one more on the
    right, as PyTorch). Computed as conv2d over a (1, L) image.

    Examples
    --------
    >>> x = tt.tensor([[[1.0, 2.0, 3.0, 4.0]]])   # (batch, channels, length)
    >>> w = tt.tensor([[[1.0, -1.0]]])            # one filter: a difference
    >>> tt.nn.functional.conv1d(x, w)
    tensor([[[-1., -1., -1.]]])
    """
    shape, w_shape = _shape_of(x), _shape_of(weight)
    if len(shape) not in (2, 3) or len(w_shape) != 3:
        raise ValueError(f"conv1d: expected input (N, C, L) or (C, L) and weight (out, C / groups, k), "
                         f"got {shape} and {w_shape}")
    if len(shape) == 2:
        return ops.reshape(conv1d(ops.reshape(x, (1,) + shape), weight, bias, stride, padding, dilation,
                                  groups), (w_shape[0], -1))
    stride, dilation = _single(stride, "conv1d: stride"), _single(dilation, "conv1d: dilation")
    if isinstance(padding, str):
        if padding not in ("same", "valid"):
            raise ValueError(f"conv1d: padding must be a number, 'same' or 'valid', got {padding!r}")
        if padding == "same":
            (left, right), = _same_padding((w_shape[2],), (dilation,), (stride,), "conv1d")
            if left != right:
                x = ops.PUBLIC["pad"](x, ((0, 0), (0, 0), (left, right)))
                left = 0
            padding = left
        else:
            padding = 0
    padding = _single(padding, "conv1d: padding")
    padded = _shape_of(x)
    x4 = ops.reshape(x, padded[:2] + (1, padded[2]))
    w4 = ops.reshape(weight, w_shape[:2] + (1, w_shape[2]))
    out = conv2d(x4, w4, bias, (1, stride), (0, padding), (1, dilation), groups)
    return ops.reshape(out, _shape_of(out)[:2] + (_shape_of(out)[3],))


def conv_transpose2d(x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """The transposed convolution, as torch.nn.functional.conv_transpose2d (the gradient of conv2d
    with respect to its input): x (N, C_in, H, W) or (C_in, H, W), weight (C_in, out / groups, kh,
    kw) -> (N, out, Ho, Wo), Ho = (H - 1) stride - 2 padding + dilation (kh - 1) + output_padding
    + 1. One `conv2d_grad_input` primitive per group.

    Examples
    --------
    >>> x = tt.tensor([[[[1.0, 2.0], [3.0, 4.0]]]])
    >>> w = tt.ones((1, 1, 2, 2))
    >>> tt.nn.functional.conv_transpose2d(x, w, stride=2)   # each pixel becomes a 2x2 block
    tensor([[[[1., 1., 2., 2.],
              [1., 1., 2., 2.],
              [3., 3., 4., 4.],
              [3., 3., 4., 4.]]]])
    """
    name = "conv_transpose2d"
    shape, w_shape = _shape_of(x), _shape_of(weight)
    if len(shape) == 3:
        out = conv_transpose2d(ops.reshape(x, (1,) + shape), weight, bias, stride, padding, output_padding,
                               groups, dilation)
        return ops.reshape(out, _shape_of(out)[1:])
    if len(shape) != 4 or len(w_shape) != 4:
        raise ValueError(f"{name}: expected input (N, C_in, H, W) and weight (C_in, out / groups, kh, kw), "
                         f"got {shape} and {w_shape}")
    stride, padding = _pair(stride, "stride"), _pair(padding, "padding")
    dilation, output_padding = _pair(dilation, "dilation"), _pair(output_padding, "output_padding")
    groups = int(groups)
    n, c = shape[:2]
    if groups < 1 or c % groups or w_shape[0] != c:
        raise ValueError(f"{name}: the weight (C_in, out / groups, kh, kw) {w_shape} must have the input's "
                         f"{c} channels first, and groups={groups} must divide them")
    if 0 in stride or 0 in dilation:
        raise ValueError(f"{name}: stride and dilation must be positive, got {stride} and {dilation}")
    for op, s, d in zip(output_padding, stride, dilation):
        if op >= s and op >= d:
            raise ValueError(f"{name}: output_padding {output_padding} must be smaller than either stride "
                             f"{stride} or dilation {dilation}")
    size = tuple((h - 1) * s - 2 * p + d * (k - 1) + op + 1
                 for h, s, p, d, k, op in zip(shape[2:], stride, padding, dilation, w_shape[2:],
                                              output_padding))
    if min(size) < 1:
        raise ValueError(f"{name}: the output size {size} would not be positive (input {shape[2:]}, "
                         f"kernel {w_shape[2:]}, stride {stride}, padding {padding})")
    params = dict(stride=stride, padding=padding)
    if dilation != (1, 1):
        params["dilation"] = dilation
    ci, co = c // groups, w_shape[1]
    parts = [conv2d_grad_input(x if groups == 1 else x[:, k * ci:(k + 1) * ci],
                               weight if groups == 1 else weight[k * ci:(k + 1) * ci],
                               shape=(n, co) + size, **params) for k in range(groups)]
    out = parts[0] if groups == 1 else ops.concatenate(parts, axis=1)
    return out if bias is None else out + ops.reshape(bias, (1, -1, 1, 1))


def conv_transpose1d(x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """As torch.nn.functional.conv_transpose1d: x (N, C_in, L) or (C_in, L), weight (C_in, out /
    groups, k); conv_transpose2d over a (1, L) image.

    Examples
    --------
    >>> x = tt.tensor([[[1.0, 2.0]]])
    >>> w = tt.tensor([[[1.0, 1.0]]])       # (in, out, k)
    >>> tt.nn.functional.conv_transpose1d(x, w, stride=2)   # each input spread over k outputs
    tensor([[[1., 1., 2., 2.]]])
    """
    shape, w_shape = _shape_of(x), _shape_of(weight)
    if len(shape) not in (2, 3) or len(w_shape) != 3:
        raise ValueError(f"conv_transpose1d: expected input (N, C_in, L) or (C_in, L) and weight "
                         f"(C_in, out / groups, k), got {shape} and {w_shape}")
    x4 = ops.reshape(x, shape[:-1] + (1, shape[-1]))
    w4 = ops.reshape(weight, w_shape[:2] + (1, w_shape[2]))
    single = lambda v, what: (0 if what != "dilation" else 1, _single(v, what))   # noqa: E731
    out = conv_transpose2d(x4, w4, bias, (1, _single(stride, "stride")), single(padding, "padding"),
                           single(output_padding, "output_padding"), groups, single(dilation, "dilation"))
    out_shape = _shape_of(out)
    return ops.reshape(out, out_shape[:-2] + (out_shape[-1],))


# ----- normalisation -------------------------------------------------------------------------------
def _normalised(x, axes, eps):
    """(x - mean) / sqrt(var + eps) over `axes`, biased variance (as PyTorch's norms)."""
    centred = x - ops.mean(x, axis=axes, keepdims=True)
    var = ops.mean(centred * centred, axis=axes, keepdims=True)
    return centred / ops.sqrt(var + eps)


def _channel_affine(y, weight, bias, ndim):
    shape = (1, -1) + (1,) * (ndim - 2)
    if weight is not None:
        y = y * ops.reshape(weight, shape)
    if bias is not None:
        y = y + ops.reshape(bias, shape)
    return y


def _normalized_shape(normalized_shape):
    if isinstance(normalized_shape, (int, np.integer)):
        return (int(normalized_shape),)
    return tuple(int(n) for n in normalized_shape)


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """As torch.nn.functional.layer_norm: normalise over the last len(normalized_shape) axes.

    Examples
    --------
    >>> x = tt.tensor([[1.0, 3.0], [2.0, 2.0]])
    >>> tt.nn.functional.layer_norm(x, (2,)).numpy().round(4)
    array([[-1.,  1.],
           [ 0.,  0.]])
    """
    shape = _normalized_shape(normalized_shape)
    n = len(shape)
    if _shape_of(x)[len(_shape_of(x)) - n:] != tuple(shape):
        raise ValueError(f"layer_norm: input of shape {_shape_of(x)} does not end in normalized_shape "
                         f"{shape}")
    y = _normalised(x, tuple(range(-n, 0)), eps)
    if weight is not None:
        y = y * weight
    return y if bias is None else y + bias


def group_norm(x, num_groups, weight=None, bias=None, eps=1e-5):
    """As torch.nn.functional.group_norm: x (N, C, *) normalised over each group of C / num_groups
    channels (and every position), then weight and bias per channel.

    Examples
    --------
    >>> x = tt.tensor([[[1.0], [3.0], [5.0], [5.0]]])   # (N, C, L): 4 channels, 2 groups
    >>> tt.nn.functional.group_norm(x, 2).numpy().ravel().round(4)
    array([-1.,  1.,  0.,  0.])
    """
    shape = _shape_of(x)
    if len(shape) < 2 or shape[1] % int(num_groups):
        raise ValueError(f"group_norm: num_groups={num_groups} must divide the channels on axis 1 of an "
                         f"(N, C, *) input, got shape {shape}")
    y = _normalised(ops.reshape(x, (shape[0], int(num_groups), -1)), (-1,), eps)
    return _channel_affine(ops.reshape(y, shape), weight, bias, len(shape))


def instance_norm(x, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-5):
    """As torch.nn.functional.instance_norm: x (N, C, *) normalised per sample and channel over
    the positions (use_input_stats), or with the running statistics; the running buffers (Tensors)
    are updated in place when given with use_input_stats, as PyTorch's.

    Examples
    --------
    >>> x = tt.tensor([[[1.0, 3.0], [0.0, 10.0]]])
    >>> tt.nn.functional.instance_norm(x).numpy().round(4)
    array([[[-1.,  1.],
            [-1.,  1.]]])
    """
    shape = _shape_of(x)
    axes = tuple(range(2, len(shape)))
    if not axes:
        raise ValueError(f"instance_norm: expected (N, C, *) input with positions, got shape {shape}")
    if use_input_stats:
        y = _normalised(x, axes, eps)
        if running_mean is not None:
            from ..tape import no_grad
            n = math.prod(shape[2:])
            with no_grad():
                mean = ops.mean(ops.mean(x, axis=axes), axis=0)
                centred = x - ops.mean(x, axis=axes, keepdims=True)
                var = ops.mean(ops.sum(centred * centred, axis=axes) / max(n - 1, 1), axis=0)
                for buffer, batch in ((running_mean, mean), (running_var, var)):
                    buffer *= 1 - momentum
                    buffer += momentum * ops.astype(batch, buffer.dtype)
    else:
        bshape = (1, -1) + (1,) * len(axes)
        y = (x - ops.reshape(running_mean, bshape)) / ops.sqrt(ops.reshape(running_var, bshape) + eps)
    return _channel_affine(y, weight, bias, len(shape))


def rms_norm(x, normalized_shape, weight=None, eps=None):
    """As torch.nn.functional.rms_norm: x / sqrt(mean(x^2 over the last axes) + eps) * weight;
    eps=None is the machine epsilon of x's dtype, as PyTorch.

    Examples
    --------
    >>> tt.nn.functional.rms_norm(tt.tensor([[3.0, 4.0]]), (2,), eps=0.0) * np.sqrt(12.5)
    tensor([[3., 4.]])
    """
    shape = _normalized_shape(normalized_shape)
    n = len(shape)
    x_shape = _shape_of(x)
    if x_shape[len(x_shape) - n:] != tuple(shape):
        raise ValueError(f"rms_norm: input of shape {x_shape} does not end in normalized_shape {shape}")
    dtype = x.dtype if isinstance(x, Tensor) else np.asarray(x).dtype
    eps = float(np.finfo(dtype if dtype.kind == "f" else np.float64).eps) if eps is None else float(eps)
    y = x / ops.sqrt(ops.mean(x * x, axis=tuple(range(-n, 0)), keepdims=True) + eps)
    return y if weight is None else y * weight


def normalize(x, p=2.0, dim=1, eps=1e-12):
    """As torch.nn.functional.normalize: x / max(||x||_p along dim, eps).

    Examples
    --------
    >>> tt.nn.functional.normalize(tt.tensor([[3.0, 4.0], [0.0, 2.0]]), dim=1)
    tensor([[0.6, 0.8],
            [0. , 1. ]])
    """
    if p == 2:
        norm = ops.sqrt(ops.sum(x * x, axis=dim, keepdims=True))
    else:
        norm = ops.sum(ops.abs(x) ** p, axis=dim, keepdims=True) ** (1.0 / p)
    return x / ops.maximum(norm, eps)


# ----- resampling: interpolate, adaptive pooling ------------------------------------------------------
_INTERPOLATING = {"linear": 1, "bilinear": 2, "trilinear": 3, "bicubic": 2}


def _source_scale(n_in, n_out, scale_factor, align_corners):
    """PyTorch's area_pixel_compute_scale."""
    if align_corners:
        return (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    return 1.0 / scale_factor if scale_factor is not None else n_in / n_out


def _along(x, axis, index):
    return x[(slice(None),) * axis + (index,)]


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """As torch.nn.functional.interpolate on (N, C, *spatial): mode "nearest" (PyTorch's index
    floor(dst * scale)), "nearest-exact", "linear" (3-D), "bilinear" and "bicubic" (4-D, PyTorch's
    cubic convolution, A = -0.75), "trilinear" (5-D), with
    align_corners False (default: pixel centres) or True (corner pixels aligned), and "area"
    (adaptive average pooling). Exactly one of size and scale_factor. Each axis is resampled in
    turn (bilinear = linear along W, then along H, PyTorch's association); gradients scatter back.

    Examples
    --------
    >>> F = tt.nn.functional
    >>> x = tt.tensor([[[0.0, 1.0, 2.0]]])  # (N, C, L)
    >>> F.interpolate(x, scale_factor=2)    # nearest
    tensor([[[0., 0., 1., 1., 2., 2.]]])
    >>> F.interpolate(x, size=5, mode="linear", align_corners=True)
    tensor([[[0. , 0.5, 1. , 1.5, 2. ]]])
    """
    name = "interpolate"
    shape = _shape_of(input)
    d = len(shape) - 2
    if d < 1:
        raise ValueError(f"{name}: expected (N, C, *spatial) input, got shape {shape}")
    if antialias:
        raise ValueError(f"{name}: antialias=True is not supported (antialias=False)")
    if mode in _INTERPOLATING and _INTERPOLATING[mode] != d:
        raise ValueError(f"{name}: mode {mode!r} needs a {_INTERPOLATING[mode] + 2}-D input, got "
                         f"{len(shape)}-D (shape {shape})")
    if mode not in ("nearest", "nearest-exact", "area") and mode not in _INTERPOLATING:
        raise ValueError(f"{name}: mode must be 'nearest', 'nearest-exact', 'linear', 'bilinear', "
                         f"'bicubic', 'trilinear' or 'area', got {mode!r}")
    if align_corners is not None and mode not in _INTERPOLATING:
        raise ValueError(f"{name}: align_corners can only be set with the interpolating modes "
                         f"(linear, bilinear, trilinear), got mode {mode!r}")
    if (size is None) == (scale_factor is None):
        raise ValueError(f"{name}: give exactly one of size and scale_factor")
    if size is not None:
        if isinstance(size, Tensor):     # a size read from an array (n[0]): its ints
            size = constant_read(size, "interpolate's size").tolist()
        elif isinstance(size, np.ndarray):    # np.array(8) or np.array([8, 8]), as a Tensor is
            size = size.tolist()
        out = (size,) * d if isinstance(size, (int, np.integer)) else tuple(size)
        scales = (None,) * d
    else:
        scales = (scale_factor,) * d if isinstance(scale_factor, (int, float)) else tuple(scale_factor)
        out = tuple(int(math.floor(n * float(s))) for n, s in zip(shape[2:], scales))
        if recompute_scale_factor:
            scales = (None,) * d
    if len(out) != d or len(scales) != d or min(out) < 1:
        raise ValueError(f"{name}: size/scale_factor must give {d} positive output sizes for input "
                         f"{shape}, got {out}")
    if mode == "area":
        return adaptive_avg_pool2d(input, out) if d == 2 else _adaptive_avg(input, out)
    dtype = input.dtype if isinstance(input, Tensor) else np.asarray(input).dtype
    y = input
    for axis in reversed(range(d)):               # the last axis first (PyTorch's association)
        n_in, n_out, ax = shape[2 + axis], out[axis], 2 + axis
        if n_in == n_out and mode.startswith("nearest") and scales[axis] in (None, 1, 1.0):
            continue
        dst = np.arange(n_out)
        if mode.startswith("nearest"):    # PyTorch computes this index in float32
            scale = (np.float32(1.0 / scales[axis]) if scales[axis] is not None
                     else np.float32(n_in) / np.float32(n_out))
        if mode == "nearest":
            src = np.minimum(np.floor(dst.astype(np.float32) * scale).astype(np.int64), n_in - 1)
            y = _along(y, ax, src)
        elif mode == "nearest-exact":
            src = np.minimum(np.floor((dst.astype(np.float32) + 0.5) * scale).astype(np.int64), n_in - 1)
            y = _along(y, ax, src)
        elif mode == "bicubic":
            scale = _source_scale(n_in, n_out, scales[axis], bool(align_corners))
            y = _bicubic_along(y, ax, n_in, n_out, scale, bool(align_corners), dtype)
        else:
            scale = _source_scale(n_in, n_out, scales[axis], bool(align_corners))
            src = dst * scale if align_corners else np.maximum(scale * (dst + 0.5) - 0.5, 0.0)
            i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
            i1 = np.minimum(i0 + 1, n_in - 1)
            w1 = (src - i0).astype(dtype)
            w0 = (1 - w1).astype(dtype)
            bshape = (n_out,) + (1,) * (len(shape) - 1 - ax)
            data = y.data if isinstance(y, Tensor) else y
            w0, w1 = (backend.like(w.reshape(bshape), data, dtype) for w in (w0, w1))
            y = _along(y, ax, i0) * w0 + _along(y, ax, i1) * w1
    return y


_CUBIC_A = -0.75     # PyTorch's (and OpenCV's) cubic convolution coefficient


def _cubic_weights(t):
    """The 4 weights of Keys' cubic convolution at fraction t (PyTorch's get_cubic_upsample_coefficients)."""
    A = _CUBIC_A

    def near(x):            # |x| <= 1
        return ((A + 2) * x - (A + 3)) * x * x + 1

    def far(x):             # 1 < |x| < 2
        return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A
    return far(t + 1), near(t), near(1 - t), far(2 - t)


def _bicubic_along(y, ax, n_in, n_out, scale, align_corners, dtype):
    """Cubic convolution along axis `ax`: 4 taps at floor(src) - 1 .. + 2 (clamped to the edges), as
    PyTorch's upsample_bicubic2d; the source index is not clamped at 0 (its cubic variant)."""
    dst = np.arange(n_out)
    src = dst * scale if align_corners else scale * (dst + 0.5) - 0.5
    i = np.floor(src).astype(np.int64)
    weights = _cubic_weights(src - i)
    bshape = (n_out,) + (1,) * (len(_shape_of(y)) - 1 - ax)
    data = y.data if isinstance(y, Tensor) else y
    out = None
    for k, w in zip(range(-1, 3), weights):
        w = w.astype(dtype, copy=False) if isinstance(w, np.ndarray) else np.asarray(w, dtype)
        w = backend.like(w.reshape(bshape), data, dtype)   # (weights from a size argument: traced)
        term = _along(y, ax, np.clip(i + k, 0, n_in - 1)) * w
        out = term if out is None else out + term
    return out


def _bins(n_in, n_out):
    """PyTorch's adaptive pooling bins: [floor(i n_in / n_out), ceil((i + 1) n_in / n_out))."""
    i = np.arange(n_out)
    return (i * n_in) // n_out, -((-(i + 1) * n_in) // n_out)


def _adaptive_sizes(shape, output_size, d, name):
    out = (output_size,) * d if isinstance(output_size, (int, np.integer)) or output_size is None \
        else tuple(output_size)
    if len(shape) not in (d + 1, d + 2) or len(out) != d:
        raise ValueError(f"{name}: expected (N, C, *{d} spatial axes) or (C, *spatial) input and {d} output "
                         f"sizes, got shape {shape} and output_size {output_size!r}")
    out = tuple(shape[len(shape) - d + k] if o is None else int(o) for k, o in enumerate(out))
    if min(out) < 1:
        raise ValueError(f"{name}: output_size must be positive, got {output_size!r}")
    return out


def _adaptive_avg(x, out):
    """Average pooling into `out` bins per trailing axis: one matmul with a (n_out, n_in) matrix of
    1 / bin size per axis (the bins overlap where n_in is not a multiple of n_out)."""
    shape = _shape_of(x)
    d = len(out)
    dtype = x.dtype if isinstance(x, Tensor) else np.asarray(x).dtype
    data = x.data if isinstance(x, Tensor) else x
    y = x
    for k in reversed(range(d)):
        axis = len(shape) - d + k
        n_in, n_out = shape[axis], out[k]
        if n_in == n_out:
            continue
        lo, hi = _bins(n_in, n_out)
        A = np.zeros((n_out, n_in))
        for i in range(n_out):
            A[i, lo[i]:hi[i]] = 1.0 / (hi[i] - lo[i])
        A = backend.like(A.T.astype(dtype), data, dtype)           # (n_in, n_out)
        y = ops.PUBLIC["moveaxis"](ops.matmul(ops.PUBLIC["moveaxis"](y, axis, -1), A), -1, axis)
    return y


def adaptive_avg_pool2d(x, output_size):
    """As torch.nn.functional.adaptive_avg_pool2d: (N, C, H, W) or (C, H, W) averaged into
    output_size bins (an int, a pair, None keeps that axis), PyTorch's bins.

    Examples
    --------
    >>> x = tt.tensor(np.arange(16.0).reshape(1, 1, 4, 4))
    >>> tt.nn.functional.adaptive_avg_pool2d(x, 1)   # global average pooling
    tensor([[[[7.5]]]])
    >>> tt.nn.functional.adaptive_avg_pool2d(x, (2, None)).shape   # None keeps that axis
    (1, 1, 2, 4)
    """
    return _adaptive_avg(x, _adaptive_sizes(_shape_of(x), output_size, 2, "adaptive_avg_pool2d"))


def adaptive_avg_pool1d(x, output_size):
    """As torch.nn.functional.adaptive_avg_pool1d on (N, C, L) or (C, L).

    Examples
    --------
    >>> tt.nn.functional.adaptive_avg_pool1d(tt.tensor([[[1.0, 2.0, 3.0, 4.0]]]), 2)
    tensor([[[1.5, 3.5]]])
    """
    return _adaptive_avg(x, _adaptive_sizes(_shape_of(x), output_size, 1, "adaptive_avg_pool1d"))


def adaptive_max_pool2d(x, output_size, return_indices=False):
    """As torch.nn.functional.adaptive_max_pool2d: the maximum of each of PyTorch's bins, rows
    then columns (the maximum of a rectangle is the maximum of its rows' maxima). With
    return_indices, also each maximum's flat index into its (H, W) plane (int64, as PyTorch's).

    Examples
    --------
    >>> x = tt.tensor(np.arange(16.0).reshape(1, 1, 4, 4))
    >>> tt.nn.functional.adaptive_max_pool2d(x, 2)
    tensor([[[[ 5.,  7.],
              [13., 15.]]]])
    """
    shape = _shape_of(x)
    out = _adaptive_sizes(shape, output_size, 2, "adaptive_max_pool2d")
    y = x
    for k, axis in ((0, len(shape) - 2), (1, len(shape) - 1)):
        n_in, n_out = shape[axis], out[k]
        lo, hi = _bins(n_in, n_out)
        pieces = [ops.max(_along(y, axis, slice(a, b)), axis=axis, keepdims=True) for a, b in zip(lo, hi)]
        y = pieces[0] if n_out == 1 else ops.concatenate(pieces, axis=axis)
    if not return_indices:
        return y
    return y, Tensor(on_values(_adaptive_max_indices, (x, out), {}, _adaptive_max_indices(x, out),
                               "adaptive_max_pool2d_indices"))


def _adaptive_max_indices(x, out):
    """The flat (H, W) index of the first maximum of each adaptive bin (NaN counts as the maximum)."""
    x = backend.to_host(x.data if isinstance(x, Tensor) else backend.asarray(x))
    h, w = x.shape[-2:]
    (rlo, rhi), (clo, chi) = _bins(h, out[0]), _bins(w, out[1])
    index = np.empty(x.shape[:-2] + tuple(out), np.int64)
    for i, (a, b) in enumerate(zip(rlo, rhi)):
        for j, (c, d) in enumerate(zip(clo, chi)):
            local = x[..., a:b, c:d].reshape(x.shape[:-2] + (-1,)).argmax(-1)
            index[..., i, j] = (a + local // (d - c)) * w + c + local % (d - c)
    return index


# ----- dropout of whole channels, and a few activations with PyTorch's names -------------------------
def _dropout_mask_shaped(rng, x, shape, p, dtype):
    keep = generator(rng).random(shape) >= p
    scale = np.dtype(dtype).type(0.0 if p == 1.0 else 1.0 / (1.0 - p))
    return backend.like(np.multiply(keep, scale, dtype=dtype), x)


def dropout2d(x, p=0.5, training=True, rng=None):
    """As torch.nn.functional.dropout2d: zero whole channels of (N, C, H, W) (or (C, H, W)) with
    probability p, scaling the rest by 1 / (1 - p); one draw per (sample, channel).

    Examples
    --------
    >>> y = tt.nn.functional.dropout2d(tt.ones((2, 3, 2, 2)), p=0.5, rng=0)
    >>> y.numpy()[:, :, 0, 0]               # per (sample, channel): 0 or 1 / (1 - p)
    array([[2., 0., 0.],
           [0., 2., 2.]])
    >>> bool((y.numpy() == y.numpy()[:, :, :1, :1]).all())   # the whole channel alike
    True
    """
    p = _check_dropout(p)
    shape = _shape_of(x)
    if len(shape) not in (3, 4):
        raise ValueError(f"dropout2d: expected (N, C, H, W) or (C, H, W) input, got shape {shape}")
    if not training or p == 0.0:
        return x
    keep = shape[:len(shape) - 2] + (1, 1)
    data = x.data if isinstance(x, Tensor) else backend.asarray(x)
    dtype = data.dtype if data.dtype.kind == "f" else np.dtype(np.float64)
    return x * draws.draw(_dropout_mask_shaped, rng, data, keep, p, dtype)


def silu(x):
    """x * sigmoid(x), as torch.nn.functional.silu.

    Examples
    --------
    >>> tt.nn.functional.silu(tt.tensor([0.0, 1.0]))
    tensor([0.        , 0.73105858])
    """
    return x * ops.sigmoid(x)


def mish(x):
    """x * tanh(softplus(x)), as torch.nn.functional.mish.

    Examples
    --------
    >>> tt.nn.functional.mish(tt.tensor([0.0, 1.0]))
    tensor([0.        , 0.86509839])
    """
    return x * ops.tanh(softplus(x))


def elu(x, alpha=1.0):
    """x where x > 0, alpha (exp(x) - 1) elsewhere, as torch.nn.functional.elu.

    Examples
    --------
    >>> tt.nn.functional.elu(tt.tensor([-1.0, 2.0]), alpha=0.5)
    tensor([-0.31606028,  2.        ])
    """
    return ops.relu(x) + alpha * ops.PUBLIC["expm1"](ops.minimum(x, 0.0))


def prelu(x, weight):
    """max(0, x) + weight * min(0, x), weight per channel (axis 1) or one number.

    Examples
    --------
    >>> x = tt.tensor([[-1.0, -1.0], [2.0, 2.0]])   # (N, C): 2 channels
    >>> tt.nn.functional.prelu(x, tt.tensor([0.1, 0.5]))   # one slope per channel
    tensor([[-0.1, -0.5],
            [ 2. ,  2. ]])
    """
    w = weight
    n = len(_shape_of(w))
    if n == 1 and _shape_of(w)[0] > 1 and len(_shape_of(x)) > 1:
        w = ops.reshape(weight, (-1,) + (1,) * (len(_shape_of(x)) - 2))
    return ops.relu(x) + w * ops.minimum(x, 0.0)


def one_hot(tensor, num_classes=-1):
    """As torch.nn.functional.one_hot: integer classes (...) -> int64 (..., num_classes);
    num_classes=-1 means max + 1. Indices outside [0, num_classes) raise.

    Examples
    --------
    >>> tt.nn.functional.one_hot(np.array([0, 2]), num_classes=3)
    tensor([[1, 0, 0],
            [0, 0, 1]], dtype=int64)
    """
    idx = tensor.data if isinstance(tensor, Tensor) else backend.asarray(tensor)
    if idx.dtype.kind not in "iu":
        raise TypeError(f"one_hot: expected integer class indices, got dtype {idx.dtype}")
    # (a Tensor's max through the Tensor: tt.compile guards it, the program recomputes it)
    n = int(tensor.max() if isinstance(tensor, Tensor) else idx.max()) + 1 if num_classes == -1 \
        else int(num_classes)
    result = Tensor(_one_hot_values(idx, n))
    return on_values(_one_hot_values, (tensor, n), {}, result, "one_hot", always_tensor=True) \
        if isinstance(tensor, Tensor) else result


def _one_hot_values(idx, n):
    """The one-hot rows of class indices idx (checked to lie in [0, n): a line of a compiled
    program checks them on every call)."""
    idx = idx.data if isinstance(idx, Tensor) else idx
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise ValueError(f"one_hot: class values must lie in [0, {n}), got "
                         f"{int(idx.min())}..{int(idx.max())}")
    return (idx[..., None] == backend.namespace(idx).arange(n)).astype(np.int64)


def pad(input, pad, mode="constant", value=None):
    """As torch.nn.functional.pad: `pad` lists (left, right) pairs from the LAST axis backwards
    ((1, 2) pads the last axis; (1, 1, 2, 2) the last two). mode "constant" (value, default 0),
    "reflect", "replicate" or "circular". (tt.pad keeps NumPy's ((before, after), ...) per axis.)

    Examples
    --------
    >>> F = tt.nn.functional
    >>> x = tt.tensor([[1.0, 2.0, 3.0]])
    >>> F.pad(x, (1, 2))                    # the last axis: one before, two after
    tensor([[0., 1., 2., 3., 0., 0.]])
    >>> F.pad(x, (2, 0), mode="reflect")
    tensor([[3., 2., 1., 2., 3.]])
    >>> F.pad(x, (0, 0, 1, 0), value=9.0).shape   # the last axis unpadded, one row on top
    (2, 3)
    """
    shape = _shape_of(input)
    pad = tuple(int(p) for p in pad)
    if len(pad) % 2 or len(pad) // 2 > len(shape):
        raise ValueError(f"pad: expected an even number of values, at most 2 per axis of the input "
                         f"(shape {shape}), got {pad}; PyTorch's order: (last_left, last_right, "
                         f"second_last_left, ...)")
    widths = [(0, 0)] * len(shape)
    for k in range(len(pad) // 2):
        widths[len(shape) - 1 - k] = (pad[2 * k], pad[2 * k + 1])
    # negative padding crops, as PyTorch's
    crop = tuple(slice(-lo if lo < 0 else 0, (n + hi) if hi < 0 else None)
                 for (lo, hi), n in zip(widths, shape))
    if any(lo < 0 or hi < 0 for lo, hi in widths):
        input = input[crop]
        widths = [(max(lo, 0), max(hi, 0)) for lo, hi in widths]
    numpy_mode = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}
    if mode not in numpy_mode:
        raise ValueError(f"pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', got {mode!r}")
    if mode == "constant":
        return ops.PUBLIC["pad"](input, widths, constant_values=0.0 if value is None else value)
    if value not in (None, 0, 0.0):
        raise ValueError(f"pad: value is only used with mode='constant' (got mode {mode!r}, value {value})")
    return ops.PUBLIC["pad"](input, widths, mode=numpy_mode[mode])


def embedding(input, weight, padding_idx=None):
    """As torch.nn.functional.embedding: rows of weight (num_embeddings, dim) by integer index;
    with padding_idx that row's gradient is zero.

    Examples
    --------
    >>> weight = tt.tensor([[0.0, 0.0], [1.0, 2.0], [3.0, 4.0]])   # 3 embeddings of size 2
    >>> tt.nn.functional.embedding(np.array([2, 1, 1]), weight)
    tensor([[3., 4.],
            [1., 2.],
            [1., 2.]])
    >>> tt.nn.functional.embedding(np.array([[2, 1], [1, 0]]), weight).shape
    (2, 2, 2)
    """
    index = backend.asarray(host_array(input.data if isinstance(input, Tensor) else input), like=weight,
                            what="embedding's indices")
    if index.dtype.kind not in "iu":
        raise TypeError(f"Embedding: indices must be integers, got dtype {index.dtype}")
    out = embedding_prim(weight, index=index)
    if padding_idx is None:
        return out
    n = _shape_of(weight)[0]
    padding_idx = int(padding_idx) % n
    if not isinstance(out, Tensor) or not out.requires_grad:
        return out
    # the padding rows keep their value and get no gradient (their value as a constant there);
    # the mask through on_values, so tt.compile computes it from each call's indices
    keep = on_values(_not_padding, (input, padding_idx), {}, _not_padding(index, padding_idx), "embedding")
    return ops.PUBLIC["where"](keep, out, out.detach())


def _not_padding(index, padding_idx):
    index = index.data if isinstance(index, Tensor) else backend.asarray(index)
    return (index != padding_idx)[..., None]
