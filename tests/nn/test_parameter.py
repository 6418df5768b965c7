"""nn.Parameter: a leaf Tensor that requires grad, found by a Module when assigned to it."""

import copy

import numpy as np
import pytest

import tinytensor as tt


class Scale(tt.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = tt.nn.Parameter(np.array([1.0, 2.0, 3.0]))
        self.frozen = tt.nn.Parameter(np.zeros(2), requires_grad=False)
        self.extra = [tt.nn.Parameter(np.ones(1))]

    def forward(self, x):
        return (self.w * x).sum() + self.extra[0].sum()


def test_parameter_is_a_leaf_tensor_that_requires_grad():
    p = tt.nn.Parameter(np.ones((2, 3), np.float32))
    assert isinstance(p, tt.Tensor) and isinstance(p, tt.nn.Parameter)
    assert p.requires_grad and p.is_leaf and p.dtype == np.float32 and p.shape == (2, 3)
    y = p * 2
    assert type(y) is tt.Tensor and not y.is_leaf
    assert repr(p).startswith("Parameter containing:")


def test_parameter_shares_the_array_as_pytorch_and_copies_lists():
    a = np.zeros(3)
    assert tt.nn.Parameter(a).data is a
    t = tt.tensor([1.0, 2.0])
    assert tt.nn.Parameter(t).data is t.data
    assert tt.nn.Parameter([1.0, 2.0]).data.dtype == np.float64


def test_integer_parameter_needs_requires_grad_false():
    with pytest.raises(TypeError, match="nn.Parameter: only floating-point"):
        tt.nn.Parameter(np.arange(3))
    p = tt.nn.Parameter(np.arange(3), requires_grad=False)
    assert not p.requires_grad


def test_module_registers_parameters_frozen_ones_and_containers_too():
    m = Scale()
    assert list(dict(m.named_parameters())) == ["w", "frozen", "extra.0"]
    assert list(m.state_dict()) == ["w", "frozen", "extra.0"]
    loss = m(np.array([1.0, 1.0, 2.0]))
    loss.backward()
    np.testing.assert_array_equal(m.w.grad, [1.0, 1.0, 2.0])
    assert m.frozen.grad is None
    opt = tt.optim.SGD(m.parameters(), lr=0.5)
    opt.step()
    np.testing.assert_allclose(m.w.data, [0.5, 1.5, 2.0])
    np.testing.assert_array_equal(m.frozen.data, [0.0, 0.0])


def test_parameter_round_trips_state_dict_and_deepcopy():
    m, n = Scale(), Scale()
    m.w.data[:] = [7.0, 8.0, 9.0]
    n.load_state_dict(m.state_dict())
    np.testing.assert_array_equal(n.w.data, [7.0, 8.0, 9.0])
    assert isinstance(n.w, tt.nn.Parameter)
    q = copy.deepcopy(m.w)
    assert isinstance(q, tt.nn.Parameter) and q.requires_grad and q.data is not m.w.data


def test_functional_call_and_grad_through_parameters():
    m = Scale()
    grads = tt.grad(lambda p: tt.nn.functional_call(m, p, np.array([2.0, 0.0, 1.0])))(
        {"w": m.w.data.copy()})
    np.testing.assert_array_equal(grads["w"], [2.0, 0.0, 1.0])


# ----- nn.utils.parameters_to_vector / vector_to_parameters, tt.inference_mode ------------------
def test_parameters_to_vector_round_trip_and_gradient():
    m = tt.nn.Sequential(tt.nn.Linear(3, 2, rng=0, dtype=np.float64), tt.nn.Linear(2, 1, rng=1,
                                                                                     dtype=np.float64))
    params = list(m.parameters())
    vec = tt.nn.utils.parameters_to_vector(params)
    assert vec.shape == (sum(p.size for p in params),)
    np.testing.assert_array_equal(vec.data, np.concatenate([p.data.ravel() for p in params]))
    (vec * np.arange(vec.size)).sum().backward()        # recorded: the gradient reaches each one
    np.testing.assert_array_equal(np.concatenate([p.grad.ravel() for p in params]), np.arange(vec.size))
    arrays = [p.data for p in params]
    tt.nn.utils.vector_to_parameters(np.arange(vec.size, dtype=np.float64), params)
    assert all(p.data is a for p, a in zip(params, arrays))          # in place
    np.testing.assert_array_equal(tt.nn.utils.parameters_to_vector(params).data, np.arange(vec.size))
    with pytest.raises(ValueError, match="has 3 entries but the parameters hold 11"):
        tt.nn.utils.vector_to_parameters(np.zeros(3), params)
    with pytest.raises(TypeError, match="1-d vector"):
        tt.nn.utils.vector_to_parameters(np.zeros((11, 1)), params)


def test_inference_mode_is_no_grad_as_context_and_decorator():
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    with tt.inference_mode():
        assert not (x * 2).requires_grad and not tt.is_grad_enabled()
    assert tt.is_grad_enabled()

    @tt.inference_mode
    def bare(x):
        return x * 2

    @tt.inference_mode()
    def called(x):
        return x * 2

    assert not bare(x).requires_grad and not called(x).requires_grad and tt.is_grad_enabled()
    with tt.inference_mode(False):                    # as PyTorch's: leaves the mode alone
        assert (x * 2).requires_grad
    with tt.no_grad(), tt.inference_mode(False):
        assert not tt.is_grad_enabled()
