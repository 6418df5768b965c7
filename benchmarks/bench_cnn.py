"""The CNN step of examples/train_cnn.py: tinytensor against a hand-written NumPy step and, when
installed, eager PyTorch, all on one thread, float32, from the same data and initial weights.

Model: Conv2d(1, 16, 3, padding=1) - ReLU - MaxPool2d(2) - Conv2d(16, 32, 3, padding=1) - ReLU -
MaxPool2d(2) - Flatten - Linear(128, 10), softmax cross-entropy, plain SGD update; input
(batch, 1, 8, 8) as the digits. One step = forward, backward, update.

The NumPy step is written by hand the way one would without a framework, with the same tricks
as tinytensor's primitives (im2col rows from a padded channels-last copy through
sliding_window_view, one matmul; the 2x2 pools as 4 strided slices; the col2im as 9 slice
additions): the floor for any NumPy-backed framework. Gradients of all three are checked against each other
before anything is timed. Rounds are interleaved and the medians over rounds reported, with the
ratios taken in the same process.

    python benchmarks/bench_cnn.py [--rounds 5] [--batch 32 128]
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"   # one BLAS thread, set before NumPy loads

import argparse

import numpy as np
from common import (
    calibrate,
    format_ratio,
    format_time,
    gc_paused,
    machine_description,
    markdown_table,
    median,
    package_version,
    time_calls,
)

import tinytensor as tt
from tinytensor import nn

LR = 0.01


def init_params(seed=0):
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1, rng=seed), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(16, 32, 3, padding=1, rng=seed + 1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(128, 10, rng=seed + 2))
    return model, [p.data.copy() for p in model.parameters()]


def data(batch, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(0, 1, (batch, 1, 8, 8)).astype(np.float32), rng.integers(0, 10, batch)


# ----- tinytensor ------------------------------------------------------------------------------------
def tinytensor_step(params, x, y):
    model, _ = init_params()
    model.load_state_dict(dict(zip([n for n, _ in model.named_parameters()], params)))
    loss_fn = nn.CrossEntropyLoss()
    opt = tt.optim.SGD(model.parameters(), lr=LR)

    def grads():
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        return [p.grad for p in model.parameters()]

    def step():
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return grads, step


# ----- NumPy by hand -----------------------------------------------------------------------------------
def _im2col(x, k=3, pad=1):
    """Rows (N*H*W, k*k*C) of every 3x3 window, channels innermost: from a padded NHWC copy, so
    the copy moves contiguous runs of C (3x faster than windows of the NCHW array)."""
    N, C, H, W = x.shape
    xp = np.zeros((N, H + 2 * pad, W + 2 * pad, C), x.dtype)
    xp[:, pad:pad + H, pad:pad + W] = x.transpose(0, 2, 3, 1)
    win = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(1, 2))   # (N, H, W, C, k, k)
    return win.transpose(0, 1, 2, 4, 5, 3).reshape(N * H * W, k * k * C)


def _col2im(cols, shape, k=3, pad=1):
    """Rows (N*H*W, k*k*C) summed back into (N, C, H, W), one slice addition per offset."""
    N, C, H, W = shape
    cols = cols.reshape(N, H, W, k, k, C)
    out = np.zeros((N, H + 2 * pad, W + 2 * pad, C), cols.dtype)
    for i in range(k):
        for j in range(k):
            out[:, i:i + H, j:j + W] += cols[:, :, :, i, j]
    return out[:, pad:pad + H, pad:pad + W].transpose(0, 3, 1, 2)


def _conv(x, W, b):
    """(N, C, H, W) * (O, C, 3, 3), padding 1 -> (N, O, H, W) (a transposed view) and the rows."""
    cols = _im2col(x)
    out = cols @ W.transpose(2, 3, 1, 0).reshape(-1, W.shape[0]) + b
    return out.reshape(x.shape[0], x.shape[2], x.shape[3], -1).transpose(0, 3, 1, 2), cols


def _conv_grads(dz, cols, W, x_shape):
    """Gradients of the weight, the bias and (when x_shape is given) the input."""
    rows = dz.transpose(0, 2, 3, 1).reshape(-1, dz.shape[1])           # (N*H*W, O)
    out, C = W.shape[:2]
    dW = (rows.T @ cols).reshape(out, 3, 3, C).transpose(0, 3, 1, 2)
    dx = None if x_shape is None else _col2im(rows @ W.transpose(0, 2, 3, 1).reshape(out, -1), x_shape)
    return dW, rows.sum(axis=0), dx


_OFFSETS = [(slice(None), slice(None), slice(i, None, 2), slice(j, None, 2)) for i in (0, 1) for j in (0, 1)]


def _pool(z):
    """2x2 max pool of (N, C, H, W) as the maximum of its 4 strided slices (faster than a reshape
    and a reduction over two axes); the input is kept for the backward pass."""
    out = z[_OFFSETS[0]].copy()
    for index in _OFFSETS[1:]:
        np.maximum(out, z[index], out=out)
    return out, z


def _unpool(g, pooled, z):
    """g to where each maximum came from (every tied entry: ties are zeros after a ReLU, and the
    ReLU's own mask zeroes them again)."""
    out = np.empty(z.shape, g.dtype)
    for index in _OFFSETS:
        np.multiply(g, z[index] == pooled, out=out[index])
    return out


def numpy_loss_and_grads(params, x, y):
    W1, b1, W2, b2, W3, b3 = params
    N = len(x)
    z1, c1 = _conv(x, W1, b1)
    a1 = np.maximum(z1, 0)
    p1, m1 = _pool(a1)
    z2, c2 = _conv(p1, W2, b2)
    a2 = np.maximum(z2, 0)
    p2, m2 = _pool(a2)
    f = p2.reshape(N, -1)
    logits = f @ W3.T + b3               # W3 is nn.Linear's (out, in), as PyTorch's
    shifted = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    probs = e / e.sum(axis=1, keepdims=True)
    loss = -np.mean(np.log(probs[np.arange(N), y]))
    g = probs
    g[np.arange(N), y] -= 1
    g /= N
    dW3, db3 = g.T @ f, g.sum(axis=0)
    dp2 = (g @ W3).reshape(p2.shape)
    dz2 = _unpool(dp2, p2, m2) * (z2 > 0)
    dW2, db2, dp1 = _conv_grads(dz2, c2, W2, p1.shape)
    dz1 = _unpool(dp1, p1, m1) * (z1 > 0)
    dW1, db1, _ = _conv_grads(dz1, c1, W1, None)
    return loss, [dW1, db1, dW2, db2, dW3, db3]


def numpy_step(params, x, y):
    params = [p.copy() for p in params]

    def step():
        _, grads = numpy_loss_and_grads(params, x, y)
        for p, g in zip(params, grads):
            p -= LR * g
    return (lambda: numpy_loss_and_grads([p.copy() for p in params], x, y)[1]), step


# ----- PyTorch -------------------------------------------------------------------------------------------
def torch_step(params, x, y):
    import torch
    torch.set_num_threads(1)
    W1, b1, W2, b2, W3, b3 = params
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                                torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                                torch.nn.Flatten(), torch.nn.Linear(128, 10))
    with torch.no_grad():
        for p, v in zip(model.parameters(), [W1, b1, W2, b2, W3, b3]):
            p.copy_(torch.from_numpy(np.ascontiguousarray(v)))
    loss_fn = torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)

    def grads():
        opt.zero_grad()
        loss_fn(model(xt), yt).backward()
        return [p.grad.numpy().copy() for p in model.parameters()]

    def step():
        loss = loss_fn(model(xt), yt)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return grads, step


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds (medians)")
    parser.add_argument("--batch", type=int, nargs="+", default=[32, 128], help="batch sizes")
    parser.add_argument("--min-time", type=float, default=0.2, help="seconds per timing sample")
    args = parser.parse_args()

    frameworks = {"numpy": numpy_step, "tinytensor": tinytensor_step}
    if package_version("torch"):
        frameworks["torch"] = torch_step
    rows = []
    for batch in args.batch:
        x, y = data(batch)
        _, params = init_params()
        made = {name: make(params, x, y) for name, make in frameworks.items()}
        reference = made["numpy"][0]()
        for name, (grads, _) in made.items():
            for g, r in zip(grads(), reference):
                np.testing.assert_allclose(g, r, rtol=2e-3, atol=2e-5, err_msg=f"{name} gradient")
        times = {name: [] for name in made}
        with gc_paused():
            numbers = {name: calibrate(step, args.min_time) for name, (_, step) in made.items()}
            for _ in range(args.rounds):
                for name, (_, step) in made.items():
                    times[name].append(median(time_calls(step, numbers[name], 3)))
        t = {name: median(v) for name, v in times.items()}
        row = [batch, format_time(t["numpy"]), format_time(t["tinytensor"]),
               format_ratio(t["tinytensor"] / t["numpy"])]
        if "torch" in t:
            row += [format_time(t["torch"]), format_ratio(t["tinytensor"] / t["torch"])]
        rows.append(row)
    headers = ["batch", "NumPy by hand", "tinytensor", "tinytensor / NumPy"]
    if "torch" in frameworks:
        headers += ["torch (eager)", "tinytensor / torch"]
    print(markdown_table(headers, rows))
    print()
    versions = [("torch", package_version("torch"))] if "torch" in frameworks else []
    for line in machine_description(versions):
        print(line)
    print(f"medians of {args.rounds} interleaved rounds, each the median of 3 samples "
          f"of >= {args.min_time} s")


if __name__ == "__main__":
    main()
