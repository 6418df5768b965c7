"""Checks that need several processes: run as `mpiexec -n 2 python mpi_checks.py MODE [DIR]`
(test_distributed.py launches it). Every check asserts; the last line on rank 0 is "OK <mode>".

    collectives   all_reduce / broadcast / all_gather, sharding, equivalence (SGD momentum, Adam),
                  no_sync, unused parameters, buckets, tt.save; then the cases that were silent
                  or hung: mismatched collectives and models raise on every rank (and the ranks
                  stay aligned after), placeholders off the root, per-rank seeds, backwards that
                  bypass the wrapper, join() for uneven inputs
    raise         rank 1 raises while rank 0 waits in a collective: every rank must exit
    exit          rank 1 calls sys.exit(0) between two steps: rank 0 must abort, naming it
    uneven        rank 1 has fewer batches and ends normally (no join()): rank 0 must abort
    midway        rank 1's backward raises (caught) after two buckets started: the job must end
    timeout       rank 1 sleeps while rank 0 waits in all_reduce: the watchdog (1 s) aborts
    preinit       rank 1 fails before init(): rank 0 must not stay inside init()
"""

import contextlib
import itertools
import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import tinytensor as tt  # noqa: E402

dist = tt.distributed
DDP = tt.nn.parallel.DistributedDataParallel


def check_collectives():
    r, w = dist.rank(), dist.world_size()
    a = np.arange(6.0).reshape(2, 3) + 10 * r
    total = sum(np.arange(6.0).reshape(2, 3) + 10 * k for k in range(w))
    assert np.array_equal(dist.all_reduce(a), total)
    assert np.array_equal(dist.all_reduce(a, op="mean"), total / w)
    assert np.array_equal(dist.all_reduce(a, op="max"), np.arange(6.0).reshape(2, 3) + 10 * (w - 1))
    assert np.array_equal(a, np.arange(6.0).reshape(2, 3) + 10 * r)          # the input is untouched
    i = dist.all_reduce(np.array([r, 1]), op="mean")                          # integers: a float mean
    assert i.dtype == np.float64 and np.allclose(i, [(w - 1) / 2, 1])
    t = dist.all_reduce(tt.tensor(a, requires_grad=True))
    assert isinstance(t, tt.Tensor) and not t.requires_grad and np.array_equal(t.data, total)
    f = dist.all_reduce(float(r + 1))
    assert isinstance(f, float) and f == w * (w + 1) / 2
    flags = np.array([r == 0, True, False])
    assert np.array_equal(dist.all_reduce(flags), [1, w, 0])                  # booleans: counts
    assert np.array_equal(dist.all_reduce(flags, op="max"), [True, True, False])
    assert np.array_equal(dist.all_reduce(flags, op="min"), [w == 1, True, False])
    assert np.array_equal(dist.all_reduce(np.ones(2, np.float16)), [w, w])
    f32 = dist.all_reduce(np.ones(3, np.float32), op="mean")
    assert f32.dtype == np.float32
    b = dist.broadcast(np.full((3,), float(r)), root=w - 1)
    assert np.array_equal(b, np.full(3, w - 1.0))
    assert dist.broadcast({"seed": 7} if r == 0 else None) == {"seed": 7}     # objects are pickled
    g = dist.all_gather(np.array([r, 2 * r]))
    assert g.shape == (w, 2) and np.array_equal(g[:, 0], np.arange(w))
    assert np.array_equal(dist.all_gather(r), np.arange(w))
    assert dist.all_gather(f"rank{r}") == [f"rank{k}" for k in range(w)]
    try:
        dist.all_reduce(a, op="prod")
    except ValueError as err:
        assert "'sum'" in str(err)
    else:
        raise AssertionError("op='prod' was accepted")
    dist.barrier()


def check_sharding():
    r, w = dist.rank(), dist.world_size()
    for n, b, drop_last in ((103, 8, False), (96, 8, False), (103, 8, True), (3, 4, False)):
        X = np.arange(n, dtype=float)[:, None]
        y = np.arange(n)
        mine = [yb.tolist() for _, yb in tt.data.minibatches(X, y, b, rng=5, rank=r, world_size=w,
                                                              drop_last=drop_last)]
        every = dist.all_gather(mine)                       # each rank's batches
        assert len({len(batches) for batches in every}) == 1, "ranks got different numbers of batches"
        single = [yb.tolist() for _, yb in tt.data.minibatches(X, y, b * w, rng=5, drop_last=drop_last)]
        assert len(single) == len(every[0])
        for k, global_batch in enumerate(single):           # the k-th batches together: one global batch
            union = sorted(i for batches in every for i in batches[k])
            if n >= w or len(global_batch) >= w:
                assert union == sorted(global_batch), (n, b, k)
        seen = sorted(i for batches in every for batch in batches for i in batch)
        if drop_last:
            assert len(seen) == len(set(seen)) == n - n % (b * w)
        elif n >= w:
            assert seen == list(range(n)), "a pass must cover every sample exactly once"
    try:
        next(tt.data.minibatches(np.zeros((4, 1)), np.zeros(4), 2, rank=0, world_size=2))
    except ValueError as err:
        assert "same permutation" in str(err)
    else:
        raise AssertionError("an unseeded sharded shuffle was accepted")


def make_model(seed, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return tt.nn.Sequential(tt.nn.Linear(12, 32, rng=rng, dtype=dtype), tt.nn.Tanh(),
                            tt.nn.Linear(32, 16, rng=rng, dtype=dtype), tt.nn.ReLU(),
                            tt.nn.Linear(16, 4, rng=rng, dtype=dtype))


def data():
    rng = np.random.default_rng(123)
    X = rng.standard_normal((320, 12))
    y = (X[:, :4] @ rng.standard_normal((4, 4))).argmax(axis=1)
    return X, y


def train(model, make_opt, batch, steps, rank=None, world_size=None, wrap=None):
    X, y = data()
    net = wrap(model) if wrap else model
    opt = make_opt(net.parameters())
    loss_fn = tt.nn.CrossEntropyLoss()
    done = 0
    for epoch in range(10):
        for xb, yb in tt.data.minibatches(X, y, batch, rng=epoch, rank=rank, world_size=world_size):
            loss = loss_fn(net(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            done += 1
            if done == steps:
                return [p.data.copy() for p in model.parameters()]
    raise AssertionError("not enough data for the steps")


def check_equivalence():
    r, w = dist.rank(), dist.world_size()
    B = 32
    opts = {"sgd": lambda ps: tt.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=1e-3),
            "adam": lambda ps: tt.optim.Adam(ps, lr=1e-2)}
    for name, make_opt in opts.items():
        reference = train(make_model(0), make_opt, B, 20)                # one process, batch B
        # every rank starts from a different init: the wrapper must broadcast rank 0's
        ddp = train(make_model(r * 1000), make_opt, B // w, 20, rank=r, world_size=w, wrap=DDP)
        local = train(make_model(0), make_opt, B // w, 20, rank=r, world_size=w)   # no averaging
        err = max(float(np.max(np.abs(a - b))) for a, b in zip(ddp, reference))
        gap = max(float(np.max(np.abs(a - b))) for a, b in zip(local, reference))
        assert err < 1e-12, f"{name}: {w} ranks differ from one process by {err:.3g}"
        assert w == 1 or gap > 1e-6, f"{name}: the check cannot fail (local gap {gap:.3g})"
        same = dist.all_gather(np.concatenate([p.ravel() for p in ddp]))
        assert all(np.array_equal(same[0], s) for s in same), "the replicas drifted apart"
        if dist.is_main():
            print(f"equivalence {name}: max |params({w} ranks, B/{w}) - params(1 process, B)| = {err:.2e} "
                  f"after 20 steps (unsynchronised ranks: {gap:.2e})")


def check_zero():
    """ZeroRedundancyOptimizer: 2 ranks at B/2 equal one process with the plain optimizer at B (SGD
    with momentum and weight decay, Adam, AdamW), through shared memory (parameters in one window,
    the update sharded) and through MPI (whole parameters dealt out, broadcast after); the state
    is sharded; its consolidated state dict is the plain optimizer's and loads back; .grad are the
    whole mean and read-only; clipping works; join() is refused."""
    r, w = dist.rank(), dist.world_size()
    ZeRO = tt.distributed.optim.ZeroRedundancyOptimizer
    X, y = data()
    B, steps = w * (32 // w), 20
    opts = {"sgd": (tt.optim.SGD, dict(lr=0.05, momentum=0.9, weight_decay=1e-3)),
            "adam": (tt.optim.Adam, dict(lr=1e-2)),
            "adamw": (tt.optim.AdamW, dict(lr=1e-2, weight_decay=0.1))}
    loss_fn = tt.nn.CrossEntropyLoss()
    for (name, (cls, kw)), allreduce in itertools.product(opts.items(), ("auto", "mpi")):
        ref = make_model(0)
        ref_opt = cls(ref.parameters(), **kw)
        model = make_model(r * 1000)                      # rank 0's weights are broadcast at the wrap
        ddp = DDP(model, bucket_cap_mb=0.001, allreduce=allreduce)   # several buckets
        opt = ZeRO(ddp.parameters(), optimizer_class=cls, **kw)
        assert (opt._window is not None) == (allreduce == "auto" and w > 1), "the wrong path"
        done = 0
        for epoch in range(10):
            whole = tt.data.minibatches(X, y, B, rng=epoch, drop_last=True)
            mine = tt.data.minibatches(X, y, B // w, rng=epoch, rank=r, world_size=w, drop_last=True)
            for (xb, yb), (xr, yr) in zip(whole, mine):
                ref_opt.zero_grad()
                loss_fn(ref(xb), yb).backward()
                opt.zero_grad()
                loss_fn(ddp(xr), yr).backward()
                if done == 3:        # the whole mean on every rank, read-only in shared memory
                    for p, q in zip(model.parameters(), ref.parameters()):
                        assert np.allclose(p.grad, q.grad, rtol=0, atol=1e-13), f"{name}: not the mean"
                    if opt._window is not None:
                        assert not model[0].weight.grad.flags.writeable
                ref_opt.step()
                opt.step()
                done += 1
                if done == steps:
                    break
            if done == steps:
                break
        pairs = list(zip(model.parameters(), ref.parameters()))
        err = max(float(np.max(np.abs(p.data - q.data))) for p, q in pairs)
        assert err < 1e-12, f"zero {name} {allreduce}: {w} ranks differ from one process by {err:.3g}"
        same = dist.all_gather(np.concatenate([p.data.ravel() for p in model.parameters()]))
        assert all(np.array_equal(same[0], s) for s in same), "the replicas drifted apart"
        # sharded state: this rank holds about 1/w of it
        held = sum(v.size for e in opt.state.values() for v in e.values() if isinstance(v, np.ndarray))
        total = sum(v.size for e in ref_opt.state.values() for v in e.values() if isinstance(v, np.ndarray))
        assert w == 1 or held < 0.8 * total, f"zero {name}: rank {r} holds {held} of {total} state entries"
        # the consolidated state dict is the plain optimizer's (rank 0), and loads back on every rank
        opt.consolidate_state_dict(to=0)
        if r == 0:
            sd, want = opt.state_dict(), ref_opt.state_dict()
            assert sd["param_groups"] == want["param_groups"]
            assert sorted(sd["state"]) == sorted(want["state"])
            for i in want["state"]:
                for k, v in want["state"][i].items():
                    got = sd["state"][i][k]
                    assert np.shape(got) == np.shape(v), (name, i, k)
                    assert np.allclose(got, v, rtol=0, atol=1e-12), (name, i, k)
        else:
            raises_everywhere_local = False
            try:
                opt.state_dict()
            except RuntimeError as err:
                raises_everywhere_local = "consolidate_state_dict(to=0)" in str(err)
            assert raises_everywhere_local, "state_dict() off the consolidating rank must raise"
        sd = dist.broadcast(opt.state_dict() if r == 0 else None)
        fresh = ZeRO(DDP(make_model(0), bucket_cap_mb=0.001, allreduce=allreduce).parameters(),
                     optimizer_class=cls, **kw)
        fresh.load_state_dict(sd)
        fresh.consolidate_state_dict(to=0)
        if r == 0:
            again = fresh.state_dict()
            for i in sd["state"]:
                for k, v in sd["state"][i].items():
                    assert np.array_equal(again["state"][i][k], v), (name, "load_state_dict", i, k)
        if dist.is_main():
            print(f"zero {name} ({'shared memory' if opt._window is not None else 'MPI'}): max |params({w} "
                  f"ranks, B/{w}) - params(1 process, B)| = {err:.2e} after {steps} steps; state "
                  f"{held} of {total} entries on rank 0")
    # a parameter no rank uses keeps grad None and its value; the others step as the plain optimizer's
    class Two(tt.nn.Module):
        def __init__(self, seed):
            super().__init__()
            self.used = tt.nn.Linear(12, 4, rng=seed, dtype=np.float64)
            self.unused = tt.nn.Linear(4, 4, rng=seed + 1, dtype=np.float64)

        def forward(self, x):
            return self.used(x)
    two, ref = Two(0), Two(0)
    ddp = DDP(two)
    opt = ZeRO(ddp.parameters(), tt.optim.SGD, lr=0.1, momentum=0.9)
    ref_opt = tt.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    n = 16 // w                                           # rows per rank
    for step in range(3):
        xb, yb = X[n * w * step:n * w * (step + 1)], y[n * w * step:n * w * (step + 1)]
        opt.zero_grad()
        loss_fn(ddp(xb[r * n:(r + 1) * n]), yb[r * n:(r + 1) * n]).backward()
        assert all(p.grad is None for p in two.unused.parameters())
        opt.step()
        ref_opt.zero_grad()
        loss_fn(ref(xb), yb).backward()
        ref_opt.step()
    for p, q in zip(two.parameters(), ref.parameters()):
        assert np.allclose(p.data, q.data, rtol=0, atol=1e-13)
    assert np.array_equal(two.unused.weight.data, Two(0).unused.weight.data)

    # accumulation: two local backwards under no_sync, then a synchronised one, then the step
    model, ref = make_model(0), make_model(0)
    ddp = DDP(model)
    opt, ref_opt = ZeRO(ddp.parameters(), tt.optim.Adam, lr=1e-2), tt.optim.Adam(ref.parameters(), lr=1e-2)
    for step in range(2):
        rows = [X[8 * w * (3 * step + k):8 * w * (3 * step + k + 1)] for k in range(3)]
        labels = [y[8 * w * (3 * step + k):8 * w * (3 * step + k + 1)] for k in range(3)]
        opt.zero_grad()
        ref_opt.zero_grad()
        for k in range(3):
            with ddp.no_sync() if k < 2 else contextlib.nullcontext():
                loss_fn(ddp(rows[k][8 * r:8 * (r + 1)]), labels[k][8 * r:8 * (r + 1)]).backward()
            loss_fn(ref(rows[k]), labels[k]).backward()
        opt.step()
        ref_opt.step()
    for p, q in zip(model.parameters(), ref.parameters()):
        assert np.allclose(p.data, q.data, rtol=0, atol=1e-13), "no_sync accumulation with ZeRO"
    if opt._window is not None:       # a model cast after the optimizer was built: refused
        model.to(np.float32)
        try:
            opt.step()
            raise AssertionError("a step on parameters moved out of the window went through")
        except RuntimeError as err:
            assert "no longer lives in the shared memory" in str(err), err

    # clipping rebinds the read-only .grad; an in-place change is refused by NumPy; join() refused
    model = make_model(0)
    ddp = DDP(model)
    opt = ZeRO(ddp.parameters(), tt.optim.SGD, lr=0.1)
    loss_fn(ddp(X[:8]), y[:8]).backward()
    if opt._window is not None:
        try:
            model[0].weight.grad *= 2
            raise AssertionError("an in-place change of a shared .grad went through")
        except ValueError:
            pass
    tt.nn.utils.clip_grad_norm_(ddp.parameters(), 1e-3)
    norm = np.sqrt(sum(float(np.sum(p.grad ** 2)) for p in model.parameters()))
    assert abs(norm - 1e-3) < 1e-6, norm
    opt.step()
    if opt._window is not None:
        try:
            with ddp.join():
                pass
            raise AssertionError("join() with a ZeroRedundancyOptimizer went through")
        except RuntimeError as err:
            assert "ZeroRedundancyOptimizer" in str(err)
    dist.barrier()


def check_no_sync_and_buckets():
    r, w = dist.rank(), dist.world_size()
    X, y = data()
    loss_fn = tt.nn.CrossEntropyLoss()
    model = make_model(r)                    # rank 0's weights are broadcast
    ddp = DDP(model, bucket_cap_mb=0.0005)   # 512-byte buckets: one layer each, several messages
    assert len(ddp._reducer.buckets) > 2, "buckets were not split at the cap"
    assert DDP(make_model(0))._reducer.buckets.__len__() == 1, "a small model is one message"
    ref = make_model(0)
    assert all(np.array_equal(p.data, q.data) for p, q in zip(ref.parameters(), model.parameters()))
    batches = list(tt.data.minibatches(X, y, 8, rng=1, rank=r, world_size=w))[:3]
    whole = list(tt.data.minibatches(X, y, 8 * w, rng=1))[:3]
    with ddp.no_sync():
        for xb, yb in batches[:2]:
            loss_fn(ddp(xb), yb).backward()
    local = [p.grad.copy() for p in model.parameters()]
    loss_fn(ddp(batches[2][0]), batches[2][1]).backward()   # the first synchronised backward
    for xb, yb in whole:
        loss_fn(ref(xb), yb).backward()
    for p, q in zip(model.parameters(), ref.parameters()):
        assert np.allclose(p.grad, q.grad, rtol=0, atol=1e-13), "no_sync then one backward: wrong mean"
    differ = dist.all_gather(local[0])               # before the synchronised backward: rank's own
    assert w == 1 or not np.allclose(differ[0], differ[1]), "no_sync averaged the gradients"

    # a parameter no rank uses keeps grad None; the others are averaged
    class Two(tt.nn.Module):
        def __init__(self):
            super().__init__()
            self.used = tt.nn.Linear(12, 4, rng=0, dtype=np.float64)
            self.unused = tt.nn.Linear(4, 4, rng=1, dtype=np.float64)

        def forward(self, x):
            return self.used(x)

    # moved to another dtype after wrapping: the buckets follow
    cast = make_model(0)
    ddp64 = DDP(cast)
    cast.to(np.float32)
    loss_fn(ddp64(batches[0][0].astype(np.float32)), batches[0][1]).backward()
    assert all(p.grad.dtype == np.float32 for p in cast.parameters())
    # buffers (batch norm's running statistics) come from rank 0 at wrap time
    bn = tt.nn.BatchNorm1d(12)
    bn.running_mean.data[...] = r + 1.0
    DDP(bn)
    assert np.array_equal(bn.running_mean.data, np.ones(12)), "buffers were not broadcast"

    two = DDP(Two())
    loss_fn(two(batches[0][0]), batches[0][1]).backward()
    assert all(p.grad is None for p in two.module.unused.parameters())
    assert all(p.grad is not None for p in two.module.used.parameters())
    assert [n for n, _ in two.named_parameters()][0].startswith("module.")


def check_overlap():
    """The buckets start during the backward, as soon as their gradients are complete: with one
    layer per bucket, the two last layers' all-reduces have started when the sweep reaches the
    first layer. The result is bit-for-bit the all-reduce started after the backward (no_sync,
    then sync_gradients()), step after step, in float64 and float32, with accumulation; and on 2
    ranks the shared-memory all-reduce gives the MPI one's numbers bit for bit."""
    r, w = dist.rank(), dist.world_size()
    X, y = data()
    loss_fn = tt.nn.CrossEntropyLoss()
    finals = {}
    for path in ("mpi", "shared"):
        model = make_model(0)
        ddp = DDP(model, bucket_cap_mb=0.0005, allreduce=path)     # one layer per bucket
        assert len(ddp._reducer.buckets) == 3
        seen = []

        def watch(module, args, out):                     # the first layer's output, in the backward
            out.register_hook(lambda g: seen.append(ddp._pending.started))
        model[0].register_forward_hook(watch)
        xb, yb = next(iter(tt.data.minibatches(X, y, 8, rng=0, rank=r, world_size=w)))
        loss_fn(ddp(xb), yb).backward()
        assert seen == [2], f"{path}: buckets started before the first layer's backward: {seen} (want [2])"
        assert ddp._pending is None and (ddp._reducer.window is not None) == (path == "shared")

        for dtype, cap in ((np.float64, 0.0005), (np.float32, 25)):
            runs = []
            for after in (False, True):
                model = make_model(r, dtype)
                ddp = DDP(model, bucket_cap_mb=cap, allreduce=path)
                opt = tt.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
                batches = list(tt.data.minibatches(X.astype(dtype), y, 8, rng=4, rank=r, world_size=w))[:8]
                for k, (xb, yb) in enumerate(batches):
                    if k % 4 == 1:                            # accumulate one batch locally first
                        with ddp.no_sync():
                            loss_fn(ddp(xb), yb).backward()
                        continue
                    if after:
                        with ddp.no_sync():
                            loss_fn(ddp(xb), yb).backward()
                        ddp.sync_gradients()
                    else:
                        loss_fn(ddp(xb), yb).backward()
                    opt.step()
                    opt.zero_grad()
                runs.append(np.concatenate([p.data.ravel() for p in model.parameters()]))
            assert runs[0].dtype == dtype and np.array_equal(runs[0], runs[1]), \
                f"{path} {dtype.__name__}: overlapped != after the backward"
            finals[path, dtype] = runs[0]
        # the averaged gradients are views of the buckets, never overwritten while held: a .grad
        # kept from one step keeps its values; once nothing holds them, the next step reuses the
        # memory (on the shared path: a step while a rank holds one goes through MPI)
        ddp = DDP(make_model(0), bucket_cap_mb=0.0005, allreduce=path)
        opt = tt.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
        batches = list(tt.data.minibatches(X, y, 8, rng=4, rank=r, world_size=w))

        def step(k):
            opt.zero_grad()
            loss_fn(ddp(batches[k][0]), batches[k][1]).backward()
            opt.step()
        step(0)
        kept = [p.grad for p in ddp.parameters()] if r == 0 else []    # one rank holds them
        copies = [g.copy() for g in kept]
        step(1)
        assert all(np.array_equal(k, c) for k, c in zip(kept, copies)), f"{path}: a kept .grad changed"
        assert not any(np.shares_memory(k, p.grad) for k, p in zip(kept, ddp.parameters()))
        del kept, copies
        step(2)
        before = [id(b.buffer) for b in ddp._reducer.buckets]
        step(3)
        assert [id(b.buffer) for b in ddp._reducer.buckets] == before, f"{path}: the buckets were not reused"
        assert all(np.shares_memory(p.grad, ddp._reducer.buckets[ddp._reducer.where[id(p)][0]].buffer)
                   for p in ddp.parameters())
        if path == "shared":
            assert all(b.buffer is b.shared for b in ddp._reducer.buckets)
            # a gradient changed in place on one rank (clipping) stays that rank's own
            if r == 1:
                for p in ddp.parameters():
                    p.grad *= 0.5
            dist.barrier()
            g = dist.all_gather(np.concatenate([p.grad.ravel() for p in ddp.parameters()]))
            assert w == 1 or np.array_equal(g[0] * 0.5, g[1]), "an in-place change reached another rank"
            # gradient_as_bucket_view=True: a kept .grad is the bucket (PyTorch's option), so the
            # rounds stay in shared memory and the kept array shows the next step's mean
            ddp = DDP(make_model(0), bucket_cap_mb=0.0005, allreduce=path, gradient_as_bucket_view=True)
            opt = tt.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
            step(0)
            kept = [p.grad for p in ddp.parameters()]
            step(1)
            assert ddp._reducer.window.rounds == 2, "a kept bucket view sent a round through MPI"
            assert all(k is not p.grad and np.array_equal(k, p.grad) for k, p in zip(kept, ddp.parameters()))
    for dtype in (np.float64, np.float32):
        same = np.array_equal(finals["mpi", dtype], finals["shared", dtype])
        assert same or w > 2, f"{dtype.__name__}: shared memory != MPI on 2 ranks"
        every = dist.all_gather(finals["shared", dtype])
        assert all(np.array_equal(every[0], e) for e in every), "shared memory: the replicas drifted"
    if dist.is_main():
        print("overlap: 2 of 3 buckets started before the first layer's backward; bit-for-bit equal "
              "to the all-reduce after the backward (float64, float32); shared memory == MPI bit for bit")


def check_save(directory):
    import warnings
    r, w = dist.rank(), dist.world_size()
    state = {"w": np.arange(3.0), "rank": r}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tt.save(state, os.path.join(directory, "ckpt.npz"))        # every rank calls it; one writes
        tt.save(state, os.path.join(directory, "ckpt.npz"))
    assert len(caught) == (r != 0), [str(c.message) for c in caught]    # once, off the main rank
    assert r == 0 or "only rank 0 writes it" in str(caught[0].message)
    dist.barrier()
    assert tt.load(os.path.join(directory, "ckpt.npz"))["rank"] == 0
    tt.save(state, os.path.join(directory, f"by_rank{r}.npz"))       # names the rank: every rank writes
    tt.save(state, os.path.join(directory, f"ckpt_{r}"))              # .npz added, as np.savez does
    dist.barrier()
    written = sorted(f for f in os.listdir(directory) if f.startswith("by_rank"))
    assert written == [f"by_rank{k}.npz" for k in range(w)], written
    assert [tt.load(os.path.join(directory, f"ckpt_{k}.npz"))["rank"] for k in range(w)] == list(range(w))
    assert not [f for f in os.listdir(directory) if "partial" in f]


# ----- the cases that were silent or hung: each raises on every rank, and the ranks stay aligned --

def raises_everywhere(fn, *fragments):
    """fn() must raise a RuntimeError holding every fragment, on this rank (and so on every rank:
    each calls this); a barrier after it proves the ranks are still aligned."""
    try:
        fn()
    except RuntimeError as err:
        text = str(err)
        missing = [f for f in fragments if f not in text]
        assert not missing, f"rank {dist.rank()}: {missing} not in: {text}"
    else:
        raise AssertionError(f"rank {dist.rank()}: {fn} did not raise")
    dist.barrier()
    return text


def check_mismatched_collectives():
    r = dist.rank()
    raises_everywhere(lambda: dist.all_reduce(np.ones((2, 3) if r == 0 else (3, 2))),
                      "rank 0 calls all_reduce(op='sum') of an array float64 (2, 3)",
                      "rank 1 calls all_reduce(op='sum') of an array float64 (3, 2)")
    raises_everywhere(lambda: dist.all_reduce(np.ones(3, np.float32 if r == 0 else np.float64)),
                      "float32 (3,)", "float64 (3,)")
    raises_everywhere(lambda: dist.all_reduce(np.ones(3), op="sum" if r == 0 else "max"),
                      "op='sum'", "op='max'")
    raises_everywhere(lambda: dist.all_gather(np.ones(2 + r)), "(2,)", "(3,)", "pass each in a tuple")
    uneven = dist.all_gather((np.ones(2 + r),))                       # the way to gather them
    assert [len(t[0]) for t in uneven] == [2 + k for k in range(dist.world_size())]
    raises_everywhere(lambda: dist.all_gather(np.ones(2) if r == 0 else "text"), "an object")
    raises_everywhere(lambda: dist.all_reduce(np.ones(2)) if r == 0 else dist.broadcast(np.ones(2)),
                      "rank 0 calls all_reduce", "rank 1 calls broadcast(root=0)")
    raises_everywhere(lambda: dist.barrier() if r == 0 else dist.all_reduce(1.0),
                      "rank 0 calls barrier()", "rank 1 calls all_reduce")
    raises_everywhere(lambda: dist.broadcast(np.zeros(3) if r == 0 else np.zeros(4)),
                      "(3,)", "(4,)", "pass None")
    raises_everywhere(lambda: dist.broadcast({"a": 1} if r == 0 else np.zeros(2)), "an object")
    raises_everywhere(lambda: dist.broadcast(np.ones(2), root=r), "root=0", "root=1")
    # Python numbers and None off the root: the root's value everywhere
    three = dist.broadcast(3 if r == 0 else 0.0)
    assert three == 3 and type(three) is int, (three, type(three))
    half = dist.broadcast(2.5 if r == 0 else None)
    assert half == 2.5 and type(half) is float
    f32 = dist.broadcast(np.float32(1.5) if r == 0 else None)
    assert f32 == 1.5 and type(f32) is np.float32
    arr = dist.broadcast(np.arange(6.0).reshape(2, 3) if r == 0 else None)
    assert type(arr) is np.ndarray and np.array_equal(arr, np.arange(6.0).reshape(2, 3))
    ten = dist.broadcast(tt.tensor([1.0, 2.0]) if r == 0 else None)
    assert isinstance(ten, tt.Tensor) and np.array_equal(ten.data, [1.0, 2.0])
    assert dist.broadcast(None) is None
    big = dist.broadcast(2**70 if r == 0 else None)               # beyond int64: pickled
    assert big == 2**70
    mixed = dist.all_reduce(1 if r == 0 else 2.5)                 # numbers are promoted
    assert type(mixed) is float and mixed == 1 + 2.5 * (dist.world_size() - 1)


class Shaped(tt.nn.Module):
    def __init__(self, shape, dtype=np.float64, frozen_value=0.0, frozen_grad=False, extra=False):
        super().__init__()
        self.w = tt.nn.Parameter(np.ones(shape, dtype))
        self.frozen = tt.nn.Parameter(np.full(3, frozen_value))
        self.frozen.requires_grad = frozen_grad
        self.register_buffer("stat", np.full(2, frozen_value))
        if extra:
            self.more = tt.nn.Linear(2, 2, rng=0, dtype=np.float64)

    def forward(self, x):
        return x @ self.w


def check_wrap():
    r = dist.rank()
    raises_everywhere(lambda: DDP(Shaped((2, 3) if r == 0 else (3, 2))),
                      "rank 0 has parameter 'w': shape (2, 3)", "rank 1 has parameter 'w': shape (3, 2)")
    raises_everywhere(lambda: DDP(Shaped((2, 3), np.float32 if r == 0 else np.float64)),
                      "dtype float32", "dtype float64")
    raises_everywhere(lambda: DDP(Shaped((2, 3), extra=r == 1)), "entry 2: rank 0 has buffer 'stat'",
                      "rank 1 has parameter 'more.weight'")
    raises_everywhere(lambda: DDP(Shaped((2, 3), frozen_grad=r == 1)), "requires_grad=False",
                      "requires_grad=True")
    # one rank through shared memory, the other through MPI, would wait for each other forever
    raises_everywhere(lambda: DDP(Shaped((2, 3)), allreduce="mpi" if r == 0 else "auto"),
                      "rank 0 has DistributedDataParallel(allreduce='mpi')", "rank 1 has "
                      "DistributedDataParallel(allreduce='auto')", "the same allreduce= setting")
    model = Shaped((2, 3), frozen_value=float(r + 1))          # a frozen parameter and a buffer differ
    model.w.data[...] = r + 7.0
    DDP(model)
    assert np.array_equal(model.frozen.data, np.ones(3)), "a frozen parameter was not broadcast"
    assert np.array_equal(model.stat, np.ones(2)), "a buffer was not broadcast"
    assert np.array_equal(model.w.data, np.full((2, 3), 7.0))


def check_bypass_and_seeds():
    """A backward through the bare module on rank 0 only does not wait for rank 1; a wrapped
    one still averages. Per-rank shuffling seeds raise on every rank."""
    r, w = dist.rank(), dist.world_size()
    X, y = data()
    loss_fn = tt.nn.CrossEntropyLoss()
    model = make_model(0)
    ddp = DDP(model)
    out = ddp(X[:8])                          # a wrapped forward, its backward comes later
    if r == 0:                                # a saliency map on rank 0 only, through the bare module
        xs = tt.tensor(X[:4], requires_grad=True)
        model(xs).sum().backward()
        assert xs.grad is not None
        ref = make_model(0)
        ref(tt.tensor(X[:4], requires_grad=True)).sum().backward()
        for p, q in zip(model.parameters(), ref.parameters()):
            assert np.array_equal(p.grad, q.grad), "the bare backward's gradients were averaged"
    model.zero_grad()
    loss_fn(out, y[:8] if r == 0 else y[8:16]).backward()      # through the wrapper: averaged
    grads = dist.all_gather(np.concatenate([p.grad.ravel() for p in model.parameters()]))
    assert all(np.array_equal(grads[0], g) for g in grads), "the wrapped backward was not averaged"
    with tt.no_grad():
        if r == 0:
            ddp(X[:4])                        # an evaluation on rank 0 only: no collective
    # tt.grad through the wrapper (a gradient penalty) is a sweep, not a backward: it must not arm
    # the next backward, here a bare one on rank 0 only
    tt.grad(lambda x: ddp(x).sum())(X[:4])
    if r == 0:
        model(tt.tensor(X[:4], requires_grad=True)).sum().backward()
    # two wrappers of one shape in one backward (a GAN's generator and discriminator): each is
    # averaged with its own counterpart (the same order on every rank)
    gen, disc = make_model(r), make_model(r + 10)
    ddp_g, ddp_d = DDP(gen), DDP(disc)
    ddp_d(tt.concatenate([ddp_g(X[8 * r:8 * r + 8]), tt.tensor(X[:8, 4:])], axis=1)).sum().backward()
    for net in (gen, disc):
        every = dist.all_gather(np.concatenate([p.grad.ravel() for p in net.parameters()]))
        assert all(np.array_equal(every[0], e) for e in every), "two wrappers' gradients were mixed"
    ref_g, ref_d = make_model(0), make_model(10)
    for k in range(w):
        ref_d(tt.concatenate([ref_g(X[8 * k:8 * k + 8]), tt.tensor(X[:8, 4:])], axis=1)).sum().backward()
    for net, ref in ((gen, ref_g), (disc, ref_d)):
        for p, q in zip(net.parameters(), ref.parameters()):
            assert np.allclose(p.grad, q.grad / w, rtol=0, atol=1e-12), "two wrappers: wrong mean"
    raises_everywhere(lambda: next(tt.data.minibatches(X, y, 8, rng=r, rank=r, world_size=w)),
                      "rank 0 and rank 1 drew different permutations", "not seed + rank")
    raises_everywhere(lambda: next(tt.data.minibatches(X[:100 + r], y[:100 + r], 8, rng=0, rank=r,
                                                       world_size=w)),
                      "hold different numbers of rows", "100 rows", "101 rows")


def make_bn_model(seed):
    rng = np.random.default_rng(seed)
    return tt.nn.Sequential(tt.nn.Linear(12, 16, rng=rng, dtype=np.float64), tt.nn.BatchNorm1d(16),
                            tt.nn.Tanh(), tt.nn.Linear(16, 4, rng=rng, dtype=np.float64))


def check_join():
    """Uneven inputs: rank 0 has 5 batches, the others 3. Inside join() the longer rank trains on;
    the result equals the sum of the active ranks' gradients over world_size (or over the active
    count), step by step; the replicas stay equal; other collectives and throw_on_early_termination
    raise on every rank."""
    r, w = dist.rank(), dist.world_size()
    X, y = data()
    loss_fn = tt.nn.CrossEntropyLoss()
    steps = [5 if j == 0 else 3 for j in range(w)]
    whole = list(tt.data.minibatches(X, y, 8 * w, rng=3))[:max(steps)]
    shares = [[(xb[j::w], yb[j::w]) for xb, yb in whole] for j in range(w)]
    for initial in (True, False):
        model = make_bn_model(r)
        ddp = DDP(model)
        opt = tt.optim.SGD(ddp.parameters(), lr=0.1)
        with ddp.join(divide_by_initial_world_size=initial):
            for xb, yb in shares[r][:steps[r]]:
                loss = loss_fn(ddp(xb), yb)
                opt.zero_grad()
                loss.backward()
                opt.step()
        final = np.concatenate([p.data.ravel() for p in model.parameters()])
        every = dist.all_gather(final)
        assert all(np.array_equal(every[0], e) for e in every), "the replicas drifted apart in join()"
        ref = make_bn_model(0)
        refs = {}
        for divisor_rule in ("initial", "active"):
            net = make_bn_model(0)
            for k in range(max(steps)):
                active = [j for j in range(w) if k < steps[j]]
                total = [np.zeros_like(p.data) for p in net.parameters()]
                divisor = w if divisor_rule == "initial" else len(active)
                for j in active:             # divided before the sum, as the wrapper packs them
                    net.zero_grad()
                    loss_fn(net(shares[j][k][0]), shares[j][k][1]).backward()
                    total = [t + p.grad / divisor for t, p in zip(total, net.parameters())]
                for p, t in zip(net.parameters(), total):
                    p.data -= 0.1 * t
            refs[divisor_rule] = np.concatenate([p.data.ravel() for p in net.parameters()])
        del ref
        want, other = (refs["initial"], refs["active"]) if initial else (refs["active"], refs["initial"])
        err = float(np.max(np.abs(final - want)))
        assert err < 1e-12, f"join(divide_by_initial_world_size={initial}): off by {err:.3g}"
        assert float(np.max(np.abs(other - want))) > 1e-6, "the join check cannot fail"
        if dist.is_main():
            print(f"join: ranks with 5 and 3 batches equal the reference to {err:.1e} "
                  f"(divide_by_initial_world_size={initial})")

    def metric_inside_join():
        ddp = DDP(make_model(0))
        with ddp.join():
            for xb, yb in shares[r][:2 if r == 0 else 1]:
                loss = loss_fn(ddp(xb), yb)
                loss.backward()
                dist.all_reduce(loss.item())
    raises_everywhere(metric_inside_join, "joined", "all_reduce", "move other collectives out")

    def throwing():
        ddp = DDP(make_model(0))
        with ddp.join(throw_on_early_termination=True):
            for xb, yb in shares[r][:3 if r == 0 else 1]:
                loss_fn(ddp(xb), yb).backward()
    raises_everywhere(throwing, "throw_on_early_termination=True", "ran out of inputs")


def fail_in_backward(module, args, out):
    def fail(g):
        raise RuntimeError("deliberate failure in rank 1's backward")
    out.register_hook(fail)


def main():
    mode = sys.argv[1]
    if mode == "preinit" and os.environ.get("PMI_RANK") == "1":
        raise RuntimeError("deliberate failure on rank 1 before init()")
    dist.init()
    if mode == "collectives":
        check_collectives()
        check_sharding()
        check_equivalence()
        check_zero()
        check_no_sync_and_buckets()
        check_overlap()
        check_save(sys.argv[2])
        check_mismatched_collectives()
        check_wrap()
        check_bypass_and_seeds()
        check_join()
    elif mode == "zero":
        check_zero()
    elif mode == "zero_exit":
        # rank 1 ends after its backward, before step(): rank 0 waits for it there
        X, y = data()
        ddp = DDP(make_model(0))
        opt = tt.distributed.optim.ZeroRedundancyOptimizer(ddp.parameters(), tt.optim.SGD, lr=0.1)
        assert opt._window is not None
        tt.nn.CrossEntropyLoss()(ddp(X[:8]), y[:8]).backward()
        if dist.rank() == 1:
            sys.exit(0)
        opt.step()
    elif mode == "raise":
        if dist.rank() == 1:
            raise RuntimeError("deliberate failure on rank 1")
        dist.all_reduce(np.ones(3))          # rank 0 would wait here forever without the abort
        dist.barrier()
    elif mode in ("exit", "uneven"):
        X, y = data()
        ddp = DDP(make_model(0))
        batches = list(tt.data.minibatches(X, y, 8, rng=0, rank=dist.rank(), world_size=dist.world_size()))
        for k, (xb, yb) in enumerate(batches[:3 if dist.rank() == 0 else 2]):
            if mode == "exit" and k == 1 and dist.rank() == 1:
                sys.exit(0)                  # ends cleanly while rank 0 is in its step
            tt.nn.CrossEntropyLoss()(ddp(xb), yb).backward()
        print(f"rank {dist.rank()} done", flush=True)
        return                               # rank 1 ends its script normally
    elif mode == "midway":
        X, y = data()
        model = make_model(0)
        ddp = DDP(model, bucket_cap_mb=0.0005)            # one layer per bucket
        if dist.rank() == 1:                              # fails after two buckets have started
            model[0].register_forward_hook(fail_in_backward)
        try:
            tt.nn.CrossEntropyLoss()(ddp(X[:8]), y[:8]).backward()
        except RuntimeError as err:
            print(f"rank 1 caught: {err}", flush=True)
        ddp(X[:8])                                       # goes on: must end the job, not hang
    elif mode in ("shm_exit", "shm_timeout", "shm_kill"):
        # rank 1 stops inside its backward after two of three buckets were packed into shared
        # memory, while rank 0 waits there for the third
        if mode == "shm_timeout":
            dist.init(timeout=1)
        X, y = data()
        model = make_model(0)
        ddp = DDP(model, bucket_cap_mb=0.0005, allreduce="shared")

        def stop(g):
            import signal
            import time
            if mode == "shm_exit":
                sys.exit(0)                                # ends cleanly mid-step
            if mode == "shm_kill":
                os.kill(os.getpid(), signal.SIGKILL)       # dies without a word
            time.sleep(120)                                # stuck: the watchdog
        def watch(module, args, out):
            out.register_hook(stop)
        if dist.rank() == 1:
            model[0].register_forward_hook(watch)
        tt.nn.CrossEntropyLoss()(ddp(X[:8]), y[:8]).backward()
        assert ddp._reducer.window is not None
    elif mode == "timeout":
        dist.init(timeout=1)
        if dist.rank() == 1:
            import time
            time.sleep(120)                  # stuck elsewhere: rank 0 must not wait forever
        dist.all_reduce(np.ones(3))
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    if dist.is_main():
        print(f"OK {mode} on {dist.world_size()} ranks", flush=True)


if __name__ == "__main__":
    main()
