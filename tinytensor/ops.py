"""The op table: every primitive, each declared once with its forward, VJP and JVP.

How to read a row:

    mul = defprim(np.multiply, "mul",
                  vjp=[lambda g, ans, a, b: g * b,     # d/da, one rule per input ...
                       lambda g, ans, a, b: g * a],
                  jvp=[lambda t, ans, a, b: t * b,     # ... and one tangent rule per input
                       lambda t, ans, a, b: a * t],
                  numpy=np.multiply)                   # np.multiply(tensor, ...) records mul

A row is the whole declaration: `tt.mul`, the NumPy function it stands for and the Tensor method
(`method=True`) derive from it (PUBLIC, NUMPY_FUNCTIONS, METHODS below), and its spec row in
specs.py makes the test sweep check both rules. Shorthands: `elementwise` (from the local
derivative), `deflinear` (only the transpose is written), `nondifferentiable`; `@public` gives a
primitive NumPy's signature or makes a composite public. Other op families live in their own
modules (ops_*.py, linalg.py) and use the same shorthands.

Rules take the cotangent `g` (or tangent `t`), the output `ans`, the inputs, then the static
parameters as keywords. They are plain NumPy and may return a broadcast shape: the engine
sums gradients back to each input's shape (`tape.unbroadcast`). Because a Tensor hands NumPy
calls back to this table (`numpy_dispatch`), the same rules run on Tensors when the reverse
sweep is itself recorded, which is how second derivatives (hvp, grad of grad) work.

A function is a primitive only when it needs its own rule (for speed or stability);
everything else at the end of this file is composed from primitives.
"""

import builtins
import math
import weakref

import numpy as np
import scipy.special
from scipy.linalg import blas

from . import backend, tape
from .tape import Primitive
from .tensor import Tensor, mark_modified

# ----- the table: what each operation is called, in tinytensor, in NumPy, as a method ---------------
# Filled by the rows below (and by the other op modules: linalg.py, ...). tinytensor/__init__.py
# exports PUBLIC as `tt.<name>`; numpy_dispatch maps NumPy functions through NUMPY_FUNCTIONS; every
# METHODS entry is installed on Tensor (`t.sum(axis=1)` is `tt.sum(t, axis=1)`).
PUBLIC = {}            # name -> function
NONDIFFERENTIABLE = set()   # NumPy functions computed on the values, with no gradient
NUMPY_FUNCTIONS = {}   # NumPy (or SciPy) function -> tinytensor function
METHODS = {}           # Tensor method name -> function taking the tensor first
BUILTIN = set()        # names of the built-in primitives (user primitives register elsewhere)


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
def defprim(fun, name, vjp, jvp, nargs=None, numpy=None, method=None, export=False, **options):
    """A primitive with one VJP rule and one JVP rule per input.

    `vjp`/`jvp` are lists with one rule per input (None: not differentiable in that input), or a
    single joint rule (a callable) for variadic ops. With `export` (or `numpy`/`method`) the
    primitive itself is public as `tt.<name>` (`export="other"`: as `tt.other`)."""
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


def nondifferentiable(*np_funs):
    """Mark NumPy functions as carrying no gradient: given Tensors they compute on the values
    and return plain arrays (comparisons, sign, argmax, ...)."""
    NONDIFFERENTIABLE.update(np_funs)


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


def _spread(g, x, axis, keepdims):
    """The VJP of summing `x` over `axis`: copy `g` back along the reduced axes."""
    g = _keepdims(g, x.shape, axis, keepdims)
    if isinstance(g, Tensor):
        return broadcast_to(g, x.shape)
    xp = np if type(g) is np.ndarray else backend.namespace(g)
    out = xp.empty(x.shape, g.dtype)   # cheaper than np.broadcast_to, and writable
    out[...] = g
    return out


# ----- elementwise, one input ---------------------------------------------------------------------
exp = elementwise(np.exp, "exp", lambda ans, x: ans, numpy=np.exp, method=True)


@np.errstate(divide="ignore")   # log(0) = -inf is the exact limit, not an error: no RuntimeWarning
def _log_forward(x):
    return np.log(x)


@np.errstate(divide="ignore")   # log'(0) = inf, as PyTorch, with no RuntimeWarning
def _log_deriv(ans, x):
    return 1 / x


@np.errstate(divide="ignore")   # sqrt'(0) = inf, as PyTorch, with no RuntimeWarning
def _sqrt_deriv(ans, x):
    return 0.5 / ans


log = elementwise(_log_forward, "log", _log_deriv, numpy=np.log, method=True)
sin = elementwise(np.sin, "sin", lambda ans, x: np.cos(x), numpy=np.sin, method=True)
cos = elementwise(np.cos, "cos", lambda ans, x: -np.sin(x), numpy=np.cos, method=True)
tanh = elementwise(np.tanh, "tanh", lambda ans, x: 1 - ans * ans, numpy=np.tanh, method=True)


def _expit(x):   # SciPy's on NumPy arrays; the array library's own (or a stable formula) elsewhere
    return scipy.special.expit(x) if type(x) is np.ndarray else backend.expit(x)


sigmoid = elementwise(_expit, "sigmoid", lambda ans, x: ans * (1 - ans),
                      numpy=scipy.special.expit, method=True)
relu = elementwise(lambda x: np.maximum(x, 0), "relu", lambda ans, x: x > 0,   # relu'(0) = 0
                   method=True)
sqrt = elementwise(np.sqrt, "sqrt", _sqrt_deriv, numpy=np.sqrt, method=True)
square = elementwise(np.square, "square", lambda ans, x: 2 * x, numpy=np.square, method=True)
abs = elementwise(np.abs, "abs", lambda ans, x: np.sign(x),                     # abs'(0) = 0
                  numpy=np.absolute, method=True)
neg = defprim(np.negative, "neg", vjp=[lambda g, ans, x: -g], jvp=[lambda t, ans, x: -t], numpy=np.negative)


# ----- elementwise, two inputs (NumPy broadcasting) --------------------------------------------
add = defprim(np.add, "add",
              vjp=[lambda g, ans, a, b: g, lambda g, ans, a, b: g],
              jvp=[lambda t, ans, a, b: t, lambda t, ans, a, b: t], numpy=np.add)
sub = defprim(np.subtract, "sub",
              vjp=[lambda g, ans, a, b: g, lambda g, ans, a, b: -g],
              jvp=[lambda t, ans, a, b: t, lambda t, ans, a, b: -t], numpy=np.subtract)
mul = defprim(np.multiply, "mul",
              vjp=[lambda g, ans, a, b: g * b, lambda g, ans, a, b: g * a],
              jvp=[lambda t, ans, a, b: t * b, lambda t, ans, a, b: a * t], numpy=np.multiply)
div = defprim(np.divide, "div",
              vjp=[lambda g, ans, a, b: g / b, lambda g, ans, a, b: -g * ans / b],
              jvp=[lambda t, ans, a, b: t / b, lambda t, ans, a, b: -t * ans / b], numpy=np.divide)


def _log_base(a):
    if isinstance(a, (int, float)):   # a Python number stays one (weak): 2.0 ** x32 keeps float32
        return math.log(a) if a > 0 else (0.0 if a == 0 else math.nan)
    return np.log(a + (a == 0))   # d(a**b)/db = a**b log a, taken as 0 where a == 0


def _power_slope(a, b):
    return b * a ** (b - 1 + (b == 0))   # d(a**b)/da; 0 where b == 0 (as PyTorch), not 0 * inf


power = defprim(np.power, "power",
                vjp=[lambda g, ans, a, b: g * _power_slope(a, b),
                     lambda g, ans, a, b: g * (ans * _log_base(a))],
                jvp=[lambda t, ans, a, b: t * _power_slope(a, b),
                     lambda t, ans, a, b: t * (ans * _log_base(a))], numpy=np.power, method="pow")


def _share(s, a, b):
    """Gradient share of `a` in max(a, b) for the cotangent s: all of it where a wins,
    half of it at ties (the documented subgradient, as PyTorch's), none where b wins."""
    return s * (a > b) + (s * 0.5) * (a == b)


maximum = defprim(np.maximum, "maximum",
                  vjp=[lambda g, ans, a, b: _share(g, a, b), lambda g, ans, a, b: _share(g, b, a)],
                  jvp=[lambda t, ans, a, b: _share(t, a, b), lambda t, ans, a, b: _share(t, b, a)],
                  numpy=np.maximum)
minimum = defprim(np.minimum, "minimum",
                  vjp=[lambda g, ans, a, b: _share(g, b, a), lambda g, ans, a, b: _share(g, a, b)],
                  jvp=[lambda t, ans, a, b: _share(t, b, a), lambda t, ans, a, b: _share(t, a, b)],
                  numpy=np.minimum)


# ----- reductions --------------------------------------------------------------------------------
def _max_weights(ans, x, axis, keepdims):
    """Where the maximum is, as weights summing to 1 along `axis` (ties share evenly)."""
    hit = x == _keepdims(ans, x.shape, axis, keepdims)
    return (hit / np.sum(hit, axis=axis, keepdims=True)).astype(x.dtype)


def _array(x):
    """x as an array: NumPy's and other libraries' arrays as they are, numbers and lists as NumPy's."""
    return x if type(x) is np.ndarray else backend.asarray(x)


def _sum_forward(x, axis=None, keepdims=False):
    return _array(x).sum(axis=axis, keepdims=keepdims)   # the method: ~1 us less than np.sum


def _mean_forward(x, axis=None, keepdims=False):
    x = _array(x)
    if x.ndim == 0 and isinstance(axis, int):    # x.sum takes axis 0 of a 0-d array; np.mean does not
        raise np.exceptions.AxisError(axis, 0)
    total = x.sum(axis=axis, keepdims=keepdims)
    return total / (x.size // builtins.max(np.size(total), 1))   # as np.mean, without its wrapper


_sum = defprim(_sum_forward, "sum", nargs=1,
               vjp=[lambda g, ans, x, axis, keepdims: _spread(g, x, axis, keepdims)],
               jvp=[lambda t, ans, x, axis, keepdims: np.sum(t, axis=axis, keepdims=keepdims)])
_mean = defprim(_mean_forward, "mean", nargs=1,
                vjp=[lambda g, ans, x, axis, keepdims:
                     _spread(g / (x.size // builtins.max(ans.size, 1)), x, axis, keepdims)],
                jvp=[lambda t, ans, x, axis, keepdims: np.mean(t, axis=axis, keepdims=keepdims)])
_max = defprim(np.max, "max", nargs=1,
               vjp=[lambda g, ans, x, axis, keepdims:
                    _keepdims(g, x.shape, axis, keepdims) * _max_weights(ans, x, axis, keepdims)],
               jvp=[lambda t, ans, x, axis, keepdims:
                    np.sum(t * _max_weights(ans, x, axis, keepdims), axis=axis, keepdims=keepdims)])


def _logsumexp_forward(x, axis=None, keepdims=False):
    x = _array(x)
    shift = x.max(axis=axis, keepdims=True)
    if not np.isfinite(shift).all():
        shift = np.where(np.isfinite(shift), shift, 0)       # rows of all -inf stay -inf
    out = np.log(np.exp(x - shift).sum(axis=axis, keepdims=True)) + shift
    return out if keepdims else out.reshape(np.delete(x.shape, _reduced_axes(x.ndim, axis)))


def _logsumexp_weights(ans, x, axis, keepdims):   # softmax of x along axis
    w = np.exp(x - _keepdims(ans, x.shape, axis, keepdims))
    return w / np.sum(w, axis=axis, keepdims=True)   # renormalised: ans is rounded at the scale of max(x)


_logsumexp = defprim(
    _logsumexp_forward, "logsumexp", nargs=1,
    vjp=[lambda g, ans, x, axis, keepdims:
         _keepdims(g, x.shape, axis, keepdims) * _logsumexp_weights(ans, x, axis, keepdims)],
    jvp=[lambda t, ans, x, axis, keepdims:
         np.sum(t * _logsumexp_weights(ans, x, axis, keepdims), axis=axis, keepdims=keepdims)])


def _softmax_forward(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    e /= e.sum(axis=axis, keepdims=True)
    return e


def _softmax_rule(g, ans, x, axis):   # the softmax Jacobian is symmetric: one formula for both
    return ans * (g - np.sum(g * ans, axis=axis, keepdims=True))


# keep_inputs: a softmax output remembers its logits even off the tape, so that
# crossEntropy(softmax(z), y) can be computed from z (finite and exact for any finite z).
_softmax = defprim(_softmax_forward, "softmax", nargs=1, keep_inputs=True,
                   vjp=[_softmax_rule], jvp=[_softmax_rule])


def _log_softmax_forward(x, axis=-1):
    # (x - max) - log(sum(exp(x - max))), not x - logsumexp(x): that rounds at the scale of max(x)
    # (an error of 2e-4 at logits of 1e4 in float32).
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


_log_softmax = defprim(_log_softmax_forward,
                       "log_softmax", nargs=1,
                       vjp=[lambda g, ans, x, axis:
                            g - np.exp(ans) * np.sum(g, axis=axis, keepdims=True)],
                       jvp=[lambda t, ans, x, axis:
                            t - np.sum(np.exp(ans) * t, axis=axis, keepdims=True)])


# ----- shape -------------------------------------------------------------------------------------
_reshape = defprim(lambda x, shape: np.reshape(x, shape), "reshape", nargs=1,
                   vjp=[lambda g, ans, x, shape: g.reshape(x.shape)],
                   jvp=[lambda t, ans, x, shape: np.reshape(t, shape)])


def _inverse_axes(axes):
    return None if axes is None else tuple(np.argsort(axes))


_transpose = defprim(lambda x, axes=None: np.transpose(x, axes), "transpose", nargs=1,
                     vjp=[lambda g, ans, x, axes: np.transpose(g, _inverse_axes(axes))],
                     jvp=[lambda t, ans, x, axes: np.transpose(t, axes)])
_broadcast_to = defprim(lambda x, shape: np.broadcast_to(x, shape), "broadcast_to", nargs=1,
                        vjp=[lambda g, ans, x, shape: g],       # the engine sums it back
                        jvp=[lambda t, ans, x, shape: np.broadcast_to(t, shape)])
_astype = defprim(lambda x, dtype: x.astype(dtype), "astype", nargs=1,
                  vjp=[lambda g, ans, x, dtype: g.astype(x.dtype)],
                  jvp=[lambda t, ans, x, dtype: t.astype(dtype)])


def _to_device_forward(x, device):
    return backend.to_device(x, device)


def _device_name(x):
    return x.device if isinstance(x, Tensor) else backend.device_of(x)


# Tensor.to(device): a copy to another device (CPU <-> GPU), linear; its transpose copies back.
_to_device = deflinear(_to_device_forward, "to_device",
                       vjp=lambda g, ans, x, device: _to_device(g, device=_device_name(x)))


def _is_basic(index):
    """Basic indexing (ints, slices, None, ...) never repeats an element."""
    items = index if isinstance(index, tuple) else (index,)
    return builtins.all(i is None or i is Ellipsis or isinstance(i, (int, np.integer, slice))
                        for i in items)


def _index_adjoint_forward(g, index, shape):
    """Scatter `g` into zeros of `shape` at `index`; repeated indices add up."""
    out = backend.namespace(g).zeros(shape, dtype=g.dtype)
    if _is_basic(index):
        out[index] = g
    else:
        backend.add_at(out, index, g)    # np.add.at, or the array library's own
    return out


_index_adjoint = defprim(_index_adjoint_forward, "index_adjoint", nargs=1,
                         vjp=[lambda g, ans, x, index, shape: g[index]],
                         jvp=[lambda t, ans, x, index, shape: _index_adjoint(t, index=index, shape=shape)])
getitem = defprim(lambda x, index: x[index], "getitem", nargs=1,
                  vjp=[lambda g, ans, x, index: _index_adjoint(g, index=index, shape=x.shape)],
                  jvp=[lambda t, ans, x, index: t[index]])


def _pieces(g, sizes, axis):
    """Cut `g` along `axis` into consecutive pieces of the given sizes."""
    axis = axis % np.ndim(g)
    lead = (slice(None),) * axis
    bounds = np.cumsum((0,) + tuple(sizes))
    return tuple(g[lead + (slice(int(lo), int(hi)),)] for lo, hi in zip(bounds[:-1], bounds[1:]))


def _zeros_for_missing(tangents, inputs):
    return [np.zeros_like(x) if t is None else t for t, x in zip(tangents, inputs)]


_concatenate = defprim(lambda *xs, axis=0: np.concatenate(xs, axis=axis), "concatenate", nargs=None,
                       vjp=lambda g, ans, *xs, axis: _pieces(g, [np.shape(x)[axis] for x in xs], axis),
                       jvp=lambda ts, ans, *xs, axis: np.concatenate(_zeros_for_missing(ts, xs), axis=axis))


def _stack_slices(g, n, axis):
    axis = axis % np.ndim(g)
    return tuple(g[(slice(None),) * axis + (i,)] for i in range(n))


_stack = defprim(lambda *xs, axis=0: np.stack(xs, axis=axis), "stack", nargs=None,
                 vjp=lambda g, ans, *xs, axis: _stack_slices(g, len(xs), axis),
                 jvp=lambda ts, ans, *xs, axis: np.stack(_zeros_for_missing(ts, xs), axis=axis))


# ----- linear algebra ------------------------------------------------------------------------
def _swap_last(m):   # m^T over the last two axes (.T is the cheap spelling for matrices)
    return m.T if m.ndim == 2 else m.swapaxes(-1, -2)


def _matmul_vjp_a(g, ans, a, b):
    if b.ndim == 1:                           # (..., n, k) @ (k,) -> (..., n), or (k,) @ (k,) -> ()
        return g * b if a.ndim == 1 else g[..., None] * b
    if a.ndim == 1:                           # (k,) @ (..., k, m) -> (..., m)
        return (b @ g[..., None])[..., 0]
    return g @ _swap_last(b)


def _matmul_vjp_b(g, ans, a, b):
    if a.ndim == 1:                           # (k,) @ (k,), or (k,) @ (..., k, m): outer product
        return g * a if b.ndim == 1 else a[:, None] * g[..., None, :]
    if b.ndim == 1:                           # (..., n, k) @ (k,): sum over n (and batch)
        return (g[..., None, :] @ a)[..., 0, :]
    return _swap_last(a) @ g


matmul = defprim(np.matmul, "matmul",
                 vjp=[_matmul_vjp_a, _matmul_vjp_b],
                 jvp=[lambda t, ans, a, b: t @ b, lambda t, ans, a, b: a @ t], numpy=np.matmul, method=True)


def _linear_forward(x, W, b):
    out = x @ W
    out += b            # in place on the fresh product: one array fewer
    return out


# x @ W + b as one tape entry (nn.Linear): matmul's rules, and the bias gradient is g itself,
# summed over the batch axes by the engine.
_linear = defprim(_linear_forward, "linear",
                  vjp=[lambda g, ans, x, W, b: _matmul_vjp_a(g, ans, x, W),
                       lambda g, ans, x, W, b: _matmul_vjp_b(g, ans, x, W),
                       lambda g, ans, x, W, b: g],
                  jvp=[lambda t, ans, x, W, b: t @ W, lambda t, ans, x, W, b: x @ t,
                       lambda t, ans, x, W, b: t])


def _dot_vjp_a(g, ans, a, b):
    if np.ndim(a) == 0 or np.ndim(b) == 0:    # a 0-d operand (or a number): np.dot multiplies
        return g * b
    if a.ndim > 1 and b.ndim > 2:             # N-D: a's last axis against b's second-to-last
        return np.tensordot(g, b, axes=(list(range(a.ndim - 1, g.ndim)),
                                        list(range(b.ndim - 2)) + [b.ndim - 1]))
    return _matmul_vjp_a(g, ans, a, b)


def _dot_vjp_b(g, ans, a, b):
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return g * a
    if a.ndim > 1 and b.ndim > 2:             # (k, B..., m) back to (B..., k, m)
        outer_axes = list(range(a.ndim - 1))
        g_b = np.tensordot(a, g, axes=(outer_axes, outer_axes))
        return np.transpose(g_b, list(range(1, b.ndim - 1)) + [0, b.ndim - 1])
    return _matmul_vjp_b(g, ans, a, b)


# Where np.dot is np.matmul (1-D and 2-D operands, or a 1-D one) the rules are matmul's.
_dot = defprim(np.dot, "dot",
               vjp=[_dot_vjp_a, _dot_vjp_b],
               jvp=[lambda t, ans, a, b: np.dot(t, b), lambda t, ans, a, b: np.dot(a, t)])


@public(numpy=np.dot, method=True)
def dot(a, b, out=None):
    """np.dot, also as np.dot(a=..., b=...) (a primitive's keywords are parameters, not inputs)."""
    if out is not None:
        raise TypeError("dot: out= is not supported on Tensors; use the returned value")
    return _dot(a, b)


# ----- the lecture's operations: softmax (above), crossEntropy, frobeniusNorm ----------------------
# BLAS nrm2: one pass, and no overflow or underflow in the squares (1e200, 1e-200).
_NRM2 = {np.dtype(np.float32): blas.snrm2, np.dtype(np.float64): blas.dnrm2}


def _frobenius_forward(w):
    w = _array(w)
    if type(w) is not np.ndarray:   # another library: the same scaling, without a host round trip
        scale = np.max(np.abs(w)) if w.size else backend.namespace(w).zeros((), w.dtype)
        return np.sqrt(np.sum((w / (scale + (scale == 0))) ** 2)) * scale
    nrm2 = _NRM2.get(w.dtype)
    if nrm2 is not None and w.size:
        return np.asarray(nrm2(w.ravel()), dtype=w.dtype)
    scale = np.max(np.abs(w)) if w.size else 0
    return np.sqrt(np.sum((w / scale) ** 2)) * scale if scale else np.zeros((), w.dtype)


def _safe(norm):
    return norm + (norm == 0)   # the gradient of the norm at W = 0 is 0, not 0/0


frobenius_norm = defprim(_frobenius_forward, "frobeniusNorm",
                         vjp=[lambda g, ans, w: g * w / _safe(ans)],   # w / norm: finite at 1e-300
                         jvp=[lambda t, ans, w: np.sum(w * t) / _safe(ans)], export="frobenius_norm")


def _hits(index, n):
    """On another device (CuPy): class indices as one-hot booleans, and per row whether the index
    lies in [0, n). There, labels are never used to index: CuPy wraps an out-of-range index
    silently, and raising IndexError, as on the CPU, would cost a round trip to the device every
    step. Rows with such a label get NaN (loss and gradient), which is never mistaken."""
    hit = index[..., None] == backend.namespace(index).arange(n)
    return hit, hit.any(axis=-1)


def _nan_unless(valid, values):
    return np.where(valid, values, np.nan).astype(values.dtype, copy=False)


def _class_indices(y, shape, check=False):
    """The labels as integer class indices of shape shape[:-1], or None for dense labels of
    `shape` (one-hot or soft). Anything else is an error naming both shapes."""
    value = y.data if isinstance(y, Tensor) else _array(y)
    shape = tuple(shape)
    if value.dtype.kind in "iu" and value.shape == shape[:-1]:
        if check and value.size and type(value) is np.ndarray and (
                value.min() < 0 or value.max() >= shape[-1]):   # elsewhere: NaN (see _hits)
            raise IndexError(f"class indices must lie in [0, {shape[-1]}); got "
                             f"{value.min()}..{value.max()}")
        return value
    if value.shape != shape:
        raise ValueError(f"labels must have the probabilities' shape {shape} "
                         f"or be integer class indices of shape {shape[:-1]}; got "
                         f"{value.dtype} labels of shape {value.shape}")
    return None


def _labels(y, shape, dtype, check=True):
    """The labels as a dense array (or Tensor) of `shape`: one-hot rows from class indices
    (range-checked: a negative index must not silently pick the last class; the rules pass
    check=False, as the forward has checked the same labels)."""
    index = _class_indices(y, shape, check=check)
    if index is None:
        return y
    if type(index) is not np.ndarray:
        hit, valid = _hits(index, shape[-1])
        return _nan_unless(valid[..., None], hit.astype(dtype))
    onehot = np.zeros(shape, dtype=dtype)
    onehot.reshape(-1, shape[-1])[np.arange(index.size), index.ravel()] = 1
    return onehot


def _at_labels(rows_by_class, index):
    """rows_by_class[..., index]: each row's entry at its class."""
    if type(index) is not np.ndarray:
        hit, valid = _hits(index, rows_by_class.shape[-1])
        return _nan_unless(valid, np.where(hit, rows_by_class, 0).sum(axis=-1))
    flat = rows_by_class.reshape(-1, rows_by_class.shape[-1])
    return flat[np.arange(index.size), index.ravel()].reshape(index.shape)


def _reduce_rows(rows, reduction):
    if reduction == "mean":
        return rows.sum() / builtins.max(rows.size, 1)   # methods: NumPy's np.mean costs ~3 us more
    if reduction == "sum":
        return rows.sum()
    if reduction == "none":
        return rows
    raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _row_cotangent(g, reduction, shape):
    """The cotangent of each row's loss, shaped to broadcast over the classes."""
    if reduction == "mean":
        return g / (math.prod(shape[:-1]) or 1)
    if reduction == "sum":
        return g
    return g[..., None]


def _rows_from_logits(z, y, reduction):
    """-sum(y * log_softmax(z)) per row: finite for any finite logits."""
    index = _class_indices(y, z.shape, check=True)
    log_p = _log_softmax_forward(z, axis=-1)
    if index is not None:
        return _reduce_rows(-_at_labels(log_p, index), reduction)
    y = y.data if isinstance(y, Tensor) else _array(y)
    if type(log_p) is not np.ndarray or log_p.min() == -np.inf:   # a logit of -inf: 0 * log 0 = 0,
        # and no RuntimeWarning (on a GPU always: asking would cost a round trip)
        log_p = np.where(y == 0, 0, log_p)
    return _reduce_rows(-(y * log_p).sum(axis=-1), reduction)


def _softmax_minus_labels(g, p, y, reduction):
    """rowcotangent * (p * sum(y) - y): the exact gradient of crossEntropy(softmax(z), y) in z,
    given p = softmax(z). No 1/p, so it is finite for any finite logits."""
    index = _class_indices(y, p.shape)
    scale = _row_cotangent(g, reduction, p.shape)
    if index is not None and not isinstance(p, Tensor) and not isinstance(g, Tensor):
        if type(index) is not np.ndarray:
            hit, valid = _hits(index, p.shape[-1])
            return _nan_unless(valid[..., None], (p - hit) * scale)
        # arrays: subtract at the labels, in place. C order, so that the reshape below is a view
        # (p is a transposed view for (N, C, d...) logits; a copy would lose the subtraction).
        grad = np.multiply(p, scale, order="C")
        flat = grad.reshape(-1, p.shape[-1])
        flat[np.arange(index.size), index.ravel()] -= scale if np.ndim(scale) == 0 else scale.ravel()
        return grad
    y = _labels(y, p.shape, p.dtype, check=False)
    return scale * (p * y.sum(axis=-1, keepdims=True) - y)


def _cross_entropy_forward(p, y, logits=None, reduction="mean"):
    if np.ndim(p) == 0:
        raise ValueError("cross_entropy: p must have a class axis (at least 1-D), got a scalar")
    if logits is not None:
        return _rows_from_logits(logits, y, reduction)
    if type(p) is np.ndarray and p.size and not (p.min() >= -1e-3 and p.max() <= 1 + 1e-3):   # slack:
        # rounding (a float32 softmax's 1 + ulp) and central differences at 0 or 1
        raise ValueError(f"p must hold probabilities in [0, 1], got values in "
                         f"[{p.min():.4g}, {p.max():.4g}]; for logits (PyTorch's F.cross_entropy) use "
                         f"tt.softmax_cross_entropy(logits, y), tt.cross_entropy(tt.softmax(logits), y) "
                         f"or nn.CrossEntropyLoss()")
    y = _labels(y, np.shape(p), p.dtype)
    xlogy = scipy.special.xlogy(y, p) if type(p) is np.ndarray else backend.xlogy(y, p)
    return _reduce_rows(-np.sum(xlogy, axis=-1), reduction)


def _ce_vjp_p(g, ans, p, y, logits, reduction):
    if logits is not None:
        return None                           # the gradient goes straight to the logits
    y = _labels(y, np.shape(p), p.dtype, check=False)
    return -_row_cotangent(g, reduction, np.shape(p)) * (y / (p + (y == 0)))


def _ce_log_p(p, logits):
    return np.log(p) if logits is None else _log_softmax(logits, axis=-1)


def _ce_vjp_y(g, ans, p, y, logits, reduction):
    return -_row_cotangent(g, reduction, np.shape(p)) * _ce_log_p(p, logits)


def _ce_vjp_logits(g, ans, p, y, logits, reduction):
    return _softmax_minus_labels(g, p, y, reduction)   # p is softmax(logits) exactly


def _ce_jvp(tangent_of_rows):
    return lambda t, ans, p, y, logits, reduction: _reduce_rows(
        np.sum(tangent_of_rows(t, p, y, logits), axis=-1), reduction)


def _ce_jvp_p(t, ans, p, y, logits, reduction):
    if logits is not None:
        return None                           # counted through the logits' tangent
    y = _labels(y, np.shape(p), p.dtype, check=False)
    return _reduce_rows(-np.sum(t * y / (p + (y == 0)), axis=-1), reduction)


_ce_jvp_y = _ce_jvp(lambda t, p, y, logits: -t * _ce_log_p(p, logits))
_ce_jvp_logits = _ce_jvp(lambda t, p, y, logits: t * _softmax_minus_labels(1, p, y, "sum"))

_cross_entropy = defprim(
    _cross_entropy_forward, "crossEntropy", nargs=3, shown_nargs=2,
    vjp=[_ce_vjp_p, _ce_vjp_y, _ce_vjp_logits],
    jvp=[_ce_jvp_p, _ce_jvp_y, _ce_jvp_logits])


# Cross-entropy of softmax(logits) as one fused, stable primitive (nn.CrossEntropyLoss): the
# rules are crossEntropy's logits and label rules, with p = softmax(z) recomputed.
_softmax_cross_entropy = defprim(
    lambda z, y, reduction="mean": _rows_from_logits(z, y, reduction), "softmax_cross_entropy",
    vjp=[lambda g, ans, z, y, reduction: _softmax_minus_labels(g, _softmax(z, axis=-1), y, reduction),
         lambda g, ans, z, y, reduction: _ce_vjp_y(g, ans, z, y, z, reduction)],
    jvp=[lambda t, ans, z, y, reduction: _ce_jvp_logits(t, ans, _softmax(z, axis=-1), y, z, reduction),
         lambda t, ans, z, y, reduction: _ce_jvp_y(t, ans, z, y, z, reduction)])


# ----- the public functions, with NumPy's and PyTorch's signatures ------------------------------
@public(numpy=np.sum, method=True)
def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None):
    if dtype is not None or out is not None:
        a, keepdims = _reduce_dtype("sum", a, dtype, out, keepdims)
    result = _sum(a, axis=axis, keepdims=keepdims)
    return result if initial is None else result + initial


@public(numpy=np.mean, method=True)
def mean(a, axis=None, dtype=None, out=None, keepdims=False):
    if dtype is not None or out is not None:
        a, keepdims = _reduce_dtype("mean", a, dtype, out, keepdims)
    return _mean(a, axis=axis, keepdims=keepdims)


def _reduce_dtype(name, a, dtype, out, keepdims):
    """NumPy's dtype= (a cast first), and PyTorch's positional keepdim (`t.sum(0, True)`)."""
    if out is not None:
        raise TypeError(f"{name}: out= is not supported on Tensors; use the returned value")
    if isinstance(dtype, bool):
        return a, dtype
    return astype(a, dtype) if isinstance(a, Tensor) else np.asarray(a, dtype=dtype), keepdims


@public(numpy=(np.max, np.amax), method=True)
def max(a, axis=None, out=None, keepdims=False, initial=None):
    """The maximum along `axis`; ties share the gradient evenly. NumPy's order: (a, axis, out,
    keepdims); `initial` joins the comparison."""
    if out is not None:
        raise TypeError("max: out= is not supported on Tensors; use the returned value")
    result = _max(a, axis=axis, keepdims=keepdims)
    return result if initial is None else maximum(result, initial)


@public(numpy=scipy.special.logsumexp, method=True)
def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
    """log(sum(exp(a))), stable for any finite input; scipy.special.logsumexp's signature
    (weights b= and return_sign=: tt.scipy.special.logsumexp's)."""
    if b is not None or return_sign:
        from .scipy.special import logsumexp as weighted
        return weighted(a, axis=axis, b=b, keepdims=keepdims, return_sign=return_sign)
    return _logsumexp(a, axis=axis, keepdims=keepdims)


@public(numpy=scipy.special.softmax, method=True)
def softmax(x, axis=-1):
    """exp(x) / sum(exp(x)) along `axis`, stable for any finite input."""
    p = _softmax(x, axis=axis)
    if type(p) is np.ndarray and p.ndim and axis in (-1, p.ndim - 1):   # plain arrays: see cross_entropy
        key = id(p)
        _PLAIN_SOFTMAX[key] = (weakref.ref(p, lambda _: _PLAIN_SOFTMAX.pop(key, None)), x)
    return p


# id(softmax output) -> (weak reference to it, its logits), for plain arrays (not Tensors), so that
# cross_entropy(softmax(z), y) on arrays is computed from z too.
_PLAIN_SOFTMAX = {}


@public(numpy=scipy.special.log_softmax, method=True)
def log_softmax(x, axis=-1):
    return _log_softmax(x, axis=axis)


@public(numpy=np.reshape)
def reshape(a, shape, order="C", *, copy=None):
    """np.reshape: `shape` an int, a sequence or an integer array; order "C" or "F" (a Fortran
    reshape is the C reshape of the transposes). The result is always a new Tensor (copy= is
    accepted for NumPy's signature)."""
    if isinstance(shape, np.ndarray):
        shape = tuple(shape.tolist()) if shape.ndim else (int(shape),)
    shape = tuple(shape) if isinstance(shape, (list, tuple)) else (shape,)
    if order == "C":
        return _reshape(a, shape=shape)
    if order != "F":
        raise ValueError(f"reshape: order must be 'C' or 'F' on Tensors, got {order!r}")
    return transpose(_reshape(transpose(a), shape=shape[::-1]))


@public(numpy=np.transpose)
def transpose(a, axes=None):
    return _transpose(a, axes=None if axes is None else tuple(axes))


@public(numpy=np.swapaxes, method=True)
def swapaxes(a, axis1, axis2):
    axes = list(range(np.ndim(a.data if isinstance(a, Tensor) else a)))
    for axis in (axis1, axis2):
        if not -len(axes) <= axis < len(axes):
            raise np.exceptions.AxisError(axis, len(axes))
    axes[axis1], axes[axis2] = axes[axis2], axes[axis1]
    return transpose(a, axes)


@public(numpy=np.broadcast_to)
def broadcast_to(array, shape):
    return _broadcast_to(array, shape=tuple(shape))


@public(method=True)
def astype(x, dtype):
    return _astype(x, dtype=np.dtype(dtype))


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
        cast.append(a if a.dtype == dtype else astype(a, dtype))
    return cast


@public(numpy=np.concatenate)
def concatenate(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    tensors = _joined(arrays, "concatenate", out, dtype, casting)
    if axis is None:   # as NumPy: every input flattened first
        tensors, axis = [reshape(t, -1) for t in tensors], 0
    return _concatenate(*tensors, axis=axis)


@public(numpy=np.stack)
def stack(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    return _stack(*_joined(arrays, "stack", out, dtype, casting), axis=axis)


@public
def linear(x, W, b=None):
    """x @ W + b (W of shape (in, out), as the lecture's dot(x, W)); one entry on the tape."""
    return matmul(x, W) if b is None else _linear(x, W, b)


def _labels_like(y, p):
    """Label data (not a Tensor) in p's float dtype: float64 one-hot labels must not silently
    turn a float32 model's loss into float64. Integer class indices stay integers."""
    if isinstance(y, Tensor):
        return y
    p = p.data if isinstance(p, Tensor) else _array(p)
    if type(y) is not np.ndarray or type(p) is not np.ndarray:   # lists, or arrays of a device
        y = backend.asarray(y, like=p, what="the labels")
    dtype = p.dtype
    return y.astype(dtype) if y.dtype.kind == "f" and dtype.kind == "f" and y.dtype != dtype else y


@public
def softmax_cross_entropy(logits, y, reduction="mean"):
    """cross_entropy(softmax(logits), y) as one fused primitive: stable for any finite logits.

    `y` holds integer class indices of shape logits.shape[:-1], or labels of logits' shape.
    """
    return _softmax_cross_entropy(logits, _labels_like(y, logits), reduction=reduction)


@public
def cross_entropy(p, y, reduction="mean"):
    """-sum(y * log p) per row; `p` holds probabilities along the last axis.

    `y` is an array of p's shape (one-hot or soft labels) or integer class indices of shape
    p.shape[:-1]; `reduction` is "mean" over rows, "sum" or "none". When `p` is the output of
    `softmax` over its last axis, the loss and its gradient are computed from the logits
    (finite and exact for any finite logits); the tape still reads softmax, crossEntropy.
    """
    logits = _softmax_logits(p)
    if logits is not None and isinstance(p, Tensor) and p._prim is _softmax:
        key = id(p)                       # for retain_grad() afterwards, which p can no longer honour
        FUSED_INTO_LOSS[key] = weakref.ref(p, lambda _: FUSED_INTO_LOSS.pop(key, None))
    return _cross_entropy(p, _labels_like(y, p), logits, reduction=reduction)


FUSED_INTO_LOSS = {}   # id -> weak reference: recorded softmax outputs a loss was computed around


def _softmax_logits(p):
    """The logits z when p = softmax(z) over the last axis still holds and nothing asks for p's own
    gradient (retain_grad, or p made a leaf): then the loss is computed from z. Otherwise None."""
    if type(p) is np.ndarray:
        entry = _PLAIN_SOFTMAX.get(id(p))
        if entry is None or entry[0]() is not p:
            return None
        z = _array(entry[1])
        return z if np.array_equal(_softmax_forward(z, axis=-1), p) else None   # not changed in place
    if not isinstance(p, Tensor) or p._inputs is None:
        return None
    if p._prim is _softmax:                 # recorded: fused unless p's gradient is wanted
        wanted = tape.RETAINED and tape.RETAINED.get(p)
    elif p._prim is None and p._params is not None:   # softmax computed off the tape, not made a leaf
        wanted = p.requires_grad
    else:
        return None
    z = p._inputs[0]
    if (wanted or p._params["axis"] not in (-1, p.ndim - 1) or p._version >= 0   # p or z changed in
            or isinstance(z, Tensor) and z._version > p._id):                   # place since then
        return None
    return z


# The lecture's spellings.
crossEntropy = publish(cross_entropy, "crossEntropy")
frobeniusNorm = publish(frobenius_norm, "frobeniusNorm")


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
        return result
    name = getattr(func, "__name__", repr(func)) + ("" if method == "__call__" else "." + method)
    why = ("is recorded only as a plain call (no out= or other keywords, no ufunc methods)"
           if func in NUMPY_FUNCTIONS else "has no gradient rule in tinytensor")
    raise TypeError(f"np.{name} {why}, and a Tensor that requires grad "
                    f"was given to it: use tinytensor operations (tt.stack([...]) or "
                    f"tt.concatenate([...]) for lists of Tensors), t.detach() or t.numpy() for "
                    f"the value alone, or tt.no_grad() around code that needs no gradient")


# ----- setitem: `t[index] = v` while recording (issue 10; Tensor.__setitem__ uses it) -----------
def _setitem_forward(x, v, index):
    """A copy of `x` with `v` written at `index` (the previous value stays on the tape)."""
    if not _is_basic(index):
        hits = backend.namespace(x).zeros(np.shape(x), dtype=np.intp)
        backend.add_at(hits, index, 1)
        if hits.size and int(hits.max()) > 1:     # (CuPy's max has no initial=)
            raise IndexError("t[index] = v with an index that repeats a position is ambiguous "
                             "(NumPy keeps one of the writes); use distinct positions")
    out = backend.copy(x)
    out[index] = v
    return out


setitem = defprim(_setitem_forward, "setitem",
                  vjp=[lambda g, ans, x, v, index: setitem(g, 0.0, index=index),   # overwritten
                       lambda g, ans, x, v, index: g[index]],   # the engine sums out broadcasting
                  jvp=[lambda t, ans, x, v, index: setitem(t, 0.0, index=index),
                       lambda t, ans, x, v, index: setitem(np.zeros_like(ans), t, index=index)])
# ----- end of setitem ------------------------------------------------------------------------------
