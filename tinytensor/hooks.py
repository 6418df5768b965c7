"""Hooks, as PyTorch's: `Tensor.register_hook(fn)` (a gradient passes through fn during the
reverse sweep) and the handle every `register_*hook` returns.

A Tensor's hooks live here, keyed by the Tensor's identity (an entry goes with its Tensor), not
on the Tensor: the sweep checks for hooks once per sweep, and per node only while some hook is
registered anywhere, so code without hooks pays nothing. The sweep's call is
tape.run_tensor_hooks; Tensor.register_hook is `register_hook` below. This module imports no
Tensor: it sits below tensor.py and tape.py, outside their cycle.
"""

import itertools
import weakref
from collections.abc import MutableMapping

from .weakid import IdentityWeakMap

_ids = itertools.count()


class RemovableHandle:
    """What `register_hook`, `register_forward_hook` and `register_forward_pre_hook` return:
    `handle.remove()` takes the hook out (twice is harmless); `with handle:` removes it on exit."""

    def __init__(self, hooks, key, on_empty=None, on_remove=None):
        self._hooks = weakref.ref(hooks) if hasattr(hooks, "__weakref__") else (lambda: hooks)
        self.id = key
        self._on_empty = on_empty
        self._on_remove = on_remove

    def remove(self):
        hooks = self._hooks()
        if hooks is not None and self.id in hooks:
            del hooks[self.id]
            if self._on_remove is not None:
                self._on_remove()
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
# Bumped whenever a hook is registered on or removed from a leaf Tensor (a parameter): a compiled
# program whose sweep ran such hooks (a whole training step's backward()) checks it on every call.
LEAF_HOOKS = [0]


def _leaf_hooks_changed():
    LEAF_HOOKS[0] += 1


# Tensors on which a hook (or retain_grad()) would not see every backward(): the message saying
# why (a result of a compiled call that another of its results is computed from)
NO_HOOKS = IdentityWeakMap()


def register_hook(self, hook):
    """Tensor.register_hook(hook): during backward, hook(grad) is called with this Tensor's
    gradient (a Tensor, complete: every contribution summed) before it is passed on or
    accumulated into `.grad`; it may return a replacement gradient (a Tensor or array of the
    same shape) or None to keep it. Returns a handle with `remove()`. As PyTorch's."""
    refused = NO_HOOKS.get(self)
    if refused is not None:
        raise RuntimeError(refused.format("register_hook(...)"))
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
    leaf = self._prim is None
    if leaf:
        _leaf_hooks_changed()
    return RemovableHandle(hooks, key, on_empty=lambda: ref() is not None and TENSOR_HOOKS.discard(ref()),
                           on_remove=_leaf_hooks_changed if leaf else None)

