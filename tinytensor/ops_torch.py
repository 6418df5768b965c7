"""PyTorch's spellings, where NumPy has none or where the keyword says which meaning is meant.

The rule: NumPy's spellings keep NumPy's meaning (`t.sum(axis=1)`, `tt.split(x, 3, axis=0)` in 3
sections, `t.max(1)` the maxima); PyTorch's keywords give PyTorch's meaning:

* `dim=`/`keepdim=` are accepted wherever `axis=`/`keepdims=` are (`t.sum(dim=1, keepdim=True)`,
  `tt.softmax(x, dim=-1)`, `tt.cat(ts, dim=1)`); with them `t.max(dim=1)`/`t.min(dim=1)` return
  the named pair `(values, indices)`, `tt.split(x, n, dim=d)` cuts chunks of n, `t.std(dim=1)`/
  `t.var(dim=1)` use PyTorch's unbiased default (correction=1) and `t.squeeze(dim=d)` leaves an
  axis longer than 1 alone.
* Tensor methods NumPy's arrays lack keep PyTorch's meaning: `split(size, dim=0)` (chunks),
  `chunk`, `permute`, `contiguous`, `masked_fill`, `dim()` (`view`, `unsqueeze`, `numel` are in
  ops/shape.py),
  `size()`/`size(d)` (`t.size` alone stays NumPy's element count), and the casts `float()`
  (float32), `double()`, `half()`, `long()`, `int()` (int32), `bool()`.
* Where a positional call is a PyTorch habit with another meaning in NumPy, it warns or raises:
  `t.transpose(0, 1)` on a 2-D Tensor (NumPy's identity) raises (see Tensor.transpose), and
  iterating the result of `t.max(1)` / `tt.max(t, 1)` (as `_, predicted = out.max(1)` does,
  which for a batch of 2 would silently unpack the two maxima) warns once with both spellings.
"""

import functools
import inspect
import math
import numbers
import warnings
import weakref
from collections import namedtuple

import numpy as np

from . import backend, draws, rng
from . import tensor as tensor_module
from .ops import METHODS, NUMPY_FUNCTIONS, PUBLIC, public
from .state import call_warning
from .tensor import _ITER_CHECKS, Tensor
from .transforms import _value

# The pair PyTorch's max/min/sort return with dim= (torch.return_types.max): a named tuple.
values_indices = namedtuple("values_indices", ["values", "indices"])

# The functions before this module wraps them: its own calls go straight to NumPy's meaning.
_RAW = dict(PUBLIC)


def _dim_keyword(name, kwargs):
    """Move dim=/keepdim= to axis=/keepdims= (in place); returns (dim, keepdim) as given."""
    dim, keepdim = kwargs.pop("dim", None), kwargs.pop("keepdim", None)
    if dim is not None:
        if "axis" in kwargs:
            raise TypeError(f"{name}: give axis= (NumPy) or dim= (PyTorch), not both")
        kwargs["axis"] = tuple(dim) if isinstance(dim, list) else dim
    if keepdim is not None:
        if "keepdims" in kwargs:
            raise TypeError(f"{name}: give keepdims= (NumPy) or keepdim= (PyTorch), not both")
        kwargs["keepdims"] = bool(keepdim)
    return dim, keepdim


def _max_pair(name):
    arg = _RAW["argmax" if name == "max" else "argmin"]   # on the Tensor: tt.compile recomputes it

    def pair(raw, args, kwargs, dim, keepdim):
        if not isinstance(dim, numbers.Integral):
            raise TypeError(f"{name}(dim=...): PyTorch's dim is one axis (an int) and gives "
                            f"(values, indices); got dim={dim!r}. For several axes use "
                            f"{name}(axis={dim!r}) (NumPy's, the values only)")
        values = raw(*args, **kwargs)
        a = args[0]
        indices = arg(a if isinstance(a, Tensor) else _value(a), axis=dim, keepdims=bool(keepdim))
        return values_indices(values, Tensor(indices.astype(np.int64, copy=False)))
    return pair


def _torch_split(x, size, dim, op="split"):
    """PyTorch's split: pieces of `size` along `dim` (the last may be shorter), or of the sizes
    in a list (which must add up to the axis)."""
    shape = np.shape(_value(x))
    if not -len(shape) <= dim < len(shape):
        raise np.exceptions.AxisError(dim, len(shape))
    n = shape[dim]
    if np.ndim(size) == 0:
        size = int(size)
        if size <= 0:
            raise ValueError(f"{op}: split_size must be positive, got {size}")
        cuts = list(range(size, n, size))
    else:
        sizes = [int(s) for s in size]
        if sum(sizes) != n or any(s < 0 for s in sizes):
            raise ValueError(f"{op}: the sizes {sizes} must be non-negative and add up to the length "
                             f"{n} of dim {dim} (shape {tuple(shape)})")
        cuts = np.cumsum(sizes)[:-1].tolist()
    return tuple(_RAW["split"](x, cuts, axis=dim))


def _split_pair(raw, args, kwargs, dim, keepdim):
    x, size = args[0], args[1] if len(args) > 1 else kwargs.pop("split_size_or_sections")
    return _torch_split(x, size, dim if dim is not None else 0)


def _unbiased(raw, args, kwargs, dim, keepdim):
    # PyTorch's std/var default to the unbiased estimate (correction=1) where NumPy's ddof is 0.
    unbiased = kwargs.pop("unbiased", None)
    if "ddof" not in kwargs and "correction" not in kwargs and len(args) < 5:
        kwargs["correction"] = 1 if unbiased is None else int(bool(unbiased))
    return raw(*args, **kwargs)


def _squeeze_pair(raw, args, kwargs, dim, keepdim):
    # PyTorch's squeeze(dim) leaves an axis longer than 1 alone (NumPy's raises).
    shape = np.shape(_value(args[0]))
    axes = dim if isinstance(dim, tuple) else (dim,)
    keep = tuple(a for a in axes if shape[a] == 1)
    return args[0] if not keep else raw(args[0], axis=keep)


_SPECIAL = {"max": _max_pair("max"), "min": _max_pair("min"), "split": _split_pair,
            "std": _unbiased, "var": _unbiased, "squeeze": _squeeze_pair}

# The result of the last positional t.max(1) / t.min(1): iterating it warns (see Tensor.__iter__).
_LAST_POSITIONAL = [None]


def _warn_if_unpacked(t):
    ref = _LAST_POSITIONAL[0]
    if ref is not None and ref() is t:
        name, axis = _LAST_POSITIONAL[1:]
        warnings.warn(call_warning(
            f"{name}({axis}) is NumPy's: the {name}ima along axis {axis}, one Tensor, so unpacking it "
            f"(`_, predicted = out.{name}({axis})`) takes its rows. For PyTorch's pair write "
            f"`values, indices = t.{name}(dim={axis})`; for NumPy's values write t.{name}(axis={axis}) "
            f"(which does not warn)"), stacklevel=3)


_ITER_CHECKS.append(_warn_if_unpacked)


def _with_torch_keywords(name, raw):
    params = inspect.signature(raw).parameters
    special = _SPECIAL.get(name)
    unbiased = name in ("std", "var")

    def torch_call(args, kwargs):
        if name in ("max", "min") and "keepdim" in kwargs and "dim" not in kwargs and len(args) > 1:
            kwargs["dim"], args = args[1], args[:1]     # x.max(-1, keepdim=True): PyTorch's pair
        dim, keepdim = _dim_keyword(name, kwargs) if "axis" in params else (None, None)
        if special is not None and (dim is not None or unbiased):
            return special(raw, args, kwargs, dim, keepdim)
        if "keepdims" in kwargs and "keepdims" not in params:
            raise TypeError(f"{name}: keepdim= is not a keyword of {name}")
        return raw(*args, **kwargs)

    if name in ("max", "min"):
        @functools.wraps(raw)
        def call(*args, **kwargs):
            if kwargs and ("dim" in kwargs or "keepdim" in kwargs):
                return torch_call(args, kwargs)
            out = raw(*args, **kwargs)
            if len(args) > 1 and isinstance(args[1], numbers.Integral) and isinstance(out, Tensor):
                _LAST_POSITIONAL[:] = [weakref.ref(out), name, int(args[1])]
            return out
    elif unbiased:
        @functools.wraps(raw)
        def call(*args, **kwargs):
            if kwargs and ("dim" in kwargs or "keepdim" in kwargs or "unbiased" in kwargs):
                return torch_call(args, kwargs)
            return raw(*args, **kwargs)
    else:
        @functools.wraps(raw)
        def call(*args, **kwargs):
            if kwargs and ("dim" in kwargs or "keepdim" in kwargs):
                return torch_call(args, kwargs)
            return raw(*args, **kwargs)
    return call


def _install():
    """Wrap every public function that takes axis=/keepdims= (tt.*, its NumPy twin and its
    method) so that dim=/keepdim= reach it with PyTorch's meaning."""
    for name, raw in _RAW.items():
        try:
            params = inspect.signature(raw).parameters
        except (TypeError, ValueError):
            continue
        if "axis" not in params and "keepdims" not in params:
            continue
        wrapped = _with_torch_keywords(name, raw)
        PUBLIC[name] = wrapped
        for np_fun, fun in list(NUMPY_FUNCTIONS.items()):
            if fun is raw:
                NUMPY_FUNCTIONS[np_fun] = wrapped
        for method, fun in list(METHODS.items()):
            if fun is raw:
                METHODS[method] = wrapped
                setattr(Tensor, method, wrapped)


_install()


def _estimator_warning(name, method):
    """t.std()/t.var() (and t.std(0)) read the same in NumPy and PyTorch but mean NumPy's biased
    estimate here and PyTorch's unbiased one there: such a call warns (once per line, Python's
    default filter), naming both spellings. Any keyword that says which (axis=, ddof=, correction=,
    unbiased=, dim=) silences it."""
    explicit = ("axis", "ddof", "correction", "unbiased", "dim")

    @functools.wraps(method)
    def call(self, *args, **kwargs):
        if not any(k in kwargs for k in explicit):
            where = f"{args[0]}" if args else ""
            axis, dim = (f"axis={where}, ", f"dim={where}, ") if args else ("", "")
            warnings.warn(call_warning(
                f"t.{name}({where}) is NumPy's biased estimate (ddof=0); PyTorch's t.{name}({where}) is "
                f"the unbiased one (correction=1). Say which: t.{name}({axis}ddof=0) for NumPy's, "
                f"t.{name}({dim}correction=1) for PyTorch's (tt.{name}(t) is NumPy's and does not warn)"),
                stacklevel=2)
        return method(self, *args, **kwargs)
    return call


for _name in ("std", "var"):
    METHODS[_name] = _estimator_warning(_name, METHODS[_name])
    setattr(Tensor, _name, METHODS[_name])


# ----- functions -------------------------------------------------------------------------------------
@public
def cat(tensors, dim=0, *, axis=None):
    """torch.cat: np.concatenate under PyTorch's name (dim= or axis=).

    Examples
    --------
    >>> tt.cat([tt.ones(2), tt.zeros(2)], dim=0)
    tensor([1., 1., 0., 0.])
    """
    return _RAW["concatenate"](tensors, axis=dim if axis is None else axis)


@public
def multinomial(probs, num_samples, replacement=False, generator=None):
    """Indices drawn from the categories of `probs` (non-negative weights, one row or a batch of
    rows; they need not add up to 1), as torch.multinomial: int64, shape (num_samples,) or
    (rows, num_samples). Without replacement each index appears at most once per row.
    `generator`: an np.random.Generator, a seed, or None (the global one, tt.manual_seed).
    A draw (tinytensor/draws.py): tt.compile draws anew, from `probs`' values, on every call.

    Examples
    --------
    >>> tt.multinomial(tt.tensor([0.0, 1.0]), 3, replacement=True, generator=0)
    tensor([1, 1, 1], dtype=int64)
    """
    values = draws.draw(_multinomial, generator, probs, int(num_samples), bool(replacement))
    return tensor_module._drawn(Tensor(values), values)


def _multinomial(generator, probs, num_samples, replacement):
    p = np.asarray(backend.to_host(_value(probs)), dtype=np.float64)
    if p.ndim not in (1, 2) or p.shape[-1] == 0:
        raise ValueError(f"multinomial: probs must be 1-D or 2-D with at least one category, "
                         f"got shape {p.shape}")
    if not np.all(np.isfinite(p)) or np.any(p < 0):
        raise ValueError("multinomial: probs must be finite and non-negative (weights, not logits: "
                         "pass tt.softmax(logits, dim=-1))")
    rows = p.reshape(-1, p.shape[-1])
    totals = rows.sum(axis=1)
    if np.any(totals <= 0):
        raise ValueError("multinomial: every row of probs needs a positive sum")
    if num_samples <= 0:
        raise ValueError(f"multinomial: num_samples must be positive, got {num_samples}")
    gen = rng.generator(generator)
    if replacement:
        cdf = np.cumsum(rows, axis=1) / totals[:, None]
        u = gen.random((len(rows), num_samples))
        index = np.stack([np.searchsorted(c, uu, side="right") for c, uu in zip(cdf, u)])
        index = np.minimum(index, rows.shape[1] - 1)
    else:
        if num_samples > int((rows > 0).sum(axis=1).min()):
            raise ValueError(f"multinomial: cannot draw {num_samples} samples without replacement "
                             f"from {int((rows > 0).sum(axis=1).min())} categories of positive weight "
                             f"(replacement=True allows it)")
        with np.errstate(divide="ignore"):      # Gumbel top-k: sequential draws without replacement
            keys = np.log(rows) - np.log(-np.log(gen.random(rows.shape)))
        index = np.argsort(-keys, axis=1, kind="stable")[:, :num_samples]
    index = index.astype(np.int64)
    return index[0] if p.ndim == 1 else index


def manual_seed(seed):
    """Seed the one global generator behind every random default (randn, rand, multinomial,
    layer init, nn.init, Dropout without rng=, tt.data shuffles).

    Examples
    --------
    >>> _ = tt.manual_seed(0)
    >>> a = tt.randn(3)
    >>> _ = tt.manual_seed(0)
    >>> bool((tt.randn(3).numpy() == a.numpy()).all())
    True
    """
    return rng.manual_seed(seed)


get_rng_state = rng.get_rng_state
set_rng_state = rng.set_rng_state


# ----- Tensor methods PyTorch has and NumPy's arrays lack ----------------------------------------------
def _dims(args):
    return tuple(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else tuple(args)


def _method(fun, name=None):
    name = name or fun.__name__.strip("_")
    METHODS[name] = fun
    setattr(Tensor, name, fun)
    return fun


@_method
def permute(self, *dims):
    """t.permute(2, 0, 1): the axes in this order (np.transpose's axes)."""
    return _RAW["transpose"](self, _dims(dims))


@_method
def contiguous(self):
    """Itself: every Tensor's array is contiguous enough here."""
    return self


@_method
def masked_fill(self, mask, value):
    """`value` where `mask` (a bool array or Tensor, broadcast) is True, else self, in self's
    dtype (as PyTorch: `att.masked_fill(mask == 0, float("-inf"))`)."""
    mask = mask if isinstance(mask, np.ndarray) else _value(mask)   # (a traced mask stays one)
    if mask.dtype != np.bool_:
        raise TypeError(f"masked_fill: the mask must be boolean, got dtype {mask.dtype} "
                        f"(compare first: mask == 0)")
    if isinstance(value, numbers.Number):
        value = np.dtype(self.dtype).type(value)       # (no np.asarray beside a traced mask)
    elif not isinstance(value, Tensor):
        value = np.asarray(value, dtype=self.dtype)
    elif value.dtype != self.dtype:
        value = _RAW["astype"](value, self.dtype)
    out = _RAW["where"](mask, value, self)
    if tuple(out.shape) != tuple(self.shape):
        raise ValueError(f"masked_fill: a mask of shape {mask.shape} does not broadcast to the "
                         f"tensor's shape {tuple(self.shape)}")
    return out


@_method
def chunk(self, chunks, dim=0):
    """torch.chunk: `chunks` pieces along `dim` of ceil(n / chunks) each (possibly fewer pieces)."""
    n = np.shape(self.data)[dim]
    return _torch_split(self, max(1, math.ceil(n / int(chunks))), dim, "chunk")


def _split_method(self, split_size_or_sections, dim=0, *, axis=None):
    """t.split(n, dim=0): PyTorch's, pieces of n (the last may be shorter) or of the sizes in a
    list. NumPy's "n equal sections" is tt.split(t, n, axis=0) / np.split."""
    return _torch_split(self, split_size_or_sections, dim if axis is None else axis)


_method(_split_method, "split")


@_method
def dim(self):
    """The number of axes (ndim)."""
    return self.data.ndim


_method(dim, "ndimension")


def _cast(dtype, name):
    def cast(self):
        return self if self.data.dtype == dtype else _RAW["astype"](self, dtype)
    cast.__name__ = name
    cast.__doc__ = f"t.{name}(): a copy in {np.dtype(dtype)} (as PyTorch's), recorded on the tape."
    return _method(cast, name)


for _name, _dtype in (("float", np.float32), ("double", np.float64), ("half", np.float16),
                      ("long", np.int64), ("int", np.int32), ("bool", np.bool_)):
    _cast(np.dtype(_dtype), _name)


# ----- more of PyTorch's Tensor methods (issue 31) -----------------------------------------------------
# PyTorch's names with PyTorch's meanings; none of them has another meaning in NumPy, so they cannot be
# misread. Results that carry no gradient (indices, boolean masks) are computed through on_values, so
# tt.compile recomputes them on every call.
from .ops.core import _index_adjoint  # noqa: E402
from .ops.table import on_values  # noqa: E402
from .tape import STATE as _TAPE_STATE  # noqa: E402
from .torch_interop import host_array, is_torch_tensor, numpy_dtype  # noqa: E402

TopK = namedtuple("topk", ["values", "indices"])


def _axis(self, dim, name):
    n = self.data.ndim
    if not -max(n, 1) <= int(dim) < max(n, 1):
        raise IndexError(f"{name}: dim {dim} is out of range for a tensor of {n} axes (shape {self.shape})")
    return int(dim) % max(n, 1)


def _topk_indices(x, k, axis, largest):
    order = np.argsort(-x if largest else x, axis=axis, kind="stable")
    return np.take(order, np.arange(k), axis=axis)


@_method
def topk(self, k, dim=-1, largest=True, sorted=True):
    """(values, indices) of the k largest (largest=False: smallest) entries along dim, in order, as
    torch.topk; values are on the tape (gradients reach the chosen entries), indices are int64."""
    axis = _axis(self, dim, "topk")
    k = int(k)
    if not 0 <= k <= self.shape[axis]:
        raise ValueError(f"topk: k={k} is out of range for dim {dim} of size {self.shape[axis]}")
    index = on_values(_topk_indices, (self, k, axis, bool(largest)), {},
                      _topk_indices(self.data, k, axis, bool(largest)), "topk")
    return TopK(PUBLIC["take_along_axis"](self, index, axis=axis), Tensor(index))


def _index_array(index, name):
    index = host_array(index)
    index = index.data if isinstance(index, Tensor) else backend.asarray(index)
    if index.dtype.kind not in "iu":
        raise TypeError(f"{name}: index must be an integer tensor (int64, as PyTorch), got dtype "
                        f"{index.dtype}")
    return index


def _scatter_index(self, dim, index, name):
    """The full NumPy index of torch's scatter/gather along `dim`: index itself on dim, the
    positions 0..n-1 of index's shape on every other axis."""
    axis = _axis(self, dim, name)
    if index.ndim != self.data.ndim:
        raise ValueError(f"{name}: index must have as many axes as the tensor ({self.data.ndim}), got shape "
                         f"{index.shape}")
    for d, (i, n) in enumerate(zip(index.shape, self.shape)):
        if d != axis and i > n:
            raise ValueError(f"{name}: index of shape {index.shape} is larger than the tensor {self.shape} "
                             f"on axis {d}")
    if index.size and (index.min() < -self.shape[axis] or index.max() >= self.shape[axis]):
        raise IndexError(f"{name}: index values must lie in [0, {self.shape[axis]}) along dim {dim}, got "
                         f"{int(index.min())}..{int(index.max())}")
    grids = np.ogrid[tuple(slice(0, n) for n in index.shape)]
    return tuple(index if d == axis else g for d, g in enumerate(grids))


@_method
def gather(self, dim, index):
    """torch.gather: out[i][j] = self[index[i][j]][j] for dim 0 (and so on), out of index's shape."""
    index = _index_array(index, "gather")
    return self[_scatter_index(self, dim, index, "gather")]


def _source(src, index, like, name):
    if isinstance(src, Tensor) or backend.is_array(src) or is_torch_tensor(src):
        src = src if isinstance(src, Tensor) else Tensor(host_array(src))
        if any(s < i for s, i in zip(src.shape, index.shape)) or src.ndim != index.ndim:
            raise ValueError(f"{name}: src of shape {src.shape} must be at least index's shape {index.shape}")
        return src[tuple(slice(0, n) for n in index.shape)]
    return Tensor(np.full(index.shape, src, like.dtype))      # a number: value=


@_method
def scatter_add(self, dim, index, src):
    """Out of place torch.scatter_add: self with src added at index along dim (repeated indices
    add up); on the tape for self and src."""
    index = _index_array(index, "scatter_add")
    full = _scatter_index(self, dim, index, "scatter_add")
    src = _source(src, index, self, "scatter_add")
    return self + _index_adjoint(src, index=full, shape=tuple(self.shape))


@_method
def scatter(self, dim, index, src=None, value=None, reduce=None):
    """Out of place torch.scatter: self with src (or the number `value`) written at index along
    dim; on the tape. reduce="add" is scatter_add; for a repeated index the last write wins."""
    if reduce is not None:
        if reduce not in ("add", "sum"):
            raise ValueError(f"scatter: reduce must be None or 'add', got {reduce!r}")
        return scatter_add(self, dim, index, value if src is None else src)
    index = _index_array(index, "scatter")
    full = _scatter_index(self, dim, index, "scatter")
    src = _source(value if src is None else src, index, self, "scatter")
    out = PUBLIC["clone"](self)      # a new Tensor (on the tape, as tt.compile records it), then written
    out[full] = src
    return out


def _write(self, result, name):
    """t.<name>_(...): t's values replaced by `result` in place, as PyTorch: on the data when
    nothing records (no grad, or tt.no_grad()); a leaf that requires grad is refused while
    recording; a recorded Tensor becomes the new tape entry (its earlier uses keep their values)."""
    if _TAPE_STATE.grad_enabled and self.requires_grad and self._prim is None:
        raise RuntimeError(f"{name}: a leaf Tensor that requires grad cannot be changed in place while "
                           f"recording (as PyTorch); do it under tt.no_grad(), or use the out-of-place "
                           f"t.{name.rstrip('_')}(...)")
    if tuple(np.shape(result.data if isinstance(result, Tensor) else result)) != tuple(self.shape):
        raise ValueError(f"{name}: the result has shape {np.shape(result)} but the tensor has shape "
                         f"{tuple(self.shape)}; an in-place operation cannot change the shape")
    self[...] = result
    return self


def _def_inplace(name, compute):
    def method(self, *args, **kwargs):
        return _write(self, compute(self, *args, **kwargs), name)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"torch's in-place t.{name}: t itself, changed (see _write); returns t."
    return _method(method, name)


_def_inplace("add_", lambda t, other, alpha=1: t + (other if alpha == 1 else alpha * other))
_def_inplace("sub_", lambda t, other, alpha=1: t - (other if alpha == 1 else alpha * other))
_def_inplace("mul_", lambda t, other: t * other)
_def_inplace("div_", lambda t, other: t / other)
_def_inplace("clamp_", lambda t, min=None, max=None: PUBLIC["clip"](t, min, max))
_def_inplace("copy_", lambda t, src: PUBLIC["broadcast_to"](
    src if isinstance(src, Tensor) else Tensor(host_array(src)), t.shape))
_def_inplace("zero_", lambda t: Tensor(np.zeros_like(t.data)))
_def_inplace("fill_", lambda t, value: PUBLIC["broadcast_to"](value, t.shape) if isinstance(value, Tensor)
             else Tensor(np.full_like(t.data, value)))
_def_inplace("masked_fill_", lambda t, mask, value: t.masked_fill(mask, value))
_def_inplace("scatter_", lambda t, dim, index, src=None, value=None, reduce=None:
             scatter(t, dim, index, src, value, reduce))
_def_inplace("scatter_add_", lambda t, dim, index, src: scatter_add(t, dim, index, src))


@_method
def expand(self, *sizes):
    """torch's expand: broadcast to `sizes` (-1 keeps that axis), a view on the tape."""
    sizes = _dims(sizes)
    shape = tuple(self.shape)
    if len(sizes) < len(shape):
        raise ValueError(f"expand: {len(sizes)} sizes for a tensor of {len(shape)} axes (shape {shape})")
    lead = len(sizes) - len(shape)
    target = tuple(n if s == -1 and i >= lead else s for i, s in enumerate(sizes)
                   for n in [shape[i - lead] if i >= lead else None])
    if any(s == -1 for s in target[:lead]):
        raise ValueError(f"expand: -1 is not allowed for the new leading axes, got {sizes}")
    return PUBLIC["broadcast_to"](self, target)


@_method
def expand_as(self, other):
    return PUBLIC["broadcast_to"](self, tuple(np.shape(other.data if isinstance(other, Tensor) else other)))


@_method
def type_as(self, other):
    """self in other's dtype (recorded for a float dtype; an integer one carries no gradient)."""
    dtype = other.dtype if isinstance(other, Tensor) else np.asarray(other).dtype
    return self if self.dtype == dtype else PUBLIC["astype"](self, dtype)


def _new(fill):
    def new(self, *size, dtype=None, device=None, requires_grad=False):
        shape = _dims(size)
        dtype = self.dtype if dtype is None else numpy_dtype(dtype)
        values = backend.namespace(self.data).full(shape, fill, dtype=dtype)
        return Tensor(values, requires_grad=requires_grad, device=device)
    return new


_method(_new(0), "new_zeros")
_method(_new(1), "new_ones")


@_method
def new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False):
    return _new(fill_value)(self, size, dtype=dtype, device=device, requires_grad=requires_grad)


@_method
def new_tensor(self, data, dtype=None, device=None, requires_grad=False):
    dtype = self.dtype if dtype is None else numpy_dtype(dtype)
    return Tensor(host_array(data), dtype=dtype, requires_grad=requires_grad, device=device)


@_method
def unbind(self, dim=0):
    """The slices along dim, as a tuple (each on the tape)."""
    axis = _axis(self, dim, "unbind")
    return tuple(self[(slice(None),) * axis + (i,)] for i in range(self.shape[axis]))


Tensor.mT = property(lambda self: PUBLIC["swapaxes"](self, -1, -2),
                     doc="The last two axes swapped (torch's t.mT), on the tape.")


@_method
def is_floating_point(self):
    return self.data.dtype.kind == "f"


def _logical(ufunc, symbol):
    def op(self, other):
        a = self.data
        b = other.data if isinstance(other, Tensor) else backend.asarray(host_array(other))
        for v in (a, np.asarray(b) if not backend.is_array(b) else b):
            if v.dtype.kind not in "biu":
                raise TypeError(f"{symbol}: only boolean and integer tensors, got dtype {v.dtype} (for a "
                                f"condition on floats write (x > 0) {symbol} (x < 1))")
        return Tensor(on_values(ufunc, (self, other), {}, ufunc(a, b), ufunc.__name__))
    return op


Tensor.__and__ = _logical(np.bitwise_and, "&")
Tensor.__or__ = _logical(np.bitwise_or, "|")
Tensor.__xor__ = _logical(np.bitwise_xor, "^")
Tensor.__rand__ = Tensor.__and__
Tensor.__ror__ = Tensor.__or__
Tensor.__rxor__ = Tensor.__xor__


def _invert(self):
    if self.data.dtype.kind not in "biu":
        raise TypeError(f"~: only boolean and integer tensors, got dtype {self.data.dtype}")
    return Tensor(on_values(np.invert, (self,), {}, np.invert(self.data), "invert"))


Tensor.__invert__ = _invert
