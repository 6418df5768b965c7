"""tt.distributed, DistributedDataParallel and sharded minibatches.

The multi-process checks run as `mpiexec -n 2 python mpi_checks.py ...` (a few launches, ~1-2 s
each, with a timeout so a hang fails instead of blocking); they skip, with the reason, only when
mpi4py or an MPI launcher is missing or two ranks cannot start (install the extra:
pip install -e ".[distributed]", which the dev extra includes). The single-process tests need no
MPI at all. The NCCL tests need CuPy and two GPUs.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import distributed as dist

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CHECKS = HERE / "mpi_checks.py"
TIMEOUT = 240     # a loaded 2-core machine; a hang is caught well before pytest would be


def find_mpiexec():
    """The launcher next to this Python (a virtualenv's bin/, where the mpich wheel puts it),
    then the one on PATH."""
    here = shutil.which("mpiexec", path=os.path.dirname(sys.executable))
    return here or shutil.which("mpiexec")


def mpi_env(extra=None):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("TT_DIST_TIMEOUT", None)
    env.pop("TT_DDP_ALLREDUCE", None)     # the default path (shared memory here) unless a test names one
    env.update(extra or {})
    return env


def launch(n, *args, timeout=TIMEOUT, cwd=None, env=None):
    """Run `mpiexec -n n python args...`; a run past the timeout fails the test (a hang)."""
    cmd = [find_mpiexec(), "-n", str(n), sys.executable, *map(str, args)]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                              timeout=timeout, env=mpi_env(env), cwd=cwd or ROOT)
    except subprocess.TimeoutExpired as err:
        pytest.fail(f"{' '.join(cmd)} did not finish in {timeout} s (a hang?)\nstdout:\n{err.stdout}\n"
                    f"stderr:\n{err.stderr}")


@pytest.fixture(scope="module")
def mpi():
    """Skip (with the reason) unless two MPI ranks can start."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        pytest.skip('mpi4py is not installed: pip install -e ".[distributed]"')
    if find_mpiexec() is None:
        pytest.skip('no mpiexec next to this Python or on PATH: pip install -e ".[distributed]"')
    probe = "from mpi4py import MPI; c = MPI.COMM_WORLD; print(f'rank{c.Get_rank()}of{c.Get_size()}')"
    try:
        run = subprocess.run([find_mpiexec(), "-n", "2", sys.executable, "-c", probe],
                             capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120,
                             env=mpi_env())
    except subprocess.TimeoutExpired:
        pytest.skip("MPI cannot start two ranks here (mpiexec -n 2 timed out)")
    if run.returncode != 0 or "rank0of2" not in run.stdout or "rank1of2" not in run.stdout:
        pytest.skip(f"MPI cannot start two ranks here: {run.stderr.strip()[-500:] or run.stdout}")


# ----- several processes ------------------------------------------------------------------------

def test_two_ranks_equal_one_process_and_collectives(mpi, tmp_path):
    """In one launch: the collectives; sharding covers every sample once per epoch; SGD with
    momentum and Adam on 2 ranks with batch B/2 give one process's parameters with batch B to
    1e-12 after 20 steps (float64); no_sync; buckets; tt.save per rank and once. Then what used to
    be silent or hang raises on every rank (mismatched collectives and models, per-rank seeds),
    off-root placeholders give the root's value, a bare backward on one rank stays local, and
    join() trains uneven ranks to the reference."""
    run = launch(2, CHECKS, "collectives", tmp_path)
    assert run.returncode == 0, f"stdout:\n{run.stdout}\nstderr:\n{run.stderr}"
    assert "OK collectives on 2 ranks" in run.stdout
    assert "overlap: 2 of 3 buckets started before the first layer's backward" in run.stdout
    assert run.stdout.count("equivalence") == 2, run.stdout
    assert run.stdout.count("zero ") == 6 and "zero sgd (shared memory)" in run.stdout, run.stdout
    assert run.stdout.count("join: ranks with 5 and 3 batches") == 2, run.stdout
    assert "Fatal error" not in run.stderr and "MPIR_" not in run.stderr, run.stderr
    print(run.stdout)


def test_a_rank_that_raises_takes_every_rank_down(mpi):
    """Rank 1 raises while rank 0 waits in an all-reduce: the excepthook of tt.distributed.init
    aborts the world, so the launch ends (non-zero) with the rank and the error on stderr."""
    run = launch(2, CHECKS, "raise", timeout=120)
    assert run.returncode != 0
    out = run.stdout + run.stderr
    assert "rank 1 of 2 raised RuntimeError: deliberate failure on rank 1" in out, out
    assert "aborting all ranks" in out
    assert "OK raise" not in out


@pytest.mark.parametrize("mode, fragments", [
    ("exit", ["rank 0 of 2: waiting in DistributedDataParallel's gradient all-reduce",
              "for rank(s) 1, which ended", "ddp.join()"]),
    ("uneven", ["rank 0 of 2: waiting in DistributedDataParallel's gradient all-reduce",
                "for rank(s) 1, which ended"]),
    ("midway", ["rank 1 of 2: a backward through DistributedDataParallel raised on this rank after "
                "its gradient all-reduce had started"]),
    ("timeout", ["the watchdog: waited", "all_reduce(op='sum') of an array float64 (3,)",
                 "for rank(s) 1, which did not arrive", "timeout="]),
    ("preinit", ["tt.distributed.init: rank 0 of 2 waited 1 s for MPI to start",
                 "a rank did not reach init()"]),
    ("shm_exit", ["rank 0 of 2: waiting for DistributedDataParallel's shared-memory gradient reduction "
                  "(bucket 2", "rank(s) 1 ended"]),
    ("shm_timeout", ["rank 0 of 2: the watchdog: waited 1 s for DistributedDataParallel's shared-memory "
                     "gradient reduction (bucket 2", "rank(s) 1 stopped", "timeout="]),
    ("shm_kill", ["BAD TERMINATION", "signal 9"]),
    ("zero_exit", ["rank 0 of 2: waiting for ZeroRedundancyOptimizer.step() (waiting for every rank to "
                   "reach step()", "rank(s) 1 ended"]),
])
def test_no_hang(mpi, mode, fragments):
    """Each used to hang forever: sys.exit(0) on rank 1 between steps; rank 1 running out of
    batches and ending its script (no join()); rank 1 stuck outside any collective (the watchdog,
    1 s); rank 1 failing before init() (TT_DIST_TIMEOUT=1); rank 1's backward raising, caught,
    after its first buckets started their all-reduce (rank 0 waits for the rest), then going on.
    In the shared-memory all-reduce, rank 1 ending (sys.exit), stuck (the watchdog, 1 s) or killed
    (SIGKILL: MPI's launcher ends the job) in its backward while rank 0 waits for its buckets.
    Now the launch ends, non-zero, with a rank naming the collective and the rank it waited for,
    or what went wrong."""
    import time
    start = time.monotonic()
    run = launch(2, CHECKS, mode, timeout=90, env={"TT_DIST_TIMEOUT": "1"} if mode == "preinit" else None)
    took = time.monotonic() - start
    out = run.stdout + run.stderr
    assert run.returncode != 0, out
    missing = [f for f in fragments if f not in out]
    assert not missing, f"{missing} not in:\n{out}"
    assert "OK " not in run.stdout and took < 60, (took, out)


@pytest.mark.slow
def test_example_distributed_reaches_the_same_accuracy(mpi, tmp_path, monkeypatch, capsys):
    """examples/train_mlp.py --distributed under mpiexec -n 2 (few epochs) reaches the test
    accuracy of the one-process run (run here, in this process); only rank 0 prints."""
    pytest.importorskip("sklearn")
    pytest.importorskip("tqdm")
    pytest.importorskip("matplotlib")
    import importlib.util

    path = ROOT / "examples" / "train_mlp.py"
    args = ["--quiet", "--epochs", "3", "--dtype", "float64", "--plot", str(tmp_path / "curves.png")]
    run = launch(2, path, "--distributed", *args)
    assert run.returncode == 0, f"stdout:\n{run.stdout}\nstderr:\n{run.stderr}"
    assert run.stdout.count("test accuracy:") == 1, run.stdout      # rank 0 alone prints
    assert "2 ranks" in run.stdout
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(var, "1")
    spec = importlib.util.spec_from_file_location("train_mlp_single", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    monkeypatch.setattr(script, "save_plot", lambda history, path: None)
    script.main(args)
    single = capsys.readouterr().out.strip().splitlines()[-1]
    assert run.stdout.strip().splitlines()[-1] == single, (run.stdout, single)
    assert float(single.split()[-1]) > 0.9


# ----- one process, no MPI needed ---------------------------------------------------------------

@pytest.fixture
def single(monkeypatch):
    """A fresh single-process world that never touches MPI."""
    state = dist._State()
    state.initialized = True
    monkeypatch.setattr(dist, "_STATE", state)
    return state


def test_one_process_works_without_mpi(single):
    assert (dist.rank(), dist.world_size(), dist.is_main()) == (0, 1, True)
    dist.barrier()
    a = np.arange(4.0)
    out = dist.all_reduce(a, op="mean")
    assert np.array_equal(out, a) and out is not a
    assert dist.all_reduce(3) == 3 and isinstance(dist.all_reduce(3), int)
    assert np.array_equal(dist.broadcast(a), a)
    assert dist.broadcast({"x": 1}) == {"x": 1}
    assert dist.all_gather(a).shape == (1, 4)
    assert dist.all_gather("s") == ["s"]
    assert dist.all_reduce(np.array([True, False])).tolist() == [1, 0]
    assert dist.all_reduce(np.array([True, False]), op="max").dtype == bool
    t = dist.all_reduce(tt.tensor(a))
    assert isinstance(t, tt.Tensor)
    with pytest.raises(ValueError, match="op must be one of"):
        dist.all_reduce(a, op="prod")
    with pytest.raises(ValueError, match="root must be a rank"):
        dist.broadcast(a, root=1)
    with pytest.raises(TypeError, match="array, a Tensor or a number"):
        dist.all_reduce("text")


def test_init_without_mpi4py(monkeypatch):
    """Launched with several processes but without mpi4py: an ImportError naming the extra; a
    process started on its own runs as rank 0 of 1."""
    monkeypatch.setitem(sys.modules, "mpi4py", None)            # `import mpi4py` raises ImportError
    monkeypatch.setattr(dist, "_STATE", dist._State())
    for name in dist._LAUNCHER_SIZE:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PMI_SIZE", "2")
    with pytest.raises(ImportError, match=r"\[distributed\]"):
        dist.init()
    monkeypatch.setenv("PMI_SIZE", "1")
    assert dist.init() == 1 and dist.world_size() == 1 and dist.is_main()


def test_save_on_other_ranks(single, tmp_path):
    """As rank 1 of 2 sees it: a path naming the rank is written; a shared path is left to rank
    0, with one warning per process; rank 0 writes both."""
    import warnings
    single.size, single.rank = 2, 1
    monkey = dist._SKIP_WARNED
    monkey.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tt.save({"w": np.ones(2)}, tmp_path / "a.npz")
        tt.save({"w": np.ones(2)}, tmp_path / "b.npz")
    assert not (tmp_path / "a.npz").exists() and not (tmp_path / "b.npz").exists()
    assert len(caught) == 1 and "only rank 0 writes it" in str(caught[0].message)
    tt.save({"w": np.ones(2)}, tmp_path / "ckpt_1.npz")
    (tmp_path / "rank1").mkdir()
    tt.save({"w": np.ones(2)}, tmp_path / "rank1" / "ckpt")
    assert (tmp_path / "ckpt_1.npz").exists() and (tmp_path / "rank1" / "ckpt.npz").exists()
    single.rank = 0
    tt.save({"w": np.ones(2)}, tmp_path / "a.npz")
    assert np.array_equal(tt.load(tmp_path / "a.npz")["w"], np.ones(2))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.npz", "ckpt_1.npz", "rank1"]
    with pytest.raises(FileNotFoundError, match="missing"):      # named as asked, not the temporary
        tt.save({"w": np.ones(2)}, tmp_path / "missing" / "x.npz")
    monkey.clear()


@pytest.mark.parametrize("path, rank, names", [
    ("ckpt_1.npz", 1, True), ("rank1.npz", 1, True), ("Rank_01.npz", 1, True), ("out/rank1/c.npz", 1, True),
    ("ckpt-2", 2, True), ("1.npz", 1, True), ("ckpt.npz", 1, False), ("epoch1.npz", 1, False),
    ("ckpt_11.npz", 1, False), ("/tmp/pytest-1/t/ckpt.npz", 1, False), ("ckpt_1.npz", 2, False)])
def test_which_paths_name_the_rank(path, rank, names):
    assert bool(dist._names_rank(path, rank)) is names


def test_timeout_setting(monkeypatch):
    import datetime
    monkeypatch.delenv("TT_DIST_TIMEOUT", raising=False)
    assert dist._seconds(None) == dist.DEFAULT_TIMEOUT == 600
    assert dist._seconds(datetime.timedelta(minutes=2)) == 120
    assert dist._seconds(1.5) == 1.5
    monkeypatch.setenv("TT_DIST_TIMEOUT", "7")
    assert dist._seconds(None) == 7
    monkeypatch.setenv("TT_DIST_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="TT_DIST_TIMEOUT must be a number"):
        dist._seconds(None)
    for bad in (0, -1, True, "10"):
        with pytest.raises(ValueError, match="positive number of seconds"):
            dist._seconds(bad)


def test_headers_describe_the_call(single):
    """What the mismatch messages print: a header holds the collective, the value's kind, dtype,
    shape (more than 16 axes are cut, never wrong) and the op or root."""
    h = dist._header("all_reduce", dist.ARRAY, np.zeros((2, 3), np.float32), arg=dist._OPS.index("max"))
    assert dist._describe(h) == "all_reduce(op='max') of an array float32 (2, 3)"
    h = dist._header("broadcast", dist.PLACEHOLDER, None, arg=1)
    assert dist._describe(h) == "broadcast(root=1) of a placeholder"
    many = np.zeros((1,) * 17 + (2,), np.complex128)
    h = dist._header("all_gather", dist.TENSOR, many)
    assert dist._describe(h).endswith("complex128 " + str((1,) * 15 + ("... 18 axes",)))
    other = dist._header("all_gather", dist.TENSOR, np.zeros((1,) * 17 + (3,), np.complex128))
    assert (h != other).any()                         # the axes past 16 still tell them apart
    for dtype in (np.bool_, np.int8, np.uint64, np.float16, np.float64, np.complex64):
        assert dist._dtype_of(dist._header("barrier", dist.ARRAY, np.zeros(1, dtype))) == np.dtype(dtype)


def test_ddp_in_one_process_is_the_module(single):
    rng = np.random.default_rng(0)
    model = tt.nn.Sequential(tt.nn.Linear(5, 4, rng=rng, dtype=np.float64), tt.nn.ReLU(),
                             tt.nn.Linear(4, 3, rng=rng, dtype=np.float64))
    ddp = tt.nn.parallel.DistributedDataParallel(model)
    assert ddp.module is model
    assert [n for n, _ in ddp.named_parameters()] == ["module." + n for n, _ in model.named_parameters()]
    x = rng.standard_normal((6, 5))
    assert np.array_equal(ddp(x).data, model(x).data)
    loss = tt.nn.CrossEntropyLoss()(ddp(x), np.arange(6) % 3)
    loss.backward()
    grads = [p.grad.copy() for p in model.parameters()]
    for p in model.parameters():
        p.grad = None
    tt.nn.CrossEntropyLoss()(model(x), np.arange(6) % 3).backward()
    assert all(np.array_equal(g, p.grad) for g, p in zip(grads, model.parameters()))
    with ddp.no_sync():
        assert not ddp.require_backward_grad_sync
    assert ddp.require_backward_grad_sync
    with pytest.raises(TypeError, match="tt.nn.Module"):
        tt.nn.parallel.DistributedDataParallel(lambda x: x)


def test_allreduce_setting(single, monkeypatch):
    """allreduce= (or TT_DDP_ALLREDUCE): "auto", "shared" or "mpi"; anything else is refused,
    naming both spellings; one process needs neither."""
    model = tt.nn.Linear(3, 2, rng=0, dtype=np.float64)
    for path in ("auto", "shared", "mpi"):
        assert tt.nn.parallel.DistributedDataParallel(model, allreduce=path).allreduce == path
    with pytest.raises(ValueError, match="allreduce .or the environment variable TT_DDP_ALLREDUCE. must be "
                                         "one of 'auto', 'shared', 'mpi', got 'shm'"):
        tt.nn.parallel.DistributedDataParallel(model, allreduce="shm")
    monkeypatch.setenv("TT_DDP_ALLREDUCE", "mpi")
    assert tt.nn.parallel.DistributedDataParallel(model).allreduce == "mpi"
    monkeypatch.setenv("TT_DDP_ALLREDUCE", "MPI")
    with pytest.raises(ValueError, match="got 'MPI'"):
        tt.nn.parallel.DistributedDataParallel(model)


def test_zero_redundancy_optimizer_in_one_process(single):
    """tt.distributed.optim.ZeroRedundancyOptimizer in one process is the plain optimizer (the same
    steps, bit for bit, a scheduler's learning rate included); its state dict needs
    consolidate_state_dict() first and then is the plain optimizer's; what it cannot do is refused,
    naming the fix."""
    ZeRO = tt.distributed.optim.ZeroRedundancyOptimizer
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((16, 5)), rng.integers(0, 3, 16)
    for cls, kw in ((tt.optim.SGD, dict(lr=0.1, momentum=0.9, weight_decay=1e-2)),
                    (tt.optim.Adam, dict(lr=1e-2)), (tt.optim.RMSprop, dict(lr=1e-2, momentum=0.5))):
        a, b = tt.nn.Linear(5, 3, rng=1, dtype=np.float64), tt.nn.Linear(5, 3, rng=1, dtype=np.float64)
        ddp = tt.nn.parallel.DistributedDataParallel(b)
        plain, zero = cls(a.parameters(), **kw), ZeRO(ddp.parameters(), optimizer_class=cls, **kw)
        scheds = [tt.optim.lr_scheduler.StepLR(o, step_size=2, gamma=0.5) for o in (plain, zero)]
        for _ in range(5):
            for model, opt, sched in ((a, plain, scheds[0]), (ddp, zero, scheds[1])):
                opt.zero_grad()
                tt.nn.CrossEntropyLoss()(model(X), y).backward()
                opt.step()
                sched.step()
        for p, q in zip(a.parameters(), b.parameters()):
            assert np.array_equal(p.data, q.data), cls.__name__
        assert zero.param_groups[0]["lr"] == plain.param_groups[0]["lr"] < kw["lr"]
        with pytest.raises(RuntimeError, match=r"call opt.consolidate_state_dict\(to=0\) on every rank"):
            zero.state_dict()
        zero.consolidate_state_dict(to=0)
        got, want = zero.state_dict(), plain.state_dict()
        assert got["param_groups"] == want["param_groups"]
        for i, entry in want["state"].items():
            for k, v in entry.items():
                assert np.array_equal(got["state"][i][k], v), (cls.__name__, i, k)
        fresh = ZeRO(tt.nn.Linear(5, 3, rng=2, dtype=np.float64).parameters(), cls, **kw)
        fresh.load_state_dict(want)                         # a plain optimizer's state dict loads
        fresh.consolidate_state_dict()
        assert all(np.array_equal(fresh.state_dict()["state"][i][k], v)
                   for i, e in want["state"].items() for k, v in e.items())
    # a tt.compile'd training step replays ZeRO's step() on every call, as the plain optimizer's
    weights = []
    for make in (lambda ps: tt.optim.SGD(ps, lr=0.1, momentum=0.9),
                 lambda ps: ZeRO(ps, tt.optim.SGD, lr=0.1, momentum=0.9)):
        model = tt.nn.Linear(5, 3, rng=1, dtype=np.float64)
        opt = make(model.parameters())

        @tt.compile
        def train_step(x, t):
            opt.zero_grad()
            loss = tt.nn.CrossEntropyLoss()(model(x), t)
            loss.backward()
            opt.step()
            return loss
        for _ in range(4):
            train_step(X, y)
        weights.append(model.weight.data.copy())
    assert np.array_equal(*weights)

    params = list(tt.nn.Linear(2, 2, rng=0).parameters())
    with pytest.raises(TypeError, match="optimizer_class must be a tt.optim optimizer class"):
        ZeRO(params, lr=0.1)
    with pytest.raises(ValueError, match="process_group must be None"):
        ZeRO(params, tt.optim.SGD, process_group="group", lr=0.1)
    with pytest.raises(ValueError, match="overlap_with_ddp=True is not implemented"):
        ZeRO(params, tt.optim.SGD, overlap_with_ddp=True, lr=0.1)

    class Lion(tt.optim.SGD):
        pass
    with pytest.raises(TypeError, match="Lion is not one of SGD, Adam, AdamW, RMSprop, whose update is elem"):
        ZeRO(params, Lion, lr=0.1)
    with pytest.raises(TypeError, match="unexpected keyword argument .betas."):   # as the plain SGD
        ZeRO(params, tt.optim.SGD, lr=0.1, betas=(0.9, 0.99))
    with pytest.raises(RuntimeError, match="add_param_group: not supported after construction"):
        ZeRO(params[:1], tt.optim.SGD, lr=0.1).add_param_group({"params": params[1:]})


def test_buckets_are_few_and_capped(single):
    """PyTorch's rule: parameters in reverse order; a bucket is closed once it holds its cap (1 MB
    for the first, so that the first all-reduce starts early in the backward; bucket_cap_mb for
    the others), so only its last parameter may take it past the cap."""
    model = tt.nn.Sequential(*[tt.nn.Linear(64, 64, rng=i, dtype=np.float64) for i in range(6)])
    one = tt.nn.parallel.DistributedDataParallel(model)
    assert len(one._reducer.buckets) == 1                 # 1 MB holds the whole model (100 KB)
    cap = 0.05 * 2**20                                    # 52 KB
    small = tt.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.05)
    sizes = [[p.data.nbytes for p in b.params] for b in small._reducer.buckets]
    assert 1 < len(sizes) < len(list(model.parameters()))
    assert all(sum(s[:-1]) < cap for s in sizes) and all(sum(s) >= cap for s in sizes[:-1])
    first = small._reducer.buckets[0].params[0]
    assert first is list(model.parameters())[-1]          # the last layer's gradients go first
    assert [p for b in small._reducer.buckets for p in b.params] == list(model.parameters())[::-1]
    # the benchmark's MLP (7.45 MB in float32): PyTorch's split, the two last layers then the first
    mlp = tt.nn.Sequential(tt.nn.Linear(784, 1024, dtype=np.float32), tt.nn.ReLU(),
                           tt.nn.Linear(1024, 1024, dtype=np.float32), tt.nn.ReLU(),
                           tt.nn.Linear(1024, 10, dtype=np.float32))
    names = {id(p): n for n, p in mlp.named_parameters()}
    layout = [[names[id(p)] for p in b.params]
              for b in tt.nn.parallel.DistributedDataParallel(mlp)._reducer.buckets]
    assert layout == [["4.bias", "4.weight", "2.bias", "2.weight"], ["0.bias", "0.weight"]]


@pytest.mark.parametrize("divisor", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_packing_divides_exactly(single, divisor, dtype):
    """Packing scales each gradient by 1/divisor: a multiply for a power of two (cheaper), the
    same bits as the divide, subnormals and extremes included; a divide otherwise."""
    rng = np.random.default_rng(divisor)
    model = tt.nn.Linear(300, 20, dtype=dtype)
    ddp = tt.nn.parallel.DistributedDataParallel(model)
    info = np.finfo(dtype)
    special = np.array([info.tiny, info.tiny / 3, info.smallest_subnormal, 3 * info.smallest_subnormal,
                        info.max, -info.max, -0.0, 1.0], dtype)
    sync = tt.nn.parallel._Sync(ddp._reducer, divisor, None)
    assert (sync.scale is None) == bool(divisor & (divisor - 1))
    bucket = ddp._reducer.buckets[0]
    for p in model.parameters():
        g = (rng.standard_normal(p.data.shape) * rng.choice([1e-30, 1.0, 1e30], p.data.shape)).astype(dtype)
        g.reshape(-1)[:len(special)] = special[:g.size]
        p.grad = g
        ddp._pack(sync, p)
        lo, hi = bucket.slices[ddp._reducer.where[id(p)][1]]
        expected = g.reshape(-1) / divisor
        assert bucket.buffer[lo:hi].tobytes() == expected.tobytes()


@pytest.mark.parametrize("n, batch, world, drop_last",
                         [(103, 8, 2, False), (100, 5, 4, False), (50, 7, 3, True), (9, 4, 3, False)])
def test_sharding_covers_every_sample_once(n, batch, world, drop_last):
    """Simulated ranks: the same permutation, disjoint shares, every sample once per epoch, the
    same number of batches on each rank, and the k-th batches together make one process's k-th
    batch with batch * world rows."""
    X, y = np.arange(n, dtype=float)[:, None], np.arange(n)
    shares = [[yb for _, yb in tt.data.minibatches(X, y, batch, rng=3, drop_last=drop_last,
                                                  rank=r, world_size=world)] for r in range(world)]
    assert len({len(s) for s in shares}) == 1
    single = [yb for _, yb in tt.data.minibatches(X, y, batch * world, rng=3, drop_last=drop_last)]
    for k, whole in enumerate(single):
        assert sorted(np.concatenate([s[k] for s in shares])) == sorted(whole)
        assert max(len(s[k]) for s in shares) - min(len(s[k]) for s in shares) <= 1
    seen = np.sort(np.concatenate([b for s in shares for b in s]))
    expected = np.arange(n - n % (batch * world)) if drop_last else np.arange(n)
    assert np.array_equal(seen, np.sort(np.concatenate(single))) and len(seen) == len(expected)
    assert len(np.unique(seen)) == len(seen)


def test_sharding_arguments():
    X, y = np.zeros((10, 2)), np.zeros(10)
    with pytest.raises(ValueError, match="together"):
        next(tt.data.minibatches(X, y, 2, rng=0, rank=0))
    with pytest.raises(ValueError, match="0 <= rank < world_size"):
        next(tt.data.minibatches(X, y, 2, rng=0, rank=2, world_size=2))
    with pytest.raises(ValueError, match="same permutation"):
        next(tt.data.minibatches(X, y, 2, rank=0, world_size=2))
    rows = [yb for _, yb in tt.data.minibatches(X, np.arange(10), 2, shuffle=False, rank=1, world_size=2)]
    assert [r.tolist() for r in rows] == [[1, 3], [5, 7], [9]]
    few = [yb.tolist() for r in range(4)
           for _, yb in tt.data.minibatches(X[:2], np.arange(2), 1, rng=0, rank=r, world_size=4)]
    assert all(len(b) == 1 for b in few) and set(sum(few, [])) == {0, 1}   # padded, never empty


# ----- GPU: NCCL through CuPy (needs CuPy and two GPUs; one GPU: tests/devices/test_gpu.py) ------

def _gpus():
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount()
    except Exception:   # noqa: BLE001 - no CuPy, no driver, no device: all mean no GPU
        return 0


NCCL_SCRIPT = """
import numpy as np, cupy, tinytensor as tt
dist = tt.distributed
dist.init()
r, w = dist.rank(), dist.world_size()
a = cupy.arange(6.0) + 10 * r
assert cupy.allclose(dist.all_reduce(a, op="mean"), cupy.arange(6.0) + 5 * (w - 1))
assert cupy.allclose(dist.broadcast(cupy.full(3, float(r)), root=1), 1.0)
assert dist.all_gather(cupy.ones(2) * r).shape == (w, 2)
model = tt.nn.Sequential(tt.nn.Linear(4, 3, rng=r, dtype=np.float64)).to("cuda")
ddp = tt.nn.parallel.DistributedDataParallel(model)
x = cupy.asarray(np.random.default_rng(r).standard_normal((5, 4)))
tt.nn.CrossEntropyLoss()(ddp(x), cupy.arange(5) % 3).backward()
g = dist.all_gather(next(model.parameters()).grad)
assert cupy.array_equal(g[0], g[1])
if dist.is_main():
    print("OK nccl")
"""


@pytest.mark.skipif(_gpus() < 2, reason="NCCL needs CuPy and two GPUs (one per rank); none here, so "
                                        "the NCCL path is untested in this environment")
def test_nccl_collectives_and_ddp_on_two_gpus(mpi, tmp_path):
    script = tmp_path / "nccl_check.py"
    script.write_text(NCCL_SCRIPT)
    run = launch(2, script)
    assert run.returncode == 0 and "OK nccl" in run.stdout, run.stdout + run.stderr


def test_install_lines_cover_the_distributed_example():
    """Every code block that launches examples/train_mlp.py --distributed installs extras that
    hold mpi4py, the MPI wheel and every third-party module the example imports (the README's
    line lacked [examples]: sklearn was missing)."""
    import re

    tomllib = pytest.importorskip("tomllib")          # Python 3.11+
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    source = (ROOT / "examples" / "train_mlp.py").read_text() + (ROOT / "examples" / "curves.py").read_text()
    imported = {m for m in re.findall(r"^\s*(?:from|import) (\w+)", source, re.M)}
    third_party = {"sklearn": "scikit-learn", "tqdm": "tqdm", "matplotlib": "matplotlib"}
    needed = {third_party[m] for m in imported if m in third_party} | {"mpi4py", "mpich"}
    assert {"scikit-learn", "tqdm", "mpi4py"} <= needed
    pages = [ROOT / "README.md", ROOT / "docs" / "guides" / "distributed.md"]
    checked = 0
    for page in pages:
        for block in re.findall(r"```bash\n(.*?)```", page.read_text(), re.S):
            if "train_mlp.py --distributed" not in block:
                continue
            names = re.search(r'pip install -e "\.\[([\w,-]+)\]"', block)
            assert names, f"{page.name}: no install line beside the launch line:\n{block}"
            have = {req.split(">")[0].split("=")[0].split("[")[0]
                    for extra in names.group(1).split(",") for req in extras[extra]}
            assert needed <= have, f"{page.name}: {sorted(needed - have)} missing from [{names.group(1)}]"
            checked += 1
    assert checked >= 2
