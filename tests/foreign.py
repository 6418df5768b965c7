"""A stand-in for another array library (CuPy, say), to prove on the CPU that no code pins NumPy.

`ForeignArray` wraps a NumPy array and behaves the way a CuPy array does towards NumPy:
* NumPy's functions and ufuncs reach it through `__array_function__` / `__array_ufunc__` and give
  ForeignArrays back (reductions give 0-d arrays, never NumPy scalars);
* it is never silently a NumPy array: `np.asarray(f)`, `np.array(f)`, buffer access and a SciPy
  function given one raise TypeError, as they do for a CuPy array;
* mixing it with a plain NumPy array in an operation raises TypeError (CuPy: "Unsupported type
  numpy.ndarray"); Python numbers and NumPy scalars mix freely;
* its `flags` have no `writeable` (CuPy's have none).
It is registered as the device "foreign", whose library `xp` is NumPy's API returning
ForeignArrays. Anything in tinytensor that makes a NumPy array where it should ask
`tinytensor.backend` for the input's library (np.zeros, np.asarray, SciPy, BLAS) then fails.
"""

import numbers

import numpy as np
import scipy.special
from numpy.lib.mixins import NDArrayOperatorsMixin

from tinytensor import backend

NAME = "foreign"


class ForeignArray(NDArrayOperatorsMixin):
    __slots__ = ("_a",)
    __array_priority__ = 100          # as CuPy's ndarray

    def __init__(self, a):
        assert type(a) is np.ndarray, type(a)
        self._a = a

    # ----- what it is --------------------------------------------------------------------------
    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    itemsize = property(lambda self: self._a.itemsize)
    nbytes = property(lambda self: self._a.nbytes)
    strides = property(lambda self: self._a.strides)
    T = property(lambda self: ForeignArray(self._a.T))
    base = property(lambda self: None if self._a.base is None else ForeignArray(np.asarray(self._a.base)))

    @property
    def flags(self):              # as CuPy's: no `writeable`
        f = self._a.flags
        return _Flags(f.c_contiguous, f.f_contiguous, f.owndata)

    def __repr__(self):
        return f"ForeignArray({self._a!r})"

    __str__ = __repr__

    def __format__(self, spec):
        return format(self._a, spec)

    __hash__ = None

    # ----- never silently a NumPy array -------------------------------------------------------------
    def __array__(self, dtype=None, copy=None):
        raise TypeError("implicit conversion of a ForeignArray to a NumPy array (np.asarray, np.array, "
                        "a SciPy function): code must ask tinytensor.backend for the array's library")

    def get(self):                # the explicit way out, as CuPy's
        return self._a.copy()

    # Python-level conversions of one element are allowed, as in CuPy (they synchronise there).
    def __float__(self): return float(self._a)
    def __int__(self): return int(self._a)
    def __bool__(self): return bool(self._a)
    def __index__(self): return self._a.__index__()
    def __len__(self): return len(self._a)
    def item(self, *args): return self._a.item(*args)
    def tolist(self): return self._a.tolist()

    def __iter__(self):
        for row in self._a:
            yield _wrap(row)

    # ----- NumPy's dispatch protocols --------------------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if getattr(np, ufunc.__name__, None) is not ufunc:
            return NotImplemented       # scipy.special's ufuncs: CuPy has none of them either
        for x in inputs + tuple(kwargs.get("out", ())):
            if not isinstance(x, (ForeignArray, numbers.Number, np.generic, np.ndarray)):
                return NotImplemented   # a Tensor, say: let it handle the call
        _refuse_numpy(inputs, f"np.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}"))
        if "out" in kwargs:
            kwargs["out"] = tuple(_unwrap(o) for o in kwargs["out"])
        result = getattr(ufunc, method)(*_unwrap(inputs), **kwargs)
        return None if method == "at" else _wrap(result)

    def __array_function__(self, func, types, args, kwargs):
        if not all(issubclass(t, (ForeignArray, np.ndarray)) for t in types):
            return NotImplemented
        _refuse_numpy(_flat(args) + _flat(tuple(kwargs.values())), f"np.{func.__name__}")
        return _wrap(func(*_unwrap(args), **_unwrap(kwargs)))

    # ----- methods and indexing, as an ndarray's (results wrapped) ---------------------------------
    def __getattr__(self, name):
        if name.startswith("__") or name in ("ctypes", "data", "flat", "view"):
            raise AttributeError(name)   # no route to the raw memory (np.asarray looks for these)
        attr = getattr(self._a, name)
        if not callable(attr):
            return _wrap(attr)

        def method(*args, **kwargs):
            return _wrap(attr(*_unwrap(args), **_unwrap(kwargs)))
        return method

    def __getitem__(self, index):
        return _wrap(self._a[_unwrap(index)])

    def __setitem__(self, index, value):
        _refuse_numpy((value,), "item assignment")
        self._a[_unwrap(index)] = _unwrap(value)


class _Flags:
    def __init__(self, c_contiguous, f_contiguous, owndata):
        self.c_contiguous, self.f_contiguous, self.owndata = c_contiguous, f_contiguous, owndata


def _refuse_numpy(values, what):
    for x in values:
        if type(x) is np.ndarray:
            raise TypeError(f"{what}: a NumPy array {x.shape} {x.dtype} mixed with ForeignArrays "
                            f"(CuPy raises here too)")


def _flat(values):
    out = []
    for v in values:
        if isinstance(v, (list, tuple)):
            out.extend(_flat(v))
        else:
            out.append(v)
    return tuple(out)


def _unwrap(x):
    if isinstance(x, ForeignArray):
        return x._a
    if isinstance(x, (list, tuple)):
        return type(x)(_unwrap(v) for v in x)
    if isinstance(x, dict):
        return {k: _unwrap(v) for k, v in x.items()}
    return x


def _wrap(x):
    if type(x) is np.ndarray:
        return ForeignArray(x)
    if isinstance(x, np.generic):
        return ForeignArray(np.asarray(x))   # CuPy gives 0-d arrays, not scalars
    if isinstance(x, tuple):
        return tuple(_wrap(v) for v in x)
    if isinstance(x, list):
        return [_wrap(v) for v in x]
    return x


class _Library:
    """NumPy's API giving ForeignArrays: the `xp` of the foreign device (as `cupy` is CUDA's).
    It accepts host data explicitly (`xp.asarray(numpy_array)` moves it, as cupy.asarray does)."""

    __name__ = "foreign"

    def __init__(self, target=np):
        self._target = target

    def __getattr__(self, name):
        attr = getattr(self._target, name)
        if isinstance(attr, (type, np.dtype)) or not callable(attr):
            return attr                  # dtypes, constants (np.float32, np.inf, np.newaxis)
        return _Library(attr)

    def __call__(self, *args, **kwargs):
        return _wrap(self._target(*_unwrap(args), **_unwrap(kwargs)))


xp = _Library()


def from_host(a):
    return ForeignArray(np.array(a))


def to_host(f):
    return f.get()


def _special(fun):
    """A SciPy function as the device's own (as cupyx.scipy.special's on CuPy arrays)."""
    return lambda x: _wrap(fun(_unwrap(x)))


DEVICE = backend.register_device(NAME, ForeignArray, xp, from_host=from_host, to_host=to_host,
                                 erf=_special(scipy.special.erf), ndtr=_special(scipy.special.ndtr))
