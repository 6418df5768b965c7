"""tt.vmap's batching rules: one per primitive, the op table's fourth column (autodidax's design).

A value batched by `tt.vmap` is a `BatchArray`: the array holding every example (`val`: a NumPy
array, a Tensor on the tape, or a BatchArray of an outer vmap) and the axis of `val` the examples
run along (`bdim`). To the user's function it looks like one example: `.shape`, `.ndim`, methods,
operators and NumPy calls are an example's. A primitive called with one goes to its rule:

    rule(prim, size, vals, dims, **params) -> (result, its batch axis or None)

where `dims[i]` is the batch axis of `vals[i]` (None: the same for every example) and `size` the
number of examples. Rules call primitives on the vals (NumPy broadcasting, batched matmul,
einsum, moved axes), never a Python loop over the examples; so a rule applied to Tensors is
recorded on the tape, and one applied to an outer vmap's BatchArrays is batched again.

A primitive without a native rule is declared `LOOP` (the rule that calls it once per example and
stacks the results); `check_rules()` reports it by name. `BATCHING` (ops/table.py) holds the column.
"""

import numpy as np

from .. import tape
from ..tensor import Tensor
from .table import BATCHING, LOOP, METHODS, NONDIFFERENTIABLE, NUMPY_FUNCTIONS, PUBLIC

_P = tape.REGISTRY          # primitives by name: the rules call them on the vals


class BatchArray:
    """One example's view of a batch (see the module docstring). `frame` is the vmap call it
    belongs to (its level, its size, its randomness)."""

    __slots__ = ("val", "bdim", "frame")
    __array_priority__ = 2000       # NumPy defers to it, before Tensor (1000)

    def __init__(self, val, bdim, frame):
        self.val = val
        self.bdim = bdim
        self.frame = frame

    @property
    def shape(self):
        s = _shape(self.val)
        return s[:self.bdim] + s[self.bdim + 1:]

    ndim = property(lambda self: _ndim(self.val) - 1)
    dtype = property(lambda self: np.dtype(self.val.dtype))
    size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)))
    T = property(lambda self: _P["transpose"](self))
    requires_grad = property(lambda self: isinstance(_base(self), Tensor) and _base(self).requires_grad)

    def __repr__(self):
        return (f"BatchArray(one example of shape {self.shape} {self.dtype}, batched over "
                f"{self.frame.size} examples by tt.vmap)")

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d example (inside tt.vmap each argument is one example)")
        return self.shape[0]

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    # ----- no single value: Python control flow on a batched value is refused -----------------
    def _concrete(self, what):
        raise not_batchable(TypeError(
            f"{what} of a value batched by tt.vmap: it holds {self.frame.size} examples, not one "
            f"value, so Python control flow on it (if, while, float(), int(), .item()) cannot be "
            f"batched. Use tt.where(cond, a, b) (or np.where) instead of if/else, or compute it "
            f"outside vmap"))

    def __bool__(self):
        self._concrete("bool()")

    def __float__(self):
        self._concrete("float()")

    def __int__(self):
        self._concrete("int()")

    def __index__(self):
        self._concrete("operator.index()")

    def item(self):
        self._concrete(".item()")

    def __array__(self, dtype=None, copy=None):
        self._concrete("np.asarray()")

    def numpy(self):
        self._concrete(".numpy()")

    @property
    def data(self):
        self._concrete(".data")

    def detach(self):
        return BatchArray(self.val.detach() if isinstance(self.val, (Tensor, BatchArray))
                          else self.val, self.bdim, self.frame)

    # ----- methods and operators: the op table's, as on a Tensor --------------------------------
    def __getattr__(self, name):
        fun = METHODS.get(name)
        if fun is None:
            raise AttributeError(f"a value batched by tt.vmap has no attribute {name!r}")
        return lambda *args, **kwargs: fun(self, *args, **kwargs)

    def reshape(self, *shape):
        return _P["reshape"](self, shape=shape[0] if len(shape) == 1 else shape)

    def transpose(self, *axes):
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
            axes = axes[0]
        return _P["transpose"](self, axes=tuple(axes) if axes else None)

    def astype(self, dtype, copy=True):
        return PUBLIC["astype"](self, dtype)

    def copy(self):
        return PUBLIC["clone"](self) if "clone" in PUBLIC else _P["clone"](self)

    def __getitem__(self, index):
        return PUBLIC["getitem"](self, index) if "getitem" in PUBLIC else _P["getitem"](self, index=index)

    def __add__(self, o): return _P["add"](self, o)
    def __radd__(self, o): return _P["add"](o, self)
    def __sub__(self, o): return _P["sub"](self, o)
    def __rsub__(self, o): return _P["sub"](o, self)
    def __mul__(self, o): return _P["mul"](self, o)
    def __rmul__(self, o): return _P["mul"](o, self)
    def __truediv__(self, o): return _P["div"](self, o)
    def __rtruediv__(self, o): return _P["div"](o, self)
    def __pow__(self, o): return _P["power"](self, o)
    def __rpow__(self, o): return _P["power"](o, self)
    def __matmul__(self, o): return _P["matmul"](self, o)
    def __rmatmul__(self, o): return _P["matmul"](o, self)
    def __mod__(self, o): return _P["remainder"](self, o)
    def __rmod__(self, o): return _P["remainder"](o, self)
    def __neg__(self): return _P["neg"](self)
    def __pos__(self): return self
    def __abs__(self): return _P["abs"](self)
    def __lt__(self, o): return np.less(self, o)
    def __le__(self, o): return np.less_equal(self, o)
    def __gt__(self, o): return np.greater(self, o)
    def __ge__(self, o): return np.greater_equal(self, o)
    def __eq__(self, o): return np.equal(self, o)
    def __ne__(self, o): return np.not_equal(self, o)
    def __invert__(self): return np.logical_not(self)
    def __and__(self, o): return np.logical_and(self, o)
    def __or__(self, o): return np.logical_or(self, o)
    __hash__ = object.__hash__

    # ----- NumPy calls: the op table's functions, or batched here when they have no gradient -----
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        _refuse_escaped(inputs, ufunc.__name__)
        if method == "__call__":
            op = NUMPY_FUNCTIONS.get(ufunc)
            if op is not None and not kwargs:
                return op(*inputs)
            if op is None or ufunc in NONDIFFERENTIABLE or not _needs_grad(inputs):
                return _ufunc_values(ufunc, inputs, kwargs)
        raise TypeError(f"np.{ufunc.__name__}{'' if method == '__call__' else '.' + method} on a value "
                        f"batched by tt.vmap: only plain calls (no out=, no ufunc methods) are batched; "
                        f"use the tinytensor operation")

    def __array_function__(self, func, types, args, kwargs):
        _refuse_escaped(args, getattr(func, "__name__", "a NumPy function"))
        special = _NUMPY_SPECIAL.get(func)
        if special is not None:
            return special(*args, **kwargs)
        op = NUMPY_FUNCTIONS.get(func)
        if op is not None:
            return op(*args, **kwargs)
        name = getattr(func, "__name__", repr(func))
        raise TypeError(f"np.{name} on a value batched by tt.vmap has no batching rule; use a "
                        f"tinytensor operation (tt.{name} where it exists), or call it outside vmap")


def not_batchable(err):
    """Mark `err` as saying that a function cannot run batched (Python control flow on a batched
    value, an in-place write of one, a BatchNorm in train()): tt.jacobian then takes its basis
    one vector at a time instead of vmapping over it."""
    err._not_batchable = True
    return err


def _refuse_escaped(args, name):
    for a in args:
        if type(a) is BatchArray and not a.frame.active:
            raise RuntimeError(f"{name}: a value batched by a tt.vmap call that has returned (it "
                               f"escaped its function: kept in a global, a closure or a list) is "
                               f"used; return it from the function instead")


def _needs_grad(args):
    return any(_base(a).requires_grad if isinstance(_base(a), Tensor) else False
               for a in args if isinstance(a, (BatchArray, Tensor)))


def _base(x):
    while isinstance(x, BatchArray):
        x = x.val
    return x


def _shape(v):
    return tuple(v.shape) if hasattr(v, "shape") else np.shape(v)


def _ndim(v):
    return v.ndim if hasattr(v, "ndim") else np.ndim(v)


# ----- bind: a primitive meets batched operands --------------------------------------------------
def bind(prim, args, params):
    """The batched result of prim(*args, **params), or NotImplemented if no operand is batched.
    The innermost vmap among the operands (the highest level) is handled here; its rule calls
    primitives on the vals, which handles the outer ones in turn."""
    top = None
    for a in args:
        if type(a) is BatchArray and (top is None or a.frame.level > top.level):
            top = a.frame
    for k, v in params.items():
        if type(v) is BatchArray or (isinstance(v, tuple) and any(type(i) is BatchArray for i in v)):
            if prim.name not in _BATCHED_INDEX or (type(v) is not BatchArray and prim.name != "getitem"):
                raise TypeError(f"{prim.name}: its parameter {k}= is batched by tt.vmap (a batched "
                                f"index or shape); only integer indices of x[...] and of an "
                                f"embedding can be batched. Use one-hot products or "
                                f"tt.take_along_axis, or pass it with in_axes=None")
            for i in (v if isinstance(v, tuple) else (v,)):
                if type(i) is BatchArray and (top is None or i.frame.level > top.level):
                    top = i.frame
    if top is None:
        return NotImplemented
    if not top.active:
        _refuse_escaped([a for a in args if type(a) is BatchArray], prim.name)
    vals, dims = [], []
    for a in args:
        if type(a) is BatchArray and a.frame is top:
            vals.append(a.val)
            dims.append(a.bdim)
        else:
            vals.append(a)
            dims.append(None)
    rule = BATCHING.get(prim.name, LOOP)
    _TOP[0] = top            # (the gathers tell their level's batched indices from outer ones)
    out, dim = (loop if rule is LOOP else rule)(prim, top.size, vals, dims, **params)
    return out if dim is None else BatchArray(out, dim, top)


tape._BATCHING[0] = bind


# ----- helpers: moving the batch axis, aligning per-example ranks --------------------------------
def moved(v, d, to=0):
    """v with its axis d moved to `to` (a transpose primitive: recorded on Tensors)."""
    if d is None or d == to:
        return v
    perm = list(range(_ndim(v)))
    perm.insert(to, perm.pop(d))
    return _P["transpose"](v, axes=tuple(perm))


def _expand(v, k, at=1):
    """v with k axes of size 1 inserted at `at`."""
    if not k:
        return v
    s = _shape(v)
    return _P["reshape"](v, shape=s[:at] + (1,) * k + s[at:])


def _front(v, d, size, nd=None):
    """v with the batch axis first, broadcast to `size` if unbatched, and (with nd) the example
    axes padded on the left to nd."""
    if d is None:
        v = _P["broadcast_to"](v, shape=(size,) + _shape(v))
    else:
        v = moved(v, d)
    return v if nd is None else _expand(v, nd - (_ndim(v) - 1))


def _axes(axis, nd):
    """An example's reduction axes as axes of the batched array (batch axis first)."""
    if axis is None:
        return tuple(range(1, nd + 1))
    if isinstance(axis, (tuple, list)):
        return tuple(a % nd + 1 for a in axis)
    return (axis % nd) + 1 if nd else axis


def _example_nd(vals, dims):
    """The largest example rank among the operands (a plain loop: it runs for every batched op)."""
    nd = 0
    for v, d in zip(vals, dims):
        if v is not None:
            k = (v.ndim if hasattr(v, "ndim") else 0 if isinstance(v, (int, float, complex))
                 else np.ndim(v)) - (d is not None)
            if k > nd:
                nd = k
    return nd


# ----- the rule families ------------------------------------------------------------------------
def elementwise(prim, size, vals, dims, **params):
    """Broadcasting operations: the batch axis first, each example's axes padded on the left to
    the largest example rank; unbatched operands broadcast as they are."""
    nd = _example_nd(vals, dims)
    args = [v if d is None else _expand(moved(v, d), nd - (_ndim(v) - 1)) for v, d in zip(vals, dims)]
    return prim(*args, **params), 0


def reduction(prim, size, vals, dims, axis=None, **params):
    """A reduction (or an op along an axis that keeps the rank) over an example's axes."""
    nd = _example_nd(vals, dims)
    args = [v if d is None else _expand(moved(v, d), nd - (_ndim(v) - 1)) for v, d in zip(vals, dims)]
    if any(d is None for d in dims):       # an unbatched operand of a two-input reduction
        args = [_front(v, d, size, nd) for v, d in zip(args, [0 if d is not None else None for d in dims])]
    return prim(*args, axis=_axes(axis, nd), **params), 0


def one_axis(prim, size, vals, dims, axis=None, **params):
    """cumsum, cumprod (one axis; None: the flattened example)."""
    v = moved(vals[0], dims[0])
    if axis is None:
        return prim(_P["reshape"](v, shape=(_shape(v)[0], -1)), axis=1, **params), 0
    return prim(v, axis=_axes(axis, _ndim(v) - 1), **params), 0


def roll(prim, size, vals, dims, shift, axis):
    v = moved(vals[0], dims[0])
    if axis is None:
        s = _shape(v)
        out = prim(_P["reshape"](v, shape=(s[0], -1)), shift=shift, axis=1)
        return _P["reshape"](out, shape=s), 0
    return prim(v, shift=shift, axis=_axes(axis, _ndim(v) - 1)), 0


def leading(prim, size, vals, dims, **params):
    """Operations already batched over leading axes (linear algebra on the last two axes, tril,
    triu, the pools on (N, C, H, W)): the batch axis first, unbatched operands broadcast."""
    nd = _example_nd(vals, dims)
    return prim(*[v if v is None else _front(v, d, size, nd) for v, d in zip(vals, dims)], **params), 0


def leading_single(prim, size, vals, dims, **params):
    return prim(moved(vals[0], dims[0]), **params), 0


def reshape(prim, size, vals, dims, shape):
    v = moved(vals[0], dims[0])
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    return prim(v, shape=(_shape(v)[0],) + shape), 0


def transpose(prim, size, vals, dims, axes=None):
    v, d = vals[0], dims[0]
    nd = _ndim(v) - 1
    axes = tuple(reversed(range(nd))) if axes is None else tuple(a % nd for a in axes)
    return prim(moved(v, d), axes=(0,) + tuple(a + 1 for a in axes)), 0


def broadcast_to(prim, size, vals, dims, shape):
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    v = _expand(moved(vals[0], dims[0]), len(shape) - (_ndim(vals[0]) - 1))
    return prim(v, shape=(_shape(v)[0],) + shape), 0


def _batched_index(index):
    """The example's index with the batch axis in front, or None where NumPy's placement of
    advanced-index axes would move the batch axis (arrays separated by a slice)."""
    index = index if isinstance(index, tuple) else (index,)
    arrays = [i for i, k in enumerate(index)
              if isinstance(k, (np.ndarray, list, Tensor)) or hasattr(k, "shape")]
    if arrays:
        adv = [i for i, k in enumerate(index)
               if i in arrays or isinstance(k, (int, np.integer))]
        if adv != list(range(adv[0], adv[-1] + 1)):
            return None
    return (slice(None),) + index


def _gather(prim, size, x, dx, index):
    """x[index] where index holds integer arrays batched by this vmap: one gather. The example's
    advanced indices must come first (NumPy would otherwise move their axes to the front)."""
    entries = index if isinstance(index, tuple) else (index,)
    advanced = [type(k) is BatchArray or isinstance(k, (np.ndarray, list)) or
                isinstance(k, (int, np.integer)) for k in entries]
    n_adv = advanced.index(False) if False in advanced else len(advanced)
    if any(advanced[n_adv:]):
        raise not_batchable(TypeError(
            f"{prim.name}: an index batched by tt.vmap mixed with slices before or between its "
            f"arrays is not supported; put the array indices first (or use tt.take_along_axis)"))
    stacked = [(_index_of(k, size)[0], True) if _mine(k) else
               (k if type(k) is BatchArray else np.asarray(k), False) for k in entries[:n_adv]]
    nd = max((np.ndim(v) - b for v, b in stacked), default=0)   # the examples' broadcast rank
    arrays = [v.reshape((v.shape[0],) + (1,) * (nd - (v.ndim - 1)) + v.shape[1:]) if b else v
              for v, b in stacked]
    if dx is not None:
        arrays.insert(0, np.arange(size).reshape((size,) + (1,) * nd))
        x = moved(x, dx)
    else:       # an unbatched x: the batched indices carry the examples' axis, first
        arrays = [a if b else a[None] for a, (v, b) in zip(arrays, stacked)]
    return prim(x, index=tuple(arrays) + tuple(entries[n_adv:])), 0


def getitem(prim, size, vals, dims, index):
    if _mine(index) or (isinstance(index, tuple) and any(_mine(k) for k in index)):
        return _gather(prim, size, vals[0], dims[0], index)
    index2 = _batched_index(index)
    if index2 is None:
        return loop(prim, size, vals, dims, index=index)
    return prim(moved(vals[0], dims[0]), index=index2), 0


def index_adjoint(prim, size, vals, dims, index, shape):
    index2 = _batched_index(index)
    if index2 is None:
        return loop(prim, size, vals, dims, index=index, shape=shape)
    return prim(moved(vals[0], dims[0]), index=index2, shape=(size,) + tuple(shape)), 0


def setitem(prim, size, vals, dims, index):
    index2 = _batched_index(index)
    if index2 is None:
        return loop(prim, size, vals, dims, index=index)
    (x, v), (dx, dv) = vals, dims
    x = _front(x, dx, size)
    if dv is not None:
        region = np.broadcast_to(np.empty((), np.int8), _shape(x)[1:])[index].ndim
        v = _expand(moved(v, dv), region - (_ndim(v) - 1))
    return prim(x, v, index=index2), 0


def join(prim, size, vals, dims, axis=0):
    """concatenate and stack: unbatched inputs broadcast, the axis shifted past the batch axis."""
    nd = _example_nd(vals, dims)
    args = [_front(v, d, size) for v, d in zip(vals, dims)]
    axis = (axis % (nd + 1) if prim.name == "stack" else axis % max(nd, 1)) + 1
    return prim(*args, axis=axis), 0


def pad(prim, size, vals, dims, pad_width, constant_values=0):
    v = moved(vals[0], dims[0])
    nd = _ndim(v) - 1
    if np.ndim(constant_values) > 0:
        return loop(prim, size, vals, dims, pad_width=pad_width, constant_values=constant_values)
    widths = np.broadcast_to(np.asarray(pad_width, dtype=np.intp), (nd, 2)) if nd else ()
    widths = ((0, 0),) + tuple(tuple(int(w) for w in row) for row in widths)
    return prim(v, pad_width=widths, constant_values=constant_values), 0


def triangle(prim, size, vals, dims, **params):
    if _ndim(vals[0]) - 1 < 2:        # a vector: tril/triu first make it a matrix
        return loop(prim, size, vals, dims, **params)
    return leading_single(prim, size, vals, dims, **params)


def matmul(prim, size, vals, dims):
    """matmul (and dot on matrices): one matmul of the stacked operands; an unbatched matrix
    operand keeps its single BLAS call (the examples folded into its rows or columns)."""
    (a, b), (da, db) = vals, dims
    na, nb = _ndim(a) - (da is not None), _ndim(b) - (db is not None)
    if na == 0 or nb == 0:
        raise ValueError(f"{prim.name}: matrix products do not take 0-d operands; got examples of "
                         f"{na} and {nb} dimensions (use * to multiply by a scalar)")
    if db is None and nb == 2 and na <= 2:     # x @ W: the examples become rows
        a = moved(a, da)
        s = _shape(a)
        if na == 1:
            return _P["matmul"](a, b), 0
        out = _P["matmul"](_P["reshape"](a, shape=(s[0] * s[1], s[2])), b)
        return _P["reshape"](out, shape=(s[0], s[1], _shape(b)[1])), 0
    if da is None and na == 2 and nb <= 2:     # W @ x: the examples become columns
        b = moved(b, db, nb - 1 if nb == 2 else 1)     # (k, B, n) or (k, B)
        s = _shape(b)
        if nb == 1:
            return _P["matmul"](a, b), 1                  # (m, B)
        out = _P["matmul"](a, _P["reshape"](b, shape=(s[0], s[1] * s[2])))
        return _P["reshape"](out, shape=(_shape(a)[0], s[1], s[2])), 1
    if da is not None and db is not None and nb == 2 and na <= 2:     # rows times own matrices
        return vmatmul(moved(a, da), moved(b, db)), 0
    # The general case: explicit matrices (a vector gets a unit axis), the example's stacking
    # axes aligned, one broadcasting matmul, the unit axes dropped.
    a = _front(a, da, size) if da is not None else a
    b = _front(b, db, size) if db is not None else b
    if na == 1:
        a = _expand(a, 1, _ndim(a) - 1)               # (.., 1, k)
    if nb == 1:
        b = _expand(b, 1, _ndim(b))                   # (.., k, 1)
    stack = max(na, nb, 2) - 2
    if da is not None:
        a = _expand(a, stack - (_ndim(a) - 3))
    if db is not None:
        b = _expand(b, stack - (_ndim(b) - 3))
    out = _P["matmul"](a, b)
    s = _shape(out)
    if na == 1 and nb == 1:
        return _P["reshape"](out, shape=s[:-2]), 0
    if na == 1:
        return _P["reshape"](out, shape=s[:-2] + s[-1:]), 0
    if nb == 1:
        return _P["reshape"](out, shape=s[:-1]), 0
    return out, 0


# ----- vmatmul: each example's rows times each example's own matrix ------------------------------
# The product that per-example gradients are made of: inside tt.vmap(tt.grad(loss)) every weight
# matrix is one per example (a stride-0 broadcast of the shared one, so that the sweep gives each
# example its own gradient). A plain batched matmul of (B, 1, k) by (B, k, n) makes B tiny BLAS
# calls, and its VJP B outer products through matmul with an inner size of 1 (23 ms of 24 for the
# digits MLP at B = 256); this primitive computes the forward with ONE BLAS call when the matrices
# are a broadcast of one (stride 0 along the examples), and the matrices' VJP as broadcast outer
# products.
def _shared(b):
    """The one matrix behind a stack of them that is a broadcast (stride 0 along the examples)."""
    if type(b) is np.ndarray and b.ndim == 3 and b.strides[0] == 0:
        return b[0]
    return None


def _vmatmul_forward(a, b):
    """a (B, k) or (B, m, k), b (B, k, n) -> (B, n) or (B, m, n): a[i] @ b[i]."""
    shared = _shared(b)
    if shared is not None:
        if a.ndim == 2:
            return a @ shared
        return (a.reshape(-1, a.shape[-1]) @ shared).reshape(a.shape[:-1] + shared.shape[-1:])
    if a.ndim == 2:
        return np.matmul(a[:, None, :], b)[:, 0]
    return np.matmul(a, b)


def _vmatmul_vjp_a(g, ans, a, b):
    return vmatmul(g, _P["transpose"](b, axes=(0, 2, 1)))


def _vmatmul_vjp_b(g, ans, a, b):
    if a.ndim == 2:                        # outer products, by broadcasting
        return _P["reshape"](a, shape=a.shape + (1,)) * _P["reshape"](g, shape=(g.shape[0], 1, g.shape[1]))
    return np.matmul(_P["transpose"](a, axes=(0, 2, 1)), g)


def _vmatmul_rule(prim, size, vals, dims):
    """vmatmul under another vmap: as matmul of (.., 1, k) rows by (.., k, n) matrices."""
    scratch = _Frame.scratch(size)
    a, b = (v if d is None else BatchArray(v, d, scratch) for v, d in zip(vals, dims))
    rows = _P["reshape"](a, shape=a.shape[:1] + (1,) + a.shape[1:]) if a.ndim == 2 else a
    out = _P["matmul"](rows, b)
    if a.ndim == 2:
        out = _P["reshape"](out, shape=out.shape[:1] + out.shape[2:])
    scratch.active = False
    return _unbox(out, scratch)


def _defvmatmul():
    from .table import defprim
    prim = defprim(_vmatmul_forward, "vmatmul", vjp=[_vmatmul_vjp_a, _vmatmul_vjp_b],
                   jvp=[lambda t, ans, a, b: vmatmul(t, b), lambda t, ans, a, b: vmatmul(a, t)])
    return prim


vmatmul = _defvmatmul()


def dot(prim, size, vals, dims):
    na, nb = (_ndim(v) - (d is not None) for v, d in zip(vals, dims))
    if na == 0 or nb == 0:
        return elementwise(_P["mul"], size, vals, dims)
    if na <= 2 and nb <= 2:
        return matmul(prim, size, vals, dims)
    return loop(prim, size, vals, dims)


def linear(prim, size, vals, dims):
    """x @ W + b (linear) or x @ weight.T + bias (linear_t): with only x batched, one call on
    the stacked examples; otherwise as matmul and add, batched."""
    (x, w, b), (dx, dw, db) = vals, dims
    if dw is None and db is None and _ndim(x) - 1 >= 1:
        return prim(moved(x, dx), w, b), 0
    scratch = _Frame.scratch(size)      # one level for this rule's own primitives
    X, W, Bs = (v if d is None else BatchArray(v, d, scratch) for v, d in zip(vals, dims))
    out = _linear_parts(prim.name, X, W, Bs)
    scratch.active = False
    return _unbox(out, scratch)


def _linear_parts(name, x, w, b):
    w = w if name == "linear" else _P["transpose"](w, axes=None)
    out = _P["matmul"](x, w)
    return out if b is None else _P["add"](out, b)


def einsum(prim, size, vals, dims, subscripts):
    """One einsum with a fresh letter for the examples."""
    spec = subscripts.replace(" ", "")
    ins, _, out = spec.partition("->")
    ins = ins.split(",")
    if "->" not in spec:                 # implicit output: letters seen once, in order
        letters = "".join(ins).replace(".", "")
        once = sorted(c for c in set(letters) if letters.count(c) == 1)
        out = ("..." if "..." in spec else "") + "".join(once)
    free = next(c for c in "zyxwvutsrqponmlkjihgfedcbaZYXWVUTSRQPONMLKJIHGFEDCBA" if c not in spec)
    args = []
    for i, (v, d) in enumerate(zip(vals, dims)):
        if d is not None:
            ins[i] = free + ins[i]
            v = moved(v, d)
        args.append(v)
    return prim(*args, subscripts=",".join(ins) + "->" + free + out), 0


_TOP = [None]


def _mine(k):
    return type(k) is BatchArray and k.frame is _TOP[0]


def _index_of(index, size):
    """A batched index (a BatchArray of the rule's level) as its stacked values, batch axis
    first, and whether it was batched; a plain index as it is."""
    if type(index) is BatchArray:
        v = moved(index.val, index.bdim)
        return (v.data if isinstance(v, Tensor) else v), True
    return index, False


def diag(prim, size, vals, dims, k=0):
    """np.diag of each example's vector: one einsum with the 0/1 tensor placing entry i at
    (i + max(-k, 0), i + max(k, 0)); a matrix example (its diagonal) takes the loop."""
    v, d = vals[0], dims[0]
    if _ndim(v) - 1 != 1:
        return loop(prim, size, vals, dims, k=k)
    v = moved(v, d)
    n = _shape(v)[1]
    m = n + abs(k)
    place = np.zeros((n, m, m), dtype=np.result_type(v.dtype, np.float32) if v.dtype.kind == "f" else v.dtype)
    i = np.arange(n)
    place[i, i + max(-k, 0), i + max(k, 0)] = 1
    return _P["einsum"](v, place, subscripts="bi,irc->brc"), 0


def embedding(prim, size, vals, dims, index):
    batched = _mine(index)
    if batched:
        index = _index_of(index, size)[0]
    elif type(index) is not BatchArray:      # (an outer vmap's index stays one: gathered there)
        index = np.asarray(index)
    if dims[0] is None:
        if not batched:
            return prim(vals[0], index=index), None
        return prim(vals[0], index=index), 0          # rows picked per example
    w = moved(vals[0], dims[0])
    rows = np.arange(_shape(w)[0]).reshape((-1,) + (1,) * (np.ndim(index) - batched))
    return _P["getitem"](w, index=(rows, index)), 0


_BATCHED_INDEX = {"embedding", "getitem"}


def losses(prim, size, vals, dims, reduction="mean"):
    """softmax_cross_entropy, crossEntropy: per-row losses of the stacked examples ("none"),
    then each example's own mean or sum."""
    nd = _example_nd(vals[:1], dims[:1])
    args = [None if v is None else _front(v, d, size) for v, d in zip(vals, dims)]
    rows = prim(*args, reduction="none")
    if reduction == "none":
        return rows, 0
    axes = tuple(range(1, nd))         # an example's rows: all but the class axis
    return (_P["mean"] if reduction == "mean" else _P["sum"])(rows, axis=axes, keepdims=False), 0


def frobenius(prim, size, vals, dims):
    v = moved(vals[0], dims[0])
    return _P["norm2"](v, axis=tuple(range(1, _ndim(v)))), 0


def folded(prim, size, vals, dims, **params):
    """conv2d and the pools on (N, C, H, W) examples with unbatched weights: the examples are
    folded into N, one call; (C, H, W) examples are an N of their own."""
    x, dx = vals[0], dims[0]
    if any(d is not None for d in dims[1:]):
        return loop(prim, size, vals, dims, **params)
    x = moved(x, dx)
    s = _shape(x)
    if len(s) == 4:
        return prim(x, *vals[1:], **params), 0
    params = dict(params)
    if "shape" in params:
        params["shape"] = (s[0] * s[1],) + tuple(params["shape"])[1:]
    out = prim(_P["reshape"](x, shape=(s[0] * s[1],) + s[2:]), *vals[1:], **params)
    return _P["reshape"](out, shape=s[:2] + _shape(out)[1:]), 0


def recurrent(prim, size, vals, dims, **params):
    """rnn_seq, lstm_seq, gru_seq (xp of (T, N, G), states of (N, H)) with unbatched weights:
    the examples folded into N, one sequence loop for all of them."""
    n_states = {"rnn_seq": 1, "lstm_seq": 2, "gru_seq": 1}[prim.name]
    if any(d is not None for d in dims[1 + n_states:]):
        return loop(prim, size, vals, dims, **params)
    xp = moved(vals[0], dims[0], 1) if dims[0] is not None else _P["broadcast_to"](
        _expand(vals[0], 1), shape=(_shape(vals[0])[0], size) + _shape(vals[0])[1:])
    t, b, n = _shape(xp)[:3]
    args = [_P["reshape"](xp, shape=(t, b * n) + _shape(xp)[3:])]
    for v, d in zip(vals[1:1 + n_states], dims[1:1 + n_states]):
        v = _front(v, d, size)
        args.append(_P["reshape"](v, shape=(b * n,) + _shape(v)[2:]))
    out = prim(*args, *vals[1 + n_states:], **params)
    s = _shape(out)
    return _P["reshape"](out, shape=s[:1] + (b, n) + s[2:]), 1


def loop(prim, size, vals, dims, **params):
    """The declared fallback: the primitive once per example, the results stacked (a Python
    loop over the examples: correct, not fast; check_rules() names every primitive using it)."""
    outs = []
    for i in range(size):
        args = [v if d is None else _P["getitem"](v, index=(slice(None),) * d + (i,))
                for v, d in zip(vals, dims)]
        outs.append(prim(*args, **params))
    return _P["stack"](*outs, axis=0), 0


# ----- scratch frames: a rule that decomposes into other primitives batches them at its own level --
class _Frame:
    """A vmap call: its level (deeper calls have higher levels), its size, its randomness."""
    _next = [0]

    def __init__(self, size, randomness="error"):
        _Frame._next[0] += 1
        self.level = _Frame._next[0]
        self.size = size
        self.randomness = randomness
        self.active = True

    @classmethod
    def scratch(cls, size):
        return cls(size)


def _unbox(out, frame):
    if type(out) is BatchArray and out.frame is frame:
        return out.val, out.bdim
    return out, None


# ----- NumPy functions without gradients, batched directly -------------------------------------
def _top(args):
    top = None
    for a in args:
        if type(a) is BatchArray and (top is None or a.frame.level > top.level):
            top = a.frame
    return top


def _ufunc_values(ufunc, inputs, kwargs):
    """An elementwise NumPy function with no gradient (a comparison, isfinite, sign, floor) or a
    call with keywords on values: broadcast as `elementwise`, computed on the vals."""
    top = _top(inputs)
    vals = [a.val if type(a) is BatchArray and a.frame is top else a for a in inputs]
    dims = [a.bdim if type(a) is BatchArray and a.frame is top else None for a in inputs]
    nd = _example_nd(vals, dims)
    args = [v if d is None else _expand(moved(v, d), nd - (_ndim(v) - 1)) for v, d in zip(vals, dims)]
    return BatchArray(ufunc(*args, **kwargs), 0, top)


def _arg_reduce(fun):
    def batched(a, axis=None, out=None, keepdims=False):
        if out is not None:
            raise TypeError(f"np.{fun.__name__}: out= is not supported under tt.vmap")
        if type(a) is not BatchArray:
            return fun(a, axis=axis, keepdims=keepdims)
        v = moved(a.val, a.bdim)
        if axis is None:
            v = _P["reshape"](v, shape=(_shape(v)[0], -1))
            axis, keep = 1, False
        else:
            axis, keep = _axes(axis, a.ndim), keepdims
        return BatchArray(fun(v, axis=axis, keepdims=keep), 0, a.frame)
    return batched


def _arg_along(fun):
    """argsort (and other index-valued functions along one axis that keep the shape)."""
    def batched(a, axis=-1, **kwargs):
        if type(a) is not BatchArray:
            return fun(a, axis=axis, **kwargs)
        v = moved(a.val, a.bdim)       # (a Tensor as it is: tt.compile sees the order computed)
        if axis is None:
            return BatchArray(fun(v.reshape(v.shape[0], -1), axis=1, **kwargs), 0, a.frame)
        return BatchArray(fun(v, axis=_axes(axis, a.ndim), **kwargs), 0, a.frame)
    return batched


def _bool_reduce(fun):
    def batched(a, axis=None, keepdims=False, **kwargs):
        if type(a) is not BatchArray:
            return fun(a, axis=axis, keepdims=keepdims, **kwargs)
        v = moved(a.val, a.bdim)
        return BatchArray(fun(v, axis=_axes(axis, a.ndim), keepdims=keepdims, **kwargs), 0, a.frame)
    return batched


def _like(fill):
    def batched(a, dtype=None, order="K", subok=True, shape=None, fill_value=None):
        shape = a.shape if shape is None else shape
        dtype = a.dtype if dtype is None else dtype
        value = fill if fill_value is None else fill_value
        return np.full(shape, value, dtype=dtype)      # the same for every example: unbatched
    return batched


_NUMPY_SPECIAL = {
    np.shape: lambda a: a.shape if type(a) is BatchArray else np.shape(a),
    np.ndim: lambda a: a.ndim if type(a) is BatchArray else np.ndim(a),
    np.size: lambda a, axis=None: (a.size if axis is None else a.shape[axis]) if type(a) is BatchArray
    else np.size(a, axis),
    np.result_type: lambda *a: np.result_type(*[x.dtype if type(x) is BatchArray else x for x in a]),
    np.zeros_like: _like(0), np.ones_like: _like(1), np.empty_like: _like(0),
    np.full_like: lambda a, fill_value, dtype=None, **k: _like(fill_value)(a, dtype=dtype),
    np.argmax: _arg_reduce(np.argmax), np.argmin: _arg_reduce(np.argmin), np.argsort: _arg_along(np.argsort),
    np.any: _bool_reduce(np.any), np.all: _bool_reduce(np.all),
    np.count_nonzero: lambda a, axis=None, keepdims=False: _bool_reduce(np.count_nonzero)(a, axis, keepdims),
}


# ----- the column: every built-in primitive's rule ----------------------------------------------
_ELEMENTWISE = """abs add arccos arccosh arcsin arcsinh arctan arctan2 arctanh astype beta betainc
betaln binary_cross_entropy clip clone cos cosh digamma div entr erf erfc erfcinv erfinv exp exp2
expm1 fmax fmin gamma gammainc gammaincc gammaln gelu hypot i0 i0e i1 i1e iv ive j0 j1 jv leaky_relu
log log10 log1p log2 log_ndtr logaddexp logaddexp2 logit maximum minimum mul ndtr ndtri neg norm_root
polygamma power reciprocal relu remainder rgamma sigmoid sin sinc sinh softplus sqrt square sub tan
tanh to_device where xlog1py xlogy y0 y1 yn""".split()
_RULES = {name: elementwise for name in _ELEMENTWISE}
_RULES.update({name: reduction for name in
               "sum mean max min prod logsumexp logsumexp_b var std norm2 softmax log_softmax flip "
               "prod_others".split()})
_RULES.update({
    "cumsum": one_axis, "cumprod": one_axis, "roll": roll, "reshape": reshape,
    "transpose": transpose, "broadcast_to": broadcast_to, "getitem": getitem,
    "index_adjoint": index_adjoint, "setitem": setitem, "concatenate": join, "stack": join,
    "pad": pad, "diag": diag, "tril": triangle, "triu": triangle, "matmul": matmul, "dot": dot,
    "linear": linear, "linear_t": linear, "einsum": einsum, "embedding": embedding,
    "softmax_cross_entropy": losses, "crossEntropy": losses, "frobeniusNorm": frobenius,
    "conv2d": folded, "max_pool2d": folded, "avg_pool2d": folded, "avg_unpool2d": folded,
    "conv2d_grad_input": folded, "vmatmul": _vmatmul_rule,
    "rnn_seq": recurrent, "lstm_seq": recurrent, "gru_seq": recurrent,
})
def solve(prim, size, vals, dims):
    """np.linalg.solve: a vector right-hand side (an example's b of one axis) becomes a column."""
    (a, b), (da, db) = vals, dims
    na, nb = _ndim(a) - (da is not None), _ndim(b) - (db is not None)
    if nb == 1:
        a = a if da is None else moved(a, da)
        b = _expand(_front(b, db, size), na - 2) if na > 2 else _front(b, db, size)
        b = _expand(b, 1, _ndim(b))
        out = prim(a, b)
        return _P["reshape"](out, shape=_shape(out)[:-1]), 0
    return leading(prim, size, vals, dims)


_RULES.update({name: leading for name in "inv det slogdet cholesky eigh svd expm".split()})
_RULES["solve"] = solve
# Declared loop fallbacks (no native rule yet): reported by check_rules().
_RULES.update({name: LOOP for name in
               "convolve_full convolve_valid sqrtm solve_triangular solve_sylvester "
               "max_unpool2d conv2d_grad_weight".split()})


def install():
    """Fill the op table's batching column for every built-in primitive registered so far."""
    for name, rule in _RULES.items():
        if name in _P:
            BATCHING.setdefault(name, rule)


def defbatch(prim, rule):
    """Give a primitive (a user's, say) its batching rule:
    rule(prim, size, vals, dims, **params) -> (result, batch axis or None)."""
    name = getattr(prim, "name", prim)
    if name not in _P:
        raise ValueError(f"defbatch: no primitive named {name!r}")
    BATCHING[name] = rule
    return prim


def rule_kind(name):
    """'native', or 'loop' for a primitive on the declared loop fallback (or with no rule)."""
    rule = BATCHING.get(name, LOOP)
    return "loop" if rule is LOOP else "native"

