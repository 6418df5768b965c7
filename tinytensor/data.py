"""Minibatches for the SGD loop.

    rng = np.random.default_rng(0)
    for epoch in range(epochs):
        for xb, yb in tt.data.minibatches(X, y, batch_size=32, rng=rng):
            ...
"""

import numbers

import numpy as np

from . import backend
from .rng import generator
from .tensor import Tensor


def minibatches(X, y, batch_size, shuffle=True, drop_last=False, rng=None, device=None):
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
    """
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
