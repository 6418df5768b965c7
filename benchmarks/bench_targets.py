"""Issue 31's speed targets in one run: each step of tinytensor against eager PyTorch, float32, one
thread, in this one process, with the ratio per round taken between neighbouring samples and the
median over rounds reported (so slow spells of a shared machine hit both sides of a ratio).

    CNN step (bench_cnn.py's model)            <= 1.3x PyTorch   (batch 128; batch 32 shown too)
    LSTM language-model step (bench_rnn.py's)  <= 1.5x PyTorch   (T=35 B=20 H=128; T=100 shown)
    transformer encoder step, eager            <= 1.0x PyTorch   (bench_transformer.py's)

Gradients are compared with PyTorch's by each of those scripts; this one only times.

    python benchmarks/bench_targets.py [--rounds 7] [--cpu-time] [--min-time 0.2]
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"   # one BLAS thread, set before NumPy loads

import argparse

import bench_cnn
import bench_rnn
import bench_transformer
from common import (
    CLOCK,
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


def cnn(batch):
    x, y = bench_cnn.data(batch)
    _, params = bench_cnn.init_params()
    return bench_cnn.tinytensor_step(params, x, y)[1], bench_cnn.torch_step(params, x, y)[1]


def lstm(T, B, D, H):
    state = nn.LSTM(D, H, rng=0).state_dict()
    return bench_rnn.tinytensor_step(T, B, D, H, state)[0], bench_rnn.torch_step(T, B, D, H, state)[0]


def transformer():
    return bench_transformer.build_tt_eager()[0], bench_transformer.build_torch()[0]


CASES = [  # (name, target ratio or None, builder)
    ("CNN step, batch 128", 1.3, lambda: cnn(128)),
    ("CNN step, batch 32", None, lambda: cnn(32)),
    ("LSTM step, T=35 B=20 D=64 H=128", 1.5, lambda: lstm(35, 20, 64, 128)),
    ("LSTM step, T=100 B=32 D=64 H=256", None, lambda: lstm(100, 32, 64, 256)),
    ("transformer step, eager", 1.0, transformer),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds (medians)")
    parser.add_argument("--min-time", type=float, default=0.2, help="seconds per sample")
    parser.add_argument("--cpu-time", action="store_true", help="time CPU time of this process")
    args = parser.parse_args()
    if args.cpu_time:
        use_cpu_clock()
    if not package_version("torch"):
        raise SystemExit("bench_targets: the targets are ratios to PyTorch, which is not installed")
    rows = []
    for name, target, build in CASES:
        ours, theirs = build()
        with gc_paused():
            counts = [calibrate(fn, args.min_time) for fn in (ours, theirs)]
            t_ours, t_theirs, ratios = [], [], []
            for _ in range(args.rounds):
                a = median(time_calls(ours, counts[0], 1))
                b = median(time_calls(theirs, counts[1], 1))
                t_ours.append(a)
                t_theirs.append(b)
                ratios.append(a / b)
        ratio = median(ratios)
        verdict = "—" if target is None else ("met" if ratio <= target else "NOT met")
        rows.append([name, format_time(median(t_ours)), format_time(median(t_theirs)), format_ratio(ratio),
                     "—" if target is None else f"≤ {target}×", verdict])
    print(markdown_table(["step", "tinytensor", "PyTorch (eager)", "ratio", "target", ""], rows,
                         align="lrrrrl"))
    print()
    for line in machine_description([("torch", package_version("torch"))]):
        print(line)
    print(f"clock: {CLOCK['name']}; medians of {args.rounds} interleaved rounds of >= {args.min_time} s")


if __name__ == "__main__":
    main()
