"""GroupNorm, InstanceNorm1d/2d, RMSNorm, as PyTorch's (names, defaults, buffers and state-dict
keys); their forwards are the functional forms in nn.functional, composed from primitives."""

import math
from numbers import Integral

import numpy as np

from .. import ops
from . import functional as F
from .layers import _parameter
from .module import Module, cast_input


class GroupNorm(Module):
    """Normalise (N, C, *) input over each of num_groups groups of channels (and all positions),
    then weight and bias per channel (1 and 0 at start), as PyTorch's nn.GroupNorm.

    Examples
    --------
    >>> gn = tt.nn.GroupNorm(num_groups=2, num_channels=4)
    >>> y = gn(tt.randn(3, 4, 5, rng=0))
    >>> groups = y.numpy().reshape(3, 2, 10)   # each sample's each group of 2 channels
    >>> bool(np.allclose(groups.mean(axis=-1), 0, atol=1e-6))
    True
    >>> bool(np.allclose(groups.std(axis=-1), 1, atol=1e-3))
    True
    """

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, dtype=np.float32):
        super().__init__()
        self.num_groups, self.num_channels, self.eps = int(num_groups), int(num_channels), float(eps)
        if self.num_groups < 1 or self.num_channels % self.num_groups:
            raise ValueError(
                f"GroupNorm: num_channels ({num_channels}) must be divisible by num_groups ({num_groups})"
            )
        self.affine = bool(affine)
        self.dtype = np.dtype(dtype)
        self.weight = _parameter(np.ones(self.num_channels), dtype, "weight") if affine else None
        self.bias = _parameter(np.zeros(self.num_channels), dtype, "bias") if affine else None

    def forward(self, x):
        x = cast_input(x, self.dtype if self.weight is None else self.weight.data.dtype)
        if len(x.shape) < 2 or x.shape[1] != self.num_channels:
            raise ValueError(
                f"GroupNorm: expected (N, {self.num_channels}, *) input, got shape {tuple(x.shape)}"
            )
        return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class _InstanceNorm(Module):
    _ndim = 4

    def __init__(
        self, num_features, eps=1e-5, momentum=0.1, affine=False, track_running_stats=False, dtype=np.float32
    ):
        super().__init__()
        self.num_features, self.eps, self.momentum = int(num_features), float(eps), float(momentum)
        self.affine, self.track_running_stats = bool(affine), bool(track_running_stats)
        self.dtype = np.dtype(dtype)
        self.weight = _parameter(np.ones(self.num_features), dtype, "weight") if affine else None
        self.bias = _parameter(np.zeros(self.num_features), dtype, "bias") if affine else None
        if self.track_running_stats:
            self.register_buffer("running_mean", np.zeros(self.num_features, dtype))
            self.register_buffer("running_var", np.ones(self.num_features, dtype))
            self.register_buffer("num_batches_tracked", np.array(0, np.int64))

    def forward(self, x):
        name = type(self).__name__
        x = cast_input(x, self.dtype if self.weight is None else self.weight.data.dtype)
        n = self._ndim
        if len(x.shape) not in (n - 1, n) or x.shape[-n + 1] != self.num_features:
            raise ValueError(
                f"{name}: expected ({'N, ' if n else ''}{self.num_features}, ...) input with "
                f"{n} axes (or {n - 1} unbatched), got shape {tuple(x.shape)}"
            )
        if len(x.shape) == n - 1:  # unbatched: a batch of one
            return ops.reshape(self(ops.reshape(x, (1,) + tuple(x.shape))), tuple(x.shape))
        if self.training and math.prod(x.shape[2:]) <= 1:
            raise ValueError(
                f"{name}: expected more than 1 spatial element when training, got shape {tuple(x.shape)}"
            )
        if self.training or not self.track_running_stats:
            stats = (None, None)
            if self.training and self.track_running_stats:  # updated in place, as PyTorch's
                self.num_batches_tracked += 1
                stats = (self.running_mean, self.running_var)
            return F.instance_norm(x, *stats, self.weight, self.bias, True, self.momentum, self.eps)
        return F.instance_norm(
            x, self.running_mean, self.running_var, self.weight, self.bias, False, self.momentum, self.eps
        )

    def extra_repr(self):
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
            f"track_running_stats={self.track_running_stats}"
        )


class InstanceNorm2d(_InstanceNorm):
    """Normalise each sample's each channel of (N, C, H, W) over H and W, as PyTorch's
    nn.InstanceNorm2d: affine=False and track_running_stats=False by default.

    Examples
    --------
    >>> norm = tt.nn.InstanceNorm2d(3)
    >>> y = norm(tt.randn(2, 3, 4, 4, rng=0))
    >>> bool(np.allclose(y.numpy().mean(axis=(2, 3)), 0, atol=1e-6))   # every sample's every channel
    True
    """

    _ndim = 4


class InstanceNorm1d(_InstanceNorm):
    """nn.InstanceNorm2d's 1-D twin, on (N, C, L).

    Examples
    --------
    >>> norm = tt.nn.InstanceNorm1d(2)
    >>> norm(tt.tensor([[[1.0, 3.0], [0.0, 10.0]]])).numpy().round(4)   # each channel on its own
    array([[[-1.,  1.],
            [-1.,  1.]]], dtype=float32)
    """

    _ndim = 3


class RMSNorm(Module):
    """x / sqrt(mean(x^2 over the last len(normalized_shape) axes) + eps) * weight, as PyTorch's
    nn.RMSNorm (weight starts at 1; eps=None is the dtype's machine epsilon).

    Examples
    --------
    >>> norm = tt.nn.RMSNorm(2, eps=0.0)
    >>> norm(tt.tensor([[3.0, 4.0]])).numpy().round(4)   # divided by sqrt((9 + 16) / 2)
    array([[0.8485, 1.1314]], dtype=float32)
    """

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, dtype=np.float32):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, Integral) else tuple(normalized_shape)
        self.normalized_shape = tuple(int(n) for n in shape)
        self.eps = None if eps is None else float(eps)
        self.dtype = np.dtype(dtype)
        self.weight = (
            _parameter(np.ones(self.normalized_shape), dtype, "weight") if elementwise_affine else None
        )

    def forward(self, x):
        x = cast_input(x, self.dtype if self.weight is None else self.weight.data.dtype)
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.weight is not None}"
