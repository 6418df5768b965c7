"""`tt.distributed.optim.ZeroRedundancyOptimizer`: the optimizer step sharded over the ranks, as
PyTorch's `torch.distributed.optim.ZeroRedundancyOptimizer` (ZeRO stage 1).

    model = tt.nn.parallel.DistributedDataParallel(make_model())
    opt = tt.distributed.optim.ZeroRedundancyOptimizer(model.parameters(), optimizer_class=tt.optim.SGD,
                                                       lr=0.05, momentum=0.9)
    ...   # the training loop is unchanged: zero_grad(), backward(), step() on every rank

Each rank keeps optimizer state (momentum, Adam's moments) for its shard of the parameters only
and updates only that shard; the result is the plain optimizer's, to the last bit.

On one machine, with the wrapper's shared-memory all-reduce (`allreduce="auto"`, the default),
the parameters themselves live in shared memory (_ZeroWindow in nn/parallel.py): one copy of the
model for all ranks. The backward sums only each rank's slice of each gradient bucket (a
reduce-scatter), each rank updates its slice of the shared parameters in place, and the others
see the new weights with no all-gather: each rank does 1/world_size of the summing and of the
update. The shards are the all-reduce's slices of the buckets (a parameter may be cut between two
ranks: the optimizer's rule is elementwise, so a slice updates as the whole would).

Elsewhere (ranks on several machines, CuPy arrays, `allreduce="mpi"`, parameters no
DistributedDataParallel wraps), PyTorch's algorithm: whole parameters are dealt to the ranks
(largest first, to the least loaded), each rank updates its own, then each rank's parameters are
broadcast from it.
"""

import numpy as np

from .. import distributed
from ..nn import parallel
from ..state import SHARED, STATE, replayed_while_recording
from ..tensor import Tensor, mark_modified
from .optimizer import SGD, Adam, AdamW, Optimizer, RMSprop

__all__ = ["ZeroRedundancyOptimizer"]

# Optimizers whose update is elementwise (each entry of p from the same entry of its gradient and
# state): a slice of a parameter updates as the whole parameter would.
ELEMENTWISE = (SGD, Adam, AdamW, RMSprop)


def _piece(data):
    """A leaf Tensor whose .data is `data` itself (a view of a parameter), for the inner optimizer."""
    t = Tensor(np.empty(0, data.dtype), requires_grad=True)
    t.data = data
    return t


def _grad_array(p):
    g = p.grad
    if g is not None and type(g) is not np.ndarray and isinstance(g, Tensor):
        g = g.data                                  # p.grad = a Tensor, as PyTorch lets one set it
    if g is not None and g.shape != p.data.shape:
        raise ValueError(f"ZeroRedundancyOptimizer.step: a parameter has shape {p.shape} but its grad has "
                         f"shape {g.shape}")
    return g


class ZeroRedundancyOptimizer(Optimizer):
    """`optimizer_class` (tt.optim.SGD, Adam, AdamW, RMSprop) over `params`, its state and its
    update sharded over the ranks of tt.distributed (PyTorch's name and arguments).

    params: the parameters (or parameter groups) of a model wrapped in DistributedDataParallel,
        the same on every rank; every rank must construct it (a collective) and call step().
    optimizer_class, **defaults: the optimizer and its hyperparameters (lr=..., momentum=...).
    process_group: None only (the world). parameters_as_bucket_view: accepted (on one machine the
        parameters are always views of one flat shared array). overlap_with_ddp: False only.

    `param_groups` are the whole groups (learning-rate schedulers change them; step() passes the
    values on); `state` holds this rank's shard's state only. `state_dict()` needs
    `consolidate_state_dict(to=r)` on every rank first, then gives, on rank r, the state dict of
    `optimizer_class` over all the parameters (loadable there, in one process);
    `load_state_dict()` takes such a dict on every rank, each keeping its shard.

    On one machine the parameters move into shared memory at construction (rank 0's values): an
    in-place change of `p.data` on one rank is every rank's; `.grad` after a backward are
    read-only views of the one averaged gradient (clip_grad_norm_ and friends, which rebind
    `.grad`, work; `p.grad *= c` raises). `ddp.join()` is refused. See docs/guides/distributed.md.

    Examples
    --------
    >>> model = tt.nn.parallel.DistributedDataParallel(tt.nn.Linear(3, 1, rng=0))
    >>> opt = tt.distributed.optim.ZeroRedundancyOptimizer(model.parameters(), tt.optim.SGD, lr=0.1)
    >>> model(np.ones((4, 3))).sum().backward()
    >>> opt.step()                      # one process: the plain optimizer's step
    >>> model.module.bias.data.round(4)
    array([-0.9583], dtype=float32)
    """

    def __init__(self, params, optimizer_class=None, process_group=None, parameters_as_bucket_view=False,
                 overlap_with_ddp=False, **defaults):
        name = "ZeroRedundancyOptimizer"
        if not (isinstance(optimizer_class, type) and issubclass(optimizer_class, Optimizer)):
            raise TypeError(f"{name}: optimizer_class must be a tt.optim optimizer class (tt.optim.SGD, "
                            f"Adam, AdamW, RMSprop), got {optimizer_class!r}")
        if optimizer_class not in ELEMENTWISE:
            raise TypeError(f"{name}: optimizer_class {optimizer_class.__name__} is not one of "
                            f"{', '.join(c.__name__ for c in ELEMENTWISE)}, whose update is elementwise "
                            f"(a shard of a parameter updates as the whole would); use it without ZeRO")
        if process_group is not None:
            raise ValueError(f"{name}: process_group must be None (the world of tt.distributed); "
                             f"tinytensor has no process groups")
        if overlap_with_ddp:
            raise ValueError(f"{name}: overlap_with_ddp=True is not implemented; on one machine the "
                             f"update is already sharded inside the all-reduce's slices")
        # the whole groups, checked and completed by the optimizer itself (no state is made before
        # a step): the public param_groups, as PyTorch's
        whole = optimizer_class(params, **defaults)
        self.optimizer_class = optimizer_class
        self.defaults = whole.defaults
        self.param_groups = whole.param_groups
        self.parameters_as_bucket_view = bool(parameters_as_bucket_view)
        self._check = whole._check
        self._consolidated = None
        distributed.init()
        everything = self.params
        self._ddp = self._wrapper(everything)
        reducer = self._ddp._reducer if self._ddp is not None else None
        shared = reducer is not None and self._ddp._shared_memory_ok and distributed.world_size() > 1
        settings = [{k: v for k, v in g.items() if k != "params"} for g in self.param_groups]
        layout = [f"{optimizer_class.__name__} {len(self.param_groups)} groups {settings!r}, "
                  f"shared memory {shared}"]
        layout += [f"{tuple(p.shape)} {p.dtype}" for p in everything]

        def describe(texts):
            said = [f"rank {r}: {t.splitlines()[0]}, {len(t.splitlines()) - 1} parameters"
                    for r, t in enumerate(texts)]
            return (f"{name}: the ranks built different optimizers ({'; '.join(said)}); every rank must "
                    f"pass the same parameters, groups and optimizer, over the same DistributedDataParallel")
        distributed._agree_on_hash("zero", "\n".join(layout), describe)
        self._window = None
        if shared:
            if reducer.zero is not None:
                raise RuntimeError(f"{name}: this DistributedDataParallel's parameters are already shared "
                                   f"by another ZeroRedundancyOptimizer; use one optimizer per model")
            self._window = reducer.zero = parallel._ZeroWindow(reducer, everything)
            self._views = [p.data for p in everything]   # each parameter's view of the window
            # this rank's shard: per parameter, the slice of it in this rank's slices of the buckets
            self._pieces = []                     # (parameter, slice of its flat view, piece)
            groups = []
            for group in self.param_groups:
                pieces = []
                for p in group["params"]:
                    where = self._window.shard(reducer, p)
                    if where is not None:
                        k, start, lo, hi = where
                        piece = _piece(self._window.params[k][lo:hi])
                        self._pieces.append((p, slice(lo - start, hi - start), piece))
                        pieces.append(piece)
                groups.append(pieces)
        else:
            # PyTorch's partition: per group, the largest parameters first, each to the least loaded rank
            size, load = distributed.world_size(), [0] * distributed.world_size()
            self._owner = {}
            for group in self.param_groups:
                for p in sorted(group["params"], key=lambda p: -p.data.size):
                    r = min(range(size), key=lambda r: load[r])
                    self._owner[id(p)] = r
                    load[r] += p.data.size
            me = distributed.rank()
            groups = [[p for p in group["params"] if self._owner[id(p)] == me] for group in self.param_groups]
        self._inner_of = [i for i, pieces in enumerate(groups) if pieces]   # inner group -> whole group
        self.optim = None
        if self._inner_of:
            self.optim = optimizer_class([{**{k: v for k, v in self.param_groups[i].items() if k != "params"},
                                           "params": groups[i]} for i in self._inner_of])

    @staticmethod
    def _wrapper(params):
        """The live DistributedDataParallel whose gradient buckets hold every one of `params`."""
        ids = {id(p) for p in params}
        for key in sorted(parallel._LIVE.keys(), reverse=True):      # the newest first
            ddp = parallel._LIVE.get(key)
            if ddp is not None and ids <= set(ddp._reducer.where):
                return ddp
        return None

    @property
    def state(self):
        """This rank's shard's optimizer state (momentum, Adam's moments), as PyTorch's."""
        return {} if self.optim is None else self.optim.state

    @state.setter
    def state(self, value):
        if value:
            raise AttributeError("ZeroRedundancyOptimizer.state is this rank's shard's; use load_state_dict")

    def add_param_group(self, group):
        if getattr(self, "optim", False) is not False:
            raise RuntimeError("ZeroRedundancyOptimizer.add_param_group: not supported after construction "
                               "(the shards are fixed when it is made); pass every group to the constructor")
        super().add_param_group(group)

    def _pass_hyperparameters(self):
        """The whole groups' current values (a scheduler may have changed them) into the shard's."""
        if self.optim is not None:
            for mine, i in zip(self.optim.param_groups, self._inner_of):
                mine.update({k: v for k, v in self.param_groups[i].items() if k != "params"})

    def step(self, closure=None):
        """One update of every parameter: this rank's shard here, the others' on their ranks; every
        rank must call it. Returns the closure's loss (called first), as PyTorch."""
        if not SHARED.quiet and STATE.recorder is not None:   # tt.compile is recording: a line of
            if closure is not None:                              # the program, run on every call
                raise RuntimeError("tt.compile: ZeroRedundancyOptimizer.step(closure) inside a compiled "
                                   "function: the closure's loss and backward would run outside the "
                                   "program. Call the closure's body in the compiled function, then "
                                   "optimizer.step()")
            replayed_while_recording("ZeroRedundancyOptimizer.step()", self.step)
            return None
        loss = None if closure is None else closure()
        self._pass_hyperparameters()
        if self._window is not None:
            self._shared_step()
        else:
            if self.optim is not None:
                self.optim.step()
            self._broadcast_shards()
        return loss

    def _shared_step(self):
        window = self._window
        for i, (p, view) in enumerate(zip(self.params, self._views)):
            if p.data is not view:
                raise RuntimeError(f"ZeroRedundancyOptimizer.step: parameter {i} (shape {p.shape}) no longer "
                                   f"lives in the shared memory this optimizer updates: its .data was "
                                   f"replaced (model.to(), a cast, or .data = ...) after the optimizer was "
                                   f"made; move or cast the model first, then wrap it and build the "
                                   f"optimizer (or change values in place: p.data[...] = ...)")
        window.meet(window.entered, "waiting for every rank to reach step(): nobody reads the old weights")
        for p, part, piece in self._pieces:
            g = _grad_array(p)
            piece.grad = None if g is None else g.reshape(-1)[part]
        if self.optim is not None:
            self.optim.step()
        for _, _, piece in self._pieces:
            piece.grad = None                       # no view of the gradients kept past the step
        window.meet(window.stepped, "waiting for every rank's shard of the update")
        window.steps += 1
        for p in self.params:
            mark_modified(p)                        # every rank's weights changed (a saved value is stale)

    def _broadcast_shards(self):
        """PyTorch's all-gather of the updated parameters: each rank's, broadcast from it."""
        size = distributed.world_size()
        if size == 1:
            return
        distributed._agree(distributed._exchange("zero", arg=1))
        for r in range(size):
            mine = [p for p in self.params if self._owner[id(p)] == r and p.data.size]
            groups = {}
            for p in mine:
                groups.setdefault((type(p.data), p.data.dtype.str), []).append(p)
            for key in sorted(groups, key=lambda key: key[1]):
                parallel._broadcast_packed(groups[key], r)

    # ----- saving and restoring ----------------------------------------------------------------
    def _local_state(self):
        """This rank's state, by whole-parameter index: {index: [(start, entry)]} (start: where the
        shard begins in the flat parameter; 0 for whole parameters)."""
        index = {id(p): i for i, p in enumerate(self.params)}
        out = {}
        if self.optim is None:
            return out
        if self._window is not None:
            for p, part, piece in self._pieces:
                entry = self.optim.state.get(piece)
                if entry:
                    out.setdefault(index[id(p)], []).append((part.start, entry))
        else:
            for p, entry in self.optim.state.items():
                if entry:
                    out[index[id(p)]] = [(0, entry)]
        return out

    def consolidate_state_dict(self, to=0):
        """Gather every rank's shard of the state on rank `to` (every rank calls it), for
        `state_dict()` there, as PyTorch's."""
        mine = self._local_state()
        every = distributed.all_gather(mine) if distributed.world_size() > 1 else [mine]
        if distributed.rank() != to:
            self._consolidated = None
            return
        params = self.params
        state = {}
        for i, p in enumerate(params):
            parts = sorted((start, entry) for shard in every for start, entry in shard.get(i, []))
            if not parts:
                continue
            if self._window is None:
                state[i] = parts[0][1]
                continue
            entry = {}
            for name in parts[0][1]:
                values = [e.get(name) for _, e in parts]
                if isinstance(values[0], np.ndarray):
                    if sum(v.size for v in values) != p.data.size:
                        raise RuntimeError(f"ZeroRedundancyOptimizer.consolidate_state_dict: only part of "
                                           f"parameter {i} has optimizer state {name!r} (a step with its "
                                           f"gradient on some ranks only?)")
                    entry[name] = np.concatenate(values).reshape(p.shape)
                elif all(v == values[0] for v in values):
                    entry[name] = values[0]
                else:
                    raise RuntimeError(f"ZeroRedundancyOptimizer.consolidate_state_dict: the shards of "
                                       f"parameter {i} disagree on {name!r} ({values}): a step with its "
                                       f"gradient on some ranks only?")
            state[i] = entry
        # copies, in the plain optimizer's format
        self._consolidated = self._whole({params[i]: e for i, e in state.items()}).state_dict()

    def _whole(self, state):
        """A plain `optimizer_class` over every parameter holding `state`: the state dict's format."""
        whole = self.optimizer_class.__new__(self.optimizer_class)
        whole.param_groups, whole.defaults, whole.state = self.param_groups, self.defaults, state
        return whole

    def state_dict(self):
        """The state dict of `optimizer_class` over every parameter, on the rank that
        `consolidate_state_dict(to=...)` named (call that on every rank first)."""
        if self._consolidated is None:
            raise RuntimeError(f"ZeroRedundancyOptimizer.state_dict: the state is sharded over the ranks; "
                               f"call opt.consolidate_state_dict(to=0) on every rank first, then "
                               f"opt.state_dict() on rank 0 (rank {distributed.rank()} has no "
                               f"consolidated state)")
        return self._consolidated

    def load_state_dict(self, state_dict):
        """Load a state dict of `optimizer_class` over every parameter (from `state_dict()`, or a plain
        optimizer's), on every rank: each keeps its shard of the state."""
        whole = self._whole({})
        whole.load_state_dict(state_dict)           # checked and converted as the plain optimizer does
        if self.optim is None:
            return
        inner = {"param_groups": [{**{k: v for k, v in self.param_groups[i].items() if k != "params"},
                                   "params": list(range(len(g["params"])))}
                                  for g, i in zip(self.optim.param_groups, self._inner_of)], "state": {}}
        mine = self.optim.params
        if self._window is not None:
            spans = {id(piece): (p, part) for p, part, piece in self._pieces}
            for j, piece in enumerate(mine):
                p, part = spans[id(piece)]
                entry = whole.state.get(p)
                if entry:
                    inner["state"][j] = {k: (v.reshape(-1)[part] if isinstance(v, np.ndarray) else v)
                                         for k, v in entry.items()}
        else:
            for j, p in enumerate(mine):
                if whole.state.get(p):
                    inner["state"][j] = whole.state[p]
        n = 0
        for g in inner["param_groups"]:
            g["params"] = list(range(n, n + len(g["params"])))
            n += len(g["params"])
        self.optim.load_state_dict(inner)
