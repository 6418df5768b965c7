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
