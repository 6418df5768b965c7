"""nn: parameter discovery, state dicts, modes, layers, losses; data.minibatches; and a short
training run on the real digits."""

import math

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import nn


def leaf(shape, seed=0, dtype=np.float64):
    return tt.tensor(np.random.default_rng(seed).standard_normal(shape), requires_grad=True, dtype=dtype)


# ----- finding parameters ----------------------------------------------------------------------------
class Block(nn.Module):
    def __init__(self, shared):
        super().__init__()
        self.fc = nn.Linear(3, 3, rng=0)
        self.shared = shared                       # the same Tensor as in Net.shared


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.shared = leaf((3,), seed=1)
        self.blocks = [Block(self.shared), Block(self.shared)]          # a list of Modules
        self.heads = {"a": nn.Linear(3, 2, rng=1), "b": (leaf((2,)), nn.Linear(3, 1, bias=False))}
        self.alias = self.blocks[0]                # a Module reachable twice
        self.constant = tt.tensor([1.0, 2.0])      # no requires_grad: not a parameter
        self.scale = 3.0

    def forward(self, x):
        return x


def test_parameters_walk_nested_containers_and_count_shared_once():
    net = Net()
    names = [name for name, _ in net.named_parameters()]
    assert names == ["shared", "blocks.0.fc.weight", "blocks.0.fc.bias", "blocks.1.fc.weight",
                     "blocks.1.fc.bias",
                     "heads.a.weight", "heads.a.bias", "heads.b.0", "heads.b.1.weight"]
    params = list(net.parameters())
    assert len({id(p) for p in params}) == len(params) == 9
    assert params[0] is net.shared
    assert sum(p.size for p in params) == 3 + 2 * (9 + 3) + (6 + 2) + 2 + 3


def test_computed_tensors_are_not_parameters():
    layer = nn.Linear(2, 2, rng=0)
    layer.cache = layer.weight * 2          # on the tape: an optimizer must not update it
    assert [n for n, _ in layer.named_parameters()] == ["weight", "bias"]


def test_modules_train_eval_and_zero_grad_reach_every_submodule():
    net = Net()
    modules = list(net.modules())
    assert modules[0] is net and len(modules) == 1 + 2 + 2 + 2   # net, 2 blocks, 2 fc, 2 heads
    assert net.eval() is net
    assert all(m.training is False for m in modules)
    net.train()
    assert all(m.training is True for m in modules)
    for p in net.parameters():
        p.grad = np.ones(p.shape)
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_forward_must_be_defined():
    with pytest.raises(NotImplementedError, match="forward"):
        nn.Module()(1.0)


# ----- state dicts ----------------------------------------------------------------------------------
def mlp(seed):
    return nn.Sequential(nn.Linear(4, 5, rng=seed), nn.Tanh(), nn.Linear(5, 3, rng=seed + 1))


def test_state_dict_round_trip_copies_in_place():
    a, b = mlp(0), mlp(10)
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    state = a.state_dict()
    assert list(state) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert all(type(v) is np.ndarray for v in state.values())
    state["0.weight"] += 1                                  # a copy: the model is unchanged
    assert not np.array_equal(state["0.weight"], a[0].weight.data)
    state = a.state_dict()

    arrays = [p.data for p in b.parameters()]
    b.load_state_dict(state)
    assert all(p.data is arr for p, arr in zip(b.parameters(), arrays))   # same arrays, in place
    np.testing.assert_array_equal(b(x).data, a(x).data)
    state["2.bias"][:] = 0                                # b holds copies, not the dict's arrays
    assert np.any(b[2].bias.data != 0)


def test_load_state_dict_errors_name_the_problem_and_change_nothing():
    model = mlp(0)
    before = model.state_dict()
    bad_shape = dict(before, **{"2.weight": np.zeros((5, 3))})
    with pytest.raises(ValueError, match=r"'2.weight'.*\(5, 3\).*\(3, 5\)"):
        model.load_state_dict(bad_shape)
    missing = {k: v for k, v in before.items() if k != "0.bias"}
    with pytest.raises(KeyError, match="0.bias"):
        model.load_state_dict(missing)
    with pytest.raises(KeyError, match="extra"):
        model.load_state_dict(dict(before, extra=np.zeros(2)))
    zeros = {k: np.zeros_like(v) for k, v in before.items()}
    with pytest.raises(ValueError):
        model.load_state_dict(dict(zeros, **{"0.bias": np.zeros(7)}))     # fails on the last check
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(v, before[k])


# ----- layers ---------------------------------------------------------------------------------------
def test_linear_init_shapes_and_dtype():
    layer = nn.Linear(50, 40, rng=0)
    bound = 1 / math.sqrt(50)
    assert layer.weight.shape == (40, 50) and layer.bias.shape == (40,)   # PyTorch's (out, in)
    assert layer.weight.dtype == layer.bias.dtype == np.float32
    assert layer.weight.requires_grad and layer.bias.requires_grad
    for p in (layer.weight, layer.bias):
        assert np.all(np.abs(p.data) <= bound)
    # Uniform, not squeezed near zero: the extremes come close to the bound.
    assert np.abs(layer.weight.data).max() > 0.99 * bound
    assert abs(layer.weight.data.std() - bound / math.sqrt(3)) < 0.05 * bound
    assert layer.b is layer.bias and layer.W.shape == (50, 40)     # the lecture's view: weight.T
    np.testing.assert_array_equal(layer.W.data, layer.weight.data.T)

    double = nn.Linear(50, 40, rng=0, dtype=np.float64)
    assert double.weight.dtype == np.float64
    np.testing.assert_allclose(double.weight.data, layer.weight.data, rtol=1e-6)   # same seed, same draw
    assert not np.array_equal(nn.Linear(50, 40, rng=1).weight.data, layer.weight.data)

    no_bias = nn.Linear(3, 2, bias=False)
    assert no_bias.bias is None and [n for n, _ in no_bias.named_parameters()] == ["weight"]


def test_linear_forward_is_x_at_W_plus_b_and_differentiable():
    layer = nn.Linear(3, 2, rng=0, dtype=np.float64)
    x = np.random.default_rng(1).standard_normal((4, 3))
    out = layer(x)
    np.testing.assert_allclose(out.data, x @ layer.weight.data.T + layer.bias.data, rtol=1e-15)
    out.sum().backward()
    np.testing.assert_allclose(layer.weight.grad, (x.T @ np.ones((4, 2))).T, rtol=1e-14)
    np.testing.assert_allclose(layer.bias.grad, np.full(2, 4.0))
    assert nn.Linear(3, 2, bias=False, rng=0)(x).shape == (4, 2)
    assert layer(x[0]).shape == (2,)


@pytest.mark.parametrize("layer,reference", [
    (nn.ReLU(), lambda x: np.maximum(x, 0)),
    (nn.Tanh(), np.tanh),
    (nn.Sigmoid(), lambda x: 1 / (1 + np.exp(-x))),
])
def test_activations(layer, reference):
    x = tt.tensor([-2.0, -0.5, 0.5, 3.0], requires_grad=True)
    np.testing.assert_allclose(layer(x).data, reference(x.data), rtol=1e-14)
    tt.gradcheck(lambda x: layer(x), x)


def test_sequential_indexing_len_iteration():
    a, act, b = nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 2)
    seq = nn.Sequential(a, act, b)
    assert len(seq) == 3 and list(seq) == [a, act, b]
    assert seq[0] is a and seq[-1] is b
    head = seq[:2]
    assert isinstance(head, nn.Sequential) and list(head) == [a, act]
    x = np.ones((1, 4), dtype=np.float32)
    np.testing.assert_allclose(seq(x).data, b(act(a(x))).data)
    assert len(list(seq.parameters())) == 4
    with pytest.raises(TypeError, match="layer 1"):
        nn.Sequential(a, 3)


# ----- losses ---------------------------------------------------------------------------------------
def test_cross_entropy_huge_logits_finite_with_exact_gradient():
    logits = tt.tensor([[1e4, 0.0, -1e4], [0.0, 1e4, 1e4], [5.0, 1.0, 2.0]], requires_grad=True)
    y = np.array([2, 1, 0])
    loss = nn.CrossEntropyLoss()(logits, y)
    z = logits.data
    log_p = z - z.max(axis=1, keepdims=True)
    log_p -= np.log(np.exp(log_p).sum(axis=1, keepdims=True))
    assert np.isfinite(loss.item())
    assert loss.item() == pytest.approx(-log_p[np.arange(3), y].mean(), rel=1e-12)   # 2e4 / 3 + ...
    loss.backward()
    onehot = np.eye(3)[y]
    np.testing.assert_allclose(logits.grad, (np.exp(log_p) - onehot) / 3, atol=1e-15)


def test_cross_entropy_integer_and_onehot_targets_agree():
    rng = np.random.default_rng(0)
    z = rng.standard_normal((6, 4)).astype(np.float32)
    y = rng.integers(0, 4, 6)
    a, b = tt.tensor(z, requires_grad=True), tt.tensor(z, requires_grad=True)
    la, lb = nn.CrossEntropyLoss()(a, y), nn.CrossEntropyLoss()(b, np.eye(4)[y])   # float64 one-hot
    assert la.dtype == lb.dtype == np.float32
    assert la.item() == pytest.approx(lb.item(), rel=1e-6)
    la.backward()
    lb.backward()
    np.testing.assert_allclose(a.grad, b.grad, rtol=1e-6)
    with pytest.raises(ValueError, match="reduction"):
        nn.CrossEntropyLoss(reduction="avg")


def test_mse_loss_value_gradient_dtype_and_shape_check():
    pred = tt.tensor(np.array([[1.0, 2.0], [3.0, 5.0]], dtype=np.float32), requires_grad=True)
    target = np.array([[1.0, 1.0], [1.0, 1.0]])          # float64 target
    loss = nn.MSELoss()(pred, target)
    assert loss.dtype == np.float32                       # not promoted by the target
    assert loss.item() == pytest.approx((0 + 1 + 4 + 16) / 4)
    loss.backward()
    np.testing.assert_allclose(pred.grad, 2 * (pred.data - target) / 4)
    assert nn.MSELoss(reduction="sum")(pred, target).item() == pytest.approx(21)
    with pytest.raises(ValueError, match="shape"):
        nn.MSELoss()(pred, np.ones(2))


# ----- minibatches ----------------------------------------------------------------------------------
def test_minibatches_cover_every_row_once_and_keep_pairs():
    X = np.arange(23 * 2).reshape(23, 2)
    y = np.arange(23)
    batches = list(tt.data.minibatches(X, y, 5, rng=0))
    assert [len(yb) for _, yb in batches] == [5, 5, 5, 5, 3]
    seen = np.concatenate([yb for _, yb in batches])
    assert sorted(seen) == list(range(23)) and not np.array_equal(seen, np.arange(23))
    for xb, yb in batches:
        np.testing.assert_array_equal(xb, X[yb])          # rows stay with their labels
    dropped = list(tt.data.minibatches(X, y, 5, drop_last=True, rng=0))
    assert [len(yb) for _, yb in dropped] == [5, 5, 5, 5]


def test_minibatches_seeding():
    X, y = np.arange(10)[:, None], np.arange(10)
    order = lambda rng: np.concatenate([yb for _, yb in tt.data.minibatches(X, y, 3, rng=rng)])
    np.testing.assert_array_equal(order(7), order(7))                  # a seed: same every call
    gen = np.random.default_rng(7)
    first, second = order(gen), order(gen)
    assert not np.array_equal(first, second)                          # a Generator advances
    gen = np.random.default_rng(7)
    np.testing.assert_array_equal(order(gen), first)                  # ... reproducibly
    in_order = list(tt.data.minibatches(X, y, 4, shuffle=False))
    np.testing.assert_array_equal(np.concatenate([yb for _, yb in in_order]), y)


@pytest.mark.parametrize("args,message", [
    ((np.ones((3, 2)), np.ones(4), 2), "3 rows"),
    ((np.ones((3, 2)), np.ones(3), 0), "batch_size"),
    ((np.ones((3, 2)), np.ones(3), 1.5), "batch_size"),
])
def test_minibatches_errors(args, message):
    with pytest.raises(ValueError, match=message):
        next(tt.data.minibatches(*args))


# ----- training on the real digits ------------------------------------------------------------------
def test_two_epochs_on_digits_beat_90_percent():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = ((X - X.mean(axis=0)) / (X.std(axis=0) + 1e-8)).astype(np.float32)
    rng = np.random.default_rng(0)
    perm = rng.permutation(len(X))
    train, test = perm[:1400], perm[1400:]
    model = nn.Sequential(nn.Linear(64, 64, rng=rng), nn.ReLU(), nn.Linear(64, 10, rng=rng))
    loss_fn = nn.CrossEntropyLoss()
    opt = tt.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    with tt.no_grad():
        chance = np.mean(model(X[test]).data.argmax(axis=1) == y[test])
    losses = []
    for _ in range(2):
        for xb, yb in tt.data.minibatches(X[train], y[train], 32, rng=rng):
            loss = loss_fn(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    with tt.no_grad():
        accuracy = np.mean(model(X[test]).data.argmax(axis=1) == y[test])
    assert chance < 0.3
    assert np.mean(losses[-10:]) < 0.5 * np.mean(losses[:10])
    assert accuracy > 0.9, accuracy
    assert all(p.dtype == np.float32 for p in model.parameters())


def test_train_mlp_example_runs_and_reports(tmp_path, monkeypatch, capsys):
    """examples/train_mlp.py end to end, shortened: progress, plot, and the last line."""
    import importlib.util
    import pathlib

    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(var, "1")     # the script sets these; monkeypatch restores them after
    path = pathlib.Path(__file__).parents[2] / "examples" / "train_mlp.py"
    spec = importlib.util.spec_from_file_location("train_mlp", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    plot = tmp_path / "sub" / "curves.png"
    accuracy = script.main(["--epochs", "3", "--quiet", "--plot", str(plot)])
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == f"test accuracy: {accuracy:.4f}"
    assert accuracy > 0.9
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
