"""`tt.scipy.signal`: convolve and correlate (N-D, modes "full", "valid", "same"), both operands
differentiable; `np.convolve`/`np.correlate` on Tensors use the same two primitives.

Two primitives, each bilinear: the full convolution and the valid one (the first operand at
least as large as the second along every axis). Each one's transpose is the other, with an
operand flipped along every axis, so both rules of each are the other primitive and higher
orders are recorded too. "same" is a centred slice of "full" (recorded as getitem).
"""

import numpy as np
import scipy.signal

from ..ops import defprim
from ..tensor import Tensor


def _flip(x):
    return np.flip(x)              # every axis; a Tensor hands it back to tt.flip (recorded)


def _shape(x):
    return np.shape(x.data if isinstance(x, Tensor) else x)


def _full_forward(a, b):
    return scipy.signal.convolve(a, b, mode="full")


def _valid_forward(x, k):
    return scipy.signal.convolve(x, k, mode="valid")


_convolve_full = defprim(_full_forward, "convolve_full",
                         vjp=[lambda g, ans, a, b: _convolve_valid(g, _flip(b)),
                              lambda g, ans, a, b: _convolve_valid(g, _flip(a))],
                         jvp=[lambda t, ans, a, b: _convolve_full(t, b),
                              lambda t, ans, a, b: _convolve_full(a, t)])
_convolve_valid = defprim(_valid_forward, "convolve_valid",
                          vjp=[lambda g, ans, x, k: _convolve_full(g, _flip(k)),
                               lambda g, ans, x, k: _convolve_valid(_flip(x), g)],
                          jvp=[lambda t, ans, x, k: _convolve_valid(t, k),
                               lambda t, ans, x, k: _convolve_valid(x, t)])


def _as_operand(x):
    if isinstance(x, Tensor):
        return x
    x = np.asarray(x)
    return x if x.dtype.kind == "f" else x.astype(np.float64)


def _centred(full, shape):
    """The slice of `full` of `shape` at its centre (SciPy's "same")."""
    start = [(n - m) // 2 for n, m in zip(_shape(full), shape)]
    return full[tuple(slice(s, s + m) for s, m in zip(start, shape))]


def convolve(in1, in2, mode="full", method="auto"):
    """scipy.signal.convolve: the N-D convolution of in1 and in2 (same ndim), differentiable in both."""
    in1, in2 = _as_operand(in1), _as_operand(in2)
    s1, s2 = _shape(in1), _shape(in2)
    if len(s1) != len(s2) or not s1:
        raise ValueError(f"convolve: in1 and in2 must have the same number of dimensions (at least "
                         f"1), got shapes {s1} and {s2}")
    if mode == "full":
        return _convolve_full(in1, in2)
    if mode == "same":
        return _centred(_convolve_full(in1, in2), s1)
    if mode == "valid":
        if all(n >= m for n, m in zip(s1, s2)):
            return _convolve_valid(in1, in2)
        if all(m >= n for n, m in zip(s1, s2)):
            return _convolve_valid(in2, in1)      # convolution commutes
        raise ValueError(f"convolve: for mode='valid' one input must be at least as large as the "
                         f"other along every axis; got shapes {s1} and {s2}")
    raise ValueError(f"convolve: mode must be 'full', 'valid' or 'same', got {mode!r}")


def correlate(in1, in2, mode="full", method="auto"):
    """scipy.signal.correlate for real inputs: convolve(in1, in2 flipped along every axis)."""
    return convolve(in1, _flip(_as_operand(in2)), mode)


__all__ = ["convolve", "correlate"]
