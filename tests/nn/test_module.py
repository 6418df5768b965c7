"""nn.Module beyond parameters (issue 12 and issue 10 item 6): named_modules, children, apply,
buffers, to(dtype), state_dict with buffers, nn.init, clip_grad_*, and functional_call with
tt.grad / tt.hvp / tt.jacobian over a parameter dict."""

import math

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import nn


def arr(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 2, 3, rng=0), nn.BatchNorm2d(2), nn.ReLU())
        self.heads = [nn.Linear(8, 3, rng=1)]
        self.shared = self.features        # reachable twice: counted once

    def forward(self, x):
        return self.heads[0](self.features(x).reshape(len(x), -1))


def test_named_modules_children_apply():
    net = Net()
    names = [n for n, _ in net.named_modules()]
    assert names == ["", "features", "features.0", "features.1", "features.2", "heads.0"]
    assert [n for n, _ in net.named_children()] == ["features", "heads.0"]
    assert list(net.children()) == [net.features, net.heads[0]]
    seen = []
    assert net.apply(lambda m: seen.append(type(m).__name__)) is net
    assert seen[-1] == "Net" and len(seen) == 6
    assert seen.index("Conv2d") < seen.index("Sequential")   # children before their parent


def test_buffers_are_state_not_parameters():
    net = Net()
    assert [n for n, _ in net.named_buffers()] == ["features.1.running_mean", "features.1.running_var",
                                                   "features.1.num_batches_tracked"]
    state = net.state_dict()
    assert "features.1.running_var" in state and "features.0.weight" in state
    assert len(list(net.parameters())) == 6
    m = nn.Module()
    m.register_buffer("steps", np.array([3]))
    assert isinstance(m.steps, tt.Tensor) and m.state_dict()["steps"].tolist() == [3]
    with pytest.raises(ValueError, match="identifier"):
        m.register_buffer("a.b", np.zeros(1))


def test_load_state_dict_restores_buffers_and_marks_writes():
    a, b = Net(), Net()
    a.features[1].running_mean.data[...] = [1.0, 2.0]
    a.heads[0].weight.data[...] = 0.5
    b.load_state_dict(a.state_dict())
    np.testing.assert_array_equal(b.features[1].running_mean.data, [1.0, 2.0])
    np.testing.assert_array_equal(b.heads[0].weight.data, 0.5)
    bad = a.state_dict()
    del bad["features.1.running_var"]
    with pytest.raises(KeyError, match="running_var"):
        b.load_state_dict(bad)
    b.load_state_dict(bad, strict=False)


def test_to_casts_parameters_and_buffers_in_place():
    net = Net()
    w = net.heads[0].weight
    assert net.to(np.float64) is net
    assert net.heads[0].weight is w and w.dtype == np.float64
    assert net.features[1].running_var.dtype == np.float64
    assert net(arr((2, 1, 4, 4))).dtype == np.float64
    assert net.to("cpu") is net
    with pytest.raises(TypeError, match="floating"):
        net.to(np.int32)


# ----- init -----------------------------------------------------------------------------------------
def test_init_functions_in_place_seeded_and_scaled():
    t = tt.tensor(np.zeros((400, 300)), requires_grad=True)
    data = t.data
    fan_in, fan_out = 300, 400
    cases = [
        (nn.init.xavier_uniform_, math.sqrt(6 / (fan_in + fan_out)) / math.sqrt(3)),
        (nn.init.xavier_normal_, math.sqrt(2 / (fan_in + fan_out))),
        (lambda t, rng: nn.init.kaiming_uniform_(t, a=math.sqrt(5), rng=rng), 1 / math.sqrt(3 * fan_in)),
        (lambda t, rng: nn.init.kaiming_normal_(t, nonlinearity="relu", rng=rng), math.sqrt(2 / fan_in)),
        (lambda t, rng: nn.init.normal_(t, 1.0, 0.5, rng=rng), 0.5),
        (lambda t, rng: nn.init.uniform_(t, -2, 2, rng=rng), 4 / math.sqrt(12)),
    ]
    for init, std in cases:
        assert init(t, rng=0) is t and t.data is data
        assert abs(t.data.std() - std) < 0.02 * std
        first = t.data.copy()
        init(t, rng=0)
        np.testing.assert_array_equal(t.data, first)
    nn.init.zeros_(t)
    assert not t.data.any()
    nn.init.ones_(t)
    assert (t.data == 1).all()
    conv = nn.Conv2d(3, 4, 3)
    bound = math.sqrt(6 / (3 * 9 + 4 * 9))
    assert np.abs(nn.init.xavier_uniform_(conv.weight, rng=1).data).max() <= bound
    with pytest.raises(ValueError, match="fewer than 2"):
        nn.init.xavier_uniform_(tt.zeros(3))


def test_init_write_invalidates_a_saved_value():
    layer = nn.Linear(2, 2, rng=0)
    loss = (layer(np.ones((1, 2))) ** 2).sum()
    nn.init.zeros_(layer.weight)
    assert layer.weight._version > -1          # announced through mark_modified
    del loss


# ----- clipping -------------------------------------------------------------------------------------
def test_clip_grad_norm_and_value():
    params = [tt.tensor(np.zeros(3), requires_grad=True), tt.tensor(np.zeros(4), requires_grad=True),
              tt.tensor(np.zeros(2), requires_grad=True)]
    params[0].grad, params[1].grad = np.array([3.0, 0, 0]), np.array([0, 4.0, 0, 0])
    original = params[0].grad
    total = nn.utils.clip_grad_norm_(params, 1.0)
    assert total.item() == pytest.approx(5.0)
    np.testing.assert_allclose(params[0].grad, [3 / (5 + 1e-6), 0, 0])
    np.testing.assert_array_equal(original, [3.0, 0, 0])         # a new array, not written into
    assert params[2].grad is None
    assert nn.utils.clip_grad_norm_(params, 10.0).item() == pytest.approx(1.0, rel=1e-5)
    params[0].grad = np.array([-3.0, 0.5, 0])
    assert nn.utils.clip_grad_norm_(params[0], 1.0, norm_type=np.inf).item() == 3.0
    params[1].grad = np.array([-3.0, 0.5, 2, 0], dtype=np.float32)
    nn.utils.clip_grad_value_(params, 1.0)
    np.testing.assert_array_equal(params[1].grad, [-1, 0.5, 1, 0])
    assert params[1].grad.dtype == np.float32
    params[1].grad = np.array([np.nan, 0, 0, 0])
    with pytest.raises(RuntimeError, match="nonfinite|non-finite|error_if_nonfinite"):
        nn.utils.clip_grad_norm_(params, 1.0, error_if_nonfinite=True)


# ----- functional_call -----------------------------------------------------------------------------
def mlp():
    return nn.Sequential(nn.Linear(4, 5, rng=0, dtype=np.float64), nn.Tanh(),
                         nn.Linear(5, 3, rng=1, dtype=np.float64))


def test_functional_call_gradients_equal_backward():
    model = mlp()
    x, y = arr((6, 4)), np.arange(6) % 3
    loss_fn = nn.CrossEntropyLoss()
    params = dict(model.named_parameters())
    grads = tt.grad(lambda p: loss_fn(nn.functional_call(model, p, x), y))(params)
    assert all(p.grad is None for p in model.parameters())        # the module's own are untouched
    loss_fn(model(x), y).backward()
    for name, p in model.named_parameters():
        np.testing.assert_allclose(grads[name], p.grad, rtol=1e-12)
    assert model[0].weight is params["0.weight"]                              # restored


def test_functional_call_uses_the_given_values_and_restores_on_error():
    model = mlp()
    zero = {name: np.zeros(p.shape) for name, p in model.named_parameters()}
    np.testing.assert_array_equal(nn.functional_call(model, zero, arr((2, 4))).data, 0)
    partial = {"2.bias": np.ones(3)}
    out = nn.functional_call(model, partial, arr((2, 4)))
    np.testing.assert_allclose(out.data, (model(arr((2, 4))) - model[2].bias + 1).data)
    with pytest.raises(KeyError, match="not parameters"):
        nn.functional_call(model, {"3.weight": np.zeros(1)}, arr((2, 4)))
    W = model[0].weight
    with pytest.raises(ValueError):
        nn.functional_call(model, {"0.weight": np.zeros((3, 5))}, arr((2, 4)))
    assert model[0].weight is W


def test_functional_call_replaces_parameters_in_containers_and_tuples():
    class Odd(nn.Module):
        def __init__(self):
            super().__init__()
            self.pair = (tt.tensor([2.0], requires_grad=True), [tt.tensor([3.0], requires_grad=True)])

        def forward(self, x):
            return x * self.pair[0] * self.pair[1][0]

    odd = Odd()
    assert [n for n, _ in odd.named_parameters()] == ["pair.0", "pair.1.0"]
    out = nn.functional_call(odd, {"pair.0": np.array([5.0]), "pair.1.0": np.array([7.0])}, 1.0)
    assert out.item() == 35.0
    assert odd(1.0).item() == 6.0


def test_hvp_and_jacobian_over_a_parameter_dict():
    model = mlp()
    x, y = arr((6, 4)), np.arange(6) % 3
    params = {name: p.data.copy() for name, p in model.named_parameters()}

    def loss(p):
        return nn.CrossEntropyLoss()(nn.functional_call(model, p, x), y)

    v = {name: arr(a.shape, seed=2) for name, a in params.items()}
    hv = tt.hvp(loss, (params,), (v,))
    hv = hv[0] if isinstance(hv, tuple) else hv
    eps = 1e-6
    up = tt.grad(loss)({k: a + eps * v[k] for k, a in params.items()})
    down = tt.grad(loss)({k: a - eps * v[k] for k, a in params.items()})
    for k in params:
        np.testing.assert_allclose(hv[k], (up[k] - down[k]) / (2 * eps), atol=1e-7)
    jac = tt.jacobian(lambda p: nn.functional_call(model, p, x[:2]))(params)
    assert jac["0.weight"].shape == (2, 3, 5, 4)
    assert jac["2.bias"].shape == (2, 3, 3)
    np.testing.assert_allclose(jac["2.bias"], np.broadcast_to(np.eye(3), (2, 3, 3)))
