"""`tt.scipy.signal`: convolve and correlate (N-D, modes "full", "valid", "same"), both operands
differentiable; `np.convolve`/`np.correlate` on Tensors use the same two primitives, which live
with NumPy's scientific functions (ops_science.py: the engine never imports tt.scipy).

Two primitives, each bilinear: the full convolution and the valid one (the first operand at
least as large as the second along every axis). Each one's transpose is the other, with an
operand flipped along every axis, so both rules of each are the other primitive and higher
orders are recorded too. "same" is a centred slice of "full" (recorded as getitem).

`convolve(..., axes=, dot_axes=)` is HIPS autograd's generalisation (autograd.scipy.signal.convolve):
convolve along the paired `axes`, contract along the paired `dot_axes`, outer product over the
other axes; the result's axes are in1's others, in2's others, then the convolved ones. Composed:
both operands are laid out on common axes (size 1 where the other one has an axis), fully
convolved, and sliced (a contraction is the centre of a full convolution with one operand flipped).
"""

import numpy as np

from ..ops_science import _as_operand, nd_convolve


def convolve(in1, in2, mode="full", method="auto", *, axes=None, dot_axes=((), ())):
    """scipy.signal.convolve: the N-D convolution of in1 and in2 (same ndim), differentiable in both;
    mode "full" (the default), "valid" or "same" (the size of in1, centred).
    axes=([in1 axes], [in2 axes]), dot_axes=(..., ...): autograd's generalisation (module docstring).

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
    if axes is None and not any(dot_axes):
        return nd_convolve(in1, in2, mode)
    return _convolve_along(_as_operand(in1), _as_operand(in2), axes, dot_axes, mode)


def _pairs(what, pair, shapes):
    if len(pair) != 2 or len(pair[0]) != len(pair[1]):
        raise ValueError(f"convolve: {what} must be two lists of the same length (in1's axes, in2's), "
                         f"got {pair!r}")
    return [[int(k) % len(s) for k in axes] for axes, s in zip(pair, shapes)]


def _convolve_along(a, b, axes, dot_axes, mode):
    sa, sb = tuple(a.shape), tuple(b.shape)     # Tensors or float arrays (_as_operand)
    if axes is None:
        if len(sa) != len(sb):
            raise ValueError(f"convolve: without axes=, in1 and in2 need the same ndim, got shapes {sa} "
                             f"and {sb}")
        axes = (range(len(sa)), range(len(sb)))
    (conv_a, conv_b), (dot_a, dot_b) = _pairs("axes", axes, (sa, sb)), _pairs("dot_axes", dot_axes, (sa, sb))
    for used, s, name in ((conv_a + dot_a, sa, "in1"), (conv_b + dot_b, sb, "in2")):
        if len(set(used)) != len(used):
            raise ValueError(f"convolve: an axis of {name} (shape {s}) is named twice in axes/dot_axes")
    if any(sa[i] != sb[j] for i, j in zip(dot_a, dot_b)):
        raise ValueError(f"convolve: dot_axes must pair axes of equal length, got shapes {sa} and {sb} "
                         f"with dot_axes={dot_axes!r}")
    na, nb = [sa[i] for i in conv_a], [sb[j] for j in conv_b]
    if mode == "valid" and not (all(m >= n for m, n in zip(na, nb)) or all(n >= m for m, n in zip(na, nb))):
        raise ValueError(f"convolve: for mode='valid' one input must be at least as large as the other "
                         f"along every convolved axis; got lengths {na} and {nb}")
    if mode not in ("full", "valid", "same"):
        raise ValueError(f"convolve: mode must be 'full', 'valid' or 'same', got {mode!r}")
    rest_a = [i for i in range(len(sa)) if i not in conv_a + dot_a]
    rest_b = [j for j in range(len(sb)) if j not in conv_b + dot_b]
    dots = [sa[i] for i in dot_a]
    # common layout (dot..., in1's others..., in2's others..., convolved...), size 1 where absent
    A = np.reshape(np.transpose(a, dot_a + rest_a + conv_a),
                   dots + [sa[i] for i in rest_a] + [1] * len(rest_b) + na)
    B = np.reshape(np.flip(np.transpose(b, dot_b + rest_b + conv_b), axis=tuple(range(len(dots)))),
                   dots + [1] * len(rest_a) + [sb[j] for j in rest_b] + nb)
    full = nd_convolve(A, B, "full")
    centre = tuple(d - 1 for d in dots)               # the contraction: sum_d A[d] B[d]
    others = (slice(None),) * (len(rest_a) + len(rest_b))
    if mode == "full":
        conv = tuple(slice(None) for _ in na)
    elif mode == "same":
        conv = tuple(slice((m - 1) // 2, (m - 1) // 2 + n) for n, m in zip(na, nb))
    else:
        conv = tuple(slice(min(n, m) - 1, max(n, m)) for n, m in zip(na, nb))
    return full[centre + others + conv]


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
