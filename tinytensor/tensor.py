"""The Tensor: a NumPy array plus the one tape entry that produced it.

A Tensor made by an operation on Tensors that need gradients remembers that operation
(`_prim`), its inputs (`_inputs`, Tensors or constants), their values (`_values`) and its
static parameters (`_params`). That is the whole tape: every entry points only at its
inputs, so a graph is freed as soon as its output is no longer referenced.
Leaves are Tensors made by the user (`_prim is None`).
"""

import itertools

import numpy as np

from . import backend

# Creation order. An entry is always created after its inputs, so sorting by `_id` gives the
# Wengert list (evaluation order); both sweeps rely on that.
_creation_order = itertools.count()


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
        if type(self.data) is not np.ndarray and backend.device_of(self.data) != "cpu":
            raise TypeError(f"numpy(): this tensor is on {self.device!r}; t.cpu().numpy() copies it to "
                            f"the host (t.data is the {self.device} array itself)")
        return self.data

    def item(self):
        return self.data.item()

    def detach(self):
        """The same value, cut from the tape (shares memory, as in PyTorch)."""
        out = Tensor.__new__(Tensor)
        _init_untracked(out, self.data)
        return out

    def zero_grad(self):
        self.grad = None

    def __array__(self, dtype=None, copy=None):
        if type(self.data) is not np.ndarray:
            self.numpy()    # raises for another device: never a silent copy to the host
        if dtype is not None and dtype != self.data.dtype:
            return self.data.astype(dtype)
        return self.data.copy() if copy else self.data

    def __bool__(self):
        return bool(self.data)

    def __float__(self):
        return float(self.data)

    def __int__(self):
        return int(self.data)

    __hash__ = object.__hash__   # identity, so Tensors can key the sweeps' dictionaries

    # ----- automatic differentiation on the tape ------------------------------------------
    def backward(self, grad=None):
        """Reverse mode: accumulate d(self)/d(leaf) into `.grad` of every leaf that needs it.

        `grad` is the cotangent, an array of self's shape; it may be left out only when self is
        a scalar (then it is 1). Calling it twice on the same graph accumulates twice.
        """
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
    def __matmul__(self, other): return ops.matmul(self, other)
    def __rmatmul__(self, other): return ops.matmul(other, self)
    def __neg__(self): return ops.neg(self)
    def __pos__(self): return self
    def __abs__(self): return ops.abs(self)
    def __getitem__(self, index): return ops.getitem(self, index=_plain_index(index))

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
    t._version = next(_creation_order)


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


# The operators and sweeps above live in modules that import Tensor: imported last.
from . import ops, tape  # noqa: E402
