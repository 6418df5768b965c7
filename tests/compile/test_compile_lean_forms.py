"""The generated program's lean forms (frobeniusNorm as a NumPy scalar, the folded seed scale of
crossEntropy's VJP): compiled equals eager bit for bit, results of eager's types."""

import numpy as np
import pytest

import tinytensor as tt


def _same(a, b):
    a, b = tt.transforms.tree_flatten(a)[0], tt.transforms.tree_flatten(b)[0]
    assert len(a) == len(b)
    for u, v in zip(a, b):
        assert type(u) is type(v)          # what f returns eagerly, type included
        u, v = (np.asarray(w.data if isinstance(w, tt.Tensor) else w) for w in (u, v))
        assert u.dtype == v.dtype and u.shape == v.shape
        np.testing.assert_array_equal(u, v)
        assert np.array_equal(np.signbit(u), np.signbit(v))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("zero", [False, True])
def test_frobenius_norm_scalar_form(dtype, zero):
    rng = np.random.default_rng(0)
    W = rng.standard_normal((4, 3)).astype(dtype) * (0 if zero else 1)

    def f(W):
        n = tt.frobeniusNorm(W)
        return n * 2.0 - n / 3.0 + n

    for fun in (f, tt.value_and_grad(f), tt.frobeniusNorm, tt.value_and_grad(tt.frobeniusNorm)):
        step = tt.compile(fun)
        _same(step(W), fun(W))
        _same(step(W + 1), fun(W + 1))
        assert ".ravel()))" in step.source and "frobeniusNorm(" not in step.source


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_cross_entropy_seed_scale(batch, reduction):
    rng = np.random.default_rng(1)
    W, x = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((batch, 4)).astype(np.float32)
    y = rng.integers(0, 3, batch)

    def loss(W, x, y):
        return tt.crossEntropy(tt.softmax(tt.dot(x, W)), y, reduction=reduction) + tt.frobeniusNorm(W)

    step = tt.compile(tt.value_and_grad(loss))
    for _ in range(2):
        _same(step(W, x, y), tt.value_and_grad(loss)(tt.tensor(W), tt.tensor(x), y))
    with pytest.raises(Exception, match="crossEntropy"):
        step(W, x, np.full(batch, 3))


@pytest.mark.parametrize("axis,keepdims", [(None, False), (0, False), (1, True), ((0, 1), False)])
@pytest.mark.parametrize("reduce", ["mean", "sum"])
def test_mean_and_sum_of_the_seed(axis, keepdims, reduce):
    rng = np.random.default_rng(2)
    W, x = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32)

    def loss(W, x):
        r = tt.tanh(tt.matmul(x, W))
        out = getattr(tt, reduce)(r * r, axis=axis, keepdims=keepdims)
        return tt.sum(out) if axis not in (None, (0, 1)) else out

    fun = tt.value_and_grad(loss)
    step = tt.compile(fun)
    for k in range(2):
        _same(step(W + k, x), fun(W + k, x))
    assert "np.matmul(x, W)" in step.source
    step2 = tt.compile(loss)
    _same(step2(W, x), loss(W, x))


def test_relu_rule_written_out_selects_an_infinite_cotangent():
    x = np.array([[0.0, -1.0, 4.0], [2.0, 0.0, -3.0]], dtype=np.float32)

    def loss(x):
        return tt.sum(tt.sqrt(tt.relu(x)))      # sqrt'(0) = inf meets relu'(0) = 0: an exact 0

    fun = tt.value_and_grad(loss)
    step = tt.compile(fun)
    for v in (x, x + 1):
        _same(step(v), fun(tt.tensor(v)))
    assert "np.where(" in step.source
    assert np.isfinite(step(x)[1]).all()
