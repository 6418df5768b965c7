"""Data-parallel scaling: one training step (forward, backward, gradient all-reduce, SGD update)
on 1 and 2 MPI ranks at the same global batch, one BLAS thread per rank, beside PyTorch's
DistributedDataParallel (gloo) on the same model, data and batch, in the same run.

    python benchmarks/bench_distributed.py [--steps 30] [--ranks 1 2]   # launches mpiexec itself

Models (float32, softmax cross-entropy, SGD with momentum 0.9):
    mlp    784-1024-1024-10 at global batch 256 (1.86 M parameters, 7.45 MB of gradients)
    digits 64-256-128-10 at global batch 32 (examples/train_mlp.py's model and batch)

What it prints, per model (wall time per step: the median over steps of the slowest rank; CPU
time: this rank's process time, which a loaded machine inflates far less than wall time):
* the targets: the 1-rank DDP step against the same step written in NumPy (forward, backward,
  update; timed in the same process, alternating), and the 2-rank efficiency,
  throughput(2) / (2 x throughput(1)), for tinytensor and for PyTorch DDP;
* per rank count, six ways to run the step: `overlap` (plain `loss.backward()`: each bucket's
  all-reduce starts as soon as its gradients are complete, during the backward; through shared
  memory when every rank is on this machine, `--allreduce`), `zero` (the same wrapper with
  tt.distributed.optim.ZeroRedundancyOptimizer: on one machine the parameters live in shared
  memory, the all-reduce is a reduce-scatter and each rank updates its slice; its target
  efficiency is against the plain 1-rank step, `overlap`), `mpi` (the same through MPI's
  non-blocking Iallreduce, DistributedDataParallel(allreduce="mpi")), `after` (the
  backward under `no_sync()`, then `sync_gradients()`: every bucket starts after the backward, the
  way it was before the overlap), `local` (no all-reduce at all: the ranks compute side by side and
  never talk, which separates the cost of the collective from that of two processes sharing the
  cores, caches and memory bandwidth) and, on 1 rank, `half` (a rank's share of the batch alone);
* the all-reduce's exposed share: (step - step without all-reduce) / step, for `after` (before)
  and `overlap` (now), from both clocks;
* the ring all-reduce's cost model, 2 (p - 1) / p x gradient bytes / bandwidth, for 8 and 64
  workers at 10 and 100 Gb/s.
Each 2-rank figure needs both cores: on a machine shared with other jobs, efficiency is
pessimistic (the CPU-time columns and `local` say how much).
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
import tempfile
import time

import numpy as np
from common import REPO, machine_description, markdown_table, package_version

MODELS = {"mlp": ([784, 1024, 1024, 10], 256), "digits": ([64, 256, 128, 10], 32)}
LR, MOMENTUM = 0.01, 0.9


def weights(sizes, seed=0):
    """The models' initial weights, (out, in) and (out,) float32, the same for every framework."""
    rng = np.random.default_rng(seed)
    out = []
    for n_in, n_out in zip(sizes[:-1], sizes[1:]):
        bound = 1 / np.sqrt(n_in)
        out += [rng.uniform(-bound, bound, (n_out, n_in)).astype(np.float32),
                rng.uniform(-bound, bound, n_out).astype(np.float32)]
    return out


def dataset(sizes, batch):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((batch * 8, sizes[0])).astype(np.float32)
    y = rng.integers(0, sizes[-1], batch * 8)
    return X, y


def shards(X, y, batch, rank, world):
    """The k-th global batch of `batch` rows, this rank's contiguous share of it."""
    per = batch // world
    return [(X[k:k + batch][rank * per:(rank + 1) * per], y[k:k + batch][rank * per:(rank + 1) * per])
            for k in range(0, len(X), batch)]


# ----- the same step in NumPy: the 1-rank target's baseline ---------------------------------------

def numpy_step(params, buffers, x, y):
    """Forward, backward and SGD-with-momentum update of the ReLU MLP, written in NumPy."""
    n = len(x)
    hs, zs = [x], []
    for i in range(0, len(params), 2):
        z = hs[-1] @ params[i].T + params[i + 1]
        zs.append(z)
        hs.append(np.maximum(z, 0) if i + 2 < len(params) else z)
    logits = hs.pop()
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    g = e / e.sum(axis=1, keepdims=True)                    # softmax; cross-entropy's gradient:
    g[np.arange(n), y] -= 1
    g /= n
    grads = [None] * len(params)
    for i in range(len(params) - 2, -1, -2):
        grads[i], grads[i + 1] = g.T @ hs[i // 2], g.sum(axis=0)
        if i:
            g = g @ params[i]
            g *= zs[i // 2 - 1] > 0
    for p, buf, gp in zip(params, buffers, grads):
        buf *= MOMENTUM
        buf += gp
        p -= LR * buf


# ----- tinytensor: every rank runs this under mpiexec ---------------------------------------------

def tt_worker(args):
    import tinytensor as tt
    dist = tt.distributed
    dist.init()
    rank, world = dist.rank(), dist.world_size()
    results = {}
    for name in args.models:
        sizes, batch = MODELS[name]
        def wrapped(allreduce, zero=False):
            layers = []
            for n_in, n_out in zip(sizes[:-1], sizes[1:]):
                layers += [tt.nn.Linear(n_in, n_out, dtype=np.float32), tt.nn.ReLU()]
            model = tt.nn.Sequential(*layers[:-1])
            for p, w in zip(model.parameters(), weights(sizes)):
                p.data[...] = w
            ddp = tt.nn.parallel.DistributedDataParallel(model, gradient_as_bucket_view=args.bucket_view,
                                                         allreduce=allreduce)
            if zero:                                        # the update sharded, parameters shared
                return model, ddp, tt.distributed.optim.ZeroRedundancyOptimizer(
                    ddp.parameters(), optimizer_class=tt.optim.SGD, lr=LR, momentum=MOMENTUM)
            return model, ddp, tt.optim.SGD(ddp.parameters(), lr=LR, momentum=MOMENTUM)

        model, ddp, opt = wrapped(args.allreduce)          # "auto": shared memory on one machine
        mpi = wrapped("mpi")                                # the MPI path, for comparison
        zero = wrapped(args.allreduce, zero=True)           # ZeroRedundancyOptimizer over DDP
        loss_fn = tt.nn.CrossEntropyLoss()
        X, y = dataset(sizes, batch)
        batches = shards(X, y, batch, rank, world)
        halves = shards(X, y, batch, 0, 2)                  # a rank's share, on 1 rank alone

        def step(i, mode):
            xb, yb = (halves if mode == "half" else batches)[i % len(batches)]
            if mode in ("mpi", "zero"):                     # MPI's Iallreduce; ZeRO's sharded step
                _, ddp_other, opt_other = mpi if mode == "mpi" else zero
                opt_other.zero_grad()
                loss_fn(ddp_other(xb), yb).backward()
                opt_other.step()
                return
            opt.zero_grad()
            if mode == "overlap":
                loss_fn(ddp(xb), yb).backward()             # buckets start during the backward
            else:
                with ddp.no_sync():
                    loss_fn(ddp(xb), yb).backward()
                if mode == "after":
                    ddp.sync_gradients()                    # every bucket after the backward
            opt.step()

        modes = ["overlap", "zero", "mpi", "after", "local"] + (["half"] if world == 1 else [])
        walls = {m: [] for m in modes}
        cpus = {m: [] for m in modes}
        if world == 1:
            params = weights(sizes)
            buffers = [np.zeros_like(p) for p in params]
            walls["numpy"], cpus["numpy"] = [], []
            modes.append("numpy")
        for m in modes:                                     # warm-up
            for i in range(3):
                numpy_step(params, buffers, *batches[i % len(batches)]) if m == "numpy" else step(i, m)
        for i in range(args.steps):                         # modes interleaved: one load for all
            for m in modes:
                dist.barrier()                              # the ranks start each step together
                w0, c0 = time.perf_counter(), time.process_time()
                numpy_step(params, buffers, *batches[i % len(batches)]) if m == "numpy" else step(i, m)
                walls[m].append(time.perf_counter() - w0)
                cpus[m].append(time.process_time() - c0)
        row = {}
        for m in modes:
            slowest = dist.all_reduce(np.array(walls[m]), op="max")     # a step lasts its slowest rank
            row[m] = {"wall": float(np.median(slowest)), "cpu": float(statistics.median(cpus[m]))}
        row["buckets"] = len(ddp._reducer.buckets)
        row["shared"] = ddp._reducer.window is not None
        row["zero_shared"] = zero[2]._window is not None
        row["grad_bytes"] = int(sum(p.data.nbytes for p in model.parameters()))
        results[name] = row
    if dist.is_main():
        print("RESULT " + json.dumps(results), flush=True)


# ----- PyTorch DDP (gloo), the same model and batches ----------------------------------------------

def torch_worker(args):
    import torch
    import torch.distributed as tdist
    torch.set_num_threads(1)
    rank, world = args.rank, args.world
    tdist.init_process_group("gloo", init_method=args.init, rank=rank, world_size=world)
    results = {}
    for name in args.models:
        sizes, batch = MODELS[name]
        layers = []
        for n_in, n_out in zip(sizes[:-1], sizes[1:]):
            layers += [torch.nn.Linear(n_in, n_out), torch.nn.ReLU()]
        model = torch.nn.Sequential(*layers[:-1])
        with torch.no_grad():
            for p, w in zip(model.parameters(), weights(sizes)):
                p.copy_(torch.from_numpy(w))
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        opt = torch.optim.SGD(ddp.parameters(), lr=LR, momentum=MOMENTUM)
        loss_fn = torch.nn.CrossEntropyLoss()
        X, y = dataset(sizes, batch)
        batches = [(torch.from_numpy(xb.copy()), torch.from_numpy(yb.copy()))
                   for xb, yb in shards(X, y, batch, rank, world)]

        def step(i, mode):
            xb, yb = batches[i % len(batches)]
            opt.zero_grad()
            if mode == "overlap":
                loss_fn(ddp(xb), yb).backward()
            else:
                with ddp.no_sync():
                    loss_fn(ddp(xb), yb).backward()
            opt.step()

        modes = ["overlap", "local"]
        walls = {m: [] for m in modes}
        cpus = {m: [] for m in modes}
        for m in modes:
            for i in range(3):
                step(i, m)
        for i in range(args.steps):
            for m in modes:
                tdist.barrier()
                w0, c0 = time.perf_counter(), time.process_time()
                step(i, m)
                walls[m].append(time.perf_counter() - w0)
                cpus[m].append(time.process_time() - c0)
        row = {}
        for m in modes:
            slowest = torch.tensor(walls[m])
            tdist.all_reduce(slowest, op=tdist.ReduceOp.MAX)
            row[m] = {"wall": float(slowest.median()), "cpu": float(statistics.median(cpus[m]))}
        results[name] = row
    if rank == 0:
        print("RESULT " + json.dumps(results), flush=True)
    tdist.destroy_process_group()


def run_torch(args, n, env):
    """n processes of torch_worker, rendezvous through a file; None (and why) without torch."""
    if package_version("torch") is None:
        return None, "torch is not installed"
    with tempfile.TemporaryDirectory() as tmp:
        init = f"file://{os.path.join(tmp, 'rendezvous')}"
        cmd = [sys.executable, __file__, "--torch-worker", "--world", str(n), "--init", init,
               "--steps", str(args.steps), "--models", *args.models]
        procs = [subprocess.Popen(cmd + ["--rank", str(r)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  stdin=subprocess.DEVNULL, text=True, env=env) for r in range(n)]
        outs = []
        try:
            for p in procs:
                outs.append(p.communicate(timeout=1200))
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            return None, "PyTorch DDP did not finish in 20 minutes"
    line = [ln for ln in outs[0][0].splitlines() if ln.startswith("RESULT ")]
    if any(p.returncode for p in procs) or not line:
        return None, "PyTorch DDP failed: " + " ".join(err[-300:] for _, err in outs)
    return json.loads(line[0][7:]), None


# ----- the report ----------------------------------------------------------------------------------

def ms(seconds):
    return f"{seconds * 1e3:.1f} ms"


def efficiency(base, run, n, mode, clock):
    """throughput(n) / (n x throughput(1)) of one mode, by one clock ("wall" or "cpu"), in %."""
    return base[mode][clock] / (n * run[mode][clock]) * 100


def exposed(run, mode, n):
    """The all-reduce's exposed share of the step: (step - step without all-reduce) / step."""
    if mode == "local" or n == 1:
        return "—"
    return ", ".join(f"{max(run[mode][c] - run['local'][c], 0.0) / run[mode][c] * 100:.0f} % {what}"
                     for c, what in (("wall", "wall"), ("cpu", "CPU")))


def rows_for(framework, runs, name, ranks, modes, batch):
    rows = []
    base = runs[ranks[0]][name]
    for n in ranks:
        r = runs[n][name]
        for m in modes:
            rows.append([framework, str(n), m, ms(r[m]["wall"]), ms(r[m]["cpu"]),
                         f"{batch / r[m]['wall']:,.0f}/s", f"{efficiency(base, r, n, m, 'wall'):.0f} %",
                         f"{efficiency(base, r, n, m, 'cpu'):.0f} %", exposed(r, m, n)])
    return rows


def report(name, tt_runs, torch_runs, ranks):
    sizes, batch = MODELS[name]
    one = tt_runs[ranks[0]][name]
    print(f"### {name}: {'-'.join(map(str, sizes))}, global batch {batch}, float32, "
          f"{one['grad_bytes'] / 1e6:.2f} MB of gradients in {one['buckets']} bucket(s)\n")
    ratio_wall = one["overlap"]["wall"] / one["numpy"]["wall"]
    ratio_cpu = one["overlap"]["cpu"] / one["numpy"]["cpu"]
    print(f"1 rank: DDP step {ms(one['overlap']['wall'])} vs the same step in NumPy "
          f"{ms(one['numpy']['wall'])}: {ratio_wall:.2f}x wall, {ratio_cpu:.2f}x CPU (target <= 1.1x)")
    h = one["half"]
    print(f"1 rank alone at batch {batch // 2} (a rank's share, no neighbour): {ms(h['wall'])} wall, "
          f"{ms(h['cpu'])} CPU per step\n")
    rows = rows_for("tinytensor", tt_runs, name, ranks, ("overlap", "zero", "mpi", "after", "local"), batch)
    if torch_runs is not None:
        rows += rows_for("PyTorch DDP (gloo)", torch_runs, name, ranks, ("overlap", "local"), batch)
    print(markdown_table(["framework", "ranks", "step", "step (wall)", "CPU/rank", "throughput",
                          "efficiency (wall)", "efficiency (CPU)", "all-reduce exposed"], rows, "lllrrrrrr"))
    for n in ranks[1:]:
        line = []
        for framework, runs in (("tinytensor", tt_runs), ("PyTorch DDP", torch_runs)):
            if runs is not None:
                base, run = runs[ranks[0]][name], runs[n][name]
                line.append(f"{framework} {efficiency(base, run, n, 'overlap', 'wall'):.0f} % "
                            f"({efficiency(base, run, n, 'overlap', 'cpu'):.0f} % by CPU time)")
                if framework == "tinytensor":
                    path = "shared memory" if run["shared"] else "MPI"
                    zero_path = "parameters in shared memory" if run["zero_shared"] else "MPI broadcasts"
                    # against the plain 1-rank step (`overlap`), as every other framework's figure
                    zero_wall = base["overlap"]["wall"] / (n * run["zero"]["wall"]) * 100
                    zero_cpu = base["overlap"]["cpu"] / (n * run["zero"]["cpu"]) * 100
                    line.insert(0, f"tinytensor ZeroRedundancyOptimizer ({zero_path}) {zero_wall:.0f} % "
                                   f"({zero_cpu:.0f} % by CPU time)")
                    line[-1] += (f" through {path}, {efficiency(base, run, n, 'mpi', 'wall'):.0f} % "
                                 f"({efficiency(base, run, n, 'mpi', 'cpu'):.0f} % by CPU time) through MPI, "
                                 f"{efficiency(base, run, n, 'local', 'wall'):.0f} % "
                                 f"({efficiency(base, run, n, 'local', 'cpu'):.0f} %) with no all-reduce")
        print(f"\ntarget, {n} ranks, efficiency >= 80 %: {', '.join(line)}")
    print()


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
    p.add_argument("--steps", type=int, default=30, help="timed steps per configuration")
    p.add_argument("--ranks", type=int, nargs="+", default=[1, 2])
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    p.add_argument("--bucket-view", action="store_true",
                   help="DistributedDataParallel(gradient_as_bucket_view=True): no copy out of the buckets")
    p.add_argument("--allreduce", default="auto", choices=["auto", "shared", "mpi"],
                   help="the `overlap` and `after` rows' DistributedDataParallel(allreduce=) (default auto: "
                        "shared memory when every rank is on this machine); the `mpi` row is always MPI")
    p.add_argument("--no-torch", action="store_true", help="skip PyTorch DDP")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    p.add_argument("--world", type=int, help=argparse.SUPPRESS)
    p.add_argument("--init", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return tt_worker(args)
    if args.torch_worker:
        return torch_worker(args)
    if args.ranks[0] != 1:
        raise SystemExit("--ranks must start with 1 (the baseline of the efficiency)")
    mpiexec = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which("mpiexec")
    if mpiexec is None:
        raise SystemExit('no mpiexec: pip install -e ".[distributed]"')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    load_before = os.getloadavg()[0]
    tt_runs, torch_runs, why = {}, {}, None
    for n in args.ranks:
        cmd = [mpiexec, "-n", str(n), sys.executable, __file__, "--worker", "--steps", str(args.steps),
               "--models", *args.models, "--allreduce", args.allreduce]
        cmd += ["--bucket-view"] if args.bucket_view else []
        out = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, env=env,
                             timeout=1200)
        line = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
        if out.returncode or not line:
            raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stdout}\n{out.stderr}")
        tt_runs[n] = json.loads(line[0][7:])
        if args.no_torch:
            why = "--no-torch"
        elif why is None:
            torch_runs[n], why = run_torch(args, n, env)
    if why is not None:
        torch_runs = None
    print("\n".join(machine_description([("torch", package_version("torch") or "not installed")])))
    print(f"load average (1 min): {load_before:.1f} at the start, {os.getloadavg()[0]:.1f} at the end, on "
          f"{os.cpu_count()} cores (above ~0.5 the machine is shared: 2-rank figures are pessimistic)")
    print(f"per step: median over {args.steps} steps (wall: of the slowest rank); one BLAS thread per "
          f"rank; the modes interleaved step by step")
    if torch_runs is None:
        print(f"PyTorch DDP skipped: {why}")
    print()
    for name in args.models:
        report(name, tt_runs, torch_runs, args.ranks)
    grad_bytes = tt_runs[args.ranks[0]][args.models[0]]["grad_bytes"]
    print(f"ring all-reduce, on paper, for {args.models[0]}'s {grad_bytes / 1e6:.2f} MB of gradients "
          f"(2 (p-1)/p x bytes / bandwidth; latency ignored):")
    print(markdown_table(["workers p", "link", "bytes sent per worker", "time per step"],
                         ring_model(grad_bytes)))


if __name__ == "__main__":
    main()
