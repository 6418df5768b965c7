"""The Tensor: a NumPy array plus the one tape entry that produced it.

A Tensor made by an operation on Tensors that need gradients remembers that operation
(`_prim`), its inputs (`_inputs`, Tensors or constants), their values (`_values`) and its
static parameters (`_params`). That is the whole tape: every entry points only at its
inputs, so a graph is freed as soon as its output is no longer referenced.
Leaves are Tensors made by the user (`_prim is None`).
"""

import itertools
import math
import numbers
import operator

import numpy as np

from . import backend
from .hooks import register_hook as _register_hook
from .state import SHARED, STATE, constant_read
from .torch_interop import host_array, is_torch_tensor, numpy_dtype
from .weakid import IdentityWeakMap

# Creation order. An entry is always created after its inputs, so sorting by `_id` gives the
# Wengert list (evaluation order); both sweeps rely on that.
_creation_order = itertools.count()
_next_id = _creation_order.__next__
# The stamp of the last in-place write (mark_modified): the sweeps check the saved values only of
# entries recorded before it, so a training loop that updates after backward pays nothing.
_LAST_WRITE = [-1]
# Called with a Tensor about to be iterated (ops_torch: the `_, i = t.max(1)` habit warns).
_ITER_CHECKS = []
# The stamp of the last write into memory (mark_modified only; `t[i] = v` on a recorded tensor
# rebinds t to a new array and does not count): what tt.compile checks after recording.
_MEMORY_WRITE = [-1]


_new_tensor = object.__new__        # a Tensor's slots unfilled: _make fills them


class Tensor:
    """An array on the tape: a NumPy (or CuPy) value, its gradient, and the entry that made it.

    Make one with `tt.tensor` (or `zeros`, `ones`, `randn`, ...). Operators (`+ - * / ** @`,
    indexing) and NumPy's functions on a Tensor record entries on the tape when it requires grad.

    Attributes
    ----------
    data : ndarray
        The value.
    grad : ndarray or None
        The gradient accumulated by `backward()`, of the Tensor's shape and dtype.
    requires_grad : bool
        Whether operations on it are recorded.

    Examples
    --------
    >>> x = tt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    >>> y = (x * x).sum()
    >>> y.backward()
    >>> x.grad
    array([2., 4., 6.])
    """
    __slots__ = ("data", "grad", "requires_grad", "name",
                 "_prim", "_inputs", "_values", "_params", "_id", "_version", "__weakref__")

    # NumPy defers to Tensor in mixed expressions (`ndarray + Tensor`, `np.exp(Tensor)`),
    # see __array_ufunc__ below.
    __array_priority__ = 1000

    def __init__(self, data, requires_grad=False, dtype=None, name=None, device=None):
        if isinstance(data, Tensor):
            data = data.data
        elif is_torch_tensor(data):          # a torch tensor handed over: converted once (a copy)
            data = host_array(data)
        dtype = numpy_dtype(dtype)
        source = data
        if device is None and (type(data) is np.ndarray or not backend.is_array(data)):
            data = np.array(data, dtype=dtype)   # always a copy, as torch.tensor
        else:   # on `device`, or where data is (a CuPy array stays on the GPU)
            data = backend.array(data, dtype, device)
        if requires_grad and data.dtype.kind != "f":
            raise TypeError(_not_float(data.dtype))
        _make(data, None, None, None, None, bool(requires_grad), name, None, self)
        if not SHARED.quiet and STATE.recorder is not None and isinstance(source, np.ndarray):
            STATE.recorder.copied(self, source)  # tt.compile: the copy is a line of the program

    # ----- what it looks like -------------------------------------------------------------
    shape = property(lambda self: self.data.shape)
    ndim = property(lambda self: self.data.ndim)
    dtype = property(lambda self: self.data.dtype)
    size = property(lambda self: _Size(self.data.size, self.data.shape),
                    doc="NumPy's element count (an int), callable as PyTorch's t.size() / t.size(d)")
    device = property(lambda self: backend.device_of(self.data), doc='"cpu" (NumPy) or "cuda" (CuPy)')

    def __len__(self):
        return len(self.data)

    def __iter__(self):
        # As NumPy's: the rows. Iterating a positional t.max(1) warns (a PyTorch habit, ops_torch.py).
        if self.data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        for check in _ITER_CHECKS:
            check(self)
        return (self[i] for i in range(len(self.data)))

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

    def item(self, *args):
        """The value as a Python number (NumPy's a.item(*args): one element by flat index or
        indices; PyTorch's item() of a one-element Tensor)."""
        return self.data.item(*args)

    def __deepcopy__(self, memo):
        """A new leaf with a copy of the value (and of .grad), as PyTorch's deepcopy of a leaf:
        copy.deepcopy(module) clones layers (nn.TransformerEncoder). A new identity: the copy is
        a different node of any later graph."""
        if self._prim is not None and self.requires_grad:
            raise RuntimeError("deepcopy: only leaf Tensors (made by the user, or not requiring grad) "
                               "can be copied; copy t.detach() for the value")
        out = _make(backend.copy(self.data), requires_grad=self.requires_grad, name=self.name,
                    cls=type(self))
        out.grad = None if self.grad is None else backend.copy(self.grad)
        memo[id(self)] = out
        return out

    def detach(self):
        """The same value, cut from the tape (shares memory, as in PyTorch: an in-place
        operator on either one is a write to both, see mark_modified)."""
        return _make(self.data)

    def zero_grad(self):
        self.grad = None

    register_hook = _register_hook     # hooks.py: the hooks live there, keyed by the Tensor

    @property
    def is_leaf(self):
        """True for Tensors made by the user and for any Tensor that needs no gradient (as PyTorch)."""
        return self._prim is None or not self.requires_grad

    def requires_grad_(self, requires_grad=True):
        """Set requires_grad in place and return self (as PyTorch): only on floating-point
        Tensors, and only a leaf can stop requiring gradients."""
        if requires_grad and self.data.dtype.kind != "f":
            raise TypeError(_not_float(self.data.dtype))
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
        from .hooks import NO_HOOKS
        refused = NO_HOOKS.get(self)
        if refused is not None:          # (a compiled call's result another result is computed from)
            raise RuntimeError(refused.format("retain_grad()"))
        if ops.fused_into_loss(self):
            raise RuntimeError("retain_grad: a cross_entropy of this softmax output was already computed "
                               "from its logits (fused, for stability), so it gets no gradient of its "
                               "own; call p.retain_grad() before cross_entropy(p, y)")
        if not self.is_leaf:
            tape.RETAINED[self] = True

    def __array__(self, dtype=None, copy=None):
        # Implicit conversion (np.asarray, np.array([t1, t2]), SciPy functions) would drop the
        # gradient without a word: refused while it could be recorded.
        if self.requires_grad and tape.STATE.grad_enabled and not _consumed(self):
            raise _leaving_tape(self, "a NumPy array implicitly", _WHERE_ARRAY)
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

    # A Python number leaves the tape only on request (t.item(), t.detach()): while recording, a
    # Tensor whose gradient could still be taken refuses float(), int(), complex() and index(),
    # and so math.*, np.float64(t) and `ndarray[i] = t`, which call them (README "Guarantees").
    def __float__(self):
        if self.requires_grad:
            _refuse_number(self, "float(t)")
        return float(self.data)

    def __int__(self):
        if self.requires_grad:
            _refuse_number(self, "int(t)")
        return int(self.data)

    def __complex__(self):
        if self.requires_grad:
            _refuse_number(self, "complex(t)")
        return complex(self.data)

    def __index__(self):
        """An integer Tensor of one element as a Python int (`range(t)`, `seq[t]`), as NumPy."""
        if self.requires_grad:
            _refuse_number(self, "operator.index(t)")
        return operator.index(self.data)

    __hash__ = object.__hash__   # identity, so Tensors can key the sweeps' dictionaries

    # ----- automatic differentiation on the tape ------------------------------------------
    def backward(self, grad=None, retain_graph=None, create_graph=False, *, gradient=None):
        """Reverse mode: accumulate d(self)/d(leaf) into `.grad` of every leaf that needs it.

        Calling it twice on the same graph accumulates twice. PyTorch's spellings work:
        `gradient=` for `grad`, and `retain_graph` (the graph is always kept while `self` is
        referenced).

        Parameters
        ----------
        grad : ndarray, optional
            The cotangent, an array of self's shape; it may be left out only when self is a
            scalar (then it is 1).

        Raises
        ------
        RuntimeError
            `grad` left out for a non-scalar, or a value saved on the tape was changed in place
            since (the message names the tape entry).

        Examples
        --------
        >>> x = tt.tensor([1.0, 2.0], requires_grad=True)
        >>> (x * x).sum().backward()
        >>> x.grad
        array([2., 4.])
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
        _mark_consumed(self)     # float(loss) after loss.backward() is a number to log

    def jvp(self, tangents):
        """Forward mode along the tape: the derivative of self along the given tangents.

        Parameters
        ----------
        tangents : dict
            Input Tensor to an array of its shape; inputs not named have zero tangent.

        Returns
        -------
        ndarray
            d(self), of self's shape.

        Examples
        --------
        >>> x = tt.tensor([1.0, 2.0], requires_grad=True)
        >>> y = x * x
        >>> y.jvp({x: np.array([1.0, 0.0])})
        array([2., 0.])
        """
        return tape.forward_sweep(self, tangents)

    # ----- operators: each is one primitive from the op table (ops/) -----------------------
    # + - * / ** are made by _arithmetic below (once ops is loaded): a NumPy scalar is weak there.
    def __mod__(self, other): return ops.PUBLIC["remainder"](self, other)    # ops/elementwise.py
    def __rmod__(self, other): return ops.PUBLIC["remainder"](other, self)
    def __matmul__(self, other): return ops.matmul(self, other)
    def __rmatmul__(self, other): return ops.matmul(other, self)
    def __neg__(self): return ops.neg(self)
    def __pos__(self):
        if self.dtype == bool:           # NumPy's error (np.positive has no bool loop), as PyTorch
            np.positive(self.data)       # refuses `+` of a bool tensor too
        return self

    def __trunc__(self): return math.trunc(self.item())     # math.trunc(t), as of a NumPy scalar
    def __floor__(self): return math.floor(self.item())
    def __ceil__(self): return math.ceil(self.item())
    def __abs__(self): return ops.abs(self)
    def __getitem__(self, index): return ops.getitem(self, index=_plain_index(index))

    # ----- in-place operators (PyTorch's semantics, see _in_place) ---------------------------
    def __iadd__(self, other): return _in_place(self, other, ops.add, np.add, "+=")
    def __isub__(self, other): return _in_place(self, other, ops.sub, np.subtract, "-=")
    def __imul__(self, other): return _in_place(self, other, ops.mul, np.multiply, "*=")
    def __itruediv__(self, other): return _in_place(self, other, ops.div, np.divide, "/=")
    def __ipow__(self, other): return _in_place(self, other, ops.power, np.power, "**=")
    def __imatmul__(self, other): return _in_place(self, other, ops.matmul, np.matmul, "@=")

    def __setitem__(self, index, value):
        """`t[idx] = v`: in place when nothing needs a gradient (or under no_grad); otherwise
        `t` becomes a new tape entry setitem(previous t, v)."""
        if STATE.batch and hasattr(value, "bdim") and hasattr(value, "frame"):   # tt.vmap's BatchArray
            err = TypeError("t[index] = v with v batched by tt.vmap and t not: an in-place write "
                            "cannot make t hold one value per example; build the result from the "
                            "batched values instead (tt.where, tt.stack, tt.concatenate, tt.pad)")
            err._not_batchable = True     # tt.jacobian then takes its basis one vector at a time
            raise err
        index = _plain_index(index)
        if not (tape.STATE.grad_enabled and (self.requires_grad or _needs_grad(value))):
            recorder = STATE.recorder      # tt.compile: a write of a traced value is recorded
            if recorder is not None and recorder.setitem(self, index, value):
                return
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

    # Comparisons give plain boolean arrays: they carry no gradient. While tt.compile records,
    # the recorder notes the mask (the program recomputes it on every call).
    def __lt__(self, other): return _noted(operator.lt, self, other, self.data < _value(other))
    def __le__(self, other): return _noted(operator.le, self, other, self.data <= _value(other))
    def __gt__(self, other): return _noted(operator.gt, self, other, self.data > _value(other))
    def __ge__(self, other): return _noted(operator.ge, self, other, self.data >= _value(other))
    def __eq__(self, other): return _noted(operator.eq, self, other, self.data == _value(other))
    def __ne__(self, other): return _noted(operator.ne, self, other, self.data != _value(other))

    # ----- methods, as in NumPy / PyTorch (those with their own signature) --------------------
    @property
    def T(self):
        return ops.transpose(self)

    # Plus every method the op table declares (`method=` in ops/): sum, mean, max, exp, ...

    def reshape(self, *shape):
        return ops.reshape(self, shape[0] if len(shape) == 1 else shape)

    def to(self, device=None, dtype=None):
        """This tensor on `device` ("cpu", "cuda") and/or in `dtype`, as in PyTorch: itself when
        nothing changes, else a copy that stays on the tape (gradients flow back across)."""
        if dtype is None and not _is_device_name(device):     # t.to(np.float32), t.to(torch.float32)
            device, dtype = None, device
        dtype = numpy_dtype(dtype)
        out = self
        if device is not None and backend.get_device(device) is not backend._device(self.data):
            out = ops._to_device(out, device=backend.get_device(device).name)
        if dtype is not None and dtype != out.dtype:
            out = ops.astype(out, dtype)
        return out

    def cpu(self):
        return self.to("cpu")

    def cuda(self):
        return self.to("cuda")

    def transpose(self, *axes, dim0=None, dim1=None):
        """NumPy's t.transpose(axes) / t.transpose(*axes); PyTorch's t.transpose(dim0, dim1) (two
        axes swapped) where NumPy's meaning differs: on 3 or more axes (NumPy would raise), or with
        dim0=/dim1=. On a 2-D Tensor t.transpose(0, 1) is NumPy's identity but PyTorch's swap, so it
        raises, naming both spellings."""
        if dim0 is not None or dim1 is not None:
            return ops.swapaxes(self, dim0, dim1)
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
            axes = axes[0]
        elif len(axes) == 2 and all(isinstance(a, numbers.Integral) for a in axes):
            if self.data.ndim > 2:        # NumPy has no meaning for two axes here: PyTorch's swap
                return ops.swapaxes(self, axes[0], axes[1])
            if self.data.ndim == 2 and axes[0] % 2 == 0 and axes[1] % 2 == 1:
                raise ValueError(f"transpose{tuple(axes)} on a 2-D Tensor is NumPy's identity but PyTorch's "
                                 f"swap of the two axes: write t.T or t.transpose() (or t.swapaxes(0, 1), "
                                 f"t.transpose(dim0=0, dim1=1)) for the swap, and drop the call for the "
                                 f"identity")
        return ops.transpose(self, axes or None)

    # ----- NumPy interoperability -----------------------------------------------------------
    # NumPy calls these when a Tensor meets a NumPy function. The op table maps NumPy's
    # functions to tinytensor's primitives, so `np.cos(t)` records `cos` on the tape. This is
    # what lets every VJP rule be written in plain NumPy and still be differentiated again
    # (the reverse sweep with create_graph=True calls the same rules with Tensors).
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        # A call with out= or other keywords, or a method such as np.add.at, is not recorded.
        plain = method == "__call__" and not kwargs
        if len(inputs) == 2 and ufunc in _ARITHMETIC:   # np.float64(2) * t: the scalar is weak
            inputs = (_weak(inputs[0]), _weak(inputs[1]))
        return ops.numpy_dispatch(ufunc, inputs, kwargs, method, use_table=plain)

    def __array_function__(self, func, types, args, kwargs):
        return ops.numpy_dispatch(func, args, kwargs)


backend.WRAPPERS.append(Tensor)    # backend.namespace(t): the library of t.data


def _make(data, prim=None, inputs=None, values=None, params=None, requires_grad=False, name=None,
          cls=None, into=None):
    """The one writer of a Tensor's slots (as micrograd's `Value(data, _children, _op)`: every
    node, leaf or result, is made here). `data` is used as it is (no copy); a tape entry gives
    `prim` with its `inputs` (as passed), their raw `values` and the static `params`, and
    requires_grad=True. `cls` makes a subclass (tt.compile's traced Tensors); `into` fills an
    object already allocated (Tensor.__init__, nn.Parameter). Returns the Tensor."""
    t = _new_tensor(cls or Tensor) if into is None else into
    t.data = data
    t.grad = None
    t.requires_grad = requires_grad
    t.name = name
    t._prim = prim
    t._inputs = inputs
    t._values = values
    t._params = params
    t._id = _next_id()
    t._version = -1
    return t


# Every slot but __weakref__, in declaration order: what a shallow copy of a Tensor copies.
_SLOTS = Tensor.__slots__[:-1]


def mark_modified(t):
    """Record that tinytensor changed `t.data` in place (in-place operators, optimizer steps,
    load_state_dict). `_version` holds the creation stamp of the last such write, so a tape
    entry created before it (`entry._id < t._version`) saved a value that no longer exists."""
    t._version = stamp = _LAST_WRITE[0] = _MEMORY_WRITE[0] = next(_creation_order)
    STATE.memory_write = stamp
    # The memory may be shared (t.detach(), a view such as t[0] or t.T, or t a view of another
    # Tensor's array): the write is recorded against the array that owns the memory too.
    try:
        _WRITES[_memory_owner(t.data)] = stamp
    except TypeError:    # memory owned by an object with no weak references: t._version only
        pass


_WRITES = IdentityWeakMap()   # array owning some memory -> the stamp of its last in-place write


def _memory_owner(array):
    while isinstance(array, np.ndarray) and array.base is not None:
        array = array.base
    return array


def written_after(array, stamp):
    """Whether tinytensor wrote in place into the memory of `array` after creation stamp `stamp`."""
    return _WRITES.get(_memory_owner(array), -1) > stamp


_IMPLICIT_CONVERSION = (
    "a Tensor that requires grad (shape {shape}, {dtype}) cannot be converted to {target} "
    "while recording: its gradient would be lost without a word. This happens in {where}. "
    "Use t.detach() or t.numpy() for the value (t.item() for a number, e.g. losses to plot), "
    "{spelling}tt.stack([...]) or tt.concatenate([...]) to combine Tensors, tinytensor operations "
    "(or a tt.primitive with its rules) for the computation, or tt.no_grad() around code that "
    "needs no gradient")
_WHERE_ARRAY = ("np.asarray(t), np.array([t1, t2]), np.float64(t), arr[0:2] = t, NumPy functions "
                "given lists of Tensors, and NumPy/SciPy functions with no tinytensor rule (they "
                "call asarray)")
_WHERE_NUMBER = ("float(t), int(t), complex(t), operator.index(t), math.exp(t) and the other math "
                 "functions, np.float64(t), and writing a Tensor into a NumPy array (arr[i] = t, "
                 "arr[i, 0] = y[0])")
_SPELLING_NUMBER = ("tt.exp(t), tt.sin(t), ... for math.exp, math.sin, ...; a Tensor to fill "
                    "instead of a NumPy array (ys = tt.zeros((n, 2)); ys[i, 0] = y[0] records the "
                    "write) or tt.stack([...]) of the rows; ")


def _leaving_tape(t, target, where, spelling=""):
    """The one TypeError for a value leaving the tape without a word (see __array__, __float__)."""
    return TypeError(_IMPLICIT_CONVERSION.format(shape=t.shape, dtype=t.dtype, target=target,
                                                 where=where, spelling=spelling) + _scipy_hint())


def _refuse_number(t, how):
    """Raise for float(t) & co. while t's gradient could still be taken: recording is on and t is
    not the output of a finished backward() (float(loss) after loss.backward() is a number to log;
    under tt.no_grad() and on a Tensor that needs no gradient nothing is refused either)."""
    if tape.STATE.grad_enabled and not _consumed(t):
        raise _leaving_tape(t, f"a Python number by {how}", _WHERE_NUMBER, _SPELLING_NUMBER) from None


# Outputs of a finished backward(): their graph was consumed, so a number taken from them loses
# nothing. Marked by Tensor.backward, read only by the conversions above: nothing on the hot path.
# A recorded `t[i] = v` makes t a new tape entry again (unmarked).
_BACKWARD_DONE = IdentityWeakMap()


def _mark_consumed(t):
    _BACKWARD_DONE[t] = True


def _consumed(t):
    # or a result of a tape entry that says its backward() already ran (a compiled whole training
    # step's loss: taped._Spent, one entry for every call's loss, no mark per call)
    return t in _BACKWARD_DONE or getattr(t._prim, "backward_done", False)


def _scipy_hint():
    """Where a SciPy function made the conversion: the tt.scipy function to use instead (or '')."""
    from .guidance import hint
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
        if STATE.batch and hasattr(other, "bdim") and hasattr(other, "frame"):   # tt.vmap's BatchArray
            err = TypeError(f"t {symbol} v with v batched by tt.vmap and t not (a running statistic "
                            f"updated in place): t cannot hold one value per example; compute it "
                            f"outside vmap, or from the batched values (t {symbol[0]} v)")
            err._not_batchable = True     # tt.jacobian then takes its basis one vector at a time
            raise err
        recorder = STATE.recorder          # tt.compile: recorded, the name rebound to the result
        if recorder is not None:
            out = recorder.in_place(t, other, op, ufunc)
            if out is not None:
                return out
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
    old = _new_tensor(Tensor)           # t as it was, for the entries that saved it
    for slot in _SLOTS:
        setattr(old, slot, getattr(t, slot))
    new = ops.setitem(old, old if value is t else value, index=index)   # may raise: t unchanged
    if isinstance(value, Tensor) and value.requires_grad and value._id > t._id:
        for node in tape._tape_of([value], t._id + 1):
            if node._prim is not None and any(a is t for a in node._inputs):
                node._inputs = tuple(old if a is t else a for a in node._inputs)
    # Not a write into memory (the new value is a copy): only entries that hold t itself break.
    stamp = _LAST_WRITE[0] = next(_creation_order)
    _make(new.data, new._prim, new._inputs, new._values, new._params, True, t.name, into=t)
    t._version = stamp                   # t._id is after the stamp: t's own entry is not stale
    _BACKWARD_DONE.pop(t)                # a live graph again: float(t) refused until backward()



def _value(x):
    return x.data if isinstance(x, Tensor) else x


def _noted(op, t, other, value):
    """A comparison's mask, noted by tt.compile's recorder while it records."""
    if SHARED.quiet:
        return value
    recorder = STATE.recorder
    return value if recorder is None else recorder.compared(op, t, other, value)


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
    if isinstance(index, slice) and any(isinstance(b, Tensor) for b in (index.start, index.stop, index.step)):
        # x[o[0]:o[1]]: the bounds as Python ints, read here (tt.compile: a guard of the program)
        return slice(*(operator.index(b) if isinstance(b, Tensor) else b
                       for b in (index.start, index.stop, index.step)))
    return host_array(index)       # a torch tensor of indices: its values


# ----- creating tensors ----------------------------------------------------------------------
def _not_float(dtype):
    """Why a Tensor of `dtype` cannot require gradients (issue 20: complex is refused, not guessed)."""
    if dtype.kind == "c":
        return (f"complex tensors cannot require gradients (got dtype {dtype}): tinytensor does not "
                f"differentiate complex functions (no conjugate convention is implemented); "
                f"differentiate the real and imaginary parts as two float arrays (z.real, z.imag)")
    return (f"only floating-point tensors can require gradients; got dtype {dtype} (convert "
            f"first: t.astype(np.float64))")


def tensor(data, requires_grad=False, dtype=None, name=None, device=None):
    """A Tensor from a scalar, nested list, ndarray or Tensor (copied).

    Parameters
    ----------
    data : scalar, nested list, ndarray or Tensor
        The value. Python floats give float64; a float32 array stays float32; integers stay
        integers (and cannot require gradients).
    requires_grad : bool, optional
        Record the operations on it, so that `backward()` fills its `.grad`.
    dtype : dtype, optional
        Cast to this dtype.
    name : str, optional
        The label `wengert_list`, `evaluation_trace` and `to_dot` show.
    device : str, optional
        "cpu" or "cuda": where the copy goes; by default where `data` is (a CuPy array stays on
        the GPU; lists and NumPy arrays: the CPU).

    Returns
    -------
    Tensor

    Raises
    ------
    TypeError
        `requires_grad=True` with integer or complex data.

    Examples
    --------
    >>> x = tt.tensor([1.0, 2.0], requires_grad=True)
    >>> x
    tensor([1., 2.], requires_grad=True)
    >>> tt.tensor([[1, 2]]).dtype
    dtype('int64')
    """
    return Tensor(data, requires_grad=requires_grad, dtype=dtype, name=name, device=device)


def _shape(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(shape)


def _library(device):
    return np if device is None else backend.get_device(device).xp


def zeros(*shape, dtype=None, requires_grad=False, device=None):
    """A Tensor of zeros of the given shape (as `np.zeros`; float64 unless `dtype=`).

    Examples
    --------
    >>> tt.zeros(2, 3).shape
    (2, 3)
    >>> tt.zeros((2,), requires_grad=True)
    tensor([0., 0.], requires_grad=True)
    """
    return Tensor(_library(device).zeros(_shape(shape), dtype=dtype), requires_grad=requires_grad)


def ones(*shape, dtype=None, requires_grad=False, device=None):
    """A Tensor of ones of the given shape (as `np.ones`; float64 unless `dtype=`).

    Examples
    --------
    >>> tt.ones(3, dtype=np.float32)
    tensor([1., 1., 1.], dtype=float32)
    """
    return Tensor(_library(device).ones(_shape(shape), dtype=dtype), requires_grad=requires_grad)


def randn(*shape, rng=None, dtype=None, requires_grad=False, device=None):
    """Standard normal samples; `rng` is an np.random.Generator, a seed, or None (the global
    generator, tt.manual_seed). They are drawn
    on the CPU, so a seed gives the same numbers on every device.

    Examples
    --------
    >>> tt.randn(2, 3, rng=0).shape
    (2, 3)
    """
    values = draws.draw(draws.standard_normal, rng, _shape(shape))   # tt.compile repeats it
    return _drawn(Tensor(values, requires_grad=requires_grad, dtype=dtype, device=device), values)


# ----- more creation helpers, as NumPy's (dtype and values follow NumPy) ------------------------
def zeros_like(x, dtype=None, requires_grad=False, device=None):
    """Zeros of the shape and dtype of `x` (a Tensor, an array or a list), as np.zeros_like,
    on the device of `x` unless `device` is given.

    Examples
    --------
    >>> tt.zeros_like(tt.tensor([[1.0, 2.0]]))
    tensor([[0., 0.]])
    """
    return Tensor(np.zeros_like(_value(x), dtype=dtype), requires_grad=requires_grad, device=device)


def ones_like(x, dtype=None, requires_grad=False, device=None):
    """Ones of the shape and dtype of `x`, as np.ones_like, on the device of `x` unless `device`.

    Examples
    --------
    >>> tt.ones_like(np.zeros(2, dtype=np.float32))
    tensor([1., 1.], dtype=float32)
    """
    return Tensor(np.ones_like(_value(x), dtype=dtype), requires_grad=requires_grad, device=device)


def full(shape, fill_value, dtype=None, requires_grad=False, device=None):
    """`fill_value` everywhere, as np.full (an int fill gives ints, a float fill float64).
    A fill value that requires grad is recorded: its gradient is the sum of the cotangent.

    Examples
    --------
    >>> tt.full((2,), 7.0)
    tensor([7., 7.])
    """
    if _needs_grad(fill_value) and tape.STATE.grad_enabled:
        return _recorded_fill(shape, fill_value, dtype, "full")
    return Tensor(_library(device).full(shape, _fill(fill_value, "full"), dtype=dtype),
                  requires_grad=requires_grad)


def _fill(value, name):
    """A fill value that carries no gradient, as NumPy takes it: a Tensor's value (under
    tt.compile a guard on it, not a number frozen at the recording)."""
    return constant_read(value, f"{name}'s fill value") if isinstance(value, Tensor) else _value(value)


def full_like(x, fill_value, dtype=None, requires_grad=False, device=None):
    """`fill_value` in the shape and dtype of `x`, as np.full_like (a Tensor). A fill value that
    requires grad is recorded: its gradient is the sum of the cotangent.

    Examples
    --------
    >>> tt.full_like(tt.tensor([1.0, 2.0]), 7.0)
    tensor([7., 7.])
    """
    value = _value(x)
    if _needs_grad(fill_value) and tape.STATE.grad_enabled:
        return _recorded_fill(np.shape(value), fill_value, value.dtype if dtype is None else dtype,
                              "full_like")
    return Tensor(np.full_like(value, _fill(fill_value, "full_like"), dtype=dtype),
                  requires_grad=requires_grad, device=device)


def _recorded_fill(shape, fill, dtype, name):
    """full(shape, fill) for a fill value on the tape: fill * ones, so d/d fill = sum(cotangent)."""
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    dtype = fill.dtype if dtype is None else np.dtype(dtype)
    if dtype.kind not in "fc":
        raise TypeError(f"{name}: the fill value requires grad but the result's dtype would be {dtype}; "
                        f"only floating-point tensors carry gradients (pass dtype=np.float64, or "
                        f"fill_value.detach() for the value alone)")
    out = ops.mul(fill, backend.namespace(fill.data).ones(shape, fill.dtype))
    if out.shape != shape:
        raise ValueError(f"{name}: a fill value of shape {fill.shape} does not broadcast to shape {shape}")
    return out if out.dtype == dtype else ops.astype(out, dtype)


def _np_full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, **kwargs):
    """np.full_like(t, fill): a recorded Tensor when the fill value requires grad, else NumPy's."""
    if _needs_grad(fill_value) and tape.STATE.grad_enabled and order == "K" and not kwargs:
        value = _value(a)
        return _recorded_fill(np.shape(value) if shape is None else shape, fill_value,
                              value.dtype if dtype is None else dtype, "np.full_like")
    return np.full_like(_value(a), _fill(fill_value, "np.full_like"), dtype, order, subok, shape, **kwargs)


def arange(start, stop=None, step=None, dtype=None, requires_grad=False, device=None):
    """Evenly spaced values in [start, stop), as np.arange: integers give integers.

    Examples
    --------
    >>> tt.arange(3)
    tensor([0, 1, 2], dtype=int64)
    """
    values = np.arange(start, stop, step, dtype=dtype)
    return Tensor(values, requires_grad=requires_grad, device=device)


def eye(N, M=None, k=0, dtype=None, requires_grad=False, device=None):
    """Ones on the k-th diagonal of an N x M matrix (float64 unless `dtype`), as np.eye.

    Examples
    --------
    >>> tt.eye(2)
    tensor([[1., 0.],
            [0., 1.]])
    """
    values = _library(device).eye(N, M, k, dtype=float if dtype is None else dtype)
    return Tensor(values, requires_grad=requires_grad)


def rand(*shape, rng=None, dtype=None, requires_grad=False, device=None):
    """Uniform samples in [0, 1); `rng` is an np.random.Generator, a seed, or None (the global
    generator, tt.manual_seed). Drawn on the
    CPU, so a seed gives the same numbers on every device.

    Examples
    --------
    >>> x = tt.rand(2, 3, rng=0)
    >>> x.shape, bool((x.numpy() >= 0).all() and (x.numpy() < 1).all())
    ((2, 3), True)
    """
    values = draws.draw(draws.uniform, rng, _shape(shape))           # tt.compile repeats it
    return _drawn(Tensor(values, requires_grad=requires_grad, dtype=dtype, device=device), values)


def _drawn(t, values):
    """t, made from drawn `values` (a copy, maybe cast): while tt.compile records, its array is
    noted as computed from the draw, so the program repeats the draw on every call."""
    if STATE.recorder is not None:
        STATE.recorder.copied(t, values)
    return t


# NumPy's scalar types whose values are exact as Python numbers (not longdouble): combined with a
# Tensor by an arithmetic operator, such a scalar takes the Tensor's dtype as a Python number does
# (PyTorch's promotion, and NumPy 1's), where NumPy 2 (NEP 50) would widen float32 to float64.
_NUMPY_SCALARS = frozenset(t for t in (np.float64, np.float32, np.float16, np.complex128, np.complex64,
                                       np.int64, np.int32, np.int16, np.int8, np.uint64, np.uint32,
                                       np.uint16, np.uint8, np.bool_))
_ARITHMETIC = frozenset((np.add, np.subtract, np.multiply, np.divide, np.power))


# Short, for the operator one-liners; tt.compile adds the class of a NumPy scalar argument it
# tracks while recording (compile/tracer.py, _NumberNP), whose .item() is a line of its program.
_NPS = _NUMPY_SCALARS


def _weak(x):
    return x.item() if type(x) in _NPS else x


class _Size(int):
    """t.size: NumPy's number of elements (an int), and callable as PyTorch's t.size() (the shape,
    a tuple) or t.size(d) (one length)."""

    def __new__(cls, n, shape):
        out = int.__new__(cls, n)
        out.shape = shape
        return out

    def __call__(self, dim=None):
        return tuple(self.shape) if dim is None else self.shape[dim]


# The operators and sweeps above live in modules that import Tensor: imported last.
from . import draws, ops, tape  # noqa: E402

ops.NUMPY_FUNCTIONS[np.full_like] = _np_full_like    # a fill value that requires grad is recorded


def _arithmetic(op, reflected):
    """Tensor's operator for the primitive `op` (self op other, or other op self when reflected).
    A NumPy scalar is weak, as a Python number (PyTorch's rule and NumPy 1's): a float32 Tensor
    times np.float64(0.125) stays float32 (NumPy 2 alone would widen it). A float or a Tensor
    operand skips the set lookup (the operators are on the hot path)."""
    if reflected:
        def operator(self, other):
            t = type(other)
            return op(other if t is float or t is Tensor or t not in _NPS else other.item(), self)
    else:
        def operator(self, other):
            t = type(other)
            return op(self, other if t is float or t is Tensor or t not in _NPS else other.item())
    return operator


for _name, _op in (("add", ops.add), ("sub", ops.sub), ("mul", ops.mul), ("truediv", ops.div),
                   ("pow", ops.power)):
    setattr(Tensor, f"__{_name}__", _arithmetic(_op, reflected=False))
    setattr(Tensor, f"__r{_name}__", _arithmetic(_op, reflected=True))


def _in_place_operator(name, ufunc, symbol):
    def op(a, b):                     # (a's own, looked up when called: & | ^ come later)
        return getattr(type(a), name)(a, b)

    def operator(self, other):
        return _in_place(self, other, op, ufunc, symbol)
    return operator


# `t //= v` and friends, as `+=` (without them Python rebinds t to t // v, of another dtype)
for _name, _ufunc, _symbol in (("floordiv", np.floor_divide, "//="), ("mod", np.remainder, "%="),
                               ("and", np.bitwise_and, "&="), ("or", np.bitwise_or, "|="),
                               ("xor", np.bitwise_xor, "^=")):
    setattr(Tensor, f"__i{_name}__", _in_place_operator(f"__{_name}__", _ufunc, _symbol))
