"""The recorder of `tt.compile`: `_Tracer` notes, as entries of a Wengert list, every primitive
`f` calls, every value computed off the tape (`ops.on_values`), every rule the engine's own
sweeps apply, every random draw and every write into a module's buffer. It owns no sweep and
patches nothing: while it records, this thread's `STATE.recorder` (and `STATE.hook`) is it, and
the engine calls it (see tinytensor/state.py). The Tensors it records become `_Traced`, whose
comparisons and reads into Python it notes."""

import builtins
import operator
import os
import sys

import numpy as np

from .. import draws, ops, tape
from .. import tensor as tensor_module
from ..state import STATE, update_hook
from ..tensor import Tensor, _make


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
        # A view (the caller's memory, no copy) with an identity of its own: f may also close
        # over the caller's array, which is then a constant, not this input (and the same array
        # passed twice is two inputs).
        array = array.view()
        t = _make(array, cls=_Traced)
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
        t = _make(value if isinstance(value, np.ndarray) else np.asarray(value), cls=_Traced)
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
        if rng is None:
            generator = draws.generator(None)        # the global one (tt.manual_seed)
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

    def compared(self, op, t, other, value):
        """t < other (and the other comparisons) made `value`, a mask: noted if t or other is
        recorded, so the program recomputes it on every call. Inside a nested transform it
        gives a traced Tensor, so NumPy calls on the mask are recorded too."""
        ufunc = _COMPARISONS[op]
        mask = np.asarray(value) if isinstance(value, np.generic) else value   # 0-d: noted as an array
        var = self.record(ufunc, ufunc.__name__, (t, other), {}, mask, ufunc.__name__, "numpy")
        if var is None:
            return value
        return self.wrap(mask, var) if STATE.depth > 0 else mask

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
    """A Tensor whose value tt.compile is recording: its reads into Python are noted (its
    comparisons, as every Tensor's, are recorded: Tensor.__lt__ calls `compared`). Only the
    Tensors of one recording are of this class (the recorder sets it), so nothing process-wide
    changes; outside a recording (a Tensor kept after the call) it behaves as a Tensor."""
    __slots__ = ()
    __hash__ = Tensor.__hash__

    def __setitem__(self, index, value):
        Tensor.__setitem__(self, index, value)
        rec = STATE.recorder
        if rec is not None and rec.var_of(self.data) is not None:   # t became a recorded entry
            rec.index[id(self)] = rec.var_of(self.data)


_new_tensor = Tensor.__new__
_COMPARISONS = {operator.lt: np.less, operator.le: np.less_equal, operator.gt: np.greater,
                operator.ge: np.greater_equal, operator.eq: np.equal, operator.ne: np.not_equal}


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


def _store(target, value):
    """target[...] = value (NumPy's same_kind casting, as an in-place operator): a buffer's update."""
    np.copyto(target, value, casting="same_kind")
    return target


def _undrawn(generator, name="the function"):
    return RuntimeError(
        f"tt.compile: {name} drew from an np.random.Generator ({generator!r}) past tinytensor "
        f"(one of its own methods, rng.normal(...), rng.random(...)) while being recorded; the "
        f"compiled program would repeat those numbers on every call. Draw with tinytensor "
        f"(tt.randn(..., rng=rng), tt.rand(..., rng=rng), nn.Dropout(p, rng=rng)), which the "
        f"program repeats from the same generator, or pass the numbers in as an argument")
