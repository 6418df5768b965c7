"""Layers: Linear, Conv2d, pooling, normalisation, Dropout, Embedding, the activations, and the
containers Sequential and ModuleList. Layers with parameters cast floating-point input to their
parameters' dtype (`cast_input`), so a float32 model computes in float32 whatever data it gets."""

import math
from numbers import Integral

import numpy as np

from .. import backend, ops
from ..ops.batching import not_batchable
from ..rng import generator
from ..state import STATE, traced_array
from ..tape import no_grad
from ..tensor import Tensor
from . import functional as F
from .module import _STRUCTURE, Module, cast_input
from .parameter import Parameter


def _parameter(values, dtype, name):
    return Tensor(values, dtype=dtype, requires_grad=True, name=name)


class Linear(Module):
    """y = x @ weight.T + bias, as PyTorch's: `weight` of shape (out_features, in_features) and
    `bias` of shape (out_features,), both plain attributes (assign them to tie weights:
    `head.weight = embedding.weight`; a shared parameter is counted once by parameters()).

    x of shape (..., in_features) gives y of shape (..., out_features). Both start uniform in
    +-1/sqrt(in_features), as PyTorch's default init. `rng` is an np.random.Generator, a seed or
    None (the global generator, tt.manual_seed). `dtype` defaults to float32, as in PyTorch; pass
    np.float64 for gradient checks. The lecture's layout is still readable as `layer.W`
    (= weight.T, on the tape) and `layer.b` (= bias); state dicts saved with "W"/"b" keys load.

    Examples
    --------
    >>> layer = tt.nn.Linear(3, 2, rng=0)
    >>> layer.weight.shape, layer.bias.shape
    ((2, 3), (2,))
    >>> layer(np.ones((4, 3))).shape
    (4, 2)
    """

    def __init__(self, in_features, out_features, bias=True, rng=None, dtype=np.float32):
        super().__init__()
        if in_features < 1 or out_features < 1:
            raise ValueError(f"Linear: in_features and out_features must be positive, got "
                             f"{in_features} and {out_features}")
        self.in_features, self.out_features = int(in_features), int(out_features)
        rng = generator(rng)
        bound = 1 / math.sqrt(in_features)
        # Drawn as the (in, out) matrix of earlier versions and stored transposed: a seed gives
        # the same model as before the layout changed.
        self.weight = Tensor(np.ascontiguousarray(rng.uniform(-bound, bound, (in_features, out_features)).T),
                             dtype=dtype, requires_grad=True, name="weight")
        self.bias = None
        if bias:
            self.bias = Tensor(rng.uniform(-bound, bound, (out_features,)), dtype=dtype,
                               requires_grad=True, name="bias")

    @property
    def W(self):
        """The lecture's (in_features, out_features) matrix: weight.T, recorded (train `weight`)."""
        return ops.transpose(self.weight)

    @W.setter
    def W(self, value):
        raise AttributeError("Linear.W is the read-only view weight.T (the lecture's (in, out) layout); "
                             "assign layer.weight, of shape (out_features, in_features), instead")

    @property
    def b(self):
        """The bias (the lecture's name)."""
        return self.bias

    @b.setter
    def b(self, value):
        self.bias = value

    def forward(self, x):
        x = cast_input(x, self.weight.dtype)
        if self.bias is None:
            return ops.matmul(x, ops.transpose(self.weight))
        return F.linear_prim(x, self.weight, self.bias)   # one tape entry

    def _upgrade_state(self, prefix, state):
        """Convert a state dict saved before the layout change ("W" (in, out), "b") in place."""
        old, new = prefix + "W", prefix + "weight"
        if old in state and new not in state:
            state[new] = np.asarray(state.pop(old)).T
            if prefix + "b" in state and prefix + "bias" not in state:
                state[prefix + "bias"] = state.pop(prefix + "b")
            return True
        return False

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, dtype={self.weight.dtype}")


class ReLU(Module):
    """max(x, 0), elementwise.

    Examples
    --------
    >>> tt.nn.ReLU()(tt.tensor([-1.0, 2.0]))
    tensor([0., 2.])
    """

    def forward(self, x):
        return ops.relu(x)


class Tanh(Module):
    """`tanh`, elementwise, as a module (as `torch.nn.Tanh`).

    Examples
    --------
    >>> tt.nn.Tanh()(tt.tensor([-1.0, 0.0, 1.0]))
    tensor([-0.76159416,  0.        ,  0.76159416])
    """
    def forward(self, x):
        return ops.tanh(x)


class Sigmoid(Module):
    """1 / (1 + exp(-x)), elementwise.

    Examples
    --------
    >>> tt.nn.Sigmoid()(tt.tensor([-1.0, 0.0, 1.0]))
    tensor([0.26894142, 0.5       , 0.73105858])
    """

    def forward(self, x):
        return ops.sigmoid(x)


class LeakyReLU(Module):
    """x where x > 0, negative_slope * x elsewhere.

    Examples
    --------
    >>> tt.nn.LeakyReLU(negative_slope=0.1)(tt.tensor([-2.0, 3.0]))
    tensor([-0.2,  3. ])
    """

    def __init__(self, negative_slope=0.01):
        super().__init__()
        self.negative_slope = float(negative_slope)

    def forward(self, x):
        return F.leaky_relu(x, self.negative_slope)


class GELU(Module):
    """x * Phi(x) (Phi the standard normal CDF), or its tanh approximation (approximate="tanh").

    Examples
    --------
    >>> x = tt.tensor([-1.0, 0.0, 1.0])
    >>> tt.nn.GELU()(x)
    tensor([-0.15865525,  0.        ,  0.84134475])
    >>> tt.nn.GELU(approximate="tanh")(x)
    tensor([-0.15880801,  0.        ,  0.84119199])
    """

    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, x):
        return F.gelu(x, self.approximate)


class Softplus(Module):
    """log(1 + exp(beta * x)) / beta, linear where beta * x > threshold (as PyTorch).

    Examples
    --------
    >>> tt.nn.Softplus()(tt.tensor([0.0, 30.0]))   # log(2); linear past the threshold
    tensor([ 0.69314718, 30.        ])
    """

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta, self.threshold = float(beta), float(threshold)

    def forward(self, x):
        return F.softplus(x, self.beta, self.threshold)


def _axis(axis, dim):
    return axis if dim is None else dim


class Softmax(Module):
    """softmax along `axis` (PyTorch's `dim=` is accepted too).

    Examples
    --------
    >>> tt.nn.Softmax(dim=1)(tt.tensor([[0.0, np.log(3.0)]]))
    tensor([[0.25, 0.75]])
    """

    def __init__(self, axis=-1, dim=None):
        super().__init__()
        self.axis = _axis(axis, dim)

    def forward(self, x):
        return ops.softmax(x, axis=self.axis)


class LogSoftmax(Softmax):
    """log_softmax along `axis` (PyTorch's `dim=` is accepted too).

    Examples
    --------
    >>> tt.nn.LogSoftmax(dim=1)(tt.tensor([[0.0, 0.0]]))
    tensor([[-0.69314718, -0.69314718]])
    """

    def forward(self, x):
        return ops.log_softmax(x, axis=self.axis)


class Identity(Module):
    """Returns its input (any arguments to the constructor are ignored, as in PyTorch).

    Examples
    --------
    >>> tt.nn.Identity()(tt.tensor([1.0, 2.0]))
    tensor([1., 2.])
    """

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x):
        return x


class Flatten(Module):
    """Merge the axes start_dim..end_dim into one: (N, C, H, W) -> (N, C*H*W) by default.

    Examples
    --------
    >>> tt.nn.Flatten()(tt.ones((2, 3, 4))).shape
    (2, 12)
    """

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = int(start_dim), int(end_dim)

    def forward(self, x):
        shape = x.shape if isinstance(x, Tensor) else np.shape(x)
        n = len(shape)
        if not (-n <= self.start_dim < n and -n <= self.end_dim < n):
            raise ValueError(f"Flatten: start_dim {self.start_dim} and end_dim {self.end_dim} must be "
                             f"axes of the input, of shape {tuple(shape)}")
        start, end = self.start_dim % n, self.end_dim % n
        if start > end:
            raise ValueError(f"Flatten: start_dim {self.start_dim} comes after end_dim {self.end_dim} "
                             f"for an input of shape {shape}")
        return ops.reshape(x, tuple(shape[:start]) + (-1,) + tuple(shape[end + 1:]))


class Dropout(Module):
    """In training mode, zero each element with probability p and scale the rest by 1 / (1 - p);
    the identity in eval() mode. `rng` is a seed or an np.random.Generator (it advances: each
    call draws a new mask; its state is in state_dict() as "rng"), or None: the global generator
    (tt.manual_seed; save tt.get_rng_state() for an exact resume). The mask is a constant of the
    product x * mask, so the backward pass uses exactly the forward's mask.

    Examples
    --------
    >>> drop = tt.nn.Dropout(p=0.5, rng=0)
    >>> drop.eval()(tt.ones(4))   # the identity in eval mode
    tensor([1., 1., 1., 1.])
    """

    _outputs = ("mask",)

    def __init__(self, p=0.5, rng=None):
        super().__init__()
        self.p = F._check_dropout(p)
        self.rng = generator(rng)

    def forward(self, x):
        if not self.training or self.p == 0.0:
            return x
        out, mask = F._dropout(x, self.p, self.rng)
        # kept for inspection: an output of the call, not state the module's structure (tt.compile's
        # guards) includes; while recorded, the traced array (a copy of it is a program line)
        self.__dict__["mask"] = traced_array(mask)
        return out

    def extra_repr(self):
        return f"p={self.p}"


def _fan_in_bound(fan_in):
    # PyTorch's kaiming_uniform_(a=sqrt(5)) for weights, and its bias init: both U(+-1/sqrt(fan_in)).
    return 1 / math.sqrt(fan_in)


class Conv2d(Module):
    """2-D convolution (cross-correlation, as PyTorch) of (N, in_channels, H, W) input.

    weight: (out_channels, in_channels / groups, kh, kw), bias: (out_channels,), both uniform in
    +-1/sqrt(in_channels / groups * kh * kw) as PyTorch's default init. Output (N, out, Ho, Wo)
    with Ho = (H + 2 * padding - dilation * (kh - 1) - 1) // stride + 1. One primitive
    (`nn.functional.conv2d`), one per group with `groups`. padding may be "valid" (0) or "same"
    (stride 1 and an odd dilated extent); an unbatched (C, H, W) image gives an unbatched
    result, as in PyTorch. `dilation` and `groups` are keywords here (after `dtype`).

    Examples
    --------
    >>> conv = tt.nn.Conv2d(1, 4, kernel_size=3, rng=0)
    >>> conv(np.ones((2, 1, 8, 8))).shape
    (2, 4, 6, 6)
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, bias=True,
                 rng=None, dtype=np.float32, dilation=1, groups=1, padding_mode="zeros"):
        super().__init__()
        self.padding_mode = _check_padding_mode(padding_mode, "Conv2d")
        if in_channels < 1 or out_channels < 1:
            raise ValueError(f"Conv2d: in_channels and out_channels must be positive, got "
                             f"{in_channels} and {out_channels}")
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.kernel_size = F._pair(kernel_size, "kernel_size")
        self.stride = F._pair(stride, "stride")
        self.dilation = F._pair(dilation, "dilation")
        self.groups = int(groups)
        if 0 in self.kernel_size or 0 in self.stride or 0 in self.dilation:
            raise ValueError(f"Conv2d: kernel_size, stride and dilation must be positive, got "
                             f"{self.kernel_size}, {self.stride} and {self.dilation}")
        if self.groups < 1 or in_channels % self.groups or out_channels % self.groups:
            raise ValueError(f"Conv2d: groups={groups} must divide in_channels ({in_channels}) and "
                             f"out_channels ({out_channels})")
        self.padding = _conv_padding(padding, F._spread(self.kernel_size, self.dilation), self.stride)
        rng = generator(rng)
        per_group = in_channels // self.groups
        bound = _fan_in_bound(per_group * self.kernel_size[0] * self.kernel_size[1])
        self.weight = _parameter(rng.uniform(-bound, bound, (out_channels, per_group) + self.kernel_size),
                                 dtype, "weight")
        self.bias = _parameter(rng.uniform(-bound, bound, (out_channels,)), dtype, "bias") if bias else None

    def forward(self, x):
        x = cast_input(x, self.weight.dtype)
        if len(x.shape) == 3:                       # one unbatched image
            return _unbatched(self, x)
        if len(x.shape) != 4 or x.shape[1] != self.in_channels:
            raise ValueError(f"Conv2d: expected input of shape (N, {self.in_channels}, H, W) or "
                             f"({self.in_channels}, H, W), got {tuple(x.shape)}")
        padding = self.padding
        if self.padding_mode != "zeros" and padding != (0, 0):   # the borders first, as PyTorch's
            x = F.pad(x, (padding[1], padding[1], padding[0], padding[0]), mode=self.padding_mode)
            padding = (0, 0)
        if self.dilation == (1, 1) and self.groups == 1:
            return F.conv2d_prim(x, self.weight, self.bias, stride=self.stride, padding=padding)
        return F.conv2d(x, self.weight, self.bias, self.stride, padding, self.dilation, self.groups)

    def extra_repr(self):
        extra = "" if self.dilation == (1, 1) else f", dilation={self.dilation}"
        extra += "" if self.groups == 1 else f", groups={self.groups}"
        extra += "" if self.padding_mode == "zeros" else f", padding_mode={self.padding_mode!r}"
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}{extra}, bias={self.bias is not None}")


def _check_padding_mode(mode, name):
    if mode not in ("zeros", "reflect", "replicate", "circular"):
        raise ValueError(f"{name}: padding_mode must be 'zeros', 'reflect', 'replicate' or 'circular', "
                         f"got {mode!r}")
    return mode


def _conv_padding(padding, kernel, stride):
    if padding == "valid":
        return (0, 0)
    if padding == "same":
        if stride != (1, 1) or kernel[0] % 2 == 0 or kernel[1] % 2 == 0:
            raise ValueError(f"Conv2d: padding='same' needs stride 1 and odd (dilated) kernel sizes here, "
                             f"got stride {stride} and kernel extent {kernel}; give the padding as numbers")
        return ((kernel[0] - 1) // 2, (kernel[1] - 1) // 2)
    return F._pair(padding, "padding")


def _unbatched(layer, x):
    """layer on one (C, H, W) image: as a batch of one, and back."""
    out = layer(x[None] if isinstance(x, np.ndarray) else ops.reshape(x, (1,) + tuple(x.shape)))
    return out[0] if isinstance(out, np.ndarray) else ops.reshape(out, tuple(out.shape[1:]))


class MaxPool2d(Module):
    """The maximum over each kernel window of (N, C, H, W) or (C, H, W); stride defaults to
    kernel_size. `padding` (at most half the kernel; -inf borders), `ceil_mode` and
    `return_indices` (the pair (output, flat indices) for MaxUnpool2d) as PyTorch's (dilation is
    not supported).

    Examples
    --------
    >>> tt.nn.MaxPool2d(2)(tt.ones((1, 1, 4, 4))).shape
    (1, 1, 2, 2)
    """

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        if dilation not in (1, (1, 1)):
            raise ValueError("MaxPool2d: dilation is not supported (dilation=1)")
        self.return_indices = bool(return_indices)
        self.kernel_size, self.stride = F._pool_args(kernel_size, stride)
        self.padding, self.ceil_mode = F._pair(padding, "padding"), bool(ceil_mode)
        F._pool_borders((1, 1) + tuple(max(k, 2 * p + 1) for k, p in zip(self.kernel_size, self.padding)),
                        self.kernel_size, self.stride, self.padding, False, type(self).__name__)

    def forward(self, x):
        if len(np.shape(x.data if isinstance(x, Tensor) else x)) == 3:
            if self.return_indices:
                shape = tuple(np.shape(x.data if isinstance(x, Tensor) else x))
                out, index = self(ops.reshape(x, (1,) + shape))
                return out[0], index[0]
            return _unbatched(self, x)
        if self.return_indices:
            return F.max_pool2d(x, self.kernel_size, self.stride, self.padding, ceil_mode=self.ceil_mode,
                                return_indices=True)
        if self.padding == (0, 0) and not self.ceil_mode:
            return F.max_pool2d_prim(x, kernel=self.kernel_size, stride=self.stride)
        return F.max_pool2d(x, self.kernel_size, self.stride, self.padding, ceil_mode=self.ceil_mode)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"ceil_mode={self.ceil_mode}")


class MaxUnpool2d(Module):
    """The partial inverse of MaxPool2d, as PyTorch's: forward(x, indices, output_size=None) puts
    each value back at its index in zeros of the unpooled size.

    Examples
    --------
    >>> x = tt.tensor([[[[1.0, 2.0], [3.0, 4.0]]]])
    >>> pooled, idx = tt.nn.functional.max_pool2d(x, 2, return_indices=True)
    >>> tt.nn.MaxUnpool2d(2)(pooled, idx)   # the maximum back in its place, zeros elsewhere
    tensor([[[[0., 0.],
              [0., 4.]]]])
    """

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size, self.stride = F._pool_args(kernel_size, stride)
        self.padding = F._pair(padding, "padding")

    def forward(self, x, indices, output_size=None):
        return F.max_unpool2d(x, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool2d(Module):
    """The mean over each kernel window of (N, C, H, W) or (C, H, W); stride defaults to
    kernel_size. `padding` (zero borders, at most half the kernel), `ceil_mode`,
    `count_include_pad` (default True: the zeros count in the mean) and `divisor_override`, as
    PyTorch's.

    Examples
    --------
    >>> x = tt.tensor(np.arange(16.0).reshape(1, 1, 4, 4))
    >>> tt.nn.AvgPool2d(2)(x)
    tensor([[[[ 2.5,  4.5],
              [10.5, 12.5]]]])
    """

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        super().__init__()
        self.kernel_size, self.stride = F._pool_args(kernel_size, stride)
        self.padding, self.ceil_mode = F._pair(padding, "padding"), bool(ceil_mode)
        self.count_include_pad, self.divisor_override = bool(count_include_pad), divisor_override
        F._pool_borders((1, 1) + tuple(max(k, 2 * p + 1) for k, p in zip(self.kernel_size, self.padding)),
                        self.kernel_size, self.stride, self.padding, False, type(self).__name__)

    def forward(self, x):
        if len(np.shape(x.data if isinstance(x, Tensor) else x)) == 3:
            return _unbatched(self, x)
        if self.padding == (0, 0) and not self.ceil_mode and self.divisor_override is None:
            return F.avg_pool2d_prim(x, kernel=self.kernel_size, stride=self.stride)
        return F.avg_pool2d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"ceil_mode={self.ceil_mode}, count_include_pad={self.count_include_pad}")


class LayerNorm(Module):
    """(x - mean) / sqrt(var + eps) * weight + bias over the last len(normalized_shape) axes
    (biased variance, as PyTorch); weight starts at 1, bias at 0.

    Examples
    --------
    >>> norm = tt.nn.LayerNorm(2)
    >>> norm(tt.tensor([[1.0, 3.0]])).numpy().round(4)
    array([[-1.,  1.]], dtype=float32)
    """

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, dtype=np.float32):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, Integral) else tuple(normalized_shape)
        self.normalized_shape, self.eps = tuple(int(n) for n in shape), float(eps)
        self.weight = self.bias = None
        self.dtype = np.dtype(dtype)
        if elementwise_affine:
            self.weight = _parameter(np.ones(shape), dtype, "weight")
            self.bias = _parameter(np.zeros(shape), dtype, "bias")

    def forward(self, x):
        dtype = self.weight.dtype if self.weight is not None else self.dtype
        x = cast_input(x, dtype)
        n = len(self.normalized_shape)
        if tuple(x.shape[len(x.shape) - n:]) != self.normalized_shape:
            raise ValueError(f"LayerNorm: input of shape {tuple(x.shape)} does not end in "
                             f"normalized_shape {self.normalized_shape}")
        axes = tuple(range(-n, 0))
        centred = x - ops.mean(x, axis=axes, keepdims=True)
        var = ops.mean(centred * centred, axis=axes, keepdims=True)
        y = centred / ops.sqrt(var + self.eps)
        return y if self.weight is None else y * self.weight + self.bias

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}"


class _BatchNorm(Module):
    """Batch normalisation over every axis but the channel axis 1 (see BatchNorm1d/2d)."""

    _ndims = ()

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 dtype=np.float32):
        super().__init__()
        self.num_features, self.eps = int(num_features), float(eps)
        if momentum is not None and not 0.0 <= float(momentum) <= 1.0:
            raise ValueError(f"{type(self).__name__}: momentum must be a number in [0, 1] or None "
                             f"(a cumulative average), got {momentum!r}")
        self.momentum = None if momentum is None else float(momentum)
        self.dtype = np.dtype(dtype)
        self.weight = self.bias = None
        if affine:
            self.weight = _parameter(np.ones(num_features), dtype, "weight")
            self.bias = _parameter(np.zeros(num_features), dtype, "bias")
        self.track_running_stats = bool(track_running_stats)
        if track_running_stats:
            self.register_buffer("running_mean", np.zeros(num_features, dtype))
            self.register_buffer("running_var", np.ones(num_features, dtype))
            self.register_buffer("num_batches_tracked", np.array(0, np.int64))

    def forward(self, x):
        x = cast_input(x, self.weight.dtype if self.weight is not None else self.dtype)
        if len(x.shape) not in self._ndims or x.shape[1] != self.num_features:
            raise ValueError(f"{type(self).__name__}: expected input with {self._ndims} axes and "
                             f"{self.num_features} channels on axis 1, got shape {tuple(x.shape)}")
        axes = (0,) + tuple(range(2, len(x.shape)))
        shape = (1, -1) + (1,) * (len(x.shape) - 2)          # a (C,) vector against axis 1
        if STATE.batch and (self.training or not self.track_running_stats):
            raise not_batchable(RuntimeError(
                f"{type(self).__name__} in training mode (or without running statistics) inside "
                f"tt.vmap: each example would be normalised by its own statistics, not the batch's, "
                f"and the running statistics would be updated once per vmap call. Choose one: "
                f"model.eval() (the running statistics, exactly: per-example gradients are then "
                f"exact), run the module on the whole batch outside vmap, or use a per-example "
                f"normalisation (LayerNorm)"))
        if self.training or not self.track_running_stats:
            n = math.prod(x.shape) // self.num_features
            if self.training and n <= 1:
                raise ValueError(f"{type(self).__name__}: expected more than 1 value per channel "
                                 f"when training, got input of shape {tuple(x.shape)}")
            centred = x - ops.mean(x, axis=axes, keepdims=True)
            var = ops.mean(centred * centred, axis=axes, keepdims=True)   # biased: normalising
            if self.training and self.track_running_stats:
                self._update_running(x, var, n)
            y = centred / ops.sqrt(var + self.eps)
        else:
            mean = ops.reshape(self.running_mean, shape)     # Tensors: tt.compile reads them per call
            y = (x - mean) / ops.sqrt(ops.reshape(self.running_var, shape) + self.eps)
        if self.weight is None:
            return y
        return y * ops.reshape(self.weight, shape) + ops.reshape(self.bias, shape)

    def _update_running(self, x, var, n):
        """running = (1 - momentum) * running + momentum * batch statistic, off the tape, with
        the unbiased batch variance (as PyTorch; momentum=None: 1 / batches seen)."""
        axes = (0,) + tuple(range(2, len(x.shape)))
        with no_grad():      # Tensor operators in place: tt.compile repeats them on every call
            self.num_batches_tracked += 1
            m = self.momentum
            mean = ops.mean(x, axis=axes)
            unbiased = ops.reshape(var, (-1,)) * (n / (n - 1))
            for buffer, batch in ((self.running_mean, mean), (self.running_var, unbiased)):
                if m is None:      # a cumulative moving average, as PyTorch: 1 / batches seen, a
                    # Tensor (tt.compile reads the count on every call), rounded to the buffer's
                    # dtype as a Python float would be
                    weight = 1.0 / ops.astype(self.num_batches_tracked, np.float64)
                    buffer *= ops.astype(1.0 - weight, buffer.dtype)
                    buffer += ops.astype(weight, buffer.dtype) * ops.astype(batch, buffer.dtype)
                else:
                    buffer *= 1 - m
                    buffer += m * ops.astype(batch, buffer.dtype)

    def extra_repr(self):
        return f"{self.num_features}, eps={self.eps}, momentum={self.momentum}"


class BatchNorm1d(_BatchNorm):
    """Batch norm of (N, C) or (N, C, L) input over N (and L), per channel C, as PyTorch:
    training mode normalises with the batch's biased variance and updates the buffers
    running_mean and running_var (unbiased variance, momentum 0.1); eval() mode uses them.

    Examples
    --------
    >>> bn = tt.nn.BatchNorm1d(2)
    >>> x = tt.tensor([[1.0, 10.0], [3.0, 30.0]], dtype=np.float32)
    >>> bn(x).numpy().round(4)              # training: the batch's statistics
    array([[-1., -1.],
           [ 1.,  1.]], dtype=float32)
    >>> bn.running_mean                     # moved 10 % of the way to the batch's mean
    tensor([0.2, 2. ], dtype=float32)
    >>> bn.eval()(x).shape                  # eval: the running statistics
    (2, 2)
    """

    _ndims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch norm of (N, C, H, W) input over N, H and W, per channel C (see BatchNorm1d).

    Examples
    --------
    >>> bn = tt.nn.BatchNorm2d(3)
    >>> y = bn(tt.randn(4, 3, 5, 5, rng=0))
    >>> y.shape
    (4, 3, 5, 5)
    >>> bool(np.allclose(y.numpy().mean(axis=(0, 2, 3)), 0, atol=1e-6))   # per channel: mean 0
    True
    """

    _ndims = (4,)


class Embedding(Module):
    """Rows of weight (num_embeddings, embedding_dim), N(0, 1) at start as PyTorch, by integer
    index: an index array of shape s gives s + (embedding_dim,). Repeated indices accumulate
    their gradients. With `padding_idx` (negative counts from the end) that row starts at zero
    and gets no gradient (a zero one), as PyTorch's: it stays what it is through training.

    Examples
    --------
    >>> emb = tt.nn.Embedding(10, 3, rng=0)
    >>> emb(np.array([[1, 2], [3, 1]])).shape
    (2, 2, 3)
    """

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, rng=None, dtype=np.float32):
        super().__init__()
        self.num_embeddings, self.embedding_dim = int(num_embeddings), int(embedding_dim)
        if isinstance(padding_idx, (np.random.Generator, np.random.SeedSequence)):
            rng, padding_idx = padding_idx, None      # the old third positional argument
        if padding_idx is not None:
            if not -self.num_embeddings <= int(padding_idx) < self.num_embeddings:
                raise ValueError(f"Embedding: padding_idx must lie in [-{num_embeddings}, "
                                 f"{num_embeddings}), got {padding_idx}")
            padding_idx = int(padding_idx) % self.num_embeddings
        self.padding_idx = padding_idx
        rng = generator(rng)
        self.weight = _parameter(rng.standard_normal((num_embeddings, embedding_dim)), dtype, "weight")
        if padding_idx is not None:
            self.weight.data[padding_idx] = 0

    def forward(self, index):
        if self.padding_idx is not None:
            # the padding rows get no gradient; the mask is computed from each call's indices (a
            # test of the raw indices here would be a constant to tt.compile: a frozen mask)
            return F.embedding(index, self.weight, self.padding_idx)
        index = backend.asarray(index.data if isinstance(index, Tensor) else index, like=self.weight,
                                what="Embedding's indices")
        if index.dtype.kind not in "iu":
            raise TypeError(f"Embedding: indices must be integers, got dtype {index.dtype}")
        return F.embedding_prim(self.weight, index=index)   # checks the range on every call

    def extra_repr(self):
        pad = "" if self.padding_idx is None else f", padding_idx={self.padding_idx}"
        return f"{self.num_embeddings}, {self.embedding_dim}{pad}"


class Sequential(Module):
    """Layers applied in order: Sequential(a, b, c)(x) == c(b(a(x))).

    The layers are attributes named "0", "1", ... (as in PyTorch), so parameter names read
    "0.weight", "2.bias". Indexable (an int gives a layer, a slice a Sequential of the same layers),
    with len() and iteration.

    Examples
    --------
    >>> model = tt.nn.Sequential(tt.nn.Linear(4, 8, rng=0), tt.nn.ReLU(), tt.nn.Linear(8, 3, rng=1))
    >>> model(np.ones((2, 4))).shape
    (2, 3)
    >>> list(model.state_dict())
    ['0.weight', '0.bias', '2.weight', '2.bias']
    """

    def __init__(self, *layers):
        super().__init__()
        if len(layers) == 1 and isinstance(layers[0], dict):   # PyTorch's Sequential(OrderedDict(...))
            named = [(str(name), layer) for name, layer in layers[0].items()]
        else:
            named = [(str(i), layer) for i, layer in enumerate(layers)]
        for name, layer in named:
            if not callable(layer):
                raise TypeError(f"Sequential: layer {name} is a {type(layer).__name__}, not callable")
            setattr(self, name, layer)
        self._names = tuple(name for name, _ in named)

    def _layers(self):
        names = self.__dict__.get("_names")
        if names is None:            # made without __init__ (a subclass's own): the digit names
            return [value for key, value in vars(self).items() if key.isdigit()]
        return [getattr(self, name) for name in names]

    def append(self, layer):
        """Add `layer` at the end (named by its position, as PyTorch); returns self."""
        names = self.__dict__.get("_names")
        if names is None:
            names = tuple(key for key in vars(self) if key.isdigit())
        name = str(len(names))
        setattr(self, name, layer)
        self._names = names + (name,)
        return self

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


class ModuleList(Module):
    """A list of modules whose parameters the parent finds (named "0.weight", "1.bias", ...):
    indexable, len(), iteration, append, extend. It has no forward of its own.

    Examples
    --------
    >>> class Stack(tt.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.layers = tt.nn.ModuleList([tt.nn.Linear(2, 2, rng=i) for i in range(3)])
    ...     def forward(self, x):
    ...         for layer in self.layers:
    ...             x = layer(x)
    ...         return x
    >>> model = Stack()
    >>> len(model.layers), [name for name, _ in model.named_parameters()][:2]
    (3, ['layers.0.weight', 'layers.0.bias'])
    >>> model(np.ones((4, 2))).shape
    (4, 2)
    """

    def __init__(self, modules=()):
        super().__init__()
        self.extend(modules)

    def _modules(self):
        return [value for key, value in vars(self).items() if key.isdigit()]

    def append(self, module):
        if not isinstance(module, Module):
            raise TypeError(f"ModuleList: {type(module).__name__} is not a Module")
        setattr(self, str(len(self)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def __getitem__(self, index):
        modules = self._modules()
        return ModuleList(modules[index]) if isinstance(index, slice) else modules[index]

    def __setitem__(self, index, module):
        if not isinstance(module, Module):
            raise TypeError(f"ModuleList: {type(module).__name__} is not a Module")
        setattr(self, str(range(len(self))[index]), module)

    def __len__(self):
        return len(self._modules())

    def __iter__(self):
        return iter(self._modules())

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleList has no forward: iterate over it in your own forward()")


class _Keyed:
    """The mapping methods ModuleDict and ParameterDict share: entries are attributes in the
    order of `_keys`. Deleting one bumps the module's structure version (tt.compile's guards)."""

    def __delitem__(self, key):
        if key not in self._keys:
            raise KeyError(key)
        del self.__dict__[key]
        object.__setattr__(self, "_keys", tuple(k for k in self._keys if k != key))
        self._bump()

    def _put(self, key, value):
        """Store an entry (a new one or a replacement): a new structure version either way."""
        object.__setattr__(self, key, value)
        if key not in self._keys:
            object.__setattr__(self, "_keys", self._keys + (key,))
        self._bump()

    def _bump(self):
        _STRUCTURE[0] += 1
        object.__setattr__(self, "_structure", _STRUCTURE[0])

    def __contains__(self, key):
        return key in self._keys

    def __len__(self):
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def keys(self):
        return list(self._keys)

    def values(self):
        return [self.__dict__[k] for k in self._keys]

    def items(self):
        return [(k, self.__dict__[k]) for k in self._keys]

    def update(self, entries):
        pairs = entries.items() if hasattr(entries, "items") else entries
        for key, value in pairs:
            self[key] = value


class ModuleDict(_Keyed, Module):
    """An ordered dict of modules whose parameters the parent finds, named "key.weight", as
    PyTorch's: indexing by key, assignment, `del`, `in`, len(), iteration over the keys,
    keys(), values(), items(), update(), pop(), clear(). It has no forward of its own.

    Examples
    --------
    >>> heads = tt.nn.ModuleDict({"label": tt.nn.Linear(4, 3, rng=0), "box": tt.nn.Linear(4, 2, rng=1)})
    >>> list(heads.keys())
    ['label', 'box']
    >>> heads["box"](np.ones((1, 4))).shape
    (1, 2)
    >>> sorted(heads.state_dict())
    ['box.bias', 'box.weight', 'label.bias', 'label.weight']
    """

    def __init__(self, modules=None):
        super().__init__()
        object.__setattr__(self, "_keys", ())
        if modules is not None:
            self.update(modules)

    def _check(self, key, module):
        if not isinstance(key, str):
            raise TypeError(f"ModuleDict: keys must be strings, got {type(key).__name__}")
        taken = key not in self._keys and (key in vars(self) or hasattr(type(self), key))
        if "." in key or key == "" or taken:
            raise KeyError(f"ModuleDict: {key!r} cannot be a key (empty, has a '.', or is an attribute "
                           f"of ModuleDict)")
        if not isinstance(module, Module):
            raise TypeError(f"ModuleDict: the value for {key!r} is a {type(module).__name__}, not a Module")

    def __getitem__(self, key):
        if key not in self._keys:
            raise KeyError(key)
        return self.__dict__[key]

    def __setitem__(self, key, module):
        self._check(key, module)
        self._put(key, module)


    def pop(self, key):
        module = self[key]
        del self[key]
        return module

    def clear(self):
        for key in list(self._keys):
            del self[key]

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleDict has no forward: pick its modules in your own forward()")


# ----- PyTorch's activations, containers and shapes added in issue 31 ------------------------------
class SiLU(Module):
    """x * sigmoid(x) (swish), as PyTorch's nn.SiLU.

    Examples
    --------
    >>> tt.nn.SiLU()(tt.tensor([0.0, 1.0]))
    tensor([0.        , 0.73105858])
    """

    def forward(self, x):
        return F.silu(x)


class Mish(Module):
    """x * tanh(softplus(x)), as PyTorch's nn.Mish.

    Examples
    --------
    >>> tt.nn.Mish()(tt.tensor([0.0, 1.0]))
    tensor([0.        , 0.86509839])
    """

    def forward(self, x):
        return F.mish(x)


class ELU(Module):
    """x where x > 0, alpha (exp(x) - 1) elsewhere, as PyTorch's nn.ELU.

    Examples
    --------
    >>> tt.nn.ELU()(tt.tensor([-1.0, 2.0]))
    tensor([-0.63212056,  2.        ])
    """

    def __init__(self, alpha=1.0):
        super().__init__()
        self.alpha = float(alpha)

    def forward(self, x):
        return F.elu(x, self.alpha)

    def extra_repr(self):
        return f"alpha={self.alpha}"


class PReLU(Module):
    """max(0, x) + weight * min(0, x) with a learned slope: one (num_parameters=1) or one per
    channel (axis 1), starting at `init` (0.25), as PyTorch's nn.PReLU ("weight").

    Examples
    --------
    >>> act = tt.nn.PReLU()
    >>> act.weight
    tensor([0.25], dtype=float32, requires_grad=True, name='weight')
    >>> act(tt.tensor([-2.0, 3.0], dtype=np.float32))
    tensor([-0.5,  3. ], dtype=float32, requires_grad=True)
    """

    def __init__(self, num_parameters=1, init=0.25, dtype=np.float32):
        super().__init__()
        self.num_parameters = int(num_parameters)
        self.weight = _parameter(np.full(self.num_parameters, float(init)), dtype, "weight")

    def forward(self, x):
        x = cast_input(x, self.weight.data.dtype)
        if self.num_parameters > 1 and (len(x.shape) < 2 or x.shape[1] != self.num_parameters):
            raise ValueError(f"PReLU: {self.num_parameters} parameters need {self.num_parameters} channels "
                             f"on axis 1, got input of shape {tuple(x.shape)}")
        return F.prelu(x, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class Unflatten(Module):
    """Split axis `dim` into `unflattened_size`, as PyTorch's nn.Unflatten.

    Examples
    --------
    >>> tt.nn.Unflatten(1, (2, 3))(tt.ones((4, 6))).shape
    (4, 2, 3)
    """

    def __init__(self, dim, unflattened_size):
        super().__init__()
        self.dim, self.unflattened_size = int(dim), tuple(int(n) for n in unflattened_size)

    def forward(self, x):
        shape = tuple(x.shape) if isinstance(x, Tensor) else np.shape(x)
        d = self.dim % len(shape)
        if math.prod(self.unflattened_size) != shape[d] and -1 not in self.unflattened_size:
            raise ValueError(f"Unflatten: unflattened_size {self.unflattened_size} does not multiply to "
                             f"axis {self.dim}'s size {shape[d]} (input shape {shape})")
        return ops.reshape(x, shape[:d] + self.unflattened_size + shape[d + 1:])


class Dropout2d(Module):
    """Zero whole channels of (N, C, H, W) (or (C, H, W)) with probability p in training mode,
    scaling the rest by 1 / (1 - p); the identity in eval(). As PyTorch's nn.Dropout2d.

    Examples
    --------
    >>> drop = tt.nn.Dropout2d(p=0.5, rng=0)
    >>> y = drop(tt.ones((1, 4, 2, 2)))
    >>> y.numpy()[0].reshape(4, -1)         # each channel kept (scaled by 2) or zeroed whole
    array([[2., 2., 2., 2.],
           [0., 0., 0., 0.],
           [0., 0., 0., 0.],
           [0., 0., 0., 0.]])
    >>> drop.eval()(tt.ones((1, 4, 2, 2))).numpy().max().item()   # the identity in eval mode
    1.0
    """

    def __init__(self, p=0.5, rng=None):
        super().__init__()
        self.p = F._check_dropout(p)
        self.rng = generator(rng)

    def forward(self, x):
        return F.dropout2d(x, self.p, self.training, self.rng)

    def extra_repr(self):
        return f"p={self.p}"


def _as_parameter(value, name):
    if isinstance(value, Tensor):
        if value._prim is not None:
            raise ValueError(f"{name}: a parameter must be a leaf Tensor, got one computed on the tape "
                             f"(detach() it, or wrap it in nn.Parameter)")
        return value if value.requires_grad or isinstance(value, Parameter) else Parameter(value)
    return Parameter(backend.asarray(value))


class ParameterList(Module):
    """A list of parameters registered with the module that holds it (named "0", "1", ...), as
    PyTorch's nn.ParameterList: indexing, len(), iteration, append, extend. Arrays become
    Parameters.

    Examples
    --------
    >>> class Poly(tt.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.coef = tt.nn.ParameterList([np.array(1.0), np.array(2.0), np.array(3.0)])
    ...     def forward(self, x):
    ...         return sum(c * x**i for i, c in enumerate(self.coef))
    >>> p = Poly()
    >>> [name for name, _ in p.named_parameters()]
    ['coef.0', 'coef.1', 'coef.2']
    >>> p(tt.tensor(2.0))                   # 1 + 2 * 2 + 3 * 4
    tensor(17., requires_grad=True)
    """

    def __init__(self, values=None):
        super().__init__()
        object.__setattr__(self, "_size", 0)
        if values is not None:
            self.extend(values)

    def append(self, value):
        setattr(self, str(self._size), _as_parameter(value, "ParameterList"))
        object.__setattr__(self, "_size", self._size + 1)
        return self

    def extend(self, values):
        for v in values:
            self.append(v)
        return self

    def __getitem__(self, index):
        if isinstance(index, slice):
            return ParameterList([self[i] for i in range(self._size)[index]])
        return getattr(self, str(range(self._size)[index]))

    def __setitem__(self, index, value):
        setattr(self, str(range(self._size)[index]), _as_parameter(value, "ParameterList"))

    def __len__(self):
        return self._size

    def __iter__(self):
        return (getattr(self, str(i)) for i in range(self._size))

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ParameterList has no forward: use its parameters in your own forward()")


class ParameterDict(_Keyed, Module):
    """An ordered dict of parameters registered with the module that holds it (named by key), as
    PyTorch's nn.ParameterDict: indexing, assignment, `in`, len(), keys(), values(), items(),
    update().

    Examples
    --------
    >>> class Scale(tt.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.params = tt.nn.ParameterDict({"gain": np.array(2.0), "shift": np.array(1.0)})
    ...     def forward(self, x):
    ...         return x * self.params["gain"] + self.params["shift"]
    >>> m = Scale()
    >>> [name for name, _ in m.named_parameters()]
    ['params.gain', 'params.shift']
    >>> m(tt.tensor([1.0, 2.0]))
    tensor([3., 5.], requires_grad=True)
    """

    def __init__(self, parameters=None):
        super().__init__()
        object.__setattr__(self, "_keys", ())
        if parameters is not None:
            self.update(parameters)

    def __setitem__(self, key, value):
        if not isinstance(key, str) or not key or "." in key or (key not in self._keys and key in vars(self)):
            raise KeyError(f"ParameterDict: {key!r} cannot be a key (a non-empty string without '.', not an "
                           f"attribute of ParameterDict)")
        self._put(key, _as_parameter(value, "ParameterDict"))

    def __getitem__(self, key):
        if key not in self._keys:
            raise KeyError(key)
        return self.__dict__[key]


    def forward(self, *args, **kwargs):
        raise NotImplementedError("ParameterDict has no forward: use its parameters in your own forward()")


# ----- resampling ---------------------------------------------------------------------------------
class Upsample(Module):
    """F.interpolate as a layer, as PyTorch's nn.Upsample(size=None, scale_factor=None,
    mode="nearest", align_corners=None, recompute_scale_factor=None).

    Examples
    --------
    >>> x = tt.tensor([[[[1.0, 2.0], [3.0, 4.0]]]])
    >>> tt.nn.Upsample(scale_factor=2)(x)
    tensor([[[[1., 1., 2., 2.],
              [1., 1., 2., 2.],
              [3., 3., 4., 4.],
              [3., 3., 4., 4.]]]])
    >>> tt.nn.Upsample(size=(3, 3), mode="bilinear", align_corners=True)(x).shape
    (1, 1, 3, 3)
    """

    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        self.size, self.scale_factor, self.mode = size, scale_factor, mode
        self.align_corners, self.recompute_scale_factor = align_corners, recompute_scale_factor

    def forward(self, x):
        return F.interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners,
                             self.recompute_scale_factor)

    def extra_repr(self):
        what = f"size={self.size}" if self.size is not None else f"scale_factor={self.scale_factor}"
        return f"{what}, mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """Upsample(size, scale_factor, mode="nearest"), PyTorch's older spelling.

    Examples
    --------
    >>> tt.nn.UpsamplingNearest2d(scale_factor=2)(tt.ones((1, 3, 4, 4))).shape
    (1, 3, 8, 8)
    """

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, "nearest")


class UpsamplingBilinear2d(Upsample):
    """Bilinear with align_corners=True, as PyTorch's.

    Examples
    --------
    >>> x = tt.tensor([[[[0.0, 2.0]]]])
    >>> tt.nn.UpsamplingBilinear2d(size=(1, 3))(x)   # the corners stay, the middle is their mean
    tensor([[[[0., 1., 2.]]]])
    """

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, "bilinear", align_corners=True)


class AdaptiveAvgPool2d(Module):
    """Average (N, C, H, W) or (C, H, W) into output_size bins (int, pair, None keeps an axis), with
    PyTorch's bins [floor(i H / h), ceil((i + 1) H / h)).

    Examples
    --------
    >>> pool = tt.nn.AdaptiveAvgPool2d((1, 1))   # global average pooling, whatever the image size
    >>> pool(tt.ones((2, 8, 7, 5))).shape
    (2, 8, 1, 1)
    """

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, x):
        return F.adaptive_avg_pool2d(x, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(AdaptiveAvgPool2d):
    """The mean over output_size adaptive bins of the last axis of (N, C, L) or (C, L) (PyTorch's
    bins).

    Examples
    --------
    >>> x = tt.tensor([[[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]]])
    >>> tt.nn.AdaptiveAvgPool1d(2)(x)
    tensor([[[2., 5.]]])
    """

    def forward(self, x):
        return F.adaptive_avg_pool1d(x, self.output_size)


class AdaptiveMaxPool2d(AdaptiveAvgPool2d):
    """The maximum over each of PyTorch's adaptive bins; with return_indices the pair (output,
    flat (H, W) indices), as PyTorch's.

    Examples
    --------
    >>> x = tt.tensor(np.arange(16.0).reshape(1, 1, 4, 4))
    >>> out, idx = tt.nn.AdaptiveMaxPool2d(2, return_indices=True)(x)
    >>> out
    tensor([[[[ 5.,  7.],
              [13., 15.]]]])
    >>> idx
    tensor([[[[ 5,  7],
              [13, 15]]]], dtype=int64)
    """

    def __init__(self, output_size, return_indices=False):
        super().__init__(output_size)
        self.return_indices = bool(return_indices)

    def forward(self, x):
        return F.adaptive_max_pool2d(x, self.output_size, self.return_indices)
