"""NumPy's scientific functions on Tensors (recorded, both modes), and array-like operands of
recorded ops converted when the entry is made."""

import numpy as np
import pytest

import tinytensor as tt


def test_list_operands_are_converted_when_the_entry_is_made():
    t = tt.tensor([3.0, 4.0], requires_grad=True)
    y = np.dot([1.0, 2.0], t)                        # was: 'list' object has no attribute 'ndim'
    y.backward()
    np.testing.assert_array_equal(t.grad, [1.0, 2.0])
    assert all(not isinstance(a, list) for a in y._inputs)
    second = tt.grad(lambda t: tt.sum(tt.grad(lambda t: np.dot([1.0, 2.0], t * t))(t)))
    np.testing.assert_array_equal(second(np.array([3.0, 4.0])), [2.0, 4.0])
    z = tt.mul((2.0, 1.0), t)
    assert type(z._inputs[0]) is np.ndarray
    tt.sum(z).backward()


@pytest.mark.parametrize("call", [lambda t: tt.matmul(((1.0, 0.0), (0.0, 2.0)), t),
                                  lambda t: tt.linalg.solve([[2.0, 0.0], [0.0, 4.0]], t)])
def test_tuples_and_nested_lists_in_both_modes(call):
    tt.gradcheck(call, np.array([1.0, -2.0]))


def test_order_statistics_send_the_gradient_where_the_values_came_from():
    x = tt.tensor([3.0, -1.0, 7.0, 2.0], requires_grad=True)
    np.median(x).backward()                        # (2 + 3) / 2
    np.testing.assert_array_equal(x.grad, [0.5, 0.0, 0.0, 0.5])
    s = np.sort(x)
    np.testing.assert_array_equal(s.data, [-1.0, 2.0, 3.0, 7.0])
    assert s._prim is not None


def test_heaviside_has_zero_gradient_in_x1_and_passes_x2_at_zero():
    x1 = tt.tensor([-1.0, 0.0, 2.0], requires_grad=True)
    x2 = tt.tensor(0.5, requires_grad=True)
    tt.sum(np.heaviside(x1, x2)).backward()
    np.testing.assert_array_equal(x1.grad, [0.0, 0.0, 0.0])
    assert x2.grad == 1.0


def test_cumprod_gradient_is_exact_with_zeros():
    x = np.array([2.0, 0.0, 3.0, 0.0, 5.0])
    tt.gradcheck(lambda x: np.cumprod(x), x)
    g = tt.grad(lambda x: tt.sum(np.cumprod(x)))(x)
    np.testing.assert_array_equal(g, [1.0, 8.0, 0.0, 0.0, 0.0])   # 1 + 0 + ..., 2 + 2 * 3


def test_gradient_with_several_axes_returns_numpys_tuple():
    f = np.arange(12.0).reshape(3, 4) ** 2
    out = np.gradient(tt.tensor(f, requires_grad=True), 0.5, edge_order=2)
    assert isinstance(out, tuple) and len(out) == 2
    for a, b in zip(out, np.gradient(f, 0.5, edge_order=2)):
        np.testing.assert_allclose(a.data, b, rtol=1e-12)


def test_quantile_refuses_a_q_that_requires_grad():
    with pytest.raises(TypeError, match="not differentiable in q"):
        np.quantile(tt.tensor([1.0, 2.0]), tt.tensor(0.5, requires_grad=True))


# ----- issue 30: NaN propagates through order statistics as NumPy's --------------------------------
NAN_ROWS = np.array([[1.0, np.nan, 3.0, 0.5], [2.0, 1.0, 4.0, 3.0]])


@pytest.mark.parametrize("f", [
    lambda a: np.median(a), lambda a: np.median(a, axis=1), lambda a: np.median(a, axis=0),
    lambda a: np.percentile(a, [10, 50], axis=1), lambda a: np.quantile(a, 0.3),
    lambda a: np.quantile(a, [0.3, 0.9], axis=1, keepdims=True),
    lambda a: np.quantile(a, 0.5, method="lower"), lambda a: np.max(a, axis=1), lambda a: np.min(a),
    lambda a: np.sort(a, axis=1), lambda a: np.sort(a, axis=None),
], ids=["median", "median1", "median0", "percentile", "quantile", "quantile_keepdims", "lower", "max", "min",
        "sort", "sort_flat"])
def test_nan_propagates_as_numpys(f):
    ours = f(tt.tensor(NAN_ROWS, requires_grad=True))
    np.testing.assert_array_equal(ours.data, f(NAN_ROWS))        # NaN where NumPy has NaN
    assert ours.data.shape == np.shape(f(NAN_ROWS))


def test_a_nan_maximum_takes_the_gradient_to_the_nan():
    g = tt.grad(lambda a: tt.max(a))(np.array([1.0, np.nan, 3.0]))
    np.testing.assert_array_equal(g, [0.0, 1.0, 0.0])
    g = tt.grad(lambda a: tt.sum(np.median(a, axis=1)[1:]))(NAN_ROWS)   # the clean row: as before
    np.testing.assert_array_equal(g, [[0, 0, 0, 0], [0.5, 0, 0, 0.5]])


# ----- issue 30: NaN-aware reductions, weights, covariance -----------------------------------------------
_RNG = np.random.default_rng(3)
X35 = _RNG.standard_normal((3, 5))
WITH_NAN = X35.copy()
WITH_NAN[1, 2] = np.nan
WITH_NAN[2, :] = np.nan
W5 = _RNG.uniform(0.5, 2.0, 5)
FW = np.array([1, 2, 1, 3, 1])


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("f", [
    lambda a: np.nansum(a, axis=1), lambda a: np.nansum(a), lambda a: np.nanmean(a, axis=1),
    lambda a: np.nanmean(a, axis=0, keepdims=True), lambda a: np.nanvar(a, axis=1, ddof=1),
    lambda a: np.nanstd(a), lambda a: np.nanstd(a, axis=1),
], ids=["nansum1", "nansum", "nanmean1", "nanmean0k", "nanvar_ddof", "nanstd", "nanstd1"])
def test_nan_reductions_equal_numpys_and_ignore_the_nans_in_the_gradient(f):
    ours = f(tt.tensor(WITH_NAN, requires_grad=True))
    np.testing.assert_allclose(ours.data, f(WITH_NAN), rtol=1e-12)
    finite = ~np.isnan(f(WITH_NAN))
    loss = lambda a: tt.sum(tt.where(finite, f(a), 0.0))                        # noqa: E731
    g = tt.grad(loss)(WITH_NAN)
    assert np.all(g[np.isnan(WITH_NAN)] == 0)
    clean = ~np.isnan(WITH_NAN)
    # central differences on the values that are there
    numeric = tt.numerical_grad(lambda v: tt.sum(tt.where(finite, f(tt.where(clean, v, np.nan)), 0.0)),
                                np.where(clean, WITH_NAN, 0.0))[0]
    np.testing.assert_allclose(g[clean], numeric[clean], rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("f", [
    lambda a: np.average(a, axis=1, weights=W5), lambda a: np.average(a, axis=0),
    lambda a: np.average(a, weights=np.abs(X35) + 1),
    lambda a: np.average(a, axis=1, weights=W5, returned=True)[0],
    lambda a: np.cov(a), lambda a: np.cov(a.T, rowvar=False), lambda a: np.cov(a, bias=True),
    lambda a: np.cov(a[0], a[1]), lambda a: np.cov(a, fweights=FW, aweights=W5),
    lambda a: np.cov(a, fweights=FW, ddof=2), lambda a: np.cov(a[0]),
], ids=["average_w", "average", "average_full", "average_returned", "cov", "cov_rowvar", "cov_bias", "cov_y",
        "cov_weights", "cov_ddof", "cov_1d"])
def test_average_and_cov_equal_numpys_in_both_modes(f):
    np.testing.assert_allclose(f(tt.tensor(X35)).data, f(X35), rtol=1e-12)
    tt.gradcheck(f, X35)


def test_average_is_differentiable_in_the_weights_and_refuses_zero_weights():
    loss = lambda w: tt.sum(np.average(X35, axis=1, weights=w))                # noqa: E731
    np.testing.assert_allclose(tt.grad(loss)(W5), tt.numerical_grad(loss, W5)[0], rtol=1e-7)
    with pytest.raises(ZeroDivisionError):
        np.average(tt.tensor(X35, requires_grad=True), axis=1, weights=np.zeros(5))
