"""An LSTM training step (forward + backward) in tinytensor against PyTorch's CPU nn.LSTM, one
thread, float32, the same weights and data; gradients compared before anything is timed.

One step: out, (h, c) = lstm(x); loss = (out ** 2).mean(); loss.backward(). Sizes: sequence
length T, batch B, input D, hidden H (PTB-like by default). Rounds are interleaved and the medians
over rounds reported, with the ratios taken in the same process.

    python benchmarks/bench_rnn.py [--rounds 3] [--cpu-time] [--sizes 35,20,64,128 100,32,64,256]
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
    use_cpu_clock,
)

from tinytensor import nn


def tinytensor_step(T, B, D, H, state):
    lstm = nn.LSTM(D, H, rng=0)
    lstm.load_state_dict(state)
    x = np.random.default_rng(1).normal(size=(T, B, D)).astype(np.float32)

    def step():
        lstm.zero_grad()
        out, _ = lstm(x)
        (out ** 2).mean().backward()
    return step, lstm


def torch_step(T, B, D, H, state):
    try:
        import torch
    except ImportError:
        return None, None
    torch.set_num_threads(1)
    lstm = torch.nn.LSTM(D, H)
    # (ours also holds dropout's generator, "rng", which PyTorch's LSTM keeps elsewhere)
    lstm.load_state_dict({k: torch.tensor(v) for k, v in state.items() if k != "rng"})
    x = torch.tensor(np.random.default_rng(1).normal(size=(T, B, D)).astype(np.float32))

    def step():
        lstm.zero_grad()
        out, _ = lstm(x)
        (out ** 2).mean().backward()
    return step, lstm


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cpu-time", action="store_true", help="time CPU time of this process")
    parser.add_argument("--sizes", nargs="+", default=["35,20,64,128", "100,32,64,256"],
                        help="T,B,D,H per configuration")
    args = parser.parse_args()
    if args.cpu_time:
        use_cpu_clock()
    rows = []
    for sizes in args.sizes:
        T, B, D, H = (int(v) for v in sizes.split(","))
        state = nn.LSTM(D, H, rng=0).state_dict()
        ours, mine = tinytensor_step(T, B, D, H, state)
        theirs, ref = torch_step(T, B, D, H, state)
        if theirs is not None:       # the same gradients before timing anything
            ours()
            theirs()
            for k, p in ref.named_parameters():
                err = np.abs(getattr(mine, k).grad - p.grad.numpy()).max()
                scale = np.abs(p.grad.numpy()).max()
                assert err <= 1e-4 * scale + 1e-7, f"{k}: gradients differ by {err} (scale {scale})"
        times = {"tinytensor": [], "torch": []}
        with gc_paused():
            counts = {name: calibrate(fn, 0.2) for name, fn in (("tinytensor", ours), ("torch", theirs))
                      if fn is not None}
            for _ in range(args.rounds):
                for name, fn in (("tinytensor", ours), ("torch", theirs)):
                    if fn is not None:
                        times[name].append(median(time_calls(fn, counts[name], 1)))
        t_ours = median(times["tinytensor"])
        t_theirs = median(times["torch"]) if times["torch"] else None
        rows.append([f"T={T} B={B} D={D} H={H}", format_time(t_ours), format_time(t_theirs),
                     format_ratio(t_ours / t_theirs) if t_theirs else "—",
                     format_time(t_ours / T)])
    headers = ["LSTM step (fwd+bwd)", "tinytensor", "PyTorch CPU", "ratio", "tinytensor per time step"]
    print(markdown_table(headers, rows))
    for line in machine_description([("torch", package_version("torch"))]):
        print(line)
    print(f"clock: median of {args.rounds} rounds")


if __name__ == "__main__":
    main()
