"""SmoothL1Loss, KLDivLoss, ModuleDict, Conv2d(dilation, groups), pooling padding/ceil_mode and
Embedding(padding_idx) against NumPy loop references of PyTorch's documented definitions (and
PyTorch itself when installed)."""

import math

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import nn
from tinytensor.nn import functional as F
from tinytensor.specs import _np_conv2d_dilated_grouped


# ----- losses ------------------------------------------------------------------------------------
@pytest.mark.parametrize("beta", [1.0, 0.3, 0.0])
def test_smooth_l1_loss_formula_and_gradient(beta):
    rng = np.random.default_rng(0)
    p, y = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    d = p - y
    ref = np.abs(d) if beta == 0 else np.where(np.abs(d) < beta, 0.5 * d * d / max(beta, 1e-300),
                                               np.abs(d) - 0.5 * beta)
    P = tt.tensor(p, requires_grad=True)
    loss = nn.SmoothL1Loss(beta=beta)(P, y)
    np.testing.assert_allclose(loss.item(), ref.mean(), rtol=1e-13)
    loss.backward()
    slope = np.sign(d) if beta == 0 else np.where(np.abs(d) < beta, d / max(beta, 1e-300), np.sign(d))
    np.testing.assert_allclose(P.grad, slope / d.size, rtol=1e-12)
    np.testing.assert_allclose(F.smooth_l1_loss(p, y, reduction="none", beta=beta), ref, rtol=1e-13)
    # HuberLoss(delta) = delta * SmoothL1Loss(beta=delta)
    if beta:
        np.testing.assert_allclose(nn.HuberLoss(delta=beta)(p, y).item(), beta * ref.mean(), rtol=1e-13)
    with pytest.raises(ValueError, match="beta must be non-negative"):
        nn.SmoothL1Loss(beta=-1)


def test_kl_div_reductions_and_log_target():
    rng = np.random.default_rng(1)
    logp = np.log(rng.dirichlet(np.ones(5), size=4))
    q = rng.dirichlet(np.ones(5), size=4)
    q[0, 2] = 0.0
    pointwise = np.where(q > 0, q * (np.log(np.where(q > 0, q, 1)) - logp), 0.0)
    X = tt.tensor(logp, requires_grad=True)
    np.testing.assert_allclose(nn.KLDivLoss()(X, q).item(), pointwise.mean(), rtol=1e-13)
    batchmean = nn.KLDivLoss(reduction="batchmean")(X, q)
    np.testing.assert_allclose(batchmean.item(), pointwise.sum() / 4, rtol=1e-13)
    # batchmean is the true KL divergence per sample
    kl = sum(np.sum(np.where(qi > 0, qi * np.log(np.where(qi > 0, qi, 1) / np.exp(li)), 0))
             for qi, li in zip(q, logp)) / 4
    np.testing.assert_allclose(batchmean.item(), kl, rtol=1e-12)
    batchmean.backward()
    np.testing.assert_allclose(X.grad, -q / 4, rtol=1e-13)
    np.testing.assert_allclose(nn.KLDivLoss(reduction="sum")(logp, q), pointwise.sum(), rtol=1e-13)
    np.testing.assert_allclose(F.kl_div(logp, q, reduction="none"), pointwise, rtol=1e-13, atol=1e-16)
    logq = np.log(q[1:])
    np.testing.assert_allclose(nn.KLDivLoss(reduction="none", log_target=True)(logp[1:], logq),
                               pointwise[1:], rtol=1e-12)
    T = tt.tensor(q, requires_grad=True)            # the target differentiates too, finite at 0
    nn.KLDivLoss(reduction="sum")(logp, T).backward()
    expected = np.where(q > 0, np.log(np.where(q > 0, q, 1)) + 1 - logp, -logp)
    np.testing.assert_allclose(T.grad, expected, rtol=1e-12)
    with pytest.raises(ValueError, match="batchmean"):
        nn.KLDivLoss(reduction="avg")


# ----- ModuleDict --------------------------------------------------------------------------------
def test_module_dict_names_order_and_mapping_methods():
    d = nn.ModuleDict({"enc": nn.Linear(2, 3, rng=0), "dec": nn.Linear(3, 2, rng=1)})
    d["act"] = nn.ReLU()
    assert list(d) == d.keys() == ["enc", "dec", "act"] and len(d) == 3 and "enc" in d
    names = list(dict(d.named_parameters()))
    assert len(names) == 4 and all(n.startswith(("enc.", "dec.")) for n in names)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.heads = nn.ModuleDict([("a", nn.Linear(2, 2, rng=0)), ("b", nn.Linear(2, 1, rng=1))])

        def forward(self, x, head):
            return self.heads[head](x)

    m = Model()
    assert all(k.startswith(("heads.a.", "heads.b.")) for k in m.state_dict())
    assert m(np.ones((1, 2)), "b").shape == (1, 1)
    removed = m.heads.pop("a")
    assert isinstance(removed, nn.Linear) and list(m.heads) == ["b"]
    assert len(list(m.parameters())) == 2
    d.update({"enc": nn.Identity()})                 # replacing keeps the position
    assert d.keys() == ["enc", "dec", "act"] and isinstance(d["enc"], nn.Identity)
    del d["act"]
    assert [k for k, _ in d.items()] == ["enc", "dec"] and len(d.values()) == 2
    d.clear()
    assert len(d) == 0 and list(d.parameters()) == []
    with pytest.raises(KeyError, match="cannot be a key"):
        d["a.b"] = nn.ReLU()
    with pytest.raises(KeyError, match="cannot be a key"):
        d["keys"] = nn.ReLU()
    with pytest.raises(TypeError, match="not a Module"):
        d["x"] = 3
    with pytest.raises(KeyError):
        d["missing"]


# ----- Conv2d dilation and groups ----------------------------------------------------------------
@pytest.mark.parametrize("dilation, groups, padding", [(2, 1, 2), ((1, 3), 2, (1, 0)), (1, 4, 1)])
def test_conv2d_dilation_groups_against_loop_reference(dilation, groups, padding):
    conv = nn.Conv2d(4, 8, (3, 2), stride=(1, 2), padding=padding, dilation=dilation, groups=groups,
                     rng=0, dtype=np.float64)
    assert conv.weight.shape == (8, 4 // groups, 3, 2)
    bound = 1 / math.sqrt(4 // groups * 6)
    assert np.abs(conv.weight.data).max() <= bound
    x = np.random.default_rng(1).normal(size=(2, 4, 9, 8))
    ref = _np_conv2d_dilated_grouped(x, conv.weight.data, conv.bias.data, conv.stride, conv.padding,
                                     conv.dilation, groups)
    X = tt.tensor(x, requires_grad=True)
    out = conv(X)
    np.testing.assert_allclose(out.data, ref, rtol=1e-12, atol=1e-12)
    u = np.random.default_rng(2).normal(size=out.shape)
    (out * u).sum().backward()
    # gradients against central differences of the reference in a few random directions
    rng = np.random.default_rng(3)
    for _ in range(2):
        dx, dw = rng.normal(size=x.shape), rng.normal(size=conv.weight.shape)
        eps = 1e-6
        f = lambda x, w: np.sum(u * _np_conv2d_dilated_grouped(      # noqa: E731
            x, w, conv.bias.data, conv.stride, conv.padding, conv.dilation, groups))
        w = conv.weight.data
        numeric = (f(x + eps * dx, w + eps * dw) - f(x - eps * dx, w - eps * dw)) / (2 * eps)
        np.testing.assert_allclose(np.sum(X.grad * dx) + np.sum(conv.weight.grad * dw), numeric, rtol=1e-6)
    np.testing.assert_allclose(conv.bias.grad, u.sum(axis=(0, 2, 3)), rtol=1e-12)


def test_conv2d_same_padding_with_dilation_and_errors():
    conv = nn.Conv2d(2, 2, 3, padding="same", dilation=2, rng=0)
    assert conv.padding == (2, 2) and conv(np.ones((1, 2, 7, 7))).shape == (1, 2, 7, 7)
    with pytest.raises(ValueError, match="groups=3 must divide in_channels"):
        nn.Conv2d(4, 6, 3, groups=3)
    with pytest.raises(ValueError, match="dilation must be positive"):
        nn.Conv2d(4, 6, 3, dilation=0)


# ----- pooling padding / ceil_mode -----------------------------------------------------------------
def _np_pool(x, k, s, p, ceil, reduce, count_include_pad=True):
    """PyTorch's documented pooling: output size floor/ceil((n + 2p - k) / s) + 1 (the last window
    starting inside the input or its left padding); max over the real entries, the mean divided
    by the window clipped to the padded input (count_include_pad) or by its real entries."""
    n, c, h, w = x.shape
    sizes = []
    for length, kk, ss, pp in zip((h, w), k, s, p):
        o = (length + 2 * pp - kk + (ss - 1 if ceil else 0)) // ss + 1
        if ceil and (o - 1) * ss >= length + pp:
            o -= 1
        sizes.append(o)
    out = np.zeros((n, c) + tuple(sizes))
    for i in range(sizes[0]):
        for j in range(sizes[1]):
            r0, c0 = i * s[0] - p[0], j * s[1] - p[1]
            r1, c1 = r0 + k[0], c0 + k[1]
            window = x[:, :, max(r0, 0):min(r1, h), max(c0, 0):min(c1, w)]
            if reduce == "max":
                out[:, :, i, j] = window.max(axis=(2, 3))
            else:
                if count_include_pad:
                    count = (min(r1, h + p[0]) - r0) * (min(c1, w + p[1]) - c0)
                else:
                    count = window.shape[2] * window.shape[3]
                out[:, :, i, j] = window.sum(axis=(2, 3)) / count
    return out


@pytest.mark.parametrize("k, s, p, ceil", [((3, 3), (2, 2), (1, 1), False), ((3, 3), (2, 2), (1, 1), True),
                                           ((2, 2), (2, 2), (0, 0), True), ((3, 2), (2, 3), (1, 1), True)])
def test_pools_with_padding_and_ceil_mode(k, s, p, ceil):
    x = np.random.default_rng(0).normal(size=(2, 3, 7, 8))
    X = tt.tensor(x, requires_grad=True)
    out = nn.MaxPool2d(k, s, p, ceil_mode=ceil)(X)
    np.testing.assert_allclose(out.data, _np_pool(x, k, s, p, ceil, "max"), rtol=1e-14)
    out.sum().backward()
    assert X.grad.sum() == out.size                  # each window's gradient to one entry
    for include in (True, False):
        avg = nn.AvgPool2d(k, s, p, ceil_mode=ceil, count_include_pad=include)(x)
        np.testing.assert_allclose(avg, _np_pool(x, k, s, p, ceil, "avg", include), rtol=1e-13)
    X.grad = None
    pooled = lambda x: F.avg_pool2d(x, k, s, p, ceil_mode=ceil, count_include_pad=False)   # noqa: E731
    assert tt.gradcheck(lambda x: (pooled(x) ** 2).sum(), X)


def test_pool_errors_and_divisor_override():
    with pytest.raises(ValueError, match="at most half of the kernel size"):
        nn.MaxPool2d(2, padding=2)
    with pytest.raises(ValueError, match="not supported"):
        nn.MaxPool2d(2, dilation=2)
    x = np.ones((1, 1, 4, 4))
    np.testing.assert_allclose(nn.AvgPool2d(2, divisor_override=2)(x), np.full((1, 1, 2, 2), 2.0))


# ----- Embedding(padding_idx) ----------------------------------------------------------------------
def test_embedding_padding_idx_starts_at_zero_and_gets_no_gradient():
    emb = nn.Embedding(6, 3, padding_idx=-1, rng=0, dtype=np.float64)
    assert emb.padding_idx == 5
    np.testing.assert_array_equal(emb.weight.data[5], 0)
    idx = np.array([[5, 2, 5], [1, 5, 2]])
    out = emb(idx)
    np.testing.assert_array_equal(out.data[0, 0], 0)
    (out * np.arange(18.0).reshape(2, 3, 3)).sum().backward()
    np.testing.assert_array_equal(emb.weight.grad[5], 0)
    np.testing.assert_allclose(emb.weight.grad[2], np.arange(3, 6) + np.arange(15, 18))
    emb.weight.data[5] = 7.0                       # a pad row set by hand is used, and stays
    np.testing.assert_array_equal(emb(np.array([5])).data, [[7.0, 7.0, 7.0]])
    opt = tt.optim.SGD(emb.parameters(), lr=1.0)
    opt.zero_grad()
    emb(idx).sum().backward()
    opt.step()
    np.testing.assert_array_equal(emb.weight.data[5], 7.0)
    with pytest.raises(ValueError, match="padding_idx must lie in"):
        nn.Embedding(4, 2, padding_idx=4)


def test_against_pytorch_live():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    x = rng.normal(size=(2, 4, 9, 7))
    conv = nn.Conv2d(4, 6, 3, stride=2, padding=2, dilation=2, groups=2, rng=0, dtype=np.float64)
    ref = torch.nn.Conv2d(4, 6, 3, stride=2, padding=2, dilation=2, groups=2).double()
    ref.load_state_dict({k: torch.tensor(v) for k, v in conv.state_dict().items()})
    np.testing.assert_allclose(conv(x).data, ref(torch.tensor(x)).detach().numpy(), rtol=1e-11, atol=1e-12)
    t = torch.tensor(x)
    np.testing.assert_allclose(nn.AvgPool2d(3, 2, 1, ceil_mode=True)(x),
                               torch.nn.AvgPool2d(3, 2, 1, ceil_mode=True)(t).numpy(), rtol=1e-13)
    np.testing.assert_allclose(nn.MaxPool2d(3, 2, 1, ceil_mode=True)(x),
                               torch.nn.MaxPool2d(3, 2, 1, ceil_mode=True)(t).numpy(), rtol=1e-13)
    p, y = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    np.testing.assert_allclose(nn.SmoothL1Loss(beta=0.7)(p, y),
                               torch.nn.SmoothL1Loss(beta=0.7)(torch.tensor(p), torch.tensor(y)).item())
    logp, q = np.log(rng.dirichlet(np.ones(4), 3)), rng.dirichlet(np.ones(4), 3)
    kl = torch.nn.KLDivLoss(reduction="batchmean")(torch.tensor(logp), torch.tensor(q)).item()
    np.testing.assert_allclose(nn.KLDivLoss(reduction="batchmean")(logp, q), kl)


def test_new_layers_run_on_another_device():
    """The stand-in device of tests/foreign.py (as CuPy: no silent conversion to NumPy)."""
    try:
        from foreign import NAME
    except ImportError:
        import pathlib
        import sys
        sys.path.insert(0, str(pathlib.Path(__file__).parents[1]))
        from foreign import NAME
    from tinytensor import backend
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 2, 3))
    for cls in (nn.LSTM, nn.GRU, nn.RNN):
        m = cls(3, 5, num_layers=2, bidirectional=True, rng=0, dtype=np.float64)
        ref = m(x)[0].data
        m.to(NAME)
        X = tt.tensor(x, device=NAME, requires_grad=True)
        out = m(X)[0]
        (out ** 2).sum().backward()
        assert out.device == NAME and X.grad is not None
        np.testing.assert_allclose(backend.to_host(out.data), ref, rtol=1e-12, atol=1e-14)
    assert nn.LSTMCell(3, 5, rng=0).to(NAME)(tt.tensor(x[0], device=NAME, dtype=np.float32))[0].device == NAME
    img = rng.normal(size=(1, 2, 7, 7))
    X = tt.tensor(img, device=NAME, requires_grad=True)
    for layer in (nn.AvgPool2d(3, 2, 1, ceil_mode=True, count_include_pad=False),
                  nn.MaxPool2d(3, 2, 1, ceil_mode=True),
                  nn.Conv2d(2, 4, 3, dilation=2, groups=2, rng=0, dtype=np.float64)):
        ref = layer(img)
        ref = ref.data if isinstance(ref, tt.Tensor) else ref
        out = layer.to(NAME)(X) if isinstance(layer, nn.Conv2d) else layer(X)
        out.sum().backward()
        np.testing.assert_allclose(backend.to_host(out.data), ref, rtol=1e-12)
    q = np.array([[0.5, 0.0, 0.5]] * 2)
    kl = nn.KLDivLoss(reduction="batchmean")
    loss = kl(tt.tensor(np.ones((2, 3)), device=NAME, requires_grad=True), backend.to_device(q, NAME))
    np.testing.assert_allclose(backend.to_host(loss.data), kl(np.ones((2, 3)), q), rtol=1e-14)
    emb = nn.Embedding(5, 3, padding_idx=0, rng=0).to(NAME)
    emb(backend.to_device(np.array([0, 1, 0]), NAME)).sum().backward()
    np.testing.assert_array_equal(backend.to_host(emb.weight.grad)[0], 0)
