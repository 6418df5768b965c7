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
primitive NumPy's signature or makes a composite public. They, and the tables, live in table.py;
the other op families (softmax_xent.py, elementwise.py, reductions.py, shape.py, ../linalg.py)
use the same shorthands.

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

import numpy as np
import scipy.special
from scipy.linalg import blas

from .. import backend
from ..tensor import Tensor
from ..torch_interop import numpy_dtype
from .table import (
    _array,
    _expit,
    _in_dtype,
    _initial,
    _initial_only,
    _joined,
    _keepdims,
    _max_share,
    _reduced_axes,
    _safe,
    _select,
    _swap_last,
    complex_rules,
    deflinear,
    defprim,
    elementwise,
    on_values,
    public,
    publish,
)


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
exp.__doc__ = """`e**x`, elementwise (as `np.exp`); its derivative is itself.

Examples
--------
>>> x = tt.tensor([0.0, 1.0], requires_grad=True)
>>> tt.exp(x).sum().backward()
>>> x.grad
array([1.        , 2.71828183])
"""


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
log.__doc__ = """Natural logarithm, elementwise (as `np.log`).

Examples
--------
>>> x = tt.tensor([1.0, 2.0], requires_grad=True)
>>> tt.log(x).sum().backward()
>>> x.grad
array([1. , 0.5])
"""
sin = elementwise(np.sin, "sin", lambda ans, x: np.cos(x), numpy=np.sin, method=True)
sin.__doc__ = """Sine of radians, elementwise (as `np.sin`).

Examples
--------
>>> x = tt.tensor([0.0, np.pi / 2], requires_grad=True)
>>> tt.sin(x).sum().backward()
>>> x.grad.round(12)   # cos x
array([1., 0.])
"""
cos = elementwise(np.cos, "cos", lambda ans, x: -np.sin(x), numpy=np.cos, method=True)
cos.__doc__ = """Cosine of radians, elementwise (as `np.cos`).

Examples
--------
>>> x = tt.tensor([0.0, np.pi / 2], requires_grad=True)
>>> tt.cos(x).sum().backward()
>>> x.grad.round(12)   # -sin x
array([-0., -1.])
"""
tanh = elementwise(np.tanh, "tanh", lambda ans, x: 1 - ans * ans, numpy=np.tanh, method=True)
tanh.__doc__ = """Hyperbolic tangent, elementwise (as `np.tanh`); the derivative reuses the
output: `1 - tanh**2`.

Examples
--------
>>> x = tt.tensor([0.0, 1.0], requires_grad=True)
>>> tt.tanh(x).sum().backward()
>>> x.grad
array([1.        , 0.41997434])
"""


sigmoid = elementwise(_expit, "sigmoid", lambda ans, x: ans * (1 - ans),
                      numpy=scipy.special.expit, method=True)
sigmoid.__doc__ = """The logistic function `1 / (1 + exp(-x))`, elementwise (as `scipy.special.expit`).

Examples
--------
>>> tt.sigmoid(tt.tensor([0.0]))
tensor([0.5])
"""
def _relu_rule(g, ans, x):
    return _select(x > 0, g)            # relu'(0) = 0


relu = defprim(lambda x: np.maximum(x, 0), "relu", vjp=[_relu_rule], jvp=[_relu_rule], method=True)
relu.__doc__ = """`max(x, 0)`, elementwise; its derivative at 0 is 0 (as PyTorch's).

Examples
--------
>>> tt.relu(tt.tensor([-1.0, 0.0, 2.0]))
tensor([0., 0., 2.])
"""
sqrt = elementwise(np.sqrt, "sqrt", _sqrt_deriv, numpy=np.sqrt, method=True)
sqrt.__doc__ = """Square root, elementwise (as `np.sqrt`); its derivative at 0 is inf, as PyTorch's.

Examples
--------
>>> x = tt.tensor([1.0, 4.0], requires_grad=True)
>>> tt.sqrt(x).sum().backward()
>>> x.grad
array([0.5 , 0.25])
"""
square = elementwise(np.square, "square", lambda ans, x: 2 * x, numpy=np.square, method=True)
square.__doc__ = """`x * x`, elementwise (as `np.square`).

Examples
--------
>>> x = tt.tensor([-1.0, 3.0], requires_grad=True)
>>> tt.square(x).sum().backward()
>>> x.grad
array([-2.,  6.])
"""
def _abs_rule(g, ans, x):
    if x.dtype.kind == "c":                  # d|z| = Re(conj(z) dz) / |z|; 0 at z = 0
        return np.where(x != 0, g * (np.conj(x) / _safe(ans)), 0)
    return _select(x != 0, g * np.sign(x))   # abs'(0) = 0, selected (not inf * 0)


def _abs_tangent(t, ans, x):
    if x.dtype.kind == "c":
        return np.real(np.conj(x) * t) / _safe(ans)
    return _select(x != 0, t * np.sign(x))


abs = defprim(np.abs, "abs", vjp=[_abs_rule], jvp=[_abs_tangent], numpy=np.absolute, method=True)
abs.__doc__ = """Absolute value, elementwise (as `np.abs`); its derivative at 0 is 0 (as PyTorch's). A complex
intermediate's gradient follows JAX's convention (ops/complex_numbers.py).

Examples
--------
>>> x = tt.tensor([-2.0, 0.0, 3.0], requires_grad=True)
>>> tt.abs(x).sum().backward()
>>> x.grad
array([-1.,  0.,  1.])
"""
neg = defprim(np.negative, "neg", vjp=[lambda g, ans, x: -g], jvp=[lambda t, ans, x: -t], numpy=np.negative)
neg.__doc__ = """`-x`, elementwise (as `np.negative`): the operator `-t` records it.

Examples
--------
>>> tt.neg(tt.tensor([1.0, -2.0]))
tensor([-1.,  2.])
"""


# ----- elementwise, two inputs (NumPy broadcasting) --------------------------------------------
add = defprim(np.add, "add",
              vjp=[lambda g, ans, a, b: g, lambda g, ans, a, b: g],
              jvp=[lambda t, ans, a, b: t, lambda t, ans, a, b: t], numpy=np.add)
add.__doc__ = """`a + b` with NumPy's broadcasting (as `np.add`): the operator `+` records it. Each input's
gradient is summed back to its own shape.

Examples
--------
>>> a = tt.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
>>> b = tt.tensor([10.0, 20.0], requires_grad=True)
>>> tt.add(a, b)
tensor([[11., 22.],
        [13., 24.]], requires_grad=True)
>>> tt.add(a, b).sum().backward()
>>> b.grad                     # b was broadcast over 2 rows
array([2., 2.])
"""
sub = defprim(np.subtract, "sub",
              vjp=[lambda g, ans, a, b: g, lambda g, ans, a, b: -g],
              jvp=[lambda t, ans, a, b: t, lambda t, ans, a, b: -t], numpy=np.subtract)
sub.__doc__ = """`a - b` with NumPy's broadcasting (as `np.subtract`): the operator `-` records it.

Examples
--------
>>> a = tt.tensor([5.0, 7.0], requires_grad=True)
>>> b = tt.tensor(2.0, requires_grad=True)
>>> tt.sub(a, b).sum().backward()
>>> a.grad, b.grad
(array([1., 1.]), array(-2.))
"""
mul = defprim(np.multiply, "mul",
              vjp=[lambda g, ans, a, b: g * b, lambda g, ans, a, b: g * a],
              jvp=[lambda t, ans, a, b: t * b, lambda t, ans, a, b: a * t], numpy=np.multiply)
mul.__doc__ = """`a * b` with NumPy's broadcasting (as `np.multiply`): the operator `*` records it.

Examples
--------
>>> a = tt.tensor([2.0, 3.0], requires_grad=True)
>>> b = tt.tensor([4.0, 5.0], requires_grad=True)
>>> tt.mul(a, b).sum().backward()
>>> a.grad, b.grad
(array([4., 5.]), array([2., 3.]))
"""
div = defprim(np.divide, "div",
              vjp=[lambda g, ans, a, b: g / b, lambda g, ans, a, b: -g * ans / b],
              jvp=[lambda t, ans, a, b: t / b, lambda t, ans, a, b: -t * ans / b], numpy=np.divide)
div.__doc__ = """`a / b` with NumPy's broadcasting (as `np.divide`, true division): the operator
`/` records it.

Examples
--------
>>> a = tt.tensor([1.0, 6.0], requires_grad=True)
>>> b = tt.tensor([2.0, 3.0], requires_grad=True)
>>> tt.div(a, b)
tensor([0.5, 2. ], requires_grad=True)
>>> tt.div(a, b).sum().backward()
>>> a.grad, b.grad             # 1 / b and -a / b**2
(array([0.5       , 0.33333333]), array([-0.25      , -0.66666667]))
"""


def _log_base(a):
    if type(a) is float or type(a) is int:   # a Python number stays one (weak): 2.0 ** x32 keeps
        # float32 (not a NumPy scalar, a float subclass: math.log differs from np.log in the last bit)
        return math.log(a) if a > 0 else (0.0 if a == 0 else math.nan)
    return np.log(a + (a == 0))   # d(a**b)/db = a**b log a, taken as 0 where a == 0


def _power_slope(a, b):
    # d(a**b)/da; 0 where b == 0 (as PyTorch), not 0 * inf. np.power, not `**`: on NumPy scalars
    # (0-d values) `**` is the C library's pow, which differs from the ufunc's in the last bit.
    return b * np.power(a, b - 1 + (b == 0))


power = defprim(np.power, "power",
                vjp=[lambda g, ans, a, b: g * _power_slope(a, b),
                     lambda g, ans, a, b: g * (ans * _log_base(a))],
                jvp=[lambda t, ans, a, b: t * _power_slope(a, b),
                     lambda t, ans, a, b: t * (ans * _log_base(a))], numpy=np.power, method="pow")
power.__doc__ = """`a ** b` with NumPy's broadcasting (as `np.power`): the operator `**` records it. The
derivative in `a` is 0 where `b == 0`, and in `b` it is 0 where `a == 0` (as PyTorch's).

Examples
--------
>>> a = tt.tensor([2.0, 3.0], requires_grad=True)
>>> b = tt.tensor(2.0, requires_grad=True)
>>> tt.power(a, b)
tensor([4., 9.], requires_grad=True)
>>> tt.power(a, b).sum().backward()
>>> a.grad, b.grad             # b a**(b-1) and sum(a**b log a)
(array([4., 6.]), array(12.66009932))
"""


def _share(s, a, b):
    """Gradient share of `a` in max(a, b) for the cotangent s: all of it where a wins,
    half of it at ties (the documented subgradient, as PyTorch's), none where b wins."""
    return _select(a > b, s) + _select(a == b, s * 0.5)   # selected: b's win gives an exact 0


maximum = defprim(np.maximum, "maximum",
                  vjp=[lambda g, ans, a, b: _share(g, a, b), lambda g, ans, a, b: _share(g, b, a)],
                  jvp=[lambda t, ans, a, b: _share(t, a, b), lambda t, ans, a, b: _share(t, b, a)],
                  numpy=np.maximum)
maximum.__doc__ = """The elementwise larger of `a` and `b`, with NumPy's broadcasting (as
`np.maximum`; NaN wins). At a tie each input gets half of the gradient (as PyTorch's).

Examples
--------
>>> a = tt.tensor([1.0, 2.0, 3.0], requires_grad=True)
>>> tt.maximum(a, 2.0)
tensor([2., 2., 3.], requires_grad=True)
>>> tt.maximum(a, 2.0).sum().backward()
>>> a.grad
array([0. , 0.5, 1. ])
"""
minimum = defprim(np.minimum, "minimum",
                  vjp=[lambda g, ans, a, b: _share(g, b, a), lambda g, ans, a, b: _share(g, a, b)],
                  jvp=[lambda t, ans, a, b: _share(t, b, a), lambda t, ans, a, b: _share(t, a, b)],
                  numpy=np.minimum)
minimum.__doc__ = """The elementwise smaller of `a` and `b`, with NumPy's broadcasting (as
`np.minimum`; NaN wins). At a tie each input gets half of the gradient (as PyTorch's).

Examples
--------
>>> a = tt.tensor([1.0, 2.0, 3.0], requires_grad=True)
>>> tt.minimum(a, 2.0).sum().backward()
>>> a.grad
array([1. , 0.5, 0. ])
"""


# ----- reductions --------------------------------------------------------------------------------
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
                    _max_share(_keepdims(g, x.shape, axis, keepdims), ans, x, axis, keepdims)],
               jvp=[lambda t, ans, x, axis, keepdims:
                    np.sum(_max_share(t, ans, x, axis, keepdims), axis=axis, keepdims=keepdims)])


def _empty_reduction(x, axis, keepdims, fill):
    """A reduction of a size-0 x (no max to shift by): `fill` wherever the reduced axes are empty."""
    shape = tuple(1 if i in _reduced_axes(x.ndim, axis) else n for i, n in enumerate(x.shape))
    out = backend.namespace(x).full(shape, fill, x.dtype if x.dtype.kind == "f" else np.float64)
    return out if keepdims else out.reshape(np.delete(x.shape, _reduced_axes(x.ndim, axis)))


def _logsumexp_forward(x, axis=None, keepdims=False):
    x = _array(x)
    if not x.size:                     # log(0) = -inf over an empty axis, as SciPy
        return _empty_reduction(x, axis, keepdims, -np.inf)
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


# logsumexp with weights b and return_sign (scipy.special.logsumexp's; tt.scipy.special uses it)
def _data(x):
    return x.data if isinstance(x, Tensor) else x


def _weighted_logsumexp(a, b, axis=None, keepdims=False, signed=False):
    """log|sum(b * exp(a))| (signed) or log(sum(b * exp(a))) along axis, shifted by the max."""
    a = np.where(b != 0, a, -np.inf)           # terms of weight 0 do not count (nor overflow)
    shift = np.max(a, axis=axis, keepdims=True)
    shift = np.where(np.isfinite(shift), shift, 0)
    total = np.sum(b * np.exp(a - shift), axis=axis, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):   # a negative sum: NaN, as SciPy
        out = np.log(np.abs(total) if signed else total) + shift
    return out if keepdims else np.squeeze(out, axis=tuple(range(out.ndim)) if axis is None else axis)


def _lse_weights(ans, a, b, axis, keepdims):
    """d ans / d(b_i e^a_i) = sign(sum) e^-ans, times e^a_i: sign * exp(a - ans), broadcast."""
    ans = _keepdims(ans, np.broadcast_shapes(np.shape(a), np.shape(b)), axis, keepdims)
    sign = _rule_sign(a, b, ans, axis)          # the sign of the sum: a constant
    if isinstance(a, Tensor) or isinstance(b, Tensor):   # (a rule at a higher order: tt.compile
        sign = on_values(_rule_sign, (a, b, ans, axis), {}, sign, "logsumexp_sign")  # sees it)
    return sign * np.exp(a - ans)


def _rule_sign(a, b, ans, axis):
    """The sign of sum(b * exp(a)) in logsumexp_b's rules (ans kept dims there)."""
    return np.sign(np.sum(_data(b) * np.exp(_data(a) - _data(ans)), axis=axis, keepdims=True))


def _lse_rule(which, reduce):
    def rule(c, ans, a, b, axis, keepdims, signed):
        w = _lse_weights(ans, a, b, axis, keepdims)
        w = w * b if which == 0 else w
        if reduce:                               # JVP: sum the tangent's contributions
            return np.sum(c * w, axis=axis, keepdims=keepdims)
        return _keepdims(c, np.shape(w), axis, keepdims) * w
    return rule


_logsumexp_b = defprim(_weighted_logsumexp, "logsumexp_b", nargs=2,
                       vjp=[_lse_rule(0, False), _lse_rule(1, False)],
                       jvp=[_lse_rule(0, True), _lse_rule(1, True)])


# ----- shape -------------------------------------------------------------------------------------
_reshape = defprim(lambda x, shape: np.reshape(x, shape), "reshape", nargs=1,
                   vjp=[lambda g, ans, x, shape: g.reshape(x.shape)],
                   jvp=[lambda t, ans, x, shape: np.reshape(t, shape)])


def _inverse_axes(axes, ndim):
    """The permutation that undoes `axes` (negative axes as NumPy reads them: -1 is the last)."""
    return None if axes is None else tuple(np.argsort([a % ndim for a in axes]))


_transpose = defprim(lambda x, axes=None: np.transpose(x, axes), "transpose", nargs=1,
                     vjp=[lambda g, ans, x, axes: np.transpose(g, _inverse_axes(axes, np.ndim(x)))],
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
    elif (type(index) is np.ndarray and type(g) is np.ndarray and index.dtype.kind in "iu"
          and index.size >= 16 and g.shape == index.shape + tuple(shape[1:])):
        _add_rows(out, index.ravel(), g.reshape(index.size, -1))
    else:
        backend.add_at(out, index, g)    # np.add.at, or the array library's own
    return out


def _add_rows(out, rows, values):
    """np.add.at(out, rows, values) for one integer array of rows (an embedding's backward), 4x
    faster: the values sorted by row (stably), each row's summed by np.add.reduceat, added once.
    Rows were checked by the forward's indexing; a negative one counts from the end, as there."""
    low = rows.min()
    if low < -out.shape[0]:       # (a wrapped row would land silently elsewhere: np.add.at raises)
        raise IndexError(f"index {low} is out of bounds for axis 0 with size {out.shape[0]}")
    if low < 0:
        rows = np.where(rows < 0, rows + out.shape[0], rows)
    order = np.argsort(rows, kind="stable")
    rows = rows[order]
    starts = np.flatnonzero(np.concatenate(([True], rows[1:] != rows[:-1])))
    out.reshape(out.shape[0], -1)[rows[starts]] += np.add.reduceat(values[order], starts, axis=0)


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
def _rows_times(a, m):
    """a (..., n, k) @ m (k, j) as ONE matrix product over all leading rows: NumPy's matmul runs
    one GEMM per batch entry (16 of 32 x 64 x 192 for a small transformer's projections), which
    costs several times one GEMM of 512 x 64 x 192."""
    return (a.reshape(-1, a.shape[-1]) @ m).reshape(a.shape[:-1] + m.shape[-1:])


def _batched_by_matrix(a, b):
    return type(a) is np.ndarray and type(b) is np.ndarray and a.ndim > 2 and b.ndim == 2


def _matmul_forward(a, b):
    """Matrix product (as `np.matmul` and `@`: batched, broadcasting over leading axes).

    Examples
    --------
    >>> A = tt.tensor(np.eye(2), requires_grad=True)
    >>> x = tt.tensor([1.0, 2.0])
    >>> tt.matmul(A, x)
    tensor([1., 2.], requires_grad=True)
    """
    return _rows_times(a, b) if _batched_by_matrix(a, b) else np.matmul(a, b)


def _matmul_vjp_a(g, ans, a, b):
    if b.ndim == 1:                           # (..., n, k) @ (k,) -> (..., n), or (k,) @ (k,) -> ()
        return g * b if a.ndim == 1 else g[..., None] * b
    if a.ndim == 1:                           # (k,) @ (..., k, m) -> (..., m)
        return (b @ g[..., None])[..., 0]
    if b.shape[-1] == 1 and type(g) is np.ndarray and type(b) is np.ndarray:
        # m = 1 (a network's one output): g @ b^T is an outer product, the same single products as
        # one broadcast multiply, which is 2-3x faster than a GEMM with an inner dimension of 1
        return g * _swap_last(b)
    if _batched_by_matrix(g, b):
        return _rows_times(g, b.T)
    return g @ _swap_last(b)


def _matmul_vjp_b(g, ans, a, b):
    if a.ndim == 1:                           # (k,) @ (k,), or (k,) @ (..., k, m): outer product
        return g * a if b.ndim == 1 else a[:, None] * g[..., None, :]
    if b.ndim == 1:                           # (..., n, k) @ (k,): sum over n (and batch)
        return (g[..., None, :] @ a)[..., 0, :]
    if _batched_by_matrix(a, b) and type(g) is np.ndarray:   # summed over the batch by the product
        return a.reshape(-1, a.shape[-1]).T @ g.reshape(-1, g.shape[-1])
    return _swap_last(a) @ g


matmul = defprim(_matmul_forward, "matmul",
                 vjp=[_matmul_vjp_a, _matmul_vjp_b],
                 jvp=[lambda t, ans, a, b: t @ b, lambda t, ans, a, b: a @ t], numpy=np.matmul, method=True)


def _linear_forward(x, W, b):
    out = _matmul_forward(x, W)
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


# Rules that hold for complex values (JAX's convention, table.complex_rules): the holomorphic and
# linear ones, abs (its own complex branch); sum's and the shape primitives' transposes.
complex_rules(add, sub, mul, div, neg, exp, abs, matmul, _dot, _sum, _mean, _reshape, _transpose,
              _broadcast_to, getitem, _index_adjoint, _concatenate, _stack)


@public(numpy=np.dot, method=True)
def dot(a, b, out=None):
    """np.dot, also as np.dot(a=..., b=...) (a primitive's keywords are parameters, not inputs).

    Examples
    --------
    >>> tt.dot(tt.tensor([1.0, 2.0]), tt.tensor([3.0, 4.0]))
    tensor(11.)
    """
    if out is not None:
        raise TypeError("dot: out= is not supported on Tensors; use the returned value")
    return _dot(a, b)


# ----- the lecture's operations: frobeniusNorm (softmax, crossEntropy: softmax_xent.py) -------------
# BLAS nrm2: one pass, and no overflow or underflow in the squares (1e200, 1e-200).
_NRM2 = {np.dtype(np.float32): blas.snrm2, np.dtype(np.float64): blas.dnrm2}


def _frobenius_forward(w):
    """The Frobenius norm `sqrt(sum(W**2))` (the lecture's `frobeniusNorm`).

    Exact from 1e-200 to 1e200 (BLAS `nrm2`); its gradient at `W = 0` is 0, not NaN.

    Examples
    --------
    >>> W = tt.tensor([[3.0, 0.0], [0.0, 4.0]], requires_grad=True)
    >>> n = tt.frobenius_norm(W)
    >>> n.item()
    5.0
    >>> n.backward()
    >>> W.grad
    array([[0.6, 0. ],
           [0. , 0.8]])
    """
    w = _array(w)
    if type(w) is not np.ndarray:   # another library: the same scaling, without a host round trip
        scale = np.max(np.abs(w)) if w.size else backend.namespace(w).zeros((), w.dtype)
        return np.sqrt(np.sum((w / (scale + (scale == 0))) ** 2)) * scale
    nrm2 = _NRM2.get(w.dtype)
    if nrm2 is not None and w.size:
        return np.asarray(nrm2(w.ravel()), dtype=w.dtype)
    scale = np.max(np.abs(w)) if w.size else 0
    return np.sqrt(np.sum((w / scale) ** 2)) * scale if scale else np.zeros((), w.dtype)


frobenius_norm = defprim(_frobenius_forward, "frobeniusNorm",
                         vjp=[lambda g, ans, w: g * w / _safe(ans)],   # w / norm: finite at 1e-300
                         jvp=[lambda t, ans, w: np.sum(w * t) / _safe(ans)], export="frobenius_norm")


# ----- the public functions, with NumPy's and PyTorch's signatures ------------------------------
@public(numpy=np.sum, method=True)
def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None):
    """The sum over `axis` (all axes by default), as `np.sum`; `dim=`/`keepdim=` as PyTorch's.

    Examples
    --------
    >>> x = tt.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    >>> tt.sum(x, axis=1)
    tensor([3., 7.], requires_grad=True)
    >>> x.sum().backward()
    >>> x.grad
    array([[1., 1.],
           [1., 1.]])
    """
    if dtype is not None or out is not None:
        a, keepdims = _reduce_dtype("sum", a, dtype, out, keepdims)
    result = _in_dtype(_sum(a, axis=axis, keepdims=keepdims), dtype)
    return result if initial is None else result + initial


@public(numpy=np.mean, method=True)
def mean(a, axis=None, dtype=None, out=None, keepdims=False):
    """The mean over `axis` (all axes by default), as `np.mean`; `dim=`/`keepdim=` as PyTorch's.

    Examples
    --------
    >>> x = tt.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    >>> tt.mean(x, axis=0)
    tensor([2., 3.], requires_grad=True)
    >>> tt.mean(x).backward()
    >>> x.grad
    array([[0.25, 0.25],
           [0.25, 0.25]])
    """
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
    keepdims); `initial` joins the comparison.

    Examples
    --------
    >>> x = tt.tensor([[1.0, 5.0], [3.0, 2.0]], requires_grad=True)
    >>> tt.max(x, axis=0)
    tensor([3., 5.], requires_grad=True)
    >>> tt.max(x).backward()
    >>> x.grad
    array([[0., 1.],
           [0., 0.]])
    """
    if out is not None:
        raise TypeError("max: out= is not supported on Tensors; use the returned value")
    if initial is not None and np.size(a.data if isinstance(a, Tensor) else a) == 0:   # NumPy's: initial
        return _initial_only(np.max, a, axis, keepdims, initial)
    result = _max(a, axis=axis, keepdims=keepdims)
    return result if initial is None else maximum(_initial(initial, result), result)


@public(numpy=scipy.special.logsumexp, method=True)
def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
    """log(sum(b * exp(a))) along `axis`, stable for any finite input (scipy.special.logsumexp,
    also tt.scipy.special.logsumexp), differentiable in a and b. With return_sign=True:
    (log|sum|, sign), the sign a plain array; without it a negative sum gives NaN, as SciPy.

    Examples
    --------
    >>> round(tt.logsumexp(tt.tensor([1000.0, 1000.0])).item() - 1000.0, 6)   # log 2, no overflow
    0.693147
    """
    if b is None and not return_sign:
        return _logsumexp(a, axis=axis, keepdims=keepdims)
    # the weighted form: log|sum(b * exp(a))|, differentiable in a and b; the sign a plain array
    if b is None:
        b = np.ones((), dtype=getattr(a, "dtype", np.float64))
    axis = tuple(axis) if isinstance(axis, list) else axis
    out = _logsumexp_b(a, b, axis=axis, keepdims=keepdims, signed=bool(return_sign))
    if not return_sign:
        return out
    args = (a, b, out, axis, keepdims)        # on the values, off the tape (tt.compile: a line of
    sign = on_values(_lse_sign, args, {}, _lse_sign(*map(_data, args)), "logsumexp_sign")   # the
    return out, sign                                                                           # program)


def _lse_sign(a, b, out, axis, keepdims):
    """The sign of sum(b * exp(a)) along axis, out = log|sum|: a plain array."""
    return np.sign(np.sum(b * np.exp(np.asarray(a) - _keepdims(
        out, np.broadcast_shapes(np.shape(a), np.shape(b)), axis, keepdims)), axis=axis, keepdims=keepdims))


@public(numpy=np.reshape)
def reshape(a, shape, order="C", *, copy=None):
    """np.reshape: `shape` an int, a sequence or an integer array; order "C" or "F" (a Fortran
    reshape is the C reshape of the transposes). The result is always a new Tensor (copy= is
    accepted for NumPy's signature).

    Examples
    --------
    >>> tt.reshape(tt.arange(6), (2, 3))
    tensor([[0, 1, 2],
            [3, 4, 5]], dtype=int64)
    """
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
    """Permute the axes (as `np.transpose`: reversed by default).

    Examples
    --------
    >>> tt.transpose(tt.zeros(2, 3)).shape
    (3, 2)
    """
    return _transpose(a, axes=None if axes is None else tuple(axes))


@public(numpy=np.swapaxes, method=True)
def swapaxes(a, axis1, axis2):
    """Interchange two axes (as `np.swapaxes`).

    Examples
    --------
    >>> tt.swapaxes(tt.zeros((2, 3)), 0, 1).shape
    (3, 2)
    """
    axes = list(range(np.ndim(a.data if isinstance(a, Tensor) else a)))
    for axis in (axis1, axis2):
        if not -len(axes) <= axis < len(axes):
            raise np.exceptions.AxisError(axis, len(axes))
    axes[axis1], axes[axis2] = axes[axis2], axes[axis1]
    return transpose(a, axes)


@public(numpy=np.broadcast_to)
def broadcast_to(array, shape):
    """`array` broadcast to `shape` (as `np.broadcast_to`); the gradient is summed back.

    Examples
    --------
    >>> tt.broadcast_to(tt.tensor([1.0, 2.0]), (2, 2))
    tensor([[1., 2.],
            [1., 2.]])
    """
    return _broadcast_to(array, shape=tuple(shape))


def _cast_values(x, dtype):
    return x.astype(dtype)


@public(method=True)
def astype(x, dtype):
    """x in `dtype`: recorded for a floating or complex dtype; an integer or boolean cast carries no
    gradient (as PyTorch's x.long()), so it is computed on the values (tt.compile recomputes it).

    Examples
    --------
    >>> tt.astype(tt.tensor([1.0, 2.0]), np.float32)
    tensor([1., 2.], dtype=float32)
    """
    dtype = numpy_dtype(dtype)
    if isinstance(x, Tensor) and dtype.kind not in "fc":
        return on_values(_cast_values, (x,), {"dtype": dtype}, Tensor(x.data.astype(dtype)), "astype")
    return _astype(x, dtype=dtype)


@public(numpy=np.concatenate)
def concatenate(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    """Join a sequence of Tensors or arrays along an existing axis (as `np.concatenate`).

    Examples
    --------
    >>> a = tt.tensor([[1.0, 2.0]], requires_grad=True)
    >>> tt.concatenate([a, tt.zeros(1, 2)], axis=0).shape
    (2, 2)
    """
    tensors = _joined(arrays, "concatenate", out, dtype, casting)
    if axis is None:   # as NumPy: every input flattened first
        tensors, axis = [reshape(t, -1) for t in tensors], 0
    return _concatenate(*tensors, axis=axis)


@public(numpy=np.stack)
def stack(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    """Join Tensors or arrays along a new axis (as `np.stack`).

    Examples
    --------
    >>> tt.stack([tt.ones(2), tt.zeros(2)]).shape
    (2, 2)
    """
    return _stack(*_joined(arrays, "stack", out, dtype, casting), axis=axis)


@public
def linear(x, W, b=None):
    """x @ W + b (W of shape (in, out), as the lecture's dot(x, W)); one entry on the tape.

    Examples
    --------
    >>> W = tt.tensor(np.eye(2), requires_grad=True)
    >>> tt.linear(tt.tensor([[1.0, 2.0]]), W, tt.tensor([0.5, 0.5]))
    tensor([[1.5, 2.5]], requires_grad=True)
    """
    return matmul(x, W) if b is None else _linear(x, W, b)


# The lecture's spelling (its crossEntropy is in softmax_xent.py).
frobeniusNorm = publish(frobenius_norm, "frobeniusNorm")


# ----- setitem: `t[index] = v` while recording (issue 10; Tensor.__setitem__ uses it) -----------
def _setitem_forward(x, v, index, repeats=False):
    """A copy of `x` with `v` written at `index` (the previous value stays on the tape).
    `repeats`: an index may repeat a position, as NumPy's own write (tt.compile's record of a
    write nothing differentiates)."""
    if not repeats and not _is_basic(index):
        hits = backend.namespace(x).zeros(np.shape(x), dtype=np.intp)
        backend.add_at(hits, index, 1)
        if hits.size and int(hits.max()) > 1:     # (CuPy's max has no initial=)
            raise IndexError("t[index] = v with an index that repeats a position is ambiguous "
                             "(NumPy keeps one of the writes); use distinct positions")
    out = backend.copy(x)
    out[index] = v
    return out


setitem = defprim(_setitem_forward, "setitem",
                  vjp=[lambda g, ans, x, v, index, **_: setitem(g, 0.0, index=index),   # overwritten
                       lambda g, ans, x, v, index, **_: g[index]],   # the engine sums out broadcasting
                  jvp=[lambda t, ans, x, v, index, **_: setitem(t, 0.0, index=index),
                       lambda t, ans, x, v, index, **_: setitem(np.zeros_like(ans), t, index=index)])
# ----- end of setitem ------------------------------------------------------------------------------
