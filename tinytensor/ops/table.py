"""The op table's registry and the shorthands every op family declares its rows with.

Every family (core.py, softmax_xent.py, elementwise.py, reductions.py, shape.py, ../linalg.py,
../nn/functional.py) imports from here, and only from here: a row is `defprim(...)` or one of its
shorthands, and the tables below record what it is called in tinytensor (`tt.<name>`), in NumPy
(`np.<fun>(tensor)`) and as a Tensor method. `numpy_dispatch` is where NumPy calls on Tensors
come back to the table. The helpers at the end are the few that several families' rules share
(the axes of a reduction, where a maximum is, the inputs of a join).
"""

import math

import numpy as np
import scipy.special

from .. import backend, tape
from ..state import SHARED
from ..tape import Primitive
from ..tensor import Tensor, mark_modified

# ----- the table: what each operation is called, in tinytensor, in NumPy, as a method ---------------
# Filled by the rows below (and by the other op modules: linalg.py, ...). tinytensor/__init__.py
# exports PUBLIC as `tt.<name>`; numpy_dispatch maps NumPy functions through NUMPY_FUNCTIONS; every
# METHODS entry is installed on Tensor (`t.sum(axis=1)` is `tt.sum(t, axis=1)`).
PUBLIC = {}            # name -> function
NONDIFFERENTIABLE = set()   # NumPy functions computed on the values, with no gradient
NUMPY_FUNCTIONS = {}   # NumPy (or SciPy) function -> tinytensor function
METHODS = {}           # Tensor method name -> function taking the tensor first
BUILTIN = set()        # names of the built-in primitives (user primitives register elsewhere)
HIDDEN_INPUTS = {}     # primitive -> how many of its last inputs the views of the tape do not show
# tt.vmap's column: primitive name -> batching rule (ops/batching.py fills it, keyed by name, so
# the families' rows stay as they are); LOOP marks a primitive declared to run once per example.
BATCHING = {}
LOOP = "loop"


def _names(spec, default):
    if spec is None or spec is False:
        return ()
    if spec is True:
        return (default,)
    return (spec,) if isinstance(spec, str) else tuple(spec)


def publish(fun, name, numpy=None, method=None):
    """Make `fun` public: `tt.<name>`, the NumPy function(s) `numpy` it stands for, and the Tensor
    method(s) `method` (True: the same name). Returns `fun`."""
    if name in PUBLIC and PUBLIC[name] is not fun:
        raise ValueError(f"two operations are both published as tt.{name}")
    PUBLIC[name] = fun
    for np_fun in () if numpy is None else (numpy if isinstance(numpy, tuple) else (numpy,)):
        NUMPY_FUNCTIONS[np_fun] = fun
    for m in _names(method, name):
        METHODS[m] = fun
        setattr(Tensor, m, fun)
    return fun


def public(fun=None, *, name=None, numpy=None, method=None):
    """Decorator form of `publish`, for composites and the wrappers that give a primitive NumPy's
    signature: `@public(numpy=np.sum, method=True) def sum(x, axis=None, keepdims=False): ...`."""
    if fun is None:
        return lambda f: public(f, name=name, numpy=numpy, method=method)
    return publish(fun, name or fun.__name__, numpy, method)


# ----- shorthands for declaring primitives ------------------------------------------------------
def defprim(fun, name, vjp, jvp, nargs=None, numpy=None, method=None, export=False, hidden_inputs=0,
            **options):
    """A primitive with one VJP rule and one JVP rule per input.

    `vjp`/`jvp` are lists with one rule per input (None: not differentiable in that input), or a
    single joint rule (a callable) for variadic ops. With `export` (or `numpy`/`method`) the
    primitive itself is public as `tt.<name>` (`export="other"`: as `tt.other`). `hidden_inputs`:
    how many of the last inputs are the engine's, not the user's (wengert_list does not show them:
    crossEntropy's logits)."""
    prim = Primitive(fun, name, nargs=(len(vjp) if isinstance(vjp, (list, tuple)) else None)
                     if nargs is None else nargs, **options)
    if callable(vjp):
        prim.defvjp(vjp)
    else:
        prim.defvjp(*vjp)
    if callable(jvp):
        prim.defjvp_joint(jvp)
    else:
        prim.defjvp(*jvp)
    BUILTIN.add(name)
    if hidden_inputs:
        HIDDEN_INPUTS[prim] = hidden_inputs
    if export or numpy is not None or method:
        publish(prim, export if isinstance(export, str) else name, numpy, method)
    return prim


def elementwise(fun, name, deriv, **public):
    """A unary elementwise primitive from its local derivative `deriv(ans, x)` alone."""
    return defprim(fun, name,
                   vjp=[lambda g, ans, x: g * deriv(ans, x)],
                   jvp=[lambda t, ans, x: t * deriv(ans, x)], **public)


def deflinear(fun, name, vjp, **public):
    """A primitive linear in its one input: its JVP is the op itself applied to the tangent, so
    only the VJP (the transpose) is written. `fun(x, **params)`; `vjp(g, ans, x, **params)`."""
    return defprim(fun, name, vjp=[vjp], jvp=[lambda t, ans, x, **params: fun(t, **params)],
                   nargs=1, **public)


def complex_rules(*prims):
    """Mark primitives whose rules hold for complex values, with JAX's convention: for a real
    loss L, the cotangent g of a complex value z satisfies dL = Re(g dz), so a holomorphic op's
    rules are its real ones (g * f'(z), no conjugate), conj's VJP is conj(g), and the gradient of a
    real input is the real part of its complex cotangent (taken by tape.reverse_sweep). Recording any other
    primitive on a complex value that requires grad raises (tape.Primitive.__call__)."""
    for prim in prims:
        prim.complex_rules = True


def nondifferentiable(*np_funs):
    """Mark NumPy functions as carrying no gradient: given Tensors they compute on the values
    and return plain arrays (comparisons, sign, argmax, ...)."""
    NONDIFFERENTIABLE.update(np_funs)


# ----- handing NumPy calls on Tensors back to the table -----------------------------------------
# A NumPy function applied to a Tensor becomes the tinytensor operation in NUMPY_FUNCTIONS (filled by
# the rows above). Rules rely on it. Not differentiable (marked here, once): computed on the values,
# giving plain arrays.
nondifferentiable(
    np.sign, np.less, np.less_equal, np.greater, np.greater_equal, np.equal, np.not_equal,
    np.isfinite, np.isnan, np.isinf, np.argmax, np.argmin, np.floor, np.ceil, np.round,
    np.shape, np.ndim, np.size, np.zeros_like, np.ones_like, np.allclose, np.isclose,
    np.array_equal, np.logical_and, np.logical_or, np.logical_not, np.full_like, np.empty_like,
    np.result_type, np.count_nonzero, np.any, np.all)


def _unwrap(x):
    if isinstance(x, Tensor):
        return x.data
    if isinstance(x, (list, tuple)):
        return type(x)(_unwrap(i) for i in x)
    return x


def _needs_grad(args):
    for a in args:
        if isinstance(a, Tensor) and a.requires_grad:
            return True
        if isinstance(a, (list, tuple)) and _needs_grad(a):
            return True
    return False


def numpy_dispatch(func, args, kwargs, method="__call__", use_table=True):
    """What a NumPy function does when given a Tensor (Tensor.__array_ufunc__/__array_function__)."""
    if use_table and method == "__call__":
        op = NUMPY_FUNCTIONS.get(func)
        if op is not None:
            return op(*args, **kwargs)
    if func in NONDIFFERENTIABLE or not _needs_grad(list(args) + list(kwargs.values())):
        target = func if method == "__call__" else getattr(func, method)
        result = target(*_unwrap(args), **{k: _unwrap(v) for k, v in kwargs.items()})
        # Tensors written in place (out=, np.add.at): marked, as by an in-place operator.
        written = kwargs.get("out", args[:1] if method == "at" else ())
        for t in written if isinstance(written, tuple) else (written,):
            if isinstance(t, Tensor):
                mark_modified(t)
        if "out" in kwargs:
            return written[0] if isinstance(written, tuple) and len(written) == 1 else written
        return on_values(target, args, kwargs, result, getattr(func, "__name__", None))
    name = getattr(func, "__name__", repr(func)) + ("" if method == "__call__" else "." + method)
    why = ("is recorded only as a plain call (no out= or other keywords, no ufunc methods)"
           if func in NUMPY_FUNCTIONS else "has no gradient rule in tinytensor")
    raise TypeError(f"np.{name} {why}, and a Tensor that requires grad "
                    f"was given to it: use tinytensor operations (tt.stack([...]) or "
                    f"tt.concatenate([...]) for lists of Tensors), t.detach() or t.numpy() for "
                    f"the value alone, or tt.no_grad() around code that needs no gradient")


def on_values(fun, args, kwargs, result, name=None, always_tensor=False):
    """`result`, which is fun(*args, **kwargs) computed on the values of Tensors, off the tape
    (sign, floor, argmax, a mask, argsort): while tt.compile records, noted on its recorder, so
    the program computes it again on every call instead of keeping this result. A result whose
    shape depends on the values (nonzero) cannot be replayed: refused there, as jax.jit does."""
    recorder = None if SHARED.quiet else tape.STATE.recorder
    if recorder is None:
        return result
    name = name or getattr(fun, "__name__", "numpy_function")
    generic = isinstance(result, np.generic)
    if generic:
        result = np.asarray(result)      # argmax's index, a 0-d test: a 0-d array, to be noted
    if isinstance(result, np.ndarray):   # (one a number argument's operation already noted,
        # softplus's `x.data * beta > threshold`, is noted again from the Tensors: its line read x's
        # values of this call, and the program must read them anew)
        result = recorder.numpy(fun, name, args, kwargs, np.ndarray.view(result, np.ndarray))
        var = recorder.var_of(result) if generic else None
        if var is not None:              # eagerly a NumPy scalar (tt.sum of a mask): returned as one
            recorder.generic_vars.add(var)
    elif type(result) is tuple and name in _DATA_DEPENDENT_SHAPES:
        recorder.refuse_shape(name, args, kwargs)
    elif isinstance(result, tuple) and result and all(isinstance(r, (np.ndarray, np.generic))
                                                      for r in result):
        result = recorder.numpy_parts(fun, name, args, kwargs, result)   # np.divmod, np.frexp
    elif isinstance(result, Tensor):      # (`always_tensor`: a Tensor whatever its operands, F.one_hot)
        recorder.numpy(fun, name, args, kwargs, result.data, result, always=always_tensor)
    elif type(result) in (bool, int, float, complex):       # np.allclose, np.shares_memory
        result = recorder.numpy_value(fun, name, args, kwargs, result)
    return result


_DATA_DEPENDENT_SHAPES = {"nonzero", "where", "argwhere", "flatnonzero", "unique"}


# ----- helpers the families' rules share ---------------------------------------------------------
def _reduced_axes(ndim, axis):
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    return tuple(a % ndim for a in axes) if ndim else ()


def _keepdims(g, in_shape, axis, keepdims):
    """Put back, as size-1 axes, the axes a reduction removed (so `g` broadcasts to the input)."""
    if keepdims or axis is None:   # nothing to put back, or a 0-d g, which broadcasts as it is
        return g
    axes = _reduced_axes(len(in_shape), axis)
    return g.reshape(tuple(1 if i in axes else n for i, n in enumerate(in_shape)))

def _expit(x):   # SciPy's on NumPy arrays; the array library's own (or a stable formula) elsewhere
    return scipy.special.expit(x) if type(x) is np.ndarray else backend.expit(x)


# Piecewise rules SELECT the cotangent rather than multiply it by a 0/1 or a sign: an unchosen
# branch then gives an exact 0 even for an infinite cotangent (sqrt'(0) below a relu), where
# inf * 0 would be NaN (as PyTorch's threshold_backward, JAX's select).
def _select(mask, g):
    """g where `mask` holds, else an exact 0. For a finite g the product g * mask is the same
    thing and ~3x cheaper than np.where on large arrays (relu's rule is on the hot path), so one
    check of g comes first; an inf or NaN in g takes np.where (with no inf * 0 computed, and no
    warning). On Tensors (higher orders) np.where records tt.where, which selects again.
    The check is g . g, BLAS's dot over g's memory (a view for any contiguous layout): 3x faster
    than a sum on a (128, 16, 8, 8) float32 cotangent (6 vs 21 us); a huge finite g whose squares
    overflow only sends it to np.where, which is exact too."""
    if (type(g) is np.ndarray or isinstance(g, np.generic)) and (
            type(mask) is np.ndarray or isinstance(mask, np.generic)) and math.isfinite(_square_sum(g)):
        out = g * mask
        return out if type(out) is np.ndarray else np.asarray(out)   # an array, as np.where's
    return np.where(mask, g, 0)  # (a Tensor or tt.compile's traced array: recorded, no value read)


def _square_sum(g):
    flat = g.ravel(order="K")
    return abs(np.vdot(flat, flat)) if flat.dtype.kind in "fc" else np.add.reduce(flat)


def _max_share(s, ans, x, axis, keepdims):
    """s (broadcast to x) times weights summing to 1 along `axis` where the maximum (or minimum) is
    (ties share evenly), selected there: an exact 0 elsewhere."""
    kept = _keepdims(ans, x.shape, axis, keepdims)
    hit = x == kept
    if np.isnan(kept).any():      # a NaN maximum (NumPy's max propagates it) is where the NaNs are
        hit = hit | (np.isnan(x) & np.isnan(kept))
    return _select(hit, s * (hit / np.sum(hit, axis=axis, keepdims=True)).astype(x.dtype))


def _array(x):
    """x as an array: NumPy's and other libraries' arrays as they are, numbers and lists as NumPy's."""
    return x if type(x) is np.ndarray else backend.asarray(x)


def _joined(arrays, op, out=None, dtype=None, casting="same_kind"):
    """The inputs of a join (concatenate, stack, ...) as a list, cast to `dtype` when given
    (under NumPy's `casting` rule), as NumPy's keywords ask."""
    if out is not None:
        raise TypeError(f"{op}: out= is not supported on Tensors; use the returned value")
    arrays = list(arrays)
    if dtype is None:
        return arrays
    dtype, cast = np.dtype(dtype), []
    for a in arrays:
        a = a if isinstance(a, Tensor) else np.asarray(a)
        if not np.can_cast(a.dtype, dtype, casting):
            raise TypeError(f"{op}: cannot cast {a.dtype} to {dtype} with casting={casting!r}")
        cast.append(a if a.dtype == dtype else a.astype(dtype))   # Tensor.astype is tt.astype
    return cast


def _swap_last(m):   # m^T over the last two axes (.T is the cheap spelling for matrices)
    return m.T if m.ndim == 2 else m.swapaxes(-1, -2)


def _safe(norm):
    return norm + (norm == 0)   # the gradient of the norm at W = 0 is 0, not 0/0


def _in_dtype(result, dtype):
    """A sum's (or product's) result in the dtype= asked for: NumPy accumulates small integers in
    the platform's integer unless told (int8 sums wrap around in int8); the same numbers, modulo."""
    if dtype is None or isinstance(dtype, bool) or np.dtype(dtype).kind not in "iub" \
            or result.dtype == np.dtype(dtype):
        return result
    return PUBLIC["astype"](result, dtype) if isinstance(result, Tensor) else np.asarray(result).astype(dtype)


def _initial(initial, result):
    """A reduction's initial= as NumPy takes it: in the result's dtype, the first operand (so
    np.max([-0.0], initial=0) is -0.0, and a bool array's initial=5 is True)."""
    dtype = result.dtype
    if np.dtype(dtype) == np.asarray(initial).dtype:
        return initial
    if isinstance(initial, int) and not isinstance(initial, bool) and dtype.kind in "iu":
        return np.asarray(initial, dtype=dtype)     # (out of its range: NumPy's OverflowError)
    return np.asarray(initial).astype(dtype)


def _initial_only(np_fun, a, axis, keepdims, initial):
    """max/min with initial= of an empty array (or axis): NumPy's result, the initial value, with
    no gradient to give (a Tensor for a Tensor)."""
    value = np_fun(a.data if isinstance(a, Tensor) else np.asarray(a), axis=axis, keepdims=keepdims,
                   initial=initial)
    recorder = None if SHARED.quiet else tape.STATE.recorder   # (tt.compile: eagerly an array argument's)
    if isinstance(a, Tensor) and not (recorder is not None and recorder.passed_as_array(a)):
        return Tensor(np.asarray(value))
    return value
