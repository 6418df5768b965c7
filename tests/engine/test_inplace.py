"""In-place operators (PyTorch's semantics) and the version check of saved values."""

import numpy as np
import pytest

import tinytensor as tt


def leaf(value, dtype=None):
    return tt.tensor(value, requires_grad=True, dtype=dtype)


OPS = {"+=": np.add, "-=": np.subtract, "*=": np.multiply, "/=": np.divide}


def apply(op, t, v):
    if op == "+=":
        t += v
    elif op == "-=":
        t -= v
    elif op == "*=":
        t *= v
    else:
        t /= v
    return t


# ----- in place on the data: nothing needs a gradient, or under no_grad --------------------------
@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("grad_mode", ["plain", "no_grad"])
def test_in_place_matches_numpy_and_keeps_identity(op, grad_mode):
    rng = np.random.default_rng(0)
    start, v = rng.uniform(1, 2, (2, 3)), rng.uniform(1, 2, (3,))
    t = leaf(start) if grad_mode == "no_grad" else tt.tensor(start)
    array = t.data
    before = t
    if grad_mode == "no_grad":
        with tt.no_grad():
            t = apply(op, t, tt.tensor(v))
    else:
        t = apply(op, t, v)
    assert t is before and t.data is array
    np.testing.assert_array_equal(t.data, OPS[op](start, v))


def test_manual_sgd_update_under_no_grad_learns():
    """PyTorch's `p -= lr * p.grad` under no_grad: the weights move (they used to stay put)."""
    rng = np.random.default_rng(1)
    X, w_true = rng.standard_normal((32, 3)), np.array([1.0, -2.0, 0.5])
    y = X @ w_true
    w = tt.zeros(3, requires_grad=True)
    for _ in range(200):
        loss = tt.mean((tt.tensor(X) @ w - y) ** 2)
        w.zero_grad()
        loss.backward()
        with tt.no_grad():
            w -= 0.1 * w.grad
    np.testing.assert_allclose(w.data, w_true, atol=1e-6)


def test_float32_stays_float32_and_numpy_casting_applies():
    t = tt.ones(3, dtype=np.float32)
    t += np.ones(3)                      # float64 operand: NumPy's same_kind cast, as PyTorch
    assert t.dtype == np.float32
    ints = tt.tensor([1, 2, 3])
    with pytest.raises(TypeError, match="int64"):
        ints += 0.5
    with pytest.raises(ValueError, match=r"\(3,\).*\(2, 3\)"):
        t += np.ones((2, 3))


# ----- leaves that require grad, while recording: refused ------------------------------------------
@pytest.mark.parametrize("op", list(OPS))
def test_in_place_on_a_leaf_that_requires_grad_raises(op):
    w = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match="leaf.*requires grad.*no_grad"):
        apply(op, w, 1.0)
    with pytest.raises(RuntimeError, match="leaf.*requires grad.*no_grad"):
        w[0] = 3.0
    np.testing.assert_array_equal(w.data, [1.0, 2.0])


# ----- recorded intermediates: the operation is recorded and the name rebound ----------------------
def test_micrograd_style_accumulation_keeps_exact_gradients():
    a = leaf(-4.0)
    c = a * 2
    c += c + 1                       # micrograd's test_sanity_check: c = 2 (2a) + 1
    c *= 3
    c -= a
    c /= 2
    c.backward()
    assert c.item() == pytest.approx(((4 * -4.0 + 1) * 3 + 4) / 2)
    assert a.grad == pytest.approx((4 * 3 - 1) / 2)


def test_constant_accumulator_plus_a_tensor_that_needs_grad():
    x = leaf([1.0, 2.0])
    acc = tt.zeros(2)
    for k in range(3):
        acc += x * k
    acc.sum().backward()
    np.testing.assert_array_equal(x.grad, [3.0, 3.0])


def test_recorded_in_place_keeps_dtype_and_shape():
    h = leaf(np.ones(3), dtype=np.float32) * 2
    h += leaf(np.ones(3))            # float64 operand: the result is cast back, as in place
    assert h.dtype == np.float32
    with pytest.raises(ValueError, match="shape"):
        h += leaf(np.ones((2, 3)))


# ----- t[idx] = v ----------------------------------------------------------------------------------------
def test_setitem_into_a_constant_records_exact_gradients():
    x = leaf([1.0, 2.0])
    out = tt.zeros(3)
    out[0] = x[0] * 2
    out[1:] = x ** 2
    assert out.requires_grad and not out.is_leaf
    (out * np.array([1.0, 10.0, 100.0])).sum().backward()
    np.testing.assert_array_equal(out.data, [2.0, 1.0, 4.0])
    np.testing.assert_array_equal(x.grad, [2.0 + 20.0, 400.0])
    tangent = out.jvp({x: np.array([1.0, 0.0])})
    np.testing.assert_array_equal(tangent, [2.0, 2.0, 0.0])


def test_setitem_overwrites_what_it_replaces():
    x = leaf([1.0, 2.0, 3.0])
    h = x * 1.0
    h[1] = 0.0                        # the gradient of x[1] goes nowhere now
    h[[0, 2]] = h[[2, 0]]             # a swap that reads h before writing it
    h.backward(np.array([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(h.data, [3.0, 0.0, 1.0])
    np.testing.assert_array_equal(x.grad, [3.0, 0.0, 1.0])


def test_setitem_in_place_without_gradients():
    t = tt.zeros(2, 3)
    array = t.data
    t[0] = [1, 2, 3]
    t[:, 1] = tt.tensor(5.0)
    assert t.data is array
    np.testing.assert_array_equal(t.data, [[1, 5, 3], [0, 5, 0]])
    w = leaf(np.zeros(2))
    with tt.no_grad():
        w[1] = 7.0
    np.testing.assert_array_equal(w.data, [0.0, 7.0])


def test_setitem_after_a_use_raises_at_backward():
    x = leaf([1.0, 2.0])
    h = x * 2
    y = tt.sin(h)                     # saved h's value
    h[0] = x[1]
    with pytest.raises(RuntimeError, match="sin.*modified"):
        y.sum().backward()


# ----- saved values are versioned ----------------------------------------------------------------------
def test_optimizer_step_between_forward_and_backward_raises():
    x = tt.tensor(np.ones((4, 3)))
    W = leaf(np.full((3, 2), 0.5))
    loss = tt.sum(tt.tanh(x @ W))
    W.grad = np.ones((3, 2))
    with tt.no_grad():
        W -= 0.1 * W.grad             # as SGD.step() would, before loss.backward()
    with pytest.raises(RuntimeError) as info:
        loss.backward()
    message = str(info.value)
    assert "matmul" in message and "(3, 2)" in message and "modified in place" in message
    assert "after backward" in message and "clone" in message
    with pytest.raises(RuntimeError, match="modified in place"):
        loss.jvp({W: np.ones((3, 2))})


def test_in_place_on_a_recorded_output_raises():
    x = leaf([0.5, 1.0])
    y = tt.exp(x)                      # exp's rule reads its output
    with tt.no_grad():
        y *= 2
    with pytest.raises(RuntimeError, match="exp.*modified in place"):
        y.sum().backward()


def test_constant_input_changed_in_place_raises():
    x = leaf([1.0, 2.0])
    c = tt.tensor([3.0, 4.0])
    y = x * c
    c += 1
    with pytest.raises(RuntimeError, match="mul.*modified in place"):
        y.sum().backward()


def test_version_check_never_fires_in_a_training_loop():
    rng = np.random.default_rng(0)
    model = tt.nn.Sequential(tt.nn.Linear(3, 4), tt.nn.Tanh(), tt.nn.Linear(4, 1))
    opt = tt.optim.SGD(model.parameters(), lr=0.1)
    X, y = rng.standard_normal((16, 3)), rng.standard_normal((16, 1))
    for _ in range(5):
        loss = tt.mean((model(tt.tensor(X)) - y) ** 2)
        opt.zero_grad()
        loss.backward()
        opt.step()
        with tt.no_grad():
            for p in model.parameters():
                p *= 0.999                   # weight decay by hand, after backward


def test_detached_view_shares_the_version_both_ways():
    x = leaf([1.0, 2.0])
    w = leaf([3.0, 4.0])
    y = tt.sum(x * w)
    view = w.detach()
    view -= 1                           # writes w's memory: w's saved value is stale
    with pytest.raises(RuntimeError, match="modified in place"):
        y.backward()
    c = tt.tensor([1.0, 1.0])
    y = tt.sum(x * c.detach())
    c += 1                              # writes the memory the detached constant shares
    with pytest.raises(RuntimeError, match="modified in place"):
        y.backward()


def test_power_in_place_and_pow_recorded():
    t = tt.tensor([2.0, 3.0])
    array = t.data
    t **= 2
    assert t.data is array
    np.testing.assert_array_equal(t.data, [4.0, 9.0])
    x = leaf([2.0, 3.0])
    h = x * 1
    h **= 3
    h.sum().backward()
    np.testing.assert_array_equal(x.grad, 3 * np.array([4.0, 9.0]))


def test_in_place_refusals_name_the_problem():
    t = tt.broadcast_to(tt.tensor([1.0, 2.0]), (3, 2))   # a read-only view
    with pytest.raises(ValueError, match="read-only"):
        t += 1
    out = tt.zeros(3, dtype=np.int64)
    with pytest.raises(TypeError, match="int64.*floating-point"):
        out[0] = leaf(1.0)
    h = leaf([1.0, 2.0, 3.0]) * 1
    with pytest.raises(IndexError, match="repeats"):
        h[[0, 0]] = leaf([1.0, 2.0])


def test_setitem_of_a_list_of_tensors_is_refused_not_dropped():
    x = leaf([1.0, 2.0])
    out = tt.zeros(2)
    with pytest.raises(TypeError, match="tt.stack"):
        out[:] = [x[0], x[1]]
    out[:] = tt.stack([x[1], x[0]])
    out.sum().backward()
    np.testing.assert_array_equal(x.grad, [1.0, 1.0])


def test_setitem_on_zero_d_and_negative_indices():
    x = leaf(2.0)
    s = tt.zeros(())
    s[()] = x * 3
    s.backward()
    assert x.grad == 3.0
    y = leaf([1.0, 2.0, 3.0])
    h = y * 1
    h[-1] = y[0] * 10
    h.backward(np.ones(3))
    np.testing.assert_array_equal(y.grad, [11.0, 1.0, 0.0])


def test_setitem_keeps_float32():
    x = leaf(np.ones(2), dtype=np.float32)
    out = tt.zeros(3, dtype=np.float32)
    out[:2] = x * tt.tensor(2.0)        # a float64 value written into float32, as NumPy
    assert out.dtype == np.float32
    out.sum().backward()
    assert x.grad.dtype == np.float32
    np.testing.assert_array_equal(x.grad, [2.0, 2.0])


def test_a_detached_value_does_not_keep_its_graph_alive():
    import gc
    import weakref
    x = leaf(np.ones(3))
    loss = tt.sum(tt.exp(x) * 2)
    kept = loss.detach()
    ref = weakref.ref(loss)
    del loss
    gc.collect()
    assert ref() is None and kept.item() == pytest.approx(3 * 2 * np.e)
    kept += 1                                # the source is gone: nothing to mark, no error
    assert kept.item() == pytest.approx(3 * 2 * np.e + 1)


def test_writes_through_views_are_caught():
    x = leaf([1.0, 2.0, 3.0])
    c = tt.tensor([1.0, 2.0, 3.0])
    y = tt.sum(x * c)
    part = c[0:2]                           # a view of c's memory
    part += 1                               # in place through the view: c's saved value changed
    np.testing.assert_array_equal(c.data, [2.0, 3.0, 3.0])
    with pytest.raises(RuntimeError, match="mul.*modified in place"):
        y.backward()
    c2 = tt.tensor([1.0, 2.0, 3.0])
    y2 = tt.sum(x * c2[::-1])               # the entry saved a view of c2
    c2 *= 2                                 # writing the owner changes the saved view
    with pytest.raises(RuntimeError, match="modified in place"):
        y2.backward()
    c3 = tt.tensor([1.0, 2.0, 3.0])
    y3 = tt.sum(x * c3)
    c3[1:] += 1                             # t[idx] += v: read, add, write back
    with pytest.raises(RuntimeError, match="modified in place"):
        y3.backward()


def test_setitem_add_on_a_recorded_tensor_is_exact():
    x = leaf([1.0, 2.0, 3.0])
    h = x * 1
    h[0] += x[1] * 5                        # h = [x0 + 5 x1, x1, x2]
    h.backward(np.array([1.0, 10.0, 100.0]))
    np.testing.assert_array_equal(x.grad, [1.0, 15.0, 100.0])


def test_a_failed_setitem_changes_nothing():
    x = leaf([1.0, 2.0])
    h = x * 2
    y = h * 3
    with pytest.raises(ValueError):
        h[0:2] = x.reshape(2, 1) * tt.ones(2, 3)        # (2, 3) does not fit in (2,)
    np.testing.assert_array_equal(h.data, [2.0, 4.0])
    y.sum().backward()                                   # h was not changed: no error
    np.testing.assert_array_equal(x.grad, [6.0, 6.0])


def test_manual_update_under_no_grad_equals_the_sgd_optimizer():
    rng = np.random.default_rng(3)
    X, y = rng.standard_normal((16, 3)), rng.integers(0, 2, 16)

    def train(manual):
        model = tt.nn.Sequential(tt.nn.Linear(3, 5, rng=0, dtype=np.float64), tt.nn.Tanh(),
                                 tt.nn.Linear(5, 2, rng=1, dtype=np.float64))
        opt = tt.optim.SGD(model.parameters(), lr=0.5)
        for _ in range(10):
            loss = tt.softmax_cross_entropy(model(tt.tensor(X)), y)
            opt.zero_grad()
            loss.backward()
            if manual:
                with tt.no_grad():
                    for p in model.parameters():
                        p -= 0.5 * p.grad
            else:
                opt.step()
        return [p.data for p in model.parameters()], loss.item()

    manual, reference = train(True), train(False)
    for a, b in zip(manual[0], reference[0]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    assert manual[1] == pytest.approx(reference[1], rel=1e-12)


def test_numpy_out_and_at_write_into_tensors_and_count_as_writes():
    a, b = tt.tensor([1.0, 2.0]), tt.tensor([0.0, 0.0])
    array = b.data
    assert np.add(a, 1.0, out=b) is b and b.data is array
    np.testing.assert_array_equal(b.data, [2.0, 3.0])
    x = leaf([1.0, 2.0])
    y = tt.sum(x * b)
    np.add.at(b, [0, 0], 1.0)
    np.testing.assert_array_equal(b.data, [4.0, 3.0])
    with pytest.raises(RuntimeError, match="modified in place"):
        y.backward()
    with pytest.raises(TypeError, match="out="):
        np.multiply(a, 2.0, out=x)            # x requires grad: refused, not written


def test_clone_before_changing_keeps_the_gradient():
    x = leaf([1.0, 2.0])
    y = tt.exp(x)
    z = y.clone()
    z[0] = 0.0                               # the clone changes, y's saved output does not
    (y.sum() + z.sum()).backward()
    np.testing.assert_allclose(x.grad, np.exp([1.0, 2.0]) * [1.0, 2.0])


def test_setitem_through_the_transforms_and_second_order():
    def f(x):
        h = tt.zeros(3)
        h[0] = x[0] * x[1]
        h[1:] = tt.sin(x)
        return h
    x = np.array([0.3, 0.7])
    assert tt.gradcheck(f, x)
    expected = [[x[1], x[0]], [np.cos(x[0]), 0.0], [0.0, np.cos(x[1])]]
    np.testing.assert_allclose(tt.jacobian(f)(x), expected, rtol=1e-14)
    np.testing.assert_allclose(tt.jacobian(f, mode="fwd")(x), expected, rtol=1e-14)
    # sum(f(x)**2) = x0^2 x1^2 + sin(x0)^2 + sin(x1)^2; its Hessian times e0:
    hv = tt.hvp(lambda x: tt.sum(f(x) ** 2), (x,), (np.array([1.0, 0.0]),))
    np.testing.assert_allclose(hv, [2 * x[1] ** 2 + 2 * np.cos(2 * x[0]), 4 * x[0] * x[1]], rtol=1e-12)
