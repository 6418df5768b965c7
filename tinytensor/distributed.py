"""Several processes, one model: collectives on MPI (through `mpi4py`), and NCCL for GPU arrays.

    mpiexec -n 2 python train.py          # pip install -e ".[distributed]" puts mpiexec in the env

    import tinytensor as tt
    dist = tt.distributed
    dist.init()                                   # MPI's world; one process works without MPI
    total = dist.all_reduce(np.array([n_correct, n_seen]))          # the same sum on every rank
    if dist.is_main():
        print(total)

The same program runs on every process (a *rank*); `world_size()` processes in all, rank 0 is the
main one. The collectives must be called by every rank, in the same order (as in MPI and
`torch.distributed`). They never mix silently and never hang:

* Every collective starts with a header (a few int64s sent to each other rank: which
  collective, the kind, dtype, shape and device of the value, the op or root). When the ranks
  disagree, every rank raises the same RuntimeError naming both ranks' calls, before any data
  moves. A header from a rank that has not arrived is waited for by polling.
* The watchdog: a rank that waits longer than `timeout` seconds for a header (`init(timeout=)`,
  else the environment variable TT_DIST_TIMEOUT, else 600 s, as NCCL's watchdog) aborts the
  job (`MPI_Abort`) naming the collective and the ranks that did not arrive.
* A rank that raises aborts every rank (sys.excepthook, after printing its traceback); a rank
  that ends (the end of the script, `sys.exit(0)`) tells the others, and a rank that then waits
  for it in a collective aborts the job at once, naming it (ranks with uneven numbers of batches:
  `DistributedDataParallel.join()`).
* `init()` itself: a rank that never reaches it (it failed before) would leave the others inside
  MPI's start-up; after `timeout` seconds a small watchdog process ends them with a message.

NumPy arrays travel through MPI's buffer interface (`Allreduce`, `Bcast`, `Allgather`: no
pickling); Tensors give their values and get a Tensor back (no gradient flows through a
collective); Python numbers come back as numbers; any other object is pickled (`broadcast` of a
config dict, `all_gather` of strings). CuPy arrays (device "cuda") use NCCL through
`cupy.cuda.nccl`, one communicator made on first use, its id sent over MPI; `init()` makes GPU
`local_rank() % cupy.cuda.runtime.getDeviceCount()` each rank's current device (call it before
moving a model to "cuda"); NCCL needs one GPU per rank. The NCCL calls have run on one GPU (a
one-rank communicator, tests/devices/test_gpu.py), not yet on two; CI has no GPU and skips them.

Without `mpi4py` (or with one process) every function works: rank 0 of a world of 1, and the
collectives return a copy of their input. `init()` raises, naming the extra to install, only when
an MPI launcher started several processes and mpi4py is missing.
"""

import atexit
import datetime
import hashlib
import os
import subprocess
import sys
import time
import types

import numpy as np

from . import backend
from .tensor import Tensor

__all__ = ["init", "is_initialized", "rank", "world_size", "local_rank", "is_main", "barrier",
           "all_reduce", "broadcast", "all_gather", "timeout"]

_OPS = ("sum", "mean", "max", "min")
DEFAULT_TIMEOUT = 600.0            # seconds, as NCCL's watchdog (PyTorch's gloo default: 1800)


class _State:
    initialized = False
    comm = None            # mpi4py's COMM_WORLD, or None in a single process without MPI
    ctl = None             # a duplicate of it for the headers and the goodbyes (never user data)
    MPI = None
    rank = 0
    size = 1
    local_rank = 0
    nccl = None            # the NCCL communicator, made on the first collective on a GPU array
    previous_hook = None
    timeout = DEFAULT_TIMEOUT
    seq = 0                # collectives so far (the same on every rank: named in messages)
    gone = frozenset()     # ranks that said goodbye (ended their program)
    ended = False


_STATE = _State()

# Variables that MPI launchers (MPICH's hydra, Open MPI, Intel MPI, Slurm's srun) set in each process.
_LAUNCHER_SIZE = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS", "PMIX_SIZE")
_LAUNCHER_RANK = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")


def _launched(names, default):
    for name in names:
        try:
            return int(os.environ[name])
        except (KeyError, ValueError):
            continue
    return default


def _launched_size():
    return _launched(_LAUNCHER_SIZE, 1)


def _seconds(timeout):
    """A timeout in seconds from a number, a datetime.timedelta (PyTorch's spelling) or None
    (TT_DIST_TIMEOUT, else the default)."""
    if timeout is None:
        env = os.environ.get("TT_DIST_TIMEOUT")
        if env is None:
            return DEFAULT_TIMEOUT
        try:
            timeout = float(env)
        except ValueError:
            raise ValueError(f"tt.distributed: TT_DIST_TIMEOUT must be a number of seconds, got "
                             f"{env!r}") from None
    if isinstance(timeout, datetime.timedelta):
        timeout = timeout.total_seconds()
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(f"tt.distributed.init: timeout must be a positive number of seconds (or a "
                         f"datetime.timedelta), got {timeout!r}")
    return float(timeout)


# The watchdog of MPI's start-up: MPI_Init holds the GIL, so no thread of this process can act
# while it waits for a rank that never comes; a separate tiny process can.
_INIT_WATCHDOG = """
import os, select, signal, sys
pid, limit, text = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
ready, _, _ = select.select([sys.stdin], [], [], limit)
if not ready:
    os.write(2, text.encode())
    os.kill(pid, signal.SIGTERM)
"""


def _start_init_watchdog(seconds, size):
    rank = _launched(_LAUNCHER_RANK, "?")
    text = (f"tt.distributed.init: rank {rank} of {size} waited {seconds:g} s for MPI to start: a "
            f"rank did not reach init() (it failed or exited before it: see its output above). "
            f"Ending this rank instead of waiting forever (the limit is init(timeout=) or "
            f"TT_DIST_TIMEOUT).\n")
    try:
        return subprocess.Popen([sys.executable, "-S", "-I", "-c", _INIT_WATCHDOG, str(os.getpid()),
                                 str(seconds), text], stdin=subprocess.PIPE,
                                stdout=subprocess.DEVNULL)
    except OSError:          # no process to spare: start without the start-up watchdog
        return None


def init(timeout=None):
    """Join MPI's world communicator (once; later calls only set the timeout) and return the
    world size.

    Needs `mpi4py` (`pip install -e ".[distributed]"`) when several processes were launched; a
    process started on its own runs as rank 0 of 1, with or without mpi4py. With more than one
    rank, an uncaught exception on any rank aborts every rank (the hook prints the traceback with
    the rank, then calls `COMM_WORLD.Abort(1)`), and a rank that ends tells the others.

    timeout: seconds (or a datetime.timedelta) a rank waits for the others in a collective, or
    in MPI's start-up, before it aborts the job naming what it waited for; default: the
    environment variable TT_DIST_TIMEOUT, else 600 s (as PyTorch's `init_process_group(timeout=)`).

    Examples
    --------
    >>> tt.distributed.init()          # a process started on its own: rank 0 of 1
    1
    >>> tt.distributed.rank(), tt.distributed.world_size()
    (0, 1)
    """
    s = _STATE
    if s.initialized:
        if timeout is not None:
            s.timeout = _seconds(timeout)
        return s.size
    s.timeout = _seconds(timeout)
    n = _launched_size()
    try:
        import mpi4py
    except ImportError as err:
        if n > 1:
            raise ImportError(f"tt.distributed.init: an MPI launcher started {n} processes but mpi4py "
                              f"is not installed; install the extra: pip install -e \".[distributed]\" "
                              f"(mpi4py and MPICH from wheels, with their mpiexec)") from err
        s.initialized = True            # one process: rank 0 of 1, no MPI needed
        return 1
    watchdog = _start_init_watchdog(s.timeout, n) if n > 1 and "mpi4py.MPI" not in sys.modules else None
    try:
        from mpi4py import MPI
    finally:
        if watchdog is not None:
            watchdog.stdin.close()       # the watchdog reads the end of its input and leaves
            watchdog.wait()
    del mpi4py
    s.MPI, s.comm = MPI, MPI.COMM_WORLD
    s.rank, s.size = s.comm.Get_rank(), s.comm.Get_size()
    node = s.comm.Split_type(MPI.COMM_TYPE_SHARED, key=s.rank)   # the ranks on this machine
    s.local_rank = node.Get_rank()
    node.Free()
    s.initialized = True
    if s.size > 1:
        s.ctl = s.comm.Dup()
        _pick_gpu(s.local_rank)
        atexit.register(_goodbye)      # after mpi4py's own: runs before MPI_Finalize
        if s.previous_hook is None:
            s.previous_hook = sys.excepthook
            sys.excepthook = _abort_on_exception
    return s.size


def timeout():
    """The watchdog's limit in seconds (see init).

    Examples
    --------
    >>> import datetime
    >>> before = tt.distributed.timeout()
    >>> tt.distributed.init(timeout=datetime.timedelta(minutes=2))   # once initialised: sets it only
    1
    >>> tt.distributed.timeout()
    120.0
    >>> tt.distributed.init(timeout=before)
    1
    """
    return _world().timeout


def _pick_gpu(local):
    """With CuPy installed and GPUs present, make GPU local_rank % count this rank's current
    device, before any array is put on "cuda" (else every rank would share GPU 0, which NCCL
    refuses). Without CuPy nothing is imported; any failure leaves the CPU path as it was."""
    import importlib.util
    if importlib.util.find_spec("cupy") is None:
        return
    try:
        import cupy
        count = cupy.cuda.runtime.getDeviceCount()
        if count:
            cupy.cuda.Device(local % count).use()
    except Exception:   # noqa: BLE001 - no driver, no device: the CPU path needs none of it
        pass


def _abort_on_exception(kind, value, tb):
    """sys.excepthook with several ranks: report, then take every rank down (no hang)."""
    s = _STATE
    try:
        sys.stderr.write(f"tt.distributed: rank {s.rank} of {s.size} raised {kind.__name__}: {value}; "
                         f"aborting all ranks (MPI_Abort) so that none waits forever in a "
                         f"collective\n")
        (s.previous_hook or sys.__excepthook__)(kind, value, tb)
        sys.stderr.flush()
        sys.stdout.flush()
        time.sleep(0.3)      # as _abort: the launcher forwards the report before the job ends
    finally:
        s.ended = True
        s.comm.Abort(1)


def _abort(text):
    """Print why, then end every rank (MPI_Abort): the watchdog's and the goodbye's way out."""
    s = _STATE
    try:
        sys.stdout.flush()
        sys.stderr.write(f"tt.distributed: rank {s.rank} of {s.size}: {text}; aborting all ranks "
                         f"(MPI_Abort)\n")
        sys.stderr.flush()
        time.sleep(0.3)      # the launcher forwards the message before MPI_Abort ends the job (without
    finally:                 # it, 1 launch in 5 here ended with no output at all)
        s.ended = True
        s.comm.Abort(1)


_TAG_HEADER, _TAG_BYE = 11, 12


def _goodbye():
    """At the end of the program (atexit): tell every other rank that this one is gone, so that a
    rank waiting for it in a collective aborts at once instead of forever."""
    s = _STATE
    if s.ended or s.ctl is None or s.MPI.Is_finalized():
        return
    s.ended = True
    note = np.array([s.seq], np.int64)
    s.MPI.Request.Waitall([s.ctl.Isend(note, dest=p, tag=_TAG_BYE) for p in range(s.size) if p != s.rank])


def is_initialized():
    """Whether `init()` has run (collectives and rank() call it for you).

    Examples
    --------
    >>> tt.distributed.rank()          # any call that needs the world joins it
    0
    >>> tt.distributed.is_initialized()
    True
    """
    return _STATE.initialized


def _world():
    if not _STATE.initialized:
        init()
    return _STATE


def rank():
    """This process's rank, 0 .. world_size() - 1 (0 without MPI).

    Examples
    --------
    >>> r, w = tt.distributed.rank(), tt.distributed.world_size()
    >>> r, w                           # one process here; under `mpiexec -n 4` r is 0, 1, 2 or 3
    (0, 1)
    >>> np.arange(10)[r::w]            # this rank's share of the work
    array([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
    """
    return _world().rank


def world_size():
    """The number of processes (1 without MPI).

    Examples
    --------
    >>> 64 // tt.distributed.world_size()   # each rank's batch for a global batch of 64
    64
    """
    return _world().size


def local_rank():
    """This process's rank among the ranks on the same machine (picks its GPU).

    Examples
    --------
    >>> tt.distributed.local_rank()
    0
    """
    return _world().local_rank


def is_main():
    """True on rank 0: the one that prints, plots and writes checkpoints.

    Examples
    --------
    >>> if tt.distributed.is_main():
    ...     print("printed once, by rank 0")
    printed once, by rank 0
    """
    return _world().rank == 0


def barrier():
    """Wait until every rank has called barrier() (a header exchange: every rank has sent its
    header only once it has arrived).

    Examples
    --------
    >>> tt.distributed.barrier()       # returns once every rank has called it (at once, alone)
    """
    s = _world()
    if s.comm is not None and s.size > 1:
        _agree(_exchange("barrier"))


# ----- headers: the ranks agree on each collective before any data moves -------------------------

# header fields (int64): which collective, what was passed, and its shape (up to 16 axes)
_SEQ, _OP, _KIND, _DTYPE, _ARG, _DEV, _NDIM, _EXTRA, _SHAPE = range(9)
_HLEN = _SHAPE + 16
_NAMES = ["barrier", "all_reduce", "broadcast", "all_gather", "ddp_sync", "ddp_buffers", "join",
          "wrap_check", "minibatches", "zero"]
_CODE = {name: i + 1 for i, name in enumerate(_NAMES)}
ARRAY, TENSOR, NUMBER, OBJECT, PLACEHOLDER = range(5)
_KIND_NAMES = ["an array", "a Tensor", "a number", "an object", "a placeholder"]
_DESCRIBE = {"ddp_sync": "DistributedDataParallel's gradient all-reduce (backward)",
             "ddp_buffers": "DistributedDataParallel's buffer broadcast (forward)",
             "join": "DistributedDataParallel.join() (this rank ran out of inputs)",
             "wrap_check": "DistributedDataParallel(...) (the wrap-time check of the model)",
             "minibatches": "tt.data.minibatches(..., rank=, world_size=) (the shared permutation)",
             "zero": "ZeroRedundancyOptimizer (its construction, step() or consolidate_state_dict())"}


def _header(op, kind=OBJECT, value=None, arg=0, extra=0, count=0):
    h = np.zeros(_HLEN, np.int64)
    h[_SEQ], h[_OP], h[_KIND], h[_ARG], h[_EXTRA] = _STATE.seq, _CODE[op], kind, arg, extra
    h[_SHAPE] = count                    # without a value: a number of the caller's (join's rounds)
    if value is not None:
        shape = value.shape
        h[_DTYPE] = ord(value.dtype.kind) * 256 + value.dtype.itemsize
        h[_DEV] = 0 if type(value) is np.ndarray else 1
        h[_NDIM] = len(shape)
        if len(shape) <= 16:
            h[_SHAPE:_SHAPE + len(shape)] = shape
        else:                            # more axes than fit: the first 15 and a hash of the rest
            h[_SHAPE:_SHAPE + 15] = shape[:15]
            h[_HLEN - 1] = _hash(repr(shape[15:]))
    return h


def _hash(text):
    """63 bits of blake2b: the same on every rank (Python's hash() is salted per process)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little") >> 1


def _dtype_of(h):
    code = int(h[_DTYPE])
    return np.dtype(f"{chr(code // 256)}{code % 256}") if code else None


def _shape_of(h):
    n = int(h[_NDIM])
    if n > 16:                           # the 16th slot holds a hash of the axes past the 15th
        return tuple(int(d) for d in h[_SHAPE:_SHAPE + 15]) + (f"... {n} axes",)
    return tuple(int(d) for d in h[_SHAPE:_SHAPE + n])


def _describe(h):
    op = _NAMES[int(h[_OP]) - 1]
    if op in _DESCRIBE:
        return _DESCRIBE[op]
    if op == "barrier":
        return "barrier()"
    kind = int(h[_KIND])
    what = _KIND_NAMES[kind]
    if kind in (ARRAY, TENSOR, NUMBER):
        what += f" {_dtype_of(h)} {_shape_of(h)}" + (" on cuda" if h[_DEV] else "")
    if op == "all_reduce":
        return f"all_reduce(op={_OPS[int(h[_ARG])]!r}) of {what}"
    if op == "broadcast":
        return f"broadcast(root={int(h[_ARG])}) of {what}"
    return f"{op} of {what}"


def _exchange(op, kind=OBJECT, value=None, arg=0, extra=0, count=0):
    """Send this rank's header to every other rank, receive theirs: an array (world_size, _HLEN),
    row r from rank r. Waits by polling, so that the watchdog can act and a goodbye is seen."""
    s = _STATE
    s.seq += 1
    mine = _header(op, kind, value, arg, extra, count)
    every = np.empty((s.size, _HLEN), np.int64)
    every[s.rank] = mine
    peers = [p for p in range(s.size) if p != s.rank]
    recvs = [s.ctl.Irecv(every[p], source=p, tag=_TAG_HEADER) for p in peers]
    sends = [s.ctl.Isend(mine, dest=p, tag=_TAG_HEADER) for p in peers]
    _wait_for(recvs, peers, mine)
    s.MPI.Request.Waitall(sends)
    return every


def _wait_for(recvs, peers, mine):
    """Poll the header receives: spin for the first 50 ms (as MPI's own blocking calls do: a
    partner a few microseconds late costs microseconds; yielding the core on a loaded machine
    cost milliseconds per collective), then sleep 1 ms between tests (a rank waiting that long
    waits for a slow partner, and leaves its core to it). Every millisecond: a goodbye from a
    missing rank, or the timeout, aborts the job."""
    s = _STATE
    pending = list(range(len(recvs)))
    start = time.monotonic()
    next_look = start + 1e-3
    while True:
        pending = [i for i in pending if not recvs[i].Test()]
        if not pending:
            return
        now = time.monotonic()
        if now < next_look:
            continue
        next_look = now + 1e-3
        waited = now - start
        missing = [peers[i] for i in pending]
        if s.ctl.Iprobe(source=s.MPI.ANY_SOURCE, tag=_TAG_BYE):
            _collect_goodbyes()
        gone = [p for p in missing if p in s.gone]
        if gone:
            _abort(f"waiting in {_describe(mine)} (collective #{s.seq}) for rank(s) "
                   f"{', '.join(map(str, gone))}, which ended (end of the script or sys.exit) without "
                   f"calling it: every rank must call the same collectives; ranks with uneven numbers "
                   f"of batches: wrap the training loop in `with ddp.join():`")
        if waited > s.timeout:
            _abort(f"the watchdog: waited {waited:.0f} s in {_describe(mine)} (collective #{s.seq}) "
                   f"for rank(s) {', '.join(map(str, missing))}, which did not arrive (stuck elsewhere, "
                   f"or calling collectives in another order); the limit is tt.distributed."
                   f"init(timeout=) or TT_DIST_TIMEOUT ({s.timeout:g} s)")
        if waited > 0.05:
            time.sleep(1e-3)


def _collect_goodbyes():
    s = _STATE
    gone = set(s.gone)
    status = s.MPI.Status()
    while s.ctl.Iprobe(source=s.MPI.ANY_SOURCE, tag=_TAG_BYE, status=status):
        note = np.empty(1, np.int64)
        s.ctl.Recv(note, source=status.Get_source(), tag=_TAG_BYE)
        gone.add(status.Get_source())
    s.gone = frozenset(gone)


def _mismatch(every, first, other, why=""):
    """The error every rank raises when the headers disagree (the same text on every rank)."""
    raise RuntimeError(f"tt.distributed: the ranks called different collectives (collective "
                       f"#{int(every[first][_SEQ])}): rank {first} calls {_describe(every[first])} but "
                       f"rank {other} calls {_describe(every[other])}{why}; every rank must call the "
                       f"same collectives in the same order, with values of one shape and dtype")


def _joined(every):
    return [r for r in range(len(every)) if every[r][_OP] == _CODE["join"]]


def _agree(every, compare=(_OP, _ARG)):
    """Raise on every rank unless the headers agree in `compare` (and no rank is in join())."""
    for r in range(1, len(every)):
        if any(every[r][f] != every[0][f] for f in compare):
            joined = _joined(every)
            if joined and every[0][_OP] != every[r][_OP]:
                _join_mismatch(every, joined)
            _mismatch(every, 0, r)


def _join_mismatch(every, joined):
    active = [r for r in range(len(every)) if r not in joined]
    raise RuntimeError(
        f"tt.distributed: rank(s) {', '.join(map(str, joined))} joined (DistributedDataParallel.join(): "
        f"out of inputs) while rank {active[0]} calls {_describe(every[active[0]])} (collective "
        f"#{int(every[active[0]][_SEQ])}); a joined rank stands in only for the wrapper's own "
        f"collectives (the gradient all-reduce and the buffer broadcast): move other collectives out "
        f"of the join() block")


def _array_agree(every, hint=""):
    """all_reduce / all_gather: arrays (and Tensors) must agree in dtype, shape and device with
    every rank; numbers alone are promoted (int and float give float). Returns the dtype."""
    _agree(every)
    kinds = {int(h[_KIND]) for h in every}
    if OBJECT in kinds:
        if kinds != {OBJECT}:
            first = next(r for r in range(len(every)) if every[r][_KIND] == OBJECT)
            other = next(r for r in range(len(every)) if every[r][_KIND] != OBJECT)
            _mismatch(every, min(first, other), max(first, other),
                      " (arrays on some ranks, other objects on others)")
        return None
    if kinds == {NUMBER}:
        for r in range(1, len(every)):
            if every[r][_DEV] != every[0][_DEV]:
                _mismatch(every, 0, r)
        return np.result_type(*[_dtype_of(h) for h in every])
    for r in range(1, len(every)):
        a, b = every[0], every[r]
        if a[_DTYPE] != b[_DTYPE] or a[_DEV] != b[_DEV] or a[_NDIM] != b[_NDIM] or \
                any(a[_SHAPE:] != b[_SHAPE:]):
            _mismatch(every, 0, r, hint)
    return _dtype_of(every[0])


# ----- arrays in, arrays out ---------------------------------------------------------------------

def _unwrap(x):
    """(kind, contiguous array or None, rewrap): Tensors give values and get a Tensor back;
    numbers come back as numbers; any other object is OBJECT (pickled by the caller)."""
    if isinstance(x, Tensor):
        return TENSOR, x.data, lambda a: Tensor(a)
    if isinstance(x, np.ndarray) or backend.is_array(x):
        return ARRAY, x, lambda a: a
    if isinstance(x, (bool, int, float, complex, np.generic)):
        a = np.asarray(x)
        if a.dtype.hasobject:                       # an int beyond int64: pickled
            return OBJECT, None, None
        python = isinstance(x, (bool, int, float, complex))
        return NUMBER, a, (lambda out: out[()].item()) if python else (lambda out: out[()])
    return OBJECT, None, None


def _check_op(op):
    if op not in _OPS:
        raise ValueError(f"tt.distributed.all_reduce: op must be one of {', '.join(map(repr, _OPS))}, "
                         f"got {op!r}")


def _mpi_buffer(a, what):
    """A C-contiguous host array MPI can send; a clear error for dtypes MPI has no type for."""
    a = a if a.flags.c_contiguous else a.copy(order="C")    # (ascontiguousarray makes 0-d 1-d)
    if a.dtype.hasobject or a.dtype.kind in "OUSVMm":
        raise TypeError(f"tt.distributed.{what}: arrays of dtype {a.dtype} have no MPI type; send "
                        f"numbers (a numeric array), or a Python object (it is pickled)")
    return a


def _mpi_call(what, fn, *args):
    try:
        return fn(*args)
    except KeyError as err:          # mpi4py: no MPI datatype for this typecode (float16, ...)
        raise TypeError(f"tt.distributed.{what}: MPI has no datatype for {err}; cast the array "
                        f"(e.g. .astype(np.float32)) before the collective") from None
    except _STATE.MPI.Exception as err:
        raise RuntimeError(f"tt.distributed.{what}: MPI failed: {err.Get_error_string()}") from None


def _check_sendable(a, what):
    """Refuse, before the header, what MPI cannot send (each rank checks its own value)."""
    if type(a) is np.ndarray and (a.dtype.hasobject or a.dtype.kind in "OUSVMm"):
        raise TypeError(f"tt.distributed.{what}: arrays of dtype {a.dtype} have no MPI type; send "
                        f"numbers (a numeric array), or a Python object (it is pickled)")


def all_reduce(x, op="sum"):
    """The elementwise sum ("sum"), mean ("mean"), maximum ("max") or minimum ("min") of `x`
    over all ranks, on every rank. `x` is a NumPy/CuPy array, a Tensor (a Tensor comes back,
    outside the tape) or a number; arrays must have one shape and dtype on every rank (else every
    rank raises, naming both), Python numbers are promoted (an int and a float sum to a float).
    The mean of an integer array is a float array; booleans sum to counts (int64), and max/min
    are any/all. `x` itself is not modified.

    Examples
    --------
    >>> stats = np.array([2.5, 10.0])              # this rank's (loss sum, sample count)
    >>> total_loss, seen = tt.distributed.all_reduce(stats)
    >>> print(total_loss / seen)                   # over every rank's samples (one rank here)
    0.25
    >>> tt.distributed.all_reduce(3.0, op="max")
    3.0
    """
    _check_op(op)
    kind, a, wrap = _unwrap(x)
    if kind == OBJECT:
        raise TypeError(f"tt.distributed.all_reduce: x must be an array, a Tensor or a number, got "
                        f"{type(x).__name__}")
    s = _world()
    if a.dtype == bool:              # MPI sums no booleans: count them, as NumPy's sum does
        a = a.astype(np.int64) if op in ("sum", "mean") else a.astype(np.uint8)
        if op in ("max", "min"):
            wrap = (lambda w: lambda out: w(out.astype(bool)))(wrap)
    _check_sendable(a, "all_reduce")
    if s.size == 1 or s.comm is None:
        out = backend.copy(a)
    else:
        dtype = _array_agree(_exchange("all_reduce", kind, a, _OPS.index(op)))
        if kind == NUMBER and a.dtype != dtype:
            a = a.astype(dtype)
        if type(a) is not np.ndarray and backend.is_array(a):
            out = _nccl_all_reduce(a, op)
        else:
            send = _mpi_buffer(a, "all_reduce")
            out = np.empty_like(send)
            mpi_op = {"sum": s.MPI.SUM, "mean": s.MPI.SUM, "max": s.MPI.MAX, "min": s.MPI.MIN}[op]
            _complete(_mpi_call("all_reduce", s.comm.Iallreduce, send, out, mpi_op))
    if op == "mean":
        xp = backend.namespace(out)
        out = out / s.size if out.dtype.kind not in "fc" else xp.divide(out, s.size, out=out)
    return wrap(out)


def broadcast(x, root=0):
    """Rank `root`'s `x` on every rank. Arrays, Tensors and numbers go through MPI's buffers; any
    other object (a dict, a string) is pickled. Off the root, `x` is a placeholder: None or a
    number gives the root's value whatever it is (`broadcast(model_config if rank == 0 else
    None)`); an array or Tensor must have the root's shape and dtype (its values are ignored; it
    is not modified), else every rank raises naming both.

    Examples
    --------
    >>> config = {"lr": 0.1} if tt.distributed.is_main() else None
    >>> tt.distributed.broadcast(config)           # rank 0's dict, on every rank
    {'lr': 0.1}
    >>> tt.distributed.broadcast(np.array([1.0, 2.0]), root=0)
    array([1., 2.])
    """
    s = _world()
    if isinstance(root, bool) or not isinstance(root, (int, np.integer)) or not 0 <= root < s.size:
        raise ValueError(f"tt.distributed.broadcast: root must be a rank in 0..{s.size - 1}, got {root!r}")
    root = int(root)
    kind, a, wrap = _unwrap(x)
    if s.size == 1 or s.comm is None:
        return wrap(backend.copy(a)) if a is not None else x
    if kind != OBJECT:
        _check_sendable(a, "broadcast")
    python_number = kind == NUMBER and isinstance(x, (bool, int, float, complex))
    if s.rank != root and kind in (NUMBER, OBJECT):
        kind, a = PLACEHOLDER, None
    every = _exchange("broadcast", kind, a, root, extra=int(python_number))
    _agree(every)
    head = every[root]
    for r in range(len(every)):
        if every[r][_KIND] in (ARRAY, TENSOR) and (
                head[_KIND] not in (ARRAY, TENSOR, NUMBER) or every[r][_DTYPE] != head[_DTYPE]
                or every[r][_DEV] != head[_DEV] or every[r][_NDIM] != head[_NDIM]
                or any(every[r][_SHAPE:] != head[_SHAPE:])):
            _mismatch(every, root, r, " (off the root, pass None for the root's value whatever it "
                                      "is, or an array of the root's shape and dtype)")
    if head[_KIND] == OBJECT:
        return s.comm.bcast(x if s.rank == root else None, root=root)
    dtype, shape = _dtype_of(head), _shape_of(head)
    if head[_DEV]:
        import cupy
        out = _nccl_broadcast(a if s.rank == root else cupy.empty(shape, dtype), root)
    else:
        out = _mpi_buffer(a, "broadcast").copy() if s.rank == root else np.empty(shape, dtype)
        _complete(_mpi_call("broadcast", s.comm.Ibcast, out, root))
    if s.rank == root or kind in (ARRAY, TENSOR):
        return wrap(out)
    # a placeholder off the root: the root's kind of value
    if head[_KIND] == TENSOR:
        return Tensor(out)
    if head[_KIND] == NUMBER:
        return out[()].item() if head[_EXTRA] else out[()]
    return out


def all_gather(x):
    """Every rank's `x`, stacked along a new first axis in rank order: an array (or Tensor) of
    shape (world_size(), *x.shape) on every rank, from arrays of one shape and dtype (else every
    rank raises, naming both). Numbers give an array of shape (world_size(),); any other object
    gives a list (pickled).

    Examples
    --------
    >>> tt.distributed.all_gather(np.array([1.0, 2.0]))   # shape (world_size(), 2)
    array([[1., 2.]])
    >>> tt.distributed.all_gather(0.5)
    array([0.5])
    """
    s = _world()
    kind, a, wrap = _unwrap(x)
    if kind == NUMBER:
        wrap = lambda out: out
    if kind == OBJECT:
        if s.size == 1 or s.comm is None:
            return [x]
    else:
        _check_sendable(a, "all_gather")
        if s.size == 1 or s.comm is None:
            return wrap(backend.namespace(a).stack([a]))
    dtype = _array_agree(_exchange("all_gather", kind, a),
                         " (to gather arrays of different shapes, pass each in a tuple: objects are pickled)")
    if kind == OBJECT:
        return s.comm.allgather(x)
    if kind == NUMBER and a.dtype != dtype:
        a = a.astype(dtype)
    if type(a) is not np.ndarray:
        return wrap(_nccl_all_gather(a))
    send = _mpi_buffer(a, "all_gather")
    out = np.empty((s.size, *send.shape), send.dtype)
    _complete(_mpi_call("all_gather", s.comm.Iallgather, send, out))
    return wrap(out)


def _agree_on_hash(op, text, describe):
    """For the wrapper's and minibatches' checks: every rank hashes `text`; when the hashes
    differ, every rank raises the same error, `describe(texts)` naming the first difference
    (the texts travel only then). Returns nothing when they agree."""
    s = _STATE
    if s.size == 1 or s.comm is None:
        return
    every = _exchange(op, extra=_hash(text))
    _agree(every)
    if len({int(h[_EXTRA]) for h in every}) > 1:
        raise RuntimeError(describe(s.comm.allgather(text)))


# ----- non-blocking sums for DistributedDataParallel's buckets -----------------------------------

class _Done:
    """A finished request (one process, or NCCL work queued on the stream in order)."""

    def Wait(self):
        pass


def _duplicate():
    """A communicator of its own for one DistributedDataParallel's buckets (every rank calls it,
    at wrap time), so that two wrappers' all-reduces, started as their gradients finish during
    one backward, can never be matched with each other; None in one process."""
    s = _STATE
    if s.size == 1 or s.comm is None:
        return None
    return s.comm.Dup()


def _free(comm):
    """weakref.finalize's call when a wrapper goes: give its communicator back to MPI."""
    if comm is not None and not _STATE.MPI.Is_finalized():
        comm.Free()


def _start_sum(flat, comm=None):
    """Start summing the contiguous 1-D array `flat` over all ranks, in place, on `comm` (default
    the world); returns a request with .Test(). Host arrays use MPI's non-blocking Iallreduce (the
    next bucket is packed, or the backward goes on, while this one travels); CuPy arrays use NCCL
    on the current stream. The caller has exchanged headers first (every rank is here)."""
    s = _STATE
    if s.size == 1 or s.comm is None:
        return _Done()
    if type(flat) is not np.ndarray:
        _nccl_all_reduce(flat, "sum", out=flat)
        return _Done()
    return _mpi_call("all_reduce", (comm or s.comm).Iallreduce, s.MPI.IN_PLACE, flat, s.MPI.SUM)


def _progress(requests):
    """Let MPI move started requests along (MPI progresses only inside its calls): one test."""
    mpi = [r for r in requests if not isinstance(r, _Done)]
    if mpi:
        _STATE.MPI.Request.Testall(mpi)


def _wait_all(requests):
    mpi = [r for r in requests if not isinstance(r, _Done)]
    if mpi:
        _complete(*mpi)


def _complete(*requests):
    """Finish MPI requests of a collective every rank has entered (its headers agreed) by testing
    them in a loop. MPICH's blocking calls yield the core while they wait, which on a loaded
    machine costs a time slice (milliseconds) per collective; testing keeps the core, as a spin.
    The watchdog still watches: a rank that never sends its part (its backward raised, and was
    caught, after DistributedDataParallel's all-reduce had started) ends the job after the
    timeout, or a second after that rank ended its program."""
    s = _STATE
    test = requests[0].Test if len(requests) == 1 else (lambda: s.MPI.Request.Testall(list(requests)))
    _wait_until(test, lambda: sorted(s.gone), f"the data of collective #{s.seq}", grace=1.0)


def _wait_until(ready, missing, what, grace=0.0, spin=None):
    """Poll `ready()` until it is true, inside a collective every rank has entered. Spins (a
    partner a few microseconds late costs microseconds), every millisecond looks for goodbyes:
    when a rank in `missing()` (the ranks not there yet) has ended its program, aborts the job
    after `grace` seconds (MPI data it sent may still be on its way); after the timeout, aborts
    naming `what` it waited for. With `spin` seconds given, sleeps 1 ms between polls after that
    long (a partner that late is descheduled: leave it the core)."""
    s = _STATE
    if ready():
        return
    start = time.monotonic()
    next_look, gone_since = start + 1e-3, None
    while not ready():
        now = time.monotonic()
        if now < next_look:
            continue
        next_look = now + 1e-3
        if gone_since is None:
            if s.ctl is not None and s.ctl.Iprobe(source=s.MPI.ANY_SOURCE, tag=_TAG_BYE):
                _collect_goodbyes()
            if s.gone & set(missing()):
                gone_since = now
        if gone_since is not None and now - gone_since >= grace:
            _abort(f"waiting for {what}, which every rank had entered: rank(s) "
                   f"{', '.join(map(str, sorted(s.gone & set(missing()) or s.gone)))} ended (end of "
                   f"the script or sys.exit) before sending their part")
        if now - start > s.timeout:
            late = missing()
            who = f"rank(s) {', '.join(map(str, late))}" if late else "a rank"
            _abort(f"the watchdog: waited {now - start:.0f} s for {what}, which every rank had "
                   f"entered: {who} stopped before sending their part (a backward that raised on "
                   f"one rank after DistributedDataParallel's all-reduce had started?); the limit is "
                   f"tt.distributed.init(timeout=) or "
                   f"TT_DIST_TIMEOUT ({s.timeout:g} s)")
        if spin is not None and now - start > spin:
            time.sleep(1e-3)


def _one_node(comm):
    """Whether every rank of `comm` runs on this machine (MPI can share memory among them); every
    rank calls it, and every rank gets the same answer."""
    s = _STATE
    node = comm.Split_type(s.MPI.COMM_TYPE_SHARED, key=comm.Get_rank())
    try:
        return node.Get_size() == comm.Get_size()
    finally:
        node.Free()


def _shared_window(comm, nbytes):
    """An MPI shared-memory window of `nbytes` per rank of `comm` (every rank calls it, each with its
    own size, 0 allowed; all on one node): (the window, each rank's segment as a buffer, in rank
    order). The window stays
    open in a passive epoch (Lock_all), so that Win_sync orders this rank's writes and reads of
    it; it is given back at the end of the program (freeing a window is a collective, which a
    garbage collection on one rank cannot call)."""
    s = _STATE
    try:
        win = s.MPI.Win.Allocate_shared(nbytes, 1, s.MPI.INFO_NULL, comm)
    except s.MPI.Exception as err:
        raise RuntimeError(f"DistributedDataParallel: MPI could not allocate {nbytes / 2**20:.1f} MB of "
                           f"shared memory for the gradient all-reduce (or ZeroRedundancyOptimizer's "
                           f"parameters) ({err.Get_error_string()}; a "
                           f"container's /dev/shm may be too small); pass allreduce='mpi' (or set "
                           f"TT_DDP_ALLREDUCE=mpi) on every rank") from None
    win.Lock_all(s.MPI.MODE_NOCHECK)
    segments = [win.Shared_query(r)[0] for r in range(comm.Get_size())]
    return win, segments


def _raw_broadcast(flat, root):
    """Rank root's flat array into `flat` on every rank, in place (headers exchanged first)."""
    s = _STATE
    if type(flat) is not np.ndarray:
        flat[...] = _nccl_broadcast(flat, root)
    else:
        _complete(_mpi_call("broadcast", s.comm.Ibcast, flat, root))


# ----- GPU arrays: NCCL through CuPy (one GPU tested: tests/devices/test_gpu.py) -------------------

def _nccl():
    """The NCCL communicator of the world, made once: rank 0 draws the unique id, MPI sends it."""
    s = _STATE
    if s.nccl is None:
        import cupy
        from cupy.cuda import nccl
        cupy.cuda.Device(s.local_rank % cupy.cuda.runtime.getDeviceCount()).use()
        uid = nccl.get_unique_id() if s.rank == 0 else None
        uid = s.comm.bcast(uid, root=0)
        count, device = cupy.cuda.runtime.getDeviceCount(), cupy.cuda.Device().id
        try:
            s.nccl = nccl.NcclCommunicator(s.size, uid, s.rank)
        except Exception as err:   # noqa: BLE001 - NCCL's errors are CuPy's NcclError
            raise RuntimeError(
                f"tt.distributed: NCCL could not join rank {s.rank} of {s.size} (local rank "
                f"{s.local_rank}, GPU {device} of {count}): {err}. NCCL needs one GPU per rank: "
                f"launch at most {count} rank(s) per node, or keep the arrays on the CPU (MPI)") from err
    return s.nccl


def _nccl_types(a):
    from cupy.cuda import nccl
    types = {"float16": nccl.NCCL_FLOAT16, "float32": nccl.NCCL_FLOAT32, "float64": nccl.NCCL_FLOAT64,
             "int32": nccl.NCCL_INT32, "int64": nccl.NCCL_INT64, "uint8": nccl.NCCL_UINT8,
             "int8": nccl.NCCL_INT8, "uint32": nccl.NCCL_UINT32, "uint64": nccl.NCCL_UINT64}
    name = a.dtype.name
    if name in ("complex64", "complex128"):        # summed as pairs of reals
        return types["float32" if name == "complex64" else "float64"], 2
    if name not in types:
        raise TypeError(f"tt.distributed: NCCL has no datatype for {a.dtype}; cast the array first")
    return types[name], 1


def _nccl_all_reduce(a, op, out=None):
    import cupy
    from cupy.cuda import nccl
    comm = _nccl()
    send = cupy.ascontiguousarray(a)
    if out is None:
        out = cupy.empty_like(send)
    kind, per = _nccl_types(send)
    if per == 2 and op in ("max", "min"):
        raise TypeError("tt.distributed.all_reduce: max and min of complex arrays are undefined")
    nop = {"sum": nccl.NCCL_SUM, "mean": nccl.NCCL_SUM, "max": nccl.NCCL_MAX, "min": nccl.NCCL_MIN}[op]
    stream = cupy.cuda.get_current_stream()
    comm.allReduce(send.data.ptr, out.data.ptr, send.size * per, kind, nop, stream.ptr)
    return out


def _nccl_broadcast(a, root):
    import cupy
    comm = _nccl()
    buf = cupy.ascontiguousarray(a).copy()
    kind, per = _nccl_types(buf)
    comm.bcast(buf.data.ptr, buf.size * per, kind, root, cupy.cuda.get_current_stream().ptr)
    return buf


def _nccl_all_gather(a):
    import cupy
    comm = _nccl()
    send = cupy.ascontiguousarray(a)
    out = cupy.empty((_STATE.size, *send.shape), send.dtype)
    kind, per = _nccl_types(send)
    comm.allGather(send.data.ptr, out.data.ptr, send.size * per, kind, cupy.cuda.get_current_stream().ptr)
    return out


_SKIP_WARNED = []


def _writes_files(path):
    """Whether tt.save writes `path` on this rank: always on the main rank (and in one process);
    elsewhere when the path names this rank (see tt.save), else a warning, once per process."""
    s = _STATE
    if not (s.initialized and s.size > 1 and s.rank != 0):
        return True
    if _names_rank(path, s.rank):
        return True
    if not _SKIP_WARNED:
        _SKIP_WARNED.append(True)
        import warnings
        warnings.warn(f"tt.save on rank {s.rank} of {s.size}: {os.fspath(path)!r} does not name this rank, "
                      f"so only rank 0 writes it (every rank writing one file would race); to write a "
                      f"file per rank, put the rank in its name: f'ckpt_{{rank}}.npz' (this warning is "
                      f"shown once)", stacklevel=3)
    return False


def _names_rank(path, r):
    import re
    full = os.fspath(path)
    pattern = rf"(?:^|[^0-9a-z]|rank)0*{r}(?![0-9])"
    return any(re.search(pattern, part, re.IGNORECASE)
               for part in (os.path.basename(full), os.path.basename(os.path.dirname(full))))



class _Optim(types.ModuleType):
    """`tt.distributed.optim` (PyTorch's `torch.distributed.optim`): ZeroRedundancyOptimizer, whose
    home is tinytensor/optim/zero.py, loaded on first use since it builds on tt.optim and
    tt.nn.parallel, which import this module. Registered in sys.modules, so that PyTorch's
    spelling `from tinytensor.distributed.optim import ZeroRedundancyOptimizer` works too."""

    def __getattr__(self, name):
        from .optim import zero
        if name in zero.__all__:
            return getattr(zero, name)
        raise AttributeError(f"tt.distributed.optim has no attribute {name!r} (it has {zero.__all__})")

    def __dir__(self):
        from .optim import zero
        return list(zero.__all__)


optim = sys.modules[__name__ + ".optim"] = _Optim(__name__ + ".optim", _Optim.__doc__)
