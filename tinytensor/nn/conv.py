"""Conv1d, ConvTranspose1d, ConvTranspose2d, as PyTorch's: names, layouts, initialisation and
state-dict keys ("weight", "bias"), so a PyTorch state dict loads as it is. Their forwards are
`nn.functional.conv1d`, `conv_transpose1d`, `conv_transpose2d` (composed from the conv2d
primitives, so both modes come from those rules)."""

import math

import numpy as np

from ..rng import generator
from . import functional as F
from .layers import _check_padding_mode, _parameter
from .module import Module, cast_input


def _check_channels(name, in_channels, out_channels, groups):
    if in_channels < 1 or out_channels < 1:
        raise ValueError(
            f"{name}: in_channels and out_channels must be positive, got {in_channels} and {out_channels}"
        )
    if groups < 1 or in_channels % groups or out_channels % groups:
        raise ValueError(
            f"{name}: groups={groups} must divide in_channels ({in_channels}) and "
            f"out_channels ({out_channels})"
        )


class Conv1d(Module):
    """1-D convolution (cross-correlation) of (N, in_channels, L) or (in_channels, L) input:
    weight (out_channels, in_channels / groups, kernel_size), bias (out_channels,), both uniform in
    +-1/sqrt(in_channels / groups * kernel_size) as PyTorch's. padding: a number, "valid" or "same"
    (stride 1); padding_mode "zeros", "reflect", "replicate" or "circular". Arguments in PyTorch's
    order.

    Examples
    --------
    >>> conv = tt.nn.Conv1d(2, 4, kernel_size=3, padding="same", rng=0)
    >>> conv.weight.shape
    (4, 2, 3)
    >>> conv(tt.ones((8, 2, 10))).shape     # (batch, channels, length)
    (8, 4, 10)
    """

    def __init__(
        self,
        in_channels,
        out_channels,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups=1,
        bias=True,
        padding_mode="zeros",
        rng=None,
        dtype=np.float32,
    ):
        super().__init__()
        self.padding_mode = _check_padding_mode(padding_mode, "Conv1d")
        self.in_channels, self.out_channels, self.groups = int(in_channels), int(out_channels), int(groups)
        _check_channels("Conv1d", self.in_channels, self.out_channels, self.groups)
        self.kernel_size = (F._single(kernel_size, "Conv1d: kernel_size"),)
        self.stride = (F._single(stride, "Conv1d: stride"),)
        self.dilation = (F._single(dilation, "Conv1d: dilation"),)
        if 0 in self.kernel_size + self.stride + self.dilation:
            raise ValueError(
                f"Conv1d: kernel_size, stride and dilation must be positive, got "
                f"{kernel_size}, {stride} and {dilation}"
            )
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Conv1d: padding must be a number, 'same' or 'valid', got {padding!r}")
            if padding == "same" and self.stride != (1,):
                raise ValueError("Conv1d: padding='same' needs stride 1")
            self.padding = padding
        else:
            self.padding = (F._single(padding, "Conv1d: padding"),)
        rng = generator(rng)
        bound = 1 / math.sqrt(self.in_channels // self.groups * self.kernel_size[0])
        self.weight = _parameter(
            rng.uniform(
                -bound, bound, (self.out_channels, self.in_channels // self.groups, self.kernel_size[0])
            ),
            dtype,
            "weight",
        )
        self.bias = (
            _parameter(rng.uniform(-bound, bound, (self.out_channels,)), dtype, "bias") if bias else None
        )

    def forward(self, x):
        x = cast_input(x, self.weight.data.dtype)
        if len(x.shape) not in (2, 3) or x.shape[-2] != self.in_channels:
            raise ValueError(
                f"Conv1d: expected input of shape (N, {self.in_channels}, L) or "
                f"({self.in_channels}, L), got {tuple(x.shape)}"
            )
        padding = self.padding if isinstance(self.padding, str) else self.padding[0]
        if self.padding_mode != "zeros" and padding not in (0, "valid"):  # the borders first, as PyTorch's
            if padding == "same":
                ((left, right),) = F._same_padding(self.kernel_size, self.dilation, self.stride, "Conv1d")
            else:
                left = right = padding
            x, padding = F.pad(x, (left, right), mode=self.padding_mode), 0
        return F.conv1d(x, self.weight, self.bias, self.stride[0], padding, self.dilation[0], self.groups)

    def extra_repr(self):
        return (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}, padding={self.padding}, bias={self.bias is not None}"
        )


class _ConvTransposeNd(Module):
    _dims = 2

    def __init__(
        self,
        in_channels,
        out_channels,
        kernel_size,
        stride=1,
        padding=0,
        output_padding=0,
        groups=1,
        bias=True,
        dilation=1,
        rng=None,
        dtype=np.float32,
    ):
        super().__init__()
        name = type(self).__name__
        self.in_channels, self.out_channels, self.groups = int(in_channels), int(out_channels), int(groups)
        _check_channels(name, self.in_channels, self.out_channels, self.groups)
        norm = F._pair if self._dims == 2 else (lambda v, what: (F._single(v, f"{name}: {what}"),))
        self.kernel_size, self.stride = norm(kernel_size, "kernel_size"), norm(stride, "stride")
        self.padding, self.output_padding = norm(padding, "padding"), norm(output_padding, "output_padding")
        self.dilation = norm(dilation, "dilation")
        if 0 in self.kernel_size + self.stride + self.dilation:
            raise ValueError(
                f"{name}: kernel_size, stride and dilation must be positive, got "
                f"{kernel_size}, {stride} and {dilation}"
            )
        for op, s, d in zip(self.output_padding, self.stride, self.dilation):
            if op >= s and op >= d:
                raise ValueError(
                    f"{name}: output_padding {output_padding} must be smaller than either "
                    f"stride {stride} or dilation {dilation}"
                )
        rng = generator(rng)
        # PyTorch's fan-in for this layout is weight.shape[1] * kernel area = out / groups * area
        bound = 1 / math.sqrt(self.out_channels // self.groups * math.prod(self.kernel_size))
        shape = (self.in_channels, self.out_channels // self.groups) + self.kernel_size
        self.weight = _parameter(rng.uniform(-bound, bound, shape), dtype, "weight")
        self.bias = (
            _parameter(rng.uniform(-bound, bound, (self.out_channels,)), dtype, "bias") if bias else None
        )

    def forward(self, x, output_size=None):
        name = type(self).__name__
        x = cast_input(x, self.weight.data.dtype)
        d = self._dims
        if len(x.shape) not in (d + 1, d + 2) or x.shape[-d - 1] != self.in_channels:
            spatial = "H, W" if d == 2 else "L"
            raise ValueError(
                f"{name}: expected input of shape (N, {self.in_channels}, {spatial}) or "
                f"({self.in_channels}, {spatial}), got {tuple(x.shape)}"
            )
        output_padding = self.output_padding
        if output_size is not None:  # PyTorch's: the output_padding that gives this size
            size = tuple(output_size)[-d:]
            base = [
                (n - 1) * s - 2 * p + dl * (k - 1) + 1
                for n, s, p, dl, k in zip(
                    x.shape[-d:], self.stride, self.padding, self.dilation, self.kernel_size
                )
            ]
            output_padding = tuple(int(want - b) for want, b in zip(size, base))
            if any(
                op < 0 or (op >= s and op >= dl)
                for op, s, dl in zip(output_padding, self.stride, self.dilation)
            ):
                raise ValueError(
                    f"{name}: output_size {tuple(output_size)} cannot be reached from input "
                    f"{tuple(x.shape)} (the sizes within reach start at {tuple(base)})"
                )
        if d == 2:
            return F.conv_transpose2d(
                x,
                self.weight,
                self.bias,
                self.stride,
                self.padding,
                output_padding,
                self.groups,
                self.dilation,
            )
        return F.conv_transpose1d(
            x,
            self.weight,
            self.bias,
            self.stride[0],
            self.padding[0],
            output_padding[0],
            self.groups,
            self.dilation[0],
        )

    def extra_repr(self):
        return (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}, padding={self.padding}, output_padding={self.output_padding}, "
            f"bias={self.bias is not None}"
        )


class ConvTranspose2d(_ConvTransposeNd):
    """The transposed 2-D convolution (a learnable upsampling), as PyTorch's: (N, in, H, W) ->
    (N, out, Ho, Wo), Ho = (H - 1) stride - 2 padding + dilation (kh - 1) + output_padding + 1;
    weight (in_channels, out_channels / groups, kh, kw), bias (out_channels,), PyTorch's init.
    forward(x, output_size=None) as PyTorch's.

    Examples
    --------
    >>> up = tt.nn.ConvTranspose2d(4, 2, kernel_size=2, stride=2, rng=0)
    >>> up.weight.shape
    (4, 2, 2, 2)
    >>> up(tt.ones((1, 4, 3, 3))).shape     # (3 - 1) * 2 + 2 = 6
    (1, 2, 6, 6)
    """

    _dims = 2


class ConvTranspose1d(_ConvTransposeNd):
    """The transposed 1-D convolution, as PyTorch's: weight (in_channels, out_channels / groups, k).

    Examples
    --------
    >>> up = tt.nn.ConvTranspose1d(4, 2, kernel_size=2, stride=2, rng=0)
    >>> up(tt.ones((1, 4, 5))).shape        # length (5 - 1) * 2 + 2
    (1, 2, 10)
    """

    _dims = 1
