"""Reductions with NumPy's names (ops/reductions.py) and the creation helpers: zeros in prod,
zero spread in std, ddof, axes, indices, dtypes, what the sweep over specs.py does not reach."""

import numpy as np
import pytest

import tinytensor as tt
from tinytensor.checks import check_op
from tinytensor.ops import reductions as ops_reductions
from tinytensor.specs import _prod_others_reference, with_zeros


def leaf(value, dtype=None):
    return tt.tensor(value, requires_grad=True, dtype=dtype)


# ----- prod: the product of the others, exact with zeros ---------------------------------------
def test_prod_gradient_with_one_and_two_zeros():
    x = leaf([[2.0, 0.0, 3.0, 4.0], [0.0, 5.0, 0.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
    tt.prod(x, axis=1).sum().backward()
    np.testing.assert_array_equal(x.grad, [[0.0, 24.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0],
                                           [24.0, 12.0, 8.0, 6.0]])
    assert tt.prod(x, axis=1).jvp({x: np.ones((3, 4))}).tolist() == [24.0, 0.0, 50.0]


def test_prod_hessian_at_zeros_is_exact():
    x = np.array([0.0, 2.0, 0.0, 3.0])     # two zeros: d2/dx0 dx2 = 2 * 3, everything else 0
    H = tt.jacobian(tt.grad(tt.prod))(x)
    expected = np.zeros((4, 4))
    expected[0, 2] = expected[2, 0] = 6.0
    np.testing.assert_array_equal(H, expected)
    x = np.array([0.0, 2.0, 5.0])          # one zero
    np.testing.assert_array_equal(tt.jacobian(tt.grad(tt.prod))(x), [[0, 5, 2], [5, 0, 0], [2, 0, 0]])
    np.testing.assert_array_equal(tt.hvp(tt.prod, (x,), (np.ones(3),)), [7.0, 5.0, 2.0])


@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)])
def test_prod_others_rules_with_zeros(axis):
    """The product of the others (prod's gradient) has prod's Hessian as its rules; with zeros
    they take the exact path, checked here as every primitive is in the sweep."""
    x = with_zeros(np.random.default_rng(3), (3, 4))
    errors = check_op(ops_reductions._prod_others, [x], dict(axis=axis), _prod_others_reference)
    assert max(errors.values()) < 1e-6, errors


def test_prod_of_an_empty_axis_is_one_with_zero_gradient():
    x = leaf(np.zeros((2, 0)))
    y = tt.prod(x, axis=1)
    np.testing.assert_array_equal(y.data, [1.0, 1.0])
    y.sum().backward()
    assert x.grad.shape == (2, 0)


# ----- var, std -----------------------------------------------------------------------------------
@pytest.mark.parametrize("axis, keepdims", [(None, False), (0, True), (-1, False), ((0, 2), False),
                                            ((-1, 0), True)])
@pytest.mark.parametrize("ddof", [0, 1])
def test_var_std_follow_numpy(axis, keepdims, ddof):
    x = np.random.default_rng(0).standard_normal((2, 3, 4))
    for name in ("var", "std"):
        expected = getattr(np, name)(x, axis=axis, ddof=ddof, keepdims=keepdims)
        for y in (getattr(tt, name)(leaf(x), axis=axis, ddof=ddof, keepdims=keepdims),
                  getattr(np, name)(leaf(x), axis=axis, ddof=ddof, keepdims=keepdims),
                  getattr(leaf(x), name)(axis, ddof=ddof, keepdims=keepdims)):
            assert y.requires_grad and y.shape == expected.shape
            np.testing.assert_allclose(y.data, expected, rtol=1e-14)
        assert tt.gradcheck(lambda v: getattr(tt, name)(v, axis=axis, ddof=ddof, keepdims=keepdims), x)


def test_var_correction_is_ddof_and_dtype_out_are_handled():
    x = np.arange(6.0)
    assert tt.var(leaf(x), correction=1).item() == np.var(x, ddof=1)
    assert tt.std(leaf(x), dtype=np.float32).dtype == np.float32
    with pytest.raises(ValueError, match="ddof or correction"):
        tt.var(x, ddof=1, correction=1)
    with pytest.raises(TypeError, match="out="):
        np.var(leaf(x), out=np.empty(()))


def test_std_gradient_at_zero_spread_is_zero_as_pytorch():
    x = leaf([[2.0, 2.0, 2.0], [1.0, 2.0, 3.0]])
    y = tt.std(x, axis=1)
    assert y.data[0] == 0.0
    y.sum().backward()
    assert np.all(np.isfinite(x.grad))
    np.testing.assert_array_equal(x.grad[0], 0.0)
    np.testing.assert_allclose(x.grad[1], (x.data[1] - 2.0) / (3 * y.data[1]))
    assert np.all(tt.var(x, axis=1).jvp({x: np.ones((2, 3))}) == 0.0)   # a shift changes no spread


def test_var_with_too_few_entries_is_nan_as_numpy():
    x = leaf([3.0])
    with pytest.warns(RuntimeWarning):
        y = tt.var(x, ddof=1)
    assert np.isnan(y.item())
    y.backward()
    assert np.isnan(x.grad).all()          # not a silent number


@pytest.mark.parametrize("name", ["var", "std", "min", "prod", "cumsum"])
def test_float32_stays_float32(name):
    x = leaf([[0.5, 1.5, -2.0], [1.0, 2.5, 3.0]], dtype=np.float32)
    y = getattr(tt, name)(x)
    assert y.dtype == np.float32
    y.sum().backward()
    assert x.grad.dtype == np.float32


# ----- min, argmax, argmin -----------------------------------------------------------------------
def test_min_ties_share_the_gradient_as_max():
    x = leaf([[1.0, 3.0, 1.0], [2.0, 0.0, 5.0]])
    tt.min(x, axis=1).sum().backward()
    np.testing.assert_array_equal(x.grad, [[0.5, 0.0, 0.5], [0.0, 1.0, 0.0]])
    for y in (np.min(x, axis=-1, keepdims=True), np.amin(x, -1, keepdims=True), x.min(-1, keepdims=True)):
        assert y.requires_grad
        np.testing.assert_array_equal(y.data, [[1.0], [0.0]])


def test_argmax_argmin_return_numpy_indices():
    x = leaf([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]])
    assert tt.argmax(x) == 3 and x.argmin() == 4 and np.argmax(x) == 3
    np.testing.assert_array_equal(tt.argmax(x, axis=1), [1, 0])
    np.testing.assert_array_equal(x.argmin(axis=0, keepdims=True), [[0, 1, 0]])
    assert isinstance(tt.argmax(x, axis=1), np.ndarray) and tt.argmax(x, axis=1).dtype.kind == "i"
    np.testing.assert_array_equal(tt.argmin(np.array([3, 1, 2])), 1)


# ----- cumsum, diff ---------------------------------------------------------------------------
def test_cumsum_flattens_without_axis_as_numpy():
    x = leaf(np.arange(6.0).reshape(2, 3))
    y = tt.cumsum(x)
    np.testing.assert_array_equal(y.data, np.cumsum(x.data))
    y.backward(np.ones(6))
    np.testing.assert_array_equal(x.grad, [[6.0, 5.0, 4.0], [3.0, 2.0, 1.0]])
    np.testing.assert_array_equal(np.cumsum(x, axis=-1).data, np.cumsum(x.data, axis=-1))
    np.testing.assert_array_equal(x.cumsum(0).data, np.cumsum(x.data, 0))


def test_diff_follows_numpy_and_its_errors():
    x = np.random.default_rng(1).standard_normal((3, 5))
    for kwargs in (dict(), dict(n=2), dict(n=0), dict(axis=0), dict(n=3, axis=-1),
                   dict(prepend=0.0, append=np.ones((3, 2))), dict(n=6)):
        y = tt.diff(leaf(x), **kwargs)
        np.testing.assert_allclose(y.data, np.diff(x, **kwargs), rtol=1e-14)
    assert np.diff(leaf(x))._prim is tt.REGISTRY["sub"] and leaf(x).diff(axis=0).shape == (2, 5)
    assert tt.diff(leaf(x, dtype=np.float32), prepend=0.5).dtype == np.float32
    with pytest.raises(ValueError, match="one-dimensional"):
        tt.diff(leaf(1.0))
    with pytest.raises(ValueError, match="non-negative"):
        tt.diff(x, n=-1)
    with pytest.raises(np.exceptions.AxisError):
        tt.diff(x, axis=2)


# ----- Tensor methods from PyTorch ---------------------------------------------------------------
def test_numel_tolist():
    x = leaf([[1.0, 2.0], [3.0, 4.0]])
    assert x.numel() == 4 and tt.numel(x) == 4 and type(x.numel()) is int
    assert x.tolist() == [[1.0, 2.0], [3.0, 4.0]] and tt.tensor(2.5).tolist() == 2.5


# ----- creation helpers ---------------------------------------------------------------------------
def test_like_helpers_keep_the_dtype():
    for source in (np.ones((2, 3), np.float32), tt.tensor([1, 2, 3]), [[1.0, 2.0]]):
        for make, value in ((tt.zeros_like, 0), (tt.ones_like, 1)):
            t = make(source)
            assert isinstance(t, tt.Tensor) and t.shape == np.shape(tt.tensor(source).data)
            assert t.dtype == np.asarray(tt.tensor(source).data).dtype and (t.data == value).all()
    assert tt.zeros_like(np.ones(2), dtype=np.float32).dtype == np.float32
    assert tt.ones_like(np.ones(2, np.float32), requires_grad=True).requires_grad


def test_full_arange_eye_rand():
    assert tt.full((2, 3), 7).dtype == np.int64 and (tt.full((2, 3), 7).data == 7).all()
    assert tt.full(3, 0.5, dtype=np.float32).dtype == np.float32
    np.testing.assert_array_equal(tt.arange(5).data, np.arange(5))
    assert tt.arange(5).dtype == np.arange(5).dtype
    np.testing.assert_array_equal(tt.arange(1, 2, 0.25).data, [1.0, 1.25, 1.5, 1.75])
    np.testing.assert_array_equal(tt.arange(2, 8, 3).data, [2, 5])
    np.testing.assert_array_equal(tt.arange(3, 6).data, [3, 4, 5])
    np.testing.assert_array_equal(tt.arange(5, step=2).data, [0, 2, 4])
    assert tt.arange(3.0, requires_grad=True).requires_grad
    np.testing.assert_array_equal(tt.eye(2, 3, k=1).data, np.eye(2, 3, k=1))
    assert tt.eye(3).dtype == np.float64 and tt.eye(2, dtype=np.float32).dtype == np.float32
    r = tt.rand(3, 4, rng=0)
    np.testing.assert_array_equal(r.data, tt.rand((3, 4), rng=np.random.default_rng(0)).data)
    assert r.shape == (3, 4) and (r.data >= 0).all() and (r.data < 1).all()
    assert tt.rand(2, rng=1, dtype=np.float32, requires_grad=True).dtype == np.float32
    with pytest.raises(TypeError, match="floating-point"):
        tt.arange(3, requires_grad=True)


@pytest.mark.parametrize("np_fun, prim", [(np.min, "min"), (np.amin, "min"), (np.prod, "prod"),
                                          (np.var, "var"), (np.std, "std"), (np.cumsum, "cumsum")])
@pytest.mark.parametrize("args, kwargs", [((), {}), ((), dict(axis=-1)), ((0,), {})])
def test_numpy_reductions_on_a_tensor_are_recorded(np_fun, prim, args, kwargs):
    x = leaf([[1.0, 2.0, 4.0], [3.0, -1.0, 0.5]])
    y = np_fun(x, *args, **kwargs)
    assert isinstance(y, tt.Tensor) and y._prim is tt.REGISTRY[prim]
    np.testing.assert_allclose(y.data, np_fun(x.data, *args, **kwargs), rtol=1e-15)
