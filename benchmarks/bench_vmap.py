"""tt.vmap: per-example gradients and batched input Jacobians against Python loops and NumPy.

    python benchmarks/bench_vmap.py            # one BLAS thread, medians of 5 (CPU time)
    python benchmarks/bench_vmap.py --quick    # a smoke run (used by the tests)

Three workloads of issue 33:
  1. per-example gradients of logistic regression (digits, 64 features, 10 classes) at B = 256:
     tt.vmap(tt.grad(loss)) against a Python loop of tt.grad (target: <= 1.7 ms);
  2. per-example gradients of the digits MLP 64-256-128-10 (tanh) at B = 256, against the loop;
  3. the input Jacobian of a 2-64-64-1 tanh network at 1,000 points, tt.vmap(tt.jacobian(net))
     in one call, against a hand-written NumPy Jacobian (target: within 1.5x).
torch.func's vmap(grad) and vmap(jacrev) run in the same process where PyTorch is installed
(float64, one thread, the same data), else their column says "not installed".
Every tinytensor result is checked against its reference before it is timed.
"""

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = "1"          # before NumPy loads: one BLAS thread

import argparse  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    format_time,
    machine_description,
    markdown_table,
    time_per_call,
    use_cpu_clock,
)

import tinytensor as tt  # noqa: E402


def logistic_case(B, rng):
    X = rng.standard_normal((B, 64))
    Y = rng.integers(0, 10, B)
    W = rng.standard_normal((64, 10)) * 0.1
    b = np.zeros(10)

    def loss(p, x, y):
        return tt.softmax_cross_entropy(x @ p["W"] + p["b"], y)

    params = {"W": W, "b": b}
    batched = tt.vmap(tt.grad(loss), in_axes=(None, 0, 0))
    g = tt.grad(loss)
    loop = lambda: [g(params, X[i], Y[i]) for i in range(B)]          # noqa: E731
    got = batched(params, X, Y)
    ref = loop()
    assert np.allclose(got["W"], np.stack([r["W"] for r in ref]), rtol=1e-12, atol=1e-14)
    return lambda: batched(params, X, Y), loop, (params, X, Y)


def mlp_case(B, rng):
    X = rng.standard_normal((B, 64))
    Y = rng.integers(0, 10, B)
    sizes = [64, 256, 128, 10]
    params = {}
    for i, (m, n) in enumerate(zip(sizes, sizes[1:])):
        params[f"W{i}"] = rng.standard_normal((m, n)) / np.sqrt(m)
        params[f"b{i}"] = np.zeros(n)

    def loss(p, x, y):
        h = x
        for i in range(3):
            h = h @ p[f"W{i}"] + p[f"b{i}"]
            if i < 2:
                h = tt.tanh(h)
        return tt.softmax_cross_entropy(h, y)

    batched = tt.vmap(tt.grad(loss), in_axes=(None, 0, 0))
    g = tt.grad(loss)
    loop = lambda: [g(params, X[i], Y[i]) for i in range(B)]          # noqa: E731
    got = batched(params, X, Y)
    ref = loop()
    assert np.allclose(got["W0"], np.stack([r["W0"] for r in ref]), rtol=1e-10, atol=1e-13)
    return lambda: batched(params, X, Y), loop, (params, X, Y)


def jacobian_case(N, rng):
    P = rng.standard_normal((N, 2))
    W1, b1 = rng.standard_normal((2, 64)), rng.standard_normal(64)
    W2, b2 = rng.standard_normal((64, 64)) / 8, rng.standard_normal(64)
    W3, b3 = rng.standard_normal((64, 1)) / 8, rng.standard_normal(1)

    def net(x):                   # one point (2,) -> (1,)
        h = tt.tanh(x @ W1 + b1)
        h = tt.tanh(h @ W2 + b2)
        return h @ W3 + b3

    def numpy_jacobian(x):        # by hand: (N, 1, 2)
        h1 = np.tanh(x @ W1 + b1)
        h2 = np.tanh(h1 @ W2 + b2)
        d2 = (1 - h2 ** 2) * W3[:, 0]            # (N, 64)
        d1 = (d2 @ W2.T) * (1 - h1 ** 2)         # (N, 64)
        return (d1 @ W1.T)[:, None, :]

    batched = tt.vmap(tt.jacobian(net))
    assert np.allclose(batched(P), numpy_jacobian(P), rtol=1e-12, atol=1e-14)
    loop = lambda: [tt.jacobian(net)(p) for p in P]                    # noqa: E731
    return (lambda: batched(P)), (lambda: numpy_jacobian(P)), loop, (P, (W1, b1, W2, b2, W3, b3))


def torch_func(kind, params, X, Y=None, net=None):
    """The same computation through torch.func (vmap of grad / jacrev), or None without PyTorch."""
    try:
        import torch
        from torch.func import grad, jacrev, vmap
    except ImportError:
        return None
    torch.set_num_threads(1)
    t = {k: torch.from_numpy(v) for k, v in params.items()}
    Xt = torch.from_numpy(X)
    if kind == "jacobian":
        W1, b1, W2, b2, W3, b3 = (torch.from_numpy(a) for a in net)

        def f(x):
            h = torch.tanh(x @ W1 + b1)
            h = torch.tanh(h @ W2 + b2)
            return h @ W3 + b3
        jac = vmap(jacrev(f))
        return lambda: jac(Xt)
    Yt = torch.from_numpy(Y)
    layers = 1 if kind == "logistic" else 3

    def loss(p, x, y):
        h = x
        for i in range(layers):
            h = h @ p[f"W{i}" if layers > 1 else "W"] + p[f"b{i}" if layers > 1 else "b"]
            if i < layers - 1:
                h = torch.tanh(h)
        return torch.nn.functional.cross_entropy(h[None], y[None])
    per_example = vmap(grad(loss), in_dims=(None, 0, 0))
    return lambda: per_example(t, Xt, Yt)


def _versus(fn, t_v, timing):
    if fn is None:
        return "not installed"
    t_t = time_per_call(fn, **timing)
    return f"{format_time(t_t)} (tt.vmap {t_v / t_t:.2f}x of it)"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, one short sample")
    args = ap.parse_args(argv)
    use_cpu_clock()
    rng = np.random.default_rng(0)
    B, N = (16, 50) if args.quick else (256, 1000)
    timing = dict(min_time=0.01, repeats=1, warmup=0) if args.quick else dict(min_time=0.2, repeats=5)
    rows = []

    vmapped, loop, data = logistic_case(B, rng)
    t_v, t_l = time_per_call(vmapped, **timing), time_per_call(loop, **timing)
    rows.append([f"logistic regression, per-example gradients, B={B}", format_time(t_v),
                 f"{format_time(t_l)} (loop of tt.grad)", f"{t_l / t_v:.1f}x",
                 _versus(torch_func("logistic", *data), t_v, timing)])
    vmapped, loop, data = mlp_case(B, rng)
    t_v, t_l = time_per_call(vmapped, **timing), time_per_call(loop, **timing)
    rows.append([f"MLP 64-256-128-10 tanh, per-example gradients, B={B}", format_time(t_v),
                 f"{format_time(t_l)} (loop of tt.grad)", f"{t_l / t_v:.1f}x",
                 _versus(torch_func("mlp", *data), t_v, timing)])
    vmapped, by_hand, loop, net = jacobian_case(N, rng)
    t_v, t_h = time_per_call(vmapped, **timing), time_per_call(by_hand, **timing)
    t_l = time_per_call(loop, **dict(timing, min_time=0.01, repeats=1 if args.quick else 3))
    rows.append([f"input Jacobian of a 2-64-64-1 tanh net, {N} points", format_time(t_v),
                 f"{format_time(t_h)} (NumPy by hand); {format_time(t_l)} (loop of tt.jacobian)",
                 f"{t_v / t_h:.2f}x NumPy",
                 _versus(torch_func("jacobian", {}, net[0], net=net[1]), t_v, timing)])
    print(markdown_table(["workload", "tt.vmap", "baseline", "ratio", "torch.func (same run)"], rows,
                         align="lrlrl"))
    print()
    print("\n".join(machine_description()))
    print("The machine is shared with other jobs: CPU time of this process, one BLAS thread, "
          "medians of 5 samples of at least 0.2 s each.")


if __name__ == "__main__":
    main()
