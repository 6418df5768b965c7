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
