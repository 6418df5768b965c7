"""A CNN on the digits
===================

Train a small CNN on scikit-learn's bundled digits (8x8 images as (N, 1, 8, 8), 10 classes).

    python examples/train_cnn.py                      # a few seconds on one core; >= 98.5% test
    python examples/train_cnn.py --epochs 10          # stop early, checkpointing every epoch ...
    python examples/train_cnn.py --resume             # ... and carry on from the checkpoint

Conv2d(1, 16, 3, padding=1) - ReLU - MaxPool2d(2) - Conv2d(16, 32, 3, padding=1) - ReLU -
MaxPool2d(2) - Flatten - Dropout - Linear(128, 10), trained with AdamW and a cosine learning-rate
schedule. The data (1,797 images, no download) is split 70/10/20 into train/validation/test,
stratified, with pixels scaled to [0, 1]. After every epoch the model, optimizer, schedule, random
generators, curves and best-so-far weights go to --checkpoint (`tt.save`), so `--resume` continues
a stopped run exactly where it was (bit-identical to an uninterrupted run). The weights with the
lowest validation loss are evaluated once on the test set; the curves go to --plot. The last line
printed is the test accuracy.
"""

import os

# One BLAS thread: the matrices are small, and threads would only add overhead and noise.
# This must happen before NumPy is imported.
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["MKL_NUM_THREADS"] = "1"

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402
from tqdm import tqdm  # noqa: E402

import tinytensor as tt  # noqa: E402
from tinytensor import nn  # noqa: E402
from tinytensor.backend import to_device  # noqa: E402

# sphinx-gallery runs the examples from examples/, without __file__
HERE = os.path.dirname(os.path.abspath(__file__)) if "__file__" in globals() else os.getcwd()
sys.path.insert(0, HERE)   # examples/curves.py
from curves import save_curves  # noqa: E402

QUICK = os.environ.get("TINYTENSOR_DOCS_QUICK") == "1"   # the docs build: fewer steps


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--epochs", type=int, default=None,
                   help="stop after this epoch (default: all of --total-epochs)")
    p.add_argument("--total-epochs", type=int, default=2 if QUICK else 40,
                   help="length of the cosine schedule")
    p.add_argument("--lr", type=float, default=1e-2, help="peak learning rate (AdamW)")
    p.add_argument("--weight-decay", type=float, default=1e-2, help="AdamW's decoupled weight decay")
    p.add_argument("--dropout", type=float, default=0.25, help="dropout before the last layer")
    p.add_argument("--shift", type=int, default=1,
                   help="augmentation: shift each training image by up to this many pixels (0: none)")
    p.add_argument("--batch-size", type=int, default=32, help="minibatch size")
    p.add_argument("--seed", type=int, default=0, help="seed for the split, the init and the shuffling")
    p.add_argument("--checkpoint", default="runs/train_cnn.npz", help="checkpoint file, written every epoch")
    p.add_argument("--resume", action="store_true", help="continue from --checkpoint")
    p.add_argument("--plot", default="runs/train_cnn.png", help="where to save the curves (PNG)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--device", default="cpu", help='"cpu" (NumPy) or "cuda" (CuPy: pip install -e ".[gpu]")')
    return p.parse_args(argv)


def load_data(seed):
    """Digits as float32 images (N, 1, 8, 8) in [0, 1]: train, validation and test pairs."""
    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
    X_rest, X_test, y_rest, y_test = train_test_split(X, y, test_size=0.2, stratify=y, random_state=seed)
    X_train, X_val, y_train, y_val = train_test_split(X_rest, y_rest, test_size=0.125,
                                                      stratify=y_rest, random_state=seed)
    return (X_train, y_train), (X_val, y_val), (X_test, y_test)


def random_shifts(xb, shift, rng):
    """Each image moved by its own random (dy, dx) in [-shift, shift], filling with 0: a crop of
    the zero-padded batch, picked from its sliding windows (no loop over images)."""
    if not shift:
        return xb
    n, size = len(xb), xb.shape[-1]
    padded = np.pad(xb, ((0, 0), (0, 0), (shift, shift), (shift, shift)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (size, size), axis=(2, 3))
    dy, dx = rng.integers(0, 2 * shift + 1, (2, n))
    return windows[np.arange(n), :, dy, dx]          # (n, C, size, size)


def make_cnn(rng, dropout):
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1, rng=rng), nn.ReLU(), nn.MaxPool2d(2),    # (N, 16, 4, 4)
        nn.Conv2d(16, 32, 3, padding=1, rng=rng), nn.ReLU(), nn.MaxPool2d(2),   # (N, 32, 2, 2)
        nn.Flatten(), nn.Dropout(dropout, rng=rng), nn.Linear(128, 10, rng=rng))


def evaluate(model, loss_fn, X, y, device="cpu"):
    """(mean loss, accuracy) on the whole set, in eval mode, without recording a tape."""
    model.eval()
    with tt.no_grad():
        logits = model(to_device(X, device))
        predicted = tt.backend.to_host(logits.data).argmax(axis=1)
        return loss_fn(logits, to_device(y, device)).item(), float(np.mean(predicted == y))


def save_plot(history, path):
    save_curves(history, path, "CNN on digits (tinytensor)")


def main(argv=None):
    args = parse_args(argv)
    stop = args.total_epochs if args.epochs is None else min(args.epochs, args.total_epochs)
    rng = np.random.default_rng(args.seed)    # one generator: init, then every epoch's order
    (X_train, y_train), (X_val, y_val), (X_test, y_test) = load_data(args.seed)
    model = make_cnn(rng, args.dropout).to(args.device)
    loss_fn = nn.CrossEntropyLoss()
    opt = tt.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    sched = tt.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.total_epochs)
    history = {"train_loss": [], "train_acc": [], "val_loss": [], "val_acc": []}
    best = {"loss": np.inf, "epoch": 0, "state": None}
    start_epoch = 0

    if args.resume:
        ckpt = tt.load(args.checkpoint)
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        sched.load_state_dict(ckpt["scheduler"])
        rng.bit_generator.state = ckpt["rng"]            # the shuffling and dropout continue too
        history, best, start_epoch = ckpt["history"], ckpt["best"], ckpt["epoch"]
        print(f"resumed from {args.checkpoint} after epoch {start_epoch}")

    n_batches = -(-len(X_train) // args.batch_size)
    timer = time.perf_counter()
    for epoch in range(start_epoch + 1, stop + 1):
        model.train()
        total_loss = total_correct = seen = 0
        bar = tqdm(total=n_batches, desc=f"epoch {epoch:>3}/{args.total_epochs}", unit="batch",
                   disable=args.quiet, dynamic_ncols=True)
        for xb, yb in tt.data.minibatches(X_train, y_train, args.batch_size, rng=rng):
            # shifts drawn on the host (the same run on every device), the batch then moved
            logits = model(to_device(random_shifts(xb, args.shift, rng), args.device))
            loss = loss_fn(logits, to_device(yb, args.device))   # 1. forward propagation
            opt.zero_grad()
            loss.backward()                     # 2. backward propagation
            opt.step()                          # 3. weight update
            total_loss += loss.item() * len(yb)
            total_correct += int(np.sum(tt.backend.to_host(logits.data).argmax(axis=1) == yb))
            seen += len(yb)
            bar.set_postfix(loss=f"{total_loss / seen:.4f}", acc=f"{total_correct / seen:.4f}", refresh=False)
            bar.update()
        sched.step()
        val_loss, val_acc = evaluate(model, loss_fn, X_val, y_val, args.device)
        bar.set_postfix(loss=f"{total_loss / seen:.4f}", acc=f"{total_correct / seen:.4f}",
                        val_loss=f"{val_loss:.4f}", val_acc=f"{val_acc:.4f}")
        bar.close()
        for key, value in zip(history, (total_loss / seen, total_correct / seen, val_loss, val_acc)):
            history[key].append(value)
        if val_loss < best["loss"]:
            best = {"loss": val_loss, "epoch": epoch, "state": model.state_dict()}
        os.makedirs(os.path.dirname(args.checkpoint) or ".", exist_ok=True)
        tt.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
                 "rng": rng.bit_generator.state, "history": history, "best": best, "epoch": epoch},
                args.checkpoint)
    elapsed = time.perf_counter() - timer
    ran = stop - start_epoch

    model.load_state_dict(best["state"])
    _, test_acc = evaluate(model, loss_fn, X_test, y_test, args.device)
    save_plot(history, args.plot)
    if ran:
        print(f"trained {ran} epochs in {elapsed:.2f} s ({elapsed / ran * 1000:.0f} ms/epoch); "
              f"checkpoint in {args.checkpoint}")
    print(f"kept epoch {best['epoch']} (validation loss {best['loss']:.4f}, accuracy "
          f"{history['val_acc'][best['epoch'] - 1]:.4f}); curves saved to {args.plot}")
    print(f"test accuracy: {test_acc:.4f}")
    return test_acc


if __name__ == "__main__":
    main()
