"""User primitives (`tt.primitive`): their own rules, whatever the arguments hold.

A user primitive is a `tape.Primitive` with two more promises (README "Guarantees"):

* Tensors inside tuples, lists and dicts are inputs too, as in JAX: the containers are flattened,
  so the tape entry's inputs are the Tensors themselves, and the rules get the containers back
  (values or, while a gradient is recorded, Tensors) and return, for a container argument, a
  gradient (tangent) of the same structure. Without this the forward would run on the Tensors
  inside and record its own NumPy calls: the user's rule would be bypassed without a word.
* The forward runs on plain arrays at the top level: a transform called inside it (tt.vjp in a
  fixed-point solver, say) returns arrays, as it does outside any transform.

Built-in primitives are plain `Primitive`s: the hot path pays nothing for this.
"""

import sys

from . import backend, tape
from .tape import Primitive
from .tensor import Tensor

_CONTAINERS = (tuple, list, dict)


def primitive(fun=None, *, name=None):
    """Declare a new primitive from a NumPy function; give it rules with defvjp/defjvp.

    Use as `@tt.primitive` or `tt.primitive(fun, name="cube")`; it is registered under its name
    (the function's by default; `module.name` for a function named like a built-in, which an
    explicit name= may not take), so `tt.check_rules()` sweeps it.

    Examples
    --------
    >>> @tt.primitive
    ... def cube(x):
    ...     return x ** 3
    >>> cube.defvjp(lambda g, ans, x: 3 * x ** 2 * g)
    <primitive cube>
    >>> cube.defjvp(lambda t, ans, x: 3 * x ** 2 * t)
    <primitive cube>
    >>> x = tt.tensor([1.0, 2.0], requires_grad=True)
    >>> cube(x).sum().backward()
    >>> x.grad
    array([ 3., 12.])
    """
    if fun is None:
        return lambda f: UserPrimitive(f, name)
    return UserPrimitive(fun, name)


class UserPrimitive(Primitive):
    """What `tt.primitive` makes: a Primitive whose container arguments are flattened."""

    lists_are_arrays = False      # its containers hold its Tensor inputs (flattened above)


    def __init__(self, fun, name=None, nargs=None, **options):
        if name is None:
            name = getattr(fun, "__name__", None)
            table = sys.modules.get(__package__ + ".ops.table")
            if table is not None and name in table.BUILTIN:
                # a function named like a built-in (autograd's define_gradient.py defines its own
                # logsumexp): registered under its module too, never over the built-in's entry
                name = f"{getattr(fun, '__module__', None) or 'user'}.{name}"
        super().__init__(fun, name, nargs, **options)
        self.fun = _at_top_level(fun)

    # A user's rules may be written with tinytensor's functions, as autograd's are with
    # autograd.numpy (define_gradient.py): on plain arrays (first order) those return Tensors that
    # require no grad, whose values are the rule's result; at higher orders they record.
    def defvjp(self, *rules):
        return super().defvjp(*[_values_out(r) for r in rules])

    def defjvp(self, *rules):
        return super().defjvp(*[_values_out(r) for r in rules])

    def defjvp_joint(self, rule):
        return super().defjvp_joint(_values_out(rule))

    def __call__(self, *args, **params):
        for a in args:
            if isinstance(a, _CONTAINERS) and _holds_tensor(a):
                return _flat_call(self, args, params)
        out = Primitive.__call__(self, *args, **params)
        if isinstance(out, Tensor) and out.requires_grad and out._prim is not self:
            # given no Tensor, the forward computed on Tensors found elsewhere (closed over, or
            # inside an object): recorded by its own operations, the rules would be bypassed
            raise TypeError(
                f"{self.name}: the forward returned a Tensor that requires grad, computed from "
                f"Tensors it was not given as arguments (a closed-over Tensor, or one inside an "
                f"object), so {self.name}'s own rules would be bypassed. Pass them as arguments "
                f"(tuples, lists and dicts of Tensors are fine), or use their values (t.detach())")
        return out


def _plain(x):
    if isinstance(x, Tensor) and not x.requires_grad:
        return x.data
    if isinstance(x, (tuple, list)):
        items = [_plain(v) for v in x]
        return type(x)(*items) if hasattr(x, "_fields") else type(x)(items)     # namedtuples too
    return x


def _values_out(rule):
    """rule, with a result that is a Tensor requiring no grad (or a tuple of them) given as its values."""
    if rule is None:
        return None

    def values_out(*args, **params):
        return _plain(rule(*args, **params))
    values_out.__name__ = getattr(rule, "__name__", "rule")
    values_out.__wrapped__ = rule
    return values_out


def _at_top_level(fun):
    """`fun` run as plain NumPy: transforms inside it see no enclosing transform (nor tt.compile's
    recording: the primitive's own entry is what the program records)."""
    from . import tape
    from .state import STATE, update_hook

    def forward(*args, **params):
        depth, recorder = STATE.depth, STATE.recorder
        STATE.depth, STATE.recorder = 0, None
        if recorder is not None:
            update_hook(tape.ANOMALY_CHECK)
        try:
            return fun(*args, **params)
        finally:
            STATE.depth, STATE.recorder = depth, recorder
            if recorder is not None:
                update_hook(tape.ANOMALY_CHECK)

    forward.__wrapped__ = fun          # inspect.signature sees the user's parameters
    forward.__name__ = getattr(fun, "__name__", "forward")
    forward.__doc__ = getattr(fun, "__doc__", None)
    return forward


def _holds_tensor(tree):
    values = tree.values() if isinstance(tree, dict) else tree
    for v in values:
        if isinstance(v, Tensor) or (isinstance(v, _CONTAINERS) and _holds_tensor(v)):
            return True
    return False


def _flat_call(prim, args, params):
    """prim(*args) with each container argument that holds Tensors flattened into its leaves."""
    from .transforms import tree_flatten
    layout = []     # per argument: None (passed as it is) or (structure, number of leaves)
    leaves = []
    for a in args:
        if isinstance(a, _CONTAINERS) and _holds_tensor(a):
            inner, structure = tree_flatten(a)
            layout.append((structure, len(inner)))
            leaves.extend(inner)
        else:
            layout.append(None)
            leaves.append(a)
    return _flat_primitive(prim, tuple(layout))(*leaves, **params)


def _flat_primitive(prim, layout):
    """A Primitive on the leaves (not registered: the tape shows it under prim's name), whose
    rules are prim's own, called with the containers rebuilt."""
    from .transforms import tree_flatten, tree_unflatten

    def rebuild(leaves):
        args, at = [], 0
        for entry in layout:
            if entry is None:
                args.append(leaves[at])
                at += 1
            else:
                structure, n = entry
                args.append(tree_unflatten(structure, list(leaves[at:at + n])))
                at += n
        return args

    where = []      # leaf -> (argument index, position inside it or None)
    for i, entry in enumerate(layout):
        where.extend([(i, None)] if entry is None else [(i, k) for k in range(entry[1])])

    flat = Primitive.__new__(Primitive)
    flat.__dict__.update(prim.__dict__)       # name, options, ... (whatever a Primitive holds)
    forward = prim.fun
    flat.fun = lambda *leaves, **params: forward(*rebuild(leaves), **params)
    flat.nargs = len(where)
    flat.joint_vjp = flat.joint_jvp = flat.jvps = None
    last = {}       # one rule call per (argument, node): its gradient serves every leaf in it

    def argument_gradient(i, g, ans, leaves, params):
        memo = last.get(i)
        if memo is not None and memo[0] is g and memo[1] is ans and memo[2] is leaves[0]:
            return memo[3]
        args = rebuild(leaves)
        if prim.vjps is not None:
            result = prim.vjps[i](g, ans, *args, **params)
        elif prim.joint_vjp is not None:
            parts = prim.joint_vjp(g, ans, *args, **params)
            result = (parts if isinstance(parts, (tuple, list)) else (parts,))[i]
        else:
            raise tape._missing_rule(prim.name, "VJP", "defvjp")
        last[i] = (g, ans, leaves[0], result)
        return result

    def leaf_rule(j):
        i, k = where[j]

        def rule(g, ans, *leaves, **params):
            result = argument_gradient(i, g, ans, leaves, params)
            if k is None or result is None:
                return result
            parts, _ = tree_flatten(result)
            if len(parts) != layout[i][1]:
                raise ValueError(
                    f"{prim.name}: argument {i} is a {type(rebuild(leaves)[i]).__name__} of "
                    f"{layout[i][1]} leaves, so its VJP rule must return gradients of the same "
                    f"structure (one per leaf, None for none); it returned {len(parts)}")
            return parts[k]

        return rule

    flat.vjps = tuple(leaf_rule(j) for j in range(len(where)))

    def joint_jvp(tangents, ans, *leaves, **params):
        args = rebuild(leaves)
        per_argument = {}
        for (i, _), t in zip(where, tangents):
            per_argument.setdefault(i, []).append(t)
        if prim.jvps is None and prim.joint_jvp is None:
            raise tape._missing_rule(prim.name, "JVP", "defjvp")
        structured = []
        for i, entry in enumerate(layout):
            ts = per_argument.get(i, [None])
            if all(t is None for t in ts):
                structured.append(None)
            elif entry is None:
                structured.append(ts[0])
            else:   # zeros for the leaves with no tangent, so the rule sees the whole structure
                leaves_i = tree_flatten(args[i])[0]
                ts = [_zero_like(x) if t is None else t for t, x in zip(ts, leaves_i)]
                structured.append(tree_unflatten(entry[0], ts))
        if prim.joint_jvp is not None:
            return prim.joint_jvp(structured, ans, *args, **params)
        total = None
        for rule, t in zip(prim.jvps, structured):
            if t is not None:
                d = rule(t, ans, *args, **params)
                if d is not None:
                    total = d if total is None else total + d
        return total

    flat.joint_jvp = joint_jvp
    return flat


def _zero_like(x):
    """A zero tangent for a leaf with none (None for a leaf that is not a number or array)."""
    value = x.data if isinstance(x, Tensor) else x
    if hasattr(value, "shape"):
        return backend.namespace(value).zeros_like(value)
    return 0.0 if isinstance(value, (int, float, complex)) else None


tape.primitive = primitive    # the old path, tinytensor.tape.primitive (tape imports no user_primitives)
