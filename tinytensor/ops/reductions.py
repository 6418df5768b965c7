"""Reductions and scans beyond sum/mean/max: NumPy's names, `axis` (an int, a tuple, negative,
None) and `keepdims`.

    min            the minimum; ties share the gradient evenly (as max)
    prod           its gradient is the product of the others, exact with zeros in the input
    var, std       ddof as NumPy (0 by default); std's gradient at zero spread is 0
    cumsum         linear: its VJP is the reversed cumulative sum
    diff           composed from slices (both modes for free)
    argmax, argmin indices, no gradient (plain arrays, as NumPy)
"""

import builtins
import math

import numpy as np

from .. import backend
from ..tensor import Tensor, _value
from .core import minimum
from .table import (
    METHODS,
    _array,
    _in_dtype,
    _initial,
    _initial_only,
    _keepdims,
    _max_share,
    _reduced_axes,
    deflinear,
    defprim,
    on_values,
    public,
)

# ----- min: max's rules, with the weights where the minimum is ----------------------------------
_min = defprim(np.min, "min", nargs=1,
               vjp=[lambda g, ans, x, axis, keepdims:
                    _max_share(_keepdims(g, x.shape, axis, keepdims), ans, x, axis, keepdims)],
               jvp=[lambda t, ans, x, axis, keepdims:
                    np.sum(_max_share(t, ans, x, axis, keepdims), axis=axis, keepdims=keepdims)])


def _cast(x, dtype):
    return x if dtype is None else (x.astype(dtype) if isinstance(x, Tensor) else backend.asarray(x, dtype))


def _no_out(name, out):
    if out is not None:
        raise TypeError(f"{name}: out= is not supported on Tensors; use the returned value")


@public(numpy=(np.min, np.amin), method=True)
def min(a, axis=None, out=None, keepdims=False, initial=None):
    """The minimum along `axis`; ties share the gradient evenly. `initial` joins the comparison.

    Examples
    --------
    >>> tt.min(tt.tensor([[1.0, 5.0], [3.0, 2.0]]), axis=1)
    tensor([1., 2.])
    """
    _no_out("min", out)
    if initial is not None and np.size(a.data if isinstance(a, Tensor) else a) == 0:   # NumPy's: initial
        return _initial_only(np.min, a, axis, keepdims, initial)
    result = _min(a, axis=axis, keepdims=keepdims)
    return result if initial is None else minimum(_initial(initial, result), result)


# ----- prod ---------------------------------------------------------------------------------------
def _to_last(x, axes):
    """x with `axes` moved to the end and merged into one axis of length K: (rest..., K), and
    what `_from_last` needs to undo it. Works on arrays and Tensors alike."""
    rest = [i for i in range(np.ndim(x)) if i not in axes]
    perm = rest + list(axes)
    moved = np.transpose(x, perm)
    shape = moved.shape
    return moved.reshape(shape[:len(rest)] + (math.prod(shape[len(rest):]),)), shape, perm


def _from_last(y, shape, perm):
    return np.transpose(y.reshape(shape), [perm.index(i) for i in range(len(perm))])   # ints, no array


def _others_last(x):
    """Along the last axis, the product of all entries but each one: exclusive products from
    the left times exclusive products from the right. No division, so exact with zeros."""
    if x.shape[-1] == 0:
        return x.copy()
    ones = backend.namespace(x).ones(x.shape[:-1] + (1,), x.dtype)
    left = np.cumprod(np.concatenate([ones, x[..., :-1]], axis=-1), axis=-1)
    right = np.cumprod(np.concatenate([ones, x[..., :0:-1]], axis=-1), axis=-1)[..., ::-1]
    return left * right


def _prod_others_forward(x, axis):
    x = backend.asarray(x)
    flat, shape, perm = _to_last(x, _reduced_axes(x.ndim, axis))
    return _from_last(_others_last(flat), shape, perm)


def _prod_others_rule(g, ans, x, axis):
    """Its Jacobian (prod's Hessian) is symmetric: entry (i, k) is the product of all entries but
    i and k (0 on the diagonal), so one formula serves as VJP and as JVP."""
    if not np.any(x == 0):
        q = g / x               # sum over i != k of g_i * prod / (x_i x_k) = others_k * (S - q_k)
        return ans * (np.sum(q, axis=axis, keepdims=True) - q)
    # With zeros: row k of `pairs` is the products of the others of x with x_k set to 1
    # (K x K per slice, only in second order at inputs with zeros).
    axes = _reduced_axes(np.ndim(x), axis)
    flat, shape, perm = _to_last(x, axes)
    eye = backend.namespace(x).eye(flat.shape[-1], dtype=bool)
    pairs = _prod_others(np.where(eye, 1, flat[..., None, :]), axis=-1)
    out = np.sum(np.where(eye, 0, _to_last(g, axes)[0][..., None, :] * pairs), axis=-1)
    return _from_last(out, shape, perm)


# The product of all entries but each one along `axis` (same shape as x): prod's gradient.
_prod_others = defprim(_prod_others_forward, "prod_others", nargs=1,
                       vjp=[_prod_others_rule], jvp=[_prod_others_rule])
_prod = defprim(np.prod, "prod", nargs=1,
                vjp=[lambda g, ans, x, axis, keepdims:
                     _keepdims(g, x.shape, axis, keepdims) * _prod_others(x, axis=axis)],
                jvp=[lambda t, ans, x, axis, keepdims:
                     np.sum(t * _prod_others(x, axis=axis), axis=axis, keepdims=keepdims)])


@public(numpy=np.prod, method=True)
def prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None):
    """The product along `axis`; its gradient is the product of the other entries (no division:
    exact when entries are zero). `initial` multiplies the product, as NumPy's.

    Examples
    --------
    >>> x = tt.tensor([2.0, 0.0, 3.0], requires_grad=True)
    >>> tt.prod(x).backward()
    >>> x.grad   # exact with a zero in x
    array([0., 6., 0.])
    """
    _no_out("prod", out)
    result = _in_dtype(_prod(_cast(a, dtype), axis=axis, keepdims=keepdims), dtype)
    return result if initial is None else result * initial


# ----- var, std -------------------------------------------------------------------------------
def _scale(x, ans, ddof):
    """1 / (N - ddof), N the number of entries reduced into each output (nan when N <= ddof,
    where NumPy's value is not finite either). A Python float: float32 stays float32."""
    dof = np.size(x) // builtins.max(np.size(ans), 1) - ddof
    return 1.0 / dof if dof > 0 else math.nan


def _shifted(x, axis):
    """x minus its first entry along the reduced axes: the spread is unchanged, and entries that
    are all equal become exact zeros (x - mean(x) does not: the mean of [a, a, a] may not round
    back to a, and np.std gives 4e-16 instead of 0)."""
    if not np.size(x):
        return x
    reduced = _reduced_axes(np.ndim(x), axis)
    return x - x[tuple(slice(0, 1) if i in reduced else slice(None) for i in range(np.ndim(x)))]


def _centred(x, axis):
    x = _shifted(x, axis)
    return x - np.mean(x, axis=axis, keepdims=True)


def _var_forward(x, axis, ddof, keepdims):
    return np.var(_shifted(_array(x), axis), axis=axis, ddof=ddof, keepdims=keepdims)


def _std_forward(x, axis, ddof, keepdims):
    return np.std(_shifted(_array(x), axis), axis=axis, ddof=ddof, keepdims=keepdims)


_var = defprim(_var_forward, "var",
               nargs=1,
               vjp=[lambda g, ans, x, axis, ddof, keepdims:
                    _keepdims(g, x.shape, axis, keepdims) * (2 * _scale(x, ans, ddof)) * _centred(x, axis)],
               jvp=[lambda t, ans, x, axis, ddof, keepdims:
                    np.sum(t * _centred(x, axis), axis=axis, keepdims=keepdims) * (2 * _scale(x, ans, ddof))])


def _nonzero(s):
    return s + (s == 0)   # zero spread: gradient 0 (as PyTorch's std), not 0/0


# d std = d var / (2 std): the rules divide by the output, taken as 1 where it is 0.
_std = defprim(_std_forward, "std",
               nargs=1,
               vjp=[lambda g, ans, x, axis, ddof, keepdims:
                    _keepdims(g / _nonzero(ans), x.shape, axis, keepdims) * _scale(x, ans, ddof)
                    * _centred(x, axis)],
               jvp=[lambda t, ans, x, axis, ddof, keepdims:
                    np.sum(t * _centred(x, axis), axis=axis, keepdims=keepdims) * _scale(x, ans, ddof)
                    / _nonzero(ans)])


def _ddof(ddof, correction):
    if correction is None:
        return ddof
    if ddof != 0:
        raise ValueError("give ddof or correction, not both")
    return correction


@public(numpy=np.var, method=True)
def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, correction=None):
    """The variance along `axis`, sum((x - mean)^2) / (N - ddof), as np.var (ddof=0 by default,
    where PyTorch's default is 1; `correction=` is the same as ddof).

    Examples
    --------
    >>> tt.var(tt.tensor([1.0, 3.0]))
    tensor(1.)
    >>> tt.var(tt.tensor([1.0, 3.0]), ddof=1)
    tensor(2.)
    """
    _no_out("var", out)
    return _var(_cast(a, dtype), axis=axis, ddof=_ddof(ddof, correction), keepdims=keepdims)


@public(numpy=np.std, method=True)
def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, correction=None):
    """The standard deviation, sqrt(var), as np.std (ddof=0 by default). Where the spread is
    zero (all entries equal) its gradient is 0, as PyTorch's, not the NaN of sqrt'(0).

    Examples
    --------
    >>> tt.std(tt.tensor([1.0, 3.0]))
    tensor(1.)
    >>> bool(tt.std(tt.tensor([1.0, 3.0]), ddof=1).item() == np.sqrt(2))
    True
    """
    _no_out("std", out)
    return _std(_cast(a, dtype), axis=axis, ddof=_ddof(ddof, correction), keepdims=keepdims)


# ----- cumsum, diff ---------------------------------------------------------------------------
def _reverse_cumsum(g, axis):
    """Along `axis`, the sum of g from each position to the end."""
    flip = (slice(None),) * (axis % np.ndim(g)) + (slice(None, None, -1),)
    return _cumsum(g[flip], axis=axis)[flip]


def _cumsum_vjp(g, ans, x, axis):
    if axis is None:                       # cumsum flattened x (C order)
        return _reverse_cumsum(g, 0).reshape(np.shape(x))
    return _reverse_cumsum(g, axis)


_cumsum = deflinear(lambda x, axis: np.cumsum(x, axis=axis), "cumsum", _cumsum_vjp)


@public(numpy=np.cumsum, method=True)
def cumsum(a, axis=None, dtype=None, out=None):
    """The cumulative sum along `axis`; axis=None works on the flattened x, as NumPy.

    Examples
    --------
    >>> x = tt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    >>> tt.cumsum(x)
    tensor([1., 3., 6.], requires_grad=True)
    >>> tt.cumsum(x).sum().backward()
    >>> x.grad
    array([3., 2., 1.])
    """
    _no_out("cumsum", out)
    return _in_dtype(_cumsum(_cast(a, dtype), axis=axis), dtype)


def _with_ends(x, axis, prepend, append):
    """np.diff's prepend/append: a number is repeated across the other axes (a Python number
    takes x's dtype, so float32 stays float32)."""
    parts = []
    for value in (prepend, x, append):
        if value is None:
            continue
        if value is not x and np.ndim(value) == 0:
            shape = list(np.shape(x))
            shape[axis] = 1
            if isinstance(value, (int, float)):
                value = backend.asarray(value, np.result_type(x.dtype, value), like=x)
            value = np.broadcast_to(value, shape)
        parts.append(value)
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=axis)


@public(numpy=np.diff, method=True)
def diff(a, n=1, axis=-1, prepend=None, append=None):
    """The n-th difference along `axis` (a[1:] - a[:-1], n times), as np.diff.

    Examples
    --------
    >>> tt.diff(tt.tensor([1.0, 4.0, 9.0]))
    tensor([3., 5.])
    """
    x = a if isinstance(a, Tensor) else backend.asarray(a)
    if x.ndim == 0:
        raise ValueError("diff: the input must be at least one-dimensional")
    if n < 0:
        raise ValueError(f"diff: the order n must be non-negative, got {n}")
    if not -x.ndim <= axis < x.ndim:
        raise np.exceptions.AxisError(axis, x.ndim)
    axis %= x.ndim
    x = _with_ends(x, axis, prepend, append)
    lead = (slice(None),) * axis
    for _ in range(n):
        x = x[lead + (slice(1, None),)] - x[lead + (slice(None, -1),)]
    return x


# ----- argmax, argmin: indices, no gradient ----------------------------------------------------
@public(method=True)
def argmax(a, axis=None, out=None, keepdims=False):
    """The index of the maximum (along `axis`), as np.argmax: a plain integer array.

    Examples
    --------
    >>> tt.argmax(tt.tensor([[1.0, 3.0], [4.0, 2.0]]), axis=1)
    array([1, 0])
    """
    _no_out("argmax", out)
    return on_values(np.argmax, (a,), dict(axis=axis, keepdims=keepdims),
                     np.argmax(_value(a), axis=axis, keepdims=keepdims))


@public(method=True)
def argmin(a, axis=None, out=None, keepdims=False):
    """The index of the minimum (along `axis`), as np.argmin: a plain integer array.

    Examples
    --------
    >>> tt.argmin(tt.tensor([[1.0, 3.0], [4.0, 2.0]]), axis=1)
    array([0, 1])
    """
    _no_out("argmin", out)
    return on_values(np.argmin, (a,), dict(axis=axis, keepdims=keepdims),
                     np.argmin(_value(a), axis=axis, keepdims=keepdims))


# ----- sizes and values as Python objects (PyTorch's spellings) -----------------------------------
@public(method=True)
def numel(x):
    """The number of entries (PyTorch's numel; NumPy's size).

    Examples
    --------
    >>> tt.numel(tt.zeros((2, 3)))
    6
    """
    return int(np.size(_value(x)))


def _tolist(self):
    """The values as nested Python lists (numbers for a 0-d Tensor), as ndarray.tolist."""
    return self.data.tolist()


Tensor.tolist = METHODS["tolist"] = _tolist   # a method only: tt.tolist would read oddly
