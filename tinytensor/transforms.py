"""Function transforms: vjp, jvp, grad, value_and_grad, jacobian, hvp.

Each transform calls `f` on fresh input Tensors (sharing the caller's arrays: no copy), records
`f` on the tape, and sweeps it: `vjp` with `tape.reverse_sweep`, `jvp` with
`tape.forward_sweep`. The others are a few lines over those two; `value_and_grad` at the top
level, the functional training step, does vjp's steps in one frame. While `tt.compile` records
a function (`_TRACER` is set), a top-level transform sweeps with the recorder's sweeps instead
and returns Tensors, so the program captures the reverse sweep and what follows it.

Arguments may be arrays, Python numbers, Tensors, or nested tuples, lists and dicts of them
(pytrees; `None` holds no leaf). Results keep the arguments' structure and are NumPy arrays.

Higher order. A transform called while another one is tracing its function (the nesting
depth is above 0) must return something the outer transform can differentiate, so it
  * makes its inputs new nodes on the outer tape (a recorded identity of an outer Tensor), never
    the outer Tensor itself: an inner grad then cannot confuse its own input with an outer
    variable the function closes over ("perturbation confusion");
  * sweeps with create_graph=True and returns Tensors, recorded on the outer tape;
  * takes a JVP by transposing the VJP, since the forward sweep gives plain arrays: the VJP
    u -> J^T u is linear in u, so J t is the gradient of <J^T u, t> with respect to u.
So grad(grad(f)), jacobian(grad(f)) (either mode) and hvp compose to any depth.
"""

import contextlib
import functools
import math
from collections import OrderedDict

import numpy as np

from . import backend, ops
from .tape import STATE, _fresh, _seed, forward_sweep, reverse_sweep
from .tensor import Tensor, _init_untracked

# The recording of `tt.compile` (compile._Tracer) while it traces a function, else None. A
# transform at the top level then sweeps with the tracer's recording sweeps and hands back its
# Tensors instead of arrays, so that what f does next with them is recorded too.
_TRACER = None

__all__ = ["vjp", "jvp", "grad", "value_and_grad", "jacobian", "hvp", "tree_flatten", "tree_unflatten"]


# ----- nested containers (pytrees) -----------------------------------------------------------------
class _Leaf:
    __slots__ = ()

    def __repr__(self):
        return "*"


LEAF = _Leaf()   # marks where a leaf sits in a structure
_CONTAINERS = (tuple, list, dict)   # exact types: subclasses (namedtuple, OrderedDict) take the long way


def tree_flatten(tree):
    """(leaves, structure): the leaves in order, and `tree` with each leaf replaced by LEAF.

    Containers are tuples (namedtuples included), lists and dicts, nested; `None` is an empty
    container. Everything else (arrays, numbers, Tensors) is a leaf.
    """
    t = type(tree)
    if t is list or t is tuple or t is dict:              # the common flat case, in one step
        values = tree.values() if t is dict else tree
        for v in values:
            if v is None or type(v) in _CONTAINERS:
                break
        else:
            if t is dict:
                return list(values), dict.fromkeys(tree, LEAF)
            return list(tree), t((LEAF,) * len(tree))
    leaves = []

    def strip(node):
        if node is None:
            return None
        if isinstance(node, dict):
            return _rebuild(node, {k: strip(v) for k, v in node.items()})
        if isinstance(node, (tuple, list)):
            return _rebuild(node, [strip(v) for v in node])
        leaves.append(node)
        return LEAF

    return leaves, strip(tree)


def tree_unflatten(structure, leaves):
    """The inverse of tree_flatten: put `leaves`, in order, where `structure` has LEAF."""
    t = type(structure)
    if t is list or t is tuple or t is dict:              # the common flat case, in one step
        for v in (structure.values() if t is dict else structure):
            if v is not LEAF:
                break
        else:
            if t is dict:
                return dict(zip(structure, leaves))
            items = leaves if type(leaves) is list else list(leaves)
            return t(items) if len(items) == len(structure) else t(items[:len(structure)])
    leaves = iter(leaves)

    def fill(node):
        if node is LEAF:
            return next(leaves)
        if isinstance(node, dict):
            return _rebuild(node, {k: fill(v) for k, v in node.items()})
        if isinstance(node, (tuple, list)):
            return _rebuild(node, [fill(v) for v in node])
        return node   # None

    return fill(structure)


def _rebuild(node, children):
    if isinstance(node, dict):
        return OrderedDict(children) if isinstance(node, OrderedDict) else dict(children)
    if isinstance(node, tuple):
        return type(node)(*children) if hasattr(node, "_fields") else tuple(children)
    return list(children)


def _flatten_as(structure, tree, what):
    """The leaves of `tree`, which must have `structure` (dict keys in any order; a list may
    stand for a tuple); raises ValueError naming where they differ."""
    leaves = []

    def walk(node, sub, path):
        if node is LEAF:
            if isinstance(sub, (tuple, list, dict)) or sub is None:
                raise ValueError(f"{what}: expected an array at {path or 'the top'}, got "
                                 f"{type(sub).__name__}")
            leaves.append(sub)
        elif node is None:
            if sub is not None:
                raise ValueError(f"{what}: expected None at {path or 'the top'}, got {type(sub).__name__}")
        elif isinstance(node, dict):
            if not isinstance(sub, dict) or set(sub) != set(node):
                got = f"keys {_keys(sub)}" if isinstance(sub, dict) else type(sub).__name__
                raise ValueError(f"{what}: expected a dict with keys {_keys(node)} at "
                                 f"{path or 'the top'}, got {got}")
            for k in node:
                walk(node[k], sub[k], f"{path}[{k!r}]")
        else:
            if not isinstance(sub, (tuple, list)) or len(sub) != len(node):
                got = f"length {len(sub)}" if isinstance(sub, (tuple, list)) else type(sub).__name__
                raise ValueError(f"{what}: expected a {type(node).__name__} of length {len(node)} at "
                                 f"{path or 'the top'}, got {got}")
            for i, (n, s) in enumerate(zip(node, sub)):
                walk(n, s, f"{path}[{i}]")

    walk(structure, tree, "")
    return leaves


def _keys(d):
    return "[" + ", ".join(sorted(map(repr, d))) + "]"


# ----- tracing a function on fresh inputs -------------------------------------------------------------
class _Nesting:
    depth = 0   # how many transforms are tracing their function right now


@contextlib.contextmanager
def _recording(deeper=1):
    """Recording on (a transform ignores an outer no_grad), `deeper` levels deeper."""
    previous, STATE.grad_enabled = STATE.grad_enabled, True
    _Nesting.depth += deeper
    try:
        yield
    finally:
        _Nesting.depth -= deeper
        STATE.grad_enabled = previous


def _tracked(x):
    return isinstance(x, Tensor) and x.requires_grad


def _value(x):
    return x.data if isinstance(x, Tensor) else backend.asarray(x)   # a CuPy array stays one


def _input(x, nested):
    """A new node to differentiate with respect to, holding the value of leaf `x`."""
    value = _value(x)
    if value.dtype.kind not in "fc":
        raise TypeError(f"can only differentiate with respect to floating-point inputs; got a "
                        f"{type(x).__name__} of dtype {value.dtype} and shape {value.shape}. Pass floats "
                        f"(2.0, not 2; x.astype(float)) or leave that argument out of argnums")
    if nested and _tracked(x):
        return ops.reshape(x, value.shape)   # a recorded identity: new node, still on the outer tape
    t = Tensor.__new__(Tensor)               # the caller's array itself: Tensor() would copy it
    _init_untracked(t, value)
    t.requires_grad = True
    return t


def _trace(f, primals):
    """Run f(*primals) on fresh inputs. Returns (inputs, structure of primals, out, nested)."""
    if not isinstance(primals, (tuple, list)):
        raise TypeError(f"primals must be a tuple, got {type(primals).__name__}")
    nested = _Nesting.depth > 0
    leaves, structure = tree_flatten(tuple(primals))
    inputs = [_input(x, nested) for x in leaves]
    with _recording():
        out = f(*tree_unflatten(structure, inputs))
    return inputs, structure, out, nested


def _outermost(tree):
    """Results at the outermost level are arrays (Tensors while tt.compile records)."""
    if _TRACER is not None:
        return tree
    leaves, structure = tree_flatten(tree)
    return tree_unflatten(structure, [_value(x) for x in leaves])


def _float_dtype(value):
    return value.dtype if value.dtype.kind in "fc" else np.dtype(np.float64)


def _zeros(x):
    value = _value(x)
    return backend.namespace(value).zeros(value.shape, _float_dtype(value))


def _checked(seeds, like, what, nested):
    """Check that each seed (cotangent or tangent) has its partner's shape, and make it an array
    of the partner's dtype (rules take arrays); inside a transform a Tensor seed stays one."""
    out = []
    for i, (s, x) in enumerate(zip(seeds, like)):
        x = _value(x)
        if not (nested and isinstance(s, Tensor)):
            s = backend.asarray(s.data if isinstance(s, Tensor) else s, _float_dtype(x), like=x, what=what)
        if s.shape != x.shape:
            raise ValueError(f"{what}: leaf {i} has shape {s.shape} but must have shape {x.shape}")
        out.append(s)
    return out


# ----- the two transforms everything else is built on ---------------------------------------------
def vjp(f, *primals):
    """Reverse mode: (out, vjp_fn), where out = f(*primals).

    vjp_fn(cotangent) takes a cotangent with out's structure and leaf shapes and returns a tuple,
    one entry per primal with that primal's structure: the gradient of <out, cotangent>.
    """
    inputs, structure, out, nested = _trace(f, primals)
    outs, out_structure = tree_flatten(out)

    def vjp_fn(cotangent):
        cotangents = _checked(_flatten_as(out_structure, cotangent, "vjp cotangent"), outs,
                              "vjp cotangent", nested)
        roots = [(o, c) for o, c in zip(outs, cotangents) if _tracked(o)]
        grads = {}
        if roots and nested:
            with _recording(0):
                grads = reverse_sweep([o for o, _ in roots], [c for _, c in roots], wrt=inputs,
                                      create_graph=True)
        elif roots and _TRACER is not None:
            grads = _TRACER.reverse_sweep([o for o, _ in roots], [c for _, c in roots], inputs)
            return tree_unflatten(structure, [_traced_gradient(grads.get(x), x) for x in inputs])
        elif roots:
            grads = reverse_sweep([o for o, _ in roots], [c for _, c in roots], wrt=inputs)
        if nested:
            return tree_unflatten(structure, [_gradient(grads.get(x), x, True) for x in inputs])
        handed = {id(c) for c in cotangents} | {id(x.data) for x in inputs}
        return tree_unflatten(structure, [_handed_out(grads.get(x), x, handed) for x in inputs])

    return (out if nested else _outermost(out)), vjp_fn


def jvp(f, primals, tangents):
    """Forward mode: (out, tangent_out) with out = f(*primals) and tangent_out = J @ tangents.

    `primals` and `tangents` are tuples with the same structure and leaf shapes; tangent_out has
    out's structure.
    """
    out, jvp_fn = _linearize(f, primals)
    return out, jvp_fn(*tangents)


def _gradient(g, x, nested):
    if g is None:   # the output does not depend on x
        return _zeros(x)
    if nested:
        return g if not isinstance(g, Tensor) or g.dtype == x.dtype else ops.astype(g, x.dtype)
    return backend.copy(_value(g), x.dtype)


def _handed_out(g, x, handed):
    """The gradient for x as an array of x's dtype that the caller may keep and write into.
    A fresh result of a rule is handed out as it is (no copy of every weight matrix per step);
    anything that may be shared (a view, an input's or a cotangent's own array, an array
    already handed out for another input) is copied."""
    if g is None:
        return _zeros(x)
    if not _fresh(g, x.data.dtype) or id(g) in handed:
        g = backend.copy(_value(g), x.data.dtype)
    handed.add(id(g))
    return g


def _traced_gradient(g, x):
    """While tt.compile records: the gradient Tensor itself (the program returns fresh arrays)."""
    if g is None:
        return _zeros(x)
    if isinstance(g, Tensor) and g.dtype != x.dtype:
        return ops.astype(g, x.dtype)
    return g


def _linearize(f, primals):
    """(out, jvp_fn) with jvp_fn(*tangents) = J @ tangents, f traced once for any number of calls."""
    inputs, structure, out, nested = _trace(f, primals)
    outs, out_structure = tree_flatten(out)
    tracked = [i for i, o in enumerate(outs) if _tracked(o)]
    if nested:   # J^T u for symbolic u (zeros: only the dependence on u matters, and it is linear)
        dummies = [Tensor(np.zeros_like(outs[i].data), requires_grad=True) for i in tracked]
        with _recording(0):
            transposed = reverse_sweep([outs[i] for i in tracked], dummies, wrt=inputs, create_graph=True)

    def jvp_fn(*tangents):
        seeds = _checked(_flatten_as(structure, tuple(tangents), "jvp tangents"), inputs,
                         "jvp tangents", nested)
        result = {}
        if nested and tracked:   # J t = d<J^T u, t>/du
            pairs = [(transposed[x], t) for x, t in zip(inputs, seeds) if _tracked(transposed.get(x))]
            with _recording(0):
                d = reverse_sweep([p for p, _ in pairs], [t for _, t in pairs], wrt=dummies,
                                  create_graph=True) if pairs else {}
            result = {i: d.get(u) for i, u in zip(tracked, dummies)}
        elif tracked:
            tangent_of = dict(zip(inputs, seeds))
            sweep = forward_sweep if _TRACER is None else _TRACER.forward_sweep
            result = {i: sweep(outs[i], tangent_of) for i in tracked}
        return tree_unflatten(out_structure, [_zeros(o) if result.get(i) is None else result[i]
                                              for i, o in enumerate(outs)])

    return (out if nested else _outermost(out)), jvp_fn


# ----- the transforms on top ------------------------------------------------------------------------
def _select(args, argnums, name):
    """(primal tree, rebuild): args[argnums] (a tuple of them for a tuple argnums), and a function
    putting new values of those back among the other arguments."""
    if type(argnums) is int and 0 <= argnums < len(args):     # the common case, quickly

        def rebuild_one(chosen):
            new = list(args)
            new[argnums] = chosen
            return new

        return args[argnums], rebuild_one
    many = isinstance(argnums, (tuple, list))
    nums = tuple(argnums) if many else (argnums,)
    if not all(isinstance(i, int) and -len(args) <= i < len(args) for i in nums):
        raise ValueError(f"{name}: argnums {argnums!r} out of range for {len(args)} positional argument(s)")
    nums = tuple(i % len(args) for i in nums)
    if len(set(nums)) != len(nums):
        raise ValueError(f"{name}: argnums {argnums!r} repeats an argument")

    def rebuild(chosen):
        new = list(args)
        for i, value in zip(nums, chosen if many else (chosen,)):
            new[i] = value
        return new

    return (tuple(args[i] for i in nums) if many else args[nums[0]]), rebuild


def value_and_grad(f, argnums=0):
    """A function returning (f(*args), gradient) for scalar-valued f.

    The gradient has the structure and shapes of args[argnums], or is a tuple of them when
    argnums is a tuple.
    """
    @functools.wraps(f, updated=())
    def value_and_grad_f(*args, **kwargs):
        primal, rebuild = _select(args, argnums, "grad")
        if _Nesting.depth == 0 and _TRACER is None:
            return _value_and_grad_arrays(f, primal, rebuild, kwargs)
        out, vjp_fn = vjp(lambda p: f(*rebuild(p), **kwargs), primal)
        _check_scalar(out)
        return out, vjp_fn(np.ones_like(_value(out)))[0]

    return value_and_grad_f


def _check_scalar(out):
    if isinstance(out, Tensor) and out.data.size == 1:
        return
    if isinstance(out, (tuple, list, dict)) or np.size(_value(out)) != 1:
        shape = np.shape(out) if not isinstance(out, (tuple, list, dict)) else type(out).__name__
        raise TypeError(f"grad needs a scalar-valued function, but f returned {shape}; use "
                        f"tt.jacobian(f) for the full Jacobian or tt.vjp(f, x) for J^T v")


def _value_and_grad_arrays(f, primal, rebuild, kwargs):
    """value_and_grad at the top level, arrays in and out: vjp's steps in one frame (a training
    step calls this every minibatch, so its Python overhead is the functional path's cost)."""
    # The common case, without the general pytree walk: a list, tuple or dict of float arrays
    # (or one array), each made an input Tensor sharing the caller's array.
    kind = type(primal)
    leaves = primal if kind is list or kind is tuple else (
        primal.values() if kind is dict else (primal,) if kind is np.ndarray else None)
    inputs = []
    for x in leaves if leaves is not None else ():
        if type(x) is not np.ndarray or x.dtype.kind != "f":
            inputs, leaves = [], None
            break
        t = Tensor.__new__(Tensor)
        _init_untracked(t, x)
        t.requires_grad = True
        inputs.append(t)
    if leaves is None:
        leaves, structure = tree_flatten(primal)
        inputs = [_input(x, False) for x in leaves]
        traced = tree_unflatten(structure, inputs)
    else:
        structure = None
        traced = (inputs if kind is list else tuple(inputs) if kind is tuple else
                  dict(zip(primal, inputs)) if kind is dict else inputs[0])
    previous, STATE.grad_enabled = STATE.grad_enabled, True
    _Nesting.depth += 1
    try:
        out = f(*rebuild(traced), **kwargs)
    finally:
        _Nesting.depth -= 1
        STATE.grad_enabled = previous
    if not (type(out) is Tensor and out.requires_grad and out.data.size == 1):
        _check_scalar(out)
        return _value(out), _like(primal, structure, [_zeros(x) for x in inputs])
    value = out.data
    seed = _seed(value)        # read-only, shared: never handed out
    grads = reverse_sweep([out], [seed], wrt=inputs)
    handed = {id(x.data) for x in inputs}
    handed.add(id(seed))
    results = [_handed_out(grads.get(x), x, handed) for x in inputs]
    return value, _like(primal, structure, results)


def _like(primal, structure, leaves):
    """`leaves` in primal's structure (`structure`, or None for _value_and_grad_arrays's
    common case: a list, tuple or dict of arrays, or one array)."""
    if structure is not None:
        return tree_unflatten(structure, leaves)
    kind = type(primal)
    return (leaves if kind is list else tuple(leaves) if kind is tuple else
            dict(zip(primal, leaves)) if kind is dict else leaves[0])


def grad(f, argnums=0):
    """A function returning the gradient of scalar-valued f with respect to args[argnums]
    (same structure and shapes; a tuple of them for a tuple argnums)."""
    value_and_grad_f = value_and_grad(f, argnums)

    @functools.wraps(f, updated=())
    def grad_f(*args, **kwargs):
        return value_and_grad_f(*args, **kwargs)[1]

    return grad_f


def jacobian(f, argnums=0, mode="rev"):
    """A function returning the Jacobian of f with respect to args[argnums].

    For an output leaf of shape O and an input leaf of shape I the block has shape O + I; blocks
    nest as out's structure around args[argnums]'s structure. mode="rev": one VJP per output
    element; mode="fwd": one JVP per input element (cheaper when inputs are fewer).
    """
    if mode not in ("rev", "fwd"):
        raise ValueError(f"jacobian: mode must be 'rev' or 'fwd', got {mode!r}")

    @functools.wraps(f, updated=())
    def jacobian_f(*args, **kwargs):
        primal, rebuild = _select(args, argnums, "jacobian")
        g = lambda p: f(*rebuild(p), **kwargs)
        ins, in_structure = tree_flatten(primal)
        if mode == "rev":
            out, vjp_fn = vjp(g, primal)
            outs, out_structure = tree_flatten(out)
            rows = [_ravel(tree_flatten(vjp_fn(tree_unflatten(out_structure, e))[0])[0])
                    for e in _basis(outs)]
            matrix = np.stack(rows) if rows else None
        else:
            out, jvp_fn = _linearize(g, (primal,))
            outs, out_structure = tree_flatten(out)
            columns = [_ravel(tree_flatten(jvp_fn(tree_unflatten(in_structure, e)))[0])
                       for e in _basis(ins)]
            matrix = np.stack(columns, axis=1) if columns else None
        return tree_unflatten(out_structure, [tree_unflatten(in_structure, row)
                                              for row in _blocks(matrix, outs, ins)])

    return jacobian_f


def hessian(f, argnum=0, *, argnums=None, mode="rev"):
    """A function returning the Hessian of scalar f with respect to args[argnum] (autograd's
    `argnum`, or JAX's `argnums`): for an input of shape I, shape I + I (JAX's out.shape +
    in.shape, with the gradient as the output); blocks nest as jacobian's for a tuple or a pytree.

    Reverse over reverse by default: the gradient is recorded once (create_graph) and swept
    back once per input element. Measured 1.3-1.6x faster than forward over reverse (mode="fwd",
    one forward sweep of the same tape per element) on a GP likelihood and on Rosenbrock with
    20 and 100 variables (benchmarks/hessian_modes.py)."""
    argnums = argnum if argnums is None else argnums
    return jacobian(grad(f, argnums), argnums, mode=mode)


def hvp(f, primals, tangents):
    """The Hessian of scalar f at `primals` times `tangents`, by forward over reverse mode (the
    gradient recorded with create_graph, then a JVP along it). `primals` and `tangents` are
    tuples; the result has the structure of `primals[0]`, or is a tuple for several primals."""
    if not (isinstance(primals, (tuple, list)) and isinstance(tangents, (tuple, list))):
        raise TypeError(f"hvp: primals and tangents must be tuples, got {type(primals).__name__} and "
                        f"{type(tangents).__name__}; write tt.hvp(f, (x,), (v,))")
    argnums = 0 if len(primals) == 1 else tuple(range(len(primals)))
    return jvp(grad(f, argnums), tuple(primals), tuple(tangents))[1]


# ----- flat views for jacobian ------------------------------------------------------------------------
def _ravel(leaves):
    """One flat vector from arrays or Tensors (np.concatenate hands Tensors to tinytensor)."""
    return np.concatenate([np.reshape(x, -1) for x in leaves]) if leaves else np.zeros(0)


def _basis(leaves):
    """For each element of the leaves, in order: leaves of zeros (on each leaf's device) with a
    single 1 there."""
    values = [_value(x) for x in leaves]
    for j, v in enumerate(values):
        for k in range(v.size):
            basis = [backend.namespace(w).zeros(w.shape, _float_dtype(w)) for w in values]
            basis[j].reshape(-1)[k] = 1     # a view of the fresh array
            yield basis


def _blocks(matrix, outs, ins):
    """Cut the (outputs x inputs) matrix into one block per (output leaf, input leaf), shaped
    out.shape + in.shape; a list (per output) of lists (per input)."""
    out_shapes = [np.shape(_value(o)) for o in outs]
    in_shapes = [np.shape(_value(x)) for x in ins]
    out_at = np.cumsum([0] + [math.prod(s) for s in out_shapes])
    in_at = np.cumsum([0] + [math.prod(s) for s in in_shapes])
    if matrix is None:   # no output or no input element: every block is empty
        dtype = np.result_type(*[_zeros(x) for x in outs + ins]) if outs + ins else np.float64
        xp = backend.namespace(_value((outs + ins)[0])) if outs + ins else np
        return [[xp.zeros(so + si, dtype) for si in in_shapes] for so in out_shapes]
    return [[np.reshape(matrix[out_at[i]:out_at[i + 1], in_at[j]:in_at[j + 1]], so + si)
             for j, si in enumerate(in_shapes)] for i, so in enumerate(out_shapes)]
