"""NumPy's scientific functions on Tensors, differentiable (issue 24): `np.sort(t)`, `np.median`,
`np.quantile`, `np.interp`, ... record, as JAX differentiates them.

Most are composed from recorded operations, so both modes come for free:

    sort                 the values at their argsort indices (take_along_axis): the gradient
                         goes back to where each order statistic came from
    quantile, percentile, median
                         order statistics (sort) mixed with constant weights (NumPy's methods
                         linear, lower, higher, midpoint, nearest); q is a constant
    interp               differentiable in x and in fp (xp is a constant, as the grid)
    append, polyval, trapezoid, heaviside (zero gradient in x1, as JAX; x2 where x1 == 0)
    gradient             linear in f: NumPy's own stencil, applied as a matrix along each axis
    convolve, correlate  tt.scipy.signal's two convolution primitives (both operands)

and one primitive, cumprod, whose gradient is exact with zeros in the input.
"""

import numpy as np
import scipy.signal

from .ops import concatenate
from .ops import shape as ops_shape
from .ops.elementwise import isnan, where
from .ops.reductions import cumsum
from .ops.table import _in_dtype, _reduced_axes, defprim, nondifferentiable, on_values, public
from .state import constant_read
from .tensor import Tensor


def _value(x):
    """x's values for a shape, a dtype or a check; an array stays itself (tt.compile's traced
    arrays keep what is computed from them recorded: a check on them is a guard)."""
    if isinstance(x, Tensor):
        return x.data
    return x if isinstance(x, np.ndarray) else np.asarray(x)


def _arg(x):
    """A Tensor as it is; numbers and lists as float arrays."""
    if isinstance(x, Tensor):
        return x
    if not isinstance(x, np.ndarray):      # (an array stays itself: a traced one, tt.compile's,
        x = np.asarray(x)                  # keeps its NumPy operations recorded)
    return x if x.dtype.kind == "f" else x.astype(np.float64)


def _no(name, what, value, default=None):
    if value is not default:
        raise TypeError(f"{name}: {what} is not supported on Tensors; use the returned value"
                        if what == "out=" else f"{name}: {what} is not supported on Tensors")


def _constant(name, what, value):
    if isinstance(value, Tensor):
        if value.requires_grad:
            raise TypeError(f"np.{name}: not differentiable in {what}; pass {what}.detach()")
        return constant_read(value, f"{name}'s {what}")
    return value if isinstance(value, np.ndarray) else np.asarray(value)   # (a traced one stays one)


nondifferentiable(np.searchsorted)   # indices: computed on the values, as np.argsort


# ----- order statistics ------------------------------------------------------------------------------
@public(numpy=np.sort)
def sort(a, axis=-1, kind=None, order=None, *, stable=None):
    """np.sort: the sorted values, recorded as a gather at the argsort indices.

    Examples
    --------
    >>> tt.sort(tt.tensor([3.0, 1.0, 2.0]))
    tensor([1., 2., 3.])
    """
    _no("sort", "order=", order)
    if axis is None:
        a, axis = ops_shape.ravel(a), -1
    # on the Tensor (not its values): tt.compile then recomputes the order on every call
    index = np.argsort(a, axis=axis, kind="stable")
    return ops_shape.take_along_axis(a, index, axis=axis)


_QUANTILE_METHODS = ("linear", "lower", "higher", "midpoint", "nearest")


@public(numpy=np.quantile)
def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *,
             weights=None, interpolation=None):
    """np.quantile with the methods linear (default), lower, higher, midpoint and nearest:
    the order statistics mixed with constant weights, so the gradient flows to the one or two
    elements each quantile falls between. q is a constant.

    Examples
    --------
    >>> tt.quantile(tt.tensor([1.0, 2.0, 3.0, 4.0]), 0.5)
    tensor(2.5)
    """
    _no("quantile", "out=", out)
    _no("quantile", "weights=", weights)
    method = interpolation or method
    if method not in _QUANTILE_METHODS:
        raise ValueError(f"quantile: method must be one of {_QUANTILE_METHODS} on Tensors, got {method!r}")
    q = _constant("quantile", "q", q).astype(np.float64)
    if np.any((q < 0) | (q > 1)):
        raise ValueError("quantile: q must lie in [0, 1]")
    shape = np.shape(a)         # (a Tensor, an array or a vmapped example: its shape)
    axes = _reduced_axes(len(shape), axis) if shape else ()
    rest = [i for i in range(len(shape)) if i not in axes]
    moved = np.transpose(a, rest + list(axes)) if shape else np.reshape(a, (1,))
    flat = np.reshape(moved, tuple(shape[i] for i in rest) + (-1,))
    n = np.shape(flat)[-1]
    if n == 0:
        raise ValueError("quantile: the reduced axes hold no elements")
    ordered = sort(flat, axis=-1)
    position = q * (n - 1)
    lo = np.floor(position).astype(np.intp)
    hi = np.minimum(lo + 1, n - 1)
    weight = position - lo
    if method == "lower":
        weight = np.zeros_like(weight)
    elif method == "higher":
        lo, weight = np.ceil(position).astype(np.intp), np.zeros_like(weight)
    elif method == "midpoint":
        weight = np.where(weight > 0, 0.5, 0.0)
    elif method == "nearest":    # NumPy's: the nearer neighbour, halves to the even index
        lo, weight = np.where(np.around(position) == lo, lo, hi), np.zeros_like(weight)
    dtype = flat.dtype if hasattr(flat, "dtype") else _value(flat).dtype
    low = ordered[..., lo]
    result = low if not weight.any() else low + (ordered[..., hi] - low) * weight.astype(dtype)
    # NumPy's: a slice holding a NaN has NaN quantiles (sort puts it last). Through isnan and where,
    # with no Python branch: tt.compile recomputes the mask, tt.vmap batches it
    missing = isnan(flat).any(axis=-1)
    expand = tuple(np.shape(missing)) + (1,) * q.ndim
    result = where(np.reshape(missing, expand), np.reshape(ordered[..., -1], expand), result)
    k = len(rest)                 # result: rest + q.shape; NumPy's: q.shape + rest
    result = np.transpose(result, list(range(k, k + q.ndim)) + list(range(k))) if q.ndim and k else result
    if keepdims:
        kept = tuple(1 if i in axes else m for i, m in enumerate(shape))
        result = np.reshape(result, q.shape + kept)
    return result


@public(numpy=np.percentile)
def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *,
               weights=None, interpolation=None):
    """np.percentile: quantile(a, q / 100).

    Examples
    --------
    >>> tt.percentile(tt.tensor([1.0, 2.0, 3.0, 4.0]), 50)
    tensor(2.5)
    """
    return quantile(a, _constant("percentile", "q", q) / 100.0, axis, out, overwrite_input, method,
                    keepdims, weights=weights, interpolation=interpolation)


@public(numpy=np.median)
def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """np.median: the mean of the middle order statistics (quantile 0.5, linear).

    Examples
    --------
    >>> tt.median(tt.tensor([3.0, 1.0, 2.0]))
    tensor(2.)
    """
    return quantile(a, 0.5, axis, out, keepdims=keepdims)


# ----- cumprod: the one primitive ---------------------------------------------------------------------------
def _cumprod_jacobian_parts(x, ans):
    """For x (..., n) along its last axis: L[..., i] = prod_{j<i} x_j and the (..., n, n) matrix
    R[..., i, k] = prod_{i<j<=k} x_j for k >= i, else 0: dy_k/dx_i = L_i R_ik. Exact with zeros."""
    n = np.shape(x)[-1]
    later = np.arange(n)[None, :] > np.arange(n)[:, None]            # j > i
    factors = where(later, np.expand_dims(x, -2), 1.0)                  # (..., i, j)
    R = where(~later & (np.arange(n)[None, :] != np.arange(n)[:, None]), 0.0, _cumprod(factors, axis=-1))
    ones = np.ones(np.shape(x)[:-1] + (1,), dtype=_value(x).dtype)
    L = np.concatenate([ones, ans[..., :-1]], axis=-1)
    return L, R


def _last(x, axis):
    return np.moveaxis(x, axis, -1)


def _back(x, axis):
    return np.moveaxis(x, -1, axis)


def _no_zero(x):
    """Whether x has no zero: which of the rules' forms applies. On a Tensor (a rule applied at
    a higher order) through on_values, so that under tt.compile it is a guard, not a choice
    frozen at the recorded call."""
    value = _value(x)
    free = not np.any(value == 0)
    if isinstance(x, Tensor):
        free = bool(on_values(_all_nonzero, (x,), {}, np.asarray(free), "cumprod_zero_check"))
    return free


def _all_nonzero(x):
    return np.asarray(not np.any(_value(x) == 0))


def _cumprod_vjp(g, ans, x, axis):
    if _no_zero(x):                    # the common case: O(n), dy_k/dx_i = y_k / x_i
        return np.flip(cumsum(np.flip(g * ans, axis), axis), axis) / x
    L, R = _cumprod_jacobian_parts(_last(x, axis), _last(ans, axis))
    return _back(L * np.sum(R * np.expand_dims(_last(g, axis), -2), axis=-1), axis)


def _cumprod_jvp(t, ans, x, axis):
    if _no_zero(x):
        return ans * cumsum(t / x, axis)
    L, R = _cumprod_jacobian_parts(_last(x, axis), _last(ans, axis))
    return _back(np.sum(np.expand_dims(_last(t, axis) * L, -1) * R, axis=-2), axis)


_cumprod = defprim(lambda x, axis: np.cumprod(x, axis=axis), "cumprod", nargs=1,
                   vjp=[_cumprod_vjp], jvp=[_cumprod_jvp])


@public(numpy=np.cumprod, method=True)
def cumprod(a, axis=None, dtype=None, out=None):
    """np.cumprod; its gradient is exact with zeros in the input.

    Examples
    --------
    >>> tt.cumprod(tt.tensor([1.0, 2.0, 3.0]))
    tensor([1., 2., 6.])
    """
    _no("cumprod", "out=", out)
    if dtype is not None:               # NumPy's dtype=: cast first, the products in that dtype
        a = a.astype(dtype) if isinstance(a, Tensor) else np.asarray(a, dtype=dtype)
    if axis is None:
        a, axis = ops_shape.ravel(a), 0
    return _in_dtype(_cumprod(a, axis=axis), dtype)


# ----- interpolation, polynomials, integration, differences -------------------------------------------
@public(numpy=np.interp)
def interp(x, xp, fp, left=None, right=None, period=None):
    """np.interp: piecewise-linear interpolation, differentiable in x and fp (and left/right);
    xp (increasing) is a constant grid.

    Written as sum_j hat_j(x) fp[j], the hats min(rising, falling) clipped to [0, 1]: recorded
    operations only (no index computed from x's values), so tt.compile replays it on new x.
    Memory x.size * len(xp): meant for grids of up to a few thousand knots.

    Examples
    --------
    >>> tt.interp(1.5, [1.0, 2.0], tt.tensor([10.0, 20.0]))
    tensor(15.)
    """
    _no("interp", "period=", period)
    grid = _constant("interp", "xp", xp).astype(np.float64)
    x, fp = _arg(x), _arg(fp)
    if grid.ndim != 1 or np.shape(_value(fp)) != grid.shape or not grid.size:
        raise ValueError(f"interp: xp and fp must be 1-D of the same length, got {grid.shape} and "
                         f"{np.shape(_value(fp))}")
    dtype = _value(x).dtype
    if grid.size == 1:
        inside = fp[0] + 0.0 * x
    else:
        gaps = np.diff(grid)
        first, last = np.arange(grid.size) == 0, np.arange(grid.size) == grid.size - 1
        rising = np.concatenate([[0.0], 1 / gaps]).astype(dtype)     # hat j rises from knot j-1
        falling = np.concatenate([1 / gaps, [0.0]]).astype(dtype)    # and falls to knot j+1
        start = np.concatenate([[0.0], grid[:-1]]).astype(dtype)
        stop = np.concatenate([grid[1:], [0.0]]).astype(dtype)
        column = np.expand_dims(x, -1)
        up = where(first, 1.0, (column - start) * rising)       # the first hat has no rising side,
        down = where(last, 1.0, (stop - column) * falling)      # the last no falling side
        hats = np.clip(np.minimum(up, down), 0.0, 1.0)
        inside = np.sum(hats * fp, axis=-1)
    below = fp[0] if left is None else left
    above = fp[-1] if right is None else right
    return where(x < grid[0], below, where(x > grid[-1], above, inside))


@public(numpy=np.append)
def append(arr, values, axis=None):
    """np.append: a concatenation (flattened first when axis is None).

    Examples
    --------
    >>> tt.append(tt.tensor([1.0, 2.0]), [3.0])
    tensor([1., 2., 3.])
    """
    if axis is None:
        return concatenate([ops_shape.ravel(_arg(arr)), ops_shape.ravel(_arg(values))])
    return concatenate([arr, values], axis=axis)


@public(numpy=np.polyval)
def polyval(p, x):
    """np.polyval: p[0] x^(n-1) + ... + p[-1] by Horner's rule, differentiable in p and x.

    Examples
    --------
    >>> tt.polyval(tt.tensor([1.0, 0.0, -1.0]), 3.0)   # x**2 - 1 at 3
    tensor(8.)
    """
    p, x = _arg(p), _arg(x)
    y = 0.0 * x
    for i in range(np.shape(_value(p))[0]):
        y = y * x + p[i]
    return y


@public(numpy=np.trapezoid)
def trapezoid(y, x=None, dx=1.0, axis=-1):
    """np.trapezoid: the trapezoidal rule along axis, differentiable in y and x (and dx).

    Examples
    --------
    >>> tt.trapezoid(tt.tensor([1.0, 2.0, 3.0]))
    tensor(4.)
    """
    y = _last(_arg(y), axis)
    mean = (y[..., 1:] + y[..., :-1]) * 0.5
    if x is None:
        return np.sum(mean, axis=-1) * dx
    x = _arg(x)
    x = x if np.ndim(_value(x)) == 1 else _last(x, axis)
    return np.sum(mean * (x[..., 1:] - x[..., :-1]), axis=-1)


def _stencil(n, spacing, edge_order, dtype):
    """NumPy's np.gradient along one axis of length n, as an (n, n) matrix D: D @ f."""
    return np.gradient(np.eye(n), *spacing, axis=0, edge_order=edge_order).astype(dtype)


@public(numpy=np.gradient)
def gradient(f, *varargs, axis=None, edge_order=1):
    """np.gradient: central differences inside, one-sided at the edges; spacings (scalars or
    coordinate arrays, constants) as NumPy's. Linear in f: NumPy's own stencil, as a matrix
    (n x n per axis: meant for the grids of a simulation, not for millions of points).

    Examples
    --------
    >>> tt.gradient(tt.tensor([1.0, 4.0, 9.0]))
    tensor([3., 4., 5.])
    """
    f = _arg(f)
    shape = np.shape(_value(f))
    axes = _reduced_axes(len(shape), axis)
    if len(varargs) == 0:
        spacings = [()] * len(axes)
    elif len(varargs) == 1:
        spacings = [(_constant("gradient", "the spacing", varargs[0]),)] * len(axes)
    elif len(varargs) == len(axes):
        spacings = [(_constant("gradient", "the spacing", v),) for v in varargs]
    else:
        raise TypeError(f"gradient: give no spacing, one, or one per axis ({len(axes)}), got {len(varargs)}")
    dtype = _value(f).dtype if _value(f).dtype.kind == "f" else np.float64
    results = []
    for ax, spacing in zip(axes, spacings):
        D = _stencil(shape[ax], spacing, edge_order, dtype)
        results.append(np.moveaxis(np.tensordot(D, f, axes=([1], [ax])), 0, ax))
    return results[0] if len(results) == 1 else tuple(results)


@public(numpy=np.heaviside)
def heaviside(x1, x2):
    """np.heaviside: 0 below 0, 1 above, x2 at 0. Zero gradient in x1 (as JAX); x2's where x1 == 0.

    Examples
    --------
    >>> tt.heaviside(tt.tensor([-1.0, 0.0, 2.0]), 0.5)
    tensor([0. , 0.5, 1. ])
    """
    x1 = _arg(x1)
    return where(x1 < 0, 0.0, where(x1 > 0, 1.0, x2 + 0.0 * x1))


# ----- convolution: two bilinear primitives, each the other's transpose (tt.scipy.signal's too) -----------
def _flip(x):
    return np.flip(x)              # every axis; a Tensor hands it back to tt.flip (recorded)


def _shape(x):
    return np.shape(x.data if isinstance(x, Tensor) else x)


def _full_forward(a, b):
    return scipy.signal.convolve(a, b, mode="full")


def _valid_forward(x, k):
    return scipy.signal.convolve(x, k, mode="valid")


_convolve_full = defprim(_full_forward, "convolve_full",
                         vjp=[lambda g, ans, a, b: _convolve_valid(g, _flip(b)),
                              lambda g, ans, a, b: _convolve_valid(g, _flip(a))],
                         jvp=[lambda t, ans, a, b: _convolve_full(t, b),
                              lambda t, ans, a, b: _convolve_full(a, t)])
_convolve_valid = defprim(_valid_forward, "convolve_valid",
                          vjp=[lambda g, ans, x, k: _convolve_full(g, _flip(k)),
                               lambda g, ans, x, k: _convolve_valid(_flip(x), g)],
                          jvp=[lambda t, ans, x, k: _convolve_valid(t, k),
                               lambda t, ans, x, k: _convolve_valid(x, t)])


def _as_operand(x):
    if isinstance(x, Tensor):
        return x
    x = np.asanyarray(x)    # (a traced array stays one: tt.compile records what is computed from it)
    return x if x.dtype.kind == "f" else x.astype(np.float64)


def _centred(full, shape):
    """The slice of `full` of `shape` at its centre (SciPy's "same")."""
    start = [(n - m) // 2 for n, m in zip(_shape(full), shape)]
    return full[tuple(slice(s, s + m) for s, m in zip(start, shape))]


def nd_convolve(in1, in2, mode="full"):
    """The N-D convolution of in1 and in2 (same ndim; scipy.signal.convolve's modes), differentiable
    in both: tt.scipy.signal.convolve, and np.convolve's engine."""
    in1, in2 = _as_operand(in1), _as_operand(in2)
    s1, s2 = _shape(in1), _shape(in2)
    if len(s1) != len(s2) or not s1:
        raise ValueError(f"convolve: in1 and in2 must have the same number of dimensions (at least "
                         f"1), got shapes {s1} and {s2}")
    if mode == "full":
        return _convolve_full(in1, in2)
    if mode == "same":
        return _centred(_convolve_full(in1, in2), s1)
    if mode == "valid":
        if all(n >= m for n, m in zip(s1, s2)):
            return _convolve_valid(in1, in2)
        if all(m >= n for n, m in zip(s1, s2)):
            return _convolve_valid(in2, in1)      # convolution commutes
        raise ValueError(f"convolve: for mode='valid' one input must be at least as large as the "
                         f"other along every axis; got shapes {s1} and {s2}")
    raise ValueError(f"convolve: mode must be 'full', 'valid' or 'same', got {mode!r}")


@public(numpy=np.convolve)
def convolve(a, v, mode="full"):
    """np.convolve (1-D; modes full, same, valid), differentiable in both operands.

    Examples
    --------
    >>> tt.convolve(tt.tensor([1.0, 2.0]), tt.tensor([1.0, 1.0]))
    tensor([1., 3., 2.])
    """
    a, v = _as_operand(a), _as_operand(v)
    for name, x in (("a", a), ("v", v)):
        if np.ndim(_value(x)) != 1 or not np.size(_value(x)):
            raise ValueError(f"convolve: {name} must be 1-D and not empty, got shape {np.shape(_value(x))}")
    if mode == "same":
        longer = a if np.size(_value(a)) >= np.size(_value(v)) else v
        return _centred(nd_convolve(a, v, "full"), np.shape(_value(longer)))
    return nd_convolve(a, v, mode)


@public(numpy=np.correlate)
def correlate(a, v, mode="valid"):
    """np.correlate for real inputs: convolve(a, v reversed), both operands differentiable.

    Examples
    --------
    >>> tt.correlate(tt.tensor([1.0, 2.0, 3.0]), tt.tensor([0.0, 1.0]))
    tensor([2., 3.])
    """
    return convolve(a, np.flip(_as_operand(v)), mode)


# ----- statistics with NaN and weights (issue 30): composites --------------------------------------------
def _reduce_args(name, dtype, out):
    _no(name, "out=", out)
    _no(name, "dtype=", dtype)


def _present(a):
    """(a with NaN replaced by 0, the count of non-NaN values as a 0/1 float array)."""
    missing = isnan(a)            # through on_values: tt.compile recomputes it
    return where(missing, 0.0, a), (~missing).astype(_value(a).dtype)


@public(numpy=np.nansum)
def nansum(a, axis=None, dtype=None, out=None, keepdims=False):
    """np.nansum: NaN counted as zero (their gradient is 0).

    Examples
    --------
    >>> x = tt.tensor([1.0, np.nan, 3.0], requires_grad=True)
    >>> tt.nansum(x)
    tensor(4., requires_grad=True)
    >>> tt.nansum(x).backward()
    >>> x.grad
    array([1., 0., 1.])
    """
    _reduce_args("nansum", dtype, out)
    filled, _ = _present(_arg(a))
    return np.sum(filled, axis=axis, keepdims=keepdims)


@public(numpy=np.nanmean)
def nanmean(a, axis=None, dtype=None, out=None, keepdims=False):
    """np.nanmean: the mean of the non-NaN values (NaN, with NumPy's warning, for a slice of NaN only).

    Examples
    --------
    >>> x = tt.tensor([[1.0, np.nan], [3.0, 5.0]], requires_grad=True)
    >>> tt.nanmean(x, axis=1)
    tensor([1., 4.], requires_grad=True)
    >>> tt.nanmean(x, axis=1).sum().backward()
    >>> x.grad
    array([[1. , 0. ],
           [0.5, 0.5]])
    """
    _reduce_args("nanmean", dtype, out)
    filled, present = _present(_arg(a))
    count = np.sum(present, axis=axis, keepdims=keepdims)
    if np.any(count == 0):
        import warnings
        warnings.warn("Mean of empty slice", RuntimeWarning, stacklevel=2)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.sum(filled, axis=axis, keepdims=keepdims) / count


@public(numpy=np.nanvar)
def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    """np.nanvar: the variance of the non-NaN values, divided by (count - ddof).

    Examples
    --------
    >>> x = tt.tensor([1.0, np.nan, 3.0], requires_grad=True)
    >>> tt.nanvar(x), tt.nanvar(x, ddof=1)
    (tensor(1., requires_grad=True), tensor(2., requires_grad=True))
    >>> tt.nanvar(x).backward()
    >>> x.grad                     # 2 (x - mean) / count, 0 at the NaN
    array([-1.,  0.,  1.])
    """
    _reduce_args("nanvar", dtype, out)
    a = _arg(a)
    filled, present = _present(a)
    count = np.sum(present, axis=axis, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        centred = (filled - np.sum(filled, axis=axis, keepdims=True) / count) * present
        result = np.sum(centred * centred, axis=axis, keepdims=keepdims) / np.maximum(
            np.sum(present, axis=axis, keepdims=keepdims) - ddof, 0)
    return result


@public(numpy=np.nanstd)
def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    """np.nanstd: sqrt(nanvar).

    Examples
    --------
    >>> tt.nanstd(tt.tensor([1.0, np.nan, 3.0, 5.0]), ddof=1)
    tensor(2.)
    """
    return np.sqrt(nanvar(a, axis, dtype, out, ddof, keepdims))


@public(numpy=np.average)
def average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    """np.average: sum(a * w) / sum(w) along `axis`, differentiable in a and in the weights (1-D
    weights lie along `axis`, as NumPy's).

    Examples
    --------
    >>> a = tt.tensor([1.0, 2.0, 4.0])
    >>> w = tt.tensor([1.0, 1.0, 2.0], requires_grad=True)
    >>> tt.average(a, weights=w)
    tensor(2.75, requires_grad=True)
    >>> tt.average(a, weights=w).backward()
    >>> w.grad                     # (a - average) / sum(w)
    array([-0.4375, -0.1875,  0.3125])
    """
    a = _arg(a)
    if weights is None:
        result = np.mean(a, axis=axis, keepdims=keepdims)
        count = np.size(_value(a)) // max(np.size(_value(result)), 1)
        return (result, np.full(np.shape(_value(result)), float(count))) if returned else result
    w = _arg(weights)
    shape, w_shape = np.shape(_value(a)), np.shape(_value(w))
    if shape != w_shape:
        if axis is None:
            raise TypeError("average: axis must be specified when shapes of a and weights differ")
        if len(w_shape) != 1 or w_shape[0] != shape[axis]:
            raise ValueError(f"average: 1-D weights must have the length of a along axis {axis} "
                             f"({shape[axis]}), got shape {w_shape}")
        w = np.reshape(w, tuple(w_shape[0] if i == axis % len(shape) else 1 for i in range(len(shape))))
        w = np.broadcast_to(w, shape)
    total = np.sum(w, axis=axis, keepdims=keepdims)
    if np.any(_value(total) == 0.0):
        raise ZeroDivisionError("average: weights sum to zero, can't be normalized")
    result = np.sum(a * w, axis=axis, keepdims=keepdims) / total
    return (result, total) if returned else result


@public(numpy=np.cov)
def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *, dtype=None):
    """np.cov: the covariance of the variables (rows, or columns with rowvar=False), with NumPy's
    bias, ddof, fweights and aweights (the weights are constants); differentiable in m and y.

    Examples
    --------
    >>> x = tt.tensor([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]], requires_grad=True)   # 2 variables
    >>> tt.cov(x)
    tensor([[ 1., -1.],
            [-1.,  1.]], requires_grad=True)
    >>> tt.cov(x)[0, 0].backward()  # var(x0) = sum((x0 - mean)**2) / (n - 1)
    >>> x.grad
    array([[-1.,  0.,  1.],
           [ 0.,  0.,  0.]])
    """
    _no("cov", "dtype=", dtype)
    X = _arg(m)
    if np.ndim(_value(X)) > 2:
        raise ValueError("cov: m has more than 2 dimensions")
    X = np.reshape(X, (1, -1)) if np.ndim(_value(X)) < 2 else X
    if not rowvar and np.shape(_value(X))[0] != 1:
        X = np.transpose(X)
    if y is not None:
        Y = _arg(y)
        Y = np.reshape(Y, (1, -1)) if np.ndim(_value(Y)) < 2 else Y
        if not rowvar and np.shape(_value(Y))[0] != 1:
            Y = np.transpose(Y)
        X = concatenate([X, Y], axis=0)
    if ddof is None:
        ddof = 0 if bias else 1
    n = np.shape(_value(X))[1]
    w = None
    if fweights is not None:
        w = _constant("cov", "fweights", fweights).astype(np.float64)
    if aweights is not None:
        a_w = _constant("cov", "aweights", aweights).astype(np.float64)
        w = a_w if w is None else w * a_w
    if w is None:
        mean = np.mean(X, axis=1, keepdims=True)
        fact = n - ddof
    else:
        w_sum = w.sum()
        mean = np.sum(X * w, axis=1, keepdims=True) / w_sum
        if ddof == 0:
            fact = w_sum
        elif aweights is None:
            fact = w_sum - ddof
        else:
            fact = w_sum - ddof * np.sum(w * a_w) / w_sum
    centred = X - mean
    weighted = centred if w is None else centred * w
    c = np.matmul(centred, np.transpose(weighted)) / max(fact, 0)
    return np.squeeze(c)
