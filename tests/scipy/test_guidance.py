"""The TypeError of a SciPy function given a Tensor that requires grad names the tt.scipy twin."""

import numpy as np
import pytest
import scipy.linalg
import scipy.special
import scipy.stats

import tinytensor as tt


@pytest.mark.parametrize("call, twin", [
    (lambda x: scipy.stats.norm.logpdf(x, 0.0, 2.0), "tt.scipy.stats.norm.logpdf"),
    (lambda x: scipy.stats.norm(0.0, 2.0).cdf(x), "tt.scipy.stats.norm.cdf"),
    (lambda x: scipy.stats.multivariate_normal.logpdf(x, np.zeros(2)),
     "tt.scipy.stats.multivariate_normal.logpdf"),
    (lambda x: scipy.special.logsumexp(x), "tt.scipy.special.logsumexp"),
    (lambda x: scipy.linalg.solve_triangular(np.eye(2), x), "tt.scipy.linalg.solve_triangular"),
])
def test_the_error_names_the_tt_scipy_spelling(call, twin):
    x = tt.tensor([0.5, 1.0], requires_grad=True)
    with pytest.raises(TypeError, match="cannot be converted") as err:
        call(x)
    assert twin in str(err.value)


def test_no_twin_no_hint():
    x = tt.tensor([0.5, 1.0], requires_grad=True)
    with pytest.raises(TypeError) as err:
        scipy.stats.norm.rvs(x)              # SciPy's own: no differentiable twin
    assert "tt.scipy" not in str(err.value)
    with pytest.raises(TypeError) as err:
        np.asarray(x)
    assert "tt.scipy" not in str(err.value)
