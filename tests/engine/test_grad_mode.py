"""Grad modes (no_grad as decorator, enable_grad, set_grad_enabled), leaves, retain_grad,
requires_grad_."""

import numpy as np
import pytest

import tinytensor as tt


def leaf(value):
    return tt.tensor(value, requires_grad=True)


def test_no_grad_as_decorator_and_context():
    x = leaf([1.0, 2.0])

    @tt.no_grad()
    def evaluate(x):
        return x * 2

    @tt.no_grad
    def evaluate_bare(x):
        return x * 3

    assert not evaluate(x).requires_grad and not evaluate_bare(x).requires_grad
    assert evaluate.__name__ == "evaluate"
    assert (x * 2).requires_grad            # restored after the call
    with tt.no_grad():
        assert not (x * 2).requires_grad
    assert (x * 2).requires_grad


def test_enable_grad_inside_no_grad():
    x = leaf(1.0)
    with tt.no_grad():
        with tt.enable_grad():
            assert (x * 2).requires_grad
        assert not (x * 2).requires_grad

    @tt.enable_grad()
    def f(x):
        return x * 2

    @tt.enable_grad
    def g(x):
        return x * 2
    with tt.no_grad():
        assert f(x).requires_grad and g(x).requires_grad


def test_set_grad_enabled_as_function_and_context():
    x = leaf(1.0)
    with tt.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert (x * 2).requires_grad
    try:
        tt.set_grad_enabled(False)          # as a function, as in PyTorch
        assert not (x * 2).requires_grad
    finally:
        tt.set_grad_enabled(True)
    assert (x * 2).requires_grad
    assert tt.is_grad_enabled()


def test_grad_mode_restored_after_an_exception():
    with pytest.raises(ZeroDivisionError):
        with tt.no_grad():
            raise ZeroDivisionError
    assert (leaf(1.0) * 2).requires_grad


def test_is_leaf():
    x, c = leaf(1.0), tt.tensor(1.0)
    assert x.is_leaf and c.is_leaf
    assert not (x * 2).is_leaf
    assert (c * 2).is_leaf                   # needs no gradient: a leaf, as in PyTorch
    assert x.detach().is_leaf
    assert tt.softmax(c.reshape(1)).is_leaf


def test_retain_grad_keeps_an_intermediate_gradient():
    x = leaf([1.0, 2.0])
    h = x * 3
    assert h.retain_grad() is None
    y = (h ** 2).sum()
    y.backward()
    np.testing.assert_array_equal(h.grad, 2 * h.data)
    np.testing.assert_array_equal(x.grad, 6 * h.data)
    y2 = (h ** 2).sum()
    y2.backward()                            # accumulates, as for leaves
    np.testing.assert_array_equal(h.grad, 4 * h.data)
    other = x * 3                            # not retained: no .grad
    other.sum().backward()
    assert other.grad is None
    x.retain_grad()                          # a leaf: nothing changes
    assert x.grad is not None


def test_requires_grad_():
    t = tt.tensor([1.0, 2.0])
    assert t.requires_grad_() is t and t.requires_grad
    (t * 2).sum().backward()
    np.testing.assert_array_equal(t.grad, [2.0, 2.0])
    assert t.requires_grad_(False) is t and not t.requires_grad
    with pytest.raises(TypeError, match="floating-point"):
        tt.tensor([1, 2]).requires_grad_()
    tt.tensor([1, 2]).requires_grad_(False)  # fine
    h = leaf(1.0) * 2
    with pytest.raises(RuntimeError, match="leaf.*detach"):
        h.requires_grad_(False)
    assert h.requires_grad_() is h


def test_requires_grad_on_a_softmax_output_makes_it_a_plain_leaf():
    z = tt.tensor([[1.0, 2.0, 0.5]])
    p = tt.softmax(z).requires_grad_()
    tt.cross_entropy(p, [[0.0, 1.0, 0.0]]).backward()
    np.testing.assert_allclose(p.grad, [[0.0, -1.0 / p.data[0, 1], 0.0]])


def test_set_grad_enabled_as_decorator_sets_the_mode_per_call():
    x = leaf(1.0)

    @tt.set_grad_enabled(False)
    def f(x):
        return x * 2
    assert tt.is_grad_enabled()              # applying the decorator changed nothing
    assert not f(x).requires_grad
    assert tt.is_grad_enabled()


def test_nested_decorated_calls_restore_the_mode():
    @tt.no_grad()
    def inner(x):
        return x * 2

    @tt.no_grad()
    def outer(x):
        inner(x)
        return tt.is_grad_enabled()
    assert outer(leaf(1.0)) is False
    assert tt.is_grad_enabled()


def test_retain_grad_on_the_output_and_with_a_given_cotangent():
    x = leaf([1.0, 2.0])
    y = (x * 2).sum()
    y.retain_grad()
    y.backward()
    assert y.grad == 1.0 and y.grad.flags.writeable
    h = x * 2
    h.retain_grad()
    g = np.array([3.0, 4.0])
    h.backward(g)
    np.testing.assert_array_equal(h.grad, g)
    assert h.grad is not g                     # never the caller's own array
    with pytest.raises(RuntimeError, match="does not require grad"):
        tt.tensor(1.0).retain_grad()


def test_implicit_conversion_follows_the_grad_mode():
    x = leaf([1.0, 2.0])
    with tt.no_grad():
        np.asarray(x)
        with tt.enable_grad():
            with pytest.raises(TypeError, match="requires grad"):
                np.asarray(x)
