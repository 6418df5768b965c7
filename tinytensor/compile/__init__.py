"""Define-then-run: `tt.compile(f)` turns a traced function into straight-line NumPy code.

The first call for a new combination of argument shapes and dtypes (and non-array arguments'
values) records `f` once: every primitive it calls, and, for a transform inside it
(`tt.value_and_grad(loss)`, `tt.jvp`, ...), every rule the sweep applies, as one entry each of a
Wengert list. The list from the arguments to the results is printed as Python source, one line
per entry (`z1 = np.dot(x, W)`, then the adjoint program `g_z1 = ...`), compiled once, and run on
later calls: no Tensor, no tape, no dictionary lookup per op. The same NumPy calls run in the
same order as in the eager call, so the results are the same numbers.

The package: this file holds the entry point (`compile`, `Compiled`: the cache and its key,
the guards); `tracer.py` the recorder (`_Tracer`), which the engine itself calls while it records
in this thread (tinytensor/state.py: `Primitive.__call__`, `ops.on_values` and the engine's own
sweeps, whose checks and error messages therefore apply); `codegen.py` turns its Wengert list into
the program; `fusions.py` holds the one fused pattern (crossEntropy of a softmax).

`tt.compile(f)` computes on every call what `f` would compute eagerly at that moment, or refuses
at trace time naming what it cannot replay: modes and closed-over numbers select the program,
random draws and module buffers are lines of it, values tinytensor computes off the tape are
recomputed (see the README's compile section and tests/compile/test_compile_semantics.py).
"""

import builtins
import functools
import inspect
import threading
import time
import types
import warnings
from collections import OrderedDict

import numpy as np

from .. import tensor as tensor_module
from .. import transforms
from ..state import SHARED, STATE
from ..tensor import Tensor, _make
from ..weakid import IdentityWeakMap
from .codegen import _generate
from .tracer import _Tracer

__all__ = ["compile", "Compiled", "CACHE_SIZE"]

CACHE_SIZE = 32   # programs kept per compiled function (least recently used dropped first)


def compile(f=None, *, check=False, cache_size=CACHE_SIZE):
    """`f` as a define-then-run program: same signature, same results.

    Arguments may be arrays, Tensors (their values are used), Python numbers and nested
    tuples/lists/dicts of them. Array leaves are the program's inputs: a call with new shapes
    or dtypes records `f` again (at most `cache_size` programs are kept). Every other leaf
    (numbers, strings, None) is part of the cache key: a new value records again.

    Grad mode, the modules' `training` flags and number attributes, and closed-over numbers
    and arrays select the program too (a change records again); random draws through
    tinytensor, module buffers and values tinytensor computes off the tape are redone on every
    call. Limits, as jax.jit's: Python control flow that reads values (`if loss > 1:`,
    `float(t)`, `np.asarray(t)` followed by NumPy) is frozen at the branch taken while tracing
    (a warning names the line); side effects that are not tinytensor's (printing, appending to
    a list) happen at trace time only. With `check=True` the second call, and every call of a
    program whose recording read values, runs `f` eagerly as well and raises if any result
    differs.
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
        wrapped = [_make(a) for a in arrays]
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


_SCALARS = (int, float, bool, str, type(None), complex)


def _guard(f, modules):
    """A function giving what the program depends on besides its arguments, as torch.compile's
    guards: each module's `training` flag and other number/string attributes (Dropout's p, ...),
    and the numbers, strings and arrays held by the closure cells and globals of f and of the
    functions f closes over (`tt.value_and_grad(loss)`: loss's too), arrays by identity (an
    array rebound to another name is another constant). None when there is nothing."""
    readers, objects = [], list(modules)
    functions, visited = [(f, 0)], set()
    while functions:
        f, depth = functions.pop()
        while isinstance(f, functools.partial):   # a compiled method: its instance too
            objects += [a for a in f.args if _plain_object(a)]
            f = f.func
        code = getattr(f, "__code__", None)
        if code is None or id(f) in visited:
            continue
        visited.add(id(f))
        inner = [getattr(f, "__wrapped__", None)]
        for cell in f.__closure__ or ():
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            if type(value) in _SCALARS:
                readers.append(("{}.cell_contents", cell))
            elif isinstance(value, (np.ndarray, Tensor)):
                readers.append(("id({}.cell_contents)", cell))
            elif _plain_object(value):
                objects.append(value)
            elif isinstance(value, (types.FunctionType, functools.partial)):
                inner.append(value)
        glob = getattr(f, "__globals__", {})
        if not glob.get("__name__", "").startswith("tinytensor"):     # not tinytensor's own
            for name in code.co_names:
                value = glob.get(name)
                if type(value) in _SCALARS:
                    readers.append((f"{{}}.get({name!r})", glob))
                elif isinstance(value, (np.ndarray, Tensor)):
                    readers.append((f"id({{}}.get({name!r}))", glob))
                elif _plain_object(value):
                    objects.append(value)
        if depth < 3:
            functions += [(g, depth + 1) for g in inner if g is not None]
    seen = set()
    for obj in objects:              # their number attributes (a module's training flag, p, ...)
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        attributes = vars(obj)
        names = tuple(k for k, v in attributes.items() if type(v) in _SCALARS)
        readers += [(f"{{}}.get({k!r})", attributes) for k in names]
    if not readers:
        return None
    # one generated expression, read on every call: cheaper than a function per guard
    namespace = {}
    for i, (_, obj) in enumerate(readers):
        namespace[f"o{i}"] = obj
    source = "def guard():\n    return (" + ", ".join(
        form.format(f"o{i}") for i, (form, _) in enumerate(readers)) + ",)\n"
    exec(builtins.compile(source, "<tt.compile guard>", "exec"), namespace)
    return namespace["guard"]


def _plain_object(x):
    """A user's instance with attributes (a model, a config): not a module, class, function,
    array, or tinytensor's own (its state; the Modules f calls are guarded as they are reached)."""
    return (hasattr(x, "__dict__") and not type(x).__module__.startswith("tinytensor")
            and not isinstance(x, (type, types.ModuleType, types.FunctionType, types.MethodType,
                                   functools.partial, np.ndarray, np.random.Generator, threading.local)))


def _as_tensors(args, kwargs):
    """The array leaves of the arguments as Tensors sharing their arrays (Tensors as they are)."""
    leaves = []
    _arrays_and_tensors((args, kwargs), leaves)
    out = []
    for x in leaves:
        if not isinstance(x, Tensor):
            x = _make(np.asarray(x))
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
            if type(item) is np.ndarray:          # the usual parameter list: no call per leaf
                arrays.append(item)
                key.append(item.shape)
                key.append(item.dtype)
            else:
                _flatten(item, arrays, key, tensors)
    elif t is dict:
        key.append(t)
        for k, item in tree.items():
            key.append(k)
            if type(item) is np.ndarray:          # a parameter dict
                arrays.append(item)
                key.append(item.shape)
                key.append(item.dtype)
            else:
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
