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

has the parameters "layers.0.W", "layers.0.b", "layers.1.W", "layers.1.b".
"""

import numpy as np

from .. import backend
from ..tensor import Tensor, _is_device_name


def _is_parameter(value):
    # A leaf that needs a gradient. A Tensor computed from parameters (a cached activation,
    # say) is not one: it is on the tape, and an optimizer must not update it.
    return isinstance(value, Tensor) and value.requires_grad and value._prim is None


class Module:
    """Base class: subclasses set attributes in `__init__` and define `forward`."""

    # A class attribute, so a subclass that forgets `super().__init__()` still works.
    training = True

    def __init__(self):
        self.training = True

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} must define forward()")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    # ----- finding parameters and submodules ----------------------------------------------------
    def _walk(self, prefix, seen):
        """Yield (name, value) for every parameter and Module reachable from self's attributes,
        depth first in attribute order. `seen` holds the ids already yielded: a parameter or a
        module shared between two places is yielded once, under its first name."""
        stack = [(f"{prefix}{key}", value) for key, value in vars(self).items()]
        stack.reverse()
        while stack:           # a stack, not recursion: containers may nest arbitrarily deep
            name, value = stack.pop()
            if _is_parameter(value) or isinstance(value, Module):
                if id(value) in seen:
                    continue
                seen.add(id(value))
                yield name, value
                if isinstance(value, Module):
                    children = list(vars(value).items())
                else:
                    continue
            elif isinstance(value, (list, tuple)):
                children = list(enumerate(value))
            elif isinstance(value, dict):
                children = list(value.items())
            else:
                continue
            stack.extend((f"{name}.{key}", child) for key, child in reversed(children))

    def named_parameters(self):
        """(name, parameter) pairs, names as in PyTorch ("0.W", "encoder.layers.1.b")."""
        for name, value in self._walk("", {id(self)}):
            if isinstance(value, Tensor):
                yield name, value

    def parameters(self):
        """Every parameter once (a generator, as in PyTorch: pass it straight to an optimizer)."""
        for _, p in self.named_parameters():
            yield p

    def modules(self):
        """This module and every Module under it, each once."""
        yield self
        for _, value in self._walk("", {id(self)}):
            if isinstance(value, Module):
                yield value

    # ----- modes and gradients ----------------------------------------------------------------
    def train(self, mode=True):
        """Set the `training` flag on this module and every submodule; returns self."""
        for m in self.modules():
            m.training = bool(mode)
        return self

    def eval(self):
        return self.train(False)

    def zero_grad(self):
        """Set every parameter's `.grad` to None (the next backward starts from zero)."""
        for p in self.parameters():
            p.grad = None

    def to(self, device_or_dtype):
        """Move every parameter and its gradient to a device ("cpu", "cuda"), or cast them to a
        float dtype; returns the module, as PyTorch's. Parameters stay the same leaf Tensors.
        Do it before making the optimizer: its state lives where the parameters were."""
        for p in self.parameters():
            if _is_device_name(device_or_dtype):
                move = lambda a: backend.to_device(a, device_or_dtype)   # noqa: E731
            else:
                move = lambda a: a.astype(device_or_dtype, copy=False)  # noqa: E731
            p.data = move(p.data)
            if p.grad is not None:
                p.grad = move(p.grad)
        return self

    # ----- saving and loading -------------------------------------------------------------------
    def state_dict(self):
        """{name: copy of the parameter's array}, in `named_parameters` order."""
        return {name: p.data.copy() for name, p in self.named_parameters()}

    def load_state_dict(self, state):
        """Copy the arrays of `state` into the existing parameter arrays (in place, so an
        optimizer holding the parameters keeps working). Names and shapes must match exactly."""
        params = dict(self.named_parameters())
        missing = [name for name in params if name not in state]
        unexpected = [name for name in state if name not in params]
        if missing or unexpected:
            raise KeyError(f"load_state_dict: missing parameters {missing}, unexpected names "
                           f"{unexpected}; this module has {list(params)}")
        # Check every shape before copying anything, so a failed load changes nothing.
        for name, p in params.items():
            value = backend.asarray(state[name])
            if value.shape != p.shape:
                raise ValueError(f"load_state_dict: {name!r} has shape {value.shape} in the state "
                                 f"dict but {p.shape} in the module")
        for name, p in params.items():   # across devices too (a CPU state dict into a GPU model)
            np.copyto(p.data, backend.to_device(backend.asarray(state[name]), p.device), casting="same_kind")

    def __repr__(self):
        children = [(name, value) for name, value in vars(self).items() if isinstance(value, Module)]
        if not children:
            return f"{type(self).__name__}({self.extra_repr()})"
        lines = [f"  ({name}): " + repr(m).replace("\n", "\n  ") for name, m in children]
        return f"{type(self).__name__}(\n" + "\n".join(lines) + "\n)"

    def extra_repr(self):
        return ""
