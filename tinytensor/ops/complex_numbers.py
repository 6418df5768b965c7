"""Complex numbers in the middle: real parameters, a real loss, complex intermediates (issue 30).

The convention is JAX's: for a real loss L, the cotangent g of a complex value z is the one with
dL = Re(g dz). Then a holomorphic op's rules are its real ones (add, mul, div, exp, matmul: no
conjugate anywhere), a real input of a complex result gets the real part of its cotangent
(the engine takes it, tape.reverse_sweep, as it undoes broadcasting), and the four
non-holomorphic maps below have these rules:

    real(z)    g_z = g             tangent real(t)
    imag(z)    g_z = -1j g         tangent imag(t)
    conj(z)    g_z = conj(g)       tangent conj(t)
    angle(z)   g_z = -1j g conj(z) / |z|^2      tangent Im(conj(z) t) / |z|^2  (0 at z = 0)

(abs: g conj(z) / |z|, in core.py). Complex leaves stay refused (tt.tensor(..., requires_grad=True)
and the transforms' inputs): parameters are real, so the convention never shows in a result. A
primitive without complex rules refuses a complex value that requires grad when it is recorded.
"""

import numpy as np

from ..tensor import Tensor
from .table import _safe, complex_rules, defprim


def _imag_rule(g, ans, z):
    return np.multiply(g, -1j) if z.dtype.kind == "c" else g * 0   # imag of a real x: constant 0


def _angle_rule(g, ans, z):
    if z.dtype.kind != "c":
        return g * 0                  # angle of a real x: 0 or pi, locally constant
    size2 = np.real(z * np.conj(z))
    return np.where(size2 != 0, g * (-1j * np.conj(z)) / _safe(size2), 0)


def _angle_tangent(t, ans, z):
    size2 = np.real(z * np.conj(z))
    return np.imag(np.conj(z) * t) / _safe(size2)


real = defprim(np.real, "real", vjp=[lambda g, ans, z: g], jvp=[lambda t, ans, z: np.real(t)],
               numpy=np.real)
real.__doc__ = """The real part (as `np.real` and `z.real`), recorded: a real parameter can pass through
complex intermediates to a real loss (JAX's convention, see this module's notes).

Examples
--------
>>> x = tt.tensor([3.0, 4.0], requires_grad=True)
>>> z = x[0] + 1j * x[1]
>>> tt.real(z * tt.conj(z)).backward()   # |z|**2 = x0**2 + x1**2
>>> x.grad
array([6., 8.])
"""
imag = defprim(np.imag, "imag", vjp=[_imag_rule],
               jvp=[lambda t, ans, z: np.imag(t)], numpy=np.imag)
imag.__doc__ = """The imaginary part (as `np.imag` and `z.imag`), recorded; 0 for a real value.

Examples
--------
>>> x = tt.tensor([3.0, 4.0], requires_grad=True)
>>> z = x[0] + 1j * x[1]
>>> tt.imag(z * z).backward()            # Im(z**2) = 2 x0 x1
>>> x.grad
array([8., 6.])
"""
conj = defprim(np.conj, "conj", vjp=[lambda g, ans, z: np.conj(g)], jvp=[lambda t, ans, z: np.conj(t)],
               numpy=(np.conj, np.conjugate), method=("conj", "conjugate"))
conj.__doc__ = """The complex conjugate (as `np.conj`, `np.conjugate`, `t.conj()`), recorded; a real value is
itself.

Examples
--------
>>> z = tt.tensor([1 + 2j, 3 - 1j])
>>> tt.conj(z)
tensor([1.-2.j, 3.+1.j], dtype=complex128)
"""
angle = defprim(lambda z: np.angle(z), "angle", vjp=[_angle_rule], jvp=[_angle_tangent], numpy=np.angle)
angle.__doc__ = """`np.angle(z)`: the argument of a complex value in radians, in (-pi, pi], recorded
(JAX's convention; its gradient at 0 is 0).

Examples
--------
>>> x = tt.tensor([3.0, 4.0], requires_grad=True)
>>> z = x[0] + 1j * x[1]
>>> tt.angle(z)
tensor(0.92729522, requires_grad=True)
>>> tt.angle(z).backward()               # (-x1, x0) / |z|**2
>>> x.grad
array([-0.16,  0.12])
"""
complex_rules(real, imag, conj, angle)

# NumPy's attributes z.real and z.imag (properties, not methods: no publish(method=) form).
Tensor.real = property(real, doc="The real part, recorded (np.real).")
Tensor.imag = property(imag, doc="The imaginary part, recorded (np.imag).")
