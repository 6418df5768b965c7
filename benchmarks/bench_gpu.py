"""The same SGD step on a GPU: tinytensor on CuPy against PyTorch on the same GPU and NumPy on the CPU.

The step: an MLP 784-H-H-10 with relu and softmax cross-entropy on integer labels, forward,
backward and a plain SGD update, in float32 (no TF32 anywhere: full float32 matrix products),
at (batch B, width H) in (256, 1024), (1024, 4096), (4096, 4096). Everyone starts from the
same weights and data; each column's gradients, computed in float64, are checked against a
float64 NumPy step (to 1e-9) before its float32 step is timed.

* tinytensor-cuda: tt.nn.Sequential(Linear, ReLU, ...), tt.nn.CrossEntropyLoss, tt.optim.SGD, on CuPy;
* cupy: the same step written by hand in CuPy (the floor for a framework on CuPy);
* torch-cuda: torch.nn.Sequential, F.cross_entropy, torch.optim.SGD (eager);
* numpy-cpu and tinytensor-cpu: the hand-written step and tinytensor on the CPU, with every core
  (BLAS threads are not pinned here).

GPU steps are timed between device synchronisations over batches of steps (a round >= 0.2 s after
a warm-up); the median over rounds is reported. CPU steps: the median of a few steps.

    python benchmarks/bench_gpu.py [--rounds 5] [--quick] [--cpu-steps 3] [--out results.md]
"""

import argparse
import math
import os
import statistics
import time

import numpy as np
from common import REPO, format_time, gc_paused, markdown_table, package_version  # noqa: F401

import tinytensor as tt
from tinytensor import backend

SIZES = [(256, 1024), (1024, 4096), (4096, 4096)]
LR = 0.01


# ----- the problem ------------------------------------------------------------------------------------
def make_problem(batch, hidden, seed=0):
    """Weights [(W, b)] (W of shape (in, out), as tinytensor's Linear), data and labels, float32."""
    rng = np.random.default_rng(seed)
    sizes = [784, hidden, hidden, 10]
    layers = []
    for n_in, n_out in zip(sizes[:-1], sizes[1:]):
        bound = 1 / math.sqrt(n_in)
        layers.append((rng.uniform(-bound, bound, (n_in, n_out)).astype(np.float32),
                       rng.uniform(-bound, bound, n_out).astype(np.float32)))
    x = rng.standard_normal((batch, 784)).astype(np.float32)
    labels = rng.integers(0, 10, batch)
    return layers, x, labels


def by_hand(xp, layers, x, labels):
    """(step, gradients): the step written out in the array library xp (numpy or cupy)."""
    params = [xp.array(a) for layer in layers for a in layer]   # copies: the steps update them
    x, labels = xp.asarray(x), xp.asarray(labels)
    rows = xp.arange(len(labels))

    def gradients():
        acts, pre = [x], []
        h = x
        for i in range(0, len(params), 2):
            z = h @ params[i]
            z += params[i + 1]
            pre.append(z)
            h = xp.maximum(z, 0) if i + 2 < len(params) else z
            acts.append(h)
        p = xp.exp(h - h.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        p[rows, labels] -= 1
        g = p / len(labels)
        grads = [None] * len(params)
        for i in range(len(params) - 2, -1, -2):
            grads[i], grads[i + 1] = acts[i // 2].T @ g, g.sum(axis=0)
            if i:
                g = (g @ params[i].T) * (pre[i // 2 - 1] > 0)
        return grads

    def step():
        for p, g in zip(params, gradients()):
            p -= LR * g

    return step, gradients


def tinytensor_step(device, layers, x, labels):
    dtype = layers[0][0].dtype
    model = tt.nn.Sequential(tt.nn.Linear(*layers[0][0].shape, dtype=dtype), tt.nn.ReLU(),
                             tt.nn.Linear(*layers[1][0].shape, dtype=dtype), tt.nn.ReLU(),
                             tt.nn.Linear(*layers[2][0].shape, dtype=dtype))
    for linear, (W, b) in zip(model[::2], layers):
        linear.weight.data[...], linear.bias.data[...] = W.T, b
    model.to(device)
    x, labels = backend.to_device(x, device), backend.to_device(labels, device)
    loss_fn = tt.nn.CrossEntropyLoss()
    opt = tt.optim.SGD(model.parameters(), lr=LR)

    def step():
        loss = loss_fn(model(x), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()

    def gradients():   # in the reference's (in, out) layout: Linear's weight is (out, in), as PyTorch's
        opt.zero_grad()
        loss_fn(model(x), labels).backward()
        return [g for linear in model[::2] for g in (linear.weight.grad.T, linear.bias.grad)]

    return step, gradients


def torch_step(layers, x, labels):
    import torch
    import torch.nn.functional as F
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    dtype = getattr(torch, layers[0][0].dtype.name)
    model = torch.nn.Sequential(torch.nn.Linear(*layers[0][0].shape), torch.nn.ReLU(),
                                torch.nn.Linear(*layers[1][0].shape), torch.nn.ReLU(),
                                torch.nn.Linear(*layers[2][0].shape)).to(dev, dtype)
    with torch.no_grad():
        for linear, (W, b) in zip(model[::2], layers):
            linear.weight.copy_(torch.from_numpy(W.T.copy()))
            linear.bias.copy_(torch.from_numpy(b))
    x = torch.from_numpy(x).to(dev)
    labels = torch.from_numpy(labels).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=LR)

    def step():
        loss = F.cross_entropy(model(x), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()

    def gradients():
        opt.zero_grad()
        F.cross_entropy(model(x), labels).backward()
        grads = []
        for linear in model[::2]:
            grads += [linear.weight.grad.T.cpu().numpy(), linear.bias.grad.cpu().numpy()]
        return grads

    sync = torch.cuda.synchronize
    return step, gradients, sync


# ----- timing -------------------------------------------------------------------------------------------
def time_gpu(step, sync, rounds, min_round=0.2, warmup=3):
    """Median seconds per step over `rounds` rounds, each >= min_round seconds, synchronised."""
    with gc_paused():
        for _ in range(warmup):
            step()
        sync()
        start = time.perf_counter()
        step()
        sync()
        number = max(3, int(min_round / max(time.perf_counter() - start, 1e-6)))
        samples = []
        for _ in range(rounds):
            sync()
            start = time.perf_counter()
            for _ in range(number):
                step()
            sync()
            samples.append((time.perf_counter() - start) / number)
    return statistics.median(samples)


def time_cpu(step, steps):
    with gc_paused():
        step()
        samples = []
        for _ in range(steps):
            start = time.perf_counter()
            step()
            samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def check(name, grads, reference):
    """The largest error of the float64 gradients against the float64 reference, relative to each
    one's largest entry; more than 1e-9 is an error. (Checked in float64: in float32, ReLU masks
    of pre-activations within rounding of 0 flip, and every float32 GPU step, PyTorch's too,
    differs from the float64 one by up to 5e-2 at B=1024, H=4096.)"""
    worst = 0.0
    for i, (g, r) in enumerate(zip(grads, reference)):
        g = backend.to_host(g) if not isinstance(g, np.ndarray) else g
        err = float(np.max(np.abs(g - r)) / max(np.max(np.abs(r)), 1e-30))
        if not err < 1e-9:
            raise AssertionError(f"{name}: gradient {i} differs from the float64 reference by {err:.2g}")
        worst = max(worst, err)
    return worst


def build(name, layers, x, labels, cupy):
    """(step, gradients, synchronize) of the column `name`, in the dtype of `layers`."""
    gpu_sync = cupy.cuda.Device().synchronize if cupy is not None else (lambda: None)
    if name == "torch-cuda":
        return torch_step(layers, x, labels)
    if name in ("tinytensor-cuda", "tinytensor-cpu"):
        return (*tinytensor_step(name.split("-")[1], layers, x, labels), gpu_sync)
    xp = cupy if name == "cupy" else np
    return (*by_hand(xp, layers, x, labels), gpu_sync if xp is cupy else (lambda: None))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--cpu-steps", type=int, default=3, help="timed CPU steps per cell (median)")
    p.add_argument("--quick", action="store_true", help="the smallest size only, fewer rounds")
    p.add_argument("--no-cpu", action="store_true", help="skip the CPU columns")
    p.add_argument("--out", help="also write the table (markdown) here")
    args = p.parse_args(argv)
    sizes = SIZES[:1] if args.quick else SIZES
    rounds = 2 if args.quick else args.rounds

    try:
        import cupy
        backend.get_device("cuda")
        gpu = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.runtime.getDevice())["name"].decode()
    except Exception as err:   # noqa: BLE001
        cupy, gpu = None, None
        print(f"no GPU through CuPy ({err}): CPU columns only")
    try:
        import torch
        has_torch = torch.cuda.is_available()
    except ImportError:
        has_torch = False

    columns = ([] if cupy is None else ["tinytensor-cuda", "cupy"]) + (["torch-cuda"] if has_torch else []) \
        + ([] if args.no_cpu else ["numpy-cpu", "tinytensor-cpu"])
    rows = []
    failed = False
    for batch, hidden in sizes:
        layers, x, labels = make_problem(batch, hidden)
        layers64 = [(W.astype(np.float64), b.astype(np.float64)) for W, b in layers]
        x64 = x.astype(np.float64)
        reference = by_hand(np, layers64, x64, labels)[1]()
        times, errors = {}, {}
        for name in columns:
            try:
                error = check(name, build(name, layers64, x64, labels, cupy)[1](), reference)
            except AssertionError as err:   # reported in the table, and the exit status
                print(f"  WRONG: {err}", flush=True)
                error, failed = None, True
            step, _, sync = build(name, layers, x, labels, cupy)
            if name.endswith("-cpu"):
                times[name] = time_cpu(step, args.cpu_steps)
            else:
                times[name] = time_gpu(step, sync, rounds)
            errors[name] = error
            print(f"  B={batch} H={hidden} {name}: {format_time(times[name])} (gradient error vs float64 "
                  f"{'WRONG' if error is None else f'{error:.1e}'})", flush=True)
            del step
            if cupy is not None:
                cupy.get_default_memory_pool().free_all_blocks()
        base = times.get("torch-cuda")
        cells = []
        for name in columns:
            cell = format_time(times[name]) + (" WRONG" if errors[name] is None else "")
            if base is not None and name != "torch-cuda":
                cell += f" ({times[name] / base:.2f}×)"
            cells.append(cell)
        rows.append([f"B={batch}, H={hidden}"] + cells)

    table = markdown_table(["MLP 784-H-H-10 step"] + columns, rows)
    lines = [
        "Median time per SGD step (forward + backward + update), float32; in brackets the ratio to "
        "PyTorch on the same GPU." if has_torch else "Median time per SGD step, float32.",
        "", table, "",
        f"GPU: {gpu or 'none'}; CPU: {os.cpu_count()} cores, BLAS threads not pinned; "
        f"NumPy {np.__version__}, CuPy {package_version('cupy') if cupy is None else cupy.__version__}, "
        f"torch {package_version('torch')}; GPU rounds: {rounds} (median), "
        f"CPU steps: {args.cpu_steps} (median)",
    ]
    print("\n".join(lines))
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    if failed:
        raise SystemExit("some gradients were wrong (WRONG above)")


if __name__ == "__main__":
    main()
