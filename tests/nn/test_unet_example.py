"""examples/unet_denoiser.py: the U-Net (Conv2d, ConvTranspose2d, GroupNorm, F.interpolate, skip
connections) trains, is differentiable in both modes, and, when PyTorch is installed, takes the
same 20 float64 AdamW steps as the same network in PyTorch from the same weights."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import nn

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "unet_denoiser.py"


def _example():
    spec = importlib.util.spec_from_file_location("unet_denoiser", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _batches(n_steps, seed=0):
    rng = np.random.default_rng(seed)
    clean = rng.uniform(size=(n_steps, 8, 1, 8, 8))
    return [(c + 0.2 * rng.standard_normal(c.shape), c) for c in clean]


def test_unet_trains_and_is_differentiable():
    U = _example()
    model = U.make_unet(np.random.default_rng(0), dtype=np.float64, width=8)
    keys = list(model.state_dict())
    assert keys[:6] == [
        "enc1.conv.weight",
        "enc1.conv.bias",
        "enc1.norm.weight",
        "enc1.norm.bias",
        "enc2.conv.weight",
        "enc2.conv.bias",
    ]
    assert "up1.weight" in keys and model.up1.weight.shape == (16, 8, 2, 2)
    opt = tt.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for x, y in _batches(20):
        loss = nn.MSELoss()(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    x = tt.tensor(_batches(1)[0][0][:1], requires_grad=True)
    assert tt.gradcheck(lambda a: (model(a) ** 2).sum(), x, atol=1e-6)


def test_unet_main_runs():
    U = _example()
    noisy, denoised = U.main(["--epochs", "1", "--limit", "128", "--batch-size", "32", "--width", "4"])
    assert np.isfinite(denoised) and noisy > 0


def test_unet_equals_pytorch_for_20_adamw_steps():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed: the live comparison is skipped")
    U = _example()
    model = U.make_unet(np.random.default_rng(0), dtype=np.float64, width=8)
    ref = U.make_torch_unet(torch, 8).double()
    assert list(ref.state_dict()) == list(model.state_dict())  # the same keys, the same order
    ref.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in model.state_dict().items()})
    opt = tt.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-2)
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=3e-3, weight_decay=1e-2)
    for x, y in _batches(20):
        loss = nn.MSELoss()(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        ref_loss = torch.nn.functional.mse_loss(ref(torch.from_numpy(x)), torch.from_numpy(y))
        ref_opt.zero_grad()
        ref_loss.backward()
        ref_opt.step()
        np.testing.assert_allclose(loss.item(), ref_loss.item(), rtol=1e-10)
    for k, v in ref.state_dict().items():
        np.testing.assert_allclose(model.state_dict()[k], v.numpy(), rtol=1e-8, atol=1e-10)
