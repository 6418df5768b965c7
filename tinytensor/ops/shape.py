"""Shapes and indexing: NumPy's functions that move, copy or pick entries (issue 11).

Every operation here is linear in its array input: each output entry is a copy of one input
entry, a sum of them (trace), or a constant (pad's border). So each one is either

* composed from the shape primitives of core.py (reshape, transpose, broadcast_to, getitem,
  concatenate): both modes and every order come for free, and the VJP is theirs (a sum back
  over broadcast axes, a scatter that adds up repeated indices); or
* a `deflinear` row whose VJP is the transpose of the op, written with the op's NumPy twin so
  that it runs on Tensors too (flip, roll, tril, triu, diag) when that is cheaper or reads
  better on the tape than a composition; pad, affine in its input, states its JVP.

Functions take NumPy's names, signatures and errors (negative axes, 0-d inputs, axis=None);
`np.<name>(tensor)` runs them (numpy=...), and lists mixing Tensors and arrays are recorded.
"""

import math
import operator

import numpy as np

from .. import backend
from ..state import constant_read
from ..tensor import Tensor
from .core import broadcast_to, concatenate, getitem, reshape, transpose
from .table import METHODS, _joined, complex_rules, deflinear, defprim, nondifferentiable, on_values, public


# ----- helpers ---------------------------------------------------------------------------------------
def _input(x):
    """A Tensor or an array (lists and numbers become arrays)."""
    return x if isinstance(x, (Tensor, np.ndarray)) else backend.asarray(x)


def _axes(axis, ndim, op, unique=True):
    """`axis` (an int or a sequence of ints, negatives allowed) as a tuple of axes in [0, ndim)."""
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    out = []
    for a in axes:
        a = operator.index(a)
        if not -ndim <= a < ndim:
            raise np.exceptions.AxisError(a, ndim, op)
        out.append(a % ndim)
    if unique and len(set(out)) != len(out):
        raise ValueError(f"{op}: repeated axis in {axis!r}")
    return tuple(out)


def _indices(indices, op):
    """Integer indices as a plain array (Tensors and lists allowed; booleans count as 0 and 1,
    as in NumPy's take)."""
    value = backend.asarray(indices.data if isinstance(indices, Tensor) else indices)
    if value.dtype == bool or (value.size == 0 and value.dtype.kind == "f"):   # [] is float to NumPy
        value = value.astype(np.intp)
    if value.dtype.kind not in "iu":
        raise TypeError(f"{op}: indices must be integers, got dtype {value.dtype}")
    return value


def _no_out(out, op):
    if out is not None:
        raise TypeError(f"{op}: out= is not supported on Tensors; use the returned value")


# ----- reshaping: composed from reshape ------------------------------------------------------------
@public(numpy=np.squeeze, method=True)
def squeeze(a, axis=None):
    """Remove axes of length 1 (all of them, or those in `axis`; a longer one is an error, as NumPy).

    Examples
    --------
    >>> tt.squeeze(tt.ones((1, 3, 1))).shape
    (3,)
    """
    a = _input(a)
    shape = a.shape
    if axis is None:
        return reshape(a, tuple(n for n in shape if n != 1))
    axes = _axes(axis, a.ndim, "squeeze")
    for ax in axes:
        if shape[ax] != 1:
            raise ValueError(f"squeeze: cannot squeeze out axis {ax} of length {shape[ax]} "
                             f"(shape {shape}); only axes of length 1 can go")
    return reshape(a, tuple(n for i, n in enumerate(shape) if i not in axes))


@public(numpy=np.expand_dims)
def expand_dims(a, axis):
    """Insert axes of length 1 at the positions `axis` of the result.

    Examples
    --------
    >>> tt.expand_dims(tt.ones(3), 0).shape
    (1, 3)
    """
    a = _input(a)
    axis = axis if isinstance(axis, (tuple, list)) else (axis,)
    ndim = a.ndim + len(axis)
    axes = _axes(axis, ndim, "expand_dims")
    rest = iter(a.shape)
    return reshape(a, tuple(1 if i in axes else next(rest) for i in range(ndim)))


@public(method=True)
def unsqueeze(x, dim):
    """PyTorch's spelling of expand_dims(x, dim) for one axis.

    Examples
    --------
    >>> tt.unsqueeze(tt.ones(3), 0).shape
    (1, 3)
    """
    return expand_dims(x, operator.index(dim))


@public(numpy=np.ravel, method=True)
def ravel(a, order="C"):
    """The entries as a 1-D Tensor, read in C (row-major) or "F" (column-major) order.

    Examples
    --------
    >>> tt.ravel(tt.ones((2, 2)))
    tensor([1., 1., 1., 1.])
    """
    a = _input(a)
    data = a.data if isinstance(a, Tensor) else a
    if order == "A":   # F if the data is laid out in Fortran order, C otherwise
        order = "F" if data.flags.f_contiguous and not data.flags.c_contiguous else "C"
    if order == "K":   # memory order: the axes by decreasing stride (as NumPy sorts them)
        a, order = transpose(a, sorted(range(a.ndim), key=lambda i: -abs(data.strides[i]))), "C"
    if order == "F":
        a = transpose(a)
    elif order != "C":
        raise ValueError(f"ravel: order must be 'C', 'F', 'A' or 'K', got {order!r}")
    return reshape(a, (-1,))


@public(method=True)
def flatten(x, start_dim=0, end_dim=-1, order=None):
    """PyTorch's flatten: axes start_dim..end_dim (inclusive) merged into one; by default all, so
    `t.flatten()` is NumPy's too. NumPy's `t.flatten("F")` (an order) is also accepted.

    Examples
    --------
    >>> tt.flatten(tt.ones((2, 3))).shape
    (6,)
    """
    if isinstance(start_dim, str) or order is not None:
        return ravel(x, order=start_dim if isinstance(start_dim, str) else order)
    x = _input(x)
    shape = x.shape or (1,)   # a 0-d input flattens to shape (1,), as in PyTorch
    start, end = _axes(start_dim, len(shape), "flatten") + _axes(end_dim, len(shape), "flatten")
    if start > end:
        raise ValueError(f"flatten: start_dim ({start_dim}) comes after end_dim ({end_dim}) "
                         f"for shape {x.shape}")
    return reshape(x, shape[:start] + (math.prod(shape[start:end + 1]),) + shape[end + 1:])


def view(x, *shape):
    """PyTorch's view(*shape) (or view(shape)): reshape; -1 stands for the remaining length."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
        raise TypeError(f"view: takes a shape (ints), got {shape[0]!r}; reinterpreting the bits "
                        f"as another dtype has no gradient (use astype to convert)")
    return reshape(x, tuple(shape))


# A Tensor method only (PyTorch has no torch.view): registered as publish would, without tt.view.
METHODS["view"] = view
Tensor.view = view


# ----- moving axes: composed from transpose ----------------------------------------------------------
@public(numpy=np.moveaxis)
def moveaxis(a, source, destination):
    """Move the axes `source` to the positions `destination`, the others keeping their order.

    Examples
    --------
    >>> tt.moveaxis(tt.zeros((2, 3, 4)), 0, -1).shape
    (3, 4, 2)
    """
    a = _input(a)
    source = _axes(source, a.ndim, "moveaxis (source)")
    destination = _axes(destination, a.ndim, "moveaxis (destination)")
    if len(source) != len(destination):
        raise ValueError(f"moveaxis: source {source} and destination {destination} must have "
                         f"the same number of axes")
    order = [i for i in range(a.ndim) if i not in source]
    for dest, src in sorted(zip(destination, source)):
        order.insert(dest, src)
    return transpose(a, order)


# ----- joining and splitting: composed from concatenate, stack, getitem --------------------------
def _at_least(a, ndim):
    """np.atleast_1d/2d/3d on one input (a Tensor is reshaped only when it has too few axes)."""
    a = _input(a)
    shape = a.shape
    if a.ndim >= ndim:
        return a
    if ndim == 1 or a.ndim == 0:
        new = (1,) * ndim
    elif ndim == 2 or a.ndim == 2:   # (n,) -> (1, n); (m, n) -> (m, n, 1)
        new = (1,) + shape if ndim == 2 else shape + (1,)
    else:                            # (n,) -> (1, n, 1)
        new = (1,) + shape + (1,)
    return reshape(a, new)


def _atleast(ndim):
    def atleast(*arys):
        out = [_at_least(a, ndim) for a in arys]
        return out[0] if len(out) == 1 else tuple(out)
    atleast.__name__ = f"atleast_{ndim}d"
    atleast.__doc__ = f"NumPy's atleast_{ndim}d: inputs with fewer than {ndim} axes get axes of length 1."
    return atleast


atleast_1d = public(_atleast(1), numpy=np.atleast_1d)
atleast_1d.__doc__ = """`atleast_1d(*arys)` (as `np.atleast_1d`): each input with at least 1 axis (a
0-d one becomes shape (1,)), recorded; one input gives one result, several a tuple.

Examples
--------
>>> tt.atleast_1d(tt.tensor(5.0))
tensor([5.])
"""
atleast_2d = public(_atleast(2), numpy=np.atleast_2d)
atleast_2d.__doc__ = """`atleast_2d(*arys)` (as `np.atleast_2d`): each input with at least 2 axes
(shape (n,) becomes (1, n)), recorded; one input gives one result, several a tuple.

Examples
--------
>>> a, b = tt.atleast_2d(tt.tensor([1.0, 2.0]), tt.tensor(3.0))
>>> a.shape, b.shape
((1, 2), (1, 1))
"""
atleast_3d = public(_atleast(3), numpy=np.atleast_3d)
atleast_3d.__doc__ = """`atleast_3d(*arys)` (as `np.atleast_3d`): each input with at least 3 axes
(shape (n,) becomes (1, n, 1), (m, n) becomes (m, n, 1)), recorded; one input gives one result,
several a tuple.

Examples
--------
>>> tt.atleast_3d(tt.ones((2, 3))).shape
(2, 3, 1)
"""


def _sequence(tup, op):
    if isinstance(tup, (Tensor, np.ndarray)) and tup.ndim == 0:
        raise TypeError(f"{op} takes a sequence of arrays or Tensors, got a 0-d {type(tup).__name__}")
    tup = list(tup)   # an array or a Tensor is the sequence of its rows, as in NumPy
    if not tup:
        raise ValueError(f"{op}: need at least one array to join")
    return tup


@public(numpy=np.vstack)
def vstack(tup, *, dtype=None, casting="same_kind"):
    """Join along the first axis, after making every input at least 2-D ((n,) -> (1, n)).

    Examples
    --------
    >>> tt.vstack([tt.ones(2), tt.zeros(2)]).shape
    (2, 2)
    """
    arrays = _joined(_sequence(tup, "vstack"), "vstack", dtype=dtype, casting=casting)
    return concatenate([_at_least(a, 2) for a in arrays], axis=0)


@public(numpy=np.hstack)
def hstack(tup, *, dtype=None, casting="same_kind"):
    """Join along the second axis (the first, for 1-D inputs); 0-d inputs become 1-D.

    Examples
    --------
    >>> tt.hstack([tt.ones(2), tt.zeros(1)])
    tensor([1., 1., 0.])
    """
    arrays = _joined(_sequence(tup, "hstack"), "hstack", dtype=dtype, casting=casting)
    arrays = [_at_least(a, 1) for a in arrays]
    return concatenate(arrays, axis=0 if arrays[0].ndim == 1 else 1)


@public(numpy=np.dstack)
def dstack(tup):
    """Join along the third axis, after making every input at least 3-D.

    Examples
    --------
    >>> tt.dstack([tt.ones(2), tt.zeros(2)]).shape
    (1, 2, 2)
    """
    return concatenate([_at_least(a, 3) for a in _sequence(tup, "dstack")], axis=2)


@public(numpy=np.column_stack)
def column_stack(tup):
    """1-D inputs as columns (n,) -> (n, 1), then hstack.

    Examples
    --------
    >>> tt.column_stack([tt.tensor([1.0, 2.0]), tt.tensor([3.0, 4.0])])
    tensor([[1., 3.],
            [2., 4.]])
    """
    columns = []
    for a in _sequence(tup, "column_stack"):
        a = _input(a)
        columns.append(reshape(a, (-1, 1)) if a.ndim < 2 else a)
    return concatenate(columns, axis=1)


def _split(ary, indices_or_sections, axis, op, equal):
    ary = _input(ary)
    axis = _axes(axis, ary.ndim, op)[0]
    n = ary.shape[axis]
    if np.ndim(indices_or_sections) == 0:
        sections = operator.index(indices_or_sections)
        if sections <= 0:
            raise ValueError(f"{op}: the number of sections must be positive, got {sections}")
        if equal and n % sections:
            raise ValueError(f"{op}: an axis of length {n} does not split into {sections} equal "
                             f"sections (array_split allows unequal ones)")
        each, extra = divmod(n, sections)
        bounds = np.cumsum([0] + [each + 1] * extra + [each] * (sections - extra)).tolist()
    else:   # split points, used as slice bounds exactly as NumPy uses them
        bounds = [0] + [operator.index(i) for i in np.asarray(indices_or_sections).ravel()] + [n]
    lead = (slice(None),) * axis
    return [getitem(ary, index=lead + (slice(lo, hi),)) for lo, hi in zip(bounds[:-1], bounds[1:])]


@public(numpy=np.split)
def split(ary, indices_or_sections, axis=0):
    """A list of pieces along `axis`: `sections` equal ones, or cut before each index given.

    Examples
    --------
    >>> [p.shape for p in tt.split(tt.arange(6.0), 3)]
    [(2,), (2,), (2,)]
    """
    return _split(ary, indices_or_sections, axis, "split", equal=True)


@public(numpy=np.array_split)
def array_split(ary, indices_or_sections, axis=0):
    """As split, but `sections` need not divide the axis (the first pieces get one more).

    Examples
    --------
    >>> [p.tolist() for p in tt.array_split(tt.arange(5.0), 2)]
    [[0.0, 1.0, 2.0], [3.0, 4.0]]
    """
    return _split(ary, indices_or_sections, axis, "array_split", equal=False)


# ----- copying: composed from reshape and broadcast_to -----------------------------------------------
@public(numpy=np.tile)
def tile(A, reps):
    """A repeated `reps` times along each axis (NumPy's tile; PyTorch's Tensor.repeat).

    Examples
    --------
    >>> tt.tile(tt.tensor([1.0, 2.0]), 2)
    tensor([1., 2., 1., 2.])
    """
    A = _input(A)
    reps = tuple(int(r) for r in np.ravel(_indices(reps, "tile") if np.size(reps) else ()))
    if any(r < 0 for r in reps):
        raise ValueError(f"tile: reps must be non-negative, got {reps}")
    ndim = max(A.ndim, len(reps))
    shape = (1,) * (ndim - A.ndim) + A.shape
    reps = (1,) * (ndim - len(reps)) + reps
    # (s0, s1) -> (1, s0, 1, s1) -> broadcast to (r0, s0, r1, s1) -> (r0 * s0, r1 * s1)
    interleaved = reshape(A, tuple(x for s in shape for x in (1, s)))
    copies = broadcast_to(interleaved, tuple(x for r, s in zip(reps, shape) for x in (r, s)))
    return reshape(copies, tuple(r * s for r, s in zip(reps, shape)))


@public(numpy=np.repeat, method=True)
def repeat(a, repeats, axis=None):
    """Each entry repeated `repeats` times along `axis` (flattened first when axis is None).

    NumPy's repeat (np.repeat, ndarray.repeat); PyTorch's Tensor.repeat is `tile`.

    Examples
    --------
    >>> tt.repeat(tt.tensor([1.0, 2.0]), 2)
    tensor([1., 1., 2., 2.])
    """
    a = _input(a)
    shape = (a.size,) if axis is None else a.shape
    axis = 0 if axis is None else _axes(axis, a.ndim, "repeat")[0]
    n = shape[axis]
    counts = _indices(constant_read(repeats, "repeat's counts") if isinstance(repeats, Tensor) else repeats,
                      "repeat")
    if (counts < 0).any():
        raise ValueError(f"repeat: repeats must be non-negative, got {counts}")
    if counts.size == 1:   # every entry the same number of times: (.., n, ..) -> (.., n, r, ..)
        r = int(counts.ravel()[0])
        spaced = reshape(a, shape[:axis + 1] + (1,) + shape[axis + 1:])
        copies = broadcast_to(spaced, shape[:axis + 1] + (r,) + shape[axis + 1:])
        return reshape(copies, shape[:axis] + (n * r,) + shape[axis + 1:])
    if counts.shape != (n,):
        raise ValueError(f"repeat: repeats of shape {counts.shape} do not match axis {axis} of "
                         f"length {n}; give one count, or one per entry")
    a = a if a.shape == shape else reshape(a, shape)
    picks = np.repeat(backend.namespace(counts).arange(n), counts)
    return getitem(a, index=(slice(None),) * axis + (backend.like(picks, a),))   # on a's device


# ----- picking entries: composed from getitem (repeated indices add up in the VJP) -----------------
@public(numpy=np.take, method=True)
def take(a, indices, axis=None, out=None, mode="raise"):
    """Entries at `indices` along `axis` (of the flattened input when axis is None).

    mode "raise" (out of range is an IndexError), "wrap" or "clip", as NumPy.

    Examples
    --------
    >>> tt.take(tt.tensor([10.0, 20.0, 30.0]), [2, 0])
    tensor([30., 10.])
    """
    _no_out(out, "take")
    a = _input(a)
    index = _indices(indices, "take")
    if axis is None:
        a, axis = reshape(a, (-1,)), 0
    axis = _axes(axis, a.ndim, "take")[0]
    n = a.shape[axis]
    if mode == "wrap" and n:      # (on_values: tt.compile's program computes them again each call)
        index = on_values(np.remainder, (index, n), {}, index % n)
    elif mode == "clip":
        index = on_values(np.clip, (index, 0, max(n - 1, 0)), {}, np.clip(index, 0, max(n - 1, 0)))
    elif mode != "raise":
        raise ValueError(f"take: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    if index.size and (index.min() < -n or index.max() >= n):
        raise IndexError(f"take: index {index.min() if index.min() < -n else index.max()} is out "
                         f"of bounds for axis {axis} of length {n}")
    return getitem(a, index=(slice(None),) * axis + (index,))


# The indices take_along_axis is usually given: computed on the values, with no gradient.
nondifferentiable(np.argsort, np.argpartition, np.nonzero, np.flatnonzero)


@public(numpy=np.take_along_axis)
def take_along_axis(arr, indices, axis=-1):
    """out[..., i, ...] = arr[..., indices[..., i, ...], ...] along `axis` (as argsort's output
    is used); `indices` has arr's number of axes and broadcasts against it elsewhere.

    Examples
    --------
    >>> x = tt.tensor([[10.0, 30.0, 20.0]])
    >>> tt.take_along_axis(x, np.array([[1, 0]]), axis=1)
    tensor([[30., 10.]])
    """
    arr = _input(arr)
    index = _indices(indices, "take_along_axis")
    if axis is None:
        arr, axis = reshape(arr, (-1,)), 0
    axis = _axes(axis, arr.ndim, "take_along_axis")[0]
    if index.ndim != arr.ndim:
        raise ValueError(f"take_along_axis: indices (shape {index.shape}) must have as many axes "
                         f"as arr (shape {arr.shape})")
    fancy = []
    for dim, n in enumerate(arr.shape):
        if dim == axis:
            fancy.append(index)
        else:   # the position along every other axis, broadcast against the indices
            positions = backend.namespace(index).arange(n)        # on the indices' device
            fancy.append(positions.reshape((1,) * dim + (n,) + (1,) * (arr.ndim - dim - 1)))
    return getitem(arr, index=tuple(fancy))


@public(numpy=np.diagonal, method=True)
def diagonal(a, offset=0, axis1=0, axis2=1):
    """The diagonal of the (axis1, axis2) planes, as a last axis (NumPy's order of axes).

    Examples
    --------
    >>> tt.diagonal(tt.tensor([[1.0, 2.0], [3.0, 4.0]]))
    tensor([1., 4.])
    """
    a = _input(a)
    if a.ndim < 2:
        raise ValueError(f"diagonal: needs at least 2 axes, got shape {a.shape}")
    axis1, axis2 = _axes((axis1, axis2), a.ndim, "diagonal")
    planes = a if (axis1, axis2) == (a.ndim - 2, a.ndim - 1) else moveaxis(a, (axis1, axis2), (-2, -1))
    rows, cols = planes.shape[-2:]
    length = max(0, min(rows + min(offset, 0), cols - max(offset, 0)))
    i = backend.namespace(planes).arange(length)
    return getitem(planes, index=(Ellipsis, i - min(offset, 0), i + max(offset, 0)))


@public(numpy=np.trace, method=True)
def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    """The sum of the diagonal (of each (axis1, axis2) plane).

    Examples
    --------
    >>> tt.trace(tt.tensor([[1.0, 2.0], [3.0, 4.0]]))
    tensor(5.)
    """
    _no_out(out, "trace")
    total = diagonal(a, offset, axis1, axis2).sum(axis=-1)
    return total if dtype is None else total.astype(dtype)


# ----- linear primitives: the VJP is the transpose, written with the op's NumPy twin --------------
_flip = deflinear(lambda x, axis: np.flip(x, axis), "flip",
                  vjp=lambda g, ans, x, axis: np.flip(g, axis))


@public(numpy=np.flip)
def flip(m, axis=None):
    """The entries in reverse order along `axis` (all axes when None).

    Examples
    --------
    >>> tt.flip(tt.tensor([1.0, 2.0, 3.0]))
    tensor([3., 2., 1.])
    """
    m = _input(m)
    return _flip(m, axis=None if axis is None else _axes(axis, m.ndim, "flip"))


@public(numpy=np.fliplr)
def fliplr(m):
    """Reverse the order of columns (as `np.fliplr`).

    Examples
    --------
    >>> tt.fliplr(tt.tensor([[1.0, 2.0], [3.0, 4.0]]))
    tensor([[2., 1.],
            [4., 3.]])
    """
    return flip(m, 1)


@public(numpy=np.flipud)
def flipud(m):
    """Reverse the order of rows (as `np.flipud`).

    Examples
    --------
    >>> tt.flipud(tt.tensor([[1.0, 2.0], [3.0, 4.0]]))
    tensor([[3., 4.],
            [1., 2.]])
    """
    return flip(m, 0)


def _negate(shift):
    return tuple(-s for s in shift) if isinstance(shift, tuple) else -shift


_roll = deflinear(lambda x, shift, axis: np.roll(x, shift, axis), "roll",
                  vjp=lambda g, ans, x, shift, axis: np.roll(g, _negate(shift), axis))


@public(numpy=np.roll)
def roll(a, shift, axis=None):
    """Entries shifted `shift` places along `axis` (of the flattened input when None), the ones
    pushed off the end coming back at the start.

    Examples
    --------
    >>> tt.roll(tt.tensor([1.0, 2.0, 3.0]), 1)
    tensor([3., 1., 2.])
    """
    a = _input(a)
    shift = tuple(map(operator.index, shift)) if np.ndim(shift) else operator.index(shift)
    if axis is not None:   # an axis may come twice: its shifts add up, as in NumPy
        axes = _axes(axis, a.ndim, "roll", unique=False)
        axis = axes if isinstance(axis, (tuple, list)) else axes[0]
    return _roll(a, shift=shift, axis=axis)


_tril = deflinear(lambda x, k: np.tril(x, k), "tril", vjp=lambda g, ans, x, k: np.tril(g, k))
_triu = deflinear(lambda x, k: np.triu(x, k), "triu", vjp=lambda g, ans, x, k: np.triu(g, k))


@public(numpy=np.tril)
def tril(m, k=0):
    """Zeros above the k-th diagonal of the last two axes (a 1-D input is a row repeated, as NumPy).

    Examples
    --------
    >>> tt.tril(tt.ones((2, 2)))
    tensor([[1., 0.],
            [1., 1.]])
    """
    return _triangle("tril", _tril, m, k)


@public(numpy=np.triu)
def triu(m, k=0):
    """Zeros below the k-th diagonal of the last two axes (a 1-D input is a row repeated, as NumPy).

    Examples
    --------
    >>> tt.triu(tt.ones((2, 2)))
    tensor([[1., 1.],
            [0., 1.]])
    """
    return _triangle("triu", _triu, m, k)


def _triangle(name, row, m, k):
    """tril / triu: `row` (the primitive) of m at diagonal k, for m of 1 axis or more."""
    m = _input(m)
    if m.ndim == 0:
        raise ValueError(f"{name}: needs at least 1 axis, got a 0-d input")
    return row(m, k=operator.index(k))


# v on the k-th diagonal of a square matrix; the transpose reads that diagonal back.
_diag = deflinear(lambda v, k: np.diag(v, k), "diag", vjp=lambda g, ans, v, k: np.diagonal(g, k))


@public(numpy=np.diag)
def diag(v, k=0):
    """1-D v: the square matrix with v on its k-th diagonal. 2-D v: its k-th diagonal.

    Examples
    --------
    >>> tt.diag(tt.tensor([1.0, 2.0]))
    tensor([[1., 0.],
            [0., 2.]])
    """
    v = _input(v)
    if v.ndim == 1:
        return _diag(v, k=operator.index(k))
    if v.ndim == 2:
        return diagonal(v, k)
    raise ValueError(f"diag: input must be 1-D or 2-D, got shape {v.shape} (diagonal() takes axes)")


# ----- pad: constant borders are one primitive; the other modes pick entries (getitem) ------------
def _interior(pad_width, shape):
    return tuple(slice(before, before + n) for (before, _), n in zip(pad_width, shape))


def _pad_forward(x, pad_width, constant_values):
    if constant_values is None:   # zero borders: cheaper than np.pad
        shape = tuple(b + n + a for (b, a), n in zip(pad_width, x.shape))
        out = backend.namespace(x).zeros(shape, x.dtype)
        out[_interior(pad_width, x.shape)] = x
        return out
    return np.pad(x, pad_width, constant_values=constant_values)


# Affine in x (the border is a constant): the JVP pads the tangent with zeros.
_pad = defprim(_pad_forward, "pad", nargs=1,
               vjp=[lambda g, ans, x, pad_width, constant_values: g[_interior(pad_width, x.shape)]],
               jvp=[lambda t, ans, x, pad_width, constant_values:
                    _pad(t, pad_width=pad_width, constant_values=None)])
complex_rules(_pad)     # linear: its transpose holds for complex values (np.fft's n= pads with it)

PAD_MODES = ("constant", "edge", "reflect", "symmetric", "wrap")


def _pad_pairs(pad_width, ndim):
    """pad_width as NumPy reads it: one width, one (before, after) pair, or one pair per axis."""
    if isinstance(pad_width, (int, np.integer)) and pad_width >= 0:   # the common case, fast
        return ((int(pad_width),) * 2,) * ndim
    widths = backend.to_host(pad_width.data if isinstance(pad_width, Tensor) else pad_width)
    if widths.dtype.kind not in "iu":
        raise TypeError(f"pad: pad_width must be integers, got {pad_width!r}")
    if widths.size == 2 and widths.shape != (2, 1):
        widths = widths.ravel()
    if widths.shape != (ndim, 2):
        try:
            widths = np.broadcast_to(widths, (ndim, 2))
        except ValueError:
            raise ValueError(f"pad: pad_width of shape {widths.shape} does not fit an input with "
                             f"{ndim} axes; give one width, one (before, after) pair, or one pair "
                             f"per axis") from None
    pairs = tuple(tuple(pair) for pair in widths.tolist())
    if any(w < 0 for pair in pairs for w in pair):
        raise ValueError(f"pad: pad widths must be non-negative, got {pad_width!r}")
    return pairs


@public(numpy=np.pad)
def pad(array, pad_width, mode="constant", **kwargs):
    """Pad with `constant_values` (default 0) or, with mode "edge", "reflect", "symmetric" or
    "wrap", with copies of the input's own entries (their gradients add up).

    Examples
    --------
    >>> tt.pad(tt.tensor([1.0, 2.0]), 1)
    tensor([0., 1., 2., 0.])
    """
    array = _input(array)
    if mode not in PAD_MODES:
        raise NotImplementedError(f"pad: mode {mode!r} is not supported; the supported modes "
                                  f"are {', '.join(map(repr, PAD_MODES))}")
    options = {"constant": {"constant_values"}, "reflect": {"reflect_type"},
               "symmetric": {"reflect_type"}}.get(mode, set())
    unknown = set(kwargs) - options
    if unknown:
        raise TypeError(f"pad: mode {mode!r} takes no option {', '.join(sorted(unknown))}")
    if kwargs.get("reflect_type", "even") != "even":
        raise NotImplementedError("pad: only reflect_type='even' is supported")
    if array.ndim == 0:   # nothing to pad, as NumPy
        return _pad(array, pad_width=(), constant_values=None)
    pairs = _pad_pairs(pad_width, array.ndim)
    if mode == "constant":
        values = kwargs.get("constant_values", 0)
        if isinstance(values, Tensor):
            if values.requires_grad:
                raise TypeError("pad: constant_values must be numbers, not a Tensor that requires grad "
                                "(no gradient flows to them); pad with 0 and add the border instead")
            values = constant_read(values, "pad's constant_values")   # (its value: a guard)
        zero = values == 0 if isinstance(values, (int, float)) else not np.any(values)
        return _pad(array, pad_width=pairs, constant_values=None if zero else values)
    # Which input entry each output entry copies: NumPy pads the entries' flat positions.
    source = np.pad(np.arange(array.size).reshape(array.shape), pairs, mode=mode)
    return getitem(reshape(array, (-1,)), index=backend.like(source, array))   # on array's device
