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
compared before and after the recording, and refused (`check_unchanged`).
"""

import builtins
import functools
import gc
import os
import sys
import threading
import types

import numpy as np

from ..tensor import Tensor
from .tracer import _is_user

_SCALARS = (int, float, bool, str, type(None), complex, bytes)
_CONTAINERS = (list, tuple, dict, set, frozenset)
_MAX_ITEMS = 64          # a larger container is guarded by identity and length
_DEPTH = 4
_OPAQUE = (types.ModuleType, type, types.BuiltinFunctionType, np.ufunc, threading.local,
           np.random.Generator, np.random.RandomState, np.dtype)


def _fingerprint(x, depth=0):
    """x's value as a hashable, comparable key: numbers and strings by (type, value); containers
    by their items; arrays, Tensors, functions and other objects by identity; objects with
    attributes (a config, an optimizer) also by their number/string/container attributes."""
    t = type(x)
    if t in _SCALARS:
        return (t, x)
    if isinstance(x, np.generic):
        return (t, x.item() if x.size == 1 else repr(x))
    if t is float or isinstance(x, float):
        return (t, float(x))
    if t in _CONTAINERS or isinstance(x, (list, tuple, dict)):
        if depth >= _DEPTH or len(x) > _MAX_ITEMS:
            return (t, id(x), len(x))
        if isinstance(x, dict):
            return (t, tuple((_fingerprint(k, depth + 1), _fingerprint(v, depth + 1)) for k, v in x.items()))
        if t in (set, frozenset):
            return (t, frozenset(_fingerprint(v, depth + 1) for v in x))
        return (t, tuple(_fingerprint(v, depth + 1) for v in x))
    if isinstance(x, (np.ndarray, Tensor)) or callable(x) or isinstance(x, _OPAQUE):
        if isinstance(x, functools.partial):
            return (t, id(x), _fingerprint(x.args, depth + 1), _fingerprint(x.keywords, depth + 1))
        if isinstance(x, types.MethodType):
            return (t, id(x.__func__), id(x.__self__))
        from ..nn.module import Module
        if isinstance(x, Module):
            return (t, id(x), _module_state(x))
        return (t, id(x))
    attributes = getattr(x, "__dict__", None)
    if attributes is not None and depth < _DEPTH - 1:
        items = tuple((k, _fingerprint(v, depth + 1)) for k, v in attributes.items()
                      if not k.startswith("__"))
        return (t, id(x), _class_state(t), items)
    return (t, id(x))


def _class_state(cls):
    """The number and string attributes of a user's class and its user-defined bases (a class
    attribute `scale = 2.0` a method reads as self.scale)."""
    state = []
    for c in cls.__mro__:
        if c.__module__ in ("builtins", "abc") or c.__module__.startswith("tinytensor"):
            continue
        state += [(c.__name__, k, v) for k, v in vars(c).items()
                  if type(v) in _SCALARS and not k.startswith("__")]
    return tuple(state)


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
    attributes = vars(m)
    return (m.training, attributes.get("_structure", 0), _class_state(type(m)),
            tuple((k, v) for k, v in attributes.items() if type(v) in _SCALARS),
            tuple(attributes.get("_forward_hooks", ())), tuple(attributes.get("_forward_pre_hooks", ())))


class _Reach:
    """Finds, while f is recorded, the Python values it depends on (see the module's text)."""

    def __init__(self, f, tracer):
        self.f = f
        self.tracer = tracer
        self.codes = {}           # code object -> a frame's globals (user code that ran)
        self.functions = {}       # id -> function f can reach statically (closures, methods, partials)
        self.objects = {}         # id -> object whose attributes are guarded (bound self, partial args)
        self.partials = {}        # id -> functools.partial (its arguments and keywords, by value)
        self.before = None
        self._previous = None
        self._collect(f, 0)

    # ----- the functions and objects f can reach without running -----
    def _collect(self, f, depth):
        if depth > 6:
            return
        while isinstance(f, functools.partial):
            self.partials[id(f)] = f
            for a in (*f.args, *f.keywords.values()):
                self._value(a, depth)
            f = f.func
        if isinstance(f, types.MethodType):
            self._value(f.__self__, depth)
            f = f.__func__
        if not isinstance(f, types.FunctionType):
            if callable(f) and hasattr(f, "__dict__") and not isinstance(f, type):
                inner = getattr(f, "fun", None) or getattr(f, "__wrapped__", None)
                if inner is not None and inner is not f:
                    self._collect(inner, depth + 1)
                self._value(f, depth)
                call = vars(type(f)).get("__call__")
                if isinstance(call, types.FunctionType) and _is_user(call.__code__):
                    self._collect(call, depth + 1)
            return
        if id(f) in self.functions:
            return
        self.functions[id(f)] = f
        wrapped = getattr(f, "__wrapped__", None)
        if wrapped is not None:
            self._collect(wrapped, depth + 1)
        for cell in f.__closure__ or ():
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            self._value(value, depth)
        for name in f.__code__.co_names:
            if name in f.__globals__:
                self._value(f.__globals__[name], depth)
        for value in (f.__defaults__ or ()) + tuple((f.__kwdefaults__ or {}).values()):
            self._value(value, depth)

    def _value(self, value, depth):
        if isinstance(value, (types.FunctionType, functools.partial, types.MethodType)):
            self._collect(value, depth + 1)
        elif isinstance(value, (list, tuple)) and len(value) <= _MAX_ITEMS:
            for v in value:
                if isinstance(v, (types.FunctionType, functools.partial, types.MethodType)):
                    self._collect(v, depth + 1)
        elif (hasattr(value, "__dict__") and not isinstance(value, _OPAQUE + (Tensor, np.ndarray))
              and not isinstance(value, (types.FunctionType, types.MethodType))):
            if id(value) not in self.objects:
                self.objects[id(value)] = value
                for name in dir(type(value)):            # its methods f may call
                    attr = getattr(type(value), name, None)
                    if isinstance(attr, types.FunctionType) and _is_user(attr.__code__):
                        self._collect(attr, depth + 1)
            if hasattr(value, "fun") and callable(value):          # a compiled function inside f
                self._collect(value.fun, depth + 1)

    # ----- the functions that ran -----
    def enter(self):
        self.before = self._state()
        self._previous = sys.getprofile()
        codes = self.codes

        def profile(frame, event, arg):
            if event == "call":
                code = frame.f_code
                if code not in codes and _is_user(code):
                    codes[code] = frame.f_globals
        sys.setprofile(profile)

    def exit(self):
        sys.setprofile(self._previous)

    def _functions(self):
        """Every user function f reached: those found without running, and those whose code ran
        (found by their code object)."""
        known = {f.__code__: f for f in self.functions.values()}
        found = dict(self.functions)
        for code in self.codes:
            if code in known or code.co_name in ("<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"):
                continue
            for ref in gc.get_referrers(code):
                if isinstance(ref, types.FunctionType) and ref.__code__ is code:
                    found[id(ref)] = ref
        return list(found.values())

    def _sources(self):
        """(reader expression, object) pairs: each value the result may depend on."""
        readers = []
        seen_globals = set()
        for f in self._functions():
            for k, cell in enumerate(f.__closure__ or ()):
                try:
                    _ = cell.cell_contents
                except ValueError:
                    continue
                readers.append(("fp({}.cell_contents)", cell, f"{f.__code__.co_freevars[k]} (closed over by "
                                                           f"{f.__qualname__})"))
            glob = f.__globals__
            if glob.get("__name__", "").startswith("tinytensor"):
                continue
            codes = [f.__code__] + [c for c in f.__code__.co_consts if isinstance(c, types.CodeType)]
            for code in codes:
                for name in code.co_names:
                    if name in glob and (id(glob), name) not in seen_globals:
                        seen_globals.add((id(glob), name))
                        readers.append((f"fp({{}}.get({name!r}))", glob, f"the global {name}"))
            readers.append(("fp({}.__defaults__)", f, f"the defaults of {f.__qualname__}"))
            readers.append(("fp({}.__kwdefaults__)", f, f"the keyword defaults of {f.__qualname__}"))
        for glob in {id(g): g for g in self.codes.values()}.values():   # code without a function object
            if glob.get("__name__", "").startswith("tinytensor"):
                continue
            for code, g in self.codes.items():
                if g is glob:
                    for name in code.co_names:
                        if name in glob and (id(glob), name) not in seen_globals:
                            seen_globals.add((id(glob), name))
                            readers.append((f"fp({{}}.get({name!r}))", glob, f"the global {name}"))
        for obj in self.objects.values():
            readers.append(("fp({})", obj, f"the attributes of {type(obj).__name__}"))
        for p in self.partials.values():
            readers.append(("fp({})", p, f"the arguments of {p!r}"[:80]))
        for m in self.tracer.modules:
            readers.append(("ms({})", m, f"the mode and attributes of {type(m).__name__}"))
        if self.tracer.modules:
            readers.append(("{}()", _Structure(self.tracer.modules),
                            "the submodules of the modules it calls"))
        return readers

    def _state(self):
        """The fingerprint of everything found without running (compared after the recording)."""
        values = []
        for f in self.functions.values():
            for cell in f.__closure__ or ():
                try:
                    values.append(_fingerprint(cell.cell_contents))
                except ValueError:
                    values.append(None)
            for name in f.__code__.co_names:
                if name in f.__globals__ and not f.__globals__.get("__name__", "").startswith("tinytensor"):
                    values.append((name, _fingerprint(f.__globals__[name])))
        for obj in self.objects.values():
            values.append(_fingerprint(obj))
        for p in self.partials.values():
            values.append(_fingerprint(p))
        return values

    def check_unchanged(self, name):
        """Refuse a function that changed Python state it reads while being recorded: the
        program would not repeat the change."""
        if self._state() != self.before:
            raise RuntimeError(
                f"tt.compile: {name} changed Python state while being recorded (appended to a list "
                f"it closes over, rebound a nonlocal or global, set an attribute of an object it "
                f"reads, stepped an optimizer); the compiled program would not repeat that. Keep "
                f"such updates outside the compiled function (return the values instead), or "
                f"call it uncompiled")

    def guard(self):
        """One generated function returning the tuple of every source's fingerprint (None when
        there is nothing to guard)."""
        readers = self._sources()
        if not readers:
            return None
        namespace = {"fp": _fingerprint, "ms": _module_state}
        parts = []
        for i, (form, obj, _) in enumerate(readers):
            namespace[f"o{i}"] = obj
            parts.append(form.format(f"o{i}"))
        source = "def guard():\n    return (" + ", ".join(parts) + ",)\n"
        exec(builtins.compile(source, "<tt.compile guard>", "exec"), namespace)
        guard = namespace["guard"]
        guard.names = [what for *_, what in readers]
        return guard


def describe_change(guard, recorded, now):
    """Which guarded value changed, in words."""
    names = getattr(guard, "names", [])
    for name, a, b in zip(names, recorded or (), now or ()):
        if a != b:
            return f"{name} changed"
    return "a guarded Python value changed"


_FILE = os.path.abspath(__file__)
