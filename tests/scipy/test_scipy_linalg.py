"""tt.scipy.linalg: what the spec sweep (rows in tinytensor/scipy/specs.py) does not see."""

import numpy as np
import pytest
import scipy.linalg

import tinytensor as tt
from tinytensor.scipy import linalg as tl

RNG = np.random.default_rng(0)


def test_expm_second_derivative_through_the_block_frechet_form():
    A = 0.3 * RNG.standard_normal((3, 3))
    E = RNG.standard_normal((3, 3))
    f = lambda a: tt.sum(tl.expm(a) * E)          # noqa: E731
    H = tt.hessian(f)(A)

    v = RNG.standard_normal((3, 3))
    eps = 1e-5
    numerical = (tt.grad(f)(A + eps * v) - tt.grad(f)(A - eps * v)) / (2 * eps)
    np.testing.assert_allclose(np.tensordot(H, v, axes=2), numerical, rtol=1e-6, atol=1e-8)


def test_cho_factor_and_cholesky_follow_scipy():
    a = RNG.standard_normal((4, 4))
    spd = a @ a.T + 4 * np.eye(4)
    for lower in (False, True):
        c, low = tl.cho_factor(tt.tensor(spd), lower=lower)
        assert low is lower
        ref, _ = scipy.linalg.cho_factor(spd, lower=lower)
        tri = np.tril if lower else np.triu
        np.testing.assert_allclose(c.data, tri(ref), rtol=1e-12)
        np.testing.assert_allclose(tl.cholesky(spd, lower=lower), scipy.linalg.cholesky(spd, lower=lower),
                                   rtol=1e-12)


def test_sqrtm_without_a_real_root_is_refused():
    with pytest.raises(ValueError, match="no real square root"):
        tl.sqrtm(tt.tensor(np.diag([1.0, -4.0]), requires_grad=True))


def test_a_gaussian_process_likelihood_through_cho_solve():
    x = np.linspace(0, 1, 6)
    y = np.sin(3 * x)

    def nlml(log_ell):
        K = np.exp(-0.5 * (x[:, None] - x[None, :]) ** 2 / np.exp(2 * log_ell)) + 1e-2 * np.eye(6)
        c = tl.cho_factor(K, lower=True)
        return 0.5 * tt.sum(y * tl.cho_solve(c, y)) + tt.sum(np.log(np.diagonal(c[0])))
    tt.gradcheck(nlml, np.array(-1.0))


def test_solve_banded_matches_scipy_and_differences():
    """HIPS autograd's test_solve_banded: (l, u) static, the band ab and b differentiable."""
    ab = RNG.standard_normal((3, 5)) + np.array([[0.0], [4.0], [0.0]])     # a dominant diagonal
    b, B = RNG.standard_normal(5), RNG.standard_normal((5, 2))
    for rhs in (b, B):
        np.testing.assert_allclose(tl.solve_banded((1, 1), tt.tensor(ab), rhs).data,
                                   scipy.linalg.solve_banded((1, 1), ab, rhs), rtol=1e-12)
    ab2 = RNG.standard_normal((4, 5)) + np.array([[0.0], [0.0], [5.0], [0.0]])
    np.testing.assert_allclose(tl.solve_banded((1, 2), ab2, b).data if isinstance(
        tl.solve_banded((1, 2), ab2, b), tt.Tensor) else tl.solve_banded((1, 2), ab2, b),
        scipy.linalg.solve_banded((1, 2), ab2, b), rtol=1e-12)
    tt.gradcheck(lambda a, r: tl.solve_banded((1, 1), a, r), ab, B)
    with pytest.raises(ValueError, match="solve_banded"):
        tl.solve_banded((1, 1), ab[:2], b)
