"""nn losses (issue 12): values and gradients (both modes) against NumPy references of PyTorch's
formulas, every reduction, float32 and float64, the stability of BCEWithLogitsLoss at huge logits,
and, when torch is installed, against torch itself."""

import numpy as np
import pytest
import scipy.special

import tinytensor as tt
from tinytensor import nn

REDUCE = {"mean": np.mean, "sum": np.sum, "none": lambda r: r}


def arr(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def ce_reference(z, y, weight=None, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
    """PyTorch's cross_entropy, written out: class axis last."""
    smoothing = label_smoothing
    logp = scipy.special.log_softmax(z, axis=-1)
    C = z.shape[-1]
    w = np.ones(C) if weight is None else weight
    if y.dtype.kind in "iu":
        keep = y != ignore_index
        safe = np.where(keep, y, 0)
        wy = w[safe] * keep
        nll = -np.take_along_axis(logp, safe[..., None], -1)[..., 0] * wy
        smooth = -(logp * w).sum(-1) * keep
        if reduction == "mean":
            return (1 - smoothing) * nll.sum() / wy.sum() + smoothing / C * smooth.sum() / wy.sum()
        rows = (1 - smoothing) * nll + smoothing / C * smooth
        return REDUCE[reduction](rows)
    y = y * (1 - smoothing) + smoothing / C
    rows = -(logp * y * w).sum(-1)
    return REDUCE[reduction](rows)


CE_OPTIONS = [dict(), dict(weight=np.array([0.5, 2.0, 1.0, 3.0])), dict(label_smoothing=0.1),
              dict(weight=np.array([0.5, 2.0, 1.0, 3.0]), label_smoothing=0.2)]


@pytest.mark.parametrize("options", CE_OPTIONS)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("targets", ["indices", "ignored", "probabilities"])
def test_cross_entropy_options_match_reference(options, reduction, targets):
    z = arr((6, 4)) * 2
    if targets == "probabilities":
        y = np.random.default_rng(1).dirichlet(np.ones(4), 6)
    else:
        y = np.array([0, 1, 3, 2, 2, 1] if targets == "indices" else [0, -100, 3, 2, -100, 1])
    loss = nn.CrossEntropyLoss(reduction=reduction, **options)
    np.testing.assert_allclose(loss(z, y).data, ce_reference(z, y, reduction=reduction, **options),
                               rtol=1e-12, atol=1e-14)
    f = (lambda z: loss(z, y)) if reduction != "none" else (lambda z: loss(z, y) * np.arange(1, 7))
    assert tt.gradcheck(f, z)
    z32 = tt.tensor(z, dtype=np.float32, requires_grad=True)
    out = loss(z32, y if targets != "probabilities" else y)          # float64 targets
    assert out.dtype == np.float32


def test_cross_entropy_ignore_index_rows_get_no_gradient_and_custom_index():
    z = tt.tensor(arr((3, 4)), requires_grad=True)
    nn.CrossEntropyLoss(ignore_index=2)(z, np.array([2, 1, 0])).backward()
    np.testing.assert_array_equal(z.grad[0], 0)
    np.testing.assert_allclose(z.grad.sum(axis=1), 0, atol=1e-12)


def test_cross_entropy_pytorch_k_dimensional_layout():
    z, y = arr((2, 4, 5)), np.random.default_rng(0).integers(0, 4, (2, 5))
    expected = ce_reference(np.moveaxis(z, 1, -1), y)
    np.testing.assert_allclose(nn.CrossEntropyLoss()(z, y).item(), expected, rtol=1e-12)
    np.testing.assert_allclose(nn.CrossEntropyLoss(label_smoothing=0.1)(z, y).item(),
                               ce_reference(np.moveaxis(z, 1, -1), y, label_smoothing=0.1), rtol=1e-12)


def test_cross_entropy_soft_targets_that_require_grad_get_their_gradient():
    z = arr((3, 4))
    p = np.random.default_rng(2).dirichlet(np.ones(4), 3)
    for options in (dict(), dict(label_smoothing=0.1, weight=np.array([1.0, 2.0, 0.5, 1.0]))):
        assert tt.gradcheck(lambda z, p: nn.CrossEntropyLoss(**options)(z, p), z, p)


def test_cross_entropy_old_positional_reduction_still_works():
    z, y = arr((3, 4)), np.array([0, 1, 2])
    expected = nn.CrossEntropyLoss(reduction="sum")(z, y).item()
    assert nn.CrossEntropyLoss("sum")(z, y).item() == pytest.approx(expected)


def test_cross_entropy_errors():
    with pytest.raises(ValueError, match="one entry per class"):
        nn.CrossEntropyLoss(weight=np.ones(3))(arr((2, 4)), np.array([0, 1]))
    with pytest.raises(IndexError, match=r"\[0, 4\)"):
        nn.CrossEntropyLoss(label_smoothing=0.1)(arr((2, 4)), np.array([0, 4]))
    with pytest.raises(ValueError, match="label_smoothing"):
        nn.CrossEntropyLoss(label_smoothing=2.0)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss_with_weights_and_ignore_index(reduction):
    logp = scipy.special.log_softmax(arr((5, 3)), axis=1)
    y = np.array([0, 2, -100, 1, 2])
    w = np.array([1.0, 2.0, 0.5])
    expected = ce_reference(logp, y, weight=w, reduction=reduction)   # log_softmax(logp) == logp
    np.testing.assert_allclose(nn.NLLLoss(weight=w, reduction=reduction)(logp, y).data, expected, rtol=1e-12)
    loss = nn.NLLLoss(weight=w, reduction=reduction)
    assert tt.gradcheck(lambda p: loss(p, y) if reduction != "none" else loss(p, y) * np.arange(5), logp)
    with pytest.raises(TypeError, match="integer"):
        nn.NLLLoss()(logp, np.zeros(5))


def bce_logits_reference(x, y, pos_weight=1.0, weight=1.0):
    log_sig, log_one_minus = -np.logaddexp(0, -x), -np.logaddexp(0, x)
    return -weight * (pos_weight * y * log_sig + (1 - y) * log_one_minus)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("pos_weight", [None, np.array([0.5, 3.0])])
def test_bce_with_logits_matches_reference(reduction, pos_weight):
    x, y = arr((4, 2)) * 3, np.random.default_rng(1).uniform(0, 1, (4, 2))
    w = np.array([[1.0, 2.0]])
    loss = nn.BCEWithLogitsLoss(weight=w, reduction=reduction, pos_weight=pos_weight)
    pw = 1.0 if pos_weight is None else pos_weight
    np.testing.assert_allclose(loss(x, y).data, REDUCE[reduction](bce_logits_reference(x, y, pw, w)),
                               rtol=1e-12)
    assert tt.gradcheck(lambda x: loss(x, y) * (1 if reduction != "none" else np.arange(8).reshape(4, 2)), x)


def test_bce_with_logits_is_finite_and_exact_at_huge_logits():
    x = tt.tensor([-1e4, -40.0, -3.0, 0.0, 40.0, 1e4, 1e4, -1e4], requires_grad=True)
    y = np.array([1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0])
    loss = nn.BCEWithLogitsLoss(reduction="none")(x, y)
    expected = bce_logits_reference(x.data, y)
    np.testing.assert_allclose(loss.data, expected, rtol=1e-12)
    assert np.isfinite(loss.data).all()
    loss.sum().backward()
    np.testing.assert_allclose(x.grad, scipy.special.expit(x.data) - y, rtol=1e-12, atol=1e-300)
    x32 = tt.tensor([-1e4, 40.0, 1e4], dtype=np.float32, requires_grad=True)
    out = nn.BCEWithLogitsLoss()(x32, np.array([1.0, 0.0, 1.0]))
    out.backward()
    assert out.dtype == np.float32 and np.isfinite(out.item()) and np.isfinite(x32.grad).all()


def test_bce_loss_matches_reference_and_is_finite_at_0_and_1():
    p = np.array([0.0, 1e-8, 0.3, 0.9, 1.0])
    y = np.array([0.0, 1.0, 0.5, 0.0, 1.0])
    out = nn.BCELoss(reduction="none")(p, y)
    expected = -(y * np.maximum(np.log(np.maximum(p, 1e-300)), -100)
                 + (1 - y) * np.maximum(np.log(np.maximum(1 - p, 1e-300)), -100))
    np.testing.assert_allclose(out.data, expected, rtol=1e-12)
    q = tt.tensor(p, requires_grad=True)
    nn.BCELoss()(q, y).backward()
    np.testing.assert_allclose(q.grad, (p - y) / np.maximum(p * (1 - p), 1e-12) / 5, rtol=1e-12)
    inner = np.array([0.2, 0.5, 0.7])
    assert tt.gradcheck(lambda p: nn.BCELoss(weight=np.array([1.0, 2.0, 3.0]))(p, np.array([0.0, 1.0, 0.3])),
                        inner)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_l1_and_huber_match_reference(reduction):
    pred, target = arr((3, 4)) * 2, arr((3, 4), seed=1)
    d = pred - target
    huber = np.where(np.abs(d) <= 0.7, 0.5 * d * d, 0.7 * (np.abs(d) - 0.35))
    reduce = REDUCE[reduction]
    out = nn.HuberLoss(reduction, delta=0.7)(pred, target)
    np.testing.assert_allclose(out.data, reduce(huber), rtol=1e-12)
    np.testing.assert_allclose(nn.L1Loss(reduction)(pred, target).data, reduce(np.abs(d)), rtol=1e-12)
    weights = 1 if reduction != "none" else np.arange(12).reshape(3, 4)
    for loss in (nn.HuberLoss(reduction, delta=0.7), nn.L1Loss(reduction)):
        assert tt.gradcheck(lambda p: loss(p, target) * weights, pred)
    with pytest.raises(ValueError, match="no broadcasting"):
        nn.L1Loss()(pred, target[0])


def test_huber_gradient_at_zero_and_at_delta():
    pred = tt.tensor([0.0, 1.0, -1.0, 2.0], requires_grad=True)
    nn.HuberLoss(reduction="sum")(pred, np.zeros(4)).backward()
    np.testing.assert_array_equal(pred.grad, [0, 1, -1, 1])


def test_losses_match_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    z = rng.standard_normal((6, 4)) * 3
    y = np.array([0, 1, 3, -100, 2, 1])
    w = rng.uniform(0.5, 2, 4)
    probs = rng.uniform(0.01, 0.99, (6, 4))
    binary = rng.uniform(0, 1, (6, 4))
    cases = [
        (nn.CrossEntropyLoss(weight=w, label_smoothing=0.15),
         torch.nn.CrossEntropyLoss(weight=torch.tensor(w), label_smoothing=0.15), z, y),
        (nn.CrossEntropyLoss(reduction="sum", label_smoothing=0.3),
         torch.nn.CrossEntropyLoss(reduction="sum", label_smoothing=0.3), z,
         binary / binary.sum(1, keepdims=True)),
        (nn.NLLLoss(weight=w), torch.nn.NLLLoss(weight=torch.tensor(w)), z, y),
        (nn.BCEWithLogitsLoss(pos_weight=w), torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor(w)),
         z * 20, binary),
        (nn.BCELoss(), torch.nn.BCELoss(), probs, binary),
        (nn.HuberLoss(delta=0.5), torch.nn.HuberLoss(delta=0.5), z, binary),
        (nn.L1Loss(reduction="sum"), torch.nn.L1Loss(reduction="sum"), z, binary),
        (nn.MSELoss(), torch.nn.MSELoss(), z, binary),
    ]
    for ours, theirs, inp, target in cases:
        a = tt.tensor(inp, requires_grad=True)
        b = torch.tensor(inp, requires_grad=True)
        la, lb = ours(a, target), theirs(b, torch.tensor(target))
        la.backward()
        lb.backward()
        np.testing.assert_allclose(la.item(), lb.item(), rtol=1e-12, err_msg=repr(ours))
        np.testing.assert_allclose(a.grad, b.grad.numpy(), rtol=1e-10, atol=1e-14, err_msg=repr(ours))


def test_functional_spellings_equal_the_modules():
    F = nn.functional
    z, y = arr((4, 3)), np.array([0, 2, 1, 1])
    t = np.random.default_rng(3).uniform(size=(4, 3))
    w = np.array([1.0, 2.0, 0.5])
    pairs = [
        (F.cross_entropy(z, y, weight=w, label_smoothing=0.1),
         nn.CrossEntropyLoss(w, label_smoothing=0.1)(z, y)),
        (F.nll_loss(z, y, reduction="sum"), nn.NLLLoss(reduction="sum")(z, y)),
        (F.binary_cross_entropy_with_logits(z, t, pos_weight=w), nn.BCEWithLogitsLoss(pos_weight=w)(z, t)),
        (F.binary_cross_entropy(t, t), nn.BCELoss()(t, t)),
        (F.mse_loss(z, t), nn.MSELoss()(z, t)), (F.l1_loss(z, t), nn.L1Loss()(z, t)),
        (F.huber_loss(z, t, delta=0.5), nn.HuberLoss(delta=0.5)(z, t)),
        (F.log_softmax(z, dim=0), nn.LogSoftmax(dim=0)(z)), (F.softmax(z), nn.Softmax()(z)),
        (F.relu(z), nn.ReLU()(z)),
    ]
    for a, b in pairs:
        np.testing.assert_array_equal(np.asarray(a.data), np.asarray(b.data))
    x = tt.tensor(np.ones((10, 10)), requires_grad=True)
    assert F.dropout(x, 0.5, training=False) is x
    np.testing.assert_array_equal(F.dropout(x, 0.5, rng=0).data, nn.Dropout(0.5, rng=0)(x).data)
