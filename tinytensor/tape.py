"""The tape (a Wengert list) and the two sweeps over it.

* `Primitive` is an operation with its NumPy forward, its VJP rule (reverse mode) and its JVP
  rule (forward mode), declared together. Calling it on Tensors runs the forward and, when an
  input needs a gradient, records one tape entry: the output Tensor itself.
* `reverse_sweep` walks the tape from the output back to the inputs, summing cotangents per
  node (the CS6216 `node_to_grad`), freeing each one once it has been passed on.
* `forward_sweep` walks the same tape forwards from the inputs, in topological order.

Rule signature, everywhere: cotangent (or tangent) first, then the output, then the inputs,
then the static parameters as keywords:  vjp(g, ans, *inputs, **params) -> gradient of one
input;  jvp(t, ans, *inputs, **params) -> output tangent for one input's tangent `t`.
Rules are plain NumPy. The engine, not the rules, undoes broadcasting (`unbroadcast`), and
`None` stands for a zero gradient or tangent, so unused branches cost nothing.

One recorder hook, as JAX's autodidax `bind -> process_primitive`: while `tt.compile` records a
function in this thread, `STATE.recorder` (tinytensor/state.py) is its tracer, and the code here
tells it each new Tensor (`Primitive.__call__`, through `STATE.hook`, which also carries
detect_anomaly's check) and each rule the sweeps apply (`rec.rule`, `rec.add`, `rec.apply`): the
same sweeps, checks and error messages serve eager and compiled code. With no recorder each
test is one `is None`.

The engine also owns two contracts: a rule's gradient (tangent) must have its input's (output's)
shape up to broadcasting, and an entry whose saved values tinytensor changed in place after it
was recorded (`tensor.mark_modified`) raises instead of being differentiated; that check runs
only on entries older than the last in-place write, so a normal training loop never pays for it.
"""

import functools
import inspect
import operator
import os
import sys
import traceback
from heapq import heappop, heappush
from operator import attrgetter
from types import MethodType

import numpy as np

from . import backend
from .hooks import TENSOR_HOOKS
from .state import SHARED, STATE, traced_data, update_hook
from .tensor import _LAST_WRITE, Tensor, _make, _new_tensor, _next_id, written_after
from .weakid import IdentityWeakMap

# Operands made arrays when an entry is made (Primitive.__call__), so rules never see a list
# (NumPy scalars stay as they are: they have .shape and .ndim, and mix with device arrays).
_ARRAY_LIKE = frozenset((list, tuple))     # a set: one hashed probe per operand, not two compares


class _Registry(dict):
    """Every primitive, built-in and user-defined, by name, in a dict that `tt.check_rules()`
    sweeps. Each `Primitive` adds itself when it is made.

    Examples
    --------
    >>> tt.REGISTRY["exp"] is tt.exp
    True
    >>> tt.REGISTRY["matmul"]
    <primitive matmul>
    """


REGISTRY = _Registry()

# tt.vmap's dispatch (vmap.bind), set when tinytensor/vmap.py loads: bind(prim, args, params)
# gives the batched result, or NotImplemented when no operand is batched.
_BATCHING = [None]


class Primitive:
    """An operation on NumPy arrays that records itself on the tape when given Tensors.

    Given no Tensor at all it is plain NumPy: arrays in, arrays out (this is what lets the
    rules, which are written with these same functions, run at NumPy speed). Every `tt.*`
    operation with both rules is one (`tt.exp`, `tt.matmul`, ...); declare your own with
    `tt.primitive`, which makes one of these.

    Examples
    --------
    >>> isinstance(tt.exp, tt.Primitive)
    True
    >>> tt.exp(np.array([0.0, 1.0]))                     # arrays: plain NumPy, nothing recorded
    array([1.        , 2.71828183])
    >>> tt.exp(tt.tensor([0.0, 1.0], requires_grad=True))   # a Tensor: one tape entry
    tensor([1.        , 2.71828183], requires_grad=True)
    """

    # List and tuple operands are NumPy's array-likes for the built-in rows (np.dot([1., 2.], t)):
    # made arrays once, when the entry is made. A user primitive (user_primitives.py) keeps its
    # containers: they hold its Tensor inputs.
    lists_are_arrays = True
    # Whether the rules hold for complex values with JAX's convention (ops/table.py, complex_rules):
    # recording any other primitive on a complex output raises instead of a wrong gradient.
    complex_rules = False

    def __init__(self, fun, name=None, nargs=None):
        self.fun = fun
        self.name = name or fun.__name__
        if nargs is None:   # positional parameters without defaults of the forward function
            params = inspect.signature(fun).parameters.values()
            variadic = any(p.kind is p.VAR_POSITIONAL for p in params)
            nargs = None if variadic else sum(
                1 for p in params
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty)
        self.nargs = nargs                  # None: variadic (concatenate, stack)
        self.vjps = None                    # one rule per input ...
        self.joint_vjp = None               # ... or one for all of them (None, None: no rule yet)
        self.jvps = None
        self.joint_jvp = None
        self.__doc__ = getattr(fun, "__doc__", None)
        _refuse_builtin_name(self.name)
        REGISTRY[self.name] = self

    def __repr__(self):
        return f"<primitive {self.name}>"

    def __get__(self, obj, objtype=None):
        """A primitive stored on a class is a method, as a function would be (`t.exp()`)."""
        return self if obj is None else MethodType(self, obj)

    # ----- declaring the rules ---------------------------------------------------------------
    def defvjp(self, *rules):
        """One VJP rule per input, in order (None: not differentiable in that input), or a
        single rule returning a tuple with one gradient per input."""
        if len(rules) == 1 and self.nargs != 1:
            self.joint_vjp, self.vjps = rules[0], None
        else:
            self._check_count(rules, "VJP")
            self.vjps = tuple(_not_differentiable(self.name, i) if r is None else r
                              for i, r in enumerate(rules))
            self.joint_vjp = None
        return self

    def defjvp(self, *rules):
        """One JVP rule per input, in order, each mapping that input's tangent to the output's."""
        self._check_count(rules, "JVP")
        self.jvps = tuple(_not_differentiable(self.name, i) if r is None else r
                          for i, r in enumerate(rules))
        self.joint_jvp = None
        return self

    def defjvp_joint(self, rule):
        """One JVP rule for all inputs: rule(tangents, ans, *inputs), `None` for a zero tangent."""
        self.joint_jvp, self.jvps = rule, None
        return self

    def _check_count(self, rules, kind):
        if self.nargs is not None and len(rules) != self.nargs:
            raise TypeError(f"{self.name} takes {self.nargs} input(s) but {len(rules)} {kind} "
                            f"rule(s) were given")

    # ----- recording -----------------------------------------------------------------------
    def __call__(self, *args, **params):
        quiet = SHARED.quiet                 # no thread records, checks, is in no_grad or vmap
        if not quiet and STATE.batch:        # tt.vmap: a batched operand takes its batching rule
            batched = _BATCHING[0](self, args, params)
            if batched is not NotImplemented:
                return batched
        values = []
        any_tensor = record = converted = False
        for a in args:
            if isinstance(a, Tensor):
                any_tensor = True
                record = record or a.requires_grad
                values.append(a.data)
            else:
                values.append(a)
                if type(a) in _ARRAY_LIKE:   # lists, tuples: made arrays below, once, on the Tensors'
                    converted = True         # device (Tensor operands never come here)
        if converted:
            if self.lists_are_arrays:
                values = _arrays_from_lists(values, args)
            else:
                converted = False
        try:
            if SHARED.quiet or STATE.recorder is None:
                ans = self.fun(*values, **params)
            else:                    # tt.compile: the forward is one entry, replayed whole, so
                ans = STATE.recorder.inside(self.fun, values, params)   # what it reads is no guard
        except (ValueError, TypeError, IndexError) as err:
            raise _same_kind(err, f"{self.name}: {_mixed_devices(values) or _plain(err, self.name, values)} "
                                  f"(inputs: {_describe(args)})") from err
        if not any_tensor:
            if SHARED.quiet or STATE.recorder is None or not isinstance(ans, (np.ndarray, np.generic)):
                return ans
            # tt.compile: a primitive on recorded arrays (a mask reshaped) is a line of the program
            array = np.asarray(ans)
            noted = STATE.recorder.numpy(self.fun, self.name, values, params, array,
                                         generic=isinstance(ans, np.generic))
            return ans if noted is array else noted
        generic = False
        if type(ans) is not np.ndarray:
            if isinstance(ans, np.ndarray):      # a subclass (tt.compile's recorded NumPy arrays):
                ans = np.ndarray.view(ans, np.ndarray)     # a Tensor holds a plain array
            elif not backend.is_array(ans):      # NumPy gives scalars for 0-d
                generic = isinstance(ans, np.generic)
                ans = np.asarray(ans) if generic else _one_array(self.name, ans)
        # tensor._make's assignments, inlined: the call alone cost 0.08 us of a 1.0 us recorded
        # `add` (+8 %, measured with process time, 3 alternated runs). Same slots, same order;
        # tests/engine/test_make.py checks that an output's slots are the ones _make writes.
        out = _new_tensor(Tensor)
        out.data = ans
        out.grad = None
        out.name = None
        out._id = _next_id()
        out._version = -1
        if record and (quiet or STATE.grad_enabled):
            if ans.dtype.kind == "c" and not self.complex_rules:
                raise _no_complex_rule(self.name, args)
            out.requires_grad = True
            out._prim = self
            out._inputs = args if not converted else tuple(
                v if type(a) in _ARRAY_LIKE else a for a, v in zip(args, values))
            out._values = values
            out._params = params
        else:
            out.requires_grad = False
            out._prim = None                 # a leaf
            out._inputs = None
            out._values = None
            out._params = None
        if not quiet:
            hook = STATE.hook                # the recorder of tt.compile, or detect_anomaly
            if hook is not None:             # (generic: on arrays, eagerly a NumPy scalar)
                hook.primitive(out, self, args, params, generic)
        return out

    def jvp(self, tangents, ans, inputs, params, node=None, rec=None):
        """The output tangent from the input tangents (None where zero); None if all are.
        With a recorder (`rec`, tt.compile's), each rule application is noted on it."""
        rules = self.jvps
        if rules is None:
            if self.joint_jvp is None:
                raise _missing_rule(self.name, "JVP", "defjvp")
            if rec is not None:
                return rec.rule(self.joint_jvp, (tangents, ans, *inputs), params, node, "JVP")
            return self.joint_jvp(tangents, ans, *inputs, **params)
        total = None
        for i, (rule, t) in enumerate(zip(rules, tangents)):
            if t is not None:
                d = (rule(t, ans, *inputs, **params) if rec is None
                     else rec.rule(rule, (t, ans, *inputs), params, node, "JVP", i))
                if d is None:
                    continue
                if total is None:
                    total = d
                else:
                    total = total + d if rec is None else rec.add(total, d, node, "JVP")
        return total


def _no_complex_rule(name, args):
    return TypeError(
        f"{name}: its result is complex and depends on a Tensor that requires grad (inputs: "
        f"{_describe(args)}), but {name} has no rule for complex values. Complex intermediates are "
        f"differentiated (JAX's convention) through + - * / exp abs real imag conj angle matmul dot "
        f"sum mean, the shape operations and np.fft; take the real part, imaginary part or modulus "
        f"(tt.real, tt.imag, tt.abs) before {name}")


def _arrays_from_lists(values, args):
    like = next((a.data for a in args if isinstance(a, Tensor)), None)
    return [backend.asarray(v, like=like) if type(v) in _ARRAY_LIKE else v for v in values]


def _one_array(name, ans):
    """A forward's result that is neither an array nor a NumPy scalar (a float, or a tuple of
    outputs, which np.asarray would silently stack into one array) as an ndarray."""
    if isinstance(ans, (tuple, list)):
        raise TypeError(f"{name}: a primitive returns one array; its forward returned a "
                        f"{type(ans).__name__} of {len(ans)} (np.asarray would stack them into "
                        f"one Tensor). Declare one primitive per output")
    return np.asarray(ans)


def _refuse_builtin_name(name):
    """Names stay unique: a user primitive may not take a built-in's name (it would replace the
    built-in's registry entry, and check_rules would check it with the built-in's spec)."""
    table = sys.modules.get(__package__ + ".ops.table")    # the registry module (loaded with ops)
    if table is not None and name in table.BUILTIN:
        raise ValueError(f"primitive name {name!r} is taken by tinytensor's built-in {name}; give "
                         f"yours a name of its own: tt.primitive(fun, name='my_{name}') or rename "
                         f"the function")


def _missing_rule(name, kind, how):
    err = NotImplementedError(f"primitive {name} has no {kind} rule (declare it with {name}.{how})")
    err._tinytensor_entry = True     # already says what is wrong; not re-wrapped
    return err


def _plain(err, name, values):
    """NumPy's error text, without a repeated op name and without gufunc jargon for matmul."""
    text = str(err)
    if text.startswith(name + ": "):
        text = text[len(name) + 2:]
    if name not in ("matmul", "dot", "linear"):
        return text
    if text.startswith("matmul: "):
        text = text[len("matmul: "):]
    if "gufunc" in text or "not aligned" in text or "remapped shapes" in text:
        a, b = (np.shape(v) for v in values[:2])
        if len(a) == 0 or len(b) == 0:
            return (f"matrix products do not take 0-d operands; got shapes {a} and {b} "
                    f"(use * to multiply by a scalar)")
        k = b[0] if len(b) == 1 else b[-2]
        if a[-1] != k:
            inner = "only" if len(b) == 1 else "second-to-last"
            return (f"shapes {a} and {b} do not match: the first operand's last axis ({a[-1]}) "
                    f"must equal the second operand's {inner} axis ({k})")
        return (f"shapes {a} and {b} do not match: the batch axes (all but the last two) "
                f"{a[:-2]} and {b[:-2]} must broadcast together")
    return text


def _not_differentiable(name, index):
    def rule(*args, **params):
        raise NotImplementedError(f"{name} is not differentiable in input {index}")
    return rule


def _describe(args):
    parts = []
    for a in args:
        if isinstance(a, Tensor):
            parts.append(f"{a.name or 'tensor'} {a.shape} {a.dtype}{_on(a.data)}")
        elif backend.is_array(a):
            parts.append(f"array {a.shape} {a.dtype}{_on(a)}")
        elif isinstance(a, (list, tuple)) and a and isinstance(a[0], Tensor):
            parts.append(", ".join(f"{t.name or 'tensor'} {t.shape}" for t in a))
        else:
            parts.append(type(a).__name__)
    return "; ".join(parts)


def _on(array):
    device = backend.device_of(array)
    return "" if device == "cpu" else f" on {device}"


def _mixed_devices(values):
    """A message naming the devices when arrays of several devices met in one operation, else ''.
    Only called once an operation failed: mixing raises in the array libraries themselves."""
    devices = backend.describe_devices([v.data if isinstance(v, Tensor) else v for v in values])
    if len(devices) < 2:
        return ""
    return (f"operands on different devices ({' and '.join(sorted(devices))}); tinytensor never moves "
            f"arrays silently: put them on one device with t.to(device) or tt.tensor(..., device=)")


# ----- grad modes -------------------------------------------------------------------------------
class _GradMode:
    """A context manager and decorator (`@tt.no_grad()` or bare `@tt.no_grad`) that sets
    whether operations are recorded."""
    enabled = None

    def __new__(cls, fun=None):
        if callable(fun):                 # used bare as a decorator
            return cls()(fun)
        return super().__new__(cls)

    def __init__(self, fun=None):
        pass

    def __enter__(self):
        self._prev = STATE.grad_enabled
        STATE.grad_enabled = self.enabled

    def __exit__(self, *exc):
        STATE.grad_enabled = self._prev

    def __call__(self, fun):
        @functools.wraps(fun)
        def wrapped(*args, **kwargs):
            with self._fresh():          # a fresh one per call: calls may nest or recurse
                return fun(*args, **kwargs)
        return wrapped

    def _fresh(self):
        return type(self)()


class no_grad(_GradMode):
    """`with tt.no_grad():` or `@tt.no_grad()`: records nothing (evaluation, parameter updates).

    Examples
    --------
    >>> w = tt.tensor([1.0, 2.0], requires_grad=True)
    >>> with tt.no_grad():
    ...     y = w * 2
    >>> y.requires_grad
    False
    """
    enabled = False


class enable_grad(_GradMode):
    """`with tt.enable_grad():` or `@tt.enable_grad()`: records again, inside no_grad.

    Examples
    --------
    >>> x = tt.tensor([1.0], requires_grad=True)
    >>> with tt.no_grad():
    ...     with tt.enable_grad():
    ...         y = x * 2
    ...
    >>> y.requires_grad
    True
    """
    enabled = True


class set_grad_enabled(_GradMode):
    """`tt.set_grad_enabled(flag)`, as PyTorch: sets the mode at once (so it works as a plain
    function call), and as a context manager restores the previous mode on exit.

    Examples
    --------
    >>> x = tt.tensor([1.0], requires_grad=True)
    >>> with tt.set_grad_enabled(False):
    ...     y = x * 2
    ...
    >>> y.requires_grad
    False
    """

    def __init__(self, mode):
        self.enabled = bool(mode)
        self._prev = STATE.grad_enabled
        STATE.grad_enabled = self.enabled

    def __enter__(self):
        pass

    def __call__(self, fun):     # as a decorator it sets the mode per call, not when applied
        STATE.grad_enabled = self._prev
        return super().__call__(fun)

    def _fresh(self):
        return set_grad_enabled(self.enabled)


def is_grad_enabled():
    """True while operations are recorded (outside no_grad).

    Examples
    --------
    >>> tt.is_grad_enabled()
    True
    >>> with tt.no_grad():
    ...     print(tt.is_grad_enabled())
    ...
    False
    """
    return STATE.grad_enabled


# ----- undoing broadcasting ------------------------------------------------------------------
def unbroadcast(g, shape):
    """Sum `g` down to `shape`, undoing NumPy broadcasting (missing axes padded on the left).

    The adjoint of broadcasting `x` of `shape` up to `g.shape`; the one place it is done.

    Examples
    --------
    >>> tt.unbroadcast(np.ones((3, 2)), (2,))   # the gradient of a (2,) input broadcast to (3, 2)
    array([3., 3.])
    """
    shape = tuple(shape)
    lead = g.ndim - len(shape)
    if lead > 0 and g.shape[lead:] == shape:     # only leading axes were added (a bias, say)
        return g.sum(axis=0) if lead == 1 else g.sum(axis=tuple(range(lead)))
    if not _broadcasts(shape, g.shape):          # the engine's shape contract
        if _broadcasts(g.shape, shape):          # fewer or size-1 axes: constant along them
            return np.broadcast_to(g, shape)
        raise ValueError(f"a gradient of shape {g.shape} for an input of shape {shape}: a "
                         f"gradient must have the input's shape, or a shape that broadcasting "
                         f"reduces to it (or one that broadcasts to it); a transposed, flattened "
                         f"or reshaped gradient is a bug in the rule")
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] != 1)
    if axes:
        g = g.sum(axis=axes)    # the method, not np.sum: same on Tensors, ~1.5 us less on arrays
    if g.shape != shape:
        g = g.reshape(shape)
    return g


def _broadcasts(small, big):
    """Whether an array of shape `small` broadcasts to shape `big`."""
    lead = len(big) - len(small)
    return lead >= 0 and all(n == 1 or n == m for n, m in zip(small, big[lead:]))


# ----- the two sweeps -------------------------------------------------------------------------
_by_creation = attrgetter("_id")


def _tape_of(roots, oldest=-1):
    """Every recorded node that the roots depend on, newest first (reverse Wengert order).

    Iterative, so graph depth is unlimited. Nodes created before `oldest` are skipped:
    they cannot depend on anything newer.
    """
    seen = set()
    stack = [r for r in roots if isinstance(r, Tensor) and r.requires_grad]
    nodes = []
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        nodes.append(node)
        if node._prim is not None:
            for a in node._inputs:
                if isinstance(a, Tensor) and a.requires_grad and a._id >= oldest and a not in seen:
                    stack.append(a)
    nodes.sort(key=_by_creation, reverse=True)
    return nodes


SWEEPS = [0]     # reverse sweeps so far (DistributedDataParallel: did *this* backward pass its output?)


_RAW_DATA = Tensor.__dict__["data"]   # a Tensor's array itself (a traced Tensor's `.data` is a view)


def run_tensor_hooks(node, g):
    """The sweep's call: `g` through node's hooks, in registration order (none: g itself)."""
    hooks = TENSOR_HOOKS.get(node)
    if not hooks or STATE.recorder is not None and node in STATE.recorder.hookless:
        return g
    recorded = isinstance(g, Tensor)           # create_graph: the gradient is on the tape
    for hook in list(hooks.values()):
        if recorded:
            arg = g
        else:                 # (tt.compile: a traced Tensor, so that the hook's g.numpy() is too)
            arg = _make(g) if STATE.recorder is None else STATE.recorder.hook_argument(g)
        new = hook(arg)
        if new is None:
            if not recorded and type(arg) is not Tensor:   # (tt.compile: g.mul_(2) in the hook,
                g = _RAW_DATA.__get__(arg)    # eagerly a write into g, is recorded as a new value
            continue                          # of the traced Tensor; its slot, not a traced view)
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


def reverse_sweep(roots, cotangents, wrt=None, create_graph=False, retained=None, cut=False, ready=None):
    """Reverse mode. Returns {node: d<roots, cotangents>/d node} for `wrt` (default: every leaf,
    and the recorded nodes in the set `retained`). With `cut`, a recorded node of `wrt` is not
    swept through: what it was computed from gets nothing from it (odeint's closed-over Tensors,
    which the outer sweep passes on itself).

    Nodes are taken newest first from a heap keyed on creation order. An unprocessed consumer of
    a node always has a higher id and sits on (or behind) the frontier, so when a node comes off
    the heap every contribution to its cotangent has arrived. Traversal and sweep are one pass.
    With `create_graph` the rules are applied to Tensors, so the gradients are themselves
    recorded on the tape and can be differentiated again.

    `ready` (backward()'s `_Ready`, or None): leaves handed to `ready.done(leaf, g)` as soon as
    their last consumer has been swept, instead of when they come off the heap (a leaf is older
    than every node that uses it, so it comes off last); they are then not in the result.
    """
    SWEEPS[0] += 1                          # a tensor hook can tell which sweep called it
    wanted = None if wrt is None else set(wrt)
    keep = wanted if wrt is not None else retained   # recorded nodes whose cotangent is returned
    oldest = min((w._id for w in wrt), default=-1) if wrt else -1   # older nodes cannot matter
    rec = None if create_graph else STATE.recorder   # tt.compile notes each rule it applies
    # (with create_graph the rules run on Tensors and tt.compile records their operations; a
    # rule giving a plain array, NumPy on a plain cotangent and a node's raw operand such as
    # tt.where's condition, is noted whole: `noted`)
    noted = STATE.recorder.plain_rule if create_graph and STATE.recorder is not None else None
    cotangent = {}
    frontier = []
    for r, c in zip(roots, cotangents):
        if isinstance(r, Tensor) and r.requires_grad:
            if type(c) is not np.ndarray and not isinstance(c, Tensor):   # a number: rules need .shape
                c = backend.asarray(c, None if backend.is_array(c) else r.dtype, like=r.data,
                                    what="the cotangent")
            if rec is not None:
                c = rec.seed(c, r)
            if r in cotangent:
                cotangent[r] = cotangent[r] + c if rec is None else rec.add(cotangent[r], c, r, "VJP")
            else:
                cotangent[r] = c
                heappush(frontier, (-r._id, r))
    results = {}
    anomaly = STATE.anomaly
    stale = -_LAST_WRITE[0]                 # entries older than the last in-place write get checked
    hooked = bool(TENSOR_HOOKS)             # Tensor.register_hook: looked up per node only if any
    while frontier:
        key, node = heappop(frontier)       # key = -node._id
        g = cotangent.pop(node, None)       # complete now; freed once passed on
        if g is None:                       # a leaf already handed to ready.done
            continue
        if hooked:
            g = run_tensor_hooks(node, g)
        prim = node._prim
        if prim is None:
            if wanted is None or node in wanted:
                results[node] = g
            continue
        if keep is not None and node in keep:
            results[node] = g
            if cut:
                continue
        inputs = node._inputs
        if create_graph:
            ans, args = node, inputs
        else:
            ans = node.data
            args = node._values
        params = node._params
        if key > stale:
            _check_saved_values(node, "backward")
        i = -1
        try:
            rules = prim.vjps
            parts = None
            if rules is None:                # one joint rule for all inputs
                if prim.joint_vjp is None:
                    raise _missing_rule(prim.name, "VJP", "defvjp")
                parts = (prim.joint_vjp(g, ans, *args, **params) if rec is None
                         else rec.rule(prim.joint_vjp, (g, ans, *args), params, node, "VJP", parts=True))
                if noted is not None:
                    parts = noted(prim.joint_vjp, (g, ans, *args), params, parts, node, -1)
                if not isinstance(parts, (tuple, list)):
                    parts = (parts,)
            # A real input of a complex result gets the real part of its cotangent (JAX's
            # convention, ops/complex_numbers.py): taken here, as broadcasting is undone here.
            complex_out = prim.complex_rules and node.data.dtype.kind == "c"
            for a in inputs:                 # a plain loop: this is the hottest code in tinytensor
                i += 1
                if not (isinstance(a, Tensor) and a.requires_grad) or a._id < oldest:
                    continue
                if parts is not None:
                    ga = parts[i]
                elif rec is None:
                    ga = rules[i](g, ans, *args, **params)
                    if noted is not None:
                        ga = noted(rules[i], (g, ans, *args), params, ga, node, i)
                else:
                    ga = rec.rule(rules[i], (g, ans, *args), params, node, "VJP", i)
                if ga is None:
                    continue
                if complex_out and a.data.dtype.kind != "c" and ga.dtype.kind == "c":
                    ga = np.real(ga) if rec is None else rec.apply(np.real, (ga,), {}, a, "VJP")
                if ga.shape != a.data.shape:
                    before = ga
                    ga = (unbroadcast(ga, a.data.shape) if rec is None
                          else rec.apply(unbroadcast, (ga, a.data.shape), {}, a, "VJP"))
                    if noted is not None:
                        ga = noted(unbroadcast, (before, a.data.shape), {}, ga, a, None)
                if anomaly:
                    _anomaly_check_gradient(ga, node, a)
                prev = cotangent.get(a)
                if prev is None:
                    cotangent[a] = ga
                    heappush(frontier, (-a._id, a))
                else:
                    cotangent[a] = prev + ga if rec is None else rec.add(prev, ga, a, "VJP")
                    if noted is not None:
                        cotangent[a] = noted(operator.add, (prev, ga), {}, cotangent[a], a, None)
        except Exception as err:
            raise _rule_error(err, node, "VJP", i) from err
        if ready is not None and node in ready.consumers:
            for leaf in ready.swept(node):  # leaves whose last consumer this was
                g = cotangent.pop(leaf, None)
                if g is not None:
                    ready.done(leaf, run_tensor_hooks(leaf, g) if hooked else g)
    return results


_SEEDS = {}

# Called as hook(grads) after each backward() has set the leaves' .grad ({leaf: gradient} of that
# sweep): tt.nn.parallel.DistributedDataParallel averages the gradients across processes here.
POST_BACKWARD = []

# Leaves whose finished gradient is wanted before backward() ends: {leaf: hook}, hook(leaf) called
# once per backward() as soon as leaf.grad holds all of that backward's contributions (PyTorch's
# post-accumulate-grad hook). DistributedDataParallel starts a bucket's all-reduce there, while
# the sweep goes on with the layers below.
GRAD_READY = IdentityWeakMap()


class _Ready:
    """backward()'s bookkeeping for GRAD_READY's leaves: a leaf's gradient is complete once every
    node of this graph that consumes it has been swept (the tape knows each node's inputs, so one
    walk of the graph counts them). A leaf whose consumers are not all swept (a branch that got no
    cotangent) is finished with the others after the sweep."""

    def __init__(self, output, handed):
        self.consumers = {}             # node -> the watched leaves among its inputs (with repeats)
        self.left = {}                  # leaf -> consumers not swept yet
        for node in _tape_of([output]):
            if node._prim is None:
                continue
            for a in node._inputs:
                if isinstance(a, Tensor) and a._prim is None and a.requires_grad and a in GRAD_READY:
                    self.consumers.setdefault(node, []).append(a)
                    self.left[a] = self.left.get(a, 0) + 1
        self.handed = handed            # backward()'s: arrays a leaf may not own

    def swept(self, node):
        """The leaves whose last consumer is `node`."""
        finished = []
        for leaf in self.consumers.pop(node):
            self.left[leaf] -= 1
            if not self.left[leaf]:
                finished.append(leaf)
        return finished

    def done(self, leaf, g):
        _check_float(leaf)
        accumulate({leaf: g}, self.handed)
        GRAD_READY.get(leaf)(leaf)


def _seed(like):
    """An array of ones like `like`, made once per array type, dtype and shape (read-only where
    the library allows: never handed to a leaf as its own .grad, always copied)."""
    key = (type(like), like.dtype, like.shape)
    seed = _SEEDS.get(key)
    if seed is None:
        seed = _SEEDS[key] = backend.namespace(like).ones(like.shape, like.dtype)
        if type(seed) is np.ndarray:
            seed.flags.writeable = False
    return seed


def _is_fresh(g, dtype):
    """A rule's own new array of `dtype` (not a view, not read-only, not a NumPy scalar)."""
    if type(g) is np.ndarray:
        return g.dtype == dtype and g.base is None and g.flags.writeable
    return backend.is_array(g) and g.dtype == dtype and g.base is None


def accumulate(grads, handed):
    """Add each gradient of {leaf: gradient} into the leaf's `.grad` (backward's last step; a
    compiled whole training step calls it too). `handed`: ids of arrays that may not become a
    leaf's own `.grad` (the caller's seed; those already given to another leaf)."""
    for leaf, g in grads.items():
        dtype = leaf.data.dtype
        if leaf.grad is None:
            # A fresh result of a rule becomes the leaf's own .grad, saving a copy of every
            # weight matrix per step; anything that may be shared (a view, the seed, an array
            # already given to another leaf) is copied.
            # The copy is row-major: a transposed view (a weight used as W.T) would otherwise give
            # a Fortran-ordered .grad, and the optimizers' in-place updates run 5-7x slower on it.
            leaf.grad = (g if _is_fresh(g, dtype) and id(g) not in handed
                         else backend.copy(g, dtype, order="C"))
            handed.add(id(leaf.grad))
        else:
            prev = leaf.grad
            if type(prev) is not type(leaf.data) or prev.shape != leaf.data.shape:   # set by hand
                raise TypeError(f"backward: the .grad of {leaf.name or 'a leaf'} was set to a "
                                f"{type(prev).__name__} of shape {np.shape(prev)}; gradients accumulate "
                                f"into an array of the leaf's shape {leaf.data.shape} (set .grad to such an "
                                f"array, or to None)")
            # Out of place: .grad may be an array a user's rule also holds, never written into.
            total = prev + g.astype(dtype, copy=False)
            # 0-d arrays add up to a NumPy scalar: .grad stays an array of the leaf's shape
            leaf.grad = total if type(total) is type(prev) else backend.copy(total, dtype)


def backward(output, grad=None):
    """`Tensor.backward`: accumulate gradients into `.grad` of the leaves."""
    if STATE.recorder is not None:
        STATE.recorder.backward(output)
    if not output.requires_grad:
        raise RuntimeError("backward: this tensor does not require grad (no input it depends on "
                           "has requires_grad=True, or it was computed under no_grad)")
    if grad is None:
        if output.data.dtype.kind == "c":
            raise TypeError(f"backward: the output is complex ({output.dtype}); a gradient is taken "
                            f"of a real output only (as PyTorch's and JAX's): call backward() on "
                            f"its real part, imaginary part or modulus (tt.real, tt.imag, tt.abs)")
        if output.data.size != 1:
            raise RuntimeError(f"backward: the output has shape {output.shape}; pass grad= (an "
                               f"array of that shape) for a non-scalar output")
        grad = _seed(output.data)
    else:
        grad = backend.asarray(traced_data(grad) if isinstance(grad, Tensor) else grad, like=output.data,
                               what="backward's grad")    # (tt.compile: its cast a program line)
        if grad.shape != output.shape:
            raise ValueError(f"backward: grad has shape {grad.shape} but {output.name or 'the output'} "
                             f"has shape {output.shape}")
        grad = grad.astype(output.dtype, copy=False)
    handed = {id(grad)}                      # the caller's array (or the seed) is never handed to a leaf
    retained = RETAINED.nodes() if RETAINED else None
    ready = _Ready(output, handed) if GRAD_READY and STATE.recorder is None else None
    grads = reverse_sweep([output], [grad], retained=retained, ready=ready)
    for leaf in grads:
        _check_float(leaf)
    if STATE.recorder is not None:     # tt.compile: the accumulation is a line of the program
        STATE.recorder.accumulate(grads, handed)
    else:
        accumulate(grads, handed)
    if GRAD_READY:                     # its leaves the sweep did not hand over (tt.compile's
        for leaf in grads:             # recording, or a use that got no cotangent)
            hook = GRAD_READY.get(leaf)
            if hook is not None:
                hook(leaf)
    for hook in POST_BACKWARD:
        hook(grads)


def _check_float(leaf):
    if leaf.data.dtype.kind not in "fc":    # requires_grad set by hand on an integer Tensor
        raise TypeError(f"backward: {leaf.name or 'a leaf'} (shape {leaf.shape}) has dtype "
                        f"{leaf.dtype} and requires grad: its gradient would be truncated to "
                        f"integers; only floating-point tensors can require gradients (make it "
                        f"one: tt.tensor(..., dtype=np.float64) or t.astype(np.float64))")


def forward_sweep(output, tangents):
    """Forward mode along the tape: d(output) for the tangents {input Tensor: array}.

    Walks, in topological order, only the nodes created after the oldest named input;
    `None` stands for a zero tangent, so nodes that do not depend on the inputs cost a lookup.
    """
    rec = STATE.recorder                      # tt.compile notes each rule it applies
    tangent = {}
    for x, t in tangents.items():
        if not isinstance(x, Tensor):
            raise TypeError(f"jvp: tangents must be keyed by Tensors, got {type(x).__name__}")
        t = backend.asarray(t.data if isinstance(t, Tensor) else t, like=x.data,
                            what=f"the tangent for {x.name or 'an input'}")
        if t.shape != x.shape:
            raise ValueError(f"jvp: the tangent for {x.name or 'an input'} has shape {t.shape} "
                             f"but the input has shape {x.shape}")
        if not x.requires_grad:
            raise ValueError(f"jvp: {x.name or 'an input'} (shape {x.shape}) does not require grad, "
                             f"so nothing computed from it was recorded")
        if x.dtype.kind not in "fc":      # requires_grad set by hand on an integer Tensor
            raise TypeError(f"jvp: {x.name or 'an input'} (shape {x.shape}) has dtype {x.dtype}: its "
                            f"tangent would be truncated to integers; only floating-point tensors "
                            f"can require gradients (make it one: t.astype(np.float64))")
        if rec is not None and t.dtype != x.dtype:
            t = rec.apply(np.asarray, (t,), {"dtype": x.dtype}, x, "JVP")
        tangent[x] = t.astype(x.dtype, copy=False)
    if output in tangent:                          # never the caller's own array
        return backend.copy(tangent[output]) if rec is None else rec.apply(
            backend.copy, (tangent[output],), {}, output, "JVP")
    if not tangent or not output.requires_grad:
        return np.zeros_like(output.data)
    order = _tape_of([output], min(x._id for x in tangent))
    order.reverse()
    uses = {}            # how many entries still need each node's tangent: freed after the last
    for node in order:
        if node._prim is not None:
            for a in node._inputs:
                if isinstance(a, Tensor):
                    uses[a] = uses.get(a, 0) + 1
    last_write = _LAST_WRITE[0]
    for node in order:
        prim = node._prim
        if prim is None or node in tangent:
            continue
        if node._id < last_write:
            _check_saved_values(node, "jvp")
        ts = []
        for a in node._inputs:
            if isinstance(a, Tensor):
                ts.append(tangent.get(a))
                uses[a] -= 1
                if not uses[a] and a is not output:
                    tangent.pop(a, None)          # this was its last use
            else:
                ts.append(None)
        if not any(t is not None for t in ts):
            continue
        try:
            t = prim.jvp(ts, node.data, node._values, node._params, node, rec)
        except Exception as err:
            raise _rule_error(err, node, "JVP") from err
        if t is None:
            continue
        if t.shape != node.data.shape:
            if rec is None or not _broadcasts(t.shape, node.data.shape):
                t = _broadcast_tangent(t, node)
            else:
                t = rec.apply(np.broadcast_to, (t, node.data.shape), {}, node, "JVP")
        if STATE.anomaly:
            _anomaly_check_gradient(t, node, None, kind="tangent")
        tangent[node] = t
    result = tangent.get(output)
    if result is None:
        return np.zeros_like(output.data)
    if rec is not None:
        return rec.apply(backend.copy, (result, output.dtype), {}, output, "JVP")
    return backend.copy(result, output.dtype)


def _same_kind(err, message):
    """An exception like `err` with a new message. Some exception types cannot be built from a
    message alone (NumPy's _UFuncNoLoopError): then the nearest built-in base class is used."""
    if not isinstance(err, (ValueError, TypeError, IndexError, NotImplementedError)):
        return RuntimeError(message)
    try:
        return type(err)(message)
    except Exception:   # noqa: BLE001
        return next(k for k in (NotImplementedError, IndexError, ValueError, TypeError)
                    if isinstance(err, k))(message)


def _broadcast_tangent(t, node):
    """A tangent of another shape is legitimate only when it broadcasts to the output's shape."""
    try:
        return np.broadcast_to(t, node.data.shape)
    except ValueError:
        raise ValueError(
            f"in the JVP rule of tape entry {_entry(node)}: the rule gave a tangent of shape "
            f"{t.shape} for an output of shape {node.data.shape}; a tangent must have the output's "
            f"shape or one that broadcasts to it (a transposed or flattened tangent is a bug in "
            f"the rule)") from None


def _entry(node):
    return (f"{node.name or ''}{' = ' if node.name else ''}{node._prim.name}"
            f"({_describe(node._inputs)}){_creation_site(node)}")


def _check_saved_values(node, sweep):
    """Raise if a value this entry saved was changed in place after it was recorded."""
    stamp = node._id
    if node._version > stamp or written_after(node.data, stamp):
        what = "its output"
    else:
        changed = [(i, a) for i, (a, v) in enumerate(zip(node._inputs, node._values))
                   if isinstance(a, Tensor) and (a._version > stamp or written_after(v, stamp))]
        if not changed:
            return
        i, a = changed[0]
        what = f"its input {i} ({a.name or 'tensor'} {a.shape} {a.dtype})"
    raise RuntimeError(
        f"{sweep}: the tape entry {_entry(node)} saved the value of {what}, which tinytensor "
        f"modified in place after the entry was recorded (an in-place operator such as += or "
        f"t[i] = v, on it or on a view sharing its memory, an optimizer step, or "
        f"load_state_dict), so its gradient would be computed from the new value. Do the update "
        f"after backward() (forward, backward, step), or use a copy made before the change "
        f"(t.clone() records one; tt.tensor(t.data) is a constant one)")


def _rule_error(err, node, kind, index=-1):
    if isinstance(err, FloatingPointError) or getattr(err, "_tinytensor_entry", False):
        return err
    return _entry_error(err, _rule_context(node, kind, index), node._inputs)


def _rule_context(node, kind, index=-1):
    """"in the VJP rule of tape entry exp(x (3,) float64) for input 0 (...)": where a rule failed
    (also what a compiled program says when the line applying that rule raises)."""
    target = ""
    if index >= 0:
        a = node._inputs[index]
        target = f" for input {index} ({a.name or 'tensor'} {a.shape})" if isinstance(a, Tensor) else ""
    return f"in the {kind} rule of tape entry {_entry(node)}{target}"


def _entry_error(err, context, inputs=()):
    new = _same_kind(err, f"{context}: {type(err).__name__}: {_mixed_devices(inputs) or err}")
    new._tinytensor_entry = True
    return new


# ----- detect_anomaly ---------------------------------------------------------------------------
# Where each tape entry was created, only while detect_anomaly() is on: zero cost otherwise.
_CREATED_AT = IdentityWeakMap()
RETAINED = IdentityWeakMap()     # recorded Tensors whose .grad is kept (Tensor.retain_grad)
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _user_frame():
    for frame in reversed(traceback.extract_stack()[:-1]):
        if not frame.filename.startswith(_PACKAGE_DIR):
            return f"{frame.filename}:{frame.lineno}: {frame.line}"
    return "unknown"


def _creation_site(node):
    site = _CREATED_AT.get(node)
    return f" (created at {site})" if site else ""


class detect_anomaly:
    """`with tt.detect_anomaly():` check every forward value and every gradient for NaN/Inf.

    The first one raises FloatingPointError naming the tape entry (its op, its inputs' names and
    shapes) and the line of user code that created it.

    Examples
    --------
    >>> x = tt.tensor([-1.0], requires_grad=True)
    >>> with tt.detect_anomaly(), np.errstate(invalid="ignore"):
    ...     tt.sqrt(x)
    Traceback (most recent call last):
    ...
    FloatingPointError: detect_anomaly: the forward value of sqrt(tensor (1,) float64) is not finite ...
    """

    def __enter__(self):
        self._prev = STATE.anomaly
        STATE.anomaly = True
        update_hook(ANOMALY_CHECK)

    def __exit__(self, *exc):
        STATE.anomaly = self._prev
        update_hook(ANOMALY_CHECK)


class _AnomalyCheck:
    """STATE.hook inside detect_anomaly(): checks each new Tensor's value."""

    def primitive(self, out, prim, args, params, generic=False):
        _anomaly_check_forward(out, prim, args)


ANOMALY_CHECK = _AnomalyCheck()


def _anomaly_check_forward(out, prim, args):
    site = _user_frame()
    if out.requires_grad:
        _CREATED_AT[out] = site
    if np.issubdtype(out.data.dtype, np.inexact) and not np.all(np.isfinite(out.data)):
        raise FloatingPointError(f"detect_anomaly: the forward value of {prim.name}"
                                 f"({_describe(args)}) is not finite (created at {site})")


def _anomaly_check_gradient(g, node, wrt, kind="gradient"):
    value = g.data if isinstance(g, Tensor) else g
    if not np.all(np.isfinite(value)):
        target = "" if wrt is None else f" for input {wrt.name or ''} {wrt.shape}"
        raise FloatingPointError(f"detect_anomaly: the {kind}{target} from tape entry "
                                 f"{node._prim.name}({_describe(node._inputs)}) is not finite"
                                 f"{_creation_site(node)}")

