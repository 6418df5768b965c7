"""Binary classification with early stopping
=========================================

Binary classification of scikit-learn's breast-cancer data (569 tumours, 30 features) with
BCEWithLogitsLoss, a learning-rate schedule and early stopping on the validation loss.

    python examples/binary_classification.py            # a second or two; 96-98% test accuracy
    python examples/binary_classification.py --patience 5 --hidden 32

The data (no download) is split 60/20/20 into train/validation/test, stratified, and standardised
with the training set's statistics. A small MLP (30 - hidden - 1, GELU, dropout) outputs one logit
per tumour; the loss is nn.BCEWithLogitsLoss (finite with exact gradients for any logit). Adam's
learning rate is cut by ReduceLROnPlateau when the validation loss stalls, and training stops once
it has not improved for --patience epochs; the best weights are restored and evaluated once on the
test set. The last line printed is the test accuracy.
"""

import os

os.environ["OMP_NUM_THREADS"] = "1"     # small matrices: one BLAS thread, set before NumPy loads
os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["MKL_NUM_THREADS"] = "1"

import argparse  # noqa: E402

import numpy as np  # noqa: E402
from sklearn.datasets import load_breast_cancer  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402
from tqdm import tqdm  # noqa: E402

import tinytensor as tt  # noqa: E402
from tinytensor import nn  # noqa: E402

QUICK = os.environ.get("TINYTENSOR_DOCS_QUICK") == "1"   # the docs build: fewer steps


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--epochs", type=int, default=15 if QUICK else 200,
                   help="at most this many epochs")
    p.add_argument("--patience", type=int, default=15,
                   help="stop after this many epochs without a better validation loss")
    p.add_argument("--lr", type=float, default=1e-3, help="initial learning rate (Adam)")
    p.add_argument("--hidden", type=int, default=16, help="hidden units")
    p.add_argument("--dropout", type=float, default=0.2, help="dropout after the hidden layer")
    p.add_argument("--batch-size", type=int, default=32, help="minibatch size")
    p.add_argument("--seed", type=int, default=0, help="seed for the split, the init and the shuffling")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p.parse_args(argv)


def load_data(seed):
    X, y = load_breast_cancer(return_X_y=True)
    X_rest, X_test, y_rest, y_test = train_test_split(X, y, test_size=0.2, stratify=y, random_state=seed)
    X_train, X_val, y_train, y_val = train_test_split(X_rest, y_rest, test_size=0.25, stratify=y_rest,
                                                      random_state=seed)
    mean, std = X_train.mean(axis=0), X_train.std(axis=0)
    scale = lambda a: ((a - mean) / std).astype(np.float32)
    as_column = lambda t: t.astype(np.float32)[:, None]        # targets (n, 1), like the logits
    return ((scale(X_train), as_column(y_train)), (scale(X_val), as_column(y_val)),
            (scale(X_test), as_column(y_test)))


def evaluate(model, loss_fn, X, y):
    model.eval()
    with tt.no_grad():
        logits = model(X)
        return loss_fn(logits, y).item(), float(np.mean((logits.data > 0) == (y > 0.5)))


def main(argv=None):
    args = parse_args(argv)
    rng = np.random.default_rng(args.seed)
    (X_train, y_train), (X_val, y_val), (X_test, y_test) = load_data(args.seed)
    model = nn.Sequential(nn.Linear(X_train.shape[1], args.hidden, rng=rng), nn.GELU(),
                          nn.Dropout(args.dropout, rng=rng), nn.Linear(args.hidden, 1, rng=rng))
    loss_fn = nn.BCEWithLogitsLoss()
    opt = tt.optim.Adam(model.parameters(), lr=args.lr)
    sched = tt.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=5)
    best_loss, best_state, best_epoch, waited = np.inf, None, 0, 0
    bar = tqdm(range(1, args.epochs + 1), disable=args.quiet, unit="epoch", dynamic_ncols=True)
    for epoch in bar:
        model.train()
        for xb, yb in tt.data.minibatches(X_train, y_train, args.batch_size, rng=rng):
            loss = loss_fn(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
        val_loss, val_acc = evaluate(model, loss_fn, X_val, y_val)
        sched.step(val_loss)
        bar.set_postfix(val_loss=f"{val_loss:.4f}", val_acc=f"{val_acc:.4f}",
                        lr=f"{sched.get_last_lr()[0]:.1e}")
        if val_loss < best_loss:
            best_loss, best_state, best_epoch, waited = val_loss, model.state_dict(), epoch, 0
        else:
            waited += 1
            if waited >= args.patience:
                break
    bar.close()
    model.load_state_dict(best_state)
    _, test_acc = evaluate(model, loss_fn, X_test, y_test)
    print(f"stopped after epoch {epoch}; kept epoch {best_epoch} (validation loss {best_loss:.4f}); "
          f"final lr {sched.get_last_lr()[0]:.1e}")
    print(f"test accuracy: {test_acc:.4f}")
    return test_acc


if __name__ == "__main__":
    main()
