"""`tt.scipy.special`: SciPy's special functions, differentiable (as `jax.scipy.special`).

The ufuncs (gammaln, digamma, iv, ...) are primitives: `scipy.special.gammaln(t)` on a Tensor
reaches `Tensor.__array_ufunc__`, which hands it to the row below (ops.NUMPY_FUNCTIONS), so
SciPy's own spelling is recorded too. Each row is declared once, with both rules; derivatives
are written with these same functions, so a Tensor hands them back to the table and higher
orders work (digamma' is polygamma(1, .), i1' is (i0 + iv(2, .)) / 2, ...).

Orders and shape parameters (the n of polygamma and yn, the v of iv/ive/jv, the a and b of
betainc, the a of gammainc/gammaincc) are static parameters: no gradient, and a Tensor that
requires grad there raises. A float32 input gives a float32 result (SciPy's double-only loops,
yn or gammainc, are cast back).

Not ufuncs, composed from the rows: multigammaln, logsumexp (with b= and return_sign=),
softmax, log_softmax, softplus.
"""

import math

import numpy as np
import scipy.special as sp

from .. import ops
from ..ops import elementwise as ew
from ..ops.table import defprim, elementwise, nondifferentiable
from ..state import traced_data
from ..tensor import Tensor

SQRT_PI_OVER_2 = math.sqrt(math.pi) / 2
TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)
SQRT_2PI = math.sqrt(2 * math.pi)
ONE_OVER_SQRT_2PI = 1 / SQRT_2PI

# the public names of this module, by SciPy's name
__all__ = []


def _stands_for(ufunc, fun, name=None):
    """`fun` is what `ufunc` does on Tensors (ops.NUMPY_FUNCTIONS), and tt.scipy.special.<name>."""
    ops.NUMPY_FUNCTIONS[ufunc] = fun
    name = name or ufunc.__name__
    globals()[name] = fun
    __all__.append(name)
    return fun


def _float_like(out, x):
    """SciPy's result in x's float dtype: its double-only loops (yn, gammainc) turn float32 into
    float64, which would leave float32 training in float64 without a word."""
    dtype = getattr(x, "dtype", None)
    if dtype == np.float32 and getattr(out, "dtype", None) == np.float64:
        return out.astype(np.float32)
    return out


def _forward(ufunc):
    def forward(*xs, **params):
        return _float_like(ufunc(*xs, **params), xs[-1])
    forward.__name__ = ufunc.__name__
    return forward


def _constant(op, what, value):
    """A static argument (an order, a shape parameter): no gradient. A Tensor that requires
    grad there is refused, naming the argument; other Tensors give their values."""
    if isinstance(value, Tensor):
        if value.requires_grad:
            raise TypeError(f"scipy.special.{op}: the argument {what} is not differentiable (tinytensor "
                            f"differentiates {op} in its last argument only); pass {what}.detach() "
                            f"for its value")
        return traced_data(value)
    return value


def _param_like(c, x):
    """A value computed from static parameters (betaln(a, b), gammaln(a)) in x's float dtype,
    so that a float32 x stays float32 (a NumPy float64 scalar would promote it)."""
    return np.asarray(c, dtype=x.dtype)


def _sign(x):
    return np.sign(traced_data(x) if isinstance(x, Tensor) else x)


# ----- gamma and beta functions -----------------------------------------------------------------
def _polygamma_forward(x, n):
    return _float_like(sp.polygamma(n, x), x)


_polygamma = defprim(_polygamma_forward, "polygamma", nargs=1,
                     vjp=[lambda g, ans, x, n: g * _polygamma(x, n=n + 1)],
                     jvp=[lambda t, ans, x, n: t * _polygamma(x, n=n + 1)])


def polygamma(n, x):
    """The n-th derivative of digamma (scipy.special.polygamma); n (integers) is static.

    Examples
    --------
    >>> tt.scipy.special.polygamma(1, tt.tensor([1.0, 2.0]))      # trigamma: pi**2/6, pi**2/6 - 1
    tensor([1.64493407, 0.64493407])
    """
    n = _constant("polygamma", "n", n)
    return _polygamma(x, n=np.asarray(n) if isinstance(n, (list, tuple)) else n)


__all__.append("polygamma")

gammaln = _stands_for(sp.gammaln, elementwise(sp.gammaln, "gammaln", lambda ans, x: sp.digamma(x)))
gammaln.__doc__ = """log|Gamma(x)|, elementwise (as `scipy.special.gammaln`); its derivative is digamma.

Examples
--------
>>> x = tt.tensor([1.0, 2.5], requires_grad=True)
>>> y = tt.scipy.special.gammaln(x)
>>> y
tensor([0.        , 0.28468287], requires_grad=True)
>>> y.sum().backward()
>>> x.grad                                    # digamma(x)
array([-0.57721566,  0.70315664])
"""
digamma = _stands_for(sp.digamma, elementwise(sp.digamma, "digamma", lambda ans, x: _polygamma(x, n=1)),
                      "digamma")
digamma.__doc__ = """The digamma function d/dx log Gamma(x), elementwise (as `scipy.special.digamma`, also
spelled `psi`); its derivative is polygamma(1, x).

Examples
--------
>>> x = tt.tensor([1.0, 2.0], requires_grad=True)
>>> y = tt.scipy.special.digamma(x)
>>> y                                         # -Euler's gamma, 1 - Euler's gamma
tensor([-0.57721566,  0.42278434], requires_grad=True)
>>> y.sum().backward()
>>> x.grad                                    # polygamma(1, x)
array([1.64493407, 0.64493407])
>>> tt.scipy.special.psi is tt.scipy.special.digamma
True
"""
psi = _stands_for(sp.psi, digamma, "psi")          # the same ufunc object as digamma in SciPy
gamma = _stands_for(sp.gamma, elementwise(sp.gamma, "gamma", lambda ans, x: ans * sp.digamma(x)))
gamma.__doc__ = """The gamma function, elementwise (as `scipy.special.gamma`); its derivative is
gamma(x) digamma(x).

Examples
--------
>>> x = tt.tensor([0.5, 4.0], requires_grad=True)
>>> y = tt.scipy.special.gamma(x)
>>> y                                         # sqrt(pi), 3!
tensor([1.77245385, 6.        ], requires_grad=True)
>>> y.sum().backward()
>>> x.grad
array([-3.48023091,  7.53670601])
"""
rgamma = _stands_for(sp.rgamma, elementwise(sp.rgamma, "rgamma", lambda ans, x: -ans * sp.digamma(x)))
rgamma.__doc__ = """1 / Gamma(x), elementwise (as `scipy.special.rgamma`): 0 at the poles x = 0, -1, -2, ...

Examples
--------
>>> tt.scipy.special.rgamma(tt.tensor([0.5, 4.0, 0.0, -1.0]))
tensor([0.56418958, 0.16666667, 0.        , 0.        ])
"""
nondifferentiable(sp.gammasgn)     # scipy.special.gammasgn(t): a plain array, as np.sign(t)


def gammasgn(x):
    """The sign of gamma(x) (scipy.special.gammasgn) on the values: piecewise constant, no gradient
    (a plain array, as np.sign(t)).

    Examples
    --------
    >>> tt.scipy.special.gammasgn(tt.tensor([-0.5, 0.5, 2.0]))
    array([-1.,  1.,  1.])
    """
    return sp.gammasgn(traced_data(x) if isinstance(x, Tensor) else x)


__all__.append("gammasgn")


def _beta_rule(which):   # d/da beta(a, b) = beta(a, b) (psi(a) - psi(a + b))
    return lambda g, ans, a, b: g * ans * (sp.digamma(a if which == 0 else b) - sp.digamma(a + b))


def _betaln_rule(which):
    return lambda g, ans, a, b: g * (sp.digamma(a if which == 0 else b) - sp.digamma(a + b))


beta = _stands_for(sp.beta, defprim(sp.beta, "beta", vjp=[_beta_rule(0), _beta_rule(1)],
                                    jvp=[_beta_rule(0), _beta_rule(1)]))
beta.__doc__ = """The beta function B(a, b) = Gamma(a) Gamma(b) / Gamma(a + b) (as `scipy.special.beta`),
differentiable in a and b.

Examples
--------
>>> a = tt.tensor(2.0, requires_grad=True)
>>> y = tt.scipy.special.beta(a, 3.0)
>>> y                                         # 1/12
tensor(0.08333333, requires_grad=True)
>>> y.backward()
>>> a.grad                                    # B(a, b) (digamma(a) - digamma(a + b))
array(-0.09027778)
"""
betaln = _stands_for(sp.betaln, defprim(sp.betaln, "betaln", vjp=[_betaln_rule(0), _betaln_rule(1)],
                                        jvp=[_betaln_rule(0), _betaln_rule(1)]))
betaln.__doc__ = """log|B(a, b)| (as `scipy.special.betaln`), differentiable in a and b.

Examples
--------
>>> a = tt.tensor(2.0, requires_grad=True)
>>> y = tt.scipy.special.betaln(a, 3.0)
>>> y                                         # log(1/12)
tensor(-2.48490665, requires_grad=True)
>>> y.backward()
>>> a.grad                                    # digamma(a) - digamma(a + b)
array(-1.08333333)
"""


def multigammaln(a, d):
    """log of the multivariate gamma function of dimension d (scipy.special.multigammaln):
    sum_j gammaln(a - j/2), j = 0..d-1, plus d(d-1)/4 log(pi). Needs a > (d - 1) / 2.

    Examples
    --------
    >>> a = tt.tensor(2.0, requires_grad=True)
    >>> y = tt.scipy.special.multigammaln(a, 2)
    >>> y
    tensor(0.45158271, requires_grad=True)
    >>> y.backward()
    >>> a.grad                                # digamma(2) + digamma(1.5)
    array(0.45927431)
    """
    if int(d) != d or d < 1:
        raise ValueError(f"multigammaln: d must be a positive integer, got {d!r}")
    d = int(d)
    value = traced_data(a) if isinstance(a, Tensor) else np.asarray(a, dtype=float)
    if np.any(value <= 0.5 * (d - 1)):
        raise ValueError(f"multigammaln: a must be larger than (d - 1) / 2 = {0.5 * (d - 1)} everywhere")
    halves = np.arange(d, dtype=value.dtype) * 0.5
    a = a if isinstance(a, Tensor) else value
    return ops.sum(gammaln(a[..., None] - halves), axis=-1) + 0.25 * d * (d - 1) * math.log(math.pi)


__all__.append("multigammaln")


# The regularised incomplete functions, differentiable in x: their x-derivative is the density.
def _betainc_density(x, a, b):   # x^(a-1) (1-x)^(b-1) / B(a, b)
    a, b = _param_like(a, x), _param_like(b, x)
    return np.exp((a - 1) * np.log(x) + (b - 1) * np.log1p(-x) - _param_like(sp.betaln(a, b), x))


_betainc = defprim(lambda x, a, b: _float_like(sp.betainc(a, b, x), x), "betainc", nargs=1,
                   vjp=[lambda g, ans, x, a, b: g * _betainc_density(x, a, b)],
                   jvp=[lambda t, ans, x, a, b: t * _betainc_density(x, a, b)])


def _gammainc_density(x, a):     # x^(a-1) e^-x / Gamma(a)
    a = _param_like(a, x)
    return np.exp((a - 1) * np.log(x) - x - _param_like(sp.gammaln(a), x))


_gammainc = defprim(lambda x, a: _float_like(sp.gammainc(a, x), x), "gammainc", nargs=1,
                    vjp=[lambda g, ans, x, a: g * _gammainc_density(x, a)],
                    jvp=[lambda t, ans, x, a: t * _gammainc_density(x, a)])
_gammaincc = defprim(lambda x, a: _float_like(sp.gammaincc(a, x), x), "gammaincc", nargs=1,
                     vjp=[lambda g, ans, x, a: -g * _gammainc_density(x, a)],
                     jvp=[lambda t, ans, x, a: -t * _gammainc_density(x, a)])


def betainc(a, b, x):
    """The regularised incomplete beta function I_x(a, b) (scipy.special.betainc), differentiable in
    x only: a and b are static, and a Tensor that requires grad there raises.

    Examples
    --------
    >>> x = tt.tensor(0.5, requires_grad=True)
    >>> y = tt.scipy.special.betainc(2.0, 3.0, x)
    >>> y                                     # the Beta(2, 3) distribution's cdf at 0.5
    tensor(0.6875, requires_grad=True)
    >>> y.backward()
    >>> x.grad                                # its density, x (1 - x)**2 / B(2, 3)
    array(1.5)
    """
    return _betainc(x, a=_constant("betainc", "a", a), b=_constant("betainc", "b", b))


def gammainc(a, x):
    """The regularised lower incomplete gamma function P(a, x) (scipy.special.gammainc),
    differentiable in x only: a is static, and a Tensor that requires grad there raises.

    Examples
    --------
    >>> x = tt.tensor(1.0, requires_grad=True)
    >>> y = tt.scipy.special.gammainc(2.0, x)
    >>> y                                     # 1 - 2/e, the Gamma(2) distribution's cdf at 1
    tensor(0.26424112, requires_grad=True)
    >>> y.backward()
    >>> x.grad                                # its density, x e**-x / Gamma(2)
    array(0.36787944)
    """
    return _gammainc(x, a=_constant("gammainc", "a", a))


def gammaincc(a, x):
    """The regularised upper incomplete gamma function Q(a, x) = 1 - P(a, x)
    (scipy.special.gammaincc), differentiable in x only, as gammainc.

    Examples
    --------
    >>> x = tt.tensor(1.0, requires_grad=True)
    >>> y = tt.scipy.special.gammaincc(2.0, x)
    >>> y                                     # 2/e
    tensor(0.73575888, requires_grad=True)
    >>> y.backward()
    >>> x.grad
    array(-0.36787944)
    """
    return _gammaincc(x, a=_constant("gammaincc", "a", a))


for _f, _u in ((betainc, sp.betainc), (gammainc, sp.gammainc), (gammaincc, sp.gammaincc)):
    _stands_for(_u, _f)

# ----- error functions and the normal distribution ----------------------------------------------------
erf = _stands_for(sp.erf, ew.erf)
erfc = _stands_for(sp.erfc, elementwise(sp.erfc, "erfc", lambda ans, x: -TWO_OVER_SQRT_PI * np.exp(-x * x)))
erfc.__doc__ = """1 - erf(x), elementwise (as `scipy.special.erfc`), accurate where erf(x) is near 1.

Examples
--------
>>> x = tt.tensor([0.0, 1.0], requires_grad=True)
>>> y = tt.scipy.special.erfc(x)
>>> y
tensor([1.        , 0.15729921], requires_grad=True)
>>> y.sum().backward()
>>> x.grad                                    # -2/sqrt(pi) exp(-x**2)
array([-1.12837917, -0.4151075 ])
"""
erfinv = _stands_for(sp.erfinv, elementwise(sp.erfinv, "erfinv",
                                            lambda ans, x: SQRT_PI_OVER_2 * np.exp(ans * ans)))
erfinv.__doc__ = """The inverse of erf on (-1, 1), elementwise (as `scipy.special.erfinv`).

Examples
--------
>>> x = tt.tensor([0.0, 0.5], requires_grad=True)
>>> y = tt.scipy.special.erfinv(x)
>>> y
tensor([0.        , 0.47693628], requires_grad=True)
>>> y.sum().backward()
>>> x.grad                                    # sqrt(pi)/2 exp(y**2)
array([0.88622693, 1.11258482])
"""
erfcinv = _stands_for(sp.erfcinv, elementwise(sp.erfcinv, "erfcinv",
                                              lambda ans, x: -SQRT_PI_OVER_2 * np.exp(ans * ans)))
erfcinv.__doc__ = """The inverse of erfc on (0, 2), elementwise (as `scipy.special.erfcinv`).

Examples
--------
>>> x = tt.tensor([0.5, 1.5], requires_grad=True)
>>> y = tt.scipy.special.erfcinv(x)
>>> y                                         # erfc(y) == x
tensor([ 0.47693628, -0.47693628], requires_grad=True)
>>> y.sum().backward()
>>> x.grad                                    # -sqrt(pi)/2 exp(y**2)
array([-1.11258482, -1.11258482])
"""
ndtr = _stands_for(sp.ndtr, elementwise(sp.ndtr, "ndtr",
                                        lambda ans, x: ONE_OVER_SQRT_2PI * np.exp(-0.5 * (x * x))))
ndtr.__doc__ = """The standard normal cdf Phi(x), elementwise (as `scipy.special.ndtr`).

Examples
--------
>>> x = tt.tensor([0.0, 1.96], requires_grad=True)
>>> y = tt.scipy.special.ndtr(x)
>>> y
tensor([0.5      , 0.9750021], requires_grad=True)
>>> y.sum().backward()
>>> x.grad                                    # the normal density
array([0.39894228, 0.05844094])
"""
# log_ndtr' = phi(x) / Phi(x) = exp(-x^2/2 - log_ndtr(x)) / sqrt(2 pi): finite far into the tail
log_ndtr = _stands_for(sp.log_ndtr, elementwise(
    sp.log_ndtr, "log_ndtr", lambda ans, x: ONE_OVER_SQRT_2PI * np.exp(-0.5 * (x * x) - ans)))
log_ndtr.__doc__ = """log Phi(x), elementwise (as `scipy.special.log_ndtr`): finite, with a finite gradient,
far into the left tail, where log(ndtr(x)) is -inf.

Examples
--------
>>> x = tt.tensor([0.0, -40.0], requires_grad=True)
>>> y = tt.scipy.special.log_ndtr(x)
>>> y
tensor([-6.93147181e-01, -8.04608442e+02], requires_grad=True)
>>> y.sum().backward()
>>> x.grad                                    # phi(x) / Phi(x), about -x in the tail
array([ 0.79788456, 40.02496885])
"""
ndtri = _stands_for(sp.ndtri, elementwise(sp.ndtri, "ndtri",
                                          lambda ans, x: SQRT_2PI * np.exp(0.5 * (ans * ans))))
ndtri.__doc__ = """The inverse of the standard normal cdf (the quantile function), elementwise (as
`scipy.special.ndtri`).

Examples
--------
>>> q = tt.tensor([0.5, 0.975], requires_grad=True)
>>> z = tt.scipy.special.ndtri(q)
>>> z
tensor([0.        , 1.95996398], requires_grad=True)
>>> z.sum().backward()
>>> q.grad                                    # 1 / phi(z)
array([ 2.50662827, 17.11008308])
"""
expit = _stands_for(sp.expit, ops.sigmoid)
logit = _stands_for(sp.logit, elementwise(sp.logit, "logit", lambda ans, x: 1 / (x * (1 - x))))
logit.__doc__ = """log(p / (1 - p)), the inverse of expit, elementwise (as `scipy.special.logit`).

Examples
--------
>>> p = tt.tensor([0.5, 0.8], requires_grad=True)
>>> y = tt.scipy.special.logit(p)
>>> y
tensor([0.        , 1.38629436], requires_grad=True)
>>> y.sum().backward()
>>> p.grad                                    # 1 / (p (1 - p))
array([4.  , 6.25])
"""

# ----- information theory ------------------------------------------------------------------------------
xlogy = _stands_for(sp.xlogy, defprim(
    sp.xlogy, "xlogy", vjp=[lambda g, ans, x, y: g * np.log(y), lambda g, ans, x, y: g * x / y],
    jvp=[lambda t, ans, x, y: t * np.log(y), lambda t, ans, x, y: t * x / y]))
xlogy.__doc__ = """x * log(y), 0 where x == 0 (as `scipy.special.xlogy`), differentiable in x and y
(the derivatives log(y) and x / y, so not finite at y == 0).

Examples
--------
>>> tt.scipy.special.xlogy(tt.tensor([0.0, 2.0]), tt.tensor([0.0, 3.0]))   # 0 log 0 = 0, 2 log 3
tensor([0.        , 2.19722458])
>>> x = tt.tensor([0.0, 2.0], requires_grad=True)
>>> y = tt.tensor([1.0, 3.0], requires_grad=True)
>>> tt.scipy.special.xlogy(x, y).sum().backward()
>>> x.grad, y.grad                            # log(y), x / y
(array([0.        , 1.09861229]), array([0.        , 0.66666667]))
"""
xlog1py = _stands_for(sp.xlog1py, defprim(
    sp.xlog1py, "xlog1py",
    vjp=[lambda g, ans, x, y: g * np.log1p(y), lambda g, ans, x, y: g * x / (1 + y)],
    jvp=[lambda t, ans, x, y: t * np.log1p(y), lambda t, ans, x, y: t * x / (1 + y)]))
xlog1py.__doc__ = """x * log1p(y), 0 where x == 0 (as `scipy.special.xlog1py`), differentiable in x and y
(the derivatives log1p(y) and x / (1 + y), so not finite at y == -1).

Examples
--------
>>> tt.scipy.special.xlog1py(tt.tensor([0.0, 2.0]), tt.tensor([-1.0, 1.0]))   # 0, 2 log 2
tensor([0.        , 1.38629436])
>>> x = tt.tensor([0.0, 2.0], requires_grad=True)
>>> y = tt.tensor([0.0, 1.0], requires_grad=True)
>>> tt.scipy.special.xlog1py(x, y).sum().backward()
>>> x.grad, y.grad                            # log1p(y), x / (1 + y)
(array([0.        , 0.69314718]), array([0., 1.]))
"""
entr = _stands_for(sp.entr, elementwise(sp.entr, "entr", lambda ans, x: -(np.log(x) + 1)))
entr.__doc__ = """-x log(x) elementwise, 0 at x = 0 and -inf below (as `scipy.special.entr`): summed over
a probability vector, its entropy.

Examples
--------
>>> p = tt.tensor([0.25, 0.75], requires_grad=True)
>>> h = tt.scipy.special.entr(p).sum()
>>> h                                         # the entropy in nats
tensor(0.56233514, requires_grad=True)
>>> h.backward()
>>> p.grad                                    # -(log p + 1)
array([ 0.38629436, -0.71231793])
"""


# ----- Bessel functions: the recurrences d/dx C_v = (C_{v-1} -+ C_{v+1}) / 2 ---------------------------
def _order_prim(ufunc, name, deriv):
    """A Bessel function of order v (static) in x: prim(x, v=v), deriv(ans, x, v)."""
    return defprim(lambda x, v: _float_like(ufunc(v, x), x), name, nargs=1,
                   vjp=[lambda g, ans, x, v: g * deriv(ans, x, v)],
                   jvp=[lambda t, ans, x, v: t * deriv(ans, x, v)])


_iv = _order_prim(sp.iv, "iv", lambda ans, x, v: 0.5 * (_iv(x, v=v - 1) + _iv(x, v=v + 1)))
_ive = _order_prim(sp.ive, "ive", lambda ans, x, v: 0.5 * (_ive(x, v=v - 1) + _ive(x, v=v + 1))
                   - _sign(x) * ans)
_jv = _order_prim(sp.jv, "jv", lambda ans, x, v: 0.5 * (_jv(x, v=v - 1) - _jv(x, v=v + 1)))
_yn = _order_prim(sp.yn, "yn", lambda ans, x, v: 0.5 * (_yn(x, v=v - 1) - _yn(x, v=v + 1)))


def _with_order(prim, name, what):
    def fun(v, x):
        v = _constant(name, what, v)
        return prim(x, v=np.asarray(v) if isinstance(v, (list, tuple)) else v)
    fun.__name__ = fun.__qualname__ = name      # the docstring, with an example, follows each row
    return fun


iv = _stands_for(sp.iv, _with_order(_iv, "iv", "v"))
iv.__doc__ = """The modified Bessel function of the first kind of real order v, I_v(x) (as
`scipy.special.iv`), differentiable in x; v is static.

Examples
--------
>>> x = tt.tensor([0.5, 2.0], requires_grad=True)
>>> y = tt.scipy.special.iv(2, x)
>>> y
tensor([0.03190615, 0.68894845], requires_grad=True)
>>> y.sum().backward()
>>> x.grad                          # (I_1 + I_3) / 2
array([0.13026971, 0.90168841])
"""
ive = _stands_for(sp.ive, _with_order(_ive, "ive", "v"))
ive.__doc__ = """The exponentially scaled I_v(x) exp(-|x|) (as `scipy.special.ive`), which does not
overflow for large x; differentiable in x, v is static.

Examples
--------
>>> x = tt.tensor([0.5, 2.0], requires_grad=True)
>>> y = tt.scipy.special.ive(2, x)
>>> y
tensor([0.01935206, 0.09323903], requires_grad=True)
>>> y.sum().backward()
>>> x.grad
array([0.05966051, 0.02879122])
"""
jv = _stands_for(sp.jv, _with_order(_jv, "jv", "v"))
jv.__doc__ = """The Bessel function of the first kind of real order v, J_v(x) (as `scipy.special.jv`),
differentiable in x; v is static.

Examples
--------
>>> x = tt.tensor([0.5, 2.0], requires_grad=True)
>>> y = tt.scipy.special.jv(2, x)
>>> y
tensor([0.03060402, 0.35283403], requires_grad=True)
>>> y.sum().backward()
>>> x.grad                          # (J_1 - J_3) / 2
array([0.11985236, 0.22389078])
"""
yn = _stands_for(sp.yn, _with_order(_yn, "yn", "n"))
yn.__doc__ = """The Bessel function of the second kind of integer order n, Y_n(x) (as
`scipy.special.yn`), differentiable in x; n is static.

Examples
--------
>>> x = tt.tensor([0.5, 2.0], requires_grad=True)
>>> y = tt.scipy.special.yn(2, x)
>>> y
tensor([-5.44137084, -0.6174081 ], requires_grad=True)
>>> y.sum().backward()
>>> x.grad                          # (Y_1 - Y_3) / 2
array([20.29401096,  0.51037567])
"""
i0 = _stands_for(sp.i0, elementwise(sp.i0, "i0", lambda ans, x: sp.i1(x)))
i0.__doc__ = """The modified Bessel function of the first kind of order 0 (as `scipy.special.i0`); its
derivative is i1.

Examples
--------
>>> x = tt.tensor([0.5, 2.0], requires_grad=True)
>>> y = tt.scipy.special.i0(x)
>>> y
tensor([1.06348337, 2.2795853 ], requires_grad=True)
>>> y.sum().backward()
>>> x.grad                          # i1(x)
array([0.25789431, 1.59063685])
"""
i1 = _stands_for(sp.i1, elementwise(sp.i1, "i1", lambda ans, x: 0.5 * (sp.i0(x) + _iv(x, v=2))))
i1.__doc__ = """The modified Bessel function of the first kind of order 1 (as `scipy.special.i1`).

Examples
--------
>>> x = tt.tensor([0.5, 2.0], requires_grad=True)
>>> y = tt.scipy.special.i1(x)
>>> y
tensor([0.25789431, 1.59063685], requires_grad=True)
>>> y.sum().backward()
>>> x.grad                          # (i0(x) + iv(2, x)) / 2
array([0.54769476, 1.48426688])
"""
i0e = _stands_for(sp.i0e, elementwise(sp.i0e, "i0e", lambda ans, x: sp.i1e(x) - _sign(x) * ans))
i0e.__doc__ = """The exponentially scaled i0(x) exp(-|x|) (as `scipy.special.i0e`).

Examples
--------
>>> x = tt.tensor([0.5, 2.0], requires_grad=True)
>>> y = tt.scipy.special.i0e(x)
>>> y
tensor([0.64503527, 0.30850832], requires_grad=True)
>>> y.sum().backward()
>>> x.grad                          # i1e(x) - sign(x) i0e(x)
array([-0.48861447, -0.09323903])
"""
i1e = _stands_for(sp.i1e, elementwise(sp.i1e, "i1e", lambda ans, x: 0.5 * (sp.i0e(x) + _ive(x, v=2))
                                      - _sign(x) * ans))
i1e.__doc__ = """The exponentially scaled i1(x) exp(-|x|) (as `scipy.special.i1e`).

Examples
--------
>>> x = tt.tensor([0.5, 2.0], requires_grad=True)
>>> y = tt.scipy.special.i1e(x)
>>> y
tensor([0.1564208 , 0.21526929], requires_grad=True)
>>> y.sum().backward()
>>> x.grad
array([ 0.17577286, -0.01439561])
"""
j0 = _stands_for(sp.j0, elementwise(sp.j0, "j0", lambda ans, x: -sp.j1(x)))
j0.__doc__ = """The Bessel function of the first kind of order 0 (as `scipy.special.j0`); its
derivative is -j1.

Examples
--------
>>> x = tt.tensor([0.5, 2.0], requires_grad=True)
>>> y = tt.scipy.special.j0(x)
>>> y
tensor([0.93846981, 0.22389078], requires_grad=True)
>>> y.sum().backward()
>>> x.grad                          # -j1(x)
array([-0.24226846, -0.57672481])
"""
j1 = _stands_for(sp.j1, elementwise(sp.j1, "j1", lambda ans, x: 0.5 * (sp.j0(x) - _jv(x, v=2))))
j1.__doc__ = """The Bessel function of the first kind of order 1 (as `scipy.special.j1`).

Examples
--------
>>> x = tt.tensor([0.5, 2.0], requires_grad=True)
>>> y = tt.scipy.special.j1(x)
>>> y
tensor([0.24226846, 0.57672481], requires_grad=True)
>>> y.sum().backward()
>>> x.grad                          # (j0(x) - jv(2, x)) / 2
array([ 0.45393289, -0.06447162])
"""
y0 = _stands_for(sp.y0, elementwise(sp.y0, "y0", lambda ans, x: -sp.y1(x)))
y0.__doc__ = """The Bessel function of the second kind of order 0 (as `scipy.special.y0`); its
derivative is -y1.

Examples
--------
>>> x = tt.tensor([0.5, 2.0], requires_grad=True)
>>> y = tt.scipy.special.y0(x)
>>> y
tensor([-0.44451873,  0.51037567], requires_grad=True)
>>> y.sum().backward()
>>> x.grad                          # -y1(x)
array([1.47147239, 0.10703243])
"""
y1 = _stands_for(sp.y1, elementwise(sp.y1, "y1", lambda ans, x: 0.5 * (sp.y0(x) - _yn(x, v=2))))
y1.__doc__ = """The Bessel function of the second kind of order 1 (as `scipy.special.y1`).

Examples
--------
>>> x = tt.tensor([0.5, 2.0], requires_grad=True)
>>> y = tt.scipy.special.y1(x)
>>> y
tensor([-1.47147239, -0.10703243], requires_grad=True)
>>> y.sum().backward()
>>> x.grad                          # (y0(x) - yn(2, x)) / 2
array([2.49842605, 0.56389189])
"""


# ----- composites: softplus, logsumexp with weights, softmax --------------------------------------------
def softplus(x):
    """log(1 + exp(x)), stable for any x (scipy.special.softplus); its derivative is expit(x).

    Examples
    --------
    >>> x = tt.tensor([-50.0, 0.0, 50.0], requires_grad=True)
    >>> y = tt.scipy.special.softplus(x)
    >>> y
    tensor([1.92874985e-22, 6.93147181e-01, 5.00000000e+01], requires_grad=True)
    >>> y.sum().backward()
    >>> x.grad
    array([1.92874985e-22, 5.00000000e-01, 1.00000000e+00])
    """
    return ew.softplus(x)


# the weighted form (b=, return_sign=) is the engine's own logsumexp (ops/core.py): one implementation
logsumexp = ops.logsumexp


def softmax(x, axis=None):
    """exp(x) / sum(exp(x)) over `axis` (scipy.special.softmax: all axes by default, where
    `tt.softmax` and PyTorch's take the last one).

    Examples
    --------
    >>> x = tt.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> tt.scipy.special.softmax(x)                   # over all four entries
    tensor([[0.0320586 , 0.08714432],
            [0.23688282, 0.64391426]])
    >>> tt.scipy.special.softmax(x, axis=1)           # each row sums to 1
    tensor([[0.26894142, 0.73105858],
            [0.26894142, 0.73105858]])
    """
    if axis is None:
        return np.exp(x - logsumexp(x))
    return ops.softmax(x, axis=axis)


def log_softmax(x, axis=None):
    """x - logsumexp(x) over `axis` (scipy.special.log_softmax: all axes by default).

    Examples
    --------
    >>> x = tt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    >>> y = tt.scipy.special.log_softmax(x)
    >>> y
    tensor([-2.40760596, -1.40760596, -0.40760596], requires_grad=True)
    >>> y[2].backward()
    >>> x.grad                                # one-hot minus softmax(x)
    array([-0.09003057, -0.24472847,  0.33475904])
    """
    if axis is None:
        return x - logsumexp(x)
    return ops.log_softmax(x, axis=axis)


__all__ += ["softplus", "logsumexp", "softmax", "log_softmax"]
