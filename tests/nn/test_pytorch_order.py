"""PyTorch's registration order: a module's own parameters (assignment order), then each child's,
recursively (pre-order); state_dict: own parameters, own buffers, then each child's state. A
PyTorch optimizer state dict is keyed by this position, so any other order loads silently wrong."""

import numpy as np

import tinytensor as tt
from tinytensor import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 4, rng=0)
        self.scale = nn.Parameter(np.ones(4))          # own parameter after a child
        self.register_buffer("count", np.zeros(1))
        self.norm = nn.BatchNorm1d(4)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.alpha = nn.Parameter(np.ones(2))
        self.head = nn.Linear(4, 2, rng=1)
        self.register_buffer("steps", np.zeros(1))
        self.gamma = nn.Parameter(np.zeros(2))


# as torch gives them for the same class (own _parameters first, then _modules in order)
TORCH_PARAMS = ["alpha", "gamma", "block.scale", "block.lin.weight", "block.lin.bias",
                "block.norm.weight", "block.norm.bias", "head.weight", "head.bias"]
TORCH_BUFFERS = ["steps", "block.count", "block.norm.running_mean", "block.norm.running_var",
                 "block.norm.num_batches_tracked"]
TORCH_STATE = ["alpha", "gamma", "steps", "block.scale", "block.count", "block.lin.weight",
               "block.lin.bias", "block.norm.weight", "block.norm.bias", "block.norm.running_mean",
               "block.norm.running_var", "block.norm.num_batches_tracked", "head.weight", "head.bias"]


def test_named_parameters_in_pytorch_order():
    net = Net()
    assert [n for n, _ in net.named_parameters()] == TORCH_PARAMS
    assert [id(p) for p in net.parameters()] == [id(p) for _, p in net.named_parameters()]


def test_buffers_in_pytorch_order():
    assert [n for n, _ in Net().named_buffers()] == TORCH_BUFFERS


def test_state_dict_in_pytorch_order():
    assert list(Net().state_dict()) == TORCH_STATE


def test_named_modules_pre_order():
    assert [n for n, _ in Net().named_modules()] == ["", "block", "block.lin", "block.norm", "head"]


def test_plain_lists_act_as_module_and_parameter_lists():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = [nn.Linear(2, 2, rng=0), nn.Linear(2, 2, rng=1)]
            self.w = nn.Parameter(np.ones(2))
    assert [n for n, _ in M().named_parameters()] == ["w", "layers.0.weight", "layers.0.bias",
                                                       "layers.1.weight", "layers.1.bias"]


def test_torch_optimizer_state_loads_onto_the_right_parameters():
    # an Adam state dict keyed by PyTorch's positions: exp_avg of each has its parameter's shape
    # and a distinct value; loaded, each tt parameter must get the one of its own name
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    params = dict(net.named_parameters())
    state = {i: {"step": np.array(3.0), "exp_avg": np.full(params[n].shape, float(i)),
                 "exp_avg_sq": np.full(params[n].shape, float(i) ** 2)} for i, n in enumerate(TORCH_PARAMS)}
    sd = {"state": state, "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8,
                                            "weight_decay": 0.0, "amsgrad": False, "foreach": None,
                                            "maximize": False, "capturable": False,
                                            "differentiable": False, "fused": None,
                                            "params": list(range(len(TORCH_PARAMS)))}]}
    opt = tt.optim.Adam(net.parameters(), lr=1e-3)
    opt.load_state_dict(sd)
    for i, n in enumerate(TORCH_PARAMS):
        assert names[i] == n
        np.testing.assert_array_equal(opt.state[params[n]]["exp_avg"], np.full(params[n].shape, float(i)))
        assert opt.state[params[n]]["step"] == 3
    assert "foreach" not in opt.state_dict()["param_groups"][0]


def test_torch_only_option_that_changes_the_update_is_refused():
    net = Net()
    opt = tt.optim.Adam(net.parameters())
    sd = opt.state_dict()
    sd["param_groups"][0]["maximize"] = True
    import pytest
    with pytest.raises(ValueError, match="maximize"):
        opt.load_state_dict(sd)


def test_non_persistent_buffer_not_in_state_dict():
    m = nn.Module()
    m.register_buffer("a", np.ones(2))
    m.register_buffer("tmp", np.zeros(2), persistent=False)
    assert [n for n, _ in m.named_buffers()] == ["a", "tmp"]
    assert list(m.state_dict()) == ["a"]
    m.load_state_dict({"a": np.full(2, 3.0)})        # strict: tmp is not expected
    np.testing.assert_array_equal(m.a.data, [3.0, 3.0])


def test_a_loaded_torch_adam_state_continues_with_pytorchs_update():
    # PyTorch's Adam after 3 steps: step a 0-d tensor (here its .numpy()), moments per parameter
    p = nn.Parameter(np.array([0.5, -1.0, 2.0]))
    m, v = np.array([0.1, -0.2, 0.3]), np.array([0.01, 0.04, 0.09])
    sd = {"state": {0: {"step": np.array(3.0, np.float32), "exp_avg": m.copy(), "exp_avg_sq": v.copy()}},
          "param_groups": [{"lr": 0.01, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0,
                            "amsgrad": False, "maximize": False, "foreach": None, "capturable": False,
                            "differentiable": False, "fused": None, "params": [0]}]}
    opt = tt.optim.Adam([p], lr=0.1)
    opt.load_state_dict(sd)
    g = np.array([0.3, 0.1, -0.2])
    p.grad = g.copy()
    opt.step()
    # torch.optim.Adam's documented update at t = 4
    m4, v4 = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
    want = np.array([0.5, -1.0, 2.0]) - 0.01 * (m4 / (1 - 0.9 ** 4)) / (np.sqrt(v4 / (1 - 0.999 ** 4)) + 1e-8)
    np.testing.assert_allclose(p.data, want, rtol=1e-14)
    assert opt.state[p]["step"] == 4
