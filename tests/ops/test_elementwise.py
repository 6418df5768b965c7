"""Elementwise operations with NumPy's names (ops/elementwise.py): what the sweep over specs.py
does not reach. NumPy's spellings on Tensors, bounds and kinks, no-gradient ops, methods, dtypes."""

import math

import numpy as np
import pytest
import scipy.special

import tinytensor as tt


def leaf(value, dtype=None):
    return tt.tensor(value, requires_grad=True, dtype=dtype)


def grad_of(f, x):
    return tt.grad(lambda v: tt.sum(f(v)))(np.asarray(x, dtype=float))


UNARY = ["log1p", "expm1", "log2", "log10", "exp2", "reciprocal", "tan", "arcsin", "arccos", "arctan",
         "sinh", "cosh", "arcsinh", "arctanh", "sinc"]
BINARY = ["hypot", "arctan2", "logaddexp", "logaddexp2", "remainder", "fmax", "fmin"]


# ----- NumPy's own spelling on a Tensor records tinytensor's operation -------------------------------
@pytest.mark.parametrize("name", UNARY + ["arccosh"])
def test_numpy_unary_on_a_tensor_is_recorded(name):
    x = leaf([1.3, 0.4]) if name != "arccosh" else leaf([1.3, 2.4])
    x = x * 0.5 if name in ("arcsin", "arccos", "arctanh") else x
    y = getattr(np, name)(x)
    assert isinstance(y, tt.Tensor) and y.requires_grad
    assert y._prim is tt.REGISTRY[name]
    np.testing.assert_allclose(y.data, getattr(np, name)(x.data), rtol=1e-15)
    assert getattr(x, name)()._prim is tt.REGISTRY[name]          # the method


@pytest.mark.parametrize("name", BINARY)
def test_numpy_binary_on_tensors_is_recorded(name):
    a, b = leaf([1.3, -0.4]), np.array([0.7, 2.0])
    for y in (getattr(np, name)(a, b), getattr(np, name)(b, a), getattr(a, name)(b)):
        assert isinstance(y, tt.Tensor) and y._prim is tt.REGISTRY[name]


def test_scipy_erf_and_the_activations():
    x = leaf([-1.0, 0.0, 2.0])
    assert scipy.special.erf(x)._prim is tt.REGISTRY["erf"]
    np.testing.assert_allclose(tt.erf(x).data, scipy.special.erf(x.data), rtol=1e-15)
    np.testing.assert_allclose(tt.gelu(x).data, x.data * scipy.special.ndtr(x.data), rtol=1e-15)
    np.testing.assert_allclose(tt.softplus(x).data, np.log1p(np.exp(x.data)), rtol=1e-15)


def test_remainder_operators_and_np_mod():
    x = leaf([5.5, -3.0, 2.0])
    for y, expected in ((x % 2.0, np.remainder(x.data, 2.0)), (7.0 % x, np.remainder(7.0, x.data)),
                        (np.mod(x, 2.0), np.remainder(x.data, 2.0)), (np.array(2.5) % x, 2.5 % x.data)):
        assert isinstance(y, tt.Tensor) and y.requires_grad
        np.testing.assert_array_equal(y.data, expected)
    (x % 2.0).sum().backward()
    np.testing.assert_array_equal(x.grad, [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(grad_of(lambda b: 7.0 % b, [2.0, -3.0]), [-3.0, 3.0])   # -floor(a/b)


# ----- activations at their extremes and kinks ------------------------------------------------
def test_softplus_gelu_are_stable_far_out():
    x = np.array([-1000.0, -40.0, 0.0, 40.0, 1000.0])
    np.testing.assert_allclose(tt.softplus(x), [0.0, np.exp(-40.0), math.log(2), 40.0, 1000.0], rtol=1e-15)
    np.testing.assert_allclose(grad_of(tt.softplus, x), scipy.special.expit(x), rtol=1e-15)
    g = tt.gelu(np.array([-30.0, -10.0, 10.0]))
    assert g[0] == pytest.approx(-30.0 * scipy.special.ndtr(-30.0), rel=1e-13) and g[0] < 0   # not 0
    np.testing.assert_allclose(g[1:], [-10 * scipy.special.ndtr(-10.0), 10.0], rtol=1e-14)
    np.testing.assert_allclose(grad_of(tt.gelu, [-40.0, 0.0, 40.0]), [0.0, 0.5, 1.0], atol=1e-300)


def test_gelu_tanh_and_softplus_beta_match_pytorch_formulas():
    x = np.linspace(-3, 3, 7)
    expected = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    np.testing.assert_allclose(tt.gelu(x, approximate="tanh"), expected, rtol=1e-14)
    np.testing.assert_allclose(tt.softplus(x, beta=2.0), np.log1p(np.exp(2 * x)) / 2, rtol=1e-14)
    with pytest.raises(ValueError, match="approximate"):
        tt.gelu(x, approximate="erf")


def test_leaky_relu_slope_at_zero_is_the_negative_slope_as_pytorch():
    np.testing.assert_array_equal(grad_of(lambda x: tt.leaky_relu(x, 0.1), [-2.0, 0.0, 3.0]), [0.1, 0.1, 1.0])
    np.testing.assert_array_equal(tt.leaky_relu(np.array([-2.0, 3.0])), [-0.02, 3.0])


def _sinc_slope(x):
    """sinc'(x) in long double: its Taylor series near 0, the closed form elsewhere."""
    x, pi = np.longdouble(x), np.longdouble("3.14159265358979323846264338327950288")
    if abs(x) < 0.5:
        return sum((-1) ** n * 2 * n * pi ** (2 * n) * x ** (2 * n - 1) / math.factorial(2 * n + 1)
                   for n in range(1, 30))
    return (np.cos(pi * x) - np.sin(pi * x) / (pi * x)) / x


def test_sinc_at_zero_value_slope_and_curvature():
    assert tt.sinc(np.array(0.0)) == 1.0
    assert grad_of(tt.sinc, 0.0) == 0.0
    hess = tt.hvp(lambda x: tt.sinc(x), (0.0,), (1.0,))
    assert hess == pytest.approx(-math.pi ** 2 / 3, rel=1e-12)
    for x in (1e-5, 0.0799, 0.0801, 0.2999, 0.3001, 1.7):   # both sides of the switches to the series
        assert grad_of(tt.sinc, x) == pytest.approx(float(_sinc_slope(x)), rel=1e-14)
        x32 = tt.tensor(np.float32(x), requires_grad=True)
        tt.sinc(x32).backward()
        assert x32.grad.dtype == np.float32
        assert x32.grad == pytest.approx(float(_sinc_slope(float(x32.data))), rel=1e-6)


def test_hypot_arctan2_at_the_origin_have_zero_gradient_not_nan():
    a, b = leaf([0.0, 3.0]), leaf([0.0, 4.0])
    tt.sum(tt.hypot(a, b) + tt.arctan2(a, b)).backward()
    assert np.all(np.isfinite(a.grad)) and np.all(np.isfinite(b.grad))
    np.testing.assert_allclose(a.grad, [0.0, 0.6 + 4 / 25])
    np.testing.assert_allclose(b.grad, [0.0, 0.8 - 3 / 25])


def test_fmax_fmin_give_the_gradient_to_the_number_over_nan():
    a, b = leaf([np.nan, 1.0, 2.0]), leaf([3.0, np.nan, 2.0])
    y = tt.fmax(a, b) + tt.fmin(a, b)
    np.testing.assert_array_equal(y.data, [6.0, 2.0, 4.0])
    y.backward(np.ones(3))
    np.testing.assert_array_equal(a.grad, [0.0, 2.0, 1.0])       # ties: half to each, twice
    np.testing.assert_array_equal(b.grad, [2.0, 0.0, 1.0])


# ----- where, clip -------------------------------------------------------------------------------
def test_where_broadcasts_and_takes_a_condition_tensor():
    x, y = leaf([[1.0, 2.0, 3.0]]), leaf([[10.0], [20.0]])
    cond = tt.tensor([True, False, True])
    out = tt.where(cond, x, y)
    np.testing.assert_array_equal(out.data, np.where(cond.data, x.data, y.data))
    out.backward(np.ones((2, 3)))
    np.testing.assert_array_equal(x.grad, [[2.0, 0.0, 2.0]])
    np.testing.assert_array_equal(y.grad, [[1.0], [1.0]])
    assert np.where(x.data > 1, x, 0.0)._prim is tt.REGISTRY["where"]           # np.where on a Tensor
    np.testing.assert_array_equal(tt.where(np.array([0, 2, 3]) > 1)[0], [1, 2])   # indices, as NumPy
    with pytest.raises(ValueError, match="both x and y"):
        tt.where(cond, x)
    assert tt.where(np.array([True]), np.float32(1), 0.0).dtype == np.float32


def test_clip_gradient_goes_to_x_inside_and_to_the_active_bound():
    x = leaf([-2.0, -1.0, 0.5, 1.0, 3.0])
    lo, hi = leaf(-1.0), leaf([1.0, 1.0, 1.0, 1.0, 2.0])
    y = tt.clip(x, lo, hi)
    np.testing.assert_array_equal(y.data, np.clip(x.data, lo.data, hi.data))
    y.backward(np.arange(1.0, 6.0))
    np.testing.assert_array_equal(x.grad, [0.0, 2.0, 3.0, 4.0, 0.0])   # at a bound, x keeps it (PyTorch)
    assert lo.grad == 1.0
    np.testing.assert_array_equal(hi.grad, [0.0, 0.0, 0.0, 0.0, 5.0])


def test_clip_with_crossed_bounds_is_numpys_and_all_goes_to_a_max():
    x, lo, hi = leaf([0.0, 5.0, -5.0]), leaf(2.0), leaf(1.0)
    y = tt.clip(x, lo, hi)
    np.testing.assert_array_equal(y.data, np.clip(x.data, 2.0, 1.0))   # all a_max
    y.sum().backward()
    assert (x.grad == 0).all() and lo.grad == 0.0 and hi.grad == 3.0


@pytest.mark.parametrize("seed", range(4))
def test_clip_with_random_broadcast_bounds_some_crossed_matches_differences(seed):
    rng = np.random.default_rng(seed)
    x, lo, hi = rng.uniform(-2, 2, (3, 4)), rng.uniform(-1, 1, (4,)), rng.uniform(-1, 1, (3, 1))
    assert (lo > hi).any() and (lo < hi).any()
    np.testing.assert_array_equal(tt.clip(x, lo, hi), np.clip(x, lo, hi))
    assert tt.gradcheck(tt.clip, x, lo, hi)


def test_clip_spellings_and_none_bounds():
    x = leaf([-2.0, 0.5, 3.0], dtype=np.float32)
    for y in (x.clip(0, 1), np.clip(x, 0, 1), np.clip(x, a_min=0, a_max=1), np.clip(x, min=0, max=1),
              tt.clamp(x, min=0, max=1), x.clamp(0, 1), x.clip(max=1).clip(min=0)):
        assert isinstance(y, tt.Tensor) and y.dtype == np.float32 and y.requires_grad
        np.testing.assert_array_equal(y.data, [0.0, 0.5, 1.0])
    y = tt.clip(x, None, None)                 # NumPy 2: no bound, x itself (a recorded copy)
    np.testing.assert_array_equal(y.data, x.data)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad, [1, 1, 1])
    with pytest.raises(ValueError, match="at least one"):
        x.clamp()
    with pytest.raises(TypeError, match="out="):
        np.clip(x, 0, 1, out=np.empty(3))
    with pytest.raises(TypeError, match="once"):
        tt.clip(x, 0, min=1)


# ----- no gradient --------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["sign", "floor", "ceil", "round", "trunc"])
def test_piecewise_constant_ops_give_a_tensor_without_gradient(name):
    x = leaf([-1.5, 0.0, 2.7], dtype=np.float32)
    y = getattr(tt, name)(x)
    assert isinstance(y, tt.Tensor) and not y.requires_grad and y.dtype == np.float32
    np.testing.assert_array_equal(y.data, getattr(np, name)(x.data))
    np.testing.assert_array_equal(getattr(x, name)().data, y.data)                  # the method
    assert type(getattr(np, name)(x)) is np.ndarray                                # NumPy's: an array
    assert type(getattr(tt, name)(x.data)) is np.ndarray                           # arrays in, array out
    assert tt.sum(x * y).requires_grad                                             # usable as a constant


def test_round_takes_decimals():
    x = tt.tensor([1.2345, -2.5])
    np.testing.assert_array_equal(tt.round(x, 2).data, [1.23, -2.5])
    np.testing.assert_array_equal(x.round(decimals=1).data, np.round(x.data, 1))


def test_comparison_functions_give_boolean_arrays_as_the_operators():
    x = leaf([1.0, 2.0, np.nan])
    for name in ("less", "less_equal", "greater", "greater_equal", "equal", "not_equal"):
        result = getattr(tt, name)(x, 2.0)
        assert type(result) is np.ndarray and result.dtype == bool
        np.testing.assert_array_equal(result, getattr(np, name)(x.data, 2.0))
    np.testing.assert_array_equal(tt.isnan(x), [False, False, True])
    np.testing.assert_array_equal(tt.isfinite(x), [True, True, False])
    assert not tt.isinf(x).any()


# ----- clone --------------------------------------------------------------------------------------
def test_clone_is_a_recorded_copy():
    x = leaf([1.0, 2.0])
    for c in (x.clone(), tt.clone(x), x.copy(), np.copy(x)):
        assert c._prim is tt.REGISTRY["clone"] and c.data is not x.data
        c.data[0] = 100.0
        assert x.data[0] == 1.0
    (x.clone() * 3).sum().backward()
    np.testing.assert_array_equal(x.grad, [3.0, 3.0])


# ----- dtypes -------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", UNARY + ["erf", "softplus", "gelu", "leaky_relu", "clone"])
def test_float32_stays_float32(name):
    x = leaf([0.25, 0.5], dtype=np.float32)
    y = getattr(tt, name)(x)
    assert y.dtype == np.float32
    y.sum().backward()
    assert x.grad.dtype == np.float32
    assert y.jvp({x: np.ones(2, np.float32)}).dtype == np.float32


def test_zero_d_and_python_numbers():
    assert tt.log1p(leaf(0.5)).shape == ()
    assert tt.hypot(3.0, leaf(4.0)).item() == 5.0      # float() of a live Tensor: refused (issue 19)
    assert tt.where(True, leaf(1.0), 2.0).item() == 1.0
    assert tt.clip(leaf(3.0), 0, 1).item() == 1.0


def test_gelu_float32_cdf_is_within_one_ulp_of_scipy_in_float64():
    """GELU's Phi on float32 values is a polynomial in float64 on |x| < 2.5 and SciPy's ndtr
    further out (see ops.elementwise._ndtr_float32): within 1 ulp of SciPy's float64 ndtr
    rounded to float32 everywhere, at the seam, at the special values, in any layout."""
    from tinytensor.ops.elementwise import _ndtr_float32
    rng = np.random.default_rng(0)
    special = [0.0, -0.0, np.inf, -np.inf, 2.5, -2.5, np.nextafter(np.float32(2.5), 0), 1e-45, -1e-45,
               3e38, -3e38, 1e-30, -13.0, -14.0, 6.0]
    x = np.concatenate([rng.standard_normal(200_000) * s for s in (0.3, 1.0, 4.0)]
                       + [np.linspace(-40, 40, 200_001), special]).astype(np.float32)
    with np.errstate(invalid="ignore"):                 # -inf * Phi(-inf): NaN, as NumPy's
        got = tt.gelu(x) / np.where(x == 0, 1, x)      # Phi as the forward computed it
    expected = scipy.special.ndtr(x.astype(np.float64)).astype(np.float32)
    ulps = np.abs(got.view(np.int32).astype(np.int64) - expected.view(np.int32).astype(np.int64))
    ok = np.isfinite(x) & (np.abs(x) > 1e-30) & (np.abs(x) < 1e30) & (expected > np.finfo(np.float32).tiny)
    assert ulps[ok].max() <= 2          # Phi within 1 ulp, and one rounding of the product
    phi = _ndtr_float32(x)
    assert phi.dtype == np.float32
    ulps = np.abs(phi.view(np.int32).astype(np.int64) - expected.view(np.int32).astype(np.int64))
    assert ulps.max() <= 1
    np.testing.assert_array_equal(tt.gelu(np.array([np.nan, np.inf, -0.0], np.float32))[1:], [np.inf, -0.0])
    assert np.isnan(tt.gelu(np.array([np.nan], np.float32))[0])
    grid = np.asfortranarray(rng.standard_normal((30, 40)).astype(np.float32) * 3)
    np.testing.assert_array_equal(tt.gelu(grid[::2, ::3]), tt.gelu(np.ascontiguousarray(grid[::2, ::3])))
    scalar = _ndtr_float32(np.float32(0.3))
    assert type(scalar) is np.float32 and scalar == np.float32(scipy.special.ndtr(0.3))
    assert tt.gelu(np.zeros((0, 3), np.float32)).shape == (0, 3)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gelu_gradient_at_subnormal_inputs_is_one_half(dtype):
    """GELU's rule reads Phi(x) back as ans / x; where x * Phi(x) underflows (x subnormal) that
    quotient is not Phi(x), so there the rule takes Phi(0) = 1/2 (the exact value to the dtype's
    precision), never 0."""
    tiny = np.finfo(dtype).smallest_subnormal
    x = np.array([tiny, -tiny, 4 * tiny, np.finfo(dtype).tiny, 0.0, 1.0], dtype=dtype)
    g = tt.grad(lambda v: tt.nn.functional.gelu(v).sum())(x)
    assert g.dtype == dtype
    np.testing.assert_array_equal(g[:5], 0.5)
    np.testing.assert_allclose(g[5], 1.0833154705876864, rtol=1e-6)
