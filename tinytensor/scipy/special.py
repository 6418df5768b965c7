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
        return value.data
    return value


def _param_like(c, x):
    """A value computed from static parameters (betaln(a, b), gammaln(a)) in x's float dtype,
    so that a float32 x stays float32 (a NumPy float64 scalar would promote it)."""
    return np.asarray(c, dtype=x.dtype)


def _sign(x):
    return np.sign(x.data if isinstance(x, Tensor) else x)


# ----- gamma and beta functions -----------------------------------------------------------------
def _polygamma_forward(x, n):
    return _float_like(sp.polygamma(n, x), x)


_polygamma = defprim(_polygamma_forward, "polygamma", nargs=1,
                     vjp=[lambda g, ans, x, n: g * _polygamma(x, n=n + 1)],
                     jvp=[lambda t, ans, x, n: t * _polygamma(x, n=n + 1)])


def polygamma(n, x):
    """The n-th derivative of digamma (scipy.special.polygamma); n (integers) is static."""
    n = _constant("polygamma", "n", n)
    return _polygamma(x, n=np.asarray(n) if isinstance(n, (list, tuple)) else n)


__all__.append("polygamma")

gammaln = _stands_for(sp.gammaln, elementwise(sp.gammaln, "gammaln", lambda ans, x: sp.digamma(x)))
digamma = _stands_for(sp.digamma, elementwise(sp.digamma, "digamma", lambda ans, x: _polygamma(x, n=1)))
psi = _stands_for(sp.psi, digamma, "psi")          # the same ufunc object as digamma in SciPy
gamma = _stands_for(sp.gamma, elementwise(sp.gamma, "gamma", lambda ans, x: ans * sp.digamma(x)))
rgamma = _stands_for(sp.rgamma, elementwise(sp.rgamma, "rgamma", lambda ans, x: -ans * sp.digamma(x)))
nondifferentiable(sp.gammasgn)     # scipy.special.gammasgn(t): a plain array, as np.sign(t)


def gammasgn(x):
    """The sign of gamma(x) (scipy.special.gammasgn) on the values: piecewise constant, no gradient
    (a plain array, as np.sign(t))."""
    return sp.gammasgn(x.data if isinstance(x, Tensor) else x)


__all__.append("gammasgn")


def _beta_rule(which):   # d/da beta(a, b) = beta(a, b) (psi(a) - psi(a + b))
    return lambda g, ans, a, b: g * ans * (sp.digamma(a if which == 0 else b) - sp.digamma(a + b))


def _betaln_rule(which):
    return lambda g, ans, a, b: g * (sp.digamma(a if which == 0 else b) - sp.digamma(a + b))


beta = _stands_for(sp.beta, defprim(sp.beta, "beta", vjp=[_beta_rule(0), _beta_rule(1)],
                                    jvp=[_beta_rule(0), _beta_rule(1)]))
betaln = _stands_for(sp.betaln, defprim(sp.betaln, "betaln", vjp=[_betaln_rule(0), _betaln_rule(1)],
                                        jvp=[_betaln_rule(0), _betaln_rule(1)]))


def multigammaln(a, d):
    """log of the multivariate gamma function of dimension d (scipy.special.multigammaln):
    sum_j gammaln(a - j/2), j = 0..d-1, plus d(d-1)/4 log(pi). Needs a > (d - 1) / 2."""
    if int(d) != d or d < 1:
        raise ValueError(f"multigammaln: d must be a positive integer, got {d!r}")
    d = int(d)
    value = a.data if isinstance(a, Tensor) else np.asarray(a, dtype=float)
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
    """The regularised incomplete beta function I_x(a, b), differentiable in x only."""
    return _betainc(x, a=_constant("betainc", "a", a), b=_constant("betainc", "b", b))


def gammainc(a, x):
    """The regularised lower incomplete gamma function P(a, x), differentiable in x only."""
    return _gammainc(x, a=_constant("gammainc", "a", a))


def gammaincc(a, x):
    """The regularised upper incomplete gamma function Q(a, x) = 1 - P(a, x), in x only."""
    return _gammaincc(x, a=_constant("gammaincc", "a", a))


for _f, _u in ((betainc, sp.betainc), (gammainc, sp.gammainc), (gammaincc, sp.gammaincc)):
    _stands_for(_u, _f)

# ----- error functions and the normal distribution ----------------------------------------------------
erf = _stands_for(sp.erf, ew.erf)
erfc = _stands_for(sp.erfc, elementwise(sp.erfc, "erfc", lambda ans, x: -TWO_OVER_SQRT_PI * np.exp(-x * x)))
erfinv = _stands_for(sp.erfinv, elementwise(sp.erfinv, "erfinv",
                                            lambda ans, x: SQRT_PI_OVER_2 * np.exp(ans * ans)))
erfcinv = _stands_for(sp.erfcinv, elementwise(sp.erfcinv, "erfcinv",
                                              lambda ans, x: -SQRT_PI_OVER_2 * np.exp(ans * ans)))
ndtr = _stands_for(sp.ndtr, elementwise(sp.ndtr, "ndtr",
                                        lambda ans, x: ONE_OVER_SQRT_2PI * np.exp(-0.5 * (x * x))))
# log_ndtr' = phi(x) / Phi(x) = exp(-x^2/2 - log_ndtr(x)) / sqrt(2 pi): finite far into the tail
log_ndtr = _stands_for(sp.log_ndtr, elementwise(
    sp.log_ndtr, "log_ndtr", lambda ans, x: ONE_OVER_SQRT_2PI * np.exp(-0.5 * (x * x) - ans)))
ndtri = _stands_for(sp.ndtri, elementwise(sp.ndtri, "ndtri",
                                          lambda ans, x: SQRT_2PI * np.exp(0.5 * (ans * ans))))
expit = _stands_for(sp.expit, ops.sigmoid)
logit = _stands_for(sp.logit, elementwise(sp.logit, "logit", lambda ans, x: 1 / (x * (1 - x))))

# ----- information theory ------------------------------------------------------------------------------
xlogy = _stands_for(sp.xlogy, defprim(
    sp.xlogy, "xlogy", vjp=[lambda g, ans, x, y: g * np.log(y), lambda g, ans, x, y: g * x / y],
    jvp=[lambda t, ans, x, y: t * np.log(y), lambda t, ans, x, y: t * x / y]))
xlog1py = _stands_for(sp.xlog1py, defprim(
    sp.xlog1py, "xlog1py",
    vjp=[lambda g, ans, x, y: g * np.log1p(y), lambda g, ans, x, y: g * x / (1 + y)],
    jvp=[lambda t, ans, x, y: t * np.log1p(y), lambda t, ans, x, y: t * x / (1 + y)]))
entr = _stands_for(sp.entr, elementwise(sp.entr, "entr", lambda ans, x: -(np.log(x) + 1)))


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
    fun.__name__ = fun.__qualname__ = name
    fun.__doc__ = f"scipy.special.{name}({what}, x), differentiable in x ({what} is static)."
    return fun


iv = _stands_for(sp.iv, _with_order(_iv, "iv", "v"))
ive = _stands_for(sp.ive, _with_order(_ive, "ive", "v"))
jv = _stands_for(sp.jv, _with_order(_jv, "jv", "v"))
yn = _stands_for(sp.yn, _with_order(_yn, "yn", "n"))
i0 = _stands_for(sp.i0, elementwise(sp.i0, "i0", lambda ans, x: sp.i1(x)))
i1 = _stands_for(sp.i1, elementwise(sp.i1, "i1", lambda ans, x: 0.5 * (sp.i0(x) + _iv(x, v=2))))
i0e = _stands_for(sp.i0e, elementwise(sp.i0e, "i0e", lambda ans, x: sp.i1e(x) - _sign(x) * ans))
i1e = _stands_for(sp.i1e, elementwise(sp.i1e, "i1e", lambda ans, x: 0.5 * (sp.i0e(x) + _ive(x, v=2))
                                      - _sign(x) * ans))
j0 = _stands_for(sp.j0, elementwise(sp.j0, "j0", lambda ans, x: -sp.j1(x)))
j1 = _stands_for(sp.j1, elementwise(sp.j1, "j1", lambda ans, x: 0.5 * (sp.j0(x) - _jv(x, v=2))))
y0 = _stands_for(sp.y0, elementwise(sp.y0, "y0", lambda ans, x: -sp.y1(x)))
y1 = _stands_for(sp.y1, elementwise(sp.y1, "y1", lambda ans, x: 0.5 * (sp.y0(x) - _yn(x, v=2))))


# ----- composites: softplus, logsumexp with weights, softmax --------------------------------------------
def softplus(x):
    """log(1 + exp(x)), stable for any x (scipy.special.softplus)."""
    return ew.softplus(x)


# the weighted form (b=, return_sign=) is the engine's own logsumexp (ops/core.py): one implementation
logsumexp = ops.logsumexp


def softmax(x, axis=None):
    """exp(x) / sum(exp(x)) over `axis` (scipy.special.softmax: all axes by default)."""
    if axis is None:
        return np.exp(x - logsumexp(x))
    return ops.softmax(x, axis=axis)


def log_softmax(x, axis=None):
    """x - logsumexp(x) over `axis` (scipy.special.log_softmax: all axes by default)."""
    if axis is None:
        return x - logsumexp(x)
    return ops.log_softmax(x, axis=axis)


__all__ += ["softplus", "logsumexp", "softmax", "log_softmax", "expit", "logit", "erf"]
