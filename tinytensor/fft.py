"""`tt.fft`: NumPy's discrete Fourier transforms on Tensors, differentiable (`np.fft.fft(t)`
records too), for real parameters with complex intermediates (JAX's convention, ops/complex_numbers.py).

    fft, ifft      C-linear; the DFT matrix is symmetric, so the VJP is the same transform of the
                   cotangent, cut or zero-padded back to the input's length when n= changed it
    rfft           real in, half spectrum out: the VJP is Re(fft(g zero-padded to n))
    irfft          half spectrum in, real out: the VJP is c_k ifft(g)[k] for the kept k, with c_k = 2
                   for the bins that stand for a conjugate pair and 1 for DC (and Nyquist, n even),
                   since irfft ignores their imaginary parts
    fft2, ifft2    fft/ifft along each axis in turn (composites: both modes for free)

The JVP of each is the transform itself, applied to the tangent. norm= ("backward", "ortho",
"forward") as NumPy's.
"""

import numpy as np

from . import ops
from .ops import batching
from .ops.table import complex_rules, defprim
from .tensor import Tensor


def _fit(g, size, axis):
    """g cut or zero-padded along `axis` to `size` (the transpose of np.fft's n=)."""
    have = g.shape[axis]
    if have == size:
        return g
    if have > size:
        index = [slice(None)] * g.ndim
        index[axis] = slice(0, size)
        return g[tuple(index)]
    widths = [(0, 0)] * g.ndim
    widths[axis] = (0, size - have)
    return np.pad(g, widths)


def _along(values, axis, ndim):
    shape = [1] * ndim
    shape[axis] = len(values)
    return np.reshape(values, shape)


def _irfft_weights(n, axis, ndim, dtype):
    c = np.full(n // 2 + 1, 2.0, np.zeros((), dtype).real.dtype)    # float32 for complex64
    c[0] = 1.0
    if n % 2 == 0:
        c[-1] = 1.0
    return _along(c, axis, ndim)


def _fft_vjp(transform):
    def rule(g, ans, x, n, axis, norm):
        return _fit(transform(g, axis=axis, norm=norm), x.shape[axis], axis)
    return rule


def _rfft_vjp(g, ans, x, n, axis, norm):
    full = x.shape[axis] if n is None else n
    return _fit(np.real(np.fft.fft(g, n=full, axis=axis, norm=norm)), x.shape[axis], axis)


def _irfft_vjp(g, ans, y, n, axis, norm):
    full = ans.shape[axis]
    kept = np.fft.ifft(g, axis=axis, norm=norm)
    kept = _fit(kept, full // 2 + 1, axis) * _irfft_weights(full, axis % g.ndim, g.ndim, kept.dtype)
    kept = _fit(kept, y.shape[axis], axis)
    return kept if y.dtype.kind == "c" else np.real(kept)   # a real y: the real part (real output)


def _row(np_fun, name, vjp):
    return defprim(lambda x, n, axis, norm: np_fun(x, n=n, axis=axis, norm=norm), name, nargs=1,
                   vjp=[vjp], jvp=[lambda t, ans, x, n, axis, norm: np_fun(t, n=n, axis=axis, norm=norm)])


_fft = _row(np.fft.fft, "fft", _fft_vjp(np.fft.fft))
_ifft = _row(np.fft.ifft, "ifft", _fft_vjp(np.fft.ifft))
_rfft = _row(np.fft.rfft, "rfft", _rfft_vjp)
_irfft = _row(np.fft.irfft, "irfft", _irfft_vjp)
complex_rules(_fft, _ifft, _rfft, _irfft)
for _prim in (_fft, _ifft, _rfft, _irfft):      # tt.vmap: one transform along the example's axis
    batching.defbatch(_prim, batching.one_axis)


def _one_axis(prim, np_fun):
    def transform(a, n=None, axis=-1, norm=None, out=None):
        if out is not None:
            raise TypeError(f"np.fft.{np_fun.__name__}: out= is not supported on Tensors; use the "
                            f"returned value")
        if not isinstance(a, (np.ndarray, np.generic, list, tuple, int, float, complex)):
            return prim(a, n=n, axis=axis, norm=norm)      # a Tensor, or tt.vmap's batched value
        return np_fun(a, n=n, axis=axis, norm=norm)
    transform.__name__ = np_fun.__name__
    transform.__doc__ = f"np.fft.{np_fun.__name__}, recorded (both modes)."
    ops.NUMPY_FUNCTIONS[np_fun] = transform
    return transform


fft = _one_axis(_fft, np.fft.fft)
fft.__doc__ = """`fft(a, n=None, axis=-1, norm=None)`: the discrete Fourier transform along `axis` (as
`np.fft.fft`), recorded with both rules; a real input gives a complex result that a real loss
(`tt.abs`, `tt.real`) brings back.

Examples
--------
>>> x = tt.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
>>> X = tt.fft.fft(x)
>>> X
tensor([10.+0.j, -2.+2.j, -2.+0.j, -2.-2.j], dtype=complex128, requires_grad=True)
>>> (tt.abs(X) ** 2).sum().backward()   # Parseval: sum |X|**2 = 4 sum x**2
>>> x.grad
array([ 8., 16., 24., 32.])
"""
ifft = _one_axis(_ifft, np.fft.ifft)
ifft.__doc__ = """`ifft(a, n=None, axis=-1, norm=None)`: the inverse discrete Fourier transform
along `axis` (as `np.fft.ifft`), recorded with both rules.

Examples
--------
>>> x = tt.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
>>> tt.real(tt.fft.ifft(tt.fft.fft(x)))
tensor([1., 2., 3., 4.], requires_grad=True)
"""
rfft = _one_axis(_rfft, np.fft.rfft)
rfft.__doc__ = """`rfft(a, n=None, axis=-1, norm=None)`: the transform of a real signal, its `n // 2 + 1`
non-negative frequencies (as `np.fft.rfft`), recorded with both rules.

Examples
--------
>>> x = tt.tensor([1.0, 0.0, -1.0, 0.0], requires_grad=True)   # one cycle of a cosine
>>> X = tt.fft.rfft(x)
>>> X
tensor([0.+0.j, 2.+0.j, 0.+0.j], dtype=complex128, requires_grad=True)
>>> tt.real(X[1]).backward()            # Re X[1] = sum x[k] cos(2 pi k / 4)
>>> x.grad.round(12)
array([ 1.,  0., -1.,  0.])
"""
irfft = _one_axis(_irfft, np.fft.irfft)
irfft.__doc__ = """`irfft(a, n=None, axis=-1, norm=None)`: the real signal of length `n` (default
`2 * (a.shape[axis] - 1)`) whose `rfft` is `a` (as `np.fft.irfft`), recorded with both rules.

Examples
--------
>>> x = tt.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
>>> tt.fft.irfft(tt.fft.rfft(x))
tensor([1., 2., 3., 4.], requires_grad=True)
>>> tt.fft.irfft(tt.tensor([4.0, 0.0, 0.0]))   # a constant: DC only
tensor([1., 1., 1., 1.])
"""


def _two_axes(one, np_fun):
    def transform(a, s=None, axes=(-2, -1), norm=None, out=None):
        if out is not None:
            raise TypeError(f"np.fft.{np_fun.__name__}: out= is not supported on Tensors")
        if not isinstance(a, Tensor):
            return np_fun(a, s=s, axes=axes, norm=norm)
        sizes = [None] * len(axes) if s is None else list(s)
        if len(sizes) != len(axes):
            raise ValueError(f"np.fft.{np_fun.__name__}: s and axes must have the same length, got "
                             f"{len(sizes)} and {len(axes)}")
        for n, axis in reversed(list(zip(sizes, axes))):    # the last axis first, as NumPy's
            a = one(a, n=n, axis=axis, norm=norm)              # (its rounding, bit for bit)
        return a
    transform.__name__ = np_fun.__name__
    transform.__doc__ = f"np.fft.{np_fun.__name__}: {one.__name__} along each axis, recorded."
    ops.NUMPY_FUNCTIONS[np_fun] = transform
    return transform


fft2 = _two_axes(fft, np.fft.fft2)
fft2.__doc__ = """`fft2(a, s=None, axes=(-2, -1), norm=None)`: the 2-D discrete Fourier transform (as
`np.fft.fft2`), `fft` along each axis in turn, so both rules come from `fft`'s.

Examples
--------
>>> img = tt.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
>>> F = tt.fft.fft2(img)
>>> F
tensor([[10.+0.j, -2.+0.j],
        [-4.+0.j,  0.+0.j]], dtype=complex128, requires_grad=True)
>>> tt.real(F[0, 0]).backward()         # the sum of the pixels
>>> img.grad
array([[1., 1.],
       [1., 1.]])
"""
ifft2 = _two_axes(ifft, np.fft.ifft2)
ifft2.__doc__ = """`ifft2(a, s=None, axes=(-2, -1), norm=None)`: the inverse 2-D transform (as
`np.fft.ifft2`), `ifft` along each axis in turn.

Examples
--------
>>> img = tt.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
>>> tt.real(tt.fft.ifft2(tt.fft.fft2(img)))
tensor([[1., 2.],
        [3., 4.]], requires_grad=True)
"""

__all__ = ["fft", "ifft", "rfft", "irfft", "fft2", "ifft2"]
