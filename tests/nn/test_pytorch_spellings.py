"""PyTorch's everyday Tensor and Module spellings (issue 31), with PyTorch's meanings: each
against NumPy's formula for it, gradients where PyTorch has them, errors where PyTorch errs."""

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import nn

R = np.random.default_rng(0)
X = R.normal(size=(3, 4))


def _t(a=X):
    return tt.tensor(a.copy(), requires_grad=True)


def test_topk_values_indices_and_gradient():
    x = _t()
    values, indices = x.topk(2, dim=1)
    want = np.argsort(-X, axis=1)[:, :2]
    np.testing.assert_array_equal(indices.data, want)
    np.testing.assert_array_equal(values.data, np.take_along_axis(X, want, 1))
    assert indices.dtype == np.int64 and not indices.requires_grad
    values.sum().backward()
    g = np.zeros_like(X)
    np.put_along_axis(g, want, 1.0, 1)
    np.testing.assert_array_equal(x.grad, g)
    small = x.topk(1, dim=0, largest=False)
    np.testing.assert_array_equal(small.values.data, X.min(0, keepdims=True))
    with pytest.raises(ValueError, match="k=5"):
        x.topk(5)


def test_gather_and_scatter_are_torchs():
    index = np.array([[0, 3], [2, 2], [1, 0]])
    x = _t()
    out = x.gather(1, index)
    np.testing.assert_array_equal(out.data, np.take_along_axis(X, index, 1))
    small = x.gather(0, np.array([[2, 0]]))                 # index smaller than x on axis 1: allowed
    np.testing.assert_array_equal(small.data, [[X[2, 0], X[0, 1]]])
    assert tt.gradcheck(lambda a: a.gather(1, index).sin().sum(), _t())
    base = np.zeros((3, 4))
    src = R.normal(size=(3, 2))
    added = tt.tensor(base).scatter_add(1, index, tt.tensor(src)).data
    want = base.copy()
    for i in range(3):
        for j in range(2):
            want[i, index[i, j]] += src[i, j]
    np.testing.assert_allclose(added, want)
    assert tt.gradcheck(lambda s: tt.tensor(base).scatter_add(1, index, s).sin().sum(), _t(src))
    written = tt.tensor(base).scatter(1, np.array([[1], [3], [0]]), tt.tensor(src)).data
    np.testing.assert_array_equal(written, [[0, src[0, 0], 0, 0], [0, 0, 0, src[1, 0]], [src[2, 0], 0, 0, 0]])
    t = tt.tensor(base.copy())
    assert t.scatter_(1, np.array([[1], [3], [0]]), 5.0) is t
    np.testing.assert_array_equal(t.data.sum(1), [5, 5, 5])
    with pytest.raises(IndexError, match=r"\[0, 4\)"):
        x.gather(1, np.array([[4, 0], [0, 0], [0, 0]]))
    with pytest.raises(TypeError, match="integer"):
        x.gather(1, np.zeros((3, 2)))


def test_in_place_methods():
    t = tt.tensor(X.copy())
    assert t.add_(1).mul_(2) is t
    np.testing.assert_allclose(t.data, (X + 1) * 2)
    t.sub_(tt.tensor(np.ones(4)), alpha=2).div_(2).clamp_(-1, 1)
    np.testing.assert_allclose(t.data, np.clip(((X + 1) * 2 - 2) / 2, -1, 1))
    t.copy_(np.arange(4.0))
    np.testing.assert_array_equal(t.data, np.tile(np.arange(4.0), (3, 1)))
    t.zero_()
    assert not t.data.any()
    t.fill_(3)
    assert (t.data == 3).all()
    leaf = _t()
    with pytest.raises(RuntimeError, match="leaf .* requires grad"):
        leaf.mul_(2)
    with tt.no_grad():
        leaf.mul_(2)                                           # PyTorch's manual update works
    np.testing.assert_array_equal(leaf.data, 2 * X)
    # a recorded Tensor changed in place: the gradient flows through the new value, as PyTorch's
    x = _t()
    y = x * 3
    y.mul_(x).add_(1)
    y.sum().backward()
    np.testing.assert_allclose(x.grad, 6 * X)


def test_expand_type_as_new_unbind_mt():
    x = _t(X[:, :1])
    assert x.expand(3, 5).shape == (3, 5) and x.expand(2, -1, 4).shape == (2, 3, 4)
    assert x.expand_as(tt.tensor(np.zeros((3, 2)))).shape == (3, 2)
    x.expand(3, 5).sum().backward()
    np.testing.assert_array_equal(x.grad, np.full((3, 1), 5.0))
    with pytest.raises(ValueError, match="-1"):
        x.expand(-1, 3, 5)
    f = tt.tensor(X, dtype=np.float32)
    assert tt.tensor(X).type_as(f).dtype == np.float32
    z = f.new_zeros(2, 3)
    assert z.shape == (2, 3) and z.dtype == np.float32 and not z.requires_grad
    assert f.new_ones((2,)).dtype == np.float32 and f.new_full((2,), 7.0).data.tolist() == [7, 7]
    assert f.new_tensor([1, 2]).dtype == np.float32
    parts = tt.tensor(X).unbind(1)
    assert len(parts) == 4 and parts[2].shape == (3,)
    np.testing.assert_array_equal(tt.tensor(R.normal(size=(2, 3, 4))).mT.shape, (2, 4, 3))


def test_boolean_operators():
    a, b = tt.tensor([True, False, True]), tt.tensor([True, True, False])
    np.testing.assert_array_equal((~a).data, [False, True, False])
    np.testing.assert_array_equal((a & b).data, [True, False, False])
    np.testing.assert_array_equal((a | b).data, [True, True, True])
    np.testing.assert_array_equal((a ^ b).data, [False, True, True])
    np.testing.assert_array_equal((a & np.array([False, True, True])).data, [False, False, True])
    with pytest.raises(TypeError, match=r"\(x > 0\)"):
        tt.tensor([1.0]) & tt.tensor([1.0])
    with pytest.raises(TypeError, match="boolean and integer"):
        ~tt.tensor([1.0])


def test_module_spellings():
    m = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    assert m.requires_grad_(False) is m
    assert not any(p.requires_grad for p in m.parameters()) and len(list(m.parameters())) == 4
    m.requires_grad_()
    assert all(p.requires_grad for p in m.parameters())
    assert m.double() is m and {p.dtype for p in m.parameters()} == {np.dtype(np.float64)}
    assert {p.dtype for p in m.float().parameters()} == {np.dtype(np.float32)}
    m.add_module("head", nn.Linear(1, 1))
    m.register_parameter("scale", nn.Parameter(np.ones(1)))
    assert m.get_submodule("head") is m.head and m.get_parameter("scale") is m.scale
    with pytest.raises(AttributeError, match="nothing"):
        m.get_submodule("nothing")
