"""Issue 7, stability battery: extreme inputs with exact expected values, in both modes.

Every test in this file runs with warnings turned into errors (the module's `pytestmark`), so
a RuntimeWarning from NumPy (overflow, divide by zero, 0 * inf) is a failure, not noise.

The documented values at the edges (as PyTorch):
    relu'(0) = 0          abs'(0) = 0          sqrt'(0) = +inf          log(0) = -inf
    maximum/minimum at a tie: the gradient is split 0.5 / 0.5
    max reduction: the gradient is split evenly among the tied maxima
    frobenius_norm at W = 0: the gradient is 0 (not 0/0)
    a logit of -inf with no label mass contributes 0 to the cross-entropy (0 * log 0 = 0)
"""

import numpy as np
import pytest

import tinytensor as tt

pytestmark = pytest.mark.filterwarnings("error")

INF = np.inf


def both_modes(f, x, u=None, t=None):
    """Value, VJP (cotangent u, default ones) and JVP (tangent t, default ones) of f at x."""
    leaf = tt.tensor(x, requires_grad=True)
    out = f(leaf)
    u = np.ones(out.shape, out.dtype) if u is None else np.asarray(u, out.dtype)
    t = np.ones(leaf.shape, leaf.dtype) if t is None else np.asarray(t, leaf.dtype)
    out.backward(u)
    return out.data, leaf.grad, out.jvp({leaf: t})


def assert_exact(actual, expected):
    actual = np.asarray(actual)
    np.testing.assert_array_equal(actual, np.asarray(expected, dtype=actual.dtype))


# ----- softmax and friends at +-1e4 and with rows of all -inf but one --------------------------------
LOGITS = np.array([[1e4, -1e4, 0.0],       # one winner by 1e4: exp(-1e4) underflows to exactly 0
                   [-INF, 5.0, -INF],      # all -inf but one
                   [0.0, 1e4, 1e4]])       # a tie at 1e4
U = np.array([[1.0, 2.0, 3.0]] * 3)


def test_softmax_extreme_logits():
    value, grad, tangent = both_modes(tt.softmax, LOGITS, u=U, t=U)
    assert_exact(value, [[1, 0, 0], [0, 1, 0], [0, 0.5, 0.5]])
    # s * (u - <u, s>); the softmax Jacobian is symmetric, so the JVP along u is the same.
    expected = [[0, 0, 0], [0, 0, 0], [0, -0.25, 0.25]]
    assert_exact(grad, expected)
    assert_exact(tangent, expected)


def test_log_softmax_extreme_logits():
    value, grad, tangent = both_modes(tt.log_softmax, LOGITS, u=U, t=U)
    assert_exact(value, [[0, -2e4, -1e4], [-INF, 0, -INF], [-(1e4 + np.log(2)), -np.log(2), -np.log(2)]])
    # VJP: u - softmax * sum(u);  JVP: t - <softmax, t>
    assert_exact(grad, [[1 - 6, 2, 3], [1, 2 - 6, 3], [1, 2 - 3, 3 - 3]])
    assert_exact(tangent, [[0, 1, 2], [-1, 0, 1], [1 - 2.5, 2 - 2.5, 3 - 2.5]])


def test_logsumexp_extreme_logits():
    value, grad, tangent = both_modes(lambda z: tt.logsumexp(z, axis=-1), LOGITS, t=U)
    assert_exact(value, [1e4, 5.0, 1e4 + np.log(2)])
    assert_exact(grad, [[1, 0, 0], [0, 1, 0], [0, 0.5, 0.5]])
    assert_exact(tangent, [1, 2, 2.5])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_large_tied_logits_lose_no_precision(dtype):
    """At logits of 1e4, logsumexp itself is rounded at the scale of 1e4 (ulp 1e-3 in float32):
    log_softmax, the logsumexp weights and the fused loss must not inherit that rounding."""
    z = np.array([[1e4, 1e4, 0.0]], dtype)
    log2 = dtype(np.log(2))
    value, grad, tangent = both_modes(tt.log_softmax, z, u=[[1, 0, 0]], t=[[1, 3, 0]])
    np.testing.assert_allclose(value[0, :2], [-log2, -log2], rtol=np.finfo(dtype).eps)
    assert_exact(grad, [[0.5, -0.5, 0]])
    assert_exact(tangent, [[-1, 1, -2]])
    value, grad, tangent = both_modes(lambda x: tt.logsumexp(x, axis=-1), z, t=[[1, 3, 0]])
    assert_exact(grad, [[0.5, 0.5, 0]])
    assert_exact(tangent, [2])
    for loss in (tt.softmax_cross_entropy, lambda x, y: tt.cross_entropy(tt.softmax(x), y)):
        value, grad, _ = both_modes(lambda x: loss(x, np.array([0])), z)
        np.testing.assert_allclose(value, log2, rtol=np.finfo(dtype).eps)
        assert_exact(grad, [[-0.5, 0.5, 0]])


def test_logsumexp_of_all_minus_inf_but_one_everywhere():
    value, grad, _ = both_modes(tt.logsumexp, np.array([-INF, -INF, -1e4, -INF]))
    assert_exact(value, -1e4)
    assert_exact(grad, [0, 0, 1, 0])


LABELS = np.array([1, 1, 1])                 # the loser by 2e4, the winner, one of two tied winners
ONE_HOT = np.eye(3)[LABELS]
# Per row: -log_softmax at the label.  Mean over the 3 rows; gradient (softmax - onehot) / 3.
CE_VALUE = (2e4 + 0 + np.log(2)) / 3
CE_GRAD = (np.array([[1, 0, 0], [0, 1, 0], [0, 0.5, 0.5]]) - ONE_HOT) / 3


@pytest.mark.parametrize("labels", [LABELS, ONE_HOT], ids=["indices", "one-hot"])
@pytest.mark.parametrize("loss", [
    pytest.param(lambda z, y: tt.cross_entropy(tt.softmax(z), y), id="cross_entropy(softmax(z))"),
    pytest.param(tt.softmax_cross_entropy, id="softmax_cross_entropy"),
    pytest.param(lambda z, y: tt.crossEntropy(tt.softmax(z), y), id="crossEntropy(softmax(z))"),
])
def test_cross_entropy_of_extreme_logits_is_finite_and_exact(loss, labels):
    value, grad, tangent = both_modes(lambda z: loss(z, labels), LOGITS, t=U)
    np.testing.assert_allclose(value, CE_VALUE, rtol=1e-15)
    np.testing.assert_allclose(grad, CE_GRAD, rtol=1e-15, atol=0)
    np.testing.assert_allclose(tangent, np.sum(CE_GRAD * U), rtol=1e-15)


@pytest.mark.parametrize("loss", [
    pytest.param(lambda z, y: tt.cross_entropy(tt.softmax(z), y), id="fused"),
    pytest.param(tt.softmax_cross_entropy, id="softmax_cross_entropy"),
])
def test_cross_entropy_where_softmax_underflows(loss):
    """softmax([0, -1000]) = [1, 0] exactly; the label on the underflowed class costs 1000."""
    value, grad, tangent = both_modes(lambda z: loss(z, np.array([1])), np.array([[0.0, -1000.0]]))
    assert_exact(value, 1000.0)
    assert_exact(grad, [[1, -1]])
    assert_exact(tangent, 0.0)


def test_unfused_log_of_underflowed_softmax_is_minus_inf():
    """log(softmax(z)) composed by hand underflows to log(0) = -inf (exact, no warning)."""
    z = tt.tensor([[0.0, -1000.0]], requires_grad=True)
    assert_exact(tt.log(tt.softmax(z)).data, [[0, -INF]])
    # And cross_entropy on a probability array that holds an exact 0 (not a softmax output):
    p = tt.tensor([[1.0, 0.0]])
    assert_exact(tt.cross_entropy(p, np.array([0])).data, 0.0)        # 0 * log 0 = 0
    assert_exact(tt.cross_entropy(p, np.array([1])).data, INF)        # -log 0 = inf, as PyTorch


def test_log_of_exp_underflow():
    x = tt.tensor([-1000.0, 0.0], requires_grad=True)
    assert_exact(tt.exp(x).data, [0, 1])
    assert_exact(tt.log(tt.exp(x)).data, [-INF, 0])
    assert_exact(tt.log(tt.tensor(0.0)).data, -INF)


def test_sigmoid_and_tanh_saturate_exactly():
    value, grad, tangent = both_modes(tt.sigmoid, np.array([1e4, -1e4, 0.0]))
    assert_exact(value, [1, 0, 0.5])
    assert_exact(grad, [0, 0, 0.25])
    assert_exact(tangent, [0, 0, 0.25])
    value, grad, tangent = both_modes(tt.tanh, np.array([1e4, -1e4, 0.0]))
    assert_exact(value, [1, -1, 0])
    assert_exact(grad, [0, 0, 1])
    assert_exact(tangent, [0, 0, 1])


# ----- at zero: frobenius_norm, sqrt, abs -----------------------------------------------------------
@pytest.mark.parametrize("shape", [(), (3,), (3, 4)])
def test_frobenius_norm_at_zero_has_zero_gradient(shape):
    value, grad, tangent = both_modes(tt.frobenius_norm, np.zeros(shape))
    assert_exact(value, 0.0)
    assert_exact(grad, np.zeros(shape))
    assert_exact(tangent, 0.0)


def test_sqrt_at_zero_has_infinite_derivative():
    value, grad, tangent = both_modes(tt.sqrt, np.array([0.0, 4.0]))
    assert_exact(value, [0, 2])
    assert_exact(grad, [INF, 0.25])        # as PyTorch: 0.5 / sqrt(0)
    assert_exact(tangent, [INF, 0.25])


def test_abs_at_zero_has_zero_derivative():
    value, grad, tangent = both_modes(tt.abs, np.array([0.0, -0.0, -2.0, 3.0]))
    assert_exact(value, [0, 0, 2, 3])
    assert_exact(grad, [0, 0, -1, 1])
    assert_exact(tangent, [0, 0, -1, 1])


# ----- ties: relu, maximum, minimum, max ---------------------------------------------------------------
def test_relu_at_zero_has_zero_derivative():
    value, grad, tangent = both_modes(tt.relu, np.array([0.0, -1.0, 2.0]))
    assert_exact(value, [0, 0, 2])
    assert_exact(grad, [0, 0, 1])
    assert_exact(tangent, [0, 0, 1])


@pytest.mark.parametrize("op", [tt.maximum, tt.minimum])
def test_maximum_minimum_split_the_gradient_at_ties(op):
    a = tt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = tt.tensor([1.0, 5.0, 0.0], requires_grad=True)
    out = op(a, b)
    out.backward(np.array([4.0, 4.0, 4.0]))
    a_wins = [0.5, 0.0, 1.0] if op is tt.maximum else [0.5, 1.0, 0.0]
    assert_exact(a.grad, 4 * np.array(a_wins))
    assert_exact(b.grad, 4 - 4 * np.array(a_wins))
    assert_exact(out.jvp({a: np.full(3, 2.0), b: np.full(3, 6.0)}),
                 2 * np.array(a_wins) + 6 * (1 - np.array(a_wins)))
    # The same tensor on both sides: both halves come back to it.
    value, grad, tangent = both_modes(lambda x: op(x, x), np.array([1.0, -2.0]))
    assert_exact(value, [1, -2])
    assert_exact(grad, [1, 1])
    assert_exact(tangent, [1, 1])


def test_max_reduction_splits_evenly_among_tied_maxima():
    x = np.array([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, -1.0], [7.0, 1.0, 1.0, 1.0]])
    value, grad, tangent = both_modes(lambda v: tt.max(v, axis=1), x, t=np.arange(12.0).reshape(3, 4))
    assert_exact(value, [3, 2, 7])
    assert_exact(grad, [[0, 0.5, 0.5, 0], [1 / 3, 1 / 3, 1 / 3, 0], [1, 0, 0, 0]])
    assert_exact(tangent, [(1 + 2) / 2, (4 + 5 + 6) / 3, 8])
    value, grad, _ = both_modes(tt.max, np.full((2, 2), 5.0))
    assert_exact(value, 5.0)
    assert_exact(grad, np.full((2, 2), 0.25))


# ----- extreme scales in the frobenius norm -------------------------------------------------------
@pytest.mark.parametrize("w, norm", [
    (np.full((2, 2), 1e200), 2e200),             # the squares (1e400) would overflow
    (np.full((2, 2), 1e-200), 2e-200),           # the squares (1e-400) would underflow to 0
    (np.array([1e200, 1e-200]), 1e200),
    (np.array([1e-310, 0.0]), 1e-310),           # subnormal
    (np.array([3e30, 4e30], np.float32), np.float32(5e30)),
    (np.array([3e-30, 4e-30], np.float32), np.float32(5e-30)),
], ids=["1e200", "1e-200", "mixed", "subnormal", "float32-1e30", "float32-1e-30"])
def test_frobenius_norm_at_extreme_scales_is_exact(w, norm):
    value, grad, tangent = both_modes(tt.frobenius_norm, w)
    assert value.dtype == w.dtype and grad.dtype == w.dtype
    assert_exact(value, norm)
    assert_exact(grad, w / norm)
    np.testing.assert_allclose(tangent, np.sum(w) / norm, rtol=1e-6 if w.dtype == np.float32 else 1e-15)


@pytest.mark.parametrize("scale", [1e200, 1e-200])
def test_frobenius_norm_3_4_5_at_extreme_scales(scale):
    """BLAS nrm2 is exact to one unit in the last place here (5e200 comes back as 4.9999999999999995e200)."""
    value, grad, tangent = both_modes(tt.frobenius_norm, np.array([3.0, 4.0]) * scale)
    np.testing.assert_allclose(value, 5 * scale, rtol=np.finfo(float).eps, atol=0)
    np.testing.assert_allclose(grad, [0.6, 0.8], rtol=2 * np.finfo(float).eps, atol=0)
    np.testing.assert_allclose(tangent, 1.4, rtol=2 * np.finfo(float).eps, atol=0)


def test_the_warnings_as_errors_marker_is_active():
    """The marker above is what makes warnings fail; prove it is active in this module."""
    import warnings
    with pytest.raises(RuntimeWarning):
        warnings.warn("probe", RuntimeWarning, stacklevel=1)
