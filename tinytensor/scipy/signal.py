"""`tt.scipy.signal`: convolve and correlate (N-D, modes "full", "valid", "same"), both operands
differentiable; `np.convolve`/`np.correlate` on Tensors use the same two primitives, which live
with NumPy's scientific functions (ops_science.py: the engine never imports tt.scipy).

Two primitives, each bilinear: the full convolution and the valid one (the first operand at
least as large as the second along every axis). Each one's transpose is the other, with an
operand flipped along every axis, so both rules of each are the other primitive and higher
orders are recorded too. "same" is a centred slice of "full" (recorded as getitem).
"""

import numpy as np

from ..ops_science import _as_operand, nd_convolve


def convolve(in1, in2, mode="full", method="auto"):
    """scipy.signal.convolve: the N-D convolution of in1 and in2 (same ndim), differentiable in both;
    mode "full" (the default), "valid" or "same" (the size of in1, centred).

    Examples
    --------
    >>> x = tt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    >>> kernel = tt.tensor([0.0, 1.0, 0.5])
    >>> y = tt.scipy.signal.convolve(x, kernel)
    >>> y
    tensor([0. , 1. , 2.5, 4. , 1.5], requires_grad=True)
    >>> tt.scipy.signal.convolve(x, kernel, mode="same")
    tensor([1. , 2.5, 4. ], requires_grad=True)
    >>> y.sum().backward()
    >>> x.grad                                # kernel.sum(): each x[i] meets every entry once
    array([1.5, 1.5, 1.5])
    """
    return nd_convolve(in1, in2, mode)


def correlate(in1, in2, mode="full", method="auto"):
    """scipy.signal.correlate for real inputs: convolve(in1, in2 flipped along every axis), so
    mode="valid" slides in2 over in1 as a convolution layer does; differentiable in both.

    Examples
    --------
    >>> image = tt.tensor(np.arange(9.0).reshape(3, 3))
    >>> kernel = tt.tensor([[1.0, 0.0], [0.0, -1.0]], requires_grad=True)
    >>> out = tt.scipy.signal.correlate(image, kernel, mode="valid")
    >>> out                                   # image[i, j] - image[i + 1, j + 1]
    tensor([[-4., -4.],
            [-4., -4.]], requires_grad=True)
    >>> out.sum().backward()
    >>> kernel.grad                           # [a, b]: image[a:a + 2, b:b + 2].sum()
    array([[ 8., 12.],
           [20., 24.]])
    """
    return nd_convolve(in1, np.flip(_as_operand(in2)), mode)


__all__ = ["convolve", "correlate"]
