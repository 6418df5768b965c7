"""PyTorch's layouts and names (issue 23 item 3, issue 19 item 5): Linear.weight (out, in) and
bias, tying, F.linear vs tt.linear, old W/b checkpoints, PyTorch state dicts, nn.init fans,
the class axis of cross-entropy."""

import math
import warnings

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import nn
from tinytensor.nn import functional as F


def test_linear_is_pytorchs_layout_and_f_linear_vs_tt_linear():
    layer = nn.Linear(3, 2, rng=0, dtype=np.float64)
    assert layer.weight.shape == (2, 3) and layer.bias.shape == (2,)
    assert list(layer.state_dict()) == ["weight", "bias"]
    x = np.random.default_rng(1).standard_normal((4, 3))
    w, b = layer.weight.data, layer.bias.data
    np.testing.assert_allclose(layer(x).data, x @ w.T + b, rtol=1e-14)
    np.testing.assert_allclose(F.linear(x, w, b).data, x @ w.T + b, rtol=1e-14)
    np.testing.assert_allclose(F.linear(x, w).data, x @ w.T, rtol=1e-14)
    np.testing.assert_allclose(tt.linear(x, w.T, b).data, x @ w.T + b, rtol=1e-14)   # the lecture's x @ W + b
    with pytest.raises(ValueError, match=r"\(out_features, in_features\)"):
        F.linear(x, w.T, b)
    out = layer(x)
    tt.sum(out * out).backward()
    g = 2 * (x @ w.T + b)
    np.testing.assert_allclose(layer.weight.grad, g.T @ x, rtol=1e-12)
    np.testing.assert_allclose(layer.bias.grad, g.sum(0), rtol=1e-12)
    np.testing.assert_allclose(layer.W.data, w.T)        # the lecture's (in, out) view, read-only
    assert layer.b is layer.bias


def test_weight_tying_counts_one_parameter_and_trains_both_uses():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(5, 3, rng=0, dtype=np.float64)
            self.head = nn.Linear(3, 5, bias=False, rng=1, dtype=np.float64)
            self.wte.weight = self.head.weight            # as nanoGPT: (vocab, dim) both

        def forward(self, idx):
            return self.head(self.wte(idx))

    model = Tied()
    params = list(model.parameters())
    assert len(params) == 1 and params[0] is model.head.weight
    assert list(model.state_dict()) == ["wte.weight", "head.weight"]     # both names, as PyTorch
    opt = tt.optim.SGD(model.parameters(), lr=0.1)
    idx = np.array([0, 3, 4])
    loss = nn.CrossEntropyLoss()(model(idx), np.array([1, 2, 0]))
    loss.backward()
    w = model.head.weight
    # d/dW of loss(head(W[idx])) = both uses' contributions, checked with finite differences
    def f(wv):
        z = wv[idx] @ wv.T
        z = z - z.max(1, keepdims=True)
        return -np.mean(z[np.arange(3), [1, 2, 0]] - np.log(np.exp(z).sum(1)))
    num = np.zeros_like(w.data)
    for i in np.ndindex(w.shape):
        e = np.zeros_like(w.data)
        e[i] = 1e-6
        num[i] = (f(w.data + e) - f(w.data - e)) / 2e-6
    np.testing.assert_allclose(w.grad, num, atol=1e-8)
    before = w.data.copy()
    opt.step()
    np.testing.assert_allclose(w.data, before - 0.1 * num, atol=1e-8)
    assert model.wte.weight is model.head.weight
    other = Tied()
    other.load_state_dict({"head.weight": w.data})       # one name is enough for a tied pair
    np.testing.assert_array_equal(other.wte.weight.data, w.data)


def test_old_checkpoints_with_W_and_b_still_load():
    model = nn.Sequential(nn.Linear(4, 3, rng=0), nn.ReLU(), nn.Linear(3, 2, rng=1))
    old = {"0.W": model[0].weight.data.T.copy(), "0.b": model[0].bias.data.copy(),
           "2.W": model[2].weight.data.T.copy(), "2.b": model[2].bias.data.copy()}
    fresh = nn.Sequential(nn.Linear(4, 3, rng=5), nn.ReLU(), nn.Linear(3, 2, rng=6))
    with pytest.warns(UserWarning, match="converted the old Linear keys W/b"):
        fresh.load_state_dict(old)
    x = np.random.default_rng(2).standard_normal((5, 4)).astype(np.float32)
    np.testing.assert_array_equal(fresh(x).data, model(x).data)


def test_a_seed_gives_the_same_model_as_before_the_layout_change():
    # nn.Linear draws the (in, out) matrix as earlier versions did and stores its transpose.
    layer = nn.Linear(3, 2, rng=0, dtype=np.float64)
    rng = np.random.default_rng(0)
    W = rng.uniform(-1 / math.sqrt(3), 1 / math.sqrt(3), (3, 2))
    np.testing.assert_array_equal(layer.weight.data, W.T)


def test_a_pytorch_state_dict_as_arrays_loads_and_gives_pytorchs_outputs():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3, padding=1), torch.nn.BatchNorm2d(3), torch.nn.ReLU(),
                             torch.nn.Flatten(), torch.nn.Linear(3 * 4 * 4, 6), torch.nn.LayerNorm(6),
                             torch.nn.GELU(), torch.nn.Linear(6, 2)).double()
    x = np.random.default_rng(0).standard_normal((5, 2, 4, 4))
    tm.train()
    tm(torch.tensor(x))                              # move BatchNorm's running statistics
    tm.eval()
    model = nn.Sequential(nn.Conv2d(2, 3, 3, padding=1, dtype=np.float64),
                          nn.BatchNorm2d(3, dtype=np.float64),
                          nn.ReLU(), nn.Flatten(), nn.Linear(48, 6, dtype=np.float64),
                          nn.LayerNorm(6, dtype=np.float64), nn.GELU(), nn.Linear(6, 2, dtype=np.float64))
    model.load_state_dict({k: v.numpy() for k, v in tm.state_dict().items()})
    model.eval()
    np.testing.assert_allclose(model(x).data, tm(torch.tensor(x)).detach().numpy(), rtol=1e-10, atol=1e-12)
    assert set(model.state_dict()) == set(tm.state_dict())
    emb = torch.nn.Embedding(7, 4).double()
    mine = nn.Embedding(7, 4, dtype=np.float64)
    mine.load_state_dict({k: v.numpy() for k, v in emb.state_dict().items()})
    np.testing.assert_allclose(mine(np.array([1, 6])).data, emb(torch.tensor([1, 6])).detach().numpy())


@pytest.mark.parametrize("make, fan_in, fan_out", [
    (lambda: nn.Linear(512, 16).weight, 512, 16),
    (lambda: nn.Conv2d(3, 8, 5).weight, 75, 200),
    (lambda: nn.Embedding(10, 4).weight, 4, 10),
    (lambda: nn.MultiheadAttention(8, 2).in_proj_weight, 8, 24),
])
def test_init_uses_each_layers_own_fans_as_pytorch(make, fan_in, fan_out):
    w = make()
    tt.manual_seed(0)
    nn.init.kaiming_uniform_(w)                    # a=0: gain sqrt(2), bound sqrt(6 / fan_in)
    bound = math.sqrt(6 / fan_in)
    assert np.abs(w.data).max() <= bound and np.abs(w.data).max() > 0.8 * bound
    nn.init.xavier_uniform_(w)
    bound = math.sqrt(6 / (fan_in + fan_out))
    assert np.abs(w.data).max() <= bound and np.abs(w.data).max() > 0.8 * bound
    nn.init.kaiming_normal_(w, mode="fan_out")
    assert abs(w.data.std() - math.sqrt(2 / fan_out)) < 0.25 * math.sqrt(2 / fan_out)


def test_cross_entropy_class_axis_is_1_whatever_the_sizes():
    rng = np.random.default_rng(0)
    z = rng.standard_normal((2, 3, 3))               # (N, C, d) with C == d
    y = rng.integers(0, 3, (2, 3))
    logp = z - np.log(np.exp(z).sum(1, keepdims=True))            # softmax over axis 1
    ref = -np.mean(np.take_along_axis(logp, y[:, None, :], 1))
    np.testing.assert_allclose(nn.CrossEntropyLoss()(z, y).data, ref, rtol=1e-12)
    np.testing.assert_allclose(F.cross_entropy(z, y).data, 1.3149778901584068, rtol=1e-12)   # torch 2.13
    np.testing.assert_allclose(nn.NLLLoss()(logp, y).data, ref, rtol=1e-12)
    p = rng.random((2, 3, 4))
    p /= p.sum(1, keepdims=True)                     # probabilities over axis 1
    z2 = rng.standard_normal((2, 3, 4))
    logp2 = z2 - np.log(np.exp(z2).sum(1, keepdims=True))
    np.testing.assert_allclose(F.cross_entropy(z2, p).data, -np.mean((p * logp2).sum(1)), rtol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        seq = rng.standard_normal((2, 5, 3))         # (N, T, C) with (N, T) targets: only class-last fits
        out = F.cross_entropy(seq, rng.integers(0, 3, (2, 5)))
    assert np.isfinite(out.data)
