"""The engine's shape contract: a rule's gradient or tangent must have the input's (output's)
shape, or a shape that broadcasting reduces to it; anything else raises naming the op."""

import numpy as np
import pytest

import tinytensor as tt


def user_op(vjp, jvp, name):
    prim = tt.primitive(lambda x: x * 2.0, name=name)
    prim.defvjp(vjp)
    prim.defjvp(jvp)
    return prim


@pytest.mark.parametrize("wrong, shape", [
    (lambda g: (2 * g).T, "(3, 2)"),             # transposed: same size, used to be reshaped
    (lambda g: (2 * g).ravel(), "(6,)"),         # flattened: likewise
    (lambda g: np.ones((2, 3, 2)), "(2, 3, 2)"),  # extra trailing axis: no broadcasting gives it
], ids=["transposed", "flattened", "extra-axis"])
def test_wrong_gradient_shape_raises(registry, wrong, shape):
    op = user_op(lambda g, ans, x: wrong(g), lambda t, ans, x: 2 * t, "user_bad_vjp_shape")
    x = tt.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True, name="x")
    with pytest.raises(ValueError) as info:
        op(x).backward(np.ones((2, 3)))
    message = str(info.value)
    assert "user_bad_vjp_shape" in message and "input 0 (x (2, 3))" in message
    assert f"gradient of shape {shape}" in message
    assert x.grad is None


def test_gradient_with_broadcast_axes_is_summed(registry):
    op = user_op(lambda g, ans, x: np.ones((4, 2, 3)), lambda t, ans, x: 2 * t, "user_batch_vjp")
    x = tt.tensor(np.ones((2, 3)), requires_grad=True)
    op(x).backward(np.ones((2, 3)))       # (4, 2, 3) reduces to (2, 3): summed, as broadcasting
    np.testing.assert_array_equal(x.grad, np.full((2, 3), 4.0))


def test_gradient_that_does_not_broadcast_back_raises(registry):
    op = user_op(lambda g, ans, x: np.ones((2, 1)), lambda t, ans, x: 2 * t, "user_short_vjp")
    x = tt.tensor(np.ones((2, 3)), requires_grad=True)
    op(x).backward(np.ones((2, 3)))             # (2, 1) broadcasts to (2, 3): allowed, as before
    np.testing.assert_array_equal(x.grad, np.ones((2, 3)))
    op2 = user_op(lambda g, ans, x: np.ones((3, 2)), lambda t, ans, x: 2 * t, "user_bad_vjp2")
    with pytest.raises(ValueError, match=r"user_bad_vjp2.*\(3, 2\).*\(2, 3\)"):
        op2(tt.tensor(np.ones((2, 3)), requires_grad=True)).backward(np.ones((2, 3)))


@pytest.mark.parametrize("wrong", [lambda t: (2 * t).T, lambda t: (2 * t).ravel()],
                         ids=["transposed", "flattened"])
def test_wrong_tangent_shape_raises(registry, wrong):
    op = user_op(lambda g, ans, x: 2 * g, lambda t, ans, x: wrong(t), "user_bad_jvp_shape")
    x = tt.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    y = op(x)
    with pytest.raises(ValueError, match=r"user_bad_jvp_shape.*tangent.*\(2, 3\)"):
        y.jvp({x: np.ones((2, 3))})


def test_scalar_tangent_still_broadcasts(registry):
    op = user_op(lambda g, ans, x: 2 * g, lambda t, ans, x: np.sum(t) * 0 + 2.0, "user_const_jvp")
    x = tt.tensor(np.ones(3), requires_grad=True)
    np.testing.assert_array_equal(op(x).jvp({x: np.ones(3)}), [2.0, 2.0, 2.0])


def test_unbroadcast_sums_broadcast_axes_and_refuses_anything_else():
    g = np.arange(24.0).reshape(4, 2, 3)
    np.testing.assert_array_equal(tt.unbroadcast(g, (2, 3)), g.sum(axis=0))
    np.testing.assert_array_equal(tt.unbroadcast(g, (2, 1)), g.sum(axis=(0, 2))[:, None])
    np.testing.assert_array_equal(tt.unbroadcast(g, ()), g.sum())
    np.testing.assert_array_equal(tt.unbroadcast(np.ones(3), (2, 3)), np.ones((2, 3)))
    for shape in [(3, 2), (24,), (4, 3, 2), (5, 2, 3)]:
        with pytest.raises(ValueError, match=r"gradient of shape \(4, 2, 3\)"):
            tt.unbroadcast(g, shape)
