"""The lecture's logistic regression
=================================

The lecture's model: multinomial logistic regression on the digits, loss in the lecture's words.

    loss = tt.crossEntropy(tt.softmax(tt.dot(x, W)), y) + lam * tt.frobeniusNorm(W)

x is a minibatch (n, 65): 64 standardised pixels and a constant 1, so the last row of W acts as
the bias and the model stays the lecture's dot(x, W). y is one-hot (n, 10); W is (65, 10).
Trained with the SGD loop (forward, backward, update). Prints the Wengert list of one step's
loss, then the test accuracy on the last line.
"""

import os

os.environ["OMP_NUM_THREADS"] = "1"        # before NumPy: small matrices, one thread
os.environ["OPENBLAS_NUM_THREADS"] = "1"

import argparse  # noqa: E402

import numpy as np  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

import tinytensor as tt  # noqa: E402

QUICK = os.environ.get("TINYTENSOR_DOCS_QUICK") == "1"   # the docs build: fewer steps


def main(argv=None):
    p = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    p.add_argument("--epochs", type=int, default=3 if QUICK else 30)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--lam", type=float, default=1e-3, help="weight of the Frobenius norm penalty")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    X, labels = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, labels, test_size=0.2, stratify=labels,
                                                        random_state=args.seed)
    mean, std = X_train.mean(axis=0), X_train.std(axis=0)
    std[std == 0] = 1
    with_bias = lambda a: np.hstack([(a - mean) / std, np.ones((len(a), 1))])
    X_train, X_test = with_bias(X_train), with_bias(X_test)
    onehot = np.eye(10)[y_train]

    W = tt.tensor(np.zeros((X_train.shape[1], 10)), requires_grad=True, name="W")
    opt = tt.optim.SGD([W], lr=args.lr, momentum=0.9)
    lam = tt.tensor(args.lam, name="lam")   # a named constant, so the Wengert list reads "lam"
    rng = np.random.default_rng(args.seed)
    for epoch in range(args.epochs):
        for xb, yb in tt.data.minibatches(X_train, onehot, args.batch_size, rng=rng):
            x, y = tt.tensor(xb, name="x"), tt.tensor(yb, name="y")
            loss = tt.crossEntropy(tt.softmax(tt.dot(x, W)), y) + lam * tt.frobeniusNorm(W)
            opt.zero_grad()
            loss.backward()
            opt.step()
        if epoch == 0:
            print("Wengert list of one step's loss:")
            for lhs, op, operands in tt.wengert_list(loss):
                print(f"  {lhs} = {op}({', '.join(operands)})")
            print(f"epoch 1: loss {loss.item():.4f}")

    with tt.no_grad():
        predicted = tt.dot(tt.tensor(X_test), W).data.argmax(axis=1)
    print(f"final minibatch loss {loss.item():.4f}, |W|_F = {np.linalg.norm(W.data):.3f}")
    accuracy = float(np.mean(predicted == y_test))
    print(f"test accuracy: {accuracy:.4f}")
    return accuracy


if __name__ == "__main__":
    main()
