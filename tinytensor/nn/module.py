"""`Module`: the base class of layers and models.

A parameter is just a leaf `tt.Tensor` with `requires_grad=True`. A Module does not register
anything: `named_parameters()` finds parameters by walking the module's attributes, and inside
them lists, tuples and dicts, and nested Modules, at the moment it is called. So

    class MLP(tt.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = [tt.nn.Linear(64, 32), tt.nn.Linear(32, 10)]
        def forward(self, x):
            return self.layers[1](tt.relu(self.layers[0](x)))

has the parameters "layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias".

Buffers (state that is not trained, such as batch norm's running statistics) are the one thing
declared, with `register_buffer`, so that `state_dict()` knows them. `functional_call` runs a
module with other parameter values: the way to take `tt.grad` of a model's loss in its parameters.
"""

import itertools
import warnings
from collections import namedtuple

import numpy as np

from .. import backend, ops, rng
from ..hooks import HookDict, RemovableHandle
from ..ops.batching import BatchArray
from ..state import SHARED, STATE, replayed_while_recording
from ..tensor import Tensor, _is_device_name, mark_modified
from ..torch_interop import host_array, numpy_dtype
from ..weakid import IdentityWeakMap
from .parameter import Parameter

_hook_ids = itertools.count()

# What load_state_dict returns, as PyTorch's: the names the module has that the state lacked, and
# the names of the state the module does not have (both empty after a strict load).
IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


def cast_input(x, dtype):
    """A layer's input in its parameters' dtype: a float32 model fed NumPy's float64 data
    computes (and returns gradients) in float32, as Keras layers do. Integer and boolean data
    are cast too; complex input is refused (a TypeError), as PyTorch's layers refuse it."""
    if isinstance(x, Tensor):
        if x.data.dtype != dtype:
            if x.data.dtype.kind in "fiub":
                cast = ops.astype(x, dtype)        # recorded: the gradient comes back in x's dtype
                if not cast.requires_grad:
                    cast.name = x.name             # a constant keeps its name in the pictures
                return cast
            _refuse_complex(x.data.dtype, dtype)
        return x
    x = backend.asarray(x)
    if x.dtype != dtype:
        if x.dtype.kind in "fiub":
            return x.astype(dtype)
        _refuse_complex(x.dtype, dtype)
    return x


def _refuse_complex(got, dtype):
    if got.kind == "c":
        raise TypeError(f"a layer with {dtype} parameters was fed complex input ({got}): tinytensor "
                        f"does not differentiate complex functions; feed the real and imaginary "
                        f"parts as separate float features")


def _array(value):
    """A state-dict entry as an array (a Tensor's own array: never through __array__; a torch
    tensor converted once)."""
    return value.data if isinstance(value, Tensor) else backend.asarray(host_array(value))


def _is_parameter(value):
    # A leaf that needs a gradient, or did when a Module first held it (frozen for fine-tuning,
    # `p.requires_grad = False`: still in named_parameters() and state_dict(), as PyTorch's). A
    # Tensor computed from parameters (a cached activation, say) is not one: it is on the tape.
    if not isinstance(value, Tensor) or value._prim is not None:
        return False
    if value.requires_grad or isinstance(value, Parameter):   # nn.Parameter(x, requires_grad=False) too
        return True
    return value in _PARAMETERS


_PARAMETERS = IdentityWeakMap()   # every trainable leaf a Module has held


def _remember(t):
    if t not in _PARAMETERS:
        _PARAMETERS[t] = True


_NUMBERS = (bool, int, float, str, type(None))
_NOTHING = object()
_STRUCTURE = [0]     # the last structure version handed out (Module.__setattr__)


class Module:
    """Base class: subclasses set attributes in `__init__` and define `forward`.

    Examples
    --------
    >>> class Affine(tt.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.w = tt.nn.Parameter(np.ones(2))
    ...         self.b = tt.nn.Parameter(np.zeros(2))
    ...     def forward(self, x):
    ...         return x * self.w + self.b
    ...
    >>> m = Affine()
    >>> [name for name, _ in m.named_parameters()]
    ['w', 'b']
    >>> m(np.array([1.0, 2.0]))
    tensor([1., 2.], requires_grad=True)
    """

    # A class attribute, so a subclass that forgets `super().__init__()` still works.
    training = True
    _hooked = False          # True once a forward (pre-)hook was registered: __call__'s one check
    _outputs = ()            # attributes a call writes for inspection and never reads (Dropout's
                             # .mask): not state, so tt.compile's guards leave them out

    def __init__(self):
        self.training = True

    def __setattr__(self, name, value):
        if isinstance(value, Tensor) and value.requires_grad and value._prim is None:
            _remember(value)                 # a parameter even once frozen (see _is_parameter)
        if type(value) not in _NUMBERS and self.__dict__.get(name, _NOTHING) is not value:
            _STRUCTURE[0] += 1               # a submodule, Tensor, array, object: a new structure,
            object.__setattr__(self, "_structure", _STRUCTURE[0])   # which tt.compile's guards
                                             # compare (numbers by value; `self.count += 1` on a
                                             # Tensor in place hands back the same object: no change)
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        _STRUCTURE[0] += 1
        object.__setattr__(self, "_structure", _STRUCTURE[0])
        object.__delattr__(self, name)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} must define forward()")

    def __call__(self, *args, **kwargs):
        if not SHARED.quiet and STATE.recorder is not None:   # tt.compile: its modes guard the program
            STATE.recorder.module(self)
        if not self._hooked:
            return self.forward(*args, **kwargs)
        return self._call_with_hooks(args, kwargs)

    # ----- hooks, as PyTorch's ------------------------------------------------------------------
    def _call_with_hooks(self, args, kwargs):
        for hook, with_kwargs in list(self._hook_dict("_forward_pre_hooks").values()):
            if with_kwargs:
                new = hook(self, args, kwargs)
                if new is not None:
                    if not (isinstance(new, tuple) and len(new) == 2):
                        raise RuntimeError(f"forward pre-hook {getattr(hook, '__name__', hook)!r} with "
                                           f"with_kwargs=True must return None or (args, kwargs)")
                    args, kwargs = new
            else:
                new = hook(self, args)
                if new is not None:
                    args = new if isinstance(new, tuple) else (new,)
        output = self.forward(*args, **kwargs)
        for hook, with_kwargs in list(self._hook_dict("_forward_hooks").values()):
            new = hook(self, args, kwargs, output) if with_kwargs else hook(self, args, output)
            if new is not None:
                output = new
        return output

    def _hook_dict(self, name):
        hooks = self.__dict__.get(name)
        if hooks is None:
            hooks = HookDict()
            object.__setattr__(self, name, hooks)
        return hooks

    def _register(self, name, hook, with_kwargs, prepend):
        if not callable(hook):
            raise TypeError(f"{name.strip('_')[:-1].replace('_', ' ')}: the hook must be callable, got "
                            f"{type(hook).__name__}")
        hooks = self._hook_dict(name)
        key = next(_hook_ids)
        if prepend:
            hooks.prepend(key, (hook, bool(with_kwargs)))
        else:
            hooks[key] = (hook, bool(with_kwargs))
        object.__setattr__(self, "_hooked", True)
        return RemovableHandle(hooks, key)

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """hook(module, args) runs before forward; it may return replacement args (a tuple, or one
        value). With with_kwargs=True: hook(module, args, kwargs) -> None or (args, kwargs).
        Returns a handle with remove()."""
        return self._register("_forward_pre_hooks", hook, with_kwargs, prepend)

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False):
        """hook(module, args, output) runs after forward; it may return a replacement output.
        With with_kwargs=True: hook(module, args, kwargs, output). Returns a handle with remove()."""
        return self._register("_forward_hooks", hook, with_kwargs, prepend)

    # ----- finding parameters and submodules ----------------------------------------------------
    def _walk(self, prefix, seen, aliases=False, buffers=False):
        """Yield (name, value) for every parameter and Module under self in PyTorch's order: a
        module's own parameters (its Tensor attributes, in assignment order), then (with
        `buffers`) its own buffers, then each child in turn, a child Module before its contents
        (pre-order). A list, tuple or dict is a child as PyTorch's ModuleList/ParameterList would
        be: its own parameters, then its modules. `seen` holds the ids already yielded: a
        parameter or a module shared between two places is yielded once, under its first name (a
        parameter under every name with `aliases`, as PyTorch's state_dict lists tied weights)."""
        stack = [(prefix[:-1] if prefix.endswith(".") else prefix, self, True)]
        while stack:           # a stack, not recursion: containers may nest arbitrarily deep
            name, value, expand = stack.pop()
            if not expand:     # a parameter, buffer or Module reached from its parent: yield it
                if id(value) in seen and not (aliases and isinstance(value, Tensor)):
                    continue
                seen.add(id(value))
                if isinstance(value, Tensor):
                    if _is_parameter(value):
                        _remember(value)
                    yield name, value
                    continue
                yield name, value
                if isinstance(value, Module):
                    stack.append((name, value, True))
                continue
            if isinstance(value, Module):
                items = list(vars(value).items())
            elif isinstance(value, (list, tuple)):
                items = list(enumerate(value))
            else:
                items = list(value.items())
            own, kids = [], []
            for key, item in items:
                full = f"{name}.{key}" if name else f"{key}"
                if _is_parameter(item):
                    own.append((full, item, False))
                elif isinstance(item, Module):
                    kids.append((full, item, False))
                elif isinstance(item, (list, tuple, dict)):
                    kids.append((full, item, True))
            if buffers and isinstance(value, Module):
                for key in value._buffer_names():
                    b = getattr(value, key)
                    if b is not None and value._persistent(key):
                        own.append((f"{name}.{key}" if name else key, b, False))
            stack.extend(reversed(kids))
            stack.extend(reversed(own))

    def named_parameters(self):
        """(name, parameter) pairs, names as in PyTorch ("0.weight", "encoder.layers.1.bias")."""
        for name, value in self._walk("", {id(self)}):
            if isinstance(value, Tensor):
                yield name, value

    def parameters(self):
        """Every parameter once (a generator, as in PyTorch: pass it straight to an optimizer)."""
        for _, p in self.named_parameters():
            yield p

    def named_modules(self):
        """("", self), then (name, module) for every Module under it, each once."""
        yield "", self
        for name, value in self._walk("", {id(self)}):
            if isinstance(value, Module):
                yield name, value

    def modules(self):
        """This module and every Module under it, each once."""
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        """The modules directly under this one (in its attributes, or in lists, tuples and dicts
        there), not those inside them."""
        parents = []
        for name, m in list(self.named_modules())[1:]:
            if not any(name.startswith(p + ".") for p in parents):
                parents.append(name)
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def apply(self, fn):
        """Call fn(module) on every submodule, then on self (as PyTorch); returns self."""
        for m in reversed(list(self.modules())):
            fn(m)
        return self

    # ----- buffers: arrays that are state but not parameters (batch norm's running statistics) --
    def register_buffer(self, name, value, persistent=True):
        """Keep `value` (an array, copied into a Tensor that needs no gradient) as the attribute
        `name`; it is in `buffers()` and, unless `persistent=False` (as PyTorch's), in
        `state_dict()`; the optimizer never sees it."""
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"register_buffer: the name must be an identifier, got {name!r}")
        value = None if value is None else Tensor(value.data if isinstance(value, Tensor)
                                                  else host_array(value))
        _STRUCTURE[0] += 1
        object.__setattr__(self, "_structure", _STRUCTURE[0])
        object.__setattr__(self, name, value)
        if name not in self._buffer_names():
            self.__dict__["_buffers"] = self._buffer_names() + (name,)
        skipped = self.__dict__.get("_non_persistent", frozenset())
        self.__dict__["_non_persistent"] = skipped - {name} if persistent else skipped | {name}

    def _buffer_names(self):
        return self.__dict__.get("_buffers", ())

    def _persistent(self, name):
        return name not in self.__dict__.get("_non_persistent", ())

    def named_buffers(self):
        for prefix, m in self.named_modules():
            for name in m._buffer_names():
                value = getattr(m, name)
                if value is not None:
                    yield (f"{prefix}.{name}" if prefix else name), value

    def buffers(self):
        for _, b in self.named_buffers():
            yield b

    def to(self, dtype_or_device):
        """Move every parameter and buffer (and its gradient) to a device ("cpu", "cuda"), or cast
        the floating ones to a floating dtype; in place on the Tensors, which stay the same leaf
        Tensors. Returns self, as PyTorch's. Do it before making the optimizer: its state lives
        where, and in the dtype, the parameters were."""
        if _is_device_name(dtype_or_device):
            move = lambda a: backend.to_device(a, dtype_or_device)   # noqa: E731
            wanted = lambda t: True                                   # noqa: E731
        else:
            dtype = numpy_dtype(dtype_or_device)
            if dtype.kind != "f":
                raise TypeError(f"to: only floating dtypes are supported, got {dtype}")
            move = lambda a: a.astype(dtype)                          # noqa: E731
            wanted = lambda t: t.data.dtype.kind == "f" and t.data.dtype != dtype   # noqa: E731
        for t in list(self.parameters()) + list(self.buffers()):
            if wanted(t):
                data = move(t.data)
                if data is not t.data:
                    t.data = data
                    if t.grad is not None:
                        t.grad = move(t.grad)
                    mark_modified(t)
        return self

    def float(self):
        """Cast the floating parameters and buffers to float32 (as PyTorch's); returns self."""
        return self.to(np.float32)

    def double(self):
        return self.to(np.float64)

    def half(self):
        return self.to(np.float16)

    def add_module(self, name, module):
        """setattr(self, name, module), as PyTorch's (register_module is the same)."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"add_module: {type(module).__name__} is not a Module")
        setattr(self, name, module)

    register_module = add_module

    def register_parameter(self, name, param):
        """setattr(self, name, param) for a Parameter (or None), as PyTorch's."""
        if param is not None and not (isinstance(param, Tensor) and param._prim is None):
            raise TypeError(f"register_parameter: {name!r} must be a leaf Tensor (nn.Parameter) or None, "
                            f"got {type(param).__name__}")
        setattr(self, name, param)

    def get_submodule(self, target):
        """The module at the dotted path `target` ("" is self), as PyTorch's."""
        modules = dict(self.named_modules())
        if target not in modules:
            raise AttributeError(f"get_submodule: {type(self).__name__} has no submodule {target!r}")
        return modules[target]

    def get_parameter(self, target):
        params = dict(self.named_parameters())
        if target not in params:
            raise AttributeError(f"get_parameter: {type(self).__name__} has no parameter {target!r}")
        return params[target]

    # ----- modes and gradients ----------------------------------------------------------------
    def requires_grad_(self, requires_grad=True):
        """Set requires_grad on every parameter (False freezes them, for fine-tuning; they stay
        parameters), as PyTorch's; returns self."""
        for p in self.parameters():
            if requires_grad and p.data.dtype.kind != "f":
                continue
            p.requires_grad = bool(requires_grad)
        return self

    def train(self, mode=True):
        """Set the `training` flag on this module and every submodule; returns self."""
        for m in self.modules():
            m.training = bool(mode)
        return self

    def eval(self):
        return self.train(False)

    def zero_grad(self, set_to_none=True):
        """Set every parameter's `.grad` to None (the next backward starts from zero), or to
        zeros with `set_to_none=False`, as PyTorch."""
        replayed, _ = replayed_while_recording("Module.zero_grad()", self.zero_grad, set_to_none)
        if replayed:        # inside tt.compile: a line of the program, run on every call
            return
        for p in self.parameters():
            p.grad = None if set_to_none or p.grad is None else np.zeros_like(p.grad)

    # ----- saving and loading -------------------------------------------------------------------
    def state_dict(self):
        """{name: copy of the array} in PyTorch's order: each module's own parameters, its own
        (persistent) buffers, then its children's state (pre-order); then the generators."""
        rec = None if SHARED.quiet else STATE.recorder
        if rec is None:
            state = {name: t.data.copy() for name, t in self._state_tensors()}
        else:                  # inside tt.compile: each copy a line of the program
            state = {name: rec.value_copy(t) for name, t in self._state_tensors()}
        state.update((name, rng.state_of(g)) for name, g in self._named_generators())
        return state

    def _state_tensors(self):
        """(name, Tensor) of every parameter and persistent buffer, in state_dict's order; a tied
        weight under each of its names, as PyTorch's."""
        return [(name, t) for name, t in self._walk("", {id(self)}, aliases=True, buffers=True)
                if isinstance(t, Tensor)]

    def _named_generators(self):
        """(name, generator) for every np.random.Generator a module under this one owns (a Dropout
        made with rng=): its state is in state_dict() (6 uint64s), so a resume is bit-identical.
        The global generator (rng=None) belongs to no module: save tt.get_rng_state() for it."""
        for prefix, m in self.named_modules():
            for key, value in vars(m).items():
                if isinstance(value, np.random.Generator) and value is not rng._GLOBAL:
                    yield (f"{prefix}.{key}" if prefix else key), value

    def load_state_dict(self, state, strict=True):
        """Copy the arrays of `state` into the existing parameter and buffer arrays (in place, so
        an optimizer holding the parameters keeps working). Names and shapes must match exactly
        (with strict=False, names missing on either side are skipped). Returns the named pair
        (missing_keys, unexpected_keys), as PyTorch. Inside tt.compile, a line of the program:
        it copies the state dict's arrays of each call."""
        replayed, keys = replayed_while_recording("module.load_state_dict(...)", self.load_state_dict,
                                                  state, strict=strict)
        if replayed:
            return keys
        state = _upgraded(self, state)
        generators = dict(self._named_generators())   # optional: a PyTorch state dict has none
        states = {name: state[name] for name in generators if name in state}
        state = {name: v for name, v in state.items() if name not in states}
        params = dict(self._state_tensors())
        given = {id(p) for name, p in params.items() if name in state}
        missing = [name for name, p in params.items() if name not in state and id(p) not in given]
        unexpected = [name for name in state if name not in params]
        if strict and (missing or unexpected):
            raise KeyError(f"load_state_dict: missing parameters {missing}, unexpected names "
                           f"{unexpected}; this module has {list(params)}")
        params = {name: p for name, p in params.items() if name in state}
        # Check every shape before copying anything, so a failed load changes nothing.
        values = {name: _array(state[name]) for name in params}
        for name, p in params.items():
            value = values[name]
            if value.shape != p.shape:
                raise ValueError(f"load_state_dict: {name!r} has shape {value.shape} in the state "
                                 f"dict but {p.shape} in the module")
            if not np.can_cast(value.dtype, p.data.dtype, casting="same_kind"):
                raise TypeError(f"load_state_dict: {name!r} is {value.dtype} in the state dict but "
                                f"{p.data.dtype} in the module")
        for name, p in params.items():
            # across devices too (a CPU state dict into a GPU model)
            np.copyto(p.data, backend.to_device(values[name], backend.device_of(p.data)), casting="same_kind")
            mark_modified(p)
        for name, value in states.items():
            rng.set_state_of(generators[name], _array(value))
        return IncompatibleKeys(missing, unexpected)

    def __repr__(self):
        children = [(name, value) for name, value in vars(self).items() if isinstance(value, Module)]
        if not children:
            return f"{type(self).__name__}({self.extra_repr()})"
        lines = [f"  ({name}): " + repr(m).replace("\n", "\n  ") for name, m in children]
        return f"{type(self).__name__}(\n" + "\n".join(lines) + "\n)"

    def extra_repr(self):
        return ""


def _upgraded(module, state):
    """`state` with the names and layouts of older versions converted (nn.Linear's "W" (in, out)
    and "b" became PyTorch's "weight" (out, in) and "bias"), with a one-line notice."""
    converted = None
    for prefix, m in module.named_modules():
        upgrade = getattr(m, "_upgrade_state", None)
        if upgrade is not None:
            converted = dict(state) if converted is None else converted
            if upgrade(f"{prefix}." if prefix else "", converted):
                converted.setdefault("__upgraded__", []).append(prefix or type(m).__name__)
    if converted is None or "__upgraded__" not in converted:
        return state
    names = converted.pop("__upgraded__")
    warnings.warn(f"load_state_dict: converted the old Linear keys W/b (W as (in, out)) to PyTorch's "
                  f"weight (out, in)/bias for {', '.join(names)}; save again to update the file",
                  UserWarning, stacklevel=3)
    return converted


# ----- models as functions ------------------------------------------------------------------------
def functional_call(module, params, *args, **kwargs):
    """module(*args, **kwargs) with the parameters (and buffers) named in `params` (a dict as
    `named_parameters()` gives: name -> Tensor or array) in place of its own, which are left
    untouched, .grad included. Names it does not give keep the module's own. So

        loss = lambda p: loss_fn(tt.nn.functional_call(model, p, x), y)
        grads = tt.grad(loss)(dict(model.named_parameters()))     # {name: array}

    Examples
    --------
    >>> model = tt.nn.Linear(4, 3, rng=0)
    >>> params = dict(model.named_parameters())
    >>> tt.nn.functional_call(model, params, np.ones((2, 4))).shape
    (2, 3)
    """
    own = dict(module.named_parameters())
    own.update(module.named_buffers())
    unknown = [name for name in params if name not in own]
    if unknown:
        raise KeyError(f"functional_call: {unknown} are not parameters or buffers of this "
                       f"{type(module).__name__}; it has {list(own)}")
    swap = {id(own[name]): value if isinstance(value, (Tensor, BatchArray)) else Tensor(value)
            for name, value in params.items() if value is not own[name]}
    undo = []                  # (owner, key, old value), restored in reverse order
    try:
        for m in list(module.modules()):
            for key, value in list(vars(m).items()):
                new = _swapped(value, swap, undo)
                if new is not value:
                    undo.append((m.__dict__, key, value))
                    m.__dict__[key] = new
        return module(*args, **kwargs)
    finally:
        for owner, key, old in reversed(undo):
            owner[key] = old


def _swapped(value, swap, undo):
    """`value` with each Tensor whose id is in `swap` replaced: lists and dicts in place (noted
    in `undo`), tuples rebuilt. Modules are left alone (functional_call visits each one)."""
    if isinstance(value, Tensor):
        return swap.get(id(value), value)
    if isinstance(value, (list, dict)):
        for key, item in list(enumerate(value) if isinstance(value, list) else value.items()):
            new = _swapped(item, swap, undo)
            if new is not item:
                undo.append((value, key, item))
                value[key] = new
        return value
    if isinstance(value, tuple):
        items = [_swapped(item, swap, undo) for item in value]
        if all(a is b for a, b in zip(items, value)):
            return value
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    return value
