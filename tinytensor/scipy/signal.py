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
    """scipy.signal.convolve: the N-D convolution of in1 and in2 (same ndim), differentiable in both."""
    return nd_convolve(in1, in2, mode)


def correlate(in1, in2, mode="full", method="auto"):
    """scipy.signal.correlate for real inputs: convolve(in1, in2 flipped along every axis)."""
    return nd_convolve(in1, np.flip(_as_operand(in2)), mode)


__all__ = ["convolve", "correlate"]
