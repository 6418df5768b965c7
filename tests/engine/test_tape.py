"""The tape and both sweeps: the lecture's worked examples, fan-out, stability, depth, errors."""

import gc
import math
import tracemalloc
import warnings
import weakref

import numpy as np
import pytest

import tinytensor as tt


def leaf(value, name=None, dtype=None):
    return tt.tensor(value, requires_grad=True, name=name, dtype=dtype)


# ----- the lecture's worked examples -------------------------------------------------------------
def test_ntu_example_both_modes():
    """f(x1, x2) = ln x1 + x1 x2 - sin x2 at (2, 5): 11.652, df/dx1 = 5.5 (NTU slides/report)."""
    x1, x2 = leaf(2.0), leaf(5.0)
    f = tt.log(x1) + x1 * x2 - tt.sin(x2)
    assert f.item() == pytest.approx(math.log(2) + 10 - math.sin(5), abs=1e-15)
    assert round(f.item(), 3) == 11.652
    f.backward()
    assert x1.grad == pytest.approx(5.5, abs=1e-15)
    assert x2.grad == pytest.approx(2 - math.cos(5), abs=1e-15)
    assert f.jvp({x1: np.array(1.0)}) == pytest.approx(5.5, abs=1e-15)
    assert f.jvp({x2: np.array(1.0)}) == pytest.approx(2 - math.cos(5), abs=1e-15)


def test_blog_example_both_modes():
    """e = (a + b)(b + 1) at a = 2, b = 1: de/da = 2, de/db = 5."""
    a, b = leaf(2.0), leaf(1.0)
    e = (a + b) * (b + 1)
    e.backward()
    assert (a.grad, b.grad) == (2.0, 5.0)
    assert e.jvp({a: np.array(1.0)}) == 2.0
    assert e.jvp({b: np.array(1.0)}) == 5.0


def test_cohen_examples_both_modes():
    """f = (2 x1 + x2)^2 as add(x1, x1), add(z1, x2), square: 8 x1 + 4 x2 and 4 x1 + 2 x2;
    f = x^3 as multiply(multiply(x, x), x): 3 x^2 (vectorised over several points)."""
    x1, x2 = leaf([0.5, -1.0, 3.0]), leaf([2.0, 0.25, -1.5])
    f = tt.square(tt.add(tt.add(x1, x1), x2))
    f.backward(np.ones(3))
    np.testing.assert_allclose(x1.grad, 8 * x1.data + 4 * x2.data, rtol=1e-15)
    np.testing.assert_allclose(x2.grad, 4 * x1.data + 2 * x2.data, rtol=1e-15)
    np.testing.assert_allclose(f.jvp({x1: np.ones(3)}), 8 * x1.data + 4 * x2.data, rtol=1e-15)
    x = leaf([0.5, -2.0, 3.0])
    cube = tt.mul(tt.mul(x, x), x)
    cube.backward(np.ones(3))
    np.testing.assert_allclose(x.grad, 3 * x.data ** 2, rtol=1e-15)
    np.testing.assert_allclose(cube.jvp({x: np.ones(3)}), 3 * x.data ** 2, rtol=1e-15)


def test_lecture_logistic_regression_wengert_list():
    x = tt.tensor(np.random.default_rng(0).standard_normal((4, 5)), name="x")
    W = leaf(np.random.default_rng(1).standard_normal((5, 3)), name="W")
    y = tt.tensor(np.eye(3)[[0, 2, 1, 0]], name="y")
    loss = tt.crossEntropy(tt.softmax(tt.dot(x, W)), y) + tt.frobeniusNorm(W)
    assert [op for _, op, _ in tt.wengert_list(loss)] == [
        "dot", "softmax", "crossEntropy", "frobeniusNorm", "add"]
    assert tt.wengert_list(loss)[0] == ("z1", "dot", ("x", "W"))
    assert tt.wengert_list(loss)[2] == ("z3", "crossEntropy", ("z2", "y"))
    assert tt.gradcheck(lambda W: tt.crossEntropy(tt.softmax(tt.dot(x, W)), y) + tt.frobeniusNorm(W),
                        W.data, rtol=1e-6, atol=1e-9)


# ----- fan-out: a node used many times sums its cotangents ------------------------------------------
def test_fan_out():
    x = leaf([1.5, -2.0])
    (x * x).backward(np.ones(2))
    np.testing.assert_array_equal(x.grad, 2 * x.data)
    a = leaf(3.0)
    (a + a).backward()
    assert a.grad == 2.0
    h = leaf(0.7)
    parts = [tt.sin(h) * k for k in range(1, 11)]
    total = parts[0]
    for p in parts[1:]:
        total = total + p
    total.backward()
    assert h.grad == pytest.approx(55 * math.cos(0.7), rel=1e-14)
    assert total.jvp({h: np.array(1.0)}) == pytest.approx(55 * math.cos(0.7), rel=1e-14)


def test_repeated_indices_accumulate():
    x = leaf([1.0, 2.0, 3.0])
    x[np.array([0, 2, 0, 0])].backward(np.array([1.0, 10.0, 100.0, 1000.0]))
    np.testing.assert_array_equal(x.grad, [1101.0, 0.0, 10.0])
    x.zero_grad()
    x[1:].sum().backward()
    np.testing.assert_array_equal(x.grad, [0.0, 1.0, 1.0])


# ----- operators, numbers and arrays on either side, broadcasting ------------------------------------
def test_operators_with_numbers_and_arrays():
    x = leaf([1.0, 2.0])
    a = np.array([3.0, 4.0])
    for y in (2 * x, x * 2, a + x, x + a, 1 - x, x / 2, 2 / x, x ** 2, 2 ** x, -x, a @ x, x @ a):
        assert isinstance(y, tt.Tensor) and y.requires_grad
    (a + x * 3).sum().backward()
    np.testing.assert_array_equal(x.grad, [3.0, 3.0])
    assert isinstance(x > 1, np.ndarray) and (x > 1).tolist() == [False, True]


def test_broadcast_gradients_reduce_to_each_shape():
    a = leaf(np.ones((2, 1, 3)))
    b = leaf(np.arange(4.0).reshape(4, 1))
    c = leaf(2.0)
    (a * b + c).backward(np.ones((2, 4, 3)))
    assert a.grad.shape == (2, 1, 3) and b.grad.shape == (4, 1) and c.grad.shape == ()
    np.testing.assert_array_equal(a.grad, np.full((2, 1, 3), 6.0))
    np.testing.assert_array_equal(b.grad, np.full((4, 1), 6.0))
    assert c.grad == 24.0


# ----- stability ----------------------------------------------------------------------------------------
def test_cross_entropy_of_softmax_is_exact_for_huge_logits():
    z = leaf([[1e4, -1e4, 0.0], [0.0, 1e4, 3.0], [5.0, 5.0, -1e4]])
    for labels in (np.array([1, 0, 2]), np.eye(3)[[1, 0, 2]]):
        z.zero_grad()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            loss = tt.cross_entropy(tt.softmax(z), labels)
            loss.backward()
        assert np.isfinite(loss.item())
        assert loss.item() == pytest.approx((2e4 + 1e4 + (1e4 + 5 + math.log(2))) / 3, rel=1e-12)
        p = tt.softmax(z).data
        np.testing.assert_array_equal(z.grad, (p - np.eye(3)[[1, 0, 2]]) / 3)
        z.zero_grad()
        fused = tt.softmax_cross_entropy(z, labels)     # the default reduction is the mean
        fused.backward()
        assert fused.item() == loss.item()
        np.testing.assert_array_equal(z.grad, (p - np.eye(3)[[1, 0, 2]]) / 3)
    # Off the tape too (no input needs a gradient): still computed from the logits.
    assert tt.cross_entropy(tt.softmax(tt.tensor([[1e4, -1e4]])), np.array([1])).item() == 2e4


def test_softmax_family_is_stable():
    x = tt.tensor([1e4, -1e4, 0.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(tt.softmax(x).data, [1.0, 0.0, 0.0])
        np.testing.assert_array_equal(tt.log_softmax(x).data, [0.0, -2e4, -1e4])
        assert tt.logsumexp(x).item() == 1e4


def test_power_with_exponent_zero_has_gradient_zero_at_zero():
    x = leaf([0.0, 2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (x ** 0).backward(np.ones(2))
        np.testing.assert_array_equal(x.grad, [0.0, 0.0])          # as PyTorch: no 0 * inf
        np.testing.assert_array_equal((x ** 0).jvp({x: np.ones(2)}), [0.0, 0.0])
    e = leaf([0.0, 1.0])
    (tt.tensor([0.0, 3.0], requires_grad=True) ** e).sum().backward()
    np.testing.assert_array_equal(e.grad, [0.0, 3.0 * np.log(3.0)])


def test_frobenius_norm_gradient_at_zero_is_zero():
    W = leaf(np.zeros((3, 2)))
    n = tt.frobenius_norm(W)
    n.backward()
    assert n.item() == 0.0
    np.testing.assert_array_equal(W.grad, np.zeros((3, 2)))
    assert not np.any(np.isnan(n.jvp({W: np.ones((3, 2))})))


# ----- depth, freeing, dtypes --------------------------------------------------------------------
@pytest.mark.slow
def test_chain_of_100000_operations_in_both_modes():
    x = leaf([0.5])
    h = x
    for _ in range(100_000):
        h = h * 1.00001
    h.backward(np.ones(1))
    expected = 1.00001 ** 100_000
    assert x.grad[0] == pytest.approx(expected, rel=1e-9)
    assert h.jvp({x: np.ones(1)})[0] == pytest.approx(expected, rel=1e-9)
    probe = weakref.ref(h)
    gc.disable()
    try:
        del h
        assert probe() is None, "a 100,000-deep graph must be freed without the garbage collector"
    finally:
        gc.enable()


def test_jvp_frees_each_tangent_after_its_last_use():
    x = leaf(np.ones(1000))
    h = x
    for _ in range(2000):
        h = h * 1.0001
    tracemalloc.start()
    try:
        d = h.jvp({x: np.ones(1000)})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert d[0] == pytest.approx(1.0001 ** 2000, rel=1e-12)
    # One 8 kB tangent per entry would be 16 MB; freed after use, a few tangents plus bookkeeping.
    assert peak < 2_000_000, f"peak {peak} bytes: tangents are kept after their last use"


def test_graph_is_freed_when_output_dropped():
    x = leaf(np.ones(3))
    gc.disable()
    try:
        y = tt.tanh(x * 2.0) + x
        z = (y * y).sum()
        probes = [weakref.ref(y), weakref.ref(z)]
        z.backward()
        del y, z
        assert all(p() is None for p in probes)
    finally:
        gc.enable()


def test_float32_stays_float32():
    x = leaf(np.ones((2, 3), dtype=np.float32))
    W = leaf(np.ones((3, 4), dtype=np.float32))
    loss = tt.mean(tt.tanh(x @ W) * 2.0 + 1) + tt.frobenius_norm(W) / 3
    assert loss.dtype == np.float32
    loss.backward()
    assert x.grad.dtype == np.float32 and W.grad.dtype == np.float32
    assert loss.jvp({W: np.ones((3, 4), np.float32)}).dtype == np.float32


def test_python_floats_give_float64_and_integers_cannot_require_grad():
    assert tt.tensor(1.5).dtype == np.float64
    assert tt.tensor([1, 2]).dtype.kind == "i"
    with pytest.raises(TypeError, match="int64"):
        tt.tensor([1, 2], requires_grad=True)


# ----- no_grad, detach, zero_grad, accumulation -----------------------------------------------------
def test_no_grad_detach_zero_grad_and_accumulation():
    x = leaf([1.0, 2.0])
    with tt.no_grad():
        y = x * 3
    assert not y.requires_grad
    with pytest.raises(ValueError, match="nothing was recorded"):   # not a silent empty list
        tt.wengert_list(y)
    d = (x * 3).detach()
    assert not d.requires_grad and d._prim is None
    (x * 3).sum().backward()
    (x * 3).sum().backward()
    np.testing.assert_array_equal(x.grad, [6.0, 6.0])
    x.zero_grad()
    assert x.grad is None
    z = x * 2
    (z * z).sum().backward()
    assert z.grad is None, "gradients never land on intermediate results"


def test_jvp_ignores_inputs_not_named():
    a, b = leaf(2.0), leaf(3.0)
    y = a * b + tt.exp(b)
    assert y.jvp({a: np.array(1.0)}) == 3.0
    assert y.jvp({}) == 0.0


# ----- bad input -------------------------------------------------------------------------------------
def test_shape_mismatch_names_op_and_shapes():
    a = tt.tensor(np.ones((2, 3)), requires_grad=True, name="a")
    b = tt.tensor(np.ones(4), name="b")
    for fn, op in ((lambda: a + b, "add"), (lambda: a * b, "mul"), (lambda: tt.matmul(a, b), "matmul"),
                   (lambda: tt.dot(a, b), "dot"), (lambda: tt.concatenate([a, b]), "concatenate")):
        with pytest.raises(ValueError) as info:
            fn()
        message = str(info.value)
        assert op in message and "(2, 3)" in message and "(4,)" in message and "a" in message


def test_backward_needs_grad_for_non_scalar_and_checks_its_shape():
    x = leaf(np.ones(3), name="x")
    y = x * 2
    with pytest.raises(RuntimeError, match=r"shape \(3,\)"):
        y.backward()
    with pytest.raises(ValueError, match=r"\(2,\).*\(3,\)"):
        y.backward(np.ones(2))
    with pytest.raises(ValueError, match=r"x.*\(2,\).*\(3,\)"):
        y.jvp({x: np.ones(2)})


def test_nothing_is_left_half_recorded():
    x = leaf(np.ones(3))
    y = x * 2
    with pytest.raises(ValueError):
        y + np.ones(4)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad, [2.0, 2.0, 2.0])
    assert [op for _, op, _ in tt.wengert_list(y.sum())] == ["mul", "sum"]


def test_cross_entropy_validates_labels():
    p = tt.softmax(leaf(np.zeros((2, 3))))
    with pytest.raises(ValueError, match=r"\(2, 3\)"):
        tt.cross_entropy(p, np.ones((3, 2)))
    with pytest.raises(IndexError, match="class indices"):
        tt.cross_entropy(p, np.array([0, 3]))
    with pytest.raises(ValueError, match="reduction"):
        tt.cross_entropy(p, np.array([0, 1]), reduction="avg")
    with pytest.raises(IndexError) as info:
        tt.softmax_cross_entropy(tt.tensor(np.zeros((2, 3))), np.array([0, 3]))
    assert str(info.value).count("cross_entropy") == 1      # the op is named once


def test_float64_labels_do_not_promote_a_float32_loss():
    z = leaf(np.zeros((2, 3), np.float32))
    onehot = np.eye(3)[[0, 2]]                              # float64
    for loss in (tt.cross_entropy(tt.softmax(z), onehot), tt.softmax_cross_entropy(z, onehot),
                 tt.cross_entropy(tt.softmax(z).detach() + 0, onehot)):
        assert loss.dtype == np.float32
