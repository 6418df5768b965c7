"""Integration gaps between the merged branches (the fuzzer's compiled replay, random functions
under tt.compile, CrossEntropyLoss's ignored labels): each compiled result equals eager."""

import numpy as np

import tinytensor as tt


def test_comparison_inside_grad_is_recomputed_per_call():
    # found by tests/fuzz.py once `where` joined the compiled replay: inside tt.grad the
    # arguments are fresh Tensors (not the recorder's own), and their comparison was frozen
    def loss(a, b):
        return tt.sum(tt.where(a > 0, a, b) * np.array([1.0, 2.0, 3.0]))

    g = tt.compile(tt.grad(loss, argnums=(0, 1)))
    b = np.array([3.0, 4.0, 5.0])
    g(np.array([1.0, -1.0, 2.0]), b)                    # records
    x = np.array([-1.0, 1.0, -2.0])
    for got, want in zip(g(x, b), tt.grad(loss, argnums=(0, 1))(x, b)):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(g(x, b)[0], [0.0, 2.0, 0.0])


def test_comparison_inside_jvp_and_value():
    def f(a):
        return tt.where(a >= 0.5, a * a, -a)

    value, tangent = tt.compile(f), tt.compile(lambda a: tt.jvp(f, (a,), (np.ones(3),))[1])
    value(np.array([1.0, 1.0, 1.0]))
    tangent(np.array([1.0, 1.0, 1.0]))
    x = np.array([0.0, 1.0, 0.25])
    np.testing.assert_array_equal(value(x), [-0.0, 1.0, -0.25])
    np.testing.assert_array_equal(tangent(x), tt.jvp(f, (x,), (np.ones(3),))[1])


def test_comparison_of_a_0d_tensor_is_recomputed_per_call():
    # a 0-d comparison gives np.bool_, which the recorder could not know by identity
    f = tt.compile(lambda c, x: tt.where(c > 0, x, -x))
    f(np.array(1.0), np.array([1.0, 2.0]))
    np.testing.assert_array_equal(f(np.array(-1.0), np.array([1.0, 2.0])), [-1.0, -2.0])
    g = tt.compile(tt.grad(lambda c, x: tt.sum(tt.where(c > 0, x, -x)), argnums=1))
    g(np.array(1.0), np.array([1.0, 2.0]))
    np.testing.assert_array_equal(g(np.array(-1.0), np.array([1.0, 2.0])), [-1.0, -1.0])


def _xent_step():
    loss = tt.nn.CrossEntropyLoss()
    return tt.value_and_grad(lambda x, y: loss(x, y))


def test_cross_entropy_recorded_without_ignored_labels_records_the_general_path_when_some_appear():
    # the fused path is chosen at trace time on (t == ignore_index).any(): a guard now, so a
    # later call with ignored labels records the general path (it raised a ValueError before)
    x = np.random.default_rng(0).standard_normal((4, 5))
    step = tt.compile(_xent_step())
    step(x, np.array([0, 1, 2, 3]))
    for y in (np.array([4, 0, 1, 1]), np.array([0, -100, 2, 3]), np.array([1, 1, 1, 1])):
        value, grad = step(x, y)
        want_value, want_grad = _xent_step()(x, y)
        np.testing.assert_allclose(value, want_value, rtol=1e-14)
        np.testing.assert_allclose(grad, want_grad, rtol=1e-13, atol=1e-16)
    assert step.traces == 2


def test_cross_entropy_recorded_with_ignored_labels_handles_both():
    x = np.random.default_rng(1).standard_normal((4, 5))
    step = tt.compile(_xent_step())
    step(x, np.array([0, -100, 2, 3]))
    for y in (np.array([1, 2, -100, -100]), np.array([0, 1, 2, 3])):
        value, grad = step(x, y)
        want_value, want_grad = _xent_step()(x, y)
        np.testing.assert_allclose(value, want_value, rtol=1e-14)
        np.testing.assert_allclose(grad, want_grad, rtol=1e-13, atol=1e-16)
