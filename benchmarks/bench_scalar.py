"""The vectorised engine against the lecture's scalar engine, for growing model sizes.

Two models, each trained with `tinytensor.scalar` (one Node per number) and with tinytensor
(one tape entry per array operation), in float64 from the same initial weights, one SGD step
(forward, backward, update) at a time:

* an MLP 2-h-h-1 with tanh and MSE, batch 64, for growing hidden width h;
* the lecture's logistic regression crossEntropy(softmax(x . W), y) + frobeniusNorm(W),
  10 classes, batch 64, for growing feature count d.

For each size the first step's gradients are checked equal (to 1e-9) before anything is timed.
The scalar engine runs up to where a step takes a few seconds, tinytensor far beyond. Prints a
table (size, parameters, time per step of each, speed-up) and saves a log-log plot of time per
step against parameter count, with the fitted slopes.

    python benchmarks/bench_scalar.py [--plot runs/bench_scalar.png] [--quick]
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"   # one BLAS thread, set before NumPy loads

import argparse
import time

import numpy as np
from common import (
    format_ratio,
    format_time,
    loglog_slope,
    machine_description,
    markdown_table,
    median,
    package_version,
    time_per_call,
)

import tinytensor as tt
from tinytensor import scalar
from tinytensor.scalar import Node

BATCH, CLASSES, LR = 64, 10, 0.01


# ----- the two models on the scalar engine -----------------------------------------------------------
def nodes(array):
    """A nested list of Nodes holding the values of a NumPy array."""
    return [nodes(row) for row in array] if np.ndim(array) > 1 else [Node(v) for v in array]


def grads_of(nested):
    if isinstance(nested, Node):
        return nested.grad
    return np.array([grads_of(n) for n in nested])


def flat(nested):
    return [n for row in nested for n in flat(row)] if isinstance(nested, list) else [nested]


def scalar_linear(inputs, W, b):
    """[b_j + sum_i inputs_i W_ij for each j], one Node at a time."""
    outputs = []
    for j in range(len(b)):
        acc = b[j]
        for i, x in enumerate(inputs):
            acc = acc + x * W[i][j]
        outputs.append(acc)
    return outputs


def scalar_mlp_loss(params, X, Y):
    W1, b1, W2, b2, W3, b3 = params
    total = 0
    for x, y in zip(nodes(X), Y[:, 0]):
        h = [scalar.tanh(v) for v in scalar_linear(x, W1, b1)]
        h = [scalar.tanh(v) for v in scalar_linear(h, W2, b2)]
        (pred,) = scalar_linear(h, W3, b3)
        total = total + (pred - float(y)) ** 2
    return total / len(X)


def scalar_logreg_loss(params, X, labels):
    (W,) = params
    zero = [Node(0.0) for _ in range(CLASSES)]
    total = 0
    for x, label in zip(nodes(X), labels):
        z = scalar_linear(x, W, zero)
        shift = max(v.value for v in z)        # a constant: softmax(z - shift) = softmax(z)
        e = [scalar.exp(v - shift) for v in z]
        s = e[0]
        for v in e[1:]:
            s = s + v
        p = [v / s for v in e]                 # softmax
        total = total - scalar.log(p[label])   # crossEntropy with a one-hot label
    squares = 0
    for w in flat(W):
        squares = squares + w * w
    return total / len(X) + squares ** 0.5     # + frobeniusNorm(W)


def scalar_trainer(loss_fn, init, X, Y):
    params = [nodes(p) for p in init]
    leaves = [n for p in params for n in flat(p)]

    def step():
        loss = loss_fn(params, X, Y)
        loss.backward()
        for n in leaves:
            n.value -= LR * n.grad
        return loss

    def gradients():
        loss_fn(params, X, Y).backward()
        return [grads_of(p) for p in params]

    return step, gradients


# ----- the same on tinytensor ----------------------------------------------------------------------
def tensor_mlp_loss(params, X, Y):
    W1, b1, W2, b2, W3, b3 = params
    h = tt.tanh(X @ W1 + b1)
    h = tt.tanh(h @ W2 + b2)
    return tt.mean((h @ W3 + b3 - Y) ** 2)


def tensor_logreg_loss(params, X, labels):
    (W,) = params
    return tt.crossEntropy(tt.softmax(tt.dot(X, W)), labels) + tt.frobeniusNorm(W)


def tensor_trainer(loss_fn, init, X, Y):
    params = [tt.tensor(p, requires_grad=True) for p in init]
    X = tt.tensor(X)
    Y = tt.tensor(Y) if Y.dtype.kind == "f" else Y

    def step():
        loss = loss_fn(params, X, Y)
        loss.backward()
        for p in params:
            p.data -= LR * p.grad     # SGD, in place, off the tape
            p.grad = None
        return loss

    def gradients():
        loss_fn(params, X, Y).backward()
        grads = [p.grad for p in params]
        for p in params:
            p.grad = None
        return grads

    return step, gradients


# ----- the workloads ---------------------------------------------------------------------------------
def uniform(rng, fan_in, shape):
    bound = 1 / np.sqrt(fan_in)
    return rng.uniform(-bound, bound, size=shape)


def mlp_problem(h, rng):
    init = [uniform(rng, 2, (2, h)), uniform(rng, 2, h), uniform(rng, h, (h, h)), uniform(rng, h, h),
            uniform(rng, h, (h, 1)), uniform(rng, h, 1)]
    X = rng.standard_normal((BATCH, 2))
    Y = np.sin(X[:, :1]) * np.cos(X[:, 1:])
    return init, X, Y


def logreg_problem(d, rng):
    init = [0.01 * rng.standard_normal((d, CLASSES))]
    X = rng.standard_normal((BATCH, d))
    labels = rng.integers(0, CLASSES, size=BATCH)
    return init, X, labels


WORKLOADS = {
    # name: (problem, scalar loss, tensor loss, size label, sizes, sizes tried on the scalar engine)
    "mlp": ("MLP 2-h-h-1, tanh, MSE, batch 64", mlp_problem, scalar_mlp_loss, tensor_mlp_loss, "h",
            [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048]),
    "logreg": ("logistic regression, d features, 10 classes, batch 64", logreg_problem,
               scalar_logreg_loss, tensor_logreg_loss, "d",
               [2, 8, 32, 128, 512, 2048, 8192, 32768, 131072]),
}


def run_workload(name, args, rng):
    title, problem, scalar_loss, tensor_loss, label, sizes = WORKLOADS[name]
    if args.quick:
        sizes = sizes[: len(sizes) - 3]
    rows, points = [], []
    scalar_on = True
    for size in sizes:
        init, X, Y = problem(size, rng)
        n_params = sum(p.size for p in init)
        t_step, t_grads = tensor_trainer(tensor_loss, init, X, Y)
        t_time = time_per_call(t_step, min_time=args.min_time, repeats=args.repeats)
        s_time = None
        if scalar_on:
            s_step, s_grads = scalar_trainer(scalar_loss, init, X, Y)
            start = time.perf_counter()
            s_g = s_grads()
            first = time.perf_counter() - start
            t_g = tensor_trainer(tensor_loss, init, X, Y)[1]()
            for a, b in zip(s_g, t_g):   # the same gradients before anything is timed
                np.testing.assert_allclose(a.reshape(b.shape), b, rtol=1e-9, atol=1e-12)
            repeats = args.repeats if first < 0.5 else 3
            s_time = time_per_call(s_step, min_time=args.min_time, repeats=repeats, warmup=0)
            scalar_on = s_time < args.scalar_limit   # the next size would take several times longer
        rows.append([f"{label}={size}", f"{n_params:,}", format_time(s_time), format_time(t_time),
                     format_ratio(s_time / t_time) if s_time else "—"])
        points.append((n_params, s_time, t_time))
        print(f"  {name} {label}={size}: params {n_params:,}, scalar {format_time(s_time)}, "
              f"tinytensor {format_time(t_time)}", flush=True)
    return title, rows, points


def gc_effect(h, rng):
    """A scalar-engine MLP step at width h with CPython's garbage collector on, against paused."""
    init, X, Y = mlp_problem(h, rng)
    step = scalar_trainer(scalar_mlp_loss, init, X, Y)[0]
    paused = time_per_call(step, min_time=0.2, repeats=3)
    on = []
    for _ in range(3):
        start = time.perf_counter()
        step()
        on.append(time.perf_counter() - start)
    return paused, median(on)


def slopes(points):
    scalar_pts = [(n, s) for n, s, _ in points if s]
    tensor_pts = [(n, t) for n, _, t in points]
    beyond = [(n, t) for n, s, t in points if not s]
    return {"scalar": loglog_slope(*zip(*scalar_pts)),
            "tinytensor": loglog_slope(*zip(*tensor_pts)),
            "beyond": loglog_slope(*zip(*beyond)) if len(beyond) > 1 else float("nan")}


def plot(results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(6 * len(results), 4.5), squeeze=False)
    for ax, (title, _, points, fitted) in zip(axes[0], results):
        for engine, column, marker in (("scalar engine", 1, "o"), ("tinytensor", 2, "s")):
            pts = [(p[0], p[column]) for p in points if p[column]]
            n, t = np.array(pts).T
            slope = f"slope {fitted['scalar']:.2f}" if column == 1 else (
                f"slope {fitted['tinytensor']:.2f}; {fitted['beyond']:.2f} past the scalar engine")
            ax.loglog(n, t, marker=marker, label=f"{engine} ({slope})")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("parameters")
        ax.set_ylabel("time per SGD step (s)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plot", default="runs/bench_scalar.png", help="where to save the plot")
    parser.add_argument("--quick", action="store_true", help="fewer sizes and repeats")
    parser.add_argument("--scalar-limit", type=float, default=1.0,
                        help="stop the scalar engine after a size whose step takes this long (s)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    args.repeats, args.min_time = (3, 0.05) if args.quick else (5, 0.2)
    if args.quick:
        args.scalar_limit = min(args.scalar_limit, 0.3)

    for line in machine_description([("tinytensor", package_version("tinytensor")),
                                      ("matplotlib", package_version("matplotlib"))]):
        print(line)
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    results = []
    for name in WORKLOADS:
        title, rows, points = run_workload(name, args, rng)
        results.append((title, rows, points, slopes(points)))
    for title, rows, _, fitted in results:
        print(f"\n### {title}\n")
        print(markdown_table(["size", "parameters", "scalar engine / step", "tinytensor / step",
                              "speed-up"], rows))
        print(f"\nfitted log-log slopes (time ∝ parameters^slope): scalar engine {fitted['scalar']:.2f}, "
              f"tinytensor {fitted['tinytensor']:.2f} over all sizes and {fitted['beyond']:.2f} over the "
              f"sizes past the scalar engine's")
    paused, on = gc_effect(16, rng)
    print(f"\nTimed with the garbage collector paused (as timeit does). With it on, a scalar-engine MLP "
          f"step at h=16 takes {format_time(on)} instead of {format_time(paused)} ({on / paused:.1f}×).")
    plot(results, args.plot)
    print(f"\nplot: {args.plot}")
    print(f"total time: {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
