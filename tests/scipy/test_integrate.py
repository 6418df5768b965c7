"""tt.scipy.integrate.odeint: values as SciPy's, gradients (adjoint VJP, sensitivity JVP) against
central differences and against a fine RK4 differentiated by the tape."""

import numpy as np
import pytest
import scipy.integrate

import tinytensor as tt
from tinytensor.scipy.integrate import odeint

TIGHT = dict(rtol=1e-10, atol=1e-10)


def net(y, t, W, b):                     # an ODE net's dynamics
    return np.tanh(W @ y + b) - 0.1 * y * np.cos(t)


def rk4(y, t, W, b, steps=200):
    """A fine fixed-step RK4 through the same dynamics, on the tape."""
    out = [y]
    for t0, t1 in zip(t[:-1], t[1:]):
        h = (t1 - t0) / steps
        for k in range(steps):
            s = t0 + k * h
            k1 = net(y, s, W, b)
            k2 = net(y + 0.5 * h * k1, s + 0.5 * h, W, b)
            k3 = net(y + 0.5 * h * k2, s + 0.5 * h, W, b)
            k4 = net(y + h * k3, s + h, W, b)
            y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        out.append(y)
    return tt.stack(out)


RNG = np.random.default_rng(0)
Y0, T = RNG.standard_normal(3), np.array([0.0, 0.4, 1.0])
W, B = 0.5 * RNG.standard_normal((3, 3)), 0.1 * RNG.standard_normal(3)


def test_values_are_scipys():
    ys = odeint(net, tt.tensor(Y0, requires_grad=True), T, args=(W, B))
    np.testing.assert_allclose(ys.data, scipy.integrate.odeint(net, Y0, T, args=(W, B)), rtol=1e-12)


def test_gradient_matches_a_fine_rk4_on_the_tape():
    weights = RNG.standard_normal((3, 3))
    loss = lambda y0, W, b: tt.sum(odeint(net, y0, T, args=(W, b), **TIGHT) * weights)   # noqa: E731
    reference = lambda y0, W, b: tt.sum(rk4(y0, T, W, b, steps=100) * weights)            # noqa: E731
    ours = tt.grad(loss, argnums=(0, 1, 2))(Y0, W, B)
    theirs = tt.grad(reference, argnums=(0, 1, 2))(Y0, W, B)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-9)


def test_both_modes_against_differences_including_the_times():
    f = lambda y, t, k: -k * y + np.sin(t)      # noqa: E731
    tt.gradcheck(lambda y0, t, k: odeint(f, y0, t, args=(k,), **TIGHT),
                 np.array([1.0, 2.0]), np.array([0.0, 0.3, 1.0]), np.array([0.5, 1.5]))


def test_second_derivatives_are_refused_clearly():
    with pytest.raises(Exception, match="second derivatives"):
        tt.hessian(lambda y0: tt.sum(odeint(net, y0, T, args=(W, B))))(Y0)
