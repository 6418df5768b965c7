"""Function transforms: vjp, jvp, grad, value_and_grad, jacobian, hvp.

Each transform calls `f` on fresh input Tensors (sharing the caller's arrays: no copy), records
`f` on the tape, and sweeps it: `vjp` with `tape.reverse_sweep`, `jvp` with
`tape.forward_sweep`. The others are a few lines over those two; `value_and_grad` at the top
level, the functional training step, does vjp's steps in one frame. While `tt.compile` records
a function (`STATE.recorder` is set), the sweeps note each rule they apply on the recorder, and a
top-level transform returns Tensors, so the program captures the sweep and what follows it.

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
import itertools
import math
from collections import Counter, OrderedDict, defaultdict

import numpy as np

from . import backend, ops
from .ops.batching import BatchArray
from .state import STATE, number_value, traced_data
from .tape import _is_fresh, _seed, forward_sweep, reverse_sweep
from .tensor import Tensor, _make
from .vmap import materialize, rewrap, vmap

__all__ = ["vjp", "jvp", "grad", "value_and_grad", "jacobian", "hvp", "tree_flatten", "tree_unflatten"]


# ----- nested containers (pytrees) -----------------------------------------------------------------
class _Leaf:
    __slots__ = ()

    def __repr__(self):
        return "*"


LEAF = _Leaf()   # marks where a leaf sits in a structure
_CONTAINERS = (tuple, list, dict)   # and their subclasses (namedtuple, OrderedDict): the long way


def tree_flatten(tree):
    """(leaves, structure): the leaves in order, and `tree` with each leaf replaced by LEAF.

    Containers are tuples (namedtuples included), lists and dicts, nested; `None` is an empty
    container. Everything else (arrays, numbers, Tensors) is a leaf.
    """
    t = type(tree)
    if t is list or t is tuple or t is dict:              # the common flat case, in one step
        values = tree.values() if t is dict else tree
        for v in values:
            if v is None or isinstance(v, _CONTAINERS):    # (a namedtuple, an OrderedDict inside)
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

    try:
        return leaves, strip(tree)
    finally:
        strip = None    # noqa: F841  the closure refers to itself: a cycle holding the leaves (Tensors,
        #                 a whole tape) until the garbage collector runs, unless cut here


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

    try:
        return fill(structure)
    finally:
        fill = None     # noqa: F841  (as in tree_flatten: no reference cycle)


def _rebuild(node, children):
    if isinstance(node, dict):
        if isinstance(node, defaultdict):          # (its factory kept)
            return defaultdict(node.default_factory, children)
        if isinstance(node, Counter):
            return Counter(children)
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

    try:
        walk(structure, tree, "")
    finally:
        walk = None     # noqa: F841  (as in tree_flatten: no reference cycle)
    return leaves


def _keys(d):
    return "[" + ", ".join(sorted(map(repr, d))) + "]"


# ----- tracing a function on fresh inputs -------------------------------------------------------------
@contextlib.contextmanager
def _recording(deeper=1):
    """Recording on (a transform ignores an outer no_grad), `deeper` levels deeper (STATE.depth:
    how many transforms are tracing their function in this thread)."""
    previous, STATE.grad_enabled = STATE.grad_enabled, True
    STATE.depth += deeper
    try:
        yield
    finally:
        STATE.depth -= deeper
        STATE.grad_enabled = previous


def _tracked(x):
    return isinstance(x, Tensor) and x.requires_grad


def _value(x):
    if isinstance(x, Tensor):
        return x.data
    return backend.asarray(number_value(x))     # a CuPy array stays one


def _input(x, nested):
    """A new node to differentiate with respect to, holding the value of leaf `x`."""
    value = _value(x)
    if value.dtype.kind == "c":
        raise TypeError(f"cannot differentiate with respect to complex inputs (got a {type(x).__name__} "
                        f"of dtype {value.dtype} and shape {value.shape}): tinytensor does not "
                        f"differentiate complex functions; pass the real and imaginary parts as two "
                        f"float arrays (z.real, z.imag)")
    if value.dtype.kind != "f":
        raise TypeError(f"can only differentiate with respect to floating-point inputs; got a "
                        f"{type(x).__name__} of dtype {value.dtype} and shape {value.shape}. Pass floats "
                        f"(2.0, not 2; x.astype(float)) or leave that argument out of argnums")
    if nested and _tracked(x):
        return ops.reshape(x, value.shape)   # a recorded identity: new node, still on the outer tape
    return _traced_leaf(_make(value, requires_grad=True))   # the caller's array itself: Tensor()
    #                                                             would copy it


def _traced_leaf(t):
    """t, traced where tt.compile records in this thread and t holds a traced value."""
    return t if STATE.recorder is None else STATE.recorder.leaf(t)


def _trace(f, primals):
    """Run f(*primals) on fresh inputs. Returns (inputs, structure of primals, out, nested)."""
    if not isinstance(primals, (tuple, list)):
        raise TypeError(f"primals must be a tuple, got {type(primals).__name__}")
    nested = STATE.depth > 0
    leaves, structure = tree_flatten(tuple(primals))
    inputs = [_input(x, nested) for x in leaves]
    with _recording():
        out = f(*tree_unflatten(structure, inputs))
    return inputs, structure, out, nested


def _ones_seed(out):
    """The seed of grad's sweep: ones of out's shape and dtype, a constant (made from the shape
    and dtype alone: tt.compile's recording sees no computation on the value)."""
    value = _value(out)
    return backend.namespace(value).ones(np.shape(value), value.dtype)


def _outermost(tree):
    """Results at the outermost level are arrays (while tt.compile records, arrays whose NumPy
    operations it records)."""
    leaves, structure = tree_flatten(tree)
    if STATE.recorder is not None:
        return tree_unflatten(structure, [STATE.recorder.array(x) for x in leaves])
    return tree_unflatten(structure, [_value(x) for x in leaves])


def _float_dtype(value):
    dtype = getattr(value, "dtype", None)
    if dtype is None:                   # a Python number (its class: a stand-in's is its value's)
        dtype = np.dtype(value.__class__)
    return dtype if dtype.kind in "fc" else np.dtype(np.float64)


def _zeros(x):
    value = _value(x)
    return backend.namespace(value).zeros(value.shape, _float_dtype(value))


def _checked(seeds, like, what, keep_tensors):
    """Check that each seed (cotangent or tangent) has its partner's shape, and make it an array
    of the partner's dtype (rules take arrays); while recording (`keep_tensors`: inside a
    transform, or given Tensors that require grad) a Tensor seed stays one."""
    out = []
    for i, (s, x) in enumerate(zip(seeds, like)):
        x = _value(x)
        if not (keep_tensors and isinstance(s, Tensor)):
            s = backend.asarray(traced_data(s) if isinstance(s, Tensor) else s, _float_dtype(x), like=x,
                                what=what)    # (tt.compile: a cast of a traced seed is a program line)
        if s.shape != x.shape:
            raise ValueError(f"{what}: leaf {i} has shape {s.shape} but must have shape {x.shape}")
        out.append(s)
    return out


# ----- the borders: what a transform can differentiate ----------------------------------------------
# f must return Tensors computed from the differentiated inputs (README "Guarantees"). The checks
# run only where something is already wrong or unusual: an output that is not a recorded Tensor
# (seen at once), or a sweep that reached no input (then one walk of the tape tells "not computed
# from the inputs", refused, from "computed from them with a zero derivative", kept).
_ZEROS_ON_PURPOSE = "pass allow_unused=True to get zero derivatives on purpose"


def _refuse_output(outs, out, name, allow_unused):
    """f's output (leaves `outs`) holds no recorded Tensor: raise, unless allow_unused."""
    if allow_unused:
        return
    recorder = STATE.recorder       # (tt.compile: a mask inside a transform is a traced Tensor there)
    if recorder is not None and outs and all(isinstance(o, Tensor) and recorder.eagerly_numpy_value(o)
                                             for o in outs):
        out = outs[0].data[()] if len(outs) == 1 and outs[0].ndim == 0 else outs[0].data
        outs = [out]
    if not any(isinstance(o, Tensor) for o in outs):
        kind = type(out).__name__ if outs else f"{type(out).__name__} with no arrays in it"
        raise TypeError(
            f"{name}: f returned a {kind}, not a Tensor, so nothing it computed was recorded and its "
            f"derivative would be zero without a word. Compute the result with tinytensor "
            f"operations on the arguments (float(), math.*, .item(), .numpy() and NumPy on .data "
            f"take values off the tape); {_ZEROS_ON_PURPOSE}")
    shapes = ", ".join(str(o.shape) for o in outs if isinstance(o, Tensor))
    raise ValueError(
        f"{name}: f's output (Tensor of shape {shapes}) is not computed from the differentiated "
        f"argument(s): it requires no gradient (made from constants, from t.detach() or .data, "
        f"under tt.no_grad(), or only by operations without a gradient such as comparisons, "
        f"floor, sign, argmax), so its derivative would be zero without a word. Compute it from the "
        f"arguments with tinytensor operations; {_ZEROS_ON_PURPOSE}")


def _check_reached(roots, inputs, name, allow_unused):
    """A sweep from `roots` reached none of `inputs`: raise if no recorded path leads there."""
    if allow_unused or not inputs or _reaches(roots, inputs):
        return      # connected, with a zero derivative (x * 0, a rule giving None): zeros it is
    raise ValueError(
        f"{name}: f's output is not computed from the differentiated argument(s): no recorded "
        f"operation leads from them to it (it depends only on constants or on other Tensors f "
        f"closes over), so its derivative would be zero without a word. Compute it from the "
        f"arguments; {_ZEROS_ON_PURPOSE}")


def _reaches(roots, targets):
    """Whether a recorded path leads from one of `roots` back to one of `targets` (a depth-first
    walk that stops at the first one found; only nodes newer than the oldest target)."""
    ids = {id(x) for x in targets}
    oldest = min(x._id for x in targets)
    stack = [r for r in roots if _tracked(r)]
    seen = set()
    while stack:
        node = stack.pop()
        if id(node) in ids:
            return True
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node._prim is not None:
            stack.extend(a for a in node._inputs
                         if isinstance(a, Tensor) and a.requires_grad and a._id >= oldest)
    return False


def _tied(results, inputs):
    """Inside a transform, results (gradients, tangents) computed from none of the transform's
    inputs, such as the gradient of a linear function, become recorded nodes that depend on
    them with derivative exactly zero, so that an outer transform sees an output computed from
    its inputs (hvp and grad(grad(f)) of a linear f are zero, not refused). One walk of the tape
    for all results; results that are not recorded at all are tied without one."""
    anchors = [x for x in inputs if x._prim is not None]   # recorded identities of outer Tensors
    if not anchors:
        return results
    tracked = [g for g in results if _tracked(g)]
    connected = bool(tracked) and _reaches(tracked, anchors)
    out = []
    for g, x in zip(results, inputs if len(inputs) == len(results) else [anchors[0]] * len(results)):
        if connected and _tracked(g):
            out.append(g)
            continue
        anchor = x if x._prim is not None else anchors[0]
        value = _value(g)
        never = backend.namespace(value).zeros(value.shape, bool)
        out.append(ops.PUBLIC["where"](never, ops.PUBLIC["sum"](anchor), g))  # = g; d/d anchor = 0
    return out


# ----- the two transforms everything else is built on ---------------------------------------------
def vjp(f, *primals, allow_unused=False):
    """Reverse mode: (out, vjp_fn), where out = f(*primals).

    vjp_fn(cotangent) takes a cotangent with out's structure and leaf shapes and returns a tuple,
    one entry per primal with that primal's structure: the gradient of <out, cotangent>. Given
    Tensors that require grad (inside another transform, say), vjp_fn records, so its result
    can be differentiated again, with respect to the cotangent too.
    f must return Tensors computed from the primals (else TypeError/ValueError);
    `allow_unused=True` gives zero gradients instead.

    Examples
    --------
    >>> out, vjp_fn = tt.vjp(lambda x: 3 * x, np.array([1.0, 2.0]))
    >>> out
    array([3., 6.])
    >>> vjp_fn(np.ones(2))
    (array([3., 3.]),)
    """
    if STATE.batch:
        return _batched_vjp(f, primals, allow_unused, "vjp")
    return _vjp(f, primals, allow_unused, "vjp")


# ----- the transforms inside tt.vmap: each example's derivative (see vmap.py) -----------------------
def _stacked(f, structure, levels, outs_structure):
    """f on the examples stacked along leading axes: a function of stacked inputs (the leaves of
    `structure`) returning stacked outputs; `outs_structure` receives the output's structure."""
    def g(*stacked):
        leaves = tree_flatten(tuple(stacked))[0]
        out = f(*tree_unflatten(structure, [rewrap(x, levels) for x in leaves]))
        outs, out_structure = tree_flatten(out)
        outs_structure[:] = [out_structure]
        return tree_unflatten(out_structure, [materialize(o, levels) for o in outs])
    return g


def _materialized(tree, levels):
    leaves, structure = tree_flatten(tree)
    return tree_unflatten(structure, [materialize(x, levels) for x in leaves])


def _rewrapped(tree, levels):
    leaves, structure = tree_flatten(tree)
    return tree_unflatten(structure, [rewrap(x, levels) for x in leaves])


def _new_levels(created, seeds):
    """The vmap frames batching `seeds` (cotangents, tangents) that were not running when the
    pullback was made (vmap of a pullback: jacrev), or () when there are none."""
    if not STATE.batch or STATE.batch is created:
        return ()
    if not any(type(c) is BatchArray and c.frame not in created for c in seeds):
        return ()
    return tuple(fr for fr in STATE.batch if fr not in created)


def _batched_vjp(f, primals, allow_unused, name, levels=None):
    levels = STATE.batch if levels is None else levels
    structure = tree_flatten(tuple(primals))[1]
    out_structure = []
    g = _stacked(lambda *p: f(*p), structure, levels, out_structure)
    out, fn = _vjp(g, _materialized(tuple(primals), levels), allow_unused, name)

    def vjp_fn(cotangent):
        leaves = _flatten_as(out_structure[0], cotangent, "vjp cotangent")
        return _rewrapped(fn(_materialized(tree_unflatten(out_structure[0], leaves), levels)), levels)

    return _rewrapped(out, levels), vjp_fn


def _batched_jvp(f, primals, tangents, allow_unused, name):
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError(f"{name}: primals and tangents must be tuples")
    out, jvp_fn = _linearized(f, primals, allow_unused, name)
    return out, jvp_fn(*tangents)


def _linearized(f, primals, allow_unused, name, levels=None):
    """_linearize, inside tt.vmap or not: (out, jvp_fn) for each example."""
    levels = STATE.batch if levels is None else levels
    if not levels:
        return _linearize(f, primals, allow_unused, name)
    structure = tree_flatten(tuple(primals))[1]
    g = _stacked(lambda *p: f(*p), structure, levels, [])
    out, jvp_fn = _linearize(g, _materialized(tuple(primals), levels), allow_unused, name)

    def batched_jvp_fn(*tangents):
        return _rewrapped(jvp_fn(*_materialized(tuple(tangents), levels)), levels)

    return _rewrapped(out, levels), batched_jvp_fn


def _batched_value_and_grad(f, argnums, allow_unused, args, kwargs):
    levels = STATE.batch
    primal, rebuild = _select(args, argnums, "grad")
    structure = tree_flatten((primal,))[1]
    g = _stacked(lambda p: f(*rebuild(p), **kwargs), structure, levels, [])
    out, vjp_fn = _vjp(g, (_materialized(primal, levels),), allow_unused, "grad")
    if isinstance(out, (tuple, list, dict)) or np.size(_value(out)) != np.prod(
            [fr.size for fr in levels]):
        _check_scalar(_rewrapped(out, levels) if not isinstance(out, (tuple, list, dict)) else out)
    grads = vjp_fn(_ones_seed(out))[0]
    return _rewrapped(out, levels), _rewrapped(grads, levels)


def _vjp(f, primals, allow_unused, name):
    """vjp, with the name of the transform the user called (for the messages)."""
    inputs, structure, out, nested = _trace(f, primals)
    outs, out_structure = tree_flatten(out)
    if not any(_tracked(o) for o in outs):
        _refuse_output(outs, out, name, allow_unused)

    created = STATE.batch

    def vjp_fn(cotangent):
        leaves = _flatten_as(out_structure, cotangent, "vjp cotangent")
        new = _new_levels(created, leaves) if any(_tracked(o) for o in outs) else ()
        if new:     # cotangents batched by a vmap around this call: f again, for each example
            return _batched_vjp(f, primals, allow_unused, name, new)[1](cotangent)
        # Recorded when called inside a transform or on Tensors that require grad (a pullback
        # kept from the top level and used later, as autograd's flatten does): never cut.
        record = nested or (STATE.grad_enabled and any(_tracked(c) for c in leaves))
        cotangents = _checked(leaves, outs, "vjp cotangent", record)
        roots = [(o, c) for o, c in zip(outs, cotangents) if _tracked(o)]
        grads = {}
        if roots and record:
            with _recording(0):
                grads = reverse_sweep([o for o, _ in roots], [c for _, c in roots], wrt=inputs,
                                      create_graph=True)
        elif roots and STATE.recorder is not None:
            rec = STATE.recorder
            grads = reverse_sweep([o for o, _ in roots], [c for _, c in roots], wrt=inputs)
            if not grads:     # (the tape's structure: as eagerly, refused where nothing leads back)
                _check_reached([o for o, _ in roots], inputs, name, allow_unused)
            slot = Tensor.__dict__["data"]
            handed = [slot.__get__(c) if isinstance(c, Tensor) else c for c in cotangents] + [
                slot.__get__(x) for x in inputs]
            return tree_unflatten(structure, [rec.array(_traced_gradient(rec.tensor(grads.get(x)), x, handed))
                                              for x in inputs])
        elif roots:
            grads = reverse_sweep([o for o, _ in roots], [c for _, c in roots], wrt=inputs)
        if roots and not grads:
            _check_reached([o for o, _ in roots], inputs, name, allow_unused)
        if nested:
            return tree_unflatten(structure, _tied([_gradient(grads.get(x), x, True) for x in inputs],
                                                   inputs))
        if record:
            return tree_unflatten(structure, [_gradient(grads.get(x), x, True) for x in inputs])
        handed = {id(c) for c in cotangents} | {id(x.data) for x in inputs}
        return tree_unflatten(structure, [_handed_out(grads.get(x), x, handed) for x in inputs])

    return (out if nested else _outermost(out)), vjp_fn


def jvp(f, primals, tangents, allow_unused=False):
    """Forward mode: (out, tangent_out) with out = f(*primals) and tangent_out = J @ tangents.

    `primals` and `tangents` are tuples with the same structure and leaf shapes; tangent_out has
    out's structure. f must return Tensors computed from the primals (else TypeError/ValueError);
    `allow_unused=True` gives zero tangents instead.

    Examples
    --------
    >>> tt.jvp(lambda x: x ** 2, (np.array([1.0, 2.0]),), (np.ones(2),))
    (array([1., 4.]), array([2., 4.]))
    """
    if STATE.batch:
        return _batched_jvp(f, primals, tangents, allow_unused, "jvp")
    out, jvp_fn = _linearize(f, primals, allow_unused, "jvp")
    return out, jvp_fn(*tangents)


def _gradient(g, x, nested):
    if g is None:   # the output does not depend on x
        return _zeros(x)
    if nested or type(g) is BatchArray:
        return g if not isinstance(g, (Tensor, BatchArray)) or g.dtype == x.dtype else ops.astype(g, x.dtype)
    return backend.copy(_value(g), x.dtype)


def _handed_out(g, x, handed):
    """The gradient for x as an array of x's dtype that the caller may keep and write into.
    A fresh result of a rule is handed out as it is (no copy of every weight matrix per step);
    anything that may be shared (a view, an input's or a cotangent's own array, an array
    already handed out for another input) is copied."""
    if g is None:
        return _zeros(x)
    if type(g) is BatchArray:          # a sweep with batched cotangents (vmap of a pullback)
        return g if g.dtype == x.data.dtype else g.astype(x.data.dtype)
    if not _is_fresh(g, x.data.dtype) or id(g) in handed:
        g = backend.copy(_value(g), x.data.dtype)
    handed.add(id(g))
    return g


def _traced_gradient(g, x, handed=None):
    """While tt.compile records: the gradient Tensor itself, or, where eager mode copies it
    (_handed_out: the array of a cotangent, of an input, or one already handed out for another
    input: the gradients of a and b in a + b), a recorded copy, so the program too hands out
    arrays of their own."""
    if g is None:
        return _zeros(x)
    if isinstance(g, Tensor) and g.dtype != x.dtype:
        return ops.astype(g, x.dtype)
    if handed is not None and isinstance(g, Tensor):
        raw = Tensor.__dict__["data"].__get__(g)
        if any(isinstance(h, np.ndarray) and np.may_share_memory(raw, h) for h in handed):
            g = g.clone()
        handed.append(Tensor.__dict__["data"].__get__(g))
    return g


def _linearize(f, primals, allow_unused=False, name="jvp"):
    """(out, jvp_fn) with jvp_fn(*tangents) = J @ tangents, f traced once for any number of calls."""
    inputs, structure, out, nested = _trace(f, primals)
    outs, out_structure = tree_flatten(out)
    tracked = [i for i, o in enumerate(outs) if _tracked(o)]
    if not tracked:
        _refuse_output(outs, out, name, allow_unused)
    else:       # (the tape's structure: so while tt.compile records too, as eagerly)
        _check_reached([outs[i] for i in tracked], inputs, name, allow_unused)
    transposed_graph = []

    def transpose():
        """J^T u for symbolic u (zeros: only the dependence on u matters, and it is linear)."""
        if not transposed_graph:
            dummies = [Tensor(np.zeros_like(outs[i].data), requires_grad=True) for i in tracked]
            with _recording(0):
                transposed_graph.append((dummies, reverse_sweep(
                    [outs[i] for i in tracked], dummies, wrt=inputs, create_graph=True)))
        return transposed_graph[0]

    if nested:
        transpose()     # now, while the outer transform traces

    created = STATE.batch

    def jvp_fn(*tangents):
        leaves = _flatten_as(structure, tuple(tangents), "jvp tangents")
        new = _new_levels(created, leaves) if tracked else ()
        if new:     # tangents batched by a vmap around this call: f again, for each example
            return _linearized(f, primals, allow_unused, name, new)[1](*tangents)
        # Tangents that require grad (jvp_fn kept and called inside another transform) are
        # recorded through, by transposing the VJP as inside a transform.
        record = nested or (STATE.grad_enabled and any(_tracked(t) for t in leaves))
        seeds = _checked(leaves, inputs, "jvp tangents", record)
        result = {}
        if record and tracked:   # J t = d<J^T u, t>/du
            dummies, transposed = transpose()
            pairs = [(transposed[x], t) for x, t in zip(inputs, seeds) if _tracked(transposed.get(x))]
            with _recording(0):
                d = reverse_sweep([p for p, _ in pairs], [t for _, t in pairs], wrt=dummies,
                                  create_graph=True) if pairs else {}
            result = {i: d.get(u) for i, u in zip(tracked, dummies)}
            if nested:
                result = dict(zip(result, _tied([_zeros(outs[i]) if g is None else g
                                                 for i, g in result.items()], inputs)))
        elif tracked:
            tangent_of = dict(zip(inputs, seeds))
            result = {i: forward_sweep(outs[i], tangent_of) for i in tracked}
            if STATE.recorder is not None:    # arrays whose NumPy operations are recorded
                result = {i: STATE.recorder.array(STATE.recorder.tensor(t)) for i, t in result.items()}
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


def value_and_grad(f, argnums=0, allow_unused=False, has_aux=False):
    """A function returning (f(*args), gradient) for scalar-valued, real-valued f.

    The gradient has the structure and shapes of args[argnums], or is a tuple of them when
    argnums is a tuple. f must return a real Tensor computed from args[argnums] (else TypeError or
    ValueError); `allow_unused=True` gives a zero gradient instead. With `has_aux`, f returns
    (value, aux) and the function returns ((value, aux), gradient), as JAX's.

    Examples
    --------
    >>> tt.value_and_grad(lambda x: (x ** 2).sum())(np.array([1.0, 2.0]))
    (array(5.), array([2., 4.]))
    """
    if has_aux:
        return _with_aux(value_and_grad, f, argnums, allow_unused)

    @functools.wraps(f, updated=())
    def value_and_grad_f(*args, **kwargs):
        if STATE.batch:
            return _batched_value_and_grad(f, argnums, allow_unused, args, kwargs)
        primal, rebuild = _select(args, argnums, "grad")
        if STATE.depth == 0 and STATE.recorder is None:
            return _value_and_grad_arrays(f, primal, rebuild, kwargs, allow_unused)
        out, vjp_fn = _vjp(lambda p: f(*rebuild(p), **kwargs), (primal,), allow_unused, "grad")
        _check_scalar(out)
        _check_real(out)
        grads = vjp_fn(_ones_seed(out))[0]
        if STATE.depth == 0:      # eagerly arrays: in tt.compile's recording, recorded arrays
            out = STATE.recorder.array(out)
        return out, grads

    return value_and_grad_f


def _check_real(out):
    """grad of a complex-valued f is refused, as JAX's (a complex output has no gradient; take
    its real part, imaginary part or modulus first)."""
    if isinstance(out, (Tensor, np.ndarray)) and out.dtype.kind == "c":   # (an array: tt.compile's
        #                                                                   recorded value of it)
        raise TypeError(f"grad requires real-valued outputs (f returned dtype {out.dtype}); take "
                        f"tt.real(out), tt.imag(out) or tt.abs(out) of it, or use tt.vjp with a "
                        f"complex cotangent")


def _check_scalar(out):
    if isinstance(out, Tensor) and out.data.size == 1:
        return
    if isinstance(out, (tuple, list, dict)) or np.size(_value(out)) != 1:
        shape = np.shape(out) if not isinstance(out, (tuple, list, dict)) else type(out).__name__
        raise TypeError(f"grad needs a scalar-valued function, but f returned {shape}; use "
                        f"tt.jacobian(f) for the full Jacobian or tt.vjp(f, x) for J^T v")


def _value_and_grad_arrays(f, primal, rebuild, kwargs, allow_unused=False):
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
        inputs.append(_traced_leaf(_make(x, requires_grad=True)))
    if leaves is None:
        leaves, structure = tree_flatten(primal)
        inputs = [_input(x, False) for x in leaves]
        traced = tree_unflatten(structure, inputs)
    else:
        structure = None
        traced = (inputs if kind is list else tuple(inputs) if kind is tuple else
                  dict(zip(primal, inputs)) if kind is dict else inputs[0])
    previous, STATE.grad_enabled = STATE.grad_enabled, True
    STATE.depth += 1
    try:
        out = f(*rebuild(traced), **kwargs)
    finally:
        STATE.depth -= 1
        STATE.grad_enabled = previous
    if not (type(out) is Tensor and out.requires_grad and out.data.size == 1):
        _check_scalar(out)
        if not _tracked(out):
            _refuse_output([out], out, "grad", allow_unused)
            return _value(out), _like(primal, structure, [_zeros(x) for x in inputs])
    value = out.data
    if value.dtype.kind == "c":
        _check_real(out)
    seed = _seed(value)        # read-only, shared: never handed out
    grads = reverse_sweep([out], [seed], wrt=inputs)
    if not grads:
        _check_reached([out], inputs, "grad", allow_unused)
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


def grad(f, argnums=0, allow_unused=False, has_aux=False):
    """A function returning the gradient of scalar-valued f with respect to args[argnums]
    (same structure and shapes; a tuple of them for a tuple argnums). f must return a real Tensor
    computed from args[argnums] (else TypeError or ValueError); `allow_unused=True` gives a zero
    gradient instead. An argument f does not use, among several, gets zeros. With `has_aux`, f
    returns (value, aux) and the function returns (gradient, aux), as JAX's.

    Examples
    --------
    >>> f = lambda x: (x ** 2).sum()
    >>> tt.grad(f)(np.array([1.0, 2.0]))
    array([2., 4.])
    """
    value_and_grad_f = value_and_grad(f, argnums, allow_unused, has_aux)

    @functools.wraps(f, updated=())
    def grad_f(*args, **kwargs):
        out = value_and_grad_f(*args, **kwargs)
        return (out[1], out[0][1]) if has_aux else out[1]

    return grad_f


def _detached(x):
    """x's value off the tape: an array for a Tensor; for a vmapped example, its examples'."""
    if type(x) is BatchArray:
        return BatchArray(_detached(x.val), x.bdim, x.frame)
    return x.data if isinstance(x, Tensor) else x


def _with_aux(transform, f, argnums, allow_unused):
    """value_and_grad with has_aux: f's aux set aside while the value is differentiated; returned
    as arrays at the outermost level (as the value), as it is inside another transform."""
    @functools.wraps(f, updated=())
    def with_aux(*args, **kwargs):
        aux = []

        def value_only(*a, **k):
            out = f(*a, **k)
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                raise TypeError(f"has_aux=True: f must return a pair (value, aux), got {type(out).__name__}")
            aux.append(out[1])
            return out[0]

        value, gradient = transform(value_only, argnums, allow_unused)(*args, **kwargs)
        return (value, _outermost_aux(aux[0])), gradient

    return with_aux


def _outermost_aux(extra):
    """A transform's aux at the outermost level: values, as the gradient's (while tt.compile
    records, arrays whose NumPy operations it records); inside another transform, as f gave it."""
    if STATE.depth:
        return extra
    if STATE.recorder is not None:
        return _outermost(extra)
    leaves, structure = tree_flatten(extra)
    return tree_unflatten(structure, [_detached(x) for x in leaves])


def jacobian(f, argnums=0, mode="rev", allow_unused=False, has_aux=False):
    """A function returning the Jacobian of f with respect to args[argnums].

    For an output leaf of shape O and an input leaf of shape I the block has shape O + I; blocks
    nest as out's structure around args[argnums]'s structure. mode="rev" (JAX's jacrev): one VJP,
    vmapped over the output's basis; mode="fwd" (jacfwd): one JVP, vmapped over the input's
    basis (cheaper when inputs are fewer). With `has_aux`, f returns (output, aux) and the
    function returns (jacobian, aux), as JAX's.

    Examples
    --------
    >>> tt.jacobian(lambda x: x ** 2)(np.array([1.0, 2.0]))
    array([[2., 0.],
           [0., 4.]])
    """
    if mode not in ("rev", "fwd"):
        raise ValueError(f"jacobian: mode must be 'rev' or 'fwd', got {mode!r}")

    @functools.wraps(f, updated=())
    def jacobian_f(*args, **kwargs):
        primal, rebuild = _select(args, argnums, "jacobian")
        aux = []

        def g(p):
            out = f(*rebuild(p), **kwargs)
            if has_aux:
                if not (isinstance(out, (tuple, list)) and len(out) == 2):
                    raise TypeError(f"jacobian(has_aux=True): f must return a pair (output, aux), got "
                                    f"{type(out).__name__}")
                out, extra = out
                aux.append(extra)
            return out

        ins, in_structure = tree_flatten(primal)
        if mode == "rev":
            out, vjp_fn = vjp(g, primal, allow_unused=allow_unused)
            outs, out_structure = tree_flatten(out)
            if len(outs) == 1 and math.prod(outs[0].shape) == 1:
                # One output element (a network's scalar output, per example under vmap): its
                # Jacobian is its gradient, one sweep seeded with 1, reshaped to out.shape + in.shape
                # (no basis to map over, no rows to cut: a third of a small batched Jacobian's time).
                shape = tuple(outs[0].shape)      # the seed: tape's cached read-only ones of that
                like = backend.namespace(_device_ref(outs[0])).empty(shape, _float_dtype(outs[0]))
                seed = _seed(like)                  # shape and dtype, on the output's device
                grads = vjp_fn(tree_unflatten(out_structure, [seed]))[0]
                blocks = [[ops.reshape(x, shape + tuple(x.shape)) for x in tree_flatten(grads)[0]]]
            elif (basis := _eye_leaves(outs)) is None:
                blocks = _blocks(None, outs, ins)
            else:
                rows = _over_basis(lambda *e: vjp_fn(tree_unflatten(out_structure, list(e)))[0], basis)
                blocks = _cut(tree_flatten(rows)[0], outs, ins, rows_are_outputs=True)
        else:
            basis = _eye_leaves(ins)
            if basis is None:
                out = _linearized(g, (primal,), allow_unused, "jacobian")[0]
                outs, out_structure = tree_flatten(out)
                blocks = _blocks(None, outs, ins)
            else:
                out, jvp_fn = _linearized(g, (primal,), allow_unused, "jacobian")
                out_structure = tree_flatten(out)[1]
                cols = _over_basis(lambda *e: jvp_fn(tree_unflatten(in_structure, list(e))), basis)
                col_leaves = tree_flatten(cols)[0]
                outs = [_Shaped(c.shape[1:], c.dtype) for c in col_leaves]
                blocks = _cut(col_leaves, outs, ins, rows_are_outputs=False)
        result = tree_unflatten(out_structure, [tree_unflatten(in_structure, row) for row in blocks])
        if not has_aux:
            return result
        return result, _outermost_aux(aux[0])

    return jacobian_f


def _over_basis(fn, basis):
    """vmap(fn)(*basis); for a basis of one vector (a scalar output, say), fn itself."""
    if basis[0].shape[0] != 1:
        try:
            return vmap(fn)(*basis)
        except Exception as err:
            if not getattr(err, "_not_batchable", False):
                raise
            # f cannot run batched (an in-place write of a batched value, Python control flow
            # on one, a BatchNorm in train()): one basis vector at a time, as before vmap.
            results = [tree_flatten(fn(*[b[k] for b in basis])) for k in range(basis[0].shape[0])]
            return tree_unflatten(results[0][1], [np.stack([r[0][i] for r in results])
                                                  for i in range(len(results[0][0]))])
    leaves, structure = tree_flatten(fn(*[b[0] for b in basis]))
    return tree_unflatten(structure, [x.reshape((1,) + tuple(x.shape)) for x in leaves])


class _Shaped:
    """A stand-in with a shape and a dtype (an output's, for the blocks)."""
    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), dtype


def _eye_leaves(leaves):
    """The identity, cut per leaf: for n elements in all, one (n, *leaf.shape) array per leaf
    (None when n is 0)."""
    shapes = [tuple(getattr(x, "shape", ())) for x in leaves]     # (a Python number: ())
    sizes = [math.prod(s) for s in shapes]
    n = sum(sizes)
    if n == 0:
        return None
    eye = np.eye(n, dtype=np.result_type(*[_float_dtype(x) for x in leaves]))
    if len(leaves) == 1:          # (plain integers below: np.cumsum costs more than the rest)
        return [backend.like(eye.reshape((n,) + shapes[0]), _device_ref(leaves[0]))]
    at = [0, *itertools.accumulate(sizes)]
    return [backend.like(eye[:, at[i]:at[i + 1]].reshape((n,) + s), _device_ref(x))   # on x's device
            for i, (s, x) in enumerate(zip(shapes, leaves))]


def _device_ref(x):
    """Something whose array library is x's (a batched value: its stacked examples')."""
    while type(x) is BatchArray:
        x = x.val
    return x


def _cut(parts, outs, ins, rows_are_outputs):
    """Blocks out.shape + in.shape from the vmapped sweep's leaves: per input leaf (n_out, *in)
    (rows_are_outputs), or per output leaf (n_in, *out)."""
    out_shapes = [tuple(np.shape(_value(o))) for o in outs]     # a Python number too (a 0-d input)
    in_shapes = [tuple(np.shape(_value(x))) for x in ins]
    out_at = np.cumsum([0] + [math.prod(s) for s in out_shapes])
    in_at = np.cumsum([0] + [math.prod(s) for s in in_shapes])
    blocks = []
    for i, so in enumerate(out_shapes):
        row = []
        for j, si in enumerate(in_shapes):
            if rows_are_outputs:
                block = np.reshape(parts[j][out_at[i]:out_at[i + 1]], so + si)
            else:
                block = np.reshape(parts[i][in_at[j]:in_at[j + 1]], (math.prod(si), math.prod(so)))
                block = np.reshape(np.transpose(block), so + si)
            row.append(block)
        blocks.append(row)
    return blocks


def hessian(f, argnum=0, *, argnums=None, mode="rev", has_aux=False):
    """A function returning the Hessian of scalar f with respect to args[argnum] (autograd's
    `argnum`, or JAX's `argnums`): for an input of shape I, shape I + I (JAX's out.shape +
    in.shape, with the gradient as the output); blocks nest as jacobian's for a tuple or a pytree.
    With `has_aux`, f returns (value, aux) and the function returns (hessian, aux), as JAX's.

    Reverse over reverse by default: the gradient is recorded once (create_graph) and swept
    back once per input element. Measured 1.3-1.6x faster than forward over reverse (mode="fwd",
    one forward sweep of the same tape per element) on a GP likelihood and on Rosenbrock with
    20 and 100 variables (benchmarks/hessian_modes.py).

    Examples
    --------
    >>> tt.hessian(lambda x: (x ** 3).sum())(np.array([1.0, 2.0]))
    array([[ 6.,  0.],
           [ 0., 12.]])
    """
    argnums = argnum if argnums is None else argnums
    return jacobian(grad(f, argnums, has_aux=has_aux), argnums, mode=mode, has_aux=has_aux)


def hvp(f, primals, tangents, allow_unused=False):
    """The Hessian of scalar f at `primals` times `tangents`, by forward over reverse mode (the
    gradient recorded with create_graph, then a JVP along it). `primals` and `tangents` are
    tuples; the result has the structure of `primals[0]`, or is a tuple for several primals.

    Examples
    --------
    >>> tt.hvp(lambda x: (x ** 3).sum(), (np.array([1.0, 2.0]),), (np.ones(2),))
    array([ 6., 12.])
    """
    if not (isinstance(primals, (tuple, list)) and isinstance(tangents, (tuple, list))):
        raise TypeError(f"hvp: primals and tangents must be tuples, got {type(primals).__name__} and "
                        f"{type(tangents).__name__}; write tt.hvp(f, (x,), (v,))")
    argnums = 0 if len(primals) == 1 else tuple(range(len(primals)))
    if STATE.batch:
        return _batched_jvp(grad(f, argnums, allow_unused), tuple(primals), tuple(tangents),
                            allow_unused, "hvp")[1]
    _, jvp_fn = _linearize(grad(f, argnums, allow_unused), tuple(primals), allow_unused, "hvp")
    return jvp_fn(*tangents)


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
