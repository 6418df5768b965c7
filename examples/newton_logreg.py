"""Newton-CG with Hessian-vector products
======================================

Logistic regression trained by Newton-CG (Hessian-vector products from tt.hvp) and by SGD.

The lecture's model, on the digits data set (8x8 images, 10 classes; bundled with scikit-learn,
a synthetic data set otherwise):

    loss(W) = crossEntropy(softmax(dot(x, W)), y) + lam * sum(W ** 2)

The penalty is the squared Frobenius norm rather than the lecture's frobeniusNorm(W): the norm
has a kink at W = 0 (where Newton starts) and its curvature grows like 1 / ||W|| near it, so the
Newton system is badly conditioned exactly where the method begins; lam * ||W||^2 is smooth, and
it makes the loss strongly convex, so the Hessian is positive definite and CG applies.
(`--penalty norm` runs the lecture's version anyway, from a small random start.)

Newton-CG: each outer step solves H d = -g approximately with conjugate gradients
(scipy.sparse.linalg.cg on a LinearOperator whose matvec is tt.hvp: forward over reverse mode,
never finite differences), then backtracks along d until the loss decreases enough (Armijo).

    python examples/newton_logreg.py [--lam 1e-3] [--newton-steps 12] [--sgd-epochs 30]
"""

import argparse  # noqa: E402
import os
import time

import numpy as np
from scipy.sparse.linalg import LinearOperator, cg

import tinytensor as tt

QUICK = os.environ.get("TINYTENSOR_DOCS_QUICK") == "1"   # the docs build: fewer steps


def load_data(seed=0):
    """Standardised features with a bias column, integer labels, a 75/25 train/test split."""
    try:
        from sklearn.datasets import load_digits
        x, y = load_digits(return_X_y=True)
        source = "sklearn digits"
    except ImportError:   # a synthetic 10-class problem of the same size
        rng = np.random.default_rng(seed)
        centres = rng.standard_normal((10, 64)) * 2
        y = rng.integers(0, 10, 1797)
        x = centres[y] + rng.standard_normal((1797, 64)) * 3
        source = "synthetic (scikit-learn not installed)"
    order = np.random.default_rng(seed).permutation(len(y))
    x, y = x[order].astype(np.float64), y[order]
    split = int(0.75 * len(y))
    mean, std = x[:split].mean(axis=0), x[:split].std(axis=0) + 1e-8
    x = np.hstack([(x - mean) / std, np.ones((len(y), 1))])
    return (x[:split], y[:split]), (x[split:], y[split:]), source


def make_loss(x, y, lam, penalty):
    def loss(W):
        data = tt.crossEntropy(tt.softmax(tt.dot(x, W)), y)
        return data + lam * (tt.sum(W * W) if penalty == "squared" else tt.frobeniusNorm(W))
    return loss


def accuracy(W, x, y):
    return float(np.mean(np.argmax(x @ W, axis=1) == y))


def newton_cg(loss, W, steps, cg_iters=30, tol=1e-6):
    """Newton steps with the Newton system solved by CG; returns W and counts."""
    value_and_grad = tt.value_and_grad(loss)
    counts = {"steps": 0, "hvp": 0, "grad": 0}
    for _ in range(steps):
        value, g = value_and_grad(W)
        counts["grad"] += 1
        if np.linalg.norm(g) < tol:
            break

        def matvec(v, W=W):
            counts["hvp"] += 1
            return tt.hvp(loss, (W,), (v.reshape(W.shape),)).ravel()

        H = LinearOperator((W.size, W.size), matvec=matvec, dtype=W.dtype)
        d, _ = cg(H, -g.ravel(), maxiter=cg_iters, rtol=1e-4)
        d = d.reshape(W.shape)
        step, slope = 1.0, float(np.sum(g * d))
        while loss(W + step * d).item() > value + 1e-4 * step * slope and step > 1e-8:
            step *= 0.5                                   # Armijo backtracking
        W = W + step * d
        counts["steps"] += 1
    return W, counts


def sgd(x, y, lam, penalty, W, epochs, lr=0.1, batch=64, seed=0):
    """Minibatch SGD, the lecture's loop: forward, backward, update."""
    rng = np.random.default_rng(seed)
    W = tt.tensor(W, requires_grad=True)
    steps = 0
    for _ in range(epochs):
        order = rng.permutation(len(y))
        for start in range(0, len(y), batch):
            rows = order[start:start + batch]
            loss = make_loss(x[rows], y[rows], lam, penalty)(W)   # 1. forward propagation
            W.zero_grad()
            loss.backward()                                       # 2. backward propagation
            W.data -= lr * W.grad                                 # 3. weight update
            steps += 1
    return W.data, steps


def main():
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--lam", type=float, default=1e-3)
    parser.add_argument("--penalty", choices=["squared", "norm"], default="squared")
    parser.add_argument("--newton-steps", type=int, default=3 if QUICK else 12)
    parser.add_argument("--sgd-epochs", type=int, default=3 if QUICK else 30)
    parser.add_argument("--lr", type=float, default=0.1)
    args = parser.parse_args()

    (x, y), (x_test, y_test), source = load_data()
    loss = make_loss(x, y, args.lam, args.penalty)
    shape = (x.shape[1], 10)
    W0 = (np.zeros(shape) if args.penalty == "squared"
          else np.random.default_rng(1).standard_normal(shape) * 0.01)
    print(f"data: {source}; train {x.shape}, test {x_test.shape}; W {shape}; "
          f"penalty {args.penalty}, lam {args.lam}")
    print(f"{'method':10s} {'iterations':>22s} {'train loss':>11s} {'|grad|':>8s} {'train acc':>10s} "
          f"{'test acc':>9s} {'time':>7s}")

    def report(method, iterations, W, elapsed):
        print(f"{method:10s} {iterations:>22s} {loss(W).item():11.5f} "
              f"{np.linalg.norm(tt.grad(loss)(W)):8.1e} {accuracy(W, x, y):10.4f} "
              f"{accuracy(W, x_test, y_test):9.4f} {elapsed:6.2f}s")

    start = time.perf_counter()
    W, counts = newton_cg(loss, W0, args.newton_steps)
    report("Newton-CG", f"{counts['steps']} Newton, {counts['hvp']} hvp", W, time.perf_counter() - start)

    start = time.perf_counter()
    W, steps = sgd(x, y, args.lam, args.penalty, W0, args.sgd_epochs, lr=args.lr)
    report("SGD", f"{args.sgd_epochs} epochs, {steps} steps", W, time.perf_counter() - start)


if __name__ == "__main__":
    main()
