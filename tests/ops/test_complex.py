"""Complex intermediates with JAX's convention (issue 30): real parameters, a real loss, complex
values in the middle. Each op's rules in complex are swept by the spec rows (specs.py: "complex
..." and the real/imag/conj/angle/fft rows); here the scientist's cases, checked against closed
forms and central differences, and the refusals."""

import numpy as np
import pytest

import tinytensor as tt

RNG = np.random.default_rng(0)


def test_a_real_parameter_times_a_complex_constant():
    """d/da sum |a c|^2 = 2 a |c|^2 = [10, 40] (was [-6, 32]: the imaginary part leaked)."""
    c = np.array([1 + 2j, 3 - 1j])
    g = tt.grad(lambda a: tt.sum(tt.abs(a * c) ** 2))(np.array([1.0, 2.0]))
    np.testing.assert_allclose(g, [10.0, 40.0], rtol=1e-14)
    assert g.dtype == np.float64


def test_a_transfer_function_fit():
    """|H(iw)| of a first-order filter H(s) = k / (1 + s tau), fitted in k and tau."""
    w = np.linspace(0.1, 5.0, 7)
    target = np.abs(2.0 / (1 + 1j * w * 0.7))

    def loss(p):
        k, tau = p[0], p[1]
        h = k / (1 + (1j * w) * tau)
        return tt.sum((tt.abs(h) - target) ** 2) + tt.sum(tt.angle(h) ** 2) * 1e-2

    p = np.array([1.5, 0.4])
    np.testing.assert_allclose(tt.grad(loss)(p), tt.numerical_grad(loss, p)[0], rtol=1e-6)
    tt.gradcheck(loss, p)                                                # both modes


def test_second_order_through_complex_intermediates():
    c = np.array([1 + 2j, 3 - 1j, -0.5j])
    f = lambda a: tt.sum(tt.abs(a * c) ** 2 + tt.real(tt.exp(1j * a)))   # noqa: E731
    a = RNG.standard_normal(3)
    np.testing.assert_allclose(tt.hessian(f)(a), np.diag(2 * np.abs(c) ** 2 - np.cos(a)), rtol=1e-12)


def test_numpy_spellings_record():
    x = tt.tensor(RNG.standard_normal(4), requires_grad=True)
    z = x * (1 + 2j)
    parts = [np.real(z), np.imag(z), z.real, z.imag, np.angle(z), np.abs(np.conj(z)), z.conj().real]
    assert all(isinstance(p, tt.Tensor) and p.requires_grad for p in parts)
    np.testing.assert_allclose(np.imag(z).data, 2 * x.data)


def test_fft_values_and_gradients():
    x = RNG.standard_normal(8)
    for f in (np.fft.fft, np.fft.ifft, np.fft.rfft, lambda v: np.fft.fft2(np.reshape(v, (2, 4)))):
        np.testing.assert_allclose(f(tt.tensor(x)).data, f(x), rtol=1e-14)
    power = lambda v: tt.sum(tt.abs(np.fft.rfft(v)) ** 2)                  # noqa: E731
    # Parseval for the half spectrum: the gradient is 2 n x, with the weights of the doubled bins
    np.testing.assert_allclose(tt.grad(power)(x), tt.numerical_grad(power, x)[0], rtol=1e-7)
    roundtrip = lambda v: tt.sum(np.fft.irfft(np.fft.rfft(v), n=8) * x)   # noqa: E731
    np.testing.assert_allclose(tt.grad(roundtrip)(x), x, rtol=1e-12)       # irfft(rfft(v)) = v


def test_a_primitive_without_complex_rules_refuses_at_recording():
    a = tt.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(TypeError, match="sin has no rule for complex values"):
        tt.sin(a * 1j)
    tt.sin(tt.tensor([1j, 2j]))                   # no gradient needed: NumPy's value, no refusal


def test_a_complex_output_is_refused_by_grad_and_backward():
    with pytest.raises(TypeError, match="real-valued outputs"):
        tt.grad(lambda a: tt.sum(a * 1j))(np.array([1.0, 2.0]))
    with pytest.raises(TypeError, match="real-valued outputs"):
        tt.value_and_grad(lambda a: tt.sum(a * 1j))(np.array([1.0, 2.0]))
    a = tt.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(TypeError, match="complex"):
        tt.sum(a * 1j).backward()
    out, pull = tt.vjp(lambda a: a * (1 + 1j), np.array([1.0, 2.0]))     # vjp: a complex cotangent
    np.testing.assert_allclose(pull(np.array([1.0, 1j]))[0], [1.0, -1.0])


def test_complex_leaves_stay_refused():
    with pytest.raises(TypeError, match="complex"):
        tt.tensor([1 + 1j], requires_grad=True)
    with pytest.raises(TypeError, match="complex"):
        tt.grad(lambda z: tt.abs(z))(np.array(1 + 1j))
