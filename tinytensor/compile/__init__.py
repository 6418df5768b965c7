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
import collections
import contextlib
import copy
import dataclasses
import functools
import gc
import inspect
import math
import os
import random
import struct
import sys
import time
import types
import warnings
from collections import OrderedDict

import numpy as np

from .. import draws, transforms
from .. import tensor as tensor_module
from ..state import SHARED, STATE
from ..tensor import Tensor
from ..weakid import IdentityWeakMap
from . import taped
from .codegen import Retrace, _generate, _Program
from .guards import _NOT_USER_MODULES, _class_state, _fingerprint, _Reach, describe_change
from .tracer import _WRAPPED, _refs, _SetGroup, _Tracer

__all__ = ["compile", "Compiled", "CACHE_SIZE", "RECOMPILE_LIMIT"]

CACHE_SIZE = 32        # programs kept per compiled function (least recently used dropped first)
RECOMPILE_LIMIT = 8    # recordings of one function before calls that fit no program run eagerly
DISABLED = [os.environ.get("TINYTENSOR_DISABLE_COMPILE", "") not in ("", "0")]


def compile(f=None, *, check=False, cache_size=CACHE_SIZE, fuse=False):
    """`f` as a define-then-run program: same signature, eager's numbers, or a refusal.

    The contract: every value the program depends on is an *input*, a *guard*, or a *refusal*.

    * Inputs: the array leaves of the arguments (arrays, Tensors: their values), and every
      Tensor f reaches that was made before the call (a model's parameters and buffers, a
      closed-over Tensor), read through the Tensor object on every call, so `w.data = ...`,
      `model.to(np.float64)` and in-place updates are seen; their shapes and dtypes are guarded.
      Number arguments (Python floats and ints, NumPy float and int scalars) too: a learning
      rate that changes every call records one program. While f is recorded it gets a tracked
      number: as an operand of a tinytensor operation (`w - lr * g`) the program runs that
      operation on the call's own number (NEP 50 as eagerly; the number's type is in the key),
      Python arithmetic on it is a line of the program, and any other use (`if lr > 0.5`,
      `float(lr)`, `math.cos(lr)`, `range(n)`, a shape, an index, a keyword parameter, an
      f-string, a dict key, returning or storing it) makes that argument part of the cache key.
    * Guards, checked on every call (a change records another program): the argument shapes,
      dtypes and other leaves (strings, None, bools, a number's type: part of the cache key);
      grad mode; every Python value the code that ran reads: closure cells, globals (NumPy scalars,
      lists, tuples, dicts and user objects by value, functions and modules by identity),
      defaults, bound `self`, partial arguments, class attributes, and each Module's mode,
      attributes, hooks and submodules (assigning a submodule, Parameter or hook bumps its
      structure version); and every Python value f reads off a traced value: `bool(t)`
      (`if loss > 1:`, `while`, `(x > 0).all()`), `float(t)`, `int(t)`, `t.item()`,
      `t.tolist()`, `np.asarray(t)`, and `t.data` / `t.numpy()` and comparison masks, whose
      NumPy operations are recorded. The program recomputes such a value and, when it differs
      from the recorded one, runs the program recorded for the other outcome or records it.
    * Refusals, at recording, with the value and the fix named: Python state f changes
      (appending to a list it closes over, rebinding a nonlocal, setting an attribute),
      writes into arguments or reached Tensors, draws past tinytensor (NumPy's
      and Python's global random state, a Generator's own methods), results whose shape
      depends on values (nonzero, boolean indexing), a reached Tensor's `.grad`,
      `retain_grad()`, hooks on Tensors made outside, `functools.cache`d helpers, generators.
      An error the program raises where it drew and wrote nothing runs f eagerly for that call
      (an exception f catches itself behaves as eagerly).

    Under grad mode, a call whose results are computed from Tensors that require grad (a
    model's parameters, closed over) returns Tensors, each one entry on the tape: the recording
    also records the reverse sweep, and is cut into a forward program (results and what the
    backward reads) and a backward program (to each parameter's gradient), which the entry's VJP
    runs. So `loss = step(x); loss.backward()` fills every parameter's `.grad` as eagerly, at
    the compiled speed (differentiating that gradient again is refused). A whole training
    step compiles: `loss.backward()`, `optimizer.step()`/`zero_grad()`, `Module.zero_grad()`,
    gradient clipping and `scheduler.step()` inside are lines of the program calling the same
    methods on every call (parameters, `.grad`, optimizer and scheduler state change as
    eagerly); a value read into Python after the step is refused. A function recorded
    more than `RECOMPILE_LIMIT` (8) times runs eagerly for calls no recorded program fits, with
    one warning; `.recompiles` lists why each program was recorded. `tt.compile.disable()`
    (or TINYTENSOR_DISABLE_COMPILE=1) makes every compiled
    function run eagerly. Random draws through tinytensor and module buffers are lines of the
    program, repeated on every call. Side effects that are not tinytensor's and do not change
    state f reads (printing) happen while recording only.

    Arguments may be arrays, Tensors, Python numbers and nested tuples/lists/dicts of them. At
    most `cache_size` programs are kept. With `check=True` the second call also runs `f`
    eagerly and raises if any result differs (not for a program that draws random numbers or
    updates buffers: running both would do that twice). A compiled call returns what `f`
    returns eagerly, type included. With `fuse=True` two gradient patterns are fused into
    fewer NumPy passes (the normalisation of layer, batch and RMS norm; the exact GELU): faster,
    but those gradients are eager's only to a few ulp (values stay eager's bit for bit); off by
    default, so every number is eager's.

    Examples
    --------
    >>> import numpy as np, tinytensor as tt
    >>> f = tt.compile(lambda x: (x * 2).sum() if (x > 0).all() else x.sum())
    >>> float(f(np.array([1.0, 2.0]))), float(f(np.array([-1.0, 2.0])))
    (6.0, 1.0)
    >>> len(f.recompiles), f.recompiles[1].split(" at ")[0]
    (2, 'bool()')
    """
    if f is None:
        return lambda g: Compiled(g, check=check, cache_size=cache_size, fuse=fuse)
    return Compiled(f, check=check, cache_size=cache_size, fuse=fuse)


def _disable(flag=True):
    """tt.compile.disable(): every compiled function runs its Python function eagerly (as
    torch.compiler.set_stance("force_eager") and MLX's disable_compile) until
    tt.compile.disable(False); so does the environment variable TINYTENSOR_DISABLE_COMPILE=1.
    Returns the previous setting (a bool). For a block: `with tt.compile.disabled(): ...`."""
    previous = DISABLED[0]
    DISABLED[0] = bool(flag)
    return previous


@contextlib.contextmanager
def _disabled():
    """`with tt.compile.disabled(): ...`: compiled functions run eagerly inside the block; the
    previous setting is put back at its end."""
    previous = _disable(True)
    try:
        yield
    finally:
        _disable(previous)


compile.disable = _disable
compile.disabled = _disabled


class Compiled:
    """A compiled function: call it as `f`; `.source` shows the generated program(s)."""

    def __init__(self, f, check=False, cache_size=CACHE_SIZE, fuse=False):
        if not callable(f):
            raise TypeError(f"tt.compile: expected a function, got {type(f).__name__}")
        if cache_size < 1:
            raise ValueError(f"tt.compile: cache_size must be at least 1, got {cache_size}")
        self.fun = f
        self.check = check
        self.fuse = fuse                # the two gradient fusions that are eager's to rounding
        self.cache_size = cache_size
        self.programs = OrderedDict()   # cache key -> _Program
        self.traces = 0                 # how many times f was recorded
        self.recompiles = []            # why each program was recorded, in order
        self.limit = RECOMPILE_LIMIT    # recordings before calls that fit no program run eagerly
        self._checked = False
        self._why = None
        self._eager_from = None         # why calls that fit no program run eagerly (past the limit)
        self._valued = frozenset()      # number arguments (input positions) whose values are keys
        self._plain_numbers = False     # f needs its numbers as they are (exact types): all keys
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
        if DISABLED[0]:
            return self._eager(args, kwargs)
        if not SHARED.quiet and (STATE.hook is not None or STATE.batch) or tensors and _through(tensors):
            return self._uncompiled(args, kwargs)
        key.append(SHARED.quiet or STATE.grad_enabled)
        n = len(arrays)
        if n > 1 and (arrays[0] is arrays[1] if n == 2 else len({id(a) for a in arrays}) < n):
            key.append(_aliases(arrays, args, kwargs))   # the same array passed twice (f(x, x))
        if self._valued:                    # number arguments f used in Python: their values
            key.append(_values(arrays, self._valued))
        key = tuple(key)
        program = self.programs.get(key)
        while program is not None and program.guard is not None and not program.guard.ok():
            modes = program.guard()                              # modes, closed-over numbers
            if modes == program.modes:
                break
            # the program recorded for these values has guards of its own (a hook added since
            # reads a global): checked in turn, as the chain of keys leads
            self._why = describe_change(program.guard, program.modes, modes)
            key = (key, modes)
            program = self.programs.get(key)
        if program is None:
            return self._miss(key, args, kwargs, arrays)
        if len(self.programs) > 1:
            self.programs.move_to_end(key)
        try:
            if self.check and not self._checked:
                self._checked = True
                return self._compare(program, arrays, args, kwargs)
            if program.undo is None and program.warns is None and program.returns is None:
                return program.function(*arrays)
            out = program.run_undoable(arrays) if program.undo is not None else program.function(*arrays)
            _warn_again(program.warns)         # (once its guards held: a branch f took this call)
            return out if program.returns is None else _given_back(program, out, args, kwargs)
        except Retrace as why:
            return self._alternatives(key, program, args, kwargs, arrays, why.why)
        except Exception as err:
            if not program.side_effects or program.clean_failure(err):   # nothing drawn or written
                return self._eager(args, kwargs)   # yet: f may catch it (try/except
            # around a solve) eagerly, f's own result or error
            raise program.error(err) from err

    def _alternatives(self, key, program, args, kwargs, arrays, why):
        """A value guard of `program` failed (a branch went the other way): the programs
        recorded for the same key with other outcomes are tried, newest first, then f is
        recorded again."""
        for i, other in enumerate(program.alternatives):
            if other.guard is not None and not other.guard.ok() and other.guard() != other.modes:
                continue           # recorded on other Python state (a flag f set since)
            try:
                out = other.run(arrays)
            except Retrace:
                continue
            _warn_again(other.warns)
            if other.returns is not None:
                out = _given_back(other, out, args, kwargs)
            rest = program.alternatives[:i] + program.alternatives[i + 1:]
            other.alternatives, program.alternatives = [program] + rest, []
            self.programs[key] = other
            return out
        self._why = why
        return self._miss(key, args, kwargs, arrays, replaced=program)

    def _miss(self, key, args, kwargs, arrays, replaced=None):
        """No program fits this call: record one (or, past the recording limit, run f eagerly)."""
        why = self._why if self.traces else "the first call"
        self._why = None
        if why is None:
            why = "new argument shapes, dtypes or non-array values: " + _key_text(key)
        if self._eager_from is not None or self.traces >= self.limit:
            if self._eager_from is None:
                self._eager_from = why
                warnings.warn(
                    f"tt.compile: {self.__name__} was recorded {self.traces} times (the limit is "
                    f"{self.limit}); the last reason: {why}. From now on, calls no recorded program "
                    f"fits run eagerly (the same numbers). Pass values that change on every call "
                    f"and are used in Python (a branch, a shape) as 0-d arrays, or keep them on "
                    f"tensors; see .recompiles",
                    RuntimeWarning, stacklevel=3)
            return self._eager(args, kwargs)
        self.recompiles.append(why)
        try:
            program = self._record(args, kwargs, arrays, plain_numbers=self._plain_numbers)
        except Exception as err:
            if not getattr(err, "tt_compile_numbers", False):
                self.recompiles.pop()      # no program recorded (f raised, or a refusal): none listed
                raise
            program = self._record(args, kwargs, arrays, plain_numbers=True)   # or f's own error
            self._plain_numbers = True          # from now on: this function's numbers are keys
            self.recompiles[-1] += f" ({err}; recorded again with its number arguments as keys)"
        if not program.valued <= self._valued:    # f used a number argument in Python: its value
            self._valued |= program.valued        # is a key from now on (this program's too)
            key = _rekey(key, arrays, self._valued)
        if replaced is not None:
            # a value guard failed: the new program takes the key, the old ones stay as its
            # alternatives, so that alternating branches each keep their program
            program.alternatives = ([replaced] + replaced.alternatives)[:self.limit]
            replaced.alternatives = []
        self.programs[key] = program
        self.programs.move_to_end(key)
        while len(self.programs) > self.cache_size:
            self.programs.popitem(last=False)
        runner = program.first or program      # (the program of a call that filled a cache)
        program.first = None
        try:
            out = runner.run(arrays)
            return out if runner.returns is None else _given_back(runner, out, args, kwargs)
        except Retrace:            # not the numbers it was recorded on (a value that varies by itself)
            return self._eager(args, kwargs)

    def _eager(self, args, kwargs):
        """f itself, on the arguments as they are (a compiled call returns what f returns)."""
        return self.fun(*args, **kwargs)

    def _uncompiled(self, args, kwargs):
        """f itself, as MLX and JAX do for a transformation of a compiled function: inside
        another recording (compiled inside compiled: inlined), on Tensors being recorded (a
        transform, or a tape that backward() must reach through), under tt.vmap (f on one
        example, batched by vmap's rules), and under detect_anomaly (the
        engine's checks name the entry and the line)."""
        return self.fun(*args, **kwargs)

    def _record(self, args, kwargs, arrays, plain_numbers=False):
        """Record f on this call (see _recorded); a refusal puts back the Python state f changed
        in place while recorded (a list it appended to, a Module's mode, a generator drawn from)."""
        reaches = []
        try:
            program = self._recorded(args, kwargs, arrays, plain_numbers, reaches)
            if program.changed_state:
                # f filled a cache it reads (`masks.setdefault(T, ...)`, `if self.w is None:
                # self.w = ...`): this call's program gives this call's result, and f is recorded
                # again on the state it left, for the calls after; changing it again is a refusal
                try:
                    second = self._recorded(args, kwargs, arrays, plain_numbers, reaches)
                except Exception as err:   # (f's own error on the state it left: a change that
                    if str(err).startswith("tt.compile"):     # cannot be made twice, such as
                        raise                                 # opt.add_param_group)
                    raise RuntimeError(reaches[-1].changed_message(self.__name__)) from err
                if second.changed_state:
                    raise RuntimeError(reaches[-1].changed_message(self.__name__))
                second.first = program
                self.recompiles[-1] += " (recorded again: it changed Python state it reads, a cache)"
                return second
            return program
        except RuntimeError as err:
            if reaches and str(err).startswith("tt.compile"):
                for reach in reversed(reaches):
                    reach.put_back()
            raise

    def _recorded(self, args, kwargs, arrays, plain_numbers, found):
        """Record f once on these arguments: the program. With `plain_numbers`, f gets its number
        arguments as they are, and their values are keys."""
        start = time.perf_counter()
        tracer = _Tracer()
        names = _argument_names(self.fun, args, kwargs)
        if len(names) != len(arrays):
            names = [f"a{i}" for i in range(len(arrays))]
        plain_arrays = _plain_array_leaves((args, kwargs))
        inputs, first = [], {}
        for i, (a, n, plain) in enumerate(zip(arrays, names, plain_arrays)):
            if isinstance(a, np.ndarray):
                t = tracer.argument(a, n, as_array=plain)
                inputs.append(first.setdefault(id(a), t))   # an array passed twice: one object
            else:                                            # in f (`a is b`), as eagerly (a key)
                inputs.append(tracer.number(a, n, i, plain_numbers))
        subclass = _array_subclass((args, kwargs))
        if subclass is not None:
            raise RuntimeError(
                f"tt.compile: {self.__name__} was given an argument of class {subclass.__name__}, a "
                f"subclass of np.ndarray or of Tensor whose own behaviour (np.matrix's * as a matrix "
                f"product, a masked array's mask, its own methods) the program, which computes on "
                f"plain arrays and Tensors, would not keep. Pass np.asarray(x) (or tt.tensor(x)), or "
                f"call the function uncompiled")
        traced_args, traced_kwargs = _refill((args, kwargs), iter(inputs), numbers=True)
        given = _contents((traced_args, traced_kwargs))     # f's writes into them: refused
        tracer.watch_generators(self.fun, args, kwargs)
        reach = _Reach(self.fun, tracer)
        tracer.codes_ran = reach.codes          # (the user code that runs: see _SetGroup.store)
        found.append(reach)
        stamp = STATE.memory_write           # this thread's writes only
        python_random = random.getstate()
        modes = (STATE.grad_enabled, STATE.anomaly)
        returned = numbers = False
        caught = ()
        try:
            with tracer:
                reach.enter()
                try:
                    with warnings.catch_warnings(record=True) as caught:
                        warnings.simplefilter("always")
                        tracer.filters = warnings.filters   # f's own catch_warnings: another list
                        try:
                            out = self.fun(*traced_args, **traced_kwargs)
                        except Exception as err:
                            if tracer.read_only and isinstance(err, ValueError) and "read-only" in str(err):
                                raise RuntimeError(
                                    f"tt.compile: {self.__name__} wrote in place into np.asarray(t) of a "
                                    f"traced Tensor (its own memory: a parameter, a buffer, an argument "
                                    f"or a value computed from them), a write the program would not "
                                    f"replay. Write through tinytensor (with tt.no_grad(): t.mul_(0.5)), "
                                    f"return the new value, or call the function uncompiled") from err
                            # maybe code that takes exact numbers only (json, a C type check, a
                            # seed): where f changed nothing yet, it is recorded again with its
                            # numbers as they are (and raises there if the error is f's own)
                            if (tracer.numbers and not str(err).startswith("tt.compile")
                                    and _undisturbed(tracer, stamp, python_random)):
                                err.tt_compile_numbers = True
                            raise
                        returned = True
                        if _contents((traced_args, traced_kwargs)) != given:
                            raise RuntimeError(
                                f"tt.compile: {self.__name__} changed a list or dict it was passed "
                                f"(d[k] = ..., append, a defaultdict's new key) while being recorded; "
                                f"the program would not repeat that. Return the new values instead, "
                                f"or call the function uncompiled")
                        out = tracer.output_keys(out)      # {x[0]: 1}: eager's key, a guard
                        returns = _returned_arguments(tracer, out, inputs, traced_args, traced_kwargs)
                        del traced_args, traced_kwargs, inputs     # the _Numbers: only f's now
                        if tracer.numbers:     # a number returned is the call's own: a key
                            out = _returned_numbers(out, tracer)
                        tracer.module_outputs()
                        tracer.check_owners("the end of the call")
                finally:
                    reach.exit()
                # results on the tape (enable_grad inside too); not after a whole training step,
                # whose backward() ran inside and whose optimizer step changed what it saved
                if not tracer.stepped and taped.new_leaf_reached(tracer, out) is not None:
                    raise RuntimeError(
                        f"tt.compile: {self.__name__} returns a result computed from a Tensor that "
                        f"requires grad made inside it (tt.tensor(..., requires_grad=True)); its "
                        f"backward() would fill that new Tensor's .grad, which the program cannot "
                        f"link on each call. Make the Tensor outside and pass it in (or close over "
                        f"it), or call the function uncompiled")
                swept = None if tracer.stepped else taped.sweep(tracer, out)
        finally:
            tracer.restore()
            numbers = bool(tracer.numbers)
            if numbers:
                _put_back_numbers(tracer)
            err = sys.exc_info()[1]       # f's optimizer steps &c. put back: the program's first
            if returned or isinstance(err, RuntimeError) and str(err).startswith("tt.compile"):
                tracer.undo_effects()     # run does them (a refusal leaves no trace of the call)
            elif err is not None and not getattr(err, "tt_compile_numbers", False):
                _warn_again(caught)       # f's own error: the warnings it gave first, as eagerly

        if numbers and builtins.any("type" in code.co_names for code in reach.codes):
            # `type(lr) is float` would see the tracked number's class, not eager's: numbers as keys
            err = TypeError("the code that ran calls type(), which a tracked number cannot answer as "
                            "its value does")
            err.tt_compile_numbers = True
            raise err
        # shown now, as eagerly; the user's own warnings on every call. NumPy's floating-point
        # warnings (a log of a negative) not: the program's run on this call gives them, as later
        _warn_again([w for w in caught if not _numpy_float_warning(w)])
        if np.geterr() != tracer.errstate:
            np.seterr(**tracer.errstate)
            raise RuntimeError(
                f"tt.compile: {self.__name__} changed NumPy's floating-point error handling "
                f"(np.seterr) and left it changed; the compiled program would not change it again. "
                f"Use `with np.errstate(...):` inside (the program keeps it line by line), set it "
                f"outside the compiled function, or call the function uncompiled")
        if tracer.raised:
            name, err = tracer.raised[0]
            raise RuntimeError(
                f"tt.compile: {self.__name__} caught the {type(err).__name__} that {name} raised "
                f"while being recorded ({err}); whether it is raised depends on the values, and the "
                f"program would take the branch of this call on every call. Test the values "
                f"instead (tt.where, np.isfinite), or call the function uncompiled")
        if inspect.isgeneratorfunction(getattr(self.fun, "__func__", self.fun)) \
                or isinstance(out, types.GeneratorType):
            raise RuntimeError(
                f"tt.compile: {self.__name__} returns a generator, which runs its body when it is "
                f"iterated, after the call the program records; return a list or a tuple instead, or "
                f"call it uncompiled")
        if tracer.laundered is not None:
            raise RuntimeError(f"tt.compile: {self.__name__} {tracer.laundered}")
        _refuse_opaque_results(out, self.__name__)
        if (STATE.grad_enabled, STATE.anomaly) != modes:
            STATE.grad_enabled = modes[0]
            raise RuntimeError(
                f"tt.compile: {self.__name__} changed grad mode (tt.set_grad_enabled, torch-style "
                f"no_grad().__enter__) and left it changed while being recorded; the compiled program "
                f"would not change it again. Use `with tt.no_grad():` inside, or set the mode outside "
                f"the compiled function")
        tracer.check_generators(self.__name__)
        if random.getstate() != python_random:
            random.setstate(python_random)
            raise RuntimeError(
                f"tt.compile: {self.__name__} drew from Python's random module while being "
                f"recorded; the compiled program would repeat those numbers on every call. Draw "
                f"with tinytensor (tt.rand, tt.randn, with rng=), or pass the numbers in as an "
                f"argument, or call the function uncompiled")
        _check_effects_last(tracer, self.__name__)
        if tracer.read_after_step is not None:
            raise RuntimeError(
                f"tt.compile: {self.__name__} {tracer.read_after_step} after a scheduler's step inside "
                f"it: that Python value (a learning rate to log or to use) is what the scheduler set "
                f"on this call, and the program, which repeats the steps, cannot read it again on the "
                f"next. Read it before sched.step(), or outside the compiled function, or call it "
                f"uncompiled")
        changed = reach.changed()
        tracer.held_arrays = reach.held_arrays()
        if STATE.memory_write != stamp:
            self._refuse_writes(tracer, stamp)
        self.traces += 1
        if swept is not None:       # results on the tape: one entry per result, its VJP a program
            program = taped.split(tracer, out, swept, getattr(self.fun, "__name__", "f"))
            main = _Program(program, program.source)
            main.contexts = program.forward.contexts
            main.error = program.forward.error
        else:
            plain = ()            # a whole step's results that require grad: made Tensors after
            if tracer.stepped or tracer.stale:         # (or a call whose backward would raise)
                leaves, _, roots, wrt = taped._on_the_tape(tracer, out)
                plain = {k for k in roots if leaves[k]._id >= tracer.start} if wrt else ()
            fname = getattr(self.fun, "__name__", "f")
            main = _generate(tracer, out, fname, plain=plain, fuse=self.fuse)
            step = taped.spent(tracer, out, main, fname) if tracer.stepped else (
                taped.stale(tracer, out, main, fname) if tracer.stale else None)
            if step is not None:      # a whole training step: its results that required grad too
                inner = main
                main = _Program(step, main.source)
                main.contexts, main.error = inner.contexts, inner.error
                main.first_effect, main.code = inner.first_effect, inner.code
        program = main
        program.returns = returns
        program.valued = frozenset(tracer.valued)
        if program.valued:
            self.recompiles[-1] += (f" (a number argument is part of the cache key: {tracer.number_reads[0]}"
                                    f"{' and more' if len(tracer.number_reads) > 1 else ''})")
        program.reads = bool(tracer.guards)
        program.guard = reach.guard()
        program.modes = None if program.guard is None else program.guard()
        program.undo = _undo(tracer)
        program.side_effects = builtins.any(e.kind in ("draw", "store", "effect") for e in tracer.entries)
        program.warns = [w for w in caught if (_is_user_file(w.filename) or w.filename == __file__
                                               or getattr(w.message, "tt_every_call", False))
                         and not _numpy_float_warning(w)] or None   # (__file__: f's
        # warnings.warn(..., stacklevel=2), which names the line that called f)
        program.trace_seconds = time.perf_counter() - start
        program.changed_state = changed
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
        raise RuntimeError(f"tt.compile: {self.__name__} changed arrays in place while being recorded "
                           f"(an in-place update of a closed-over array or Tensor, an optimizer step); "
                           f"the compiled program would not repeat it. Keep the update outside the "
                           f"compiled function (return the new values, or the gradients), or call it "
                           f"uncompiled")

    def _compare(self, program, arrays, args, kwargs):
        compiled = program.run(arrays)
        if program.returns is not None:
            compiled = _given_back(program, compiled, args, kwargs)
        if program.side_effects:      # it drew or wrote buffers: running f as well would do it twice
            return compiled
        eager = self.fun(*args, **kwargs)
        got, _ = transforms.tree_flatten(compiled)
        want, _ = transforms.tree_flatten(eager)
        if len(got) != len(want):
            raise RuntimeError(f"tt.compile(check=True): {self.__name__} returned {len(want)} "
                               f"leaves eagerly but the compiled program returns {len(got)}")
        for i, (g, w) in enumerate(zip(got, want)):
            w = np.asarray(w.data if isinstance(w, Tensor) else w)
            g = np.asarray(g.data if isinstance(g, Tensor) else g)   # a result on the tape too
            if g.shape != w.shape or not _close(g, w):
                raise RuntimeError(
                    f"tt.compile(check=True): result {i} of {self.__name__} differs from the eager "
                    f"call (compiled {_summary(g)}, eager {_summary(w)}). The function probably "
                    f"branches on values (if/while on a tensor, float(), np.asarray(...)) or has "
                    f"side effects, which the program froze at trace time. Write the branch with "
                    f"array operations (tt.maximum, masks), or do not compile this function.")
        return compiled


_SCALARS = (int, float, bool, str, type(None), complex)
# Number arguments that are inputs of the program (not bool: a mode flag; not complex), unless
# f uses one in Python where the program cannot replay it (_Number): then its value is a key.
_NUMBERS = frozenset((float, int, np.float64, np.float32, np.float16, np.int64, np.int32, np.int16,
                      np.int8, np.uint64, np.uint32, np.uint16, np.uint8))


def _holds_traced(leaf):
    """Whether an object f returns that is not a container tt.compile rebuilds (a deque, a set,
    an instance of the user's class) holds a value of the recording."""
    if isinstance(leaf, (Tensor, np.ndarray, np.generic, type, str, bytes, int, float, complex)) \
            or leaf is None:
        return False
    if isinstance(leaf, (collections.deque, set, frozenset)):
        items = list(leaf)
    else:
        try:
            items = list(vars(leaf).values())
        except TypeError:
            return False
        if _module_like(leaf):
            return False
    return builtins.any(isinstance(v, (Tensor, np.ndarray)) and type(v).__module__.startswith(
        "tinytensor.compile") for v in items)


def _module_like(obj):
    """A Module or an optimizer (a result f may return as it is: the same object)."""
    return hasattr(obj, "param_groups") or hasattr(obj, "_parameters") or hasattr(obj, "named_parameters")


def _refuse_opaque_results(out, name):
    """A result the program cannot rebuild on each call (a closure or a partial holding traced
    values, an iterator, an object whose attributes hold results) is refused, as JAX refuses a
    non-pytree output: returned, it would hold the recording's values on every later call. So
    is a container of a class of the user's (a tuple, list or dict subclass other than a
    namedtuple or an OrderedDict): the program would give back a plain one."""
    subclass = _container_subclass(out)
    if subclass is not None:
        raise RuntimeError(
            f"tt.compile: {name} returns a {subclass.__name__}, a subclass of a tuple, list or dict, "
            f"which the compiled program would give back as a plain one; return a tuple, list, dict "
            f"or namedtuple (and make your class from it outside), or call the function uncompiled")
    for leaf in transforms.tree_flatten(out)[0]:
        t = type(leaf)
        opaque = (isinstance(leaf, (types.FunctionType, types.MethodType, functools.partial,
                                    types.SimpleNamespace))
                  or hasattr(t, "__next__") or t.__name__ in ("dict_values", "dict_keys", "dict_items")
                  or dataclasses.is_dataclass(leaf) and not isinstance(leaf, type)
                  or _holds_traced(leaf))
        if opaque:
            raise RuntimeError(
                f"tt.compile: {name} returns a {t.__name__}, which the compiled program cannot "
                f"rebuild on each call (it would hold the first call's values); return the values "
                f"in a tuple, list, dict or namedtuple instead (a function or pullback: call it "
                f"inside), or call the function uncompiled")


def _container_subclass(tree, depth=0):
    """The first tuple, list or dict subclass in a result's structure (not a namedtuple, an
    OrderedDict, a defaultdict or a Counter, which come back as they are), or None."""
    t = type(tree)
    if depth > 32 or t in (tuple, list, dict):
        pass
    elif isinstance(tree, (tuple, list, dict)):
        if not (isinstance(tree, tuple) and hasattr(tree, "_fields")
                or type(tree) in (collections.OrderedDict, collections.defaultdict, collections.Counter)):
            return t
    else:
        return None
    for v in (tree.values() if isinstance(tree, dict) else tree):
        found = _container_subclass(v, depth + 1)
        if found is not None:
            return found
    return None


def _numpy_float_warning(w):
    """A RuntimeWarning of NumPy's floating-point error handling ("invalid value encountered in
    log"), which the program's own NumPy calls give again."""
    return issubclass(w.category, RuntimeWarning) and " encountered in " in str(w.message)


def _warn_again(warns):
    """The user's own warnings f gave while recorded, again on a call of the program (as eagerly;
    one that named the line calling f names the line calling the compiled function)."""
    if not warns:
        return
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
    # the caller's module's registry, as warnings.warn uses: "default" gives each once per line
    registry = None if frame is None else frame.f_globals.setdefault("__warningregistry__", {})
    for w in warns:
        if (w.filename == __file__ or not _is_user_file(w.filename)) and frame is not None:
            warnings.warn_explicit(w.message, w.category, frame.f_code.co_filename, frame.f_lineno,
                                   registry=registry)   # (tinytensor's own line: the caller's)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, registry=registry)


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _is_user_file(name):
    from .tracer import _NOT_USER
    return not str(name).startswith(_NOT_USER)


def _key_text(key):
    text = repr(key)
    return text if len(text) <= 160 else text[:157] + "..."


def _name_of(t):
    return t.name if isinstance(getattr(t, "name", None), str) else f"{type(t).__name__}{t.shape}"


def _check_effects_last(tracer, name):
    """A program with a whole training step (backward(), optimizer.step(), ...) checks its value
    guards before the first of those (zero_grad aside): a guard failing after one would leave
    the step half done when the call is recorded again. A guard read later whose value depends
    on the arguments alone (cross-entropy's test for ignored labels on a second microbatch) is
    moved there, with the lines it needs (they are pure); any other is refused."""
    entries = tracer.entries
    first = next((i for i, e in enumerate(entries) if e.kind == "effect"
                  and not e.name.endswith("zero_grad")), None)      # zero_grad: done twice, the same
    if first is None:
        return
    late = [e for e in entries[first:] if e.kind == "guard"]
    if not late:
        return
    producer = {e.out: e for e in entries}
    lives = {var for var, _ in tracer.lives}
    arguments = set(tracer.arguments)
    moved = set()

    def from_arguments(var):          # var computed from the arguments alone, by pure lines
        if var in arguments:
            return True
        e = producer.get(var)
        if var in lives or e is None or e.kind in ("effect", "draw", "store", "guard"):
            return False
        if e.out not in moved and all(from_arguments(r) for r in _refs(e.args, []) + _refs(e.kwargs, [])):
            moved.add(e.out)
        return e.out in moved

    for e in late:
        if not all(from_arguments(r) for r in _refs(e.args, [])):
            raise RuntimeError(
                f"tt.compile: {name} reads a value into Python after {entries[first].name}() "
                f"({e.label.split(' was ')[0]}): the program checks such a value on every call, and "
                f"a different value after the step has begun would leave it half done. Return the "
                f"value (a Tensor) and read it outside the compiled function (loss.item() after the "
                f"call), or read it before backward()")
    hoisted = [e for e in entries[first:] if e.out in moved or e.kind == "guard"]
    kept = [e for e in entries[first:] if not (e.out in moved or e.kind == "guard")]
    tracer.entries = entries[:first] + hoisted + kept


def _undo(tracer):
    """For a program that checks values while it runs (a guard on `if loss > 1:`) and also draws
    random numbers or writes buffers: the generators and buffer Tensors to put back when a guard
    fails midway (the call is then recorded again, eagerly, from the state it found)."""
    if not tracer.guards:
        return None
    generators, buffers = [], []
    for e in tracer.entries:
        if e.kind == "draw":
            rng = e.args[0]
            g = rng if isinstance(rng, np.random.Generator) else None
            if rng is None:
                g = draws.generator(None)
            if g is not None and g not in generators:
                generators.append(g)
    lives = dict(tracer.lives)
    written = set(tracer.buffers)
    for e in tracer.entries:         # a Tensor made outside written in place (cnt.add_(1), an
        if e.kind == "store":        # EMA): its store line names the live array it writes
            written.update(_refs(e.args[:1], []))
    for var in written:
        t = lives.get(var)
        if t is not None and not builtins.any(t is b for b in buffers):
            buffers.append(t)
    if not generators and not buffers:
        return None
    return generators, buffers


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
def _contents(tree, found=None):
    """The lists and dicts in tree, each with its items by identity (a write into one shows)."""
    if found is None:
        found = []
    if isinstance(tree, dict):
        found.append((id(tree), tuple((k, id(v)) for k, v in tree.items())))
        for v in tree.values():
            _contents(v, found)
    elif isinstance(tree, (list, tuple)):
        if isinstance(tree, list):
            found.append((id(tree), tuple(id(v) for v in tree)))
        for v in tree:
            _contents(v, found)
    return found


def _array_subclass(tree):
    """The class of the first ndarray subclass among tree's leaves, or of a Tensor subclass of
    the user's (its own methods), or None."""
    if isinstance(tree, np.ndarray):
        return None if type(tree) is np.ndarray else type(tree)
    if isinstance(tree, Tensor):
        return None if type(tree).__module__.startswith("tinytensor") else type(tree)
    if isinstance(tree, dict):
        tree = list(tree.values())
    if isinstance(tree, (list, tuple)):
        for v in tree:
            found = _array_subclass(v)
            if found is not None:
                return found
    return None


def _rebuilt(tree, children):
    """A container like `tree` (its class, a defaultdict's factory, a subclass's attributes)
    holding `children` instead."""
    t = type(tree)
    if t in (dict, list, tuple) or isinstance(tree, tuple) and hasattr(tree, "_fields"):
        return transforms._rebuild(tree, children)
    if isinstance(tree, tuple):                  # a tuple subclass: its class and attributes
        new = tuple.__new__(t, children)
        if getattr(tree, "__dict__", None):
            new.__dict__.update(tree.__dict__)
        return new
    new = copy.copy(tree)                        # a dict or list subclass, a defaultdict
    if isinstance(tree, dict):
        dict.clear(new)
        dict.update(new, children)
    else:
        list.__setitem__(new, slice(None), children)
    return new


def _aliases(arrays, args, kwargs):
    """Which array leaves are the same object: for each, the position of its first; and so for
    the lists and dicts holding them (f(d, d) against f(d, dict(d)))."""
    first = {}
    arrays = tuple(first.setdefault(id(a), i) for i, a in enumerate(arrays))
    containers, stack = [], [args, kwargs]
    while stack:
        x = stack.pop()
        if isinstance(x, (list, dict)):
            containers.append(x)
        if isinstance(x, (list, tuple)):
            stack.extend(reversed(x))
        elif isinstance(x, dict):
            stack.extend(reversed(list(x.values())))
    first = {}
    return ("aliases",) + arrays + tuple(first.setdefault(id(c), i) for i, c in enumerate(containers[1:]))


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
    elif isinstance(tree, Tensor):          # a Tensor: f gets a Tensor (an array: an array)
        tensors.append(tree)
        key.append(t)                       # (a subclass of the user's: refused when recorded)
        _flatten(tree.data, arrays, key, tensors)
    elif isinstance(tree, (dict, tuple, list)):   # OrderedDict, namedtuple, ...
        key.append(t)
        if t.__module__ not in _NOT_USER_MODULES and "_field_defaults" not in t.__dict__:
            # a class of the user's (not namedtuple's own): its attributes and methods (a
            # property reading a class attribute) and the instance's own (lst.scale) are values f
            # may read
            key.append(_class_state(t))
            if getattr(tree, "__dict__", None):
                key.append(_fingerprint(tree.__dict__))
        items = tree.items() if isinstance(tree, dict) else enumerate(tree)
        for k, item in items:
            key.append(k)
            _flatten(item, arrays, key, tensors)
    elif isinstance(tree, np.ndarray):            # a subclass (np.matrix, a masked array): its
        key.append(t)                             # class in the key (refused when recorded)
        _flatten(np.asarray(tree), arrays, key, tensors)
    elif t in _NUMBERS:       # a number: an input of the program (its type in the key), see _Number
        arrays.append(tree)
        key.append(t)
    elif t in _WRAPPED:       # a recording's number (inlined when that recording is on), or one
        arrays.append(tree.value)       # left where f stored it: its value
        key.append(type(tree.value))
    else:
        try:
            hash(tree)
        except TypeError:       # a slice (Python 3.11), a set, an object defining __eq__ only: by
            # its contents, as a guard compares it, and (a mapping proxy, ...: what its fingerprint
            # names by id) the object itself, held, so that no id in it is given to another object
            key.append((t, _fingerprint(tree), None if t in (slice, set, frozenset) else _Same(tree)))
            return
        key.append((t, tree, math.copysign(1.0, tree)) if t is float else (t, tree))   # -0.0 too


def _returned_arguments(tracer, out, inputs, traced_args, traced_kwargs):
    """What f returns of its arguments as they are (eagerly the caller's own objects), or None:
    ({result leaf position: input position} for Tensor arguments, [(path in the result, path in
    the arguments)] for containers: `lambda d: d`, `lambda v: (v, 1)`)."""
    position = {id(x): i for i, x in enumerate(inputs) if isinstance(x, Tensor)}
    found = {k: position[id(x)] for k, x in enumerate(transforms.tree_flatten(out)[0])
             if isinstance(x, Tensor) and id(x) in position
             and tracer.index.get(id(x)) in tracer.tensor_arguments}
    where = {}
    for side, tree in enumerate((traced_args, traced_kwargs)):
        for k, v in (tree.items() if side else enumerate(tree)):
            _containers(v, (side, k), where)
    containers = []
    _returned_containers(out, (), where, containers)
    return (found, containers) if found or containers else None


def _containers(tree, path, where):
    if isinstance(tree, (dict, list, tuple)):
        where.setdefault(id(tree), path)
        for k, v in tree.items() if isinstance(tree, dict) else enumerate(tree):
            _containers(v, path + (k,), where)


def _returned_containers(tree, path, where, found):
    if isinstance(tree, (dict, list, tuple)):
        if id(tree) in where:
            found.append((path, where[id(tree)]))
            return
        for k, v in tree.items() if isinstance(tree, dict) else enumerate(tree):
            _returned_containers(v, path + (k,), where, found)


def _given_back(program, out, args, kwargs):
    """The program's results with what f returns of its arguments as they are put back: the
    caller's own Tensors and containers, as eagerly."""
    leaves_at, containers = program.returns
    if leaves_at:
        given = _input_leaves((args, kwargs))
        leaves, structure = transforms.tree_flatten(out)
        for k, i in leaves_at.items():
            leaves[k] = given[i]
        out = transforms.tree_unflatten(structure, leaves)
    for path, source in containers:
        node = (args, kwargs)
        for k in source:
            node = node[k]
        out = _put(out, path, node)
    return out


def _put(tree, path, value):
    """tree with the node at `path` replaced by value (the containers along the path rebuilt)."""
    if not path:
        return value
    k = path[0]
    items = dict(tree) if isinstance(tree, dict) else list(tree)
    items[k] = _put(tree[k], path[1:], value)
    return transforms._rebuild(tree, items)


def _input_leaves(tree, found=None):
    """The input leaves of `tree` as the caller passed them, in _refill's order."""
    found = [] if found is None else found
    if isinstance(tree, (Tensor, np.ndarray)) or type(tree) in _NUMBERS or type(tree) in _WRAPPED:
        found.append(tree)
    elif isinstance(tree, dict):
        for v in tree.values():
            _input_leaves(v, found)
    elif isinstance(tree, (tuple, list)):
        for v in tree:
            _input_leaves(v, found)
    return found


def _plain_array_leaves(tree):
    """For each input leaf of `tree` (in _refill's order, numbers included): whether the caller
    passed it as a NumPy array (not a Tensor)."""
    return [isinstance(x, np.ndarray) for x in _input_leaves(tree)]


def _refill(tree, inputs, numbers=False, seen=None):
    """`tree` with its array leaves (and, with `numbers`, its number leaves: the program's inputs
    as _flatten takes them) replaced, in order, by the next items of `inputs`. A list or dict
    met twice (f(d, d)) is rebuilt once, as f sees one object eagerly (`a is b`)."""
    if isinstance(tree, (np.ndarray, Tensor)) or numbers and (type(tree) in _NUMBERS
                                                              or type(tree) in _WRAPPED):
        return next(inputs)
    if seen is None:
        seen = {}
    if isinstance(tree, dict):
        out = _rebuilt(tree, {k: _refill(v, inputs, numbers, seen) for k, v in tree.items()})
    elif isinstance(tree, (tuple, list)):
        out = _rebuilt(tree, [_refill(v, inputs, numbers, seen) for v in tree])
    else:
        return tree
    if not isinstance(tree, tuple):          # (a mutable container: its identity is f's to see)
        out = seen.setdefault(id(tree), (tree, out))[1]
    return out


class _Same:
    """A key part equal only to the same object (held alive: its id is not reused meanwhile)."""
    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __eq__(self, other):
        return type(other) is _Same and other.obj is self.obj

    def __hash__(self):
        return id(self.obj)


def _values(arrays, valued):
    """The cache key's part for number arguments f used in Python: their values, floats by
    their bits (a zero's sign, a NaN's sign and payload), as the guards compare."""
    key = []
    for i in valued:
        v = arrays[i] if i < len(arrays) else None
        if type(v) is float:
            v = (float, _DOUBLE.pack(v))
        elif isinstance(v, np.floating):    # (a longdouble's padding bytes are not its value)
            v = (type(v), v.tobytes() if v.itemsize <= 8 else repr(v), bool(np.signbit(v)))
        elif not isinstance(v, np.ndarray):
            v = (type(v), v)
        else:
            v = None                # an array at that position (another structure)
        key.append(v)
    return _Valued(key)


_DOUBLE = struct.Struct("<d")


class _Valued(tuple):
    """The part of a cache key holding number arguments' values (see Compiled._valued)."""


def _rekey(key, arrays, valued):
    """`key` (maybe (key, modes)) with its number values part for the `valued` positions."""
    if type(key[0]) is tuple:                           # (key, modes): a guard's outcome
        return (_rekey(key[0], arrays, valued), key[1])
    if type(key[-1]) is _Valued:
        key = key[:-1]
    return key + (_values(arrays, valued),)


def _returned_numbers(out, tracer):
    """f's results with the _Numbers among them as their values (returned, a number is used
    in Python: the arguments it comes from become keys)."""
    leaves, structure = transforms.tree_flatten(out)
    if not builtins.any(type(x) in _WRAPPED for x in leaves):
        return out
    plain = []
    for x in leaves:
        if type(x) in _WRAPPED:
            tracer.number_read(x, "returned")
            x = x.value
        plain.append(x)
    return transforms.tree_unflatten(structure, plain)


def _undisturbed(tracer, stamp, python_random):
    """Whether f, stopped by an error while recorded, changed nothing the recording sees (no
    write, draw, optimizer step, Python random draw): it may be recorded again."""
    return (STATE.memory_write == stamp and not tracer.stepped and random.getstate() == python_random
            and not builtins.any(e.kind in ("draw", "store", "effect") for e in tracer.entries))


def _put_back_numbers(tracer):
    """The _Numbers f stored where they outlive the recording (`group["lr"] = lr`, `self.t = t`,
    appended to a list) are put back as their values there, and the arguments they come from
    become keys (the program does not repeat the store; whether f may store at all is the
    guards' question)."""
    numbers, tracer.numbers = tracer.numbers, []
    copies = {id(d) for u in tracer.undo for d in getattr(u, "copies", ())}    # the recording's
    copies |= {id(d) for _, settings in tracer.owner_states.values() if type(settings) is list  # own
               for _, d in settings}
    for n in numbers:        # held by `numbers`, tracer.alive, n and getrefcount's argument only:
        if sys.getrefcount(n) <= 4:         # not stored (the usual case: no scan of the heap)
            continue
        for holder in gc.get_referrers(n):
            if holder is tracer.alive or holder is numbers:
                continue
            if type(holder) is types.CellType:      # a closure made in f: `lambda x: x * lr`
                holder.cell_contents = n.value
                tracer.number_read(n, "stored (a closure)")
            elif type(holder) is dict:
                for k, v in list(holder.items()):
                    if v is n:
                        holder[k] = n.value
                        if id(holder) in copies:
                            continue
                        placed = _SetGroup(holder, k).store(tracer, n) if _param_group(tracer, holder) \
                            else None
                        if placed is None:          # (not a param group, or one f reads it from)
                            tracer.number_read(n, "stored (an attribute, a dict, a list)")
                        elif not placed and tracer.laundered is None:
                            tracer.laundered = (   # (a number computed after the step: refused)
                                f"set param_groups[...][{k!r}] to a number computed from its number "
                                f"arguments where the program cannot write it before the optimizer's "
                                f"step; compute it before the step, or set it outside the compiled "
                                f"function")
            elif type(holder) is list:
                for i, v in enumerate(holder):
                    if v is n:
                        holder[i] = n.value
                        if id(holder) not in tracer.node_values:
                            tracer.number_read(n, "stored (an attribute, a dict, a list)")
            elif type(holder) is tuple and holder is not tracer.alive:   # group["betas"] = (b1, .999)
                plain = list(holder)     # (no comprehension: a closure cell would hold n)
                for i, v in enumerate(plain):
                    if v is n:
                        plain[i] = n.value
                plain = tuple(plain)
                for owner in gc.get_referrers(holder):
                    if type(owner) is dict and (id(owner) in copies or _param_group(tracer, owner)):
                        for k, v in list(owner.items()):
                            if v is holder:
                                owner[k] = plain
                                tracer.number_read(n, "stored (in a tuple)")
    numbers.clear()


def _param_group(tracer, d):
    """Whether dict d is a parameter group of an optimizer stepped inside f."""
    return builtins.any(d is g for o, _ in tracer.owner_states.values()
                        for g in vars(o).get("param_groups", ()) if type(g) is dict)


def _argument_names(f, args, kwargs):
    """A readable name per array (and number) leaf: the parameter's name, and the path inside it
    (params_W1)."""
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
        if isinstance(node, (np.ndarray, Tensor)) or type(node) in _NUMBERS or type(node) in _WRAPPED:
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
