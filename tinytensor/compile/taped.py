"""A compiled call that is one entry on the tape.

Under grad mode, a function whose results are Tensors computed from Tensors that require grad
(a model's parameters, closed over) must let `backward()` reach them. While recording such a
call, the reverse sweep from its results is recorded too, from cotangents that are arguments
of the recording (`_sweep`). The Wengert list is then cut in two (`split`): the entries that do
not depend on the cotangents are the forward program, which also returns the values the others
read (the residuals); the rest are the backward program, a function of the residuals and the
cotangents returning the gradient of each Tensor. A call runs the forward program and makes
each result that requires grad one tape entry whose VJP runs the backward program: `backward()`,
`tt.grad` of a loss built on it and every parameter's `.grad` see it as they see an eager call,
at the compiled speed.
"""

import builtins
import contextlib
import copy
import warnings

import numpy as np

from .. import tape, transforms
from ..hooks import NO_HOOKS
from ..tensor import Tensor, _consumed, _make, _mark_consumed
from .codegen import _generate
from .tracer import _Ref, _refs


def sweep(tracer, out):
    """Inside the recording, after f returned `out`: the reverse sweep from its results that
    require grad to the reached Tensors that require grad, from cotangent arguments. Returns
    (root positions among out's leaves, cotangent variables, the Tensors, their gradients' values)
    or None when nothing needs the tape."""
    leaves, _, roots, wrt = _on_the_tape(tracer, out)
    if not roots or not wrt:
        return None
    # Several results on the tape: besides the sweep from all of them, one from each proper
    # subset (up to _SUBSET_ROOTS results), so that backward() from some of them runs the sweep
    # eager's visits, from those alone (an unused result's zero cotangent times its inf is NaN).
    tracked = [k for k in roots if id(leaves[k]) not in {id(t) for _, t in tracer.lives}]
    subsets = [tuple(roots)]
    if 1 < len(tracked) <= _SUBSET_ROOTS:
        subsets += [tuple(k for i, k in enumerate(tracked) if mask >> i & 1)
                    for mask in range(1, 2 ** len(tracked) - 1)]
    elif len(tracked) > _SUBSET_ROOTS:     # more: one from each result (a subset: their sum)
        subsets += [(k,) for k in tracked]
    sweeps, made = [], []
    tracer.hookless = set(wrt)        # their hooks run when backward() reaches them, not in here
    tracer.deferred = True
    try:
        for subset in subsets:
            cotangents = [tracer.argument(np.zeros_like(leaves[k].data), f"g_result{k}") for k in subset]
            made += [tracer.var_of(c) for c in cotangents]
            with _quietly(tracer):    # (the rules' warnings are backward()'s, when it runs)
                results = tape.reverse_sweep([leaves[k] for k in subset], [c.data for c in cotangents],
                                             wrt=wrt)
            sweeps.append((subset, [tracer.var_of(c) for c in cotangents], [results.get(t) for t in wrt]))
    except RuntimeError as err:
        if "modified in place" not in str(err):
            raise
        # f changed in place a value its results' backward needs (lin.weight.mul_(0.5) under
        # no_grad after the loss): eagerly only a later backward() raises, so the call's results
        # come back on a tape entry whose backward raises that error (stale)
        tracer.stale = str(err)
        dropped = set(made)
        tracer.arguments = [a for a in tracer.arguments if a not in dropped]
        tracer.tensor_arguments -= dropped
        return None
    finally:
        tracer.hookless = ()
        tracer.deferred = False
    return roots, wrt, sweeps


_SUBSET_ROOTS = 3      # results on the tape for which each subset has a backward program of its own


@contextlib.contextmanager
def _quiet():
    """NumPy's warnings and floating-point errors off: a run whose warnings are not eager's."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@contextlib.contextmanager
def _quietly(tracer):
    """The recording's sweep _quiet (its rules' warnings are backward()'s, given when it runs),
    without its lines noting a filter or errstate of f's."""
    with _quiet():
        saved = tracer.filters, tracer.errstate
        tracer.filters, tracer.errstate = warnings.filters, np.geterr()
        try:
            yield
        finally:
            tracer.filters, tracer.errstate = saved


def _on_the_tape(tracer, out):
    """out's leaves and structure, the positions of its results that require grad, and the
    reached Tensors that require grad and that the recording read (or returned)."""
    leaves, structure = transforms.tree_flatten(out)
    roots = [k for k, x in enumerate(leaves) if isinstance(x, Tensor) and x.requires_grad]
    used = {r for e in tracer.entries for r in _refs(e.args, []) + _refs(e.kwargs, [])}
    used.update(tracer.var_of(x) for x in leaves if isinstance(x, Tensor))
    return leaves, structure, roots, [t for var, t in tracer.lives if t.requires_grad and var in used]


def new_leaf_reached(tracer, out):
    """A Tensor that requires grad made inside f (tt.tensor(..., requires_grad=True)), returned,
    that another result computed from it reaches (None if none): eagerly backward() of that
    result fills the returned leaf's .grad, a link the program cannot make again. (A leaf f does
    not return, a transform's own, is out of the caller's reach.)"""
    leaves, _ = transforms.tree_flatten(out)
    returned = {id(x) for x in leaves if isinstance(x, Tensor)}
    stack = [x for x in leaves if isinstance(x, Tensor) and x.requires_grad and x._prim is not None
             and x._id >= tracer.start]
    seen = set()
    while stack:
        t = stack.pop()
        for a in t._inputs or ():
            if not isinstance(a, Tensor) or id(a) in seen or a._id < tracer.start or not a.requires_grad:
                continue
            seen.add(id(a))
            if a._prim is None:
                if id(a) in returned:
                    return a
                continue
            stack.append(a)
    return None


def split(tracer, out, swept, fname):
    """The forward and backward programs of a recording with its sweeps (see the module's text):
    one backward program per sweep (the results it starts from), the forward program returning
    the residuals any of them reads."""
    roots, wrt, sweeps = swept
    group = {v: i for i, (_, ct_vars, _) in enumerate(sweeps) for v in ct_vars}
    forward_entries, backward_entries = [], [[] for _ in sweeps]
    for e in tracer.entries:
        refs = _refs(e.args, []) + _refs(e.kwargs, [])
        owner = next((group[r] for r in refs if r in group), None)
        if e.kind not in ("draw", "store", "guard", "effect") and owner is not None:
            group[e.out] = owner
            backward_entries[owner].append(e)
        else:
            forward_entries.append(e)
    all_ct = [v for _, ct_vars, _ in sweeps for v in ct_vars]
    produced_later = {e.out for entries in backward_entries for e in entries} | set(all_ct)
    residuals = []
    grad_refs = [[tracer.template(g) if g is not None else None for g in grads] for _, _, grads in sweeps]
    for entries, refs_of_grads in zip(backward_entries, grad_refs):
        for e in entries:
            for r in _refs(e.args, []) + _refs(e.kwargs, []):
                if r not in produced_later and r not in residuals:
                    residuals.append(r)
        for r in refs_of_grads:       # a gradient computed in the forward part (none reached it)
            if type(r) is _Ref and r.var not in produced_later and r.var not in residuals:
                residuals.append(r.var)

    fwd = copy.copy(tracer)
    fwd.entries = forward_entries
    fwd.arguments = [a for a in tracer.arguments if a not in set(all_ct)]
    leaves, structure = transforms.tree_flatten(out)
    numbers = {len(leaves) + i for i, v in enumerate(residuals) if v in tracer.number_vars}
    forward = _generate(fwd, [*leaves, *(_Ref(v) for v in residuals)], f"{fname}_forward", plain=set(roots),
                        raw=numbers)      # (a number a rule reads: as it is, as eagerly)

    backs = {}
    for i, ((subset, ct_vars, _), entries, refs_of_grads) in enumerate(
            zip(sweeps, backward_entries, grad_refs)):
        bwd = copy.copy(tracer)
        bwd.entries = entries
        bwd.arguments = residuals + list(ct_vars)
        bwd.lives = []
        bwd.hints = list(tracer.hints)
        for k, v in enumerate(residuals):
            bwd.hints[v] = f"r{k}_{bwd.hints[v]}" if bwd.hints[v] and bwd.hints[v].isidentifier() else f"r{k}"
        suffix = "" if i == 0 else "_from_" + "_".join(map(str, subset))
        backs[frozenset(subset)] = _generate(bwd, list(refs_of_grads), f"{fname}_backward{suffix}")
    back = backs[frozenset(roots)]
    shapes = [(leaves[k].data.shape, leaves[k].data.dtype) for k in roots]
    lives = {id(t): t for _, t in tracer.lives}
    itself = {k: lives[id(x)] for k, x in enumerate(leaves) if id(x) in lives}   # a parameter returned
    taped = Taped(forward, back, len(leaves), structure, roots, shapes, wrt, len(residuals))
    taped.backs = backs
    taped.feeding = _feeding(tracer, leaves, [k for k in roots if k not in itself])
    if len(backs) > 1:
        taped.source += "".join(f"\n{b.source}" for key, b in backs.items() if b is not back)
    taped.itself = itself
    first = {}                          # a result returned twice ((h, h)): one object, as eagerly
    taped.again = {k: first.setdefault(id(x), k) for k, x in enumerate(leaves) if isinstance(x, Tensor)}
    taped.again = {k: j for k, j in taped.again.items() if k != j}
    return taped


class Taped:
    """The forward program's call: its results, those that require grad as tape entries."""

    def __init__(self, forward, backward, n_out, structure, roots, shapes, wrt, n_residuals):
        self.forward, self.backward = forward, backward
        self.n_out, self.structure = n_out, structure
        self.roots, self.shapes, self.wrt = roots, shapes, wrt
        self.source = (f"# the forward program, then the backward program its tape entries run\n"
                       f"{forward.source}\n{backward.source}")

    def __call__(self, *arrays):
        values = self.forward.function(*arrays)
        outs, residuals = list(values[:self.n_out]), values[self.n_out:]
        inputs = tuple(self.wrt)
        data = [t.data for t in inputs]
        entries = [(j, k) for j, k in enumerate(self.roots) if k not in self.itself]
        if len(entries) > 1:
            # several results on the tape: each passes its cotangent to one joint entry (their
            # cotangents side by side in one flat array, which the sweep sums exactly: zeros
            # elsewhere), whose VJP runs the backward program once, as eager's single sweep
            dtype = np.result_type(*(d for _, d in self.shapes))
            sizes = [int(np.prod(s)) for s, _ in self.shapes]
            starts = np.cumsum([0] + sizes)
            joint = _make(np.zeros(int(starts[-1]), dtype), _Joint(self, residuals, starts), inputs, data, {},
                          True)
            for j, k in entries:
                part = _Part(int(starts[j]), int(starts[j + 1]), joint.data.shape)
                outs[k] = _make(np.asarray(outs[k]), part, (joint,), [joint.data], {}, True)
            entries = []
        for j, k in entries:
            outs[k] = _make(np.asarray(outs[k]), _Entry(self, residuals, j), inputs, data, {}, True)
        for k in self.feeding:
            NO_HOOKS[outs[k]] = _FEEDING
        for k, t in self.itself.items():       # as eagerly: the Tensor itself
            outs[k] = t
        for k, j in self.again.items():
            outs[k] = outs[j]
        return transforms.tree_unflatten(self.structure, outs)


def _feeding(tracer, leaves, roots):
    """The results (positions) another result is computed from (h and h[0]): eagerly backward()
    from h[0] passes through h, its hooks and retain_grad(); the compiled call's results are
    side by side on the tape, so those are refused on them (hooks.NO_HOOKS)."""
    writer = {}
    for e in tracer.entries:
        writer[e.out] = e
    var = {k: tracer.var_of(leaves[k]) for k in roots}
    found = set()
    for j in roots:
        others = {var[k]: k for k in roots if k != j and var[k] is not None and var[k] != var[j]}
        if not others:
            continue
        stack, seen = [var[j]], set()
        while stack:
            v = stack.pop()
            e = writer.get(v)
            if e is None:
                continue
            for r in _refs(e.args, []) + _refs(e.kwargs, []):
                if r in others:
                    found.add(others[r])
                if r not in seen:
                    seen.add(r)
                    stack.append(r)
    return found


_FEEDING = ("tt.compile: {} on a result of a compiled call that another of its results is computed "
            "from (h and h[0]): the compiled call puts its results side by side on the tape, so "
            "backward() from the other would not pass through this one. Register it inside the "
            "function, return only the one result, or call the function uncompiled")


_JVP_ROWS = 4096      # forward mode through a compiled call: at most this many backward runs


class _CallEntry(tape.Primitive):
    """A tape entry of a compiled call (not registered: one per call). Its VJP is a generated
    program on arrays, so differentiating it again is refused."""

    def __init__(self, name, **fields):           # no Primitive.__init__: nothing is registered
        self.name = name
        self.fun = self.nargs = self.vjps = self.jvps = self.joint_jvp = None
        self.__dict__.update(fields)

    def _first_order(self, g):
        if isinstance(g, Tensor):
            raise RuntimeError("tt.compile: the gradient of a compiled call cannot be differentiated "
                               "again (backward(create_graph=True), a Hessian through it); call the "
                               "function uncompiled for higher derivatives")

    def _backward(self, cotangents, given=None):
        """The backward program on the cotangents; `given`: the results' positions (in roots)
        whose cotangents backward() gave, where a program from those alone exists."""
        taped = self.taped
        if given is not None and len(given) < len(taped.roots):
            back = taped.backs.get(frozenset(taped.roots[i] for i in given))
            if back is not None:
                return tuple(back.function(*self.residuals, *(cotangents[i] for i in given)))
            singles = [taped.backs.get(frozenset((taped.roots[i],))) for i in given]
            if builtins.all(b is not None for b in singles):
                return self._from_some(cotangents, given, singles)
        return tuple(taped.backward.function(*self.residuals, *cotangents))

    def jvp(self, tangents, ans, inputs, params, node=None, rec=None):
        """Forward mode through the call (t.jvp, tt.jvp of a loss built on it): J t, one row per
        element of the result, each row a run of the backward program (J^T e_i, dotted with the
        tangents): exact, and as cheap as a backward() for a scalar result."""
        if builtins.all(t is None for t in tangents):
            return None
        value = np.asarray(ans)
        if rec is not None or value.size > _JVP_ROWS:
            raise RuntimeError(
                f"tt.compile: forward mode through a compiled call's result of {value.size} elements"
                f"{' inside another recording' if rec is not None else ''} is not taken (it costs one "
                f"backward program per element; the limit is {_JVP_ROWS}); call the function "
                f"uncompiled for it (tt.compile.disable())")
        dtype = np.result_type(value.dtype, *(t.dtype for t in tangents if t is not None))
        flat = np.zeros(value.size, dtype)
        for i in range(value.size):
            e = np.zeros(value.size, value.dtype)
            e[i] = 1
            grads = self.joint_vjp(e.reshape(value.shape), ans, *inputs)
            flat[i] = sum(np.vdot(g, t) for g, t in zip(grads, tangents) if g is not None and t is not None)
        return flat.reshape(value.shape)

    def _from_some(self, cotangents, given, singles):
        """backward() from some of more results than have a program each subset: the program
        from all of them, the others' cotangents zeros, is eager's sweep but where those zeros
        meet an inf or a NaN (0 * inf: NaN) or turn a -0.0 into +0.0; there, and where no given
        result reaches a Tensor (None, as eagerly), the sum of each given result's own sweep."""
        taped = self.taped

        def summed(indices, quiet):
            total = None
            for i in indices:
                back = taped.backs[frozenset((taped.roots[i],))]
                with _quiet() if quiet else contextlib.nullcontext():
                    grads = back.function(*self.residuals, cotangents[i])
                total = list(grads) if total is None else [
                    g if t is None else t if g is None else t + g for t, g in zip(total, grads)]
            return total

        given_sum = summed(given, False)
        absent = [i for i in range(len(taped.roots)) if i not in given
                  and frozenset((taped.roots[i],)) in taped.backs]
        absent_sum = summed(absent, True) if absent else [None] * len(given_sum)
        with _quiet():   # (the given ones' warnings: their own sweeps')
            full = taped.backward.function(*self.residuals, *cotangents)
        out = []
        for f, t, z in zip(full, given_sum, absent_sum):
            if t is None or f is None:
                out.append(t)
                continue
            with np.errstate(invalid="ignore"):
                poisoned = (f == 0) & (t == 0) & (np.signbit(f) != np.signbit(t))
                if z is not None:
                    poisoned |= np.isnan(z)
            out.append(np.where(poisoned, t, f) if poisoned.any() else f)
        return tuple(out)


class _Joint(_CallEntry):
    """The joint entry of a compiled call's results: its cotangent is theirs side by side."""

    def __init__(self, taped, residuals, starts):
        super().__init__("tt.compile call", taped=taped, residuals=residuals, starts=starts)

    def joint_vjp(self, g, ans, *inputs):
        self._first_order(g)
        s = self.starts
        parts = [g[s[i]:s[i + 1]] for i in range(len(self.taped.shapes))]
        given = [i for i, p in enumerate(parts) if p.any()]     # (a result backward() left out: zeros)
        return self._backward([p.reshape(shape).astype(dtype, copy=False)
                               for p, (shape, dtype) in zip(parts, self.taped.shapes)], given or None)


class _Part(_CallEntry):
    """One result of a compiled call with several on the tape: its cotangent goes to the joint
    entry's flat array, in its place."""

    def __init__(self, start, stop, shape):
        super().__init__("tt.compile call (a result)", start=start, stop=stop, shape=shape)

    def joint_vjp(self, g, ans, joint):
        self._first_order(g)
        flat = np.zeros(self.shape, joint.dtype)
        flat[self.start:self.stop] = np.ravel(g)
        return (flat,)


class _Entry(_CallEntry):
    """The tape entry of a compiled call's one result on the tape: its VJP runs the backward
    program with this result's cotangent (zeros for the results that are parameters)."""

    def __init__(self, taped, residuals, j):
        super().__init__("tt.compile call", taped=taped, residuals=residuals, j=j)

    def joint_vjp(self, g, ans, *inputs):
        self._first_order(g)
        return self._backward([np.asarray(g, dtype) if i == self.j else np.zeros(shape, dtype)
                               for i, (shape, dtype) in enumerate(self.taped.shapes)])


# ----- results of a whole training step ---------------------------------------------------------
def spent_entry(tracer, out, fname):
    """For a whole training step that returns the loss itself, computed from parameters: the
    tape entry and inputs of the Tensor its program's return line makes (codegen._loss_as_tensor);
    None for any other. Where f called the loss's backward(), the entry says so (a number taken
    from the loss loses nothing, eagerly as compiled: tensor._consumed)."""
    if not isinstance(out, Tensor) or out._id < tracer.start:     # (a parameter: itself)
        return None
    _, _, roots, wrt = _on_the_tape(tracer, out)
    return (_Spent(fname, backward_done=_consumed(out)), tuple(wrt)) if roots and wrt else None


def spent(tracer, out, program, fname):
    """A whole training step's program (its backward() and optimizer step ran inside): results
    that required grad eagerly are Tensors that require grad here too, on one tape entry that
    refuses a second backward (eagerly, the step's in-place update makes it an error as well).
    None where there are none, or where the program makes its result a Tensor itself (the loss
    returned: spent_entry): the program then runs as it is."""
    leaves, structure, roots, wrt = _on_the_tape(tracer, out)
    roots = [k for k in roots if leaves[k]._id >= tracer.start]    # a parameter returned: itself
    if not roots or not wrt or getattr(program, "made_tensor", False):
        return None
    # the results whose backward() f called: a number taken from them (float(loss) to log it)
    # loses nothing, eagerly as compiled
    consumed = {k for k in roots if _consumed(out if isinstance(out, Tensor) else leaves[k])}
    single = isinstance(out, Tensor)
    return _spent_call(program.function, roots, structure, tuple(wrt),
                       _Spent(fname, backward_done=single and bool(consumed)), single, consumed)


def stale(tracer, out, program, fname):
    """For a call whose results' backward raised while recorded (f changed in place, under
    no_grad, a value their graph saved): the results that require grad eagerly do here too, on
    one tape entry whose backward raises eager's error."""
    leaves, structure, roots, wrt = _on_the_tape(tracer, out)
    roots = [k for k in roots if leaves[k]._id >= tracer.start]
    if not roots or not wrt:
        return None
    return _spent_call(program.function, roots, structure, tuple(wrt), _Stale(fname, tracer.stale),
                       isinstance(out, Tensor), set())


def _spent_call(function, roots, structure, inputs, entry, single, consumed):
    """The program's call, its results that require grad made `entry`'s Tensors (several results:
    each marked consumed where f called its backward(); the loss alone: its entry says so): a
    function, not an object with a __call__ method (a frame less on every call)."""
    if single:
        def call(*arrays):
            return _make(function(*arrays), entry, inputs, [t.data for t in inputs], {}, True)
    else:
        def call(*arrays):
            leaves, _ = transforms.tree_flatten(function(*arrays))
            data = [t.data for t in inputs]
            made = {}                     # one array returned twice ((loss, loss)): one Tensor, as
            for k in roots:               # eagerly
                made_before = made.get(id(leaves[k]))
                if made_before is not None:
                    leaves[k] = made_before
                    continue
                array = leaves[k]
                leaves[k] = made[id(array)] = _make(np.asarray(array), entry, inputs, data, {}, True)
                if k in consumed:
                    _mark_consumed(leaves[k])
            return transforms.tree_unflatten(structure, leaves)
    return call


class _Spent(_CallEntry):
    def __init__(self, fname, backward_done=False):
        super().__init__("tt.compile call (a whole training step)", fname=fname, backward_done=backward_done)

    def joint_vjp(self, g, ans, *inputs):
        raise RuntimeError(
            f"tt.compile: backward() through a result of {self.fname}, a whole training step whose "
            f"own backward() (and optimizer step) already used this result's graph inside the "
            f"compiled call; as eagerly after an optimizer step, a second backward through it is "
            f"not taken. Compute the loss again (call the step), or compile the loss alone")


def kept_from_a_transform(fname):
    """The tape entry of a Tensor f kept from inside a transform (`tt.grad`'s function appended
    it to a list) and returned: eagerly it requires grad, on the transform's own graph, which
    the program does not keep; its backward() is refused."""
    return _Stale(fname, "it is a Tensor f kept from inside a transform (tt.grad's function), on "
                         "that transform's graph, which the program does not keep; call the "
                         "function uncompiled to differentiate it")


class _Stale(_CallEntry):
    def __init__(self, fname, message):
        super().__init__("tt.compile call", fname=fname, message=message)

    def joint_vjp(self, g, ans, *inputs):
        raise RuntimeError(f"backward() through a result of the compiled {self.fname}: {self.message}")
