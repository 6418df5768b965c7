"""Learning-rate schedules, as torch.optim.lr_scheduler: each sets `group["lr"]` of an
optimizer's parameter groups; call `step()` once per epoch, after the optimizer's steps.

    opt = tt.optim.SGD(model.parameters(), lr=0.1)
    sched = tt.optim.lr_scheduler.StepLR(opt, step_size=30, gamma=0.1)
    for epoch in range(100):
        train(...)            # opt.step() per batch
        sched.step()

Construction records each group's `initial_lr` and takes the first step (epoch 0), as PyTorch.
StepLR, ExponentialLR, LinearLR and CosineAnnealingLR use PyTorch's recursive (chainable) forms,
so schedulers stepped together compose as PyTorch's (cosine's alone equals the closed form
eta_min + (base_lr - eta_min) (1 + cos(pi t / T_max)) / 2 to rounding). ReduceLROnPlateau steps on a metric.
LambdaLR (closed form), MultiStepLR (recursive, chainable), OneCycleLR (per batch, cycles the
momentum or Adam's beta1 too), SequentialLR (one scheduler after another at milestones) and
ChainedScheduler (several at once) follow PyTorch's definitions.
"""

import math

from ..state import replayed_while_recording
from .optimizer import Optimizer

__all__ = [   # the public names: the API reference lists these (docs/_ext/tt_api.py)
    "LRScheduler", "StepLR", "ExponentialLR", "CosineAnnealingLR", "LinearLR", "ReduceLROnPlateau",
    "LambdaLR", "MultiStepLR", "OneCycleLR", "SequentialLR", "ChainedScheduler",
]


class LRScheduler:
    """The base of the schedules: `step()` sets each group's `lr`; `get_last_lr()` reads them.

    Examples
    --------
    A schedule of your own defines `get_lr()` from `self.base_lrs` and `self.last_epoch`:

    >>> class Halving(tt.optim.lr_scheduler.LRScheduler):
    ...     def get_lr(self):
    ...         return [lr * 0.5 ** self.last_epoch for lr in self.base_lrs]
    >>> opt = tt.optim.SGD([tt.tensor([1.0], requires_grad=True)], lr=1.0)
    >>> schedule = Halving(opt)
    >>> for _ in range(3):
    ...     opt.step()
    ...     schedule.step()
    ...
    >>> schedule.get_last_lr()
    [0.125]
    """
    def __init__(self, optimizer, last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(self).__name__}: expected a tt.optim optimizer, got "
                            f"{type(optimizer).__name__}")
        self.optimizer = optimizer
        for group in optimizer.param_groups:
            if last_epoch == -1:
                group.setdefault("initial_lr", group["lr"])
            elif "initial_lr" not in group:
                raise KeyError("resuming a schedule (last_epoch != -1) needs 'initial_lr' in every "
                               "parameter group; load the optimizer's state_dict first")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self.step()

    def get_lr(self):
        """The learning rates for epoch `self.last_epoch` (one per group)."""
        raise NotImplementedError

    def get_last_lr(self):
        return list(self._last_lr)

    def step(self):
        replayed, out = replayed_while_recording("scheduler.step()", self.step)
        if replayed:        # inside tt.compile: a line of the program, run on every call
            return out
        self._step_count = getattr(self, "_step_count", 0) + 1
        self.last_epoch += 1
        for group, lr in zip(self.optimizer.param_groups, self.get_lr()):
            group["lr"] = float(lr)
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self):
        """Everything but the optimizer (save that with its own state_dict)."""
        return {k: (list(v) if isinstance(v, list) else v) for k, v in vars(self).items()
                if k != "optimizer"}

    def load_state_dict(self, state_dict):
        """Restore what state_dict() saved (inside tt.compile, a line of the program)."""
        replayed, _ = replayed_while_recording("scheduler.load_state_dict(...)", self.load_state_dict,
                                               state_dict)
        if not replayed:
            self.__dict__.update(state_dict)


class StepLR(LRScheduler):
    """lr = initial_lr * gamma ** (epoch // step_size).

    Examples
    --------
    >>> opt = tt.optim.SGD([tt.tensor([1.0], requires_grad=True)], lr=1.0)
    >>> schedule = tt.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    >>> for epoch in range(4):
    ...     opt.step()
    ...     schedule.step()
    >>> schedule.get_last_lr()
    [0.25]
    """

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        if int(step_size) < 1:
            raise ValueError(f"StepLR: step_size must be a positive int, got {step_size!r}")
        self.step_size, self.gamma = int(step_size), float(gamma)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        lrs = [group["lr"] for group in self.optimizer.param_groups]
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return lrs
        return [lr * self.gamma for lr in lrs]


class ExponentialLR(LRScheduler):
    """lr = initial_lr * gamma ** epoch.

    Examples
    --------
    >>> opt = tt.optim.SGD([tt.tensor([1.0], requires_grad=True)], lr=1.0)
    >>> schedule = tt.optim.lr_scheduler.ExponentialLR(opt, gamma=0.5)
    >>> for _ in range(2):
    ...     opt.step()
    ...     schedule.step()
    ...
    >>> schedule.get_last_lr()
    [0.25]
    """

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = float(gamma)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        lrs = [group["lr"] for group in self.optimizer.param_groups]
        return lrs if self.last_epoch == 0 else [lr * self.gamma for lr in lrs]


class CosineAnnealingLR(LRScheduler):
    """lr = eta_min + (initial_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2 when alone (past
    T_max it rises again, as PyTorch's); computed in PyTorch's chainable form (see get_lr).

    Examples
    --------
    >>> opt = tt.optim.SGD([tt.tensor([1.0], requires_grad=True)], lr=1.0)
    >>> schedule = tt.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=2)
    >>> for _ in range(2):
    ...     opt.step()
    ...     schedule.step()
    ...
    >>> schedule.get_last_lr()
    [0.0]
    """

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        if int(T_max) < 1:
            raise ValueError(f"CosineAnnealingLR: T_max must be a positive int, got {T_max!r}")
        self.T_max, self.eta_min = int(T_max), float(eta_min)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        """PyTorch's recursive (chainable) form: each step scales the distance to eta_min of the
        CURRENT lr by the ratio of consecutive cosine values, so a decay applied by another
        scheduler on the same optimizer (ChainedScheduler, or two schedulers stepped in turn)
        is kept instead of being undone."""
        t, T, eta = self.last_epoch, self.T_max, self.eta_min
        lrs = [group["lr"] for group in self.optimizer.param_groups]
        if t == 0:
            return lrs
        if getattr(self, "_step_count", 0) == 1:              # made with last_epoch > 0: the closed form
            return self._closed_form_lr()
        if (t - 1 - T) % (2 * T) == 0:                        # the restart past T_max, as PyTorch's
            rise = (1 - math.cos(math.pi / T)) / 2
            return [lr + (base - eta) * rise for lr, base in zip(lrs, self.base_lrs)]
        ratio = (1 + math.cos(math.pi * t / T)) / (1 + math.cos(math.pi * (t - 1) / T))
        return [ratio * (lr - eta) + eta for lr in lrs]

    def _closed_form_lr(self):
        cosine = (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
        return [self.eta_min + (base - self.eta_min) * cosine for base in self.base_lrs]


class LinearLR(LRScheduler):
    """The factor on initial_lr goes linearly from start_factor to end_factor over total_iters
    epochs, then stays (PyTorch's recursive form).

    Examples
    --------
    >>> opt = tt.optim.SGD([tt.tensor([1.0], requires_grad=True)], lr=1.0)
    >>> schedule = tt.optim.lr_scheduler.LinearLR(opt, start_factor=0.5, total_iters=2)
    >>> schedule.get_last_lr()
    [0.5]
    >>> for _ in range(2):
    ...     opt.step()
    ...     schedule.step()
    ...
    >>> schedule.get_last_lr()
    [1.0]
    """

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5, last_epoch=-1):
        if not (0 < start_factor <= 1 and 0 <= end_factor <= 1):
            raise ValueError(f"LinearLR: start_factor must lie in (0, 1] and end_factor in [0, 1], "
                             f"got {start_factor} and {end_factor}")
        self.start_factor, self.end_factor = float(start_factor), float(end_factor)
        self.total_iters = int(total_iters)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        lrs = [group["lr"] for group in self.optimizer.param_groups]
        if self.last_epoch == 0:
            return [lr * self.start_factor for lr in lrs]
        if self.last_epoch > self.total_iters:
            return lrs
        change = self.end_factor - self.start_factor
        factor = 1 + change / (self.total_iters * self.start_factor + (self.last_epoch - 1) * change)
        return [lr * factor for lr in lrs]


class ReduceLROnPlateau:
    """Multiply the learning rates by `factor` (not below `min_lr`) once the metric given to
    `step(metric)` has not improved for more than `patience` epochs; then wait `cooldown`
    epochs. Improvement, as PyTorch: mode "min" and threshold_mode "rel": metric < best *
    (1 - threshold); "abs": metric < best - threshold (mirrored for mode "max"). A change
    smaller than eps is not made.

    Examples
    --------
    >>> opt = tt.optim.SGD([tt.tensor([1.0], requires_grad=True)], lr=1.0)
    >>> schedule = tt.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=1)
    >>> for val_loss in [1.0, 1.0, 1.0]:
    ...     schedule.step(val_loss)
    ...
    >>> opt.param_groups[0]['lr']
    0.5
    """

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4,
                 threshold_mode="rel", cooldown=0, min_lr=0.0, eps=1e-8):
        if mode not in ("min", "max") or threshold_mode not in ("rel", "abs"):
            raise ValueError(f"ReduceLROnPlateau: mode must be 'min' or 'max' and threshold_mode "
                             f"'rel' or 'abs', got {mode!r} and {threshold_mode!r}")
        if not factor < 1.0:
            raise ValueError(f"ReduceLROnPlateau: factor must be below 1, got {factor}")
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"ReduceLROnPlateau: expected a tt.optim optimizer, got "
                            f"{type(optimizer).__name__}")
        self.optimizer = optimizer
        groups = optimizer.param_groups
        min_lrs = list(min_lr) if isinstance(min_lr, (list, tuple)) else [min_lr] * len(groups)
        if len(min_lrs) != len(groups):
            raise ValueError(f"ReduceLROnPlateau: {len(min_lrs)} min_lr values for {len(groups)} groups")
        self.min_lrs = [float(m) for m in min_lrs]
        self.mode, self.factor, self.patience = mode, float(factor), int(patience)
        self.threshold, self.threshold_mode = float(threshold), threshold_mode
        self.cooldown, self.eps = int(cooldown), float(eps)
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs = self.cooldown_counter = 0
        self.last_epoch = 0
        self._last_lr = [group["lr"] for group in groups]

    def is_better(self, a, best):
        rel = self.threshold_mode == "rel"
        if self.mode == "min":
            return a < (best * (1 - self.threshold) if rel else best - self.threshold)
        return a > (best * (1 + self.threshold) if rel else best + self.threshold)

    def step(self, metrics):
        replayed, out = replayed_while_recording("scheduler.step()", self.step, metrics)
        if replayed:        # inside tt.compile: refused for a metric computed there
            return out
        current = float(metrics.item() if hasattr(metrics, "item") else metrics)
        self.last_epoch += 1
        if self.is_better(current, self.best):
            self.best, self.num_bad_epochs = current, 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            for group, min_lr in zip(self.optimizer.param_groups, self.min_lrs):
                new_lr = max(group["lr"] * self.factor, min_lr)
                if group["lr"] - new_lr > self.eps:
                    group["lr"] = new_lr
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def get_last_lr(self):
        return list(self._last_lr)

    state_dict = LRScheduler.state_dict
    load_state_dict = LRScheduler.load_state_dict


# ----- round 3: LambdaLR, MultiStepLR, OneCycleLR, SequentialLR, ChainedScheduler ----------------
# Closed forms, used when SequentialLR starts a scheduler afresh at a milestone (PyTorch's step(0)).
StepLR._closed_form_lr = lambda self: [base * self.gamma ** (self.last_epoch // self.step_size)
                                       for base in self.base_lrs]
ExponentialLR._closed_form_lr = lambda self: [base * self.gamma ** self.last_epoch for base in self.base_lrs]
LinearLR._closed_form_lr = lambda self: [
    base * (self.start_factor + (self.end_factor - self.start_factor)
            * min(self.total_iters, self.last_epoch) / self.total_iters) for base in self.base_lrs]


def _restart(scheduler):
    """scheduler.step(0) in PyTorch: epoch 0 again, from the closed form where there is one."""
    scheduler.last_epoch = 0
    closed = getattr(scheduler, "_closed_form_lr", None)
    lrs = closed() if closed is not None else scheduler.get_lr()
    for group, lr in zip(scheduler.optimizer.param_groups, lrs):
        group["lr"] = float(lr)
    scheduler._last_lr = [group["lr"] for group in scheduler.optimizer.param_groups]


def _per_group(value, groups, name, what):
    if isinstance(value, (list, tuple)):
        if len(value) != len(groups):
            raise ValueError(f"{name}: expected {len(groups)} values of {what} (one per parameter "
                             f"group), got {len(value)}")
        return list(value)
    return [value] * len(groups)


class LambdaLR(LRScheduler):
    """lr = initial_lr * lr_lambda(epoch); `lr_lambda` is a function of the epoch, or a list with
    one per parameter group (as PyTorch's). Its state_dict leaves the functions out.

    Examples
    --------
    >>> opt = tt.optim.SGD([tt.tensor([1.0], requires_grad=True)], lr=1.0)
    >>> schedule = tt.optim.lr_scheduler.LambdaLR(opt, lambda epoch: 1 / (epoch + 1))
    >>> for _ in range(3):
    ...     opt.step()
    ...     schedule.step()
    ...
    >>> schedule.get_last_lr()
    [0.25]
    """

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        groups = optimizer.param_groups if isinstance(optimizer, Optimizer) else []
        self.lr_lambdas = _per_group(lr_lambda, groups, "LambdaLR", "lr_lambda")
        if not all(callable(f) for f in self.lr_lambdas):
            raise TypeError("LambdaLR: lr_lambda must be a function of the epoch (or a list of them)")
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [base * f(self.last_epoch) for base, f in zip(self.base_lrs, self.lr_lambdas)]

    def state_dict(self):
        state = super().state_dict()
        state.pop("lr_lambdas")
        return state


class MultiStepLR(LRScheduler):
    """lr = initial_lr * gamma ** (number of milestones reached); PyTorch's recursive
    (chainable) form: at each milestone the current lr is multiplied by gamma (by gamma ** k for
    a milestone listed k times).

    Examples
    --------
    >>> opt = tt.optim.SGD([tt.tensor([1.0], requires_grad=True)], lr=1.0)
    >>> schedule = tt.optim.lr_scheduler.MultiStepLR(opt, milestones=[1, 3], gamma=0.1)
    >>> for _ in range(3):
    ...     opt.step()
    ...     schedule.step()
    ...
    >>> [round(lr, 6) for lr in schedule.get_last_lr()]
    [0.01]
    """

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        milestones = [int(m) for m in milestones]
        if milestones != sorted(milestones):
            raise ValueError(f"MultiStepLR: milestones must be increasing, got {milestones}")
        self.milestones, self.gamma = milestones, float(gamma)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        lrs = [group["lr"] for group in self.optimizer.param_groups]
        hits = self.milestones.count(self.last_epoch)
        return lrs if hits == 0 else [lr * self.gamma ** hits for lr in lrs]

    def _closed_form_lr(self):
        from bisect import bisect_right
        return [base * self.gamma ** bisect_right(self.milestones, self.last_epoch) for base in self.base_lrs]


class OneCycleLR(LRScheduler):
    """The 1cycle policy (Smith and Topin), as PyTorch's OneCycleLR, stepped once per batch: the lr
    rises from max_lr / div_factor to max_lr over the first pct_start of total_steps, then anneals
    to max_lr / div_factor / final_div_factor (three_phase: back to the initial lr first, then
    down); anneal_strategy "cos" (default) or "linear". With cycle_momentum (default) the momentum
    (SGD, RMSprop) or Adam's beta1 moves the other way, between max_momentum and base_momentum.
    Stepping past total_steps raises, as PyTorch's.

    Examples
    --------
    >>> opt = tt.optim.SGD([tt.tensor([1.0], requires_grad=True)], lr=1.0, momentum=0.9)
    >>> schedule = tt.optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=5)
    >>> lrs = [schedule.get_last_lr()[0]]
    >>> for _ in range(4):
    ...     opt.step()
    ...     schedule.step()
    ...     lrs.append(schedule.get_last_lr()[0])
    ...
    >>> [round(lr, 4) for lr in lrs]        # up from max_lr / 25, then down to nearly 0
    [0.04, 0.9505, 0.6113, 0.1883, 0.0]
    """

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None,
                 pct_start=0.3, anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85,
                 max_momentum=0.95, div_factor=25.0, final_div_factor=1e4, three_phase=False,
                 last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"OneCycleLR: expected a tt.optim optimizer, got {type(optimizer).__name__}")
        groups = optimizer.param_groups
        if total_steps is not None:
            if int(total_steps) <= 0:
                raise ValueError(f"OneCycleLR: total_steps must be a positive int, got {total_steps}")
            self.total_steps = int(total_steps)
        elif epochs is not None and steps_per_epoch is not None:
            if int(epochs) <= 0 or int(steps_per_epoch) <= 0:
                raise ValueError(f"OneCycleLR: epochs and steps_per_epoch must be positive, got "
                                 f"{epochs} and {steps_per_epoch}")
            self.total_steps = int(epochs) * int(steps_per_epoch)
        else:
            raise ValueError("OneCycleLR: give total_steps, or both epochs and steps_per_epoch")
        if not 0 <= pct_start <= 1:
            raise ValueError(f"OneCycleLR: pct_start must lie in [0, 1], got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"OneCycleLR: anneal_strategy must be 'cos' or 'linear', got "
                             f"{anneal_strategy!r}")
        T, pct = self.total_steps, float(pct_start)
        if three_phase:
            self._phases = [(pct * T - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                            (2 * pct * T - 2, "max_lr", "initial_lr", "base_momentum", "max_momentum"),
                            (T - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum")]
        else:
            self._phases = [(pct * T - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                            (T - 1, "max_lr", "min_lr", "base_momentum", "max_momentum")]
        self.anneal_strategy, self.cycle_momentum = anneal_strategy, bool(cycle_momentum)
        if last_epoch == -1:
            for group, lr in zip(groups, _per_group(max_lr, groups, "OneCycleLR", "max_lr")):
                group["initial_lr"] = lr / div_factor
                group["max_lr"] = lr
                group["min_lr"] = group["initial_lr"] / final_div_factor
        if self.cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError(f"OneCycleLR: {type(optimizer).__name__} has neither momentum nor "
                                 f"betas to cycle; pass cycle_momentum=False")
            self._use_beta1 = "betas" in optimizer.defaults
            if last_epoch == -1:
                highs = _per_group(max_momentum, groups, "OneCycleLR", "max_momentum")
                lows = _per_group(base_momentum, groups, "OneCycleLR", "base_momentum")
                for group, high, low in zip(groups, highs, lows):
                    self._set_momentum(group, high)
                    group["max_momentum"], group["base_momentum"] = high, low
        super().__init__(optimizer, last_epoch)

    def _set_momentum(self, group, value):
        if self._use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def _anneal(self, start, end, pct):
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self):
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"OneCycleLR: tried to step {step} times; total_steps is {self.total_steps}")
        lrs = []
        for group in self.optimizer.param_groups:
            start = 0.0
            for i, (end, lr0, lr1, m0, m1) in enumerate(self._phases):
                if step <= end or i == len(self._phases) - 1:
                    pct = (step - start) / (end - start)
                    lrs.append(self._anneal(group[lr0], group[lr1], pct))
                    if self.cycle_momentum:
                        self._set_momentum(group, self._anneal(group[m0], group[m1], pct))
                    break
                start = end
        return lrs


class SequentialLR(LRScheduler):
    """schedulers[0] until milestones[0], then schedulers[1] (started afresh at its epoch 0), and
    so on, as PyTorch's (e.g. LinearLR warmup, then CosineAnnealingLR). Build the schedulers on
    the same optimizer first; SequentialLR undoes their first steps.

    Examples
    --------
    Two steps of linear warmup, then halving:

    >>> opt = tt.optim.SGD([tt.tensor([1.0], requires_grad=True)], lr=1.0)
    >>> warmup = tt.optim.lr_scheduler.LinearLR(opt, start_factor=0.25, total_iters=2)
    >>> decay = tt.optim.lr_scheduler.ExponentialLR(opt, gamma=0.5)
    >>> schedule = tt.optim.lr_scheduler.SequentialLR(opt, [warmup, decay], milestones=[2])
    >>> lrs = [schedule.get_last_lr()[0]]
    >>> for _ in range(4):
    ...     opt.step()
    ...     schedule.step()
    ...     lrs.append(schedule.get_last_lr()[0])
    ...
    >>> lrs
    [0.25, 0.625, 1.0, 0.5, 0.25]
    """

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        schedulers = list(schedulers)
        if len(schedulers) < 1:
            raise ValueError("SequentialLR: expected at least one scheduler")
        for i, s in enumerate(schedulers):
            if getattr(s, "optimizer", None) is not optimizer:
                raise ValueError(f"SequentialLR: scheduler {i} ({type(s).__name__}) steps another "
                                 f"optimizer; build every scheduler on the one given")
            if isinstance(s, ReduceLROnPlateau):
                raise ValueError("SequentialLR: ReduceLROnPlateau steps on a metric and cannot be sequenced")
        milestones = [int(m) for m in milestones]
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(f"SequentialLR: expected {len(schedulers) - 1} milestones for "
                             f"{len(schedulers)} schedulers, got {len(milestones)}")
        self.optimizer = optimizer
        self._schedulers, self._milestones = schedulers, milestones
        self.last_epoch = last_epoch + 1
        for group in optimizer.param_groups:          # undo the schedulers' first steps
            group["lr"] = group["initial_lr"]
        for s in schedulers:
            s.last_epoch -= 1
        schedulers[0].step()                          # and take the first one's again
        self._last_lr = schedulers[0].get_last_lr()

    def step(self):
        replayed, out = replayed_while_recording("scheduler.step()", self.step)
        if replayed:        # inside tt.compile: a line of the program, run on every call
            return out
        from bisect import bisect_right
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            _restart(scheduler)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()

    def state_dict(self):
        state = {k: v for k, v in vars(self).items() if k not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state_dict):
        replayed, _ = replayed_while_recording("scheduler.load_state_dict(...)", self.load_state_dict,
                                               state_dict)
        if replayed:
            return
        state = dict(state_dict)
        for s, sd in zip(self._schedulers, state.pop("_schedulers")):
            s.load_state_dict(sd)
        self.__dict__.update(state)


class ChainedScheduler(SequentialLR):
    """Step every scheduler at each step (their factors multiply: the chainable ones compose),
    as PyTorch's ChainedScheduler(schedulers).

    Examples
    --------
    >>> opt = tt.optim.SGD([tt.tensor([1.0], requires_grad=True)], lr=1.0)
    >>> schedule = tt.optim.lr_scheduler.ChainedScheduler([
    ...     tt.optim.lr_scheduler.LinearLR(opt, start_factor=0.5, total_iters=2),
    ...     tt.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)])
    >>> lrs = [schedule.get_last_lr()[0]]
    >>> for _ in range(3):
    ...     opt.step()
    ...     schedule.step()
    ...     lrs.append(round(schedule.get_last_lr()[0], 6))
    ...
    >>> lrs                                 # the warmup's factor times 0.9 ** step
    [0.5, 0.675, 0.81, 0.729]
    """

    def __init__(self, schedulers, optimizer=None):
        schedulers = list(schedulers)
        if not schedulers:
            raise ValueError("ChainedScheduler: expected at least one scheduler")
        self.optimizer = optimizer or schedulers[0].optimizer
        if any(s.optimizer is not self.optimizer for s in schedulers):
            raise ValueError("ChainedScheduler: every scheduler must step the same optimizer")
        self._schedulers, self._milestones = schedulers, []
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def step(self):
        replayed, out = replayed_while_recording("scheduler.step()", self.step)
        if replayed:        # inside tt.compile: a line of the program, run on every call
            return out
        for s in self._schedulers:
            s.step()
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]
