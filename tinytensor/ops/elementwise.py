"""Elementwise operations beyond the lecture's: NumPy's names and semantics (broadcasting, dtypes).

Each row is a primitive from the op table's shorthands (table.py): `elementwise(fun, name, deriv)`
for a unary op from its local derivative deriv(ans, x), `defprim` for the rest. Derivatives are
written with NumPy functions that a Tensor hands back to the table, so they differentiate again.
Constants are Python floats: a float32 input stays float32 (NumPy scalars would promote it).

No gradient: `sign floor ceil round` give a Tensor that does not require grad (as PyTorch users
expect); comparisons give plain boolean arrays, as the operators `<`, `==` do.
"""

import builtins
import math

import numpy as np
import scipy.special

from .. import backend
from ..tensor import Tensor
from .table import (
    _expit,
    _select,
    complex_rules,
    defprim,
    elementwise,
    nondifferentiable,
    on_values,
    public,
    publish,
)

LN2 = math.log(2.0)
LN10 = math.log(10.0)
SQRT2 = math.sqrt(2.0)
TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
ONE_OVER_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


# ----- exponentials and logarithms ----------------------------------------------------------------
log1p = elementwise(np.log1p, "log1p", lambda ans, x: 1 / (1 + x), numpy=np.log1p, method=True)
log1p.__doc__ = """`log(1 + x)`, elementwise (as `np.log1p`), accurate where `x` is tiny.

Examples
--------
>>> tt.log1p(tt.tensor([1e-10, 1.0]))
tensor([1.00000000e-10, 6.93147181e-01])
"""
expm1 = elementwise(np.expm1, "expm1", lambda ans, x: ans + 1, numpy=np.expm1, method=True)
expm1.__doc__ = """`exp(x) - 1`, elementwise (as `np.expm1`), accurate where `x` is tiny.

Examples
--------
>>> x = tt.tensor([1e-10, 1.0], requires_grad=True)
>>> tt.expm1(x)
tensor([1.00000000e-10, 1.71828183e+00], requires_grad=True)
>>> tt.expm1(x).sum().backward()
>>> x.grad                     # exp(x)
array([1.        , 2.71828183])
"""
log2 = elementwise(np.log2, "log2", lambda ans, x: 1 / (x * LN2), numpy=np.log2, method=True)
log2.__doc__ = """Base-2 logarithm, elementwise (as `np.log2`).

Examples
--------
>>> x = tt.tensor([1.0, 8.0], requires_grad=True)
>>> tt.log2(x)
tensor([0., 3.], requires_grad=True)
>>> tt.log2(x).sum().backward()
>>> x.grad                     # 1 / (x ln 2)
array([1.44269504, 0.18033688])
"""
log10 = elementwise(np.log10, "log10", lambda ans, x: 1 / (x * LN10), numpy=np.log10, method=True)
log10.__doc__ = """Base-10 logarithm, elementwise (as `np.log10`).

Examples
--------
>>> tt.log10(tt.tensor([1.0, 1000.0]))
tensor([0., 3.])
"""
exp2 = elementwise(np.exp2, "exp2", lambda ans, x: ans * LN2, numpy=np.exp2, method=True)
exp2.__doc__ = """`2**x`, elementwise (as `np.exp2`).

Examples
--------
>>> x = tt.tensor([0.0, 3.0], requires_grad=True)
>>> tt.exp2(x)
tensor([1., 8.], requires_grad=True)
>>> tt.exp2(x).sum().backward()
>>> x.grad                     # 2**x ln 2
array([0.69314718, 5.54517744])
"""
reciprocal = elementwise(np.reciprocal, "reciprocal", lambda ans, x: -ans * ans,
                         numpy=np.reciprocal, method=True)
reciprocal.__doc__ = """`1 / x`, elementwise (as `np.reciprocal`; give it floats: NumPy's integer
reciprocal truncates).

Examples
--------
>>> x = tt.tensor([2.0, 4.0], requires_grad=True)
>>> tt.reciprocal(x).sum().backward()
>>> x.grad                     # -1 / x**2
array([-0.25  , -0.0625])
"""

# ----- trigonometric and hyperbolic ---------------------------------------------------------------
tan = elementwise(np.tan, "tan", lambda ans, x: 1 + ans * ans, numpy=np.tan, method=True)
tan.__doc__ = """Tangent of radians, elementwise (as `np.tan`).

Examples
--------
>>> x = tt.tensor([0.0, np.pi / 4], requires_grad=True)
>>> tt.tan(x).sum().backward()
>>> x.grad                     # 1 + tan**2
array([1., 2.])
"""
arcsin = elementwise(np.arcsin, "arcsin", lambda ans, x: 1 / np.sqrt(1 - x * x),
                     numpy=np.arcsin, method=True)
arcsin.__doc__ = """Inverse sine in radians, elementwise (as `np.arcsin`), for `x` in [-1, 1].

Examples
--------
>>> x = tt.tensor([0.0, 0.5], requires_grad=True)
>>> tt.arcsin(x)
tensor([0.        , 0.52359878], requires_grad=True)
>>> tt.arcsin(x).sum().backward()
>>> x.grad                     # 1 / sqrt(1 - x**2)
array([1.        , 1.15470054])
"""
arccos = elementwise(np.arccos, "arccos", lambda ans, x: -1 / np.sqrt(1 - x * x),
                     numpy=np.arccos, method=True)
arccos.__doc__ = """Inverse cosine in radians, elementwise (as `np.arccos`), for `x` in [-1, 1].

Examples
--------
>>> x = tt.tensor([0.0, 0.5], requires_grad=True)
>>> tt.arccos(x)
tensor([1.57079633, 1.04719755], requires_grad=True)
>>> tt.arccos(x).sum().backward()
>>> x.grad                     # -1 / sqrt(1 - x**2)
array([-1.        , -1.15470054])
"""
arctan = elementwise(np.arctan, "arctan", lambda ans, x: 1 / (1 + x * x), numpy=np.arctan, method=True)
arctan.__doc__ = """Inverse tangent in radians, elementwise (as `np.arctan`); see `arctan2` for an angle.

Examples
--------
>>> x = tt.tensor([0.0, 1.0], requires_grad=True)
>>> tt.arctan(x).sum().backward()
>>> x.grad                     # 1 / (1 + x**2)
array([1. , 0.5])
"""
sinh = elementwise(np.sinh, "sinh", lambda ans, x: np.cosh(x), numpy=np.sinh, method=True)
sinh.__doc__ = """Hyperbolic sine, elementwise (as `np.sinh`).

Examples
--------
>>> x = tt.tensor([0.0, 1.0], requires_grad=True)
>>> tt.sinh(x).sum().backward()
>>> x.grad                     # cosh x
array([1.        , 1.54308063])
"""
cosh = elementwise(np.cosh, "cosh", lambda ans, x: np.sinh(x), numpy=np.cosh, method=True)
cosh.__doc__ = """Hyperbolic cosine, elementwise (as `np.cosh`).

Examples
--------
>>> x = tt.tensor([0.0, 1.0], requires_grad=True)
>>> tt.cosh(x).sum().backward()
>>> x.grad                     # sinh x
array([0.        , 1.17520119])
"""
arcsinh = elementwise(np.arcsinh, "arcsinh", lambda ans, x: 1 / np.sqrt(x * x + 1),
                      numpy=np.arcsinh, method=True)
arcsinh.__doc__ = """Inverse hyperbolic sine, elementwise (as `np.arcsinh`).

Examples
--------
>>> x = tt.tensor([0.0, 1.0], requires_grad=True)
>>> tt.arcsinh(x).sum().backward()
>>> x.grad                     # 1 / sqrt(x**2 + 1)
array([1.        , 0.70710678])
"""
arccosh = elementwise(np.arccosh, "arccosh", lambda ans, x: 1 / np.sqrt(x * x - 1),
                      numpy=np.arccosh, method=True)
arccosh.__doc__ = """Inverse hyperbolic cosine, elementwise (as `np.arccosh`), for `x >= 1`.

Examples
--------
>>> x = tt.tensor([1.0, 2.0], requires_grad=True)
>>> tt.arccosh(x)
tensor([0.        , 1.3169579], requires_grad=True)
>>> tt.arccosh(x[1:]).sum().backward()   # 1 / sqrt(x**2 - 1); inf at x = 1
>>> x.grad
array([0.        , 0.57735027])
"""
arctanh = elementwise(np.arctanh, "arctanh", lambda ans, x: 1 / (1 - x * x),
                      numpy=np.arctanh, method=True)
arctanh.__doc__ = """Inverse hyperbolic tangent, elementwise (as `np.arctanh`), for `x` in (-1, 1).

Examples
--------
>>> x = tt.tensor([0.0, 0.5], requires_grad=True)
>>> tt.arctanh(x).sum().backward()
>>> x.grad                     # 1 / (1 - x**2)
array([1.        , 1.33333333])
"""


# sinc'(x) = (cos(pi x) - sinc(x)) / x cancels near 0; there its series, x * P(x^2), with
# P's coefficients (-1)^n 2n pi^2n / (2n+1)!, n = 1..5 (a relative error below 1e-14 in float64
# up to 0.08, below 1e-6 in float32 up to 0.3, where the closed form takes over).
_SINC_SERIES = [(-1) ** n * 2 * n * math.pi ** (2 * n) / math.factorial(2 * n + 1) for n in range(5, 0, -1)]


def _sinc_deriv(ans, x):
    small = np.abs(x) < (0.3 if x.dtype == np.float32 else 0.08)   # values: a constant branch
    safe = np.where(small, 1, x)             # the other branch stays finite (no 0/0 in grad of grad)
    x2 = x * x
    series = _SINC_SERIES[0]
    for c in _SINC_SERIES[1:]:
        series = series * x2 + c
    return np.where(small, x * series, (np.cos(math.pi * safe) - np.sinc(safe)) / safe)


_sinc = elementwise(np.sinc, "sinc", _sinc_deriv)


@public(numpy=np.sinc, method=True)
def sinc(x):
    """np.sinc, also as np.sinc(x=t) (NumPy's one keyword input).

    Examples
    --------
    >>> tt.sinc(tt.tensor([0.0, 1.0])).numpy().round(12)
    array([1., 0.])
    """
    return _sinc(x)

# ----- special functions and activations -----------------------------------------------------------
def _erf(x):    # SciPy's on NumPy arrays (and Tensors: back to the table); the device's own elsewhere
    """The error function, as `scipy.special.erf`, with both rules (`2/sqrt(pi) exp(-x**2)`).

    Examples
    --------
    >>> tt.erf(tt.tensor([0.0, 1.0])).numpy().round(4)
    array([0.    , 0.8427])
    """
    return scipy.special.erf(x) if type(x) is np.ndarray else backend.erf(x)


def _ndtr(x):
    if (type(x) is np.ndarray or type(x) is np.float32) and x.dtype == np.float32:
        return _ndtr_float32(x)
    return scipy.special.ndtr(x) if type(x) is np.ndarray else backend.ndtr(x)


# Phi(x) = 1/2 + x P(x^2) for |x| < 2.5, P lowest order first: a minimax fit (Lawson's reweighted
# Chebyshev least squares, degree 10) to SciPy's ndtr, relative error below 3.5e-10 on the whole
# interval: a hundredth of float32's half ulp.
_NDTR_CENTRE = 2.5
_NDTR_POLY = (0.3989422793232497, -0.06649036978869548, 0.009973524860198283, -0.001187278736412697,
              0.00011539037518347713, -9.419477502057001e-06, 6.564565703548784e-07,
              -3.878187875457435e-08, 1.843929676398232e-09, -6.188037168672016e-11,
              1.0663218003726383e-12)


def _ndtr_float32(x):
    """scipy.special.ndtr of a float32 array (or scalar), within 1 ulp of SciPy's float64 ndtr
    rounded to float32, about 3x faster: SciPy's is a scalar loop, ~11 ns a value (1.4 ms of a
    small transformer's GELU on (16, 32, 256), a tenth of its step). The polynomial above, in
    float64, in place; SciPy's own ndtr for the values at 2.5 or further out (inf too; NaN stays
    NaN), which a GELU's inputs seldom are."""
    z = np.array(x, dtype=np.float64, ndmin=1)
    with np.errstate(over="ignore", invalid="ignore"):     # huge |x|: replaced below
        u = z * z
        p = u * _NDTR_POLY[-1]
        for c in _NDTR_POLY[-2:0:-1]:
            p += c
            p *= u
        p += _NDTR_POLY[0]
        p *= z
        p += 0.5
    far = np.flatnonzero(np.abs(z) >= _NDTR_CENTRE)
    if far.size:
        p.put(far, scipy.special.ndtr(z.take(far)))
    p = p.astype(np.float32).reshape(np.shape(x))
    return p if p.ndim else p[()]


erf = elementwise(_erf, "erf", lambda ans, x: TWO_OVER_SQRT_PI * np.exp(-x * x),
                  numpy=scipy.special.erf, method=True)

# log(1 + exp(x)), stable for any x (logaddexp); its derivative is the sigmoid.
_softplus = elementwise(lambda x: np.logaddexp(0, x), "softplus",
                        lambda ans, x: _expit(x))


def _gelu_deriv(ans, x):
    """Phi(x) + x phi(x). On NumPy arrays Phi(x) is read back from the forward's own product,
    ans / x (within 3 ulp; 1/2 at x = 0): SciPy's ndtr and erf are scalar loops (~2 ms each for a
    (16, 32, 256) float32 activation, most of a small transformer's GELU cost), so the rule no
    longer calls erf a second time. Elsewhere (Tensors at higher orders: back to the table; other
    devices) it is written with erf."""
    if isinstance(x, (np.ndarray, np.generic)) and isinstance(ans, (np.ndarray, np.generic)):
        # (NumPy's scalars too: a compiled program's 0-d values are scalars, and it must take
        # the same branch as eager mode, bit for bit)
        cdf = np.full_like(ans, 0.5)         # Phi(x) = 1/2 to the dtype's precision near 0,
        # where x * Phi(x) underflows (x subnormal) and ans / x would not be Phi(x)
        np.divide(ans, x, out=cdf, where=np.abs(x) >= np.finfo(cdf.dtype).tiny)
    else:
        cdf = 0.5 * (1 + _erf(x / SQRT2))
    return cdf + x * (ONE_OVER_SQRT_2PI * np.exp(-0.5 * (x * x)))


# x * Phi(x), Phi the standard normal CDF (scipy's ndtr: exact far out): PyTorch's default GELU.
_gelu = elementwise(lambda x: x * _ndtr(x), "gelu", _gelu_deriv)

def _leaky_rule(g, x, negative_slope):   # selected: a slope of 0 gives an exact 0 (as relu's)
    return np.where(x > 0, g, g * negative_slope if negative_slope else 0)


# max(x, 0) + negative_slope * min(x, 0); its slope at 0 is negative_slope (as PyTorch).
_leaky_relu = defprim(
    lambda x, negative_slope: np.where(x > 0, x, x * negative_slope), "leaky_relu",
    vjp=[lambda g, ans, x, negative_slope: _leaky_rule(g, x, negative_slope)],
    jvp=[lambda t, ans, x, negative_slope: _leaky_rule(t, x, negative_slope)])


@public
def softplus(x, beta=1.0):
    """log(1 + exp(beta * x)) / beta, stable for any x (PyTorch's, with no threshold needed).

    Examples
    --------
    >>> bool(tt.softplus(tt.tensor([0.0])).item() == np.log(2))
    True
    """
    return _softplus(x) if beta == 1 else _softplus(x * beta) / beta


@public
def gelu(x, approximate="none"):
    """x * Phi(x) (Phi the standard normal CDF), PyTorch's default; `approximate="tanh"` gives
    PyTorch's tanh approximation.

    Examples
    --------
    >>> tt.gelu(tt.tensor([0.0]))
    tensor([0.])
    """
    if approximate == "none":
        return _gelu(x)
    if approximate == "tanh":
        inner = (x + 0.044715 * (x * x * x)) * math.sqrt(2 / math.pi)
        return 0.5 * x * (1 + np.tanh(inner))
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


@public
def leaky_relu(x, negative_slope=0.01):
    """x where x > 0, else negative_slope * x (PyTorch's; the slope at 0 is negative_slope).

    Examples
    --------
    >>> tt.leaky_relu(tt.tensor([-1.0, 2.0]), negative_slope=0.1)
    tensor([-0.1,  2. ])
    """
    if isinstance(negative_slope, Tensor):   # a 0-d Tensor (an array argument inside tt.compile):
        negative_slope = negative_slope.data  # its value, a parameter of the primitive
    return _leaky_relu(x, negative_slope=negative_slope)


# ----- two inputs (NumPy broadcasting) ---------------------------------------------------------------
def _nonzero(r):
    return r + (r == 0)   # the gradient at the origin is 0, not 0/0 (as frobenius_norm's)


hypot = defprim(np.hypot, "hypot",
                vjp=[lambda g, ans, a, b: g * a / _nonzero(ans), lambda g, ans, a, b: g * b / _nonzero(ans)],
                jvp=[lambda t, ans, a, b: t * a / _nonzero(ans), lambda t, ans, a, b: t * b / _nonzero(ans)],
                numpy=np.hypot, method=True)
hypot.__doc__ = """`sqrt(a**2 + b**2)` with NumPy's broadcasting (as `np.hypot`), without overflow;
the gradient at the origin is 0.

Examples
--------
>>> a = tt.tensor(3.0, requires_grad=True)
>>> b = tt.tensor(4.0, requires_grad=True)
>>> tt.hypot(a, b)
tensor(5., requires_grad=True)
>>> tt.hypot(a, b).backward()
>>> a.grad, b.grad
(array(0.6), array(0.8))
"""


def _r2(y, x):
    return _nonzero(x * x + y * y)


arctan2 = defprim(np.arctan2, "arctan2",                  # arctan2(y, x): the angle of (x, y)
                  vjp=[lambda g, ans, y, x: g * x / _r2(y, x), lambda g, ans, y, x: -g * y / _r2(y, x)],
                  jvp=[lambda t, ans, y, x: t * x / _r2(y, x), lambda t, ans, y, x: -t * y / _r2(y, x)],
                  numpy=np.arctan2, method=True)
arctan2.__doc__ = """`arctan2(y, x)`: the angle of the point (x, y) in radians, in (-pi, pi] (as
`np.arctan2`; note the order: `y` first).

Examples
--------
>>> y = tt.tensor([1.0, 1.0], requires_grad=True)
>>> x = tt.tensor([1.0, -1.0])
>>> tt.arctan2(y, x)
tensor([0.78539816, 2.35619449], requires_grad=True)
>>> tt.arctan2(y, x).sum().backward()
>>> y.grad                     # x / (x**2 + y**2)
array([ 0.5, -0.5])
"""
logaddexp = defprim(np.logaddexp, "logaddexp",            # d/da log(e^a + e^b) = e^(a - ans)
                    vjp=[lambda g, ans, a, b: g * np.exp(a - ans), lambda g, ans, a, b: g * np.exp(b - ans)],
                    jvp=[lambda t, ans, a, b: t * np.exp(a - ans), lambda t, ans, a, b: t * np.exp(b - ans)],
                    numpy=np.logaddexp, method=True)
logaddexp.__doc__ = """`log(exp(a) + exp(b))` with NumPy's broadcasting (as `np.logaddexp`), with no
overflow.

Examples
--------
>>> a = tt.tensor([1000.0, 0.0], requires_grad=True)
>>> tt.logaddexp(a, 1000.0)
tensor([1000.69314718, 1000.        ], requires_grad=True)
>>> tt.logaddexp(a, 1000.0).sum().backward()
>>> a.grad                     # exp(a - result): each input's softmax weight
array([0.5, 0. ])
"""
logaddexp2 = defprim(np.logaddexp2, "logaddexp2",
                     vjp=[lambda g, ans, a, b: g * np.exp2(a - ans),
                          lambda g, ans, a, b: g * np.exp2(b - ans)],
                     jvp=[lambda t, ans, a, b: t * np.exp2(a - ans),
                          lambda t, ans, a, b: t * np.exp2(b - ans)],
                     numpy=np.logaddexp2, method=True)
logaddexp2.__doc__ = """`log2(2**a + 2**b)` with NumPy's broadcasting (as `np.logaddexp2`), with no
overflow.

Examples
--------
>>> a = tt.tensor([3.0, 10.0], requires_grad=True)
>>> tt.logaddexp2(a, 3.0)
tensor([ 4.        , 10.01122726], requires_grad=True)
>>> tt.logaddexp2(a, 3.0).sum().backward()
>>> a.grad                     # 2**(a - result)
array([0.5       , 0.99224806])
"""

# a % b = a - floor(a / b) * b (the sign of b, as Python's and NumPy's): slope 1 in a and
# -floor(a / b) in b, away from the jumps. np.mod is the same function; `t % b` records it.
remainder = defprim(np.remainder, "remainder",
                    vjp=[lambda g, ans, a, b: g, lambda g, ans, a, b: -g * np.floor(a / b)],
                    jvp=[lambda t, ans, a, b: t, lambda t, ans, a, b: -t * np.floor(a / b)],
                    numpy=np.remainder, method=True)
remainder.__doc__ = """`a % b` with the sign of `b` (as `np.remainder`, Python's `%`): the operator
`%` records it. Its derivative is 1 in `a` and `-floor(a / b)` in `b`, away from the jumps.

Examples
--------
>>> a = tt.tensor([7.0, -7.0], requires_grad=True)
>>> b = tt.tensor(3.0, requires_grad=True)
>>> tt.remainder(a, b)
tensor([1., 2.], requires_grad=True)
>>> tt.remainder(a, b).sum().backward()
>>> a.grad, b.grad             # b.grad: -(2 + (-3))
(array([1., 1.]), array(1.))
"""


def _fshare(s, a, b, beats):
    """Share of `a` in fmax(a, b) (beats=np.greater) or fmin(a, b) (np.less) for s: as maximum's
    (ties split evenly), and a NaN loses to a number."""
    wins = beats(a, b) | (np.isnan(b) & ~np.isnan(a))
    return _select(wins, s) + _select(a == b, s * 0.5)   # selected, as maximum's


def _fmax_fmin(fun, name, beats):
    """fmax (beats=np.greater) or fmin (np.less): the cotangent and the tangent both go to the
    input that wins, by _fshare (the selection is linear: one rule per input serves both)."""
    rules = [lambda s, ans, a, b: _fshare(s, a, b, beats), lambda s, ans, a, b: _fshare(s, b, a, beats)]
    return defprim(fun, name, vjp=rules, jvp=rules, numpy=fun, method=True)


fmax = _fmax_fmin(np.fmax, "fmax", np.greater)
fmax.__doc__ = """The elementwise larger of `a` and `b` where a NaN loses to a number (as
`np.fmax`); at a tie each input gets half of the gradient, as `maximum`'s.

Examples
--------
>>> a = tt.tensor([1.0, np.nan, 3.0], requires_grad=True)
>>> tt.fmax(a, 2.0)
tensor([2., 2., 3.], requires_grad=True)
>>> tt.fmax(a, 2.0).sum().backward()
>>> a.grad
array([0., 0., 1.])
"""
fmin = _fmax_fmin(np.fmin, "fmin", np.less)
fmin.__doc__ = """The elementwise smaller of `a` and `b` where a NaN loses to a number (as
`np.fmin`); at a tie each input gets half of the gradient, as `minimum`'s.

Examples
--------
>>> a = tt.tensor([1.0, np.nan, 3.0], requires_grad=True)
>>> tt.fmin(a, 2.0)
tensor([1., 2., 2.], requires_grad=True)
>>> tt.fmin(a, 2.0).sum().backward()
>>> a.grad
array([1., 0., 0.])
"""


# ----- selecting: where, clip -------------------------------------------------------------------------
# The condition is a constant (no gradient); each branch gets the cotangent where it was chosen.
_where = defprim(lambda condition, x, y: np.where(condition, x, y), "where",
                 vjp=[None, lambda g, ans, c, x, y: np.where(c, g, 0),
                      lambda g, ans, c, x, y: np.where(c, 0, g)],
                 jvp=[None, lambda t, ans, c, x, y: np.where(c, t, 0),
                      lambda t, ans, c, x, y: np.where(c, 0, t)])
complex_rules(_where)


@public(numpy=np.where)
def where(condition, x=None, y=None):
    """x where condition holds, else y (broadcast together), as np.where; the condition (a bool
    array or Tensor) carries no gradient. `where(condition)` alone gives the indices (np.nonzero).

    Examples
    --------
    >>> tt.where(np.array([True, False]), tt.tensor([1.0, 2.0]), 0.0)
    tensor([1., 0.])
    """
    given = condition
    condition = condition.data if isinstance(condition, Tensor) else condition \
        if isinstance(condition, np.ndarray) else backend.asarray(condition)   # (a traced mask stays one)
    if x is None and y is None:
        return on_values(np.nonzero, (given,), {}, np.nonzero(condition))
    if x is None or y is None:
        raise ValueError("where: give both x and y, or neither (where(condition) gives the indices "
                         "where it holds)")
    return _where(condition, x, y)


_NO = np.False_


def _clip_masks(x, lo, hi):
    """Where the output min(max(x, lo), hi) comes from x (lo <= x <= hi: x keeps its gradient at
    the bounds, as PyTorch's clamp), from lo, or from hi. Boolean arrays, computed on values."""
    below = _NO if lo is None else x < lo
    if hi is None:
        above = _NO
    else:
        above = x > hi if lo is None else np.where(below, lo > hi, x > hi)
    return ~(below | above), below & ~above, above


def _clip_rule(which):
    return lambda g, ans, x, lo, hi: np.where(_clip_masks(x, lo, hi)[which], g, 0)


_clip = defprim(lambda x, lo, hi: np.clip(x, lo, hi), "clip",
                vjp=[_clip_rule(0), _clip_rule(1), _clip_rule(2)],
                jvp=[_clip_rule(0), _clip_rule(1), _clip_rule(2)])


@public(numpy=np.clip, method=True)
def clip(a, a_min=None, a_max=None, out=None, *, min=None, max=None):
    """np.clip: min(max(a, a_min), a_max), either bound None (no bound), a number, an array or a
    Tensor, broadcast together. The gradient goes to `a` where a_min <= a <= a_max and to the
    bound that is active elsewhere. NumPy 2's `min=`/`max=` spellings work too.

    Examples
    --------
    >>> tt.clip(tt.tensor([-1.0, 0.5, 2.0]), 0, 1)
    tensor([0. , 0.5, 1. ])
    """
    if out is not None:
        raise TypeError("clip: out= is not supported on Tensors; use the returned value")
    if (min is not None and a_min is not None) or (max is not None and a_max is not None):
        raise TypeError("clip: give each bound once (a_min or min, a_max or max)")
    return _clip(a, a_min if min is None else min, a_max if max is None else max)


def clamp(x, min=None, max=None):
    """PyTorch's clamp: clip(x, min, max); at least one bound must be given.

    Examples
    --------
    >>> tt.clamp(tt.tensor([-1.0, 0.5, 2.0]), min=0.0, max=1.0)
    tensor([0. , 0.5, 1. ])
    """
    if min is None and max is None:
        raise ValueError("clamp: at least one of min or max must not be None")
    return _clip(x, min, max)


publish(clamp, "clamp", method=True)


# ----- a recorded copy --------------------------------------------------------------------------------
_clone = defprim(backend.copy, "clone",
                 vjp=[lambda g, ans, x: g], jvp=[lambda t, ans, x: t])


@public(numpy=np.copy, method=("clone", "copy"))
def clone(a, order="K", subok=False):
    """A copy of a that stays on the tape (PyTorch's clone; np.copy and t.copy() too): gradients
    flow through it to a.

    Examples
    --------
    >>> x = tt.tensor([1.0, 2.0], requires_grad=True)
    >>> y = tt.clone(x)
    >>> y.sum().backward()
    >>> x.grad
    array([1., 1.])
    """
    return _clone(a)


# ----- no gradient ------------------------------------------------------------------------------------
def _any_tensor(values):
    return builtins.any(isinstance(v, Tensor) for v in values)


def _piecewise_constant(np_fun, name):
    """A function with zero derivative almost everywhere, computed on the values: a Tensor
    (that does not require grad) for a Tensor, an array for an array. np.<name>(t) itself
    gives a plain array (ops.NONDIFFERENTIABLE)."""
    def op(*args, **kwargs):     # NumPy's keywords too: np.round(a=t, decimals=2)
        values = [a.data if isinstance(a, Tensor) else a for a in args]
        named = {k: v.data if isinstance(v, Tensor) else v for k, v in kwargs.items()}
        out = np_fun(*values, **named)
        out = Tensor(out) if _any_tensor(list(args) + list(kwargs.values())) else out
        return on_values(np_fun, args, kwargs, out)     # tt.compile recomputes it per call
    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"np.{np_fun.__name__} on the values; no gradient (a Tensor that does not require grad)."
    return publish(op, name, method=True)


sign = _piecewise_constant(np.sign, "sign")
sign.__doc__ = """-1, 0 or 1 by the sign of `x`, elementwise (as `np.sign`); piecewise constant, so
the result does not require grad (its gradient is 0 almost everywhere).

Examples
--------
>>> x = tt.tensor([-1.5, -0.5, 0.5, 2.5], requires_grad=True)
>>> tt.sign(x)
tensor([-1., -1.,  1.,  1.])
>>> tt.sign(x).requires_grad
False
"""
floor = _piecewise_constant(np.floor, "floor")
floor.__doc__ = """The largest integer <= `x`, elementwise, as floats (as `np.floor`); piecewise
constant, so the result does not require grad (its gradient is 0 almost everywhere).

Examples
--------
>>> x = tt.tensor([-1.5, -0.5, 0.5, 2.5], requires_grad=True)
>>> tt.floor(x)
tensor([-2., -1.,  0.,  2.])
>>> tt.floor(x).requires_grad
False
"""
ceil = _piecewise_constant(np.ceil, "ceil")
ceil.__doc__ = """The smallest integer >= `x`, elementwise, as floats (as `np.ceil`); piecewise
constant, so the result does not require grad (its gradient is 0 almost everywhere).

Examples
--------
>>> x = tt.tensor([-1.5, -0.5, 0.5, 2.5], requires_grad=True)
>>> tt.ceil(x)
tensor([-1., -0.,  1.,  3.])
>>> tt.ceil(x).requires_grad
False
"""
round = _piecewise_constant(np.round, "round")     # round(x, decimals=0)
round.__doc__ = """`round(x, decimals=0)`: rounded to `decimals` places, halves to even (as `np.round`);
piecewise constant, so the result does not require grad (its gradient is 0 almost everywhere).

Examples
--------
>>> x = tt.tensor([-1.5, -0.5, 0.5, 2.5], requires_grad=True)
>>> tt.round(x)
tensor([-2., -0.,  0.,  2.])
>>> tt.round(x).requires_grad
False
"""
trunc = _piecewise_constant(np.trunc, "trunc")
trunc.__doc__ = """`x` with its fractional part dropped (towards 0), elementwise (as `np.trunc`);
piecewise constant, so the result does not require grad (its gradient is 0 almost everywhere).

Examples
--------
>>> x = tt.tensor([-1.5, -0.5, 0.5, 2.5], requires_grad=True)
>>> tt.trunc(x)
tensor([-1., -0.,  0.,  2.])
>>> tt.trunc(x).requires_grad
False
"""


def _on_values(np_fun):
    """A comparison or test on the values: a plain boolean array, as the operators `<`, `==` give."""
    def op(*args, **kwargs):
        out = np_fun(*[a.data if isinstance(a, Tensor) else a for a in args], **kwargs)
        return on_values(np_fun, args, kwargs, out)     # tt.compile recomputes it per call
    op.__name__ = op.__qualname__ = np_fun.__name__
    op.__doc__ = f"np.{np_fun.__name__} on the values: a plain array (booleans, indices), no gradient."
    return op


less = publish(_on_values(np.less), "less")
less.__doc__ = """`a < b` with NumPy's broadcasting (as `np.less`, and the operator `<` on Tensors): a
plain boolean array, with no gradient.

Examples
--------
>>> x = tt.tensor([1.0, 2.0, 3.0], requires_grad=True)
>>> tt.less(x, 2.0)
array([ True, False, False])
"""
less_equal = publish(_on_values(np.less_equal), "less_equal")
less_equal.__doc__ = """`a <= b` with NumPy's broadcasting (as `np.less_equal`, and the operator
`<=` on Tensors): a plain boolean array, with no gradient.

Examples
--------
>>> x = tt.tensor([1.0, 2.0, 3.0], requires_grad=True)
>>> tt.less_equal(x, 2.0)
array([ True,  True, False])
"""
greater = publish(_on_values(np.greater), "greater")
greater.__doc__ = """`a > b` with NumPy's broadcasting (as `np.greater`, and the operator `>` on
Tensors): a plain boolean array, with no gradient.

Examples
--------
>>> x = tt.tensor([1.0, 2.0, 3.0], requires_grad=True)
>>> tt.greater(x, 2.0)
array([False, False,  True])
"""
greater_equal = publish(_on_values(np.greater_equal), "greater_equal")
greater_equal.__doc__ = """`a >= b` with NumPy's broadcasting (as `np.greater_equal`, and the
operator `>=` on Tensors): a plain boolean array, with no gradient.

Examples
--------
>>> x = tt.tensor([1.0, 2.0, 3.0], requires_grad=True)
>>> tt.greater_equal(x, 2.0)
array([False,  True,  True])
"""
equal = publish(_on_values(np.equal), "equal")
equal.__doc__ = """`a == b` with NumPy's broadcasting (as `np.equal`, and the operator `==` on Tensors): a
plain boolean array, with no gradient.

Examples
--------
>>> x = tt.tensor([1.0, 2.0, 3.0], requires_grad=True)
>>> tt.equal(x, 2.0)
array([False,  True, False])
"""
not_equal = publish(_on_values(np.not_equal), "not_equal")
not_equal.__doc__ = """`a != b` with NumPy's broadcasting (as `np.not_equal`, and the operator `!=`
on Tensors): a plain boolean array, with no gradient.

Examples
--------
>>> x = tt.tensor([1.0, 2.0, 3.0], requires_grad=True)
>>> tt.not_equal(x, 2.0)
array([ True, False,  True])
"""
isfinite = publish(_on_values(np.isfinite), "isfinite")
isfinite.__doc__ = """Whether each value is neither infinite nor NaN (as `np.isfinite`): a plain
boolean array.

Examples
--------
>>> tt.isfinite(tt.tensor([1.0, np.inf, -np.inf, np.nan]))
array([ True, False, False, False])
"""
isnan = publish(_on_values(np.isnan), "isnan")
isnan.__doc__ = """Whether each value is NaN (as `np.isnan`): a plain boolean array.

Examples
--------
>>> tt.isnan(tt.tensor([1.0, np.inf, -np.inf, np.nan]))
array([False, False, False,  True])
"""
isinf = publish(_on_values(np.isinf), "isinf")
isinf.__doc__ = """Whether each value is +inf or -inf (as `np.isinf`): a plain boolean array.

Examples
--------
>>> tt.isinf(tt.tensor([1.0, np.inf, -np.inf, np.nan]))
array([False,  True,  True, False])
"""
nondifferentiable(np.trunc)   # np.trunc(t): a plain array, like np.floor(t)
# Indices and truth values, as NumPy's methods give them (t.all(), t.argsort(axis=0), t.nonzero()).
all = publish(_on_values(np.all), "all", method=True)
all.__doc__ = """`all(a, axis=None, keepdims=False)`: whether every value along `axis` is true (nonzero),
as `np.all` and `t.all()`: a plain boolean array, no gradient.

Examples
--------
>>> x = tt.tensor([[1.0, 0.0], [2.0, 3.0]])
>>> tt.all(x > 0, axis=1)
array([False,  True])
"""
any = publish(_on_values(np.any), "any", method=True)
any.__doc__ = """`any(a, axis=None, keepdims=False)`: whether some value along `axis` is true (nonzero),
as `np.any` and `t.any()`: a plain boolean array, no gradient.

Examples
--------
>>> x = tt.tensor([[1.0, 0.0], [2.0, 3.0]])
>>> tt.any(x == 0, axis=0)
array([False,  True])
"""
argsort = publish(_on_values(np.argsort), "argsort", method=True)
argsort.__doc__ = """`argsort(a, axis=-1, kind=None)`: the indices that sort `a` along `axis` (as
`np.argsort` and `t.argsort()`): a plain integer array, no gradient. Indexing with them is
recorded: `x[tt.argsort(x)]` is differentiable, as `tt.sort(x)` is.

Examples
--------
>>> x = tt.tensor([3.0, 1.0, 2.0], requires_grad=True)
>>> tt.argsort(x)
array([1, 2, 0])
>>> x[tt.argsort(x)]
tensor([1., 2., 3.], requires_grad=True)
"""
nonzero = publish(_on_values(np.nonzero), "nonzero", method=True)
nonzero.__doc__ = """The indices of the nonzero values, one integer array per axis (as `np.nonzero` and
`t.nonzero()`, not PyTorch's one 2-D array): plain arrays, no gradient.

Examples
--------
>>> tt.nonzero(tt.tensor([[0.0, 1.0], [2.0, 0.0]]))
(array([0, 1]), array([1, 0]))
"""
nondifferentiable(np.argsort, np.nonzero)

# `t // d` and divmod(t, d), as NumPy: the quotient has no gradient (piecewise constant), the
# remainder is `remainder` (%) with its rules.
floor_divide = _piecewise_constant(np.floor_divide, "floor_divide")
floor_divide.__doc__ = """`floor(a / b)`, elementwise (as `np.floor_divide`; the operator `//`
calls it). Piecewise constant, so the result does not require grad; `divmod(t, d)` pairs it with
`remainder`, which is recorded.

Examples
--------
>>> a = tt.tensor([7.0, -7.0], requires_grad=True)
>>> tt.floor_divide(a, 2.0)
tensor([ 3., -4.])
>>> divmod(a, 2.0)
(tensor([ 3., -4.]), tensor([1., 1.], requires_grad=True))
"""
nondifferentiable(np.floor_divide)
Tensor.__floordiv__ = lambda self, other: floor_divide(self, other)
Tensor.__rfloordiv__ = lambda self, other: floor_divide(other, self)
Tensor.__divmod__ = lambda self, other: (floor_divide(self, other), remainder(self, other))
Tensor.__rdivmod__ = lambda self, other: (floor_divide(other, self), remainder(other, self))
