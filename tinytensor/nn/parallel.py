"""Data-parallel training: one model replica per process, gradients averaged after backward().

    dist = tt.distributed
    dist.init()
    model = tt.nn.parallel.DistributedDataParallel(make_model())   # rank 0's parameters everywhere
    opt = tt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for xb, yb in tt.data.minibatches(X, y, 32, rng=seed, rank=dist.rank(),
                                      world_size=dist.world_size()):   # a disjoint shard per rank
        loss = loss_fn(model(xb), yb)
        opt.zero_grad()
        loss.backward()            # ... and the gradients are averaged over the ranks here
        opt.step()                 # the same update on every rank: the replicas stay equal

As PyTorch's: `forward` is the wrapped module's (`ddp.module` is the module; parameter names get a
"module." prefix); the parameters and buffers are broadcast from rank 0 when the wrapper is made;
each `backward()` that reaches the parameters ends with their gradients replaced by the mean over
the ranks; `with ddp.no_sync():` skips that (gradients accumulate locally, and the first backward
outside it averages the sum: gradient accumulation costs one all-reduce).

The gradients travel in a few large messages: the parameters, last layer first, are cut into
buckets of at most `bucket_cap_mb` megabytes of one dtype; each bucket is packed into one flat
array and summed with a non-blocking MPI all-reduce (`Iallreduce`), so bucket k travels while
bucket k + 1 is packed. A parameter whose gradient is None on every rank keeps None (one flag per
parameter rides in its bucket); None on some ranks counts as zeros there.
"""

import weakref
from contextlib import contextmanager

import numpy as np

from .. import backend, distributed, tape
from ..tensor import mark_modified
from .module import Module

__all__ = ["DistributedDataParallel"]

_LIVE = weakref.WeakSet()        # the wrappers whose parameters the backward hook looks for


def _after_backward(grads):
    for ddp in list(_LIVE):
        ddp._after_backward(grads)


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


class _Reducer:
    """The buckets and the all-reduce of one wrapper (a plain object: Module._walk ignores it)."""

    def __init__(self, params, cap_bytes):
        groups, order = {}, []
        for p in reversed(params):               # gradients of the last layers are ready first
            key = (type(p.data), p.data.dtype)
            if key not in groups:
                groups[key] = [[]]
                order.append(key)
            current = groups[key][-1]
            if current and sum(q.data.nbytes for q in current) + p.data.nbytes > cap_bytes:
                current = []
                groups[key].append(current)
            current.append(p)
        chunks = [chunk for key in order for chunk in groups[key]]
        # each bucket carries one presence flag per parameter in it, after the gradients
        self.buckets = [_Bucket(chunk, len(chunk)) for chunk in chunks]
        self.params = params
        self.cap_bytes = cap_bytes
        self.ids = {id(p) for p in params}


class DistributedDataParallel(Module):
    """Wrap `module` for data-parallel training over `tt.distributed`'s ranks (PyTorch's name).

    module: the model, the same architecture on every rank (its parameters are overwritten by
        rank 0's, so the ranks start equal whatever their seeds).
    bucket_cap_mb: the largest message, in megabytes (PyTorch's default, 25).
    broadcast_buffers: send rank 0's buffers (batch norm's running statistics) to every rank at
        each forward in training mode, as PyTorch does.
    gradient_as_bucket_view: hand out the averaged gradients as views of the bucket buffers
        (PyTorch's option of that name): saves writing a fresh copy of every gradient each step,
        but a `.grad` kept from one step to the next changes with the next all-reduce. Default
        False: each step's gradients are new arrays.

    Averaging happens at the end of `loss.backward()`; call `sync_gradients()` yourself when the
    gradients come from elsewhere (`tt.grad`, a compiled step, gradients set by hand).
    """

    def __init__(self, module, bucket_cap_mb=25, broadcast_buffers=True, gradient_as_bucket_view=False):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel: module must be a tt.nn.Module, got "
                            f"{type(module).__name__}")
        if not (isinstance(bucket_cap_mb, (int, float)) and bucket_cap_mb > 0):
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be a positive number, got "
                             f"{bucket_cap_mb!r}")
        distributed.init()
        self.module = module
        self.broadcast_buffers = bool(broadcast_buffers)
        self.gradient_as_bucket_view = bool(gradient_as_bucket_view)
        self.require_backward_grad_sync = True
        params = [p for p in module.parameters() if p.requires_grad]
        self._reducer = _Reducer(params, int(bucket_cap_mb * 2**20))
        self._broadcast_parameters()
        if not tape.POST_BACKWARD.count(_after_backward):
            tape.POST_BACKWARD.append(_after_backward)
        _LIVE.add(self)

    def forward(self, *args, **kwargs):
        if self.broadcast_buffers and self.training and distributed.world_size() > 1:
            self._broadcast_buffers()
        return self.module(*args, **kwargs)

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

    # ----- the collectives ---------------------------------------------------------------------
    def _broadcast_parameters(self):
        """Every rank takes rank 0's parameters and buffers, one message per bucket."""
        if distributed.world_size() == 1:
            return
        for bucket in self._reducer.buckets:
            flat = bucket.buffer
            for p, (lo, hi) in zip(bucket.params, bucket.slices):
                flat[lo:hi] = p.data.reshape(-1)
            flat[bucket.size:] = 0
            flat[:] = distributed.broadcast(flat, root=0)
            for p, (lo, hi) in zip(bucket.params, bucket.slices):
                p.data[...] = flat[lo:hi].reshape(p.data.shape)
                mark_modified(p)
        self._broadcast_buffers()

    def _broadcast_buffers(self):
        for b in self.module.buffers():
            if b.data.size:
                b.data[...] = distributed.broadcast(b.data, root=0)
                mark_modified(b)

    def _after_backward(self, grads):
        if not self.require_backward_grad_sync or distributed._STATE.size == 1:
            return
        if any(id(leaf) in self._reducer.ids for leaf in grads):
            self.sync_gradients()

    def sync_gradients(self):
        """Replace each parameter's .grad by its mean over the ranks (every rank must call it):
        each gradient is divided by the world size as it is packed (exact for 2, 4, 8 ... ranks),
        one non-blocking all-reduce per bucket sums them, then the unpacking. Called by
        backward()."""
        size = distributed.world_size()
        if size == 1:
            return
        if any(type(b.buffer) is not type(b.params[0].data) or b.buffer.dtype != b.params[0].data.dtype
               for b in self._reducer.buckets):       # moved or cast (.to) after wrapping: new buckets
            self._reducer = _Reducer(self._reducer.params, self._reducer.cap_bytes)
        buckets = self._reducer.buckets
        requests = []
        for bucket in buckets:                     # pack bucket k + 1 while bucket k travels
            flat = bucket.buffer
            xp = backend.namespace(flat)
            for p, (lo, hi) in zip(bucket.params, bucket.slices):
                g = p.grad
                if g is None:
                    flat[lo:hi] = 0
                else:              # divided while packed (one pass): the sum is then the mean
                    xp.divide(g.reshape(-1), size, out=flat[lo:hi])
            flat[bucket.size:] = xp.asarray(np.array([p.grad is not None for p in bucket.params]))
            requests.append(distributed._start_sum(flat))
        distributed._wait_all(requests)
        for bucket in buckets:
            flat = bucket.buffer
            # a fresh array each step (a user may keep last step's .grad), or views of the bucket
            mean = flat[:bucket.size] if self.gradient_as_bucket_view else flat[:bucket.size].copy()
            present = backend.to_host(flat[bucket.size:]) if bucket.flags else None
            for i, (p, (lo, hi)) in enumerate(zip(bucket.params, bucket.slices)):
                if present is not None and not present[i]:
                    p.grad = None                  # no rank had a gradient for it
                else:
                    p.grad = mean[lo:hi].reshape(p.data.shape)

    def extra_repr(self):
        sizes = ", ".join(f"{b.buffer.nbytes / 2**20:.2f}" for b in self._reducer.buckets)
        return f"world_size={distributed.world_size()}, buckets (MB)=[{sizes}]"

