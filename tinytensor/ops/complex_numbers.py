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
imag = defprim(np.imag, "imag", vjp=[_imag_rule],
               jvp=[lambda t, ans, z: np.imag(t)], numpy=np.imag)
conj = defprim(np.conj, "conj", vjp=[lambda g, ans, z: np.conj(g)], jvp=[lambda t, ans, z: np.conj(t)],
               numpy=(np.conj, np.conjugate), method=("conj", "conjugate"))
angle = defprim(lambda z: np.angle(z), "angle", vjp=[_angle_rule], jvp=[_angle_tangent], numpy=np.angle)
angle.__doc__ = "np.angle(z): the argument of a complex value (radians), differentiable (JAX's convention)."
complex_rules(real, imag, conj, angle)

# NumPy's attributes z.real and z.imag (properties, not methods: no publish(method=) form).
Tensor.real = property(real, doc="The real part, recorded (np.real).")
Tensor.imag = property(imag, doc="The imaginary part, recorded (np.imag).")
