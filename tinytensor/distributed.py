"""Several processes, one model: collectives on MPI (through `mpi4py`), and NCCL for GPU arrays.

    mpiexec -n 2 python train.py          # pip install -e ".[distributed]" puts mpiexec in the env

    import tinytensor as tt
    dist = tt.distributed
    dist.init()                                   # MPI's world; one process works without MPI
    total = dist.all_reduce(np.array([n_correct, n_seen]))          # the same sum on every rank
    if dist.is_main():
        print(total)

The same program runs on every process (a *rank*); `world_size()` processes in all, rank 0 is the
main one. The collectives must be called by every rank, in the same order, with arrays of the
same shape and dtype (as in MPI and `torch.distributed`); a rank that skips one waits forever
-- except that `init()` makes an uncaught exception on any rank abort all of them
(`MPI.COMM_WORLD.Abort`), with the rank and the traceback on stderr, instead of a hang.
(`sys.exit()` on one rank alone is no exception: launch with `python -m mpi4py script.py` to
make that abort too.)

NumPy arrays travel through MPI's buffer interface (`Allreduce`, `Bcast`, `Allgather`: no
pickling); Tensors give their values and get a Tensor back (no gradient flows through a
collective); Python numbers come back as numbers; any other object is pickled (`broadcast` of a
config dict, `all_gather` of strings). CuPy arrays (device "cuda") use NCCL through
`cupy.cuda.nccl`, one communicator made on first use, its id sent over MPI; `init()` makes GPU
`local_rank() % cupy.cuda.runtime.getDeviceCount()` each rank's current device (call it before
moving a model to "cuda"). That path is written to the NCCL API but
has not run on hardware in this project's CI (no GPU there); its tests skip without a GPU.

Without `mpi4py` (or with one process) every function works: rank 0 of a world of 1, and the
collectives return a copy of their input. `init()` raises, naming the extra to install, only when
an MPI launcher started several processes and mpi4py is missing.
"""

import os
import sys

import numpy as np

from . import backend
from .tensor import Tensor

__all__ = ["init", "is_initialized", "rank", "world_size", "local_rank", "is_main", "barrier",
           "all_reduce", "broadcast", "all_gather"]

_OPS = ("sum", "mean", "max", "min")


class _State:
    initialized = False
    comm = None            # mpi4py's COMM_WORLD, or None in a single process without MPI
    MPI = None
    rank = 0
    size = 1
    local_rank = 0
    nccl = None            # the NCCL communicator, made on the first collective on a GPU array
    previous_hook = None


_STATE = _State()

# Variables that MPI launchers (MPICH's hydra, Open MPI, Intel MPI, Slurm's srun) set in each process.
_LAUNCHER_SIZE = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS", "PMIX_SIZE")


def _launched_size():
    for name in _LAUNCHER_SIZE:
        try:
            return int(os.environ[name])
        except (KeyError, ValueError):
            continue
    return 1


def init():
    """Join MPI's world communicator (once; later calls do nothing) and return the world size.

    Needs `mpi4py` (`pip install -e ".[distributed]"`) when several processes were launched; a
    process started on its own runs as rank 0 of 1, with or without mpi4py. With more than one
    rank, an uncaught exception on any rank aborts every rank (no rank is left waiting in a
    collective): the hook prints the traceback with the rank, then calls `COMM_WORLD.Abort(1)`.
    """
    s = _STATE
    if s.initialized:
        return s.size
    try:
        from mpi4py import MPI
    except ImportError as err:
        n = _launched_size()
        if n > 1:
            raise ImportError(f"tt.distributed.init: an MPI launcher started {n} processes but mpi4py "
                              f"is not installed; install the extra: pip install -e \".[distributed]\" "
                              f"(mpi4py and MPICH from wheels, with their mpiexec)") from err
        s.initialized = True            # one process: rank 0 of 1, no MPI needed
        return 1
    s.MPI, s.comm = MPI, MPI.COMM_WORLD
    s.rank, s.size = s.comm.Get_rank(), s.comm.Get_size()
    node = s.comm.Split_type(MPI.COMM_TYPE_SHARED, key=s.rank)   # the ranks on this machine
    s.local_rank = node.Get_rank()
    node.Free()
    s.initialized = True
    if s.size > 1:
        _pick_gpu(s.local_rank)
    if s.size > 1 and s.previous_hook is None:
        s.previous_hook = sys.excepthook
        sys.excepthook = _abort_on_exception
    return s.size


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
    finally:
        s.comm.Abort(1)


def is_initialized():
    """Whether `init()` has run (collectives and rank() call it for you)."""
    return _STATE.initialized


def _world():
    if not _STATE.initialized:
        init()
    return _STATE


def rank():
    """This process's rank, 0 .. world_size() - 1 (0 without MPI)."""
    return _world().rank


def world_size():
    """The number of processes (1 without MPI)."""
    return _world().size


def local_rank():
    """This process's rank among the ranks on the same machine (picks its GPU)."""
    return _world().local_rank


def is_main():
    """True on rank 0: the one that prints, plots and writes checkpoints."""
    return _world().rank == 0


def barrier():
    """Wait until every rank has called barrier()."""
    s = _world()
    if s.comm is not None and s.size > 1:
        s.comm.Barrier()


# ----- arrays in, arrays out ---------------------------------------------------------------------

def _unwrap(x, what):
    """(contiguous array, rewrap): Tensors give values and get a Tensor back; numbers come back
    as numbers; None for any other object (pickled by the caller)."""
    if isinstance(x, Tensor):
        return x.data, lambda a: Tensor(a)
    if isinstance(x, np.ndarray) or backend.is_array(x):
        return x, lambda a: a
    if isinstance(x, (bool, int, float, complex, np.generic)):
        return np.asarray(x), lambda a: a[()].item() if isinstance(x, (bool, int, float, complex)) else a[()]
    return None, None


def _check_op(op):
    if op not in _OPS:
        raise ValueError(f"tt.distributed.all_reduce: op must be one of {', '.join(map(repr, _OPS))}, "
                         f"got {op!r}")


def _mpi_buffer(a, what):
    """A C-contiguous host array MPI can send; a clear error for dtypes MPI has no type for."""
    a = a if a.flags.c_contiguous else a.copy(order="C")    # (ascontiguousarray makes 0-d 1-d)
    if a.dtype.hasobject or a.dtype.kind in "OUSV":
        raise TypeError(f"tt.distributed.{what}: arrays of dtype {a.dtype} have no MPI type; send "
                        f"numbers (a numeric array), or a Python object (it is pickled)")
    return a


def _mpi_call(what, fn, *args):
    try:
        return fn(*args)
    except KeyError as err:          # mpi4py: no MPI datatype for this typecode (float16, ...)
        raise TypeError(f"tt.distributed.{what}: MPI has no datatype for {err}; cast the array "
                        f"(e.g. .astype(np.float32)) before the collective") from None


def all_reduce(x, op="sum"):
    """The elementwise sum ("sum"), mean ("mean"), maximum ("max") or minimum ("min") of `x`
    over all ranks, on every rank. `x` is a NumPy/CuPy array, a Tensor (a Tensor comes back,
    outside the tape) or a number; every rank passes the same shape and dtype. The mean of an
    integer array is a float array; booleans sum to counts (int64), and max/min are any/all.
    `x` itself is not modified.
    """
    _check_op(op)
    a, wrap = _unwrap(x, "all_reduce")
    if a is None:
        raise TypeError(f"tt.distributed.all_reduce: x must be an array, a Tensor or a number, got "
                        f"{type(x).__name__}")
    s = _world()
    if a.dtype == bool:              # MPI sums no booleans: count them, as NumPy's sum does
        a = a.astype(np.int64) if op in ("sum", "mean") else a.astype(np.uint8)
        if op in ("max", "min"):
            wrap = (lambda w: lambda out: w(out.astype(bool)))(wrap)
    if s.size == 1 or s.comm is None:
        out = backend.copy(a)
    elif type(a) is not np.ndarray and backend.is_array(a):
        out = _nccl_all_reduce(a, op)
    else:
        send = _mpi_buffer(a, "all_reduce")
        out = np.empty_like(send)
        mpi_op = {"sum": s.MPI.SUM, "mean": s.MPI.SUM, "max": s.MPI.MAX, "min": s.MPI.MIN}[op]
        _mpi_call("all_reduce", s.comm.Allreduce, send, out, mpi_op)
    if op == "mean":
        xp = backend.namespace(out)
        out = out / s.size if out.dtype.kind not in "fc" else xp.divide(out, s.size, out=out)
    return wrap(out)


def broadcast(x, root=0):
    """Rank `root`'s `x` on every rank. Arrays, Tensors and numbers go through MPI's buffers:
    every rank passes one of the same shape and dtype (its values are ignored off the root; it
    is not modified). Any other object (a dict, a string, None off the root) is pickled."""
    s = _world()
    if isinstance(root, bool) or not isinstance(root, (int, np.integer)) or not 0 <= root < s.size:
        raise ValueError(f"tt.distributed.broadcast: root must be a rank in 0..{s.size - 1}, got {root!r}")
    a, wrap = _unwrap(x, "broadcast")
    if s.size == 1 or s.comm is None:
        return wrap(backend.copy(a)) if a is not None else x
    if a is None:
        return s.comm.bcast(x, root=int(root))
    if type(a) is not np.ndarray:
        return wrap(_nccl_broadcast(a, int(root)))
    buf = _mpi_buffer(a, "broadcast").copy()
    _mpi_call("broadcast", s.comm.Bcast, buf, int(root))
    return wrap(buf)


def all_gather(x):
    """Every rank's `x`, stacked along a new first axis in rank order: an array (or Tensor) of
    shape (world_size(), *x.shape) on every rank, from arrays of one shape and dtype. Numbers give
    an array of shape (world_size(),); any other object gives a list (pickled)."""
    s = _world()
    a, wrap = _unwrap(x, "all_gather")
    if a is None:
        return [x] if s.size == 1 or s.comm is None else s.comm.allgather(x)
    if isinstance(x, (bool, int, float, complex, np.generic)):
        wrap = lambda out: out
    if s.size == 1 or s.comm is None:
        return wrap(backend.namespace(a).stack([a]))
    if type(a) is not np.ndarray:
        return wrap(_nccl_all_gather(a))
    send = _mpi_buffer(a, "all_gather")
    out = np.empty((s.size, *send.shape), send.dtype)
    _mpi_call("all_gather", s.comm.Allgather, send, out)
    return wrap(out)


# ----- non-blocking sums for DistributedDataParallel's buckets -----------------------------------

class _Done:
    """A finished request (one process, or NCCL work queued on the stream in order)."""

    def Wait(self):
        pass


def _start_sum(flat):
    """Start summing the contiguous 1-D array `flat` over all ranks, in place; returns a request
    with .Wait(). Host arrays use MPI's non-blocking Iallreduce (the next bucket is packed while
    this one travels); CuPy arrays use NCCL on the current stream."""
    s = _STATE
    if s.size == 1 or s.comm is None:
        return _Done()
    if type(flat) is not np.ndarray:
        _nccl_all_reduce(flat, "sum", out=flat)
        return _Done()
    return _mpi_call("all_reduce", s.comm.Iallreduce, s.MPI.IN_PLACE, flat, s.MPI.SUM)


def _wait_all(requests):
    s = _STATE
    mpi = [r for r in requests if not isinstance(r, _Done)]
    if mpi:
        s.MPI.Request.Waitall(mpi)


# ----- GPU arrays: NCCL through CuPy (untested on hardware here; see the README) -----------------

def _nccl():
    """The NCCL communicator of the world, made once: rank 0 draws the unique id, MPI sends it."""
    s = _STATE
    if s.nccl is None:
        import cupy
        from cupy.cuda import nccl
        cupy.cuda.Device(s.local_rank % cupy.cuda.runtime.getDeviceCount()).use()
        uid = nccl.get_unique_id() if s.rank == 0 else None
        uid = s.comm.bcast(uid, root=0)
        s.nccl = nccl.NcclCommunicator(s.size, uid, s.rank)
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


def _writes_files():
    """False on ranks other than the main one of an initialized world (tt.save skips there)."""
    return not (_STATE.initialized and _STATE.size > 1 and _STATE.rank != 0)
