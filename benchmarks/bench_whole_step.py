"""Issue 29's speed targets for tt.compile in one run, against the hand-written NumPy step that
updates in place (bench_peers.py's `numpy` column, `tight_numpy_step`):

    whole compiled step (zero_grad, loss, backward(), SGD step inside tt.compile), logreg-b32
                                                               <= 1.15x NumPy
    the compiled functional step (tt-compiled) on the small steps
                                                               <= 1.05x the last round's ratio
    the guard check of the whole step's program, per call      <= 3 us

The guard check is timed twice: alone, in a loop (`ok()` with everything it reads in cache), and
in place (neighbouring samples of the step with its guard and with a guard that checks nothing:
what it costs after the program's NumPy work has evicted what it reads from the caches). And for
that step, what a call costs before its program runs (the dispatch: the cache key of the
arguments, the program's lookup, the guard check), from neighbouring samples of the call and of
its program called directly.

The steps are bench_peers.py's own (their gradients are checked against NumPy's there and here
before anything is timed). Each round times NumPy, tt-compiled and tt-whole-step one after
another (`--number` calls each, a sample), `--repeats` times; the ratio is taken per sample
between neighbours, so a slow spell of a shared machine hits both sides of a ratio, and the
median over all samples is reported.

    python benchmarks/bench_whole_step.py [--rounds 7] [--cpu-time] [--only logreg-b32]
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"   # one BLAS thread, set before NumPy loads

import argparse
import time

import bench_peers
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

WHOLE_STEP_TARGET = ("logreg-b32", 1.15)
# tt-compiled / NumPy at the end of the last round (docs/guides/performance.md, quiet machine):
# the small steps keep their speed when within 1.05x of these
LAST_ROUND = {"logreg-b1": 1.06, "logreg-b32": 1.07, "mlp-small-b64": 1.09, "tanh-mlp-b64": 0.971,
              "mlp-b64": 1.02}
GUARD_TARGET = 3e-6
STEPS = {"numpy": bench_peers.build_numpy, "tt-compiled": bench_peers.build_tinytensor_compiled,
         "tt-whole-step": bench_peers.build_tinytensor_whole_step}


def build(workload):
    kind, batch, _ = bench_peers.WORKLOADS[workload]
    prob = bench_peers.make_problem(kind, batch)
    reference = bench_peers.numpy_loss_and_grads(prob, [p.copy() for p in prob.params])[1]
    steps = {}
    for name, builder in STEPS.items():
        grads, step = builder(prob)
        bench_peers.check_gradients(name, workload, grads(), reference, scalar=False)
        steps[name] = step
    whole = bench_peers.COMPILED[-1]          # the whole step's compiled function
    if workload == WHOLE_STEP_TARGET[0]:      # its program called directly: the dispatch's cost
        steps["tt-whole-step"]()
        program = next(reversed(whole.programs.values())).function
        y = bench_peers._targets(prob, onehot=False)
        steps["program alone"] = lambda: program(prob.x, y)
        guard = next(reversed(whole.programs.values())).guard
        checked = guard.ok

        def unguarded():              # the same call, its guard checking nothing
            guard.ok = _nothing
            try:
                whole(prob.x, y)
            finally:
                guard.ok = checked
        steps["unguarded"] = unguarded
    return steps, whole


def _nothing():
    return True


def guard_cost(whole, min_time):
    """Seconds per call of the whole step's guard check (`ok()`: every Python value the program
    depends on, compared with what it was when recorded), and the number of values it reads."""
    program = next(reversed(whole.programs.values()))
    if program.guard is None:
        return 0.0, 0
    ok = program.guard.ok
    assert ok(), "the guard of the step's program fails on an unchanged step"
    with gc_paused():
        number = calibrate(ok, min_time)
        return median(time_calls(ok, number, 7)), len(program.guard.names)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds")
    parser.add_argument("--repeats", type=int, default=5, help="samples per step and round")
    parser.add_argument("--min-time", type=float, default=0.03, help="seconds per sample")
    parser.add_argument("--only", default="", help=f"comma-separated workloads ({', '.join(LAST_ROUND)})")
    parser.add_argument("--cpu-time", action="store_true",
                        help="time with this process's CPU time (for a machine shared with other jobs)")
    args = parser.parse_args()
    if args.cpu_time:
        use_cpu_clock()
    workloads = [w.strip() for w in args.only.split(",") if w.strip()] or list(LAST_ROUND)
    unknown = sorted(set(workloads) - set(LAST_ROUND))
    if unknown:
        parser.error(f"--only: unknown workloads {unknown}; choose from {sorted(LAST_ROUND)}")
    for line in machine_description([("tinytensor", package_version("tinytensor"))]):
        print(line)
    print(f"clock: {CLOCK['name']}; {args.rounds} rounds x {args.repeats} neighbouring samples of "
          f">= {args.min_time * 1e3:.0f} ms per step; garbage collector paused while timing\n")

    built, numbers = {}, {}
    for w in workloads:
        built[w] = build(w)
        with gc_paused():
            for name, step in built[w][0].items():
                step()
                numbers[w, name] = calibrate(step, args.min_time)
    times = {key: [] for key in numbers}
    ratios = {key: [] for key in numbers if key[1] != "numpy"}
    dispatch, in_place = [], []
    start = time.perf_counter()
    for r in range(args.rounds):
        for w in workloads:
            steps = built[w][0]
            with gc_paused():
                for _ in range(args.repeats):
                    sample = {name: time_calls(step, numbers[w, name], 1)[0] for name, step in steps.items()}
                    for name, t in sample.items():
                        times[w, name].append(t)
                        if name != "numpy":
                            ratios[w, name].append(t / sample["numpy"])
                    if "program alone" in sample:
                        dispatch.append(sample["tt-whole-step"] - sample["program alone"])
                        in_place.append(sample["tt-whole-step"] - sample["unguarded"])
        print(f"  round {r + 1}/{args.rounds} done ({time.perf_counter() - start:.0f} s)", flush=True)

    rows = []
    for w in workloads:
        compiled, whole = median(ratios[w, "tt-compiled"]), median(ratios[w, "tt-whole-step"])
        keep = LAST_ROUND[w] * 1.05
        whole_target = WHOLE_STEP_TARGET[1] if w == WHOLE_STEP_TARGET[0] else None
        rows.append([w, format_time(median(times[w, "numpy"])),
                     f"{format_time(median(times[w, 'tt-compiled']))} ({format_ratio(compiled)})",
                     f"≤ {keep:.3g}× {'met' if compiled <= keep else 'NOT met'}",
                     f"{format_time(median(times[w, 'tt-whole-step']))} ({format_ratio(whole)})",
                     "" if whole_target is None else
                     f"≤ {whole_target}× {'met' if whole <= whole_target else 'NOT met'}"])
    print("\nMedian time per step, and in brackets the median of the per-sample ratios to NumPy's step:\n")
    print(markdown_table(["workload", "numpy (tight)", "tt-compiled", "target (last round x 1.05)",
                          "tt-whole-step", "target"], rows))
    if WHOLE_STEP_TARGET[0] in built:
        cost, reads = guard_cost(built[WHOLE_STEP_TARGET[0]][1], args.min_time)
        in_place = median(in_place)
        print(f"\nguard check of the whole step's program ({WHOLE_STEP_TARGET[0]}, {reads} values read), "
              f"target ≤ {GUARD_TARGET * 1e6:.0f} µs per call: alone {cost * 1e6:.2f} µs, in place "
              f"{in_place * 1e6:.2f} µs: {'met' if max(cost, in_place) <= GUARD_TARGET else 'NOT met'}")
        print(f"the whole call before its program runs (arguments' key, lookup, guard check): "
              f"{median(dispatch) * 1e6:.2f} µs per call; the program itself (with the loss made a "
              f"Tensor): {format_time(median(times[WHOLE_STEP_TARGET[0], 'program alone']))}")
    print("\nworkloads: " + "; ".join(f"{w}: {bench_peers.WORKLOADS[w][2]}" for w in workloads))


if __name__ == "__main__":
    main()
