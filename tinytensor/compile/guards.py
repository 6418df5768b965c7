"""What a compiled program depends on besides its array arguments: its guards.

`_Reach` watches a recording and finds every Python value the function's result may depend on
from the code that actually ran, not from a list of patterns: each user function whose frame
the recording entered (a profile hook, as torch.compile's Dynamo reads the bytecode it runs),
with its closure cells, the globals its code names and its defaults; the objects they hold (a
model, an optimizer's `param_groups`, a config); and every Module the call reached (its
`training` flag, its other number attributes, and its structure version, which assigning a
submodule, a Parameter or a hook bumps). The guard is one generated function returning a tuple
of those values (numbers and strings by value, containers by a fingerprint of their contents,
arrays, Tensors, functions and other objects by identity): a call whose tuple differs from the
recorded one needs another program.

Python state the function itself changes while it is recorded (a list it appends to, a
`nonlocal` it rebinds, an attribute it sets on an object it closes over) cannot be replayed:
compared before and after the recording (`changed`): recorded again, and refused if it changes again.
"""

import array
import ast
import builtins
import collections
import collections.abc
import contextvars
import ctypes
import dis
import enum
import functools
import logging
import math
import operator
import os
import random
import re
import string
import sys
import sysconfig
import threading
import types
import warnings
import weakref

import numpy as np

from ..draws import _attribute as _attr
from ..hooks import LEAF_HOOKS, TENSOR_HOOKS
from ..state import STATE
from ..tensor import Tensor
from . import subscripts
from .tracer import _is_user, _item, _Tainted

_SCALARS = (int, float, bool, str, type(None), complex, bytes)
_IDENTITY = frozenset({types.FunctionType, types.BuiltinFunctionType, types.ModuleType, np.ndarray, Tensor,
                       np.ufunc, type, types.BuiltinMethodType, types.MethodWrapperType})
_NOT_USER_MODULES = frozenset({"builtins", "abc", "types", "collections", "functools", "typing", "enum"})
_CONTAINERS = (list, tuple, dict, set, frozenset)
_MAX_ITEMS = 64          # a larger container is guarded by identity and length
_DEPTH = 4
_SINGLEDISPATCH = functools.singledispatch(lambda x: x).__code__   # its wrapper's code
_RECORDING_WARNINGS = (warnings.catch_warnings.__enter__.__code__,   # f's own `with warnings.
                       warnings.catch_warnings.__exit__.__code__)    # catch_warnings(record=True):`
_LOGGER_LEVEL = (logging.Logger.isEnabledFor.__code__,     # a logger's level read (debug(), info(),
                 logging.Logger.getEffectiveLevel.__code__)  # isEnabledFor(), getEffectiveLevel())
_WEAK_CACHES = (weakref.WeakKeyDictionary, weakref.WeakValueDictionary)   # a library's caches
_WEAK_HOLDERS = (weakref.WeakSet, weakref.WeakValueDictionary)
_OPAQUE = (types.ModuleType, type, types.BuiltinFunctionType, np.ufunc,
           np.random.Generator, np.random.RandomState, np.dtype)
_ABSTRACT = (collections.deque, collections.abc.Mapping, collections.abc.Sequence, collections.abc.Set,
             collections.abc.MappingView)    # (d.values(): by its items, as d.keys(), d.items())
_UNSET = object()          # a ContextVar with no value in the context


def _fingerprint(x, depth=0):
    """x's value as a hashable, comparable key: numbers and strings by (type, value); containers
    by their items; arrays, Tensors, functions and other objects by identity; objects with
    attributes (a config, an optimizer) also by their number/string/container attributes."""
    t = type(x)
    if t is float:                                    # -0.0 is not 0.0 (copysign, 1 / x), and a
        return (t, x if x == x else "nan", math.copysign(1.0, x))     # nan equals a nan
    if t in _SCALARS:
        return (t, x)
    if t is np.ndarray:                               # by its values too (see _array_key): NumPy
        return (t, _array_key(x))                     # code on it ran once, while recording
    if t in _IDENTITY:                                # (the object itself where == is identity:
        return (t, id(x) if t is Tensor else x)       # kept alive, so a new one at the same
    if t in weakref.ProxyTypes and not _weak_alive(x):    # address is not taken for it)
        return (t, id(x), "dead")
    if isinstance(x, np.generic):
        return (t, _fingerprint(x.item(), depth + 1) if x.size == 1 else repr(x))
    if t is float or isinstance(x, float):
        own = getattr(x, "__dict__", None)           # a float subclass's own attributes too
        return (t, float(x)) if not own else (t, float(x), tuple((k, _fingerprint(v, depth + 1))
                                                                   for k, v in own.items()))
    if t in _CONTAINERS or isinstance(x, (list, tuple, dict)):
        if len(x) > _MAX_ITEMS and t in (list, tuple, dict):
            flat = _flat_values(x)          # a long table of numbers or strings: by its values
            if flat is not None:            # (compared in C: a 20,000-item list in ~0.3 ms)
                return (t, id(x), len(x), flat)
        if depth >= _DEPTH or len(x) > _MAX_ITEMS:
            return (t, id(x), len(x))
        if t not in _CONTAINERS:         # a subclass: its own attributes and its class's (a dict
            base = next(b for b in t.__mro__ if b in _CONTAINERS)     # subclass's __missing__
            return (_fingerprint(base(x), depth), _subclass_state(x, t, depth))   # reads them)
        if isinstance(x, dict):
            return (t, tuple((_fingerprint(k, depth + 1), _fingerprint(v, depth + 1)) for k, v in x.items()))
        if t in (set, frozenset):        # in iteration order: {1, 9} and {9, 1} iterate apart
            return (t, tuple(_fingerprint(v, depth + 1) for v in x))
        return (t, tuple(_fingerprint(v, depth + 1) for v in x))
    if isinstance(x, (np.ndarray, Tensor)) or callable(x) or isinstance(x, _OPAQUE):
        if isinstance(x, functools.partial):
            return (t, id(x), _fingerprint(x.args, depth + 1), _fingerprint(x.keywords, depth + 1))
        if isinstance(x, types.MethodType):
            return (t, id(x.__func__), id(x.__self__))
        if _container_method(x):
            return (t, id(x), _fingerprint(x.__self__, depth + 1))
        if isinstance(x, _module_class()):
            return (t, id(x), _module_state(x))
        return (t, id(x))
    if isinstance(x, (bytearray, array.array)):         # buffers of numbers: by their bytes
        return (t, id(x), getattr(x, "typecode", None), bytes(x))
    if isinstance(x, ctypes._SimpleCData):               # c_double(1.0): by its value
        return (t, id(x), _fingerprint(x.value, depth + 1))
    if isinstance(x, _ABSTRACT) and not isinstance(x, (str, bytes, Tensor, np.ndarray)) \
            and not isinstance(x, _module_class()):
        if depth >= _DEPTH or len(x) > _MAX_ITEMS:    # a deque, an OrderedDict, a Mapping, a
            return (t, id(x), len(x))                 # Sequence or a Set of the user's: by items
        if isinstance(x, collections.abc.Mapping):
            return (t, id(x), tuple((_fingerprint(k, depth + 1), _fingerprint(v, depth + 1))
                                    for k, v in x.items()))
        return (t, id(x), tuple(_fingerprint(v, depth + 1) for v in x))
    if t is contextvars.ContextVar:                   # its value in the calling context
        return (t, id(x), _fingerprint(x.get(_UNSET), depth + 1))
    if t is range:                                    # by value: an equal new range is the same
        return (t, x.start, x.stop, x.step)
    if t is slice:
        return (t, _fingerprint(x.start, depth + 1), _fingerprint(x.stop, depth + 1),
                _fingerprint(x.step, depth + 1))
    if _is_iterator(x):                               # an iterator, a generator: where it is
        return (t, id(x), _iterator_state(x))
    if t.__module__.startswith("tinytensor.optim"):  # an optimizer or a scheduler in a container
        return (t, id(x))                             # (opts["d"]): by identity, its steps change
    attributes = getattr(x, "__dict__", None)         # it (its settings: see _Reach._value)
    if attributes is not None and depth < _DEPTH - 1:
        items = tuple((k, _fingerprint(v, depth + 1)) for k, v in attributes.items()
                      if not k.startswith("__"))
        return (t, id(x), _class_state(t), items)
    return (t, id(x))


_FLAT = frozenset({int, float, str, bool, type(None)})


def _flat_values(x):
    """A long list, tuple or dict of plain numbers and strings as one tuple of its items (its
    keys and values), or None where it holds anything else."""
    items = tuple(x.items()) if type(x) is dict else tuple(x)
    if type(x) is dict:
        kinds = set(map(type, x)) | set(map(type, x.values()))
    else:
        kinds = set(map(type, items))
    return items if kinds <= _FLAT else None


def _state_of(obj):
    """What check_unchanged compares for an object f reaches: a Module's mode and number
    attributes (its own caches, a Dropout's last mask, are not the user's state); a helper
    module's number and container attributes (a counter it bumps); anything else's fingerprint."""
    if type(obj) in weakref.ProxyTypes:
        return (id(obj), _weak_alive(obj))
    if isinstance(obj, _module_class()):
        return tuple((id(m), m.training, _attributes_state(m)) for m in obj.modules())
    if type(obj) is np.ndarray:                      # compared once, after the recording: whole
        return (id(obj), obj.shape, obj.dtype, obj.tobytes())
    if isinstance(obj, type):
        return (id(obj), _class_state(obj))
    if isinstance(obj, logging.Logger):              # (not its cache of levels, logging's own)
        return (id(obj), _logger_level(obj))
    if isinstance(obj, types.ModuleType):
        if not _user_module(obj):
            return id(obj)
        return tuple((k, _fingerprint(v)) for k, v in vars(obj).items()
                     if not k.startswith("__") and (type(v) in _SCALARS or type(v) in _CONTAINERS))
    return _fingerprint(obj)


_LIBRARY_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_LIBRARY_CODE = tuple(os.path.join(_LIBRARY_ROOT, "tinytensor", d) for d in
                      ("ops", "scipy", "nn", "optim", "ops_science.py", "transforms.py", "data"))
_LAUNDERING = frozenset({np.asarray, np.array, np.ascontiguousarray, np.asfortranarray, np.frombuffer,
                         memoryview})


_LITERAL_OPS = frozenset({"LOAD_CONST", "BUILD_LIST", "BUILD_TUPLE", "BUILD_SET", "BUILD_MAP",
                          "BUILD_CONST_KEY_MAP", "LIST_EXTEND", "SET_UPDATE", "UNARY_NEGATIVE",
                          "KW_NAMES", "PRECALL", "CACHE", "NOP"})
_CALLS = frozenset({"CALL", "CALL_FUNCTION", "CALL_METHOD", "CALL_FUNCTION_KW", "CALL_KW"})
# in an argument made of plain values only, what keeps it plain: arithmetic (`[1.0] * k`,
# `[0.0] + [-1e9] * (k - 1)`), indexing, and calls of builtin types and of these functions
# (`[list(range(n))]`, `[len(xs)]`)
_PLAIN_OPS = _LITERAL_OPS | {"BINARY_OP", "BINARY_SUBSCR", "PUSH_NULL"} | _CALLS
_PLAIN_FUNCTIONS = frozenset({len, abs, min, max, sum, round, sorted})
_LOADS = frozenset({"LOAD_GLOBAL", "LOAD_NAME", "LOAD_FAST", "LOAD_DEREF"})
_INSTRUCTIONS = {}       # code -> (its instructions, offset -> position among them)


_META = frozenset({"dtype", "shape", "ndim", "size"})     # what an array's values never change
_PLAIN = (int, float, bool, complex, str, bytes, type(None), np.generic, np.dtype)


def _plain_value(x, depth=0):
    """Whether x holds no traced value: a Python number, string or None, a NumPy scalar or
    dtype, a plain ndarray (traced ones are _Tainted), or a short list or tuple of those. (A
    number read off a traced value, int(t.argmax()), is a guard already.)"""
    if isinstance(x, _PLAIN) or type(x) is np.ndarray:
        return True
    return type(x) in (list, tuple) and depth < 3 and len(x) <= 64 and all(
        _plain_value(v, depth + 1) for v in x)


def _plain_function(value):
    try:
        return value in _PLAIN_FUNCTIONS
    except TypeError:                  # (unhashable)
        return False


def _literal_call(frame, fun):
    """Whether the call of `fun` (np.array, np.asarray) about to run in frame has only literal
    or plain arguments (`np.array([0, 2])`, `np.asarray([1.0, 2.0], np.float32)`,
    `np.array([k])` of an int k, `np.asarray(1.5, dtype=x.dtype)`): constants, containers of
    constants, negated constants, NumPy or builtin types, names holding plain values
    (_plain_value) and an array's dtype or shape; read from the bytecode back from the call to
    the load of `fun`. False where unsure."""
    listed, k = _instructions(frame)
    if k is None:
        return False
    while k < len(listed) and listed[k].opname not in _CALLS:   # (f_lasti: the call, or the
        if listed[k].opname not in ("PRECALL", "CACHE", "KW_NAMES"):   # step just before it)
            return False
        k += 1

    def resolve(ins):
        return _loaded(frame, ins) if ins.opname in _LOADS else None

    k -= 1
    while k >= 0:
        ins = listed[k]
        if ins.opname in _PLAIN_OPS:
            k -= 1
            continue
        if ins.opname in _LOADS:
            value = resolve(ins)
            if value is fun:
                return True                   # `array(...)` imported by name
            if isinstance(value, type) and value.__module__ in ("builtins", "numpy") \
                    or _plain_value(value) or _plain_function(value):
                k -= 1                        # dtype=float, np.float32 given by name, [k]
                continue
            return False
        if ins.opname == "LOAD_ATTR" and ins.argval in _META and k > 0 and listed[k - 1].opname in _LOADS:
            k -= 2                            # x.dtype, x.shape
            continue
        if ins.opname in ("LOAD_ATTR", "LOAD_METHOD") and k > 0 and resolve(listed[k - 1]) is np:
            value = getattr(np, ins.argval, None)
            if value is fun:
                return True                   # np.array(...): every argument was a literal
            if isinstance(value, type):
                k -= 2                        # np.float32
                continue
        return False
    return False


def _instructions(frame):
    """(the instructions of frame's code, the position of the one running), cached per code;
    the position is None where the frame's offset is not an instruction's."""
    code = frame.f_code
    found = _INSTRUCTIONS.get(code)
    if found is None:
        listed = list(dis.get_instructions(code))
        found = _INSTRUCTIONS[code] = (listed, {ins.offset: k for k, ins in enumerate(listed)})
    return found[0], found[1].get(frame.f_lasti)


def _loaded(frame, ins):
    """The value load instruction `ins` of frame pushes (a global, a builtin, a local, a cell)."""
    if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
        return frame.f_globals.get(ins.argval, vars(builtins).get(ins.argval))
    return frame.f_locals.get(ins.argval)


def _loads_traced(frame, traced):
    """Whether the statement running in frame loaded, before the call about to run, a name that
    holds a traced NumPy array (`traced(v)`) or a Tensor's `.data` (`H.dot(x.data)`), read from
    the bytecode back to the statement's start; True where unsure. (A Tensor itself converts
    through its __array__, which the recording sees.)"""
    listed, k = _instructions(frame)
    if k is None:
        return True
    after = None                       # the instruction after this one (x.data: LOAD x, then .data)
    for ins in reversed(listed[:k + 1]):
        if ins.opname.startswith(("STORE_", "POP_", "RETURN", "JUMP", "RESUME")):
            break
        if ins.opname in _LOADS:
            value = _loaded(frame, ins)
            if traced(value) or isinstance(value, Tensor) and after is not None \
                    and after.opname in ("LOAD_ATTR", "LOAD_METHOD") and after.argval in ("data", "numpy"):
                return True
        if ins.is_jump_target:
            break
        after = ins
    return False


# ndarray's C methods that read an array argument's buffer directly (a traced one unseen)
_ARRAY_ARGUMENT_METHODS = frozenset({"dot", "searchsorted", "choose", "take", "put", "compress", "repeat",
                                     "argpartition", "partition", "__matmul__"})


# ndarray's C methods that are safe on a traced array called directly: they dispatch through its
# ufunc and function overrides, compare nothing, or read no value
_SAFE_C_METHODS = frozenset({"__sizeof__", "__array_namespace__", "__eq__", "__ne__", "__lt__", "__le__",
                             "__gt__", "__ge__", "__add__", "__radd__", "__sub__", "__rsub__", "__mul__",
                             "__rmul__", "__truediv__", "__rtruediv__", "__neg__", "__pos__", "__abs__",
                             "__pow__", "__rpow__", "__matmul__", "__rmatmul__", "__floordiv__",
                             "__rfloordiv__", "__mod__", "__rmod__", "__invert__", "__and__", "__or__",
                             "__xor__", "__class_getitem__", "__init_subclass__", "__subclasshook__",
                             "__reduce__", "__reduce_ex__", "__getattribute__", "__setattr__", "__dir__"})


# C modules whose functions read an argument's raw buffer (hashes, checksums, struct, pickle)
_BUFFER_MODULES = frozenset({"zlib", "_hashlib", "_md5", "_sha1", "_sha2", "_sha256", "_sha512", "_sha3",
                             "_blake2", "binascii", "_struct", "_pickle", "array", "_codecs"})


def _reads_buffer(fun):
    """Whether C function `fun` reads its arguments' raw buffers (hashlib.sha1(a), zlib.crc32(a),
    int.from_bytes(a), np.frombuffer(a)), which the recording cannot see."""
    owner = getattr(fun, "__self__", None)
    module = getattr(fun, "__module__", None) or getattr(owner, "__name__", None)
    name = getattr(fun, "__name__", "")
    return (module in _BUFFER_MODULES or name in ("from_bytes", "frombuffer", "from_dlpack")
            or isinstance(owner, types.ModuleType) and owner.__name__ in _BUFFER_MODULES)


_IMPLEMENTATIONS = []


def _numpy_implementations():
    """The code objects of NumPy's public functions that dispatch on some of their arguments
    (__array_function__), e.g. np.fill_diagonal dispatches on `a` only."""
    if not _IMPLEMENTATIONS:
        codes = set()
        for module in (np, np.linalg, np.fft, np.lib.stride_tricks):
            for name in dir(module):
                implementation = getattr(getattr(module, name, None), "_implementation", None)
                code = getattr(implementation, "__code__", None)
                if code is not None:
                    codes.add(code)
        codes |= _UNDISPATCHED
        _IMPLEMENTATIONS.append(frozenset(codes))
    return _IMPLEMENTATIONS[0]


# NumPy's functions with no dispatcher at all, np.full(3, t.data.max()): a traced NumPy array
# among their arguments is read where nobody sees it (a Tensor converts through __array__)
_UNDISPATCHED = frozenset({np.full.__code__})
_SITE = tuple(os.path.abspath(sysconfig.get_paths()[k]) for k in ("purelib", "platlib"))
_NUMPY_HOME = os.path.dirname(os.path.abspath(np.__file__))


def _numpy_helper_of_user(frame):
    """Whether `frame` is NumPy's Python code called straight from user code with a traced NumPy
    array among its locals (np.ndenumerate(mask) takes np.asarray(mask).flat): what it reads of
    the array's buffer nobody sees. (NumPy's functions that dispatch reach the recording first
    and run on plain arrays.)"""
    caller = frame.f_back
    return frame.f_code.co_filename.startswith(_NUMPY_HOME) and caller is not None \
        and _is_user(caller.f_code) and any(type(v) is _Tainted for v in frame.f_locals.values())


def _library(code):
    """Whether code is an installed package's (SciPy's, not NumPy's or tinytensor's)."""
    name = code.co_filename
    return name.startswith(_SITE) and not name.startswith(_NUMPY_HOME)


def _tainted(value):
    # a traced NumPy array (or a list or tuple holding one)
    return type(value) is _Tainted or type(value) in (list, tuple) and any(
        type(v) is _Tainted for v in value[:32])


def _untaken_argument(frame, traced):
    """The name of an argument of NumPy function frame that holds a traced value, or None."""
    code = frame.f_code
    count = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & 4) + bool(code.co_flags & 8)
    values = frame.f_locals
    for name in code.co_varnames[:count]:
        value = values.get(name)
        if isinstance(value, dict) and code.co_flags & 8:     # **kwargs: its values
            value = tuple(value.values())
        if traced(value) or isinstance(value, tuple) and any(traced(v) for v in value):
            return name
    return None


def _recording():
    """This thread's tracer while it records f (not inside an entry), else None."""
    rec = STATE.recorder
    return rec if rec is not None and getattr(rec, "recording", False) and not rec.depth_inside else None


def _refused_legacy(name, original):
    """np.random.get_state/set_state/seed while f is recorded in this thread: a refusal (the
    state is not a value the program computes; its draws are refused too). Other threads, and
    this one outside a recording, get NumPy's own."""
    def legacy(*args, **kwargs):
        if _recording() is not None:
            raise RuntimeError(
                f"tt.compile: np.random.{name}() inside a compiled function reads or sets NumPy's "
                f"global random state, which the program would not repeat (it would keep the "
                f"recording call's). Call it outside the compiled function, or draw with tinytensor "
                f"(tt.randn(..., rng=rng))")
        return original(*args, **kwargs)
    return legacy


def _noted_default_rng(original):
    """np.random.default_rng while f is recorded in this thread: the generators f makes are
    noted (a draw from one is refused; default_rng(g) is g itself)."""
    def default_rng(*args, **kwargs):
        g = original(*args, **kwargs)
        rec = _recording()
        if rec is not None and not any(g is a for a in (*args, *kwargs.values())):
            rec.made_generators.append(g)
        return g
    return default_rng


_PATCHED = {"count": 0, "originals": {}}
_PATCH_LOCK = threading.Lock()


def _random_patches(step):
    """Install NumPy's random functions' recording forms when the first recording (of any
    thread) starts, put NumPy's own back when the last ends: they look at the calling thread's
    recorder, so one thread recording leaves another's calls alone."""
    with _PATCH_LOCK:
        _PATCHED["count"] += step
        if step > 0 and _PATCHED["count"] == 1:
            names = ("get_state", "set_state", "seed", "default_rng")
            originals = _PATCHED["originals"] = {n: getattr(np.random, n) for n in names}
            for n in names[:3]:
                setattr(np.random, n, _refused_legacy(n, originals[n]))
            np.random.default_rng = _noted_default_rng(originals["default_rng"])
        elif step < 0 and _PATCHED["count"] == 0:
            for n, fun in _PATCHED["originals"].items():
                setattr(np.random, n, fun)


# C functions whose result is a value from outside the program (it changes between calls without
# anything f reaches changing): the clock, the file system and the process, files being read, and
# random states other than tinytensor's generators (Python's random.Random, NumPy's RandomState)
_OUTSIDE_MODULES = frozenset({"time"})
_OUTSIDE_FUNCTIONS = frozenset({
    ("posix", "getcwd"), ("posix", "listdir"), ("posix", "stat"), ("posix", "lstat"), ("posix", "scandir"),
    ("posix", "getpid"), ("posix", "urandom"), ("posix", "times"), ("posix", "access"),
    ("posix", "getloadavg"), ("sys", "getrecursionlimit"), ("sys", "getswitchinterval"),
    ("sys", "getrefcount"), ("gc", "get_threshold"), ("gc", "get_count"), ("gc", "get_stats"),
    ("gc", "isenabled"), ("io", "open"), ("_io", "open")})
_OUTSIDE_METHODS = frozenset({"read", "readline", "readlines", "read1", "readinto", "tell", "seek",
                              "getvalue", "locked"})
_NOT_OUTSIDE = frozenset({"sleep"})


# the standard library's Python helpers that read such values for the user's code (os.path.exists,
# pathlib, random.Random's Python methods); elsewhere (importlib importing a module, linecache
# showing a warning) the standard library's own reads are not f's
_READING_HELPERS = frozenset({"genericpath", "posixpath", "random", "pathlib", "os", "glob", "shutil"})


def _stdlib_module(code):
    """The module name of standard-library code by its file ("<frozen genericpath>" too)."""
    name = os.path.basename(code.co_filename)
    return name[8:-1] if name.startswith("<frozen ") else name.removesuffix(".py")


def _outside_caller(frame):
    """Whether `frame`, which called an outside-value C function, is user code, or one of the
    standard library's reading helpers called from user code."""
    if _is_user(frame.f_code):
        return True
    while frame is not None and _stdlib_module(frame.f_code) in _READING_HELPERS:
        frame = frame.f_back
    return frame is not None and _is_user(frame.f_code)


def _outside_value(fun):
    """What C function `fun` reads from outside the program (see _OUTSIDE_MODULES), in words, or
    None."""
    owner = getattr(fun, "__self__", None)
    name = getattr(fun, "__name__", "?")
    if isinstance(owner, types.ModuleType) or owner is None:
        module = getattr(fun, "__module__", None) or getattr(owner, "__name__", None)
        if module in _OUTSIDE_MODULES and name not in _NOT_OUTSIDE or (module, name) in _OUTSIDE_FUNCTIONS:
            return f"{module}.{name}()"
        return None
    if owner is getattr(random, "_inst", None):
        return f"Python's random module (random.{name}())"
    if isinstance(owner, (random.Random, np.random.RandomState)):
        return f"{type(owner).__name__}.{name}() (a random state)"
    if name in _OUTSIDE_METHODS and type(owner).__module__ in ("_io", "_thread"):
        return f"{type(owner).__name__}.{name}()"
    return None


def _iterator_state(it):
    """Where an iterator or generator stands (so that a draw from it while recording shows)."""
    frame = getattr(it, "gi_frame", None)
    if frame is not None or hasattr(it, "gi_code"):
        if frame is None:
            return ("generator", None)
        return ("generator", frame.f_lasti, tuple((k, _fingerprint(v, 2)) for k, v in frame.f_locals.items()))
    try:
        return repr(it.__reduce__())
    except Exception:
        return None


_MODULE = []


def _module_class():
    if not _MODULE:
        from ..nn.module import Module
        _MODULE.append(Module)
    return _MODULE[0]


# a class's methods, by identity: one replaced on the class (M.s = property(...), M.g =
# staticmethod(...)) is another program (the state holds the object itself, whose id a
# replacement made later could not reuse)
_DESCRIPTORS = frozenset({types.FunctionType, staticmethod, classmethod, property, functools.partialmethod})


_WHOLE_READS = frozenset({"repr", "str", "format", "print", "astuple", "asdict", "vars", "replace",
                          "SimpleNamespace", "Namespace", "__dict__", "__eq__", "__repr__"})


def _data_holder(obj):
    """A SimpleNamespace, an argparse Namespace or a dataclass instance: a record whose fields C
    code and library code read all at once (==, repr, astuple)."""
    t = type(obj)
    return t is types.SimpleNamespace or t.__name__ == "Namespace" and t.__module__ == "argparse" \
        or hasattr(t, "__dataclass_fields__")


def _subclass_state(x, t, depth):
    """What a list, tuple, dict or set of a subclass holds besides its items: its class (its
    attributes, its methods such as __missing__), a defaultdict's factory, its own attributes."""
    own = getattr(x, "__dict__", None)
    return (t, _class_state(t) if t.__module__ not in _NOT_USER_MODULES else (),
            _fingerprint(x.default_factory, depth + 1) if isinstance(x, collections.defaultdict) else None,
            tuple((k, _fingerprint(v, depth + 1)) for k, v in own.items()) if own else ())


def _class_state(cls):
    """The number and string attributes of a user's class and its user-defined bases (a class
    attribute `scale = 2.0` a method reads as self.scale), and its methods by identity."""
    state = []
    meta = type(cls)                  # K.gain found on K's metaclass (Meta.gain = 2.0)
    for c in _user_classes(cls) + (_user_classes(meta) if meta is not type else ()):
        state += [(c.__name__, k, v if type(v) in _DESCRIPTORS else _enum_state(v) if isinstance(v, enum.Enum)
                   else _fingerprint(v))
                  for k, v in vars(c).items() if type(v) in _DESCRIPTORS or not k.startswith("__") and (
                      type(v) in _SCALARS or isinstance(v, (np.generic, enum.Enum))
                      or type(v) in _HELD and not k.startswith("_"))]
    return tuple(state)   # (__call__ replaced too; an enum member by its value and attributes;
    #                       a container or array held as a class attribute by its items)


def _enum_state(member):
    """An enum member's value (a list edited in place too) and the attributes set on it."""
    return (_fingerprint(member._value_, 1),
            tuple((k, _fingerprint(a, 1)) for k, a in vars(member).items() if not k.startswith("_")))


_USER_CLASSES = {}
_HELD = frozenset({list, tuple, dict, set, np.ndarray, types.SimpleNamespace})


class _Unwritten:
    """An optimizer's param_groups as a guard reads them when the program itself writes some
    of their items (`group["lr"] = lr` of a number argument, before the step): the others."""
    __slots__ = ("optimizer", "skip")

    def __init__(self, optimizer, written):
        self.optimizer, self.skip = optimizer, {(id(g), k) for g, k in written}

    def __call__(self):
        skip = self.skip
        return [{k: v for k, v in g.items() if (id(g), k) not in skip} if type(g) is dict else g
                for g in self.optimizer.param_groups]


def _callable_object(v):
    """An instance of a user's class with its own __call__ (not a function, a class or a
    Module): called, it reads its attributes, which are guarded like any object's."""
    t = type(v)
    if t in _PLAIN_TYPES or isinstance(v, (type, Tensor, np.ndarray)) or not hasattr(v, "__dict__"):
        return False
    call = _class_attribute(t, "__call__")
    return type(call) is types.FunctionType and _is_user(call.__code__)


_PLAIN_TYPES = {int, float, str, bool, type(None), list, tuple, dict, set, types.FunctionType}


def _class_attribute(cls, name):
    """cls's attribute `name` as its class dictionaries hold it (the descriptor, not what its
    __get__ makes: a partialmethod makes a new function on every read)."""
    for c in cls.__mro__:
        if name in c.__dict__:
            return c.__dict__[name]
    return None


def _user_classes(cls):
    """The user's classes in cls's method resolution order (not tinytensor's, not the standard
    library's), remembered per class until its MRO changes (a guard reads it on every call)."""
    mro = cls.__mro__
    known = _USER_CLASSES.get(cls)
    if known is None or known[0] is not mro:
        users = tuple(c for c in mro if c.__module__ not in _NOT_USER_MODULES
                      and not c.__module__.startswith("tinytensor"))
        known = _USER_CLASSES[cls] = (mro, users)
    return known[1]


class _Structure:
    """The identity and structure version of every submodule of the Modules a call reached,
    recomputed only when some Module's structure changed since (Module.__setattr__ bumps the
    shared counter): a ModuleList appended to, a Sequential's layer replaced."""

    def __init__(self, roots):
        self.roots = list(roots)
        self.seen = _counter()
        self.current = self._deep()

    def _deep(self):
        return tuple((id(m), vars(m).get("_structure", 0), _class_state(type(m)))
                     for root in self.roots for _, m in root.named_modules())

    def __call__(self):
        count = _counter()
        if count != self.seen:
            self.seen = count
            self.current = self._deep()
        return self.current


def _counter():
    from ..nn.module import _STRUCTURE
    return _STRUCTURE[0]


def _module_state(m):
    """A Module's mode, number/string attributes and structure version (Module.__setattr__ bumps
    it when a submodule, Parameter, Tensor or hook is assigned)."""
    return (m.training, vars(m).get("_structure", 0), _class_state(type(m)), _attributes_state(m),
            tuple(vars(m).get("_forward_hooks", ())), tuple(vars(m).get("_forward_pre_hooks", ())))


def _attributes_state(m):
    """A Module's number and string attributes by class and value, and the contents of those
    that change in place with no assignment (lists, dicts, namespaces, dataclasses, small arrays:
    `m.cfg.ks[0] += 1`). Anything else (a submodule, a Tensor, a tuple, a function) is rebound
    only by an assignment, which bumps the structure version. On every call: one dict lookup
    per attribute decides (see _kind)."""
    outputs = type(m)._outputs
    state = []
    for k, v in vars(m).items():
        kind = _KINDS.get(type(v)) or _kind(type(v))
        if kind == "number":
            state.append((k, _fingerprint(v)) if type(v) is float else (k, type(v), v))
        elif kind != "skip" and k not in _MODULE_OWN and k not in outputs:
            state.append((k, _array_key(v) if kind == "array" else _fingerprint(v, 1)))
    return tuple(state)


_KINDS = {}


def _kind(t):
    """How a Module attribute of type t is guarded: "number", "array" (by value when small),
    "contents" (a mutable container or plain object), or "skip" (immutable, or compared by
    identity through the structure version)."""
    if t in _SCALARS:
        kind = "number"
    elif t is np.ndarray:
        kind = "array"
    elif issubclass(t, (tuple, frozenset, range, slice, Tensor, np.generic, _module_class()) + _OPAQUE) \
            or any("__call__" in vars(c) for c in t.__mro__):        # functions, callable objects
        kind = "skip"
    else:
        kind = "contents"
    _KINDS[t] = kind
    return kind


_DYNAMIC = ("__getattr__", "__getattribute__")
_MODULE_OWN = frozenset({"_structure", "_forward_hooks", "_forward_pre_hooks", "_buffers", "_non_persistent",
                         "_names", "_keys"})


class _Reach:
    """Finds, while f is recorded, the Python values it depends on (see the module's text)."""

    def __init__(self, f, tracer):
        self.f = f
        self.tracer = tracer
        self.codes = {}           # code object -> a frame's globals (user code that ran)
        self.functions = {}       # id -> function f can reach statically (closures, methods, partials)
        self.objects = {}         # id -> object whose attributes are guarded (bound self, partial args)
        self.optim_reads = {}     # id -> optimizer or scheduler whose reading methods f called
        self.partials = {}        # id -> functools.partial (its arguments and keywords, by value)
        self.walked = {}          # id -> tinytensor's own function walked through (a transform's)
        self.caches = {}          # id -> functools.lru_cache wrapper f calls
        self.always = set()       # ids of functions guarded whether or not their code ran
        self.weak = {}            # id -> the weakref.ref f reaches an object of self.objects by
        self.marks = {}           # id(frame) -> tracer.made before a scalar call's argument
        self.library_modules = {}  # id -> a library's module f reads as a global (np, sys, math)
        self.weak_refs = {}       # id -> a weakref.ref, WeakMethod or proxy f reaches (whether
        #                           its object is alive is a guard)
        self.classes = {}         # id -> a user's class f reaches (its methods are walked)
        self.names = set()        # attribute names read by name through C (operator.attrgetter)
        self.loggers = {}         # id -> a logging.Logger whose level f's code asked (lg.info(...))
        self.before = None
        self._previous = None
        self._tracing = False
        self._collect(f, 0)

    # ----- the functions and objects f can reach without running -----
    def _collect(self, f, depth):
        """Walk f: a user function's closure, globals and defaults are guarded; tinytensor's
        own wrappers (a transform's closure, a compiled function) are walked for the user
        functions and objects they hold, and guard nothing of their own."""
        if depth > 8:
            return
        while isinstance(f, functools.partial):
            self.partials[id(f)] = f
            for a in (*f.args, *f.keywords.values()):
                self._value(a, depth)
            f = f.func
        if isinstance(f, types.MethodType):
            self._value(f.__self__, depth)
            if isinstance(f.__self__, type):      # a classmethod: cls.k read through its class
                self.objects.setdefault(id(f.__self__), f.__self__)
            f = f.__func__
        if not isinstance(f, types.FunctionType):
            if callable(f) and _attr(f, "cache_info") and isinstance(_attr(f, "__wrapped__"),
                                                                     types.FunctionType):
                self.caches[id(f)] = f           # functools.cache: its contents are state f reads
                self._collect(f.__wrapped__, depth + 1)
                self.always.add(id(f.__wrapped__))   # guarded even when a cache hit skips its code
                return
            if callable(f) and hasattr(f, "__dict__") and not isinstance(f, type):
                inner = _attr(f, "fun") or _attr(f, "__wrapped__")
                if inner is not None and inner is not f:
                    self._collect(inner, depth + 1)
                self._value(f, depth)
                call = vars(type(f)).get("__call__")
                if isinstance(call, types.FunctionType) and _is_user(call.__code__):
                    self._collect(call, depth + 1)
            return
        if id(f) in self.functions or id(f) in self.walked:
            return
        user = _is_user(f.__code__)
        (self.functions if user else self.walked)[id(f)] = f
        wrapped = _attr(f, "__wrapped__")
        if wrapped is not None:
            self._collect(wrapped, depth + 1)
        for cell in f.__closure__ or ():
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            self._value(value, depth)
        if not user:
            return
        for name in _global_names(f.__code__):
            if name in f.__globals__:
                self._value(f.__globals__[name], depth)
        for value in (f.__defaults__ or ()) + tuple((f.__kwdefaults__ or {}).values()):
            self._value(value, depth)

    def _value(self, value, depth):
        if type(value) in weakref.ProxyTypes or isinstance(value, weakref.ref):
            self.weak_refs[id(value)] = value
            if not _weak_alive(value):
                return                  # (a dead proxy: nothing more to read through it)
        if isinstance(value, weakref.ref) and not isinstance(value, weakref.WeakMethod):
            referent = value()                  # what it refers to now: its attributes are read
            if referent is None:                # through the reference (see _sources), which
                return                          # the guard does not keep alive
            self.weak[id(referent)] = value
            value = referent
        if isinstance(value, (types.FunctionType, functools.partial, types.MethodType)) \
                or callable(value) and _attr(value, "cache_info") and _attr(value, "__wrapped__"):
            self._collect(value, depth + 1)
        elif callable(value) and isinstance(_attr(value, "fun"), types.FunctionType) \
                and type(value).__module__.startswith("tinytensor"):
            self._collect(value.fun, depth + 1)       # a compiled function (or a transform) f calls
        elif isinstance(value, np.vectorize):             # np.vectorize(pyfunc): pyfunc runs
            self._collect(value.pyfunc, depth + 1)
        elif type(value) is operator.attrgetter:          # attrgetter("a.b")(obj): the names it
            self.names.update(n for name in value.__reduce__()[1] for n in name.split("."))  # reads
        elif isinstance(value, (list, tuple, dict)) and len(value) <= _MAX_ITEMS:
            t = type(value)
            if t not in _CONTAINERS and t.__module__ not in _NOT_USER_MODULES and depth < _DEPTH:
                self._value(t, depth + 1)         # a subclass's __getitem__, __missing__: walked
            factory = getattr(value, "default_factory", None) if isinstance(value, dict) else None
            if isinstance(factory, (types.FunctionType, functools.partial)):
                self._collect(factory, depth + 1)     # a defaultdict's factory and what it reads
            for v in value.values() if isinstance(value, dict) else value:
                if isinstance(v, (types.FunctionType, functools.partial, types.MethodType)):
                    self._collect(v, depth + 1)
                elif _callable_object(v) or type(v) is operator.attrgetter \
                        or type(v).__module__.startswith("tinytensor.optim") \
                        or isinstance(v, (list, tuple, dict)) and depth < _DEPTH:
                    self._value(v, depth + 1)     # {"act": Scale(2.0)}: what its __call__ reads
        elif isinstance(value, Tensor):                   # a closed-over Tensor's gradient hooks
            for hook in (TENSOR_HOOKS.get(value) or {}).values():   # (a sweep inside runs them)
                self._collect(hook, depth + 1)
        elif isinstance(value, types.ModuleType):
            if not _user_module(value):
                self.library_modules[id(value)] = value   # (its number and string attributes)
            elif id(value) not in self.objects:
                self.objects[id(value)] = value           # a helper module: its attributes, and
                hook = vars(value).get("__getattr__")     # what its __getattr__ (PEP 562) reads
                if isinstance(hook, types.FunctionType):
                    self._collect(hook, depth + 1)
        elif isinstance(value, type):
            if id(value) not in self.classes and value.__module__ not in _NOT_USER_MODULES \
                    and not value.__module__.startswith("tinytensor"):
                self.classes[id(value)] = value           # a user's class: its methods and its
                for cls in (value, type(value)):          # metaclass's (A.k through a property or
                    for attr in list(vars(cls).values()):  # a __getattr__ of the metaclass)
                        attr = getattr(attr, "fget", getattr(attr, "__func__", attr))
                        if isinstance(attr, types.FunctionType) and _is_user(attr.__code__):
                            self._collect(attr, depth + 1)
        elif _is_iterator(value) and not isinstance(value, (Tensor, np.ndarray)):
            self.objects[id(value)] = value               # an iterator f may draw from
        elif (hasattr(value, "__dict__") or hasattr(type(value), "__slots__")) \
                and not isinstance(value, _OPAQUE + (Tensor, np.ndarray)) and not _internal(value):
            if id(value) not in self.objects:
                self.objects[id(value)] = value
                if isinstance(value, _module_class()):   # the hooks of it and its submodules,
                    for m in value.modules():             # and of its parameters (a sweep inside
                        self.objects.setdefault(id(m), m)   # (their attributes: model.block.scale)
                        for name in ("_forward_hooks", "_forward_pre_hooks"):     # runs them);
                            for hook, _ in vars(m).get(name, {}).values():
                                self._collect(hook, depth + 1)
                        if m is not value:                # the functions and callable objects
                            for v in list(vars(m).values()):      # its submodules hold
                                if isinstance(v, (types.FunctionType, functools.partial, types.MethodType)):
                                    self._collect(v, depth + 1)
                                elif _callable_object(v) and depth < _DEPTH:
                                    self._value(v, depth + 1)
                    for p in value.parameters():
                        for hook in (TENSOR_HOOKS.get(p) or {}).values():
                            self._collect(hook, depth + 1)
                for name in dir(type(value)):            # its methods f may call (a property's
                    held = getattr(type(value), name, None)   # getter too)
                    for attr in _functions_in(held):
                        if _is_user(attr.__code__):
                            self._collect(attr, depth + 1)
                    if isinstance(held, property) and type(held.fget) is operator.attrgetter:
                        self._value(held.fget, depth)     # property(attrgetter("_h")): the names
                for v in list(getattr(value, "__dict__", {}).values()):
                    if isinstance(v, (types.FunctionType, functools.partial, types.MethodType)):
                        self._collect(v, depth + 1)       # a function it holds (self.act = a
                        continue                          # closure): what that reads
                    if (_callable_object(v) or isinstance(v, _module_class())) and depth < _DEPTH:
                        self._value(v, depth + 1)         # self.act = Scale(2.0), ns.model: their
                        continue                          # attributes (and submodules')
                    if type(v).__module__.startswith("tinytensor.optim") and depth < _DEPTH:
                        # an optimizer or a scheduler it holds (self.opt): read by identity, its
                        # attributes the code names one by one (its steps are program lines)
                        self._value(v, depth + 1)
            inner = _attr(value, "fun")
            if callable(value) and callable(inner):       # a compiled function inside f
                self._collect(inner, depth + 1)

    # ----- the functions that ran -----
    def enter(self):
        self.before = self._state()
        self.settings_before = self._settings()
        self.saved = self._python_state()
        self.cache_calls = {k: c.cache_info()[:2] for k, c in self.caches.items()}
        for t in self._tensors():          # Tensors f can reach: live inputs from the start, so
            self.tracer.live(t)            # that reads of their values or flags are noted
        self._previous = sys.getprofile()
        codes = self.codes
        tracer = self.tracer

        reads = self.optim_reads

        def profile(frame, event, arg):
            if event == "call":
                code = frame.f_code
                if code in _RECORDING_WARNINGS and getattr(frame.f_locals.get("self"), "_record", False) \
                        and frame.f_back is not None and _is_user(frame.f_back.f_code):
                    tracer.warnings_recorded += 1 if code is _RECORDING_WARNINGS[0] else -1
                elif code in _LOGGER_LEVEL:              # lg.info(...), lg.isEnabledFor(...): the
                    logger = frame.f_locals.get("self")  # logger's level decides: a guard
                    if logger is not None:
                        self.loggers[id(logger)] = logger
                elif code.co_name == "handle" and tracer.laundered is None \
                        and isinstance(frame.f_locals.get("self"), logging.Handler):
                    tracer.laundered = (
                        "logged a record that reaches a handler (a logger's info(), warning(), ...); "
                        "the handler's output is Python state the program would not repeat on later "
                        "calls. Log outside the compiled function (return the values to log), or "
                        "call it uncompiled")
                if code not in codes and _is_user(code):
                    codes[code] = frame.f_globals
                elif code is _SINGLEDISPATCH and tracer.laundered is None and not tracer.depth_inside:
                    args = frame.f_locals.get("args") or ()     # functools.singledispatch's wrapper
                    if args and isinstance(args[0], Tensor) and tracer.passed_as_array(args[0]):
                        tracer.laundered = (
                            "dispatched a functools.singledispatch function on an array argument, "
                            "which is a Tensor inside the compiled function (eagerly an np.ndarray): "
                            "it would take the Tensor's implementation. Pass a Tensor, or call the "
                            "function uncompiled")
                elif code.co_filename.startswith(_OPTIM) and code.co_name not in _STEPS \
                        and frame.f_back is not None and _is_user(frame.f_back.f_code):
                    owner = frame.f_locals.get("self")      # sched.get_last_lr(), opt.state_dict()
                    if owner is not None:
                        reads[id(owner)] = owner
                        if tracer.scheduled and tracer.read_after_step is None:   # after a schedule
                            tracer.read_after_step = f"called {type(owner).__name__}.{code.co_name}()"
                caller = frame.f_back
                if tracer.laundered is None and caller is not None and _is_user(caller.f_code) \
                        and _library(code):
                    # a library's Python function (SciPy's) given a traced NumPy array (t.data, a
                    # mask): it hands it on as a plain array (np.asarray), whose work nobody sees
                    name = _untaken_argument(frame, _tainted)
                    if name is not None:
                        tracer.laundered = (
                            f"called {frame.f_globals.get('__name__', '?')}.{code.co_name}(...) at "
                            f"{os.path.basename(caller.f_code.co_filename)}:{caller.f_lineno} with a NumPy "
                            f"array computed from traced data as `{name}` (t.data, a mask); that library "
                            f"computes on plain arrays, where the recording cannot see it, so the program "
                            f"would keep this call's result. Use tinytensor's functions (tt.scipy, tt.*) "
                            f"or NumPy's on the array, or call the function uncompiled")
                if code in _numpy_implementations() and tracer.laundered is None and caller is not None \
                        and _is_user(caller.f_code):
                    # NumPy's function ran without handing a traced argument to tinytensor (its
                    # dispatcher does not name that argument: np.fill_diagonal's val): its
                    # buffer would be read where nobody sees it
                    name = _untaken_argument(frame, _tainted if code in _UNDISPATCHED else self._traced)
                    if name is not None:
                        tracer.laundered = (
                            f"called np.{code.co_name}(...) at {os.path.basename(caller.f_code.co_filename)}:"
                            f"{caller.f_lineno} with a value computed from traced data as `{name}`, an "
                            f"argument NumPy reads directly, where the recording cannot see it, so the "
                            f"program would keep this call's values. Compute it with np.where(...) or "
                            f"tinytensor operations, or call the function uncompiled")
            elif event == "c_call" and type(getattr(arg, "__self__", None)) is _Tainted \
                    and tracer.laundered is None and not tracer.depth_inside and _is_user(frame.f_code) \
                    and getattr(arg, "__name__", "") not in _SAFE_C_METHODS:
                # NumPy's own C method run on a traced array (np.ndarray.item(t.data, 1), an
                # ndarray method the recording does not wrap): it reads the buffer unseen
                name = getattr(arg, "__name__", "?")
                tracer.laundered = (
                    f"called NumPy's own ndarray.{name} on an array computed from traced data at "
                    f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}; it reads the "
                    f"buffer in C, where the recording cannot see it, so the program would keep this "
                    f"call's values. Call the array's methods as methods (t.data.item(1), "
                    f"t.data[0, 0], t.data.tolist()), use NumPy functions or tinytensor operations, "
                    f"or call the function uncompiled")
            elif event == "c_call" and type(getattr(arg, "__self__", None)) is np.ndarray \
                    and getattr(arg, "__name__", "") in _ARRAY_ARGUMENT_METHODS and tracer.laundered is None \
                    and not tracer.depth_inside and _is_user(frame.f_code) \
                    and _loads_traced(frame, _tainted):
                # H.dot(x.data): a plain array's C method given a traced array reads its buffer
                tracer.laundered = (
                    f"called ndarray.{arg.__name__} of a plain NumPy array at "
                    f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno} with a value "
                    f"computed from traced data; the method reads it in C, where the recording "
                    f"cannot see it, so the program would keep this call's values. Use NumPy's "
                    f"function (np.{arg.__name__}(array, ...): recorded), or call the function uncompiled")
            elif event == "c_call" and tracer.laundered is None and not tracer.depth_inside \
                    and (what := _outside_value(arg)) is not None and _outside_caller(frame):
                tracer.laundered = (
                    f"called {what} at {os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno} "
                    f"while being recorded: a value from outside the program (a clock, a file, the "
                    f"process, a random state), which changes between calls, so the program would "
                    f"keep this call's. Read it outside and pass it in as an argument, draw with "
                    f"tinytensor (tt.randn(..., rng=rng)), or call the function uncompiled")
            elif event == "c_call" and arg in _LAUNDERING and tracer.laundered is None \
                    and frame.f_code.co_filename.startswith(_LIBRARY_CODE) and not tracer.depth_inside \
                    and any(type(v) is _Tainted for v in frame.f_locals.values()):
                # tinytensor's own code converting a traced array to a plain one (np.asarray drops
                # what makes it traced): what it computes from it would be frozen
                tracer.laundered = (
                    f"handed a NumPy array computed from traced data (t.data, a mask, an array made "
                    f"from a number argument) to tinytensor's {frame.f_code.co_name}() "
                    f"({os.path.relpath(frame.f_code.co_filename, _LIBRARY_ROOT)}:{frame.f_lineno}), "
                    f"which converts it to a plain array the recording cannot follow; pass a Tensor "
                    f"(tt.tensor(...)), or call the function uncompiled")
            elif event == "c_call" and (arg in _LAUNDERING or _reads_buffer(arg)) \
                    and (id(frame) in tracer.tainted_frames or _is_user(frame.f_code)
                         and _loads_traced(frame, _tainted) or _numpy_helper_of_user(frame)) \
                    and tracer.laundered is None and not _literal_call(frame, arg):
                # NumPy hands np.asarray(mask) on as a plain array whose operations nobody can
                # note: where the calling function holds traced arrays, it is refused
                tracer.laundered = (
                    f"called {arg.__name__}(...) at {os.path.basename(frame.f_code.co_filename)}:"
                    f"{frame.f_lineno} in a function that holds NumPy arrays computed from traced values (a "
                    f"comparison's mask, t.data, t.numpy()); NumPy hands such an array on as a plain one "
                    f"whose operations the recording cannot see, so its values would be frozen. Use the "
                    f"array as it is (its NumPy operations are recorded), tinytensor operations, or call "
                    f"the function uncompiled")
        sys.setprofile(profile)
        _random_patches(+1)
        self._tracing = sys.gettrace() is None     # (a debugger's or coverage's tracer is left alone)
        if self._tracing:
            sys.settrace(subscripts.tracer(_is_user, self._subscript))

    def _subscript(self, frame, site):
        """A subscript user code is about to run: refused where NumPy would read or write a plain
        array through traced values in C (see subscripts). Or a NumPy scalar type's call, or the
        instruction pushing its argument (subscripts._scalar_calls)."""
        tracer = self.tracer
        kind = site[0]
        if kind == "mark" or kind == "mark+":
            self.marks[id(frame)] = tracer.made
            if kind == "mark":
                return
            site = site[1]
        elif kind == "scalar":
            return self._scalar_call(frame, site)
        if tracer.laundered is None and not tracer.depth_inside:
            refusal = subscripts.check(frame, site, self._traced)
            if refusal is not None:
                tracer.laundered = refusal

    def _scalar_call(self, frame, site):
        """np.int64(...) (a NumPy scalar type) about to be called on one argument: a traced 0-d
        array (a name's value, or the one the argument's instruction made) is read by NumPy in C
        into a NumPy scalar; its value is a guard of the program, as float(t) is."""
        tracer = self.tracer
        if tracer.depth_inside:
            return
        producer, name = site[1], site[2]
        if producer.opname in _LOADS:
            value = _loaded(frame, producer)
        elif tracer.made > self.marks.get(id(frame), tracer.made):
            value = tracer.last_made
        else:
            return
        if type(value) is _Tainted and value.ndim == 0 and tracer.var_of(value) is not None:
            tracer.guard(_item, value, np.ndarray.view(value, np.ndarray).item(),
                         f"np.{name}() of a traced value")

    def _traced(self, value):
        if type(value) is _Tainted or isinstance(value, Tensor) and self.tracer.var_of(value) is not None:
            return True
        return type(value) in (list, tuple) and any(self._traced(v) for v in value[:32])

    def exit(self):
        sys.setprofile(self._previous)
        _random_patches(-1)
        if self._tracing:
            sys.settrace(None)
        for k, c in self.caches.items():        # a functools.cache f called (a hit runs no code)
            if c.cache_info()[:2] != self.cache_calls.get(k) and self.tracer.laundered is None:
                self.tracer.laundered = (
                    f"called the cached function {c.__wrapped__.__qualname__!r}: what a functools.cache "
                    f"returns depends on what it holds, which the program cannot see (clearing it would "
                    f"not be noticed). Call it outside and pass its value in as an argument, or call the "
                    f"function uncompiled")

    def _tensors(self):
        """The Tensors held by the closures and globals of the user functions found without
        running, and by the attributes of the objects they hold."""
        found = {}
        for f in self.functions.values():
            values = []
            for cell in f.__closure__ or ():
                try:
                    values.append(cell.cell_contents)
                except ValueError:
                    pass
            values += [f.__globals__[n] for n in _global_names(f.__code__) if n in f.__globals__]
            for v in values:
                _tensors_of(v, found)
        for obj in self.objects.values():
            _tensors_of(obj, found, itself=False)
            for v in getattr(obj, "__dict__", {}).values():
                _tensors_of(v, found)
        return found.values()

    def held_arrays(self):
        """The NumPy arrays f holds from before the call (closed over, globals it reads, its
        defaults): returned, or a view of one returned, they are those arrays, as eagerly."""
        found = []
        for f in self._functions():
            values = []
            for cell in f.__closure__ or ():
                try:
                    values.append(cell.cell_contents)
                except ValueError:
                    pass
            values += [f.__globals__[n] for n in _global_names(f.__code__) if n in f.__globals__]
            values += list(f.__defaults__ or ())
            found += [v for v in values if type(v) is np.ndarray]
        return found

    def _functions(self):
        """The user functions found without running whose code ran while recording (their
        closure cells, globals and defaults are guarded); code that ran with no function found
        (a helper reached through an object made at run time) has its globals guarded. The
        hooks of the modules the call reached count as found."""
        for m in self.tracer.modules:
            for name in ("_forward_hooks", "_forward_pre_hooks"):
                for hook, _ in vars(m).get(name, {}).values():
                    self._collect(hook, 0)
        return [f for f in self.functions.values() if f.__code__ in self.codes or id(f) in self.always]

    def _sources(self):
        """(reader expression, object, what) triples: each value the result may depend on, read
        in the cheapest form that still sees every change (see _reader)."""
        readers, seen = [], set()

        def absent(glob, code):
            """The names code reads as globals that are builtins now (`abs`, `len`): a global of
            that name defined later shadows the builtin."""
            names = vars(builtins)            # (not hasattr: the module's own __eq__, __class__)
            missing = tuple(n for n in _global_names(code) if n not in glob and n in names)
            for n in missing:                 # one the user set on the builtins module (builtins.K = 2)
                value = vars(builtins)[n]
                if not isinstance(value, (type, types.BuiltinFunctionType)) and n not in _BUILTIN_NAMES:
                    add(f"{{}}.get({n!r})", vars(builtins), f"builtins.{n}", value)
            if "globals" in code.co_names:    # globals().get("NAME"), globals()["NAME"]: the names
                for n in _strings(code):      # spelled as strings, their presence and values
                    if n.isidentifier():
                        add(f"{{}}.get({n!r})", glob, f"the global {n} (read through globals())",
                            glob.get(n))
            if missing:
                key = (f"{{}}.keys().isdisjoint({missing!r})", id(glob))
                if key not in seen:
                    seen.add(key)
                    readers.append((key[0], glob, f"no global shadows the builtins {', '.join(missing)}"))

        def add(form, holder, what, value):
            if id(value) in self.objects and form != "{}":
                expression = f"id({form})"        # its attributes are guarded one by one below
            else:
                expression = _reader(form, value)
            reference = self.weak.get(id(holder))
            if reference is not None:             # an object reached through a weakref.ref: read
                expression = expression.replace("{}", "dr({})")   # through it (dead: _DEAD)
                holder = reference
            elif type(holder) in weakref.ProxyTypes:
                expression = expression.replace("{}", "dp({})")   # a proxy: dead, _DEAD
            key = (expression, id(holder))
            if key not in seen:
                seen.add(key)
                readers.append((expression, holder, what))

        ran, spelled = set(self.names), set()         # attribute names the code that ran can read;
        for code in list(self.codes) + [f.__code__ for f in self._functions()]:
            ran.update(_names(code))                  # those it spells as strings (getattr(o, "t",
            spelled.update(_all_strings(code))        # default), hasattr): their absence is guarded
        for f in self._functions():
            for k, cell in enumerate(f.__closure__ or ()):
                try:
                    value = cell.cell_contents
                except ValueError:
                    continue
                what = f"{f.__code__.co_freevars[k]} (closed over by {f.__qualname__})"
                add("{}.cell_contents", cell, what, value)
            glob = f.__globals__
            for name in _global_names(f.__code__):
                if name in glob:
                    add(f"{{}}.get({name!r})", glob, f"the global {name}", glob[name])
            absent(glob, f.__code__)
            if f.__defaults__:
                add("{}.__defaults__", f, f"the defaults of {f.__qualname__}", f.__defaults__)
            readers.append(("id({}.__code__)", f, f"the code of {f.__qualname__}"))
            for name in sorted(set(f.__dict__) & ran):   # helper.scale = 2.0, read inside
                if not name.startswith("__") or name == "__wrapped__":
                    add(f"{{}}.__dict__.get({name!r})", f, f"{f.__qualname__}.{name}", f.__dict__[name])
            if f.__kwdefaults__:
                add("{}.__kwdefaults__", f, f"the keyword defaults of {f.__qualname__}", f.__kwdefaults__)
        ran_functions = {id(f) for f in self._functions()}
        for f in self.functions.values():             # a function f reaches but never calls:
            if id(f) not in ran_functions:            # the attributes it holds that f reads
                for name in sorted(set(f.__dict__) & ran):     # (h.act = np.exp; h.act(x))
                    if not name.startswith("__") or name == "__wrapped__":
                        add(f"{{}}.__dict__.get({name!r})", f, f"{f.__qualname__}.{name}", f.__dict__[name])
        for code, glob in self.codes.items():         # code that ran without a function found
            for name in _global_names(code):
                if name in glob:
                    add(f"{{}}.get({name!r})", glob, f"the global {name}", glob[name])
            absent(glob, code)
        for code, glob in self.codes.items():           # what code reached at run time names
            for name in _global_names(code):
                if name in glob:
                    self._value(glob[name], 1)
        for code in self.codes:                         # NumPy's error handling read by it
            if "geterr" in _names(code):
                readers.append(("tuple(sorted({}.geterr().items()))", np,
                                "NumPy's error handling (np.geterr())"))
                break
        for code in self.codes:                         # NumPy's print options, read by the text
            if not _TEXT_NAMES.isdisjoint(_names(code)) or _formats(code):   # of arrays f formats
                readers.append(("tuple(sorted({}.get_printoptions().items(), key=str))", np,
                                "NumPy's print options (np.set_printoptions)"))
                break
        for code in self.codes:                         # os.environ read by the code that ran
            if not {"environ", "getenv"}.isdisjoint(_names(code)):
                readers.append(("tuple({}.environ.items())", os, "os.environ"))
                break
        for code in self.codes:       # a user's module looked up by name (sys.modules["m"],
            for name in _all_strings(code):             # importlib.import_module("m"))
                module = sys.modules.get(name)
                if isinstance(module, types.ModuleType) and _user_module(module):
                    add(f"{{}}.get({name!r})", sys.modules, f"sys.modules[{name!r}]", module)
                    self.objects.setdefault(id(module), module)
        named = {p for n in spelled for p in n.split(".") if p.isidentifier()} if "attrgetter" in ran \
            else set()                                 # (attrgetter("sub.k"): both names)
        whole = not {"vars", "__dict__", "getattr"}.isdisjoint(ran)   # f reads whole __dict__s
        looked_up = {n for n in spelled if n.isidentifier()} if not {"getattr", "hasattr"}.isdisjoint(ran) \
            else set()                                 # attributes f may look up by a string
        # (vars(ns)), or attributes by names it computes (getattr(o, names[0]))
        records = bool(ran & _WHOLE_READS)      # code reading a record's fields all at once
        for obj in self.objects.values():
            if isinstance(obj, _module_class()):
                add("{}", obj, f"the mode and attributes of {type(obj).__name__}", obj)
                continue
            if _is_iterator(obj):
                add("{}", obj, f"the iterator {type(obj).__name__}", obj)
                continue
            if isinstance(obj, type) and obj.__module__ not in _NOT_USER_MODULES:
                # a classmethod's class (B.f with f found on A): its attributes and its bases',
                # so that one set on B later (shadowing A's) is seen
                add("{}", obj, f"the class {obj.__name__}", obj)
            if isinstance(obj, _WEAK_HOLDERS):    # its members by identity, kept alive by none
                readers.append(("wm({})", obj, f"the members of {type(obj).__name__}"))
            elif isinstance(obj, _ABSTRACT) and not isinstance(obj, (str, bytes)):
                # a mapping or sequence of its own class (a ChainMap, a UserDict, a
                # WeakValueDictionary): its items, as a dict's, besides its attributes below
                add("{}", obj, f"the items of {type(obj).__name__}", obj)
            own = getattr(obj, "__dict__", None)
            label = obj.__name__ if isinstance(obj, types.ModuleType) else type(obj).__name__
            if own is not None and not type(obj).__module__.startswith("tinytensor.optim") and (
                    whole or records and _data_holder(obj) or any(
                        isinstance(vars(c).get(n), types.FunctionType)
                        for c in type(obj).__mro__ for n in _DYNAMIC)):
                # (an optimizer's or a scheduler's steps, lines of the program, write its state
                # on every call: the attributes the code names are guarded one by one)
                # (a SimpleNamespace or a dataclass: C code reads every field, ns == other, repr(),
                # dataclasses.astuple, without naming them)
                # attributes made up by its own __getattr__: which names it reads cannot be told
                add("{}.__dict__", obj, f"the attributes of {label} (it defines __getattr__)", own)
            classes = () if isinstance(obj, types.ModuleType) else type(obj).__mro__
            call = _class_attribute(type(obj), "__call__") if not isinstance(obj, types.ModuleType) else None
            if type(call) is types.FunctionType and _is_user(call.__code__):   # obj(x): its class's
                add("ca(type({}), '__call__')", obj, f"{label}.__call__", call)   # __call__
            for name in sorted(ran | named | looked_up):   # (named: attrgetter("k")(obj) made inside)
                where = [c for c in classes if name in vars(c)]
                if not where and name in looked_up and classes:   # getattr(obj, "scale", 1.0),
                    add(f"getattr(type({{}}), {name!r}, None)", obj,     # hasattr: that its class
                        f"{label}.{name} (absent from its class)", None)  # (or one given it) lacks it
                if name not in ran and not where and (own is None or name not in own):
                    continue
                written = [(g, k) for g, k in self.tracer.group_stores
                           if name == "param_groups" and any(g is h for h in own.get(name, ()))] \
                    if own is not None else []
                if written:                           # what the program writes itself (the
                    view = _Unwritten(obj, written)   # learning rate of a number argument): not
                    add("{}()", view, f"{label}.param_groups (but what f writes into them)", view())
                elif own is not None and (name in own or where or name in spelled):
                    what = f"{label}.{name}"          # an instance attribute (one may shadow the
                    add(f"{{}}.__dict__.get({name!r})", obj, what, own.get(name))    # class's later)
                if where:
                    value = vars(where[0])[name]
                    if isinstance(value, types.MemberDescriptorType) or isinstance(
                            value, types.GetSetDescriptorType) and not name.startswith("__"):
                        # a __slots__ attribute, or one a C type computes (ctypes' c_double.value)
                        add(f"getattr({{}}, {name!r}, None)", obj, f"{label}.{name}",
                            getattr(obj, name, None))
                    elif type(value) in (classmethod, functools.partialmethod):   # as the class
                        add(f"ca(type({{}}), {name!r})", obj, f"{label}.{name} (its class's)",   # holds
                            value)        # it, not the new method or function its __get__ makes
                    else:                                     # a value, or what a descriptor of
                        add(f"getattr(type({{}}), {name!r}, None)", obj,   # the user's gives
                            f"{label}.{name} (its class's)", value)
        for p in self.partials.values():
            add("{}", p, f"the arguments of {p!r}"[:80], p)
        for m in self.tracer.modules:
            add("{}", m, f"the mode and attributes of {type(m).__name__}", m)
        if self.tracer.modules:
            readers.append(("{}()", _Structure(self.tracer.modules),
                            "the submodules of the modules it calls"))
        for obj in self.optim_reads.values():   # f called a method that reads its state
            readers.append(("{}.fingerprint()", _Whole(obj), f"the state of {type(obj).__name__} (f reads it "
                                                   f"through its methods)"))
        for m in self.library_modules.values():   # np.pi, sys.dont_write_bytecode: a library
            own = vars(m)                         # module's numbers, strings and flags the code
            for name in sorted(ran & own.keys()):  # names (set outside: np.x = 2)
                if type(own[name]) in (int, float, bool, str, type(None)):
                    add(f"{{}}.__dict__.get({name!r})", m, f"{m.__name__}.{name}", own[name])
        readers.append(("{}.getrecursionlimit()", sys, "the recursion limit"))   # (lowered: eagerly
        #                                         a deep recursion f ran raises RecursionError)
        for prim in self.tracer.user_primitives.values():   # prim.defvjp(...) since: its new rules
            readers.append(("({}.fun, {}.vjps, {}.joint_vjp, {}.jvps, {}.joint_jvp)", prim,
                            f"the rules of the primitive {prim.name}"))
        for lg in self.loggers.values():      # lg.debug(...) runs or not by the logger's level
            readers.append(("lv({})", lg, f"the level of the logger {lg.name!r}"))
        for r in self.weak_refs.values():     # a weak reference's object gone (`r() is None`,
            readers.append(("wa({})", r, "whether the object of a weak reference is alive"))  # a proxy)
        if self.tracer.lives:          # a sweep inside runs the hooks of the parameters it reaches
            readers.append(("{}[0]", LEAF_HOOKS, "the gradient hooks registered on parameters"))
        return readers

    def _python_state(self):
        """What f may change in place that a refusal puts back (put_back): the lists, dicts and
        sets its functions hold (closures, globals, defaults) and the objects it reaches hold as
        attributes, the optimizers' parameter groups, the modes of the Modules it reaches, and the
        random generators it can draw from, as they were before the call."""
        containers, seen = [], set()

        def keep(v, depth=0):
            if type(v) in (list, dict, set) and id(v) not in seen and len(v) <= _MAX_ITEMS:
                seen.add(id(v))
                containers.append((v, v.copy()))
                if depth < 2 and type(v) is not set:        # (a log list inside a config dict)
                    for item in list(v.values() if type(v) is dict else v):
                        keep(item, depth + 1)

        for f in list(self.functions.values()):    # (all found: none has run yet)
            for cell in f.__closure__ or ():
                try:
                    keep(cell.cell_contents)
                except ValueError:
                    pass
            for n in _global_names(f.__code__):
                keep(f.__globals__.get(n))
            for v in f.__defaults__ or ():
                keep(v)
        modules = []
        for obj in self.objects.values():
            for v in list(getattr(obj, "__dict__", {}).values()):
                keep(v)
            if type(obj).__module__.startswith("tinytensor.optim"):
                for group in getattr(obj, "param_groups", ()):
                    keep(group)
            if isinstance(obj, _module_class()):
                modules += [(m, m.training) for m in obj.modules()]
        from .. import draws
        roots = [*self.functions.values(), *self.objects.values()]
        generators = [(g, g.get_state() if isinstance(g, np.random.RandomState) else g.bit_generator.state)
                      for g in draws.generators_in(*roots)]
        attributes = [(own, dict(own)) for obj in self.objects.values()      # (`self.calls += 1`)
                      if not isinstance(obj, types.ModuleType)
                      and type(own := getattr(obj, "__dict__", None)) is dict]
        return containers, modules, generators, attributes

    def put_back(self):
        """A refusal: the Python state f changed while recorded, as it was (see _python_state)."""
        containers, modules, generators, attributes = getattr(self, "saved", ((), (), (), ()))
        for own, saved in attributes:       # the objects' attributes f set (first: a Module's mode
            for k in [k for k in own if k not in saved]:     # below is put back after them)
                del own[k]
            for k, v in saved.items():
                if own.get(k, _UNSET) is not v:
                    own[k] = v
        for v, copy in containers:      # (item by item: `!=` of Tensors is elementwise)
            if len(v) != len(copy) or any(a is not b for a, b in zip(v, copy)) or type(v) is dict \
                    and any(v.get(k, _UNSET) is not copy[k] for k in copy):
                if type(v) is list:
                    v[:] = copy
                else:
                    v.clear()
                    v.update(copy)
        for m, training in modules:
            if m.training != training:
                vars(m)["training"] = training
        for g, state in [*generators, *self.tracer.initial_states.items()]:
            if isinstance(g, np.random.RandomState):
                g.set_state(state)
            elif g.bit_generator.state != state:
                g.bit_generator.state = state

    def _state(self):
        """The fingerprint of everything found without running (compared after the recording)."""
        values = []
        for f in self.functions.values():
            for cell in f.__closure__ or ():
                try:
                    values.append(_state_of(cell.cell_contents))
                except ValueError:
                    values.append(None)
            for name in _global_names(f.__code__):
                if name in f.__globals__:
                    values.append((name, _state_of(f.__globals__[name])))
            values.append(_fingerprint(f.__defaults__))          # a mutable default f appends to
            values.append(_fingerprint(f.__kwdefaults__))
        for obj in self.objects.values():
            if not isinstance(obj, _WEAK_CACHES):     # a cache f may fill (singledispatch's): a
                values.append(_state_of(obj))         # guard, not state f changes
        for p in self.partials.values():
            values.append(_fingerprint(p))
        values.append(tuple(os.environ.items()))       # os.environ["K"] = ... inside f
        return values

    def changed(self):
        """Whether f changed Python state it reads while being recorded (the program would not
        repeat the change; a cache it fills is recorded again, see Compiled._record)."""
        if self._state() != self.before:
            return True
        written = frozenset((id(g), k) for g, k in self.tracer.group_lines)
        before = [[(g, ids, tuple(item for item in items if (g, item[0]) not in written))
                   for g, ids, items in groups] for groups in self.settings_before]
        return self._settings(written) != before

    def _settings(self, written=frozenset()):
        """The settings of the optimizers and schedulers f reaches (`g["lr"] *= 0.5` before the
        step is state f changes; the steps' own changes are put back), as (group, its items)
        pairs, but for `written`: the (id(group), key) a number argument is written into by a
        line of the program (_SetGroup, tracer.group_lines)."""
        values = []
        for obj in self.objects.values():
            if not type(obj).__module__.startswith("tinytensor.optim"):
                continue
            groups = vars(obj).get("param_groups")    # (an optimizer; a scheduler's steps change
            if isinstance(groups, list):              # attributes of its own, not all put back)
                values.append([(id(g), tuple(map(id, g["params"])), tuple(
                    (k, _fingerprint(v)) for k, v in g.items()
                    if k != "params" and (id(g), k) not in written)) for g in groups])
        return values

    @staticmethod
    def changed_message(name):
        return (f"tt.compile: {name} changed Python state while being recorded (appended to a list "
                f"it closes over, rebound a nonlocal or global, set an attribute of an object it "
                f"reads, changed an optimizer's settings), and again when recorded on the state it left; the "
                f"compiled program would not repeat that. Keep such updates outside the compiled "
                f"function (return the values instead), or call it uncompiled")

    def guard(self):
        """One generated function returning the tuple of every source's fingerprint (None when
        there is nothing to guard)."""
        readers = self._sources()
        if not readers:
            return None
        namespace = {"fp": _fingerprint, "ms": _module_state, "cs": _class_state, "av": _array_key,
                     "dr": _dereference, "ca": _class_attribute, "dp": _through_proxy,
                     "wa": _weak_alive, "wm": _weak_members, "lv": _logger_level}
        parts = []
        for i, (form, obj, _) in enumerate(readers):
            namespace[f"o{i}"] = obj
            parts.append("(" + form.replace("{}", f"o{i}") + ")")
        source = "def guard():\n    return (" + ", ".join(parts) + ",)\n"
        exec(builtins.compile(source, "<tt.compile guard>", "exec"), namespace)
        guard = namespace["guard"]
        guard.names = [what for *_, what in readers]
        guard.ok = _fast_check(parts, namespace)
        return guard


def _logger_level(logger):
    """What decides what a logger's call does: whether isEnabledFor(level) holds (its effective
    level, its own or an ancestor's, whether it is disabled, logging.disable(...)) and the
    handlers a record would reach (one added since: a record the program would not give)."""
    handlers, at = [], logger
    while at is not None:
        handlers.extend(at.handlers)
        at = at.parent if at.propagate else None
    return logger.getEffectiveLevel(), logger.disabled, logger.manager.disable, tuple(handlers)


def _fast_check(parts, namespace):
    """`ok()`: whether every guarded value is still what it is now, without building the tuple:
    `E is K` for a value read by identity (`id(E)`: K is the object itself, kept alive), `E == K`
    for the others, and-ed (the first change stops it). A call whose ok() is False takes the
    guard's tuple to find which program fits."""
    tests, constants, alive = [], {}, []
    for part in parts:
        node = ast.parse(part, mode="eval").body
        for sub in node.elts if isinstance(node, ast.Tuple) else [node]:
            name = f"k{len(constants)}"
            call = sub.func.id if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) \
                and len(sub.args) == 1 and not sub.keywords else None
            expression = ast.unparse(sub.args[0] if call in ("id", "fp") else sub)
            value = eval(builtins.compile(expression, "<tt.compile guard>", "eval"), namespace)
            if call == "fp" and _items_by_identity(value):
                # a list or tuple of Tensors, arrays, functions (a parameter list), which the
                # fingerprint reads by identity item by item: the same test, without the calls
                v = f"_v{len(constants)}"
                items = [f"{v}[{i}] is {name}_{i}" for i in range(len(value))]
                constants.update({f"{name}_{i}": x for i, x in enumerate(value)})
                constants[name] = type(value)
                head = [f"type({v} := {expression}) is {name}", f"len({v}) == {len(value)}"]
                tests.append(" and ".join(head + items))
                continue
            if call != "id":              # what its fingerprint names by id: kept, so no id is reused
                _alive(value, alive)          # (an `id` part holds the object itself)
            constants[name] = _fingerprint(value) if call == "fp" else value
            if call == "id":
                tests.append(f"{expression} is {name}")
            else:
                tests.append(f"{'fp(' + expression + ')' if call == 'fp' else expression} == {name}")
    source = "def ok():\n    return (" + "\n            and ".join(tests) + ")\n"
    scope = {**namespace, **constants, "_alive": alive}
    exec(builtins.compile(source, "<tt.compile guard>", "exec"), scope)
    return scope["ok"]


def _alive(x, out, depth=0):
    """Append to `out` the objects x's fingerprint reads by identity (the items of its
    containers, the values of its attributes): while a guard holds them, none of their ids can
    be given to a new object (a class replaced after the old one was freed) that would pass it."""
    if type(x) in _SCALARS or x is None or depth > _DEPTH:
        return
    out.append(x)
    if isinstance(x, (str, bytes, np.ndarray, Tensor, types.ModuleType)):
        return
    if isinstance(x, types.MethodType):
        out.extend((x.__func__, x.__self__))
        return
    if isinstance(x, (dict, collections.abc.Mapping)):
        items = [v for kv in list(x.items())[:_MAX_ITEMS] for v in kv]
    elif isinstance(x, (list, tuple, set, frozenset) + _ABSTRACT):
        items = list(x)[:_MAX_ITEMS]
    elif isinstance(x, functools.partial):
        items = [x.func, *x.args, *x.keywords.values()]
    else:
        items = [v for k, v in getattr(x, "__dict__", {}).items() if not k.startswith("__")] \
            if not isinstance(x, type) else []
    for v in items:
        _alive(v, out, depth + 1)


_GLOBAL_OPS = frozenset({"LOAD_GLOBAL", "LOAD_NAME", "STORE_GLOBAL", "DELETE_GLOBAL", "STORE_NAME"})
_BY_NAME = frozenset({"globals", "vars", "getattr", "hasattr", "eval", "exec", "__dict__", "modules",
                      "import_module", "__import__", "attrgetter", "itemgetter", "__getattribute__"})


@functools.lru_cache(maxsize=4096)
def _global_names(code):
    """The global names a code object (and the lambdas and comprehensions inside it) reads: its
    LOAD_GLOBAL/LOAD_NAME names and identifier strings (globals()["G"]), not its attribute
    names (`opt.step` reads the attribute step, not a global of that name)."""
    names = [ins.argval for k in _codes(code) for ins in dis.get_instructions(k) if ins.opname in _GLOBAL_OPS]
    if any(not _BY_NAME.isdisjoint(k.co_names) for k in _codes(code)):   # + globals()["G"],
        names += _strings(code)           # vars(module)["G"], getattr(module, "G"): not a plain
    return tuple(dict.fromkeys(names))    # string (group["lr"] does not read a global lr)


def _tensors_of(v, found, itself=True, depth=0):
    """Add to `found` the Tensor v, or every parameter and buffer of the Module v, or every
    parameter of the optimizer v, or the Tensors in the list, tuple or dict v (two levels):
    Tensors f can reach through them (model[0].bias.detach(), opt.param_groups[0]["params"],
    box["w"]) are inputs from the start, their value reads and writes noted."""
    if type(v) in weakref.ProxyTypes and not _weak_alive(v):
        return
    if isinstance(v, Tensor):
        if itself:
            found[id(v)] = v
    elif type(v) in (list, tuple, dict) and depth < 2 and len(v) <= _MAX_ITEMS:
        for x in (v.values() if type(v) is dict else v):
            _tensors_of(x, found, True, depth + 1)
    elif isinstance(v, _module_class()):
        for t in list(v.parameters()) + list(v.buffers()):
            if isinstance(t, Tensor):                  # (a buffer replaced by a NumPy array)
                found[id(t)] = t
    elif _attr(v, "param_groups") is not None and _attr(v, "state") is not None \
            and isinstance(v.param_groups, list):
        for group in v.param_groups:
            for t in group.get("params", ()) if isinstance(group, dict) else ():
                if isinstance(t, Tensor):
                    found[id(t)] = t


_OPTIM = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "optim") + os.sep
_STEPS = frozenset({"step", "zero_grad", "__init__", "_check", "_update", "add_param_group", "params",
                    "load_state_dict"})


class _Whole:
    """An optimizer or a scheduler whose methods f called to read its state (get_last_lr(),
    state_dict()): fingerprinted whole, since those methods read attributes f's code never
    names (a step inside then records again on every call: eager's numbers)."""
    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __eq__(self, other):
        return type(other) is _Whole and other.obj is self.obj

    def __hash__(self):
        return id(self.obj)

    def fingerprint(self):
        obj = self.obj
        return tuple((k, _fingerprint(v, 1)) for k, v in vars(obj).items()) if hasattr(obj, "__dict__") \
            else id(obj)


def _items_by_identity(value):
    """Whether `value` is a short list or tuple that the fingerprint reads item by item by
    identity (Tensors, arrays, functions)."""
    return (type(value) in (list, tuple) and len(value) <= _MAX_ITEMS
            and all(_fingerprint(x, 1) == (type(x), id(x)) for x in value))


_TEXT_NAMES = frozenset({"str", "repr", "format", "print", "array2string", "array_str", "array_repr",
                         "get_printoptions", "printoptions", "format_float_positional",
                         "format_float_scientific"})


@functools.lru_cache(maxsize=4096)
def _formats(code):
    """Whether code (or code inside it) formats a value (an f-string, `%`)."""
    return any(i.opname in ("FORMAT_VALUE", "BUILD_STRING") for k in _codes(code)
               for i in dis.get_instructions(k))


def _codes(code):
    """A code object and the code inside it (its lambdas, comprehensions, nested functions)."""
    yield code
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from _codes(c)


def reads_item(codes, key):
    """Whether the code that ran reads item `key` of a mapping (`g["lr"]`, `g.get("lr")`,
    `g["lr"] *= 0.5`): a value the program writes on every call (a learning rate from a number
    argument) that f also reads is a key instead (see _SetGroup)."""
    for code in codes:
        for k in _codes(code):
            if key not in k.co_consts:
                continue
            ins = list(dis.get_instructions(k))
            for i, x in enumerate(ins):
                if x.opname != "LOAD_CONST" or x.argval != key:
                    continue
                after = ins[i + 1] if i + 1 < len(ins) else None
                before = ins[i - 1] if i else None
                if after is not None and (after.opname in ("BINARY_SUBSCR", "COPY")
                                          or after.opname == "BINARY_OP" and "[" in after.argrepr) \
                        or before is not None and before.opname in ("LOAD_METHOD", "LOAD_ATTR") \
                        and before.argval in ("get", "setdefault", "pop", "__getitem__"):
                    return True
    return False


def _names(code):
    """The names a code object (and the code inside it) can read: the globals and attributes it
    names, and the identifiers it spells as strings (vars(obj)["scale"], getattr(o, "t"))."""
    return [n for k in _codes(code) for n in k.co_names] + _all_strings(code)   # (any string:
    # setattr(m, "scale-x", 1.0) makes an attribute of a name that is not an identifier)


def _all_strings(code):
    """Every string a code object (and the code inside it) holds as a constant, and the
    attribute names its format strings read ("{0.k}".format(o) reads o.k in C)."""
    found = [c for k in _codes(code) for c in k.co_consts if type(c) is str]
    return found + [n for c in found if "{" in c for n in _format_fields(c)]


def _format_fields(text):
    """The attribute and key names a format string's fields read ("{0.k}", "{cfg.lr[0]}")."""
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(text) if f]
    except ValueError:
        return []
    return [p for f in fields for p in re.split(r"[.\[\]]", f)[1:] if p.isidentifier()]


def _strings(code):
    """The identifier strings a code object (and the code inside it) holds as constants."""
    return [c for c in _all_strings(code) if c.isidentifier()]




def _user_module(m):
    """A Python module of the user's: one with a file outside the standard library, the
    installed packages and tinytensor, or one made at run time (types.ModuleType, a module
    exec'd from a string) that is not built into the interpreter."""
    own = vars(m)                      # (not getattr: a PEP 562 __getattr__ may raise anything)
    path = own.get("__file__")
    if path is None:
        return own.get("__name__") not in sys.builtin_module_names and own.get("__spec__") is None
    from .tracer import _NOT_USER
    return not os.path.abspath(path).startswith(_NOT_USER)


def _internal(x):
    """tinytensor's own objects other than Modules, optimizers and schedulers (the engine's
    registries, hooks, weak maps): never guarded."""
    module = type(x).__module__
    return module.startswith("tinytensor") and not module.startswith(("tinytensor.nn", "tinytensor.optim"))


_BUILTIN_NAMES = frozenset(dir(builtins))    # Python's own builtins (at import)


def _container_method(x):
    """Whether x is a bound method of a list, dict, set or tuple (table.get, ks.__getitem__)."""
    return type(x) in (types.BuiltinMethodType, types.MethodWrapperType) and \
        type(getattr(x, "__self__", None)) in (list, dict, set, tuple, collections.deque)


def _functions_in(attr):
    """The Python functions a class attribute runs: a function, a bound classmethod's or a
    staticmethod's function, a property's getter, setter and deleter."""
    if isinstance(attr, property):
        return [f for f in (attr.fget, attr.fset, attr.fdel) if isinstance(f, types.FunctionType)]
    if isinstance(attr, types.MethodType):
        attr = attr.__func__
    return [attr] if isinstance(attr, types.FunctionType) else []


def _reader(form, value):
    """The guard expression reading `value` through `form`, in the cheapest form that sees
    every change: numbers, strings and None by class and value; functions, Python modules,
    arrays, Tensors and classes without number attributes by identity; a class with number
    attributes by those too; a Module by identity, mode, attributes and hooks; containers and
    other objects by fingerprint (their contents)."""
    t = type(value)
    if t is float:
        return f"fp({form})"                          # the sign of a zero too
    if t in weakref.ProxyTypes:
        return f"id({form})"                          # (its object's attributes: through dp)
    if t in (int, bool, str, type(None), complex, bytes):
        return f"{form}.__class__, {form}"
    if isinstance(value, type):
        return f"id({form}), cs({form})" if _class_state(value) else f"id({form})"
    if isinstance(value, types.FunctionType):
        return f"id({form}), id(getattr({form}, '__code__', None))"   # its code swapped too (or
        #                                               it replaced by a ufunc, a class: no code)
    if _container_method(value):
        return f"id({form}), fp({form}.__self__)"     # table.get: what table holds
    if type(value) is np.ndarray:
        return f"av({form})"                          # by its values (see _array_key)
    if isinstance(value, (types.ModuleType, types.BuiltinFunctionType, np.ndarray,
                          Tensor, np.ufunc, np.random.Generator, np.random.RandomState)):
        return f"id({form})"
    if isinstance(value, _module_class()):
        return f"id({form}), ms({form})"
    if callable(value) and not isinstance(value, (functools.partial, types.MethodType)) \
            and not _is_iterator(value):
        return f"id({form})"                          # fp's own answer for a callable object
    return f"fp({form})"


class _Dead:
    """What a guard reads through a weakref.ref whose object is gone: no attributes (every
    guarded value then differs, and f is recorded again, as eager it raises or takes another path)."""


_DEAD = _Dead()


def _is_iterator(x):
    """Whether x is an iterator (a weakref.proxy's type has __next__ whatever it refers to:
    its object's class is asked)."""
    return hasattr(x.__class__ if type(x) in weakref.ProxyTypes else type(x), "__next__")


def _dereference(reference):
    value = reference()
    return _DEAD if value is None else value


def _weak_alive(reference):
    """Whether a weakref.ref's, a WeakMethod's or a proxy's object is alive."""
    if type(reference) in weakref.ProxyTypes:
        try:
            return reference.__class__ is not None
        except ReferenceError:
            return False
    return reference() is not None


def _through_proxy(proxy):
    """A weakref.proxy, or _DEAD where its object is gone (its attributes read through it)."""
    return proxy if _weak_alive(proxy) else _DEAD


def _weak_members(c):
    """A WeakSet's or WeakValueDictionary's members by identity and attributes (fingerprints,
    which keep none of them alive)."""
    if isinstance(c, weakref.WeakSet):
        return tuple((id(v), _fingerprint(v)) for v in c)
    return tuple((k, id(v), _fingerprint(v)) for k, v in c.items())


def _array_key(a):
    """A NumPy array a function reads directly (closed over, a global, a Module's attribute,
    in a container): by identity and by its values, whatever its size, since NumPy code on it
    (`float(X[0, 0])`, `X.mean(0)`, `X[:10] * 2`, `v * 2` before a tinytensor op) runs once, while
    recording, and a change in place must record again. (Comparing a large one costs a pass
    over its bytes on every call: a data set the program reads is better held as a Tensor, or
    passed as an argument, which are inputs read anew on every call.)"""
    if type(a) is not np.ndarray:
        return _fingerprint(a)
    if a.dtype.hasobject:             # its bytes are pointers: by its items (a dict in one too)
        return (id(a), a.shape, a.dtype, _fingerprint(a.ravel().tolist(), 1) if a.size <= _MAX_ITEMS
                else a.tobytes())
    return (id(a), a.shape, a.dtype, a.tobytes())


def describe_change(guard, recorded, now):
    """Which guarded value changed, in words."""
    names = getattr(guard, "names", [])
    for name, a, b in zip(names, recorded or (), now or ()):
        if a != b:
            return f"{name} changed"
    return "a guarded Python value changed"


_FILE = os.path.abspath(__file__)
