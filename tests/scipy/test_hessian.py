"""tt.hessian: shape in.shape + in.shape, both modes, against the Jacobian of the gradient."""

import numpy as np

import tinytensor as tt


def test_hessian_matches_the_closed_form_in_both_modes():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((3, 3))
    x = rng.standard_normal(3)
    f = lambda x: tt.sum(np.exp(x @ A) * x)            # noqa: E731
    expected = tt.jacobian(tt.grad(f))(x)
    for mode in ("rev", "fwd"):
        H = tt.hessian(f, mode=mode)(x)
        assert H.shape == (3, 3)
        np.testing.assert_allclose(H, expected, rtol=1e-12)
        np.testing.assert_allclose(H, H.T, rtol=1e-12)


def test_hessian_of_a_matrix_argument_and_argnum():
    rng = np.random.default_rng(1)
    W, v = rng.standard_normal((2, 3)), rng.standard_normal(3)
    f = lambda v, W: tt.sum(tt.tanh(W @ v) ** 2)      # noqa: E731
    H = tt.hessian(f, argnum=1)(v, W)
    assert H.shape == (2, 3, 2, 3)
    u = rng.standard_normal((2, 3))
    np.testing.assert_allclose(np.tensordot(H, u, axes=2), tt.hvp(lambda W: f(v, W), (W,), (u,)), rtol=1e-10)
    assert tt.hessian(f, argnums=1)(v, W).shape == (2, 3, 2, 3)
