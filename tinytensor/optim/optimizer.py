"""Optimizers: the weight-update step of the SGD loop, with PyTorch's exact update rules.

    opt = tt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for xb, yb in batches:
        loss = loss_fn(model(xb), yb)   # 1. forward
        opt.zero_grad()
        loss.backward()                 # 2. backward
        opt.step()                      # 3. update: p <- p - lr * g

As in PyTorch, `params` is an iterable of parameters or of dicts (parameter groups, each with
its own hyperparameters: `[{"params": body, "lr": 0.1}, {"params": head}]`), kept in
`opt.param_groups`; per-parameter state (momentum buffers, Adam's moments and step count) is
in `opt.state[p]`, and `state_dict()` / `load_state_dict()` save and restore both.

`step()` works on the raw arrays (`p.data`, `p.grad`), in place and outside the tape: it
creates no Tensor, records nothing, and parameters stay leaves (each write is announced with
`mark_modified`, so a backward through a value saved before the step raises). Hyperparameters
are read as Python floats and state buffers are in the parameter's dtype, so float32
parameters stay float32 (NumPy 2 would promote float32 * np.float64 to float64).
"""

import copy
import math
import os
import sys
from numbers import Integral, Real

import numpy as np

from .. import backend
from ..nn.module import _is_parameter
from ..state import SHARED, STATE, replayed_while_recording
from ..tensor import Tensor, mark_modified
from ..torch_interop import host_array


def _number(name, value, low=0.0, high=math.inf, high_open=False):
    """A hyperparameter as a Python float, checked against [low, high] (or [low, high))."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if not (low <= value <= high) or (high_open and value == high):
        interval = f"[{low}, {high}{')' if high_open else ']'}"
        raise ValueError(f"invalid {name}: {value} (must lie in {interval})")
    return value


def _betas(betas):
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise ValueError(f"betas must be a pair (beta1, beta2), got {betas!r}")
    return (_number("beta1", betas[0], high=1.0, high_open=True),
            _number("beta2", betas[1], high=1.0, high_open=True))


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))     # tinytensor/


def _refuse_read_while_recording(what):
    """User code reading an optimizer's state while tt.compile records: refused (the state is
    what the steps write in place on every call; the program would keep this call's values)."""
    if SHARED.quiet or STATE.recorder is None:
        return
    if not sys._getframe(2).f_code.co_filename.startswith(_PACKAGE):
        raise RuntimeError(
            f"tt.compile: {what} inside a compiled function reads the optimizer's state, which its "
            f"steps update in place on every call; the program would keep this call's values. Read "
            f"it outside the compiled function (after the call), or call the function uncompiled")


class Optimizer:
    """Parameter groups (`param_groups`: dicts with "params" and the hyperparameters) and
    per-parameter state (`state`: {parameter: dict}). Subclasses define `_check(group)`
    (validate and normalise one group's hyperparameters) and `_update(p, g, state, group)`.

    Examples
    --------
    >>> w = tt.tensor([1.0, 2.0], requires_grad=True)
    >>> opt = tt.optim.SGD([{'params': [w], 'lr': 0.5}], lr=0.1)
    >>> opt.param_groups[0]['lr']
    0.5
    >>> sorted(opt.state_dict())
    ['param_groups', 'state']
    """

    @property
    def state(self):
        """{parameter: {name: array or number}}: what the steps keep per parameter."""
        _refuse_read_while_recording("opt.state")
        return self._state

    @state.setter
    def state(self, value):
        self._state = value

    def __init__(self, params, defaults):
        if isinstance(params, Tensor):
            raise TypeError("params must be an iterable of Tensors (e.g. model.parameters()), "
                            "not a single Tensor: wrap it in a list")
        self.defaults = dict(defaults)
        self.param_groups = []
        self.state = {}
        groups = list(params)
        if not groups:
            raise ValueError("the optimizer got an empty parameter list")
        if not all(isinstance(g, dict) for g in groups):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def add_param_group(self, group):
        """Add a group: {"params": iterable of parameters, hyperparameter: value, ...}; the
        hyperparameters it leaves out take the optimizer's defaults."""
        if not isinstance(group, dict) or "params" not in group:
            raise TypeError(f"a parameter group must be a dict with a 'params' entry, got {group!r}")
        params = group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
        taken = {id(p) for g in self.param_groups for p in g["params"]}
        kept, seen = [], set()
        for i, p in enumerate(params):
            if not isinstance(p, Tensor):
                raise TypeError(f"parameter {i} is a {type(p).__name__}, not a tt.Tensor")
            if not p.requires_grad and not _is_parameter(p):   # a Module's frozen parameter is fine
                raise ValueError(f"parameter {i} (shape {p.shape}) does not require grad")
            if p._prim is not None:
                raise ValueError(f"parameter {i} (shape {p.shape}) is computed from other tensors; "
                                 f"an optimizer can only update leaves")
            if id(p) in taken:
                raise ValueError(f"parameter {i} (shape {p.shape}) is already in another parameter group")
            if id(p) not in seen:      # a parameter given twice is updated once
                seen.add(id(p))
                kept.append(p)
        if not kept:
            raise ValueError("the optimizer got an empty parameter list")
        unknown = sorted(set(group) - set(self.defaults) - {"params"})
        if unknown:
            raise TypeError(f"{type(self).__name__} has no hyperparameter(s) {unknown}; it takes "
                            f"{sorted(self.defaults)}")
        full = {**self.defaults, **{k: v for k, v in group.items() if k != "params"}}
        self.param_groups.append({"params": kept, **self._check(full)})

    @property
    def params(self):
        """Every parameter, group by group."""
        return [p for group in self.param_groups for p in group["params"]]

    def zero_grad(self, set_to_none=True):
        """Set every parameter's `.grad` to None, as PyTorch does by default (or to zeros)."""
        if not SHARED.quiet and STATE.recorder is not None:   # tt.compile is recording: a line of
            replayed_while_recording("optimizer.zero_grad()", self.zero_grad, set_to_none)   # the
            return                                               # program, run on every call
        for group in self.param_groups:
            for p in group["params"]:
                p.grad = None if set_to_none or p.grad is None else np.zeros_like(p.grad)

    def step(self, closure=None):
        """One update of every parameter that has a gradient. `closure` (optional, as PyTorch)
        re-evaluates the loss and is called first; its result is returned."""
        if not SHARED.quiet and STATE.recorder is not None:   # tt.compile is recording
            if closure is not None:
                raise RuntimeError("tt.compile: optimizer.step(closure) inside a compiled function: "
                                   "the closure's loss and backward would run outside the program. "
                                   "Call the closure's body in the compiled function, then "
                                   "optimizer.step()")
            replayed_while_recording("optimizer.step()", self.step)   # a line of the program
            return None
        loss = None if closure is None else closure()
        states, update = self._state, self._update
        for group in self.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                if type(g) is not np.ndarray and isinstance(g, Tensor):   # p.grad = a Tensor, as
                    g = g.data                                           # PyTorch lets one set it
                if g.shape != p.data.shape:
                    raise ValueError(f"a parameter has shape {p.shape} but its grad has shape {g.shape}")
                state = states.get(p)
                if state is None:
                    state = states[p] = {}
                update(p, g, state, group)
                mark_modified(p)
        return loss

    def _check(self, group):
        raise NotImplementedError

    def _update(self, p, g, state, group):
        raise NotImplementedError

    # ----- saving and restoring ----------------------------------------------------------------
    def state_dict(self):
        """{"state": {index: {name: array or number}}, "param_groups": [{hyperparameters...,
        "params": [indices]}]}, as PyTorch: parameters are numbered in group order. Copies."""
        _refuse_read_while_recording("opt.state_dict()")
        index = {id(p): i for i, p in enumerate(self.params)}
        state = {index[id(p)]: {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in s.items()}
                 for p, s in self._state.items() if id(p) in index}
        groups = [{**{k: copy.deepcopy(v) for k, v in g.items() if k != "params"},
                   "params": [index[id(p)] for p in g["params"]]} for g in self.param_groups]
        return {"state": dict(sorted(state.items())), "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Restore hyperparameters and state saved by `state_dict()` from an optimizer over
        parameters of the same shapes, in the same groups. Arrays are copied, in each
        parameter's dtype. Inside tt.compile, a line of the program (of a state dict held outside)."""
        replayed, _ = replayed_while_recording("optimizer.load_state_dict(...)", self.load_state_dict,
                                               state_dict)
        if replayed:
            return
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups) or any(
                len(g["params"]) != len(mine["params"]) for g, mine in zip(groups, self.param_groups)):
            raise ValueError(f"load_state_dict: the saved state has groups of sizes "
                             f"{[len(g['params']) for g in groups]}, this optimizer "
                             f"{[len(g['params']) for g in self.param_groups]}")
        params = self.params
        new_state = {}
        for key, saved in state_dict["state"].items():
            i = int(key)
            if not isinstance(key, Integral) and str(i) != str(key):
                raise ValueError(f"load_state_dict: state key {key!r} is not a parameter index")
            p = params[i]
            entry = {}
            for name, value in saved.items():
                value = host_array(value)                  # a torch tensor, converted once
                if name == "step" and np.ndim(_plain(value)) == 0:
                    value = _count(_plain(value))          # PyTorch keeps it as a 0-d tensor
                elif isinstance(value, Tensor) or backend.is_array(value):
                    value = backend.to_device(backend.copy(value.data if isinstance(value, Tensor) else value,
                                                           p.dtype), backend.device_of(p.data))
                    if value.shape != p.shape:
                        raise ValueError(f"load_state_dict: state {name!r} of parameter {i} has shape "
                                         f"{value.shape}, the parameter {p.shape}")
                entry[name] = value
            new_state[p] = entry
        groups = [_without_torch_only(g, type(self).__name__, self.defaults) for g in groups]
        checked = [self._check({**mine, **{k: v for k, v in g.items() if k != "params"}})
                   for g, mine in zip(groups, self.param_groups)]     # all checked before any change
        for mine, group in zip(self.param_groups, checked):
            mine.update({k: v for k, v in group.items() if k != "params"})
        self.state = new_state

    def __repr__(self):
        lines = [f"{type(self).__name__} ("]
        for i, g in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {k}: {v}" for k, v in g.items() if k != "params"]
        return "\n".join(lines + [")"])


def _plain(value):
    return value.data if isinstance(value, Tensor) else value


def _count(value):
    """A step count saved as a number or a 0-d array (PyTorch's): a Python int when whole."""
    value = float(value)
    return int(value) if value.is_integer() else value


# PyTorch's group options that change nothing at their defaults: dropped when a PyTorch optimizer's
# state_dict() is loaded; any other value is a behaviour tinytensor does not have, so it is refused.
_TORCH_ONLY = {"foreach": (None, False), "maximize": (False,), "capturable": (False,),
               "differentiable": (False,), "fused": (None, False),
               "decoupled_weight_decay": (False,)}


def _without_torch_only(group, name, defaults):
    out = {}
    for k, v in group.items():
        if k in _TORCH_ONLY and k not in defaults:
            if v not in _TORCH_ONLY[k] and not (k == "decoupled_weight_decay" and name == "AdamW"):
                raise ValueError(f"{name}.load_state_dict: the saved group has {k}={v!r}, a PyTorch "
                                 f"option tinytensor does not implement (only {_TORCH_ONLY[k]})")
            continue
        out[k] = host_array(v) if k != "params" else v
    return out


class SGD(Optimizer):
    """Stochastic gradient descent, as torch.optim.SGD. Per parameter p with gradient grad:
        g = grad + weight_decay * p
        buf = g (first step), else buf = momentum * buf + (1 - dampening) * g   (momentum != 0)
        g = g + momentum * buf if nesterov else buf                              (momentum != 0)
        p = p - lr * g

    Examples
    --------
    >>> w = tt.tensor([1.0, 2.0], requires_grad=True)
    >>> opt = tt.optim.SGD([w], lr=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> w.data
    array([0.8, 1.6])
    """

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov))

    def _check(self, group):
        group = dict(group, lr=_number("lr", group["lr"]), momentum=_number("momentum", group["momentum"]),
                     dampening=_number("dampening", group["dampening"]),
                     weight_decay=_number("weight_decay", group["weight_decay"]),
                     nesterov=bool(group["nesterov"]))
        if group["nesterov"] and (group["momentum"] == 0 or group["dampening"] != 0):
            raise ValueError("nesterov=True requires a momentum > 0 and zero dampening")
        return group

    def _update(self, p, g, state, group):
        momentum, weight_decay = group["momentum"], group["weight_decay"]
        if weight_decay:
            g = g + weight_decay * p.data          # a new array: the user's .grad is left alone
        if momentum:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = backend.copy(g, p.dtype)   # a copy, on p's device
            else:
                buf *= momentum
                if group["dampening"]:
                    buf += (1 - group["dampening"]) * g
                else:                              # (1 - 0) * g is g: a pass and a temporary less
                    buf += g
            g = g + momentum * buf if group["nesterov"] else buf
        p.data -= group["lr"] * g


class Adam(Optimizer):
    """Adam, as torch.optim.Adam (weight decay added to the gradient: L2, not decoupled).
    Per parameter p with gradient grad, at its own step t = 1, 2, ...:
        g = grad + weight_decay * p
        m = m + (1 - beta1) * (g - m)              (torch's lerp)
        v = beta2 * v + (1 - beta2) * g**2
        vmax = max(vmax, v), used for v            (amsgrad=True)
        p = p - lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)

    Examples
    --------
    >>> w = tt.tensor([1.0, 2.0], requires_grad=True)
    >>> opt = tt.optim.Adam([w], lr=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> w.data
    array([0.9, 1.9])
    """

    _decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      amsgrad=amsgrad))

    def _check(self, group):
        return dict(group, lr=_number("lr", group["lr"]), betas=_betas(group["betas"]),
                    eps=_number("eps", group["eps"]),
                    weight_decay=_number("weight_decay", group["weight_decay"]),
                    amsgrad=bool(group["amsgrad"]))

    def _update(self, p, g, state, group):
        lr, weight_decay = group["lr"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        if not state:
            state["step"] = 0
            state["exp_avg"] = np.zeros_like(p.data)       # first moment, in p's dtype
            state["exp_avg_sq"] = np.zeros_like(p.data)    # second moment
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = np.zeros_like(p.data)
        if weight_decay:
            if self._decoupled:
                p.data *= 1 - lr * weight_decay            # AdamW: decay the weights directly
            else:
                g = g + weight_decay * p.data
        state["step"] += 1
        t = state["step"]
        m, v = state["exp_avg"], state["exp_avg_sq"]
        m += (1 - beta1) * (g - m)
        v *= beta2
        v += (1 - beta2) * (g * g)
        if group["amsgrad"]:
            np.maximum(state["max_exp_avg_sq"], v, out=state["max_exp_avg_sq"])
            v = state["max_exp_avg_sq"]
        step_size = lr / (1 - beta1 ** t)                  # bias corrections: Python floats
        denom = np.sqrt(v) / math.sqrt(1 - beta2 ** t)
        denom += group["eps"]
        p.data -= step_size * (m / denom)


class AdamW(Adam):
    """Adam with decoupled weight decay, as torch.optim.AdamW: before Adam's update (with no
    L2 term), p = p * (1 - lr * weight_decay). weight_decay defaults to 1e-2.

    Examples
    --------
    >>> w = tt.tensor([1.0, 2.0], requires_grad=True)
    >>> opt = tt.optim.AdamW([w], lr=0.1, weight_decay=0.0)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> w.data
    array([0.9, 1.9])
    """

    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad)


class RMSprop(Optimizer):
    """RMSprop, as torch.optim.RMSprop. Per parameter p with gradient grad:
        g = grad + weight_decay * p
        v = alpha * v + (1 - alpha) * g**2
        avg = sqrt(v - gavg**2) + eps with gavg = gavg + (1 - alpha) (g - gavg)   (centered)
              sqrt(v) + eps                                                        (otherwise)
        buf = momentum * buf + g / avg;  p = p - lr * buf                           (momentum > 0)
        p = p - lr * g / avg                                                        (otherwise)

    Examples
    --------
    >>> w = tt.tensor([1.0, 2.0], requires_grad=True)
    >>> opt = tt.optim.RMSprop([w], lr=0.01)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> w.data.round(4)
    array([0.9, 1.9])
    """

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0,
                 centered=False):
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                                      momentum=momentum, centered=centered))

    def _check(self, group):
        return dict(group, lr=_number("lr", group["lr"]), alpha=_number("alpha", group["alpha"], high=1.0),
                    eps=_number("eps", group["eps"]),
                    weight_decay=_number("weight_decay", group["weight_decay"]),
                    momentum=_number("momentum", group["momentum"]), centered=bool(group["centered"]))

    def _update(self, p, g, state, group):
        alpha, weight_decay, momentum = group["alpha"], group["weight_decay"], group["momentum"]
        if not state:
            state["step"] = 0
            state["square_avg"] = np.zeros_like(p.data)
            if momentum:
                state["momentum_buffer"] = np.zeros_like(p.data)
            if group["centered"]:
                state["grad_avg"] = np.zeros_like(p.data)
        state["step"] += 1
        if weight_decay:
            g = g + weight_decay * p.data
        v = state["square_avg"]
        v *= alpha
        v += (1 - alpha) * (g * g)
        if group["centered"]:
            gavg = state["grad_avg"]
            gavg += (1 - alpha) * (g - gavg)
            avg = np.sqrt(v - gavg * gavg)
        else:
            avg = np.sqrt(v)
        avg += group["eps"]
        if momentum:
            buf = state.setdefault("momentum_buffer", np.zeros_like(p.data))
            buf *= momentum
            buf += g / avg
            p.data -= group["lr"] * buf
        else:
            p.data -= group["lr"] * (g / avg)
