"""Nothing leaves the tape silently: implicit conversion of a Tensor that needs gradients raises."""

import numpy as np
import pytest
import scipy.linalg
import scipy.special
import scipy.stats

import tinytensor as tt


def leaf(value):
    return tt.tensor(value, requires_grad=True)


@pytest.mark.parametrize("convert", [
    lambda a, b: np.asarray(a),
    lambda a, b: np.array([a, b]),
    lambda a, b: np.sum([a, b]),
    lambda a, b: np.mean((a, b)),
    lambda a, b: np.r_[a, b],
    lambda a, b: np.c_[a, b],
    lambda a, b: np.median([a.data, b]),
    lambda a, b: scipy.special.logsumexp(a),
    lambda a, b: scipy.stats.norm.logpdf(a),
    lambda a, b: scipy.linalg.norm(a),
    lambda a, b: tt.tensor([a, b]),
], ids=["asarray", "array-of-list", "sum-of-list", "mean-of-tuple", "r_", "c_", "median-mixed",
        "scipy-logsumexp", "scipy-stats", "scipy-linalg", "tensor-of-list"])
def test_implicit_conversion_while_recording_raises(convert):
    a, b = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    with pytest.raises(TypeError) as info:
        convert(a, b)
    message = str(info.value)
    assert "requires grad" in message
    assert "t.detach()" in message and "t.numpy()" in message and "tt.stack" in message


def test_recorded_intermediate_also_refuses():
    x = leaf([1.0, 2.0])
    with pytest.raises(TypeError, match="requires grad"):
        np.asarray(tt.exp(x))


def test_explicit_ways_out_and_conversions_that_keep_working():
    a, b = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    np.testing.assert_array_equal(a.numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(np.asarray(a.detach()), [1.0, 2.0])
    np.testing.assert_array_equal(np.array([a.detach(), b.detach()]), [[1, 2], [3, 4]])
    assert a.data is a.numpy()
    s = leaf(2.5)
    assert s.item() == 2.5 and float(s.detach()) == 2.5 and int(leaf(3.0).detach()) == 3
    with tt.no_grad():     # float(s) while recording is refused (issue 19, tests/engine/test_borders.py)
        assert float(s) == 2.5 and int(leaf(3.0)) == 3
    # a Tensor that needs no gradient converts as before
    c = tt.tensor([1.0, 2.0])
    assert np.asarray(c) is c.data
    assert np.asarray(c, dtype=np.float32).dtype == np.float32
    assert scipy.special.logsumexp(c) == pytest.approx(np.log(np.exp(1) + np.exp(2)))
    # anything under no_grad
    with tt.no_grad():
        np.testing.assert_array_equal(np.array([a, b]), [[1, 2], [3, 4]])
        assert scipy.special.logsumexp(a) == pytest.approx(np.log(np.exp(1) + np.exp(2)))


def test_numpy_functions_with_rules_still_record():
    x = leaf([0.5, -1.0])
    y = np.sum(np.exp(x) * np.cos(x))
    assert isinstance(y, tt.Tensor)
    y.backward()
    np.testing.assert_allclose(x.grad, np.exp(x.data) * (np.cos(x.data) - np.sin(x.data)))


def test_stacked_list_has_the_right_gradient():
    a, b = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    w = np.array([[1.0, 2.0], [3.0, 4.0]])
    (tt.stack([a, b]) * w).sum().backward()
    np.testing.assert_array_equal(a.grad, w[0])
    np.testing.assert_array_equal(b.grad, w[1])
    a.grad = b.grad = None
    np.stack([a, b]).sum().backward()          # np.stack on Tensors is recorded as tt.stack
    np.testing.assert_array_equal(a.grad, [1.0, 1.0])
    a.grad = b.grad = None
    (np.concatenate([a, b]) * np.arange(4.0)).sum().backward()
    np.testing.assert_array_equal(b.grad, [2.0, 3.0])


def test_second_order_still_runs_the_rules_on_tensors():
    f = lambda x: tt.sum(tt.sin(x) * tt.exp(x))   # noqa: E731
    x = np.array([0.3, -0.7])
    hv = tt.hvp(f, (x,), (np.ones(2),))
    expected = (2 * np.cos(x) * np.exp(x))        # d2/dx2 of sin(x) e^x, times the tangent 1
    np.testing.assert_allclose(hv, expected, rtol=1e-12)


def test_numpy_call_with_out_is_refused_with_the_reason():
    x = leaf([1.0, 2.0])
    with pytest.raises(TypeError, match="plain call.*out="):
        np.add(x, 1.0, out=np.zeros(2))
    with pytest.raises(TypeError, match="no gradient rule"):
        np.unwrap(x)      # (np.median has a rule now: issue 24)


def test_format_a_one_element_tensor():
    loss = leaf(1.23456) * 2
    assert f"{loss:.3f}" == "2.469" and f"{tt.tensor([[0.5]]):.1%}" == "50.0%"
    assert f"{loss}" == str(loss)
    with pytest.raises(TypeError, match=r"one-element.*\(2,\)"):
        f"{tt.tensor([1.0, 2.0]):.2f}"
