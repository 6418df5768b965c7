"""Hooks, as PyTorch's: `Tensor.register_hook(fn)` (a gradient passes through fn during the
reverse sweep) and the handle every `register_*hook` returns.

A Tensor's hooks live here, keyed by the Tensor's identity (an entry goes with its Tensor), not
on the Tensor: the sweep checks for hooks once per sweep, and per node only while some hook is
registered anywhere, so code without hooks pays nothing.
"""

import itertools
import weakref
from collections.abc import MutableMapping

import numpy as np

from . import backend
from .tensor import Tensor, _make
from .weakid import IdentityWeakMap

_ids = itertools.count()


class RemovableHandle:
    """What `register_hook`, `register_forward_hook` and `register_forward_pre_hook` return:
    `handle.remove()` takes the hook out (twice is harmless); `with handle:` removes it on exit."""

    def __init__(self, hooks, key, on_empty=None):
        self._hooks = weakref.ref(hooks) if hasattr(hooks, "__weakref__") else (lambda: hooks)
        self.id = key
        self._on_empty = on_empty

    def remove(self):
        hooks = self._hooks()
        if hooks is not None and self.id in hooks:
            del hooks[self.id]
            if not hooks and self._on_empty is not None:
                self._on_empty()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class HookDict(MutableMapping):
    """An ordered {id: hook}; not a dict, so a Module's walk for parameters never looks inside."""

    def __init__(self):
        self._items = {}

    def __getitem__(self, key):
        return self._items[key]

    def __setitem__(self, key, value):
        self._items[key] = value

    def __delitem__(self, key):
        del self._items[key]

    def __iter__(self):
        return iter(list(self._items))

    def __len__(self):
        return len(self._items)

    def prepend(self, key, value):
        self._items = {key: value, **self._items}


class _TensorHooks(IdentityWeakMap):
    """node -> HookDict, by identity (Tensor.__eq__ is elementwise); an entry goes with its node."""

    def setdefault(self, node):
        hooks = self.get(node)
        if hooks is None:
            hooks = self[node] = HookDict()
        return hooks

    def discard(self, node):
        self.pop(node)


TENSOR_HOOKS = _TensorHooks()


def register_hook(self, hook):
    """Tensor.register_hook(hook): during backward, hook(grad) is called with this Tensor's
    gradient (a Tensor, complete: every contribution summed) before it is passed on or
    accumulated into `.grad`; it may return a replacement gradient (a Tensor or array of the
    same shape) or None to keep it. Returns a handle with `remove()`. As PyTorch's."""
    if not callable(hook):
        raise TypeError(f"register_hook: expected a callable hook(grad), got {type(hook).__name__}")
    if not self.requires_grad:
        raise RuntimeError("register_hook: cannot register a hook on a tensor that does not require "
                           "grad (set requires_grad=True on the leaf, or register on a tensor computed "
                           "from one)")
    hooks = TENSOR_HOOKS.setdefault(self)
    key = next(_ids)
    hooks[key] = hook
    ref = weakref.ref(self)
    return RemovableHandle(hooks, key, on_empty=lambda: ref() is not None and TENSOR_HOOKS.discard(ref()))


Tensor.register_hook = register_hook


def run_tensor_hooks(node, g):
    """The sweep's call: `g` through node's hooks, in registration order (none: g itself)."""
    hooks = TENSOR_HOOKS.get(node)
    if not hooks:
        return g
    recorded = isinstance(g, Tensor)           # create_graph: the gradient is on the tape
    for hook in list(hooks.values()):
        if recorded:
            arg = g
        else:
            arg = _make(g)
        new = hook(arg)
        if new is None:
            continue
        if recorded and isinstance(new, Tensor):
            value = new
        else:
            value = new.data if isinstance(new, Tensor) else backend.asarray(new, like=g)
            value = value.astype(g.dtype, copy=False)
        if np.shape(value) != tuple(node.shape):
            raise ValueError(f"register_hook: the hook {getattr(hook, '__name__', hook)!r} returned a "
                             f"gradient of shape {np.shape(value)} for a tensor of shape "
                             f"{tuple(node.shape)}; return one of the same shape, or None")
        g = value
    return g
