"""Data-parallel training: one model replica per process, gradients averaged after backward().

    dist = tt.distributed
    dist.init()
    model = tt.nn.parallel.DistributedDataParallel(make_model())   # rank 0's parameters everywhere
    opt = tt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    with model.join():                 # ranks with uneven numbers of batches (else not needed)
        for xb, yb in tt.data.minibatches(X, y, 32, rng=seed, rank=dist.rank(),
                                          world_size=dist.world_size()):   # a disjoint shard per rank
            loss = loss_fn(model(xb), yb)
            opt.zero_grad()
            loss.backward()            # ... and the gradients are averaged over the ranks here
            opt.step()                 # the same update on every rank: the replicas stay equal

As PyTorch's: `forward` is the wrapped module's (`ddp.module` is the module; parameter names get a
"module." prefix). When the wrapper is made, every rank checks that all ranks' models agree in
the names, shapes, dtypes, requires_grad and order of every parameter and buffer (one hash per
rank; the full lists travel only when they differ, and every rank then raises naming the first
difference), then every parameter and buffer, frozen ones included, is broadcast from rank 0.
Each `backward()` that went through this wrapper's forward ends with the gradients replaced by
the mean over the ranks (a backward through the bare module, `ddp.module(x)`, stays local);
`with ddp.no_sync():` skips that (gradients accumulate locally, and the first backward outside it
averages the sum: gradient accumulation costs one all-reduce). broadcast_buffers: at each forward
with gradients enabled and outside no_sync, the buffers (batch norm's running statistics) are
broadcast from rank 0, as PyTorch does (PyTorch decides by the previous forward's state, this by
the current one's: an evaluation under no_grad on one rank needs no other rank).

The gradients travel in a few large messages, overlapping the rest of the backward: the
parameters, last layer first (their gradients finish first), are cut into buckets of one dtype,
as PyTorch's: a bucket is closed once it holds 1 MB (the first) or `bucket_cap_mb` megabytes (the
others). During the backward, each parameter's gradient is divided by the world size and packed
into its bucket's flat array as soon as it is complete (the engine's GRAD_READY hook: every node
that uses the parameter has been swept), and a bucket whose gradients are all packed starts its
non-blocking MPI all-reduce (`Iallreduce`) at once, in bucket order on every rank, while the
sweep goes on with the layers below; the end of the backward packs what is left (parameters
the sweep did not reach), starts the remaining buckets, waits for all and unpacks. The sums are
the same numbers, in the same messages, as when every bucket starts after the backward.
A parameter whose gradient is None on every rank keeps None (one flag per parameter rides in its
bucket); None on some ranks counts as zeros there.

When every rank runs on one machine (MPI's COMM_TYPE_SHARED holds them all), the buckets live in
an MPI shared-memory window instead and the all-reduce is plain NumPy on it (_Shared): each rank
sums its slice of each bucket over the ranks, in rank order, and writes the sum into every
rank's segment; no copy through MPI, no MPI progress to wait for. allreduce="mpi" (or
TT_DDP_ALLREDUCE=mpi) keeps MPI's Iallreduce; "shared" insists on shared memory. With a
tt.distributed.optim.ZeroRedundancyOptimizer over the wrapper's parameters (_ZeroWindow), the
parameters themselves move into shared memory, the all-reduce becomes a reduce-scatter into one
shared array of means (.grad are read-only views of it), and each rank's optimizer updates its
slice of the shared parameters.
"""

import itertools
import os
import sys
import weakref
from contextlib import contextmanager

import numpy as np

from .. import backend, distributed, tape
from ..distributed import _ARG, _CODE, _EXTRA, _OP, _SHAPE
from ..state import STATE
from ..tensor import Tensor, mark_modified
from .module import Module

__all__ = ["DistributedDataParallel"]

_OWN = (_CODE["ddp_sync"], _CODE["ddp_buffers"], _CODE["join"])   # the wrapper's collectives
ALLREDUCE = ("auto", "shared", "mpi")    # DistributedDataParallel(allreduce=), TT_DDP_ALLREDUCE
FIRST_BUCKET_MB = 1      # PyTorch's first bucket: small, so the first all-reduce starts early
# The live wrappers, by creation: a backward through several (a GAN's generator and
# discriminator) averages them in the same order on every rank.
_LIVE = weakref.WeakValueDictionary()
_MADE = itertools.count()


def _after_backward(grads):
    for key in sorted(_LIVE.keys()):
        ddp = _LIVE.get(key)
        if ddp is not None and ddp._through_forward == tape.SWEEPS[0]:   # this backward's sweep
            ddp._through_forward = None
            ddp._after_backward(grads)


def _release(comm, params, ready):
    """A wrapper is gone: its communicator goes back to MPI, and its parameters leave GRAD_READY
    (unless a newer wrapper has taken them), so backward() stops counting their consumers."""
    distributed._free(comm)
    for p in params:
        if tape.GRAD_READY.get(p) is ready:
            tape.GRAD_READY.pop(p)


def _tensors(out):
    """The Tensors in a forward's output (a Tensor, or tuples, lists and dicts of them)."""
    stack = [out]
    while stack:
        x = stack.pop()
        if isinstance(x, Tensor):
            yield x
        elif isinstance(x, (list, tuple)):
            stack.extend(x)
        elif isinstance(x, dict):
            stack.extend(x.values())


class _Bucket:
    """Parameters of one dtype and device, and where each lives in the flat buffer."""

    def __init__(self, params, flags):
        self.params = params
        self.slices = []
        offset = 0
        for p in params:
            self.slices.append((offset, offset + p.data.size))
            offset += p.data.size
        self.flags = flags                       # how many presence flags follow the gradients
        self.size = offset
        self.buffer = backend.namespace(params[0].data).empty(offset + flags, params[0].data.dtype)

    def claim(self):
        """Before a round packs into the buffer: the last round's averaged gradients are views of
        it (each parameter's .grad); if any is still held (by .grad, or by a user who kept it),
        this round packs into a new buffer and leaves the old one to them. After zero_grad()
        nothing holds it, and it is reused: no copy out of the bucket, no new memory."""
        # 2 references: the attribute and getrefcount's argument; each view held adds one
        if self.buffer is self.shared:
            if self.held():
                self.buffer = np.empty_like(self.buffer)
        elif type(self.buffer) is np.ndarray and sys.getrefcount(self.buffer) > 2:
            self.buffer = np.empty_like(self.buffer)

    shared = None        # this rank's segment of the shared window (_Shared), once allocated

    def held(self):
        """Whether a view of this rank's shared segment is still held (a .grad from the last
        round, kept): the other ranks write into the segment during a shared round."""
        # tinytensor's own references: this attribute, the window's list, .buffer while it is this
        return self.shared is not None and sys.getrefcount(self.shared) > 3 + (self.buffer is self.shared)


def _add_scaled(y, x, scale):
    """y += x * scale, in place: one pass (BLAS axpy) where the dtypes allow. With scale a power of
    two the product is exact, so the sum is the same number as x * scale + y rounded once."""
    if x.dtype == y.dtype and x.dtype.char in "fdFD" and y.flags.c_contiguous and x.size > 1:
        from scipy.linalg import blas
        blas.get_blas_funcs("axpy", dtype=y.dtype)(x, y, a=scale)
    else:
        y += x * scale


def _cuts(n, itemsize, size):
    """Where each rank's slice of a bucket of n items begins, on 64-byte boundaries, then n: the
    slices the shared-memory all-reduce sums, one per rank, and ZeroRedundancyOptimizer's shards."""
    align = max(1, _Shared.LINE // itemsize)
    return [min(n, -(-(n * r // size) // align) * align) for r in range(size)] + [n]


class _Shared:
    """The buckets in an MPI shared-memory window, for ranks on one machine: the all-reduce as
    plain NumPy on memory every rank reads, with no copy through MPI and no MPI progress to wait
    for.

    Each rank packs its gradients (divided by the world size) into its own segment, then says so
    in its `packed` counter. Bucket k is cut into world_size slices; rank r sums slice r over the
    ranks' segments in rank order (((s0 + s1) + s2) + ...), writes the sum into slice r of every
    rank's segment, then raises its `reduced` counter. When every rank's `reduced` counter has
    passed the round's last bucket, each rank's segment holds the whole mean: its .grad are views
    of it, as on the MPI path. Every rank reads the same sums (computed once), so the replicas
    cannot drift; for 2 ranks the sums are the MPI path's bit for bit (a + b = b + a).

    The counters only grow (round * buckets + k + 1), each in its own cache line of its rank's
    segment; Win_sync orders the data against them (a release before raising one, an acquire
    after reading the others'). Nobody writes a rank's segment between the end of a round and
    that rank's next packing, so a .grad modified in place (clipping) stays that rank's own; a
    .grad kept into the next round is seen at the round's start (every rank says so in its
    header) and the round goes through MPI instead.
    """

    LINE = 64                    # bytes: counters and buckets start on their own cache lines
    # With a ZeroRedundancyOptimizer (_ZeroWindow): per bucket, the shared array the sums go to,
    # once, instead of into every rank's segment (a reduce-scatter: no copy back)
    mean = None
    # ... and on 2 ranks `direct`: each rank packs only the part of its gradients in the other
    # rank's slice, straight into `mean`, and adds its own part from the gradients themselves when
    # it sums its slice (`own`: per bucket, (start, end, gradient part, scale)): no packing of it
    direct = False

    def __init__(self, buckets, comm):
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        offsets, nbytes = [], 2 * self.LINE          # the two counters, then the buckets
        for b in buckets:
            offsets.append(nbytes)
            nbytes += -(-b.buffer.nbytes // self.LINE) * self.LINE
        self.win, segments = distributed._shared_window(comm, nbytes)
        self.packed = [np.frombuffer(seg, np.int64, 1, 0) for seg in segments]
        self.reduced = [np.frombuffer(seg, np.int64, 1, self.LINE) for seg in segments]
        for counter in (self.packed[self.rank], self.reduced[self.rank]):
            counter[0] = 0
        # views[r][k]: bucket k in rank r's segment (gradients, then the presence flags); made from
        # the window's buffer itself, so that NumPy's views of one keep it (not a shared parent)
        # alive: held() counts them
        self.views = [[np.frombuffer(seg, b.buffer.dtype, b.buffer.size, off)
                       for b, off in zip(buckets, offsets)] for seg in segments]
        # per bucket: where each rank's slice begins
        self.bounds = [_cuts(b.buffer.size, b.buffer.itemsize, self.size) for b in buckets]
        for b, mine in zip(buckets, self.views[self.rank]):
            b.shared = mine
        self.nb = len(buckets)
        self.own = [[] for _ in buckets]
        self.rounds = 0                              # shared rounds so far (the same on every rank)
        self.done = 0                                # buckets this rank has reduced in this round
        comm.Barrier()                               # every counter is zero before any is read

    def _target(self, k):
        return self.rounds * self.nb + k + 1

    def publish(self, counter, k):
        """Raise this rank's counter to bucket k of this round, after its writes (release)."""
        self.win.Sync()
        counter[self.rank][0] = self._target(k)
        self.win.Sync()

    def late(self, counter, k):
        """The ranks whose counter has not reached bucket k of this round."""
        target = self._target(k)
        return [r for r in range(self.size) if counter[r][0] < target]

    def arrived(self, counter, k):
        target = self._target(k)
        for r in range(self.size):
            if counter[r][0] < target:
                return False
        self.win.Sync()                              # acquire: their data before the counter
        return True

    def pack(self, k, bucket, i, g, scale):
        """`direct` (2 ranks): the part of parameter i's gradient g (None: zeros) in the other rank's
        slice of bucket k, times scale, into the shared mean; this rank's part is kept for reduce()."""
        lo, hi = bucket.slices[i]
        a, b = self.bounds[k][self.rank], self.bounds[k][self.rank + 1]
        mean = self.mean[k]
        flat = None if g is None else g.reshape(-1)
        for x, y in ((lo, min(hi, a)), (max(lo, b), hi)):      # the parts outside [a, b)
            if x < y:
                if flat is None:
                    mean[x:y] = 0
                else:
                    np.multiply(flat[x - lo:y - lo], scale, out=mean[x:y])
        x, y = max(lo, a), min(hi, b)
        if x < y and flat is not None:
            self.own[k].append((x, y, flat[x - lo:y - lo], scale))
        flag = bucket.size + i                                 # its presence flag
        if a <= flag < b:
            self.own[k].append((flag, flag + 1, np.ones(1, mean.dtype) * (g is not None), 1.0))
        else:
            mean[flag] = g is not None

    def reduce(self, k):
        """Sum this rank's slice of bucket k over the ranks, in rank order, into every segment."""
        lo, hi = self.bounds[k][self.rank], self.bounds[k][self.rank + 1]
        if self.direct:                  # the other rank's part is in the mean: add this rank's
            mean = self.mean[k]
            for x, y, part, scale in self.own[k]:
                _add_scaled(mean[x:y], part, scale)
            self.own[k] = []
        elif lo < hi:
            parts = [v[k][lo:hi] for v in self.views]
            if self.mean is not None:            # ZeroRedundancyOptimizer: into the one shared mean
                total = np.add(parts[0], parts[1], out=self.mean[k][lo:hi])
                for part in parts[2:]:
                    np.add(total, part, out=total)
            else:
                # slice r of every segment is rank r's alone in a round: the sum can build up in place
                total = np.add(parts[0], parts[1], out=parts[0])
                for part in parts[2:]:
                    np.add(total, part, out=total)
                for part in parts[1:]:
                    part[...] = total
        self.publish(self.reduced, k)
        self.done = k + 1

    def reduce_ready(self, started):
        """During the backward: reduce, in order, the buckets every rank has packed (no waiting)."""
        while self.done < started and self.arrived(self.packed, self.done):
            self.reduce(self.done)

    def finish(self):
        """The end of a round: reduce what is left (waiting for the other ranks' packing), then wait
        until every rank has written its slices."""
        for k in range(self.done, self.nb):
            distributed._wait_until(lambda: self.arrived(self.packed, k), lambda: self.late(self.packed, k),
                                    f"DistributedDataParallel's shared-memory gradient reduction "
                                    f"(bucket {k}: the ranks' packed gradients)", spin=0.05)
            self.reduce(k)
        last = self.nb - 1
        distributed._wait_until(lambda: self.arrived(self.reduced, last),
                                lambda: self.late(self.reduced, last),
                                "DistributedDataParallel's shared-memory gradient reduction (the "
                                "ranks' sums)", spin=0.05)
        self.rounds += 1
        self.done = 0


class _ZeroWindow:
    """ZeroRedundancyOptimizer's memory on one machine: the wrapped model's parameters and the
    averaged gradients in one MPI shared-memory window (rank 0's segment, mapped by every rank),
    laid out as the gradient buckets.

    Every shared parameter's .data is a view of it: one copy of the model on the machine. A round
    of the gradient all-reduce then sums each rank's slice of each bucket into `mean`, once (a
    reduce-scatter, no copy back into the segments), and every rank's .grad are read-only views
    of `mean`; each rank's optimizer updates its slice of the parameters in place, and the other
    ranks see the new weights with no all-gather. Two meetings bracket the update: `entered`
    (nobody still reads the weights of the step before) and `stepped` (nobody reads them half
    updated); each a counter per rank in its own cache line, waited on as the all-reduce's."""

    def __init__(self, reducer, params):
        """Every rank calls it (a collective): the window, rank 0's values of `params` written into
        it, then every parameter's .data made a view of it."""
        comm, line = reducer.comm, _Shared.LINE
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        nbytes = 2 * self.size * line                 # the counters, then the parameters, the means
        param_at, mean_at = [], []
        for b in reducer.buckets:
            param_at.append(nbytes)
            nbytes += -(-b.size * b.buffer.itemsize // line) * line
        for b in reducer.buckets:
            mean_at.append(nbytes)
            nbytes += -(-b.buffer.nbytes // line) * line
        self.win, segments = distributed._shared_window(comm, nbytes if self.rank == 0 else 0)
        seg = segments[0]
        self.entered = [np.frombuffer(seg, np.int64, 1, 2 * r * line) for r in range(self.size)]
        self.stepped = [np.frombuffer(seg, np.int64, 1, (2 * r + 1) * line) for r in range(self.size)]
        self.entered[self.rank][0] = self.stepped[self.rank][0] = 0
        self.params = [np.frombuffer(seg, b.buffer.dtype, b.size, at)
                       for b, at in zip(reducer.buckets, param_at)]
        self.mean = [np.frombuffer(seg, b.buffer.dtype, b.buffer.size, at)
                     for b, at in zip(reducer.buckets, mean_at)]
        # the .grad views: read-only (an in-place change on one rank would change every rank's),
        # made from a buffer of their own so that held() can count the views still alive
        readonly = memoryview(seg).toreadonly()
        self.readonly = [np.frombuffer(readonly, b.buffer.dtype, b.buffer.size, at)
                         for b, at in zip(reducer.buckets, mean_at)]
        self.bounds = [_cuts(b.buffer.size, b.buffer.itemsize, self.size) for b in reducer.buckets]
        self.shared = set()
        for p in params:
            k, i = reducer.where[id(p)]
            lo, hi = reducer.buckets[k].slices[i]
            if self.rank == 0:
                self.params[k][lo:hi] = p.data.reshape(-1)
            self.shared.add(id(p))
        self.win.Sync()
        comm.Barrier()                                # rank 0's values are in; every counter is zero
        self.win.Sync()
        for p in params:
            k, i = reducer.where[id(p)]
            lo, hi = reducer.buckets[k].slices[i]
            p.data = self.params[k][lo:hi].reshape(p.data.shape)
            mark_modified(p)
        self.steps = 0                                # optimizer steps so far (the same on every rank)

    def shard(self, reducer, p):
        """(bucket k, the start of p in it, this rank's part of p: lo, hi in the bucket), or None."""
        k, i = reducer.where[id(p)]
        start, end = reducer.buckets[k].slices[i]
        lo, hi = max(start, self.bounds[k][self.rank]), min(end, self.bounds[k][self.rank + 1])
        return (k, start, lo, hi) if lo < hi else None

    def held(self):
        """Whether a .grad of the last round (a view of `mean`) is still held on this rank."""
        # references of tinytensor's own: the list's and getrefcount's argument
        return any(sys.getrefcount(self.readonly[k]) > 2 for k in range(len(self.readonly)))

    def meet(self, counter, what):
        """Raise this rank's counter to this step, then wait for every rank's (the watchdog's wait)."""
        target = self.steps + 1
        self.win.Sync()                               # release: this rank's writes before the counter
        counter[self.rank][0] = target
        self.win.Sync()

        def arrived():
            for c in counter:
                if c[0] < target:
                    return False
            self.win.Sync()                           # acquire: their writes before their counters
            return True
        distributed._wait_until(arrived, lambda: [r for r in range(self.size) if counter[r][0] < target],
                                f"ZeroRedundancyOptimizer.step() ({what})", spin=0.05)


class _Reducer:
    """The buckets and the all-reduce of one wrapper (a plain object: Module._walk ignores it)."""

    def __init__(self, params, cap_bytes, comm, shared=False):
        groups, order = {}, []
        for p in reversed(params):               # gradients of the last layers are ready first
            key = (type(p.data), p.data.dtype)
            if key not in groups:
                groups[key] = [[]]
                order.append(key)
            chunks = groups[key]
            cap = min(FIRST_BUCKET_MB * 2**20, cap_bytes) if len(chunks) == 1 else cap_bytes
            if chunks[-1] and sum(q.data.nbytes for q in chunks[-1]) >= cap:   # full: PyTorch's rule
                chunks.append([])
            chunks[-1].append(p)
        chunks = [chunk for key in order for chunk in groups[key]]
        # each bucket carries one presence flag per parameter in it, after the gradients
        self.buckets = [_Bucket(chunk, len(chunk)) for chunk in chunks]
        self.where = {id(p): (k, i) for k, b in enumerate(self.buckets) for i, p in enumerate(b.params)}
        self.params = params
        self.cap_bytes = cap_bytes
        self.comm = comm                         # the wrapper's own communicator (None: one process)
        # the all-reduce in shared memory (all ranks on one node, host arrays), made at its first round
        self.shared_memory = bool(shared) and comm is not None and all(type(b.buffer) is np.ndarray
                                                                       for b in self.buckets)
        self.window = None
        self.zero = None                         # a ZeroRedundancyOptimizer's shared window (_ZeroWindow)
        # the layout, the same on every rank of one model: checked in each gradient round's header
        self.fingerprint = distributed._hash(repr([(b.buffer.dtype.str, b.size) for b in self.buckets]
                                                  + [self.shared_memory]))


class _Sync:
    """One round of the gradient all-reduce: the buckets packed so far, the ones started (always a
    prefix, so every rank starts them in the same order), their requests."""

    def __init__(self, reducer, divisor, sweep, same_buffers=False, shared=False):
        for bucket in reducer.buckets:
            if shared:                           # this rank's segment of the shared window
                bucket.buffer = bucket.shared
            elif not same_buffers:               # (gradient_as_bucket_view: always the same buffer)
                bucket.claim()
        self.window = reducer.window if shared else None
        self.divisor = divisor
        # x / 2**k and x * 2**-k round the same exact value: bit for bit the same, and a multiply is
        # cheaper than a divide in the packing pass (which runs over every gradient, every step)
        self.scale = 1.0 / divisor if divisor & (divisor - 1) == 0 else None
        self.sweep = sweep                       # the backward it belongs to (tape.SWEEPS)
        self.packed = set()                      # ids of the parameters packed
        self.missing = [len(b.params) for b in reducer.buckets]   # per bucket, not packed yet
        self.started = 0                         # buckets started: 0 .. started - 1
        self.requests = []


def _broadcast_packed(group, root):
    """Rank root's values of the Tensors in `group` (one array type and dtype) on every rank, in
    place, packed into one message."""
    xp = backend.namespace(group[0].data)
    flat = xp.concatenate([t.data.reshape(-1) for t in group])
    distributed._raw_broadcast(flat, root)
    offset = 0
    for t in group:
        t.data[...] = flat[offset:offset + t.data.size].reshape(t.data.shape)
        offset += t.data.size
        mark_modified(t)


class DistributedDataParallel(Module):
    """Wrap `module` for data-parallel training over `tt.distributed`'s ranks (PyTorch's name).

    module: the model, the same architecture on every rank (checked: else every rank raises
        naming the first difference); its parameters and buffers are overwritten by rank 0's, so
        the ranks start equal whatever their seeds.
    bucket_cap_mb: the size of a message, in megabytes (PyTorch's default, 25): a bucket is closed
        once it holds that much (the first one once it holds 1 MB, as PyTorch's), so that the
        first all-reduces start early in the backward.
    broadcast_buffers: send rank 0's buffers (batch norm's running statistics) to every rank at
        each forward with gradients enabled (outside `tt.no_grad()` and `no_sync()`), as PyTorch.
        An evaluation under `tt.no_grad()` on one rank alone needs no other rank.
    gradient_as_bucket_view: PyTorch's option of that name: the averaged gradients are views of
        the bucket buffers, which the next all-reduce overwrites, so a `.grad` kept from one step
        to the next changes with it. Default False: the gradients are views too (on the host; a
        copy on a GPU), but the next round packs into a new buffer while any of them is still
        held, so a kept `.grad` keeps its values; after `zero_grad()` the buffer is reused, with
        no copy.
    allreduce: how the gradients are summed: "auto" (the default) through shared memory when
        every rank runs on this machine and the parameters are NumPy arrays, else MPI's
        non-blocking all-reduce (NCCL for CuPy arrays); "shared" the same, refusing to start
        otherwise; "mpi" always MPI. Default: the environment variable TT_DDP_ALLREDUCE, else
        "auto". Every rank must pass the same (checked at the wrap). Both give the same sums
        (bit for bit on 2 ranks; on more, each path's order of the sums, equal on every rank).
        A step whose round begins while some rank still holds a `.grad` of the last one goes
        through MPI (the others would write into it). The shared buffers stay until the end of
        the program.

    Averaging happens during a `loss.backward()` that went through this wrapper's forward: each
    bucket's all-reduce starts as soon as its gradients are complete, and the backward returns
    with every gradient averaged. Call `sync_gradients()` yourself when the gradients come from
    elsewhere (`tt.grad`, a compiled step, gradients set by hand) -- on every rank.

    Examples
    --------
    >>> model = tt.nn.parallel.DistributedDataParallel(tt.nn.Linear(3, 1, rng=0))
    >>> model.world_size                    # one process: rank 0 of 1 (launch with mpiexec for more)
    1
    >>> [name for name, _ in model.named_parameters()]
    ['module.weight', 'module.bias']
    >>> loss = model(np.ones((4, 3))).sum()
    >>> loss.backward()                     # the gradients are averaged over the ranks here
    >>> model.module.bias.grad
    array([4.], dtype=float32)
    """

    def __init__(self, module, bucket_cap_mb=25, broadcast_buffers=True, gradient_as_bucket_view=False,
                 allreduce=None):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel: module must be a tt.nn.Module, got "
                            f"{type(module).__name__}")
        if isinstance(bucket_cap_mb, bool) or not (isinstance(bucket_cap_mb, (int, float))
                                                   and bucket_cap_mb > 0):
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be a positive number, got "
                             f"{bucket_cap_mb!r}")
        if allreduce is None:
            allreduce = os.environ.get("TT_DDP_ALLREDUCE", "auto")
        if allreduce not in ALLREDUCE:
            raise ValueError(f"DistributedDataParallel: allreduce (or the environment variable "
                             f"TT_DDP_ALLREDUCE) must be one of {', '.join(map(repr, ALLREDUCE))}, got "
                             f"{allreduce!r}")
        distributed.init()
        self.module = module
        self.allreduce = allreduce
        self.broadcast_buffers = bool(broadcast_buffers)
        self.gradient_as_bucket_view = bool(gradient_as_bucket_view)
        self.require_backward_grad_sync = True
        self._through_forward = None           # the sweep that last passed this wrapper's output
        self._join_flags = 0                   # inside join(): 1 throw on early end, 2 divide by active
        self._pending = None                   # the gradient all-reduce under way (a _Sync)
        params = [p for p in module.parameters() if p.requires_grad]
        comm = None
        self._shared_memory_ok = False         # all ranks on this machine, allreduce != "mpi"
        if distributed.world_size() > 1:
            self._check_replicas()
            self._broadcast(list(module.parameters()) + list(module.buffers()), root=0)
            comm = distributed._duplicate()
            self._shared_memory_ok = self._shared_memory(comm, params)
            ref = weakref.ref(self)

            def ready(p):                      # the engine's call: p.grad is complete
                ddp = ref()
                if ddp is not None:
                    ddp._grad_ready(p)
            for p in params:
                tape.GRAD_READY[p] = ready
            weakref.finalize(self, _release, comm, params, ready)
        self._reducer = _Reducer(params, int(bucket_cap_mb * 2**20), comm, self._shared_memory_ok)
        if not tape.POST_BACKWARD.count(_after_backward):
            tape.POST_BACKWARD.append(_after_backward)
        _LIVE[next(_MADE)] = self

    def forward(self, *args, **kwargs):
        self._no_stale_sync()
        syncing = STATE.grad_enabled and self.require_backward_grad_sync and distributed.world_size() > 1
        if syncing and self.broadcast_buffers and any(b.data.size for b in self.module.buffers()):
            self._sync_buffers()
        out = self.module(*args, **kwargs)
        if STATE.grad_enabled and distributed.world_size() > 1:
            for t in _tensors(out):        # a backward through these averages the gradients
                if t.requires_grad and not t.is_leaf:
                    t.register_hook(self._passed)
        return out

    def _passed(self, g):
        self._through_forward = tape.SWEEPS[0]     # a tt.grad sweep is never mistaken for a backward

    @property
    def world_size(self):
        return distributed.world_size()

    @contextmanager
    def no_sync(self):
        """Backward passes inside keep their gradients local (accumulating); the first backward
        after it averages the accumulated sum, as PyTorch's `no_sync`."""
        before = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = before

    @contextmanager
    def join(self, divide_by_initial_world_size=True, enable=True, throw_on_early_termination=False):
        """For ranks with uneven numbers of batches (PyTorch's `ddp.join()` / `Join`): wrap the
        training loop in `with ddp.join():` on every rank. A rank whose loop ends first stays in
        the block's exit and stands in for the wrapper's collectives of the ranks still training
        (zeros in the gradient all-reduce, a receiver of the buffer broadcast, rooted at the lowest
        rank still training) until every rank has ended its loop; then every rank takes the
        parameters and buffers of the rank that joined last, so the replicas end equal (as
        PyTorch's; an optimizer's state, momentum, stays each rank's own).

        divide_by_initial_world_size: the averaged gradient is the sum over the ranks still
            training divided by world_size() (True, PyTorch's default: each sample keeps its
            weight) or by the number of ranks still training (False).
        throw_on_early_termination: raise on every rank as soon as one rank runs out of inputs.
        Other collectives (a `dist.all_reduce` of a metric) cannot be stood in for: inside the
        block, while a rank has joined, every rank raises naming them.
        """
        if not enable or distributed.world_size() == 1:
            yield
            return
        if self._reducer.zero is not None:
            raise RuntimeError("DistributedDataParallel.join(): this model's parameters are shared by "
                               "a ZeroRedundancyOptimizer (one copy in shared memory, each rank "
                               "updating its shard), so a rank that has run out of inputs cannot stand "
                               "in for the others' steps; give every rank the same number of batches "
                               "(tt.data.minibatches pads), or use a plain optimizer with join()")
        before = self._join_flags
        self._join_flags = int(bool(throw_on_early_termination)) | (0 if divide_by_initial_world_size else 2)
        try:
            yield
            self._shadow()
        finally:
            self._join_flags = before

    # ----- the collectives ---------------------------------------------------------------------
    def _check_replicas(self):
        """Every rank's parameters and buffers: names, shapes, dtypes, requires_grad, order."""
        lines = [f"parameter {n!r}: shape {tuple(p.shape)}, dtype {p.dtype}, requires_grad="
                 f"{p.requires_grad}, device {backend.device_of(p.data)}"
                 for n, p in self.module.named_parameters()]
        lines += [f"buffer {n!r}: shape {tuple(b.shape)}, dtype {b.dtype}"
                  for n, b in self.module.named_buffers()]
        lines.append(f"DistributedDataParallel(allreduce={self.allreduce!r}) (or TT_DDP_ALLREDUCE)")

        def describe(texts):
            other = next(r for r in range(1, len(texts)) if texts[r] != texts[0])
            mine, theirs = texts[0].split("\n"), texts[other].split("\n")
            for i, (x, y) in enumerate(zip(mine, theirs)):
                if x != y:
                    diff = f"entry {i}: rank 0 has {x}, rank {other} has {y}"
                    break
            else:
                longer, r = (mine, 0) if len(mine) > len(theirs) else (theirs, other)
                diff = (f"rank 0 has {len(mine)} parameters and buffers, rank {other} has {len(theirs)} "
                        f"(rank {r} also has {longer[min(len(mine), len(theirs))]})")
            return (f"DistributedDataParallel: the ranks' models differ, {diff}; every rank must build "
                    f"the same model (the same layers, shapes, dtypes, requires_grad and order) "
                    f"before wrapping it, with the same allreduce= setting")

        distributed._agree_on_hash("wrap_check", "\n".join(lines), describe)

    def _shared_memory(self, comm, params):
        """Whether the gradient all-reduce goes through shared memory (every rank calls it)."""
        one_node = distributed._one_node(comm)
        host = all(type(p.data) is np.ndarray for p in params)
        if self.allreduce == "shared" and not (one_node and host):
            why = ("the ranks run on several machines" if not one_node
                   else "some parameters are not NumPy arrays")
            raise RuntimeError(f"DistributedDataParallel(allreduce='shared'): {why}; shared memory needs "
                               f"every rank on one machine and the parameters on the host (\"cpu\"); "
                               f"use allreduce='auto' (shared memory where it can, MPI elsewhere) or 'mpi'")
        return self.allreduce != "mpi" and one_node

    def _broadcast(self, tensors, root):
        """Rank root's values of `tensors` on every rank, one message per dtype (the caller has
        made sure every rank is here with the same tensors)."""
        groups = {}
        for t in tensors:
            if t.data.size:
                groups.setdefault((type(t.data), t.data.dtype), []).append(t)
        for group in groups.values():
            _broadcast_packed(group, root)

    def _round(self, every):
        """A round of the wrapper's collectives, from every rank's header: (the ranks still
        training, their collective, the divisor of the gradient sum). Raises on every rank when
        the ranks disagree (the same verdict everywhere: every rank reads the same headers)."""
        joined = distributed._joined(every)
        active = [r for r in range(len(every)) if r not in joined]
        if any(h[_OP] not in _OWN for h in every):
            distributed._agree(every)          # raises what the rank in another collective raises
        for r in range(len(every)):
            if every[r][_EXTRA] != every[0][_EXTRA]:
                raise RuntimeError(f"DistributedDataParallel: rank 0 and rank {r} bucket their gradients "
                                   f"differently (a model cast or moved after wrapping on one rank only?)")
        if not active:
            return active, None, len(every)
        first = every[active[0]]
        for r in active[1:]:
            if every[r][_OP] != first[_OP]:
                distributed._mismatch(every, active[0], r)
        if joined and first[_OP] not in (_CODE["ddp_sync"], _CODE["ddp_buffers"]):
            distributed._join_mismatch(every, joined)
        flags = {int(h[_ARG]) for h in every}
        if len(flags) > 1:
            raise RuntimeError("DistributedDataParallel.join: the ranks passed different options to "
                               "join() (or some ranks are outside a join() block); pass the same on "
                               "every rank")
        flag = flags.pop()
        if joined and flag & 1:
            raise RuntimeError(f"DistributedDataParallel.join(throw_on_early_termination=True): rank(s) "
                               f"{', '.join(map(str, joined))} ran out of inputs; stopping every rank")
        return active, int(first[_OP]), len(active) if flag & 2 else len(every)

    def _sync_buffers(self):
        every = distributed._exchange("ddp_buffers", arg=self._join_flags, extra=self._reducer.fingerprint)
        active, _, _ = self._round(every)
        self._broadcast(list(self.module.buffers()), root=active[0])

    def _shadow(self):
        """join()'s exit: stand in for the collectives of the ranks still training; when every
        rank has joined, take the parameters and buffers of the rank that joined last (it trained
        longest: the others only stood in), as PyTorch's join does."""
        rounds = 0
        while True:
            every = distributed._exchange("join", arg=self._join_flags, extra=self._reducer.fingerprint,
                                          count=rounds)
            active, op, divisor = self._round(every)
            rounds += 1
            if not active:
                counts = [int(h[_SHAPE]) for h in every]
                last = max(r for r in range(len(every)) if counts[r] == min(counts))
                if max(counts):                    # someone stood in: bring it up to date
                    self._broadcast(list(self.module.parameters()) + list(self.module.buffers()), last)
                return
            if op == _CODE["ddp_sync"]:
                self._finish(_Sync(self._reducer, divisor, tape.SWEEPS[0], self.gradient_as_bucket_view),
                             contribute=False)
            else:
                self._broadcast(list(self.module.buffers()), root=active[0])

    def _after_backward(self, grads):
        if self.require_backward_grad_sync and distributed._STATE.size > 1:
            if self._pending is not None and self._pending.sweep == tape.SWEEPS[0]:
                self._finish(self._pending)      # started during the sweep
            else:
                self.sync_gradients()

    def _no_stale_sync(self):
        """Outside a backward, a round still open is left over from a backward that raised (and
        was caught) after the round had started: the other ranks are inside that all-reduce,
        waiting for this rank's buckets."""
        if self._pending is not None:
            distributed._abort("a backward through DistributedDataParallel raised on this rank after "
                               "its gradient all-reduce had started, and the program went on; the "
                               "other ranks wait in that all-reduce, and the replicas can no longer "
                               "stay equal")

    def _grad_ready(self, p):
        """The engine's GRAD_READY hook, during a backward: p.grad is complete. In a backward through
        this wrapper's forward (outside no_sync), pack it, then start every bucket that is full, in
        bucket order. The first call of the backward exchanges the round's header (every rank is
        here: the ranks agree before any gradient moves)."""
        if self._through_forward != tape.SWEEPS[0] or not self.require_backward_grad_sync:
            return                               # a local backward, or no_sync: nothing to do
        sync = self._pending
        if sync is None:
            sync = self._pending = self._start_round()
        elif sync.sweep != tape.SWEEPS[0]:     # from an earlier backward
            self._no_stale_sync()
        self._pack(sync, p)
        self._start_full(sync)
        distributed._progress(sync.requests)     # MPI moves data only inside its calls

    def _start_round(self):
        """The header exchange of a gradient round; returns its _Sync."""
        if any(type(b.buffer) is not type(b.params[0].data) or b.buffer.dtype != b.params[0].data.dtype
               for b in self._reducer.buckets):       # moved or cast (.to) after wrapping: new buckets
            r = self._reducer
            self._reducer = _Reducer(r.params, r.cap_bytes, r.comm, self._shared_memory_ok)
        r = self._reducer
        # a .grad of the last shared round still held here: the others must not write this round
        held = r.shared_memory and not self.gradient_as_bucket_view and (
            any(b.held() for b in r.buckets) or (r.zero is not None and r.zero.held()))
        every = distributed._exchange("ddp_sync", arg=self._join_flags, extra=r.fingerprint, count=int(held))
        active, _, divisor = self._round(every)
        # the same verdict on every rank (the same headers): shared memory unless a rank joined or
        # holds its last gradients
        shared = r.shared_memory and len(active) == len(every) and not any(every[k][_SHAPE] for k in active)
        if shared and r.window is None:
            r.window = _Shared(r.buckets, r.comm)       # every rank is here: a collective
        if r.window is not None:
            r.window.mean = None if r.zero is None else r.zero.mean
            r.window.direct = r.zero is not None and r.window.size == 2
        return _Sync(r, divisor, tape.SWEEPS[0], self.gradient_as_bucket_view, shared)

    def sync_gradients(self):
        """Replace each parameter's .grad by its mean over the ranks (every rank must call it):
        each gradient is divided by the world size as it is packed (exact for 2, 4, 8 ... ranks),
        one non-blocking all-reduce per bucket sums them, then the unpacking. backward() does the
        same, starting each bucket as soon as its gradients are complete."""
        if distributed.world_size() == 1:
            return
        self._no_stale_sync()
        self._finish(self._start_round())

    def _pack(self, sync, p, contribute=True):
        k, i = self._reducer.where[id(p)]
        bucket = self._reducer.buckets[k]
        flat = bucket.buffer
        lo, hi = bucket.slices[i]
        g = p.grad if contribute else None
        if g is not None and type(g) is not np.ndarray and isinstance(g, Tensor):
            g = g.data                           # p.grad = a Tensor, as PyTorch lets one set it
        if sync.window is not None and sync.window.direct:   # ZeroRedundancyOptimizer, 2 ranks
            sync.window.pack(k, bucket, i, g, sync.scale)
        elif g is None:                          # no gradient here (or a joined rank): zeros
            flat[lo:hi] = 0
        elif sync.scale is not None:             # a power of two: times 1/divisor is the same number
            backend.namespace(flat).multiply(g.reshape(-1), sync.scale, out=flat[lo:hi])
        else:                                    # divided while packed (one pass): the sum is the mean
            backend.namespace(flat).divide(g.reshape(-1), sync.divisor, out=flat[lo:hi])
        if contribute and not (sync.window is not None and sync.window.direct):
            flat[bucket.size + i] = g is not None     # presence flag (summed: a count)
        sync.packed.add(id(p))
        sync.missing[k] -= 1

    def _start_full(self, sync):
        """Start the buckets whose gradients are all packed, in order (a full bucket waits for
        the ones before it: every rank must start them in the same order)."""
        buckets = self._reducer.buckets
        while sync.started < len(buckets) and not sync.missing[sync.started]:
            if sync.window is not None:          # shared memory: say it is packed
                sync.window.publish(sync.window.packed, sync.started)
            else:
                flat = buckets[sync.started].buffer
                sync.requests.append(distributed._start_sum(flat, self._reducer.comm))
            sync.started += 1
        if sync.window is not None:              # sum the slices every rank has packed, if any
            sync.window.reduce_ready(sync.started)

    def _finish(self, sync, contribute=True):
        """Pack what is left (bucket by bucket: bucket k travels while k + 1 is packed), wait for
        every bucket, unpack. A joined rank (contribute=False) sends zeros and keeps its .grad."""
        self._pending = None
        for k in range(sync.started, len(self._reducer.buckets)):
            bucket = self._reducer.buckets[k]
            for p in bucket.params:
                if id(p) not in sync.packed:
                    self._pack(sync, p, contribute)
            if not contribute:
                bucket.buffer[bucket.size:] = 0      # no presence flags from a joined rank
            self._start_full(sync)
        if sync.window is not None:
            sync.window.finish()
        distributed._wait_all(sync.requests)
        if not contribute:
            return
        zero = sync.window is not None and sync.window.mean is not None
        for k, bucket in enumerate(self._reducer.buckets):
            # ZeroRedundancyOptimizer: read-only views of the one shared mean (every rank's .grad)
            flat = self._reducer.zero.readonly[k] if zero else bucket.buffer
            # views of the bucket: the next round packs into a new buffer while any is held (claim),
            # so a .grad kept from this step keeps its values (a copy on devices other than the host)
            host = type(flat) is np.ndarray or self.gradient_as_bucket_view
            mean = flat[:bucket.size] if host else flat[:bucket.size].copy()
            present = backend.to_host(flat[bucket.size:]) if bucket.flags else None
            for i, (p, (lo, hi)) in enumerate(zip(bucket.params, bucket.slices)):
                if present is not None and not present[i]:
                    p.grad = None                  # no rank had a gradient for it
                else:
                    p.grad = mean[lo:hi].reshape(p.data.shape)

    def extra_repr(self):
        sizes = ", ".join(f"{b.buffer.nbytes / 2**20:.2f}" for b in self._reducer.buckets)
        return f"world_size={distributed.world_size()}, buckets (MB)=[{sizes}]"
