"""The recorder of `tt.compile`: `_Tracer` notes, as entries of a Wengert list, every primitive
`f` calls, every value computed off the tape (`ops.on_values`), every rule the engine's own
sweeps apply, every random draw and every write into a module's buffer. It owns no sweep and
patches nothing: while it records, this thread's `STATE.recorder` (and `STATE.hook`) is it, and
the engine calls it (see tinytensor/state.py). The Tensors it records become `_Traced`, whose
comparisons and reads into Python it notes."""

import builtins
import collections
import copy
import dis
import functools
import inspect
import itertools
import math
import operator
import os
import sys
import sysconfig
import threading
import types
import warnings

import numpy as np

from .. import draws, ops, tape
from .. import rng as rng_module
from .. import tensor as tensor_module
from ..state import STATE, off_the_record, update_hook
from ..tensor import Tensor, _make


# ----- the op table, as code generation reads it -------------------------------------------------
def declared(name, part=None, i=None):
    """Primitive `name` of the op table (tape.REGISTRY), or its `part` ("fun", "vjps", "jvps";
    rule `i`): what code generation's fast forms and fusions are keyed on. Missing, it raises,
    naming what: a renamed primitive or rule fails loudly instead of silently turning a fast
    path off."""
    prim = tape.REGISTRY.get(name)
    value = prim if part is None or prim is None else getattr(prim, part, None)
    if value is not None and i is not None:
        value = value[i] if i < len(value) else None
    if value is None:
        raise RuntimeError(f"tt.compile's code generation reads primitive {name!r}"
                           f"{'' if part is None else f' ({part}' + ('' if i is None else f'[{i}]') + ')'} "
                           f"from the op table, and it is missing: update tinytensor/compile to its new "
                           f"name")
    return value


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
        self.out_kinds = {}       # variable -> the kind of the last entry that wrote it
        self.index = {}           # id(Tensor or array) -> variable
        self.alive = []           # keeps every indexed object alive, so ids stay unique
        self.arguments = []
        self.reads = []           # where f read a traced value into Python ("file:line: how")
        self.modules = {}         # Module f called -> its `training` flag at the first call
        self.generator_states = {}   # np.random.Generator f may draw from -> its state now
        self.first_states = {}       # Generator drawn from -> its state before the first draw
        self.legacy_state = np.random.get_state()
        self.buffers = set()         # variables that are module buffers (written in place by f)
        self.live_vars = set()       # the variables of self.lives
        self.live_ids = set()        # and the id of their Tensors (its variable changes when written)
        self.saved = {}              # id(buffer array) -> (array, its value before recording)
        self.lives = []              # (variable, Tensor): Tensors made before the recording that f
        #                              reached (parameters, buffers, closed-over Tensors), inputs
        #                              read through the Tensor object on every call
        self.swapped = []            # (Tensor, its class) put back when the recording ends
        self.guards = 0              # value guards: Python values f read off traced values
        self.tainted_frames = {}     # id -> the user frames handed recorded NumPy arrays (kept
        #                              alive while recording: a freed frame's id is reused)
        self.depth_inside = 0        # > 0 while a primitive's forward or a rule runs (inside)
        self.errstate = np.geterr()  # NumPy's floating-point error handling when f was called;
        self.errstates = {}          # variable -> the settings f changed (np.errstate) for its entry
        self.raised = []             # errors a primitive's forward raised (f may have caught one)
        self.filters = None          # the warning filters f was called with (the recording's list)
        self.warnings_recorded = 0   # f's own `warnings.catch_warnings(record=True)` blocks open now
        self.warning_filters = {}    # variable -> the filters f added (catch_warnings) for its entry
        self.flags_read = set()      # live variables whose requires_grad f read
        self.hookless = ()           # leaves whose Tensor hooks the recorded sweep leaves to the
        #                              outer backward (a compiled call's tape entry reaches them)
        self.deferred = False        # recording the sweep of a compiled call's tape entry: its
        #                              rules run again (checks included) when backward() runs
        self.legacy_states = {}      # np.random.RandomState -> its state when f was called
        self.initial_states = {}     # every generator f reaches -> its state when f was called
        self.laundered = None        # where such a frame called np.asarray & co (refused)
        self.read_only = False       # np.asarray(t) handed f a read-only view (see _array)
        self.made_generators = []    # those np.random.default_rng made while f ran (guards.enter)
        self.start = tensor_module._next_id()   # Tensors with a smaller _id existed before
        self.grad_mode = STATE.grad_enabled
        self.undo = []               # what puts back the state the recorded effects changed
        self.stepped = False         # whether f ran a training step's effects (backward(), ...)
        self.stale = None            # the error its results' backward gave while recorded (taped.sweep)
        self.read_after_step = None  # where f read an optimizer's settings after a scheduler step
        self.scheduled = False       # whether a scheduler stepped while recording
        self.owner_states = {}       # id(optimizer or scheduler) -> (it, its settings after its step)
        self.group_stores = []       # (param group, key) the program writes a number into (_SetGroup)
        self.group_lines = []        # the same, also where the number is a key (f reads the item too)
        self.number_vars = set()     # the number arguments and Python arithmetic on them
        self.stepped_owners = set()  # id of the optimizers and schedulers whose step() f called
        self.data_owner = {}         # id(p.data's traced array) -> p, a Tensor f reaches
        self.grad_owner = {}         # id(p.grad's traced array) -> p (see read_grad)
        self.views = {}              # id(a view f took of p.data, p.grad or an array f made) ->
        #                              (that array, the chain of indexes and view methods)
        self.view_objects = {}       # id(such an array) -> the views f took of it
        self.superseded = set()      # variables of arrays whose memory f has written over since
        self.made, self.last_made = 0, None   # how many _Tainted f was handed, and the newest
        self.grad_reads = {}         # id(leaf) -> (effects so far, the traced .grad f read)
        self.recording = False       # while f runs: a _Number's uses are noted only then
        self.numbers = []            # the _Numbers handed to f or computed from them
        self.valued = set()          # positions (among the inputs) of number arguments whose use in
        #                              Python the program cannot replay: they are part of the key
        self.number_reads = []       # why, "how at file:line", in order
        self.operand_counts = None   # id(a primitive's forward) -> its operand count (nargs)
        self.node_values = set()     # id(a recorded tape node's values list): may hold _Numbers
        self.generic_vars = set()    # variables that NumPy gave as a NumPy scalar (eagerly one)
        self.aliased = set()         # variables whose arrays share memory (views of each other)
        self.user_primitives = {}    # id -> a tt.primitive f ran (its rules, replaceable, are guarded)
        self.outer_depth = STATE.depth   # (called inside a transform: its results are the transform's)
        self.scalar_operators = {}    # variable -> NumPy scalars' operator f applied (x[0] ** 3 of an
        #                              array argument, not np.power): the program applies it too
        self.leaf_ids = set()        # id of every transform's leaf on a traced value
        self.leaf_vars = set()       # and its variable (a Tensor there, whatever made it)
        self.inner_tensors = {}      # id -> a transform's leaf, or a primitive's result on one: eagerly
        #                              a Tensor, even where its variable is an array argument's
        self.holders = {}            # variable -> the Tensors holding its memory (t, t.detach())
        self.generic_prims = set()   # 0-d primitive results NumPy gave as a scalar (eagerly one
        #                              where no operand is a Tensor)
        self.array_arguments = set()  # arguments the caller passed as NumPy arrays
        self.tainted_vars = set()     # values f has as NumPy arrays (_Tainted): t.data, tt.grad's
        self.tensor_arguments = set()  # ... as Tensors
        self.tensor_vars = set()     # variables held as Tensors made off the primitives (the
        #                              Tensor tt.randn makes on its draw): eagerly Tensors
        self.draw_vars = set()       # the random draws' variables
        self.numpy_tensors = set()   # values off the tape handed out as Tensors (tt.floor of one)
        self.array_operands = {}     # variable -> positions of its entry's operands f held as
        #                              NumPy arrays (a Tensor's .data): eagerly arrays
        self.tensor_constants = set()  # id(array) of constant Tensors' values in entries
        self.constant_views = {}       # id(constant Tensor) -> the view of its value entries hold

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

    def argument(self, array, name, as_array=False):
        """Argument `array` as f sees it: a _Traced Tensor. `as_array`: the caller passed a NumPy
        array (what f computes from it alone is eagerly an array: codegen._eagerly_tensors)."""
        # A view (the caller's memory, no copy) with an identity of its own: f may also close
        # over the caller's array, which is then a constant, not this input (and the same array
        # passed twice is two inputs).
        array = np.ndarray.view(array, np.ndarray)
        t = _make(array, cls=_Traced)
        var = self._new(array, name, t, array)
        self.arguments.append(var)
        (self.array_arguments if as_array else self.tensor_arguments).add(var)
        return t

    def number(self, value, name, position, plain=False):
        """Number argument `value` (input `position` of the program) as f sees it: a _Number
        (`plain`: the value itself, a key)."""
        if plain:
            self.arguments.append(self._new(value, name))
            self.valued.add(position)
            self.number_reads.append("f's code takes exact numbers only")
            return value
        n = (_NumberNP if isinstance(value, np.generic) else _Number)(value, frozenset((position,)), self)
        var = self._new(value, name, n)
        self.arguments.append(var)
        self.number_vars.add(var)
        self.numbers.append(n)
        self.generic_prims.add(var)    # eagerly, tinytensor's 0-d results on it are NumPy scalars
        return n

    def number_op(self, fun, name, args, value, sources):
        """`value = fun(*args)`, Python's arithmetic on _Numbers: a line of the program."""
        n = (_NumberNP if isinstance(value, np.generic) else _Number)(value, sources, self)
        self.numbers.append(n)
        var = self.record(fun, name, args, {}, value, f"{name} of number arguments", "number", objects=(n,))
        if var is not None:
            self.number_vars.add(var)
        return n

    def number_array(self, n):
        """_Number n made an array by a transform (tt.grad of a function of a number argument):
        its 0-d array, a line of the program, so the number stays an input rather than a key."""
        value = np.asarray(n.value)
        self.record(np.asarray, "asarray", (n,), {}, value, "a number argument as a 0-d array", "numpy")
        return value

    def number_read(self, n, how):
        """f used _Number n in Python (a branch, a conversion, a shape): the number arguments it
        comes from become part of the cache key."""
        new = n.sources - self.valued
        if new:
            self.valued |= new
            frame = _user_frame()
            if frame is not None:
                how += f" at {os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"
            self.number_reads.append(how)

    def var_of(self, x):
        """The variable holding x (a Tensor or an array), or None for a constant."""
        var = self.index.get(id(x))
        if var is None and isinstance(x, Tensor):
            var = self.index.get(id(x.data))
            if var in self.draw_vars:  # a Tensor made on a draw (tt.randn): eagerly a Tensor
                self.tensor_vars.add(var)
        return var

    def template(self, x):
        """x with every recorded value replaced by a _Ref (containers walked)."""
        var = self.var_of(x) if isinstance(x, (Tensor, np.ndarray, np.generic)) else None
        if var is not None:
            return _Ref(var)
        if isinstance(x, Tensor):
            var = self.live(x)
            if var is None:                               # a constant Tensor made inside f:
                data = x.data                             # a view of its value, an object of its
                if type(data) is np.ndarray:              # own (a Tensor made on an array that f
                    data = self.constant_views.get(id(x))     # also passes raw shares it, and
                    if data is None:                          # eagerly that one is an array)
                        data = self.constant_views[id(x)] = x.data.view()
                        self.alive.append(x)
                self.tensor_constants.add(id(data))
                self.alive.append(data)
                return data
            return _Ref(var)
        if type(x) is _Tainted:
            raise _untracked(x)
        if type(x) in _WRAPPED:
            var = self.index.get(id(x))
            if var is not None and x.tracer is self:
                return _Ref(var)
            self.number_read(x, "a constant of the program")
            return x.value
        if type(x) in (tuple, list):
            return type(x)(self.template(v) for v in x)
        if type(x) is dict:
            return {k: self.template(v) for k, v in x.items()}
        return x

    def record(self, fun, name, args, kwargs, value, label, kind, hint=None, objects=(), context=None,
               constants_too=False):
        """Note `value = fun(*args, **kwargs)` if any argument is recorded (or `constants_too`);
        returns its variable (or None, for a computation on constants only, a constant)."""
        arrays = [i for i, a in enumerate(itertools.chain(args, kwargs.values()))   # t.data, a mask:
                  if type(a) is _Tainted]                                         # arrays
        args = self.template(tuple(args))
        kwargs = self.template(dict(kwargs))
        if not (constants_too or _has_ref(args) or _has_ref(kwargs)):
            return None
        known = value if isinstance(value, (np.ndarray, np.inexact)) else None   # not np.True_
        var = self._new(value, hint, known, *objects)
        if arrays:
            self.array_operands[var] = frozenset(arrays)
        state = np.geterr()
        if state != self.errstate:    # inside f's `with np.errstate(...)`: its line runs so too
            self.errstates[var] = {k: v for k, v in state.items() if self.errstate[k] != v}
        filters = warnings.filters
        if self.warnings_recorded > 0 and self.laundered is None:
            self.laundered = (   # f's own `with warnings.catch_warnings(record=True) as w:`
                "ran an operation inside `warnings.catch_warnings(record=True)`; a warning it gives on "
                "a later call (a log of a negative) would reach the caller, not f's list, and what "
                "f reads from the list (len(w)) would keep this call's. Put the catch_warnings around "
                "the compiled call, use warnings.simplefilter(...) without record=True inside, or "
                "call the function uncompiled")
        if filters is not self.filters and self.filters is not None and self.filters:
            ours = self.filters[0]    # inside f's `with warnings.catch_warnings(): simplefilter(...)`:
            added = next((filters[:k] for k, x in enumerate(filters) if x is ours), ())   # its filters
            if added:
                self.warning_filters[var] = tuple(added)
        self._append(_Entry(fun, name, args, kwargs, var, label, kind, context))
        return var

    def _append(self, entry):
        self.entries.append(entry)
        self.out_kinds[entry.out] = entry.kind     # (the kind of the last line writing a variable)

    def live(self, t, hint=None):
        """The variable of Tensor t, made before this recording (a parameter, a buffer, a Tensor
        f closes over): an input of the program read as `t.data` on every call, so rebinding
        `.data`, `.to(dtype)` and in-place updates are all seen (shape and dtype are guarded).
        None for a Tensor made during the recording (a constant) or not on the CPU."""
        var = self.index.get(id(t))
        if var is not None:
            return var
        if t._id >= self.start or type(t.data) is not np.ndarray:
            return None
        data = t.data
        var = self._new(data, hint or _live_hint(t), t, data)
        self.lives.append((var, t))
        self.live_vars.add(var)
        self.live_ids.add(id(t))
        cls = type(t)
        if cls is not _Traced and not issubclass(cls, _Traced):
            self.swapped.append((t, cls))
            t.__class__ = _live_class(cls)      # its reads into Python are noted, as _Traced's
        return var

    def restore(self):
        """Put back the classes of the Tensors made live during the recording."""
        for t, cls in reversed(self.swapped):
            t.__class__ = cls
        self.swapped = []
        self.tainted_frames = {}             # the frames (and their locals) go

    def guard(self, conversion, x, value, how):
        """f turned traced x into the Python value `value` (bool(), float(), .item(), .tolist()):
        the program recomputes conversion(x) and re-records when it differs (the branch f took
        on it is part of what the program is)."""
        var = x.var if type(x) is _Ref else self.var_of(x)
        if var is None or self.depth_inside:
            return value
        self.guards += 1
        frame = _user_frame()
        where = "" if frame is None else f" at {os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"
        out = self._new(value, "guard")
        recorded = copy.deepcopy(value) if type(value) in (list, dict) else value   # (f may edit
        self._append(_Entry(conversion, "guard", (_Ref(var),), {}, out,     # the list
                                   f"{how}{where} was {_short(value)} when recorded", "guard",   # it got)
                                   context=recorded))
        return value

    def read(self, t, how):
        """state.constant_read: tinytensor's own code read traced t's value into a constant of
        what it computes: a guard on the whole value."""
        if not self.depth_inside and self.var_of(t) is not None:
            self.guard(_snapshot, t, _snapshot(t.data), how)

    def output_keys(self, out, depth=0):
        """out with each dict key (and set member) that is a traced value NumPy's scalar eagerly
        ({x[0]: 1}, Counter(np.sign(x)), {x[0], x[2]}) made that scalar, a guard on its bits: the
        program gives back eager's key by construction (another key records again). Containers
        are rebuilt only where a key changed."""
        if depth > 32:
            return out
        if isinstance(out, dict):
            items = [(self._output_key(k), self.output_keys(v, depth + 1)) for k, v in out.items()]
            if builtins.all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(items, out.items())):
                return out
            if type(out) is collections.defaultdict:
                return collections.defaultdict(out.default_factory, items)
            return type(out)(dict(items))         # (a Counter counts a list's pairs)
        if type(out) in (set, frozenset):        # {x[0], x[2]}: eager's scalars, guards
            items = [self._output_key(k) for k in out]
            return out if builtins.all(k is k0 for k, k0 in zip(items, out)) else type(out)(items)
        if type(out) in (tuple, list) or isinstance(out, tuple) and hasattr(out, "_fields"):
            parts = [self.output_keys(v, depth + 1) for v in out]
            if builtins.all(p is v for p, v in zip(parts, out)):
                return out
            return type(out)(*parts) if hasattr(out, "_fields") else type(out)(parts)
        return out

    def _output_key(self, k, depth=0):
        if type(k) in (tuple, frozenset) or isinstance(k, tuple) and hasattr(k, "_fields"):
            parts = [self._output_key(v, depth + 1) for v in k] if depth < 32 else list(k)
            if builtins.all(p is v for p, v in zip(parts, k)):
                return k
            return type(k)(*parts) if hasattr(k, "_fields") else type(k)(parts)
        if isinstance(k, Tensor):
            scalar = np.ndim(_SLOT_DATA.__get__(k)) == 0 and (self.eagerly_numpy_scalar(k)
                                                              or self.eagerly_numpy_value(k))
            data = _SLOT_DATA.__get__(k)
        elif type(k) is _Tainted:
            scalar, data = _tainted_scalar(k), _raw(k)
        else:
            return k
        if not scalar:
            if isinstance(k, Tensor) and k._id >= self.start:   # (a parameter as a key: the same)
                raise RuntimeError(
                    "tt.compile: f returns a dict key or set member that is a Tensor computed from "
                    "traced values ({w[0]: 1}); eagerly a new Tensor each call, hashed by identity, "
                    "which the program, whose keys are fixed, cannot give back. Key by a number "
                    "(w[0].item()) or return the Tensors in a list, or call the function uncompiled")
            return k
        self.guard(_snapshot, k, _snapshot(data), "a dict key f returns")
        return np.asarray(data)[()]

    def guard_var(self, var, value, how):
        """A guard on variable `var` itself (a Python value a NumPy call on traced values gave)."""
        return self.guard(_itself, _Ref(var), value, how)

    def leaf(self, t):
        """A transform's new leaf t on a traced value (tt.grad's z): traced, so that user code's
        reads of it (z.data, z.tolist()) are noted as the value's."""
        if type(t) is Tensor and self.index.get(id(t.data)) is not None:
            t.__class__ = _Traced
            self.leaf_ids.add(id(t))          # (not an array f has: see _raw_inside)
            self.leaf_vars.add(self.index[id(t.data)])
            self.alive.append(t)
            if not self.outer_depth:
                self.inner_tensors[id(t)] = t
        return t

    def data_of(self, t):
        """state.traced_data: t's value as a traced array where t is traced (outside an entry)."""
        var = None if self.depth_inside else self.var_of(t)
        return t.data if var is None else self.tainted(t.data, var)

    def array_of(self, a):
        """state.traced_array: array `a` as a traced array where it is a traced value."""
        var = None if self.depth_inside or type(a) is not np.ndarray else self.index.get(id(a))
        return a if var is None else self.tainted(a, var)

    def tainted(self, array, var):
        """`array` (a traced value) as the NumPy array f sees: its NumPy operations are recorded
        and its reads into Python guarded (_Tainted)."""
        if not isinstance(array, np.ndarray):
            array = np.asarray(array)
        view = np.ndarray.view(array, _Tainted)
        self.index[id(view)] = var
        self.tainted_vars.add(var)
        self.alive.append(view)
        self.made += 1                     # (the newest, for a NumPy scalar type's call on it:
        self.last_made = view              # guards._Reach._scalar_call)
        frame = sys._getframe(2)           # the user frame it is handed to (a comparison, t.data, an
        for _ in range(4):                 # argmax a user calls), if within a few frames of here:
            if frame is None or _is_user(frame.f_code):   # one made deep inside a layer stays there
                break
            frame = frame.f_back
        if frame is not None and _is_user(frame.f_code):
            self.tainted_frames[id(frame)] = frame
        return view

    def wrap(self, value, var):
        """A Tensor holding `value`, known as variable `var`."""
        if type(value) is not np.ndarray:
            value = np.ndarray.view(value, np.ndarray) if isinstance(value, np.ndarray) else np.asarray(value)
        t = _make(value, cls=_Traced)
        self.index[id(t)] = var
        self.index[id(t.data)] = var
        self.alive.append(t)
        return t

    def hook_argument(self, g):
        """The gradient `g` a sweep hands a Tensor's hook: a Tensor whose reads (g.numpy(),
        g.data) are traced arrays, as its operations are."""
        var = self.index.get(id(g))
        return _make(g) if var is None else self.wrap(g, var)

    def tensor(self, g):
        """A gradient or tangent from a sweep as a Tensor the rest of f can use (a constant
        array stays an array)."""
        var = None if g is None else self.var_of(g)
        return g if var is None else self.wrap(g, var)

    def eagerly_numpy_scalar(self, x):
        """Whether traced x (a Tensor or a recorded array) is eagerly a NumPy scalar: computed
        from the arrays f was passed alone, 0-d, as NumPy gives it (x.mean(), x[0, 0])."""
        var = self.index.get(id(x))
        if var is None or np.ndim(_SLOT_DATA.__get__(x) if isinstance(x, Tensor) else x):
            return False
        if var in self.generic_vars:
            return True
        return var in self.generic_prims and var in self.array_arguments

    def eagerly_numpy_value(self, t):
        """Whether Tensor t, made inside a transform f runs, is eagerly a NumPy value there (a
        comparison's mask, or arithmetic on masks alone): a transform given it as f's output
        refuses it as it refuses a NumPy value."""
        var = self.index.get(id(t))
        return var is not None and (var in self.generic_vars or self._eagerly_numpy_var(var)
                                    or var in self.array_arguments and id(t) not in self.leaf_ids)

    def passed_as_array(self, t):
        """Whether Tensor t is an argument the caller passed as a NumPy array, or computed from
        such arguments alone, which f has eagerly as an array (f sees a Tensor; where tinytensor
        treats a plain array otherwise, a loss's target or NumPy's scalar rule, it asks)."""
        return self.index.get(id(t)) in self.array_arguments

    def array(self, x):
        """A transform's result at the outermost level as f gets it eagerly, an array: recorded
        (a _Tainted, its NumPy operations noted), or, computed from constants, the array itself."""
        scalar = isinstance(x, Tensor) and self.eagerly_numpy_scalar(x)   # (a has_aux tt.sum(y))
        if isinstance(x, Tensor):
            x = _SLOT_DATA.__get__(x)
        if not isinstance(x, np.ndarray) or type(x) is _Tainted:
            return x
        var = self.var_of(x)
        if var is not None and scalar:
            self.generic_vars.add(var)     # handed out as the NumPy scalar it is eagerly
        return x if var is None else self.tainted(x, var)

    # ----- recording, this thread only -----
    def __enter__(self):
        self.recording = True
        self.thread = threading.get_ident()
        _RECORDING.add(self)
        self._previous = STATE.recorder
        STATE.recorder = self
        update_hook(tape.ANOMALY_CHECK)
        return self

    def __exit__(self, *exc):
        self.recording = False
        _RECORDING.discard(self)
        STATE.recorder = self._previous
        update_hook(tape.ANOMALY_CHECK)

    # ----- what the engine tells the recorder -----
    def primitive(self, out, prim, args, params, generic=False):
        """Primitive.__call__ made `out` (STATE.hook; `generic`: NumPy gave a scalar, which an
        operation on arrays hands out eagerly)."""
        if STATE.anomaly:
            tape._anomaly_check_forward(out, prim, args)
        context = (prim.name, _plain_numbers(args, []) if self.numbers else args)   # no _Number kept
        if type(prim) is not tape.Primitive:     # a user's (tt.primitive): defvjp may replace a rule
            self.user_primitives[id(prim)] = prim
        var = self.record(prim.fun, prim.name, args, params, out.data, prim.name, "prim",
                          objects=(out,), context=context)
        if self.numbers and out._values is not None:   # a tape node holding the call's numbers:
            self.node_values.add(id(out._values))        # not a place f stored them in
            self.alive.append(out._values)
        inner = STATE.depth - self.outer_depth     # > 0: inside a transform f runs (values: Tensors)
        raw = not inner or self._raw_inside(args)  # NumPy values eagerly may be met there too
        if var is not None and raw:     # from arrays the caller passed alone: eagerly an array too
            self._from_array_arguments(var)
        if var is not None:
            out.__class__ = _Traced           # its comparisons and reads are noted
            for a in args:                    # a view (reshape, .T, a slice): a write into one
                if isinstance(a, Tensor) and type(a.data) is np.ndarray and out.data.size \
                        and np.may_share_memory(out.data, a.data):       # shows in the other
                    self.aliased.add(var)
                    self.aliased.add(self.var_of(a))
            if out.data.ndim == 0:
                self.entries[-1].kind = self.out_kinds[var] = "prim0"   # NumPy may give a scalar: asarray'd
                refs = _refs(self.entries[-1].args, [])
                if raw and (generic or builtins.any(   # (inside a transform, values
                        r in self.generic_prims for r in refs)   # are Tensors) NumPy's: an op on a
                        and self._gives_a_scalar(prim, args, params)):   # NumPy scalar may give one
                    self.generic_prims.add(var)
                if inner and generic and refs and builtins.all(self._eagerly_numpy_var(r) for r in refs):
                    self.generic_vars.add(var)    # (on a comparison's mask, eagerly NumPy's: tt.sum(x > 0))
        if var is not None and prim.name in _PRIM_UFUNCS and raw and builtins.all(
                self._numpy_operand(a, prim.name == "power") for a in args) \
                and _operator_at(sys._getframe(1), _PRIM_UFUNCS[prim.name]):
            self._scalar_operator(var, out, args)      # x[0] ** 3, x[0] + y[0]: NumPy scalars' own
        if var is not None and STATE.depth and self.inner_tensors and builtins.any(
                id(a) in self.inner_tensors for a in args):   # kept and returned by f: a Tensor
            self.inner_tensors[id(out)] = out
        if var is not None and params:        # (last: the entries above are the primitive's)
            self._guard_static_params(prim, params)

    def _from_array_arguments(self, var):
        """Note the last entry's result `var` as computed from arrays the caller passed alone
        (with numbers and f's NumPy values): eagerly NumPy's array (or scalar) too."""
        if not self.array_arguments:
            return
        e = self.entries[-1]
        refs = _refs(e.args, []) + _refs(e.kwargs, [])
        if refs and builtins.all(r in self.array_arguments or r in self.number_vars
                                 or r in self.tainted_vars for r in refs) \
                and builtins.any(r in self.array_arguments for r in refs) and not builtins.any(
                id(a) in self.tensor_constants for a in e.args):
            self.array_arguments.add(var)

    def _raw_inside(self, args):
        """Inside a transform f runs: whether an operation on `args` may be on NumPy values f has
        eagerly (its array arguments, x[0] of one: `tt.grad(lambda t: t * x[0] ** 3)`), not on
        the transform's leaves (which share an array argument's memory, and variable) or under
        tt.vmap (its values are batched)."""
        return not STATE.batch and not builtins.any(
            isinstance(a, Tensor) and id(a) in self.leaf_ids for a in args)

    def _scalar_operator(self, var, out, args):
        """Recorded `a op b` whose operands are NumPy scalars eagerly, at f's operator: NumPy
        scalars' own arithmetic (C's pow for `**`, whose last bit is not np.power's; the NaN of
        two their `+` keeps is not np.add's), in the program and in this recording's value."""
        op = _SCALAR_OPERATORS[_PRIM_UFUNCS[self.entries[-1].name]]
        values = [np.ndarray.view(_SLOT_DATA.__get__(a), np.ndarray) if isinstance(a, Tensor)
                  else a.value if type(a) in _WRAPPED else a for a in args]
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = op(*values)[()]
        data = _SLOT_DATA.__get__(out)
        if np.result_type(value) == data.dtype:
            np.ndarray.view(data, np.ndarray)[()] = value
            self.scalar_operators[var] = op

    def _gives_a_scalar(self, prim, args, params):
        """Whether NumPy's form of built-in primitive `prim`, given as NumPy scalars the operands
        that are NumPy scalars eagerly, gives a NumPy scalar (x - y does; np.where, reshape and
        a percentile's select do not): NumPy itself decides, on this call's 0-d values."""
        if type(prim) is not tape.Primitive:
            return True                   # (a user's: its function is not run twice)
        return self._numpy_gives_a_scalar(prim.fun, args, _plain_numbers(params, []), failing=True)

    def _numpy_gives_a_scalar(self, fun, args, kwargs, failing=False):
        """Whether NumPy function `fun`, given as NumPy scalars the operands that are NumPy
        scalars eagerly, gives a NumPy scalar (np.floor_divide(x[0], 1) does); `failing` where
        it raises."""
        def value(a):
            a = a.value if type(a) in _WRAPPED else a
            if not isinstance(a, Tensor):
                return a
            data = _SLOT_DATA.__get__(a)
            scalar = self.var_of(a) in self.generic_prims and np.ndim(data) == 0
            return np.ndarray.view(data, np.ndarray)[()] if scalar else data
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return isinstance(fun(*map(value, args), **{k: value(v) for k, v in kwargs.items()}),
                                  np.generic)
        except Exception:     # noqa: BLE001  (a prim's: as before, an op on a NumPy scalar gives one)
            return failing

    def _numpy_operand(self, a, arrays):
        """Whether operand `a` is, eagerly, a NumPy scalar or a number, or (`arrays`) a NumPy
        array of some axes (an array argument, or computed from such alone): an operator f
        applies to it is NumPy's own (`z ** 2` is np.square, `x[0] ** 3` C's pow)."""
        if not isinstance(a, Tensor):
            return _a_number(a)
        if np.ndim(_SLOT_DATA.__get__(a)) == 0:
            return self.eagerly_numpy_scalar(a)
        return arrays and self.passed_as_array(a)

    def _eagerly_numpy_var(self, var):
        """Whether variable var is, eagerly, a NumPy array even inside a transform (a
        comparison's mask: its entry is NumPy's, not a primitive's; or NumPy's scalar of
        arithmetic on such alone)."""
        if var in self.numpy_tensors or var in self.tensor_vars or var in self.leaf_vars:
            return False
        if var in self.generic_vars:
            return True
        return self.out_kinds.get(var) == "numpy"

    # ----- a whole training step: backward(), zero_grad, clipping, optimizer and scheduler steps --
    def backward(self, output):
        """tape.backward while recording: its sweep is recorded (each rule it applies), and its
        last step, the accumulation into the leaves' `.grad`, is a line of the program
        (`accumulate`). Refused where the program could not repeat it."""
        if self.depth_inside:
            raise RuntimeError("tt.compile: .backward() inside a primitive's rule or forward is not "
                               "recorded; compute the gradient with tt.grad there instead")
        if tape.POST_BACKWARD and _several_ranks():
            raise RuntimeError(
                "tt.compile: .backward() inside a compiled function while a hook runs after every "
                "backward (DistributedDataParallel's gradient synchronisation): the program would not "
                "synchronise. Compile the loss only (step = tt.compile(loss_fn)), call .backward() "
                "outside, or run the step uncompiled")

    def accumulate(self, grads, handed):
        """backward()'s last step while recording: each leaf's `.grad` gets its gradient now (as
        eagerly) and on every call of the program, from that call's gradients."""
        leaves = list(grads)
        for leaf in leaves:
            if leaf._id >= self.start or self.live(leaf) is None:
                raise RuntimeError(
                    f"tt.compile: .backward() inside the compiled function reached {_tensor_name(leaf)}, "
                    f"a Tensor that requires grad made inside it (or not on the CPU): its .grad would "
                    f"belong to a new Tensor on every call. Make it before the call (a parameter), or "
                    f"return the gradient (tt.grad / tt.value_and_grad)")
        values = [grads[leaf] for leaf in leaves]
        refs = tuple(self.template(g) for g in values)
        # arrays the program holds as constants (a seed, a constant gradient) are the same objects
        # on every call: never handed over as a .grad (copied, as eagerly the seed is)
        pinned = [g for g, r in zip(values, refs) if type(r) is not _Ref]
        pinned += [e.args[0] for e in self.entries if e.kind == "seed" and isinstance(e.args[0], np.ndarray)]
        self.remember_tensors(leaves)
        tape.accumulate(grads, handed)
        self._effect_entry(_Accumulate(leaves, pinned), "backward", refs, None,
                           "backward(): each leaf's .grad, on every call")

    def effect(self, what, method, args, kwargs):
        """`method(*args, **kwargs)` (an optimizer's step or zero_grad, a scheduler's step,
        gradient clipping) called while recording: run now, as eagerly, and a line the program
        runs on every call, in the recorded order. What it changes is put back when the
        recording ends (`undo_effects`): the program's first run does it again."""
        if self.depth_inside:
            raise RuntimeError(f"tt.compile: {what} inside a primitive's rule is not recorded")
        found = []
        _plain_numbers((args, kwargs), found)
        for n in found:                     # clip_grad_norm_(ps, max_norm) of a number argument:
            self.number_read(n, f"an argument of {what}")   # the line is called with it: a key
        for x in _leaves((args, kwargs)):
            made_here = isinstance(x, Tensor) and (x._id >= self.start or self.live(x) is None)
            if made_here or isinstance(x, (np.ndarray, np.generic)) and self.var_of(x) is not None:
                raise RuntimeError(
                    f"tt.compile: {what} inside the compiled function is given a value computed in it "
                    f"({_short(x)}); the program would call it with the first call's value again. "
                    f"Call it outside the compiled function with that value, or run the step uncompiled")
        owner = getattr(method, "__self__", None)
        owners = [o for o in (owner, getattr(owner, "optimizer", None)) if _hyperparameters(o) is not None]
        self.check_owners(what, owners)
        self.remember_owner(owner, method, args)
        stamp = STATE.memory_write
        self.recording = False              # (a number argument written into a param group and
        try:                                # read by the step: the line reads it on each call)
            with off_the_record(tape.ANOMALY_CHECK):
                result = method(*args, **kwargs)
        finally:
            self.recording = True
            STATE.memory_write = stamp      # a write the program repeats: not refused
        for o in owners:                    # what f itself may not change until the next step
            self.owner_states[id(o)] = (o, _hyperparameters(o))
            if getattr(method, "__name__", None) == "step":   # (after it, not even to a number
                self.stepped_owners.add(id(o))              # argument: its step has read them)
        value = result.data if isinstance(result, Tensor) else result
        self._effect_entry(_Call(method, args, kwargs), what.split("(")[0].replace(".", "_"), (),
                                 value, f"{what}, on every call",
                                 objects=(result if isinstance(result, Tensor) else None,))
        if isinstance(result, Tensor):
            result.__class__ = _Traced      # f's reads of it (float(norm)) are noted
            var = self.var_of(result)
            if var is not None:             # eagerly a Tensor (clip_grad_norm_'s norm)
                self.tensor_vars.add(var)
        return result

    def read_grad(self, t):
        """`p.grad` of a Tensor f reaches, read by f (after a backward() inside: the lecture's
        `p -= lr * p.grad`, a gradient norm to log; or a compiled optimizer step): a line of the
        program reading it on every call, after the effects before it; the same array until the
        next effect, as eagerly. None is checked to stay None (another program otherwise)."""
        effects = builtins.sum(1 for e in self.entries if e.kind == "effect")
        seen = self.grad_reads.get(id(t))
        if seen is not None and seen[0] == effects:
            return seen[1]
        grad = _SLOT_GRAD.__get__(t)
        if grad is None:          # (a later call finding one records again)
            self._effect_entry(_GradNone(t), "grad_none", (), None, "p.grad is None, on every call")
            self.grad_reads[id(t)] = (effects + 1, None)
            return None
        var = self._effect_entry(_GradOf(t), "grad", (), grad, "p.grad, on every call")
        traced = self.tainted(grad, var)          # (eagerly the NumPy array .grad holds)
        self.grad_owner[id(traced)] = t
        self.grad_reads[id(t)] = (effects + 1, traced)
        return traced

    def set_grad(self, t, value):
        """`t.grad = value` (an array, or None) on a Tensor f reaches: done now, and a line of
        the program setting it (to a copy: eagerly an array of its own) on every call."""
        self.remember_tensors([t])
        plain = _raw(value) if type(value) is _Tainted else value
        _SLOT_GRAD.__set__(t, None if plain is None else np.array(plain, copy=True))
        args = () if value is None else (self.template(value),)
        self._effect_entry(_SetGrad(t), "set_grad", args, None, "p.grad = ..., on every call")
        self.grad_reads.pop(id(t), None)

    def check_owners(self, what, owners=None):
        """Refuse f's own changes to an optimizer's or a scheduler's settings after one of its
        steps while recording (`opt.param_groups[0]["lr"] = lr`): the program repeats the steps,
        not f's Python writes. (Changes before the first step are Python state f changed:
        a change made again on the next recording is refused: _Reach.changed.)"""
        for o, recorded in list(self.owner_states.values()) if owners is None else \
                [self.owner_states[id(o)] for o in owners if id(o) in self.owner_states]:
            now = _hyperparameters(o)
            if now != recorded if id(o) in self.stepped_owners else not _same_settings(now, recorded):
                raise RuntimeError(
                    f"tt.compile: the compiled function changed the settings of {type(o).__name__} "
                    f"(a learning rate in param_groups, a scheduler's attribute) after its step, "
                    f"before {what}; the program repeats the steps but not that Python write. Use "
                    f"a scheduler, or change it outside the compiled function")

    def _effect_entry(self, fun, name, args, value, label, objects=()):
        known = value if isinstance(value, np.ndarray) else None
        var = self._new(value, name, known, *objects)
        self._append(_Entry(fun, name, args, {}, var, label, "effect"))
        self.stepped = True
        return var

    def remember_tensors(self, tensors):
        """Keep what an effect may change of these Tensors (values in place, .grad)."""
        saved = []
        for t in tensors:
            grad = _SLOT_GRAD.__get__(t)
            data = t.data
            saved.append((t, data, data.copy(), grad, grad.copy() if isinstance(grad, np.ndarray) else None))
        self.undo.append(lambda: _put_back_tensors(saved))

    def remember_owner(self, owner, method, args):
        """Keep what an optimizer's, a scheduler's or a Module's method, or a clipping function,
        may change."""
        optimizer = owner if hasattr(owner, "param_groups") and hasattr(owner, "state") else \
            getattr(owner, "optimizer", None)
        if optimizer is not None and hasattr(optimizer, "param_groups"):
            self.remember_tensors(optimizer.params)
            self.undo.append(_optimizer_put_back(optimizer))
        if owner is not None and owner is not optimizer and hasattr(owner, "optimizer"):   # a scheduler
            self.undo.append(_attributes_put_back(owner))
            self.scheduled = True             # it sets learning rates: f's reads of them from now
            groups = vars(optimizer).get("param_groups") if optimizer is not None else None
            if type(groups) is list:          # on are noted (_Watched)
                vars(optimizer)["param_groups"] = _Watched(groups, self)
                self.undo.append(lambda: vars(optimizer).__setitem__("param_groups", groups))
        if owner is not None and hasattr(owner, "parameters") and not hasattr(owner, "optimizer"):
            self.remember_tensors(list(owner.parameters()))            # Module.zero_grad
        if owner is None:                                             # clip_grad_norm_(params, ...)
            self.remember_tensors([x for x in _leaves(args) if isinstance(x, Tensor)])

    def undo_effects(self):
        """Put back what the recorded effects changed, last first (the program's run does them)."""
        while self.undo:
            self.undo.pop()()

    def in_place(self, t, other, op, ufunc=None):
        """`t += v` (tensor._in_place) where t or v is traced and nothing records it on the tape:
        recorded, the name rebound to the result (writing into t's array would be a side effect
        the program never repeats); None where it is not traced (or t is an argument: written,
        then refused by _refuse_writes). Into a module's buffer (a BatchNorm's running
        statistics): written, and the write is a line of the program, repeated on every call."""
        if self.var_of(t) in self.buffers or self._reached(t):
            return self._store(t, op(t, other))
        if not (self._traced(t) or self._traced(other)) or _is_argument(self, t):
            return None
        numpy_own = ufunc is not None and self.passed_as_array(t) and not self.eagerly_numpy_scalar(t)
        if numpy_own:                        # NumPy checks the cast before computing (no warning
            _numpy_cast_first(t, other, ufunc)   # of `c **= 0.5` on negative ints: its error)
        out = op(t, other)
        if self.eagerly_numpy_scalar(t):     # eagerly a NumPy scalar: `t += v` rebinds t to the
            return out                       # result, of the promoted type (int64 += 1.5: float64)
        if out.dtype != t.dtype and not np.can_cast(out.dtype, t.dtype, "same_kind"):
            if not numpy_own:                # eager's error: a Tensor's (tensor._in_place)
                return None
            _numpy_cast_first(t, other, ufunc, always=True)   # (raises, as `a += 1.5` on ints)
        self._refuse_aliased_write(t)
        if out.shape != t.shape:
            raise ValueError(f"in-place operator: the result has shape {out.shape} but t has shape "
                             f"{t.shape}; an in-place operation cannot change the shape")
        return out if out.dtype == t.dtype else ops.astype(out, t.dtype)

    def setitem(self, t, index, value):
        """`t[idx] = v` (Tensor.__setitem__) where t or v is traced and nothing records it on the
        tape: recorded as setitem, t now holding the result. False where it is not traced."""
        if not (self._traced(t) or self._traced(value)) or _is_argument(self, t):
            return False
        if self.var_of(t) in self.buffers or self._reached(t):   # (NumPy's write: an index may
            self._store(t, ops.setitem(t, value, index=index, repeats=True))   # repeat a position)
            return True                                       # (a Tensor made outside f: an EMA,
        self._refuse_aliased_write(t)                         # a clamp_, w[0] = ...)
        new = ops.setitem(t, value, index=index, repeats=True)
        t.data = new.data
        self.index[id(t)] = self.var_of(new)
        t.__class__ = _Traced
        return True

    def _refuse_aliased_write(self, t):
        """An in-place write into traced t that eagerly shows through another Tensor sharing its
        memory (a view of it, or it a view: .view, .T, a slice, .detach(), unsqueeze): refused,
        since the program rebinds t's name to the result and the other keeps the old values."""
        var = self.var_of(t)
        if var is not None and (var in self.aliased or self._shared_holder(t, var)):
            raise RuntimeError(
                "tt.compile: an in-place write (add_, mul_, clamp_, t[i] = ..., +=) into a Tensor "
                "that shares its memory with another (a view: .view, .T, a slice, unsqueeze, "
                ".detach()) inside a compiled function; eagerly the write shows through the other "
                "Tensor, which the compiled program cannot repeat. Compute a new Tensor instead "
                "(h = h + 1, tt.where(mask, 0, h)), write into the Tensor itself before taking views, "
                "or call the function uncompiled")

    def _shared_holder(self, t, var):
        """Whether another Tensor f still holds has variable var's memory (t a .detach() of it,
        or it of t)."""
        data = _SLOT_DATA.__get__(t)
        for o in self.holders.get(var, ()):
            if o is not t and self.index.get(id(o)) == var \
                    and np.may_share_memory(_SLOT_DATA.__get__(o), data) and sys.getrefcount(o) > 4:
                return True       # (held by more than alive, holders, the loop, getrefcount: f's)
        return False

    def _store(self, t, value):
        """Write `value` into buffer t's array now and on every call of the program."""
        array = t.data
        if id(array) not in self.saved:      # put back after recording: the first run writes it
            self.saved[id(array)] = (array, array.copy())
            if self.undo:                    # after an effect (an optimizer step that changed
                copy = self.saved.pop(id(array))[1]   # it first): put back in turn, last first
                self.saved[id(array)] = (array, None)
                self.undo.append(lambda: _store(array, copy))
        before = STATE.memory_write
        _store(array, value.data if isinstance(value, Tensor) else _raw(value) if type(value) is _Tainted
               else value)
        tensor_module.mark_modified(t)
        STATE.memory_write = before          # a write the program repeats: not refused
        hint = self.hints[self.var_of(t)]
        var = self.record(_store, "store", (array, value), {}, array,
                          f"{hint} updated in place, on every call", "store", hint=hint)
        self.index[id(t)] = self.index[id(array)] = var
        self.buffers.add(var)
        return t

    def _reached(self, t):
        """t is a Tensor made before the recording that f reached (a parameter, a closed-over
        Tensor): a write into it is state the program writes on every call, as a buffer's."""
        return isinstance(t, Tensor) and (id(t) in self.live_ids or self.var_of(t) in self.live_vars)

    def _traced(self, x):
        return isinstance(x, (Tensor, np.ndarray)) and self.var_of(x) is not None

    def draw(self, fun, rng, args, kwargs):
        """draws.draw: fun(rng, *args) drawn now and noted as a line the program repeats on every
        call (kept even if its result is unused: the generator advances as eagerly)."""
        if self.numbers:          # a number argument as a seed or a shape of a draw: a key
            found = []
            rng, args, kwargs = _plain_numbers((rng, tuple(args), dict(kwargs)), found)
            for n in found:
                n._read("a seed or a shape of a random draw")
        generator = rng if isinstance(rng, np.random.Generator) else None
        if rng is None:
            generator = draws.generator(None)        # the global one (tt.manual_seed)
        if generator is not None:
            if rng is not None and generator not in self.generator_states and (
                    builtins.any(generator is g for g in self.made_generators) or not _held(generator)):
                raise RuntimeError(
                    f"tt.compile: a random draw ({getattr(fun, '__name__', 'draw').strip('_')}) from an "
                    f"np.random.Generator f did not hold before the call (made inside, e.g. "
                    f"np.random.default_rng(seed)): the program would keep drawing from the recording "
                    f"call's generator, where f makes a new one on every call. Pass the generator (or "
                    f"the seed: rng=seed) in as an argument, or make it outside f")
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
        self._append(_Entry(fun, name, (rng, *self.template(tuple(args))), self.template(dict(kwargs)),
                                   var, f"a random draw, anew on every call ({name})", "draw"))
        self.draw_vars.add(var)
        return value

    def compared(self, op, t, other, value):
        """t < other (and the other comparisons) made `value`, a mask: noted if t or other is
        recorded, so the program recomputes it on every call. Inside a nested transform it
        gives a traced Tensor, so NumPy calls on the mask are recorded too."""
        ufunc = _COMPARISONS[op]
        mask = np.asarray(value) if isinstance(value, np.generic) else value   # 0-d: noted as an array
        var = self.record(ufunc, ufunc.__name__, (t, other), {}, mask, ufunc.__name__, "numpy")
        if var is None:
            return value
        if STATE.depth > 0:
            return self.wrap(mask, var)
        if mask is not value:
            self.generic_vars.add(var)     # eagerly a NumPy bool (x[0] > 0)
        return self.tainted(mask, var)     # its NumPy operations are recorded, wherever it goes

    def copied(self, t, value):
        """t holds a copy (maybe cast) of recorded `value`: noted, so t is traced."""
        var = self.var_of(value)
        if type(value) is _Tainted and var is None:
            raise _untracked(value)
        if var is None and type(value) is np.ndarray and value.size and self.var_of(t) is None:
            var = -1        # a NumPy array f holds (a closed-over data set): copied on every call
        if var is not None and self.var_of(t) is None:
            # a copy, as eagerly: np.asarray shared an argument's memory, which the program's
            # reuse of arrays then wrote into (tt.tensor(x) + 1 changed the caller's x)
            new = self.record(np.array, "array", (value,), {"dtype": t.data.dtype}, t.data,
                              "a copy", "numpy", objects=(t,), constants_too=var == -1)
            if new is not None:
                t.__class__ = _Traced
                self.tensor_vars.add(new)      # a Tensor made inside f: eagerly a Tensor

    def held_array(self, t):
        """t = Tensor(a) of a NumPy array `a` that tinytensor's own code wraps to compute on it (a
        loss's plain target or prediction f holds): eagerly that array, so what is computed from
        it alone is an array too (the loss of two closed-over arrays is a NumPy scalar)."""
        var = self.var_of(t)
        if var is not None:
            self.tensor_vars.discard(var)
            self.array_arguments.add(var)

    def value_copy(self, t):
        """A copy of Tensor t's value (Module.state_dict() inside a recording): a line of the
        program, so each call copies the value t holds then, handed on as a _Tainted array (f's
        NumPy operations on it are recorded too)."""
        data = _SLOT_DATA.__get__(t)
        out = data.copy()
        var = self.var_of(t)
        if var is None:
            var = self.live(t)
        if var is None or type(data) is not np.ndarray:
            return out
        new = self.record(np.copy, "copy", (_Ref(var),), {}, out, "a copy (state_dict)", "numpy")
        return out if new is None else self.tainted(out, new)

    def watch_generators(self, *objects):
        """Remember the state of the generators f can reach (its closure, its arguments, the
        modules it calls; tinytensor's global one, which any code reaches through rng=None), to
        find draws made past tinytensor."""
        for g in [rng_module._GLOBAL, *draws.generators_in(*objects)]:
            if isinstance(g, np.random.RandomState):     # NumPy's legacy one: drawn from, refused
                self.legacy_states.setdefault(g, _legacy_state(g))
                self.initial_states.setdefault(g, g.get_state())
            else:
                self.generator_states.setdefault(g, g.bit_generator.state)
                self.initial_states.setdefault(g, g.bit_generator.state)   # (put back on a refusal)

    def check_generators(self, name):
        """After recording: every generator f reached must be where its noted draws left it;
        then each is put back where f found it, so the first run of the program draws what the
        eager call would have drawn."""
        for g, state in self.generator_states.items():
            if g.bit_generator.state != state:
                raise _undrawn(g, name)
        for g, state in self.legacy_states.items():
            if _legacy_state(g) != state:
                raise RuntimeError(
                    f"tt.compile: {name} drew from an np.random.RandomState ({g!r}) while being "
                    f"recorded; the compiled program would repeat those numbers on every call. Draw "
                    f"with tinytensor (tt.randn(..., rng=np.random.default_rng(seed))), or pass the "
                    f"numbers in as an argument, or call the function uncompiled")
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
            if value is None:                        # (put back with the effects, in order)
                continue
            array[...] = value

    def module_outputs(self):
        """At the end of the recording: what the modules f called keep for inspection (Dropout's
        `.mask`, their `_outputs`), when it is a recorded value, is set again by a line of the
        program on every call, as eagerly each call sets it."""
        for m in self.modules:
            for attr in type(m)._outputs:
                value = m.__dict__.get(attr)
                var = self.var_of(value) if isinstance(value, (np.ndarray, Tensor)) else None
                if var is not None:
                    out = self._new(None, f"{attr}_kept")
                    self._append(_Entry(_set_output, "set_output", (m, attr, _Ref(var)), {}, out,
                                               f"{type(m).__name__}.{attr} kept, on every call", "store"))

    def module(self, m):
        """Module.__call__: f reached `m`, whose mode is part of what the program depends on; its
        parameters and buffers are live inputs (read through their Tensors on every call), and
        its buffers (running statistics) state the program also writes on every call."""
        if m not in self.modules:
            self.modules[m] = m.training
            self.watch_generators(m)
            for name, b in m.named_buffers():
                if isinstance(b, Tensor):
                    var = self.live(b, f"{type(m).__name__.lower()}_{name.replace('.', '_')}")
                    if var is not None:
                        self.buffers.add(var)
            for name, p in m.named_parameters():
                self.live(p, name.replace(".", "_"))

    def numpy(self, target, name, args, kwargs, result, tensor=None, generic=False, always=False):
        """ops.on_values: `result` computed from values off the tape (a mask, sign, argmax):
        noted, so the program computes it again (`tensor`: the Tensor that holds it). Inside an
        entry (a primitive's forward, a rule: replayed whole) nothing is noted."""
        if self.depth_inside:
            return result
        held = builtins.any(type(a) is np.ndarray and a.size and self.var_of(a) is None
                            for a in (*args, *kwargs.values()))   # an array f holds: read anew
        var = self.record(target, name, args, kwargs, result, name, "numpy",
                          objects=() if tensor is None else (tensor,), constants_too=held)
        if var is not None and generic:      # eagerly a NumPy scalar (tt.exp of a number)
            self.generic_vars.add(var)
        if var is not None and tensor is not None:
            tensor.__class__ = _Traced
            self.numpy_tensors.add(var)      # a Tensor where an operand is one (tt.floor(t))
            if always:                       # a Tensor whatever its operands (F.one_hot)
                self.tensor_vars.add(var)
            elif STATE.depth == self.outer_depth or self._raw_inside((*args, *kwargs.values())):
                self._from_array_arguments(var)      # x // 2 of an array argument: eagerly NumPy's
                if var in self.array_arguments and tensor.data.ndim == 0 and self._numpy_gives_a_scalar(
                        target, args, kwargs):
                    self.generic_prims.add(var)      # x[0] // 1: eagerly a NumPy scalar
        if var is not None and tensor is None:
            return self.tainted(result, var)     # an argmax, a mask: its NumPy operations recorded
        return result

    def numpy_value(self, target, name, args, kwargs, result):
        """ops.on_values: a Python value (np.allclose's bool, np.shares_memory's) computed from
        traced values: noted, and a guard (the program recomputes it; a change records again)."""
        if self.depth_inside or target in _STATIC:
            return result
        var = self.record(target, name, args, kwargs, result, name, "numpy")
        return result if var is None else self.guard_var(var, result, name)

    def numpy_parts(self, target, name, args, kwargs, result):
        """ops.on_values: a tuple of arrays (np.divmod, np.frexp of a Tensor): noted, one line
        and its parts."""
        return result if self.depth_inside else _noted_parts(self, target, name, args, kwargs, result)

    def refuse_shape(self, name, args, kwargs):
        """ops.on_values: a function whose result's shape depends on traced values."""
        if _has_ref(self.template(tuple(args))) or _has_ref(self.template(dict(kwargs))):
            raise RuntimeError(
                f"tt.compile: {name} of a traced value has a shape that depends on the values, so "
                f"no straight-line program can replay it (jax.jit refuses it too). Use a mask of "
                f"fixed shape instead (tt.where(condition, x, 0), x * mask, sum over a mask), or "
                f"compute it outside the compiled function and pass it in")

    def _guard_static_params(self, prim, params):
        """A traced 0-d integer or bool (an argument `d`, a Tensor) given to a primitive as a
        parameter other than its index (an axis, keepdims, a size) sets the shapes its rules
        are written with, as a number there does (_plain): a guard on its value. Index arrays
        (getitem, embedding) and 0-d floats (a pad value, a slope) set no shape: data."""
        for name, value in params.items():
            if name == "index" or not isinstance(value, (np.ndarray, Tensor)):
                continue
            data = _SLOT_DATA.__get__(value) if isinstance(value, Tensor) else value
            if type(data) in (np.ndarray, _Tainted) and data.ndim == 0 and data.dtype.kind in "iub":
                var = self.var_of(value)
                if var is not None:
                    self.guard(_snapshot, _Ref(var), _snapshot(data), f"{prim.name}'s {name}=")

    def inside(self, fun, args, params, operands=-1):
        """fun(*args, **params) as one entry of the program (a primitive's forward, a rule): it
        runs again, whole, on every call, so the values it reads are no guards and its NumPy
        work on recorded arrays is not noted line by line. `operands`: how many of `args` are
        the primitive's operands (-1: look the forward up in the op table)."""
        if self.numbers:
            args, params = self._plain(fun, args, params, operands)
        self.depth_inside += 1
        try:
            return fun(*args, **params)
        except Exception as err:     # (a FloatingPointError under np.errstate(...="raise"), a
            if self.depth_inside == 1:     # LinAlgError): if f catches it, its branch depends on
                self.raised.append((getattr(fun, "__name__", "a primitive"), err))   # the values
            raise
        finally:
            self.depth_inside -= 1

    def _plain(self, fun, args, params, operands):
        """The arguments of an entry with the _Numbers in them replaced by their values. A number
        that is an operand of a primitive (`w * lr`, `where(c, x, t)`; of its rules, the inputs
        after the cotangent and the result) is an input of the program: the entry runs on the
        call's number, and such an operand is a 0-d value, which sets no shape. One anywhere
        else (an axis, a shape, an index, a stride, p=) may set a shape: a key."""
        if operands == -1:
            if self.operand_counts is None:
                self.operand_counts = {id(p.fun): p.nargs for p in tape.REGISTRY.values()}
            operands = self.operand_counts.get(id(fun), 0)
        if operands is None:                  # a variadic primitive (concatenate, stack)
            operands = len(args)
        if self.depth_inside:       # inside another entry (a solver calling f's closure): that
            operands = 0            # entry runs whole on every call, with the number it holds
        found = []
        args = tuple(args)
        args = _plain_numbers(args[:operands], []) + _plain_numbers(args[operands:], found)
        params = _plain_numbers(params, found)
        for n in found:
            n._read("a parameter of an operation (an axis, a shape, an index, p=, a stride)")
        return args, params

    def rule(self, fun, args, params, node, kind, i=-1, parts=False):
        """A sweep applies a rule of `node`'s primitive (for input `i`; -1: a joint rule,
        `parts`: one returning a tuple, one gradient per input)."""
        nargs = node._prim.nargs
        value = self.inside(fun, args, params, len(args) if nargs is None else 2 + nargs)
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
                    self._append(_Entry(operator.getitem, "getitem", (_Ref(var), k), {}, v,
                                               f"{label} to {self._label(node._inputs[k], k)}", "part"))
        return value

    def plain_rule(self, fun, args, params, value, node, i):
        """A create_graph sweep (a gradient to be differentiated again: tt.hvp, jvp of grad)
        runs the rules on Tensors, whose operations are recorded; a rule (or its unbroadcast, a
        sum of two contributions) that gave a plain array instead, NumPy on a plain cotangent and
        a node's raw operand (tt.where's condition, a mask), is noted whole here, so that the
        program computes it on every call. Returns value."""
        if self.depth_inside or isinstance(value, Tensor):
            return value
        parts = isinstance(value, (tuple, list))
        if parts and not builtins.any(type(p) is np.ndarray for p in value) \
                or not parts and not isinstance(value, np.ndarray):
            return value
        prim = node._prim.name if node._prim is not None else "leaf"
        name = getattr(fun, "__name__", "rule")
        label = f"{prim} VJP: adjoint of {self._label(node)}" if i is not None else \
            f"{name} of the gradient of {self._label(node)}"
        var = self.record(fun, f"{prim}_vjp" if i is not None else name, args, params, value, label,
                          "rule", f"g_{self._hint(node)}")
        if parts and var is not None:
            for k, part in enumerate(value):
                if type(part) is np.ndarray:
                    v = self._new(part, f"g_{self._hint(node._inputs[k])}", part)
                    self._append(_Entry(operator.getitem, "getitem", (_Ref(var), k), {}, v,
                                               f"{label} to {self._label(node._inputs[k], k)}", "part"))
        return value

    def apply(self, fun, args, kwargs, node, kind):
        """A sweep's own step on a gradient or tangent (unbroadcast, a copy, a cast)."""
        value = self.inside(fun, args, kwargs, 0)
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
            self._append(_Entry(None, "seed", (value,), {}, var,
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


def _as_array(t):
    """Whether f has traced Tensor t eagerly as a NumPy array (an array argument, or computed
    from such alone)."""
    rec = STATE.recorder
    return rec is not None and rec.passed_as_array(t)


def _numpy_on_arrays(args, kwargs):
    """Whether a NumPy call's Tensor operands (one level of lists inside) are all traced arrays
    f was passed (or computed from such alone), not a transform's leaves nor under vmap:
    eagerly NumPy's own."""
    rec = STATE.recorder
    if rec is None or rec.depth_inside or STATE.depth != rec.outer_depth and STATE.batch:
        return False                       # (inside a transform: f's arrays are NumPy's there too)
    frame = sys._getframe(2)
    while frame.f_code.co_filename == _TENSOR_FILE or frame.f_code in _SKIPPED_CODES:
        frame = frame.f_back               # (`a &= b`: Tensor's in-place operator, recorded)
    if not _is_user(frame.f_code):
        return False                       # (tinytensor's own code computes on Tensors)
    found = False
    for a in itertools.chain(args, kwargs.values()):
        for x in (a if type(a) in (list, tuple) else (a,)):
            if isinstance(x, Tensor):
                if not (isinstance(x, _Traced) and rec.passed_as_array(x)) or id(x) in rec.leaf_ids:
                    return False
                found = True
    return found


def _datas(x):
    """x with the traced arrays (Tensors inside the recording) and numbers (number arguments)
    as their plain values: what NumPy computes on (the caller records the call itself)."""
    if isinstance(x, Tensor):
        return np.ndarray.view(x.data, np.ndarray)
    if type(x) in _WRAPPED:
        return x.value
    if type(x) is _Tainted:
        return _raw(x)
    if type(x) in (list, tuple):
        return type(x)(_datas(v) for v in x)
    if type(x) is dict:
        return {k: _datas(v) for k, v in x.items()}
    return x


def _array_method(name):
    """_Traced's reduction `name` (var, std, mean): on an array f was passed, NumPy's method,
    a line of the program (NumPy's formula and accumulation, float16 in float32); else Tensor's."""
    def method(self, *args, **kwargs):
        if _numpy_on_arrays((self, *args), kwargs):
            if kwargs.get("out") is not None:    # x.mean(axis=0, out=m): NumPy's write
                return _numpy_out(getattr(np.ndarray, name), name, (self, *args), kwargs)
            value = np.ndarray.view(self.data, np.ndarray)
            if STATE.recorder.eagerly_numpy_scalar(self):    # x[0].astype(np.float32): the NumPy
                value = value[()]                            # scalar's own method (a scalar)
            plain = getattr(value, name)(*_datas(args), **_datas(kwargs))
            return _noted_numpy(_calls(name), name, (self, *args), kwargs, plain)
        return getattr(Tensor, name)(self, *args, **kwargs)     # (looked up now: torch's spellings)
    method.__name__ = name
    return method


def _set_output(module, attr, value):
    """A module's attribute kept for inspection (Dropout's mask), set as its call sets it."""
    module.__dict__[attr] = value


def _numpy_scalar_rule(name, op, reflected):
    """_Traced's arithmetic operator: with a NumPy scalar on an array the caller passed (or one
    computed from such alone), NumPy's rule for arrays (the scalar's dtype counts, NEP 50), as f
    computes eagerly; else Tensor's (a NumPy scalar is weak, as a Python number)."""
    repeats = name in ("__mul__", "__rmul__")

    def operator(self, other):
        rec = STATE.recorder
        if rec is not None:
            if repeats and type(other) in _SEQUENCES and rec.eagerly_numpy_scalar(self):
                return _repeated(self, other)     # [1] * (x[0] + 1), "ab" * x.argmax(): Python's
            if type(other) in tensor_module._NUMPY_SCALARS or type(other) is _NumberNP:
                if rec.passed_as_array(self):   # (a NumPy-scalar number argument: still the input)
                    return op(other, self) if reflected else op(self, other)
            else:
                weak = _weakened(rec, self, other)
                if weak is other and isinstance(other, Tensor):   # x.sum() * w: self is the one
                    self = _weakened(rec, other, self)           # eagerly a NumPy scalar (weak)
                other = weak
        return getattr(Tensor, name)(self, other)
    operator.__name__ = name
    return operator


_SEQUENCES = (list, tuple, str, bytes, bytearray)
_PYTHON_VALUES = frozenset((str, bytes, bool, int, float, complex))


def _repeated(t, seq):
    """seq * t where t is eagerly a NumPy integer scalar: the sequence repeated, as eagerly (the
    count a guard); by any other NumPy scalar, Python's TypeError."""
    dtype = t.dtype
    if dtype.kind not in "iu":
        raise TypeError(f"can't multiply sequence by non-int of type 'numpy.{dtype.name}'")
    return seq * operator.index(t)


def _weakened(rec, t, other):
    """`other` as Tensor t takes it eagerly: x.mean() of an array argument is eagerly a NumPy
    scalar, which a Tensor takes as a Python number (weak: a float32 Tensor stays float32), so it
    is cast as it would be; any other operand as it is."""
    if isinstance(other, (Tensor, _Tainted)) and not rec.passed_as_array(t) \
            and rec.eagerly_numpy_scalar(other):
        return ops.astype(other, np.result_type(t.dtype, _weak_kind(other.dtype)))
    return other


def _weak_eager_scalars(inputs):
    """A binary ufunc's (a, b) with an operand that is eagerly a NumPy scalar cast as the other
    (a Tensor) takes it eagerly (_weakened)."""
    rec = STATE.recorder
    if rec is None:
        return inputs
    a, b = inputs
    if isinstance(a, Tensor):
        b = _weakened(rec, a, b)
    if isinstance(b, Tensor) and b is inputs[1]:
        a = _weakened(rec, b, a)
    return a, b


def _weak_kind(dtype):
    """A Python number of dtype's kind (NumPy's weak scalar in result_type)."""
    return {"b": False, "i": 0, "u": 0, "f": 0.0, "c": 0j}.get(np.dtype(dtype).kind, 0.0)


def _strong_scalars(inputs):
    """NumPy's binary ufunc on an array f was passed (traced) and a NumPy scalar
    (np.float64(2) * x): the scalar's dtype counts, as for the array eagerly."""
    rec = STATE.recorder
    if rec is None or len(inputs) != 2:
        return False
    a, b = inputs
    for t, other in ((a, b), (b, a)):
        if isinstance(t, _Traced) and (type(other) in tensor_module._NUMPY_SCALARS
                                       or type(other) is _NumberNP) and rec.passed_as_array(t):
            return True
    return False


class _Traced(Tensor):
    """A Tensor whose value tt.compile is recording: its reads into Python are noted (its
    comparisons, as every Tensor's, are recorded: Tensor.__lt__ calls `compared`). Only the
    Tensors of one recording are of this class (the recorder sets it), so nothing process-wide
    changes; outside a recording (a Tensor kept after the call) it behaves as a Tensor."""
    __slots__ = ()
    __hash__ = Tensor.__hash__

    def __array_function__(self, func, types, args, kwargs):
        # NumPy's function of arrays f was passed (np.median(x), np.linalg.norm(x)): NumPy's
        # own, on the arrays, a line of the program: eager's bits and result type by construction
        if _numpy_on_arrays(args, kwargs):
            if func in _SHAPE_FROM_VALUES or func is np.where and len(args) == 1:
                raise _value_shape(func.__name__)
            if kwargs.get("out") is not None:      # np.clip(t, -1, 1, out=t): NumPy's write
                return _numpy_out(func, func.__name__, args, kwargs)
            if func is np.nan_to_num and kwargs.get("copy", True) is False and args:
                rest = {k: v for k, v in kwargs.items() if k != "copy"}   # np.nan_to_num(t, copy=False):
                return _numpy_out(_nan_to_num_into, "nan_to_num", args, {**rest, "out": args[0]})  # in place
            result = func(*_datas(args), **_datas(kwargs))
            if result is None:       # np.put, np.fill_diagonal, np.copyto: a write it cannot see
                raise _written()
            if isinstance(result, (np.ndarray, np.generic)) or isinstance(result, tuple) and result \
                    and builtins.all(isinstance(r, (np.ndarray, np.generic)) for r in result) \
                    or type(result) in _PYTHON_VALUES:     # np.array2string(x): a guard on the text
                return _noted_numpy(func, func.__name__, args, kwargs, result)
        return Tensor.__array_function__(self, func, types, args, kwargs)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method == "at" and STATE.recorder is not None and not STATE.recorder.depth_inside:
            raise _written()       # np.add.at(counts, y, 1): a write the program cannot see
        out = kwargs.get("out")
        if out is not None and STATE.recorder is not None and not STATE.recorder.depth_inside \
                and builtins.any(isinstance(o, np.ndarray) for o in (out if type(out) is tuple else (out,))) \
                and not _internal():
            outs = out if type(out) is tuple else (out,)
            if method == "__call__" and builtins.all(type(o) is _Tainted for o in outs) \
                    and _numpy_on_arrays(inputs, {}):   # t = np.sign(x); t *= x: NumPy's write
                rec = STATE.recorder                   # into an array f made, as eagerly
                written = _written_into(ufunc, method, [
                    rec.tainted(np.ndarray.view(_SLOT_DATA.__get__(a), np.ndarray), rec.var_of(a))
                    if isinstance(a, Tensor) else a for a in inputs], kwargs)
                if written is not None:
                    return written
            raise _written_into_array(ufunc)
        if out is not None and method == "__call__" and STATE.recorder is not None \
                and not STATE.recorder.depth_inside and not _internal() \
                and _numpy_on_arrays((*inputs, *(out if type(out) is tuple else (out,))), {}):
            return _numpy_out(ufunc, ufunc.__name__, inputs, kwargs)   # np.add(t, 1, out=t)
        if ufunc in tensor_module._ARITHMETIC and len(inputs) == 2 and method == "__call__":
            inputs = _weak_eager_scalars(inputs)
        if ufunc in tensor_module._ARITHMETIC and _strong_scalars(inputs):
            return ops.numpy_dispatch(ufunc, inputs, kwargs, method,
                                      use_table=method == "__call__" and not kwargs)
        return Tensor.__array_ufunc__(self, ufunc, method, *inputs, **kwargs)

    # an array argument's NumPy attributes (static: its shape and dtype are the program's key)
    size = property(lambda self: int(self.data.size) if _as_array(self) else Tensor.size.__get__(self))
    itemsize = property(lambda self: self.data.itemsize)
    nbytes = property(lambda self: self.data.nbytes)
    strides = property(lambda self: _strides_read(self))
    flags = property(lambda self: _layout_read(self, "flags"))
    base = property(lambda self: _layout_read(self, "base"))

    def __copy__(self):
        return _array_copy(self) if _as_array(self) else copy._reconstruct(self, None, *self.__reduce_ex__(4))

    def __deepcopy__(self, memo):
        return _array_copy(self) if _as_array(self) else Tensor.__deepcopy__(self, memo)

    def __getitem__(self, index):
        rec = STATE.recorder
        if rec is not None and not rec.depth_inside and _is_user(sys._getframe(1).f_code) and builtins.any(
                getattr(i, "dtype", None) == np.bool_ and getattr(i, "ndim", 0) and rec._traced(i)
                for i in _leaves(index)):
            raise _value_shape("boolean indexing")    # x[x > 0]: its shape is the values'
        return Tensor.__getitem__(self, index)

    def __setitem__(self, index, value):
        Tensor.__setitem__(self, index, value)
        rec = STATE.recorder
        if rec is not None and rec.var_of(self.data) is not None:   # t became a recorded entry
            rec.index[id(self)] = rec.var_of(self.data)


for _name, _op in (("add", ops.add), ("sub", ops.sub), ("mul", ops.mul), ("truediv", ops.div),
                   ("pow", ops.power)):
    setattr(_Traced, f"__{_name}__", _numpy_scalar_rule(f"__{_name}__", _op, reflected=False))
    setattr(_Traced, f"__r{_name}__", _numpy_scalar_rule(f"__r{_name}__", _op, reflected=True))

for _name in ("var", "std", "mean", "view", "tobytes", "astype"):
    setattr(_Traced, _name, _array_method(_name))


def _flatten(self, *args, **kwargs):
    """x.flatten() of an array f was passed: a copy, as NumPy's always is (the Tensor's is a
    view, which shared the caller's memory: writing the result wrote x)."""
    out = Tensor.flatten(self, *args, **kwargs)
    rec = STATE.recorder
    if rec is not None and rec.passed_as_array(self) and isinstance(out, Tensor):
        out = Tensor.copy(out)
    return out


_Traced.flatten = _flatten


def _numpy_cast_first(t, other, ufunc, always=False):
    """NumPy's casting error of `t op= other` on an array f has eagerly (int64 **= 0.5), raised
    before anything is computed, as NumPy does; nothing where the result's dtype casts."""
    value = (_SLOT_DATA.__get__(other) if isinstance(other, Tensor) else
             other.value if type(other) in _WRAPPED else _plain(other))
    if not always:
        kind = type(value) if type(value) in (int, float, complex) else np.asarray(value).dtype
        try:
            result = ufunc.resolve_dtypes((t.dtype, kind, None))[-1]
        except Exception:     # noqa: BLE001  (no loop for these dtypes: the operation's own error)
            return
        if result == t.dtype or np.can_cast(result, t.dtype, "same_kind"):
            return
    data = np.array(_SLOT_DATA.__get__(t))
    ufunc(data, np.asarray(value), out=data)


def _where_method(name):
    """_Traced's method `name` given NumPy's where=, order= or out= (which Tensors do not take): on
    an array f was passed, NumPy's method, a line of the program (out=: its write); else Tensor's."""
    def method(self, *args, **kwargs):
        if ("where" in kwargs or "order" in kwargs or kwargs.get("out") is not None) \
                and _numpy_on_arrays((self, *args), kwargs):
            if kwargs.get("out") is not None:    # t.clip(-1, 1, out=t): NumPy's write
                return _numpy_out(getattr(np.ndarray, name), name, (self, *args), kwargs)
            plain = getattr(np.ndarray.view(self.data, np.ndarray), name)(*_datas(args), **_datas(kwargs))
            return _noted_numpy(_calls(name), name, (self, *args), kwargs, plain)
        return getattr(Tensor, name)(self, *args, **kwargs)
    method.__name__ = name
    return method


for _name in ("sum", "prod", "max", "min", "any", "all", "clip", "cumsum", "cumprod", "round", "reshape"):
    setattr(_Traced, _name, _where_method(_name))


def _array_operator(name, ufunc, reflected=False):
    """_Traced's operator `name` (~, &, |, ^, <<, >>): on arrays f was passed, NumPy's ufunc,
    a line of the program giving an array, as eagerly; else Tensor's."""
    def apply(self, *other):
        operands = (*other, self) if reflected else (self, *other)
        if _numpy_on_arrays(operands, {}):
            return _noted_numpy(ufunc, ufunc.__name__, operands, {}, ufunc(*_datas(operands)))
        base = getattr(Tensor, name, None)       # (looked up now: ops_torch defines them)
        return NotImplemented if base is None else base(self, *other)
    apply.__name__ = name
    return apply


for _name, _ufunc in (("invert", np.invert), ("and", np.bitwise_and), ("or", np.bitwise_or),
                      ("xor", np.bitwise_xor), ("lshift", np.left_shift), ("rshift", np.right_shift)):
    setattr(_Traced, f"__{_name}__", _array_operator(f"__{_name}__", _ufunc))
    if _name != "invert":
        setattr(_Traced, f"__r{_name}__", _array_operator(f"__r{_name}__", _ufunc, reflected=True))


_SKIPPED_CODES = set()    # recording an in-place operator (see _numpy_on_arrays): _Tracer.in_place's too


def _shift_in_place(name, ufunc, symbol):
    """_Traced's `a <<= b` (Tensor has no shifts; on arrays f was passed, NumPy's, in place)."""
    def apply(self, other):
        return tensor_module._in_place(self, other, shift, ufunc, symbol)

    def shift(a, b):
        out = getattr(type(a), name)(a, b)
        if out is NotImplemented:
            raise TypeError(f"unsupported operand type(s) for {symbol}: {type(a).__name__} and "
                            f"{type(b).__name__}")
        return out
    apply.__name__ = name.replace("__", "__i", 1)
    _SKIPPED_CODES.update((shift.__code__, apply.__code__))
    return apply


_Traced.__ilshift__ = _shift_in_place("__lshift__", np.left_shift, "<<=")
_Traced.__irshift__ = _shift_in_place("__rshift__", np.right_shift, ">>=")


def _round(self, ndigits=None):
    """round(x) of a traced value: a Python read, guarded (a NumPy scalar's round on an array
    f was passed)."""
    value = self.data[()] if self.data.ndim == 0 else self.data
    result = round(value) if ndigits is None else round(value, ndigits)
    rec = STATE.recorder
    if rec is not None and not rec.depth_inside:
        rec.guard(functools.partial(_rounded, ndigits), self, result, "round()")
    return result


def _rounded(ndigits, a):
    a = a[()] if a.ndim == 0 else a
    return round(a) if ndigits is None else round(a, ndigits)


_Traced.__round__ = _round


def _array_absent(name):
    """Tensor attribute `name`, which a NumPy array does not have: on an array f was passed
    (x.contiguous(), x.numpy(), x.requires_grad), an AttributeError, as eagerly."""
    base = _Traced.__dict__.get(name) or inspect.getattr_static(Tensor, name)

    def absent(self):
        rec = STATE.recorder
        if rec is not None and not rec.depth_inside and rec.passed_as_array(self) \
                and _is_user(sys._getframe(2).f_code):
            raise AttributeError(f"'numpy.ndarray' object has no attribute '{name}'")

    if isinstance(base, property):
        def get(self):
            absent(self)
            return base.fget(self)
        return property(get, base.fset)
    if isinstance(base, types.FunctionType):
        def bound(self):           # the attribute itself is absent (hasattr(x, "to") is False)
            absent(self)
            return types.MethodType(base, self)
        return property(bound)
    return None


_new_tensor = Tensor.__new__
_COMPARISONS = {operator.lt: np.less, operator.le: np.less_equal, operator.gt: np.greater,
                operator.ge: np.greater_equal, operator.eq: np.equal, operator.ne: np.not_equal}


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # tinytensor/
_NOT_USER = tuple({_PACKAGE, os.path.dirname(os.path.abspath(np.__file__)), "<tt.compile", "<frozen",
                   *(os.path.abspath(sysconfig.get_paths()[k]) for k in ("stdlib", "platstdlib", "purelib",
                                                                       "platlib"))})


def _is_user(code):
    """Code of the user's (not tinytensor's, NumPy's, the standard library's or an installed
    package's): what the recording guards and whose reads of traced values it notes."""
    return not code.co_filename.startswith(_NOT_USER)


def _user_frame():
    """The innermost frame of user code (outside tinytensor and NumPy), or None."""
    frame = sys._getframe(2)
    while frame is not None and not _is_user(frame.f_code):
        frame = frame.f_back
    return frame


def _short(value):
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _conversion(name):
    """The Python value a Tensor method gives (bool, float, .item(), .tolist()) as a function of
    the array, for the program's guard line."""
    return {"__bool__": bool, "__float__": float, "__int__": int, "__index__": operator.index,
            "__complex__": complex, "__trunc__": math.trunc, "__floor__": math.floor, "__ceil__": math.ceil,
            "item": _item, "tolist": _tolist}[name]


def _item(a):
    return a.item()


def _of_scalar(conversion, a):
    return conversion(np.asarray(a)[()])      # (a 0-d value as the NumPy scalar it is eagerly)


def _item_at(index, a):
    return a.item(*index)          # t.item(3), t.item(0, 1): NumPy's element by index


def _itself(a):
    return a


def _tolist(a):
    return a.tolist()


_READS = {"__bool__": "bool()", "__float__": "float()", "__int__": "int()", "__index__": "an index",
          "__complex__": "complex()", "__trunc__": "math.trunc()", "__floor__": "math.floor()",
          "__ceil__": "math.ceil()", "item": ".item()", "tolist": ".tolist()"}


def _guarded_read(name, how):
    """A method that turns a traced value into Python (bool(t), float(t), t.item(), ...): the
    value is a guard of the program, which re-records when it differs on a later call."""
    base = getattr(Tensor, name, None)
    conversion = _conversion(name)

    def read(self, *args, **kwargs):
        rec = STATE.recorder
        if rec is not None and not args and not kwargs and name.startswith("__") \
                and rec.eagerly_numpy_scalar(self):      # float(x[0]) of an array argument: the
            value = conversion(np.asarray(self.data)[()])    # NumPy scalar's (a complex one's real
            rec.guard(functools.partial(_of_scalar, conversion), self, value, how)   # part, warned)
            return value
        value = base(self, *args, **kwargs) if base is not None else conversion(self.data)
        if rec is not None and not kwargs:
            rec.guard(functools.partial(_item_at, args) if args else conversion, self, value, how)
        return value
    read.__name__ = name
    return read


def _held(obj):
    """Whether something that outlives the call holds obj (a closure cell, an object, a module,
    a container one of those holds): a generator f reached rather than made (spawned, built
    from a jumped bit generator) as a temporary of the call. Asked once per generator."""
    import gc
    mine = [obj]
    first = gc.get_referrers(obj)
    mine.append(first)
    for r in first:
        if r is mine or isinstance(r, types.FrameType):
            continue
        if isinstance(r, (dict, list, tuple, set)):
            second = gc.get_referrers(r)
            if builtins.any(rr is not first and rr is not second and not isinstance(rr, types.FrameType)
                            for rr in second):
                return True
            continue
        if isinstance(r, types.CellType):      # a closure's: held if the function is not one of
            for closure in gc.get_referrers(r):    # tinytensor's (made for this draw)
                if isinstance(closure, tuple) and builtins.any(
                        isinstance(fn, types.FunctionType) and _is_user(fn.__code__)
                        for fn in gc.get_referrers(closure)):
                    return True
            continue
        return True                            # an object, a bound method
    return False


_SLOT_DATA = Tensor.__dict__["data"]


def _data_get(self):
    """t.data: user code inside a recording gets the value as a _Tainted array (its NumPy
    operations recorded); tinytensor's own code the plain array."""
    data = _SLOT_DATA.__get__(self)
    rec = STATE.recorder
    if rec is not None and type(data) is np.ndarray and _is_user(sys._getframe(1).f_code):
        var = rec.var_of(self)
        if var is not None and var in rec.array_arguments and not rec.depth_inside \
                and STATE.depth == rec.outer_depth:
            raise RuntimeError(
                "tt.compile: .data of a value f has as a NumPy array eagerly (an array argument, or "
                "computed from such alone) is NumPy's raw buffer there (a memoryview), which C code "
                "reads where the recording cannot see it; inside f it is a Tensor. Use the array "
                "itself (x, x.tolist(), x.tobytes()), pass a Tensor, or call the function uncompiled")
        if var is not None:
            view = rec.tainted(data, var)
            if rec._reached(self):           # `p.data -= lr * g`: a write into p (_written_into)
                rec.data_owner[id(view)] = self
            return view
    return data


def _data_set(self, value):
    rec = STATE.recorder
    if rec is not None and _is_user(sys._getframe(1).f_code) and rec.var_of(self) is not None:
        if rec.data_owner.get(id(value)) is self:
            return                           # `p.data -= v` assigns back the array it wrote into
        raise RuntimeError(
            "tt.compile: t.data = ... on a Tensor the compiled function reads (a parameter, a "
            "buffer, an argument) rebinds it as a side effect the program would not repeat; do "
            "the update outside the compiled function (params are read anew on every call), or "
            "return the new value")
    if type(value) is _Tainted:
        value = _raw(value)
    _SLOT_DATA.__set__(self, value)


def _numpy(self):
    data = Tensor.numpy(self)
    rec = STATE.recorder
    if rec is not None and _is_user(sys._getframe(1).f_code):
        var = rec.var_of(self)
        if var is not None:
            return rec.tainted(data, var)
    return data


def _array(self, dtype=None, copy=None):
    rec = STATE.recorder
    if rec is not None and _for_user(sys._getframe(1)) and rec.var_of(self) is not None:
        # np.asarray(t) gives NumPy a plain array whose operations nobody can note: the whole
        # value becomes a guard (the program re-records when it changes)
        value = Tensor.__array__(self, dtype, copy)
        rec.guard(_snapshot, self, _snapshot(self.data), "np.asarray()")
        if np.may_share_memory(value, self.data):
            # the traced value's own memory: a write through it (a += 1) would be neither
            # recorded nor replayed, so it is read-only here, and its ValueError a refusal
            view = value.view()
            view.flags.writeable = False
            var = rec.var_of(value)
            if var is not None:              # the same variable (returned: the input itself)
                rec.index[id(view)] = var
                rec.alive.append(view)
            value = view
            rec.read_only = True
        return value
    return Tensor.__array__(self, dtype, copy)


_NUMPY_DIR = os.path.dirname(os.path.abspath(np.__file__))


def _for_user(frame):
    """Whether frame is user code, or a library's Python code user code called (NumPy's
    np.fill_diagonal converting its val, SciPy's stats.norm.mean converting loc): not
    tinytensor's own."""
    while frame is not None and not _is_user(frame.f_code) \
            and not frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back
    return frame is not None and _is_user(frame.f_code)


def _strides(a):
    return getattr(a, "strides", ())


def _strides_read(t):
    """t.strides: not part of the key (a transposed argument has the shape of another), so a
    guard: the program recomputes it and re-records where it differs (a branch on the layout)."""
    value = t.data.strides
    rec = STATE.recorder
    if rec is not None and not rec.depth_inside and rec.var_of(t) is not None:
        rec.guard(_strides, t, value, "x.strides")
    return value


def _flag_key(a):
    f = getattr(a, "flags", None)
    return None if f is None else (f.c_contiguous, f.f_contiguous, f.writeable, f.owndata)


def _base_none(a):
    return getattr(a, "base", None) is None


def _layout_read(t, what):
    """x.flags, x.base of an array f was passed (an AttributeError on a Tensor, as eagerly): the
    caller's array's, a guard on its layout (contiguity, writeable, whether it is a view)."""
    if not _as_array(t):
        raise AttributeError(f"'Tensor' object has no attribute '{what}'")
    data = t.data
    rec = STATE.recorder
    if rec is not None and not rec.depth_inside and rec.var_of(t) is not None:
        if what == "flags":
            rec.guard(_flag_key, t, _flag_key(data), "x.flags")
        else:
            rec.guard(_base_none, t, _base_none(data), "x.base is None")
    return getattr(data, what)


def _array_copy(t):
    """copy.copy / copy.deepcopy of an array f was passed: NumPy's copy, a line of the program."""
    return _noted_numpy(np.copy, "copy", (t,), {}, np.array(t.data, copy=True))


def _snapshot(a):
    return _Value(np.array(a))


class _Value:
    """An array compared by its bits (a zero's sign, a NaN's sign and payload: what np.signbit,
    str() or struct can read), for a guard on a whole array (np.asarray(t))."""
    __slots__ = ("a",)

    def __init__(self, a):
        self.a = a

    def __eq__(self, other):
        return (type(other) is _Value and self.a.shape == other.a.shape and self.a.dtype == other.a.dtype
                and (self.a.dtype.kind == "O" and np.array_equal(self.a, other.a)
                     or self.a.dtype.kind != "O" and self.a.tobytes() == other.a.tobytes()))

    def __repr__(self):
        return f"array {self.a.dtype}{self.a.shape}"


def _text_read(name):
    """repr(t), str(t), format(t, spec) by user code: a guard on the text."""
    base = getattr(Tensor, name)

    def read(self, *args):
        rec = STATE.recorder
        if rec is not None and _is_user(sys._getframe(1).f_code):
            if rec.eagerly_numpy_value(self):     # str(x[0]) of an array argument: NumPy's text
                value = _numpy_text(_SLOT_DATA.__get__(self), name, args, rec.eagerly_numpy_scalar(self))
                rec.guard(functools.partial(_numpy_text, name=name, args=args,
                                            scalar=rec.eagerly_numpy_scalar(self)), self, value, f"{name}()")
                return value
            value = base(self, *args)
            rec.guard(functools.partial(_tensor_text, name=name, args=args), self, value, f"{name}()")
            return value
        return base(self, *args)
    read.__name__ = name
    return read


def _numpy_text(a, name, args, scalar):
    a = np.asarray(a)
    return getattr(a[()] if scalar else a, name)(*args)


def _traced_hash(self):
    """hash(x[0]) of an array argument by user code (a dict key, a set): the NumPy scalar's, a
    guard on its value; a Tensor's identity otherwise."""
    rec = STATE.recorder
    if rec is not None and np.ndim(_SLOT_DATA.__get__(self)) == 0 \
            and (rec.eagerly_numpy_scalar(self) or rec.eagerly_numpy_value(self)):
        value = hash(np.asarray(_SLOT_DATA.__get__(self))[()])    # (from any caller: one hash)
        if _is_user(sys._getframe(1).f_code):
            rec.guard(_scalar_hash, self, value, "hash()")
        return value
    return Tensor.__hash__(self)


def _scalar_hash(a):
    return hash(np.asarray(a)[()])


def _tensor_text(a, name, args):
    # (a 0-d value may reach the program as a NumPy scalar; a Tensor holds it as a 0-d array)
    return getattr(Tensor, name)(_make(a if type(a) is np.ndarray else np.asarray(a)), *args)


def _detach(self):
    """t.detach() of a traced value: the same variable (its reads are guards too)."""
    t = Tensor.detach(self)
    rec = STATE.recorder
    if rec is not None:
        var = rec.var_of(self)
        if var is not None:
            t.__class__ = _Traced
            rec.index[id(t)] = var
            rec.alive.append(t)
            rec.holders.setdefault(var, [self]).append(t)     # one memory, two Tensors
    return t


_SLOT_GRAD = Tensor.__dict__["grad"]


def _refuse_state(what):
    raise RuntimeError(
        f"tt.compile: {what} inside a compiled function reads or changes a Tensor's state that "
        f"the compiled program would not read or change again on later calls; do it outside the "
        f"compiled function (pass the value in as an argument, return what you need), or call it "
        f"uncompiled")


def _grad_get(self):
    rec = STATE.recorder
    if rec is not None and _is_user(sys._getframe(1).f_code):
        if not rec.depth_inside and rec._reached(self):   # a parameter's: read on every call
            return rec.read_grad(self)
        _refuse_state("t.grad")
    return _SLOT_GRAD.__get__(self)


def _grad_set(self, value):
    rec = STATE.recorder
    if rec is not None and _is_user(sys._getframe(1).f_code):
        if rec.grad_owner.get(id(value)) is self:
            return                  # `p.grad /= s` assigns back the array it wrote into
        if not rec.depth_inside and rec._reached(self) and (value is None or isinstance(value, np.ndarray)):
            return rec.set_grad(self, value)      # `master.grad = p.grad / scale`: every call
        _refuse_state("t.grad = ...")
    _SLOT_GRAD.__set__(self, value)


def _refused(name, how, made_before_only=False):
    """A Tensor method refused while recording (on a Tensor made before it, with `made_before_only`:
    a hook on an intermediate inside f runs in the recorded sweep, so its work is recorded)."""
    base = getattr(Tensor, name)

    def call(self, *args, **kwargs):
        rec = STATE.recorder
        if rec is not None and not (made_before_only and self._id >= rec.start):
            _refuse_state(how)
        return base(self, *args, **kwargs)
    call.__name__ = name
    return call


_SLOT_REQUIRES = Tensor.__dict__["requires_grad"]


def _requires_get(self):
    """t.requires_grad read by user code: the flag joins the program's checks (a branch on it)."""
    rec = STATE.recorder
    if rec is not None and _is_user(sys._getframe(1).f_code):
        var = rec.var_of(self)
        if var is not None:
            rec.flags_read.add(var)
    return _SLOT_REQUIRES.__get__(self)


def _requires_set(self, value):
    _SLOT_REQUIRES.__set__(self, value)


_OVERRIDES = {name: _guarded_read(name, how) for name, how in _READS.items()}
_OVERRIDES["requires_grad"] = property(_requires_get, _requires_set)
_OVERRIDES["detach"] = _detach
_OVERRIDES["grad"] = property(_grad_get, _grad_set)
_OVERRIDES["retain_grad"] = _refused("retain_grad", "t.retain_grad()")
_OVERRIDES["register_hook"] = _refused("register_hook", "t.register_hook(...) on a Tensor made outside",
                                      made_before_only=True)
_OVERRIDES.update({name: _text_read(name) for name in ("__repr__", "__str__", "__format__")})
_OVERRIDES["__hash__"] = _traced_hash
_OVERRIDES.update(data=property(_data_get, _data_set), numpy=_numpy, __array__=_array)
_OVERRIDES.update({f"__{r}{n}__": _Traced.__dict__[f"__{r}{n}__"]       # NumPy scalars' rules
                   for n in ("add", "sub", "mul", "truediv", "pow") for r in ("", "r")})
_OVERRIDES["__array_ufunc__"] = _Traced.__dict__["__array_ufunc__"]
_OVERRIDES["__getitem__"] = _Traced.__dict__["__getitem__"]

for _name, _fun in _OVERRIDES.items():
    setattr(_Traced, _name, _fun)


def install_array_absent():
    """Give _Traced the AttributeError of each Tensor attribute a NumPy array lacks (run once
    tinytensor has defined them all: ops_torch adds PyTorch's spellings)."""
    for name in sorted(set(dir(Tensor)) - set(dir(np.ndarray))):
        if not name.startswith("_") and name not in _OVERRIDES:   # (those read their caller's frame)
            absent = _array_absent(name)
            if absent is not None:
                setattr(_Traced, name, absent)


_LIVE_CLASSES = {}


def _live_class(cls):
    """cls (Tensor, nn.Parameter, ...) with _Traced's noted reads: the class a Tensor made before
    the recording has while the recording reaches it (put back at its end)."""
    live = _LIVE_CLASSES.get(cls)
    if live is None:
        live = type(cls.__name__, (cls,), {"__slots__": (), "__hash__": cls.__hash__,
                                           "__module__": cls.__module__, **_OVERRIDES})
        _LIVE_CLASSES[cls] = live
    return live


def _live_hint(t):
    name = getattr(t, "name", None)
    return name if isinstance(name, str) and name.isidentifier() else "p"


# ----- NumPy arrays holding traced values -----------------------------------------------------
def _raising_noted(fun, args, kwargs):
    """fun(*args, **kwargs) on a traced array's values; an error it raises is noted on the
    recorder (f may catch it: its branch then depends on the values, see _Tracer.inside)."""
    try:
        return fun(*args, **kwargs)
    except Exception as err:
        rec = STATE.recorder
        if rec is not None and not rec.depth_inside:
            rec.raised.append((getattr(fun, "__name__", "a NumPy function"), err))
        raise


class _Tainted(np.ndarray):
    """A traced value as the NumPy array user code gets (a comparison's mask, t.data, t.numpy(),
    an argmax): each NumPy operation on it is recorded (ufuncs, NumPy functions, its methods) and
    gives another _Tainted; each read into Python (bool, int, float, .item(), .tolist()) is a
    guard of the program. One derived in a way nobody noted (a view NumPy made internally) is
    refused where it is used."""

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        by_operator, _TAINTED_OPERATOR[0] = _TAINTED_OPERATOR[0], None    # (see _tainted_operator)
        if ufunc is np.multiply and len(inputs) == 2 and type(inputs[1]) in _SEQUENCES \
                and type(kwargs.get("out")) is tuple and kwargs["out"][0] is inputs[0] \
                and _tainted_scalar(inputs[0]):
            return _repeated(inputs[0], inputs[1])    # k *= [1] of a NumPy integer scalar: a list
        if builtins.any(isinstance(x, Tensor) for x in inputs) or "out" not in kwargs and method != "at" \
                and builtins.any(type(x) in _WRAPPED for x in inputs):
            return NotImplemented          # Tensor's own dispatch records it (a number argument's too)
        if _plain_here():
            return getattr(ufunc, method)(*_plain(inputs), **_plain(kwargs))
        if "out" in kwargs or method == "at":   # an in-place write (a += traced, np.add.at): into a
            if _internal():                # traced value or an array f reaches; tinytensor's own (a rule
                return getattr(ufunc, method)(*_plain(inputs), **_plain(kwargs))  # the entry records)
            if method == "at":             # np.add.at(p.grad, idx, v): on a copy, written back
                written = _in_place_on_copy(ufunc.at, inputs[0], inputs[1:], kwargs)
                if written is not None:
                    return None
                raise _written()
            written = _written_into(ufunc, method, inputs, kwargs)
            if written is not None:
                return written
            raise _written()
        if ufunc in _SCALAR_OPERATORS and method == "__call__" and not kwargs \
                and _scalar_operands(inputs, ufunc is np.power) \
                and (by_operator is ufunc or _operator_at(sys._getframe(1), ufunc)):
            op = _SCALAR_OPERATORS[ufunc]
            result = _raising_noted(op, _plain(inputs), {})[()]
            return _noted_numpy(op, ufunc.__name__, inputs, {}, result)
        fun = getattr(ufunc, method)
        result = _raising_noted(fun, _plain(inputs), _plain(kwargs))
        return _noted_numpy(fun, f"{ufunc.__name__}" + ("" if method == "__call__" else f".{method}"),
                            inputs, kwargs, result)

    def __array_function__(self, func, types, args, kwargs):
        if builtins.any(issubclass(t, Tensor) for t in types):
            return NotImplemented
        if _plain_here() or func in _STATIC:          # np.shape, np.ndim: no value read
            return func(*_plain(args), **_plain(kwargs))
        if func in _SHAPE_FROM_VALUES or func is np.where and len(args) == 1:
            raise _value_shape(func.__name__)
        if not _internal():
            if kwargs.get("out") is not None:      # np.clip(p.grad, -c, c, out=p.grad): computed,
                out = kwargs["out"]                # then written as an in-place write is
                out = out[0] if type(out) is tuple and len(out) == 1 else out
                value = func(*args, **{k: v for k, v in kwargs.items() if k != "out"})
                if type(out) is _Tainted and _rewrite(STATE.recorder, out, value) is not None:
                    return out
                raise _written()
            if func in _IN_PLACE_FUNCTIONS and args and type(args[0]) is _Tainted:
                # np.copyto(p.data, v), np.put(p.grad, i, v), np.fill_diagonal(p.grad, 0)
                if _in_place_on_copy(func, args[0], args[1:], kwargs) is None:
                    raise _written()
                return None
        if func in _NUMBER_OPERANDS:       # np.clip(x, -c, c) with c a number argument: an input
            args_, kwargs_ = _plain_numbers(args, []), _plain_numbers(kwargs, [])
        else:
            args_, kwargs_ = args, kwargs
        result = _raising_noted(func, _plain(args_), _plain(kwargs_))
        return _noted_numpy(func, func.__name__, args, kwargs, result)

    def __getitem__(self, index):
        if _plain_here():
            return np.ndarray.__getitem__(_raw(self), _plain(index))
        if _has_tainted(index) and not _internal():
            if builtins.any(getattr(i, "dtype", None) == np.bool_ for i in _leaves(index)):
                raise _value_shape("boolean indexing")
        result = np.ndarray.__getitem__(_raw(self), _plain(index))
        noted = _noted_numpy(operator.getitem, "getitem", (self, index), {}, result)
        _view_of(STATE.recorder, self, noted, ("getitem", index, {}))   # p.grad[0]
        return noted

    def __setitem__(self, index, value):
        rec = STATE.recorder
        if _internal() or _plain_here():
            return np.ndarray.__setitem__(_raw(self), _plain(index), _plain(value))
        if (index is Ellipsis or type(index) is slice and index == slice(None)) \
                and _write_whole(rec, self, value) is not None:
            _rederive(rec, self)
            return               # p.data[...] = v, p.grad[:] = v: a Tensor's own memory, rewritten
        # p.grad[0] = 0, p.data[mask] = v, a view of one, or an array f made (c = d.copy(),
        # np.roll's result) or a view of one (c[0] += 1, c.T[0] = 1): the owner's new value
        # is a line of the program, written as eagerly, and each view f holds read again
        if not _write_at(rec, self, index, value):
            raise _written()     # (x.data[0] = 0: memory a Tensor or another traced value holds)

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return (_element(self, i) for i in range(self.shape[0]))

    def __format__(self, spec):
        if _tainted_scalar(self):
            return _scalar_text(self, "__format__", (spec,), _internal())
        return _guarded_text(self, format(_raw(self), spec), "format()", _internal(), spec)

    def __repr__(self):
        if _tainted_scalar(self):
            return _scalar_text(self, "__repr__", (), _internal())
        return _guarded_text(self, repr(_raw(self)), "repr()", _internal())

    def __str__(self):
        if _tainted_scalar(self):
            return _scalar_text(self, "__str__", (), _internal())
        return _guarded_text(self, str(_raw(self)), "str()", _internal())

    def __hash__(self):
        """hash(np.sign(x[0])): eagerly a NumPy scalar's hash, a guard; an array's is unhashable."""
        if not _tainted_scalar(self):
            raise TypeError("unhashable type: 'numpy.ndarray'")
        value = _scalar_hash(_raw(self))
        rec = STATE.recorder
        if rec is not None and not _internal():
            rec.guard(_scalar_hash, self, value, "hash()")
        return value

    def __array_finalize__(self, obj):
        if type(obj) is _Tainted and _is_user(sys._getframe(1).f_code) and not _plain_here():
            _cast_in_c(self, obj)      # np.float32(d.sum()), np.int64(d.argmax()), np.float32(d)

    def __copy__(self):      # copy.copy(t.data), copy.deepcopy: a recorded .copy()
        return self.copy()

    def __deepcopy__(self, memo):
        return self.copy()

    def __bytes__(self):     # bytes(mask): its bytes, a guard (as str() is)
        return _guarded_text(self, _raw(self).tobytes(), "bytes()", _internal())

    # the raw buffer, which C code reads where the recording cannot see it: refused in user code
    data = property(lambda self: _buffer_read(self, "data"))
    ctypes = property(lambda self: _buffer_read(self, "ctypes"))
    __array_interface__ = property(lambda self: _buffer_read(self, "__array_interface__"))

    def __dlpack__(self, *args, **kwargs):
        return _buffer_read(self, "__dlpack__")(*args, **kwargs)


def _cast_in_c(new, source):
    """NumPy's C code made `new`, a cast of traced `source`, straight from user code, with no
    method or protocol of ours on the way: a NumPy scalar type called on it (np.float32(s),
    np.int64(d.argmax()), np.bool_(m), np.float32(d)). The cast is a line of the program; a 0-d
    one, which NumPy turns into a NumPy scalar the recording cannot follow, is also a guard on
    its value (as float(s) is). Any other array NumPy makes from a traced one in C stays
    unnoted, refused where it is used."""
    rec = STATE.recorder
    var = rec.var_of(source)
    if var is None or new.shape != source.shape:
        return
    dtype = new.dtype
    plain = np.ndarray.view(new, np.ndarray)     # filled by NumPy once this returns
    v = rec.record(_cast_to(dtype), "astype", (source,), {}, plain, "a NumPy scalar type's cast", "numpy")
    rec.index[id(new)] = v
    rec.tainted_vars.add(v)
    rec.alive.append(new)
    if new.ndim == 0:
        rec.guard(dtype.type, source, dtype.type(_raw(source)),
                  f"np.{dtype.type.__name__}() of a traced value")


@functools.cache
def _cast_to(dtype):
    def cast(a):
        return a.astype(dtype)
    cast.__name__ = f"astype_{dtype.name}"
    return cast


def _written_into(ufunc, method, inputs, kwargs):
    """`p.data -= lr * g` (an in-place operator on the .data of a Tensor f reaches, a
    parameter): the new value computed as a line of the program and written into p on every
    call, as a buffer's update (Tracer._store); None for any other write."""
    rec = STATE.recorder
    out = kwargs.get("out")
    out = out[0] if type(out) is tuple and len(out) == 1 else out
    if type(out) is not _Tainted or method != "__call__" or ufunc.nout != 1:
        return None                    # (out need not be an operand: np.add(a, b, out=p.data.T))
    rest = {k: v for k, v in kwargs.items() if k != "out"}
    where = rest.pop("where", True)
    value = ufunc(*inputs, **rest)     # recorded (a new array; a number argument's operation too)
    if type(value) is not _Tainted:
        return None
    if where is not True:              # np.negative(g, out=g, where=g > 0): elsewhere out's own
        value = np.where(where, value, out)
    if out.ndim == 0 and rec.var_of(out) in rec.generic_vars:
        return value                   # eagerly a NumPy scalar (p.grad[1] of a vector): `s *= lr`
    return _rewrite(rec, out, value)   # makes a new one


# ----- writes into p.data, p.grad (a Tensor's own memory), views of them, and arrays f made ------
_VIEWS = frozenset({"reshape", "ravel", "transpose", "swapaxes", "squeeze"})
_IN_PLACE_FUNCTIONS = frozenset({np.copyto, np.put, np.fill_diagonal, np.putmask, np.place})
_NUMBER_OPERANDS = frozenset({np.clip, np.where, np.nan_to_num})   # numbers there set no shape


def _view_of(rec, source, result, how):
    """Note `result`, a view f took of p.data or p.grad (or of a view of one): `how` ("getitem",
    index, {}) or (method, args, kwargs). A write into it is a write into that Tensor's memory."""
    if type(result) is not _Tainted or rec is None:
        return
    if id(source) in rec.data_owner or id(source) in rec.grad_owner or _made_owner(rec, source):
        owner, chain = source, (how,)
    elif id(source) in rec.views:
        owner, chain = rec.views[id(source)]
        chain += (how,)
    else:
        return
    if np.may_share_memory(_raw(result), _raw(source)):
        rec.views[id(result)] = (owner, chain)
        rec.view_objects.setdefault(id(owner), []).append(result)


def _made_owner(rec, a):
    """Whether traced array a is one f made with NumPy (d.copy(), d * 2, np.roll's result) and
    is the whole of its memory (not a view of another array)."""
    var = rec.var_of(a)
    if var is None or not _made_by_numpy(rec, var):
        return False
    r = _raw(a)
    own = r if r.base is None else r.base
    return type(own) is np.ndarray and own.flags.owndata and own.shape == r.shape \
        and own.strides == r.strides and own.ctypes.data == r.ctypes.data


def _rederive(rec, owner):
    """After a write into owner (p.grad, p.data or an array f made), each view of it f still
    holds (row = c[0] taken before c[0] = 0) read again from owner's new value: eagerly it
    sees the write."""
    views = rec.view_objects.get(id(owner), ())
    for view in views:
        if sys.getrefcount(view) <= 4:       # (held by alive, views and this loop only: f's gone)
            continue
        chain = rec.views[id(view)][1]
        seen = _noted_numpy(_through, "view", (owner, chain), {}, _through(_raw(owner), _plain(chain)))
        old = rec.var_of(view)
        new = rec.var_of(seen)
        if new is not None and old != new:
            rec.superseded.add(old)
            rec.index[id(view)] = new


def _through(a, chain):
    """The view `chain` names of array a (p.grad[0].T: getitem, then transpose)."""
    for name, args, kwargs in chain:
        a = a[args] if name == "getitem" else getattr(a, name)(*args, **kwargs)
    return a


def _set_view(a, chain, index, value):
    """a with its view `chain` set at `index` to value, as a new array: the program's form of a
    write into p.grad, p.data or a view of one."""
    b = a.copy()
    _through(b, chain)[index] = value
    return b


def _write_at(rec, out, index, value):
    """`out[index] = value` where out is p.data or p.grad handed to f, or a view f took of one
    (`p.grad[0][1] = v`, `p.grad.T[0] = 0`): the Tensor's new value is a line of the program,
    written there now and on every call (_write_whole). False for any other array."""
    if id(out) in rec.data_owner or id(out) in rec.grad_owner:
        owner, chain = out, ()
    elif id(out) in rec.views:
        owner, chain = rec.views[id(out)]
    elif _made_owner(rec, out):
        owner, chain = out, ()
    else:
        return False
    made = id(owner) not in rec.data_owner and id(owner) not in rec.grad_owner
    if made and _shared(rec, owner, rec.var_of(owner), _group_vars(rec, owner)):
        return False                   # (its memory is another value's too: np.transpose(c))
    if not chain and index is Ellipsis and type(value) is _Tainted and value.shape == owner.shape:
        whole = value                  # `p.grad /= s`, `c -= 1`: no copy to set
    else:
        new = _set_view(_raw(owner), _plain(chain), _plain(index),
                        _raw(value) if type(value) is _Tainted else _plain(value))
        whole = _noted_numpy(_set_view, "setitem", (owner, chain, index, value), {}, new)
    if type(whole) is not _Tainted:
        return False
    if made:
        _write_made(rec, owner, whole)
    elif _write_whole(rec, owner, whole) is None:
        return False
    _rederive(rec, owner)              # every view f holds (out among them): read again
    return True


def _write_made(rec, owner, value):
    """Array f made, written over by traced `value` in place: its memory now (as eagerly) and
    its variable from here on."""
    np.copyto(_raw(owner), _raw(value), casting="same_kind")
    if value.dtype != owner.dtype:
        value = value.astype(owner.dtype)
    rec.superseded.add(rec.var_of(owner))
    rec.index[id(owner)] = rec.var_of(value)


def _group_vars(rec, owner):
    """The variables of owner and of the views f took of it."""
    return {rec.var_of(owner)} | {rec.var_of(v) for v in rec.view_objects.get(id(owner), ())}


def _rewrite(rec, out, value):
    """Replace traced array out's whole value by `value` (recorded) in place: p.data or p.grad
    (or a view of one) as _write_at writes them; an array f made and holds alone, now and as
    its variable from here on. `out` itself, or None where it is any other array (refused)."""
    if type(value) is not _Tainted or np.shape(value) != out.shape \
            or not np.can_cast(value.dtype, out.dtype, "same_kind"):
        return None
    return out if _write_at(rec, out, Ellipsis, value) else None


def _in_place_on_copy(fun, target, args, kwargs):
    """fun(target, *args, **kwargs), an in-place NumPy operation on traced array `target`
    (p.grad.fill(0), np.put(p.grad, i, v), np.add.at(...), np.copyto(p.data, v)): run on a copy
    as a line of the program, the copy written back (_rewrite). None where target cannot be
    written so."""
    rec = STATE.recorder
    if rec is None or type(target) is not _Tainted:
        return None
    value = _on_copy(fun, _raw(target), _plain(args), _plain(kwargs))
    whole = _noted_numpy(_on_copy, getattr(fun, "__name__", "write"), (fun, target, args, kwargs), {}, value)
    return _rewrite(rec, target, whole)


def _on_copy(fun, a, args, kwargs):
    """fun(copy of a, *args, **kwargs), which writes into its first argument, giving the copy."""
    b = a.copy()
    fun(b, *args, **kwargs)
    return b


def _write_whole(rec, out, value):
    """`out[...] = value` where out is what `p.data` (a Tensor f reaches) or `p.grad` (filled
    by a backward() inside) handed f: written there now and by the program on every call."""
    data_of, grad_of = rec.data_owner.get(id(out)), rec.grad_owner.get(id(out))
    if data_of is None and grad_of is None or np.shape(value) != out.shape \
            or np.result_type(value) != out.dtype and not np.can_cast(np.result_type(value), out.dtype,
                                                                      "same_kind"):
        return None
    if data_of is not None:
        rec._store(data_of, value)
        rec.index[id(out)] = rec.var_of(data_of)     # (what it holds now)
    else:
        np.copyto(_SLOT_GRAD.__get__(grad_of), _raw(value) if type(value) is _Tainted else value,
                  casting="same_kind")
        rec._effect_entry(_WriteGrad(grad_of), "grad_write", (rec.template(value),), None,
                          "p.grad updated in place, on every call")
        var = rec.var_of(value)
        if var is not None:
            rec.index[id(out)] = var
    return out


def _buffer_read(x, name):
    """x.data, x.ctypes, x.__array_interface__, x.__dlpack__ of a traced array: NumPy's own for
    tinytensor's and NumPy's code; in user code (while recording) refused: what reads that
    buffer is C code the recording cannot see, so the program would keep this call's values."""
    rec = STATE.recorder
    if rec is not None and not rec.depth_inside and _is_user(sys._getframe(2).f_code):
        raise RuntimeError(
            f"tt.compile: .{name} of a NumPy array computed from traced data (t.data, a mask) hands "
            f"its raw buffer to C code (memoryview, ctypes, DLPack) that the recording cannot see, so "
            f"the program would keep this call's values. Use its values through NumPy (x.tobytes(), "
            f"x.tolist(), indexing: recorded), or call the function uncompiled")
    return getattr(np.ndarray.view(x, np.ndarray), name)


def _internal():
    """Whether the caller of the caller (a _Tainted method's caller) is tinytensor's own code,
    which gets plain NumPy behaviour: its work is recorded as the entry it belongs to."""
    return not _is_user(sys._getframe(2).f_code)


def _plain_here():
    """Inside an entry (a primitive's forward, a rule), which is replayed whole: plain NumPy.
    (A traced array used by another thread while one records, `pool.submit(np.sum, x.data)`,
    whose work nobody notes: that recording is refused.)"""
    rec = STATE.recorder
    if rec is None:
        here = threading.get_ident()
        for other in list(_RECORDING):
            if other.laundered is None and other.thread != here:
                other.laundered = ("handed a NumPy array computed from traced data (t.data, a mask) "
                                   "to another thread, whose NumPy work on it the recording cannot "
                                   "see; compute it in the compiled function's thread, or call the "
                                   "function uncompiled")
        return True
    return rec.depth_inside > 0


_RECORDING = set()      # the tracers recording now, in any thread


def _element(a, i):
    """a[i] for user code iterating over a: recorded."""
    result = np.ndarray.__getitem__(_raw(a), i)
    return _noted_numpy(operator.getitem, "getitem", (a, i), {}, result)


def _tainted_scalar(a):
    """Whether _Tainted a is eagerly a NumPy scalar (np.sign(x[0]), x.argmax(), (x > 0).sum())."""
    rec = STATE.recorder
    return a.ndim == 0 and rec is not None and rec.var_of(a) in rec.generic_vars


def _scalar_text(a, name, args, internal):
    """str/repr/format of a _Tainted that is eagerly a NumPy scalar: the scalar's text, a guard."""
    value = _numpy_text(_raw(a), name, args, True)
    if not internal:
        STATE.recorder.guard(functools.partial(_numpy_text, name=name, args=args, scalar=True), a, value,
                             f"{name}()")
    return value


def _guarded_text(x, text, how, internal, spec=None):
    """repr/str/format of a traced value: a guard on the text (a key, a branch on it)."""
    rec = STATE.recorder
    if rec is None or internal:
        return text
    fun = _TEXT[how] if spec is None else functools.partial(_formatted, spec=spec)
    return rec.guard(fun, x, text, how)


def _formatted(a, spec):
    return format(a, spec)


_TEXT = {"repr()": repr, "str()": str, "bytes()": lambda a: np.ndarray.view(a, np.ndarray).tobytes()}


def _leaves(x):
    return x if isinstance(x, tuple) else (x,)


def _has_tainted(x):
    return builtins.any(type(i) is _Tainted for i in _leaves(x))


def _plain(x):
    t = type(x)
    if t is _Tainted:
        return _raw(x)
    if t is tuple or t is list:
        return t(_plain(v) for v in x)
    if t is dict:
        return {k: _plain(v) for k, v in x.items()}
    return x


def _tainted_operator(name, ufunc):
    """A traced array's operator (`+`, `**`, `abs()`, reached by operator.add, sum(), pow() too):
    NumPy's own, telling __array_ufunc__ that it runs (on NumPy scalars: their arithmetic)."""
    own = getattr(np.ndarray, name)
    repeats = name in ("__mul__", "__rmul__")

    def method(self, *other):
        if repeats and type(other[0]) in _SEQUENCES and _tainted_scalar(self):
            return _repeated(self, other[0])      # (1, 2) * x.argmax(): Python's repetition
        _TAINTED_OPERATOR[0] = ufunc
        try:
            return own(self, *other)
        finally:
            _TAINTED_OPERATOR[0] = None
    method.__name__ = method.__qualname__ = name
    return method


for _name, _ufunc in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
                      ("truediv", np.true_divide), ("pow", np.power)):
    setattr(_Tainted, f"__{_name}__", _tainted_operator(f"__{_name}__", _ufunc))
    setattr(_Tainted, f"__r{_name}__", _tainted_operator(f"__r{_name}__", _ufunc))
_Tainted.__abs__ = _tainted_operator("__abs__", np.absolute)



def _noted_numpy(fun, name, args, kwargs, result):
    """result = fun(*args, **kwargs) on _Tainted values: recorded, handed on as _Tainted."""
    rec = STATE.recorder
    if rec is None or rec.depth_inside:
        return result
    generic = isinstance(result, np.generic)
    if generic:
        result = np.asarray(result)
    if type(result) is not np.ndarray:
        if isinstance(result, (tuple, list)) and fun not in _SHAPE_FROM_VALUES and result and builtins.all(
                isinstance(r, (np.ndarray, np.generic)) for r in result):
            parts = _noted_parts(rec, fun, name, args, kwargs, result)    # (np.split's list too)
            return list(parts) if type(result) is list else parts
        if result is None or isinstance(result, tuple):
            raise _value_shape(name) if isinstance(result, tuple) else _written()
        var = rec.record(fun, name, args, kwargs, result, name, "numpy")   # a Python value (a
        return result if var is None else rec.guard_var(var, result, name)  # bool of allclose)
    var = rec.record(fun, name, args, kwargs, result, name, "numpy")
    if var is not None and generic:       # eagerly a NumPy scalar (a reduction, a 0-d ufunc)
        rec.generic_vars.add(var)
    return result if var is None else rec.tainted(result, var)


def _noted_parts(rec, fun, name, args, kwargs, result):
    """A NumPy function giving a tuple of arrays (np.histogram, np.linalg.slogdet, np.divmod):
    one line of the program, its parts taken out by index; the parts' shapes are a guard (bins
    chosen from the values re-record), and a named tuple comes back as its own type."""
    var = rec.record(fun, name, args, kwargs, result, name, "numpy")
    if var is None:
        return result
    rec.guard(_shapes, _Ref(var), _shapes(result), f"the shapes {name} gives")
    parts = []
    for i, part in enumerate(result):
        generic = isinstance(part, np.generic)
        value = np.asarray(part)
        v = rec.record(operator.getitem, "getitem", (_Ref(var), i), {}, value, name, "numpy")
        if generic:
            rec.generic_vars.add(v)
        parts.append(rec.tainted(value, v))
    return type(result)(*parts) if hasattr(result, "_fields") else tuple(parts)


def _round(self, ndigits=None):
    """round(x.data.sum(), 2) of a traced value (eagerly a NumPy scalar): np.round, recorded; an
    int for round(x) (a read into Python, a guard)."""
    if ndigits is None:
        return round(float(self))
    return np.round(self, ndigits)


def _scalar_attribute(self, name):
    """A NumPy scalar's own attribute on a traced 0-d value (x.data.sum().is_integer()): read
    from its value (a guard), as eagerly from the scalar."""
    if name.startswith("__") or self.ndim != 0 or not hasattr(self.dtype.type, name):
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
    return getattr(self.dtype.type(self.item()), name)


def _shapes(parts):
    return tuple(np.shape(p) for p in parts)


def _tainted_method(name):
    method = getattr(np.ndarray, name)

    def call(self, *args, **kwargs):
        if kwargs.get("out") is not None and not _plain_here() and not _internal():
            out = kwargs["out"]        # p.grad.clip(-c, c, out=p.grad): computed, then written
            out = out[0] if type(out) is tuple and len(out) == 1 else out
            value = call(self, *args, **{k: v for k, v in kwargs.items() if k != "out"})
            if type(out) is _Tainted and _rewrite(STATE.recorder, out, value) is not None:
                return out
            raise _written()
        if _tainted_scalar(self) and not _plain_here():    # eagerly a NumPy scalar: its own
            result = getattr(_raw(self)[()], name)(*_plain(args), **_plain(kwargs))   # (.astype: one)
        else:
            result = method(_raw(self), *_plain(args), **_plain(kwargs))
        if _plain_here():
            return result
        noted = _noted_numpy(_calls(name), name, (self, *args), kwargs, result)
        if name in _VIEWS:
            _view_of(STATE.recorder, self, noted, (name, args, kwargs))   # p.grad.T, .reshape(-1)
        return noted
    call.__name__ = name
    return call


class _Flat:
    """`t.data.flat` of a traced array: its elements read as the raveled array's (recorded);
    a write through it is refused, as other writes into traced values."""
    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __getitem__(self, index):
        element = self.array.ravel()[index]      # an element; any other index gives a copy
        return element if isinstance(index, (int, np.integer)) else element.copy()

    def __setitem__(self, index, value):
        if _internal():
            np.ndarray.__getattribute__(_raw(self.array), "flat")[_plain(index)] = _plain(value)
            return
        line = self.array.reshape(-1)      # p.grad.flat[3] = 0: through its raveled view
        if not np.may_share_memory(_raw(line), _raw(self.array)) \
                or not _write_at(STATE.recorder, line, index, value):
            raise _written()

    def __iter__(self):
        return iter(self.array.ravel())

    def __len__(self):
        return self.array.size

    def __array__(self, dtype=None, copy=None):
        return self.array.ravel() if dtype is None else self.array.ravel().astype(dtype)

    def copy(self):
        return self.array.ravel().copy()


def _refused_method(name):
    """nonzero (a shape from the values) and the in-place sort, fill, put: refused for user
    code, plain NumPy for tinytensor's own."""
    method = getattr(np.ndarray, name)

    def call(self, *args, **kwargs):
        if not _internal():
            if name in ("fill", "sort", "put", "partition") and not _plain_here() \
                    and _in_place_on_copy(method, self, args, kwargs) is not None:
                return None            # p.grad.fill(0), p.grad.sort(axis=1): on a copy, written back
            raise _value_shape(name) if name in ("nonzero", "compress") else _written()
        return method(_raw(self), *_plain(args), **_plain(kwargs))
    call.__name__ = name
    return call


_METHOD_CALLS = {}


def _calls(name):
    """array.name(*args, **kwargs) as a function of the array, for the program."""
    fun = _METHOD_CALLS.get(name)
    if fun is None:
        def fun(a, *args, **kwargs):
            return getattr(a, name)(*args, **kwargs)
        fun.__name__ = name
        _METHOD_CALLS[name] = fun
    return fun


def _scalar_read(conversion, how):
    def read(self):
        value = conversion(_raw(self))
        rec = STATE.recorder
        return value if rec is None or rec.depth_inside else rec.guard(conversion, self, value, how)
    read.__name__ = how
    return read


_READ_METHODS = {"item": _item, "tolist": _tolist}
for _name in ("astype", "copy", "reshape", "ravel", "flatten", "transpose", "squeeze", "swapaxes",
              "argmax", "argmin", "argsort", "cumsum", "cumprod", "dot", "round", "clip", "repeat",
              "take", "diagonal", "trace", "view", "item", "tolist", "tobytes", "all", "any", "sum", "mean",
              "max", "min", "prod", "std", "var", "conj", "nonzero", "sort", "fill", "put",
              "searchsorted", "argpartition", "choose", "byteswap", "getfield", "conjugate",
              "partition", "resize", "setfield", "compress"):
    if _name in ("nonzero", "sort", "fill", "put", "partition", "resize", "setfield", "compress"):
        setattr(_Tainted, _name, _refused_method(_name))
    else:
        setattr(_Tainted, _name, _tainted_method(_name))
_Tainted.flat = property(lambda self: _Flat(self))
_Tainted.__round__ = _round
_Tainted.__getattr__ = _scalar_attribute
_Tainted.real = property(lambda self: np.real(self))
_Tainted.imag = property(lambda self: np.imag(self))
_Tainted.__array__ = lambda self, dtype=None, copy=None: self if dtype is None else self.astype(dtype)
_Tainted.__contains__ = lambda self, value: bool((self == value).any())   # (a guard, as bool())
_Tainted.T = property(lambda self: self.transpose())
_Tainted.mT = property(lambda self: self.swapaxes(-1, -2))
for _name, _conv in (("__bool__", bool), ("__float__", float), ("__int__", int),
                     ("__index__", operator.index), ("__complex__", complex)):
    setattr(_Tainted, _name, _scalar_read(_conv, f"{_conv.__name__}()"))
_Tainted.__len__ = lambda self: self.shape[0] if self.ndim else np.ndarray.__len__(self)

_STATIC = {np.shape, np.ndim, np.size, np.result_type, np.iscomplexobj, np.isrealobj}
_SHAPE_FROM_VALUES = {np.nonzero, np.argwhere, np.flatnonzero, np.unique, np.extract, np.compress,
                      np.trim_zeros}


def _untracked(x):
    return RuntimeError(
        "tt.compile: a NumPy array computed from traced values in a way the recording could not "
        "follow (a view NumPy made internally, np.asarray of a mask, ...) reached a tinytensor "
        "operation; its value would be frozen. Compute it with tinytensor operations (tt.where, "
        "t.astype, masks as Tensors), or call the function uncompiled")


def _written_into_array(ufunc):
    return RuntimeError(
        f"tt.compile: np.{ufunc.__name__} wrote a value computed from traced data into a NumPy "
        f"array in place (y += x, np.{ufunc.__name__}(y, x, out=y) on an array f made or holds); the "
        f"program would give that array this call's values on every call. Compute a new array "
        f"instead (y = y + x), or call the function uncompiled")


def _written():
    return RuntimeError(
        "tt.compile: writing in place into a value computed from traced data, or with traced "
        "indices or values (mask[i] = ..., out=, .fill(), .sort(), np.add.at) is not recorded; "
        "compute a new array instead (np.where, tt.where, np.bincount)")


def _value_shape(name):
    return RuntimeError(
        f"tt.compile: {name} of a traced value has a shape that depends on the values, so no "
        f"straight-line program can replay it (jax.jit refuses it too). Use a mask of fixed shape "
        f"instead (tt.where(condition, x, 0), x * mask, sum over a mask), or compute it outside the "
        f"compiled function and pass it in")


def _numpy_out(fun, name, args, kwargs):
    """fun(*args, out=t) where every Tensor is an array f has eagerly (np.clip(t, -1, 1, out=t),
    np.add(t, 1, out=t), np.sqrt(t, out=t, where=t > 0) with t = x * 3): NumPy's write into t,
    as eagerly: a line of the program computes t's new value (a copy of t written by `fun` with
    out=, so where=, casting and NumPy's errors are NumPy's own) and t holds it from now on.
    Refused into an argument (the caller's array) or an array another value shares memory with."""
    rec = STATE.recorder
    out = kwargs["out"]
    target = out[0] if type(out) is tuple and len(out) == 1 else out
    rest = {k: v for k, v in kwargs.items() if k != "out"}
    if not isinstance(target, _Traced) or not rec.passed_as_array(target) or _is_argument(rec, target) \
            or rec.var_of(target) in rec.aliased:
        raise _written()
    written = functools.partial(_written_copy, fun)
    value = written(_SLOT_DATA.__get__(target), *_datas(args), **_datas(rest))
    noted = _noted_numpy(written, name, (target, *args), rest, value)
    raw = np.ndarray.view(_raw(noted) if type(noted) is _Tainted else np.asarray(noted), np.ndarray)
    _SLOT_DATA.__set__(target, raw)           # t holds the line's value from now on
    var = rec.var_of(noted)
    rec.index[id(target)] = rec.index[id(raw)] = var
    rec.alive.append(raw)
    rec.array_arguments.add(var)              # (computed from f's arrays alone, as t was)
    return target


def _nan_to_num_into(x, *args, out, **kwargs):
    """np.nan_to_num(x, copy=False) as a write into `out` (x itself eagerly)."""
    out[...] = np.nan_to_num(x, *args, **kwargs)


def _written_copy(fun, target, *args, **kwargs):
    """A copy of `target` after fun(*args, out=it, **kwargs): NumPy's write, on a copy."""
    copy_ = np.array(target)
    args = [copy_ if a is target else a for a in args]      # (t among the operands: the copy's
    fun(*args, out=copy_, **kwargs)                        # old value, as NumPy reads it)
    return copy_


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


def _store(target, value):
    """target[...] = value (NumPy's same_kind casting, as an in-place operator): a buffer's update."""
    np.copyto(target, value, casting="same_kind")
    return target


def _legacy_state(g):
    """A RandomState's state as a comparable value."""
    kind, keys, pos, has_gauss, gauss = g.get_state()
    return kind, keys.tobytes(), pos, has_gauss, gauss


def _undrawn(generator, name="the function"):
    return RuntimeError(
        f"tt.compile: {name} drew from an np.random.Generator ({generator!r}) past tinytensor "
        f"(one of its own methods, rng.normal(...), rng.random(...)) while being recorded; the "
        f"compiled program would repeat those numbers on every call. Draw with tinytensor "
        f"(tt.randn(..., rng=rng), tt.rand(..., rng=rng), nn.Dropout(p, rng=rng)), which the "
        f"program repeats from the same generator, or pass the numbers in as an argument")


def _made_by_numpy(rec, var):
    """Whether variable var is a NumPy result f computed (not a Tensor's value: t.data)."""
    return rec.out_kinds.get(var) == "numpy"


def _shared(rec, a, var, mine=()):
    """Whether traced array a's memory is also another variable's (a Tensor's data, a view);
    not one f has written over since, nor one of `mine` (its views f took)."""
    a = _raw(a) if type(a) is _Tainted else a         # (NumPy's own: no recorded read)
    for v, value in enumerate(rec.values):
        if v != var and v not in mine and v not in rec.superseded and isinstance(value, np.ndarray) \
                and value.size \
                and np.may_share_memory(_raw(value) if type(value) is _Tainted else value, a):
            return True
    return False


def _raw(x):
    """A _Tainted array as the plain ndarray it views."""
    return np.ndarray.view(x, np.ndarray)


# ----- a whole training step's effects ------------------------------------------------------------
class _Call:
    """A program line calling an optimizer's or scheduler's method (or a clipping function) as
    eagerly: its result as an array (clip_grad_norm_'s norm), or None."""
    __slots__ = ("call",)

    def __init__(self, method, args, kwargs):
        self.call = functools.partial(method, *args, **kwargs)

    def __call__(self):
        out = self.call()
        return out if out is None else out.data if isinstance(out, Tensor) else out


class _SetGroup:
    """The program line for `opt.param_groups[i][key] = lr` of a number argument (or a number
    computed from them) before the optimizer's step: the new value written on every call, as
    eagerly, so a scheduled learning rate passed as a number is an input, not a cache key."""
    __slots__ = ("group", "key")

    def __init__(self, group, key):
        self.group, self.key = group, key

    def __call__(self, value):
        self.group[self.key] = value

    def store(self, tracer, number):
        """Record this write of `number` before the first optimizer step of the recording (after
        the line that computes it): whether it could be placed (None: placed, but f reads that
        item too, so the number is a key and the item stays guarded)."""
        var = tracer.index.get(id(number))
        entries = tracer.entries
        first = next((i for i, e in enumerate(entries) if e.kind == "effect"       # its step
                      and _steps_group(e.fun, self.group)), None)
        made = next((i for i, e in enumerate(entries) if e.out == var), -1)
        if var is None or first is None or made > first:
            return False
        if made < 0:      # an argument: before the first effect (backward), as f sets it first
            made = next(i for i, e in enumerate(entries) if e.kind == "effect"
                        and not e.name.endswith("zero_grad")) - 1
        out = tracer._new(None, f"set_{self.key}")
        entries.insert(made + 1, _Entry(self, f"set_{self.key}", (_Ref(var),), {}, out,
                                     f"param_groups[...][{self.key!r}] = a number argument, on every call",
                                     "effect"))
        tracer.group_lines.append((self.group, self.key))   # (a change the program makes)
        from .guards import reads_item
        if reads_item(getattr(tracer, "codes_ran", ()), self.key):   # f reads it too (the previous
            return None       # call's value): written by the program, guarded, the number a key
        tracer.group_stores.append((self.group, self.key))
        return True


def _steps_group(fun, group):
    """Whether program line `fun` is the step of an optimizer holding param group `group`."""
    call = getattr(fun, "call", None)
    method = getattr(call, "func", None)
    owner = getattr(method, "__self__", None)
    return getattr(method, "__name__", None) == "step" and builtins.any(
        g is group for g in vars(owner).get("param_groups", ()) if owner is not None)


class _OnLeaf:
    """A program line on a leaf's `.grad` (the leaf fixed, its array read when the line runs)."""
    __slots__ = ("leaf",)

    def __init__(self, leaf):
        self.leaf = leaf


class _WriteGrad(_OnLeaf):
    """Writes into a leaf's `.grad` array in place (`p.grad /= scale`)."""
    __slots__ = ()

    def __call__(self, value):
        np.copyto(_SLOT_GRAD.__get__(self.leaf), value, casting="same_kind")


class _GradOf(_OnLeaf):
    """Reads a leaf's `.grad` (None now: another program)."""
    __slots__ = ()

    def __call__(self):
        grad = _SLOT_GRAD.__get__(self.leaf)
        if grad is None:
            from .codegen import Retrace
            raise Retrace("a .grad f read is None now")
        return grad


class _SetGrad(_OnLeaf):
    """`leaf.grad = value` (a copy: eagerly an array of its own), or `leaf.grad = None`."""
    __slots__ = ()

    def __call__(self, value=None):
        _SLOT_GRAD.__set__(self.leaf, None if value is None else np.array(value, copy=True))


class _GradNone(_OnLeaf):
    """Checks that a leaf's `.grad`, None when f read it, is None still (else another program)."""
    __slots__ = ()

    def __call__(self):
        if _SLOT_GRAD.__get__(self.leaf) is not None:
            from .codegen import Retrace
            raise Retrace("a .grad f read as None is set now")


class _Accumulate:
    """The program line for backward()'s last step: each leaf's `.grad` from this call's
    gradients (tape.accumulate, as eagerly)."""
    __slots__ = ("leaves", "pinned", "ids")

    def __init__(self, leaves, pinned):
        self.leaves, self.pinned = leaves, pinned      # pinned: the program's constants, kept alive
        self.ids = frozenset(id(a) for a in pinned)

    def __call__(self, *grads):
        handed, rest = set(self.ids), None
        for leaf, g in zip(self.leaves, grads):
            # the usual case (zero_grad before): .grad None, g the program's own new array, handed
            # over as tape.accumulate does; anything else goes through tape.accumulate itself
            if (_SLOT_GRAD.__get__(leaf) is None and type(g) is np.ndarray and g.base is None
                    and g.flags.writeable and g.dtype == leaf.data.dtype and id(g) not in handed):
                _SLOT_GRAD.__set__(leaf, g)
                handed.add(id(g))
            else:
                rest = rest or {}
                rest[leaf] = g
        if rest:
            tape.accumulate(rest, handed)


def _leaves(tree):
    if isinstance(tree, (tuple, list)):
        for x in tree:
            yield from _leaves(x)
    elif isinstance(tree, dict):
        for x in tree.values():
            yield from _leaves(x)
    else:
        yield tree


def _tensor_name(t):
    return t.name if isinstance(getattr(t, "name", None), str) else f"a Tensor of shape {t.shape}"


def _several_ranks():
    """Whether tt.distributed runs more than one rank (DistributedDataParallel's hook would then
    average the gradients after backward(): a collective the program would not repeat)."""
    from .. import distributed
    return distributed._STATE.size > 1


def _hyperparameters(obj):
    """An optimizer's groups (settings and parameters) or a scheduler's attributes (the
    schedulers it holds by their own), as a value to compare; None for anything else."""
    if obj is None:
        return None
    if hasattr(obj, "param_groups") and hasattr(obj, "state"):
        return [(tuple(map(id, g["params"])), {k: v for k, v in g.items() if k != "params"})
                for g in obj.param_groups]
    if _is_scheduler(obj):
        return {k: _settings(v) for k, v in vars(obj).items() if k != "optimizer"}
    return None


def _same_settings(now, then):
    """Whether an optimizer's settings (_hyperparameters) are still those recorded after its
    last step, but for those f set to a number argument since (`g["lr"] = lr` between zero_grad()
    and step()), which the program writes on every call (_SetGroup) or which make that argument
    a key."""
    if type(now) is not list or type(then) is not list or len(now) != len(then):
        return now == then
    for (ids, a), (ids_then, b) in zip(now, then):
        tracked = {k for k, v in a.items() if isinstance(v, (_Number, _NumberNP))}
        if ids != ids_then or {k: v for k, v in a.items() if k not in tracked} != \
                {k: v for k, v in b.items() if k not in tracked}:
            return False
    return True


def _is_scheduler(obj):
    return hasattr(obj, "optimizer") and hasattr(type(obj), "step") and not hasattr(obj, "param_groups") \
        and (hasattr(obj, "last_epoch") or hasattr(obj, "_schedulers"))


def _settings(v):
    """v as a value to compare: the schedulers inside by identity and their own settings."""
    if _is_scheduler(v):
        return ("scheduler", id(v), _hyperparameters(v))
    if type(v) in (list, tuple):
        return (type(v), [_settings(x) for x in v])
    if type(v) is dict:
        return {k: _settings(x) for k, x in v.items()}
    return _kept(v)


def _kept(v):
    """A copy of v to put back: containers copied, the schedulers, optimizers, Modules, Tensors
    and functions inside kept themselves (their own state is put back by their own entries)."""
    import copy
    if type(v) is list:
        return [_kept(x) for x in v]
    if type(v) is tuple:
        return tuple(_kept(x) for x in v)
    if type(v) is dict:
        return {k: _kept(x) for k, x in v.items()}
    if _is_scheduler(v) or hasattr(v, "param_groups") or isinstance(v, Tensor) or callable(v) \
            or hasattr(v, "parameters"):
        return v
    return copy.deepcopy(v)


def _put_back_tensors(saved):
    for t, data, data_copy, grad, grad_copy in saved:
        if t.data is not data:
            Tensor.data.__set__(t, data)
        np.copyto(data, data_copy)
        if grad_copy is not None:
            np.copyto(grad, grad_copy)
        _SLOT_GRAD.__set__(t, grad)


class _Watched(list):
    """An optimizer's param_groups after a scheduler's step while recording: the user's code
    reading it (`opt.param_groups[0]["lr"]`, to log the learning rate) reads what the step (and a
    scheduler) just set, a Python value the program cannot read again on its calls: noted, and
    the recording refused (tt.compile._record). The optimizer's own reads pass."""
    __slots__ = ("tracer",)

    def __init__(self, groups, tracer):
        super().__init__(groups)
        self.tracer = tracer

    def _note(self):
        frame = sys._getframe(2)
        if _is_user(frame.f_code) and self.tracer.read_after_step is None:
            self.tracer.read_after_step = (f"read the optimizer's param_groups at "
                                           f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}")

    def __getitem__(self, index):
        self._note()
        return list.__getitem__(self, index)

    def __iter__(self):
        self._note()
        return list.__iter__(self)


def _optimizer_put_back(opt):
    """A function putting back opt's state (the same dicts and arrays, their values) and its
    groups' hyperparameters."""
    state = {p: (s, {k: (v, v.copy() if isinstance(v, np.ndarray) else None) for k, v in s.items()})
             for p, s in opt.state.items()}
    groups = [(g, dict(g)) for g in opt.param_groups]

    def put_back():
        for p in [p for p in opt.state if p not in state]:
            del opt.state[p]
        for p, (s, items) in state.items():
            s.clear()
            for k, (v, c) in items.items():
                if c is not None:
                    np.copyto(v, c)
                s[k] = v
            opt.state[p] = s
        for g, items in groups:
            g.clear()
            g.update(items)
    put_back.copies = [items for _, items in groups]     # (the recording's own: not f's state)
    return put_back


def _attributes_put_back(obj):
    """A function putting back obj's attributes (lists and dicts in place; the schedulers it
    holds, a ChainedScheduler's, put back by their own), but its optimizer."""
    inner = [x for v in vars(obj).values() if type(v) in (list, tuple) for x in v if _is_scheduler(x)]
    inner_put_backs = [_attributes_put_back(s) for s in inner]
    saved = {k: (v, _kept(v)) for k, v in vars(obj).items() if k != "optimizer"}

    def put_back():
        for p in inner_put_backs:
            p()
        for k in [k for k in vars(obj) if k not in saved and k != "optimizer"]:
            delattr(obj, k)
        for k, (v, c) in saved.items():
            if type(v) is list:
                v[:] = c
            elif type(v) is dict:
                v.clear()
                v.update(c)
            else:
                v = c
            setattr(obj, k, v)
    return put_back


# ----- number arguments: inputs of the program, or (used in Python) part of the cache key ---------
class _Number:
    """A number argument of f (a Python float or int, a NumPy float or int scalar), or a number
    computed from them, while f is recorded: what f gets in its place, so that every use of it
    is seen. Passed to a tinytensor operation as an operand (`w - lr * g`, `z / t`), it is the
    program's input, and the program calls that operation on the call's number itself (Python's
    weak-scalar rules, NEP 50, apply as eagerly). Python arithmetic with other numbers (`1 - lr`)
    gives another _Number, a line of the program. Every other use (`if lr > 0.5`, `float(lr)`,
    `range(n)`, a shape, an index or another keyword parameter of an operation, `math.cos(lr)`,
    an f-string, a dict key, NumPy on it) gives the plain value and makes the arguments it came
    from part of the cache key (`sources`: their positions among the program's inputs): the
    program is then right for those values only, and another value records another program.

    `isinstance(lr, float)` holds (`__class__` is the value's); `type(lr)` is _Number. After the
    recording it behaves as its value."""
    __slots__ = ("value", "sources", "tracer")

    def __init__(self, value, sources, tracer):
        self.value, self.sources, self.tracer = value, sources, tracer

    @property
    def __class__(self):
        return type(self.value)

    def _read(self, how):
        """A use the program cannot replay: the arguments this number comes from become keys."""
        if self.tracer.recording:
            self.tracer.number_read(self, how)
        return self.value

    def __repr__(self):
        return repr(self._read("repr()"))

    def __str__(self):
        return str(self._read("str()"))

    def __format__(self, spec):
        return format(self._read("an f-string or format()"), spec)

    def __hash__(self):
        return hash(self._read("hash() (a dict key, a set)"))

    def __bool__(self):
        return bool(self._read("bool() (an if, and, or)"))

    def __float__(self):
        return float(self._read("float() (math.*, a conversion)"))

    def __int__(self):
        return int(self._read("int()"))

    def __index__(self):
        return operator.index(self._read("an index (range(), a shape, a slice)"))

    def __complex__(self):
        return complex(self._read("complex()"))

    def __round__(self, *ndigits):
        return round(self._read("round()"), *ndigits)

    def __trunc__(self):
        return math.trunc(self._read("math.trunc()"))

    def __floor__(self):
        return math.floor(self._read("math.floor()"))

    def __ceil__(self):
        return math.ceil(self._read("math.ceil()"))

    def __divmod__(self, other):
        return divmod(self._read("divmod()"), _plain_number(other))

    def __rdivmod__(self, other):
        return divmod(_plain_number(other), self._read("divmod()"))

    def __reduce_ex__(self, protocol):    # pickle, copy: the value's own
        return self._read("pickle or copy").__reduce_ex__(protocol)

    def __getattr__(self, name):          # .real, .is_integer(), ...: read as the value's
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        if name in _STRUCTURE:                # the same for every value of the type (a key already)
            return getattr(self.value, name)
        return getattr(self._read(f".{name}"), name)

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self._read("np.asarray()"), dtype=dtype)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if builtins.any(isinstance(x, Tensor) for x in inputs):
            return NotImplemented          # the Tensor's own ufunc: a primitive with this operand
        tracer = self.tracer
        if method == "__call__" and not kwargs and ufunc.nout == 1 and tracer.recording:
            kinds = [1 if type(x) in _WRAPPED or type(x) in _PLAIN_NUMBERS else
                     2 if type(x) is np.ndarray or type(x) is _Tainted else 0 for x in inputs]
            if 0 not in kinds:
                value = ufunc(*[_raw(x) if type(x) is _Tainted else _plain_number(x) for x in inputs])
                if 2 not in kinds:      # np.float64(2) * lr, np.cos(lr): a number, a line
                    sources = frozenset().union(*[x.sources for x in inputs if type(x) in _WRAPPED])
                    return tracer.number_op(ufunc, ufunc.__name__, inputs, value, sources)
                if not tracer.depth_inside:   # A * lr, t.data > lr: a line, its result recorded
                    generic = isinstance(value, np.generic)   # (of a 0-d value: eagerly a scalar)
                    return tracer.numpy(ufunc, ufunc.__name__, inputs, {},
                                        np.asarray(value) if generic else value, generic=generic)
        self._read(f"np.{ufunc.__name__}")
        inputs = [x._read(f"np.{ufunc.__name__}") if type(x) in _WRAPPED else x for x in inputs]
        return getattr(ufunc, method)(*inputs, **kwargs)


_STRUCTURE = frozenset(("shape", "ndim", "size", "dtype", "itemsize", "nbytes"))


def _plain_number(x):
    return x.value if type(x) in _WRAPPED else x


_PLAIN_NUMBERS = frozenset((int, float, bool, complex, np.float64, np.float32, np.float16, np.int64, np.int32,
                            np.int16, np.int8, np.uint64, np.uint32, np.uint16, np.uint8, np.bool_,
                            np.complex128, np.complex64))


def _number_arithmetic(op, reflected=False):
    """`lr op other` (or `other op lr`) for a plain number or a _Number `other`: a line of the
    program (Python's own arithmetic on the call's numbers), giving a _Number. Anything else
    (a Tensor, an array) gets NotImplemented: its own operator takes the _Number as an operand."""
    def method(self, other):
        if type(other) in _WRAPPED:
            value = other.value
            sources = self.sources | other.sources
        elif type(other) in _PLAIN_NUMBERS:
            value, sources = other, self.sources
        else:
            return NotImplemented
        a, b = (value, self.value) if reflected else (self.value, value)
        result = op(a, b)
        if not self.tracer.recording:
            return result
        args = (other, self) if reflected else (self, other)
        return self.tracer.number_op(op, op.__name__, args, result, sources)
    return method


def _number_unary(op):
    def method(self):
        result = op(self.value)
        if not self.tracer.recording:
            return result
        return self.tracer.number_op(op, op.__name__, (self,), result, self.sources)
    return method


def _number_comparison(op):
    def method(self, other):
        if type(other) not in _WRAPPED and type(other) not in _PLAIN_NUMBERS:
            if isinstance(other, (Tensor, np.ndarray)):
                return NotImplemented      # recorded by the Tensor's (the array's) comparison
            self._read(f"a comparison ({op.__name__})")
            return op(self.value, other)
        if type(other) in _WRAPPED:
            other = other._read(f"a comparison ({op.__name__})")
        return op(self._read(f"a comparison ({op.__name__})"), other)
    return method


for _name, _op in (("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
                   ("truediv", operator.truediv), ("floordiv", operator.floordiv), ("mod", operator.mod),
                   ("pow", operator.pow)):
    setattr(_Number, f"__{_name}__", _number_arithmetic(_op))
    setattr(_Number, f"__r{_name}__", _number_arithmetic(_op, reflected=True))
for _name, _op in (("neg", operator.neg), ("pos", operator.pos), ("abs", operator.abs)):
    setattr(_Number, f"__{_name}__", _number_unary(_op))
for _name, _op in (("lt", operator.lt), ("le", operator.le), ("gt", operator.gt), ("ge", operator.ge),
                   ("eq", operator.eq), ("ne", operator.ne)):
    setattr(_Number, f"__{_name}__", _number_comparison(_op))


class _NumberNP(_Number):
    """A NumPy scalar argument (np.float32(0.1)): Tensor arithmetic takes it as a Python number
    (tensor._NPS), through its recorded .item(), as eagerly."""
    __slots__ = ()

    def item(self):
        """A NumPy scalar's .item(): the Python number, a line of the program."""
        if not self.tracer.recording:
            return self.value.item()
        return self.tracer.number_op(_item, "item", (self,), self.value.item(), self.sources)


_WRAPPED = frozenset((_Number, _NumberNP))
_Tracer.number_types = _WRAPPED      # (read by transforms._value: a number argument made an array)
tensor_module._NPS = tensor_module._NPS | {_NumberNP}     # read by Tensor's operators on each call


_TENSOR_FILE = tensor_module.__file__
_SKIPPED_CODES.add(_Tracer.in_place.__code__)
_DISPATCH = tuple(os.path.join(os.path.dirname(os.path.dirname(__file__)), part)
                  for part in ("tensor.py", "tape.py", "ops" + os.sep, "compile" + os.sep))
_BINARY_OP = dis.opmap.get("BINARY_OP")
_OPERATOR_UFUNCS = {"NB_ADD": np.add, "NB_INPLACE_ADD": np.add, "NB_SUBTRACT": np.subtract,
                    "NB_INPLACE_SUBTRACT": np.subtract, "NB_MULTIPLY": np.multiply,
                    "NB_INPLACE_MULTIPLY": np.multiply, "NB_TRUE_DIVIDE": np.true_divide,
                    "NB_INPLACE_TRUE_DIVIDE": np.true_divide, "NB_POWER": np.power,
                    "NB_INPLACE_POWER": np.power}
_BY_ARG = {i: _OPERATOR_UFUNCS[name] for i, (name, _) in enumerate(getattr(dis, "_nb_ops", ()))
           if name in _OPERATOR_UFUNCS}
_PRIM_UFUNCS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
                "power": np.power, "abs": np.absolute}
# Tensor's operators (Python's number protocol reaches them: `+`, operator.add, sum(), pow(), +=)
_TENSOR_OPERATORS = frozenset(f.__code__ for f in (
    Tensor.__add__, Tensor.__radd__, Tensor.__abs__, tensor_module._in_place))
_TAINTED_OPERATOR = [None]    # the ufunc a traced array's operator is running (see _Tainted)


def _operator_at(frame, ufunc):
    """Whether the operation being recorded (NumPy's `ufunc`) was reached through Python's number
    protocol: a Tensor operator on the way (`+`, `operator.add`, `sum()`, `pow()`, `x.__pow__`,
    `+=`, `abs()`), a traced array's (_TAINTED_OPERATOR), or, where nothing of ours is on the way
    (`np.float64(2) ** t`), the code that reached it standing at `+ - * / **`. On NumPy scalars
    that is their own arithmetic, not the ufunc's (np.add(...), tt.power(...) stay the ufunc)."""
    while frame is not None and frame.f_code.co_filename.startswith(_DISPATCH):
        if frame.f_code in _TENSOR_OPERATORS:
            return True
        frame = frame.f_back
    if frame is None or _BINARY_OP is None:
        return False
    code, i = frame.f_code.co_code, frame.f_lasti
    return 0 <= i < len(code) - 1 and code[i] == _BINARY_OP and _BY_ARG.get(code[i + 1]) is ufunc


def _a_number(a):
    """Whether operand `a` is, eagerly, a number, a bool or a NumPy scalar (not an array)."""
    a = a.value if type(a) in _WRAPPED else a
    return isinstance(a, (int, float, complex, np.generic))


def _scalar_operands(inputs, arrays):
    """Whether each operand is, eagerly, a NumPy scalar or a number (a recorded 0-d value NumPy
    gave as a scalar, x.mean() of an array argument; not a 0-d array), or (`arrays`) an array
    of some axes."""
    rec = STATE.recorder
    if rec is None or len(inputs) not in (1, 2):
        return False
    for a in inputs:
        if type(a) is _Tainted:
            if not (a.ndim and arrays) and (a.ndim or rec.var_of(a) not in rec.generic_vars):
                return False
        elif not _a_number(a):
            return False
    return True


def _scalar(a):
    return a[()] if isinstance(a, np.ndarray) else a


def _scalar_operator(op, name):
    def apply(*operands):
        return np.asarray(op(*[_scalar(a) for a in operands]))
    apply.__name__ = apply.__qualname__ = f"scalar_{name}"
    apply.__doc__ = (f"`a {name} b` on values that are NumPy scalars eagerly (0-d arrays here, or "
                     f"numbers): NumPy scalars' own operator, as f's gives eagerly; a 0-d array.")
    return apply


_SCALAR_OPERATORS = {np.add: _scalar_operator(operator.add, "add"),
                     np.subtract: _scalar_operator(operator.sub, "sub"),
                     np.multiply: _scalar_operator(operator.mul, "mul"),
                     np.true_divide: _scalar_operator(operator.truediv, "div"),
                     np.power: _scalar_operator(operator.pow, "power"),
                     np.absolute: _scalar_operator(operator.abs, "abs")}


def _plain_numbers(x, found):
    """x with every _Number inside (containers and slices walked) replaced by its value; the
    _Numbers found are appended to `found`."""
    t = type(x)
    if t in _WRAPPED:
        found.append(x)
        return x.value
    if t is tuple or t is list:
        return t(_plain_numbers(v, found) for v in x)
    if t is dict:
        return {k: _plain_numbers(v, found) for k, v in x.items()}
    if t is slice:
        return slice(_plain_numbers(x.start, found), _plain_numbers(x.stop, found),
                     _plain_numbers(x.step, found))
    return x
