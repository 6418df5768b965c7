"""Which array library holds an array: the one place tinytensor picks NumPy or another library.

tinytensor's rules are written with NumPy's functions. NumPy hands a call on another library's
array to that library through its dispatch protocols (`__array_ufunc__`, `__array_function__`),
so `np.exp(x)`, `np.sum(x, axis=0)`, `x @ W` and `x.reshape(...)` already run on a CuPy array as
they are. What those protocols cannot do is make a new array (`np.zeros(shape)` has no array to
dispatch on), convert one (`np.asarray`), or call SciPy's compiled code (BLAS `nrm2`,
`scipy.special.expit`). Code that does one of those asks this module instead:

    xp = backend.namespace(g)          # the array library of g: numpy, cupy, ...
    out = xp.zeros(shape, g.dtype)     # made where g lives

A device is a name ("cpu": NumPy; "cuda": CuPy on the current GPU) and the library behind it.
CuPy is imported only when "cuda" is asked for or a CuPy array is seen: CPU users never load it.
`register_device` adds another library (the tests register a stand-in, tests/foreign.py).
"""

import numbers

import numpy as np
import scipy.special

from .torch_interop import host_array

__all__ = ["Device", "register_device", "get_device", "device_of", "namespace", "like", "is_array",
           "asarray", "array", "to_device", "to_host", "copy", "expit", "xlogy", "add_at", "erf", "ndtr",
           "describe_devices"]

# The SciPy-only functions the rules call, by name: a Device may bring its library's own (None:
# the portable formula in `xp` below, or a clear error where there is none).
SPECIAL = ("expit", "xlogy", "add_at", "erf", "ndtr")


class Device:
    """A device: its name, its array type, its array library `xp` (NumPy's API), how arrays
    cross to and from the host, and the few SciPy-only functions the rules need (None: the
    portable formula below, in `xp`).

    Examples
    --------
    >>> cpu = tt.backend.get_device("cpu")
    >>> cpu
    <device cpu: numpy>
    >>> cpu.xp is np, cpu.array_type is np.ndarray
    (True, True)
    """

    def __init__(self, name, array_type, xp, from_host, to_host, **special):
        self.name = name
        self.array_type = array_type
        self.xp = xp
        self.from_host = from_host     # np.ndarray -> array on this device
        self.to_host = to_host         # array on this device -> np.ndarray
        unknown = set(special) - set(SPECIAL)
        if unknown:
            raise TypeError(f"register_device: unknown functions {sorted(unknown)}; known: {SPECIAL}")
        for what in SPECIAL:
            setattr(self, what, special.get(what))

    def __repr__(self):
        return f"<device {self.name}: {self.xp.__name__}>"


_DEVICES = {}     # name -> Device
_BY_TYPE = {}     # array (or scalar) type -> Device: the lookup every call here starts with


def register_device(name, array_type, xp, from_host, to_host, **special):
    """Make arrays of `array_type` (library `xp`) known as device `name`, with its own versions of
    the SciPy-only functions in SPECIAL where it has them. Returns the Device.

    Examples
    --------
    A toy library whose arrays are a NumPy subclass (a real one brings its own `xp`, as CuPy):

    >>> class Pinned(np.ndarray):
    ...     pass
    >>> tt.backend.register_device("pinned", Pinned, np, from_host=lambda a: a.view(Pinned),
    ...                            to_host=lambda a: a.view(np.ndarray))
    <device pinned: numpy>
    >>> p = tt.backend.to_device(np.arange(3.0), "pinned")
    >>> tt.backend.device_of(p), type(p).__name__
    ('pinned', 'Pinned')
    >>> tt.backend.erf(p)       # no erf registered: an error, never a silent trip to the host
    Traceback (most recent call last):
        ...
    TypeError: erf on device 'pinned': its array library has no erf (register one: ...)
    """
    device = Device(name, array_type, xp, from_host, to_host, **special)
    _DEVICES[name] = device
    _BY_TYPE[array_type] = device
    return device


CPU = register_device("cpu", np.ndarray, np, from_host=lambda a: a, to_host=lambda a: a,
                      expit=scipy.special.expit, xlogy=scipy.special.xlogy, add_at=np.add.at,
                      erf=scipy.special.erf, ndtr=scipy.special.ndtr)


def _load_cuda():
    """Register CuPy as "cuda" (on first use), with a clear error where it cannot run."""
    try:
        import cupy
        import cupyx.scipy.special
    except ImportError as err:
        raise RuntimeError("device 'cuda' needs CuPy: pip install -e \".[gpu]\" (or the cupy-cudaXXx "
                           f"wheel matching your CUDA); importing it failed: {err}") from err
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as err:   # noqa: BLE001 - CuPy's CUDA errors have no common public base
        raise RuntimeError(f"device 'cuda': CuPy is installed but finds no usable GPU ({err})") from err
    if count == 0:
        raise RuntimeError("device 'cuda': CuPy is installed but finds no GPU")
    special = cupyx.scipy.special
    add = cupy.add
    add_at = add.at if hasattr(add, "at") else cupyx.scatter_add
    return register_device("cuda", cupy.ndarray, cupy, from_host=cupy.asarray, to_host=cupy.asnumpy,
                           expit=getattr(special, "expit", None), xlogy=getattr(special, "xlogy", None),
                           add_at=add_at, erf=special.erf, ndtr=getattr(special, "ndtr", None))


def get_device(name):
    """The Device called `name` ("cpu", "cuda"; "cuda:0" reads as "cuda").

    Examples
    --------
    >>> tt.backend.get_device('cpu').name
    'cpu'
    """
    if isinstance(name, Device):
        return name
    device = _DEVICES.get(name)
    if device is not None:
        return device
    if isinstance(name, str) and name.split(":")[0] == "cuda":
        if name not in ("cuda", "cuda:0"):
            raise ValueError(f"device {name!r}: tinytensor uses CuPy's current GPU; name it 'cuda' "
                             f"(choose the GPU with cupy.cuda.Device(n).use())")
        return _DEVICES.get("cuda") or _load_cuda()
    raise ValueError(f"unknown device {name!r}; known devices: {', '.join(sorted(set(_DEVICES) | {'cuda'}))}")


def _device(a):
    """The Device of array `a`; NumPy's for anything that is not another library's array
    (NumPy scalars, Python numbers, lists)."""
    device = _BY_TYPE.get(type(a))
    if device is not None:
        return device
    kind = type(a)
    if kind.__module__.split(".")[0] == "cupy" and hasattr(a, "__cuda_array_interface__"):
        return _DEVICES.get("cuda") or _load_cuda()
    for device in _DEVICES.values():    # a subclass of a registered type
        if isinstance(a, device.array_type) and device is not CPU:
            return device
    if isinstance(a, (np.generic, numbers.Number)):
        _BY_TYPE[kind] = CPU                # remembered: NumPy scalars come back often
    return CPU


def device_of(a):
    """The name of the device holding array `a` ("cpu" for NumPy arrays, scalars and lists).

    Examples
    --------
    >>> tt.backend.device_of(np.zeros(2))
    'cpu'
    """
    return _device(a).name


WRAPPERS = []     # types holding an array in `.data` (tinytensor's Tensor): namespace looks inside


def namespace(a):
    """The array library of `a` (numpy, cupy, ...): `namespace(g).zeros(...)` makes an array
    where g lives. For a Tensor (a rule differentiated again), its data's library.

    Examples
    --------
    >>> tt.backend.namespace(np.zeros(2)) is np
    True
    """
    device = _BY_TYPE.get(type(a))
    if device is None:
        device = _device(a.data if isinstance(a, tuple(WRAPPERS)) else a)
    return device.xp


def like(x, ref, dtype=None):
    """`x` (a number, a list, a host array: a constant of a rule, an index) as an array on the
    device of `ref` (an array or a Tensor), moved there explicitly; NumPy's asarray on the CPU.

    Examples
    --------
    >>> g = tt.tensor([1.0, 2.0])
    >>> tt.backend.like([0, 1], g)            # an index made where g's data lives (here: NumPy)
    array([0, 1])
    >>> tt.backend.like(0.5, g, dtype=np.float32)
    array(0.5, dtype=float32)
    """
    return namespace(ref).asarray(x, dtype=dtype)


def is_array(x):
    """An array of some library, as opposed to a number, a NumPy scalar or a list.

    Examples
    --------
    >>> tt.backend.is_array(np.zeros(2)), tt.backend.is_array([1.0])
    (True, False)
    """
    return hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, np.generic)


def describe_devices(values):
    """The set of device names of the arrays among `values` (numbers and NumPy scalars carry none).

    Examples
    --------
    >>> tt.backend.describe_devices([np.zeros(2), 3.0, np.float32(1.0), tt.tensor([1.0]).data])
    {'cpu'}
    """
    return {_device(v).name for v in values if is_array(v)}


def _mixed(what, have, want):
    return TypeError(f"{what}: on device '{have}' but must be on '{want}' (tinytensor never moves "
                     f"arrays between devices silently): move it with tt.tensor(..., device='{want}'), "
                     f"t.to('{want}') or tt.backend.to_device(array, '{want}')")


def asarray(x, dtype=None, like=None, what="an array"):
    """`x` as an array (no copy where it already is one, unless `dtype` differs), on the device of
    the array `like`: numbers, NumPy scalars and lists are made there; an array of another
    device is an error naming both devices and `what` it is.

    Examples
    --------
    >>> a = np.arange(3.0)
    >>> tt.backend.asarray(a) is a            # already an array: no copy
    True
    >>> tt.backend.asarray([1, 2], dtype=np.float32, like=a)
    array([1., 2.], dtype=float32)
    """
    want = CPU if like is None else _device(like.data if isinstance(like, tuple(WRAPPERS)) else like)
    if is_array(x):
        have = _device(x)
        if have is not want and like is not None:
            raise _mixed(what, have.name, want.name)
        return x if dtype is None or x.dtype == dtype else x.astype(dtype)
    host = np.asarray(host_array(x), dtype=dtype)     # a torch tensor: through .numpy(), once
    return host if want is CPU else want.from_host(host)


def array(data, dtype=None, device=None):
    """A new array (always a copy, as torch.tensor) from data: an array of any device, a number
    or a nested list. It stays on its device, or goes to `device` when one is named.

    Examples
    --------
    >>> a = np.arange(3.0)
    >>> b = tt.backend.array(a)
    >>> b is a, b
    (False, array([0., 1., 2.]))
    >>> tt.backend.array([[1, 2]], dtype=np.float32, device="cpu")
    array([[1., 2.]], dtype=float32)
    """
    have = _device(data) if is_array(data) else CPU
    want = have if device is None else get_device(device)
    if have is want:
        return have.xp.array(data, dtype=dtype)
    return want.from_host(np.asarray(have.to_host(data), dtype=dtype))   # from_host copies


def to_device(a, device):
    """Array `a` on `device`: `a` itself if it is there already, else a copy there.

    Examples
    --------
    >>> tt.backend.to_device(np.arange(3), 'cpu')
    array([0, 1, 2])
    """
    want = get_device(device)
    if not is_array(a):
        a = np.asarray(a)          # numbers and lists: from the host
    have = _device(a)
    return a if have is want else want.from_host(have.to_host(a))


def to_host(a):
    """Array `a` as a NumPy array (a copy from another device; `a` itself from the CPU).

    Examples
    --------
    >>> tt.backend.to_host(np.arange(3))
    array([0, 1, 2])
    """
    return to_device(a, CPU)


def copy(a, dtype=None, order="K"):
    """A fresh array on `a`'s device with `a`'s values (in `dtype`; `order` as NumPy's: "K" keeps
    a's layout, "C" makes it row-major). NumPy scalars give 0-d arrays.

    Examples
    --------
    >>> a = np.arange(6.0).reshape(2, 3).T    # a transposed view: column-major
    >>> c = tt.backend.copy(a, order="C")
    >>> c.flags.c_contiguous, np.array_equal(c, a)
    (True, True)
    >>> tt.backend.copy(np.float64(2.0))
    array(2.)
    """
    if type(a) is np.ndarray or not is_array(a):
        return np.array(a, dtype=dtype, order=order)
    return a.astype(a.dtype if dtype is None else dtype, order=order, copy=True)


# ----- the SciPy-only functions, with a portable formula for libraries that lack them ----------------
def expit(x):
    """1 / (1 + exp(-x)), as scipy.special.expit, on x's device.

    Examples
    --------
    >>> tt.backend.expit(np.array([0.0, 1000.0, -1000.0]))   # no overflow
    array([0.5, 1. , 0. ])
    """
    device = _BY_TYPE.get(type(x)) or _device(x)
    if device.expit is not None:
        return device.expit(x)
    xp = device.xp
    e = xp.exp(-xp.abs(x))                              # never overflows
    return xp.where(x >= 0, 1 / (1 + e), e / (1 + e))


def xlogy(x, y):
    """x * log(y), 0 where x == 0 (as scipy.special.xlogy), on the arguments' device.

    Examples
    --------
    >>> tt.backend.xlogy(np.array([0.0, 2.0]), np.array([0.0, np.e]))   # 0 * log 0 is 0
    array([0., 2.])
    """
    device = _device(x) if is_array(x) else _device(y)
    if device.xlogy is not None:
        return device.xlogy(x, y)
    xp = device.xp
    return xp.where(x == 0, 0, x * xp.log(xp.where(x == 0, 1, y))).astype(xp.result_type(x, y))


def _special(what, x):
    """Device `x`'s own `what` (SciPy's on the CPU; a Tensor, which SciPy hands back to the op
    table, counts as CPU), or a clear error where its library has none."""
    fun = getattr(_BY_TYPE.get(type(x)) or _device(x), what)
    if fun is None:
        raise TypeError(f"{what} on device '{device_of(x)}': its array library has no {what} "
                        f"(register one: backend.register_device(..., {what}=...))")
    return fun


def erf(x):
    """The error function, as scipy.special.erf, on x's device.

    Examples
    --------
    >>> tt.backend.erf(np.array([0.0, 1.0]))
    array([0.        , 0.84270079])
    """
    return _special("erf", x)(x)


def ndtr(x):
    """The standard normal CDF, as scipy.special.ndtr, on x's device.

    Examples
    --------
    >>> tt.backend.ndtr(np.array([0.0, 1.96]))
    array([0.5      , 0.9750021])
    """
    return _special("ndtr", x)(x)


def add_at(out, index, values):
    """out[index] += values, repeated indices adding up (np.add.at), on out's device.

    Examples
    --------
    >>> out = np.zeros(3)
    >>> tt.backend.add_at(out, np.array([0, 0, 2]), 1.0)   # index 0 twice: both add
    >>> out
    array([2., 0., 1.])
    """
    device = _BY_TYPE.get(type(out)) or _device(out)
    if device.add_at is not None:
        device.add_at(out, index, values)
    else:
        device.xp.add.at(out, index, values)
