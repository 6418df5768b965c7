"""A U-Net denoiser on the digits
===============================

A small U-Net that removes Gaussian noise from scikit-learn's bundled digits (8x8 images).

    python examples/unet_denoiser.py                  # about a minute on one core
    python examples/unet_denoiser.py --epochs 3       # a quick look

The network, written as in PyTorch: two strided convolutions down (8x8 -> 4x4 -> 2x2), a bilinear
`F.interpolate` up to 4x4 joined with the 4x4 features (a skip connection), a `ConvTranspose2d` up
to 8x8 joined with the 8x8 features (the other skip), GroupNorm and SiLU after each convolution,
and a 1x1 convolution predicting the noise, which is subtracted from the input. Trained with AdamW
and a cosine schedule on the mean squared error between denoised and clean images; each batch
draws its own noise (sigma in [0.1, --sigma]). Prints the test error of the noisy input and of the
denoised output at sigma = --sigma; the last line is the denoised test MSE.

`make_unet(rng, dtype)` builds the model; tests/nn/test_unet_example.py trains it for a few steps
and, when PyTorch is installed, checks 20 float64 AdamW steps against the same network in PyTorch
from the same weights.
"""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # small matrices: one BLAS thread
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import tinytensor as tt  # noqa: E402
from tinytensor import nn  # noqa: E402
from tinytensor.nn import functional as F  # noqa: E402


class ConvBlock(nn.Module):
    """Conv2d -> GroupNorm -> SiLU."""

    def __init__(self, cin, cout, rng, dtype, stride=1):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, rng=rng, dtype=dtype)
        self.norm = nn.GroupNorm(4, cout, dtype=dtype)
        self.act = nn.SiLU()

    def forward(self, x):
        return self.act(self.norm(self.conv(x)))


class UNet(nn.Module):
    def __init__(self, rng=None, dtype=np.float32, width=16):
        super().__init__()
        w = width
        self.enc1 = ConvBlock(1, w, rng, dtype)  # (w, 8, 8)
        self.enc2 = ConvBlock(w, 2 * w, rng, dtype, stride=2)  # (2w, 4, 4)
        self.enc3 = ConvBlock(2 * w, 2 * w, rng, dtype, stride=2)  # (2w, 2, 2)
        self.dec2 = ConvBlock(4 * w, 2 * w, rng, dtype)  # interpolate(enc3) ++ enc2
        self.up1 = nn.ConvTranspose2d(2 * w, w, 2, stride=2, rng=rng, dtype=dtype)  # (w, 8, 8)
        self.dec1 = ConvBlock(2 * w, w, rng, dtype)  # up1 ++ enc1
        self.head = nn.Conv2d(w, 1, 1, rng=rng, dtype=dtype)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(e1)
        e3 = self.enc3(e2)
        d2 = self.dec2(
            tt.cat([F.interpolate(e3, scale_factor=2, mode="bilinear", align_corners=False), e2], dim=1)
        )
        d1 = self.dec1(tt.cat([self.up1(d2), e1], dim=1))
        return x - self.head(d1)  # the predicted noise removed


def make_unet(rng=None, dtype=np.float32, width=16):
    return UNet(rng, dtype, width)


def make_torch_unet(torch, width=16):
    """The same network in PyTorch (the same state_dict keys and order), for the comparisons:
    tests/nn/test_unet_example.py (20 AdamW steps) and benchmarks/bench_unet.py (the step's time)."""
    tnn, tF = torch.nn, torch.nn.functional

    class TorchBlock(tnn.Module):
        def __init__(self, cin, cout, stride=1):
            super().__init__()
            self.conv = tnn.Conv2d(cin, cout, 3, stride=stride, padding=1)
            self.norm = tnn.GroupNorm(4, cout)
            self.act = tnn.SiLU()

        def forward(self, x):
            return self.act(self.norm(self.conv(x)))

    class TorchUNet(tnn.Module):
        def __init__(self, w):
            super().__init__()
            self.enc1 = TorchBlock(1, w)
            self.enc2 = TorchBlock(w, 2 * w, stride=2)
            self.enc3 = TorchBlock(2 * w, 2 * w, stride=2)
            self.dec2 = TorchBlock(4 * w, 2 * w)
            self.up1 = tnn.ConvTranspose2d(2 * w, w, 2, stride=2)
            self.dec1 = TorchBlock(2 * w, w)
            self.head = tnn.Conv2d(w, 1, 1)

        def forward(self, x):
            e1 = self.enc1(x)
            e2 = self.enc2(e1)
            e3 = self.enc3(e2)
            up = tF.interpolate(e3, scale_factor=2, mode="bilinear", align_corners=False)
            d2 = self.dec2(torch.cat([up, e2], dim=1))
            d1 = self.dec1(torch.cat([self.up1(d2), e1], dim=1))
            return x - self.head(d1)

    return TorchUNet(width)


def load_digits_images(seed, dtype=np.float32):
    """The 1,797 digits as (N, 1, 8, 8) in [0, 1], split 80/20 into train and test."""
    from sklearn.datasets import load_digits

    X = (load_digits().data / 16.0).astype(dtype).reshape(-1, 1, 8, 8)
    order = np.random.default_rng(seed).permutation(len(X))
    cut = int(0.8 * len(X))
    return X[order[:cut]], X[order[cut:]]


def noisy(x, sigma, rng):
    """x plus Gaussian noise of standard deviation sigma (a number, or one per image)."""
    sigma = np.asarray(sigma, x.dtype).reshape(-1, 1, 1, 1) if np.ndim(sigma) else sigma
    return (x + sigma * rng.standard_normal(x.shape)).astype(x.dtype)


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="A small U-Net denoising the digits",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--sigma", type=float, default=0.3, help="the largest training noise, and the test noise")
    p.add_argument("--width", type=int, default=16, help="channels at full resolution")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--limit", type=int, default=None, help="use only this many training images")
    args = p.parse_args(argv)
    if os.environ.get("TINYTENSOR_DOCS_QUICK") == "1":   # the docs build: a quick look
        args.epochs, args.limit = 2, args.limit or 256
    return args


def main(argv=None):
    args = parse_args(argv)
    rng = np.random.default_rng(args.seed)
    X_train, X_test = load_digits_images(args.seed)
    if args.limit:
        X_train = X_train[: args.limit]
    model = make_unet(rng, width=args.width)
    loss_fn = nn.MSELoss()
    opt = tt.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    sched = tt.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.epochs)
    steps, start = 0, time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        model.train()
        total = seen = 0
        for xb, _ in tt.data.minibatches(X_train, np.zeros(len(X_train)), args.batch_size, rng=rng):
            sigma = rng.uniform(0.1, args.sigma, len(xb))
            loss = loss_fn(model(noisy(xb, sigma, rng)), xb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(xb)
            seen += len(xb)
            steps += 1
        sched.step()
        print(f"epoch {epoch:>3}: train mse {total / seen:.5f}")
    elapsed = time.perf_counter() - start
    model.eval()
    test_in = noisy(X_test, args.sigma, np.random.default_rng(args.seed + 1))
    with tt.no_grad():
        out = model(test_in).data
    noisy_mse = float(np.mean((test_in - X_test) ** 2))
    denoised_mse = float(np.mean((out - X_test) ** 2))
    per_step = elapsed / max(steps, 1) * 1e3
    print(f"{steps} steps in {elapsed:.1f} s ({per_step:.1f} ms/step, batch {args.batch_size})")
    print(f"test mse at sigma {args.sigma}: noisy {noisy_mse:.5f}, denoised {denoised_mse:.5f}")
    return noisy_mse, denoised_mse


if __name__ == "__main__":
    main()
