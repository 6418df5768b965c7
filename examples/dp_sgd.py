"""Differentially private SGD on the digits
==========================================

DP-SGD (Abadi et al. 2016) on the digits MLP, with tt.vmap's per-example gradients.

    python examples/dp_sgd.py                 # DP-SGD and plain SGD, 64-256-128-10 tanh, ~15 s
    python examples/dp_sgd.py --quick         # a few seconds (the test's settings)
    python examples/dp_sgd.py --noise 0.0 --clip 1e9     # no privacy: DP-SGD's step is SGD's

Each step of DP-SGD (Algorithm 1 of Abadi et al.)::

  1. per-example gradients g_i of the loss at the current parameters, all at once:
     tt.vmap(tt.grad(loss), in_axes=(None, 0, 0))(params, xb, yb) -> {name: (B, *shape)};
  2. clip each example's whole gradient (all parameters together) to L2 norm at most C:
     g_i <- g_i / max(1, ||g_i|| / C);
  3. add Gaussian noise N(0, (sigma C)^2 I) to their sum and divide by the batch size;
  4. a plain SGD step with that gradient.

Plain SGD with the same model, initialisation, batches and learning rate is trained alongside,
and both test accuracies are printed (the last two lines).

The privacy accounting (the moments accountant) is left out: --noise (sigma) and --clip (C) are
the mechanism's knobs, and for a fixed sampling rate and number of steps a larger sigma buys a
smaller epsilon. Batches here are shuffled partitions of the training set, not the Poisson
subsampling the accountant's bound assumes.
"""

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = "1"          # before NumPy loads: the matrices are small

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

import tinytensor as tt  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="DP-SGD on the digits MLP with tt.vmap per-example gradients",
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--clip", type=float, default=1.0, help="C: the largest per-example gradient norm")
    p.add_argument("--noise", type=float, default=1.0, help="sigma: noise std as a multiple of C")
    p.add_argument("--hidden", type=int, nargs="+", default=[256, 128])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="2 epochs, a 32-unit hidden layer")
    args = p.parse_args(argv)
    if args.quick or os.environ.get("TINYTENSOR_DOCS_QUICK") == "1":   # the docs build: quick too
        args.epochs, args.hidden = 2, [32]
    return args


def load_data(seed):
    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2, stratify=y, random_state=seed)
    mean, std = X_train.mean(0), X_train.std(0)
    std[std == 0] = 1
    return ((X_train - mean) / std, y_train), ((X_test - mean) / std, y_test)


def init_params(sizes, rng):
    params = {}
    for i, (m, n) in enumerate(zip(sizes, sizes[1:])):
        params[f"W{i}"] = rng.uniform(-1, 1, (m, n)) / np.sqrt(m)
        params[f"b{i}"] = np.zeros(n)
    return params


def logits(p, x):
    """The MLP on one example (64,) or a batch (B, 64): tanh hidden layers, linear output."""
    n = len(p) // 2
    h = x
    for i in range(n):
        h = h @ p[f"W{i}"] + p[f"b{i}"]
        if i < n - 1:
            h = tt.tanh(h)
    return h


def loss(p, x, y):
    return tt.softmax_cross_entropy(logits(p, x), y)


per_example_grads = tt.vmap(tt.grad(loss), in_axes=(None, 0, 0))
batch_grad = tt.grad(loss)


def private_gradient(params, xb, yb, clip, noise, rng):
    """Clipped per-example gradients, summed, noised, averaged (steps 1-3 above)."""
    g = per_example_grads(params, xb, yb)                       # {name: (B, *shape)}
    B = len(xb)
    norms = np.sqrt(sum(np.sum(v.reshape(B, -1) ** 2, axis=1) for v in g.values()))
    scale = 1.0 / np.maximum(1.0, norms / clip)                  # (B,)
    out = {}
    for name, v in g.items():
        total = np.tensordot(scale, v, axes=1)                    # sum_i scale_i g_i
        out[name] = (total + noise * clip * rng.standard_normal(total.shape)) / B
    return out


def accuracy(params, X, y):
    with tt.no_grad():
        return float((np.argmax(logits(params, X), axis=1) == y).mean())


def main(argv=None):
    args = parse_args(argv)
    (X, y), (X_test, y_test) = load_data(args.seed)
    rng = np.random.default_rng(args.seed)
    sizes = [64, *args.hidden, 10]
    private = init_params(sizes, rng)
    plain = {k: v.copy() for k, v in private.items()}
    noise_rng = np.random.default_rng(args.seed + 1)
    start = time.perf_counter()
    for epoch in range(args.epochs):
        order = rng.permutation(len(X))
        for i in range(0, len(X), args.batch_size):
            idx = order[i:i + args.batch_size]
            xb, yb = X[idx], y[idx]
            g = private_gradient(private, xb, yb, args.clip, args.noise, noise_rng)
            for k in private:
                private[k] -= args.lr * g[k]
            g = batch_grad(plain, xb, yb)
            for k in plain:
                plain[k] -= args.lr * g[k]
        print(f"epoch {epoch + 1}: DP-SGD test accuracy {accuracy(private, X_test, y_test):.4f}, "
              f"SGD {accuracy(plain, X_test, y_test):.4f} ({time.perf_counter() - start:.1f} s)")
    acc_private, acc_plain = accuracy(private, X_test, y_test), accuracy(plain, X_test, y_test)
    print(f"DP-SGD (C={args.clip}, sigma={args.noise}) test accuracy: {acc_private:.4f}")
    print(f"SGD test accuracy: {acc_plain:.4f}")
    return acc_private, acc_plain


if __name__ == "__main__":
    main()
