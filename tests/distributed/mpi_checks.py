"""Checks that need several processes: run as `mpiexec -n 2 python mpi_checks.py MODE [DIR]`
(test_distributed.py launches it). Every check asserts; the last line on rank 0 is "OK <mode>".

    collectives   all_reduce / broadcast / all_gather, sharding, equivalence (SGD momentum, Adam),
                  no_sync, unused parameters, buckets, tt.save writing once
    raise         rank 1 raises while rank 0 waits in a collective: every rank must exit
"""

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


def check_no_sync_and_buckets():
    r, w = dist.rank(), dist.world_size()
    X, y = data()
    loss_fn = tt.nn.CrossEntropyLoss()
    model = make_model(r)                    # rank 0's weights are broadcast
    ddp = DDP(model, bucket_cap_mb=0.004)    # 4 KB buckets: several messages
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


def check_save(directory):
    r = dist.rank()
    state = {"w": np.arange(3.0), "rank": r}
    tt.save(state, os.path.join(directory, "ckpt.npz"))        # every rank calls it; one writes
    dist.barrier()
    assert tt.load(os.path.join(directory, "ckpt.npz"))["rank"] == 0
    tt.save(state, os.path.join(directory, f"by_rank{r}.npz"))
    dist.barrier()
    written = sorted(f for f in os.listdir(directory) if f.startswith("by_rank"))
    assert written == ["by_rank0.npz"], written


def main():
    mode = sys.argv[1]
    dist.init()
    if mode == "collectives":
        check_collectives()
        check_sharding()
        check_equivalence()
        check_no_sync_and_buckets()
        check_save(sys.argv[2])
    elif mode == "raise":
        if dist.rank() == 1:
            raise RuntimeError("deliberate failure on rank 1")
        dist.all_reduce(np.ones(3))          # rank 0 would wait here forever without the abort
        dist.barrier()
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    if dist.is_main():
        print(f"OK {mode} on {dist.world_size()} ranks", flush=True)


if __name__ == "__main__":
    main()
