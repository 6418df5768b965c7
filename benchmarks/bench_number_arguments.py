"""What a number argument costs a compiled call (issue 29: a scheduled learning rate passed as a
float is an input of the program, not a cache key).

Two steps, each compiled three ways and timed in the same process, rounds interleaved:

* `update`: `w - lr * g` on 10 values (the per-call overhead, the arithmetic nearly free);
* `logreg`: the lecture's logistic regression SGD step at batch 32 (784 features, 10 classes),
  `loss, g = value_and_grad(...)(W, x, y); W - lr * g`.

The three ways: `lr` closed over (a constant of the program: the baseline), `lr` a Python float
argument that changes on every call (a cosine schedule: one program, the number an input), and
`lr` a 0-d array argument that changes on every call. Printed: the median time per call, the
ratio to the baseline, the difference in µs, and how many programs each recorded (1 each).

    python benchmarks/bench_number_arguments.py [--rounds 5] [--cpu-time]
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"   # one BLAS thread, set before NumPy loads

import argparse
import math

import numpy as np
from common import (
    CLOCK,
    calibrate,
    format_ratio,
    format_time,
    gc_paused,
    machine_description,
    markdown_table,
    median,
    time_calls,
    use_cpu_clock,
)

import tinytensor as tt

LR = 0.01


def cosine(i, n=1000):
    return 0.5 * LR * (1 + math.cos(math.pi * (i % n) / n))


def workloads():
    rng = np.random.default_rng(0)
    w, g = rng.standard_normal(10), rng.standard_normal(10)
    W = rng.standard_normal((784, 10)) * 0.01
    x, y = rng.standard_normal((32, 784)), rng.integers(0, 10, 32)

    def loss(W, x, y):
        return tt.nn.functional.cross_entropy(x @ W, y) + 1e-4 * tt.sum(W * W)

    def update_const(w, g):
        return w - LR * g

    def update(w, g, lr):
        return w - lr * g

    def logreg_const(W, x, y):
        v, gW = tt.value_and_grad(loss)(W, x, y)
        return v, W - LR * gW

    def logreg(W, x, y, lr):
        v, gW = tt.value_and_grad(loss)(W, x, y)
        return v, W - lr * gW

    return {
        "update": (tt.compile(update_const), tt.compile(update), tt.compile(update), (w, g)),
        "logreg-b32": (tt.compile(logreg_const), tt.compile(logreg), tt.compile(logreg), (W, x, y)),
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cpu-time", action="store_true")
    args = parser.parse_args()
    if args.cpu_time:
        use_cpu_clock()
    for line in machine_description():
        print(line)
    print(f"clock: {CLOCK['name']}; {args.rounds} interleaved rounds, median of each round's median")
    rows = []
    for name, (const, as_float, as_array, data) in workloads().items():
        counter = [0]

        def constant():
            return const(*data)

        def number():
            counter[0] += 1
            return as_float(*data, cosine(counter[0]))

        def array():
            counter[0] += 1
            return as_array(*data, np.array(cosine(counter[0])))

        fns = {"closed over": constant, "float argument": number, "0-d array argument": array}
        times = {k: [] for k in fns}
        with gc_paused():
            numbers = {k: calibrate(f, 0.05) for k, f in fns.items()}
            for _ in range(args.rounds):
                for k, f in fns.items():
                    times[k].append(median(time_calls(f, numbers[k], 7)))
        base = median(times["closed over"])
        for k in fns:
            t = median(times[k])
            traced = {"closed over": const, "float argument": as_float, "0-d array argument": as_array}[k]
            rows.append((name, k, format_time(t), format_ratio(t / base), f"{(t - base) * 1e6:+.2f} µs",
                         traced.traces))
    print(markdown_table(["step", "lr", "time per call", "vs closed over", "difference", "programs"], rows,
                         align="llrrrr"))


if __name__ == "__main__":
    main()
