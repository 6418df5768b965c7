"""Data-parallel scaling: one training step (forward, backward, gradient all-reduce, SGD update)
on 1 and 2 MPI ranks at the same global batch, one BLAS thread per rank.

    python benchmarks/bench_distributed.py [--steps 20] [--ranks 1 2]     # launches mpiexec itself

Models (float32, softmax cross-entropy, SGD with momentum):
    mlp   784-1024-1024-10 at global batch 256 (1.86 M parameters, 7.5 MB of gradients)
    digits 64-256-128-10 at global batch 32 (examples/train_mlp.py's model and batch)

For each model and rank count it reports the wall time per step (median over steps of the
slowest rank), the throughput (global samples per second), the share of the step spent in
`sync_gradients` (split into packing/unpacking the buckets and waiting for the all-reduce), and
the same step with the all-reduce switched off (`no_sync`: the ranks compute side by side and
never talk), which separates the cost of the collective from that of two processes sharing the
cores, caches and memory bandwidth (BLAS contention). The scaling efficiency is
throughput(P) / (P x throughput(1)). It ends with the ring all-reduce cost model,
2 (p - 1) / p x gradient bytes / bandwidth, for p = 8 and 64 workers at 10 and 100 Gb/s.
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"   # one BLAS thread per rank, set before NumPy loads

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np
from common import REPO, machine_description, markdown_table

import tinytensor as tt

MODELS = {"mlp": ([784, 1024, 1024, 10], 256), "digits": ([64, 256, 128, 10], 32)}


def make_model(sizes, seed=0):
    rng = np.random.default_rng(seed)
    layers = []
    for n_in, n_out in zip(sizes[:-1], sizes[1:]):
        layers += [tt.nn.Linear(n_in, n_out, rng=rng, dtype=np.float32), tt.nn.ReLU()]
    return tt.nn.Sequential(*layers[:-1])


def worker(args):
    """Runs on every rank (under mpiexec): times the steps, rank 0 prints one JSON line."""
    dist = tt.distributed
    dist.init()
    rank, world = dist.rank(), dist.world_size()
    results = {}
    for name in args.models:
        sizes, batch = MODELS[name]
        model = make_model(sizes)
        ddp = tt.nn.parallel.DistributedDataParallel(model, gradient_as_bucket_view=args.bucket_view)
        opt = tt.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
        loss_fn = tt.nn.CrossEntropyLoss()
        rng = np.random.default_rng(1)
        X = rng.standard_normal((batch * 8, sizes[0])).astype(np.float32)
        y = rng.integers(0, sizes[-1], batch * 8)
        batches = list(tt.data.minibatches(X, y, batch // world, rng=2, rank=rank, world_size=world))
        halves = list(tt.data.minibatches(X, y, batch // 2, rng=2))   # 2 ranks' work, on 1 rank alone
        timing = dict.fromkeys(("sync", "wait", "sync_cpu", "mpi_cpu", "compute_cpu", "opt_cpu"), 0.0)
        wait_all, start_sum = tt.distributed._wait_all, tt.distributed._start_sum

        def timed_wait(requests):
            t0, c0 = time.perf_counter(), time.process_time()
            wait_all(requests)
            timing["wait"] += time.perf_counter() - t0
            timing["mpi_cpu"] += time.process_time() - c0

        def timed_start(flat):
            c0 = time.process_time()
            request = start_sum(flat)
            timing["mpi_cpu"] += time.process_time() - c0
            return request

        tt.distributed._wait_all, tt.distributed._start_sum = timed_wait, timed_start

        def step(i, sync, half=False):
            xb, yb = (halves if half else batches)[i % len(batches)]
            opt.zero_grad()
            c = time.process_time()
            if sync:
                with ddp.no_sync():
                    loss_fn(ddp(xb), yb).backward()
                timing["compute_cpu"] = time.process_time() - c
                t0, c0 = time.perf_counter(), time.process_time()
                ddp.sync_gradients()              # what backward() calls: timed on its own
                timing["sync"] = time.perf_counter() - t0
                timing["sync_cpu"] = time.process_time() - c0
            else:
                with ddp.no_sync():
                    loss_fn(ddp(xb), yb).backward()
                timing["compute_cpu"] = time.process_time() - c
            c = time.process_time()
            opt.step()
            timing["opt_cpu"] = time.process_time() - c

        row = {}
        for mode in ("sync", "local", "half")[:3 if world == 1 else 2]:
            for i in range(3):
                step(i, mode == "sync", mode == "half")
            walls, cpus, syncs, waits, sync_cpus, parts = [], [], [], [], [], []
            for i in range(args.steps):
                dist.barrier()                    # the ranks start each step together
                timing.update(sync=0.0, wait=0.0, sync_cpu=0.0, mpi_cpu=0.0)
                w0, c0 = time.perf_counter(), time.process_time()
                step(i, mode == "sync", mode == "half")
                walls.append(time.perf_counter() - w0)
                cpus.append(time.process_time() - c0)
                syncs.append(timing["sync"])
                waits.append(timing["wait"])
                sync_cpus.append(timing["sync_cpu"])
                parts.append([timing["compute_cpu"], timing["opt_cpu"], timing["mpi_cpu"]])
            # the step takes as long as its slowest rank
            slowest = dist.all_reduce(np.array(walls), op="max")
            k = int(np.argsort(slowest)[len(slowest) // 2])      # the median step
            row[mode] = {"wall": float(slowest[k]), "cpu": float(statistics.median(cpus)),
                         "sync_cpu": float(statistics.median(sync_cpus)),
                         "parts": np.median(np.array(parts), axis=0).tolist(),
                         "sync": float(dist.all_reduce(np.array(syncs), op="max")[k]),
                         "wait": float(dist.all_reduce(np.array(waits), op="max")[k])}
        row["grad_bytes"] = int(sum(p.data.nbytes for p in model.parameters()))
        row["buckets"] = len(ddp._reducer.buckets)
        row["batch"] = batch
        results[name] = row
        tt.distributed._wait_all, tt.distributed._start_sum = wait_all, start_sum
    if dist.is_main():
        print("RESULT " + json.dumps({"world": world, "results": results}), flush=True)


def ring_model(grad_bytes):
    rows = []
    for p in (8, 64):
        for gbps in (10, 100):
            seconds = 2 * (p - 1) / p * grad_bytes / (gbps * 1e9 / 8)
            rows.append([str(p), f"{gbps} Gb/s", f"{2 * (p - 1) / p * grad_bytes / 1e6:.1f} MB",
                         f"{seconds * 1e3:.2f} ms"])
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=20, help="timed steps per configuration")
    p.add_argument("--ranks", type=int, nargs="+", default=[1, 2])
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    p.add_argument("--bucket-view", action="store_true",
                   help="DistributedDataParallel(gradient_as_bucket_view=True): no copy out of the buckets")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args)
    mpiexec = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which("mpiexec")
    if mpiexec is None:
        raise SystemExit('no mpiexec: pip install -e ".[distributed]"')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    runs = {}
    for n in args.ranks:
        cmd = [mpiexec, "-n", str(n), sys.executable, __file__, "--worker", "--steps", str(args.steps),
               "--models", *args.models] + (["--bucket-view"] if args.bucket_view else [])
        out = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, env=env,
                             timeout=1200)
        line = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
        if out.returncode or not line:
            raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stdout}\n{out.stderr}")
        runs[n] = json.loads(line[0][7:])["results"]
    print("\n".join(machine_description()))
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"wall time per step: median over {args.steps} steps of the slowest rank; "
          f"one BLAS thread per rank\n")
    for name in args.models:
        rows = []
        base = runs[args.ranks[0]][name]
        for n in args.ranks:
            r = runs[n][name]
            s, loc = r["sync"], r["local"]
            throughput = r["batch"] / s["wall"]
            speedup = base["sync"]["wall"] / s["wall"]
            cpu_eff = base["sync"]["cpu"] / (n * s["cpu"])
            rows.append([str(n), f"{r['batch']} ({r['batch'] // n}/rank)", f"{s['wall'] * 1e3:.1f} ms",
                         f"{s['cpu'] * 1e3:.1f} ms", f"{throughput:,.0f}/s", f"{speedup:.2f}x",
                         f"{speedup / n * 100:.0f} %",
                         f"{s['sync'] / s['wall'] * 100:.0f} % ({s['wait'] * 1e3:.1f} ms in MPI's wait, "
                         f"{(s['sync'] - s['wait']) * 1e3:.1f} ms outside)",
                         f"{loc['wall'] * 1e3:.1f} ms", f"{cpu_eff * 100:.0f} %",
                         f"{s['sync_cpu'] * 1e3:.1f} ms", f"{loc['cpu'] * 1e3:.1f} ms", str(r["buckets"])])
        sizes, _ = MODELS[name]
        print(f"{name}: {'-'.join(map(str, sizes))}, {base['grad_bytes'] / 1e6:.2f} MB of gradients")
        if "half" in base:
            h = base["half"]
            print(f"one rank alone at batch {base['batch'] // 2} (a rank's share of the work, no "
                  f"neighbour): {h['wall'] * 1e3:.1f} ms wall, {h['cpu'] * 1e3:.1f} ms CPU per step")
        for n in args.ranks:
            s = runs[n][name]["sync"]
            compute, update, mpi = s["parts"]
            print(f"{n} rank{'s' if n > 1 else ''}, CPU per step: forward+backward {compute * 1e3:.1f} ms, "
                  f"update {update * 1e3:.1f} ms, all-reduce {s['sync_cpu'] * 1e3:.1f} ms (MPI "
                  f"{mpi * 1e3:.1f} ms, packing and unpacking {(s['sync_cpu'] - mpi) * 1e3:.1f} ms)")
        print(markdown_table(["ranks", "global batch", "step (wall)", "CPU/rank", "throughput",
                              "speed-up", "efficiency", "all-reduce share (wall)", "step, no all-reduce",
                              "CPU efficiency", "all-reduce CPU", "CPU/rank, no all-reduce", "messages"],
                             rows))
        print()
    grad_bytes = runs[args.ranks[0]][args.models[0]]["grad_bytes"]
    print(f"ring all-reduce, on paper, for {args.models[0]}'s {grad_bytes / 1e6:.2f} MB of gradients "
          f"(2 (p-1)/p x bytes / bandwidth; latency ignored):")
    print(markdown_table(["workers p", "link", "bytes sent per worker", "time per step"],
                         ring_model(grad_bytes)))


if __name__ == "__main__":
    main()
