"""tt.scipy.special: SciPy's ufuncs on Tensors are recorded (the rules: the spec sweep, rows in
tinytensor/scipy/specs.py); here what the sweep does not see."""

import numpy as np
import pytest
import scipy.special as sp

import tinytensor as tt
from tinytensor.scipy import special as ts


def test_scipy_ufuncs_on_tensors_are_recorded():
    x = tt.tensor([0.7, 1.9], requires_grad=True)
    y = sp.gammaln(x) + sp.xlogy(x, x) + sp.i1e(x) + sp.yn(2, x)
    assert isinstance(y, tt.Tensor) and y._prim is not None
    y.sum().backward()
    v = x.data
    expected = (sp.digamma(v) + np.log(v) + 1 + 0.5 * (sp.i0e(v) + sp.ive(2, v)) - sp.i1e(v)
                + 0.5 * (sp.yn(1, v) - sp.yn(3, v)))
    np.testing.assert_allclose(x.grad, expected, rtol=1e-12)


def test_higher_orders_go_through_recorded_rules():
    d3 = tt.grad(tt.grad(tt.grad(lambda x: sp.gammaln(x))))
    np.testing.assert_allclose(d3(np.array(1.3)), sp.polygamma(2, 1.3), rtol=1e-12)
    d2 = tt.grad(tt.grad(lambda x: sp.j0(x)))
    np.testing.assert_allclose(d2(np.array(0.8)), -0.5 * (sp.j0(0.8) - sp.jv(2, 0.8)), rtol=1e-12)


@pytest.mark.parametrize("call, what", [
    (lambda a, x: sp.betainc(a, 2.0, x), "a"), (lambda a, x: sp.gammainc(a, x), "a"),
    (lambda a, x: sp.iv(a, x), "v"), (lambda a, x: ts.polygamma(a, x), "n")])
def test_a_static_argument_that_requires_grad_is_refused(call, what):
    a = tt.tensor(2.0, requires_grad=True)
    with pytest.raises(TypeError, match=f"argument {what} is not differentiable"):
        call(a, tt.tensor(0.5, requires_grad=True))
    assert np.isclose(call(a.detach(), 0.5), call(2.0, 0.5))   # without grad: the values


def test_float32_stays_float32_where_scipy_has_only_double_loops():
    x = tt.tensor(np.float32([0.5, 1.5]), requires_grad=True)
    assert sp.yn(2, x).dtype == np.float32 and sp.gammainc(2.0, x).dtype == np.float32


def test_logsumexp_with_weights_and_sign_matches_scipy():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    out, sign = ts.logsumexp(tt.tensor(a, requires_grad=True), axis=1, b=b, return_sign=True)
    ref, ref_sign = sp.logsumexp(a, axis=1, b=b, return_sign=True)
    np.testing.assert_allclose(out.data, ref, rtol=1e-12)
    np.testing.assert_array_equal(sign, ref_sign)
    with np.errstate(invalid="ignore"):
        assert np.isnan(ts.logsumexp(np.zeros(2), b=np.array([1.0, -2.0])))   # as SciPy
    tt.gradcheck(lambda a, b: ts.logsumexp(a, axis=0, b=b, return_sign=True)[0], a, b)
    np.testing.assert_allclose(ts.softmax(a).data if isinstance(ts.softmax(a), tt.Tensor)
                               else ts.softmax(a), sp.softmax(a), rtol=1e-12)


def test_multigammaln_and_softplus_match_scipy():
    a = np.array([2.0, 3.5])
    np.testing.assert_allclose(ts.multigammaln(tt.tensor(a), 3).data, sp.multigammaln(a, 3), rtol=1e-12)
    with pytest.raises(ValueError, match="larger than"):
        ts.multigammaln(np.array([0.6]), 3)
    np.testing.assert_allclose(ts.softplus(tt.tensor(a)).data, sp.softplus(a), rtol=1e-12)


def test_every_public_name_is_scipys_and_listed_once():
    """digamma is SciPy's ufunc named "psi": both spellings are public (the reference lists
    __all__), each once, and each is SciPy's name for the same function."""
    assert {"digamma", "psi"} <= set(ts.__all__)
    assert len(ts.__all__) == len(set(ts.__all__)), sorted(n for n in ts.__all__ if ts.__all__.count(n) > 1)
    assert [n for n in ts.__all__ if not hasattr(sp, n)] == []
    assert ts.psi is ts.digamma
