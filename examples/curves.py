"""The training curves both digits examples save: loss (log scale) and accuracy per epoch, for the
training and validation splits. Imported by examples/train_mlp.py and examples/train_cnn.py."""

import os

import numpy as np


def save_curves(history, path, title):
    """Save history's train/val loss and accuracy, one point per epoch, as a PNG at `path`."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    epochs = np.arange(1, len(history["train_loss"]) + 1)
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(10, 4))
    for split in ("train", "val"):
        ax_loss.plot(epochs, history[f"{split}_loss"], label=split)
        ax_acc.plot(epochs, history[f"{split}_acc"], label=split)
    ax_loss.set(xlabel="epoch", ylabel="cross-entropy loss", title="loss", yscale="log")
    ax_acc.set(xlabel="epoch", ylabel="accuracy", title="accuracy")
    for ax in (ax_loss, ax_acc):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
