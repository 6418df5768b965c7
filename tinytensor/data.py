"""Minibatches for the SGD loop.

    rng = np.random.default_rng(0)
    for epoch in range(epochs):
        for xb, yb in tt.data.minibatches(X, y, batch_size=32, rng=rng):
            ...
"""

import hashlib
import numbers

import numpy as np

from . import backend, distributed
from .rng import generator
from .state import SHARED, STATE
from .tensor import Tensor

__all__ = [   # the public names: the API reference lists these (docs/_ext/tt_api.py)
    "minibatches",
]


def minibatches(X, y, batch_size, shuffle=True, drop_last=False, rng=None, device=None,
                rank=None, world_size=None):
    """Yield (xb, yb): rows of X and the matching entries of y, batch_size at a time.

    X and y are arrays (or anything np.asarray takes) with the same first dimension n; batches
    are cut along that axis. Every row appears exactly once per pass; the last batch is shorter
    when batch_size does not divide n, unless drop_last=True drops it.

    shuffle=True draws one permutation per pass from `rng`: an np.random.Generator (it advances,
    so each epoch gets a new order; give the same seeded Generator for a reproducible run), an int
    seed (the same order on every call), or None (the global generator, seeded by
    tt.manual_seed). shuffle=False yields rows in
    order, as views of X and y; shuffled batches are copies.

    Batches are arrays of X's and y's device: CuPy arrays give CuPy batches. `device` ("cpu",
    "cuda") moves X and y there first, once per pass (a Tensor gives its values).

    rank and world_size (both or neither; e.g. tt.distributed.rank(), tt.distributed.world_size())
    shard each pass for data-parallel training: every rank draws the same permutation (give every
    rank the same seed or alike-seeded Generator), cuts it into global batches of
    batch_size * world_size rows, and takes rows rank, rank + world_size, ... of each. batch_size
    is per rank, as with PyTorch's DistributedSampler; the ranks' k-th batches together are the
    k-th batch of one process with batch_size * world_size, so each pass covers every row exactly
    once and every rank gets the same number of batches. A last global batch of m rows splits into
    shares that differ by at most one row; if m < world_size, the ranks left without a row take
    rows from the start of the permutation (the only repeats, as PyTorch pads) rather than an
    empty batch. drop_last=True drops a last global batch shorter than batch_size * world_size.
    When rank and world_size are tt.distributed's own (several MPI ranks), the ranks check, when
    the first batch is asked for, that they hold as many rows and drew the same permutation (one
    hash each): a per-rank seed (`rng=seed + rank`) would duplicate some rows and drop others, so
    every rank raises instead, naming the ranks that differ. (It does not pick one rank's order
    for you: seed per-rank randomness such as dropout separately.)

    Examples
    --------
    >>> X, y = np.arange(10.0).reshape(5, 2), np.arange(5)
    >>> [yb.tolist() for xb, yb in tt.data.minibatches(X, y, batch_size=2, shuffle=False)]
    [[0, 1], [2, 3], [4]]
    """
    if not SHARED.quiet and STATE.recorder is not None and any(
            STATE.recorder.var_of(a) is not None for a in (X, y)):   # data computed from f's arguments
        raise RuntimeError(
            "tt.compile: tt.data.minibatches(...) iterated inside a compiled function: it cuts plain "
            "arrays, so the program would keep the first call's batches. Iterate outside and "
            "compile the step on one batch (for xb, yb in minibatches(...): step(xb, yb)), or call "
            "the function uncompiled")
    X, y = (backend.asarray(a.data if isinstance(a, Tensor) else a) for a in (X, y))
    if device is not None:
        X, y = backend.to_device(X, device), backend.to_device(y, device)
    if X.ndim == 0 or y.ndim == 0:
        raise ValueError("minibatches: X and y must have a first (sample) axis")
    if len(X) != len(y):
        raise ValueError(f"minibatches: X has {len(X)} rows but y has {len(y)}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or batch_size < 1:
        raise ValueError(f"minibatches: batch_size must be a positive integer, got {batch_size!r}")
    n = len(X)
    if rank is not None or world_size is not None:
        yield from _shard(X, y, batch_size, shuffle, drop_last, rng, rank, world_size)
        return
    # The permutation is drawn before the first batch is asked for, when the generator starts.
    order = generator(rng).permutation(n) if shuffle else None
    if order is not None and type(X) is not np.ndarray:
        order = backend.to_device(order, backend.device_of(X))    # indices where the rows are
    stop = n - n % batch_size if drop_last else n
    for start in range(0, stop, batch_size):
        if order is None:
            yield X[start:start + batch_size], y[start:start + batch_size]
        else:
            idx = order[start:start + batch_size]
            yield X[idx], y[idx]


def _shard(X, y, batch_size, shuffle, drop_last, rng, rank, world_size):
    """minibatches' rank-th share of each global batch (see minibatches)."""
    for name, v in (("rank", rank), ("world_size", world_size)):
        if v is None:
            raise ValueError("minibatches: pass rank and world_size together (e.g. "
                             "rank=tt.distributed.rank(), world_size=tt.distributed.world_size()), "
                             "or neither")
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise ValueError(f"minibatches: {name} must be an integer, got {v!r}")
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"minibatches: need world_size >= 1 and 0 <= rank < world_size, got rank={rank}, "
                         f"world_size={world_size}")
    if shuffle and rng is None and world_size > 1:
        raise ValueError("minibatches: with world_size > 1 every rank must draw the same permutation; "
                         "pass rng= the same int seed (or a Generator seeded alike) on every rank")
    n = len(X)
    order = np.random.default_rng(rng).permutation(n) if shuffle else np.arange(n)
    world = distributed._STATE
    if world.initialized and world.size == world_size > 1 and world.rank == rank and world.comm is not None:
        _same_order_everywhere(n, shuffle, order)
    step = batch_size * world_size                # one global batch
    stop = n - n % step if drop_last else n
    on_host = type(X) is np.ndarray
    for start in range(0, stop, step):
        chunk = order[start:start + step]
        if len(chunk) < world_size:               # too few rows for a row per rank: pad from the start
            chunk = np.concatenate([chunk, np.resize(order, world_size - len(chunk))])
        idx = chunk[rank::world_size]
        if not on_host:
            idx = backend.to_device(idx, backend.device_of(X))
        yield X[idx], y[idx]


def _same_order_everywhere(n, shuffle, order):
    """Every rank of tt.distributed's world drew the same permutation of as many rows, else every
    rank raises (one header with a hash; the summaries travel only when they differ)."""
    digest = hashlib.blake2b(np.ascontiguousarray(order, np.int64).tobytes(), digest_size=8).hexdigest()
    text = f"{n} rows, shuffle={shuffle}, permutation {digest}"

    def describe(texts):
        other = next(r for r in range(1, len(texts)) if texts[r] != texts[0])
        why = ("hold different numbers of rows" if texts[0].split(",")[0] != texts[other].split(",")[0]
               else "drew different permutations")
        return (f"minibatches(rank=, world_size=): rank 0 and rank {other} {why} (rank 0: {texts[0]}; "
                f"rank {other}: {texts[other]}), so their shares would overlap, repeating some rows and "
                f"dropping others; pass every rank the same data and the same rng (an int seed such as "
                f"seed + epoch, not seed + rank, or a Generator seeded alike); seed per-rank randomness "
                f"(dropout) separately")

    distributed._agree_on_hash("minibatches", text, describe)
