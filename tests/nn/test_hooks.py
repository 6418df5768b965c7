"""Hooks as PyTorch's: Module.register_forward_hook / register_forward_pre_hook and
Tensor.register_hook, each returning a handle with remove()."""

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import nn


def _mlp():
    return nn.Sequential(nn.Linear(3, 4, rng=0, dtype=np.float64), nn.ReLU(),
                         nn.Linear(4, 2, rng=1, dtype=np.float64))


def test_forward_hook_sees_inputs_and_output_and_can_replace_it():
    model = _mlp()
    x = np.ones((5, 3))
    seen = {}

    def keep(module, args, output):
        seen["args"], seen["out"] = args, output

    handle = model[0].register_forward_hook(keep)
    y = model(x)
    assert isinstance(seen["args"], tuple) and seen["args"][0] is x
    np.testing.assert_array_equal(seen["out"].data, model[0](x).data)
    h2 = model[1].register_forward_hook(lambda m, args, out: out * 0)
    assert np.all(model(x).data == model[2](np.zeros((5, 4))).data)
    h2.remove()
    handle.remove()
    handle.remove()                      # twice is harmless
    seen.clear()
    np.testing.assert_array_equal(model(x).data, y.data)
    assert seen == {}


def test_forward_hook_output_replacement_is_differentiated():
    lin = nn.Linear(2, 2, rng=0, dtype=np.float64)
    lin.register_forward_hook(lambda m, args, out: out * 3)
    loss = lin(np.ones((1, 2))).sum()
    loss.backward()
    np.testing.assert_allclose(lin.bias.grad, [3.0, 3.0])


def test_forward_pre_hook_replaces_args_and_kwargs():
    lin = nn.Linear(2, 1, rng=0, dtype=np.float64)
    x = np.array([[1.0, 2.0]])
    h = lin.register_forward_pre_hook(lambda m, args: args[0] * 2)      # one value: wrapped
    np.testing.assert_allclose(lin(x).data, lin.forward(x * 2).data)
    h.remove()
    with lin.register_forward_pre_hook(lambda m, args: (args[0] + 1,)):
        np.testing.assert_allclose(lin(x).data, lin.forward(x + 1).data)
    np.testing.assert_allclose(lin(x).data, lin.forward(x).data)        # removed on exit

    class Scale(nn.Module):
        def forward(self, x, factor=1.0):
            return x * factor

    m = Scale()
    m.register_forward_pre_hook(lambda mod, args, kwargs: (args, {"factor": 10.0}), with_kwargs=True)
    order = []
    m.register_forward_hook(lambda mod, args, kwargs, out: order.append(kwargs["factor"]), with_kwargs=True)
    np.testing.assert_allclose(m(tt.tensor([1.0])).data, [10.0])
    assert order == [10.0]


def test_hook_order_prepend_and_feature_extraction():
    model = _mlp()
    calls = []
    model[0].register_forward_hook(lambda m, a, o: calls.append("a"))
    model[0].register_forward_hook(lambda m, a, o: calls.append("b"), prepend=True)
    features = {}
    for name, module in model.named_modules():
        if name:
            module.register_forward_hook(lambda m, a, o, name=name: features.__setitem__(name, o.shape))
    model(np.ones((7, 3)))
    assert calls == ["b", "a"]
    assert features == {"0": (7, 4), "1": (7, 4), "2": (7, 2)}


def test_hooks_do_not_become_parameters_or_state():
    model = _mlp()
    helper = nn.Linear(1, 1)
    model.register_forward_hook(helper)            # a callable Module as a hook: not a child
    assert len(list(model.parameters())) == 4
    assert list(model.state_dict()) == list(_mlp().state_dict())
    with pytest.raises(TypeError, match="callable"):
        model.register_forward_hook(3)


def test_tensor_hook_inspects_and_replaces_the_gradient():
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    seen = []
    handle = y.register_hook(lambda g: seen.append(g.data.copy()) or g * 2)
    (y ** 2).sum().backward()
    np.testing.assert_allclose(seen[0], [6.0, 12.0])         # dL/dy, a Tensor
    np.testing.assert_allclose(x.grad, [36.0, 72.0])          # 3 * 2 * dL/dy
    handle.remove()
    x.grad = None
    (y ** 2).sum().backward()
    np.testing.assert_allclose(x.grad, [18.0, 36.0])


def test_leaf_hook_runs_before_accumulation_and_clips():
    w = tt.tensor([1.0, -5.0, 0.5], requires_grad=True)
    w.register_hook(lambda g: np.clip(g.data, -1, 1))             # an array is fine too
    (w * np.array([3.0, -4.0, 0.2])).sum().backward()
    np.testing.assert_allclose(w.grad, [1.0, -1.0, 0.2])
    calls = []
    w.register_hook(lambda g: calls.append(1))                    # None: keep the gradient
    w.grad = None
    (w * 2).sum().backward()
    np.testing.assert_allclose(w.grad, [1.0, 1.0, 1.0])
    assert calls == [1]


def test_tensor_hook_in_tt_grad_and_errors():
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="does not require grad"):
        tt.tensor([1.0]).register_hook(lambda g: g)
    y = x * 2
    y.register_hook(lambda g: np.ones(3))
    with pytest.raises(ValueError, match=r"gradient of shape \(3,\) for a tensor of shape \(2,\)"):
        y.sum().backward()


def test_tensor_hook_in_a_second_derivative():
    def f(x):
        y = x ** 3
        y.register_hook(lambda g: g * 2)
        return y * 1.0
    # f's hooked gradient is 2 * 3x^2 = 6x^2; its derivative 12x
    np.testing.assert_allclose(tt.grad(f)(2.0), 24.0)
    np.testing.assert_allclose(tt.grad(tt.grad(f))(2.0), 24.0)


def test_a_tensor_hook_inside_a_compiled_function_is_part_of_the_program():
    """tt.compile traces with the engine's own reverse sweep, which runs the hook on the traced
    gradient: the hook's operations are recorded, so the program applies them on every call."""
    def f(x):
        y = x * 3
        y.register_hook(lambda g: g * 2)
        return (y ** 2).sum()
    compiled = tt.compile(tt.grad(f))
    for x in (np.array([1.0, 2.0]), np.array([3.0, -1.0])):
        np.testing.assert_allclose(tt.grad(f)(x), 36 * x)
        np.testing.assert_array_equal(compiled(x), tt.grad(f)(x))
