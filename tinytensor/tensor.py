"""The Tensor: a NumPy array plus the one tape entry that produced it.

A Tensor made by an operation on Tensors that need gradients remembers that operation
(`_prim`), its inputs (`_inputs`, Tensors or constants), their values (`_values`) and its
static parameters (`_params`). That is the whole tape: every entry points only at its
inputs, so a graph is freed as soon as its output is no longer referenced.
Leaves are Tensors made by the user (`_prim is None`).
"""

import itertools
import weakref

import numpy as np

from . import backend

# Creation order. An entry is always created after its inputs, so sorting by `_id` gives the
# Wengert list (evaluation order); both sweeps rely on that.
_creation_order = itertools.count()
# The stamp of the last in-place write (mark_modified): the sweeps check the saved values only of
# entries recorded before it, so a training loop that updates after backward pays nothing.
_LAST_WRITE = [-1]
# The stamp of the last write into memory (mark_modified only; `t[i] = v` on a recorded tensor
# rebinds t to a new array and does not count): what tt.compile checks after recording.
_MEMORY_WRITE = [-1]


class Tensor:
    __slots__ = ("data", "grad", "requires_grad", "name",
                 "_prim", "_inputs", "_values", "_params", "_id", "_version", "__weakref__")

    # NumPy defers to Tensor in mixed expressions (`ndarray + Tensor`, `np.exp(Tensor)`),
    # see __array_ufunc__ below.
    __array_priority__ = 1000

    def __init__(self, data, requires_grad=False, dtype=None, name=None, device=None):
        if isinstance(data, Tensor):
            data = data.data
        if device is None and (type(data) is np.ndarray or not backend.is_array(data)):
            data = np.array(data, dtype=dtype)   # always a copy, as torch.tensor
        else:   # on `device`, or where data is (a CuPy array stays on the GPU)
            data = backend.array(data, dtype, device)
        if requires_grad and not np.issubdtype(data.dtype, np.inexact):
            raise TypeError(f"only floating-point tensors can require gradients; got dtype {data.dtype}")
        self.data = data
        self.grad = None
        self.requires_grad = bool(requires_grad)
        self.name = name
        self._prim = None
        self._inputs = None
        self._values = None
        self._params = None
        self._id = next(_creation_order)
        self._version = -1

    # ----- what it looks like -------------------------------------------------------------
    shape = property(lambda self: self.data.shape)
    ndim = property(lambda self: self.data.ndim)
    dtype = property(lambda self: self.data.dtype)
    size = property(lambda self: self.data.size)
    device = property(lambda self: backend.device_of(self.data), doc='"cpu" (NumPy) or "cuda" (CuPy)')

    def __len__(self):
        return len(self.data)

    def __repr__(self):
        body = np.array2string(backend.to_host(self.data), separator=", ", prefix="tensor(")
        extras = "" if type(self.data) is np.ndarray else f", device={self.device!r}"
        if self.data.dtype != np.float64:
            extras += f", dtype={self.data.dtype}"
        if self.requires_grad:
            extras += ", requires_grad=True"
        if self.name is not None:
            extras += f", name={self.name!r}"
        return f"tensor({body}{extras})"

    def numpy(self):
        """The value, an ndarray (shares memory): the explicit way off the tape."""
        if type(self.data) is not np.ndarray and backend.device_of(self.data) != "cpu":
            raise TypeError(f"numpy(): this tensor is on {self.device!r}; t.cpu().numpy() copies it to "
                            f"the host (t.data is the {self.device} array itself)")
        return self.data

    def item(self):
        return self.data.item()

    def detach(self):
        """The same value, cut from the tape (shares memory, as in PyTorch: an in-place
        operator on either one is a write to both, see mark_modified)."""
        out = Tensor.__new__(Tensor)
        _init_untracked(out, self.data)
        return out

    def zero_grad(self):
        self.grad = None

    @property
    def is_leaf(self):
        """True for Tensors made by the user and for any Tensor that needs no gradient (as PyTorch)."""
        return self._prim is None or not self.requires_grad

    def requires_grad_(self, requires_grad=True):
        """Set requires_grad in place and return self (as PyTorch): only on floating-point
        Tensors, and only a leaf can stop requiring gradients."""
        if requires_grad and not np.issubdtype(self.data.dtype, np.inexact):
            raise TypeError(f"only floating-point tensors can require gradients; got dtype "
                            f"{self.data.dtype} (convert first: t.astype(np.float64))")
        if not requires_grad and not self.is_leaf:
            raise RuntimeError("requires_grad_(False): only a leaf can stop requiring gradients; "
                               "this Tensor was computed on the tape. Use t.detach() for a copy "
                               "cut from the tape")
        if requires_grad and not self.requires_grad:
            self._prim = self._inputs = self._values = self._params = None   # a plain leaf now
        self.requires_grad = bool(requires_grad)
        return self

    def retain_grad(self):
        """Keep this recorded Tensor's gradient in `.grad` after backward(), accumulating as a
        leaf's does (a leaf keeps its gradient anyway)."""
        if not self.requires_grad:
            raise RuntimeError("retain_grad: this tensor does not require grad")
        fused = ops.FUSED_INTO_LOSS.get(id(self))
        if fused is not None and fused() is self:
            raise RuntimeError("retain_grad: a cross_entropy of this softmax output was already computed "
                               "from its logits (fused, for stability), so it gets no gradient of its "
                               "own; call p.retain_grad() before cross_entropy(p, y)")
        if not self.is_leaf:
            tape.RETAINED[self] = True

    def __array__(self, dtype=None, copy=None):
        # Implicit conversion (np.asarray, np.array([t1, t2]), SciPy functions) would drop the
        # gradient without a word: refused while it could be recorded.
        if self.requires_grad and tape.STATE.grad_enabled:
            raise TypeError(_IMPLICIT_CONVERSION.format(shape=self.shape, dtype=self.dtype) + _scipy_hint())
        if type(self.data) is not np.ndarray:
            self.numpy()    # raises for another device: never a silent copy to the host
        if dtype is not None and dtype != self.data.dtype:
            return self.data.astype(dtype)
        return self.data.copy() if copy else self.data

    def __format__(self, spec):
        """f"{loss:.4f}" formats a one-element Tensor as its number (as PyTorch)."""
        if not spec:
            return str(self)
        if self.data.size != 1:
            raise TypeError(f"format spec {spec!r} needs a one-element Tensor; this one has shape "
                            f"{self.shape} (format t.numpy() or its elements)")
        return format(self.data.item(), spec)

    def __bool__(self):
        return bool(self.data)

    def __float__(self):
        return float(self.data)

    def __int__(self):
        return int(self.data)

    __hash__ = object.__hash__   # identity, so Tensors can key the sweeps' dictionaries

    # ----- automatic differentiation on the tape ------------------------------------------
    def backward(self, grad=None, retain_graph=None, create_graph=False, *, gradient=None):
        """Reverse mode: accumulate d(self)/d(leaf) into `.grad` of every leaf that needs it.

        `grad` is the cotangent, an array of self's shape; it may be left out only when self is
        a scalar (then it is 1). Calling it twice on the same graph accumulates twice.
        PyTorch's spellings work: `gradient=` for `grad`, and `retain_graph` (the graph is
        always kept while `self` is referenced).
        """
        if gradient is not None:
            if grad is not None:
                raise TypeError("backward: pass the cotangent once, as grad or as gradient, not both")
            grad = gradient
        if create_graph:
            raise NotImplementedError("backward(create_graph=True) is not supported; for higher "
                                      "derivatives use the transforms: tt.grad(tt.grad(f)), tt.hvp, "
                                      "tt.jacobian(tt.grad(f))")
        tape.backward(self, grad)

    def jvp(self, tangents):
        """Forward mode along the tape: `tangents` maps input Tensors to arrays of their shapes.

        Returns d(self) (an array of self's shape); inputs not named have zero tangent.
        """
        return tape.forward_sweep(self, tangents)

    # ----- operators: each is one primitive from the op table (ops.py) --------------------
    def __add__(self, other): return ops.add(self, other)
    def __radd__(self, other): return ops.add(other, self)
    def __sub__(self, other): return ops.sub(self, other)
    def __rsub__(self, other): return ops.sub(other, self)
    def __mul__(self, other): return ops.mul(self, other)
    def __rmul__(self, other): return ops.mul(other, self)
    def __truediv__(self, other): return ops.div(self, other)
    def __rtruediv__(self, other): return ops.div(other, self)
    def __pow__(self, other): return ops.power(self, other)
    def __rpow__(self, other): return ops.power(other, self)
    def __mod__(self, other): return ops.PUBLIC["remainder"](self, other)    # ops_elementwise.py
    def __rmod__(self, other): return ops.PUBLIC["remainder"](other, self)
    def __matmul__(self, other): return ops.matmul(self, other)
    def __rmatmul__(self, other): return ops.matmul(other, self)
    def __neg__(self): return ops.neg(self)
    def __pos__(self): return self
    def __abs__(self): return ops.abs(self)
    def __getitem__(self, index): return ops.getitem(self, index=_plain_index(index))

    # ----- in-place operators (PyTorch's semantics, see _in_place) ---------------------------
    def __iadd__(self, other): return _in_place(self, other, ops.add, np.add, "+=")
    def __isub__(self, other): return _in_place(self, other, ops.sub, np.subtract, "-=")
    def __imul__(self, other): return _in_place(self, other, ops.mul, np.multiply, "*=")
    def __itruediv__(self, other): return _in_place(self, other, ops.div, np.divide, "/=")
    def __ipow__(self, other): return _in_place(self, other, ops.power, np.power, "**=")

    def __setitem__(self, index, value):
        """`t[idx] = v`: in place when nothing needs a gradient (or under no_grad); otherwise
        `t` becomes a new tape entry setitem(previous t, v)."""
        index = _plain_index(index)
        if not (tape.STATE.grad_enabled and (self.requires_grad or _needs_grad(value))):
            value = _value(value)
            try:
                self.data[index] = value
            except (TypeError, ValueError) as err:
                if not hasattr(value, "shape"):     # a list, maybe of Tensors: described, not converted
                    raise
                raise tape._same_kind(err, f"t[index] = v: t is {self.dtype} {self.shape}, v is "
                                           f"{value.dtype} {value.shape}: {err}") from None
            mark_modified(self)
            return
        _refuse_leaf(self, "t[index] = value")
        _record_setitem(self, index, value)

    # Comparisons give plain boolean arrays: they carry no gradient.
    def __lt__(self, other): return self.data < _value(other)
    def __le__(self, other): return self.data <= _value(other)
    def __gt__(self, other): return self.data > _value(other)
    def __ge__(self, other): return self.data >= _value(other)
    def __eq__(self, other): return self.data == _value(other)
    def __ne__(self, other): return self.data != _value(other)

    # ----- methods, as in NumPy / PyTorch (those with their own signature) --------------------
    @property
    def T(self):
        return ops.transpose(self)

    # Plus every method the op table declares (`method=` in ops.py): sum, mean, max, exp, ...

    def reshape(self, *shape):
        return ops.reshape(self, shape[0] if len(shape) == 1 else shape)

    def to(self, device=None, dtype=None):
        """This tensor on `device` ("cpu", "cuda") and/or in `dtype`, as in PyTorch: itself when
        nothing changes, else a copy that stays on the tape (gradients flow back across)."""
        if dtype is None and not _is_device_name(device):     # t.to(np.float32)
            device, dtype = None, device
        out = self
        if device is not None and backend.get_device(device) is not backend._device(self.data):
            out = ops._to_device(out, device=backend.get_device(device).name)
        if dtype is not None and np.dtype(dtype) != out.dtype:
            out = ops.astype(out, dtype)
        return out

    def cpu(self):
        return self.to("cpu")

    def cuda(self):
        return self.to("cuda")

    def transpose(self, *axes):
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
            axes = axes[0]
        return ops.transpose(self, axes or None)

    # ----- NumPy interoperability -----------------------------------------------------------
    # NumPy calls these when a Tensor meets a NumPy function. The op table maps NumPy's
    # functions to tinytensor's primitives, so `np.cos(t)` records `cos` on the tape. This is
    # what lets every VJP rule be written in plain NumPy and still be differentiated again
    # (the reverse sweep with create_graph=True calls the same rules with Tensors).
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        # A call with out= or other keywords, or a method such as np.add.at, is not recorded.
        plain = method == "__call__" and not kwargs
        return ops.numpy_dispatch(ufunc, inputs, kwargs, method, use_table=plain)

    def __array_function__(self, func, types, args, kwargs):
        return ops.numpy_dispatch(func, args, kwargs)


backend.WRAPPERS.append(Tensor)    # backend.namespace(t): the library of t.data


def _init_untracked(t, data):
    """Fill the slots of a fresh Tensor that is not on the tape."""
    t.data = data
    t.grad = None
    t.requires_grad = False
    t.name = None
    t._prim = None
    t._inputs = None
    t._values = None
    t._params = None
    t._id = next(_creation_order)
    t._version = -1


def mark_modified(t):
    """Record that tinytensor changed `t.data` in place (in-place operators, optimizer steps,
    load_state_dict). `_version` holds the creation stamp of the last such write, so a tape
    entry created before it (`entry._id < t._version`) saved a value that no longer exists."""
    t._version = stamp = _LAST_WRITE[0] = _MEMORY_WRITE[0] = next(_creation_order)
    # The memory may be shared (t.detach(), a view such as t[0] or t.T, or t a view of another
    # Tensor's array): the write is recorded against the array that owns the memory too.
    root = _memory_owner(t.data)
    entry = _WRITES.get(id(root))
    if entry is not None and entry[0]() is root:
        entry[1] = stamp
        return
    try:
        key = id(root)
        _WRITES[key] = [weakref.ref(root, lambda _, key=key: _WRITES.pop(key, None)), stamp]
    except TypeError:    # memory owned by an object with no weak references: t._version only
        pass


# id(array owning some memory) -> [weak reference to it, stamp of the last in-place write]
_WRITES = {}


def _memory_owner(array):
    while isinstance(array, np.ndarray) and array.base is not None:
        array = array.base
    return array


def written_after(array, stamp):
    """Whether tinytensor wrote in place into the memory of `array` after creation stamp `stamp`."""
    root = _memory_owner(array)
    entry = _WRITES.get(id(root))
    return entry is not None and entry[1] > stamp and entry[0]() is root


_IMPLICIT_CONVERSION = (
    "a Tensor that requires grad (shape {shape}, {dtype}) cannot be converted to a NumPy array "
    "implicitly while recording: its gradient would be lost without a word. This happens in "
    "np.asarray(t), np.array([t1, t2]), NumPy functions given lists of Tensors, and NumPy/SciPy "
    "functions with no tinytensor rule (they call asarray). Use t.detach() or t.numpy() for the "
    "value (t.item() for a number, e.g. losses to plot), tt.stack([...]) or tt.concatenate([...]) "
    "to combine Tensors, tinytensor operations "
    "(or a tt.primitive with its rules) for the computation, or tt.no_grad() around code that "
    "needs no gradient")


def _scipy_hint():
    """Where a SciPy function made the conversion: the tt.scipy function to use instead (or '')."""
    from .scipy.guidance import hint
    return hint(skip=3)


def _needs_grad(x):
    return isinstance(x, Tensor) and x.requires_grad


def _refuse_leaf(t, what):
    if t.requires_grad and t._prim is None:
        raise RuntimeError(
            f"{what}: a leaf Tensor that requires grad (shape {t.shape}) is being used in an "
            f"in-place operation while recording. Update parameters inside `with tt.no_grad():` "
            f"(e.g. `with tt.no_grad(): p -= lr * p.grad`), or write `t = t + v` (or work on "
            f"`t.clone()`) for a new Tensor")


def _in_place(t, other, op, ufunc, symbol):
    """`t += v` and friends, as PyTorch: in place on t.data when nothing needs a gradient or
    under no_grad; refused on a leaf that requires grad; otherwise the operation is recorded
    and the name rebound to the new Tensor (so `c += c + 1` keeps exact gradients)."""
    if not (tape.STATE.grad_enabled and (t.requires_grad or _needs_grad(other))):
        value = _value(other)
        try:
            ufunc(t.data, value, out=t.data)      # NumPy's same_kind casting, as `array += v`
        except (TypeError, ValueError) as err:
            raise tape._same_kind(err, f"t {symbol} v in place: t is {t.dtype} {t.shape}, v is "
                                       f"{np.asarray(value).dtype} {np.shape(value)}: {err}") from None
        mark_modified(t)
        return t
    _refuse_leaf(t, f"t {symbol} v")
    out = op(t, other)
    if out.shape != t.shape:
        raise ValueError(f"t {symbol} v: the result has shape {out.shape} but t has shape "
                         f"{t.shape}; an in-place operation cannot change the shape")
    if out.dtype != t.dtype:
        if not np.can_cast(out.dtype, t.dtype, "same_kind"):
            raise TypeError(f"t {symbol} v: cannot store a {out.dtype} result in t of dtype "
                            f"{t.dtype} (NumPy's same_kind casting rule)")
        out = ops.astype(out, t.dtype)
    if tape.RETAINED and tape.RETAINED.get(t):   # as PyTorch: t.retain_grad() holds for the new t
        tape.RETAINED[out] = True
    return out


def _record_setitem(t, index, value):
    """Turn `t` itself into the tape entry setitem(previous t, value): the previous t lives on
    in a fresh Tensor (`old`) that takes over its value and tape fields. Entries recorded
    before that used `t` would now reach the new entry: t is marked modified, so they raise
    at backward instead, except those inside `value` itself (`t[0] = t[1]`), rewired to `old`."""
    if not np.issubdtype(t.dtype, np.inexact):
        raise TypeError(f"t[index] = v: v requires grad but t has dtype {t.dtype}; only "
                        f"floating-point tensors carry gradients (make t a float tensor)")
    if getattr(t.data, "base", None) is not None:
        raise RuntimeError(
            f"t[index] = v: t (shape {t.shape}) is a view of another tensor's memory (such as y[i] or "
            f"y.T), and v requires grad: the write would be recorded on this view only, and y would stay "
            f"as it was (out[i][j] = v was silently lost). Index once, y[i, j] = v, or write into a "
            f"copy, row = y[i].clone()")
    old = _new_tensor(Tensor)
    for slot in ("data", "grad", "requires_grad", "name", "_prim", "_inputs", "_values",
                 "_params", "_id", "_version"):
        setattr(old, slot, getattr(t, slot))
    new = ops.setitem(old, old if value is t else value, index=index)   # may raise: t unchanged
    if isinstance(value, Tensor) and value.requires_grad and value._id > t._id:
        for node in tape._tape_of([value], t._id + 1):
            if node._prim is not None and any(a is t for a in node._inputs):
                node._inputs = tuple(old if a is t else a for a in node._inputs)
    # Not a write into memory (the new value is a copy): only entries that hold t itself break.
    t._version = _LAST_WRITE[0] = next(_creation_order)
    t.data, t.grad, t.requires_grad = new.data, None, True
    t._prim, t._inputs, t._values, t._params = new._prim, new._inputs, new._values, new._params
    t._id = next(_creation_order)        # after the stamp: t's own entry is not stale


_new_tensor = Tensor.__new__


def _value(x):
    return x.data if isinstance(x, Tensor) else x


def _is_device_name(x):
    return isinstance(x, backend.Device) or isinstance(x, str) and (
        x.split(":")[0] in ("cpu", "cuda") or x in backend._DEVICES)


def _plain_index(index):
    """Indices may hold Tensors or lists; the tape stores plain NumPy indices."""
    if isinstance(index, tuple):
        return tuple(_plain_index(i) for i in index)
    if isinstance(index, Tensor):
        return index.data
    if isinstance(index, list):
        return np.asarray(index)
    return index


# ----- creating tensors ----------------------------------------------------------------------
def tensor(data, requires_grad=False, dtype=None, name=None, device=None):
    """A Tensor from a scalar, nested list, ndarray or Tensor (copied).

    Python floats give float64; a float32 array stays float32; integers stay integers
    (and cannot require gradients). `device` ("cpu", "cuda"): where the copy goes; by default
    where `data` is (a CuPy array stays on the GPU; lists and NumPy arrays: the CPU).
    """
    return Tensor(data, requires_grad=requires_grad, dtype=dtype, name=name, device=device)


def _shape(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(shape)


def _library(device):
    return np if device is None else backend.get_device(device).xp


def zeros(*shape, dtype=None, requires_grad=False, device=None):
    return Tensor(_library(device).zeros(_shape(shape), dtype=dtype), requires_grad=requires_grad)


def ones(*shape, dtype=None, requires_grad=False, device=None):
    return Tensor(_library(device).ones(_shape(shape), dtype=dtype), requires_grad=requires_grad)


def randn(*shape, rng=None, dtype=None, requires_grad=False, device=None):
    """Standard normal samples; `rng` is an np.random.Generator, a seed, or None. They are drawn
    on the CPU, so a seed gives the same numbers on every device."""
    values = np.random.default_rng(rng).standard_normal(_shape(shape))
    return Tensor(values, requires_grad=requires_grad, dtype=dtype, device=device)


# ----- more creation helpers, as NumPy's (dtype and values follow NumPy) ------------------------
def zeros_like(x, dtype=None, requires_grad=False, device=None):
    """Zeros of the shape and dtype of `x` (a Tensor, an array or a list), as np.zeros_like,
    on the device of `x` unless `device` is given."""
    return Tensor(np.zeros_like(_value(x), dtype=dtype), requires_grad=requires_grad, device=device)


def ones_like(x, dtype=None, requires_grad=False, device=None):
    """Ones of the shape and dtype of `x`, as np.ones_like, on the device of `x` unless `device`."""
    return Tensor(np.ones_like(_value(x), dtype=dtype), requires_grad=requires_grad, device=device)


def full(shape, fill_value, dtype=None, requires_grad=False, device=None):
    """`fill_value` everywhere, as np.full (an int fill gives ints, a float fill float64)."""
    return Tensor(_library(device).full(shape, _value(fill_value), dtype=dtype), requires_grad=requires_grad)


def arange(start, stop=None, step=None, dtype=None, requires_grad=False, device=None):
    """Evenly spaced values in [start, stop), as np.arange: integers give integers."""
    values = np.arange(start, stop, step, dtype=dtype)
    return Tensor(values, requires_grad=requires_grad, device=device)


def eye(N, M=None, k=0, dtype=None, requires_grad=False, device=None):
    """Ones on the k-th diagonal of an N x M matrix (float64 unless `dtype`), as np.eye."""
    values = _library(device).eye(N, M, k, dtype=float if dtype is None else dtype)
    return Tensor(values, requires_grad=requires_grad)


def rand(*shape, rng=None, dtype=None, requires_grad=False, device=None):
    """Uniform samples in [0, 1); `rng` is an np.random.Generator, a seed, or None. Drawn on the
    CPU, so a seed gives the same numbers on every device."""
    values = np.random.default_rng(rng).random(_shape(shape))
    return Tensor(values, requires_grad=requires_grad, dtype=dtype, device=device)


# The operators and sweeps above live in modules that import Tensor: imported last.
from . import ops, tape  # noqa: E402
