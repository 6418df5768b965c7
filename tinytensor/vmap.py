"""tt.vmap: a function of one example, run on a batch (JAX's jax.vmap, torch.func.vmap).

`vmap(f)(xs)` calls f once, on `BatchArray`s (ops/batching.py) that look like one example; every
primitive f calls goes to its batching rule, which computes all examples at once. Nothing loops
over the examples in Python, except the primitives declared to (check_rules() names them).

The transforms inside vmap (grad, vjp, jvp, jacobian, hvp, hessian of a function of one example)
compute each example's derivative: their differentiated inputs are made batched Tensors, one per
example, at every active vmap level ("materialized"), f runs on them batched, and the sweep runs
once on the stacked tape. Examples are independent, so the gradient of the sum of the examples'
outputs with respect to example i's input is example i's gradient (the per-example gradient);
JVPs and VJPs with stacked tangents and cotangents likewise. A pullback or a linearized function
made outside vmap and called inside it with batched cotangents (jacrev = vmap over vjp) sweeps its
tape with BatchArray cotangents: the rules, written with NumPy, are batched like any function.
"""

import functools

import numpy as np

from .ops.batching import _P, BatchArray, _Frame, _shape, moved, not_batchable
from .state import STATE, number_value, set_batch
from .tensor import Tensor

__all__ = ["vmap", "batched_draw"]

_RANDOMNESS = ("error", "different", "same")


def vmap(f, in_axes=0, out_axes=0, randomness="error", axis_size=None):
    """f mapped over an axis of its arguments, as jax.vmap.

    `in_axes`: an int (the axis of every argument's leaves), None (not mapped: the same for every
    example), or a tuple with one entry per positional argument, each an int, None or a pytree
    matching that argument's structure (a prefix of it). Keyword arguments are mapped over axis 0.
    `out_axes`: likewise for the results (None: the result must be the same for every example).
    `randomness`: what a random draw inside f (Dropout) does: "error" (raise), "different" (one
    draw per example) or "same" (one draw for all examples). `axis_size`: the number of examples
    when no argument is mapped.

    Examples
    --------
    >>> w = tt.tensor([1.0, 2.0])
    >>> xs = tt.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])   # 3 examples
    >>> tt.vmap(lambda x: tt.dot(w, x))(xs)
    tensor([1., 2., 3.])
    >>> per_example = tt.vmap(tt.grad(lambda w, x: tt.dot(w, x) ** 2), in_axes=(None, 0))
    >>> per_example(w, xs)                                     # one gradient per example
    array([[2., 0.],
           [0., 4.],
           [6., 6.]])
    """
    if randomness not in _RANDOMNESS:
        raise ValueError(f"vmap: randomness must be one of {_RANDOMNESS}, got {randomness!r}")
    if isinstance(in_axes, list):
        raise TypeError(f"vmap: in_axes must be an int, None, or a tuple of entries corresponding to "
                        f"the positional arguments passed to the function; got the list {in_axes!r} "
                        f"(write tuple({in_axes!r}))")
    _check_axes_spec(in_axes, "in_axes")
    _check_axes_spec(out_axes, "out_axes")

    @functools.wraps(f)
    def batched_f(*args, **kwargs):
        from .transforms import tree_flatten, tree_unflatten
        if isinstance(in_axes, tuple) and len(in_axes) != len(args):
            raise ValueError(f"vmap: in_axes has {len(in_axes)} entries but the function was called with "
                             f"{len(args)} positional argument(s); give one entry per argument")
        specs = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
        leaves, structure = tree_flatten((tuple(args), kwargs))
        if not (in_axes is None or isinstance(in_axes, (int, np.integer))) or kwargs:
            axes = []      # per argument: a tuple of entries, or one pytree prefix for each
            for i, (a, spec) in enumerate(zip(args, specs)):
                where = f"in_axes[{i}]" if isinstance(in_axes, tuple) else "in_axes"
                axes.extend(_prefix_axes(spec, a, where))
            axes.extend([0] * (len(leaves) - len(axes)))      # keyword arguments: axis 0
        else:                                   # one axis (or None) for every leaf
            axes = [in_axes] * len(leaves)
        size = _size(leaves, axes, axis_size, structure)
        frame = _Frame(size, randomness)
        inputs = [leaf if ax is None else BatchArray(_operand(leaf), _axis(ax, _operand(leaf), i), frame)
                  for i, (leaf, ax) in enumerate(zip(leaves, axes))]
        call_args, call_kwargs = tree_unflatten(structure, inputs)
        previous = STATE.batch
        set_batch(previous + (frame,))
        try:
            out = f(*call_args, **call_kwargs)
            outs, out_structure = tree_flatten(out)
            out_specs = _prefix_axes(out_axes, out, "out_axes")
            return tree_unflatten(out_structure, [_unbatch(o, ax, frame) for o, ax in zip(outs, out_specs)])
        finally:
            frame.active = False
            set_batch(previous)

    return batched_f


def _check_axes_spec(spec, what):
    if spec is None or isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        return
    if isinstance(spec, (tuple, list, dict)):
        for s in (spec.values() if isinstance(spec, dict) else spec):
            _check_axes_spec(s, what)
        return
    raise TypeError(f"vmap: {what} entries must be ints or None (or containers of them), got "
                    f"{spec!r} of type {type(spec).__name__}")


def _prefix_axes(spec, tree, where):
    """One axis per leaf of `tree`: `spec` is an int/None for the whole subtree, or a container
    with tree's structure (JAX's prefix rule)."""
    from .transforms import tree_flatten
    if spec is None or isinstance(spec, (int, np.integer)):
        return [spec] * len(tree_flatten(tree)[0])
    if isinstance(spec, dict):
        if not isinstance(tree, dict) or set(tree) != set(spec):
            raise ValueError(f"vmap: {where} is a dict with keys {sorted(map(repr, spec))} but the value "
                             f"there is {_describe(tree)}; the axes must be a prefix of its structure")
        return [ax for k in tree for ax in _prefix_axes(spec[k], tree[k], f"{where}[{k!r}]")]
    if not isinstance(tree, (tuple, list)) or len(tree) != len(spec):
        raise ValueError(f"vmap: {where} is a {type(spec).__name__} of length {len(spec)} but the value "
                         f"there is {_describe(tree)}; the axes must be a prefix of its structure")
    return [ax for i, (s, t) in enumerate(zip(spec, tree)) for ax in _prefix_axes(s, t, f"{where}[{i}]")]


def _describe(x):
    if isinstance(x, (tuple, list)):
        return f"a {type(x).__name__} of length {len(x)}"
    if isinstance(x, dict):
        return f"a dict with keys {sorted(map(repr, x))}"
    return f"a {type(x).__name__}"


def _operand(x):
    if isinstance(x, (Tensor, BatchArray, np.ndarray)):
        return x
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return x
    return np.asarray(number_value(x))     # (tt.compile: a number argument, an input)


def _axis(ax, x, i):
    nd = x.ndim
    if not -nd <= ax < nd:
        raise ValueError(f"vmap: in_axes gives axis {ax} for argument leaf {i} of shape {tuple(x.shape)} "
                         f"({nd} dimension(s)); a mapped axis must exist (use None for an argument "
                         f"that is the same for every example)")
    return ax % nd


def _size(leaves, axes, axis_size, structure):
    sizes = {}
    for i, (leaf, ax) in enumerate(zip(leaves, axes)):
        if ax is None:
            continue
        x = _operand(leaf)
        if x.ndim == 0:
            raise ValueError(f"vmap: argument leaf {i} is 0-d (a scalar) but in_axes maps it over axis "
                             f"{ax}; give in_axes None for it")
        sizes.setdefault(int(x.shape[_axis(ax, x, i)]), []).append(i)
    if len(sizes) > 1:
        found = "; ".join(f"size {n} for leaf/leaves {v}" for n, v in sizes.items())
        raise ValueError(f"vmap got inconsistent sizes for the mapped axes: {found} (leaves are counted "
                         f"in order through the arguments' structure)")
    if sizes:
        size = next(iter(sizes))
        if axis_size is not None and axis_size != size:
            raise ValueError(f"vmap: axis_size={axis_size} but the mapped axes have size {size}")
        return size
    if axis_size is None:
        raise ValueError("vmap must have at least one non-None value in in_axes (or be given "
                         "axis_size=): nothing tells how many examples there are")
    return int(axis_size)


def _unbatch(o, ax, frame):
    """A result leaf with its examples along `ax` (or, for ax None, checked unbatched)."""
    mapped = type(o) is BatchArray and o.frame is frame
    if ax is None:
        if mapped:
            raise ValueError("vmap has a mapped output but out_axes is None for it: the result differs "
                             "between examples (give it an out_axes int, or return something the same "
                             "for every example)")
        return o
    if mapped:
        nd = o.ndim + 1
        if not -nd <= ax < nd:
            raise ValueError(f"vmap: out_axes {ax} is out of range for a result of {nd} dimension(s)")
        return moved(o.val, o.bdim, ax % nd)
    x = _operand(o)
    nd = x.ndim + 1
    if not -nd <= ax < nd:
        raise ValueError(f"vmap: out_axes {ax} is out of range for a result of {nd} dimension(s)")
    ax %= nd
    s = _shape(x)
    # Unbatched (the same for every example): broadcast, as jax.vmap does.
    out = _P["broadcast_to"](_P["reshape"](x, shape=s[:ax] + (1,) + s[ax:]),
                             shape=s[:ax] + (frame.size,) + s[ax:])
    if isinstance(out, np.ndarray):
        out = np.array(out)      # a writable array of its own, not a broadcast view
    return out


# ----- materializing: a value's examples at the active levels, as leading axes -------------------
def frames():
    return STATE.batch


def to_front(x, frame):
    """x without `frame`'s wrapper: its examples along axis 0 of the (logical) shape; broadcast to
    frame.size when x does not vary along frame."""
    if type(x) is BatchArray:
        if x.frame is frame:
            return moved(x.val, x.bdim)
        if x.frame.level > frame.level:
            return BatchArray(to_front(x.val, frame), x.bdim + 1, x.frame)
    x = _operand(x)
    return _P["broadcast_to"](x, shape=(frame.size,) + tuple(x.shape))


def wrap(x, frame, axis=0):
    """The inverse of to_front: x's logical axis `axis` becomes `frame`'s examples."""
    if type(x) is BatchArray and x.frame.level > frame.level:
        inner = axis if axis < x.bdim else axis + 1
        bdim = x.bdim if x.bdim < inner else x.bdim - 1
        return BatchArray(wrap(x.val, frame, inner), bdim, x.frame)
    return BatchArray(x, axis, frame)


def materialize(x, levels):
    """x with the examples of every frame in `levels` (outermost first) as leading axes."""
    for frame in reversed(levels):
        x = to_front(x, frame)
    return x


def rewrap(x, levels):
    """The inverse of materialize."""
    for frame in levels:
        x = wrap(x, frame, 0)
    return x


# ----- random draws inside vmap (Dropout) --------------------------------------------------------
def batched_draw(what, shape, draw):
    """A random array of an example's `shape`, drawn by draw(full_shape), as the running vmaps'
    `randomness` says: "error" raises; "different" draws one array per example; "same" one for
    all. The order is documented: ONE draw of shape (sizes of the "different" vmaps, outermost
    first) + shape, example i's array being draw[i]; so under randomness="different" a vmapped
    Dropout draws exactly the masks Dropout draws on the stacked batch, seed for seed."""
    frames = STATE.batch
    refusing = [fr for fr in frames if fr.randomness == "error"]
    if refusing:
        raise not_batchable(RuntimeError(
            f"{what} draws random numbers inside tt.vmap with randomness='error' (the default). "
            f"Say what the examples should get: tt.vmap(f, randomness='different') (an independent "
            f"draw per example, in the order of the stacked batch) or randomness='same' (one draw "
            f"shared by every example); or call model.eval() to switch the randomness off"))
    different = [fr for fr in frames if fr.randomness == "different"]
    array = draw(tuple(fr.size for fr in different) + tuple(shape))
    return rewrap(array, different)
