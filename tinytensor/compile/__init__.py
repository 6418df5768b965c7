"""Define-then-run: `tt.compile(f)` turns a traced function into straight-line NumPy code.

The first call for a new combination of argument shapes and dtypes (and non-array arguments'
values) records `f` once: every primitive it calls, and, for a transform inside it
(`tt.value_and_grad(loss)`, `tt.jvp`, ...), every rule the sweep applies, as one entry each of a
Wengert list. The list from the arguments to the results is printed as Python source, one line
per entry (`z1 = np.dot(x, W)`, then the adjoint program `g_z1 = ...`), compiled once, and run on
later calls: no Tensor, no tape, no dictionary lookup per op. The same NumPy calls run in the
same order as in the eager call, so the results are the same numbers.

How the recording works (only while tracing; nothing here runs on the eager path):
  * the arguments become untracked Tensors sharing the caller's arrays; `Primitive.__call__`,
    NumPy's non-differentiable functions on Tensors (`ops.numpy_dispatch`) and Tensor
    comparisons are wrapped to note each call whose inputs depend on the arguments;
  * a top-level transform sweeps with the recording sweeps below (`transforms._TRACER`), which
    apply each VJP/JVP rule exactly as `tape.reverse_sweep`/`tape.forward_sweep` do and note the
    rule call as one entry (opaque: masks and labels inside a rule stay live), and return
    Tensors, so code after the transform (an update `p - lr * g`) is recorded too. A transform
    nested inside another one records its sweep with create_graph=True, as in eager mode.
Everything else a traced function does with values is frozen (see `compile`).
"""

import builtins
import functools
import inspect
import itertools
import keyword
import operator
import os
import sys
import threading
import time
import types
import warnings
from collections import OrderedDict

import numpy as np

from .. import draws, ops, tape, transforms
from .. import tensor as tensor_module
from ..state import SHARED, STATE, update_hook
from ..tape import unbroadcast
from ..tensor import Tensor, _init_untracked
from ..weakid import IdentityWeakMap

__all__ = ["compile", "Compiled", "CACHE_SIZE"]

CACHE_SIZE = 32   # programs kept per compiled function (least recently used dropped first)


def compile(f=None, *, check=False, cache_size=CACHE_SIZE):
    """`f` as a define-then-run program: same signature, same results.

    Arguments may be arrays, Tensors (their values are used), Python numbers and nested
    tuples/lists/dicts of them. Array leaves are the program's inputs: a call with new shapes
    or dtypes records `f` again (at most `cache_size` programs are kept). Every other leaf
    (numbers, strings, None) is part of the cache key: a new value records again.

    Limits, as jax.jit's: Python control flow that reads values (`if loss > 1:`, `float(t)`,
    `np.asarray(t)` followed by NumPy) is frozen at the branch taken while tracing; side
    effects (printing, appending to a list, writing into a closed-over array) happen at trace
    time only; closed-over arrays are constants (read at each call, so in-place updates to
    them are seen; rebinding the name is not). With `check=True` the second call (the first
    that replays) runs `f` eagerly as well and raises if any result differs.
    Inside `f`, array arguments are Tensors, and transforms return Tensors.
    """
    if f is None:
        return lambda g: Compiled(g, check=check, cache_size=cache_size)
    return Compiled(f, check=check, cache_size=cache_size)


class Compiled:
    """A compiled function: call it as `f`; `.source` shows the generated program(s)."""

    def __init__(self, f, check=False, cache_size=CACHE_SIZE):
        if not callable(f):
            raise TypeError(f"tt.compile: expected a function, got {type(f).__name__}")
        if cache_size < 1:
            raise ValueError(f"tt.compile: cache_size must be at least 1, got {cache_size}")
        self.fun = f
        self.check = check
        self.cache_size = cache_size
        self.programs = OrderedDict()   # cache key -> _Program
        self.traces = 0                 # how many times f was recorded
        self._checked = False
        self._bound = IdentityWeakMap()     # instance -> its Compiled (see __get__)
        functools.update_wrapper(self, f, updated=())
        if not hasattr(self, "__name__"):
            self.__name__ = type(f).__name__

    def __get__(self, obj, objtype=None):
        """As a method (`@tt.compile` on a method, or `M.cf = tt.compile(M.f)`): one compiled
        function per instance, with `self` bound (its programs, modes and buffers its own)."""
        if obj is None:
            return self
        try:
            bound = self._bound.get(obj)
        except TypeError:        # an instance with no weak references: compiled for this call
            bound = None
        if bound is None:
            bound = Compiled(functools.partial(self.fun, obj), check=self.check,
                             cache_size=self.cache_size)
            bound.__name__ = self.__name__
            try:
                self._bound[obj] = bound
            except TypeError:
                pass
        return bound

    @property
    def source(self):
        """The generated source of every cached program (newest last)."""
        return "\n\n".join(p.source for p in self.programs.values())

    @property
    def trace_seconds(self):
        """Seconds the newest program took to record and generate (the first call's cost)."""
        return next(reversed(self.programs.values())).trace_seconds if self.programs else None

    def __call__(self, *args, **kwargs):
        arrays, key, tensors = [], [len(args)], []
        for a in args:
            if type(a) is np.ndarray:          # _flatten's first case, without the call
                arrays.append(a)
                key.append(a.shape)
                key.append(a.dtype)
            else:
                _flatten(a, arrays, key, tensors)
        if kwargs:
            _flatten(kwargs, arrays, key, tensors)
        if not SHARED.quiet and STATE.hook is not None or tensors and _through(tensors):
            return self._uncompiled(args, kwargs)
        key.append(SHARED.quiet or STATE.grad_enabled)
        key = tuple(key)
        program = self.programs.get(key)
        if program is not None and program.guard is not None:   # modes, closed-over numbers
            modes = program.guard()
            if modes != program.modes:
                key = (key, modes)
                program = self.programs.get(key)
        if program is None:
            program = self._record(args, kwargs, arrays)
            self.programs[key] = program
            if len(self.programs) > self.cache_size:
                self.programs.popitem(last=False)
            return program.run(arrays)
        if len(self.programs) > 1:
            self.programs.move_to_end(key)
        if self.check and (program.reads or not self._checked):
            # the second call, and every call of a program whose trace read values into Python
            # (a branch that may flip on any call)
            self._checked = True
            return self._compare(program, arrays, args, kwargs)
        try:
            return program.function(*arrays)
        except Exception as err:
            raise program.error(err) from err

    def _uncompiled(self, args, kwargs):
        """f itself, as MLX and JAX do for a transformation of a compiled function: inside
        another recording (compiled inside compiled: inlined), on Tensors being recorded (a
        transform, or a tape that backward() must reach through), and under detect_anomaly (the
        engine's checks name the entry and the line)."""
        args, kwargs = _refill((args, kwargs), iter(_as_tensors(args, kwargs)))
        if STATE.recorder is not None or _through(_as_tensors(args, kwargs)):
            return self.fun(*args, **kwargs)
        out = self.fun(*args, **kwargs)       # detect_anomaly: arrays out, as compiled
        leaves, structure = transforms.tree_flatten(out)
        return transforms.tree_unflatten(structure, [
            np.array(x.data) if isinstance(x, Tensor) else x for x in leaves])

    def _record(self, args, kwargs, arrays):
        start = time.perf_counter()
        tracer = _Tracer()
        names = _argument_names(self.fun, args, kwargs)
        if len(names) != len(arrays):
            names = [f"a{i}" for i in range(len(arrays))]
        inputs = [tracer.argument(a, n) for a, n in zip(arrays, names)]
        traced_args, traced_kwargs = _refill((args, kwargs), iter(inputs))
        tracer.watch_generators(self.fun, args, kwargs)
        stamp = STATE.memory_write           # this thread's writes only
        with tracer:
            out = self.fun(*traced_args, **traced_kwargs)
        tracer.check_generators(self.__name__)
        if STATE.memory_write != stamp:
            self._refuse_writes(tracer, stamp)
        if tracer.reads and not self.check:
            warnings.warn(f"tt.compile: {self.__name__} read traced values into Python while being "
                          f"recorded ({'; '.join(tracer.reads)}); the compiled program keeps what they "
                          f"were this time (a branch on them is frozen). Use array operations instead, "
                          f"or tt.compile(f, check=True) to compare with eager calls",
                          RuntimeWarning, stacklevel=3)
        program = _generate(tracer, out, getattr(self.fun, "__name__", "f"))
        program.reads = bool(tracer.reads)
        program.guard = _guard(self.fun, tracer.modules)
        program.modes = None if program.guard is None else program.guard()
        program.trace_seconds = time.perf_counter() - start
        self.traces += 1
        return program

    def _refuse_writes(self, tracer, stamp):
        """f wrote into arrays in place while being recorded (`x += 1` on an argument, a
        BatchNorm's running statistics, an optimizer step): the program does not repeat it.
        Into an argument or a traced value, the program's numbers would differ: an error.
        Elsewhere (a module's buffers), a warning."""
        written = [tensor_module.written_after(a, stamp) for a in tracer.values
                   if isinstance(a, np.ndarray)]
        if builtins.any(written):
            raise RuntimeError(f"tt.compile: {self.__name__} wrote into one of its arguments (or a "
                               f"value computed from them) in place while being recorded (x += ..., "
                               f"x[i] = ..., out=); the compiled program would not repeat it. Write "
                               f"x = x + ... (or tt.where for x[i] = ...) instead")
        warnings.warn(f"tt.compile: {self.__name__} changed arrays in place while being recorded "
                      f"(a BatchNorm's running statistics, an in-place update of a closed-over "
                      f"Tensor); that happened once, now, and the compiled program will not repeat "
                      f"it. Compile such a model's step in eval() mode, or leave it uncompiled",
                      RuntimeWarning, stacklevel=3)

    def _compare(self, program, arrays, args, kwargs):
        compiled = program.run(arrays)
        # Eager on untracked Tensors sharing the arrays, as the recording saw them (some ops
        # differ on plain arrays: crossEntropy(softmax(z)) is computed from z only for Tensors).
        wrapped = []
        for a in arrays:
            t = Tensor.__new__(Tensor)
            _init_untracked(t, a)
            wrapped.append(t)
        eager_args, eager_kwargs = _refill((args, kwargs), iter(wrapped))
        eager = self.fun(*eager_args, **eager_kwargs)
        got, _ = transforms.tree_flatten(compiled)
        want, _ = transforms.tree_flatten(eager)
        if len(got) != len(want):
            raise RuntimeError(f"tt.compile(check=True): {self.__name__} returned {len(want)} "
                               f"leaves eagerly but the compiled program returns {len(got)}")
        for i, (g, w) in enumerate(zip(got, want)):
            w = np.asarray(w.data if isinstance(w, Tensor) else w)
            g = np.asarray(g)
            if g.shape != w.shape or not _close(g, w):
                raise RuntimeError(
                    f"tt.compile(check=True): result {i} of {self.__name__} differs from the eager "
                    f"call (compiled {_summary(g)}, eager {_summary(w)}). The function probably "
                    f"branches on values (if/while on a tensor, float(), np.asarray(...)) or has "
                    f"side effects, which the program froze at trace time. Write the branch with "
                    f"array operations (tt.maximum, masks), or do not compile this function.")
        return compiled


def _store(target, value):
    """target[...] = value (NumPy's same_kind casting, as an in-place operator): a buffer's update."""
    np.copyto(target, value, casting="same_kind")
    return target


_SCALARS = (int, float, bool, str, type(None), complex)


def _guard(f, modules):
    """A function giving what the program depends on besides its arguments, as torch.compile's
    guards: each module's `training` flag and other number/string attributes (Dropout's p, ...),
    and the numbers, strings and arrays f's closure cells and globals hold (arrays by identity:
    an array rebound to another name is another constant). None when there is nothing."""
    readers, objects = [], list(modules)
    while isinstance(f, functools.partial):       # a compiled method: its instance too
        objects += [a for a in f.args if _plain_object(a)]
        f = f.func
    code = getattr(f, "__code__", None)
    if code is not None:
        for cell in f.__closure__ or ():
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            if type(value) in _SCALARS:
                readers.append(lambda cell=cell: cell.cell_contents)
            elif isinstance(value, (np.ndarray, Tensor)):
                readers.append(lambda cell=cell: id(cell.cell_contents))
            elif _plain_object(value):
                objects.append(value)
        glob = getattr(f, "__globals__", {})
        for name in code.co_names:
            value = glob.get(name)
            if type(value) in _SCALARS:
                readers.append(lambda name=name: glob.get(name))
            elif isinstance(value, (np.ndarray, Tensor)):
                readers.append(lambda name=name: id(glob.get(name)))
            elif _plain_object(value):
                objects.append(value)
    seen = set()
    for obj in objects:              # their number attributes (a module's training flag, p, ...)
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        attributes = vars(obj)
        names = tuple(k for k, v in attributes.items() if type(v) in _SCALARS)
        if names:
            readers.append(lambda d=attributes, names=names: tuple([d.get(k) for k in names]))
    if not readers:
        return None
    return lambda: tuple([read() for read in readers])


def _plain_object(x):
    """A user's instance with attributes (a model, a config): not a module, class, function,
    array, or tinytensor's own (its state; the Modules f calls are guarded as they are reached)."""
    return (hasattr(x, "__dict__") and not type(x).__module__.startswith("tinytensor")
            and not isinstance(x, (type, types.ModuleType, types.FunctionType, types.MethodType,
                                   functools.partial, np.ndarray, np.random.Generator, threading.local)))


def _undrawn(generator, name="the function"):
    return RuntimeError(
        f"tt.compile: {name} drew from an np.random.Generator ({generator!r}) past tinytensor "
        f"(one of its own methods, rng.normal(...), rng.random(...)) while being recorded; the "
        f"compiled program would repeat those numbers on every call. Draw with tinytensor "
        f"(tt.randn(..., rng=rng), tt.rand(..., rng=rng), nn.Dropout(p, rng=rng)), which the "
        f"program repeats from the same generator, or pass the numbers in as an argument")


def _as_tensors(args, kwargs):
    """The array leaves of the arguments as Tensors sharing their arrays (Tensors as they are)."""
    leaves = []
    _arrays_and_tensors((args, kwargs), leaves)
    out = []
    for x in leaves:
        if not isinstance(x, Tensor):
            t = _new_tensor(Tensor)
            _init_untracked(t, np.asarray(x))
            x = t
        out.append(x)
    return out


def _arrays_and_tensors(tree, found):
    if isinstance(tree, (np.ndarray, Tensor)):
        found.append(tree)
    elif isinstance(tree, dict):
        for v in tree.values():
            _arrays_and_tensors(v, found)
    elif isinstance(tree, (tuple, list)):
        for v in tree:
            _arrays_and_tensors(v, found)


def _through(tensors):
    """Whether f must run as it is, not compiled, on arguments holding these Tensors: inside a
    transform tracing f, or given a Tensor that the tape records (backward() must reach it)."""
    return STATE.depth > 0 or STATE.grad_enabled and builtins.any(t.requires_grad for t in tensors)


def _close(g, w):
    if g.dtype.kind not in "fc":
        return np.array_equal(g, w)
    eps = np.finfo(np.result_type(g.dtype, w.dtype)).eps
    scale = np.max(np.abs(w[np.isfinite(w)]), initial=0.0)
    return np.allclose(g, w, rtol=8 * eps, atol=8 * eps * scale, equal_nan=True)


def _summary(a):
    return f"shape {a.shape} {a.dtype}, first values {np.ravel(a)[:3]}"


# ----- arguments: array leaves are inputs, everything else is part of the key --------------------
def _flatten(tree, arrays, key, tensors):
    """Collect the array leaves of `tree` into `arrays` and its shape/dtype/value key into `key`
    (and the Tensors among them into `tensors`). Iterating by hand over the common containers:
    this runs on every call."""
    t = type(tree)
    if t is np.ndarray:
        arrays.append(tree)
        key.append(tree.shape)
        key.append(tree.dtype)
    elif t is tuple or t is list:
        key.append(t)
        key.append(len(tree))
        for item in tree:
            _flatten(item, arrays, key, tensors)
    elif t is dict:
        key.append(t)
        for k, item in tree.items():
            key.append(k)
            _flatten(item, arrays, key, tensors)
    elif isinstance(tree, Tensor):
        tensors.append(tree)
        _flatten(tree.data, arrays, key, tensors)
    elif isinstance(tree, (dict, tuple, list)):   # OrderedDict, namedtuple, ...
        key.append(t)
        items = tree.items() if isinstance(tree, dict) else enumerate(tree)
        for k, item in items:
            key.append(k)
            _flatten(item, arrays, key, tensors)
    elif isinstance(tree, np.ndarray):            # a subclass: its plain array
        _flatten(np.asarray(tree), arrays, key, tensors)
    else:
        try:
            hash(tree)
        except TypeError:
            raise TypeError(f"tt.compile: a non-array argument must be hashable (it is part of the "
                            f"cache key); got {type(tree).__name__}. Pass arrays, numbers, strings, or "
                            f"tuples/lists/dicts of them") from None
        key.append((t, tree))


def _refill(tree, inputs):
    """`tree` with its array leaves replaced, in order, by the next items of `inputs`."""
    if isinstance(tree, (np.ndarray, Tensor)):
        return next(inputs)
    if isinstance(tree, dict):
        return transforms._rebuild(tree, {k: _refill(v, inputs) for k, v in tree.items()})
    if isinstance(tree, (tuple, list)):
        return transforms._rebuild(tree, [_refill(v, inputs) for v in tree])
    return tree


def _argument_names(f, args, kwargs):
    """A readable name per array leaf: the parameter's name, and the path inside it (params_W1)."""
    try:
        params = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):
        params = []
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    rest = next((p.name for p in params if p.kind is p.VAR_POSITIONAL), "a")
    flat = [(positional[i] if i < len(positional) else f"{rest}{i - len(positional)}", a)
            for i, a in enumerate(args)]
    flat += list(kwargs.items())       # in the order _flatten takes them
    names = []

    def walk(node, path):
        if isinstance(node, (np.ndarray, Tensor)):
            names.append(path)
        elif isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{path}_{k}")
        elif isinstance(node, (tuple, list)):
            for i, v in enumerate(node):
                walk(v, f"{path}{i}" if path[-1:].isalpha() else f"{path}_{i}")

    for name, value in flat:
        walk(value, name)
    return names


# ----- recording ---------------------------------------------------------------------------------
class _Ref:
    """A reference to a recorded value (a variable of the program) inside an entry's arguments."""
    __slots__ = ("var",)

    def __init__(self, var):
        self.var = var


class _Entry:
    """One line of the program: out = fun(*args, **kwargs); args and kwargs hold _Refs to
    variables where the values were recorded ones, constants elsewhere. `kind`: "prim" (a
    primitive's forward; "prim0" for a 0-d result), "rule" (a VJP/JVP rule or a helper the
    sweep applies), "add", "part", "seed", "numpy" (a non-differentiable NumPy function)."""
    __slots__ = ("fun", "name", "args", "kwargs", "out", "label", "kind", "context")

    def __init__(self, fun, name, args, kwargs, out, label, kind, context=None):
        self.fun, self.name, self.args, self.kwargs = fun, name, args, kwargs
        self.out, self.label, self.kind = out, label, kind
        self.context = context      # (tape entry, "VJP"/"JVP", input) or (primitive name, inputs)


class _Tracer:
    """The Wengert list being recorded: variables (values) and the entries computing them.

    It is the recorder of this thread while it records (`STATE.recorder`): `Primitive.__call__`
    hands it each new Tensor (`primitive`), `ops.numpy_dispatch` each NumPy result (`numpy`),
    and the engine's own sweeps each rule they apply (`rule`, `add`, `apply`, `seed`). Values
    are known by identity (`index`): an array the sweep passes on is the variable it was noted
    as. It owns no sweep and patches nothing: a Tensor it records becomes a `_Traced`, whose
    comparisons, value reads and in-place operators it notes; tape.backward asks it (refused).
    """

    def __init__(self):
        self.values = []          # variable -> its value at trace time
        self.hints = []           # variable -> a name hint
        self.entries = []
        self.index = {}           # id(Tensor or array) -> variable
        self.alive = []           # keeps every indexed object alive, so ids stay unique
        self.arguments = []
        self.reads = []           # where f read a traced value into Python ("file:line: how")
        self.modules = {}         # Module f called -> its `training` flag at the first call
        self.generator_states = {}   # np.random.Generator f may draw from -> its state now
        self.first_states = {}       # Generator drawn from -> its state before the first draw
        self.legacy_state = np.random.get_state()
        self.buffers = set()         # variables that are module buffers (written in place by f)
        self.saved = {}              # id(buffer array) -> (array, its value before recording)

    # ----- variables -----
    def _new(self, value, hint, *objects):
        var = len(self.values)
        self.values.append(value)
        self.hints.append(hint)
        for obj in objects:
            if obj is not None:
                self.index[id(obj)] = var
                self.alive.append(obj)
        return var

    def argument(self, array, name):
        if id(array) in self.index:     # the same array passed twice: two inputs all the same
            array = array.copy()
        t = _new_tensor(_Traced)
        _init_untracked(t, array)       # shares the caller's array: no copy
        var = self._new(array, name, t, array)
        self.arguments.append(var)
        return t

    def var_of(self, x):
        """The variable holding x (a Tensor or an array), or None for a constant."""
        var = self.index.get(id(x))
        if var is None and isinstance(x, Tensor):
            var = self.index.get(id(x.data))
        return var

    def template(self, x):
        """x with every recorded value replaced by a _Ref (containers walked)."""
        var = self.var_of(x) if isinstance(x, (Tensor, np.ndarray, np.generic)) else None
        if var is not None:
            return _Ref(var)
        if isinstance(x, Tensor):
            return x.data                  # a constant Tensor (made inside f, or closed over)
        if type(x) in (tuple, list):
            return type(x)(self.template(v) for v in x)
        if type(x) is dict:
            return {k: self.template(v) for k, v in x.items()}
        return x

    def record(self, fun, name, args, kwargs, value, label, kind, hint=None, objects=(), context=None):
        """Note `value = fun(*args, **kwargs)` if any argument is recorded; returns its variable
        (or None, for a computation on constants only, which stays a constant)."""
        args = self.template(tuple(args))
        kwargs = self.template(dict(kwargs))
        if not (_has_ref(args) or _has_ref(kwargs)):
            return None
        known = value if isinstance(value, (np.ndarray, np.inexact)) else None   # not np.True_
        var = self._new(value, hint, known, *objects)
        self.entries.append(_Entry(fun, name, args, kwargs, var, label, kind, context))
        return var

    def wrap(self, value, var):
        """A Tensor holding `value`, known as variable `var`."""
        t = _new_tensor(_Traced)
        _init_untracked(t, value if isinstance(value, np.ndarray) else np.asarray(value))
        self.index[id(t)] = var
        self.index[id(t.data)] = var
        self.alive.append(t)
        return t

    def tensor(self, g):
        """A gradient or tangent from a sweep as a Tensor the rest of f can use (a constant
        array stays an array)."""
        var = None if g is None else self.var_of(g)
        return g if var is None else self.wrap(g, var)

    # ----- recording, this thread only -----
    def __enter__(self):
        self._previous = STATE.recorder
        STATE.recorder = self
        update_hook(tape.ANOMALY_CHECK)
        return self

    def __exit__(self, *exc):
        STATE.recorder = self._previous
        update_hook(tape.ANOMALY_CHECK)

    # ----- what the engine tells the recorder -----
    def primitive(self, out, prim, args, params):
        """Primitive.__call__ made `out` (STATE.hook)."""
        if STATE.anomaly:
            tape._anomaly_check_forward(out, prim, args)
        var = self.record(prim.fun, prim.name, args, params, out.data, prim.name, "prim",
                          objects=(out,), context=(prim.name, args))
        if var is not None:
            out.__class__ = _Traced           # its comparisons and reads are noted
            if out.data.ndim == 0:
                self.entries[-1].kind = "prim0"     # NumPy may give a scalar: a result is asarray'd

    def backward(self, output):
        """tape.backward while recording: refused."""
        raise RuntimeError("tt.compile: .backward() inside a compiled function is not recorded "
                           "(it writes .grad as a side effect); return the gradients instead: "
                           "loss, grads = tt.value_and_grad(loss_fn)(params, ...)")

    def in_place(self, t, other, op):
        """`t += v` (tensor._in_place) where t or v is traced and nothing records it on the tape:
        recorded, the name rebound to the result (writing into t's array would be a side effect
        the program never repeats); None where it is not traced (or t is an argument: written,
        then refused by _refuse_writes). Into a module's buffer (a BatchNorm's running
        statistics): written, and the write is a line of the program, repeated on every call."""
        if self.var_of(t) in self.buffers:
            return self._store(t, op(t, other))
        if not (self._traced(t) or self._traced(other)) or _is_argument(self, t):
            return None
        out = op(t, other)
        if out.shape != t.shape:
            raise ValueError(f"in-place operator: the result has shape {out.shape} but t has shape "
                             f"{t.shape}; an in-place operation cannot change the shape")
        return out if out.dtype == t.dtype else ops.astype(out, t.dtype)

    def setitem(self, t, index, value):
        """`t[idx] = v` (Tensor.__setitem__) where t or v is traced and nothing records it on the
        tape: recorded as setitem, t now holding the result. False where it is not traced."""
        if not (self._traced(t) or self._traced(value)) or _is_argument(self, t):
            return False
        new = ops.setitem(t, value, index=index)
        t.data = new.data
        self.index[id(t)] = self.var_of(new)
        t.__class__ = _Traced
        return True

    def _store(self, t, value):
        """Write `value` into buffer t's array now and on every call of the program."""
        array = t.data
        if id(array) not in self.saved:      # put back after recording: the first run writes it
            self.saved[id(array)] = (array, array.copy())
        before = STATE.memory_write
        _store(array, value.data if isinstance(value, Tensor) else value)
        tensor_module.mark_modified(t)
        STATE.memory_write = before          # a write the program repeats: not refused
        hint = self.hints[self.var_of(t)]
        var = self.record(_store, "store", (array, value), {}, array,
                          f"{hint} updated in place, on every call", "store", hint=hint)
        self.index[id(t)] = self.index[id(array)] = var
        self.buffers.add(var)
        return t

    def _traced(self, x):
        return isinstance(x, (Tensor, np.ndarray)) and self.var_of(x) is not None

    def draw(self, fun, rng, args, kwargs):
        """draws.draw: fun(rng, *args) drawn now and noted as a line the program repeats on every
        call (kept even if its result is unused: the generator advances as eagerly)."""
        generator = rng if isinstance(rng, np.random.Generator) else None
        if generator is not None:
            state = generator.bit_generator.state
            expected = self.generator_states.get(generator)
            if expected is not None and state != expected:
                raise _undrawn(generator)
            self.first_states.setdefault(generator, state)
        value = fun(rng, *args, **kwargs)
        if generator is not None:
            self.generator_states[generator] = generator.bit_generator.state
        name = getattr(fun, "__name__", "draw")
        var = self._new(value, f"{name.strip('_')}", value if isinstance(value, np.ndarray) else None)
        self.entries.append(_Entry(fun, name, (rng, *self.template(tuple(args))), self.template(dict(kwargs)),
                                   var, f"a random draw, anew on every call ({name})", "draw"))
        return value

    def copied(self, t, value):
        """t holds a copy (maybe cast) of recorded `value`: noted, so t is traced."""
        var = self.var_of(value)
        if var is not None and self.var_of(t) is None:
            new = self.record(np.asarray, "asarray", (value,), {"dtype": t.data.dtype}, t.data,
                              "a copy", "numpy", objects=(t,))
            if new is not None:
                t.__class__ = _Traced

    def watch_generators(self, *objects):
        """Remember the state of the generators f can reach (its closure, its arguments, the
        modules it calls), to find draws made past tinytensor."""
        for g in draws.generators_in(*objects):
            self.generator_states.setdefault(g, g.bit_generator.state)

    def check_generators(self, name):
        """After recording: every generator f reached must be where its noted draws left it;
        then each is put back where f found it, so the first run of the program draws what the
        eager call would have drawn."""
        for g, state in self.generator_states.items():
            if g.bit_generator.state != state:
                raise _undrawn(g, name)
        legacy = np.random.get_state()
        if not (legacy[0] == self.legacy_state[0] and np.array_equal(legacy[1], self.legacy_state[1])
                and legacy[2:] == self.legacy_state[2:]):
            raise RuntimeError(
                f"tt.compile: {name} drew from NumPy's global random state (np.random.rand, "
                f"np.random.normal, ...) while being recorded; the compiled program would repeat "
                f"those numbers on every call. Draw with tinytensor (tt.randn(..., rng=rng), "
                f"tt.rand, nn.Dropout) or pass the numbers in as an argument")
        for g, state in self.first_states.items():
            g.bit_generator.state = state
        for array, value in self.saved.values():     # the first run of the program writes them
            array[...] = value

    def module(self, m):
        """Module.__call__: f reached `m`, whose mode is part of what the program depends on, and
        whose buffers (running statistics) are state the program reads and writes on every call."""
        if m not in self.modules:
            self.modules[m] = m.training
            self.watch_generators(m)
            for name, b in m.named_buffers():
                if isinstance(b, Tensor) and type(b.data) is np.ndarray and self.var_of(b) is None:
                    var = self._new(b.data, f"{type(m).__name__.lower()}_{name}", b, b.data)
                    self.entries.append(_Entry(None, "state", (b.data,), {}, var,
                                               f"{type(m).__name__}.{name}, read on every call", "state"))
                    self.buffers.add(var)
                    b.__class__ = _Traced

    def numpy(self, target, name, args, kwargs, result, tensor=None):
        """ops.on_values: `result` computed from values off the tape (a mask, sign, argmax):
        noted, so the program computes it again (`tensor`: the Tensor that holds it)."""
        var = self.record(target, name, args, kwargs, result, name, "numpy",
                          objects=() if tensor is None else (tensor,))
        if var is not None and tensor is not None:
            tensor.__class__ = _Traced

    def refuse_shape(self, name, args, kwargs):
        """ops.on_values: a function whose result's shape depends on traced values."""
        if _has_ref(self.template(tuple(args))) or _has_ref(self.template(dict(kwargs))):
            raise RuntimeError(
                f"tt.compile: {name} of a traced value has a shape that depends on the values, so "
                f"no straight-line program can replay it (jax.jit refuses it too). Use a mask of "
                f"fixed shape instead (tt.where(condition, x, 0), x * mask, sum over a mask), or "
                f"compute it outside the compiled function and pass it in")

    def rule(self, fun, args, params, node, kind, i=-1, parts=False):
        """A sweep applies a rule of `node`'s primitive (for input `i`; -1: a joint rule,
        `parts`: one returning a tuple, one gradient per input)."""
        value = fun(*args, **params)
        if value is None:
            return None
        prim = node._prim.name
        suffix = "vjp" if kind == "VJP" else "jvp"
        if kind == "VJP":
            label = f"{prim} VJP: adjoint of {self._label(node)}"
            hint = f"g_{self._hint(node._inputs[i])}" if i >= 0 else None
            if i >= 0:
                label += f" to {self._label(node._inputs[i], i)}"
        else:
            label = f"{prim} JVP: tangent of {self._label(node)}"
            hint = f"t_{self._hint(node)}"
            if i >= 0:
                label += f" from {self._label(node._inputs[i], i)}"
        var = self.record(fun, f"{prim}_{suffix}{'' if i < 0 else i}", args, params, value, label,
                          "rule", hint, context=(node, kind, i))
        if parts and var is not None and isinstance(value, (tuple, list)):
            for k, part in enumerate(value):
                if part is not None:
                    v = self._new(part, f"g_{self._hint(node._inputs[k])}", part)
                    self.entries.append(_Entry(operator.getitem, "getitem", (_Ref(var), k), {}, v,
                                               f"{label} to {self._label(node._inputs[k], k)}", "part"))
        return value

    def apply(self, fun, args, kwargs, node, kind):
        """A sweep's own step on a gradient or tangent (unbroadcast, a copy, a cast)."""
        value = fun(*args, **kwargs)
        prefix = "g_" if kind == "VJP" else "t_"
        self.record(fun, getattr(fun, "__name__", "step"), args, kwargs, value,
                    f"{getattr(fun, '__name__', 'step')} of the {'gradient' if kind == 'VJP' else 'tangent'}"
                    f" of {self._label(node)}", "rule", hint=f"{prefix}{self._hint(node)}")
        return value

    def add(self, a, b, node, kind):
        """A sweep sums two contributions to `node`'s cotangent (or tangent)."""
        value = a + b
        prefix = "g_" if kind == "VJP" else "t_"
        self.record(operator.add, "add", (a, b), {}, value,
                    f"sum of the contributions to {self._label(node)}", "add",
                    hint=f"{prefix}{self._hint(node)}")
        return value

    def seed(self, c, root):
        """The reverse sweep starts from cotangent `c` of `root`: a constant (the seed 1) gets a
        name in the program, g_<root>."""
        value = c.data if isinstance(c, Tensor) else c
        if self.var_of(c) is None:
            var = self._new(value, f"g_{self._hint(root)}", value)
            self.entries.append(_Entry(None, "seed", (value,), {}, var,
                                       f"the seed: d {self._label(root)} / d {self._label(root)}", "seed"))
        return value

    def _hint(self, node):
        var = self.var_of(node)
        return None if var is None else f"@{var}"

    def _label(self, node, i=None):
        var = self.var_of(node)
        if var is not None:
            return f"@{var}"
        if i is not None:
            return f"input {i}"
        return node._prim.name if isinstance(node, Tensor) and node._prim else "a constant"


class _Traced(Tensor):
    """A Tensor whose value tt.compile is recording: its comparisons are recorded (a mask must
    be recomputed on every call), its reads into Python noted. Only the Tensors of one recording are of this
    class (the recorder sets it), so nothing process-wide changes; outside a recording (a Tensor
    kept after the call) it behaves as a Tensor."""
    __slots__ = ()
    __hash__ = Tensor.__hash__

    def __setitem__(self, index, value):
        Tensor.__setitem__(self, index, value)
        rec = STATE.recorder
        if rec is not None and rec.var_of(self.data) is not None:   # t became a recorded entry
            rec.index[id(self)] = rec.var_of(self.data)


_new_tensor = Tensor.__new__
_COMPARISONS = {"__lt__": np.less, "__le__": np.less_equal, "__gt__": np.greater,
                "__ge__": np.greater_equal, "__eq__": np.equal, "__ne__": np.not_equal}


def _traced_comparison(name, ufunc):
    """A comparison that notes its mask (a relu or max rule applied to Tensors inside a nested
    transform compares values: the mask must be recomputed on every call). Inside a nested
    transform it gives a traced Tensor, so NumPy calls on the mask are recorded too."""
    def compare(self, other):
        value = getattr(Tensor, name)(self, other)
        rec = STATE.recorder
        if rec is None:
            return value
        var = rec.record(ufunc, ufunc.__name__, (self, other), {}, value, ufunc.__name__, "numpy")
        if var is not None and STATE.depth > 0:
            return rec.wrap(value, var)
        return value
    compare.__name__ = name
    return compare


_VALUE_READS = {"__bool__": "bool()", "__float__": "float()", "__int__": "int()", "item": ".item()",
                "__array__": "np.asarray()"}
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # tinytensor/


def _noted_read(name, how):
    """A method that turns a value into Python (bool, float, an array NumPy then uses): noted
    when the caller is user code, whose branch on it the program freezes."""
    def read(self, *args, **kwargs):
        rec = STATE.recorder
        if rec is not None and len(rec.reads) < 5:
            frame = sys._getframe(1)
            if not frame.f_code.co_filename.startswith(_PACKAGE) and rec.var_of(self) is not None:
                rec.reads.append(f"{how} at {frame.f_code.co_filename}:{frame.f_lineno}")
        return getattr(Tensor, name)(self, *args, **kwargs)
    read.__name__ = name
    return read


for _name, _ufunc in _COMPARISONS.items():
    setattr(_Traced, _name, _traced_comparison(_name, _ufunc))
for _name, _how in _VALUE_READS.items():
    setattr(_Traced, _name, _noted_read(_name, _how))


def _is_argument(tracer, t):
    """t is one of f's arguments: a write into it is a side effect on the caller's array that the
    program would not repeat, so it is left to happen and then refused (_refuse_writes)."""
    return isinstance(t, Tensor) and tracer.var_of(t) in tracer.arguments


def _has_ref(x):
    if type(x) is _Ref:
        return True
    if type(x) in (tuple, list):
        return builtins.any(_has_ref(v) for v in x)
    if type(x) is dict:
        return builtins.any(_has_ref(v) for v in x.values())
    return False


def _refs(x, found):
    if type(x) is _Ref:
        found.append(x.var)
    elif type(x) in (tuple, list):
        for v in x:
            _refs(v, found)
    elif type(x) is dict:
        for v in x.values():
            _refs(v, found)
    return found


# ----- generating the program --------------------------------------------------------------------
class _Program:
    """One generated program: `run(arrays)` gives the results from the array leaves."""

    def __init__(self, function, source, contexts=()):
        self.function = function
        self.source = source
        self.trace_seconds = None
        self.contexts = contexts    # per statement: what the eager engine says when it fails
        self.reads = False          # whether f read traced values into Python (check=True)
        self.guard = None           # () -> what else the program depends on (see _guard) ...
        self.modes = None           # ... and its value when recorded: another one re-records

    def run(self, arrays):
        try:
            return self.function(*arrays)
        except Exception as err:
            raise self.error(err) from err

    def error(self, err):
        """The eager engine's error for an exception raised by the program: the statement that
        raised names its tape entry (a rule) or its primitive and inputs, as eagerly."""
        if getattr(err, "_tinytensor_entry", False) or isinstance(err, FloatingPointError):
            return err
        tb, line = err.__traceback__, None
        while tb is not None:
            if tb.tb_frame.f_code is self.function.__code__:
                line = tb.tb_lineno
            tb = tb.tb_next
        context = self.contexts[line - 2] if line is not None and 0 <= line - 2 < len(self.contexts) else None
        if context is None:
            return err
        if context[0] == "prim":
            new = tape._same_kind(err, f"{context[1]}: {err} (inputs: {context[2]})")
            new._tinytensor_entry = True
            return new
        return tape._entry_error(err, context[1])


class _Body(list):
    """The program's statements (lhs, expression, comment), each with the entry it computes."""
    entry = None

    def append(self, statement):
        super().append((*statement, self.entry))


def _context_text(e):
    """("prim", name, inputs) or ("rule", "in the VJP rule of tape entry ...") for an entry."""
    if e is None or e.context is None:
        return None
    if e.kind in ("prim", "prim0"):
        name, args = e.context
        return ("prim", name, tape._describe(args))
    node, kind, i = e.context
    return ("rule", tape._rule_context(node, kind, i))


# Hot primitives and rules whose code is one NumPy expression for the argument ranks seen at
# trace time: emitted inline instead of a call through their Python wrapper. Keyed by the
# function object, so a primitive redefined elsewhere simply gets no shortcut. Each expression
# is the same NumPy call the wrapper makes (the op-sweep test compares compiled and eager bit
# for bit, so a drift between a rule and its line here fails that test).
def _special_forms():
    table = {}

    def put(fun, form):
        if fun is not None:
            table[id(fun)] = (fun, form)

    def prim(name):
        return tape.REGISTRY.get(name)

    def rule(name, i, kind="vjps"):
        rules = getattr(prim(name), kind, None)
        return rules[i] if rules is not None and i < len(rules) else None

    def fun(name):
        return getattr(prim(name), "fun", None)

    for name, op in (("add", "+"), ("sub", "-"), ("mul", "*"), ("div", "/")):
        put(fun(name), lambda x, nd, op=op: f"{x[0]} {op} {x[1]}")
    put(fun("neg"), lambda x, nd: f"-{x[0]}")
    put(fun("relu"), lambda x, nd: f"np.maximum({x[0]}, 0)")
    put(fun("dot"), lambda x, nd: f"np.dot({x[0]}, {x[1]})" if nd[0] in (1, 2) and nd[1] in (1, 2) else None)
    # VJP rules: x = (g, ans, *inputs)
    for kind in ("vjps", "jvps"):
        put(rule("add", 0, kind), lambda x, nd: x[0])
        put(rule("add", 1, kind), lambda x, nd: x[0])
        put(rule("sub", 0, kind), lambda x, nd: x[0])
        put(rule("sub", 1, kind), lambda x, nd: f"-{x[0]}")
        put(rule("neg", 0, kind), lambda x, nd: f"-{x[0]}")
        put(rule("exp", 0, kind), lambda x, nd: f"{x[0]} * {x[1]}")
        put(rule("tanh", 0, kind), lambda x, nd: f"{x[0]} * (1 - {x[1]} * {x[1]})")
        put(rule("sigmoid", 0, kind), lambda x, nd: f"{x[0]} * ({x[1]} * (1 - {x[1]}))")
        put(rule("relu", 0, kind), lambda x, nd: f"{x[0]} * ({x[2]} > 0)")
    put(rule("mul", 0), lambda x, nd: f"{x[0]} * {x[3]}")
    put(rule("mul", 1), lambda x, nd: f"{x[0]} * {x[2]}")
    put(rule("mul", 0, "jvps"), lambda x, nd: f"{x[0]} * {x[3]}")
    put(rule("mul", 1, "jvps"), lambda x, nd: f"{x[2]} * {x[0]}")
    put(rule("div", 0), lambda x, nd: f"{x[0]} / {x[3]}")
    for name in ("dot", "matmul", "linear"):     # 2-D operands: g @ b.T and a.T @ g
        put(rule(name, 0), lambda x, nd: f"{x[0]} @ {x[3]}.T" if nd[2] == 2 and nd[3] == 2 else None)
        put(rule(name, 1), lambda x, nd: f"{x[2]}.T @ {x[0]}" if nd[2] == 2 and nd[3] == 2 else None)
    put(rule("linear", 2), lambda x, nd: x[0])
    # g * w / _safe(ans); `ans + (ans == 0)` is _safe: the norm, or 1 where it is 0
    put(rule("frobeniusNorm", 0), lambda x, nd: f"{x[0]} * {x[2]} / ({x[1]} + ({x[1]} == 0))")
    return table


def _type_comment(e, tracer):
    value = tracer.values[e.out]
    return f"{e.label}: {value.dtype}{tuple(np.shape(value))}".replace(",)", ")")


def _softmax_cross_entropy_pairs(live, producer):
    """The lecture's crossEntropy(softmax(z), y) computes softmax(z) and, from the same logits,
    log_softmax(z): both start with the same max, subtraction, exp and sum. Returns
    {softmax var: ("softmax", None), crossEntropy var: ("crossEntropy", softmax var)} for each
    such pair, so the program computes those steps once (the same NumPy calls as
    ops' _softmax_forward and _log_softmax_forward, so the same numbers)."""
    softmax, cross_entropy = tape.REGISTRY.get("softmax"), tape.REGISTRY.get("crossEntropy")
    if softmax is None or cross_entropy is None or _ROWS is None:
        return {}
    pairs = {}
    for e in live:
        if e.fun is not cross_entropy.fun or len(e.args) != 3 or set(e.kwargs) - {"reduction"}:
            continue
        p, z = e.args[0], e.args[2]
        if type(p) is not _Ref or type(z) is not _Ref:
            continue
        a = producer.get(p.var)
        if (a is not None and a.fun is softmax.fun and len(a.args) == 1 and type(a.args[0]) is _Ref
                and a.args[0].var == z.var and set(a.kwargs) <= {"axis"} and a.out not in pairs):
            pairs[a.out] = ("softmax", None)
            pairs[e.out] = ("crossEntropy", a.out)
    return pairs


# ops' helpers for the rows of the cross-entropy (None if the op table no longer has them)
_ROWS = tuple(getattr(ops, n, None) for n in ("_class_indices", "_at_labels", "_reduce_rows"))
_ROWS = None if None in _ROWS else _ROWS


def _cross_entropy_rows(log_p, z, y, reduction):
    """ops._rows_from_logits(z, y, reduction) given log_p = log_softmax(z)."""
    class_indices, at_labels, reduce_rows = _ROWS
    index = class_indices(y, z.shape, check=True)
    if index is not None:
        return reduce_rows(-at_labels(log_p, index), reduction)
    y = np.asarray(y)
    if log_p.min() == -np.inf:
        log_p = np.where(y == 0, 0, log_p)
    return reduce_rows(-(y * log_p).sum(axis=-1), reduction)


def _lean_labels(tracer, e, z_arg, y_arg):
    """Whether crossEntropy's rows for these logits and labels can be written inline: integer
    class indices of shape (B,) (B > 0) against (B, C) logits on the CPU, reduced by mean or sum."""
    if type(z_arg) is not _Ref or type(y_arg) is not _Ref:
        return False
    z, y = tracer.values[z_arg.var], tracer.values[y_arg.var]
    return (type(z) is np.ndarray and type(y) is np.ndarray and z.ndim == 2 and y.dtype.kind in "iu"
            and y.shape == z.shape[:1] and y.size > 0
            and e.kwargs.get("reduction", "mean") in ("mean", "sum"))


def _label_range_error(y, classes):
    """ops._class_indices's error for class indices outside [0, classes)."""
    raise IndexError(f"class indices must lie in [0, {classes}); got {y.min()}..{y.max()}")


def _atom(text):
    """A name or a non-negative number: safe inside an expression without parentheses."""
    return text.isidentifier() or text.replace(".", "", 1).replace("e", "", 1).isdigit()


def _unbroadcast_form(x, g_shape, shape):
    """tape.unbroadcast's branch for these shapes, as one expression (None: call it)."""
    lead = len(g_shape) - len(shape)
    if lead == 1 and tuple(g_shape[1:]) == tuple(shape):    # a bias: sum over the batch axis
        return f"{x}.sum(axis=0)"
    return None


_SPECIAL = None


def _vjp_rule(name, i):
    rules = getattr(tape.REGISTRY.get(name), "vjps", None)
    return rules[i] if rules is not None and i < len(rules) else None


_FROBENIUS_VJP = _vjp_rule("frobeniusNorm", 0)
_IDENTITY_VJPS = {id(f) for f in (_vjp_rule("add", 0), _vjp_rule("add", 1), _vjp_rule("sub", 0)) if f}


def _unit_seed(tracer, producer, g, w):
    """Whether cotangent `g` is the seed 1 (passed on unchanged by add/sub VJPs) and a 0-d
    array whose product with w has w's dtype, so that g * w is w bit for bit."""
    while type(g) is _Ref:
        e = producer.get(g.var)
        if e is None:
            return False
        if e.kind == "seed":
            value, w_value = tracer.values[g.var], tracer.values[w.var] if type(w) is _Ref else w
            return (type(value) is np.ndarray and value.ndim == 0 and value == 1
                    and np.result_type(value, w_value) == np.asarray(w_value).dtype)
        if e.kind != "rule" or id(e.fun) not in _IDENTITY_VJPS:
            return False
        g = e.args[0]
    return False


_CE_VJP_LOGITS = getattr(ops, "_ce_vjp_logits", None)


def _generate(tracer, out, fname):
    out = out if not isinstance(out, Tensor) else out
    leaves, out_structure = transforms.tree_flatten(out)
    out_refs = [tracer.template(x) for x in leaves]
    # Which entries the results need (dead entries dropped).
    producer = {e.out: e for e in tracer.entries}
    needed = set()
    stack = [r.var for r in out_refs if type(r) is _Ref]
    stack += [e.out for e in tracer.entries if e.kind in ("draw", "store")]   # side effects
    while stack:
        var = stack.pop()
        if var in needed:
            continue
        needed.add(var)
        e = producer.get(var)
        if e is not None:
            stack += _refs(e.args, []) + _refs(e.kwargs, [])
    live = [e for e in tracer.entries if e.out in needed]

    namespace = {"np": np}
    used = set(dir(builtins)) | set(keyword.kwlist) | {"np"}
    names = {}
    counters = {"z": itertools.count(1)}

    def fresh(base):
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in str(base)) or "v"
        if base[0].isdigit():
            base = "_" + base
        name, k = base, 1
        while name in used:
            k += 1
            name = f"{base}_{k}"
        used.add(name)
        return name

    functions = {}

    def function_name(fun, name):
        key = id(fun)
        if key not in functions:
            functions[key] = fresh(name)
            namespace[functions[key]] = fun
        return functions[key]

    constants = {}

    def constant(value):
        key = id(value)
        if key not in constants:
            constants[key] = fresh(f"c{len(constants) + 1}")
            namespace[constants[key]] = value
            tracer.alive.append(value)
        return constants[key]

    def emit(x):
        t = type(x)
        if t is _Ref:
            return names[x.var]
        if x is None or t is bool or t is int or t is str:
            return repr(x)
        if t is float and np.isfinite(x):
            return repr(x)
        if t is tuple:
            inner = ", ".join(emit(v) for v in x)
            return f"({inner},)" if len(x) == 1 else f"({inner})"
        if t is list:
            return "[" + ", ".join(emit(v) for v in x) + "]"
        if t is dict and all(type(k) is str for k in x):
            return "{" + ", ".join(f"{k!r}: {emit(v)}" for k, v in x.items()) + "}"
        if t is slice:
            return f"slice({emit(x.start)}, {emit(x.stop)}, {emit(x.step)})"
        if x is Ellipsis:
            return "..."
        return constant(x)

    for var in tracer.arguments:
        names[var] = fresh(tracer.hints[var])
    for e in live:
        hint = tracer.hints[e.out]
        if hint is None:
            base = f"z{next(counters['z'])}"
        elif hint.startswith(("g_@", "t_@")):
            base = hint[:2] + names.get(int(hint[3:]), "v")
        else:
            base = hint
        names[e.out] = fresh(base)

    def label(text):
        # "@12" in a label stands for the name of variable 12
        out, i = [], 0
        while i < len(text):
            if text[i] == "@":
                j = i + 1
                while j < len(text) and text[j].isdigit():
                    j += 1
                out.append(names.get(int(text[i + 1:j]), "?"))
                i = j
            else:
                out.append(text[i])
                i += 1
        return "".join(out)

    global _SPECIAL
    if _SPECIAL is None:
        _SPECIAL = _special_forms()
    fused = _softmax_cross_entropy_pairs(live, producer)
    pieces = {}
    rows = {}   # (labels variable, classes) -> the hoisted np.arange(B), once the range check is in
    body = _Body()
    for e in live:
        body.entry = e
        args = [emit(a) for a in e.args]
        expr = None
        special = _SPECIAL.get(id(e.fun))
        if e.out in fused:                        # softmax whose logits crossEntropy reuses
            kind, other = fused[e.out]
            if kind == "softmax":
                z, axis = args[0], emit(e.kwargs.get("axis", -1))
                lhs = names[e.out]
                shifted, total = pieces[e.out] = fresh(f"{lhs}_shifted"), fresh(f"{lhs}_sum")
                body.append((shifted, f"{z} - {z}.max(axis={axis}, keepdims=True)",
                             "softmax in steps, shared with log_softmax"))
                body.append((lhs, f"np.exp({shifted})", "softmax: exp"))
                body.append((total, f"{lhs}.sum(axis={axis}, keepdims=True)", "softmax: the sums"))
                body.append((lhs, f"np.divide({lhs}, {total}, out={lhs})", _type_comment(e, tracer)))
                continue
            special = None
            shifted, total = pieces[other]
            y, reduction = args[1], emit(e.kwargs.get("reduction", "mean"))
            expr = (f"{function_name(_cross_entropy_rows, 'cross_entropy_rows')}"
                    f"({shifted} - np.log({total}), {args[2]}, {y}, {reduction})")
            if _lean_labels(tracer, e, e.args[2], e.args[1]):
                # ops._rows_from_logits for class indices, its NumPy calls written out: the range
                # check (one max over the labels seen as unsigned: a negative label is huge
                # there), then -log_p at the labels, summed (and / B for the mean).
                labels = tracer.values[e.args[1].var]
                batch, classes = tracer.values[e.args[2].var].shape
                if labels.dtype.kind == "u":
                    test = f"{y}.max() >= {classes}"
                elif classes <= 2 ** (8 * labels.itemsize - 1):   # every negative label maps above
                    test = f"{y}.view(np.uint{8 * labels.itemsize}).max() >= {classes}"
                else:
                    test = f"{y}.min() < 0 or {y}.max() >= {classes}"
                body.append((None, f"if {test}: "
                             f"{function_name(_label_range_error, 'label_range_error')}({y}, {classes})",
                             "crossEntropy: the labels must lie in [0, classes)"))
                rows[e.args[1].var, classes] = constant(np.arange(batch))
                expr = f"(-({shifted} - np.log({total}))[{rows[e.args[1].var, classes]}, {y}]).sum()"
                if e.kwargs.get("reduction", "mean") == "mean":
                    expr += f" / {batch}"
        if special is not None and special[0] is e.fun and e.kind != "numpy":
            ranks = [np.ndim(tracer.values[a.var]) if type(a) is _Ref else np.ndim(a) for a in e.args]
            expr = special[1]([a if _atom(a) else f"({a})" for a in args], ranks)
            if e.fun is _FROBENIUS_VJP and _unit_seed(tracer, producer, e.args[0], e.args[2]):
                expr = expr[expr.index("* ") + 2:]    # 1 * w is w, exactly: one pass over w less
        elif (e.fun is _CE_VJP_LOGITS and e.kind == "rule" and type(e.args[3]) is _Ref
              and type(e.args[2]) is _Ref and type(e.args[0]) is _Ref
              and np.ndim(tracer.values[e.args[0].var]) == 0 and np.ndim(tracer.values[e.args[2].var]) == 2
              and (e.args[3].var, tracer.values[e.args[2].var].shape[1]) in rows):
            # ops._softmax_minus_labels for class indices the forward checked above:
            # p * scale, then minus scale at each row's label
            g, p, y = args[0], args[2], args[3]
            lhs = names[e.out]
            scale = g
            if e.kwargs.get("reduction", "mean") == "mean":
                scale = fresh(f"{lhs}_scale")
                body.append((scale, f"{g} / {np.shape(tracer.values[e.args[2].var])[0]}",
                             "crossEntropy VJP: the cotangent of each row"))
            body.append((lhs, f"{p} * {scale}", label(e.label)))
            at = rows[e.args[3].var, tracer.values[e.args[2].var].shape[1]]
            body.append((None, f"{lhs}[{at}, {y}] -= {scale}",
                         "crossEntropy VJP: minus the labels"))
            continue
        elif e.fun is unbroadcast:
            g = e.args[0]
            g_shape = np.shape(tracer.values[g.var]) if type(g) is _Ref else np.shape(g)
            expr = _unbroadcast_form(args[0], g_shape, e.args[1])
        if expr is not None:
            pass
        elif e.kind in ("seed", "state"):
            expr = args[0]
        elif e.kind == "part":
            expr = f"{args[0]}[{args[1]}]"
        elif e.fun is operator.add:
            expr = f"{args[0]} + {args[1]}"
        else:
            call_args = args + [f"{k}={emit(v)}" for k, v in e.kwargs.items()]
            expr = f"{function_name(e.fun, e.name)}({', '.join(call_args)})"

        lhs = names[e.out]
        if e.kind in ("prim", "prim0"):
            comment = _type_comment(e, tracer)
        else:
            comment = label(e.label)
        body.append((lhs, expr, comment))

    producer_kind = {e.out: e.kind for e in live}
    results = []
    for ref in out_refs:
        if type(ref) is _Ref:
            name = names[ref.var]   # NumPy gives scalars for 0-d results: results are arrays
            scalar = type(tracer.values[ref.var]) is not np.ndarray or producer_kind.get(ref.var) == "prim0"
            results.append(f"np.asarray({name})" if scalar else name)
        elif isinstance(ref, np.ndarray):
            results.append(f"{constant(ref)}.copy()")    # never the same array twice
        else:
            results.append(emit(ref))
    ret = _emit_structure(out_structure, iter(results), namespace, fresh)
    params = [names[v] for v in tracer.arguments]
    statements = [(expr if lhs is None else f"{lhs} = {expr}", comment) for lhs, expr, comment, _ in body]
    contexts = [_context_text(e) for *_, e in body]     # statement k is on line k + 2
    width = max([len(text) for text, _ in statements] + [0])
    lines = [f"def {fresh(fname if fname.isidentifier() else 'f')}({', '.join(params)}):"]
    lines += [f"    {text:<{width}}  # {comment}" for text, comment in statements]
    lines.append(f"    return {ret}")
    source = "\n".join(lines) + "\n"
    code = builtins.compile(source, f"<tt.compile {fname}>", "exec")
    exec(code, namespace)
    run = namespace[lines[0][4:lines[0].index("(")]]
    return _Program(run, source, contexts)


def _name_for(obj, namespace, fresh):
    name = fresh(getattr(obj, "__name__", "key"))
    namespace[name] = obj
    return name


def _emit_structure(structure, results, namespace, fresh):
    if structure is transforms.LEAF:
        return next(results)
    if structure is None:
        return "None"
    if isinstance(structure, dict):
        items = []
        for k, v in structure.items():
            key = repr(k) if type(k) in (str, int, bool) else _name_for(k, namespace, fresh)
            items.append(f"{key}: {_emit_structure(v, results, namespace, fresh)}")
        text = "{" + ", ".join(items) + "}"
        if type(structure) is not dict:
            text = f"{_name_for(type(structure), namespace, fresh)}({text})"
        return text
    parts = [_emit_structure(v, results, namespace, fresh) for v in structure]
    if isinstance(structure, list):
        return "[" + ", ".join(parts) + "]"
    if hasattr(structure, "_fields"):
        return f"{_name_for(type(structure), namespace, fresh)}({', '.join(parts)})"
    return f"({', '.join(parts)},)" if len(parts) == 1 else f"({', '.join(parts)})"

